/*
 * files.c - which files make up what `fennec analyze` was given: a named file and its
 * sibling process files of the same recording, every profile of a directory (several
 * recordings: the ranks of a job), or per-rank files beside a name that does not exist
 * (`run.fnc` -> `run.rank0.fnc`, ...). Orders them for the model: by rank, then each
 * recording's first process first, then by start time; keeps one recording per rank.
 */
#include "analyze/aggregate.h"

#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

/* A candidate file with what its header says. */
typedef struct cand {
	char *file;
	int named;            /* named by the user (not found in a directory or as a sibling) */
	uint64_t want_rec;    /* a sibling: the recording id of the file it is a sibling of; 0: any */
	fmt_file h;
	int ok;               /* header read */
} cand;

typedef struct cands {
	cand *v;
	size_t n, cap;
} cands;

static int add(cands *c, const char *dir, const char *name, int named, uint64_t want_rec)
{
	if (ana_grow(&c->v, &c->cap, c->n, sizeof *c->v) < 0)
		return FENNEC_ENOMEM;
	cand *x = &c->v[c->n];
	memset(x, 0, sizeof *x);
	if (dir) {
		size_t len = strlen(dir) + strlen(name) + 2;
		if ((x->file = malloc(len)))
			snprintf(x->file, len, "%s/%s", dir, name);
	} else
		x->file = strdup(name);
	if (!x->file)
		return FENNEC_ENOMEM;
	x->named = named;
	x->want_rec = want_rec;
	c->n++;
	return 0;
}

/* `name` is `base.<pid>.<n>`: a sibling process file. */
static int is_sibling_name(const char *base, const char *name)
{
	size_t n = strlen(base);
	if (strncmp(name, base, n) || name[n] != '.')
		return 0;
	const char *s = name + n + 1;
	int digits = 0, dots = 0;
	for (; *s; s++) {
		if (*s == '.') {
			if (!digits)
				return 0;
			dots++;
			digits = 0;
		} else if (*s >= '0' && *s <= '9')
			digits++;
		else
			return 0;
	}
	return dots == 1 && digits;
}

/* `name` is `stem.rank<N>ext`: a per-rank file of `stem` + `ext` (fennec record under mpirun). */
static int is_rank_name(const char *stem, const char *ext, const char *name)
{
	size_t n = strlen(stem);
	if (strncmp(name, stem, n) || strncmp(name + n, ".rank", 5))
		return 0;
	const char *s = name + n + 5;
	if (*s < '0' || *s > '9')
		return 0;
	while (*s >= '0' && *s <= '9')
		s++;
	return !strcmp(s, ext);
}

static int is_regular(const char *dir, const char *name)
{
	char full[4096];
	struct stat st;
	snprintf(full, sizeof full, "%s/%s", dir, name);
	return stat(full, &st) == 0 && S_ISREG(st.st_mode);
}

/* Every entry of directory `dir` that is a regular file, not hidden. */
static int add_dir(cands *c, const char *dir)
{
	DIR *d = opendir(dir);
	if (!d)
		return 0;
	struct dirent *e;
	int rc = 0;
	while (!rc && (e = readdir(d)))
		if (e->d_name[0] != '.' && !fmt_is_segment_name(e->d_name) && is_regular(dir, e->d_name))
			rc = add(c, dir, e->d_name, 0, 0);
	closedir(d);
	return rc;
}

/* The siblings `path.<pid>.<n>` of a named file, which must share its recording id. */
static int add_siblings(cands *c, const char *path, uint64_t rec)
{
	char *dcopy = strdup(path), *bcopy = strdup(path);
	int rc = dcopy && bcopy ? 0 : FENNEC_ENOMEM;
	const char *dir = rc ? NULL : dirname(dcopy); /* may point elsewhere than dcopy ("." ) */
	DIR *d = rc ? NULL : opendir(dir);
	if (d) {
		const char *base = basename(bcopy);
		struct dirent *e;
		while (!rc && (e = readdir(d)))
			if (is_sibling_name(base, e->d_name))
				rc = add(c, dir, e->d_name, 0, rec);
		closedir(d);
	}
	free(dcopy);
	free(bcopy);
	return rc;
}

/* A name that does not exist: the per-rank files `stem.rank<N>ext` beside it, as named
 * files. Returns how many, or FENNEC_ENOMEM. */
static int add_rank_files(cands *c, const char *path)
{
	char *dcopy = strdup(path), *bcopy = strdup(path);
	int rc = dcopy && bcopy ? 0 : FENNEC_ENOMEM, found = 0;
	const char *dir = rc ? NULL : dirname(dcopy);
	DIR *d = rc ? NULL : opendir(dir);
	if (d) {
		char *base = basename(bcopy), *dot = strrchr(base, '.');
		char ext[256] = "";
		if (dot && dot != base) {
			snprintf(ext, sizeof ext, "%s", dot);
			*dot = 0;
		}
		struct dirent *e;
		while (!rc && (e = readdir(d)))
			if (is_rank_name(base, ext, e->d_name) && is_regular(dir, e->d_name)) {
				rc = add(c, dir, e->d_name, 1, 0);
				found++;
			}
		closedir(d);
	}
	free(dcopy);
	free(bcopy);
	return rc ? rc : found;
}

static void cand_drop(cand *x)
{
	free(x->file);
	x->file = NULL;
	if (x->ok)
		fmt_file_free(&x->h);
	x->ok = 0;
}

/* Order: ranked recordings by rank, unranked after them by start; in a recording the first
 * process, then by start time. */
static int cmp_cand(const void *a, const void *b)
{
	const cand *x = a, *y = b;
	if (x->h.recording_id != y->h.recording_id) {
		int64_t rx = x->h.rank, ry = y->h.rank;
		if ((rx < 0) != (ry < 0))
			return rx < 0 ? 1 : -1;
		if (rx != ry)
			return rx < ry ? -1 : 1;
		/* unranked (or same rank): by the recording's start, then id */
		if (x->want_rec != y->want_rec) /* want_rec holds the recording's start here */
			return x->want_rec < y->want_rec ? -1 : 1;
		return x->h.recording_id < y->h.recording_id ? -1 : 1;
	}
	int fx = x->h.origin == FMT_ORIGIN_FIRST, fy = y->h.origin == FMT_ORIGIN_FIRST;
	if (fx != fy)
		return fy - fx;
	if (x->h.start_mono_ns != y->h.start_mono_ns)
		return x->h.start_mono_ns < y->h.start_mono_ns ? -1 : 1;
	return strcmp(x->file, y->file);
}

/* The first process of recording `rec` among the kept candidates (its rank and start
 * stand for the recording's), or NULL. */
static const cand *recording_head(const cands *c, uint64_t rec)
{
	const cand *best = NULL;
	for (size_t i = 0; i < c->n; i++) {
		const cand *x = &c->v[i];
		if (!x->ok || x->h.recording_id != rec)
			continue;
		if (!best || (x->h.origin == FMT_ORIGIN_FIRST && best->h.origin != FMT_ORIGIN_FIRST) ||
		    ((x->h.origin == FMT_ORIGIN_FIRST) == (best->h.origin == FMT_ORIGIN_FIRST) &&
		     x->h.start_real_ns < best->h.start_real_ns))
			best = x;
	}
	return best;
}

/* Two recordings of one rank: a directory that also holds an older run. Keep the newer.
 * The heads are found once: a job of a thousand ranks is a thousand recordings. */
static int one_recording_per_rank(cands *c, ana_profile *p)
{
	const cand **head = malloc((c->n ? c->n : 1) * sizeof *head);
	uint8_t *drop = calloc(c->n ? c->n : 1, 1);
	if (!head || !drop) {
		free(head);
		free(drop);
		return FENNEC_ENOMEM;
	}
	for (size_t i = 0; i < c->n; i++)
		head[i] = c->v[i].ok ? recording_head(c, c->v[i].h.recording_id) : NULL;
	for (size_t i = 0; i < c->n; i++) {
		const cand *hx = head[i];
		if (!hx || hx->h.rank < 0)
			continue;
		for (size_t j = 0; j < c->n; j++) {
			const cand *hy = head[j];
			if (!hy || hy->h.recording_id == hx->h.recording_id || hy->h.rank != hx->h.rank ||
			    hy->h.start_real_ns <= hx->h.start_real_ns)
				continue;
			ana_warn(p, "skipped %s: rank %lld is also recorded in %s, which started later (an older "
				    "run's file?)", c->v[i].file, (long long)hx->h.rank, hy->file);
			drop[i] = 1; /* below: the heads still point at live entries */
			break;
		}
	}
	for (size_t i = 0; i < c->n; i++)
		if (drop[i])
			cand_drop(&c->v[i]);
	free(head);
	free(drop);
	return 0;
}

/* Read the headers; a bad named file is the error, other bad files are warned about
 * (foreign files in a directory silently skipped). */
static int read_headers(cands *c, fmt_error *err, ana_profile *p)
{
	for (size_t i = 0; i < c->n; i++) {
		cand *x = &c->v[i];
		fmt_error e;
		int rc = fmt_read_header(x->file, &x->h, &e);
		if (rc == 0) {
			x->ok = 1;
			if (x->want_rec && x->h.recording_id != x->want_rec)
				cand_drop(x); /* another recording's process at the same path */
			continue;
		}
		fmt_file_free(&x->h);
		if (rc == FENNEC_ENOMEM || x->named) {
			*err = e;
			return rc;
		}
		if (x->want_rec || rc != FENNEC_EFOREIGN)
			ana_warn(p, "skipped %s", e.msg);
		cand_drop(x);
	}
	return 0;
}

/* The same process named twice (a file and its directory): keep the first. */
static void drop_duplicates(cands *c)
{
	for (size_t i = 0; i < c->n; i++)
		for (size_t j = 0; j < i && c->v[i].ok; j++)
			if (c->v[j].ok && c->v[j].h.recording_id == c->v[i].h.recording_id &&
			    c->v[j].h.pid == c->v[i].h.pid && c->v[j].h.start_mono_ns == c->v[i].h.start_mono_ns)
				cand_drop(&c->v[i]);
}

/* Expand the user's paths into candidates. */
static int gather(cands *c, const char *const *paths, size_t npaths, fmt_error *err)
{
	for (size_t k = 0; k < npaths; k++) {
		const char *path = paths[k];
		struct stat st;
		int rc;
		if (stat(path, &st) < 0) {
			int e = errno;
			if (e == ENOENT && (rc = add_rank_files(c, path)) != 0) {
				if (rc < 0)
					return rc;
				continue;
			}
			err->code = e == ENOENT ? FENNEC_ENOENT : FENNEC_EIO;
			snprintf(err->msg, sizeof err->msg, "%s: %s", path, strerror(e));
			return err->code;
		}
		rc = S_ISDIR(st.st_mode) ? add_dir(c, path) : add(c, NULL, path, 1, 0);
		if (rc)
			return rc;
	}
	return 0;
}

int ana_list_files(const char *const *paths, size_t npaths, char ***out, size_t *nout, fmt_error *err,
		   ana_profile *p)
{
	cands c = {0};
	int rc = gather(&c, paths, npaths, err);
	/* The named files' headers first: their siblings must share their recording id. */
	for (size_t i = 0, n = c.n; !rc && i < n; i++) {
		if (!c.v[i].named)
			continue;
		fmt_error e;
		fmt_file h;
		int r = fmt_read_header(c.v[i].file, &h, &e);
		if (r == 0)
			rc = add_siblings(&c, c.v[i].file, h.recording_id);
		fmt_file_free(&h);
	}
	if (!rc)
		rc = read_headers(&c, err, p);
	if (!rc) {
		drop_duplicates(&c);
		rc = one_recording_per_rank(&c, p);
	}
	if (!rc) {
		/* Sort keys of a recording: its head's rank and start (want_rec is free now). */
		for (size_t i = 0; i < c.n; i++)
			if (c.v[i].ok) {
				const cand *h = recording_head(&c, c.v[i].h.recording_id);
				c.v[i].want_rec = h->h.start_real_ns;
				c.v[i].h.rank = h->h.rank;
			}
		size_t k = 0;
		for (size_t i = 0; i < c.n; i++)
			if (c.v[i].ok)
				c.v[k++] = c.v[i];
		c.n = k;
		if (c.n) /* c.v is NULL for an empty folder: qsort(NULL, 0) is undefined */
			qsort(c.v, c.n, sizeof *c.v, cmp_cand);
		if (!c.n) {
			err->code = FENNEC_ENODATA;
			snprintf(err->msg, sizeof err->msg, "%s%s: no fennec profiles found", npaths ? paths[0] : "",
				 npaths > 1 ? " ..." : "");
			rc = err->code;
		}
	}
	char **files = rc ? NULL : malloc(c.n * sizeof *files);
	if (!rc && !files)
		rc = FENNEC_ENOMEM;
	for (size_t i = 0; i < c.n; i++) {
		if (!rc) {
			files[i] = c.v[i].file;
			c.v[i].file = NULL;
		}
		cand_drop(&c.v[i]);
	}
	free(c.v);
	if (rc)
		return rc;
	*out = files;
	*nout = c.n;
	return 0;
}

/*
 * metrics.c - live metrics for Prometheus (metrics.h, docs/prometheus.md). Each process
 * file of the recording has a follower (fmt_follow, src/format/reader.c) and the totals
 * its events add up to; a scrape first decodes what was written since the last one (under
 * one lock: scrapes take turns), then renders every file's totals. What is kept does not
 * grow with the run: per site, per thread (the open regions, at most MAX_DEPTH deep), per
 * GPU; the recent steps for items/s are a ring.
 */
#include "view/metrics.h"

#include <arpa/inet.h>
#include <ctype.h>
#include <errno.h>
#include <math.h>
#include <microhttpd.h>
#include <netinet/in.h>
#include <pthread.h>
#include <signal.h>
#include <stdint.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <sys/socket.h>
#include <unistd.h>

#include "common/lib.h"
#include "format/reader.h"
#include "view/http.h"

#define MAX_URL 256
#define MAX_CONNECTIONS 32
#define MAX_PER_CLIENT 8
#define MAX_FILES 4096 /* process files followed; more are left out (fennec_files_left_out) */
#define MAX_DEPTH 256  /* open regions kept per thread; deeper ones are counted, not timed */
#define MAX_GPUS 64
#define RECENT 64      /* steps kept for items/s */

#define MHD_FUNCS(X)                                                                                \
	X(MHD_start_daemon) X(MHD_stop_daemon) X(MHD_queue_response) X(MHD_destroy_response)        \
	X(MHD_create_response_from_buffer) X(MHD_add_response_header) X(MHD_lookup_connection_value)

CM_LIB_FUNCS(mhd, MHD_FUNCS)
static cm_lib mhd_lib = {"libmicrohttpd.so.12", "libmicrohttpd12", mhd_bind, 0, ""};

/* Step durations, seconds: the histogram's upper bounds (+Inf follows). */
static const double bounds[] = {0.001, 0.0025, 0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60};
#define NB (sizeof bounds / sizeof bounds[0])

typedef struct open_region {
	uint32_t id;
	uint64_t ticks;
} open_region;

typedef struct mthread {
	open_region *stack; /* MAX_DEPTH entries, allocated on first use */
	uint32_t depth;     /* open regions, also beyond MAX_DEPTH */
} mthread;

typedef struct msite {
	uint64_t region_ticks, calls; /* regions: inclusive time (outermost call of a recursion) */
	int64_t sum;                  /* counters */
	double last, vsum;            /* gauges and values: the last; values: their sum */
	uint64_t n;                   /* gauges and values: how many */
} msite;

typedef struct mgpu {
	int nvml;                     /* an NVML point was read */
	double sm_pct, mem_pct;
	uint64_t mem_used, mem_total;
	uint64_t kernel_ns, kernels;
} mgpu;

/* One process file and its totals. */
typedef struct mproc {
	char *path;
	fmt_follow *w;
	uint64_t gen;
	int seen;                     /* listed by the last scrape */
	uint64_t steps, items, step_hist[NB + 1];
	double step_sum_s;
	uint64_t last_step;           /* ticks of the last step mark (0: none yet) */
	int items_given;
	uint64_t recent_ticks[RECENT], recent_items[RECENT];
	uint32_t recent_n, recent_at;
	msite *sites;
	uint32_t nsites;
	mthread *threads;
	uint32_t nthreads;
	int has_heap, has_sys;
	uint64_t heap_live, heap_rss, sys_rss;
	uint64_t sys_cpu_user_ns, sys_cpu_sys_ns;
	mgpu gpus[MAX_GPUS];
	uint32_t ngpus;
	int oom;
	unsigned exec_n;              /* files before this one of the same process (execs) */
} mproc;

struct view_metrics {
	struct MHD_Daemon *d;
	int fd;
	unsigned port;
	int loopback;
	char bound[INET6_ADDRSTRLEN + 2];
	char *path;
	pthread_mutex_t lock; /* everything below; one scrape at a time */
	mproc *procs;
	uint32_t nprocs, cap;
	uint64_t left_out, scrapes, errors;
};

/* ---- the totals ---- */

static void proc_reset(mproc *m)
{
	for (uint32_t i = 0; i < m->nthreads; i++)
		free(m->threads[i].stack);
	free(m->threads);
	free(m->sites);
	char *path = m->path;
	fmt_follow *w = m->w;
	memset(m, 0, sizeof *m);
	m->path = path;
	m->w = w;
}

static int grow(void **a, uint32_t *n, uint32_t want, size_t elem)
{
	if (want <= *n)
		return 0;
	uint32_t c = *n ? *n : 16;
	while (c < want)
		c *= 2;
	void *p = realloc(*a, (size_t)c * elem);
	if (!p)
		return -1;
	memset((char *)p + (size_t)*n * elem, 0, (size_t)(c - *n) * elem);
	*a = p;
	*n = c;
	return 0;
}

static msite *site(mproc *m, uint32_t id)
{
	if (id >= FMT_MAX_SITE_ID || grow((void **)&m->sites, &m->nsites, id + 1, sizeof *m->sites) < 0) {
		m->oom |= id < FMT_MAX_SITE_ID;
		return NULL;
	}
	return &m->sites[id];
}

static int on_event(void *ctx, const fmt_file *f, const fmt_event *ev)
{
	mproc *m = ctx;
	if (fmt_follow_generation(m->w) != m->gen) { /* another recording at the path */
		uint64_t g = fmt_follow_generation(m->w);
		proc_reset(m);
		m->gen = g;
	}
	switch (ev->type) {
	case FMT_EV_BEGIN:
	case FMT_EV_END: {
		if (grow((void **)&m->threads, &m->nthreads, ev->thread + 1, sizeof *m->threads) < 0) {
			m->oom = 1;
			return 0;
		}
		mthread *t = &m->threads[ev->thread];
		if (ev->type == FMT_EV_BEGIN) {
			if (t->depth < MAX_DEPTH) {
				if (!t->stack && !(t->stack = malloc(MAX_DEPTH * sizeof *t->stack))) {
					m->oom = 1;
					return 0;
				}
				t->stack[t->depth] = (open_region){ev->id, ev->ticks};
			}
			t->depth++;
			msite *s = site(m, ev->id);
			if (s)
				s->calls++;
		} else if (t->depth) {
			t->depth--;
			if (t->depth < MAX_DEPTH) {
				open_region o = t->stack[t->depth];
				int inner = 0; /* a recursive call: its time is in the outer one's */
				for (uint32_t k = 0; k < t->depth && !inner; k++)
					inner = t->stack[k].id == o.id;
				msite *s = inner ? NULL : site(m, o.id);
				if (s && ev->ticks > o.ticks)
					s->region_ticks += ev->ticks - o.ticks;
			}
		}
		break;
	}
	case FMT_EV_STEP: {
		if (m->last_step && ev->ticks >= m->last_step) {
			double s = fmt_dticks_to_ns(f, ev->ticks - m->last_step) / 1e9;
			m->steps++;
			m->step_sum_s += s;
			size_t b = 0;
			while (b < NB && s > bounds[b])
				b++;
			m->step_hist[b]++;
			if (ev->flags & 2) {
				m->items += ev->u;
				m->items_given = 1;
			}
			m->recent_ticks[m->recent_at] = ev->ticks;
			m->recent_items[m->recent_at] = ev->flags & 2 ? ev->u : 0;
			m->recent_at = (m->recent_at + 1) % RECENT;
			if (m->recent_n < RECENT)
				m->recent_n++;
		}
		m->last_step = ev->ticks ? ev->ticks : 1;
		break;
	}
	case FMT_EV_COUNTER: {
		msite *s = site(m, ev->id);
		if (s)
			s->sum += ev->i;
		break;
	}
	case FMT_EV_GAUGE:
	case FMT_EV_VALUE: {
		msite *s = site(m, ev->id);
		if (s) {
			s->last = ev->f;
			s->n++;
			s->vsum += ev->f;
		}
		break;
	}
	case FMT_EV_HEAP_SNAP:
		m->has_heap = 1;
		m->heap_live = ev->heap[0];
		m->heap_rss = ev->heap[1];
		break;
	case FMT_EV_SYS: {
		const fmt_sys *y = ev->sys;
		m->has_sys = 1;
		if (y->present & (1ull << FMT_SY_RSS))
			m->sys_rss = y->v[FMT_SY_RSS];
		if (y->present & (1ull << FMT_SY_CPU_USER_NS))
			m->sys_cpu_user_ns = y->v[FMT_SY_CPU_USER_NS];
		if (y->present & (1ull << FMT_SY_CPU_SYS_NS))
			m->sys_cpu_sys_ns = y->v[FMT_SY_CPU_SYS_NS];
		break;
	}
	case FMT_EV_GPU: {
		const fmt_gpu *g = ev->gpu;
		if (g->device >= MAX_GPUS || (g->type != FMT_GR_NVML && g->type != FMT_GR_KERNEL))
			break;
		mgpu *d = &m->gpus[g->device];
		if (g->device >= m->ngpus)
			m->ngpus = g->device + 1;
		if (g->type == FMT_GR_KERNEL) {
			d->kernels++;
			if (g->end_ns > g->start_ns)
				d->kernel_ns += g->end_ns - g->start_ns;
		} else {
			d->nvml = 1;
			if (g->value & (1ull << FMT_NV_SM_PCT))
				d->sm_pct = (double)g->nvml[FMT_NV_SM_PCT];
			if (g->value & (1ull << FMT_NV_MEM_PCT))
				d->mem_pct = (double)g->nvml[FMT_NV_MEM_PCT];
			if (g->value & (1ull << FMT_NV_MEM_USED))
				d->mem_used = g->nvml[FMT_NV_MEM_USED];
			if (g->value & (1ull << FMT_NV_MEM_TOTAL))
				d->mem_total = g->nvml[FMT_NV_MEM_TOTAL];
		}
		break;
	}
	default: break;
	}
	return 0;
}

/* Read what is new in every file of the recording (files found since are added). */
static void refresh(view_metrics *s)
{
	const char *paths[1] = {s->path};
	char **files = NULL;
	size_t n = 0;
	fmt_error err;
	ana_profile p;
	memset(&p, 0, sizeof p);
	if (ana_list_files(paths, 1, &files, &n, &err, &p) != 0)
		n = 0;
	ana_profile_free(&p);
	for (uint32_t i = 0; i < s->nprocs; i++)
		s->procs[i].seen = 0;
	for (size_t i = 0; i < n; i++) {
		uint32_t k = 0;
		while (k < s->nprocs && strcmp(s->procs[k].path, files[i]))
			k++;
		if (k == s->nprocs) {
			if (s->nprocs >= MAX_FILES) {
				s->left_out++;
				free(files[i]);
				continue;
			}
			if (s->nprocs == s->cap) {
				uint32_t c = s->cap ? 2 * s->cap : 8;
				mproc *v = realloc(s->procs, c * sizeof *v);
				if (!v) {
					free(files[i]);
					continue;
				}
				s->procs = v;
				s->cap = c;
			}
			mproc *m = &s->procs[s->nprocs];
			memset(m, 0, sizeof *m);
			m->path = files[i];
			files[i] = NULL;
			if (!(m->w = fmt_follow_new(m->path))) {
				free(m->path);
				continue;
			}
			s->nprocs++;
		}
		free(files[i]);
		mproc *m = &s->procs[k];
		m->seen = 1;
		fmt_error fe;
		int rc = fmt_follow_poll(m->w, on_event, m, &fe);
		if (fmt_follow_generation(m->w) != m->gen) {
			/* another recording at the path, with no events yet: its totals start
			 * again (a counter reset; on_event does the same) */
			uint64_t g = fmt_follow_generation(m->w);
			proc_reset(m);
			m->gen = g;
		}
		if (rc && rc != FENNEC_ENOENT)
			s->errors++;
	}
	free(files);
	/* A process that exec'd has a file per program, all with its pid: they are told apart
	 * by how many came before (in the order first seen: by start time). */
	for (uint32_t i = 0; i < s->nprocs; i++) {
		const fmt_file *f = s->procs[i].seen ? fmt_follow_file(s->procs[i].w) : NULL;
		s->procs[i].exec_n = 0;
		for (uint32_t j = 0; f && j < i; j++) {
			const fmt_file *g = s->procs[j].seen ? fmt_follow_file(s->procs[j].w) : NULL;
			if (g && g->pid == f->pid && g->rank == f->rank && !strcmp(g->host ? g->host : "", f->host ? f->host : ""))
				s->procs[i].exec_n++;
		}
	}
}

/* ---- rendering ---- */

/* The labels of a process, for a series: pid, exec (the programs it ran before this one,
 * when any), rank (of a job), host. */
static void proc_labels(FILE *out, const fmt_file *f, const mproc *m)
{
	fprintf(out, "pid=\"%llu\"", (unsigned long long)f->pid);
	if (m->exec_n) /* a program the process exec'd: the same pid as the one before */
		fprintf(out, ",exec=\"%u\"", m->exec_n);
	if (f->rank >= 0)
		fprintf(out, ",rank=\"%lld\"", (long long)f->rank);
	fputs(",host=\"", out);
	for (const char *c = f->host ? f->host : ""; *c; c++) {
		if (*c == '\\' || *c == '"')
			fputc('\\', out);
		if (*c == '\n')
			fputs("\\n", out);
		else
			fputc(*c, out);
	}
	fputc('"', out);
}

/* A label value: escaped backslash, quote and newline; other control bytes dropped. */
static void label_value(FILE *out, const char *v)
{
	for (const unsigned char *c = (const unsigned char *)(v ? v : ""); *c; c++) {
		if (*c == '\\' || *c == '"')
			fprintf(out, "\\%c", *c);
		else if (*c == '\n')
			fputs("\\n", out);
		else if (*c >= 0x20 && *c != 0x7f)
			fputc(*c, out);
	}
}

static void value(FILE *out, double v)
{
	if (isnan(v))
		fputs("NaN", out);
	else if (isinf(v))
		fputs(v > 0 ? "+Inf" : "-Inf", out);
	else {
		/* the shortest form that reads back as v */
		char b[40];
		snprintf(b, sizeof b, "%.15g", v);
		if (strtod(b, NULL) != v)
			snprintf(b, sizeof b, "%.17g", v);
		fputs(b, out);
	}
}

/* A program's metric name as a Prometheus one: snake_case of [a-z0-9_], an underscore
 * before a capital that follows a small letter or digit ("trainLoss" -> "train_loss"),
 * every other byte an underscore, runs of them one, none at the ends; "unnamed" if
 * nothing is left. A counter's trailing "_total" is dropped (fennec adds it). */
static void sanitise(const char *in, char *out, size_t size, int counter)
{
	size_t n = 0;
	int prev_lower = 0;
	for (const unsigned char *c = (const unsigned char *)(in ? in : ""); *c && n + 2 < size; c++) {
		int ch = *c;
		if (isupper(ch) && prev_lower && n && out[n - 1] != '_')
			out[n++] = '_';
		if (isalnum(ch) && ch < 128) {
			out[n++] = (char)tolower(ch);
			prev_lower = islower(ch) || isdigit(ch);
		} else {
			if (n && out[n - 1] != '_')
				out[n++] = '_';
			prev_lower = 0;
		}
	}
	while (n && out[n - 1] == '_')
		n--;
	out[n] = 0;
	if (counter && n > 6 && !strcmp(out + n - 6, "_total"))
		out[n - 6] = 0;
	else if (counter && !strcmp(out, "total"))
		out[0] = 0;
	if (!out[0])
		snprintf(out, size, "unnamed");
}

typedef struct fam {
	const char *name, *type, *help;
} fam;

/* The family's HELP and TYPE lines. In OpenMetrics a counter's family drops "_total". */
static void family(FILE *out, int om, const char *name, const char *type, const char *help)
{
	size_t n = strlen(name);
	int cut = om && !strcmp(type, "counter") && n > 6 && !strcmp(name + n - 6, "_total");
	fprintf(out, "# HELP %.*s ", (int)(cut ? n - 6 : n), name);
	for (const char *c = help; *c; c++) {
		if (*c == '\\')
			fputs("\\\\", out);
		else if (*c == '\n')
			fputs("\\n", out);
		else if (om && *c == '"')
			fputs("\\\"", out);
		else
			fputc(*c, out);
	}
	fprintf(out, "\n# TYPE %.*s %s\n", (int)(cut ? n - 6 : n), name, type);
}

/* The files that have a HEADER, in order. */
static const fmt_file *pf(const view_metrics *s, uint32_t i)
{
	return s->procs[i].w && s->procs[i].seen ? fmt_follow_file(s->procs[i].w) : NULL;
}

/* One series per process of a per-process number. */
#define PER_PROC(cond, expr)                                        \
	for (uint32_t i = 0; i < s->nprocs; i++) {                  \
		const fmt_file *f = pf(s, i);                       \
		const mproc *m = &s->procs[i];                      \
		(void)m;                                            \
		if (!f || !(cond))                                  \
			continue;                                   \
		fprintf(out, "%s{", name);                          \
		proc_labels(out, f, m);                                \
		fputs("} ", out);                                   \
		value(out, (double)(expr));                         \
		fputc('\n', out);                                   \
	}

static int any(const view_metrics *s, int (*pred)(const mproc *, const fmt_file *))
{
	for (uint32_t i = 0; i < s->nprocs; i++)
		if (pf(s, i) && pred(&s->procs[i], pf(s, i)))
			return 1;
	return 0;
}

static int p_always(const mproc *m, const fmt_file *f) { (void)m; (void)f; return 1; }
static int p_items(const mproc *m, const fmt_file *f) { (void)f; return m->items_given; }
static int p_heap(const mproc *m, const fmt_file *f) { (void)f; return m->has_heap; }
static int p_rss(const mproc *m, const fmt_file *f) { (void)f; return m->has_heap || m->has_sys; }
static int p_gpu(const mproc *m, const fmt_file *f) { (void)f; return m->ngpus > 0; }

static double items_per_s(const mproc *m, const fmt_file *f)
{
	if (m->recent_n < 2)
		return 0;
	uint32_t newest = (m->recent_at + RECENT - 1) % RECENT;
	uint32_t oldest = (m->recent_at + RECENT - m->recent_n) % RECENT;
	uint64_t items = 0;
	for (uint32_t k = 1; k < m->recent_n; k++) /* the steps after the oldest mark */
		items += m->recent_items[(oldest + k) % RECENT];
	double secs = fmt_dticks_to_ns(f, m->recent_ticks[newest] - m->recent_ticks[oldest]) / 1e9;
	return secs > 0 ? (double)items / secs : 0;
}

static uint64_t dropped(const fmt_file *f)
{
	uint64_t d = 0;
	for (uint32_t t = 0; t < f->nthreads; t++)
		if (f->threads[t].known)
			d += f->threads[t].dropped;
	return d;
}

/* The program's metrics of one kind: one family per sanitised name, a series per process
 * and original name (label `name`). A name another kind took gets "_2" (then "_3"...). */
/* Family and sample names given out so far in one rendering: a program's names of
 * different kinds must not meet ("x" a counter and "x_total" a gauge; in OpenMetrics a
 * counter x and a gauge x), or a scraper refuses the whole exposition. */
typedef struct taken {
	char **v;
	uint32_t n, cap;
} taken;

static int is_taken(const taken *t, const char *name)
{
	for (uint32_t i = 0; i < t->n; i++)
		if (!strcmp(t->v[i], name))
			return 1;
	return 0;
}

static void take(taken *t, const char *name)
{
	if (grow((void **)&t->v, &t->cap, t->n + 1, sizeof *t->v) == 0 && (t->v[t->n] = strdup(name)))
		t->n++;
}

/* The names a program metric of `kind` with this stem gives out (at most 4). */
static int stem_names(unsigned kind, const char *stem, char out[4][224])
{
	static const char *const sfx[4][4] = {{0}, {"", "_total"}, {""}, {"_last", "_values", "_values_sum", "_values_count"}};
	int n = kind == FMT_SITE_COUNTER ? 2 : kind == FMT_SITE_GAUGE ? 1 : 4;
	for (int i = 0; i < n; i++)
		snprintf(out[i], 224, "fennec_program_%s%s", stem, sfx[kind][i]);
	return n;
}

static void program_metrics(view_metrics *s, FILE *out, int om, unsigned kind, taken *used)
{
	static const char *const what[] = {"", "counter", "gauge", "value"};
	/* the distinct sanitised names, in order of first sight */
	char **names = NULL;
	uint32_t nnames = 0, cap = 0;
	for (uint32_t i = 0; i < s->nprocs; i++) {
		const fmt_file *f = pf(s, i);
		const mproc *m = &s->procs[i];
		for (uint32_t id = 0; f && id < f->nsites && id < m->nsites; id++) {
			if (!f->sites[id].defined || f->sites[id].kind != kind || (!m->sites[id].n && kind != FMT_SITE_COUNTER))
				continue;
			char nm[160];
			sanitise(f->sites[id].name, nm, sizeof nm, kind == FMT_SITE_COUNTER);
			uint32_t k = 0;
			while (k < nnames && strcmp(names[k], nm))
				k++;
			if (k < nnames)
				continue;
			if (grow((void **)&names, &cap, nnames + 1, sizeof *names) < 0)
				goto done;
			if (!(names[nnames] = strdup(nm)))
				goto done;
			nnames++;
		}
	}
	for (uint32_t k = 0; k < nnames; k++) {
		char fname[224], help[320], stem[180], given[4][224];
		/* a stem no other kind took: NAME, else NAME_2, NAME_3, ... */
		snprintf(stem, sizeof stem, "%s", names[k]);
		for (unsigned alt = 2;; alt++) {
			int n = stem_names(kind, stem, given), clash = 0;
			for (int i = 0; i < n; i++)
				clash |= is_taken(used, given[i]);
			if (!clash || alt > 1000) {
				for (int i = 0; i < n; i++)
					take(used, given[i]);
				break;
			}
			snprintf(stem, sizeof stem, "%s_%u", names[k], alt);
		}
		/* counter: fennec_program_NAME_total; gauge: fennec_program_NAME; value: the
		 * last observation fennec_program_NAME_last, and the summary (no quantiles)
		 * fennec_program_NAME_values: _sum and _count */
		const char *suffix = kind == FMT_SITE_COUNTER ? "_total" : kind == FMT_SITE_VALUE ? "_last" : "";
		snprintf(fname, sizeof fname, "fennec_program_%s%s", stem, suffix);
		snprintf(help, sizeof help, "The program's %s %s (fennec_%s; the original name is in label name)",
			 what[kind], names[k], kind == FMT_SITE_COUNTER ? "counter_add" : kind == FMT_SITE_GAUGE ? "gauge_set"
											: "value_record");
		for (int part = 0; part < (kind == FMT_SITE_VALUE ? 2 : 1); part++) {
			const char *type = kind == FMT_SITE_COUNTER ? "counter" : "gauge";
			if (part == 1) { /* a summary without quantiles: _sum and _count */
				snprintf(fname, sizeof fname, "fennec_program_%s_values", stem);
				type = "summary";
			}
			family(out, om, fname, type, help);
			for (uint32_t i = 0; i < s->nprocs; i++) {
				const fmt_file *f = pf(s, i);
				const mproc *m = &s->procs[i];
				for (uint32_t id = 0; f && id < f->nsites && id < m->nsites; id++) {
					if (!f->sites[id].defined || f->sites[id].kind != kind)
						continue;
					const msite *x = &m->sites[id];
					if (!x->n && kind != FMT_SITE_COUNTER)
						continue;
					char nm[160];
					sanitise(f->sites[id].name, nm, sizeof nm, kind == FMT_SITE_COUNTER);
					if (strcmp(nm, names[k]))
						continue;
					for (int j = 0; j < (part ? 2 : 1); j++) {
						fprintf(out, "%s%s{", fname, part ? (j ? "_count" : "_sum") : "");
						proc_labels(out, f, m);
						fputs(",name=\"", out);
						label_value(out, f->sites[id].name);
						fputs("\"} ", out);
						value(out, kind == FMT_SITE_COUNTER ? (double)x->sum : part == 0 ? x->last
										: j ? (double)x->n : x->vsum);
						fputc('\n', out);
					}
				}
			}
		}
	}
done:
	for (uint32_t k = 0; k < nnames; k++)
		free(names[k]);
	free(names);
}

static void render(view_metrics *s, FILE *out, int om)
{
	const char *name;
#define FAMILY(n, type, help) (name = (n), family(out, om, name, type, help))
	if (any(s, p_always)) {
		FAMILY("fennec_steps_total", "counter", "Steps completed (fennec_step marks after the first)");
		PER_PROC(1, m->steps);
		FAMILY("fennec_step_duration_seconds", "histogram", "Duration of a step, from one step mark to the next");
		for (uint32_t i = 0; i < s->nprocs; i++) {
			const fmt_file *f = pf(s, i);
			const mproc *m = &s->procs[i];
			if (!f)
				continue;
			uint64_t cum = 0;
			for (size_t b = 0; b <= NB; b++) {
				cum += m->step_hist[b];
				fprintf(out, "%s_bucket{", name);
				proc_labels(out, f, m);
				if (b < NB)
					fprintf(out, ",le=\"%g%s\"} %llu\n", bounds[b], om && bounds[b] == floor(bounds[b]) ? ".0" : "",
						(unsigned long long)cum);
				else
					fprintf(out, ",le=\"+Inf\"} %llu\n", (unsigned long long)cum);
			}
			fprintf(out, "%s_sum{", name);
			proc_labels(out, f, m);
			fputs("} ", out);
			value(out, m->step_sum_s);
			fprintf(out, "\n%s_count{", name);
			proc_labels(out, f, m);
			fprintf(out, "} %llu\n", (unsigned long long)m->steps);
		}
	}
	if (any(s, p_items)) {
		FAMILY("fennec_items_total", "counter", "Items the steps processed (fennec_step_items)");
		PER_PROC(m->items_given, m->items);
		FAMILY("fennec_items_per_second", "gauge", "Items per second over the last 64 steps");
		PER_PROC(m->items_given, items_per_s(m, f));
	}
	/* regions */
	int regions = 0;
	for (uint32_t i = 0; i < s->nprocs && !regions; i++)
		for (uint32_t id = 0; pf(s, i) && id < pf(s, i)->nsites && id < s->procs[i].nsites && !regions; id++)
			regions = pf(s, i)->sites[id].defined && pf(s, i)->sites[id].kind == FMT_SITE_REGION &&
				  s->procs[i].sites[id].calls;
	for (int part = 0; regions && part < 2; part++) {
		if (part == 0)
			FAMILY("fennec_region_seconds_total", "counter",
			       "Time in a region, from its begin to its end on its thread (a recursive call counts once)");
		else
			FAMILY("fennec_region_calls_total", "counter", "Calls of a region (begins)");
		for (uint32_t i = 0; i < s->nprocs; i++) {
			const fmt_file *f = pf(s, i);
			const mproc *m = &s->procs[i];
			for (uint32_t id = 0; f && id < f->nsites && id < m->nsites; id++) {
				if (!f->sites[id].defined || f->sites[id].kind != FMT_SITE_REGION || !m->sites[id].calls)
					continue;
				fprintf(out, "%s{", name);
				proc_labels(out, f, m);
				fputs(",region=\"", out);
				label_value(out, f->sites[id].name);
				fputs("\"} ", out);
				if (part == 0)
					value(out, fmt_dticks_to_ns(f, m->sites[id].region_ticks) / 1e9);
				else
					fprintf(out, "%llu", (unsigned long long)m->sites[id].calls);
				fputc('\n', out);
			}
		}
	}
	if (any(s, p_heap)) {
		FAMILY("fennec_heap_live_bytes", "gauge", "Heap bytes allocated and not yet freed (latest heap point)");
		PER_PROC(m->has_heap, m->heap_live);
	}
	if (any(s, p_rss)) {
		FAMILY("fennec_resident_memory_bytes", "gauge", "Resident set size of the process (latest point)");
		PER_PROC(m->has_heap || m->has_sys, m->has_sys && m->sys_rss ? m->sys_rss : m->heap_rss);
	}
	if (any(s, p_always)) {
		FAMILY("fennec_cpu_seconds_total", "counter", "CPU time of the process in the session, by mode");
		for (int mode = 0; mode < 2; mode++)
			for (uint32_t i = 0; i < s->nprocs; i++) {
				const fmt_file *f = pf(s, i);
				const mproc *m = &s->procs[i];
				if (!f)
					continue;
				/* the latest of the last STATS chunk and the system sampler's point */
				uint64_t st = mode ? f->cpu_sys_ns : f->cpu_user_ns;
				uint64_t sy = mode ? m->sys_cpu_sys_ns : m->sys_cpu_user_ns;
				uint64_t base = mode ? f->cpu_start_sys_ns : f->cpu_start_user_ns;
				uint64_t v = sy > base && sy - base > st ? sy - base : st;
				fprintf(out, "%s{", name);
				proc_labels(out, f, m);
				fprintf(out, ",mode=\"%s\"} ", mode ? "system" : "user");
				value(out, (double)v / 1e9);
				fputc('\n', out);
			}
		FAMILY("fennec_dropped_events_total", "counter",
		       "Events the collector dropped (its buffers were full), as of the last flush");
		PER_PROC(1, dropped(f));
		FAMILY("fennec_samples_dropped_total", "counter", "Call-stack samples the collector dropped");
		PER_PROC(1, f->samples_dropped);
		FAMILY("fennec_recording_bytes", "gauge", "Bytes of the process file decoded so far");
		PER_PROC(1, fmt_follow_offset(m->w));
		FAMILY("fennec_recording_ended", "gauge", "1 once the process file has its END chunk (the process ended)");
		PER_PROC(1, f->has_end);
	}
	taken used = {0};
	program_metrics(s, out, om, FMT_SITE_COUNTER, &used);
	program_metrics(s, out, om, FMT_SITE_GAUGE, &used);
	program_metrics(s, out, om, FMT_SITE_VALUE, &used);
	for (uint32_t i = 0; i < used.n; i++)
		free(used.v[i]);
	free(used.v);
	if (any(s, p_gpu)) {
		static const char *const gname[] = {"fennec_gpu_utilization_ratio", "fennec_gpu_memory_utilization_ratio",
						     "fennec_gpu_memory_used_bytes", "fennec_gpu_memory_total_bytes",
						     "fennec_gpu_kernel_seconds_total", "fennec_gpu_kernels_total"};
		static const char *const ghelp[] = {
			"Fraction of time a kernel ran on the GPU (NVML, latest point)",
			"Fraction of time GPU memory was read or written (NVML, latest point)",
			"GPU memory in use (NVML, latest point)", "GPU memory (NVML)",
			"Time GPU kernels of the process ran (CUPTI)", "GPU kernels of the process that ran (CUPTI)"};
		for (int g = 0; g < 6; g++) {
			FAMILY(gname[g], g >= 4 ? "counter" : "gauge", ghelp[g]);
			for (uint32_t i = 0; i < s->nprocs; i++) {
				const fmt_file *f = pf(s, i);
				const mproc *m = &s->procs[i];
				for (uint32_t d = 0; f && d < m->ngpus; d++) {
					const mgpu *x = &m->gpus[d];
					if ((g < 4 && !x->nvml) || (g >= 4 && !x->kernels))
						continue;
					double v = g == 0 ? x->sm_pct / 100 : g == 1 ? x->mem_pct / 100 : g == 2 ? (double)x->mem_used
						 : g == 3 ? (double)x->mem_total : g == 4 ? (double)x->kernel_ns / 1e9 : (double)x->kernels;
					fprintf(out, "%s{", name);
					proc_labels(out, f, m);
					fprintf(out, ",gpu=\"%u\"} ", d);
					value(out, v);
					fputc('\n', out);
				}
			}
		}
	}
	FAMILY("fennec_processes", "gauge", "Process files of the recording being followed");
	fprintf(out, "%s %u\n", name, s->nprocs);
	FAMILY("fennec_metrics_read_errors_total", "counter",
	       "Scrapes that met a file fennec could not decode (fennec analyze says why)");
	fprintf(out, "%s %llu\n", name, (unsigned long long)s->errors);
	if (om)
		fputs("# EOF\n", out);
#undef FAMILY
}

int view_metrics_render(view_metrics *s, FILE *out, int openmetrics)
{
	pthread_mutex_lock(&s->lock);
	refresh(s);
	s->scrapes++;
	render(s, out, openmetrics);
	pthread_mutex_unlock(&s->lock);
	return ferror(out) ? FENNEC_ENOMEM : 0;
}

/* ---- requests ---- */

static enum MHD_Result respond(struct MHD_Connection *c, unsigned status, char *body, size_t len, const char *type,
			    enum MHD_ResponseMemoryMode mode)
{
	struct MHD_Response *r = mhd.MHD_create_response_from_buffer(len, body, mode);
	if (!r) {
		if (mode == MHD_RESPMEM_MUST_FREE)
			free(body);
		return MHD_NO;
	}
	mhd.MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	mhd.MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	mhd.MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		mhd.MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	enum MHD_Result ok = mhd.MHD_queue_response(c, status, r);
	mhd.MHD_destroy_response(r);
	return ok;
}

static enum MHD_Result plain(struct MHD_Connection *c, unsigned status, const char *text)
{
	return respond(c, status, (char *)text, strlen(text), "text/plain; charset=utf-8", MHD_RESPMEM_PERSISTENT);
}

/* Host header of a loopback server: a loopback name with our port, or none (HTTP/1.0):
 * a page elsewhere cannot read the metrics by DNS rebinding. */
/* Whether Accept asks for OpenMetrics (with a q that is not 0). */
static int wants_openmetrics(const char *accept)
{
	for (const char *p = accept; p && (p = strstr(p, "application/openmetrics-text")); p++) {
		const char *end = strchr(p, ',');
		const char *q = strstr(p, "q=");
		if (q && (!end || q < end) && strtod(q + 2, NULL) <= 0)
			continue;
		return 1;
	}
	return 0;
}

static char bad_uri;
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
	(void)cls;
	(void)c;
	return uri && (strstr(uri, "%00") || strlen(uri) > MAX_URL) ? &bad_uri : NULL;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
				  const char *version, const char *upload_data, size_t *upload_data_size,
				  void **req_cls)
{
	view_metrics *s = cls;
	(void)version;
	(void)upload_data;
	(void)upload_data_size;
	if (*req_cls == &bad_uri)
		return plain(c, MHD_HTTP_BAD_REQUEST, "bad path\n");
	int get = !strcmp(method, MHD_HTTP_METHOD_GET), head = !strcmp(method, MHD_HTTP_METHOD_HEAD);
	const char *cl = mhd.MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	if ((cl && strtoull(cl, NULL, 10) > 0) ||
	    mhd.MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING))
		return plain(c, MHD_HTTP_CONTENT_TOO_LARGE, "request bodies are not accepted\n");
	if (!get && !head)
		return plain(c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD\n");
	if (!view_host_ok(mhd.MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST), s->loopback,
			  s->bound, s->port))
		return plain(c, MHD_HTTP_FORBIDDEN, "unexpected Host header\n");
	if (strcmp(url, "/metrics"))
		return plain(c, MHD_HTTP_NOT_FOUND, "not found: the metrics are at /metrics\n");
	int om = wants_openmetrics(mhd.MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_ACCEPT));
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	int rc = out ? view_metrics_render(s, out, om) : FENNEC_ENOMEM;
	if (out && fclose(out))
		rc = FENNEC_ENOMEM;
	if (rc) {
		free(buf);
		return plain(c, MHD_HTTP_INTERNAL_SERVER_ERROR, "out of memory\n");
	}
	return respond(c, MHD_HTTP_OK, buf, len,
		    om ? "application/openmetrics-text; version=1.0.0; charset=utf-8" : "text/plain; version=0.0.4; charset=utf-8",
		    MHD_RESPMEM_MUST_FREE);
}

/* ---- life cycle ---- */

int view_metrics_parse_listen(const char *spec, char *host, size_t host_size, unsigned *port, char *why, size_t why_size)
{
	const char *p = spec ? spec : "";
	const char *colon = strrchr(p, ':');
	const char *ps = p;
	if (!*p) {
		snprintf(why, why_size, "--metrics-listen needs [HOST:]PORT, e.g. 9464 or 127.0.0.1:9464");
		return -1;
	}
	if (p[0] == '[') {
		const char *close = strchr(p, ']');
		if (!close || close[1] != ':' || close == p + 1) {
			snprintf(why, why_size, "--metrics-listen: '%s': an IPv6 address is written [ADDR]:PORT", p);
			return -1;
		}
		snprintf(host, host_size, "%.*s", (int)(close - p - 1), p + 1);
		ps = close + 2;
	} else if (colon) {
		if (colon == p || strchr(p, ':') != colon) {
			snprintf(why, why_size, "--metrics-listen: '%s' is not [HOST:]PORT (an IPv6 address is written "
						"[ADDR]:PORT)", p);
			return -1;
		}
		snprintf(host, host_size, "%.*s", (int)(colon - p), p);
		ps = colon + 1;
	} else
		snprintf(host, host_size, "127.0.0.1");
	if (!*ps || strspn(ps, "0123456789") != strlen(ps) || strlen(ps) > 5 || strtoul(ps, NULL, 10) > 65535) {
		snprintf(why, why_size, "--metrics-listen: '%s': the port must be a whole number from 0 to 65535 (0: any "
					"free port)", p);
		return -1;
	}
	*port = (unsigned)strtoul(ps, NULL, 10);
	return 0;
}

int view_metrics_open(const char *host, unsigned port, const char *path, view_metrics **out, view_error *err)
{
	memset(err, 0, sizeof *err);
	*out = NULL;
	view_metrics *s = calloc(1, sizeof *s);
	if (!s || !(s->path = strdup(path))) {
		free(s);
		err->code = FENNEC_ENOMEM;
		snprintf(err->msg, sizeof err->msg, "out of memory");
		return FENNEC_ENOMEM;
	}
	s->fd = -1;
	pthread_mutex_init(&s->lock, NULL);
	const char *why;
	int rc = cm_lib_load(&mhd_lib, &why);
	if (rc) {
		err->code = rc;
		snprintf(err->msg, sizeof err->msg, "cannot serve metrics: %s", why);
		goto fail;
	}
	if ((s->fd = view_listen(host ? host : "127.0.0.1", port, &s->loopback, s->bound, sizeof s->bound, err)) < 0) {
		rc = err->code;
		goto fail;
	}
	s->port = view_bound_port(s->fd);
	/* The server's threads take no signals: they are the caller's to handle. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_BLOCK, &all, &old);
	s->d = mhd.MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD, 0, NULL, NULL, on_request, s,
				MHD_OPTION_LISTEN_SOCKET, s->fd,
				MHD_OPTION_THREAD_POOL_SIZE, (unsigned)1,
				MHD_OPTION_CONNECTION_LIMIT, (unsigned)MAX_CONNECTIONS,
				MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)MAX_PER_CLIENT,
				MHD_OPTION_URI_LOG_CALLBACK, on_uri, (void *)NULL,
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)15,
				MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)16384,
				MHD_OPTION_END);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	if (!s->d) {
		rc = err->code = FENNEC_EIO;
		snprintf(err->msg, sizeof err->msg, "cannot start the metrics server on port %u", s->port);
		goto fail;
	}
	s->fd = -1; /* the daemon's now */
	*out = s;
	return 0;
fail:
	view_metrics_close(s);
	return rc;
}

unsigned view_metrics_port(const view_metrics *s) { return s->port; }

int view_metrics_loopback(const view_metrics *s) { return s->loopback; }

void view_metrics_close(view_metrics *s)
{
	if (!s)
		return;
	if (s->d)
		mhd.MHD_stop_daemon(s->d);
	if (s->fd >= 0)
		close(s->fd);
	for (uint32_t i = 0; i < s->nprocs; i++) {
		proc_reset(&s->procs[i]);
		fmt_follow_free(s->procs[i].w);
		free(s->procs[i].path);
	}
	free(s->procs);
	free(s->path);
	pthread_mutex_destroy(&s->lock);
	free(s);
}

/*
 * reader.c - decodes profile files (docs/format.md) for every consumer. Chunks are
 * validated before their payload is looked at; payload decoding checks every length
 * against the bytes that remain. Events reach the caller through a callback with
 * absolute ticks, so a 100-million-event file is never materialised.
 */
#include "format/reader.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "format/pipe.h"

#define MAX_SITES FMT_MAX_SITE_ID /* a 24-byte record with id 2^23 made a 512 MB table */
#define MAX_THREADS (1u << 24)

/* A segment of a capped recording in the joined buffer (seg_gather). */
typedef struct seg_part {
	uint64_t at;       /* where its chunks start in the joined buffer */
	uint64_t file_off; /* ... and in its file */
	char *path;
} seg_part;

typedef struct rd {
	fmt_file *f;
	const char *name;
	fmt_error *err;
	fmt_event_fn fn;
	void *ctx;
	uint64_t chunk_off; /* offset of the chunk being decoded */
	ZSTD_DCtx *dctx;
	uint8_t *buf;
	size_t bufcap;
	int seen_header;
	int header_only; /* stop after the HEADER chunk */
	int calib_pass;  /* first pass: only clock points from HEADER, STATS and END */
	struct bytime *bt; /* samples waiting for their regions and step (bytime_*) */
	unsigned flags;    /* FMT_READ_* */
	uint64_t scan_budget; /* payload bytes the search for a whole chunk may still checksum */
	fmt_pipe *pipe;    /* region, step and metric events go to the callback's thread (pipe.h), or NULL */
	int mapped;        /* the data is a read-only file mapping of ours: pages read can be dropped */
	uint64_t dropped;  /* bytes at the start of the mapping given back (MADV_DONTNEED) */
	int follow;        /* fmt_follow: a growing file read in steps; no samples delivered */
	uint64_t stop_off; /* follow: where reading stopped (the next chunk to decode) */
	const struct seg_part *parts; /* a capped recording's segments in the buffer (seg_gather) */
	uint32_t nparts;
	int seg_seen;      /* SEGMENT chunks read */
	uint64_t seg_last; /* the number of the last one */
	uint32_t threads_read; /* THREAD records read (bounds the indices: decode_threads) */
} rd;

/* A mapped file's pages behind the chunk at `off` are not read again in this pass: give
 * them back, so that the resident set of a big file's analysis stays a window, not the
 * file (a clean private file page is read again from the page cache if ever touched). */
#define DROP_WINDOW (32u << 20)
static void drop_behind(rd *r, const uint8_t *data, uint64_t off)
{
	if (!r->mapped || off - r->dropped < 2 * (uint64_t)DROP_WINDOW)
		return;
	uint64_t to = (off - DROP_WINDOW) & ~(uint64_t)0xfffff; /* 1 MiB: a multiple of the page size */
	if (to > r->dropped && !madvise((void *)(data + r->dropped), to - r->dropped, MADV_DONTNEED))
		r->dropped = to;
}

static void fmt_file_free_records(fmt_file *f);
static void bt_thread(rd *r, uint32_t idx, uint64_t tid);
static int bt_flush(rd *r);

static int fail(rd *r, int code, uint64_t off, const char *fmt, ...)
{
	va_list ap;
	char what[384];
	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	r->err->code = code;
	r->err->offset = off;
	const char *name = r->name;
	for (uint32_t i = r->nparts; i-- > 0;) /* in a segment: its name, its offset */
		if (off >= r->parts[i].at) {
			off = off - r->parts[i].at + r->parts[i].file_off;
			name = r->parts[i].path;
			r->err->offset = off;
			break;
		}
	snprintf(r->err->msg, sizeof r->err->msg, "%s: byte %llu: %s", name, (unsigned long long)off, what);
	return code;
}

/* A bounded cursor over a decoded payload. */
typedef struct cur {
	const uint8_t *p, *end;
	int bad;
} cur;

static uint64_t cur_varint(cur *c)
{
	uint64_t v = 0;
	if (c->bad || cm_varint_get(&c->p, c->end, &v) < 0) {
		c->bad = 1;
		return 0;
	}
	return v;
}

static uint8_t cur_u8(cur *c)
{
	if (c->bad || c->p >= c->end) {
		c->bad = 1;
		return 0;
	}
	return *c->p++;
}

static double cur_f64(cur *c)
{
	if (c->bad || c->end - c->p < 8) {
		c->bad = 1;
		return 0;
	}
	uint64_t u = 0;
	for (int i = 0; i < 8; i++)
		u |= (uint64_t)c->p[i] << (8 * i);
	c->p += 8;
	double d;
	memcpy(&d, &u, 8);
	return d;
}

/* A string copy (NUL-terminated; *len gets its length); NULL and bad set on overrun or
 * allocation failure. */
static char *cur_string_n(cur *c, size_t *len)
{
	uint64_t n = cur_varint(c);
	*len = 0;
	if (c->bad || n > (uint64_t)(c->end - c->p)) {
		c->bad = 1;
		return NULL;
	}
	char *s = malloc(n + 1);
	if (!s) {
		c->bad = 1;
		return NULL;
	}
	memcpy(s, c->p, n);
	s[n] = 0;
	c->p += n;
	*len = (size_t)n;
	return s;
}

static char *cur_string(cur *c)
{
	size_t n;
	return cur_string_n(c, &n);
}

static int grow(void **arr, uint32_t *n, uint32_t want, size_t elem, uint32_t limit)
{
	if (want <= *n)
		return 0;
	if (want > limit)
		return -1;
	uint32_t cap = *n ? *n : 16;
	while (cap < want)
		cap = cap > limit / 2 ? limit : cap * 2;
	void *a = realloc(*arr, (size_t)cap * elem);
	if (!a)
		return -1;
	memset((char *)a + (size_t)*n * elem, 0, (size_t)(cap - *n) * elem);
	*arr = a;
	*n = cap;
	return 0;
}

static void add_calib(rd *r, uint64_t mono, uint64_t ticks)
{
	fmt_file *f = r->f;
	if (f->ncalib == f->calib_cap) {
		size_t cap = f->calib_cap ? f->calib_cap * 2 : 64;
		fmt_calib *c = realloc(f->calib, cap * sizeof *c);
		if (!c)
			return;
		f->calib = c;
		f->calib_cap = cap;
	}
	f->calib[f->ncalib++] = (fmt_calib){mono, ticks, r->chunk_off};
	if (ticks > f->last_ticks)
		f->last_ticks = ticks;
}

static int decode_header(rd *r, cur *c)
{
	fmt_file *f = r->f;
	f->rank = -1;
	f->step_fraction = 1.0;
	while (c->p < c->end && !c->bad) {
		uint64_t key = cur_varint(c);
		unsigned kind = cur_u8(c);
		uint64_t v = 0;
		double d = 0;
		char *s = NULL;
		size_t slen = 0;
		switch (kind) {
		case FMT_K_VARINT:
		case FMT_K_ZIGZAG: v = cur_varint(c); break;
		case FMT_K_STRING: s = cur_string_n(c, &slen); break;
		case FMT_K_F64: d = cur_f64(c); break;
		default: return fail(r, FENNEC_ECORRUPT, r->chunk_off, "HEADER: field %llu has unknown kind %u", (unsigned long long)key, kind);
		}
		switch (key) {
		case FMT_H_RECORDING: f->recording_id = v; break;
		case FMT_H_PID: f->pid = v; break;
		case FMT_H_PPID: f->ppid = v; break;
		case FMT_H_RANK: f->rank = cm_unzigzag(v); break;
		case FMT_H_HOST: free(f->host); f->host = s; s = NULL; break;
		case FMT_H_CMDLINE: /* NUL-separated on disk; spaces for display */
			for (size_t i = 0; s && i < slen; i++)
				if (s[i] == 0)
					s[i] = ' ';
			free(f->cmdline);
			f->cmdline = s;
			s = NULL;
			break;
		case FMT_H_EXE: free(f->exe); f->exe = s; s = NULL; break;
		case FMT_H_START_REAL: f->start_real_ns = v; break;
		case FMT_H_START_MONO: f->start_mono_ns = v; break;
		case FMT_H_START_TICKS: f->start_ticks = v; break;
		case FMT_H_CLOCK: f->clock = v; break;
		case FMT_H_PARENT_PID: f->parent_pid = v; break;
		case FMT_H_ORIGIN: f->origin = v; break;
		case FMT_H_BUFFER: f->buffer_bytes = v; break;
		case FMT_H_STEP_WAIT: f->step_wait = v; break;
		case FMT_H_STEP_WARMUP: f->step_warmup = v; break;
		case FMT_H_STEP_ACTIVE: f->step_active = v; break;
		case FMT_H_STEP_REPEAT: f->step_repeat = v; break;
		case FMT_H_STEP_FRACTION: f->step_fraction = d; break;
		case FMT_H_VERSION: f->version = v; break;
		case FMT_H_TICKS_PER_NS: f->ticks_per_ns_hdr = d; break;
		case FMT_H_SAMPLE_MODE: f->sample_mode = v; break;
		case FMT_H_SAMPLE_PERIOD: f->sample_period_ns = v; break;
		case FMT_H_SAMPLE_SOURCE: f->sample_source = v; break;
		case FMT_H_SAMPLE_DEPTH: f->sample_depth = v; break;
		case FMT_H_SAMPLE_HZ: f->sample_hz = v; break;
		case FMT_H_MEM_MODE: f->mem_mode = v; break;
		case FMT_H_MEM_RATE: f->mem_rate = v; break;
		case FMT_H_MEM_INTERVAL: f->mem_interval_ns = v; break;
		case FMT_H_MEM_MMAP: f->mem_mmap_min = v; break;
		case FMT_H_PY_VERSION: f->py_version = v; break;
		case FMT_H_PY_STATUS: f->py_status = v; break;
		case FMT_H_SEG_MAX_SIZE: f->seg_max_bytes = v; f->seg_capped = 1; break;
		case FMT_H_SEG_MAX_DURATION: f->seg_max_ns = v; f->seg_capped = 1; break;
		case FMT_H_CONFIG_WARNINGS:
			for (size_t i = 0; s && i < slen; i++)
				if (s[i] == 0 || (s[i] != '\n' && (unsigned char)s[i] < 0x20))
					s[i] = '?'; /* lines of text, whatever the file says */
			free(f->config_warnings);
			f->config_warnings = s;
			s = NULL;
			break;
		case FMT_H_SYS_INTERVAL: f->sys_interval_ns = v; break;
		case FMT_H_SYS_CPUS: f->sys_cpus = v; break;
		case FMT_H_SYS_MEM_TOTAL: f->sys_mem_total = v; break;
		case FMT_H_ENERGY_SOURCES: f->energy_sources = v; break;
		case FMT_H_CPU_START_USER: f->cpu_start_user_ns = v; f->has_cpu_start = 1; break;
		case FMT_H_CPU_START_SYS: f->cpu_start_sys_ns = v; f->has_cpu_start = 1; break;
		default: break; /* a newer minor version's key */
		}
		free(s);
	}
	if (c->bad)
		return fail(r, FENNEC_ECORRUPT, r->chunk_off, "HEADER: field runs past the end of the chunk");
	if (r->calib_pass)
		add_calib(r, f->start_mono_ns, f->start_ticks);
	return 0;
}

static int decode_sites(rd *r, cur *c)
{
	fmt_file *f = r->f;
	while (c->p < c->end && !c->bad) {
		uint64_t id = cur_varint(c);
		unsigned kind = cur_u8(c);
		char *name = cur_string(c);
		char *file = cur_string(c);
		uint64_t line = cur_varint(c);
		if (c->bad || id == 0 || id >= MAX_SITES || kind > FMT_SITE_VALUE ||
		    grow((void **)&f->sites, &f->nsites, (uint32_t)id + 1, sizeof *f->sites, MAX_SITES) < 0) {
			free(name);
			free(file);
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "SITES: bad site record (id %llu, kind %u)", (unsigned long long)id, kind);
		}
		size_t n = name ? strlen(name) : 0;
		if (n > FMT_MAX_NAME) {
			/* A name of a megabyte made a report of megabytes: cut it, on a character
			 * boundary of UTF-8, and say so (the analysis warns). */
			size_t k = FMT_MAX_NAME - 3; /* with the 3 bytes of "…": FMT_MAX_NAME in all */
			while (k > 0 && ((unsigned char)name[k] & 0xc0) == 0x80)
				k--;
			memcpy(name + k, "\xe2\x80\xa6", 4); /* "…" and the NUL: k + 4 <= n + 1 bytes */
			if (!f->long_names++) {
				f->long_name_site = (uint32_t)id;
				f->long_name_bytes = n;
			}
		}
		fmt_site_rec *s = &f->sites[id];
		free(s->name);
		free(s->file);
		s->name = name;
		s->file = file;
		s->line = (uint32_t)line;
		s->kind = kind;
		s->defined = 1;
	}
	return c->bad ? fail(r, FENNEC_ECORRUPT, r->chunk_off, "SITES: record runs past the end of the chunk") : 0;
}

static int decode_threads(rd *r, cur *c)
{
	fmt_file *f = r->f;
	while (c->p < c->end && !c->bad) {
		uint64_t idx = cur_varint(c);
		uint64_t tid = cur_varint(c);
		char *name = cur_string(c);
		uint64_t start = cur_varint(c);
		/* The writer numbers threads 0, 1, ... and announces them at the flush after they
		 * start, so an index is never further than FMT_MAX_THREAD_AHEAD above the records
		 * before it: without this bound one 7-byte record with index 4,673,748 made a 300 MB
		 * table (2^24 - 1: 1 GiB), zeroed twice per read (34 s under ASan: a fuzz timeout). */
		if (c->bad || idx >= MAX_THREADS || idx >= (uint64_t)r->threads_read + FMT_MAX_THREAD_AHEAD ||
		    grow((void **)&f->threads, &f->nthreads, (uint32_t)idx + 1, sizeof *f->threads, MAX_THREADS) < 0) {
			free(name);
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "THREAD: bad thread record (index %llu)", (unsigned long long)idx);
		}
		fmt_thread_rec *t = &f->threads[idx];
		free(t->name);
		t->name = name;
		t->tid = tid;
		t->start_ticks = start;
		t->last_ticks = start;
		t->known = 1;
		r->threads_read++;
		if (r->fn)
			bt_thread(r, (uint32_t)idx, tid);
	}
	return c->bad ? fail(r, FENNEC_ECORRUPT, r->chunk_off, "THREAD: record runs past the end of the chunk") : 0;
}

static int decode_thread_end(rd *r, cur *c)
{
	fmt_file *f = r->f;
	while (c->p < c->end && !c->bad) {
		uint64_t idx = cur_varint(c);
		uint64_t end = cur_varint(c);
		if (c->bad || idx >= f->nthreads || !f->threads[idx].known)
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "THREAD_END: unknown thread %llu", (unsigned long long)idx);
		f->threads[idx].end_ticks = end;
	}
	return 0;
}

static int decode_stats(rd *r, cur *c, int is_end)
{
	fmt_file *f = r->f;
	uint64_t mono = cur_varint(c), ticks = cur_varint(c);
	uint64_t user = cur_varint(c), sys = cur_varint(c), rss = cur_varint(c);
	cur_varint(c); /* threads seen */
	uint64_t n = cur_varint(c);
	if (r->calib_pass) {
		if (!c->bad)
			add_calib(r, mono, ticks);
		return 0;
	}
	for (uint64_t i = 0; i < n && !c->bad; i++) {
		uint64_t idx = cur_varint(c), d = cur_varint(c);
		if (c->bad || idx >= f->nthreads || !f->threads[idx].known)
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "%s: drop count for unknown thread %llu", is_end ? "END" : "STATS", (unsigned long long)idx);
		f->threads[idx].dropped = d;
	}
	uint64_t lost = cur_varint(c);
	uint64_t reason = is_end ? cur_varint(c) : 0;
	if (c->bad)
		return fail(r, FENNEC_ECORRUPT, r->chunk_off, "%s: record runs past the end of the chunk", is_end ? "END" : "STATS");
	if (c->p < c->end) { /* fennec's own CPU (1.5); older writers end here */
		uint64_t own = cur_varint(c);
		if (c->bad)
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "%s: collector CPU runs past the end of the chunk", is_end ? "END" : "STATS");
		f->collector_cpu_ns = own;
		f->has_collector_cpu = 1;
	}
	if (c->p < c->end) { /* the heap records lost, by type (collectors since 2026-11-22) */
		uint64_t allocs = cur_varint(c), frees = cur_varint(c);
		if (c->bad)
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "%s: heap drop counts run past the end of the chunk", is_end ? "END" : "STATS");
		f->heap_dropped_allocs = allocs;
		f->heap_dropped_frees = frees;
		f->has_heap_drops = 1;
	}
	if (c->p < c->end) { /* calls that got no site: the table was full (collectors since 2026-12-02) */
		uint64_t refused = cur_varint(c);
		if (c->bad)
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "%s: the refused-site count runs past the end of the chunk", is_end ? "END" : "STATS");
		f->sites_refused = refused;
	}
	/* getrusage() counts the process's CPU from its start: the session's is the part after
	 * the header's (a session started late, a process's second session, an exec'd image). */
	f->cpu_user_ns = user - (f->cpu_start_user_ns <= user ? f->cpu_start_user_ns : user);
	f->cpu_sys_ns = sys - (f->cpu_start_sys_ns <= sys ? f->cpu_start_sys_ns : sys);
	f->max_rss_kb = rss;
	f->lost_bytes = lost;
	if (is_end) {
		f->has_end = 1;
		f->exit_reason = reason;
	}
	return r->fn ? bt_flush(r) : 0; /* the end of a flush */
}

/* COST (1.8): what fennec cost the program's threads so far; the last chunk counts. */
static int decode_cost(rd *r, cur *c)
{
	fmt_file *f = r->f;
	uint64_t v[5];
	for (int i = 0; i < 5; i++)
		v[i] = cur_varint(c);
	if (c->bad)
		return fail(r, FENNEC_ECORRUPT, r->chunk_off, "COST: record runs past the end of the chunk");
	f->cost_handler_ns = v[0];
	f->cost_heap_record_ns = v[1];
	f->cost_event_ps = v[2];
	f->cost_heap_call_ps = v[3];
	f->cost_sample_kernel_ns = v[4];
	f->has_cost = 1;
	if (c->p < c->end) { /* the wrappers' calls in the session, in every heap mode */
		f->cost_heap_calls = cur_varint(c);
		f->has_cost_heap_calls = !c->bad;
		if (c->bad)
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "COST: heap calls run past the end of the chunk");
	}
	return 0;
}

/* ---- samples whose regions and step come from the events, by time ----
 *
 * docs/format.md, "Regions and step by time". Such a sample waits in `pend` until its
 * thread's next region event later than it (it then takes the thread's open regions, as
 * they are before that event) or the end of its flush (the next STATS or END chunk, or the
 * end of the file: it then takes them as they are). The samples of a flush are delivered
 * together at its end, when every step earlier than them has been read, in file order.
 * Regions are tracked per thread index; samples name a tid, whose latest thread index
 * holds them.
 */

#define BT_NONE UINT32_MAX

typedef struct bt_pend {
	uint64_t ticks, tid;
	int64_t weight;
	uint32_t flags;
	uint32_t frames, nframes;   /* into frames[] */
	uint32_t regions, nregions; /* into regions[], once resolved */
	uint32_t next;              /* next unresolved sample of the same tid */
	int resolved;
} bt_pend;

typedef struct bt_tid {
	uint64_t tid;
	uint32_t thread;            /* latest thread index with this tid, BT_NONE if none */
	uint32_t first, last;       /* its unresolved samples, oldest first */
} bt_tid;

typedef struct bt_stack {
	uint32_t *ids;              /* open region site ids, outermost first */
	uint32_t n, cap;
} bt_stack;

typedef struct bytime {
	bt_pend *pend;
	uint32_t npend, pend_cap;
	uint64_t *frames;
	uint32_t nframes, frames_cap;
	uint32_t *regions;
	uint32_t nregions, regions_cap;
	uint32_t unresolved;
	bt_tid *tids;               /* dense; tid_slot maps tid -> index + 1 */
	uint32_t ntids, tids_cap;
	uint32_t *tid_slot;
	uint32_t slot_cap;          /* a power of two, at least twice ntids */
	uint32_t *tid_of_thread;    /* thread index -> tids index + 1 (0: none yet) */
	bt_stack *stacks;           /* by thread index */
	uint32_t nthreads;          /* size of tid_of_thread and stacks */
	uint64_t *steps;            /* STEP times of the file, sorted */
	uint32_t nsteps, steps_cap;
	int oom;
} bytime;

static int bt_grow(void **a, uint32_t *cap, uint32_t want, size_t elem)
{
	if (want <= *cap)
		return 0;
	uint32_t c = *cap ? *cap : 16;
	while (c < want) {
		if (c > UINT32_MAX / 2)
			return -1;
		c *= 2;
	}
	void *n = realloc(*a, (size_t)c * elem);
	if (!n)
		return -1;
	memset((char *)n + (size_t)*cap * elem, 0, (size_t)(c - *cap) * elem);
	*a = n;
	*cap = c;
	return 0;
}

static bytime *bt_get(rd *r)
{
	if (!r->bt && !(r->bt = calloc(1, sizeof *r->bt)))
		return NULL;
	return r->bt->oom ? NULL : r->bt;
}

static void bt_free(bytime *b)
{
	if (!b)
		return;
	for (uint32_t i = 0; i < b->nthreads; i++)
		free(b->stacks[i].ids);
	free(b->pend);
	free(b->frames);
	free(b->regions);
	free(b->tids);
	free(b->tid_slot);
	free(b->tid_of_thread);
	free(b->stacks);
	free(b->steps);
	free(b);
}

static uint32_t bt_hash(uint64_t tid, uint32_t cap)
{
	return (uint32_t)((tid * 0x9E3779B97F4A7C15ull) >> 32) & (cap - 1);
}

/* The entry of `tid`, made if new; BT_NONE when out of memory. */
static uint32_t bt_tid_of(bytime *b, uint64_t tid)
{
	if (b->slot_cap) {
		for (uint32_t h = bt_hash(tid, b->slot_cap); b->tid_slot[h]; h = (h + 1) & (b->slot_cap - 1))
			if (b->tids[b->tid_slot[h] - 1].tid == tid)
				return b->tid_slot[h] - 1;
	}
	if (bt_grow((void **)&b->tids, &b->tids_cap, b->ntids + 1, sizeof *b->tids) < 0)
		return BT_NONE;
	if (2 * (b->ntids + 1) > b->slot_cap) {
		uint32_t cap = b->slot_cap ? b->slot_cap * 2 : 64;
		uint32_t *slot = calloc(cap, sizeof *slot);
		if (!slot)
			return BT_NONE;
		for (uint32_t i = 0; i < b->ntids; i++) {
			uint32_t h = bt_hash(b->tids[i].tid, cap);
			while (slot[h])
				h = (h + 1) & (cap - 1);
			slot[h] = i + 1;
		}
		free(b->tid_slot);
		b->tid_slot = slot;
		b->slot_cap = cap;
	}
	uint32_t h = bt_hash(tid, b->slot_cap);
	while (b->tid_slot[h])
		h = (h + 1) & (b->slot_cap - 1);
	b->tid_slot[h] = b->ntids + 1;
	b->tids[b->ntids] = (bt_tid){tid, BT_NONE, BT_NONE, BT_NONE};
	return b->ntids++;
}

static int bt_threads(bytime *b, uint32_t n)
{
	uint32_t cap = b->nthreads;
	if (bt_grow((void **)&b->tid_of_thread, &cap, n, sizeof *b->tid_of_thread) < 0)
		return -1;
	cap = b->nthreads;
	if (bt_grow((void **)&b->stacks, &cap, n, sizeof *b->stacks) < 0)
		return -1;
	if (cap > b->nthreads)
		b->nthreads = cap;
	return 0;
}

/* A THREAD record: thread index `idx` is now the one of `tid`. */
static void bt_thread(rd *r, uint32_t idx, uint64_t tid)
{
	if (r->follow)
		return;
	bytime *b = bt_get(r);
	if (!b)
		return;
	uint32_t e = bt_tid_of(b, tid);
	if (e == BT_NONE || bt_threads(b, idx + 1) < 0) {
		b->oom = 1;
		return;
	}
	b->tids[e].thread = idx;
	b->tid_of_thread[idx] = e + 1;
	b->stacks[idx].n = 0;
}

/* Sample `i` takes thread `ti`'s open regions (none when ti is BT_NONE). */
static void bt_resolve(bytime *b, uint32_t i, uint32_t ti)
{
	bt_pend *p = &b->pend[i];
	const bt_stack *s = ti != BT_NONE && ti < b->nthreads ? &b->stacks[ti] : NULL;
	uint32_t n = s ? (s->n < FMT_MAX_REGIONS ? s->n : FMT_MAX_REGIONS) : 0;
	p->resolved = 1;
	b->unresolved--;
	if (!n)
		return;
	if (bt_grow((void **)&b->regions, &b->regions_cap, b->nregions + n, sizeof *b->regions) < 0) {
		b->oom = 1;
		return;
	}
	memcpy(b->regions + b->nregions, s->ids, n * sizeof *s->ids);
	p->regions = b->nregions;
	p->nregions = n;
	b->nregions += n;
}

/* Before thread ti's region event at `ticks`: its samples older than the event take its
 * regions as they are. */
static void bt_before_event(rd *r, uint32_t ti, uint64_t ticks)
{
	bytime *b = r->bt;
	if (!b || !b->unresolved || ti >= b->nthreads || !b->tid_of_thread[ti])
		return;
	bt_tid *t = &b->tids[b->tid_of_thread[ti] - 1];
	while (t->first != BT_NONE && b->pend[t->first].ticks < ticks) {
		uint32_t i = t->first;
		t->first = b->pend[i].next;
		bt_resolve(b, i, ti);
	}
	if (t->first == BT_NONE)
		t->last = BT_NONE;
}

/* Region events change the thread's open regions. */
static void bt_region(rd *r, uint32_t ti, unsigned type, uint32_t id)
{
	bytime *b = r->bt;
	if (!b || b->oom || ti >= b->nthreads)
		return;
	bt_stack *s = &b->stacks[ti];
	if (type == FMT_EV_END) {
		if (s->n)
			s->n--;
	} else if (bt_grow((void **)&s->ids, &s->cap, s->n + 1, sizeof *s->ids) < 0) {
		b->oom = 1;
	} else {
		s->ids[s->n++] = id;
	}
}

static void bt_step(rd *r, uint64_t ticks)
{
	bytime *b = bt_get(r);
	if (!b)
		return;
	if (bt_grow((void **)&b->steps, &b->steps_cap, b->nsteps + 1, sizeof *b->steps) < 0) {
		b->oom = 1;
		return;
	}
	uint32_t i = b->nsteps++;
	for (; i > 0 && b->steps[i - 1] > ticks; i--) /* steps of several threads interleave */
		b->steps[i] = b->steps[i - 1];
	b->steps[i] = ticks;
}

/* Steps made at or before `ticks`. */
static uint64_t bt_steps_before(const bytime *b, uint64_t ticks)
{
	uint32_t lo = 0, hi = b->nsteps;
	while (lo < hi) {
		uint32_t mid = lo + (hi - lo) / 2;
		if (b->steps[mid] <= ticks)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

/* Keep a sample of a SAMPLES chunk until its flush ends. */
static void bt_add(rd *r, const fmt_event *ev)
{
	bytime *b = bt_get(r);
	uint32_t e = b ? bt_tid_of(b, ev->tid) : BT_NONE;
	if (e == BT_NONE ||
	    bt_grow((void **)&b->pend, &b->pend_cap, b->npend + 1, sizeof *b->pend) < 0 ||
	    bt_grow((void **)&b->frames, &b->frames_cap, b->nframes + ev->nframes, sizeof *b->frames) < 0) {
		if (b)
			b->oom = 1;
		return;
	}
	uint32_t i = b->npend++;
	b->pend[i] = (bt_pend){ev->ticks, ev->tid, ev->i, ev->flags, b->nframes, ev->nframes, 0, 0, BT_NONE, 0};
	if (ev->nframes) /* b->frames may still be NULL: no NULL + 0, no memcpy from NULL */
		memcpy(b->frames + b->nframes, ev->frames, ev->nframes * sizeof *ev->frames);
	b->nframes += ev->nframes;
	bt_tid *t = &b->tids[e];
	if (t->last != BT_NONE)
		b->pend[t->last].next = i;
	else
		t->first = i;
	t->last = i;
	b->unresolved++;
}

/* The end of a flush (STATS, END) or of the file: every waiting sample takes its thread's
 * regions as they are now and its step, and is delivered. Returns the callback's value. */
static int bt_flush(rd *r)
{
	bytime *b = r->bt;
	if (!b || !b->npend)
		return 0;
	if (b->oom) {
		/* Out of memory while reading: fail like the rest of the reader would. */
		return fail(r, FENNEC_ENOMEM, r->chunk_off, "out of memory for samples attributed by time");
	}
	for (uint32_t e = 0; e < b->ntids; e++) {
		bt_tid *t = &b->tids[e];
		for (uint32_t i = t->first; i != BT_NONE; i = b->pend[i].next)
			bt_resolve(b, i, t->thread);
		t->first = t->last = BT_NONE;
	}
	int rc = b->oom ? fail(r, FENNEC_ENOMEM, r->chunk_off, "out of memory for samples attributed by time") : 0;
	for (uint32_t i = 0; i < b->npend && !rc; i++) {
		const bt_pend *p = &b->pend[i];
		fmt_event ev = {.type = FMT_EV_SAMPLE, .thread = UINT32_MAX};
		ev.flags = p->flags;
		ev.tid = p->tid;
		ev.ticks = p->ticks;
		ev.i = p->weight;
		ev.u = bt_steps_before(b, p->ticks) + r->f->seg_steps_before;
		ev.frames = p->nframes ? b->frames + p->frames : NULL;
		ev.nframes = p->nframes;
		ev.regions = p->nregions ? b->regions + p->regions : NULL;
		ev.nregions = p->nregions;
		rc = r->fn(r->ctx, r->f, &ev);
	}
	b->npend = b->nframes = b->nregions = b->unresolved = 0;
	return rc;
}

/* Decode one thread's segment of events. */
/* A region, step or metric event to the callback: through the pipe when there is one. */
static inline int deliver_ev(rd *r, const fmt_event *ev)
{
	if (!r->pipe)
		return r->fn(r->ctx, r->f, ev);
	fmt_pipe_ev *q = fmt_pipe_next(r->pipe);
	if (!q)
		return fmt_pipe_drain(r->pipe); /* the callback failed */
	q->type = (uint8_t)ev->type;
	q->flags = (uint8_t)ev->flags;
	q->thread = ev->thread;
	q->id = ev->id;
	q->ticks = ev->ticks;
	q->u = ev->u;
	if (ev->type == FMT_EV_COUNTER)
		q->i = ev->i;
	else
		q->f = ev->f;
	return 0;
}

static int decode_segment(rd *r, uint32_t ti, const uint8_t *p, const uint8_t *end, const uint8_t *base)
{
	fmt_file *f = r->f;
	fmt_thread_rec *t = &f->threads[ti];
	fmt_event ev;
	uint64_t now = t->last_ticks;
	uint64_t nev = 0;
	while (p < end) {
		const uint8_t *at = p;
		uint8_t tag = *p++;
		unsigned type = tag & 15, s = tag >> 4;
		uint64_t v = 0, dt = 0;
		ev.type = type;
		ev.thread = ti;
		ev.flags = s;
		ev.u = 0;
		ev.i = 0;
		ev.f = 0;
		ev.id = 0;
		int bad = 0;
		switch (type) {
		case FMT_EV_BEGIN:
			if (s == 15)
				bad |= cm_varint_get(&p, end, &v);
			else
				v = s;
			bad |= cm_varint_get(&p, end, &dt);
			if (v >= MAX_SITES)
				bad = 1;
			ev.id = (uint32_t)v;
			break;
		case FMT_EV_END: bad |= cm_varint_get(&p, end, &dt); break;
		case FMT_EV_STEP:
			bad |= cm_varint_get(&p, end, &dt);
			if (s & 2)
				bad |= cm_varint_get(&p, end, &ev.u);
			break;
		case FMT_EV_COUNTER:
			bad |= cm_varint_get(&p, end, &v);
			bad |= cm_varint_get(&p, end, &dt);
			bad |= cm_varint_get(&p, end, (uint64_t *)&ev.i);
			ev.i = cm_unzigzag((uint64_t)ev.i);
			ev.id = (uint32_t)v;
			if (v >= MAX_SITES)
				bad = 1;
			break;
		case FMT_EV_GAUGE:
		case FMT_EV_VALUE:
			bad |= cm_varint_get(&p, end, &v);
			bad |= cm_varint_get(&p, end, &dt);
			if (!bad && end - p >= 8) {
				uint64_t u = 0;
				for (int i = 0; i < 8; i++)
					u |= (uint64_t)p[i] << (8 * i);
				memcpy(&ev.f, &u, 8);
				p += 8;
			} else
				bad = 1;
			ev.id = (uint32_t)v;
			if (v >= MAX_SITES)
				bad = 1;
			break;
		case FMT_EV_TIME:
			bad |= cm_varint_get(&p, end, &v);
			now = v;
			dt = 0;
			break;
		case FMT_EV_STACK: {
			uint64_t depth = 0;
			bad |= cm_varint_get(&p, end, &depth);
			if (bad || depth > 4096)
				return fail(r, FENNEC_ECORRUPT, r->chunk_off, "EVENTS: thread %u: bad STACK event at payload byte %td", ti, at - base);
			for (uint64_t k = 0; k < depth; k++) {
				if (cm_varint_get(&p, end, &v) < 0 || v >= MAX_SITES)
					return fail(r, FENNEC_ECORRUPT, r->chunk_off, "EVENTS: thread %u: bad STACK event at payload byte %td", ti, at - base);
				ev.type = FMT_EV_BEGIN;
				ev.id = (uint32_t)v;
				ev.ticks = now;
				t->depth++;
				nev++;
				if (r->bt) {
					bt_before_event(r, ti, now);
					bt_region(r, ti, FMT_EV_BEGIN, ev.id);
				}
				if (r->fn) {
					int rc = deliver_ev(r, &ev);
					if (rc)
						return rc;
				}
			}
			continue;
		}
		default:
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "EVENTS: thread %u: unknown event type %u at payload byte %td", ti, type, at - base);
		}
		if (bad)
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "EVENTS: thread %u: event at payload byte %td runs past its segment", ti, at - base);
		now += dt;
		ev.ticks = now;
		if (type == FMT_EV_BEGIN)
			t->depth++;
		else if (type == FMT_EV_END) {
			if (t->depth == 0) {
				f->bad_ends++;
				continue;
			}
			t->depth--;
		}
		nev++;
		if (r->bt && (type == FMT_EV_BEGIN || type == FMT_EV_END)) {
			bt_before_event(r, ti, now);
			bt_region(r, ti, type, ev.id);
		} else if (type == FMT_EV_STEP && r->fn && !r->follow) {
			bt_step(r, now);
		}
		if (r->fn && type != FMT_EV_TIME) {
			int rc = deliver_ev(r, &ev);
			if (rc)
				return rc;
		}
	}
	t->last_ticks = now;
	t->events += nev;
	f->events += nev;
	if (now > f->last_ticks)
		f->last_ticks = now;
	return 0;
}

static int decode_events(rd *r, cur *c)
{
	fmt_file *f = r->f;
	const uint8_t *base = c->p;
	while (c->p < c->end) {
		uint64_t idx = cur_varint(c), len = cur_varint(c);
		if (c->bad || len > (uint64_t)(c->end - c->p))
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "EVENTS: segment header at payload byte %td is bad", c->p - base);
		if (idx >= f->nthreads || !f->threads[idx].known)
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "EVENTS: segment for unknown thread %llu", (unsigned long long)idx);
		int rc = decode_segment(r, (uint32_t)idx, c->p, c->p + len, base);
		if (rc)
			return rc;
		c->p += len;
	}
	return 0;
}

static int decode_samples(rd *r, cur *c)
{
	fmt_file *f = r->f;
	uint64_t frames[FMT_MAX_FRAMES], py[FMT_MAX_FRAMES];
	uint32_t regions[FMT_MAX_REGIONS];
	f->samples_taken = cur_varint(c);
	f->samples_dropped = cur_varint(c);
	f->samples_truncated = cur_varint(c);
	if (r->follow) /* fmt_follow delivers no samples: their step and regions need the flush */
		return c->bad ? fail(r, FENNEC_ECORRUPT, r->chunk_off, "SAMPLES: counters run past the end of the chunk") : 0;
	uint64_t t = 0;
	const uint8_t *base = c->p;
	while (c->p < c->end && !c->bad) {
		const uint8_t *at = c->p;
		fmt_event ev = {.type = FMT_EV_SAMPLE, .thread = UINT32_MAX};
		ev.flags = (uint32_t)cur_varint(c); /* a u8 before 1.7: the same byte below 128 */
		ev.tid = cur_varint(c);
		t += (uint64_t)cm_unzigzag(cur_varint(c));
		ev.ticks = t;
		ev.i = (int64_t)cur_varint(c);
		ev.u = cur_varint(c);
		uint64_t nr = cur_varint(c);
		if (c->bad || nr > FMT_MAX_REGIONS || (ev.flags & ~511u) || (ev.flags & FMT_S_KIND_MASK) > FMT_S_OFFCPU ||
		    ev.i < 1 || (int64_t)ev.ticks < 0 || ((ev.flags & FMT_S_BY_TIME) && (nr || ev.u)))
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "SAMPLES: bad sample at payload byte %td", at - base);
		for (uint64_t k = 0; k < nr; k++) {
			uint64_t id = cur_varint(c);
			if (id == 0 || id >= f->nsites || !f->sites[id].defined || f->sites[id].kind != FMT_SITE_REGION)
				c->bad = 1;
			regions[k] = (uint32_t)id;
		}
		uint64_t nf = cur_varint(c);
		if (c->bad || nf > FMT_MAX_FRAMES)
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "SAMPLES: bad region or frame count in the sample at payload byte %td", at - base);
		uint64_t a = 0;
		for (uint64_t k = 0; k < nf; k++) {
			uint64_t v = cur_varint(c);
			a = k ? a + (uint64_t)cm_unzigzag(v) : v;
			frames[k] = a;
		}
		uint64_t npy = 0;
		if (ev.flags & FMT_S_PYTHON) {
			npy = cur_varint(c);
			if (c->bad || npy > FMT_MAX_FRAMES || (ev.flags & FMT_S_BY_TIME))
				return fail(r, FENNEC_ECORRUPT, r->chunk_off, "SAMPLES: bad Python frame count in the sample at payload byte %td", at - base);
			for (uint64_t k = 0; k < npy; k++) {
				uint64_t code = cur_varint(c), line = cur_varint(c);
				if (code >> 33 || line > 0x7fffffff)
					c->bad = 1;
				py[k] = fmt_pyframe((uint32_t)(code >> 1), (uint32_t)line, (unsigned)(code & 1));
			}
		} else if (ev.flags & (FMT_S_GIL | FMT_S_PYCUT)) {
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "SAMPLES: Python flags without Python frames in the sample at payload byte %td", at - base);
		}
		if (c->bad)
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "SAMPLES: sample at payload byte %td runs past the end of the chunk", at - base);
		ev.pyframes = py;
		ev.npy = (uint32_t)npy;
		ev.regions = regions;
		ev.nregions = (uint32_t)nr;
		ev.frames = frames;
		ev.nframes = (uint32_t)nf;
		f->samples++;
		if (ev.ticks > f->last_ticks)
			f->last_ticks = ev.ticks;
		if (r->fn && (ev.flags & FMT_S_BY_TIME)) {
			bt_add(r, &ev); /* delivered at the end of its flush */
		} else if (r->fn) {
			int rc = r->fn(r->ctx, f, &ev);
			if (rc)
				return rc;
		}
	}
	return c->bad ? fail(r, FENNEC_ECORRUPT, r->chunk_off, "SAMPLES: counters run past the end of the chunk") : 0;
}

/* PYCODE (1.7): varint id, string qualname, string filename, varint firstlineno. */
static int decode_pycode(rd *r, cur *c)
{
	fmt_file *f = r->f;
	while (c->p < c->end && !c->bad) {
		uint64_t id = cur_varint(c);
		char *q = cur_string(c), *fn = cur_string(c);
		uint64_t first = cur_varint(c);
		if (c->bad || id == 0 || id > (1u << 24) || first > 0x7fffffff) {
			free(q);
			free(fn);
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "PYCODE: bad code object record");
		}
		if (id >= f->npycode) {
			uint32_t n = f->npycode ? f->npycode : 256;
			while (n <= id)
				n *= 2;
			fmt_pycode *t = realloc(f->pycode, n * sizeof *t);
			if (!t) {
				free(q);
				free(fn);
				return fail(r, FENNEC_ENOMEM, r->chunk_off, "out of memory");
			}
			memset(t + f->npycode, 0, (n - f->npycode) * sizeof *t);
			f->pycode = t;
			f->npycode = n;
		}
		fmt_pycode *pc = &f->pycode[id];
		free(pc->qualname);
		free(pc->filename);
		*pc = (fmt_pycode){q, fn, (uint32_t)first, 1};
	}
	return c->bad ? fail(r, FENNEC_ECORRUPT, r->chunk_off, "PYCODE: record runs past the end of the chunk") : 0;
}

static int decode_modules(rd *r, cur *c)
{
	fmt_file *f = r->f;
	while (c->p < c->end && !c->bad) {
		fmt_module m = {0};
		size_t idlen = 0;
		m.ticks = cur_varint(c);
		m.path = cur_string(c);
		m.build_id = (uint8_t *)cur_string_n(c, &idlen);
		m.build_id_len = idlen;
		m.bias = cur_varint(c);
		uint64_t n = cur_varint(c);
		if (!c->bad && n > 0 && n <= 64 && (m.segs = calloc(n, sizeof *m.segs))) {
			m.nsegs = (uint32_t)n;
			m.lo = UINT64_MAX;
			for (uint64_t k = 0; k < n; k++) {
				m.segs[k].start = cur_varint(c);
				m.segs[k].end = cur_varint(c);
				m.segs[k].offset = cur_varint(c);
				if (m.segs[k].end <= m.segs[k].start)
					c->bad = 1;
				m.lo = m.segs[k].start < m.lo ? m.segs[k].start : m.lo;
				m.hi = m.segs[k].end > m.hi ? m.segs[k].end : m.hi;
			}
		} else {
			c->bad = 1;
		}
		if (!c->bad && f->nmodules == f->modules_cap) {
			size_t cap = f->modules_cap ? f->modules_cap * 2 : 32;
			fmt_module *nm = realloc(f->modules, cap * sizeof *nm);
			if (nm) {
				f->modules = nm;
				f->modules_cap = cap;
			} else {
				c->bad = 1;
			}
		}
		if (c->bad || f->nmodules >= (1u << 20)) {
			free(m.path);
			free(m.build_id);
			free(m.segs);
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "MODULES: bad module record");
		}
		if (!idlen) {
			free(m.build_id);
			m.build_id = NULL;
		}
		f->modules[f->nmodules++] = m;
	}
	return 0;
}

static int decode_tasks(rd *r, cur *c)
{
	fmt_file *f = r->f;
	while (c->p < c->end && !c->bad) {
		uint64_t tid = cur_varint(c);
		char *name = cur_string(c);
		if (c->bad || f->ntasks >= (1u << 24)) {
			free(name);
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "TASKS: bad task record");
		}
		if (f->ntasks == f->tasks_cap) {
			size_t cap = f->tasks_cap ? f->tasks_cap * 2 : 32;
			fmt_task *nt = realloc(f->tasks, cap * sizeof *nt);
			if (!nt) {
				free(name);
				return fail(r, FENNEC_ENOMEM, r->chunk_off, "out of memory");
			}
			f->tasks = nt;
			f->tasks_cap = cap;
		}
		f->tasks[f->ntasks++] = (fmt_task){tid, name};
	}
	return 0;
}

#define MAX_HEAP_STACKS (1u << 24)

static int heap_stack(rd *r, cur *c, const uint8_t *at, const uint8_t *base)
{
	fmt_file *f = r->f;
	uint64_t id = cur_varint(c);
	unsigned trunc = cur_u8(c);
	uint64_t nr = cur_varint(c);
	if (c->bad || id == 0 || id >= MAX_HEAP_STACKS || (trunc & ~3u) || nr > FMT_MAX_REGIONS)
		return fail(r, FENNEC_ECORRUPT, r->chunk_off, "HEAP: bad stack record at payload byte %td", at - base);
	if (grow((void **)&f->heap_stacks, &f->nheap_stacks, (uint32_t)id + 1, sizeof *f->heap_stacks, MAX_HEAP_STACKS) < 0)
		return fail(r, FENNEC_ENOMEM, r->chunk_off, "out of memory");
	fmt_heap_stack *st = &f->heap_stacks[id];
	if (st->defined)
		return fail(r, FENNEC_ECORRUPT, r->chunk_off, "HEAP: stack %llu defined twice", (unsigned long long)id);
	st->regions = malloc(sizeof *st->regions * (nr ? nr : 1));
	if (!st->regions)
		return fail(r, FENNEC_ENOMEM, r->chunk_off, "out of memory");
	for (uint64_t k = 0; k < nr; k++) {
		uint64_t s = cur_varint(c);
		if (s == 0 || s >= f->nsites || !f->sites[s].defined || f->sites[s].kind != FMT_SITE_REGION)
			c->bad = 1;
		st->regions[k] = (uint32_t)s;
	}
	st->nregions = (uint32_t)nr;
	uint64_t nf = cur_varint(c);
	if (c->bad || nf > FMT_MAX_FRAMES)
		return fail(r, FENNEC_ECORRUPT, r->chunk_off, "HEAP: bad region or frame count in the stack at payload byte %td", at - base);
	st->frames = malloc(sizeof *st->frames * (nf ? nf : 1));
	if (!st->frames)
		return fail(r, FENNEC_ENOMEM, r->chunk_off, "out of memory");
	uint64_t a = 0;
	for (uint64_t k = 0; k < nf; k++) {
		uint64_t v = cur_varint(c);
		a = k ? a + (uint64_t)cm_unzigzag(v) : v;
		st->frames[k] = a;
	}
	st->nframes = (uint32_t)nf;
	if (trunc & FMT_HS_PYTHON) {
		uint64_t npy = cur_varint(c);
		if (c->bad || npy > FMT_MAX_FRAMES)
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "HEAP: bad Python frame count in the stack at payload byte %td", at - base);
		st->pyframes = malloc(sizeof *st->pyframes * (npy ? npy : 1));
		if (!st->pyframes)
			return fail(r, FENNEC_ENOMEM, r->chunk_off, "out of memory");
		for (uint64_t k = 0; k < npy; k++) {
			uint64_t code = cur_varint(c), line = cur_varint(c);
			if (code >> 33 || line > 0x7fffffff)
				c->bad = 1;
			st->pyframes[k] = fmt_pyframe((uint32_t)(code >> 1), (uint32_t)line, (unsigned)(code & 1));
		}
		st->npy = (uint32_t)npy;
	}
	st->truncated = (int)(trunc & FMT_HS_TRUNCATED);
	st->defined = 1;
	return c->bad ? fail(r, FENNEC_ECORRUPT, r->chunk_off, "HEAP: stack at payload byte %td runs past the end of the chunk", at - base) : 0;
}

/* A SNAP record's body, the same in HEAP and HEAP2: step, the five heap numbers, flags. */
static void heap_snap(cur *c, fmt_event *ev)
{
	ev->type = FMT_EV_HEAP_SNAP;
	ev->u = cur_varint(c);
	for (int k = 0; k < 5; k++)
		ev->heap[k] = cur_varint(c);
	ev->flags = cur_u8(c);
	if (ev->flags > FMT_SNAP_FINAL)
		c->bad = 1;
}

/* The counters that open a HEAP or HEAP2 chunk. */
static int heap_counters(rd *r, cur *c)
{
	fmt_file *f = r->f;
	fmt_heap_counters *h = &f->heap;
	uint64_t *cv[] = {&h->allocs, &h->frees, &h->alloc_bytes, &h->live_bytes, &h->peak_bytes, &h->peak_ticks,
			  &h->peak_step, &h->peak_site, &h->largest_bytes, &h->records, &h->dropped, &h->truncated,
			  &h->untracked};
	for (size_t i = 0; i < sizeof cv / sizeof cv[0]; i++)
		*cv[i] = cur_varint(c);
	if (c->bad)
		return fail(r, FENNEC_ECORRUPT, r->chunk_off, "HEAP: counters run past the end of the chunk");
	f->has_heap = 1;
	return 0;
}

static int decode_heap(rd *r, cur *c)
{
	fmt_file *f = r->f;
	int rc = heap_counters(r, c);
	if (rc)
		return rc;
	uint64_t t = 0;
	const uint8_t *base = c->p;
	while (c->p < c->end && !c->bad) {
		const uint8_t *at = c->p;
		unsigned type = cur_u8(c);
		fmt_event ev = {.thread = UINT32_MAX};
		switch (type) {
		case FMT_HR_STACK:
			rc = heap_stack(r, c, at, base);
			if (rc)
				return rc;
			continue;
		case FMT_HR_ALLOC:
			ev.type = FMT_EV_ALLOC;
			ev.tid = cur_varint(c);
			t += (uint64_t)cm_unzigzag(cur_varint(c));
			ev.u = cur_varint(c);
			ev.addr = cur_varint(c);
			ev.size = cur_varint(c);
			uint64_t id = cur_varint(c);
			if (!c->bad && !fmt_heap_stack_get(f, id))
				return fail(r, FENNEC_ECORRUPT, r->chunk_off, "HEAP: allocation at payload byte %td names undefined stack %llu",
					    at - base, (unsigned long long)id);
			ev.id = (uint32_t)id;
			break;
		case FMT_HR_FREE:
			ev.type = FMT_EV_FREE;
			ev.tid = cur_varint(c);
			t += (uint64_t)cm_unzigzag(cur_varint(c));
			ev.addr = cur_varint(c);
			break;
		case FMT_HR_SNAP:
			t += (uint64_t)cm_unzigzag(cur_varint(c));
			heap_snap(c, &ev);
			break;
		default:
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "HEAP: unknown record type %u at payload byte %td", type, at - base);
		}
		if (c->bad || (int64_t)t < 0)
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "HEAP: bad record at payload byte %td", at - base);
		ev.ticks = t;
		if (t > f->last_ticks)
			f->last_ticks = t;
		if (r->fn && (rc = r->fn(r->ctx, f, &ev)) != 0)
			return rc;
	}
	return c->bad ? fail(r, FENNEC_ECORRUPT, r->chunk_off, "HEAP: record runs past the end of the chunk") : 0;
}

/* ---- GPU (docs/format.md "GPU (1.3)") ---- */

#define MAX_GPU_STRINGS (1u << 24)
#define MAX_GPU_DEVICES 4096

static int gpu_device(rd *r, cur *c, const uint8_t *at, const uint8_t *base)
{
	fmt_file *f = r->f;
	fmt_gpu_device d = {0};
	d.id = (uint32_t)cur_varint(c);
	size_t nlen, ulen;
	char *name = cur_string_n(c, &nlen);
	char *uuid = cur_string_n(c, &ulen);
	uint32_t *v[] = {&d.cc_major, &d.cc_minor, &d.sm_count, &d.warp_size, &d.max_threads_per_block,
			 &d.max_warps_per_sm, &d.max_blocks_per_sm, &d.regs_per_sm, &d.regs_per_block,
			 &d.smem_per_sm, &d.smem_per_block};
	for (size_t i = 0; i < ARRAY_LEN(v); i++) {
		uint64_t x = cur_varint(c);
		if (x > UINT32_MAX)
			c->bad = 1;
		*v[i] = (uint32_t)x;
	}
	d.memory_bytes = cur_varint(c);
	uint64_t clk = cur_varint(c);
	d.clock_khz = (uint32_t)clk;
	if (!c->bad && ulen == 16) {
		memcpy(d.uuid, uuid, 16);
		d.has_uuid = 1;
	}
	free(uuid);
	if (c->bad || (ulen && ulen != 16) || clk > UINT32_MAX) {
		free(name);
		return fail(r, FENNEC_ECORRUPT, r->chunk_off, "GPU: bad device record at payload byte %td", at - base);
	}
	d.name = name;
	for (uint32_t i = 0; i < f->ngpu_devices; i++)
		if (f->gpu_devices[i].id == d.id) {
			free((char *)f->gpu_devices[i].name);
			f->gpu_devices[i] = d;
			return 0;
		}
	if (f->ngpu_devices >= MAX_GPU_DEVICES ||
	    grow((void **)&f->gpu_devices, &f->gpu_devices_cap, f->ngpu_devices + 1, sizeof d, MAX_GPU_DEVICES) < 0) {
		free(name);
		return fail(r, FENNEC_ECORRUPT, r->chunk_off, "GPU: more than %u devices", MAX_GPU_DEVICES);
	}
	f->gpu_devices[f->ngpu_devices++] = d;
	return 0;
}

static int gpu_string(rd *r, cur *c, const uint8_t *at, const uint8_t *base)
{
	fmt_file *f = r->f;
	uint64_t id = cur_varint(c);
	char *s = cur_string(c);
	if (c->bad || id == 0 || id >= MAX_GPU_STRINGS ||
	    grow((void **)&f->gpu_strings, &f->ngpu_strings, (uint32_t)id + 1, sizeof *f->gpu_strings, MAX_GPU_STRINGS) < 0) {
		free(s);
		return fail(r, FENNEC_ECORRUPT, r->chunk_off, "GPU: bad string record at payload byte %td", at - base);
	}
	if (f->gpu_strings[id]) {
		free(s);
		return fail(r, FENNEC_ECORRUPT, r->chunk_off, "GPU: string %llu defined twice", (unsigned long long)id);
	}
	f->gpu_strings[id] = s;
	return 0;
}

/* A varint that must fit in 32 bits. */
static uint32_t gpu_u32(cur *c)
{
	uint64_t v = cur_varint(c);
	if (v > UINT32_MAX)
		c->bad = 1;
	return (uint32_t)v;
}

/* A byte that must be at most `max`. */
static uint8_t gpu_enum(cur *c, unsigned max)
{
	uint8_t v = cur_u8(c);
	if (v > max)
		c->bad = 1;
	return v;
}

static void gpu_where(cur *c, fmt_gpu *g)
{
	g->device = gpu_u32(c);
	g->context = gpu_u32(c);
	g->stream = gpu_u32(c);
}

/* Start from the running time *t, end from a duration when `dur`. */
static void gpu_time(cur *c, fmt_gpu *g, uint64_t *t, int dur)
{
	*t += (uint64_t)cm_unzigzag(cur_varint(c));
	g->start_ns = *t;
	uint64_t d = dur ? cur_varint(c) : 0;
	g->end_ns = g->start_ns + d;
	if (g->end_ns < g->start_ns || (int64_t)*t < 0)
		c->bad = 1;
}

/* Hand a GPU or GPUX record to the callback as an event, at its start on the tick clock. */
static int deliver_gpu(rd *r, fmt_gpu *g)
{
	fmt_file *f = r->f;
	double ticks = f->fit_b > 0 ? ((double)g->start_ns - f->fit_a) / f->fit_b : (double)g->start_ns;
	fmt_event ev = {.type = FMT_EV_GPU, .thread = UINT32_MAX, .gpu = g, .tid = g->tid,
			.ticks = ticks > 0 ? (uint64_t)llround(ticks) : 0};
	return r->fn ? r->fn(r->ctx, f, &ev) : 0;
}

/* Decode one timed record of `type` into *g. */
static void gpu_record(cur *c, unsigned type, fmt_gpu *g, uint64_t *t)
{
	g->type = (uint8_t)type;
	switch (type) {
	case FMT_GR_KERNEL:
		gpu_where(c, g);
		gpu_time(c, g, t, 1);
		g->name = gpu_u32(c);
		for (int i = 0; i < 3; i++)
			g->grid[i] = gpu_u32(c);
		for (int i = 0; i < 3; i++)
			g->block[i] = gpu_u32(c);
		g->regs = gpu_u32(c);
		g->smem_static = gpu_u32(c);
		g->smem_dynamic = gpu_u32(c);
		g->correlation = gpu_u32(c);
		break;
	case FMT_GR_MEMCPY:
		gpu_where(c, g);
		gpu_time(c, g, t, 1);
		g->kind = gpu_enum(c, FMT_CPY_MAX);
		g->mem_kind = gpu_enum(c, FMT_GMEM_MAX);
		g->dst_kind = gpu_enum(c, FMT_GMEM_MAX);
		g->bytes = cur_varint(c);
		g->correlation = gpu_u32(c);
		g->src_device = gpu_u32(c);
		g->dst_device = gpu_u32(c);
		break;
	case FMT_GR_MEMSET:
		gpu_where(c, g);
		gpu_time(c, g, t, 1);
		g->mem_kind = gpu_enum(c, FMT_GMEM_MAX);
		g->bytes = cur_varint(c);
		g->value = cur_varint(c);
		g->correlation = gpu_u32(c);
		break;
	case FMT_GR_SYNC:
		g->kind = gpu_enum(c, FMT_SYNC_MAX);
		g->context = gpu_u32(c);
		g->stream = gpu_u32(c);
		gpu_time(c, g, t, 1);
		g->correlation = gpu_u32(c);
		g->value = cur_varint(c);
		break;
	case FMT_GR_API:
		g->kind = gpu_enum(c, FMT_API_DRIVER);
		g->tid = cur_varint(c);
		gpu_time(c, g, t, 1);
		g->name = gpu_u32(c);
		g->cbid = gpu_u32(c);
		g->correlation = gpu_u32(c);
		g->value = cur_varint(c);
		break;
	case FMT_GR_MEMORY:
		g->kind = cur_u8(c);
		if (g->kind != FMT_GMOP_ALLOC && g->kind != FMT_GMOP_FREE)
			c->bad = 1;
		g->mem_kind = gpu_enum(c, FMT_GMEM_MAX);
		g->dst_kind = gpu_enum(c, 2);
		gpu_where(c, g);
		gpu_time(c, g, t, 0);
		g->address = cur_varint(c);
		g->bytes = cur_varint(c);
		g->correlation = gpu_u32(c);
		break;
	case FMT_GR_OVERHEAD:
		g->kind = gpu_enum(c, FMT_OVH_MAX);
		g->mem_kind = gpu_enum(c, FMT_OBJ_MAX);
		g->tid = cur_varint(c);
		gpu_time(c, g, t, 1);
		break;
	case FMT_GR_NVML:
		g->device = gpu_u32(c);
		gpu_time(c, g, t, 0);
		g->value = cur_varint(c);
		if (g->value >> FMT_NV_COUNT)
			c->bad = 1;
		for (int i = 0; i < FMT_NV_COUNT && !c->bad; i++)
			if (g->value >> i & 1)
				g->nvml[i] = cur_varint(c);
		break;
	case FMT_GR_TIMER:
		g->name = gpu_u32(c);
		g->tid = cur_varint(c);
		gpu_time(c, g, t, 0);
		g->value = cur_varint(c);
		g->end_ns = g->start_ns + cur_varint(c);
		if (g->end_ns < g->start_ns)
			c->bad = 1;
		g->step = cur_varint(c);
		break;
	default:
		c->bad = 1;
		break;
	}
}

static int decode_gpu(rd *r, cur *c)
{
	fmt_file *f = r->f;
	fmt_gpu_info *in = &f->gpu;
	in->cupti_version = cur_varint(c);
	in->clock = cur_u8(c);
	in->offset_ns = cm_unzigzag(cur_varint(c));
	in->offset_error_ns = cur_varint(c);
	in->flags = cur_varint(c);
	in->records = cur_varint(c);
	in->dropped = cur_varint(c);
	in->cupti_dropped = cur_varint(c);
	in->unknown = cur_varint(c);
	if (c->bad || in->clock > FMT_GCLK_NONE || in->flags & ~(uint64_t)FMT_GPU_KERNELS_ONLY)
		return fail(r, FENNEC_ECORRUPT, r->chunk_off, "GPU: bad chunk prefix");
	f->has_gpu = 1;
	uint64_t t = 0;
	const uint8_t *base = c->p;
	while (c->p < c->end && !c->bad) {
		const uint8_t *at = c->p;
		unsigned type = cur_u8(c);
		if (type == FMT_GR_DEVICE || type == FMT_GR_STRING) {
			int rc = type == FMT_GR_DEVICE ? gpu_device(r, c, at, base) : gpu_string(r, c, at, base);
			if (rc)
				return rc;
			continue;
		}
		if (type < FMT_GR_KERNEL || type > FMT_GR_TIMER)
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "GPU: unknown record type %u at payload byte %td", type, at - base);
		fmt_gpu g = {0};
		gpu_record(c, type, &g, &t);
		if (c->bad)
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "GPU: bad or truncated record (type %u) at payload byte %td",
				    type, at - base);
		if (g.name && (g.name >= f->ngpu_strings || !f->gpu_strings[g.name]))
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "GPU: record at payload byte %td names undefined string %u",
				    at - base, g.name);
		g.name_str = g.name ? f->gpu_strings[g.name] : NULL;
		int rc = deliver_gpu(r, &g);
		if (rc)
			return rc;
	}
	return c->bad ? fail(r, FENNEC_ECORRUPT, r->chunk_off, "GPU: record runs past the end of the chunk") : 0;
}

/* REACH (1.6): the reachability scan at the end of a full-mode session, per heap stack.
 * One per file; its stacks must have been defined. */
static int decode_reach(rd *r, cur *c)
{
	fmt_file *f = r->f;
	if (f->has_reach)
		return fail(r, FENNEC_ECORRUPT, r->chunk_off, "REACH: a second REACH chunk");
	f->reach_status = cur_varint(c);
	f->reach_ns = cur_varint(c);
	f->reach_root_bytes = cur_varint(c);
	f->reach_heap_bytes = cur_varint(c);
	uint64_t n = cur_varint(c);
	if (c->bad || (n && f->reach_status) || n > (uint64_t)(c->end - c->p) / 5)
		return fail(r, FENNEC_ECORRUPT, r->chunk_off, "REACH: bad chunk prefix");
	f->reach = n ? calloc(n, sizeof *f->reach) : NULL;
	if (n && !f->reach)
		return fail(r, FENNEC_ENOMEM, r->chunk_off, "out of memory for %llu REACH entries", (unsigned long long)n);
	for (uint64_t i = 0; i < n; i++) {
		fmt_reach *e = &f->reach[i];
		e->stack = cur_varint(c);
		e->reach_count = cur_varint(c);
		e->reach_bytes = cur_varint(c);
		e->lost_count = cur_varint(c);
		e->lost_bytes = cur_varint(c);
		if (c->bad || !fmt_heap_stack_get(f, e->stack) || (!e->reach_count && !e->lost_count) ||
		    (i && e->stack <= f->reach[i - 1].stack))
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "REACH: bad entry %llu", (unsigned long long)i);
	}
	if (c->p != c->end)
		return fail(r, FENNEC_ECORRUPT, r->chunk_off, "REACH: %td bytes after the entries", c->end - c->p);
	f->nreach = (uint32_t)n;
	f->has_reach = 1;
	return 0;
}

/* GPUX (1.4): NVTX start/end ranges and marks, NVLink counters, delivered as FMT_EV_GPU
 * events of types FMT_GR_RANGE_START .. FMT_GR_NVLINK. Messages are copied into a buffer
 * of this call: borrowed by the callback. */
static int decode_gpux(rd *r, cur *c)
{
	fmt_file *f = r->f;
	f->gpux_dropped = cur_varint(c);
	if (c->bad)
		return fail(r, FENNEC_ECORRUPT, r->chunk_off, "GPUX: bad chunk prefix");
	f->has_gpu = 1;
	uint64_t t = 0;
	const uint8_t *base = c->p;
	char text[FMT_GPUX_TEXT_MAX + 1];
	while (c->p < c->end && !c->bad) {
		const uint8_t *at = c->p;
		unsigned type = cur_u8(c);
		fmt_gpu g = {0};
		text[0] = 0;
		switch (type) {
		case FMT_GX_RANGE_START:
		case FMT_GX_RANGE_END:
			g.type = type == FMT_GX_RANGE_START ? FMT_GR_RANGE_START : FMT_GR_RANGE_END;
			g.range_id = cur_varint(c);
			g.tid = cur_varint(c);
			gpu_time(c, &g, &t, 0);
			break;
		case FMT_GX_MARK:
			g.type = FMT_GR_MARK;
			g.tid = cur_varint(c);
			gpu_time(c, &g, &t, 0);
			break;
		case FMT_GX_NVLINK:
			g.type = FMT_GR_NVLINK;
			g.device = gpu_u32(c);
			gpu_time(c, &g, &t, 0);
			g.tx_bytes = cur_varint(c);
			g.rx_bytes = cur_varint(c);
			break;
		default:
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "GPUX: unknown record type %u at payload byte %td", type,
				    at - base);
		}
		if (type == FMT_GX_RANGE_START || type == FMT_GX_MARK) {
			uint64_t n = cur_varint(c);
			if (c->bad || n > FMT_GPUX_TEXT_MAX || n > (uint64_t)(c->end - c->p))
				c->bad = 1;
			else {
				memcpy(text, c->p, n);
				text[n] = 0;
				c->p += n;
			}
			g.text = text;
		}
		if (c->bad || (g.type != FMT_GR_NVLINK && !g.range_id && g.type != FMT_GR_MARK))
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "GPUX: bad or truncated record (type %u) at payload byte %td",
				    type, at - base);
		int rc = deliver_gpu(r, &g);
		if (rc)
			return rc;
	}
	return c->bad ? fail(r, FENNEC_ECORRUPT, r->chunk_off, "GPUX: record runs past the end of the chunk") : 0;
}

const fmt_gpu_device *fmt_gpu_device_get(const fmt_file *f, uint32_t id)
{
	for (uint32_t i = 0; i < f->ngpu_devices; i++)
		if (f->gpu_devices[i].id == id)
			return &f->gpu_devices[i];
	return NULL;
}

/* A thread of a HEAP2 chunk: the state its records leave implied. */
typedef struct h2thread {
	uint64_t tid;
	uint64_t stack;      /* of its latest ALLOC or FREE (0: none yet) */
	uint64_t last_stack; /* its latest ALLOC, while not freed (0: none) */
	uint64_t last_size;
} h2thread;

static int decode_heap2(rd *r, cur *c)
{
	fmt_file *f = r->f;
	int rc = heap_counters(r, c);
	if (rc)
		return rc;
	uint64_t shift = cur_varint(c);
	if (c->bad || shift > 62)
		return fail(r, FENNEC_ECORRUPT, r->chunk_off, "HEAP2: bad time unit");
	uint64_t q = 0, step = 0;
	h2thread *th = NULL;
	uint32_t nth = 0, cap = 0, cur_th = UINT32_MAX;
	const uint8_t *base = c->p;
	while (c->p < c->end && !c->bad) {
		const uint8_t *at = c->p;
		unsigned tag = cur_u8(c), type = tag & FMT_H2_TYPE, fl = tag & ~(unsigned)FMT_H2_TYPE;
		fmt_event ev = {.thread = UINT32_MAX};
		h2thread *t = cur_th < nth ? &th[cur_th] : NULL;
		const char *bad = NULL;
		if (fl && type != FMT_H2_ALLOC && type != FMT_H2_FREE)
			bad = "flags on a record that takes none";
		else if ((type == FMT_H2_ALLOC || type == FMT_H2_FREE) && !t)
			bad = "an allocation or free before any THREAD record";
		if (bad) {
			free(th);
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "HEAP2: %s at payload byte %td", bad, at - base);
		}
		switch (type) {
		case FMT_H2_TIME:
			q += (uint64_t)cm_unzigzag(cur_varint(c));
			if (q > (UINT64_MAX >> 1 >> shift))
				c->bad = 1;
			continue;
		case FMT_H2_STEP:
			step = cur_varint(c);
			continue;
		case FMT_H2_THREAD: {
			uint64_t idx = cur_varint(c);
			if (idx == nth && !c->bad) { /* a thread new to this chunk: its tid follows */
				if (grow((void **)&th, &cap, nth + 1, sizeof *th, MAX_THREADS) < 0) {
					free(th);
					return fail(r, FENNEC_ENOMEM, r->chunk_off, "out of memory");
				}
				th[nth++] = (h2thread){cur_varint(c), 0, 0, 0};
			} else if (idx > nth) {
				c->bad = 1;
			}
			cur_th = (uint32_t)idx;
			continue;
		}
		case FMT_H2_STACK:
			rc = heap_stack(r, c, at, base);
			if (rc) {
				free(th);
				return rc;
			}
			continue;
		case FMT_H2_ALLOC:
			ev.type = FMT_EV_ALLOC;
			ev.size = cur_varint(c);
			ev.id = (uint32_t)(fl & FMT_H2_SAME ? t->stack : cur_varint(c));
			if (fl & ~(unsigned)FMT_H2_SAME)
				c->bad = 1;
			t->stack = t->last_stack = ev.id;
			t->last_size = ev.size;
			ev.u = step;
			ev.flags = FMT_HEV_NOADDR;
			break;
		case FMT_H2_FREE:
			ev.type = FMT_EV_FREE;
			ev.flags = FMT_HEV_NOADDR;
			if (fl & FMT_H2_LAST) {
				if (fl != FMT_H2_LAST || !t->last_stack)
					c->bad = 1;
				ev.id = (uint32_t)t->last_stack;
				ev.size = t->last_size;
				ev.flags |= FMT_HEV_TEMP;
			} else {
				ev.id = (uint32_t)(fl & FMT_H2_SAME ? t->stack : cur_varint(c));
				ev.size = cur_varint(c);
				if (fl & FMT_H2_TEMP)
					ev.flags |= FMT_HEV_TEMP;
			}
			if (ev.flags & FMT_HEV_TEMP)
				t->last_stack = 0;
			t->stack = ev.id;
			break;
		case FMT_H2_SNAP:
			heap_snap(c, &ev);
			break;
		default:
			free(th);
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "HEAP2: unknown record type %u at payload byte %td", type,
				    at - base);
		}
		if (c->bad) {
			free(th);
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "HEAP2: bad record at payload byte %td", at - base);
		}
		if (type != FMT_H2_SNAP) {
			if (!fmt_heap_stack_get(f, ev.id)) {
				free(th);
				return fail(r, FENNEC_ECORRUPT, r->chunk_off, "HEAP2: %s at payload byte %td names undefined stack %u",
					    type == FMT_H2_ALLOC ? "allocation" : "free", at - base, ev.id);
			}
			ev.tid = t->tid;
		}
		ev.ticks = q << shift;
		if (ev.ticks > f->last_ticks)
			f->last_ticks = ev.ticks;
		if (r->fn && (rc = r->fn(r->ctx, f, &ev)) != 0) {
			free(th);
			return rc;
		}
	}
	free(th);
	return c->bad ? fail(r, FENNEC_ECORRUPT, r->chunk_off, "HEAP2: record runs past the end of the chunk") : 0;
}

const fmt_module *fmt_module_at(const fmt_file *f, uint64_t addr, uint64_t ticks)
{
	const fmt_module *best = NULL, *any = NULL;
	for (size_t i = 0; i < f->nmodules; i++) {
		const fmt_module *m = &f->modules[i];
		if (addr < m->lo || addr >= m->hi)
			continue;
		int in = 0;
		for (uint32_t k = 0; k < m->nsegs && !in; k++)
			in = addr >= m->segs[k].start && addr < m->segs[k].end;
		if (!in)
			continue;
		any = m;
		if (m->ticks <= ticks)
			best = m;
	}
	return best ? best : any;
}

/* Least-squares fit of mono_ns against ticks over the calibration points. */
static void fit_clock(fmt_file *f)
{
	double b = f->clock == 1 ? 1.0 : (f->ticks_per_ns_hdr > 0 ? 1.0 / f->ticks_per_ns_hdr : 1.0);
	if (f->ncalib >= 2) {
		double mt = 0, mm = 0;
		for (size_t i = 0; i < f->ncalib; i++) {
			mt += (double)(f->calib[i].ticks - f->calib[0].ticks);
			mm += (double)(f->calib[i].mono_ns - f->calib[0].mono_ns);
		}
		mt /= (double)f->ncalib;
		mm /= (double)f->ncalib;
		double sxy = 0, sxx = 0;
		for (size_t i = 0; i < f->ncalib; i++) {
			double x = (double)(f->calib[i].ticks - f->calib[0].ticks) - mt;
			double y = (double)(f->calib[i].mono_ns - f->calib[0].mono_ns) - mm;
			sxy += x * y;
			sxx += x * x;
		}
		/* Points closer than 1 ms apart fit worse than the measured header rate. */
		double span = (double)(f->calib[f->ncalib - 1].mono_ns - f->calib[0].mono_ns);
		if (sxx > 0 && span > 1e6 && sxy / sxx > 0)
			b = sxy / sxx;
	}
	f->fit_b = b;
	f->fit_a = (double)f->start_mono_ns - b * (double)f->start_ticks;
}

/* ---- SYSTEM and ENERGY (docs/format.md "System metrics", "Energy") ---- */

static uint64_t ns_to_ticks(const fmt_file *f, uint64_t ns)
{
	double t = f->fit_b > 0 ? ((double)ns - f->fit_a) / f->fit_b : (double)ns;
	return t > 0 ? (uint64_t)llround(t) : 0;
}

static int decode_system(rd *r, cur *c)
{
	fmt_file *f = r->f;
	f->sys_taken = cur_varint(c);
	uint64_t t = 0;
	const uint8_t *base = c->p;
	while (c->p < c->end && !c->bad) {
		const uint8_t *at = c->p;
		fmt_sys s = {0};
		s.reason = cur_u8(c);
		t += (uint64_t)cm_unzigzag(cur_varint(c));
		s.t_ns = t;
		s.step = cur_varint(c);
		uint64_t present = cur_varint(c);
		/* one varint per bit set; bits this reader does not know are read and dropped */
		for (unsigned i = 0; i < 64 && !c->bad; i++)
			if (present >> i & 1) {
				uint64_t v = cur_varint(c);
				if (i < FMT_SY_COUNT)
					s.v[i] = v;
			}
		s.present = present & ((1ull << FMT_SY_COUNT) - 1);
		if (c->bad || s.reason > FMT_SYS_REASON_MAX || (int64_t)t < 0)
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "SYSTEM: bad or truncated record at payload byte %td",
				    at - base);
		fmt_event ev = {.type = FMT_EV_SYS, .thread = UINT32_MAX, .sys = &s, .ticks = ns_to_ticks(f, s.t_ns)};
		int rc = r->fn ? r->fn(r->ctx, f, &ev) : 0;
		if (rc)
			return rc;
	}
	return 0;
}

#define MAX_ENERGY_DOMAINS 4096u

static int decode_energy(rd *r, cur *c)
{
	fmt_file *f = r->f;
	uint64_t t = 0;
	const uint8_t *base = c->p;
	while (c->p < c->end && !c->bad) {
		const uint8_t *at = c->p;
		fmt_energy e = {0};
		e.type = cur_u8(c);
		uint64_t id = cur_varint(c);
		if (c->bad || !id || id >= MAX_ENERGY_DOMAINS || (e.type != FMT_ER_DOMAIN && e.type != FMT_ER_READING))
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "ENERGY: bad record at payload byte %td", at - base);
		e.domain = (uint32_t)id;
		if (e.type == FMT_ER_DOMAIN) {
			unsigned src = cur_u8(c), kind = cur_u8(c);
			char *name = cur_string(c);
			if (c->bad || !src || src > FMT_ES_MAX || kind > FMT_EK_MAX ||
			    grow((void **)&f->energy_domains, &f->nenergy_domains, (uint32_t)id + 1, sizeof *f->energy_domains,
				 MAX_ENERGY_DOMAINS) < 0) {
				free(name);
				return fail(r, FENNEC_ECORRUPT, r->chunk_off, "ENERGY: bad DOMAIN record at payload byte %td", at - base);
			}
			fmt_energy_domain *d = &f->energy_domains[id];
			if (d->defined) {
				/* The writer names its domains again in every segment of a capped
				 * recording (read joined, as one file). The readings handed on before
				 * hold this name (the analysis keeps the pointer): the first
				 * definition stays for the file's life. Freeing it here left the
				 * analysis a freed name (heap-use-after-free in the JSON report,
				 * found by analysis_fuzz). A domain redefined otherwise is corrupt. */
				int same = d->source == src && d->kind == kind && !strcmp(d->name, name);
				free(name);
				if (!same)
					return fail(r, FENNEC_ECORRUPT, r->chunk_off,
						    "ENERGY: DOMAIN record at payload byte %td redefines domain %u", at - base,
						    (unsigned)id);
				continue;
			}
			*d = (fmt_energy_domain){src, kind, name, 1};
			continue;
		}
		t += (uint64_t)cm_unzigzag(cur_varint(c));
		e.t_ns = t;
		e.uj = cur_varint(c);
		e.max_uj = cur_varint(c);
		if (c->bad || (int64_t)t < 0)
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "ENERGY: truncated READING at payload byte %td", at - base);
		if (id >= f->nenergy_domains || !f->energy_domains[id].defined)
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "ENERGY: READING at payload byte %td names undefined domain %u",
				    at - base, (unsigned)id);
		e.source = (uint8_t)f->energy_domains[id].source;
		e.kind = (uint8_t)f->energy_domains[id].kind;
		e.name = f->energy_domains[id].name;
		fmt_event ev = {.type = FMT_EV_ENERGY, .thread = UINT32_MAX, .energy = &e, .ticks = ns_to_ticks(f, e.t_ns)};
		int rc = r->fn ? r->fn(r->ctx, f, &ev) : 0;
		if (rc)
			return rc;
	}
	return 0;
}

/* Whether a whole chunk starts at `off`: plausible header fields (a zstd payload opens
 * with the zstd magic), its payload inside the file and its checksum right. The search
 * is bounded by r->scan_budget, so that a file crafted full of near-headers costs a few
 * times its size, not its square. */
static int whole_chunk_at(rd *r, const uint8_t *data, size_t len, uint64_t off)
{
	if (len - off < FMT_CHUNK_HDR_LEN)
		return 0;
	const uint8_t *h = data + off;
	unsigned codec = h[1];
	uint32_t stored = cm_le32(h + 4), raw = cm_le32(h + 8);
	if (h[0] == 0 || h[2] || h[3] || codec > FMT_ZSTD || raw > FMT_MAX_RAW ||
	    stored > len - off - FMT_CHUNK_HDR_LEN)
		return 0;
	if (codec == FMT_RAW ? stored != raw : stored < 4 || memcmp(h + FMT_CHUNK_HDR_LEN, "\x28\xb5\x2f\xfd", 4) != 0)
		return 0;
	if (r->scan_budget < stored)
		return 0;
	r->scan_budget -= stored;
	return cm_crc32c(cm_crc32c(0, h, 12), h + FMT_CHUNK_HDR_LEN, stored) == cm_le32(h + 12);
}

/* The offset of the first whole chunk after byte `off`, or 0 when none follows. */
static uint64_t next_whole_chunk(rd *r, const uint8_t *data, size_t len, uint64_t off)
{
	for (uint64_t q = off + 1; q < len && len - q >= FMT_CHUNK_HDR_LEN; q++)
		if (whole_chunk_at(r, data, len, q))
			return q;
	return 0;
}

/* FMT_READ_RESYNC, after the HEADER: the damaged chunk at `off` is skipped to the next whole
 * chunk (`next`, found by the caller or here), recorded in f->skips. Returns where reading
 * goes on, or 0 when it cannot (no resync, no HEADER yet, no whole chunk after). */
static uint64_t skip_damage(rd *r, const uint8_t *data, size_t len, uint64_t off, uint64_t next, unsigned why)
{
	fmt_file *f = r->f;
	if (!(r->flags & FMT_READ_RESYNC) || !r->seen_header)
		return 0;
	if (!next && !(next = next_whole_chunk(r, data, len, off)))
		return 0;
	if (f->nskips < FMT_MAX_SKIPS)
		f->skips[f->nskips] = (fmt_skip){off, next - off, why, data[off], cm_le32(data + off + 4)};
	f->nskips++;
	f->skipped_bytes += next - off;
	return next;
}

/* SEGMENT (1.9): the opening of a capped recording's segment file (docs/format.md). */
static int decode_seg(rd *r, cur *c)
{
	fmt_file *f = r->f;
	uint64_t k = cur_varint(c), rec = cur_varint(c), mono = cur_varint(c), ticks = cur_varint(c);
	uint64_t steps = cur_varint(c), events = cur_varint(c), cu = cur_varint(c), cs = cur_varint(c);
	uint64_t n = cur_varint(c);
	if (c->bad)
		return fail(r, FENNEC_ECORRUPT, r->chunk_off, "SEGMENT: truncated");
	if (rec != f->recording_id)
		return fail(r, FENNEC_ECORRUPT, r->chunk_off, "SEGMENT %llu belongs to another recording (id %016llx, not %016llx)",
			    (unsigned long long)k, (unsigned long long)rec, (unsigned long long)f->recording_id);
	if (r->seg_seen && k != r->seg_last + 1)
		return fail(r, FENNEC_ECORRUPT, r->chunk_off, "SEGMENT %llu follows segment %llu", (unsigned long long)k,
			    (unsigned long long)r->seg_last);
	int first = !r->seg_seen;
	r->seg_seen++;
	r->seg_last = k;
	f->seg_count++;
	if (first) {
		f->seg_first = k;
		if (k > 0) {
			f->seg_dropped = 1;
			f->seg_session_start_mono_ns = f->start_mono_ns;
			f->seg_session_start_ticks = f->start_ticks;
			f->start_mono_ns = mono;
			f->start_ticks = ticks;
			f->seg_steps_before = steps;
			f->seg_events_before = events;
			if (f->has_cpu_start) {
				f->cpu_start_user_ns = cu;
				f->cpu_start_sys_ns = cs;
			}
		}
	}
	for (uint64_t i = 0; i < n; i++) {
		uint64_t idx = cur_varint(c), tk = cur_varint(c), depth = cur_varint(c);
		if (c->bad || depth > FMT_MAX_DEPTH || idx >= f->nthreads || !f->threads[idx].known)
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "SEGMENT: bad thread record %llu", (unsigned long long)i);
		fmt_thread_rec *t = &f->threads[idx];
		/* The clock goes on from the thread's last event before the segment, also over a
		 * flush the writer lost; the regions open then are opened here only when nothing
		 * before was read. */
		t->last_ticks = tk;
		for (uint64_t d = 0; d < depth; d++) {
			uint64_t id = cur_varint(c);
			if (c->bad || id >= MAX_SITES)
				return fail(r, FENNEC_ECORRUPT, r->chunk_off, "SEGMENT: bad region in thread record %llu", (unsigned long long)i);
			if (!first || !f->seg_dropped)
				continue;
			/* at the thread's clock, which its next event's delta follows (the segment's
			 * first events may be older than its opening, committed before that flush) */
			fmt_event ev = {.type = FMT_EV_BEGIN, .thread = (uint32_t)idx, .id = (uint32_t)id, .ticks = tk};
			t->depth++;
			if (r->bt) {
				bt_before_event(r, (uint32_t)idx, tk);
				bt_region(r, (uint32_t)idx, FMT_EV_BEGIN, ev.id);
			}
			if (r->fn) {
				int rc = deliver_ev(r, &ev);
				if (rc)
					return rc;
			}
		}
	}
	return 0;
}

static int read_chunks_from(rd *r, const uint8_t *data, size_t len, uint64_t start);
static void fit_clock(fmt_file *f);

static int read_chunks(rd *r, const uint8_t *data, size_t len)
{
	return read_chunks_from(r, data, len, 0);
}

/* Decode the chunks from byte `start` (0: the file's start, with its preamble). With
 * r->follow a chunk not yet whole (a growing file) stops reading there, at r->stop_off. */
static int read_chunks_from(rd *r, const uint8_t *data, size_t len, uint64_t start)
{
	fmt_file *f = r->f;
	f->size = len;
	if (r->follow && len < (start ? start : FMT_PREAMBLE_LEN)) {
		r->stop_off = start;
		return 0;
	}
	if (start)
		goto chunks;
	if (len < FMT_PREAMBLE_LEN) {
		if (len >= 4 && memcmp(data, FMT_MAGIC, 4) != 0)
			return fail(r, FENNEC_EFOREIGN, 0, "not a fennec profile (wrong magic)");
		return fail(r, len ? FENNEC_ETRUNCATED : FENNEC_ENODATA, len, len ? "file ends inside the 16-byte preamble" : "empty file");
	}
	if (memcmp(data, FMT_MAGIC, 8) != 0)
		return fail(r, FENNEC_EFOREIGN, 0, "not a fennec profile (wrong magic)");
	f->major = cm_le16(data + 8);
	f->minor = cm_le16(data + 10);
	if (f->major > FMT_MAJOR)
		return fail(r, FENNEC_EVERSION, 8, "format version %u.%u is newer than this fennec reads (%u.x); upgrade fennec",
			    f->major, f->minor, FMT_MAJOR);
	if (f->major == 0)
		return fail(r, FENNEC_ECORRUPT, 8, "format version 0 is invalid");
chunks:;
	uint64_t off = start ? start : FMT_PREAMBLE_LEN;
	r->scan_budget = 4 * (uint64_t)len + (1u << 20);
	r->dropped = 0;
	while (off < len) {
		r->chunk_off = off;
		r->stop_off = off;
		if (r->follow && (len - off < FMT_CHUNK_HDR_LEN ||
				  cm_le32(data + off + 4) > len - off - FMT_CHUNK_HDR_LEN)) {
			/* not yet whole: the writer is still at it. (A corrupt length stalls the
			 * following here; the full reader says what it is.) */
			return 0;
		}
		drop_behind(r, data, off);
		if (len - off < FMT_CHUNK_HDR_LEN) {
			if (!r->seen_header)
				return fail(r, FENNEC_ETRUNCATED, off, "file ends inside the first chunk header");
			f->torn_offset = off;
			break;
		}
		const uint8_t *h = data + off;
		unsigned type = h[0], codec = h[1];
		uint32_t stored = cm_le32(h + 4), raw = cm_le32(h + 8), crc = cm_le32(h + 12);
		if (codec > FMT_ZSTD || raw > FMT_MAX_RAW || stored > FMT_MAX_RAW + (FMT_MAX_RAW >> 7) + 1024 ||
		    (codec == FMT_RAW && stored != raw) || cm_le16(h + 2) != 0) {
			uint64_t next = skip_damage(r, data, len, off, 0, FMT_SKIP_HEADER);
			if (next) {
				off = next;
				continue;
			}
			return fail(r, FENNEC_ECORRUPT, off, "bad chunk header (type %u, codec %u, stored %u, raw %u)", type, codec, stored, raw);
		}
		if (stored > len - off - FMT_CHUNK_HDR_LEN) {
			if (!r->seen_header)
				return fail(r, FENNEC_ETRUNCATED, off, "file ends inside the HEADER chunk");
			/* A torn tail has nothing whole after it. A chunk that claims more than the
			 * file holds while a whole chunk follows has a corrupt length instead. */
			uint64_t next = next_whole_chunk(r, data, len, off);
			if (!next) {
				f->torn_offset = off; /* a partial chunk: the run was cut mid-write */
				break;
			}
			if (skip_damage(r, data, len, off, next, FMT_SKIP_LENGTH)) {
				off = next;
				continue;
			}
			return fail(r, FENNEC_ECORRUPT, off,
				    "chunk (type %u) claims %u bytes, more than the %llu left in the file, yet a whole chunk "
				    "follows at byte %llu: its length is corrupt, not a torn tail (--force skips the %llu bytes to it)",
				    type, stored, (unsigned long long)(len - off - FMT_CHUNK_HDR_LEN), (unsigned long long)next,
				    (unsigned long long)(next - off));
		}
		const uint8_t *payload = h + FMT_CHUNK_HDR_LEN;
		int clock_chunk = !r->seen_header || type == FMT_STATS || type == FMT_END;
		if (r->calib_pass && !clock_chunk && !(r->flags & FMT_READ_RESYNC)) {
			off += FMT_CHUNK_HDR_LEN + stored;
			continue;
		}
		/* With FMT_READ_RESYNC the first pass checks every chunk, to skip what the second will. */
		uint32_t got = cm_crc32c(cm_crc32c(0, h, 12), payload, stored);
		if (got != crc) {
			uint64_t next = skip_damage(r, data, len, off, 0, FMT_SKIP_CHECKSUM);
			if (next) {
				off = next;
				continue;
			}
			return fail(r, FENNEC_ECHECKSUM, off, "chunk checksum mismatch (type %u, stored crc %08x, computed %08x)", type, crc, got);
		}
		if (r->calib_pass && !clock_chunk) {
			off += FMT_CHUNK_HDR_LEN + stored;
			continue;
		}
		if (!r->seen_header && type != FMT_HEADER)
			return fail(r, FENNEC_ECORRUPT, off, "first chunk is type %u, not HEADER", type);
		const uint8_t *p = payload;
		if (codec == FMT_ZSTD) {
			if (raw > r->bufcap) {
				uint8_t *b = realloc(r->buf, raw);
				if (!b)
					return fail(r, FENNEC_ENOMEM, off, "out of memory for a %u-byte chunk", raw);
				r->buf = b;
				r->bufcap = raw;
			}
			if (!r->dctx && !(r->dctx = ZSTD_createDCtx()))
				return fail(r, FENNEC_ENOMEM, off, "out of memory");
			size_t z = ZSTD_decompressDCtx(r->dctx, r->buf, raw, payload, stored);
			if (ZSTD_isError(z) || z != raw)
				return fail(r, FENNEC_ECOMPRESS, off, "chunk does not decompress to its %u bytes (%s)", raw,
					    ZSTD_isError(z) ? ZSTD_getErrorName(z) : "size differs");
			p = raw ? r->buf : payload; /* r->buf is NULL before the first chunk with a payload */
		}
		cur c = {p, p + raw, 0};
		int rc = 0;
		/* Other chunks change the tables the callback reads, or call it themselves. */
		if (r->pipe && type != FMT_EVENTS && (rc = fmt_pipe_drain(r->pipe)) != 0)
			return rc;
		switch (type) {
		case FMT_HEADER:
			if (r->seen_header)
				return fail(r, FENNEC_ECORRUPT, off, "second HEADER chunk");
			r->seen_header = 1;
			rc = decode_header(r, &c);
			if (!rc && r->header_only)
				return 0;
			if (!rc && r->follow)
				fit_clock(f); /* the header's rate, for the events of this poll */
			break;
		case FMT_SITES: rc = decode_sites(r, &c); break;
		case FMT_THREAD: rc = decode_threads(r, &c); break;
		case FMT_EVENTS: rc = decode_events(r, &c); break;
		case FMT_STATS: rc = decode_stats(r, &c, 0); break;
		case FMT_THREAD_END: rc = decode_thread_end(r, &c); break;
		case FMT_END: rc = decode_stats(r, &c, 1); break;
		case FMT_SAMPLES: rc = decode_samples(r, &c); break;
		case FMT_MODULES: rc = decode_modules(r, &c); break;
		case FMT_TASKS: rc = decode_tasks(r, &c); break;
		case FMT_HEAP: rc = decode_heap(r, &c); break;
		case FMT_HEAP2: rc = decode_heap2(r, &c); break;
		case FMT_GPU: rc = decode_gpu(r, &c); break;
		case FMT_GPUX: rc = decode_gpux(r, &c); break;
		case FMT_REACH: rc = decode_reach(r, &c); break;
		case FMT_PYCODE: rc = decode_pycode(r, &c); break;
		case FMT_SYSTEM: rc = decode_system(r, &c); break;
		case FMT_ENERGY: rc = decode_energy(r, &c); break;
		case FMT_COST: rc = decode_cost(r, &c); break;
		case FMT_SEGMENT: rc = decode_seg(r, &c); break;
		default: break; /* newer chunk type */
		}
		if (rc)
			return rc;
		off += FMT_CHUNK_HDR_LEN + stored;
		r->stop_off = off;
		if (type == FMT_END)
			break; /* anything after END is not part of this session */
	}
	if (!r->seen_header && r->follow)
		return 0;
	if (!r->seen_header)
		return fail(r, FENNEC_ETRUNCATED, off, "no HEADER chunk");
	f->cut_short = !f->has_end;
	return 0;
}

/* Two passes: the clock points first (small chunks only), so that events are delivered
 * with the final clock fit available; then everything, validated. */
static int read_two_pass(rd *r, const uint8_t *data, size_t len)
{
	fmt_file *f = r->f;
	fmt_error quiet;
	fmt_error *err = r->err;
	r->err = &quiet;
	r->calib_pass = 1;
	read_chunks(r, data, len); /* errors are reported by the second pass */
	fit_clock(f);
	double a = f->fit_a, b = f->fit_b;
	fmt_calib *calib = f->calib;
	size_t ncalib = f->ncalib, cap = f->calib_cap;
	char *path = f->path;
	fmt_file_free_records(f);
	memset(f, 0, sizeof *f);
	f->path = path;
	f->calib = calib;
	f->ncalib = ncalib;
	f->calib_cap = cap;
	f->fit_a = a;
	f->fit_b = b;
	r->err = err;
	r->calib_pass = 0;
	r->seen_header = 0;
	r->threads_read = 0;
	int rc = read_chunks(r, data, len);
	if (r->pipe) { /* what was queued before the end (or the damage) is delivered first */
		int prc = fmt_pipe_drain(r->pipe);
		if (prc)
			rc = prc;
	}
	/* The first pass checks the clock chunks only: it also took the points of intact chunks
	 * after a damaged one, where the second pass stopped. What is kept of a damaged file
	 * (with --force) ends where the reading did: its time ends at the last clock point
	 * before the damage, not at one after it. The fit keeps every point: they are whole
	 * chunks, and the events were converted with it. */
	if (rc && err->code)
		while (f->ncalib > 1 && f->calib[f->ncalib - 1].offset >= r->chunk_off)
			f->ncalib--;
	for (size_t i = 0; i < f->ncalib; i++)
		if (f->calib[i].ticks > f->last_ticks)
			f->last_ticks = f->calib[i].ticks;
	/* Samples of a flush cut short (a torn tail; with --force, a corrupt chunk) take the
	 * regions and steps read so far. */
	if (r->bt && r->fn && (rc == 0 || err->code)) {
		fmt_error keep = *err;
		int frc = bt_flush(r);
		if (rc)
			*err = keep;
		else
			rc = frc;
	}
	return rc;
}

static int read_mem_parts(const uint8_t *data, size_t len, const char *name, unsigned flags, fmt_file *f,
			  fmt_event_fn fn, void *ctx, fmt_error *err, int header_only, int mapped,
			  const seg_part *parts, uint32_t nparts);

static int read_mem(const uint8_t *data, size_t len, const char *name, unsigned flags, fmt_file *f,
		    fmt_event_fn fn, void *ctx, fmt_error *err, int header_only, int mapped)
{
	return read_mem_parts(data, len, name, flags, f, fn, ctx, err, header_only, mapped, NULL, 0);
}

static int read_mem_parts(const uint8_t *data, size_t len, const char *name, unsigned flags, fmt_file *f,
			  fmt_event_fn fn, void *ctx, fmt_error *err, int header_only, int mapped,
			  const seg_part *parts, uint32_t nparts)
{
	memset(f, 0, sizeof *f);
	memset(err, 0, sizeof *err);
	f->path = strdup(name ? name : "<memory>");
	rd r = {.f = f, .name = f->path ? f->path : "<memory>", .err = err, .fn = fn, .ctx = ctx,
		.header_only = header_only, .flags = flags, .mapped = mapped, .parts = parts, .nparts = nparts};
	/* A second core for recordings big enough to repay a thread (pipe.h). */
	if (!header_only && fn && len >= FMT_PIPE_MIN_BYTES)
		r.pipe = fmt_pipe_start(fn, ctx, f);
	int rc = header_only ? read_chunks(&r, data, len) : read_two_pass(&r, data, len);
	fmt_pipe_stop(r.pipe);
	f->read_flags = flags;
	bt_free(r.bt);
	ZSTD_freeDCtx(r.dctx);
	free(r.buf);
	return rc;
}

int fmt_read_mem(const uint8_t *data, size_t len, const char *name, fmt_file *f, fmt_event_fn fn,
		 void *ctx, fmt_error *err)
{
	return read_mem(data, len, name, 0, f, fn, ctx, err, 0, 0);
}

int fmt_read_mem_ex(const uint8_t *data, size_t len, const char *name, unsigned flags, fmt_file *f,
		    fmt_event_fn fn, void *ctx, fmt_error *err)
{
	return read_mem(data, len, name, flags, f, fn, ctx, err, 0, 0);
}

/* ---- capped recordings: the entry file and its segments read as one ----
 *
 * docs/format.md, "Capped recordings". The segments PATH.seg.K kept (contiguous numbers)
 * follow the entry file's chunks, each without its preamble; errors in them name the
 * segment file and its own offsets (seg_part). */

static int seg_num_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Join `path` (its `len` bytes at `data`) and its segments. Returns 0 with *out NULL when
 * there are none, 0 with the joined buffer (malloc'd) and parts, or an error in err. */
static int seg_gather(const char *path, const uint8_t *data, size_t len, uint8_t **out, size_t *out_len,
		      seg_part **parts_out, uint32_t *nparts_out, fmt_error *err)
{
	*out = NULL;
	*parts_out = NULL;
	*nparts_out = 0;
	char dir[4096];
	snprintf(dir, sizeof dir, "%s", path);
	char *slash = strrchr(dir, '/');
	const char *base = slash ? slash + 1 : dir;
	if (slash)
		*slash = 0;
	const char *dname = slash ? (dir[0] ? dir : "/") : ".";
	DIR *d = opendir(dname);
	if (!d)
		return 0;
	uint64_t *nums = NULL;
	size_t n = 0, cap = 0;
	size_t bl = strlen(base), sl = strlen(FMT_SEG_SUFFIX);
	struct dirent *e;
	while ((e = readdir(d))) {
		const char *nm = e->d_name;
		if (strncmp(nm, base, bl) || strncmp(nm + bl, FMT_SEG_SUFFIX, sl) || !nm[bl + sl])
			continue;
		char *end;
		errno = 0;
		unsigned long long k = strtoull(nm + bl + sl, &end, 10);
		if (*end || errno || !(nm[bl + sl] >= '0' && nm[bl + sl] <= '9'))
			continue;
		if (n == cap) {
			uint64_t *nn = realloc(nums, (cap = cap ? 2 * cap : 16) * sizeof *nums);
			if (!nn) {
				free(nums);
				closedir(d);
				err->code = FENNEC_ENOMEM;
				snprintf(err->msg, sizeof err->msg, "%s: out of memory", path);
				return err->code;
			}
			nums = nn;
		}
		nums[n++] = k;
	}
	closedir(d);
	if (!n)
		return 0;
	qsort(nums, n, sizeof *nums, seg_num_cmp);
	int rc = 0;
	seg_part *parts = calloc(n, sizeof *parts);
	size_t total = len, cap_b = len + (1u << 20);
	uint8_t *buf = malloc(cap_b);
	if (!parts || !buf) {
		rc = FENNEC_ENOMEM;
		snprintf(err->msg, sizeof err->msg, "%s: out of memory", path);
		goto out;
	}
	memcpy(buf, data, len);
	for (size_t i = 0; i < n; i++) {
		char sp[4096 + 64];
		snprintf(sp, sizeof sp, "%s" FMT_SEG_SUFFIX "%llu", path, (unsigned long long)nums[i]);
		if (i && nums[i] != nums[i - 1] + 1) {
			rc = FENNEC_ECORRUPT;
			snprintf(err->msg, sizeof err->msg, "%s: segment %llu is missing (segments %llu and %llu are there): "
				 "a capped recording drops its oldest segments only", path, (unsigned long long)nums[i - 1] + 1,
				 (unsigned long long)nums[i - 1], (unsigned long long)nums[i]);
			goto out;
		}
		FILE *fp = fopen(sp, "rb");
		if (!fp) {
			/* dropped by the writer while we looked: only the oldest can be */
			if (i == 0 && errno == ENOENT)
				continue;
			rc = FENNEC_EIO;
			snprintf(err->msg, sizeof err->msg, "%.400s: %s", sp, strerror(errno));
			goto out;
		}
		uint8_t pre[FMT_PREAMBLE_LEN];
		size_t got = fread(pre, 1, sizeof pre, fp);
		if (got < FMT_PREAMBLE_LEN || memcmp(pre, FMT_MAGIC, 8) != 0) {
			fclose(fp);
			rc = got < FMT_PREAMBLE_LEN ? FENNEC_ETRUNCATED : FENNEC_EFOREIGN;
			snprintf(err->msg, sizeof err->msg, "%.400s: byte 0: %s", sp,
				 got < FMT_PREAMBLE_LEN ? "segment file ends inside its 16-byte preamble"
							: "not a fennec segment (wrong magic)");
			goto out;
		}
		parts[*nparts_out].at = total;
		parts[*nparts_out].file_off = FMT_PREAMBLE_LEN;
		parts[*nparts_out].path = strdup(sp);
		++*nparts_out;
		for (;;) {
			if (cap_b - total < (64u << 10)) {
				uint8_t *nb = realloc(buf, cap_b *= 2);
				if (!nb) {
					fclose(fp);
					rc = FENNEC_ENOMEM;
					snprintf(err->msg, sizeof err->msg, "%.400s: out of memory", sp);
					goto out;
				}
				buf = nb;
			}
			size_t k = fread(buf + total, 1, cap_b - total, fp);
			total += k;
			if (k == 0)
				break;
		}
		fclose(fp);
	}
	*out = buf;
	*out_len = total;
	*parts_out = parts;
	buf = NULL;
	parts = NULL;
out:
	if (rc) {
		err->code = rc;
		for (uint32_t i = 0; i < *nparts_out; i++)
			free((*parts_out ? *parts_out : parts)[i].path);
		*nparts_out = 0;
	}
	free(parts);
	free(buf);
	free(nums);
	return rc;
}

int fmt_is_segment_name(const char *name)
{
	const char *s = strstr(name, FMT_SEG_SUFFIX), *q;
	for (; s; s = strstr(s + 1, FMT_SEG_SUFFIX)) {
		q = s + strlen(FMT_SEG_SUFFIX);
		if (!*q)
			continue;
		while (*q >= '0' && *q <= '9')
			q++;
		if (!*q)
			return 1;
	}
	return 0;
}

/* What a file that stats as empty holds: /proc and /sys files give st_size 0 and have
 * content. Reads at most `cap` bytes (more is not a profile of this kind: *len = cap + 1).
 * Returns a malloc'd buffer (NULL with *len 0: truly empty) or NULL with errno set. */
static uint8_t *read_small(int fd, size_t cap, size_t *len)
{
	uint8_t *b = NULL;
	size_t n = 0, bcap = 0;
	*len = 0;
	for (;;) {
		if (n == bcap) {
			if (bcap > cap) {
				*len = cap + 1;
				return b;
			}
			uint8_t *nb = realloc(b, bcap = bcap ? bcap * 2 : 4096);
			if (!nb) {
				free(b);
				errno = ENOMEM;
				return NULL;
			}
			b = nb;
		}
		ssize_t k = read(fd, b + n, bcap - n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			int e = errno;
			free(b);
			errno = e;
			return NULL;
		}
		if (k == 0)
			break;
		n += (size_t)k;
	}
	if (!n) {
		free(b);
		b = NULL;
	}
	*len = n;
	errno = 0;
	return b;
}

static int read_path(const char *path, unsigned flags, fmt_file *f, fmt_event_fn fn, void *ctx, fmt_error *err,
		     int header_only)
{
	/* O_NONBLOCK: opening a FIFO for reading blocks until a writer comes, before the
	 * check below could refuse it; on a regular file it changes nothing. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		memset(f, 0, sizeof *f);
		memset(err, 0, sizeof *err);
		err->code = e == ENOENT ? FENNEC_ENOENT : FENNEC_EIO;
		snprintf(err->msg, sizeof err->msg, "%s: %s", path, strerror(e));
		return err->code;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		memset(f, 0, sizeof *f);
		err->code = FENNEC_EINVAL;
		snprintf(err->msg, sizeof err->msg, "%s: not a regular file", path);
		return err->code;
	}
	size_t len = (size_t)st.st_size;
	const uint8_t *data = NULL;
	uint8_t *copy = NULL;
	if (!len) {
		copy = read_small(fd, 1u << 20, &len);
		if (!copy && errno) {
			int e = errno;
			close(fd);
			memset(f, 0, sizeof *f);
			err->code = e == ENOMEM ? FENNEC_ENOMEM : FENNEC_EIO;
			snprintf(err->msg, sizeof err->msg, "%s: %s", path, strerror(e));
			return err->code;
		}
		if (len > (1u << 20)) { /* a pseudo-file: no recording is written there */
			free(copy);
			close(fd);
			memset(f, 0, sizeof *f);
			err->code = FENNEC_EFOREIGN;
			snprintf(err->msg, sizeof err->msg, "%s: not a fennec profile (its size is not known ahead)", path);
			return err->code;
		}
		data = copy;
	} else {
		data = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
		if (data == MAP_FAILED) {
			close(fd);
			memset(f, 0, sizeof *f);
			err->code = FENNEC_EIO;
			snprintf(err->msg, sizeof err->msg, "%s: cannot map file: %s", path, strerror(errno));
			return err->code;
		}
		madvise((void *)data, len, MADV_SEQUENTIAL);
	}
	close(fd);
	uint8_t *joined = NULL;
	size_t jlen = 0;
	seg_part *parts = NULL;
	uint32_t nparts = 0;
	int rc = header_only ? 0 : seg_gather(path, data ? data : (const uint8_t *)"", len, &joined, &jlen, &parts, &nparts, err);
	if (rc)
		memset(f, 0, sizeof *f);
	else if (joined)
		rc = read_mem_parts(joined, jlen, path, flags, f, fn, ctx, err, 0, 0, parts, nparts);
	else
		rc = read_mem(data ? data : (const uint8_t *)"", len, path, flags, f, fn, ctx, err, header_only, data && !copy);
	free(joined);
	for (uint32_t i = 0; i < nparts; i++)
		free(parts[i].path);
	free(parts);
	if (copy)
		free(copy);
	else if (data)
		munmap((void *)data, len);
	return rc;
}

int fmt_read(const char *path, fmt_file *f, fmt_event_fn fn, void *ctx, fmt_error *err)
{
	return read_path(path, 0, f, fn, ctx, err, 0);
}

int fmt_read_ex(const char *path, unsigned flags, fmt_file *f, fmt_event_fn fn, void *ctx, fmt_error *err)
{
	return read_path(path, flags, f, fn, ctx, err, 0);
}

int fmt_read_header(const char *path, fmt_file *f, fmt_error *err)
{
	return read_path(path, 0, f, NULL, NULL, err, 1);
}

/* Free what decoding allocated, except path and calib. */
static void fmt_file_free_records(fmt_file *f)
{
	for (uint32_t i = 0; i < f->npycode; i++) {
		free(f->pycode[i].qualname);
		free(f->pycode[i].filename);
	}
	free(f->pycode);
	f->pycode = NULL;
	f->npycode = 0;
	for (uint32_t i = 0; i < f->nsites; i++) {
		free(f->sites[i].name);
		free(f->sites[i].file);
	}
	for (uint32_t i = 0; i < f->nthreads; i++)
		free(f->threads[i].name);
	for (size_t i = 0; i < f->nmodules; i++) {
		free(f->modules[i].path);
		free(f->modules[i].build_id);
		free(f->modules[i].segs);
	}
	for (size_t i = 0; i < f->ntasks; i++)
		free(f->tasks[i].name);
	for (uint32_t i = 0; i < f->nheap_stacks; i++) {
		free(f->heap_stacks[i].frames);
		free(f->heap_stacks[i].regions);
		free(f->heap_stacks[i].pyframes);
	}
	free(f->heap_stacks);
	free(f->reach);
	for (uint32_t i = 0; i < f->ngpu_devices; i++)
		free((char *)f->gpu_devices[i].name);
	free(f->gpu_devices);
	for (uint32_t i = 0; i < f->ngpu_strings; i++)
		free(f->gpu_strings[i]);
	free(f->gpu_strings);
	for (uint32_t i = 0; i < f->nenergy_domains; i++)
		free(f->energy_domains[i].name);
	free(f->energy_domains);
	free(f->modules);
	free(f->tasks);
	free(f->sites);
	free(f->threads);
	free(f->host);
	free(f->config_warnings);
	free(f->cmdline);
	free(f->exe);
}

void fmt_file_free(fmt_file *f)
{
	if (!f)
		return;
	fmt_file_free_records(f);
	free(f->calib);
	free(f->path);
	memset(f, 0, sizeof *f);
}

/* ---- following a growing file (fmt_follow_*) ---- */

struct fmt_follow {
	rd r;
	fmt_file f;
	fmt_error err;
	uint64_t off;      /* the next chunk to decode; 0: the file's start */
	dev_t dev;
	ino_t ino;
	int opened;        /* dev and ino are the file's */
	uint64_t generation; /* files seen at the path, less one (a replaced file restarts) */
	int failed;        /* a decoding error: nothing more is read of this file */
};

fmt_follow *fmt_follow_new(const char *path)
{
	fmt_follow *w = calloc(1, sizeof *w);
	if (!w || !(w->f.path = strdup(path))) {
		free(w);
		return NULL;
	}
	w->r.f = &w->f;
	w->r.name = w->f.path;
	w->r.err = &w->err;
	w->r.follow = 1;
	return w;
}

/* Start again at the file's start (a new file at the path). */
static void follow_reset(fmt_follow *w)
{
	char *path = w->f.path;
	fmt_file_free_records(&w->f);
	free(w->f.calib);
	memset(&w->f, 0, sizeof w->f);
	w->f.path = path;
	bt_free(w->r.bt);
	w->r.bt = NULL;
	w->r.seen_header = 0;
	w->off = 0;
	w->failed = 0;
	w->generation++;
}

int fmt_follow_poll(fmt_follow *w, fmt_event_fn fn, void *ctx, fmt_error *err)
{
	memset(err, 0, sizeof *err);
	int fd = open(w->f.path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		int e = fd < 0 ? errno : 0;
		if (fd >= 0)
			close(fd);
		err->code = e == ENOENT ? FENNEC_ENOENT : e ? FENNEC_EIO : FENNEC_EINVAL;
		snprintf(err->msg, sizeof err->msg, "%s: %s", w->f.path, e ? strerror(e) : "not a regular file");
		return err->code;
	}
	uint64_t len = (uint64_t)st.st_size;
	if (w->opened && (st.st_dev != w->dev || st.st_ino != w->ino || len < w->off))
		follow_reset(w); /* replaced, or truncated: another recording */
	w->dev = st.st_dev;
	w->ino = st.st_ino;
	w->opened = 1;
	if (w->failed || w->f.has_end || len <= w->off || len < FMT_PREAMBLE_LEN) {
		close(fd);
		if (w->failed)
			*err = w->err;
		return w->failed ? w->err.code : 0;
	}
	/* The whole file is mapped, and only the pages from w->off on are touched. */
	const uint8_t *data = mmap(NULL, (size_t)len, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (data == MAP_FAILED) {
		err->code = FENNEC_EIO;
		snprintf(err->msg, sizeof err->msg, "%s: cannot map file: %s", w->f.path, strerror(errno));
		return err->code;
	}
	w->r.fn = fn;
	w->r.ctx = ctx;
	w->r.stop_off = w->off;
	memset(&w->err, 0, sizeof w->err);
	int rc = read_chunks_from(&w->r, data, (size_t)len, w->off);
	munmap((void *)data, (size_t)len);
	w->off = w->r.stop_off;
	fit_clock(&w->f);
	for (size_t i = 0; i < w->f.ncalib; i++)
		if (w->f.calib[i].ticks > w->f.last_ticks)
			w->f.last_ticks = w->f.calib[i].ticks;
	if (rc && w->err.code) {
		w->failed = 1;
		*err = w->err;
	}
	w->r.fn = NULL;
	return rc;
}

const fmt_file *fmt_follow_file(const fmt_follow *w) { return w->r.seen_header ? &w->f : NULL; }

uint64_t fmt_follow_offset(const fmt_follow *w) { return w->off; }

uint64_t fmt_follow_generation(const fmt_follow *w) { return w->generation; }

void fmt_follow_free(fmt_follow *w)
{
	if (!w)
		return;
	fmt_file_free(&w->f);
	bt_free(w->r.bt);
	ZSTD_freeDCtx(w->r.dctx);
	free(w->r.buf);
	free(w);
}

/*
 * reader_events.c - the reader's decoding of the chunks that define and time a recording
 * (HEADER, SITES, THREAD, THREAD_END, STATS, END, COST, SEGMENT), of its events and samples
 * (EVENTS, SAMPLES, PYCODE, MODULES, TASKS), and the replay that gives each sample its
 * regions and step by time (bytime). reader.c's chunk loop calls the decoders.
 */
#include <math.h>
#include <stdio.h>

#include "format/decode.h"

static void bt_thread(rd *r, uint32_t idx, uint64_t tid);

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

int decode_header(rd *r, cur *c)
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
		case FMT_H_OVERHEAD_BUDGET: f->budget_ppm = v; break;
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

int decode_sites(rd *r, cur *c)
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

int decode_threads(rd *r, cur *c)
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

int decode_thread_end(rd *r, cur *c)
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

int decode_stats(rd *r, cur *c, int is_end)
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
	if (c->p < c->end) { /* the heap records lost, by type (a later field: read when present) */
		uint64_t allocs = cur_varint(c), frees = cur_varint(c);
		if (c->bad)
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "%s: heap drop counts run past the end of the chunk", is_end ? "END" : "STATS");
		f->heap_dropped_allocs = allocs;
		f->heap_dropped_frees = frees;
		f->has_heap_drops = 1;
	}
	if (c->p < c->end) { /* calls that got no site: the table was full (a later field) */
		uint64_t refused = cur_varint(c);
		if (c->bad)
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "%s: the refused-site count runs past the end of the chunk", is_end ? "END" : "STATS");
		f->sites_refused = refused;
	}
	if (c->p < c->end) { /* the overhead budget's stride and share (a later field) */
		uint64_t k = cur_varint(c), share = cur_varint(c);
		if (c->bad || !k || k > 1000000)
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "%s: bad sampling stride %llu", is_end ? "END" : "STATS",
				    (unsigned long long)k);
		if (k != (f->stride ? f->stride : 1)) {
			if (f->nstride_changes < FMT_MAX_STRIDE_CHANGES) {
				struct fmt_stride_change *a = realloc(f->stride_changes, (f->nstride_changes + 1) * sizeof *a);
				if (!a)
					return fail(r, FENNEC_ENOMEM, r->chunk_off, "out of memory");
				f->stride_changes = a;
				a[f->nstride_changes++] = (struct fmt_stride_change){ticks, (uint32_t)k,
										       share > UINT32_MAX ? UINT32_MAX : (uint32_t)share};
			} else {
				f->stride_changes_more++;
			}
		}
		f->stride = (uint32_t)k;
		f->budget_share_ppm = share > UINT32_MAX ? UINT32_MAX : (uint32_t)share;
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
int decode_cost(rd *r, cur *c)
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

void bt_free(bytime *b)
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
int bt_flush(rd *r)
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

int decode_events(rd *r, cur *c)
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

int decode_samples(rd *r, cur *c)
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
int decode_pycode(rd *r, cur *c)
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

int decode_modules(rd *r, cur *c)
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

int decode_tasks(rd *r, cur *c)
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

/* SEGMENT (1.9): the opening of a capped recording's segment file (docs/format.md). */
int decode_seg(rd *r, cur *c)
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


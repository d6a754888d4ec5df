/*
 * timeline.c - region calls as per-thread intervals (timeline.h). A replay of each of the
 * recording's files (analyze/replay.h, the whole file: the timeline keeps to the window
 * itself) hands it every call as it ends, and GPU work in file order; every call goes to
 * the lane of its thread and depth, where calls shorter than the resolution are merged with
 * their short neighbours into blocks no longer than the resolution. The resolution starts at 0 (every call exact) and
 * doubles whenever the intervals kept exceed the budget, so memory stays bounded however
 * many events the recording has. GPU kernels, copies and memsets go to a lane per stream
 * (ANA_TL_GPU) and are merged by the same rules, so that GPU activity is drawn, and
 * reduced, like the threads' calls.
 */
#include "analyze/timeline.h"
#include "analyze/gpu.h"
#include "analyze/replay.h"
#include "symbol/symbol.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The block being built in one lane (thread, depth); valid when count > 0. */
typedef struct lane {
	ana_interval iv;
	uint64_t longest_ns;  /* its longest call, whose name it carries */
} lane;

typedef struct tthread {
	lane *lanes;          /* max_depth + 1, allocated on first use */
} tthread;

/* A call still open at the end of its thread, as the replay closes it (innermost first). */
typedef struct open_call {
	uint32_t site, depth;
	char *name;
	uint64_t start_ns;
} open_call;

typedef struct tctx {
	const ana_profile *p;
	ana_timeline *tl;
	uint32_t proc;
	size_t budget;        /* intervals kept before the resolution is raised */
	size_t max_intervals;
	uint32_t max_depth;
	uint64_t t0_ns;       /* the first process's start, after the replay's time origin */
	uint64_t span_est_ns; /* the model's span of the recording, or the window's length */
	uint64_t from_ns, to_ns; /* the window: calls ending before from or starting at or after to are left out */
	tthread *th;          /* per thread of the file */
	uint32_t nth;
	uint32_t flushed;     /* the lanes of threads [0, flushed) are flushed: the file's end is being closed */
	uint64_t end_ns;      /* the file's end */
	open_call *open;      /* the thread being closed: its calls still open, innermost first */
	uint32_t nopen, open_cap;
	uint32_t *site_name;  /* per site id of this file: index into tl->names, ANA_NONE unresolved */
	uint32_t nsites;
	lane (*glanes)[2];    /* per tl->gpu_lanes entry: the blocks being built at depths 0 and 1 */
	uint32_t glanes_cap;
	uint32_t *gpu_name;   /* per GPU STRING id of this file: index into tl->names, ANA_NONE unresolved */
	uint32_t ngpu_names;
	int oom;
} tctx;

static int push(ana_timeline *tl, const ana_interval *x)
{
	if (tl->n == tl->cap) {
		size_t cap = tl->cap ? tl->cap * 2 : 1024;
		ana_interval *a = realloc(tl->iv, cap * sizeof *a);
		if (!a)
			return -1;
		tl->iv = a;
		tl->cap = cap;
	}
	tl->iv[tl->n++] = *x;
	uint64_t end = x->start_ns + x->dur_ns;
	if (end > tl->span_ns)
		tl->span_ns = end;
	return 0;
}

static uint32_t name_index(ana_timeline *tl, const char *s)
{
	for (uint32_t i = 0; i < tl->nnames; i++)
		if (!strcmp(tl->names[i], s))
			return i;
	if (tl->nnames == tl->names_cap) {
		uint32_t cap = tl->names_cap ? tl->names_cap * 2 : 64;
		char **a = realloc(tl->names, cap * sizeof *a);
		if (!a)
			return ANA_NONE;
		tl->names = a;
		tl->names_cap = cap;
	}
	if (!(tl->names[tl->nnames] = strdup(s)))
		return ANA_NONE;
	return tl->nnames++;
}

/* The name of site `id` (the replay's name for it), interned once per site id. */
static uint32_t site_name(tctx *c, uint32_t id, const char *name)
{
	if (id >= c->nsites) {
		uint32_t n = id + 64;
		uint32_t *a = realloc(c->site_name, n * sizeof *a);
		if (!a)
			return ANA_NONE;
		for (uint32_t i = c->nsites; i < n; i++)
			a[i] = ANA_NONE;
		c->site_name = a;
		c->nsites = n;
	}
	if (c->site_name[id] == ANA_NONE)
		c->site_name[id] = name_index(c->tl, name);
	return c->site_name[id];
}

static int mergeable(const ana_interval *x, uint64_t res)
{
	return !x->open && (x->count > 1 || x->dur_ns < res);
}

static int cmp_iv(const void *a, const void *b)
{
	const ana_interval *x = a, *y = b;
	if (x->thread != y->thread)
		return x->thread < y->thread ? -1 : 1;
	if (x->depth != y->depth)
		return x->depth < y->depth ? -1 : 1;
	return (x->start_ns > y->start_ns) - (x->start_ns < y->start_ns);
}

/* Sort, and merge neighbours in a lane that are both short (or blocks) with a gap
 * shorter than the resolution, into blocks that span at most the resolution: a block is
 * one "pixel" of the timeline at that resolution. A block keeps its longest part's name. */
static void merge_all(ana_timeline *tl)
{
	if (!tl->n)
		return;
	qsort(tl->iv, tl->n, sizeof *tl->iv, cmp_iv);
	uint64_t res = tl->resolution_ns;
	size_t o = 0;
	uint64_t longest = tl->iv[0].count > 1 ? tl->iv[0].busy_ns / tl->iv[0].count : tl->iv[0].dur_ns;
	for (size_t i = 1; i < tl->n; i++) {
		ana_interval *a = &tl->iv[o], *b = &tl->iv[i];
		uint64_t a_end = a->start_ns + a->dur_ns;
		uint64_t b_long = b->count > 1 ? b->busy_ns / b->count : b->dur_ns;
		uint64_t b_end = b->start_ns + b->dur_ns;
		if (a->thread == b->thread && a->depth == b->depth && mergeable(a, res) && mergeable(b, res) &&
		    b->start_ns < a_end + res && b_end <= a->start_ns + res) {
			if (b_end > a_end)
				a->dur_ns = b_end - a->start_ns;
			a->count += b->count;
			a->busy_ns += b->busy_ns;
			if (b_long > longest) {
				longest = b_long;
				a->name = b->name;
			}
		} else {
			tl->iv[++o] = *b;
			longest = b_long;
		}
	}
	tl->n = o + 1;
}

/* Raise the resolution until the intervals kept fit in `limit`, or every lane is one
 * block (more lanes than the limit: nothing more can be merged). */
static void coarsen(tctx *c, size_t limit)
{
	ana_timeline *tl = c->tl;
	while (tl->n > limit) {
		uint64_t span = tl->span_ns > c->span_est_ns && !c->to_ns ? tl->span_ns : c->span_est_ns;
		if (tl->resolution_ns > 2 * span + 1)
			break;
		if (!tl->resolution_ns) {
			/* Start fine: merging leaves far fewer blocks than span / resolution, and
			 * doubling from here stops at the first resolution that fits. */
			uint64_t r = span / (16 * c->max_intervals);
			tl->resolution_ns = r > 100 ? r : 100;
		} else
			tl->resolution_ns *= 2;
		merge_all(tl);
	}
}

static int emit(tctx *c, const ana_interval *x)
{
	if (push(c->tl, x) < 0)
		return -1;
	if (c->tl->n > c->budget)
		coarsen(c, c->budget / 2);
	return 0;
}

static int flush_lane(tctx *c, lane *l)
{
	if (!l->iv.count)
		return 0;
	int rc = emit(c, &l->iv);
	l->iv.count = 0;
	return rc;
}

/* A completed (or still open) call at depth d of lane l (thread or GPU stream `thread`),
 * counted in *seen when it is in the window. */
static int add_call(tctx *c, lane *l, uint32_t thread, uint32_t d, uint32_t name, uint64_t start_ns, uint64_t dur_ns,
		    int open, uint64_t *seen)
{
	ana_timeline *tl = c->tl;
	if (c->to_ns && (start_ns >= c->to_ns || start_ns + dur_ns < c->from_ns))
		return 0;
	/* before the analysis window: rel_ns() put both its ends at the window's start */
	if (c->p->window.active && !start_ns && !dur_ns)
		return 0;
	(*seen)++;
	ana_interval x = {.start_ns = start_ns, .dur_ns = dur_ns, .thread = thread, .name = name, .depth = d,
			  .count = 1, .busy_ns = dur_ns, .open = open};
	uint64_t res = tl->resolution_ns;
	if (!mergeable(&x, res)) {
		if (flush_lane(c, l) < 0)
			return -1;
		return emit(c, &x);
	}
	uint64_t end = start_ns + dur_ns;
	/* GPU records of a stream may come out of order (CUPTI's buffers): an earlier one
	 * starts a block of its own, and merge_all joins what the sort puts together. */
	if (l->iv.count && start_ns >= l->iv.start_ns && start_ns < l->iv.start_ns + l->iv.dur_ns + res &&
	    end <= l->iv.start_ns + res) {
		if (end > l->iv.start_ns + l->iv.dur_ns)
			l->iv.dur_ns = end - l->iv.start_ns;
		l->iv.count++;
		l->iv.busy_ns += dur_ns;
		if (dur_ns > l->longest_ns) {
			l->longest_ns = dur_ns;
			l->iv.name = name;
		}
		return 0;
	}
	if (flush_lane(c, l) < 0)
		return -1;
	l->iv = x;
	l->longest_ns = dur_ns;
	return 0;
}

/* The lanes of thread t, allocated on first use. */
static lane *lanes_of(tctx *c, tthread *t)
{
	if (!t->lanes)
		t->lanes = calloc(c->max_depth + 1, sizeof *t->lanes);
	return t->lanes;
}

static tthread *thread_of(tctx *c, uint32_t idx)
{
	if (idx >= c->nth) {
		uint32_t n = idx + 16;
		tthread *a = realloc(c->th, n * sizeof *a);
		if (!a)
			return NULL;
		memset(a + c->nth, 0, (n - c->nth) * sizeof *a);
		c->th = a;
		c->nth = n;
	}
	return &c->th[idx];
}

/* A replay time (ns from the recording's start) from the first process's start. */
static uint64_t rel_ns(const tctx *c, uint64_t ns)
{
	return ns > c->t0_ns ? ns - c->t0_ns : 0;
}

/* The lane of GPU stream (c->proc, device, stream): its index in tl->gpu_lanes, or
 * ANA_NONE when out of memory. */
static uint32_t gpu_lane(tctx *c, uint32_t device, uint32_t stream)
{
	ana_timeline *tl = c->tl;
	for (uint32_t i = tl->ngpu_lanes; i-- > 0;)
		if (tl->gpu_lanes[i].process == c->proc && tl->gpu_lanes[i].device == device &&
		    tl->gpu_lanes[i].stream == stream)
			return i;
	if (tl->ngpu_lanes == tl->gpu_lanes_cap) {
		uint32_t cap = tl->gpu_lanes_cap ? tl->gpu_lanes_cap * 2 : 8;
		ana_tl_gpu_lane *a = realloc(tl->gpu_lanes, cap * sizeof *a);
		if (!a)
			return ANA_NONE;
		tl->gpu_lanes = a;
		tl->gpu_lanes_cap = cap;
	}
	if (tl->ngpu_lanes == c->glanes_cap) {
		uint32_t cap = c->glanes_cap ? c->glanes_cap * 2 : 8;
		lane(*a)[2] = realloc(c->glanes, cap * sizeof *a);
		if (!a)
			return ANA_NONE;
		memset(a + c->glanes_cap, 0, (cap - c->glanes_cap) * sizeof *a);
		c->glanes = a;
		c->glanes_cap = cap;
	}
	tl->gpu_lanes[tl->ngpu_lanes] = (ana_tl_gpu_lane){c->proc, device, stream};
	return tl->ngpu_lanes++;
}

/* A kernel's name (demangled, as the GPU analysis names it), interned once per STRING id. */
static uint32_t gpu_kernel_name(tctx *c, const fmt_gpu *r)
{
	if (r->name >= c->ngpu_names) {
		uint32_t n = r->name + 64;
		uint32_t *a = realloc(c->gpu_name, n * sizeof *a);
		if (!a)
			return ANA_NONE;
		for (uint32_t i = c->ngpu_names; i < n; i++)
			a[i] = ANA_NONE;
		c->gpu_name = a;
		c->ngpu_names = n;
	}
	if (c->gpu_name[r->name] != ANA_NONE)
		return c->gpu_name[r->name];
	char *dm = r->name_str ? sym_demangle(r->name_str) : NULL;
	uint32_t k = name_index(c->tl, dm ? dm : r->name_str ? r->name_str : "[unnamed kernel]");
	free(dm);
	if (r->name_str) /* a STRING not (yet) defined is looked up again */
		c->gpu_name[r->name] = k;
	return k;
}

/* A kernel (depth 0), copy or memset (depth 1) on its stream's lane. */
static int gpu_event(tctx *c, const fmt_gpu *r, uint64_t ns)
{
	uint64_t s = rel_ns(c, ns);
	uint64_t dur = r->end_ns > r->start_ns ? r->end_ns - r->start_ns : 0;
	if (c->to_ns && (s >= c->to_ns || s + dur < c->from_ns))
		return 0;
	uint32_t k = gpu_lane(c, r->device, r->stream);
	if (k == ANA_NONE)
		return -1;
	uint32_t name;
	if (r->type == FMT_GR_KERNEL)
		name = gpu_kernel_name(c, r);
	else {
		char tmp[32];
		snprintf(tmp, sizeof tmp, r->type == FMT_GR_MEMSET ? "memset" : "memcpy %s", ana_gpu_copy_name(r->kind));
		name = name_index(c->tl, tmp);
	}
	if (name == ANA_NONE)
		return -1;
	uint32_t d = r->type == FMT_GR_KERNEL ? 0 : 1;
	return add_call(c, &c->glanes[k][d], ANA_TL_GPU + k, d, name, s, dur, 0, &c->tl->gpu_work);
}

/* A call at depth d of thread g (file thread idx), from start_ns to end_ns (relative). */
static inline __attribute__((always_inline)) int call(tctx *c, uint32_t idx, uint32_t g, uint32_t d, uint32_t site, const char *name, uint64_t s, uint64_t e,
		int open)
{
	if (d > c->max_depth) {
		c->tl->deep_calls++;
		return 0;
	}
	/* the hot path, once per call: a site named and a thread with lanes already */
	uint32_t k = site < c->nsites && c->site_name[site] != ANA_NONE ? c->site_name[site] : site_name(c, site, name);
	tthread *t = idx < c->nth ? &c->th[idx] : thread_of(c, idx);
	lane *l = t ? t->lanes ? t->lanes : lanes_of(c, t) : NULL;
	if (k == ANA_NONE || !l)
		return -1;
	return add_call(c, &l[d], g, d, k, s, e > s ? e - s : 0, open, &c->tl->calls);
}

/* Flush the lanes of the threads before `upto` that are not yet. */
static int flush_threads(tctx *c, uint32_t upto)
{
	for (; c->flushed < upto && c->flushed < c->nth; c->flushed++) {
		tthread *t = &c->th[c->flushed];
		if (t->lanes)
			for (uint32_t d = 0; d <= c->max_depth; d++)
				if (flush_lane(c, &t->lanes[d]) < 0)
					return -1;
	}
	if (c->flushed < upto)
		c->flushed = upto;
	return 0;
}

/* The replay's end of a call still open at its thread's end: kept until its outermost
 * (depth 0, the last), then the thread's lanes are flushed and its open calls shown,
 * outermost first, up to the file's end. */
static int open_end(tctx *c, const ana_rp_event *ev)
{
	if (c->nopen == c->open_cap) {
		uint32_t cap = c->open_cap ? c->open_cap * 2 : 16;
		open_call *a = realloc(c->open, cap * sizeof *a);
		if (!a)
			return -1;
		c->open = a;
		c->open_cap = cap;
	}
	char *name = strdup(ev->name);
	if (!name)
		return -1;
	c->open[c->nopen++] = (open_call){ev->site, ev->depth, name, ev->begin_ns};
	if (ev->depth)
		return 0;
	int rc = flush_threads(c, ev->thread + 1);
	for (uint32_t i = c->nopen; i-- > 0 && !rc;) {
		const open_call *o = &c->open[i];
		rc = call(c, ev->thread, ev->g, o->depth, o->site, o->name, rel_ns(c, o->start_ns), c->end_ns, 1);
	}
	for (uint32_t i = 0; i < c->nopen; i++)
		free(c->open[i].name);
	c->nopen = 0;
	return rc;
}

static int on_event(void *vc, const ana_rp_event *ev)
{
	tctx *c = vc;
	int rc = 0;
	if (ev->kind == ANA_RP_GPU_WORK)
		rc = gpu_event(c, ev->gpu, ev->ns);
	else if (ev->kind != ANA_RP_END || ev->g == ANA_NONE)
		return 0; /* a thread the model has not seen (the file grew since): left out */
	else if (ev->unfinished)
		rc = open_end(c, ev);
	else {
		uint64_t s = rel_ns(c, ev->begin_ns), e = rel_ns(c, ev->ns);
		if (c->to_ns && (s >= c->to_ns || e < c->from_ns))
			return 0;
		rc = call(c, ev->thread, ev->g, ev->depth, ev->site, ev->name, s, e, 0);
	}
	if (rc < 0) {
		c->oom = 1;
		return FENNEC_ENOMEM;
	}
	return 0;
}

/* The file is read: flush the lanes of the threads with no call open at the end, and the
 * GPU lanes. */
static int finish_file(tctx *c)
{
	if (flush_threads(c, c->nth) < 0)
		return -1;
	for (uint32_t k = 0; k < c->tl->ngpu_lanes; k++)
		for (int d = 0; d < 2; d++)
			if (flush_lane(c, &c->glanes[k][d]) < 0)
				return -1;
	return 0;
}

static void free_file_state(tctx *c)
{
	for (uint32_t i = 0; i < c->nth; i++)
		free(c->th[i].lanes);
	free(c->th);
	free(c->site_name);
	free(c->gpu_name);
	for (uint32_t i = 0; i < c->nopen; i++)
		free(c->open[i].name);
	c->th = NULL;
	c->nth = 0;
	c->flushed = 0;
	c->nopen = 0;
	c->site_name = NULL;
	c->nsites = 0;
	c->gpu_name = NULL;
	c->ngpu_names = 0;
}

int ana_timeline_build(const ana_profile *p, size_t max_intervals, uint32_t max_depth, uint64_t from_ns,
		       uint64_t to_ns, ana_timeline *tl)
{
	memset(tl, 0, sizeof *tl);
	if (max_intervals < 1000)
		max_intervals = 1000;
	/* The timeline reads the files again: it keeps to the analysis window (its times are
	 * from the window's start, procs[0].start_ns), the range asked for within it. */
	if (p->window.active) {
		uint64_t span = p->window.end_ns - p->window.begin_ns;
		if (!to_ns || to_ns > span)
			to_ns = span;
		if (from_ns >= to_ns)
			from_ns = 0;
	}
	if (to_ns && to_ns <= from_ns)
		to_ns = from_ns + 1;
	tl->max_depth = max_depth;
	tl->from_ns = to_ns ? from_ns : 0;
	tl->to_ns = to_ns;
	if (!p->nprocs)
		return 0;
	uint64_t t0 = ana_replay_t0_ns(p);
	tctx c = {.p = p, .tl = tl, .max_intervals = max_intervals, .budget = 2 * max_intervals,
		  .max_depth = max_depth, .t0_ns = p->procs[0].start_ns > t0 ? p->procs[0].start_ns - t0 : 0,
		  .from_ns = tl->from_ns, .to_ns = to_ns};
	for (uint32_t i = 0; i < p->nprocs; i++) {
		uint64_t e = p->procs[i].end_ns > p->procs[0].start_ns ? p->procs[i].end_ns - p->procs[0].start_ns : 0;
		if (e > c.span_est_ns)
			c.span_est_ns = e;
	}
	if (to_ns)
		c.span_est_ns = to_ns - tl->from_ns;
	int rc = 0;
	static const ana_replay_opts ro = {.what = ANA_RP_ENDS | ANA_RP_GPU, .whole = 1};
	for (uint32_t i = 0; i < p->nprocs && !rc; i++) {
		fmt_error err;
		const fmt_file *f = &p->procs[i].file;
		c.proc = i;
		double end = fmt_ticks_to_ns(f, f->last_ticks) - (double)t0;
		c.end_ns = rel_ns(&c, end > 0 ? (uint64_t)llround(end) : 0);
		int r = ana_replay(p, i, &ro, on_event, &c, &err);
		if (c.oom || r == FENNEC_ENOMEM)
			rc = FENNEC_ENOMEM;
		else {
			if (r)
				tl->files_failed++;
			if (finish_file(&c) < 0)
				rc = FENNEC_ENOMEM;
		}
		free_file_state(&c);
	}
	free(c.glanes);
	free(c.open);
	if (!rc) {
		merge_all(tl);
		coarsen(&c, max_intervals);
	}
	if (rc)
		ana_timeline_free(tl);
	return rc;
}

void ana_timeline_free(ana_timeline *tl)
{
	if (!tl)
		return;
	free(tl->iv);
	for (uint32_t i = 0; i < tl->nnames; i++)
		free(tl->names[i]);
	free(tl->names);
	free(tl->gpu_lanes);
	memset(tl, 0, sizeof *tl);
}

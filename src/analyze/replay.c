/*
 * replay.c - one process's events again, for the clients that need every call or the
 * regions open at given times (replay.h): the reader's events turned into region begins
 * and ends with names and depths, steps and metrics with their running counts, NVTX
 * ranges paired and GPU work, each thread's in time order, clipped to the profile's
 * window; or the regions open on a thread at the times asked (ana_replay_open_at).
 *
 * The window is kept in the clients' time (ns from the recording's start). A thread's
 * stack remembers how many of its open regions were delivered (`shown`, always the
 * outermost ones): a region begun before the window is delivered, at the window's start,
 * only once something of its thread inside the window is, so that a thread's events stay
 * in time order; one begun after the window never is, and neither is its end.
 */
#include "analyze/replay.h"
#include "analyze/map.h"
#include "analyze/util.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

typedef struct rframe {
	uint32_t site;
	uint64_t ns;          /* its begin, relative, unclipped */
} rframe;

typedef struct rthread {
	int known, skip;      /* skip: not the thread asked for */
	uint32_t group;       /* ana_replay_open_at: its tid's questions (index into rctx.groups), ANA_NONE: none */
	uint32_t g;           /* the model's thread, ANA_NONE: none */
	uint64_t tid;
	rframe *stack;        /* open regions, outermost first */
	uint32_t depth, cap;
	uint32_t shown;       /* stack[0 .. shown) were delivered */
	uint64_t last_ns;     /* its latest event's time: no event goes back before it */
	uint64_t steps;       /* step marks so far, the window's or not */
} rthread;

typedef struct nrange {   /* an NVTX range start */
	uint64_t tid, ns;
	char *text;           /* kept only when its delivery waits for its end (clipped start) */
	uint32_t range;       /* its number when delivered */
	uint8_t shown, ended;
} nrange;

typedef struct rctx {
	const ana_profile *p;
	const ana_replay_opts *o;
	const fmt_file *f;    /* the model's copy: final sites, threads and clock fit */
	ana_replay_fn fn;
	void *ctx;
	uint64_t t0;
	uint64_t lo, hi;      /* the window, relative; without one [0, UINT64_MAX] */
	uint64_t slack;       /* ns either side of the window still inside (an edge on a step mark) */
	int win;              /* a window: without one every test below is true, and skipped */
	uint32_t *tmap;       /* per file thread index: the model's thread */
	uint32_t ntmap;
	rthread *th;
	uint32_t nth;
	double *total;        /* per site id: a counter's running total */
	uint32_t ntotal;
	nrange *nv;
	size_t nnv, nvcap;
	ana_map open;         /* NVTX range id -> index into nv */
	uint32_t next_range;
	ana_rp_event rev;     /* the region events delivered */
	char tmp[64];
	int rc;
	/* ana_replay_open_at: the questions, sorted by tid and tick, in runs of one tid */
	struct qsorted { uint64_t tid, ticks; size_t i; } *at;
	struct qgroup { uint64_t tid; size_t q, qend; uint32_t last; } *groups; /* last: its thread latest seen */
	size_t ngroups;
	uint32_t *sites;      /* scratch: the sites of an answer */
	uint32_t nsites_cap;
	ana_rp_at_fn at_fn;
} rctx;

uint64_t ana_replay_t0_ns(const ana_profile *p)
{
	/* the files' own starts: a window moves ana_process.start_ns to its start */
	uint64_t t0 = 0;
	for (uint32_t i = 0; i < p->nprocs; i++)
		if (!t0 || p->procs[i].file.start_mono_ns < t0)
			t0 = p->procs[i].file.start_mono_ns;
	return t0;
}

static uint64_t rel_ns(const rctx *c, uint64_t ticks)
{
	double ns = fmt_ticks_to_ns(c->f, ticks);
	if (!(ns > (double)c->t0))
		return 0;
	return (uint64_t)llround(ns - (double)c->t0);
}

static int before_end(const rctx *c, uint64_t ns)
{
	return c->hi >= UINT64_MAX - c->slack || ns <= c->hi + c->slack;
}

static int after_start(const rctx *c, uint64_t ns)
{
	return c->lo <= c->slack || ns >= c->lo - c->slack;
}

static int inside(const rctx *c, uint64_t ns)
{
	return !c->win || (after_start(c, ns) && before_end(c, ns));
}

/* ns moved into the window (no change without one). */
static uint64_t clip(const rctx *c, uint64_t ns)
{
	return !c->win ? ns : ns < c->lo ? c->lo : ns > c->hi ? c->hi : ns;
}

static int emit(rctx *c, const ana_rp_event *e)
{
	if (!c->rc)
		c->rc = c->fn(c->ctx, e);
	return c->rc;
}

static const char *site_name(rctx *c, uint32_t id)
{
	const char *s = id < c->f->nsites && c->f->sites[id].defined ? c->f->sites[id].name : NULL;
	if (!s) {
		snprintf(c->tmp, sizeof c->tmp, "<site %u>", id);
		s = c->tmp;
	}
	return s;
}

/* Deliver the begin or end of t's region at depth d, at relative time ns. Inlined: it is
 * the cost of the layer per region event. */
static inline __attribute__((always_inline)) int region(rctx *c, rthread *t, uint32_t idx, unsigned kind, uint32_t d, uint64_t ns, int unfinished)
{
	if (!(c->o->what & (kind == ANA_RP_END ? ANA_RP_REGIONS | ANA_RP_ENDS : ANA_RP_REGIONS)))
		return 0;
	/* the hot path: one event reused, whose other fields stay zero */
	ana_rp_event *e = &c->rev;
	e->kind = kind;
	e->thread = idx;
	e->g = t->g;
	e->tid = t->tid;
	e->ns = ns;
	e->site = t->stack[d].site;
	e->name = site_name(c, e->site);
	e->depth = d;
	e->begin_ns = clip(c, t->stack[d].ns);
	e->unfinished = unfinished;
	return emit(c, e);
}

/* Something of t inside the window is about to be delivered: first the begins of the
 * regions open across the window's start, at the start, outermost first. */
static int materialize(rctx *c, rthread *t, uint32_t idx)
{
	for (; t->shown < t->depth && before_end(c, t->stack[t->shown].ns); t->shown++)
		if (region(c, t, idx, ANA_RP_BEGIN, t->shown, clip(c, t->stack[t->shown].ns), 0))
			return c->rc;
	return 0;
}

static rthread *thread_of(rctx *c, uint32_t idx)
{
	if (idx >= c->nth) {
		uint32_t n = idx + 1 > c->f->nthreads ? idx + 1 : c->f->nthreads;
		rthread *a = realloc(c->th, n * sizeof *a);
		if (!a)
			return NULL;
		memset(a + c->nth, 0, (n - c->nth) * sizeof *a);
		c->th = a;
		c->nth = n;
	}
	rthread *t = &c->th[idx];
	if (!t->known) {
		t->known = 1;
		t->tid = idx < c->f->nthreads ? c->f->threads[idx].tid : 0;
		t->skip = c->o->has_tid && t->tid != c->o->tid;
		t->g = idx < c->ntmap ? c->tmap[idx] : ANA_NONE;
		t->group = ANA_NONE;
		if (c->at && idx < c->f->nthreads) { /* the run of its tid's questions */
			size_t lo = 0, hi = c->ngroups;
			while (lo < hi) {
				size_t mid = (lo + hi) / 2;
				if (c->groups[mid].tid < t->tid)
					lo = mid + 1;
				else
					hi = mid;
			}
			if (lo < c->ngroups && c->groups[lo].tid == t->tid)
				t->group = (uint32_t)lo;
		}
	}
	return t;
}

/* ana_replay_open_at: answer the questions of t's tid asked before `ticks` from t's stack
 * as it stands. */
static int answer_until(rctx *c, rthread *t, uint32_t idx, uint64_t ticks)
{
	struct qgroup *gr = &c->groups[t->group];
	gr->last = idx;
	if (gr->q < gr->qend && c->at[gr->q].ticks < ticks) {
		if (t->depth > c->nsites_cap) {
			uint32_t *a = realloc(c->sites, t->depth * sizeof *a);
			if (!a)
				return c->rc = FENNEC_ENOMEM;
			c->sites = a;
			c->nsites_cap = t->depth;
		}
		for (uint32_t d = 0; d < t->depth; d++)
			c->sites[d] = t->stack[d].site;
		for (; gr->q < gr->qend && c->at[gr->q].ticks < ticks && !c->rc; gr->q++)
			c->rc = c->at_fn(c->ctx, c->at[gr->q].i, c->sites, t->depth);
	}
	return c->rc;
}

/* The running total of counter `id`, or NULL when out of memory. */
static double *total_of(rctx *c, uint32_t id)
{
	if (id >= c->ntotal) {
		uint32_t n = id + 1 > c->f->nsites ? id + 1 : c->f->nsites;
		double *a = realloc(c->total, n * sizeof *a);
		if (!a)
			return NULL;
		for (uint32_t i = c->ntotal; i < n; i++)
			a[i] = 0;
		c->total = a;
		c->ntotal = n;
	}
	return &c->total[id];
}

static int push_frame(rthread *t, uint32_t site, uint64_t ns)
{
	if (t->depth == t->cap) {
		uint32_t cap = t->cap ? t->cap * 2 : 16;
		rframe *s = realloc(t->stack, cap * sizeof *s);
		if (!s)
			return FENNEC_ENOMEM;
		t->stack = s;
		t->cap = cap;
	}
	t->stack[t->depth++] = (rframe){site, ns};
	return 0;
}

/* A step or a metric of t at ns. */
static int mark(rctx *c, rthread *t, uint32_t idx, const fmt_event *ev, uint64_t ns)
{
	ana_rp_event e = {.thread = idx, .g = t->g, .tid = t->tid, .ns = clip(c, ns), .site = ev->id};
	if (ev->type == FMT_EV_STEP) {
		e.kind = ANA_RP_STEP;
		e.step = ++t->steps; /* counted outside the window too: the numbers stay the recording's */
		e.flags = ev->flags;
		e.items = ev->u;
	} else if (ev->type == FMT_EV_COUNTER) {
		double *v = total_of(c, ev->id);
		if (!v)
			return c->rc = FENNEC_ENOMEM;
		e.kind = ANA_RP_COUNTER;
		e.value = *v += (double)ev->i;
	} else {
		e.kind = ev->type == FMT_EV_GAUGE ? ANA_RP_GAUGE : ANA_RP_VALUE;
		e.value = ev->f;
	}
	if (!(c->o->what & ANA_RP_MARKS) || !inside(c, ns))
		return 0;
	if (materialize(c, t, idx))
		return c->rc;
	if (e.kind != ANA_RP_STEP)
		e.name = site_name(c, ev->id);
	return emit(c, &e);
}

/* A kernel, copy or memset, at its start. */
static int gpu_work(rctx *c, const fmt_event *ev)
{
	const fmt_gpu *r = ev->gpu;
	if (!r || (r->type != FMT_GR_KERNEL && r->type != FMT_GR_MEMCPY && r->type != FMT_GR_MEMSET))
		return 0;
	uint64_t ns = rel_ns(c, ev->ticks);
	if (!inside(c, ns))
		return 0;
	ana_rp_event e = {.kind = ANA_RP_GPU_WORK, .thread = UINT32_MAX, .g = ANA_NONE, .ns = ns, .gpu = r};
	return emit(c, &e);
}

/* Deliver NVTX range b's end at ns (its start first when that was clipped to the window's
 * start); end_tid 0: it never ended. */
static int nvtx_close(rctx *c, nrange *b, uint64_t ns, uint64_t end_tid)
{
	if (!b->shown && after_start(c, ns) && before_end(c, b->ns)) {
		ana_rp_event s = {.kind = ANA_RP_NVTX_START, .thread = UINT32_MAX, .g = ANA_NONE, .tid = b->tid,
				  .ns = clip(c, b->ns), .name = b->text ? b->text : "", .range = c->next_range};
		b->shown = 1;
		b->range = c->next_range++;
		if (emit(c, &s))
			return c->rc;
	}
	if (!b->shown)
		return 0;
	if (!end_tid && !before_end(c, ns))
		end_tid = b->tid; /* it ends with the window, as the other ranges open across its end */
	ana_rp_event e = {.kind = ANA_RP_NVTX_END, .thread = UINT32_MAX, .g = ANA_NONE, .tid = b->tid, .ns = clip(c, ns),
			  .range = b->range, .end_tid = end_tid, .unfinished = !end_tid};
	return emit(c, &e);
}

static int nvtx_event(rctx *c, const fmt_gpu *r)
{
	/* GPUX times are CLOCK_MONOTONIC already */
	uint64_t ns = r->start_ns > c->t0 ? r->start_ns - c->t0 : 0;
	if (r->type == FMT_GR_RANGE_END) {
		uint32_t k = ana_map_get(&c->open, r->range_id);
		if (k == ANA_NONE || c->nv[k].ended)
			return 0; /* its start is not in the file (or not selected): the analysis counts it */
		nrange *b = &c->nv[k];
		b->ended = 1;
		return nvtx_close(c, b, ns > b->ns ? ns : b->ns, r->tid ? r->tid : b->tid);
	}
	if (r->type != FMT_GR_RANGE_START && r->type != FMT_GR_MARK)
		return 0;
	if (c->o->has_tid && r->tid != c->o->tid)
		return 0;
	const char *text = r->text ? r->text : "";
	ana_rp_event e = {.kind = ANA_RP_NVTX_MARK, .thread = UINT32_MAX, .g = ANA_NONE, .tid = r->tid, .ns = clip(c, ns),
			  .name = text};
	if (r->type == FMT_GR_MARK)
		return inside(c, ns) ? emit(c, &e) : 0;
	if (c->nnv == c->nvcap) {
		size_t cap = c->nvcap ? c->nvcap * 2 : 256;
		nrange *v = realloc(c->nv, cap * sizeof *v);
		if (!v)
			return c->rc = FENNEC_ENOMEM;
		c->nv = v;
		c->nvcap = cap;
	}
	nrange *b = &c->nv[c->nnv];
	*b = (nrange){.tid = r->tid, .ns = ns};
	/* a reused id: the latest start */
	if (c->nnv >= ANA_NONE || ana_map_put(&c->open, r->range_id, (uint32_t)c->nnv) < 0)
		return c->rc = FENNEC_ENOMEM;
	c->nnv++;
	if (inside(c, ns)) {
		b->shown = 1;
		b->range = e.range = c->next_range++;
		e.kind = ANA_RP_NVTX_START;
		return emit(c, &e);
	}
	if (ns < c->lo && !(b->text = strdup(text)))
		return c->rc = FENNEC_ENOMEM;
	return 0;
}

static int on_event(void *vc, const fmt_file *rf, const fmt_event *ev)
{
	rctx *c = vc;
	(void)rf; /* the model's copy of the file is complete; this one fills as it is read */
	if (ev->type == FMT_EV_GPU) {
		if (c->o->what & ANA_RP_NVTX && nvtx_event(c, ev->gpu))
			return c->rc;
		return c->o->what & ANA_RP_GPU ? gpu_work(c, ev) : 0;
	}
	if (ev->thread == UINT32_MAX || ev->type >= FMT_EV_SAMPLE ||
	    !(c->o->what & (ANA_RP_REGIONS | ANA_RP_ENDS | ANA_RP_MARKS) || c->at))
		return 0;
	rthread *t = thread_of(c, ev->thread);
	if (!t)
		return c->rc = FENNEC_ENOMEM;
	if (t->skip)
		return 0;
	if (c->at) { /* questions only: the stack, no delivery */
		if (ev->type != FMT_EV_BEGIN && ev->type != FMT_EV_END)
			return 0;
		if (t->group != ANA_NONE && answer_until(c, t, ev->thread, ev->ticks))
			return c->rc;
		if (ev->type == FMT_EV_END)
			t->depth -= t->depth > 0;
		else if (push_frame(t, ev->id, 0))
			return c->rc = FENNEC_ENOMEM;
		return 0;
	}
	uint64_t ns = rel_ns(c, ev->ticks);
	if (ns < t->last_ns)
		ns = t->last_ns; /* never backwards on a thread (the clock fit is monotonic; this is a guard) */
	t->last_ns = ns;
	switch (ev->type) {
	case FMT_EV_BEGIN: {
		int in = inside(c, ns);
		if (in && t->shown < t->depth && materialize(c, t, ev->thread))
			return c->rc;
		if (t->depth < t->cap) /* the hot path: push_frame grows the stack */
			t->stack[t->depth++] = (rframe){ev->id, ns};
		else if (push_frame(t, ev->id, ns))
			return c->rc = FENNEC_ENOMEM;
		if (in) {
			t->shown = t->depth;
			region(c, t, ev->thread, ANA_RP_BEGIN, t->depth - 1, clip(c, ns), 0);
		}
		break;
	}
	case FMT_EV_END:
		if (!t->depth)
			break; /* the reader already drops these */
		/* a region open across the window's start, ending inside or after it */
		if (t->shown < t->depth && after_start(c, ns) && materialize(c, t, ev->thread))
			return c->rc;
		if (t->depth <= t->shown) {
			t->shown = t->depth - 1;
			region(c, t, ev->thread, ANA_RP_END, t->depth - 1, clip(c, ns), 0);
		}
		t->depth--;
		break;
	case FMT_EV_STEP:
	case FMT_EV_COUNTER:
	case FMT_EV_GAUGE:
	case FMT_EV_VALUE:
		return mark(c, t, ev->thread, ev, ns);
	default:
		break;
	}
	return c->rc;
}

/* The file is read: close what is still open at each thread's end (a run cut short), and
 * the NVTX ranges never ended at the file's end. */
static int finish(rctx *c)
{
	for (uint32_t k = 0; k < c->nth && !c->rc; k++) {
		rthread *t = &c->th[k];
		if (!t->known || t->skip || !t->depth)
			continue;
		const fmt_thread_rec *r = k < c->f->nthreads ? &c->f->threads[k] : NULL;
		uint64_t ns = rel_ns(c, r && r->end_ticks ? r->end_ticks : c->f->last_ticks);
		if (ns < t->last_ns)
			ns = t->last_ns;
		if (after_start(c, ns) && materialize(c, t, k))
			break;
		/* past the window's end it ends with the window, as any region open across it */
		int unfinished = before_end(c, ns);
		for (; t->depth && !c->rc; t->depth--)
			if (t->depth <= t->shown) {
				t->shown = t->depth - 1;
				region(c, t, k, ANA_RP_END, t->depth - 1, clip(c, ns), unfinished);
			}
	}
	uint64_t end_ns = rel_ns(c, c->f->last_ticks);
	for (size_t k = 0, n = c->nnv; k < n && !c->rc; k++)
		if (!c->nv[k].ended)
			nvtx_close(c, &c->nv[k], end_ns > c->nv[k].ns ? end_ns : c->nv[k].ns, 0);
	return c->rc;
}

/* Read c's file through on_event, then close what is open (finish). */
static int run(rctx *c, uint32_t proc, fmt_error *err)
{
	const ana_profile *p = c->p;
	if (p->window.active && !c->o->whole) {
		const fmt_file *f = c->f;
		c->win = 1;
		c->lo = p->window.begin_ns > c->t0 ? p->window.begin_ns - c->t0 : 0;
		c->hi = p->window.end_ns == UINT64_MAX ? UINT64_MAX : p->window.end_ns > c->t0 ? p->window.end_ns - c->t0 : 0;
		/* as the model's two ticks either side: an edge on a step mark, turned into ns and
		 * back, lands on that mark's time, not beside it */
		c->slack = ana_sat_u64(1 + ceil(2 * (f->fit_b > 0 ? f->fit_b : 1)));
	}
	c->ntmap = c->f->nthreads;
	c->tmap = malloc((c->ntmap ? c->ntmap : 1) * sizeof *c->tmap);
	if (!c->tmap)
		return FENNEC_ENOMEM;
	for (uint32_t i = 0; i < c->ntmap; i++)
		c->tmap[i] = ANA_NONE;
	for (uint32_t t = 0; t < p->nthreads; t++) /* the last the model made of a file thread */
		if (p->threads[t].process == proc && p->threads[t].index < c->ntmap)
			c->tmap[p->threads[t].index] = t;
	fmt_file f;
	int rc = fmt_read_ex(c->f->path, c->f->read_flags, &f, on_event, c, err);
	fmt_file_free(&f);
	if (c->rc)
		return c->rc;
	if (rc == FENNEC_ENOMEM)
		return rc;
	if (rc && p->opt.force && !c->o->whole)
		rc = 0; /* --force: what precedes the damage, as the analysis did */
	if (c->at) /* the questions past each thread's last region event */
		for (size_t k = 0; k < c->ngroups && !c->rc; k++)
			if (c->groups[k].last != ANA_NONE)
				answer_until(c, &c->th[c->groups[k].last], c->groups[k].last, UINT64_MAX);
			else
				for (; c->groups[k].q < c->groups[k].qend && !c->rc; c->groups[k].q++)
					c->rc = c->at_fn(c->ctx, c->at[c->groups[k].q].i, NULL, 0);
	else if (!rc || c->o->whole)
		finish(c);
	return c->rc ? c->rc : rc;
}

static void rctx_free(rctx *c)
{
	for (uint32_t k = 0; k < c->nth; k++)
		free(c->th[k].stack);
	for (size_t k = 0; k < c->nnv; k++)
		free(c->nv[k].text);
	free(c->th);
	free(c->tmap);
	free(c->total);
	free(c->nv);
	ana_map_clear(&c->open);
	free(c->at);
	free(c->groups);
	free(c->sites);
}

int ana_replay(const ana_profile *p, uint32_t proc, const ana_replay_opts *o, ana_replay_fn fn, void *ctx,
	       fmt_error *err)
{
	memset(err, 0, sizeof *err);
	if (proc >= p->nprocs)
		return FENNEC_EINVAL;
	rctx c = {.p = p, .o = o, .f = &p->procs[proc].file, .fn = fn, .ctx = ctx, .t0 = ana_replay_t0_ns(p),
		  .hi = UINT64_MAX};
	int rc = run(&c, proc, err);
	rctx_free(&c);
	return rc;
}

static int cmp_at(const void *a, const void *b)
{
	const struct qsorted *x = a, *y = b;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->ticks != y->ticks)
		return x->ticks < y->ticks ? -1 : 1;
	return (x->i > y->i) - (x->i < y->i);
}

int ana_replay_open_at(const ana_profile *p, uint32_t proc, const ana_rp_at *q, size_t n, ana_rp_at_fn fn, void *ctx)
{
	if (proc >= p->nprocs)
		return FENNEC_EINVAL;
	if (!n)
		return 0;
	static const ana_replay_opts whole = {.whole = 1};
	rctx c = {.p = p, .o = &whole, .f = &p->procs[proc].file, .ctx = ctx, .t0 = ana_replay_t0_ns(p),
		  .hi = UINT64_MAX, .at_fn = fn};
	c.at = malloc(n * sizeof *c.at);
	c.groups = malloc(n * sizeof *c.groups);
	int rc = FENNEC_ENOMEM;
	if (c.at && c.groups) {
		for (size_t i = 0; i < n; i++)
			c.at[i] = (struct qsorted){q[i].tid, q[i].ticks, i};
		qsort(c.at, n, sizeof *c.at, cmp_at);
		for (size_t i = 0; i < n; i++) {
			if (!c.ngroups || c.groups[c.ngroups - 1].tid != c.at[i].tid)
				c.groups[c.ngroups++] = (struct qgroup){.tid = c.at[i].tid, .q = i, .last = ANA_NONE};
			c.groups[c.ngroups - 1].qend = i + 1;
		}
		fmt_error err;
		rc = run(&c, proc, &err);
		if (rc != FENNEC_ENOMEM && rc != c.rc)
			rc = 0; /* a file that changed since: answered from what it gave */
	}
	rctx_free(&c);
	return rc;
}

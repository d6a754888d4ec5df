/*
 * model.c - builds the analysis model from a recording: finds the process files,
 * replays each thread's events through a region stack into a call tree keyed by
 * nesting path, collects steps, metrics, threads and processes, then computes the
 * statistics (exact percentiles by selection, not sorting, up to sketch.h's budget of
 * kept durations, a log-bucket histogram past it). Streaming: memory grows with the
 * number of metric updates (16 bytes each) and steps, not with the file or the calls.
 */
#include "analyze/aggregate.h"
#include "analyze/map.h"
#include "analyze/sketch.h"

#include <dirent.h>
#include <errno.h>
#include <libgen.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/stat.h>

/* ---- small containers ---- */

static int u64_push(ana_u64vec *a, uint64_t x)
{
	if (a->n == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 16;
		uint64_t *v = realloc(a->v, cap * sizeof *v);
		if (!v)
			return -1;
		a->v = v;
		a->cap = cap;
	}
	a->v[a->n++] = x;
	return 0;
}

static int f64_push(ana_f64vec *a, double x)
{
	if (a->n == a->cap) {
		size_t cap = a->cap ? a->cap * 2 : 16;
		double *v = realloc(a->v, cap * sizeof *v);
		if (!v)
			return -1;
		a->v = v;
		a->cap = cap;
	}
	a->v[a->n++] = x;
	return 0;
}

/* The name and node indexes (p->name_index, p->node_index) are heap-allocated maps. */
static void map_free(ana_map *m)
{
	if (!m)
		return;
	ana_map_clear(m);
	free(m);
}

/* ---- the aggregators ---- */

/*
 * What model.c drives besides its own region tree (aggregate.h), in the order their
 * finish runs: each takes the events of the types in `events` while a file is read
 * (first taker only), gets end_process after each file read and discard after a file
 * that failed, then finish once every file is read and the region nodes are final; free
 * by ana_profile_free. The passes over the finished model (ranks, roofline) are rows
 * with a finish only. NULL: no such hook. `what` says what failed when finish runs out
 * of memory.
 */
#define EV(t) (1ull << (t))
typedef struct aggregator {
	uint64_t events;
	int (*event)(ana_profile *p, uint32_t proc, const fmt_file *f, const fmt_event *ev);
	int (*end_process)(ana_profile *p, uint32_t proc, const fmt_file *f);
	void (*discard)(ana_profile *p, uint32_t proc);
	int (*finish)(ana_profile *p);
	void (*free)(ana_profile *p);
	const char *what;
} aggregator;

static const aggregator aggregators[] = {
	{EV(FMT_EV_SAMPLE), ana_samples_event, NULL, ana_samples_discard, ana_samples_finish, ana_samples_free,
	 "symbolising samples"},
	{EV(FMT_EV_ALLOC) | EV(FMT_EV_FREE) | EV(FMT_EV_HEAP_SNAP), ana_memory_event, ana_memory_end_process,
	 ana_memory_discard, ana_memory_finish, ana_memory_free, "symbolising samples"},
	{0, NULL, NULL, NULL, ana_operators, NULL, "symbolising samples"},
	{EV(FMT_EV_GPU), ana_gpu_event, ana_gpu_end_process, ana_gpu_discard, ana_gpu_finish, ana_gpu_free,
	 "analysing GPU activity"},
	{EV(FMT_EV_SYS) | EV(FMT_EV_ENERGY), ana_sys_event, NULL, ana_sys_discard, ana_sys_finish, ana_sys_free,
	 "analysing system metrics"},
	{0, NULL, NULL, NULL, ana_critpath_build, ana_critpath_free, "finding critical paths"},
	{0, NULL, NULL, NULL, ana_ranks, NULL, "comparing ranks"},
	{0, NULL, NULL, NULL, ana_roofline_build, NULL, "placing regions on the roofline"},
};
#define FOR_AGGREGATORS(a) for (const aggregator *a = aggregators; a < aggregators + ARRAY_LEN(aggregators); a++)

/* ---- replay ---- */

typedef struct frame {
	uint32_t node;       /* ANA_NONE until the call is known to reach into the window */
	uint32_t tn;         /* p->tnodes index: this node on this thread */
	uint32_t site;       /* its site id, to make the node when it reaches into the window */
	uint64_t start;
	uint64_t child_ticks; /* the children's time inside the window */
} frame;

#define CACHE 256
typedef struct lthread {
	uint32_t g;          /* index into p->threads, ANA_NONE until first event */
	frame *stack;
	uint32_t depth, cap;
	uint32_t max_depth;  /* the deepest nesting its events reached */
	uint64_t busy_ticks;
	uint64_t marks_before; /* fennec_step() marks before the window */
	struct { uint32_t parent, site, node, tn; } cache[CACHE];
	ana_u64vec step_ticks, step_items, step_flags;
} lthread;

typedef struct ctx {
	ana_profile *p;
	uint32_t proc;
	uint32_t *site_name;  /* per site id: name index, ANA_NONE if not mapped yet */
	uint32_t *site_metric;
	uint32_t nsite_map;
	lthread *th;
	uint32_t nth;
	ana_map seen;         /* (thread, node) pairs met -> p->tnodes index */
	uint32_t first_thread, first_tn; /* p->threads, p->tnodes and p->step_nodes of this file start here */
	size_t first_sn;
	int cp;               /* the first process: its transitions go to the critical path (critpath.c) */
	int oom;
	/* The window (ana_profile.window) in this file's ticks, [lo, hi]; win 0: no window,
	 * everything is inside. Set at the first event: the clock fit is final by then. */
	int win, win_ready;
	uint64_t lo, hi;
} ctx;

static uint32_t site_name(ctx *c, const fmt_file *f, uint32_t id)
{
	if (id >= c->nsite_map) {
		uint32_t n = f->nsites > id ? f->nsites : id + 1;
		uint32_t *a = realloc(c->site_name, n * sizeof *a), *b;
		if (!a)
			return ANA_NONE;
		c->site_name = a;
		b = realloc(c->site_metric, n * sizeof *b);
		if (!b)
			return ANA_NONE;
		c->site_metric = b;
		for (uint32_t i = c->nsite_map; i < n; i++)
			c->site_name[i] = c->site_metric[i] = ANA_NONE;
		c->nsite_map = n;
	}
	if (c->site_name[id] == ANA_NONE) {
		char tmp[64];
		const char *s = id < f->nsites && f->sites[id].defined ? f->sites[id].name : NULL;
		if (!s) {
			snprintf(tmp, sizeof tmp, id ? "<site %u>" : "<site table full>", id);
			s = tmp;
		}
		c->site_name[id] = ana_intern(c->p, s);
	}
	return c->site_name[id];
}

static uint32_t node_for(ana_profile *p, uint32_t parent, uint32_t name)
{
	ana_map *m = p->node_index;
	uint64_t key = (uint64_t)parent << 32 | name;
	uint32_t n = ana_map_get(m, key);
	if (n != ANA_NONE)
		return n;
	ana_node *nodes = ana_grow32(p->nodes, &p->nodes_cap, p->nnodes, sizeof *nodes);
	if (!nodes)
		return ANA_NONE;
	p->nodes = nodes;
	n = p->nnodes++;
	ana_node *x = &p->nodes[n];
	memset(x, 0, sizeof *x);
	x->name = name;
	x->parent = parent;
	x->depth = parent == ANA_NONE ? 0 : p->nodes[parent].depth + 1;
	x->first_child = x->next_sibling = ANA_NONE;
	if (parent != ANA_NONE) {
		x->next_sibling = p->nodes[parent].first_child;
		p->nodes[parent].first_child = n;
	}
	ana_map_put(m, key, n);
	return n;
}

static lthread *thread_of(ctx *c, const fmt_file *f, uint32_t idx)
{
	if (idx >= c->nth) {
		uint32_t n = f->nthreads > idx ? f->nthreads : idx + 1;
		lthread *a = realloc(c->th, n * sizeof *a);
		if (!a)
			return NULL;
		memset(a + c->nth, 0, (n - c->nth) * sizeof *a);
		for (uint32_t i = c->nth; i < n; i++) {
			a[i].g = ANA_NONE;
			for (int k = 0; k < CACHE; k++)
				a[i].cache[k].node = ANA_NONE;
		}
		c->th = a;
		c->nth = n;
	}
	lthread *t = &c->th[idx];
	if (t->g == ANA_NONE) {
		ana_profile *p = c->p;
		ana_thread *th = ana_grow32(p->threads, &p->threads_cap, p->nthreads, sizeof *th);
		if (!th)
			return NULL;
		p->threads = th;
		t->g = p->nthreads++;
		ana_thread *x = &p->threads[t->g];
		x->process = c->proc;
		x->index = idx;
		x->tid = f->threads[idx].tid;
	}
	return t;
}

static uint32_t metric_for(ctx *c, const fmt_file *f, uint32_t id, unsigned kind)
{
	uint32_t name = site_name(c, f, id);
	if (name == ANA_NONE)
		return ANA_NONE;
	if (c->site_metric[id] != ANA_NONE)
		return c->site_metric[id];
	ana_profile *p = c->p;
	for (uint32_t i = 0; i < p->nmetrics; i++)
		if (p->metrics[i].name == name && p->metrics[i].kind == kind)
			return c->site_metric[id] = i;
	ana_metric *m = ana_grow32(p->metrics, &p->metrics_cap, p->nmetrics, sizeof *m);
	if (!m)
		return ANA_NONE;
	p->metrics = m;
	ana_metric *x = &p->metrics[p->nmetrics];
	memset(x, 0, sizeof *x);
	x->name = name;
	x->kind = kind;
	/* The roofline's counters (fennec_region_work): also summed into the open region. */
	if (kind == FMT_SITE_COUNTER)
		x->work = !strcmp(p->names[name], "fennec.flops")	  ? 1
			  : !strcmp(p->names[name], "fennec.bytes")   ? 2
			  : !strcmp(p->names[name], "fennec.flops32") ? 3
								      : 0;
	x->min = INFINITY;
	x->max = -INFINITY;
	return c->site_metric[id] = p->nmetrics++;
}

static uint32_t tnode_new(ana_profile *p, uint32_t thread, uint32_t node)
{
	ana_tnode *a = ana_grow32(p->tnodes, &p->tnodes_cap, p->ntnodes, sizeof *a);
	if (!a)
		return ANA_NONE;
	p->tnodes = a;
	a[p->ntnodes] = (ana_tnode){.thread = thread, .node = node};
	return p->ntnodes++;
}

/* The sum of a node's calls that ended after `cur_step` marks goes out as the time of
 * step cur_step - 1 (the steps run from one mark to the next), or of the set-up. */
static int step_node_push(ana_profile *p, const ana_tnode *tn)
{
	if (!tn->cur_ns)
		return 0;
	if (ana_grow(&p->step_nodes, &p->step_nodes_cap, p->nstep_nodes, sizeof *p->step_nodes) < 0)
		return -1;
	uint64_t step = tn->cur_step ? tn->cur_step - 1 : ANA_SETUP_STEP;
	p->step_nodes[p->nstep_nodes++] = (ana_step_node){tn->thread, tn->node, step, tn->cur_ns};
	return 0;
}

/* The set-up of a stepping thread: from its process's start (or the window's) to its
 * first mark. */
static uint64_t setup_of(const fmt_file *f, const lthread *t, uint64_t lo)
{
	uint64_t tk = t->step_ticks.v[0], from = lo > f->start_ticks ? lo : f->start_ticks;
	return (uint64_t)llround(fmt_dticks_to_ns(f, tk > from ? tk - from : 0));
}

/* A call of a node ended on a thread that has marked `step` steps: its time per thread,
 * and per step (the sum of the previous step goes out when the step changes). */
static int tnode_end(ana_profile *p, uint32_t i, uint64_t step, uint64_t dns, uint64_t cns)
{
	ana_tnode *tn = &p->tnodes[i];
	tn->count++;
	tn->total_ns += dns;
	tn->child_ns += cns;
	if (step != tn->cur_step) {
		if (step_node_push(p, tn) < 0)
			return -1;
		tn->cur_step = step;
		tn->cur_ns = 0;
	}
	tn->cur_ns += dns;
	return 0;
}

/* The file is read: keep the per-step times of its stepping thread `g` only. */
static int step_nodes_finish(ana_profile *p, const ctx *c, uint32_t g)
{
	for (uint32_t i = c->first_tn; i < p->ntnodes; i++)
		if (p->tnodes[i].thread == g && step_node_push(p, &p->tnodes[i]) < 0)
			return -1;
	size_t k = c->first_sn;
	for (size_t i = c->first_sn; i < p->nstep_nodes; i++)
		if (p->step_nodes[i].thread == g)
			p->step_nodes[k++] = p->step_nodes[i];
	p->nstep_nodes = k;
	return 0;
}

/* A window time (CLOCK_MONOTONIC ns) in f's ticks, by the file's final clock fit. */
static uint64_t ns_ticks(const fmt_file *f, uint64_t ns)
{
	if (ns == UINT64_MAX)
		return UINT64_MAX;
	double t = f->fit_b > 0 ? ((double)ns - f->fit_a) / f->fit_b : (double)ns;
	return t > 0 ? (t >= 1.8e19 ? UINT64_MAX : (uint64_t)llround(t)) : 0;
}

/* The region node and per-thread node of a call of `site` under `parent` on t (the cache
 * first: misses are rare). Returns 0 or -1 (out of memory). */
static int node_of_call(ctx *c, const fmt_file *f, lthread *t, uint32_t parent, uint32_t site, uint32_t *node_out,
			uint32_t *tn_out)
{
	ana_profile *p = c->p;
	unsigned slot = (site * 31u + parent) & (CACHE - 1);
	uint32_t node, tn;
	if (t->cache[slot].node != ANA_NONE && t->cache[slot].parent == parent && t->cache[slot].site == site) {
		node = t->cache[slot].node;
		tn = t->cache[slot].tn;
	} else {
		uint32_t name = site_name(c, f, site);
		if (name == ANA_NONE || (node = node_for(p, parent, name)) == ANA_NONE)
			return -1;
		/* Distinct threads per node: cache misses are rare, so check a set here. */
		uint64_t key = (uint64_t)t->g << 32 | node;
		if ((tn = ana_map_get(&c->seen, key)) == ANA_NONE) {
			if ((tn = tnode_new(p, t->g, node)) == ANA_NONE || ana_map_put(&c->seen, key, tn) < 0)
				return -1;
			p->nodes[node].threads++;
		}
		t->cache[slot].parent = parent;
		t->cache[slot].site = site;
		t->cache[slot].node = node;
		t->cache[slot].tn = tn;
	}
	*node_out = node;
	*tn_out = tn;
	return 0;
}

/* Give the open calls of t their nodes, outermost first: one of them reaches into the
 * window (the calls around it do too). Calls wholly outside the window make no node, so
 * that a window shows only the regions that ran in it. */
static int materialize(ctx *c, const fmt_file *f, lthread *t)
{
	for (uint32_t d = 0; d < t->depth; d++) {
		frame *fr = &t->stack[d];
		if (fr->node != ANA_NONE)
			continue;
		if (node_of_call(c, f, t, d ? t->stack[d - 1].node : ANA_NONE, fr->site, &fr->node, &fr->tn) < 0)
			return -1;
	}
	return 0;
}

static int on_event(void *vc, const fmt_file *f, const fmt_event *ev)
{
	ctx *c = vc;
	ana_profile *p = c->p;
	if (c->win && !c->win_ready) {
		/* A tick or two either side: an edge from a step mark (--steps), turned into ns
		 * and back, lands on that mark's tick, not beside it. */
		uint64_t slack = f->fit_b > 0 ? ana_sat_u64(ceil(1 / f->fit_b) + 2) : 2;
		c->lo = ns_ticks(f, p->window.begin_ns);
		c->lo = c->lo > slack ? c->lo - slack : 0;
		c->hi = ns_ticks(f, p->window.end_ns);
		c->hi = c->hi < UINT64_MAX - slack ? c->hi + slack : UINT64_MAX;
		c->win_ready = 1;
	}
	/* Outside the window: only what keeps the region stacks true (BEGIN, END) and the count
	 * of steps before it goes on. */
	int inside = !c->win || (ev->ticks >= c->lo && ev->ticks <= c->hi);
	if (ev->type >= FMT_EV_SAMPLE && ev->type < 64) { /* not a thread-stream event: an aggregator's */
		if (!inside)
			return 0;
		/* the critical path sees the GPU records before gpu.c does */
		if (ev->type == FMT_EV_GPU && c->cp && ana_cp_collecting(p) && ana_cp_gpu(p, ev->gpu))
			goto oom;
		FOR_AGGREGATORS(a)
			if (a->events & EV(ev->type))
				return a->event(p, c->proc, f, ev) ? (c->oom = 1, FENNEC_ENOMEM) : 0;
	}
	lthread *t = thread_of(c, f, ev->thread);
	if (!t)
		goto oom;
	switch (ev->type) {
	case FMT_EV_BEGIN: {
		uint32_t node = ANA_NONE, tn = ANA_NONE;
		/* Inside the window the call's node is made now (its parents' first); outside, when
		 * an end inside the window shows the call reached into it. */
		if (inside && ((c->win && materialize(c, f, t) < 0) ||
			       node_of_call(c, f, t, t->depth ? t->stack[t->depth - 1].node : ANA_NONE, ev->id, &node, &tn) < 0))
			goto oom;
		if (t->depth == t->cap) {
			uint32_t cap = t->cap ? t->cap * 2 : 16;
			frame *s = realloc(t->stack, cap * sizeof *s);
			if (!s)
				goto oom;
			t->stack = s;
			t->cap = cap;
		}
		t->stack[t->depth++] = (frame){node, tn, ev->id, ev->ticks, 0};
		if (t->depth > t->max_depth)
			t->max_depth = t->depth;
		if (inside && c->cp && ana_cp_collecting(p) && ana_cp_region(p, t->g, ev->ticks, node))
			goto oom;
		break;
	}
	case FMT_EV_END: {
		if (!t->depth)
			break; /* the reader already drops these */
		/* A call wholly outside the window counts for nothing; one across an edge counts
		 * its time inside (its children's too, clipped alike). */
		uint64_t from = t->stack[t->depth - 1].start, to = ev->ticks;
		if (c->win) {
			if (to < c->lo || from > c->hi) {
				t->depth--;
				break;
			}
			if (materialize(c, f, t) < 0)
				goto oom;
			if (from < c->lo)
				from = c->lo;
			if (to > c->hi)
				to = c->hi;
		}
		frame fr = t->stack[--t->depth];
		uint64_t dt = to > from ? to - from : 0;
		ana_node *n = &p->nodes[fr.node];
		uint64_t dns = ana_round_ns(fmt_dticks_to_ns(f, dt));
		uint64_t cns = fr.child_ticks ? ana_round_ns(fmt_dticks_to_ns(f, fr.child_ticks)) : 0;
		n->total_ns += dns;
		n->child_ns += cns;
		if (ana_durations_add(p, n, dns) < 0 || tnode_end(p, fr.tn, t->step_ticks.n, dns, cns) < 0)
			goto oom;
		if (t->depth)
			t->stack[t->depth - 1].child_ticks += dt;
		else
			t->busy_ticks += dt;
		if (inside && c->cp && ana_cp_collecting(p) &&
		    ana_cp_region(p, t->g, ev->ticks, t->depth ? t->stack[t->depth - 1].node : ANA_NONE))
			goto oom;
		break;
	}
	case FMT_EV_STEP:
		if (!inside) {
			t->marks_before += ev->ticks < c->lo;
			break;
		}
		if (u64_push(&t->step_ticks, ev->ticks) < 0 || u64_push(&t->step_items, ev->u) < 0 ||
		    u64_push(&t->step_flags, ev->flags) < 0)
			goto oom;
		if (c->cp)
			ana_cp_step_seen(p);
		break;
	case FMT_EV_COUNTER:
	case FMT_EV_GAUGE:
	case FMT_EV_VALUE: {
		if (!inside)
			break;
		unsigned kind = ev->type == FMT_EV_COUNTER ? FMT_SITE_COUNTER : ev->type == FMT_EV_GAUGE ? FMT_SITE_GAUGE : FMT_SITE_VALUE;
		uint32_t mi = metric_for(c, f, ev->id, kind);
		if (mi == ANA_NONE)
			goto oom;
		ana_metric *m = &p->metrics[mi];
		double v = ev->type == FMT_EV_COUNTER ? (double)ev->i : ev->f;
		uint64_t now = (uint64_t)llround(fmt_ticks_to_ns(f, ev->ticks));
		if (!m->count)
			m->first_ns = now;
		m->last_ns = now;
		m->count++;
		if (ev->type == FMT_EV_COUNTER)
			m->total += v;
		if (m->work && t->depth) {
			ana_node *wn = &p->nodes[t->stack[t->depth - 1].node];
			*(m->work == 1 ? &wn->flops : m->work == 2 ? &wn->bytes : &wn->flops32) += v;
		}
		m->last = v;
		m->sum += v;
		if (v < m->min)
			m->min = v;
		if (v > m->max)
			m->max = v;
		if (ev->type == FMT_EV_VALUE && f64_push(&m->values, v) < 0)
			goto oom;
		if (m->npoints == m->points_cap) {
			size_t cap = m->points_cap ? m->points_cap * 2 : 16;
			ana_point *pts = realloc(m->points, cap * sizeof *pts);
			if (!pts)
				goto oom;
			m->points = pts;
			m->points_cap = cap;
		}
		m->points[m->npoints++] = (ana_point){now, v};
		break;
	}
	default:
		break;
	}
	return 0;
oom:
	c->oom = 1;
	return FENNEC_ENOMEM;
}

static int cmp_point(const void *a, const void *b)
{
	uint64_t x = ((const ana_point *)a)->t_ns, y = ((const ana_point *)b)->t_ns;
	return (x > y) - (x < y);
}

/* The FENNEC_* values the collector of pr could not use (header key 33): said once for the
 * processes of a recording, which share the environment. */
static void config_warnings(ana_profile *p, const ana_process *pr)
{
	const char *w = pr->file.config_warnings;
	if (!w || !*w)
		return;
	for (const ana_process *q = p->procs; q < pr; q++)
		if (q->file.config_warnings && !strcmp(q->file.config_warnings, w))
			return;
	while (*w) {
		size_t n = strcspn(w, "\n");
		ana_warn(p, "%s: the collector could not use %.*s", pr->file.path, (int)n, w);
		w += n + (w[n] != 0);
	}
}

static char *node_path(ana_profile *p, uint32_t n)
{
	if (p->nodes[n].path)
		return p->nodes[n].path;
	const char *name = p->names[p->nodes[n].name];
	char *s;
	if (p->nodes[n].parent == ANA_NONE)
		s = strdup(name);
	else {
		char *pp = node_path(p, p->nodes[n].parent);
		s = malloc(strlen(pp) + strlen(name) + 2);
		if (s)
			sprintf(s, "%s/%s", pp ? pp : "", name);
	}
	return p->nodes[n].path = s;
}

/* ---- loading ---- */

/* The first process's steps: those of its thread with the most marks. A step is the time
 * between two consecutive marks; the time before the first mark is set-up. */
static void first_process_steps(ana_profile *p, ctx *c, const fmt_file *f)
{
	lthread *best = NULL;
	uint64_t other_marks = 0;
	for (uint32_t i = 0; i < c->nth; i++)
		if (c->th[i].g != ANA_NONE && c->th[i].step_ticks.n) {
			p->step_threads++;
			other_marks += c->th[i].step_ticks.n - 1; /* steps: from mark to mark */
			if (!best || c->th[i].step_ticks.n > best->step_ticks.n)
				best = &c->th[i];
		}
	if (best && p->step_threads > 1) {
		other_marks -= best->step_ticks.n - 1;
		ana_warn(p, "%s: steps were marked on %u threads; the step statistics count only those of "
			    "thread %llu (%zu steps, the most), not the other threads' %llu: mark steps on one "
			    "thread (the training loop's)",
			 f->path, p->step_threads, (unsigned long long)p->threads[best->g].tid,
			 best->step_ticks.n - 1, (unsigned long long)other_marks);
	}
	if (best) {
		p->steps_tid = p->threads[best->g].tid;
		uint64_t prev = best->step_ticks.v[0];
		p->setup_ns = setup_of(f, best, c->lo);
		for (size_t k = 1; k < best->step_ticks.n; k++) {
			uint64_t tk = best->step_ticks.v[k];
			u64_push(&p->step_ns, (uint64_t)llround(fmt_dticks_to_ns(f, tk > prev ? tk - prev : 0)));
			u64_push(&p->step_start_ns, (uint64_t)llround(fmt_ticks_to_ns(f, prev)));
			u64_push(&p->step_items, best->step_items.v[k]);
			u64_push(&p->step_flags, best->step_flags.v[k]);
			prev = tk;
			p->items += best->step_items.v[k];
			if (best->step_flags.v[k] & 2)
				p->has_items = 1;
			if (best->step_flags.v[k] & 1)
				p->steps_recorded++;
		}
		p->marks = best->step_ticks.n;
		p->steps = best->step_ticks.n - 1;
	}
}

/* What a file says of itself that the reader of the report must know: a capped
 * recording's dropped start, a run cut short, damage skipped, names cut, lost bytes. */
static void file_warnings(ana_profile *p, const ana_process *pr)
{
	const fmt_file *f = &pr->file;
	if (f->seg_dropped) {
		/* A capped recording (--max-size, --max-duration): the analysis covers what is kept. */
		char a[32], b[32], cap[80] = "";
		double dropped_ns = (double)(f->start_mono_ns - f->seg_session_start_mono_ns);
		if (f->seg_max_bytes)
			snprintf(cap, sizeof cap, " to stay within %s", ana_fmt_bytes((double)f->seg_max_bytes, b, sizeof b));
		else if (f->seg_max_ns)
			snprintf(cap, sizeof cap, " to keep the last %s", ana_fmt_ns((double)f->seg_max_ns, b, sizeof b));
		ana_warn(p, "%s: capped recording: the first %s (%llu steps, %llu events; segments 0 to %llu) were dropped%s; "
			    "this analysis covers the last %s, from step %llu on (its step numbers count from there)",
			 f->path, ana_fmt_ns(dropped_ns, a, sizeof a), (unsigned long long)f->seg_steps_before,
			 (unsigned long long)f->seg_events_before, (unsigned long long)(f->seg_first - 1), cap,
			 ana_fmt_ns((double)pr->wall_ns, b, sizeof b), (unsigned long long)f->seg_steps_before);
	}
	if (f->cut_short)
		ana_warn(p, "%s: the run was cut short (no END record: killed, crashed, still running, or a write "
			    "failed, as on a full disk); "
			    "the profile holds what was flushed%s",
			 f->path, f->torn_offset ? "" : ", up to its last flush");
	if (f->torn_offset)
		ana_warn(p, "%s: byte %llu: partial chunk at the end of the file ignored", f->path,
			 (unsigned long long)f->torn_offset);
	static const char *const skip_why[] = {
		[FMT_SKIP_HEADER] = "a chunk header with impossible fields",
		[FMT_SKIP_LENGTH] = "a chunk claiming more bytes than the file holds",
		[FMT_SKIP_CHECKSUM] = "a chunk whose checksum fails",
	};
	for (uint32_t k = 0; k < f->nskips && k < FMT_MAX_SKIPS; k++) {
		const fmt_skip *sk = &f->skips[k];
		ana_warn(p, "%s: byte %llu: %s (type %u, stored length %u): skipped %llu bytes to the next whole "
			    "chunk, at byte %llu (--force); what they held is missing",
			 f->path, (unsigned long long)sk->offset, skip_why[sk->why], sk->type, sk->stored,
			 (unsigned long long)sk->bytes, (unsigned long long)(sk->offset + sk->bytes));
	}
	if (f->nskips > FMT_MAX_SKIPS)
		ana_warn(p, "%s: %u damaged places skipped in all (--force), %llu bytes", f->path, f->nskips,
			 (unsigned long long)f->skipped_bytes);
	if (f->long_names) {
		const char *nm = f->long_name_site < f->nsites ? f->sites[f->long_name_site].name : NULL;
		ana_warn(p, "%s: %llu region or metric name%s longer than %u bytes cut to that (the first, of %llu "
			    "bytes: \"%.60s…\")",
			 f->path, (unsigned long long)f->long_names, f->long_names == 1 ? "" : "s", FMT_MAX_NAME,
			 (unsigned long long)f->long_name_bytes, nm ? nm : "");
	}
	if (f->bad_ends)
		ana_warn(p, "%s: %llu region ends without a matching begin were ignored", f->path,
			 (unsigned long long)f->bad_ends);
	if (f->sites_refused)
		ana_warn(p, "%s: the collector's table of %u region and metric names was full: %llu call%s "
			    "recorded under the one name \"<site table full>\"; a name per call "
			    "(formatted into a fresh buffer) fills it: name regions by a fixed set of strings",
			 f->path, 65536u, (unsigned long long)f->sites_refused, f->sites_refused == 1 ? " was" : "s were");
	if (f->lost_bytes)
		ana_warn(p, "%s: the collector could not write %llu bytes (disk full or I/O error); data is missing",
			 f->path, (unsigned long long)f->lost_bytes);
}

static int load_file(ana_profile *p, const char *path, fmt_error *err)
{
	ana_process *procs = realloc(p->procs, (p->nprocs + 1) * sizeof *procs);
	if (!procs)
		return FENNEC_ENOMEM;
	p->procs = procs;
	ana_process *pr = &p->procs[p->nprocs];
	memset(pr, 0, sizeof *pr);
	ctx c = {.p = p, .proc = p->nprocs, .first_thread = p->nthreads, .first_tn = p->ntnodes, .first_sn = p->nstep_nodes,
		 .cp = p->nprocs == 0, .win = p->window.active};
	if (c.cp && ana_cp_begin(p))
		return FENNEC_ENOMEM;
	int rc = fmt_read_ex(path, p->opt.force ? FMT_READ_RESYNC : 0, &pr->file, on_event, &c, err);
	if (rc && rc != FENNEC_ENOMEM && p->opt.force && pr->file.recording_id) {
		ana_warn(p, "%s (analysed up to that point because of --force)", err->msg);
		pr->file.cut_short = 1;
		rc = 0;
	}
	if (c.oom && !rc) {
		rc = FENNEC_ENOMEM;
		snprintf(err->msg, sizeof err->msg, "%s: out of memory while analysing", path);
	}
	fmt_file *f = &pr->file;
	if (rc == 0) {
		p->nprocs++;
		/* Close the bookkeeping of every thread. */
		uint64_t end_ticks = f->last_ticks;
		for (uint32_t i = 0; i < c.nth; i++) {
			lthread *t = &c.th[i];
			if (t->g == ANA_NONE)
				continue;
			ana_thread *x = &p->threads[t->g];
			fmt_thread_rec *r = &f->threads[i];
			x->name = r->name ? r->name : "";
			x->events = r->events;
			x->dropped = r->dropped;
			x->busy_ns = (uint64_t)llround(fmt_dticks_to_ns(f, t->busy_ticks));
			uint64_t tend = r->end_ticks ? r->end_ticks : (r->last_ticks > end_ticks ? r->last_ticks : end_ticks);
			uint64_t tstart = r->start_ticks;
			if (c.win) { /* its life inside the window */
				tstart = tstart > c.lo ? tstart : c.lo;
				tend = tend < c.hi ? tend : c.hi;
			}
			x->lifetime_ns = tend > tstart ? (uint64_t)llround(fmt_dticks_to_ns(f, tend - tstart)) : 0;
			/* Calls open at the end: those begun by the window's end were open in it. */
			uint32_t open = 0;
			while (open < t->depth && (!c.win || t->stack[open].start <= c.hi))
				open++;
			uint32_t depth = t->depth;
			t->depth = open;
			if (c.win && materialize(&c, f, t) < 0)
				rc = FENNEC_ENOMEM;
			for (uint32_t d = 0; d < t->depth && !rc; d++)
				p->nodes[t->stack[d].node].open++;
			t->depth = depth;
			x->marks_before = t->marks_before;
			x->marks = t->step_ticks.n;
			x->steps = x->marks ? x->marks - 1 : 0;
		}
		for (uint32_t i = 0; i < c.nth; i++)
			if (c.th[i].g != ANA_NONE && c.th[i].max_depth >= FMT_MAX_DEPTH)
				p->deep_threads++;
		if (pr == &p->procs[0])
			first_process_steps(p, &c, f);
		/* Every process's steps, on its thread with the most marks: ranks.c compares them. */
		lthread *st = NULL;
		for (uint32_t i = 0; i < c.nth; i++)
			if (c.th[i].g != ANA_NONE && c.th[i].step_ticks.n && (!st || c.th[i].step_ticks.n > st->step_ticks.n))
				st = &c.th[i];
		pr->step_thread = st ? st->g : ANA_NONE;
		pr->marks = st ? st->step_ticks.n : 0;
		pr->setup_ns = st ? setup_of(f, st, c.lo) : 0;
		for (size_t k = 1; st && k < st->step_ticks.n; k++) {
			uint64_t prev = st->step_ticks.v[k - 1], tk = st->step_ticks.v[k];
			if (u64_push(&pr->step_ns, (uint64_t)llround(fmt_dticks_to_ns(f, tk > prev ? tk - prev : 0))) < 0)
				rc = FENNEC_ENOMEM;
		}
		if (step_nodes_finish(p, &c, pr->step_thread) < 0)
			rc = FENNEC_ENOMEM;
		pr->start_ns = f->start_mono_ns;
		double end_ns = fmt_ticks_to_ns(f, f->last_ticks);
		if (f->ncalib && (double)f->calib[f->ncalib - 1].mono_ns > end_ns)
			end_ns = (double)f->calib[f->ncalib - 1].mono_ns;
		pr->end_ns = end_ns > (double)pr->start_ns ? ana_sat_u64(end_ns) : pr->start_ns;
		pr->rec_end_ns = pr->end_ns;
		if (c.win) { /* the process's time inside the window */
			if (pr->start_ns < p->window.begin_ns)
				pr->start_ns = p->window.begin_ns;
			if (pr->end_ns > p->window.end_ns)
				pr->end_ns = p->window.end_ns;
			if (pr->end_ns < pr->start_ns)
				pr->end_ns = pr->start_ns;
		}
		pr->wall_ns = pr->end_ns - pr->start_ns;
		for (uint32_t i = 0; i < f->nthreads; i++)
			if (f->threads[i].known) {
				pr->threads++;
				pr->dropped += f->threads[i].dropped;
			}
		file_warnings(p, pr);
		config_warnings(p, pr);
		FOR_AGGREGATORS(a)
			if (a->end_process && a->end_process(p, c.proc, f))
				rc = FENNEC_ENOMEM;
	} else {
		fmt_file_free(f);
		FOR_AGGREGATORS(a)
			if (a->discard)
				a->discard(p, c.proc);
		/* its threads would otherwise count for the next file's process */
		p->nthreads = c.first_thread;
		p->ntnodes = c.first_tn;
		p->nstep_nodes = c.first_sn;
	}
	for (uint32_t i = 0; i < c.nth; i++) {
		free(c.th[i].stack);
		free(c.th[i].step_ticks.v);
		free(c.th[i].step_items.v);
		free(c.th[i].step_flags.v);
	}
	free(c.th);
	ana_map_clear(&c.seen);
	free(c.site_name);
	free(c.site_metric);
	return rc;
}

/* fennec took a large share of the recording's CPU (its whole cost, ana_overhead_sum();
 * the writer's alone in files before 1.8): the numbers above include it. Said once the run
 * is long enough for start-up costs not to dominate. */
/* A recording with an overhead budget (record --overhead-budget) that fennec went over:
 * by how much, and why, from the collector's own looks (STATS): the run's start, before the
 * first look lowered sampling, or a cost the budget does not lower. */
static void budget_warning(ana_profile *p, double own, double cpu)
{
	const fmt_file *f = NULL; /* the budgeted process that used the most CPU */
	double others = 0;        /* fennec's cost in every other process */
	uint32_t nothers = 0;
	for (uint32_t i = 0; i < p->nprocs; i++) {
		const fmt_file *g = &p->procs[i].file;
		if (g->budget_ppm && (!f || g->cpu_user_ns + g->cpu_sys_ns > f->cpu_user_ns + f->cpu_sys_ns))
			f = g;
	}
	for (uint32_t i = 0; i < p->nprocs; i++) {
		ana_overhead o;
		if (&p->procs[i].file != f && ana_overhead_file(&p->procs[i].file, &o)) {
			others += o.total_ns;
			nothers++;
		}
	}
	double budget = (double)f->budget_ppm / 1e4, pct = 100 * own / cpu, last = (double)f->budget_share_ppm / 1e4;
	if (pct <= budget)
		return;
	uint32_t k = f->stride ? f->stride : 1;
	double hz = f->sample_period_ns ? 1e9 / (double)f->sample_period_ns / k : 0;
	const char *floor = k > 1 && k * 10 >= f->sample_hz ? " (its floor)" : "";
	char a[32], b[32], why[400];
	/* what the budget cannot lower: the heap wrappers, the events (region, step, metric) */
	const ana_overhead *o = &p->overhead;
	int heap = o->heap_ns >= o->events_ns;
	double fixed = 100 * (heap ? o->heap_ns : o->events_ns) / cpu;
	if (others > own / 2) {
		snprintf(why, sizeof why, "%s of it was in %u other process%s (short ones pay fennec's start, before a "
					  "budget's first look at 150 ms); in the process that ran longest it measured %.2f%% at "
					  "the end, sampling at %.3g Hz%s",
			 ana_fmt_ns(others, a, sizeof a), nothers, nothers == 1 ? "" : "es", last, hz, floor);
	} else if (fixed >= (pct - budget) / 2) {
		snprintf(why, sizeof why, "%s alone cost %.2f%%, which the budget does not lower (%s); sampling ended at "
					  "%.3g Hz%s, and the last look measured %.2f%%",
			 heap ? "the heap wrappers" : "region, step and metric events", fixed,
			 heap ? "--memory off removes them, or fewer allocations in the hot loop"
			      : "fewer regions inside tight loops, or step sampling: docs/api.md",
			 hz, floor, last);
	} else if (last <= budget && f->nstride_changes) {
		const struct fmt_stride_change *c = &f->stride_changes[0];
		snprintf(why, sizeof why, "most of it came before the budget's first change, at %s, when it measured %.1f%% "
					  "and lowered sampling; at the end it measured %.2f%% at %.3g Hz (a longer run spreads "
					  "the start thinner, a lower -F makes it cheaper)",
			 ana_fmt_ns(fmt_ticks_to_ns(f, c->ticks) - (double)f->start_mono_ns, b, sizeof b),
			 (double)c->share_ppm / 1e4, last, hz);
	} else {
		snprintf(why, sizeof why, "at the end it measured %.2f%%, sampling at %.3g Hz%s", last, hz, floor);
	}
	ana_warn(p, "fennec cost %.2f%% of the program's CPU, over the --overhead-budget of %g%%: %s", pct, budget, why);
}

static void collector_warning(ana_profile *p)
{
	double cpu = (double)(p->cpu_user_ns + p->cpu_sys_ns), own = (double)p->collector_cpu_ns;
	int whole = p->overhead.known;
	if (whole)
		own = p->overhead.total_ns;
	int budget = 0; /* record --overhead-budget */
	for (uint32_t i = 0; i < p->nprocs; i++)
		budget |= p->procs[i].file.budget_ppm != 0;
	if (budget) {
		if (whole && cpu >= 5e8)
			budget_warning(p, own, cpu);
		return;
	}
	if ((!whole && p->collector_known != p->nprocs) || cpu < 5e8 || own < 0.1 * cpu)
		return;
	int full = 0, hz = 0;
	for (uint32_t i = 0; i < p->nprocs; i++) {
		full |= p->procs[i].file.mem_mode == FMT_MEM_FULL;
		hz |= p->procs[i].file.sample_hz > 999;
	}
	char a[32], b[32];
	/* the largest part of the cost names the cheaper recording */
	const ana_overhead *o = &p->overhead;
	int heap = whole && o->heap_ns >= o->events_ns && o->heap_ns >= o->samples_ns && o->heap_ns >= o->writer_ns;
	int events = whole && !heap && o->events_ns >= o->samples_ns && o->events_ns >= o->writer_ns;
	ana_warn(p, "fennec%s %.0f%% of the recording's CPU (%s of %s), which the CPU times "
		    "include; a cheaper recording: %s", whole ? " cost" : "'s writer used", 100 * own / cpu, ana_fmt_ns(own, a, sizeof a),
		 ana_fmt_ns(cpu, b, sizeof b),
		 full && (heap || !whole) ? "--memory=sampled instead of full (stacks of sampled allocations only)"
		 : heap ? "--memory=off (heap counters only), or fewer allocations in the hot loop"
		 : events ? "fewer regions inside tight loops (or step sampling, docs/api.md)"
		 : hz ? "a lower sampling rate (-F 999 or less)"
		 : whole && !o->events_ns ? "a lower sampling rate (-F 499 or less)" /* no regions to advise on */
		      : "fewer regions inside tight loops, or a lower sampling rate (-F)");
}

/* ---- the window ---- */

/* The first file's step marks, per thread, for --steps (window_begin's pass). */
typedef struct marks_ctx {
	ana_u64vec *th;
	uint32_t n;
} marks_ctx;

static int marks_event(void *vc, const fmt_file *f, const fmt_event *ev)
{
	marks_ctx *m = vc;
	(void)f;
	if (ev->type != FMT_EV_STEP)
		return 0;
	if (ev->thread >= m->n) {
		ana_u64vec *a = realloc(m->th, (ev->thread + 1) * sizeof *a);
		if (!a)
			return FENNEC_ENOMEM;
		memset(a + m->n, 0, (ev->thread + 1 - m->n) * sizeof *a);
		m->th = a;
		m->n = ev->thread + 1;
	}
	return u64_push(&m->th[ev->thread], ev->ticks) < 0 ? FENNEC_ENOMEM : 0;
}

static int window_refuse(ana_profile *p, fmt_error *err, const char *fmt, ...) __attribute__((format(printf, 3, 4)));
static int window_refuse(ana_profile *p, fmt_error *err, const char *fmt, ...)
{
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(err->msg, sizeof err->msg, fmt, ap);
	va_end(ap);
	p->window.bad = 1;
	return err->code = FENNEC_EINVAL;
}

/* The recording's end as load_file() computes a process's. */
static uint64_t file_end_ns(const fmt_file *f)
{
	double end_ns = fmt_ticks_to_ns(f, f->last_ticks);
	if (f->ncalib && (double)f->calib[f->ncalib - 1].mono_ns > end_ns)
		end_ns = (double)f->calib[f->ncalib - 1].mono_ns;
	return end_ns > (double)f->start_mono_ns ? ana_sat_u64(end_ns) : f->start_mono_ns;
}

/*
 * Resolve the window asked for (p->opt.window) into p->window before the files are read,
 * from the first file: its start for --since and --until (the header only), its end for
 * --last and its step marks for --steps (one pass that decodes the file and keeps only
 * the marks). The end is checked against the recording once it is read (window_end).
 */
static int window_begin(ana_profile *p, const char *path, fmt_error *err)
{
	const ana_window_spec *w = &p->opt.window;
	ana_window *x = &p->window;
	if (!w->set)
		return 0;
	x->active = 1;
	int pass = w->last_ns >= 0 || w->step_lo >= 0 || w->step_hi >= 0;
	fmt_file f;
	marks_ctx mc = {0};
	int rc = pass ? fmt_read_ex(path, p->opt.force ? FMT_READ_RESYNC : 0, &f, marks_event, &mc, err)
		      : fmt_read_header(path, &f, err);
	if (rc && !(rc != FENNEC_ENOMEM && p->opt.force && f.recording_id))
		goto out;
	rc = 0;
	uint64_t begin = f.start_mono_ns, end = UINT64_MAX;
	x->rec_begin_ns = begin;
	if (pass)
		x->rec_end_ns = file_end_ns(&f);
	if (w->since_ns >= 0)
		begin = x->rec_begin_ns + (uint64_t)w->since_ns;
	if (w->until_ns >= 0)
		end = x->rec_begin_ns + (uint64_t)w->until_ns;
	if (w->last_ns >= 0 && x->rec_end_ns - x->rec_begin_ns > (uint64_t)w->last_ns) {
		uint64_t b = x->rec_end_ns - (uint64_t)w->last_ns;
		begin = b > begin ? b : begin;
	}
	if (w->step_lo >= 0 || w->step_hi >= 0) {
		/* The stepping thread is the one with the most marks, as for the step statistics. */
		const ana_u64vec *m = NULL;
		for (uint32_t i = 0; i < mc.n; i++)
			if (mc.th[i].n && (!m || mc.th[i].n > m->n))
				m = &mc.th[i];
		uint64_t steps = m ? m->n - 1 : 0;
		uint64_t lo = w->step_lo >= 0 ? (uint64_t)w->step_lo : 0;
		uint64_t hi = w->step_hi >= 0 ? (uint64_t)w->step_hi : steps - 1;
		if (!steps) {
			rc = window_refuse(p, err, "--steps %s: %s has no steps (no two fennec_step() marks)", w->steps_arg, path);
			goto out;
		}
		if (lo >= steps) {
			rc = window_refuse(p, err, "--steps %s: %s has %llu steps (0 to %llu)", w->steps_arg, path,
					   (unsigned long long)steps, (unsigned long long)(steps - 1));
			goto out;
		}
		if (hi >= steps)
			hi = steps - 1;
		uint64_t b = (uint64_t)llround(fmt_ticks_to_ns(&f, m->v[lo]));
		uint64_t e = (uint64_t)llround(fmt_ticks_to_ns(&f, m->v[hi + 1]));
		begin = b > begin ? b : begin;
		end = e < end ? e : end;
	}
	if (end <= begin) {
		char a[160] = "";
		size_t n = 0;
		if (w->since_arg)
			n += (size_t)snprintf(a + n, sizeof a - n, " --since %s", w->since_arg);
		if (w->until_arg && n < sizeof a)
			n += (size_t)snprintf(a + n, sizeof a - n, " --until %s", w->until_arg);
		if (w->last_arg && n < sizeof a)
			n += (size_t)snprintf(a + n, sizeof a - n, " --last %s", w->last_arg);
		if (w->steps_arg && n < sizeof a)
			snprintf(a + n, sizeof a - n, " --steps %s", w->steps_arg);
		rc = window_refuse(p, err, "%s: no time is in all of the window's limits (it is empty)", a + 1);
		goto out;
	}
	x->begin_ns = begin;
	x->end_ns = end;
out:
	for (uint32_t i = 0; i < mc.n; i++)
		free(mc.th[i].v);
	free(mc.th);
	fmt_file_free(&f);
	return rc;
}

/* The recording is read: the window within it, its first step's number. A window that
 * starts past the end of the recording is refused. */
static int window_end(ana_profile *p, uint64_t rec_end, fmt_error *err)
{
	ana_window *x = &p->window;
	const ana_window_spec *w = &p->opt.window;
	if (!x->active) {
		x->rec_begin_ns = x->begin_ns = p->procs[0].start_ns;
		x->rec_end_ns = x->end_ns = rec_end;
		x->to_end = 1;
		return 0;
	}
	x->rec_end_ns = rec_end;
	if (x->begin_ns >= rec_end) {
		char d[32];
		ana_fmt_ns((double)(rec_end - x->rec_begin_ns), d, sizeof d);
		if (w->since_arg)
			return window_refuse(p, err, "--since %s: past the end of the recording, which is %s long", w->since_arg, d);
		return window_refuse(p, err, "the window starts past the end of the recording, which is %s long", d);
	}
	x->to_end = x->end_ns >= rec_end;
	if (x->to_end)
		x->end_ns = rec_end;
	for (uint32_t i = 0; i < p->nthreads; i++)
		if (p->threads[i].process == 0 && p->steps && p->threads[i].tid == p->steps_tid)
			x->first_step = p->threads[i].marks_before;
	return 0;
}

int ana_load(const char *path, const ana_options *opt, ana_profile *p, fmt_error *err)
{
	return ana_load_paths(&path, 1, opt, p, err);
}

int ana_load_paths(const char *const *paths, size_t npaths, const ana_options *opt, ana_profile *p, fmt_error *err)
{
	memset(p, 0, sizeof *p);
	memset(err, 0, sizeof *err);
	p->opt.hot_threshold_pct = 10;
	if (opt)
		p->opt = *opt;
	if (p->opt.roofline_min_share_pct <= 0)
		p->opt.roofline_min_share_pct = 5;
	p->name_index = calloc(1, sizeof(ana_map));
	p->node_index = calloc(1, sizeof(ana_map));
	if (!p->name_index || !p->node_index)
		return FENNEC_ENOMEM;
	char **files = NULL;
	size_t nfiles = 0;
	int rc = ana_list_files(paths, npaths, &files, &nfiles, err, p);
	if (!rc && nfiles)
		rc = window_begin(p, files[0], err);
	if (rc) {
		for (size_t i = 0; i < nfiles; i++)
			free(files[i]);
		free(files);
		return rc;
	}
	/* Load the first file first: steps come from it. Siblings that fail are warned
	 * about; the named file failing is the error. */
	for (size_t i = 0; i < nfiles && !rc; i++) {
		fmt_error e;
		int r = load_file(p, files[i], &e);
		if (r == 0)
			continue;
		if (i == 0 || r == FENNEC_ENOMEM) {
			*err = e;
			rc = r;
		} else
			ana_warn(p, "skipped %s", e.msg);
	}
	for (size_t i = 0; i < nfiles; i++)
		free(files[i]);
	free(files);
	if (rc)
		return rc;
	/* Summary. */
	ana_process *first = &p->procs[0];
	p->wall_ns = first->wall_ns;
	/* The run's wall time is its first process's, through the images that process exec'd
	 * (the same pid, the image before ended by exec): a launcher that execs the program
	 * (pyenv's shims, env, a wrapper script) would otherwise give its own few ms. */
	const ana_process *last = first;
	for (uint32_t hops = 0; hops < p->nprocs && last->file.has_end && last->file.exit_reason == 2; hops++) {
		const ana_process *next = NULL;
		for (uint32_t j = 0; j < p->nprocs; j++) {
			const ana_process *q = &p->procs[j];
			if (q != last && q->file.pid == last->file.pid && q->file.origin == FMT_ORIGIN_EXEC &&
			    q->file.recording_id == last->file.recording_id && q->start_ns >= last->start_ns &&
			    (!next || q->start_ns < next->start_ns))
				next = q;
		}
		if (!next)
			break;
		last = next;
	}
	if (last != first && last->end_ns > first->start_ns)
		p->wall_ns = last->end_ns - first->start_ns;
	if ((rc = window_end(p, last->rec_end_ns, err)) != 0)
		return rc;
	for (uint32_t i = 0; i < p->nprocs; i++) {
		/* getrusage() survives exec: an exec'd image's CPU includes the image before
		 * it (same pid, ended by exec), which is counted on its own. Files that give
		 * the CPU at their start have it taken off by the reader already. */
		const fmt_file *f = &p->procs[i].file;
		uint64_t user = f->cpu_user_ns, sys = f->cpu_sys_ns;
		if (f->origin == FMT_ORIGIN_EXEC && !f->has_cpu_start)
			for (uint32_t j = 0; j < p->nprocs; j++) {
				const fmt_file *g = &p->procs[j].file;
				if (j != i && g->pid == f->pid && g->has_end && g->exit_reason == 2 &&
				    g->start_mono_ns < f->start_mono_ns && g->cpu_user_ns <= user && g->cpu_sys_ns <= sys) {
					user -= g->cpu_user_ns;
					sys -= g->cpu_sys_ns;
					break;
				}
			}
		p->cpu_user_ns += user;
		p->cpu_sys_ns += sys;
		if (f->has_collector_cpu) {
			p->collector_cpu_ns += f->collector_cpu_ns;
			p->collector_known++;
		}
		p->dropped += p->procs[i].dropped;
		p->events += p->procs[i].file.events;
		p->cut_short |= p->procs[i].file.cut_short;
	}
	if (p->dropped && p->deep_threads) {
		/* The collector counts a begin nested deeper than it tracks as dropped, and its end:
		 * a larger buffer does not bring them back. */
		ana_warn(p, "%llu events were dropped, and %u thread%s reached %u open regions, the deepest nesting "
			    "the collector tracks: regions begun deeper are not recorded (their begins and ends count as "
			    "dropped) whatever the buffer size, so the counts and totals of the deepest regions are low; "
			    "keep region nesting under %u (regions in a recursive function are the usual cause)",
			 (unsigned long long)p->dropped, p->deep_threads, p->deep_threads == 1 ? "" : "s", FMT_MAX_DEPTH,
			 FMT_MAX_DEPTH);
	} else if (p->dropped) {
		uint64_t buf = p->procs[0].file.buffer_bytes;
		ana_warn(p, "%llu events were dropped: a thread filled its %llu KiB buffer faster than the "
			    "writer drained it, so counts and totals of the regions involved are low; record "
			    "again with a larger --buffer-kb (up to 32768) or a smaller --flush-ms",
			 (unsigned long long)p->dropped, (unsigned long long)(buf / 1024));
	}
	ana_overhead_sum(p);
	collector_warning(p);
	/* The selection reorders its input: give it a copy, keep the series in order. */
	if (p->step_ns.n) {
		uint64_t *tmp = malloc(p->step_ns.n * sizeof *tmp);
		if (!tmp)
			return FENNEC_ENOMEM;
		memcpy(tmp, p->step_ns.v, p->step_ns.n * sizeof *tmp);
		ana_dist_compute_u64(&p->step_dist, tmp, p->step_ns.n);
		free(tmp);
	}

	/* Regions. A region's share is of the wall time of the processes it ran in: a region
	 * of the workers is a share of the workers' time, not of the first process's (summed
	 * over processes, those shares passed 100 %). A process's threads are contiguous in
	 * p->tnodes (one file after another), so a change of process is a new one. */
	for (uint32_t n = 0; n < p->nnodes; n++)
		p->nodes[n].process = ANA_NONE;
	for (uint32_t i = 0; i < p->ntnodes; i++) {
		ana_node *x = &p->nodes[p->tnodes[i].node];
		uint32_t proc = p->threads[p->tnodes[i].thread].process;
		if (x->processes && x->process == proc)
			continue;
		x->process = proc;
		x->processes++;
		x->base_ns += p->procs[proc].wall_ns;
	}
	for (uint32_t n = 0; n < p->nnodes; n++) {
		ana_node *x = &p->nodes[n];
		if (!x->processes || !x->base_ns)
			x->base_ns = p->wall_ns;
	}
	for (uint32_t n = 0; n < p->nnodes; n++) {
		ana_node *x = &p->nodes[n];
		x->self_ns = x->total_ns > x->child_ns ? x->total_ns - x->child_ns : 0;
		if (x->sketch) {
			ana_sketch_dist(x->sketch, &x->dist);
			free(x->sketch);
			x->sketch = NULL;
		} else
			ana_dist_compute_u64(&x->dist, x->durations.v, x->durations.n);
		if (!p->opt.keep_durations) {
			free(x->durations.v);
			x->durations.v = NULL;
			x->durations.n = x->durations.cap = 0;
		}
		x->share_pct = x->base_ns ? 100.0 * (double)x->total_ns / (double)x->base_ns : 0;
		x->self_pct = x->base_ns ? 100.0 * (double)x->self_ns / (double)x->base_ns : 0;
		node_path(p, n);
	}
	for (uint32_t i = 0; i < p->nmetrics; i++) {
		ana_metric *m = &p->metrics[i];
		if (m->kind == FMT_SITE_VALUE)
			ana_dist_compute(&m->dist, m->values.v, m->values.n);
		/* Threads and processes interleave: put the series in time order. */
		size_t k = 1;
		while (k < m->npoints && m->points[k - 1].t_ns <= m->points[k].t_ns)
			k++;
		if (k < m->npoints)
			qsort(m->points, m->npoints, sizeof *m->points, cmp_point);
	}
	/* The aggregators' and passes' finish, now that the region nodes are final. */
	FOR_AGGREGATORS(a)
		if (a->finish && a->finish(p)) {
			snprintf(err->msg, sizeof err->msg, "%s: out of memory while %s", p->procs[0].file.path, a->what);
			return err->code = FENNEC_ENOMEM;
		}
	ana_rules(p);
	return 0;
}

void ana_profile_free(ana_profile *p)
{
	if (!p)
		return;
	for (uint32_t i = 0; i < p->nnames; i++)
		free(p->names[i]);
	free(p->names);
	free(p->roof.r);
	for (uint32_t i = 0; i < p->nnodes; i++) {
		free(p->nodes[i].durations.v);
		free(p->nodes[i].sketch);
		free(p->nodes[i].path);
	}
	free(p->nodes);
	for (uint32_t i = 0; i < p->nprocs; i++) {
		fmt_file_free(&p->procs[i].file);
		free(p->procs[i].step_ns.v);
	}
	free(p->procs);
	free(p->threads);
	for (uint32_t i = 0; i < p->nmetrics; i++) {
		free(p->metrics[i].values.v);
		free(p->metrics[i].points);
	}
	free(p->metrics);
	for (uint32_t i = 0; i < p->nfindings; i++) {
		free(p->findings[i].subject);
		free(p->findings[i].evidence);
		free(p->findings[i].recommendation);
	}
	free(p->findings);
	for (uint32_t i = 0; i < p->nwarnings; i++)
		free(p->warnings[i]);
	free(p->warnings);
	free(p->step_ns.v);
	free(p->step_start_ns.v);
	free(p->step_items.v);
	free(p->step_flags.v);
	free(p->tnodes);
	free(p->step_nodes);
	free(p->ranks);
	FOR_AGGREGATORS(a)
		if (a->free)
			a->free(p);
	free(p->ops);
	p->ops = NULL;
	p->nops = 0;
	map_free(p->name_index);
	map_free(p->node_index);
	memset(p, 0, sizeof *p);
}

/*
 * critpath.c - the critical path of each step (critpath.h, docs/critical_path.md). While
 * model.c reads the first process's file, every region begin and end becomes a transition
 * of its thread's lane (the innermost region open from then on) and every kernel, copy and
 * memset an interval of its GPU stream's lane, up to a budget. After the statistics each
 * recorded step is walked back from its end (ana_cp_walk) and the pieces are summed per
 * lane and label; the slowest and the median step keep their chains.
 */
#include "analyze/aggregate.h"
#include "analyze/gpu.h"
#include "analyze/map.h"
#include "symbol/symbol.h"

#include <math.h>
#include <stddef.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* ---- the walk ---- */

/* The segment of l running just before time t: the largest i with t[i] < t; -1 when t is
 * at or before the lane's first transition (idle). */
static ptrdiff_t seg_before(const ana_cp_lane *l, uint64_t t)
{
	size_t lo = 0, hi = l->n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (l->t[mid] < t)
			lo = mid + 1;
		else
			hi = mid;
	}
	return (ptrdiff_t)lo - 1;
}

static int is_work(uint32_t lab, const uint8_t *waiting) { return lab != ANA_NONE && !waiting[lab]; }

/* The latest end in (lo, hi] of a work segment of l with a positive length, or 0. */
static uint64_t last_work_end(const ana_cp_lane *l, const uint8_t *waiting, uint64_t lo, uint64_t hi)
{
	/* j: the last transition at or before hi; segment j - 1 ends there. */
	size_t a = 0, b = l->n;
	while (a < b) {
		size_t mid = a + (b - a) / 2;
		if (l->t[mid] <= hi)
			a = mid + 1;
		else
			b = mid;
	}
	for (size_t j = a; j-- > 1 && l->t[j] > lo;)
		if (l->t[j - 1] < l->t[j] && is_work(l->lab[j - 1], waiting))
			return l->t[j];
	return 0;
}

/* The first thread lane (`from` first, then by index) with a work segment running just
 * before t, or ANA_NONE. */
static uint32_t host_at(const ana_cp_lane *lanes, uint32_t nlanes, uint32_t from, const uint8_t *waiting, uint64_t t)
{
	for (uint32_t k = 0; k <= nlanes; k++) {
		uint32_t m = k ? k - 1 : from;
		if ((k && m == from) || m >= nlanes || lanes[m].gpu)
			continue;
		ptrdiff_t j = seg_before(&lanes[m], t);
		if (j >= 0 && is_work(lanes[m].lab[j], waiting))
			return m;
	}
	return ANA_NONE;
}

/* Prepend [s, e) of (lane, label) to the pieces built backwards. */
static int emit(ana_cp_piece **pieces, size_t *n, size_t *cap, uint32_t lane, uint32_t label, uint64_t s, uint64_t e)
{
	if (s >= e)
		return 0;
	if (*n && (*pieces)[*n - 1].lane == lane && (*pieces)[*n - 1].label == label && (*pieces)[*n - 1].start_ns == e) {
		(*pieces)[*n - 1].start_ns = s;
		return 0;
	}
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 64;
		ana_cp_piece *a = realloc(*pieces, c * sizeof *a);
		if (!a)
			return -1;
		*pieces = a;
		*cap = c;
	}
	(*pieces)[(*n)++] = (ana_cp_piece){lane, label, s, e};
	return 0;
}

int ana_cp_walk(const ana_cp_lane *lanes, uint32_t nlanes, uint32_t from, const uint8_t *waiting, uint64_t t0,
		uint64_t t1, ana_cp_piece **pieces, size_t *npieces, size_t *cap)
{
	*npieces = 0;
	uint32_t cur = from;
	uint64_t t = t1;
	ptrdiff_t i = -2; /* segment of lane cur before the previous t; -2: not known */
	/* Each round either moves t back over a segment or hops to a work segment ending at t,
	 * which the next round moves back over: t decreases every two rounds at most. */
	while (t > t0) {
		const ana_cp_lane *l = &lanes[cur];
		if (i == -2)
			i = seg_before(l, t);
		else /* t moved back on the same lane: the segment is this one or a little before */
			while (i >= 0 && l->t[i] >= t)
				i--;
		uint32_t lab = i >= 0 ? l->lab[i] : ANA_NONE;
		uint64_t s = i >= 0 && l->t[i] > t0 ? l->t[i] : t0;
		if (!is_work(lab, waiting)) {
			uint64_t best = 0;
			uint32_t to = ANA_NONE;
			for (uint32_t m = 0; m < nlanes; m++) {
				if (m == cur)
					continue;
				uint64_t e = last_work_end(&lanes[m], waiting, s, t);
				if (e > best) {
					best = e;
					to = m;
				}
			}
			if (to != ANA_NONE) {
				if (emit(pieces, npieces, cap, cur, lab, best, t) < 0)
					return -1;
				cur = to;
				t = best;
				i = -2;
				continue;
			}
			/* A stream idles until the host submits: nothing it was waiting for ended
			 * (a kernel that starts inside the region that launches it), so the path is
			 * the host work running as the stream starts. The next round moves back over
			 * that work: t still decreases. */
			if (l->gpu && lab == ANA_NONE && (to = host_at(lanes, nlanes, from, waiting, t)) != ANA_NONE) {
				cur = to;
				i = -2;
				continue;
			}
		}
		if (emit(pieces, npieces, cap, cur, lab, s, t) < 0)
			return -1;
		t = s;
	}
	/* Built backwards: put them in time order. */
	for (size_t a = 0, b = *npieces; b-- > a + 1; a++) {
		ana_cp_piece x = (*pieces)[a];
		(*pieces)[a] = (*pieces)[b];
		(*pieces)[b] = x;
	}
	return 0;
}

/* ---- collection ---- */

typedef struct rlane {
	uint64_t *t;         /* ticks while reading, then ns */
	uint32_t *lab;
	size_t n, cap;
	uint64_t lost;       /* ticks of its first transition not kept */
	int has_lost;
} rlane;

typedef struct givl {
	uint64_t s, e;       /* CLOCK_MONOTONIC */
	uint32_t what;       /* kernel: STRING id; memcpy: CP_MEMCPY | copy kind; memset: CP_MEMSET */
} givl;

#define CP_MEMCPY 0x80000000u
#define CP_MEMSET 0xC0000000u

typedef struct glane {
	uint32_t device, stream;
	givl *iv;
	size_t n, cap;
} glane;

typedef struct collect {
	rlane *th;           /* by p->threads index (the first process's threads come first) */
	uint32_t nth;
	glane *gl;
	uint32_t ngl;
	size_t used;         /* transitions kept */
	int steps_seen, full;
	uint64_t gpu_lost_ns; /* earliest start of a GPU record not kept (0: none) */
} collect;

static void collect_free(collect *c)
{
	if (!c)
		return;
	for (uint32_t i = 0; i < c->nth; i++) {
		free(c->th[i].t);
		free(c->th[i].lab);
	}
	free(c->th);
	for (uint32_t i = 0; i < c->ngl; i++)
		free(c->gl[i].iv);
	free(c->gl);
	free(c);
}

int ana_cp_begin(ana_profile *p)
{
	if (p->cp)
		return 0;
	p->cp = calloc(1, sizeof *p->cp);
	if (!p->cp || !(p->cp->priv = calloc(1, sizeof(collect))))
		return FENNEC_ENOMEM;
	return 0;
}

void ana_cp_step_seen(ana_profile *p)
{
	if (ana_cp_collecting(p))
		((collect *)p->cp->priv)->steps_seen = 1;
}

/* Room for k more transitions? Past the budget collection stops (steps after the first
 * lost transition are left out); without a step mark by a quarter of it, it ends. */
static int room(ana_profile *p, collect *c, size_t k)
{
	if (c->full)
		return 0;
	if (!c->steps_seen && c->used + k > ANA_CP_BUDGET / 4) {
		collect_free(c);
		p->cp->priv = NULL;
		return 0;
	}
	if (c->used + k > ANA_CP_BUDGET) {
		c->full = 1;
		return 0;
	}
	c->used += k;
	return 1;
}

int ana_cp_region(ana_profile *p, uint32_t thread, uint64_t ticks, uint32_t node)
{
	collect *c = p->cp ? p->cp->priv : NULL;
	if (!c)
		return 0;
	if (thread >= c->nth) {
		uint32_t n = thread + 16;
		rlane *a = realloc(c->th, n * sizeof *a);
		if (!a)
			return FENNEC_ENOMEM;
		memset(a + c->nth, 0, (n - c->nth) * sizeof *a);
		c->th = a;
		c->nth = n;
	}
	rlane *l = &c->th[thread];
	if (!room(p, c, 1)) {
		if (p->cp->priv && !l->has_lost) {
			l->has_lost = 1;
			l->lost = ticks;
		}
		return 0;
	}
	if (l->n == l->cap) {
		size_t cap = l->cap ? l->cap * 2 : 256;
		uint64_t *t = realloc(l->t, cap * sizeof *t);
		if (!t)
			return FENNEC_ENOMEM;
		l->t = t;
		uint32_t *lab = realloc(l->lab, cap * sizeof *lab);
		if (!lab)
			return FENNEC_ENOMEM;
		l->lab = lab;
		l->cap = cap;
	}
	l->t[l->n] = ticks;
	l->lab[l->n++] = node;
	return 0;
}

int ana_cp_gpu(ana_profile *p, const fmt_gpu *r)
{
	collect *c = p->cp ? p->cp->priv : NULL;
	if (!c || (r->type != FMT_GR_KERNEL && r->type != FMT_GR_MEMCPY && r->type != FMT_GR_MEMSET) ||
	    r->end_ns <= r->start_ns)
		return 0;
	if (!room(p, c, 2)) {
		if (p->cp->priv && (!c->gpu_lost_ns || r->start_ns < c->gpu_lost_ns))
			c->gpu_lost_ns = r->start_ns ? r->start_ns : 1;
		return 0;
	}
	glane *g = NULL;
	for (uint32_t i = c->ngl; i-- > 0;)
		if (c->gl[i].device == r->device && c->gl[i].stream == r->stream) {
			g = &c->gl[i];
			break;
		}
	if (!g) {
		glane *a = realloc(c->gl, (c->ngl + 1) * sizeof *a);
		if (!a)
			return FENNEC_ENOMEM;
		c->gl = a;
		g = &c->gl[c->ngl++];
		*g = (glane){.device = r->device, .stream = r->stream};
	}
	if (g->n == g->cap) {
		size_t cap = g->cap ? g->cap * 2 : 64;
		givl *a = realloc(g->iv, cap * sizeof *a);
		if (!a)
			return FENNEC_ENOMEM;
		g->iv = a;
		g->cap = cap;
	}
	uint32_t what = r->type == FMT_GR_KERNEL ? r->name & ~CP_MEMSET
			: r->type == FMT_GR_MEMCPY ? CP_MEMCPY | (r->kind & 0xff)
						   : CP_MEMSET;
	g->iv[g->n++] = (givl){r->start_ns, r->end_ns, what};
	return 0;
}

/* ---- the analysis ---- */

static int cmp_givl(const void *a, const void *b)
{
	const givl *x = a, *y = b;
	return (x->s > y->s) - (x->s < y->s);
}

/* The label of a GPU activity, interned in p->names and cp->gpu_names. */
static uint32_t gpu_label(ana_profile *p, ana_critpath *cp, ana_map *seen, uint32_t what)
{
	uint32_t v = ana_map_get(seen, what);
	if (v != ANA_NONE)
		return v;
	const fmt_file *f = &p->procs[0].file;
	char buf[64];
	char *dm = NULL;
	const char *s;
	if (what == CP_MEMSET)
		s = "memset";
	else if ((what & CP_MEMSET) == CP_MEMCPY) {
		snprintf(buf, sizeof buf, "memcpy %s", ana_gpu_copy_name(what & 0xff));
		s = buf;
	} else {
		s = what < f->ngpu_strings && f->gpu_strings[what] ? f->gpu_strings[what] : "[unnamed kernel]";
		dm = sym_demangle(s);
		if (dm)
			s = dm;
	}
	uint32_t name = ana_intern(p, s);
	free(dm);
	if (name == ANA_NONE)
		return ANA_NONE;
	uint32_t *a = realloc(cp->gpu_names, (cp->ngpu_names + 1) * sizeof *a);
	if (!a)
		return ANA_NONE;
	cp->gpu_names = a;
	cp->gpu_names[cp->ngpu_names] = name;
	v = cp->nnodes + cp->ngpu_names++;
	return ana_map_put(seen, what, v) < 0 ? ANA_NONE : v;
}

typedef struct build {
	ana_cp_lane *lanes;
	uint64_t **t;        /* owned arrays behind the lanes */
	uint32_t **lab;
	uint32_t n;
} build;

static int lane_add(ana_critpath *cp, build *b, ana_cp_where w, uint64_t *t, uint32_t *lab, size_t n)
{
	ana_cp_where *ww = realloc(cp->where, (cp->nlanes + 1) * sizeof *ww);
	if (!ww)
		return -1;
	cp->where = ww;
	ana_cp_lane *l = realloc(b->lanes, (b->n + 1) * sizeof *l);
	if (!l)
		return -1;
	b->lanes = l;
	uint64_t **bt = realloc(b->t, (b->n + 1) * sizeof *bt);
	if (!bt)
		return -1;
	b->t = bt;
	uint32_t **bl = realloc(b->lab, (b->n + 1) * sizeof *bl);
	if (!bl)
		return -1;
	b->lab = bl;
	cp->where[cp->nlanes++] = w;
	b->lanes[b->n] = (ana_cp_lane){t, lab, n, w.thread == ANA_NONE};
	b->t[b->n] = t;
	b->lab[b->n++] = lab;
	return 0;
}

static void build_free(build *b)
{
	for (uint32_t i = 0; i < b->n; i++) {
		free(b->t[i]);
		free(b->lab[i]);
	}
	free(b->t);
	free(b->lab);
	free(b->lanes);
}

/* The thread lanes (stepping thread first) in ns, and the earliest lost time. Takes the
 * arrays out of the collection. */
static int thread_lanes(ana_profile *p, ana_critpath *cp, collect *c, build *b, uint64_t *horizon)
{
	const fmt_file *f = &p->procs[0].file;
	uint32_t st = p->procs[0].step_thread;
	for (int pass = 0; pass < 2; pass++)
		for (uint32_t g = 0; g < p->nthreads; g++) {
			if (p->threads[g].process != 0 || (pass == 0) != (g == st))
				continue;
			rlane *l = g < c->nth ? &c->th[g] : NULL;
			if (g != st && (!l || !l->n))
				continue;
			uint64_t *t = l ? l->t : NULL;
			uint32_t *lab = l ? l->lab : NULL;
			size_t n = l ? l->n : 0;
			uint64_t prev = 0;
			for (size_t i = 0; i < n; i++) {
				double ns = fmt_ticks_to_ns(f, t[i]);
				uint64_t x = ana_round_ns(ns); /* llround, without its cost */
				t[i] = prev = x > prev ? x : prev; /* one thread's clock never goes back */
			}
			if (l && l->has_lost) {
				double ns = fmt_ticks_to_ns(f, l->lost);
				uint64_t x = ns > 0 ? (uint64_t)llround(ns) : 0;
				if (x < *horizon)
					*horizon = x;
			}
			if (l) {
				l->t = NULL;
				l->lab = NULL;
			}
			if (lane_add(cp, b, (ana_cp_where){g, ANA_NONE, ANA_NONE}, t, lab, n) < 0) {
				free(t);
				free(lab);
				return -1;
			}
		}
	return 0;
}

/* GPU lanes: each stream's intervals in start order, overlaps clipped (a stream runs one
 * thing at a time), as transitions. */
static int gpu_lanes(ana_profile *p, ana_critpath *cp, collect *c, build *b, uint64_t *horizon)
{
	if (c->gpu_lost_ns && c->gpu_lost_ns < *horizon)
		*horizon = c->gpu_lost_ns;
	ana_map seen = {0};
	int rc = 0;
	for (uint32_t i = 0; i < c->ngl && !rc; i++) {
		glane *g = &c->gl[i];
		qsort(g->iv, g->n, sizeof *g->iv, cmp_givl);
		uint64_t *t = malloc(2 * g->n * sizeof *t);
		uint32_t *lab = malloc(2 * g->n * sizeof *lab);
		if (!t || !lab) {
			free(t);
			free(lab);
			rc = -1;
			break;
		}
		size_t n = 0;
		uint64_t end = 0;
		for (size_t k = 0; k < g->n; k++) {
			uint64_t s = g->iv[k].s > end ? g->iv[k].s : end, e = g->iv[k].e;
			if (e <= s)
				continue;
			uint32_t label = gpu_label(p, cp, &seen, g->iv[k].what);
			if (label == ANA_NONE) {
				rc = -1;
				break;
			}
			if (n && t[n - 1] == s) /* back to back: the idle instant goes */
				n--;
			t[n] = s;
			lab[n++] = label;
			t[n] = e;
			lab[n++] = ANA_NONE;
			end = e;
		}
		if (rc || lane_add(cp, b, (ana_cp_where){ANA_NONE, g->device, g->stream}, t, lab, n) < 0) {
			free(t);
			free(lab);
			rc = -1;
		} else
			cp->gpu_lanes++;
	}
	ana_map_clear(&seen);
	return rc;
}

static int cmp_step(const void *a, const void *b, void *arg)
{
	const uint64_t *ns = arg;
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	if (ns[x] != ns[y])
		return ns[x] < ns[y] ? -1 : 1;
	return (x > y) - (x < y);
}

static int cmp_entry(const void *a, const void *b)
{
	const ana_cp_entry *x = a, *y = b;
	if (x->ns != y->ns)
		return x->ns > y->ns ? -1 : 1;
	if (x->lane != y->lane)
		return x->lane < y->lane ? -1 : 1;
	return (x->label > y->label) - (x->label < y->label);
}

static int keep_chain(ana_cp_chain *ch, uint64_t k, uint64_t ns, const ana_cp_piece *pc, size_t n)
{
	ch->index = k;
	ch->ns = ns;
	ch->n = n;
	ch->pieces = n ? malloc(n * sizeof *pc) : NULL;
	if (n && !ch->pieces)
		return -1;
	if (n)
		memcpy(ch->pieces, pc, n * sizeof *pc);
	return 0;
}

/* Walk every analysed step, sum the pieces per lane and label. */
static int walk_steps(ana_profile *p, ana_critpath *cp, build *b, const uint64_t *steps, size_t nsteps,
		      uint64_t k_slow, uint64_t k_median)
{
	ana_map idx = {0};
	struct {
		uint64_t key;
		uint32_t e;
	} cache[256]; /* (lane, label) -> entry, in front of the map: most pieces repeat */
	memset(cache, 0xff, sizeof cache);
	ana_cp_piece *pc = NULL;
	size_t npc = 0, cap = 0;
	uint32_t ecap = 0;
	int rc = 0;
	for (size_t s = 0; s < nsteps && !rc; s++) {
		uint64_t k = steps[s];
		uint64_t t0 = p->step_start_ns.v[k], ns = p->step_ns.v[k];
		if (ana_cp_walk(b->lanes, b->n, 0, cp->waiting, t0, t0 + ns, &pc, &npc, &cap) < 0) {
			rc = -1;
			break;
		}
		cp->step_ns += ns;
		for (size_t i = 0; i < npc; i++) {
			const ana_cp_piece *x = &pc[i];
			uint64_t d = x->end_ns - x->start_ns;
			if (x->label == ANA_NONE) {
				cp->untracked_ns += d;
				continue;
			}
			uint64_t key = (uint64_t)x->lane << 32 | x->label;
			unsigned slot = (x->label * 31u + x->lane) & 255;
			uint32_t e = cache[slot].key == key ? cache[slot].e : ana_map_get(&idx, key);
			if (e == ANA_NONE) {
				if (cp->ne == ecap) {
					uint32_t c = ecap ? ecap * 2 : 32;
					ana_cp_entry *a = realloc(cp->e, c * sizeof *a);
					if (!a) {
						rc = -1;
						break;
					}
					cp->e = a;
					ecap = c;
				}
				e = cp->ne++;
				cp->e[e] = (ana_cp_entry){.lane = x->lane, .label = x->label, .waiting = cp->waiting[x->label],
							  .last_step = UINT64_MAX};
				if (ana_map_put(&idx, key, e) < 0) {
					rc = -1;
					break;
				}
			}
			cache[slot].key = key;
			cache[slot].e = e;
			cp->e[e].ns += d;
			if (cp->e[e].last_step != k) {
				cp->e[e].last_step = k;
				cp->e[e].steps++;
			}
		}
		if (!rc && k == k_slow && keep_chain(&cp->slowest, k, ns, pc, npc) < 0)
			rc = -1;
		if (!rc && k == k_median && keep_chain(&cp->median, k, ns, pc, npc) < 0)
			rc = -1;
	}
	free(pc);
	ana_map_clear(&idx);
	return rc;
}

/* Lanes with tracked activity inside [from, to). */
static uint32_t active_lanes(const build *b, uint64_t from, uint64_t to)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < b->n; i++) {
		const ana_cp_lane *l = &b->lanes[i];
		ptrdiff_t j = seg_before(l, from + 1);
		for (size_t k = j < 0 ? 0 : (size_t)j; k < l->n && l->t[k] < to; k++)
			if (l->lab[k] != ANA_NONE) {
				n++;
				break;
			}
	}
	return n;
}

static void merge_roles(const ana_profile *p, ana_critpath *cp);

int ana_critpath_build(ana_profile *p)
{
	ana_critpath *cp = p->cp;
	if (!cp)
		return 0;
	collect *c = cp->priv;
	cp->priv = NULL;
	if (!p->steps || !p->nprocs || p->procs[0].step_thread == ANA_NONE) {
		collect_free(c);
		ana_critpath_free(p);
		return 0;
	}
	cp->steps_total = p->steps;
	cp->slowest.index = cp->median.index = UINT64_MAX;
	build b = {0};
	uint64_t *steps = NULL, *order = NULL;
	int rc = 0;
	if (!c) { /* stopped for want of a step mark early on: nothing kept */
		cp->over_budget = p->steps;
		return 0;
	}
	uint64_t horizon = UINT64_MAX;
	cp->nnodes = p->nnodes;
	if (thread_lanes(p, cp, c, &b, &horizon) < 0 || gpu_lanes(p, cp, c, &b, &horizon) < 0)
		goto oom;
	collect_free(c);
	c = NULL;
	uint32_t nlabels = cp->nnodes + cp->ngpu_names;
	cp->waiting = calloc(nlabels ? nlabels : 1, 1);
	steps = malloc(p->steps * sizeof *steps);
	order = malloc(p->steps * sizeof *order);
	if (!cp->waiting || !steps || !order)
		goto oom;
	for (uint32_t n = 0; n < p->nnodes; n++)
		cp->waiting[n] = (uint8_t)ana_name_is_comm(p->names[p->nodes[n].name]);
	/* The steps analysed: recorded, and before anything was lost. */
	size_t ns = 0;
	for (uint64_t k = 0; k < p->steps && k < p->step_ns.n && k < p->step_start_ns.n; k++) {
		if (k < p->step_flags.n && !(p->step_flags.v[k] & 1))
			cp->unrecorded++;
		else if (p->step_start_ns.v[k] + p->step_ns.v[k] > horizon)
			cp->over_budget++;
		else
			steps[ns++] = k;
	}
	cp->steps = ns;
	if (ns) {
		memcpy(order, steps, ns * sizeof *order);
		qsort_r(order, ns, sizeof *order, cmp_step, p->step_ns.v);
		uint64_t k_slow = order[ns - 1], k_median = order[(ns + 1) / 2 - 1];
		if (walk_steps(p, cp, &b, steps, ns, k_slow, k_median) < 0)
			goto oom;
		uint64_t first = p->step_start_ns.v[steps[0]], last = steps[ns - 1];
		cp->active_lanes = active_lanes(&b, first, p->step_start_ns.v[last] + p->step_ns.v[last]);
	}
	merge_roles(p, cp);
	for (uint32_t i = 0; i < cp->ne; i++)
		cp->e[i].share_pct = cp->step_ns ? 100.0 * (double)cp->e[i].ns / (double)cp->step_ns : 0;
	cp->untracked_pct = cp->step_ns ? 100.0 * (double)cp->untracked_ns / (double)cp->step_ns : 0;
	if (cp->ne) /* steps without regions: no entries, cp->e may be NULL */
		qsort(cp->e, cp->ne, sizeof *cp->e, cmp_entry);
	goto out;
oom:
	rc = FENNEC_ENOMEM;
out:
	collect_free(c);
	build_free(&b);
	free(steps);
	free(order);
	return rc;
}

/* A lane's role: its thread's name (a named thread that is not the stepping one), else
 * NULL (the lane alone). */
static const char *lane_role(const ana_profile *p, const ana_critpath *cp, uint32_t lane)
{
	if (!lane || lane >= cp->nlanes || cp->where[lane].thread == ANA_NONE)
		return NULL;
	const char *n = p->threads[cp->where[lane].thread].name;
	return n && *n ? n : NULL;
}

/*
 * One row per thread role: the entries of one label on threads of the same name (ten
 * short-lived "long_worker" threads, one per step) are summed into the first, whose
 * `threads` counts them. Their steps add up (one thread of a role on the path per step
 * is the common case), at most the steps analysed.
 */
static void merge_roles(const ana_profile *p, ana_critpath *cp)
{
	uint32_t n = 0;
	for (uint32_t i = 0; i < cp->ne; i++) {
		ana_cp_entry *e = &cp->e[i];
		const char *role = lane_role(p, cp, e->lane);
		uint32_t k = 0;
		for (; role && k < n; k++) {
			const char *r = lane_role(p, cp, cp->e[k].lane);
			if (cp->e[k].label == e->label && r && !strcmp(r, role))
				break;
		}
		if (role && k < n) {
			ana_cp_entry *m = &cp->e[k];
			m->ns += e->ns;
			m->steps = m->steps + e->steps < cp->steps ? m->steps + e->steps : cp->steps;
			m->threads++;
			m->waiting |= e->waiting;
			continue;
		}
		cp->e[n] = *e;
		cp->e[n++].threads = 1;
	}
	cp->ne = n;
}

void ana_critpath_free(ana_profile *p)
{
	ana_critpath *cp = p->cp;
	if (!cp)
		return;
	collect_free(cp->priv);
	free(cp->where);
	free(cp->gpu_names);
	free(cp->waiting);
	free(cp->e);
	free(cp->slowest.pieces);
	free(cp->median.pieces);
	free(cp);
	p->cp = NULL;
}

const char *ana_cp_label_name(const ana_profile *p, uint32_t label)
{
	const ana_critpath *cp = p->cp;
	if (!cp || label == ANA_NONE)
		return "";
	if (label < cp->nnodes)
		return p->nodes[label].path ? p->nodes[label].path : p->names[p->nodes[label].name];
	label -= cp->nnodes;
	return label < cp->ngpu_names ? p->names[cp->gpu_names[label]] : "";
}

const char *ana_cp_label_short(const ana_profile *p, uint32_t label)
{
	const ana_critpath *cp = p->cp;
	if (cp && label < cp->nnodes)
		return p->names[p->nodes[label].name];
	return ana_cp_label_name(p, label);
}

const char *ana_cp_lane_name(const ana_profile *p, uint32_t lane, char *buf, size_t n)
{
	const ana_critpath *cp = p->cp;
	if (!cp || lane >= cp->nlanes)
		snprintf(buf, n, "?");
	else if (cp->where[lane].thread == ANA_NONE)
		snprintf(buf, n, "GPU %u stream %u", cp->where[lane].device, cp->where[lane].stream);
	else {
		const ana_thread *t = &p->threads[cp->where[lane].thread];
		if (t->name && *t->name)
			snprintf(buf, n, "%s", t->name);
		else
			snprintf(buf, n, "tid %llu", (unsigned long long)t->tid);
	}
	return buf;
}

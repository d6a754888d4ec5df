/*
 * memory.c - the heap profile in the analysis model. HEAP records are replayed in file
 * order (which is the order the collector reserved them in, so a free always follows the
 * allocation it frees): allocations and frees are matched by address, aggregated per
 * allocation stack, and the live set at the peak is kept without copying it, by stamping
 * each stack with the last moment it changed. Stacks are symbolised with the samples' own
 * machinery (samples.c). Design notes: docs/memory.md.
 */
#include "analyze/aggregate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* A live block: address -> (site, size, weight). Open addressing, backward-shift deletion. */
typedef struct blk {
	uint64_t addr;          /* 0: empty */
	uint64_t size;
	double w;               /* allocations it stands for (1 in full mode) */
	uint32_t site;
} blk;

typedef struct bmap {
	blk *b;
	size_t cap, n;
} bmap;

static size_t bslot(const bmap *m, uint64_t addr)
{
	uint64_t k = addr >> 4;
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	return k & (m->cap - 1);
}

static blk *bmap_find(bmap *m, uint64_t addr)
{
	if (!m->n)
		return NULL;
	for (size_t i = bslot(m, addr); m->b[i].addr; i = (i + 1) & (m->cap - 1))
		if (m->b[i].addr == addr)
			return &m->b[i];
	return NULL;
}

static int bmap_put(bmap *m, const blk *e)
{
	if ((m->n + 1) * 4 > m->cap * 3) {
		size_t cap = m->cap ? m->cap * 2 : 1024;
		bmap nm = {calloc(cap, sizeof(blk)), cap, m->n};
		if (!nm.b)
			return -1;
		for (size_t i = 0; i < m->cap; i++) {
			if (!m->b[i].addr)
				continue;
			size_t j = bslot(&nm, m->b[i].addr);
			while (nm.b[j].addr)
				j = (j + 1) & (cap - 1);
			nm.b[j] = m->b[i];
		}
		free(m->b);
		*m = nm;
	}
	size_t i = bslot(m, e->addr);
	while (m->b[i].addr)
		i = (i + 1) & (m->cap - 1);
	m->b[i] = *e;
	m->n++;
	return 0;
}

static void bmap_del(bmap *m, blk *e)
{
	size_t i = (size_t)(e - m->b), j = i;
	for (;;) {
		j = (j + 1) & (m->cap - 1);
		if (!m->b[j].addr)
			break;
		size_t k = bslot(m, m->b[j].addr);
		/* move j back to i when its home is not in (i, j] */
		if ((j > i && (k <= i || k > j)) || (j < i && (k <= i && k > j))) {
			m->b[i] = m->b[j];
			i = j;
		}
	}
	m->b[i].addr = 0;
	m->n--;
}

/* Replay state of the file being read. */
typedef struct rstate {
	uint32_t proc;
	int sampled;
	double rate;
	uint32_t *site_of;       /* HEAP stack id -> site index + 1 */
	size_t site_of_cap;
	bmap live;
	double live_bytes, peak_bytes;
	uint64_t ordinal, P;     /* events so far; the one at which the latest peak was reached */
	uint64_t peak_ticks, peak_step;
	uint32_t peak_site;
	uint64_t marked_for;     /* sampled: the counters' peak time P was set for */
	uint64_t sampled_allocs; /* sampled: allocation records read */
	uint64_t standing;       /* ... of them, blocks that stand for others (weight 1.1 or more) */
	size_t levels_from;      /* m->levels of this process start here */
	uint32_t *changed;       /* sites changed since the process's latest timeline point */
	size_t nchanged, changed_cap;
	struct { uint64_t tid, addr; } last[64]; /* a thread's last allocation (temporaries) */
} rstate;

static void rstate_free(rstate *r)
{
	if (!r)
		return;
	free(r->site_of);
	free(r->changed);
	free(r->live.b);
	free(r);
}

static rstate *state(ana_profile *p, uint32_t proc, const fmt_file *f)
{
	rstate *r = p->mem.priv;
	if (r && r->proc == proc)
		return r;
	rstate_free(r);
	r = p->mem.priv = calloc(1, sizeof *r);
	if (!r)
		return NULL;
	r->proc = proc;
	r->sampled = f->mem_mode == FMT_MEM_SAMPLED;
	r->rate = f->mem_rate ? (double)f->mem_rate : 524288.0;
	r->peak_site = ANA_NONE;
	r->levels_from = p->mem.nlevels;
	return r;
}

/* The site of HEAP stack `id`, made on first use. */
static ana_mem_site *site_for(ana_profile *p, rstate *r, const fmt_file *f, uint32_t id, uint32_t *index)
{
	ana_memory *m = &p->mem;
	if (ana_grow(&r->site_of, &r->site_of_cap, id, sizeof *r->site_of) < 0)
		return NULL;
	if (r->site_of[id]) {
		*index = r->site_of[id] - 1;
		return &m->sites[*index];
	}
	const fmt_heap_stack *st = fmt_heap_stack_get(f, id);
	uint32_t raw;
	if (!st || ana_samples_intern_stack(p, r->proc, f, st->frames, st->nframes, st->pyframes, st->npy, st->truncated, &raw))
		return NULL;
	size_t cap = m->sites_cap;
	if (ana_grow(&m->sites, &cap, m->nsites, sizeof *m->sites) < 0)
		return NULL;
	m->sites_cap = (uint32_t)cap;
	*index = m->nsites;
	ana_mem_site *s = &m->sites[m->nsites++];
	memset(s, 0, sizeof *s);
	s->process = r->proc;
	s->raw = raw;
	s->stack = ANA_NONE;
	s->node = id; /* the HEAP stack id until the file ends (regions are resolved then) */
	r->site_of[id] = *index + 1;
	return s;
}

/* Before a site's live numbers change: if the latest peak came after its last change,
 * its current numbers are its numbers at that peak; and it is noted as changed, for its
 * level at the next timeline point (a failed note only leaves that level out). */
static void touch(ana_profile *p, rstate *r, ana_mem_site *s)
{
	if (r->P >= s->mod) {
		s->at_peak_count = s->live_count;
		s->at_peak_bytes = s->live_bytes;
		s->at_peak_p = r->P;
	}
	s->mod = r->ordinal;
	if (!s->changed && ana_grow(&r->changed, &r->changed_cap, r->nchanged, sizeof *r->changed) == 0) {
		r->changed[r->nchanged++] = (uint32_t)(s - p->mem.sites);
		s->changed = 1;
	}
}

/* A timeline point of r's process was read: the levels of the sites changed since the one
 * before. */
static int note_levels(ana_profile *p, rstate *r, uint32_t point)
{
	ana_memory *m = &p->mem;
	if (ana_grow(&m->levels, &m->levels_cap, m->nlevels + r->nchanged, sizeof *m->levels) < 0)
		return FENNEC_ENOMEM;
	for (size_t i = 0; i < r->nchanged; i++) {
		ana_mem_site *s = &m->sites[r->changed[i]];
		m->levels[m->nlevels++] = (ana_mem_level){point, r->changed[i], s->live_bytes};
		s->changed = 0;
	}
	r->nchanged = 0;
	return 0;
}

static void remember_alloc(rstate *r, uint64_t tid, uint64_t addr)
{
	size_t i = (size_t)(tid * 0x9e3779b97f4a7c15ull >> 58);
	r->last[i].tid = tid;
	r->last[i].addr = addr;
}

static int was_last_alloc(rstate *r, uint64_t tid, uint64_t addr)
{
	size_t i = (size_t)(tid * 0x9e3779b97f4a7c15ull >> 58);
	return r->last[i].tid == tid && r->last[i].addr == addr;
}

static void on_free(ana_profile *p, rstate *r, blk *b)
{
	ana_mem_site *s = &p->mem.sites[b->site];
	r->ordinal++;
	touch(p, r, s);
	s->live_count -= b->w;
	s->live_bytes -= (double)b->size * b->w;
	s->live_count_var -= b->w * (b->w - 1);
	s->live_bytes_var -= (double)b->size * (double)b->size * b->w * (b->w - 1);
	r->live_bytes -= (double)b->size * b->w;
	bmap_del(&r->live, b);
}

/* A sampled block of `size` bytes and weight w (p = 1 / w) adds (1 - p) / p^2 = w (w - 1)
 * to the variance of its site's count estimates, size^2 times that to its bytes'. */
static void add_var(ana_mem_site *s, double size, double w)
{
	double v = w * (w - 1);
	s->allocs_var += v;
	s->live_count_var += v;
	s->bytes_var += size * size * v;
	s->live_bytes_var += size * size * v;
}

/* The weight of a block of `size` bytes: how many allocations it stands for. */
static double weight(const rstate *r, uint64_t size)
{
	return r->sampled ? 1 / -expm1(-(size ? (double)size : 1) / r->rate) : 1;
}

/* An ALLOC or FREE of a HEAP2 chunk: a free names its block's stack and size, and whether
 * it was a temporary, rather than its address (docs/format.md, "Heap (1.3)"). */
static int by_stack(ana_profile *p, rstate *r, const fmt_file *f, const fmt_event *ev)
{
	uint32_t si;
	ana_mem_site *s = site_for(p, r, f, ev->id, &si);
	if (!s)
		return FENNEC_ENOMEM;
	double w = weight(r, ev->size), bytes = (double)ev->size * w;
	r->ordinal++;
	touch(p, r, s);
	if (ev->type == FMT_EV_FREE) {
		if (ev->flags & FMT_HEV_TEMP && !r->sampled) {
			s->temporary++;
			s->temporary_bytes += ev->size;
		}
		s->live_count -= w;
		s->live_bytes -= bytes;
		s->live_count_var -= w * (w - 1);
		s->live_bytes_var -= bytes * bytes * (w - 1) / w;
		r->live_bytes -= bytes;
		return 0;
	}
	s->allocs += w;
	s->bytes += bytes;
	add_var(s, (double)ev->size, w);
	r->sampled_allocs += r->sampled;
	r->standing += r->sampled && w >= 1.1;
	s->live_count += w;
	s->live_bytes += bytes;
	r->live_bytes += bytes;
	if (!r->sampled && r->live_bytes > r->peak_bytes) {
		r->peak_bytes = r->live_bytes;
		r->P = r->ordinal;
		r->peak_ticks = ev->ticks;
		r->peak_step = ev->u;
		r->peak_site = si;
	}
	return 0;
}

int ana_memory_event(ana_profile *p, uint32_t proc, const fmt_file *f, const fmt_event *ev)
{
	ana_memory *m = &p->mem;
	if (ev->type == FMT_EV_HEAP_SNAP) {
		if (ana_grow(&m->points, &m->points_cap, m->npoints, sizeof *m->points) < 0)
			return FENNEC_ENOMEM;
		double t = fmt_ticks_to_ns(f, ev->ticks);
		uint32_t seq = (uint32_t)m->npoints;
		m->points[m->npoints++] = (ana_mem_point){t > 0 ? (uint64_t)llround(t) : 0, ev->u, ev->heap[0], ev->heap[1],
							   ev->heap[2], ev->heap[3], ev->heap[4], proc, seq, (uint8_t)ev->flags};
		rstate *r = m->priv;
		return r && r->proc == proc ? note_levels(p, r, seq) : 0;
	}
	rstate *r = state(p, proc, f);
	if (!r)
		return FENNEC_ENOMEM;
	/* Sampled: the live set at the counters' peak is the one before the first event after
	 * it. The counters are those of the chunk being read; a later chunk's may name a later
	 * peak, which moves P forward (touch() keeps what each site had at the earlier one). */
	if (r->sampled && f->heap.peak_ticks && r->marked_for != f->heap.peak_ticks && ev->ticks > f->heap.peak_ticks) {
		r->P = r->ordinal;
		r->marked_for = f->heap.peak_ticks;
	}
	if (ev->flags & FMT_HEV_NOADDR)
		return by_stack(p, r, f, ev);
	blk *b = bmap_find(&r->live, ev->addr);
	if (ev->type == FMT_EV_FREE) {
		if (!b)
			return 0; /* allocated before the session, or not sampled */
		if (!r->sampled && was_last_alloc(r, ev->tid, ev->addr)) {
			m->sites[b->site].temporary++;
			m->sites[b->site].temporary_bytes += b->size;
		}
		on_free(p, r, b);
		return 0;
	}
	if (b)
		on_free(p, r, b); /* a free we never saw (dropped): the address was reused */
	uint32_t si;
	ana_mem_site *s = site_for(p, r, f, ev->id, &si);
	if (!s)
		return FENNEC_ENOMEM;
	double w = weight(r, ev->size);
	r->ordinal++;
	touch(p, r, s);
	s->allocs += w;
	s->bytes += (double)ev->size * w;
	add_var(s, (double)ev->size, w);
	r->sampled_allocs += r->sampled;
	r->standing += r->sampled && w >= 1.1;
	s->live_count += w;
	s->live_bytes += (double)ev->size * w;
	r->live_bytes += (double)ev->size * w;
	blk e = {ev->addr, ev->size, w, si};
	if (bmap_put(&r->live, &e) < 0)
		return FENNEC_ENOMEM;
	remember_alloc(r, ev->tid, ev->addr);
	if (!r->sampled && r->live_bytes > r->peak_bytes) {
		r->peak_bytes = r->live_bytes;
		r->P = r->ordinal;
		r->peak_ticks = ev->ticks;
		r->peak_step = ev->u;
		r->peak_site = si;
	}
	return 0;
}

/*
 * Sampled mode: scale a process's per-stack estimates to its exact totals. Each sampled
 * block stands for 1 / (1 - e^(-size/rate)) allocations: unbiased, but a program that
 * allocated 300 KiB at a rate of 512 KiB had its one sample stand for 512 KiB, 168 % of
 * what it allocated, beside the exact total. The counters give the process's allocations
 * and requested bytes exactly: the stacks' estimates are scaled to them (a ratio
 * estimator), allocations by one factor and bytes by another. Their live and peak numbers
 * and levels over time are scaled down with them, never up, so that a stack's live bytes
 * stay within what it allocated: a factor over 1 may be records lost (a full buffer),
 * whose blocks are not among the live ones, and the blocks of a lost free are the live
 * ones exactly.
 */
static void calibrate(ana_profile *p, uint32_t proc, const fmt_heap_counters *h, size_t levels_from)
{
	ana_memory *m = &p->mem;
	double eb = 0, ec = 0;
	for (uint32_t i = 0; i < m->nsites; i++)
		if (m->sites[i].process == proc) {
			eb += m->sites[i].bytes;
			ec += m->sites[i].allocs;
		}
	if (eb <= 0 || ec <= 0 || !h->allocs || !h->alloc_bytes)
		return;
	double fb = (double)h->alloc_bytes / eb, fc = (double)h->allocs / ec;
	double lb = fb < 1 ? fb : 1, lc = fc < 1 ? fc : 1;
	for (uint32_t i = 0; i < m->nsites; i++) {
		ana_mem_site *s = &m->sites[i];
		if (s->process != proc)
			continue;
		s->allocs *= fc;
		s->bytes *= fb;
		s->live_count *= lc;
		s->peak_count *= lc;
		s->live_bytes *= lb;
		s->peak_bytes *= lb;
		s->allocs_var *= fc * fc;
		s->bytes_var *= fb * fb;
		s->live_count_var *= lc * lc;
		s->live_bytes_var *= lb * lb;
	}
	/* The blocks live at the end: the counters give their number exactly (allocations
	 * less frees, the runtime's blocks included as in the stacks' sum). A sampled block
	 * left live stands for others that may all have been freed: 17 blocks estimated beside
	 * 10 live. The difference is the sampling's, so it goes to the stacks in proportion to
	 * the variance of their live counts (a regression estimator): a block sampled for sure
	 * (a large one, weight 1) has none and keeps its number; a stack's bytes follow its
	 * count at its mean block size. Only when no record was lost (else the counters are no
	 * measure of the sampled blocks) and never below zero. */
	double elc = 0, var = 0, xlc = h->allocs > h->frees ? (double)(h->allocs - h->frees) : 0;
	for (uint32_t i = 0; i < m->nsites; i++)
		if (m->sites[i].process == proc && m->sites[i].live_count > 0) {
			elc += m->sites[i].live_count;
			var += m->sites[i].live_count_var;
		}
	if (h->dropped || elc <= 0 || var < 1e-9 || h->allocs < h->frees)
		goto done;
	double resid = xlc - elc;
	for (uint32_t i = 0; i < m->nsites; i++) {
		ana_mem_site *s = &m->sites[i];
		if (s->process != proc || s->live_count <= 0 || s->live_count_var <= 0)
			continue;
		double c = s->live_count + resid * s->live_count_var / var;
		c = c > 0 ? c : 0;
		double g = c / s->live_count;
		s->live_bytes *= g;
		s->live_count = c;
		s->live_bytes_var *= g * g;
		s->live_count_var *= g * g;
	}
done:
	for (size_t i = levels_from; lb < 1 && i < m->nlevels; i++)
		if (m->sites[m->levels[i].site].process == proc)
			m->levels[i].bytes *= lb;
}

int ana_memory_end_process(ana_profile *p, uint32_t proc, const fmt_file *f)
{
	ana_memory *m = &p->mem;
	rstate *r = p->mem.priv;
	if (!f->has_heap) {
		rstate_free(r);
		p->mem.priv = NULL;
		return 0;
	}
	if (!m->present) {
		m->present = 1;
		m->mode = (unsigned)f->mem_mode;
		m->rate = f->mem_rate;
		m->mmap_min = f->mem_mmap_min;
		m->peak_node = m->peak_region = ANA_NONE;
	}
	const fmt_heap_counters *h = &f->heap;
	m->allocs += h->allocs;
	m->frees += h->frees;
	m->alloc_bytes += h->alloc_bytes;
	if (h->largest_bytes > m->largest_bytes)
		m->largest_bytes = h->largest_bytes;
	m->records += h->records;
	m->dropped += h->dropped;
	m->dropped_allocs += f->heap_dropped_allocs;
	m->dropped_frees += f->heap_dropped_frees;
	if (h->dropped && !f->has_heap_drops)
		m->drops_unknown = 1;
	m->untracked += h->untracked;
	if (r && r->proc != proc)
		r = NULL;
	if (r && r->sampled && r->marked_for != h->peak_ticks)
		r->P = r->ordinal; /* no event came after the final peak */
	/* Each site of this file: its numbers at the peak, its region node. */
	for (uint32_t i = 0; i < m->nsites; i++) {
		ana_mem_site *s = &m->sites[i];
		if (s->process != proc || !r)
			continue;
		if (r->P >= s->mod) {
			s->peak_count = s->live_count;
			s->peak_bytes = s->live_bytes;
		} else {
			s->peak_count = s->at_peak_count;
			s->peak_bytes = s->at_peak_bytes;
		}
		const fmt_heap_stack *st = fmt_heap_stack_get(f, s->node);
		s->node = st && st->nregions ? ana_path_node(p, f, st->regions, st->nregions) : ANA_NONE;
	}
	/* The process's peak: exact requested bytes in full mode, the counter otherwise. */
	uint64_t peak = r && !r->sampled ? (uint64_t)llround(r->peak_bytes) : h->peak_bytes;
	if (!m->peak_bytes || peak > m->peak_bytes) {
		m->peak_bytes = peak;
		m->peak_usable_bytes = h->peak_bytes;
		m->peak_process = proc;
		m->peak_node = m->peak_region = ANA_NONE;
		if (r && !r->sampled && r->peak_site != ANA_NONE) {
			double t = fmt_ticks_to_ns(f, r->peak_ticks);
			m->peak_t_ns = t > 0 ? (uint64_t)llround(t) : 0;
			m->peak_step = r->peak_step;
			m->peak_node = m->sites[r->peak_site].node;
			if (m->peak_node != ANA_NONE)
				m->peak_region = p->nodes[m->peak_node].name;
		} else {
			double t = fmt_ticks_to_ns(f, h->peak_ticks);
			m->peak_t_ns = t > 0 ? (uint64_t)llround(t) : 0;
			m->peak_step = h->peak_step;
			uint64_t site = h->peak_site;
			if (site && site < f->nsites && f->sites[site].defined && f->sites[site].name) {
				m->peak_region = ana_intern(p, f->sites[site].name);
				/* the node: the top-level or nested region of that name with the most time */
				for (uint32_t n = 0; n < p->nnodes; n++)
					if (p->nodes[n].name == m->peak_region &&
					    (m->peak_node == ANA_NONE || p->nodes[n].total_ns > p->nodes[m->peak_node].total_ns))
						m->peak_node = n;
			}
		}
	}
	/* The reachability scan (at the end): each stack's reachable blocks. Its numbers are
	 * the collector's live map; the replay's are the file's, which agree unless records
	 * were lost: the reachable part is capped at what the replay has live. In sampled mode
	 * they count sampled blocks, each standing for others: the share of a stack's sampled
	 * blocks (and bytes) that was reachable applies to its estimate, below. */
	if (r && f->has_reach) {
		if (f->reach_status == FMT_REACH_DONE) {
			for (uint32_t i = 0; i < m->nsites; i++)
				if (m->sites[i].process == proc)
					m->sites[i].scanned = 1;
			for (uint32_t i = 0; i < f->nreach; i++) {
				const fmt_reach *e = &f->reach[i];
				if (e->stack >= r->site_of_cap || !r->site_of[e->stack])
					continue;
				ana_mem_site *s = &m->sites[r->site_of[e->stack] - 1];
				s->reach_count = (double)e->reach_count;
				s->reach_bytes = (double)e->reach_bytes;
				if (r->sampled) {
					uint64_t c = e->reach_count + e->lost_count, b = e->reach_bytes + e->lost_bytes;
					s->reach_count = c ? (double)e->reach_count / (double)c : 0;
					s->reach_bytes = b ? (double)e->reach_bytes / (double)b : 0;
				}
			}
			m->reach_procs++;
			if (f->reach_ns > m->reach_ns)
				m->reach_ns = f->reach_ns;
			m->reach_root_bytes += f->reach_root_bytes;
			m->reach_heap_bytes += f->reach_heap_bytes;
		} else if (f->reach_status != FMT_REACH_OFF) {
			if (!m->reach_unscanned++)
				m->reach_why = f->reach_status;
		}
	}
	/* The counters are the whole session's: a window's estimates are not scaled to them. */
	if (r && r->sampled && !p->window.active) {
		calibrate(p, proc, h, r->levels_from);
		for (uint32_t i = 0; i < m->nsites; i++)
			if (m->sites[i].process == proc && m->sites[i].scanned) {
				m->sites[i].reach_count *= m->sites[i].live_count;
				m->sites[i].reach_bytes *= m->sites[i].live_bytes;
			}
		m->sampled_allocs += r->sampled_allocs;
		m->standing_samples += r->standing;
	}
	m->end_live_bytes += h->live_bytes;
	m->end_live_count += h->allocs > h->frees ? h->allocs - h->frees : 0;
	rstate_free(r);
	p->mem.priv = NULL;
	return 0;
}

/* ---- after symbolisation ---- */

static const char *func_name(const ana_profile *p, uint32_t loc)
{
	const ana_loc *l = &p->smp.locs[loc];
	return p->names[p->smp.funcs[l->func].name];
}

/*
 * Whether fn is an allocator (malloc's family) or a layer over one that allocates for
 * its caller: the frame a heap row names is the first one outside them, which the
 * program's author can act on. Besides C's and C++'s: CPython's (PyMem_*, PyObject_*,
 * pymalloc, the object allocation under a type's constructor), NumPy's array
 * data, PyTorch's CPU tensors, GLib's and Rust's. A Python program's rows read
 * "PyByteArray_Resize <- bytearray___init___impl", not "_PyObject_Malloc <-
 * _PyObject_Malloc"; a NumPy one's names the function that made the array.
 */
static int is_allocator(const char *fn)
{
	/* prefixes: operator new[], C++ argument lists, Rust paths */
	static const char *const names[] = {"operator new", "strdup", "__strdup", "strndup", "__strndup",
					    "xmalloc", "xcalloc", "xrealloc", "reallocarray", "__libc_reallocarray",
					    "c10::alloc_cpu", "c10::DefaultCPUAllocator::", "__rust_alloc",
					    "__rust_realloc", "__rdl_alloc", "__rdl_realloc", "alloc::alloc::",
					    "alloc::raw_vec::", "<alloc::alloc::Global as core::alloc::Allocator>"};
	/* whole names, or with a compiler's clone suffix (".constprop.0", ".lto_priv.0") */
	static const char *const exact[] = {
		"malloc", "calloc", "realloc", "memalign", "aligned_alloc", "posix_memalign", "valloc", "pvalloc",
		/* CPython */
		"PyMem_Malloc", "PyMem_Calloc", "PyMem_Realloc", "PyMem_RawMalloc", "PyMem_RawCalloc",
		"PyMem_RawRealloc", "_PyMem_RawMalloc", "_PyMem_RawCalloc", "_PyMem_RawRealloc",
		"_PyMem_DebugRawAlloc", "_PyMem_DebugRawMalloc", "_PyMem_DebugRawCalloc", "_PyMem_DebugRawRealloc",
		"_PyMem_DebugMalloc", "_PyMem_DebugCalloc", "_PyMem_DebugRealloc", "PyObject_Malloc",
		"PyObject_Calloc", "PyObject_Realloc", "_PyObject_Malloc", "_PyObject_Calloc", "_PyObject_Realloc",
		"pymalloc_alloc", "pymalloc_realloc", "gc_alloc", "_PyObject_GC_New", "_PyObject_GC_NewVar", "_PyObject_GC_Malloc",
		"_PyObject_GC_Calloc", "_PyObject_GC_Alloc", "_PyObject_New", "_PyObject_NewVar",
		"PyType_GenericAlloc", "_PyType_AllocNoTrack",
		/* NumPy */
		"default_malloc", "default_calloc", "default_realloc", "PyDataMem_UserNEW",
		"PyDataMem_UserNEW_ZEROED", "PyDataMem_UserRENEW", "PyDataMem_NEW", "PyDataMem_NEW_ZEROED",
		"PyDataMem_RENEW", "npy_alloc_cache", "npy_alloc_cache_zero", "_npy_alloc_cache",
		"npy_alloc_cache_dim",
		/* GLib */
		"g_malloc", "g_malloc0", "g_realloc", "g_malloc_n", "g_malloc0_n", "g_realloc_n", "g_try_malloc",
		"g_try_malloc0", "g_try_realloc", "g_try_malloc_n", "g_try_malloc0_n", "g_try_realloc_n",
		"g_slice_alloc", "g_slice_alloc0", "g_strdup", "g_strndup", "g_memdup", "g_memdup2",
		/* gnulib, libiberty (xmalloc, xcalloc, xrealloc: the prefixes above) */
		"xzalloc", "xnmalloc", "xnrealloc", "x2realloc", "x2nrealloc", "xcharalloc", "xmemdup", "xmemdup0",
		"ximemdup", "ximemdup0", "xstrdup", "xstrndup", "ximalloc", "xizalloc", "xicalloc", "xirealloc",
		"xinmalloc", "xireallocarray",
		/* jq */
		"jv_mem_alloc", "jv_mem_alloc_unguarded", "jv_mem_calloc", "jv_mem_calloc_unguarded", "jv_mem_realloc",
		"jv_mem_strdup", "jv_mem_strdup_unguarded",
		/* OpenSSL */
		"CRYPTO_malloc", "CRYPTO_zalloc", "CRYPTO_realloc", "CRYPTO_clear_realloc", "CRYPTO_strdup",
		"CRYPTO_strndup", "CRYPTO_memdup",
		/* SQLite */
		"sqlite3_malloc", "sqlite3_malloc64", "sqlite3_realloc", "sqlite3_realloc64", "sqlite3Malloc",
		"sqlite3MallocZero", "sqlite3Realloc", "sqlite3MemMalloc", "sqlite3MemRealloc", "mallocWithAlarm",
		"sqlite3DbMallocRaw", "sqlite3DbMallocRawNN", "sqlite3DbMallocZero", "sqlite3DbRealloc",
		"sqlite3DbReallocOrFree", "sqlite3DbStrDup", "sqlite3DbStrNDup", "dbMallocRawFinish", "dbReallocFinish",
		/* FFmpeg */
		"av_malloc", "av_mallocz", "av_calloc", "av_realloc", "av_realloc_f", "av_reallocp", "av_realloc_array",
		"av_reallocp_array", "av_malloc_array", "av_mallocz_array", "av_strdup", "av_strndup", "av_memdup",
		"av_fast_malloc", "av_fast_mallocz", "av_fast_realloc", "ff_fast_malloc",
		/* Lua (l_alloc: lauxlib's allocator), Tcl, zlib */
		"luaM_malloc_", "luaM_realloc_", "luaM_saferealloc_", "luaM_growaux_", "luaM_shrinkvector_", "l_alloc",
		"Tcl_Alloc", "Tcl_Realloc", "Tcl_AttemptAlloc", "Tcl_AttemptRealloc", "TclpAlloc", "TclpRealloc",
		"zcalloc"};
	for (size_t i = 0; i < ARRAY_LEN(names); i++)
		if (!strncmp(fn, names[i], strlen(names[i])))
			return 1;
	for (size_t i = 0; i < ARRAY_LEN(exact); i++) {
		size_t n = strlen(exact[i]);
		if (!strncmp(fn, exact[i], n) && (fn[n] == 0 || fn[n] == '.'))
			return 1;
	}
	return 0;
}

/* Allocations the C runtime or fennec make for themselves and free at exit, or never:
 * stdio buffers, the loader's and the locale's tables (setlocale's names, the wide-character
 * converters), atexit lists, thread-local storage;
 * and CPython's allocator's own tables (pymalloc's arena list and arena map), which a
 * Python process keeps to the end. */
static int is_runtime(const ana_profile *p, const ana_stack *st)
{
	static const char *const prefixes[] = {"_IO_file_doallocate", "_dl_", "_nl_", "__new_exitfn", "__tzfile_read",
					       "tzset", "__gconv", "__nss_", "__res_", "__libc_early_init",
					       "__cxa_thread_atexit", "_IO_vasprintf", "__libc_dlopen", "setlocale",
					       "new_composite_name", "__wcsmbs_", "new_arena", "arena_map_"};
	/* fennec's own code allocating (its pthread_create wrapper): the innermost frame
	 * outside the allocator is in libfennec. Threads started through that wrapper have it
	 * further out, which does not make their allocations fennec's. */
	for (uint32_t k = st->n; k-- > 0;) {
		const ana_loc *l = &p->smp.locs[st->locs[k]];
		if (is_allocator(p->names[p->smp.funcs[l->func].name]))
			continue;
		if (ana_module_is_fennec(p->names[p->smp.funcs[l->func].module]))
			return 1;
		break;
	}
	/* Only the innermost few frames: a runtime routine called from the program's own
	 * code (fopen without fclose) is the program's allocation. */
	for (uint32_t k = 0; k < st->n && k < 4; k++) {
		const char *fn = func_name(p, st->locs[st->n - 1 - k]);
		for (size_t i = 0; i < ARRAY_LEN(prefixes); i++)
			if (!strncmp(fn, prefixes[i], strlen(prefixes[i])))
				return 1;
	}
	return 0;
}

/* A function of the C++ standard library, by its qualified name (after a return type, if
 * the demangled name has one: "void std::__invoke_impl<...>(...)"), or any function of
 * libstdc++.so / libc++.so. Not by the frame's file: the function an inlined std::vector
 * constructor was inlined into has the header's line too. A C++ program's allocations go
 * through a few (std::__new_allocator<T>::allocate, std::vector<T>::_M_realloc_insert,
 * std::_Rb_tree<...>::_M_emplace_hint_unique): the frame a user can act on is below them. */
static int is_std_frame(const ana_profile *p, uint32_t loc)
{
	const char *fn = func_name(p, loc), *start = fn;
	int depth = 0;
	for (const char *c = fn; *c; c++) {
		if (*c == '<')
			depth++;
		else if (*c == '>' && depth > 0)
			depth--;
		else if (!depth && *c == '(')
			break;
		else if (!depth && *c == ' ')
			start = c + 1;
	}
	if (!strncmp(start, "std::", 5) || !strncmp(start, "__gnu_cxx::", 11) || !strncmp(start, "__cxxabiv1::", 12))
		return 1;
	const char *mod = p->names[p->smp.funcs[p->smp.locs[loc].func].module];
	const char *b = strrchr(mod, '/');
	b = b ? b + 1 : mod;
	return !strncmp(b, "libstdc++", 9) || !strncmp(b, "libc++.", 7) || !strncmp(b, "libc++abi", 9);
}

/* A frame with no symbol: "<module file>+0x<offset>" (docs/json.md). */
static int unnamed(const char *fn)
{
	return strstr(fn, "+0x") && !strchr(fn, ' ') && !strchr(fn, '(');
}

/*
 * A Python program's allocation is named by its innermost Python frame, when the stack has
 * one at frame k or outside it: the line that made the tensor or the array, not the library code
 * under it. PyTorch allocates every tensor through c10::alloc_cpu, under a hidden
 * DefaultCPUAllocator, at::detail::empty_generic and the operator's internals, and every
 * site of a training loop read "libc10.so.1.13+0x1b1d0"; now "Net.forward", with its file
 * and line in the stack. Else fn.
 */
static const char *python_caller(const ana_profile *p, const ana_stack *st, uint32_t k, const char *fn)
{
	for (uint32_t j = k; j < st->n; j++) {
		const ana_loc *l = &p->smp.locs[st->locs[st->n - 1 - j]];
		if (p->smp.funcs[l->func].lang == ANA_LANG_PYTHON)
			return p->names[p->smp.funcs[l->func].name];
	}
	return fn;
}

const char *ana_mem_site_name(const ana_profile *p, const ana_mem_site *s)
{
	if (s->stack == ANA_NONE || !p->smp.stacks[s->stack].n)
		return "[unknown]";
	const ana_stack *st = &p->smp.stacks[s->stack];
	const char *lib = NULL; /* the first frame past the allocator, when all the rest is std */
	for (uint32_t k = 0; k < st->n; k++) {
		uint32_t loc = st->locs[st->n - 1 - k];
		const char *fn = func_name(p, loc);
		if (is_allocator(fn) && k + 1 < st->n)
			continue;
		/* A frame without a symbol called from an allocation layer is inside it: in a
		 * stripped libsqlite3, sqlite3Malloc (exported, named) calls a static function
		 * that calls malloc, and every row read "libsqlite3.so.0+0xa74f0". */
		if (k + 1 < st->n && unnamed(fn) && is_allocator(func_name(p, st->locs[st->n - 2 - k])))
			continue;
		if (!is_std_frame(p, loc))
			return python_caller(p, st, k, fn);
		if (!lib)
			lib = fn;
	}
	return lib ? lib : "[unknown]";
}

static int cmp_point(const void *a, const void *b)
{
	const ana_mem_point *x = a, *y = b;
	return (x->t_ns > y->t_ns) - (x->t_ns < y->t_ns);
}

/* Least squares of y on x: slope, intercept, r^2. */
static void fit(const double *x, const double *y, size_t n, double *slope, double *icpt, double *r2)
{
	double mx = 0, my = 0;
	for (size_t i = 0; i < n; i++) {
		mx += x[i];
		my += y[i];
	}
	mx /= (double)n;
	my /= (double)n;
	double sxx = 0, sxy = 0, syy = 0;
	for (size_t i = 0; i < n; i++) {
		sxx += (x[i] - mx) * (x[i] - mx);
		sxy += (x[i] - mx) * (y[i] - my);
		syy += (y[i] - my) * (y[i] - my);
	}
	*slope = sxx > 0 ? sxy / sxx : 0;
	*icpt = my - *slope * mx;
	*r2 = sxx > 0 && syy > 0 ? sxy * sxy / (sxx * syy) : (syy == 0 ? 1 : 0);
}

/* Whether a timeline point enters a trend: on steps, the step points; on seconds, all but
 * the one taken at exit, after the program's own teardown (an interpreter or a C++
 * program frees what it held; the trend is of the run, what stays is "unfreed at exit"). */
static int trend_point(const ana_mem_point *pt, int per_step)
{
	return per_step ? pt->reason == FMT_SNAP_STEP : pt->reason != FMT_SNAP_FINAL;
}

/*
 * On seconds, the run's last timeline points may fall in its teardown too: a periodic
 * point taken while an interpreter frees its objects at exit (python3: 63 MiB, then 26
 * MiB 50 ms later, then the exit point). The points after the highest are left out when
 * they are the last 15 % of the fitted time or less and end a third or more below it: a
 * fall that short and deep is the exit, not the run. (A tenth until the lazy writer, which
 * takes a point at the program's next allocation after a pause rather than during it: a
 * teardown that frees, waits 100 ms and frees the rest got its point 135 ms after the
 * highest of 1.35 s.) A fall that only falls may take up to 30 % of the time (below).
 * Returns how many points to keep.
 */
static size_t before_teardown(const double *x, const double *y, size_t k)
{
	if (k < 4)
		return k;
	size_t top = 0;
	for (size_t i = 1; i < k; i++)
		if (y[i] >= y[top])
			top = i;
	if (top + 1 >= k || top < 2 || 3 * y[k - 1] > 2 * y[top])
		return k;
	double after = x[k - 1] - x[top], span = x[k - 1] - x[0];
	if (after <= 0.15 * span)
		return top + 1;
	/* A longer fall is the exit too when it only falls: a teardown frees and never
	 * allocates more than it frees, a run's later phase does. examples/torch_train.py
	 * --leak on a loaded machine: 263 MiB at 2.20 s of 2.65, then 68 MiB (train() returns
	 * and its list of graphs goes) for 150 ms, then down to 11 MiB as python3 exits: 17 %
	 * of the time, which kept the fall in and read r^2 0.30, no finding. */
	if (after > 0.3 * span)
		return k;
	for (size_t i = top + 1; i < k; i++)
		if (y[i] > y[i - 1] + 0.01 * y[top])
			return k;
	return top + 1;
}

static int trend(ana_profile *p)
{
	ana_memory *m = &p->mem;
	uint32_t proc = m->peak_process;
	size_t n = 0;
	for (size_t i = 0; i < m->npoints; i++)
		n += m->points[i].process == proc && trend_point(&m->points[i], 1);
	int per_step = n >= 3;
	if (!per_step) {
		n = 0;
		for (size_t i = 0; i < m->npoints; i++)
			n += m->points[i].process == proc && trend_point(&m->points[i], 0);
	}
	if (n < 3)
		return 0;
	double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y);
	if (!x || !y) {
		free(x);
		free(y);
		return FENNEC_ENOMEM;
	}
	size_t k = 0;
	uint64_t t0 = 0;
	for (size_t i = 0; i < m->npoints; i++) {
		const ana_mem_point *pt = &m->points[i];
		if (pt->process != proc || !trend_point(pt, per_step))
			continue;
		if (!k)
			t0 = pt->t_ns;
		x[k] = per_step ? (double)pt->step : (double)(pt->t_ns - t0) / 1e9;
		y[k++] = (double)pt->live_bytes;
	}
	if (!per_step)
		k = before_teardown(x, y, k);
	fit(x, y, k, &m->slope, &m->intercept, &m->r2);
	/* the later half of the points on its own: a heap that still grows at the end grows
	 * there as fast; a warm-up or a cache that fills has levelled off */
	double late_icpt;
	fit(x + k / 2, y + k / 2, k - k / 2, &m->late_slope, &late_icpt, &m->late_r2);
	m->trend_span = x[k - 1] - x[0];
	/* and the last quarter of their span (3 points at least): whether the heap grows at
	 * the end of the run. A program that loads (python3 importing torch: 60 MiB in 1.8 s)
	 * and then runs on a flat heap fits a line over the whole run closely (r^2 0.93) and
	 * over its later half too, which still holds the end of the load. */
	size_t tail = k;
	while (tail > 0 && x[tail - 1] >= x[k - 1] - 0.25 * m->trend_span)
		tail--;
	tail = k - tail < 3 ? k - 3 : tail;
	double tail_icpt;
	fit(x + tail, y + tail, k - tail, &m->tail_slope, &tail_icpt, &m->tail_r2);
	/* What the heap gained over the fitted points: the slope times their span, but never
	 * more than it rose (a fit over a short load phase overshoots it). */
	double lo = y[0], hi = y[0];
	for (size_t i = 1; i < k; i++) {
		lo = y[i] < lo ? y[i] : lo;
		hi = y[i] > hi ? y[i] : hi;
	}
	double growth = m->slope * m->trend_span;
	m->trend_growth = growth < hi - lo ? growth : hi - lo;
	m->has_trend = 1;
	m->trend_per_step = per_step;
	m->trend_points = (uint32_t)k;
	free(x);
	free(y);
	return 0;
}

/* Whether two sites have the same source-level stack (function, file, line per frame) in
 * the same region, whatever their processes: different return addresses of one source line
 * (an unrolled loop, inlined copies) are one allocation site to the reader. */
static int same_source(const ana_profile *p, const ana_mem_site *a, const ana_mem_site *b)
{
	if (a->node != b->node || a->stack == ANA_NONE || b->stack == ANA_NONE)
		return a->stack == b->stack && a->process == b->process && a->node == b->node;
	const ana_stack *x = &p->smp.stacks[a->stack], *y = &p->smp.stacks[b->stack];
	if (x->n != y->n)
		return 0;
	for (uint32_t i = 0; i < x->n; i++) {
		const ana_loc *u = &p->smp.locs[x->locs[i]], *v = &p->smp.locs[y->locs[i]];
		if (u->func != v->func || u->file != v->file || u->line != v->line)
			return 0;
	}
	return 1;
}

static int same_site(const ana_profile *p, const ana_mem_site *a, const ana_mem_site *b)
{
	return a->process == b->process && same_source(p, a, b);
}

static int cmp_level(const void *a, const void *b)
{
	const ana_mem_level *x = a, *y = b;
	if (x->site != y->site)
		return x->site < y->site ? -1 : 1;
	return (x->point > y->point) - (x->point < y->point);
}

/* The trend of ys over a process's points x (per step when it has 3 step points or more,
 * else per second), as trend() takes the heap's. */
static int series_trend(ana_profile *p, ana_mem_series *sr)
{
	const ana_memory *m = &p->mem;
	size_t steps = 0;
	for (size_t i = 0; i < sr->n; i++)
		steps += m->points[sr->point[i]].reason == FMT_SNAP_STEP;
	sr->per_step = steps >= 3;
	double *x = malloc((sr->n + 1) * sizeof *x), *y = malloc((sr->n + 1) * sizeof *y);
	if (!x || !y) {
		free(x);
		free(y);
		return FENNEC_ENOMEM;
	}
	size_t k = 0;
	for (size_t i = 0; i < sr->n; i++) {
		const ana_mem_point *pt = &m->points[sr->point[i]];
		if (!trend_point(pt, sr->per_step))
			continue;
		x[k] = sr->per_step ? (double)pt->step : (double)(pt->t_ns - m->points[sr->point[0]].t_ns) / 1e9;
		y[k++] = sr->bytes[i];
	}
	if (!sr->per_step)
		k = before_teardown(x, y, k);
	if (k >= 3) {
		double icpt;
		fit(x, y, k, &sr->slope, &icpt, &sr->r2);
		sr->has_trend = 1;
	}
	free(x);
	free(y);
	return 0;
}

/* A site's levels: [at, end) of the sorted levels, and the highest. */
typedef struct cand {
	uint32_t site;
	size_t at, end;
	double max;
} cand;

static int cmp_cand(const void *a, const void *b)
{
	const cand *x = a, *y = b;
	return (x->max < y->max) - (x->max > y->max);
}

/* The ANA_MEM_SERIES sites (not the runtime's) whose live bytes were highest at a timeline
 * point, each with its level at every point of its process and its trend. A stack that
 * several processes allocate from (fork-based workers) is shown once, by its highest
 * process's series, with the number of processes whose series would have read the same. */
static int series(ana_profile *p)
{
	ana_memory *m = &p->mem;
	if (!m->nlevels)
		return 0;
	qsort(m->levels, m->nlevels, sizeof *m->levels, cmp_level);
	cand *c = NULL;
	size_t nc = 0, cap = 0;
	for (size_t i = 0; i < m->nlevels;) {
		uint32_t site = m->levels[i].site;
		size_t at = i;
		double cur = 0, max = 0;
		for (; i < m->nlevels && m->levels[i].site == site; i++) {
			cur += m->levels[i].bytes;
			int last = i + 1 == m->nlevels || m->levels[i + 1].site != site || m->levels[i + 1].point != m->levels[i].point;
			if (last && cur > max)
				max = cur;
		}
		if (m->sites[site].runtime || max < 0.5)
			continue;
		if (ana_grow(&c, &cap, nc, sizeof *c) < 0) {
			free(c);
			return FENNEC_ENOMEM;
		}
		c[nc++] = (cand){site, at, i, max};
	}
	if (nc > 1)
		qsort(c, nc, sizeof *c, cmp_cand);
	cand top[ANA_MEM_SERIES];
	uint32_t ntop = 0, procs[ANA_MEM_SERIES];
	for (size_t i = 0; i < nc; i++) {
		uint32_t k = 0;
		while (k < ntop && !same_source(p, &m->sites[top[k].site], &m->sites[c[i].site]))
			k++;
		if (k < ntop)
			procs[k]++;
		else if (ntop < ANA_MEM_SERIES) {
			top[ntop] = c[i];
			procs[ntop++] = 1;
		}
	}
	free(c);
	for (uint32_t t = 0; t < ntop; t++) {
		ana_mem_series *sr = &m->series[m->nseries];
		uint32_t proc = m->sites[top[t].site].process;
		size_t np = 0;
		for (size_t i = 0; i < m->npoints; i++)
			np += m->points[i].process == proc;
		*sr = (ana_mem_series){.site = top[t].site, .max_bytes = round(top[t].max), .processes = procs[t]};
		sr->point = malloc((np + 1) * sizeof *sr->point);
		sr->bytes = malloc((np + 1) * sizeof *sr->bytes);
		m->nseries++;
		if (!sr->point || !sr->bytes)
			return FENNEC_ENOMEM;
		size_t lv = top[t].at;
		double cur = 0;
		for (size_t i = 0; i < m->npoints; i++) {
			if (m->points[i].process != proc)
				continue;
			while (lv < top[t].end && m->levels[lv].point <= i)
				cur += m->levels[lv++].bytes;
			/* whole bytes: a sum of changes of level carries rounding noise, which made a
			 * constant level's fit read r^2 = 0 */
			sr->point[sr->n] = (uint32_t)i;
			sr->bytes[sr->n++] = cur > 0 ? round(cur) : 0;
		}
		sr->last_bytes = sr->n ? sr->bytes[sr->n - 1] : 0;
		if (series_trend(p, sr))
			return FENNEC_ENOMEM;
	}
	return 0;
}

static uint64_t site_hash(const ana_profile *p, const ana_mem_site *a)
{
	uint64_t h = (uint64_t)a->process * 31 + a->node;
	if (a->stack == ANA_NONE)
		return h ^ 0x5bd1e995;
	const ana_stack *x = &p->smp.stacks[a->stack];
	for (uint32_t i = 0; i < x->n; i++) {
		const ana_loc *u = &p->smp.locs[x->locs[i]];
		h = (h ^ ((uint64_t)u->func << 32 | u->line)) * 0x100000001b3ull;
	}
	/* The multiply carries no high bits down: the table's slot (the low bits) would
	 * depend on the lines alone, the same for every frame without one, and a compiler's
	 * 40,000 sites took 60 % of its analysis probing. Mix them down. */
	h ^= h >> 31;
	h *= 0xbf58476d1ce4e5b9ull;
	return h ^ (h >> 29);
}

/* Fold sites with the same source-level stack into one; map[i]: where site i went. */
static int merge_sites(ana_profile *p, uint32_t *map)
{
	ana_memory *m = &p->mem;
	size_t cap = 16;
	while (cap < (size_t)m->nsites * 2)
		cap *= 2;
	uint32_t *tab = malloc(cap * sizeof *tab);
	if (!tab)
		return FENNEC_ENOMEM;
	memset(tab, 0xff, cap * sizeof *tab);
	uint32_t k = 0;
	for (uint32_t i = 0; i < m->nsites; i++) {
		ana_mem_site *s = &m->sites[i];
		size_t j = site_hash(p, s) & (cap - 1);
		for (; tab[j] != UINT32_MAX; j = (j + 1) & (cap - 1))
			if (same_site(p, &m->sites[tab[j]], s))
				break;
		if (tab[j] == UINT32_MAX) {
			m->sites[k] = *s;
			map[i] = k;
			tab[j] = k++;
			continue;
		}
		map[i] = tab[j];
		ana_mem_site *d = &m->sites[tab[j]];
		d->allocs += s->allocs;
		d->bytes += s->bytes;
		d->live_count += s->live_count;
		d->live_bytes += s->live_bytes;
		d->peak_count += s->peak_count;
		d->peak_bytes += s->peak_bytes;
		d->temporary += s->temporary;
		d->temporary_bytes += s->temporary_bytes;
		d->reach_count += s->reach_count;
		d->reach_bytes += s->reach_bytes;
		d->scanned &= s->scanned;
	}
	m->nsites = k;
	free(tab);
	return 0;
}

int ana_memory_finish(ana_profile *p)
{
	ana_memory *m = &p->mem;
	rstate_free(m->priv);
	m->priv = NULL;
	if (!m->present)
		return 0;
	for (uint32_t i = 0; i < m->nsites; i++)
		m->sites[i].stack = ana_samples_stack_of(p, m->sites[i].process, m->sites[i].raw);
	/* Levels become changes of level, per site as read (in time order), so that sites
	 * merged into one add up; then they name merged sites and sorted points. */
	double *prev = calloc((size_t)m->nsites + 1, sizeof *prev);
	uint32_t *map = malloc(((size_t)m->nsites + 1) * sizeof *map);
	uint32_t *inv = malloc((m->npoints + 1) * sizeof *inv);
	if (!prev || !map || !inv) {
		free(prev);
		free(map);
		free(inv);
		return FENNEC_ENOMEM;
	}
	for (size_t i = 0; i < m->nlevels; i++) {
		ana_mem_level *v = &m->levels[i];
		double d = v->bytes - prev[v->site];
		prev[v->site] = v->bytes;
		v->bytes = d;
	}
	free(prev);
	int rc = merge_sites(p, map);
	/* The peak is one process's (the largest): what the other processes held at their own
	 * peaks, at other times, is not part of it. Three fork children's leaks read 585.9 KiB
	 * "live at the peak" of a 195.3 KiB heap, and export --memory peak summed every
	 * process's peak. */
	for (uint32_t i = 0; i < m->nsites; i++)
		if (m->sites[i].process != m->peak_process)
			m->sites[i].peak_bytes = m->sites[i].peak_count = 0;
	if (m->npoints > 1)
		qsort(m->points, m->npoints, sizeof *m->points, cmp_point);
	for (size_t i = 0; i < m->npoints; i++) {
		inv[m->points[i].seq] = (uint32_t)i;
		m->points[i].seq = (uint32_t)i;
	}
	for (size_t i = 0; !rc && i < m->nlevels; i++) {
		m->levels[i].site = map[m->levels[i].site];
		m->levels[i].point = inv[m->levels[i].point];
	}
	free(map);
	free(inv);
	if (rc)
		return rc;
	/* A process killed or crashed (its file without END) lost the events after its last
	 * flush, frees included: a pool worker that freed its task's 2,000 blocks and was then
	 * sent SIGTERM read as a HIGH leak of them. Its blocks live at the end are said apart,
	 * not as unfreed. A session that ended by exec wrote everything, but what it left live
	 * the exec released with the process's image: the shell of a pyenv shim, which execs
	 * python3, read as five leaks of bash's hash tables beside the script's. Those blocks
	 * are said apart too. (One that ended by exit, _exit or fennec_stop: what it left
	 * live, it left unfreed.) */
	uint8_t *counted = calloc(p->nprocs ? p->nprocs : 1, 1), *execed = calloc(p->nprocs ? p->nprocs : 1, 1);
	if (!counted || !execed) {
		free(counted);
		free(execed);
		return FENNEC_ENOMEM;
	}
	for (uint32_t i = 0; i < m->nsites; i++) {
		ana_mem_site *s = &m->sites[i];
		s->runtime = s->stack != ANA_NONE && is_runtime(p, &p->smp.stacks[s->stack]);
		const fmt_file *f = s->process < p->nprocs ? &p->procs[s->process].file : NULL;
		s->cut_short = f && f->cut_short;
		s->at_exec = f && !f->cut_short && f->has_end && f->exit_reason == FMT_END_EXEC;
		/* A window that ends before the recording does cannot tell a leak from a block
		 * freed later: what its allocations left live is no leak there (docs/memory.md). */
		if (s->live_count > 0.5 && (!p->window.active || p->window.to_end)) {
			if (s->cut_short) {
				m->cut_short_bytes += s->live_bytes;
				m->cut_short_count += s->live_count;
				if (!counted[s->process]++)
					m->cut_short_procs++;
			} else if (s->runtime) {
				m->runtime_bytes += s->live_bytes;
				m->runtime_count += s->live_count;
			} else if (s->at_exec) {
				m->exec_bytes += s->live_bytes;
				m->exec_count += s->live_count;
				if (!execed[s->process]++)
					m->exec_procs++;
			} else {
				double kept, rb = ana_mem_measure(s, ANA_MEM_REACH, &kept);
				if (rb <= 0)
					kept = 0;
				/* the scan counts blocks made before a window too */
				if (rb > s->live_bytes)
					rb = s->live_bytes;
				if (kept > s->live_count)
					kept = s->live_count;
				m->reach_bytes += rb;
				m->reach_count += kept;
				m->leaked_bytes += s->live_bytes - rb;
				m->leaked_count += s->live_count - kept;
				if (s->live_bytes > 0) { /* the unreachable share of the variance */
					double u = (s->live_bytes - rb) / s->live_bytes;
					m->leaked_bytes_var += s->live_bytes_var * u * u;
				}
				if (s->live_count > 0) {
					double u = (s->live_count - kept) / s->live_count;
					m->leaked_count_var += s->live_count_var * u * u;
				}
			}
		}
		m->temporary += s->temporary;
		m->temporary_bytes += s->temporary_bytes;
	}
	free(counted);
	free(execed);
	for (size_t i = 0; i < m->npoints; i++)
		if (m->points[i].rss_bytes > m->peak_rss_bytes)
			m->peak_rss_bytes = m->points[i].rss_bytes;
	for (uint32_t i = 0; i < p->nprocs; i++)
		if (p->procs[i].file.max_rss_kb * 1024 > m->peak_rss_bytes)
			m->peak_rss_bytes = p->procs[i].file.max_rss_kb * 1024;
	m->allocs_per_step = p->steps ? (double)m->allocs / (double)p->steps : NAN;
	m->alloc_rate_per_s = p->wall_ns ? (double)m->allocs / ((double)p->wall_ns / 1e9) : NAN;
	if (m->dropped && m->drops_unknown)
		ana_warn(p, "%llu heap events were dropped (the heap buffer was full: a sampled allocation's record "
			    "is dropped at once, a free or a full-mode record after a second's wait): per-stack numbers "
			    "are incomplete, and a block whose free was dropped reads as unfreed; the totals are exact",
			 (unsigned long long)m->dropped);
	else if (m->dropped)
		ana_warn(p, "%llu heap events were dropped (the heap buffer was full: a sampled allocation's record "
			    "is dropped at once, a free or a full-mode record after a second's wait): %llu allocations, "
			    "%llu frees, %llu timeline points; %s; the totals are exact",
			 (unsigned long long)m->dropped, (unsigned long long)m->dropped_allocs,
			 (unsigned long long)m->dropped_frees,
			 (unsigned long long)(m->dropped - m->dropped_allocs - m->dropped_frees),
			 m->dropped_frees ? "per-stack numbers are incomplete, and as many blocks reported unfreed as "
					    "frees were lost may have been freed"
			 : m->dropped_allocs ? "per-stack numbers are incomplete; no free was lost, so every block "
					       "reported unfreed was"
					     : "per-stack numbers are whole");
	if (m->untracked)
		ana_warn(p, "%llu sampled allocations were left out: more sampled blocks were live than fennec "
			    "watches for their frees (65,536); the per-stack numbers, scaled to the exact totals, "
			    "credit theirs to the stacks sampled; a larger --memory-rate samples fewer",
			 (unsigned long long)m->untracked);
	/* Per-stack numbers from a few samples that stand for others are shares of a handful:
	 * say so. (A block much larger than the rate is sampled for sure and stands for itself:
	 * three samples of 4 MiB blocks are exact.) */
	if (m->mode == FMT_MEM_SAMPLED && m->standing_samples && m->standing_samples < 10) {
		char a[32], b[32];
		ana_warn(p, "only %llu sampled allocation%s for others (one per %s allocated on average; the program "
			    "allocated %s): per-stack numbers are rough; a smaller --memory-rate samples more, "
			    "--memory=full records every allocation",
			 (unsigned long long)m->standing_samples, m->standing_samples == 1 ? " stands" : "s stand",
			 ana_fmt_bytes((double)m->rate, a, sizeof a), ana_fmt_bytes((double)m->alloc_bytes, b, sizeof b));
	}
	rc = trend(p);
	return rc ? rc : series(p);
}

void ana_memory_discard(ana_profile *p, uint32_t proc)
{
	ana_memory *m = &p->mem;
	rstate_free(m->priv);
	m->priv = NULL;
	/* The levels name sites and points by index: their new indices, UINT32_MAX for the
	 * process's own (whose levels go). Without room for the maps, every level goes. */
	uint32_t *smap = malloc(((size_t)m->nsites + 1) * sizeof *smap);
	uint32_t *pmap = malloc((m->npoints + 1) * sizeof *pmap);
	uint32_t k = 0;
	for (uint32_t i = 0; i < m->nsites; i++) {
		if (smap)
			smap[i] = m->sites[i].process != proc ? k : UINT32_MAX;
		if (m->sites[i].process != proc)
			m->sites[k++] = m->sites[i];
	}
	m->nsites = k;
	size_t n = 0;
	for (size_t i = 0; i < m->npoints; i++) {
		if (pmap)
			pmap[i] = m->points[i].process != proc ? (uint32_t)n : UINT32_MAX;
		if (m->points[i].process != proc) {
			m->points[n] = m->points[i];
			m->points[n].seq = (uint32_t)n;
			n++;
		}
	}
	m->npoints = n;
	size_t l = 0;
	for (size_t i = 0; smap && pmap && i < m->nlevels; i++) {
		ana_mem_level v = m->levels[i];
		v.site = smap[v.site];
		v.point = pmap[v.point];
		if (v.site != UINT32_MAX && v.point != UINT32_MAX)
			m->levels[l++] = v;
	}
	m->nlevels = l;
	free(smap);
	free(pmap);
}

void ana_memory_free(ana_profile *p)
{
	rstate_free(p->mem.priv);
	free(p->mem.points);
	free(p->mem.sites);
	free(p->mem.levels);
	for (uint32_t i = 0; i < p->mem.nseries; i++) {
		free(p->mem.series[i].point);
		free(p->mem.series[i].bytes);
	}
	memset(&p->mem, 0, sizeof p->mem);
}

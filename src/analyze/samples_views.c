/*
 * samples_views.c - the views of the samples that the renderers show (ana_sample_view):
 * hot functions with their self and total weight and top caller, hot lines, the call tree,
 * per region node and per thread numbers, over all the samples or those a filter selects
 * (a pid, a tid, a region; analyze.h); and the names of modules, kinds and statuses they
 * are read with. ana_samples_finish() (samples.c) builds the profile's two views.
 */
#include "analyze/aggregate.h"
#include "symbol/symbol.h"

#include <stdlib.h>

#include "analyze/samples.h"

/* ---- modules ---- */

static const char *module_file(const char *path)
{
	const char *b = strrchr(path, '/');
	return b ? b + 1 : path;
}

int ana_module_is_fennec(const char *path) { return !strncmp(module_file(path), "libfennec", 9); }

int ana_module_is_wrapper(const char *path)
{
	const char *b = module_file(path);
	return ana_module_is_fennec(path) || !strncmp(b, "libasan", 7) || !strncmp(b, "libtsan", 7) ||
	       !strncmp(b, "libubsan", 8) || !strncmp(b, "liblsan", 7);
}

/* ---- views ---- */

static int cmp_hot_func(const void *a, const void *b)
{
	const ana_hot_func *x = a, *y = b;
	if (x->self != y->self)
		return (x->self < y->self) - (x->self > y->self);
	if (x->total != y->total)
		return (x->total < y->total) - (x->total > y->total);
	return (x->func > y->func) - (x->func < y->func);
}

static int cmp_hot_line(const void *a, const void *b)
{
	const ana_hot_line *x = a, *y = b;
	if (x->self != y->self)
		return (x->self < y->self) - (x->self > y->self);
	if (x->file != y->file)
		return (x->file > y->file) - (x->file < y->file);
	return (x->line > y->line) - (x->line < y->line);
}

void ana_sample_view_free(ana_sample_view *v)
{
	if (!v)
		return;
	for (int k = 0; k < ANA_NKINDS; k++) {
		free(v->funcs[k]);
		free(v->lines[k]);
	}
	free(v->tree);
	free(v->nodes);
	free(v->thread_samples);
	free(v->thread_weight);
	memset(v, 0, sizeof *v);
}

/* Nodes selected by a region filter: those named or pathed `region`, and their descendants. */
static uint8_t *region_selection(const ana_profile *p, const char *region)
{
	uint8_t *sel = calloc(p->nnodes ? p->nnodes : 1, 1);
	if (!sel)
		return NULL;
	for (uint32_t n = 0; n < p->nnodes; n++)
		for (uint32_t a = n; a != ANA_NONE && !sel[n]; a = p->nodes[a].parent)
			sel[n] = !strcmp(p->names[p->nodes[a].name], region) || (p->nodes[a].path && !strcmp(p->nodes[a].path, region));
	return sel;
}

/* The child of call tree node `parent` (ANA_NONE: a root) for `func`. */
static uint32_t tree_child(ana_sample_view *v, kmap *index, uint32_t parent, uint32_t func)
{
	int isnew;
	uint64_t *slot = kmap_slot(index, (uint64_t)parent << 32 | func, &isnew);
	if (!slot)
		return ANA_NONE;
	if (!isnew)
		return (uint32_t)*slot;
	size_t cap = v->tree_cap;
	if (ana_grow(&v->tree, &cap, v->ntree, sizeof *v->tree) < 0)
		return ANA_NONE;
	v->tree_cap = (uint32_t)cap;
	uint32_t n = v->ntree++;
	v->tree[n] = (ana_cnode){.func = func, .parent = parent, .first_child = ANA_NONE, .next_sibling = ANA_NONE};
	if (parent != ANA_NONE) {
		v->tree[n].next_sibling = v->tree[parent].first_child;
		v->tree[parent].first_child = n;
	}
	*slot = n;
	return n;
}

/* Working state of one view build. Lines get dense ids; the per-kind maps are exact. */
typedef struct vwork {
	kmap lidx;            /* file << 32 | line -> line id */
	uint32_t *lfile, *lline;
	size_t nl, l_cap, l2_cap;
	uint64_t *lw;         /* [line id * ANA_NKINDS + kind] self weight */
	size_t lw_cap;
	kmap flw[ANA_NKINDS]; /* func << 32 | line id -> self weight */
	kmap cw[ANA_NKINDS];  /* callee << 32 | caller -> self weight of the callee */
	kmap ew[ANA_NKINDS];  /* callee << 32 | entry (first caller in another module) -> self weight */
	kmap tindex;          /* call tree: parent << 32 | func -> node */
	kmap ntop;            /* region node << 32 | func -> on-CPU self weight */
} vwork;

/* For each callee of a map callee << 32 | other -> weight, in kind k: the other with the
 * most weight (the lowest id among equals), into best and id at callee * ANA_NKINDS + k. */
static void heaviest_per_callee(const kmap *m, unsigned k, uint64_t *best, uint32_t *id)
{
	for (size_t i = 0; i < m->cap; i++) {
		if (!m->used[i])
			continue;
		uint32_t callee = (uint32_t)(m->key[i] >> 32), other = (uint32_t)m->key[i];
		size_t at = (size_t)callee * ANA_NKINDS + k;
		if (m->val[i] > best[at] || (m->val[i] == best[at] && other < id[at])) {
			best[at] = m->val[i];
			id[at] = other;
		}
	}
}

static void vwork_free(vwork *w)
{
	kmap_free(&w->lidx);
	free(w->lfile);
	free(w->lline);
	free(w->lw);
	for (int k = 0; k < ANA_NKINDS; k++) {
		kmap_free(&w->flw[k]);
		kmap_free(&w->cw[k]);
		kmap_free(&w->ew[k]);
	}
	kmap_free(&w->tindex);
	kmap_free(&w->ntop);
}

static uint32_t line_id(vwork *w, uint32_t file, uint32_t line)
{
	int isnew;
	uint64_t *v = kmap_slot(&w->lidx, (uint64_t)file << 32 | line, &isnew);
	if (!v)
		return ANA_NONE;
	if (!isnew)
		return (uint32_t)*v;
	if (ana_grow(&w->lfile, &w->l_cap, w->nl, sizeof *w->lfile) < 0 || ana_grow(&w->lline, &w->l2_cap, w->nl, sizeof *w->lline) < 0 ||
	    ana_grow(&w->lw, &w->lw_cap, (w->nl + 1) * ANA_NKINDS, sizeof *w->lw) < 0)
		return ANA_NONE;
	w->lfile[w->nl] = file;
	w->lline[w->nl] = line;
	*v = w->nl;
	return (uint32_t)w->nl++;
}

/* Pass 1 of ana_sample_view_build, over the samples `flt` selects (nodesel: its region's
 * nodes): weights per (stack, kind) into sw, per thread and per region node into v, and
 * the on-CPU weight per (region node, leaf function) into ntop. Returns 0, or -1 when out
 * of memory. */
static int view_samples(const ana_profile *p, const ana_sample_filter *flt, const uint8_t *nodesel,
			ana_sample_view *v, uint64_t *sw, kmap *ntop)
{
	const ana_sampling *s = &p->smp;
	for (size_t i = 0; i < s->nsamples; i++) {
		const ana_sample *x = &s->samples[i];
		const ana_thread *t = &p->threads[x->thread];
		if (flt) {
			if (flt->pid && p->procs[t->process].file.pid != flt->pid)
				continue;
			if (flt->tid && t->tid != flt->tid)
				continue;
			if (flt->region && (x->node == ANA_NONE || !nodesel[x->node]))
				continue;
		}
		unsigned k = x->kind;
		v->samples[k]++;
		v->weight[k] += x->weight;
		sw[(size_t)x->stack * ANA_NKINDS + k] += x->weight;
		v->thread_samples[(size_t)x->thread * ANA_NKINDS + k]++;
		v->thread_weight[(size_t)x->thread * ANA_NKINDS + k] += x->weight;
		const ana_stack *st = &s->stacks[x->stack];
		uint32_t leaf = st->n ? s->locs[st->locs[st->n - 1]].func : ANA_NONE;
		for (uint32_t n = x->node; n != ANA_NONE; n = p->nodes[n].parent) {
			v->nodes[n].samples[k]++;
			v->nodes[n].weight[k] += x->weight;
			if (k == ANA_CPU && leaf != ANA_NONE) {
				uint64_t *nw = kmap_slot(ntop, (uint64_t)n << 32 | leaf, NULL);
				if (!nw)
					return -1;
				*nw += x->weight;
			}
		}
	}
	return 0;
}

/* The top functions of each region node of v (on-CPU self weight inside the region), from
 * the weights per (node, leaf function) in ntop, and their shares. */
static void node_tops(const ana_profile *p, const kmap *ntop, ana_sample_view *v)
{
	for (size_t i = 0; i < ntop->cap; i++) {
		if (!ntop->used[i])
			continue;
		uint32_t n = (uint32_t)(ntop->key[i] >> 32), fn = (uint32_t)ntop->key[i];
		uint64_t wt = ntop->val[i];
		ana_node_samples *ns = &v->nodes[n];
		uint32_t at = ns->ntop;
		while (at > 0 && (ns->top_weight[at - 1] < wt || (ns->top_weight[at - 1] == wt && ns->top[at - 1] > fn)))
			at--;
		if (at >= ANA_NODE_TOP)
			continue;
		for (uint32_t j = ns->ntop < ANA_NODE_TOP ? ns->ntop : ANA_NODE_TOP - 1; j > at; j--) {
			ns->top[j] = ns->top[j - 1];
			ns->top_weight[j] = ns->top_weight[j - 1];
		}
		ns->top[at] = fn;
		ns->top_weight[at] = wt;
		if (ns->ntop < ANA_NODE_TOP)
			ns->ntop++;
	}
	for (uint32_t n = 0; n < p->nnodes; n++)
		for (uint32_t j = 0; j < v->nodes[n].ntop; j++)
			v->nodes[n].top_pct[j] = 100.0 * (double)v->nodes[n].top_weight[j] / (double)v->nodes[n].weight[ANA_CPU];
}

int ana_sample_view_build(const ana_profile *p, const ana_sample_filter *flt, ana_sample_view *v)
{
	const ana_sampling *s = &p->smp;
	memset(v, 0, sizeof *v);
	if (flt)
		v->filter = *flt;
	int rc = FENNEC_ENOMEM;
	vwork w = {0};
	uint8_t *nodesel = NULL;
	size_t nfk = (s->nfuncs ? (size_t)s->nfuncs : 1) * ANA_NKINDS;
	uint64_t *sw = calloc(s->nstacks ? (size_t)s->nstacks * ANA_NKINDS : 1, sizeof *sw); /* per (stack, kind) */
	uint64_t *stamp = calloc(s->nfuncs ? s->nfuncs : 1, sizeof *stamp); /* last (stack, kind) counted + 1 */
	uint64_t *self = calloc(nfk, sizeof *self), *tot = calloc(nfk, sizeof *tot);
	uint64_t *best = calloc(nfk, sizeof *best), *lbest = calloc(nfk, sizeof *lbest);
	uint32_t *best_caller = malloc(nfk * sizeof *best_caller), *best_line = malloc(nfk * sizeof *best_line);
	uint64_t *ebest = calloc(nfk, sizeof *ebest);
	uint32_t *best_entry = malloc(nfk * sizeof *best_entry);
	uint8_t *wrapper = calloc(s->nfuncs ? s->nfuncs : 1, 1); /* of libfennec, a sanitizer's runtime */
	uint64_t *lfw = NULL;     /* per (line id, kind): weight of its best function */
	uint32_t *lfn = NULL;     /* ... and that function */
	v->nodes = calloc(p->nnodes ? p->nnodes : 1, sizeof *v->nodes);
	v->thread_samples = calloc(p->nthreads ? (size_t)p->nthreads * ANA_NKINDS : 1, sizeof *v->thread_samples);
	v->thread_weight = calloc(p->nthreads ? (size_t)p->nthreads * ANA_NKINDS : 1, sizeof *v->thread_weight);
	if (!v->nodes || !v->thread_samples || !v->thread_weight || !sw || !stamp || !self || !tot || !best || !lbest ||
	    !best_caller || !best_line || !ebest || !best_entry || !wrapper)
		goto out;
	for (uint32_t fn = 0; fn < s->nfuncs; fn++)
		wrapper[fn] = (uint8_t)ana_module_is_wrapper(p->names[s->funcs[fn].module]);
	memset(best_caller, 0xff, nfk * sizeof *best_caller);
	memset(best_entry, 0xff, nfk * sizeof *best_entry);
	memset(best_line, 0xff, nfk * sizeof *best_line);
	if (flt && flt->region && !(nodesel = region_selection(p, flt->region)))
		goto out;

	/* Pass 1, over the samples selected: per stack and kind, per thread, per region node. */
	if (view_samples(p, flt, nodesel, v, sw, &w.ntop))
		goto out;

	/* Pass 2, over the distinct stacks: self and total per function (a function counted
	 * once per stack however often it recurs), lines, callers, the call tree. */
	for (uint32_t si = 0; si < s->nstacks; si++) {
		const ana_stack *st = &s->stacks[si];
		for (unsigned k = 0; k < ANA_NKINDS; k++) {
			uint64_t wt = sw[(size_t)si * ANA_NKINDS + k];
			if (!wt || !st->n)
				continue;
			uint64_t mark = (uint64_t)si * ANA_NKINDS + k + 1;
			uint32_t node = ANA_NONE;
			for (uint32_t j = 0; j < st->n; j++) {
				uint32_t fn = s->locs[st->locs[j]].func;
				if (stamp[fn] != mark) {
					stamp[fn] = mark;
					tot[(size_t)fn * ANA_NKINDS + k] += wt;
				}
				if ((node = tree_child(v, &w.tindex, node, fn)) == ANA_NONE)
					goto out;
				v->tree[node].total[k] += wt;
			}
			v->tree[node].self[k] += wt;
			const ana_loc *leaf = &s->locs[st->locs[st->n - 1]];
			self[(size_t)leaf->func * ANA_NKINDS + k] += wt;
			if (leaf->file != ANA_NONE) {
				uint32_t lid = line_id(&w, leaf->file, leaf->line);
				uint64_t *fl = lid == ANA_NONE ? NULL : kmap_slot(&w.flw[k], (uint64_t)leaf->func << 32 | lid, NULL);
				if (!fl)
					goto out;
				w.lw[(size_t)lid * ANA_NKINDS + k] += wt;
				*fl += wt;
			}
			/* the caller: the nearest outer frame in another function */
			uint32_t j = st->n - 1;
			while (j-- > 0) {
				uint32_t caller = s->locs[st->locs[j]].func;
				if (caller == leaf->func)
					continue;
				uint64_t *c = kmap_slot(&w.cw[k], (uint64_t)leaf->func << 32 | caller, NULL);
				if (!c)
					goto out;
				*c += wt;
				break;
			}
			/* the entry: the nearest outer frame in another module (j + 1 frames remain),
			 * past the wrappers of fennec (its malloc around glibc's) and of a sanitizer's
			 * runtime (ASan's qsort interceptor) */
			uint32_t mod = s->funcs[leaf->func].module;
			for (j++; j-- > 0;) {
				uint32_t entry = s->locs[st->locs[j]].func;
				if (s->funcs[entry].module == mod || (wrapper[entry] && !wrapper[leaf->func]))
					continue;
				uint64_t *c = kmap_slot(&w.ew[k], (uint64_t)leaf->func << 32 | entry, NULL);
				if (!c)
					goto out;
				*c += wt;
				break;
			}
		}
	}

	/* Per function and kind: the hottest caller and line; per line: the hottest function. */
	lfw = calloc(w.nl ? w.nl * ANA_NKINDS : 1, sizeof *lfw);
	lfn = malloc((w.nl ? w.nl * ANA_NKINDS : 1) * sizeof *lfn);
	if (!lfw || !lfn)
		goto out;
	for (unsigned k = 0; k < ANA_NKINDS; k++) {
		heaviest_per_callee(&w.cw[k], k, best, best_caller);
		heaviest_per_callee(&w.ew[k], k, ebest, best_entry);
		const kmap *fl = &w.flw[k];
		for (size_t i = 0; i < fl->cap; i++) {
			if (!fl->used[i])
				continue;
			uint32_t fn = (uint32_t)(fl->key[i] >> 32), lid = (uint32_t)fl->key[i];
			size_t at = (size_t)fn * ANA_NKINDS + k, lat = (size_t)lid * ANA_NKINDS + k;
			if (fl->val[i] > lbest[at] || (fl->val[i] == lbest[at] && lid < best_line[at])) {
				lbest[at] = fl->val[i];
				best_line[at] = lid;
			}
			if (fl->val[i] > lfw[lat] || (fl->val[i] == lfw[lat] && fn < lfn[lat])) {
				lfw[lat] = fl->val[i];
				lfn[lat] = fn;
			}
		}
	}

	/* Hot functions and hot lines per kind. */
	for (unsigned k = 0; k < ANA_NKINDS; k++) {
		double wk = (double)v->weight[k];
		uint32_t n = 0;
		for (uint32_t fn = 0; fn < s->nfuncs; fn++)
			n += tot[(size_t)fn * ANA_NKINDS + k] > 0;
		if (!(v->funcs[k] = calloc(n ? n : 1, sizeof *v->funcs[k])))
			goto out;
		for (uint32_t fn = 0; fn < s->nfuncs; fn++) {
			size_t at = (size_t)fn * ANA_NKINDS + k;
			if (!tot[at])
				continue;
			ana_hot_func *h = &v->funcs[k][v->nfuncs[k]++];
			*h = (ana_hot_func){
				.func = fn, .self = self[at], .total = tot[at],
				.self_pct = wk > 0 ? 100.0 * (double)self[at] / wk : 0,
				.total_pct = wk > 0 ? 100.0 * (double)tot[at] / wk : 0,
				.file = s->funcs[fn].file, .line = s->funcs[fn].line, /* where first seen ... */
				.caller = best_caller[at],
				.caller_pct = self[at] && best_caller[at] != ANA_NONE ? 100.0 * (double)best[at] / (double)self[at] : 0,
				.entry = best_entry[at],
				.entry_pct = self[at] && best_entry[at] != ANA_NONE ? 100.0 * (double)ebest[at] / (double)self[at] : 0,
			};
			if (best_line[at] != ANA_NONE) { /* ... unless its self samples have a hottest line */
				h->file = w.lfile[best_line[at]];
				h->line = w.lline[best_line[at]];
			}
		}
		if (v->nfuncs[k] > 1)
			qsort(v->funcs[k], v->nfuncs[k], sizeof *v->funcs[k], cmp_hot_func);
		if (!(v->lines[k] = calloc(w.nl ? w.nl : 1, sizeof *v->lines[k])))
			goto out;
		for (size_t lid = 0; lid < w.nl; lid++) {
			size_t lat = lid * ANA_NKINDS + k;
			if (!w.lw[lat])
				continue;
			v->lines[k][v->nlines[k]++] = (ana_hot_line){
				.file = w.lfile[lid], .line = w.lline[lid], .func = lfn[lat], .self = w.lw[lat],
				.self_pct = wk > 0 ? 100.0 * (double)w.lw[lat] / wk : 0,
			};
		}
		if (v->nlines[k] > 1)
			qsort(v->lines[k], v->nlines[k], sizeof *v->lines[k], cmp_hot_line);
	}

	node_tops(p, &w.ntop, v);
	rc = 0;
out:
	if (rc)
		ana_sample_view_free(v);
	vwork_free(&w);
	free(nodesel);
	free(sw);
	free(stamp);
	free(self);
	free(tot);
	free(best);
	free(lbest);
	free(best_caller);
	free(ebest);
	free(best_entry);
	free(wrapper);
	free(best_line);
	free(lfw);
	free(lfn);
	return rc;
}

const char *ana_sample_kind_name(unsigned kind) { return kind == ANA_OFFCPU ? "offcpu" : "cpu"; }

const char *ana_sample_mode_name(uint64_t mode)
{
	return mode == FMT_SAMPLE_CPU ? "cpu" : mode == FMT_SAMPLE_WALL ? "wall" : "off";
}

const char *ana_module_status_name(int status) { return sym_status_name(status); }

const char *ana_sample_source_name(uint64_t source)
{
	return source == FMT_SRC_RING ? "perf_event task-clock ring" : source == FMT_SRC_PERF ? "perf_event task-clock"
	       : source == FMT_SRC_TIMER ? "POSIX CPU timer"
			       : source == FMT_SRC_WALL ? "wall-clock thread" : "unknown";
}

/*
 * operators.c - the PyTorch operator table, built from the sampled stacks once they are
 * symbolised (docs/python.md, "PyTorch operators"): each stack's operator frames (aten
 * operators' dispatcher entries, autograd nodes), the innermost one taking the sample's
 * self weight, every one its total, and the nearest Python frame outside an operator's
 * outermost frame as its caller; the work of a library's own threads goes to the operator
 * that ran on another thread at the time (attribute_workers()).
 */
#include "analyze/aggregate.h"
#include "analyze/map.h"

#include <stdio.h>
#include <stdlib.h>
#include <string.h>

/* The operator a function name is the entry of, into buf ("aten::addmm"); 0 when none. */
static int op_name(const char *fn, char *buf, size_t n)
{
	static const char ops[] = "at::_ops::", node[] = "torch::autograd::generated::";
	if (!strncmp(fn, ops, sizeof ops - 1)) {
		const char *a = fn + sizeof ops - 1, *e = strstr(a, "::");
		if (!e || (strncmp(e, "::call(", 7) && strncmp(e, "::redispatch(", 13) && strcmp(e, "::call") &&
			   strcmp(e, "::redispatch")))
			return 0;
		/* The struct is named <op>_<overload> when the operator has overloads
		 * (at::_ops::fill__Scalar, add__Tensor, sum_dim_IntList): torch.profiler and the
		 * user know it as the operator, aten::fill_. An overload name mostly begins with a
		 * capital (Tensor, Scalar, IntList) or is "out"; lower-case ones other than out
		 * (mean's "dim") stay in the name, as the symbol cannot tell them from the op's. */
		const char *cut = e;
		for (const char *q = a + 1; q + 1 < e; q++)
			if (q[0] == '_' && q[1] >= 'A' && q[1] <= 'Z') {
				cut = q;
				break;
			}
		if (cut - a > 4 && !strncmp(cut - 4, "_out", 4))
			cut -= 4;
		snprintf(buf, n, "aten::%.*s", (int)(cut - a), a);
		return 1;
	}
	if (!strncmp(fn, node, sizeof node - 1)) {
		const char *a = fn + sizeof node - 1, *e = strstr(a, "::apply");
		if (!e)
			return 0;
		snprintf(buf, n, "%.*s", (int)(e - a), a);
		return 1;
	}
	return 0;
}

static int cmp_op(const void *a, const void *b)
{
	const ana_op *x = a, *y = b;
	if (x->self != y->self)
		return x->self < y->self ? 1 : -1;
	return x->total < y->total ? 1 : x->total > y->total ? -1 : 0;
}

/* Weights by (operator, caller location): op << 32 | loc, in `e` by the index the map gives. */
typedef struct callers {
	ana_map idx;
	struct caller_w { uint64_t key, w; } *e;
	size_t n, cap;
} callers;

static int callers_add(callers *c, uint64_t key, uint64_t w)
{
	uint32_t k = ana_map_get(&c->idx, key);
	if (k == ANA_NONE) {
		if (c->n >= UINT32_MAX - 1 || ana_grow(&c->e, &c->cap, c->n, sizeof *c->e) < 0 ||
		    ana_map_put(&c->idx, key, (uint32_t)c->n) < 0)
			return -1;
		k = (uint32_t)c->n;
		c->e[c->n++].key = key;
	}
	c->e[k].w += w;
	return 0;
}

/* A call that gives the CPU up for a moment (a worker that calls it in a loop is idle). */
static int yield_name(const char *name)
{
	return !strcmp(name, "__sched_yield") || !strcmp(name, "sched_yield") || !strcmp(name, "pthread_yield") ||
	       !strcmp(name, "thrd_yield");
}

typedef struct anchor {
	uint64_t t;
	uint32_t process, module, sample;
} anchor;

static int cmp_anchor(const void *a, const void *b)
{
	const anchor *x = a, *y = b;
	if (x->process != y->process)
		return x->process < y->process ? -1 : 1;
	if (x->module != y->module)
		return x->module < y->module ? -1 : 1;
	return x->t < y->t ? -1 : x->t > y->t;
}

/* The anchor of (proc, mod) nearest to t, within w ns; NULL if none. */
static const anchor *nearest(const anchor *a, size_t n, uint32_t proc, uint32_t mod, uint64_t t, uint64_t w)
{
	anchor key = {t, proc, mod, 0};
	size_t lo = 0, hi = n; /* the first anchor not before key */
	while (lo < hi) {
		size_t m = lo + (hi - lo) / 2;
		if (cmp_anchor(&a[m], &key) < 0)
			lo = m + 1;
		else
			hi = m;
	}
	const anchor *best = NULL;
	uint64_t bd = w + 1;
	if (lo < n && a[lo].process == proc && a[lo].module == mod && a[lo].t - t < bd)
		best = &a[lo], bd = a[lo].t - t;
	if (lo > 0 && a[lo - 1].process == proc && a[lo - 1].module == mod && t - a[lo - 1].t < bd)
		best = &a[lo - 1];
	return best;
}

/* The C library and the loader, whose frames begin every thread. */
static int system_lib(const char *path)
{
	const char *b = strrchr(path, '/');
	b = b ? b + 1 : path;
	return !strncmp(b, "libc.so", 7) || !strncmp(b, "libc-", 5) || !strncmp(b, "libpthread", 10) ||
	       !strncmp(b, "ld-linux", 8) || !strncmp(b, "libgcc_s", 8);
}

/* The module of a stack's outermost frame outside the C library: for a library's own
 * thread, the library that started it (libopenblas's worker loop). ANA_NONE if none. */
static uint32_t owner_module(const ana_profile *p, const ana_stack *st)
{
	const ana_sampling *s = &p->smp;
	for (uint32_t k = 0; k < st->n; k++) {
		uint32_t m = s->funcs[s->locs[st->locs[k]].func].module;
		if (m != ANA_NONE && !system_lib(p->names[m]))
			return m;
	}
	return ANA_NONE;
}

/*
 * The work of a library's own threads (OpenBLAS's workers computing an sgemm that
 * aten::addmm handed them): no operator is on their stacks, which begin at the thread's
 * start. A sample of a thread that never has an operator or a Python frame, that is not
 * idle (its innermost function is not a yield, nor a function seen calling one: the loop
 * of a worker waiting for work), goes to the innermost operator of the nearest sample, on
 * another thread of the process, that has an operator and a frame of the library that
 * owns the worker (its outermost frame outside the C library), within 2.5 sampling
 * periods (at least 2 ms): the operator that handed the library the work. A worker
 * sample with no such sample near it stays without an operator. Its weight counts in that
 * operator's self and `worker` weight, and in the total of every operator on that stack.
 */
static int attribute_workers(ana_profile *p, const uint32_t *fop, const uint32_t *inner)
{
	ana_sampling *s = &p->smp;
	int rc = FENNEC_ENOMEM;
	uint8_t *tflag = calloc((size_t)p->nthreads + 1, 1); /* 1: an operator or Python seen */
	uint8_t *fflag = calloc(s->nfuncs, 1);               /* 1: yield, 2: calls one */
	uint8_t *sflag = calloc(s->nstacks, 1);              /* 1: Python frame, 2: idle leaf */
	uint32_t *seen = calloc(p->nops, sizeof *seen);
	anchor *a = NULL;
	size_t na = 0, cap = 0;
	if (!tflag || !fflag || !sflag || !seen)
		goto out;
	for (uint32_t i = 0; i < s->nfuncs; i++)
		if (yield_name(p->names[s->funcs[i].name]))
			fflag[i] = 1;
	for (uint32_t i = 0; i < s->nstacks; i++) {
		const ana_stack *st = &s->stacks[i];
		for (uint32_t k = 0; k < st->n; k++)
			if (s->funcs[s->locs[st->locs[k]].func].lang == ANA_LANG_PYTHON)
				sflag[i] |= 1;
		if (st->n >= 2 && fflag[s->locs[st->locs[st->n - 1]].func] == 1)
			fflag[s->locs[st->locs[st->n - 2]].func] |= 2;
	}
	for (uint32_t i = 0; i < s->nstacks; i++) {
		const ana_stack *st = &s->stacks[i];
		if (st->n && fflag[s->locs[st->locs[st->n - 1]].func])
			sflag[i] |= 2;
	}
	for (size_t si = 0; si < s->nsamples; si++) {
		const ana_sample *sm = &s->samples[si];
		if (sm->kind != ANA_CPU || sm->stack >= s->nstacks || sm->thread >= p->nthreads)
			continue;
		if (inner[sm->stack] != ANA_NONE || (sflag[sm->stack] & 1))
			tflag[sm->thread] = 1;
		if (inner[sm->stack] == ANA_NONE)
			continue;
		/* one anchor for each library on the stack (each once) */
		const ana_stack *st = &s->stacks[sm->stack];
		for (uint32_t k = 0; k < st->n; k++) {
			uint32_t m = s->funcs[s->locs[st->locs[k]].func].module, dup = 0;
			for (uint32_t q = 0; q < k && !dup; q++)
				dup = s->funcs[s->locs[st->locs[q]].func].module == m;
			if (m == ANA_NONE || dup)
				continue;
			if (ana_grow(&a, &cap, na, sizeof *a) < 0)
				goto out;
			a[na++] = (anchor){sm->t_ns, p->threads[sm->thread].process, m, (uint32_t)si};
		}
	}
	rc = 0;
	if (!na)
		goto out;
	qsort(a, na, sizeof *a, cmp_anchor);
	uint64_t w = s->period_ns * 5 / 2;
	if (w < 2000000)
		w = 2000000;
	for (size_t si = 0; si < s->nsamples; si++) {
		const ana_sample *sm = &s->samples[si];
		if (sm->kind != ANA_CPU || sm->stack >= s->nstacks || sm->thread >= p->nthreads ||
		    tflag[sm->thread] || (sflag[sm->stack] & 2) || !s->stacks[sm->stack].n)
			continue;
		uint32_t m = owner_module(p, &s->stacks[sm->stack]);
		const anchor *x = m == ANA_NONE ? NULL : nearest(a, na, p->threads[sm->thread].process, m, sm->t_ns, w);
		if (!x)
			continue;
		const ana_sample *as = &s->samples[x->sample];
		const ana_stack *st = &s->stacks[as->stack];
		ana_op *op = &p->ops[inner[as->stack]];
		op->self += sm->weight;
		op->worker += sm->weight;
		for (uint32_t k = 0; k < st->n; k++) {
			uint32_t o = fop[s->locs[st->locs[k]].func];
			if (o == ANA_NONE || seen[o] == si + 1)
				continue;
			seen[o] = (uint32_t)(si + 1);
			p->ops[o].total += sm->weight;
		}
	}
out:
	free(tflag);
	free(fflag);
	free(sflag);
	free(seen);
	free(a);
	return rc;
}

int ana_operators(ana_profile *p)
{
	ana_sampling *s = &p->smp;
	if (!s->nstacks || !s->nfuncs)
		return 0;
	int rc = FENNEC_ENOMEM;
	uint32_t *fop = malloc(s->nfuncs * sizeof *fop);     /* function -> operator, ANA_NONE */
	uint32_t *inner = malloc(s->nstacks * sizeof *inner); /* stack -> innermost operator */
	uint32_t *seen = NULL;
	uint64_t *prev_stack = NULL;
	callers cl = {0};
	size_t ops_cap = 0;
	if (!fop || !inner)
		goto out;
	char buf[512];
	for (uint32_t i = 0; i < s->nfuncs; i++) {
		fop[i] = ANA_NONE;
		if (s->funcs[i].lang != ANA_LANG_NATIVE || !op_name(p->names[s->funcs[i].name], buf, sizeof buf))
			continue;
		uint32_t nm = ana_intern(p, buf);
		if (nm == ANA_NONE)
			goto out;
		uint32_t k = 0;
		while (k < p->nops && p->ops[k].name != nm)
			k++;
		if (k == p->nops) {
			if (ana_grow(&p->ops, &ops_cap, p->nops, sizeof *p->ops) < 0)
				goto out;
			p->ops[p->nops++] = (ana_op){.name = nm, .caller = ANA_NONE};
		}
		fop[i] = k;
	}
	if (!p->nops) {
		rc = 0;
		goto out;
	}
	/* per stack: its innermost operator */
	for (uint32_t i = 0; i < s->nstacks; i++) {
		const ana_stack *st = &s->stacks[i];
		inner[i] = ANA_NONE;
		for (uint32_t k = st->n; k-- > 0;) {
			uint32_t o = fop[s->locs[st->locs[k]].func];
			if (o != ANA_NONE) {
				inner[i] = o;
				break;
			}
		}
	}
	seen = calloc(p->nops, sizeof *seen);           /* stamp: sample index + 1 */
	prev_stack = calloc((size_t)p->nthreads + 1, sizeof *prev_stack); /* thread -> last stack + 1 */
	if (!seen || !prev_stack)
		goto out;
	for (size_t si = 0; si < s->nsamples; si++) {
		const ana_sample *sm = &s->samples[si];
		if (sm->kind != ANA_CPU || sm->stack >= s->nstacks)
			continue;
		const ana_stack *st = &s->stacks[sm->stack];
		uint32_t th = sm->thread < p->nthreads ? sm->thread : p->nthreads;
		uint64_t before = prev_stack[th];
		prev_stack[th] = (uint64_t)sm->stack + 1;
		if (inner[sm->stack] == ANA_NONE)
			continue;
		p->ops[inner[sm->stack]].self += sm->weight;
		/* every operator once (outermost frame first: its caller is outside it) */
		for (uint32_t k = 0; k < st->n; k++) {
			uint32_t o = fop[s->locs[st->locs[k]].func];
			if (o == ANA_NONE || seen[o] == si + 1)
				continue;
			seen[o] = (uint32_t)(si + 1);
			ana_op *op = &p->ops[o];
			op->total += sm->weight;
			/* a call seen: the thread's previous sample was not inside this operator */
			int cont = 0;
			if (before) {
				const ana_stack *ps = &s->stacks[before - 1];
				for (uint32_t q = 0; q < ps->n && !cont; q++)
					cont = fop[s->locs[ps->locs[q]].func] == o;
			}
			if (!cont)
				op->calls_seen++;
			for (uint32_t q = k; q-- > 0;)
				if (s->funcs[s->locs[st->locs[q]].func].lang == ANA_LANG_PYTHON) {
					if (callers_add(&cl, (uint64_t)o << 32 | st->locs[q], sm->weight) < 0)
						goto out;
					break;
				}
		}
	}
	if (attribute_workers(p, fop, inner) < 0)
		goto out;
	/* each operator's heaviest caller */
	uint64_t *best = calloc(p->nops, sizeof *best);
	if (!best)
		goto out;
	for (size_t i = 0; i < cl.n; i++) {
		uint32_t o = (uint32_t)(cl.e[i].key >> 32), loc = (uint32_t)cl.e[i].key;
		if (cl.e[i].w > best[o] || (cl.e[i].w == best[o] && loc < p->ops[o].caller)) {
			best[o] = cl.e[i].w;
			p->ops[o].caller = loc;
		}
	}
	free(best);
	double cpu = (double)s->all.weight[ANA_CPU];
	for (uint32_t i = 0; i < p->nops; i++) {
		p->ops[i].self_pct = cpu > 0 ? 100.0 * (double)p->ops[i].self / cpu : 0;
		p->ops[i].total_pct = cpu > 0 ? 100.0 * (double)p->ops[i].total / cpu : 0;
	}
	qsort(p->ops, p->nops, sizeof *p->ops, cmp_op);
	rc = 0;
out:
	free(fop);
	free(inner);
	free(seen);
	free(prev_stack);
	free(cl.e);
	ana_map_clear(&cl.idx);
	return rc;
}

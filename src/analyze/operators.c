/*
 * operators.c - the PyTorch operator table, built from the sampled stacks once they are
 * symbolised (docs/python.md, "PyTorch operators"): each stack's operator frames (aten
 * operators' dispatcher entries, autograd nodes), the innermost one taking the sample's
 * self weight, every one its total, and the nearest Python frame outside an operator's
 * outermost frame as its caller.
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
		snprintf(buf, n, "aten::%.*s", (int)(e - a), a);
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
			p->ops[p->nops++] = (ana_op){nm, 0, 0, 0, 0, 0, ANA_NONE};
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

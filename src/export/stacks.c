/*
 * stacks.c - the selected samples summed per distinct stack (and, when asked, per thread
 * and region), with the frames of each: what the collapsed-stack and flame-graph
 * exporters draw. Memory grows with the distinct stacks, not with the samples. Memory
 * flame graphs sum the heap profile's allocation sites here the same way (memory.c).
 */
#include "export/internal.h"

#include <stdio.h>
#include <stdlib.h>

static int cmp_agg(const void *a, const void *b)
{
	const exp_agg *x = a, *y = b;
	if (x->thread != y->thread)
		return x->thread < y->thread ? -1 : 1;
	if (x->node != y->node)
		return x->node < y->node ? -1 : 1;
	return (x->stack > y->stack) - (x->stack < y->stack);
}

int exp_aggregate(const ana_profile *p, const exp_options *o, exp_agg **out, size_t *nout, uint64_t *total)
{
	exp_sel sel;
	exp_map m = {0};
	exp_agg *a = NULL;
	size_t n = 0;
	uint64_t sum = 0;
	*out = NULL;
	*nout = 0;
	*total = 0;
	int rc = exp_sel_init(&sel, p, o);
	/* Samples, or allocation sites (which have no thread); either way one pass that
	 * picks (stack, node, thread, weight) and sums the weights per key. */
	size_t count = o->memory ? p->mem.nsites : p->smp.nsamples;
	for (size_t i = 0; i < count && !rc; i++) {
		uint32_t stack, node, thread = ANA_NONE;
		uint64_t w;
		if (o->memory) {
			const ana_mem_site *x = &p->mem.sites[i];
			if (!exp_sel_site(&sel, x) || !(w = exp_site_bytes(x, o->memory, NULL)))
				continue;
			stack = x->stack, node = x->node;
		} else {
			const ana_sample *x = &p->smp.samples[i];
			if (!exp_sel_sample(&sel, x))
				continue;
			stack = x->stack, node = x->node, thread = x->thread, w = exp_weight(x);
		}
		node = o->prefix_region ? node : ANA_NONE;
		thread = o->prefix_thread ? thread : ANA_NONE;
		uint64_t *v = exp_map_put(&m, (uint64_t)stack, (uint64_t)node << 32 | thread, NULL);
		if (!v) {
			rc = FENNEC_ENOMEM;
			break;
		}
		*v += w;
		sum += w;
	}
	if (!rc && m.n) {
		a = malloc(m.n * sizeof *a);
		if (!a)
			rc = FENNEC_ENOMEM;
		else
			for (size_t i = 0; i < m.cap; i++)
				if (m.used[i])
					a[n++] = (exp_agg){(uint32_t)m.keys[2 * i], (uint32_t)(m.keys[2 * i + 1] >> 32),
							   (uint32_t)m.keys[2 * i + 1], m.vals[i]};
		if (a)
			qsort(a, n, sizeof *a, cmp_agg);
	}
	exp_map_free(&m);
	exp_sel_fini(&sel);
	if (rc) {
		free(a);
		return rc;
	}
	*out = a;
	*nout = n;
	*total = sum;
	return 0;
}

size_t exp_agg_frames(const ana_profile *p, const exp_agg *a, exp_frame *f, size_t cap)
{
	size_t n = 0;
	if (a->thread != ANA_NONE) {
		if (n < cap)
			f[n] = (exp_frame){EXP_F_THREAD, a->thread};
		n++;
	}
	if (a->node != ANA_NONE && a->node < p->nnodes) {
		/* The node's path from the top: count the depth, then fill from the end. */
		size_t depth = 0;
		for (uint32_t k = a->node; k != ANA_NONE && k < p->nnodes && depth <= FMT_MAX_REGIONS; k = p->nodes[k].parent)
			depth++;
		size_t i = n + depth;
		for (uint32_t k = a->node; k != ANA_NONE && k < p->nnodes && i > n; k = p->nodes[k].parent) {
			i--;
			if (i < cap)
				f[i] = (exp_frame){EXP_F_REGION, p->nodes[k].name};
		}
		n += depth;
	}
	const ana_stack *s = a->stack < p->smp.nstacks ? &p->smp.stacks[a->stack] : NULL;
	for (uint32_t j = 0; s && j < s->n; j++) {
		uint32_t loc = s->locs[j];
		if (n < cap)
			f[n] = (exp_frame){EXP_F_FUNC, loc < p->smp.nlocs ? p->smp.locs[loc].func : ANA_NONE};
		n++;
	}
	return n;
}

size_t exp_agg_frames_grow(const ana_profile *p, const exp_agg *a, exp_frame **f, size_t *cap)
{
	size_t n = exp_agg_frames(p, a, *f, *cap);
	if (n > *cap) {
		exp_frame *g = realloc(*f, n * sizeof *g);
		if (!g)
			return SIZE_MAX;
		*f = g;
		*cap = n;
		exp_agg_frames(p, a, g, n);
	}
	return n;
}

const char *exp_frame_name(const ana_profile *p, const exp_frame *f, char *buf, size_t n)
{
	switch (f->kind) {
	case EXP_F_THREAD:
		snprintf(buf, n, "%s [%llu]", exp_thread_name(p, f->id), (unsigned long long)exp_thread_tid(p, f->id));
		return buf;
	case EXP_F_REGION:
		snprintf(buf, n, "{%s}", f->id < p->nnames ? p->names[f->id] : "?");
		return buf;
	default:
		return exp_func_name(p, f->id);
	}
}

/*
 * sketch.c - the log-bucket duration histogram of sketch.h. A bucket above 64 spans
 * 2^(e-6) values starting at a multiple of it no smaller than 64 times it, so its middle
 * is within 1/128 (0.78 %) of every value in it: a percentile read from the bucket the
 * rank falls in is that close to the exact nearest-rank value.
 */
#include "analyze/sketch.h"
#include "analyze/analyze.h"
#include "common/common.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

ana_sketch *ana_sketch_from(const uint64_t *v, size_t n)
{
	ana_sketch *s = calloc(1, sizeof *s);
	if (!s)
		return NULL;
	s->min = UINT64_MAX;
	s->lo = ANA_SKETCH_BUCKETS - 1;
	s->shift = n ? (double)v[0] : 0;
	for (size_t i = 0; i < n; i++)
		ana_sketch_add(s, v[i]);
	return s;
}

/* The middle of bucket b's values, a whole number as the durations are. */
static double bucket_mid(uint32_t b)
{
	if (b < ANA_SKETCH_SUB)
		return (double)b;
	uint32_t sh = (b - ANA_SKETCH_SUB) / ANA_SKETCH_SUB, sub = (b - ANA_SKETCH_SUB) % ANA_SKETCH_SUB;
	uint64_t lo = (uint64_t)(ANA_SKETCH_SUB + sub) << sh, width = (uint64_t)1 << sh;
	return (double)(lo + width / 2); /* width 1: the value itself */
}

double ana_sketch_quantile(const ana_sketch *s, double q)
{
	if (!s->count)
		return 0;
	uint64_t r = (uint64_t)ceil(q * (double)s->count);
	uint64_t k = r ? r - 1 : 0, seen = 0;
	for (uint32_t b = s->lo; b <= s->hi; b++) {
		seen += s->counts[b];
		if (seen > k) {
			double m = bucket_mid(b);
			return m < (double)s->min ? (double)s->min : m > (double)s->max ? (double)s->max : m;
		}
	}
	return (double)s->max;
}

void ana_sketch_dist(const ana_sketch *s, ana_dist *d)
{
	memset(d, 0, sizeof *d);
	d->count = s->count;
	if (!s->count)
		return;
	double n = (double)s->count, m = s->dsum / n, var = s->dsq / n - m * m;
	d->total = s->sum;
	d->mean = s->sum / n;
	d->std = var > 0 ? sqrt(var) : 0;
	d->min = (double)s->min;
	d->max = (double)s->max;
	d->p50 = ana_sketch_quantile(s, 0.50);
	d->p95 = ana_sketch_quantile(s, 0.95);
	d->p99 = ana_sketch_quantile(s, 0.99);
}

/* Algorithm R: the k-th call (k = the sketch's count, this one included) replaces a
 * uniformly chosen one of the n kept with probability n / k, so that every call seen is
 * in the sample with the same probability. The generator is the node's own (a Weyl
 * sequence through cm_mix64, from a fixed seed): the same recording gives the same sample, and so the same test. */
void ana_durations_sample(ana_node *n, uint64_t v)
{
	uint64_t k = n->sketch->count;
	uint64_t z = cm_mix64(n->sample_rng += 0x9E3779B97F4A7C15ull);
	uint64_t j = (uint64_t)(((unsigned __int128)z * k) >> 64); /* uniform in [0, k) */
	if (j < n->durations.n)
		n->durations.v[j] = v;
}

/* The slow path of ana_durations_add: the node's exact array is full. It grows while the
 * node's and the profile's budgets allow, else the node turns to a sketch of what it held;
 * with keep_durations (compare tests the calls themselves) the budgets are larger and the
 * array stays, as a uniform sample of the node's calls (ana_durations_sample). */
int ana_durations_grow(ana_profile *p, ana_node *n, uint64_t v)
{
	ana_u64vec *a = &n->durations;
	size_t cap = a->cap ? a->cap * 2 : 16;
	int grow = p->opt.keep_durations
			   ? cap <= ANA_EXACT_PER_NODE && (cap <= ANA_KEEP_MIN || p->exact_held + (cap - a->cap) <= ANA_KEEP_TOTAL)
			   : cap <= ANA_EXACT_PER_NODE && p->exact_held + (cap - a->cap) <= ANA_EXACT_TOTAL;
	if (grow) {
		uint64_t *nv = realloc(a->v, cap * sizeof *nv);
		if (!nv)
			return -1;
		p->exact_held += cap - a->cap;
		a->v = nv;
		a->cap = cap;
		a->v[a->n++] = v;
		return 0;
	}
	if (!(n->sketch = ana_sketch_from(a->v, a->n)))
		return -1;
	ana_sketch_add(n->sketch, v);
	if (p->opt.keep_durations && a->n) {
		n->sample_rng = 0x5EED0F5A3D1E5ull; /* the same for every node: a node's sample depends on its calls only */
		ana_durations_sample(n, v);
		return 0;
	}
	p->exact_held -= a->cap;
	free(a->v);
	a->v = NULL;
	a->n = a->cap = 0;
	return 0;
}

/*
 * sketch.h - per-call durations in bounded memory: exact values up to a budget, then a
 * log-bucket histogram (HDR-style: 64 linear sub-buckets per power of two) whose
 * percentiles are within 0.8 % (relative) of the exact nearest-rank value. Count, total,
 * mean, min and max stay exact; the standard deviation is computed from running sums.
 */
#ifndef FENNEC_ANALYZE_SKETCH_H
#define FENNEC_ANALYZE_SKETCH_H

#include "analyze/analyze.h"

#include <stddef.h>
#include <stdint.h>

#define ANA_SKETCH_SUB_BITS 6
#define ANA_SKETCH_SUB (1u << ANA_SKETCH_SUB_BITS)
/* values below ANA_SKETCH_SUB have a bucket each; above, 64 per power of two up to 2^64 */
#define ANA_SKETCH_BUCKETS (ANA_SKETCH_SUB + (64 - ANA_SKETCH_SUB_BITS) * ANA_SKETCH_SUB)

/* The exact values one region node keeps before it turns to a sketch, and all nodes
 * together (a node whose next value would pass the total turns to a sketch then). */
#define ANA_EXACT_PER_NODE (1u << 20)
#define ANA_EXACT_TOTAL (1u << 24)
/* With keep_durations (compare tests the calls themselves) a node keeps every call up to
 * ANA_EXACT_PER_NODE while all nodes together hold under ANA_KEEP_TOTAL, and at least
 * ANA_KEEP_MIN; past that it keeps a uniform random sample of its calls of that size
 * (reservoir sampling; every node's generator starts from the same seed) beside the sketch of all of them. */
#define ANA_KEEP_TOTAL (1u << 25)
#define ANA_KEEP_MIN (1u << 14)

typedef struct ana_sketch {
	uint64_t count, min, max;
	double sum;        /* in the order the values came, as the exact statistics add them */
	double shift;      /* the first value: the sums below are of v - shift (no cancellation) */
	double dsum, dsq;
	uint32_t lo, hi;   /* buckets [lo, hi] may be non-zero */
	uint64_t counts[ANA_SKETCH_BUCKETS];
} ana_sketch;

static inline uint32_t ana_sketch_bucket(uint64_t v)
{
	if (v < ANA_SKETCH_SUB)
		return (uint32_t)v;
	unsigned e = 63u - (unsigned)__builtin_clzll(v); /* >= ANA_SKETCH_SUB_BITS */
	unsigned sh = e - ANA_SKETCH_SUB_BITS;
	return ANA_SKETCH_SUB + sh * ANA_SKETCH_SUB + (uint32_t)((v >> sh) & (ANA_SKETCH_SUB - 1));
}

static inline void ana_sketch_add(ana_sketch *s, uint64_t v)
{
	uint32_t b = ana_sketch_bucket(v);
	s->counts[b]++;
	if (b < s->lo)
		s->lo = b;
	if (b > s->hi)
		s->hi = b;
	if (v < s->min)
		s->min = v;
	if (v > s->max)
		s->max = v;
	s->count++;
	s->sum += (double)v;
	double d = (double)v - s->shift;
	s->dsum += d;
	s->dsq += d * d;
}

/* A sketch holding the n values v (in that order), or NULL without memory. */
ana_sketch *ana_sketch_from(const uint64_t *v, size_t n);
/* Count, total, mean, std, min, max and the p50/p95/p99 of what s holds. */
void ana_sketch_dist(const ana_sketch *s, ana_dist *d);
/* The value the nearest-rank percentile q (0, 1] falls on: its bucket's middle, clamped
 * to [min, max]; exact below ANA_SKETCH_SUB. */
double ana_sketch_quantile(const ana_sketch *s, double q);

/* One call's duration into region node n: exact while the budget allows, else the sketch
 * (and, with keep_durations, the node's sample of its calls). Returns -1 without memory. */
int ana_durations_grow(ana_profile *p, ana_node *n, uint64_t v);
void ana_durations_sample(ana_node *n, uint64_t v);
static inline int ana_durations_add(ana_profile *p, ana_node *n, uint64_t v)
{
	if (n->sketch) {
		ana_sketch_add(n->sketch, v);
		if (n->durations.n)
			ana_durations_sample(n, v);
		return 0;
	}
	if (n->durations.n < n->durations.cap) {
		n->durations.v[n->durations.n++] = v;
		return 0;
	}
	return ana_durations_grow(p, n, v);
}

#endif

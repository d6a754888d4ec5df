/*
 * test_sketch.c - unit tests of the duration histogram (src/analyze/sketch.c): on skewed,
 * spread and tiny-valued data its p50/p95/p99 are within the 0.8 % docs/json.md promises of
 * the exact nearest-rank values (ana_dist_compute_u64), its count, total, mean, min and max
 * are exact and its std is close; and a node turns from exact to sketch at its budget
 * (ana_durations_add), with the values it held carried over.
 */
#include <math.h>
#include <stdlib.h>

#include "analyze/analyze.h"
#include "analyze/sketch.h"
#include "unit.h"

static uint64_t rng = 0x9e3779b97f4a7c15ull;
static uint64_t next(void)
{
	rng ^= rng << 13;
	rng ^= rng >> 7;
	rng ^= rng << 17;
	return rng;
}

static int rel_ok(double got, double want, double rel)
{
	return fabs(got - want) <= rel * fabs(want) + 1e-9;
}

/* n values from gen, the sketch's statistics against the exact ones. */
static void check_against_exact(int *unit_failures, uint64_t (*gen)(void), size_t n)
{
	uint64_t *v = malloc(n * sizeof *v);
	UNIT_CHECK(v != NULL);
	if (!v)
		return;
	for (size_t i = 0; i < n; i++)
		v[i] = gen();
	ana_sketch *s = ana_sketch_from(v, n);
	UNIT_CHECK(s != NULL);
	ana_dist e, d;
	ana_dist_compute_u64(&e, v, n); /* reorders v: after the sketch */
	ana_sketch_dist(s, &d);
	UNIT_CHECK_EQ(d.count, e.count);
	UNIT_CHECK(d.total == e.total && d.mean == e.mean && d.min == e.min && d.max == e.max);
	UNIT_CHECK(rel_ok(d.std, e.std, 1e-6));
	UNIT_CHECK(rel_ok(d.p50, e.p50, 1.0 / 128));
	UNIT_CHECK(rel_ok(d.p95, e.p95, 1.0 / 128));
	UNIT_CHECK(rel_ok(d.p99, e.p99, 1.0 / 128));
	if (!rel_ok(d.p99, e.p99, 1.0 / 128) || !rel_ok(d.p50, e.p50, 1.0 / 128))
		printf("    p50 %g/%g p95 %g/%g p99 %g/%g\n", d.p50, e.p50, d.p95, e.p95, d.p99, e.p99);
	free(s);
	free(v);
}

static uint64_t gen_lognormal(void) /* a long tail: 1 us to ~1 s */
{
	double u = (double)(next() >> 11) / 9007199254740992.0, w = (double)(next() >> 11) / 9007199254740992.0;
	double z = sqrt(-2 * log(u + 1e-300)) * cos(6.283185307179586 * w);
	return (uint64_t)exp(9 + 2.5 * z);
}
static uint64_t gen_small(void) { return next() % 300; }            /* exact buckets and the first octaves */
static uint64_t gen_wide(void) { return next() >> (next() % 60); }  /* every octave to 2^64 */

UNIT_TEST(sketch_percentiles_within_error)
{
	check_against_exact(unit_failures, gen_lognormal, 200000);
	check_against_exact(unit_failures, gen_small, 100000);
	check_against_exact(unit_failures, gen_wide, 100000);
	/* below 64 every value has its bucket: exact */
	uint64_t v[] = {5, 3, 9, 1, 63, 0, 7};
	ana_sketch *s = ana_sketch_from(v, 7);
	UNIT_CHECK(s != NULL);
	if (s) {
		UNIT_CHECK(ana_sketch_quantile(s, 0.5) == 5 && ana_sketch_quantile(s, 1.0) == 63 &&
			   ana_sketch_quantile(s, 0.01) == 0);
		free(s);
	}
}

UNIT_TEST(sketch_node_budget)
{
	ana_profile p;
	memset(&p, 0, sizeof p);
	ana_node n;
	memset(&n, 0, sizeof n);
	uint64_t calls = ANA_EXACT_PER_NODE + 1000;
	for (uint64_t i = 0; i < calls; i++)
		UNIT_CHECK_EQ(ana_durations_add(&p, &n, 1000 + i % 5000), 0);
	UNIT_CHECK(n.sketch != NULL);
	UNIT_CHECK(n.durations.v == NULL && n.durations.n == 0);
	UNIT_CHECK_EQ(p.exact_held, 0);
	if (n.sketch) {
		UNIT_CHECK_EQ(n.sketch->count, calls);
		UNIT_CHECK_EQ(n.sketch->min, 1000);
		UNIT_CHECK_EQ(n.sketch->max, 5999);
	}
	free(n.sketch);
	/* keep_durations (compare): every call stays exact up to the node's budget */
	memset(&n, 0, sizeof n);
	p.opt.keep_durations = 1;
	for (uint64_t i = 0; i < calls; i++)
		UNIT_CHECK_EQ(ana_durations_add(&p, &n, i), 0);
	UNIT_CHECK(n.sketch != NULL);
	UNIT_CHECK_EQ(n.durations.n, ANA_EXACT_PER_NODE);
	free(n.durations.v);
	free(n.sketch);
}

/* Past its budget a kept node holds a uniform sample of its calls: calls 0..N-1 in order,
 * so a sample biased to the first calls (no replacement) or to the last (replacing too
 * often) shows in its mean and in the share drawn from each quarter. */
UNIT_TEST(sketch_keep_durations_sample)
{
	ana_profile p;
	memset(&p, 0, sizeof p);
	p.opt.keep_durations = 1;
	ana_node n;
	memset(&n, 0, sizeof n);
	uint64_t calls = 4ull * ANA_EXACT_PER_NODE;
	for (uint64_t i = 0; i < calls; i++)
		UNIT_CHECK_EQ(ana_durations_add(&p, &n, i), 0);
	UNIT_CHECK(n.sketch != NULL);
	UNIT_CHECK_EQ(n.durations.n, ANA_EXACT_PER_NODE);
	if (n.sketch) {
		UNIT_CHECK_EQ(n.sketch->count, calls);
		UNIT_CHECK_EQ(n.sketch->max, calls - 1);
	}
	double sum = 0;
	uint64_t quarter[4] = {0};
	for (size_t i = 0; i < n.durations.n; i++) {
		sum += (double)n.durations.v[i];
		quarter[n.durations.v[i] * 4 / calls]++;
	}
	double mean = sum / (double)n.durations.n, want = (double)(calls - 1) / 2;
	/* the sample mean's standard error is calls / sqrt(12 n): 0.03 % of calls here */
	UNIT_CHECK(fabs(mean - want) < 0.005 * (double)calls);
	for (int q = 0; q < 4; q++)
		UNIT_CHECK(fabs((double)quarter[q] / (double)n.durations.n - 0.25) < 0.005);
	free(n.durations.v);
	free(n.sketch);
	/* all nodes' budget spent: a further node keeps ANA_KEEP_MIN calls */
	memset(&n, 0, sizeof n);
	p.exact_held = ANA_KEEP_TOTAL;
	for (uint64_t i = 0; i < 100000; i++)
		UNIT_CHECK_EQ(ana_durations_add(&p, &n, i), 0);
	UNIT_CHECK(n.sketch != NULL);
	UNIT_CHECK_EQ(n.durations.n, ANA_KEEP_MIN);
	free(n.durations.v);
	free(n.sketch);
}

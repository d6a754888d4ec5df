/*
 * test_compare.c - unit tests of the comparison of two recordings (src/analyze/compare.c):
 * the Mann-Whitney U test and the two-proportion test against published reference values,
 * the bootstrap interval's properties (exact cases, coverage of the true ratio, the same
 * interval for the same seed), and ana_compare() on two profiles built by hand whose
 * regions, functions and findings differ in known ways.
 */
#include <math.h>
#include <stdlib.h>

#include "analyze/compare.h"
#include "unit.h"

#define CHECK_NEAR(got, want, tol)                                                                   \
	do {                                                                                         \
		double g_ = (got), w_ = (want);                                                      \
		if (!(fabs(g_ - w_) <= (tol))) {                                                     \
			printf("    %s:%d: %s: got %.10g, expected %.10g +- %g\n", __FILE__, __LINE__, #got, g_, \
			       w_, (double)(tol));                                                   \
			(*unit_failures)++;                                                          \
		}                                                                                    \
	} while (0)

UNIT_TEST(compare_mann_whitney)
{
	double u;
	/* scipy.stats.mannwhitneyu documentation (diagnosis ages, males against females): U = 17;
	 * with method="asymptotic" (continuity-corrected normal approximation) p = 0.1113. */
	double males[] = {19, 22, 16, 29, 24}, females[] = {20, 11, 17, 12};
	CHECK_NEAR(ana_mann_whitney(males, 5, females, 4, &u), 0.11134688653314, 1e-12);
	CHECK_NEAR(u, 17, 0);
	/* With ties (two 5s, two 4s): DolphinDB's mannWhitneyUTest documentation gives U = 11
	 * for the second sample (so 30 - 11 = 19 for the first) and p = 0.518023. */
	double x[] = {5, 1, 4, 3, 5}, y[] = {2, 4, 7, -1, 0, 4};
	CHECK_NEAR(ana_mann_whitney(x, 5, y, 6, &u), 0.518023, 2e-6);
	CHECK_NEAR(u, 19, 0);
	/* By hand: complete separation of 5 and 5, U = 0, mean 12.5, sigma = sqrt(25 * 11 / 12),
	 * z = (12.5 - 0.5) / sigma = 2.50672, p = erfc(z / sqrt 2) = 0.0121858. */
	double lo[] = {1, 2, 3, 4, 5}, hi[] = {6, 7, 8, 9, 10};
	CHECK_NEAR(ana_mann_whitney(lo, 5, hi, 5, &u), 0.012185780355, 1e-10);
	CHECK_NEAR(u, 0, 0);
	/* Symmetric in its arguments; U of the other side is nx * ny - U. */
	CHECK_NEAR(ana_mann_whitney(hi, 5, lo, 5, &u), 0.012185780355, 1e-10);
	CHECK_NEAR(u, 25, 0);
	/* All equal: no evidence of anything. Empty: no test. */
	double same[] = {3, 3, 3, 3};
	CHECK_NEAR(ana_mann_whitney(same, 4, same, 4, NULL), 1, 0);
	UNIT_CHECK(isnan(ana_mann_whitney(same, 0, same, 4, NULL)));
	/* A sample against itself: U at its mean, p = 1 after the continuity correction. */
	CHECK_NEAR(ana_mann_whitney(males, 5, males, 5, NULL), 1, 1e-12);
}

UNIT_TEST(compare_two_proportion)
{
	/* 45/100 against 60/100: pooled 0.525, z = 2.12398, p = 0.033672 (R: prop.test(c(45, 60),
	 * c(100, 100), correct = FALSE) gives X-squared = z^2 = 4.5113, p-value = 0.03367). */
	CHECK_NEAR(ana_two_proportion(45, 100, 60, 100), 0.033672068856, 1e-10);
	CHECK_NEAR(ana_two_proportion(60, 100, 45, 100), 0.033672068856, 1e-10);
	CHECK_NEAR(ana_two_proportion(30, 100, 30, 100), 1, 1e-12);
	CHECK_NEAR(ana_two_proportion(0, 100, 0, 50), 1, 0);
	UNIT_CHECK(isnan(ana_two_proportion(1, 0, 1, 10)));
}

/* Deterministic noise for the tests: xorshift, uniform in [0, 1). */
static double noise(uint64_t *s)
{
	*s ^= *s << 13, *s ^= *s >> 7, *s ^= *s << 17;
	return (double)(*s >> 11) / 9007199254740992.0;
}

UNIT_TEST(compare_bootstrap)
{
	double lo, hi;
	/* Constant sides: every resample has the same ratio. */
	double two[] = {2, 2, 2, 2, 2}, one[] = {1, 1, 1};
	UNIT_CHECK_EQ(ana_bootstrap_ratio(two, 5, one, 3, 2000, 0.95, 1, &lo, &hi), 0);
	CHECK_NEAR(lo, 2, 1e-12);
	CHECK_NEAR(hi, 2, 1e-12);
	/* Errors: an empty side, a zero mean below. */
	double zero[] = {0, 0};
	UNIT_CHECK_EQ(ana_bootstrap_ratio(two, 0, one, 3, 2000, 0.95, 1, &lo, &hi), FENNEC_EINVAL);
	UNIT_CHECK_EQ(ana_bootstrap_ratio(two, 5, zero, 2, 2000, 0.95, 1, &lo, &hi), FENNEC_EINVAL);

	/* 50 values around 2 against 50 around 1 (+-10 %): the interval holds the true ratio
	 * 2, excludes 1, is narrow, and is the same for the same seed. */
	enum { N = 50, BIG = 3 * ANA_BOOTSTRAP_EXACT };
	double a[N], b[N];
	uint64_t s = 88172645463325252ull;
	for (int i = 0; i < N; i++) {
		a[i] = 2 * (0.9 + 0.2 * noise(&s));
		b[i] = 1 * (0.9 + 0.2 * noise(&s));
	}
	double lo2, hi2;
	UNIT_CHECK_EQ(ana_bootstrap_ratio(a, N, b, N, 2000, 0.95, 7, &lo, &hi), 0);
	UNIT_CHECK(lo < 2 && hi > 2 && lo > 1.9 && hi < 2.1);
	UNIT_CHECK_EQ(ana_bootstrap_ratio(a, N, b, N, 2000, 0.95, 7, &lo2, &hi2), 0);
	UNIT_CHECK(lo == lo2 && hi == hi2);
	/* A wider level gives a wider interval. */
	UNIT_CHECK_EQ(ana_bootstrap_ratio(a, N, b, N, 2000, 0.99, 7, &lo2, &hi2), 0);
	UNIT_CHECK(lo2 <= lo && hi2 >= hi);

	/* Large sides take the normal shortcut: uniform noise of +-10 % has a standard deviation
	 * of 0.2 / sqrt(12) = 5.8 % of the mean, so the ratio's standard error over BIG values a
	 * side is about 2 * 0.058 * sqrt(2 / BIG), and the 95 % interval is the ratio of the
	 * means +- 1.96 of that. */
	double *x = malloc(BIG * sizeof *x), *y = malloc(BIG * sizeof *y);
	UNIT_CHECK(x && y);
	if (x && y) {
		double sx = 0, sy = 0;
		for (int i = 0; i < BIG; i++) {
			sx += x[i] = 2 * (0.9 + 0.2 * noise(&s));
			sy += y[i] = 0.9 + 0.2 * noise(&s);
		}
		double ratio = sx / sy, half = 1.96 * 2 * 0.2 / sqrt(12) * sqrt(2.0 / BIG);
		UNIT_CHECK_EQ(ana_bootstrap_ratio(x, BIG, y, BIG, 2000, 0.95, 7, &lo, &hi), 0);
		CHECK_NEAR((lo + hi) / 2, ratio, half / 10);
		CHECK_NEAR(hi - lo, 2 * half, 2 * half / 10);
	}
	free(x);
	free(y);
}

/* ---- two profiles built by hand ----
 * A: regions work (40 calls of about 2 ms), same (40 of about 1 ms), old (only in A);
 *    functions hot 600 and cold 400 self samples of 1000; findings hot_operation work and
 *    hot_operation old.
 * B: work twice as fast (about 1 ms), same unchanged, new (only in B); hot 300 and cold 700
 *    of 1000; findings hot_operation work and hot_function cold. */

enum { CALLS = 40 };

typedef struct built {
	ana_profile p;
	char *names[8];
	ana_node nodes[3];
	uint64_t dur[3][CALLS];
	ana_func funcs[2];
	ana_hot_func hot[2];
	ana_finding findings[2];
} built;

static void add_region(built *b, uint32_t n, uint32_t name, const char *path, double mean_ns, uint64_t *s)
{
	ana_node *x = &b->nodes[n];
	*x = (ana_node){.name = name, .parent = ANA_NONE, .path = (char *)path};
	double sum = 0;
	for (int i = 0; i < CALLS; i++) {
		b->dur[n][i] = (uint64_t)(mean_ns * (0.95 + 0.1 * noise(s)));
		sum += (double)b->dur[n][i];
	}
	x->durations = (ana_u64vec){b->dur[n], CALLS, CALLS};
	x->total_ns = (uint64_t)sum;
	x->dist.count = CALLS;
	x->dist.mean = sum / CALLS;
	b->p.nnodes = n + 1;
}

static void build(built *b, int after, uint64_t seed)
{
	memset(b, 0, sizeof *b);
	static const char *const names[] = {"work", "same", "old", "new", "hot", "cold", "/bin/prog"};
	for (int i = 0; i < 7; i++)
		b->names[i] = (char *)names[i];
	b->p.names = b->names;
	b->p.nnames = 7;
	b->p.nodes = b->nodes;
	b->p.wall_ns = after ? 100000000 : 200000000;
	uint64_t s = seed;
	add_region(b, 0, 0, "work", after ? 1e6 : 2e6, &s);
	add_region(b, 1, 1, "same", 1e6, &s);
	add_region(b, 2, after ? 3 : 2, after ? "new" : "old", 5e5, &s);
	b->funcs[0] = (ana_func){.name = 4, .module = 6};
	b->funcs[1] = (ana_func){.name = 5, .module = 6};
	b->p.smp.funcs = b->funcs;
	b->p.smp.nfuncs = 2;
	b->p.smp.period_ns = 1000000;
	b->hot[0] = (ana_hot_func){.func = 0, .self = after ? 300 : 600};
	b->hot[1] = (ana_hot_func){.func = 1, .self = after ? 700 : 400};
	b->p.smp.all.funcs[ANA_CPU] = b->hot;
	b->p.smp.all.nfuncs[ANA_CPU] = 2;
	b->p.smp.all.weight[ANA_CPU] = 1000;
	b->findings[0] = (ana_finding){.type = "hot_operation", .severity = ANA_HIGH, .subject = "work"};
	b->findings[1] = after ? (ana_finding){.type = "hot_function", .severity = ANA_MEDIUM, .subject = "cold"}
			       : (ana_finding){.type = "hot_operation", .severity = ANA_HIGH, .subject = "old"};
	b->p.findings = b->findings;
	b->p.nfindings = 2;
}

static const ana_cmp_region *region_of(const ana_compare_result *r, const char *path)
{
	for (uint32_t i = 0; i < r->nregions; i++)
		if (!strcmp(r->regions[i].path, path))
			return &r->regions[i];
	return NULL;
}

UNIT_TEST(compare_profiles)
{
	static built a, b;
	build(&a, 0, 0x1234567);
	build(&b, 1, 0x7654321);
	ana_compare_result r;
	UNIT_CHECK_EQ(ana_compare(&a.p, &b.p, NULL, &r), 0);
	UNIT_CHECK_EQ(r.nregions, 4);
	CHECK_NEAR(r.wall_speedup, 2, 1e-12);
	UNIT_CHECK(!r.steps.tested);

	const ana_cmp_region *w = region_of(&r, "work"), *s = region_of(&r, "same");
	const ana_cmp_region *o = region_of(&r, "old"), *n = region_of(&r, "new");
	UNIT_CHECK(w && s && o && n);
	if (w && s && o && n) {
		/* Uniform +-5 % noise on each side: the ratio of means is 2 within about 2 %. */
		UNIT_CHECK_EQ(w->status, ANA_CMP_BOTH);
		CHECK_NEAR(w->test.speedup, 2, 0.05);
		UNIT_CHECK(w->test.tested && w->test.significant);
		UNIT_CHECK(w->test.ci_low > 1.9 && w->test.ci_high < 2.1);
		UNIT_CHECK(w->test.p_value < 1e-10); /* complete separation of 40 and 40 */
		UNIT_CHECK_EQ(w->a_count, CALLS);
		/* Same distribution on both sides: within the 2 % threshold whatever the test says. */
		CHECK_NEAR(s->test.speedup, 1, 0.02);
		UNIT_CHECK(s->test.tested && !s->test.significant);
		UNIT_CHECK(s->test.ci_low < 1.02 && s->test.ci_high > 0.98);
		UNIT_CHECK_EQ(o->status, ANA_CMP_REMOVED);
		UNIT_CHECK_EQ(n->status, ANA_CMP_ADDED);
		UNIT_CHECK(!o->test.tested && !n->test.tested && isnan(o->test.p_value));
		UNIT_CHECK_EQ(o->b_count, 0);
		UNIT_CHECK_EQ(n->a_count, 0);
		/* By A + B total: work (80 + 40 ms) first. */
		UNIT_CHECK(r.regions[0].path == w->path);
	}
	UNIT_CHECK_EQ(r.faster, 1);
	UNIT_CHECK_EQ(r.slower, 0);

	/* Functions: 60 % -> 30 % and 40 % -> 70 % of 1000 samples each. */
	UNIT_CHECK(r.has_funcs);
	UNIT_CHECK_EQ(r.nfuncs, 2);
	for (uint32_t i = 0; i < r.nfuncs; i++) {
		const ana_cmp_func *f = &r.funcs[i];
		int hot = !strcmp(f->name, "hot");
		CHECK_NEAR(f->delta_pct, hot ? -30 : 30, 1e-9);
		CHECK_NEAR(f->a_self_ns, hot ? 600e6 : 400e6, 1e-3);
		UNIT_CHECK(f->significant && f->p_value < 1e-20 && f->p_holm >= f->p_value);
		UNIT_CHECK_STR(f->module, "/bin/prog");
	}

	/* Findings: old fixed, cold new, work unchanged; in that order. */
	UNIT_CHECK_EQ(r.nfindings, 3);
	if (r.nfindings == 3) {
		UNIT_CHECK_EQ(r.findings[0].status, ANA_CMP_FIXED);
		UNIT_CHECK_STR(r.findings[0].a->subject, "old");
		UNIT_CHECK_EQ(r.findings[1].status, ANA_CMP_NEW);
		UNIT_CHECK_STR(r.findings[1].b->subject, "cold");
		UNIT_CHECK_EQ(r.findings[2].status, ANA_CMP_UNCHANGED);
		UNIT_CHECK(r.findings[2].a == &a.findings[0] && r.findings[2].b == &b.findings[0]);
	}
	ana_compare_free(&r);

	/* A profile against itself: nothing changed, nothing significant. */
	UNIT_CHECK_EQ(ana_compare(&a.p, &a.p, NULL, &r), 0);
	UNIT_CHECK_EQ(r.faster + r.slower, 0);
	for (uint32_t i = 0; i < r.nregions; i++) {
		UNIT_CHECK(!r.regions[i].test.significant);
		CHECK_NEAR(r.regions[i].test.speedup, 1, 0);
		UNIT_CHECK(r.regions[i].test.ci_low <= 1 && r.regions[i].test.ci_high >= 1);
	}
	for (uint32_t i = 0; i < r.nfuncs; i++)
		UNIT_CHECK(!r.funcs[i].significant && r.funcs[i].p_value == 1);
	for (uint32_t i = 0; i < r.nfindings; i++)
		UNIT_CHECK_EQ(r.findings[i].status, ANA_CMP_UNCHANGED);
	ana_compare_free(&r);

	/* Without kept durations nothing can be tested, and nothing is called significant. */
	for (int i = 0; i < 3; i++)
		b.nodes[i].durations.n = 0;
	UNIT_CHECK_EQ(ana_compare(&a.p, &b.p, NULL, &r), 0);
	w = region_of(&r, "work");
	UNIT_CHECK(w && !w->test.tested && !w->test.significant);
	if (w)
		CHECK_NEAR(w->test.speedup, 2, 0.05);
	ana_compare_free(&r);
	ana_compare_free(NULL);
}

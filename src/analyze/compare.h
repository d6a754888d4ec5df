/*
 * compare.h - two recordings side by side (`fennec compare A B`, docs/compare.md): the
 * summaries, each region's speedup with a rank test and a bootstrap confidence interval,
 * the change of each function's sampled CPU share, and the findings fixed, new and
 * unchanged. For programs that benchmark variants too: load both profiles with
 * ana_options.keep_durations set, call ana_compare(), render with rep_compare_text/json.
 *
 * Ownership: an ana_compare_result owns its arrays. Names and findings it points to are
 * borrowed from the two profiles, which must outlive it; ana_compare_free() releases it.
 * Nothing here prints; everything is deterministic (the bootstrap has a fixed seed).
 */
#ifndef FENNEC_ANALYZE_COMPARE_H
#define FENNEC_ANALYZE_COMPARE_H

#include "analyze/analyze.h"

#define ANA_COMPARE_SCHEMA "fennec.compare/1"

typedef struct ana_compare_options {
	double alpha;          /* significance level of the tests (default 0.05) */
	double confidence;     /* of the bootstrap interval (default 0.95) */
	uint32_t resamples;    /* bootstrap resamples (default 2000) */
	uint64_t seed;         /* of the bootstrap's generator: same inputs, same interval */
	double threshold_pct;  /* smallest change called significant: a speedup within
				* [1/(1+t), 1+t], or a function share changed by less than
				* t of its share in A, is noise (default 2 %) */
} ana_compare_options;

/* The defaults above. */
void ana_compare_options_init(ana_compare_options *o);

/* A's durations against B's (per call of a region, or per step). */
typedef struct ana_cmp_test {
	int tested;           /* both sides had at least 2 durations */
	double speedup;       /* mean A / mean B: 2.0 means B is twice as fast; NaN without data */
	double ci_low, ci_high; /* bootstrap percentile interval of the speedup (NaN untested) */
	double p_value;       /* Mann-Whitney U test, two-sided (NaN untested) */
	int significant;      /* tested, p < alpha, the interval excludes 1 and the speedup is
			       * outside the noise threshold */
} ana_cmp_test;

enum ana_cmp_status {
	ANA_CMP_BOTH = 0,     /* in both recordings */
	ANA_CMP_REMOVED = 1,  /* only in A */
	ANA_CMP_ADDED = 2,    /* only in B */
};

/* A region, matched by its nesting path. */
typedef struct ana_cmp_region {
	const char *name, *path;
	uint32_t a_node, b_node; /* node indices, ANA_NONE on the side without it */
	int status;              /* enum ana_cmp_status */
	uint64_t a_total_ns, b_total_ns, a_count, b_count;
	double a_mean_ns, b_mean_ns; /* NaN without calls */
	ana_cmp_test test;       /* over per-call durations */
} ana_cmp_region;

/* A function's on-CPU self samples in both runs, matched by name (summed over modules). */
typedef struct ana_cmp_func {
	const char *name, *module; /* as in B when B sampled it, else as in A */
	int status;                /* enum ana_cmp_status: ADDED when A has no self samples */
	uint64_t a_self, b_self;   /* self sample weight */
	double a_self_pct, b_self_pct; /* of the run's on-CPU weight */
	double a_self_ns, b_self_ns;   /* estimates: weight times the sampling period */
	double delta_pct;          /* b_self_pct - a_self_pct, percentage points */
	double p_value;            /* two-proportion z test */
	double p_holm;             /* p_value adjusted for the number of functions (Holm) */
	int significant;           /* p_holm < alpha and the share moved by at least the threshold */
} ana_cmp_func;

enum ana_cmp_finding_status { ANA_CMP_FIXED = 0, ANA_CMP_NEW = 1, ANA_CMP_UNCHANGED = 2 };

/* A finding matched by type and subject. */
typedef struct ana_cmp_finding {
	int status;                /* enum ana_cmp_finding_status */
	const ana_finding *a, *b;  /* NULL on the side without it */
} ana_cmp_finding;

/* One run's summary numbers. */
typedef struct ana_cmp_side {
	const ana_profile *p;
	uint64_t wall_ns, cpu_ns, steps, items;
	double setup_ns;         /* before the first step mark (not a step); NaN without marks */
	uint64_t max_rss_bytes;    /* the largest max RSS of the recording's processes (0 unknown) */
	double step_mean_ns, step_p50_ns, steps_per_s, items_per_s; /* NaN when not available */
	uint64_t cpu_weight;       /* on-CPU sample weight (0 without sampling) */
} ana_cmp_side;

typedef struct ana_compare_result {
	ana_compare_options opt;
	ana_cmp_side a, b;
	double wall_speedup;       /* a.wall_ns / b.wall_ns (NaN if either is 0) */
	ana_cmp_test steps;        /* over per-step durations; untested unless both have steps */
	ana_cmp_region *regions;   /* by A + B total time, descending */
	uint32_t nregions;
	uint32_t faster, slower;   /* regions with a significant change each way */
	int has_funcs;             /* both runs have on-CPU samples */
	ana_cmp_func *funcs;       /* by |delta_pct| descending */
	uint32_t nfuncs;
	ana_cmp_finding *findings; /* fixed, then new, then unchanged */
	uint32_t nfindings;
} ana_compare_result;

/*
 * Compare a (before) with b (after), with options `opt` (NULL: defaults). Regions are
 * tested only when the profiles were loaded with keep_durations (otherwise their tests
 * are untested and never significant). Returns 0 or FENNEC_ENOMEM; free the result with
 * ana_compare_free() either way.
 */
int ana_compare(const ana_profile *a, const ana_profile *b, const ana_compare_options *opt,
		ana_compare_result *out);
void ana_compare_free(ana_compare_result *r);

/* Names of the statuses: "both", "removed", "added"; "fixed", "new", "unchanged". */
const char *ana_cmp_status_name(int status);
const char *ana_cmp_finding_status_name(int status);

/* ---- the statistics, usable on their own ---- */

/*
 * Mann-Whitney U test of x against y, two-sided, by the normal approximation with the
 * tie correction and a continuity correction of 1/2 (as scipy.stats.mannwhitneyu with
 * method="asymptotic"). *u (may be NULL) gets U of x. Returns the p-value; 1 when every
 * value is equal, NaN when a side is empty or memory runs out.
 */
double ana_mann_whitney(const double *x, size_t nx, const double *y, size_t ny, double *u);

/*
 * Bootstrap percentile interval of mean(x) / mean(y) at level `confidence`, from
 * `resamples` resamples of each side drawn with a generator seeded by `seed`. A side of
 * more than ANA_BOOTSTRAP_EXACT values has its resampled mean drawn from the normal
 * distribution the central limit theorem gives it (mean, standard error) instead of by
 * resampling (same result, bounded time). Returns 0, FENNEC_EINVAL for an empty side or a
 * resample mean of y that is 0, FENNEC_ENOMEM.
 */
#define ANA_BOOTSTRAP_EXACT 1024
int ana_bootstrap_ratio(const double *x, size_t nx, const double *y, size_t ny, uint32_t resamples,
			double confidence, uint64_t seed, double *lo, double *hi);

/* Two-proportion z test (pooled, no continuity correction) of k1/n1 against k2/n2,
 * two-sided. Returns the p-value; 1 when both proportions are 0 or 1, NaN if n1 or n2 is 0. */
double ana_two_proportion(double k1, double n1, double k2, double n2);

#endif

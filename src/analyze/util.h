/*
 * util.h - the utilities that build the model (util.c), for src/analyze/ only: growable
 * arrays, the profile's interned names and its warnings, findings. They need nothing but
 * the model's types (analyze/analyze.h), so the aggregators that use them do not depend
 * on model.c, which drives them. The helpers renderers use too (numbers for reading,
 * names, statistics of a sample) are declared in analyze/analyze.h.
 */
#ifndef FENNEC_ANALYZE_UTIL_H
#define FENNEC_ANALYZE_UTIL_H

#include "analyze/analyze.h"

#include <math.h>

/* x as an unsigned number, saturated: 0 for x <= 0 or NaN, UINT64_MAX from 2^64 up. A
 * corrupt clock fit (a file's fit_a, fit_b) turns ticks into any double, and converting one
 * past 2^64 to an integer is undefined behaviour. */
static inline uint64_t ana_sat_u64(double x)
{
	if (!(x > 0))
		return 0;
	return x >= 18446744073709551616.0 ? UINT64_MAX : (uint64_t)x;
}

/* llround(x) for x >= 0 as an unsigned number (0 for x <= 0 or NaN), without the call:
 * the model rounds two durations an END, and llround was 6 % of `fennec analyze` on region
 * events. Exact: the truncation of a double below 2^63 and its difference from x are exact,
 * and halves go up, as llround's do. */
static inline uint64_t ana_round_ns(double x)
{
	if (!(x > 0))
		return 0;
	if (x >= 9.2e18)
		return ana_sat_u64(x); /* a duration no clock gives: a corrupt file's */
	uint64_t r = (uint64_t)x;
	return x - (double)r >= 0.5 ? r + 1 : r;
}

/* Grow `*arr` (elements of `elem` bytes, capacity *cap) so that index n fits; new elements
 * are zeroed. Returns 0 or -1. */
int ana_grow(void *arr, size_t *cap, size_t n, size_t elem);
/* The same for the profile's arrays with 32-bit capacities: returns the (moved) array, or
 * NULL when out of memory (arr is then unchanged). */
void *ana_grow32(void *arr, uint32_t *cap, uint32_t n, size_t elem);

/* The index of name `s` in p->names, added if new; ANA_NONE when out of memory. */
uint32_t ana_intern(ana_profile *p, const char *s);
/* The region node named `name` (names index) under `parent` (ANA_NONE: top level), or
 * ANA_NONE when there is none. */
uint32_t ana_node_find(const ana_profile *p, uint32_t parent, uint32_t name);
/* A warning for people, appended to p->warnings (dropped when out of memory). */
void ana_warn(ana_profile *p, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* For the rules (rules_*.c, gpu_rules.c, sys_rules.c, system.c): a malloc'd printf (NULL when
 * out of memory), a new finding appended to p->findings (NULL when out of memory), and one
 * of its numbers. */
char *ana_strf(const char *fmt, ...) __attribute__((format(printf, 1, 2)));
ana_finding *ana_finding_add(ana_profile *p, const char *type, ana_severity sev);
void ana_finding_num(ana_finding *f, const char *key, double v);

#endif

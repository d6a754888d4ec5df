/*
 * compare.h (report) - renderers of a comparison of two recordings (analyze/compare.h):
 * a text report, JSON (schema fennec.compare/1) and an HTML page (docs/compare.md). Like every renderer
 * they read the result only and compute no number of their own.
 */
#ifndef FENNEC_REPORT_COMPARE_H
#define FENNEC_REPORT_COMPARE_H

#include <stdio.h>

#include "analyze/compare.h"

typedef struct rep_compare_options {
	const char *a_name, *b_name; /* how to name the runs (the paths given); NULL: "A", "B" */
	int color;                   /* ANSI colour in text */
	int max_regions;             /* text: rows of the region table (0: all) */
	int max_funcs;               /* text: rows of the function table (0: all) */
} rep_compare_options;

/* Write the comparison to `out`. Return 0, or FENNEC_EIO when writing failed. */
int rep_compare_text(FILE *out, const ana_compare_result *r, const rep_compare_options *o);
int rep_compare_json(FILE *out, const ana_compare_result *r, const rep_compare_options *o);

struct rep_web;
/* The self-contained page (web/compare.html): the JSON above, both runs' step durations and
 * `diff_svg`, a differential flame graph (export's diff-svg), or NULL with `diff_note`
 * saying why there is none. */
int rep_compare_html(FILE *out, const ana_compare_result *r, const rep_compare_options *o, const struct rep_web *w,
		     const char *diff_svg, const char *diff_note);

/* A region's, the steps' or a function's verdict in words: "faster", "slower", "no
 * significant change", "added", "removed", "not tested"... */
const char *rep_compare_verdict(const ana_cmp_test *t);

#endif

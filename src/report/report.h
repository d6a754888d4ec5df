/*
 * report.h - renderers of the analysis model. Each writes to a FILE* and reads only
 * the model (analyze.h); none computes a number of its own.
 */
#ifndef FENNEC_REPORT_H
#define FENNEC_REPORT_H

#include <stdio.h>

#include "analyze/analyze.h"

typedef struct rep_options {
	int color;        /* ANSI colour (the CLI decides: a terminal and no NO_COLOR) */
	int max_regions;  /* rows in the text region table (0 = all) */
} rep_options;

int rep_text(FILE *out, const ana_profile *p, const rep_options *o);
int rep_json(FILE *out, const ana_profile *p, const rep_options *o);

/* Region node indices by total time, descending (malloc'd; the caller frees). */
uint32_t *rep_region_order(const ana_profile *p);

/* JSON string literal with escapes. */
void rep_json_string(FILE *out, const char *s);

#endif

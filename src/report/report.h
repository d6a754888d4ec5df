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

/* Heap sites in order of a measure, for the renderers: up to `max` indices into
 * p->mem.sites with a nonzero measure, largest first. Runtime sites are left out of
 * REP_MEM_LIVE (they are not leaks). Returns the count. */
enum rep_mem_by { REP_MEM_BYTES = 0, REP_MEM_LIVE = 1, REP_MEM_PEAK = 2, REP_MEM_TEMP = 3 };
uint32_t rep_mem_top(const ana_profile *p, int by, uint32_t *idx, uint32_t max);

/* JSON string literal with escapes. */
void rep_json_string(FILE *out, const char *s);

#endif

/*
 * plot.h - `fennec plot`: charts of the analysis model as images for a slide or an
 * issue (docs/plot.md): time by region, the per-step series, a metric over time, and
 * memory over time. One drawing code path (plot.c) over a small canvas interface with
 * two backends: SVG written by fennec and PNG rendered by cairo (src/plot/canvas.h).
 *
 * Plots read the model only and compute no statistic of their own; they print nothing.
 * Errors: 0; FENNEC_ENODATA when the recording has nothing of the kind asked for (no
 * regions, no steps, no memory data) and FENNEC_ENOENT when it has no metric of the
 * name asked for (plot_has_data tells beforehand); FENNEC_EINVAL for bad options;
 * FENNEC_ENOMEM; FENNEC_EIO when writing fails.
 */
#ifndef FENNEC_PLOT_H
#define FENNEC_PLOT_H

#include <stdio.h>

#include "analyze/analyze.h"

enum plot_kind { PLOT_TIMING, PLOT_MEMORY, PLOT_STEPS, PLOT_METRICS, PLOT_NKINDS };
enum plot_format { PLOT_SVG, PLOT_PNG };

#define PLOT_MIN_WIDTH 320
#define PLOT_MIN_HEIGHT 240
#define PLOT_MAX_SIZE 8192

typedef struct plot_options {
	int kind;             /* enum plot_kind */
	int format;           /* enum plot_format */
	unsigned width, height; /* pixels, PLOT_MIN_* to PLOT_MAX_SIZE */
	const char *metric;   /* PLOT_METRICS: the metric's name */
	const char *title;    /* NULL: "<source>: <what is shown>" */
	const char *source;   /* the recording's name, for the default title (may be NULL) */
} plot_options;

/* The kind named "timing", "memory", "steps" or "metrics"; -1 for other names. */
int plot_kind_parse(const char *name);
const char *plot_kind_name(int kind);

/* 0 when the recording has what o->kind draws, else the code plot_write would return. */
int plot_has_data(const ana_profile *p, const plot_options *o);

/* The metric named `name` (the first one, if kinds differ), or NULL. */
const ana_metric *plot_find_metric(const ana_profile *p, const char *name);

/* Draw the chart and write it to `out` as SVG or PNG. */
int plot_write(FILE *out, const ana_profile *p, const plot_options *o);

/* Load cairo for PNG output (plot_write loads it too): 0, or FENNEC_EIO with the reason
 * in *msg (when msg is not NULL). */
int plot_png_load(const char **msg);

#endif

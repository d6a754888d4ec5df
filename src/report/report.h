/*
 * report.h - renderers of the analysis model. Each writes to a FILE* and reads only
 * the model (analyze.h); none computes a number of its own.
 */
#ifndef FENNEC_REPORT_H
#define FENNEC_REPORT_H

#include <stdio.h>

#include "analyze/analyze.h"
#include "report/jsonw.h"

typedef struct rep_options {
	int color;        /* ANSI colour (the CLI decides: a terminal and no NO_COLOR) */
	int max_regions;  /* rows in the text region table (0 = all) */
} rep_options;

int rep_text(FILE *out, const ana_profile *p, const rep_options *o);
int rep_json(FILE *out, const ana_profile *p, const rep_options *o);

/* The GPU sections (gpu.c): nothing without GPU activity; the JSON one is the `gpu` key
 * and its value followed by a comma. */
void rep_gpu_text(FILE *out, const ana_profile *p, const char *bold, const char *reset);
void rep_gpu_json(FILE *out, const ana_profile *p);

/* The `system` and `energy` sections (system.c): the JSON keys and values each followed by
 * a comma (null when absent), and the text lines (nothing when absent). */
void rep_sys_json(FILE *out, const ana_profile *p);
void rep_sys_text(FILE *out, const ana_profile *p, const char *bold, const char *reset);

/* Region node indices by total time, descending (malloc'd; the caller frees). */
uint32_t *rep_region_order(const ana_profile *p);

/* JSON values (rep_json_string, rep_json_number, ...): jsonw.h. */

/*
 * The web front end (web/): our page template, style and script, and the charting library
 * (Apache ECharts, from npm at build time). The CLI embeds them into the binary and passes
 * them in; the report layer only assembles. Borrowed: nothing here is freed.
 */
typedef struct rep_web {
	const char *page;     /* web/index.html, with @@NAME@@ markers */
	size_t page_len;
	const char *style;    /* web/fennec.css */
	size_t style_len;
	const char *common;   /* web/common.js: helpers both pages use */
	size_t common_len;
	const char *app;      /* web/fennec.js */
	size_t app_len;
	const char *compare_page; /* web/compare.html: `fennec compare --format html` */
	size_t compare_page_len;
	const char *compare_app;  /* web/compare.js */
	size_t compare_app_len;
	const char *charts;   /* echarts.min.js */
	size_t charts_len;
} rep_web;

typedef struct rep_page_options {
	size_t max_intervals;     /* timeline intervals sent to the page (0: 50,000) */
	uint32_t max_depth;       /* deepest region depth on the timeline (0: 15) */
	uint32_t max_flame_nodes; /* nodes of the sampled call tree (0: 20,000) */
	int live;                 /* served by `fennec view`: the page polls the server */
} rep_page_options;

/*
 * The data of the HTML report and the dashboard (docs/html.md): one JSON object with the
 * analysis exactly as rep_json writes it under "analysis", plus what only the page needs
 * (the thread timeline, the sampled call tree), each bounded and saying how it was
 * reduced. Returns 0, FENNEC_ENOMEM or FENNEC_EIO.
 */
int rep_page_data(FILE *out, const ana_profile *p, const rep_options *o, const rep_page_options *po);

/* Only the timeline, of the calls that overlap [from_ns, to_ns) (from the first process's
 * start), with the whole interval budget: the detail of a zoomed timeline. One JSON object
 * {"page", "timeline"}. Returns 0 or FENNEC_EIO. */
int rep_page_timeline(FILE *out, const ana_profile *p, const rep_page_options *po, uint64_t from_ns, uint64_t to_ns);

/* The self-contained HTML report: the template with the style, the scripts and the page
 * data inlined (no network needed to open it). Returns 0, FENNEC_ENOMEM or FENNEC_EIO. */
int rep_html(FILE *out, const ana_profile *p, const rep_options *o, const rep_web *w, const rep_page_options *po);

/* The same page around page data already rendered (`fennec view`): `data` is the output of
 * rep_page_data, or NULL for a page that loads it from the server. */
int rep_html_page(FILE *out, const rep_web *w, const char *data, size_t data_len, int live);

#endif

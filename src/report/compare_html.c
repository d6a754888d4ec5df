/*
 * compare_html.c - `fennec compare --format html`: one self-contained page
 * (web/compare.html, docs/compare.md) around the comparison as fennec.compare/1 JSON, both
 * runs' step durations and the differential flame graph the caller drew. Like the other
 * renderers it computes no statistic of its own; the page draws what it is given.
 */
#include "report/compare.h"
#include "report/report.h"

#include <stdlib.h>

#define MAX_STEP_POINTS 5000

/* Every step's duration, or evenly spaced ones when there are more than the page needs. */
static void step_series(FILE *out, const char *k, const ana_profile *p, int *thinned)
{
	size_t n = p->step_ns.n, stride = n > MAX_STEP_POINTS ? (n + MAX_STEP_POINTS - 1) / MAX_STEP_POINTS : 1;
	*thinned |= stride > 1;
	fprintf(out, "\"%s_stride\": %zu, \"%s\": [", k, stride, k);
	for (size_t i = 0; i < n; i += stride)
		fprintf(out, i ? (i / stride % 32 ? ",%llu" : ",\n%llu") : "%llu", (unsigned long long)p->step_ns.v[i]);
	fputc(']', out);
}

static int page_data(FILE *out, const ana_compare_result *r, const rep_compare_options *o, const char *diff_svg,
		     const char *diff_note)
{
	fputs("{\n  \"page\": \"fennec.compare-page/1\",\n  \"compare\": ", out);
	int rc = rep_compare_json(out, r, o);
	if (rc)
		return rc;
	int thinned = 0;
	fputs(",\n  \"steps\": {", out);
	step_series(out, "a", r->a.p, &thinned);
	fputs(", ", out);
	step_series(out, "b", r->b.p, &thinned);
	fprintf(out, ", \"thinned\": %s},\n  \"diff_svg\": ", thinned ? "true" : "false");
	if (diff_svg)
		rep_json_string(out, diff_svg);
	else
		fputs("null", out);
	fputs(",\n  \"diff_note\": ", out);
	if (diff_note)
		rep_json_string(out, diff_note);
	else
		fputs("null", out);
	fputs("\n}\n", out);
	return ferror(out) ? FENNEC_EIO : 0;
}

int rep_compare_html(FILE *out, const ana_compare_result *r, const rep_compare_options *o, const rep_web *w,
		     const char *diff_svg, const char *diff_note)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&buf, &len);
	if (!mem)
		return FENNEC_ENOMEM;
	int rc = page_data(mem, r, o, diff_svg, diff_note);
	if (fclose(mem) && !rc)
		rc = FENNEC_ENOMEM;
	if (!rc) {
		rep_web cw = *w;
		cw.page = w->compare_page;
		cw.page_len = w->compare_page_len;
		cw.app = w->compare_app;
		cw.app_len = w->compare_app_len;
		rc = rep_html_page(out, &cw, buf, len, 0);
	}
	free(buf);
	return rc;
}

/*
 * folded.c - collapsed stacks ("folded"), the line format of Brendan Gregg's
 * stackcollapse scripts that flamegraph.pl, speedscope and inferno read:
 * `root;caller;...;leaf WEIGHT`, one line per distinct sequence of frame names, sorted
 * (docs/export.md).
 */
#include "export/internal.h"

#include <stdlib.h>

/* A frame name without the two characters the format reserves: ';' separates frames and a
 * newline ends the line. (A space is fine: the weight is after the last one.) */
static void put_frame(cm_buf *b, const char *s)
{
	for (; *s; s++)
		cm_buf_u8(b, (uint8_t)(*s == ';' ? ':' : (*s == '\n' || *s == '\r') ? ' ' : *s));
}

typedef struct line {
	size_t off;           /* of its frames in the text buffer, NUL-terminated */
	uint64_t weight;
} line;

static int by_text(const void *a, const void *b, void *text)
{
	return strcmp((const char *)text + ((const line *)a)->off, (const char *)text + ((const line *)b)->off);
}

int exp_folded(FILE *out, const ana_profile *p, const exp_options *o)
{
	exp_agg *agg;
	size_t n;
	uint64_t total;
	int rc = exp_aggregate(p, o, &agg, &n, &total);
	if (rc)
		return rc;
	if (!n)
		return FENNEC_ENODATA;
	/* Distinct stacks can have the same frame names (two call sites of one function):
	 * render every line, sort, and merge equal ones, so each line is unique. */
	size_t cap = 256;
	exp_frame *fr = malloc(cap * sizeof *fr);
	line *lines = malloc(n * sizeof *lines);
	cm_buf text = {0};
	if (!fr || !lines) {
		rc = FENNEC_ENOMEM;
		goto out;
	}
	char buf[512];
	for (size_t i = 0; i < n; i++) {
		size_t nf = exp_agg_frames_grow(p, &agg[i], &fr, &cap);
		if (nf == SIZE_MAX) {
			rc = FENNEC_ENOMEM;
			goto out;
		}
		lines[i] = (line){text.len, agg[i].weight};
		if (!nf)
			put_frame(&text, "[unknown]");
		for (size_t j = 0; j < nf; j++) {
			if (j)
				cm_buf_u8(&text, ';');
			put_frame(&text, exp_frame_name(p, &fr[j], buf, sizeof buf));
		}
		cm_buf_u8(&text, 0);
		if (text.failed) {
			rc = FENNEC_ENOMEM;
			goto out;
		}
	}
	qsort_r(lines, n, sizeof *lines, by_text, text.data);
	for (size_t i = 0; i < n;) {
		const char *s = (const char *)text.data + lines[i].off;
		uint64_t w = 0;
		size_t j = i;
		for (; j < n && !strcmp(s, (const char *)text.data + lines[j].off); j++)
			w += lines[j].weight;
		fprintf(out, "%s %llu\n", s, (unsigned long long)w);
		i = j;
	}
	rc = ferror(out) ? FENNEC_EIO : 0;
out:
	cm_buf_free(&text);
	free(lines);
	free(fr);
	free(agg);
	return rc;
}

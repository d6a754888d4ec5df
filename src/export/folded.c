/*
 * folded.c - collapsed stacks ("folded"), the line format of Brendan Gregg's
 * stackcollapse scripts that flamegraph.pl, speedscope and inferno read:
 * `root;caller;...;leaf WEIGHT`, one line per distinct stack (docs/export.md).
 */
#include "export/internal.h"

#include <stdlib.h>

/* A frame name without the two characters the format reserves: ';' separates frames and a
 * newline ends the line. (A space is fine: the weight is after the last one.) */
static void put_frame(FILE *out, const char *s)
{
	for (; *s; s++)
		fputc(*s == ';' ? ':' : (*s == '\n' || *s == '\r') ? ' ' : *s, out);
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
	size_t cap = 256;
	exp_frame *fr = malloc(cap * sizeof *fr);
	if (!fr) {
		free(agg);
		return FENNEC_ENOMEM;
	}
	char buf[512];
	for (size_t i = 0; i < n && !rc; i++) {
		size_t nf = exp_agg_frames(p, &agg[i], fr, cap);
		if (nf > cap) {
			exp_frame *f2 = realloc(fr, nf * sizeof *fr);
			if (!f2) {
				rc = FENNEC_ENOMEM;
				break;
			}
			fr = f2;
			cap = nf;
			exp_agg_frames(p, &agg[i], fr, cap);
		}
		if (!nf)
			fputs("[unknown]", out);
		for (size_t j = 0; j < nf; j++) {
			if (j)
				fputc(';', out);
			put_frame(out, exp_frame_name(p, &fr[j], buf, sizeof buf));
		}
		fprintf(out, " %llu\n", (unsigned long long)agg[i].weight);
		if (ferror(out))
			rc = FENNEC_EIO;
	}
	free(fr);
	free(agg);
	return rc ? rc : ferror(out) ? FENNEC_EIO : 0;
}

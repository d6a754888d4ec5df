/*
 * diffsvg.c - a differential flame graph: B's flame graph (widths from B's samples)
 * coloured by how each frame's share of self samples changed from a base recording A,
 * each run normalised by its own total: red where B spends a larger share, blue where it
 * spends a smaller one, grey where nothing changed. Frames are matched by the names on
 * their path from the root. Tree and drawing are svg.c's (exp_flame_*).
 */
#include "export/internal.h"

#include <math.h>
#include <stdlib.h>

typedef struct diff {
	const exp_flame *a;   /* the base */
	uint32_t *match;      /* per node of B: the node of A with the same path, or UINT32_MAX */
	double *delta;        /* per node of B: self share in B minus self share in A */
	double scale;         /* the |delta| drawn at full colour */
} diff;

/* The child of A's node `parent` with the display name `name`, or UINT32_MAX. */
static uint32_t find_child(const exp_flame *a, uint32_t parent, const char *name)
{
	char buf[512];
	for (uint32_t k = a->n[parent].first; k != UINT32_MAX; k = a->n[k].next)
		if (!strcmp(exp_frame_name(a->p, &a->n[k].f, buf, sizeof buf), name))
			return k;
	return UINT32_MAX;
}

/* Self weight: the node's weight less its children's. */
static uint64_t self_weight(const exp_flame *t, uint32_t v)
{
	uint64_t w = t->n[v].weight;
	for (uint32_t k = t->n[v].first; k != UINT32_MAX; k = t->n[k].next)
		w -= t->n[k].weight;
	return w;
}

static void diff_fill(void *ctx, const exp_flame *t, uint32_t v, char *buf, size_t n)
{
	const diff *d = ctx;
	double r = d->delta[v] / d->scale;
	r = r > 1 ? 1 : r < -1 ? -1 : r;
	/* From a neutral grey towards red (more in B) or blue (less in B). */
	const double grey = 225, red[3] = {225, 40, 40}, blue[3] = {50, 90, 230};
	const double *to = r >= 0 ? red : blue;
	double k = fabs(r);
	snprintf(buf, n, "rgb(%d,%d,%d)", (int)lround(grey + k * (to[0] - grey)), (int)lround(grey + k * (to[1] - grey)),
		 (int)lround(grey + k * (to[2] - grey)));
	(void)t;
}

static void diff_note(void *ctx, const exp_flame *t, uint32_t v, char *buf, size_t n)
{
	const diff *d = ctx;
	const exp_flame *a = d->a;
	uint32_t m = d->match[v];
	double b_total = 100.0 * (double)t->n[v].weight / (double)t->total;
	double a_total = m == UINT32_MAX ? 0 : 100.0 * (double)a->n[m].weight / (double)a->total;
	snprintf(buf, n, "[A %.2f%% -> B %.2f%% of samples; self %+.2f points%s]", a_total, b_total, 100 * d->delta[v],
		 m == UINT32_MAX ? "; not in A" : "");
}

int exp_diff_svg(FILE *out, const ana_profile *base, const ana_profile *p, const exp_options *o)
{
	exp_flame ta, tb;
	diff d = {.a = &ta};
	int rc = exp_flame_build(&tb, p, o);
	if (rc) {
		exp_flame_free(&tb);
		return rc;
	}
	rc = exp_flame_build(&ta, base, o);
	if (rc)
		goto out;
	d.match = malloc(tb.len * sizeof *d.match);
	d.delta = malloc(tb.len * sizeof *d.delta);
	if (!d.match || !d.delta) {
		rc = FENNEC_ENOMEM;
		goto out;
	}
	/* Parents come before their children, so one pass in index order matches paths. */
	char buf[512];
	double max_abs = 0;
	d.match[0] = 0;
	for (uint32_t v = 0; v < tb.len; v++) {
		if (v) {
			uint32_t pm = d.match[tb.n[v].parent];
			d.match[v] = pm == UINT32_MAX ? UINT32_MAX
						      : find_child(&ta, pm, exp_frame_name(p, &tb.n[v].f, buf, sizeof buf));
		}
		double sb = (double)self_weight(&tb, v) / (double)tb.total;
		double sa = d.match[v] == UINT32_MAX ? 0 : (double)self_weight(&ta, d.match[v]) / (double)ta.total;
		d.delta[v] = sb - sa;
		if (fabs(d.delta[v]) > max_abs)
			max_abs = fabs(d.delta[v]);
	}
	/* The largest change is drawn at full colour, but a change under one point never is:
	 * two runs of one program are not painted as if they differed. */
	d.scale = max_abs > 0.01 ? max_abs : 0.01;
	exp_flame_style st = {diff_fill, diff_note, &d};
	rc = exp_flame_write(out, &tb, o->title ? o->title : "Differential flame graph", &st);
out:
	free(d.match);
	free(d.delta);
	exp_flame_free(&ta);
	exp_flame_free(&tb);
	return rc;
}

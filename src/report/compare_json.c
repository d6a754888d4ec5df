/*
 * compare_json.c - `fennec compare --format json`, schema fennec.compare/1
 * (docs/compare.md). Keys are added in later versions, never renamed or removed. Numbers
 * that could not be computed are null; booleans are JSON booleans.
 */
#include "report/compare.h"
#include "report/report.h"

#include <math.h>

/* A tiny streaming writer: remembers, per nesting level, whether a separator is due. */
typedef struct jw {
	FILE *out;
	int depth;
	unsigned char more[32]; /* per depth: an item was written at this level */
} jw;

static void item(jw *w, const char *k)
{
	if (w->more[w->depth])
		fputc(',', w->out);
	w->more[w->depth] = 1;
	fprintf(w->out, "\n%*s", 2 * w->depth, "");
	if (k) {
		rep_json_string(w->out, k);
		fputs(": ", w->out);
	}
}

static void open_(jw *w, const char *k, char c)
{
	item(w, k);
	fputc(c, w->out);
	if (w->depth + 1 < (int)sizeof w->more)
		w->more[++w->depth] = 0;
}

static void close_(jw *w, char c)
{
	int had = w->more[w->depth];
	w->depth--;
	if (had)
		fprintf(w->out, "\n%*s", 2 * w->depth, "");
	fputc(c, w->out);
}

static void num(jw *w, const char *k, double v)
{
	item(w, k);
	if (!isfinite(v))
		fputs("null", w->out);
	else if (v == trunc(v) && fabs(v) < 9e15)
		fprintf(w->out, "%.0f", v);
	else
		fprintf(w->out, "%.17g", v);
}

static void str(jw *w, const char *k, const char *s)
{
	item(w, k);
	if (s)
		rep_json_string(w->out, s);
	else
		fputs("null", w->out);
}

static void boolean(jw *w, const char *k, int b)
{
	item(w, k);
	fputs(b ? "true" : "false", w->out);
}

static void run_info(jw *w, const char *k, const ana_profile *p, const char *name)
{
	open_(w, k, '{');
	str(w, "path", name);
	str(w, "command", p->nprocs ? p->procs[0].file.cmdline : NULL);
	open_(w, "files", '[');
	for (uint32_t i = 0; i < p->nprocs; i++)
		str(w, NULL, p->procs[i].file.path);
	close_(w, ']');
	open_(w, "warnings", '[');
	for (uint32_t i = 0; i < p->nwarnings; i++)
		str(w, NULL, p->warnings[i]);
	close_(w, ']');
	close_(w, '}');
}

static void side(jw *w, const char *k, const ana_cmp_side *s)
{
	open_(w, k, '{');
	num(w, "wall_ns", (double)s->wall_ns);
	num(w, "cpu_ns", (double)s->cpu_ns);
	num(w, "steps", (double)s->steps);
	num(w, "setup_ns", s->setup_ns);
	num(w, "step_mean_ns", s->step_mean_ns);
	num(w, "step_p50_ns", s->step_p50_ns);
	num(w, "steps_per_s", s->steps_per_s);
	num(w, "items", (double)s->items);
	num(w, "items_per_s", s->items_per_s);
	num(w, "max_rss_bytes", s->max_rss_bytes ? (double)s->max_rss_bytes : NAN);
	num(w, "cpu_samples", (double)s->cpu_weight);
	close_(w, '}');
}

static void test_keys(jw *w, const ana_cmp_test *t)
{
	num(w, "speedup", t->speedup);
	num(w, "ci_low", t->ci_low);
	num(w, "ci_high", t->ci_high);
	num(w, "p_value", t->p_value);
	boolean(w, "tested", t->tested);
	boolean(w, "significant", t->significant);
	str(w, "verdict", rep_compare_verdict(t));
}

static double ratio(double a, double b) { return a > 0 && b > 0 ? a / b : NAN; }

static void finding(jw *w, const ana_cmp_finding *f)
{
	const ana_finding *x = f->b ? f->b : f->a;
	open_(w, NULL, '{');
	str(w, "type", x->type);
	str(w, "subject", x->subject);
	str(w, "severity", ana_severity_name(x->severity));
	str(w, "evidence", x->evidence);
	str(w, "recommendation", x->recommendation);
	num(w, "expected_gain_pct", x->expected_gain_pct);
	num(w, "expected_gain_bytes", x->expected_gain_bytes);
	if (f->a && f->b) {
		str(w, "a_severity", ana_severity_name(f->a->severity));
		str(w, "a_evidence", f->a->evidence);
		num(w, "a_expected_gain_pct", f->a->expected_gain_pct);
		num(w, "a_expected_gain_bytes", f->a->expected_gain_bytes);
	}
	close_(w, '}');
}

int rep_compare_json(FILE *out, const ana_compare_result *r, const rep_compare_options *o)
{
	jw w = {.out = out, .depth = 1}; /* inside the top-level object */
	fputc('{', out);
	str(&w, "schema", ANA_COMPARE_SCHEMA);
	char v[32];
	snprintf(v, sizeof v, "%d.%d.%d", FENNEC_VERSION_MAJOR, FENNEC_VERSION_MINOR, FENNEC_VERSION_PATCH);
	str(&w, "fennec_version", v);
	run_info(&w, "a", r->a.p, o->a_name);
	run_info(&w, "b", r->b.p, o->b_name);

	open_(&w, "options", '{');
	num(&w, "alpha", r->opt.alpha);
	num(&w, "confidence", r->opt.confidence);
	num(&w, "resamples", r->opt.resamples);
	num(&w, "seed", (double)r->opt.seed);
	num(&w, "threshold_pct", r->opt.threshold_pct);
	close_(&w, '}');

	open_(&w, "summary", '{');
	side(&w, "a", &r->a);
	side(&w, "b", &r->b);
	num(&w, "wall_speedup", r->wall_speedup);
	num(&w, "cpu_speedup", ratio((double)r->a.cpu_ns, (double)r->b.cpu_ns));
	num(&w, "step_speedup", r->steps.speedup);
	num(&w, "faster_regions", r->faster);
	num(&w, "slower_regions", r->slower);
	boolean(&w, "significant", r->faster || r->slower || r->steps.significant);
	close_(&w, '}');

	open_(&w, "steps", '{');
	num(&w, "a_count", (double)r->a.p->step_ns.n);
	num(&w, "b_count", (double)r->b.p->step_ns.n);
	num(&w, "a_mean_ns", r->a.step_mean_ns);
	num(&w, "b_mean_ns", r->b.step_mean_ns);
	test_keys(&w, &r->steps);
	close_(&w, '}');

	open_(&w, "regions", '[');
	for (uint32_t i = 0; i < r->nregions; i++) {
		const ana_cmp_region *x = &r->regions[i];
		open_(&w, NULL, '{');
		str(&w, "name", x->name);
		str(&w, "path", x->path);
		str(&w, "status", ana_cmp_status_name(x->status));
		num(&w, "a_total_ns", (double)x->a_total_ns);
		num(&w, "b_total_ns", (double)x->b_total_ns);
		num(&w, "a_mean_ns", x->a_mean_ns);
		num(&w, "b_mean_ns", x->b_mean_ns);
		num(&w, "a_count", (double)x->a_count);
		num(&w, "b_count", (double)x->b_count);
		test_keys(&w, &x->test);
		close_(&w, '}');
	}
	close_(&w, ']');

	boolean(&w, "functions_compared", r->has_funcs);
	open_(&w, "functions", '[');
	for (uint32_t i = 0; i < r->nfuncs; i++) {
		const ana_cmp_func *f = &r->funcs[i];
		open_(&w, NULL, '{');
		str(&w, "name", f->name);
		str(&w, "module", f->module);
		str(&w, "status", ana_cmp_status_name(f->status));
		num(&w, "a_self_samples", (double)f->a_self);
		num(&w, "b_self_samples", (double)f->b_self);
		num(&w, "a_self_pct", f->a_self_pct);
		num(&w, "b_self_pct", f->b_self_pct);
		num(&w, "delta_pct", f->delta_pct);
		num(&w, "a_self_ns", f->a_self_ns);
		num(&w, "b_self_ns", f->b_self_ns);
		num(&w, "speedup", ratio(f->a_self_ns, f->b_self_ns));
		num(&w, "p_value", f->p_value);
		num(&w, "p_holm", f->p_holm);
		boolean(&w, "significant", f->significant);
		close_(&w, '}');
	}
	close_(&w, ']');

	open_(&w, "findings", '{');
	for (int st = ANA_CMP_FIXED; st <= ANA_CMP_UNCHANGED; st++) {
		open_(&w, ana_cmp_finding_status_name(st), '[');
		for (uint32_t i = 0; i < r->nfindings; i++)
			if (r->findings[i].status == st)
				finding(&w, &r->findings[i]);
		close_(&w, ']');
	}
	close_(&w, '}');
	fputs("\n}\n", out);
	return ferror(out) ? FENNEC_EIO : 0;
}

/*
 * compare_text.c - the text report of `fennec compare`: the two summaries side by side,
 * the regions with their speedups, intervals, p-values and verdicts, the functions whose
 * sampled CPU share moved, and the findings fixed, new and unchanged. Ends with a one-line
 * verdict. Colour only when asked.
 */
#include "report/compare.h"

#include <math.h>

typedef struct paint {
	const char *bold, *green, *red, *dim, *reset;
} paint;

const char *rep_compare_verdict(const ana_cmp_test *t)
{
	if (!t->tested)
		return "not tested";
	if (!t->significant)
		return "no significant change";
	return t->speedup > 1 ? "faster" : "slower";
}

static const char *verdict_color(const paint *c, const ana_cmp_test *t)
{
	return !t->significant ? "" : t->speedup > 1 ? c->green : c->red;
}

static const char *fmt_p(double p, char *buf, size_t n)
{
	if (isnan(p))
		snprintf(buf, n, "-");
	else if (p < 0.001)
		snprintf(buf, n, "<0.001");
	else
		snprintf(buf, n, "%.3f", p);
	return buf;
}

static const char *fmt_x(double v, char *buf, size_t n)
{
	if (isfinite(v))
		snprintf(buf, n, "%.2fx", v);
	else
		snprintf(buf, n, "-");
	return buf;
}

static const char *fmt_ci(const ana_cmp_test *t, char *buf, size_t n)
{
	if (isfinite(t->ci_low) && isfinite(t->ci_high))
		snprintf(buf, n, "%.2f-%.2f", t->ci_low, t->ci_high);
	else
		snprintf(buf, n, "-");
	return buf;
}

static const char *fmt_rate(double v, char *buf, size_t n)
{
	if (isfinite(v))
		snprintf(buf, n, "%.2f", v);
	else
		snprintf(buf, n, "-");
	return buf;
}

static const char *fmt_bytes(uint64_t v, char *buf, size_t n)
{
	if (!v)
		snprintf(buf, n, "-");
	else if (v >= 1ull << 30)
		snprintf(buf, n, "%.2f GiB", (double)v / (1ull << 30));
	else
		snprintf(buf, n, "%.1f MiB", (double)v / (1ull << 20));
	return buf;
}

/* One summary row: the two values and, when both are numbers, B relative to A. */
static void row(FILE *out, const char *what, const char *a, const char *b, const char *change)
{
	fprintf(out, "  %-22s %14s %14s   %s\n", what, a, b, change ? change : "");
}

/* "2.00x faster" style change of a time, from the ratio A / B. */
static const char *time_change(double a, double b, char *buf, size_t n)
{
	if (!(a > 0) || !(b > 0))
		return "";
	double s = a / b;
	snprintf(buf, n, "%.2fx (%+.1f%% time)", s, 100 * (b / a - 1));
	return buf;
}

static const char *rate_change(double a, double b, char *buf, size_t n)
{
	if (!(a > 0) || !(b > 0))
		return "";
	snprintf(buf, n, "%+.1f%%", 100 * (b / a - 1));
	return buf;
}

static void summary(FILE *out, const ana_compare_result *r, const paint *c)
{
	const ana_cmp_side *a = &r->a, *b = &r->b;
	char x[32], y[32], z[96];
	fprintf(out, "\n%sSummary%s %s(speedup = A / B: 2.00x means B takes half the time)%s\n", c->bold, c->reset, c->dim,
		c->reset);
	row(out, "", "A", "B", "change");
	row(out, "wall", ana_fmt_ns((double)a->wall_ns, x, sizeof x), ana_fmt_ns((double)b->wall_ns, y, sizeof y),
	    time_change((double)a->wall_ns, (double)b->wall_ns, z, sizeof z));
	row(out, "CPU (user + sys)", ana_fmt_ns((double)a->cpu_ns, x, sizeof x), ana_fmt_ns((double)b->cpu_ns, y, sizeof y),
	    time_change((double)a->cpu_ns, (double)b->cpu_ns, z, sizeof z));
	snprintf(x, sizeof x, "%llu", (unsigned long long)a->steps);
	snprintf(y, sizeof y, "%llu", (unsigned long long)b->steps);
	row(out, "steps", x, y, NULL);
	if (a->steps || b->steps) {
		row(out, "set-up (before step 1)", ana_fmt_ns(a->setup_ns, x, sizeof x), ana_fmt_ns(b->setup_ns, y, sizeof y),
		    time_change(a->setup_ns, b->setup_ns, z, sizeof z));
		row(out, "step mean", ana_fmt_ns(a->step_mean_ns, x, sizeof x), ana_fmt_ns(b->step_mean_ns, y, sizeof y),
		    time_change(a->step_mean_ns, b->step_mean_ns, z, sizeof z));
		row(out, "step median", ana_fmt_ns(a->step_p50_ns, x, sizeof x), ana_fmt_ns(b->step_p50_ns, y, sizeof y),
		    time_change(a->step_p50_ns, b->step_p50_ns, z, sizeof z));
		row(out, "steps/s", fmt_rate(a->steps_per_s, x, sizeof x), fmt_rate(b->steps_per_s, y, sizeof y),
		    rate_change(a->steps_per_s, b->steps_per_s, z, sizeof z));
		if (isfinite(a->items_per_s) || isfinite(b->items_per_s))
			row(out, "items/s", fmt_rate(a->items_per_s, x, sizeof x), fmt_rate(b->items_per_s, y, sizeof y),
			    rate_change(a->items_per_s, b->items_per_s, z, sizeof z));
	}
	row(out, "peak memory (max RSS)", fmt_bytes(a->max_rss_bytes, x, sizeof x), fmt_bytes(b->max_rss_bytes, y, sizeof y),
	    rate_change((double)a->max_rss_bytes, (double)b->max_rss_bytes, z, sizeof z));
	const ana_cmp_test *t = &r->steps;
	if (t->tested) {
		char s[32], ci[48], p[16];
		fprintf(out, "  steps: speedup %s, %.0f%% CI %s, p %s: %s%s%s\n", fmt_x(t->speedup, s, sizeof s),
			100 * r->opt.confidence, fmt_ci(t, ci, sizeof ci), fmt_p(t->p_value, p, sizeof p), verdict_color(c, t),
			rep_compare_verdict(t), c->reset);
	}
}

static void regions(FILE *out, const ana_compare_result *r, const rep_compare_options *o, const paint *c)
{
	fprintf(out, "\n%sRegions%s %s(per-call durations: Mann-Whitney p, bootstrap %.0f%% CI of the speedup)%s\n",
		c->bold, c->reset, c->dim, 100 * r->opt.confidence, c->reset);
	if (!r->nregions) {
		fprintf(out, "  none in either recording\n");
		return;
	}
	fprintf(out, "  %-30s %10s %10s %15s %8s %11s %7s  %s\n", "region", "A mean", "B mean", "calls A/B", "speedup",
		"CI", "p", "verdict");
	uint32_t shown = 0, n = 0;
	for (uint32_t i = 0; i < r->nregions; i++) {
		const ana_cmp_region *x = &r->regions[i];
		if (x->status != ANA_CMP_BOTH)
			continue;
		n++;
		if (o->max_regions && shown >= (uint32_t)o->max_regions)
			continue;
		shown++;
		char ma[32], mb[32], calls[48], s[32], ci[48], p[16];
		snprintf(calls, sizeof calls, "%llu/%llu", (unsigned long long)x->a_count, (unsigned long long)x->b_count);
		fprintf(out, "  %-30s %10s %10s %15s %8s %11s %7s  %s%s%s\n", x->path, ana_fmt_ns(x->a_mean_ns, ma, sizeof ma),
			ana_fmt_ns(x->b_mean_ns, mb, sizeof mb), calls, fmt_x(x->test.speedup, s, sizeof s),
			fmt_ci(&x->test, ci, sizeof ci), fmt_p(x->test.p_value, p, sizeof p), verdict_color(c, &x->test),
			rep_compare_verdict(&x->test), c->reset);
	}
	if (shown < n)
		fprintf(out, "  ... %u more in both (--max-regions 0 shows all)\n", n - shown);
	for (int st = ANA_CMP_REMOVED; st <= ANA_CMP_ADDED; st++)
		for (uint32_t i = 0; i < r->nregions; i++) {
			const ana_cmp_region *x = &r->regions[i];
			if (x->status != st)
				continue;
			char t[32];
			fprintf(out, "  %-30s %s (only in %s: %llu calls, %s)\n", x->path, ana_cmp_status_name(st),
				st == ANA_CMP_REMOVED ? "A" : "B",
				(unsigned long long)(st == ANA_CMP_REMOVED ? x->a_count : x->b_count),
				ana_fmt_ns((double)(st == ANA_CMP_REMOVED ? x->a_total_ns : x->b_total_ns), t, sizeof t));
		}
}

static void functions(FILE *out, const ana_compare_result *r, const rep_compare_options *o, const paint *c)
{
	fprintf(out, "\n%sFunctions%s %s(sampled CPU self share, estimates; two-proportion test, Holm-adjusted p)%s\n",
		c->bold, c->reset, c->dim, c->reset);
	if (!r->has_funcs) {
		fprintf(out, "  not compared: %s has no CPU samples (record with --sample=cpu)\n",
			!r->a.cpu_weight ? "A" : "B");
		return;
	}
	fprintf(out, "  %-40s %9s %9s %9s %7s  %s\n", "function", "A self", "B self", "change", "p", "verdict");
	uint32_t limit = o->max_funcs ? (uint32_t)o->max_funcs : r->nfuncs, shown = 0;
	for (uint32_t i = 0; i < r->nfuncs && shown < limit; i++, shown++) {
		const ana_cmp_func *f = &r->funcs[i];
		char p[16];
		const char *col = !f->significant ? "" : f->delta_pct < 0 ? c->green : c->red;
		const char *v = !f->significant ? "no significant change" : f->delta_pct < 0 ? "smaller share" : "larger share";
		fprintf(out, "  %-40.40s %8.2f%% %8.2f%% %+8.2fpp %7s  %s%s%s\n", f->name, f->a_self_pct, f->b_self_pct,
			f->delta_pct, fmt_p(f->p_holm, p, sizeof p), col, v, c->reset);
	}
	if (shown < r->nfuncs)
		fprintf(out, "  ... %u more\n", r->nfuncs - shown);
	fprintf(out, "  %son-CPU samples: A %llu, B %llu; shares are of each run's own total%s\n", c->dim,
		(unsigned long long)r->a.cpu_weight, (unsigned long long)r->b.cpu_weight, c->reset);
}

static void findings(FILE *out, const ana_compare_result *r, const paint *c)
{
	fprintf(out, "\n%sFindings%s\n", c->bold, c->reset);
	if (!r->nfindings) {
		fprintf(out, "  none in either recording\n");
		return;
	}
	for (uint32_t i = 0; i < r->nfindings; i++) {
		const ana_cmp_finding *f = &r->findings[i];
		const ana_finding *x = f->b ? f->b : f->a;
		const char *col = f->status == ANA_CMP_FIXED ? c->green : f->status == ANA_CMP_NEW ? c->red : "";
		fprintf(out, "  %s%-9s%s %-6s %s: %s\n", col, ana_cmp_finding_status_name(f->status), c->reset,
			ana_severity_name(x->severity), x->type, x->subject ? x->subject : "");
	}
}

static void verdict(FILE *out, const ana_compare_result *r, const paint *c)
{
	fprintf(out, "\n%sVerdict:%s ", c->bold, c->reset);
	if (!r->faster && !r->slower && !(r->steps.tested && r->steps.significant))
		fprintf(out, "no significant change");
	else {
		fprintf(out, "%u region%s faster, %u slower", r->faster, r->faster == 1 ? "" : "s", r->slower);
		if (r->steps.tested)
			fprintf(out, "; steps: %s", rep_compare_verdict(&r->steps));
	}
	uint32_t added = 0, removed = 0;
	for (uint32_t i = 0; i < r->nregions; i++) {
		added += r->regions[i].status == ANA_CMP_ADDED;
		removed += r->regions[i].status == ANA_CMP_REMOVED;
	}
	if (added || removed)
		fprintf(out, "; %u region%s added, %u removed", added, added == 1 ? "" : "s", removed);
	fputc('\n', out);
}

/* The command line of a recording's first process. */
static const char *command(const ana_profile *p)
{
	return p->nprocs && p->procs[0].file.cmdline ? p->procs[0].file.cmdline : "";
}

int rep_compare_text(FILE *out, const ana_compare_result *r, const rep_compare_options *o)
{
	paint c = {"", "", "", "", ""};
	if (o->color)
		c = (paint){"\033[1m", "\033[32m", "\033[31m", "\033[2m", "\033[0m"};
	fprintf(out, "%sfennec compare%s\n", c.bold, c.reset);
	fprintf(out, "  A: %s  (%s)%s\n", o->a_name ? o->a_name : "A", command(r->a.p),
		r->a.p->cut_short ? "  (cut short)" : "");
	fprintf(out, "  B: %s  (%s)%s\n", o->b_name ? o->b_name : "B", command(r->b.p),
		r->b.p->cut_short ? "  (cut short)" : "");
	/* Each side's warnings (a recording cut short, events dropped): a report written to a
	 * file must carry them, not only the terminal it was made in. */
	for (int side = 0; side < 2; side++) {
		const ana_profile *p = side ? r->b.p : r->a.p;
		for (uint32_t i = 0; i < p->nwarnings; i++)
			fprintf(out, "  %swarning (%s): %s%s\n", c.red, side ? "B" : "A", p->warnings[i], c.reset);
	}
	summary(out, r, &c);
	regions(out, r, o, &c);
	functions(out, r, o, &c);
	findings(out, r, &c);
	verdict(out, r, &c);
	return ferror(out) ? FENNEC_EIO : 0;
}

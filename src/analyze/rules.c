/*
 * rules.c - the bottleneck rules (docs/bottlenecks.md) over the analysis model. Each
 * rule turns numbers into a finding with a severity from documented thresholds, the
 * evidence, a recommendation specific to that evidence, and an upper bound on the gain.
 */
#include "analyze/analyze.h"

#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

static char *fmtstr(const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;
	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	return s;
}

static ana_finding *add_finding(ana_profile *p, const char *type, ana_severity sev)
{
	if (p->nfindings == p->findings_cap) {
		uint32_t cap = p->findings_cap ? p->findings_cap * 2 : 8;
		ana_finding *f = realloc(p->findings, cap * sizeof *f);
		if (!f)
			return NULL;
		p->findings = f;
		p->findings_cap = cap;
	}
	ana_finding *f = &p->findings[p->nfindings++];
	memset(f, 0, sizeof *f);
	f->type = type;
	f->severity = sev;
	return f;
}

static void num(ana_finding *f, const char *key, double v)
{
	if (f->nnumbers < (int)ARRAY_LEN(f->numbers))
		f->numbers[f->nnumbers++] = (ana_kv){key, v};
}

/*
 * hot_operation: a region whose total time is a large share of the wall time. Wrappers
 * (regions whose children account for 90 % or more of their time) are skipped: the
 * children carry the finding. Severity: HIGH above 30 %, MEDIUM from 10 %, LOW from the
 * configured threshold when that is below 10 %.
 */
static void rule_hot_operation(ana_profile *p)
{
	double thr = p->opt.hot_threshold_pct;
	for (uint32_t i = 0; i < p->nnodes; i++) {
		ana_node *n = &p->nodes[i];
		if (n->share_pct < thr || n->dist.count == 0)
			continue;
		if (n->first_child != ANA_NONE && n->child_ns >= 0.9 * (double)n->total_ns)
			continue;
		ana_severity sev = n->share_pct > 30 ? ANA_HIGH : n->share_pct >= 10 ? ANA_MEDIUM : ANA_LOW;
		ana_finding *f = add_finding(p, "hot_operation", sev);
		if (!f)
			return;
		char a[32], b[32], c[32];
		double self_frac = n->total_ns ? (double)n->self_ns / (double)n->total_ns : 0;
		f->subject = strdup(n->path ? n->path : p->names[n->name]);
		f->evidence = fmtstr("%s takes %.1f%% of the wall time (%s in %llu calls, mean %s, p99 %s); "
				     "%.0f%% of it is its own code, %.0f%% in nested regions",
				     f->subject, n->share_pct, ana_fmt_ns((double)n->total_ns, a, sizeof a),
				     (unsigned long long)n->dist.count, ana_fmt_ns(n->dist.mean, b, sizeof b),
				     ana_fmt_ns(n->dist.p99, c, sizeof c), 100 * self_frac, 100 * (1 - self_frac));
		num(f, "share_pct", n->share_pct);
		num(f, "self_pct", n->self_pct);
		num(f, "total_ns", (double)n->total_ns);
		num(f, "count", (double)n->dist.count);
		num(f, "mean_ns", n->dist.mean);
		num(f, "p99_ns", n->dist.p99);
		/* The largest child, to point at when the time is not the region's own. */
		uint32_t top = ANA_NONE;
		for (uint32_t k = n->first_child; k != ANA_NONE; k = p->nodes[k].next_sibling)
			if (top == ANA_NONE || p->nodes[k].total_ns > p->nodes[top].total_ns)
				top = k;
		if (self_frac < 0.5 && top != ANA_NONE)
			f->recommendation = fmtstr("Most of %s is spent in nested regions; start with %s "
						   "(%.1f%% of the wall time), then the rest of %s's children.",
						   f->subject, p->nodes[top].path, p->nodes[top].share_pct, f->subject);
		else if (n->dist.count >= 10000 && n->dist.mean < 20000)
			f->recommendation = fmtstr("%s is called %llu times at %s each: per-call overhead "
						   "dominates. Batch the work into fewer, larger calls or fuse it "
						   "with its caller; if the region itself is too fine-grained, "
						   "move it outward.",
						   f->subject, (unsigned long long)n->dist.count,
						   ana_fmt_ns(n->dist.mean, b, sizeof b));
		else if (n->dist.p99 > 3 * n->dist.p50 && n->dist.count >= 20)
			f->recommendation = fmtstr("%s is slow on some calls: p99 %s vs median %s. Find what "
						   "differs on the slow calls (input size, cache misses, I/O, "
						   "allocation) before optimising the common case.",
						   f->subject, ana_fmt_ns(n->dist.p99, c, sizeof c),
						   ana_fmt_ns(n->dist.p50, a, sizeof a));
		else
			f->recommendation = fmtstr("%s's own code dominates: profile it with a CPU sampler "
						   "(perf record -g) to find its hot functions and lines, then "
						   "reduce the work per call "
						   "(algorithm, vectorisation, data layout) or run it in parallel. "
						   "Halving it saves about %.0f%% of the run.",
						   f->subject, n->share_pct / 2 > 100 ? 50.0 : n->share_pct / 2);
		f->expected_gain_pct = n->share_pct > 100 ? 100 : n->share_pct;
	}
}

static int cmp_finding(const void *a, const void *b)
{
	const ana_finding *x = a, *y = b;
	if (x->severity != y->severity)
		return (int)y->severity - (int)x->severity;
	return (y->expected_gain_pct > x->expected_gain_pct) - (y->expected_gain_pct < x->expected_gain_pct);
}

void ana_rules(ana_profile *p)
{
	rule_hot_operation(p);
	if (p->nfindings > 1)
		qsort(p->findings, p->nfindings, sizeof *p->findings, cmp_finding);
}

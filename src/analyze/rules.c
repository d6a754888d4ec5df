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

static const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s && s[1] ? s + 1 : path;
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
		else if (p->smp.present && p->smp.all.nodes && p->smp.all.nodes[i].ntop) {
			/* The samples inside the region say where its own code spends the time. */
			const ana_node_samples *ns = &p->smp.all.nodes[i];
			const ana_func *fn = &p->smp.funcs[ns->top[0]];
			char where[512] = "";
			if (fn->file != ANA_NONE && fn->line)
				snprintf(where, sizeof where, " (%s:%u)", base_name(p->names[fn->file]), fn->line);
			f->recommendation = fmtstr("%s's own code dominates, and %.0f%% of its %llu on-CPU samples are "
						   "in %s%s: reduce the work there (algorithm, vectorisation, data "
						   "layout) or run it in parallel. Halving the region saves about "
						   "%.0f%% of the run.",
						   f->subject, ns->top_pct[0], (unsigned long long)ns->samples[ANA_CPU],
						   p->names[fn->name], where, n->share_pct / 2 > 100 ? 50.0 : n->share_pct / 2);
		} else
			f->recommendation = fmtstr("%s's own code dominates: record it with CPU sampling on (the "
						   "default of fennec record; not --sample off) to see its hot "
						   "functions and lines, then reduce the work per call "
						   "(algorithm, vectorisation, data layout) or run it in parallel. "
						   "Halving it saves about %.0f%% of the run.",
						   f->subject, n->share_pct / 2 > 100 ? 50.0 : n->share_pct / 2);
		f->expected_gain_pct = n->share_pct > 100 ? 100 : n->share_pct;
	}
}

/*
 * hot_function: a function whose own code (sampled self weight) is a large share of the
 * on-CPU samples. Severity as for hot_operation: HIGH above 30 %, MEDIUM from 10 %, LOW
 * from a configured threshold below 10 %. Needs HOT_FUNCTION_MIN_TOTAL on-CPU samples and
 * HOT_FUNCTION_MIN_SELF in the function, so that a share is not noise; a flat profile, with
 * no function at the threshold, gives no finding. At most HOT_FUNCTION_MAX findings.
 */
#define HOT_FUNCTION_MIN_TOTAL 50
#define HOT_FUNCTION_MIN_SELF 10
#define HOT_FUNCTION_MAX 5

/* The status of module path `path` (names index): the worst over the processes. */
static int module_status(const ana_sampling *s, uint32_t path)
{
	int st = 0;
	for (uint32_t i = 0; i < s->nmodules; i++)
		if (s->modules[i].path == path && (s->modules[i].status == 1 || s->modules[i].status == 2))
			st = s->modules[i].status;
	return st;
}

static void rule_hot_function(ana_profile *p)
{
	const ana_sampling *s = &p->smp;
	const ana_sample_view *v = &s->all;
	if (!s->present || v->samples[ANA_CPU] < HOT_FUNCTION_MIN_TOTAL || !v->weight[ANA_CPU])
		return;
	double thr = p->opt.hot_threshold_pct;
	/* Code of a module that could not be read (missing, or rebuilt since) has one name per
	 * address, which says nothing: its share is judged as a whole, per module. */
	for (uint32_t m = 0; m < s->nmodules; m++) {
		const ana_module *mod = &s->modules[m];
		if ((mod->status != 1 && mod->status != 2) || p->names[mod->path][0] == '[')
			continue;
		int first = 1;
		for (uint32_t k = 0; k < m && first; k++)
			first = s->modules[k].path != mod->path;
		if (!first)
			continue; /* the same file in another process: counted once */
		uint64_t self = 0;
		for (uint32_t i = 0; i < v->nfuncs[ANA_CPU]; i++)
			if (s->funcs[v->funcs[ANA_CPU][i].func].module == mod->path)
				self += v->funcs[ANA_CPU][i].self;
		double pct = 100.0 * (double)self / (double)v->weight[ANA_CPU];
		if (pct < thr || self < HOT_FUNCTION_MIN_SELF)
			continue;
		ana_finding *f = add_finding(p, "hot_function", pct > 30 ? ANA_HIGH : pct >= 10 ? ANA_MEDIUM : ANA_LOW);
		if (!f)
			return;
		const char *path = p->names[mod->path];
		f->subject = fmtstr("%s (not symbolised)", base_name(path));
		f->evidence = fmtstr("%.1f%% of the on-CPU samples (%llu of %llu) are in the code of %s, which could "
				     "not be symbolised: %s",
				     pct, (unsigned long long)self, (unsigned long long)v->weight[ANA_CPU], path,
				     mod->status == 2 ? "the file there now has another build id than the recorded one"
						      : "the file is gone");
		num(f, "self_pct", pct);
		num(f, "self_samples", (double)self);
		num(f, "cpu_samples", (double)v->weight[ANA_CPU]);
		f->recommendation = fmtstr("Analyse where the recorded %s is, or install its debug file (the one "
					   "with the recorded build id, under /usr/lib/debug/.build-id/), and run fennec "
					   "analyze again: its hot functions will then have names and lines.",
					   base_name(path));
		double cpu_all = (double)(p->cpu_user_ns + p->cpu_sys_ns);
		double frac = p->wall_ns && cpu_all > 0 && cpu_all < (double)p->wall_ns ? cpu_all / (double)p->wall_ns : 1;
		f->expected_gain_pct = pct * frac;
	}
	/* The part of the wall time that is CPU time bounds what faster code can save. */
	double cpu = (double)(p->cpu_user_ns + p->cpu_sys_ns);
	double cpu_frac = p->wall_ns && cpu > 0 ? cpu / (double)p->wall_ns : 1;
	if (cpu_frac > 1)
		cpu_frac = 1;
	int fired = 0;
	for (uint32_t i = 0; i < v->nfuncs[ANA_CPU] && fired < HOT_FUNCTION_MAX; i++) {
		const ana_hot_func *h = &v->funcs[ANA_CPU][i];
		if (h->self_pct < thr)
			break; /* sorted by self weight */
		const ana_func *fn = &s->funcs[h->func];
		const char *name = p->names[fn->name];
		if (h->self < HOT_FUNCTION_MIN_SELF || !strcmp(name, "[unknown]") || module_status(s, fn->module))
			continue;
		ana_severity sev = h->self_pct > 30 ? ANA_HIGH : h->self_pct >= 10 ? ANA_MEDIUM : ANA_LOW;
		ana_finding *f = add_finding(p, "hot_function", sev);
		if (!f)
			return;
		fired++;
		f->subject = strdup(name);
		/* Its hottest line, and that line's share of the function's own samples. */
		char where[512] = "", line_note[640] = "";
		double line_pct = 0;
		if (h->file != ANA_NONE && h->line) {
			snprintf(where, sizeof where, "%s:%u", base_name(p->names[h->file]), h->line);
			for (uint32_t k = 0; k < v->nlines[ANA_CPU]; k++) {
				const ana_hot_line *l = &v->lines[ANA_CPU][k];
				if (l->file == h->file && l->line == h->line) {
					line_pct = h->self ? 100.0 * (double)l->self / (double)h->self : 0;
					break;
				}
			}
			snprintf(line_note, sizeof line_note, ", hottest at %s (%.0f%% of its samples)", where,
				 line_pct > 100 ? 100.0 : line_pct);
		}
		const char *caller = h->caller != ANA_NONE ? p->names[s->funcs[h->caller].name] : NULL;
		f->evidence = fmtstr("%s has %.1f%% of the on-CPU samples in its own code (%llu of %llu)%s; "
				     "%.1f%% with what it calls%s%s",
				     name, h->self_pct, (unsigned long long)h->self, (unsigned long long)v->weight[ANA_CPU],
				     line_note, h->total_pct, caller ? "; called from " : "", caller ? caller : "");
		num(f, "self_pct", h->self_pct);
		num(f, "total_pct", h->total_pct);
		num(f, "self_samples", (double)h->self);
		num(f, "total_samples", (double)h->total);
		num(f, "cpu_samples", (double)v->weight[ANA_CPU]);
		if (h->line)
			num(f, "line", h->line);
		if (caller)
			num(f, "caller_pct", h->caller_pct);
		f->expected_gain_pct = h->self_pct * cpu_frac;
		/* A library function (libc's memcpy, libm's expf) is rarely the thing to change:
		 * its caller decides how often and how much. */
		int library = caller && fn->module != s->funcs[h->caller].module;
		if (library)
			f->recommendation = fmtstr("%s is library code (%s), reached mostly from %s (%.0f%% of its "
						   "samples): make %s call it less often or on more data at a time "
						   "(batch, cache its results, pick a cheaper routine). Removing its "
						   "time would save up to %.0f%% of the run.",
						   name, base_name(p->names[fn->module]), caller, h->caller_pct, caller,
						   f->expected_gain_pct);
		else
			f->recommendation = fmtstr("Optimise %s%s%s: reduce the work of its own code (algorithm, "
						   "vectorisation, data layout, memory access order)%s%s%s. Halving it "
						   "saves about %.0f%% of the run.",
						   name, where[0] ? ", starting at " : "", where,
						   caller ? ", or call it less from " : "", caller ? caller : "",
						   caller ? (h->caller_pct >= 99.5 ? " (its only caller)" : " (its main caller)") : "",
						   f->expected_gain_pct / 2);
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
	rule_hot_function(p);
	if (p->nfindings > 1)
		qsort(p->findings, p->nfindings, sizeof *p->findings, cmp_finding);
}

/*
 * rules.c - the bottleneck rules (docs/bottlenecks.md) over the analysis model. Each
 * rule turns numbers into a finding with a severity from documented thresholds, the
 * evidence, a recommendation specific to that evidence, and an upper bound on the gain.
 */
#include "analyze/analyze.h"

#include <math.h>
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

/* "function (file:line)" of a heap site's allocation point, into buf. */
static const char *site_where(const ana_profile *p, const ana_mem_site *s, char *buf, size_t n)
{
	const char *fn = ana_mem_site_name(p, s);
	if (s->stack != ANA_NONE) {
		const ana_stack *st = &p->smp.stacks[s->stack];
		for (uint32_t k = st->n; k-- > 0;) {
			const ana_loc *l = &p->smp.locs[st->locs[k]];
			if (!strcmp(p->names[p->smp.funcs[l->func].name], fn)) {
				if (l->file != ANA_NONE && l->line) {
					snprintf(buf, n, "%s (%s:%u)", fn, base_name(p->names[l->file]), l->line);
					return buf;
				}
				break;
			}
		}
	}
	snprintf(buf, n, "%s", fn);
	return buf;
}

/* The function that called a heap site's allocating function, or NULL. */
static const char *site_caller(const ana_profile *p, const ana_mem_site *s)
{
	if (s->stack == ANA_NONE)
		return NULL;
	const char *fn = ana_mem_site_name(p, s);
	const ana_stack *st = &p->smp.stacks[s->stack];
	for (uint32_t k = st->n; k-- > 1;)
		if (!strcmp(p->names[p->smp.funcs[p->smp.locs[st->locs[k]].func].name], fn))
			return p->names[p->smp.funcs[p->smp.locs[st->locs[k - 1]].func].name];
	return NULL;
}

/* The site with the largest `live` (unfreed) bytes, runtime excluded; NULL if none. */
static const ana_mem_site *top_live_site(const ana_profile *p)
{
	const ana_mem_site *best = NULL;
	for (uint32_t i = 0; i < p->mem.nsites; i++) {
		const ana_mem_site *s = &p->mem.sites[i];
		if (!s->runtime && s->live_count >= 0.5 && (!best || s->live_bytes > best->live_bytes))
			best = s;
	}
	return best;
}

#define LEAK_MAX 5
/*
 * memory_leak, two ways. Growth: live heap regressed on steps (or seconds without steps)
 * grows at least the threshold (default 10 MB) per step with r^2 >= 0.8 over 3 or more
 * points; HIGH when r^2 >= 0.9 and the growth over the run is half the peak or more.
 * Unfreed at exit (full mode exact; sampled mode an estimate, said so): one finding per
 * allocation stack, the largest LEAK_MAX; HIGH from 10% of the peak heap or 100 MiB,
 * MEDIUM from 1 MiB, else LOW. Memory findings save memory, not time: expected gain 0.
 */
static void rule_memory_leak(ana_profile *p)
{
	const ana_memory *m = &p->mem;
	if (!m->present)
		return;
	char a[32], b[32], c[64], w[512];
	double thr = p->opt.leak_threshold_bytes > 0 ? p->opt.leak_threshold_bytes : 10e6;
	if (m->has_trend && m->trend_points >= 3 && m->slope >= thr && m->r2 >= 0.8) {
		double span = 0;
		for (size_t i = 0; i < m->npoints; i++)
			if (m->points[i].process == m->peak_process)
				span = m->trend_per_step ? (double)m->points[i].step
							 : (double)(m->points[i].t_ns - m->points[0].t_ns) / 1e9;
		double growth = m->slope * span;
		ana_severity sev = m->r2 >= 0.9 && growth >= 0.5 * (double)m->peak_bytes ? ANA_HIGH : ANA_MEDIUM;
		ana_finding *f = add_finding(p, "memory_leak", sev);
		if (!f)
			return;
		const char *per = m->trend_per_step ? "step" : "second";
		const ana_mem_site *top = top_live_site(p);
		f->subject = fmtstr("heap grows %s per %s", ana_fmt_bytes(m->slope, a, sizeof a), per);
		f->evidence = fmtstr("live heap grows by %s per %s (linear fit over %u points, r^2 = %.3f), %s over the run; "
				     "threshold %s per %s%s%s",
				     ana_fmt_bytes(m->slope, a, sizeof a), per, m->trend_points, m->r2, ana_fmt_bytes(growth, b, sizeof b),
				     ana_fmt_bytes(thr, c, sizeof c), per, top ? "; most unfreed memory comes from " : "",
				     top ? site_where(p, top, w, sizeof w) : "");
		num(f, m->trend_per_step ? "slope_bytes_per_step" : "slope_bytes_per_s", m->slope);
		num(f, "r2", m->r2);
		num(f, "points", m->trend_points);
		num(f, "threshold_bytes", thr);
		f->recommendation = fmtstr("Something keeps memory alive from one %s to the next%s%s: find what holds "
					   "references across %ss (caches without a bound, lists that only grow, "
					   "tensors or buffers kept for logging) and free or bound it. Record with "
					   "--memory=full to see every unfreed allocation with its stack.",
					   per, top ? ", most of it allocated at " : "", top ? site_where(p, top, w, sizeof w) : "",
					   per);
		f->expected_gain_pct = 0;
	}
	uint32_t idx[LEAK_MAX];
	uint32_t n = 0;
	/* the largest unfreed sites, runtime excluded */
	for (uint32_t i = 0; i < m->nsites; i++) {
		const ana_mem_site *s = &m->sites[i];
		if (s->runtime || s->live_count < 0.5 || s->live_bytes < 1)
			continue;
		uint32_t k = n < LEAK_MAX ? n++ : LEAK_MAX;
		if (k == LEAK_MAX && s->live_bytes <= m->sites[idx[LEAK_MAX - 1]].live_bytes)
			continue;
		if (k == LEAK_MAX)
			k = LEAK_MAX - 1;
		while (k > 0 && m->sites[idx[k - 1]].live_bytes < s->live_bytes) {
			idx[k] = idx[k - 1];
			k--;
		}
		idx[k] = i;
	}
	int full = m->mode == FMT_MEM_FULL;
	for (uint32_t i = 0; i < n; i++) {
		const ana_mem_site *s = &m->sites[idx[i]];
		double bytes = s->live_bytes, count = s->live_count;
		ana_severity sev = bytes >= 0.1 * (double)m->peak_bytes || bytes >= 100.0 * 1048576 ? ANA_HIGH
				 : bytes >= 1048576 ? ANA_MEDIUM : ANA_LOW;
		ana_finding *f = add_finding(p, "memory_leak", sev);
		if (!f)
			return;
		site_where(p, s, w, sizeof w);
		const char *via = site_caller(p, s);
		f->subject = fmtstr("unfreed at exit: %s%s%s", w, via ? " called from " : "", via ? via : "");
		f->evidence = fmtstr("%s%s in %.0f allocation%s made at %s %s never freed%s%s",
				     full ? "" : "about ", ana_fmt_bytes(bytes, a, sizeof a), count, count >= 1.5 ? "s" : "", w,
				     count >= 1.5 ? "were" : "was",
				     full ? "" : " (an estimate from sampled allocations; record with --memory=full for exact numbers)",
				     s->node != ANA_NONE ? "" : "");
		num(f, "bytes", full ? bytes : round(bytes));
		num(f, "count", full ? count : round(count));
		num(f, "estimated", full ? 0 : 1);
		if (s->node != ANA_NONE)
			f->recommendation = fmtstr("Free what %s allocates (inside region %s) when it is no longer needed, or "
						   "give it an owner that does; if it must live until exit, allocate it once.",
						   w, p->nodes[s->node].path ? p->nodes[s->node].path : "?");
		else
			f->recommendation = fmtstr("Free what %s allocates when it is no longer needed, or give it an owner "
						   "that does; if it must live until exit, allocate it once.", w);
		f->expected_gain_pct = 0;
	}
}

/*
 * allocation_churn: many heap allocations per step (default 10,000, HIGH from 100,000), or
 * without steps more than 1,000,000 per second. Each costs tens of nanoseconds plus cache
 * misses; the largest sites by count are named.
 */
static void rule_allocation_churn(ana_profile *p)
{
	const ana_memory *m = &p->mem;
	if (!m->present || !m->allocs)
		return;
	int per_step = p->steps >= 3 && isfinite(m->allocs_per_step);
	double rate = per_step ? m->allocs_per_step : m->alloc_rate_per_s;
	double thr = per_step ? 10000 : 1e6;
	if (!isfinite(rate) || rate < thr)
		return;
	const ana_mem_site *top = NULL;
	for (uint32_t i = 0; i < m->nsites; i++)
		if (!top || m->sites[i].allocs > top->allocs)
			top = &m->sites[i];
	ana_finding *f = add_finding(p, "allocation_churn", rate >= 10 * thr ? ANA_HIGH : ANA_MEDIUM);
	if (!f)
		return;
	char w[512] = "", a[32];
	if (top)
		site_where(p, top, w, sizeof w);
	double top_pct = top && m->allocs ? 100.0 * top->allocs / (double)m->allocs : 0;
	f->subject = fmtstr("%.0f allocations per %s", rate, per_step ? "step" : "second");
	f->evidence = fmtstr("%llu heap allocations (%s) in the run, %.0f per %s%s%s%s",
			     (unsigned long long)m->allocs, ana_fmt_bytes((double)m->alloc_bytes, a, sizeof a), rate,
			     per_step ? "step" : "second", top ? "; the most from " : "", w,
			     top ? "" : "");
	num(f, per_step ? "allocations_per_step" : "allocations_per_s", rate);
	num(f, "allocations", (double)m->allocs);
	num(f, "top_site_pct", top_pct);
	if (m->mode == FMT_MEM_FULL)
		num(f, "temporary", (double)m->temporary);
	f->recommendation = fmtstr("Allocate less often%s%s (%.0f%% of the allocations): reuse buffers across %ss, "
				   "reserve capacity up front, or use an arena or pool for short-lived objects.",
				   top ? " at " : "", w, top_pct, per_step ? "step" : "iteration");
	f->expected_gain_pct = 0;
}

/*
 * memory_bound / compute_bound (docs/roofline.md): a region annotated with
 * fennec_region_work, of at least --roofline-min-share % of the wall in its own code,
 * placed on this machine's roofline. Below the ridge point it is memory bound, above it
 * compute bound; what reaching its roof would save (self share x (1 - roof %)) is the
 * gain and sets the severity: HIGH from 10 points, MEDIUM from 3, LOW under.
 */
static void rule_roofline(ana_profile *p)
{
	const ana_roofline *rl = &p->roof;
	if (rl->calibrated != 1)
		return;
	for (uint32_t i = 0; i < rl->n; i++) {
		const ana_roof *r = &rl->r[i];
		const ana_node *n = &p->nodes[r->node];
		if (n->self_pct < p->opt.roofline_min_share_pct || !isfinite(r->roof_pct))
			continue;
		double head = r->roof_pct >= 100 ? 0 : 1 - r->roof_pct / 100;
		double gain = n->self_pct * head;
		ana_finding *f = add_finding(p, r->memory_bound ? "memory_bound" : "compute_bound",
					     gain >= 10 ? ANA_HIGH : gain >= 3 ? ANA_MEDIUM : ANA_LOW);
		if (!f)
			return;
		char t[32], bw[32], rb[32];
		ana_fmt_ns((double)n->self_ns, t, sizeof t);
		ana_fmt_bytes(r->bytes_per_s, bw, sizeof bw);
		ana_fmt_bytes(r->roof, rb, sizeof rb);
		f->subject = fmtstr("%s", n->path);
		if (r->flops > 0)
			f->evidence = fmtstr("%s does %.3g FLOP per byte: %.3g GFLOP/s and %s/s over %s of its own time (%.1f%% of the "
					     "wall, %s); the %s roof at that intensity is %.3g GFLOP/s (ridge point %.2f FLOP/byte), "
					     "so it reaches %.0f%% of it%s",
					     n->path, r->ai, r->flops_per_s / 1e9, bw, t, n->self_pct,
					     r->one_thread ? "one thread" : "several threads", r->memory_bound ? "memory" : "compute",
					     r->roof / 1e9, r->ridge, r->roof_pct,
					     r->memory_bound && r->roof_pct > 110 ? " (above the memory roof: its data comes from cache)" : "");
		else
			f->evidence = fmtstr("%s moves %s/s over %s of its own time (%.1f%% of the wall, %s) and does no annotated "
					     "FLOP; peak bandwidth is %s/s, so it reaches %.0f%% of it",
					     n->path, bw, t, n->self_pct, r->one_thread ? "one thread" : "several threads", rb,
					     r->roof_pct);
		num(f, "arithmetic_intensity", r->ai);
		num(f, "flops_per_s", r->flops_per_s);
		num(f, "bytes_per_s", r->bytes_per_s);
		num(f, "roof", r->roof);
		num(f, "roof_pct", r->roof_pct);
		num(f, "self_pct", n->self_pct);
		int at_roof = r->roof_pct >= 80;
		if (r->memory_bound && at_roof)
			f->recommendation = fmtstr("%s runs at the memory roof: only moving fewer bytes helps. Fuse passes over the "
						   "same data, tile or block so that data is reused from cache, or use smaller types "
						   "(fp32, bf16, int8) where precision allows.", n->path);
		else if (r->memory_bound)
			f->recommendation = fmtstr("%s is memory bound but uses %.0f%% of the bandwidth its intensity allows: make "
						   "its accesses contiguous and prefetchable (unit stride, structure of arrays, no "
						   "pointer chasing)%s, then raise its intensity by tiling for cache or fusing loops. "
						   "Reaching the roof would save up to %.1f%% of the run.",
						   n->path, r->roof_pct, r->one_thread ? " and spread it over the cores" : "", gain);
		else if (at_roof)
			f->recommendation = fmtstr("%s runs at the compute roof: only fewer operations help (a cheaper algorithm, "
						   "lower precision, skipping work that does not change the result).", n->path);
		else
			f->recommendation = fmtstr("%s is compute bound at %.0f%% of peak FLOP/s: vectorise it (-O3 -march=native, "
						   "contiguous aligned data, restrict pointers, no branches in the inner loop), keep "
						   "enough independent FMAs in flight%s. Reaching the roof would save up to %.1f%% of "
						   "the run.", n->path, r->roof_pct, r->one_thread ? " and use all cores" : "", gain);
		f->expected_gain_pct = gain;
	}
}

/* "rank 3", or "recording 2" for a recording without a rank. */
static const char *rank_name(const ana_profile *p, uint32_t r, char *buf, size_t n)
{
	if (p->ranks[r].rank >= 0)
		snprintf(buf, n, "rank %lld", (long long)p->ranks[r].rank);
	else
		snprintf(buf, n, "recording %u", r);
	return buf;
}

/*
 * rank_imbalance: the ranks of a job do unequal work, so all wait for the slowest (the
 * straggler) at every synchronisation. Measured on the ranks' work (region time less
 * communication regions), else their mean step time, else their wall time (ranks.c):
 * imbalance = max / mean - 1. Fires from the threshold (default 5 %); MEDIUM from 10 %,
 * HIGH from 30 %. The expected gain is the time the other ranks wait for the slowest (its
 * measure less the others' mean), as a share of its wall time: an upper bound, reached if
 * the slowest rank did no more than the others.
 */
static void rule_rank_imbalance(ana_profile *p)
{
	const ana_balance *b = &p->balance;
	double thr = p->opt.imbalance_threshold_pct > 0 ? p->opt.imbalance_threshold_pct : 5;
	if (!b->present || b->imbalance_pct < thr || b->mean_ns <= 0)
		return;
	ana_severity sev = b->imbalance_pct >= 30 ? ANA_HIGH : b->imbalance_pct >= 10 ? ANA_MEDIUM : ANA_LOW;
	ana_finding *f = add_finding(p, "rank_imbalance", sev);
	if (!f)
		return;
	const ana_rank *r = &p->ranks[b->slowest];
	char rn[32], fn[32], a[32], c[32], d[32], w[32];
	double wait = b->max_ns - b->others_mean_ns;
	const char *what = !strcmp(b->basis, "work") ? "of work (region time outside communication)"
			 : !strcmp(b->basis, "steps") ? "per step (mean)" : "of wall time";
	rank_name(p, b->slowest, rn, sizeof rn);
	rank_name(p, b->fastest, fn, sizeof fn);
	f->subject = fmtstr("%s is the straggler: %.1f%% imbalance over %u ranks", rn, b->imbalance_pct, p->nranks);
	char where[1024] = "";
	size_t k = 0;
	for (uint32_t i = 0; i < b->nlosses && k < sizeof where; i++) {
		const ana_loss *l = &b->losses[i];
		k += (size_t)snprintf(where + k, sizeof where - k, "%s%s (%s vs %s on the others, +%s)", i ? ", " : "",
				      p->nodes[l->node].path, ana_fmt_ns((double)l->rank_ns, a, sizeof a),
				      ana_fmt_ns(l->others_ns, c, sizeof c), ana_fmt_ns(l->excess_ns, d, sizeof d));
	}
	f->evidence = fmtstr("%s has %s %s against a mean of %s over %u ranks (imbalance = max / mean - 1 = %.1f%%; "
			     "%s has the least, %s); the others wait about %s for it%s%s",
			     rn, ana_fmt_ns(b->max_ns, a, sizeof a), what, ana_fmt_ns(b->mean_ns, c, sizeof c), p->nranks,
			     b->imbalance_pct, fn, ana_fmt_ns(b->min_ns, d, sizeof d), ana_fmt_ns(wait, w, sizeof w),
			     k ? "; it loses the time in " : "", where);
	num(f, "imbalance_pct", b->imbalance_pct);
	num(f, "rank", (double)r->rank);
	num(f, "ranks", p->nranks);
	num(f, "max_ns", b->max_ns);
	num(f, "mean_ns", b->mean_ns);
	num(f, "others_mean_ns", b->others_mean_ns);
	num(f, "wait_ns", wait);
	if (isfinite(b->step_imbalance_pct))
		num(f, "step_imbalance_pct", b->step_imbalance_pct);
	double gain = r->wall_ns ? 100 * wait / (double)r->wall_ns : 0;
	f->expected_gain_pct = gain > 100 ? 100 : gain;
	if (b->nlosses) {
		const ana_loss *l = &b->losses[0];
		const char *region = p->nodes[l->node].path;
		f->recommendation = fmtstr("Balance %s: on %s it takes %s, %.2fx the other ranks' mean of %s. Give %s a "
					   "smaller share of the data or domain (or split %s's work by cost, not by count); "
					   "if the shares are already equal, find what makes %s slower there (a slower or "
					   "busier node, a larger or harder partition). Balanced, the other ranks would stop "
					   "waiting about %s, up to %.0f%% of the run.",
					   region, rn, ana_fmt_ns((double)l->rank_ns, a, sizeof a),
					   l->others_ns > 0 ? (double)l->rank_ns / l->others_ns : 0, ana_fmt_ns(l->others_ns, c, sizeof c),
					   rn, region, rn, ana_fmt_ns(wait, w, sizeof w), f->expected_gain_pct);
	} else
		f->recommendation = fmtstr("%s does more than the others and they wait for it. Mark the phases of a step with "
					   "regions (fennec_region_begin/end) to see where it loses the time, then give it a "
					   "smaller share of the work.",
					   rn);
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
	rule_memory_leak(p);
	rule_allocation_churn(p);
	rule_roofline(p);
	rule_rank_imbalance(p);
	ana_gpu_rules(p);
	if (p->nfindings > 1)
		qsort(p->findings, p->nfindings, sizeof *p->findings, cmp_finding);
}

/*
 * rules_memory.c - the heap's rules (docs/bottlenecks.md, docs/memory.md): memory_leak, by
 * the live heap's growth per step and by what was unfreed at exit, and its steady growth
 * under the threshold; allocation_churn, allocations per step. Run by ana_rules()
 * (rules.c) over memory.c's and memsites.c's part of the model.
 */
#include "analyze/aggregate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "analyze/rules.h"

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

/* The stack whose live bytes grew fastest over the peak process's timeline, on the heap
 * trend's basis, with a fit of r^2 >= 0.5 and at least a tenth of the heap's slope; NULL
 * when none. */
static const ana_mem_series *growing_series(const ana_profile *p)
{
	const ana_memory *m = &p->mem;
	const ana_mem_series *best = NULL;
	for (uint32_t i = 0; i < m->nseries; i++) {
		const ana_mem_series *sr = &m->series[i];
		if (sr->has_trend && sr->per_step == m->trend_per_step && m->sites[sr->site].process == m->peak_process &&
		    sr->r2 >= 0.5 && sr->slope >= 0.1 * m->slope && (!best || sr->slope > best->slope))
			best = sr;
	}
	return best;
}

#define LEAK_MAX 5
#define LEAK_REPEATED 10 /* unfreed blocks of one finding that make it HIGH (with 10 % of the peak) */

/* ana_mem_rows()' key of an unfreed site: what its finding names (allocating function and
 * line, its caller, region), so that sites which read the same, in any process, are one
 * finding. A pool's 8 workers that leak at one line, or a function that leaks when called
 * from 3 places in main, made 8 or 3 findings that read the same. */
static uint64_t leak_key_of(const ana_profile *p, const ana_mem_site *s)
{
	char w[512];
	const char *via = site_caller(p, s), *parts[] = {site_where(p, s, w, sizeof w), via ? via : ""};
	return ana_mem_key(parts, 2, s->node);
}

/*
 * memory_leak, two ways. Growth: live heap regressed on steps (or seconds without steps)
 * grows at least the threshold (default 10 MB) per step with r^2 >= 0.8 over 3 or more
 * points, and still grows at the end (grows_at_end()); HIGH when r^2 >= 0.9 and the
 * growth over the run is half the peak or more. It names the stack whose live bytes grew fastest (growing_series()), else the one with most
 * unfreed at exit.
 * Unfreed at exit (full mode exact; sampled mode an estimate, said so): one finding per
 * group of allocation stacks that read the same (leak_key_of()), the largest LEAK_MAX;
 * HIGH from 100 MiB, or from 10% of the peak heap in LEAK_REPEATED blocks or more; MEDIUM
 * from 1 MiB or 10% of the peak; else LOW.
 * Memory findings save memory, not time: their expected gain is in bytes (the growth over
 * the run; the bytes unfreed), in time 0.
 */
static double leak_threshold(const ana_profile *p)
{
	return p->opt.leak_threshold_bytes > 0 ? p->opt.leak_threshold_bytes : 10e6;
}

/* A trend long enough to judge: on steps, or on seconds over one second or more (a run
 * that short is start-up and loading, jq parsing its input, which reads as a leak). */
static int trend_judged(const ana_memory *m)
{
	return m->has_trend && (m->trend_per_step || m->trend_span >= 1.0);
}

/* Whether the heap still grows at the end: over the last quarter of the trend's span, at a
 * quarter of its slope or more. A program that loads, then runs on a flat heap (python3
 * importing torch for 1.8 s, then training for one more second) fits a line over the whole
 * run with r^2 = 0.93, and is no leak: its heap has stopped growing. */
static int grows_at_end(const ana_memory *m)
{
	return m->tail_slope >= 0.25 * m->slope;
}

/* Whether the growth clears the threshold: steep growth, or slower growth that adds up to
 * ten thresholds over the run on a close fit (2 MiB a step for 400 steps), and the heap
 * still grows at the end. */
static int growth_over_threshold(const ana_profile *p)
{
	const ana_memory *m = &p->mem;
	double thr = leak_threshold(p);
	int steep = m->slope >= thr, adds_up = m->r2 >= 0.9 && m->trend_growth >= 10 * thr;
	return trend_judged(m) && m->trend_points >= 3 && m->r2 >= 0.8 && (steep || adds_up) && grows_at_end(m);
}

void rule_memory_leak(ana_profile *p)
{
	const ana_memory *m = &p->mem;
	if (!m->present)
		return;
	char a[32], b[32], c[64], w[512];
	double thr = leak_threshold(p);
	double growth = m->trend_growth;
	int steep = m->slope >= thr;
	if (growth_over_threshold(p)) {
		ana_severity sev = m->r2 >= 0.9 && growth >= 0.5 * (double)m->peak_bytes ? ANA_HIGH : ANA_MEDIUM;
		ana_finding *f = ana_finding_add(p, "memory_leak", sev);
		if (!f)
			return;
		const char *per = m->trend_per_step ? "step" : "second";
		const ana_mem_series *g = growing_series(p);
		const ana_mem_site *top = g ? &m->sites[g->site] : top_live_site(p);
		char gs[160] = "";
		if (g) {
			char d[32];
			snprintf(gs, sizeof gs, " (its live bytes grow %s per %s, r^2 = %.3f)", ana_fmt_bytes(g->slope, d, sizeof d),
				 per, g->r2);
		}
		f->subject = ana_strf("heap grows %s per %s", ana_fmt_bytes(m->slope, a, sizeof a), per);
		char t[32];
		f->evidence = ana_strf("live heap grows by %s per %s (linear fit over %u points, r^2 = %.3f), %s over the run, "
				       "and %s per %s over its last quarter; threshold %s per %s%s%s%s%s",
				       ana_fmt_bytes(m->slope, a, sizeof a), per, m->trend_points, m->r2, ana_fmt_bytes(growth, b, sizeof b),
				       ana_fmt_bytes(m->tail_slope, t, sizeof t), per,
				       ana_fmt_bytes(thr, c, sizeof c), per, steep ? "" : ", or ten times that over the run",
				       g ? "; the stack that grows most: " : top ? "; most unfreed memory comes from " : "",
				       top ? site_where(p, top, w, sizeof w) : "", gs);
		ana_finding_num(f, m->trend_per_step ? "slope_bytes_per_step" : "slope_bytes_per_s", m->slope);
		ana_finding_num(f, m->trend_per_step ? "tail_slope_bytes_per_step" : "tail_slope_bytes_per_s", m->tail_slope);
		if (g)
			ana_finding_num(f, m->trend_per_step ? "stack_slope_bytes_per_step" : "stack_slope_bytes_per_s", g->slope);
		ana_finding_num(f, "r2", m->r2);
		ana_finding_num(f, "points", m->trend_points);
		ana_finding_num(f, "growth_bytes", growth > 0 ? growth : 0);
		ana_finding_num(f, "threshold_bytes", thr);
		f->recommendation = ana_strf("Something keeps memory alive from one %s to the next%s%s: find what holds "
					     "references across %ss (caches without a bound, lists that only grow, "
					     "tensors or buffers kept for logging) and free or bound it.%s",
					     per, top ? ", most of it allocated at " : "", top ? site_where(p, top, w, sizeof w) : "",
					     per, m->mode == FMT_MEM_FULL ? "" : " Record with --memory=full to see every unfreed "
					     "allocation with its stack.");
		f->expected_gain_pct = 0;
		f->expected_gain_bytes = growth > 0 ? growth : 0;
	}
	ana_mem_row g[LEAK_MAX];
	uint32_t n = ana_mem_rows(p, ANA_MEM_LIVE, g, LEAK_MAX, leak_key_of);
	int full = m->mode == FMT_MEM_FULL;
	for (uint32_t i = 0; i < n; i++) {
		const ana_mem_site *s = &m->sites[g[i].site];
		double bytes = g[i].bytes, count = g[i].count;
		/* A leak repeats: stacks that left LEAK_REPEATED or more blocks are one; a block or
		 * a few are as often made once and kept on purpose (python3 leaves two arenas of
		 * 192 KiB, a quarter of its heap: HIGH before). */
		int repeated = count >= LEAK_REPEATED - 0.5;
		int big = bytes >= 0.1 * (double)m->peak_bytes;
		ana_severity sev = bytes >= 100.0 * 1048576 || (big && repeated) ? ANA_HIGH
				 : bytes >= 1048576 || big ? ANA_MEDIUM : ANA_LOW;
		ana_finding *f = ana_finding_add(p, "memory_leak", sev);
		if (!f)
			return;
		site_where(p, s, w, sizeof w);
		const char *via = site_caller(p, s);
		f->subject = ana_strf("unfreed at exit: %s%s%s", w, via ? " called from " : "", via ? via : "");
		/* a block whose FREE record was lost reads as unfreed */
		char lost[160] = "";
		if (m->dropped_frees)
			snprintf(lost, sizeof lost, "; %llu free%s of the run %s lost (the heap buffer was full): up to as many "
				 "of these blocks may have been freed", (unsigned long long)m->dropped_frees,
				 m->dropped_frees > 1 ? "s" : "", m->dropped_frees > 1 ? "were" : "was");
		char from[96] = "", st[40] = "", pr[40] = "";
		if (g[i].sites > g[i].processes)
			snprintf(st, sizeof st, "from %u call stacks", g[i].sites);
		if (g[i].processes > 1)
			snprintf(pr, sizeof pr, "in %u processes", g[i].processes);
		if (st[0] || pr[0])
			snprintf(from, sizeof from, " (%s%s%s)", st, st[0] && pr[0] ? ", " : "", pr);
		/* sampled: the estimate with its standard error, which a stack of few sampled blocks
		 * makes as large as the estimate itself */
		char eb[48] = "", ec[48] = "", xb[32];
		if (!full) {
			snprintf(eb, sizeof eb, " (+- %s)", ana_fmt_bytes(sqrt(g[i].bytes_var), xb, sizeof xb));
			snprintf(ec, sizeof ec, " (+- %.0f)", sqrt(g[i].count_var));
		}
		f->evidence = ana_strf("%s%s%s in %.0f%s allocation%s made at %s%s %s never freed%s%s%s",
				       full ? "" : "about ", ana_fmt_bytes(bytes, a, sizeof a), eb, count, ec, count >= 1.5 ? "s" : "",
				       w, from, count >= 1.5 ? "were" : "was",
				       s->scanned ? ", and no pointer to them was left at exit" : "",
				       full ? "" : " (an estimate from sampled allocations, +- one standard error, made to agree with the "
				       "exact count of blocks live at the end; record with --memory=full for exact numbers)",
				       lost);
		if (m->dropped_frees)
			ana_finding_num(f, "lost_frees", (double)m->dropped_frees);
		ana_finding_num(f, "bytes", full ? bytes : round(bytes));
		ana_finding_num(f, "count", full ? count : round(count));
		ana_finding_num(f, "estimated", full ? 0 : 1);
		ana_finding_num(f, "bytes_stderr", full ? 0 : sqrt(g[i].bytes_var));
		ana_finding_num(f, "count_stderr", full ? 0 : sqrt(g[i].count_var));
		ana_finding_num(f, "stacks", g[i].sites);
		ana_finding_num(f, "processes", g[i].processes);
		if (s->node != ANA_NONE)
			f->recommendation = ana_strf("Free what %s allocates (inside region %s) when it is no longer needed, or "
						     "give it an owner that does; if it must live until exit, allocate it once.",
						     w, p->nodes[s->node].path ? p->nodes[s->node].path : "?");
		else
			f->recommendation = ana_strf("Free what %s allocates when it is no longer needed, or give it an owner "
						     "that does; if it must live until exit, allocate it once.", w);
		f->expected_gain_pct = 0;
		f->expected_gain_bytes = bytes;
	}
}

/*
 * memory_leak, steady growth: growth under the threshold that is still a leak by its
 * shape, relative to the heap. The live heap's fit (on steps, or on seconds without them)
 * holds over STEADY_MIN_POINTS points or more with r^2 >= STEADY_MIN_R2, the growth over
 * them is at least STEADY_MIN_SHARE of the peak heap and STEADY_MIN_BYTES, and the later
 * half of the points grows at least half as fast on a fit of r^2 >= 0.8, and the last
 * quarter of the span a quarter as fast (grows_at_end()): the heap still grows at the
 * end. A flat heap has no growth; a warm-up then a plateau, or a cache that
 * fills to its bound, has levelled off in the later half. HIGH, like the growth over the
 * threshold with the same fit and share; it names the stack that grows.
 */
#define STEADY_MIN_POINTS 10
#define STEADY_MIN_R2 0.95
#define STEADY_MIN_SHARE 0.5
#define STEADY_MIN_BYTES (4.0 * 1048576)

void rule_memory_steady_growth(ana_profile *p)
{
	const ana_memory *m = &p->mem;
	if (!m->present || !trend_judged(m) || growth_over_threshold(p) || m->slope <= 0 || !m->peak_bytes)
		return;
	double growth = m->trend_growth, share = growth / (double)m->peak_bytes;
	share = share > 1 ? 1 : share;
	if (m->trend_points < STEADY_MIN_POINTS || m->r2 < STEADY_MIN_R2 || growth < STEADY_MIN_BYTES ||
	    share < STEADY_MIN_SHARE || m->late_slope < 0.5 * m->slope || m->late_r2 < 0.8 || !grows_at_end(m))
		return;
	ana_finding *f = ana_finding_add(p, "memory_leak", ANA_HIGH);
	if (!f)
		return;
	char a[32], b[32], c[32], d[32], e[32], w[512];
	const char *per = m->trend_per_step ? "step" : "second";
	const ana_mem_series *g = growing_series(p);
	const ana_mem_site *top = g ? &m->sites[g->site] : top_live_site(p);
	char gs[200] = "";
	if (g)
		snprintf(gs, sizeof gs, "; the stack that grows most: %s (its live bytes grow %s per %s, r^2 = %.3f)",
			 site_where(p, top, w, sizeof w), ana_fmt_bytes(g->slope, e, sizeof e), per, g->r2);
	else if (top)
		snprintf(gs, sizeof gs, "; most unfreed memory comes from %s", site_where(p, top, w, sizeof w));
	f->subject = ana_strf("heap grows steadily, %s per %s", ana_fmt_bytes(m->slope, a, sizeof a), per);
	f->evidence = ana_strf("live heap grows by %s per %s over %u %s (linear fit, r^2 = %.3f), %s in all: %.0f%% of the "
			       "peak heap of %s, and as fast at the end (%s per %s over the later half, r^2 = %.3f). Under "
			       "the threshold of %s per %s, but growth this steady and this large a share of the heap "
			       "is a leak%s",
			       ana_fmt_bytes(m->slope, a, sizeof a), per, m->trend_points, m->trend_per_step ? "steps" : "points",
			       m->r2, ana_fmt_bytes(growth, b, sizeof b), 100 * share,
			       ana_fmt_bytes((double)m->peak_bytes, c, sizeof c), ana_fmt_bytes(m->late_slope, d, sizeof d), per,
			       m->late_r2, ana_fmt_bytes(leak_threshold(p), e, sizeof e), per, gs);
	ana_finding_num(f, m->trend_per_step ? "slope_bytes_per_step" : "slope_bytes_per_s", m->slope);
	ana_finding_num(f, m->trend_per_step ? "late_slope_bytes_per_step" : "late_slope_bytes_per_s", m->late_slope);
	if (g)
		ana_finding_num(f, m->trend_per_step ? "stack_slope_bytes_per_step" : "stack_slope_bytes_per_s", g->slope);
	ana_finding_num(f, "r2", m->r2);
	ana_finding_num(f, "late_r2", m->late_r2);
	ana_finding_num(f, "points", m->trend_points);
	ana_finding_num(f, "growth_bytes", growth);
	ana_finding_num(f, "growth_share_pct", 100 * share);
	ana_finding_num(f, "threshold_bytes", leak_threshold(p));
	f->recommendation = ana_strf("Something keeps memory alive from one %s to the next%s%s: find what holds references "
				     "across %ss (caches without a bound, lists that only grow, tensors or buffers kept for "
				     "logging) and free or bound it.%s",
				     per, top ? ", most of it allocated at " : "", top ? site_where(p, top, w, sizeof w) : "", per,
				     m->mode == FMT_MEM_FULL ? "" : " Record with --memory=full to see every unfreed allocation "
				     "with its stack.");
	f->expected_gain_pct = 0;
	f->expected_gain_bytes = growth;
}

/*
 * allocation_churn: many heap allocations per step (default 10,000, HIGH from 100,000), or
 * without steps more than 1,000,000 per second. Each costs tens of nanoseconds plus cache
 * misses; the largest sites by count are named.
 */
void rule_allocation_churn(ana_profile *p)
{
	const ana_memory *m = &p->mem;
	if (!m->present || !m->allocs)
		return;
	int per_step = p->steps >= 3 && isfinite(m->allocs_per_step);
	double rate = per_step ? m->allocs_per_step : m->alloc_rate_per_s;
	double thr = per_step ? 10000 : 1e6;
	/* Without steps, a run that made fewer allocations than a second's worth at the
	 * threshold spent under ~50 ms in them, whatever its rate (4,063 in 3 ms read as 1.4
	 * million a second). */
	if (!isfinite(rate) || rate < thr || (!per_step && (double)m->allocs < thr))
		return;
	const ana_mem_site *top = NULL;
	for (uint32_t i = 0; i < m->nsites; i++)
		if (!top || m->sites[i].allocs > top->allocs)
			top = &m->sites[i];
	ana_finding *f = ana_finding_add(p, "allocation_churn", rate >= 10 * thr ? ANA_HIGH : ANA_MEDIUM);
	if (!f)
		return;
	char w[512] = "", a[32];
	if (top)
		site_where(p, top, w, sizeof w);
	double top_pct = top && m->allocs ? 100.0 * top->allocs / (double)m->allocs : 0;
	f->subject = ana_strf("%.0f allocations per %s", rate, per_step ? "step" : "second");
	/* sampled: the stack's count is an estimate; its standard error says how far to trust it */
	double top_err = top && m->allocs && m->mode != FMT_MEM_FULL ? 100.0 * sqrt(top->allocs_var) / (double)m->allocs : 0;
	char est[160] = "";
	if (top && m->mode != FMT_MEM_FULL)
		snprintf(est, sizeof est, " (about %.0f of them, %.0f%% +- %.0f points: an estimate from sampled allocations)",
			 top->allocs, top_pct, top_err);
	f->evidence = ana_strf("%llu heap allocations (%s) in the run, %.0f per %s%s%s%s",
			       (unsigned long long)m->allocs, ana_fmt_bytes((double)m->alloc_bytes, a, sizeof a), rate,
			       per_step ? "step" : "second", top ? "; the most from " : "", w, est);
	ana_finding_num(f, per_step ? "allocations_per_step" : "allocations_per_s", rate);
	ana_finding_num(f, "allocations", (double)m->allocs);
	ana_finding_num(f, "top_site_pct", top_pct);
	ana_finding_num(f, "top_site_pct_stderr", top_err);
	if (m->mode == FMT_MEM_FULL)
		ana_finding_num(f, "temporary", (double)m->temporary);
	f->recommendation = ana_strf("Allocate less often%s%s (%.0f%% of the allocations): reuse buffers across %ss, "
				     "reserve capacity up front, or use an arena or pool for short-lived objects.",
				     top ? " at " : "", w, top_pct, per_step ? "step" : "iteration");
	f->expected_gain_pct = 0;
}

/*
 * rules_steps.c - the rules on steps and ranks (docs/bottlenecks.md): rank_imbalance, the
 * ranks of a job doing unequal work (ranks.c's measures); step_variance, steps much slower
 * than the median, periodic or not, and the region that holds their excess; input_bound,
 * the computing thread's time spent loading data within its steps. Run by ana_rules()
 * (rules.c).
 */
#include "analyze/aggregate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "analyze/rules.h"

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
void rule_rank_imbalance(ana_profile *p)
{
	const ana_balance *b = &p->balance;
	double thr = p->opt.imbalance_threshold_pct > 0 ? p->opt.imbalance_threshold_pct : 5;
	if (!b->present || b->imbalance_pct < thr || b->mean_ns <= 0)
		return;
	ana_severity sev = b->imbalance_pct >= 30 ? ANA_HIGH : b->imbalance_pct >= 10 ? ANA_MEDIUM : ANA_LOW;
	ana_finding *f = ana_finding_add(p, "rank_imbalance", sev);
	if (!f)
		return;
	const ana_rank *r = &p->ranks[b->slowest];
	char rn[32], fn[32], a[32], c[32], d[32], w[32];
	double wait = b->max_ns - b->others_mean_ns;
	const char *what = !strcmp(b->basis, "work") ? "of work (region time outside communication)"
			 : !strcmp(b->basis, "samples") ? "of work (on-CPU time outside communication code, sampled)"
			 : !strcmp(b->basis, "steps") ? "per step (mean)" : "of wall time";
	char nm[512];
	rank_name(p, b->slowest, rn, sizeof rn);
	rank_name(p, b->fastest, fn, sizeof fn);
	f->subject = ana_strf("%s is the straggler: %.1f%% imbalance over %u ranks", rn, b->imbalance_pct, p->nranks);
	char where[1024] = "";
	size_t k = 0;
	for (uint32_t i = 0; i < b->nlosses && k < sizeof where; i++) {
		const ana_loss *l = &b->losses[i];
		k += (size_t)snprintf(where + k, sizeof where - k, "%s%s (%s vs %s on the others, +%s)", i ? ", " : "",
				      ana_loss_name(p, l, nm, sizeof nm), ana_fmt_ns((double)l->rank_ns, a, sizeof a),
				      ana_fmt_ns(l->others_ns, c, sizeof c), ana_fmt_ns(l->excess_ns, d, sizeof d));
	}
	f->evidence = ana_strf("%s has %s %s against a mean of %s over %u ranks (imbalance = max / mean - 1 = %.1f%%; "
			       "%s has the least, %s); the others wait about %s for it%s%s",
			       rn, ana_fmt_ns(b->max_ns, a, sizeof a), what, ana_fmt_ns(b->mean_ns, c, sizeof c), p->nranks,
			       b->imbalance_pct, fn, ana_fmt_ns(b->min_ns, d, sizeof d), ana_fmt_ns(wait, w, sizeof w),
			       k ? "; it loses the time in " : "", where);
	ana_finding_num(f, "imbalance_pct", b->imbalance_pct);
	ana_finding_num(f, "rank", (double)r->rank);
	ana_finding_num(f, "ranks", p->nranks);
	ana_finding_num(f, "max_ns", b->max_ns);
	ana_finding_num(f, "mean_ns", b->mean_ns);
	ana_finding_num(f, "others_mean_ns", b->others_mean_ns);
	ana_finding_num(f, "wait_ns", wait);
	if (isfinite(b->step_imbalance_pct))
		ana_finding_num(f, "step_imbalance_pct", b->step_imbalance_pct);
	double gain = r->wall_ns ? 100 * wait / (double)r->wall_ns : 0;
	f->expected_gain_pct = gain > 100 ? 100 : gain;
	if (b->nlosses && b->losses[0].node == ANA_NONE) {
		const ana_loss *l = &b->losses[0];
		const char *fname = ana_loss_name(p, l, nm, sizeof nm);
		f->recommendation = ana_strf("%s spends %s more than the other ranks' mean in %s (%s there, %s on the others), "
					     "and they wait for it at every synchronisation. If %s is extra work only %s does "
					     "(logging, evaluation, checkpointing on one rank), move it off the step or share "
					     "it out; if the ranks' data differ, give %s a smaller or cheaper share. Balanced, "
					     "the other ranks would stop waiting about %s, up to %.0f%% of the run.",
					     rn, ana_fmt_ns(l->excess_ns, d, sizeof d), fname, ana_fmt_ns((double)l->rank_ns, a, sizeof a),
					     ana_fmt_ns(l->others_ns, c, sizeof c), fname, rn, rn, ana_fmt_ns(wait, w, sizeof w),
					     f->expected_gain_pct);
	} else if (b->nlosses) {
		const ana_loss *l = &b->losses[0];
		const char *region = p->nodes[l->node].path;
		f->recommendation = ana_strf("Balance %s: on %s it takes %s, %.2fx the other ranks' mean of %s. Give %s a "
					     "smaller share of the data or domain (or split %s's work by cost, not by count); "
					     "if the shares are already equal, find what makes %s slower there (a slower or "
					     "busier node, a larger or harder partition). Balanced, the other ranks would stop "
					     "waiting about %s, up to %.0f%% of the run.",
					     region, rn, ana_fmt_ns((double)l->rank_ns, a, sizeof a),
					     l->others_ns > 0 ? (double)l->rank_ns / l->others_ns : 0, ana_fmt_ns(l->others_ns, c, sizeof c),
					     rn, region, rn, ana_fmt_ns(wait, w, sizeof w), f->expected_gain_pct);
	} else
		f->recommendation = ana_strf("%s does more than the others and they wait for it. Mark the phases of a step with "
					     "regions (fennec_region_begin/end) to see where it loses the time, then give it a "
					     "smaller share of the work.",
					     rn);
}

/*
 * step_variance: some steps are much slower than the median (first process's stepping
 * thread; the first step, which holds the start-up, is left out). A step is an outlier
 * above `outlier_factor` (default 1.5) times the median. Fires when the outliers' time
 * beyond the median is at least 5 % of the steps' time: LOW, MEDIUM from 10 %, HIGH from
 * 25 %. Outliers on a lattice (every Nth step) are reported as periodic with their period.
 */
#define STEP_VAR_MIN_STEPS 10

/* The period of outlier steps `out` (step indices, ascending; `ex` their time beyond the
 * median) among steps [1, n): the smallest N such that one lattice of steps N apart holds
 * 3 outliers or more, 75 % of the outliers' excess (a few slow steps of a busy machine
 * between them do not hide a period), and outliers at 75 % of its points from its first
 * outlier to its last. 0 when none; *phase is the lattice's first outlier. */
static uint64_t outlier_period(const uint64_t *out, const double *ex, size_t nout, size_t n, uint64_t *phase)
{
	if (nout < 3)
		return 0;
	uint64_t maxp = n / 3 < 1000 ? n / 3 : 1000;
	double *w = calloc(maxp + 1, sizeof *w), total = 0;
	uint32_t *cnt = calloc(maxp + 1, sizeof *cnt);
	uint64_t found = 0;
	if (!w || !cnt)
		goto out;
	for (size_t i = 0; i < nout; i++)
		total += ex[i];
	for (uint64_t d = 2; d <= maxp && !found; d++) {
		memset(cnt, 0, d * sizeof *cnt);
		memset(w, 0, d * sizeof *w);
		for (size_t i = 0; i < nout; i++) {
			cnt[out[i] % d]++;
			w[out[i] % d] += ex[i];
		}
		uint64_t r = 0;
		for (uint64_t k = 1; k < d; k++)
			if (w[k] > w[r])
				r = k;
		uint64_t first = UINT64_MAX, last = 0;
		for (size_t i = 0; i < nout; i++)
			if (out[i] % d == r) {
				first = out[i] < first ? out[i] : first;
				last = out[i];
			}
		uint64_t points = cnt[r] ? (last - first) / d + 1 : 0;
		if (cnt[r] >= 3 && w[r] >= 0.75 * total && cnt[r] >= 0.75 * (double)points) {
			found = d;
			*phase = first;
		}
	}
out:
	free(w);
	free(cnt);
	return found;
}

/* The region that holds most of the outlier steps' extra time (per-step region time of the
 * first process's stepping thread), descending to a child holding half of it or more.
 * ANA_NONE when no region does. *extra is its extra time over the outlier steps, *per the
 * extra in each outlier step where it ran. */
static uint32_t outlier_region(const ana_profile *p, const uint8_t *is_out, size_t n, size_t nout, double *extra,
			       double *per)
{
	const ana_process *pr = &p->procs[0];
	size_t nn = p->nnodes ? p->nnodes : 1;
	double *in = calloc(nn, sizeof *in), *norm = calloc(nn, sizeof *norm);
	uint32_t *ran = calloc(nn, sizeof *ran), best = ANA_NONE;
	if (!in || !norm || !ran || pr->step_thread == ANA_NONE)
		goto out;
	for (size_t i = 0; i < p->nstep_nodes; i++) {
		const ana_step_node *s = &p->step_nodes[i];
		if (s->thread != pr->step_thread || s->step == 0 || s->step >= n)
			continue;
		if (is_out[s->step]) {
			in[s->node] += (double)s->ns;
			ran[s->node]++;
		} else
			norm[s->node] += (double)s->ns;
	}
	/* extra = time in the outlier steps - what the same steps take at the others' mean */
	size_t nnorm = n - 1 - nout;
	for (uint32_t k = 0; k < p->nnodes; k++) {
		norm[k] = nnorm ? norm[k] / (double)nnorm : 0;
		in[k] -= (double)nout * norm[k];
	}
	for (uint32_t k = 0; k < p->nnodes; k++)
		if (p->nodes[k].parent == ANA_NONE && in[k] > 0 && (best == ANA_NONE || in[k] > in[best]))
			best = k;
	for (int moved = best != ANA_NONE; moved;) {
		moved = 0;
		for (uint32_t c = p->nodes[best].first_child; c != ANA_NONE; c = p->nodes[c].next_sibling)
			if (in[c] >= 0.5 * in[best]) {
				best = c;
				moved = 1;
				break;
			}
	}
	if (best != ANA_NONE) {
		*extra = in[best];
		*per = ran[best] ? (in[best] + (double)nout * norm[best]) / ran[best] - norm[best] : 0;
	}
out:
	free(in);
	free(norm);
	free(ran);
	return best;
}

void rule_step_variance(ana_profile *p)
{
	size_t n = p->step_ns.n;
	double med = p->step_dist.p50, factor = p->opt.outlier_factor > 1 ? p->opt.outlier_factor : 1.5;
	if (n < STEP_VAR_MIN_STEPS || med <= 0)
		return;
	/* the median without the first step */
	uint64_t *tmp = malloc(n * sizeof *tmp);
	uint64_t *out = malloc(n * sizeof *out);
	double *ex = malloc(n * sizeof *ex);
	uint8_t *is_out = calloc(n, 1);
	if (!tmp || !out || !ex || !is_out)
		goto done;
	memcpy(tmp, p->step_ns.v + 1, (n - 1) * sizeof *tmp);
	ana_dist d;
	ana_dist_compute_u64(&d, tmp, n - 1);
	med = d.p50;
	double excess = 0, total = d.total, worst = 0;
	size_t nout = 0;
	for (size_t i = 1; i < n; i++) {
		double v = (double)p->step_ns.v[i];
		if (v > factor * med) {
			excess += v - med;
			ex[nout] = v - med;
			out[nout++] = i;
			is_out[i] = 1;
			if (v > worst)
				worst = v;
		}
	}
	double share = total > 0 ? 100 * excess / total : 0;
	if (share < 5)
		goto done;
	ana_severity sev = share >= 25 ? ANA_HIGH : share >= 10 ? ANA_MEDIUM : ANA_LOW;
	ana_finding *f = ana_finding_add(p, "step_variance", sev);
	if (!f)
		goto done;
	uint64_t phase = 0, period = outlier_period(out, ex, nout, n, &phase);
	double extra = 0, per = 0;
	uint32_t region = outlier_region(p, is_out, n, nout, &extra, &per);
	char a[32], b[32], c[32], e[32], x[32], y[32], steps[160] = "", in_region[600] = "";
	size_t k = 0;
	for (size_t i = 0; i < nout && i < 5 && k < sizeof steps; i++)
		k += (size_t)snprintf(steps + k, sizeof steps - k, "%s%llu", i ? ", " : "", (unsigned long long)out[i] + 1);
	if (nout > 5 && k < sizeof steps)
		snprintf(steps + k, sizeof steps - k, ", ...");
	if (period)
		f->subject = ana_strf("every %llu steps a step is slow (%zu of %zu steps)", (unsigned long long)period, nout, n);
	else
		f->subject = ana_strf("%zu of %zu steps are outliers", nout, n);
	if (region != ANA_NONE)
		snprintf(in_region, sizeof in_region, "; in those steps %s takes %s more than in the others (%s in each slow "
			 "step where it runs)", p->nodes[region].path, ana_fmt_ns(extra, x, sizeof x), ana_fmt_ns(per, y, sizeof y));
	f->evidence = ana_strf("%zu steps (%s; numbered from 1, the first left out) took more than %.1fx the median of %s, up to "
			       "%s; p99 %s is %.1fx the median; their time beyond the median, %s, is %.1f%% of the steps' time%s",
			       nout, steps, factor, ana_fmt_ns(med, a, sizeof a), ana_fmt_ns(worst, b, sizeof b),
			       ana_fmt_ns(d.p99, c, sizeof c), d.p99 / med, ana_fmt_ns(excess, e, sizeof e), share, in_region);
	ana_finding_num(f, "outliers", (double)nout);
	ana_finding_num(f, "steps", (double)n);
	ana_finding_num(f, "median_ns", med);
	ana_finding_num(f, "p99_ns", d.p99);
	ana_finding_num(f, "p99_over_median", d.p99 / med);
	ana_finding_num(f, "excess_ns", excess);
	ana_finding_num(f, "excess_pct", share);
	ana_finding_num(f, "period", (double)period);
	if (region != ANA_NONE) {
		ana_finding_num(f, "region_extra_ns", extra);
		ana_finding_num(f, "region_extra_per_step_ns", per);
	}
	f->expected_gain_pct = p->wall_ns ? 100 * excess / (double)p->wall_ns : share;
	if (f->expected_gain_pct > 100)
		f->expected_gain_pct = 100;
	const char *rname = region != ANA_NONE ? p->nodes[region].path : NULL;
	if (period)
		f->recommendation = ana_strf("Every %llu steps (step %llu, %llu, ...) something extra runs%s%s: a checkpoint, an "
					     "evaluation or logging every %llu steps. Run it less often, make it cheaper, or "
					     "take it off the training loop (write the checkpoint from a background thread or "
					     "process while the next steps compute). That saves up to %.1f%% of the run.",
					     (unsigned long long)period, (unsigned long long)phase + 1,
					     (unsigned long long)(phase + period + 1), rname ? ", mostly in " : "", rname ? rname : "",
					     (unsigned long long)period, f->expected_gain_pct);
	else
		f->recommendation = ana_strf("Find what differs on the slow steps%s%s: input sizes (sort or bucket batches by "
					     "size), garbage collection or allocation spikes, I/O, other processes on the "
					     "machine. Steps at the median would save up to %.1f%% of the run.",
					     rname ? ", starting with " : "", rname ? rname : "", f->expected_gain_pct);
done:
	free(tmp);
	free(out);
	free(ex);
	free(is_out);
}

/*
 * input_bound: the thread that computes (the first process's stepping thread, else its
 * busiest) spends a large share of the run loading data: in data-loading regions (names
 * whose words begin with load, data, batch, fetch, read, or are io; --data-regions names
 * others), or, with wall-clock sampling, blocked in a function with such a name outside
 * them. Fires from 5 % of the wall time: LOW, MEDIUM from 10 %, HIGH above 30 %.
 * Only per-batch loading counts: with steps, what ran inside the steps (a data set built
 * once in the set-up, before the first mark, or after the last step is one-off work);
 * without steps, the data-loading regions called more than once.
 */

/* Per region node (p->nnodes entries): the time of its calls on stepping thread `thread`
 * that ended inside one of its `steps` steps. NULL when out of memory. */
static double *in_steps_ns(const ana_profile *p, uint32_t thread, uint64_t steps)
{
	double *ns = calloc(p->nnodes ? p->nnodes : 1, sizeof *ns);
	for (size_t i = 0; ns && i < p->nstep_nodes; i++) {
		const ana_step_node *s = &p->step_nodes[i];
		if (s->thread == thread && s->step < steps)
			ns[s->node] += (double)s->ns;
	}
	return ns;
}

void rule_input_bound(ana_profile *p)
{
	const ana_process *pr = &p->procs[0];
	uint32_t main = pr->step_thread;
	for (uint32_t t = 0; main == ANA_NONE && t < p->nthreads; t++)
		if (p->threads[t].process == 0 && p->threads[t].busy_ns &&
		    (main == ANA_NONE || p->threads[t].busy_ns > p->threads[main].busy_ns))
			main = t;
	if (main == ANA_NONE || !pr->wall_ns)
		return;
	const char *list = p->opt.data_regions;
	uint8_t *data = calloc(p->nnodes ? p->nnodes : 1, 1);
	if (!data)
		return;
	for (uint32_t n = 0; n < p->nnodes; n++) {
		uint32_t parent = p->nodes[n].parent;
		data[n] = parent != ANA_NONE && data[parent] ? 2 /* inside one */
			: ana_name_is_data(p->names[p->nodes[n].name], list) || (list && ana_name_is_data(p->nodes[n].path, list));
	}
	/* nodes are created parent first, so data[parent] is known */
	double in_regions = 0, loader_ns = 0, loader_calls = 0, other_ns = 0, once_ns = 0;
	uint32_t top = ANA_NONE, loaders = 0, once_top = ANA_NONE;
	double top_ns = 0, once_top_ns = 0;
	uint64_t nsteps = main == pr->step_thread ? pr->step_ns.n : 0;
	double *stepped = nsteps ? in_steps_ns(p, main, nsteps) : NULL;
	if (nsteps && !stepped) {
		free(data);
		return;
	}
	for (uint32_t i = 0; i < p->ntnodes; i++) {
		const ana_tnode *t = &p->tnodes[i];
		if (!data[t->node] && t->thread == main && p->nodes[t->node].parent == ANA_NONE)
			other_ns += stepped ? stepped[t->node] : (double)t->total_ns; /* its top-level regions that do not load */
		if (data[t->node] != 1)
			continue;
		if (t->thread != main) { /* a loader thread or process */
			loaders++;
			loader_ns += (double)t->total_ns;
			loader_calls += (double)t->count;
			continue;
		}
		/* per-batch: inside the steps, or, without steps, a region called more than once */
		double per = stepped ? stepped[t->node] : t->count > 1 ? (double)t->total_ns : 0;
		double once = (double)t->total_ns - per;
		if (once > 0) {
			once_ns += once;
			if (once > once_top_ns) {
				once_top_ns = once;
				once_top = t->node;
			}
		}
		in_regions += per;
		if (per > top_ns) {
			top_ns = per;
			top = t->node;
		}
	}
	/* wall mode: blocked outside data regions in a function with a data-loading name */
	double in_stacks = 0;
	const char *blocked_in = NULL;
	const ana_sampling *s = &p->smp;
	for (size_t i = 0; s->present && i < s->nsamples; i++) {
		const ana_sample *x = &s->samples[i];
		if (x->thread != main || x->kind != ANA_OFFCPU || (x->node != ANA_NONE && data[x->node]))
			continue;
		if (nsteps && (x->step < 1 || x->step > nsteps))
			continue; /* in the set-up or after the last step: not per-batch */
		const ana_stack *st = &s->stacks[x->stack];
		for (uint32_t k = st->n; k-- > 0;) {
			const char *fn = p->names[s->funcs[s->locs[st->locs[k]].func].name];
			if (ana_name_is_data(fn, list)) {
				in_stacks += (double)x->weight * (double)s->period_ns;
				blocked_in = fn;
				break;
			}
		}
	}
	free(data);
	free(stepped);
	double share = 100 * (in_regions + in_stacks) / (double)pr->wall_ns;
	if (share < 5)
		return;
	ana_finding *f = ana_finding_add(p, "input_bound", share > 30 ? ANA_HIGH : share >= 10 ? ANA_MEDIUM : ANA_LOW);
	if (!f)
		return;
	const ana_thread *th = &p->threads[main];
	const char *what = top != ANA_NONE ? p->nodes[top].path : blocked_in;
	char a[32], b[32], c[32];
	uint64_t steps = pr->step_ns.n;
	double per_step = steps ? (in_regions + in_stacks) / (double)steps : NAN;
	/* compute per step: its other regions in the steps when it has some, else the median
	 * step less the loading */
	double compute = !steps ? NAN : other_ns > 0 ? other_ns / (double)steps : pr->step_dist.p50 - per_step;
	/* one batch's load: a loader's call when there are loaders, else the main loop's */
	double load = loader_calls > 0 ? loader_ns / loader_calls : per_step;
	double ratio = steps && compute > 0 ? ceil(load / compute) : 0;
	unsigned need = ratio > 0 ? ratio < 1e6 ? (unsigned)ratio : 1000000u : 0; /* bounded: a corrupt file's durations */
	f->subject = ana_strf("%s: %.1f%% of the run loading data on the computing thread", what, share);
	char parts[700] = "";
	size_t k = 0;
	if (in_regions > 0)
		k += (size_t)snprintf(parts + k, sizeof parts - k, "%s in data-loading regions (%s the largest)",
				      ana_fmt_ns(in_regions, b, sizeof b), p->nodes[top].path);
	if (in_stacks > 0 && k < sizeof parts)
		snprintf(parts + k, sizeof parts - k, "%sabout %s blocked in %s (wall-clock samples)", k ? ", and " : "",
			 ana_fmt_ns(in_stacks, c, sizeof c), blocked_in);
	char once[400] = "";
	if (once_ns > 0)
		snprintf(once, sizeof once, "; not counted: %s of one-off loading (%s the largest) %s", ana_fmt_ns(once_ns, c, sizeof c),
			 p->nodes[once_top].path, steps ? "outside the steps (set-up before the first mark, or after the last)"
							: "in data-loading regions called once");
	f->evidence = ana_strf("thread %llu%s%s%s, which %s, spends %s (%.1f%% of the wall time) loading data%s: %s%s%s",
			       (unsigned long long)th->tid, th->name && *th->name ? " (" : "", th->name ? th->name : "",
			       th->name && *th->name ? ")" : "", steps ? "marks the steps" : "is the busiest",
			       ana_fmt_ns(in_regions + in_stacks, a, sizeof a), share, steps ? " in its steps" : " batch by batch",
			       parts, loaders ? "; other threads or processes run data-loading regions too (loaders)" : "", once);
	ana_finding_num(f, "share_pct", share);
	ana_finding_num(f, "load_ns", in_regions + in_stacks);
	ana_finding_num(f, "region_ns", in_regions);
	ana_finding_num(f, "blocked_ns", in_stacks);
	ana_finding_num(f, "loaders", loaders);
	ana_finding_num(f, "one_off_ns", once_ns);
	if (steps) {
		ana_finding_num(f, "load_per_step_ns", per_step);
		ana_finding_num(f, "compute_per_step_ns", compute);
		ana_finding_num(f, "load_per_batch_ns", load);
		ana_finding_num(f, "workers_needed", need);
	}
	f->expected_gain_pct = share > 100 ? 100 : share;
	char workers[200] = "";
	if (need)
		snprintf(workers, sizeof workers, " Loading a batch takes %s against %s of compute per step: %u loader worker%s "
			 "or more keep%s up.", ana_fmt_ns(load, a, sizeof a), ana_fmt_ns(compute, b, sizeof b), need,
			 need > 1 ? "s" : "", need > 1 ? "" : "s");
	if (loaders)
		f->recommendation = ana_strf("The loader workers do not keep up: the computing thread still waits in %s. Add "
					     "loader workers (PyTorch: a larger DataLoader num_workers), prefetch deeper "
					     "(prefetch_factor), or make each load cheaper (decode less, cache decoded data)."
					     "%s Hidden entirely, loading would save up to %.1f%% of the run.",
					     what, workers, f->expected_gain_pct);
	else
		f->recommendation = ana_strf("Load the next batch while this one computes: move %s to a loader thread or "
					     "process with a prefetch queue (PyTorch: DataLoader(num_workers=N, "
					     "prefetch_factor=2, pin_memory=True)).%s Hidden entirely, loading would save up "
					     "to %.1f%% of the run.", what, workers, f->expected_gain_pct);
}

/*
 * text.c - the text report: run summary, region table, region call tree, threads,
 * processes, metrics and findings. Colour only when asked (the CLI asks on a terminal
 * without NO_COLOR).
 */
#include "report/report.h"

#include <math.h>
#include <stdlib.h>

static int by_total(const void *a, const void *b, void *arg)
{
	const ana_profile *p = arg;
	uint64_t x = p->nodes[*(const uint32_t *)a].total_ns, y = p->nodes[*(const uint32_t *)b].total_ns;
	return (x < y) - (x > y);
}

uint32_t *rep_region_order(const ana_profile *p)
{
	uint32_t *order = malloc((p->nnodes ? p->nnodes : 1) * sizeof *order);
	if (!order)
		return NULL;
	for (uint32_t i = 0; i < p->nnodes; i++)
		order[i] = i;
	qsort_r(order, p->nnodes, sizeof *order, by_total, (void *)p);
	return order;
}

typedef struct style {
	const char *bold, *dim, *red, *yellow, *cyan, *reset;
} style;

static void heading(FILE *out, const style *s, const char *title)
{
	fprintf(out, "\n%s%s%s\n", s->bold, title, s->reset);
}

static void tree(FILE *out, const ana_profile *p, uint32_t n, int depth)
{
	/* Children in descending total: collect, sort, recurse. */
	uint32_t kids[4096];
	size_t nk = 0;
	for (uint32_t k = p->nodes[n].first_child; k != ANA_NONE && nk < ARRAY_LEN(kids); k = p->nodes[k].next_sibling)
		kids[nk++] = k;
	qsort_r(kids, nk, sizeof *kids, by_total, (void *)p);
	const ana_node *x = &p->nodes[n];
	char t[32], m[32];
	fprintf(out, "  %*s%-*s %10s %6.1f%%  %8llu calls  mean %s\n", depth * 2, "", 34 - depth * 2 > 8 ? 34 - depth * 2 : 8,
		p->names[x->name], ana_fmt_ns((double)x->total_ns, t, sizeof t), x->share_pct,
		(unsigned long long)x->dist.count, ana_fmt_ns(x->dist.mean, m, sizeof m));
	if (depth < 32)
		for (size_t i = 0; i < nk; i++)
			tree(out, p, kids[i], depth + 1);
}

int rep_text(FILE *out, const ana_profile *p, const rep_options *o)
{
	style s = {"", "", "", "", "", ""};
	if (o && o->color)
		s = (style){"\033[1m", "\033[2m", "\033[31m", "\033[33m", "\033[36m", "\033[0m"};
	const ana_process *first = &p->procs[0];
	char a[32], b[32], c[32], d[32], e[32], f[32], g[32], h[32], k[32];

	fprintf(out, "%sfennec analysis%s  %s\n", s.bold, s.reset, first->file.path);
	for (uint32_t i = 0; i < p->nwarnings; i++)
		fprintf(out, "%swarning:%s %s\n", s.yellow, s.reset, p->warnings[i]);

	heading(out, &s, "Run summary");
	fprintf(out, "  command      %s\n", first->file.cmdline ? first->file.cmdline : "");
	fprintf(out, "  wall         %s%s\n", ana_fmt_ns((double)p->wall_ns, a, sizeof a), p->cut_short ? "  (cut short)" : "");
	double cpu = (double)(p->cpu_user_ns + p->cpu_sys_ns);
	fprintf(out, "  CPU          %s user + %s sys (%.0f%% of wall%s)\n", ana_fmt_ns((double)p->cpu_user_ns, a, sizeof a),
		ana_fmt_ns((double)p->cpu_sys_ns, b, sizeof b), p->wall_ns ? 100 * cpu / (double)p->wall_ns : 0,
		p->nprocs > 1 ? ", all processes" : "");
	fprintf(out, "  processes    %u   threads %u   events %llu   dropped events %llu\n", p->nprocs, p->nthreads,
		(unsigned long long)p->events, (unsigned long long)p->dropped);
	if (p->steps) {
		const ana_dist *sd = &p->step_dist;
		fprintf(out, "  steps        %llu (%llu recorded)   mean %s   median %s   p95 %s   min %s   max %s\n",
			(unsigned long long)p->steps, (unsigned long long)p->steps_recorded, ana_fmt_ns(sd->mean, a, sizeof a),
			ana_fmt_ns(sd->p50, b, sizeof b), ana_fmt_ns(sd->p95, c, sizeof c), ana_fmt_ns(sd->min, d, sizeof d),
			ana_fmt_ns(sd->max, e, sizeof e));
		double secs = sd->total / 1e9;
		if (secs > 0) {
			fprintf(out, "  throughput   %.2f steps/s", (double)p->steps / secs);
			if (p->has_items)
				fprintf(out, "   %.1f items/s", (double)p->items / secs);
			fputc('\n', out);
		}
	} else
		fprintf(out, "  steps        none (call fennec_step() once per iteration for step statistics)\n");

	heading(out, &s, "Regions (by total time; share of wall time)");
	if (!p->nnodes)
		fprintf(out, "  none recorded (mark regions with fennec_region_begin/end or FENNEC_REGION)\n");
	else {
		fprintf(out, "  %-36s %8s %10s %10s %7s %10s %10s %10s %10s %10s %10s %10s\n", "region", "count", "total",
			"self", "share", "mean", "std", "min", "max", "p50", "p95", "p99");
		uint32_t *order = rep_region_order(p);
		if (!order)
			return FENNEC_ENOMEM;
		uint32_t rows = o && o->max_regions && (uint32_t)o->max_regions < p->nnodes ? (uint32_t)o->max_regions : p->nnodes;
		for (uint32_t r = 0; r < rows; r++) {
			const ana_node *n = &p->nodes[order[r]];
			const char *path = n->path ? n->path : "";
			size_t len = strlen(path);
			fprintf(out, "  %-36s %8llu %10s %10s %6.1f%% %10s %10s %10s %10s %10s %10s %10s%s\n",
				len > 36 ? path + len - 36 : path, (unsigned long long)n->dist.count,
				ana_fmt_ns((double)n->total_ns, a, sizeof a), ana_fmt_ns((double)n->self_ns, b, sizeof b), n->share_pct,
				ana_fmt_ns(n->dist.mean, c, sizeof c), ana_fmt_ns(n->dist.std, d, sizeof d), ana_fmt_ns(n->dist.min, e, sizeof e),
				ana_fmt_ns(n->dist.max, f, sizeof f), ana_fmt_ns(n->dist.p50, g, sizeof g), ana_fmt_ns(n->dist.p95, h, sizeof h),
				ana_fmt_ns(n->dist.p99, k, sizeof k), n->open ? "  (open at end)" : "");
		}
		if (rows < p->nnodes)
			fprintf(out, "  ... %u more (--max-regions 0 shows all)\n", p->nnodes - rows);

		heading(out, &s, "Region tree");
		for (uint32_t r = 0; r < p->nnodes; r++)
			if (p->nodes[order[r]].parent == ANA_NONE)
				tree(out, p, order[r], 0);
		free(order);
	}

	if (p->nthreads > 1 || p->nprocs > 1) {
		heading(out, &s, "Threads");
		fprintf(out, "  %8s %8s %-16s %10s %10s %8s %10s\n", "pid", "tid", "name", "busy", "lifetime", "busy%", "events");
		uint32_t shown = 0;
		for (uint32_t i = 0; i < p->nthreads && shown < 32; i++, shown++) {
			const ana_thread *t = &p->threads[i];
			fprintf(out, "  %8llu %8llu %-16s %10s %10s %7.1f%% %10llu\n",
				(unsigned long long)p->procs[t->process].file.pid, (unsigned long long)t->tid, t->name,
				ana_fmt_ns((double)t->busy_ns, a, sizeof a), ana_fmt_ns((double)t->lifetime_ns, b, sizeof b),
				t->lifetime_ns ? 100.0 * (double)t->busy_ns / (double)t->lifetime_ns : 0,
				(unsigned long long)t->events);
		}
		if (p->nthreads > shown)
			fprintf(out, "  ... %u more threads (JSON lists all)\n", p->nthreads - shown);
	}
	if (p->nprocs > 1) {
		heading(out, &s, "Processes");
		fprintf(out, "  %8s %8s %-6s %10s %10s %8s  %s\n", "pid", "parent", "origin", "wall", "CPU", "threads", "command");
		for (uint32_t i = 0; i < p->nprocs; i++) {
			const ana_process *pr = &p->procs[i];
			fprintf(out, "  %8llu %8llu %-6s %10s %10s %8u  %s%s\n", (unsigned long long)pr->file.pid,
				(unsigned long long)pr->file.parent_pid, ana_origin_name(pr->file.origin),
				ana_fmt_ns((double)pr->wall_ns, a, sizeof a),
				ana_fmt_ns((double)(pr->file.cpu_user_ns + pr->file.cpu_sys_ns), b, sizeof b), pr->threads,
				pr->file.cmdline ? pr->file.cmdline : "", pr->file.cut_short ? "  (cut short)" : "");
		}
	}
	if (p->nmetrics) {
		heading(out, &s, "Metrics");
		for (uint32_t i = 0; i < p->nmetrics; i++) {
			const ana_metric *m = &p->metrics[i];
			fprintf(out, "  %-24s %-8s %8llu updates  ", p->names[m->name], ana_kind_name(m->kind), (unsigned long long)m->count);
			if (m->kind == FMT_SITE_COUNTER)
				fprintf(out, "total %.6g (%.6g/s)\n", m->total, p->wall_ns ? m->total / ((double)p->wall_ns / 1e9) : 0);
			else if (m->kind == FMT_SITE_GAUGE)
				fprintf(out, "last %.6g  min %.6g  max %.6g  mean %.6g\n", m->last, m->min, m->max, m->sum / (double)m->count);
			else
				fprintf(out, "mean %.6g  std %.6g  min %.6g  p50 %.6g  p95 %.6g  max %.6g\n", m->dist.mean, m->dist.std,
					m->dist.min, m->dist.p50, m->dist.p95, m->dist.max);
		}
	}

	heading(out, &s, "Findings");
	if (!p->nfindings)
		fprintf(out, "  none: no rule fired (thresholds: docs/bottlenecks.md)\n");
	for (uint32_t i = 0; i < p->nfindings; i++) {
		const ana_finding *x = &p->findings[i];
		const char *col = x->severity == ANA_HIGH ? s.red : x->severity == ANA_MEDIUM ? s.yellow : s.cyan;
		fprintf(out, "  %s[%s]%s %s: %s\n", col, ana_severity_name(x->severity), s.reset, x->type, x->subject);
		fprintf(out, "      evidence: %s\n", x->evidence);
		fprintf(out, "      fix:      %s\n", x->recommendation);
		fprintf(out, "      gain:     up to %.1f%% of the run\n", x->expected_gain_pct);
	}
	return ferror(out) ? FENNEC_EIO : 0;
}

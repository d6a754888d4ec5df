/*
 * text.c - the text report: run summary, region table, region call tree, sampled hot
 * functions and lines (overall, per region, off-CPU), threads, processes, ranks and their
 * balance, metrics and findings. Colour only when asked (the CLI asks on a terminal
 * without NO_COLOR).
 */
#include "report/report.h"
#include "analyze/critpath.h"

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

static const char *base_name(const char *path)
{
	const char *s = path ? strrchr(path, '/') : NULL;
	return s && s[1] ? s + 1 : path ? path : "";
}

/* "file.c:123", "file.c", or "-" */
static const char *location(const ana_profile *p, uint32_t file, uint32_t line, char *buf, size_t n)
{
	if (file == ANA_NONE)
		snprintf(buf, n, "-");
	else if (line)
		snprintf(buf, n, "%s:%u", base_name(p->names[file]), line);
	else
		snprintf(buf, n, "%s", base_name(p->names[file]));
	return buf;
}

/* Copy `s` with every bracketed part opening with `open` collapsed to "<...>"/"(...)". */
static void collapse(const char *s, char open, char close, char *out, size_t n)
{
	size_t k = 0;
	int depth = 0;
	for (; *s && k + 6 < n; s++) {
		if (!depth && k >= 8 && !memcmp(out + k - 8, "operator", 8) && strchr("<>()", *s)) {
			/* operator<, operator<<=, operator(), operator->: part of the name */
			if (s[0] == '(' && s[1] == ')') {
				out[k++] = *s++;
				out[k++] = *s;
			} else {
				while (*s && strchr("<>=-", *s) && k + 6 < n)
					out[k++] = *s++;
				s--;
			}
		} else if (*s == open && !depth && s[1] == close) { /* "()": nothing to hide */
			out[k++] = *s++;
			out[k++] = *s;
		} else if (*s == open) {
			if (!depth++) {
				out[k++] = open;
				memcpy(out + k, "...", 3);
				k += 3;
			}
		} else if (*s == close && depth > 0) {
			if (!--depth)
				out[k++] = close;
		} else if (!depth)
			out[k++] = *s;
	}
	out[k] = 0;
}

/* A function name that fits a table row: C++ template arguments, then parameter lists,
 * collapsed when the name is long (the JSON report has the full names). */
static const char *short_name(const char *name, char *buf, size_t n)
{
	enum { WIDTH = 90 };
	if (strlen(name) <= WIDTH)
		return name;
	char tmp[1024];
	collapse(name, '<', '>', tmp, sizeof tmp);
	if (strlen(tmp) > WIDTH)
		collapse(tmp, '(', ')', buf, n);
	else
		snprintf(buf, n, "%s", tmp);
	if (strlen(buf) > WIDTH)
		memcpy(buf + WIDTH - 3, "...", 4);
	return buf;
}

static uint32_t top_rows(const ana_profile *p, uint32_t n)
{
	uint32_t top = p->opt.top ? p->opt.top : 20;
	return n < top ? n : top;
}

static void hot_functions(FILE *out, const ana_profile *p, const ana_sample_view *v, unsigned kind)
{
	char loc[256];
	uint32_t rows = top_rows(p, v->nfuncs[kind]);
	fprintf(out, "  %7s %7s %8s  %-28s %-18s %s\n", "self", "total", "samples", "location", "module", "function");
	for (uint32_t i = 0; i < rows; i++) {
		const ana_hot_func *h = &v->funcs[kind][i];
		const ana_func *fn = &p->smp.funcs[h->func];
		char nm[1024];
		fprintf(out, "  %6.1f%% %6.1f%% %8llu  %-28s %-18s %s\n", h->self_pct, h->total_pct,
			(unsigned long long)h->self, location(p, h->file, h->line, loc, sizeof loc),
			base_name(p->names[fn->module]), short_name(p->names[fn->name], nm, sizeof nm));
	}
	if (rows < v->nfuncs[kind])
		fprintf(out, "  ... %u more functions (--top N shows more; JSON lists all)\n", v->nfuncs[kind] - rows);
}

static void hot_lines(FILE *out, const ana_profile *p, const ana_sample_view *v, unsigned kind)
{
	char loc[256];
	uint32_t rows = top_rows(p, v->nlines[kind]);
	fprintf(out, "  %7s %8s  %-36s %s\n", "self", "samples", "line", "function");
	for (uint32_t i = 0; i < rows; i++) {
		const ana_hot_line *l = &v->lines[kind][i];
		char nm[1024];
		fprintf(out, "  %6.1f%% %8llu  %-36s %s\n", l->self_pct, (unsigned long long)l->self,
			location(p, l->file, l->line, loc, sizeof loc),
			short_name(p->names[p->smp.funcs[l->func].name], nm, sizeof nm));
	}
	if (rows < v->nlines[kind])
		fprintf(out, "  ... %u more lines\n", v->nlines[kind] - rows);
}

/* What the overhead budget changed (record --overhead-budget): the first changes, each
 * with the share of the CPU fennec had in the window that decided it. */
static void budget_text(FILE *out, const ana_profile *p)
{
	const ana_sampling *s = &p->smp;
	char a[32];
	double hz = s->period_ns ? 1e9 / (double)s->period_ns : 0;
	fprintf(out, "  budget       %g%% of the program's CPU", (double)s->budget_ppm / 1e4);
	if (!s->nbudget_changes) {
		fprintf(out, ": no change needed (fennec %.2f%% of the CPU in its last look)\n", s->budget_share_pct);
		return;
	}
	int pids = 0;
	for (size_t i = 1; i < s->nbudget_changes; i++)
		pids |= s->budget_changes[i].pid != s->budget_changes[0].pid;
	size_t shown = s->nbudget_changes < 6 ? s->nbudget_changes : 6;
	fprintf(out, ":");
	for (size_t i = 0; i < shown; i++) {
		const struct ana_budget_change *c = &s->budget_changes[i];
		fprintf(out, "%s", i ? ";" : "");
		if (pids)
			fprintf(out, " pid %llu", (unsigned long long)c->pid);
		fprintf(out, " %.3g Hz from %s (fennec was %.1f%%)", hz / c->stride, ana_fmt_ns(c->at_ns, a, sizeof a),
			c->share_pct);
	}
	size_t more = s->nbudget_changes - shown + (size_t)s->budget_changes_more;
	if (more)
		fprintf(out, "; %zu more changes", more);
	fprintf(out, "\n");
}

static void samples_text(FILE *out, const ana_profile *p, const char *bold, const char *reset)
{
	const ana_sampling *s = &p->smp;
	const ana_sample_view *v = &s->sel;
	char a[32];
	fprintf(out, "\n%sSamples%s\n", bold, reset);
	fprintf(out, "  mode         %s (%s)   period %s   requested %llu Hz   achieved ", ana_sample_mode_name(s->mode),
		ana_sample_source_name(s->source), ana_fmt_ns((double)s->period_ns, a, sizeof a),
		(unsigned long long)s->requested_hz);
	if (isfinite(s->achieved_hz))
		fprintf(out, "%.0f Hz per CPU second\n", s->achieved_hz);
	else
		fprintf(out, "- (no CPU time recorded)\n");
	if (s->budget_ppm)
		budget_text(out, p);
	fprintf(out, "  samples      %llu (on-CPU %llu, off-CPU %llu)   dropped %llu   truncated %llu\n",
		(unsigned long long)s->nsamples, (unsigned long long)s->all.samples[ANA_CPU],
		(unsigned long long)s->all.samples[ANA_OFFCPU], (unsigned long long)s->dropped,
		(unsigned long long)s->truncated);
	if (s->py_version && s->py_status == FMT_PY_OK) {
		uint64_t all = s->weight[ANA_CPU] + s->weight[ANA_OFFCPU];
		fprintf(out, "  python       CPython %u.%u.%u: Python frames in %.0f%% of samples; the GIL held in %.0f%% of those%s\n",
			(unsigned)(s->py_version >> 24), (unsigned)(s->py_version >> 16) & 0xff,
			(unsigned)(s->py_version >> 8) & 0xff, all ? 100.0 * (double)s->py_samples / (double)all : 0.0,
			s->py_samples ? 100.0 * (double)s->py_gil / (double)s->py_samples : 0.0,
			p->opt.native ? "; the interpreter's C frames shown (--native)" : "; the interpreter's C frames folded into them (--native shows them)");
	}
	const ana_sample_filter *f = &v->filter;
	if (f->pid || f->tid || f->region) {
		fprintf(out, "  selection   ");
		if (f->pid)
			fprintf(out, " process %llu", (unsigned long long)f->pid);
		if (f->tid)
			fprintf(out, " thread %llu", (unsigned long long)f->tid);
		if (f->region)
			fprintf(out, " region %s", f->region);
		fprintf(out, ": %llu on-CPU and %llu off-CPU samples; the tables below are of these\n",
			(unsigned long long)v->samples[ANA_CPU], (unsigned long long)v->samples[ANA_OFFCPU]);
	}
	if (v->samples[ANA_CPU]) {
		fprintf(out, "\n%sHot functions%s (on-CPU; self: in the function itself, total: with its callees; "
			     "estimates from %llu samples)\n",
			bold, reset, (unsigned long long)v->samples[ANA_CPU]);
		hot_functions(out, p, v, ANA_CPU);
		if (p->nops) {
			uint32_t n = p->nops < 15 ? p->nops : 15;
			fprintf(out, "\n%sPyTorch operators%s (on-CPU; self: the operator's own kernels, total: with the "
				     "operators it calls; calls: runs of samples seen)\n",
				bold, reset);
			fprintf(out, "     self   total    calls  operator                        called from\n");
			for (uint32_t i = 0; i < n; i++) {
				const ana_op *o = &p->ops[i];
				char where[600] = "";
				if (o->caller != ANA_NONE) {
					const ana_loc *l = &p->smp.locs[o->caller];
					const char *file = l->file != ANA_NONE ? p->names[l->file] : "";
					const char *b = strrchr(file, '/');
					snprintf(where, sizeof where, "%s %s:%u", p->names[p->smp.funcs[l->func].name],
						 b ? b + 1 : file, l->line);
				}
				fprintf(out, "  %6.1f%% %6.1f%% %8llu  %-31s %s\n", o->self_pct, o->total_pct,
					(unsigned long long)o->calls_seen, p->names[o->name], where);
			}
			if (n < p->nops)
				fprintf(out, "  ... %u more operators (JSON lists all)\n", p->nops - n);
		}
		if (v->nlines[ANA_CPU]) {
			fprintf(out, "\n%sHot lines%s (on-CPU self samples)\n", bold, reset);
			hot_lines(out, p, v, ANA_CPU);
		}
		/* Per region: the regions with on-CPU samples, by their sample count. */
		uint32_t shown = 0;
		uint32_t *order = rep_region_order(p);
		for (uint32_t r = 0; order && r < p->nnodes; r++) {
			const ana_node_samples *ns = &v->nodes[order[r]];
			if (!ns->ntop)
				continue;
			if (!shown++)
				fprintf(out, "\n%sHot functions by region%s (on-CPU samples inside the region, nested regions "
					     "included)\n",
					bold, reset);
			if (shown > top_rows(p, p->nnodes))
				break;
			fprintf(out, "  %-36s %8llu samples: ", p->nodes[order[r]].path, (unsigned long long)ns->samples[ANA_CPU]);
			for (uint32_t j = 0; j < ns->ntop && j < 3; j++) {
				char nm[1024];
				fprintf(out, "%s%s %.1f%%", j ? ", " : "",
					short_name(p->names[p->smp.funcs[ns->top[j]].name], nm, sizeof nm), ns->top_pct[j]);
			}
			fputc('\n', out);
		}
		free(order);
	} else if (!v->samples[ANA_OFFCPU])
		fprintf(out, "  no samples%s%s%s\n", f->pid || f->tid || f->region ? " in the selection" : "",
			p->smp.none_why ? ": " : "", p->smp.none_why ? p->smp.none_why : "");
	if (v->samples[ANA_OFFCPU]) {
		fprintf(out, "\n%sOff-CPU functions%s (wall mode: where threads waited, blocked; %llu samples)\n", bold,
			reset, (unsigned long long)v->samples[ANA_OFFCPU]);
		hot_functions(out, p, v, ANA_OFFCPU);
	}
}

/* A heap site's line: bytes, count, function called from its caller, region. */
/* What a heap site's row shows: the allocating function, its line and its caller. */
static void mem_site_where(const ana_profile *p, const ana_mem_site *s, const char **fn, char *loc, size_t nloc,
			   const char **where)
{
	*fn = ana_mem_site_name(p, s);
	*where = "";
	loc[0] = 0;
	if (s->stack == ANA_NONE)
		return;
	const ana_stack *st = &p->smp.stacks[s->stack];
	for (uint32_t k = st->n; k-- > 0;) {
		const ana_loc *l = &p->smp.locs[st->locs[k]];
		if (!strcmp(p->names[p->smp.funcs[l->func].name], *fn)) {
			location(p, l->file, l->line, loc, nloc);
			if (k > 0)
				*where = p->names[p->smp.funcs[p->smp.locs[st->locs[k - 1]].func].name];
			break;
		}
	}
}

/* ana_mem_rows' key: rows that would read the same (function, line, caller, region) are
 * one. */
static uint64_t mem_row_key(const ana_profile *p, const ana_mem_site *s)
{
	const char *fn, *where;
	char loc[512];
	mem_site_where(p, s, &fn, loc, sizeof loc, &where);
	const char *parts[] = {fn, loc, where};
	return ana_mem_key(parts, ARRAY_LEN(parts), s->node);
}

/* A heap site row's end: function, line and caller, region, whose it is, and `via` (may
 * be empty). */
static void mem_site_tail(FILE *out, const ana_profile *p, const ana_mem_site *s, uint32_t processes, const char *via)
{
	char nb[256], wb[256], loc[512];
	const char *fn, *where;
	mem_site_where(p, s, &fn, loc, sizeof loc, &where);
	fprintf(out, "%s%s%s%s%s%s%s", short_name(fn, nb, sizeof nb), loc[0] ? " " : "", loc, where[0] ? " <- " : "",
		short_name(where, wb, sizeof wb), s->node != ANA_NONE ? "  in " : "", s->node != ANA_NONE ? p->nodes[s->node].path : "");
	/* With several processes, whose it is: one pid, or how many processes share the row. */
	if (processes > 1)
		fprintf(out, "  (%u processes)", processes);
	else if (p->nprocs > 1 && s->process < p->nprocs)
		fprintf(out, "  (pid %llu)", (unsigned long long)p->procs[s->process].file.pid);
	fputs(via, out);
	fputc('\n', out);
}

/* For a row of "Live over time" that reads the same as another's (its series is of a whole
 * stack, which rows name by function, line and caller only): where its stack parts from
 * the other's, the first frame from the innermost that differs. Two rows read
 * "make_node nodes.c:12 <- build_tree" before, one for each caller of build_tree. */
static void series_via(const ana_profile *p, const ana_mem_site *s, const ana_mem_site *o, char *buf, size_t n)
{
	buf[0] = 0;
	if (s->stack == ANA_NONE || o->stack == ANA_NONE)
		return;
	const ana_stack *a = &p->smp.stacks[s->stack], *b = &p->smp.stacks[o->stack];
	for (uint32_t k = 0; k < a->n; k++) {
		uint32_t la = a->locs[a->n - 1 - k];
		if (k < b->n && la == b->locs[b->n - 1 - k])
			continue;
		const ana_loc *l = &p->smp.locs[la];
		char nb[256], loc[256];
		location(p, l->file, l->line, loc, sizeof loc);
		snprintf(buf, n, "  [via %s%s%s]", short_name(p->names[p->smp.funcs[l->func].name], nb, sizeof nb),
			 loc[0] ? " " : "", loc);
		return;
	}
}

static void mem_site_line(FILE *out, const ana_profile *p, const ana_mem_site *s, double bytes, double count,
			  uint32_t processes)
{
	char a[32];
	fprintf(out, "  %10s %9.0f  ", ana_fmt_bytes(bytes, a, sizeof a), count);
	mem_site_tail(out, p, s, processes, "");
}

static void memory_text(FILE *out, const ana_profile *p, const style *st)
{
	const ana_memory *m = &p->mem;
	int full = m->mode == FMT_MEM_FULL;
	char a[32], b[32], c[32], d[32];
	heading(out, st, "Memory");
	fprintf(out, "  mode         %s", full ? "full (every allocation and free)" : "sampled");
	if (!full)
		fprintf(out, " (a stack every %s allocated on average; per-stack numbers are estimates)", ana_fmt_bytes((double)m->rate, a, sizeof a));
	if (m->mmap_min)
		fprintf(out, "; anonymous mappings of %s or more counted as allocations (--memory-mmap)",
			ana_fmt_bytes((double)m->mmap_min, b, sizeof b));
	fprintf(out, "\n  peak heap    %s", ana_fmt_bytes((double)m->peak_bytes, a, sizeof a));
	if (m->peak_t_ns > p->procs[0].file.start_mono_ns)
		fprintf(out, " at %s", ana_fmt_ns((double)(m->peak_t_ns - p->procs[0].file.start_mono_ns), b, sizeof b));
	if (p->steps)
		fprintf(out, ", step %llu", (unsigned long long)m->peak_step);
	if (m->peak_node != ANA_NONE || m->peak_region != ANA_NONE)
		fprintf(out, ", in %s", m->peak_node != ANA_NONE ? p->nodes[m->peak_node].path : p->names[m->peak_region]);
	if (p->nprocs > 1 && m->peak_process < p->nprocs)
		fprintf(out, ", pid %llu", (unsigned long long)p->procs[m->peak_process].file.pid);
	fprintf(out, "   peak RSS %s\n", ana_fmt_bytes((double)m->peak_rss_bytes, c, sizeof c));
	fprintf(out, "  allocations  %llu (%s)   frees %llu   largest %s   %.0f/s", (unsigned long long)m->allocs,
		ana_fmt_bytes((double)m->alloc_bytes, a, sizeof a), (unsigned long long)m->frees,
		ana_fmt_bytes((double)m->largest_bytes, b, sizeof b), isfinite(m->alloc_rate_per_s) ? m->alloc_rate_per_s : 0);
	if (isfinite(m->allocs_per_step))
		fprintf(out, "   %.1f per step", m->allocs_per_step);
	fputc('\n', out);
	fprintf(out, "  unfreed      %s%s in %.0f block%s%s", full ? "" : "about ", ana_fmt_bytes(m->leaked_bytes, a, sizeof a),
		m->leaked_count, round(m->leaked_count) == 1 ? "" : "s", m->reach_procs ? " lost: no pointer to them was left" : "");
	if (m->runtime_bytes > 0)
		fprintf(out, " (and %s held by the runtime: C library, loader, interpreter; not counted)", ana_fmt_bytes(m->runtime_bytes, d, sizeof d));
	if (!full)
		fprintf(out, "\n               estimated from sampled blocks; exact at the end: %llu more allocation%s than frees, "
			     "%s live (usable bytes, the runtime's and what was allocated before recording included)",
			(unsigned long long)m->end_live_count, m->end_live_count == 1 ? "" : "s",
			ana_fmt_bytes((double)m->end_live_bytes, d, sizeof d));
	fputc('\n', out);
	if (m->reach_count > 0.5 && full)
		fprintf(out, "  reachable    %s in %.0f block%s unfreed but still pointed to at exit (from globals, stacks or "
			     "other reachable blocks): no leak\n",
			ana_fmt_bytes(m->reach_bytes, a, sizeof a), m->reach_count, round(m->reach_count) == 1 ? "" : "s");
	else if (m->reach_count > 0.5)
		fprintf(out, "  reachable    about %s in %.0f block%s unfreed but still pointed to at exit (from globals, stacks "
			     "or the heap): no leak found; sampled mode reads the heap whole, so a block that only lost memory "
			     "points to counts here too (--memory=full tells)\n",
			ana_fmt_bytes(m->reach_bytes, a, sizeof a), m->reach_count, round(m->reach_count) == 1 ? "" : "s");
	if (m->reach_unscanned)
		fprintf(out, "  not scanned  %u process%s: %s; all %s unfreed blocks are counted\n", m->reach_unscanned,
			m->reach_unscanned == 1 ? "" : "es", ana_reach_why(m->reach_why), m->reach_unscanned == 1 ? "its" : "their");
	if (m->exec_procs)
		fprintf(out, "  at exec      %s%s in %.0f block%s live when %u process%s exec'd another program (the exec "
			     "released them): not counted as unfreed\n",
			full ? "" : "about ", ana_fmt_bytes(m->exec_bytes, a, sizeof a), m->exec_count,
			round(m->exec_count) == 1 ? "" : "s", m->exec_procs, m->exec_procs == 1 ? "" : "es");
	if (m->cut_short_procs)
		fprintf(out, "  cut short    %s%s in %.0f blocks live at the end of %u process%s killed or crashed (the "
			     "frees after the last flush are lost): not counted as unfreed\n",
			full ? "" : "about ", ana_fmt_bytes(m->cut_short_bytes, a, sizeof a), m->cut_short_count,
			m->cut_short_procs, m->cut_short_procs == 1 ? "" : "es");
	if (m->has_trend)
		fprintf(out, "  trend        %s per %s (r^2 %.3f over %u points)\n", ana_fmt_bytes(m->slope < 0 ? -m->slope : m->slope, a, sizeof a),
			m->trend_per_step ? "step" : "second", m->r2, m->trend_points);
	if (full)
		fprintf(out, "  temporary    %llu allocation%s (%s) freed before the thread's next allocation\n",
			(unsigned long long)m->temporary, m->temporary == 1 ? "" : "s",
			ana_fmt_bytes((double)m->temporary_bytes, a, sizeof a));
	if (m->dropped && m->drops_unknown)
		fprintf(out, "  dropped      %llu heap records (the numbers per stack are incomplete)\n", (unsigned long long)m->dropped);
	else if (m->dropped)
		fprintf(out, "  dropped      %llu heap records: %llu allocations, %llu frees, %llu timeline points\n",
			(unsigned long long)m->dropped, (unsigned long long)m->dropped_allocs, (unsigned long long)m->dropped_frees,
			(unsigned long long)(m->dropped - m->dropped_allocs - m->dropped_frees));
	ana_mem_row rows[64];
	uint32_t want = top_rows(p, 10);
	static const struct { int by; const char *title; } tabs[] = {
		{ANA_MEM_LIVE, "Unfreed at exit"},
		{ANA_MEM_REACH, "Still reachable at exit, not leaks"},
		{ANA_MEM_CUT, "Live when killed or crashed, not leaks"},
		{ANA_MEM_EXEC, "Live when the process exec'd another program, not leaks"},
		{ANA_MEM_PEAK, "Live at the peak"}, {ANA_MEM_BYTES, "Top allocating stacks"},
		{ANA_MEM_TEMP, "Temporary allocations (freed before their thread's next allocation)"}};
	for (size_t t = 0; t < ARRAY_LEN(tabs); t++) {
		uint32_t n = ana_mem_rows(p, tabs[t].by, rows, want < 64 ? want : 64, mem_row_key);
		if (!n)
			continue;
		fprintf(out, "\n  %s (bytes, allocations, where)\n", tabs[t].title);
		for (uint32_t i = 0; i < n; i++)
			mem_site_line(out, p, &m->sites[rows[i].site], rows[i].bytes, rows[i].count, rows[i].processes);
	}
	/* The stacks whose live bytes rose highest, with their trend: where a heap that grows
	 * grows, even when it is all freed by the end. */
	uint32_t ns = m->nseries < want ? m->nseries : want;
	if (ns > 5)
		ns = 5;
	if (ns)
		fprintf(out, "\n  Live over time (highest, at the end, trend; where)\n");
	for (uint32_t i = 0; i < ns; i++) {
		const ana_mem_series *sr = &m->series[i];
		char tr[64] = "";
		if (sr->has_trend)
			snprintf(tr, sizeof tr, "%s%s/%s (r^2 %.2f)", sr->slope < 0 ? "-" : "+",
				 ana_fmt_bytes(fabs(sr->slope), a, sizeof a), sr->per_step ? "step" : "s", sr->r2);
		fprintf(out, "  %10s %10s  %-26s ", ana_fmt_bytes(sr->max_bytes, b, sizeof b),
			ana_fmt_bytes(sr->last_bytes > 0 ? sr->last_bytes : 0, c, sizeof c), tr);
		char via[600] = "";
		const ana_mem_site *si = &m->sites[sr->site];
		for (uint32_t j = 0; j < ns && !via[0]; j++) {
			const ana_mem_site *sj = &m->sites[m->series[j].site];
			if (j != i && mem_row_key(p, sj) == mem_row_key(p, si) && sj->process == si->process)
				series_via(p, si, sj, via, sizeof via);
		}
		mem_site_tail(out, p, si, sr->processes, via);
	}
}

/* A region path that fits a column, its end kept. */
static const char *tail_of(const char *path, size_t width)
{
	size_t len = path ? strlen(path) : 0;
	return !path ? "-" : len > width ? path + len - width : path;
}

/* "rank 1", or "-" without a rank. */
static const char *rank_label(int64_t rank, char *buf, size_t n)
{
	if (rank >= 0)
		snprintf(buf, n, "%lld", (long long)rank);
	else
		snprintf(buf, n, "-");
	return buf;
}

/* Per process: where it came from, its times, steps and the region with most self time. */
static void processes_text(FILE *out, const ana_profile *p, const style *st)
{
	char a[32], b[32], c[32], d[32], r[24];
	heading(out, st, "Processes");
	fprintf(out, "  %8s %8s %-6s %5s %10s %10s %10s %6s %10s  %-24s %s\n", "pid", "parent", "origin", "rank", "wall", "CPU",
		"busy", "steps", "step mean", "top region (self)", "command");
	for (uint32_t i = 0; i < p->nprocs; i++) {
		const ana_process *pr = &p->procs[i];
		fprintf(out, "  %8llu %8llu %-6s %5s %10s %10s %10s %6zu %10s  %-24s %s%s\n", (unsigned long long)pr->file.pid,
			(unsigned long long)pr->file.parent_pid, ana_origin_name(pr->file.origin),
			rank_label(pr->file.rank, r, sizeof r), ana_fmt_ns((double)pr->wall_ns, a, sizeof a),
			ana_fmt_ns((double)(pr->file.cpu_user_ns + pr->file.cpu_sys_ns), b, sizeof b),
			ana_fmt_ns((double)pr->busy_ns, c, sizeof c), pr->step_ns.n,
			pr->step_ns.n ? ana_fmt_ns(pr->step_dist.mean, d, sizeof d) : "-",
			tail_of(pr->top_node != ANA_NONE ? p->nodes[pr->top_node].path : NULL, 24),
			pr->file.cmdline ? pr->file.cmdline : "", pr->file.cut_short ? "  (cut short)" : "");
	}
}

/* Regions annotated with fennec_region_work, on this machine's roofline (docs/roofline.md). */
static void roofline_text(FILE *out, const ana_profile *p, const style *st)
{
	const ana_roofline *rl = &p->roof;
	char a[32], b[32];
	heading(out, st, "Roofline (work annotated with fennec_region_work, over each region's own time)");
	if (rl->calibrated == 1)
	{
		/* both precisions: each region is judged on the peak of its own (roofline.c) */
		fprintf(out, "  ceilings     %.3g GFLOP/s fp64, %.3g fp32, %s/s triad (one thread: %.3g fp64, %.3g fp32, %s/s)\n",
			rl->calib.flops_fp64 / 1e9, rl->calib.flops_fp32 / 1e9, ana_fmt_bytes(rl->calib.bw_triad, a, sizeof a),
			rl->calib.flops_fp64_1t / 1e9, rl->calib.flops_fp32_1t / 1e9,
			ana_fmt_bytes(rl->calib.bw_triad_1t, b, sizeof b));
		fprintf(out, "  ridge        %.2f FLOP/byte fp64, %.2f fp32 (one thread: %.2f, %.2f); a region is judged "
			"on fp32 when most of its FLOP are\n",
			rl->calib.flops_fp64 / rl->calib.bw_triad, rl->calib.flops_fp32 / rl->calib.bw_triad,
			rl->calib.flops_fp64_1t / rl->calib.bw_triad_1t, rl->calib.flops_fp32_1t / rl->calib.bw_triad_1t);
	}
	else if (rl->calibrated < 0)
		fprintf(out, "  no ceilings: %s: %s\n", rl->path, rl->error);
	else
		fprintf(out, "  no ceilings: run `fennec calibrate` once on this machine (docs/roofline.md)\n");
	fprintf(out, "  %-32s %10s %12s %12s %10s %7s  %s\n", "region", "FLOP/byte", "GFLOP/s", "bytes/s", "own time", "roof%",
		"bound");
	for (uint32_t i = 0; i < rl->n; i++) {
		const ana_roof *r = &rl->r[i];
		char t[32], bw[32], roof[16] = "-";
		if (isfinite(r->roof_pct))
			snprintf(roof, sizeof roof, "%.0f%%", r->roof_pct);
		/* Without ceilings there is no ridge point, so no bound. */
		const char *bound = rl->calibrated != 1 ? "-" : !r->memory_bound ? (r->fp32 ? "compute (fp32)" : "compute") : "memory";
		fprintf(out, "  %-32s %10.3g %12.3g %10s/s %10s %7s  %s\n", tail_of(p->nodes[r->node].path, 32), r->ai,
			r->flops_per_s / 1e9, ana_fmt_bytes(r->bytes_per_s, bw, sizeof bw),
			ana_fmt_ns((double)p->nodes[r->node].self_ns, t, sizeof t), roof,
			bound);
	}
}

/* Per rank (recording), then the balance between ranks and where the slowest loses time. */
static void ranks_text(FILE *out, const ana_profile *p, const style *st)
{
	char a[32], b[32], c[32], d[32], e[32], f[32], g[32], r[24];
	heading(out, st, p->balance.present && !strcmp(p->balance.basis, "samples")
				 ? "Ranks (one recording each; work = on-CPU time outside communication code, from samples)"
				 : "Ranks (one recording each; work = region time outside communication regions)");
	fprintf(out, "  %5s %5s %10s %10s %10s %10s %6s %10s %10s %10s  %s\n", "rank", "procs", "wall", "CPU", "work", "comm",
		"steps", "step mean", "p50", "p95", "top region (self)");
	for (uint32_t i = 0; i < p->nranks; i++) {
		const ana_rank *k = &p->ranks[i];
		const ana_dist *sd = &k->step_dist;
		fprintf(out, "  %5s %5u %10s %10s %10s %10s %6llu %10s %10s %10s  %s%s\n", rank_label(k->rank, r, sizeof r),
			k->nprocs, ana_fmt_ns((double)k->wall_ns, a, sizeof a), ana_fmt_ns((double)k->cpu_ns, b, sizeof b),
			ana_fmt_ns((double)k->work_ns, c, sizeof c), ana_fmt_ns((double)k->comm_ns, d, sizeof d),
			(unsigned long long)k->steps, k->steps ? ana_fmt_ns(sd->mean, e, sizeof e) : "-",
			k->steps ? ana_fmt_ns(sd->p50, f, sizeof f) : "-", k->steps ? ana_fmt_ns(sd->p95, g, sizeof g) : "-",
			k->top_node != ANA_NONE ? p->nodes[k->top_node].path : "-",
			p->balance.present && i == p->balance.slowest ? "   <- slowest" : "");
	}
	const ana_balance *bl = &p->balance;
	if (!bl->present)
		return;
	fprintf(out, "  imbalance    %.1f%% (max / mean - 1 of the ranks' %s: %s vs %s)", bl->imbalance_pct,
		!strcmp(bl->basis, "work") ? "work" : !strcmp(bl->basis, "samples") ? "sampled work"
		: !strcmp(bl->basis, "steps") ? "mean step time" : "wall time",
		ana_fmt_ns(bl->max_ns, a, sizeof a), ana_fmt_ns(bl->mean_ns, b, sizeof b));
	if (isfinite(bl->step_imbalance_pct))
		fprintf(out, "; step time %.1f%%", bl->step_imbalance_pct);
	fputc('\n', out);
	fprintf(out, "  slowest      rank %s: the others wait about %s for it\n", rank_label(p->ranks[bl->slowest].rank, r, sizeof r),
		ana_fmt_ns(bl->max_ns - bl->others_mean_ns, a, sizeof a));
	for (uint32_t i = 0; i < bl->nlosses; i++) {
		const ana_loss *l = &bl->losses[i];
		char nm[512];
		fprintf(out, "  %-12s %s: %s there vs %s on the others (+%s)\n", i ? "" : "loses time",
			ana_loss_name(p, l, nm, sizeof nm),
			ana_fmt_ns((double)l->rank_ns, a, sizeof a), ana_fmt_ns(l->others_ns, b, sizeof b),
			ana_fmt_ns(l->excess_ns, c, sizeof c));
	}
}

/* One step's chain: its pieces of 1 % of the step or more, the others counted. */
static void chain_text(FILE *out, const ana_profile *p, const char *what, const ana_cp_chain *ch)
{
	char a[32], b[32], lane[64];
	fprintf(out, "  %-12s #%llu (%s):", what, (unsigned long long)ch->index, ana_fmt_ns((double)ch->ns, a, sizeof a));
	size_t shown = 0, small = 0;
	for (size_t i = 0; i < ch->n; i++) {
		const ana_cp_piece *x = &ch->pieces[i];
		uint64_t d = x->end_ns - x->start_ns;
		if ((double)d < 0.01 * (double)ch->ns) {
			small++;
			continue;
		}
		fprintf(out, "%s%s (%s) %s", shown++ ? " -> " : " ",
			x->label == ANA_NONE ? "untracked" : ana_cp_label_short(p, x->label),
			ana_cp_lane_name(p, x->lane, lane, sizeof lane), ana_fmt_ns((double)d, b, sizeof b));
	}
	if (small)
		fprintf(out, "%s(%zu piece%s under 1%% not shown)", shown ? "  " : " ", small, small == 1 ? "" : "s");
	fputc('\n', out);
}

/* The critical path (critpath.c): only where more than one lane (thread or GPU stream) had
 * tracked activity in the steps; for one thread it is the step's own regions, which the
 * region table already shows. */
static void critpath_text(FILE *out, const ana_profile *p, const style *st)
{
	const ana_critpath *cp = p->cp;
	char a[32], lane[64];
	if (!cp->steps) {
		heading(out, st, "Critical path");
		if (cp->over_budget)
			fprintf(out, "  not computed: no step ended before the analysis's budget of %u region events ran out\n",
				ANA_CP_BUDGET);
		else
			fprintf(out, "  not computed: no step had its regions recorded (step sampling)\n");
		return;
	}
	if (cp->active_lanes < 2)
		return;
	char title[160];
	snprintf(title, sizeof title, "Critical path of the steps (%llu step%s; inferred from timing: docs/critical_path.md)",
		 (unsigned long long)cp->steps, cp->steps == 1 ? "" : "s");
	heading(out, st, title);
	if (cp->steps < cp->steps_total)
		fprintf(out, "  %llu of %llu steps: %llu not recorded (step sampling), %llu past the analysis's budget\n",
			(unsigned long long)cp->steps, (unsigned long long)cp->steps_total, (unsigned long long)cp->unrecorded,
			(unsigned long long)cp->over_budget);
	fprintf(out, "  %-36s %-16s %10s %7s %11s\n", "region", "thread", "on path", "share", "steps");
	uint32_t rows = cp->ne < 12 ? cp->ne : 12;
	for (uint32_t i = 0; i < rows; i++) {
		const ana_cp_entry *e = &cp->e[i];
		const char *name = ana_cp_label_name(p, e->label);
		size_t len = strlen(name);
		char steps[48];
		snprintf(steps, sizeof steps, "%llu/%llu", (unsigned long long)e->steps, (unsigned long long)cp->steps);
		char role[80];
		ana_cp_lane_name(p, e->lane, lane, sizeof lane);
		if (e->threads > 1)
			snprintf(role, sizeof role, "%.*s x%u", 11, lane, e->threads); /* the role's threads */
		else
			snprintf(role, sizeof role, "%s", lane);
		fprintf(out, "  %-36s %-16.16s %10s %6.1f%% %11s%s\n", len > 36 ? name + len - 36 : name, role,
			ana_fmt_ns((double)e->ns, a, sizeof a), e->share_pct, steps, e->waiting ? "  (waiting)" : "");
	}
	if (rows < cp->ne)
		fprintf(out, "  ... %u more (JSON lists all)\n", cp->ne - rows);
	fprintf(out, "  %-36s %-16s %10s %6.1f%%\n", "untracked (no region running)", "",
		ana_fmt_ns((double)cp->untracked_ns, a, sizeof a), cp->untracked_pct);
	chain_text(out, p, "slowest step", &cp->slowest);
	chain_text(out, p, "median step", &cp->median);
}

/* A time from the recording's start for the window line: "1h02m", "5m00s", "12.3s". */
static const char *clock_of(uint64_t ns, char *buf, size_t n)
{
	double sec = (double)ns / 1e9;
	uint64_t whole = (uint64_t)sec;
	if (whole >= 3600)
		snprintf(buf, n, "%lluh%02llum", (unsigned long long)(whole / 3600), (unsigned long long)(whole / 60 % 60));
	else if (whole >= 60)
		snprintf(buf, n, "%llum%02llus", (unsigned long long)(whole / 60), (unsigned long long)(whole % 60));
	else
		snprintf(buf, n, "%.3gs", sec);
	return buf;
}

int rep_text(FILE *out, const ana_profile *p, const rep_options *o)
{
	style s = {"", "", "", "", "", ""};
	if (o && o->color)
		s = (style){"\033[1m", "\033[2m", "\033[31m", "\033[33m", "\033[36m", "\033[0m"};
	const ana_process *first = &p->procs[0];
	char a[32], b[32], c[32], d[32], e[32], f[32], g[32], h[32], k[32];

	fprintf(out, "%sfennec analysis%s  %s\n", s.bold, s.reset, first->file.path);
	if (p->window.active) {
		/* What the report covers: every time and share below is of the window. */
		const ana_window *w = &p->window;
		char st[48] = "";
		if (p->steps)
			snprintf(st, sizeof st, " (steps %llu-%llu)", (unsigned long long)w->first_step,
				 (unsigned long long)(w->first_step + p->steps - 1));
		fprintf(out, "window: %s to %s of %s%s\n", clock_of(w->begin_ns - w->rec_begin_ns, a, sizeof a),
			clock_of(w->end_ns - w->rec_begin_ns, b, sizeof b), clock_of(w->rec_end_ns - w->rec_begin_ns, c, sizeof c), st);
	}
	for (uint32_t i = 0; i < p->nwarnings; i++)
		fprintf(out, "%swarning:%s %s\n", s.yellow, s.reset, p->warnings[i]);

	heading(out, &s, "Run summary");
	fprintf(out, "  command      %s\n", first->file.cmdline ? first->file.cmdline : "");
	fprintf(out, "  wall         %s%s\n", ana_fmt_ns((double)p->wall_ns, a, sizeof a), p->cut_short ? "  (cut short)" : "");
	double cpu = (double)(p->cpu_user_ns + p->cpu_sys_ns);
	if (p->window.active) /* the file gives the session's CPU only: no share of the window's wall */
		fprintf(out, "  CPU          %s user + %s sys in the whole recording, not the window%s\n",
			ana_fmt_ns((double)p->cpu_user_ns, a, sizeof a), ana_fmt_ns((double)p->cpu_sys_ns, b, sizeof b),
			p->nprocs > 1 ? ", all processes" : "");
	else
		fprintf(out, "  CPU          %s user + %s sys (%.0f%% of wall%s)\n", ana_fmt_ns((double)p->cpu_user_ns, a, sizeof a),
			ana_fmt_ns((double)p->cpu_sys_ns, b, sizeof b), p->wall_ns ? 100 * cpu / (double)p->wall_ns : 0,
			p->nprocs > 1 ? ", all processes" : "");
	if (p->overhead.known) {
		const ana_overhead *ov = &p->overhead;
		fprintf(out, "  fennec       %s of that CPU is fennec's (%.1f%%): writer %s, events %s, heap %s, samples %s\n",
			ana_fmt_ns(ov->total_ns, a, sizeof a), cpu > 0 ? 100 * ov->total_ns / cpu : 0,
			ana_fmt_ns(ov->writer_ns, b, sizeof b), ana_fmt_ns(ov->events_ns, c, sizeof c),
			ana_fmt_ns(ov->heap_ns, d, sizeof d), ana_fmt_ns(ov->samples_ns, e, sizeof e));
	} else if (p->collector_known && p->collector_known == p->nprocs) {
		fprintf(out, "  fennec       %s of that CPU in fennec's writer (%.1f%%; its work on the program's threads is not in this older file)\n",
			ana_fmt_ns((double)p->collector_cpu_ns, a, sizeof a), cpu > 0 ? 100 * (double)p->collector_cpu_ns / cpu : 0);
	}
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
		fprintf(out, "  set-up       %s before the first step mark (not a step)\n",
			ana_fmt_ns((double)p->setup_ns, a, sizeof a));
	} else if (p->marks)
		fprintf(out, "  steps        none: one fennec_step() mark, after %s of set-up (a step runs from one mark to "
			"the next)\n", ana_fmt_ns((double)p->setup_ns, a, sizeof a));
	else
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
		if (p->nprocs > 1)
			fprintf(out, "  share: of the wall time of the processes a region ran in, summed (%u processes here; "
				"--format json gives each process's share, by_process)\n", p->nprocs);

		heading(out, &s, "Region tree");
		for (uint32_t r = 0; r < p->nnodes; r++)
			if (p->nodes[order[r]].parent == ANA_NONE)
				tree(out, p, order[r], 0);
		free(order);
	}

	if (p->smp.present)
		samples_text(out, p, s.bold, s.reset);

	if (p->nthreads > 1 || p->nprocs > 1) {
		heading(out, &s, "Threads");
		int smp = p->smp.present;
		fprintf(out, "  %8s %8s %-16s %10s %10s %8s %10s%s\n", "pid", "tid", "name", "busy", "lifetime", "busy%", "events",
			smp ? "    samples  off-CPU" : "");
		uint32_t shown = 0;
		for (uint32_t i = 0; i < p->nthreads && shown < 32; i++, shown++) {
			const ana_thread *t = &p->threads[i];
			if (t->index == UINT32_MAX) /* seen only in samples: it never used the API */
				fprintf(out, "  %8llu %8llu %-16s %10s %10s %8s %10s", (unsigned long long)p->procs[t->process].file.pid,
					(unsigned long long)t->tid, t->name, "-", "-", "-", "-");
			else
				fprintf(out, "  %8llu %8llu %-16s %10s %10s %7.1f%% %10llu",
					(unsigned long long)p->procs[t->process].file.pid, (unsigned long long)t->tid, t->name,
					ana_fmt_ns((double)t->busy_ns, a, sizeof a), ana_fmt_ns((double)t->lifetime_ns, b, sizeof b),
					t->lifetime_ns ? 100.0 * (double)t->busy_ns / (double)t->lifetime_ns : 0,
					(unsigned long long)t->events);
			if (smp)
				fprintf(out, " %10llu %8llu", (unsigned long long)p->smp.all.thread_samples[(size_t)i * ANA_NKINDS + ANA_CPU],
					(unsigned long long)p->smp.all.thread_samples[(size_t)i * ANA_NKINDS + ANA_OFFCPU]);
			fputc('\n', out);
		}
		if (p->nthreads > shown)
			fprintf(out, "  ... %u more threads (JSON lists all)\n", p->nthreads - shown);
	}
	if (p->cp)
		critpath_text(out, p, &s);
	if (p->nprocs > 1)
		processes_text(out, p, &s);
	if (p->nranks > 1)
		ranks_text(out, p, &s);
	if (p->roof.n)
		roofline_text(out, p, &s);
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

	if (p->mem.present)
		memory_text(out, p, &s);
	rep_gpu_text(out, p, s.bold, s.reset);
	rep_sys_text(out, p, s.bold, s.reset);

	heading(out, &s, "Findings");
	if (!p->nfindings)
		fprintf(out, "  none: no rule fired (thresholds: docs/bottlenecks.md)\n");
	for (uint32_t i = 0; i < p->nfindings; i++) {
		const ana_finding *x = &p->findings[i];
		const char *col = x->severity == ANA_HIGH ? s.red : x->severity == ANA_MEDIUM ? s.yellow : s.cyan;
		fprintf(out, "  %s[%s]%s %s: %s\n", col, ana_severity_name(x->severity), s.reset, x->type, x->subject);
		fprintf(out, "      evidence: %s\n", x->evidence);
		fprintf(out, "      fix:      %s\n", x->recommendation);
		/* A memory finding saves memory: "up to 0.0% of the run" said nothing. A rule with
		 * no estimate either way (allocation_churn) prints no gain. */
		if (x->expected_gain_bytes > 0) {
			char gb[32];
			fprintf(out, "      gain:     up to %s of memory\n", ana_fmt_bytes(x->expected_gain_bytes, gb, sizeof gb));
		} else if (x->expected_gain_pct > 0) {
			fprintf(out, "      gain:     up to %.1f%% of the run\n", x->expected_gain_pct);
		}
	}
	return ferror(out) ? FENNEC_EIO : 0;
}

/*
 * json.c - the JSON report, schema fennec.analysis/1 (docs/json.md). Keys are added in
 * later versions, never renamed. Sample sections come from the model's selected view
 * (p->smp.sel).
 */
#include "report/report.h"
#include "analyze/critpath.h"

#include <math.h>
#include <stdlib.h>

/* This report's layout: a key a line (the shared writers are in jsonw.c). */
#define KEY_INDENT "\n    "

static void key(FILE *out, const char *k, int *first) { rep_json_key(out, KEY_INDENT, k, first); }

static void knum(FILE *out, const char *k, double v, int *first) { rep_json_knum(out, KEY_INDENT, k, v, first); }

/* (NULL writes "", as rep_json_string does) */
static void kstr(FILE *out, const char *k, const char *v, int *first)
{
	key(out, k, first);
	rep_json_string(out, v);
}

static void dist_keys(FILE *out, const ana_dist *d, const char *suffix, int *first)
{
	char k[32];
	const char *names[] = {"mean", "std", "min", "max", "p50", "p95", "p99"};
	double vals[] = {d->mean, d->std, d->min, d->max, d->p50, d->p95, d->p99};
	for (size_t i = 0; i < ARRAY_LEN(names); i++) {
		snprintf(k, sizeof k, "%s%s", names[i], suffix);
		knum(out, k, d->count ? vals[i] : NAN, first);
	}
}

/* Rows of a sample table: all, unless --top asked for fewer. */
static uint32_t rows(const ana_profile *p, uint32_t n) { return p->opt.top && p->opt.top < n ? p->opt.top : n; }

static void kfile(FILE *out, const ana_profile *p, const char *k, uint32_t file, int *first)
{
	key(out, k, first);
	if (file == ANA_NONE)
		fputs("null", out);
	else
		rep_json_string(out, p->names[file]);
}

/* A function's name (funcs index), or null. */
static void kfunc(FILE *out, const ana_profile *p, const char *k, uint32_t fn, int *first)
{
	key(out, k, first);
	if (fn == ANA_NONE)
		fputs("null", out);
	else
		rep_json_string(out, p->names[p->smp.funcs[fn].name]);
}

static void functions(FILE *out, const ana_profile *p, const ana_sample_view *v, unsigned kind)
{
	uint32_t n = rows(p, v->nfuncs[kind]);
	for (uint32_t i = 0; i < n; i++) {
		const ana_hot_func *h = &v->funcs[kind][i];
		const ana_func *fn = &p->smp.funcs[h->func];
		int f1 = 1;
		fputs(i ? ",\n   {" : "\n   {", out);
		kstr(out, "name", p->names[fn->name], &f1);
		kstr(out, "module", p->names[fn->module], &f1);
		kstr(out, "language", fn->lang == ANA_LANG_PYTHON ? "python" : "native", &f1);
		kfile(out, p, "file", h->file, &f1);
		knum(out, "line", h->file == ANA_NONE || !h->line ? NAN : h->line, &f1);
		knum(out, "self_samples", (double)h->self, &f1);
		knum(out, "total_samples", (double)h->total, &f1);
		knum(out, "self_pct", h->self_pct, &f1);
		knum(out, "total_pct", h->total_pct, &f1);
		kfunc(out, p, "caller", h->caller, &f1);
		knum(out, "caller_pct", h->caller == ANA_NONE ? NAN : h->caller_pct, &f1);
		kfunc(out, p, "entry", h->entry, &f1);
		knum(out, "entry_pct", h->entry == ANA_NONE ? NAN : h->entry_pct, &f1);
		fputc('}', out);
	}
	fputs(n ? "\n  ],\n" : "],\n", out);
}

static void samples_json(FILE *out, const ana_profile *p)
{
	const ana_sampling *s = &p->smp;
	const ana_sample_view *v = &s->sel;
	int f1 = 1;
	fputs("  \"samples\": {", out);
	knum(out, "count", (double)s->nsamples, &f1);
	knum(out, "cpu_samples", (double)s->all.samples[ANA_CPU], &f1);
	knum(out, "offcpu_samples", (double)s->all.samples[ANA_OFFCPU], &f1);
	knum(out, "rate_hz", s->present ? s->achieved_hz : NAN, &f1);
	knum(out, "requested_hz", s->present ? (double)s->requested_hz : NAN, &f1);
	knum(out, "period_ns", s->present ? (double)s->period_ns : NAN, &f1);
	kstr(out, "mode", ana_sample_mode_name(s->present ? s->mode : FMT_SAMPLE_OFF), &f1);
	key(out, "source", &f1);
	if (s->present)
		rep_json_string(out, ana_sample_source_name(s->source));
	else
		fputs("null", out);
	knum(out, "taken", (double)s->taken, &f1);
	knum(out, "dropped", (double)s->dropped, &f1);
	knum(out, "truncated", (double)s->truncated, &f1);
	knum(out, "cpu_weight", (double)s->weight[ANA_CPU], &f1);
	knum(out, "offcpu_weight", (double)s->weight[ANA_OFFCPU], &f1);
	knum(out, "unknown_frames", (double)s->unknown_frames, &f1);
	key(out, "budget", &f1);
	if (!s->budget_ppm) {
		fputs("null", out);
	} else {
		int g = 1;
		fputc('{', out);
		knum(out, "budget_pct", (double)s->budget_ppm / 1e4, &g);
		knum(out, "last_share_pct", s->budget_share_pct, &g);
		knum(out, "final_stride", s->budget_stride ? (double)s->budget_stride : 1, &g);
		knum(out, "changes_not_kept", (double)s->budget_changes_more, &g);
		key(out, "changes", &g);
		fputc('[', out);
		for (size_t i = 0; i < s->nbudget_changes; i++) {
			const struct ana_budget_change *c = &s->budget_changes[i];
			int h = 1;
			fputs(i ? ", {" : "{", out);
			knum(out, "pid", (double)c->pid, &h);
			knum(out, "at_ns", c->at_ns, &h);
			knum(out, "stride", c->stride, &h);
			knum(out, "hz", s->period_ns ? 1e9 / (double)s->period_ns / c->stride : NAN, &h);
			knum(out, "share_pct", c->share_pct, &h);
			fputc('}', out);
		}
		fputs("]}", out);
	}
	key(out, "python", &f1);
	if (!s->py_version) {
		fputs("null", out);
	} else {
		char ver[32];
		snprintf(ver, sizeof ver, "%u.%u.%u", (unsigned)(s->py_version >> 24), (unsigned)(s->py_version >> 16) & 0xff,
			 (unsigned)(s->py_version >> 8) & 0xff);
		static const char *st[] = {"ok", "unsupported_version", "off", "ring_source"};
		int g = 1;
		fputc('{', out);
		kstr(out, "version", ver, &g);
		kstr(out, "frames", s->py_status < 4 ? st[s->py_status] : "unknown", &g);
		knum(out, "samples", (double)s->py_samples, &g);
		knum(out, "gil_held_samples", (double)s->py_gil, &g);
		knum(out, "gil_wait_samples", (double)s->py_gil_wait, &g);
		knum(out, "cut_samples", (double)s->py_cut, &g);
		knum(out, "unplaced_samples", (double)s->py_unplaced, &g);
		key(out, "native", &g);
		fputs(p->opt.native ? "true" : "false", out);
		fputc('}', out);
	}
	key(out, "selection", &f1);
	const ana_sample_filter *f = &v->filter;
	if (!f->pid && !f->tid && !f->region)
		fputs("null", out);
	else {
		fputs("{\"pid\": ", out);
		rep_json_number(out, f->pid ? (double)f->pid : NAN);
		fputs(", \"tid\": ", out);
		rep_json_number(out, f->tid ? (double)f->tid : NAN);
		fputs(", \"region\": ", out);
		if (f->region)
			rep_json_string(out, f->region);
		else
			fputs("null", out);
		fputs(", \"cpu_samples\": ", out);
		rep_json_number(out, (double)v->samples[ANA_CPU]);
		fputs(", \"offcpu_samples\": ", out);
		rep_json_number(out, (double)v->samples[ANA_OFFCPU]);
		fputs(", \"cpu_weight\": ", out);
		rep_json_number(out, (double)v->weight[ANA_CPU]);
		fputs(", \"offcpu_weight\": ", out);
		rep_json_number(out, (double)v->weight[ANA_OFFCPU]);
		fputc('}', out);
	}
	fputs("\n  },\n", out);

	fputs("  \"functions\": [", out);
	functions(out, p, v, ANA_CPU);
	fputs("  \"offcpu_functions\": [", out);
	functions(out, p, v, ANA_OFFCPU);

	fputs("  \"operators\": [", out);
	for (uint32_t i = 0; i < p->nops; i++) {
		const ana_op *o = &p->ops[i];
		int g1 = 1;
		fputs(i ? ",\n   {" : "\n   {", out);
		kstr(out, "name", p->names[o->name], &g1);
		knum(out, "self_pct", o->self_pct, &g1);
		knum(out, "total_pct", o->total_pct, &g1);
		knum(out, "self_samples", (double)o->self, &g1);
		knum(out, "total_samples", (double)o->total, &g1);
		knum(out, "calls_seen", (double)o->calls_seen, &g1);
		knum(out, "worker_samples", (double)o->worker, &g1);
		const ana_loc *l = o->caller != ANA_NONE ? &p->smp.locs[o->caller] : NULL;
		key(out, "top_caller", &g1);
		if (l)
			rep_json_string(out, p->names[p->smp.funcs[l->func].name]);
		else
			fputs("null", out);
		kfile(out, p, "top_caller_file", l ? l->file : ANA_NONE, &g1);
		knum(out, "top_caller_line", l && l->line ? l->line : NAN, &g1);
		fputc('}', out);
	}
	fputs(p->nops ? "\n  ],\n" : "],\n", out);

	fputs("  \"lines\": [", out);
	uint32_t n = rows(p, v->nlines[ANA_CPU]);
	for (uint32_t i = 0; i < n; i++) {
		const ana_hot_line *l = &v->lines[ANA_CPU][i];
		fputs(i ? ",\n   {" : "\n   {", out);
		f1 = 1;
		kstr(out, "file", p->names[l->file], &f1);
		knum(out, "line", l->line ? l->line : NAN, &f1);
		kstr(out, "function", p->names[s->funcs[l->func].name], &f1);
		knum(out, "self_samples", (double)l->self, &f1);
		knum(out, "self_pct", l->self_pct, &f1);
		fputc('}', out);
	}
	fputs(n ? "\n  ],\n" : "],\n", out);

	fputs("  \"modules\": [", out);
	for (uint32_t i = 0; i < s->nmodules; i++) {
		const ana_module *m = &s->modules[i];
		fputs(i ? ",\n   {" : "\n   {", out);
		f1 = 1;
		kstr(out, "path", p->names[m->path], &f1);
		knum(out, "pid", (double)p->procs[m->process].file.pid, &f1);
		kstr(out, "status", ana_module_status_name(m->status), &f1);
		knum(out, "frames", (double)m->samples, &f1);
		fputc('}', out);
	}
	fputs(s->nmodules ? "\n  ],\n" : "],\n", out);
}

/* The region's samples and top functions (on-CPU), from the selected view. */
/* A region's time and share per process, when the recording has several: its share of
 * that process's wall time. */
static void share_by_process(FILE *out, const ana_profile *p, uint32_t node, int *first)
{
	key(out, "by_process", first);
	if (p->nprocs < 2) {
		fputs("null", out);
		return;
	}
	fputc('[', out);
	uint32_t last = ANA_NONE;
	uint64_t ns = 0;
	int f1 = 1;
	for (uint32_t i = 0; i <= p->ntnodes; i++) {
		uint32_t proc = i < p->ntnodes ? p->threads[p->tnodes[i].thread].process : ANA_NONE;
		if (i < p->ntnodes && p->tnodes[i].node != node)
			continue;
		if (proc != last && last != ANA_NONE && ns) {
			const ana_process *pr = &p->procs[last];
			int f2 = 1;
			fputs(f1 ? "{" : ", {", out);
			f1 = 0;
			knum(out, "pid", (double)pr->file.pid, &f2);
			knum(out, "total_ns", (double)ns, &f2);
			knum(out, "share_pct", pr->wall_ns ? 100.0 * (double)ns / (double)pr->wall_ns : NAN, &f2);
			fputc('}', out);
			ns = 0;
		}
		last = proc;
		if (i < p->ntnodes)
			ns += p->tnodes[i].total_ns;
	}
	fputc(']', out);
}

static void region_samples(FILE *out, const ana_profile *p, uint32_t node, int *f1)
{
	const ana_sample_view *v = &p->smp.sel;
	const ana_node_samples *ns = v->nodes ? &v->nodes[node] : NULL;
	knum(out, "samples", ns ? (double)ns->samples[ANA_CPU] : 0, f1);
	knum(out, "offcpu_samples", ns ? (double)ns->samples[ANA_OFFCPU] : 0, f1);
	key(out, "top_functions", f1);
	fputc('[', out);
	for (uint32_t j = 0; ns && j < ns->ntop; j++) {
		const ana_func *fn = &p->smp.funcs[ns->top[j]];
		fputs(j ? ", {\"name\": " : "{\"name\": ", out);
		rep_json_string(out, p->names[fn->name]);
		fputs(", \"module\": ", out);
		rep_json_string(out, p->names[fn->module]);
		fputs(", \"self_samples\": ", out);
		rep_json_number(out, (double)ns->top_weight[j]);
		fputs(", \"self_pct\": ", out);
		rep_json_number(out, ns->top_pct[j]);
		fputc('}', out);
	}
	fputc(']', out);
}

/* A heap site's stack: strings "function file:line", innermost first, allocator frames kept. */
static void mem_stack(FILE *out, const ana_profile *p, const ana_mem_site *s)
{
	fputs("[", out);
	if (s->stack != ANA_NONE) {
		const ana_stack *st = &p->smp.stacks[s->stack];
		for (uint32_t k = 0; k < st->n && k < 64; k++) {
			const ana_loc *l = &p->smp.locs[st->locs[st->n - 1 - k]];
			char buf[1024];
			const char *fn = p->names[p->smp.funcs[l->func].name];
			if (l->file != ANA_NONE && l->line)
				snprintf(buf, sizeof buf, "%s %s:%u", fn, p->names[l->file], l->line);
			else
				snprintf(buf, sizeof buf, "%s", fn);
			if (k)
				fputs(", ", out);
			rep_json_string(out, buf);
		}
	}
	fputs("]", out);
}

/* A heap site's function, region and process keys. */
static void site_keys(FILE *out, const ana_profile *p, const ana_mem_site *s, int *first)
{
	kstr(out, "function", ana_mem_site_name(p, s), first);
	key(out, "region", first);
	if (s->node == ANA_NONE)
		fputs("null", out);
	else
		rep_json_string(out, p->nodes[s->node].path);
	knum(out, "process", (double)p->procs[s->process].file.pid, first);
}

static void mem_sites(FILE *out, const ana_profile *p, const char *name, int by, uint32_t max, int *first)
{
	uint32_t idx[64];
	uint32_t n = ana_mem_top(p, by, idx, max < 64 ? max : 64);
	key(out, name, first);
	fputs("[", out);
	for (uint32_t i = 0; i < n; i++) {
		const ana_mem_site *s = &p->mem.sites[idx[i]];
		int f1 = 1;
		fputs(i ? ",\n    {" : "\n    {", out);
		double count, bytes = ana_mem_measure(s, by, &count), cv, bv = ana_mem_measure_var(s, by, &cv);
		int full = p->mem.mode == FMT_MEM_FULL, err = !full && by != ANA_MEM_PEAK && by != ANA_MEM_TEMP;
		knum(out, "bytes", full ? bytes : round(bytes), &f1);
		knum(out, "count", full ? count : round(count), &f1);
		knum(out, "bytes_stderr", full ? 0 : err ? sqrt(bv) : NAN, &f1);
		knum(out, "count_stderr", full ? 0 : err ? sqrt(cv) : NAN, &f1);
		site_keys(out, p, s, &f1);
		key(out, "stack", &f1);
		mem_stack(out, p, s);
		fputs("}", out);
	}
	fputs(n ? "\n  ]" : "]", out);
}

/* The live bytes of the stacks that held the most, over their process's timeline: at most
 * 500 points each, evenly thinned. */
static void stacks_over_time(FILE *out, const ana_profile *p, int *first)
{
	const ana_memory *m = &p->mem;
	uint64_t t0 = p->procs[0].file.start_mono_ns;
	key(out, "stacks_over_time", first);
	fputs("[", out);
	for (uint32_t i = 0; i < m->nseries; i++) {
		const ana_mem_series *sr = &m->series[i];
		const ana_mem_site *s = &m->sites[sr->site];
		int f1 = 1;
		fputs(i ? ",\n    {" : "\n    {", out);
		site_keys(out, p, s, &f1);
		knum(out, "processes", (double)sr->processes, &f1);
		knum(out, "max_bytes", round(sr->max_bytes), &f1);
		knum(out, "last_bytes", round(sr->last_bytes), &f1);
		key(out, "trend", &f1);
		if (sr->has_trend) {
			int f2 = 1;
			fputs("{", out);
			kstr(out, "basis", sr->per_step ? "step" : "second", &f2);
			knum(out, sr->per_step ? "slope_bytes_per_step" : "slope_bytes_per_s", sr->slope, &f2);
			knum(out, "r2", sr->r2, &f2);
			fputs("}", out);
		} else {
			fputs("null", out);
		}
		key(out, "stack", &f1);
		mem_stack(out, p, s);
		key(out, "points", &f1);
		size_t stride = sr->n > 500 ? (sr->n + 499) / 500 : 1;
		fputs("[", out);
		for (size_t j = 0, k = 0; j < sr->n; j += stride, k++) {
			uint64_t t = m->points[sr->point[j]].t_ns;
			fprintf(out, "%s[%llu, %.0f]", k ? ", " : "", (unsigned long long)(t > t0 ? t - t0 : 0),
				sr->bytes[j] > 0 ? round(sr->bytes[j]) : 0.0);
		}
		fputs("]}", out);
	}
	fputs(m->nseries ? "\n  ]" : "]", out);
}

static void memory_json(FILE *out, const ana_profile *p)
{
	const ana_memory *m = &p->mem;
	if (!m->present)
		return;
	int f1 = 1, full = m->mode == FMT_MEM_FULL;
	fputs("  \"memory\": {", out);
	kstr(out, "mode", full ? "full" : "sampled", &f1);
	knum(out, "sample_rate_bytes", full ? NAN : (double)m->rate, &f1);
	knum(out, "mmap_min_bytes", m->mmap_min ? (double)m->mmap_min : NAN, &f1);
	knum(out, "peak_bytes", (double)m->peak_bytes, &f1);
	kstr(out, "peak_basis", full ? "requested" : "usable", &f1);
	knum(out, "peak_usable_bytes", (double)m->peak_usable_bytes, &f1);
	knum(out, "peak_t_ns", (double)(m->peak_t_ns > p->procs[0].file.start_mono_ns ? m->peak_t_ns - p->procs[0].file.start_mono_ns : 0), &f1);
	knum(out, "peak_step", (double)m->peak_step, &f1);
	knum(out, "peak_process", m->peak_process < p->nprocs ? (double)p->procs[m->peak_process].file.pid : NAN, &f1);
	key(out, "peak_region", &f1);
	if (m->peak_node == ANA_NONE && m->peak_region == ANA_NONE)
		fputs("null", out);
	else
		rep_json_string(out, m->peak_node != ANA_NONE ? p->nodes[m->peak_node].path : p->names[m->peak_region]);
	knum(out, "peak_rss_bytes", (double)m->peak_rss_bytes, &f1);
	knum(out, "allocations", (double)m->allocs, &f1);
	knum(out, "frees", (double)m->frees, &f1);
	knum(out, "allocated_bytes", (double)m->alloc_bytes, &f1);
	knum(out, "largest_bytes", (double)m->largest_bytes, &f1);
	knum(out, "allocations_per_step", m->allocs_per_step, &f1);
	knum(out, "allocation_rate_per_s", m->alloc_rate_per_s, &f1);
	knum(out, "temporary_allocations", full ? (double)m->temporary : NAN, &f1);
	knum(out, "temporary_bytes", full ? (double)m->temporary_bytes : NAN, &f1);
	knum(out, "live_at_end_bytes", (double)m->end_live_bytes, &f1);
	knum(out, "live_at_end_count", (double)m->end_live_count, &f1);
	knum(out, "sampled_allocations", m->mode == FMT_MEM_SAMPLED ? (double)m->sampled_allocs : NAN, &f1);
	knum(out, "leaked_bytes", full ? m->leaked_bytes : round(m->leaked_bytes), &f1);
	knum(out, "leaked_count", full ? m->leaked_count : round(m->leaked_count), &f1);
	knum(out, "leaked_bytes_stderr", full ? 0 : sqrt(m->leaked_bytes_var), &f1);
	knum(out, "leaked_count_stderr", full ? 0 : sqrt(m->leaked_count_var), &f1);
	key(out, "leaks_estimated", &f1);
	fputs(full ? "false" : "true", out);
	knum(out, "reachable_bytes", m->reach_procs ? m->reach_bytes : NAN, &f1);
	knum(out, "reachable_count", m->reach_procs ? m->reach_count : NAN, &f1);
	key(out, "leak_scan", &f1);
	if (!m->reach_procs && !m->reach_unscanned) {
		fputs("null", out);
	} else {
		int f2 = 1;
		fputs("{", out);
		knum(out, "processes", (double)m->reach_procs, &f2);
		knum(out, "unscanned_processes", (double)m->reach_unscanned, &f2);
		key(out, "unscanned_why", &f2);
		if (m->reach_unscanned)
			rep_json_string(out, ana_reach_why(m->reach_why));
		else
			fputs("null", out);
		knum(out, "longest_ns", (double)m->reach_ns, &f2);
		knum(out, "root_bytes", (double)m->reach_root_bytes, &f2);
		knum(out, "heap_bytes", (double)m->reach_heap_bytes, &f2);
		fputs("}", out);
	}
	knum(out, "runtime_bytes", full ? m->runtime_bytes : round(m->runtime_bytes), &f1);
	knum(out, "cut_short_bytes", full ? m->cut_short_bytes : round(m->cut_short_bytes), &f1);
	knum(out, "cut_short_count", full ? m->cut_short_count : round(m->cut_short_count), &f1);
	knum(out, "cut_short_processes", (double)m->cut_short_procs, &f1);
	knum(out, "exec_bytes", full ? m->exec_bytes : round(m->exec_bytes), &f1);
	knum(out, "exec_count", full ? m->exec_count : round(m->exec_count), &f1);
	knum(out, "exec_processes", (double)m->exec_procs, &f1);
	knum(out, "heap_records", (double)m->records, &f1);
	knum(out, "dropped_records", (double)m->dropped, &f1);
	knum(out, "dropped_allocations", m->drops_unknown ? NAN : (double)m->dropped_allocs, &f1);
	knum(out, "dropped_frees", m->drops_unknown ? NAN : (double)m->dropped_frees, &f1);
	knum(out, "untracked_allocations", (double)m->untracked, &f1);
	key(out, "trend", &f1);
	if (!m->has_trend) {
		fputs("null", out);
	} else {
		int f2 = 1;
		fputs("{", out);
		kstr(out, "basis", m->trend_per_step ? "step" : "second", &f2);
		knum(out, m->trend_per_step ? "slope_bytes_per_step" : "slope_bytes_per_s", m->slope, &f2);
		knum(out, "intercept_bytes", m->intercept, &f2);
		knum(out, "r2", m->r2, &f2);
		knum(out, "points", m->trend_points, &f2);
		knum(out, m->trend_per_step ? "span_steps" : "span_s", m->trend_span, &f2);
		knum(out, "growth_bytes", m->trend_growth, &f2);
		knum(out, m->trend_per_step ? "late_slope_bytes_per_step" : "late_slope_bytes_per_s", m->late_slope, &f2);
		knum(out, "late_r2", m->late_r2, &f2);
		knum(out, m->trend_per_step ? "tail_slope_bytes_per_step" : "tail_slope_bytes_per_s", m->tail_slope, &f2);
		knum(out, "tail_r2", m->tail_r2, &f2);
		knum(out, "threshold_bytes", p->opt.leak_threshold_bytes > 0 ? p->opt.leak_threshold_bytes : 10e6, &f2);
		fputs("}", out);
	}
	mem_sites(out, p, "leaks", ANA_MEM_LIVE, rows(p, 20), &f1);
	mem_sites(out, p, "reachable", ANA_MEM_REACH, rows(p, 20), &f1);
	mem_sites(out, p, "cut_short_live", ANA_MEM_CUT, rows(p, 20), &f1);
	mem_sites(out, p, "exec_live", ANA_MEM_EXEC, rows(p, 20), &f1);
	mem_sites(out, p, "top_allocators", ANA_MEM_BYTES, rows(p, 20), &f1);
	mem_sites(out, p, "at_peak", ANA_MEM_PEAK, rows(p, 20), &f1);
	if (full)
		mem_sites(out, p, "temporary", ANA_MEM_TEMP, rows(p, 20), &f1);
	stacks_over_time(out, p, &f1);
	key(out, "timeline", &f1);
	/* At most 2000 points, evenly thinned; step points are what the trend used. */
	size_t n = m->npoints, stride = n > 2000 ? (n + 1999) / 2000 : 1;
	uint64_t t0 = p->procs[0].file.start_mono_ns;
	fputs("[", out);
	for (size_t i = 0, k = 0; i < n; i += stride, k++) {
		const ana_mem_point *pt = &m->points[i];
		fprintf(out, "%s{\"t_ns\": %llu, \"live_bytes\": %llu, \"rss_bytes\": %llu, \"step\": %llu, \"process\": %llu}",
			k ? ",\n    " : "\n    ", (unsigned long long)(pt->t_ns > t0 ? pt->t_ns - t0 : 0),
			(unsigned long long)pt->live_bytes, (unsigned long long)pt->rss_bytes, (unsigned long long)pt->step,
			(unsigned long long)p->procs[pt->process].file.pid);
	}
	fputs(n ? "\n  ]\n  },\n" : "]\n  },\n", out);
}

/* Mean, median and 95th percentile of steps, null without steps. */
static void step_keys(FILE *out, const ana_dist *d, int *first)
{
	knum(out, "step_mean_ns", d->count ? d->mean : NAN, first);
	knum(out, "step_p50_ns", d->count ? d->p50 : NAN, first);
	knum(out, "step_p95_ns", d->count ? d->p95 : NAN, first);
}

static void top_region(FILE *out, const ana_profile *p, uint32_t node, uint64_t self_ns, int *first)
{
	key(out, "top_region", first);
	if (node == ANA_NONE)
		fputs("null", out);
	else
		rep_json_string(out, p->nodes[node].path);
	knum(out, "top_region_self_ns", node == ANA_NONE ? NAN : (double)self_ns, first);
}

/* "roofline" (docs/roofline.md): null unless some region was annotated with work. */
static void roofline_json(FILE *out, const ana_profile *p)
{
	const ana_roofline *rl = &p->roof;
	fputs("  \"roofline\": ", out);
	if (!rl->n) {
		fputs("null,\n", out);
		return;
	}
	int f1 = 1;
	fputc('{', out);
	key(out, "calibrated", &f1);
	fputs(rl->calibrated == 1 ? "true" : "false", out);
	key(out, "calibration", &f1);
	rl->path[0] ? rep_json_string(out, rl->path) : (void)fputs("null", out);
	key(out, "calibration_error", &f1);
	rl->calibrated < 0 ? rep_json_string(out, rl->error) : (void)fputs("null", out);
	int c = rl->calibrated == 1;
	knum(out, "peak_flops_per_s", c ? rl->calib.flops_fp64 : NAN, &f1);
	knum(out, "peak_bytes_per_s", c ? rl->calib.bw_triad : NAN, &f1);
	knum(out, "peak_flops_per_s_1t", c ? rl->calib.flops_fp64_1t : NAN, &f1);
	knum(out, "peak_bytes_per_s_1t", c ? rl->calib.bw_triad_1t : NAN, &f1);
	knum(out, "ridge_ai", c ? rl->calib.flops_fp64 / rl->calib.bw_triad : NAN, &f1);
	knum(out, "peak_flops_per_s_fp32", c ? rl->calib.flops_fp32 : NAN, &f1);
	knum(out, "peak_flops_per_s_fp32_1t", c ? rl->calib.flops_fp32_1t : NAN, &f1);
	knum(out, "ridge_ai_fp32", c ? rl->calib.flops_fp32 / rl->calib.bw_triad : NAN, &f1);
	key(out, "regions", &f1);
	fputc('[', out);
	for (uint32_t i = 0; i < rl->n; i++) {
		const ana_roof *r = &rl->r[i];
		int f2 = 1;
		fputs(i ? ",\n     {" : "\n     {", out);
		kstr(out, "path", p->nodes[r->node].path, &f2);
		knum(out, "flops", r->flops, &f2);
		knum(out, "bytes", r->bytes, &f2);
		knum(out, "self_ns", (double)p->nodes[r->node].self_ns, &f2);
		knum(out, "ai", r->ai, &f2);
		knum(out, "flops_per_s", r->flops_per_s, &f2);
		knum(out, "bytes_per_s", r->bytes_per_s, &f2);
		knum(out, "roof", r->roof, &f2);
		knum(out, "roof_pct", r->roof_pct, &f2);
		knum(out, "ridge_ai", r->ridge, &f2);
		key(out, "bound", &f2); /* unknown without the ridge point */
		rl->calibrated == 1 ? rep_json_string(out, r->memory_bound ? "memory" : "compute") : (void)fputs("null", out);
		key(out, "one_thread", &f2);
		fputs(r->one_thread ? "true" : "false", out);
		kstr(out, "precision", r->fp32 ? "fp32" : "fp64", &f2);
		fputc('}', out);
	}
	fputs("]},\n", out);
}

/* "ranks" (one per recording) and "balance" (null unless two ranks or more). */
static void ranks_json(FILE *out, const ana_profile *p)
{
	fputs("  \"ranks\": [", out);
	for (uint32_t i = 0; i < p->nranks; i++) {
		const ana_rank *r = &p->ranks[i];
		int f1 = 1;
		char id[32];
		fputs(i ? ",\n   {" : "\n   {", out);
		knum(out, "rank", r->rank >= 0 ? (double)r->rank : NAN, &f1);
		snprintf(id, sizeof id, "%016llx", (unsigned long long)r->recording_id);
		kstr(out, "recording_id", id, &f1);
		knum(out, "pid", (double)p->procs[r->proc].file.pid, &f1);
		kstr(out, "host", p->procs[r->proc].file.host, &f1);
		knum(out, "processes", r->nprocs, &f1);
		knum(out, "wall_ns", (double)r->wall_ns, &f1);
		knum(out, "cpu_ns", (double)r->cpu_ns, &f1);
		knum(out, "busy_ns", (double)r->busy_ns, &f1);
		knum(out, "work_ns", (double)r->work_ns, &f1);
		knum(out, "comm_ns", (double)r->comm_ns, &f1);
		knum(out, "steps", (double)r->steps, &f1);
		step_keys(out, &r->step_dist, &f1);
		top_region(out, p, r->top_node, r->top_self_ns, &f1);
		fputs("}", out);
	}
	fputs(p->nranks ? "\n  ],\n" : "],\n", out);
	const ana_balance *b = &p->balance;
	fputs("  \"balance\": ", out);
	if (!b->present) {
		fputs("null,\n", out);
		return;
	}
	int f1 = 1;
	fputs("{", out);
	kstr(out, "basis", b->basis, &f1);
	knum(out, "imbalance_pct", b->imbalance_pct, &f1);
	knum(out, "step_imbalance_pct", b->step_imbalance_pct, &f1);
	knum(out, "slowest_rank", (double)p->ranks[b->slowest].rank, &f1);
	knum(out, "fastest_rank", (double)p->ranks[b->fastest].rank, &f1);
	knum(out, "max_ns", b->max_ns, &f1);
	knum(out, "mean_ns", b->mean_ns, &f1);
	knum(out, "min_ns", b->min_ns, &f1);
	knum(out, "others_mean_ns", b->others_mean_ns, &f1);
	knum(out, "wait_ns", b->max_ns - b->others_mean_ns, &f1);
	key(out, "losses", &f1);
	fputs("[", out);
	for (uint32_t i = 0; i < b->nlosses; i++) {
		const ana_loss *l = &b->losses[i];
		char nm[512];
		fputs(i ? ", {" : "{", out);
		fputs(l->node != ANA_NONE ? "\"region\": " : "\"function\": ", out);
		rep_json_string(out, ana_loss_name(p, l, nm, sizeof nm));
		fputs(", \"rank_ns\": ", out);
		rep_json_number(out, (double)l->rank_ns);
		fputs(", \"others_mean_ns\": ", out);
		rep_json_number(out, l->others_ns);
		fputs(", \"excess_ns\": ", out);
		rep_json_number(out, l->excess_ns);
		fputs("}", out);
	}
	fputs("]\n  },\n", out);
}

/* A lane's thread (name, tid) or GPU stream keys. */
static void cp_lane_keys(FILE *out, const ana_profile *p, uint32_t lane, int *first)
{
	char buf[64];
	const ana_cp_where *w = &p->cp->where[lane];
	kstr(out, "thread", ana_cp_lane_name(p, lane, buf, sizeof buf), first);
	knum(out, "tid", w->thread == ANA_NONE ? NAN : (double)p->threads[w->thread].tid, first);
	key(out, "gpu", first);
	fputs(w->thread == ANA_NONE ? "true" : "false", out);
}

static void cp_chain_json(FILE *out, const ana_profile *p, const char *k, const ana_cp_chain *ch, uint64_t t0, int *f1)
{
	key(out, k, f1);
	if (ch->index == UINT64_MAX) {
		fputs("null", out);
		return;
	}
	fprintf(out, "{\"index\": %llu, \"ns\": %llu, \"chain\": [", (unsigned long long)ch->index, (unsigned long long)ch->ns);
	for (size_t i = 0; i < ch->n; i++) {
		const ana_cp_piece *x = &ch->pieces[i];
		int f2 = 1;
		fputs(i ? ",\n     {" : "\n     {", out);
		if (x->label == ANA_NONE) {
			key(out, "name", &f2);
			fputs("null", out);
			key(out, "path", &f2);
			fputs("null", out);
		} else {
			kstr(out, "name", ana_cp_label_short(p, x->label), &f2);
			kstr(out, "path", ana_cp_label_name(p, x->label), &f2);
		}
		cp_lane_keys(out, p, x->lane, &f2);
		key(out, "untracked", &f2);
		fputs(x->label == ANA_NONE ? "true" : "false", out);
		knum(out, "start_ns", (double)(x->start_ns - t0), &f2);
		knum(out, "ns", (double)(x->end_ns - x->start_ns), &f2);
		fputc('}', out);
	}
	fputs("]}", out);
}

/* The critical path (critpath.c, docs/critical_path.md); null without steps. */
static void critpath_json(FILE *out, const ana_profile *p)
{
	const ana_critpath *cp = p->cp;
	fputs("  \"critical_path\": ", out);
	if (!cp) {
		fputs("null,\n", out);
		return;
	}
	int f1 = 1;
	fputc('{', out);
	knum(out, "steps", (double)cp->steps, &f1);
	knum(out, "steps_total", (double)cp->steps_total, &f1);
	knum(out, "steps_unrecorded", (double)cp->unrecorded, &f1);
	knum(out, "steps_over_budget", (double)cp->over_budget, &f1);
	knum(out, "step_ns", (double)cp->step_ns, &f1);
	knum(out, "lanes", cp->active_lanes, &f1);
	knum(out, "gpu_lanes", cp->gpu_lanes, &f1);
	knum(out, "untracked_ns", (double)cp->untracked_ns, &f1);
	knum(out, "untracked_pct", cp->steps ? cp->untracked_pct : NAN, &f1);
	key(out, "regions", &f1);
	fputc('[', out);
	for (uint32_t i = 0; i < cp->ne; i++) {
		const ana_cp_entry *e = &cp->e[i];
		int f2 = 1;
		fputs(i ? ",\n     {" : "\n     {", out);
		kstr(out, "name", ana_cp_label_short(p, e->label), &f2);
		kstr(out, "path", ana_cp_label_name(p, e->label), &f2);
		cp_lane_keys(out, p, e->lane, &f2);
		key(out, "waiting", &f2);
		fputs(e->waiting ? "true" : "false", out);
		knum(out, "ns", (double)e->ns, &f2);
		knum(out, "share_pct", e->share_pct, &f2);
		knum(out, "steps_on_path", (double)e->steps, &f2);
		knum(out, "threads", (double)e->threads, &f2);
		fputc('}', out);
	}
	fputc(']', out);
	const ana_cp_chain *ch[2] = {&cp->slowest, &cp->median};
	const char *names[2] = {"slowest_step", "median_step"};
	for (int i = 0; i < 2; i++)
		cp_chain_json(out, p, names[i], ch[i], ch[i]->index < p->step_start_ns.n ? p->step_start_ns.v[ch[i]->index] : 0,
			      &f1);
	fputs("\n  },\n", out);
}

/* The schema, the files read, the warnings and the window the analysis covers. */
static void head_json(FILE *out, const ana_profile *p)
{
	int f1;
	fprintf(out, "{\n  \"schema\": \"fennec.analysis/1\",\n  \"fennec_version\": \"%d.%d.%d\",\n",
		FENNEC_VERSION_MAJOR, FENNEC_VERSION_MINOR, FENNEC_VERSION_PATCH);
	fputs("  \"files\": [", out);
	for (uint32_t i = 0; i < p->nprocs; i++) {
		if (i)
			fputs(", ", out);
		rep_json_string(out, p->procs[i].file.path);
	}
	fputs("],\n  \"warnings\": [", out);
	for (uint32_t i = 0; i < p->nwarnings; i++) {
		fputs(i ? ",\n    " : "\n    ", out);
		rep_json_string(out, p->warnings[i]);
	}
	fputs(p->nwarnings ? "\n  ],\n" : "],\n", out);

	/* What the analysis covers (docs/json.md window): times from the recording's start. */
	const ana_window *w = &p->window;
	fputs("  \"window\": {", out);
	f1 = 1;
	key(out, "active", &f1);
	fputs(w->active ? "true" : "false", out);
	knum(out, "begin_ns", (double)(w->begin_ns - w->rec_begin_ns), &f1);
	knum(out, "end_ns", (double)(w->end_ns - w->rec_begin_ns), &f1);
	knum(out, "duration_ns", (double)(w->end_ns - w->begin_ns), &f1);
	knum(out, "recording_ns", (double)(w->rec_end_ns - w->rec_begin_ns), &f1);
	key(out, "to_end", &f1);
	fputs(w->to_end ? "true" : "false", out);
	knum(out, "first_step", (double)w->first_step, &f1);
	knum(out, "steps", (double)p->steps, &f1);
	fputs("\n  },\n", out);
}

/* `summary`: the run as a whole. */
static void summary_json(FILE *out, const ana_profile *p)
{
	int f1;
	const ana_process *first = &p->procs[0];
	fputs("  \"summary\": {", out);
	f1 = 1;
	kstr(out, "command", first->file.cmdline, &f1);
	knum(out, "wall_ns", (double)p->wall_ns, &f1);
	knum(out, "cpu_user_ns", (double)p->cpu_user_ns, &f1);
	knum(out, "cpu_sys_ns", (double)p->cpu_sys_ns, &f1);
	{
		int all = p->collector_known && p->collector_known == p->nprocs;
		double cpu = (double)(p->cpu_user_ns + p->cpu_sys_ns);
		knum(out, "collector_cpu_ns", all ? (double)p->collector_cpu_ns : NAN, &f1);
		knum(out, "collector_cpu_pct", all && cpu > 0 ? 100 * (double)p->collector_cpu_ns / cpu : NAN, &f1);
		/* fennec's whole cost (overhead.c): the writer and its work on the program's threads */
		const ana_overhead *ov = &p->overhead;
		knum(out, "overhead_cpu_ns", ov->known ? ov->total_ns : NAN, &f1);
		knum(out, "overhead_pct", ov->known && cpu > 0 ? 100 * ov->total_ns / cpu : NAN, &f1);
		rep_json_key(out, KEY_INDENT, "overhead", &f1);
		if (ov->known) {
			fputs("{\"writer_ns\": ", out);
			rep_json_number(out, ov->writer_ns);
			fputs(", \"events_ns\": ", out);
			rep_json_number(out, ov->events_ns);
			fputs(", \"heap_ns\": ", out);
			rep_json_number(out, ov->heap_ns);
			fputs(", \"samples_ns\": ", out);
			rep_json_number(out, ov->samples_ns);
			fputs("}", out);
		} else {
			fputs("null", out);
		}
	}
	knum(out, "steps", (double)p->steps, &f1);
	knum(out, "marks", (double)p->marks, &f1);
	knum(out, "setup_ns", p->marks ? (double)p->setup_ns : NAN, &f1);
	const ana_dist *sd = &p->step_dist;
	knum(out, "step_mean_ns", sd->count ? sd->mean : NAN, &f1);
	knum(out, "step_p50_ns", sd->count ? sd->p50 : NAN, &f1);
	knum(out, "step_p95_ns", sd->count ? sd->p95 : NAN, &f1);
	knum(out, "step_min_ns", sd->count ? sd->min : NAN, &f1);
	knum(out, "step_max_ns", sd->count ? sd->max : NAN, &f1);
	double step_total = sd->total;
	knum(out, "steps_per_s", step_total > 0 ? (double)p->steps / (step_total / 1e9) : NAN, &f1);
	knum(out, "items_per_s", p->has_items && step_total > 0 ? (double)p->items / (step_total / 1e9) : NAN, &f1);
	knum(out, "items", (double)p->items, &f1);
	knum(out, "dropped_events", (double)p->dropped, &f1);
	knum(out, "processes", p->nprocs, &f1);
	knum(out, "ranks", p->nranks, &f1);
	knum(out, "threads", p->nthreads, &f1);
	key(out, "cut_short", &f1);
	fputs(p->cut_short ? "true" : "false", out);
	knum(out, "events", (double)p->events, &f1);
	fputs("\n  },\n", out);
}

/* Regions, by total time. */
static int regions_json(FILE *out, const ana_profile *p)
{
	int f1;
	uint32_t *order = rep_region_order(p);
	if (!order)
		return FENNEC_ENOMEM;
	fputs("  \"regions\": [", out);
	for (uint32_t r = 0; r < p->nnodes; r++) {
		const ana_node *n = &p->nodes[order[r]];
		fputs(r ? ",\n   {" : "\n   {", out);
		f1 = 1;
		kstr(out, "name", p->names[n->name], &f1);
		kstr(out, "path", n->path, &f1);
		knum(out, "depth", n->depth, &f1);
		knum(out, "count", (double)n->dist.count, &f1);
		knum(out, "total_ns", (double)n->total_ns, &f1);
		knum(out, "self_ns", (double)n->self_ns, &f1);
		dist_keys(out, &n->dist, "_ns", &f1);
		knum(out, "share_pct", n->share_pct, &f1);
		knum(out, "self_pct", n->self_pct, &f1);
		knum(out, "share_base_ns", (double)n->base_ns, &f1);
		knum(out, "processes", n->processes, &f1);
		share_by_process(out, p, order[r], &f1);
		knum(out, "threads", n->threads, &f1);
		knum(out, "open", (double)n->open, &f1);
		region_samples(out, p, order[r], &f1);
		fputs("}", out);
	}
	free(order);
	fputs(p->nnodes ? "\n  ],\n" : "],\n", out);
	return 0;
}

/* `steps`: the step durations, thinned to 10,000. */
static void steps_json(FILE *out, const ana_profile *p)
{
	int f1;
	fputs("  \"steps\": {", out);
	f1 = 1;
	knum(out, "count", (double)p->steps, &f1);
	knum(out, "marks", (double)p->marks, &f1);
	knum(out, "setup_ns", p->marks ? (double)p->setup_ns : NAN, &f1);
	knum(out, "recorded", (double)p->steps_recorded, &f1);
	knum(out, "items", (double)p->items, &f1);
	knum(out, "threads", (double)p->step_threads, &f1);
	knum(out, "tid", (double)p->steps_tid, &f1);
	size_t ns = p->step_ns.n, stride = ns > 10000 ? (ns + 9999) / 10000 : 1;
	key(out, "thinned", &f1);
	fputs(stride > 1 ? "true" : "false", out);
	key(out, "durations_ns", &f1);
	fputc('[', out);
	for (size_t i = 0; i < ns; i += stride)
		fprintf(out, "%s%llu", i ? "," : "", (unsigned long long)p->step_ns.v[i]);
	fputs("]\n  },\n", out);
}

/* `threads`. */
static void threads_json(FILE *out, const ana_profile *p)
{
	int f1;
	fputs("  \"threads\": [", out);
	for (uint32_t i = 0; i < p->nthreads; i++) {
		const ana_thread *t = &p->threads[i];
		fputs(i ? ",\n   {" : "\n   {", out);
		f1 = 1;
		knum(out, "pid", (double)p->procs[t->process].file.pid, &f1);
		knum(out, "tid", (double)t->tid, &f1);
		knum(out, "index", t->index == UINT32_MAX ? NAN : t->index, &f1);
		kstr(out, "name", t->name, &f1);
		knum(out, "events", (double)t->events, &f1);
		knum(out, "dropped_events", (double)t->dropped, &f1);
		knum(out, "busy_ns", (double)t->busy_ns, &f1);
		knum(out, "lifetime_ns", (double)t->lifetime_ns, &f1);
		knum(out, "steps", (double)t->steps, &f1);
		knum(out, "marks", (double)t->marks, &f1);
		const ana_sample_view *sv = &p->smp.all;
		knum(out, "samples", sv->thread_samples ? (double)sv->thread_samples[(size_t)i * ANA_NKINDS + ANA_CPU] : 0, &f1);
		knum(out, "offcpu_samples", sv->thread_samples ? (double)sv->thread_samples[(size_t)i * ANA_NKINDS + ANA_OFFCPU] : 0, &f1);
		fputs("}", out);
	}
	fputs(p->nthreads ? "\n  ],\n" : "],\n", out);
}

/* `processes`: each file's process. */
static void processes_json(FILE *out, const ana_profile *p)
{
	int f1;
	fputs("  \"processes\": [", out);
	for (uint32_t i = 0; i < p->nprocs; i++) {
		const ana_process *pr = &p->procs[i];
		const fmt_file *f = &pr->file;
		fputs(i ? ",\n   {" : "\n   {", out);
		f1 = 1;
		knum(out, "pid", (double)f->pid, &f1);
		knum(out, "ppid", (double)f->ppid, &f1);
		knum(out, "parent_pid", (double)f->parent_pid, &f1);
		kstr(out, "origin", ana_origin_name(f->origin), &f1);
		knum(out, "rank", f->rank >= 0 ? (double)f->rank : NAN, &f1);
		kstr(out, "command", f->cmdline, &f1);
		kstr(out, "host", f->host, &f1);
		kstr(out, "file", f->path, &f1);
		knum(out, "wall_ns", (double)pr->wall_ns, &f1);
		knum(out, "cpu_user_ns", (double)f->cpu_user_ns, &f1);
		knum(out, "cpu_sys_ns", (double)f->cpu_sys_ns, &f1);
		knum(out, "collector_cpu_ns", f->has_collector_cpu ? (double)f->collector_cpu_ns : NAN, &f1);
		{
			ana_overhead fo;
			knum(out, "overhead_cpu_ns", ana_overhead_file(f, &fo) ? fo.total_ns : NAN, &f1);
			/* the COST chunk as the collector wrote it (docs/json.md) */
			rep_json_key(out, KEY_INDENT, "cost", &f1);
			if (f->has_cost)
				fprintf(out, "{\"handler_ns\": %llu, \"heap_record_ns\": %llu, \"event_ps\": %llu, "
					     "\"heap_call_ps\": %llu, \"sample_kernel_ns\": %llu, \"heap_calls\": %llu, \"samples_taken\": %llu}",
					(unsigned long long)f->cost_handler_ns, (unsigned long long)f->cost_heap_record_ns,
					(unsigned long long)f->cost_event_ps, (unsigned long long)f->cost_heap_call_ps,
					(unsigned long long)f->cost_sample_kernel_ns, (unsigned long long)f->cost_heap_calls,
					(unsigned long long)f->samples_taken);
			else
				fputs("null", out);
		}
		knum(out, "max_rss_bytes", (double)f->max_rss_kb * 1024, &f1);
		knum(out, "threads", pr->threads, &f1);
		knum(out, "dropped_events", (double)pr->dropped, &f1);
		knum(out, "events", (double)f->events, &f1);
		key(out, "cut_short", &f1);
		fputs(f->cut_short ? "true" : "false", out);
		key(out, "capped", &f1);
		if (f->seg_capped)
			fprintf(out, "{\"max_size_bytes\": %llu, \"max_duration_ns\": %llu, \"segments_kept\": %llu, "
				     "\"first_segment\": %llu, \"dropped_ns\": %llu, \"dropped_steps\": %llu, \"dropped_events\": %llu, "
				     "\"first_step\": %llu}",
				(unsigned long long)f->seg_max_bytes, (unsigned long long)f->seg_max_ns,
				(unsigned long long)f->seg_count, (unsigned long long)f->seg_first,
				(unsigned long long)(f->seg_dropped ? f->start_mono_ns - f->seg_session_start_mono_ns : 0),
				(unsigned long long)f->seg_steps_before, (unsigned long long)f->seg_events_before,
				(unsigned long long)f->seg_steps_before);
		else
			fputs("null", out);
		key(out, "ended_by", &f1);
		rep_json_string_or_null(out, ana_end_name(f));
		knum(out, "busy_ns", (double)pr->busy_ns, &f1);
		knum(out, "work_ns", (double)pr->work_ns, &f1);
		knum(out, "steps", (double)pr->step_ns.n, &f1);
		knum(out, "setup_ns", pr->marks ? (double)pr->setup_ns : NAN, &f1);
		step_keys(out, &pr->step_dist, &f1);
		top_region(out, p, pr->top_node, pr->top_self_ns, &f1);
		fputs("}", out);
	}
	fputs(p->nprocs ? "\n  ],\n" : "],\n", out);
}

/* `metrics`: counters, gauges and values. */
static void metrics_json(FILE *out, const ana_profile *p)
{
	int f1;
	fputs("  \"metrics\": [", out);
	for (uint32_t i = 0; i < p->nmetrics; i++) {
		const ana_metric *m = &p->metrics[i];
		fputs(i ? ",\n   {" : "\n   {", out);
		f1 = 1;
		kstr(out, "name", p->names[m->name], &f1);
		kstr(out, "kind", ana_kind_name(m->kind), &f1);
		knum(out, "count", (double)m->count, &f1);
		if (m->kind == FMT_SITE_COUNTER) {
			knum(out, "total", m->total, &f1);
			double span = (double)p->wall_ns / 1e9;
			knum(out, "rate_per_s", span > 0 ? m->total / span : NAN, &f1);
		} else if (m->kind == FMT_SITE_GAUGE) {
			knum(out, "last", m->last, &f1);
			knum(out, "min", m->min, &f1);
			knum(out, "max", m->max, &f1);
			knum(out, "mean", m->count ? m->sum / (double)m->count : NAN, &f1);
		} else {
			dist_keys(out, &m->dist, "", &f1);
		}
		fputs("}", out);
	}
	fputs(p->nmetrics ? "\n  ],\n" : "],\n", out);
}

/* `findings`, and the document's end. */
static void findings_json(FILE *out, const ana_profile *p)
{
	int f1;
	fputs("  \"findings\": [", out);
	for (uint32_t i = 0; i < p->nfindings; i++) {
		const ana_finding *f = &p->findings[i];
		fputs(i ? ",\n   {" : "\n   {", out);
		f1 = 1;
		kstr(out, "type", f->type, &f1);
		kstr(out, "severity", ana_severity_name(f->severity), &f1);
		kstr(out, "subject", f->subject, &f1);
		key(out, "evidence", &f1);
		fputs("{\"text\": ", out);
		rep_json_string(out, f->evidence);
		for (int k = 0; k < f->nnumbers; k++) {
			fputs(", ", out);
			rep_json_string(out, f->numbers[k].key);
			fputs(": ", out);
			rep_json_number(out, f->numbers[k].value);
		}
		fputc('}', out);
		kstr(out, "recommendation", f->recommendation, &f1);
		knum(out, "expected_gain_pct", f->expected_gain_pct, &f1);
		knum(out, "expected_gain_bytes", f->expected_gain_bytes, &f1);
		fputs("}", out);
	}
	fputs(p->nfindings ? "\n  ]\n}\n" : "]\n}\n", out);
}

int rep_json(FILE *out, const ana_profile *p, const rep_options *o)
{
	(void)o;
	head_json(out, p);
	summary_json(out, p);
	if (regions_json(out, p))
		return FENNEC_ENOMEM;
	steps_json(out, p);
	threads_json(out, p);
	critpath_json(out, p);
	processes_json(out, p);
	ranks_json(out, p);
	roofline_json(out, p);
	metrics_json(out, p);
	samples_json(out, p);
	memory_json(out, p);
	rep_gpu_json(out, p);
	rep_sys_json(out, p);
	findings_json(out, p);
	return ferror(out) ? FENNEC_EIO : 0;
}

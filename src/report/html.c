/*
 * html.c - the self-contained HTML report and the dashboard page (docs/html.md). The page
 * is our template (web/index.html) with the style, the charting library, our script and
 * the page data inlined. The page data is the JSON report (rep_json, unchanged) plus what
 * only the page draws: the thread timeline with its GPU stream lanes (analyze/timeline.h),
 * the sampled call tree and each rank's step times, all bounded so that a recording of any
 * size gives a page a browser can hold.
 */
#include "report/report.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#include "analyze/timeline.h"

#define DEF_INTERVALS 50000
#define DEF_DEPTH 15
#define DEF_FLAME 20000
#define RANK_STEP_POINTS 20000 /* step times of all ranks together */

/* One column of the timeline: `field` of every interval, as a JSON array. */
#define COLUMN(out, key, tl, field)                                                        \
	do {                                                                               \
		fputs(",\n    \"" key "\": [", out);                                          \
		for (size_t i_ = 0; i_ < (tl).n; i_++)                                     \
			fprintf(out, i_ ? (i_ % 16 ? ",%llu" : ",\n%llu") : "%llu",          \
				(unsigned long long)(tl).iv[i_].field);                    \
		fputc(']', out);                                                           \
	} while (0)

static void timeline_json(FILE *out, const ana_profile *p, const rep_page_options *po, uint64_t from_ns, uint64_t to_ns)
{
	ana_timeline tl;
	size_t max = po && po->max_intervals ? po->max_intervals : DEF_INTERVALS;
	uint32_t depth = po && po->max_depth ? po->max_depth : DEF_DEPTH;
	if (ana_timeline_build(p, max, depth, from_ns, to_ns, &tl)) {
		fputs(",\n  \"timeline\": null,\n  \"timeline_error\": \"out of memory\"", out);
		return;
	}
	size_t blocks = 0;
	for (size_t i = 0; i < tl.n; i++)
		blocks += tl.iv[i].count > 1;
	fprintf(out, ",\n  \"timeline\": {\n    \"calls\": %llu,\n    \"intervals\": %zu,\n    \"blocks\": %zu,\n"
		"    \"max_intervals\": %zu,\n    \"resolution_ns\": %llu,\n    \"max_depth\": %u,\n"
		"    \"deep_calls\": %llu,\n    \"files_failed\": %u,\n    \"span_ns\": %llu,\n",
		(unsigned long long)tl.calls, tl.n, blocks, max, (unsigned long long)tl.resolution_ns, tl.max_depth,
		(unsigned long long)tl.deep_calls, tl.files_failed, (unsigned long long)tl.span_ns);
	if (tl.to_ns)
		fprintf(out, "    \"from_ns\": %llu,\n    \"to_ns\": %llu,\n", (unsigned long long)tl.from_ns,
			(unsigned long long)tl.to_ns);
	else
		fputs("    \"from_ns\": null,\n    \"to_ns\": null,\n", out);
	fprintf(out, "    \"gpu_work\": %llu,\n    \"gpu_lane_base\": %u,\n    \"gpu_lanes\": [",
		(unsigned long long)tl.gpu_work, p->nthreads);
	for (uint32_t i = 0; i < tl.ngpu_lanes; i++) {
		const ana_tl_gpu_lane *g = &tl.gpu_lanes[i];
		fprintf(out, "%s{\"pid\": %llu, \"device\": %u, \"stream\": %u}", i ? ", " : "",
			g->process < p->nprocs ? (unsigned long long)p->procs[g->process].file.pid : 0ULL, g->device, g->stream);
	}
	fputs("],\n    \"names\": [", out);
	for (uint32_t i = 0; i < tl.nnames; i++) {
		if (i)
			fputc(',', out);
		rep_json_string(out, tl.names[i]);
	}
	fputc(']', out);
	COLUMN(out, "start_ns", tl, start_ns);
	COLUMN(out, "dur_ns", tl, dur_ns);
	COLUMN(out, "busy_ns", tl, busy_ns);
	/* GPU lanes follow the threads: lane k is "thread" nthreads + k. */
	fputs(",\n    \"thread\": [", out);
	for (size_t i = 0; i < tl.n; i++) {
		uint32_t t = tl.iv[i].thread;
		unsigned long long v = t >= ANA_TL_GPU ? (unsigned long long)p->nthreads + (t - ANA_TL_GPU) : t;
		fprintf(out, i ? (i % 16 ? ",%llu" : ",\n%llu") : "%llu", v);
	}
	fputc(']', out);
	COLUMN(out, "depth", tl, depth);
	COLUMN(out, "name", tl, name);
	COLUMN(out, "count", tl, count);
	fputs(",\n    \"open\": [", out);
	for (size_t i = 0, k = 0; i < tl.n; i++)
		if (tl.iv[i].open)
			fprintf(out, k++ ? ",%zu" : "%zu", i);
	fputs("]\n  }", out);
	ana_timeline_free(&tl);
}

static int cmp_desc_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x < y) - (x > y);
}

static uint64_t cnode_weight(const ana_cnode *c) { return c->total[ANA_CPU] + c->total[ANA_OFFCPU]; }

/*
 * The sampled call tree of the selection, in depth-first order (a parent before its
 * children), pruned to at most `max` nodes: the nodes kept are those above a weight, so
 * every kept node's ancestors are kept too (a caller's total includes its callees').
 */
static int flame_json(FILE *out, const ana_profile *p, const rep_page_options *po)
{
	const ana_sample_view *v = &p->smp.sel;
	uint32_t max = po && po->max_flame_nodes ? po->max_flame_nodes : DEF_FLAME;
	uint32_t n = v->tree ? v->ntree : 0;
	uint64_t min_w = 1;
	if (n > max) {
		uint64_t *w = malloc((size_t)n * sizeof *w);
		if (!w)
			return FENNEC_ENOMEM;
		for (uint32_t i = 0; i < n; i++)
			w[i] = cnode_weight(&v->tree[i]);
		qsort(w, n, sizeof *w, cmp_desc_u64);
		min_w = w[max - 1] + 1; /* ties at the cut are all left out: at most max kept */
		free(w);
	}
	uint32_t *out_idx = malloc(((size_t)n + 1) * sizeof *out_idx);
	uint32_t *stack = malloc(((size_t)n + 1) * sizeof *stack);
	uint32_t *fname = p->smp.nfuncs ? malloc((size_t)p->smp.nfuncs * sizeof *fname) : NULL;
	uint32_t *order = malloc(((size_t)n + 1) * sizeof *order);
	if (!out_idx || !stack || !order || (p->smp.nfuncs && !fname)) {
		free(out_idx);
		free(stack);
		free(fname);
		free(order);
		return FENNEC_ENOMEM;
	}
	for (uint32_t i = 0; i < p->smp.nfuncs; i++)
		fname[i] = ANA_NONE;
	/* Depth-first order of the kept nodes. */
	uint32_t nk = 0, sp = 0, nnames = 0;
	for (uint32_t r = 0; r < n; r++) {
		if (v->tree[r].parent != ANA_NONE || cnode_weight(&v->tree[r]) < min_w)
			continue;
		stack[sp++] = r;
		while (sp) {
			uint32_t x = stack[--sp];
			out_idx[x] = nk;
			order[nk++] = x;
			for (uint32_t c = v->tree[x].first_child; c != ANA_NONE; c = v->tree[c].next_sibling)
				if (cnode_weight(&v->tree[c]) >= min_w && sp < n)
					stack[sp++] = c;
		}
	}
	uint64_t pruned = 0;
	for (uint32_t i = 0; i < n; i++)
		pruned += cnode_weight(&v->tree[i]) < min_w;
	fprintf(out, ",\n  \"flame\": {\n    \"nodes\": %u,\n    \"pruned_nodes\": %llu,\n    \"min_weight\": %llu,\n"
		"    \"cpu_weight\": %llu,\n    \"offcpu_weight\": %llu,\n    \"names\": [",
		nk, (unsigned long long)pruned, (unsigned long long)min_w, (unsigned long long)v->weight[ANA_CPU],
		(unsigned long long)v->weight[ANA_OFFCPU]);
	for (uint32_t i = 0; i < nk; i++) {
		uint32_t f = v->tree[order[i]].func;
		if (f < p->smp.nfuncs && fname[f] == ANA_NONE) {
			fname[f] = nnames++;
			if (fname[f])
				fputc(',', out);
			rep_json_string(out, p->names[p->smp.funcs[f].name]);
		}
	}
	/* each name's kind, for the page's colours: 0 native, 1 Python, 2 a pseudo-frame that
	 * is no code of the program ("[kernel]", "[fennec]", "[waiting for the GIL]", ...) */
	fputs("],\n    \"kinds\": [", out);
	for (uint32_t i = 0, k = 0; i < nk; i++) {
		uint32_t f = v->tree[order[i]].func;
		if (f >= p->smp.nfuncs || fname[f] != k)
			continue;
		const ana_func *fn = &p->smp.funcs[f];
		const char *nm = p->names[fn->name];
		int kind = fn->lang == ANA_LANG_PYTHON ? 1 : nm[0] == '[' && nm[strlen(nm) - 1] == ']' ? 2 : 0;
		fprintf(out, k ? (k % 32 ? ",%d" : ",\n%d") : "%d", kind);
		k++;
	}
	fputs("],\n    \"name\": [", out);
	for (uint32_t i = 0; i < nk; i++) {
		uint32_t f = v->tree[order[i]].func;
		fprintf(out, i ? (i % 32 ? ",%u" : ",\n%u") : "%u", f < p->smp.nfuncs ? fname[f] : 0);
	}
	fputs("],\n    \"parent\": [", out);
	for (uint32_t i = 0; i < nk; i++) {
		uint32_t par = v->tree[order[i]].parent;
		fprintf(out, i ? (i % 32 ? ",%ld" : ",\n%ld") : "%ld", par == ANA_NONE ? -1L : (long)out_idx[par]);
	}
	const char *keys[] = {"total_cpu", "self_cpu", "total_offcpu", "self_offcpu"};
	for (int k = 0; k < 4; k++) {
		fprintf(out, "],\n    \"%s\": [", keys[k]);
		unsigned kind = k < 2 ? ANA_CPU : ANA_OFFCPU;
		for (uint32_t i = 0; i < nk; i++) {
			const ana_cnode *c = &v->tree[order[i]];
			uint64_t w = k % 2 ? c->self[kind] : c->total[kind];
			fprintf(out, i ? (i % 32 ? ",%llu" : ",\n%llu") : "%llu", (unsigned long long)w);
		}
	}
	fputs("]\n  }", out);
	free(out_idx);
	free(stack);
	free(fname);
	free(order);
	return 0;
}

/*
 * With several recordings (ranks), each rank's step times for the chart of step time per
 * rank: those of its first process with steps, evenly thinned so that all ranks together
 * send at most RANK_STEP_POINTS points. The JSON report has only their statistics.
 */
static void rank_steps_json(FILE *out, const ana_profile *p)
{
	if (p->nranks < 2) {
		fputs(",\n  \"rank_steps\": null", out);
		return;
	}
	size_t budget = RANK_STEP_POINTS / p->nranks;
	if (budget < 50)
		budget = 50;
	fputs(",\n  \"rank_steps\": [", out);
	for (uint32_t r = 0; r < p->nranks; r++) {
		const ana_process *pr = NULL;
		for (uint32_t i = 0; i < p->nprocs && !pr; i++)
			if (p->procs[i].rank_index == r && p->procs[i].step_ns.n)
				pr = &p->procs[i];
		size_t n = pr ? pr->step_ns.n : 0, stride = n > budget ? (n + budget - 1) / budget : 1;
		fputs(r ? ",\n    {\"rank\": " : "\n    {\"rank\": ", out);
		if (p->ranks[r].rank >= 0)
			fprintf(out, "%lld", (long long)p->ranks[r].rank);
		else
			fputs("null", out);
		fprintf(out, ", \"pid\": %llu, \"steps\": %zu, \"stride\": %zu, \"durations_ns\": [",
			pr ? (unsigned long long)pr->file.pid : 0ULL, n, stride);
		for (size_t i = 0; i < n; i += stride)
			fprintf(out, "%s%llu", i ? "," : "", (unsigned long long)pr->step_ns.v[i]);
		fputs("]}", out);
	}
	fputs("\n  ]", out);
}

int rep_page_data(FILE *out, const ana_profile *p, const rep_options *o, const rep_page_options *po)
{
	fprintf(out, "{\n  \"page\": \"fennec.page/1\",\n  \"live\": %s,\n  \"analysis\": ", po && po->live ? "true" : "false");
	int rc = rep_json(out, p, o);
	if (rc)
		return rc;
	timeline_json(out, p, po, 0, 0);
	rank_steps_json(out, p);
	if ((rc = flame_json(out, p, po)))
		return rc;
	fputs("\n}\n", out);
	return ferror(out) ? FENNEC_EIO : 0;
}

int rep_page_timeline(FILE *out, const ana_profile *p, const rep_page_options *po, uint64_t from_ns, uint64_t to_ns)
{
	fputs("{\n  \"page\": \"fennec.page/1\"", out);
	timeline_json(out, p, po, from_ns, to_ns ? to_ns : from_ns + 1);
	fputs("\n}\n", out);
	return ferror(out) ? FENNEC_EIO : 0;
}

/* Script text inlined in <script>: "</script" (any case) would end the element early. */
static void put_script(FILE *out, const char *s, size_t n)
{
	size_t from = 0;
	for (size_t i = 0; i + 1 < n; i++)
		if (s[i] == '<' && s[i + 1] == '/' && i + 8 <= n && !strncasecmp(s + i + 2, "script", 6)) {
			fwrite(s + from, 1, i - from, out);
			fputs("<\\/", out);
			from = i + 2;
		}
	fwrite(s + from, 1, n - from, out);
}

/* JSON inlined in <script type="application/json">: '<' only occurs inside strings,
 * where \u003c means the same. */
static void put_json(FILE *out, const char *s, size_t n)
{
	size_t from = 0;
	for (size_t i = 0; i < n; i++)
		if (s[i] == '<') {
			fwrite(s + from, 1, i - from, out);
			fputs("\\u003c", out);
			from = i + 1;
		}
	fwrite(s + from, 1, n - from, out);
}

int rep_html_page(FILE *out, const rep_web *w, const char *data, size_t data_len, int live)
{
	const char *s = w->page, *end = w->page + w->page_len;
	while (s < end) {
		const char *m = memmem(s, (size_t)(end - s), "@@", 2);
		if (!m) {
			fwrite(s, 1, (size_t)(end - s), out);
			break;
		}
		fwrite(s, 1, (size_t)(m - s), out);
		const char *e = memmem(m + 2, (size_t)(end - m - 2), "@@", 2);
		size_t klen = e ? (size_t)(e - m - 2) : 0;
		const char *k = m + 2;
#define IS(name) (klen == sizeof(name) - 1 && !memcmp(k, name, klen))
		if (e && IS("STYLE"))
			put_script(out, w->style, w->style_len);
		else if (e && IS("CHARTS"))
			put_script(out, w->charts, w->charts_len);
		else if (e && IS("COMMON"))
			put_script(out, w->common, w->common_len);
		else if (e && IS("APP"))
			put_script(out, w->app, w->app_len);
		else if (e && IS("DATA")) {
			if (data)
				put_json(out, data, data_len);
			else
				fputs("null", out);
		} else if (e && IS("LIVE"))
			fputs(live ? "true" : "false", out);
		else {
			fputs("@@", out); /* not a marker */
			s = m + 2;
			continue;
		}
#undef IS
		s = e + 2;
	}
	return ferror(out) ? FENNEC_EIO : 0;
}

int rep_html(FILE *out, const ana_profile *p, const rep_options *o, const rep_web *w, const rep_page_options *po)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&buf, &len);
	if (!mem)
		return FENNEC_ENOMEM;
	int rc = rep_page_data(mem, p, o, po);
	if (fclose(mem) && !rc)
		rc = FENNEC_ENOMEM;
	if (!rc)
		rc = rep_html_page(out, w, buf, len, po && po->live);
	free(buf);
	return rc;
}

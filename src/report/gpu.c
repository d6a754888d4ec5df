/*
 * gpu.c - the GPU section of the text report and of the JSON report (`gpu`, docs/json.md),
 * both from the model's ana_gpu (src/analyze/gpu.c), which computes every number.
 */
#include "report/report.h"

#include <math.h>
#include <stdlib.h>

#include "analyze/gpu.h"

#define KERNEL_ROWS 15
#define TIMELINE_POINTS 1000
#define SYNC_STACKS 5

/* ---- JSON ---- */

/* The section's layout: each object on one line (the writers are jsonw.c's). */
#define IND ""

static uint64_t rel(const ana_profile *p, uint64_t t) { return t > p->procs[0].file.start_mono_ns ? t - p->procs[0].file.start_mono_ns : 0; }

static const char *node_path(const ana_profile *p, uint32_t node) { return node == ANA_NONE ? NULL : p->nodes[node].path; }

static void uuid_text(const fmt_gpu_device *d, char *buf, size_t n)
{
	if (!d || !d->has_uuid) {
		snprintf(buf, n, "%s", "");
		return;
	}
	const uint8_t *u = d->uuid;
	snprintf(buf, n, "GPU-%02x%02x%02x%02x-%02x%02x-%02x%02x-%02x%02x-%02x%02x%02x%02x%02x%02x", u[0], u[1], u[2], u[3],
		 u[4], u[5], u[6], u[7], u[8], u[9], u[10], u[11], u[12], u[13], u[14], u[15]);
}

static void nvml_point(FILE *out, const ana_profile *p, const ana_gpu_point *pt)
{
	static const char *keys[FMT_NV_COUNT] = {"sm_pct", "mem_pct", "mem_used_bytes", "mem_total_bytes", "power_mw",
						 "temperature_c", "sm_mhz", "mem_mhz", "pcie_tx_bytes_per_s",
						 "pcie_rx_bytes_per_s"};
	int f = 1;
	fputc('{', out);
	rep_json_knum(out, IND, "t_ns", (double)rel(p, pt->t_ns), &f);
	for (int i = 0; i < FMT_NV_COUNT; i++)
		if (pt->present >> i & 1)
			rep_json_knum(out, IND, keys[i], (double)pt->v[i], &f);
	fputc('}', out);
}

static void device_json(FILE *out, const ana_profile *p, const ana_gpu_device *d)
{
	const fmt_gpu_device *i = d->info;
	char cc[32], uuid[64];
	int f = 1;
	snprintf(cc, sizeof cc, "%u.%u", i ? i->cc_major : 0, i ? i->cc_minor : 0);
	uuid_text(i, uuid, sizeof uuid);
	fputs("{", out);
	rep_json_knum(out, IND, "pid", (double)p->procs[d->process].file.pid, &f);
	rep_json_knum(out, IND, "id", d->id, &f);
	rep_json_kstr(out, IND, "name", i && i->name && *i->name ? i->name : NULL, &f);
	rep_json_kstr(out, IND, "uuid", uuid[0] ? uuid : NULL, &f);
	rep_json_kstr(out, IND, "compute_capability", i ? cc : NULL, &f);
	rep_json_knum(out, IND, "sm_count", i ? i->sm_count : NAN, &f);
	rep_json_knum(out, IND, "memory_bytes", i ? (double)i->memory_bytes : NAN, &f);
	rep_json_knum(out, IND, "busy_ns", (double)d->busy_ns, &f);
	rep_json_knum(out, IND, "busy_pct", d->busy_pct, &f);
	rep_json_knum(out, IND, "window_busy_pct", d->window_busy_pct, &f);
	rep_json_knum(out, IND, "first_ns", d->busy_ns ? (double)rel(p, d->first_ns) : NAN, &f);
	rep_json_knum(out, IND, "last_ns", d->busy_ns ? (double)rel(p, d->last_ns) : NAN, &f);
	rep_json_knum(out, IND, "kernel_ns", (double)d->kernel_ns, &f);
	rep_json_knum(out, IND, "memcpy_ns", (double)d->memcpy_ns, &f);
	rep_json_knum(out, IND, "memset_ns", (double)d->memset_ns, &f);
	rep_json_knum(out, IND, "streams", d->streams, &f);
	rep_json_knum(out, IND, "overlap_ns", (double)d->overlap_ns, &f);
	rep_json_knum(out, IND, "stream_busy_ns", (double)d->stream_busy_ns, &f);
	rep_json_knum(out, IND, "allocations", (double)d->allocs, &f);
	rep_json_knum(out, IND, "releases", (double)d->frees, &f);
	rep_json_knum(out, IND, "peak_allocated_bytes", (double)d->peak_allocated_bytes, &f);
	rep_json_knum(out, IND, "allocated_end_bytes", (double)d->allocated_end_bytes, &f);
	rep_json_key(out, IND, "nvml", &f);
	if (!d->nnvml)
		fputs("null", out);
	else {
		/* The model's maxima are 0 for a field no sample had: null, as for the means. */
		unsigned seen = 0;
		for (size_t k = 0; k < d->nnvml; k++)
			seen |= d->nvml[k].present;
		int g = 1;
		fputs("{", out);
		rep_json_knum(out, IND, "samples", (double)d->nnvml, &g);
		rep_json_knum(out, IND, "sm_pct_mean", d->sm_pct_mean, &g);
		rep_json_knum(out, IND, "mem_pct_mean", d->mem_pct_mean, &g);
		rep_json_knum(out, IND, "mem_used_max_bytes", seen >> FMT_NV_MEM_USED & 1 ? (double)d->mem_used_max_bytes : NAN, &g);
		rep_json_knum(out, IND, "mem_total_bytes", seen >> FMT_NV_MEM_TOTAL & 1 ? (double)d->mem_total_bytes : NAN, &g);
		rep_json_knum(out, IND, "power_mw_mean", d->power_mw_mean, &g);
		rep_json_knum(out, IND, "power_mw_max", seen >> FMT_NV_POWER_MW & 1 ? (double)d->power_mw_max : NAN, &g);
		rep_json_knum(out, IND, "temperature_max_c", seen >> FMT_NV_TEMP_C & 1 ? (double)d->temperature_max_c : NAN, &g);
		fputs("}", out);
	}
	rep_json_key(out, IND, "nvlink", &f);
	if (!d->link.samples)
		fputs("null", out);
	else {
		int g = 1;
		fputs("{", out);
		rep_json_knum(out, IND, "samples", (double)d->link.samples, &g);
		rep_json_knum(out, IND, "tx_bytes", (double)d->link.tx_bytes, &g);
		rep_json_knum(out, IND, "rx_bytes", (double)d->link.rx_bytes, &g);
		rep_json_knum(out, IND, "tx_bytes_per_s", d->link.tx_bytes_per_s, &g);
		rep_json_knum(out, IND, "rx_bytes_per_s", d->link.rx_bytes_per_s, &g);
		rep_json_knum(out, IND, "tx_max_bytes_per_s", d->link.tx_max_bytes_per_s, &g);
		rep_json_knum(out, IND, "rx_max_bytes_per_s", d->link.rx_max_bytes_per_s, &g);
		fputs("}", out);
	}
	/* Timelines, evenly thinned to a bounded number of points. */
	rep_json_key(out, IND, "utilisation", &f);
	size_t stride = d->nnvml > TIMELINE_POINTS ? (d->nnvml + TIMELINE_POINTS - 1) / TIMELINE_POINTS : 1;
	fputs("[", out);
	for (size_t k = 0; k < d->nnvml; k += stride) {
		fputs(k ? "," : "", out);
		nvml_point(out, p, &d->nvml[k]);
	}
	fputs("]", out);
	rep_json_key(out, IND, "memory", &f);
	stride = d->nmem > TIMELINE_POINTS ? (d->nmem + TIMELINE_POINTS - 1) / TIMELINE_POINTS : 1;
	fputs("[", out);
	for (size_t k = 0; k < d->nmem; k += stride)
		fprintf(out, "%s{\"t_ns\":%llu,\"allocated_bytes\":%llu}", k ? "," : "",
			(unsigned long long)rel(p, d->mem[k].t_ns), (unsigned long long)d->mem[k].v[0]);
	fputs("]}", out);
}

static void dims(FILE *out, const char *k, const uint32_t v[3], int *f)
{
	rep_json_key(out, IND, k, f);
	fprintf(out, "[%u,%u,%u]", v[0], v[1], v[2]);
}

static void kernel_json(FILE *out, const ana_profile *p, const ana_gpu *g, const ana_gpu_kernel *k)
{
	int f = 1;
	fputs("{", out);
	rep_json_kstr(out, IND, "name", p->names[k->name], &f);
	rep_json_knum(out, IND, "count", (double)k->count, &f);
	rep_json_knum(out, IND, "total_ns", (double)k->total_ns, &f);
	rep_json_knum(out, IND, "mean_ns", k->mean_ns, &f);
	rep_json_knum(out, IND, "min_ns", (double)k->min_ns, &f);
	rep_json_knum(out, IND, "max_ns", (double)k->max_ns, &f);
	rep_json_knum(out, IND, "gpu_time_pct", k->gpu_time_pct, &f);
	rep_json_knum(out, IND, "occupancy_pct", k->occupancy_pct, &f);
	rep_json_kstr(out, IND, "occupancy_limiter", k->limiter && *k->limiter ? k->limiter : NULL, &f);
	dims(out, "grid", k->grid, &f);
	dims(out, "block", k->block, &f);
	rep_json_knum(out, IND, "registers", k->regs, &f);
	rep_json_knum(out, IND, "static_smem_bytes", k->smem_static, &f);
	rep_json_knum(out, IND, "dynamic_smem_bytes", k->smem_dynamic, &f);
	rep_json_key(out, IND, "streams", &f);
	fputs("[", out);
	int first = 1;
	for (uint32_t i = k->first_kstream; i != ANA_NONE; i = g->kstreams[i].next) {
		const ana_gpu_kstream *ks = &g->kstreams[i];
		const ana_gpu_stream *s = &g->streams[ks->stream];
		fprintf(out, "%s{\"pid\":%llu,\"device\":%u,\"stream\":%u,\"count\":%llu,\"total_ns\":%llu}",
			first ? "" : ",", (unsigned long long)p->procs[s->process].file.pid, s->device, s->stream,
			(unsigned long long)ks->count, (unsigned long long)ks->total_ns);
		first = 0;
	}
	fputs("]}", out);
}

void rep_gpu_json(FILE *out, const ana_profile *p)
{
	const ana_gpu *g = p->gpu;
	if (!g)
		return;
	int f = 1;
	fputs("  \"gpu\": {", out);
	rep_json_knum(out, IND, "cupti_version", g->cupti_version ? (double)g->cupti_version : NAN, &f);
	rep_json_kstr(out, IND, "clock", ana_gpu_clock_name(g->clock), &f);
	rep_json_knum(out, IND, "clock_error_ns", (double)g->offset_error_ns, &f);
	rep_json_key(out, IND, "kernels_only", &f);
	fputs(g->kernels_only ? "true" : "false", out);
	rep_json_knum(out, IND, "records", (double)g->records, &f);
	rep_json_knum(out, IND, "dropped_records", (double)g->dropped, &f);
	rep_json_knum(out, IND, "cupti_dropped_records", (double)g->cupti_dropped, &f);
	rep_json_knum(out, IND, "unknown_records", (double)g->unknown, &f);
	rep_json_knum(out, IND, "busy_pct", g->busy_pct, &f);
	rep_json_knum(out, IND, "busy_ns", (double)g->busy_ns, &f);
	rep_json_knum(out, IND, "kernel_ns", (double)g->kernel_ns, &f);
	rep_json_knum(out, IND, "memcpy_ns", (double)g->memcpy_ns, &f);
	rep_json_knum(out, IND, "memset_ns", (double)g->memset_ns, &f);
	rep_json_knum(out, IND, "sync_ns", (double)g->sync_ns, &f);
	rep_json_knum(out, IND, "sync_calls", (double)g->sync_calls, &f);
	rep_json_knum(out, IND, "api_calls", (double)g->api_calls, &f);
	rep_json_knum(out, IND, "launch_calls", (double)g->launch_calls, &f);
	rep_json_knum(out, IND, "launch_ns", (double)g->launch_ns, &f);
	rep_json_knum(out, IND, "cupti_overhead_ns", (double)g->overhead_ns, &f);
	rep_json_knum(out, IND, "peak_allocated_bytes", (double)g->peak_allocated_bytes, &f);
	rep_json_knum(out, IND, "peak_allocated_t_ns", g->peak_device != ANA_NONE ? (double)rel(p, g->peak_t_ns) : NAN, &f);
	rep_json_knum(out, IND, "peak_allocated_device", g->peak_device != ANA_NONE ? g->devices[g->peak_device].id : NAN, &f);
	rep_json_kstr(out, IND, "peak_allocated_region", node_path(p, g->peak_node), &f);
	rep_json_knum(out, IND, "peak_reserved_bytes", g->peak_reserved_bytes ? (double)g->peak_reserved_bytes : NAN, &f);

	fputs(",\n    \"devices\": [", out);
	for (uint32_t i = 0; i < g->ndevices; i++) {
		fputs(i ? ",\n      " : "\n      ", out);
		device_json(out, p, &g->devices[i]);
	}
	fputs(g->ndevices ? "\n    ],\n    \"kernels\": [" : "],\n    \"kernels\": [", out);
	uint32_t nk = p->opt.top && p->opt.top < g->nkernels ? p->opt.top : g->nkernels;
	for (uint32_t i = 0; i < nk; i++) {
		fputs(i ? ",\n      " : "\n      ", out);
		kernel_json(out, p, g, &g->kernels[i]);
	}
	fputs(nk ? "\n    ],\n    \"memcpy\": [" : "],\n    \"memcpy\": [", out);
	int first = 1;
	for (unsigned c = 0; c <= FMT_CPY_MAX; c++) {
		const ana_gpu_copy *x = &g->copies[c];
		if (!x->count)
			continue;
		int k = 1;
		fputs(first ? "\n      {" : ",\n      {", out);
		first = 0;
		rep_json_kstr(out, IND, "kind", ana_gpu_copy_name(c), &k);
		rep_json_knum(out, IND, "count", (double)x->count, &k);
		rep_json_knum(out, IND, "bytes", (double)x->bytes, &k);
		rep_json_knum(out, IND, "total_ns", (double)x->total_ns, &k);
		rep_json_knum(out, IND, "bandwidth_bytes_per_s", x->bandwidth_bytes_per_s, &k);
		rep_json_knum(out, IND, "pageable_count", (double)x->pageable_count, &k);
		rep_json_knum(out, IND, "pageable_bytes", (double)x->pageable_bytes, &k);
		rep_json_knum(out, IND, "pageable_pct", x->pageable_pct, &k);
		rep_json_knum(out, IND, "pinned_bytes", (double)x->pinned_bytes, &k);
		fputs("}", out);
	}
	fputs(first ? "],\n    \"streams\": [" : "\n    ],\n    \"streams\": [", out);
	for (uint32_t i = 0; i < g->nstreams; i++) {
		const ana_gpu_stream *s = &g->streams[i];
		int k = 1;
		fputs(i ? ",\n      {" : "\n      {", out);
		rep_json_knum(out, IND, "pid", (double)p->procs[s->process].file.pid, &k);
		rep_json_knum(out, IND, "device", s->device, &k);
		rep_json_knum(out, IND, "context", s->context, &k);
		rep_json_knum(out, IND, "stream", s->stream, &k);
		rep_json_knum(out, IND, "kernels", (double)s->kernels, &k);
		rep_json_knum(out, IND, "memcpys", (double)s->memcpys, &k);
		rep_json_knum(out, IND, "memsets", (double)s->memsets, &k);
		rep_json_knum(out, IND, "kernel_ns", (double)s->kernel_ns, &k);
		rep_json_knum(out, IND, "memcpy_ns", (double)s->memcpy_ns, &k);
		rep_json_knum(out, IND, "memset_ns", (double)s->memset_ns, &k);
		rep_json_knum(out, IND, "busy_ns", (double)s->busy_ns, &k);
		rep_json_knum(out, IND, "busy_pct", s->busy_pct, &k);
		fputs("}", out);
	}
	fputs(g->nstreams ? "\n    ],\n    \"sync_regions\": [" : "],\n    \"sync_regions\": [", out);
	for (uint32_t i = 0; i < g->nsync_regions; i++) {
		const ana_gpu_sync_region *r = &g->sync_regions[i];
		int k = 1;
		fputs(i ? ",\n      {" : "\n      {", out);
		rep_json_kstr(out, IND, "region", node_path(p, r->node), &k);
		rep_json_knum(out, IND, "sync_ns", (double)r->ns, &k);
		rep_json_knum(out, IND, "calls", (double)r->calls, &k);
		fputs("}", out);
	}
	fputs(g->nsync_regions ? "\n    ],\n    \"sync_stacks\": [" : "],\n    \"sync_stacks\": [", out);
	double period = (double)p->smp.period_ns;
	for (uint32_t i = 0; i < g->nsync_stacks && i < SYNC_STACKS; i++) {
		const ana_gpu_sync_stack *x = &g->sync_stacks[i];
		int k = 1;
		fputs(i ? ",\n      {" : "\n      {", out);
		rep_json_knum(out, IND, "samples", (double)x->samples, &k);
		rep_json_knum(out, IND, "ns", period > 0 ? (double)x->samples * period : NAN, &k);
		rep_json_knum(out, IND, "pct", 100.0 * (double)x->samples / (double)g->sync_samples, &k);
		uint32_t at = ana_gpu_sync_frame(p, x->stack);
		rep_json_kstr(out, IND, "call", at || ana_gpu_frame(p, x->stack, 0) ? ana_gpu_frame(p, x->stack, at) : NULL, &k);
		rep_json_kstr(out, IND, "caller", ana_gpu_frame(p, x->stack, at + 1), &k);
		rep_json_key(out, IND, "frames", &k);
		fputs("[", out);
		const char *name;
		for (uint32_t j = 0; (name = ana_gpu_frame(p, x->stack, j)); j++) {
			fputs(j ? "," : "", out);
			rep_json_string(out, name);
		}
		fputs("]}", out);
	}
	fputs(g->nsync_stacks ? "\n    ],\n    \"timers\": [" : "],\n    \"timers\": [", out);
	for (uint32_t i = 0; i < g->ntimers; i++) {
		const ana_gpu_timer *t = &g->timers[i];
		int k = 1;
		fputs(i ? ",\n      {" : "\n      {", out);
		rep_json_kstr(out, IND, "name", p->names[t->name], &k);
		rep_json_knum(out, IND, "count", (double)t->count, &k);
		rep_json_knum(out, IND, "total_ns", (double)t->total_ns, &k);
		rep_json_knum(out, IND, "mean_ns", t->count ? (double)t->total_ns / (double)t->count : NAN, &k);
		rep_json_knum(out, IND, "min_ns", (double)t->min_ns, &k);
		rep_json_knum(out, IND, "max_ns", (double)t->max_ns, &k);
		fputs("}", out);
	}
	fputs(g->ntimers ? "\n    ],\n    \"nvtx\": {" : "],\n    \"nvtx\": {", out);
	int k = 1;
	rep_json_knum(out, IND, "open", (double)g->nvtx_open, &k);
	rep_json_knum(out, IND, "unmatched", (double)g->nvtx_unmatched, &k);
	rep_json_knum(out, IND, "dropped", (double)g->nvtx_dropped, &k);
	fputs(",\"ranges\":[", out);
	for (uint32_t i = 0; i < g->nnvtx_ranges; i++) {
		const ana_nvtx_range *r = &g->nvtx_ranges[i];
		int m = 1;
		fputs(i ? ",\n      {" : "\n      {", out);
		rep_json_kstr(out, IND, "name", p->names[r->name], &m);
		rep_json_knum(out, IND, "count", (double)r->count, &m);
		rep_json_knum(out, IND, "total_ns", (double)r->total_ns, &m);
		rep_json_knum(out, IND, "mean_ns", r->mean_ns, &m);
		rep_json_knum(out, IND, "min_ns", (double)r->min_ns, &m);
		rep_json_knum(out, IND, "max_ns", (double)r->max_ns, &m);
		rep_json_knum(out, IND, "threads", r->threads, &m);
		rep_json_knum(out, IND, "cross_thread", (double)r->cross_thread, &m);
		fputs("}", out);
	}
	fputs(g->nnvtx_ranges ? "\n    ], \"marks\": [" : "], \"marks\": [", out);
	for (uint32_t i = 0; i < g->nnvtx_marks; i++) {
		const ana_nvtx_mark *x = &g->nvtx_marks[i];
		int m = 1;
		fputs(i ? ",\n      {" : "\n      {", out);
		rep_json_kstr(out, IND, "name", p->names[x->name], &m);
		rep_json_knum(out, IND, "count", (double)x->count, &m);
		rep_json_knum(out, IND, "threads", x->threads, &m);
		fputs("}", out);
	}
	fputs(g->nnvtx_marks ? "\n    ]}\n  },\n" : "]}\n  },\n", out);
}

/* ---- text ---- */

/* A kernel name that fits a column: C++ argument lists collapsed, the end cut. */
static const char *short_kernel(const char *name, char *buf, size_t n)
{
	size_t k = 0;
	int depth = 0;
	for (const char *s = name; *s && k + 1 < n; s++) {
		if (*s == '(' || *s == '<') {
			if (!depth++) {
				if (k + 6 >= n)
					break;
				memcpy(buf + k, *s == '(' ? "(..)" : "<..>", 4);
				k += 4;
			}
		} else if (*s == ')' || *s == '>') {
			if (depth)
				depth--;
		} else if (!depth)
			buf[k++] = *s;
	}
	buf[k] = 0;
	if (k > 40) {
		buf[37] = buf[38] = buf[39] = '.';
		buf[40] = 0;
	}
	return buf;
}

/* NVTX start/end ranges and marks (push/pop ranges are regions: the region table has them). */
static void nvtx_text(FILE *out, const ana_profile *p, const ana_gpu *g)
{
	char a[32], b[32], c[32], d[32];
	for (uint32_t i = 0; i < g->nnvtx_ranges; i++) {
		const ana_nvtx_range *r = &g->nvtx_ranges[i];
		if (!i)
			fprintf(out, "\n  %-32s %8s %10s %10s %10s %10s %8s\n", "NVTX range (start/end)", "count", "total", "mean", "min",
				"max", "threads");
		fprintf(out, "  %-32.32s %8llu %10s %10s %10s %10s %8u\n", *p->names[r->name] ? p->names[r->name] : "(no message)",
			(unsigned long long)r->count, ana_fmt_ns((double)r->total_ns, a, sizeof a), ana_fmt_ns(r->mean_ns, b, sizeof b),
			ana_fmt_ns((double)r->min_ns, c, sizeof c), ana_fmt_ns((double)r->max_ns, d, sizeof d), r->threads);
	}
	for (uint32_t i = 0; i < g->nnvtx_marks; i++) {
		const ana_nvtx_mark *x = &g->nvtx_marks[i];
		fprintf(out, "%s  %-32.32s %8llu %8u\n", i ? "" : "\n  NVTX mark                           count  threads\n",
			*p->names[x->name] ? p->names[x->name] : "(no message)", (unsigned long long)x->count, x->threads);
	}
	if (g->nvtx_open || g->nvtx_unmatched || g->nvtx_dropped)
		fprintf(out, "  NVTX: %llu ranges never ended, %llu ends without a start, %llu records lost (queue full)\n",
			(unsigned long long)g->nvtx_open, (unsigned long long)g->nvtx_unmatched, (unsigned long long)g->nvtx_dropped);
}

/* NVLink traffic per device, where NVML reported it. */
static void nvlink_text(FILE *out, const ana_profile *p, const ana_gpu *g)
{
	char a[32], b[32], c[32], d[32], e[32], f[32];
	for (uint32_t i = 0; i < g->ndevices; i++) {
		const ana_gpu_device *x = &g->devices[i];
		const ana_gpu_nvlink *l = &x->link;
		if (l->samples < 2)
			continue;
		fprintf(out, "  NVLink pid %llu dev %u: sent %s (%s/s, max %s/s)   received %s (%s/s, max %s/s)\n",
			(unsigned long long)p->procs[x->process].file.pid, x->id, ana_fmt_bytes((double)l->tx_bytes, a, sizeof a),
			ana_fmt_bytes(isfinite(l->tx_bytes_per_s) ? l->tx_bytes_per_s : 0, b, sizeof b),
			ana_fmt_bytes(isfinite(l->tx_max_bytes_per_s) ? l->tx_max_bytes_per_s : 0, c, sizeof c),
			ana_fmt_bytes((double)l->rx_bytes, d, sizeof d),
			ana_fmt_bytes(isfinite(l->rx_bytes_per_s) ? l->rx_bytes_per_s : 0, e, sizeof e),
			ana_fmt_bytes(isfinite(l->rx_max_bytes_per_s) ? l->rx_max_bytes_per_s : 0, f, sizeof f));
	}
}

void rep_gpu_text(FILE *out, const ana_profile *p, const char *bold, const char *reset)
{
	const ana_gpu *g = p->gpu;
	if (!g)
		return;
	char a[32], b[32], c[32], d[32];
	fprintf(out, "\n%sGPU%s\n", bold, reset);
	if (!g->records && !g->ndevices) {
		fprintf(out, "  no GPU activity recorded (%s)\n",
			g->cupti_version ? "CUPTI was loaded; the program ran no CUDA work while recording"
					 : "CUPTI was not loaded: see the line fennec record --gpu printed");
		nvtx_text(out, p, g);
		return;
	}
	if (!g->ndevices && !g->api_calls) /* GPU timers only */
		goto timers;
	fprintf(out, "  busy         %s (%.1f%% of the devices' wall time)   kernels %s   copies %s   memsets %s\n",
		ana_fmt_ns((double)g->busy_ns, a, sizeof a), isfinite(g->busy_pct) ? g->busy_pct : 0,
		ana_fmt_ns((double)g->kernel_ns, b, sizeof b), ana_fmt_ns((double)g->memcpy_ns, c, sizeof c),
		ana_fmt_ns((double)g->memset_ns, d, sizeof d));
	fprintf(out, "  host         %s blocked in %llu synchronising calls   %llu launches (%s)   %llu API calls\n",
		ana_fmt_ns((double)g->sync_ns, a, sizeof a), (unsigned long long)g->sync_calls,
		(unsigned long long)g->launch_calls, ana_fmt_ns((double)g->launch_ns, b, sizeof b),
		(unsigned long long)g->api_calls);
	if (g->peak_device != ANA_NONE) {
		fprintf(out, "  memory       peak %s allocated on device %u", ana_fmt_bytes((double)g->peak_allocated_bytes, a, sizeof a),
			g->devices[g->peak_device].id);
		if (g->peak_node != ANA_NONE)
			fprintf(out, ", in %s", p->nodes[g->peak_node].path);
		if (g->peak_reserved_bytes)
			fprintf(out, "   device memory used (NVML) up to %s", ana_fmt_bytes((double)g->peak_reserved_bytes, b, sizeof b));
		fputc('\n', out);
	}
	if (g->dropped || g->cupti_dropped)
		fprintf(out, "  dropped      %llu records by fennec, %llu by CUPTI: totals are low\n",
			(unsigned long long)g->dropped, (unsigned long long)g->cupti_dropped);
	fprintf(out, "\n  %-6s %-4s %-22s %10s %7s %7s %10s %8s %8s\n", "pid", "dev", "name", "busy", "busy%", "window%", "overlap",
		"streams", "SM% NVML");
	for (uint32_t i = 0; i < g->ndevices; i++) {
		const ana_gpu_device *x = &g->devices[i];
		fprintf(out, "  %-6llu %-4u %-22.22s %10s %6.1f%% %6.1f%% %10s %8u %8s\n",
			(unsigned long long)p->procs[x->process].file.pid, x->id,
			x->info && x->info->name && *x->info->name ? x->info->name : "-", ana_fmt_ns((double)x->busy_ns, a, sizeof a),
			isfinite(x->busy_pct) ? x->busy_pct : 0, isfinite(x->window_busy_pct) ? x->window_busy_pct : 0,
			ana_fmt_ns((double)x->overlap_ns, b, sizeof b), x->streams,
			isfinite(x->sm_pct_mean) ? (snprintf(c, sizeof c, "%.0f%%", x->sm_pct_mean), c) : "-");
	}
	nvlink_text(out, p, g);
	if (g->nkernels) {
		fprintf(out, "\n  %-40s %8s %10s %10s %10s %10s %6s %6s\n", "kernel", "count", "total", "mean", "min", "max", "GPU%",
			"occ%");
		uint32_t n = g->nkernels < KERNEL_ROWS ? g->nkernels : KERNEL_ROWS;
		for (uint32_t i = 0; i < n; i++) {
			const ana_gpu_kernel *k = &g->kernels[i];
			char nb[64], e[32], occ[16];
			snprintf(occ, sizeof occ, isfinite(k->occupancy_pct) ? "%.0f" : "-", k->occupancy_pct);
			fprintf(out, "  %-40s %8llu %10s %10s %10s %10s %5.1f%% %6s\n", short_kernel(p->names[k->name], nb, sizeof nb),
				(unsigned long long)k->count, ana_fmt_ns((double)k->total_ns, a, sizeof a),
				ana_fmt_ns(k->mean_ns, b, sizeof b), ana_fmt_ns((double)k->min_ns, c, sizeof c),
				ana_fmt_ns((double)k->max_ns, e, sizeof e), k->gpu_time_pct, occ);
		}
		if (g->nkernels > n)
			fprintf(out, "  (%u more kernels in the JSON report)\n", g->nkernels - n);
	}
	int any = 0;
	for (unsigned k = 0; k <= FMT_CPY_MAX; k++) {
		const ana_gpu_copy *x = &g->copies[k];
		if (!x->count)
			continue;
		if (!any++)
			fprintf(out, "\n  %-8s %8s %10s %10s %12s %9s\n", "copy", "count", "bytes", "time", "bandwidth", "pageable");
		snprintf(d, sizeof d, "%s/s", ana_fmt_bytes(isfinite(x->bandwidth_bytes_per_s) ? x->bandwidth_bytes_per_s : 0, c, sizeof c));
		fprintf(out, "  %-8s %8llu %10s %10s %12s %8.1f%%\n", ana_gpu_copy_name(k), (unsigned long long)x->count,
			ana_fmt_bytes((double)x->bytes, a, sizeof a), ana_fmt_ns((double)x->total_ns, b, sizeof b), d, x->pageable_pct);
	}
	if (g->nstreams) {
		fprintf(out, "\n  %-6s %-4s %-8s %8s %8s %10s %7s\n", "pid", "dev", "stream", "kernels", "copies", "busy", "busy%");
		for (uint32_t i = 0; i < g->nstreams && i < 32; i++) {
			const ana_gpu_stream *s = &g->streams[i];
			fprintf(out, "  %-6llu %-4u %-8u %8llu %8llu %10s %6.1f%%\n", (unsigned long long)p->procs[s->process].file.pid,
				s->device, s->stream, (unsigned long long)s->kernels, (unsigned long long)s->memcpys,
				ana_fmt_ns((double)s->busy_ns, a, sizeof a), isfinite(s->busy_pct) ? s->busy_pct : 0);
		}
	}
	for (uint32_t i = 0; i < g->nsync_regions && i < 5; i++) {
		const ana_gpu_sync_region *r = &g->sync_regions[i];
		fprintf(out, "%s  %10s in %llu calls   %s\n", i ? "" : "\n  host blocked in synchronising calls, by region\n",
			ana_fmt_ns((double)r->ns, a, sizeof a), (unsigned long long)r->calls,
			r->node != ANA_NONE ? p->nodes[r->node].path : "(outside regions)");
	}
	for (uint32_t i = 0; i < g->nsync_stacks && i < 3; i++) {
		char st[400];
		ana_gpu_stack_text(p, g->sync_stacks[i].stack, 6, st, sizeof st);
		fprintf(out, "%s  %5.1f%%  %s\n", i ? "" : "\n  host stacks sampled while blocked in synchronising calls\n",
			100.0 * (double)g->sync_stacks[i].samples / (double)g->sync_samples, st);
	}
timers:
	for (uint32_t i = 0; i < g->ntimers; i++) {
		const ana_gpu_timer *t = &g->timers[i];
		fprintf(out, "%s  %-24s %8llu   mean %s   min %s   max %s\n", i ? "" : "\n  GPU timers\n", p->names[t->name],
			(unsigned long long)t->count, ana_fmt_ns((double)t->total_ns / (double)t->count, a, sizeof a),
			ana_fmt_ns((double)t->min_ns, b, sizeof b), ana_fmt_ns((double)t->max_ns, c, sizeof c));
	}
	nvtx_text(out, p, g);
}

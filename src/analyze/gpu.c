/*
 * gpu.c - GPU activity of a recording (docs/gpu.md): GPU chunk records are folded while the
 * files are read (kernel, stream and transfer tables, intervals per stream, memory events,
 * synchronising calls), each process is closed with its memory replay and the regions its
 * synchronising calls and its memory peak fell in (both asked of analyze/replay.c in one
 * more read of its file, only when there are such calls), and ana_gpu_finish computes busy
 * time, overlap, occupancy and the orderings.
 * Memory grows with the kernels, copies and memsets (16 bytes each), not with the file.
 */
#include "analyze/aggregate.h"
#include "analyze/gpu.h"
#include "analyze/map.h"
#include "analyze/replay.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "symbol/symbol.h"

/* ---- working state ---- */

typedef struct span {
	uint64_t tid, start, end;
} span;

typedef struct memev {
	uint64_t t, bytes;
	uint32_t device, corr;
	uint8_t op;
} memev;

typedef struct config {
	uint32_t kernel, device, threads, regs, smem;
	uint64_t ns;
} config;

typedef struct psync {
	uint32_t proc;
	uint64_t tid, start, end;
} psync;

typedef struct work {
	ana_map kernel_of_name;     /* p->names index -> kernels index (all processes) */
	ana_map stream_of;          /* (process, device, stream) -> streams index */
	ana_map kstream_of;         /* (kernel, stream) -> kstreams index */
	ana_map config_of;          /* hash of a config -> configs index */
	ana_map timer_of;           /* p->names index -> timers index */
	config *configs;
	size_t nconfigs, configs_cap;
	/* the process being read */
	uint32_t proc;
	uint32_t *kernel_of_string; /* the file's string id -> kernels index */
	uint32_t nkos;
	span *sync;              /* synchronising API calls */
	size_t nsync, sync_cap;
	span *syncrec;           /* SYNC records (the fallback without API records) */
	size_t nsyncrec, syncrec_cap;
	int any_api;
	memev *mem;
	size_t nmem, mem_cap;
	span *allocapi;          /* allocation API calls: tid, start; end = correlation */
	size_t nallocapi, allocapi_cap;
	ana_map nvtx_range_of;   /* p->names index -> nvtx_ranges index */
	ana_map nvtx_mark_of;    /* p->names index -> nvtx_marks index */
	ana_map nvtx_seen;       /* (kind, name, tid) hashes: threads counted */
	ana_map open_of;         /* range id -> opens index (this process) */
	psync *allsync;          /* every process's merged synchronising intervals */
	size_t nallsync, allsync_cap;
	span *opens;             /* started ranges: tid, start, end = name (ANA_NONE once ended) */
	size_t nopens, opens_cap;
	int oom;
} work;

static work *W(ana_profile *p)
{
	ana_gpu *g = p->gpu;
	if (!g) {
		g = p->gpu = calloc(1, sizeof *g);
		if (!g)
			return NULL;
		g->peak_device = g->peak_node = ANA_NONE;
	}
	if (!g->priv) {
		work *w = g->priv = calloc(1, sizeof *w);
		if (!w)
			return NULL;
		w->proc = ANA_NONE;
	}
	return g->priv;
}

#define PUSH(arr, n, cap, val)                                                          \
	(ana_grow(&(arr), &(cap), (n), sizeof *(arr)) < 0 ? -1 : ((arr)[(n)++] = (val), 0))

/* ---- names ---- */

/* "cudaLaunchKernel_v7000" -> "cudaLaunchKernel" (CUPTI's version suffixes). */
static void api_base(const char *s, char *out, size_t n)
{
	snprintf(out, n, "%s", s ? s : "");
	char *v = strrchr(out, '_');
	if (v && v[1] == 'v' && v[2]) {
		char *d = v + 2;
		while (*d >= '0' && *d <= '9')
			d++;
		if (!*d)
			*v = 0;
	}
}

static int is_sync_call(const char *name)
{
	if (strstr(name, "Synchronize"))
		return 1;
	int copy = !strncmp(name, "cudaMemcpy", 10) || !strncmp(name, "cuMemcpy", 8);
	return copy && !strstr(name, "Async") && !strstr(name, "Peer");
}

static int is_launch_call(const char *name)
{
	return !strncmp(name, "cudaLaunch", 10) || !strncmp(name, "cuLaunch", 8);
}

static int is_alloc_call(const char *name)
{
	return strstr(name, "Malloc") || strstr(name, "MemAlloc") || strstr(name, "MemCreate");
}

/* ---- devices, streams, kernels ---- */

static ana_gpu_device *device_of(ana_gpu *g, uint32_t proc, uint32_t id)
{
	for (uint32_t i = 0; i < g->ndevices; i++)
		if (g->devices[i].process == proc && g->devices[i].id == id)
			return &g->devices[i];
	if (ana_grow(&g->devices, &g->devices_cap, g->ndevices, sizeof *g->devices) < 0)
		return NULL;
	ana_gpu_device *d = &g->devices[g->ndevices++];
	d->process = proc;
	d->id = id;
	d->first_ns = UINT64_MAX;
	return d;
}

static ana_gpu_stream *stream_of(ana_gpu *g, work *w, uint32_t proc, const fmt_gpu *r)
{
	uint64_t key = (uint64_t)proc << 40 ^ (uint64_t)(r->device & 0xff) << 32 ^ r->stream;
	uint32_t i = ana_map_get(&w->stream_of, key);
	if (i != ANA_NONE)
		return &g->streams[i];
	if (ana_grow(&g->streams, &g->streams_cap, g->nstreams, sizeof *g->streams) < 0 ||
	    ana_map_put(&w->stream_of, key, g->nstreams) < 0)
		return NULL;
	ana_gpu_stream *s = &g->streams[g->nstreams++];
	s->process = proc;
	s->device = r->device;
	s->context = r->context;
	s->stream = r->stream;
	return s;
}

static uint32_t kernel_of(ana_profile *p, ana_gpu *g, work *w, const fmt_gpu *r)
{
	if (r->name < w->nkos && w->kernel_of_string[r->name] != ANA_NONE)
		return w->kernel_of_string[r->name];
	char *dm = sym_demangle(r->name_str);
	uint32_t name = ana_intern(p, dm ? dm : r->name_str ? r->name_str : "[unnamed kernel]");
	free(dm);
	if (name == ANA_NONE)
		return ANA_NONE;
	uint32_t k = ana_map_get(&w->kernel_of_name, name);
	if (k == ANA_NONE) {
		if (ana_grow(&g->kernels, &g->kernels_cap, g->nkernels, sizeof *g->kernels) < 0 ||
		    ana_map_put(&w->kernel_of_name, name, g->nkernels) < 0)
			return ANA_NONE;
		k = g->nkernels++;
		ana_gpu_kernel *x = &g->kernels[k];
		x->name = name;
		x->min_ns = UINT64_MAX;
		x->first_kstream = ANA_NONE;
		memcpy(x->grid, r->grid, sizeof x->grid);
		memcpy(x->block, r->block, sizeof x->block);
		x->regs = r->regs;
		x->smem_static = r->smem_static;
		x->smem_dynamic = r->smem_dynamic;
	}
	if (r->name >= w->nkos) {
		uint32_t n = r->name + 1 > 2 * w->nkos ? r->name + 1 : 2 * w->nkos;
		uint32_t *a = realloc(w->kernel_of_string, n * sizeof *a);
		if (!a)
			return ANA_NONE;
		for (uint32_t i = w->nkos; i < n; i++)
			a[i] = ANA_NONE;
		w->kernel_of_string = a;
		w->nkos = n;
	}
	return w->kernel_of_string[r->name] = k;
}

static int add_config(work *w, uint32_t k, const fmt_gpu *r, uint64_t ns)
{
	config c = {k, r->device, r->block[0] * r->block[1] * r->block[2], r->regs, r->smem_static + r->smem_dynamic, 0};
	uint64_t key = ana_hash64(((uint64_t)k << 32 | c.device) ^
				  ana_hash64((uint64_t)c.threads << 40 ^ (uint64_t)c.regs << 24 ^ c.smem));
	uint32_t i = ana_map_get(&w->config_of, key);
	if (i == ANA_NONE) {
		if (PUSH(w->configs, w->nconfigs, w->configs_cap, c) < 0 || ana_map_put(&w->config_of, key, (uint32_t)w->nconfigs - 1) < 0)
			return -1;
		i = (uint32_t)w->nconfigs - 1;
	}
	w->configs[i].ns += ns; /* a hash collision merges two configs: rare, and only the estimate suffers */
	return 0;
}

static int kernel_event(ana_profile *p, ana_gpu *g, work *w, const fmt_gpu *r, ana_gpu_stream *s)
{
	uint64_t ns = r->end_ns - r->start_ns;
	uint32_t k = kernel_of(p, g, w, r);
	if (k == ANA_NONE)
		return -1;
	ana_gpu_kernel *x = &g->kernels[k];
	x->count++;
	x->total_ns += ns;
	if (ns < x->min_ns)
		x->min_ns = ns;
	if (ns > x->max_ns)
		x->max_ns = ns;
	uint32_t si = (uint32_t)(s - g->streams);
	uint64_t key = (uint64_t)k << 32 | si;
	uint32_t ks = ana_map_get(&w->kstream_of, key);
	if (ks == ANA_NONE) {
		if (ana_grow(&g->kstreams, &g->kstreams_cap, g->nkstreams, sizeof *g->kstreams) < 0 ||
		    ana_map_put(&w->kstream_of, key, g->nkstreams) < 0)
			return -1;
		ks = g->nkstreams++;
		g->kstreams[ks] = (ana_gpu_kstream){k, si, x->first_kstream, 0, 0};
		x->first_kstream = ks;
	}
	g->kstreams[ks].count++;
	g->kstreams[ks].total_ns += ns;
	s->kernels++;
	s->kernel_ns += ns;
	return add_config(w, k, r, ns);
}

static void copy_event(ana_gpu *g, const fmt_gpu *r, ana_gpu_stream *s)
{
	uint64_t ns = r->end_ns - r->start_ns;
	ana_gpu_copy *c = &g->copies[r->kind <= FMT_CPY_MAX ? r->kind : 0];
	c->count++;
	c->bytes += r->bytes;
	c->total_ns += ns;
	if (r->mem_kind == FMT_GMEM_PAGEABLE || r->dst_kind == FMT_GMEM_PAGEABLE) {
		c->pageable_count++;
		c->pageable_bytes += r->bytes;
	} else if (r->mem_kind == FMT_GMEM_PINNED || r->dst_kind == FMT_GMEM_PINNED)
		c->pinned_bytes += r->bytes;
	s->memcpys++;
	s->memcpy_ns += ns;
}

/* Kernels, copies and memsets: the busy intervals of a stream and a device. */
static int device_work(ana_gpu *g, work *w, uint32_t proc, const fmt_gpu *r, ana_profile *p)
{
	ana_gpu_stream *s = stream_of(g, w, proc, r);
	ana_gpu_device *d = device_of(g, proc, r->device);
	if (!s || !d)
		return -1;
	uint64_t ns = r->end_ns - r->start_ns;
	if (r->start_ns < d->first_ns)
		d->first_ns = r->start_ns;
	if (r->end_ns > d->last_ns)
		d->last_ns = r->end_ns;
	if (r->type == FMT_GR_KERNEL) {
		d->kernel_ns += ns;
		if (kernel_event(p, g, w, r, s) < 0)
			return -1;
	} else if (r->type == FMT_GR_MEMCPY) {
		d->memcpy_ns += ns;
		copy_event(g, r, s);
	} else {
		d->memset_ns += ns;
		s->memsets++;
		s->memset_ns += ns;
	}
	if (ns == 0)
		return 0;
	ana_u64vec *iv = &s->iv;
	if (iv->n + 2 > iv->cap) {
		size_t cap = iv->cap ? iv->cap * 2 : 64;
		uint64_t *v = realloc(iv->v, cap * sizeof *v);
		if (!v)
			return -1;
		iv->v = v;
		iv->cap = cap;
	}
	iv->v[iv->n++] = r->start_ns;
	iv->v[iv->n++] = r->end_ns;
	return 0;
}

static int api_event(ana_gpu *g, work *w, const fmt_gpu *r)
{
	char name[256];
	api_base(r->name_str, name, sizeof name);
	uint64_t ns = r->end_ns - r->start_ns;
	g->api_calls++;
	w->any_api = 1;
	if (is_launch_call(name)) {
		g->launch_calls++;
		g->launch_ns += ns;
	}
	if (is_sync_call(name) && PUSH(w->sync, w->nsync, w->sync_cap, ((span){r->tid, r->start_ns, r->end_ns})) < 0)
		return -1;
	if (is_alloc_call(name) &&
	    PUSH(w->allocapi, w->nallocapi, w->allocapi_cap, ((span){r->tid, r->start_ns, r->correlation})) < 0)
		return -1;
	return 0;
}

static int nvml_event(ana_gpu *g, uint32_t proc, const fmt_gpu *r)
{
	ana_gpu_device *d = device_of(g, proc, r->device);
	if (!d)
		return -1;
	ana_gpu_point pt = {.t_ns = r->start_ns, .present = (uint32_t)r->value};
	memcpy(pt.v, r->nvml, sizeof pt.v);
	return PUSH(d->nvml, d->nnvml, d->nvml_cap, pt);
}

static int timer_event(ana_profile *p, ana_gpu *g, work *w, const fmt_gpu *r)
{
	uint32_t name = ana_intern(p, r->name_str ? r->name_str : "[unnamed timer]");
	if (name == ANA_NONE)
		return -1;
	uint32_t i = ana_map_get(&w->timer_of, name);
	if (i == ANA_NONE) {
		if (ana_grow(&g->timers, &g->timers_cap, g->ntimers, sizeof *g->timers) < 0 ||
		    ana_map_put(&w->timer_of, name, g->ntimers) < 0)
			return -1;
		i = g->ntimers++;
		g->timers[i] = (ana_gpu_timer){.name = name, .min_ns = UINT64_MAX};
	}
	ana_gpu_timer *t = &g->timers[i];
	uint64_t ns = r->end_ns - r->start_ns;
	t->count++;
	t->total_ns += ns;
	if (ns < t->min_ns)
		t->min_ns = ns;
	if (ns > t->max_ns)
		t->max_ns = ns;
	return 0;
}

/* Count tid once for (kind, name): 1 when it is new. */
static int first_thread(work *w, unsigned kind, uint32_t name, uint64_t tid)
{
	uint64_t key = ana_hash64(((uint64_t)name << 2 | kind) ^ ana_hash64(tid + 1));
	if (ana_map_get(&w->nvtx_seen, key) != ANA_NONE)
		return 0;
	return ana_map_put(&w->nvtx_seen, key, 1) < 0 ? -1 : 1;
}

static int nvtx_start(ana_profile *p, work *w, const fmt_gpu *r)
{
	uint32_t name = ana_intern(p, r->text ? r->text : "");
	if (name == ANA_NONE)
		return -1;
	if (ana_map_put(&w->open_of, r->range_id, (uint32_t)w->nopens) < 0)
		return -1;
	return PUSH(w->opens, w->nopens, w->opens_cap, ((span){r->tid, r->start_ns, name}));
}

static int nvtx_end(ana_gpu *g, work *w, const fmt_gpu *r)
{
	uint32_t i = ana_map_get(&w->open_of, r->range_id);
	if (i == ANA_NONE || w->opens[i].end == ANA_NONE) {
		g->nvtx_unmatched++;
		return 0;
	}
	span *o = &w->opens[i];
	uint32_t name = (uint32_t)o->end;
	o->end = ANA_NONE;
	uint32_t k = ana_map_get(&w->nvtx_range_of, name);
	if (k == ANA_NONE) {
		if (ana_grow(&g->nvtx_ranges, &g->nvtx_ranges_cap, g->nnvtx_ranges, sizeof *g->nvtx_ranges) < 0 ||
		    ana_map_put(&w->nvtx_range_of, name, g->nnvtx_ranges) < 0)
			return -1;
		k = g->nnvtx_ranges++;
		g->nvtx_ranges[k] = (ana_nvtx_range){.name = name, .min_ns = UINT64_MAX};
	}
	ana_nvtx_range *x = &g->nvtx_ranges[k];
	uint64_t ns = r->start_ns > o->start ? r->start_ns - o->start : 0;
	x->count++;
	x->total_ns += ns;
	if (ns < x->min_ns)
		x->min_ns = ns;
	if (ns > x->max_ns)
		x->max_ns = ns;
	if (r->tid != o->tid)
		x->cross_thread++;
	for (int e = 0; e < 2; e++) {
		int fresh = first_thread(w, 0, name, e ? r->tid : o->tid);
		if (fresh < 0)
			return -1;
		x->threads += (uint32_t)fresh;
	}
	return 0;
}

static int nvtx_mark(ana_profile *p, ana_gpu *g, work *w, const fmt_gpu *r)
{
	uint32_t name = ana_intern(p, r->text ? r->text : "");
	if (name == ANA_NONE)
		return -1;
	uint32_t k = ana_map_get(&w->nvtx_mark_of, name);
	if (k == ANA_NONE) {
		if (ana_grow(&g->nvtx_marks, &g->nvtx_marks_cap, g->nnvtx_marks, sizeof *g->nvtx_marks) < 0 ||
		    ana_map_put(&w->nvtx_mark_of, name, g->nnvtx_marks) < 0)
			return -1;
		k = g->nnvtx_marks++;
		g->nvtx_marks[k] = (ana_nvtx_mark){.name = name};
	}
	g->nvtx_marks[k].count++;
	int fresh = first_thread(w, 1, name, r->tid);
	if (fresh < 0)
		return -1;
	g->nvtx_marks[k].threads += (uint32_t)fresh;
	return 0;
}

static int nvlink_event(ana_gpu *g, uint32_t proc, const fmt_gpu *r)
{
	ana_gpu_device *d = device_of(g, proc, r->device);
	if (!d)
		return -1;
	ana_gpu_point pt = {.t_ns = r->start_ns, .v = {r->tx_bytes, r->rx_bytes}, .present = 3};
	return PUSH(d->nvlink, d->nnvlink, d->nvlink_cap, pt);
}

int ana_gpu_event(ana_profile *p, uint32_t proc, const fmt_file *f, const fmt_event *ev)
{
	(void)f;
	work *w = W(p);
	if (!w)
		return FENNEC_ENOMEM;
	ana_gpu *g = p->gpu;
	const fmt_gpu *r = ev->gpu;
	w->proc = proc;
	int rc = 0;
	switch (r->type) {
	case FMT_GR_KERNEL:
	case FMT_GR_MEMCPY:
	case FMT_GR_MEMSET: rc = device_work(g, w, proc, r, p); break;
	case FMT_GR_API: rc = api_event(g, w, r); break;
	case FMT_GR_SYNC:
		rc = PUSH(w->syncrec, w->nsyncrec, w->syncrec_cap, ((span){0, r->start_ns, r->end_ns}));
		break;
	case FMT_GR_MEMORY:
		rc = PUSH(w->mem, w->nmem, w->mem_cap, ((memev){r->start_ns, r->bytes, r->device, r->correlation, r->kind}));
		break;
	case FMT_GR_OVERHEAD: g->overhead_ns += r->end_ns - r->start_ns; break;
	case FMT_GR_NVML: rc = nvml_event(g, proc, r); break;
	case FMT_GR_TIMER: rc = timer_event(p, g, w, r); break;
	case FMT_GR_RANGE_START: rc = nvtx_start(p, w, r); break;
	case FMT_GR_RANGE_END: rc = nvtx_end(g, w, r); break;
	case FMT_GR_MARK: rc = nvtx_mark(p, g, w, r); break;
	case FMT_GR_NVLINK: rc = nvlink_event(g, proc, r); break;
	default: break;
	}
	return rc < 0 ? FENNEC_ENOMEM : 0;
}

/* ---- regions at times: one replay of a process's file (analyze/replay.h) ---- */

typedef struct answers {
	ana_profile *p;
	const fmt_file *f;   /* the process's file, fully read: its sites name the stacks */
	uint32_t *node;      /* per question: the innermost region node open, ANA_NONE: none */
	size_t late;         /* this question's node is found after the others' (SIZE_MAX: none) */
	uint32_t *late_sites;
	uint32_t nlate;
} answers;

static int on_answer(void *ctx, size_t i, const uint32_t *sites, uint32_t n)
{
	answers *a = ctx;
	if (i != a->late) {
		a->node[i] = n ? ana_path_node(a->p, a->f, sites, n) : ANA_NONE;
		return 0;
	}
	/* kept for later, so that names are looked up in the order of the questions' kinds */
	free(a->late_sites);
	a->late_sites = n ? malloc(n * sizeof *sites) : NULL;
	if (n && !a->late_sites)
		return FENNEC_ENOMEM;
	if (n)
		memcpy(a->late_sites, sites, n * sizeof *sites);
	a->nlate = n;
	return 0;
}

/* The innermost region node open on each question's thread at its tick (ANA_NONE outside
 * regions, or when the file cannot be read again), for the n questions of process proc,
 * in one read of its file; question `late`'s node is looked up after the others'. Returns
 * 0 or -1 (out of memory). */
static int regions_at(ana_profile *p, uint32_t proc, const fmt_file *f, const ana_rp_at *qs, size_t n, size_t late,
		      uint32_t *node)
{
	for (size_t i = 0; i < n; i++)
		node[i] = ANA_NONE;
	if (!n || !f->nsites)
		return 0;
	answers a = {.p = p, .f = f, .node = node, .late = late};
	int rc = ana_replay_open_at(p, proc, qs, n, on_answer, &a);
	if (!rc && late < n)
		node[late] = a.nlate ? ana_path_node(p, f, a.late_sites, a.nlate) : ANA_NONE;
	free(a.late_sites);
	return rc ? -1 : 0;
}

static uint64_t to_ticks(const fmt_file *f, uint64_t ns)
{
	double t = f->fit_b > 0 ? ((double)ns - f->fit_a) / f->fit_b : (double)ns;
	return t > 0 ? (uint64_t)llround(t) : 0;
}

/* ---- closing a process ---- */

static int cmp_span(const void *a, const void *b)
{
	const span *x = a, *y = b;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return (x->start > y->start) - (x->start < y->start);
}

static int cmp_memev(const void *a, const void *b)
{
	const memev *x = a, *y = b;
	if (x->t != y->t)
		return x->t < y->t ? -1 : 1;
	return (int)x->op - (int)y->op; /* an allocation before a release at the same time */
}

static int add_sync_region(ana_gpu *g, uint32_t node, uint64_t ns)
{
	for (uint32_t i = 0; i < g->nsync_regions; i++)
		if (g->sync_regions[i].node == node) {
			g->sync_regions[i].ns += ns;
			g->sync_regions[i].calls++;
			return 0;
		}
	return PUSH(g->sync_regions, g->nsync_regions, g->sync_regions_cap, ((ana_gpu_sync_region){node, ns, 1}));
}

/* Each thread's synchronising calls merged into their union (a runtime call and the driver
 * call inside it count once), in place: how many intervals are left. */
static size_t merge_sync(work *w)
{
	span *s = w->any_api ? w->sync : w->syncrec;
	size_t n = w->any_api ? w->nsync : w->nsyncrec;
	if (!n)
		return 0;
	qsort(s, n, sizeof *s, cmp_span);
	size_t m = 0;
	for (size_t i = 0; i < n; i++) {
		if (m && s[m - 1].tid == s[i].tid && s[i].start <= s[m - 1].end) {
			if (s[i].end > s[m - 1].end)
				s[m - 1].end = s[i].end;
		} else
			s[m++] = s[i];
	}
	return m;
}

/* Host time blocked: the m merged synchronising intervals (merge_sync), by the region each
 * began in (node[i]; SYNC records name no thread, hence no region). */
static int close_sync(ana_gpu *g, work *w, size_t m, const uint32_t *node)
{
	span *s = w->any_api ? w->sync : w->syncrec;
	int rc = 0;
	for (size_t i = 0; i < m && !rc && w->any_api; i++)
		rc = PUSH(w->allsync, w->nallsync, w->allsync_cap, ((psync){w->proc, s[i].tid, s[i].start, s[i].end}));
	for (size_t i = 0; i < m && !rc; i++) {
		uint64_t ns = s[i].end - s[i].start;
		g->sync_ns += ns;
		g->sync_calls++;
		rc = add_sync_region(g, w->any_api ? node[i] : ANA_NONE, ns);
	}
	return rc;
}

/* Replay allocations and releases per device in time order: peaks, what is left, and the
 * allocated-bytes timeline. *alloc: the allocation API call (w->allocapi) that made the
 * peak, whose region the caller finds, SIZE_MAX: none. */
static int close_memory(ana_gpu *g, work *w, uint32_t proc, size_t *alloc)
{
	*alloc = SIZE_MAX;
	if (!w->nmem)
		return 0;
	qsort(w->mem, w->nmem, sizeof *w->mem, cmp_memev);
	const memev *peak = NULL;
	uint32_t peak_dev = ANA_NONE; /* an index: device_of may move the array */
	for (size_t i = 0; i < w->nmem; i++) {
		const memev *e = &w->mem[i];
		ana_gpu_device *d = device_of(g, proc, e->device);
		if (!d)
			return -1;
		if (e->op == FMT_GMOP_ALLOC) {
			d->allocs++;
			d->allocated_end_bytes += e->bytes;
		} else {
			d->frees++;
			d->allocated_end_bytes -= e->bytes < d->allocated_end_bytes ? e->bytes : d->allocated_end_bytes;
		}
		if (d->allocated_end_bytes > d->peak_allocated_bytes) {
			d->peak_allocated_bytes = d->allocated_end_bytes;
			d->peak_t_ns = e->t;
			if (d->peak_allocated_bytes > g->peak_allocated_bytes) {
				g->peak_allocated_bytes = d->peak_allocated_bytes;
				peak = e;
				peak_dev = (uint32_t)(d - g->devices);
			}
		}
		ana_gpu_point pt = {.t_ns = e->t, .v = {d->allocated_end_bytes}};
		if (PUSH(d->mem, d->nmem, d->mem_cap, pt) < 0)
			return -1;
	}
	if (!peak)
		return 0;
	g->peak_device = peak_dev;
	g->peak_t_ns = peak->t;
	g->peak_node = ANA_NONE;
	/* The host call that made the peak allocation (by correlation id). */
	for (size_t i = 0; i < w->nallocapi; i++)
		if (w->allocapi[i].end == peak->corr && peak->corr) {
			*alloc = i;
			break;
		}
	return 0;
}

/* Close process proc's synchronising calls and memory, with the regions of the first and
 * of the peak allocation found in one replay of its file. Returns 0 or -1. */
static int close_process(ana_profile *p, ana_gpu *g, work *w, uint32_t proc, const fmt_file *f)
{
	size_t m = merge_sync(w), alloc;
	if (close_memory(g, w, proc, &alloc) < 0)
		return -1;
	size_t nq = (w->any_api ? m : 0) + (alloc != SIZE_MAX);
	ana_rp_at *qs = malloc((nq ? nq : 1) * sizeof *qs);
	uint32_t *node = malloc((nq ? nq : 1) * sizeof *node);
	int rc = -1;
	if (!qs || !node)
		goto out;
	size_t k = 0;
	for (size_t i = 0; w->any_api && i < m; i++, k++)
		qs[k] = (ana_rp_at){w->sync[i].tid, to_ticks(f, w->sync[i].start)};
	if (alloc != SIZE_MAX)
		qs[k] = (ana_rp_at){w->allocapi[alloc].tid, to_ticks(f, w->allocapi[alloc].start)};
	if (regions_at(p, proc, f, qs, nq, alloc != SIZE_MAX ? nq - 1 : SIZE_MAX, node) < 0)
		goto out;
	if (alloc != SIZE_MAX)
		g->peak_node = node[nq - 1];
	rc = close_sync(g, w, m, node);
out:
	free(qs);
	free(node);
	return rc;
}

static void work_reset_process(work *w)
{
	free(w->kernel_of_string);
	w->kernel_of_string = NULL;
	w->nkos = 0;
	w->nsync = w->nsyncrec = w->nmem = w->nallocapi = 0;
	w->any_api = 0;
	ana_map_clear(&w->open_of); /* range ids are per process */
	w->nopens = 0;
	w->proc = ANA_NONE;
}

int ana_gpu_end_process(ana_profile *p, uint32_t proc, const fmt_file *f)
{
	if (!f->has_gpu)
		return 0;
	work *w = W(p);
	if (!w)
		return FENNEC_ENOMEM;
	ana_gpu *g = p->gpu;
	const fmt_gpu_info *in = &f->gpu;
	if (!g->cupti_version && in->cupti_version) {
		g->cupti_version = in->cupti_version;
		g->clock = in->clock;
		g->offset_error_ns = in->offset_error_ns;
	} else if (!g->cupti_version && !g->records)
		g->clock = in->clock;
	g->kernels_only |= (in->flags & FMT_GPU_KERNELS_ONLY) != 0;
	g->records += in->records;
	g->dropped += in->dropped;
	g->cupti_dropped += in->cupti_dropped;
	g->unknown += in->unknown;
	g->nvtx_dropped += f->gpux_dropped;
	for (size_t i = 0; i < w->nopens; i++)
		g->nvtx_open += w->opens[i].end != ANA_NONE;
	for (uint32_t i = 0; i < f->ngpu_devices; i++) /* described, even if idle */
		if (!device_of(g, proc, f->gpu_devices[i].id))
			return FENNEC_ENOMEM;
	for (uint32_t i = 0; i < g->ndevices; i++)
		if (g->devices[i].process == proc)
			g->devices[i].info = fmt_gpu_device_get(f, g->devices[i].id);
	w->proc = proc;
	int rc = close_process(p, g, w, proc, f) < 0 ? FENNEC_ENOMEM : 0;
	if (in->cupti_dropped)
		ana_warn(p, "%s: CUPTI dropped %llu GPU activity records (its buffers were full); GPU totals are low",
			 f->path, (unsigned long long)in->cupti_dropped);
	if (in->dropped)
		ana_warn(p, "%s: %llu GPU records were lost (the writer fell behind, or CUPTI could not complete them "
			    "at the end)", f->path, (unsigned long long)in->dropped);
	work_reset_process(w);
	return rc;
}

void ana_gpu_discard(ana_profile *p, uint32_t proc)
{
	ana_gpu *g = p->gpu;
	if (!g)
		return;
	/* Rows of a process that failed to load stay out of every table: drop its streams'
	 * intervals and counts (the kernel rows it touched keep its counts: a skipped file is
	 * warned about, and its partial GPU data is rarely worth a second pass). */
	for (uint32_t i = 0; i < g->nstreams; i++)
		if (g->streams[i].process == proc) {
			free(g->streams[i].iv.v);
			g->streams[i].iv = (ana_u64vec){0};
		}
	if (g->priv)
		work_reset_process(g->priv);
}

/* ---- finishing ---- */

static int cmp_psync(const void *a, const void *b)
{
	const psync *x = a, *y = b;
	if (x->proc != y->proc)
		return x->proc < y->proc ? -1 : 1;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	return (x->start > y->start) - (x->start < y->start);
}

static int cmp_sync_stack(const void *a, const void *b)
{
	const ana_gpu_sync_stack *x = a, *y = b;
	if (x->samples != y->samples)
		return x->samples < y->samples ? 1 : -1;
	return (x->stack > y->stack) - (x->stack < y->stack);
}

/* The host stacks that wait: samples whose thread was inside one of its merged
 * synchronising intervals at the sample's time, by sequence of functions (one stack
 * represents them). Needs symbolised samples. */
static int sync_stacks(ana_profile *p, ana_gpu *g, work *w)
{
	if (!w->nallsync || !p->smp.nsamples)
		return 0;
	qsort(w->allsync, w->nallsync, sizeof *w->allsync, cmp_psync);
	ana_map of = {0};
	int rc = 0;
	for (size_t i = 0; i < p->smp.nsamples && !rc; i++) {
		const ana_sample *x = &p->smp.samples[i];
		if (x->thread >= p->nthreads || x->stack == ANA_NONE || x->stack >= p->smp.nstacks)
			continue;
		psync key = {p->threads[x->thread].process, p->threads[x->thread].tid, x->t_ns, 0};
		size_t lo = 0, hi = w->nallsync; /* the last interval starting at or before the sample */
		while (lo < hi) {
			size_t mid = (lo + hi) / 2;
			if (cmp_psync(&w->allsync[mid], &key) <= 0)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (!lo)
			continue;
		const psync *s = &w->allsync[lo - 1];
		if (s->proc != key.proc || s->tid != key.tid || x->t_ns > s->end)
			continue;
		/* by function sequence: stacks that differ only in lines or addresses are one */
		const ana_stack *st = &p->smp.stacks[x->stack];
		uint64_t h = st->n;
		for (uint32_t j = 0; j < st->n; j++)
			h = ana_hash64(h ^ p->smp.locs[st->locs[j]].func);
		uint32_t k = ana_map_get(&of, h);
		if (k == ANA_NONE) {
			if (ana_grow(&g->sync_stacks, &g->sync_stacks_cap, g->nsync_stacks, sizeof *g->sync_stacks) < 0 ||
			    ana_map_put(&of, h, g->nsync_stacks) < 0) {
				rc = -1;
				break;
			}
			k = g->nsync_stacks++;
			g->sync_stacks[k] = (ana_gpu_sync_stack){x->stack, 0};
		}
		g->sync_stacks[k].samples += x->weight;
		g->sync_samples += x->weight;
	}
	ana_map_clear(&of);
	if (g->nsync_stacks > 1)
		qsort(g->sync_stacks, g->nsync_stacks, sizeof *g->sync_stacks, cmp_sync_stack);
	return rc;
}

static void work_free_nvtx(work *w)
{
	free(w->allsync);
	ana_map_clear(&w->nvtx_range_of);
	ana_map_clear(&w->nvtx_mark_of);
	ana_map_clear(&w->nvtx_seen);
	ana_map_clear(&w->open_of);
	free(w->opens);
}

/* The analysis's working state: its maps and arrays, then itself. */
static void work_free(work *w)
{
	ana_map_clear(&w->kernel_of_name);
	ana_map_clear(&w->stream_of);
	ana_map_clear(&w->kstream_of);
	ana_map_clear(&w->config_of);
	ana_map_clear(&w->timer_of);
	free(w->configs);
	free(w->kernel_of_string);
	free(w->sync);
	free(w->syncrec);
	free(w->mem);
	free(w->allocapi);
	work_free_nvtx(w);
	free(w);
}

typedef struct iv2 {
	uint64_t s, e;
} iv2;

static int cmp_iv(const void *a, const void *b)
{
	const iv2 *x = a, *y = b;
	return (x->s > y->s) - (x->s < y->s);
}

/* Sort and merge a stream's intervals in place; returns their number, sets busy. */
static size_t merge(ana_gpu_stream *s)
{
	iv2 *v = (iv2 *)s->iv.v;
	size_t n = s->iv.n / 2, m = 0;
	if (n > 1)
		qsort(v, n, sizeof *v, cmp_iv);
	for (size_t i = 0; i < n; i++) {
		if (m && v[i].s <= v[m - 1].e) {
			if (v[i].e > v[m - 1].e)
				v[m - 1].e = v[i].e;
		} else
			v[m++] = v[i];
	}
	s->busy_ns = 0;
	for (size_t i = 0; i < m; i++)
		s->busy_ns += v[i].e - v[i].s;
	s->iv.n = 2 * m;
	return m;
}

typedef struct edge {
	uint64_t t;
	int d;
} edge;

static int cmp_edge(const void *a, const void *b)
{
	const edge *x = a, *y = b;
	if (x->t != y->t)
		return x->t < y->t ? -1 : 1;
	return x->d - y->d; /* ends first: touching intervals do not overlap */
}

/* Busy time (one stream or more) and overlap (two or more) of a device. */
static int sweep(ana_gpu *g, ana_gpu_device *d)
{
	size_t n = 0;
	for (uint32_t i = 0; i < g->nstreams; i++)
		if (g->streams[i].process == d->process && g->streams[i].device == d->id)
			n += g->streams[i].iv.n;
	edge *e = malloc((n ? n : 1) * sizeof *e);
	if (!e)
		return -1;
	size_t k = 0;
	for (uint32_t i = 0; i < g->nstreams; i++) {
		ana_gpu_stream *s = &g->streams[i];
		if (s->process != d->process || s->device != d->id)
			continue;
		d->streams++;
		d->stream_busy_ns += s->busy_ns;
		for (size_t j = 0; j < s->iv.n; j += 2) {
			e[k++] = (edge){s->iv.v[j], +1};
			e[k++] = (edge){s->iv.v[j + 1], -1};
		}
	}
	qsort(e, k, sizeof *e, cmp_edge);
	int level = 0;
	for (size_t i = 0; i < k; i++) {
		if (i && level >= 1)
			d->busy_ns += e[i].t - e[i - 1].t;
		if (i && level >= 2)
			d->overlap_ns += e[i].t - e[i - 1].t;
		level += e[i].d;
	}
	free(e);
	return 0;
}

static void nvml_summary(ana_gpu *g, ana_gpu_device *d)
{
	double sum[FMT_NV_COUNT] = {0};
	uint64_t cnt[FMT_NV_COUNT] = {0};
	for (size_t i = 0; i < d->nnvml; i++) {
		const ana_gpu_point *pt = &d->nvml[i];
		for (int f = 0; f < FMT_NV_COUNT; f++)
			if (pt->present >> f & 1) {
				sum[f] += (double)pt->v[f];
				cnt[f]++;
			}
		if (pt->present >> FMT_NV_MEM_USED & 1 && pt->v[FMT_NV_MEM_USED] > d->mem_used_max_bytes)
			d->mem_used_max_bytes = pt->v[FMT_NV_MEM_USED];
		if (pt->present >> FMT_NV_MEM_TOTAL & 1)
			d->mem_total_bytes = pt->v[FMT_NV_MEM_TOTAL];
		if (pt->present >> FMT_NV_POWER_MW & 1 && pt->v[FMT_NV_POWER_MW] > d->power_mw_max)
			d->power_mw_max = pt->v[FMT_NV_POWER_MW];
		if (pt->present >> FMT_NV_TEMP_C & 1 && pt->v[FMT_NV_TEMP_C] > d->temperature_max_c)
			d->temperature_max_c = pt->v[FMT_NV_TEMP_C];
	}
	d->sm_pct_mean = cnt[FMT_NV_SM_PCT] ? sum[FMT_NV_SM_PCT] / (double)cnt[FMT_NV_SM_PCT] : NAN;
	d->mem_pct_mean = cnt[FMT_NV_MEM_PCT] ? sum[FMT_NV_MEM_PCT] / (double)cnt[FMT_NV_MEM_PCT] : NAN;
	d->power_mw_mean = cnt[FMT_NV_POWER_MW] ? sum[FMT_NV_POWER_MW] / (double)cnt[FMT_NV_POWER_MW] : NAN;
	if (d->mem_used_max_bytes > g->peak_reserved_bytes)
		g->peak_reserved_bytes = d->mem_used_max_bytes;
}

static int cmp_point(const void *a, const void *b);

/* NVLink traffic from the cumulative counters; a counter that went down (a driver reload)
 * starts again from there. */
static void nvlink_summary(ana_gpu_device *d)
{
	ana_gpu_nvlink *l = &d->link;
	*l = (ana_gpu_nvlink){.samples = d->nnvlink, .tx_bytes_per_s = NAN, .rx_bytes_per_s = NAN,
			      .tx_max_bytes_per_s = NAN, .rx_max_bytes_per_s = NAN};
	if (d->nnvlink > 1)
		qsort(d->nvlink, d->nnvlink, sizeof *d->nvlink, cmp_point);
	for (size_t i = 1; i < d->nnvlink; i++) {
		const ana_gpu_point *a = &d->nvlink[i - 1], *b = &d->nvlink[i];
		uint64_t dtx = b->v[0] >= a->v[0] ? b->v[0] - a->v[0] : 0, drx = b->v[1] >= a->v[1] ? b->v[1] - a->v[1] : 0;
		l->tx_bytes += dtx;
		l->rx_bytes += drx;
		if (b->t_ns > a->t_ns) {
			double s = (double)(b->t_ns - a->t_ns) / 1e9, tx = (double)dtx / s, rx = (double)drx / s;
			if (isnan(l->tx_max_bytes_per_s) || tx > l->tx_max_bytes_per_s)
				l->tx_max_bytes_per_s = tx;
			if (isnan(l->rx_max_bytes_per_s) || rx > l->rx_max_bytes_per_s)
				l->rx_max_bytes_per_s = rx;
		}
	}
	if (d->nnvlink > 1 && d->nvlink[d->nnvlink - 1].t_ns > d->nvlink[0].t_ns) {
		double s = (double)(d->nvlink[d->nnvlink - 1].t_ns - d->nvlink[0].t_ns) / 1e9;
		l->tx_bytes_per_s = (double)l->tx_bytes / s;
		l->rx_bytes_per_s = (double)l->rx_bytes / s;
	}
}

static int cmp_nvtx_range(const void *a, const void *b)
{
	const ana_nvtx_range *x = a, *y = b;
	return (x->total_ns < y->total_ns) - (x->total_ns > y->total_ns);
}

static int cmp_nvtx_mark(const void *a, const void *b)
{
	const ana_nvtx_mark *x = a, *y = b;
	return (x->count < y->count) - (x->count > y->count);
}

static int cmp_point(const void *a, const void *b)
{
	const ana_gpu_point *x = a, *y = b;
	return (x->t_ns > y->t_ns) - (x->t_ns < y->t_ns);
}

/* Occupancy per kernel: each configuration on its device, weighted by its time. */
static void occupancy(ana_gpu *g, work *w)
{
	double *num = calloc(g->nkernels ? g->nkernels : 1, sizeof *num);
	double *den = calloc(g->nkernels ? g->nkernels : 1, sizeof *den);
	uint64_t *best = calloc(g->nkernels ? g->nkernels : 1, sizeof *best);
	for (uint32_t k = 0; k < g->nkernels; k++) {
		g->kernels[k].occupancy_pct = NAN;
		g->kernels[k].limiter = "";
	}
	if (!num || !den || !best)
		goto out;
	for (size_t i = 0; i < w->nconfigs; i++) {
		const config *c = &w->configs[i];
		const fmt_gpu_device *info = NULL;
		for (uint32_t j = 0; j < g->ndevices && !info; j++)
			if (g->devices[j].id == c->device && g->devices[j].info)
				info = g->devices[j].info;
		const char *lim = "";
		double occ = ana_gpu_occupancy(info, c->threads, c->regs, c->smem, &lim);
		if (occ < 0)
			continue;
		double wgt = c->ns ? (double)c->ns : 1; /* zero-length kernels still count, a little */
		num[c->kernel] += occ * wgt;
		den[c->kernel] += wgt;
		if (c->ns >= best[c->kernel]) {
			best[c->kernel] = c->ns;
			g->kernels[c->kernel].limiter = lim;
		}
	}
	for (uint32_t k = 0; k < g->nkernels; k++)
		if (den[k] > 0)
			g->kernels[k].occupancy_pct = 100 * num[k] / den[k];
out:
	free(num);
	free(den);
	free(best);
}

typedef struct korder {
	uint64_t total_ns;
	uint32_t idx;
} korder;

static int cmp_korder(const void *a, const void *b)
{
	const korder *x = a, *y = b;
	if (x->total_ns != y->total_ns)
		return x->total_ns < y->total_ns ? 1 : -1;
	return (x->idx > y->idx) - (x->idx < y->idx);
}

/* Kernels by total time, descending; their stream rows follow them. */
static int sort_kernels(ana_gpu *g)
{
	uint32_t n = g->nkernels;
	korder *o = malloc((n ? n : 1) * sizeof *o);
	uint32_t *to = malloc((n ? n : 1) * sizeof *to);
	ana_gpu_kernel *sorted = malloc((n ? n : 1) * sizeof *sorted);
	if (!o || !to || !sorted) {
		free(o);
		free(to);
		free(sorted);
		return -1;
	}
	for (uint32_t k = 0; k < n; k++)
		o[k] = (korder){g->kernels[k].total_ns, k};
	qsort(o, n, sizeof *o, cmp_korder);
	for (uint32_t k = 0; k < n; k++) {
		sorted[k] = g->kernels[o[k].idx];
		to[o[k].idx] = k;
	}
	for (uint32_t i = 0; i < g->nkstreams; i++)
		g->kstreams[i].kernel = to[g->kstreams[i].kernel];
	if (n)
		memcpy(g->kernels, sorted, n * sizeof *sorted);
	free(o);
	free(to);
	free(sorted);
	return 0;
}

static int cmp_sync_region(const void *a, const void *b)
{
	const ana_gpu_sync_region *x = a, *y = b;
	return (x->ns < y->ns) - (x->ns > y->ns);
}

int ana_gpu_finish(ana_profile *p)
{
	ana_gpu *g = p->gpu;
	if (!g)
		return 0;
	work *w = g->priv;
	uint64_t wall_all = 0;
	for (uint32_t i = 0; i < g->nstreams; i++)
		merge(&g->streams[i]);
	for (uint32_t i = 0; i < g->ndevices; i++) {
		ana_gpu_device *d = &g->devices[i];
		if (sweep(g, d) < 0)
			return FENNEC_ENOMEM;
		if (d->first_ns == UINT64_MAX)
			d->first_ns = d->last_ns = 0;
		uint64_t wall = d->process < p->nprocs ? p->procs[d->process].wall_ns : 0;
		d->busy_pct = wall ? 100.0 * (double)d->busy_ns / (double)wall : NAN;
		uint64_t window = d->last_ns > d->first_ns ? d->last_ns - d->first_ns : 0;
		d->window_busy_pct = window ? 100.0 * (double)d->busy_ns / (double)window : NAN;
		if (d->nnvml > 1)
			qsort(d->nvml, d->nnvml, sizeof *d->nvml, cmp_point);
		nvml_summary(g, d);
		nvlink_summary(d);
		g->kernel_ns += d->kernel_ns;
		g->memcpy_ns += d->memcpy_ns;
		g->memset_ns += d->memset_ns;
		g->busy_ns += d->busy_ns;
		if (d->kernel_ns || d->memcpy_ns || d->memset_ns)
			wall_all += wall;
	}
	g->busy_pct = wall_all ? 100.0 * (double)g->busy_ns / (double)wall_all : NAN;
	for (uint32_t i = 0; i < g->nstreams; i++) {
		ana_gpu_stream *s = &g->streams[i];
		const ana_gpu_device *d = NULL;
		for (uint32_t j = 0; j < g->ndevices && !d; j++)
			if (g->devices[j].process == s->process && g->devices[j].id == s->device)
				d = &g->devices[j];
		uint64_t window = d && d->last_ns > d->first_ns ? d->last_ns - d->first_ns : 0;
		s->busy_pct = window ? 100.0 * (double)s->busy_ns / (double)window : NAN;
	}
	for (uint32_t k = 0; k < g->nkernels; k++) {
		ana_gpu_kernel *x = &g->kernels[k];
		x->mean_ns = x->count ? (double)x->total_ns / (double)x->count : NAN;
		x->gpu_time_pct = g->kernel_ns ? 100.0 * (double)x->total_ns / (double)g->kernel_ns : 0;
		if (!x->count)
			x->min_ns = 0;
	}
	if (w)
		occupancy(g, w);
	if (w && sync_stacks(p, g, w) < 0)
		return FENNEC_ENOMEM;
	if (sort_kernels(g) < 0)
		return FENNEC_ENOMEM;
	for (uint32_t c = 0; c <= FMT_CPY_MAX; c++) {
		ana_gpu_copy *x = &g->copies[c];
		x->bandwidth_bytes_per_s = x->total_ns ? (double)x->bytes * 1e9 / (double)x->total_ns : NAN;
		x->pageable_pct = x->bytes ? 100.0 * (double)x->pageable_bytes / (double)x->bytes : 0;
	}
	if (g->nsync_regions > 1)
		qsort(g->sync_regions, g->nsync_regions, sizeof *g->sync_regions, cmp_sync_region);
	for (uint32_t i = 0; i < g->nnvtx_ranges; i++) {
		ana_nvtx_range *x = &g->nvtx_ranges[i];
		x->mean_ns = x->count ? (double)x->total_ns / (double)x->count : NAN;
	}
	if (g->nnvtx_ranges > 1)
		qsort(g->nvtx_ranges, g->nnvtx_ranges, sizeof *g->nvtx_ranges, cmp_nvtx_range);
	if (g->nnvtx_marks > 1)
		qsort(g->nvtx_marks, g->nnvtx_marks, sizeof *g->nvtx_marks, cmp_nvtx_mark);
	if (w) {
		work_free(w);
		g->priv = NULL;
	}
	for (uint32_t i = 0; i < g->nstreams; i++) {
		free(g->streams[i].iv.v);
		g->streams[i].iv = (ana_u64vec){0};
	}
	return 0;
}

void ana_gpu_free(ana_profile *p)
{
	ana_gpu *g = p->gpu;
	if (!g)
		return;
	if (g->priv) {
		work *w = g->priv;
		work_free(w);
	}
	for (uint32_t i = 0; i < g->ndevices; i++) {
		free(g->devices[i].mem);
		free(g->devices[i].nvml);
		free(g->devices[i].nvlink);
	}
	for (uint32_t i = 0; i < g->nstreams; i++)
		free(g->streams[i].iv.v);
	free(g->devices);
	free(g->kernels);
	free(g->kstreams);
	free(g->streams);
	free(g->sync_regions);
	free(g->timers);
	free(g->nvtx_ranges);
	free(g->nvtx_marks);
	free(g->sync_stacks);
	free(g);
	p->gpu = NULL;
}

/* ---- occupancy ---- */

static uint32_t div_up(uint32_t a, uint32_t b) { return (a + b - 1) / b; }

double ana_gpu_occupancy(const fmt_gpu_device *d, uint32_t threads, uint32_t regs, uint32_t smem,
			 const char **limiter)
{
	if (limiter)
		*limiter = "";
	if (!d || !d->max_warps_per_sm || !d->warp_size || !threads)
		return -1;
	uint32_t warps = div_up(threads, d->warp_size);
	uint32_t by_warps = d->max_warps_per_sm / warps;
	uint32_t by_blocks = d->max_blocks_per_sm ? d->max_blocks_per_sm : by_warps;
	uint32_t by_regs = UINT32_MAX, by_smem = UINT32_MAX;
	if (regs && d->regs_per_sm) {
		uint32_t per_warp = div_up(regs * d->warp_size, 256) * 256;
		if (d->regs_per_block && per_warp * warps > d->regs_per_block)
			by_regs = 0; /* the launch would fail: too many registers for a block */
		else
			by_regs = (d->regs_per_sm / per_warp / 4 * 4) / warps;
	}
	if (d->smem_per_sm) {
		uint32_t need = div_up(smem, 128) * 128 + (d->cc_major >= 8 ? 1024 : 0);
		if (d->smem_per_block && smem > d->smem_per_block)
			by_smem = 0;
		else if (need)
			by_smem = d->smem_per_sm / need;
	}
	/* the binding limit; ties go to the first in this order */
	uint32_t lim[] = {by_warps, by_regs, by_smem, by_blocks};
	const char *names[] = {"warps", "registers", "shared memory", "blocks"};
	uint32_t best = 0;
	for (uint32_t i = 1; i < 4; i++)
		if (lim[i] < lim[best])
			best = i;
	if (limiter)
		*limiter = names[best];
	double occ = (double)lim[best] * warps / d->max_warps_per_sm;
	return occ > 1 ? 1 : occ;
}

const char *ana_gpu_frame(const ana_profile *p, uint32_t stack, uint32_t i)
{
	if (stack >= p->smp.nstacks || i >= p->smp.stacks[stack].n)
		return NULL;
	const ana_stack *s = &p->smp.stacks[stack];
	return p->names[p->smp.funcs[p->smp.locs[s->locs[s->n - 1 - i]].func].name];
}

uint32_t ana_gpu_sync_frame(const ana_profile *p, uint32_t stack)
{
	const char *name;
	uint32_t at = 0;
	for (uint32_t i = 0; (name = ana_gpu_frame(p, stack, i)); i++) {
		char base[256];
		api_base(name, base, sizeof base);
		if (is_sync_call(base))
			at = i; /* the outermost: cudaDeviceSynchronize rather than the cuCtxSynchronize inside it */
	}
	return at;
}

void ana_gpu_stack_text(const ana_profile *p, uint32_t stack, uint32_t max_frames, char *buf, size_t n)
{
	size_t k = 0;
	const char *name;
	buf[0] = 0;
	uint32_t from = ana_gpu_sync_frame(p, stack);
	for (uint32_t i = from; i < from + max_frames && (name = ana_gpu_frame(p, stack, i)) && k + 1 < n; i++) {
		int w = snprintf(buf + k, n - k, "%s%s", i > from ? " < " : "", name);
		if (w < 0)
			break;
		k += (size_t)w;
	}
	if (k >= n && n > 4)
		memcpy(buf + n - 4, "...", 4);
}

const char *ana_gpu_copy_name(unsigned kind)
{
	static const char *n[] = {"unknown", "HtoD", "DtoH", "HtoA", "AtoH", "AtoA", "AtoD", "DtoA", "DtoD", "HtoH", "PtoP"};
	return kind <= FMT_CPY_MAX ? n[kind] : "unknown";
}

const char *ana_gpu_clock_name(unsigned clock)
{
	return clock == FMT_GCLK_MONO ? "monotonic" : clock == FMT_GCLK_OFFSET ? "offset" : "none";
}

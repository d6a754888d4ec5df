/*
 * gpu_rules.c - the GPU rules of docs/bottlenecks.md (cpu_gpu_sync, gpu_idle,
 * small_kernels, pageable_memcpy, gpu_memory_leak, stream_serialisation) over the GPU
 * model (analyze/gpu.h). Called by ana_rules; thresholds and severities are the ones the
 * document states.
 */
#include "analyze/aggregate.h"
#include "analyze/gpu.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

#define SMALL_KERNEL_NS 10000      /* "a few microseconds": a kernel mean under 10 us */
#define LEAK_MIN_BYTES_PER_STEP (1 << 20)

/* Wall time of the processes with GPU work: the base of every "share of the run". */
static double gpu_wall_ns(const ana_profile *p, const ana_gpu *g)
{
	double w = 0;
	for (uint32_t i = 0; i < p->nprocs; i++)
		for (uint32_t k = 0; k < g->ndevices; k++)
			if (g->devices[k].process == i && g->devices[k].busy_ns) {
				w += (double)p->procs[i].wall_ns;
				break;
			}
	return w;
}

static const char *dev_name(const ana_gpu_device *d)
{
	return d->info && d->info->name && *d->info->name ? d->info->name : "GPU";
}

/*
 * cpu_gpu_sync: host threads blocked in synchronising calls (device, stream and event
 * synchronisation, synchronous copies) for at least the threshold share of the GPU's busy
 * time (--gpu-sync-threshold, default 10 %) and at least 1 ms.
 */
static void rule_cpu_gpu_sync(ana_profile *p, const ana_gpu *g)
{
	double thr = p->opt.gpu_sync_threshold_pct > 0 ? p->opt.gpu_sync_threshold_pct : 10;
	if (!g->busy_ns || g->sync_ns < 1000000)
		return;
	double share = 100.0 * (double)g->sync_ns / (double)g->busy_ns;
	if (share < thr)
		return;
	ana_finding *f = ana_finding_add(p, "cpu_gpu_sync", share >= 50 ? ANA_HIGH : share >= 25 ? ANA_MEDIUM : ANA_LOW);
	if (!f)
		return;
	char a[32], b[32], where[512] = "";
	const ana_gpu_sync_region *top = g->nsync_regions ? &g->sync_regions[0] : NULL;
	if (top && top->node != ANA_NONE)
		snprintf(where, sizeof where, "; %s of it in %s (%llu calls)", ana_fmt_ns((double)top->ns, b, sizeof b),
			 p->nodes[top->node].path, (unsigned long long)top->calls);
	f->subject = ana_strf("%s", top && top->node != ANA_NONE ? p->nodes[top->node].path : "host-GPU synchronisation");
	/* The host stack sampled most often while waiting, when samples were taken. */
	char stack[512] = "";
	if (g->nsync_stacks && g->sync_samples) {
		char frames[400];
		ana_gpu_stack_text(p, g->sync_stacks[0].stack, 6, frames, sizeof frames);
		snprintf(stack, sizeof stack, "; the waiting host stack sampled most (%.0f%% of the samples in those calls): %s",
			 100.0 * (double)g->sync_stacks[0].samples / (double)g->sync_samples, frames);
	}
	f->evidence = ana_strf("host threads waited %s in %llu synchronising calls or synchronous copies, %.0f%% of the "
			       "GPU's busy time%s%s",
			       ana_fmt_ns((double)g->sync_ns, a, sizeof a), (unsigned long long)g->sync_calls, share, where, stack);
	if (g->sync_samples) {
		ana_finding_num(f, "sync_samples", (double)g->sync_samples);
		ana_finding_num(f, "top_stack_pct", 100.0 * (double)g->sync_stacks[0].samples / (double)g->sync_samples);
	}
	ana_finding_num(f, "sync_ns", (double)g->sync_ns);
	ana_finding_num(f, "sync_calls", (double)g->sync_calls);
	ana_finding_num(f, "share_of_gpu_busy_pct", share);
	ana_finding_num(f, "threshold_pct", thr);
	char caller[300] = "";
	if (g->nsync_stacks && g->sync_samples) /* where the wait is called from: the JSON has the whole stack */
	{
		uint32_t st = g->sync_stacks[0].stack, at = ana_gpu_sync_frame(p, st);
		const char *from = ana_gpu_frame(p, st, at ? at + 1 : 0);
		if (from)
			snprintf(caller, sizeof caller, " (most of the sampled waits are called from %s)", from);
	}
	f->recommendation = ana_strf("Let the host run ahead of the GPU%s%s%s: drop cudaDeviceSynchronize and "
				     "cudaStreamSynchronize from the loop, replace synchronous cudaMemcpy with "
				     "cudaMemcpyAsync from pinned memory, read results back once per step or less (in "
				     "PyTorch: avoid .item(), .cpu(), print(tensor) and bool(tensor) inside the step), and "
				     "wait on events only where the host needs the data.",
				     top && top->node != ANA_NONE ? " in " : "", top && top->node != ANA_NONE ? p->nodes[top->node].path : "",
				     caller);
	double wall = gpu_wall_ns(p, g);
	f->expected_gain_pct = wall > 0 ? fmin(100, 100.0 * (double)g->sync_ns / wall) : 0;
}

/*
 * gpu_idle: a device idle for 30 % or more of its activity window (first to last GPU work,
 * at least 10 ms) while its host was busy at least half the time (CPU time, or its busiest
 * thread's time in regions): the GPU waits for the host.
 * Launch-bound when kernel launches take more host time than the kernels' GPU time,
 * input-bound otherwise.
 */
static void rule_gpu_idle(ana_profile *p, const ana_gpu *g)
{
	for (uint32_t i = 0; i < g->ndevices; i++) {
		const ana_gpu_device *d = &g->devices[i];
		uint64_t window = d->last_ns > d->first_ns ? d->last_ns - d->first_ns : 0;
		if (window < 10000000 || !d->busy_ns)
			continue;
		const ana_process *pr = &p->procs[d->process];
		/* The host is busy when it computes (CPU time) or is inside its regions (its
		 * busiest thread's time in top-level regions: waiting for input counts too). */
		double cpu = pr->wall_ns ? (double)(pr->file.cpu_user_ns + pr->file.cpu_sys_ns) / (double)pr->wall_ns : 0;
		for (uint32_t t = 0; t < p->nthreads && pr->wall_ns; t++)
			if (p->threads[t].process == d->process)
				cpu = fmax(cpu, (double)p->threads[t].busy_ns / (double)pr->wall_ns);
		double idle = 100.0 - 100.0 * (double)d->busy_ns / (double)window;
		if (idle < 30 || cpu < 0.5)
			continue;
		int launch = g->launch_calls && g->launch_ns > g->kernel_ns;
		ana_finding *f = ana_finding_add(p, "gpu_idle", idle >= 60 ? ANA_HIGH : idle >= 40 ? ANA_MEDIUM : ANA_LOW);
		if (!f)
			return;
		char a[32], b[32], c[32];
		f->subject = ana_strf("device %u (%s) of pid %llu", d->id, dev_name(d), (unsigned long long)pr->file.pid);
		f->evidence = ana_strf("the device was idle %.0f%% of its %s of activity (busy %s) while the host was busy "
				       "%.0f%% of the time (CPU time, or time in regions)%s%s",
				       idle, ana_fmt_ns((double)window, a, sizeof a), ana_fmt_ns((double)d->busy_ns, b, sizeof b),
				       100 * cpu, launch ? "; kernel launches took more host time than the kernels took on "
							   "the GPU: " : "",
				       launch ? ana_fmt_ns((double)g->launch_ns, c, sizeof c) : "");
		ana_finding_num(f, "idle_pct", idle);
		ana_finding_num(f, "window_ns", (double)window);
		ana_finding_num(f, "busy_ns", (double)d->busy_ns);
		ana_finding_num(f, "host_busy_pct", 100 * cpu);
		ana_finding_num(f, "launch_ns", (double)g->launch_ns);
		f->recommendation = ana_strf(launch ? "The GPU is launch-bound: give it bigger kernels (larger batches, fused "
						      "operations, torch.compile) or capture the step in a CUDA graph, so that "
						      "one launch does the work of many."
						    : "The GPU is input-bound: find what the host does between GPU work (the "
						      "regions and hot functions above) and overlap it with the GPU: prepare the "
						      "next batch while this one runs (DataLoader workers, pinned memory and "
						      "non_blocking copies on a side stream), and keep pre- and post-processing "
						      "on the GPU.");
		f->expected_gain_pct = pr->wall_ns ? fmin(100, 100.0 * (double)(window - d->busy_ns) / (double)pr->wall_ns) : 0;
	}
}

/*
 * small_kernels: at least 1000 launches of kernels averaging under 10 us, and at least half
 * of all launches: launch overhead (a few us of host time each) and the GPU's ramp up and
 * down dominate such kernels.
 */
static void rule_small_kernels(ana_profile *p, const ana_gpu *g)
{
	uint64_t all = 0, small = 0, small_ns = 0;
	const ana_gpu_kernel *top = NULL;
	for (uint32_t i = 0; i < g->nkernels; i++) {
		const ana_gpu_kernel *k = &g->kernels[i];
		all += k->count;
		if (k->mean_ns < SMALL_KERNEL_NS) {
			small += k->count;
			small_ns += k->total_ns;
			if (!top || k->count > top->count)
				top = k;
		}
	}
	if (small < 1000 || 2 * small < all)
		return;
	double wall = gpu_wall_ns(p, g);
	double launch_pct = wall > 0 ? 100.0 * (double)g->launch_ns / wall : 0;
	ana_finding *f = ana_finding_add(p, "small_kernels", launch_pct >= 20 ? ANA_HIGH : ANA_MEDIUM);
	if (!f)
		return;
	char a[32], b[32], nm[160];
	snprintf(nm, sizeof nm, "%s", p->names[top->name]);
	f->subject = ana_strf("%llu kernel launches under 10 us", (unsigned long long)small);
	f->evidence = ana_strf("%llu of %llu kernel launches (%.0f%%) were of kernels averaging under 10 us, %s of GPU "
			       "time in all; the most launched: %s (%llu launches, mean %s)%s",
			       (unsigned long long)small, (unsigned long long)all, 100.0 * (double)small / (double)all,
			       ana_fmt_ns((double)small_ns, a, sizeof a), nm, (unsigned long long)top->count,
			       ana_fmt_ns(top->mean_ns, b, sizeof b), g->launch_calls ? "" : " (no API records: launch cost unknown)");
	ana_finding_num(f, "small_launches", (double)small);
	ana_finding_num(f, "launches", (double)all);
	ana_finding_num(f, "small_kernel_ns", (double)small_ns);
	ana_finding_num(f, "launch_ns", (double)g->launch_ns);
	f->recommendation = ana_strf("Do more per launch: fuse the small kernels (torch.compile, fused optimizers and "
				     "layers, custom kernels), batch the work they do, or capture the sequence in a CUDA "
				     "graph (torch.cuda.graphs, cudaGraphLaunch) so that one launch replaces many.");
	f->expected_gain_pct = fmin(100, launch_pct);
}

/*
 * pageable_memcpy: at least 10 MB copied between the host and a device from or to pageable
 * memory, half or more of the host-device bytes. The driver stages such copies through a
 * pinned buffer: slower, and the host waits even for cudaMemcpyAsync.
 */
static void rule_pageable_memcpy(ana_profile *p, const ana_gpu *g)
{
	const ana_gpu_copy *h = &g->copies[FMT_CPY_HTOD], *d = &g->copies[FMT_CPY_DTOH];
	uint64_t bytes = h->bytes + d->bytes, pageable = h->pageable_bytes + d->pageable_bytes;
	if (pageable < 10000000 || 2 * pageable < bytes)
		return;
	/* time of the pageable copies, apportioned by bytes within each direction */
	double ns = (h->bytes ? (double)h->total_ns * (double)h->pageable_bytes / (double)h->bytes : 0) +
		    (d->bytes ? (double)d->total_ns * (double)d->pageable_bytes / (double)d->bytes : 0);
	double wall = gpu_wall_ns(p, g);
	double pct = wall > 0 ? 100.0 * ns / wall : 0;
	ana_finding *f = ana_finding_add(p, "pageable_memcpy", pct >= 10 ? ANA_HIGH : ANA_MEDIUM);
	if (!f)
		return;
	char a[32], b[32], c[32];
	double bw = ns > 0 ? (double)pageable * 1e9 / ns : NAN;
	f->subject = ana_strf("%s of pageable host-device copies", ana_fmt_bytes((double)pageable, a, sizeof a));
	f->evidence = ana_strf("%s of %s copied between host and device (%.0f%%) came from or went to pageable memory, "
			       "in %s (%s/s)",
			       a, ana_fmt_bytes((double)bytes, b, sizeof b), 100.0 * (double)pageable / (double)bytes,
			       ana_fmt_ns(ns, c, sizeof c), isfinite(bw) ? ana_fmt_bytes(bw, b, sizeof b) : "-");
	ana_finding_num(f, "pageable_bytes", (double)pageable);
	ana_finding_num(f, "bytes", (double)bytes);
	ana_finding_num(f, "pageable_ns", ns);
	f->recommendation = ana_strf("Pin the host buffers that go to or come from the GPU (cudaMallocHost or "
				     "cudaHostRegister; in PyTorch DataLoader(pin_memory=True) or tensor.pin_memory()) and "
				     "copy with cudaMemcpyAsync / .to(device, non_blocking=True), so the copies run at full "
				     "bandwidth and overlap with compute.");
	f->expected_gain_pct = fmin(100, pct / 2); /* pinned copies are about twice as fast */
}

/* Allocated bytes of device d at time t (its timeline is in time order). */
static double allocated_at(const ana_gpu_device *d, uint64_t t)
{
	double v = 0;
	for (size_t i = 0; i < d->nmem && d->mem[i].t_ns <= t; i++)
		v = (double)d->mem[i].v[0];
	return v;
}

/*
 * gpu_memory_leak: a device's allocated bytes at the end of each step (of the first
 * process) grow by at least 1 MiB per step, fitted over 5 steps or more with r^2 >= 0.8.
 */
static void rule_gpu_memory_leak(ana_profile *p, const ana_gpu *g)
{
	size_t n = p->step_start_ns.n;
	if (n < 5 || p->step_ns.n < n)
		return;
	for (uint32_t i = 0; i < g->ndevices; i++) {
		const ana_gpu_device *d = &g->devices[i];
		if (d->process != 0 || d->nmem < 2)
			continue;
		double sx = 0, sy = 0, sxx = 0, sxy = 0, syy = 0;
		for (size_t k = 0; k < n; k++) {
			double x = (double)k, y = allocated_at(d, p->step_start_ns.v[k] + p->step_ns.v[k]);
			sx += x, sy += y, sxx += x * x, sxy += x * y, syy += y * y;
		}
		double cx = sxx - sx * sx / (double)n, cy = syy - sy * sy / (double)n, cxy = sxy - sx * sy / (double)n;
		if (cx <= 0 || cy <= 0)
			continue;
		double slope = cxy / cx, r2 = cxy * cxy / (cx * cy);
		if (slope < LEAK_MIN_BYTES_PER_STEP || r2 < 0.8)
			continue;
		double grown = slope * (double)(n - 1);
		ana_finding *f = ana_finding_add(p, "gpu_memory_leak", grown >= 0.25 * (double)d->peak_allocated_bytes ? ANA_HIGH : ANA_MEDIUM);
		if (!f)
			return;
		char a[32], b[32];
		f->subject = ana_strf("device %u (%s)", d->id, dev_name(d));
		f->evidence = ana_strf("allocated GPU memory grew %s per step over %zu steps (r^2 %.2f), %s in all; %s still "
				       "allocated at the end",
				       ana_fmt_bytes(slope, a, sizeof a), n, r2, ana_fmt_bytes(grown, b, sizeof b),
				       ana_fmt_bytes((double)d->allocated_end_bytes, b, sizeof b));
		ana_finding_num(f, "slope_bytes_per_step", slope);
		ana_finding_num(f, "r2", r2);
		ana_finding_num(f, "steps", (double)n);
		ana_finding_num(f, "allocated_end_bytes", (double)d->allocated_end_bytes);
		f->recommendation = ana_strf("Something keeps device memory from one step to the next: tensors appended to a "
					     "list across steps (store loss.item(), not loss, which keeps its graph), caches "
					     "keyed by step or shape, or buffers allocated per step and never freed. Free them "
					     "(del, cudaFree) or reuse one buffer; the run will otherwise end in out-of-memory.");
		f->expected_gain_pct = 0;
		f->expected_gain_bytes = grown;
	}
}

/*
 * stream_serialisation: a device whose work ran on two or more streams, each busy at least
 * 1 ms, that overlapped for less than 5 % of the busier-but-one stream's time: streams that
 * could run concurrently ran one after the other.
 */
static void rule_stream_serialisation(ana_profile *p, const ana_gpu *g)
{
	for (uint32_t i = 0; i < g->ndevices; i++) {
		const ana_gpu_device *d = &g->devices[i];
		uint64_t first = 0, second = 0;
		uint32_t busy_streams = 0;
		for (uint32_t s = 0; s < g->nstreams; s++) {
			const ana_gpu_stream *x = &g->streams[s];
			if (x->process != d->process || x->device != d->id || x->busy_ns < 1000000)
				continue;
			busy_streams++;
			if (x->busy_ns > first) {
				second = first;
				first = x->busy_ns;
			} else if (x->busy_ns > second)
				second = x->busy_ns;
		}
		if (busy_streams < 2 || (double)d->overlap_ns >= 0.05 * (double)second)
			continue;
		ana_finding *f = ana_finding_add(p, "stream_serialisation", ANA_MEDIUM);
		if (!f)
			return;
		char a[32], b[32];
		f->subject = ana_strf("device %u (%s) of pid %llu", d->id, dev_name(d),
				      (unsigned long long)p->procs[d->process].file.pid);
		f->evidence = ana_strf("%u streams were each busy 1 ms or more (the second busiest %s), yet they ran at the "
				       "same time for only %s: the work was serialised",
				       busy_streams, ana_fmt_ns((double)second, a, sizeof a), ana_fmt_ns((double)d->overlap_ns, b, sizeof b));
		ana_finding_num(f, "streams", busy_streams);
		ana_finding_num(f, "overlap_ns", (double)d->overlap_ns);
		ana_finding_num(f, "second_stream_busy_ns", (double)second);
		f->recommendation = ana_strf("Let the streams run concurrently: create them with cudaStreamNonBlocking (the "
					     "legacy default stream waits for all others) or build with per-thread default "
					     "streams, copy from pinned memory (pageable copies do not overlap), and avoid calls "
					     "that synchronise the device between launches (cudaMalloc, cudaFree, synchronous "
					     "copies, cudaDeviceSynchronize).");
		double wall = (double)p->procs[d->process].wall_ns;
		f->expected_gain_pct = wall > 0 ? fmin(100, 100.0 * (double)second / wall) : 0;
	}
}

void ana_gpu_rules(ana_profile *p)
{
	const ana_gpu *g = p->gpu;
	if (!g)
		return;
	rule_cpu_gpu_sync(p, g);
	rule_gpu_idle(p, g);
	rule_small_kernels(p, g);
	rule_pageable_memcpy(p, g);
	rule_gpu_memory_leak(p, g);
	rule_stream_serialisation(p, g);
}

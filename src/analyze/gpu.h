/*
 * gpu.h - the GPU part of the analysis model (src/analyze/gpu.c, docs/gpu.md): kernel,
 * transfer and stream tables, busy time and overlap per device, GPU memory, host time in
 * synchronising calls, NVML utilisation and GPU timers, from the GPU chunks of every
 * process of a recording. Computed once here for every renderer.
 *
 * Ownership: p->gpu and everything it points to belong to the profile (ana_gpu_free).
 * Device descriptions are borrowed from the process files.
 */
#ifndef FENNEC_ANALYZE_GPU_H
#define FENNEC_ANALYZE_GPU_H

#include "analyze/analyze.h"

/* One NVML sample, or a change of allocated bytes. */
typedef struct ana_gpu_point {
	uint64_t t_ns;          /* CLOCK_MONOTONIC */
	uint64_t v[FMT_NV_COUNT]; /* NVML: the fields of `present`; memory: v[0] allocated bytes */
	uint32_t present;       /* NVML: bits of enum fmt_nvml */
} ana_gpu_point;

/* NVLink traffic of a device, from NVML's cumulative counters. */
typedef struct ana_gpu_nvlink {
	uint64_t samples;
	uint64_t tx_bytes, rx_bytes;           /* counted between the first and the last sample */
	double tx_bytes_per_s, rx_bytes_per_s; /* over that time (NAN with fewer than 2 samples) */
	double tx_max_bytes_per_s, rx_max_bytes_per_s; /* the highest between two samples */
} ana_gpu_nvlink;

typedef struct ana_gpu_device {
	uint32_t process;       /* index into p->procs */
	uint32_t id;            /* CUDA device id (65536 + NVML index: seen by NVML only) */
	const fmt_gpu_device *info; /* NULL when no DEVICE record described it */
	uint64_t first_ns, last_ns; /* first start and last end of its kernels, copies and memsets */
	uint64_t kernel_ns, memcpy_ns, memset_ns; /* sums of durations */
	uint64_t busy_ns;       /* union of those intervals */
	uint64_t overlap_ns;    /* time with two or more of its streams busy */
	uint64_t stream_busy_ns; /* sum of its streams' busy times */
	double busy_pct;        /* busy_ns of its process's wall time */
	double window_busy_pct; /* busy_ns of [first_ns, last_ns] */
	uint32_t streams;
	uint64_t allocs, frees;
	uint64_t peak_allocated_bytes, peak_t_ns;
	uint64_t allocated_end_bytes; /* still allocated at the end of the recording */
	ana_gpu_point *mem;     /* allocated bytes after each allocation and release */
	size_t nmem, mem_cap;
	ana_gpu_point *nvml;    /* NVML samples in time order */
	size_t nnvml, nvml_cap;
	double sm_pct_mean, mem_pct_mean, power_mw_mean; /* NAN without the field */
	ana_gpu_point *nvlink;  /* NVLink counters in time order: v[0] sent, v[1] received bytes */
	size_t nnvlink, nvlink_cap;
	ana_gpu_nvlink link;    /* their summary (samples 0: the device reported none) */
	uint64_t mem_used_max_bytes, mem_total_bytes, power_mw_max, temperature_max_c;
} ana_gpu_device;

/* A kernel name over all devices and streams. */
typedef struct ana_gpu_kernel {
	uint32_t name;          /* p->names index, demangled */
	uint64_t count, total_ns, min_ns, max_ns;
	double mean_ns;
	double gpu_time_pct;    /* of all kernel time */
	double occupancy_pct;   /* theoretical, weighted by time; NAN when device limits are unknown */
	const char *limiter;    /* what limits its longest-running configuration ("" if unknown) */
	uint32_t grid[3], block[3], regs, smem_static, smem_dynamic; /* its first launch */
	uint32_t first_kstream; /* its rows in ana_gpu.kstreams, chained by next */
} ana_gpu_kernel;

/* A kernel on one stream. */
typedef struct ana_gpu_kstream {
	uint32_t kernel, stream; /* indices into kernels and streams */
	uint32_t next;           /* the kernel's next row, or ANA_NONE */
	uint64_t count, total_ns;
} ana_gpu_kstream;

typedef struct ana_gpu_stream {
	uint32_t process, device, context, stream;
	uint64_t kernels, memcpys, memsets;
	uint64_t kernel_ns, memcpy_ns, memset_ns;
	uint64_t busy_ns;       /* union of its intervals */
	double busy_pct;        /* of its device's window */
	ana_u64vec iv;          /* working: start, end pairs */
} ana_gpu_stream;

/* Transfers of one kind (fmt_gpu_copy), all devices. */
typedef struct ana_gpu_copy {
	uint64_t count, bytes, total_ns;
	uint64_t pageable_count, pageable_bytes; /* from or to pageable host memory */
	uint64_t pinned_bytes;
	double bandwidth_bytes_per_s; /* bytes / total_ns */
	double pageable_pct;    /* of bytes */
} ana_gpu_copy;

/* Host time blocked in synchronising calls inside one region (or none). */
typedef struct ana_gpu_sync_region {
	uint32_t node;          /* innermost open region node, ANA_NONE outside regions */
	uint64_t ns, calls;
} ana_gpu_sync_region;

/* Host call stacks sampled while their thread was blocked in a synchronising call, with
 * the same sequence of functions. */
typedef struct ana_gpu_sync_stack {
	uint32_t stack;         /* p->smp.stacks index: one of them */
	uint64_t samples;       /* sample weight (periods) inside synchronising intervals */
} ana_gpu_sync_stack;

typedef struct ana_gpu_timer {
	uint32_t name;          /* p->names index */
	uint64_t count, total_ns, min_ns, max_ns;
} ana_gpu_timer;

/* NVTX start/end ranges of one name (nvtxRangeStart* / nvtxRangeEnd, all processes). */
typedef struct ana_nvtx_range {
	uint32_t name;          /* p->names index (the message; "" when it had none) */
	uint64_t count, total_ns, min_ns, max_ns;
	double mean_ns;
	uint32_t threads;       /* distinct threads that started or ended one */
	uint64_t cross_thread;  /* ended on another thread than the one that started it */
} ana_nvtx_range;

/* NVTX marks of one name. */
typedef struct ana_nvtx_mark {
	uint32_t name;
	uint64_t count;
	uint32_t threads;       /* distinct threads that marked it */
} ana_nvtx_mark;

typedef struct ana_gpu {
	uint64_t cupti_version; /* of the first process that loaded CUPTI (0: none) */
	unsigned clock;         /* enum fmt_gpu_clock of that process */
	uint64_t offset_error_ns;
	int kernels_only;
	uint64_t records, dropped, cupti_dropped, unknown; /* summed over processes */
	ana_gpu_device *devices;
	uint32_t ndevices;
	size_t devices_cap;
	ana_gpu_kernel *kernels; /* by total time, descending */
	uint32_t nkernels;
	size_t kernels_cap;
	ana_gpu_kstream *kstreams;
	uint32_t nkstreams;
	size_t kstreams_cap;
	ana_gpu_stream *streams; /* by process, device, stream */
	uint32_t nstreams;
	size_t streams_cap;
	ana_gpu_copy copies[FMT_CPY_MAX + 1]; /* by copy kind */
	uint64_t kernel_ns, memcpy_ns, memset_ns, busy_ns;
	double busy_pct;        /* busy time of all devices over their processes' wall time */
	uint64_t sync_ns, sync_calls; /* host threads blocked in synchronising calls (union per thread) */
	ana_gpu_sync_region *sync_regions; /* by ns, descending */
	uint32_t nsync_regions;
	size_t sync_regions_cap;
	ana_gpu_sync_stack *sync_stacks; /* by samples, descending */
	uint32_t nsync_stacks;
	size_t sync_stacks_cap;
	uint64_t sync_samples;  /* sample weight inside synchronising intervals (all stacks) */
	uint64_t launch_calls, launch_ns; /* cudaLaunch* / cuLaunch* calls and their host time */
	uint64_t api_calls;
	uint64_t overhead_ns;   /* CUPTI's own overhead records */
	uint64_t peak_allocated_bytes; /* the largest device peak */
	uint32_t peak_device;   /* index into devices, ANA_NONE without allocations */
	uint64_t peak_t_ns;
	uint32_t peak_node;     /* region open on the allocating thread at the peak, or ANA_NONE */
	uint64_t peak_reserved_bytes; /* the largest NVML memory-used sample (device-wide); 0: none */
	ana_gpu_timer *timers;
	uint32_t ntimers;
	size_t timers_cap;
	ana_nvtx_range *nvtx_ranges; /* by total time, descending */
	uint32_t nnvtx_ranges;
	size_t nvtx_ranges_cap;
	ana_nvtx_mark *nvtx_marks;   /* by count, descending */
	uint32_t nnvtx_marks;
	size_t nvtx_marks_cap;
	uint64_t nvtx_open;     /* ranges started and never ended (in their process's file) */
	uint64_t nvtx_unmatched; /* ends of ranges whose start the file does not have */
	uint64_t nvtx_dropped;  /* start, end and mark records the collector lost (full queue) */
	void *priv;             /* per-process working state while reading */
} ana_gpu;

/*
 * Theoretical occupancy of a launch of `threads` threads per block, `regs` registers per
 * thread and `smem` bytes of shared memory per block on device d, as the CUDA occupancy
 * calculator computes it: the resident blocks per SM allowed by warps, registers (256 per
 * warp allocation unit, warps granted in fours), shared memory (128-byte units, plus 1 KiB
 * reserved per block from compute capability 8.0) and the block limit, times the warps of a
 * block, over the SM's warps. Returns a fraction in [0, 1], or -1 when d lacks the limits.
 * *limiter (may be NULL) names the binding limit: "warps", "registers", "shared memory",
 * "blocks".
 */
double ana_gpu_occupancy(const fmt_gpu_device *d, uint32_t threads, uint32_t regs, uint32_t smem,
			 const char **limiter);

/* Frame i of a sampled stack from its leaf (0: the leaf), by function name; NULL past its
 * root. ana_gpu_sync_frame: the outermost frame that is a synchronising CUDA call (as
 * sync_ns counts them), 0 when none is. ana_gpu_stack_text writes at most max_frames
 * frames from that one towards the root, joined by " < ", into buf (cut with "..." when it
 * does not fit). */
const char *ana_gpu_frame(const ana_profile *p, uint32_t stack, uint32_t i);
uint32_t ana_gpu_sync_frame(const ana_profile *p, uint32_t stack);
void ana_gpu_stack_text(const ana_profile *p, uint32_t stack, uint32_t max_frames, char *buf, size_t n);

/* "HtoD", "DtoH", ... for a copy kind; "clock" names. */
const char *ana_gpu_copy_name(unsigned kind);
const char *ana_gpu_clock_name(unsigned clock);

#endif

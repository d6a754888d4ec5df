/*
 * reader.h - the one decoder of fennec profile files (docs/format.md). It maps a file,
 * validates every chunk (framing, checksum, sizes), decodes the small records into a
 * fmt_file and hands each event, with absolute ticks, to a callback. Every file is
 * untrusted: errors name the file, the byte offset and the problem.
 *
 * Ownership: strings and arrays in a fmt_file are owned by it and live until
 * fmt_file_free().
 */
#ifndef FENNEC_READER_H
#define FENNEC_READER_H

#include "format/format.h"

typedef struct fmt_site_rec {
	char *name;
	char *file;
	uint32_t line;
	unsigned kind; /* enum fmt_site_kind */
	int defined;
} fmt_site_rec;

typedef struct fmt_thread_rec {
	uint64_t tid;
	char *name;
	uint64_t start_ticks;
	uint64_t end_ticks;   /* 0 if it did not end before the recording did */
	uint64_t last_ticks;  /* time of its last event */
	uint64_t dropped;     /* cumulative dropped events */
	uint64_t events;
	uint32_t depth;       /* open regions while decoding */
	int known;
} fmt_thread_rec;

typedef struct fmt_calib {
	uint64_t mono_ns;
	uint64_t ticks;
	uint64_t offset;       /* of the chunk it was read from */
} fmt_calib;

typedef struct fmt_segment {
	uint64_t start, end, offset;
} fmt_segment;

/* A MODULES record: one loaded object. */
typedef struct fmt_module {
	uint64_t ticks;        /* first seen */
	char *path;
	uint8_t *build_id;     /* raw bytes, NULL if none */
	size_t build_id_len;
	uint64_t bias;
	fmt_segment *segs;
	uint32_t nsegs;
	uint64_t lo, hi;       /* lowest start and highest end of its segments */
} fmt_module;

typedef struct fmt_task {
	uint64_t tid;
	char *name;
} fmt_task;

/* A HEAP STACK record: the stack and open regions of allocations (docs/format.md). */
typedef struct fmt_heap_stack {
	uint64_t *frames;      /* innermost first (return addresses) */
	uint32_t nframes;
	uint32_t *regions;     /* open region site ids, outermost first */
	uint32_t nregions;
	uint64_t *pyframes;    /* Python frames (1.7), innermost first: fmt_pyframe values; NULL: none */
	uint32_t npy;
	int truncated;
	int defined;
} fmt_heap_stack;

/* A REACH entry (1.6): a heap stack's blocks live at the end, reachable and lost. */
typedef struct fmt_reach {
	uint64_t stack, reach_count, reach_bytes, lost_count, lost_bytes;
} fmt_reach;

/* HEAP counters as of the last HEAP chunk (cumulative since the session started). */
typedef struct fmt_heap_counters {
	uint64_t allocs, frees, alloc_bytes, live_bytes, peak_bytes;
	uint64_t peak_ticks, peak_step, peak_site, largest_bytes;
	uint64_t records, dropped, truncated, untracked;
} fmt_heap_counters;

/* A Python code object named by samples (PYCODE). */
typedef struct fmt_pycode {
	char *qualname, *filename;
	uint32_t firstlineno;
	int defined;
} fmt_pycode;
/* An ENERGY DOMAIN record: one energy counter of the machine (RAPL zone, GPU). */
typedef struct fmt_energy_domain {
	unsigned source, kind;  /* enum fmt_energy_source, enum fmt_energy_kind */
	char *name;
	int defined;
} fmt_energy_domain;

/* Damage a reader with FMT_READ_RESYNC skipped: bytes [offset, offset + bytes) held no
 * whole chunk (why: enum fmt_skip_why), and reading went on at the next one. */
enum fmt_skip_why {
	FMT_SKIP_HEADER = 1,   /* a chunk header with impossible fields */
	FMT_SKIP_LENGTH = 2,   /* a chunk claiming more than the file holds, a whole chunk after it */
	FMT_SKIP_CHECKSUM = 3, /* a chunk whose checksum fails */
};
#define FMT_MAX_SKIPS 8 /* damage kept in detail; the totals count all of it */

typedef struct fmt_skip {
	uint64_t offset, bytes;
	unsigned why;          /* enum fmt_skip_why */
	unsigned type;         /* the damaged chunk's type field (as stored) */
	uint32_t stored;       /* its stored_len field (as stored) */
} fmt_skip;

/* fmt_read_ex() flags */
#define FMT_READ_RESYNC 1u /* skip a damaged chunk to the next whole one instead of failing */

#define FMT_MAX_STRIDE_CHANGES 4096
typedef struct fmt_file {
	char *path;
	uint64_t size;
	unsigned read_flags;   /* the flags it was read with (to read it again alike) */
	fmt_skip skips[FMT_MAX_SKIPS]; /* FMT_READ_RESYNC: the first damage skipped */
	uint32_t nskips;       /* damage skipped, all of it */
	uint64_t skipped_bytes;
	unsigned major, minor;
	/* header */
	uint64_t recording_id, pid, ppid, parent_pid, origin, clock, buffer_bytes, version;
	int64_t rank;
	char *host, *cmdline, *exe; /* cmdline: arguments joined by spaces */
	char *config_warnings;      /* FENNEC_* values the collector could not use, one a line; NULL: none */
	uint64_t start_real_ns, start_mono_ns, start_ticks;
	double ticks_per_ns_hdr;
	uint64_t step_wait, step_warmup, step_active, step_repeat;
	double step_fraction;
	/* records */
	fmt_site_rec *sites;   /* indexed by site id; `defined` marks real entries */
	uint32_t nsites;       /* size of the table */
	fmt_thread_rec *threads; /* indexed by thread index; `known` marks real entries */
	uint32_t nthreads;       /* size of the table */
	fmt_calib *calib;
	size_t ncalib, calib_cap;
	/* last STATS/END */
	uint64_t cpu_user_ns, cpu_sys_ns, max_rss_kb, lost_bytes; /* CPU: the session's (the
								    process's less cpu_start_*) */
	uint64_t cpu_start_user_ns, cpu_start_sys_ns; /* the process's CPU at the session's start */
	int has_cpu_start;                            /* the header gave it (since 1.3.x) */
	uint64_t collector_cpu_ns; /* fennec's own CPU in the session (writer thread, final flush) */
	int has_collector_cpu;     /* STATS/END gave it (since 1.5) */
	uint64_t heap_dropped_allocs, heap_dropped_frees; /* of heap.dropped: ALLOCs, FREEs */
	uint64_t sites_refused; /* region and metric calls the collector's full site table gave no name */
	/* The overhead budget (header key 42; STATS' stride and share, collectors since
	 * 2026-12-03): each STATS whose stride differs from the one before, in file order. */
	uint64_t budget_ppm;    /* millionths of the process's CPU; 0: none */
	uint32_t stride;        /* the last STATS's: samples every `stride` periods (0: not given) */
	uint32_t budget_share_ppm; /* the last STATS's: fennec's share in the budget's last window */
	struct fmt_stride_change { uint64_t ticks; uint32_t stride, share_ppm; } *stride_changes;
	uint32_t nstride_changes; /* kept: the first FMT_MAX_STRIDE_CHANGES */
	uint64_t stride_changes_more; /* changes past those, counted */
	int has_heap_drops;        /* STATS/END gave them (collectors since 2026-11-22) */
	/* COST (1.8), the last chunk's: fennec's work on the program's threads */
	int has_cost;
	uint64_t cost_handler_ns;       /* measured: in the sampling signal handler */
	uint64_t cost_heap_record_ns;   /* measured: recording heap events (1 in 16 timed) */
	uint64_t cost_event_ps;         /* calibrated: one region event (0: not calibrated) */
	uint64_t cost_heap_call_ps;     /* calibrated: one counted heap call beyond glibc's (0: none) */
	uint64_t cost_sample_kernel_ns; /* calibrated: the kernel's part of one sample (0: none) */
	uint64_t cost_heap_calls;       /* the heap calls the wrappers counted in the session */
	int has_cost_heap_calls;
	uint64_t exit_reason;
	int has_end;
	int cut_short;          /* no END chunk */
	uint64_t torn_offset;   /* nonzero: a partial chunk starts here */
	uint64_t events;
	uint64_t bad_ends;      /* END events with no open region (dropped) */
	uint64_t long_names;    /* site names longer than FMT_MAX_NAME bytes, cut to it */
	uint32_t long_name_site; /* the first of them */
	uint64_t long_name_bytes; /* its length in the file */
	/* sampling (header keys 22-26; SAMPLES counters as of the last chunk) */
	uint64_t sample_mode, sample_period_ns, sample_source, sample_depth, sample_hz;
	uint64_t samples_taken, samples_dropped, samples_truncated;
	uint64_t samples;       /* sample records read */
	fmt_module *modules;    /* in file order */
	size_t nmodules, modules_cap;
	/* Python (1.7): header keys 38-39, PYCODE records */
	uint64_t py_version;    /* PY_VERSION_HEX of the process's CPython; 0: none */
	uint64_t py_status;     /* enum fmt_py_status */
	fmt_pycode *pycode;     /* indexed by code id; `defined` marks real entries */
	uint32_t npycode;       /* size of the table */
	fmt_task *tasks;
	size_t ntasks, tasks_cap;
	/* heap profiling (header keys 27-29, HEAP chunks) */
	uint64_t mem_mode, mem_rate, mem_interval_ns;
	uint64_t mem_mmap_min;    /* --memory-mmap: smallest mapping counted; 0: none */
	int has_heap;            /* a HEAP chunk was read */
	fmt_heap_counters heap;
	fmt_heap_stack *heap_stacks; /* indexed by stack id (0 unused) */
	uint32_t nheap_stacks;       /* size of the table */
	/* REACH (1.6): what the program could still reach at the end (full mode) */
	int has_reach;
	uint64_t reach_status;       /* enum fmt_reach_status: 0 the scan was made */
	uint64_t reach_ns, reach_root_bytes, reach_heap_bytes;
	fmt_reach *reach;            /* per stack, when the scan was made */
	uint32_t nreach;
	/* GPU (GPU chunks, since 1.3) */
	int has_gpu;             /* a GPU or GPUX chunk was read */
	fmt_gpu_info gpu;        /* the prefix of the last GPU chunk (counts are cumulative) */
	fmt_gpu_device *gpu_devices; /* DEVICE records, latest per id, in order of first sight */
	uint32_t ngpu_devices, gpu_devices_cap;
	char **gpu_strings;      /* indexed by STRING id (NULL: undefined) */
	uint32_t ngpu_strings;   /* size of the table */
	uint64_t gpux_dropped;   /* GPUX (1.4): NVTX records the collector lost (the last chunk's) */
	/* system metrics (header keys 34-37, SYSTEM and ENERGY chunks) */
	uint64_t sys_interval_ns;  /* the sampler's period; 0: no sampler */
	uint64_t sys_cpus, sys_mem_total, energy_sources;
	uint64_t sys_taken;        /* SYSTEM points the collector took (the last chunk's count) */
	fmt_energy_domain *energy_domains; /* indexed by domain id (0 unused) */
	uint32_t nenergy_domains;  /* size of the table */
	/* a capped recording (1.9; header keys 40-41, SEGMENT chunks) */
	int seg_capped;            /* the header names a cap */
	uint64_t seg_max_bytes, seg_max_ns; /* the caps (0: none of that kind) */
	uint64_t seg_count;        /* segments read */
	uint64_t seg_first;        /* the number of the first one read */
	int seg_dropped;           /* older segments were dropped: start_* are the first kept one's */
	uint64_t seg_session_start_mono_ns, seg_session_start_ticks; /* the session's own start */
	uint64_t seg_steps_before, seg_events_before; /* STEP events and events dropped */
	/* clock fit: mono_ns = a + b * ticks */
	double fit_a, fit_b;
	uint64_t last_ticks;    /* latest event or calibration time read (after an error: before the damage) */
} fmt_file;

typedef struct fmt_event {
	unsigned type;      /* enum fmt_ev_type; STACK is delivered as BEGINs */
	uint32_t thread;    /* index into fmt_file.threads (UINT32_MAX for SAMPLE) */
	uint32_t id;        /* site id (BEGIN, metrics) */
	uint32_t flags;     /* STEP: the operand bits; SAMPLE: enum fmt_sample_flag bits */
	uint64_t ticks;     /* absolute event time */
	uint64_t u;         /* STEP items; SAMPLE: step */
	int64_t i;          /* COUNTER delta; SAMPLE: weight (periods) */
	double f;           /* GAUGE, VALUE */
	/* ALLOC: addr, size, id = stack id, u = step; FREE: addr; HEAP_SNAP: u = step,
	 * heap[] = live bytes, RSS bytes, allocations, frees, allocated bytes; flags = reason */
	uint64_t addr, size;
	uint64_t heap[5];
	/* GPU only (CLOCK_MONOTONIC times in gpu->start_ns/end_ns; ticks is start_ns mapped
	 * onto the event clock); lives until the callback returns. A TIMER's end_ns is its
	 * start plus the elapsed time the CUDA events measured. */
	const fmt_gpu *gpu;
	/* SYS and ENERGY only (ticks is t_ns mapped onto the event clock); live until the
	 * callback returns. An ENERGY event is a READING; its domain is in f->energy_domains. */
	const fmt_sys *sys;
	const fmt_energy *energy;
	/* SAMPLE only; the arrays live until the callback returns */
	uint64_t tid;
	const uint64_t *frames;  /* innermost first */
	uint32_t nframes;
	const uint32_t *regions; /* open region site ids, outermost first */
	uint32_t nregions;
	const uint64_t *pyframes; /* Python frames (flag FMT_S_PYTHON), innermost first: fmt_pyframe values */
	uint32_t npy;
} fmt_event;

/* The code object `id` of f, or NULL when no PYCODE record described it. */
static inline const fmt_pycode *fmt_pycode_get(const fmt_file *f, uint32_t id)
{
	return id < f->npycode && f->pycode[id].defined ? &f->pycode[id] : NULL;
}

/* The stack of HEAP stack id `id`, or NULL when no STACK record defined it. */
static inline const fmt_heap_stack *fmt_heap_stack_get(const fmt_file *f, uint64_t id)
{
	return id < f->nheap_stacks && f->heap_stacks[id].defined ? &f->heap_stacks[id] : NULL;
}

/* Return nonzero from the callback to stop reading (fmt_read then returns that value). */
typedef int (*fmt_event_fn)(void *ctx, const fmt_file *f, const fmt_event *ev);

typedef struct fmt_error {
	int code;           /* FENNEC_E* */
	uint64_t offset;
	char msg[512];      /* "<file>: byte <offset>: <problem>" */
} fmt_error;

/*
 * Read `path` completely: fills *f (zeroed first) and calls fn (may be NULL) for every
 * event in file order. Returns 0 (warnings such as a torn tail are in f), a FENNEC_E*
 * code with err filled in, or the callback's nonzero value. On error *f holds what was
 * decoded before the error; free it either way.
 */
int fmt_read(const char *path, fmt_file *f, fmt_event_fn fn, void *ctx, fmt_error *err);

/* The same, with FMT_READ_* flags. With FMT_READ_RESYNC a damaged chunk after the HEADER
 * (a header with impossible fields, a checksum that fails, or a length past the end of the
 * file while a whole chunk follows) is skipped to the next whole chunk, and recorded in
 * f->skips; without it such damage is an error. A chunk past the end of the file with no
 * whole chunk after it is a torn tail either way (f->torn_offset). */
int fmt_read_ex(const char *path, unsigned flags, fmt_file *f, fmt_event_fn fn, void *ctx, fmt_error *err);

/* The same, on a buffer (used by the fuzzer); `name` labels messages. */
int fmt_read_mem(const uint8_t *data, size_t len, const char *name, fmt_file *f, fmt_event_fn fn,
		 void *ctx, fmt_error *err);
int fmt_read_mem_ex(const uint8_t *data, size_t len, const char *name, unsigned flags, fmt_file *f,
		    fmt_event_fn fn, void *ctx, fmt_error *err);

/* Read only the HEADER chunk (to match siblings of a recording). */
int fmt_read_header(const char *path, fmt_file *f, fmt_error *err);

/* The module of `f` that maps `addr` at time `ticks` (the latest record covering it that
 * was seen by then, else the latest covering it at all); NULL if none. */
const fmt_module *fmt_module_at(const fmt_file *f, uint64_t addr, uint64_t ticks);

/* Ticks to CLOCK_MONOTONIC ns, and a tick interval to ns, with the file's clock fit. */
static inline double fmt_ticks_to_ns(const fmt_file *f, uint64_t ticks) { return f->fit_a + f->fit_b * (double)ticks; }
static inline double fmt_dticks_to_ns(const fmt_file *f, uint64_t dticks) { return f->fit_b * (double)dticks; }

/* The GPU device `id` of f, or NULL when no DEVICE record described it. */
const fmt_gpu_device *fmt_gpu_device_get(const fmt_file *f, uint32_t id);

void fmt_file_free(fmt_file *f);

/* Whether a file name is a capped recording's segment (NAME.seg.K): read with its entry
 * file NAME, never on its own. */
int fmt_is_segment_name(const char *name);

/*
 * Following a growing file (a recording in progress: fmt_follow_poll() again and again).
 * Each poll decodes only the whole chunks written since the last one, delivering their
 * events to fn as fmt_read does, and keeps the rest of the state (sites, threads, counters
 * of the last STATS, the clock fit so far) in the file that fmt_follow_file() gives. A
 * chunk not yet whole is read by the next poll. Differences from fmt_read: events come
 * with the clock fit known so far (durations in ticks are exact; use fmt_dticks_to_ns at
 * the time of use); no SAMPLE events (their counters are kept); reading ends at the END
 * chunk; a file replaced at the path (another inode, or shorter) starts again from its
 * beginning, fmt_follow_generation() counting the restarts. A decoding error is final for
 * the file and returned by every later poll.
 */
typedef struct fmt_follow fmt_follow;
fmt_follow *fmt_follow_new(const char *path); /* NULL: out of memory; nothing is opened yet */
/* 0 (also when nothing new, or the file is too short for its HEADER yet), FENNEC_ENOENT
 * when the file is not there (yet), another FENNEC_E* code with err filled in, or the
 * callback's nonzero value. */
int fmt_follow_poll(fmt_follow *w, fmt_event_fn fn, void *ctx, fmt_error *err);
/* What was decoded so far; NULL before the HEADER chunk was read. */
const fmt_file *fmt_follow_file(const fmt_follow *w);
uint64_t fmt_follow_offset(const fmt_follow *w);     /* bytes decoded (the next chunk's offset) */
uint64_t fmt_follow_generation(const fmt_follow *w);
void fmt_follow_free(fmt_follow *w);

#endif

/*
 * timeline.h - region calls as intervals per thread, for the timelines of the HTML report
 * and the dashboard. The model keeps no per-call data (memory grows with calls, 8 bytes
 * each), so this replays the recording's files (analyze/replay.h, one read of each) and
 * reduces what it finds to a bounded
 * number of intervals: calls shorter than a resolution are merged with their neighbours
 * at the same depth of the same thread into blocks, at most a resolution long, that say
 * how many calls they stand for. GPU kernels, copies and memsets (GPU chunks) become
 * intervals of one lane per stream, reduced the same way with the same resolution.
 *
 * Ownership: an ana_timeline owns its arrays and names; ana_timeline_free() releases them.
 */
#ifndef FENNEC_TIMELINE_H
#define FENNEC_TIMELINE_H

#include "analyze/analyze.h"

/* ana_interval.thread of a GPU stream's interval: ANA_TL_GPU + its index in gpu_lanes. */
#define ANA_TL_GPU 0x80000000u

/* One drawn interval: a call, or a block of merged neighbouring calls. On a GPU lane a
 * "call" is a kernel (depth 0), or a copy or memset (depth 1). */
typedef struct ana_interval {
	uint64_t start_ns;    /* from the first process's start (ana_process.start_ns) */
	uint64_t dur_ns;      /* a block: from its first call's start to its last call's end */
	uint32_t thread;      /* index into p->threads, or ANA_TL_GPU + a gpu_lanes index */
	uint32_t name;        /* index into ana_timeline.names; a block: its longest call's region */
	uint32_t depth;       /* 0 for a top-level region */
	uint32_t count;       /* calls it stands for: 1 is one call, exactly */
	uint64_t busy_ns;     /* time inside the calls (< dur_ns for a block with gaps) */
	int open;             /* still open when the file ended (a run in progress or cut short) */
} ana_interval;

/* A GPU stream: the lane of its kernels, copies and memsets. */
typedef struct ana_tl_gpu_lane {
	uint32_t process;     /* index into p->procs */
	uint32_t device, stream; /* CUDA device id, CUPTI's stream id */
} ana_tl_gpu_lane;

typedef struct ana_timeline {
	ana_interval *iv;     /* sorted by thread, depth, start */
	size_t n, cap;
	char **names;         /* region names, distinct */
	uint32_t nnames, names_cap;
	uint64_t calls;       /* calls seen (completed and open) at shown depths */
	uint64_t deep_calls;  /* calls deeper than max_depth: not shown */
	uint32_t max_depth;   /* deepest depth shown */
	uint64_t resolution_ns; /* calls and gaps shorter than this were merged into blocks (0: none) */
	uint64_t span_ns;     /* end of the latest interval */
	uint64_t from_ns, to_ns; /* the window asked for (0, 0: all) */
	uint32_t files_failed; /* files that could not be read again (changed or removed) */
	ana_tl_gpu_lane *gpu_lanes; /* by first appearance */
	uint32_t ngpu_lanes, gpu_lanes_cap;
	uint64_t gpu_work;    /* kernels, copies and memsets seen (like calls, for GPU lanes) */
} ana_timeline;

/*
 * Replay the files of `p` (p->procs[i].file.path, ana_replay) and fill *tl with at most
 * `max_intervals` intervals (the resolution is raised until they fit; at least 1000) of
 * calls at depths 0..max_depth that overlap the window [from_ns, to_ns) (times as in
 * ana_interval; to_ns 0: no window). Calls outside the window are neither kept nor
 * counted, so a window gets the whole budget: that is how a zoomed timeline shows detail.
 * A file that fails to read is counted in files_failed and what it gave up to the failure
 * is kept. Returns 0 or FENNEC_ENOMEM (*tl is then freed).
 */
int ana_timeline_build(const ana_profile *p, size_t max_intervals, uint32_t max_depth, uint64_t from_ns,
		       uint64_t to_ns, ana_timeline *tl);

/* Release what *tl owns; ana_timeline_free(NULL) is a no-op. */
void ana_timeline_free(ana_timeline *tl);

#endif

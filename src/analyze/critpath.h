/*
 * critpath.h - the critical path of each step (src/analyze/critpath.c, docs/critical_path.md):
 * the chain of region calls, on any thread of the stepping process and on its GPU streams,
 * that bounds the step's duration, inferred from timing alone (no dependency edges are
 * recorded), and its aggregation over the steps.
 *
 * Ownership: p->cp and everything it points to belong to the profile (ana_critpath_free).
 * The walk (ana_cp_walk) is a pure function over caller-owned arrays.
 */
#ifndef FENNEC_ANALYZE_CRITPATH_H
#define FENNEC_ANALYZE_CRITPATH_H

#include "analyze/analyze.h"

/*
 * One lane: a thread's (or a GPU stream's) activity as labelled segments. Segment i runs
 * from t[i] to t[i + 1] (the last one for ever) and carries lab[i]: a label below the
 * caller's label count (a region node: the innermost region open then; a GPU activity), or
 * ANA_NONE when nothing tracked is running. Before t[0] the lane is idle. t is
 * non-decreasing; zero-length segments are allowed and never make the path.
 */
typedef struct ana_cp_lane {
	const uint64_t *t;
	const uint32_t *lab;
	size_t n;
	int gpu;              /* a GPU stream: it idles until a host thread submits work */
} ana_cp_lane;

/* A piece of a path: lane `lane` in `label` (ANA_NONE: untracked) over [start_ns, end_ns). */
typedef struct ana_cp_piece {
	uint32_t lane;
	uint32_t label;
	uint64_t start_ns, end_ns;
} ana_cp_piece;

/*
 * The critical path of the window [t0, t1) ending on lane `from` (the stepping thread):
 * walks back from t1. A work segment (a label with waiting[label] == 0) running at the
 * walk's time is on the path. A waiting segment (waiting[label] != 0) or an idle one
 * (ANA_NONE) is explained, if it can be, by the activity that released it: among the work
 * segments of the other lanes that end inside it (after its start, at or before the walk's
 * time), the one that ends last; the walk moves there, and the time from that end to the
 * walk's time stays with the waiting (or untracked) segment. With none, an idle GPU lane
 * hands the walk, at the same time, to the first thread lane (not gpu; `from` first) with
 * work running then: the host that was submitting the work the stream then started.
 * Otherwise the whole segment is on the path as waiting or untracked. Ties go to the
 * lower lane index.
 *
 * The pieces, in time order, adjacent pieces of one lane and label merged, cover
 * [t0, t1) exactly; they go to *pieces (grown with realloc, capacity *cap; reused across
 * calls) and their count to *npieces. Returns 0 or -1 (out of memory).
 */
int ana_cp_walk(const ana_cp_lane *lanes, uint32_t nlanes, uint32_t from, const uint8_t *waiting, uint64_t t0,
		uint64_t t1, ana_cp_piece **pieces, size_t *npieces, size_t *cap);

/* Where a lane of the model is: a thread of the stepping process, or a GPU stream of it. */
typedef struct ana_cp_where {
	uint32_t thread;      /* p->threads index; ANA_NONE for a GPU stream */
	uint32_t device, stream; /* GPU */
} ana_cp_where;

/* A region (or GPU activity) on a lane, aggregated over the steps analysed. */
typedef struct ana_cp_entry {
	uint32_t lane;        /* index into ana_critpath.where */
	uint32_t label;       /* see ana_cp_label_name */
	int waiting;          /* a waiting region (ana_name_is_comm) on the path: time it waited on nothing tracked */
	uint64_t ns;          /* on the path, summed over the steps */
	uint64_t steps;       /* steps where it was on the path */
	double share_pct;     /* ns of the analysed steps' total duration */
	uint64_t last_step;   /* working */
	uint32_t threads;     /* threads of its role (one name) whose rows it sums; 1: one lane */
} ana_cp_entry;

/* One step's path. */
typedef struct ana_cp_chain {
	uint64_t index;       /* step index (0: the first step) */
	uint64_t ns;          /* its duration */
	ana_cp_piece *pieces; /* times are CLOCK_MONOTONIC */
	size_t n;
} ana_cp_chain;

typedef struct ana_critpath {
	uint64_t steps;       /* steps analysed */
	uint64_t steps_total; /* steps of the stepping thread */
	uint64_t unrecorded;  /* steps left out: step sampling did not record their regions */
	uint64_t over_budget; /* steps left out: past the transitions kept (ANA_CP_BUDGET) */
	uint64_t step_ns;     /* the analysed steps' durations summed */
	uint64_t untracked_ns; /* on the path with nothing tracked running */
	double untracked_pct;
	uint32_t active_lanes; /* lanes with tracked activity in the analysed steps: 1 is one thread */
	uint32_t gpu_lanes;   /* of which GPU streams */
	ana_cp_where *where;  /* per lane; lane 0 is the stepping thread */
	uint32_t nlanes;
	uint32_t nnodes;      /* labels below are region nodes; from here, GPU activities */
	uint32_t *gpu_names;  /* p->names index of GPU label nnodes + i */
	uint32_t ngpu_names;
	uint8_t *waiting;     /* per label */
	ana_cp_entry *e;      /* by ns, descending */
	uint32_t ne;
	ana_cp_chain slowest, median;
	void *priv;           /* collection state while reading */
} ana_critpath;

/* Transitions kept while reading (12 bytes each); steps past them are left out. */
#define ANA_CP_BUDGET (8u << 20)

/* A label's name: the region node's path, or the GPU activity's name ("" for ANA_NONE). */
const char *ana_cp_label_name(const ana_profile *p, uint32_t label);
/* A label's short name: the region's own name (not its path), or the GPU activity's. */
const char *ana_cp_label_short(const ana_profile *p, uint32_t label);
/* A lane's name into buf: the thread's name, "tid N" when it has none, "GPU D stream S". */
const char *ana_cp_lane_name(const ana_profile *p, uint32_t lane, char *buf, size_t n);

#endif

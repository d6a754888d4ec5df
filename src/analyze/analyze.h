/*
 * analyze.h - the analysis model: one recording (all its process files) loaded,
 * aggregated and judged. Every renderer (text, JSON, and those to come) reads this
 * model; numbers are computed once, here. This header is the read-only side: the types,
 * loading and freeing, and the queries renderers make. How the model is built (the
 * aggregators model.c drives, the utilities they share) is analyze/aggregate.h, which
 * only src/analyze/ includes.
 *
 * Ownership: an ana_profile owns everything it points to; ana_profile_free() releases
 * it all. Strings are borrowed from the profile.
 */
#ifndef FENNEC_ANALYZE_H
#define FENNEC_ANALYZE_H

#include "analyze/calib.h"
#include "format/reader.h"

#define ANA_NONE UINT32_MAX
#define ANA_SETUP_STEP UINT64_MAX /* ana_step_node.step of the time before the first mark */

typedef struct ana_u64vec {
	uint64_t *v;
	size_t n, cap;
} ana_u64vec;

typedef struct ana_f64vec {
	double *v;
	size_t n, cap;
} ana_f64vec;

/* Statistics of a sample, nanoseconds or plain values. */
typedef struct ana_dist {
	uint64_t count;
	double total, mean, std, min, max, p50, p95, p99;
} ana_dist;

/* A region node of the call tree: one distinct nesting path. */
typedef struct ana_node {
	uint32_t name;        /* index into names */
	uint32_t parent;      /* ANA_NONE for top-level regions */
	uint32_t depth;
	uint32_t first_child, next_sibling;
	uint64_t total_ns, self_ns, child_ns;
	ana_u64vec durations; /* per call, ns, in no particular order; freed after statistics
			       * unless ana_options.keep_durations; past a budget (sketch.h) the
			       * node keeps `sketch` instead and this is empty, or, with
			       * keep_durations, a uniform random sample of the calls */
	struct ana_sketch *sketch; /* the durations' histogram once they passed the budget, or NULL */
	uint64_t sample_rng;  /* the generator of that sample (sketch.c) */
	ana_dist dist;        /* over calls */
	uint32_t threads;     /* distinct threads */
	uint64_t open;        /* calls still open at the end */
	char *path;           /* "/"-joined names */
	uint64_t base_ns;     /* what share_pct and self_pct are shares of: the wall time of the
			       * processes it ran in, summed (the first process's when none) */
	uint32_t processes;   /* processes it ran in */
	uint32_t process;     /* p->procs index of one of them (the last met; its only one when
			       * processes == 1), ANA_NONE when none */
	double share_pct, self_pct;
	double flops, bytes;  /* work annotated inside this region (fennec_region_work) */
	double flops32;       /* of which single precision (fennec_region_work_fp32) */
} ana_node;

typedef struct ana_thread {
	uint32_t process;
	uint32_t index;       /* per-file thread index */
	uint64_t tid;
	const char *name;
	uint64_t events, dropped;
	uint64_t busy_ns, lifetime_ns;
	uint64_t marks;       /* its fennec_step() marks (in the window) */
	uint64_t steps;       /* the steps between them: marks - 1 (0 without marks) */
	uint64_t marks_before; /* its marks before the window (0 without one) */
} ana_thread;

typedef struct ana_process {
	fmt_file file;
	uint64_t wall_ns;
	uint64_t start_ns, end_ns; /* CLOCK_MONOTONIC; in the window when there is one */
	uint64_t rec_end_ns;  /* the end of its file, window or not */
	uint64_t dropped;
	uint32_t threads;
	uint32_t rank_index;  /* index into p->ranks: the recording it belongs to */
	uint32_t step_thread; /* p->threads index of its stepping thread (most marks), or ANA_NONE */
	uint64_t marks;       /* that thread's fennec_step() marks */
	uint64_t setup_ns;    /* from the process's start to its first mark: set-up, not a step */
	ana_u64vec step_ns;   /* that thread's step durations (from one mark to the next), in order */
	ana_dist step_dist;
	uint64_t busy_ns;     /* time in top-level regions, its threads summed */
	uint64_t work_ns;     /* busy_ns less the time in communication regions (ranks.c) */
	uint32_t top_node;    /* the region node with the most self time in it, or ANA_NONE */
	uint64_t top_self_ns;
} ana_process;

/* A region node's time on one thread (model.c keeps one per thread and node met). */
typedef struct ana_tnode {
	uint32_t thread;      /* p->threads index */
	uint32_t node;
	uint64_t count, total_ns, child_ns;
	uint64_t cur_step, cur_ns; /* replay state: the step being summed (step_nodes) */
} ana_tnode;

/* Time of a region node in one step of a process's stepping thread (the calls that ended
 * in that step). */
typedef struct ana_step_node {
	uint32_t thread;      /* p->threads index: the stepping thread of its process */
	uint32_t node;
	uint64_t step;        /* index into that process's step_ns (== its length: after the last mark;
			       * ANA_SETUP_STEP: before the first mark, the set-up) */
	uint64_t ns;
} ana_step_node;

/*
 * A rank: one recording (a process and the processes it forked or exec'd) of a job whose
 * recordings `fennec analyze DIR` merges (src/analyze/ranks.c). A recording without a rank
 * key is a rank with rank -1.
 */
typedef struct ana_rank {
	int64_t rank;         /* from the header (RANK, OMPI_COMM_WORLD_RANK, ...); -1: none */
	uint64_t recording_id;
	uint32_t proc;        /* its first process (p->procs index) */
	uint32_t nprocs;
	uint64_t wall_ns;     /* of its first process */
	uint64_t cpu_ns;      /* user + system, its processes summed */
	uint64_t busy_ns, work_ns, comm_ns; /* its processes summed: see ana_process; comm = busy - work */
	uint64_t steps;       /* of its first process's stepping thread */
	ana_dist step_dist;
	uint32_t top_node;    /* region node with the most self time in the rank, or ANA_NONE */
	uint64_t top_self_ns;
} ana_rank;

#define ANA_LOSSES 3
/* Where the slowest rank loses time: a region whose self time there exceeds the other
 * ranks' mean. */
typedef struct ana_loss {
	uint32_t node;        /* the region, or ANA_NONE: a function (basis "samples") */
	uint32_t func;        /* with basis "samples": the function (p->smp.funcs), else ANA_NONE */
	uint64_t rank_ns;     /* self time in the slowest rank */
	double others_ns;     /* mean self time in the other ranks */
	double excess_ns;     /* rank_ns - others_ns */
} ana_loss;

/* Balance between ranks (src/analyze/ranks.c, docs/bottlenecks.md rank_imbalance). */
struct ana_profile;
/* A loss's region path, or its function as "name (file:line)" in buf. */
const char *ana_loss_name(const struct ana_profile *p, const ana_loss *l, char *buf, size_t n);

typedef struct ana_balance {
	int present;          /* two ranks or more */
	const char *basis;    /* "work" (regions less communication), "samples" (on-CPU samples
			       * outside communication code), "steps" or "wall" */
	double imbalance_pct; /* max / mean - 1 of the basis over the ranks, in % */
	double step_imbalance_pct; /* the same over mean step times (NAN without steps on every rank) */
	uint32_t slowest, fastest; /* p->ranks indices by the basis */
	double max_ns, mean_ns, min_ns, others_mean_ns; /* of the basis */
	ana_loss losses[ANA_LOSSES];
	uint32_t nlosses;
} ana_balance;

/* One update of a metric. */
typedef struct ana_point {
	uint64_t t_ns;        /* CLOCK_MONOTONIC */
	double value;         /* as recorded: a counter's increment, a gauge's or a value's value */
} ana_point;

typedef struct ana_metric {
	uint32_t name;
	unsigned kind; /* enum fmt_site_kind */
	uint64_t count;
	double total;  /* counter */
	double last, min, max, sum;
	uint64_t first_ns, last_ns;
	ana_f64vec values; /* value kind */
	ana_dist dist;
	ana_point *points; /* every update, all processes, sorted by time (16 bytes each) */
	size_t npoints, points_cap;
	int work;          /* 1: the counter fennec.flops, 2: fennec.bytes, 3: fennec.flops32 (roofline.c) */
} ana_metric;

/*
 * Sampled stacks (docs/format.md SAMPLES), symbolised. Filled by ana_load when the
 * recording has samples: src/analyze/samples.c collects them while reading and
 * symbolises them per process at the end (src/symbol/).
 */
enum ana_sample_kind { ANA_CPU = 0, ANA_OFFCPU = 1, ANA_NKINDS = 2 };

/* A function (or a module offset when no symbol is known), over all processes. */
typedef struct ana_func {
	uint32_t name;        /* names index: demangled name, or "module+0x1234" when unknown */
	uint32_t module;      /* names index: module path ("[unknown]" when no module maps it) */
	uint32_t file;        /* names index of its source file, or ANA_NONE */
	uint32_t line;        /* line of its first sampled location (0 if unknown); Python: the def line */
	uint64_t self[ANA_NKINDS], total[ANA_NKINDS]; /* sample weights (periods), overall */
	unsigned lang;        /* enum ana_lang */
} ana_func;

/*
 * A PyTorch operator seen in the sampled stacks (operators.c, docs/python.md): an aten
 * operator's dispatcher entry (at::_ops::<op>::call / redispatch: "aten::<op>") or an
 * autograd node's apply (torch::autograd::generated::<Node>::apply: "<Node>"). self: on-CPU
 * sample weight whose innermost operator it is (its kernels, oneDNN/MKL/OpenBLAS included);
 * total: with an operator it called; calls_seen: runs of consecutive samples of a thread
 * inside it (a lower bound on its calls); caller: the Python location that called it most;
 * worker: the part of self taken on a library's own threads (OpenBLAS's workers) while the
 * operator ran on another.
 */
typedef struct ana_op {
	uint32_t name;        /* names index */
	uint64_t self, total, calls_seen;
	uint64_t worker;      /* of self: a library's own threads' work while it ran (operators.c) */
	double self_pct, total_pct; /* of the on-CPU sample weight */
	uint32_t caller;      /* locs index of the Python frame that called it most, ANA_NONE: none */
} ana_op;

/* The pseudo-function of a Python thread's samples inside CPython's take_gil() */
#define ANA_GIL_WAIT "[waiting for the GIL]"

/* The language of a function: native (C, C++, Rust, ...) or Python (a code object). */
enum ana_lang { ANA_LANG_NATIVE = 0, ANA_LANG_PYTHON = 1 };

/* A location: one symbolised frame. An address inside inlined code gives several
 * locations, the inlined ones first (innermost first). */
typedef struct ana_loc {
	uint32_t func;        /* index into funcs */
	uint32_t file;        /* names index, or ANA_NONE */
	uint32_t line;        /* 0 if unknown */
	uint32_t process;     /* index into procs */
	uint64_t addr;        /* address in that process */
	uint64_t rel;         /* address relative to the module's load bias (ELF vaddr) */
	int inlined;          /* an inlined call site's frame */
} ana_loc;

/* A distinct stack: locations outermost first (root ... leaf). */
typedef struct ana_stack {
	uint32_t *locs;
	uint32_t n;
	int truncated;        /* cut at the depth limit: the real root is missing */
} ana_stack;

typedef struct ana_sample {
	uint64_t t_ns;        /* CLOCK_MONOTONIC */
	uint64_t step;        /* fennec_step() calls before it */
	uint32_t stack;       /* index into stacks */
	uint32_t thread;      /* index into threads */
	uint32_t node;        /* innermost open region node, or ANA_NONE */
	uint32_t weight;      /* sampling periods it stands for */
	uint8_t kind;         /* enum ana_sample_kind */
	uint8_t kernel;       /* on CPU in the kernel (a system call, a page fault): ring source */
} ana_sample;

/* Symbolisation status of one module of one process. */
typedef struct ana_module {
	uint32_t process;
	uint32_t path;        /* names index */
	uint64_t samples;     /* sample frames that fell in it */
	int status;           /* 0 ok, 1 file missing, 2 build id differs, 3 no symbols */
} ana_module;

/* Which samples a sample view covers; zero fields select them all. */
typedef struct ana_sample_filter {
	uint64_t pid;             /* 0: every process */
	uint64_t tid;             /* 0: every thread */
	const char *region;       /* NULL: everywhere; else inside a region of this name or
				   * path ("train/forward"), nested regions included */
} ana_sample_filter;

/* A function in a sample view, for one kind (on-CPU or off-CPU). */
typedef struct ana_hot_func {
	uint32_t func;        /* index into funcs */
	uint64_t self, total; /* weights: samples whose innermost frame is in it; that have it anywhere */
	double self_pct, total_pct; /* of the view's weight of that kind */
	uint32_t file, line;  /* its hottest line (self weight): names index or ANA_NONE, 0 if unknown */
	uint32_t caller;      /* the caller through which most of its self weight came, or ANA_NONE */
	double caller_pct;    /* that share of its self weight */
	uint32_t entry;       /* the same for the nearest caller in another module (where the program
				 entered a library), or ANA_NONE */
	double entry_pct;
} ana_hot_func;

/* A source line in a sample view: self weight of the samples whose innermost frame is there. */
typedef struct ana_hot_line {
	uint32_t file, line;  /* names index, line */
	uint32_t func;        /* the function with the most of that weight (inlined code: the inlined one) */
	uint64_t self;
	double self_pct;
} ana_hot_line;

/* A node of the sampled call tree: top-down from the outermost frame, a child per distinct
 * function called (inlined functions are nodes of their own). A stack cut at the depth
 * limit starts at its outermost recorded frame. */
typedef struct ana_cnode {
	uint32_t func;
	uint32_t parent, first_child, next_sibling; /* ANA_NONE when none */
	uint64_t self[ANA_NKINDS], total[ANA_NKINDS];
} ana_cnode;

#define ANA_NODE_TOP 5
/* Samples inside one region node (its nested regions included). */
typedef struct ana_node_samples {
	uint64_t samples[ANA_NKINDS], weight[ANA_NKINDS];
	uint32_t top[ANA_NODE_TOP];      /* on-CPU functions by self weight inside the region */
	uint64_t top_weight[ANA_NODE_TOP];
	double top_pct[ANA_NODE_TOP];    /* of the region's on-CPU weight */
	uint32_t ntop;
} ana_node_samples;

/*
 * The aggregations of a set of samples, computed once for every renderer. Functions are
 * sorted by self weight (then total), lines by self weight; `nodes` is indexed like
 * p->nodes and the thread arrays like p->threads (index t * ANA_NKINDS + kind).
 */
typedef struct ana_sample_view {
	ana_sample_filter filter;
	uint64_t samples[ANA_NKINDS], weight[ANA_NKINDS];
	ana_hot_func *funcs[ANA_NKINDS];
	uint32_t nfuncs[ANA_NKINDS];
	ana_hot_line *lines[ANA_NKINDS];
	uint32_t nlines[ANA_NKINDS];
	ana_cnode *tree;      /* roots have parent ANA_NONE */
	uint32_t ntree, tree_cap;
	ana_node_samples *nodes;
	uint64_t *thread_samples, *thread_weight;
} ana_sample_view;

typedef struct ana_sampling {
	int present;
	uint64_t mode;        /* enum fmt_sample_mode of the first process */
	uint64_t period_ns, requested_hz;
	uint64_t source;      /* enum fmt_sample_source */
	uint64_t taken, dropped, truncated; /* summed over processes */
	uint64_t truncated_short; /* of the truncated samples read, those with fewer frames than
				     the depth limit: cut where the copy of the stack ended */
	uint64_t weight[ANA_NKINDS];         /* summed sample weights per kind */
	double achieved_hz;   /* on-CPU samples per second of CPU time */
	/* The overhead budget (record --overhead-budget; docs/sampling.md): what it changed,
	 * from every budgeted process's STATS, in process order, then time. */
	uint64_t budget_ppm;  /* the first budgeted process's budget, millionths; 0: none */
	struct ana_budget_change {
		uint64_t pid;
		double at_ns;     /* since the process's session started */
		uint32_t stride;  /* sampling every `stride` periods from then on */
		double share_pct; /* fennec's share of the CPU in the window that decided it */
	} *budget_changes;
	size_t nbudget_changes;
	uint64_t budget_changes_more; /* not kept by the reader (FMT_MAX_STRIDE_CHANGES a file) */
	uint32_t budget_stride;       /* the largest stride in force at a process's end */
	double budget_share_pct;      /* fennec's share in a process's last window, the largest */
	const char *none_why; /* sampling was on and took no sample: the likely reason, else NULL */
	ana_sample *samples;
	size_t nsamples, samples_cap;
	ana_stack *stacks;
	uint32_t nstacks, stacks_cap;
	ana_loc *locs;
	uint32_t nlocs, locs_cap;
	ana_func *funcs;
	uint32_t nfuncs, funcs_cap;
	ana_module *modules;
	uint32_t nmodules, modules_cap;
	void *priv;           /* samples.c working state */
	uint64_t unknown_frames; /* frames in no module and no perf map */
	/* Python (docs/python.md): samples of threads running CPython, of them those whose
	 * thread held the GIL, whose Python frames were cut, and whose Python frames had no
	 * interpreter loop among the native frames to stand in for (placed outermost) */
	uint64_t py_samples, py_gil, py_cut, py_unplaced;
	uint64_t py_gil_wait; /* of py_samples, those waiting for the GIL (ANA_GIL_WAIT) */
	uint64_t py_version;  /* PY_VERSION_HEX of the first Python process (0: none) */
	uint64_t py_status;   /* its enum fmt_py_status */
	struct { uint32_t *stack; uint32_t n; } *rawmap; /* per process: raw stack handle -> stacks index */
	uint32_t nrawmap;
	ana_sample_view all;  /* every sample */
	ana_sample_view sel;  /* the samples of opt.samples (a copy of `all`'s numbers when no filter) */
} ana_sampling;

/*
 * The heap profile (src/analyze/memory.c, docs/memory.md): HEAP chunks replayed. Full mode
 * gives exact requested bytes; sampled mode estimates per-stack numbers from the sampled
 * allocations (each stands for 1 / (1 - exp(-size / rate)) allocations of its size) while
 * the totals stay exact counters.
 */
typedef struct ana_mem_point {
	uint64_t t_ns;          /* CLOCK_MONOTONIC */
	uint64_t step;          /* steps completed */
	uint64_t live_bytes;    /* heap (usable bytes of live blocks) */
	uint64_t rss_bytes;     /* 0: unknown */
	uint64_t allocs, frees, alloc_bytes; /* since the session started */
	uint32_t process;
	uint32_t seq;           /* the order it was read in (ana_memory_finish() sorts by time) */
	uint8_t reason;         /* enum fmt_snap_reason */
} ana_mem_point;

/* A site's live bytes at a timeline point of its process, noted at each point for the sites
 * changed since the one before (the level holds until the next note). While reading,
 * `point` is the point's `seq` and `bytes` the level; ana_memory_finish() makes them sorted
 * point indices and changes of level (sites merged into one add up). */
typedef struct ana_mem_level {
	uint32_t point, site;
	double bytes;
} ana_mem_level;

/* The live bytes of one site over its process's timeline (points carried forward): the
 * ANA_MEM_SERIES sites whose live bytes rose highest. `slope` is per step when the global
 * trend is (the process's step points), else per second, over the same points. */
#define ANA_MEM_SERIES 8
typedef struct ana_mem_series {
	uint32_t site;
	size_t n;
	uint32_t *point;         /* indices into ana_memory.points */
	double *bytes;
	double max_bytes, last_bytes;
	uint32_t processes;      /* processes whose same stack (source-level) was a candidate */
	int has_trend, per_step;
	double slope, r2;
} ana_mem_series;

/* An allocation stack of one process. */
typedef struct ana_mem_site {
	uint32_t process;
	uint32_t raw;           /* handle for ana_samples_stack_of */
	uint32_t stack;         /* p->smp.stacks index once symbolised, or ANA_NONE */
	uint32_t node;          /* innermost open region node at the allocations, or ANA_NONE */
	double allocs, bytes;   /* allocations made here (sampled: estimated) */
	double live_count, live_bytes; /* unfreed at the end of the recording */
	double peak_count, peak_bytes; /* live at the process's peak */
	uint64_t temporary;     /* full mode: freed before the thread allocated anything else */
	uint64_t temporary_bytes; /* ... their bytes */
	int runtime;            /* the C runtime's or fennec's own: never a leak */
	int at_exec;            /* its process's session ended by exec: what it left live, the exec
				   released with the process's image; no leak */
	int cut_short;          /* its process's file was cut short (killed or crashed): the frees
				   after its last flush are lost, its blocks live at the end no leak */
	int scanned;            /* its process's file has the reachability scan (sampled mode:
				   of the sampled blocks, reach_* estimates from their shares) */
	double reach_count, reach_bytes; /* ... of live_*: still reachable at the end (no leak) */
	/* sampled mode: the variances of the estimates allocs, bytes, live_count, live_bytes
	 * (Horvitz-Thompson: a sampled block of weight w adds w (w - 1), times its size^2 for
	 * bytes); their square roots are the standard errors. 0 in full mode (exact) */
	double allocs_var, bytes_var, live_count_var, live_bytes_var;
	/* replay state */
	uint64_t mod, at_peak_p;
	double at_peak_count, at_peak_bytes;
	uint8_t changed;        /* its live numbers changed since its process's latest point */
} ana_mem_site;

typedef struct ana_memory {
	int present;
	unsigned mode;          /* enum fmt_mem_mode (of the first process with heap data) */
	uint64_t rate;          /* sampled: mean bytes between sampled allocations */
	uint64_t mmap_min;      /* mappings of at least this many bytes counted (--memory-mmap); 0: none */
	uint64_t allocs, frees, alloc_bytes, largest_bytes; /* exact, summed over processes */
	uint64_t peak_bytes;    /* full: requested bytes; sampled: usable bytes (largest process) */
	uint64_t peak_usable_bytes; /* the in-process counter's peak (usable bytes) */
	uint64_t peak_t_ns;     /* CLOCK_MONOTONIC */
	uint64_t peak_step;
	uint32_t peak_process;
	uint32_t peak_node;     /* region node active at the peak, or ANA_NONE */
	uint32_t peak_region;   /* names index of its innermost region, or ANA_NONE */
	uint64_t peak_rss_bytes; /* largest RSS seen (timeline, else getrusage) */
	uint64_t records, dropped, untracked;
	uint64_t dropped_allocs, dropped_frees; /* of `dropped`: ALLOC and FREE records */
	int drops_unknown;       /* a file did not say which records were dropped (older collector) */
	double leaked_bytes, leaked_count;   /* unfreed at the end, runtime excluded */
	double leaked_bytes_var, leaked_count_var; /* sampled mode: their variances (0 in full mode) */
	double runtime_bytes, runtime_count; /* unfreed at the end by the runtime */
	double cut_short_bytes, cut_short_count; /* live at the end of files cut short */
	uint32_t cut_short_procs;           /* such processes with blocks live at the end */
	double exec_bytes, exec_count;      /* live when their process exec'd another program */
	double reach_bytes, reach_count;    /* unfreed at the end but still reachable (scanned
					       processes, runtime excluded): no leak */
	uint32_t reach_procs;               /* processes whose blocks live at the end were scanned */
	uint32_t reach_unscanned;           /* full-mode processes ended by exit whose scan was not made */
	uint64_t reach_why;                 /* ... the reason of the first (enum fmt_reach_status) */
	uint64_t reach_ns, reach_root_bytes, reach_heap_bytes; /* the scans' time (longest) and reads */
	uint32_t exec_procs;
	uint64_t temporary, temporary_bytes; /* full mode: temporary allocations, their bytes */
	uint64_t sampled_allocs; /* sampled mode: allocations sampled (records read) */
	uint64_t standing_samples; /* ... of them, blocks under ~2.4x the rate, which stand for others */
	uint64_t end_live_bytes, end_live_count; /* exact (counters): live when the sessions ended,
						    usable bytes, the runtime's blocks included */
	double allocs_per_step;  /* NAN without steps */
	double alloc_rate_per_s;
	ana_mem_point *points;   /* the timeline, in time order */
	size_t npoints, points_cap;
	ana_mem_site *sites;
	uint32_t nsites, sites_cap;
	ana_mem_level *levels;   /* sites' live bytes at timeline points */
	size_t nlevels, levels_cap;
	ana_mem_series series[ANA_MEM_SERIES]; /* highest level first */
	uint32_t nseries;
	/* growth: live bytes regressed on steps (or seconds without steps) */
	int has_trend, trend_per_step;
	double slope, intercept, r2;
	double trend_span;        /* steps or seconds from the trend's first point to its last */
	double trend_growth;      /* bytes gained over them: slope x span, at most the heap's rise */
	double late_slope, late_r2; /* the same fit over the later half of the points */
	double tail_slope, tail_r2; /* and over the last quarter of the span (3 points or more) */
	uint32_t trend_points;
	void *priv;              /* replay state while reading */
} ana_memory;

typedef enum ana_severity { ANA_LOW = 1, ANA_MEDIUM = 2, ANA_HIGH = 3 } ana_severity;

typedef struct ana_kv {
	const char *key;
	double value;
} ana_kv;

typedef struct ana_finding {
	const char *type;
	ana_severity severity;
	char *subject;
	char *evidence;       /* a sentence with the numbers */
	ana_kv numbers[12];   /* the numbers themselves */
	int nnumbers;
	char *recommendation;
	double expected_gain_pct;   /* upper bound on the wall-time saving, % */
	double expected_gain_bytes; /* memory findings: the memory the fix would give back (0: none) */
} ana_finding;

/*
 * A window of the recording (`--since`, `--until`, `--last`, `--steps`; docs/json.md
 * `window`): what the options asked for. Times are ns from the start of the recording (its
 * first process's start), -1 where not given; steps are step numbers (0 is the step from
 * the first mark to the second), -1 where a side is open. ana_load resolves it into
 * ana_profile.window and refuses (FENNEC_EINVAL, the option and value in the message) a
 * window that is empty or outside the recording.
 */
typedef struct ana_window_spec {
	int set;                  /* any of the below was given */
	int64_t since_ns, until_ns, last_ns;
	int64_t step_lo, step_hi; /* inclusive */
	const char *since_arg, *until_arg, *last_arg, *steps_arg; /* as given, for messages */
} ana_window_spec;

/* The window resolved, on CLOCK_MONOTONIC: every event, sample, heap record, metric, system
 * and GPU record outside [begin_ns, end_ns] is left out, and a region open across an edge
 * counts its time inside (model.c). Without a window it covers the whole recording. */
typedef struct ana_window {
	int active;               /* a window was asked for */
	uint64_t begin_ns, end_ns;       /* CLOCK_MONOTONIC */
	uint64_t rec_begin_ns, rec_end_ns; /* the whole recording's (its first process) */
	uint64_t first_step;      /* the number of the window's first step (steps before it) */
	int to_end;               /* it reaches the end of the recording: "live at the end" holds */
	int bad;                  /* ana_load refused the window (a usage error: exit 2) */
} ana_window;

typedef struct ana_options {
	ana_window_spec window;   /* the part of the recording to analyse; zero: all of it */
	double hot_threshold_pct; /* hot_operation fires above this share (default 10) */
	int force;                /* analyse what could be read from a corrupt file */
	ana_sample_filter samples; /* the selection shown by the sample views (p->smp.sel) */
	uint32_t top;             /* rows of the sample tables in reports (0: the renderer's default) */
	double leak_threshold_bytes; /* memory_leak growth fires from this slope per step (or per second); default 10 MB */
	int keep_durations;       /* keep ana_node.durations after statistics (compare needs them) */
	double gpu_sync_threshold_pct; /* cpu_gpu_sync fires from this share of GPU busy time (0: 10) */
	double imbalance_threshold_pct; /* rank_imbalance fires from this imbalance (default 5) */
	double offcpu_threshold_pct;    /* off_cpu fires from this blocked share (default 30) */
	double outlier_factor;    /* step_variance: a step this many times the median is an outlier (default 1.5) */
	const char *data_regions; /* input_bound: comma-separated region names or globs; NULL: the default words */
	const char *calibration;  /* roofline ceilings (docs/roofline.md); NULL: the default file */
	double roofline_min_share_pct; /* memory_bound/compute_bound: regions from this share of wall (default 5) */
	int native;               /* Python programs: keep the interpreter's own C frames (--native) */
	double cpu_watts;         /* energy estimate: W per busy core (0: ANA_CPU_WATTS_DEFAULT, analyze/system.h) */
	double carbon_intensity;  /* g CO2e per kWh (0: ANA_GRID_GCO2_DEFAULT) */
} ana_options;

/*
 * A region placed on the roofline (roofline.c, docs/roofline.md): work annotated with
 * fennec_region_work over the region's self time. The roof fields are NaN without a
 * calibration.
 */
typedef struct ana_roof {
	uint32_t node;
	double flops, bytes, self_s;
	double ai;                    /* FLOP per byte (NaN without bytes) */
	double flops_per_s, bytes_per_s;
	double roof;                  /* FLOP/s at its intensity (bytes/s when it has no FLOP) */
	double roof_pct;              /* achieved as a % of the roof */
	double ridge;                 /* the ridge point of the ceilings used, FLOP per byte */
	int memory_bound;             /* below the ridge point (or no FLOP at all) */
	int one_thread;               /* ran on one thread: the one-thread ceilings apply */
	int fp32;                     /* mostly single-precision FLOP: the fp32 peak applies */
} ana_roof;

typedef struct ana_roofline {
	ana_roof *r;                  /* by self time, largest first */
	uint32_t n;
	int calibrated;               /* 1 loaded, 0 no file, -1 a file that could not be read */
	char path[4096];              /* the calibration file looked for */
	char error[256];              /* why it could not be read */
	ana_calib calib;
} ana_roofline;

/* fennec's cost to the program, in CPU ns (ana_overhead_file()) */
typedef struct ana_overhead {
	double writer_ns;   /* its writer threads' CPU: collector_cpu_ns */
	double events_ns;   /* recording regions, steps and metrics on the program's threads */
	double heap_ns;     /* the heap wrappers: counting every call, recording events */
	double samples_ns;  /* CPU samples: the kernel's part and the signal handler */
	double total_ns;
	int known;
} ana_overhead;

typedef struct ana_profile {
	ana_options opt;
	ana_window window;        /* what the analysis covers (the whole recording without one) */
	char **names;
	uint32_t nnames, names_cap;
	void *name_index;         /* hash: string -> name */
	ana_node *nodes;
	uint32_t nnodes, nodes_cap;
	void *node_index;         /* hash: (parent, name) -> node */
	ana_process *procs;
	uint32_t nprocs;
	ana_thread *threads;
	uint32_t nthreads, threads_cap;
	ana_metric *metrics;
	uint32_t nmetrics, metrics_cap;
	ana_finding *findings;
	uint32_t nfindings, findings_cap;
	/* PyTorch operators from the sampled stacks (operators.c), by self weight */
	struct ana_op *ops;
	uint32_t nops;
	char **warnings;
	uint32_t nwarnings, warnings_cap;
	/* steps, on the stepping thread of the first process: a step runs from one fennec_step()
	 * mark to the next, so `marks` marks make marks - 1 steps; the time from the process's
	 * start to the first mark is set-up, never a step */
	ana_u64vec step_ns;
	ana_u64vec step_start_ns; /* each step's start: the mark before it (CLOCK_MONOTONIC) */
	ana_u64vec step_items;    /* each step's items, given at the mark that ends it (0 when none) */
	ana_u64vec step_flags;    /* the flags of the mark that ends it (bit 0: its regions were recorded) */
	uint64_t steps, steps_recorded, items; /* items: of the steps (those given at the first mark are set-up's) */
	uint64_t marks, setup_ns;
	int has_items;
	uint32_t step_threads;    /* threads of the first process that marked steps; the step
				   * statistics are of the one with the most marks (steps_tid) */
	uint64_t steps_tid;
	uint32_t deep_threads;    /* threads that reached FMT_MAX_DEPTH open regions */
	size_t exact_held;        /* region durations kept exactly, all nodes (sketch.h's budget) */
	ana_dist step_dist;
	ana_sampling smp;
	ana_memory mem;
	struct ana_gpu *gpu;      /* GPU activity (analyze/gpu.h); NULL when no file has any */
	struct ana_critpath *cp;  /* the critical path of the steps (analyze/critpath.h); NULL without steps */
	struct ana_system *sys;   /* system metrics (analyze/system.h); NULL when no file has any */
	struct ana_energy *energy; /* energy and carbon (analyze/system.h); NULL only when out of memory */
	/* per thread and region node; per step of each process's stepping thread (model.c) */
	ana_tnode *tnodes;
	uint32_t ntnodes, tnodes_cap;
	ana_step_node *step_nodes;
	size_t nstep_nodes, step_nodes_cap;
	/* recordings merged (ranks), processes ordered by rank then start (ranks.c) */
	ana_rank *ranks;
	uint32_t nranks;
	ana_balance balance;
	ana_roofline roof;        /* roofline.c */
	/* summary */
	uint64_t wall_ns, cpu_user_ns, cpu_sys_ns, dropped, events;
	uint64_t collector_cpu_ns;   /* fennec's own CPU (writer threads), files that give it */
	uint32_t collector_known;    /* files that give it (format 1.5) */
	ana_overhead overhead;       /* fennec's whole cost, all processes (overhead.c) */
	int cut_short;
} ana_profile;

/* The files to load for `paths` (src/analyze/files.c), in model order: by rank, each
 * recording's first process first, then by start time. *out is malloc'd, each string too. The
 * live metrics (view/metrics.c) list a growing recording's files with it. */
int ana_list_files(const char *const *paths, size_t npaths, char ***out, size_t *nout, fmt_error *err,
		   ana_profile *p);

/*
 * What fennec cost the recorded program (overhead.c; docs/json.md, `summary.overhead`): its
 * writer's CPU (collector_cpu_ns) and its work on the program's threads, measured (signal
 * handlers, heap records) or counted in the file times a cost the collector calibrated
 * (region events, heap calls, the kernel's part of a sample). `known`: every file gives it
 * (format 1.8, a COST chunk, and 1.5's collector CPU); else the parts are 0.
 */
int ana_overhead_file(const fmt_file *f, ana_overhead *o);
void ana_overhead_sum(ana_profile *p);

/*
 * Load the recording at `path`: the file and every sibling `path.<pid>.<n>` with the
 * same recording id, or every profile in `path` if it is a directory. A directory may
 * hold several recordings (one per rank of an MPI job, docs/ranks.md): they are merged,
 * and ranks.c compares them. A `path` that does not exist but has per-rank files beside
 * it (`run.fnc` -> `run.rank0.fnc`, `run.rank1.fnc`, ... as `fennec record` names them
 * under mpirun) loads those. Returns 0, or a FENNEC_E* code with the message in err (the
 * profile is then still freed by the caller). Warnings (cut-short files, unreadable
 * siblings, two recordings of one rank) go to p->warnings.
 */
int ana_load(const char *path, const ana_options *opt, ana_profile *p, fmt_error *err);
/* The same over several paths (files or directories), merged into one profile. */
int ana_load_paths(const char *const *paths, size_t npaths, const ana_options *opt, ana_profile *p, fmt_error *err);

void ana_profile_free(ana_profile *p);



/* Helpers shared with the renderers (util.c). */
const char *ana_severity_name(ana_severity s);
const char *ana_kind_name(unsigned kind);
const char *ana_origin_name(uint64_t origin);
const char *ana_end_name(const fmt_file *f);
void ana_dist_compute(ana_dist *d, double *v, size_t n);
void ana_dist_compute_u64(ana_dist *d, uint64_t *v, size_t n);
/* A duration for reading, "12.34 ms", into buf; returns buf. */
const char *ana_fmt_ns(double ns, char *buf, size_t n);
/* Bytes for reading, "12.3 MiB" (binary units), into buf; returns buf. */
const char *ana_fmt_bytes(double b, char *buf, size_t n);

/* A site's frames, outermost first, are p->smp.stacks[site->stack]; its leaf function name
 * (the first frame outside the allocator), or "[unknown]" (memory.c). */
const char *ana_mem_site_name(const ana_profile *p, const ana_mem_site *s);

/* Heap sites in order of a measure (memsites.c), for the renderers and the rules: up to
 * `max` indices into p->mem.sites with a nonzero measure, largest first. Runtime sites are
 * left out of ANA_MEM_LIVE (they are not leaks), and so are the sites of files cut short.
 * Returns the count. */
enum ana_mem_by { ANA_MEM_BYTES = 0, ANA_MEM_LIVE = 1, ANA_MEM_PEAK = 2, ANA_MEM_TEMP = 3,
		  ANA_MEM_CUT = 4, /* live at the end of files cut short, runtime left out */
		  ANA_MEM_REACH = 5, /* live at the end and still reachable, runtime left out */
		  ANA_MEM_EXEC = 6 /* live when their process exec'd another program, runtime left out */ };
uint32_t ana_mem_top(const ana_profile *p, int by, uint32_t *idx, uint32_t max);
/* A site's measure for `by` (bytes) and its count in *count. ANA_MEM_LIVE is what was lost
 * (unfreed and unreachable) when its process was scanned, else all that was unfreed. */
double ana_mem_measure(const ana_mem_site *s, int by, double *count);
/* The variance of ana_mem_measure()'s estimate (sampled mode; 0 when exact or unknown), of
 * its count in *count_var. */
double ana_mem_measure_var(const ana_mem_site *s, int by, double *count_var);
/* Why a reachability scan was not made (enum fmt_reach_status), for people. */
const char *ana_reach_why(uint64_t status);

/* The same as rows for people: sites that `key` gives the same nonzero key (what the row
 * shows: the allocating function, line and caller, and region) are one row, their
 * measures summed, with the number of processes they are in (a fork-based loader's
 * workers, a launcher's children) and one site to name them by. Up to `max` rows, largest
 * first; returns the count. */
typedef struct ana_mem_row {
	uint32_t site;          /* the first site of the row: its stack, region and process */
	double bytes, count;    /* summed over the row's sites */
	double bytes_var, count_var; /* sampled mode: the variances of those estimates (ANA_MEM_LIVE
				      * and ANA_MEM_BYTES; 0 otherwise and in full mode) */
	uint32_t processes;     /* how many processes the row's sites are in */
	uint32_t sites;         /* how many sites (allocation stacks) it has */
} ana_mem_row;
uint32_t ana_mem_rows(const ana_profile *p, int by, ana_mem_row *rows, uint32_t max,
		      uint64_t (*key)(const ana_profile *p, const ana_mem_site *s));
/* A key for ana_mem_rows(): of what a row shows (strings: function, line, caller...) and
 * its region node; never 0. */
uint64_t ana_mem_key(const char *const *parts, size_t n, uint32_t node);

/* GPU activity's model is analyze/gpu.h. */
struct ana_gpu;

/*
 * Aggregate the samples selected by `flt` (NULL: all) into *v: hot functions, hot lines,
 * the call tree, per region node and per thread numbers. A filter that selects nothing
 * gives an empty view. Returns 0 or FENNEC_ENOMEM; free with ana_sample_view_free().
 */
int ana_sample_view_build(const ana_profile *p, const ana_sample_filter *flt, ana_sample_view *v);
void ana_sample_view_free(ana_sample_view *v);

/* Name of a sample kind: "cpu", "offcpu"; of a sampling mode: "off", "cpu", "wall"; of a
 * module status: "ok", "missing", "build id differs", "no symbols". */
const char *ana_sample_kind_name(unsigned kind);
const char *ana_sample_mode_name(uint64_t mode);
const char *ana_module_status_name(int status);
/* How samples were taken: "perf_event task-clock", "POSIX CPU timer", "wall-clock thread". */
const char *ana_sample_source_name(uint64_t source);

#endif

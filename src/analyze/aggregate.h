/*
 * aggregate.h - how the model is built, for src/analyze/ only (renderers read the model
 * through analyze/analyze.h). model.c replays each process file and hands the events it
 * does not aggregate itself to the aggregators (samples, heap, GPU, system metrics, the
 * critical path), calls each one's end-of-process hook after each file, their discard
 * when a file fails, their finish once every file is read, and then the passes over the
 * finished model (ranks, roofline, rules). Every hook returns 0 or FENNEC_ENOMEM unless
 * it says otherwise.
 */
#ifndef FENNEC_ANALYZE_AGGREGATE_H
#define FENNEC_ANALYZE_AGGREGATE_H

#include "analyze/util.h"
#include "analyze/critpath.h"
#include "analyze/system.h"

/* The roofline of the annotated regions (roofline.c): after the statistics. 0 or ENOMEM. */
int ana_roofline_build(ana_profile *p);

/*
 * Ranks and processes (src/analyze/ranks.c), called by ana_load once the regions are
 * final: per-process and per-rank totals, steps and top regions, and p->balance. Returns
 * 0 or FENNEC_ENOMEM.
 */
int ana_ranks(ana_profile *p);
/* Whether a region name reads as communication or waiting on other ranks (MPI_*, barrier,
 * allreduce, wait, sync, ...: docs/bottlenecks.md); such regions are not work. */
int ana_name_is_comm(const char *name);
/* Whether a region name reads as data loading: its words (split at non-letters and at
 * lower-to-upper case changes) begin with load, data, batch, fetch, read, input or
 * prefetch, or are io (docs/bottlenecks.md input_bound); `list`, when not NULL, is a
 * comma-separated list of names or globs used instead. */
int ana_name_is_data(const char *name, const char *list);
/* Whether a module (by its path) is fennec's collector library, libfennec*; and whether it
 * is a wrapper the program's calls pass through on their way to the code they call:
 * fennec's library or a sanitizer's runtime (libasan, libtsan, libubsan, liblsan). */
int ana_module_is_fennec(const char *path);
/* Whether a module is the system's: under /lib, /usr/lib (and lib64), the vDSO, the kernel. */
int ana_module_is_system(const char *path);
int ana_module_is_wrapper(const char *path);

/* Run the rules (docs/bottlenecks.md) and fill p->findings. */
void ana_rules(ana_profile *p);

/*
 * Samples (src/analyze/samples.c). ana_load calls ana_samples_event for every
 * FMT_EV_SAMPLE event of process `proc` while reading (the raw stack is kept, interned),
 * then ana_samples_finish once, after every file is read and the region nodes are final:
 * it symbolises per process (src/symbol/), fills p->smp and its views `all` and `sel`,
 * and warns about dropped and truncated samples and unsymbolised modules. Both return 0 or
 * FENNEC_ENOMEM.
 */
int ana_samples_event(ana_profile *p, uint32_t proc, const fmt_file *f, const fmt_event *ev);
int ana_samples_finish(ana_profile *p);
/* The PyTorch operator table (p->ops) from the symbolised stacks (operators.c). */
int ana_operators(ana_profile *p);
/* Intern a raw stack of process `proc` (return addresses, innermost first; heap stacks;
 * py, npy: its Python frames, fmt_pyframe values, or none) for symbolisation by
 * ana_samples_finish, in *handle. After the finish, ana_samples_stack_of() gives its index
 * in p->smp.stacks (ANA_NONE if unknown). */
int ana_samples_intern_stack(ana_profile *p, uint32_t proc, const fmt_file *f, const uint64_t *frames, uint32_t n,
			     const uint64_t *py, uint32_t npy, int truncated, uint32_t *handle);
uint32_t ana_samples_stack_of(const ana_profile *p, uint32_t proc, uint32_t handle);
/* The region node of a path of region site ids of file f (outermost first): the deepest
 * node found, ANA_NONE when the first is unknown. */
uint32_t ana_path_node(ana_profile *p, const fmt_file *f, const uint32_t *sites, uint32_t n);

/*
 * Heap (src/analyze/memory.c). ana_load passes every ALLOC, FREE and HEAP_SNAP event to
 * ana_memory_event while reading, ana_memory_end_process after each file, and calls
 * ana_memory_finish after ana_samples_finish. Return 0 or FENNEC_ENOMEM.
 */
int ana_memory_event(ana_profile *p, uint32_t proc, const fmt_file *f, const fmt_event *ev);
int ana_memory_end_process(ana_profile *p, uint32_t proc, const fmt_file *f);
int ana_memory_finish(ana_profile *p);
/* Forget what was read of process `proc` (its file failed to load and is skipped). */
void ana_memory_discard(ana_profile *p, uint32_t proc);
void ana_memory_free(ana_profile *p);
/*
 * GPU (src/analyze/gpu.c; the model is in analyze/gpu.h). ana_load passes every FMT_EV_GPU
 * event to ana_gpu_event while reading, calls ana_gpu_end_process after each file (it may
 * read the file once more, for the regions of synchronising calls and of the memory peak)
 * and ana_gpu_finish after ana_memory_finish. Return 0 or FENNEC_ENOMEM.
 */
int ana_gpu_event(ana_profile *p, uint32_t proc, const fmt_file *f, const fmt_event *ev);
int ana_gpu_end_process(ana_profile *p, uint32_t proc, const fmt_file *f);
int ana_gpu_finish(ana_profile *p);
void ana_gpu_discard(ana_profile *p, uint32_t proc);
void ana_gpu_free(ana_profile *p);
/* The GPU rules of docs/bottlenecks.md (gpu_rules.c), run by ana_rules. */
void ana_gpu_rules(ana_profile *p);
/* The rules on the operating system's work for the program: kernel_time, rss_above_heap (sys_rules.c). */
void ana_kernel_rules(ana_profile *p);
/* The share of function `func`'s on-CPU self samples taken in the kernel (page faults,
 * system calls), 0 without any. */
double ana_func_kernel_pct(const ana_profile *p, uint32_t func);
/* Per region node, the on-CPU time its samples (nested regions' included) spent in the
 * kernel, ns; an array of p->nnodes the caller frees, NULL when out of memory. */
double *ana_node_kernel_ns(const ana_profile *p);

/* Forget the samples kept for process `proc` (its file failed to load and is skipped). */
void ana_samples_discard(ana_profile *p, uint32_t proc);
/* Free p->smp (called by ana_profile_free). */
void ana_samples_free(ana_profile *p);

/*
 * System metrics (src/analyze/system.c; the model is in analyze/system.h). While reading:
 * every FMT_EV_SYS and FMT_EV_ENERGY event of process `proc`; after every file and the
 * steps, ana_sys_finish: totals, rates, energy and carbon.
 */
int ana_sys_event(ana_profile *p, uint32_t proc, const fmt_file *f, const fmt_event *ev);
int ana_sys_finish(ana_profile *p);
void ana_sys_discard(ana_profile *p, uint32_t proc);
void ana_sys_free(ana_profile *p);
/* The system rules (io_bound, cpu_starved, swapping: docs/bottlenecks.md), by ana_rules. */
void ana_sys_rules(ana_profile *p);

/*
 * The critical path's collection (src/analyze/critpath.c; the model is in
 * analyze/critpath.h), from model.c's replay of the first process's file. ana_cp_begin
 * allocates p->cp before the file is read; then every region begin and end of thread
 * `thread` (p->threads index) at `ticks`, with the innermost region node open after it
 * (ANA_NONE: none), every GPU record and every step mark of that process. A process with no
 * step mark by the time a quarter of the budget is used stops collecting
 * (ana_cp_collecting turns 0).
 */
int ana_cp_begin(ana_profile *p);
int ana_cp_region(ana_profile *p, uint32_t thread, uint64_t ticks, uint32_t node);
int ana_cp_gpu(ana_profile *p, const fmt_gpu *r);
void ana_cp_step_seen(ana_profile *p);
static inline int ana_cp_collecting(const ana_profile *p) { return p->cp && p->cp->priv; }
/* After the statistics: the walk over every step, the aggregation, the two chains. The
 * collection state is freed. Without steps p->cp stays NULL. */
int ana_critpath_build(ana_profile *p);
void ana_critpath_free(ana_profile *p);

#endif

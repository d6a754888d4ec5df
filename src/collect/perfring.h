/*
 * perfring.h - the ring source of CPU sampling (perfring.c): per-thread perf_event
 * counters whose samples (user registers and a copy of the top of the user stack) the
 * kernel writes into a ring mapped for that thread, with no signal, and the writer-side
 * unwinder that turns them into call stacks. sample.c owns the threads; this file owns
 * the rings and libunwind's remote address space. Everything here but col_pr_open and
 * col_pr_fill_pct runs on the writer (under the session's flush lock), one call at a time.
 */
#ifndef FENNEC_PERFRING_H
#define FENNEC_PERFRING_H

#include <stdint.h>
#include <sys/types.h>

typedef struct col_pr col_pr;

typedef struct col_pr_cfg {
	uint64_t period_ns;     /* task-clock sampling period */
	uint32_t stack_bytes;   /* user stack copied per sample (multiple of 8, < 64 KiB) */
	uint32_t pages;         /* data pages wanted (power of two) */
	uint32_t min_pages;     /* as few as this when locked memory is short */
	int exclude_kernel;
} col_pr_cfg;

/*
 * Open and map the counter of thread `tid` of this process, enabled. `move_fd` may move
 * the descriptor (returns the new one). Returns NULL when the kernel refuses the event or
 * the mapping (the caller falls back to a signal source).
 */
col_pr *col_pr_open(pid_t tid, const col_pr_cfg *cfg, int (*move_fd)(int));

/* FENNEC_CFI, checked at a session's start (before its header): a value the unwinder
 * cannot use is said (col_config_warn()); it takes the default, 1. */
void col_pr_env(void);

/* Unmap and close. */
void col_pr_free(col_pr *r);

/* In a fork child: the mapping was not inherited (perf rings are VM_DONTCOPY); close the
 * descriptor and forget the rest. */
void col_pr_forget(col_pr *r);
void col_pr_set_period(col_pr *r, uint64_t period_ns); /* the budget's stride: a new period */

/* Its data bytes (fewer than asked when locked memory was short). */
uint64_t col_pr_bytes(const col_pr *r);

/* How full the ring is, in percent of its data pages. Any thread may ask. */
unsigned col_pr_fill_pct(const col_pr *r);

/* One unwound sample: time in CLOCK_MONOTONIC ns, flags FMT_S_* (EXACT_PC, TRUNCATED),
 * frames innermost first. */
typedef void (*col_pr_emit)(void *ctx, pid_t tid, uint64_t mono_ns, unsigned flags, const uint64_t *frames,
			    uint32_t nframes);

/*
 * Unwind and hand to `emit` the samples of rings[0..n) whose time is at most `cut_ns`
 * (later ones stay for the next call), in each ring's order, keeping at most `depth`
 * frames. Returns the samples the kernel reported lost (PERF_RECORD_LOST) meanwhile.
 * Holds the dynamic loader's lock while it reads code and unwind tables, so that no
 * library can be unloaded under it.
 */
uint64_t col_pr_drain(col_pr **rings, size_t n, uint64_t cut_ns, uint32_t depth, col_pr_emit emit, void *ctx);

#endif

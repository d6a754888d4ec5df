/*
 * replay.h - one process's events again, in file order, for the clients that need them
 * call by call (the Chrome trace and speedscope exporters, the timeline) or the regions
 * open at given times (GPU attribution): the replay reads the file once through the
 * reader, keeps each thread's region stack, names the sites, closes what is still open at
 * a thread's end once, and applies the profile's window, so that a client writes what it
 * is given and rebuilds nothing. docs/internals/architecture.md.
 *
 * Ownership: the event handed to the callback, and every string it points to, live until
 * the callback returns.
 */
#ifndef FENNEC_REPLAY_H
#define FENNEC_REPLAY_H

#include "analyze/analyze.h"

/* What a replay delivers (ana_replay_opts.what). */
#define ANA_RP_REGIONS 1u /* region begins and ends */
#define ANA_RP_MARKS 2u   /* steps, counters, gauges, values */
#define ANA_RP_NVTX 4u    /* NVTX ranges and marks (GPUX records); see ana_replay */
#define ANA_RP_GPU 8u     /* GPU kernels, copies and memsets (GPU records); see ana_replay */
#define ANA_RP_ENDS 16u   /* region ends only, each with its begin's time: whole calls */

enum ana_rp_kind {
	ANA_RP_BEGIN = 1,
	ANA_RP_END,
	ANA_RP_STEP,
	ANA_RP_COUNTER,
	ANA_RP_GAUGE,
	ANA_RP_VALUE,
	ANA_RP_NVTX_START,
	ANA_RP_NVTX_END,
	ANA_RP_NVTX_MARK,
	ANA_RP_GPU_WORK,
};

typedef struct ana_rp_event {
	unsigned kind;        /* enum ana_rp_kind */
	uint32_t thread;      /* index into the file's threads; UINT32_MAX for NVTX */
	uint32_t g;           /* the model's thread (index into p->threads), ANA_NONE: none (and GPU_WORK) */
	uint64_t tid;         /* the thread's id (NVTX: the thread that started the range or made the mark) */
	uint64_t ns;          /* since the recording's start (ana_replay_t0_ns), never backwards on a thread */
	uint32_t site;        /* BEGIN, END and metrics: the site id */
	const char *name;     /* the site's name ("<site N>" when the file defines none); NVTX_START and
			       * NVTX_MARK: the message; NULL for STEP and NVTX_END */
	uint32_t depth;       /* BEGIN, END: the regions open around it (0: a top-level region) */
	uint64_t begin_ns;    /* END: the time its BEGIN was delivered at */
	int unfinished;       /* END, NVTX_END: still open when its thread (the file) ended, inside the window */
	uint64_t step;        /* STEP: the mark's number on its thread from 1 (marks before the window count) */
	uint32_t flags;       /* STEP: the operand bits (1: recorded, 2: items) */
	uint64_t items;       /* STEP with flags & 2 */
	double value;         /* COUNTER: the running total (this process, the selected threads, from the
			       * start of the recording); GAUGE, VALUE: the value */
	uint32_t range;       /* NVTX_START, NVTX_END: the range's number in this replay, from 0 in start order */
	uint64_t end_tid;     /* NVTX_END: the thread that ended it (0: never ended) */
	const fmt_gpu *gpu;   /* GPU_WORK: the record (ns is its start) */
} ana_rp_event;

/* Return nonzero to stop the replay (ana_replay then returns that value). */
typedef int (*ana_replay_fn)(void *ctx, const ana_rp_event *ev);

typedef struct ana_replay_opts {
	unsigned what;        /* ANA_RP_* bits */
	int has_tid;          /* only the events of thread `tid` (NVTX: the ranges it started, its marks) */
	uint64_t tid;
	int whole;            /* the file as it is: no window, and what a file that fails to read
			       * again (it changed since the model read it) gives up to the failure,
			       * closed as at its threads' end, with the reader's error */
} ana_replay_opts;

/* The recording's time origin, which ana_rp_event.ns counts from: the earliest process
 * start (CLOCK_MONOTONIC ns), a window or not. */
uint64_t ana_replay_t0_ns(const ana_profile *p);

/*
 * Read process `proc`'s file (p->procs[proc].file.path, with the flags the model read it
 * with) and hand fn its events, in file order; each thread's in time order. Names and the
 * clock fit are the model's (its copy of the file is final).
 *
 * Regions: every BEGIN has its END. A region still open at its thread's end (a run cut
 * short) ends there, `unfinished`, after the file is read: thread by thread, innermost
 * first. With a window (p->window.active) nothing outside it is delivered, and a region
 * open across an edge is delivered clipped: as beginning at the window's start (before
 * the thread's first event inside it) or ending at its end. Counters count from the start
 * of the recording, steps too.
 *
 * NVTX (ANA_RP_NVTX) comes from GPUX chunks, which the writer flushes out of time order
 * with the threads' events: ask for it alone, in a replay of its own before the others,
 * to sort it. Starts, marks and ends are delivered in file order (a start delivered late
 * when it is clipped to the window's start), an end with its start's range number; a
 * range never ended ends at the file's end, after the file is read.
 *
 * GPU work (ANA_RP_GPU): kernels, copies and memsets in file order, which is not time
 * order (CUPTI's buffers), each at its start; with a window, those that start inside it.
 *
 * Returns 0, the callback's value, FENNEC_ENOMEM, or the reader's error with err filled
 * in (with --force, p->opt.force, a damaged file gives what precedes the damage and 0).
 */
int ana_replay(const ana_profile *p, uint32_t proc, const ana_replay_opts *o, ana_replay_fn fn, void *ctx,
	       fmt_error *err);

/* One question to ana_replay_open_at: which regions were open on thread `tid` at `ticks`
 * (the file's clock), after every region event of that thread up to that tick. */
typedef struct ana_rp_at {
	uint64_t tid;
	uint64_t ticks;
} ana_rp_at;

/* The answer to question i: the sites open, outermost first (n 0: none). Return nonzero
 * to stop. */
typedef int (*ana_rp_at_fn)(void *ctx, size_t i, const uint32_t *sites, uint32_t n);

/*
 * Answer the n questions q about process `proc`'s file in one read of it, the whole file
 * (no window): fn once per question, in the order the replay comes to them (a thread's in
 * time order, then those past its last region event). A tid that two threads of the file
 * held in turn: a question is answered from the one whose region event comes next after
 * its tick in the file (past them all, the last one seen). A file that fails to read again
 * has its questions answered from what preceded the failure. Returns 0, the callback's
 * value or FENNEC_ENOMEM.
 */
int ana_replay_open_at(const ana_profile *p, uint32_t proc, const ana_rp_at *q, size_t n, ana_rp_at_fn fn, void *ctx);

#endif

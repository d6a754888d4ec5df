/*
 * pipe.h - the reader's second core: the region, step and metric events decode_segment
 * produces go, in batches, to a thread that runs the caller's callback on them, while the
 * reading thread checksums, decompresses and decodes the chunks after them. The callback
 * sees the same events in the same order as without it; every other callback, and every
 * chunk that changes the fmt_file's tables, waits until the queue is drained
 * (fmt_pipe_drain), so the callback never runs beside a change it could read.
 * Internal to reader.c.
 */
#ifndef FENNEC_FORMAT_PIPE_H
#define FENNEC_FORMAT_PIPE_H

#include "format/reader.h"

/* One queued event: what decode_segment sets of a BEGIN, END, STEP, COUNTER, GAUGE or VALUE. */
typedef struct fmt_pipe_ev {
	uint8_t type, flags;
	uint32_t thread, id;
	uint64_t ticks, u;
	union {
		int64_t i;
		double f;
	};
} fmt_pipe_ev;

#define FMT_PIPE_BATCH 2048
#define FMT_PIPE_MIN_BYTES (1u << 20) /* smaller files are read on one thread */
#define FMT_PIPE_SLOTS 32

typedef struct fmt_pipe fmt_pipe;

/* A pipe delivering to fn(ctx, f, ...) on its own thread, or NULL (no thread: the caller
 * delivers itself). Only when FENNEC_ANALYZE_THREADS=2 or more is in the environment (pipe.c
 * says why). */
fmt_pipe *fmt_pipe_start(fmt_event_fn fn, void *ctx, const fmt_file *f);
/* The next free event of the batch being filled (publishing full batches as it goes), or
 * NULL once the callback failed: fmt_pipe_drain then says how. */
fmt_pipe_ev *fmt_pipe_next(fmt_pipe *p);
/* Publish what is queued and wait until the callback has taken all of it. Returns the
 * callback's first non-zero result, 0 if none. */
int fmt_pipe_drain(fmt_pipe *p);
/* Drain, end the thread, free; returns what fmt_pipe_drain would. NULL is fine. */
int fmt_pipe_stop(fmt_pipe *p);

#endif

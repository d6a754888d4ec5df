/*
 * gpu.h - GPU activity in the collector (docs/gpu.md; design: docs/internals/gpu.md).
 * gpu_cupti.c turns CUPTI's activity records into GPU chunk records (format 1.3) and is
 * built with CUPTI's headers only where they were found; gpu.c hands those records, NVML
 * samples and GPU timer results to the writer. Nothing here runs on a program thread's
 * hot path: CUPTI delivers records on its own threads, the writer reads NVML.
 */
#ifndef FENNEC_COLLECT_GPU_H
#define FENNEC_COLLECT_GPU_H

#include "collect/collect.h"

#include <wchar.h>

enum col_gpu_mode { COL_GPU_OFF = 0, COL_GPU_ALL = 1, COL_GPU_KERNELS = 2 };

/* "off", "on" / "all" / "1", "kernels"; -1 if none of those. */
int col_gpu_mode_parse(const char *s);
/* The mode of this process ($FENNEC_GPU, read once per session). */
int col_gpu_mode(void);

/*
 * A batch: the GPU records of one producer's round (one CUPTI buffer, one NVML round),
 * encoded as a GPU chunk body and handed to the writer whole, which makes one chunk of
 * it. Producers hold the producer lock from begin to end, so that a string is defined in
 * an earlier (or the same) batch than any record that names it: batches reach the file in
 * the order they ended. The hand-off itself is a lock-free stack the writer empties.
 */
typedef struct col_gpu_batch {
	struct col_gpu_batch *next;
	cm_buf body;
	uint64_t prev_ns;      /* start of the last timed record (delta coding) */
	uint64_t records;
	uint64_t seq;          /* order of begin */
} col_gpu_batch;

/* Begin a batch (takes the producer lock); NULL when no session records GPU activity or
 * memory ran out: then the records given to it are counted as dropped. */
col_gpu_batch *col_gpu_batch_begin(void);
/* Add a timed record; `name` (may be NULL) is interned and r->name set to its id. */
void col_gpu_batch_add(col_gpu_batch *b, fmt_gpu *r, const char *name);
void col_gpu_batch_device(col_gpu_batch *b, const fmt_gpu_device *d);
/* Hand the batch to the writer and release the lock (b may be NULL). */
void col_gpu_batch_end(col_gpu_batch *b);
/* Counts for the chunk prefix: records CUPTI dropped, records of untranslated kinds,
 * records fennec lost. */
void col_gpu_count(uint64_t cupti_dropped, uint64_t unknown, uint64_t dropped);

/* The CUPTI side tells the writer how its times were mapped (docs/format.md). */
void col_gpu_set_clock(uint64_t cupti_version, unsigned clock, int64_t offset_ns, uint64_t offset_error_ns);

/* Session hooks (session.c). */
void col_gpu_prepare(void);        /* session begin: a new file, so strings and batches restart */
void col_gpu_start(void);          /* after the writer started: NVML */
void col_gpu_tick(uint64_t now_ns); /* writer: an NVML round when the period is over */
/* Writer: NVML device i's energy counter (mJ since the driver loaded): 0; 1 when the device
 * has none; -1 when there is no device i (or NVML is not in use). */
int col_gpu_energy_mj(unsigned i, uint64_t *mj);
/* col_gpu_drain's `final`: the writer's periodic drain, the session's last, or the last at
 * _exit, which calls neither CUDA nor NVML (session.c, session_end()) */
enum { COL_GPU_DRAIN_PERIODIC = 0, COL_GPU_DRAIN_FINAL = 1, COL_GPU_DRAIN_EXIT = 2 };
void col_gpu_drain(void (*emit)(unsigned type, cm_buf *raw), int final);
void col_gpu_stop(void);           /* session end, before the last drain: CUPTI flushed and torn down */
void col_gpu_resume(void);         /* after a final drain for an exec that failed: the session goes on */
void col_gpu_atfork_child(void);

/*
 * CUPTI (gpu_cupti.c). col_cupti_flush asks CUPTI for its completed buffers (forced: also
 * incomplete ones); col_cupti_stop flushes and disables every activity kind, so the
 * program runs at full speed afterwards. Both are no-ops when CUPTI is not loaded.
 */
void col_cupti_flush(int forced);
void col_cupti_stop(void);
/* Activity on (1) or off (0): the writer follows the step schedule with it. */
void col_cupti_gate(int on);

/* 1 from a session's start to its last drain: GPU records are taken. */
int col_gpu_recording(void);

/*
 * NVTX start/end ranges and marks (gpu_nvtx.c), queued by program threads for the writer.
 * col_nvtx_drain appends the queued records to a GPUX chunk body (out NULL: discards them);
 * writer thread only, or while no writer runs. col_nvtx_dropped: records lost to a full
 * queue since the last col_nvtx_reset (session start).
 */
void col_nvtx_drain(cm_buf *out, uint64_t *prev_ns);
uint64_t col_nvtx_dropped(void);
void col_nvtx_reset(void);
void col_nvtx_atfork_child(void);
/* A wide (UTF-32) string as UTF-8 in out[n], NUL-terminated, cut at a whole character;
 * values that are not Unicode scalars become U+FFFD. Returns the bytes written. */
size_t col_nvtx_utf8(char *out, size_t n, const wchar_t *w);

/* GPU timers (gpu_timer.c): the writer resolves the timers whose events completed. */
void col_gpu_timers_poll(void);

#endif

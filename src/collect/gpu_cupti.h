/*
 * gpu_cupti.h - the CUPTI side of GPU collection (gpu_cupti.c), for that file and for the
 * test that drives it with activity records built from CUPTI's own structs
 * (tests/gpu/cupti_test.c). Needs CUPTI's headers.
 */
#ifndef FENNEC_COLLECT_GPU_CUPTI_H
#define FENNEC_COLLECT_GPU_CUPTI_H

#include <cupti.h>

#include "collect/gpu.h"

enum col_cupti_result {
	COL_CUPTI_SKIP = 0,       /* a kind fennec does not record (counted as unknown) */
	COL_CUPTI_RECORD = 1,     /* a timed record in *g; *name is the string it names, or NULL */
	COL_CUPTI_DEVICE = 2,     /* a device description in *dev (its name borrowed from rec) */
	COL_CUPTI_INCOMPLETE = 3, /* a record CUPTI could not complete (no end time): dropped */
};

/*
 * Translate one CUPTI activity record into the GPU chunk's terms: a pure function of its
 * arguments. `offset_ns` is added to every CUPTI time (0 when CUPTI already reads
 * CLOCK_MONOTONIC). API records get no name here: it comes from cuptiGetCallbackName.
 */
int col_cupti_translate(const CUpti_Activity *rec, int64_t offset_ns, fmt_gpu *g, fmt_gpu_device *dev,
			const char **name);

/* dlopen libcupti (`path`, or "libcupti.so" from the loader's path) and check its API
 * version against this build's. 0, or -1 with the reason in why. */
int col_cupti_load(const char *path, char *why, size_t n);
/* CLOCK_MONOTONIC minus cuptiGetTimestamp(), *error_ns its uncertainty (after a load). */
int64_t col_cupti_calibrate(uint64_t *error_ns);
/* The buffer-completed callback: every record of buffer[0, valid) translated and handed to
 * the writer; frees buffer (it came from malloc). */
void col_cupti_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid);
/* Load, map the clock, register the callbacks and enable the kinds of `mode`. */
int col_cupti_start(int mode, char *why, size_t n);

#endif

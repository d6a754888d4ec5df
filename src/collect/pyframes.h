/*
 * pyframes.h - Python frames in samples (pyframes.c): the frames of the CPython
 * interpreter running on the sampled thread, read from the signal handler. Design:
 * docs/internals/python.md.
 */
#ifndef FENNEC_PYFRAMES_H
#define FENNEC_PYFRAMES_H

#include <stdint.h>

#include "common/common.h"

#define COL_PY_MAX_FRAMES 256 /* Python frames kept per sample (innermost first) */
#define COL_PY_HEAP_FRAMES 64 /* per heap stack */
/* A Python frame among a heap stack's frames (heap_hooks.c): 0xfd in the top byte, which no
 * address has; bit 55 the entry mark, bits 24-54 the code id, bits 0-23 the line. */
#define COL_PY_TAG 0xfd00000000000000ull

/* Detect the interpreter of this process and its layout; reads FENNEC_PYTHON. Called at
 * every session's start, before the header is written. */
void col_py_prepare(void);
/* PY_VERSION_HEX of the interpreter (0: no CPython in this process). */
uint64_t col_py_version(void);
/* enum fmt_py_status: why frames are (not) taken. Meaningful when col_py_version(). */
unsigned col_py_status(void);
/* Python frames are being taken (an interpreter of a known layout, not disabled). */
int col_py_on(void);
/*
 * On the sampled thread, from a signal handler: the thread's Python frames, innermost
 * first, as fmt_pyframe values (format.h); *flags gets FMT_S_PYTHON when the thread has a
 * Python thread state, FMT_S_GIL when it holds the GIL, FMT_S_PYCUT when the chain was cut
 * (a frame that failed validation, or the limit). Async-signal-safe, bounded.
 */
uint32_t col_py_walk(uint64_t *out, uint32_t max, unsigned *flags);
/* The same, from the thread's own code between two of the interpreter's steps (an
 * allocation, a sleeping call's entry): the frames are complete there, and are read in
 * place, with the same checks, without system calls. */
uint32_t col_py_walk_here(uint64_t *out, uint32_t max, unsigned *flags);
/* The writer: code descriptions found since the last call, as a PYCODE chunk. */
void col_py_drain(void (*emit)(unsigned type, cm_buf *raw));
/* A fork child: its process id for the safe reads. */
void col_py_atfork_child(void);

#endif

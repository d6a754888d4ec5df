/*
 * format.h - constants of the profile file (docs/format.md is normative) and the chunk
 * writer shared by the collector and the tests. The reader is in reader.h.
 */
#ifndef FENNEC_FORMAT_H
#define FENNEC_FORMAT_H

#include "common/common.h"

#define FMT_MAGIC "\x89" "FNC\r\n\x1a\n"
#define FMT_MAJOR 1
#define FMT_MINOR 2
#define FMT_PREAMBLE_LEN 16
#define FMT_CHUNK_HDR_LEN 16
#define FMT_MAX_RAW (64u << 20)

enum fmt_chunk_type {
	FMT_HEADER = 1,
	FMT_SITES = 2,
	FMT_THREAD = 3,
	FMT_EVENTS = 4,
	FMT_STATS = 5,
	FMT_THREAD_END = 6,
	FMT_END = 7,
	FMT_SAMPLES = 8,
	FMT_MODULES = 9,
	FMT_TASKS = 10,
	FMT_HEAP = 11,
};

enum fmt_codec { FMT_RAW = 0, FMT_ZSTD = 1 };

enum fmt_ev_type {
	FMT_EV_BEGIN = 1,
	FMT_EV_END = 2,
	FMT_EV_STEP = 3,
	FMT_EV_COUNTER = 4,
	FMT_EV_GAUGE = 5,
	FMT_EV_VALUE = 6,
	FMT_EV_TIME = 7,
	FMT_EV_STACK = 8,
	FMT_EV_SAMPLE = 16, /* not a stream event: a SAMPLES record as delivered by the reader */
	FMT_EV_ALLOC = 17,  /* HEAP records as delivered by the reader */
	FMT_EV_FREE = 18,
	FMT_EV_HEAP_SNAP = 19,
};

/* SAMPLES flags (docs/format.md) */
enum fmt_sample_flag {
	FMT_S_KIND_MASK = 3,
	FMT_S_CPU = 0,
	FMT_S_OFFCPU = 1,
	FMT_S_TRUNCATED = 4,
	FMT_S_EXACT_PC = 8,
};

enum fmt_sample_mode { FMT_SAMPLE_OFF = 0, FMT_SAMPLE_CPU = 1, FMT_SAMPLE_WALL = 2 };
enum fmt_sample_source { FMT_SRC_PERF = 0, FMT_SRC_TIMER = 1, FMT_SRC_WALL = 2 };
#define FMT_MAX_FRAMES 1024  /* readers reject deeper stacks */
#define FMT_MAX_REGIONS 4096

enum fmt_site_kind { FMT_SITE_REGION = 0, FMT_SITE_COUNTER = 1, FMT_SITE_GAUGE = 2, FMT_SITE_VALUE = 3 };

enum fmt_hkey {
	FMT_H_RECORDING = 1, FMT_H_PID, FMT_H_PPID, FMT_H_RANK, FMT_H_HOST, FMT_H_CMDLINE,
	FMT_H_EXE, FMT_H_START_REAL, FMT_H_START_MONO, FMT_H_START_TICKS, FMT_H_CLOCK,
	FMT_H_PARENT_PID, FMT_H_ORIGIN, FMT_H_BUFFER, FMT_H_STEP_WAIT, FMT_H_STEP_WARMUP,
	FMT_H_STEP_ACTIVE, FMT_H_STEP_REPEAT, FMT_H_STEP_FRACTION, FMT_H_VERSION,
	FMT_H_TICKS_PER_NS, FMT_H_SAMPLE_MODE, FMT_H_SAMPLE_PERIOD, FMT_H_SAMPLE_SOURCE,
	FMT_H_SAMPLE_DEPTH, FMT_H_SAMPLE_HZ, FMT_H_MEM_MODE, FMT_H_MEM_RATE, FMT_H_MEM_INTERVAL,
};

/* HEAP records (docs/format.md) */
enum fmt_heap_rec { FMT_HR_STACK = 1, FMT_HR_ALLOC = 2, FMT_HR_FREE = 3, FMT_HR_SNAP = 4 };
enum fmt_mem_mode { FMT_MEM_OFF = 0, FMT_MEM_SAMPLED = 1, FMT_MEM_FULL = 2 };
enum fmt_snap_reason { FMT_SNAP_TIMER = 0, FMT_SNAP_STEP = 1, FMT_SNAP_FINAL = 2 };

enum fmt_kind { FMT_K_VARINT = 0, FMT_K_STRING = 1, FMT_K_ZIGZAG = 2, FMT_K_F64 = 3 };

enum fmt_origin { FMT_ORIGIN_FIRST = 0, FMT_ORIGIN_FORK = 1, FMT_ORIGIN_EXEC = 2, FMT_ORIGIN_SPAWN = 3 };

#define FMT_EV_BEGIN_MAX 16 /* tag + id + dt */
#define FMT_EV_END_MAX 11   /* tag + dt */

/* Header field helpers: append one key/value to a HEADER payload. */
void fmt_hdr_varint(cm_buf *b, unsigned key, uint64_t v);
void fmt_hdr_zigzag(cm_buf *b, unsigned key, int64_t v);
void fmt_hdr_string(cm_buf *b, unsigned key, const char *s, size_t n);
void fmt_hdr_f64(cm_buf *b, unsigned key, double v);

/* The 16-byte preamble. */
void fmt_preamble(uint8_t out[FMT_PREAMBLE_LEN]);

/*
 * Frame `raw` as one chunk of `type`, appended to `out`: compressed with zstd at `level`
 * when level > 0 and it helps, stored raw otherwise. `zctx` is a ZSTD_CCtx* or NULL
 * (then one is made and freed). Returns 0, or FENNEC_ENOMEM / FENNEC_EINVAL (too large).
 */
int fmt_chunk_append(cm_buf *out, unsigned type, const uint8_t *raw, size_t raw_len, int level, void *zctx);

#endif

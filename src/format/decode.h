/*
 * decode.h - what the reader's files share (src/format/reader*.c): the state of one read
 * (rd), the bounded cursor over a chunk's payload, fail() and the decoders of each chunk
 * type, which reader.c's chunk loop calls. reader.c frames, checks and decompresses the
 * chunks and reads files, segments and growing files; reader_events.c decodes the
 * definitions, events, samples and the clock points (with the by-time replay of samples),
 * reader_heap.c the heap's chunks, reader_gpu.c the GPU's, reader_system.c the system
 * metrics and energy. Only they include it.
 */
#ifndef FENNEC_FORMAT_DECODE_H
#define FENNEC_FORMAT_DECODE_H

#include <stdlib.h>
#include <string.h>
#include <zstd.h>

#include "format/pipe.h"
#include "format/reader.h"

/* Short names for what the files share; the symbols are prefixed (libfennec-analysis.a is
 * linked into programs beside their own names). Macros: include this header last. */
#define fail fmt_rd_fail
#define bt_flush fmt_rd_bt_flush
#define bt_free fmt_rd_bt_free
#define decode_header fmt_rd_decode_header
#define decode_sites fmt_rd_decode_sites
#define decode_threads fmt_rd_decode_threads
#define decode_thread_end fmt_rd_decode_thread_end
#define decode_stats fmt_rd_decode_stats
#define decode_cost fmt_rd_decode_cost
#define decode_events fmt_rd_decode_events
#define decode_samples fmt_rd_decode_samples
#define decode_pycode fmt_rd_decode_pycode
#define decode_modules fmt_rd_decode_modules
#define decode_tasks fmt_rd_decode_tasks
#define decode_seg fmt_rd_decode_seg
#define decode_heap fmt_rd_decode_heap
#define decode_heap2 fmt_rd_decode_heap2
#define decode_reach fmt_rd_decode_reach
#define decode_gpu fmt_rd_decode_gpu
#define decode_gpux fmt_rd_decode_gpux
#define decode_system fmt_rd_decode_system
#define decode_energy fmt_rd_decode_energy

#define MAX_SITES FMT_MAX_SITE_ID /* a 24-byte record with id 2^23 made a 512 MB table */
#define MAX_THREADS (1u << 24)

/* A segment of a capped recording in the joined buffer (seg_gather). */
typedef struct seg_part {
	uint64_t at;       /* where its chunks start in the joined buffer */
	uint64_t file_off; /* ... and in its file */
	char *path;
} seg_part;

typedef struct rd {
	fmt_file *f;
	const char *name;
	fmt_error *err;
	fmt_event_fn fn;
	void *ctx;
	uint64_t chunk_off; /* offset of the chunk being decoded */
	ZSTD_DCtx *dctx;
	uint8_t *buf;
	size_t bufcap;
	int seen_header;
	int header_only; /* stop after the HEADER chunk */
	int calib_pass;  /* first pass: only clock points from HEADER, STATS and END */
	struct bytime *bt; /* samples waiting for their regions and step (bytime_*) */
	unsigned flags;    /* FMT_READ_* */
	uint64_t scan_budget; /* payload bytes the search for a whole chunk may still checksum */
	fmt_pipe *pipe;    /* region, step and metric events go to the callback's thread (pipe.h), or NULL */
	int mapped;        /* the data is a read-only file mapping of ours: pages read can be dropped */
	uint64_t dropped;  /* bytes at the start of the mapping given back (MADV_DONTNEED) */
	int follow;        /* fmt_follow: a growing file read in steps; no samples delivered */
	uint64_t stop_off; /* follow: where reading stopped (the next chunk to decode) */
	const struct seg_part *parts; /* a capped recording's segments in the buffer (seg_gather) */
	uint32_t nparts;
	int seg_seen;      /* SEGMENT chunks read */
	uint64_t seg_last; /* the number of the last one */
	uint32_t threads_read; /* THREAD records read (bounds the indices: decode_threads) */
} rd;

/* The read fails: r->err says where (a segment's file and offset) and what. Returns code. */
int fail(rd *r, int code, uint64_t off, const char *fmt, ...);

/* A bounded cursor over a decoded payload. */
typedef struct cur {
	const uint8_t *p, *end;
	int bad;
} cur;

static inline uint64_t cur_varint(cur *c)
{
	uint64_t v = 0;
	if (c->bad || cm_varint_get(&c->p, c->end, &v) < 0) {
		c->bad = 1;
		return 0;
	}
	return v;
}

static inline uint8_t cur_u8(cur *c)
{
	if (c->bad || c->p >= c->end) {
		c->bad = 1;
		return 0;
	}
	return *c->p++;
}

static inline double cur_f64(cur *c)
{
	if (c->bad || c->end - c->p < 8) {
		c->bad = 1;
		return 0;
	}
	uint64_t u = 0;
	for (int i = 0; i < 8; i++)
		u |= (uint64_t)c->p[i] << (8 * i);
	c->p += 8;
	double d;
	memcpy(&d, &u, 8);
	return d;
}

/* A string copy (NUL-terminated; *len gets its length); NULL and bad set on overrun or
 * allocation failure. */
static inline char *cur_string_n(cur *c, size_t *len)
{
	uint64_t n = cur_varint(c);
	*len = 0;
	if (c->bad || n > (uint64_t)(c->end - c->p)) {
		c->bad = 1;
		return NULL;
	}
	char *s = malloc(n + 1);
	if (!s) {
		c->bad = 1;
		return NULL;
	}
	memcpy(s, c->p, n);
	s[n] = 0;
	c->p += n;
	*len = (size_t)n;
	return s;
}

static inline char *cur_string(cur *c)
{
	size_t n;
	return cur_string_n(c, &n);
}

static inline int grow(void **arr, uint32_t *n, uint32_t want, size_t elem, uint32_t limit)
{
	if (want <= *n)
		return 0;
	if (want > limit)
		return -1;
	uint32_t cap = *n ? *n : 16;
	while (cap < want)
		cap = cap > limit / 2 ? limit : cap * 2;
	void *a = realloc(*arr, (size_t)cap * elem);
	if (!a)
		return -1;
	memset((char *)a + (size_t)*n * elem, 0, (size_t)(cap - *n) * elem);
	*arr = a;
	*n = cap;
	return 0;
}

/* The decoders of the chunk types, by file (a chunk's payload in c; 0 or an error code). */
int decode_header(rd *r, cur *c);
int decode_sites(rd *r, cur *c);
int decode_threads(rd *r, cur *c);
int decode_thread_end(rd *r, cur *c);
int decode_stats(rd *r, cur *c, int is_end);
int decode_cost(rd *r, cur *c);
int decode_events(rd *r, cur *c);
int decode_samples(rd *r, cur *c);
int decode_pycode(rd *r, cur *c);
int decode_modules(rd *r, cur *c);
int decode_tasks(rd *r, cur *c);
int decode_seg(rd *r, cur *c);
/* reader_events.c: deliver the samples held for their regions and step; free the replay. */
int bt_flush(rd *r);
void bt_free(struct bytime *b);

int decode_heap(rd *r, cur *c);
int decode_heap2(rd *r, cur *c);
int decode_reach(rd *r, cur *c);

int decode_gpu(rd *r, cur *c);
int decode_gpux(rd *r, cur *c);

int decode_system(rd *r, cur *c);
int decode_energy(rd *r, cur *c);

#endif

/*
 * internal.h - what the exporters share (src/export/util.c): which samples the options
 * select, a hash map keyed by pairs of integers, frame and thread names, JSON quoting
 * (through the report's escaper), and a spool that regroups a stream by key with
 * bounded memory. Not used outside src/export/.
 */
#ifndef FENNEC_EXPORT_INTERNAL_H
#define FENNEC_EXPORT_INTERNAL_H

#include "common/common.h"
#include "export/export.h"
#include "report/report.h"

/* ---- selection ---- */

typedef struct exp_sel {
	const ana_profile *p;
	const exp_options *o;
	uint8_t *node_in;   /* per region node: inside o->region (NULL when no region filter) */
	uint8_t *thread_in; /* per thread: matches o->tid (NULL when no thread filter) */
} exp_sel;

/* Returns 0 or FENNEC_ENOMEM; exp_sel_fini() either way. */
int exp_sel_init(exp_sel *s, const ana_profile *p, const exp_options *o);
/* Whether sample x passes every filter of the options. */
int exp_sel_sample(const exp_sel *s, const ana_sample *x);
/* Whether thread index t (into p->threads) passes the thread filter. */
int exp_sel_thread(const exp_sel *s, uint32_t t);
void exp_sel_fini(exp_sel *s);

/* ---- memory (memory.c): allocation stacks weighted by heap bytes ---- */

/* The bytes of kind `memory` (enum exp_memory) that site s holds, rounded (sampled
 * recordings give estimates), and the allocations in *count (may be NULL); 0: none. */
uint64_t exp_site_bytes(const ana_mem_site *s, int memory, uint64_t *count);
/* Whether site s passes the region filter (the only one that applies to sites). */
int exp_sel_site(const exp_sel *s, const ana_mem_site *x);

/* ---- map: (a, b) -> 64-bit value, open addressing ---- */

typedef struct exp_map {
	uint64_t *keys;      /* 2 per slot */
	uint64_t *vals;
	uint8_t *used;
	size_t cap, n;
} exp_map;

/* The value slot of (a, b), or NULL if absent. */
uint64_t *exp_map_get(const exp_map *m, uint64_t a, uint64_t b);
/* The value slot of (a, b), added with value 0 (and *added set) if absent; NULL when out
 * of memory. Slots move when the map grows: use one before the next put. */
uint64_t *exp_map_put(exp_map *m, uint64_t a, uint64_t b, int *added);
void exp_map_free(exp_map *m);

/* ---- names ---- */

/* A function's name; "[unknown]" when the index is out of range. */
const char *exp_func_name(const ana_profile *p, uint32_t func);
/* A function's module path ("" when unknown). */
const char *exp_func_module(const ana_profile *p, uint32_t func);
/* A thread's name for display: its name, or "thread" when it has none. */
const char *exp_thread_name(const ana_profile *p, uint32_t thread);
uint64_t exp_thread_tid(const ana_profile *p, uint32_t thread);
uint64_t exp_thread_pid(const ana_profile *p, uint32_t thread);

/* The recording's time origin: the earliest process start, CLOCK_MONOTONIC ns. */
uint64_t exp_t0_ns(const ana_profile *p);

/* The sampling periods a sample stands for (at least 1). */
static inline uint64_t exp_weight(const ana_sample *x) { return x->weight ? x->weight : 1; }

/* ---- JSON ---- */

/* s as a JSON string literal with its quotes (rep_json_string's escaping), malloc'd;
 * NULL when out of memory. */
char *exp_json_quote(const char *s);
/* ns as microseconds with three decimals ("12.345"): the Chrome trace time unit. */
void exp_put_us(FILE *out, uint64_t ns);

/* ---- spool: append records under a key, then read each key's records in order ---- */

typedef struct exp_spool_block {
	uint64_t off;
	uint32_t len;
	uint32_t next;       /* index of the key's next block, UINT32_MAX at the end */
} exp_spool_block;

typedef struct exp_spool {
	cm_buf *bufs;        /* per key: records not yet spilled */
	uint32_t *first, *last; /* per key: its first and last spilled block */
	uint32_t nkeys;
	exp_spool_block *blocks;
	uint32_t nblocks, blocks_cap;
	size_t mem, limit;   /* bytes held in bufs; spill all above limit */
	FILE *tmp;           /* spilled blocks (tmpfile(), deleted on close) */
	uint64_t tmp_len;
	int failed;          /* sticky: FENNEC_ENOMEM or FENNEC_EIO */
} exp_spool;

int exp_spool_init(exp_spool *s, uint32_t nkeys, size_t limit);
void exp_spool_put(exp_spool *s, uint32_t key, const void *rec, size_t len);
/* The records of `key` in the order they were put, as one buffer at a time (a block,
 * then what is still in memory): fn(ctx, data, len) for each; records never straddle
 * calls. Returns 0, the spool's sticky error, or fn's nonzero value. */
int exp_spool_each(exp_spool *s, uint32_t key, int (*fn)(void *ctx, const uint8_t *data, size_t len), void *ctx);
void exp_spool_fini(exp_spool *s);

/* ---- collapsed stacks (stacks.c): shared by folded and svg ---- */

/* Selected samples summed per distinct (stack, region node, thread); node and thread are
 * ANA_NONE unless the options prefix them. With o->memory, allocation sites instead
 * (thread always ANA_NONE; stack ANA_NONE when the site's stack is unknown). */
typedef struct exp_agg {
	uint32_t stack, node, thread;
	uint64_t weight;        /* sampling periods, or bytes with o->memory */
} exp_agg;

/* The aggregate of the samples (or allocation sites) `o` selects, sorted by (thread, node, stack) for a stable
 * output; *total is the summed weight. Returns 0 (also when nothing is selected: *n = 0)
 * or FENNEC_ENOMEM. The caller frees *out. */
int exp_aggregate(const ana_profile *p, const exp_options *o, exp_agg **out, size_t *n, uint64_t *total);

enum exp_frame_kind { EXP_F_FUNC = 0, EXP_F_THREAD = 1, EXP_F_REGION = 2 };

typedef struct exp_frame {
	uint8_t kind;           /* enum exp_frame_kind */
	uint32_t id;            /* function index, thread index, or names index of a region */
} exp_frame;

/* The frames of an aggregate, root first: the thread, the regions from the outermost,
 * then the stack. Returns how many; at most `cap` are stored. */
size_t exp_agg_frames(const ana_profile *p, const exp_agg *a, exp_frame *f, size_t cap);

/* The same into *f, grown (realloc) to hold them all; SIZE_MAX when out of memory. */
size_t exp_agg_frames_grow(const ana_profile *p, const exp_agg *a, exp_frame **f, size_t *cap);

/* The display name of a frame into buf (thread: "name [tid]"; region: "{name}"). */
const char *exp_frame_name(const ana_profile *p, const exp_frame *f, char *buf, size_t n);

/* ---- flame graphs (svg.c): shared by svg and diff-svg ---- */

/* A frame of the merged tree; n[0] is the root ("all"). Children are created after their
 * parent, so a node's index is larger than its parent's. */
typedef struct exp_flame_node {
	exp_frame f;
	uint32_t parent, first, next; /* tree links; first/next: UINT32_MAX at the end */
	uint32_t depth;
	uint64_t weight;              /* sampling periods (bytes) with this frame path */
	uint64_t x;                   /* offset from the left in weight units (set by the writer) */
} exp_flame_node;

typedef struct exp_flame {
	const ana_profile *p;
	exp_flame_node *n;
	uint32_t len, cap;
	uint64_t total;               /* the root's weight */
	const char *unit;             /* of the weights, for people: "samples" or "bytes" */
	exp_map kids;                 /* (parent, kind << 32 | id) -> node, while building */
} exp_flame;

/* The collapsed stacks the options select merged into a tree. Returns 0, FENNEC_ENODATA
 * (nothing selected) or FENNEC_ENOMEM; exp_flame_free() either way. */
int exp_flame_build(exp_flame *t, const ana_profile *p, const exp_options *o);
void exp_flame_free(exp_flame *t);

/* What a flame graph writer asks of its caller per frame (node index into t->n). */
typedef struct exp_flame_style {
	/* the frame's fill colour, "rgb(r,g,b)"; NULL: hashed from module and function */
	void (*fill)(void *ctx, const exp_flame *t, uint32_t node, char *buf, size_t n);
	/* text added to the frame's tooltip and details line ("" for none); NULL: none */
	void (*note)(void *ctx, const exp_flame *t, uint32_t node, char *buf, size_t n);
	void *ctx;
} exp_flame_style;

/* Lay out t (children by name; frames narrower than a tenth of a pixel left out) and write
 * it as a self-contained interactive SVG titled `title` (NULL: "Flame graph"). Relinks the
 * children of t in name order. Returns 0, FENNEC_ENOMEM or FENNEC_EIO. */
int exp_flame_write(FILE *out, exp_flame *t, const char *title, const exp_flame_style *st);

#endif

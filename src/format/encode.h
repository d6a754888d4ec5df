/*
 * encode.h - the encoders of the file's records (docs/format.md is normative; the decoders
 * are in decode.h and reader*.c). One inline function a record: it writes the record
 * at p, a caller's buffer with room for the record's _MAX bytes, and returns the bytes
 * written. They allocate nothing, take no lock and call nothing but memcpy, so the
 * collector's hot path and its signal handlers use them as the tests do.
 *
 * Fields a later minor version adds go at the end of their record, gated by a flag bit or
 * a tag's operand bits (docs/format.md, "Adding a field"): add them here, to the encoder
 * of their record, and nowhere else.
 */
#ifndef FENNEC_FORMAT_ENCODE_H
#define FENNEC_FORMAT_ENCODE_H

#include <string.h>

#include "format/format.h"

/* Always inlined: GCC's heuristics otherwise weigh the hot path's copies differently from
 * the hand-written code they replace (fennec_region_end grew by an instruction). */
#define FMT_ENC static inline __attribute__((always_inline))

#define FMT_VARINT_MAX 10 /* bytes of a varint, at most */

/* EVENTS: the largest record of each type (FMT_EV_BEGIN_MAX and FMT_EV_END_MAX are in
 * format.h) */
#define FMT_EV_STEP_MAX (1 + 2 * FMT_VARINT_MAX)    /* tag + dt + items */
#define FMT_EV_COUNTER_MAX (1 + 5 + 2 * FMT_VARINT_MAX) /* tag + id + dt + delta */
#define FMT_EV_F64_MAX (1 + 5 + FMT_VARINT_MAX + 8)   /* tag + id + dt + f64 */
#define FMT_EV_TIME_MAX (1 + FMT_VARINT_MAX)
#define FMT_EV_STACK_HEAD_MAX (1 + 5)               /* tag + count; the ids follow */

FMT_ENC size_t fmt_enc_varint(uint8_t *p, uint64_t v) { return cm_varint_put(p, v); }

/*
 * An event's time is the ticks since the thread's previous event (0 when the clock did not
 * advance): *clock is that previous event's time, which this advances to now. The encoders
 * read the clock after writing the tag, where the collector's hot path always has (stores
 * through p may alias *clock, so the order is the code's).
 */
FMT_ENC uint64_t fmt_ev_dt(uint64_t *clock, uint64_t now)
{
	uint64_t last = *clock;
	uint64_t dt = now > last ? now - last : 0;
	if (dt)
		*clock = now;
	return dt;
}

/* BEGIN of region `id` at `now`: ids below 15 are the tag's operand, larger ones follow it. */
FMT_ENC size_t fmt_enc_begin(uint8_t *p, uint32_t id, uint64_t now, uint64_t *clock)
{
	size_t n;
	if (likely(id < 15)) {
		p[0] = (uint8_t)(FMT_EV_BEGIN | id << 4);
		n = 1;
	} else {
		p[0] = (uint8_t)(FMT_EV_BEGIN | 15 << 4);
		n = 1 + cm_varint_put(p + 1, id);
	}
	return n + cm_varint_put(p + n, fmt_ev_dt(clock, now));
}

/* END of the innermost open region. */
FMT_ENC size_t fmt_enc_end(uint8_t *p, uint64_t now, uint64_t *clock)
{
	p[0] = FMT_EV_END;
	return 1 + cm_varint_put(p + 1, fmt_ev_dt(clock, now));
}

/* STEP: `bits` are the operand (bit 0: the step was recorded; bit 1: items follow). */
FMT_ENC size_t fmt_enc_step(uint8_t *p, unsigned bits, uint64_t items, uint64_t now, uint64_t *clock)
{
	p[0] = (uint8_t)(FMT_EV_STEP | (bits & 15) << 4);
	size_t n = 1 + cm_varint_put(p + 1, fmt_ev_dt(clock, now));
	if (bits & 2)
		n += cm_varint_put(p + n, items);
	return n;
}

/* COUNTER: counter `id` changed by d (zigzag). */
FMT_ENC size_t fmt_enc_counter(uint8_t *p, uint32_t id, int64_t d, uint64_t now, uint64_t *clock)
{
	p[0] = FMT_EV_COUNTER;
	size_t n = 1 + cm_varint_put(p + 1, id);
	n += cm_varint_put(p + n, fmt_ev_dt(clock, now));
	return n + cm_varint_put(p + n, cm_zigzag(d));
}

/* GAUGE or VALUE (`type`) of metric `id`: v as a little-endian f64 (little-endian hosts
 * only; see docs/internals/collect.md). */
FMT_ENC size_t fmt_enc_f64(uint8_t *p, unsigned type, uint32_t id, double v, uint64_t now,
				 uint64_t *clock)
{
	p[0] = (uint8_t)type;
	size_t n = 1 + cm_varint_put(p + 1, id);
	n += cm_varint_put(p + n, fmt_ev_dt(clock, now));
	memcpy(p + n, &v, 8);
	return n + 8;
}

/* TIME: the thread's clock is `ticks` (absolute), which *clock becomes. */
FMT_ENC size_t fmt_enc_time(uint8_t *p, uint64_t ticks, uint64_t *clock)
{
	p[0] = FMT_EV_TIME;
	size_t n = 1 + cm_varint_put(p + 1, ticks);
	*clock = ticks;
	return n;
}

/* STACK: the head of `count` regions open at once; the caller writes their ids after it,
 * outermost first, with fmt_enc_varint. */
FMT_ENC size_t fmt_enc_stack_head(uint8_t *p, uint32_t count)
{
	p[0] = FMT_EV_STACK;
	return 1 + cm_varint_put(p + 1, count);
}

/*
 * SAMPLES: one sample record (the chunk's three counts before the samples are the caller's
 * varints). `prev` is the previous sample's time in the chunk, 0 for its first; regions are
 * outermost first, frames and Python frames (fmt_pyframe values, written when flags has
 * FMT_S_PYTHON) innermost first.
 */
typedef struct fmt_sample_rec {
	unsigned flags;
	uint64_t tid, ticks, weight, step;
	uint32_t nregions, nframes, npy;
	const uint32_t *regions;
	const uint64_t *frames, *py;
} fmt_sample_rec;

/* flags, tid, dticks, weight, step; the three counts; then each id, frame and line */
#define FMT_SAMPLE_MAX(nr, nf, npy) \
	(5 * FMT_VARINT_MAX + 3 * 5 + 5 * (size_t)(nr) + FMT_VARINT_MAX * ((size_t)(nf) + 2 * (size_t)(npy)))

FMT_ENC size_t fmt_enc_sample(uint8_t *p, const fmt_sample_rec *s, uint64_t prev)
{
	size_t n = cm_varint_put(p, s->flags); /* a varint since 1.7: the same byte below 128 */
	n += cm_varint_put(p + n, s->tid);
	n += cm_varint_put(p + n, cm_zigzag((int64_t)(s->ticks - prev)));
	n += cm_varint_put(p + n, s->weight);
	n += cm_varint_put(p + n, s->step);
	n += cm_varint_put(p + n, s->nregions);
	for (uint32_t i = 0; i < s->nregions; i++)
		n += cm_varint_put(p + n, s->regions[i]);
	n += cm_varint_put(p + n, s->nframes);
	for (uint32_t i = 0; i < s->nframes; i++)
		n += cm_varint_put(p + n, i ? cm_zigzag((int64_t)(s->frames[i] - s->frames[i - 1])) : s->frames[i]);
	if (s->flags & FMT_S_PYTHON) {
		n += cm_varint_put(p + n, s->npy);
		for (uint32_t i = 0; i < s->npy; i++) {
			n += cm_varint_put(p + n, (uint64_t)fmt_pyframe_code(s->py[i]) << 1 | fmt_pyframe_entry(s->py[i]));
			n += cm_varint_put(p + n, fmt_pyframe_line(s->py[i]));
		}
	}
	return n;
}

/*
 * HEAP2 records (docs/format.md "Heap (1.3)"): what a record changes of the chunk's state
 * (TIME, THREAD, STEP) and the heap's events. The STACK record is still written by the heap
 * writer (collect/heap_writer.c, put_stack).
 */
#define FMT_H2_REC_MAX (1 + 2 * FMT_VARINT_MAX) /* TIME, THREAD, STEP, ALLOC, FREE */
#define FMT_H2_SNAP_MAX (2 + 6 * FMT_VARINT_MAX)

/* TIME: the unit count q moved by dq. */
FMT_ENC size_t fmt_enc_h2_time(uint8_t *p, int64_t dq)
{
	p[0] = FMT_H2_TIME;
	return 1 + cm_varint_put(p + 1, cm_zigzag(dq));
}

/* THREAD: thread `index` becomes current; `define`: the chunk's next one, whose tid follows. */
FMT_ENC size_t fmt_enc_h2_thread(uint8_t *p, uint32_t index, int define, uint64_t tid)
{
	p[0] = FMT_H2_THREAD;
	size_t n = 1 + cm_varint_put(p + 1, index);
	if (define)
		n += cm_varint_put(p + n, tid);
	return n;
}

/* STEP: the step of the ALLOCs that follow. */
FMT_ENC size_t fmt_enc_h2_step(uint8_t *p, uint64_t step)
{
	p[0] = FMT_H2_STEP;
	return 1 + cm_varint_put(p + 1, step);
}

/* ALLOC of `size` bytes from stack `stack`; `same`: the thread's previous ALLOC's or FREE's
 * stack (then it is not written). */
FMT_ENC size_t fmt_enc_h2_alloc(uint8_t *p, uint64_t size, uint64_t stack, int same)
{
	p[0] = (uint8_t)(FMT_H2_ALLOC | (same ? FMT_H2_SAME : 0));
	size_t n = 1 + cm_varint_put(p + 1, size);
	if (!same)
		n += cm_varint_put(p + n, stack);
	return n;
}

/* FREE of a block of `size` bytes from `stack` (absent when `same`); `flags` 0 or
 * FMT_H2_TEMP. FMT_H2_LAST is fmt_enc_h2_free_last. */
FMT_ENC size_t fmt_enc_h2_free(uint8_t *p, unsigned flags, uint64_t stack, int same, uint64_t size)
{
	p[0] = (uint8_t)(FMT_H2_FREE | (flags & FMT_H2_TEMP) | (same ? FMT_H2_SAME : 0));
	size_t n = 1;
	if (!same)
		n += cm_varint_put(p + n, stack);
	return n + cm_varint_put(p + n, size);
}

/* FREE of the thread's latest ALLOC in this chunk: nothing follows. */
FMT_ENC size_t fmt_enc_h2_free_last(uint8_t *p)
{
	p[0] = FMT_H2_FREE | FMT_H2_LAST;
	return 1;
}

/* SNAP: a point of the heap timeline; c[] = allocs, frees, alloc_bytes; `reason` enum
 * fmt_snap_reason. */
FMT_ENC size_t fmt_enc_h2_snap(uint8_t *p, uint64_t step, uint64_t live, uint64_t rss, const uint64_t c[3],
			       unsigned reason)
{
	p[0] = FMT_H2_SNAP;
	size_t n = 1 + cm_varint_put(p + 1, step);
	n += cm_varint_put(p + n, live);
	n += cm_varint_put(p + n, rss);
	for (int i = 0; i < 3; i++)
		n += cm_varint_put(p + n, c[i]);
	p[n] = (uint8_t)reason;
	return n + 1;
}

#endif

/*
 * test_encode.c - the record encoders of format/encode.h, which the collector writes with:
 * each record's bytes at the boundaries of its fields (ids at the tag operand's limit,
 * varints of 1 and 10 bytes, counter deltas of both signs), then a thread's stream of every
 * event type read back by the reader, field by field.
 */
#include <float.h>
#include <stdlib.h>

#include "format/encode.h"
#include "format/reader.h"
#include "unit.h"

#define CHECK_EQ UNIT_CHECK_EQ
#define CHECK UNIT_CHECK

static int same(const uint8_t *p, size_t n, const uint8_t *want, size_t wn)
{
	return n == wn && !memcmp(p, want, n);
}

UNIT_TEST(encode_bytes)
{
	uint8_t b[64];
	uint64_t clock = 100;
	/* BEGIN: ids below 15 in the tag, 15 and above after it; dt 0 leaves the clock */
	CHECK(same(b, fmt_enc_begin(b, 3, 100, &clock), (const uint8_t[]){0x31, 0x00}, 2));
	CHECK_EQ(clock, 100);
	CHECK(same(b, fmt_enc_begin(b, 14, 227, &clock), (const uint8_t[]){0xe1, 0x7f}, 2));
	CHECK_EQ(clock, 227);
	CHECK(same(b, fmt_enc_begin(b, 15, 355, &clock), (const uint8_t[]){0xf1, 0x0f, 0x80, 0x01}, 4));
	CHECK_EQ(fmt_enc_begin(b, FMT_MAX_SITE_ID - 1, UINT64_MAX, &clock), 1 + 3 + 10);
	CHECK_EQ(clock, UINT64_MAX);
	CHECK_EQ(fmt_enc_begin(b, UINT32_MAX, 0, &clock), 1 + 5 + 1); /* the clock went back: dt 0 */
	CHECK_EQ(clock, UINT64_MAX);
	clock = 0;
	CHECK(same(b, fmt_enc_end(b, 0, &clock), (const uint8_t[]){0x02, 0x00}, 2));
	CHECK_EQ(fmt_enc_end(b, UINT64_MAX, &clock), FMT_EV_END_MAX);
	clock = 0;
	CHECK(same(b, fmt_enc_step(b, 0, 99, 5, &clock), (const uint8_t[]){0x03, 0x05}, 2)); /* no items */
	CHECK(same(b, fmt_enc_step(b, 3, 300, 5, &clock), (const uint8_t[]){0x33, 0x00, 0xac, 0x02}, 4));
	CHECK_EQ(fmt_enc_step(b, 2, UINT64_MAX, UINT64_MAX, &clock), FMT_EV_STEP_MAX);
	clock = 0;
	CHECK(same(b, fmt_enc_counter(b, 7, -1, 1, &clock), (const uint8_t[]){0x04, 0x07, 0x01, 0x01}, 4));
	CHECK(same(b, fmt_enc_counter(b, 7, 1, 1, &clock), (const uint8_t[]){0x04, 0x07, 0x00, 0x02}, 4));
	CHECK(fmt_enc_counter(b, UINT32_MAX, INT64_MIN, UINT64_MAX, &clock) <= FMT_EV_COUNTER_MAX);
	clock = 0;
	double v = -2.5;
	uint8_t want[12] = {FMT_EV_GAUGE, 0x09, 0x01};
	memcpy(want + 3, &v, 8);
	CHECK(same(b, fmt_enc_f64(b, FMT_EV_GAUGE, 9, v, 1, &clock), want, 11));
	CHECK(fmt_enc_f64(b, FMT_EV_VALUE, UINT32_MAX, v, UINT64_MAX, &clock) <= FMT_EV_F64_MAX);
	CHECK(same(b, fmt_enc_time(b, 128, &clock), (const uint8_t[]){0x07, 0x80, 0x01}, 3));
	CHECK_EQ(clock, 128);
	CHECK_EQ(fmt_enc_time(b, UINT64_MAX, &clock), FMT_EV_TIME_MAX);
	CHECK(same(b, fmt_enc_stack_head(b, 2), (const uint8_t[]){0x08, 0x02}, 2));
}

/* What the reader delivered, in order. */
struct got {
	int n;
	fmt_event ev[32];
};

static int keep(void *ctx, const fmt_file *f, const fmt_event *ev)
{
	(void)f;
	struct got *g = ctx;
	if (g->n < 32)
		g->ev[g->n] = *ev;
	g->n++;
	return 0;
}

static void site(cm_buf *s, uint32_t id, unsigned kind)
{
	cm_buf_varint(s, id);
	cm_buf_u8(s, (uint8_t)kind);
	cm_buf_string(s, "s", 1);
	cm_buf_string(s, "", 0);
	cm_buf_varint(s, 0);
}

/* A file's preamble and HEADER: one recording, the clock at 0, a tick a nanosecond. */
static void file_head(cm_buf *out)
{
	cm_buf h = {0};
	uint8_t pre[FMT_PREAMBLE_LEN];
	fmt_preamble(pre);
	cm_buf_put(out, pre, sizeof pre);
	fmt_hdr_varint(&h, FMT_H_RECORDING, 1);
	fmt_hdr_varint(&h, FMT_H_START_MONO, 0);
	fmt_hdr_varint(&h, FMT_H_START_TICKS, 0);
	fmt_hdr_varint(&h, FMT_H_CLOCK, 1);
	fmt_chunk_append(out, FMT_HEADER, h.data, h.len, 0, NULL);
	cm_buf_free(&h);
}

UNIT_TEST(encode_roundtrip)
{
	enum { BIG = FMT_MAX_SITE_ID - 1 };
	cm_buf out = {0}, s = {0}, t = {0}, seg = {0};
	file_head(&out);
	site(&s, 1, FMT_SITE_REGION);
	site(&s, 14, FMT_SITE_REGION);
	site(&s, 15, FMT_SITE_REGION);
	site(&s, BIG, FMT_SITE_REGION);
	site(&s, 20, FMT_SITE_COUNTER);
	site(&s, 21, FMT_SITE_GAUGE);
	site(&s, 22, FMT_SITE_VALUE);
	fmt_chunk_append(&out, FMT_SITES, s.data, s.len, 0, NULL);
	cm_buf_varint(&t, 0);
	cm_buf_varint(&t, 1);
	cm_buf_string(&t, "t", 1);
	cm_buf_varint(&t, 0);
	fmt_chunk_append(&out, FMT_THREAD, t.data, t.len, 0, NULL);

	uint8_t ev[512];
	size_t n = 0;
	uint64_t clock = 0;
	n += fmt_enc_time(ev + n, 1000, &clock);
	n += fmt_enc_stack_head(ev + n, 2); /* two regions open from the start */
	n += fmt_enc_varint(ev + n, 1);
	n += fmt_enc_varint(ev + n, BIG);
	n += fmt_enc_begin(ev + n, 14, 1000, &clock);      /* dt 0 */
	n += fmt_enc_begin(ev + n, 15, 1127, &clock);      /* dt 127 */
	n += fmt_enc_counter(ev + n, 20, INT64_MIN, 1255, &clock);
	n += fmt_enc_counter(ev + n, 20, INT64_MAX, 1255, &clock);
	n += fmt_enc_counter(ev + n, 20, -1, 1255, &clock);
	n += fmt_enc_f64(ev + n, FMT_EV_GAUGE, 21, -DBL_MAX, 1256, &clock);
	n += fmt_enc_f64(ev + n, FMT_EV_VALUE, 22, 0.5, 1256, &clock);
	n += fmt_enc_step(ev + n, 3, UINT64_MAX, 1300, &clock);
	n += fmt_enc_step(ev + n, 1, 0, 1300, &clock);
	n += fmt_enc_end(ev + n, 1400, &clock);
	n += fmt_enc_end(ev + n, 1300, &clock); /* the clock went back: dt 0 */
	n += fmt_enc_end(ev + n, 1500, &clock);
	n += fmt_enc_end(ev + n, 1500, &clock);
	cm_buf_varint(&seg, 0);
	cm_buf_varint(&seg, n);
	cm_buf_put(&seg, ev, n);
	fmt_chunk_append(&out, FMT_EVENTS, seg.data, seg.len, 0, NULL);

	fmt_file f;
	fmt_error e;
	struct got g = {0};
	int rc = fmt_read_mem(out.data, out.len, "enc", &f, keep, &g, &e);
	CHECK_EQ(rc, 0);
	if (rc)
		printf("    %s\n", e.msg);
	static const struct {
		unsigned type;
		uint32_t id;
		uint64_t ticks;
	} want[] = {
		{FMT_EV_BEGIN, 1, 1000}, {FMT_EV_BEGIN, BIG, 1000}, {FMT_EV_BEGIN, 14, 1000},
		{FMT_EV_BEGIN, 15, 1127}, {FMT_EV_COUNTER, 20, 1255}, {FMT_EV_COUNTER, 20, 1255},
		{FMT_EV_COUNTER, 20, 1255}, {FMT_EV_GAUGE, 21, 1256}, {FMT_EV_VALUE, 22, 1256},
		{FMT_EV_STEP, 0, 1300}, {FMT_EV_STEP, 0, 1300}, {FMT_EV_END, 0, 1400},
		{FMT_EV_END, 0, 1400}, {FMT_EV_END, 0, 1500}, {FMT_EV_END, 0, 1500},
	};
	CHECK_EQ(g.n, ARRAY_LEN(want));
	for (size_t i = 0; i < ARRAY_LEN(want) && i < (size_t)g.n; i++) {
		CHECK_EQ(g.ev[i].type, want[i].type);
		if (want[i].type != FMT_EV_END && want[i].type != FMT_EV_STEP)
			CHECK_EQ(g.ev[i].id, want[i].id);
		CHECK_EQ(g.ev[i].ticks, want[i].ticks);
	}
	if (g.n == ARRAY_LEN(want)) {
		CHECK(g.ev[4].i == INT64_MIN);
		CHECK(g.ev[5].i == INT64_MAX);
		CHECK_EQ(g.ev[6].i, -1);
		CHECK(g.ev[7].f == -DBL_MAX);
		CHECK(g.ev[8].f == 0.5);
		CHECK_EQ(g.ev[9].flags, 3);
		CHECK(g.ev[9].u == UINT64_MAX);
		CHECK_EQ(g.ev[10].flags, 1);
		CHECK_EQ(g.ev[10].u, 0);
	}
	fmt_file_free(&f);
	cm_buf_free(&out);
	cm_buf_free(&s);
	cm_buf_free(&t);
	cm_buf_free(&seg);
}

UNIT_TEST(encode_heap2_bytes)
{
	uint8_t b[FMT_H2_SNAP_MAX];
	CHECK(same(b, fmt_enc_h2_time(b, -1), (const uint8_t[]){FMT_H2_TIME, 0x01}, 2));
	CHECK_EQ(fmt_enc_h2_time(b, INT64_MIN), 1 + FMT_VARINT_MAX);
	CHECK(same(b, fmt_enc_h2_thread(b, 0, 1, 300), (const uint8_t[]){FMT_H2_THREAD, 0x00, 0xac, 0x02}, 4));
	CHECK(same(b, fmt_enc_h2_thread(b, 2, 0, 300), (const uint8_t[]){FMT_H2_THREAD, 0x02}, 2));
	CHECK_EQ(fmt_enc_h2_step(b, UINT64_MAX), 1 + FMT_VARINT_MAX);
	CHECK(same(b, fmt_enc_h2_alloc(b, 16, 5, 0), (const uint8_t[]){FMT_H2_ALLOC, 0x10, 0x05}, 3));
	CHECK(same(b, fmt_enc_h2_alloc(b, 16, 5, 1), (const uint8_t[]){FMT_H2_ALLOC | FMT_H2_SAME, 0x10}, 2));
	CHECK_EQ(fmt_enc_h2_alloc(b, UINT64_MAX, UINT64_MAX, 0), FMT_H2_REC_MAX);
	CHECK(same(b, fmt_enc_h2_free(b, 0, 5, 0, 16), (const uint8_t[]){FMT_H2_FREE, 0x05, 0x10}, 3));
	CHECK(same(b, fmt_enc_h2_free(b, FMT_H2_TEMP, 5, 1, 0),
		   (const uint8_t[]){FMT_H2_FREE | FMT_H2_TEMP | FMT_H2_SAME, 0x00}, 2));
	CHECK(same(b, fmt_enc_h2_free_last(b), (const uint8_t[]){FMT_H2_FREE | FMT_H2_LAST}, 1));
	const uint64_t c[3] = {1, 0, 128};
	CHECK(same(b, fmt_enc_h2_snap(b, 0, 1, 2, c, FMT_SNAP_FINAL),
		   (const uint8_t[]){FMT_H2_SNAP, 0, 1, 2, 1, 0, 0x80, 0x01, FMT_SNAP_FINAL}, 9));
	const uint64_t m[3] = {UINT64_MAX, UINT64_MAX, UINT64_MAX};
	CHECK_EQ(fmt_enc_h2_snap(b, UINT64_MAX, UINT64_MAX, UINT64_MAX, m, FMT_SNAP_STEP), FMT_H2_SNAP_MAX);
}

/* A sample's arrays, copied while the reader's callback runs. */
struct got_sample {
	int n;
	uint64_t frames[3][3], py[3][2];
	uint32_t regions[3][2];
	struct got g;
};

static int keep_sample(void *ctx, const fmt_file *f, const fmt_event *ev)
{
	struct got_sample *s = ctx;
	if (ev->type == FMT_EV_SAMPLE && s->n < 3 && ev->nframes <= 3 && ev->npy <= 2 && ev->nregions <= 2) {
		memcpy(s->frames[s->n], ev->frames, ev->nframes * sizeof *ev->frames);
		memcpy(s->py[s->n], ev->pyframes, ev->npy * sizeof *ev->pyframes);
		memcpy(s->regions[s->n], ev->regions, ev->nregions * sizeof *ev->regions);
		s->n++;
	}
	return keep(&s->g, f, ev);
}

/* SAMPLES records: the byte layout of a small one, then samples at the limits (frames that go
 * down, 10-byte varints, Python frames with and without `entry`) read back by the reader. */
UNIT_TEST(encode_samples)
{
	uint8_t b[FMT_SAMPLE_MAX(2, 3, 2)];
	const uint32_t reg[2] = {1, 14};
	const uint64_t fr[3] = {0x1000, 0x0ff0, UINT64_MAX};
	const uint64_t py[2] = {fmt_pyframe(7, 12, 1), fmt_pyframe(1u << 24, 0x7fffffff, 0)};
	fmt_sample_rec s = {FMT_S_EXACT_PC, 300, 5, 1, 0, 1, 1, 0, reg, fr, py};
	/* flags, tid 300, dticks 5 - 3, weight, step, 1 region, 1 frame 0x1000 */
	CHECK(same(b, fmt_enc_sample(b, &s, 3), (const uint8_t[]){0x08, 0xac, 0x02, 0x04, 0x01, 0x00, 0x01, 0x01, 0x01, 0x80, 0x20}, 11));
	fmt_sample_rec w[3] = {
		{FMT_S_CPU | FMT_S_PYTHON | FMT_S_GIL, 1, 1000, 3, 7, 2, 3, 2, reg, fr, py},
		{FMT_S_OFFCPU | FMT_S_TRUNCATED, UINT32_MAX, 900, 1, UINT64_MAX, 0, 0, 0, reg, fr, py},
		{FMT_S_CPU | FMT_S_KERNEL, 2, (uint64_t)INT64_MAX, UINT16_MAX, 0, 0, 3, 0, reg, fr, py},
	};
	CHECK(fmt_enc_sample(b, &w[0], 0) <= sizeof b);

	cm_buf out = {0}, st = {0}, smp = {0};
	file_head(&out);
	site(&st, 1, FMT_SITE_REGION);
	site(&st, 14, FMT_SITE_REGION);
	fmt_chunk_append(&out, FMT_SITES, st.data, st.len, 0, NULL);
	cm_buf_varint(&smp, 9);
	cm_buf_varint(&smp, 1);
	cm_buf_varint(&smp, 2);
	uint64_t prev = 0;
	for (int i = 0; i < 3; i++) {
		cm_buf_reserve(&smp, FMT_SAMPLE_MAX(w[i].nregions, w[i].nframes, w[i].npy));
		smp.len += fmt_enc_sample(smp.data + smp.len, &w[i], prev);
		prev = w[i].ticks;
	}
	fmt_chunk_append(&out, FMT_SAMPLES, smp.data, smp.len, 0, NULL);

	fmt_file f;
	fmt_error e;
	static struct got_sample gs;
	struct got *gp = &gs.g;
	int rc = fmt_read_mem(out.data, out.len, "samples", &f, keep_sample, &gs, &e);
	CHECK_EQ(rc, 0);
	if (rc)
		printf("    %s\n", e.msg);
	CHECK_EQ(gp->n, 3);
	CHECK_EQ(gs.n, 3);
	CHECK_EQ(f.samples_taken, 9);
	CHECK_EQ(f.samples_dropped, 1);
	CHECK_EQ(f.samples_truncated, 2);
	for (int i = 0; i < 3 && i < gs.n; i++) {
		const fmt_event *ev = &gp->ev[i];
		CHECK_EQ(ev->type, FMT_EV_SAMPLE);
		CHECK_EQ(ev->flags, w[i].flags);
		CHECK_EQ(ev->tid, w[i].tid);
		CHECK(ev->ticks == w[i].ticks);
		CHECK_EQ(ev->i, (int64_t)w[i].weight);
		CHECK(ev->u == w[i].step);
		CHECK_EQ(ev->nregions, w[i].nregions);
		CHECK_EQ(ev->nframes, w[i].nframes);
		CHECK_EQ(ev->npy, w[i].npy);
		CHECK(!memcmp(gs.frames[i], w[i].frames, w[i].nframes * sizeof *w[i].frames));
		CHECK(!memcmp(gs.regions[i], w[i].regions, w[i].nregions * sizeof *w[i].regions));
		CHECK(!memcmp(gs.py[i], w[i].py, w[i].npy * sizeof *w[i].py));
	}
	fmt_file_free(&f);
	cm_buf_free(&out);
	cm_buf_free(&st);
	cm_buf_free(&smp);
}

/*
 * test_main.c - the unit test binary's main(), which runs every test registered with
 * UNIT_TEST (unit.h) by the files of tests/unit/ and ends with the 'N passed, N failed'
 * line; and the unit tests of the format primitives, the chunk writer and the reader, and
 * the analysis statistics. A failed check prints both sides and the test goes on.
 */
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "analyze/analyze.h"
#include "format/reader.h"
#include "unit.h"

#define CHECK_EQ UNIT_CHECK_EQ
#define CHECK UNIT_CHECK

UNIT_TEST(varint)
{
	uint64_t vals[] = {0, 1, 127, 128, 300, 16383, 16384, UINT32_MAX, (uint64_t)1 << 63, UINT64_MAX};
	for (size_t i = 0; i < ARRAY_LEN(vals); i++) {
		uint8_t buf[10];
		size_t n = cm_varint_put(buf, vals[i]);
		const uint8_t *p = buf;
		uint64_t out = 0;
		CHECK_EQ(cm_varint_get(&p, buf + n, &out), 0);
		CHECK_EQ(out, vals[i]);
		CHECK_EQ(p - buf, n);
		p = buf; /* a truncated varint is an error, never a read past the end */
		if (n > 1)
			CHECK_EQ(cm_varint_get(&p, buf + n - 1, &out), -1);
	}
	uint8_t eleven[11];
	memset(eleven, 0x80, sizeof eleven);
	const uint8_t *p = eleven;
	uint64_t out;
	CHECK_EQ(cm_varint_get(&p, eleven + 11, &out), -1);
	int64_t z[] = {0, -1, 1, INT64_MIN, INT64_MAX};
	for (size_t i = 0; i < ARRAY_LEN(z); i++)
		CHECK_EQ(cm_unzigzag(cm_zigzag(z[i])), z[i]);
}

UNIT_TEST(crc32c)
{
	CHECK_EQ(cm_crc32c(0, "123456789", 9), 0xE3069283u); /* the standard check value */
	CHECK_EQ(cm_crc32c(cm_crc32c(0, "1234", 4), "56789", 5), 0xE3069283u);
	CHECK_EQ(cm_crc32c(0, "", 0), 0);
}

/* A small but complete file: preamble, header, sites, thread, events, end. */
static void build_file(cm_buf *out, int level, int with_end)
{
	uint8_t pre[FMT_PREAMBLE_LEN];
	fmt_preamble(pre);
	cm_buf_put(out, pre, sizeof pre);
	cm_buf h = {0};
	fmt_hdr_varint(&h, FMT_H_RECORDING, 42);
	fmt_hdr_varint(&h, FMT_H_PID, 1234);
	fmt_hdr_string(&h, FMT_H_CMDLINE, "prog\0arg", 8);
	fmt_hdr_varint(&h, FMT_H_START_MONO, 1000000);
	fmt_hdr_varint(&h, FMT_H_START_TICKS, 0);
	fmt_hdr_varint(&h, FMT_H_CLOCK, 1);
	fmt_hdr_varint(&h, 999, 7); /* unknown key: skipped */
	fmt_chunk_append(out, FMT_HEADER, h.data, h.len, 0, NULL);
	cm_buf s = {0};
	cm_buf_varint(&s, 1);
	cm_buf_u8(&s, FMT_SITE_REGION);
	cm_buf_string(&s, "outer", 5);
	cm_buf_string(&s, "", 0);
	cm_buf_varint(&s, 0);
	cm_buf_varint(&s, 20);
	cm_buf_u8(&s, FMT_SITE_REGION);
	cm_buf_string(&s, "inner", 5);
	cm_buf_string(&s, "x.c", 3);
	cm_buf_varint(&s, 7);
	fmt_chunk_append(out, FMT_SITES, s.data, s.len, level, NULL);
	cm_buf t = {0};
	cm_buf_varint(&t, 0);
	cm_buf_varint(&t, 1234);
	cm_buf_string(&t, "main", 4);
	cm_buf_varint(&t, 0);
	fmt_chunk_append(out, FMT_THREAD, t.data, t.len, level, NULL);
	/* outer [0, 100) containing inner [10, 40), repeated 50 times with gaps of 10 */
	cm_buf ev = {0};
	for (int i = 0; i < 50; i++) {
		cm_buf_u8(&ev, FMT_EV_BEGIN | 1 << 4);
		cm_buf_varint(&ev, i ? 10 : 0);
		cm_buf_u8(&ev, FMT_EV_BEGIN | 15 << 4);
		cm_buf_varint(&ev, 20);
		cm_buf_varint(&ev, 10);
		cm_buf_u8(&ev, FMT_EV_END);
		cm_buf_varint(&ev, 30);
		cm_buf_u8(&ev, FMT_EV_END);
		cm_buf_varint(&ev, 60);
	}
	cm_buf seg = {0};
	cm_buf_varint(&seg, 0);
	cm_buf_varint(&seg, ev.len + 2);
	cm_buf_u8(&seg, FMT_EV_TIME);
	cm_buf_varint(&seg, 0);
	cm_buf_put(&seg, ev.data, ev.len);
	fmt_chunk_append(out, FMT_EVENTS, seg.data, seg.len, level, NULL);
	if (with_end) {
		cm_buf e = {0};
		for (int i = 0; i < 2; i++)
			cm_buf_varint(&e, i ? 5000 : 1006000);
		for (int i = 0; i < 5; i++)
			cm_buf_varint(&e, 0);
		cm_buf_varint(&e, 0); /* lost bytes */
		cm_buf_varint(&e, 0); /* exit reason */
		fmt_chunk_append(out, FMT_END, e.data, e.len, 0, NULL);
		cm_buf_free(&e);
	}
	cm_buf_free(&h);
	cm_buf_free(&s);
	cm_buf_free(&t);
	cm_buf_free(&ev);
	cm_buf_free(&seg);
}

struct counts {
	int begins, ends;
	uint64_t last_ticks;
	uint32_t ids[3];
};

static int count_events(void *ctx, const fmt_file *f, const fmt_event *ev)
{
	(void)f;
	struct counts *c = ctx;
	if (ev->type == FMT_EV_BEGIN) {
		c->begins++;
		if (ev->id < 3)
			c->ids[ev->id]++;
	} else if (ev->type == FMT_EV_END)
		c->ends++;
	c->last_ticks = ev->ticks;
	return 0;
}

UNIT_TEST(roundtrip)
{
	for (int level = 0; level <= 3; level += 3) {
		cm_buf b = {0};
		build_file(&b, level, 1);
		fmt_file f;
		fmt_error e;
		struct counts c = {0};
		int rc = fmt_read_mem(b.data, b.len, "mem", &f, count_events, &c, &e);
		CHECK_EQ(rc, 0);
		if (rc)
			printf("    %s\n", e.msg);
		CHECK_EQ(c.begins, 100);
		CHECK_EQ(c.ends, 100);
		CHECK_EQ(c.ids[1], 50);
		CHECK_EQ(c.last_ticks, 49 * 110 + 100);
		CHECK_EQ(f.pid, 1234);
		CHECK_EQ(f.recording_id, 42);
		CHECK(f.cmdline && !strcmp(f.cmdline, "prog arg"));
		CHECK(f.sites[20].defined && !strcmp(f.sites[20].name, "inner") && f.sites[20].line == 7);
		CHECK(f.has_end && !f.cut_short);
		CHECK(fabs(f.fit_b - 1.0) < 1e-9);
		fmt_file_free(&f);
		cm_buf_free(&b);
	}
}

static int read_err(const uint8_t *d, size_t n, fmt_error *e)
{
	fmt_file f;
	int rc = fmt_read_mem(d, n, "bad.fnc", &f, NULL, NULL, e);
	fmt_file_free(&f);
	return rc;
}

UNIT_TEST(reader_errors)
{
	cm_buf b = {0};
	build_file(&b, 3, 1);
	fmt_error e;
	CHECK_EQ(read_err(b.data, 0, &e), FENNEC_ENODATA);
	CHECK_EQ(read_err(b.data, 10, &e), FENNEC_ETRUNCATED);
	CHECK_EQ(read_err((const uint8_t *)"\x7f" "ELF\2\1\1\0\0\0\0\0\0\0\0\0\0\0", 18, &e), FENNEC_EFOREIGN);
	CHECK(strstr(e.msg, "bad.fnc") && strstr(e.msg, "not a fennec profile"));
	/* newer major version */
	uint8_t *copy = malloc(b.len);
	memcpy(copy, b.data, b.len);
	copy[8] = FMT_MAJOR + 1;
	CHECK_EQ(read_err(copy, b.len, &e), FENNEC_EVERSION);
	/* every single-byte flip after the preamble is caught: checksum, framing or decode */
	int caught = 0, total = 0;
	for (size_t i = FMT_PREAMBLE_LEN; i < b.len; i++) {
		memcpy(copy, b.data, b.len);
		copy[i] ^= 0x40;
		total++;
		fmt_error e2;
		if (read_err(copy, b.len, &e2) != 0 || 0)
			caught++;
		else {
			/* a flip inside a declared length can make a torn tail; that is reported too */
			fmt_file f;
			fmt_read_mem(copy, b.len, "x", &f, NULL, NULL, &e2);
			caught += f.torn_offset != 0 || f.cut_short;
			fmt_file_free(&f);
		}
	}
	CHECK_EQ(caught, total);
	/* a flipped payload byte names the checksum and the chunk's offset */
	memcpy(copy, b.data, b.len);
	copy[FMT_PREAMBLE_LEN + FMT_CHUNK_HDR_LEN + 2] ^= 1;
	CHECK_EQ(read_err(copy, b.len, &e), FENNEC_ECHECKSUM);
	CHECK_EQ(e.offset, FMT_PREAMBLE_LEN);
	CHECK(strstr(e.msg, "byte 16") != NULL);
	/* every truncation: an error inside the header, a cut-short profile after it */
	for (size_t n = 0; n < b.len; n++) {
		fmt_file f;
		fmt_error e3;
		int rc = fmt_read_mem(b.data, n, "t", &f, NULL, NULL, &e3);
		CHECK(rc != 0 || f.cut_short);
		fmt_file_free(&f);
	}
	free(copy);
	cm_buf_free(&b);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return (x > y) - (x < y);
}

UNIT_TEST(percentiles)
{
	srand(7);
	for (size_t n = 1; n < 400; n += 37) {
		uint64_t *v = malloc(n * sizeof *v), *s = malloc(n * sizeof *s);
		for (size_t i = 0; i < n; i++)
			v[i] = s[i] = (uint64_t)(rand() % 50); /* many ties */
		qsort(s, n, sizeof *s, cmp_u64);
		ana_dist d;
		ana_dist_compute_u64(&d, v, n);
		CHECK_EQ(d.p50, s[(size_t)ceil(0.50 * (double)n) - 1]);
		CHECK_EQ(d.p95, s[(size_t)ceil(0.95 * (double)n) - 1]);
		CHECK_EQ(d.p99, s[(size_t)ceil(0.99 * (double)n) - 1]);
		CHECK_EQ(d.min, s[0]);
		CHECK_EQ(d.max, s[n - 1]);
		free(v);
		free(s);
	}
}

int main(void)
{
	int passed = 0, failed = 0;
	for (const unit_test *t = __start_fennec_unit; t && t < __stop_fennec_unit; t++) {
		int f = 0;
		t->fn(&f);
		printf("%s unit/%s\n", f ? "FAIL" : "ok", t->name);
		passed += !f;
		failed += !!f;
	}
	printf("%d passed, %d failed\n", passed, failed);
	return failed ? 1 : 0;
}

/*
 * test_gpu.c - the GPU chunk (docs/format.md "GPU (1.3)"): every record type through the
 * encoder (writer.c) and back through the reader, the clock mapping of GPU times onto
 * ticks, the reader's errors on damaged records, and the occupancy estimate of the
 * analysis. Needs no CUDA headers.
 */
#include <math.h>
#include <stdlib.h>

#include "analyze/gpu.h"
#include "format/reader.h"
#include "unit.h"

/* A file with a HEADER (CLOCK_MONOTONIC ticks offset by -1000 ns: ticks = ns - 1000), a
 * GPU chunk of `body` after a prefix, and END. */
static void gpu_file(cm_buf *out, const cm_buf *body)
{
	uint8_t pre[FMT_PREAMBLE_LEN];
	fmt_preamble(pre);
	cm_buf_put(out, pre, sizeof pre);
	cm_buf h = {0};
	fmt_hdr_varint(&h, FMT_H_RECORDING, 7);
	fmt_hdr_varint(&h, FMT_H_PID, 99);
	fmt_hdr_varint(&h, FMT_H_START_MONO, 1000000);
	fmt_hdr_varint(&h, FMT_H_START_TICKS, 999000);
	fmt_hdr_varint(&h, FMT_H_CLOCK, 1);
	fmt_chunk_append(out, FMT_HEADER, h.data, h.len, 0, NULL);
	fmt_gpu_info in = {.cupti_version = 130001, .clock = FMT_GCLK_OFFSET, .offset_ns = -5, .offset_error_ns = 3,
			   .records = 9, .dropped = 1, .cupti_dropped = 2, .unknown = 4};
	cm_buf g = {0};
	fmt_gpu_prefix(&g, &in);
	cm_buf_put(&g, body->data, body->len);
	fmt_chunk_append(out, FMT_GPU, g.data, g.len, 1, NULL);
	cm_buf e = {0};
	for (int i = 0; i < 9; i++) /* STATS with no threads, lost bytes, exit reason */
		cm_buf_varint(&e, 0);
	fmt_chunk_append(out, FMT_END, e.data, e.len, 0, NULL);
	cm_buf_free(&h);
	cm_buf_free(&g);
	cm_buf_free(&e);
}

typedef struct got {
	fmt_gpu rec[16];
	char names[16][64];
	uint64_t ticks[16];
	int n;
} got;

static int keep(void *ctx, const fmt_file *f, const fmt_event *ev)
{
	got *g = ctx;
	(void)f;
	if (ev->type != FMT_EV_GPU || g->n >= 16)
		return 0;
	g->rec[g->n] = *ev->gpu;
	snprintf(g->names[g->n], sizeof g->names[0], "%s", ev->gpu->name_str ? ev->gpu->name_str : "");
	g->ticks[g->n] = ev->ticks;
	g->n++;
	return 0;
}

/* One record of every type, in a known order. */
static void all_records(cm_buf *b)
{
	uint64_t prev = 0;
	fmt_gpu_device d = {.id = 0, .name = "Test GPU", .has_uuid = 1, .cc_major = 9, .cc_minor = 0, .sm_count = 132,
			    .warp_size = 32, .max_threads_per_block = 1024, .max_warps_per_sm = 64,
			    .max_blocks_per_sm = 32, .regs_per_sm = 65536, .regs_per_block = 65536,
			    .smem_per_sm = 233472, .smem_per_block = 232448, .memory_bytes = 80ull << 30,
			    .clock_khz = 1980000};
	memcpy(d.uuid, "0123456789abcdef", 16);
	fmt_gpu_device_put(b, &d);
	fmt_gpu_string_put(b, 1, "void gemm<float>(float*)", 24);
	fmt_gpu_string_put(b, 2, "cudaLaunchKernel", 16);
	fmt_gpu_string_put(b, 3, "step timer", 10);
	fmt_gpu k = {.type = FMT_GR_KERNEL, .device = 0, .context = 1, .stream = 7, .start_ns = 2000000,
		     .end_ns = 2003000, .name = 1, .grid = {80, 2, 1}, .block = {256, 1, 1}, .regs = 40,
		     .smem_static = 4096, .smem_dynamic = 8192, .correlation = 11};
	fmt_gpu_put(b, &k, &prev);
	fmt_gpu m = {.type = FMT_GR_MEMCPY, .device = 0, .context = 1, .stream = 7, .start_ns = 1999000,
		     .end_ns = 1999500, .kind = FMT_CPY_HTOD, .mem_kind = FMT_GMEM_PAGEABLE, .dst_kind = FMT_GMEM_DEVICE,
		     .bytes = 1 << 20, .correlation = 12, .src_device = 0, .dst_device = 0};
	fmt_gpu_put(b, &m, &prev);
	fmt_gpu s = {.type = FMT_GR_MEMSET, .device = 0, .context = 1, .stream = 7, .start_ns = 2004000,
		     .end_ns = 2004100, .mem_kind = FMT_GMEM_DEVICE, .bytes = 4096, .value = 0, .correlation = 13};
	fmt_gpu_put(b, &s, &prev);
	fmt_gpu y = {.type = FMT_GR_SYNC, .kind = FMT_SYNC_STREAM, .context = 1, .stream = 7, .start_ns = 2001000,
		     .end_ns = 2003100, .correlation = 14, .value = 0};
	fmt_gpu_put(b, &y, &prev);
	fmt_gpu a = {.type = FMT_GR_API, .kind = FMT_API_RUNTIME, .tid = 4242, .start_ns = 1998000, .end_ns = 1998700,
		     .name = 2, .cbid = 211, .correlation = 11, .value = 0};
	fmt_gpu_put(b, &a, &prev);
	fmt_gpu mm = {.type = FMT_GR_MEMORY, .kind = FMT_GMOP_ALLOC, .mem_kind = FMT_GMEM_DEVICE, .device = 0,
		      .context = 1, .stream = 0, .start_ns = 1990000, .end_ns = 1990000, .address = 0x7f0000000000ull,
		      .bytes = 64 << 20, .correlation = 9};
	fmt_gpu_put(b, &mm, &prev);
	fmt_gpu o = {.type = FMT_GR_OVERHEAD, .kind = 8, .mem_kind = 2, .tid = 4242, .start_ns = 1990500, .end_ns = 1990900};
	fmt_gpu_put(b, &o, &prev);
	fmt_gpu n = {.type = FMT_GR_NVML, .device = 0, .start_ns = 2100000, .value = 1u << FMT_NV_SM_PCT | 1u << FMT_NV_POWER_MW};
	n.nvml[FMT_NV_SM_PCT] = 87;
	n.nvml[FMT_NV_POWER_MW] = 312000;
	fmt_gpu_put(b, &n, &prev);
	fmt_gpu t = {.type = FMT_GR_TIMER, .name = 3, .tid = 4242, .start_ns = 2200000, .end_ns = 2250000, .value = 0x55,
		     .step = 3};
	fmt_gpu_put(b, &t, &prev);
}

UNIT_TEST(gpu_chunk_roundtrip)
{
	cm_buf body = {0}, file = {0};
	all_records(&body);
	gpu_file(&file, &body);
	fmt_file f;
	fmt_error e;
	got g = {0};
	int rc = fmt_read_mem(file.data, file.len, "gpu.fnc", &f, keep, &g, &e);
	UNIT_CHECK_EQ(rc, 0);
	if (rc)
		printf("    %s\n", e.msg);
	UNIT_CHECK(f.has_gpu);
	UNIT_CHECK_EQ(f.gpu.cupti_version, 130001);
	UNIT_CHECK_EQ(f.gpu.clock, FMT_GCLK_OFFSET);
	UNIT_CHECK_EQ(f.gpu.offset_ns, -5);
	UNIT_CHECK_EQ(f.gpu.cupti_dropped, 2);
	UNIT_CHECK_EQ(f.gpu.unknown, 4);
	UNIT_CHECK_EQ(f.ngpu_devices, 1);
	const fmt_gpu_device *d = fmt_gpu_device_get(&f, 0);
	UNIT_CHECK(d != NULL);
	if (d) {
		UNIT_CHECK_STR(d->name, "Test GPU");
		UNIT_CHECK_EQ(d->sm_count, 132);
		UNIT_CHECK_EQ(d->smem_per_sm, 233472);
		UNIT_CHECK_EQ(d->memory_bytes, 80ull << 30);
		UNIT_CHECK(d->has_uuid && !memcmp(d->uuid, "0123456789abcdef", 16));
	}
	UNIT_CHECK_EQ(g.n, 9);
	fmt_gpu *k = &g.rec[0];
	UNIT_CHECK_EQ(k->type, FMT_GR_KERNEL);
	UNIT_CHECK_STR(g.names[0], "void gemm<float>(float*)");
	UNIT_CHECK_EQ(k->start_ns, 2000000);
	UNIT_CHECK_EQ(k->end_ns, 2003000);
	UNIT_CHECK_EQ(k->grid[0] * k->grid[1], 160);
	UNIT_CHECK_EQ(k->block[0], 256);
	UNIT_CHECK_EQ(k->regs, 40);
	UNIT_CHECK_EQ(k->smem_dynamic, 8192);
	UNIT_CHECK_EQ(k->correlation, 11);
	UNIT_CHECK_EQ(k->stream, 7);
	/* ticks = ns - 1000 with CLOCK_MONOTONIC ticks starting 1000 below the ns */
	UNIT_CHECK_EQ(g.ticks[0], 2000000 - 1000);
	UNIT_CHECK_EQ(g.rec[1].kind, FMT_CPY_HTOD);
	UNIT_CHECK_EQ(g.rec[1].mem_kind, FMT_GMEM_PAGEABLE);
	UNIT_CHECK_EQ(g.rec[1].start_ns, 1999000); /* a negative delta */
	UNIT_CHECK_EQ(g.rec[1].bytes, 1 << 20);
	UNIT_CHECK_EQ(g.rec[2].bytes, 4096);
	UNIT_CHECK_EQ(g.rec[3].kind, FMT_SYNC_STREAM);
	UNIT_CHECK_EQ(g.rec[3].end_ns - g.rec[3].start_ns, 2100);
	UNIT_CHECK_STR(g.names[4], "cudaLaunchKernel");
	UNIT_CHECK_EQ(g.rec[4].tid, 4242);
	UNIT_CHECK_EQ(g.rec[4].cbid, 211);
	UNIT_CHECK_EQ(g.rec[5].address, 0x7f0000000000ull);
	UNIT_CHECK_EQ(g.rec[5].end_ns, g.rec[5].start_ns);
	UNIT_CHECK_EQ(g.rec[6].kind, 8);
	UNIT_CHECK_EQ(g.rec[7].nvml[FMT_NV_SM_PCT], 87);
	UNIT_CHECK_EQ(g.rec[7].nvml[FMT_NV_POWER_MW], 312000);
	UNIT_CHECK_EQ(g.rec[7].nvml[FMT_NV_TEMP_C], 0);
	UNIT_CHECK_STR(g.names[8], "step timer");
	UNIT_CHECK_EQ(g.rec[8].end_ns - g.rec[8].start_ns, 50000);
	UNIT_CHECK_EQ(g.rec[8].step, 3);
	fmt_file_free(&f);
	cm_buf_free(&body);
	cm_buf_free(&file);
}

/* Read a GPU chunk of `body`; returns the reader's code, the message in e. */
static int read_body(const cm_buf *body, fmt_error *e)
{
	cm_buf file = {0};
	gpu_file(&file, body);
	fmt_file f;
	int rc = fmt_read_mem(file.data, file.len, "bad.fnc", &f, NULL, NULL, e);
	fmt_file_free(&f);
	cm_buf_free(&file);
	return rc;
}

UNIT_TEST(gpu_chunk_errors)
{
	fmt_error e;
	uint64_t prev = 0;
	cm_buf b = {0};
	fmt_gpu k = {.type = FMT_GR_KERNEL, .start_ns = 10, .end_ns = 20, .name = 5};
	fmt_gpu_put(&b, &k, &prev); /* names string 5, never defined */
	UNIT_CHECK_EQ(read_body(&b, &e), FENNEC_ECORRUPT);
	UNIT_CHECK(strstr(e.msg, "undefined string 5") != NULL);
	UNIT_CHECK(strstr(e.msg, "bad.fnc: byte ") == e.msg);

	b.len = 0;
	fmt_gpu_string_put(&b, 1, "x", 1);
	fmt_gpu_string_put(&b, 1, "y", 1);
	UNIT_CHECK_EQ(read_body(&b, &e), FENNEC_ECORRUPT);
	UNIT_CHECK(strstr(e.msg, "defined twice") != NULL);

	b.len = 0;
	prev = 0;
	fmt_gpu m = {.type = FMT_GR_MEMCPY, .start_ns = 10, .end_ns = 20, .kind = 11}; /* copy kind out of range */
	fmt_gpu_put(&b, &m, &prev);
	UNIT_CHECK_EQ(read_body(&b, &e), FENNEC_ECORRUPT);
	UNIT_CHECK(strstr(e.msg, "payload byte 0") != NULL);

	b.len = 0;
	cm_buf_u8(&b, 99);
	UNIT_CHECK_EQ(read_body(&b, &e), FENNEC_ECORRUPT);
	UNIT_CHECK(strstr(e.msg, "unknown record type 99") != NULL);

	/* every proper prefix of a valid body is an error, never a crash or a read past it */
	cm_buf all = {0};
	all_records(&all);
	int errors = 0;
	for (size_t n = 1; n < all.len; n++) {
		cm_buf cut = {all.data, n, n, 0};
		errors += read_body(&cut, &e) != 0;
	}
	UNIT_CHECK(errors > (int)all.len / 2); /* a cut can also land on a record boundary */
	cm_buf_free(&all);
	cm_buf_free(&b);
}

/* Theoretical occupancy against the CUDA occupancy calculator's answers for an A100
 * (compute capability 8.0) and a V100 (7.0). */
UNIT_TEST(gpu_occupancy)
{
	fmt_gpu_device a100 = {.cc_major = 8, .warp_size = 32, .max_warps_per_sm = 64, .max_blocks_per_sm = 32,
			       .regs_per_sm = 65536, .regs_per_block = 65536, .smem_per_sm = 167936,
			       .smem_per_block = 166912};
	fmt_gpu_device v100 = {.cc_major = 7, .warp_size = 32, .max_warps_per_sm = 64, .max_blocks_per_sm = 32,
			       .regs_per_sm = 65536, .regs_per_block = 65536, .smem_per_sm = 98304,
			       .smem_per_block = 98304};
	const char *lim;
	UNIT_CHECK_EQ(llround(1000 * ana_gpu_occupancy(&a100, 256, 32, 0, &lim)), 1000);
	UNIT_CHECK_STR(lim, "warps");
	UNIT_CHECK_EQ(llround(1000 * ana_gpu_occupancy(&a100, 128, 64, 0, &lim)), 500);
	UNIT_CHECK_STR(lim, "registers");
	UNIT_CHECK_EQ(llround(1000 * ana_gpu_occupancy(&a100, 256, 32, 48 * 1024, &lim)), 375); /* 3 blocks of 8 warps */
	UNIT_CHECK_STR(lim, "shared memory");
	UNIT_CHECK_EQ(llround(1000 * ana_gpu_occupancy(&a100, 32, 16, 0, &lim)), 500); /* 32 blocks of one warp */
	UNIT_CHECK_STR(lim, "blocks");
	UNIT_CHECK_EQ(llround(1000 * ana_gpu_occupancy(&a100, 1024, 72, 0, &lim)), 0); /* 73728 registers a block */
	UNIT_CHECK_STR(lim, "registers");
	UNIT_CHECK_EQ(llround(1000 * ana_gpu_occupancy(&v100, 512, 40, 16384, &lim)), 750); /* 48 warps of registers */
	UNIT_CHECK_STR(lim, "registers");
	UNIT_CHECK_EQ(llround(1000 * ana_gpu_occupancy(&v100, 96, 0, 0, &lim)), 984); /* 3 warps: 21 blocks, 63 of 64 warps */
	fmt_gpu_device none = {0};
	UNIT_CHECK(ana_gpu_occupancy(&none, 256, 32, 0, &lim) < 0);
	UNIT_CHECK(ana_gpu_occupancy(NULL, 256, 32, 0, NULL) < 0);
}

/*
 * reader_gpu.c - the reader's decoding of the GPU's chunks, GPU and GPUX (docs/format.md,
 * "GPU (1.3)"). reader.c's chunk loop calls the decoders.
 */
#include <math.h>

#include "format/decode.h"

/* ---- GPU (docs/format.md "GPU (1.3)") ---- */

#define MAX_GPU_STRINGS (1u << 24)
#define MAX_GPU_DEVICES 4096

static int gpu_device(rd *r, cur *c, const uint8_t *at, const uint8_t *base)
{
	fmt_file *f = r->f;
	fmt_gpu_device d = {0};
	d.id = (uint32_t)cur_varint(c);
	size_t nlen, ulen;
	char *name = cur_string_n(c, &nlen);
	char *uuid = cur_string_n(c, &ulen);
	uint32_t *v[] = {&d.cc_major, &d.cc_minor, &d.sm_count, &d.warp_size, &d.max_threads_per_block,
			 &d.max_warps_per_sm, &d.max_blocks_per_sm, &d.regs_per_sm, &d.regs_per_block,
			 &d.smem_per_sm, &d.smem_per_block};
	for (size_t i = 0; i < ARRAY_LEN(v); i++) {
		uint64_t x = cur_varint(c);
		if (x > UINT32_MAX)
			c->bad = 1;
		*v[i] = (uint32_t)x;
	}
	d.memory_bytes = cur_varint(c);
	uint64_t clk = cur_varint(c);
	d.clock_khz = (uint32_t)clk;
	if (!c->bad && ulen == 16) {
		memcpy(d.uuid, uuid, 16);
		d.has_uuid = 1;
	}
	free(uuid);
	if (c->bad || (ulen && ulen != 16) || clk > UINT32_MAX) {
		free(name);
		return fail(r, FENNEC_ECORRUPT, r->chunk_off, "GPU: bad device record at payload byte %td", at - base);
	}
	d.name = name;
	for (uint32_t i = 0; i < f->ngpu_devices; i++)
		if (f->gpu_devices[i].id == d.id) {
			free((char *)f->gpu_devices[i].name);
			f->gpu_devices[i] = d;
			return 0;
		}
	if (f->ngpu_devices >= MAX_GPU_DEVICES ||
	    grow((void **)&f->gpu_devices, &f->gpu_devices_cap, f->ngpu_devices + 1, sizeof d, MAX_GPU_DEVICES) < 0) {
		free(name);
		return fail(r, FENNEC_ECORRUPT, r->chunk_off, "GPU: more than %u devices", MAX_GPU_DEVICES);
	}
	f->gpu_devices[f->ngpu_devices++] = d;
	return 0;
}

static int gpu_string(rd *r, cur *c, const uint8_t *at, const uint8_t *base)
{
	fmt_file *f = r->f;
	uint64_t id = cur_varint(c);
	char *s = cur_string(c);
	if (c->bad || id == 0 || id >= MAX_GPU_STRINGS ||
	    grow((void **)&f->gpu_strings, &f->ngpu_strings, (uint32_t)id + 1, sizeof *f->gpu_strings, MAX_GPU_STRINGS) < 0) {
		free(s);
		return fail(r, FENNEC_ECORRUPT, r->chunk_off, "GPU: bad string record at payload byte %td", at - base);
	}
	if (f->gpu_strings[id]) {
		free(s);
		return fail(r, FENNEC_ECORRUPT, r->chunk_off, "GPU: string %llu defined twice", (unsigned long long)id);
	}
	f->gpu_strings[id] = s;
	return 0;
}

/* A varint that must fit in 32 bits. */
static uint32_t gpu_u32(cur *c)
{
	uint64_t v = cur_varint(c);
	if (v > UINT32_MAX)
		c->bad = 1;
	return (uint32_t)v;
}

/* A byte that must be at most `max`. */
static uint8_t gpu_enum(cur *c, unsigned max)
{
	uint8_t v = cur_u8(c);
	if (v > max)
		c->bad = 1;
	return v;
}

static void gpu_where(cur *c, fmt_gpu *g)
{
	g->device = gpu_u32(c);
	g->context = gpu_u32(c);
	g->stream = gpu_u32(c);
}

/* Start from the running time *t, end from a duration when `dur`. */
static void gpu_time(cur *c, fmt_gpu *g, uint64_t *t, int dur)
{
	*t += (uint64_t)cm_unzigzag(cur_varint(c));
	g->start_ns = *t;
	uint64_t d = dur ? cur_varint(c) : 0;
	g->end_ns = g->start_ns + d;
	if (g->end_ns < g->start_ns || (int64_t)*t < 0)
		c->bad = 1;
}

/* Hand a GPU or GPUX record to the callback as an event, at its start on the tick clock. */
static int deliver_gpu(rd *r, fmt_gpu *g)
{
	fmt_file *f = r->f;
	double ticks = f->fit_b > 0 ? ((double)g->start_ns - f->fit_a) / f->fit_b : (double)g->start_ns;
	fmt_event ev = {.type = FMT_EV_GPU, .thread = UINT32_MAX, .gpu = g, .tid = g->tid,
			.ticks = ticks > 0 ? (uint64_t)llround(ticks) : 0};
	return r->fn ? r->fn(r->ctx, f, &ev) : 0;
}

/* Decode one timed record of `type` into *g. */
static void gpu_record(cur *c, unsigned type, fmt_gpu *g, uint64_t *t)
{
	g->type = (uint8_t)type;
	switch (type) {
	case FMT_GR_KERNEL:
		gpu_where(c, g);
		gpu_time(c, g, t, 1);
		g->name = gpu_u32(c);
		for (int i = 0; i < 3; i++)
			g->grid[i] = gpu_u32(c);
		for (int i = 0; i < 3; i++)
			g->block[i] = gpu_u32(c);
		g->regs = gpu_u32(c);
		g->smem_static = gpu_u32(c);
		g->smem_dynamic = gpu_u32(c);
		g->correlation = gpu_u32(c);
		break;
	case FMT_GR_MEMCPY:
		gpu_where(c, g);
		gpu_time(c, g, t, 1);
		g->kind = gpu_enum(c, FMT_CPY_MAX);
		g->mem_kind = gpu_enum(c, FMT_GMEM_MAX);
		g->dst_kind = gpu_enum(c, FMT_GMEM_MAX);
		g->bytes = cur_varint(c);
		g->correlation = gpu_u32(c);
		g->src_device = gpu_u32(c);
		g->dst_device = gpu_u32(c);
		break;
	case FMT_GR_MEMSET:
		gpu_where(c, g);
		gpu_time(c, g, t, 1);
		g->mem_kind = gpu_enum(c, FMT_GMEM_MAX);
		g->bytes = cur_varint(c);
		g->value = cur_varint(c);
		g->correlation = gpu_u32(c);
		break;
	case FMT_GR_SYNC:
		g->kind = gpu_enum(c, FMT_SYNC_MAX);
		g->context = gpu_u32(c);
		g->stream = gpu_u32(c);
		gpu_time(c, g, t, 1);
		g->correlation = gpu_u32(c);
		g->value = cur_varint(c);
		break;
	case FMT_GR_API:
		g->kind = gpu_enum(c, FMT_API_DRIVER);
		g->tid = cur_varint(c);
		gpu_time(c, g, t, 1);
		g->name = gpu_u32(c);
		g->cbid = gpu_u32(c);
		g->correlation = gpu_u32(c);
		g->value = cur_varint(c);
		break;
	case FMT_GR_MEMORY:
		g->kind = cur_u8(c);
		if (g->kind != FMT_GMOP_ALLOC && g->kind != FMT_GMOP_FREE)
			c->bad = 1;
		g->mem_kind = gpu_enum(c, FMT_GMEM_MAX);
		g->dst_kind = gpu_enum(c, 2);
		gpu_where(c, g);
		gpu_time(c, g, t, 0);
		g->address = cur_varint(c);
		g->bytes = cur_varint(c);
		g->correlation = gpu_u32(c);
		break;
	case FMT_GR_OVERHEAD:
		g->kind = gpu_enum(c, FMT_OVH_MAX);
		g->mem_kind = gpu_enum(c, FMT_OBJ_MAX);
		g->tid = cur_varint(c);
		gpu_time(c, g, t, 1);
		break;
	case FMT_GR_NVML:
		g->device = gpu_u32(c);
		gpu_time(c, g, t, 0);
		g->value = cur_varint(c);
		if (g->value >> FMT_NV_COUNT)
			c->bad = 1;
		for (int i = 0; i < FMT_NV_COUNT && !c->bad; i++)
			if (g->value >> i & 1)
				g->nvml[i] = cur_varint(c);
		break;
	case FMT_GR_TIMER:
		g->name = gpu_u32(c);
		g->tid = cur_varint(c);
		gpu_time(c, g, t, 0);
		g->value = cur_varint(c);
		g->end_ns = g->start_ns + cur_varint(c);
		if (g->end_ns < g->start_ns)
			c->bad = 1;
		g->step = cur_varint(c);
		break;
	default:
		c->bad = 1;
		break;
	}
}

int decode_gpu(rd *r, cur *c)
{
	fmt_file *f = r->f;
	fmt_gpu_info *in = &f->gpu;
	in->cupti_version = cur_varint(c);
	in->clock = cur_u8(c);
	in->offset_ns = cm_unzigzag(cur_varint(c));
	in->offset_error_ns = cur_varint(c);
	in->flags = cur_varint(c);
	in->records = cur_varint(c);
	in->dropped = cur_varint(c);
	in->cupti_dropped = cur_varint(c);
	in->unknown = cur_varint(c);
	if (c->bad || in->clock > FMT_GCLK_NONE || in->flags & ~(uint64_t)FMT_GPU_KERNELS_ONLY)
		return fail(r, FENNEC_ECORRUPT, r->chunk_off, "GPU: bad chunk prefix");
	f->has_gpu = 1;
	uint64_t t = 0;
	const uint8_t *base = c->p;
	while (c->p < c->end && !c->bad) {
		const uint8_t *at = c->p;
		unsigned type = cur_u8(c);
		if (type == FMT_GR_DEVICE || type == FMT_GR_STRING) {
			int rc = type == FMT_GR_DEVICE ? gpu_device(r, c, at, base) : gpu_string(r, c, at, base);
			if (rc)
				return rc;
			continue;
		}
		if (type < FMT_GR_KERNEL || type > FMT_GR_TIMER)
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "GPU: unknown record type %u at payload byte %td", type, at - base);
		fmt_gpu g = {0};
		gpu_record(c, type, &g, &t);
		if (c->bad)
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "GPU: bad or truncated record (type %u) at payload byte %td",
				    type, at - base);
		if (g.name && (g.name >= f->ngpu_strings || !f->gpu_strings[g.name]))
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "GPU: record at payload byte %td names undefined string %u",
				    at - base, g.name);
		g.name_str = g.name ? f->gpu_strings[g.name] : NULL;
		int rc = deliver_gpu(r, &g);
		if (rc)
			return rc;
	}
	return c->bad ? fail(r, FENNEC_ECORRUPT, r->chunk_off, "GPU: record runs past the end of the chunk") : 0;
}

/* GPUX (1.4): NVTX start/end ranges and marks, NVLink counters, delivered as FMT_EV_GPU
 * events of types FMT_GR_RANGE_START .. FMT_GR_NVLINK. Messages are copied into a buffer
 * of this call: borrowed by the callback. */
int decode_gpux(rd *r, cur *c)
{
	fmt_file *f = r->f;
	f->gpux_dropped = cur_varint(c);
	if (c->bad)
		return fail(r, FENNEC_ECORRUPT, r->chunk_off, "GPUX: bad chunk prefix");
	f->has_gpu = 1;
	uint64_t t = 0;
	const uint8_t *base = c->p;
	char text[FMT_GPUX_TEXT_MAX + 1];
	while (c->p < c->end && !c->bad) {
		const uint8_t *at = c->p;
		unsigned type = cur_u8(c);
		fmt_gpu g = {0};
		text[0] = 0;
		switch (type) {
		case FMT_GX_RANGE_START:
		case FMT_GX_RANGE_END:
			g.type = type == FMT_GX_RANGE_START ? FMT_GR_RANGE_START : FMT_GR_RANGE_END;
			g.range_id = cur_varint(c);
			g.tid = cur_varint(c);
			gpu_time(c, &g, &t, 0);
			break;
		case FMT_GX_MARK:
			g.type = FMT_GR_MARK;
			g.tid = cur_varint(c);
			gpu_time(c, &g, &t, 0);
			break;
		case FMT_GX_NVLINK:
			g.type = FMT_GR_NVLINK;
			g.device = gpu_u32(c);
			gpu_time(c, &g, &t, 0);
			g.tx_bytes = cur_varint(c);
			g.rx_bytes = cur_varint(c);
			break;
		default:
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "GPUX: unknown record type %u at payload byte %td", type,
				    at - base);
		}
		if (type == FMT_GX_RANGE_START || type == FMT_GX_MARK) {
			uint64_t n = cur_varint(c);
			if (c->bad || n > FMT_GPUX_TEXT_MAX || n > (uint64_t)(c->end - c->p))
				c->bad = 1;
			else {
				memcpy(text, c->p, n);
				text[n] = 0;
				c->p += n;
			}
			g.text = text;
		}
		if (c->bad || (g.type != FMT_GR_NVLINK && !g.range_id && g.type != FMT_GR_MARK))
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "GPUX: bad or truncated record (type %u) at payload byte %td",
				    type, at - base);
		int rc = deliver_gpu(r, &g);
		if (rc)
			return rc;
	}
	return c->bad ? fail(r, FENNEC_ECORRUPT, r->chunk_off, "GPUX: record runs past the end of the chunk") : 0;
}

const fmt_gpu_device *fmt_gpu_device_get(const fmt_file *f, uint32_t id)
{
	for (uint32_t i = 0; i < f->ngpu_devices; i++)
		if (f->gpu_devices[i].id == id)
			return &f->gpu_devices[i];
	return NULL;
}


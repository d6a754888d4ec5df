/*
 * writer.c - framing of profile chunks (docs/format.md): preamble, header fields and
 * checksummed, optionally zstd-compressed chunks. Used by the collector's writer
 * thread (never on a hot path) and by tests that build files by hand.
 */
#include "format/format.h"

#include <zstd.h>

void fmt_preamble(uint8_t out[FMT_PREAMBLE_LEN])
{
	memcpy(out, FMT_MAGIC, 8);
	out[8] = FMT_MAJOR;
	out[9] = 0;
	out[10] = FMT_MINOR;
	out[11] = 0;
	memset(out + 12, 0, 4);
}

void fmt_hdr_varint(cm_buf *b, unsigned key, uint64_t v)
{
	cm_buf_varint(b, key);
	cm_buf_u8(b, FMT_K_VARINT);
	cm_buf_varint(b, v);
}

void fmt_hdr_zigzag(cm_buf *b, unsigned key, int64_t v)
{
	cm_buf_varint(b, key);
	cm_buf_u8(b, FMT_K_ZIGZAG);
	cm_buf_varint(b, cm_zigzag(v));
}

void fmt_hdr_string(cm_buf *b, unsigned key, const char *s, size_t n)
{
	cm_buf_varint(b, key);
	cm_buf_u8(b, FMT_K_STRING);
	cm_buf_string(b, s, n);
}

void fmt_hdr_f64(cm_buf *b, unsigned key, double v)
{
	cm_buf_varint(b, key);
	cm_buf_u8(b, FMT_K_F64);
	cm_buf_f64(b, v);
}

int fmt_chunk_append(cm_buf *out, unsigned type, const uint8_t *raw, size_t raw_len, int level, void *zctx)
{
	if (raw_len > FMT_MAX_RAW)
		return FENNEC_EINVAL;
	size_t bound = ZSTD_compressBound(raw_len);
	if (cm_buf_reserve(out, FMT_CHUNK_HDR_LEN + (bound > raw_len ? bound : raw_len)) < 0)
		return FENNEC_ENOMEM;
	uint8_t *hdr = out->data + out->len;
	uint8_t *payload = hdr + FMT_CHUNK_HDR_LEN;
	size_t stored = raw_len;
	unsigned codec = FMT_RAW;
	if (level > 0 && raw_len >= 64) {
		ZSTD_CCtx *cc = zctx ? (ZSTD_CCtx *)zctx : ZSTD_createCCtx();
		size_t z = cc ? ZSTD_compressCCtx(cc, payload, bound, raw, raw_len, level) : 0;
		if (!zctx)
			ZSTD_freeCCtx(cc);
		if (cc && !ZSTD_isError(z) && z < raw_len) {
			stored = z;
			codec = FMT_ZSTD;
		}
	}
	if (codec == FMT_RAW && raw_len)
		memcpy(payload, raw, raw_len);
	hdr[0] = (uint8_t)type;
	hdr[1] = (uint8_t)codec;
	hdr[2] = hdr[3] = 0;
	cm_le32_put(hdr + 4, (uint32_t)stored);
	cm_le32_put(hdr + 8, (uint32_t)raw_len);
	uint32_t crc = cm_crc32c(0, hdr, 12);
	crc = cm_crc32c(crc, payload, stored);
	cm_le32_put(hdr + 12, crc);
	out->len += FMT_CHUNK_HDR_LEN + stored;
	return 0;
}

/* ---- GPU chunk records (docs/format.md "GPU (1.3)") ---- */

void fmt_gpu_prefix(cm_buf *b, const fmt_gpu_info *in)
{
	cm_buf_varint(b, in->cupti_version);
	cm_buf_u8(b, (uint8_t)in->clock);
	cm_buf_varint(b, cm_zigzag(in->offset_ns));
	cm_buf_varint(b, in->offset_error_ns);
	cm_buf_varint(b, in->flags);
	cm_buf_varint(b, in->records);
	cm_buf_varint(b, in->dropped);
	cm_buf_varint(b, in->cupti_dropped);
	cm_buf_varint(b, in->unknown);
}

void fmt_gpu_string_put(cm_buf *b, uint32_t id, const char *s, size_t n)
{
	cm_buf_u8(b, FMT_GR_STRING);
	cm_buf_varint(b, id);
	cm_buf_string(b, s, n);
}

void fmt_gpu_device_put(cm_buf *b, const fmt_gpu_device *d)
{
	const char *name = d->name ? d->name : "";
	cm_buf_u8(b, FMT_GR_DEVICE);
	cm_buf_varint(b, d->id);
	cm_buf_string(b, name, strlen(name));
	cm_buf_string(b, (const char *)d->uuid, d->has_uuid ? 16 : 0);
	uint64_t v[] = {d->cc_major, d->cc_minor, d->sm_count, d->warp_size, d->max_threads_per_block,
			d->max_warps_per_sm, d->max_blocks_per_sm, d->regs_per_sm, d->regs_per_block,
			d->smem_per_sm, d->smem_per_block, d->memory_bytes, d->clock_khz};
	for (size_t i = 0; i < ARRAY_LEN(v); i++)
		cm_buf_varint(b, v[i]);
}

/* The start as a delta from the previous timed record, then the duration. */
static void gpu_time(cm_buf *b, const fmt_gpu *r, uint64_t *prev_ns, int with_duration)
{
	cm_buf_varint(b, cm_zigzag((int64_t)(r->start_ns - *prev_ns)));
	*prev_ns = r->start_ns;
	if (with_duration)
		cm_buf_varint(b, r->end_ns > r->start_ns ? r->end_ns - r->start_ns : 0);
}

static void gpu_where(cm_buf *b, const fmt_gpu *r)
{
	cm_buf_varint(b, r->device);
	cm_buf_varint(b, r->context);
	cm_buf_varint(b, r->stream);
}

void fmt_gpu_put(cm_buf *b, const fmt_gpu *r, uint64_t *prev_ns)
{
	cm_buf_u8(b, r->type);
	switch (r->type) {
	case FMT_GR_KERNEL:
		gpu_where(b, r);
		gpu_time(b, r, prev_ns, 1);
		cm_buf_varint(b, r->name);
		for (int i = 0; i < 3; i++)
			cm_buf_varint(b, r->grid[i]);
		for (int i = 0; i < 3; i++)
			cm_buf_varint(b, r->block[i]);
		cm_buf_varint(b, r->regs);
		cm_buf_varint(b, r->smem_static);
		cm_buf_varint(b, r->smem_dynamic);
		cm_buf_varint(b, r->correlation);
		break;
	case FMT_GR_MEMCPY:
		gpu_where(b, r);
		gpu_time(b, r, prev_ns, 1);
		cm_buf_u8(b, r->kind);
		cm_buf_u8(b, r->mem_kind);
		cm_buf_u8(b, r->dst_kind);
		cm_buf_varint(b, r->bytes);
		cm_buf_varint(b, r->correlation);
		cm_buf_varint(b, r->src_device);
		cm_buf_varint(b, r->dst_device);
		break;
	case FMT_GR_MEMSET:
		gpu_where(b, r);
		gpu_time(b, r, prev_ns, 1);
		cm_buf_u8(b, r->mem_kind);
		cm_buf_varint(b, r->bytes);
		cm_buf_varint(b, r->value);
		cm_buf_varint(b, r->correlation);
		break;
	case FMT_GR_SYNC:
		cm_buf_u8(b, r->kind);
		cm_buf_varint(b, r->context);
		cm_buf_varint(b, r->stream);
		gpu_time(b, r, prev_ns, 1);
		cm_buf_varint(b, r->correlation);
		cm_buf_varint(b, r->value);
		break;
	case FMT_GR_API:
		cm_buf_u8(b, r->kind);
		cm_buf_varint(b, r->tid);
		gpu_time(b, r, prev_ns, 1);
		cm_buf_varint(b, r->name);
		cm_buf_varint(b, r->cbid);
		cm_buf_varint(b, r->correlation);
		cm_buf_varint(b, r->value);
		break;
	case FMT_GR_MEMORY:
		cm_buf_u8(b, r->kind);
		cm_buf_u8(b, r->mem_kind);
		cm_buf_u8(b, r->dst_kind);
		gpu_where(b, r);
		gpu_time(b, r, prev_ns, 0);
		cm_buf_varint(b, r->address);
		cm_buf_varint(b, r->bytes);
		cm_buf_varint(b, r->correlation);
		break;
	case FMT_GR_OVERHEAD:
		cm_buf_u8(b, r->kind);
		cm_buf_u8(b, r->mem_kind);
		cm_buf_varint(b, r->tid);
		gpu_time(b, r, prev_ns, 1);
		break;
	case FMT_GR_NVML:
		cm_buf_varint(b, r->device);
		gpu_time(b, r, prev_ns, 0);
		cm_buf_varint(b, r->value);
		for (int i = 0; i < FMT_NV_COUNT; i++)
			if (r->value >> i & 1)
				cm_buf_varint(b, r->nvml[i]);
		break;
	case FMT_GR_TIMER:
		cm_buf_varint(b, r->name);
		cm_buf_varint(b, r->tid);
		gpu_time(b, r, prev_ns, 0);
		cm_buf_varint(b, r->value);
		cm_buf_varint(b, r->end_ns > r->start_ns ? r->end_ns - r->start_ns : 0);
		cm_buf_varint(b, r->step);
		break;
	default:
		b->failed = 1; /* DEVICE and STRING have their own functions */
		break;
	}
}

/* ---- GPUX chunk records (docs/format.md "GPU additions (1.4)") ---- */

void fmt_gpux_prefix(cm_buf *b, uint64_t dropped) { cm_buf_varint(b, dropped); }

void fmt_gpux_put(cm_buf *b, const fmt_gpu *r, uint64_t *prev_ns)
{
	const char *text = r->text ? r->text : "";
	size_t n = strlen(text);
	if (n > FMT_GPUX_TEXT_MAX)
		n = FMT_GPUX_TEXT_MAX;
	switch (r->type) {
	case FMT_GR_RANGE_START:
		cm_buf_u8(b, FMT_GX_RANGE_START);
		cm_buf_varint(b, r->range_id);
		cm_buf_varint(b, r->tid);
		gpu_time(b, r, prev_ns, 0);
		cm_buf_string(b, text, n);
		break;
	case FMT_GR_RANGE_END:
		cm_buf_u8(b, FMT_GX_RANGE_END);
		cm_buf_varint(b, r->range_id);
		cm_buf_varint(b, r->tid);
		gpu_time(b, r, prev_ns, 0);
		break;
	case FMT_GR_MARK:
		cm_buf_u8(b, FMT_GX_MARK);
		cm_buf_varint(b, r->tid);
		gpu_time(b, r, prev_ns, 0);
		cm_buf_string(b, text, n);
		break;
	case FMT_GR_NVLINK:
		cm_buf_u8(b, FMT_GX_NVLINK);
		cm_buf_varint(b, r->device);
		gpu_time(b, r, prev_ns, 0);
		cm_buf_varint(b, r->tx_bytes);
		cm_buf_varint(b, r->rx_bytes);
		break;
	default:
		b->failed = 1;
		break;
	}
}

/* ---- SYSTEM and ENERGY (docs/format.md "System metrics", "Energy") ---- */

void fmt_sys_prefix(cm_buf *b, uint64_t taken)
{
	cm_buf_varint(b, taken);
}

void fmt_sys_put(cm_buf *b, const fmt_sys *r, uint64_t *prev_ns)
{
	uint64_t present = r->present & ((1ull << FMT_SY_COUNT) - 1);
	cm_buf_u8(b, r->reason);
	cm_buf_varint(b, cm_zigzag((int64_t)(r->t_ns - *prev_ns)));
	*prev_ns = r->t_ns;
	cm_buf_varint(b, r->step);
	cm_buf_varint(b, present);
	for (unsigned i = 0; i < FMT_SY_COUNT; i++)
		if (present >> i & 1)
			cm_buf_varint(b, r->v[i]);
}

void fmt_energy_put(cm_buf *b, const fmt_energy *r, uint64_t *prev_ns)
{
	cm_buf_u8(b, r->type);
	cm_buf_varint(b, r->domain);
	if (r->type == FMT_ER_DOMAIN) {
		const char *n = r->name ? r->name : "";
		cm_buf_u8(b, r->source);
		cm_buf_u8(b, r->kind);
		cm_buf_string(b, n, strlen(n));
		return;
	}
	cm_buf_varint(b, cm_zigzag((int64_t)(r->t_ns - *prev_ns)));
	*prev_ns = r->t_ns;
	cm_buf_varint(b, r->uj);
	cm_buf_varint(b, r->max_uj);
}

/* ---- capped recordings: following a thread's stream (format.h, fmt_scan) ---- */

int fmt_scan_events(fmt_scan *s, const uint8_t *p, size_t len, uint64_t *steps, uint64_t *events)
{
	const uint8_t *end = p + len;
	while (p < end) {
		uint8_t tag = *p++;
		unsigned type = tag & 15, op = tag >> 4;
		uint64_t v = 0, dt = 0;
		int bad = 0;
		switch (type) {
		case FMT_EV_BEGIN:
			if (op == 15)
				bad |= cm_varint_get(&p, end, &v);
			else
				v = op;
			bad |= cm_varint_get(&p, end, &dt);
			if (s->depth < FMT_MAX_DEPTH)
				s->ids[s->depth] = (uint32_t)v;
			s->depth++;
			break;
		case FMT_EV_END:
			bad |= cm_varint_get(&p, end, &dt);
			if (s->depth)
				s->depth--;
			break;
		case FMT_EV_STEP:
			bad |= cm_varint_get(&p, end, &dt);
			if (op & 2)
				bad |= cm_varint_get(&p, end, &v);
			++*steps;
			break;
		case FMT_EV_COUNTER:
			bad |= cm_varint_get(&p, end, &v);
			bad |= cm_varint_get(&p, end, &dt);
			bad |= cm_varint_get(&p, end, &v);
			break;
		case FMT_EV_GAUGE:
		case FMT_EV_VALUE:
			bad |= cm_varint_get(&p, end, &v);
			bad |= cm_varint_get(&p, end, &dt);
			if (!bad && end - p >= 8)
				p += 8;
			else
				bad = 1;
			break;
		case FMT_EV_TIME:
			bad |= cm_varint_get(&p, end, &v);
			s->ticks = v;
			break;
		case FMT_EV_STACK: {
			uint64_t depth = 0;
			bad |= cm_varint_get(&p, end, &depth);
			for (uint64_t k = 0; !bad && k < depth; k++) {
				bad |= cm_varint_get(&p, end, &v);
				if (s->depth < FMT_MAX_DEPTH)
					s->ids[s->depth] = (uint32_t)v;
				s->depth++;
			}
			if (bad)
				return -1;
			*events += depth; /* the reader delivers one BEGIN each */
			continue;
		}
		default:
			bad = 1;
			break;
		}
		if (bad)
			return -1;
		s->ticks += dt;
		++*events;
	}
	return 0;
}

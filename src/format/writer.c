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

/*
 * common.h - small primitives shared by the collector and the analysis side: byte
 * buffers, LEB128 varints, CRC-32C, and the error strings. The only global state is the
 * CRC table, built once on first use (idempotent), so all of it is safe in the
 * collector's writer thread and in fork children.
 */
#ifndef FENNEC_COMMON_H
#define FENNEC_COMMON_H

#include <stddef.h>
#include <stdint.h>
#include <string.h>
#include "fennec.h"

#define likely(x) __builtin_expect(!!(x), 1)
#define unlikely(x) __builtin_expect(!!(x), 0)
#define ARRAY_LEN(a) (sizeof(a) / sizeof((a)[0]))
/* A buffer's size: `normal`, or `small` in the fault-injection build (make FAULT=1), which
 * shrinks rings and buffers so that their full and wrapping paths run in every test. */
#ifdef FENNEC_FAULT
#define CM_SMALL(normal, small) (small)
#else
#define CM_SMALL(normal, small) (normal)
#endif
#define HIDDEN __attribute__((visibility("hidden")))

/* A growable byte buffer. Owns `data`; cm_buf_free() releases it. On allocation failure
 * the buffer sets `failed` and ignores further writes (the caller checks once). */
typedef struct cm_buf {
	uint8_t *data;
	size_t len;
	size_t cap;
	int failed;
} cm_buf;

int cm_buf_reserve(cm_buf *b, size_t extra);
void cm_buf_put(cm_buf *b, const void *p, size_t n);
void cm_buf_u8(cm_buf *b, uint8_t v);
void cm_buf_u16(cm_buf *b, uint16_t v);
void cm_buf_u32(cm_buf *b, uint32_t v);
void cm_buf_f64(cm_buf *b, double v);
void cm_buf_varint(cm_buf *b, uint64_t v);
void cm_buf_string(cm_buf *b, const char *s, size_t n);
void cm_buf_free(cm_buf *b);

/* A 64-bit mixer (MurmurHash3's finaliser): every bit of k reaches every bit of the result. */
static inline uint64_t cm_mix64(uint64_t k)
{
	k ^= k >> 33;
	k *= 0xff51afd7ed558ccdull;
	k ^= k >> 33;
	k *= 0xc4ceb9fe1a85ec53ull;
	k ^= k >> 33;
	return k;
}

static inline uint64_t cm_zigzag(int64_t v) { return ((uint64_t)v << 1) ^ (uint64_t)(v >> 63); }
static inline int64_t cm_unzigzag(uint64_t v) { return (int64_t)(v >> 1) ^ -(int64_t)(v & 1); }

/* Encode v at p (at most 10 bytes); returns the bytes written. */
static inline size_t cm_varint_put(uint8_t *p, uint64_t v)
{
	size_t n = 0;
	while (v >= 0x80) {
		p[n++] = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	p[n++] = (uint8_t)v;
	return n;
}

/* Decode a varint from [*p, end). Returns 0 and advances *p, or -1 if it runs past end
 * or is longer than 10 bytes. */
static inline int cm_varint_get(const uint8_t **p, const uint8_t *end, uint64_t *out)
{
	const uint8_t *q = *p;
	if (likely(q < end && q[0] < 0x80)) {
		*out = q[0];
		*p = q + 1;
		return 0;
	}
	uint64_t v = 0;
	for (int shift = 0; shift < 70 && q < end; shift += 7) {
		uint8_t c = *q++;
		v |= (uint64_t)(c & 0x7f) << shift;
		if (!(c & 0x80)) {
			*out = v;
			*p = q;
			return 0;
		}
	}
	return -1;
}

static inline void cm_le32_put(uint8_t *p, uint32_t v)
{
	p[0] = (uint8_t)v; p[1] = (uint8_t)(v >> 8); p[2] = (uint8_t)(v >> 16); p[3] = (uint8_t)(v >> 24);
}
static inline uint32_t cm_le32(const uint8_t *p)
{
	return (uint32_t)p[0] | (uint32_t)p[1] << 8 | (uint32_t)p[2] << 16 | (uint32_t)p[3] << 24;
}
static inline uint16_t cm_le16(const uint8_t *p) { return (uint16_t)(p[0] | p[1] << 8); }

/* CRC-32C (Castagnoli) of buf, continuing from crc (start with 0). */
uint32_t cm_crc32c(uint32_t crc, const void *buf, size_t n);

/* Monotonic and realtime clocks in nanoseconds. */
uint64_t cm_mono_ns(void);
uint64_t cm_real_ns(void);

/* The invariant TSC (x86): whether the CPU has one, and its rate in ticks per nanosecond
 * measured against CLOCK_MONOTONIC over at least span_ns (1.0 without a TSC). */
int cm_tsc_invariant(void);
double cm_tsc_per_ns(uint64_t span_ns);
/* A (mono_ns, TSC ticks) pair read at one instant (without a TSC: mono_ns twice). */
void cm_tsc_point(uint64_t *mono, uint64_t *ticks);

/* The machine's boot id (/proc/sys/kernel/random/boot_id, 36 characters): a rate measured
 * on one machine is handed only to processes on that machine. Returns 0, or -1. */
int cm_boot_id(char out[40]);

/* A step schedule "WAIT,WARMUP,ACTIVE,REPEAT" (fennec record --step-schedule and
 * FENNEC_STEP_SCHEDULE): four whole numbers, digits only, each at most UINT_MAX, into out.
 * Returns 0, or -1 (out partly written). */
int cm_parse_schedule(const char *s, unsigned out[4]);

/* FENNEC_TSC_RATE, which `fennec record` sets for the processes of a recording, "BOOT_ID
 * TICKS_PER_NS": what every process would otherwise measure at its start. */
#define CM_TSC_RATE_ENV "FENNEC_TSC_RATE"

#endif

/*
 * common.c - byte buffers, CRC-32C, clocks and fennec_strerror(). See common.h.
 */
#include "common/common.h"

#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <stdlib.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <cpuid.h>
#include <x86intrin.h>
#define CM_TSC 1
#else
#define CM_TSC 0
#endif

const char *fennec_strerror(int err)
{
	switch (err) {
#define FENNEC__ERR_CASE(name, code, text) \
	case code:                         \
		return text;
		FENNEC_ERRNO_MAP(FENNEC__ERR_CASE)
#undef FENNEC__ERR_CASE
	}
	return "unknown error";
}

int cm_buf_reserve(cm_buf *b, size_t extra)
{
	if (b->failed)
		return -1;
	if (b->len + extra <= b->cap)
		return 0;
	size_t cap = b->cap ? b->cap : 256;
	while (cap < b->len + extra)
		cap *= 2;
	uint8_t *d = realloc(b->data, cap);
	if (!d) {
		b->failed = 1;
		return -1;
	}
	b->data = d;
	b->cap = cap;
	return 0;
}

void cm_buf_put(cm_buf *b, const void *p, size_t n)
{
	if (n == 0 || cm_buf_reserve(b, n) < 0)
		return;
	memcpy(b->data + b->len, p, n);
	b->len += n;
}

void cm_buf_u8(cm_buf *b, uint8_t v) { cm_buf_put(b, &v, 1); }

void cm_buf_u16(cm_buf *b, uint16_t v)
{
	uint8_t p[2] = {(uint8_t)v, (uint8_t)(v >> 8)};
	cm_buf_put(b, p, 2);
}

void cm_buf_u32(cm_buf *b, uint32_t v)
{
	uint8_t p[4];
	cm_le32_put(p, v);
	cm_buf_put(b, p, 4);
}

void cm_buf_f64(cm_buf *b, double v)
{
	uint64_t u;
	uint8_t p[8];
	memcpy(&u, &v, 8);
	for (int i = 0; i < 8; i++)
		p[i] = (uint8_t)(u >> (8 * i));
	cm_buf_put(b, p, 8);
}

void cm_buf_varint(cm_buf *b, uint64_t v)
{
	uint8_t p[10];
	cm_buf_put(b, p, cm_varint_put(p, v));
}

void cm_buf_string(cm_buf *b, const char *s, size_t n)
{
	cm_buf_varint(b, n);
	cm_buf_put(b, s, n);
}

void cm_buf_free(cm_buf *b)
{
	if (!b)
		return;
	free(b->data);
	b->data = NULL;
	b->len = b->cap = 0;
	b->failed = 0;
}

/* Table-driven CRC-32C, slicing by 8; the table is built at compile time by the
 * initialiser below being computed once at first use (no locks: idempotent). */
static uint32_t crc_table[8][256];
static volatile int crc_ready;

static void crc_init(void)
{
	for (uint32_t i = 0; i < 256; i++) {
		uint32_t c = i;
		for (int k = 0; k < 8; k++)
			c = (c >> 1) ^ (0x82F63B78u & (0u - (c & 1)));
		crc_table[0][i] = c;
	}
	for (uint32_t i = 0; i < 256; i++)
		for (int t = 1; t < 8; t++)
			crc_table[t][i] = (crc_table[t - 1][i] >> 8) ^ crc_table[0][crc_table[t - 1][i] & 0xff];
	__atomic_store_n(&crc_ready, 1, __ATOMIC_RELEASE);
}

uint32_t cm_crc32c(uint32_t crc, const void *buf, size_t n)
{
	const uint8_t *p = buf;
	if (!__atomic_load_n(&crc_ready, __ATOMIC_ACQUIRE))
		crc_init();
	crc = ~crc;
	while (n >= 8) {
		uint32_t lo = crc ^ cm_le32(p), hi = cm_le32(p + 4);
		crc = crc_table[7][lo & 0xff] ^ crc_table[6][(lo >> 8) & 0xff] ^
		      crc_table[5][(lo >> 16) & 0xff] ^ crc_table[4][lo >> 24] ^
		      crc_table[3][hi & 0xff] ^ crc_table[2][(hi >> 8) & 0xff] ^
		      crc_table[1][(hi >> 16) & 0xff] ^ crc_table[0][hi >> 24];
		p += 8;
		n -= 8;
	}
	while (n--)
		crc = (crc >> 8) ^ crc_table[0][(crc ^ *p++) & 0xff];
	return ~crc;
}

uint64_t cm_mono_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

uint64_t cm_real_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_REALTIME, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

int cm_tsc_invariant(void)
{
#if CM_TSC
	unsigned a, b, c, d;
	if (!__get_cpuid(0x80000000, &a, &b, &c, &d) || a < 0x80000007)
		return 0;
	__get_cpuid(0x80000007, &a, &b, &c, &d);
	return (d >> 8) & 1;
#else
	return 0;
#endif
}

/* The ticks are the midpoint of two reads around the clock read, and of three tries the
 * narrowest bracket wins (a read that faults or is preempted would skew the pair by half
 * its delay). */
void cm_tsc_point(uint64_t *mono, uint64_t *ticks)
{
#if !CM_TSC
	*mono = *ticks = cm_mono_ns();
#else
	uint64_t best = UINT64_MAX;
	for (int i = 0; i < 3; i++) {
		uint64_t t0 = __rdtsc();
		uint64_t m = cm_mono_ns();
		uint64_t t1 = __rdtsc();
		if (t1 - t0 < best) {
			best = t1 - t0;
			*mono = m;
			*ticks = t0 + (t1 - t0) / 2;
		}
	}
#endif
}

double cm_tsc_per_ns(uint64_t span_ns)
{
#if CM_TSC
	uint64_t m0, t0, m1, t1;
	cm_tsc_point(&m0, &t0); /* warms up the clocks: the first reads in a process fault */
	cm_tsc_point(&m0, &t0);
	do
		cm_tsc_point(&m1, &t1);
	while (m1 - m0 < span_ns);
	return (double)(t1 - t0) / (double)(m1 - m0);
#else
	(void)span_ns;
	return 1.0;
#endif
}

int cm_boot_id(char out[40])
{
	int fd = open("/proc/sys/kernel/random/boot_id", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, out, 39);
	close(fd);
	if (n < 32)
		return -1;
	while (n > 0 && (out[n - 1] == '\n' || out[n - 1] == ' '))
		n--;
	out[n] = 0;
	return 0;
}

int cm_parse_schedule(const char *s, unsigned out[4])
{
	for (int k = 0; k < 4; k++) {
		char *end;
		if (!s || !isdigit((unsigned char)*s))
			return -1;
		errno = 0;
		unsigned long v = strtoul(s, &end, 10);
		if (errno || v > UINT_MAX || *end != (k < 3 ? ',' : 0))
			return -1;
		out[k] = (unsigned)v;
		s = end + 1;
	}
	return 0;
}

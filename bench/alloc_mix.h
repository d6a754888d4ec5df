/*
 * bench/alloc_mix.h - the "mixed" allocation workload's parts, shared by work_alloc.c
 * (run whole under each profiler by memory.sh) and alloc_overhead.c (rounds in one
 * process): the generator, the size mix and the touch of each new block.
 */
#ifndef FENNEC_BENCH_ALLOC_MIX_H
#define FENNEC_BENCH_ALLOC_MIX_H
#include <stddef.h>
#include <stdint.h>

#define SLOTS 16384 /* the live set: one block per slot, ~21 MB at its peak */

static inline uint64_t next(uint64_t *s)
{
	uint64_t x = *s;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	return *s = x;
}

/* 90 % small (16-256 B), 9.9 % medium (1-16 KiB), 0.1 % large (64-256 KiB). */
static inline size_t pick_size(uint64_t *rng)
{
	uint64_t r = next(rng);
	unsigned k = (unsigned)(r % 1000);
	r >>= 10;
	if (k < 900)
		return 16 + r % 241;
	if (k < 999)
		return 1024 + r % (15 * 1024 + 1);
	return (64 << 10) + r % (192 * 1024 + 1);
}

static volatile uint8_t sink;

/* Write the first and last byte, read the middle one: a program uses what it allocates. */
static inline void touch(uint8_t *p, size_t n)
{
	p[0] = (uint8_t)n;
	p[n - 1] = (uint8_t)(n >> 3);
	sink = p[n / 2];
}

#endif

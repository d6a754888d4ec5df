/*
 * bench/work_calls.c - a call-heavy workload for the sampling benchmark (bench/sampling.sh):
 * deep recursion and many small functions, so that stacks are deep and unwinding costs what
 * it costs in real code. Uses no fennec API (the Makefile links every bench program with
 * libfennec; it is loaded but never started unless a profiler starts it).
 *
 * Usage: work_calls [SCALE]   (default 10: about 2 s on the development VM)
 * Each round: fib(24) through an out-of-line recursion (depth 24, ~75k calls); a recursion
 * 200 frames deep doing a little work at every level (deeper than a 128-frame limit); and
 * a chain of 12 small functions called 20000 times. Prints one line:
 *   work_calls: elapsed_ns=N cpu_ns=N rounds=N checksum=N
 * elapsed_ns is CLOCK_MONOTONIC and cpu_ns CLOCK_PROCESS_CPUTIME_ID (all threads: a
 * profiler's own threads and signal handlers count) around the work only, without the
 * profiler's start-up and exit costs.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define NOIPA __attribute__((noipa))

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

NOIPA uint64_t fib(unsigned n)
{
	return n < 2 ? n : fib(n - 1) + fib(n - 2);
}

NOIPA uint64_t deep(unsigned depth, uint64_t x)
{
	for (int i = 0; i < 64; i++)
		x = x * 6364136223846793005ull + 1442695040888963407ull;
	return depth == 0 ? x : deep(depth - 1, x) ^ depth;
}

#define SMALL(name, next, k)                                       \
	NOIPA uint64_t name(uint64_t x)                            \
	{                                                          \
		x = x * (k) + (x >> 17);                           \
		return next(x) + 1;                                \
	}

NOIPA uint64_t small_leaf(uint64_t x)
{
	return x ^ (x >> 29);
}
SMALL(small_11, small_leaf, 0x9E3779B97F4A7C15ull)
SMALL(small_10, small_11, 0xBF58476D1CE4E5B9ull)
SMALL(small_9, small_10, 0x94D049BB133111EBull)
SMALL(small_8, small_9, 0x2545F4914F6CDD1Dull)
SMALL(small_7, small_8, 0x9E3779B97F4A7C15ull)
SMALL(small_6, small_7, 0xBF58476D1CE4E5B9ull)
SMALL(small_5, small_6, 0x94D049BB133111EBull)
SMALL(small_4, small_5, 0x2545F4914F6CDD1Dull)
SMALL(small_3, small_4, 0x9E3779B97F4A7C15ull)
SMALL(small_2, small_3, 0xBF58476D1CE4E5B9ull)
SMALL(small_1, small_2, 0x94D049BB133111EBull)
SMALL(small_0, small_1, 0x2545F4914F6CDD1Dull)

NOIPA uint64_t round_of_calls(uint64_t x)
{
	x += fib(24);
	for (int i = 0; i < 40; i++)
		x = deep(200, x);
	for (int i = 0; i < 20000; i++)
		x = small_0(x);
	return x;
}

int main(int argc, char **argv)
{
	unsigned scale = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 10;
	unsigned rounds = scale * 140;
	uint64_t x = 1, t0 = clock_ns(CLOCK_MONOTONIC), c0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
	for (unsigned r = 0; r < rounds; r++)
		x = round_of_calls(x);
	uint64_t dt = clock_ns(CLOCK_MONOTONIC) - t0, dc = clock_ns(CLOCK_PROCESS_CPUTIME_ID) - c0;
	printf("work_calls: elapsed_ns=%llu cpu_ns=%llu rounds=%u checksum=%llu\n",
	       (unsigned long long)dt, (unsigned long long)dc,
	       rounds, (unsigned long long)x);
	return 0;
}

/*
 * work_alloc.c - allocation-heavy workloads for bench/memory.sh: the cost of heap profilers.
 * Deterministic (a fixed xorshift seed): the same calls every run, so the counts a
 * profiler reports can be checked against the ones printed here.
 *
 *   work_alloc mixed   [SCALE]  malloc/free of varied sizes (mostly 16-256 B, some 1-16 KiB,
 *                               a few 64-256 KiB) against a live set of 16384 slots
 *   work_alloc realloc [SCALE]  realloc chains: a block grown 64 times by 16-512 B (each new
 *                               part filled), then freed
 *   work_alloc threads [SCALE]  2 threads each allocating blocks that the other one frees
 *                               (through a bounded queue per direction): cross-thread frees
 *
 * SCALE (default 10) multiplies the work: 1.5M, 1.28M and 0.6M allocations, 100-200 ms
 * each natively at 10 on the development VM (kept short: some profilers are 10-500x slower). Everything allocated is freed before the end. Prints one line:
 *   elapsed_ns=.. cpu_ns=.. allocs=.. frees=.. bytes=.. peak_bytes=.. maxrss_kb=..
 * allocs and frees count calls of the malloc family as fennec does (a realloc of a block is
 * one free and one allocation, realloc(NULL) one allocation); bytes are requested bytes;
 * peak_bytes is the highest requested live total (exact with one thread; with two, taken
 * from an atomic total and so within one block of the true peak); maxrss_kb is the
 * process's peak RSS (getrusage), so that what a profiler adds inside the process shows.
 */
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <time.h>

#include "alloc_mix.h"

#define CHAIN 64
#define QCAP 65536

static uint64_t now_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

/* Counts of the workload's own calls; single-threaded workloads use them directly. */
typedef struct counts {
	uint64_t allocs, frees, bytes;
	int64_t live;
	int64_t peak;
} counts;

static _Atomic int64_t live_all, peak_all; /* threads: requested live bytes, all threads */

static void on_alloc(counts *c, size_t n)
{
	c->allocs++;
	c->bytes += n;
	c->live += (int64_t)n;
	if (c->live > c->peak)
		c->peak = c->live;
}

static void on_free(counts *c, size_t n)
{
	c->frees++;
	c->live -= (int64_t)n;
}


static void mixed(counts *c, uint64_t iters)
{
	static uint8_t *slot[SLOTS];
	static size_t size[SLOTS];
	uint64_t rng = 0x9E3779B97F4A7C15ull;
	for (uint64_t i = 0; i < iters; i++) {
		unsigned k = (unsigned)(next(&rng) % SLOTS);
		if (slot[k]) {
			free(slot[k]);
			on_free(c, size[k]);
		}
		size_t n = pick_size(&rng);
		if (!(slot[k] = malloc(n)))
			abort();
		size[k] = n;
		on_alloc(c, n);
		touch(slot[k], n);
	}
	for (unsigned k = 0; k < SLOTS; k++)
		if (slot[k]) {
			free(slot[k]);
			on_free(c, size[k]);
			slot[k] = NULL;
		}
}

static void chains(counts *c, uint64_t nchains)
{
	uint64_t rng = 0xD1B54A32D192ED03ull;
	for (uint64_t i = 0; i < nchains; i++) {
		uint8_t *p = NULL;
		size_t n = 0;
		for (int k = 0; k < CHAIN; k++) {
			size_t m = n + 16 + next(&rng) % 497;
			uint8_t *q = realloc(p, m);
			if (!q)
				abort();
			if (p)
				on_free(c, n);
			on_alloc(c, m);
			memset(q + n, k, m - n); /* a growing buffer is filled as it grows */
			p = q;
			n = m;
			touch(p, n);
		}
		free(p);
		on_free(c, n);
	}
}

/* A bounded single-producer single-consumer queue of blocks. */
typedef struct queue {
	void *_Atomic item[QCAP];
	size_t _Atomic sz[QCAP];
	_Atomic uint64_t head, tail;
} queue;

static queue q[2]; /* q[t]: blocks thread t allocated, freed by thread 1 - t */

typedef struct worker {
	int id;
	uint64_t blocks;
	counts c;
} worker;

static void track(int64_t delta)
{
	int64_t v = atomic_fetch_add(&live_all, delta) + delta, p = atomic_load(&peak_all);
	while (v > p && !atomic_compare_exchange_weak(&peak_all, &p, v))
		;
}

/* Free what the other thread queued; returns how many. */
static uint64_t drain(worker *w, queue *in)
{
	uint64_t n = 0, h = atomic_load_explicit(&in->head, memory_order_acquire);
	uint64_t t = atomic_load_explicit(&in->tail, memory_order_relaxed);
	for (; t < h; t++, n++) {
		size_t s = atomic_load_explicit(&in->sz[t % QCAP], memory_order_relaxed);
		free(atomic_load_explicit(&in->item[t % QCAP], memory_order_relaxed));
		w->c.frees++;
		track(-(int64_t)s);
	}
	atomic_store_explicit(&in->tail, t, memory_order_release);
	return n;
}

static void *thread_main(void *arg)
{
	worker *w = arg;
	queue *out = &q[w->id], *in = &q[1 - w->id];
	uint64_t rng = 0x2545F4914F6CDD1Dull * (uint64_t)(w->id + 1), freed = 0;
	for (uint64_t i = 0; i < w->blocks; i++) {
		size_t n = pick_size(&rng);
		uint8_t *p = malloc(n);
		if (!p)
			abort();
		touch(p, n);
		w->c.allocs++;
		w->c.bytes += n;
		track((int64_t)n);
		uint64_t h = atomic_load_explicit(&out->head, memory_order_relaxed);
		while (h - atomic_load_explicit(&out->tail, memory_order_acquire) >= QCAP)
			freed += drain(w, in); /* full: the other thread is behind; keep it moving */
		atomic_store_explicit(&out->item[h % QCAP], p, memory_order_relaxed);
		atomic_store_explicit(&out->sz[h % QCAP], n, memory_order_relaxed);
		atomic_store_explicit(&out->head, h + 1, memory_order_release);
		if (i % 64 == 63)
			freed += drain(w, in);
	}
	/* Free everything the other thread allocates (as many blocks), then stop. */
	while (freed < w->blocks)
		freed += drain(w, in);
	return NULL;
}

static void threads(counts *c, uint64_t blocks)
{
	worker w[2] = {{0, blocks, {0}}, {1, blocks, {0}}};
	pthread_t t;
	if (pthread_create(&t, NULL, thread_main, &w[1]))
		abort();
	thread_main(&w[0]);
	pthread_join(t, NULL);
	for (int i = 0; i < 2; i++) {
		c->allocs += w[i].c.allocs;
		c->frees += w[i].c.frees;
		c->bytes += w[i].c.bytes;
	}
	c->peak = atomic_load(&peak_all);
}

int main(int argc, char **argv)
{
	const char *mode = argc > 1 ? argv[1] : "mixed";
	uint64_t scale = argc > 2 ? strtoull(argv[2], NULL, 10) : 10;
	counts c = {0};
	uint64_t t0 = now_ns(CLOCK_MONOTONIC), c0 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
	if (!strcmp(mode, "mixed"))
		mixed(&c, scale * 150000);
	else if (!strcmp(mode, "realloc"))
		chains(&c, scale * 2000);
	else if (!strcmp(mode, "threads"))
		threads(&c, scale * 30000);
	else {
		fprintf(stderr, "usage: work_alloc mixed|realloc|threads [SCALE]\n");
		return 2;
	}
	uint64_t t1 = now_ns(CLOCK_MONOTONIC), c1 = now_ns(CLOCK_PROCESS_CPUTIME_ID);
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	printf("elapsed_ns=%llu cpu_ns=%llu allocs=%llu frees=%llu bytes=%llu peak_bytes=%lld maxrss_kb=%ld\n",
	       (unsigned long long)(t1 - t0), (unsigned long long)(c1 - c0), (unsigned long long)c.allocs,
	       (unsigned long long)c.frees, (unsigned long long)c.bytes, (long long)c.peak, ru.ru_maxrss);
	return 0;
}

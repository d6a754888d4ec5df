/*
 * bench/alloc_overhead.c - what fennec's allocator interposer adds to a malloc-heavy loop,
 * measured inside one process, where rounds of the profiled loop alternate with rounds of
 * the same loop calling glibc directly. memory.sh runs whole programs under each profiler
 * and compares them with the peers; on a noisy machine its ratios spread by tens of
 * percent from one run to the next (the unprofiled program alone does). Here a round takes
 * ~15 ms and its ratio is to the glibc round just before it, so slow drifts of the machine
 * cancel out. What it cannot show is what a session's writer thread costs glibc itself:
 * once a process has a second thread, glibc's allocator takes its arena locks, in the
 * glibc rounds too (bench/README.md, "sampled mode against 1.15x"). memory.sh shows it.
 *
 * The loop is memory.sh's "mixed" workload (alloc_mix.h): a live set of 16384 slots, each
 * iteration frees a random slot's block and allocates a new one of a random size (90 %
 * 16-256 B, 9.9 % 1-16 KiB, 0.1 % 64-256 KiB), touching it. One round is -n iterations
 * (default 150,000), then every block is freed.
 *
 * Variants:
 *   glibc           __libc_malloc / __libc_free: glibc's allocator without the interposer
 *   counters only   malloc / free through libfennec before any session: the exact totals
 *                   of fennec_memory_stats() (what `fennec record --memory=off` leaves)
 *   sampled         a session with memory_mode = sampled (mean 512 KiB between samples)
 *   full            a session with memory_mode = full (every allocation and free)
 * Each variant runs -r rounds (default 40; full: a quarter of them), each right after a
 * glibc round. Columns: the CPU time of the measuring thread per iteration (ns), median
 * [min, max] over rounds; the ratio to the glibc round before it, median [min, max], and
 * the median's 95 % interval (median_ci()); the fastest round of the variant over the
 * fastest glibc round of its group. The writer thread's CPU time during a session is
 * printed under the table, per iteration.
 *
 * -l N uses N of the slots (a smaller live set) and -k small draws every size from 16-256 B:
 * `-l 4096 -k small` is the loop of issue 34 (small blocks only, which glibc takes from its
 * tcache and small bins: 215 instructions an iteration under callgrind, against 295 for the
 * mixed loop), where the interposer's fixed cost is the largest share.
 *
 * Usage: alloc_overhead [-n iterations] [-r rounds] [-v counters,sampled,full] [-o results_dir]
 *                       [-l live_set] [-k mixed|small]
 * Writes <results_dir>/alloc_overhead.tsv (default: build/bench-results next to the binary).
 */
#include <errno.h>
#include <fennec.h>
#include <limits.h>
#include <math.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "alloc_mix.h"

extern void *__libc_malloc(size_t);
extern void __libc_free(void *);

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static uint8_t *slot[SLOTS];
static unsigned live_set = SLOTS; /* -l: the slots the loop uses */
static int small_only;            /* -k small: every size 16-256 B */

static inline size_t loop_size(uint64_t *rng)
{
	if (small_only)
		return 16 + next(rng) % 241;
	return pick_size(rng);
}

/* One round of the mixed loop through ALLOC/FREE; returns the thread's CPU ns. */
#define MIX_ROUND(NAME, ALLOC, FREE)                                                      \
	static uint64_t __attribute__((noinline)) NAME(uint64_t iters, uint64_t seed)     \
	{                                                                                 \
		uint64_t rng = seed, t0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);              \
		for (uint64_t i = 0; i < iters; i++) {                                    \
			unsigned k = (unsigned)(next(&rng) % live_set);                  \
			if (slot[k])                                                      \
				FREE(slot[k]);                                            \
			size_t n = loop_size(&rng);                                       \
			if (!(slot[k] = ALLOC(n)))                                        \
				abort();                                                  \
			touch(slot[k], n);                                                \
		}                                                                         \
		for (unsigned k = 0; k < SLOTS; k++)                                      \
			if (slot[k]) {                                                    \
				FREE(slot[k]);                                            \
				slot[k] = NULL;                                           \
			}                                                                 \
		return clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0;                            \
	}

MIX_ROUND(round_glibc, __libc_malloc, __libc_free)
MIX_ROUND(round_fennec, malloc, free)

enum { V_COUNTERS, V_SAMPLED, V_FULL, NV };
static const char *const vname[NV] = {"counters only (no session)", "memory=sampled", "memory=full"};

static int cmp_d(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_d);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

/* A 95 % confidence interval of the median of v (sorted, n values) that assumes nothing of
 * their distribution: the order statistics of ranks n/2 -+ 1.96 sqrt(n)/2 (the normal
 * approximation of the binomial count of values below the median). */
static void median_ci(const double *v, int n, double *lo, double *hi)
{
	double half = 0.98 * sqrt((double)n);
	int j = (int)floor(n / 2.0 - half), k = (int)ceil(1 + n / 2.0 + half);
	j = j < 1 ? 1 : j;
	k = k > n ? n : k;
	*lo = v[j - 1];
	*hi = v[k - 1];
}

int main(int argc, char **argv)
{
	uint64_t iters = 150000;
	int rounds = 40, c, run[NV] = {1, 1, 1};
	char results[PATH_MAX - 32] = "";
	while ((c = getopt(argc, argv, "n:r:v:o:l:k:")) != -1) {
		switch (c) {
		case 'n': iters = strtoull(optarg, NULL, 0); break;
		case 'r': rounds = atoi(optarg); break;
		case 'v':
			memset(run, 0, sizeof run);
			run[V_COUNTERS] = strstr(optarg, "counters") != NULL;
			run[V_SAMPLED] = strstr(optarg, "sampled") != NULL;
			run[V_FULL] = strstr(optarg, "full") != NULL;
			break;
		case 'o': snprintf(results, sizeof results, "%s", optarg); break;
		case 'l': live_set = (unsigned)strtoul(optarg, NULL, 0); break;
		case 'k': small_only = !strcmp(optarg, "small"); break;
		default:
			fprintf(stderr, "usage: %s [-n iterations] [-r rounds] [-v counters,sampled,full] [-o results_dir] [-l live_set] [-k mixed|small]\n", argv[0]);
			return 2;
		}
	}
	if (iters == 0 || rounds < 4 || live_set < 1 || live_set > SLOTS) {
		fprintf(stderr, "alloc_overhead: -n must be > 0, -r at least 4, -l 1 to %d\n", SLOTS);
		return 2;
	}
	if (!results[0]) {
		char self[PATH_MAX - 64];
		ssize_t len = readlink("/proc/self/exe", self, sizeof self - 1);
		if (len <= 0) {
			fprintf(stderr, "alloc_overhead: cannot read /proc/self/exe: %s\n", strerror(errno));
			return 1;
		}
		self[len] = 0;
		char *s = strrchr(self, '/');
		*s = 0;
		snprintf(results, sizeof results, "%s/../bench-results", self);
	}
	mkdir(results, 0755);
	char tsv_path[PATH_MAX + 32], out_path[] = "/tmp/fennec-alloc-overhead-XXXXXX";
	snprintf(tsv_path, sizeof tsv_path, "%s/alloc_overhead.tsv", results);
	FILE *tsv = fopen(tsv_path, "w");
	if (!tsv) {
		fprintf(stderr, "alloc_overhead: cannot write %s: %s\n", tsv_path, strerror(errno));
		return 1;
	}
	int fd = mkstemp(out_path);
	if (fd < 0) {
		fprintf(stderr, "alloc_overhead: cannot create %s: %s\n", out_path, strerror(errno));
		return 1;
	}
	close(fd);
	fprintf(tsv, "variant\tround\tglibc_ns\tvariant_ns\titerations\n");

	double *ns = calloc((size_t)rounds, sizeof *ns), *base = calloc((size_t)rounds, sizeof *base);
	double *ratio = calloc((size_t)rounds, sizeof *ratio);
	if (!ns || !base || !ratio)
		return 1;
	double writer_ns[NV] = {0};
	round_glibc(iters, 1); /* warm-up: the heap grows to the live set's size once */
	round_fennec(iters, 1);
	printf("alloc_overhead: %llu iterations per round (memory.sh's mixed loop; live set %u, sizes %s), CPU time of the measuring thread\n\n",
	       (unsigned long long)iters, live_set, small_only ? "16-256 B" : "mixed");
	printf("| variant | rounds | glibc ns/iter | variant ns/iter | ratio to the glibc round before it | the median ratio's 95 %% interval | fastest / fastest glibc |\n");
	printf("|---|---|---|---|---|---|---|\n");
	for (int v = 0; v < NV; v++) {
		if (!run[v])
			continue;
		int n = v == V_FULL ? rounds / 4 : rounds;
		uint64_t writer0 = 0, proc0 = 0, self0 = 0;
		if (v != V_COUNTERS) {
			fennec_config cfg;
			fennec_config_init(&cfg);
			cfg.output = out_path;
			cfg.sample_mode = 0;
			cfg.memory_mode = v == V_SAMPLED ? FENNEC_MEMORY_SAMPLED : FENNEC_MEMORY_FULL;
			int rc = fennec_start(&cfg);
			if (rc) {
				fprintf(stderr, "alloc_overhead: fennec_start: %s\n", fennec_strerror(rc));
				return 1;
			}
			proc0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
			self0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
		}
		for (int r = 0; r < n; r++) {
			uint64_t seed = 0x9E3779B97F4A7C15ull + (uint64_t)r;
			base[r] = (double)round_glibc(iters, seed) / (double)iters;
			ns[r] = (double)round_fennec(iters, seed) / (double)iters;
			ratio[r] = ns[r] / base[r];
			fprintf(tsv, "%s\t%d\t%.3f\t%.3f\t%llu\n", vname[v], r, base[r], ns[r], (unsigned long long)iters);
		}
		if (v != V_COUNTERS) {
			/* everything the process ran beside this thread: the writer */
			writer0 = (clock_ns(CLOCK_PROCESS_CPUTIME_ID) - proc0) - (clock_ns(CLOCK_THREAD_CPUTIME_ID) - self0);
			fennec_stop();
		}
		double bmin = base[0], vmin = ns[0], rmin = ratio[0], rmax = ratio[0], nmax = ns[0], bmax = base[0];
		for (int r = 1; r < n; r++) {
			bmin = base[r] < bmin ? base[r] : bmin;
			bmax = base[r] > bmax ? base[r] : bmax;
			vmin = ns[r] < vmin ? ns[r] : vmin;
			nmax = ns[r] > nmax ? ns[r] : nmax;
			rmin = ratio[r] < rmin ? ratio[r] : rmin;
			rmax = ratio[r] > rmax ? ratio[r] : rmax;
		}
		double bmed = median(base, n), vmed = median(ns, n), rmed = median(ratio, n), clo, chi;
		median_ci(ratio, n, &clo, &chi);
		printf("| %s | %d | %.1f [%.1f, %.1f] | %.1f [%.1f, %.1f] | **%.3f** [%.3f, %.3f] | %.3f-%.3f | %.3f |\n", vname[v], n,
		       bmed, bmin, bmax, vmed, vmin, nmax, rmed, rmin, rmax, clo, chi, vmin / bmin);
		writer_ns[v] = (double)writer0 / (double)((uint64_t)n * iters);
		fflush(stdout);
	}
	for (int v = V_SAMPLED; v < NV; v++)
		if (run[v])
			printf("%s%s: the writer thread used %.2f ns of CPU per iteration of the fennec rounds\n", v == V_SAMPLED || !run[V_SAMPLED] ? "\n" : "",
			       vname[v], writer_ns[v]);
	fclose(tsv);
	unlink(out_path);
	printf("wrote %s\n", tsv_path);
	return 0;
}

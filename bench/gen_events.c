/*
 * bench/gen_events.c - emits fennec region pairs of a chosen shape, for the file-size and
 * analysis-throughput benchmarks (bench/file_size.sh, bench/analyze_throughput.sh).
 *
 * Usage: gen_events [-s tight|work|nested] [-n pairs] [-w work_ns] [-o out.fnc] [-b buffer_kb]
 *   tight   one name, begin/end back to back, no work between
 *   work    one name, about work_ns of computation inside each pair (default 1000)
 *   nested  a training-loop shape: 10 names, depth up to 4, 25 pairs per iteration; the 14
 *           leaf regions do a random 0..2*work_ns of computation each (default 500)
 * Under `fennec record` the collector is already running; otherwise this program starts it
 * itself (output -o, default gen_events.fnc; buffer -b KiB, default from the environment).
 * Prints one line: shape, pairs emitted, elapsed seconds, ns per pair.
 */
#include <fennec.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static volatile uint64_t g_sink;
static double g_ns_per_iter = 1.0;
static uint64_t g_rng = 0x9e3779b97f4a7c15ull;

/* Dependent integer work the compiler cannot remove: `iters` xorshift steps. */
static void __attribute__((noinline)) burn(uint64_t iters)
{
	uint64_t x = g_sink | 1;
	for (uint64_t i = 0; i < iters; i++) {
		x ^= x << 13;
		x ^= x >> 7;
		x ^= x << 17;
	}
	g_sink = x;
}

static void calibrate(void)
{
	uint64_t iters = 1000000, t0 = now_ns();
	burn(iters);
	uint64_t best = now_ns() - t0;
	for (int i = 0; i < 4; i++) {
		t0 = now_ns();
		burn(iters);
		uint64_t dt = now_ns() - t0;
		if (dt < best)
			best = dt;
	}
	g_ns_per_iter = (double)best / (double)iters;
	if (g_ns_per_iter <= 0)
		g_ns_per_iter = 1.0;
}

static inline uint64_t rnd(void)
{
	g_rng = g_rng * 6364136223846793005ull + 1442695040888963407ull;
	return g_rng >> 33;
}

/* About ns nanoseconds of work; nothing at all for 0. */
static inline void work_ns(double ns)
{
	if (ns > 0)
		burn((uint64_t)(ns / g_ns_per_iter));
}

/* A leaf: random 0..2*w ns, so the mean is w and the time deltas vary. */
static inline void leaf(double w)
{
	if (w > 0)
		work_ns(w * (double)(rnd() % 2001) / 1000.0);
}

/* One iteration of the nested shape: 25 pairs. */
static void nested_iteration(double w)
{
	FENNEC_REGION_BEGIN("step");
	{
		FENNEC_REGION_BEGIN("data_load");
		leaf(w);
		FENNEC_REGION_END();

		FENNEC_REGION_BEGIN("forward");
		for (int l = 0; l < 4; l++) {
			FENNEC_REGION_BEGIN("layer");
			FENNEC_REGION_BEGIN("matmul");
			leaf(w);
			FENNEC_REGION_END();
			FENNEC_REGION_BEGIN("activation");
			leaf(w);
			FENNEC_REGION_END();
			FENNEC_REGION_END();
		}
		FENNEC_REGION_END();

		FENNEC_REGION_BEGIN("backward");
		for (int l = 0; l < 4; l++) {
			FENNEC_REGION_BEGIN("layer_grad");
			FENNEC_REGION_BEGIN("matmul_grad");
			leaf(w);
			FENNEC_REGION_END();
			FENNEC_REGION_END();
		}
		FENNEC_REGION_END();

		FENNEC_REGION_BEGIN("optimizer");
		leaf(w);
		FENNEC_REGION_END();
	}
	FENNEC_REGION_END();
}
#define NESTED_PAIRS 25

int main(int argc, char **argv)
{
	const char *shape = "nested";
	const char *out = "gen_events.fnc";
	uint64_t pairs = 1000000;
	double w = -1;
	long buffer_kb = -1;
	int c;
	while ((c = getopt(argc, argv, "s:n:w:o:b:")) != -1) {
		switch (c) {
		case 's': shape = optarg; break;
		case 'n': pairs = strtoull(optarg, NULL, 0); break;
		case 'w': w = atof(optarg); break;
		case 'o': out = optarg; break;
		case 'b': buffer_kb = atol(optarg); break;
		default:
			fprintf(stderr, "usage: %s [-s tight|work|nested] [-n pairs] [-w work_ns] "
					"[-o out.fnc] [-b buffer_kb]\n",
				argv[0]);
			return 2;
		}
	}
	if (w < 0)
		w = strcmp(shape, "nested") == 0 ? 500 : strcmp(shape, "work") == 0 ? 1000 : 0;
	calibrate();

	int started_here = 0;
	if (!fennec_is_running()) {
		fennec_config cfg;
		fennec_config_init(&cfg);
		cfg.output = out;
		if (buffer_kb > 0)
			cfg.buffer_kb = (uint32_t)buffer_kb;
		int rc = fennec_start(&cfg);
		if (rc != 0) {
			fprintf(stderr, "gen_events: fennec_start: %s\n", fennec_strerror(rc));
			return 1;
		}
		started_here = 1;
	}

	uint64_t emitted = 0, t0 = now_ns();
	if (strcmp(shape, "tight") == 0) {
		for (; emitted < pairs; emitted++) {
			fennec_region_begin("tight");
			fennec_region_end();
		}
	} else if (strcmp(shape, "work") == 0) {
		for (; emitted < pairs; emitted++) {
			fennec_region_begin("work");
			work_ns(w);
			fennec_region_end();
		}
	} else if (strcmp(shape, "nested") == 0) {
		for (; emitted < pairs; emitted += NESTED_PAIRS)
			nested_iteration(w);
	} else {
		fprintf(stderr, "gen_events: unknown shape '%s'\n", shape);
		return 2;
	}
	uint64_t dt = now_ns() - t0;
	if (started_here)
		fennec_stop();
	printf("gen_events: shape=%s pairs=%llu work_ns=%.0f elapsed_s=%.3f ns_per_pair=%.1f\n", shape,
	       (unsigned long long)emitted, w, (double)dt / 1e9, (double)dt / (double)emitted);
	return 0;
}

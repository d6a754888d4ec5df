/*
 * bench/work_compute.c - a compute kernel for the sampling benchmark (bench/sampling.sh):
 * dense double-precision matrix multiply, shallow stacks, most time in one loop nest.
 * Uses no fennec API (linked with libfennec like every bench program, never started).
 *
 * Usage: work_compute [SCALE]   (default 10: about 2 s on the development VM)
 * Multiplies two 256x256 matrices (i-k-j order, the inner loop vectorisable) 50*SCALE
 * times, feeding the result back. Prints one line:
 *   work_compute: elapsed_ns=N cpu_ns=N multiplies=N checksum=F
 * elapsed_ns is CLOCK_MONOTONIC and cpu_ns CLOCK_PROCESS_CPUTIME_ID (all threads) around
 * the work only, without the profiler's start-up and exit costs.
 */
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#define N 256

static double a[N][N], b[N][N], c[N][N];

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

__attribute__((noipa)) void matmul(void)
{
	for (int i = 0; i < N; i++) {
		for (int j = 0; j < N; j++)
			c[i][j] = 0;
		for (int k = 0; k < N; k++) {
			double aik = a[i][k];
			for (int j = 0; j < N; j++)
				c[i][j] += aik * b[k][j];
		}
	}
}

/* a = c normalised, so that values stay bounded from one multiply to the next */
__attribute__((noipa)) void feed_back(void)
{
	double m = 0;
	for (int i = 0; i < N; i++)
		for (int j = 0; j < N; j++)
			m = c[i][j] > m ? c[i][j] : m;
	for (int i = 0; i < N; i++)
		for (int j = 0; j < N; j++)
			a[i][j] = m > 0 ? c[i][j] / m : 0;
}

int main(int argc, char **argv)
{
	unsigned scale = argc > 1 ? (unsigned)strtoul(argv[1], NULL, 10) : 10;
	unsigned reps = scale * 50;
	for (int i = 0; i < N; i++)
		for (int j = 0; j < N; j++) {
			a[i][j] = (double)((i * 7 + j * 3) % 17) / 17.0;
			b[i][j] = (double)((i * 5 + j * 11) % 13) / 13.0 - 0.4;
		}
	uint64_t t0 = clock_ns(CLOCK_MONOTONIC), c0 = clock_ns(CLOCK_PROCESS_CPUTIME_ID);
	for (unsigned r = 0; r < reps; r++) {
		matmul();
		feed_back();
	}
	uint64_t dt = clock_ns(CLOCK_MONOTONIC) - t0, dc = clock_ns(CLOCK_PROCESS_CPUTIME_ID) - c0;
	double sum = 0;
	for (int i = 0; i < N; i++)
		sum += c[i][i];
	printf("work_compute: elapsed_ns=%llu cpu_ns=%llu multiplies=%u checksum=%.6g\n",
	       (unsigned long long)dt, (unsigned long long)dc, reps, sum);
	return 0;
}

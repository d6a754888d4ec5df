/*
 * calibrate.c - `fennec calibrate`: measure this machine's roofline ceilings (docs/roofline.md)
 * and store them for `fennec analyze`: peak memory bandwidth (STREAM-style read, copy and
 * triad kernels over arrays far larger than the last-level cache, one thread and all
 * threads) and peak floating-point rate (independent FMA chains in the widest vector
 * instructions the CPU has, fp64 and fp32). Each number is the best of several repetitions:
 * a ceiling is what the machine can do, and anything else running only lowers a run.
 */
#include <errno.h>
#include <pthread.h>
#include <sched.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>
#if defined(__x86_64__) || defined(__i386__)
#include <immintrin.h>
#endif

#include "analyze/calib.h"
#include "cli/cli.h"

static const char help[] =
	"usage: fennec calibrate [options]\n"
	"\n"
	"Measures this machine's peak memory bandwidth and FLOP/s (a few seconds) and stores them\n"
	"for the roofline of `fennec analyze` (docs/roofline.md).\n"
	"\n"
	"  -o, --output FILE   store there (default $FENNEC_CALIBRATION, else\n"
	"                      $XDG_CONFIG_HOME/fennec/calibration or ~/.config/fennec/calibration)\n"
	"  --threads N         threads for the all-core numbers (default: the CPUs this process may use)\n"
	"  --mib N             size of each of the three bandwidth arrays (default 128)\n"
	"  --reps N            repetitions, best kept (default 5)\n"
	"  --show              print the stored calibration instead of measuring\n";

static double now_s(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return (double)t.tv_sec + (double)t.tv_nsec * 1e-9;
}

/* ---- bandwidth ---- */

enum { K_READ, K_COPY, K_TRIAD, NKERN };
static const double kbytes[NKERN] = {8, 16, 24}; /* bytes per element, STREAM's counting */

/*
 * One measuring thread: it prepares (first touch of its slice), waits for the start, runs
 * its kernel between two clock reads and says how much it did (bytes or FLOP).
 */
typedef struct team {
	pthread_mutex_t mu;
	pthread_cond_t cv;
	int go; /* 1: start; -1: a thread could not be created, return at once */
} team;

typedef struct job {
	void (*prepare)(struct job *);
	double (*work)(struct job *);
	double *a, *b, *c;
	size_t n;
	int kernel, fp32;
	double sink, t0, t1, done;
	team *team;
} job;

static void *job_main(void *p)
{
	job *j = p;
	if (j->prepare)
		j->prepare(j);
	pthread_mutex_lock(&j->team->mu);
	while (!j->team->go)
		pthread_cond_wait(&j->team->cv, &j->team->mu);
	int go = j->team->go;
	pthread_mutex_unlock(&j->team->mu);
	if (go < 0)
		return NULL;
	j->t0 = now_s();
	j->done = j->work(j);
	j->t1 = now_s();
	return NULL;
}

static void team_start(team *t, int go)
{
	pthread_mutex_lock(&t->mu);
	t->go = go;
	pthread_cond_broadcast(&t->cv);
	pthread_mutex_unlock(&t->mu);
}

/* Run n jobs together; their total work over first start to last end, per second, or 0
 * when a thread could not be started (those that were are released and joined). */
static double run_jobs(job *jobs, unsigned n)
{
	team t = {PTHREAD_MUTEX_INITIALIZER, PTHREAD_COND_INITIALIZER, 0};
	pthread_t th[n];
	unsigned started = 0;
	for (; started < n; started++) {
		jobs[started].team = &t;
		if (pthread_create(&th[started], NULL, job_main, &jobs[started]))
			break;
	}
	team_start(&t, started == n ? 1 : -1);
	double t0 = 1e300, t1 = 0, done = 0, sink = 0;
	for (unsigned i = 0; i < started; i++) {
		pthread_join(th[i], NULL);
		t0 = jobs[i].t0 < t0 ? jobs[i].t0 : t0;
		t1 = jobs[i].t1 > t1 ? jobs[i].t1 : t1;
		done += jobs[i].done;
		sink += jobs[i].sink;
	}
	if (sink < 0)
		fputs("", stderr); /* keep the kernels' results alive */
	return started == n && t1 > t0 ? done / (t1 - t0) : 0;
}

#if defined(__GNUC__) && !defined(__clang__)
#define VECTORIZE __attribute__((optimize("O3", "tree-vectorize")))
#else
#define VECTORIZE
#endif

static VECTORIZE double run_kernel(int k, double *restrict a, const double *restrict b, const double *restrict c,
				   size_t n)
{
	double s = 0;
	switch (k) {
	case K_READ: {
		/* Four sums: one would wait on the latency of each add (no reassociation). */
		double s1 = 0, s2 = 0, s3 = 0;
		size_t i = 0;
		for (; i + 4 <= n; i += 4) {
			s += b[i];
			s1 += b[i + 1];
			s2 += b[i + 2];
			s3 += b[i + 3];
		}
		for (; i < n; i++)
			s += b[i];
		s += s1 + s2 + s3;
		break;
	}
	case K_COPY:
		for (size_t i = 0; i < n; i++)
			a[i] = b[i];
		break;
	default:
		for (size_t i = 0; i < n; i++)
			a[i] = b[i] + 3.0 * c[i];
	}
	return s;
}

static void bw_prepare(job *j)
{
	for (size_t i = 0; i < j->n; i++) { /* first touch: pages local to this thread */
		j->a[i] = 0;
		j->b[i] = 1;
		j->c[i] = 2;
	}
}

static double bw_work(job *j)
{
	j->sink += run_kernel(j->kernel, j->a, j->b, j->c, j->n);
	return kbytes[j->kernel] * (double)j->n;
}

/* One pass of kernel k on `threads` threads over n elements per array; bytes/s. */
static double bw_pass(double *a, double *b, double *c, size_t n, unsigned threads, int k)
{
	job jobs[threads];
	size_t per = n / threads;
	for (unsigned t = 0; t < threads; t++)
		jobs[t] = (job){.prepare = bw_prepare, .work = bw_work, .a = a + t * per, .b = b + t * per,
				.c = c + t * per, .n = per, .kernel = k};
	return run_jobs(jobs, threads);
}

static double bw_best(double *a, double *b, double *c, size_t n, unsigned threads, int k, unsigned reps)
{
	double best = 0;
	for (unsigned r = 0; r < reps; r++) {
		double v = bw_pass(a, b, c, n, threads, k);
		best = v > best ? v : best;
	}
	return best;
}

/* ---- FLOP/s ---- */

#define CHAINS 12  /* independent accumulators: more than FMA latency x FMA ports */
#define ITERS 2000000u


/*
 * CHAINS named accumulators, so that they live in registers (an array of vectors is kept
 * in memory at -O2, and the loop then measures loads and stores, not FMAs).
 */
#define EACH(X) X(0) X(1) X(2) X(3) X(4) X(5) X(6) X(7) X(8) X(9) X(10) X(11)

#define FMA_KERNEL(name, attr)                                                         \
	attr static double name(double *flops)                                         \
	{                                                                               \
		VEC m = SET1((SCALAR)0.999999), a = SET1((SCALAR)1e-6);                 \
		EACH(DECL)                                                              \
		for (unsigned k = 0; k < ITERS; k++) {                                  \
			EACH(STEP)                                                      \
		}                                                                       \
		SCALAR t[LANES];                                                        \
		double sink = 0;                                                        \
		EACH(SUM)                                                               \
		*flops = 2.0 * LANES * CHAINS * ITERS;                                  \
		return sink;                                                            \
	}
#define DECL(i) VEC x##i = SET1((SCALAR)(i));
#define STEP(i) x##i = FMADD(x##i, m, a);
#define SUM(i) STORE(t, x##i), sink += t[0];

#if defined(__x86_64__)
#define VEC __m512d
#define SCALAR double
#define SET1 _mm512_set1_pd
#define FMADD _mm512_fmadd_pd
#define STORE _mm512_storeu_pd
#define LANES 8
FMA_KERNEL(fma512_pd, __attribute__((target("avx512f"))))
#undef VEC
#undef SCALAR
#undef SET1
#undef FMADD
#undef STORE
#undef LANES
#define VEC __m512
#define SCALAR float
#define SET1 _mm512_set1_ps
#define FMADD _mm512_fmadd_ps
#define STORE _mm512_storeu_ps
#define LANES 16
FMA_KERNEL(fma512_ps, __attribute__((target("avx512f"))))
#undef VEC
#undef SCALAR
#undef SET1
#undef FMADD
#undef STORE
#undef LANES
#define VEC __m256d
#define SCALAR double
#define SET1 _mm256_set1_pd
#define FMADD _mm256_fmadd_pd
#define STORE _mm256_storeu_pd
#define LANES 4
FMA_KERNEL(fma256_pd, __attribute__((target("avx2,fma"))))
#undef VEC
#undef SCALAR
#undef SET1
#undef FMADD
#undef STORE
#undef LANES
#define VEC __m256
#define SCALAR float
#define SET1 _mm256_set1_ps
#define FMADD _mm256_fmadd_ps
#define STORE _mm256_storeu_ps
#define LANES 8
FMA_KERNEL(fma256_ps, __attribute__((target("avx2,fma"))))
#undef VEC
#undef SCALAR
#undef SET1
#undef FMADD
#undef STORE
#undef LANES
#endif

/* Portable: a multiply and an add per element, which the compiler may fuse. */
#define SET1(v) (v)
#define FMADD(x, m, a) ((x) * (m) + (a))
#define STORE(t, x) ((t)[0] = (x))
#define LANES 1
#define VEC double
#define SCALAR double
FMA_KERNEL(fma_scalar_pd, )
#undef VEC
#undef SCALAR
#define VEC float
#define SCALAR float
FMA_KERNEL(fma_scalar_ps, )

static const char *isa(void)
{
#if defined(__x86_64__)
	__builtin_cpu_init();
	if (__builtin_cpu_supports("avx512f"))
		return "avx512f";
	if (__builtin_cpu_supports("avx2") && __builtin_cpu_supports("fma"))
		return "avx2+fma";
#endif
	return "scalar";
}

static double fl_work(job *j)
{
	const char *s = isa();
	double flops = 0;
#if defined(__x86_64__)
	if (!strcmp(s, "avx512f"))
		j->sink = j->fp32 ? fma512_ps(&flops) : fma512_pd(&flops);
	else if (!strcmp(s, "avx2+fma"))
		j->sink = j->fp32 ? fma256_ps(&flops) : fma256_pd(&flops);
	else
#endif
		j->sink = j->fp32 ? fma_scalar_ps(&flops) : fma_scalar_pd(&flops);
	(void)s;
	return flops;
}

static double fl_best(unsigned threads, int fp32, unsigned reps)
{
	double best = 0;
	for (unsigned r = 0; r < reps; r++) {
		job jobs[threads];
		for (unsigned t = 0; t < threads; t++)
			jobs[t] = (job){.work = fl_work, .fp32 = fp32};
		double v = run_jobs(jobs, threads);
		best = v > best ? v : best;
	}
	return best;
}

/* ---- the command ---- */

static void cpu_name(char *out, size_t n)
{
	snprintf(out, n, "unknown");
	FILE *f = fopen("/proc/cpuinfo", "r");
	char line[512];
	while (f && fgets(line, sizeof line, f))
		if (!strncmp(line, "model name", 10) && strchr(line, ':')) {
			char *v = strchr(line, ':') + 1;
			v += strspn(v, " \t");
			v[strcspn(v, "\n")] = 0;
			snprintf(out, n, "%s", v);
			break;
		}
	if (f)
		fclose(f);
}

static void show(FILE *out, const char *path, const ana_calib *c)
{
	fprintf(out, "calibration %s\n  host %s, cpu %s, %u threads, %s\n", path, c->host, c->cpu, c->threads, c->isa);
	fprintf(out, "  memory bandwidth  read %.1f GB/s, copy %.1f GB/s, triad %.1f GB/s (one thread: read %.1f, triad %.1f)\n",
		c->bw_read / 1e9, c->bw_copy / 1e9, c->bw_triad / 1e9, c->bw_read_1t / 1e9, c->bw_triad_1t / 1e9);
	fprintf(out, "  peak FLOP/s       fp64 %.1f GFLOP/s, fp32 %.1f GFLOP/s (one thread: %.1f, %.1f)\n",
		c->flops_fp64 / 1e9, c->flops_fp32 / 1e9, c->flops_fp64_1t / 1e9, c->flops_fp32_1t / 1e9);
	fprintf(out, "  ridge point       %.2f FLOP/byte (fp64): below it a kernel is memory bound\n",
		c->flops_fp64 / c->bw_triad);
}

int cmd_calibrate(int argc, char **argv)
{
	const char *out_path = NULL;
	unsigned threads = 0, mib = 128, reps = 5;
	int only_show = 0;
	for (int i = 1; i < argc; i++) {
		cli_arg x;
		cli_arg_read(&x, argc, argv, i);
		const char *a = x.a, *v = x.v;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fputs(help, stdout);
			return 0;
		} else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
			if (!v) {
				cli_error("calibrate", "%s needs a file name", a);
				return 2;
			}
			out_path = v;
			i += cli_take(&x);
		} else if (!strcmp(a, "--threads") || !strcmp(a, "--mib") || !strcmp(a, "--reps")) {
			unsigned *dst = a[2] == 't' ? &threads : a[2] == 'm' ? &mib : &reps;
			if (cli_parse_u32("calibrate", a, v, 1, a[2] == 'm' ? 16384 : 1024, dst) < 0)
				return 2;
			i += cli_take(&x);
		} else if (!strcmp(a, "--show"))
			only_show = 1;
		else {
			cli_error("calibrate", "unknown argument '%s' (see fennec calibrate --help)", a);
			return 2;
		}
		if (cli_arg_done("calibrate", &x) < 0)
			return 2;
	}
	char path[4096];
	if (out_path)
		snprintf(path, sizeof path, "%s", out_path);
	else if (ana_calib_default_path(path, sizeof path) < 0) {
		cli_error("calibrate", "no place to store the calibration: set HOME or FENNEC_CALIBRATION, or give -o FILE");
		return 2;
	}
	ana_calib c;
	if (only_show) {
		int line;
		if (ana_calib_load(path, &c, &line) < 0) {
			if (errno == ENOENT)
				cli_error("calibrate", "%s: no calibration yet (run fennec calibrate)", path);
			else if (errno == EINVAL)
				cli_error("calibrate", "%s:%d: not a valid calibration file", path, line);
			else
				cli_error("calibrate", "%s: %s", path, strerror(errno));
			return 1;
		}
		show(stdout, path, &c);
		return 0;
	}
	if (!threads) {
		cpu_set_t set;
		threads = sched_getaffinity(0, sizeof set, &set) == 0 ? (unsigned)CPU_COUNT(&set) : 1;
	}
	memset(&c, 0, sizeof c);
	c.threads = threads;
	gethostname(c.host, sizeof c.host - 1);
	cpu_name(c.cpu, sizeof c.cpu);
	snprintf(c.isa, sizeof c.isa, "%s", isa());
	c.measured_at = (double)time(NULL);

	size_t n = ((size_t)mib << 20) / sizeof(double);
	n -= n % threads;
	double *a = malloc(n * sizeof *a), *b = malloc(n * sizeof *b), *cc = malloc(n * sizeof *cc);
	if (!a || !b || !cc) {
		cli_error("calibrate", "cannot allocate 3 x %u MiB for the bandwidth arrays (try --mib)", mib);
		free(a);
		free(b);
		free(cc);
		return 1;
	}
	fprintf(stderr, "fennec calibrate: memory bandwidth, 3 x %u MiB, %u thread(s)...\n", mib, threads);
	c.bw_read = bw_best(a, b, cc, n, threads, K_READ, reps);
	c.bw_copy = bw_best(a, b, cc, n, threads, K_COPY, reps);
	c.bw_triad = bw_best(a, b, cc, n, threads, K_TRIAD, reps);
	c.bw_read_1t = bw_best(a, b, cc, n, 1, K_READ, reps);
	c.bw_triad_1t = bw_best(a, b, cc, n, 1, K_TRIAD, reps);
	free(a);
	free(b);
	free(cc);
	fprintf(stderr, "fennec calibrate: peak FLOP/s (%s)...\n", c.isa);
	c.flops_fp64 = fl_best(threads, 0, reps);
	c.flops_fp32 = fl_best(threads, 1, reps);
	c.flops_fp64_1t = fl_best(1, 0, reps);
	c.flops_fp32_1t = fl_best(1, 1, reps);
	if (c.bw_triad <= 0 || c.flops_fp64 <= 0) {
		cli_error("calibrate", "a measurement failed (could not start threads?)");
		return 1;
	}
	double load = 0;
	FILE *la = fopen("/proc/loadavg", "r");
	if (la) {
		if (fscanf(la, "%lf", &load) != 1)
			load = 0;
		fclose(la);
	}
	if (load > 0.5 * threads)
		fprintf(stderr, "fennec calibrate: warning: the machine was busy (load average %.1f on %u CPUs): other work "
			"lowers these ceilings; run it again on an idle machine\n", load, threads);
	if (ana_calib_save(path, &c) < 0) {
		cli_error("calibrate", "cannot write %s: %s", path, strerror(errno));
		return 1;
	}
	show(stdout, path, &c);
	return 0;
}

/*
 * bench/region_overhead.c - ns per fennec region begin/end pair, printed beside the cost of
 * two raw timestamp reads (rdtsc) and two clock_gettime(CLOCK_MONOTONIC) calls measured in
 * the same run, on 1 thread and on 2 threads at once, with the collector not started,
 * running, and stopped again.
 *
 * Usage: region_overhead [-n pairs_per_run] [-r runs] [-b buffer_kb] [-o results_dir]
 *                        [-q quiesce_ms] [-k]
 * Rounds interleave the variants (side by side); each cell is the median over the rounds,
 * and the ratio column is the median over rounds of variant / (2 x rdtsc) in that round.
 * After fennec_stop() the profile is analysed with `fennec analyze --format json` to read
 * the dropped event count and the per-variant region counts (pairs missing = dropped).
 * Writes <results_dir>/region_overhead.tsv (default: build/bench-results next to the binary).
 */
#include <errno.h>
#include <fennec.h>
#include <limits.h>
#include <pthread.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define TICKS_NAME "rdtsc"
static inline uint64_t ticks(void) { return __rdtsc(); }
#elif defined(__aarch64__)
#define TICKS_NAME "cntvct"
static inline uint64_t ticks(void)
{
	uint64_t v;
	__asm__ volatile("mrs %0, cntvct_el0" : "=r"(v));
	return v;
}
#else
#define TICKS_NAME "clock_gettime"
static inline uint64_t ticks(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}
#endif

static uint64_t now_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static volatile uint64_t g_sink;
static uint32_t g_id;       /* interned id for the begin_id variants */
static unsigned g_quiesce_ms = 200; /* pause after each recorded run (-q) */

/* ---- the measured loops: each returns elapsed ns for n pairs ---- */

static uint64_t __attribute__((noinline)) loop_rdtsc(uint64_t n)
{
	uint64_t s = 0, t0 = now_ns();
	for (uint64_t i = 0; i < n; i++) {
		uint64_t a = ticks();
		uint64_t b = ticks();
		s += b - a;
	}
	uint64_t dt = now_ns() - t0;
	g_sink += s;
	return dt;
}

/* Two out-of-line calls that each read the clock: the raw read plus a call, as the
 * collector's entry points pay. */
static uint64_t __attribute__((noinline)) ticks_call(void)
{
	__asm__ volatile("");
	return ticks();
}

static uint64_t __attribute__((noinline)) loop_rdtsc_call(uint64_t n)
{
	uint64_t s = 0, t0 = now_ns();
	for (uint64_t i = 0; i < n; i++) {
		uint64_t a = ticks_call();
		uint64_t b = ticks_call();
		s += b - a;
	}
	uint64_t dt = now_ns() - t0;
	g_sink += s;
	return dt;
}

static uint64_t __attribute__((noinline)) loop_cgt(uint64_t n)
{
	uint64_t s = 0, t0 = now_ns();
	for (uint64_t i = 0; i < n; i++) {
		struct timespec a, b;
		clock_gettime(CLOCK_MONOTONIC, &a);
		clock_gettime(CLOCK_MONOTONIC, &b);
		s += (uint64_t)(b.tv_nsec - a.tv_nsec);
	}
	uint64_t dt = now_ns() - t0;
	g_sink += s;
	return dt;
}

#define FENNEC_LOOP(fn, begin_stmt)                                      \
	static uint64_t __attribute__((noinline)) fn(uint64_t n)         \
	{                                                                \
		uint64_t t0 = now_ns();                                  \
		for (uint64_t i = 0; i < n; i++) {                       \
			begin_stmt;                                      \
			fennec_region_end();                             \
		}                                                        \
		return now_ns() - t0;                                    \
	}

/* One function (and so one name, one call site) per variant, so that the analysis can
 * count each variant's pairs separately. */
FENNEC_LOOP(loop_off_lit, fennec_region_begin("ro.off.literal"))
FENNEC_LOOP(loop_off_site, FENNEC_REGION_BEGIN("ro.off.site"))
FENNEC_LOOP(loop_off_id, fennec_region_begin_id(g_id))
FENNEC_LOOP(loop_lit, fennec_region_begin("ro.literal"))
FENNEC_LOOP(loop_site, FENNEC_REGION_BEGIN("ro.site"))
FENNEC_LOOP(loop_id, fennec_region_begin_id(g_id))
FENNEC_LOOP(loop_2t_lit, fennec_region_begin("ro.2t.literal"))
FENNEC_LOOP(loop_2t_site, FENNEC_REGION_BEGIN("ro.2t.site"))

/* ---- variants ---- */

enum phase { PH_OFF, PH_ON, PH_STOPPED };
static const char *const phase_name[] = {"off", "running", "stopped"};

struct variant {
	const char *label;
	enum phase phase;
	int threads;
	uint64_t (*fn)(uint64_t);
	const char *region;  /* region name in the profile, NULL if none */
	int is_baseline;     /* the 2 x rdtsc row the ratios of its (phase, threads) use */
	double *ns;          /* per round: ns per pair (mean over threads) */
	double *ratio;       /* per round: ns / baseline ns */
	double *cpu;         /* per round: on-CPU ns per pair (thread CPU time) */
	double *bg;          /* per round: CPU ns per pair of the other threads (the writer) */
	double *cpu_ratio;   /* per round: cpu / baseline cpu */
	uint64_t pairs_emitted;
};

#define VAR(label_, phase_, thr_, fn_, region_, base_)                                       \
	{                                                                                     \
		.label = (label_), .phase = (phase_), .threads = (thr_), .fn = (fn_),         \
		.region = (region_), .is_baseline = (base_)                                   \
	}

static struct variant V[] = {
	VAR("2 x " TICKS_NAME " (inline)", PH_OFF, 1, loop_rdtsc, NULL, 1),
	VAR("2 x clock_gettime(MONOTONIC)", PH_OFF, 1, loop_cgt, NULL, 0),
	VAR("pair, not started: literal", PH_OFF, 1, loop_off_lit, NULL, 0),
	VAR("pair, not started: site macro", PH_OFF, 1, loop_off_site, NULL, 0),
	VAR("pair, not started: begin_id", PH_OFF, 1, loop_off_id, NULL, 0),
	VAR("2 x " TICKS_NAME " (inline)", PH_ON, 1, loop_rdtsc, NULL, 1),
	VAR("2 x " TICKS_NAME " (2 calls)", PH_ON, 1, loop_rdtsc_call, NULL, 0),
	VAR("2 x clock_gettime(MONOTONIC)", PH_ON, 1, loop_cgt, NULL, 0),
	VAR("pair: literal name", PH_ON, 1, loop_lit, "ro.literal", 0),
	VAR("pair: FENNEC_REGION_BEGIN site", PH_ON, 1, loop_site, "ro.site", 0),
	VAR("pair: begin_id (interned)", PH_ON, 1, loop_id, "ro.id", 0),
	VAR("2 x " TICKS_NAME " (inline)", PH_ON, 2, loop_rdtsc, NULL, 1),
	VAR("pair: literal name", PH_ON, 2, loop_2t_lit, "ro.2t.literal", 0),
	VAR("pair: FENNEC_REGION_BEGIN site", PH_ON, 2, loop_2t_site, "ro.2t.site", 0),
	VAR("2 x " TICKS_NAME " (inline)", PH_STOPPED, 1, loop_rdtsc, NULL, 1),
	VAR("pair, after stop: literal", PH_STOPPED, 1, loop_off_lit, NULL, 0),
	VAR("pair, after stop: site macro", PH_STOPPED, 1, loop_off_site, NULL, 0),
};
#define NV ((int)(sizeof V / sizeof V[0]))

/* ---- the second thread: runs the same loop as the main thread, between barriers ---- */

static pthread_barrier_t g_bar;
static uint64_t (*g_fn)(uint64_t); /* NULL: quit */
static uint64_t g_n, g_worker_ns, g_worker_cpu;

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void *worker(void *arg)
{
	(void)arg;
	for (;;) {
		pthread_barrier_wait(&g_bar);
		if (!g_fn)
			return NULL;
		uint64_t c0 = thread_cpu_ns();
		g_worker_ns = g_fn(g_n);
		g_worker_cpu = thread_cpu_ns() - c0;
		pthread_barrier_wait(&g_bar);
	}
}

static uint64_t process_cpu_ns(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_PROCESS_CPUTIME_ID, &ts);
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

/* Runs n pairs of v on its threads; returns wall ns per pair (mean over the threads),
 * stores on-CPU ns per pair of the measuring threads in *cpu, and the CPU time the rest of
 * the process (the collector's writer) spent meanwhile and in the pause after, per pair,
 * in *bg. */
static double run_variant(struct variant *v, uint64_t n, double *cpu, double *bg)
{
	double ns, threads_cpu;
	uint64_t p0 = process_cpu_ns();
	uint64_t c0 = thread_cpu_ns();
	if (v->threads == 1) {
		ns = (double)v->fn(n) / (double)n;
		threads_cpu = (double)(thread_cpu_ns() - c0);
		*cpu = threads_cpu / (double)n;
	} else {
		g_fn = v->fn;
		g_n = n;
		pthread_barrier_wait(&g_bar);
		uint64_t mine = v->fn(n);
		uint64_t mine_cpu = thread_cpu_ns() - c0;
		pthread_barrier_wait(&g_bar);
		ns = ((double)mine + (double)g_worker_ns) / 2.0 / (double)n;
		threads_cpu = (double)mine_cpu + (double)g_worker_cpu;
		*cpu = threads_cpu / 2.0 / (double)n;
	}
	v->pairs_emitted += n * (uint64_t)v->threads;
	/* Let the writer drain what this run produced before the next measurement starts, so
	 * that its work lands in the run that caused it, not in the next one. */
	if (v->region && g_quiesce_ms > 0)
		nanosleep(&(struct timespec){g_quiesce_ms / 1000, (long)(g_quiesce_ms % 1000) * 1000000L},
			  NULL);
	*bg = ((double)(process_cpu_ns() - p0) - threads_cpu) / (double)(n * (uint64_t)v->threads);
	return ns;
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static double median(const double *xs, int n)
{
	double *t = malloc(sizeof(double) * (size_t)n);
	memcpy(t, xs, sizeof(double) * (size_t)n);
	qsort(t, (size_t)n, sizeof(double), cmp_double);
	double m = n % 2 ? t[n / 2] : (t[n / 2 - 1] + t[n / 2]) / 2.0;
	free(t);
	return m;
}

static double minimum(const double *xs, int n)
{
	double m = xs[0];
	for (int i = 1; i < n; i++)
		if (xs[i] < m)
			m = xs[i];
	return m;
}

static double maximum(const double *xs, int n)
{
	double m = xs[0];
	for (int i = 1; i < n; i++)
		if (xs[i] > m)
			m = xs[i];
	return m;
}

static int baseline_of(int i)
{
	for (int j = 0; j < NV; j++)
		if (V[j].is_baseline && V[j].phase == V[i].phase && V[j].threads == V[i].threads)
			return j;
	return -1;
}

/* ---- a minimal JSON walker, enough to read the analysis output ---- */

static const char *ws(const char *p)
{
	while (*p == ' ' || *p == '\n' || *p == '\t' || *p == '\r')
		p++;
	return p;
}

/* Skips one JSON value starting at p (after whitespace); returns the byte after it. */
static const char *skip_value(const char *p)
{
	p = ws(p);
	if (*p == '"') {
		for (p++; *p && *p != '"'; p++)
			if (*p == '\\' && p[1])
				p++;
		return *p ? p + 1 : p;
	}
	if (*p == '{' || *p == '[') {
		int depth = 0;
		for (; *p; p++) {
			if (*p == '"') {
				p = skip_value(p) - 1;
			} else if (*p == '{' || *p == '[') {
				depth++;
			} else if (*p == '}' || *p == ']') {
				if (--depth == 0)
					return p + 1;
			}
		}
		return p;
	}
	while (*p && *p != ',' && *p != '}' && *p != ']' && *p != ' ' && *p != '\n')
		p++;
	return p;
}

/* In the object at p, the value of `key` (pointer to its first byte), or NULL. */
static const char *obj_get(const char *p, const char *key)
{
	p = ws(p);
	if (*p != '{')
		return NULL;
	p++;
	size_t kl = strlen(key);
	for (;;) {
		p = ws(p);
		if (*p != '"')
			return NULL;
		const char *k = p + 1;
		const char *after = skip_value(p);
		int match = (size_t)(after - 1 - k) == kl && memcmp(k, key, kl) == 0;
		p = ws(after);
		if (*p != ':')
			return NULL;
		p = ws(p + 1);
		if (match)
			return p;
		p = ws(skip_value(p));
		if (*p != ',')
			return NULL;
		p++;
	}
}

static const char *lost_or_count(long long v)
{
	static char buf[32];
	snprintf(buf, sizeof buf, "%lld", v);
	return buf;
}

static int str_eq(const char *p, const char *s)
{
	size_t l = strlen(s);
	return p && *p == '"' && strncmp(p + 1, s, l) == 0 && p[1 + l] == '"';
}

static char *read_cmd(const char *cmd)
{
	FILE *f = popen(cmd, "r");
	if (!f)
		return NULL;
	size_t cap = 1 << 16, len = 0;
	char *buf = malloc(cap);
	size_t r;
	while ((r = fread(buf + len, 1, cap - len - 1, f)) > 0) {
		len += r;
		if (cap - len < 4096)
			buf = realloc(buf, cap *= 2);
	}
	buf[len] = 0;
	if (pclose(f) != 0 && len == 0) {
		free(buf);
		return NULL;
	}
	return buf;
}

static void exe_dir(char *out, size_t cap)
{
	ssize_t l = readlink("/proc/self/exe", out, cap - 1);
	if (l <= 0) {
		snprintf(out, cap, ".");
		return;
	}
	out[l] = 0;
	char *slash = strrchr(out, '/');
	if (slash)
		*slash = 0;
}

int main(int argc, char **argv)
{
	uint64_t n = 10000000;
	int runs = 5;
	unsigned buffer_kb = 32768; /* the largest the collector takes */
	int keep = 0;
	char dir[PATH_MAX / 2], results[PATH_MAX], fennec_bin[PATH_MAX];
	exe_dir(dir, sizeof dir);
	snprintf(results, sizeof results, "%s/../bench-results", dir);
	const char *fb = getenv("FENNEC_BIN");
	if (fb)
		snprintf(fennec_bin, sizeof fennec_bin, "%s", fb);
	else
		snprintf(fennec_bin, sizeof fennec_bin, "%s/../bin/fennec", dir);

	int c;
	while ((c = getopt(argc, argv, "n:r:b:o:q:k")) != -1) {
		switch (c) {
		case 'n': n = strtoull(optarg, NULL, 0); break;
		case 'r': runs = atoi(optarg); break;
		case 'b': buffer_kb = (unsigned)atoi(optarg); break;
		case 'o': snprintf(results, sizeof results, "%s", optarg); break;
		case 'q': g_quiesce_ms = (unsigned)atoi(optarg); break;
		case 'k': keep = 1; break;
		default:
			fprintf(stderr, "usage: %s [-n pairs] [-r runs] [-b buffer_kb] [-o dir] [-q quiesce_ms] [-k]\n",
				argv[0]);
			return 2;
		}
	}
	if (runs < 1 || n < 1)
		return 2;
	if (fennec_is_running()) {
		fprintf(stderr, "region_overhead: run it directly, not under `fennec record`\n");
		return 2;
	}

	for (int i = 0; i < NV; i++) {
		V[i].ns = calloc((size_t)runs, sizeof(double));
		V[i].ratio = calloc((size_t)runs, sizeof(double));
		V[i].cpu = calloc((size_t)runs, sizeof(double));
		V[i].bg = calloc((size_t)runs, sizeof(double));
		V[i].cpu_ratio = calloc((size_t)runs, sizeof(double));
	}
	g_id = fennec_intern("ro.id");
	pthread_barrier_init(&g_bar, NULL, 2);
	pthread_t th;
	pthread_create(&th, NULL, worker, NULL);

	char tmpl[] = "/tmp/fennec-bench-XXXXXX";
	if (!mkdtemp(tmpl)) {
		perror("mkdtemp");
		return 1;
	}
	char profile[PATH_MAX];
	snprintf(profile, sizeof profile, "%s/region_overhead.fnc", tmpl);

	uint64_t t_start = now_ns();
	int stop_rc = FENNEC_ENOTRUNNING;
	for (int ph = PH_OFF; ph <= PH_STOPPED; ph++) {
		if (ph == PH_ON) {
			fennec_config cfg;
			fennec_config_init(&cfg);
			cfg.output = profile;
			cfg.buffer_kb = buffer_kb;
			int rc = fennec_start(&cfg);
			if (rc != 0) {
				fprintf(stderr, "region_overhead: fennec_start: %s\n", fennec_strerror(rc));
				return 1;
			}
		}
		if (ph == PH_STOPPED)
			stop_rc = fennec_stop();
		/* warm-up: one short run of each variant (caches, first buffer pages) */
		for (int i = 0; i < NV; i++)
			if ((int)V[i].phase == ph)
				run_variant(&V[i], n / 10 + 1, &V[i].cpu[0], &V[i].bg[0]);
		for (int r = 0; r < runs; r++)
			for (int i = 0; i < NV; i++)
				if ((int)V[i].phase == ph)
					V[i].ns[r] = run_variant(&V[i], n, &V[i].cpu[r], &V[i].bg[r]);
	}
	uint64_t t_measure = now_ns() - t_start;

	g_fn = NULL;
	pthread_barrier_wait(&g_bar);
	pthread_join(th, NULL);

	for (int i = 0; i < NV; i++) {
		int b = baseline_of(i);
		for (int r = 0; r < runs; r++) {
			V[i].ratio[r] = V[i].ns[r] / V[b].ns[r];
			V[i].cpu_ratio[r] = V[i].cpu[r] / V[b].cpu[r];
		}
	}

	/* ---- the profile: dropped events and per-variant counts ---- */
	long long dropped = -1, events = -1;
	long long counts[sizeof V / sizeof V[0]];
	for (int i = 0; i < NV; i++)
		counts[i] = -1;
	struct stat st;
	long long file_bytes = stat(profile, &st) == 0 ? (long long)st.st_size : -1;
	char cmd[3 * PATH_MAX];
	snprintf(cmd, sizeof cmd, "'%s' analyze '%s' --format json 2>/dev/null", fennec_bin, profile);
	char *json = stop_rc == 0 ? read_cmd(cmd) : NULL;
	const char *summary = json ? obj_get(json, "summary") : NULL;
	if (summary) {
		const char *d = obj_get(summary, "dropped_events");
		const char *e = obj_get(summary, "events");
		if (d)
			dropped = strtoll(d, NULL, 10);
		if (e)
			events = strtoll(e, NULL, 10);
		const char *regions = obj_get(json, "regions");
		if (regions && *regions == '[') {
			const char *p = ws(regions + 1);
			for (int i = 0; i < NV; i++)
				if (V[i].region)
					counts[i] = 0;
			while (*p == '{') {
				const char *name = obj_get(p, "name");
				const char *cnt = obj_get(p, "count");
				for (int i = 0; i < NV; i++)
					if (V[i].region && cnt && str_eq(name, V[i].region))
						counts[i] += strtoll(cnt, NULL, 10);
				p = ws(skip_value(p));
				if (*p == ',')
					p = ws(p + 1);
			}
		}
	} else {
		fprintf(stderr, "region_overhead: could not analyse %s with %s (stop: %s)\n", profile,
			fennec_bin, fennec_strerror(stop_rc));
	}

	/* ---- table ---- */
	printf("fennec region_overhead: %llu pairs per run, %d runs (+1 warm-up), buffer %u KiB, "
	       "%d CPUs, %.1f s\n",
	       (unsigned long long)n, runs, buffer_kb, (int)sysconf(_SC_NPROCESSORS_ONLN),
	       (double)t_measure / 1e9);
	printf("ns/pair: wall time per pair, median over runs [min, max]; ratio: median over runs of "
	       "ns / (2 x %s, same thread count and collector state, same round); cpu ns: the "
	       "measuring threads' CPU time per pair (excludes time preempted, e.g. by the writer), cpu rt the same ratio on it; bg "
	       "ns: CPU time of the process's other threads (the collector's writer) per pair, during "
	       "the run and a %u ms pause after it\n",
	       TICKS_NAME, g_quiesce_ms);
	printf("%-32s %3s %-9s %8s %8s %8s %7s %7s %7s %7s %10s\n", "variant", "thr", "collector",
	       "ns/pair", "min", "max", "ratio", "cpu ns", "cpu rt", "bg ns", "pairs lost");
	mkdir(results, 0777);
	char tsv_path[PATH_MAX + 32];
	snprintf(tsv_path, sizeof tsv_path, "%s/region_overhead.tsv", results);
	FILE *tsv = fopen(tsv_path, "w");
	if (tsv)
		fprintf(tsv, "variant\tthreads\tcollector\tpairs_per_run\truns\tmedian_ns\tmin_ns\t"
			     "max_ns\tratio_vs_2_ticks\tcpu_ns\tcpu_ratio_vs_2_ticks\tbackground_cpu_ns\tpairs_emitted\t"
			     "pairs_in_profile\n");
	for (int i = 0; i < NV; i++) {
		struct variant *v = &V[i];
		double med = median(v->ns, runs), lo = minimum(v->ns, runs), hi = maximum(v->ns, runs);
		double ratio = median(v->ratio, runs), cpu = median(v->cpu, runs);
		double bg = median(v->bg, runs), cpu_ratio = median(v->cpu_ratio, runs);
		char lost[32] = "";
		if (counts[i] >= 0)
			snprintf(lost, sizeof lost, "%lld", (long long)v->pairs_emitted - counts[i]);
		printf("%-32s %3d %-9s %8.2f %8.2f %8.2f %6.2fx %7.2f %6.2fx %7.2f %10s\n", v->label,
		       v->threads, phase_name[v->phase], med, lo, hi, ratio, cpu, cpu_ratio, bg, lost);
		if (tsv)
			fprintf(tsv, "%s\t%d\t%s\t%llu\t%d\t%.3f\t%.3f\t%.3f\t%.4f\t%.3f\t%.4f\t%.3f\t%llu\t%s\n",
				v->label, v->threads, phase_name[v->phase],
				(unsigned long long)n, runs, med, lo, hi, ratio, cpu, cpu_ratio, bg,
				(unsigned long long)v->pairs_emitted, counts[i] >= 0 ? lost_or_count(counts[i]) : "NA");
	}
	printf("profile: %lld bytes, %lld events decoded, summary.dropped_events = %lld%s\n",
	       file_bytes, events, dropped,
	       dropped > 0 ? "  (drops make the measured pairs cheaper than a recorded pair)" : "");
	printf("target: pair <= 1.3x two raw timestamp reads (2 x %s)\n", TICKS_NAME);
	if (tsv) {
		fprintf(tsv, "#profile_bytes\t%lld\n#events\t%lld\n#dropped_events\t%lld\n", file_bytes,
			events, dropped);
		fclose(tsv);
		printf("wrote %s\n", tsv_path);
	}
	free(json);

	if (keep) {
		printf("kept %s\n", profile);
	} else {
		snprintf(cmd, sizeof cmd, "rm -rf '%s'", tmpl);
		if (system(cmd) != 0)
			fprintf(stderr, "region_overhead: could not remove %s\n", tmpl);
	}
	return g_sink == 42 ? 1 : 0; /* keeps the sink observable */
}

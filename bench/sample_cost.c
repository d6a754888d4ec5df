/*
 * sample_cost.c - what the kernel's part of a CPU sample costs the sampled thread, for each
 * way of taking one, without any profiler around: a perf_event task-clock counter on this
 * thread at HZ, configured as
 *   ip         IP, TID and TIME into a ring: the timer interrupt and the smallest record
 *   callchain  the same plus the user and kernel call chain, up to 127 frames, as
 *              `perf record -g` asks (the kernel walks the frame pointers)
 *   stack      the same as fennec's ring source (src/collect/perfring.c): the user
 *              registers and a 12 KiB copy of the stack (FENNEC_STACK_COPY's default for
 *              128 frames), unwound later by fennec's writer thread
 *   signal     no ring: a real-time signal per sample to a handler that only counts (the
 *              floor of a signal-based sampler: fennec's fallback source, gperftools)
 * Rounds of fixed work, a recursion 100 frames deep built with frame pointers (Makefile) so
 * that the call chain is walked in full, alternate between the counter off and each
 * configuration, in a rotated order; between rounds the ring is emptied, outside the timed
 * part. Each round's CPU time (CLOCK_THREAD_CPUTIME_ID: the interrupts are charged to the
 * interrupted thread) is compared with the off round of the same repetition, so that drift
 * of this machine's speed cancels. Prints, per configuration: the median ratio to off
 * [min, max], the samples per round, the cost per sample in microseconds (median of the
 * rounds' (on - off) / samples) and what that cost is at HZ, in percent. The writer's side
 * of fennec (unwinding, encoding, writing) is not here: each recording measures it
 * (summary.collector_cpu_ns, bench/sampling.sh's second table).
 *
 * Usage: sample_cost [-F HZ] [-r ROUNDS] [-w WORK_MS] [-o results_dir] [-s STACK_BYTES]
 *   defaults: 999 Hz, 40 rounds, 60 ms of work a round, a 12 KiB stack copy (-s: the stack
 *   configuration's copy, fennec's FENNEC_STACK_COPY; its default is 24 KiB for 256 frames).
 */
#include <errno.h>
#include <stdio.h>

#if !defined(__x86_64__)
int main(void)
{
	fprintf(stderr, "sample_cost: x86-64 only (the register mask of fennec's ring source)\n");
	return 0;
}
#else
#include <asm/perf_regs.h>
#include <fcntl.h>
#include <getopt.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

enum { OFF, IP, CALLCHAIN, STACK, SIGNAL, NMODES };
static const char *const mode_name[NMODES] = {"off", "ip", "callchain", "stack", "signal"};
static const char *const mode_what[NMODES] = {
	"counter off",
	"IP, TID, TIME into a ring",
	"+ call chain (perf record -g)",
	"+ registers, %u bytes of stack (fennec's ring source)",
	"a signal to an empty handler, no ring",
};

#define RING_PAGES 1024 /* 4 MiB: a round's samples with 12 KiB stacks at up to ~5 kHz */
#define DEPTH 100

static volatile long signals;
static unsigned stack_bytes = 12288; /* -s: the stack mode's copy */

static void on_signal(int sig, siginfo_t *si, void *uc)
{
	signals++;
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static __attribute__((noinline)) double leaf(double x)
{
	for (int i = 0; i < 2000; i++)
		x = x * 1.0000001 + 1e-9;
	return x;
}

/* Down DEPTH frames, then the work: samples land 100 frames deep. */
static __attribute__((noinline)) double descend(int d, double x)
{
	double y = d ? descend(d - 1, x) : leaf(x);
	__asm__ volatile("" : "+x"(y)); /* not a tail call */
	return y;
}

typedef struct counter {
	int fd;
	struct perf_event_mmap_page *meta;
	uint8_t *data;
	uint64_t size;
} counter;

static int open_counter(counter *c, int mode, uint64_t period, int sig)
{
	struct perf_event_attr a;
	memset(&a, 0, sizeof a);
	a.type = PERF_TYPE_SOFTWARE;
	a.size = sizeof a;
	a.config = PERF_COUNT_SW_TASK_CLOCK;
	a.sample_period = period;
	a.disabled = 1;
	a.exclude_hv = 1;
	a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME;
	if (mode == CALLCHAIN) {
		a.sample_type |= PERF_SAMPLE_CALLCHAIN | PERF_SAMPLE_PERIOD;
		a.sample_max_stack = 127;
	} else if (mode == STACK) {
		a.sample_type |= PERF_SAMPLE_REGS_USER | PERF_SAMPLE_STACK_USER;
		a.sample_regs_user = ((1ull << (PERF_REG_X86_IP + 1)) - 1) | (0xffull << PERF_REG_X86_R8);
		a.sample_stack_user = stack_bytes;
		a.use_clockid = 1;
		a.clockid = CLOCK_MONOTONIC;
	}
	if (mode != SIGNAL) { /* nobody polls: wake nobody (fennec's setting too) */
		a.watermark = 1;
		a.wakeup_watermark = RING_PAGES * 4096u;
	} else {
		a.sample_type = 0;
		a.wakeup_events = 1;
	}
	pid_t tid = (pid_t)syscall(SYS_gettid);
	c->fd = (int)syscall(SYS_perf_event_open, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (c->fd < 0) {
		a.exclude_kernel = 1; /* perf_event_paranoid 2 */
		c->fd = (int)syscall(SYS_perf_event_open, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
	}
	if (c->fd < 0)
		return -1;
	if (mode == SIGNAL) {
		struct f_owner_ex o = {F_OWNER_TID, tid};
		if (fcntl(c->fd, F_SETFL, O_ASYNC) || fcntl(c->fd, F_SETSIG, sig) || fcntl(c->fd, F_SETOWN_EX, &o))
			return -1;
		return 0;
	}
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	void *m = mmap(NULL, (1 + RING_PAGES) * page, PROT_READ | PROT_WRITE, MAP_SHARED, c->fd, 0);
	if (m == MAP_FAILED)
		return -1;
	c->meta = m;
	c->data = (uint8_t *)m + page;
	c->size = (uint64_t)RING_PAGES * page;
	return 0;
}

/* Count the samples (and lost ones) in the ring and empty it. */
static uint64_t dyn_bytes, dyn_samples; /* stack mode: what the kernel copied (dyn_size) */

static void drain(counter *c, uint64_t *samples, uint64_t *lost, int stack)
{
	uint64_t head = __atomic_load_n(&c->meta->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = c->meta->data_tail;
	while (head - tail >= sizeof(struct perf_event_header)) {
		struct perf_event_header h;
		uint64_t off = tail & (c->size - 1);
		if (off + sizeof h <= c->size) {
			memcpy(&h, c->data + off, sizeof h);
		} else {
			size_t first = (size_t)(c->size - off);
			memcpy(&h, c->data + off, first);
			memcpy((uint8_t *)&h + first, c->data, sizeof h - first);
		}
		if (h.size < sizeof h)
			break;
		if (h.type == PERF_RECORD_SAMPLE) {
			(*samples)++;
			uint64_t dyn = 0, o3 = (tail + h.size - 8) & (c->size - 1); /* the record's last word */
			if (stack && o3 + 8 <= c->size) {
				memcpy(&dyn, c->data + o3, 8);
				dyn_bytes += dyn;
				dyn_samples++;
			}
		} else if (h.type == PERF_RECORD_LOST) {
			uint64_t n = 0, o2 = (tail + 16) & (c->size - 1);
			if (o2 + 8 <= c->size)
				memcpy(&n, c->data + o2, 8);
			*lost += n;
		}
		tail += h.size;
	}
	__atomic_store_n(&c->meta->data_tail, head, __ATOMIC_RELEASE);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return x < y ? -1 : x > y;
}

static double median(double *v, int n)
{
	qsort(v, (size_t)n, sizeof *v, cmp_double);
	return n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

int main(int argc, char **argv)
{
	long hz = 999, rounds = 40, work_ms = 60;
	const char *outdir = NULL;
	int opt;
	while ((opt = getopt(argc, argv, "F:r:w:o:s:")) != -1) {
		switch (opt) {
		case 'F': hz = atol(optarg); break;
		case 'r': rounds = atol(optarg); break;
		case 'w': work_ms = atol(optarg); break;
		case 'o': outdir = optarg; break;
		case 's': stack_bytes = (unsigned)((strtoul(optarg, NULL, 0) + 7) & ~7ul); break;
		default:
			fprintf(stderr, "usage: %s [-F HZ] [-r ROUNDS] [-w WORK_MS] [-o results_dir] [-s STACK_BYTES]\n", argv[0]);
			return 2;
		}
	}
	if (hz < 1 || hz > 100000 || rounds < 3 || work_ms < 1) {
		fprintf(stderr, "sample_cost: -F 1..100000, -r 3 or more, -w 1 or more\n");
		return 2;
	}
	int sig = SIGRTMAX - 1;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_signal;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigaction(sig, &sa, NULL);
	uint64_t period = 1000000000u / (uint64_t)hz;
	counter c[NMODES];
	memset(c, 0, sizeof c);
	for (int m = IP; m < NMODES; m++) {
		if (open_counter(&c[m], m, period, sig) < 0) {
			fprintf(stderr, "sample_cost: the %s counter: %s\n", mode_name[m], strerror(errno));
			return 1;
		}
	}

	/* Calibrate the work to WORK_MS of CPU, after a warm-up. */
	double x = 1;
	uint64_t t0 = thread_cpu_ns();
	long calls = 0;
	while (thread_cpu_ns() - t0 < 100000000u) {
		x = descend(DEPTH, x * 1e-9);
		calls++;
	}
	long per_round = (long)((double)calls * (double)work_ms / 100.0);
	if (per_round < 1)
		per_round = 1;

	double *ratio[NMODES], *us[NMODES];
	uint64_t nsamples[NMODES] = {0}, nlost[NMODES] = {0};
	for (int m = 0; m < NMODES; m++) {
		ratio[m] = calloc((size_t)rounds, sizeof(double));
		us[m] = calloc((size_t)rounds, sizeof(double));
	}
	for (long r = 0; r < rounds; r++) {
		double t[NMODES];
		uint64_t s[NMODES] = {0};
		for (int k = 0; k < NMODES; k++) {
			int m = (int)((k + r) % NMODES);
			long sig0 = signals;
			if (m != OFF)
				ioctl(c[m].fd, PERF_EVENT_IOC_ENABLE, 0);
			uint64_t a = thread_cpu_ns();
			for (long i = 0; i < per_round; i++)
				x = descend(DEPTH, x * 1e-9);
			uint64_t b = thread_cpu_ns();
			if (m != OFF)
				ioctl(c[m].fd, PERF_EVENT_IOC_DISABLE, 0);
			t[m] = (double)(b - a);
			if (m == SIGNAL)
				s[m] = (uint64_t)(signals - sig0);
			else if (m != OFF)
				drain(&c[m], &s[m], &nlost[m], m == STACK);
		}
		for (int m = IP; m < NMODES; m++) {
			ratio[m][r] = t[m] / t[OFF];
			us[m][r] = s[m] ? (t[m] - t[OFF]) / (double)s[m] / 1000.0 : 0;
			nsamples[m] += s[m];
		}
	}

	FILE *tsv = NULL;
	char path[4096];
	if (outdir) {
		mkdir(outdir, 0777);
		snprintf(path, sizeof path, "%s/sample_cost.tsv", outdir);
		tsv = fopen(path, "w");
		if (tsv)
			fprintf(tsv, "mode\thz\trounds\tratio_median\tratio_min\tratio_max\tsamples_per_round\tus_per_sample\tpct_at_hz\tlost\n");
	}
	printf("sample_cost: %ld Hz, %ld rounds of %ld ms, samples %d frames deep (x=%g)\n\n", hz, rounds, work_ms, DEPTH + 2, x);
	printf("| configuration | what the kernel does per sample | CPU ratio to off, median [min, max] | samples / round | us per sample | at %ld Hz |\n", hz);
	printf("|---|---|---|---|---|---|\n");
	for (int m = IP; m < NMODES; m++) {
		double lo = ratio[m][0], hi = ratio[m][0];
		for (long r = 0; r < rounds; r++) {
			lo = ratio[m][r] < lo ? ratio[m][r] : lo;
			hi = ratio[m][r] > hi ? ratio[m][r] : hi;
		}
		double med = median(ratio[m], (int)rounds), u = median(us[m], (int)rounds);
		double spr = (double)nsamples[m] / (double)rounds;
		char what[128];
		snprintf(what, sizeof what, mode_what[m], stack_bytes);
		printf("| %s | %s | %.4f [%.4f, %.4f] | %.1f | %.1f | %.2f %% |\n", mode_name[m], what, med, lo, hi, spr, u,
		       u * (double)hz / 1e4);
		if (tsv)
			fprintf(tsv, "%s\t%ld\t%ld\t%.5f\t%.5f\t%.5f\t%.1f\t%.2f\t%.3f\t%llu\n", mode_name[m], hz, rounds, med, lo, hi, spr, u,
				u * (double)hz / 1e4, (unsigned long long)nlost[m]);
		if (nlost[m])
			printf("  (%s: %llu samples lost: the ring filled)\n", mode_name[m], (unsigned long long)nlost[m]);
	}
	printf("\nus per sample: median over rounds of (round CPU - off round CPU) / samples; at HZ: that cost times the rate\n");
	if (dyn_samples)
		printf("stack: the kernel copied %.0f of the %u bytes asked for, on average (dyn_size; the copy ends at the top of the stack's mapping)\n",
		       (double)dyn_bytes / (double)dyn_samples, stack_bytes);
	if (tsv) {
		fclose(tsv);
		printf("wrote %s\n", path);
	}
	return 0;
}
#endif

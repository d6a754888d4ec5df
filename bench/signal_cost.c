/*
 * signal_cost.c - what the sampling signal itself costs on this machine, without fennec:
 * a perf_event task-clock counter on this thread raises a real-time signal every period
 * (as fennec's sampler does), the handler only counts. Rounds of fixed work alternate
 * with the counter disabled and enabled; prints the CPU-time ratio on/off and the cost
 * per signal. The floor under fennec's sampling overhead (bench/README.md, sampling).
 *
 * Usage: signal_cost [HZ [EXCLUDE_KERNEL]]   (default 999 Hz, kernel time counted)
 */
#include <fcntl.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

static volatile long signals;

static void on_signal(int sig, siginfo_t *si, void *uc)
{
	signals++;
}

static uint64_t cpu_ns(void)
{
	struct timespec t;
	clock_gettime(CLOCK_THREAD_CPUTIME_ID, &t);
	return (uint64_t)t.tv_sec * 1000000000u + (uint64_t)t.tv_nsec;
}

static __attribute__((noinline)) double work(double x)
{
	for (int i = 0; i < 1000; i++)
		x = x * 1.0000001 + 1e-9;
	return x;
}

int main(int argc, char **argv)
{
	long hz = argc > 1 ? atol(argv[1]) : 999;
	int excl = argc > 2 ? atoi(argv[2]) : 0;
	int sig = SIGRTMAX - 1;
	struct sigaction sa;
	memset(&sa, 0, sizeof sa);
	sa.sa_sigaction = on_signal;
	sa.sa_flags = SA_SIGINFO | SA_RESTART;
	sigaction(sig, &sa, NULL);
	struct perf_event_attr a;
	memset(&a, 0, sizeof a);
	a.type = PERF_TYPE_SOFTWARE;
	a.size = sizeof a;
	a.config = PERF_COUNT_SW_TASK_CLOCK;
	a.sample_period = (uint64_t)(1000000000 / (hz > 0 ? hz : 999));
	a.disabled = 1;
	a.exclude_kernel = (unsigned)excl;
	a.exclude_hv = 1;
	a.wakeup_events = 1;
	pid_t tid = (pid_t)syscall(SYS_gettid);
	int fd = (int)syscall(SYS_perf_event_open, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
	if (fd < 0 && !excl) {
		a.exclude_kernel = 1;
		fd = (int)syscall(SYS_perf_event_open, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
	}
	if (fd < 0) {
		perror("signal_cost: perf_event_open");
		return 2;
	}
	struct f_owner_ex o = {F_OWNER_TID, tid};
	fcntl(fd, F_SETFL, O_ASYNC);
	fcntl(fd, F_SETSIG, sig);
	fcntl(fd, F_SETOWN_EX, &o);
	double x = 0, on = 0, off = 0;
	for (int r = 0; r < 6; r++) {
		int enabled = r & 1;
		ioctl(fd, enabled ? PERF_EVENT_IOC_ENABLE : PERF_EVENT_IOC_DISABLE, 0);
		uint64_t t0 = cpu_ns();
		for (int k = 0; k < 300000; k++)
			x += work(x * 1e-9);
		double d = (double)(cpu_ns() - t0);
		if (enabled)
			on += d;
		else
			off += d;
	}
	printf("signal_cost: %ld Hz, kernel time %s: CPU on/off %.4f, %ld signals, %.1f us per signal (x=%g)\n", hz,
	       a.exclude_kernel ? "excluded" : "counted", on / off, signals, signals ? (on - off) / signals / 1000 : 0.0, x);
	return 0;
}

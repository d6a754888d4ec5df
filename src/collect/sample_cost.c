/*
 * sample_cost.c - what a sample costs the sampled thread, for the COST chunk
 * (docs/internals/collect.md, "The overhead budget"): the handler's ticks, and the
 * kernel's part of a sample, measured once per process.
 */
#include "collect/collect.h"

#include <signal.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "collect/sample.h" /* last: its short names are macros */

/* ---- what a sample costs the sampled thread (the COST chunk) ---- */

uint64_t col_sample_handler_ticks(void)
{
	return atomic_load_explicit(&P.handler_ticks, memory_order_relaxed);
}

static int cmp_u64(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Spin reading the clock for up to `spin_ns`: each gap of more than 1 us is the thread
 * taken off its code; the median of the gaps (at least 5) in ns, else 0. */
static uint64_t gap_median_ns(double ticks_per_ns, uint64_t spin_ns)
{
	uint64_t gaps[16], n = 0;
	uint64_t thresh = (uint64_t)(1000.0 * ticks_per_ns), prev = col_ticks();
	uint64_t end = prev + (uint64_t)((double)spin_ns * ticks_per_ns);
	while (n < 16) {
		uint64_t now = col_ticks();
		if (now - prev > thresh)
			gaps[n++] = now - prev;
		prev = now;
		if (now > end)
			break;
	}
	if (n < 5)
		return 0;
	qsort(gaps, n, sizeof *gaps, cmp_u64);
	return (uint64_t)((double)gaps[n / 2] / ticks_per_ns);
}

/*
 * The kernel's part of one sample on this machine, measured once per process (a fork
 * child inherits it): this thread spins for up to 3 ms while a source like the session's
 * interrupts it every 150 us (an interrupt of 20 us at 25 kHz would make the kernel lower
 * perf_event_max_sample_rate for everyone); each interruption shows as a gap in its clock
 * reads, whose median is the cost: the interrupt (under a hypervisor, its exit), the
 * kernel's sample and, for the ring source, the copy of this thread's (shallow) stack; for
 * the signal sources the delivery of a signal that the handler returns from at once. The
 * ring source measures with a counter of its own configuration; the signal sources with a
 * CLOCK_MONOTONIC timer (the CPU clocks fire at the scheduler's tick only). Called on the
 * flushing thread under the flush lock, not at a session's end; 0 when it cannot measure
 * (fewer than 5 gaps: preempted; asked again at the next flush, up to 3 times).
 */
uint64_t col_sample_kernel_ns(double ticks_per_ns)
{
	static uint64_t measured;
	static int tries; /* a spin preempted too often measures nothing: tried again, 3 times */
	if (measured || tries >= 3)
		return measured;
	if (P.mode == FMT_SAMPLE_OFF || !atomic_load(&P.active) || ticks_per_ns <= 0)
		return 0;
	tries++;
	if (P.source == FMT_SRC_RING) {
		col_pr_cfg c = P.prc;
		c.period_ns = 150000;
		c.pages = c.min_pages > 64 ? c.min_pages : 64; /* room for the samples of the spin */
		int was = col_mem_internal(1);
		col_pr *r = col_pr_open(0, &c, fd_high);
		if (r) {
			measured = gap_median_ns(ticks_per_ns, 3000000);
			col_pr_free(r);
		}
		col_mem_internal(was);
		return measured;
	}
	int sig = P.sig;
	if (!sig || !P.handler_installed)
		return 0;
	struct sigevent sev;
	memset(&sev, 0, sizeof sev);
	sev.sigev_notify = SIGEV_THREAD_ID;
	sev.sigev_signo = sig;
	sev.sigev_value.sival_ptr = (void *)(uintptr_t)SIG_MAGIC_CALIB;
	sev._sigev_un._tid = (pid_t)syscall(SYS_gettid);
	timer_t tm;
	if (timer_create(CLOCK_MONOTONIC, &sev, &tm) != 0)
		return 0;
	sigset_t one, old;
	sigemptyset(&one);
	sigaddset(&one, sig);
	pthread_sigmask(SIG_UNBLOCK, &one, &old);
	struct itimerspec its = {{0, 150000}, {0, 150000}};
	if (timer_settime(tm, 0, &its, NULL) == 0)
		measured = gap_median_ns(ticks_per_ns, 3000000);
	timer_delete(tm);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return measured;
}

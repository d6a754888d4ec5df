/*
 * sample.c - the sampling profiler inside the collector: a signal per sampling period on
 * each thread and a call stack taken in the handler; the choice of source, the threads
 * sampled and a session's start and stop. The wall sampler and the sleeping calls are
 * sample_wall.c, the writer's side (modules, thread names, the ring source's rings,
 * SAMPLES chunks) sample_drain.c, what a sample costs sample_cost.c; sample.h is what they
 * share. Design: docs/internals/collect.md, "Samples".
 *
 * Sources, best first:
 *   ring     a perf_event task-clock counter per thread whose samples (registers and a
 *            copy of the top of the stack) the kernel writes into a ring: no signal; the
 *            writer unwinds them (perfring.c), and the analysis takes their regions and
 *            step from the thread's events by time;
 *   perf     a perf_event task-clock counter per thread (hrtimer-based, any rate), whose
 *            overflow raises our signal on that thread (F_SETSIG + F_SETOWN_EX);
 *   timer    a POSIX timer on the thread's CPU-time clock (limited to the kernel tick);
 *   wall     a sampler thread that, every period, signals the threads that run or are
 *            blocked in a restartable system call, and records the others itself.
 * The handler does not allocate, lock or call anything that is not async-signal-safe
 * besides libunwind's local unwinder (documented as safe for this use; the handler's walk
 * is cfi.c's rules first, libunwind where they stop); it writes the
 * sample into one shared lock-free ring that the writer drains.
 */
#include "collect/cfi.h"
#include "collect/collect.h"
#include "collect/perfring.h"
#include "collect/pyframes.h"
#include "collect/ring.h"
#include "collect/sigchain.h"

#define UNW_LOCAL_ONLY
#include <dirent.h>
#include <dlfcn.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <libunwind.h>
#include <link.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/ioctl.h>
#include <sys/resource.h>
#include <sys/syscall.h>
#include <time.h>
#include <ucontext.h>
#include <unistd.h>

#include "collect/sample.h" /* last: its short names are macros */

#define RING_SIZE CM_SMALL(8u << 20, 64u << 10) /* shared sample ring, bytes (power of two) */
#define MAX_TIDS 16384

__thread blk *blk_tls;

struct col_sample_state P = {.lock = PTHREAD_MUTEX_INITIALIZER, .unwind_lock = PTHREAD_MUTEX_INITIALIZER, .sig = 0, .stride = 1};

/* ---- configuration ---- */

int col_sample_mode_parse(const char *s)
{
	if (!s || !*s)
		return -1;
	if (!strcmp(s, "off") || !strcmp(s, "0") || !strcmp(s, "none"))
		return FMT_SAMPLE_OFF;
	if (!strcmp(s, "cpu") || !strcmp(s, "1") || !strcmp(s, "on"))
		return FMT_SAMPLE_CPU;
	if (!strcmp(s, "wall"))
		return FMT_SAMPLE_WALL;
	return -1;
}

/* A real-time signal nobody uses: FENNEC_SIGNAL (P.want_sig), else the highest one from
 * SIGRTMAX-1 down whose disposition is the default and which this thread does not block.
 * A program that takes the same signal, before (FENNEC_SIGNAL) or after fennec, keeps it:
 * fennec's handler passes it the signals fennec did not send (sigchain.c). */
static int pick_signal(void)
{
	if (P.want_sig)
		return P.want_sig;
	sigset_t cur;
	pthread_sigmask(SIG_BLOCK, NULL, &cur);
	for (int s = SIGRTMAX - 1; s >= SIGRTMIN + 2; s--) {
		struct sigaction sa;
		if (col_sig_real(s, NULL, &sa) == 0 && sa.sa_handler == SIG_DFL && !(sa.sa_flags & SA_SIGINFO) &&
		    !sigismember(&cur, s))
			return s;
	}
	return 0;
}


/* Descriptors that ever raised the sampling signal (F_SETSIG): the signal tells them by
 * si_fd. Never cleared: a signal may still be queued after its counter is closed, and
 * passing it to the program could end it (SIG_DFL). */
#define SIGFD_MAX (1u << 20)
static _Atomic uint64_t sig_fds[SIGFD_MAX / 64];

static int sig_fd_ours(int fd)
{
	return fd >= 0 && (unsigned)fd < SIGFD_MAX &&
	       (atomic_load_explicit(&sig_fds[fd / 64], memory_order_relaxed) >> (fd % 64) & 1);
}

static int perf_open(pid_t tid, int exclude_kernel)
{
	struct perf_event_attr a;
	memset(&a, 0, sizeof a);
	a.type = PERF_TYPE_SOFTWARE;
	a.size = sizeof a;
	a.config = PERF_COUNT_SW_TASK_CLOCK;
	a.sample_period = P.period_ns * atomic_load_explicit(&P.stride, memory_order_relaxed);
	a.disabled = 1;
	a.exclude_kernel = (unsigned)exclude_kernel;
	a.exclude_hv = 1;
	a.wakeup_events = 1;
	return (int)syscall(SYS_perf_event_open, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

/*
 * The ring source's counter settings. The kernel copies FENNEC_STACK_COPY bytes of stack
 * per sample, by default STACK_PER_FRAME per frame of the depth limit and at least 8 KiB
 * (24 KiB for the default 256 frames; perf copies 8 KiB): frames of compiled code take 16 to 100 bytes,
 * so the copy rarely ends before the depth limit does (a few library frames are larger:
 * an ASan interceptor's took 4 KiB). The ring holds 64 samples or more (83 in 1 MiB
 * at 12 KiB: the writer unwinds it at least every half of that, col_sample_tick), at
 * least 8 when locked memory runs short (perfring.c).
 */
#if defined(__SANITIZE_ADDRESS__)
#define STACK_PER_FRAME 256 /* ASan's frames hold redzones: 176 bytes where 64 did */
#else
#define STACK_PER_FRAME 96
#endif

#define STACK_COPY_MIN 4096
#define STACK_COPY_MAX (60 * 1024) /* a sample is at most 64 KiB */

/* FENNEC_STACK_COPY's default for a depth limit. */
static uint32_t stack_copy_default(uint32_t depth)
{
	uint32_t bytes = STACK_PER_FRAME * depth;
	return bytes < 8192 ? 8192 : bytes > STACK_COPY_MAX ? STACK_COPY_MAX : bytes;
}

static void ring_config(void)
{
	P.prc.period_ns = P.period_ns;
	P.prc.stack_bytes = (P.stack_copy + 511) & ~511u;
	uint64_t rec_bytes = P.prc.stack_bytes + 256; /* header, registers, sizes */
	uint32_t pages = 1;
	while ((uint64_t)pages * 4096 < 64 * rec_bytes)
		pages *= 2;
	P.prc.pages = pages;
	P.prc.min_pages = 1;
	while ((uint64_t)P.prc.min_pages * 4096 < 8 * rec_bytes)
		P.prc.min_pages *= 2;
}

/* Kernel time too where allowed (root, or perf_event_paranoid < 2): a thread in a system
 * call is then sampled, at its user-space stack. Sets P.exclude_kernel. The probe maps the
 * smallest ring a thread may get: whether a ring can be had is all it asks, and the kernel
 * allocates and zeroes every page of a perf ring at mmap (a full ring here, 257 pages, was
 * a third of the cost of sampling a short process: every exec and fork child probes). */
static int probe_ring(void)
{
	ring_config();
	col_pr_cfg probe = P.prc;
	probe.pages = probe.min_pages;
	for (int ek = 0; ek < 2; ek++) {
		P.prc.exclude_kernel = probe.exclude_kernel = ek;
		col_pr *r = col_pr_open(0, &probe, fd_high); /* fd_high: see probe_signal */
		if (r) {
			col_pr_free(r);
			P.exclude_kernel = ek;
			return 0;
		}
	}
	return -1;
}

static int probe_signal(void)
{
	P.exclude_kernel = 0;
	int fd = perf_open(0, 0);
	if (fd < 0) {
		P.exclude_kernel = 1;
		fd = perf_open(0, 1);
	}
	if (fd < 0)
		return -1;
	/* Grow the fd table to where fd_high puts the per-thread fds now, while the process
	 * is most likely single-threaded: growing a table that threads share waits for an
	 * RCU grace period (10-20 ms here), which would otherwise delay the first thread
	 * sampled. */
	col_fd_close(fd_high(fd));
	return 0;
}

/* FENNEC_SAMPLE_SOURCE (P.want_source): ring (the default), signal (or perf: the counter's
 * signal), timer. Each falls back to the next when the kernel refuses it. */
static int pick_source(void)
{
	int timer = P.want_source == FMT_SRC_TIMER;
	int signal = P.want_source == FMT_SRC_PERF;
	if (!timer && !signal && probe_ring() == 0)
		return FMT_SRC_RING;
	if (!timer && P.sig && probe_signal() == 0)
		return FMT_SRC_PERF;
	return FMT_SRC_TIMER;
}

/*
 * FENNEC_SIGNAL, FENNEC_SAMPLE_SOURCE, FENNEC_STACK_COPY and FENNEC_CFI into P (and
 * perfring.c), read at every session's start, before its header is written: a value that
 * cannot be used is said in the header (col_config_warn()), whatever the mode (as
 * FENNEC_HZ is), and the default taken. `depth` is the session's limit (STACK_COPY's
 * default).
 */
static void sample_env(uint32_t depth)
{
	const char *e = getenv("FENNEC_SIGNAL");
	P.want_sig = 0;
	if (e && *e) {
		size_t n = strspn(e, "0123456789");
		int s = n && n < 4 && !e[n] ? atoi(e) : -1;
		if (s >= SIGRTMIN && s <= SIGRTMAX) {
			P.want_sig = s;
		} else {
			char what[96];
			snprintf(what, sizeof what, "expected a real-time signal number %d-%d; using a free one",
				 SIGRTMIN, SIGRTMAX);
			col_config_warn("FENNEC_SIGNAL", e, what);
		}
	}
	e = getenv("FENNEC_SAMPLE_SOURCE");
	/* A Python program's samples carry its Python frames, read on the sampled thread in
	 * the signal's handler: a source with a signal by default (docs/python.md). */
	P.want_source = col_py_on() ? FMT_SRC_PERF : FMT_SRC_RING;
	if (e && !strcmp(e, "timer"))
		P.want_source = FMT_SRC_TIMER;
	else if (e && (!strcmp(e, "signal") || !strcmp(e, "perf")))
		P.want_source = FMT_SRC_PERF;
	else if (e && *e && strcmp(e, "ring"))
		col_config_warn("FENNEC_SAMPLE_SOURCE", e, "expected one of ring, signal, perf, timer; using ring");
	P.stack_copy = (uint32_t)col_env_number("FENNEC_STACK_COPY", stack_copy_default(depth), STACK_COPY_MIN,
						STACK_COPY_MAX, "bytes");
	P.wall_delay_us = (uint32_t)col_env_number("FENNEC_TEST_WALL_DELAY_US", 0, 0, 1000000, "us");
	col_pr_env();
}

/*
 * Decide mode, rate and source before the header is written. Returns the mode in force
 * (off when sampling is impossible: no free signal, or no source).
 */
void col_sample_prepare(int mode, uint32_t hz, uint32_t depth, col_sample_info *info)
{
	memset(info, 0, sizeof *info);
	P.mode = FMT_SAMPLE_OFF;
	atomic_store_explicit(&P.stride, 1, memory_order_relaxed);
	P.nhist = 0;
	if (depth < 4)
		depth = 4;
	if (depth > COL_SAMPLE_MAX_DEPTH)
		depth = COL_SAMPLE_MAX_DEPTH;
	col_py_prepare();
	sample_env(depth);
	if (mode == FMT_SAMPLE_OFF)
		return;
	if (hz < 1)
		hz = 1;
	if (hz > 20000)
		hz = 20000;
	P.hz = hz;
	P.depth = depth;
	P.period_ns = 1000000000ull / hz;
	if (!P.handler_installed)
		P.sig = pick_signal();
	P.source = mode == FMT_SAMPLE_WALL ? FMT_SRC_WALL : pick_source();
	/* The ring source needs the signal only for threads whose ring the kernel refuses. */
	if (!P.sig && P.source != FMT_SRC_RING)
		return;
	P.mode = mode;
	info->mode = (unsigned)mode;
	info->source = (unsigned)P.source;
	info->period_ns = P.period_ns;
	info->hz = hz;
	info->depth = depth;
}

/* ---- the ring ---- */

/* Reserve, fill and publish one record. Async-signal-safe (atomics and memcpy only).
 * `ticks` 0: now. */
void ring_write_at(pid_t tid, unsigned flags, uint32_t weight, uint64_t ticks, uint64_t step,
		   const uint64_t *frames, uint32_t nf, const uint32_t *regions, uint32_t nr,
		   const uint64_t *py, uint32_t npy)
{
	uint32_t len = (uint32_t)((REC_HDR + 8 * nf + 8 * npy + 4 * nr + 7) & ~7u);
	uint64_t pos;
	if (col_ring_reserve(&P.ring, len, &pos) < 0) {
		atomic_fetch_add_explicit(&P.dropped, 1, memory_order_relaxed);
		return;
	}
	rec r = {0, (uint32_t)tid, ticks ? ticks : col_ticks(), step, (uint16_t)(weight < 65535 ? weight : 65535),
		 (uint16_t)flags, (uint16_t)nf, (uint16_t)nr, (uint16_t)npy, {0, 0, 0}};
	col_ring_put(&P.ring, pos + 4, (const uint8_t *)&r + 4, REC_HDR - 4);
	col_ring_put(&P.ring, pos + REC_HDR, frames, 8 * (size_t)nf);
	col_ring_put(&P.ring, pos + REC_HDR + 8 * (uint64_t)nf, py, 8 * (size_t)npy);
	col_ring_put(&P.ring, pos + REC_HDR + 8 * (uint64_t)(nf + npy), regions, 4 * (size_t)nr);
	col_ring_publish(&P.ring, pos, len);
	atomic_fetch_add_explicit(&P.taken, 1, memory_order_relaxed);
	if (flags & FMT_S_TRUNCATED)
		atomic_fetch_add_explicit(&P.truncated, 1, memory_order_relaxed);
}

/* ---- the handler ---- */

/* The thread's stack, for the handler's walk with cfi.c's rules (note_stack()): 0 until
 * known, and then the walk reads [sp, smp_stack_hi) when sp is in [smp_stack_lo, hi). */
static __thread uintptr_t smp_stack_lo, smp_stack_hi;
extern void *__libc_stack_end;

/* The loader's code (ld.so): a sample there may have interrupted it holding the lock that
 * libunwind's dl_iterate_phdr takes; the handler leaves libunwind out there. */
static uintptr_t ld_lo, ld_hi;

static int ld_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size, (void)arg;
	const char *b = strrchr(info->dlpi_name, '/');
	if (strncmp(b ? b + 1 : info->dlpi_name, "ld-linux", 8))
		return 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD)
			continue;
		uintptr_t a = info->dlpi_addr + ph->p_vaddr;
		if (!ld_lo || a < ld_lo)
			ld_lo = a;
		if (a + ph->p_memsz > ld_hi)
			ld_hi = a + ph->p_memsz;
	}
	return 1;
}

static void note_stack(void)
{
	if ((pid_t)syscall(SYS_gettid) == getpid()) {
		smp_stack_hi = (uintptr_t)__libc_stack_end;
		smp_stack_lo = smp_stack_hi > (64u << 20) ? smp_stack_hi - (64u << 20) : 0;
		return;
	}
	pthread_attr_t a;
	void *addr;
	size_t size;
	if (pthread_getattr_np(pthread_self(), &a) != 0)
		return;
	if (pthread_attr_getstack(&a, &addr, &size) == 0) {
		smp_stack_lo = (uintptr_t)addr;
		smp_stack_hi = (uintptr_t)addr + size;
	}
	pthread_attr_destroy(&a);
}

uint32_t col_region_stack(uint32_t *out, uint32_t max)
{
	col_thread *t = col_tls;
	if (!t || t->gen != atomic_load_explicit(&col_on, memory_order_relaxed))
		return 0;
	uint32_t d = t->depth < max ? t->depth : max;
	for (uint32_t i = 0; i < d; i++)
		out[i] = t->stack[i] & ~(COL_UNREC_GATED | COL_UNREC_DROPPED);
	return d;
}

static uint32_t region_stack(uint32_t *out)
{
	return col_region_stack(out, COL_MAX_DEPTH);
}


/*
 * Whether the interrupted thread stands at a system call the kernel is restarting after
 * a signal: its pc at a `syscall` instruction and its rax the call's number, as the
 * kernel leaves them (regs->ip -= 2, regs->ax = orig_ax) for a call interrupted by a
 * handler with SA_RESTART, and as a handler that was pending while another ran finds
 * them. A blocked thread that the wall sampler signalled for its stack is runnable for
 * a moment after; sampled then, it is seen running ('R') but is on its way back into the
 * same wait, and counts off-CPU. A thread that runs code does not stop at a `syscall`
 * with a blocking call's number in rax unless it is about to block there.
 */
static int at_restart(const void *ucv)
{
	const ucontext_t *uc = ucv;
	const uint8_t *pc = (const uint8_t *)uc->uc_mcontext.gregs[REG_RIP];
	long nr = (long)uc->uc_mcontext.gregs[REG_RAX];
	if (!pc || (uintptr_t)pc < 4096 || !restartable_nr(nr))
		return 0;
	return pc[0] == 0x0f && pc[1] == 0x05; /* the instruction is mapped: it is the pc */
}

/*
 * fennec's signals: the wall sampler's (SI_QUEUE), the CPU timers' (SI_TIMER), both with
 * SIG_MAGIC's value, and the counters' (POLL_IN, POLL_HUP from one of sig_fds). Any other
 * is the program's, which gets it as it asked (sigchain.c). Ours that come while no
 * session samples (queued before the stop) are dropped.
 */
static void on_signal(int sig, siginfo_t *si, void *ucv)
{
	int saved = errno;
	unsigned kind = FMT_S_CPU;
	uint32_t weight = 1;
	uint64_t value = (uint64_t)(uintptr_t)si->si_value.sival_ptr;
	if (si->si_code == SI_QUEUE && (value & ~1ull) == SIG_MAGIC) {
		kind = (unsigned)(value & 1);
	} else if (si->si_code == SI_TIMER && value == SIG_MAGIC_TIMER) {
		weight += si->si_overrun > 0 ? (uint32_t)si->si_overrun : 0;
	} else if (si->si_code == SI_TIMER && value == SIG_MAGIC_CALIB) {
		goto out;
	} else if (!((si->si_code == POLL_IN || si->si_code == POLL_HUP) && sig_fd_ours(si->si_fd))) {
		col_sig_forward(sig, si, ucv);
		goto out;
	}
	if (!atomic_load_explicit(&P.active, memory_order_acquire))
		goto out;
	weight *= atomic_load_explicit(&P.stride, memory_order_relaxed);
	uint64_t t0 = col_ticks();
	if (si->si_code == SI_QUEUE && kind == FMT_S_CPU && at_restart(ucv))
		kind = FMT_S_OFFCPU;
	/* Delivered as a sleeping-call wrapper lifts its mask (sig_block()): the sample fell
	 * due while the thread was in the call, or in fennec's code around it. It goes to the
	 * call (its function over the wrapper's caller; off-CPU in wall mode), never to
	 * pthread_sigmask, where 10-17 % of a sleeping program's wall-mode samples landed. */
	blk *mb = blk_tls;
	int in_call = mb && (atomic_load_explicit(&mb->mask_seq, memory_order_acquire) & 1);
	if (in_call && P.mode == FMT_SAMPLE_WALL)
		kind = FMT_S_OFFCPU;
	/* void * and uint64_t have the same size here: one buffer, shifted in place. */
	_Static_assert(sizeof(void *) == sizeof(uint64_t), "64-bit addresses");
	uint64_t frames[COL_SAMPLE_MAX_DEPTH + 16];
	ucontext_t *uc = ucv;
	uintptr_t pc = (uintptr_t)uc->uc_mcontext.gregs[REG_RIP];
#if COL_SANITIZE_THREAD
	/* TSan delivers signals late, from inside its runtime, whose frames libunwind cannot
	 * walk: under TSan a sample holds the interrupted pc only. */
	int n = 0;
#else
	/* cfi.c's rules from the interrupted registers where the thread's stack is known (a
	 * frame costs a cached lookup and a load; libunwind's step took a lock and two
	 * sigprocmask calls); libunwind where they cannot go on, except in the loader */
	int n = 0, full = 0;
	uintptr_t sp = (uintptr_t)uc->uc_mcontext.gregs[REG_RSP];
	if (smp_stack_hi && sp >= smp_stack_lo && sp < smp_stack_hi)
		n = (int)cfi_walk_regs(pc, sp, (uint64_t)uc->uc_mcontext.gregs[REG_RBP], smp_stack_hi, frames,
				       P.depth + 1, &full);
	if (!n && !(pc >= ld_lo && pc < ld_hi))
		n = unw_backtrace((void **)frames, (int)P.depth + 16);
#endif
	int from = -1;
	for (int i = 0; i < n && i < 16; i++)
		if (frames[i] == pc) {
			from = i;
			break;
		}
	uint32_t nf = 0;
	unsigned flags = kind;
	if (from >= 0) {
		flags |= FMT_S_EXACT_PC;
		for (int i = from; i < n && nf < P.depth; i++)
			frames[nf++] = frames[i];
		if (n - from > (int)P.depth || n == (int)P.depth + 16)
			flags |= FMT_S_TRUNCATED;
	} else {
		/* The unwinder did not get through the signal frame: keep the pc. */
		flags |= FMT_S_EXACT_PC | FMT_S_TRUNCATED;
		frames[nf++] = pc;
	}
	if (in_call) {
		uint64_t ret = (uintptr_t)mb->ret;
		uint32_t j = 1;
		while (j < nf && frames[j] != ret)
			j++;
		if (j < nf) { /* [fn, caller, ...]: the frames above the caller are fennec's and libc's mask */
			memmove(&frames[1], &frames[j], (nf - j) * sizeof *frames);
			nf -= j - 1;
		} else { /* the unwinder did not reach the caller: the call and where it was made */
			frames[1] = ret;
			nf = P.depth > 1 ? 2 : 1;
			flags |= FMT_S_TRUNCATED;
		}
		frames[0] = (uintptr_t)mb->fn;
	}
	uint32_t regions[COL_MAX_DEPTH];
	uint32_t nr = region_stack(regions);
	uint64_t py[COL_PY_MAX_FRAMES];
	uint32_t npy = col_py_walk(py, COL_PY_MAX_FRAMES, &flags);
	ring_write((pid_t)syscall(SYS_gettid), flags, weight, frames, nf, regions, nr, py, npy);
	uint64_t dt = col_ticks() - t0;
	if (dt < 500 * col_us_ticks) /* longer: the handler was preempted */
		atomic_fetch_add_explicit(&P.handler_ticks, dt, memory_order_relaxed);
out:
	errno = saved;
}

/* ---- per-thread sources ---- */

static tid_ent *tid_find(pid_t tid)
{
	for (uint32_t i = 0; i < P.ntids; i++)
		if (P.tids[i].tid == tid)
			return &P.tids[i];
	return NULL;
}

/* Room in P.retired for `need` rings: 0, or -1 when out of memory. */
static int retired_room(size_t need)
{
	if (need <= P.retired_cap)
		return 0;
	int was = col_mem_internal(1);
	size_t cap = P.retired_cap ? P.retired_cap : 16;
	while (cap < need)
		cap *= 2;
	col_pr **a = realloc(P.retired, cap * sizeof *a);
	col_mem_internal(was);
	if (!a)
		return -1;
	P.retired = a;
	P.retired_cap = cap;
	return 0;
}

/* A released thread's ring still holds its last samples: the next drain (rings_drain)
 * unwinds them, then frees it. Called with P.lock held. The room was made when the ring
 * was opened (tid_add()), so that the end of a session, which retires every ring,
 * allocates nothing: at _exit its caller may be a signal handler that interrupted the
 * allocator (a sanitizer's, in the ASan and TSan builds, whose allocator fennec's own
 * allocations use). */
static void ring_retire(col_pr *r)
{
	if (retired_room(P.nretired + 1) < 0) {
		col_pr_free(r); /* its last samples are lost, not its descriptor */
		P.fd_budget++;
		return;
	}
	P.retired[P.nretired++] = r;
}

static void tid_release(tid_ent *e)
{
	if (e->pr)
		ring_retire(e->pr);
	if (e->fd >= 0) {
		if (col_fd_marked(e->fd)) /* else the program's dup2 took the number */
			ioctl(e->fd, PERF_EVENT_IOC_DISABLE, 0);
		col_fd_close(e->fd);
		P.fd_budget++;
	}
	if (e->has_timer)
		timer_delete(e->timer);
	if (e->stat_fd >= 0) {
		col_fd_close(e->stat_fd);
		P.fd_budget++;
	}
	if (e->sys_fd >= 0) {
		col_fd_close(e->sys_fd);
		P.fd_budget++;
	}
	e->blk = NULL; /* its thread's, not the entry's */
	*e = P.tids[--P.ntids];
}

/* Move an fd out of the low numbers programs use (select() has FD_SETSIZE 1024), and keep
 * it from the program's closes (fdguard.c): closed with col_fd_close. */
int fd_high(int fd) { return col_fd_keep(fd); }

static int open_task_file(pid_t tid, const char *what)
{
	char path[64];
	snprintf(path, sizeof path, "/proc/self/task/%d/%s", (int)tid, what);
	return fd_high(open(path, O_RDONLY | O_CLOEXEC));
}

/* Whether thread `tid` blocks our signal (fennec's own threads block every signal). A
 * signal sent to it would stay queued, using up the user's real-time signal queue. */
static int blocks_signal(pid_t tid)
{
	/* A thread in a sleeping call blocks it for the call's time (sig_block()): that mask is
	 * fennec's. Refused for it, a thread that sleeps often went unsampled (a second at a
	 * time) at the scan that found it asleep. */
	blk *b = blk_of(tid);
	uint32_t s1 = b ? atomic_load_explicit(&b->mask_seq, memory_order_acquire) : 0;
	char path[64], buf[2048];
	snprintf(path, sizeof path, "/proc/self/task/%d/status", (int)tid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 1;
	ssize_t n = read(fd, buf, sizeof buf - 1);
	close(fd);
	if (n <= 0)
		return 1;
	buf[n] = 0;
	char *p = strstr(buf, "SigBlk:");
	if (!p)
		return 0;
	unsigned long long mask = strtoull(p + 7, NULL, 16);
	if (!((mask >> (P.sig - 1)) & 1))
		return 0;
	return !b || !((s1 & 1) || atomic_load_explicit(&b->mask_seq, memory_order_acquire) != s1);
}

/*
 * Before the first signal source starts: sleeping calls block the signal from now, and the
 * in-process unwinder, which the handler uses, is warmed outside a handler (its first use
 * allocates caches). The ring source unwinds in the writer and needs neither: warming at
 * every start took ~100 rt_sigprocmask calls (libunwind masks signals around its cache)
 * in every process, however short.
 */
static void signals_begin(void)
{
	atomic_store(&P.signalling, 1);
#if !COL_SANITIZE_THREAD
	static _Atomic int warmed;
	if (!atomic_exchange(&warmed, 1)) {
		void *warm[8];
		unw_backtrace(warm, 8);
	}
#endif
}


/* Start sampling thread `tid` of this process. Caller holds P.lock. */
static int blocked_last; /* the latest tid_add refused its thread for blocking our signal */

static void tid_add(pid_t tid)
{
	blocked_last = 0;
	if (tid_find(tid) || P.ntids >= MAX_TIDS)
		return;
	if (blocks_signal(tid)) {
		blocked_last = 1;
		return;
	}
	tid_ent e = {.tid = tid, .fd = -1, .stat_fd = -1, .sys_fd = -1, .seen = 1};
	if (P.source == FMT_SRC_RING && P.fd_budget > 0) {
		e.pr = col_pr_open(tid, &P.prc, fd_high);
		if (e.pr && retired_room(P.nretired + P.ntids + 1) < 0) { /* ring_retire() says why */
			col_pr_free(e.pr);
			e.pr = NULL;
		}
		if (e.pr) {
			uint64_t b = col_pr_bytes(e.pr), m = atomic_load_explicit(&P.ring_min_bytes, memory_order_relaxed);
			if (!m || b < m) /* under P.lock; the writer reads it (col_sample_quiet_ns) */
				atomic_store_explicit(&P.ring_min_bytes, b, memory_order_relaxed);
			P.fd_budget--;
			P.tids[P.ntids++] = e;
			return;
		}
	}
	if (!P.sig && P.source != FMT_SRC_WALL)
		return; /* the ring was refused and no signal is free for a fallback */
	signals_begin();
	if ((P.source == FMT_SRC_PERF || P.source == FMT_SRC_RING) && P.fd_budget > 0) {
		int fd = fd_high(perf_open(tid, P.exclude_kernel));
		if (fd >= 0 && (unsigned)fd >= SIGFD_MAX) {
			col_fd_close(fd); /* its signals could not be told from the program's */
			fd = -1;
		}
		if (fd >= 0) {
			struct f_owner_ex o = {F_OWNER_TID, tid};
			atomic_fetch_or_explicit(&sig_fds[fd / 64], 1ull << (fd % 64), memory_order_relaxed);
			if (fcntl(fd, F_SETFL, O_ASYNC) == 0 && fcntl(fd, F_SETSIG, P.sig) == 0 &&
			    fcntl(fd, F_SETOWN_EX, &o) == 0 && ioctl(fd, PERF_EVENT_IOC_RESET, 0) == 0 &&
			    ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) == 0) {
				e.fd = fd;
				P.fd_budget--;
			} else {
				col_fd_close(fd);
			}
		}
	}
	if (e.fd < 0 && P.source != FMT_SRC_WALL) {
		/* The thread's CPU-time clock, as pthread_getcpuclockid() builds it. */
		clockid_t clk = (clockid_t)((~(unsigned)tid << 3) | 6);
		struct sigevent sev;
		memset(&sev, 0, sizeof sev);
		sev.sigev_notify = SIGEV_THREAD_ID;
		sev.sigev_signo = P.sig;
		sev.sigev_value.sival_ptr = (void *)(uintptr_t)SIG_MAGIC_TIMER;
		sev._sigev_un._tid = tid;
		if (timer_create(clk, &sev, &e.timer) == 0) {
			struct itimerspec its;
			uint64_t per = P.period_ns * atomic_load_explicit(&P.stride, memory_order_relaxed);
			its.it_interval.tv_sec = (time_t)(per / 1000000000u);
			its.it_interval.tv_nsec = (long)(per % 1000000000u);
			its.it_value = its.it_interval;
			if (timer_settime(e.timer, 0, &its, NULL) == 0)
				e.has_timer = 1;
			else
				timer_delete(e.timer);
		}
	}
	if (P.source == FMT_SRC_WALL) {
		if (P.fd_budget < 2)
			return;
		e.stat_fd = open_task_file(tid, "stat");
		e.sys_fd = open_task_file(tid, "syscall");
		if (e.stat_fd < 0) {
			if (e.sys_fd >= 0)
				col_fd_close(e.sys_fd);
			return;
		}
		P.fd_budget -= 1 + (e.sys_fd >= 0);
		e.blk_gen = atomic_load_explicit(&P.blk_gen, memory_order_acquire);
		e.blk = blk_of(tid); /* a thread that slept in an earlier session, or before a release */
	} else if (e.fd < 0 && !e.has_timer) {
		return;
	}
	P.tids[P.ntids++] = e;
}

/* Add every thread of the process not known yet; forget the ones that ended. */
/* Every scan used to read the status of fennec's own threads (they block every signal,
 * so tid_add refuses them), at every flush: most of the writer's /proc reading. */
#define REFUSED_NS 1000000000ull

void scan_tasks(void)
{
	DIR *d = opendir("/proc/self/task");
	if (!d)
		return;
	for (uint32_t i = 0; i < P.ntids; i++)
		P.tids[i].seen = 0;
	uint64_t now = cm_mono_ns();
	struct refused kept[8];
	uint32_t nkept = 0;
	struct dirent *de;
	while ((de = readdir(d))) {
		if (de->d_name[0] < '0' || de->d_name[0] > '9')
			continue;
		pid_t tid = (pid_t)atoi(de->d_name);
		tid_ent *e = tid_find(tid);
		if (e) {
			e->seen = 1;
			continue;
		}
		uint32_t r = 0;
		while (r < P.nrefused && P.refused[r].tid != tid)
			r++;
		if (r < P.nrefused && now - P.refused[r].ns < REFUSED_NS) {
			if (nkept < 8)
				kept[nkept++] = P.refused[r]; /* refused lately: not again yet */
			continue;
		}
		tid_add(tid);
		if (!tid_find(tid) && nkept < 8 && blocked_last)
			kept[nkept++] = (struct refused){tid, now};
	}
	closedir(d);
	memcpy(P.refused, kept, nkept * sizeof *kept);
	P.nrefused = nkept;
	for (uint32_t i = 0; i < P.ntids;) {
		if (!P.tids[i].seen)
			tid_release(&P.tids[i]);
		else
			i++;
	}
}

void col_sample_thread_begin(void)
{
	if (P.mode == FMT_SAMPLE_OFF || !atomic_load_explicit(&P.active, memory_order_acquire))
		return;
	pthread_mutex_lock(&P.lock);
	if (atomic_load_explicit(&P.active, memory_order_acquire))
		tid_add((pid_t)syscall(SYS_gettid));
	pthread_mutex_unlock(&P.lock);
}

void col_sample_thread_end(void)
{
	if (P.mode == FMT_SAMPLE_OFF)
		return;
	pthread_mutex_lock(&P.lock);
	tid_ent *e = tid_find((pid_t)syscall(SYS_gettid));
	if (e)
		tid_release(e);
	pthread_mutex_unlock(&P.lock);
}

/* ---- start and stop ---- */

static void release_blocking(void);

void col_sample_start(void)
{
	static int atfork_done;
	if (!atfork_done) { /* with sampling off too: the module table's lock */
		pthread_atfork(unwind_lock_take, unwind_lock_drop, unwind_lock_drop);
		atfork_done = 1;
	}
	if (P.mode == FMT_SAMPLE_OFF)
		return;
	/* This session's sources say whether sleeping calls mask the signal: a wall session's
	 * signalling had made them mask it in every later session (and so the ring source's
	 * scans refused threads found asleep: no samples at all in a CPU session after one). */
	atomic_store(&P.signalling, 0);
	if (!ld_hi)
		dl_iterate_phdr(ld_cb, NULL);
	int was = col_mem_internal(1);
	note_stack(); /* the thread starting the session; others at their start (tramp_main) */
	col_mem_internal(was);
	if (col_ring_init(&P.ring, RING_SIZE) < 0) {
		P.mode = FMT_SAMPLE_OFF;
		return;
	}
	if (!P.handler_installed && P.sig) {
		struct sigaction sa;
		memset(&sa, 0, sizeof sa);
		sa.sa_sigaction = on_signal;
		sa.sa_flags = SA_SIGINFO | SA_RESTART;
		sigfillset(&sa.sa_mask);
		if (col_sig_own(P.sig, &sa) == 0)
			P.handler_installed = 1;
		else if (P.source == FMT_SRC_RING)
			P.sig = 0; /* rings only, no fallback */
		else {
			P.mode = FMT_SAMPLE_OFF;
			return;
		}
	}
	if (P.source != FMT_SRC_RING)
		signals_begin();
	/* Ring samples carry CLOCK_MONOTONIC times: a clock point to convert them to ticks
	 * (with the TSC) over a baseline that grows with the run. */
	P.cal_ticks = col_ticks();
	P.cal_mono = cm_mono_ns();
	struct rlimit rl;
	P.fd_budget = getrlimit(RLIMIT_NOFILE, &rl) == 0 && rl.rlim_cur != RLIM_INFINITY ? (int)(rl.rlim_cur / 4) : 1024;
	if (P.fd_budget > MAX_TIDS)
		P.fd_budget = MAX_TIDS;
	pthread_mutex_lock(&P.lock);
	if (!P.tids)
		P.tids = calloc(MAX_TIDS, sizeof *P.tids);
	atomic_store_explicit(&P.active, 1, memory_order_release);
	P.last_scan_ns = 0; /* the writer's first poll scans */
	/* This thread now, the others at the writer's first poll (the wall thread's first scan).
	 * In wall mode too: the wall thread is created below with every signal blocked here,
	 * and its first scan, a period later, found this thread still blocking the signal when
	 * this thread was slow to run again (ASan on a loaded machine): refused for a second,
	 * it went unsampled through a whole 0.4 s run. */
	if (P.tids)
		tid_add((pid_t)syscall(SYS_gettid));
	pthread_mutex_unlock(&P.lock);
	if (P.tids && P.mode == FMT_SAMPLE_WALL) {
		sigset_t all, old;
		sigfillset(&all);
		pthread_sigmask(SIG_SETMASK, &all, &old);
		atomic_store(&P.wall_stop, 0);
		P.wall_running = col_pthread_create_real(&P.wall_thread, wall_main, NULL) == 0;
		if (P.wall_delay_us) /* FENNEC_TEST_WALL_DELAY_US (tests only): a thread slow to run again */
			usleep(P.wall_delay_us);
		pthread_sigmask(SIG_SETMASK, &old, NULL);
	}
	if (!P.tids)
		atomic_store(&P.active, 0);
}

/* Called by the writer at each flush: pick up threads that did not go through
 * pthread_create (or existed before the session) and forget the ended ones that did not
 * either. At the first flush, then every SCAN_NS: threads made by pthread_create come and
 * go through its wrapper at once, and reading /proc/self/task at every flush (100 ms) was
 * a fifth of the writer's time on a busy single thread (perf record of work_calls). */
#define SCAN_NS 500000000ull

void col_sample_poll(void)
{
	if (P.mode == FMT_SAMPLE_OFF || !atomic_load(&P.active))
		return;
	pthread_mutex_lock(&P.lock);
	uint64_t now = cm_mono_ns();
	if (P.mode != FMT_SAMPLE_WALL && (!P.last_scan_ns || now - P.last_scan_ns >= SCAN_NS)) {
		scan_tasks();
		P.last_scan_ns = now;
	}
	if (atomic_load(&P.signalling))
		release_blocking();
	pthread_mutex_unlock(&P.lock);
}

/* A thread that blocked our signal after it was added lets samples queue up: when the
 * queue grows, stop sampling such threads (rings raise no signal). Caller holds P.lock. */
static void release_blocking(void)
{
	char buf[4096];
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	ssize_t n = fd >= 0 ? read(fd, buf, sizeof buf - 1) : -1;
	if (fd >= 0)
		close(fd);
	char *q = n > 0 ? (buf[n] = 0, strstr(buf, "SigQ:")) : NULL;
	if (q && strtoull(q + 5, NULL, 10) > 256) {
		for (uint32_t i = 0; i < P.ntids;) {
			if (!P.tids[i].pr && blocks_signal(P.tids[i].tid))
				tid_release(&P.tids[i]);
			else
				i++;
		}
	}
}

int col_sample_stop(const struct timespec *deadline)
{
	if (P.mode == FMT_SAMPLE_OFF)
		return 0;
	atomic_store_explicit(&P.active, 0, memory_order_release);
	if (P.wall_running) {
		atomic_store(&P.wall_stop, 1);
		if (deadline ? pthread_timedjoin_np(P.wall_thread, NULL, deadline) : pthread_join(P.wall_thread, NULL))
			return -1;
		P.wall_running = 0;
		P.wall_tid = 0;
	}
	if (deadline ? pthread_mutex_timedlock(&P.lock, deadline) : pthread_mutex_lock(&P.lock))
		return -1;
	while (P.ntids)
		tid_release(&P.tids[0]);
	pthread_mutex_unlock(&P.lock);
	/* The handler stays installed: a signal already queued must not kill the program
	 * with the default action of a real-time signal, nor reach a handler of the
	 * program's. It drops fennec's signals while inactive and passes on the others. */
	return 0;
}

/* In a fork child: the parent's events and threads are not ours; start afresh. */
void col_sample_atfork_child(void)
{
	atomic_store(&P.active, 0);
	col_py_atfork_child();
	pthread_mutex_init(&P.lock, NULL);
	for (uint32_t i = 0; i < P.ntids; i++) {
		col_pr_forget(P.tids[i].pr);
		if (P.tids[i].fd >= 0)
			col_fd_close(P.tids[i].fd);
		if (P.tids[i].stat_fd >= 0)
			col_fd_close(P.tids[i].stat_fd);
		if (P.tids[i].sys_fd >= 0)
			col_fd_close(P.tids[i].sys_fd);
	}
	P.ntids = 0;
	P.nrefused = 0;
	P.last_scan_ns = 0;
	for (blk *b = atomic_load(&P.blk_all); b; b = b->next) /* the other owners are not in the child */
		atomic_store(&b->owner, b == blk_tls ? (pid_t)syscall(SYS_gettid) : 0);
	atomic_store_explicit(&P.ring_min_bytes, 0, memory_order_relaxed);
	for (size_t i = 0; i < P.nretired; i++)
		col_pr_forget(P.retired[i]);
	P.nretired = 0;
	P.wall_running = 0;
	P.wall_tid = 0;
	col_ring_reset(&P.ring);
	atomic_store(&P.taken, 0);
	atomic_store(&P.dropped, 0);
	atomic_store(&P.truncated, 0);
	P.nnamed = 0; /* the module table starts over with the child's file (col_modules_reset) */
}

/* ---- threads created by the program ---- */

typedef struct tramp {
	void *(*fn)(void *);
	void *arg;
} tramp;

static void tramp_cleanup(void *unused)
{
	col_sample_thread_end();
}

static void *tramp_main(void *p)
{
	tramp t = *(tramp *)p;
	int was = col_mem_internal(1); /* fennec's own: the trampoline, the thread's perf ring */
	free(p);
	note_stack();
	col_sample_thread_begin();
	col_mem_internal(was);
	void *ret;
	pthread_cleanup_push(tramp_cleanup, NULL);
	ret = t.fn(t.arg);
	pthread_cleanup_pop(1);
	return ret;
}

typedef int (*pthread_create_fn)(pthread_t *, const pthread_attr_t *, void *(*)(void *), void *);

static pthread_create_fn real_create(void)
{
	static _Atomic(pthread_create_fn) real;
	pthread_create_fn f = atomic_load_explicit(&real, memory_order_acquire);
	if (!f) {
		f = (pthread_create_fn)dlsym(RTLD_NEXT, "pthread_create");
		atomic_store_explicit(&real, f, memory_order_release);
	}
	return f;
}

static __thread int creating_own; /* col_pthread_create_real() runs on this thread */

/*
 * fennec's own threads (writer, sampler) are never sampled: they block every signal and
 * are created here, not as the program's are (the wrapper below passes them on as they
 * come). A sanitizer's runtime must see them start: where the program links libfennec
 * (an API session) the runtime comes before it in the search order, so the next
 * pthread_create after libfennec is libc's, and under TSan the writer's first
 * instrumented function crashed (__tsan_func_entry <- writer_main). The runtime's
 * interceptor is then called by name; it calls the wrapper below, which passes it on.
 */
int col_pthread_create_real(pthread_t *th, void *(*fn)(void *), void *arg)
{
	static _Atomic(pthread_create_fn) san;
	static _Atomic int looked;
	if (!atomic_load_explicit(&looked, memory_order_acquire)) {
		pthread_create_fn f = (pthread_create_fn)dlsym(RTLD_DEFAULT, "__interceptor_pthread_create");
		atomic_store_explicit(&san, f, memory_order_relaxed);
		atomic_store_explicit(&looked, 1, memory_order_release);
	}
	pthread_create_fn real = atomic_load_explicit(&san, memory_order_relaxed);
	if (!real)
		real = real_create();
	if (!real)
		return EAGAIN;
	creating_own = 1;
	int rc = real(th, NULL, fn, arg);
	creating_own = 0;
	return rc;
}

/* New threads start sampling at once instead of at the writer's next scan. */
FENNEC_API int pthread_create(pthread_t *th, const pthread_attr_t *attr, void *(*fn)(void *), void *arg)
{
	pthread_create_fn real = real_create();
	if (!real)
		return EAGAIN;
	if (creating_own) /* fennec's own, through a sanitizer's interceptor */
		return real(th, attr, fn, arg);
	col_writer_needed(); /* a lazy session's writer starts before the program's first thread */
	if (P.mode == FMT_SAMPLE_OFF || !atomic_load_explicit(&P.active, memory_order_relaxed))
		return real(th, attr, fn, arg);
	int was = col_mem_internal(1); /* fennec's block, not the program's */
	tramp *t = malloc(sizeof *t);
	col_mem_internal(was);
	if (!t)
		return real(th, attr, fn, arg);
	t->fn = fn;
	t->arg = arg;
	int rc = real(th, attr, tramp_main, t);
	if (rc) {
		was = col_mem_internal(1);
		free(t);
		col_mem_internal(was);
	}
	return rc;
}

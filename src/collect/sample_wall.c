/*
 * sample_wall.c - wall-clock sampling and the sleeping calls (docs/internals/collect.md,
 * "Sleeping calls"; docs/sampling.md): the sampler thread that, every period, signals
 * the threads that run or are blocked in a restartable system call and records the
 * others itself, and the wrappers of the calls the kernel does not restart after a
 * handler, which block the sampling signal around the call and save the caller's stack.
 */
#include "collect/collect.h"
#include "collect/pyframes.h"

#define UNW_LOCAL_ONLY
#include <dlfcn.h>
#include <errno.h>
#include <libunwind.h>
#include <poll.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/epoll.h>
#include <sys/msg.h>
#include <sys/prctl.h>
#include <sys/select.h>
#include <sys/sem.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "collect/sample.h" /* last: its short names are macros */

/* ---- wall mode ---- */

/*
 * System calls that a signal handler installed with SA_RESTART does not disturb: the
 * kernel restarts them (signal(7)). Sleeps, poll/select/epoll and timed waits are not
 * among them, so threads blocked there are not signalled: the sampler records them
 * with the stack it can see (the system call's address), marked truncated. (The list:
 * restartable_nr in sample.h, which the sampling handler uses too.)
 */
static int restartable(long nr, long arg0)
{
	if (!restartable_nr(nr))
		return 0;
	if (nr == SYS_read || nr == SYS_write || nr == SYS_readv || nr == SYS_writev || nr == SYS_pread64 ||
	    nr == SYS_pwrite64) {
		/* Sockets with SO_RCVTIMEO/SO_SNDTIMEO fail with EINTR instead. */
		struct stat st;
		return arg0 >= 0 && fstat((int)arg0, &st) == 0 && !S_ISSOCK(st.st_mode);
	}
	return 1;
}

static int task_state(tid_ent *e, char *state, long *nr, long *arg0, uint64_t *pc)
{
	char buf[512];
	ssize_t n = pread(e->stat_fd, buf, sizeof buf - 1, 0);
	if (n <= 0)
		return -1;
	buf[n] = 0;
	char *p = strrchr(buf, ')');
	if (!p || p[1] != ' ')
		return -1;
	*state = p[2];
	*nr = -1;
	*arg0 = -1;
	*pc = 0;
	if (*state != 'R' && e->sys_fd >= 0) {
		n = pread(e->sys_fd, buf, sizeof buf - 1, 0);
		if (n > 0) {
			buf[n] = 0;
			unsigned long long a[8] = {0};
			long sn = -1;
			int k = sscanf(buf, "%ld %llx %llx %llx %llx %llx %llx %llx %llx", &sn, &a[0], &a[1], &a[2], &a[3],
				       &a[4], &a[5], &a[6], &a[7]);
			*nr = sn;
			if (k >= 2)
				*arg0 = (long)a[0];
			if (k == 9)
				*pc = a[7];
		}
	}
	return 0;
}

/* Record thread e's stack saved at the entry of the sleeping call it is in, if any. */
static int blk_sample(tid_ent *e)
{
	uint32_t gen = atomic_load_explicit(&P.blk_gen, memory_order_acquire);
	if (!e->blk && e->blk_gen != gen) { /* it took a block since it was last looked for */
		e->blk_gen = gen;
		e->blk = blk_of(e->tid);
	}
	blk *b = e->blk;
	if (!b)
		return 0;
	uint32_t s1 = atomic_load_explicit(&b->seq, memory_order_acquire);
	if (!(s1 & 1))
		return 0;
	uint64_t f[BLK_FRAMES], py[BLK_PY];
	uint32_t r[BLK_REGIONS];
	/* Acquire loads keep the check of seq below after them (a plain load on x86-64), as an
	 * acquire fence before it would; TSan understands these and not a fence. */
	uint32_t nf = __atomic_load_n(&b->nf, __ATOMIC_ACQUIRE), nr = __atomic_load_n(&b->nr, __ATOMIC_ACQUIRE);
	uint32_t npy = __atomic_load_n(&b->npy, __ATOMIC_ACQUIRE), pyflags = __atomic_load_n(&b->pyflags, __ATOMIC_ACQUIRE);
	if (nf > BLK_FRAMES || nr > BLK_REGIONS || npy > BLK_PY)
		return 0;
	for (uint32_t i = 0; i < nf; i++)
		f[i] = __atomic_load_n(&b->frames[i], __ATOMIC_ACQUIRE);
	for (uint32_t i = 0; i < nr; i++)
		r[i] = __atomic_load_n(&b->regions[i], __ATOMIC_ACQUIRE);
	for (uint32_t i = 0; i < npy; i++)
		py[i] = __atomic_load_n(&b->py[i], __ATOMIC_ACQUIRE);
	if (atomic_load_explicit(&b->seq, memory_order_relaxed) != s1)
		return 0; /* it returned meanwhile */
	ring_write(e->tid, FMT_S_OFFCPU | FMT_S_EXACT_PC | (nf == BLK_FRAMES ? FMT_S_TRUNCATED : 0) | pyflags,
		   atomic_load_explicit(&P.stride, memory_order_relaxed), f, nf,
		   r, nr, py, npy);
	return 1;
}

static __thread int in_sampler; /* fennec's sampler thread: its own sleeps are not recorded */

void *wall_main(void *arg)
{
	in_sampler = 1;
	prctl(PR_SET_NAME, "fennec-sampler");
	col_mem_internal(1);
	P.wall_tid = (pid_t)syscall(SYS_gettid);
	pid_t pid = getpid();
	uint64_t next = cm_mono_ns(), rnd = next | 1;
	while (!atomic_load_explicit(&P.wall_stop, memory_order_acquire)) {
		uint32_t k = atomic_load_explicit(&P.stride, memory_order_relaxed);
		uint64_t per = P.period_ns * k;
		if (k > 1) {
			/* The budget's longer periods (10-100 ms) lock step with a program's periodic
			 * sleeps: 99.8 ms against offcpu's 100 ms cycles put 23 % of the samples where
			 * it computes 40 % of the time. Intervals drawn from [per/2, 3 per/2) keep the
			 * mean, so each sample still weighs k, and sample every phase alike. */
			rnd ^= rnd << 13, rnd ^= rnd >> 7, rnd ^= rnd << 17;
			next += per / 2 + rnd % per;
		} else {
			next += per;
		}
		uint64_t now = cm_mono_ns();
		if (next > now) {
			struct timespec ts = {(time_t)(next / 1000000000u), (long)(next % 1000000000u)};
			while (clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME, &ts, NULL) == EINTR)
				;
		} else if (now - next >= per) {
			/* A period or more behind (a slow scan of the tasks, a stopped or overloaded
			 * machine): the missed periods go unsampled. Catching up would take them
			 * back to back, in microseconds, and give them all to what each thread is
			 * doing now: ASan's slow first scan put 20 ms of start-up into wait_batch. */
			next = now;
		}
		pthread_mutex_lock(&P.lock);
		if (now - P.last_scan_ns > 100000000u) {
			scan_tasks();
			P.last_scan_ns = now;
		}
		for (uint32_t i = 0; i < P.ntids; i++) {
			tid_ent *e = &P.tids[i];
			char st;
			long nr, a0;
			uint64_t pc;
			if (task_state(e, &st, &nr, &a0, &pc) < 0)
				continue;
			int off = st != 'R';
			if (!off || restartable(nr, a0)) {
				siginfo_t si;
				memset(&si, 0, sizeof si);
				si.si_signo = P.sig;
				si.si_code = SI_QUEUE;
				si.si_pid = pid;
				si.si_uid = getuid();
				si.si_value.sival_ptr = (void *)(uintptr_t)(SIG_MAGIC | (unsigned)off);
				if (syscall(SYS_rt_tgsigqueueinfo, pid, e->tid, P.sig, &si) == 0)
					continue;
			}
			if (off && !blk_sample(e)) {
				uint64_t f[1] = {pc};
				ring_write(e->tid, FMT_S_OFFCPU | FMT_S_EXACT_PC | FMT_S_TRUNCATED, 1, f, pc ? 1 : 0, NULL, 0, NULL, 0);
			}
		}
		pthread_mutex_unlock(&P.lock);
	}
	return arg;
}

/* ---- sleeping calls (wall mode) ---- */

static pthread_key_t blk_key;
static pthread_once_t blk_once = PTHREAD_ONCE_INIT;
static int blk_key_ok;

/* The key's destructor: thread `p`'s block is free for another thread. A later destructor
 * that sleeps takes a block again, and the key's value brings this destructor back. */
static void blk_gone(void *p)
{
	blk *b = p;
	blk_tls = NULL;
	pthread_mutex_lock(&P.lock);
	for (uint32_t i = 0; i < P.ntids; i++)
		if (P.tids[i].blk == b)
			P.tids[i].blk = NULL;
	atomic_store_explicit(&b->owner, 0, memory_order_release);
	pthread_mutex_unlock(&P.lock);
}

static void blk_key_make(void)
{
	blk_key_ok = pthread_key_create(&blk_key, blk_gone) == 0;
}

/* A block for this thread: a free block, else a new one. NULL when out of memory or keys.
 * Its tid entry finds it (blk_of) when it is added, or at its next off-CPU sample. */
static blk *blk_take(void)
{
	pthread_once(&blk_once, blk_key_make);
	if (!blk_key_ok)
		return NULL; /* no destructor: every thread would keep a block for good */
	pid_t tid = (pid_t)syscall(SYS_gettid);
	blk *b = atomic_load_explicit(&P.blk_all, memory_order_acquire);
	for (; b; b = b->next) {
		pid_t none = 0;
		if (atomic_compare_exchange_strong(&b->owner, &none, tid))
			break;
	}
	int was = col_mem_internal(1); /* fennec's own blocks, not the program's */
	if (!b && (b = calloc(1, sizeof *b))) {
		atomic_store_explicit(&b->owner, tid, memory_order_relaxed);
		b->next = atomic_load_explicit(&P.blk_all, memory_order_relaxed);
		while (!atomic_compare_exchange_weak_explicit(&P.blk_all, &b->next, b, memory_order_release,
							      memory_order_relaxed))
			;
	}
	if (b) {
		blk_tls = b;
		pthread_setspecific(blk_key, b);
		atomic_fetch_add_explicit(&P.blk_gen, 1, memory_order_release);
	}
	col_mem_internal(was);
	return b;
}

/* Save the caller's stack before a call the sampler must not interrupt. Returns the block
 * to close with blk_leave(), or NULL when nothing was saved. `fn` is the real function:
 * it becomes the innermost frame. */
static __attribute__((noinline)) blk *blk_enter(void *fn)
{
	if (P.mode != FMT_SAMPLE_WALL || in_sampler || !atomic_load_explicit(&P.active, memory_order_relaxed))
		return NULL;
	blk *b = blk_tls;
	if (!b && !(b = blk_take()))
		return NULL;
	uint64_t f[BLK_FRAMES + 2];
#if COL_SANITIZE_THREAD
	int n = 0; /* as in the handler: under TSan libunwind crashes at thread exit */
#else
	int n = unw_backtrace((void **)f, BLK_FRAMES + 1); /* [blk_enter, the wrapper, caller...] */
#endif
	/* Relaxed atomic stores: the sampler thread reads these under the sequence lock. */
	uint32_t nf = 0, r[BLK_REGIONS];
	__atomic_store_n(&b->frames[nf++], (uintptr_t)fn, __ATOMIC_RELAXED);
	for (int i = 2; i < n && nf < BLK_FRAMES; i++)
		__atomic_store_n(&b->frames[nf++], f[i], __ATOMIC_RELAXED);
	uint32_t nr = col_region_stack(r, BLK_REGIONS);
	for (uint32_t i = 0; i < nr; i++)
		__atomic_store_n(&b->regions[i], r[i], __ATOMIC_RELAXED);
	uint64_t py[BLK_PY];
	unsigned pyflags = 0;
	uint32_t npy = col_py_walk_here(py, BLK_PY, &pyflags);
	for (uint32_t i = 0; i < npy; i++)
		__atomic_store_n(&b->py[i], py[i], __ATOMIC_RELAXED);
	__atomic_store_n(&b->nf, nf, __ATOMIC_RELAXED);
	__atomic_store_n(&b->nr, nr, __ATOMIC_RELAXED);
	__atomic_store_n(&b->npy, npy, __ATOMIC_RELAXED);
	__atomic_store_n(&b->pyflags, pyflags, __ATOMIC_RELAXED);
	atomic_store_explicit(&b->seq, atomic_load_explicit(&b->seq, memory_order_relaxed) + 1, memory_order_release);
	return b;
}

static inline void blk_leave(blk *b)
{
	if (b)
		atomic_store_explicit(&b->seq, atomic_load_explicit(&b->seq, memory_order_relaxed) + 1, memory_order_release);
}

/* The next definition of `name`, looked up once (atomically: threads may race to it). */
#define NEXT_SYM(var, name) \
	static _Atomic(__typeof__(name) *) var##_; \
	__typeof__(name) *var = atomic_load_explicit(&var##_, memory_order_relaxed); \
	if (!var) { \
		var = (__typeof__(name) *)dlsym(RTLD_NEXT, #name); \
		atomic_store_explicit(&var##_, var, memory_order_relaxed); \
	}

#define REAL(name) \
	NEXT_SYM(real_##name, name) \
	if (!real_##name) { \
		errno = ENOSYS; \
		return -1; \
	}

/*
 * These calls are never restarted after a signal handler ran (signal(7)): a sample taken
 * while the thread is on its way into one (a CPU-time overflow in the system call's entry,
 * a wall-mode signal sent while it still ran) would make it fail with EINTR. So the
 * sampling signal is blocked for the duration of the call; a sample that comes meanwhile
 * is delivered when it returns. The program's own signals interrupt it as before. The
 * thread's block says so meanwhile (mask_seq odd, with the call's function and its
 * caller), so that such a sample is put in the call and the mask is not taken for the
 * program's. Returns the block to close with sig_unblock() (*bp NULL when it has none),
 * 0 when nothing was masked.
 */
static int sig_block(sigset_t *old, blk **bp, void *fn, void *ret)
{
	*bp = NULL;
	if (P.mode == FMT_SAMPLE_OFF || !P.handler_installed || !atomic_load_explicit(&P.signalling, memory_order_relaxed))
		return 0;
	blk *b = blk_tls;
	if (!b)
		b = blk_take();
	if (b) {
		b->fn = fn;
		b->ret = ret;
		atomic_store_explicit(&b->mask_seq, atomic_load_explicit(&b->mask_seq, memory_order_relaxed) + 1,
				      memory_order_release);
	}
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, P.sig);
	if (pthread_sigmask(SIG_BLOCK, &s, old)) {
		if (b)
			atomic_store_explicit(&b->mask_seq, atomic_load_explicit(&b->mask_seq, memory_order_relaxed) + 1,
					      memory_order_release);
		return 0;
	}
	*bp = b;
	return 1;
}

static void sig_unblock(const sigset_t *old, blk *b)
{
	pthread_sigmask(SIG_SETMASK, old, NULL); /* a sample due meanwhile is taken here */
	if (b)
		atomic_store_explicit(&b->mask_seq, atomic_load_explicit(&b->mask_seq, memory_order_relaxed) + 1,
				      memory_order_release);
}

/* For calls that install a signal mask themselves: that mask, plus the sampling signal. */
static const sigset_t *with_sig(const sigset_t *mask, sigset_t *copy)
{
	if (!mask || P.mode == FMT_SAMPLE_OFF || !P.handler_installed ||
	    !atomic_load_explicit(&P.signalling, memory_order_relaxed))
		return mask;
	*copy = *mask;
	sigaddset(copy, P.sig);
	return copy;
}

#define BLOCKING(call, fn, may_sleep) \
	do { \
		int saved_errno, sleeps_ = (may_sleep); \
		sigset_t old_; \
		blk *m_; \
		int masked_ = sleeps_ && sig_block(&old_, &m_, (void *)(fn), __builtin_return_address(0)); \
		blk *b_ = sleeps_ ? blk_enter((void *)(fn)) : NULL; \
		__typeof__(call) r_ = (call); \
		saved_errno = errno; \
		blk_leave(b_); \
		if (masked_) \
			sig_unblock(&old_, m_); \
		errno = saved_errno; \
		return r_; \
	} while (0)

FENNEC_API int nanosleep(const struct timespec *req, struct timespec *rem)
{
	REAL(nanosleep);
	BLOCKING(real_nanosleep(req, rem), real_nanosleep, 1);
}

FENNEC_API int clock_nanosleep(clockid_t clk, int flags, const struct timespec *req, struct timespec *rem)
{
	NEXT_SYM(real, clock_nanosleep)
	if (!real)
		return ENOSYS; /* returns the error, not -1 */
	BLOCKING(real(clk, flags, req, rem), real, 1);
}

FENNEC_API int usleep(useconds_t us)
{
	REAL(usleep);
	BLOCKING(real_usleep(us), real_usleep, us > 0);
}

FENNEC_API unsigned int sleep(unsigned int sec)
{
	NEXT_SYM(real, sleep)
	if (!real)
		return sec;
	BLOCKING(real(sec), real, sec > 0);
}

FENNEC_API int poll(struct pollfd *fds, nfds_t n, int timeout)
{
	REAL(poll);
	BLOCKING(real_poll(fds, n, timeout), real_poll, timeout != 0);
}

FENNEC_API int ppoll(struct pollfd *fds, nfds_t n, const struct timespec *ts, const sigset_t *mask)
{
	REAL(ppoll);
	sigset_t copy;
	const sigset_t *m = with_sig(mask, &copy);
	BLOCKING(real_ppoll(fds, n, ts, m), real_ppoll, !ts || ts->tv_sec || ts->tv_nsec);
}

FENNEC_API int select(int n, fd_set *r, fd_set *w, fd_set *x, struct timeval *tv)
{
	REAL(select);
	BLOCKING(real_select(n, r, w, x, tv), real_select, !tv || tv->tv_sec || tv->tv_usec);
}

FENNEC_API int pselect(int n, fd_set *r, fd_set *w, fd_set *x, const struct timespec *ts, const sigset_t *mask)
{
	REAL(pselect);
	sigset_t copy;
	const sigset_t *m = with_sig(mask, &copy);
	BLOCKING(real_pselect(n, r, w, x, ts, m), real_pselect, !ts || ts->tv_sec || ts->tv_nsec);
}

FENNEC_API int epoll_wait(int fd, struct epoll_event *ev, int n, int timeout)
{
	REAL(epoll_wait);
	BLOCKING(real_epoll_wait(fd, ev, n, timeout), real_epoll_wait, timeout != 0);
}

FENNEC_API int epoll_pwait(int fd, struct epoll_event *ev, int n, int timeout, const sigset_t *mask)
{
	REAL(epoll_pwait);
	sigset_t copy;
	const sigset_t *m = with_sig(mask, &copy);
	BLOCKING(real_epoll_pwait(fd, ev, n, timeout, m), real_epoll_pwait, timeout != 0);
}

FENNEC_API int sigsuspend(const sigset_t *mask)
{
	REAL(sigsuspend);
	sigset_t copy;
	const sigset_t *m = with_sig(mask, &copy);
	BLOCKING(real_sigsuspend(m), real_sigsuspend, 1);
}

FENNEC_API int pause(void)
{
	REAL(pause);
	BLOCKING(real_pause(), real_pause, 1);
}

FENNEC_API int sigtimedwait(const sigset_t *set, siginfo_t *info, const struct timespec *ts)
{
	REAL(sigtimedwait);
	BLOCKING(real_sigtimedwait(set, info, ts), real_sigtimedwait, !ts || ts->tv_sec || ts->tv_nsec);
}

FENNEC_API int sigwaitinfo(const sigset_t *set, siginfo_t *info)
{
	REAL(sigwaitinfo);
	BLOCKING(real_sigwaitinfo(set, info), real_sigwaitinfo, 1);
}

FENNEC_API int semop(int id, struct sembuf *ops, size_t n)
{
	REAL(semop);
	BLOCKING(real_semop(id, ops, n), real_semop, 1);
}

FENNEC_API int semtimedop(int id, struct sembuf *ops, size_t n, const struct timespec *ts)
{
	REAL(semtimedop);
	BLOCKING(real_semtimedop(id, ops, n, ts), real_semtimedop, 1);
}

FENNEC_API ssize_t msgrcv(int id, void *msg, size_t size, long type, int flags)
{
	REAL(msgrcv);
	BLOCKING(real_msgrcv(id, msg, size, type, flags), real_msgrcv, !(flags & IPC_NOWAIT));
}

FENNEC_API int msgsnd(int id, const void *msg, size_t size, int flags)
{
	REAL(msgsnd);
	BLOCKING(real_msgsnd(id, msg, size, flags), real_msgsnd, !(flags & IPC_NOWAIT));
}

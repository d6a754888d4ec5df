/*
 * sample.h - what the sampling profiler's files share (docs/internals/collect.md,
 * "Samples"): the state P, the shared ring's record, the tid table, the sleeping calls'
 * blocks and the calls each file makes into another. The files: sample.c (the sources,
 * the signal handler, the threads sampled, a session's start and stop), sample_wall.c
 * (the wall sampler and the sleeping-call wrappers), sample_drain.c (the writer's side:
 * modules, thread names, the ring source's rings, SAMPLES) and sample_cost.c (what a
 * sample costs, for COST). Only they include it.
 */
#ifndef FENNEC_COLLECT_SAMPLE_H
#define FENNEC_COLLECT_SAMPLE_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <sys/types.h>
#include <time.h>

#include "collect/collect.h"
#include "collect/perfring.h"
#include "collect/ring.h"

/* The short names the sampling files use for what they share. The symbols are prefixed:
 * hidden from libfennec.so's dynamic table (-fvisibility=hidden, and the pragma below for
 * the declarations), but a program that links libfennec.a sees them beside its own. Being
 * macros, they would rename what a header included after this one declares: include it
 * last. */
#define P col_sample
#define blk_tls col_sample_blk_tls
#define ring_write_at col_sample_ring_write_at
#define fd_high col_sample_fd_high
#define scan_tasks col_sample_scan_tasks
#define wall_main col_sample_wall_main
#define unwind_lock_take col_sample_unwind_lock_take
#define unwind_lock_drop col_sample_unwind_lock_drop

#pragma GCC visibility push(hidden)

#if defined(__SANITIZE_THREAD__)
#define COL_SANITIZE_THREAD 1
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define COL_SANITIZE_THREAD 1
#endif
#endif
#ifndef COL_SANITIZE_THREAD
#define COL_SANITIZE_THREAD 0
#endif

#define REC_HDR 40               /* record header bytes */
/* The value fennec's own signals carry (si_value): the wall sampler's (| 1 for a thread
 * seen blocked) and the CPU timers' (| 2). The program's signals on the same number go
 * to its own disposition (sigchain.c): 62 bits make a program's value that looks like
 * ours as good as impossible. */
#define SIG_MAGIC 0x66656e6e65630000ull
#define SIG_MAGIC_TIMER (SIG_MAGIC | 2)
#define SIG_MAGIC_CALIB (SIG_MAGIC | 4) /* col_sample_kernel_ns()'s timer: the handler returns */

/* One sample as it sits in the ring (host byte order), followed by frames, Python frames
 * (fmt_pyframe values) and regions. */
typedef struct rec {
	uint32_t len;      /* whole record, a multiple of 8; COL_RING_READY once complete */
	uint32_t tid;
	uint64_t ticks;
	uint64_t step;
	uint16_t weight;
	uint16_t flags;
	uint16_t nframes;
	uint16_t nregions;
	uint16_t npy;
	uint16_t pad[3];
} rec;
_Static_assert(sizeof(rec) == REC_HDR, "record header");

/* Wall mode: the stack of a thread at the entry of a sleeping call (nanosleep, poll, ...),
 * which the sampler may not interrupt. A sequence lock: odd while the thread is inside
 * the call and the stack is valid. A block belongs to its thread (blk_tls) from the
 * thread's first sleeping call until it exits, across sessions; it is never freed, only
 * handed to another thread after its owner's exit (blk_gone()). A tid entry of a session
 * borrows it (tid_ent.blk). Until 2026-12 the entry owned it: a session's stop, or a
 * release of a thread that blocks the signal, freed it while the thread's blk_tls still
 * pointed at it, and its next sleeping call wrote into fennec's freed memory. */
#define BLK_FRAMES 64
#define BLK_REGIONS 32
#define BLK_PY 64
typedef struct blk {
	_Atomic uint32_t seq;
	uint32_t nf, nr, npy, pyflags;
	uint64_t frames[BLK_FRAMES];
	uint32_t regions[BLK_REGIONS];
	uint64_t py[BLK_PY];  /* the thread's Python frames at the call (pyframes.c) */
	_Atomic pid_t owner; /* the thread whose blk_tls it is, 0 when free (claimed with a CAS) */
	struct blk *next;  /* every block made (P.blk_all), set before it is pushed there */
	/* Odd while a sleeping-call wrapper has the sampling signal blocked (sig_block()), any
	 * sampling mode: the mask is fennec's, not the program's (blocks_signal()), and a
	 * sample delivered when it is lifted was taken in the call (on_signal()). */
	_Atomic uint32_t mask_seq;
	void *fn, *ret;    /* the owner's: the call's real function and the wrapper's return address */
} blk;
extern __thread blk *blk_tls; /* sample.c */

typedef struct tid_ent {
	pid_t tid;
	blk *blk;          /* wall mode, once the thread made a sleeping call (its, lent) */
	uint32_t blk_gen;  /* P.blk_gen when blk was last looked for */
	col_pr *pr;        /* ring source */
	int fd;            /* perf event raising the signal, -1 if none */
	timer_t timer;
	int has_timer;
	int stat_fd, sys_fd; /* wall mode: /proc/self/task/<tid>/{stat,syscall} */
	int seen;          /* scan mark */
} tid_ent;

struct col_sample_state {
	/* Atomic, as the handler and the wrappers of every thread read them at any time while
	 * a session's start (col_sample_prepare()) writes them: a thread that sleeps while the
	 * next API session starts (TSan's data race in sig_block). */
	_Atomic int mode;        /* enum fmt_sample_mode, for this session */
	int source;              /* enum fmt_sample_source */
	_Atomic int sig;         /* set before handler_installed, then for good */
	uint64_t period_ns;      /* the session's period, which a sample of weight 1 stands for */
	uint32_t hz;
	/* The overhead budget's stride (col_sample_set_stride): every source samples every
	 * `stride` periods, and each sample weighs `stride` times more. `hist` is when it
	 * changed, for the ring source's samples, which are unwound later (ring_emit); the
	 * writer's, under unwind_lock. */
	_Atomic uint32_t stride;
	struct stride_at { uint64_t mono; uint32_t k; } hist[32];
	uint32_t nhist;
	_Atomic uint32_t depth;
	int exclude_kernel;
	_Atomic int active;      /* the handler records while set */
	_Atomic int handler_installed;
	_Atomic int signalling;  /* some thread has a signal source: sleeping calls block it */
	col_pr_cfg prc;          /* ring source: the counters' settings */
	/* the environment, read at every session's start (sample_env()) */
	int want_sig;            /* FENNEC_SIGNAL, else 0: the highest free one */
	uint32_t wall_delay_us;  /* FENNEC_TEST_WALL_DELAY_US (tests only, col_sample_start()) */
	int want_source;         /* FENNEC_SAMPLE_SOURCE: FMT_SRC_RING (default), _PERF, _TIMER */
	uint32_t stack_copy;     /* FENNEC_STACK_COPY, else its default for the depth */
	col_pr **retired;        /* rings of released threads, for the next drain to empty and free */
	size_t nretired, retired_cap;
	col_pr **snap;           /* the rings of one drain (under unwind_lock) */
	size_t snap_cap;
	uint64_t cal_mono, cal_ticks; /* a clock point at start, for ring samples' times */
	col_ring ring;           /* samples, drained by the writer */
	_Atomic uint64_t taken, dropped, truncated;
	_Atomic uint64_t handler_ticks; /* spent in on_signal's sampling part, all threads */
	pthread_mutex_t lock;    /* the tid table; never taken in the handler */
	pthread_mutex_t unwind_lock; /* rings' reading and freeing, the unwinder (after lock in
				      * order: flush lock, unwind_lock, lock) */
	tid_ent *tids;
	uint32_t ntids;
	/* Sleeping calls' blocks, never freed: a lock-free list (a thread takes one inside a
	 * sanitizer's interceptor of the call, where TSan does not see our locks), and a
	 * number that changes when one is taken (tid_ent.blk_gen). */
	_Atomic(blk *) blk_all;
	_Atomic uint32_t blk_gen;
	int fd_budget;           /* perf fds we may still open */
	pid_t wall_tid;
	pthread_t wall_thread;
	int wall_running;
	_Atomic int wall_stop;
	uint64_t last_scan_ns;
	/* Threads the last scans found blocking our signal (fennec's own, mostly), and when:
	 * a scan checks such a thread's status again only after REFUSED_NS. */
	struct refused { pid_t tid; uint64_t ns; } refused[8];
	uint32_t nrefused;
	/* writer side */
	unsigned long long mod_adds, mod_subs;
	int mod_scanned;
	_Atomic uint64_t ring_min_bytes; /* the smallest ring opened (ring source); the writer reads it */
	_Atomic uint64_t drained_ns;     /* when rings_drain() last took every ring with samples */
	struct modkey { uintptr_t base; uint64_t ticks; char *path; } *mods;
	size_t nmods, mods_cap;
	struct named_ent { pid_t tid; uint32_t checks; uint64_t flush; char name[16]; } *named;
	size_t nnamed, named_cap; /* threads named in TASKS */
	uint64_t flushes;         /* drains so far */
	uint64_t last_taken, last_dropped, last_truncated; /* counters in the last SAMPLES chunk */
	int counters_written;
	cm_buf recs, modules, tasks;
};
extern struct col_sample_state P; /* sample.c */

/* sample.c. Reserve, fill and publish one record in the sample ring (the handler's, the wall
 * sampler's, the ring source's unwinder's). Async-signal-safe (atomics and memcpy only).
 * `ticks` 0: now. */
void ring_write_at(pid_t tid, unsigned flags, uint32_t weight, uint64_t ticks, uint64_t step,
		   const uint64_t *frames, uint32_t nf, const uint32_t *regions, uint32_t nr,
		   const uint64_t *py, uint32_t npy);

static inline void ring_write(pid_t tid, unsigned flags, uint32_t weight, const uint64_t *frames, uint32_t nf,
			      const uint32_t *regions, uint32_t nr, const uint64_t *py, uint32_t npy)
{
	ring_write_at(tid, flags, weight, 0, col_step_index(), frames, nf, regions, nr, py, npy);
}

/* sample.c. Move an fd out of the low numbers programs use and keep it from the program's
 * closes (col_fd_keep); add every thread of the process not known yet and forget the ones
 * that ended (caller holds P.lock). */
int fd_high(int fd);
void scan_tasks(void);

/* The blocking system calls that the kernel restarts after a SA_RESTART handler: the
 * handler's (at_restart) and the wall sampler's (restartable) list. */
static inline int restartable_nr(long nr)
{
	switch (nr) {
	case SYS_futex:
	case SYS_wait4:
	case SYS_waitid:
	case SYS_flock:
	case SYS_openat:
	case SYS_open:
	case SYS_read:
	case SYS_write:
	case SYS_readv:
	case SYS_writev:
	case SYS_pread64:
	case SYS_pwrite64:
		return 1;
	default:
		return 0;
	}
}

/* The sleeping-call block of thread `tid`, if it made one. Caller holds P.lock. */
static inline blk *blk_of(pid_t tid)
{
	for (blk *b = atomic_load_explicit(&P.blk_all, memory_order_acquire); b; b = b->next)
		if (atomic_load_explicit(&b->owner, memory_order_acquire) == tid)
			return b;
	return NULL;
}

/* sample_wall.c: the wall sampler's thread (col_sample_start() creates it). */
void *wall_main(void *arg);

/* sample_drain.c: pthread_atfork's handlers (col_sample_start() installs them): a fork
 * waits for a drain in progress. */
void unwind_lock_take(void);
void unwind_lock_drop(void);

#pragma GCC visibility pop

#endif

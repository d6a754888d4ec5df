/*
 * collect.h - internals of the in-process collector (libfennec). The hot API
 * (api.c) appends events to per-thread rings; the session (session*.c) owns the file,
 * the writer thread that drains the rings, and fork/exec handling. Design notes:
 * docs/internals/collect.md.
 */
#ifndef FENNEC_COLLECT_H
#define FENNEC_COLLECT_H

#include <pthread.h>
#include <stdatomic.h>
#include <sys/types.h>

#include "format/format.h"

#if defined(__x86_64__) || defined(__i386__)
#include <x86intrin.h>
#define COL_HAVE_TSC 1
#else
#define COL_HAVE_TSC 0
#endif

#define COL_MAX_DEPTH FMT_MAX_DEPTH /* region nesting tracked per thread */
#define COL_MAX_THREADS 16384    /* thread slots (recycled when threads exit) */
#define COL_MAX_SITES 65536      /* distinct region and metric names per process */
_Static_assert(COL_MAX_SITES <= FMT_MAX_SITE_ID, "site ids must stay below what readers accept");
/* every live thread is announced at each flush, and a slot is recycled only after one: a
 * flush's THREAD records are at most COL_MAX_THREADS ahead of the ones before them */
_Static_assert(COL_MAX_THREADS <= FMT_MAX_THREAD_AHEAD, "thread indices must stay within what readers accept");
#define COL_SITE_HASH (1u << 17) /* open-addressing table for name addresses */
#define COL_UNREC_GATED (1u << 31)   /* stack entry: begin skipped by step sampling */
#define COL_UNREC_DROPPED (1u << 30) /* stack entry: begin dropped (ring full) */

enum col_tstate { COL_T_FREE = 0, COL_T_LIVE = 1, COL_T_DEAD = 2 };

/* One thread's state and event ring, in one anonymous mapping. Fields above `committed`
 * are written only by the owning thread; `head` only by the writer. */
typedef struct col_thread {
	uint8_t *ring;          /* ring bytes (size a power of two) */
	uint64_t size;          /* ring size; 0 for the dead-thread sentinel */
	uint64_t tail;          /* owner: next write position (monotonic) */
	uint64_t head_cache;    /* owner: last seen value of head */
	uint64_t last_ticks;    /* owner: time of the last written event */
	uint64_t reserve;       /* owner: bytes kept for ENDs of written open regions */
	uint64_t rewind_at;     /* owner: tail at which to look whether to skip to the next lap */
	uint64_t lap_ticks;     /* owner: time this lap began (api.c, ring_rewind) */
	uint64_t lim;           /* owner: offset up to which ev_start() writes in place (api.c) */
	_Atomic uint64_t jump_from, jump_to; /* owner: the last skipped gap (api.c, ring_rewind) */
	uint32_t depth;         /* owner: open regions, recorded or not */
	uint32_t stack[COL_MAX_DEPTH]; /* owner: site id of each open region | COL_UNREC_* */
	_Atomic uint64_t dropped; /* owner increments, writer reads */
	char pad0[64];
	_Atomic uint64_t committed; /* owner: release-stored after each complete event */
	char pad1[56];
	_Atomic uint64_t head;      /* writer: consumed up to here */
	_Atomic int state;          /* enum col_tstate */
	pid_t tid;
	char name[17];             /* thread name at registration */
	uint32_t index;            /* per-file thread number (THREAD record) */
	uint64_t start_ticks;
	uint64_t end_ticks;
	int announced;             /* writer: THREAD record written */
	uint64_t dropped_written;  /* writer: last dropped count written */
	uint32_t gen;              /* session generation this state belongs to */
	pid_t pid;                 /* process that registered it */
} col_thread;

/* How full a thread's ring is, for the writer's looks and nudges: the bytes of events
 * between the writer's head h and committed c (or the owner's tail), scaled to the whole
 * ring from the room the owner has until it must drop. Without a skipped lap both are the
 * ring. While the writer has not passed a gap the owner skipped (api.c, ring_rewind()),
 * the gap is no events (counted as events, every lap's next look flushed at once: flood
 * wrote chunks a fifth smaller, and its file grew 17 %), but it is no room either: the
 * owner drops once its events and the gap fill the ring. Counting the events alone let a
 * tight loop of regions (bench/region_overhead, 1.4 GB/s of events) reach that point
 * before the writer's flush at a quarter, and drop up to 30 % of its pairs. */
static inline uint64_t col_backlog(col_thread *t, uint64_t h, uint64_t c)
{
	if (c <= h)
		return 0;
	uint64_t jf = atomic_load_explicit(&t->jump_from, memory_order_relaxed);
	uint64_t jt = atomic_load_explicit(&t->jump_to, memory_order_relaxed);
	if (!(h <= jf && jf < c && jt - jf <= c - h))
		return c - h;
	uint64_t gap = jt - jf, data = c - h - gap;
	return gap < t->size ? data * t->size / (t->size - gap) : t->size;
}

extern _Atomic uint32_t col_on;   /* session generation while a session runs, else 0 */

/* Descriptors fennec keeps (fdguard.c): the program's close(), close_range(), closefrom(),
 * dup2() and dup3() leave them alone. col_fd_keep moves fd to a high number and marks it
 * (returns the new fd, or fd when it could not move); col_fd_mark marks it where it is;
 * col_fd_close closes a marked one (not one the program's dup2 took meanwhile). */
void col_fd_init(void);
void col_fd_forked(void); /* a fork child's handler: the marks are its table's */
int col_fd_keep(int fd);
int col_fd_mark(int fd);
int col_fd_marked(int fd);
void col_fd_close(int fd);
int col_session_fd_move(int fd); /* session_file.c: move the recording off fd; 0 if it was there */
void col_writer_nudge(void);
extern _Atomic int col_writer_dozing; /* 1 while the writer sleeps longer than its usual slice */
void col_ring_crossed(col_thread *t); /* a thread's ring crossed a COL_NUDGE_BYTES boundary */
#define COL_NUDGE_SHIFT 16            /* every 64 KiB of events, a thread checks its fill */
/* A session without its writer thread (session_writer.c, "the lazy writer"): while the process has
 * one thread, the program's own thread does the writer's periodic work at its next safe point
 * (an allocation's slow path, a step) once col_ticks() reaches col_lazy_due (UINT64_MAX: no
 * lazy session). col_lazy_look() takes the flush lock only if it is free. col_writer_needed()
 * starts the writer before the program's first thread. */
extern _Atomic uint64_t col_lazy_due;
void col_lazy_look(void);
void col_writer_needed(void);
extern _Atomic int col_gate;      /* 1 while the current step is recorded */
extern int col_use_tsc;
/* Ticks in a microsecond. The COST chunk's measured times drop a timed stretch longer than
 * a few hundred of them: the thread was preempted or waited (its wall time is no CPU). */
extern uint64_t col_us_ticks;
extern __thread col_thread *col_tls;

static inline uint64_t col_ticks(void)
{
#if COL_HAVE_TSC
	if (likely(col_use_tsc))
		return __rdtsc();
#endif
	return cm_mono_ns();
}

/* The program's thread at a safe point (no fennec code or lock of its own in progress, not a
 * signal handler): the lazy writer's work, when due. */
static inline void col_lazy_point(void)
{
	uint64_t due = atomic_load_explicit(&col_lazy_due, memory_order_relaxed);
	if (unlikely(due != UINT64_MAX) && col_ticks() >= due)
		col_lazy_look();
}

/* Session side, used by the API. */
col_thread *col_thread_register(void); /* for the current generation; copies open regions */
uint32_t col_site_id(const void *key, unsigned kind, const char *name, const char *file, int line);
void col_step_advance(uint64_t *recorded_out);

/* Steps completed so far (async-signal-safe read). */
uint64_t col_step_index(void);

/* A FENNEC_* variable whose value the collector cannot use (config.c):
 * `name`=`value`, what was expected and what is done instead ("expected one of cpu, wall,
 * off; sampling off"), written into the header of the session's files (never said to the
 * program: `fennec record` and `fennec analyze` say it). Not async-signal-safe. */
void col_config_warn(const char *name, const char *value, const char *what);
/* The same for a whole number in [lo, hi] (unset or empty: dflt): digits only, else dflt;
 * out of range, the nearest bound (0 below the range: dflt, as a 0 in fennec_config means);
 * `unit` ("ms") after the bounds in the message. */
uint64_t col_env_number(const char *name, uint64_t dflt, uint64_t lo, uint64_t hi, const char *unit);
/* The rest of config.c, for session.c: defaults plus the environment into cfg (with
 * `warn`, what cannot be used is noted by col_config_warn()); the notes so far, one a line
 * (*len bytes, the last line's newline included), and their clearing at a session's
 * start; an environment number read without a warning (tests, internal hand-offs); the
 * rank from RANK and its kin (-1: none); FENNEC_AUTOSTART's value (1 start, 0 not, -1 a
 * value that means neither: started, and said). */
void col_config_env(fennec_config *cfg, int warn);
const char *col_config_warnings(size_t *len);
void col_config_warnings_clear(void);
uint64_t col_env_u64(const char *name, uint64_t dflt);
int col_env_rank(void);
int col_autostart_value(const char *a);

/* What fennec costs the program's threads (the COST chunk, docs/format.md; design in
 * docs/internals/collect.md, "What fennec costs"). The calibrations run on the flushing
 * thread under the flush lock; the measured sums are cumulative for the process. */
uint64_t col_event_cost_ps(double ticks_per_ns);  /* api.c: one region event, calibrated */
uint64_t col_mem_call_cost_ps(double ticks_per_ns); /* heap_hooks.c: one counted heap call beyond
						     glibc's, calibrated (0: cannot be here) */
uint64_t col_mem_calls(void);           /* heap_session.c: allocations and frees counted since the
					   process started (reallocs count one of each) */
uint64_t col_mem_record_ticks(void);    /* heap_hooks.c: ticks in heap records (1 in 16 timed) */
uint64_t col_sample_handler_ticks(void); /* sample_cost.c: ticks in the sampling signal handler */
uint64_t col_sample_kernel_ns(double ticks_per_ns); /* sample_cost.c: the kernel's part of one
						     sample, calibrated (0: unknown) */

/* Sampling (sample*.c). */
#define COL_SAMPLE_MAX_DEPTH 512
typedef struct col_sample_info {
	unsigned mode, source;
	uint64_t period_ns;
	uint32_t hz, depth;
} col_sample_info;
int col_sample_mode_parse(const char *s); /* "off" | "cpu" | "wall"; -1 if neither */
void col_sample_prepare(int mode, uint32_t hz, uint32_t depth, col_sample_info *info);
void col_sample_start(void);
void col_sample_poll(void);
/* Stop sampling; with a deadline (CLOCK_REALTIME), -1 when the wall thread's end or the
 * lock was not had by then. */
struct timespec;
int col_sample_stop(const struct timespec *deadline);
void col_sample_atfork_child(void);
void col_sample_drain(void (*emit)(unsigned type, cm_buf *raw), void (*before)(void));
void col_sample_tick(void); /* writer, between flushes: unwinds the fuller rings (ring source) */
void col_sample_set_stride(uint32_t k); /* writer: sample every k periods, each sample weighing k */
uint32_t col_sample_stride(void);
uint64_t col_sample_taken(void);     /* samples taken in the session so far */

/* The overhead budget (budget.c; docs/internals/collect.md, "The overhead budget"): the
 * costs of COST so far, cumulative, from which a look takes the last window's. */
typedef struct col_cost_now {
	uint64_t proc_cpu_ns;      /* the process's CPU (getrusage), fennec's included */
	uint64_t writer_ns;        /* fennec's flushing CPU (STATS' collector_cpu_ns) */
	uint64_t writer_sample_ns; /* the part of it in sample drains (unwinding, encoding) */
	uint64_t handler_ns, heap_record_ns; /* measured on the program's threads */
	uint64_t events, event_ps, heap_calls, heap_call_ps, taken, sample_kernel_ns; /* counts, costs */
} col_cost_now;
uint32_t col_budget_prepare(uint32_t hz, int sampling, uint64_t start_mono_ns); /* FENNEC_OVERHEAD_BUDGET: millionths, 0: none */
void col_budget_check(uint64_t mono_ns, const col_cost_now *now);
void col_budget_stats(cm_buf *b);
uint64_t col_sample_quiet_ns(void); /* writer: the longest it may sleep before a ring is 1/4 full */
void col_modules_drain(void (*emit)(unsigned type, cm_buf *raw), uint64_t now_ticks);
void col_modules_reset(void);
void col_sample_thread_begin(void);
void col_sample_thread_end(void);
int col_pthread_create_real(pthread_t *th, void *(*fn)(void *), void *arg);

/* The calling thread's open region site ids, outermost first, at most `max` (async-signal-safe). */
uint32_t col_region_stack(uint32_t *out, uint32_t max);

/* Heap profiling (heap_*.c). The allocator wrappers run from process start; a session
 * turns recording on (prepare, start) and off (stop). */
typedef struct col_mem_info {
	unsigned mode;           /* enum fmt_mem_mode */
	uint64_t rate;           /* sampled: mean bytes between sampled allocations */
	uint64_t interval_ns;    /* timeline period */
	uint64_t mmap_min;       /* --memory-mmap: smallest mapping counted, bytes; 0: none */
} col_mem_info;
int col_mem_mode_parse(const char *s); /* "off" | "sampled" | "full"; -1 if neither */
void col_mem_prepare(int mode, uint64_t rate, uint32_t interval_ms, uint32_t depth, col_mem_info *info);
void col_mem_start(void);
/* unwind: the stopping thread may unwind its stack (not at _exit) */
void col_mem_stop(int unwind);
void col_mem_step(void);                 /* a timeline point at each step */
void col_mem_atfork_parent(void);         /* this image has fork children (the scan's page filter) */
void col_mem_exec(void);                 /* the image's last timeline point, before an exec */
void col_mem_tick(uint64_t now_ns);      /* writer: a timeline point when the period is over */
unsigned col_mem_fill_pm(void);
int col_mem_mode(void);                  /* enum fmt_mem_mode of the session */
/* writer: the heap ring into HEAP2 chunks; final (a stop, an exit, an exec) writes all it holds */
void col_mem_drain(void (*emit)(unsigned type, cm_buf *raw), void (*before)(void), int final);
/* Full mode, at the end of a session not ended by exec, after the final drain: tell the
 * live blocks the program can still reach from those it lost, into a REACH chunk. */
void col_mem_reach(void (*emit)(unsigned type, cm_buf *raw), int exit_reason);
void col_mem_atfork_child(void);
/* Mark the calling thread's allocations as fennec's own (never counted nor recorded);
 * returns the previous mark. */
int col_mem_internal(int on);
/* Heap records lost so far in the session (the ring was full): ALLOCs, FREEs. */
void col_mem_dropped(uint64_t *allocs, uint64_t *frees);
int col_mem_busy(void);                  /* fennec's own code (or its allocator) runs on this thread */
int col_mem_lazy_ok(void);               /* glibc's allocator, interposed: a lazy writer helps */

/* The system sampler (system.c, docs/format.md "System metrics"): prepare at a session's
 * begin (FENNEC_SYSTEM_MS, the RAPL zones), header keys, the start point; the writer's tick
 * (a point every period and after a step) and its drain into SYSTEM and ENERGY chunks, the
 * final one with the last point. Never called on the program's threads while they run. */
void col_sys_prepare(void);
void col_sys_header(cm_buf *h);
void col_sys_start(void);
void col_sys_tick(uint64_t now_ns);
uint64_t col_sys_quiet_ns(uint64_t now_ns); /* writer: ns until the next point is due */
void col_sys_drain(void (*emit)(unsigned type, cm_buf *raw), int final);
void col_sys_domains(void (*emit)(unsigned type, cm_buf *raw)); /* a capped recording's new segment */

/* Site table, read by the writer. */
typedef struct col_site {
	const void *key;
	const char *name;
	const char *file;
	int line;
	unsigned kind;
} col_site;
extern col_site col_sites[COL_MAX_SITES];
extern _Atomic uint32_t col_nsites;

#endif

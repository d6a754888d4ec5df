/*
 * session.h - what the session's files share (docs/internals/collect.md, "The session's
 * files"): the session state S, the thread registry, the flush lock and the calls each file
 * makes into another. The files: session.c (the session's start and end, the clock, steps,
 * the site table and the thread registry), session_file.c (the profile file and capped
 * recordings' segments), session_writer.c (the writer thread, the lazy writer on the
 * program's threads, and flush_locked) and session_fork.c (fork, exec and exit). Only they
 * include it.
 */
#ifndef FENNEC_COLLECT_SESSION_H
#define FENNEC_COLLECT_SESSION_H

#include <limits.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <sys/types.h>
#include <time.h>
#include <zstd.h>

#include "collect/collect.h"

/* The short names the session's files use for what they share. The symbols are prefixed:
 * hidden from libfennec.so's dynamic table (-fvisibility=hidden, and the pragma below for
 * the declarations), but a program that links libfennec.a sees them beside its own. Being
 * macros, they would rename what a header included after this one declares: include it
 * last. */
#define S col_session
#define slots col_session_slots
#define nslots col_session_nslots
#define reg_lock col_session_reg_lock
#define flush_lock col_session_flush_lock
#define flush_waiters col_session_flush_waiters
#define intern_lock col_session_intern_lock
#define sites_refused col_session_sites_refused
#define all_blocked col_session_all_blocked
#define exec_state col_session_exec_state
#define lock_flush_by col_session_lock_flush_by
#define lock_flush col_session_lock_flush
#define calib_point col_session_calib_point
#define session_begin col_session_begin
#define session_end col_session_end
#define fd_is_ours col_session_fd_is_ours
#define file_write col_session_file_write
#define emit_chunk col_session_emit_chunk
#define write_header col_session_write_header
#define open_file col_session_open_file
#define seg_scan col_session_seg_scan
#define seg_config col_session_seg_config
#define seg_start col_session_seg_start
#define seg_rotate col_session_seg_rotate
#define seg_write col_session_seg_write
#define files_close col_session_files_close
#define exec_resume col_session_exec_resume
#define futex_wait col_session_futex_wait
#define futex_wake col_session_futex_wake
#define writer_wake col_session_writer_wake
#define start_writer col_session_start_writer
#define lazy_allowed col_session_lazy_allowed
#define lazy_arm col_session_lazy_arm
#define lazy_end col_session_lazy_end
#define flush_inline col_session_flush_inline
#define atfork_prepare col_session_atfork_prepare
#define atfork_parent col_session_atfork_parent
#define atfork_child col_session_atfork_child

#pragma GCC visibility push(hidden)

/* Session state; written under flush_lock or before the writer exists. */
#define SEG_KEEP 64 /* segments kept at most: a quarter of a cap each, so about 5 */
typedef struct col_seg_thread {
	fmt_scan scan;
	int used;      /* has events */
} col_seg_thread;

struct col_session_state {
	fennec_config cfg;
	char path[PATH_MAX];   /* the recording's base path */
	char file[PATH_MAX + 64]; /* this process's file */
	int fd;
	dev_t dev;             /* the file's, to know it is still fd's (file_write) */
	ino_t ino;
	uint64_t file_off;     /* bytes safely written */
	uint64_t lost_bytes;   /* chunk bytes that could not be written */
	uint64_t end_off;      /* where the END chunk of the last final flush starts (UINT64_MAX:
				  not written); an exec that fails cuts it off again */
	int write_failed;      /* a chunk could not be written: nothing more is (file_write) */
	uint32_t stall_ms;     /* FENNEC_TEST_WRITER_STALL_MS (tests only): the writer sleeps this
				  long before its first look at the rings, as a stalled one would */
	uint32_t writes, fail_write; /* writes so far; FENNEC_TEST_FAIL_WRITE (tests only): the
					write (from 1) that fails as if the disk were full */
	uint64_t recording_id;
	pid_t pid;
	pid_t parent_pid;
	unsigned origin;
	double ticks_per_ns;
	uint32_t gen;
	_Atomic uint32_t next_index; /* per-file thread numbers */
	uint32_t sites_written;
	pthread_t writer;
	_Atomic int stop_writer; /* atomic: TSan saw session_end()'s store race the writer's load in a fork child (issue 29) */
	int writer_thread;     /* FENNEC_WRITER=thread: never lazy (below) */
	int lazy;              /* no writer thread (yet): the program's thread flushes (below) */
	int heap_call_deferred; /* the heap calibration waits for the session's end (emit_cost) */
	int exec_inline;       /* lazy: the exec's thread holds the flush lock over the exec */
	uint64_t lazy_flush_ns; /* lazy: when the next periodic flush is due */
	uint64_t lazy_look_ticks; /* lazy: ticks between two looks */
	uint64_t lazy_cpu_ns;  /* lazy: CPU the program's threads spent in the looks so far */
	uint64_t lazy_cpu_from; /* lazy: the thread's CPU clock when the current look began */
	uint64_t event_ps;     /* COST: a region event, calibrated at the first flush (0: not yet) */
	uint64_t heap_call_ps; /* COST: a counted heap call, calibrated at a periodic flush */
	int heap_call_done;    /* heap_call_ps was calibrated (or cannot be) */
	uint64_t sample_kernel_ns; /* COST: the kernel's part of a sample, once measured */
	uint64_t start_mono_ns; /* the session's start (its header's) */
	uint64_t heap_calls_from; /* col_mem_calls() at the session's start */
	unsigned end_reason; /* enum fmt_end of the final flush, which the writer makes on its stop */
	uint64_t step_index;   /* steps completed */
	uint32_t budget_ppm;   /* FENNEC_OVERHEAD_BUDGET (budget.c), 0: none */
	uint64_t sample_cpu_ns; /* with a budget: the flushing threads' CPU in sample drains */
	cm_buf out, raw, threads, ends;
	ZSTD_CCtx *zctx;
	col_sample_info sample;
	col_mem_info mem;
	/* A capped recording (FENNEC_MAX_SIZE, FENNEC_MAX_DURATION_MS; docs/internals/collect.md,
	 * "Capped recordings"): S.fd is then the current segment file, efd the entry file. The
	 * writer's, under flush_lock. */
	struct {
		int on;
		uint64_t max_bytes, max_ns; /* the caps (0: none of that kind) */
		int efd;                    /* the entry file: HEADER and the definitions */
		dev_t edev;
		ino_t eino;
		uint64_t eoff;              /* its bytes written */
		cm_buf defs;                /* this flush's chunks for the entry file */
		uint64_t k, first;          /* the current segment's number; the oldest kept */
		uint64_t size[SEG_KEEP];    /* bytes of kept segment n, at n % SEG_KEEP */
		uint64_t start_ns[SEG_KEEP]; /* when it opened */
		uint64_t steps, events;     /* STEP events and events written so far */
		uint64_t dropped_bytes;     /* of the segments dropped */
		col_seg_thread *th;         /* by thread index: its stream followed (fmt_scan) */
		uint32_t nth;
		int rotate;                 /* a flush was lost: the next one opens a new segment */
		uint64_t prev_mono, prev_ticks; /* the previous flush's start: what a flush writes is newer */
	} seg;
};
extern struct col_session_state S;

/* The thread registry (session.c): slots[0, nslots) are the rings ever made, reused when
 * FREE. reg_lock guards their allocation, intern_lock fennec_intern's table. */
extern _Atomic(col_thread *) slots[COL_MAX_THREADS];
extern _Atomic uint32_t nslots;
extern pthread_mutex_t reg_lock;
extern pthread_mutex_t intern_lock;
/* The flush lock (writer state, the file) and the threads other than the writer waiting for
 * it (session.c, lock_flush_by()). */
extern pthread_mutex_t flush_lock;
extern _Atomic int flush_waiters;
int lock_flush_by(const struct timespec *deadline);
void lock_flush(void);
/* Calls that got no site because the table was full (session.c, col_site_id()). */
extern _Atomic uint64_t sites_refused;

/* session.c */
void calib_point(uint64_t *mono, uint64_t *ticks);
int session_begin(void); /* under flush_lock: S.origin and S.parent_pid are set */
int session_end(unsigned exit_reason, const struct timespec *deadline);

/* session_file.c: the file and the segments of a capped recording, under flush_lock. */
extern __thread int all_blocked; /* fennec's writer thread: every signal blocked for good */
int fd_is_ours(void);
void file_write(const uint8_t *buf, size_t n);
void emit_chunk(unsigned type, cm_buf *raw);
void write_header(uint64_t start_mono, uint64_t start_ticks, uint64_t start_real);
int open_file(void);
void seg_scan(uint32_t index, const uint8_t *p, size_t len);
void seg_config(void);
void seg_start(uint64_t mono, uint64_t ticks);
void seg_rotate(void);
void seg_write(void);
void files_close(void);

/* session_writer.c: the writer, and the exec's handshake with it (exec_state). */
enum { EXEC_NONE = 0, EXEC_ASKED = 1, EXEC_FROZEN = 2, EXEC_RESUME = 3 };
extern _Atomic uint32_t exec_state;
void exec_resume(void); /* the writer goes on after an exec that failed */
void futex_wait(_Atomic uint32_t *w, uint32_t val);
void futex_wake(_Atomic uint32_t *w);
void writer_wake(void);
int start_writer(void);
int lazy_allowed(void);
void lazy_arm(int now);
void lazy_end(void);
void flush_inline(int final, unsigned exit_reason);
#define LAZY_LOOK_NS 10000000u /* the most between two looks (also the timeline's interval, if less) */

/* session_fork.c: pthread_atfork's handlers, installed by the session's first start. */
void atfork_prepare(void);
void atfork_parent(void);
void atfork_child(void);

#pragma GCC visibility pop

#endif

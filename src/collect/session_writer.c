/*
 * session_writer.c - the writer: flush_locked() drains every thread's ring, the sites, the
 * samples, the heap, the GPU and the system sampler into compressed chunks; the writer
 * thread that flushes about every 100 ms, looks sooner while rings fill and dozes while
 * none grows; the lazy writer (no thread: the program's threads flush at safe points); and
 * the writer's side of an exec (frozen after END until the exec fails). session.h says
 * what it shares; docs/internals/collect.md, the design.
 */
#include "collect/collect.h"
#include "collect/gpu.h"

#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <linux/futex.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/single_threaded.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "collect/session.h" /* last: its short names are macros */

/* ---- the writer ---- */

static void copy_segment(col_thread *t, uint64_t from, uint64_t to)
{
	uint64_t len = to - from;
	if (!len)
		return;
	cm_buf_varint(&S.raw, t->index);
	cm_buf_varint(&S.raw, len);
	uint64_t off = from & (t->size - 1);
	uint64_t first = t->size - off < len ? t->size - off : len;
	cm_buf_put(&S.raw, t->ring + off, first);
	cm_buf_put(&S.raw, t->ring, len - first);
	if ((S.seg.on || S.budget_ppm) && !S.raw.failed) /* the budget counts the events */
		seg_scan(t->index, S.raw.data + S.raw.len - len, (size_t)len);
}

static void emit_sites(void)
{
	cm_buf b = {0};
	uint32_t n = atomic_load_explicit(&col_nsites, memory_order_acquire);
	while (S.sites_written < n) {
		col_site *s = &col_sites[S.sites_written];
		if (!__atomic_load_n(&s->key, __ATOMIC_ACQUIRE))
			break; /* being filled; no event can use it yet */
		cm_buf_varint(&b, S.sites_written);
		cm_buf_u8(&b, (uint8_t)s->kind);
		cm_buf_string(&b, s->name, strlen(s->name));
		cm_buf_string(&b, s->file ? s->file : "", s->file ? strlen(s->file) : 0);
		cm_buf_varint(&b, s->line > 0 ? (uint64_t)s->line : 0);
		S.sites_written++;
	}
	if (b.len)
		emit_chunk(FMT_SITES, &b);
	cm_buf_free(&b);
}

static void emit_events(void)
{
	emit_sites(); /* every site an event in S.raw uses is visible by now */
	if (S.threads.len)
		emit_chunk(FMT_THREAD, &S.threads);
	if (S.raw.len)
		emit_chunk(FMT_EVENTS, &S.raw);
}

static void announce(col_thread *t)
{
	/* The current name if the thread still runs (it may have been renamed since it
	 * registered), else the one it had then. */
	char path[64], name[64];
	snprintf(name, sizeof name, "%s", t->name);
	snprintf(path, sizeof path, "/proc/self/task/%d/comm", (int)t->tid);
	int fd = atomic_load_explicit(&t->state, memory_order_relaxed) == COL_T_LIVE ? open(path, O_RDONLY | O_CLOEXEC) : -1;
	if (fd >= 0) {
		ssize_t n = read(fd, name, sizeof name - 1);
		close(fd);
		while (n > 0 && (name[n - 1] == '\n' || name[n - 1] == 0))
			n--;
		name[n > 0 ? n : 0] = 0;
	}
	cm_buf_varint(&S.threads, t->index);
	cm_buf_varint(&S.threads, (uint64_t)t->tid);
	cm_buf_string(&S.threads, name, strlen(name));
	cm_buf_varint(&S.threads, t->start_ticks);
	t->announced = 1;
}

static uint64_t thread_cpu_ns(void)
{
	struct timespec ts;
	if (clock_gettime(CLOCK_THREAD_CPUTIME_ID, &ts) != 0)
		return 0;
	return (uint64_t)ts.tv_sec * 1000000000u + (uint64_t)ts.tv_nsec;
}

static void stats_payload(cm_buf *b, cm_buf *drops, uint32_t ndrops, uint32_t threads_seen)
{
	uint64_t mono, ticks;
	calib_point(&mono, &ticks);
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	cm_buf_varint(b, mono);
	cm_buf_varint(b, ticks);
	cm_buf_varint(b, (uint64_t)ru.ru_utime.tv_sec * 1000000000u + (uint64_t)ru.ru_utime.tv_usec * 1000u);
	cm_buf_varint(b, (uint64_t)ru.ru_stime.tv_sec * 1000000000u + (uint64_t)ru.ru_stime.tv_usec * 1000u);
	cm_buf_varint(b, (uint64_t)ru.ru_maxrss);
	cm_buf_varint(b, threads_seen);
	cm_buf_varint(b, ndrops);
	cm_buf_put(b, drops->data, drops->len);
	cm_buf_varint(b, S.lost_bytes);
}

/* A flush's samples go before its events: ring samples take their regions from the
 * events by time, and the reader needs every event before a SAMPLES chunk to be older
 * than its samples (docs/format.md, "Regions and step by time"). */
static void emit_samples(void)
{
	uint64_t c0 = S.budget_ppm ? thread_cpu_ns() : 0;
	if (S.sample.mode || S.mem.mode)
		col_modules_drain(emit_chunk, col_ticks());
	col_sample_drain(emit_chunk, emit_sites); /* SITES first: samples name regions */
	if (S.budget_ppm)
		S.sample_cpu_ns += thread_cpu_ns() - c0;
}

/*
 * The COST chunk before each STATS or END (docs/format.md): what fennec's work on the
 * program's threads cost so far, measured (signal handlers, heap records) and calibrated
 * here (a region event at the first flush; a heap call at the first periodic flush 50 ms
 * into the session, in a lazy session at its end instead (below), the kernel's part of a sample at the first 250 ms into it, so that a
 * short process, or a session's end, which may be an _exit from a signal handler, pays
 * nothing for them).
 * Under flush_lock, on the flushing thread, whose CPU is the writer's.
 */
#define COST_HEAP_AFTER_NS 50000000ull    /* ~0.2 ms of calibration */
#define COST_KERNEL_AFTER_NS 250000000ull  /* up to 3 ms */

static void emit_cost(int final, unsigned exit_reason)
{
	if (!S.event_ps)
		S.event_ps = col_event_cost_ps(S.ticks_per_ns);
	uint64_t age = cm_mono_ns() - S.start_mono_ns;
	/* A lazy session flushes on the program's thread, inside whatever it is timing: the
	 * heap calibration's 2 MiB of fresh blocks took 12-20 ms of page faults there on this
	 * VM, all in the first step of tests/fixtures/steps. There it waits for the end of a
	 * session that ends by fennec_stop or exit (after the program's last step; never an
	 * _exit or an exec, which may come from a handler that interrupted the allocator). */
	if (!final && S.lazy && age >= COST_HEAP_AFTER_NS)
		S.heap_call_deferred = 1;
	int heap_now = S.heap_call_deferred ? final && (exit_reason == FMT_END_STOP || exit_reason == FMT_END_EXIT)
					    : !final;
	if (heap_now && age >= COST_HEAP_AFTER_NS && !S.heap_call_done) {
		S.heap_call_ps = col_mem_call_cost_ps(S.ticks_per_ns);
		S.heap_call_done = 1;
	}
	if (!final && age >= COST_KERNEL_AFTER_NS)
		S.sample_kernel_ns = col_sample_kernel_ns(S.ticks_per_ns);
	double tpn = S.ticks_per_ns > 0 ? S.ticks_per_ns : 1.0;
	cm_buf b = {0};
	cm_buf_varint(&b, (uint64_t)((double)col_sample_handler_ticks() / tpn));
	cm_buf_varint(&b, (uint64_t)((double)col_mem_record_ticks() / tpn));
	cm_buf_varint(&b, S.event_ps);
	cm_buf_varint(&b, S.heap_call_ps);
	cm_buf_varint(&b, S.sample_kernel_ns);
	uint64_t calls = col_mem_calls();
	cm_buf_varint(&b, calls > S.heap_calls_from ? calls - S.heap_calls_from : 0);
	emit_chunk(FMT_COST, &b);
	cm_buf_free(&b);
}

/* The overhead budget's look (budget.c), after a periodic flush's COST chunk: the same
 * figures, cumulative for the session. */
static void budget_look(void)
{
	double tpn = S.ticks_per_ns > 0 ? S.ticks_per_ns : 1.0;
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	uint64_t calls = col_mem_calls();
	col_cost_now c = {
		.proc_cpu_ns = (uint64_t)ru.ru_utime.tv_sec * 1000000000u + (uint64_t)ru.ru_utime.tv_usec * 1000u +
			       (uint64_t)ru.ru_stime.tv_sec * 1000000000u + (uint64_t)ru.ru_stime.tv_usec * 1000u,
		.writer_ns = S.lazy_cpu_ns + (thread_cpu_ns() - S.lazy_cpu_from),
		.writer_sample_ns = S.sample_cpu_ns,
		.handler_ns = (uint64_t)((double)col_sample_handler_ticks() / tpn),
		.heap_record_ns = (uint64_t)((double)col_mem_record_ticks() / tpn),
		.events = S.seg.events,
		.event_ps = S.event_ps,
		.heap_calls = calls > S.heap_calls_from ? calls - S.heap_calls_from : 0,
		.heap_call_ps = S.heap_call_ps,
		.taken = col_sample_taken(),
		.sample_kernel_ns = S.sample_kernel_ns,
	};
	col_budget_check(cm_mono_ns(), &c);
}

/* Drain every ring into chunks and append them to the file. Caller holds flush_lock.
 * Returns through S.out; `final` adds the END chunk. */
static void flush_locked(int final, unsigned exit_reason)
{
	/* Every flush runs on the writer (writer_main), the final one too (session_end()). */
	if (S.seg.on)
		seg_rotate();
	cm_buf drops = {0};
	uint32_t ndrops = 0, seen = 0;
	uint32_t n = atomic_load_explicit(&nslots, memory_order_acquire);
	for (uint32_t i = 0; i < n; i++) {
		col_thread *t = atomic_load_explicit(&slots[i], memory_order_acquire);
		if (!t)
			continue;
		int st = atomic_load_explicit(&t->state, memory_order_acquire);
		if (st == COL_T_FREE || t->gen != S.gen)
			continue;
		seen++;
		if (!t->announced)
			announce(t);
		uint64_t c = atomic_load_explicit(&t->committed, memory_order_acquire);
		uint64_t h = atomic_load_explicit(&t->head, memory_order_relaxed);
		if (c > h) {
			/* Around the gap the owner skipped (api.c, ring_rewind), if [h, c) holds it. */
			uint64_t jf = atomic_load_explicit(&t->jump_from, memory_order_relaxed);
			if (h <= jf && jf < c) {
				copy_segment(t, h, jf);
				copy_segment(t, atomic_load_explicit(&t->jump_to, memory_order_relaxed), c);
			} else {
				copy_segment(t, h, c);
			}
			atomic_store_explicit(&t->head, c, memory_order_release);
			if (S.raw.len > (8u << 20)) {
				emit_samples();
				emit_events();
			}
		}
		uint64_t d = atomic_load_explicit(&t->dropped, memory_order_relaxed);
		if (d != t->dropped_written) {
			cm_buf_varint(&drops, t->index);
			cm_buf_varint(&drops, d);
			t->dropped_written = d;
			ndrops++;
		}
		if (st == COL_T_DEAD) {
			if (S.seg.on && t->index < S.seg.nth)
				S.seg.th[t->index].used = 0;
			cm_buf_varint(&S.ends, t->index);
			cm_buf_varint(&S.ends, t->end_ticks);
			atomic_store_explicit(&t->state, COL_T_FREE, memory_order_release);
		}
	}
	if (!final)
		col_sample_poll();
	emit_samples();
	emit_events();
	col_mem_drain(emit_chunk, emit_sites, final);
	if (final)
		col_mem_reach(emit_chunk, (int)exit_reason);
	/* At _exit (exit reason 3) the CUDA and NVML calls of a final drain are left out, as
	 * col_gpu_stop() is (session_end()). */
	col_gpu_drain(emit_chunk, !final ? COL_GPU_DRAIN_PERIODIC
				  : exit_reason == FMT_END__EXIT ? COL_GPU_DRAIN_EXIT : COL_GPU_DRAIN_FINAL);
	col_sys_drain(emit_chunk, !final ? 0 : exit_reason == FMT_END__EXIT ? 2 : 1); /* _exit: no NVML */
	if (S.ends.len)
		emit_chunk(FMT_THREAD_END, &S.ends);
	emit_cost(final, exit_reason);
	if (!final && S.budget_ppm)
		budget_look();
	cm_buf st = {0};
	stats_payload(&st, &drops, ndrops, atomic_load(&S.next_index));
	if (final)
		cm_buf_varint(&st, exit_reason);
	/* fennec's own CPU in this session, after the fields every reader knows (docs/format.md):
	 * the writer thread's, and what the program's threads spent in lazy looks (below) */
	cm_buf_varint(&st, S.lazy_cpu_ns + (thread_cpu_ns() - S.lazy_cpu_from));
	/* which heap records were lost: a lost FREE leaves its block read as unfreed */
	uint64_t lost_allocs, lost_frees;
	col_mem_dropped(&lost_allocs, &lost_frees);
	cm_buf_varint(&st, lost_allocs);
	cm_buf_varint(&st, lost_frees);
	cm_buf_varint(&st, atomic_load_explicit(&sites_refused, memory_order_relaxed));
	col_budget_stats(&st); /* the sampling stride, fennec's share in the budget's last window */
	uint64_t end_at = S.file_off + S.out.len;
	emit_chunk(final ? FMT_END : FMT_STATS, &st);
	cm_buf_free(&st);
	cm_buf_free(&drops);
	if (S.seg.on)
		seg_write();
	else
		file_write(S.out.data, S.out.len);
	S.end_off = final && !S.write_failed ? end_at : UINT64_MAX;
	S.out.len = 0;
	if (S.out.cap > (32u << 20)) /* do not keep a burst's buffers forever */
		cm_buf_free(&S.out);
	if (S.raw.cap > (32u << 20))
		cm_buf_free(&S.raw);
}

/* Largest fill of any ring, in thousandths: the writer shortens its sleep when rings fill. */
static unsigned max_fill_pm(void)
{
	unsigned worst = 0;
	uint32_t n = atomic_load_explicit(&nslots, memory_order_acquire);
	for (uint32_t i = 0; i < n; i++) {
		col_thread *t = atomic_load_explicit(&slots[i], memory_order_acquire);
		if (!t || atomic_load_explicit(&t->state, memory_order_acquire) != COL_T_LIVE)
			continue;
		uint64_t c = atomic_load_explicit(&t->committed, memory_order_acquire);
		uint64_t h = atomic_load_explicit(&t->head, memory_order_relaxed);
		uint64_t used = col_backlog(t, h, c); /* 0 when the owner skipped a lap between the loads */
		unsigned pm = (unsigned)(used * 1000 / t->size);
		if (pm > worst)
			worst = pm;
	}
	return worst;
}

/* The writer looks at the rings at least every WRITER_SLICE_NS while they fill: it flushes
 * when the period is over or when any ring is a quarter full (FLUSH_PM), so a thread that
 * emits events quickly is drained long before its ring overflows. While the fullest ring
 * grows, the next look comes at half the time that ring would take to reach the quarter
 * at the rate it grew since the last look (not sooner than WRITER_SLICE_NS, not later than
 * the quiet limit below). Looking every 2 ms whenever a ring grew at all made 100-500
 * wakeups a second of steady traffic that fills a ring in seconds (heap records in sampled
 * mode, 10^5-10^6 region events a second), each about 50 us of CPU on a VM. */
#define WRITER_SLICE_NS 2000000u
#define FLUSH_PM 250

/* While no ring grows between two looks, the writer looks half as often, down to every
 * WRITER_QUIET_NS: a look is a wakeup (20 us of CPU on a VM), and 500 a second cost a
 * program that emits little 1 % of a core. A thread that starts writing events as fast as
 * it can (120 MB/s here, flood.c) fills 0.7 MiB of its 2 MiB ring before the next look. */
#define WRITER_QUIET_NS 6000000u

/* With no ring growing, the writer dozes up to WRITER_DOZE_NS: a thread whose events
 * start flowing wakes it when its ring passes an eighth (col_ring_crossed, checked every
 * 64 KiB; the writer flushes at a quarter). Full heap profiling and GPU collection keep WRITER_QUIET_NS (their producers do
 * not wake it; the GPU step schedule switches within a look); sampling with the ring source
 * keeps the writer looking before a thread's ring is half full (col_sample_quiet_ns). */
#define WRITER_DOZE_NS 50000000u

/* A dozing writer is woken once a thread has this much waiting (or an eighth of its ring):
 * drained while still warm in the caches, as when it looks every 2 ms. */
#define NUDGE_BYTES (256u << 10)

static _Atomic uint32_t wake_word; /* futex: bumped to end the writer's wait early */

/*
 * exec. The file of an image that execs ends with END (exit reason exec), and the new image
 * writes a sibling; an exec that fails returns, and the program goes on as the same process
 * image, which must not read as two (a new process, a file of its own). So the session is
 * not ended before exec: the writer makes the final flush (END included) and then stays
 * frozen, holding the flush lock, so that nothing follows END, while the exec is tried. If
 * it succeeds, the image is gone and the file ends there. If it returns, the writer cuts
 * the END chunk off again and goes on as before: one file, one session, as if nothing had
 * happened (what the program did meanwhile is in the rings, written at the next flush).
 * exec_state is the futex word of the handshake between the exec's thread and the writer.
 */
_Atomic uint32_t exec_state;

void futex_wait(_Atomic uint32_t *w, uint32_t val)
{
	syscall(SYS_futex, w, FUTEX_WAIT_PRIVATE, val, NULL, NULL, 0);
}

void futex_wake(_Atomic uint32_t *w)
{
	syscall(SYS_futex, w, FUTEX_WAKE_PRIVATE, INT_MAX, NULL, NULL, 0);
}

/* When a lazy session's program thread looks next (the lazy writer, below). */
_Atomic uint64_t col_lazy_due = UINT64_MAX;

/* A ring asks a lazy session for a look at the next safe point: col_lazy_due to 0, with a
 * compare-and-swap so that a session that has just left lazy mode (lazy_end(): UINT64_MAX)
 * is not put back to looking at every slow path. Returns 1 if a lazy session was asked. */
static int lazy_ask(void)
{
	uint64_t d = atomic_load_explicit(&col_lazy_due, memory_order_relaxed);
	while (d != UINT64_MAX)
		if (atomic_compare_exchange_weak_explicit(&col_lazy_due, &d, 0, memory_order_relaxed,
							  memory_order_relaxed))
			return 1;
	return 0;
}

/* The writer, holding the flush lock, for an exec (above): END, then frozen until the
 * exec's thread says it failed. */
static void exec_freeze(void)
{
	flush_locked(1, FMT_END_EXEC);
	atomic_store(&exec_state, EXEC_FROZEN);
	futex_wake(&exec_state);
	uint32_t st;
	while ((st = atomic_load(&exec_state)) == EXEC_FROZEN)
		futex_wait(&exec_state, st);
	exec_resume();
	atomic_store(&exec_state, EXEC_NONE);
}

/* Under the flush lock: the exec failed, the session goes on in the same file. After a
 * failed write the file already ends at the last whole chunk, and stays so. */
void exec_resume(void)
{
	if (S.end_off != UINT64_MAX && fd_is_ours() && ftruncate(S.fd, (off_t)S.end_off) == 0 &&
	    lseek(S.fd, (off_t)S.end_off, SEEK_SET) == (off_t)S.end_off)
		S.file_off = S.end_off;
	else if (S.end_off != UINT64_MAX) {
		S.write_failed = 1; /* END stays: nothing may follow it */
		S.lost_bytes++;
	}
	S.end_off = UINT64_MAX;
	col_gpu_resume();
}
_Atomic int col_writer_dozing;

void writer_wake(void)
{
	atomic_fetch_add_explicit(&wake_word, 1, memory_order_release);
	syscall(SYS_futex, &wake_word, FUTEX_WAKE_PRIVATE, 1, NULL, NULL, 0);
}

/* Any thread, async-signal-safe: make the writer look at the rings now (a producer that
 * found its ring full). */
void col_writer_nudge(void)
{
	lazy_ask();
	writer_wake();
}

/* Any thread, async-signal-safe (a futex wake): called every 64 KiB of a thread's events
 * while the writer dozes. */
void col_ring_crossed(col_thread *t)
{
	uint64_t used = col_backlog(t, atomic_load_explicit(&t->head, memory_order_relaxed), t->tail);
	uint64_t enough = t->size / 8 < NUDGE_BYTES ? t->size / 8 : NUDGE_BYTES;
	if (atomic_load_explicit(&col_lazy_due, memory_order_relaxed) != UINT64_MAX) {
		/* Lazy (col_writer_dozing stays 1): the producer is the program's thread, past its
		 * event (a region, a metric), at a safe point unless inside fennec's own code. */
		if (used >= enough && lazy_ask())
			col_lazy_look();
		return;
	}
	if (used >= enough && atomic_exchange_explicit(&col_writer_dozing, 0, memory_order_relaxed))
		writer_wake();
}

static uint64_t writer_quiet_max(void)
{
	uint64_t q = WRITER_DOZE_NS;
	if (col_mem_mode() == FMT_MEM_FULL || col_gpu_mode() != COL_GPU_OFF)
		q = WRITER_QUIET_NS;
	uint64_t s = col_sample_quiet_ns();
	if (s < q)
		q = s < WRITER_SLICE_NS ? WRITER_SLICE_NS : s;
	return q;
}

static void *writer_main(void *arg)
{
	all_blocked = 1; /* created with every signal blocked */
	prctl(PR_SET_NAME, "fennec-writer");
	col_mem_internal(1);
	if (S.stall_ms) {
		struct timespec stall = {(time_t)(S.stall_ms / 1000), (long)(S.stall_ms % 1000) * 1000000};
		while (nanosleep(&stall, &stall) != 0 && errno == EINTR)
			;
	}
	uint64_t interval_ns = (uint64_t)S.cfg.flush_interval_ms * 1000000u;
	uint64_t next = cm_mono_ns() + 10000000u; /* an early calibration point */
	uint64_t slice = WRITER_SLICE_NS, last_look = cm_mono_ns();
	unsigned last_fill = 0;
	pthread_mutex_lock(&flush_lock);
	while (!S.stop_writer) {
		if (atomic_load(&exec_state) == EXEC_ASKED) {
			exec_freeze();
			continue;
		}
		uint64_t now = cm_mono_ns();
		col_mem_tick(now);
		col_gpu_tick(now);
		col_sys_tick(now);
		if (S.budget_ppm) {
			uint64_t c0 = thread_cpu_ns();
			col_sample_tick();
			S.sample_cpu_ns += thread_cpu_ns() - c0;
		} else {
			col_sample_tick();
		}
		unsigned fill = max_fill_pm(), mfill = col_mem_fill_pm();
		if (mfill > fill)
			fill = mfill;
		uint64_t quiet = writer_quiet_max();
		if (fill > last_fill) {
			uint64_t left = fill < FLUSH_PM ? FLUSH_PM - fill : 0;
			slice = left * (now - last_look) / (fill - last_fill) / 2;
			slice = slice < WRITER_SLICE_NS ? WRITER_SLICE_NS : slice < quiet ? slice : quiet;
		} else {
			slice = slice * 2 < quiet ? slice * 2 : quiet;
		}
		last_fill = fill;
		last_look = now;
		if (now < next && fill < FLUSH_PM) {
			uint64_t wait = next - now < slice ? next - now : slice;
			uint64_t sq = col_sys_quiet_ns(now); /* the system sampler's next point */
			if (sq < wait)
				wait = sq > WRITER_SLICE_NS ? sq : WRITER_SLICE_NS;
			/* Read under the flush lock, which the stopping thread holds to set stop_writer
			 * before it bumps wake_word: a stop after this is seen by the futex. */
			uint32_t seen = atomic_load_explicit(&wake_word, memory_order_acquire);
			if (wait > WRITER_QUIET_NS)
				atomic_store_explicit(&col_writer_dozing, 1, memory_order_relaxed);
			pthread_mutex_unlock(&flush_lock);
			/* The session's flush lock is free meanwhile, as in a condition wait. */
			struct timespec rel = {(time_t)(wait / 1000000000u), (long)(wait % 1000000000u)};
			syscall(SYS_futex, &wake_word, FUTEX_WAIT_PRIVATE, seen, &rel, NULL, 0);
			pthread_mutex_lock(&flush_lock);
			atomic_store_explicit(&col_writer_dozing, 0, memory_order_relaxed);
			continue;
		}
		flush_locked(0, 0);
		if (atomic_load_explicit(&flush_waiters, memory_order_relaxed)) {
			pthread_mutex_unlock(&flush_lock);
			struct timespec brief = {0, 20000};
			for (int i = 0; i < 5000 && atomic_load_explicit(&flush_waiters, memory_order_relaxed); i++)
				nanosleep(&brief, NULL); /* until they have it, 100 ms at most */
			pthread_mutex_lock(&flush_lock);
		}
		next = cm_mono_ns() + interval_ns;
		/* After a flush for a ring a quarter full, look again soon: it is filling. After
		 * the period's flush keep the pace: looking every 2 ms again, then 4, 8, ...
		 * made 6 wakeups of each period, 60 a second of a program that does nothing. */
		if (fill >= FLUSH_PM)
			slice = WRITER_SLICE_NS;
		last_fill = 0;
		last_look = cm_mono_ns();
	}
	/* The end of the session (session_end()): what the threads committed, END, close. An
	 * exec asked for meanwhile is tried without the session (exec_prepare()). */
	uint32_t asked = EXEC_ASKED;
	if (atomic_compare_exchange_strong(&exec_state, &asked, EXEC_NONE))
		futex_wake(&exec_state);
	flush_locked(1, S.end_reason);
	files_close();
	pthread_mutex_unlock(&flush_lock);
	return arg;
}

int start_writer(void)
{
	/* The writer blocks every signal, so the program's signals never land on it. */
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	S.stop_writer = 0;
	int rc = col_pthread_create_real(&S.writer, writer_main, NULL);
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return rc == 0 ? 0 : FENNEC_ENOMEM;
}

/*
 * The lazy writer. A second thread in the process, the writer, switches glibc's allocator to
 * its multi-threaded paths (an arena lock in every malloc and in most frees, where a process
 * that never made a thread takes none): on `bench/work_alloc mixed` that cost sampled mode
 * 1-6 points of its ratio (bench/README.md, "memory, 2026-11-23 (morning)"). So a
 * session in a process that has made no thread (glibc's __libc_single_threaded), with no
 * CPU sampling, no GPU collection and no full heap profile (whose records are the writer's
 * work to compress), starts without the writer. Its work, the heap timeline's points and a
 * flush every flush interval or when a ring is an eighth full, is done by the program's
 * thread itself at its next safe point once a look is due (col_lazy_point(): an allocation's
 * slow path, a step, a thread's ring crossing 64 KiB), with the flush lock only if it is
 * free and never inside fennec's own code. The writer is started when the program makes its
 * first thread (pthread_create, col_writer_needed()), or at a look that finds the process
 * no longer single-threaded (a thread made another way). The session's end, an exec and a
 * fork are handled inline (session_end(), exec_prepare()). FENNEC_WRITER=thread keeps the
 * writer thread from the start (`fennec record --view` does: its dashboard reads the file
 * as it grows, also while the program does not allocate).
 * What a lazy session gives up: a program that stops reaching safe points (computes without
 * allocating, sleeps) writes nothing and takes no timeline point until it reaches one again;
 * its events are written then, or at its end. A process killed meanwhile (SIGKILL) loses
 * them, where the writer loses at most its last flush interval.
 */

int lazy_allowed(void)
{
	return !S.writer_thread && !S.stall_ms && __libc_single_threaded && col_mem_lazy_ok() &&
	       S.cfg.sample_mode == FENNEC_SAMPLE_OFF && S.cfg.memory_mode != FENNEC_MEMORY_FULL &&
	       col_gpu_mode() == COL_GPU_OFF;
}

/* Under flush_lock: the next look, LAZY_LOOK_NS (or the timeline's interval) from now, or now
 * (due = 0) when a ring asked. */
void lazy_arm(int now)
{
	uint64_t due = now ? 0 : col_ticks() + S.lazy_look_ticks;
	atomic_store_explicit(&col_lazy_due, S.lazy ? due : UINT64_MAX, memory_order_relaxed);
}

/* Under flush_lock: leave lazy mode (the writer was started, or the session ends). */
void lazy_end(void)
{
	if (!S.lazy)
		return;
	S.lazy = 0;
	atomic_store(&col_lazy_due, UINT64_MAX);
	atomic_store(&col_writer_dozing, 0);
	S.lazy_cpu_from = 0; /* the writer's clock from now on */
}

/* Under flush_lock, no writer: what this thread does between the two is the writer's
 * work, and its CPU is counted as the writer's (flush_locked() adds the part so far). */
static void lazy_cpu_begin(void)
{
	S.lazy_cpu_from = thread_cpu_ns();
}

static void lazy_cpu_end(void)
{
	S.lazy_cpu_ns += thread_cpu_ns() - S.lazy_cpu_from;
	S.lazy_cpu_from = 0;
}

/* Under flush_lock, no writer: a flush on this thread. */
void flush_inline(int final, unsigned exit_reason)
{
	lazy_cpu_begin();
	flush_locked(final, exit_reason);
	lazy_cpu_end();
}

static int start_writer_late(void)
{
	if (start_writer() < 0)
		return FENNEC_ENOMEM;
	lazy_end();
	return 0;
}

void col_lazy_look(void)
{
	/* Not on a signal handler's alternate stack: a flush (the sample drain's frame arrays,
	 * zstd) needs more than the 8 KiB of a classic SIGSTKSZ stack, and an allocation in a
	 * crash handler there died of SIGSEGV 8 runs in 12 (test_allocation_on_a_small_
	 * alternate_stack, --memory=sampled). The look stays due: the next safe point off the
	 * alternate stack takes it. One system call, only when a look is due. */
	stack_t alt;
	if (sigaltstack(NULL, &alt) == 0 && (alt.ss_flags & SS_ONSTACK))
		return;
	if (col_mem_busy() || pthread_mutex_trylock(&flush_lock))
		return;
	if (!S.lazy || !atomic_load(&col_on) || S.pid != getpid()) {
		pthread_mutex_unlock(&flush_lock);
		return;
	}
	int was = col_mem_internal(1);
	int saved = errno;
	if (!__libc_single_threaded && start_writer_late() == 0)
		goto out; /* a thread made without pthread_create (C11's thrd_create) */
	lazy_cpu_begin(); /* the timeline's point too, as the writer's */
	uint64_t now = cm_mono_ns();
	col_mem_tick(now);
	unsigned fill = max_fill_pm(), mfill = col_mem_fill_pm();
	if (now >= S.lazy_flush_ns || fill >= FLUSH_PM / 2 || mfill >= FLUSH_PM / 2) {
		flush_locked(0, 0);
		S.lazy_flush_ns = cm_mono_ns() + (uint64_t)S.cfg.flush_interval_ms * 1000000u;
	}
	lazy_cpu_end();
	lazy_arm(0);
out:
	errno = saved;
	col_mem_internal(was);
	pthread_mutex_unlock(&flush_lock);
}

void col_writer_needed(void)
{
	/* Not for a thread made by fennec's own code (which may hold the flush lock): only the
	 * program's threads change what glibc's allocator does. */
	if (atomic_load_explicit(&col_lazy_due, memory_order_relaxed) == UINT64_MAX || col_mem_busy())
		return;
	int was = col_mem_internal(1);
	lock_flush();
	if (S.lazy && atomic_load(&col_on) && S.pid == getpid())
		start_writer_late();
	pthread_mutex_unlock(&flush_lock);
	col_mem_internal(was);
}

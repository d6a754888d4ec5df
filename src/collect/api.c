/*
 * api.c - the hot paths of the public API: regions, steps and metrics. Each call reads
 * the clock and appends one event to the calling thread's ring, then publishes it with
 * a release store. No locks, no system calls, no malloc: a full ring drops the event
 * and counts it. The slow paths (a thread's first event, a name's first use) live in
 * session.c.
 */
#include <signal.h>

#include "collect/collect.h"
#include "format/encode.h"

#define API FENNEC_API

/* Make room for `need` bytes plus the END reserve; refreshes the cached head once. A full
 * ring asks for a look as a crossing of 64 KiB does (ev_commit()): the events it drops move
 * no tail, and a lazy session's flush, which only those crossings asked for, never came
 * (flood with --sample off --buffer-kb 64 kept 16,367 of 3,000,000 pairs). */
static inline int ring_room(col_thread *t, uint64_t need)
{
	need += t->reserve;
	if (likely(t->tail - t->head_cache + need <= t->size))
		return 1;
	t->head_cache = atomic_load_explicit(&t->head, memory_order_acquire);
	if (t->tail - t->head_cache + need <= t->size)
		return 1;
	if (atomic_load_explicit(&col_writer_dozing, memory_order_relaxed))
		col_ring_crossed(t);
	return 0;
}

/*
 * Past a quarter of the ring (ring.h, col_ring_reserve(), says why): the rest of the lap is
 * skipped, so that the events keep to the pages they already touched; a thread's 2 MiB
 * ring grew the program's resident memory for as long as its first lap took. The writer
 * learns of the gap from jump_from and jump_to, stored before the event after them is
 * committed (release), and copies around it. Only while the writer is in this lap and
 * past its quarter too: that is the room left until it passes the gap, and it holds the
 * END reserve, the next event and the 64 KiB to the next fill check (ev_commit()), which
 * is what wakes a lazy session's flush; so rings under 256 KiB never skip. And only for a
 * thread that took LAP_MIN_US (100 ms) or more to write the quarter: a skip leaves
 * it a quarter of the ring until the writer passes the gap, where a thread that writes as
 * fast as it can (bench/region_overhead: 1.4 GB/s; flood.c) needs the whole ring to ride
 * out the writer's next look, and dropped events without it; such a thread touches every
 * page of its ring anyway. Otherwise a look every 4 KiB.
 */
#define LAP_MIN_US 100000u

static __attribute__((noinline, cold)) void ring_rewind(col_thread *t)
{
	uint64_t tail = t->tail, off = tail & (t->size - 1), lap = tail - off;
	if (off < t->size / 4) { /* a lap that wrapped by itself */
		t->rewind_at = lap + t->size / 4;
		t->lap_ticks = t->last_ticks;
		return;
	}
	uint64_t h = atomic_load_explicit(&t->head, memory_order_acquire);
	if (h < lap + t->size / 4 || t->last_ticks - t->lap_ticks < col_us_ticks * LAP_MIN_US) {
		t->rewind_at = tail + 4096;
		return;
	}
	atomic_store_explicit(&t->jump_from, tail, memory_order_relaxed);
	atomic_store_explicit(&t->jump_to, lap + t->size, memory_order_relaxed);
	t->tail = lap + t->size;
	t->head_cache = h;
	t->rewind_at = t->tail + t->size / 4;
	t->lap_ticks = t->last_ticks;
}

/* ev_start() past t->lim: the look at rewind_at, then where this event goes, and the new
 * limit: rewind_at's offset in this lap, or the lap's end; 0 after a wrapping event, so
 * that the first event of the next lap comes here for its lap's limit. */
static __attribute__((noinline)) uint8_t *ev_slow(col_thread *t, uint8_t *tmp)
{
	if (t->tail >= t->rewind_at)
		ring_rewind(t);
	uint64_t off = t->tail & (t->size - 1), at = t->rewind_at - (t->tail - off);
	t->lim = at < t->size ? at : t->size;
	if (t->size - off >= 32)
		return t->ring + off;
	t->lim = 0;
	return tmp;
}

/* Where to encode the next event: directly in the ring when 32 contiguous bytes are
 * free before the wrap point, else in `tmp` (then ring_put copies with wrap-around). One
 * compare, as before ring_rewind() came: t->lim is the nearer of the lap's end and the
 * next look at rewind_at. */
static inline uint8_t *ev_start(col_thread *t, uint8_t *tmp)
{
	uint64_t off = t->tail & (t->size - 1);
	if (likely(off + 32 <= t->lim))
		return t->ring + off;
	return ev_slow(t, tmp);
}

static inline void ev_commit(col_thread *t, uint8_t *p, uint8_t *tmp, size_t n)
{
	if (unlikely(p == tmp)) {
		uint64_t off = t->tail & (t->size - 1);
		size_t first = t->size - off < n ? (size_t)(t->size - off) : n;
		memcpy(t->ring + off, tmp, first);
		memcpy(t->ring, tmp + first, n - first);
	}
	uint64_t was = t->tail;
	t->tail += n;
	atomic_store_explicit(&t->committed, t->tail, memory_order_release);
	/* Every 64 KiB of events: if the writer dozes and the ring is an eighth full, wake it
	 * (one load and a branch here; the rest out of line). */
	if (unlikely((was ^ t->tail) >> COL_NUDGE_SHIFT) && atomic_load_explicit(&col_writer_dozing, memory_order_relaxed))
		col_ring_crossed(t);
}

/* The calling thread's state for session generation g (nonzero). */
static inline col_thread *self(uint32_t g)
{
	col_thread *t = col_tls;
	return likely(t != NULL && t->gen == g) ? t : col_thread_register();
}

#define ON() atomic_load_explicit(&col_on, memory_order_relaxed)

/*
 * The region's entry is stored before the depth that makes it visible, with a signal
 * fence between: the sampling signal's handler on this thread copies stack[0..depth)
 * (col_region_stack), and a sample that fell between the two read the entry left by the
 * previous region at that depth, or 0 for a fresh thread (a sample with region 0, which
 * the reader rejects as corrupt: test_api_sessions_while_threads_record).
 */
static inline void begin_id(col_thread *t, uint32_t id)
{
	uint32_t d = t->depth;
	uint32_t mark = 0;
	if (unlikely(d >= COL_MAX_DEPTH)) {
		t->depth = d + 1;
		atomic_fetch_add_explicit(&t->dropped, 1, memory_order_relaxed);
		return;
	}
	if (unlikely(!atomic_load_explicit(&col_gate, memory_order_relaxed)))
		mark = COL_UNREC_GATED;
	else if (unlikely(!ring_room(t, FMT_EV_BEGIN_MAX + FMT_EV_END_MAX)))
		mark = COL_UNREC_DROPPED;
	t->stack[d] = id | mark;
	atomic_signal_fence(memory_order_seq_cst);
	t->depth = d + 1;
	if (unlikely(mark)) {
		if (mark == COL_UNREC_DROPPED)
			atomic_fetch_add_explicit(&t->dropped, 1, memory_order_relaxed);
		return;
	}
	uint8_t tmp[32];
	uint8_t *p = ev_start(t, tmp);
	uint64_t now = col_ticks();
	size_t n = fmt_enc_begin(p, id, now, &t->last_ticks);
	t->reserve += FMT_EV_END_MAX;
	ev_commit(t, p, tmp, n);
}

API void fennec_region_begin(const char *name)
{
	uint32_t g = ON();
	if (likely(!g) || !name)
		return;
	col_thread *t = self(g);
	if (unlikely(!t))
		return;
	begin_id(t, col_site_id(name, FMT_SITE_REGION, name, NULL, 0));
}

API void fennec_region_begin_site(fennec_site *site)
{
	uint32_t g = ON();
	if (likely(!g) || !site)
		return;
	col_thread *t = self(g);
	if (unlikely(!t))
		return;
	uint32_t id = __atomic_load_n(&site->id_, __ATOMIC_RELAXED);
	if (unlikely(!id)) {
		id = col_site_id(site, FMT_SITE_REGION, site->name, site->file, site->line);
		__atomic_store_n(&site->id_, id, __ATOMIC_RELAXED);
	}
	begin_id(t, id);
}

API void fennec_region_begin_id(uint32_t id)
{
	uint32_t g = ON();
	if (likely(!g))
		return;
	if (id == 0 || id >= atomic_load_explicit(&col_nsites, memory_order_acquire))
		return;
	col_thread *t = self(g);
	if (likely(t != NULL))
		begin_id(t, id);
}

API void fennec_region_end(void)
{
	/* The clock is read after the checks that let an idle collector return at once
	 * (a thread that never recorded has no state); they cost a few loads. */
	col_thread *t = col_tls;
	if (likely(!t))
		return;
	uint32_t g = ON();
	if (unlikely(t->gen != g)) {
		if (!g)
			return; /* stopped */
		t = col_thread_register(); /* fork child or restart: carries the open regions */
		if (!t)
			return;
	}
	if (unlikely(t->depth == 0))
		return; /* unbalanced, or began before fennec_start(): nothing to close */
	uint64_t now = col_ticks();
	uint32_t d = --t->depth;
	if (unlikely(d >= COL_MAX_DEPTH)) {
		atomic_fetch_add_explicit(&t->dropped, 1, memory_order_relaxed);
		return;
	}
	uint32_t e = t->stack[d];
	if (unlikely(e & (COL_UNREC_GATED | COL_UNREC_DROPPED))) {
		if (e & COL_UNREC_DROPPED)
			atomic_fetch_add_explicit(&t->dropped, 1, memory_order_relaxed);
		return;
	}
	/* Room is guaranteed: the begin reserved it. */
	uint8_t tmp[32];
	uint8_t *p = ev_start(t, tmp);
	size_t n = fmt_enc_end(p, now, &t->last_ticks);
	t->reserve -= FMT_EV_END_MAX;
	ev_commit(t, p, tmp, n);
}

/* Append a metric or step event; `gated` events are skipped outside recorded steps. */
static void put_event(col_thread *t, unsigned tag, uint32_t id, int gated, uint64_t a, double f)
{
	if (gated && !atomic_load_explicit(&col_gate, memory_order_relaxed))
		return;
	uint64_t now = col_ticks();
	if (unlikely(!ring_room(t, 32))) {
		atomic_fetch_add_explicit(&t->dropped, 1, memory_order_relaxed);
		return;
	}
	uint8_t tmp[32];
	uint8_t *p = ev_start(t, tmp);
	size_t n;
	switch (tag & 15) {
	case FMT_EV_STEP:
		n = fmt_enc_step(p, tag >> 4, a, now, &t->last_ticks);
		break;
	case FMT_EV_COUNTER:
		n = fmt_enc_counter(p, id, (int64_t)a, now, &t->last_ticks);
		break;
	default: /* GAUGE, VALUE */
		n = fmt_enc_f64(p, tag, id, f, now, &t->last_ticks);
		break;
	}
	ev_commit(t, p, tmp, n);
}

static void step(uint64_t items, int has_items)
{
	uint32_t g = ON();
	if (likely(!g))
		return;
	col_thread *t = self(g);
	if (unlikely(!t))
		return;
	uint64_t recorded;
	col_step_advance(&recorded);
	col_mem_step();
	unsigned s = (unsigned)(recorded ? 1 : 0) | (has_items ? 2 : 0);
	put_event(t, FMT_EV_STEP | s << 4, 0, 0, items, 0);
	col_lazy_point();
}

API void fennec_step(void) { step(0, 0); }
API void fennec_step_items(uint64_t items) { step(items, 1); }

API void fennec_counter_add(const char *name, int64_t d)
{
	uint32_t g = ON();
	if (likely(!g) || !name)
		return;
	col_thread *t = self(g);
	if (unlikely(!t))
		return;
	uint32_t id = col_site_id(name, FMT_SITE_COUNTER, name, NULL, 0);
	put_event(t, FMT_EV_COUNTER, id, 1, (uint64_t)d, 0);
}

static void metric_f64(const char *name, unsigned kind, unsigned tag, double v)
{
	uint32_t g = ON();
	if (likely(!g) || !name)
		return;
	col_thread *t = self(g);
	if (unlikely(!t))
		return;
	uint32_t id = col_site_id(name, kind, name, NULL, 0);
	put_event(t, tag, id, 1, 0, v);
}

API void fennec_gauge_set(const char *name, double v) { metric_f64(name, FMT_SITE_GAUGE, FMT_EV_GAUGE, v); }
API void fennec_value_record(const char *name, double v) { metric_f64(name, FMT_SITE_VALUE, FMT_EV_VALUE, v); }

API void fennec_region_work(uint64_t flops, uint64_t bytes)
{
	/* Literals: their addresses are the sites' keys (col_site_id). */
	if (flops)
		fennec_counter_add("fennec.flops", (int64_t)flops);
	if (bytes)
		fennec_counter_add("fennec.bytes", (int64_t)bytes);
}

API void fennec_region_work_fp32(uint64_t flops, uint64_t bytes)
{
	if (flops)
		fennec_counter_add("fennec.flops32", (int64_t)flops);
	fennec_region_work(flops, bytes);
}

/*
 * What one region event costs the thread that records it, for the profile's COST chunk
 * (docs/format.md; docs/internals/collect.md, "What fennec costs"): 8 rounds of 256
 * begin/end pairs into a scratch ring of 16 KiB that no writer reads, on the calling
 * thread (the flushing one) with its state swapped for the scratch one and its signals
 * blocked (a sample must not see the scratch regions); the fastest round, in picoseconds
 * per event (half a pair). About 20 us in all. Called under the flush lock.
 */
static __attribute__((noinline)) void calib_pair(uint32_t g)
{
	col_thread *t = self(g);
	if (likely(t != NULL))
		begin_id(t, 1);
	fennec_region_end();
}

uint64_t col_event_cost_ps(double ticks_per_ns)
{
	static uint8_t ring[16384] __attribute__((aligned(64)));
	static col_thread scratch;
	uint32_t g = ON();
	if (!g || ticks_per_ns <= 0)
		return 0;
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old);
	col_thread *was = col_tls;
	memset(&scratch, 0, sizeof scratch);
	scratch.ring = ring;
	scratch.size = sizeof ring;
	scratch.gen = g;
	scratch.rewind_at = UINT64_MAX;
	scratch.lim = scratch.size;
	col_tls = &scratch;
	uint64_t best = UINT64_MAX;
	for (int r = 0; r < 8; r++) {
		scratch.tail = scratch.head_cache = scratch.reserve = 0;
		scratch.depth = 0;
		atomic_store_explicit(&scratch.head, 0, memory_order_relaxed);
		atomic_store_explicit(&scratch.committed, 0, memory_order_relaxed);
		scratch.last_ticks = col_ticks();
		uint64_t t0 = col_ticks();
		for (int i = 0; i < 256; i++)
			calib_pair(g);
		uint64_t dt = col_ticks() - t0;
		if (dt < best)
			best = dt;
	}
	col_tls = was;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return (uint64_t)((double)best / ticks_per_ns * 1000.0 / 512.0);
}

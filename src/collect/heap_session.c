/*
 * heap_session.c - the heap profiler's session, run by the session's code (session.c) on the
 * thread that starts, stops, forks or execs: the environment it reads, the start and stop
 * of recording, the timeline's ticks; and the public counters (fennec_memory_stats()) and
 * what the COST and STATS chunks ask of the heap.
 */
#include <fcntl.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>

#include "collect/heap.h"

/* ---- the public counters ---- */

static void open_statm(void)
{
	if (M.statm_fd < 0)
		M.statm_fd = col_fd_keep(open("/proc/self/statm", O_RDONLY | O_CLOEXEC));
	M.page = sysconf(_SC_PAGESIZE);
}

API int fennec_memory_stats(fennec_mem_stats *out)
{
	if (!out || out->size < sizeof(uint32_t) + sizeof(int))
		return FENNEC_EINVAL;
	fennec_mem_stats s;
	memset(&s, 0, sizeof s);
	s.size = sizeof s;
	int was = col_mem_internal(1);
	s.tracking = atomic_load(&resolved) == 2 && HEAP_KIND() != HEAP_NONE;
	if (s.tracking) {
		totals t;
		sum_totals(&t);
		s.heap_bytes = live_now();
		/* the shared peak counts what threads folded (exact to LIVE_BATCH per thread); the
		 * heap now, their batches included, may be above it: then it is the peak */
		if (s.heap_bytes > atomic_load(&peak))
			raise_peak(s.heap_bytes);
		s.heap_peak_bytes = atomic_load(&peak);
		if (s.heap_peak_bytes < s.heap_bytes)
			s.heap_peak_bytes = s.heap_bytes;
		s.allocations = t.allocs;
		s.frees = t.frees;
		s.allocated_bytes = t.bytes;
		s.largest_bytes = t.largest;
	}
	/* VmRSS and VmHWM from /proc/self/status */
	int fd = open("/proc/self/status", O_RDONLY | O_CLOEXEC);
	if (fd >= 0) {
		char buf[4096];
		ssize_t n = read(fd, buf, sizeof buf - 1);
		close(fd);
		if (n > 0) {
			buf[n] = 0;
			char *q = strstr(buf, "VmRSS:");
			if (q)
				s.rss_bytes = strtoull(q + 6, NULL, 10) * 1024;
			q = strstr(buf, "VmHWM:");
			if (q)
				s.rss_peak_bytes = strtoull(q + 6, NULL, 10) * 1024;
		}
	}
	col_mem_internal(was);
	uint32_t size = out->size < sizeof s ? out->size : (uint32_t)sizeof s;
	memcpy(out, &s, size);
	out->size = size;
	return 0;
}

int col_mem_internal(int on)
{
	int was = T.internal;
	T.internal = (uint8_t)on;
	gate_update();
	return was;
}

int col_mem_busy(void)
{
	return T.own != 0;
}

int col_mem_lazy_ok(void)
{
	return !MEM_SANITIZER && HEAP_KIND() == HEAP_GLIBC;
}

uint64_t col_mem_calls(void)
{
	if (atomic_load(&resolved) != 2 || HEAP_KIND() == HEAP_NONE)
		return 0;
	totals t;
	sum_totals(&t);
	return t.allocs + t.frees;
}


void col_mem_dropped(uint64_t *allocs, uint64_t *frees)
{
	*allocs = atomic_load_explicit(&M.dropped_allocs, memory_order_relaxed);
	*frees = atomic_load_explicit(&M.dropped_frees, memory_order_relaxed);
}

/* Set the filter for the mode that starts: in full mode every bit, so that every free
 * leaves free()'s inline path for the general one, which reads the mode; else the bits of
 * the sampled blocks still in the set (from earlier sessions: their frees are still looked
 * for). No sampled block is added or removed meanwhile: the mode is not sampled. */
static void filter_fill(int mode)
{
	for (uint32_t w = 0; w < FILTER_BITS / 64; w++) {
		uint64_t bits = 0;
		for (uint32_t b = 0; b < 64; b++)
			if (mode == FMT_MEM_FULL || atomic_load_explicit(&M.filter_count[w * 64 + b], memory_order_relaxed))
				bits |= 1ull << b;
		atomic_store_explicit(&M.filter[w], bits, memory_order_relaxed);
	}
}


/* ---- the session ---- */

int col_mem_mode_parse(const char *s)
{
	if (!s || !*s || !strcmp(s, "off") || !strcmp(s, "none"))
		return s && *s ? FMT_MEM_OFF : -1;
	if (!strcmp(s, "sampled"))
		return FMT_MEM_SAMPLED;
	if (!strcmp(s, "full"))
		return FMT_MEM_FULL;
	return -1;
}


/* The heap ring's size for a session in `mode`: the mode's default, or FENNEC_HEAP_RING
 * bytes (a power of two from 64 KiB to 1 GiB; others between are rounded up to one, others
 * outside taken to the nearest bound, with a word (col_env_number())): larger for bursts the
 * writer cannot keep up with, small for tests of what a full ring loses. */
static uint64_t ring_size(int mode)
{
	uint64_t v = col_env_number("FENNEC_HEAP_RING", mode == FMT_MEM_FULL ? RING_FULL : RING_SAMPLED,
				    64u << 10, 1u << 30, "bytes");
	uint64_t n = 64u << 10;
	while (n < v)
		n <<= 1;
	return n;
}

void col_mem_prepare(int mode, uint64_t rate, uint32_t interval_ms, uint32_t depth, col_mem_info *info)
{
	ready();
#if !MEM_SANITIZER
	static pthread_once_t fork_once = PTHREAD_ONCE_INIT;
	pthread_once(&fork_once, own_atfork);
#endif
	if (MEM_SANITIZER || HEAP_KIND() == HEAP_NONE)
		mode = FMT_MEM_OFF; /* nothing interposed: no heap data */
	M.session_mode = mode;
	if (mode != FMT_MEM_OFF) { /* the segments the reachability scan leaves out */
		SELF.n = RT.n = 0;
		dl_iterate_phdr(self_segments, (void *)(uintptr_t)&col_mem_prepare);
	}
	/* The environment, read before the header is written, whatever the mode (as
	 * FENNEC_MEMORY_RATE is): a value that cannot be used is said there (col_config_warn()),
	 * the default taken. fennec record --memory-mmap: the smallest mapping counted (bytes;
	 * unset or 0: none; libfennec-mmap.so reports them). */
	uint64_t mmap_min = col_env_number("FENNEC_MEMORY_MMAP", 0, 0, 1u << 30, "bytes (0: none)");
	M.ring_bytes = ring_size(mode);
	M.scan_ms = col_env_number("FENNEC_LEAK_SCAN_MS", 10000, 0, 3600000, "ms (0: no scan)");
	const char *hu = getenv("FENNEC_HEAP_UNWIND");
	if (heap_unwind_parse(hu) < 0)
		col_config_warn("FENNEC_HEAP_UNWIND", hu,
				"expected 1 (fennec's rules, then libgcc), gcc, 0 (libunwind) or check; using 1");
#if !MEM_SANITIZER
	MAPS.min = mode != FMT_MEM_OFF ? mmap_min : 0;
#else
	(void)mmap_min;
#endif
	M.rate = rate ? rate : 512 * 1024;
	M.interval_ns = (uint64_t)(interval_ms ? interval_ms : 50) * 1000000u;
	M.depth = depth < 1 ? 1 : depth > COL_SAMPLE_MAX_DEPTH ? COL_SAMPLE_MAX_DEPTH : depth;
	info->mode = (unsigned)mode;
	info->rate = M.rate;
	info->interval_ns = M.interval_ns;
#if !MEM_SANITIZER
	info->mmap_min = MAPS.min;
#endif
}


/* HEAP2 times are in units of 2^shift ticks, the largest power of two not over
 * HEAP_TIME_UNIT_US (docs/format.md): ticks per microsecond measured over 20 us of
 * CLOCK_MONOTONIC. Heap event times serve the peak's time (the counters carry it exactly)
 * and the sampled live set at the peak; the timeline is SNAP's. A unit of 10 us made the
 * TIME records half of the file of a compiler (cc1plus: 5.5 MB with it, 2.6 MB without
 * them): its ~800,000 allocations and frees a second change the time at nearly every
 * record, and the deltas do not compress. */
#define HEAP_TIME_UNIT_US 1000
static unsigned time_shift(void)
{
	struct timespec a, b;
	clock_gettime(CLOCK_MONOTONIC, &a);
	uint64_t t0 = col_ticks(), ns;
	do {
		clock_gettime(CLOCK_MONOTONIC, &b);
		ns = (uint64_t)(b.tv_sec - a.tv_sec) * 1000000000u + (uint64_t)b.tv_nsec - (uint64_t)a.tv_nsec;
	} while (ns < 20000);
	double per_us = (double)(col_ticks() - t0) * 1000.0 / (double)ns;
	unsigned shift = 0;
	while (shift < 40 && (double)(2ull << shift) <= HEAP_TIME_UNIT_US * per_us)
		shift++;
	return shift;
}

/* M.limit for a mode (alloc_gate()). */
static int64_t limit_of(int mode)
{
	return mode == FMT_MEM_SAMPLED ? 0 : mode == FMT_MEM_FULL ? INT64_MAX : INT64_MIN;
}


void col_mem_start(void)
{
	if (M.session_mode == FMT_MEM_OFF)
		return;
	if (col_ring_init(&M.ring, M.ring_bytes) < 0) {
		M.session_mode = FMT_MEM_OFF;
		return;
	}
	open_statm();
	atomic_store_explicit(&filter_pid, getpid(), memory_order_relaxed);
	const char *fd = getenv("FENNEC_FILTER_DELAY_US");
	atomic_store_explicit(&filter_delay_us, fd && *fd ? (uint32_t)strtoul(fd, NULL, 10) : 0, memory_order_relaxed);
#if !MEM_SANITIZER
	/* Per-thread unwind caches where libunwind has them (Debian's has not, and takes the
	 * global one instead: sc_fill() uses libgcc's unwinder). */
	unw_set_caching_policy(unw_local_addr_space, UNW_CACHE_PER_THREAD);
	void *warm[8];
	unw_backtrace(warm, 8); /* the unwinder's first use allocates its caches */
	heap_unwind_init();
#endif
	totals t;
	sum_totals(&t);
	M.base_allocs = t.allocs;
	M.base_frees = t.frees;
	M.base_bytes = t.bytes;
	atomic_store(&peak, live_now());
	atomic_store(&peak_ticks, col_ticks());
	atomic_store(&peak_step, 0);
	atomic_store(&peak_site, 0);
	M.records = 0;
	atomic_store(&M.dropped, 0);
	atomic_store(&M.dropped_allocs, 0);
	atomic_store(&M.dropped_frees, 0);
	atomic_store(&M.truncated, 0);
	atomic_store(&M.untracked, 0);
	M.next_snap_ns = 0;
	writer_reset(); /* a new file: stack ids and live blocks start over */
	atomic_fetch_add(&M.gen, 1); /* and threads' MREC_SAME hints with them */
	M.shift = time_shift();
	if (M.session_mode == FMT_MEM_FULL)
		filter_fill(FMT_MEM_FULL);
	/* The gate closes before the mode is set (an allocation taking the general path
	 * meanwhile finds the mode off and only counts), and opens after it is cleared. */
	atomic_store(&M.limit, limit_of(M.session_mode));
	atomic_store_explicit(&M.mode, M.session_mode, memory_order_release);
	snapshot(FMT_SNAP_TIMER);
}

void col_mem_stop(int unwind)
{
	if (!atomic_load(&M.mode))
		return;
	snapshot(FMT_SNAP_FINAL);
	note_stop_sp(unwind);
	atomic_store_explicit(&M.mode, FMT_MEM_OFF, memory_order_release);
	atomic_store(&M.limit, INT64_MIN);
	if (M.session_mode == FMT_MEM_FULL)
		filter_fill(FMT_MEM_OFF);
}

/* Before an exec: the image's last timeline point (exec_prepare()). If the exec fails, the
 * timeline goes on; FINAL points stay out of the growth fit either way. */
void col_mem_exec(void)
{
	if (atomic_load(&M.mode))
		snapshot(FMT_SNAP_FINAL);
}

void col_mem_step(void)
{
	if (atomic_load_explicit(&M.mode, memory_order_relaxed))
		snapshot(FMT_SNAP_STEP);
}

void col_mem_tick(uint64_t now_ns)
{
	if (!atomic_load_explicit(&M.mode, memory_order_relaxed) || now_ns < M.next_snap_ns)
		return;
	if (M.next_snap_ns)
		snapshot(FMT_SNAP_TIMER);
	M.next_snap_ns = now_ns + M.interval_ns;
}

int col_mem_mode(void) { return atomic_load_explicit(&M.mode, memory_order_relaxed); }

unsigned col_mem_fill_pm(void)
{
	return M.ring.buf ? (unsigned)(col_ring_used(&M.ring) * 1000 / M.ring.size) : 0;
}

void col_mem_atfork_parent(void)
{
	M.forked = 1;
}

void col_mem_atfork_child(void)
{
	T.tid = 0;
	M.fork_child = 1;
	M.forked = 0;
#if !MEM_SANITIZER
	atomic_flag_clear(&MAPS.lock); /* held by a thread the child does not have */
#endif
	atomic_store(&clearing, 0); /* likewise: filter_sub()'s threads are not here */
	clearing_here = 0;
	if (T.stacks)
		T.stacks->epoch++; /* the child's file starts without this thread's stacks */
	slots_fork_child();
	atomic_store(&M.mode, FMT_MEM_OFF);
	atomic_store(&M.limit, INT64_MIN);
	if (M.session_mode == FMT_MEM_FULL)
		filter_fill(FMT_MEM_OFF);
	col_ring_reset(&M.ring);
	writer_reset();
	M.statm_fd = -1; /* close-on-exec, and still ours: reopened at start */
}

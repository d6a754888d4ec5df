/*
 * heap_hooks.c - the heap profiler on the program's threads. libfennec interposes the malloc
 * family (malloc, calloc, realloc, reallocarray, free, posix_memalign, aligned_alloc,
 * memalign, valloc, pvalloc) and keeps exact counters from the start of the process:
 * per-thread slots for counts, one atomic for live bytes and the peak. During a recording
 * it also writes heap events into a shared ring (ring.h): in sampled mode the allocations
 * picked by Poisson sampling over bytes, with their stacks, and the frees of those; in full
 * mode every allocation and free; and the timeline's SNAP records. Everything that writes
 * the ring is here, with the wrappers' inline paths, in one translation unit. The writer
 * turns the records into HEAP chunks (heap_writer.c). Design notes: docs/memory.md.
 */
#include <dlfcn.h>
#include <errno.h>
#include <gnu/libc-version.h>
#include <math.h>
#include <pthread.h>
#include <sched.h>
#include <signal.h>
#include <stdatomic.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <unwind.h>

#include "collect/pyframes.h"
#include "collect/heap.h"

extern void *__libc_malloc(size_t);
extern void *__libc_calloc(size_t, size_t);
extern void *__libc_realloc(void *, size_t);
extern void __libc_free(void *);
extern void *__libc_memalign(size_t, size_t);
extern void *__libc_valloc(size_t);
extern void *__libc_pvalloc(size_t);

static void *stub_malloc(size_t n);
static void *stub_calloc(size_t n, size_t size);
static void *stub_realloc(void *p, size_t n);
static void stub_free(void *p);
static void *stub_memalign(size_t align, size_t n);
static void *stub_aligned_alloc(size_t align, size_t n);
static int stub_posix_memalign(void **out, size_t align, size_t n);
static void *stub_valloc(size_t n);
static void *stub_pvalloc(size_t n);

/* The next allocator (heap.h). Until it is resolved these are stubs that resolve it and
 * call it: the wrappers' common path need not check. */
struct col_heap_next R = {stub_malloc, stub_calloc, stub_realloc, NULL, stub_free, stub_memalign, stub_aligned_alloc,
			  stub_posix_memalign, stub_valloc, stub_pvalloc, NULL};
_Atomic int resolved; /* 0: not yet, 1: resolving, 2: done */
_Atomic int heap_kind_;

static mem_slot slots[MEM_SLOTS];
static mem_slot shared, retired; /* atomically updated */
static _Atomic uint32_t slots_hwm;
static _Atomic int64_t live;      /* usable bytes of live blocks */
_Atomic uint64_t peak;
_Atomic uint64_t peak_ticks, peak_step;
_Atomic uint32_t peak_site;
static pthread_key_t slot_key;
static pthread_once_t key_once = PTHREAD_ONCE_INIT;
static int key_ok;

__thread mem_tls T;
struct col_heap_state M = {.statm_fd = -1, .limit = INT64_MIN};

/* ---- resolving the real allocator ---- */

static void *sym(const char *name, void *fallback)
{
	void *f = dlsym(RTLD_NEXT, name);
	return f ? f : fallback;
}

/* The start of the loaded object that holds f: glibc's lock-free lookup (dladdr, the
 * fallback, also searches the object's symbols for the nearest: four calls were 1.4 % of
 * a shell loop of /bin/true under fennec record). */
static const void *object_of(const void *f)
{
	struct dl_find_object o;
	if (_dl_find_object((void *)f, &o) == 0)
		return o.dlfo_map_start;
	Dl_info a;
	return dladdr(f, &a) ? a.dli_fbase : NULL;
}

/* Whether f is in glibc's libc: the object that defines gnu_get_libc_version. Comparing
 * with __libc_malloc proves nothing: tcmalloc exports __libc_malloc, __libc_free and the
 * rest as its own, so with it preloaded fennec read glibc chunk headers out of tcmalloc's
 * blocks (live bytes stayed at 0, or jumped to 9.2e18). */
static int in_glibc(const void *f)
{
	const void *o = object_of(f);
	return o && o == object_of((const void *)gnu_get_libc_version);
}

void resolve(void)
{
	int expect = 0;
	if (!atomic_compare_exchange_strong(&resolved, &expect, 1)) {
		while (atomic_load(&resolved) != 2)
			sched_yield();
		return;
	}
	T.resolving = 1;
	R.malloc = (malloc_fn)sym("malloc", (void *)__libc_malloc);
	R.calloc = (calloc_fn)sym("calloc", (void *)__libc_calloc);
	R.realloc = (realloc_fn)sym("realloc", (void *)__libc_realloc);
	R.reallocarray = (reallocarray_fn)sym("reallocarray", NULL);
	R.free = (free_fn)sym("free", (void *)__libc_free);
	R.memalign = (memalign_fn)sym("memalign", (void *)__libc_memalign);
	R.aligned_alloc = (memalign_fn)sym("aligned_alloc", (void *)__libc_memalign);
	R.posix_memalign = (posix_memalign_fn)sym("posix_memalign", NULL);
	if (!R.posix_memalign)
		R.posix_memalign = stub_posix_memalign; /* then memalign's, as the stub does */
	R.valloc = (valloc_fn)sym("valloc", (void *)__libc_valloc);
	R.pvalloc = (valloc_fn)sym("pvalloc", (void *)__libc_pvalloc);
	R.usable = (usable_fn)sym("malloc_usable_size", NULL);
	const char *e = getenv("FENNEC_MEMORY");
	int kind;
	if (!R.usable || (e && !strcmp(e, "none")))
		kind = HEAP_NONE;
	else if (in_glibc((void *)R.malloc) && in_glibc((void *)R.free))
		kind = HEAP_GLIBC;
	else
		kind = HEAP_OTHER;
	atomic_store_explicit(&heap_kind_, kind, memory_order_relaxed);
	T.resolving = 0;
	gate_update();
	atomic_store(&resolved, 2);
}


static void *stub_malloc(size_t n) { resolve(); return R.malloc(n); }
static void *stub_calloc(size_t n, size_t size) { resolve(); return R.calloc(n, size); }
static void *stub_realloc(void *p, size_t n) { resolve(); return R.realloc(p, n); }
static void stub_free(void *p) { resolve(); R.free(p); }
static void *stub_memalign(size_t align, size_t n) { resolve(); return R.memalign(align, n); }
static void *stub_aligned_alloc(size_t align, size_t n) { resolve(); return R.aligned_alloc(align, n); }
static void *stub_valloc(size_t n) { resolve(); return R.valloc(n); }
static void *stub_pvalloc(size_t n) { resolve(); return R.pvalloc(n); }

static int stub_posix_memalign(void **out, size_t align, size_t n)
{
	resolve();
	if (R.posix_memalign != stub_posix_memalign)
		return R.posix_memalign(out, align, n);
	return (*out = R.memalign(align, n)) ? 0 : ENOMEM; /* the next allocator has none */
}

/* ---- counters ---- */

/*
 * The usable size of a live block. glibc's malloc_usable_size also checks that the block
 * is in use, which reads the next chunk's header: a cache miss that cost more than the
 * allocation itself on malloc-heavy programs. When glibc's allocator is the one we call,
 * read the block's own chunk header (the size word before the block: low bits are flags,
 * 2 = mmapped); any other allocator is asked.
 */
static inline size_t glibc_usable(const void *p)
{
	size_t h = ((const size_t *)p)[-1];
	return (h & ~(size_t)7) - 8 - ((h & 2) << 2); /* an mmapped chunk has 8 bytes more */
}

static inline size_t usable_size(void *p)
{
	return likely(HEAP_KIND() == HEAP_GLIBC) ? glibc_usable(p) : R.usable(p);
}

static void slot_release(void *arg)
{
	mem_slot *s = arg;
	atomic_fetch_add(&live, atomic_load(&s->live_delta));
	atomic_store(&s->live_delta, 0);
	uint64_t re = atomic_load(&s->reallocs);
	atomic_fetch_add(&retired.allocs, atomic_load(&s->allocs) + re);
	atomic_fetch_add(&retired.frees, atomic_load(&s->frees) + re);
	atomic_fetch_add(&retired.bytes, atomic_load(&s->bytes));
	uint64_t l = atomic_load(&s->largest), r = atomic_load(&retired.largest);
	while (l > r && !atomic_compare_exchange_weak(&retired.largest, &r, l))
		;
	atomic_store(&s->allocs, 0);
	atomic_store(&s->frees, 0);
	atomic_store(&s->reallocs, 0);
	atomic_store(&s->bytes, 0);
	atomic_store(&s->largest, 0);
	atomic_store(&s->sample_at, 0);
	atomic_store_explicit(&s->used, 0, memory_order_release);
}

static void thread_gone(void *arg)
{
	mem_slot *s = arg;
	T.countdown = (int64_t)(atomic_load_explicit(&s->sample_at, memory_order_relaxed) - atomic_load_explicit(&s->bytes, memory_order_relaxed));
	slot_release(arg);
#if !MEM_SANITIZER
	if (T.stack_hi && getpid() != (pid_t)syscall(SYS_gettid)) /* the main thread's is [stack] */
		dead_stack_add(T.stack_lo, T.stack_hi);
	sc_release();
#endif
	T.slot = T.fast = NULL; /* frees by later destructors of this thread count in `shared` */
}

static void make_key(void)
{
	key_ok = pthread_key_create(&slot_key, thread_gone) == 0;
}

/* A slot for this thread, or NULL (then it counts in `shared`). */
static __attribute__((noinline)) mem_slot *claim_slot(void)
{
	T.claimed = 1;
	int was = T.internal;
	T.internal = 1; /* pthread_setspecific may allocate: fennec's block */
	pthread_once(&key_once, make_key);
	mem_slot *got = NULL;
	for (uint32_t i = 0; key_ok && i < MEM_SLOTS && !got; i++) {
		int z = 0;
		if (atomic_load_explicit(&slots[i].used, memory_order_relaxed) ||
		    !atomic_compare_exchange_strong(&slots[i].used, &z, 1))
			continue;
		uint32_t h = atomic_load(&slots_hwm);
		while (h < i + 1 && !atomic_compare_exchange_weak(&slots_hwm, &h, i + 1))
			;
		if (pthread_setspecific(slot_key, &slots[i]) != 0) {
			atomic_store(&slots[i].used, 0);
			break;
		}
		got = &slots[i];
	}
	T.internal = (uint8_t)was;
	T.slot = got;
	if (got)
		atomic_store_explicit(&got->sample_at, T.countdown > 0 ? (uint64_t)T.countdown : 0, memory_order_relaxed); /* its bytes are 0 */
	gate_update();
	return got;
}

/* Raise the peak to `now`. While recording, note its time (in T.peak_at), step and
 * region, and return 1. */
int raise_peak(uint64_t now)
{
	uint64_t p = atomic_load_explicit(&peak, memory_order_relaxed);
	while (now > p) {
		if (atomic_compare_exchange_weak_explicit(&peak, &p, now, memory_order_relaxed, memory_order_relaxed)) {
			if (!atomic_load_explicit(&M.mode, memory_order_relaxed))
				return 0;
			uint32_t r[COL_MAX_DEPTH];
			uint32_t nr = col_region_stack(r, COL_MAX_DEPTH);
			T.peak_at = col_ticks();
			atomic_store_explicit(&peak_ticks, T.peak_at, memory_order_relaxed);
			atomic_store_explicit(&peak_step, col_step_index(), memory_order_relaxed);
			atomic_store_explicit(&peak_site, nr ? r[nr - 1] : 0, memory_order_relaxed);
			return 1;
		}
	}
	return 0;
}

/* Add a thread's batched live bytes to the shared count. Returns 1 when that raised the
 * peak while recording. */
static __attribute__((noinline)) int fold_live(int64_t d)
{
	int64_t now = atomic_fetch_add_explicit(&live, d, memory_order_relaxed) + d;
	if (d > 0 && now > 0 && (uint64_t)now > atomic_load_explicit(&peak, memory_order_relaxed))
		return raise_peak((uint64_t)now);
	return 0;
}

#define GET(f) atomic_load_explicit(&(f), memory_order_relaxed)
#define SET(f, v) atomic_store_explicit(&(f), (v), memory_order_relaxed)
/* Read a field of the thread's own slot, which only this thread writes: a plain load, which
 * the compiler may fold into the instruction that uses it (it does not fold GET's). */
#define OWN(f) (*(const __typeof__((f) + 0) *)&(f))
/* Add to a counter only its owner thread writes: one instruction adding to memory on x86-64
 * (an aligned 8-byte store, which a reader's relaxed load sees whole), where GET and SET
 * take three. Not atomic against another writer: there is none. */
#if defined(__x86_64__)
#define ADD(f, v) __asm__("addq %1, %0" : "+m"(*(uint64_t *)&(f)) : "er"((uint64_t)(v)))
#else
#define ADD(f, v) SET(f, GET(f) + (v))
#endif

/*
 * Count `nalloc` allocations of `bytes` (the largest candidate too), `nfree` frees and a
 * change of `dlive` usable bytes on the thread's own slot: plain loads and stores, no
 * atomic operation. Callers pass constants, so the counts they do not change cost nothing.
 * Live bytes fold into the shared count once the batch reaches LIVE_BATCH either way.
 * Returns 1 when this raised the peak.
 */
static inline int count_own(mem_slot *s, uint64_t nalloc, uint64_t nfree, uint64_t bytes, int64_t dlive)
{
	if (nalloc) {
		ADD(s->allocs, nalloc);
		ADD(s->bytes, bytes);
		if (bytes > OWN(s->largest))
			SET(s->largest, bytes);
	}
	if (nfree)
		ADD(s->frees, nfree);
	int64_t d = OWN(s->live_delta) + dlive;
	if (likely((uint64_t)(d + LIVE_BATCH - 1) <= 2 * (uint64_t)(LIVE_BATCH - 1))) {
		SET(s->live_delta, d);
		return 0;
	}
	SET(s->live_delta, 0);
	return fold_live(d);
}

/* The same for a thread without a slot of its own (yet). */
static __attribute__((noinline)) int count_slow(uint64_t nalloc, uint64_t nfree, uint64_t bytes, int64_t dlive)
{
	mem_slot *s = T.claimed ? NULL : claim_slot();
	if (s)
		return count_own(s, nalloc, nfree, bytes, dlive);
	atomic_fetch_add_explicit(&shared.allocs, nalloc, memory_order_relaxed);
	atomic_fetch_add_explicit(&shared.frees, nfree, memory_order_relaxed);
	atomic_fetch_add_explicit(&shared.bytes, bytes, memory_order_relaxed);
	uint64_t l = GET(shared.largest);
	while (nalloc && bytes > l && !atomic_compare_exchange_weak(&shared.largest, &l, bytes))
		;
	return fold_live(dlive);
}

static inline int count(uint64_t nalloc, uint64_t nfree, uint64_t bytes, int64_t dlive)
{
	mem_slot *s = T.slot;
	if (likely(s != NULL))
		return count_own(s, nalloc, nfree, bytes, dlive);
	return count_slow(nalloc, nfree, bytes, dlive);
}


void sum_totals(totals *t)
{
	const mem_slot *all[3] = {&shared, &retired, NULL};
	memset(t, 0, sizeof *t);
	uint32_t n = atomic_load(&slots_hwm);
	for (uint32_t i = 0; i < n + 2; i++) {
		const mem_slot *s = i < n ? &slots[i] : all[i - n];
		uint64_t re = atomic_load_explicit(&s->reallocs, memory_order_relaxed);
		t->allocs += atomic_load_explicit(&s->allocs, memory_order_relaxed) + re;
		t->frees += atomic_load_explicit(&s->frees, memory_order_relaxed) + re;
		t->bytes += atomic_load_explicit(&s->bytes, memory_order_relaxed);
		uint64_t l = atomic_load_explicit(&s->largest, memory_order_relaxed);
		if (l > t->largest)
			t->largest = l;
	}
}

uint64_t live_now(void)
{
	int64_t l = atomic_load_explicit(&live, memory_order_relaxed);
	uint32_t n = atomic_load(&slots_hwm);
	for (uint32_t i = 0; i < n; i++)
		l += atomic_load_explicit(&slots[i].live_delta, memory_order_relaxed);
	return l > 0 ? (uint64_t)l : 0;
}

/* ---- heap events ---- */

static inline uint64_t rng_next(void)
{
	uint64_t x = T.rng;
	if (!x)
		x = (uint64_t)(uintptr_t)&T ^ col_ticks() ^ 0x9e3779b97f4a7c15ull;
	x ^= x << 13;
	x ^= x >> 7;
	x ^= x << 17;
	T.rng = x;
	return x;
}

/* Bytes until the next sampled allocation: exponential with mean M.rate, so every byte
 * has the same chance 1/rate of being the one sampled (a Poisson process over bytes). */
static int64_t next_countdown(void)
{
	double u = (double)((rng_next() >> 11) + 1) / 9007199254740993.0; /* (0, 1] */
	double v = -log(u) * (double)M.rate;
	return v < 1 ? 1 : v > 4e18 ? (int64_t)4e18 : (int64_t)v;
}

static inline uint32_t addr_hash(uintptr_t p)
{
	return (uint32_t)(((uint64_t)p >> 4) * 0x9e3779b97f4a7c15ull >> 40);
}

/* The filter's bit of p: a block's address bits above its 16-byte granule, unhashed, so
 * that a free's check is a few shifts and a load. */
static inline uint32_t filter_bit(uintptr_t p)
{
	return (uint32_t)(p >> 4) & (FILTER_BITS - 1);
}

/*
 * The bit of a granule is on while its count is, but the count and the bit are two
 * words: filter_sub() takes the count to 0, clears the bit, then checks the count again
 * and sets the bit back if a block was added meanwhile. In between, the bit is off. A
 * block added in that window and freed by another thread before the check would have its
 * free missed (the block then reads as unfreed). So an adder does not hand its block out
 * while any thread is between those steps: `clearing` counts the threads there (other
 * than the adder's own, which a signal handler may have interrupted there: it does not
 * wait for itself), and the adder sets the bit again once none is. Sampled blocks are
 * rare (one per ~512 KiB allocated): two atomics on a free of one, a load on an
 * allocation of one. FENNEC_FILTER_DELAY_US (tests only) holds a remover in the window.
 */
_Atomic uint32_t clearing;
__thread uint8_t clearing_here;
_Atomic uint32_t filter_delay_us;
_Atomic pid_t filter_pid; /* the process of the session: a fork child, before its atfork
			    handler has reset `clearing`, does not wait on its parent's threads */

/* One more sampled block at p: the bit goes on with the first. */
static void filter_add(uintptr_t p)
{
	uint32_t i = filter_bit(p);
	_Atomic uint8_t *c = &M.filter_count[i];
	uint8_t v = atomic_load(c);
	while (v < 255 && !atomic_compare_exchange_weak(c, &v, v + 1))
		;
	atomic_fetch_or(&M.filter[i / 64], 1ull << (i % 64));
	if (unlikely(atomic_load(&clearing) != clearing_here)) {
		while (atomic_load(&clearing) != clearing_here &&
		       getpid() == atomic_load_explicit(&filter_pid, memory_order_relaxed))
			sched_yield();
		atomic_fetch_or(&M.filter[i / 64], 1ull << (i % 64));
	}
}

/* One sampled block at p fewer: the bit goes off with the last (see above). */
static void filter_sub(uintptr_t p)
{
	uint32_t i = filter_bit(p);
	_Atomic uint8_t *c = &M.filter_count[i];
	atomic_fetch_add(&clearing, 1);
	clearing_here++;
	uint8_t v = atomic_load(c);
	while (v > 0 && v < 255 && !atomic_compare_exchange_weak(c, &v, v - 1))
		;
	if (v == 1) {
		uint32_t delay = atomic_load_explicit(&filter_delay_us, memory_order_relaxed);
		if (unlikely(delay))
			usleep(delay);
		atomic_fetch_and(&M.filter[i / 64], ~(1ull << (i % 64)));
		if (unlikely(delay))
			usleep(delay);
		if (atomic_load(c))
			atomic_fetch_or(&M.filter[i / 64], 1ull << (i % 64));
	}
	clearing_here--;
	atomic_fetch_sub(&clearing, 1);
}

/* Returns 0 when the set has no room near p's hash: the block's free could not be seen,
 * so it is not recorded at all (counted as untracked): an ALLOC without its FREE would
 * read as a leak. */
static int set_insert(uintptr_t p)
{
	uint32_t h = addr_hash(p);
	for (uint32_t i = 0; i < SET_PROBES; i++) {
		_Atomic uintptr_t *e = &M.set[(h + i) & (SET_SIZE - 1)];
		uintptr_t cur = atomic_load_explicit(e, memory_order_relaxed);
		while (cur == 0 || cur == SET_TOMB) {
			if (atomic_compare_exchange_weak(e, &cur, p)) {
				filter_add(p);
				return 1;
			}
		}
	}
	atomic_fetch_add(&M.untracked, 1);
	return 0;
}

/* Whether p may be a sampled live block (in full mode: always): one load, in front of
 * set_remove(). */
static inline int set_may_hold(uintptr_t p)
{
	uint32_t i = filter_bit(p);
	return (atomic_load_explicit(&M.filter[i / 64], memory_order_relaxed) >> (i % 64)) & 1;
}

/* Whether p is a sampled live block; removes it. */
static __attribute__((noinline)) int set_remove(uintptr_t p)
{
	uint32_t h = addr_hash(p);
	for (uint32_t i = 0; i < SET_PROBES; i++) {
		_Atomic uintptr_t *e = &M.set[(h + i) & (SET_SIZE - 1)];
		uintptr_t cur = atomic_load_explicit(e, memory_order_relaxed);
		if (cur == 0)
			return 0;
		if (cur == p && atomic_compare_exchange_strong(e, &cur, SET_TOMB)) {
			filter_sub(p);
			return 1;
		}
	}
	return 0;
}


/* How a record that finds the ring full waits for the writer (up to about a second) rather
 * than be lost: a FREE of a recorded block always (a lost free would show as a leak), an
 * ALLOC in full mode only (a sampled one is dropped at once: the program is not held up
 * for a sample), a SNAP never (the writer takes them itself, and the stopping thread holds
 * the lock the writer drains under: waiting for room only delayed the drop by a second). */
enum { WAIT_FULL, WAIT_ALWAYS, WAIT_NEVER };

static __thread uint8_t rec_waited; /* a record waited for room (rec_clocked(): not timed) */

static __attribute__((noinline)) int reserve_wait(uint32_t len, uint64_t *pos, int wait)
{
	rec_waited = 1;
	for (int tries = 0;; tries++) {
		if (wait == WAIT_NEVER ||
		    (wait == WAIT_FULL && atomic_load_explicit(&M.mode, memory_order_relaxed) != FMT_MEM_FULL) ||
		    tries >= 2000) {
			atomic_fetch_add_explicit(&M.dropped, 1, memory_order_relaxed);
			/* WAIT_ALWAYS is a FREE's, WAIT_FULL an ALLOC's, WAIT_NEVER a SNAP's */
			if (wait != WAIT_NEVER)
				atomic_fetch_add_explicit(wait == WAIT_ALWAYS ? &M.dropped_frees : &M.dropped_allocs, 1,
							  memory_order_relaxed);
			return -1;
		}
		/* The writer may be asleep for a few ms (it looks at this ring on a timer): wake
		 * it, at the first try and before each sleep. With a 256 KiB ring, full mode
		 * took 49 s for mem_edge burst's 1.8M allocations without this. */
		struct timespec ts = {0, 500000};
		if (tries == 0 || tries >= 20)
			col_writer_nudge();
		if (tries < 20)
			sched_yield();
		else
			syscall(SYS_nanosleep, &ts, NULL);
		if (col_ring_reserve(&M.ring, len, pos) == 0)
			return 0;
	}
}

/* Reserve room for a record: inline, the wait out of line (a call for every record cost
 * ~20 instructions of full mode's ~425 a malloc/free pair). */
static inline int reserve(uint32_t len, uint64_t *pos, int wait)
{
	if (likely(col_ring_reserve(&M.ring, len, pos) == 0))
		return 0;
	return reserve_wait(len, pos, wait);
}

/* Ask for the cache line at p, owned (to be written). GCC emits PREFETCHW only when told
 * the CPU has it; every x86-64 CPU runs it (older Intel ones as a NOP). */
static inline void prefetch_write(const void *p)
{
#if defined(__x86_64__)
	__asm__ volatile("prefetchw %0" : : "m"(*(const char *)p));
#else
	__builtin_prefetch(p, 1);
#endif
}

/* Write a record of `hdr` header bytes stamped now, or at `ticks` when nonzero, followed
 * by the two tails; `wait`: whether to wait for room (reserve_wait()). The writer counts
 * the records it takes (M.records): no shared counter here. */
static inline __attribute__((always_inline)) int put_rec(mrec *r, size_t hdr, uint64_t ticks, const void *tail1,
							       size_t n1, const void *tail2, size_t n2, int wait)
{
	uint32_t len = (uint32_t)((hdr + n1 + n2 + 7) & ~(size_t)7);
	uint64_t pos;
	if (reserve(len, &pos, wait) < 0)
		return -1;
	/* The ring ahead was last written by the writer, a lap (megabytes) ago: ask for it now,
	 * to write, so that the records to come find it in the cache. */
	prefetch_write(M.ring.buf + ((pos + RING_AHEAD) & (M.ring.size - 1)));
	r->ticks = ticks ? ticks : col_ticks();
	uint8_t *d = col_ring_span(&M.ring, pos, len);
	if (likely(d != NULL)) {
		memcpy(d + 4, (const uint8_t *)r + 4, hdr - 4);
		if (n1)
			memcpy(d + hdr, tail1, n1);
		if (n2)
			memcpy(d + hdr + n1, tail2, n2);
	} else {
		col_ring_put(&M.ring, pos + 4, (const uint8_t *)r + 4, hdr - 4);
		col_ring_put(&M.ring, pos + hdr, tail1, n1);
		col_ring_put(&M.ring, pos + hdr + n1, tail2, n2);
	}
	col_ring_publish(&M.ring, pos, len);
	return 0;
}

/* ---- stacks of allocations (the walkers: heap_stacks.c) ---- */

#if !MEM_SANITIZER
static sc_cache *sc_get(void)
{
	if (likely(T.stacks != NULL) || T.no_cache)
		return T.stacks;
	T.no_cache = 1; /* until made */
	pthread_attr_t a;
	void *lo;
	size_t size;
	if (pthread_getattr_np(pthread_self(), &a) != 0)
		return NULL;
	int ok = pthread_attr_getstack(&a, &lo, &size) == 0;
	pthread_attr_destroy(&a);
	sc_cache *e = ok ? own_alloc(sizeof *e, 16) : NULL;
	if (!e)
		return NULL;
	memset(e, 0, sizeof *e);
	for (uint32_t i = 0; i < SC_ENTRIES; i++)
		e->sets[i / SC_WAYS].way[i % SC_WAYS].id = (uint8_t)i;
	e->epoch = 1;
	e->gen = atomic_load_explicit(&M.gen, memory_order_relaxed);
	T.stack_lo = (uintptr_t)lo;
	T.stack_hi = (uintptr_t)lo + size;
	dead_stack_take(T.stack_lo, T.stack_hi); /* live again */
	T.stacks = e;
	T.no_cache = 0;
	return e;
}

static inline int sc_valid(const sc_entry *e)
{
	for (uint32_t i = 1; i < e->n; i++)
		if (*(const uint64_t *)e->locs[i] != e->frames[i])
			return 0;
	return 1;
}

static int sc_fill(sc_entry *e, void **slot)
{
	uint32_t depth = sc_depth();
	int more = 0, n = -2;
	if (!__atomic_load_n(&G.backtrace, __ATOMIC_ACQUIRE)) {
		n = sc_walk_unw(e, slot, depth, &more);
	} else {
		int rules = 0;
		if (G.rules && (n = sc_walk_rules(e, slot, depth, &more)) != -2)
			rules = 1;
		if (n == -2)
			n = sc_walk_gcc(e, slot, depth, &more);
		if (unlikely(G.check))
			heap_unwind_compare(e, slot, depth, n, more, rules);
	}
	if (!sc_whole(n, more))
		return -1; /* not walked, or deeper than an entry holds */
	e->n = (uint32_t)n;
	e->truncated = more > 0;
	e->key = (uintptr_t)slot;
	e->sent = 0; /* new frames: the writer has not seen them */
	return 0;
}
#endif

/*
 * The stack of the allocation whose wrapper's return address is at `slot`: return
 * addresses, innermost first, fennec's frames left out. Returns how many; *truncated set
 * when the stack was deeper than M.depth (or unknown). From a cache entry (*from, frames
 * left in it), else unwound into the thread's cache's scratch, or without a cache into
 * `small` (SMALL_FRAMES), and *frames says where (*from NULL).
 */
#define SMALL_FRAMES 32
#define ALT_STACK_NEED (32u << 10) /* room below the caller to unwind on an alternate stack */
static uint32_t alloc_stack(void **slot, uint64_t *small, uint64_t **frames_out, uint8_t *truncated, sc_entry **from)
{
	uint64_t ra = (uint64_t)(uintptr_t)*slot;
	uint64_t *frames = small;
	int room = SMALL_FRAMES;
	*frames_out = small;
	*truncated = 0;
	*from = NULL;
#if !MEM_SANITIZER
	/* Off the thread's stack (or before it is known) and on a signal handler's alternate
	 * stack with less than ALT_STACK_NEED below: the caller alone. Such stacks often have
	 * 8 or 12 KiB (SIGSTKSZ is 8 KiB), and a crash handler that allocates there must not
	 * overrun it because it is profiled: libunwind takes ~10 KiB (unw_backtrace's context
	 * and cursor, DWARF state), the cache's first making (pthread_getattr_np reads
	 * /proc/self/maps through stdio) several more. Coroutines' stacks pay a sigaltstack()
	 * call per recorded allocation. */
	uintptr_t key = (uintptr_t)slot;
	stack_t alt;
	if ((!T.stacks || key < T.stack_lo || key >= T.stack_hi) && sigaltstack(NULL, &alt) == 0 &&
	    (alt.ss_flags & SS_ONSTACK) && key - (uintptr_t)alt.ss_sp < ALT_STACK_NEED) {
		frames[0] = ra;
		*truncated = 1;
		return 1;
	}
	sc_cache *cache = sc_get();
	if (cache) {
		frames = *frames_out = cache->scratch;
		room = (int)M.depth + 16;
	}
	if (cache && key >= T.stack_lo && key < T.stack_hi) {
		sc_set *set = cache->sets + ((key >> 3) * 0x9e3779b97f4a7c15ull >> 60); /* SC_SETS = 16 */
		sc_entry *e = NULL;
		for (int w = 0; w < SC_WAYS && !e; w++)
			if (set->way[w].key == key && set->way[w].frames[0] == ra && sc_valid(&set->way[w]))
				e = &set->way[w];
		if (!e && set->seen == key) { /* the second miss in a row at this key: fill */
			set->seen = 0;
			e = &set->way[set->next++ % SC_WAYS];
			if (sc_fill(e, slot) < 0) {
				e->key = 0;
				e = NULL;
			}
		} else if (!e) {
			set->seen = key;
		}
		if (e) {
			cache->recent = e;
			*truncated = e->truncated;
			*from = e;
			return e->n;
		}
		/* A first miss: the rules' walk where it can (libunwind's unw_backtrace took
		 * rt_sigprocmask calls whenever its trace cache missed: 77,000 for cc1plus). */
		int more = 0, nw = G.rules ? sc_walk_rules(&cache->once, slot, sc_depth(), &more) : -1;
		if (unlikely(G.check) && nw != -2 && G.rules)
			heap_unwind_compare(&cache->once, slot, sc_depth(), nw, more, 1);
		if (nw > 0 && sc_whole(nw, more)) {
			*frames_out = cache->once.frames;
			*truncated = more > 0;
			return (uint32_t)nw;
		}
		/* Then libgcc's unwinder, as sc_fill() does: libunwind's validates memory by
		 * writing to a pipe of its own, and a program that closed every descriptor by
		 * system call and put its file on the pipe's number got those bytes in its file
		 * (test_process.test_a_program_that_closes_every_descriptor). */
		if (G.rules && __atomic_load_n(&G.backtrace, __ATOMIC_ACQUIRE)) {
			more = 0;
			nw = sc_walk_gcc(&cache->once, slot, sc_depth(), &more);
			if (nw > 0 && sc_whole(nw, more)) {
				*frames_out = cache->once.frames;
				*truncated = more > 0;
				return (uint32_t)nw;
			}
		}
	}
	/* libgcc's unwinder where it was loaded (libunwind's validates memory through a pipe:
	 * see above); libunwind otherwise (FENNEC_HEAP_UNWIND=0) */
	int n;
	_Unwind_Reason_Code (*bt)(_Unwind_Trace_Fn, void *) = __atomic_load_n(&G.backtrace, __ATOMIC_ACQUIRE);
	if (G.rules && bt) {
		gcc_ips g = {frames, 0, room};
		bt(gcc_ip, &g);
		n = g.n;
	} else {
		n = unw_backtrace((void **)frames, room);
	}
#else
	int n = 0;
#endif
	/* Drop fennec's own frames: the stack starts at the return address of the wrapper. */
	int first = -1;
	for (int i = 0; i < n && i < 16; i++)
		if (frames[i] == ra) {
			first = i;
			break;
		}
	if (first < 0) {
		frames[0] = ra;
		*truncated = 1;
		return 1;
	}
	uint32_t nf = (uint32_t)(n - first) < M.depth ? (uint32_t)(n - first) : M.depth;
	if (n - first > (int)M.depth || n == room)
		*truncated = 1;
	memmove(frames, frames + first, 8 * (size_t)nf);
	return nf;
}

/* Time in the record paths below, for the COST chunk: one record in REC_TIMED of each
 * thread is timed (its count is a plain thread-local increment, the timed one pays two
 * clock reads and an atomic add), and counts REC_TIMED times. */
#define REC_TIMED 16
static _Atomic uint64_t rec_ticks;
static __thread uint32_t rec_n; /* records of this thread, for the 1 in REC_TIMED */

static inline uint64_t rec_clock(void)
{
	if (likely(++rec_n % REC_TIMED != 0))
		return 0;
	rec_waited = 0;
	return col_ticks();
}

/* A record that waited for the writer (sched_yield, nanosleep) or took longer than 100 us
 * (preempted) is not counted: its time is not CPU the record took. */
static inline void rec_clocked(uint64_t t0)
{
	if (unlikely(t0)) {
		uint64_t dt = col_ticks() - t0;
		if (!rec_waited && dt < 100 * col_us_ticks)
			atomic_fetch_add_explicit(&rec_ticks, dt * REC_TIMED, memory_order_relaxed);
	}
}

/* Record an allocation with its stack; `at` is the time of the peak it raised, or 0. */
static __attribute__((noinline)) void record_alloc(void *p, size_t size, void **slot, uint64_t at)
{
	uint64_t t0 = rec_clock();
	T.busy = 1;
	T.fast = NULL;
	uint64_t small[SMALL_FRAMES], *frames;
	sc_entry *e;
	uint8_t flags;
	uint32_t nf = alloc_stack(slot, small, &frames, &flags, &e);
	if (flags)
		atomic_fetch_add_explicit(&M.truncated, 1, memory_order_relaxed);
	/* A Python thread's Python frames follow the native ones, tagged (COL_PY_TAG): the
	 * stack is then one of its own, never the cache entry's (docs/internals/python.md). */
	uint64_t py[COL_PY_HEAP_FRAMES];
	unsigned pyflags = 0;
	uint32_t npy = col_py_on() ? col_py_walk_here(py, COL_PY_HEAP_FRAMES, &pyflags) : 0;
	uint64_t both[npy ? nf + npy : 1];
	if (npy) {
		memcpy(both, e ? e->frames : frames, 8 * (size_t)nf);
		for (uint32_t i = 0; i < npy; i++)
			both[nf + i] = COL_PY_TAG | (uint64_t)fmt_pyframe_code(py[i]) << 24 | (uint64_t)fmt_pyframe_entry(py[i]) << 55 |
				       (fmt_pyframe_line(py[i]) < 0xffffff ? fmt_pyframe_line(py[i]) : 0xffffff);
		frames = both;
		nf += npy;
		e = NULL;
	}
	uint32_t regions[COL_MAX_DEPTH];
	uint32_t nr = col_region_stack(regions, COL_MAX_DEPTH);
	sc_cache *cache = T.stacks;
	int same = 0;
	if (e) { /* from the cache: cache is T.stacks */
		uint32_t gen = atomic_load_explicit(&M.gen, memory_order_relaxed);
		if (cache->gen != gen || cache->nregions != nr || (nr && memcmp(cache->regions, regions, 4 * (size_t)nr))) {
			cache->epoch++;
			cache->gen = gen;
			cache->nregions = nr;
			memcpy(cache->regions, regions, 4 * (size_t)nr);
		}
		same = e->sent == cache->epoch;
	}
	mrec r = {0, FMT_HR_ALLOC, flags | (same ? MREC_SAME : 0), (uint16_t)(same ? 0 : nf), my_tid(),
		  (uint16_t)(same ? 0 : nr), (uint16_t)(e ? e->id + 1 : 0), 0, (uint64_t)(uintptr_t)p, size,
		  col_step_index()};
	/* Sampled: the block goes into the set of sampled blocks, whose frees are recorded,
	 * before its ALLOC (no other thread can free it before it is returned); a block that
	 * cannot be watched, or whose ALLOC is lost, is not a sample after all. */
	int sampled = atomic_load_explicit(&M.mode, memory_order_relaxed) == FMT_MEM_SAMPLED;
	if (sampled && !set_insert((uintptr_t)p)) {
		busy_end();
		rec_clocked(t0);
		return;
	}
	/* An allocation that raised the peak carries the peak's time, so that a reader puts
	 * it inside the live set at the peak. */
	int ok = same ? put_rec(&r, REC_HDR, at, NULL, 0, NULL, 0, WAIT_FULL) == 0
		      : put_rec(&r, REC_HDR, at, e ? e->frames : frames, 8 * (size_t)nf, regions, 4 * (size_t)nr,
				WAIT_FULL) == 0;
	if (ok && e && !same)
		e->sent = cache->epoch;
	if (!ok && sampled)
		set_remove((uintptr_t)p);
	busy_end();
	rec_clocked(t0);
}

static __attribute__((noinline)) void record_free(void *p)
{
	uint64_t t0 = rec_clock();
	T.busy = 1;
	T.fast = NULL;
	mrec r = {0, FMT_HR_FREE, 0, 0, my_tid(), 0, 0, 0, (uint64_t)(uintptr_t)p, 0, 0};
	put_rec(&r, REC_FREE, 0, NULL, 0, NULL, 0, WAIT_ALWAYS);
	busy_end();
	rec_clocked(t0);
}

/* Sampled mode, the countdown ran out (or was never drawn): whether this allocation of
 * `size` bytes is sampled; draws the next countdown. A thread with a slot keeps it as the
 * slot's sample_at against its `bytes`, which already count this allocation; one without
 * as T.countdown, which this allocation has already taken down. */
static __attribute__((noinline)) int sample_due(size_t size)
{
	mem_slot *s = T.slot;
	if (!T.rng) { /* the thread's first allocation: its countdown was never drawn */
		int64_t c = next_countdown() - (int64_t)size;
		if (s)
			SET(s->sample_at, OWN(s->bytes) + (uint64_t)(c > 0 ? c : 0));
		else
			T.countdown = c;
		if (c > 0)
			return 0;
	}
	int64_t c = next_countdown();
	if (s)
		SET(s->sample_at, OWN(s->bytes) + (uint64_t)c);
	else
		T.countdown = c;
	return 1;
}

/* Recording, after an allocation by the program; `raised`: it raised the peak. */
static inline void after_alloc(void *p, size_t size, void **slot, int raised)
{
	int mode = atomic_load_explicit(&M.mode, memory_order_relaxed);
	if (likely(mode == FMT_MEM_OFF))
		return;
	if (mode == FMT_MEM_SAMPLED) {
		mem_slot *s = T.slot;
		if (s ? likely(OWN(s->bytes) < OWN(s->sample_at)) : likely((T.countdown -= (int64_t)size) > 0))
			return;
		if (!sample_due(size))
			return;
	}
	/* An allocation that raised the peak carries the peak's time, so that a reader puts
	 * it inside the live set at the peak. */
	record_alloc(p, size, slot, raised ? T.peak_at : 0);
}

/* Recording, before the program's block p is handed back to the allocator. */
static inline void before_free(void *p)
{
	int mode = atomic_load_explicit(&M.mode, memory_order_relaxed);
	if (likely(mode == FMT_MEM_OFF))
		return;
	if (mode == FMT_MEM_FULL || (set_may_hold((uintptr_t)p) && set_remove((uintptr_t)p)))
		record_free(p);
}

#if !MEM_SANITIZER
/*
 * The fast paths below count a call of the program inline only in the common case: glibc's
 * heap, a thread with a slot, the live batch within bounds and nothing to record (memory
 * off, or sampled and neither a sampled allocation nor the free of a sampled block). They
 * change nothing otherwise, and the caller takes the general path, out of line: so the
 * wrappers keep no registers across calls they do not make.
 */
static inline __attribute__((always_inline)) int fast_commit(mem_slot *s, uint64_t nalloc, uint64_t nfree, uint64_t bytes, int64_t d)
{
	SET(s->live_delta, d);
	if (nalloc) {
		ADD(s->allocs, nalloc);
		ADD(s->bytes, bytes);
		if (bytes > OWN(s->largest))
			SET(s->largest, bytes);
	}
	if (nfree)
		ADD(s->frees, nfree);
	return 1;
}

static inline int in_batch(int64_t d)
{
	return (uint64_t)(d + LIVE_BATCH - 1) <= 2 * (uint64_t)(LIVE_BATCH - 1);
}

/* Whether an allocation of n bytes must take the general path for the mode's sake, with
 * one comparison and no test of the mode: the bytes left before the thread's sampling mark
 * after this allocation, against M.limit. Sampled (0): the allocation that reaches the mark
 * is sampled; full (INT64_MAX): every one is recorded; off (INT64_MIN): none (the general
 * path, which reads the mode, would also do the right thing with the one value that
 * compares equal). */
static inline int alloc_gate(const mem_slot *s, size_t n, int64_t limit)
{
	return (int64_t)(OWN(s->sample_at) - OWN(s->bytes) - n) <= limit;
}


/* An allocation of `size` bytes at p (non-NULL) that freed a block of `old` usable bytes
 * (realloc; else nfree = 0 and old = 0). */
static inline __attribute__((always_inline)) int alloc_fast(void *p, size_t size, uint64_t nfree, size_t old)
{
	mem_slot *s = T.fast;
	if (unlikely(!s))
		return 0;
	int64_t d = OWN(s->live_delta) + (int64_t)glibc_usable(p) - (int64_t)old;
	if (unlikely(!in_batch(d)))
		return 0;
	if (unlikely(alloc_gate(s, size, atomic_load_explicit(&M.limit, memory_order_relaxed))))
		return 0;
	return fast_commit(s, 1, nfree, size, d);
}

static inline __attribute__((always_inline)) int free_fast(void *p)
{
	mem_slot *s = T.fast;
	if (unlikely(!s))
		return 0;
	int64_t d = OWN(s->live_delta) - (int64_t)glibc_usable(p);
	if (unlikely(!in_batch(d)))
		return 0;
	int mode = atomic_load_explicit(&M.mode, memory_order_relaxed);
	if (unlikely(mode != FMT_MEM_OFF) && (mode != FMT_MEM_SAMPLED || set_may_hold((uintptr_t)p)))
		return 0;
	return fast_commit(s, 0, 1, 0, d);
}

/* The general path of an allocation by the program (T.own clear): returns p. */
static __attribute__((noinline)) void *alloc_slow(void *p, size_t size, void **slot)
{
	if (p && HEAP_KIND() != HEAP_NONE)
		after_alloc(p, size, slot, count(1, 0, size, (int64_t)usable_size(p)));
	col_lazy_point(); /* a safe point: the program's thread, no fennec code in progress */
	return p;
}

static inline __attribute__((always_inline)) void *on_alloc(void *p, size_t size, void **slot)
{
	if (likely(p != NULL) && likely(alloc_fast(p, size, 0, 0)))
		return p;
	return alloc_slow(p, size, slot);
}

/* The general path of the program's free of p (not NULL, not ours, T.own clear). */
static __attribute__((noinline)) void free_slow(void *p)
{
	if (HEAP_KIND() != HEAP_NONE) {
		count(0, 1, 0, -(int64_t)usable_size(p));
		before_free(p);
	}
	R.free(p);
	col_lazy_point();
}

/* ---- the interposed functions ---- */

/* Where the wrapper's return address is: the caller's stack pointer at the call (the key of
 * the stack cache), and the return address itself. */
#define RA() ((void **)__builtin_dwarf_cfa() - 1)

/*
 * malloc, free and realloc take an inline path when the thread's gate is open (T.fast:
 * glibc's heap, a slot of its own, no fennec code on the thread), the block is an ordinary
 * chunk of glibc's heap (its size word's bit 2 clear: not mmapped, and not one of fennec's
 * own blocks, whose headers carry that bit), the live batch stays within bounds and there
 * is nothing to record. A chunk's usable size is its size word less the flag bits, less 8:
 * realloc's change of live bytes is the difference of the two size words, masked. Anything
 * else goes out of line, to the general paths, which check everything again.
 */
#define CHUNK_MMAPPED 2
#define CHUNK_SIZE(h) ((int64_t)((h) & ~(size_t)7))

/*
 * Full mode records every call, so its allocations and frees all leave the inline paths.
 * When the inline path's terms hold otherwise (T.fast: glibc's heap, a slot, no fennec
 * code on the thread; an ordinary chunk), they are counted and recorded here at once, as
 * alloc_slow() and free_slow() would after checking each of those terms again: on
 * `bench/work_alloc mixed` that was ~100 instructions per malloc/free pair of ~525.
 */
static inline __attribute__((always_inline)) int alloc_full(void *p, size_t size, void **slot)
{
	mem_slot *s = T.fast;
	if (!s || atomic_load_explicit(&M.mode, memory_order_relaxed) != FMT_MEM_FULL)
		return 0;
	size_t h = ((const size_t *)p)[-1];
	if (h & CHUNK_MMAPPED)
		return 0;
	int raised = count_own(s, 1, 0, size, CHUNK_SIZE(h) - 8);
	record_alloc(p, size, slot, raised ? T.peak_at : 0);
	return 1;
}

static __attribute__((noinline)) void *malloc_slow(size_t n, void **slot)
{
	if (unlikely(T.own))
		return own_alloc(n, 16);
	void *p = R.malloc(n);
	if (likely(p != NULL) && alloc_full(p, n, slot))
		return p;
	return on_alloc(p, n, slot);
}

/* After the inline path's malloc(n) returned p, an mmapped chunk or the live batch full:
 * count it. Nothing is recorded: the inline path is taken only when there is nothing to
 * record, and in sampled mode adding n to the thread's bytes stays below its sample_at. */
static __attribute__((noinline)) void *malloc_done_slow(void *p, size_t n)
{
	count(1, 0, n, (int64_t)usable_size(p));
	col_lazy_point();
	return p;
}

API void *malloc(size_t n)
{
	mem_slot *s = T.fast;
	if (unlikely(!s))
		return malloc_slow(n, RA());
	if (unlikely(alloc_gate(s, n, atomic_load_explicit(&M.limit, memory_order_relaxed))))
		return malloc_slow(n, RA());
	void *p = R.malloc(n);
	if (unlikely(!p))
		return NULL;
	size_t h = ((const size_t *)p)[-1];
	int64_t d = OWN(s->live_delta) + CHUNK_SIZE(h) - 8;
	if (unlikely(h & CHUNK_MMAPPED) || unlikely(!in_batch(d)))
		return malloc_done_slow(p, n);
	fast_commit(s, 1, 0, n, d);
	return p;
}

API void *calloc(size_t n, size_t size)
{
	if (unlikely(T.own))
		return own_calloc(n, size);
	void *p = R.calloc(n, size);
	if (likely(p != NULL) && alloc_full(p, n * size, RA()))
		return p;
	return on_alloc(p, n * size, RA());
}

/* free's general path: any p (NULL, fennec's own, mmapped), any thread. */
static __attribute__((noinline)) void free_general(void *p)
{
	if (unlikely(own_block(p))) {
		own_free(p);
		return;
	}
	if (p == NULL)
		return;
	/* A block not ours was made by the real allocator: R is known by now. */
	if (T.own || free_fast(p)) {
		R.free(p);
		return;
	}
	free_slow(p);
}

/* free() of the program's block p (an ordinary chunk of glibc's heap, s = T.fast, h its
 * size word) whose bit in the filter is set. */
static __attribute__((noinline)) void free_marked(mem_slot *s, void *p, size_t h)
{
	if (atomic_load_explicit(&M.mode, memory_order_relaxed) != FMT_MEM_FULL)
		return free_general(p);
	count_own(s, 0, 1, 0, -(CHUNK_SIZE(h) - 8));
	record_free(p);
	R.free(p);
}

API void free(void *p)
{
	mem_slot *s = T.fast;
	if (unlikely(!s) || unlikely(!p))
		return free_general(p);
	size_t h = ((const size_t *)p)[-1];
	int64_t d = OWN(s->live_delta) - CHUNK_SIZE(h) + 8;
	if (unlikely(h & CHUNK_MMAPPED) || unlikely(!in_batch(d)))
		return free_general(p);
	/* The filter is the gate for every mode: all 0 with memory off, all 255 in full mode
	 * (col_mem_start()), sampled blocks' counters in sampled mode. */
	if (unlikely(set_may_hold((uintptr_t)p)))
		return free_marked(s, p, h);
	fast_commit(s, 0, 1, 0, d);
	R.free(p);
}

/* realloc's general path: fennec's own block, a thread inside fennec, realloc(NULL, n),
 * another allocator, no counters, and every case with something to record. */
static __attribute__((noinline)) void *realloc_slow(void *p, size_t n, void **slot)
{
	if (unlikely(own_block(p)))
		return own_realloc(p, n);
	if (T.own) {
		if (!p)
			return own_alloc(n, 16);
		return R.realloc(p, n); /* the program's block, resized by fennec: uncounted */
	}
	if (!p)
		return alloc_slow(R.malloc(n), n, slot);
	if (HEAP_KIND() == HEAP_NONE)
		return R.realloc(p, n);
	/* The old block's FREE is recorded before the call: once realloc returns, another
	 * thread may already have been given its address. The counters take the free and the
	 * allocation at once, after it. */
	size_t old = usable_size(p);
	before_free(p);
	void *q = R.realloc(p, n);
	if (!q) {
		if (!n) /* realloc(p, 0) freed p */
			count(0, 1, 0, -(int64_t)old);
		return NULL; /* failed: the old block stays (its FREE record too, docs/memory.md) */
	}
	after_alloc(q, n, slot, count(1, 1, n, (int64_t)usable_size(q) - (int64_t)old));
	col_lazy_point();
	return q;
}

/* After the inline path's realloc(p, n) returned q; p's size word was h. Nothing is
 * recorded, as for malloc_done_slow(). */
static __attribute__((noinline)) void *realloc_done_slow(void *q, size_t n, size_t h)
{
	size_t old = (size_t)CHUNK_SIZE(h) - 8;
	if (!q) {
		if (!n)
			count(0, 1, 0, -(int64_t)old);
		return NULL;
	}
	count(1, 1, n, (int64_t)usable_size(q) - (int64_t)old);
	col_lazy_point();
	return q;
}

/* RA() is taken where a slow path needs it, so that the inline path keeps no register for
 * it. The new size counts toward the thread's sampling mark, as an allocation of it would:
 * docs/memory.md says why not the growth. */
API void *realloc(void *p, size_t n)
{
	mem_slot *s = T.fast;
	if (unlikely(!s) || unlikely(!p))
		return realloc_slow(p, n, RA());
	size_t h = ((const size_t *)p)[-1];
	if (unlikely(h & CHUNK_MMAPPED))
		return realloc_slow(p, n, RA());
	/* Sampled: neither the free of a sampled block nor a sampled allocation (as in
	 * malloc()), decided before the call, so that after it nothing depends on the mode. */
	int64_t limit = atomic_load_explicit(&M.limit, memory_order_relaxed);
	if (unlikely(alloc_gate(s, n, limit)) || (limit == 0 && set_may_hold((uintptr_t)p)))
		return realloc_slow(p, n, RA());
	void *q = R.realloc(p, n);
	if (unlikely(!q))
		return realloc_done_slow(q, n, h);
	size_t h2 = ((const size_t *)q)[-1];
	int64_t d = OWN(s->live_delta) + CHUNK_SIZE(h2) - CHUNK_SIZE(h);
	if (unlikely(h2 & CHUNK_MMAPPED) || unlikely(!in_batch(d)))
		return realloc_done_slow(q, n, h);
	SET(s->live_delta, d);
	ADD(s->reallocs, 1);
	ADD(s->bytes, n);
	if (unlikely(n > OWN(s->largest)))
		SET(s->largest, n);
	return q;
}

API void *reallocarray(void *p, size_t n, size_t size)
{
	size_t total;
	if (__builtin_mul_overflow(n, size, &total)) {
		errno = ENOMEM;
		return NULL;
	}
	if (unlikely(own_block(p)))
		return own_realloc(p, total);
	return realloc_slow(p, total, RA());
}

/* Alignments as glibc takes them: a power of two, at least 16 here. */
static size_t pow2_align(size_t align)
{
	size_t a = 16;
	while (a < align && a < (OWN_SPACE >> 4))
		a *= 2;
	return a;
}

static void *aligned_impl(memalign_fn *fn, size_t align, size_t n, void **slot)
{
	if (unlikely(T.own))
		return own_alloc(n, pow2_align(align));
	return on_alloc((*fn)(align, n), n, slot);
}

API void *memalign(size_t align, size_t n) { return aligned_impl(&R.memalign, align, n, RA()); }

API void *aligned_alloc(size_t align, size_t n) { return aligned_impl(&R.aligned_alloc, align, n, RA()); }

API int posix_memalign(void **out, size_t align, size_t n)
{
	if (align < sizeof(void *) || (align & (align - 1)))
		return EINVAL;
	if (unlikely(T.own)) {
		void *p = own_alloc(n, align);
		if (!p)
			return ENOMEM;
		*out = p;
		return 0;
	}
	int rc = R.posix_memalign(out, align, n);
	if (rc == 0)
		alloc_slow(*out, n, RA());
	return rc;
}

API void *valloc(size_t n)
{
	if (unlikely(T.own))
		return own_alloc(n, 4096);
	return on_alloc(R.valloc(n), n, RA());
}

API void *pvalloc(size_t n)
{
	if (unlikely(T.own))
		return own_alloc((n + 4095) & ~(size_t)4095, 4096);
	return on_alloc(R.pvalloc(n), n, RA());
}

void map_counted(const mapping *m, void **slot)
{
	after_alloc((void *)m->addr, m->len, slot, count(1, 0, m->len, (int64_t)m->len));
}

void unmap_counted(const mapping *m)
{
	count(0, 1, 0, -(int64_t)m->len);
	before_free((void *)m->addr);
}
#endif /* !MEM_SANITIZER */

/* ---- the timeline (SNAP records) ---- */

static uint64_t rss_now(void)
{
	if (M.statm_fd < 0)
		return 0;
	char buf[128];
	ssize_t n = pread(M.statm_fd, buf, sizeof buf - 1, 0);
	if (n <= 0)
		return 0;
	buf[n] = 0;
	char *s = strchr(buf, ' ');
	return s ? strtoull(s + 1, NULL, 10) * (uint64_t)M.page : 0;
}

/* The peak as far as the batched deltas let a reader see it (a heap smaller than
 * LIVE_BATCH per thread never folds): taken at every timeline point. */
static uint64_t live_seen(void)
{
	uint64_t l = live_now(), p = atomic_load(&peak);
	while (l > p && !atomic_compare_exchange_weak(&peak, &p, l))
		;
	return l;
}

void snapshot(unsigned reason)
{
	totals t;
	sum_totals(&t);
	uint64_t c[3] = {t.allocs - M.base_allocs, t.frees - M.base_frees, t.bytes - M.base_bytes};
	mrec r = {0, FMT_HR_SNAP, (uint8_t)reason, 0, my_tid(), 0, 0, 0, live_seen(), rss_now(),
		  col_step_index()};
	put_rec(&r, REC_HDR, 0, c, sizeof c, NULL, 0, WAIT_NEVER);
}

/* In a fork child: counters of threads that do not exist here are history: fold them. */
void slots_fork_child(void)
{
	uint32_t n = atomic_load(&slots_hwm);
	for (uint32_t i = 0; i < n; i++)
		if (&slots[i] != T.slot && atomic_load(&slots[i].used))
			slot_release(&slots[i]);
}

/* ---- what the wrappers cost ---- */

uint64_t col_mem_record_ticks(void)
{
	return atomic_load_explicit(&rec_ticks, memory_order_relaxed);
}

/*
 * What the wrappers add to one glibc malloc or free (COST chunk), in picoseconds a call: 6
 * rounds of 256 frees and mallocs of 16-1040 bytes at random places of a live set of 2048
 * blocks (a program's pattern: the header of the block freed is seldom in L1; a loop of
 * malloc(48)/free read half of what the wrappers cost such a program) through
 * the wrappers, with this thread's gate opened on a scratch slot (its counts go nowhere),
 * against the same rounds of glibc's own calls; the fastest round of each. About 0.5 ms,
 * most of it filling the live sets.
 * Not in full mode, whose every call records (that time is measured:
 * col_mem_record_ticks()), nor on another allocator: 0 there. Called on the flushing
 * thread under the flush lock, never at the session's end (an _exit may come from a
 * handler that interrupted the allocator).
 */
#define CALIB_LIVE 2048
uint64_t col_mem_call_cost_ps(double ticks_per_ns)
{
#if MEM_SANITIZER
	(void)ticks_per_ns;
	return 0;
#else
	if (ticks_per_ns <= 0 || HEAP_KIND() != HEAP_GLIBC || atomic_load(&M.mode) == FMT_MEM_FULL || T.busy ||
	    T.resolving)
		return 0;
	void *(*volatile mf)(size_t) = malloc;
	void (*volatile ff)(void *) = free;
	static void *blocks[2][CALIB_LIVE];
	for (int w = 0; w < 2; w++)
		for (int k = 0; k < CALIB_LIVE; k++)
			blocks[w][k] = R.malloc(16 + (size_t)(k * 37 % 1025));
	mem_slot scratch;
	memset(&scratch, 0, sizeof scratch);
	SET(scratch.sample_at, UINT64_MAX >> 2);
	mem_slot *fast = T.fast;
	uint32_t own = T.own;
	T.own = 0;
	T.fast = &scratch;
	uint64_t best[2] = {UINT64_MAX, UINT64_MAX};
	for (int r = 0; r < 12; r++) {
		int w = r & 1; /* 0: the wrappers, 1: glibc's */
		uint64_t x = 0x9e3779b97f4a7c15ull; /* the same sequence both ways */
		uint64_t t0 = col_ticks();
		for (int i = 0; i < 256; i++) {
			x ^= x << 13;
			x ^= x >> 7;
			x ^= x << 17;
			void **b = &blocks[w][x % CALIB_LIVE];
			size_t size = 16 + (size_t)((x >> 20) % 1025);
			if (w) {
				R.free(*b);
				*b = R.malloc(size);
			} else {
				/* the scratch batch stays near 0, so that no call leaves the inline
				 * paths, which would count in this thread's real slot (or `shared`) */
				SET(scratch.live_delta, 0);
				if (*b && set_may_hold((uintptr_t)*b))
					R.free(*b); /* a filter hit takes the general path: not what is timed */
				else
					ff(*b);
				*b = mf(size);
			}
		}
		uint64_t dt = col_ticks() - t0;
		if (dt < best[w])
			best[w] = dt;
	}
	T.own = own;
	T.fast = fast;
	for (int w = 0; w < 2; w++)
		for (int k = 0; k < CALIB_LIVE; k++)
			R.free(blocks[w][k]);
	return best[0] > best[1] ? (uint64_t)((double)(best[0] - best[1]) / ticks_per_ns * 1000.0 / 512.0) : 0;
#endif
}

/*
 * heap.h - what the heap profiler's files share (docs/internals/collect.md, "The heap
 * profiler"): the state of the counters, the session and the writer, the record layout of
 * the heap ring, the thread's stack cache and the writer's map of live blocks. The files:
 * heap_hooks.c (the interposed malloc family and everything it writes to the ring, on the
 * program's threads), heap_own.c (fennec's private heap), heap_stacks.c (unwinding an
 * allocation's stack), heap_mmap.c (mappings as allocations), heap_session.c (the session
 * and the public counters), heap_writer.c (the writer's side: HEAP2 chunks) and
 * heap_reach.c (what is still reachable at the end). Only they include it.
 */
#ifndef FENNEC_COLLECT_HEAP_H
#define FENNEC_COLLECT_HEAP_H

#include <pthread.h>
#include <stdatomic.h>
#include <stdint.h>
#include <string.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <unwind.h>
#include <link.h>
#include <stdio.h>

#include "collect/collect.h"
#include "collect/ring.h"
#include "fennec.h"

/* The short names the heap files use for what they share. The symbols are prefixed: hidden
 * from libfennec.so's dynamic table (-fvisibility=hidden, and the pragma below for the
 * declarations), but a program that links libfennec.a sees them beside its own. Being
 * macros, they would rename what a header included after this one declares: include it
 * last. */
#define M col_heap
#define T col_heap_thread
#define R col_heap_next
#define H col_heap_own
#define G col_heap_unwind
#define SELF col_heap_self
#define RT col_heap_runtime
#define DEAD col_heap_dead
#define MAPS col_heap_maps
#define resolved col_heap_resolved
#define heap_kind_ col_heap_kind_
#define peak col_heap_peak
#define peak_ticks col_heap_peak_ticks
#define peak_step col_heap_peak_step
#define peak_site col_heap_peak_site
#define reach_stop_sp col_heap_reach_stop_sp
#define clearing col_heap_clearing
#define clearing_here col_heap_clearing_here
#define filter_delay_us col_heap_filter_delay_us
#define filter_pid col_heap_filter_pid
#define resolve col_heap_resolve
#define raise_peak col_heap_raise_peak
#define sum_totals col_heap_sum_totals
#define live_now col_heap_live_now
#define snapshot col_heap_snapshot
#define slots_fork_child col_heap_slots_fork_child
#define map_counted col_heap_map_counted
#define unmap_counted col_heap_unmap_counted
#define own_alloc_at col_heap_own_alloc_at
#define own_calloc col_heap_own_calloc
#define own_realloc col_heap_own_realloc
#define own_free col_heap_own_free
#define own_atfork col_heap_own_atfork
#define heap_unwind_parse col_heap_unwind_parse
#define heap_unwind_init col_heap_unwind_init
#define heap_unwind_compare col_heap_unwind_compare
#define sc_release col_heap_sc_release
#define sc_walk_unw col_heap_sc_walk_unw
#define sc_walk_rules col_heap_sc_walk_rules
#define sc_walk_gcc col_heap_sc_walk_gcc
#define gcc_ip col_heap_gcc_ip
#define dead_stack_add col_heap_dead_stack_add
#define dead_stack_take col_heap_dead_stack_take
#define leaf_find col_heap_leaf_find
#define writer_reset col_heap_writer_reset
#define self_segments col_heap_self_segments
#define note_stop_sp col_heap_note_stop_sp

#pragma GCC visibility push(hidden)

#if defined(__SANITIZE_ADDRESS__) || defined(__SANITIZE_THREAD__)
#define MEM_SANITIZER 1 /* the sanitizer owns malloc: libfennec does not interpose it */
#elif defined(__has_feature)
#if __has_feature(address_sanitizer) || __has_feature(thread_sanitizer)
#define MEM_SANITIZER 1
#endif
#endif
#ifndef MEM_SANITIZER
#define MEM_SANITIZER 0
#endif

#define API FENNEC_API
#define MEM_SLOTS 1024                  /* threads with counters of their own */
#define SET_SIZE (1u << 16)             /* sampled live blocks tracked (sampled mode) */
#define SET_PROBES 64
#define FILTER_BITS (1u << 15)          /* the filter in front of the set: 4 KiB of bits */
#define SET_TOMB ((uintptr_t)1)
#define RING_SAMPLED CM_SMALL(4u << 20, 64u << 10)
#define RING_FULL CM_SMALL(16u << 20, 64u << 10)          /* the writer drains at 25 %, looking every 2-6 ms */
#define RING_AHEAD 1024                 /* producers and the writer prefetch this far ahead */
#define REC_HDR 48                      /* ALLOC and SNAP records' header; FREE's is REC_FREE */
#define REC_FREE 32
#define MREC_TRUNCATED 1                /* ALLOC: the stack was cut at the depth limit */
#define MREC_SAME 2                     /* ALLOC: no frames or regions follow: the stack (and
					   regions) the thread's record with the same `entry`
					   carried last */

typedef void *(*malloc_fn)(size_t);
typedef void *(*calloc_fn)(size_t, size_t);
typedef void *(*realloc_fn)(void *, size_t);
typedef void *(*reallocarray_fn)(void *, size_t, size_t);
typedef void (*free_fn)(void *);
typedef void *(*memalign_fn)(size_t, size_t);
typedef int (*posix_memalign_fn)(void **, size_t, size_t);
typedef void *(*valloc_fn)(size_t);
typedef size_t (*usable_fn)(void *);

/* The next allocator. Until it is resolved these are stubs that resolve it and call it: the
 * wrappers' common path need not check. */
struct col_heap_next {
	malloc_fn malloc;
	calloc_fn calloc;
	realloc_fn realloc;
	reallocarray_fn reallocarray;
	free_fn free;
	memalign_fn memalign, aligned_alloc;
	posix_memalign_fn posix_memalign;
	valloc_fn valloc, pvalloc;
	usable_fn usable;
};
extern struct col_heap_next R; /* heap_hooks.c */
extern _Atomic int resolved; /* 0: not yet, 1: resolving, 2: done */
enum { HEAP_NONE, HEAP_GLIBC, HEAP_OTHER };
/* NONE: no counters (FENNEC_MEMORY=none) or not known yet; GLIBC: the next allocator is
 * glibc's, read its chunk headers; OTHER: ask it. Written once by resolve(), read by every
 * thread's gate_update() (fennec_intern on a thread that never allocated reads it while
 * fennec_start resolves: a data race under TSan), so atomic; relaxed: resolved's release
 * store publishes it, and a thread that reads NONE early has its gate closed. */
extern _Atomic int heap_kind_;
#define HEAP_KIND() atomic_load_explicit(&heap_kind_, memory_order_relaxed)

/* Counters of one thread: written by their owner only (plain load + store), summed by
 * readers. Threads beyond MEM_SLOTS, and threads after their exit, use `shared`
 * (atomically). Live
 * bytes change by `live_delta` until it reaches LIVE_BATCH either way, then it is folded
 * into the shared `live` with one atomic: the fast path has no atomic operation, and the
 * peak is exact to LIVE_BATCH per thread (a block of LIVE_BATCH or more is folded at once). */
#define LIVE_BATCH (64 * 1024)
typedef struct mem_slot {
	_Atomic uint64_t allocs, frees, bytes, largest;
	_Atomic int64_t live_delta;
	_Atomic uint64_t reallocs; /* reallocs of a block: each one allocation and one free */
	_Atomic uint64_t sample_at; /* sampled mode: the owner's next sampled allocation is the
				      one that takes `bytes` to sample_at or beyond (0: draw
				      it); one comparison with the sum the inline paths
				      compute anyway */
	_Atomic int used;
} __attribute__((aligned(64))) mem_slot;
extern _Atomic uint64_t peak;     /* highest `live` since the process (or session) started */
extern _Atomic uint64_t peak_ticks, peak_step;
extern _Atomic uint32_t peak_site;

typedef struct mem_tls {
	mem_slot *slot;      /* NULL until the first allocation */
	mem_slot *fast;      /* the wrappers' gate: slot while the heap is glibc's and `own` is
				clear (gate_update()), else NULL: their inline paths need no
				other check of the thread */
	union {
		struct {
			uint8_t busy;      /* inside a wrapper's recording path */
			uint8_t internal;  /* fennec's own code runs on this thread */
			uint8_t resolving; /* this thread runs dlsym for the real allocator */
		};
		uint32_t own;        /* any of them: allocations go to fennec's own heap, uncounted */
	};
	uint8_t claimed;     /* a slot was claimed (or refused): without one, count in `shared` */
	pid_t tid;           /* cached gettid(); 0 until known (reset in a fork child) */
	uint64_t peak_at;    /* ticks at which this thread last raised the peak */
	int64_t countdown;   /* sampled mode: bytes until the next sampled allocation, while
				the thread has no slot (else the slot's) */
	uint64_t rng;
	struct sc_cache *stacks; /* cache of allocation stacks (NULL until the first) */
	uintptr_t stack_lo, stack_hi; /* the thread's stack, where cached stacks may be read */
	uint8_t no_cache;    /* the cache was given back (thread exit) or could not be made */
} mem_tls;
extern __thread mem_tls T; /* heap_hooks.c */

/* Open or close the wrappers' gate after T.own, T.slot or the heap kind changed. */
static inline void gate_update(void)
{
	T.fast = !T.own && HEAP_KIND() == HEAP_GLIBC ? T.slot : NULL;
}

/* Leave a recording path: clear T.busy and update the gate. The other flags are read
 * before the store: a load of T.own just after the byte store to T.busy cannot take its
 * value from that store and waits until it, and every store before it, is written to the
 * cache: the record's stores to the ring (cache misses) included. */
static inline void busy_end(void)
{
	int others = T.internal | T.resolving;
	__asm__ volatile("" ::: "memory"); /* the loads stay before the store */
	T.busy = 0;
	T.fast = !others && HEAP_KIND() == HEAP_GLIBC ? T.slot : NULL;
}

static inline uint32_t my_tid(void)
{
	if (unlikely(!T.tid))
		T.tid = (pid_t)syscall(SYS_gettid);
	return (uint32_t)T.tid;
}

/* Recording state of the session (heap_hooks.c defines it). */
struct col_heap_state {
	_Atomic int mode;          /* enum fmt_mem_mode while recording, else FMT_MEM_OFF */
	_Atomic int64_t limit;     /* the inline allocation paths' gate, set with mode
				      (alloc_gate()): 0 sampled, INT64_MAX full, else INT64_MIN */
	int session_mode;
	uint64_t rate;
	uint64_t interval_ns;
	uint32_t depth;
	uint64_t ring_bytes;           /* FENNEC_HEAP_RING or the mode's default (ring_size()) */
	uint64_t scan_ms;              /* FENNEC_LEAK_SCAN_MS: the reachability scan's limit */
	int fork_child;                /* this image began as a fork child (col_mem_atfork_child()) ... */
	int forked;                    /* ... and has fork children of its own (col_mem_atfork_parent()) */
	col_ring ring;
	uint64_t records;              /* records the writer took (only it counts, under flush_lock) */
	_Atomic uint64_t dropped, truncated, untracked;
	_Atomic uint64_t dropped_allocs, dropped_frees; /* of `dropped`: ALLOCs, FREEs (the rest are SNAPs) */
	uint64_t base_allocs, base_frees, base_bytes; /* totals at session start */
	_Atomic uint32_t gen;          /* sessions started: threads' MREC_SAME hints are of this one */
	int statm_fd;
	long page;
	uint64_t next_snap_ns;
	/* sampled mode: addresses of sampled live blocks, with a filter in front: a bit per
	 * 16-byte granule of a 512 KiB window (address bits 4-18), set while a sampled block
	 * there is live, which free()'s inline path tests; set_insert() and set_remove()
	 * keep the counts of blocks per bit (255 sticks: never decremented again). While in
	 * full mode every bit is set (filter_fill()), so that free()'s inline path checks
	 * nothing else. */
	_Atomic uintptr_t set[SET_SIZE];
	_Atomic uint64_t filter[FILTER_BITS / 64];
	_Atomic uint8_t filter_count[FILTER_BITS];
	/* writer side (docs/format.md, "Heap (1.3)") */
	struct stk { uint64_t hash; uint32_t id; uint32_t off; } *stacks;
	uint32_t nstacks, stacks_cap;  /* open addressing, cap a power of two */
	cm_buf stack_data;             /* interned stacks: nf, nr, flags, frames, regions */
	/* the blocks allocated and not freed, by address (see leaf_find()) */
	struct wpage *pages;             /* the page table */
	uint32_t npages, pages_cap;
	struct wpage *leaf_cache;        /* WL_CACHE pages found lately, by page number */
	struct wleaf *leaf_free;         /* leaves of no page */
	uint8_t *leaf_slab;              /* where the next new leaf goes ... */
	uint32_t leaf_slab_left;         /* ... and how many more fit there */
	uint32_t leaf_slabs;             /* slabs allocated */
	struct wblock **pool;            /* chunks of WB_CHUNK entries */
	uint32_t pool_chunks, pool_chunks_cap;
	uint32_t pool_used, pool_free;   /* ids handed out so far; the first free one (0: none) */
	struct wover *over;              /* blocks that share a slot with another, by address */
	uint32_t nover, over_cap;
	struct wthread *threads;       /* by tid */
	struct wthread *hot;           /* the latest looked up (NULL after the table moved) */
	uint32_t nthreads, threads_cap;
	uint32_t chunk_threads;        /* THREAD indices given in the chunk being written */
	uint32_t cur_tid;              /* the thread of the chunk's latest ALLOC or FREE; 0: none */
	uint64_t cur_q, cur_step;      /* the chunk's TIME and STEP state */
	unsigned shift;                /* TIME unit: 2^shift ticks */
	cm_buf body, chunk;
	uint64_t emitted_ns;           /* when the latest chunk was written */
	int counters_written;
	uint64_t last_records, last_dropped, last_allocs, last_frees;
};
extern struct col_heap_state M;

/* The stopping thread's stack pointer (col_mem_stop()): its live frames are above it, for
 * the reachability scan at the end (col_mem_reach()). */
extern uintptr_t reach_stop_sp; /* heap_reach.c */
#define REACH_MAX_SELF 8
extern struct col_heap_self {
	uint64_t lo[REACH_MAX_SELF], hi[REACH_MAX_SELF]; /* libfennec's writable segments */
	uint32_t n;
} SELF;
/* The code of the C library, the loader and libfennec: the frames of exit() and of the
 * session's end, whose slots hold what earlier calls left there (col_mem_stop()). */
#define RT_RANGES 24
extern struct col_heap_runtime {
	uint64_t lo[RT_RANGES], hi[RT_RANGES];
	uint32_t n;
} RT;
int self_segments(struct dl_phdr_info *info, size_t size, void *arg);
void note_stop_sp(int unwind);

/* Stacks of threads that ended: glibc keeps them mapped for later threads, with the
 * pointers their frames held, which the scan must not take for live ones. A thread notes
 * its stack when it ends (thread_gone()), and one that starts on a noted stack takes it
 * back (sc_get()). The latest DEAD_STACKS are kept. */
#define DEAD_STACKS 256
extern struct col_heap_dead { /* heap_stacks.c */
	_Atomic uintptr_t lo[DEAD_STACKS], hi[DEAD_STACKS];
	_Atomic uint32_t next;
} DEAD;
#if !MEM_SANITIZER
void dead_stack_add(uintptr_t lo, uintptr_t hi);
void dead_stack_take(uintptr_t lo, uintptr_t hi);
#endif

/* One heap event as it sits in the ring (host byte order), followed by frames and
 * region ids (ALLOC) or three counters (SNAP). A FREE is the first REC_FREE bytes only. */
typedef struct mrec {
	uint32_t len;
	uint8_t type;      /* enum fmt_heap_rec */
	uint8_t flags;     /* ALLOC: MREC_TRUNCATED, MREC_SAME; SNAP: enum fmt_snap_reason */
	uint16_t nframes;
	uint32_t tid;
	uint16_t nregions;
	uint16_t entry;    /* ALLOC: 1 + the thread's stack cache entry it came from; 0: none */
	uint64_t ticks;
	uint64_t a;        /* ALLOC, FREE: address; SNAP: live bytes */
	uint64_t b;        /* ALLOC: size; SNAP: RSS bytes */
	uint64_t step;     /* ALLOC, SNAP */
} mrec;
_Static_assert(sizeof(mrec) == REC_HDR, "heap record header");
_Static_assert(offsetof(mrec, b) == REC_FREE, "a FREE record ends before the size");

#if !MEM_SANITIZER
#define OWN_SPACE (8ull << 30)   /* address space reserved at first use (less if refused) */
#define OWN_COMMIT (1u << 20)    /* made accessible at a time */
#define OWN_CLASSES 40
#define OWN_RELEASE (64u << 10)

/* fennec's own heap (heap_own.c) */
extern struct col_heap_own {
	uint8_t *base;
	_Atomic size_t span;      /* bytes reserved at base; 0 until mapped */
	size_t used, committed;   /* handed out, made accessible: under lock */
	uint8_t *free_list[OWN_CLASSES];
	atomic_flag lock;
	_Atomic int state;        /* 0 unmapped, 1 being mapped, 2 mapped, 3 failed */
} H;

static inline int own_block(const void *p)
{
	return (uintptr_t)p - (uintptr_t)H.base < atomic_load_explicit(&H.span, memory_order_relaxed);
}

/* `n` bytes aligned to `align` (a power of two) from fennec's own heap; heap_own.c. */
void *own_alloc_at(size_t n, size_t align, int *fresh);
static inline void *own_alloc(size_t n, size_t align)
{
	return own_alloc_at(n, align, NULL);
}
void own_free(void *p);
void *own_calloc(size_t n, size_t size);
void *own_realloc(void *p, size_t n);
/* A fork must not copy the own heap's lock held by a thread the child will not have. */
void own_atfork(void);
#endif

/* Resolve the real allocator (heap_hooks.c). */
void resolve(void);
/* The real allocator is known. Callers have checked T.own (which includes T.resolving). */
static inline void ready(void)
{
	if (unlikely(atomic_load_explicit(&resolved, memory_order_acquire) != 2))
		resolve();
}

typedef struct totals {
	uint64_t allocs, frees, bytes, largest;
} totals;

/* heap_hooks.c: the totals of every thread's counters; live bytes, the threads' batches
 * included; raise the peak (1: while recording, its time, step and region noted). */
void sum_totals(totals *t);
uint64_t live_now(void);
int raise_peak(uint64_t now);
/* In a fork child: fold the counters of the threads it does not have. */
void slots_fork_child(void);
extern _Atomic uint32_t clearing;
extern __thread uint8_t clearing_here;
extern _Atomic uint32_t filter_delay_us;
extern _Atomic pid_t filter_pid;
/* A SNAP record (timeline point) for `reason`, enum fmt_snap_reason. */
void snapshot(unsigned reason);

/* ---- stacks of allocations ---- */

/*
 * A per-thread cache of allocation stacks: a call site that allocates again and again from
 * the same stack is not unwound each time (libunwind's unw_backtrace took ~1800
 * instructions per allocation of a 5-frame stack, most of full mode's cost in the program).
 * The key is the stack address of the wrapper's return address: the caller's stack pointer
 * at the call. An entry keeps each frame's return address and the stack address it was read
 * from (a frame's stack pointer minus 8, as unw_step computed it); a hit reads those words
 * again and compares every one. For frames whose size is fixed by their code address, equal
 * words at equal places mean the same frames, by induction from the caller's stack pointer.
 * A frame that moves its stack pointer by a variable amount (alloca, variable-length arrays,
 * stack realignment) above the allocating call could in principle leave an old return
 * address where a later call reads it, and the hit would be wrong: docs/memory.md.
 * A key has several stacks when a function that allocates is called from several places
 * at the same depth, so a set of SC_WAYS entries holds them side by side. An entry is filled
 * on the second miss at its key in a row (unw_step, slower than unw_backtrace), so a stack
 * seen once costs one unw_backtrace. Only stacks within the thread's own stack and at most
 * SC_FRAMES deep are cached.
 */
#define SC_SETS 16
#define SC_WAYS 4
#define SC_FRAMES 48

typedef struct sc_entry {
	uintptr_t key;                /* the wrapper's return-address slot; 0: empty */
	uint32_t n;                   /* frames */
	uint32_t sent;                /* the cache's epoch when an ALLOC record last carried
					 these frames; 0: not since the latest fill */
	uint8_t truncated;            /* deeper than M.depth */
	uint8_t id;                   /* its index in the cache: the records' `entry` - 1 */
	uint64_t frames[SC_FRAMES];   /* return addresses, innermost (the caller's) first */
	uintptr_t locs[SC_FRAMES];    /* where each was read */
} sc_entry;

typedef struct sc_set {
	uintptr_t seen;               /* the key of the set's latest miss */
	uint32_t next;                /* the way to fill next */
	sc_entry way[SC_WAYS];
} sc_set;

/* A thread's cache. Every ALLOC record of a cached stack names its entry; the writer keeps,
 * per thread and entry, the stack the latest record with frames for that entry carried. A
 * record whose entry has sent its frames in this epoch (not refilled since) carries none
 * (MREC_SAME). The epoch changes, and every entry sends its frames again, when the thread's
 * regions change (they are part of the stack), at a new session (the writer starts over)
 * and in a fork child. An ALLOC record lost for want of room changes nothing: an entry is
 * marked sent only once its record is in the ring, and the writer reads a thread's records
 * in the order it wrote them. Before, only a record with the same entry as the thread's
 * previous ALLOC carried no frames: jq alternates between a few stacks, and a third of its
 * records carried frames that the writer hashed and compared again (now 0.2 %). */
#define SC_ENTRIES (SC_SETS * SC_WAYS)
typedef struct sc_cache {
	sc_set sets[SC_SETS];
	uint32_t epoch;               /* starts at 1 */
	uint32_t gen;                 /* the session (M.gen) of the epoch */
	uint32_t nregions;            /* the regions of the epoch */
	uint32_t regions[COL_MAX_DEPTH];
	uint64_t scratch[COL_SAMPLE_MAX_DEPTH + 16]; /* a stack being unwound: record_alloc()'s
				      4 KiB were on the program's stack, which overflowed a
				      signal handler's alternate stack of 16 KiB */
	sc_entry once;                /* a stack walked but not cached (alloc_stack()) */
	sc_entry *recent;             /* the entry of the thread's latest hit or fill: a walk
				         stops where it meets that stack (sc_walk_rules()) */
} sc_cache;

/* FENNEC_HEAP_UNWIND's walker (G below): HU_RULES (unset, empty or "1"), HU_GCC ("gcc"),
 * HU_UNW ("0"), HU_CHECK ("check"); -1 for another value (col_mem_prepare() says it). */

/* FENNEC_HEAP_UNWIND's walker (heap_stacks.c); -1 for a value it does not take. */
int heap_unwind_parse(const char *e);

#if !MEM_SANITIZER
/* The walkers taken from libgcc, and FENNEC_HEAP_UNWIND's choice (heap_stacks.c, above sc_fill()). */
extern struct col_heap_unwind {
	_Unwind_Reason_Code (*backtrace)(_Unwind_Trace_Fn, void *);
	_Unwind_Ptr (*get_ip)(struct _Unwind_Context *);
	_Unwind_Word (*get_cfa)(struct _Unwind_Context *);
	int rules;          /* cfi.c's rules first */
	int check;
	_Atomic uint64_t both, differ, only_fast, only_unw; /* check mode: stacks walked by
					both, differing, walked by one side only */
	_Atomic uint64_t by_rules, by_gcc; /* check mode: the fast side's walks, by walker */
	FILE *log;
} G;

/* heap_stacks.c: give the thread's stack cache back (its end). */
void sc_release(void);
int sc_walk_unw(sc_entry *e, void **slot, uint32_t depth, int *more);
int sc_walk_rules(sc_entry *e, void **slot, uint32_t depth, int *more);
int sc_walk_gcc(sc_entry *e, void **slot, uint32_t depth, int *more);
__attribute__((noinline)) void heap_unwind_compare(const sc_entry *e, void **slot, uint32_t depth, int n, int more,
						   int rules);
void heap_unwind_init(void);

/* A walk's return addresses into an array, with libgcc's accessors (alloc_stack()). */
typedef struct gcc_ips {
	uint64_t *f;
	int n, max;
} gcc_ips;
_Unwind_Reason_Code gcc_ip(struct _Unwind_Context *ctx, void *arg);

/* The frames a walk keeps: the depth limit, at most an entry's. */
static inline uint32_t sc_depth(void)
{
	return M.depth < SC_FRAMES ? M.depth : SC_FRAMES;
}

/* Whether a walk of n frames (*more: the stack went on) gave the whole stack up to the depth
 * limit: not when the limit is above what an entry holds and the walk stopped there. */
static inline int sc_whole(int n, int more)
{
	return n >= 0 && !(more > 0 && M.depth > SC_FRAMES && n == SC_FRAMES);
}
#endif

#if !MEM_SANITIZER
/* Mappings tracked as allocations (heap_mmap.c). */
typedef struct mapping {
	uintptr_t addr;
	size_t len;
} mapping;

extern struct col_heap_maps {
	atomic_flag lock;
	size_t min;          /* bytes; 0: mappings are not tracked */
	mapping *v;
	size_t n, cap;
} MAPS;
/* heap_hooks.c: a tracked mapping counted (and recorded) as an allocation, or as a free. */
void map_counted(const mapping *m, void **slot);
void unmap_counted(const mapping *m);
#endif

/* The writer's map of live blocks (heap_writer.c, above leaf_find()). */
typedef struct wblock {
	uint64_t size_lo;    /* size << 5 | the address's low 5 bits; free: the next free id */
	uint32_t stack;      /* 0: a free pool entry */
	uint32_t tid;        /* the allocating thread */
} wblock;

#define WP_SHIFT 12                      /* a leaf covers 4 KiB of addresses */
#define WP_SLOTS (1u << (WP_SHIFT - 5))  /* one slot per 32 bytes */
#define WB_CHUNK 65536u                  /* pool entries allocated at a time (1 MiB) */
#define WB_SIZE_MAX ((uint64_t)-1 >> 5)  /* above any block that can exist */
#define WL_CACHE 256                     /* pages found lately, direct-mapped */
#define WL_SLAB (1u << 20)               /* bytes of leaves allocated at a time */

typedef struct wleaf {
	uint64_t page;       /* address >> WP_SHIFT */
	struct wleaf *next;  /* in M.leaf_free */
	uint32_t count;      /* ids in slots */
	uint32_t slots[WP_SLOTS]; /* pool ids; 0: none */
} wleaf;

typedef struct wpage {
	uint64_t page;       /* 0: a free entry (no block is in the first page) */
	wleaf *leaf;
} wpage;

typedef struct wover {
	uint64_t addr;       /* 0: a free table entry */
	wblock b;
} wover;

static inline uint64_t wb_size(const wblock *b)
{
	return b->size_lo >> 5;
}

static inline wblock *pool_at(uint32_t id)
{
	return &M.pool[id / WB_CHUNK][id % WB_CHUNK];
}

/* The leaf of a page, or NULL. */
wleaf *leaf_find(uint64_t page);
/* Forget everything written (a new file: a new session or a fork child). */
void writer_reset(void);

#pragma GCC visibility pop

#endif

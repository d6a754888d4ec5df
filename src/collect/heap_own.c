/*
 * heap_own.c - fennec's own heap: where the collector's allocations go (T.own in heap.h),
 * never the program's allocator. The wrappers (heap_hooks.c) send them here; fennec's own
 * blocks are told by their address (own_block()).
 */
#include <sched.h>
#include <stdatomic.h>
#include <string.h>
#include <sys/mman.h>

#include "collect/heap.h"

/*
 * Allocations made by fennec itself (T.own: its writer thread and API calls, libunwind
 * inside a recording, dlsym while the real allocator is resolved) come from a private
 * mapping, never from the program's allocator. In the program's heap they took its arena
 * locks and changed its layout: the writer growing its output buffer in the main arena put
 * a block above a realloc chain that had grown in place at the top of the heap, and every
 * realloc after that split a free neighbour instead (bench/memory.sh, realloc: 2.4x the
 * unprofiled run where counting alone cost 1.5x).
 * Blocks hold 16 << k bytes behind a 16-byte header; a free list per size; one spinlock
 * (fennec allocates rarely, never on the program's hot path). Freed blocks of OWN_RELEASE
 * or more give their pages back. The header's second word is what glibc keeps before an
 * mmapped chunk, so malloc_usable_size() works on these blocks too.
 */
#if !MEM_SANITIZER
struct col_heap_own H = {.lock = ATOMIC_FLAG_INIT};

static void own_lock(void)
{
	while (atomic_flag_test_and_set_explicit(&H.lock, memory_order_acquire))
		sched_yield();
}

static void own_unlock(void)
{
	atomic_flag_clear_explicit(&H.lock, memory_order_release);
}

/* Reserve the address space once; a smaller one where a limit refuses 8 GiB. */
static int own_map(void)
{
	int s = atomic_load_explicit(&H.state, memory_order_acquire), expect = 0;
	if (likely(s == 2))
		return 0;
	if (s == 0 && atomic_compare_exchange_strong(&H.state, &expect, 1)) {
		for (size_t size = OWN_SPACE; size >= (16u << 20); size /= 4) {
			void *m = mmap(NULL, size, PROT_NONE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
			if (m != MAP_FAILED) {
				H.base = m;
				atomic_store(&H.span, size);
				atomic_store(&H.state, 2);
				return 0;
			}
		}
		atomic_store(&H.state, 3);
		return -1;
	}
	while ((s = atomic_load(&H.state)) == 1)
		sched_yield();
	return s == 2 ? 0 : -1;
}

/* `n` new bytes at the end of the used space, made accessible as needed. Under lock. */
static uint8_t *own_bump(size_t n)
{
	size_t span = atomic_load_explicit(&H.span, memory_order_relaxed);
	if (n > span - H.used)
		return NULL;
	if (H.used + n > H.committed) {
		size_t c = (H.used + n + OWN_COMMIT - 1) & ~(size_t)(OWN_COMMIT - 1);
		if (c > span)
			c = span;
		if (mprotect(H.base + H.committed, c - H.committed, PROT_READ | PROT_WRITE) != 0)
			return NULL;
		H.committed = c;
	}
	uint8_t *b = H.base + H.used;
	H.used += n;
	return b;
}

/* `n` bytes aligned to `align` (a power of two). NULL when out of memory; when no address
 * space could be reserved at all, from the real allocator (uncounted, as before). *fresh
 * (when not NULL) is set when the block's bytes were never handed out: still zero. */
void *own_alloc_at(size_t n, size_t align, int *fresh)
{
	if (align < 16)
		align = 16;
	if (n > (OWN_SPACE >> 2) || align > (OWN_SPACE >> 4))
		return NULL;
	if (unlikely(own_map() < 0))
		return atomic_load(&resolved) == 2 ? R.memalign(align, n) : NULL;
	unsigned k = 0;
	while (((size_t)16 << k) < n + align - 16) /* room to move the start to `align` */
		k++;
	size_t blk = ((size_t)16 << k) + 16;
	own_lock();
	uint8_t *b = H.free_list[k];
	int reused = b != NULL;
	if (b)
		H.free_list[k] = *(uint8_t **)(b + 16);
	else
		b = own_bump(blk);
	own_unlock();
	if (fresh)
		*fresh = !reused;
	if (!b)
		return NULL;
	uint8_t *p = (uint8_t *)(((uintptr_t)b + 16 + align - 1) & ~(uintptr_t)(align - 1));
	size_t *h = (size_t *)p - 2;
	h[0] = k | (size_t)(p - b) << 8;
	h[1] = ((size_t)(b + blk - p) + 16) | 2; /* glibc: an mmapped chunk's size word */
	return p;
}

static inline size_t own_usable(const void *p)
{
	return (((const size_t *)p)[-1] & ~(size_t)7) - 16;
}

void own_free(void *p)
{
	size_t *h = (size_t *)p - 2;
	unsigned k = (unsigned)(h[0] & 0xff);
	uint8_t *b = (uint8_t *)p - (h[0] >> 8);
	size_t blk = ((size_t)16 << k) + 16;
	if (blk >= OWN_RELEASE) {
		uintptr_t lo = ((uintptr_t)b + 24 + 4095) & ~(uintptr_t)4095, hi = ((uintptr_t)b + blk) & ~(uintptr_t)4095;
		if (hi > lo)
			madvise((void *)lo, hi - lo, MADV_DONTNEED);
	}
	own_lock();
	*(uint8_t **)(b + 16) = H.free_list[k];
	H.free_list[k] = b;
	own_unlock();
}

void *own_calloc(size_t n, size_t size)
{
	size_t total;
	if (__builtin_mul_overflow(n, size, &total))
		return NULL;
	/* Bumped space is zero (never written since it was mapped): writing it anyway cost
	 * the sampler's 900 KiB thread table 225 page faults at every start of a process. */
	int fresh = 0;
	void *p = own_alloc_at(total, 16, &fresh);
	if (p && !(fresh && own_block(p)))
		memset(p, 0, total); /* the real allocator's too (no space could be reserved) */
	return p;
}

void *own_realloc(void *p, size_t n)
{
	size_t old = own_usable(p);
	if (n <= old)
		return p;
	void *q = own_alloc(n, 16);
	if (q) {
		memcpy(q, p, old);
		own_free(p);
	}
	return q;
}

static void own_child(void)
{
	atomic_flag_clear(&H.lock); /* the thread that held it does not exist here */
}

/* A fork must not copy the own heap's lock held by a thread the child will not have. */
void own_atfork(void)
{
	pthread_atfork(own_lock, own_unlock, own_child);
}
#endif

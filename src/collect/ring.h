/*
 * ring.h - a multi-producer, single-consumer byte ring for variable-length records, shared
 * by every thread of the process: CPU samples (sample.c) and heap events (heap_hooks.c).
 * Producers reserve with one CAS on the tail, fill, then publish the record's length word
 * with a release store; the writer thread consumes in reservation order. Producers never
 * block and never allocate, so they may run in signal handlers and inside malloc.
 */
#ifndef FENNEC_RING_H
#define FENNEC_RING_H

#include <stdatomic.h>
#include <stdint.h>
#include <stddef.h>

#define COL_RING_READY (1u << 31) /* in a record's first word: the record is complete */
#define COL_RING_PAD (1u << 30)   /* with READY: no record; skip its length to the next lap */

/* tail and head in cache lines of their own: producers' CAS on tail and the writer's
 * stores to head would otherwise take the line from each other on every record. */
typedef struct col_ring {
	uint8_t *buf;              /* NULL until col_ring_init */
	uint64_t size;             /* bytes, a power of two */
	uint64_t rewind;           /* offset past which the rest of a lap is skipped (a quarter) */
	_Alignas(64) _Atomic uint64_t tail; /* reserved up to (producers) */
	_Alignas(64) _Atomic uint64_t head; /* consumed up to (the writer) */
	char pad[56];
} col_ring;

/* Rings of this size or more ask for huge pages (col_ring_init()): the sample ring and
 * full mode's heap ring, the two whose traffic is heavy. */
#define COL_RING_HUGE_MIN (8u << 20)

/* Map a ring of `size` bytes (a power of two). Returns 0, or -1 when mmap fails. */
int col_ring_init(col_ring *r, uint64_t size);

void col_ring_rewind(col_ring *r, uint64_t pos, uint64_t head);

/* Reserve `len` bytes (a multiple of 8, at least 8) at *pos. Returns 0, or -1 when the ring
 * lacks the room (nothing is reserved). Async-signal-safe.
 *
 * Past a quarter of the ring the rest of the lap is skipped (col_ring_rewind()), so that
 * records keep to the pages they already touched: a ring made its whole lap before, and
 * each lap's fresh pages were resident memory of the program that grew for as long as the
 * first lap took (sampled mode's 4 MiB heap ring, a SNAP record a step, grew the program
 * by ~65 bytes a step for hours; a thread's 2 MiB event ring the same, api.c). */
static inline int col_ring_reserve(col_ring *r, uint32_t len, uint64_t *pos)
{
	uint64_t p = atomic_load_explicit(&r->tail, memory_order_relaxed);
	for (;;) {
		uint64_t h = atomic_load_explicit(&r->head, memory_order_acquire);
		if (p + len - h > r->size)
			return -1;
		if (__builtin_expect((p & (r->size - 1)) >= r->rewind, 0)) {
			col_ring_rewind(r, p, h);
			uint64_t q = atomic_load_explicit(&r->tail, memory_order_relaxed);
			if (q != p) {
				p = q;
				continue;
			}
		}
		if (atomic_compare_exchange_weak_explicit(&r->tail, &p, p + len, memory_order_relaxed,
							  memory_order_relaxed))
			break;
	}
	*pos = p;
	return 0;
}

/* Copy into (out of) the ring at pos, wrapping. The first 4 bytes of a record are its
 * length word: producers fill from pos + 4 and publish last. */
/* The `len` bytes at pos when they do not wrap (the common case: one memcpy per field, no
 * call), else NULL. */
static inline uint8_t *col_ring_span(col_ring *r, uint64_t pos, size_t len)
{
	uint64_t off = pos & (r->size - 1);
	return off + len <= r->size ? r->buf + off : NULL;
}

void col_ring_put(col_ring *r, uint64_t pos, const void *src, size_t n);
void col_ring_get(const col_ring *r, uint64_t pos, void *dst, size_t n);

static inline void col_ring_publish(col_ring *r, uint64_t pos, uint32_t len)
{
	__atomic_store_n((uint32_t *)(r->buf + (pos & (r->size - 1))), len | COL_RING_READY, __ATOMIC_RELEASE);
}

/* The length of the complete record at the writer's position *head, or 0 when the next
 * record is not published yet (or the ring is empty). With COL_RING_PAD set it is a pad
 * (col_ring_rewind()): the consumer passes it with col_ring_skip(), which touches only
 * its first word (the bytes after it are zero, never written or cleared). */
static inline uint32_t col_ring_ready(const col_ring *r, uint64_t head)
{
	uint32_t len = __atomic_load_n((uint32_t *)(r->buf + (head & (r->size - 1))), __ATOMIC_ACQUIRE);
	return len & COL_RING_READY ? len & ~COL_RING_READY : 0;
}

static inline void col_ring_skip(col_ring *r, uint64_t *head, uint32_t len)
{
	*(uint32_t *)(r->buf + (*head & (r->size - 1))) = 0;
	*head += len & ~COL_RING_PAD;
}

/* The writer is done with the record of `len` bytes at *head: clear it, advance. */
void col_ring_consume(col_ring *r, uint64_t *head, uint32_t len);

/* The same without handing the room back to producers yet: the writer calls
 * col_ring_release() once per batch (a store to head per record took its cache line from
 * the producers each time). */
void col_ring_clear(col_ring *r, uint64_t *head, uint32_t len);

static inline void col_ring_release(col_ring *r, uint64_t head)
{
	atomic_store_explicit(&r->head, head, memory_order_release);
}

/* Bytes reserved and not yet consumed. */
static inline uint64_t col_ring_used(col_ring *r)
{
	return atomic_load_explicit(&r->tail, memory_order_relaxed) -
	       atomic_load_explicit(&r->head, memory_order_relaxed);
}

/* In a fork child: records of threads that do not exist here may never be published;
 * empty the ring. */
void col_ring_reset(col_ring *r);

#endif

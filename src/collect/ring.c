/*
 * ring.c - the shared record ring (ring.h): mapping, wrapping copies, consumption.
 */
#include <string.h>
#include <sys/mman.h>

#include "collect/ring.h"

int col_ring_init(col_ring *r, uint64_t size)
{
	if (r->buf)
		return 0;
	void *m = mmap(NULL, size, PROT_READ | PROT_WRITE, MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
	if (m == MAP_FAILED)
		return -1;
	/* Huge pages where the kernel gives them on request (transparent_hugepage "madvise",
	 * the default of most distributions): the first pass over the 8 MiB sample ring is
	 * then 4 faults, not 2,048. Under this project's hypervisor a 4 KiB fault costs ~19 us
	 * of CPU: the sample ring's were 18 % of the writer's CPU at 9999 Hz (bench/README.md,
	 * "sample_cost, 2026-12-02"), and full mode's heap ring (16 MiB) had 4,096 of them on
	 * the program's threads. One such ring a process: its resident size grows 2 MiB at a
	 * time. Sampled mode's heap ring (4 MiB, a few records a millisecond) keeps small
	 * pages: a short program would otherwise show 2 MiB more RSS for a few dozen KiB. */
	if (size >= COL_RING_HUGE_MIN)
		madvise(m, size, MADV_HUGEPAGE);
	r->size = size;
	r->rewind = size / 4;
	atomic_store(&r->tail, 0);
	atomic_store(&r->head, 0);
	r->buf = m;
	return 0;
}

/* A producer at pos, past `rewind` (col_ring_reserve()): the rest of the lap becomes one
 * pad record, so that the next record starts the next lap at offset 0. Only while the
 * writer's head is in this lap and past its quarter too: the room left until the writer
 * passes the pad, a few milliseconds on, is the head's offset. The pad's bytes after its
 * first word are not touched (they are zero: never written, or cleared when consumed); a
 * producer that moved the tail first makes this a no-op. */
void col_ring_rewind(col_ring *r, uint64_t pos, uint64_t head)
{
	uint64_t off = pos & (r->size - 1), lap = pos - off;
	if (head < lap + r->size / 4)
		return;
	uint64_t gap = r->size - off;
	if (atomic_compare_exchange_strong_explicit(&r->tail, &pos, pos + gap, memory_order_relaxed,
						    memory_order_relaxed))
		__atomic_store_n((uint32_t *)(r->buf + off), (uint32_t)gap | COL_RING_READY | COL_RING_PAD,
				 __ATOMIC_RELEASE);
}

void col_ring_put(col_ring *r, uint64_t pos, const void *src, size_t n)
{
	if (!n)
		return; /* src may be NULL */
	uint64_t off = pos & (r->size - 1);
	size_t first = r->size - off < n ? r->size - off : n;
	memcpy(r->buf + off, src, first);
	memcpy(r->buf, (const uint8_t *)src + first, n - first);
}

void col_ring_get(const col_ring *r, uint64_t pos, void *dst, size_t n)
{
	if (!n)
		return;
	uint64_t off = pos & (r->size - 1);
	size_t first = r->size - off < n ? r->size - off : n;
	memcpy(dst, r->buf + off, first);
	memcpy((uint8_t *)dst + first, r->buf, n - first);
}

void col_ring_clear(col_ring *r, uint64_t *head, uint32_t len)
{
	uint64_t off = *head & (r->size - 1);
	size_t first = r->size - off < len ? r->size - off : len;
	memset(r->buf + off, 0, first);
	memset(r->buf, 0, len - first);
	*head += len;
}

void col_ring_consume(col_ring *r, uint64_t *head, uint32_t len)
{
	col_ring_clear(r, head, len);
	col_ring_release(r, *head);
}

/*
 * The pages go back to the kernel, which gives zeroed ones on the next touch. A memset
 * wrote every page of the rings the parent had shared with the child copy-on-write: in
 * every fork child, before it ran, 2,048 page faults for the 8 MiB sample ring and 4,096
 * more for a 16 MiB full-mode heap ring (a shell loop of 50 /bin/true: 0.65 s, not 0.13 s
 * with sampling on). MADV_DONTNEED on private anonymous memory is exactly that; the memset
 * stays for a kernel that refuses it.
 */
void col_ring_reset(col_ring *r)
{
	if (r->buf && madvise(r->buf, r->size, MADV_DONTNEED) != 0)
		memset(r->buf, 0, r->size);
	atomic_store(&r->tail, 0);
	atomic_store(&r->head, 0);
}

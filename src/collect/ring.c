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
	r->size = size;
	atomic_store(&r->tail, 0);
	atomic_store(&r->head, 0);
	r->buf = m;
	return 0;
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

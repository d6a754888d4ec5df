/*
 * heap_writer.c - the heap profiler on the writer thread: it drains the heap ring
 * (heap_hooks.c writes it) into HEAP2 chunks, with the map of live blocks by address, the
 * per-thread state the records leave implied and the interned stacks. The scan at the end
 * reads the same map (heap_reach.c).
 */
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>

#include "collect/pyframes.h"
#include "collect/heap.h"
#include "format/encode.h"

/* ---- the writer's side ---- */

/*
 * The writer turns ring records into HEAP2 records (docs/format.md, "Heap (1.3)"). It keeps
 * the live blocks by address, so that a FREE names the stack and size of the block it frees
 * instead of its address (the reader and the analysis need no more, and addresses were most
 * of the file), and per thread the state the records leave implied: the thread, the time and
 * the step are written when they change, a stack when it differs from the thread's previous
 * one, nothing at all for a free of the thread's latest allocation in the chunk.
 */

typedef struct wthread {
	uint32_t tid;        /* 0: a free table entry */
	uint32_t index;      /* THREAD index in the chunk being written; NO_INDEX: none yet */
	uint32_t stack;      /* of its latest ALLOC or FREE record in the chunk (0: none) */
	uint32_t last_stack; /* its latest allocation, while live (last_addr 0: none) */
	uint32_t entry_stack[SC_ENTRIES]; /* per stack cache entry, the stack its latest ALLOC
				      record with frames carried: what MREC_SAME refers to */
	uint64_t last_addr, last_size;
	int last_here;       /* ... was written in this chunk */
} wthread;
#define NO_INDEX UINT32_MAX

static inline uint64_t mix64(uint64_t h)
{
	h ^= h >> 33;
	h *= 0xff51afd7ed558ccdull;
	h ^= h >> 33;
	return h;
}

/*
 * The live blocks by address. Every FREE is looked up, and a program with millions of
 * small blocks live (jq: 2.9M) makes the map far larger than the caches: hashed by
 * address, each lookup was a cache and TLB miss (a 96 MB table on jq, most of the writer's
 * time). Programs allocate and free in address order more often than not (the heap grows
 * at its top; a structure freed whole is freed in about the order it was built), so the map
 * keeps that order. The address space is cut into pages of 2^WP_SHIFT bytes; a small hash
 * table (the page table) finds a page's leaf, the WL_CACHE pages found latest are kept at
 * hand, and a leaf has one slot per 32 bytes of its page, holding the id of the block's entry in a pool
 * of 16-byte entries. glibc's blocks are at least 32 bytes apart (MINSIZE), so no two live
 * blocks share a slot; when they do (another allocator, or a block whose FREE was lost),
 * the second goes to an overflow table by address, which is normally empty. A page whose
 * last block is freed gives its leaf back. An entry records the address's low 5 bits, so a
 * slot's block is told apart from another address in the same 32 bytes.
 * On jq (2.9M live blocks in 69K pages) the leaves take 37 MB and the pool 45 MB, against
 * 96 MB for the hash table by address (and 144 MB while it grew). Leaves and pool entries
 * come in chunks of 1 MiB whose pages are faulted in at once (populate()): page faults
 * one by one took a fifth of the writer's time. Not the first chunk of each: in sampled
 * mode a few of its pages are ever used, and faulting in 2 MiB at the start cost ~1 % of
 * a short malloc-heavy program's CPU time (bench/alloc_overhead.c).
 */

static inline int wb_is(const wblock *b, uint64_t addr)
{
	return (b->size_lo & 31) == (addr & 31);
}

static inline void wb_set(wblock *b, uint64_t addr, uint64_t size, uint32_t stack, uint32_t tid)
{
	b->size_lo = (size < WB_SIZE_MAX ? size : WB_SIZE_MAX) << 5 | (addr & 31);
	b->stack = stack;
	b->tid = tid;
}

#ifndef MADV_POPULATE_WRITE
#define MADV_POPULATE_WRITE 23 /* Linux 5.14 */
#endif
/* Fault in the pages of [p, p + n) at once, before they are written one by one: one system
 * call instead of a page fault per page (older kernels refuse it, and the pages fault in
 * as they are written). */
static void populate(void *p, size_t n)
{
	uintptr_t lo = ((uintptr_t)p + 4095) & ~(uintptr_t)4095, hi = ((uintptr_t)p + n) & ~(uintptr_t)4095;
	if (hi > lo)
		madvise((void *)lo, hi - lo, MADV_POPULATE_WRITE);
}


/* A free pool entry's id (ids start at 1), or 0 when out of memory. */
static uint32_t pool_get(void)
{
	uint32_t id = M.pool_free;
	if (id) {
		M.pool_free = (uint32_t)pool_at(id)->size_lo;
		return id;
	}
	if (M.pool_used + 1 >= (uint64_t)M.pool_chunks * WB_CHUNK) {
		if (M.pool_chunks == UINT32_MAX / WB_CHUNK)
			return 0;
		if (M.pool_chunks == M.pool_chunks_cap) {
			uint32_t cap = M.pool_chunks_cap ? M.pool_chunks_cap * 2 : 16;
			wblock **t = realloc(M.pool, cap * sizeof *t);
			if (!t)
				return 0;
			M.pool = t;
			M.pool_chunks_cap = cap;
		}
		wblock *c = malloc(WB_CHUNK * sizeof *c);
		if (!c)
			return 0;
		if (M.pool_chunks) /* the first chunk's pages fault in as they are used: in sampled
				      mode, or on a small heap, that is a few of them */
			populate(c, WB_CHUNK * sizeof *c);
		M.pool[M.pool_chunks++] = c;
	}
	return ++M.pool_used;
}

static void pool_put(uint32_t id)
{
	wblock *b = pool_at(id);
	b->stack = 0;
	b->size_lo = M.pool_free;
	M.pool_free = id;
}

static inline uint32_t page_home(uint64_t page, uint32_t cap)
{
	return (uint32_t)(mix64(page) & (cap - 1));
}

/* The entries of an open-addressing table of old_cap entries of `size` bytes, each led by
 * its uint64_t key (0: empty), moved into a new table of cap (a power of two), where
 * home() says each key's first slot; the old one is freed. NULL (the old one kept) when
 * out of memory. The page table and the overflow table grow by it. */
static void *table_grow(void *old, uint32_t old_cap, uint32_t cap, size_t size, uint32_t (*home)(uint64_t, uint32_t))
{
	uint8_t *t = calloc(cap, size);
	if (!t)
		return NULL;
	for (uint32_t i = 0; i < old_cap; i++) {
		const uint8_t *e = (const uint8_t *)old + (size_t)i * size;
		uint64_t key, other;
		memcpy(&key, e, 8);
		if (!key)
			continue;
		uint32_t j = home(key, cap);
		for (;; j = (j + 1) & (cap - 1)) {
			memcpy(&other, t + (size_t)j * size, 8);
			if (!other)
				break;
		}
		memcpy(t + (size_t)j * size, e, size);
	}
	free(old);
	return t;
}

/* The leaf of a page, or NULL. The leaf cache is looked at first: a lookup that hits it
 * touches no other line. */
wleaf *leaf_find(uint64_t page)
{
	if (!M.pages_cap) /* nothing made yet (nor the cache) */
		return NULL;
	wpage *c = &M.leaf_cache[page & (WL_CACHE - 1)];
	if (c->page == page)
		return c->leaf;
	for (uint32_t j = page_home(page, M.pages_cap);; j = (j + 1) & (M.pages_cap - 1)) {
		if (M.pages[j].page == page) {
			*c = M.pages[j];
			return c->leaf;
		}
		if (!M.pages[j].page)
			return NULL;
	}
}

/* The page's leaf, made empty when it has none. NULL when out of memory. */
static wleaf *leaf_make(uint64_t page)
{
	wleaf *l = leaf_find(page);
	if (l)
		return l;
	if (!M.leaf_cache && !(M.leaf_cache = calloc(WL_CACHE, sizeof *M.leaf_cache)))
		return NULL;
	if ((M.npages + 1) * 2 > M.pages_cap) {
		uint32_t cap = M.pages_cap ? M.pages_cap * 2 : 1024;
		wpage *t = table_grow(M.pages, M.pages_cap, cap, sizeof *t, page_home);
		if (!t)
			return NULL;
		M.pages = t;
		M.pages_cap = cap;
	}
	if ((l = M.leaf_free) != NULL) {
		M.leaf_free = l->next; /* its slots are all 0 */
	} else {
		if (!M.leaf_slab_left) {
			if (!(M.leaf_slab = malloc(WL_SLAB)))
				return NULL;
			if (M.leaf_slabs++) /* as the pool's first chunk */
				populate(M.leaf_slab, WL_SLAB);
			M.leaf_slab_left = WL_SLAB / sizeof *l;
		}
		l = (wleaf *)M.leaf_slab;
		memset(l, 0, sizeof *l);
		M.leaf_slab += sizeof *l;
		M.leaf_slab_left--;
	}
	l->page = page;
	l->next = NULL;
	l->count = 0;
	uint32_t j = page_home(page, M.pages_cap);
	while (M.pages[j].page)
		j = (j + 1) & (M.pages_cap - 1);
	M.pages[j] = (wpage){page, l};
	M.npages++;
	M.leaf_cache[page & (WL_CACHE - 1)] = M.pages[j];
	return l;
}

/* l is empty: keep it for another page, take its page out of the table (linear probing
 * without tombstones: later entries of the run move back into the hole) and the cache. */
static void leaf_drop(wleaf *l)
{
	wpage *c = &M.leaf_cache[l->page & (WL_CACHE - 1)];
	if (c->page == l->page)
		c->page = 0;
	uint32_t mask = M.pages_cap - 1, i = page_home(l->page, M.pages_cap);
	while (M.pages[i].page != l->page)
		i = (i + 1) & mask;
	for (uint32_t j = (i + 1) & mask; M.pages[j].page; j = (j + 1) & mask) {
		uint32_t home = page_home(M.pages[j].page, M.pages_cap);
		if (((j - home) & mask) >= ((j - i) & mask)) { /* home not in (i, j]: may move to i */
			M.pages[i] = M.pages[j];
			i = j;
		}
	}
	M.pages[i].page = 0;
	M.npages--;
	l->next = M.leaf_free;
	M.leaf_free = l;
}

static inline uint32_t over_home(uint64_t addr, uint32_t cap)
{
	return (uint32_t)(mix64(addr >> 3) & (cap - 1));
}

static wover *over_find(uint64_t addr)
{
	if (!M.over_cap)
		return NULL;
	for (uint32_t j = over_home(addr, M.over_cap);; j = (j + 1) & (M.over_cap - 1)) {
		if (M.over[j].addr == addr)
			return &M.over[j];
		if (!M.over[j].addr)
			return NULL;
	}
}

/* A new overflow entry for addr (not in the table). NULL when out of memory. */
static wover *over_add(uint64_t addr)
{
	if ((M.nover + 1) * 2 > M.over_cap) {
		uint32_t cap = M.over_cap ? M.over_cap * 2 : 256;
		wover *t = table_grow(M.over, M.over_cap, cap, sizeof *t, over_home);
		if (!t)
			return NULL;
		M.over = t;
		M.over_cap = cap;
	}
	uint32_t j = over_home(addr, M.over_cap);
	while (M.over[j].addr)
		j = (j + 1) & (M.over_cap - 1);
	M.over[j] = (wover){.addr = addr};
	M.nover++;
	return &M.over[j];
}

static void over_del(wover *o)
{
	uint32_t mask = M.over_cap - 1, i = (uint32_t)(o - M.over);
	for (uint32_t j = (i + 1) & mask; M.over[j].addr; j = (j + 1) & mask) {
		uint32_t home = over_home(M.over[j].addr, M.over_cap);
		if (((j - home) & mask) >= ((j - i) & mask)) {
			M.over[i] = M.over[j];
			i = j;
		}
	}
	M.over[i].addr = 0;
	M.nover--;
}

/* Where live_find() found a block: its leaf and slot, or its overflow entry. */
typedef struct wfound {
	wleaf *leaf;
	uint32_t *slot;
	wover *over;
} wfound;

/* The live block at addr, or NULL; where it is in *f. An address is in its page's slot or
 * in the overflow table, never both. */
static wblock *live_find(uint64_t addr, wfound *f)
{
	wleaf *p = leaf_find(addr >> WP_SHIFT);
	if (p) {
		uint32_t *s = &p->slots[(addr >> 5) & (WP_SLOTS - 1)];
		if (*s && wb_is(pool_at(*s), addr)) {
			*f = (wfound){p, s, NULL};
			return pool_at(*s);
		}
	}
	if (M.nover) {
		wover *o = over_find(addr);
		if (o) {
			*f = (wfound){NULL, NULL, o};
			return &o->b;
		}
	}
	return NULL;
}

/* The entry for addr: the live block there (its FREE was lost: stack set), or a new entry
 * (stack 0) that the caller fills with wb_set(). NULL when out of memory. */
static wblock *live_upsert(uint64_t addr)
{
	if (M.nover) {
		wover *o = over_find(addr);
		if (o)
			return &o->b;
	}
	wleaf *p = leaf_make(addr >> WP_SHIFT);
	if (!p)
		return NULL;
	uint32_t *s = &p->slots[(addr >> 5) & (WP_SLOTS - 1)];
	if (*s) {
		if (wb_is(pool_at(*s), addr))
			return pool_at(*s);
		wover *o = over_add(addr); /* another block has this slot */
		if (!o)
			return NULL;
		wb_set(&o->b, addr, 0, 0, 0);
		return &o->b;
	}
	uint32_t id = pool_get();
	if (!id) {
		if (!p->count)
			leaf_drop(p);
		return NULL;
	}
	*s = id;
	p->count++;
	wblock *b = pool_at(id);
	wb_set(b, addr, 0, 0, 0);
	return b;
}

/* The block that live_find() found at f is freed (nothing changed the map since). */
static void live_del_found(const wfound *f)
{
	if (f->leaf) {
		pool_put(*f->slot);
		*f->slot = 0;
		if (!--f->leaf->count)
			leaf_drop(f->leaf);
	} else {
		over_del(f->over);
	}
}

/* The block at addr is freed. */
static void live_del(uint64_t addr)
{
	wfound f;
	if (live_find(addr, &f))
		live_del_found(&f);
}

static wthread *thread_find(uint32_t tid)
{
	if (M.hot && M.hot->tid == tid)
		return M.hot;
	if (!M.threads_cap)
		return NULL;
	for (uint32_t j = (uint32_t)mix64(tid) & (M.threads_cap - 1);; j = (j + 1) & (M.threads_cap - 1)) {
		if (M.threads[j].tid == tid)
			return M.hot = &M.threads[j];
		if (!M.threads[j].tid)
			return NULL;
	}
}

/* The state of thread `tid`, made on first use (which may move the others': callers hold
 * no other wthread pointer across it). NULL when out of memory. */
static wthread *thread_state(uint32_t tid)
{
	wthread *t = thread_find(tid);
	if (t)
		return t;
	if ((M.nthreads + 1) * 2 > M.threads_cap) {
		uint32_t cap = M.threads_cap ? M.threads_cap * 2 : 64;
		wthread *n = calloc(cap, sizeof *n);
		if (!n)
			return NULL;
		for (uint32_t i = 0; i < M.threads_cap; i++) {
			if (!M.threads[i].tid)
				continue;
			uint32_t j = (uint32_t)mix64(M.threads[i].tid) & (cap - 1);
			while (n[j].tid)
				j = (j + 1) & (cap - 1);
			n[j] = M.threads[i];
		}
		free(M.threads);
		M.threads = n;
		M.threads_cap = cap;
		M.hot = NULL;
	}
	uint32_t j = (uint32_t)mix64(tid) & (M.threads_cap - 1);
	while (M.threads[j].tid)
		j = (j + 1) & (M.threads_cap - 1);
	M.threads[j] = (wthread){.tid = tid, .index = NO_INDEX};
	M.nthreads++;
	return &M.threads[j];
}

/* A new chunk: the state records imply starts over (the last allocations stay known). */
static void chunk_reset(void)
{
	M.chunk_threads = 0;
	M.cur_tid = 0;
	M.cur_q = 0;
	M.cur_step = 0;
	for (uint32_t i = 0; i < M.threads_cap; i++) {
		M.threads[i].index = NO_INDEX;
		M.threads[i].stack = 0;
		M.threads[i].last_here = 0;
	}
}

/* Forget everything written (a new file: a new session or a fork child). */
void writer_reset(void)
{
	M.nstacks = 0;
	if (M.stacks)
		memset(M.stacks, 0, sizeof *M.stacks * M.stacks_cap);
	M.stack_data.len = 0;
	for (uint32_t i = 0; i < M.pages_cap; i++) {
		wleaf *l = M.pages[i].leaf;
		if (!M.pages[i].page)
			continue;
		memset(l->slots, 0, sizeof l->slots);
		l->next = M.leaf_free;
		M.leaf_free = l;
	}
	if (M.pages)
		memset(M.pages, 0, sizeof *M.pages * M.pages_cap);
	M.npages = 0;
	if (M.leaf_cache)
		memset(M.leaf_cache, 0, WL_CACHE * sizeof *M.leaf_cache);
	M.pool_used = 0;
	M.pool_free = 0;
	if (M.over)
		memset(M.over, 0, sizeof *M.over * M.over_cap);
	M.nover = 0;
	if (M.threads)
		memset(M.threads, 0, sizeof *M.threads * M.threads_cap);
	M.nthreads = 0;
	M.hot = NULL;
	chunk_reset();
	M.body.len = 0;
	M.counters_written = 0;
}

static uint64_t hash_stack(uint8_t flags, const uint64_t *frames, uint32_t nf, const uint32_t *regions, uint32_t nr)
{
	uint64_t h = mix64(((uint64_t)nf << 32 | (uint64_t)nr << 8 | flags) + 0x9e3779b97f4a7c15ull);
	for (uint32_t i = 0; i < nf; i++)
		h = (h ^ frames[i]) * 0x9e3779b97f4a7c15ull + (h >> 29);
	for (uint32_t i = 0; i < nr; i++)
		h = (h ^ regions[i]) * 0x9e3779b97f4a7c15ull + (h >> 29);
	return mix64(h) | 1; /* 0 marks a free table entry */
}

/* The id of the stack (flags, frames, regions), interned; *is_new set when it was not
 * known. 0 when out of memory. Kept as bytes: u8 flags, u16 nf, u16 nr, frames, regions. */
static uint32_t intern_stack(uint8_t flags, const uint64_t *frames, uint32_t nf, const uint32_t *regions,
			     uint32_t nr, int *is_new)
{
	*is_new = 0;
	if (M.nstacks * 2 >= M.stacks_cap) {
		uint32_t cap = M.stacks_cap ? M.stacks_cap * 2 : 4096;
		struct stk *t = calloc(cap, sizeof *t);
		if (!t)
			return 0;
		for (uint32_t i = 0; i < M.stacks_cap; i++) {
			if (!M.stacks[i].hash)
				continue;
			uint32_t j = (uint32_t)M.stacks[i].hash & (cap - 1);
			while (t[j].hash)
				j = (j + 1) & (cap - 1);
			t[j] = M.stacks[i];
		}
		free(M.stacks);
		M.stacks = t;
		M.stacks_cap = cap;
	}
	uint64_t h = hash_stack(flags, frames, nf, regions, nr);
	uint32_t j = (uint32_t)h & (M.stacks_cap - 1);
	for (; M.stacks[j].hash; j = (j + 1) & (M.stacks_cap - 1)) {
		if (M.stacks[j].hash != h)
			continue;
		const uint8_t *k = M.stack_data.data + M.stacks[j].off;
		uint16_t knf, knr;
		memcpy(&knf, k + 1, 2);
		memcpy(&knr, k + 3, 2);
		if (k[0] == flags && knf == nf && knr == nr && !memcmp(k + 5, frames, 8 * (size_t)nf) &&
		    !memcmp(k + 5 + 8 * (size_t)nf, regions, 4 * (size_t)nr))
			return M.stacks[j].id;
	}
	uint32_t off = (uint32_t)M.stack_data.len;
	uint16_t n16 = (uint16_t)nf, r16 = (uint16_t)nr;
	cm_buf_u8(&M.stack_data, flags);
	cm_buf_put(&M.stack_data, &n16, 2);
	cm_buf_put(&M.stack_data, &r16, 2);
	cm_buf_put(&M.stack_data, frames, 8 * (size_t)nf);
	cm_buf_put(&M.stack_data, regions, 4 * (size_t)nr);
	if (M.stack_data.failed)
		return 0;
	M.stacks[j].hash = h;
	M.stacks[j].id = ++M.nstacks;
	M.stacks[j].off = off;
	*is_new = 1;
	return M.nstacks;
}

static void emit_heap(void (*emit)(unsigned type, cm_buf *raw), void (*before)(void))
{
	before(); /* SITES first: stacks name regions */
	totals t;
	sum_totals(&t);
	cm_buf *b = &M.chunk;
	b->len = 0;
	cm_buf_varint(b, t.allocs - M.base_allocs);
	cm_buf_varint(b, t.frees - M.base_frees);
	cm_buf_varint(b, t.bytes - M.base_bytes);
	cm_buf_varint(b, live_now());
	cm_buf_varint(b, atomic_load(&peak));
	cm_buf_varint(b, atomic_load(&peak_ticks));
	cm_buf_varint(b, atomic_load(&peak_step));
	cm_buf_varint(b, atomic_load(&peak_site));
	cm_buf_varint(b, t.largest);
	M.last_records = M.records;
	M.last_dropped = atomic_load(&M.dropped);
	cm_buf_varint(b, M.last_records);
	cm_buf_varint(b, M.last_dropped);
	cm_buf_varint(b, atomic_load(&M.truncated));
	cm_buf_varint(b, atomic_load(&M.untracked));
	cm_buf_varint(b, M.shift);
	cm_buf_put(b, M.body.data, M.body.len);
	if (M.body.failed)
		b->failed = 1; /* records were lost: the chunk is counted as lost */
	emit(FMT_HEAP2, b);
	M.emitted_ns = cm_mono_ns();
	M.body.len = 0;
	M.body.failed = 0;
	chunk_reset();
	M.counters_written = 1;
	M.last_allocs = t.allocs;
	M.last_frees = t.frees;
	if (b->cap > (16u << 20))
		cm_buf_free(b);
}

/* Room for `n` more bytes of the body, written through the pointer returned (NULL when out
 * of memory) and closed by wr_end(). */
static inline uint8_t *wr_begin(size_t n)
{
	if (likely(M.body.len + n <= M.body.cap && !M.body.failed)) /* cm_buf_reserve()'s, inline */
		return M.body.data + M.body.len;
	return cm_buf_reserve(&M.body, n) < 0 ? NULL : M.body.data + M.body.len;
}

static void wr_end(const uint8_t *w)
{
	M.body.len = (size_t)(w - M.body.data);
}

static inline uint8_t *wr_varint(uint8_t *w, uint64_t v)
{
	while (v >= 0x80) {
		*w++ = (uint8_t)(v | 0x80);
		v >>= 7;
	}
	*w++ = (uint8_t)v;
	return w;
}

/* The TIME and THREAD state records an ALLOC, FREE or SNAP at `ticks` by `t` needs. */
static uint8_t *wr_state(uint8_t *w, uint64_t ticks, wthread *t)
{
	uint64_t q = ticks >> M.shift;
	if (q != M.cur_q) {
		w += fmt_enc_h2_time(w, (int64_t)(q - M.cur_q));
		M.cur_q = q;
	}
	if (t && t->tid != M.cur_tid) {
		int define = t->index == NO_INDEX;
		if (define)
			t->index = M.chunk_threads++;
		w += fmt_enc_h2_thread(w, t->index, define, (uint64_t)t->tid);
		M.cur_tid = t->tid;
	}
	return w;
}

#define WR_MAX 64 /* the most an ALLOC, FREE or SNAP takes with its state records */

/* A FREE by thread t of the live block b at addr, found by live_find() at f (NULL: look
 * it up again). */
static void put_free(wthread *t, uint64_t ticks, uint64_t addr, wblock *b, const wfound *f)
{
	uint8_t *w = wr_begin(WR_MAX);
	if (!w)
		return;
	w = wr_state(w, ticks, t);
	if (b->tid != t->tid) { /* another thread's block: no longer its latest allocation */
		wthread *owner = thread_find(b->tid);
		if (owner && owner->last_addr == addr)
			owner->last_addr = 0;
	}
	if (t->last_addr == addr) { /* freed before its thread allocated anything else */
		if (t->last_here)
			w += fmt_enc_h2_free_last(w);
		else
			w += fmt_enc_h2_free(w, FMT_H2_TEMP, b->stack, t->stack == b->stack, wb_size(b));
		t->last_addr = 0;
	} else {
		w += fmt_enc_h2_free(w, 0, b->stack, t->stack == b->stack, wb_size(b));
	}
	t->stack = b->stack;
	wr_end(w);
	if (f)
		live_del_found(f);
	else
		live_del(addr);
}

/* The STACK record of a new stack: native frames, then (flag FMT_HS_PYTHON) the Python
 * frames record_alloc() tagged after them. */
static uint8_t *put_stack(uint8_t *w, uint32_t id, unsigned flags, const uint64_t *frames, uint32_t nf,
			  const uint32_t *regions, uint32_t nr)
{
	uint32_t nat = 0;
	while (nat < nf && (frames[nat] >> 56) != (COL_PY_TAG >> 56))
		nat++;
	*w++ = FMT_H2_STACK;
	w = wr_varint(w, id);
	*w++ = (uint8_t)((flags & 1) | (nat < nf ? FMT_HS_PYTHON : 0));
	w = wr_varint(w, nr);
	for (uint32_t i = 0; i < nr; i++)
		w = wr_varint(w, regions[i]);
	w = wr_varint(w, nat);
	for (uint32_t i = 0; i < nat; i++)
		w = wr_varint(w, i ? cm_zigzag((int64_t)(frames[i] - frames[i - 1])) : frames[i]);
	if (nat < nf) {
		w = wr_varint(w, nf - nat);
		for (uint32_t i = nat; i < nf; i++) {
			w = wr_varint(w, (frames[i] >> 24 & 0x7fffffffu) << 1 | (frames[i] >> 55 & 1));
			w = wr_varint(w, frames[i] & 0xffffff);
		}
	}
	return w;
}

static void put_alloc(const mrec *r, const uint64_t *frames, const uint32_t *regions)
{
	uint32_t nf = r->nframes, nr = r->nregions, id;
	int is_new = 0;
	wthread *t = thread_state(r->tid);
	if (!t)
		return;
	uint32_t k = r->entry <= SC_ENTRIES ? r->entry : 0; /* 1 + the thread's cache entry */
	if (r->flags & MREC_SAME) {
		id = k ? t->entry_stack[k - 1] : 0;
	} else {
		id = intern_stack(r->flags & MREC_TRUNCATED, frames, nf, regions, nr, &is_new);
		if (k)
			t->entry_stack[k - 1] = id;
	}
	if (!id)
		return;
	if (is_new) {
		uint8_t *w = wr_begin(32 + 5 * (size_t)nr + 10 * (size_t)nf);
		if (!w)
			return;
		w = put_stack(w, id, r->flags, frames, nf, regions, nr);
		wr_end(w);
	}
	wblock *b = live_upsert(r->a);
	if (b && b->stack) { /* its free was lost (the heap buffer stayed full): the address was reused */
		put_free(t, r->ticks, r->a, b, NULL); /* takes the entry out */
		b = live_upsert(r->a);
	}
	uint8_t *w = wr_begin(WR_MAX);
	if (!w) {
		if (b)
			live_del(r->a);
		return;
	}
	w = wr_state(w, r->ticks, t);
	if (r->step != M.cur_step) {
		w += fmt_enc_h2_step(w, r->step);
		M.cur_step = r->step;
	}
	w += fmt_enc_h2_alloc(w, r->b, id, t->stack == id);
	wr_end(w);
	t->stack = id;
	if (b) {
		wb_set(b, r->a, r->b, id, r->tid);
		t->last_addr = r->a;
		t->last_size = r->b;
		t->last_stack = id;
		t->last_here = 1;
	}
}

static void put_snap(const mrec *r, const uint64_t *c)
{
	uint8_t *w = wr_begin(WR_MAX + 40);
	if (!w)
		return;
	w = wr_state(w, r->ticks, NULL);
	w += fmt_enc_h2_snap(w, r->step, r->a, r->b, c, r->flags);
	wr_end(w);
}

static void encode(const mrec *r, const uint8_t *tail)
{
	if (r->type == FMT_HR_ALLOC) {
		put_alloc(r, (const uint64_t *)tail, (const uint32_t *)(tail + 8 * (size_t)r->nframes));
	} else if (r->type == FMT_HR_FREE) {
		wfound f;
		wblock *b = live_find(r->a, &f);
		wthread *t = b ? thread_state(r->tid) : NULL;
		if (t) /* else allocated before the session, or its ALLOC was lost */
			put_free(t, r->ticks, r->a, b, &f);
	} else if (r->type == FMT_HR_SNAP) {
		uint64_t c[3];
		memcpy(c, tail, sizeof c);
		put_snap(r, c);
	}
}

#define EMIT_BYTES CM_SMALL(1u << 20, 16u << 10) /* a chunk's body: larger ones compress better */
#define EMIT_NS 100000000u       /* ... but one is written at least this often */

/*
 * Drain the heap ring into HEAP2 chunks, handed to `emit` after `before` (which writes the
 * SITES the stacks name). The writer drains every few milliseconds when the ring fills;
 * a chunk is written when its body reaches EMIT_BYTES, at a final flush (`final`: the
 * session's end, an exit, an exec), and otherwise every EMIT_NS when records were drained or the counters moved.
 */
void col_mem_drain(void (*emit)(unsigned type, cm_buf *raw), void (*before)(void), int final)
{
	if (M.session_mode == FMT_MEM_OFF || !M.ring.buf)
		return;
	uint64_t head = atomic_load_explicit(&M.ring.head, memory_order_relaxed);
	uint64_t cleared = head;
	/* What was reserved when the drain began, no more: with threads allocating all the
	 * while in full mode, a drain that took what kept coming held the flush lock without
	 * end, and a fork (atfork_prepare) or the exit's final flush waited for it (2 to 5 s a
	 * fork). Later records are the next drain's, a few milliseconds on. */
	uint64_t end = atomic_load_explicit(&M.ring.tail, memory_order_acquire);
	static _Alignas(8) uint8_t wrapped[REC_HDR + 8 * COL_SAMPLE_MAX_DEPTH + 4 * COL_MAX_DEPTH + 24];
	for (uint32_t len; head < end && (len = col_ring_ready(&M.ring, head));) {
		if (unlikely(len & COL_RING_PAD)) { /* the rest of a lap, whose bytes stay zero */
			col_ring_clear(&M.ring, &cleared, (uint32_t)(head - cleared));
			col_ring_skip(&M.ring, &head, len);
			cleared = head;
			continue;
		}
		__builtin_prefetch(M.ring.buf + ((head + RING_AHEAD) & (M.ring.size - 1)));
		/* The record in place, or copied out when it wraps. */
		const uint8_t *rec = col_ring_span(&M.ring, head, len);
		if (!rec && len <= sizeof wrapped) {
			col_ring_get(&M.ring, head, wrapped, len);
			rec = wrapped;
		}
		/* Read in place (a FREE's fields end at REC_FREE): a copy of a variable size
		 * cost a string move and a stalled load per record. */
		const mrec *r = (const mrec *)rec;
		M.records++;
		if (r && (r->type == FMT_HR_FREE ? len >= REC_FREE
				  : len >= REC_HDR + (r->type == FMT_HR_SNAP ? 24 : 8 * (size_t)r->nframes + 4 * (size_t)r->nregions)))
			encode(r, rec + REC_HDR);
		head += len;
		/* Consumed bytes are zeroed (a record's first word must read 0 until it is
		 * published) and handed back to the producers in batches. */
		if (head - cleared >= (64u << 10)) {
			col_ring_clear(&M.ring, &cleared, (uint32_t)(head - cleared));
			col_ring_release(&M.ring, cleared);
		}
		if (M.body.len >= EMIT_BYTES)
			emit_heap(emit, before);
	}
	col_ring_clear(&M.ring, &cleared, (uint32_t)(head - cleared));
	col_ring_release(&M.ring, head);
	/* A final flush writes what it drained: after col_mem_stop(), and at an exec, whose END
	 * follows (the heap records of an image's last 100 ms, its last timeline point among
	 * them, were left in M.body and lost with the image). */
	final |= !atomic_load_explicit(&M.mode, memory_order_acquire);
	if (!final && M.counters_written && cm_mono_ns() - M.emitted_ns < EMIT_NS)
		return;
	totals t;
	sum_totals(&t);
	if (M.body.len || !M.counters_written || M.last_records != M.records ||
	    M.last_dropped != atomic_load(&M.dropped) || M.last_allocs != t.allocs || M.last_frees != t.frees)
		emit_heap(emit, before);
	if (M.body.cap > (16u << 20))
		cm_buf_free(&M.body);
}

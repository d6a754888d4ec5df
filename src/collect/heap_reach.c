/*
 * heap_reach.c - what is still reachable at the end, on the writer thread (or the stopping
 * thread without one) at a session's end: a conservative mark from the process's roots
 * through the writer's map of live blocks (heap_writer.c), written as a REACH chunk.
 */
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
#include <sys/uio.h>
#include <unistd.h>

#include "collect/heap.h"

uintptr_t reach_stop_sp;
struct col_heap_self SELF;
struct col_heap_runtime RT;

/* ---- what is still reachable at the end (full mode) ---- */

/*
 * At the end of a full-mode session the writer knows every live block (the map above). It
 * tells the blocks the program can still reach from those it lost, as LeakSanitizer and
 * memcheck do: a conservative mark from the roots (writable memory that is not heap: the
 * modules' data and bss, thread stacks, the program's own mappings), through every aligned
 * word that points into a live block (its start or inside it), to the blocks those blocks
 * point to. Blocks never marked are lost: no pointer to them is left anywhere. The C
 * library's and the loader's blocks (getpwuid's buffers, locale data, stdio's buffers) are
 * reachable from their globals, and a program's data kept to the end on purpose is
 * reachable from its own: neither is a leak. docs/memory.md, "Reachable at exit".
 * Memory is read with process_vm_readv() on the process itself, so that a mapping another
 * thread unmaps meanwhile fails the read instead of faulting; pages never touched (mincore)
 * are not read, which would fault in the zero page for each.
 */
#define REACH_CHUNK (256u << 10)  /* bytes read at a time */
#define REACH_PAGES 256           /* pages of blocks the scan keeps copies of */


int self_segments(struct dl_phdr_info *info, size_t size, void *arg)
{
	(void)size;
	uintptr_t me = (uintptr_t)arg;
	int mine = 0;
	for (int i = 0; i < info->dlpi_phnum && !mine; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		mine = ph->p_type == PT_LOAD && me - lo < ph->p_memsz;
	}
	const char *name = info->dlpi_name ? info->dlpi_name : "";
	const char *base = strrchr(name, '/') ? strrchr(name, '/') + 1 : name;
	int runtime = mine || !strncmp(base, "libc.so", 7) || !strncmp(base, "ld-linux", 8) || !strncmp(base, "ld64.so", 7);
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type != PT_LOAD)
			continue;
		if (mine && (ph->p_flags & PF_W) && SELF.n < REACH_MAX_SELF) {
			SELF.lo[SELF.n] = lo & ~(uintptr_t)4095;
			SELF.hi[SELF.n++] = (lo + ph->p_memsz + 4095) & ~(uintptr_t)4095;
		}
		if (runtime && (ph->p_flags & PF_X) && RT.n < RT_RANGES) {
			RT.lo[RT.n] = lo;
			RT.hi[RT.n++] = lo + ph->p_memsz;
		}
	}
	return 0;
}

static int in_runtime(uintptr_t pc)
{
	for (uint32_t i = 0; i < RT.n; i++)
		if (pc - RT.lo[i] < RT.hi[i] - RT.lo[i])
			return 1;
	return 0;
}

typedef struct stop_walk {
	uintptr_t cfa;            /* of the outermost runtime frame so far */
	int found;                /* a frame of the program's was reached */
} stop_walk;

static _Unwind_Reason_Code stop_step(stop_walk *w, uintptr_t pc, uintptr_t cfa)
{
	if (!pc)
		return _URC_END_OF_STACK;
	if (!in_runtime(pc - 1)) {
		w->found = 1;
		return _URC_END_OF_STACK;
	}
	w->cfa = cfa;
	return _URC_NO_REASON;
}

#if !MEM_SANITIZER
/* A frame of libgcc's walk (G.backtrace): its context read with libgcc's accessors. */
static _Unwind_Reason_Code stop_frame(struct _Unwind_Context *ctx, void *arg)
{
	return stop_step(arg, G.get_ip(ctx), G.get_cfa(ctx));
}
#endif

/* The same for the _Unwind_Backtrace libunwind exports (no libgcc: the sanitizer builds). */
static _Unwind_Reason_Code stop_frame_unw(struct _Unwind_Context *ctx, void *arg)
{
	return stop_step(arg, _Unwind_GetIP(ctx), _Unwind_GetCFA(ctx));
}

/*
 * Where the stopping thread's live frames begin, for the scan: above the frames of the
 * session's end, of exit() and of the C library's start, whose unused slots hold what the
 * program's returned calls left there (main's callees: a leak's last pointer read as
 * reachable). The frames from the first that is not the runtime's up are scanned: those of
 * a function that called exit(), or only _start's when main returned. Not at _exit, which
 * may run in a signal handler that interrupted the loader (the unwinder takes its lock):
 * there from the stack pointer.
 */
void note_stop_sp(int unwind)
{
	uintptr_t sp = (uintptr_t)__builtin_frame_address(0);
	stop_walk w = {sp, 0};
	/* libgcc's unwinder (G.backtrace), not the _Unwind_Backtrace libunwind exports, which
	 * validates memory by writing to a pipe of its own: at exit, after a program closed every
	 * descriptor by system call and put its file on the pipe's number, its file got the
	 * bytes (test_process.test_a_program_that_closes_every_descriptor) */
#if !MEM_SANITIZER
	_Unwind_Reason_Code (*bt)(_Unwind_Trace_Fn, void *) = __atomic_load_n(&G.backtrace, __ATOMIC_ACQUIRE);
	if (unwind && RT.n && bt && G.get_ip && G.get_cfa)
		bt(stop_frame, &w);
	else
#endif
	if (unwind && RT.n)
		_Unwind_Backtrace(stop_frame_unw, &w);
	reach_stop_sp = w.found && w.cfa > sp ? w.cfa : sp;
}

typedef struct rmap {
	uint64_t lo, hi;
	int root;                 /* scanned as a root */
} rmap;

typedef struct rspan {
	uint64_t lo, hi;
	uint32_t ref;
} rspan;

typedef struct rscan {
	uint64_t lo, hi;          /* of all live blocks */
	uint8_t *mark;            /* a bit per block ref: pool ids, then overflow entries */
	uint32_t nref;
	rspan *span;              /* blocks that reach past their first page, and overflow
				     entries, by address */
	size_t nspan;
	rspan *todo;              /* marked blocks not yet read */
	size_t ntodo, todo_cap;
	uint8_t *buf;
	unsigned char *vec;       /* mincore's */
	rspan *excl;              /* ranges no root covers, sorted, merged */
	size_t nexcl, excl_cap;
	uint8_t *pages;           /* REACH_PAGES copies of pages with blocks ... */
	uint64_t *tags;           /* ... and their page numbers + 1 (0: none) */
	pid_t pid;
	uint64_t deadline, root_bytes, heap_bytes;
	uint64_t nblocks, nmarked; /* live blocks, and those marked so far: all marked ends it */
	uint64_t *filt;           /* FILT_BITS bits: a page's (hashed) may hold a live block */
	int pagemap;              /* /proc/self/pagemap, to read only pages written since the fork, or -1 */
	uint64_t *pm;             /* its entries for a chunk */
	int heap_root;            /* the heap is a root, less the map's blocks: sampled mode, whose map has
				   the sampled blocks only, and a fork child, whose map lacks the blocks
				   made before the fork (col_mem_reach()) */
	int status;               /* enum fmt_reach_status */
} rscan;

static inline uint32_t over_ref(uint32_t i)
{
	return M.pool_used + 1 + i;
}

/*
 * Whether x, inside the block [a, a + n), refers to it. Not the block's last 16-byte granule
 * when that is where the next chunk's header may begin: glibc's chunks are 16-byte aligned
 * and the header of the next one overlaps the block's last 8 usable bytes, so the arena's
 * pointers to the top chunk and to free chunks (main_arena's, a root) point there. The last
 * block before the top chunk read as reachable in every program.
 */
static inline int refers(uint64_t x, uint64_t a, uint64_t n)
{
	return x == a || ((x - a) & 15) || x + 16 <= a + n;
}

/* The live block that x points into: its ref and extent. */
static int reach_find(const rscan *s, uint64_t x, uint32_t *ref, uint64_t *lo, uint64_t *hi)
{
	if (x < s->lo || x >= s->hi)
		return 0;
	wleaf *l = leaf_find(x >> WP_SHIFT);
	int started = 0;
	if (l) {
		uint64_t base = x & ~(uint64_t)((1u << WP_SHIFT) - 1);
		for (int32_t i = (int32_t)((x >> 5) & (WP_SLOTS - 1)); i >= 0; i--) {
			uint32_t id = l->slots[i];
			if (!id)
				continue;
			const wblock *b = pool_at(id);
			uint64_t a = base | (uint64_t)i << 5 | (b->size_lo & 31), n = wb_size(b);
			if (a > x)
				continue;
			if (x < a + (n ? n : 1)) {
				if (!refers(x, a, n))
					return 0;
				*ref = id;
				*lo = a;
				*hi = a + n;
				return 1;
			}
			started = 1; /* blocks do not overlap: none that starts before covers x */
			break;
		}
	}
	if ((started && !M.nover) || !s->nspan)
		return 0;
	size_t a = 0, b = s->nspan; /* the last span starting at or before x */
	while (b - a > 1) {
		size_t m = a + (b - a) / 2;
		if (s->span[m].lo <= x)
			a = m;
		else
			b = m;
	}
	const rspan *r = &s->span[a];
	if (r->lo > x || x >= (r->hi > r->lo ? r->hi : r->lo + 1) || !refers(x, r->lo, r->hi - r->lo))
		return 0;
	*ref = r->ref;
	*lo = r->lo;
	*hi = r->hi;
	return 1;
}

/* Append b to the array *a of *n entries (room for *cap), grown as needed; out of memory,
 * the scan's status says so. */
static void span_push(rscan *s, rspan **a, size_t *n, size_t *cap, rspan b)
{
	if (s->status)
		return;
	if (*n == *cap) {
		size_t c = *cap ? *cap * 2 : 1024;
		rspan *t = realloc(*a, c * sizeof *t);
		if (!t) {
			s->status = FMT_REACH_NOMEM;
			return;
		}
		*a = t;
		*cap = c;
	}
	(*a)[(*n)++] = b;
}

static void todo_push(rscan *s, rspan b)
{
	span_push(s, &s->todo, &s->ntodo, &s->todo_cap, b);
}

/* A filter of the pages that hold live blocks, before the map's lookup: a sampled-mode scan
 * reads the whole heap, whose words mostly point to blocks that were not sampled (a
 * compiler's 96 MiB: 184 ms without, 46-57 ms with). */
#define FILT_BITS (1u << 20)

static inline uint32_t filt_hash(uint64_t a)
{
	return (uint32_t)(((a >> 12) * 0x9E3779B97F4A7C15ull) >> (64 - 20));
}

static void filt_add(rscan *s, uint64_t lo, uint64_t hi)
{
	for (uint64_t pg = lo >> 12; s->filt && pg <= (hi - 1) >> 12; pg++) {
		uint32_t h = filt_hash(pg << 12);
		s->filt[h >> 6] |= 1ull << (h & 63);
	}
}

static void reach_words(rscan *s, const uint64_t *w, size_t n)
{
	for (size_t i = 0; i < n; i++) {
		uint32_t ref;
		uint64_t lo, hi;
		if (w[i] - s->lo >= s->hi - s->lo)
			continue;
		uint32_t h = filt_hash(w[i]);
		if ((s->filt && !(s->filt[h >> 6] >> (h & 63) & 1)) || !reach_find(s, w[i], &ref, &lo, &hi))
			continue;
		if (ref >= s->nref || (s->mark[ref >> 3] & (1u << (ref & 7))))
			continue;
		s->mark[ref >> 3] |= (uint8_t)(1u << (ref & 7));
		s->nmarked++;
		if (hi - lo >= 8) /* else no pointer fits */
			todo_push(s, (rspan){lo, hi, ref});
	}
}

/*
 * A fork child's blocks are all younger than the fork (its map began empty), so a pointer
 * to one is in a page the child wrote since: one the kernel copied for it, mapped by it
 * alone. The pages it still shares with its parent are not read. A Python parent's 300 MB
 * heap was read by each of its multiprocessing workers as it exited: 169 ms each, 0.08 s
 * of program made 0.58 s. Pages not present in memory (swapped) are read as before. A
 * child that forked in turn shares the pages it wrote with its own children: no filter
 * then (col_mem_reach()). Reading the flags of /proc/self/pagemap needs no privilege.
 */
#define PM_PRESENT (1ull << 63)
#define PM_EXCLUSIVE (1ull << 56)

static void fork_pages(rscan *s, uint64_t p0, uint64_t np)
{
	ssize_t want = (ssize_t)(np * 8);
	if (pread(s->pagemap, s->pm, (size_t)want, (off_t)(p0 / 4096 * 8)) != want) {
		close(s->pagemap); /* read all from now on */
		s->pagemap = -1;
		return;
	}
	for (uint64_t k = 0; k < np; k++)
		if ((s->pm[k] & PM_PRESENT) && !(s->pm[k] & PM_EXCLUSIVE))
			s->vec[k] = 0;
}

/* Read [lo, hi) and mark what its words point to; only pages that are resident when
 * `resident`. */
static void reach_range(rscan *s, uint64_t lo, uint64_t hi, int resident, uint64_t *counted)
{
	lo = (lo + 7) & ~(uint64_t)7;
	hi &= ~(uint64_t)7;
	while (lo < hi && !s->status && s->nmarked < s->nblocks) {
		if (cm_mono_ns() > s->deadline) {
			s->status = FMT_REACH_TIME;
			return;
		}
		uint64_t end = hi - lo > REACH_CHUNK ? lo + REACH_CHUNK : hi;
		if (resident) {
			uint64_t p0 = lo & ~(uint64_t)4095;
			if (mincore((void *)(uintptr_t)p0, end - p0, s->vec) == 0) {
				/* the first run of resident pages from lo, within [lo, end) */
				uint64_t k = 0, np = (end - p0 + 4095) / 4096;
				if (s->pagemap >= 0)
					fork_pages(s, p0, np);
				while (k < np && !(s->vec[k] & 1))
					k++;
				if (k == np) {
					lo = end;
					continue;
				}
				uint64_t a = p0 + k * 4096;
				if (a > lo)
					lo = a;
				while (k < np && (s->vec[k] & 1))
					k++;
				uint64_t b = p0 + k * 4096;
				if (b < end)
					end = b;
			}
		}
		struct iovec l = {s->buf, (size_t)(end - lo)}, r = {(void *)(uintptr_t)lo, (size_t)(end - lo)};
		ssize_t got = process_vm_readv(s->pid, &l, 1, &r, 1, 0);
		if (got < 0) {
			if (errno != EFAULT && errno != ENOMEM) {
				s->status = FMT_REACH_UNREADABLE;
				return;
			}
			lo = (lo & ~(uint64_t)4095) + 4096; /* an unmapped page: the next one */
			continue;
		}
		*counted += (uint64_t)got;
		reach_words(s, (const uint64_t *)s->buf, (size_t)got / 8);
		lo += got > 0 ? (uint64_t)got & ~(uint64_t)7 : 4096;
	}
}

/* A copy of page `page`, from the scan's cache of REACH_PAGES (direct-mapped by page
 * number); NULL when it cannot be read. */
static const uint8_t *reach_page(rscan *s, uint64_t page)
{
	uint32_t k = (uint32_t)(page & (REACH_PAGES - 1));
	uint8_t *copy = s->pages + (size_t)k * 4096;
	if (s->tags[k] == page + 1)
		return copy;
	if (cm_mono_ns() > s->deadline) {
		s->status = FMT_REACH_TIME;
		return NULL;
	}
	struct iovec l = {copy, 4096}, r = {(void *)(uintptr_t)(page << 12), 4096};
	ssize_t got = process_vm_readv(s->pid, &l, 1, &r, 1, 0);
	if (got != 4096) {
		if (got < 0 && errno != EFAULT && errno != ENOMEM)
			s->status = FMT_REACH_UNREADABLE;
		s->tags[k] = 0;
		return NULL;
	}
	s->tags[k] = page + 1;
	return copy;
}

static int cmp_rspan(const void *a, const void *b)
{
	const rspan *x = a, *y = b;
	return (x->lo > y->lo) - (x->lo < y->lo);
}

/* The writable mappings that are roots: /proc/self/maps less the heap's (those that hold a
 * live block, and [heap]), fennec's own, devices and the kernel's. */
static rmap *reach_maps(size_t *n, int heap_root)
{
	*n = 0;
	int fd = open("/proc/self/maps", O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	size_t len = 0, cap = 1u << 16;
	char *text = malloc(cap + 1);
	for (ssize_t got = 1; text && got > 0;) {
		if (len == cap) {
			char *t = realloc(text, cap * 2 + 1);
			if (!t) {
				free(text);
				text = NULL;
				break;
			}
			text = t;
			cap *= 2;
		}
		got = read(fd, text + len, cap - len);
		if (got > 0)
			len += (size_t)got;
		else if (got < 0 && errno == EINTR)
			got = 1;
	}
	close(fd);
	if (!text)
		return NULL;
	text[len] = 0;
	size_t lines = 1;
	for (size_t i = 0; i < len; i++)
		lines += text[i] == '\n';
	rmap *m = malloc(lines * sizeof *m);
	if (!m) {
		free(text);
		return NULL;
	}
	for (char *line = text, *next; *line; line = next) {
		next = strchr(line, '\n');
		if (next)
			*next++ = 0;
		else
			next = line + strlen(line);
		unsigned long lo, hi;
		char perms[8];
		int off = 0;
		if (sscanf(line, "%lx-%lx %7s %*s %*s %*s %n", &lo, &hi, perms, &off) < 3 || !off)
			continue;
		const char *path = line + off;
		int root = perms[0] == 'r' && perms[1] == 'w';
		if (path[0] == '[')
			root = root && (!strncmp(path, "[stack", 6) || !strncmp(path, "[anon:", 6) ||
					(heap_root && !strcmp(path, "[heap]")));
		else if (!strncmp(path, "anon_inode:", 11) || (!strncmp(path, "/dev/", 5) && strncmp(path, "/dev/shm/", 9)))
			root = 0;
		m[(*n)++] = (rmap){lo, hi, root};
	}
	free(text);
	return m;
}

static rmap *map_of(rmap *m, size_t n, uint64_t a)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t k = lo + (hi - lo) / 2;
		if (a < m[k].lo)
			hi = k;
		else if (a >= m[k].hi)
			lo = k + 1;
		else
			return &m[k];
	}
	return NULL;
}

/* Add [lo, hi) to the ranges no root covers (sorted and merged by excl_done()). */
static void excl_add(rscan *s, uint64_t lo, uint64_t hi)
{
	if (hi > lo)
		span_push(s, &s->excl, &s->nexcl, &s->excl_cap, (rspan){lo, hi, 0});
}

static void excl_done(rscan *s)
{
	qsort(s->excl, s->nexcl, sizeof *s->excl, cmp_rspan);
	size_t k = 0;
	for (size_t i = 0; i < s->nexcl; i++) {
		if (k && s->excl[i].lo <= s->excl[k - 1].hi) {
			if (s->excl[i].hi > s->excl[k - 1].hi)
				s->excl[k - 1].hi = s->excl[i].hi;
		} else {
			s->excl[k++] = s->excl[i];
		}
	}
	s->nexcl = k;
}

/* Scan the root [lo, hi) less the ranges no root covers. */
static void reach_root(rscan *s, uint64_t lo, uint64_t hi)
{
	size_t a = 0, b = s->nexcl; /* the first range that ends after lo */
	while (a < b) {
		size_t m = a + (b - a) / 2;
		if (s->excl[m].hi <= lo)
			a = m + 1;
		else
			b = m;
	}
	for (; lo < hi && !s->status; a++) {
		uint64_t end = a < s->nexcl && s->excl[a].lo < hi ? s->excl[a].lo : hi;
		if (end > lo)
			reach_range(s, lo, end, 1, &s->root_bytes);
		if (a >= s->nexcl || s->excl[a].lo >= hi)
			break;
		lo = s->excl[a].hi;
	}
}

/* What no root covers: fennec's memory (libfennec's data, its heap, the heap ring, the
 * writer's stack), the stacks of threads that ended, and the live blocks themselves where
 * their mapping is otherwise a root (a block is read when something reaches it). A large
 * block is a mapping of its own, which the kernel may have merged with the program's next
 * to it (Python's arenas): the mapping stays a root, less the block. */
static void reach_excl(rscan *s, const rmap *maps, size_t nmaps)
{
	for (uint32_t i = 0; i < SELF.n; i++)
		excl_add(s, SELF.lo[i], SELF.hi[i]);
#if !MEM_SANITIZER
	excl_add(s, (uintptr_t)H.base, (uintptr_t)H.base + atomic_load(&H.span));
#endif
	excl_add(s, (uintptr_t)M.ring.buf, (uintptr_t)M.ring.buf + M.ring.size);
	pthread_attr_t at;
	void *stk;
	size_t n;
	int got = 0;
	/* The scanning thread's stack: the writer's, or the stopping thread's own in a session
	 * without a writer thread (session_writer.c, the lazy writer), whose frames from the program's
	 * last one up are roots (reach_stop_sp): only the scan's own frames below are left out. */
	uintptr_t lo = 0, hi = 0;
	if (pthread_getattr_np(pthread_self(), &at) == 0) {
		if (pthread_attr_getstack(&at, &stk, &n) == 0) {
			lo = (uintptr_t)stk, hi = (uintptr_t)stk + n;
			got = 1;
		}
		pthread_attr_destroy(&at);
	}
	const rmap *w = got ? NULL : map_of((rmap *)maps, nmaps, (uintptr_t)&at);
	if (w) /* the thread's mapping then, whatever else the kernel merged into it */
		lo = w->lo, hi = w->hi;
	if (reach_stop_sp >= lo && reach_stop_sp < hi && (uintptr_t)&at < reach_stop_sp)
		hi = reach_stop_sp & ~(uintptr_t)7;
	if (hi > lo)
		excl_add(s, lo, hi);
	for (uint32_t i = 0; i < DEAD_STACKS; i++) {
		uintptr_t b = atomic_load_explicit(&DEAD.hi[i], memory_order_acquire), a = atomic_load_explicit(&DEAD.lo[i], memory_order_relaxed);
		if (b > a && (reach_stop_sp < a || reach_stop_sp >= b))
			excl_add(s, a, b);
	}
	for (uint32_t i = 0; i < M.pages_cap; i++) {
		const wleaf *l = M.pages[i].leaf;
		for (uint32_t j = 0; M.pages[i].page && j < WP_SLOTS; j++) {
			if (!l->slots[j])
				continue;
			const wblock *b = pool_at(l->slots[j]);
			uint64_t a = M.pages[i].page << WP_SHIFT | (uint64_t)j << 5 | (b->size_lo & 31);
			const rmap *r = map_of((rmap *)maps, nmaps, a);
			if (r && r->root && s->heap_root) /* among the program's other blocks */
				excl_add(s, a & ~(uint64_t)7, (a + wb_size(b) + 7) & ~(uint64_t)7);
			else if (r && r->root) /* glibc's chunk header is 16 bytes below */
				excl_add(s, (a - 16) & ~(uint64_t)4095, (a + wb_size(b) + 4095) & ~(uint64_t)4095);
		}
	}
	for (uint32_t i = 0; i < M.over_cap; i++) {
		const rmap *r = M.over[i].addr ? map_of((rmap *)maps, nmaps, M.over[i].addr) : NULL;
		if (r && r->root && s->heap_root)
			excl_add(s, M.over[i].addr & ~(uint64_t)7, (M.over[i].addr + wb_size(&M.over[i].b) + 7) & ~(uint64_t)7);
		else if (r && r->root)
			excl_add(s, (M.over[i].addr - 16) & ~(uint64_t)4095,
				 (M.over[i].addr + wb_size(&M.over[i].b) + 4095) & ~(uint64_t)4095);
	}
	excl_done(s);
}

/* Per stack id: reachable and lost blocks. */
typedef struct rsum {
	uint64_t rc, rb, lc, lb;
} rsum;

static void reach_count(rsum *sum, const rscan *s, uint32_t ref, const wblock *b)
{
	if (b->stack > M.nstacks)
		return;
	rsum *e = &sum[b->stack];
	if (s->mark[ref >> 3] & (1u << (ref & 7))) {
		e->rc++;
		e->rb += wb_size(b);
	} else {
		e->lc++;
		e->lb += wb_size(b);
	}
}

/* Mark from the roots; s->status says why it could not. */
static void reach_mark(rscan *s)
{
	/* Every live block's extent; the spans; the marks. */
	s->lo = UINT64_MAX;
	s->hi = 0;
	s->filt = calloc(FILT_BITS / 64, sizeof *s->filt); /* without, every word is looked up */
	size_t nspan = 0;
	for (int pass = 0; pass < 2; pass++) {
		for (uint32_t i = 0; i < M.pages_cap; i++) {
			const wleaf *l = M.pages[i].leaf;
			if (!M.pages[i].page)
				continue;
			for (uint32_t j = 0; j < WP_SLOTS; j++) {
				if (!l->slots[j])
					continue;
				const wblock *b = pool_at(l->slots[j]);
				uint64_t a = M.pages[i].page << WP_SHIFT | (uint64_t)j << 5 | (b->size_lo & 31), n = wb_size(b);
				uint64_t e = a + (n ? n : 1);
				if (!pass) {
					s->lo = a < s->lo ? a : s->lo;
					s->hi = e > s->hi ? e : s->hi;
					s->nblocks++;
					filt_add(s, a, e);
				}
				if ((a >> WP_SHIFT) != ((e - 1) >> WP_SHIFT)) {
					if (pass)
						s->span[nspan] = (rspan){a, a + n, l->slots[j]};
					nspan++;
				}
			}
		}
		for (uint32_t i = 0; i < M.over_cap; i++) {
			const wover *o = &M.over[i];
			if (!o->addr)
				continue;
			uint64_t n = wb_size(&o->b);
			if (!pass) {
				s->nblocks++;
				filt_add(s, o->addr, o->addr + (n ? n : 1));
				s->lo = o->addr < s->lo ? o->addr : s->lo;
				s->hi = o->addr + (n ? n : 1) > s->hi ? o->addr + (n ? n : 1) : s->hi;
			} else {
				s->span[nspan] = (rspan){o->addr, o->addr + n, over_ref(i)};
			}
			nspan++;
		}
		if (!pass) {
			s->span = malloc((nspan ? nspan : 1) * sizeof *s->span);
			if (!s->span) {
				s->status = FMT_REACH_NOMEM;
				return;
			}
			nspan = 0;
		}
	}
	s->nspan = nspan;
	if (!s->nblocks)
		return; /* nothing live to tell (jq frees all: 0.25 ms of reading maps before) */
	qsort(s->span, nspan, sizeof *s->span, cmp_rspan);
	s->nref = over_ref(M.over_cap);
	s->mark = calloc(s->nref / 8 + 1, 1);
	s->buf = malloc(REACH_CHUNK);
	s->vec = malloc(REACH_CHUNK / 4096 + 1);
	if (M.fork_child && !M.forked) { /* fork_pages() */
		s->pm = malloc((REACH_CHUNK / 4096 + 1) * sizeof *s->pm);
		s->pagemap = s->pm ? open("/proc/self/pagemap", O_RDONLY | O_CLOEXEC) : -1;
	}
	s->pages = malloc((size_t)REACH_PAGES * 4096);
	s->tags = calloc(REACH_PAGES, sizeof *s->tags);
	size_t nmaps;
	rmap *maps = reach_maps(&nmaps, s->heap_root);
	if (!s->mark || !s->buf || !s->vec || !s->pages || !s->tags || !maps) {
		s->status = maps || errno == ENOMEM ? FMT_REACH_NOMEM : FMT_REACH_UNREADABLE;
		free(maps);
		return;
	}
	/* The heap's mappings are no roots: their free chunks keep stale pointers. glibc's
	 * main arena is [heap] (reach_maps()), another arena a mapping that starts at a
	 * multiple of its 64 MiB; a large block is a mapping of its own, which the kernel may
	 * have merged with the program's next to it (reach_excl() leaves the block out, not
	 * the mapping). With another allocator, every mapping that holds a live block.
	 * In sampled mode the map has the sampled blocks only, and the others may hold the
	 * pointers to them; in a fork child it lacks the blocks made before the fork, which
	 * may hold pointers to younger ones (a parent's list the child appends to): the heap
	 * is a root there, less the map's blocks (col_mem_reach()). */
	for (uint32_t i = 0; !s->heap_root && i < M.pages_cap + M.over_cap; i++) {
		uint64_t a = i < M.pages_cap ? M.pages[i].page << WP_SHIFT : M.over[i - M.pages_cap].addr;
		rmap *r = a ? map_of(maps, nmaps, a) : NULL;
		if (r && (HEAP_KIND() != HEAP_GLIBC || !(r->lo & ((64ull << 20) - 1))))
			r->root = 0;
	}
	reach_excl(s, maps, nmaps);
	/* The stopping thread's stack is read from its stack pointer up, where its frames are
	 * (below are those that returned). */
	rmap *st = reach_stop_sp ? map_of(maps, nmaps, reach_stop_sp) : NULL;
	for (size_t i = 0; i < nmaps && !s->status; i++)
		if (maps[i].root)
			reach_root(s, &maps[i] == st ? (reach_stop_sp & ~(uint64_t)7) : maps[i].lo, maps[i].hi);
	free(maps);
	/* The marked blocks: a large one read alone, a small one from a copy of its pages
	 * (a system call a block took 1.7 us: 1.7 s for a list of a million). */
	while (s->ntodo && !s->status && s->nmarked < s->nblocks) {
		rspan b = s->todo[--s->ntodo];
		uint64_t lo = (b.lo + 7) & ~(uint64_t)7, hi = b.hi & ~(uint64_t)7;
		if (hi <= lo)
			continue;
		if (hi - lo >= REACH_CHUNK / 4) {
			reach_range(s, lo, hi, hi - lo >= REACH_CHUNK, &s->heap_bytes);
			continue;
		}
		for (uint64_t a = lo; a < hi && !s->status;) {
			uint64_t page = a >> 12, end = ((page + 1) << 12) < hi ? (page + 1) << 12 : hi;
			const uint8_t *copy = reach_page(s, page);
			if (!copy)
				break; /* freed and unmapped meanwhile */
			reach_words(s, (const uint64_t *)(copy + (a & 4095)), (size_t)(end - a) / 8);
			s->heap_bytes += end - a;
			a = end;
		}
	}
}

/*
 * Sampled mode: the map has the sampled blocks only, and any other block may hold the
 * pointers to them, so the heap is read as a root, less the sampled blocks themselves. A
 * sampled block no word of the process points to (from the sampled blocks the roots reach)
 * is lost. A block pointed to from the heap's free memory, or from a lost block that was
 * not sampled, reads as reachable: sampled mode's leaks are the blocks lost for certain,
 * and full mode tells the rest (docs/memory.md, "Reachable at exit"). The scan ends as soon
 * as every block is reached, and within SAMPLED_SCAN_MS: sampled mode is meant to be left
 * on, and reading a heap of many GiB takes seconds.
 */
#define SAMPLED_SCAN_MS 2000

void col_mem_reach(void (*emit)(unsigned type, cm_buf *raw), int exit_reason)
{
	if ((M.session_mode != FMT_MEM_FULL && M.session_mode != FMT_MEM_SAMPLED) || exit_reason == FMT_END_EXEC)
		return;
	uint64_t t0 = cm_mono_ns();
	int sampled = M.session_mode == FMT_MEM_SAMPLED;
	rscan s = {.pid = getpid(), .heap_root = sampled || M.fork_child, .pagemap = -1};
	uint64_t ms = M.scan_ms;
	if (sampled && ms > SAMPLED_SCAN_MS)
		ms = SAMPLED_SCAN_MS;
	if (exit_reason == FMT_END__EXIT && ms > 1000)
		ms = 1000; /* _exit waits 2 s for the whole final flush */
	s.deadline = t0 + ms * 1000000u;
	if (!ms)
		s.status = FMT_REACH_OFF;
	else if (atomic_load(&M.dropped_allocs))
		s.status = FMT_REACH_LOST; /* blocks the map does not have may hold pointers */
	else
		reach_mark(&s);
	rsum *sum = NULL;
	uint32_t n = 0;
	if (!s.status && !(sum = calloc(M.nstacks + 1, sizeof *sum)))
		s.status = FMT_REACH_NOMEM;
	if (!s.status) {
		for (uint32_t i = 0; i < M.pages_cap; i++) {
			const wleaf *l = M.pages[i].leaf;
			for (uint32_t j = 0; M.pages[i].page && j < WP_SLOTS; j++)
				if (l->slots[j])
					reach_count(sum, &s, l->slots[j], pool_at(l->slots[j]));
		}
		for (uint32_t i = 0; i < M.over_cap; i++)
			if (M.over[i].addr)
				reach_count(sum, &s, over_ref(i), &M.over[i].b);
		for (uint32_t i = 1; i <= M.nstacks; i++)
			n += sum[i].rc || sum[i].lc;
	}
	cm_buf *b = &M.chunk;
	b->len = 0;
	cm_buf_varint(b, (uint64_t)s.status);
	cm_buf_varint(b, cm_mono_ns() - t0);
	cm_buf_varint(b, s.root_bytes);
	cm_buf_varint(b, s.heap_bytes);
	cm_buf_varint(b, n);
	for (uint32_t i = 1; sum && i <= M.nstacks; i++) {
		if (!sum[i].rc && !sum[i].lc)
			continue;
		cm_buf_varint(b, i);
		cm_buf_varint(b, sum[i].rc);
		cm_buf_varint(b, sum[i].rb);
		cm_buf_varint(b, sum[i].lc);
		cm_buf_varint(b, sum[i].lb);
	}
	emit(FMT_REACH, b);
	b->len = 0;
	free(sum);
	free(s.span);
	free(s.todo);
	free(s.mark);
	free(s.buf);
	free(s.vec);
	free(s.pages);
	free(s.tags);
	free(s.excl);
	free(s.filt);
	free(s.pm);
	if (s.pagemap >= 0)
		close(s.pagemap);
}

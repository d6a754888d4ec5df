/*
 * heap_mmap.c - mappings as allocations, on the program's threads: the events
 * libfennec-mmap.so sends (mmap_event.h) kept in a table of tracked mappings; each one
 * counted and recorded by the wrappers' paths (map_counted(), heap_hooks.c).
 */
#include <sched.h>
#include <string.h>

#include "collect/mmap_event.h"
#include "collect/heap.h"

#if !MEM_SANITIZER
/*
 * Mappings. `fennec record --memory-mmap` preloads libfennec-mmap.so beside this library:
 * its mmap, munmap and mremap call fennec__mmap_event(), and an anonymous mapping of at
 * least FENNEC_MEMORY_MMAP bytes the program makes counts as an allocation of its length
 * (pages), with the stack of the call; unmapping it, as its free. The mappings are kept in
 * an array sorted by address under a spinlock (each event is a system call already). An
 * unmap of part of a mapping frees the mapping and allocates what is left, with the stack
 * of the unmap; a MAP_FIXED mapping over tracked ones unmaps them first; mremap frees the
 * old and allocates the new. Unmaps are recorded before the system call, so that another
 * thread's mapping at the same address comes after.
 */
struct col_heap_maps MAPS = {ATOMIC_FLAG_INIT, 0, NULL, 0, 0};

#define MAP_BATCH 32 /* mappings changed by one event, accounted at a time */

/* The first mapping that ends after a. */
static size_t maps_at(uintptr_t a)
{
	size_t lo = 0, hi = MAPS.n;
	while (lo < hi) {
		size_t mid = (lo + hi) / 2;
		if (MAPS.v[mid].addr + MAPS.v[mid].len <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo;
}

static int maps_insert(uintptr_t a, size_t len)
{
	if (MAPS.n == MAPS.cap) {
		size_t cap = MAPS.cap ? MAPS.cap * 2 : 64;
		mapping *v = MAPS.v ? own_realloc(MAPS.v, cap * sizeof *v) : own_alloc(cap * sizeof *v, 16);
		if (!v)
			return -1;
		MAPS.v = v;
		MAPS.cap = cap;
	}
	size_t i = maps_at(a);
	memmove(MAPS.v + i + 1, MAPS.v + i, (MAPS.n - i) * sizeof *MAPS.v);
	MAPS.v[i] = (mapping){a, len};
	MAPS.n++;
	return 0;
}

/* Take [a, a + len) out of the tracked mappings: the ones it touched into gone (at most
 * MAP_BATCH; their number is returned, the caller comes back for more), the parts of them
 * outside it stay tracked and go into kept (*nkept, at most 2 * MAP_BATCH). */
static size_t maps_cut(uintptr_t a, size_t len, mapping *gone, mapping *kept, size_t *nkept)
{
	size_t i = maps_at(a), j = i, n = 0;
	*nkept = 0;
	while (j < MAPS.n && MAPS.v[j].addr < a + len && n < MAP_BATCH)
		gone[n++] = MAPS.v[j++];
	memmove(MAPS.v + i, MAPS.v + j, (MAPS.n - j) * sizeof *MAPS.v);
	MAPS.n -= n;
	for (size_t k = 0; k < n; k++) {
		uintptr_t end = gone[k].addr + gone[k].len;
		if (gone[k].addr < a && maps_insert(gone[k].addr, a - gone[k].addr) == 0)
			kept[(*nkept)++] = (mapping){gone[k].addr, a - gone[k].addr};
		if (end > a + len && maps_insert(a + len, end - (a + len)) == 0)
			kept[(*nkept)++] = (mapping){a + len, end - (a + len)};
	}
	return n;
}

static void maps_lock(void)
{
	while (atomic_flag_test_and_set_explicit(&MAPS.lock, memory_order_acquire))
		sched_yield();
}

static void maps_unlock(void)
{
	atomic_flag_clear_explicit(&MAPS.lock, memory_order_release);
}


/* The tracked mappings in [a, a + len) are going: account for them and what stays.
 * Returns whether there were any. */
static int maps_unmap(uintptr_t a, size_t len, void **slot)
{
	mapping gone[MAP_BATCH], kept[2 * MAP_BATCH];
	for (int any = 0;; any = 1) {
		size_t nkept, n;
		T.busy = 1; /* own_realloc() may map: not the program's */
		T.fast = NULL;
		maps_lock();
		n = MAPS.n ? maps_cut(a, len, gone, kept, &nkept) : 0;
		maps_unlock();
		busy_end();
		for (size_t k = 0; k < n; k++)
			unmap_counted(&gone[k]);
		for (size_t k = 0; k < (n ? nkept : 0); k++)
			map_counted(&kept[k], slot);
		if (n < MAP_BATCH)
			return any || n;
	}
}

/* Called by libfennec-mmap.so (mmap_event.h). A moved mapping is tracked when the old one
 * was. */
FENNEC_API void fennec__mmap_event(int ev, void *a, size_t len, void *b, size_t blen, int flags, void **slot)
{
	if (!MAPS.min || T.own || T.busy || !atomic_load_explicit(&M.mode, memory_order_relaxed))
		return;
	uintptr_t pa = (uintptr_t)a & ~(uintptr_t)4095;
	len = ((uintptr_t)a + len + 4095 - pa) & ~(size_t)4095;
	int was = 0;
	if (ev != MAP_EV_MAP || (flags & MAP_EV_FIXED))
		was = maps_unmap(pa, len, slot);
	if (ev == MAP_EV_UNMAP || (ev == MAP_EV_MAP && !(flags & MAP_EV_ANON)) || (ev == MAP_EV_REMAP && !was))
		return;
	if (ev == MAP_EV_REMAP) {
		pa = (uintptr_t)b;
		len = (blen + 4095) & ~(size_t)4095;
	}
	if (len < MAPS.min)
		return;
	mapping m = {pa, len};
	T.busy = 1;
	T.fast = NULL;
	maps_lock();
	int ok = maps_insert(pa, len) == 0;
	maps_unlock();
	busy_end();
	if (ok)
		map_counted(&m, slot);
}
_Static_assert(__builtin_types_compatible_p(__typeof__(fennec__mmap_event), fennec_mmap_event_fn),
	       "fennec__mmap_event is what libfennec-mmap.so calls");

#endif /* !MEM_SANITIZER */

/*
 * mmap_event.h - what libfennec-mmap.so (src/mmap/mmap.c) tells libfennec about the
 * program's mappings, through fennec__mmap_event() (heap_mmap.c; docs/memory.md, "Mappings").
 * The library finds the function with dlsym, so that it loads without libfennec too.
 */
#ifndef FENNEC_MMAP_EVENT_H
#define FENNEC_MMAP_EVENT_H

#include <stddef.h>

enum {
	MAP_EV_MAP,   /* [a, a + len) was mapped (after the call) */
	MAP_EV_UNMAP, /* [a, a + len) is about to be unmapped (before the call) */
	MAP_EV_REMAP, /* [a, a + len) moved to [b, b + blen) (after the call) */
};

/* MAP_EV_MAP's flags */
#define MAP_EV_FIXED 1 /* MAP_FIXED: it replaced what was mapped there */
#define MAP_EV_ANON 2  /* MAP_ANONYMOUS: memory, not a file */

/* slot: where the wrapper's return address is (the stack starts at its caller). */
typedef void fennec_mmap_event_fn(int ev, void *a, size_t len, void *b, size_t blen, int flags, void **slot);

#endif

/*
 * mmap.c - libfennec-mmap.so, which `fennec record --memory-mmap` preloads beside
 * libfennec.so (docs/memory.md, "Mappings"): the program's mmap, munmap and mremap are
 * passed to the next definition (glibc's) and reported to libfennec.so's
 * fennec__mmap_event(), which counts large anonymous mappings as allocations. A separate
 * library so that recordings without the option do not interpose the mapping calls at
 * all. Until both are resolved (the dynamic loader runs other constructors first, and
 * they may map memory) the calls go to the kernel directly.
 */
#include <dlfcn.h>
#include <stdarg.h>
#include <stddef.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "collect/mmap_event.h"

#define API __attribute__((visibility("default")))
#define RA() ((void **)__builtin_dwarf_cfa() - 1)


static struct {
	void *(*mmap)(void *, size_t, int, int, int, off_t);
	int (*munmap)(void *, size_t);
	void *(*mremap)(void *, size_t, size_t, int, ...);
	fennec_mmap_event_fn *event;
} N;

__attribute__((constructor)) static void resolve(void)
{
	N.mmap = (void *(*)(void *, size_t, int, int, int, off_t))dlsym(RTLD_NEXT, "mmap");
	N.munmap = (int (*)(void *, size_t))dlsym(RTLD_NEXT, "munmap");
	N.mremap = (void *(*)(void *, size_t, size_t, int, ...))dlsym(RTLD_NEXT, "mremap");
	N.event = (fennec_mmap_event_fn *)dlsym(RTLD_DEFAULT, "fennec__mmap_event");
}

static void *next_mmap(void *a, size_t len, int prot, int flags, int fd, off_t off)
{
	if (N.mmap)
		return N.mmap(a, len, prot, flags, fd, off);
	long r = syscall(SYS_mmap, a, len, prot, flags, fd, off);
	return r == -1 ? MAP_FAILED : (void *)r;
}

static void *mapped(void *p, size_t len, int flags, void **slot)
{
	int ev_flags = (flags & MAP_FIXED ? MAP_EV_FIXED : 0) | (flags & MAP_ANONYMOUS ? MAP_EV_ANON : 0);
	if (p != MAP_FAILED && N.event)
		N.event(MAP_EV_MAP, p, len, NULL, 0, ev_flags, slot);
	return p;
}

API void *mmap(void *a, size_t len, int prot, int flags, int fd, off_t off)
{
	return mapped(next_mmap(a, len, prot, flags, fd, off), len, flags, RA());
}

API void *mmap64(void *a, size_t len, int prot, int flags, int fd, off_t off)
{
	return mapped(next_mmap(a, len, prot, flags, fd, off), len, flags, RA());
}

API int munmap(void *a, size_t len)
{
	if (N.event)
		N.event(MAP_EV_UNMAP, a, len, NULL, 0, 0, RA());
	return N.munmap ? N.munmap(a, len) : (int)syscall(SYS_munmap, a, len);
}

API void *mremap(void *a, size_t len, size_t nlen, int flags, ...)
{
	void *want = NULL;
	if (flags & MREMAP_FIXED) {
		va_list ap;
		va_start(ap, flags);
		want = va_arg(ap, void *);
		va_end(ap);
	}
	void *p;
	if (N.mremap) {
		p = N.mremap(a, len, nlen, flags, want);
	} else {
		long r = syscall(SYS_mremap, a, len, nlen, flags, want);
		p = r == -1 ? MAP_FAILED : (void *)r;
	}
	if (p != MAP_FAILED && N.event)
		N.event(MAP_EV_REMAP, a, len, p, nlen, 0, RA());
	return p;
}

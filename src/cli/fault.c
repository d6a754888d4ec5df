/*
 * fault.c - the fault-injection build's failures (make FAULT=1, docs/internals/testing.md):
 * the Nth allocation or the Nth write of the fennec command fails, as on a machine out of
 * memory or a full disk, "to give bugs a chance" (Lua's ltests.h, curl's torture tests).
 * Allocations: the command is linked with -Wl,--wrap for the allocation functions, so that
 * every call fennec's own code makes (not libc's, nor a library's) comes here first. Writes:
 * every output goes through cli_out_open, which in this build hands back a stream whose
 * every write to the file (a stdio buffer's worth) counts. Compiled to nothing otherwise.
 *
 * FENNEC_FAULT_ALLOC=N, FENNEC_FAULT_WRITE=N: the Nth (from 1) fails, the others succeed.
 * FENNEC_FAULT_COUNT=1: at exit, print "fennec-fault: A allocations, W writes" on standard
 * error, so that a sweep knows how far to go. FENNEC_FAULT_TRACE=1: the failing call's stack
 * on standard error (addresses in the binary: addr2line -e fennec -f -C).
 */
#ifdef FENNEC_FAULT
#include <errno.h>
#include <execinfo.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

static uint64_t allocs, writes, fail_alloc, fail_write;
static int ready, trace;

static void fault_trace(const char *what, uint64_t n)
{
	if (!trace)
		return;
	void *pc[32];
	int k = backtrace(pc, 32);
	fprintf(stderr, "fennec-fault: %s %llu fails here:\n", what, (unsigned long long)n);
	backtrace_symbols_fd(pc, k, 2);
}

static void fault_report(void)
{
	fprintf(stderr, "fennec-fault: %llu allocations, %llu writes\n", (unsigned long long)allocs,
		(unsigned long long)writes);
}

__attribute__((constructor)) static void fault_init(void)
{
	if (ready)
		return;
	ready = 1;
	const char *a = getenv("FENNEC_FAULT_ALLOC"), *w = getenv("FENNEC_FAULT_WRITE");
	const char *c = getenv("FENNEC_FAULT_COUNT");
	fail_alloc = a ? strtoull(a, NULL, 10) : 0;
	fail_write = w ? strtoull(w, NULL, 10) : 0;
	trace = getenv("FENNEC_FAULT_TRACE") != NULL;
	if (trace) { /* backtrace() loads libgcc on its first call: not at the failure */
		void *pc[2];
		backtrace(pc, 2);
	}
	if (c && *c == '1')
		atexit(fault_report);
}

/* Whether this allocation is the one to fail. */
static int alloc_fails(void)
{
	fault_init();
	if (++allocs != fail_alloc)
		return 0;
	fault_trace("allocation", allocs);
	return 1;
}

void *__real_malloc(size_t n);
void *__real_calloc(size_t k, size_t n);
void *__real_realloc(void *p, size_t n);
char *__real_strdup(const char *s);
char *__real_strndup(const char *s, size_t n);
int __real_posix_memalign(void **p, size_t align, size_t n);

void *__wrap_malloc(size_t n)
{
	if (alloc_fails()) {
		errno = ENOMEM;
		return NULL;
	}
	return __real_malloc(n);
}

void *__wrap_calloc(size_t k, size_t n)
{
	if (alloc_fails()) {
		errno = ENOMEM;
		return NULL;
	}
	return __real_calloc(k, n);
}

void *__wrap_realloc(void *p, size_t n)
{
	if (alloc_fails()) {
		errno = ENOMEM;
		return NULL;
	}
	return __real_realloc(p, n);
}

char *__wrap_strdup(const char *s)
{
	if (alloc_fails()) {
		errno = ENOMEM;
		return NULL;
	}
	return __real_strdup(s);
}

char *__wrap_strndup(const char *s, size_t n)
{
	if (alloc_fails()) {
		errno = ENOMEM;
		return NULL;
	}
	return __real_strndup(s, n);
}

int __wrap_posix_memalign(void **p, size_t align, size_t n)
{
	if (alloc_fails())
		return ENOMEM;
	return __real_posix_memalign(p, align, n);
}

static ssize_t fault_write(void *cookie, const char *buf, size_t n)
{
	fault_init();
	if (++writes == fail_write) {
		fault_trace("write", writes);
		errno = EIO;
		return -1;
	}
	size_t k = fwrite(buf, 1, n, cookie);
	if (k < n || fflush(cookie))
		return -1;
	return (ssize_t)k;
}

static int fault_close(void *cookie)
{
	return cookie == stdout ? fflush(cookie) : fclose(cookie);
}

FILE *cli_fault_stream(FILE *f)
{
	cookie_io_functions_t io = {.write = fault_write, .close = fault_close};
	FILE *c = fopencookie(f, "w", io);
	if (!c) {
		if (f != stdout)
			fclose(f);
		return NULL;
	}
	return c;
}
#endif

/*
 * fdguard.c - the program's closes and dup2s do not take fennec's file descriptors.
 *
 * A daemon closes every descriptor from 3 up before it opens its own files; then the
 * number of fennec's recording was the program's next file, and the writer appended
 * profile chunks to the program's data (and ftruncate()d it after a failed write). The
 * descriptors fennec holds for a while (its file, perf events, /proc files it rereads)
 * are marked here. close() of a marked one fails with EBADF, as for any descriptor the
 * program never opened (valgrind does the same for its log); close_range() and
 * closefrom() close around them. dup2() and dup3() onto fennec's file move the file to
 * another number first (session_file.c); onto another marked descriptor they go ahead and the
 * mark is dropped, so that fennec never closes what is now the program's.
 *
 * The marks describe the descriptor table of one process (`owner`): the one that set up
 * the collector, or the fork child whose handlers took it over (col_fd_forked). A vfork
 * child (or a clone without fork's handlers) shares fennec's memory, marks and session
 * with its parent, but has a table of its own: there the wrappers do what the program
 * asked and change nothing of fennec's, since a descriptor it closes or replaces is its
 * own copy. Moving the recording away from its dup2 there set the parent's writer on a
 * number open only in the child, and the parent's recording was lost.
 *
 * libunwind opens a pipe when it first runs (to check addresses by writing them, where
 * mincore() cannot), which took the program's lowest free numbers (3 and 4, and 5 and 6
 * for the remote unwinder): pipe() and pipe2() called from libunwind's code are moved
 * high and marked like the others.
 *
 * Everything here is async-signal-safe: programs close descriptors in signal handlers and
 * in fork children before exec.
 */
#include "collect/collect.h"

#include <dlfcn.h>
#include <errno.h>
#include <fcntl.h>
#include <link.h>
#include <string.h>
#include <sys/resource.h>
#include <stdint.h>
#include <sys/syscall.h>
#include <unistd.h>

#define API FENNEC_API
#define MARKED_MAX (1u << 20) /* descriptors beyond are not marked (RLIMIT_NOFILE is 1M at most here) */

static _Atomic uint64_t marked[MARKED_MAX / 64];
static _Atomic pid_t owner; /* whose descriptor table the marks describe (above) */

typedef int (*close_fn)(int);
typedef int (*dup2_fn)(int, int);
typedef int (*dup3_fn)(int, int, int);
typedef int (*pipe2_fn)(int *, int);
static struct {
	_Atomic(close_fn) close;
	_Atomic(dup2_fn) dup2;
	_Atomic(dup3_fn) dup3;
	_Atomic(pipe2_fn) pipe2;
} R;

/* libunwind's code (local and remote unwinders), found by col_fd_init(): set before the
 * program's code runs, read only after. */
#define UNW_RANGES 8
static struct { uintptr_t lo, hi; } unw_code[UNW_RANGES];
static int n_unw_code;

static int unw_segments(struct dl_phdr_info *info, size_t size, void *data)
{
	(void)size;
	(void)data;
	const char *slash = info->dlpi_name ? strrchr(info->dlpi_name, '/') : NULL;
	if (!slash || strncmp(slash + 1, "libunwind", 9))
		return 0;
	for (int i = 0; i < info->dlpi_phnum && n_unw_code < UNW_RANGES; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD && (ph->p_flags & PF_X)) {
			unw_code[n_unw_code].lo = info->dlpi_addr + ph->p_vaddr;
			unw_code[n_unw_code].hi = info->dlpi_addr + ph->p_vaddr + ph->p_memsz;
			n_unw_code++;
		}
	}
	return 0;
}

static int from_unwinder(const void *ret)
{
	uintptr_t a = (uintptr_t)ret;
	for (int i = 0; i < n_unw_code; i++)
		if (a >= unw_code[i].lo && a < unw_code[i].hi)
			return 1;
	return 0;
}

/* The next definitions, looked up before the program's code runs (col_fd_init, from the
 * constructor): dlsym is not async-signal-safe. Until then, the system calls. */
void col_fd_init(void)
{
	atomic_store(&owner, getpid());
	atomic_store(&R.close, (close_fn)dlsym(RTLD_NEXT, "close"));
	atomic_store(&R.dup2, (dup2_fn)dlsym(RTLD_NEXT, "dup2"));
	atomic_store(&R.dup3, (dup3_fn)dlsym(RTLD_NEXT, "dup3"));
	atomic_store(&R.pipe2, (pipe2_fn)dlsym(RTLD_NEXT, "pipe2"));
	n_unw_code = 0;
	dl_iterate_phdr(unw_segments, NULL);
}

/* In a fork child, from its handler: the marks describe its table now, a copy of the
 * parent's. */
void col_fd_forked(void)
{
	atomic_store(&owner, getpid());
}

/* Whether this is a process whose table the marks do not describe: a vfork child (above).
 * Asked only about a marked descriptor, so that getpid() costs nothing on others. */
static int foreign(void)
{
	pid_t o = atomic_load_explicit(&owner, memory_order_relaxed);
	return o != 0 && o != getpid();
}

static int real_close(int fd)
{
	close_fn f = atomic_load_explicit(&R.close, memory_order_relaxed);
	return f ? f(fd) : (int)syscall(SYS_close, fd);
}

int col_fd_marked(int fd)
{
	if (fd < 0 || (unsigned)fd >= MARKED_MAX)
		return 0;
	return (int)(atomic_load_explicit(&marked[fd / 64], memory_order_relaxed) >> (fd % 64) & 1);
}

static int unmark(int fd)
{
	if (fd < 0 || (unsigned)fd >= MARKED_MAX)
		return 0;
	uint64_t bit = 1ull << (fd % 64);
	return (atomic_fetch_and_explicit(&marked[fd / 64], ~bit, memory_order_relaxed) & bit) != 0;
}

int col_fd_mark(int fd)
{
	if (fd >= 0 && (unsigned)fd < MARKED_MAX)
		atomic_fetch_or_explicit(&marked[fd / 64], 1ull << (fd % 64), memory_order_relaxed);
	return fd;
}

/* Where fennec's descriptors go: out of the low numbers programs use (select() has
 * FD_SETSIZE 1024, and a program that dup2()s onto a number picks a small one), at three
 * quarters of the descriptor limit. */
int col_fd_high_base(void)
{
	struct rlimit rl;
	if (getrlimit(RLIMIT_NOFILE, &rl) != 0 || rl.rlim_cur < 256)
		return -1;
	return rl.rlim_cur > MARKED_MAX ? (int)(MARKED_MAX * 3 / 4) : (int)(rl.rlim_cur * 3 / 4);
}

int col_fd_keep(int fd)
{
	int base = fd >= 0 ? col_fd_high_base() : -1;
	if (base > fd) {
		int hi = fcntl(fd, F_DUPFD_CLOEXEC, base);
		if (hi >= 0) {
			real_close(fd);
			fd = hi;
		}
	}
	return col_fd_mark(fd);
}

void col_fd_close(int fd)
{
	/* Not marked any more: the program's dup2 replaced it, and the number is the program's. */
	if (unmark(fd))
		real_close(fd);
}

API int close(int fd)
{
	if (col_fd_marked(fd) && !foreign()) {
		errno = EBADF;
		return -1;
	}
	return real_close(fd);
}

/* The lowest marked descriptor in [lo, hi], or -1. */
static long next_marked(unsigned lo, unsigned hi)
{
	for (unsigned fd = lo; fd <= hi && fd < MARKED_MAX;) {
		uint64_t w = atomic_load_explicit(&marked[fd / 64], memory_order_relaxed) >> (fd % 64);
		if (w) {
			unsigned m = fd + (unsigned)__builtin_ctzll(w);
			return m <= hi ? (long)m : -1;
		}
		fd = (fd / 64 + 1) * 64;
	}
	return -1;
}

API int close_range(unsigned first, unsigned last, int flags)
{
	if (first > last) {
		errno = EINVAL;
		return -1;
	}
	for (;;) {
		long m = next_marked(first, last);
		if (m < 0 || foreign())
			return (int)syscall(SYS_close_range, first, last, flags);
		if ((unsigned)m > first && syscall(SYS_close_range, first, (unsigned)m - 1, flags) != 0)
			return -1;
		if ((unsigned)m == last)
			return 0;
		first = (unsigned)m + 1;
	}
}

API void closefrom(int lowfd)
{
	int saved = errno;
	if (lowfd < 0)
		lowfd = 0;
	if (close_range((unsigned)lowfd, ~0u, 0) != 0) {
		/* A kernel without close_range (before 5.9): one by one, up to the limit. */
		long max = sysconf(_SC_OPEN_MAX);
		for (long fd = lowfd; fd < (max > 0 ? max : 65536); fd++)
			if (!col_fd_marked((int)fd) || foreign())
				real_close((int)fd);
	}
	errno = saved;
}

/* Before newfd is made a copy of another descriptor: fennec's file moves away from it;
 * any other mark on it is dropped. */
static void make_way(int newfd)
{
	if (col_fd_marked(newfd) && !foreign() && col_session_fd_move(newfd) != 0)
		unmark(newfd);
}

API int dup2(int oldfd, int newfd)
{
	if (oldfd != newfd)
		make_way(newfd);
	dup2_fn f = atomic_load_explicit(&R.dup2, memory_order_relaxed);
	return f ? f(oldfd, newfd) : (int)syscall(SYS_dup2, oldfd, newfd);
}

API int dup3(int oldfd, int newfd, int flags)
{
	if (oldfd != newfd)
		make_way(newfd);
	dup3_fn f = atomic_load_explicit(&R.dup3, memory_order_relaxed);
	return f ? f(oldfd, newfd, flags) : (int)syscall(SYS_dup3, oldfd, newfd, flags);
}

/* The pipe libunwind opens when it first runs (above), and any it opens again. */
static int pipe_of(int fds[2], int flags, const void *caller)
{
	pipe2_fn f = atomic_load_explicit(&R.pipe2, memory_order_relaxed);
	int rc = f ? f(fds, flags) : (int)syscall(SYS_pipe2, fds, flags);
	if (rc == 0 && from_unwinder(caller)) {
		fds[0] = col_fd_keep(fds[0]);
		fds[1] = col_fd_keep(fds[1]);
	}
	return rc;
}

API int pipe2(int fds[2], int flags)
{
	return pipe_of(fds, flags, __builtin_return_address(0));
}

API int pipe(int fds[2])
{
	return pipe_of(fds, 0, __builtin_return_address(0));
}

/*
 * perfring.c - the ring source of CPU sampling (perfring.h). The kernel writes each
 * sample (the user registers and the top `stack_bytes` of the user stack) into a ring
 * mapped for the sampled thread; no signal interrupts the program, which is where the
 * signal source spent most of its cost. The writer thread later unwinds the copies inside
 * this same process: by the cached call-frame rules of cfi.c, or, for a sample with a
 * frame those do not cover, with libunwind's remote API over the local address space's
 * accessors (procedure lookup stays the dl_iterate_phdr-based one), memory and registers
 * read from the sample. Design: docs/internals/collect.md ("Samples").
 */
#include "collect/perfring.h"
#include "collect/cfi.h"
#include "collect/collect.h"

#include <stdlib.h>
#include <string.h>

/* FENNEC_CFI's mode (uw_init()): 1 (unset, empty or "1"), 0, 2 ("check"), -1 for another
 * value. */
static int cfi_mode_parse(const char *e)
{
	return !e || !*e || !strcmp(e, "1") ? 1 : !strcmp(e, "0") ? 0 : !strcmp(e, "check") ? 2 : -1;
}

void col_pr_env(void)
{
	const char *e = getenv("FENNEC_CFI");
	if (cfi_mode_parse(e) < 0)
		col_config_warn("FENNEC_CFI", e, "expected 1 (fennec's unwinder, then libunwind), 0 (libunwind) or check; using 1");
}

#if defined(__x86_64__) /* the registers below are x86-64's; elsewhere, no ring source */

#include <asm/perf_regs.h>
#include <dlfcn.h>
#include <errno.h>
#include <link.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <sys/mman.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include <libunwind.h> /* the generic (remote-capable) flavour: no UNW_LOCAL_ONLY here */

struct col_pr {
	int fd;
	pid_t tid;
	struct perf_event_mmap_page *meta; /* first page; the data pages follow */
	uint8_t *data;
	uint64_t size;                     /* data bytes, a power of two */
	size_t map_len;
};

/* ---- opening ---- */

/* The registers of a sample: every general-purpose one (a few bytes beside the stack copy,
 * and the unwinder never lacks one that some CFI names). In the record they come in bit
 * order: AX BX CX DX SI DI BP SP IP, then R8 .. R15. */
#define PR_REGS (((1ull << (PERF_REG_X86_IP + 1)) - 1) | (0xffull << PERF_REG_X86_R8))
#define PR_NREGS 17
#define PR_REG_SP PERF_REG_X86_SP
#define PR_REG_IP PERF_REG_X86_IP

static int pr_event(pid_t tid, const col_pr_cfg *c)
{
	struct perf_event_attr a;
	memset(&a, 0, sizeof a);
	a.type = PERF_TYPE_SOFTWARE;
	a.size = sizeof a;
	a.config = PERF_COUNT_SW_TASK_CLOCK;
	a.sample_period = c->period_ns;
	a.sample_type = PERF_SAMPLE_IP | PERF_SAMPLE_TID | PERF_SAMPLE_TIME | PERF_SAMPLE_REGS_USER |
			PERF_SAMPLE_STACK_USER;
	a.sample_regs_user = PR_REGS;
	a.sample_stack_user = c->stack_bytes;
	a.use_clockid = 1; /* times comparable with the events' clock, without a conversion fit */
	a.clockid = CLOCK_MONOTONIC;
	a.disabled = 1;
	a.exclude_kernel = (unsigned)c->exclude_kernel;
	a.exclude_hv = 1;
	/* Nobody polls the ring (the writer looks at its fill): wake nobody. */
	a.watermark = 1;
	a.wakeup_watermark = (uint32_t)((uint64_t)c->pages * (uint64_t)sysconf(_SC_PAGESIZE));
	return (int)syscall(SYS_perf_event_open, &a, tid, -1, -1, PERF_FLAG_FD_CLOEXEC);
}

col_pr *col_pr_open(pid_t tid, const col_pr_cfg *cfg, int (*move_fd)(int))
{
	int fd = pr_event(tid, cfg);
	if (fd < 0)
		return NULL;
	if (move_fd)
		fd = move_fd(fd);
	col_fd_mark(fd); /* kept from the program's closes (fdguard.c) */
	size_t page = (size_t)sysconf(_SC_PAGESIZE);
	void *m = MAP_FAILED;
	uint32_t pages = cfg->pages;
	/* An unprivileged user's locked-memory allowance (perf_event_mlock_kb per CPU, then
	 * RLIMIT_MEMLOCK) runs out with many threads: smaller rings, drained more often. */
	for (; pages >= cfg->min_pages; pages /= 2) {
		m = mmap(NULL, (1 + pages) * page, PROT_READ | PROT_WRITE, MAP_SHARED, fd, 0);
		if (m != MAP_FAILED || (errno != EPERM && errno != ENOMEM))
			break;
	}
	col_pr *r = m != MAP_FAILED ? calloc(1, sizeof *r) : NULL;
	if (!r || ioctl(fd, PERF_EVENT_IOC_RESET, 0) != 0 || ioctl(fd, PERF_EVENT_IOC_ENABLE, 0) != 0) {
		if (m != MAP_FAILED)
			munmap(m, (1 + pages) * page);
		free(r);
		col_fd_close(fd);
		return NULL;
	}
	r->fd = fd;
	r->tid = tid;
	r->meta = m;
	r->data = (uint8_t *)m + page;
	r->size = (uint64_t)pages * page;
	r->map_len = (1 + pages) * page;
	return r;
}

void col_pr_free(col_pr *r)
{
	if (!r)
		return;
	if (col_fd_marked(r->fd)) /* else the program's dup2 took the number */
		ioctl(r->fd, PERF_EVENT_IOC_DISABLE, 0);
	munmap(r->meta, r->map_len);
	col_fd_close(r->fd);
	free(r);
}

/* A new sampling period for the ring's counter (the overhead budget's stride). */
void col_pr_set_period(col_pr *r, uint64_t period_ns)
{
	if (r && col_fd_marked(r->fd))
		ioctl(r->fd, PERF_EVENT_IOC_PERIOD, &period_ns);
}

void col_pr_forget(col_pr *r)
{
	if (!r)
		return;
	col_fd_close(r->fd);
	free(r);
}

uint64_t col_pr_bytes(const col_pr *r) { return r->size; }

unsigned col_pr_fill_pct(const col_pr *r)
{
	uint64_t head = __atomic_load_n(&r->meta->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = __atomic_load_n(&r->meta->data_tail, __ATOMIC_RELAXED);
	return (unsigned)((head - tail) * 100 / r->size);
}

/* ---- loaded modules: the memory the unwinder may read besides the stack copy ---- */

typedef struct seg {
	uintptr_t lo, hi;
} seg;

static struct {
	seg *segs;
	size_t n, cap;
	unsigned long long adds, subs;
	int valid;
} M;

static int seg_cmp(const void *a, const void *b)
{
	uintptr_t x = ((const seg *)a)->lo, y = ((const seg *)b)->lo;
	return (x > y) - (x < y);
}

static int seg_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD || !ph->p_memsz)
			continue;
		if (M.n == M.cap) {
			size_t cap = M.cap ? M.cap * 2 : 64;
			seg *s = realloc(M.segs, cap * sizeof *s);
			if (!s)
				return 1;
			M.segs = s;
			M.cap = cap;
		}
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		M.segs[M.n++] = (seg){lo, lo + ph->p_memsz};
	}
	cfi_module_add(info);
	return 0;
}

/* The end of the loaded object's segment that holds addr, or 0. cfi.c reads unwind
 * tables through it too. */
static uintptr_t seg_end(uintptr_t addr)
{
	size_t lo = 0, hi = M.n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (M.segs[mid].lo <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo > 0 && addr < M.segs[lo - 1].hi ? M.segs[lo - 1].hi : 0;
}

/* Whether [addr, addr + 8) lies in a segment of a loaded object. */
static int seg_has(uintptr_t addr)
{
	uintptr_t e = seg_end(addr);
	return e && e - addr >= 8;
}

/* ---- the unwinder ---- */

/* What one sample gives the accessors. */
typedef struct uw_arg {
	const uint64_t *regs;   /* PR_NREGS values, record order */
	uint64_t sp;
	const uint8_t *stack;   /* the copy of [sp, sp + size) */
	uint64_t size;
	int ran_off;            /* a read above the copy: the stack was deeper than copied */
} uw_arg;

/* Beyond the copy but this close above sp, an address is taken to be the thread's stack. */
#define STACK_WINDOW (64u << 20)

/* A plain load, outside the sanitizers' view: the address is a loaded object's segment,
 * which may lie in an instrumented global's redzone (ASan), and whose TSan shadow is no
 * shared data's: TSan's check of a read of ld.so's code here died of SIGBUS in its shadow
 * under `ulimit -f` (test_file_size_limit_keeps_the_exit_status). */
__attribute__((no_sanitize("address", "thread"))) static uint64_t load64(uintptr_t addr)
{
	uint64_t v;
	__builtin_memcpy(&v, (const void *)addr, 8);
	return v;
}

static int uw_mem(unw_addr_space_t as, unw_word_t addr, unw_word_t *val, int write, void *arg)
{
	uw_arg *a = arg;
	if (write)
		return -UNW_EINVAL;
	uint64_t off = addr - a->sp;
	if (addr >= a->sp && off < a->size && a->size - off >= 8) {
		memcpy(val, a->stack + off, 8);
		return 0;
	}
	if (addr >= a->sp && off < STACK_WINDOW) {
		a->ran_off = 1;
		return -UNW_EINVAL;
	}
	/* Code and unwind tables of loaded objects; never the live stack (it has changed
	 * since the sample) nor anything that may be unmapped. */
	if (!seg_has(addr))
		return -UNW_EINVAL;
	*val = load64(addr);
	return 0;
}

/* libunwind's x86-64 register numbers -> position in the sample's registers. */
static int uw_reg_pos(unw_regnum_t r)
{
	switch (r) {
	case UNW_X86_64_RAX: return 0;
	case UNW_X86_64_RBX: return 1;
	case UNW_X86_64_RCX: return 2;
	case UNW_X86_64_RDX: return 3;
	case UNW_X86_64_RSI: return 4;
	case UNW_X86_64_RDI: return 5;
	case UNW_X86_64_RBP: return 6;
	case UNW_X86_64_RSP: return 7;
	case UNW_X86_64_RIP: return 8;
	default:
		if (r >= UNW_X86_64_R8 && r <= UNW_X86_64_R15)
			return 9 + (r - UNW_X86_64_R8);
		return -1;
	}
}

static int uw_reg(unw_addr_space_t as, unw_regnum_t r, unw_word_t *val, int write, void *arg)
{
	uw_arg *a = arg;
	int pos = uw_reg_pos(r);
	if (write || pos < 0)
		return -UNW_EBADREG;
	*val = a->regs[pos];
	return 0;
}

static int uw_fpreg(unw_addr_space_t as, unw_regnum_t r, unw_fpreg_t *val, int write, void *arg)
{
	return -UNW_EBADREG;
}

static unw_addr_space_t uw_as;

/* FENNEC_CFI: 1 (default) the fast unwinder first (cfi.c), libunwind for what it refuses;
 * 0 libunwind only; "check" both on every sample, compared (libunwind's frames stay the
 * answer), the counts and the first differences printed at exit (to stderr, or appended
 * to the file FENNEC_CFI_LOG names). */
static int cfi_mode = -1;
static struct {
	uint64_t samples, fast, refused, differ, deeper;
	FILE *log;
} chk;

static void chk_report(void)
{
	cfi_stats st = cfi_get_stats();
	fprintf(chk.log,
		"fennec: cfi check: %s: %llu samples, %llu by rules, %llu refused, %llu differ, %llu deeper "
		"where libunwind ran off; %llu rules computed, %llu refused\n",
		program_invocation_short_name, (unsigned long long)chk.samples, (unsigned long long)chk.fast,
		(unsigned long long)chk.refused, (unsigned long long)chk.differ, (unsigned long long)chk.deeper,
		(unsigned long long)st.computed, (unsigned long long)st.refused);
}

static int uw_init(void)
{
	if (uw_as)
		return 0;
	cfi_mode = cfi_mode_parse(getenv("FENNEC_CFI")); /* once a process; col_pr_env() said a bad one */
	if (cfi_mode < 0)
		cfi_mode = 1;
	if (cfi_mode == 2) {
		const char *log = getenv("FENNEC_CFI_LOG");
		chk.log = log ? fopen(log, "ae") : NULL;
		if (!chk.log)
			chk.log = stderr;
		setvbuf(chk.log, NULL, _IOLBF, 0);
		atexit(chk_report);
	}
	unw_accessors_t acc = *unw_get_accessors(unw_local_addr_space);
	acc.access_mem = uw_mem;
	acc.access_reg = uw_reg;
	acc.access_fpreg = uw_fpreg;
	acc.resume = NULL;
	uw_as = unw_create_addr_space(&acc, 0);
	if (!uw_as)
		return -1;
	/* One cache for whichever thread drains (the writer, an unloading thread), holding
	 * the procedures of 1024 addresses: without it every frame parses its CFI again
	 * (20 times slower). This build of libunwind has no per-thread cache. */
	unw_set_caching_policy(uw_as, UNW_CACHE_GLOBAL);
	unw_set_cache_size(uw_as, 1024, 0);
	return 0;
}

/* libunwind's walk of one sample into frames[], at most depth + 1 (one more says it was
 * cut). */
static uint32_t uw_step_all(uw_arg *a, uint64_t *frames, uint32_t depth)
{
	unw_cursor_t c;
	frames[0] = a->regs[PR_REG_IP]; /* the interrupted instruction, exactly */
	if (unw_init_remote(&c, uw_as, a) < 0)
		return 1;
	uint32_t n = 1;
	while (n <= depth && unw_step(&c) > 0) {
		unw_word_t ip;
		if (unw_get_reg(&c, UNW_REG_IP, &ip) < 0 || !ip)
			break;
		frames[n++] = ip;
	}
	return n;
}

/* The sample's registers (record order: AX BX CX DX SI DI BP SP IP R8..R15) in DWARF's
 * numbering (rax rdx rcx rbx rsi rdi rbp rsp r8..r15 rip). */
static void dwarf_regs(const uint64_t *r, uint64_t *d)
{
	static const uint8_t from[CFI_NREGS] = {0, 3, 2, 1, 4, 5, 6, 7, 9, 10, 11, 12, 13, 14, 15, 16, 8};
	for (int i = 0; i < CFI_NREGS; i++)
		d[i] = r[from[i]];
}

/* Unwind one sample into frames[], at most depth + 1 (one more says it was cut): by the
 * cached rules when they cover every frame, else by libunwind. */
static uint32_t uw_walk(uw_arg *a, uint64_t *frames, uint32_t depth)
{
	if (!cfi_mode)
		return uw_step_all(a, frames, depth);
	cfi_sample s;
	dwarf_regs(a->regs, s.regs);
	s.stack = a->stack;
	s.size = a->size;
	int ran_off = 0;
	uint32_t n = cfi_walk(&s, frames, depth, &ran_off);
	if (cfi_mode == 2) {
		uint64_t other[COL_SAMPLE_MAX_DEPTH + 1];
		uint32_t m = uw_step_all(a, other, depth);
		chk.samples++;
		if (!n) {
			chk.refused++;
		} else {
			chk.fast++;
			if (a->ran_off && !ran_off && m <= n && !memcmp(other, frames, m * sizeof *frames)) {
				/* libunwind stopped reading above the copy where the rules found the
				 * next frames in it (seen in Open MPI's threads), or where they knew
				 * the last frame for the outermost (a thread's clone3, under ASan):
				 * not a disagreement about any frame */
				chk.deeper++;
			} else if (m != n || memcmp(other, frames, n * sizeof *frames) || ran_off != a->ran_off) {
				if (chk.differ++ < 5) {
					fprintf(chk.log, "fennec: cfi check: %s: rules %u frames%s, libunwind %u%s; stacks:",
						program_invocation_short_name, n, ran_off ? " (ran off)" : "", m,
						a->ran_off ? " (ran off)" : "");
					for (uint32_t i = 0; i < n || i < m; i++) {
						uint64_t f = i < n ? frames[i] : i < m ? other[i] : 0;
						Dl_info di = {0};
						const char *lib = dladdr((void *)(uintptr_t)f, &di) && di.dli_fname ? di.dli_fname : "?";
						const char *base = strrchr(lib, '/');
						fprintf(chk.log, " %s%s+%#llx%s", i < n && i < m && frames[i] == other[i] ? "" : "*",
							base ? base + 1 : lib, (unsigned long long)(f - (uintptr_t)di.dli_fbase),
							i >= n ? "(lu)" : i >= m ? "(r)" : "");
					}
					fputc('\n', chk.log);
				}
			}
		}
		memcpy(frames, other, m * sizeof *frames);
		return m; /* what libunwind found stays the answer */
	}
	if (n) {
		a->ran_off = ran_off;
		return n;
	}
	return uw_step_all(a, frames, depth);
}

/*
 * This libunwind build keeps one procedure cache under a lock, and masks every signal
 * around each lookup: two sigprocmask system calls per frame, four fifths of the remote
 * unwinder's time. While a drain runs, the draining thread has every signal blocked
 * already (uw_masked), so those calls would change nothing: they return at once.
 */
static __thread int uw_masked;

/* Whether `set` blocks all that sigfillset() does (glibc leaves out its own two). */
static int blocks_all(const sigset_t *set)
{
	static uint64_t full;
	if (!full) {
		sigset_t f;
		sigfillset(&f);
		memcpy(&full, &f, sizeof full);
	}
	uint64_t w;
	memcpy(&w, set, sizeof w);
	return (w & full) == full;
}

FENNEC_API int sigprocmask(int how, const sigset_t *set, sigset_t *old)
{
	static int (*real)(int, const sigset_t *, sigset_t *);
	if (uw_masked && how == SIG_SETMASK && set && blocks_all(set)) {
		if (old)
			sigfillset(old);
		return 0;
	}
	if (!real)
		real = (int (*)(int, const sigset_t *, sigset_t *))dlsym(RTLD_NEXT, "sigprocmask");
	if (!real) {
		errno = ENOSYS;
		return -1;
	}
	return real(how, set, old);
}

/* ---- reading the rings ---- */

typedef struct drain {
	col_pr **rings;
	size_t n;
	uint64_t cut;
	uint32_t depth;
	col_pr_emit emit;
	void *ctx;
	uint64_t lost;
	uint8_t *scratch;       /* a record that wraps around the ring end, made contiguous */
} drain;

static uint64_t rd64(const uint8_t *p)
{
	uint64_t v;
	memcpy(&v, p, 8);
	return v;
}

/* Copy n bytes at ring position pos (wrapping). */
static void ring_copy(const col_pr *r, uint64_t pos, void *dst, size_t n)
{
	uint64_t off = pos & (r->size - 1);
	size_t first = r->size - off < n ? (size_t)(r->size - off) : n;
	memcpy(dst, r->data + off, first);
	memcpy((uint8_t *)dst + first, r->data, n - first);
}

/* One PERF_RECORD_SAMPLE: IP, TID, TIME, REGS_USER, STACK_USER (perf_event_open(2)). */
static void take_sample(drain *d, const uint8_t *p, const uint8_t *end)
{
	uint64_t frames[COL_SAMPLE_MAX_DEPTH + 1];
	uint16_t misc;
	memcpy(&misc, p + 4, sizeof misc);
	/* in the kernel (a system call, a page fault): the user registers are where it entered */
	unsigned kernel = (misc & PERF_RECORD_MISC_CPUMODE_MASK) == PERF_RECORD_MISC_KERNEL ? FMT_S_KERNEL : 0;
	p += 8; /* header */
	if (end - p < 32)
		return;
	uint64_t ip = rd64(p);
	pid_t tid = (pid_t)(rd64(p + 8) >> 32);
	uint64_t time = rd64(p + 16);
	uint64_t abi = rd64(p + 24);
	p += 32;
	if (abi == PERF_SAMPLE_REGS_ABI_NONE || end - p < 8 * PR_NREGS + 8) {
		/* No user registers (a kernel thread's sample, which ours never are). */
		frames[0] = ip;
		d->emit(d->ctx, tid, time, FMT_S_EXACT_PC | FMT_S_TRUNCATED | kernel, frames, ip < (1ull << 47));
		return;
	}
	uw_arg a = {(const uint64_t *)p, 0, NULL, 0, 0};
	p += 8 * PR_NREGS;
	uint64_t size = rd64(p);
	p += 8;
	if (size > (uint64_t)(end - p) || (size && (uint64_t)(end - p) - size < 8))
		size = 0;
	a.sp = a.regs[PR_REG_SP];
	a.stack = p;
	a.size = size ? rd64(p + size) : 0; /* dyn_size: what the kernel could copy */
	if (a.size > size)
		a.size = size;
	uint32_t n = uw_walk(&a, frames, d->depth);
	unsigned flags = FMT_S_EXACT_PC | kernel;
	if (n > d->depth) {
		n = d->depth;
		flags |= FMT_S_TRUNCATED;
	} else if (a.ran_off) {
		flags |= FMT_S_TRUNCATED; /* deeper than the copied bytes */
	}
	d->emit(d->ctx, tid, time, flags, frames, n);
}

static void drain_ring(drain *d, col_pr *r)
{
	uint64_t head = __atomic_load_n(&r->meta->data_head, __ATOMIC_ACQUIRE);
	uint64_t tail = r->meta->data_tail;
	while (head - tail >= sizeof(struct perf_event_header)) {
		struct perf_event_header h;
		ring_copy(r, tail, &h, sizeof h);
		if (h.size < sizeof h || h.size > head - tail) {
			tail = head; /* cannot happen; do not loop on it */
			break;
		}
		const uint8_t *rec = r->data + (tail & (r->size - 1));
		if ((tail & (r->size - 1)) + h.size > r->size) {
			ring_copy(r, tail, d->scratch, h.size);
			rec = d->scratch;
		}
		if (h.type == PERF_RECORD_SAMPLE) {
			if (h.size >= 32 && rd64(rec + 24) > d->cut)
				break; /* for the next flush: see col_sample_drain */
			take_sample(d, rec, rec + h.size);
		} else if (h.type == PERF_RECORD_LOST && h.size >= 24) {
			d->lost += rd64(rec + 16);
		}
		tail += h.size;
	}
	__atomic_store_n(&r->meta->data_tail, tail, __ATOMIC_RELEASE);
}

/*
 * Runs inside dl_iterate_phdr, that is with the loader's lock held (it is recursive, so
 * libunwind's own dl_iterate_phdr calls nest): no dlclose can unmap an object between the
 * module check in uw_mem and the read. A fork waits for the session's flush lock, which
 * the writer holds here, so no child inherits the loader's lock taken.
 */
static int drain_locked(struct dl_phdr_info *info, size_t size, void *arg)
{
	drain *d = arg;
	if (!M.valid || info->dlpi_adds != M.adds || info->dlpi_subs != M.subs) {
		M.n = 0;
		cfi_modules_reset();
		dl_iterate_phdr(seg_cb, NULL);
		qsort(M.segs, M.n, sizeof *M.segs, seg_cmp);
		cfi_modules_done(seg_end);
		if (M.valid && info->dlpi_subs != M.subs)
			unw_flush_cache(uw_as, 0, 0); /* an unloaded object's code may be replaced */
		M.adds = info->dlpi_adds;
		M.subs = info->dlpi_subs;
		M.valid = 1;
	}
	for (size_t i = 0; i < d->n; i++)
		drain_ring(d, d->rings[i]);
	return 1; /* the first object was enough */
}

uint64_t col_pr_drain(col_pr **rings, size_t n, uint64_t cut_ns, uint32_t depth, col_pr_emit emit, void *ctx)
{
	static uint8_t *scratch;
	if (!n || uw_init() < 0)
		return 0;
	if (!scratch && !(scratch = malloc(1u << 16))) /* a perf record is at most 64 KiB */
		return 0;
	if (depth > COL_SAMPLE_MAX_DEPTH)
		depth = COL_SAMPLE_MAX_DEPTH;
	drain d = {rings, n, cut_ns, depth, emit, ctx, 0, scratch};
	sigset_t all, old;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, &old); /* the writer's mask already; not the final flush's */
	uw_masked = 1;
	dl_iterate_phdr(drain_locked, &d);
	uw_masked = 0;
	pthread_sigmask(SIG_SETMASK, &old, NULL);
	return d.lost;
}

#else

col_pr *col_pr_open(pid_t tid, const col_pr_cfg *cfg, int (*move_fd)(int)) { return NULL; }
void col_pr_free(col_pr *r) {}
void col_pr_forget(col_pr *r) {}
void col_pr_set_period(col_pr *r, uint64_t period_ns) {}
unsigned col_pr_fill_pct(const col_pr *r) { return 0; }
uint64_t col_pr_bytes(const col_pr *r) { return 0; }
uint64_t col_pr_drain(col_pr **rings, size_t n, uint64_t cut_ns, uint32_t depth, col_pr_emit emit, void *ctx)
{
	return 0;
}

#endif

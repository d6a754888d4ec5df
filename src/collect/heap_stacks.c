/*
 * heap_stacks.c - the stacks of recorded allocations, on the program's threads: the
 * thread's cache of stacks (made here, looked up inline by alloc_stack() in heap_hooks.c),
 * the walkers that fill it (cfi.c's rules, libgcc's unwinder, libunwind, and the check of
 * one against another), and the stacks of threads that ended, which the scan at the end
 * leaves out (heap_reach.c).
 */
#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#define UNW_LOCAL_ONLY
#include <libunwind.h>
#include <unwind.h>

#include "collect/cfi.h"
#include "collect/heap.h"

struct col_heap_dead DEAD;

#if !MEM_SANITIZER /* the sanitizer builds keep no stacks (sc_get()) */
void dead_stack_add(uintptr_t lo, uintptr_t hi)
{
	uint32_t i = atomic_fetch_add_explicit(&DEAD.next, 1, memory_order_relaxed) % DEAD_STACKS;
	atomic_store_explicit(&DEAD.lo[i], lo, memory_order_relaxed);
	atomic_store_explicit(&DEAD.hi[i], hi, memory_order_release);
}

void dead_stack_take(uintptr_t lo, uintptr_t hi)
{
	uint32_t n = atomic_load_explicit(&DEAD.next, memory_order_relaxed);
	for (uint32_t i = 0; i < DEAD_STACKS && i < n; i++)
		if (atomic_load_explicit(&DEAD.lo[i], memory_order_relaxed) < hi &&
		    atomic_load_explicit(&DEAD.hi[i], memory_order_acquire) > lo)
			atomic_store_explicit(&DEAD.hi[i], 0, memory_order_relaxed);
}
#endif

enum { HU_RULES, HU_GCC, HU_UNW, HU_CHECK };
int heap_unwind_parse(const char *e)
{
	if (!e || !*e || !strcmp(e, "1"))
		return HU_RULES;
	return !strcmp(e, "gcc") ? HU_GCC : !strcmp(e, "0") ? HU_UNW : !strcmp(e, "check") ? HU_CHECK : -1;
}

#if !MEM_SANITIZER
void sc_release(void)
{
	if (T.stacks && own_block(T.stacks))
		own_free(T.stacks);
	T.stacks = NULL;
	T.no_cache = 1;
}

/*
 * sc_fill() walks the stack with cfi.c's call-frame rules (cfi_walk_local: the rule of
 * each address computed once from its object's .eh_frame, found with glibc's lock-free
 * _dl_find_object, and cached for all threads; a frame is then a probe and a load or two), and
 * where a frame needs more than those rules do (a signal frame, a CFA expression other than
 * a PLT entry's, code without unwind tables), with libgcc's unwinder (_Unwind_Backtrace,
 * taken from libgcc_s.so.1 by col_mem_start(): libunwind exports a function of the same
 * name), which also finds FDEs with _dl_find_object but reads them again for every frame
 * (~145 ns a frame here). Both give every frame's stack pointer, so where each return
 * address was read. libunwind's unw_step gives that too, but Debian's libunwind is built
 * without per-thread caches: every step took its global cache's lock, blocking and
 * restoring all signals around it, two rt_sigprocmask calls a frame, four when its cache
 * missed (119,309 for 24,249 allocations of a Python script in full mode).
 * FENNEC_HEAP_UNWIND: 1 (default) rules, then libgcc; "gcc" libgcc only; 0 libunwind only;
 * "check" as 1, and libunwind on every walk too (fills and uncached), compared (the first
 * result is kept), the counts printed at exit (to stderr, or appended to
 * FENNEC_HEAP_UNWIND_LOG).
 */
struct col_heap_unwind G;

#define SC_WALK_MAX (17 + SC_FRAMES + 1) /* sc_fill's, 16 of fennec's, an entry's, one to say "more" */
typedef struct sc_walk {
	uint64_t *ip, *sp; /* each frame's, innermost (the walker's caller's) first */
	uint32_t n;
	uint8_t full;      /* stopped at SC_WALK_MAX: the stack goes on */
} sc_walk;

static _Unwind_Reason_Code sc_walk_frame(struct _Unwind_Context *ctx, void *arg)
{
	sc_walk *w = arg;
	if (w->n == SC_WALK_MAX) {
		w->full = 1;
		return _URC_NORMAL_STOP;
	}
	uint64_t ip = (uint64_t)G.get_ip(ctx);
	if (ip) { /* 0: past the outermost frame */
		w->ip[w->n] = ip;
		/* a caller's "CFA" here is its stack pointer, just above the return address
		 * that leads to it */
		w->sp[w->n++] = (uint64_t)G.get_cfa(ctx);
	}
	return _URC_NO_REASON;
}

/* One more frame of the entry: the return address ip, read at loc. */
static inline int sc_put(sc_entry *e, uint32_t *n, void **slot, uint64_t ip, uintptr_t loc)
{
	if (loc < (uintptr_t)slot || loc + 8 > T.stack_hi || *(const uint64_t *)loc != ip)
		return -1; /* not read from this stack (a signal frame, another stack) */
	e->frames[*n] = ip;
	e->locs[(*n)++] = loc;
	return 0;
}

/* The caller whose return address is at `slot`, then its callers' return addresses up to
 * `depth`, from a walk w (frame 0 the walker's, then fennec's, at most 16), into e with
 * where each was read. Returns how many, or -1; *more: the stack goes on. A walk that
 * stopped where it met the stack of entry `join` (its frame jat) goes on with that entry's
 * frames beyond it, each checked in place as a cache hit checks them. */
static int sc_take(sc_entry *e, void **slot, uint32_t depth, const sc_walk *w, int *more, const sc_entry *join,
		   uint32_t jat)
{
	uint32_t k = 1, n = 0;
	while (k <= 16 && k < w->n && w->sp[k] != (uintptr_t)(slot + 1))
		k++;
	if (k > 16 || k >= w->n || w->ip[k] != (uint64_t)(uintptr_t)*slot)
		return -1;
	e->frames[n] = w->ip[k];
	e->locs[n++] = (uintptr_t)slot;
	for (;;) {
		int walked = k + 1 < w->n, joined = !walked && join && jat + 1 < join->n;
		*more = walked || joined || (join ? join->truncated : w->full);
		if (!*more || n == depth)
			return (int)n;
		if (walked) {
			k++;
			if (sc_put(e, &n, slot, w->ip[k], (uintptr_t)w->sp[k] - 8) < 0)
				return -1;
		} else if (joined) {
			jat++;
			if (sc_put(e, &n, slot, join->frames[jat], join->locs[jat]) < 0)
				return -1;
		} else {
			return -1; /* the walk (or the joined entry) stopped before the entry was full */
		}
	}
}

_Unwind_Reason_Code gcc_ip(struct _Unwind_Context *ctx, void *arg)
{
	gcc_ips *g = arg;
	if (g->n >= g->max)
		return _URC_END_OF_STACK;
	g->f[g->n++] = (uint64_t)G.get_ip(ctx);
	return _URC_NO_REASON;
}

/* libgcc's walk (G.backtrace set). */
int sc_walk_gcc(sc_entry *e, void **slot, uint32_t depth, int *more)
{
	uint64_t *scratch = T.stacks->scratch; /* COL_SAMPLE_MAX_DEPTH + 16 words */
	_Static_assert(2 * SC_WALK_MAX <= COL_SAMPLE_MAX_DEPTH + 16, "scratch holds a walk");
	sc_walk w = {scratch, scratch + SC_WALK_MAX, 0, 0};
	_Unwind_Reason_Code rc = G.backtrace(sc_walk_frame, &w);
	if (!w.full && rc != _URC_END_OF_STACK)
		return -1;
	return sc_take(e, slot, depth, &w, more, NULL, 0);
}

/* The call-frame rules of cfi.c, cached by address (a frame: a probe and a load or two);
 * -2 when a frame needs more than they do (the caller walks another way). */
int sc_walk_rules(sc_entry *e, void **slot, uint32_t depth, int *more)
{
#if defined(__x86_64__)
	sc_cache *c = T.stacks;
	uint64_t *scratch = c->scratch;
	int full;
	uint32_t at = 0;
	/* Deep stacks share their outer frames with the thread's previous one: meeting it, the
	 * walk stops (cc1plus: ~36 frames a stack; the walk was 9.4 % of its samples). */
	const sc_entry *r = c->recent;
	cfi_join j = {r ? r->frames : NULL, r ? (const uint64_t *)r->locs : NULL, r && r != e && r->key ? r->n : 0,
		      (uintptr_t)slot, &at};
	uint32_t n = cfi_walk_local(T.stack_hi, scratch, scratch + SC_WALK_MAX, SC_WALK_MAX, &full, j.n ? &j : NULL);
	if (!n)
		return -2;
	sc_walk w = {scratch, scratch + SC_WALK_MAX, n, (uint8_t)full};
	int got = sc_take(e, slot, depth, &w, more, at ? r : NULL, at ? at - 1 : 0);
	if (got >= 0 || !at)
		return got;
	/* Beyond the frame where they met, the two stacks differ (a function at the same place,
	 * called from elsewhere), or the other one was cut: walk it all. */
	if (!(n = cfi_walk_local(T.stack_hi, scratch, scratch + SC_WALK_MAX, SC_WALK_MAX, &full, NULL)))
		return -2;
	w = (sc_walk){scratch, scratch + SC_WALK_MAX, n, (uint8_t)full};
	return sc_take(e, slot, depth, &w, more, NULL, 0);
#else
	(void)e, (void)slot, (void)depth, (void)more;
	return -2;
#endif
}

int sc_walk_unw(sc_entry *e, void **slot, uint32_t depth, int *more)
{
	unw_context_t uc;
	unw_cursor_t c;
	unw_word_t ip, sp;
	uint32_t n = 0;
	if (unw_getcontext(&uc) < 0 || unw_init_local(&c, &uc) < 0)
		return -1;
	for (int k = 0;; k++) {
		if (k >= 16 || unw_step(&c) <= 0 || unw_get_reg(&c, UNW_REG_SP, &sp) < 0)
			return -1;
		if (sp == (uintptr_t)(slot + 1))
			break;
	}
	if (unw_get_reg(&c, UNW_REG_IP, &ip) < 0 || ip != (unw_word_t)(uintptr_t)*slot)
		return -1;
	e->frames[n] = ip;
	e->locs[n++] = (uintptr_t)slot;
	while ((*more = unw_step(&c)) > 0 && n < depth)
		if (unw_get_reg(&c, UNW_REG_IP, &ip) < 0 || unw_get_reg(&c, UNW_REG_SP, &sp) < 0 ||
		    sc_put(e, &n, slot, ip, (uintptr_t)sp - 8) < 0)
			return -1;
	return *more < 0 ? -1 : (int)n; /* an unwinding error */
}

/* FENNEC_HEAP_UNWIND=check: the walk that gave e (n frames, or < 0; `rules`: by the rules)
 * against libunwind's. */
__attribute__((noinline)) void heap_unwind_compare(const sc_entry *e, void **slot, uint32_t depth, int n,
							   int more, int rules)
{
	sc_entry u;
	int more_u = 0, nu = sc_walk_unw(&u, slot, depth, &more_u);
	atomic_fetch_add(rules ? &G.by_rules : &G.by_gcc, 1);
	if (n >= 0 && nu >= 0) {
		atomic_fetch_add(&G.both, 1);
		if (n != nu || (more > 0) != (more_u > 0) || memcmp(e->frames, u.frames, 8 * (size_t)n) ||
		    memcmp(e->locs, u.locs, 8 * (size_t)n))
			atomic_fetch_add(&G.differ, 1);
	} else if (n >= 0 || nu >= 0) {
		atomic_fetch_add(n >= 0 ? &G.only_fast : &G.only_unw, 1);
	}
}

static void heap_unwind_report(void)
{
	fprintf(G.log, "fennec: heap unwind check: %s: %llu stacks walked by both, %llu differ, %llu by fennec only, "
		       "%llu by libunwind only; %llu walks by rules, %llu by libgcc\n",
		program_invocation_short_name, (unsigned long long)G.both, (unsigned long long)G.differ,
		(unsigned long long)G.only_fast, (unsigned long long)G.only_unw, (unsigned long long)G.by_rules,
		(unsigned long long)G.by_gcc);
}

/* At a session's start (not inside an allocation): libgcc's unwinder, per FENNEC_HEAP_UNWIND. */
void heap_unwind_init(void)
{
	static int done;
	if (done)
		return;
	done = 1;
	int how = heap_unwind_parse(getenv("FENNEC_HEAP_UNWIND"));
	if (how == HU_UNW)
		return;
	void *h = dlopen("libgcc_s.so.1", RTLD_NOW | RTLD_LOCAL);
	void *bt = h ? dlsym(h, "_Unwind_Backtrace") : NULL;
	void *ip = h ? dlsym(h, "_Unwind_GetIP") : NULL, *cfa = h ? dlsym(h, "_Unwind_GetCFA") : NULL;
	if (!bt || !ip || !cfa)
		return;
	G.get_ip = (_Unwind_Ptr(*)(struct _Unwind_Context *))ip;
	G.get_cfa = (_Unwind_Word(*)(struct _Unwind_Context *))cfa;
	G.rules = how != HU_GCC;
	if (how == HU_CHECK) {
		const char *log = getenv("FENNEC_HEAP_UNWIND_LOG");
		G.log = log ? fopen(log, "ae") : NULL;
		if (!G.log)
			G.log = stderr;
		setvbuf(G.log, NULL, _IOLBF, 0);
		G.check = 1;
		atexit(heap_unwind_report);
	}
	__atomic_store_n(&G.backtrace, (_Unwind_Reason_Code(*)(_Unwind_Trace_Fn, void *))bt, __ATOMIC_RELEASE);
}
#endif

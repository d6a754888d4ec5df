/*
 * samples_symbols.c - the symbolisation of one process's sampled stacks, run by
 * ana_samples_finish() (samples.c): each distinct address of each module epoch is looked up
 * once (src/symbol/, perf maps for JIT code), into locations, functions and stacks shared by
 * the whole recording; fennec's own frames are folded into one, Python frames are merged
 * into the native stack where the interpreter ran them, and modules without symbols are
 * counted for the finish's warnings. Design notes: docs/internals/symbol.md.
 */
#include "analyze/aggregate.h"
#include "symbol/symbol.h"

#include <stdio.h>
#include <stdlib.h>

#include "analyze/samples.h"

/* ---- symbolisation, per process ---- */

/* A loaded segment of an effective module of one epoch. */
typedef struct seg {
	uint64_t start, end;
	uint32_t mod;         /* index into the file's modules */
} seg;

static int cmp_seg(const void *a, const void *b)
{
	const seg *x = a, *y = b;
	return (x->start > y->start) - (x->start < y->start);
}

/* The segments of the modules known at the end of an epoch, each replaced module left out,
 * sorted; *out is non-NULL on success. */
static int epoch_segments(const fmt_file *f, size_t known, seg **out, size_t *nout)
{
	size_t n = 0, cap = 0;
	seg *v = NULL;
	for (size_t i = 0; i < known; i++) {
		int replaced = 0;
		for (size_t j = i + 1; j < known && !replaced; j++)
			replaced = mods_overlap(&f->modules[i], &f->modules[j]);
		if (replaced)
			continue;
		for (uint32_t k = 0; k < f->modules[i].nsegs; k++) {
			if (ana_grow(&v, &cap, n, sizeof *v) < 0) {
				free(v);
				return FENNEC_ENOMEM;
			}
			v[n++] = (seg){f->modules[i].segs[k].start, f->modules[i].segs[k].end, (uint32_t)i};
		}
	}
	if (!v && !(v = malloc(sizeof *v))) /* no modules: an empty table, still non-NULL */
		return FENNEC_ENOMEM;
	if (n > 1)
		qsort(v, n, sizeof *v, cmp_seg);
	*out = v;
	*nout = n;
	return 0;
}

static uint32_t seg_find(const seg *v, size_t n, uint64_t addr)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && addr < v[lo - 1].end ? v[lo - 1].mod : ANA_NONE;
}

static uint32_t func_for(fin *x, uint32_t name, uint32_t module, uint32_t file, uint32_t line)
{
	ana_sampling *s = &x->p->smp;
	uint64_t h = cm_mix64((uint64_t)name << 32 | module);
	if (itab_reserve(&x->ftab) < 0)
		return ANA_NONE;
	size_t i = h & (x->ftab.cap - 1);
	for (; x->ftab.id[i] != UINT32_MAX; i = (i + 1) & (x->ftab.cap - 1)) {
		ana_func *fn = &s->funcs[x->ftab.id[i]];
		if (fn->name == name && fn->module == module)
			return x->ftab.id[i];
	}
	size_t cap = s->funcs_cap;
	if (s->nfuncs == UINT32_MAX - 1 || ana_grow(&s->funcs, &cap, s->nfuncs, sizeof *s->funcs) < 0)
		return ANA_NONE;
	s->funcs_cap = (uint32_t)(cap < UINT32_MAX ? cap : UINT32_MAX);
	uint32_t id = s->nfuncs++;
	s->funcs[id] = (ana_func){.name = name, .module = module, .file = file, .line = line};
	x->ftab.id[i] = id;
	x->ftab.h[i] = h;
	x->ftab.n++;
	return id;
}

static uint32_t new_loc(fin *x, uint32_t func, uint32_t file, uint32_t line, uint32_t proc, uint64_t addr,
			uint64_t rel, int inlined)
{
	ana_sampling *s = &x->p->smp;
	size_t cap = s->locs_cap;
	if (func == ANA_NONE || s->nlocs == UINT32_MAX - 1 || ana_grow(&s->locs, &cap, s->nlocs, sizeof *s->locs) < 0)
		return ANA_NONE;
	s->locs_cap = (uint32_t)(cap < UINT32_MAX ? cap : UINT32_MAX);
	s->locs[s->nlocs] = (ana_loc){func, file, line, proc, addr, rel, inlined};
	return s->nlocs++;
}

/* Whether a module is the system's (the C library, libgcc, libstdc++, the vDSO, the
 * kernel): code that fennec's own work calls into as much as the program does. */
int ana_module_is_system(const char *path)
{
	return path[0] == '[' || !strncmp(path, "/lib/", 5) || !strncmp(path, "/lib64/", 7) ||
	       !strncmp(path, "/usr/lib/", 9) || !strncmp(path, "/usr/lib64/", 11);
}

/* A name with the C library's decorations taken off: leading underscores and a libc_
 * prefix (__libc_malloc, ___dlopen, __posix_memalign are malloc, dlopen, posix_memalign). */
static const char *plain_name(const char *s)
{
	while (*s == '_')
		s++;
	if (!strncmp(s, "libc_", 5))
		for (s += 5; *s == '_'; s++)
			;
	return s;
}

/*
 * Whether library function `callee`, called from fennec's wrapper function `wrapper`, is
 * the call the wrapper forwards (the real malloc under fennec's malloc, glibc's
 * __pthread_create_2_1 under its pthread_create): the program's work, not fennec's. The
 * paths of a wrapper are named after the function it wraps (malloc_slow, free_marked),
 * and the wrapper itself is often gone from the stack, reached by a tail call.
 */
static int forwarded_call(const char *callee, const char *wrapper)
{
	const char *a = plain_name(callee), *b = plain_name(wrapper);
	size_t n = strlen(a), m = strlen(b);
	if (n && !strncmp(a, b, n) && (!b[n] || b[n] == '_'))
		return 1;
	return m && !strncmp(a, b, m) && a[m] == '_' && a[m + 1] >= '0' && a[m + 1] <= '9'; /* a version */
}

/*
 * fennec's own work out of the program's stack (x->tmp, nl locations innermost first). The
 * innermost run of libfennec frames is entered at its outermost frame, the entry: the
 * wrapper or API function the program called (malloc, fennec_region_begin), or the
 * trampoline that starts a thread. A sample is fennec's own when its innermost frame is in
 * libfennec, or in a system library that fennec's frames call for their own work (the
 * unwinder's _Unwind_Find_FDE under the stack cache; a clock read) while program code
 * lies further out. Its frames up to the entry become one location, [fennec], so that
 * fennec's functions (col_site_id, alloc_slow, record_alloc) are one entry of the
 * profile, below the program's function whose call paid for them (the entry itself is
 * often gone from the stack: malloc reaches malloc_slow by a tail call). What the wrapper forwards (glibc's
 * malloc under fennec's) and what the trampoline or a signal chain calls back (the
 * thread's function, the program's handler) stay the program's. Further-out fennec frames
 * (the trampoline below every thread's function, the pthread_create and exec wrappers the
 * program's calls pass through) are dropped. Returns the new length, SIZE_MAX when out of memory.
 */
static size_t fold_fennec(fin *x, size_t nl, uint32_t proc)
{
	ana_profile *p = x->p;
	const ana_sampling *s = &p->smp;
	size_t a = 0, b;
	int ours = 1;
#define MOD_OF(i) (p->names[s->funcs[s->locs[x->tmp[i]].func].module])
	while (a < nl && !ana_module_is_fennec(MOD_OF(a)))
		a++;
	if (a == nl)
		return nl;
	for (b = a; b < nl && ana_module_is_fennec(MOD_OF(b)); b++)
		;
	const ana_func *entry = &s->funcs[s->locs[x->tmp[b - 1]].func];
	if (a) {
		const ana_func *callee = &s->funcs[s->locs[x->tmp[a - 1]].func];
		int program_outside = 0;
		for (size_t i = b; i < nl && !program_outside; i++)
			program_outside = !ana_module_is_fennec(MOD_OF(i)) && !ana_module_is_system(MOD_OF(i));
		ours = program_outside && ana_module_is_system(p->names[callee->module]);
		for (size_t i = a; i < b && ours; i++)
			ours = !forwarded_call(p->names[callee->name], p->names[s->funcs[s->locs[x->tmp[i]].func].name]);
	}
	size_t k = a;
	if (ours) {
		if (x->fennec_loc == ANA_NONE) {
			uint32_t nm = ana_intern(p, "[fennec]");
			uint32_t fn = nm == ANA_NONE ? ANA_NONE : func_for(x, nm, entry->module, ANA_NONE, 0);
			if ((x->fennec_loc = new_loc(x, fn, ANA_NONE, 0, proc, 0, 0, 0)) == ANA_NONE)
				return SIZE_MAX;
		}
		x->tmp[0] = x->fennec_loc;
		k = 1;
	}
	for (size_t i = b; i < nl; i++)
		if (!ana_module_is_fennec(MOD_OF(i)))
			x->tmp[k++] = x->tmp[i];
#undef MOD_OF
	return k;
}

static uint32_t stack_for(fin *x, const uint32_t *locs, uint32_t n, int truncated)
{
	ana_sampling *s = &x->p->smp;
	uint64_t h = 0x51ed270b27u ^ (uint64_t)truncated;
	for (uint32_t i = 0; i < n; i++)
		h = cm_mix64(h ^ locs[i]) + i;
	if (itab_reserve(&x->stab) < 0)
		return ANA_NONE;
	size_t i = h & (x->stab.cap - 1);
	for (; x->stab.id[i] != UINT32_MAX; i = (i + 1) & (x->stab.cap - 1)) {
		const ana_stack *st = &s->stacks[x->stab.id[i]];
		if (x->stab.h[i] == h && st->n == n && st->truncated == truncated &&
		    (!n || !memcmp(st->locs, locs, n * sizeof *locs)))
			return x->stab.id[i];
	}
	size_t cap = s->stacks_cap;
	if (s->nstacks == UINT32_MAX - 1 || ana_grow(&s->stacks, &cap, s->nstacks, sizeof *s->stacks) < 0)
		return ANA_NONE;
	s->stacks_cap = (uint32_t)(cap < UINT32_MAX ? cap : UINT32_MAX);
	uint32_t *copy = malloc((n ? n : 1) * sizeof *copy);
	if (!copy)
		return ANA_NONE;
	if (n) /* a sample with no frames: locs may be NULL (nothing put in the buffer yet) */
		memcpy(copy, locs, n * sizeof *locs);
	uint32_t id = s->nstacks++;
	s->stacks[id] = (ana_stack){copy, n, truncated};
	x->stab.id[i] = id;
	x->stab.h[i] = h;
	x->stab.n++;
	return id;
}

/* Per-module bookkeeping of one process. */
typedef struct pmod {
	uint32_t sym;         /* symboliser handle, ANA_NONE until used */
	uint32_t ana;         /* index into smp.modules, ANA_NONE until used */
	uint32_t name;        /* names index of its path */
	uint64_t stamp;       /* last raw stack counted in `samples` + 1 */
	uint64_t samples;     /* samples with a frame in it */
} pmod;

static uint32_t ana_module_for(ana_profile *p, uint32_t proc, uint32_t path, int status)
{
	ana_sampling *s = &p->smp;
	size_t cap = s->modules_cap;
	if (ana_grow(&s->modules, &cap, s->nmodules, sizeof *s->modules) < 0)
		return ANA_NONE;
	s->modules_cap = (uint32_t)cap;
	s->modules[s->nmodules] = (ana_module){proc, path, 0, status};
	return s->nmodules++;
}

/* The locations of one address of one module, chained per address. */
typedef struct acache {
	uint32_t mod;         /* index into the file's modules, ANA_NONE: none */
	int exact;
	uint32_t first, n;    /* locs [first, first + n) */
	uint64_t next;        /* next entry of the same address + 1, 0: none */
} acache;

static int ld_so(const char *path)
{
	const char *b = strrchr(path, '/');
	return !strncmp(b ? b + 1 : path, "ld-linux", 8);
}

/* Whether the frame at `i` of a stack (locs innermost first) is the dynamic loader's, called
 * by the interpreter itself (its thread-local lookups, __tls_get_addr): the loader's frames
 * and then the interpreter's. A loader reached through libc (dlopen under an import) is
 * the loader's own work, and stays. */
static int called_by_interp(const ana_profile *p, const uint32_t *locs, size_t i, size_t n, uint32_t interp)
{
	for (; i < n; i++) {
		uint32_t mod = p->smp.funcs[p->smp.locs[locs[i]].func].module;
		if (mod == interp)
			return 1;
		if (mod == ANA_NONE || !ld_so(p->names[mod]))
			return 0;
	}
	return 0;
}

/* The location of a tagged Python frame of process proc. */
static uint32_t py_loc(fin *x, uint32_t proc, const fmt_file *f, kmap *cache, uint64_t v)
{
	ana_profile *p = x->p;
	uint64_t key = v & ~(1ull << 55);
	int isnew = 0;
	uint64_t *slot = kmap_slot(cache, key, &isnew);
	if (!slot)
		return ANA_NONE;
	if (!isnew && *slot)
		return (uint32_t)(*slot - 1);
	uint32_t code = (uint32_t)(v >> 24) & 0x7fffffffu, line = (uint32_t)(v & 0xffffff);
	const fmt_pycode *pc = fmt_pycode_get(f, code);
	char unk[48];
	snprintf(unk, sizeof unk, "<python code %u>", code);
	const char *qn = pc && pc->qualname && *pc->qualname ? pc->qualname : unk;
	const char *fn = pc && pc->filename && *pc->filename ? pc->filename : "<unknown>";
	uint32_t nm = ana_intern(p, qn), file = ana_intern(p, fn);
	if (nm == ANA_NONE || file == ANA_NONE)
		return ANA_NONE;
	uint32_t fid = func_for(x, nm, file, file, pc ? pc->firstlineno : 0);
	if (fid == ANA_NONE)
		return ANA_NONE;
	p->smp.funcs[fid].lang = ANA_LANG_PYTHON;
	uint32_t l = new_loc(x, fid, file, line, proc, key, 0, 0);
	if (l != ANA_NONE)
		*slot = (uint64_t)l + 1;
	return l;
}

/*
 * Put a sample's Python frames (py, n, innermost first) into its native stack (x->tmp,
 * *nl locations innermost first): each run of Python frames that one interpreter loop
 * ran (up to and with a frame marked entry) takes the place of that loop's
 * _PyEval_EvalFrameDefault frame, the k-th run from the inside the k-th such frame; runs
 * beyond the outermost loop go with it. Without opt.native, the interpreter's other C
 * frames (those of the module the loop is in) fold into the Python frame that runs them,
 * and the native frames outside the outermost Python frame (the thread's start) go.
 */
/* The pseudo-function that stands for the interpreter's wait for the GIL, per process. */
static uint32_t gil_loc(fin *x, uint32_t proc, kmap *cache)
{
	ana_profile *p = x->p;
	uint64_t *slot = kmap_slot(cache, PY_TAG | 0x00ffffffffffffffull, NULL);
	if (!slot)
		return ANA_NONE;
	if (*slot)
		return (uint32_t)(*slot - 1);
	uint32_t nm = ana_intern(p, ANA_GIL_WAIT), mod = ana_intern(p, "[python]");
	if (nm == ANA_NONE || mod == ANA_NONE)
		return ANA_NONE;
	uint32_t fid = func_for(x, nm, mod, ANA_NONE, 0);
	if (fid == ANA_NONE)
		return ANA_NONE;
	p->smp.funcs[fid].lang = ANA_LANG_PYTHON;
	uint32_t l = new_loc(x, fid, ANA_NONE, 0, proc, 0, 0, 0);
	if (l != ANA_NONE)
		*slot = (uint64_t)l + 1;
	return l;
}

static int py_merge(fin *x, uint32_t proc, const fmt_file *f, const uint64_t *py, uint32_t n, size_t *nl,
		    kmap *cache, uint64_t count, unsigned flags)
{
	ana_profile *p = x->p;
	if (!n)
		return 0;
	if (x->eval_name == ANA_NONE && (x->eval_name = ana_intern(p, "_PyEval_EvalFrameDefault")) == ANA_NONE)
		return -1;
	/* CPython 3.12+ run with -X perf calls each Python function through a trampoline of
	 * its own, named "py::qualname:file" in the perf map: the Python frame read from the
	 * interpreter says the same, so the trampoline goes, in --native too (it would be a
	 * second, self-less frame of each Python call). */
	size_t kept = 0;
	for (size_t i = 0; i < *nl; i++) {
		const ana_func *fn = &p->smp.funcs[p->smp.locs[x->tmp[i]].func];
		const char *mod = fn->module != ANA_NONE ? p->names[fn->module] : "";
		size_t ml = strlen(mod);
		if (!strncmp(p->names[fn->name], "py::", 4) && ml > 4 && !strcmp(mod + ml - 4, ".map") &&
		    strstr(mod, "perf-"))
			continue;
		x->tmp[kept++] = x->tmp[i];
	}
	*nl = kept;
	uint32_t interp = ANA_NONE, evals = 0;
	for (size_t i = 0; i < *nl; i++) {
		const ana_func *fn = &p->smp.funcs[p->smp.locs[x->tmp[i]].func];
		if (fn->name == x->eval_name) {
			interp = fn->module;
			evals++;
		}
	}
	/* A thread without the GIL inside the interpreter's take_gil waits for it: its leaf
	 * frames (the condition variable's wait, the futex) become one [waiting for the GIL].
	 * An interpreter without its static symbols (Debian's python3.11 is stripped to its
	 * dynamic ones: take_gil is "python3.11+0x4f92c0") is known by its wait instead: the
	 * first frame of the interpreter, unnamed, right above libc's pthread_cond_timedwait,
	 * which only take_gil calls there (sleeps, I/O and threading's locks wait in
	 * clock_nanosleep, read, select and sem_clockwait). */
	if (!(flags & FMT_S_GIL) && !p->opt.native) {
		if (x->take_gil == ANA_NONE && (x->take_gil = ana_intern(p, "take_gil")) == ANA_NONE)
			return -1;
		int cond_wait = 0;
		for (size_t i = 0; i < *nl; i++) {
			const ana_func *fn = &p->smp.funcs[p->smp.locs[x->tmp[i]].func];
			const char *nm = p->names[fn->name];
			int unnamed_wait = 0;
			if (interp != ANA_NONE && fn->module == interp) {
				unnamed_wait = cond_wait == 1 && strstr(nm, "+0x") != NULL;
				cond_wait = -1; /* the first interpreter frame decides */
			} else if (cond_wait >= 0 && strstr(nm, "pthread_cond_timedwait")) {
				cond_wait = 1;
			}
			if (fn->name == x->take_gil || !strncmp(nm, "take_gil.", 9) || unnamed_wait) {
				uint32_t g = gil_loc(x, proc, cache);
				if (g == ANA_NONE)
					return -1;
				x->tmp[i] = g;
				memmove(x->tmp, x->tmp + i, (*nl - i) * sizeof *x->tmp);
				*nl -= i;
				p->smp.py_gil_wait += count;
				break;
			}
		}
	}
	if (ana_grow(&x->py, &x->py_cap, n, sizeof *x->py) < 0)
		return -1;
	for (uint32_t i = 0; i < n; i++)
		if ((x->py[i] = py_loc(x, proc, f, cache, py[i])) == ANA_NONE)
			return -1;
	/* the result, built in a copy */
	size_t cap = *nl + n + 1;
	uint32_t *out = malloc(cap * sizeof *out);
	if (!out)
		return -1;
	size_t k = 0, at = 0; /* at: next Python frame */
	uint32_t seen = 0;
	size_t last_py = SIZE_MAX;
	for (size_t i = 0; i < *nl; i++) {
		uint32_t loc = x->tmp[i];
		const ana_func *fn = &p->smp.funcs[p->smp.locs[loc].func];
		if (fn->name == x->eval_name) {
			seen++;
			size_t before = at;
			/* this loop's run: to the next entry mark; the outermost loop takes the rest */
			while (at < n) {
				int entry = (py[at] >> 55) & 1;
				out[k++] = x->py[at++];
				last_py = k;
				if (entry && seen < evals)
					break;
			}
			if (p->opt.native && at == before)
				out[k++] = loc;
			continue;
		}
		if (!p->opt.native && interp != ANA_NONE && (fn->module == interp || called_by_interp(p, x->tmp, i, *nl, interp)))
			continue; /* the interpreter, and the dynamic loader's code it calls itself (TLS lookups) */
		out[k++] = loc;
	}
	if (at < n) {
		/* no interpreter loop to stand in for (an interpreter without symbols): outermost */
		p->smp.py_unplaced += count;
		while (at < n)
			out[k++] = x->py[at++];
		last_py = k;
	}
	if (!p->opt.native && last_py != SIZE_MAX)
		k = last_py;
	if (ana_grow(&x->tmp, &x->tmp_cap, k, sizeof *x->tmp) < 0) {
		free(out);
		return -1;
	}
	memcpy(x->tmp, out, k * sizeof *out);
	*nl = k;
	free(out);
	return 0;
}

int symbolise_process(fin *x, uint32_t proc, pstate *ps, badmod **bad, size_t *nbad, size_t *bad_cap)
{
	ana_profile *p = x->p;
	const fmt_file *f = &p->procs[proc].file;
	int rc = FENNEC_ENOMEM;
	x->fennec_loc = ANA_NONE;
	pmod *pm = calloc(f->nmodules + 1, sizeof *pm);
	seg **segs = calloc(ps->epoch + 1, sizeof *segs);
	size_t *nsegs = calloc(ps->epoch + 1, sizeof *nsegs);
	kmap addr_idx = {0};    /* address -> first cache entry + 1 */
	kmap py_locs = {0};     /* Python frame (tagged, without the entry mark) -> location + 1 */
	acache *ac = NULL;      /* entries, chained per address */
	size_t nac = 0, ac_cap = 0;
	uint32_t perf_sym = ANA_NONE, perf_ana = ANA_NONE, perf_path = ANA_NONE, unk_ana = ANA_NONE;
	if (!pm || !segs || !nsegs)
		goto out;
	for (size_t i = 0; i < f->nmodules; i++) {
		pm[i].sym = pm[i].ana = pm[i].name = ANA_NONE;
	}
	for (uint32_t sid = 0; sid < ps->nst; sid++) {
		rstack *r = &ps->st[sid];
		uint32_t e = r->epoch;
		if (!segs[e]) {
			size_t known = e < ps->nepochs ? ps->epoch_end[e] : f->nmodules;
			if (epoch_segments(f, known, &segs[e], &nsegs[e]))
				goto out;
		}
		size_t nl = 0;
		uint32_t nnat = r->n;
		while (nnat && is_py(ps->frames[r->off + nnat - 1]))
			nnat--;
		for (uint32_t k = 0; k < nnat; k++) {
			uint64_t addr = ps->frames[r->off + k];
			int exact = k == 0 && (r->flags & FMT_S_EXACT_PC);
			uint32_t mi = seg_find(segs[e], nsegs[e], addr);
			/* the address's locations, cached per (module, address, exact) */
			uint64_t *head = kmap_slot(&addr_idx, addr, NULL);
			if (!head)
				goto out;
			uint32_t first = ANA_NONE, cnt = 0;
			uint64_t e_at = *head;
			while (e_at && (ac[e_at - 1].mod != mi || ac[e_at - 1].exact != exact))
				e_at = ac[e_at - 1].next;
			if (e_at) {
				first = ac[e_at - 1].first;
				cnt = ac[e_at - 1].n;
			} else {
				const sym_frame *fr = NULL;
				uint32_t nfr = 0;
				uint32_t modname = ANA_NONE;
				uint64_t rel = addr;
				if (mi != ANA_NONE) {
					const fmt_module *fm = &f->modules[mi];
					if (pm[mi].sym == ANA_NONE && sym_add_module(x->sym, fm, &pm[mi].sym))
						goto out;
					if (sym_lookup(x->sym, pm[mi].sym, addr, exact, &fr, &nfr))
						goto out;
					if (pm[mi].name == ANA_NONE && (pm[mi].name = ana_intern(p, fm->path ? fm->path : "")) == ANA_NONE)
						goto out;
					if (pm[mi].ana == ANA_NONE &&
					    (pm[mi].ana = ana_module_for(p, proc, pm[mi].name, sym_module_status(x->sym, pm[mi].sym))) == ANA_NONE)
						goto out;
					modname = pm[mi].name;
					rel = addr - fm->bias;
				} else if (addr < 0xffff800000000000ull) {
					if (perf_sym == ANA_NONE) {
						uint64_t since = f->start_real_ns > 5000000000ull ? f->start_real_ns - 5000000000ull : 0;
						if (sym_add_perf_map(x->sym, f->pid, since, &perf_sym))
							goto out;
					}
					if (sym_lookup(x->sym, perf_sym, addr, exact, &fr, &nfr))
						goto out;
					if (nfr) {
						if (perf_path == ANA_NONE &&
						    (perf_path = ana_intern(p, sym_module_path(x->sym, perf_sym))) == ANA_NONE)
							goto out;
						if (perf_ana == ANA_NONE && (perf_ana = ana_module_for(p, proc, perf_path, SYM_OK)) == ANA_NONE)
							goto out;
						modname = perf_path;
					}
				}
				if (!nfr) {
					/* In no module: [unknown], or the kernel (samples taken in a system call
					 * with kernel call chains). */
					int kernel = addr >= 0xffff800000000000ull;
					uint32_t *fid = kernel ? &x->kernel_func : &x->unknown_func;
					if (*fid == ANA_NONE) {
						uint32_t nm = ana_intern(p, kernel ? "[kernel]" : "[unknown]");
						if (nm == ANA_NONE || (*fid = func_for(x, nm, nm, ANA_NONE, 0)) == ANA_NONE)
							goto out;
					}
					if (unk_ana == ANA_NONE && !kernel &&
					    (unk_ana = ana_module_for(p, proc, p->smp.funcs[*fid].module, SYM_MISSING)) == ANA_NONE)
						goto out;
					if (!kernel)
						p->smp.unknown_frames += r->count;
					first = new_loc(x, *fid, ANA_NONE, 0, proc, addr, addr, 0);
					if (first == ANA_NONE)
						goto out;
					cnt = 1;
				} else {
					for (uint32_t i = 0; i < nfr; i++) {
						uint32_t nm = ana_intern(p, fr[i].func);
						uint32_t file = fr[i].file ? ana_intern(p, fr[i].file) : ANA_NONE;
						if (nm == ANA_NONE || (fr[i].file && file == ANA_NONE))
							goto out;
						uint32_t fn = func_for(x, nm, modname, file, fr[i].line);
						uint32_t l = new_loc(x, fn, file, fr[i].line, proc, addr, rel, fr[i].inlined);
						if (l == ANA_NONE)
							goto out;
						if (!i)
							first = l;
					}
					cnt = nfr;
				}
				if (ana_grow(&ac, &ac_cap, nac, sizeof *ac) < 0)
					goto out;
				ac[nac] = (acache){mi, exact, first, cnt, *head};
				*head = ++nac;
			}
			/* module accounting: frames, and samples with a frame in the module */
			if (mi != ANA_NONE) {
				p->smp.modules[pm[mi].ana].samples += r->count;
				if (pm[mi].stamp != (uint64_t)sid + 1) {
					pm[mi].stamp = (uint64_t)sid + 1;
					pm[mi].samples += r->count;
				}
			} else if (unk_ana != ANA_NONE && p->smp.locs[first].func == x->unknown_func) {
				p->smp.modules[unk_ana].samples += r->count;
			} else if (perf_ana != ANA_NONE && p->smp.locs[first].func != x->kernel_func) {
				p->smp.modules[perf_ana].samples += r->count;
			}
			if (ana_grow(&x->tmp, &x->tmp_cap, nl + cnt, sizeof *x->tmp) < 0)
				goto out;
			for (uint32_t i = 0; i < cnt; i++)
				x->tmp[nl++] = first + i;
		}
		nl = fold_fennec(x, nl, proc);
		if (nl == SIZE_MAX)
			goto out;
		if (r->flags & FMT_S_PYTHON) {
			if (py_merge(x, proc, f, ps->frames + r->off + nnat, r->n - nnat, &nl, &py_locs, r->count, r->flags) < 0)
				goto out;
		}
		/* innermost first -> outermost first */
		for (size_t a = 0, b = nl ? nl - 1 : 0; a < b; a++, b--) {
			uint32_t t = x->tmp[a];
			x->tmp[a] = x->tmp[b];
			x->tmp[b] = t;
		}
		if (nl > UINT32_MAX)
			goto out;
		r->stack = stack_for(x, x->tmp, (uint32_t)nl, !!(r->flags & FMT_S_TRUNCATED));
		if (r->stack == ANA_NONE)
			goto out;
	}
	/* Modules that could not be read, for the warnings. */
	for (size_t i = 0; i < f->nmodules; i++) {
		if (pm[i].ana == ANA_NONE || p->smp.modules[pm[i].ana].status == SYM_OK)
			continue;
		const char *path = p->names[pm[i].name];
		if (path[0] == '[')
			continue; /* [vdso] and the like: no file to read, nothing to fix */
		size_t k = 0;
		while (k < *nbad && (*bad)[k].path != pm[i].name)
			k++;
		if (k == *nbad) {
			if (ana_grow(bad, bad_cap, k, sizeof **bad) < 0)
				goto out;
			(*bad)[k] = (badmod){pm[i].name, p->smp.modules[pm[i].ana].status, 0};
			(*nbad)++;
		}
		(*bad)[k].samples += pm[i].samples;
	}
	rc = 0;
out:
	if (segs)
		for (uint32_t e = 0; e <= ps->epoch; e++)
			free(segs[e]);
	free(segs);
	free(nsegs);
	free(pm);
	kmap_free(&addr_idx);
	kmap_free(&py_locs);
	free(ac);
	return rc;
}

/*
 * samples.h - what the files of the sample aggregator share (src/analyze/samples*.c): the
 * containers (kmap, itab), the raw samples kept per process while the reader streams a file
 * (pstate), the state of the finish (fin) and the per-process symbolisation that the finish
 * runs. samples.c takes the samples in and finishes them, samples_symbols.c symbolises a
 * process's stacks, samples_views.c aggregates the views (hot functions and lines, the call
 * tree). Only they include it.
 */
#ifndef FENNEC_ANALYZE_SAMPLES_H
#define FENNEC_ANALYZE_SAMPLES_H

#include <stdlib.h>
#include <string.h>

#include "analyze/aggregate.h"
#include "symbol/symbol.h"

/* Short names for what the files share; the symbols are prefixed (libfennec-analysis.a is
 * linked into programs beside their own names). Macros: include this header last. */
#define symbolise_process ana_smp_symbolise_process

/* ---- containers ---- */

/* Map from a 64-bit key to a 64-bit value, open addressing. */
typedef struct kmap {
	uint64_t *key, *val;
	uint8_t *used;
	size_t cap, n;
} kmap;

static inline void kmap_free(kmap *m)
{
	free(m->key);
	free(m->val);
	free(m->used);
	memset(m, 0, sizeof *m);
}

/* The slot of `key`, inserted (value 0) if absent; NULL on allocation failure. */
static inline uint64_t *kmap_slot(kmap *m, uint64_t key, int *isnew)
{
	if ((m->n + 1) * 2 > m->cap) {
		size_t cap = m->cap ? m->cap * 2 : 256;
		kmap nm = {malloc(cap * 8), malloc(cap * 8), calloc(cap, 1), cap, 0};
		if (!nm.key || !nm.val || !nm.used) {
			kmap_free(&nm);
			return NULL;
		}
		for (size_t i = 0; i < m->cap; i++) {
			if (!m->used[i])
				continue;
			size_t j = cm_mix64(m->key[i]) & (cap - 1);
			while (nm.used[j])
				j = (j + 1) & (cap - 1);
			nm.used[j] = 1;
			nm.key[j] = m->key[i];
			nm.val[j] = m->val[i];
		}
		nm.n = m->n;
		kmap_free(m);
		*m = nm;
	}
	size_t i = cm_mix64(key) & (m->cap - 1);
	for (; m->used[i]; i = (i + 1) & (m->cap - 1))
		if (m->key[i] == key) {
			if (isnew)
				*isnew = 0;
			return &m->val[i];
		}
	m->used[i] = 1;
	m->key[i] = key;
	m->val[i] = 0;
	m->n++;
	if (isnew)
		*isnew = 1;
	return &m->val[i];
}

/* Interning of variable-length sequences: hash -> candidate ids, compared by the caller. */
typedef struct itab {
	uint32_t *id;         /* UINT32_MAX: empty */
	uint64_t *h;
	size_t cap, n;
} itab;

static inline void itab_free(itab *t)
{
	free(t->id);
	free(t->h);
	memset(t, 0, sizeof *t);
}

static inline int itab_reserve(itab *t)
{
	if ((t->n + 1) * 2 <= t->cap)
		return 0;
	size_t cap = t->cap ? t->cap * 2 : 1024;
	uint32_t *id = malloc(cap * sizeof *id);
	uint64_t *h = malloc(cap * sizeof *h);
	if (!id || !h) {
		free(id);
		free(h);
		return -1;
	}
	memset(id, 0xff, cap * sizeof *id);
	for (size_t i = 0; i < t->cap; i++) {
		if (t->id[i] == UINT32_MAX)
			continue;
		size_t j = t->h[i] & (cap - 1);
		while (id[j] != UINT32_MAX)
			j = (j + 1) & (cap - 1);
		id[j] = t->id[i];
		h[j] = t->h[i];
	}
	free(t->id);
	free(t->h);
	t->id = id;
	t->h = h;
	t->cap = cap;
	return 0;
}

/* ---- raw samples, kept while reading ---- */

typedef struct rstack {
	size_t off;           /* into pstate.frames */
	uint32_t n;
	uint32_t epoch;       /* module epoch of its samples (see below) */
	uint8_t flags;        /* FMT_S_EXACT_PC | FMT_S_TRUNCATED | FMT_S_PYTHON | FMT_S_GIL | FMT_S_PYCUT */
	uint32_t stack;       /* ana stack, once symbolised */
	uint64_t count;       /* samples */
} rstack;

typedef struct rpath {
	size_t off;           /* into pstate.sites */
	uint32_t n;
	uint32_t node;
} rpath;

typedef struct rsample {
	uint64_t ticks, tid, step;
	uint32_t stack, path; /* rstack, rpath (ANA_NONE: outside regions) */
	uint32_t weight;
	uint8_t kind;
	uint8_t kernel;       /* FMT_S_KERNEL: taken in the kernel */
} rsample;

/*
 * Module epochs. A MODULES record whose range overlaps an earlier one replaces it
 * (dlclose, then another dlopen at the same address). Samples are decoded in file order,
 * and every module a sample needs is recorded before it, so a sample decoded when the
 * file had m modules resolves against modules [0, m), the newest covering an address
 * winning. An epoch is a run of samples between two such replacements; a raw stack is
 * interned per epoch, and resolves against the modules known at the epoch's end.
 */
typedef struct pstate {
	rsample *s;
	size_t ns, s_cap;
	rstack *st;
	size_t nst, st_cap;
	uint64_t *frames;
	size_t nframes, frames_cap;
	itab stab;
	rpath *rp;
	size_t nrp, rp_cap;
	uint32_t *sites;
	size_t nsites, sites_cap;
	itab ptab;
	size_t nmods_seen;
	uint32_t epoch;
	size_t *epoch_end;    /* modules known at the end of each closed epoch */
	size_t nepochs, epoch_cap;
} pstate;

/*
 * A Python frame in a raw stack: 0xfd in the top byte (no user or kernel address has it),
 * bit 55 the entry mark, bits 24-54 the code id, bits 0-23 the line.
 */
#define PY_TAG 0xfd00000000000000ull
static inline int is_py(uint64_t a) { return (a >> 56) == 0xfd; }

/* Whether two modules' loaded segments overlap: the later replaces the earlier (an epoch
 * ends). */
static inline int mods_overlap(const fmt_module *a, const fmt_module *b)
{
	if (a->hi <= b->lo || b->hi <= a->lo)
		return 0;
	for (uint32_t i = 0; i < a->nsegs; i++)
		for (uint32_t k = 0; k < b->nsegs; k++)
			if (a->segs[i].start < b->segs[k].end && b->segs[k].start < a->segs[i].end)
				return 1;
	return 0;
}

/* ---- the finish ---- */

typedef struct fin {
	ana_profile *p;
	sym_ctx *sym;
	uint32_t eval_name;   /* names index of "_PyEval_EvalFrameDefault" */
	uint32_t take_gil;    /* names index of "take_gil" (CPython's ceval_gil.c) */
	uint32_t *py;         /* Python locations of a stack being built */
	size_t py_cap;
	itab ftab;            /* funcs by (name, module) */
	itab stab;            /* ana stacks by locs */
	uint32_t *tmp;        /* a stack being built */
	size_t tmp_cap;
	uint32_t unknown_func, kernel_func;
	uint32_t fennec_loc;  /* the [fennec] location of the process being symbolised */
} fin;

/* Warnings about unsymbolised modules, merged over processes by path. */
typedef struct badmod {
	uint32_t path;
	int status;
	uint64_t samples;
} badmod;

/* Symbolise the raw stacks of process `proc` (ps) into the profile's locations, functions
 * and stacks (samples_symbols.c); each raw stack gets its ana stack in ps->st[].stack, and
 * the modules that could not be symbolised are added to *bad. Returns 0 or FENNEC_ENOMEM. */
int symbolise_process(fin *x, uint32_t proc, pstate *ps, badmod **bad, size_t *nbad, size_t *bad_cap);

#endif

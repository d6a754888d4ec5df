/*
 * util.c - helpers shared by the exporters (internal.h): sample selection, the pair map,
 * names, JSON quoting and the spool.
 */
#include "export/internal.h"

#include <stdlib.h>

void exp_options_init(exp_options *o)
{
	memset(o, 0, sizeof *o);
	o->kind = EXP_KIND_ALL;
}

/* ---- selection ---- */

int exp_sel_init(exp_sel *s, const ana_profile *p, const exp_options *o)
{
	memset(s, 0, sizeof *s);
	s->p = p;
	s->o = o;
	if (o->region) {
		s->node_in = calloc(p->nnodes ? p->nnodes : 1, 1);
		if (!s->node_in)
			return FENNEC_ENOMEM;
		int is_path = strchr(o->region, '/') != NULL;
		/* A node is created after its parent, so parents come first in the array. */
		for (uint32_t n = 0; n < p->nnodes; n++) {
			const ana_node *x = &p->nodes[n];
			int self = is_path ? x->path && !strcmp(x->path, o->region) : !strcmp(p->names[x->name], o->region);
			s->node_in[n] = self || (x->parent != ANA_NONE && x->parent < n && s->node_in[x->parent]);
		}
	}
	if (o->has_tid) {
		s->thread_in = calloc(p->nthreads ? p->nthreads : 1, 1);
		if (!s->thread_in)
			return FENNEC_ENOMEM;
		for (uint32_t t = 0; t < p->nthreads; t++)
			s->thread_in[t] = p->threads[t].tid == o->tid;
	}
	return 0;
}

int exp_sel_thread(const exp_sel *s, uint32_t t)
{
	if (!s->thread_in)
		return 1;
	return t < s->p->nthreads && s->thread_in[t];
}

int exp_sel_sample(const exp_sel *s, const ana_sample *x)
{
	if (s->o->kind != EXP_KIND_ALL && x->kind != s->o->kind)
		return 0;
	if (x->stack >= s->p->smp.nstacks)
		return 0;
	if (!exp_sel_thread(s, x->thread))
		return 0;
	if (s->node_in && (x->node >= s->p->nnodes || !s->node_in[x->node]))
		return 0;
	return 1;
}

void exp_sel_fini(exp_sel *s)
{
	free(s->node_in);
	free(s->thread_in);
	s->node_in = s->thread_in = NULL;
}

size_t exp_select_count(const ana_profile *p, const exp_options *o, uint64_t *weight)
{
	exp_sel s;
	size_t n = 0;
	uint64_t w = 0, b;
	if (exp_sel_init(&s, p, o) == 0) {
		for (uint32_t i = 0; o->memory && i < p->mem.nsites; i++)
			if (exp_sel_site(&s, &p->mem.sites[i]) && (b = exp_site_bytes(&p->mem.sites[i], o->memory, NULL))) {
				n++;
				w += b;
			}
		for (size_t i = 0; !o->memory && i < p->smp.nsamples; i++)
			if (exp_sel_sample(&s, &p->smp.samples[i])) {
				n++;
				w += exp_weight(&p->smp.samples[i]);
			}
	}
	exp_sel_fini(&s);
	if (weight)
		*weight = w;
	return n;
}

/* ---- map ---- */

static uint64_t mix2(uint64_t a, uint64_t b)
{
	return cm_mix64(a * 0x9e3779b97f4a7c15ull ^ (b + 0x632be59bd9b4e019ull + (a << 6) + (a >> 2)));
}

uint64_t *exp_map_get(const exp_map *m, uint64_t a, uint64_t b)
{
	if (!m->cap)
		return NULL;
	for (size_t i = mix2(a, b) & (m->cap - 1);; i = (i + 1) & (m->cap - 1)) {
		if (!m->used[i])
			return NULL;
		if (m->keys[2 * i] == a && m->keys[2 * i + 1] == b)
			return &m->vals[i];
	}
}

static int map_grow(exp_map *m)
{
	size_t cap = m->cap ? m->cap * 2 : 256;
	exp_map nm = {calloc(cap, 2 * sizeof(uint64_t)), calloc(cap, sizeof(uint64_t)), calloc(cap, 1), cap, 0};
	if (!nm.keys || !nm.vals || !nm.used) {
		exp_map_free(&nm);
		return FENNEC_ENOMEM;
	}
	for (size_t i = 0; i < m->cap; i++) {
		if (!m->used[i])
			continue;
		size_t j = mix2(m->keys[2 * i], m->keys[2 * i + 1]) & (cap - 1);
		while (nm.used[j])
			j = (j + 1) & (cap - 1);
		nm.used[j] = 1;
		nm.keys[2 * j] = m->keys[2 * i];
		nm.keys[2 * j + 1] = m->keys[2 * i + 1];
		nm.vals[j] = m->vals[i];
		nm.n++;
	}
	exp_map_free(m);
	*m = nm;
	return 0;
}

uint64_t *exp_map_put(exp_map *m, uint64_t a, uint64_t b, int *added)
{
	if (added)
		*added = 0;
	uint64_t *v = exp_map_get(m, a, b);
	if (v)
		return v;
	if ((m->n + 1) * 2 > m->cap && map_grow(m) < 0)
		return NULL;
	size_t i = mix2(a, b) & (m->cap - 1);
	while (m->used[i])
		i = (i + 1) & (m->cap - 1);
	m->used[i] = 1;
	m->keys[2 * i] = a;
	m->keys[2 * i + 1] = b;
	m->vals[i] = 0;
	m->n++;
	if (added)
		*added = 1;
	return &m->vals[i];
}

void exp_map_free(exp_map *m)
{
	if (!m)
		return;
	free(m->keys);
	free(m->vals);
	free(m->used);
	memset(m, 0, sizeof *m);
}

/* ---- names ---- */

static const char *name_at(const ana_profile *p, uint32_t i, const char *none)
{
	return i < p->nnames && p->names[i] ? p->names[i] : none;
}

const char *exp_func_name(const ana_profile *p, uint32_t func)
{
	if (func >= p->smp.nfuncs)
		return "[unknown]";
	return name_at(p, p->smp.funcs[func].name, "[unknown]");
}

const char *exp_func_module(const ana_profile *p, uint32_t func)
{
	if (func >= p->smp.nfuncs)
		return "";
	return name_at(p, p->smp.funcs[func].module, "");
}

const char *exp_thread_name(const ana_profile *p, uint32_t thread)
{
	if (thread >= p->nthreads || !p->threads[thread].name || !p->threads[thread].name[0])
		return "thread";
	return p->threads[thread].name;
}

uint64_t exp_thread_tid(const ana_profile *p, uint32_t thread)
{
	return thread < p->nthreads ? p->threads[thread].tid : 0;
}

uint64_t exp_thread_pid(const ana_profile *p, uint32_t thread)
{
	if (thread >= p->nthreads || p->threads[thread].process >= p->nprocs)
		return 0;
	return p->procs[p->threads[thread].process].file.pid;
}

uint64_t exp_t0_ns(const ana_profile *p)
{
	uint64_t t0 = 0;
	for (uint32_t i = 0; i < p->nprocs; i++)
		if (!t0 || p->procs[i].start_ns < t0)
			t0 = p->procs[i].start_ns;
	return t0;
}

/* ---- JSON ---- */

char *exp_json_quote(const char *s)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *m = open_memstream(&buf, &len);
	if (!m)
		return NULL;
	rep_json_string(m, s);
	if (fclose(m)) {
		free(buf);
		return NULL;
	}
	return buf;
}

void exp_put_us(FILE *out, uint64_t ns)
{
	/* Integer formatting: exact, and cheaper than %f for millions of events. */
	char b[32];
	int i = sizeof b;
	unsigned frac = (unsigned)(ns % 1000);
	uint64_t us = ns / 1000;
	b[--i] = (char)('0' + frac % 10);
	b[--i] = (char)('0' + frac / 10 % 10);
	b[--i] = (char)('0' + frac / 100);
	b[--i] = '.';
	do {
		b[--i] = (char)('0' + us % 10);
		us /= 10;
	} while (us);
	fwrite(b + i, 1, sizeof b - (size_t)i, out);
}

/* ---- spool ---- */

int exp_spool_init(exp_spool *s, uint32_t nkeys, size_t limit)
{
	memset(s, 0, sizeof *s);
	s->nkeys = nkeys;
	s->limit = limit;
	s->bufs = calloc(nkeys ? nkeys : 1, sizeof *s->bufs);
	s->first = malloc((nkeys ? nkeys : 1) * sizeof *s->first);
	s->last = malloc((nkeys ? nkeys : 1) * sizeof *s->last);
	if (!s->bufs || !s->first || !s->last)
		return s->failed = FENNEC_ENOMEM;
	memset(s->first, 0xff, (nkeys ? nkeys : 1) * sizeof *s->first);
	memset(s->last, 0xff, (nkeys ? nkeys : 1) * sizeof *s->last);
	return 0;
}

static void spill(exp_spool *s)
{
	if (!s->tmp && !(s->tmp = tmpfile())) {
		s->failed = FENNEC_EIO;
		return;
	}
	for (uint32_t k = 0; k < s->nkeys && !s->failed; k++) {
		cm_buf *b = &s->bufs[k];
		if (!b->len)
			continue;
		if (s->nblocks == s->blocks_cap) {
			uint32_t cap = s->blocks_cap ? s->blocks_cap * 2 : 64;
			exp_spool_block *nb = realloc(s->blocks, cap * sizeof *nb);
			if (!nb) {
				s->failed = FENNEC_ENOMEM;
				return;
			}
			s->blocks = nb;
			s->blocks_cap = cap;
		}
		if (fwrite(b->data, 1, b->len, s->tmp) != b->len) {
			s->failed = FENNEC_EIO;
			return;
		}
		uint32_t id = s->nblocks++;
		s->blocks[id] = (exp_spool_block){s->tmp_len, (uint32_t)b->len, UINT32_MAX};
		s->tmp_len += b->len;
		if (s->last[k] == UINT32_MAX)
			s->first[k] = id;
		else
			s->blocks[s->last[k]].next = id;
		s->last[k] = id;
		s->mem -= b->len;
		b->len = 0;
	}
}

void exp_spool_put(exp_spool *s, uint32_t key, const void *rec, size_t len)
{
	if (s->failed || key >= s->nkeys)
		return;
	cm_buf *b = &s->bufs[key];
	/* Blocks hold whole records and fit a uint32_t length. */
	if (b->len + len > (1u << 30))
		spill(s);
	cm_buf_put(b, rec, len);
	if (b->failed) {
		s->failed = FENNEC_ENOMEM;
		return;
	}
	s->mem += len;
	if (s->mem > s->limit)
		spill(s);
}

int exp_spool_each(exp_spool *s, uint32_t key, int (*fn)(void *ctx, const uint8_t *data, size_t len), void *ctx)
{
	if (s->failed)
		return s->failed;
	if (key >= s->nkeys)
		return 0;
	uint8_t *tmp = NULL;
	size_t tmp_cap = 0;
	int rc = 0;
	for (uint32_t id = s->first[key]; id != UINT32_MAX && !rc; id = s->blocks[id].next) {
		const exp_spool_block *bl = &s->blocks[id];
		if (bl->len > tmp_cap) {
			uint8_t *t = realloc(tmp, bl->len);
			if (!t) {
				rc = FENNEC_ENOMEM;
				break;
			}
			tmp = t;
			tmp_cap = bl->len;
		}
		if (fseeko(s->tmp, (off_t)bl->off, SEEK_SET) || fread(tmp, 1, bl->len, s->tmp) != bl->len) {
			rc = FENNEC_EIO;
			break;
		}
		rc = fn(ctx, tmp, bl->len);
	}
	free(tmp);
	if (!rc && s->bufs[key].len)
		rc = fn(ctx, s->bufs[key].data, s->bufs[key].len);
	if (!rc) {
		/* Appends to the end again after the reads. */
		if (s->tmp && fseeko(s->tmp, 0, SEEK_END))
			rc = FENNEC_EIO;
	}
	return rc;
}

void exp_spool_fini(exp_spool *s)
{
	if (s->bufs)
		for (uint32_t k = 0; k < s->nkeys; k++)
			cm_buf_free(&s->bufs[k]);
	free(s->bufs);
	free(s->first);
	free(s->last);
	free(s->blocks);
	if (s->tmp)
		fclose(s->tmp);
	memset(s, 0, sizeof *s);
}

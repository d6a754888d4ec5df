/*
 * memory.c - what the renderers share about the heap profile: the order of its sites.
 */
#include "report/report.h"

#include <stdlib.h>

typedef struct keyed {
	double key;
	uint32_t idx;
} keyed;

static int cmp_keyed(const void *a, const void *b)
{
	const keyed *x = a, *y = b;
	if (x->key != y->key)
		return (x->key < y->key) - (x->key > y->key);
	return (x->idx > y->idx) - (x->idx < y->idx);
}

uint32_t rep_mem_top(const ana_profile *p, int by, uint32_t *idx, uint32_t max)
{
	const ana_memory *m = &p->mem;
	keyed *k = malloc((m->nsites ? m->nsites : 1) * sizeof *k);
	if (!k)
		return 0;
	uint32_t n = 0;
	for (uint32_t i = 0; i < m->nsites; i++) {
		const ana_mem_site *s = &m->sites[i];
		double v = by == REP_MEM_LIVE ? (s->runtime || s->live_count < 0.5 ? 0 : s->live_bytes)
			 : by == REP_MEM_PEAK ? s->peak_bytes
			 : by == REP_MEM_TEMP ? (double)s->temporary
			 : s->bytes;
		if (v > 0.5)
			k[n++] = (keyed){v, i};
	}
	qsort(k, n, sizeof *k, cmp_keyed);
	if (n > max)
		n = max;
	for (uint32_t i = 0; i < n; i++)
		idx[i] = k[i].idx;
	free(k);
	return n;
}

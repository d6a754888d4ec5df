/*
 * memsites.c - the order of the heap profile's sites, and sites that read the same taken
 * as one: what the renderers and the rules share.
 */
#include "analyze/aggregate.h"

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

double ana_mem_measure(const ana_mem_site *s, int by, double *count)
{
	switch (by) {
	case ANA_MEM_LIVE:
	case ANA_MEM_CUT:
	case ANA_MEM_REACH: {
		int reach = by == ANA_MEM_REACH;
		double c = s->live_count, b = s->live_bytes;
		if (s->scanned) { /* the reachable part, or the rest */
			double rc = s->reach_count < c ? s->reach_count : c, rb = s->reach_bytes < b ? s->reach_bytes : b;
			c = reach ? rc : c - rc;
			b = reach ? rb : b - rb;
		} else if (reach) {
			c = b = 0;
		}
		*count = c;
		return s->runtime || s->at_exec || s->cut_short != (by == ANA_MEM_CUT) || c < 0.5 ? 0 : b;
	}
	case ANA_MEM_EXEC:
		*count = s->live_count;
		return s->at_exec && !s->runtime && s->live_count >= 0.5 ? s->live_bytes : 0;
	case ANA_MEM_PEAK:
		*count = s->peak_count;
		return s->peak_bytes;
	case ANA_MEM_TEMP:
		*count = (double)s->temporary;
		return (double)s->temporary_bytes;
	default:
		*count = s->allocs;
		return s->bytes;
	}
}

uint32_t ana_mem_top(const ana_profile *p, int by, uint32_t *idx, uint32_t max)
{
	const ana_memory *m = &p->mem;
	keyed *k = malloc((m->nsites ? m->nsites : 1) * sizeof *k);
	if (!k)
		return 0;
	uint32_t n = 0;
	for (uint32_t i = 0; i < m->nsites; i++) {
		double c, v = ana_mem_measure(&m->sites[i], by, &c);
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

/* Sites by key (a site of key 0 stands alone, keyed by its index), then process and index. */
typedef struct grouped {
	uint64_t key;
	uint32_t proc, idx;
} grouped;

static int cmp_grouped(const void *a, const void *b)
{
	const grouped *x = a, *y = b;
	if (x->key != y->key)
		return (x->key > y->key) - (x->key < y->key);
	if (x->proc != y->proc)
		return (x->proc > y->proc) - (x->proc < y->proc);
	return (x->idx > y->idx) - (x->idx < y->idx);
}

double ana_mem_measure_var(const ana_mem_site *s, int by, double *count_var)
{
	double c, b = ana_mem_measure(s, by, &c);
	*count_var = 0;
	switch (by) {
	case ANA_MEM_LIVE:
	case ANA_MEM_CUT:
	case ANA_MEM_REACH:
	case ANA_MEM_EXEC: {
		/* the measured share of the live estimate carries that share of its error */
		if (b <= 0 || s->live_bytes <= 0 || s->live_count <= 0)
			return 0;
		double ub = b / s->live_bytes, uc = c / s->live_count;
		*count_var = s->live_count_var * uc * uc;
		return s->live_bytes_var * ub * ub;
	}
	case ANA_MEM_BYTES:
		*count_var = s->allocs_var;
		return s->bytes_var;
	default:
		return 0;
	}
}

uint32_t ana_mem_rows(const ana_profile *p, int by, ana_mem_row *rows, uint32_t max,
		      uint64_t (*key)(const ana_profile *p, const ana_mem_site *s))
{
	const ana_memory *m = &p->mem;
	size_t cap = m->nsites ? m->nsites : 1;
	grouped *g = malloc(cap * sizeof *g);
	ana_mem_row *all = malloc(cap * sizeof *all);
	keyed *k = malloc(cap * sizeof *k);
	uint32_t n = 0, nr = 0;
	int ok = g && all && k;
	if (!ok)
		goto out;
	for (uint32_t i = 0; i < m->nsites; i++) {
		const ana_mem_site *s = &m->sites[i];
		double c;
		if (ana_mem_measure(s, by, &c) <= 0.5)
			continue;
		uint64_t kv = key(p, s);
		g[n++] = (grouped){kv ? kv | (uint64_t)1 << 63 : i, kv ? s->process : 0, i};
	}
	qsort(g, n, sizeof *g, cmp_grouped);
	for (uint32_t i = 0; i < n;) {
		ana_mem_row r = {.site = g[i].idx};
		uint32_t last_proc = UINT32_MAX;
		uint32_t j = i;
		for (; j < n && g[j].key == g[i].key; j++) {
			const ana_mem_site *s = &m->sites[g[j].idx];
			double c;
			double cv;
			r.bytes += ana_mem_measure(s, by, &c);
			r.count += c;
			r.bytes_var += ana_mem_measure_var(s, by, &cv);
			r.count_var += cv;
			r.sites++;
			if (s->process != last_proc) {
				r.processes++;
				last_proc = s->process;
			}
		}
		all[nr] = r;
		k[nr] = (keyed){r.bytes, nr};
		nr++;
		i = j;
	}
	qsort(k, nr, sizeof *k, cmp_keyed);
	if (nr > max)
		nr = max;
	for (uint32_t i = 0; i < nr; i++)
		rows[i] = all[k[i].idx];
out:
	free(g);
	free(all);
	free(k);
	return ok ? nr : 0;
}

uint64_t ana_mem_key(const char *const *parts, size_t n, uint32_t node)
{
	uint64_t h = 1469598103934665603ull; /* FNV-1a over the strings and their ends */
	for (size_t i = 0; i < n; i++)
		for (const char *c = parts[i];; c++) {
			h = (h ^ (uint8_t)*c) * 1099511628211ull;
			if (!*c)
				break;
		}
	return (h ^ node) * 0x9e3779b97f4a7c15ull | 1;
}

const char *ana_reach_why(uint64_t status)
{
	switch (status) {
	case FMT_REACH_DONE: return "scanned";
	case FMT_REACH_UNREADABLE: return "the process could not read its own memory (process_vm_readv refused)";
	case FMT_REACH_TIME: return "the reachability scan ran out of time (FENNEC_LEAK_SCAN_MS)";
	case FMT_REACH_NOMEM: return "the reachability scan ran out of memory";
	case FMT_REACH_OFF: return "the reachability scan was turned off (FENNEC_LEAK_SCAN_MS=0)";
	case FMT_REACH_LOST: return "allocation records were lost, so the scan could not be trusted";
	default: return "the reachability scan was not made (a newer collector's reason)";
	}
}

/*
 * util.c - the analysis' utilities, used by the model (model.c), every aggregator and the
 * rules, and (the formatting and names) by the renderers: growable arrays, the profile's
 * interned names and warnings, findings, statistics of a sample, numbers for reading. They
 * depend on nothing but the model's types, so no aggregator calls back into model.c.
 */
#include "analyze/util.h"
#include "analyze/map.h"

#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- growable arrays ---- */

int ana_grow(void *arr, size_t *cap, size_t n, size_t elem)
{
	if (n < *cap)
		return 0;
	size_t c = *cap ? *cap * 2 : 64;
	while (c <= n)
		c *= 2;
	void *a = realloc(*(void **)arr, c * elem);
	if (!a)
		return -1;
	memset((char *)a + *cap * elem, 0, (c - *cap) * elem);
	*(void **)arr = a;
	*cap = c;
	return 0;
}

/* Grow an array of `elem`-sized items so index `n` fits. */
void *ana_grow32(void *arr, uint32_t *cap, uint32_t n, size_t elem)
{
	if (n < *cap)
		return arr;
	uint32_t c = *cap ? *cap * 2 : 16;
	while (c <= n)
		c *= 2;
	void *a = realloc(arr, (size_t)c * elem);
	if (!a)
		return NULL;
	memset((char *)a + (size_t)*cap * elem, 0, (size_t)(c - *cap) * elem);
	*cap = c;
	return a;
}

/* ---- names and warnings ---- */

static uint64_t str_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	while (*s)
		h = (h ^ (uint8_t)*s++) * 1099511628211ull;
	return h;
}

void ana_warn(ana_profile *p, const char *fmt, ...)
{
	char buf[1024];
	va_list ap;
	va_start(ap, fmt);
	vsnprintf(buf, sizeof buf, fmt, ap);
	va_end(ap);
	char **w = ana_grow32(p->warnings, &p->warnings_cap, p->nwarnings, sizeof *w);
	if (!w)
		return;
	p->warnings = w;
	p->warnings[p->nwarnings] = strdup(buf);
	if (p->warnings[p->nwarnings])
		p->nwarnings++;
}

/* Intern a name; names are compared by content (hash collisions are resolved by probing
 * on hash + index). Returns ANA_NONE on allocation failure. */
uint32_t ana_intern(ana_profile *p, const char *s)
{
	ana_map *m = p->name_index;
	uint64_t h = str_hash(s);
	/* Probe h, h+1, ... in key space: each key holds one name; collisions move on. */
	for (uint64_t k = h;; k++) {
		uint32_t v = ana_map_get(m, k);
		if (v == ANA_NONE)
			break;
		if (!strcmp(p->names[v], s))
			return v;
	}
	char **n = ana_grow32(p->names, &p->names_cap, p->nnames, sizeof *n);
	if (!n)
		return ANA_NONE;
	p->names = n;
	p->names[p->nnames] = strdup(s);
	if (!p->names[p->nnames])
		return ANA_NONE;
	uint64_t k = h;
	while (ana_map_get(m, k) != ANA_NONE)
		k++;
	ana_map_put(m, k, p->nnames);
	return p->nnames++;
}

uint32_t ana_node_find(const ana_profile *p, uint32_t parent, uint32_t name)
{
	return ana_map_get(p->node_index, (uint64_t)parent << 32 | name);
}

/* ---- findings ---- */

char *ana_strf(const char *fmt, ...)
{
	va_list ap;
	char *s = NULL;
	va_start(ap, fmt);
	if (vasprintf(&s, fmt, ap) < 0)
		s = NULL;
	va_end(ap);
	return s;
}

ana_finding *ana_finding_add(ana_profile *p, const char *type, ana_severity sev)
{
	if (p->nfindings == p->findings_cap) {
		uint32_t cap = p->findings_cap ? p->findings_cap * 2 : 8;
		ana_finding *f = realloc(p->findings, cap * sizeof *f);
		if (!f)
			return NULL;
		p->findings = f;
		p->findings_cap = cap;
	}
	ana_finding *f = &p->findings[p->nfindings++];
	memset(f, 0, sizeof *f);
	f->type = type;
	f->severity = sev;
	return f;
}

void ana_finding_num(ana_finding *f, const char *key, double v)
{
	if (f->nnumbers < (int)ARRAY_LEN(f->numbers))
		f->numbers[f->nnumbers++] = (ana_kv){key, v};
}

/* ---- statistics ---- */

static void swap_u64(uint64_t *a, uint64_t *b)
{
	uint64_t t = *a;
	*a = *b;
	*b = t;
}

/* Quickselect: afterwards v[k] is the k-th smallest, smaller ones before it. */
static void select_u64(uint64_t *v, size_t n, size_t k)
{
	size_t lo = 0, hi = n - 1;
	while (hi > lo) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid] < v[lo])
			swap_u64(&v[mid], &v[lo]);
		if (v[hi] < v[lo])
			swap_u64(&v[hi], &v[lo]);
		if (v[hi] < v[mid])
			swap_u64(&v[hi], &v[mid]);
		uint64_t pivot = v[mid];
		size_t i = lo, j = hi;
		while (i <= j) {
			while (v[i] < pivot)
				i++;
			while (v[j] > pivot)
				j--;
			if (i <= j) {
				swap_u64(&v[i], &v[j]);
				i++;
				if (j == 0)
					break;
				j--;
			}
		}
		if (k <= j)
			hi = j;
		else if (k >= i)
			lo = i;
		else
			return;
	}
}

/* Nearest-rank percentile index for q in (0, 1]. */
static size_t rank_of(size_t n, double q)
{
	size_t r = (size_t)ceil(q * (double)n);
	return r ? r - 1 : 0;
}

void ana_dist_compute_u64(ana_dist *d, uint64_t *v, size_t n)
{
	memset(d, 0, sizeof *d);
	d->count = n;
	if (!n)
		return;
	double sum = 0, sq = 0;
	uint64_t mn = v[0], mx = v[0];
	for (size_t i = 0; i < n; i++) {
		sum += (double)v[i];
		if (v[i] < mn)
			mn = v[i];
		if (v[i] > mx)
			mx = v[i];
	}
	double mean = sum / (double)n;
	for (size_t i = 0; i < n; i++)
		sq += ((double)v[i] - mean) * ((double)v[i] - mean);
	d->total = sum;
	d->mean = mean;
	d->std = sqrt(sq / (double)n);
	d->min = (double)mn;
	d->max = (double)mx;
	/* Select the highest rank first: later selections work on the shrinking prefix. */
	size_t k99 = rank_of(n, 0.99), k95 = rank_of(n, 0.95), k50 = rank_of(n, 0.50);
	select_u64(v, n, k99);
	d->p99 = (double)v[k99];
	select_u64(v, k99 + 1, k95);
	d->p95 = (double)v[k95];
	select_u64(v, k95 + 1, k50);
	d->p50 = (double)v[k50];
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

void ana_dist_compute(ana_dist *d, double *v, size_t n)
{
	memset(d, 0, sizeof *d);
	d->count = n;
	if (!n)
		return;
	qsort(v, n, sizeof *v, cmp_double);
	double sum = 0, sq = 0;
	for (size_t i = 0; i < n; i++)
		sum += v[i];
	double mean = sum / (double)n;
	for (size_t i = 0; i < n; i++)
		sq += (v[i] - mean) * (v[i] - mean);
	d->total = sum;
	d->mean = mean;
	d->std = sqrt(sq / (double)n);
	d->min = v[0];
	d->max = v[n - 1];
	d->p50 = v[rank_of(n, 0.50)];
	d->p95 = v[rank_of(n, 0.95)];
	d->p99 = v[rank_of(n, 0.99)];
}

/* ---- for reading ---- */

/* Bytes for reading: "12.3 MiB". */
const char *ana_fmt_bytes(double b, char *buf, size_t n)
{
	static const char *const unit[] = {"B", "KiB", "MiB", "GiB", "TiB"};
	int u = 0;
	double v = b < 0 ? -b : b;
	while (v >= 1024 && u < 4) {
		v /= 1024;
		u++;
	}
	snprintf(buf, n, u ? "%s%.1f %s" : "%s%.0f %s", b < 0 ? "-" : "", v, unit[u]);
	return buf;
}

const char *ana_fmt_ns(double ns, char *buf, size_t n)
{
	if (!isfinite(ns))
		snprintf(buf, n, "-");
	else if (ns >= 1e9)
		snprintf(buf, n, "%.3f s", ns / 1e9);
	else if (ns >= 1e6)
		snprintf(buf, n, "%.2f ms", ns / 1e6);
	else if (ns >= 1e3)
		snprintf(buf, n, "%.2f us", ns / 1e3);
	else
		snprintf(buf, n, "%.0f ns", ns);
	return buf;
}

const char *ana_severity_name(ana_severity s)
{
	return s == ANA_HIGH ? "HIGH" : s == ANA_MEDIUM ? "MEDIUM" : "LOW";
}

const char *ana_kind_name(unsigned kind)
{
	static const char *k[] = {"region", "counter", "gauge", "value"};
	return kind < 4 ? k[kind] : "unknown";
}

const char *ana_origin_name(uint64_t origin)
{
	static const char *o[] = {"first", "fork", "exec", "spawn"};
	return origin < 4 ? o[origin] : "unknown";
}

/* How a file's session ended (END's exit_reason); NULL without END (cut short). */
const char *ana_end_name(const fmt_file *f)
{
	static const char *e[] = {"fennec_stop", "exit", "exec", "_exit"};
	return !f->has_end ? NULL : f->exit_reason < 4 ? e[f->exit_reason] : "unknown";
}

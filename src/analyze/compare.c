/*
 * compare.c - two analysed recordings compared (compare.h, docs/compare.md): regions
 * matched by path and tested on their per-call durations (Mann-Whitney U and a bootstrap
 * interval of the ratio of means), steps likewise, functions by their sampled CPU self
 * shares (two-proportion z test, Holm-adjusted), findings by type and subject.
 */
#include "analyze/aggregate.h"
#include "analyze/compare.h"
#include "analyze/system.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

void ana_compare_options_init(ana_compare_options *o)
{
	*o = (ana_compare_options){.alpha = 0.05, .confidence = 0.95, .resamples = 2000,
				   .seed = 0x66656e6e6563ull /* "fennec" */, .threshold_pct = 2};
}

const char *ana_cmp_status_name(int status)
{
	return status == ANA_CMP_REMOVED ? "removed" : status == ANA_CMP_ADDED ? "added" : "both";
}

const char *ana_cmp_finding_status_name(int status)
{
	return status == ANA_CMP_FIXED ? "fixed" : status == ANA_CMP_NEW ? "new" : "unchanged";
}

/* ---- Mann-Whitney U ---- */

typedef struct ranked {
	double v;
	int in_x;
} ranked;

static int by_value(const void *a, const void *b)
{
	double x = ((const ranked *)a)->v, y = ((const ranked *)b)->v;
	return (x > y) - (x < y);
}

double ana_mann_whitney(const double *x, size_t nx, const double *y, size_t ny, double *u)
{
	if (u)
		*u = NAN;
	if (!nx || !ny)
		return NAN;
	size_t n = nx + ny;
	ranked *r = malloc(n * sizeof *r);
	if (!r)
		return NAN;
	for (size_t i = 0; i < nx; i++)
		r[i] = (ranked){x[i], 1};
	for (size_t i = 0; i < ny; i++)
		r[nx + i] = (ranked){y[i], 0};
	qsort(r, n, sizeof *r, by_value);
	/* Ranks from 1; a run of t equal values shares their mean rank and adds t^3 - t to
	 * the tie term. */
	double rank_x = 0, ties = 0;
	for (size_t i = 0; i < n;) {
		size_t j = i + 1;
		while (j < n && r[j].v == r[i].v)
			j++;
		double t = (double)(j - i), mean_rank = (double)(i + j + 1) / 2;
		for (size_t k = i; k < j; k++)
			if (r[k].in_x)
				rank_x += mean_rank;
		ties += t * t * t - t;
		i = j;
	}
	free(r);
	double dx = (double)nx, dy = (double)ny, dn = (double)n;
	double u_x = rank_x - dx * (dx + 1) / 2;
	if (u)
		*u = u_x;
	double var = dx * dy / 12 * ((dn + 1) - ties / (dn * (dn - 1)));
	if (!(var > 0))
		return 1;
	double dev = fabs(u_x - dx * dy / 2) - 0.5;
	double p = erfc((dev > 0 ? dev : 0) / sqrt(var) / M_SQRT2);
	return p > 1 ? 1 : p;
}

/* ---- bootstrap ---- */

/* splitmix64: small, fast, and good enough to draw resampling indices. */
static uint64_t rng_next(uint64_t *s)
{
	uint64_t z = (*s += 0x9e3779b97f4a7c15ull);
	z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ull;
	z = (z ^ (z >> 27)) * 0x94d049bb133111ebull;
	return z ^ (z >> 31);
}

/* Uniform in [0, n) (multiply-shift; the bias is below 2^-40 for the sizes here). */
static size_t rng_below(uint64_t *s, size_t n)
{
	return (size_t)(((unsigned __int128)rng_next(s) * n) >> 64);
}

/* Uniform in (0, 1). */
static double rng_unit(uint64_t *s)
{
	return ((double)(rng_next(s) >> 11) + 0.5) / 9007199254740992.0;
}

/* A standard normal deviate (Box-Muller; one of the pair is dropped for simplicity). */
static double rng_normal(uint64_t *s)
{
	return sqrt(-2 * log(rng_unit(s))) * cos(2 * M_PI * rng_unit(s));
}

typedef struct moments {
	double mean, se; /* mean and its standard error */
} moments;

static moments moments_of(const double *v, size_t n)
{
	double sum = 0, ss = 0;
	for (size_t i = 0; i < n; i++)
		sum += v[i];
	double mean = sum / (double)n;
	for (size_t i = 0; i < n; i++)
		ss += (v[i] - mean) * (v[i] - mean);
	return (moments){mean, n > 1 ? sqrt(ss / (double)(n - 1) / (double)n) : 0};
}

/* The mean of one resample of v. */
static double resample_mean(const double *v, size_t n, const moments *m, uint64_t *s)
{
	if (n > ANA_BOOTSTRAP_EXACT)
		return m->mean + m->se * rng_normal(s);
	double sum = 0;
	for (size_t i = 0; i < n; i++)
		sum += v[rng_below(s, n)];
	return sum / (double)n;
}

static int by_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

int ana_bootstrap_ratio(const double *x, size_t nx, const double *y, size_t ny, uint32_t resamples,
			double confidence, uint64_t seed, double *lo, double *hi)
{
	*lo = *hi = NAN;
	if (!nx || !ny || !resamples || !(confidence > 0 && confidence < 1))
		return FENNEC_EINVAL;
	double *r = malloc(resamples * sizeof *r);
	if (!r)
		return FENNEC_ENOMEM;
	moments mx = moments_of(x, nx), my = moments_of(y, ny);
	uint64_t s = seed;
	for (uint32_t i = 0; i < resamples; i++) {
		double a = resample_mean(x, nx, &mx, &s), b = resample_mean(y, ny, &my, &s);
		if (!(b != 0)) {
			free(r);
			return FENNEC_EINVAL;
		}
		r[i] = a / b;
	}
	qsort(r, resamples, sizeof *r, by_double);
	/* Percentiles by rank: the lowest and highest (1 - confidence) / 2 are outside. */
	double tail = (1 - confidence) / 2 * resamples;
	size_t k_lo = (size_t)floor(tail), k_hi = (size_t)ceil(resamples - tail);
	if (k_hi > 0)
		k_hi--;
	if (k_lo >= resamples)
		k_lo = resamples - 1;
	if (k_hi >= resamples)
		k_hi = resamples - 1;
	*lo = r[k_lo];
	*hi = r[k_hi];
	free(r);
	return 0;
}

/* ---- two proportions ---- */

double ana_two_proportion(double k1, double n1, double k2, double n2)
{
	if (!(n1 > 0) || !(n2 > 0))
		return NAN;
	double p1 = k1 / n1, p2 = k2 / n2, pool = (k1 + k2) / (n1 + n2);
	double var = pool * (1 - pool) * (1 / n1 + 1 / n2);
	if (!(var > 0))
		return 1;
	double p = erfc(fabs(p1 - p2) / sqrt(var) / M_SQRT2);
	return p > 1 ? 1 : p;
}

/* ---- comparing two sets of durations ---- */

static double *to_doubles(const uint64_t *v, size_t n)
{
	double *d = malloc((n ? n : 1) * sizeof *d);
	if (d)
		for (size_t i = 0; i < n; i++)
			d[i] = (double)v[i];
	return d;
}

static double mean_of(const uint64_t *v, size_t n)
{
	double s = 0;
	for (size_t i = 0; i < n; i++)
		s += (double)v[i];
	return n ? s / (double)n : NAN;
}

/* Whether a speedup is outside the noise band [1/(1+t), 1+t]. */
static int beyond_threshold(double speedup, double threshold_pct)
{
	double t = 1 + threshold_pct / 100;
	return speedup >= t || speedup <= 1 / t;
}

/* Test durations a against b. `speedup` is set by the caller from the means of all
 * calls; the tests need at least two values a side. */
static int test_durations(const uint64_t *a, size_t na, const uint64_t *b, size_t nb, const ana_compare_options *o,
			  uint64_t seed, ana_cmp_test *t)
{
	t->tested = 0;
	t->ci_low = t->ci_high = t->p_value = NAN;
	t->significant = 0;
	if (na < 2 || nb < 2)
		return 0;
	double *x = to_doubles(a, na), *y = to_doubles(b, nb);
	int rc = 0;
	if (!x || !y) {
		rc = FENNEC_ENOMEM;
		goto out;
	}
	t->p_value = ana_mann_whitney(x, na, y, nb, NULL);
	rc = ana_bootstrap_ratio(x, na, y, nb, o->resamples, o->confidence, seed, &t->ci_low, &t->ci_high);
	if (rc == FENNEC_ENOMEM || isnan(t->p_value)) {
		rc = FENNEC_ENOMEM;
		goto out;
	}
	rc = 0; /* EINVAL: a side of zero durations has no ratio; the interval stays NaN */
	t->tested = 1;
	t->significant = t->p_value < o->alpha && (t->ci_low > 1 || t->ci_high < 1) &&
			 beyond_threshold(t->speedup, o->threshold_pct);
out:
	free(x);
	free(y);
	return rc;
}

/* ---- regions ---- */

/* A node's path ("" if it could not be built). */
static const char *npath(const ana_profile *p, uint32_t n)
{
	return p->nodes[n].path ? p->nodes[n].path : "";
}

static int by_path(const void *a, const void *b, void *arg)
{
	const ana_profile *p = arg;
	return strcmp(npath(p, *(const uint32_t *)a), npath(p, *(const uint32_t *)b));
}

typedef struct path_key {
	const ana_profile *p;
	const char *path;
} path_key;

static int find_path(const void *key, const void *elem)
{
	const path_key *k = key;
	return strcmp(k->path, npath(k->p, *(const uint32_t *)elem));
}

static int by_region_total(const void *a, const void *b)
{
	const ana_cmp_region *x = a, *y = b;
	uint64_t tx = x->a_total_ns + x->b_total_ns, ty = y->a_total_ns + y->b_total_ns;
	if (tx != ty)
		return (tx < ty) - (tx > ty);
	return strcmp(x->path, y->path);
}

static void region_side(const ana_profile *p, uint32_t n, uint64_t *total, uint64_t *count, double *mean)
{
	*total = *count = 0;
	*mean = NAN;
	if (n == ANA_NONE)
		return;
	*total = p->nodes[n].total_ns;
	*count = p->nodes[n].dist.count;
	*mean = *count ? p->nodes[n].dist.mean : NAN;
}

/* The seed of one test: the options' seed mixed with the region's path, so each region's
 * interval does not depend on which other regions the recordings have. */
static uint64_t seed_for(uint64_t seed, const char *path)
{
	uint64_t h = 1469598103934665603ull;
	for (; *path; path++)
		h = (h ^ (uint8_t)*path) * 1099511628211ull;
	return seed ^ h;
}

static int compare_regions(const ana_profile *a, const ana_profile *b, ana_compare_result *r)
{
	uint32_t *bi = malloc((b->nnodes ? b->nnodes : 1) * sizeof *bi);
	uint8_t *b_seen = calloc(b->nnodes ? b->nnodes : 1, 1);
	r->regions = malloc(((size_t)a->nnodes + b->nnodes + 1) * sizeof *r->regions);
	int rc = 0;
	if (!bi || !b_seen || !r->regions) {
		rc = FENNEC_ENOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < b->nnodes; i++)
		bi[i] = i;
	qsort_r(bi, b->nnodes, sizeof *bi, by_path, (void *)b);
	for (uint32_t i = 0; i < a->nnodes + b->nnodes; i++) {
		ana_cmp_region *x = &r->regions[r->nregions];
		uint32_t an = ANA_NONE, bn = ANA_NONE;
		if (i < a->nnodes) {
			an = i;
			path_key k = {b, npath(a, i)};
			const uint32_t *hit = bsearch(&k, bi, b->nnodes, sizeof *bi, find_path);
			if (hit) {
				bn = *hit;
				b_seen[bn] = 1;
			}
		} else if (!b_seen[i - a->nnodes])
			bn = i - a->nnodes;
		else
			continue;
		const ana_profile *named = bn != ANA_NONE ? b : a;
		uint32_t nn = bn != ANA_NONE ? bn : an;
		*x = (ana_cmp_region){.name = named->names[named->nodes[nn].name], .path = npath(named, nn), .a_node = an, .b_node = bn,
				      .status = an == ANA_NONE ? ANA_CMP_ADDED : bn == ANA_NONE ? ANA_CMP_REMOVED : ANA_CMP_BOTH};
		region_side(a, an, &x->a_total_ns, &x->a_count, &x->a_mean_ns);
		region_side(b, bn, &x->b_total_ns, &x->b_count, &x->b_mean_ns);
		x->test.speedup = x->a_count && x->b_count && x->b_mean_ns > 0 ? x->a_mean_ns / x->b_mean_ns : NAN;
		x->test.ci_low = x->test.ci_high = x->test.p_value = NAN;
		r->nregions++;
		if (x->status != ANA_CMP_BOTH)
			continue;
		const ana_u64vec *da = &a->nodes[an].durations, *db = &b->nodes[bn].durations;
		if ((rc = test_durations(da->v, da->n, db->v, db->n, &r->opt, seed_for(r->opt.seed, x->path), &x->test)))
			goto out;
		if (x->test.significant)
			x->test.speedup > 1 ? r->faster++ : r->slower++;
	}
	qsort(r->regions, r->nregions, sizeof *r->regions, by_region_total);
out:
	free(bi);
	free(b_seen);
	return rc;
}

/* ---- functions ---- */

typedef struct func_entry {
	const char *name, *module;
	int side;                /* 0: A, 1: B */
	uint64_t self;
} func_entry;

static int by_func_name(const void *a, const void *b)
{
	const func_entry *x = a, *y = b;
	int c = strcmp(x->name, y->name);
	return c ? c : x->side - y->side;
}

static int by_p(const void *a, const void *b, void *arg)
{
	const ana_cmp_func *f = arg;
	double x = f[*(const uint32_t *)a].p_value, y = f[*(const uint32_t *)b].p_value;
	return (x > y) - (x < y);
}

static int by_delta(const void *a, const void *b)
{
	const ana_cmp_func *x = a, *y = b;
	double dx = fabs(x->delta_pct), dy = fabs(y->delta_pct);
	if (dx != dy)
		return (dx < dy) - (dx > dy);
	return strcmp(x->name, y->name);
}

/* The program's functions with self samples (not [fennec], the profiler's own cost, which
 * differs with the recording's options, not with the program) into e[n..]; *own: the
 * samples left out. */
static size_t add_funcs(const ana_profile *p, int side, func_entry *e, size_t n, uint64_t *own)
{
	const ana_sample_view *v = &p->smp.all;
	*own = 0;
	for (uint32_t i = 0; i < v->nfuncs[ANA_CPU]; i++) {
		const ana_hot_func *h = &v->funcs[ANA_CPU][i];
		if (!h->self || h->func >= p->smp.nfuncs)
			continue;
		const ana_func *f = &p->smp.funcs[h->func];
		if (ana_module_is_fennec(p->names[f->module])) {
			*own += h->self;
			continue;
		}
		e[n++] = (func_entry){p->names[f->name], p->names[f->module], side, h->self};
	}
	return n;
}

static int compare_funcs(const ana_profile *a, const ana_profile *b, ana_compare_result *r)
{
	r->has_funcs = a->smp.all.weight[ANA_CPU] && b->smp.all.weight[ANA_CPU];
	if (!r->has_funcs)
		return 0;
	size_t cap = (size_t)a->smp.all.nfuncs[ANA_CPU] + b->smp.all.nfuncs[ANA_CPU] + 1;
	func_entry *e = malloc(cap * sizeof *e);
	uint32_t *order = NULL;
	r->funcs = malloc(cap * sizeof *r->funcs);
	int rc = 0;
	if (!e || !r->funcs) {
		rc = FENNEC_ENOMEM;
		goto out;
	}
	uint64_t own_a, own_b;
	size_t n = add_funcs(a, 0, e, 0, &own_a);
	n = add_funcs(b, 1, e, n, &own_b);
	qsort(e, n, sizeof *e, by_func_name);
	double wa = (double)(a->smp.all.weight[ANA_CPU] - own_a), wb = (double)(b->smp.all.weight[ANA_CPU] - own_b);
	if (wa <= 0 || wb <= 0) {
		r->has_funcs = 0;
		goto out;
	}
	double per_a = (double)a->smp.period_ns, per_b = (double)b->smp.period_ns;
	for (size_t i = 0; i < n;) {
		ana_cmp_func *f = &r->funcs[r->nfuncs++];
		*f = (ana_cmp_func){.name = e[i].name, .module = e[i].module};
		size_t j = i;
		for (; j < n && !strcmp(e[j].name, e[i].name); j++) {
			if (e[j].side) {
				if (!f->b_self)
					f->module = e[j].module;
				f->b_self += e[j].self;
			} else
				f->a_self += e[j].self;
		}
		i = j;
		f->status = !f->a_self ? ANA_CMP_ADDED : !f->b_self ? ANA_CMP_REMOVED : ANA_CMP_BOTH;
		f->a_self_pct = 100 * (double)f->a_self / wa;
		f->b_self_pct = 100 * (double)f->b_self / wb;
		f->a_self_ns = (double)f->a_self * per_a;
		f->b_self_ns = (double)f->b_self * per_b;
		f->delta_pct = f->b_self_pct - f->a_self_pct;
		f->p_value = ana_two_proportion((double)f->a_self, wa, (double)f->b_self, wb);
	}
	/* Holm: the k-th smallest p (from 0) is multiplied by m - k; adjusted values are
	 * kept non-decreasing in that order. */
	order = malloc((r->nfuncs ? r->nfuncs : 1) * sizeof *order);
	if (!order) {
		rc = FENNEC_ENOMEM;
		goto out;
	}
	for (uint32_t i = 0; i < r->nfuncs; i++)
		order[i] = i;
	qsort_r(order, r->nfuncs, sizeof *order, by_p, r->funcs);
	double run = 0;
	for (uint32_t k = 0; k < r->nfuncs; k++) {
		ana_cmp_func *f = &r->funcs[order[k]];
		double adj = f->p_value * (double)(r->nfuncs - k);
		run = adj > run ? adj : run;
		f->p_holm = run > 1 ? 1 : run;
		double moved = fabs(f->delta_pct), base = f->a_self_pct > 0 ? f->a_self_pct : f->b_self_pct;
		f->significant = f->p_holm < r->opt.alpha && moved >= base * r->opt.threshold_pct / 100;
	}
	qsort(r->funcs, r->nfuncs, sizeof *r->funcs, by_delta);
out:
	free(order);
	free(e);
	return rc;
}

/* ---- findings ---- */

static int same_finding(const ana_finding *x, const ana_finding *y)
{
	return !strcmp(x->type, y->type) && !strcmp(x->subject ? x->subject : "", y->subject ? y->subject : "");
}

static int compare_findings(const ana_profile *a, const ana_profile *b, ana_compare_result *r)
{
	r->findings = malloc(((size_t)a->nfindings + b->nfindings + 1) * sizeof *r->findings);
	uint8_t *b_seen = calloc(b->nfindings + 1, 1);
	if (!r->findings || !b_seen) {
		free(b_seen);
		return FENNEC_ENOMEM;
	}
	uint32_t nu = 0;
	ana_cmp_finding *unchanged = malloc((a->nfindings + 1) * sizeof *unchanged);
	if (!unchanged) {
		free(b_seen);
		return FENNEC_ENOMEM;
	}
	for (uint32_t i = 0; i < a->nfindings; i++) {
		uint32_t j = 0;
		while (j < b->nfindings && (b_seen[j] || !same_finding(&a->findings[i], &b->findings[j])))
			j++;
		if (j < b->nfindings) {
			b_seen[j] = 1;
			unchanged[nu++] = (ana_cmp_finding){ANA_CMP_UNCHANGED, &a->findings[i], &b->findings[j]};
		} else
			r->findings[r->nfindings++] = (ana_cmp_finding){ANA_CMP_FIXED, &a->findings[i], NULL};
	}
	for (uint32_t j = 0; j < b->nfindings; j++)
		if (!b_seen[j])
			r->findings[r->nfindings++] = (ana_cmp_finding){ANA_CMP_NEW, NULL, &b->findings[j]};
	memcpy(r->findings + r->nfindings, unchanged, nu * sizeof *unchanged);
	r->nfindings += nu;
	free(unchanged);
	free(b_seen);
	return 0;
}

/* ---- summary ---- */

static void side_of(const ana_profile *p, ana_cmp_side *s)
{
	const ana_dist *sd = &p->step_dist;
	*s = (ana_cmp_side){.p = p, .wall_ns = p->wall_ns, .cpu_ns = p->cpu_user_ns + p->cpu_sys_ns,
			    .steps = p->steps, .items = p->items, .cpu_weight = p->smp.all.weight[ANA_CPU]};
	for (uint32_t i = 0; i < p->nprocs; i++) {
		uint64_t rss = p->procs[i].file.max_rss_kb * 1024;
		if (rss > s->max_rss_bytes)
			s->max_rss_bytes = rss;
	}
	/* As the analysis report defines them (docs/json.md summary). */
	s->setup_ns = p->marks ? (double)p->setup_ns : NAN;
	s->step_mean_ns = sd->count ? sd->mean : NAN;
	s->step_p50_ns = sd->count ? sd->p50 : NAN;
	s->steps_per_s = sd->total > 0 ? (double)p->steps / (sd->total / 1e9) : NAN;
	s->items_per_s = p->has_items && sd->total > 0 ? (double)p->items / (sd->total / 1e9) : NAN;
	s->energy_joules = p->energy ? p->energy->total_joules : NAN;
	s->step_joules = p->energy ? p->energy->step_joules_mean : NAN;
	s->energy_estimate = p->energy && p->energy->estimate;
}

int ana_compare(const ana_profile *a, const ana_profile *b, const ana_compare_options *opt, ana_compare_result *out)
{
	memset(out, 0, sizeof *out);
	if (opt)
		out->opt = *opt;
	else
		ana_compare_options_init(&out->opt);
	side_of(a, &out->a);
	side_of(b, &out->b);
	out->wall_speedup = a->wall_ns && b->wall_ns ? (double)a->wall_ns / (double)b->wall_ns : NAN;
	double ma = mean_of(a->step_ns.v, a->step_ns.n), mb = mean_of(b->step_ns.v, b->step_ns.n);
	out->steps.speedup = mb > 0 ? ma / mb : NAN;
	int rc = test_durations(a->step_ns.v, a->step_ns.n, b->step_ns.v, b->step_ns.n, &out->opt,
				seed_for(out->opt.seed, "[steps]"), &out->steps);
	if (!rc)
		rc = compare_regions(a, b, out);
	if (!rc)
		rc = compare_funcs(a, b, out);
	if (!rc)
		rc = compare_findings(a, b, out);
	return rc;
}

void ana_compare_free(ana_compare_result *r)
{
	if (!r)
		return;
	free(r->regions);
	free(r->funcs);
	free(r->findings);
	memset(r, 0, sizeof *r);
}

/*
 * speedscope.c - speedscope's file format (https://www.speedscope.app/file-format-schema.json):
 * one "sampled" profile per thread and sample kind (stacks and weights in nanoseconds,
 * in time order) and one "evented" profile per thread of its fennec regions (open and
 * close events, from a replay of each process's file: analyze/replay.h, clipped to the
 * window).
 *
 * A profile's events must be contiguous in the file, but the files interleave threads:
 * the region events are regrouped per thread through a spool (util.c) that keeps at most
 * SPOOL_MEM bytes in memory and the rest in a temporary file. Frames are listed last
 * ("shared" after "profiles": JSON objects are unordered), so they can be numbered as
 * they are met: functions first (frame i = function i), then region names. A memory
 * flame graph (exp_options.memory) is one sampled profile of allocation stacks in bytes.
 */
#include "export/internal.h"
#include "analyze/replay.h"

#include <math.h>
#include <stdlib.h>

#define SPOOL_MEM (64u << 20)

typedef struct srec {         /* a spooled region event */
	uint8_t close;
	uint32_t frame;
	uint64_t at_ns;
} __attribute__((packed)) srec;

typedef struct sctx {
	const ana_profile *p;
	const exp_options *o;
	exp_sel sel;
	uint32_t *site_frame;     /* per site id of this file: frame index, ANA_NONE until met */
	uint32_t nsite;
	exp_map region_index;     /* (hash, probe) -> region number */
	char **regions;           /* region frame names, frame = nfuncs + number */
	uint32_t nregions, regions_cap;
	exp_spool spool;          /* key: thread index in p->threads */
	uint64_t *nrecs;          /* per thread: spooled events */
	uint64_t *first_ns, *last_ns; /* per thread: time span of its events */
	int rc;
} sctx;

static uint64_t hash64(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ull;
	return h;
}

/* The frame index of a region name. */
static uint32_t region_frame(sctx *c, const char *name)
{
	uint64_t h = hash64(name);
	for (uint64_t probe = 0;; probe++) {
		int added;
		uint64_t *v = exp_map_put(&c->region_index, h, probe, &added);
		if (!v)
			return ANA_NONE;
		if (!added) {
			if (!strcmp(c->regions[*v], name))
				return c->p->smp.nfuncs + (uint32_t)*v;
			continue;
		}
		if (c->nregions == c->regions_cap) {
			uint32_t cap = c->regions_cap ? c->regions_cap * 2 : 64;
			char **a = realloc(c->regions, cap * sizeof *a);
			if (!a)
				return ANA_NONE;
			c->regions = a;
			c->regions_cap = cap;
		}
		if (!(c->regions[c->nregions] = strdup(name)))
			return ANA_NONE;
		*v = c->nregions;
		return c->p->smp.nfuncs + c->nregions++;
	}
}

/* The frame of site id, from `name` (the replay's) on first use. */
static uint32_t site_frame(sctx *c, uint32_t id, const char *name)
{
	if (id >= c->nsite) {
		uint32_t n = id + 1 > c->nsite * 2 ? id + 1 : c->nsite * 2;
		uint32_t *a = realloc(c->site_frame, n * sizeof *a);
		if (!a)
			return ANA_NONE;
		for (uint32_t i = c->nsite; i < n; i++)
			a[i] = ANA_NONE;
		c->site_frame = a;
		c->nsite = n;
	}
	if (c->site_frame[id] == ANA_NONE)
		c->site_frame[id] = region_frame(c, name);
	return c->site_frame[id];
}

static void put_rec(sctx *c, uint32_t g, int close, uint32_t frame, uint64_t ns)
{
	srec r = {(uint8_t)close, frame, ns};
	exp_spool_put(&c->spool, g, &r, sizeof r);
	if (!c->nrecs[g]++)
		c->first_ns[g] = ns;
	c->last_ns[g] = ns;
}

static int on_event(void *vc, const ana_rp_event *ev)
{
	sctx *c = vc;
	if (ev->g == ANA_NONE || !exp_sel_thread(&c->sel, ev->g))
		return 0;
	/* an end names the frame of its begin: the same site */
	uint32_t fr = site_frame(c, ev->site, ev->name);
	if (fr == ANA_NONE)
		return c->rc = FENNEC_ENOMEM;
	put_rec(c, ev->g, ev->kind == ANA_RP_END, fr, ev->ns);
	if (c->spool.failed)
		c->rc = c->spool.failed;
	return c->rc;
}

/* Replay process `proc`'s file and spool its region events per thread. */
static int spool_file(sctx *c, uint32_t proc, fmt_error *err)
{
	ana_replay_opts ro = {.what = ANA_RP_REGIONS, .has_tid = c->o->has_tid, .tid = c->o->tid};
	int rc = ana_replay(c->p, proc, &ro, on_event, c, err);
	if (!rc && c->spool.failed)
		rc = c->spool.failed;
	free(c->site_frame);
	c->site_frame = NULL;
	c->nsite = 0;
	return rc;
}

typedef struct wctx {
	FILE *out;
	int first;
} wctx;

static int write_recs(void *vw, const uint8_t *data, size_t len)
{
	wctx *w = vw;
	for (size_t i = 0; i + sizeof(srec) <= len; i += sizeof(srec)) {
		srec r;
		memcpy(&r, data + i, sizeof r);
		fprintf(w->out, "%s{\"type\":\"%c\",\"frame\":%u,\"at\":%llu}", w->first ? "\n" : ",\n", r.close ? 'C' : 'O',
			r.frame, (unsigned long long)r.at_ns);
		w->first = 0;
	}
	return ferror(w->out) ? FENNEC_EIO : 0;
}

static void profile_name(FILE *out, const ana_profile *p, uint32_t t, const char *what)
{
	char name[600];
	snprintf(name, sizeof name, "%s [%llu] %s", exp_thread_name(p, t), (unsigned long long)exp_thread_tid(p, t), what);
	rep_json_string(out, name);
}

static int by_thread_kind_time(const void *a, const void *b, void *arg)
{
	const ana_profile *p = arg;
	size_t i = *(const size_t *)a, j = *(const size_t *)b;
	const ana_sample *x = &p->smp.samples[i], *y = &p->smp.samples[j];
	if (x->thread != y->thread)
		return x->thread < y->thread ? -1 : 1;
	if (x->kind != y->kind)
		return x->kind < y->kind ? -1 : 1;
	if (x->t_ns != y->t_ns)
		return x->t_ns < y->t_ns ? -1 : 1;
	return (i > j) - (i < j);
}

/* A stack as frame indices, root first (frame i = function i); [] when unknown. */
static void put_stack(FILE *out, const ana_profile *p, uint32_t stack, int comma)
{
	const ana_stack *s = stack < p->smp.nstacks ? &p->smp.stacks[stack] : NULL;
	fputs(comma ? ",\n[" : "\n[", out);
	for (uint32_t j = 0; s && j < s->n; j++) {
		uint32_t loc = s->locs[j];
		fprintf(out, j ? ",%u" : "%u", loc < p->smp.nlocs ? p->smp.locs[loc].func : 0);
	}
	fputc(']', out);
}

/* One sampled profile: samples idx[from..to) (one thread, one kind, in time order). */
static void sampled_profile(FILE *out, const ana_profile *p, const size_t *idx, size_t from, size_t to, uint64_t period,
			    int comma)
{
	const ana_sample *s0 = &p->smp.samples[idx[from]];
	fputs(comma ? ",\n{\"type\":\"sampled\",\"name\":" : "\n{\"type\":\"sampled\",\"name\":", out);
	profile_name(out, p, s0->thread, s0->kind == ANA_OFFCPU ? "off-CPU" : "CPU");
	fputs(",\"unit\":\"nanoseconds\",\"samples\":[", out);
	uint64_t total = 0;
	for (size_t i = from; i < to; i++)
		put_stack(out, p, p->smp.samples[idx[i]].stack, i > from);
	fputs("],\n\"weights\":[", out);
	for (size_t i = from; i < to; i++) {
		uint64_t w = exp_weight(&p->smp.samples[idx[i]]) * period;
		total += w;
		fprintf(out, i > from ? ",%llu" : "%llu", (unsigned long long)w);
	}
	/* Samples laid end to end: the time axis of a sampled profile is their weight. */
	fprintf(out, "],\"startValue\":0,\"endValue\":%llu}", (unsigned long long)total);
}

/* The file up to the first profile. */
static void put_head(FILE *out, const ana_profile *p)
{
	char ver[64];
	snprintf(ver, sizeof ver, "fennec %d.%d.%d", FENNEC_VERSION_MAJOR, FENNEC_VERSION_MINOR, FENNEC_VERSION_PATCH);
	fputs("{\"$schema\":\"https://www.speedscope.app/file-format-schema.json\",\n\"exporter\":", out);
	rep_json_string(out, ver);
	fputs(",\n\"name\":", out);
	const char *path = p->nprocs ? p->procs[0].file.path : "", *slash = strrchr(path, '/');
	rep_json_string(out, slash ? slash + 1 : path);
	fputs(",\n\"activeProfileIndex\":0,\n\"profiles\":[", out);
}

/* The file from the end of the profiles: the frames, every function then the region names. */
static int put_tail(FILE *out, const ana_profile *p, char **regions, uint32_t nregions)
{
	fputs("],\n\"shared\":{\"frames\":[", out);
	for (uint32_t f = 0; f < p->smp.nfuncs; f++) {
		const ana_func *fn = &p->smp.funcs[f];
		fputs(f ? ",\n{\"name\":" : "\n{\"name\":", out);
		rep_json_string(out, exp_func_name(p, f));
		if (fn->file != ANA_NONE && fn->file < p->nnames) {
			fputs(",\"file\":", out);
			rep_json_string(out, p->names[fn->file]);
			if (fn->line)
				fprintf(out, ",\"line\":%u", fn->line);
		}
		fputc('}', out);
	}
	for (uint32_t r = 0; r < nregions; r++) {
		fputs(r || p->smp.nfuncs ? ",\n{\"name\":" : "\n{\"name\":", out);
		rep_json_string(out, regions[r]);
		fputs(",\"file\":\"fennec region\"}", out);
	}
	fputs("]}}\n", out);
	return ferror(out) ? FENNEC_EIO : 0;
}

/* A memory flame graph: one sampled profile of the allocation stacks, weights in bytes
 * (stacks.c's aggregate; no time order to keep). */
static int memory_speedscope(FILE *out, const ana_profile *p, const exp_options *o)
{
	exp_agg *agg;
	size_t n;
	uint64_t total;
	int rc = exp_aggregate(p, o, &agg, &n, &total);
	if (rc || !n) {
		free(agg);
		return rc ? rc : FENNEC_ENODATA;
	}
	put_head(out, p);
	fputs("\n{\"type\":\"sampled\",\"name\":", out);
	rep_json_string(out, exp_memory_what(o->memory));
	fputs(",\"unit\":\"bytes\",\"samples\":[", out);
	for (size_t i = 0; i < n; i++)
		put_stack(out, p, agg[i].stack, i > 0);
	fputs("],\n\"weights\":[", out);
	for (size_t i = 0; i < n; i++)
		fprintf(out, i ? ",%llu" : "%llu", (unsigned long long)agg[i].weight);
	fprintf(out, "],\"startValue\":0,\"endValue\":%llu}", (unsigned long long)total);
	free(agg);
	return put_tail(out, p, NULL, 0);
}

int exp_speedscope(FILE *out, const ana_profile *p, const exp_options *o, fmt_error *err)
{
	if (o->memory) {
		memset(err, 0, sizeof *err);
		return memory_speedscope(out, p, o);
	}
	sctx c = {.p = p, .o = o};
	size_t *idx = NULL, nidx = 0;
	memset(err, 0, sizeof *err);
	int rc = exp_sel_init(&c.sel, p, o);
	if (!rc)
		rc = exp_spool_init(&c.spool, p->nthreads, SPOOL_MEM);
	c.nrecs = calloc(p->nthreads ? p->nthreads : 1, sizeof *c.nrecs);
	c.first_ns = calloc(p->nthreads ? p->nthreads : 1, sizeof *c.first_ns);
	c.last_ns = calloc(p->nthreads ? p->nthreads : 1, sizeof *c.last_ns);
	if (!rc && (!c.nrecs || !c.first_ns || !c.last_ns))
		rc = FENNEC_ENOMEM;
	/* The selected samples, grouped by thread and kind, in time order. */
	if (!rc && p->smp.nsamples && !(idx = malloc(p->smp.nsamples * sizeof *idx)))
		rc = FENNEC_ENOMEM;
	for (size_t i = 0; i < p->smp.nsamples && !rc; i++)
		if (exp_sel_sample(&c.sel, &p->smp.samples[i]))
			idx[nidx++] = i;
	if (nidx)
		qsort_r(idx, nidx, sizeof *idx, by_thread_kind_time, (void *)p);
	for (uint32_t i = 0; i < p->nprocs && !rc; i++)
		rc = spool_file(&c, i, err);
	uint64_t nrecs = 0;
	for (uint32_t t = 0; t < p->nthreads && !rc; t++)
		nrecs += c.nrecs[t];
	if (!rc && !nidx && !nrecs)
		rc = FENNEC_ENODATA;
	if (rc)
		goto out;

	uint64_t period = p->smp.period_ns ? p->smp.period_ns
			  : p->smp.requested_hz ? 1000000000ull / p->smp.requested_hz : 1;
	put_head(out, p);
	/* Per thread: its sampled profiles, then its regions. */
	int any = 0;
	size_t i = 0;
	for (uint32_t t = 0; t < p->nthreads && !rc; t++) {
		while (i < nidx && p->smp.samples[idx[i]].thread < t)
			i++;
		while (i < nidx && p->smp.samples[idx[i]].thread == t) {
			size_t j = i;
			uint8_t kind = p->smp.samples[idx[i]].kind;
			while (j < nidx && p->smp.samples[idx[j]].thread == t && p->smp.samples[idx[j]].kind == kind)
				j++;
			sampled_profile(out, p, idx, i, j, period, any);
			any = 1;
			i = j;
		}
		if (c.nrecs[t]) {
			fputs(any ? ",\n{\"type\":\"evented\",\"name\":" : "\n{\"type\":\"evented\",\"name\":", out);
			profile_name(out, p, t, "regions");
			fprintf(out, ",\"unit\":\"nanoseconds\",\"startValue\":%llu,\"endValue\":%llu,\"events\":[",
				(unsigned long long)c.first_ns[t], (unsigned long long)c.last_ns[t]);
			wctx w = {out, 1};
			rc = exp_spool_each(&c.spool, t, write_recs, &w);
			fputs("]}", out);
			any = 1;
		}
	}
	if (rc)
		goto out;
	rc = put_tail(out, p, c.regions, c.nregions);
out:
	free(idx);
	exp_sel_fini(&c.sel);
	exp_spool_fini(&c.spool);
	exp_map_free(&c.region_index);
	for (uint32_t r = 0; r < c.nregions; r++)
		free(c.regions[r]);
	free(c.regions);
	free(c.nrecs);
	free(c.first_ns);
	free(c.last_ns);
	return rc;
}

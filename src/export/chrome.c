/*
 * chrome.c - the Chrome trace event format (JSON Object Format: {"traceEvents": [...]}),
 * for Perfetto, chrome://tracing and speedscope. Every region call, step and metric
 * update is an event, so each process's events are replayed (analyze/replay.h: regions
 * paired and clipped to the window, names resolved) and each is written as it is
 * delivered: memory does not grow with the events.
 *
 * Regions are B/E pairs on their thread, except that a region with no other event of
 * its thread between its begin and its end is written as one complete ("X") event: the
 * begin is held back one event per thread, which keeps each thread's events in time
 * order in the file and halves the size of traces made of leaf calls. Steps are instant
 * events, metrics counter ("C") events, samples "P" events whose "sf" names a node of
 * the top-level "stackFrames" tree; a thread's samples (from the model, sorted by time)
 * are merged into its events as they are replayed, so that on every thread the file is
 * in time order. Times are microseconds since the recording started (the earliest
 * process start), from CLOCK_MONOTONIC, so processes line up.
 *
 * NVTX start/end ranges (GPUX chunks) are async "b"/"e" pairs with an id, both on the
 * thread that started the range (a range ended on another thread names it in the "e"'s
 * args), and NVTX marks instant events. The writer flushes GPUX chunks as its queue
 * fills, not in time order with the threads' event chunks, so a first replay of a file
 * that has NVTX gathers them (paired by the replay), sorted by (thread, time), and the
 * second merges each thread's into its events as it merges samples: memory grows with the
 * NVTX records (40 bytes each), not with the other events.
 */
#include "export/internal.h"
#include "analyze/gpu.h"
#include "analyze/replay.h"

#include <math.h>
#include <stdlib.h>

/* Samples as "P" events. The stackFrames tree's nodes are (parent, function) pairs,
 * numbered from 1 in order of first use. */
typedef struct sframe {
	uint32_t parent;       /* 0: a root */
	uint32_t func;
} sframe;

typedef struct frames {
	sframe *v;
	uint32_t n, cap;
	exp_map index;         /* (parent, function) -> id */
} frames;

/* The id of the frame (parent, func), added on first use; 0 when out of memory. */
static uint32_t frame_id(frames *t, uint32_t parent, uint32_t func)
{
	int added;
	uint64_t *v = exp_map_put(&t->index, parent, func, &added);
	if (!v)
		return 0;
	if (added) {
		if (t->n == t->cap) {
			uint32_t cap = t->cap ? t->cap * 2 : 1024;
			sframe *a = realloc(t->v, cap * sizeof *a);
			if (!a)
				return 0;
			t->v = a;
			t->cap = cap;
		}
		t->v[t->n++] = (sframe){parent, func};
		*v = t->n; /* ids from 1 */
	}
	return (uint32_t)*v;
}

/* An NVTX event to write. */
typedef struct nvev {
	uint64_t tid;          /* its track: the thread that started the range or made the mark */
	uint64_t ns;           /* relative time */
	uint64_t end_tid;      /* 'e': the thread that ended the range (0: never ended) */
	uint32_t id;           /* 'b', 'e': the range's id in the export (unique over processes) */
	uint32_t name;         /* index into nvtx.quoted */
	uint32_t seq;          /* order gathered: a zero-length range's b stays before its e */
	char ph;               /* 'b', 'e' or 'i' */
} nvev;

/* A thread's run of nvtx.v (sorted by thread, time) and how much of it is written. */
typedef struct nvrun {
	uint64_t tid;
	size_t next, end;
} nvrun;

/* One process's NVTX events. */
typedef struct nvtx {
	nvev *v;
	size_t n, cap;
	nvrun *runs;
	size_t nruns;
	size_t *begin_of;      /* per range number of the replay: the index of its 'b' in v */
	size_t nbegin, begin_cap;
	exp_map name_of;       /* (hash, length) of a message -> index into quoted + 1 */
	char **quoted;         /* messages as JSON strings (kept over processes) */
	char **raw;            /* the same, as recorded: hash collisions are checked */
	uint32_t nnames, names_cap;
	uint32_t next_id;
} nvtx;

/* A thread of the file being replayed (E events repeat the region's name: speedscope
 * pairs B and E by name). */
typedef struct cthread {
	uint32_t g;            /* index into p->threads, ANA_NONE if the model does not know it */
	uint64_t tid;
	int known;
	int pending;           /* a BEGIN not written yet */
	uint32_t pend_site;
	uint64_t pend_ns;      /* relative time of the pending BEGIN */
	uint64_t last_ns;      /* relative time of the thread's latest event */
	size_t run;            /* its NVTX run (index into nvtx.runs), SIZE_MAX: none */
} cthread;

typedef struct cctx {
	FILE *out;
	const ana_profile *p;
	const exp_options *o;
	uint64_t t0, pid;
	uint32_t proc;         /* index of the process being replayed */
	char **site_q;         /* per site id: the JSON-quoted name, made on first use */
	uint32_t nsite_q;
	cthread *th;
	uint32_t nth;
	uint64_t events;
	/* samples: the selected ones sorted by (thread, time); per model thread the next
	 * one to write and the end of its run */
	uint32_t *sidx;
	size_t *s_next, *s_end;
	uint32_t *leaf;        /* per stack: its leaf frame id, 0 until met */
	frames fr;
	nvtx nv;
	int rc;
} cctx;

/* The quoted name of site id, made from `name` (the replay's) on first use. */
static const char *site_q(cctx *c, uint32_t id, const char *name)
{
	if (id >= c->nsite_q) {
		uint32_t n = id + 1 > c->nsite_q * 2 ? id + 1 : c->nsite_q * 2;
		char **q = realloc(c->site_q, n * sizeof *q);
		if (!q) {
			c->rc = FENNEC_ENOMEM;
			return "\"?\"";
		}
		c->site_q = q;
		for (uint32_t i = c->nsite_q; i < n; i++)
			c->site_q[i] = NULL;
		c->nsite_q = n;
	}
	if (!c->site_q[id] && !(c->site_q[id] = exp_json_quote(name ? name : "?"))) {
		c->rc = FENNEC_ENOMEM;
		return "\"?\"";
	}
	return c->site_q[id];
}

/* `{"ph":"X","pid":P,"tid":T,"ts":` : every event starts so. */
/* v in decimal at b + n; returns the new n. */
static size_t put_dec(char *b, size_t n, uint64_t v)
{
	char d[20];
	int k = 0;
	do
		d[k++] = (char)('0' + v % 10);
	while ((v /= 10) != 0);
	while (k)
		b[n++] = d[--k];
	return n;
}

/* Built by hand and written at once: fprintf's parsing of this format was a third of the
 * export's instructions, with an event per region call. */
static void head(cctx *c, const char *ph, uint64_t tid, uint64_t ns)
{
	char b[128];
	size_t n = 0, l = strlen(ph);
	memcpy(b, ",\n{\"ph\":\"", 9);
	n = 9;
	if (l > 8)
		l = 8;
	memcpy(b + n, ph, l);
	n += l;
	memcpy(b + n, "\",\"pid\":", 8);
	n = put_dec(b, n + 8, c->pid);
	memcpy(b + n, ",\"tid\":", 7);
	n = put_dec(b, n + 7, tid);
	memcpy(b + n, ",\"ts\":", 6);
	fwrite(b, 1, n + 6, c->out);
	exp_put_us(c->out, ns);
	c->events++;
}

/* `,"cat":"region","name":Q` and the closing brace, where Q is a quoted name. */
static void region_tail(cctx *c, const char *q)
{
	fputs(",\"cat\":\"region\",\"name\":", c->out);
	fputs(q, c->out);
	fputc('}', c->out);
}

static void write_begin(cctx *c, cthread *t)
{
	head(c, "B", t->tid, t->pend_ns);
	region_tail(c, site_q(c, t->pend_site, NULL));
	t->pending = 0;
}

/* Any event of a thread other than its pending region's END: the region has children
 * or company, so it opens with a B. */
static void flush(cctx *c, cthread *t)
{
	if (t->pending)
		write_begin(c, t);
}

/* The stackFrames node of sample x's stack (0 when out of memory). */
static uint32_t leaf_of(cctx *c, const ana_sample *x)
{
	const ana_profile *p = c->p;
	if (c->leaf[x->stack])
		return c->leaf[x->stack];
	const ana_stack *s = &p->smp.stacks[x->stack];
	uint32_t at = 0;
	for (uint32_t j = 0; j < s->n && (j == 0 || at); j++)
		at = frame_id(&c->fr, at, s->locs[j] < p->smp.nlocs ? p->smp.locs[s->locs[j]].func : ANA_NONE);
	if (!s->n) /* an empty stack hangs off a root frame of its own */
		at = frame_id(&c->fr, 0, ANA_NONE);
	if (!at)
		c->rc = FENNEC_ENOMEM;
	return c->leaf[x->stack] = at;
}

/* Write NVTX event e on its thread (t, when the file has events of that thread). */
static void write_nvtx(cctx *c, cthread *t, const nvev *e)
{
	uint64_t ns = e->ns;
	if (t) {
		flush(c, t);
		if (ns < t->last_ns)
			ns = t->last_ns;
		t->last_ns = ns;
	}
	char ph[2] = {e->ph, 0};
	head(c, ph, e->tid, ns);
	fprintf(c->out, ",\"cat\":\"nvtx\",\"name\":%s", c->nv.quoted[e->name]);
	if (e->ph == 'i')
		fputs(",\"s\":\"t\"}", c->out);
	else {
		fprintf(c->out, ",\"id\":\"0x%x\"", e->id);
		if (e->ph == 'e' && !e->end_tid)
			fputs(",\"args\":{\"unfinished\":true}", c->out);
		else if (e->ph == 'e' && e->end_tid != e->tid)
			fprintf(c->out, ",\"args\":{\"ended_on_tid\":%llu}", (unsigned long long)e->end_tid);
		fputc('}', c->out);
	}
}

/* Write model thread g's samples and NVTX run `run`'s events up to relative time
 * `until_ns` (UINT64_MAX: all), merged in time order, on their thread's track; a pending
 * region is opened first, since its X would come after them. */
static void extras_until(cctx *c, cthread *t, uint32_t g, size_t run, uint64_t until_ns)
{
	const ana_profile *p = c->p;
	size_t *si = g != ANA_NONE && c->s_next ? &c->s_next[g] : NULL;
	nvrun *r = run != SIZE_MAX ? &c->nv.runs[run] : NULL;
	while (!c->rc) {
		const ana_sample *x = si && *si < c->s_end[g] ? &p->smp.samples[c->sidx[*si]] : NULL;
		const nvev *e = r && r->next < r->end ? &c->nv.v[r->next] : NULL;
		uint64_t ns = x ? (x->t_ns > c->t0 ? x->t_ns - c->t0 : 0) : 0;
		if (e && (!x || e->ns < ns)) {
			if (e->ns > until_ns)
				break;
			write_nvtx(c, t, e);
			r->next++;
			continue;
		}
		if (!x || ns > until_ns)
			break;
		++*si;
		if (t) {
			flush(c, t);
			if (ns < t->last_ns)
				ns = t->last_ns;
			t->last_ns = ns;
		}
		uint32_t sf = leaf_of(c, x);
		head(c, "P", exp_thread_tid(p, g), ns);
		fprintf(c->out, ",\"cat\":\"%s\",\"name\":\"%s\",\"sf\":%u,\"args\":{\"weight\":%u}}",
			x->kind == ANA_OFFCPU ? "offcpu" : "cpu", x->kind == ANA_OFFCPU ? "off-CPU sample" : "CPU sample", sf,
			x->weight ? x->weight : 1);
	}
}

/* The NVTX run of thread tid, SIZE_MAX when it has none. */
static size_t nvtx_run_of(const cctx *c, uint64_t tid)
{
	size_t lo = 0, hi = c->nv.nruns;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (c->nv.runs[mid].tid < tid)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo < c->nv.nruns && c->nv.runs[lo].tid == tid ? lo : SIZE_MAX;
}

static cthread *thread_of(cctx *c, const ana_rp_event *ev)
{
	uint32_t idx = ev->thread;
	if (idx >= c->nth) {
		uint32_t n = idx + 1 > c->nth * 2 ? idx + 1 : c->nth * 2;
		cthread *a = realloc(c->th, n * sizeof *a);
		if (!a) {
			c->rc = FENNEC_ENOMEM;
			return NULL;
		}
		memset(a + c->nth, 0, (n - c->nth) * sizeof *a);
		c->th = a;
		c->nth = n;
	}
	cthread *t = &c->th[idx];
	if (!t->known) {
		t->known = 1;
		t->tid = ev->tid;
		t->g = ev->g;
		t->run = nvtx_run_of(c, t->tid);
	}
	return t;
}

static void write_end(cctx *c, cthread *t, const ana_rp_event *ev)
{
	if (ev->unfinished) { /* closed by the replay at the thread's end (a run cut short) */
		flush(c, t);
		head(c, "E", t->tid, ev->ns);
		fprintf(c->out, ",\"cat\":\"region\",\"name\":%s,\"args\":{\"unfinished\":true}}",
			site_q(c, ev->site, ev->name));
	} else if (t->pending) {
		head(c, "X", t->tid, t->pend_ns);
		fputs(",\"dur\":", c->out);
		exp_put_us(c->out, ev->ns - t->pend_ns);
		region_tail(c, site_q(c, t->pend_site, NULL));
		t->pending = 0;
	} else {
		head(c, "E", t->tid, ev->ns);
		region_tail(c, site_q(c, ev->site, ev->name));
	}
}

static int on_event(void *vc, const ana_rp_event *ev)
{
	cctx *c = vc;
	cthread *t = thread_of(c, ev);
	if (!t)
		return c->rc;
	/* the replay's times never go back on a thread; samples and NVTX are merged up to them */
	extras_until(c, t, t->g, t->run, ev->ns);
	t->last_ns = ev->ns;
	switch (ev->kind) {
	case ANA_RP_BEGIN:
		flush(c, t);
		t->pending = 1;
		t->pend_site = ev->site;
		t->pend_ns = ev->ns;
		site_q(c, ev->site, ev->name);
		break;
	case ANA_RP_END:
		write_end(c, t, ev);
		break;
	case ANA_RP_STEP:
		flush(c, t);
		head(c, "i", t->tid, ev->ns);
		fputs(",\"s\":\"t\",\"cat\":\"step\",\"name\":\"step\",\"args\":{", c->out);
		/* The step this mark ends, counted on its thread from 1. */
		fprintf(c->out, "\"step\":%llu,\"recorded\":%s", (unsigned long long)ev->step, ev->flags & 1 ? "true" : "false");
		if (ev->flags & 2)
			fprintf(c->out, ",\"items\":%llu", (unsigned long long)ev->items);
		fputs("}}", c->out);
		break;
	case ANA_RP_COUNTER:
	case ANA_RP_GAUGE:
	case ANA_RP_VALUE: {
		const char *q = site_q(c, ev->site, ev->name);
		if (c->rc || !isfinite(ev->value))
			break; /* JSON has no NaN or infinity */
		flush(c, t);
		head(c, "C", t->tid, ev->ns);
		fprintf(c->out, ",\"cat\":\"metric\",\"name\":%s,\"args\":{\"value\":", q);
		rep_json_number(c->out, ev->value);
		fputs("}}", c->out);
		break;
	}
	default:
		break;
	}
	if (ferror(c->out))
		c->rc = FENNEC_EIO;
	return c->rc;
}

/* ---- NVTX: gathered by a first replay of a process's file ---- */

/* The index of message text in nv->quoted, added on first use; UINT32_MAX when out of memory. */
static uint32_t nvtx_name(nvtx *nv, const char *text)
{
	uint64_t h = 1469598103934665603ull;
	size_t len = 0;
	for (const unsigned char *q = (const unsigned char *)text; *q; q++, len++)
		h = (h ^ *q) * 1099511628211ull;
	int added;
	uint64_t *slot = exp_map_put(&nv->name_of, h, len, &added);
	if (!slot)
		return UINT32_MAX;
	if (!added && strcmp(nv->raw[*slot - 1], text) == 0)
		return (uint32_t)(*slot - 1);
	/* new, or a different message of the same hash and length: a row of its own, found by
	 * the map only under the first one's */
	uint32_t k = nv->nnames;
	if (added)
		*slot = (uint64_t)k + 1;
	if (k == nv->names_cap) {
		uint32_t cap = nv->names_cap ? nv->names_cap * 2 : 64;
		char **q = realloc(nv->quoted, cap * sizeof *q);
		if (q)
			nv->quoted = q;
		char **r = realloc(nv->raw, cap * sizeof *r);
		if (r)
			nv->raw = r;
		if (!q || !r)
			return UINT32_MAX;
		nv->names_cap = cap;
	}
	nv->quoted[k] = exp_json_quote(text);
	nv->raw[k] = strdup(text);
	if (!nv->quoted[k] || !nv->raw[k]) {
		free(nv->quoted[k]);
		free(nv->raw[k]);
		return UINT32_MAX;
	}
	nv->nnames++;
	return k;
}

static int nvtx_push(nvtx *nv, nvev e)
{
	if (nv->n == nv->cap) {
		size_t cap = nv->cap ? nv->cap * 2 : 256;
		nvev *v = realloc(nv->v, cap * sizeof *v);
		if (!v)
			return FENNEC_ENOMEM;
		nv->v = v;
		nv->cap = cap;
	}
	e.seq = (uint32_t)nv->n;
	nv->v[nv->n++] = e;
	return 0;
}

static int nvtx_gather_event(void *vc, const ana_rp_event *ev)
{
	cctx *c = vc;
	nvtx *nv = &c->nv;
	if (ev->kind == ANA_RP_NVTX_END) {
		if (ev->range >= nv->nbegin)
			return 0; /* cannot happen: the replay delivers each start before its end */
		const nvev *b = &nv->v[nv->begin_of[ev->range]];
		nvev e = {.tid = b->tid, .ns = ev->ns, .end_tid = ev->end_tid, .id = b->id, .name = b->name, .ph = 'e'};
		return c->rc = nvtx_push(nv, e);
	}
	uint32_t name = nvtx_name(nv, ev->name ? ev->name : "");
	if (name == UINT32_MAX)
		return c->rc = FENNEC_ENOMEM;
	nvev e = {.tid = ev->tid, .ns = ev->ns, .name = name, .ph = ev->kind == ANA_RP_NVTX_MARK ? 'i' : 'b'};
	if (e.ph == 'b') {
		if (ev->range >= nv->begin_cap) {
			size_t cap = nv->begin_cap ? nv->begin_cap * 2 : 64;
			if (cap <= ev->range)
				cap = (size_t)ev->range + 1;
			size_t *a = realloc(nv->begin_of, cap * sizeof *a);
			if (!a)
				return c->rc = FENNEC_ENOMEM;
			nv->begin_of = a;
			nv->begin_cap = cap;
		}
		nv->begin_of[ev->range] = nv->n;
		if (ev->range >= nv->nbegin)
			nv->nbegin = (size_t)ev->range + 1;
		e.id = ++nv->next_id;
	}
	return c->rc = nvtx_push(nv, e);
}

static int by_track_time(const void *a, const void *b)
{
	const nvev *x = a, *y = b;
	if (x->tid != y->tid)
		return x->tid < y->tid ? -1 : 1;
	if (x->ns != y->ns)
		return x->ns < y->ns ? -1 : 1;
	return (x->seq > y->seq) - (x->seq < y->seq);
}

/* Replay process i's file for its NVTX events (ranges paired by the replay; one never
 * ended ends with the file, marked unfinished), sorted by (thread, time), and each
 * thread's run. */
static int nvtx_gather(cctx *c, uint32_t i)
{
	nvtx *nv = &c->nv;
	fmt_error err;
	ana_replay_opts ro = {.what = ANA_RP_NVTX, .has_tid = c->o->has_tid, .tid = c->o->tid};
	int rc = ana_replay(c->p, i, &ro, nvtx_gather_event, c, &err);
	if (c->rc || rc == FENNEC_ENOMEM)
		return c->rc ? c->rc : rc; /* other errors: the second replay reports them */
	if (nv->n > 1)
		qsort(nv->v, nv->n, sizeof *nv->v, by_track_time);
	size_t nruns = 0;
	for (size_t k = 0; k < nv->n; k++)
		nruns += !k || nv->v[k].tid != nv->v[k - 1].tid;
	if (nruns && !(nv->runs = malloc(nruns * sizeof *nv->runs)))
		return FENNEC_ENOMEM;
	for (size_t k = 0; k < nv->n; k++) {
		if (!k || nv->v[k].tid != nv->v[k - 1].tid)
			nv->runs[nv->nruns++] = (nvrun){nv->v[k].tid, k, k};
		nv->runs[nv->nruns - 1].end = k + 1;
	}
	return 0;
}

/* After a process: its events go, the messages stay (the next process may use them). */
static void nvtx_reset(nvtx *nv)
{
	free(nv->v);
	free(nv->runs);
	free(nv->begin_of);
	nv->v = NULL;
	nv->runs = NULL;
	nv->begin_of = NULL;
	nv->n = nv->cap = nv->nruns = nv->nbegin = nv->begin_cap = 0;
}

static void nvtx_free(nvtx *nv)
{
	nvtx_reset(nv);
	for (uint32_t k = 0; k < nv->nnames; k++) {
		free(nv->quoted[k]);
		free(nv->raw[k]);
	}
	free(nv->quoted);
	free(nv->raw);
	exp_map_free(&nv->name_of);
}

/* Whether the analysis saw NVTX start/end ranges or marks. */
static int has_nvtx(const ana_profile *p)
{
	const ana_gpu *g = p->gpu;
	return g && (g->nnvtx_ranges || g->nnvtx_marks || g->nvtx_open || g->nvtx_unmatched);
}

/* Replay process i's file and write its events. */
static int replay(cctx *c, uint32_t i, fmt_error *err)
{
	const ana_profile *p = c->p;
	c->pid = p->procs[i].file.pid;
	c->proc = i;
	if (has_nvtx(p) && p->procs[i].file.has_gpu) {
		int nrc = nvtx_gather(c, i);
		if (nrc) {
			nvtx_reset(&c->nv);
			return c->rc = nrc;
		}
	}
	ana_replay_opts ro = {.what = ANA_RP_REGIONS | ANA_RP_MARKS, .has_tid = c->o->has_tid, .tid = c->o->tid};
	int rc = ana_replay(p, i, &ro, on_event, c, err);
	/* The rest of this process's samples and NVTX events: threads after their last event,
	 * threads that only were sampled, and threads that only used NVTX. */
	for (uint32_t g = 0; g < p->nthreads && !rc; g++)
		if (p->threads[g].process == i) {
			cthread *t = NULL;
			for (uint32_t k = 0; k < c->nth; k++)
				if (c->th[k].known && c->th[k].g == g)
					t = &c->th[k];
			extras_until(c, t, g, t ? t->run : nvtx_run_of(c, exp_thread_tid(p, g)), UINT64_MAX);
		}
	for (uint32_t k = 0; k < c->nth && !rc; k++)
		if (c->th[k].known && c->th[k].run != SIZE_MAX)
			extras_until(c, &c->th[k], ANA_NONE, c->th[k].run, UINT64_MAX);
	for (size_t k = 0; k < c->nv.nruns && !rc; k++)
		extras_until(c, NULL, ANA_NONE, k, UINT64_MAX);
	if (!rc)
		rc = c->rc;
	for (uint32_t k = 0; k < c->nsite_q; k++)
		free(c->site_q[k]);
	free(c->site_q);
	free(c->th);
	nvtx_reset(&c->nv);
	c->site_q = NULL;
	c->th = NULL;
	c->nsite_q = c->nth = 0;
	return rc ? rc : ferror(c->out) ? FENNEC_EIO : 0;
}

static const char *base_name(const char *path)
{
	const char *s = path ? strrchr(path, '/') : NULL;
	return s ? s + 1 : path ? path : "";
}

/* Metadata: process and thread names, written before the events. */
static void metadata(cctx *c)
{
	const ana_profile *p = c->p;
	FILE *out = c->out;
	exp_map seen = {0};
	int first = 1;
	for (uint32_t i = 0; i < p->nprocs; i++) {
		const fmt_file *f = &p->procs[i].file;
		int added;
		/* An exec keeps the pid: the process is named after its first image. */
		if (!exp_map_put(&seen, f->pid, 0, &added) || !added)
			continue;
		char name[512];
		const char *exe = f->exe && f->exe[0] ? f->exe : f->cmdline;
		if (f->rank >= 0)
			snprintf(name, sizeof name, "%s (rank %lld)", base_name(exe), (long long)f->rank);
		else
			snprintf(name, sizeof name, "%s", base_name(exe));
		fprintf(out, "%s{\"ph\":\"M\",\"pid\":%llu,\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":",
			first ? "" : ",\n", (unsigned long long)f->pid);
		rep_json_string(out, name);
		fprintf(out, "}},\n{\"ph\":\"M\",\"pid\":%llu,\"tid\":0,\"name\":\"process_sort_index\",\"args\":{\"sort_index\":%u}}",
			(unsigned long long)f->pid, i);
		first = 0;
	}
	exp_map_free(&seen);
	exp_sel sel;
	if (exp_sel_init(&sel, p, c->o) == 0)
		for (uint32_t t = 0; t < p->nthreads; t++) {
			if (!exp_sel_thread(&sel, t))
				continue;
			fprintf(out, "%s{\"ph\":\"M\",\"pid\":%llu,\"tid\":%llu,\"name\":\"thread_name\",\"args\":{\"name\":",
				first ? "" : ",\n", (unsigned long long)exp_thread_pid(p, t),
				(unsigned long long)exp_thread_tid(p, t));
			rep_json_string(out, exp_thread_name(p, t));
			fputs("}}", out);
			first = 0;
		}
	else
		c->rc = FENNEC_ENOMEM;
	exp_sel_fini(&sel);
	if (first) /* no process at all cannot happen after ana_load; keep the array valid */
		fputs("{\"ph\":\"M\",\"pid\":0,\"tid\":0,\"name\":\"process_name\",\"args\":{\"name\":\"fennec\"}}", out);
}

static int by_thread_time(const void *a, const void *b, void *arg)
{
	const ana_profile *p = arg;
	uint32_t i = *(const uint32_t *)a, j = *(const uint32_t *)b;
	const ana_sample *x = &p->smp.samples[i], *y = &p->smp.samples[j];
	if (x->thread != y->thread)
		return x->thread < y->thread ? -1 : 1;
	if (x->t_ns != y->t_ns)
		return x->t_ns < y->t_ns ? -1 : 1;
	return (i > j) - (i < j);
}

/* The samples the options select, sorted by (thread, time), and each thread's run. */
static int select_samples(cctx *c)
{
	const ana_profile *p = c->p;
	exp_sel sel;
	size_t n = 0;
	int rc = exp_sel_init(&sel, p, c->o);
	if (!rc && p->smp.nsamples) {
		c->sidx = malloc(p->smp.nsamples * sizeof *c->sidx);
		c->s_next = calloc(p->nthreads ? p->nthreads : 1, sizeof *c->s_next);
		c->s_end = calloc(p->nthreads ? p->nthreads : 1, sizeof *c->s_end);
		c->leaf = calloc(p->smp.nstacks ? p->smp.nstacks : 1, sizeof *c->leaf);
		if (!c->sidx || !c->s_next || !c->s_end || !c->leaf)
			rc = FENNEC_ENOMEM;
	}
	for (size_t i = 0; i < p->smp.nsamples && !rc; i++)
		if (exp_sel_sample(&sel, &p->smp.samples[i]) && p->smp.samples[i].thread < p->nthreads)
			c->sidx[n++] = (uint32_t)i;
	exp_sel_fini(&sel);
	if (rc || !n)
		return rc;
	qsort_r(c->sidx, n, sizeof *c->sidx, by_thread_time, (void *)p);
	for (size_t i = n; i-- > 0;)
		c->s_next[p->smp.samples[c->sidx[i]].thread] = i;
	for (size_t i = 0; i < n; i++)
		c->s_end[p->smp.samples[c->sidx[i]].thread] = i + 1;
	return 0;
}

int exp_chrome_trace(FILE *out, const ana_profile *p, const exp_options *o, fmt_error *err)
{
	cctx c = {.out = out, .p = p, .o = o, .t0 = ana_replay_t0_ns(p)};
	memset(err, 0, sizeof *err);
	fputs("{\"displayTimeUnit\":\"ns\",\n\"otherData\":{\"exporter\":", out);
	char ver[64];
	snprintf(ver, sizeof ver, "fennec %d.%d.%d", FENNEC_VERSION_MAJOR, FENNEC_VERSION_MINOR, FENNEC_VERSION_PATCH);
	rep_json_string(out, ver);
	if (p->nprocs) {
		fputs(",\"command\":", out);
		rep_json_string(out, p->procs[0].file.cmdline);
		fprintf(out, ",\"start_realtime_ns\":%llu", (unsigned long long)p->procs[0].file.start_real_ns);
	}
	fputs("},\n\"traceEvents\":[\n", out);
	metadata(&c);
	int rc = c.rc;
	if (!rc)
		rc = select_samples(&c);
	for (uint32_t i = 0; i < p->nprocs && !rc; i++)
		rc = replay(&c, i, err);
	frames fr = c.fr;
	if (!rc) {
		fputs("\n],\n\"stackFrames\":{", out);
		for (uint32_t i = 0; i < fr.n; i++) {
			uint32_t func = fr.v[i].func;
			fprintf(out, "%s\n\"%u\":{\"name\":", i ? "," : "", i + 1);
			rep_json_string(out, func == ANA_NONE ? "[no stack]" : exp_func_name(p, func));
			fputs(",\"category\":", out);
			rep_json_string(out, func == ANA_NONE ? "" : base_name(exp_func_module(p, func)));
			if (fr.v[i].parent)
				fprintf(out, ",\"parent\":\"%u\"", fr.v[i].parent);
			fputc('}', out);
		}
		fputs("\n}}\n", out);
		rc = ferror(out) ? FENNEC_EIO : 0;
	}
	free(c.fr.v);
	exp_map_free(&c.fr.index);
	nvtx_free(&c.nv);
	free(c.sidx);
	free(c.s_next);
	free(c.s_end);
	free(c.leaf);
	return rc;
}

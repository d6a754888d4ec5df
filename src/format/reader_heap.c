/*
 * reader_heap.c - the reader's decoding of the heap's chunks: HEAP (1.3), HEAP2 and REACH
 * (docs/format.md, "Heap"). reader.c's chunk loop calls the decoders.
 */
#include "format/decode.h"

#define MAX_HEAP_STACKS (1u << 24)

static int heap_stack(rd *r, cur *c, const uint8_t *at, const uint8_t *base)
{
	fmt_file *f = r->f;
	uint64_t id = cur_varint(c);
	unsigned trunc = cur_u8(c);
	uint64_t nr = cur_varint(c);
	if (c->bad || id == 0 || id >= MAX_HEAP_STACKS || (trunc & ~3u) || nr > FMT_MAX_REGIONS)
		return fail(r, FENNEC_ECORRUPT, r->chunk_off, "HEAP: bad stack record at payload byte %td", at - base);
	if (grow((void **)&f->heap_stacks, &f->nheap_stacks, (uint32_t)id + 1, sizeof *f->heap_stacks, MAX_HEAP_STACKS) < 0)
		return fail(r, FENNEC_ENOMEM, r->chunk_off, "out of memory");
	fmt_heap_stack *st = &f->heap_stacks[id];
	if (st->defined)
		return fail(r, FENNEC_ECORRUPT, r->chunk_off, "HEAP: stack %llu defined twice", (unsigned long long)id);
	st->regions = malloc(sizeof *st->regions * (nr ? nr : 1));
	if (!st->regions)
		return fail(r, FENNEC_ENOMEM, r->chunk_off, "out of memory");
	for (uint64_t k = 0; k < nr; k++) {
		uint64_t s = cur_varint(c);
		if (s == 0 || s >= f->nsites || !f->sites[s].defined || f->sites[s].kind != FMT_SITE_REGION)
			c->bad = 1;
		st->regions[k] = (uint32_t)s;
	}
	st->nregions = (uint32_t)nr;
	uint64_t nf = cur_varint(c);
	if (c->bad || nf > FMT_MAX_FRAMES)
		return fail(r, FENNEC_ECORRUPT, r->chunk_off, "HEAP: bad region or frame count in the stack at payload byte %td", at - base);
	st->frames = malloc(sizeof *st->frames * (nf ? nf : 1));
	if (!st->frames)
		return fail(r, FENNEC_ENOMEM, r->chunk_off, "out of memory");
	uint64_t a = 0;
	for (uint64_t k = 0; k < nf; k++) {
		uint64_t v = cur_varint(c);
		a = k ? a + (uint64_t)cm_unzigzag(v) : v;
		st->frames[k] = a;
	}
	st->nframes = (uint32_t)nf;
	if (trunc & FMT_HS_PYTHON) {
		uint64_t npy = cur_varint(c);
		if (c->bad || npy > FMT_MAX_FRAMES)
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "HEAP: bad Python frame count in the stack at payload byte %td", at - base);
		st->pyframes = malloc(sizeof *st->pyframes * (npy ? npy : 1));
		if (!st->pyframes)
			return fail(r, FENNEC_ENOMEM, r->chunk_off, "out of memory");
		for (uint64_t k = 0; k < npy; k++) {
			uint64_t code = cur_varint(c), line = cur_varint(c);
			if (code >> 33 || line > 0x7fffffff)
				c->bad = 1;
			st->pyframes[k] = fmt_pyframe((uint32_t)(code >> 1), (uint32_t)line, (unsigned)(code & 1));
		}
		st->npy = (uint32_t)npy;
	}
	st->truncated = (int)(trunc & FMT_HS_TRUNCATED);
	st->defined = 1;
	return c->bad ? fail(r, FENNEC_ECORRUPT, r->chunk_off, "HEAP: stack at payload byte %td runs past the end of the chunk", at - base) : 0;
}

/* A SNAP record's body, the same in HEAP and HEAP2: step, the five heap numbers, flags. */
static void heap_snap(cur *c, fmt_event *ev)
{
	ev->type = FMT_EV_HEAP_SNAP;
	ev->u = cur_varint(c);
	for (int k = 0; k < 5; k++)
		ev->heap[k] = cur_varint(c);
	ev->flags = cur_u8(c);
	if (ev->flags > FMT_SNAP_FINAL)
		c->bad = 1;
}

/* The counters that open a HEAP or HEAP2 chunk. */
static int heap_counters(rd *r, cur *c)
{
	fmt_file *f = r->f;
	fmt_heap_counters *h = &f->heap;
	uint64_t *cv[] = {&h->allocs, &h->frees, &h->alloc_bytes, &h->live_bytes, &h->peak_bytes, &h->peak_ticks,
			  &h->peak_step, &h->peak_site, &h->largest_bytes, &h->records, &h->dropped, &h->truncated,
			  &h->untracked};
	for (size_t i = 0; i < sizeof cv / sizeof cv[0]; i++)
		*cv[i] = cur_varint(c);
	if (c->bad)
		return fail(r, FENNEC_ECORRUPT, r->chunk_off, "HEAP: counters run past the end of the chunk");
	f->has_heap = 1;
	return 0;
}

int decode_heap(rd *r, cur *c)
{
	fmt_file *f = r->f;
	int rc = heap_counters(r, c);
	if (rc)
		return rc;
	uint64_t t = 0;
	const uint8_t *base = c->p;
	while (c->p < c->end && !c->bad) {
		const uint8_t *at = c->p;
		unsigned type = cur_u8(c);
		fmt_event ev = {.thread = UINT32_MAX};
		switch (type) {
		case FMT_HR_STACK:
			rc = heap_stack(r, c, at, base);
			if (rc)
				return rc;
			continue;
		case FMT_HR_ALLOC:
			ev.type = FMT_EV_ALLOC;
			ev.tid = cur_varint(c);
			t += (uint64_t)cm_unzigzag(cur_varint(c));
			ev.u = cur_varint(c);
			ev.addr = cur_varint(c);
			ev.size = cur_varint(c);
			uint64_t id = cur_varint(c);
			if (!c->bad && !fmt_heap_stack_get(f, id))
				return fail(r, FENNEC_ECORRUPT, r->chunk_off, "HEAP: allocation at payload byte %td names undefined stack %llu",
					    at - base, (unsigned long long)id);
			ev.id = (uint32_t)id;
			break;
		case FMT_HR_FREE:
			ev.type = FMT_EV_FREE;
			ev.tid = cur_varint(c);
			t += (uint64_t)cm_unzigzag(cur_varint(c));
			ev.addr = cur_varint(c);
			break;
		case FMT_HR_SNAP:
			t += (uint64_t)cm_unzigzag(cur_varint(c));
			heap_snap(c, &ev);
			break;
		default:
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "HEAP: unknown record type %u at payload byte %td", type, at - base);
		}
		if (c->bad || (int64_t)t < 0)
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "HEAP: bad record at payload byte %td", at - base);
		ev.ticks = t;
		if (t > f->last_ticks)
			f->last_ticks = t;
		if (r->fn && (rc = r->fn(r->ctx, f, &ev)) != 0)
			return rc;
	}
	return c->bad ? fail(r, FENNEC_ECORRUPT, r->chunk_off, "HEAP: record runs past the end of the chunk") : 0;
}

/* REACH (1.6): the reachability scan at the end of a full-mode session, per heap stack.
 * One per file; its stacks must have been defined. */
int decode_reach(rd *r, cur *c)
{
	fmt_file *f = r->f;
	if (f->has_reach)
		return fail(r, FENNEC_ECORRUPT, r->chunk_off, "REACH: a second REACH chunk");
	f->reach_status = cur_varint(c);
	f->reach_ns = cur_varint(c);
	f->reach_root_bytes = cur_varint(c);
	f->reach_heap_bytes = cur_varint(c);
	uint64_t n = cur_varint(c);
	if (c->bad || (n && f->reach_status) || n > (uint64_t)(c->end - c->p) / 5)
		return fail(r, FENNEC_ECORRUPT, r->chunk_off, "REACH: bad chunk prefix");
	f->reach = n ? calloc(n, sizeof *f->reach) : NULL;
	if (n && !f->reach)
		return fail(r, FENNEC_ENOMEM, r->chunk_off, "out of memory for %llu REACH entries", (unsigned long long)n);
	for (uint64_t i = 0; i < n; i++) {
		fmt_reach *e = &f->reach[i];
		e->stack = cur_varint(c);
		e->reach_count = cur_varint(c);
		e->reach_bytes = cur_varint(c);
		e->lost_count = cur_varint(c);
		e->lost_bytes = cur_varint(c);
		if (c->bad || !fmt_heap_stack_get(f, e->stack) || (!e->reach_count && !e->lost_count) ||
		    (i && e->stack <= f->reach[i - 1].stack))
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "REACH: bad entry %llu", (unsigned long long)i);
	}
	if (c->p != c->end)
		return fail(r, FENNEC_ECORRUPT, r->chunk_off, "REACH: %td bytes after the entries", c->end - c->p);
	f->nreach = (uint32_t)n;
	f->has_reach = 1;
	return 0;
}

/* A thread of a HEAP2 chunk: the state its records leave implied. */
typedef struct h2thread {
	uint64_t tid;
	uint64_t stack;      /* of its latest ALLOC or FREE (0: none yet) */
	uint64_t last_stack; /* its latest ALLOC, while not freed (0: none) */
	uint64_t last_size;
} h2thread;

int decode_heap2(rd *r, cur *c)
{
	fmt_file *f = r->f;
	int rc = heap_counters(r, c);
	if (rc)
		return rc;
	uint64_t shift = cur_varint(c);
	if (c->bad || shift > 62)
		return fail(r, FENNEC_ECORRUPT, r->chunk_off, "HEAP2: bad time unit");
	uint64_t q = 0, step = 0;
	h2thread *th = NULL;
	uint32_t nth = 0, cap = 0, cur_th = UINT32_MAX;
	const uint8_t *base = c->p;
	while (c->p < c->end && !c->bad) {
		const uint8_t *at = c->p;
		unsigned tag = cur_u8(c), type = tag & FMT_H2_TYPE, fl = tag & ~(unsigned)FMT_H2_TYPE;
		fmt_event ev = {.thread = UINT32_MAX};
		h2thread *t = cur_th < nth ? &th[cur_th] : NULL;
		const char *bad = NULL;
		if (fl && type != FMT_H2_ALLOC && type != FMT_H2_FREE)
			bad = "flags on a record that takes none";
		else if ((type == FMT_H2_ALLOC || type == FMT_H2_FREE) && !t)
			bad = "an allocation or free before any THREAD record";
		if (bad) {
			free(th);
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "HEAP2: %s at payload byte %td", bad, at - base);
		}
		switch (type) {
		case FMT_H2_TIME:
			q += (uint64_t)cm_unzigzag(cur_varint(c));
			if (q > (UINT64_MAX >> 1 >> shift))
				c->bad = 1;
			continue;
		case FMT_H2_STEP:
			step = cur_varint(c);
			continue;
		case FMT_H2_THREAD: {
			uint64_t idx = cur_varint(c);
			if (idx == nth && !c->bad) { /* a thread new to this chunk: its tid follows */
				if (grow((void **)&th, &cap, nth + 1, sizeof *th, MAX_THREADS) < 0) {
					free(th);
					return fail(r, FENNEC_ENOMEM, r->chunk_off, "out of memory");
				}
				th[nth++] = (h2thread){cur_varint(c), 0, 0, 0};
			} else if (idx > nth) {
				c->bad = 1;
			}
			cur_th = (uint32_t)idx;
			continue;
		}
		case FMT_H2_STACK:
			rc = heap_stack(r, c, at, base);
			if (rc) {
				free(th);
				return rc;
			}
			continue;
		case FMT_H2_ALLOC:
			ev.type = FMT_EV_ALLOC;
			ev.size = cur_varint(c);
			ev.id = (uint32_t)(fl & FMT_H2_SAME ? t->stack : cur_varint(c));
			if (fl & ~(unsigned)FMT_H2_SAME)
				c->bad = 1;
			t->stack = t->last_stack = ev.id;
			t->last_size = ev.size;
			ev.u = step;
			ev.flags = FMT_HEV_NOADDR;
			break;
		case FMT_H2_FREE:
			ev.type = FMT_EV_FREE;
			ev.flags = FMT_HEV_NOADDR;
			if (fl & FMT_H2_LAST) {
				if (fl != FMT_H2_LAST || !t->last_stack)
					c->bad = 1;
				ev.id = (uint32_t)t->last_stack;
				ev.size = t->last_size;
				ev.flags |= FMT_HEV_TEMP;
			} else {
				ev.id = (uint32_t)(fl & FMT_H2_SAME ? t->stack : cur_varint(c));
				ev.size = cur_varint(c);
				if (fl & FMT_H2_TEMP)
					ev.flags |= FMT_HEV_TEMP;
			}
			if (ev.flags & FMT_HEV_TEMP)
				t->last_stack = 0;
			t->stack = ev.id;
			break;
		case FMT_H2_SNAP:
			heap_snap(c, &ev);
			break;
		default:
			free(th);
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "HEAP2: unknown record type %u at payload byte %td", type,
				    at - base);
		}
		if (c->bad) {
			free(th);
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "HEAP2: bad record at payload byte %td", at - base);
		}
		if (type != FMT_H2_SNAP) {
			if (!fmt_heap_stack_get(f, ev.id)) {
				free(th);
				return fail(r, FENNEC_ECORRUPT, r->chunk_off, "HEAP2: %s at payload byte %td names undefined stack %u",
					    type == FMT_H2_ALLOC ? "allocation" : "free", at - base, ev.id);
			}
			ev.tid = t->tid;
		}
		ev.ticks = q << shift;
		if (ev.ticks > f->last_ticks)
			f->last_ticks = ev.ticks;
		if (r->fn && (rc = r->fn(r->ctx, f, &ev)) != 0) {
			free(th);
			return rc;
		}
	}
	free(th);
	return c->bad ? fail(r, FENNEC_ECORRUPT, r->chunk_off, "HEAP2: record runs past the end of the chunk") : 0;
}


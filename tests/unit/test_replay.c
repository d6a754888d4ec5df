/*
 * test_replay.c - the replay's answers (src/analyze/replay.c) on corpus recordings,
 * checked against the file's own events read here: ana_replay_open_at's regions open on a
 * thread at a tick (just before each region event, at it, past the end, and for a tid the
 * file does not have), and a whole replay of region ends (ANA_RP_ENDS), whose calls must
 * be the file's, each with its begin's time. The files are the repository's: run from
 * elsewhere (tests/integration/test_export.py runs the binary in a scratch folder), the
 * test says so and checks nothing.
 */
#include <stdlib.h>

#include "analyze/replay.h"
#include "unit.h"

typedef struct rev {
	uint64_t tid, ticks;
	unsigned type;
	uint32_t id;
} rev;

typedef struct revs {
	rev *v;
	size_t n, cap;
} revs;

static int collect(void *ctx, const fmt_file *f, const fmt_event *ev)
{
	revs *r = ctx;
	if ((ev->type != FMT_EV_BEGIN && ev->type != FMT_EV_END) || ev->thread >= f->nthreads)
		return 0;
	if (r->n == r->cap) {
		r->cap = r->cap ? 2 * r->cap : 256;
		r->v = realloc(r->v, r->cap * sizeof *r->v);
	}
	r->v[r->n++] = (rev){f->threads[ev->thread].tid, ev->ticks, ev->type, ev->id};
	return 0;
}

/* The sites open on tid after its region events up to `ticks`, from the file's events. */
static uint32_t expected(const revs *r, uint64_t tid, uint64_t ticks, uint32_t *sites)
{
	uint32_t n = 0;
	for (size_t i = 0; i < r->n; i++)
		if (r->v[i].tid == tid && r->v[i].ticks <= ticks) {
			if (r->v[i].type == FMT_EV_BEGIN)
				sites[n++] = r->v[i].id;
			else if (n)
				n--;
		}
	return n;
}

typedef struct got {
	uint32_t *n;          /* per question: sites open, UINT32_MAX: not answered */
	uint32_t (*sites)[64];
	size_t calls;
} got;

static int on_answer(void *ctx, size_t i, const uint32_t *sites, uint32_t n)
{
	got *g = ctx;
	g->calls++;
	g->n[i] = n;
	for (uint32_t d = 0; d < n && d < 64; d++)
		g->sites[i][d] = sites[d];
	return 0;
}

typedef struct ends {
	size_t n, bad;
} ends;

static int on_end(void *ctx, const ana_rp_event *ev)
{
	ends *e = ctx;
	if (ev->kind != ANA_RP_END) {
		e->bad++;
		return 0;
	}
	e->n++;
	e->bad += ev->begin_ns > ev->ns;
	return 0;
}

static void check_file(int *unit_failures, const char *path)
{
	ana_options opt = {0};
	ana_profile p;
	fmt_error err;
	FILE *probe = fopen(path, "rb");
	if (!probe) { /* run from elsewhere than the repository (test_export.py does) */
		printf("    %s: not here, not checked\n", path);
		return;
	}
	fclose(probe);
	int rc = ana_load(path, &opt, &p, &err);
	UNIT_CHECK_EQ(rc, 0);
	if (rc)
		return;
	fmt_file f;
	revs r = {0};
	UNIT_CHECK_EQ(fmt_read_ex(path, 0, &f, collect, &r, &err), 0);
	fmt_file_free(&f);
	UNIT_CHECK(r.n > 0);
	if (!r.n) {
		ana_profile_free(&p);
		return;
	}

	size_t nq = 2 * r.n + 2;
	ana_rp_at *q = calloc(nq, sizeof *q);
	got g = {calloc(nq, sizeof *g.n), calloc(nq, sizeof *g.sites), 0};
	size_t k = 0;
	for (size_t i = 0; i < r.n; i++) {
		q[k++] = (ana_rp_at){r.v[i].tid, r.v[i].ticks ? r.v[i].ticks - 1 : 0};
		q[k++] = (ana_rp_at){r.v[i].tid, r.v[i].ticks};
	}
	q[k++] = (ana_rp_at){r.v[0].tid, UINT64_MAX - 1};
	q[k++] = (ana_rp_at){12345678, r.v[0].ticks}; /* no such thread */
	for (size_t i = 0; i < nq; i++)
		g.n[i] = UINT32_MAX;
	UNIT_CHECK_EQ(ana_replay_open_at(&p, 0, q, nq, on_answer, &g), 0);
	UNIT_CHECK_EQ(g.calls, nq);
	size_t wrong = 0;
	for (size_t i = 0; i < nq; i++) {
		uint32_t want[64];
		uint32_t n = expected(&r, q[i].tid, q[i].ticks, want);
		int ok = g.n[i] == n;
		for (uint32_t d = 0; ok && d < n; d++)
			ok = g.sites[i][d] == want[d];
		if (!ok && wrong++ < 5)
			printf("    %s: question %zu (tid %llu, tick %llu): %u sites open, expected %u\n", path, i,
			       (unsigned long long)q[i].tid, (unsigned long long)q[i].ticks, g.n[i], n);
	}
	UNIT_CHECK_EQ(wrong, 0);

	size_t begins = 0;
	for (size_t i = 0; i < r.n; i++)
		begins += r.v[i].type == FMT_EV_BEGIN;
	ana_replay_opts ro = {.what = ANA_RP_ENDS, .whole = 1};
	ends e = {0};
	UNIT_CHECK_EQ(ana_replay(&p, 0, &ro, on_end, &e, &err), 0);
	UNIT_CHECK_EQ(e.n, begins); /* every call ends, those open at the end too */
	UNIT_CHECK_EQ(e.bad, 0);

	free(q);
	free(g.n);
	free(g.sites);
	free(r.v);
	ana_profile_free(&p);
}

UNIT_TEST(replay_open_at)
{
	check_file(unit_failures, "tests/corpus/valid_nested_raw.fnc");
	check_file(unit_failures, "tests/corpus/valid_threads_raw.fnc");
	check_file(unit_failures, "tests/corpus/no_end.fnc");
}

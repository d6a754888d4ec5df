/*
 * test_export.c - unit tests of the exporters (src/export/) on a profile built by hand,
 * whose stacks, weights, threads and regions are known by construction: collapsed
 * stacks, the pprof encoding (inflated and decoded again here), the flame graph, the
 * speedscope and Chrome trace documents, the filters, and the no-samples error.
 *
 * With FENNEC_EXPORT_DIR set, the exports of the hand-built profile are also written
 * there, for tests/integration/test_export.py to feed to the real consumers.
 */
#include <stdlib.h>
#include <unistd.h>
#include <zlib.h>

#include "export/internal.h"
#include "format/format.h"
#include "unit.h"

/* ---- the profile ----
 * functions: main (prog.c:10), work (prog.c:20), inl (inlined into work, prog.c:30),
 *            leaf (libm, no file), sleep (libc, no file)
 * stacks:    S0 main > work > inl > leaf     (work and inl share address 0x2000)
 *            S1 main > work
 *            S2 main > sleep
 * samples:   thread main [100] in outer/inner: S0 x5             (cpu)
 *            thread main [100] in outer:       S1 x3, one of weight 2 (cpu, weight 4)
 *            thread worker [101], no region:   S1 x2             (cpu)
 *            thread worker [101]:              S2 x4             (off-CPU)
 * so: cpu weight 11 (S0 5, S1 6), off-CPU weight 4, 14 samples. */

enum { F_MAIN, F_WORK, F_INL, F_LEAF, F_SLEEP, NFUNCS };
enum { N_MAIN, N_WORK, N_INL, N_LEAF, N_SLEEP, N_PROG, N_LIBM, N_LIBC, N_PROGC, N_OUTER, N_INNER, NNAMES };
#define PERIOD_NS 1000000u

typedef struct fixture {
	ana_profile p;
	char path[64];
	fmt_segment segs[3];
	fmt_module mods[3];
	uint8_t build_id[2];
	uint32_t s0[4], s1[2], s2[2];
} fixture;

/* A file with only a HEADER chunk: what the trace exporters read again (no events). */
static int write_header_file(const char *path)
{
	cm_buf out = {0}, h = {0};
	uint8_t pre[FMT_PREAMBLE_LEN];
	fmt_preamble(pre);
	cm_buf_put(&out, pre, sizeof pre);
	fmt_hdr_varint(&h, FMT_H_RECORDING, 7);
	fmt_hdr_varint(&h, FMT_H_PID, 42);
	fmt_hdr_varint(&h, FMT_H_START_MONO, 1000000000);
	fmt_hdr_varint(&h, FMT_H_START_TICKS, 1000000000);
	fmt_hdr_varint(&h, FMT_H_CLOCK, 1);
	fmt_chunk_append(&out, FMT_HEADER, h.data, h.len, 0, NULL);
	FILE *f = fopen(path, "wb");
	int ok = f && fwrite(out.data, 1, out.len, f) == out.len;
	if (f)
		ok &= fclose(f) == 0;
	cm_buf_free(&out);
	cm_buf_free(&h);
	return ok ? 0 : -1;
}

static void fixture_init(fixture *x)
{
	static const char *names[NNAMES] = {"main", "work", "inl", "leaf", "sleep", "/usr/bin/prog",
					    "/usr/lib/libm.so.6", "/usr/lib/libc.so.6", "prog.c", "outer", "inner"};
	static ana_func funcs[NFUNCS] = {
		{N_MAIN, N_PROG, N_PROGC, 10, {0}, {0}, 0}, {N_WORK, N_PROG, N_PROGC, 20, {0}, {0}, 0},
		{N_INL, N_PROG, N_PROGC, 30, {0}, {0}, 0},  {N_LEAF, N_LIBM, ANA_NONE, 0, {0}, {0}, 0},
		{N_SLEEP, N_LIBC, ANA_NONE, 0, {0}, {0}, 0},
	};
	static ana_loc locs[5] = {
		{F_MAIN, N_PROGC, 11, 0, 0x1100, 0x1100, 0}, {F_WORK, N_PROGC, 21, 0, 0x2000, 0x2000, 0},
		{F_INL, N_PROGC, 31, 0, 0x2000, 0x2000, 1},  {F_LEAF, ANA_NONE, 0, 0, 0x7f0000001000, 0x1000, 0},
		{F_SLEEP, ANA_NONE, 0, 0, 0x7f1000002000, 0x2000, 0},
	};
	static ana_thread threads[2] = {{0, 0, 100, "main", 0, 0, 0, 0, 0, 0, 0}, {0, 1, 101, "worker", 0, 0, 0, 0, 0, 0, 0}};
	static ana_node nodes[2];
	static char path_outer[] = "outer", path_inner[] = "outer/inner";
	static ana_process proc;
	memset(x, 0, sizeof *x);
	ana_profile *p = &x->p;
	p->names = (char **)names;
	p->nnames = NNAMES;
	nodes[0] = (ana_node){.name = N_OUTER, .parent = ANA_NONE, .first_child = 1, .next_sibling = ANA_NONE, .path = path_outer};
	nodes[1] = (ana_node){.name = N_INNER, .parent = 0, .depth = 1, .first_child = ANA_NONE, .next_sibling = ANA_NONE,
			      .path = path_inner};
	p->nodes = nodes;
	p->nnodes = 2;
	p->threads = threads;
	p->nthreads = 2;

	snprintf(x->path, sizeof x->path, "/tmp/fennec-unit-export-%d.fnc", (int)getpid());
	write_header_file(x->path);
	memset(&proc, 0, sizeof proc);
	proc.file.path = x->path;
	proc.file.pid = 42;
	proc.file.fit_b = 1;
	proc.start_ns = 1000000000;
	x->build_id[0] = 0xab;
	x->build_id[1] = 0xcd;
	x->segs[0] = (fmt_segment){0x1000, 0x3000, 0};
	x->segs[1] = (fmt_segment){0x7f0000000000, 0x7f0000003000, 0x4000};
	x->segs[2] = (fmt_segment){0x7f1000000000, 0x7f1000003000, 0};
	x->mods[0] = (fmt_module){0, (char *)names[N_PROG], x->build_id, 2, 0, &x->segs[0], 1, 0x1000, 0x3000};
	x->mods[1] = (fmt_module){0, (char *)names[N_LIBM], NULL, 0, 0x7f0000000000, &x->segs[1], 1, 0x7f0000000000, 0x7f0000003000};
	x->mods[2] = (fmt_module){0, (char *)names[N_LIBC], NULL, 0, 0x7f1000000000, &x->segs[2], 1, 0x7f1000000000, 0x7f1000003000};
	proc.file.modules = x->mods;
	proc.file.nmodules = 3;
	p->procs = &proc;
	p->nprocs = 1;
	p->wall_ns = 2000000000;

	ana_sampling *s = &p->smp;
	s->present = 1;
	s->mode = FMT_SAMPLE_WALL;
	s->period_ns = PERIOD_NS;
	s->funcs = funcs;
	s->nfuncs = NFUNCS;
	s->locs = locs;
	s->nlocs = 5;
	static ana_stack stacks[3];
	static const uint32_t s0[] = {0, 1, 2, 3}, s1[] = {0, 1}, s2[] = {0, 4};
	stacks[0] = (ana_stack){(uint32_t *)s0, 4, 0};
	stacks[1] = (ana_stack){(uint32_t *)s1, 2, 0};
	stacks[2] = (ana_stack){(uint32_t *)s2, 2, 0};
	s->stacks = stacks;
	s->nstacks = 3;
	static ana_sample samples[14];
	size_t n = 0;
	uint64_t t = 1000000000 + 5000000;
	for (int i = 0; i < 5; i++)
		samples[n++] = (ana_sample){t += PERIOD_NS, 0, 0, 0, 1, 1, ANA_CPU, 0};
	for (int i = 0; i < 3; i++)
		samples[n++] = (ana_sample){t += PERIOD_NS, 0, 1, 0, 0, i == 0 ? 2 : 1, ANA_CPU, 0};
	for (int i = 0; i < 2; i++)
		samples[n++] = (ana_sample){t += PERIOD_NS, 1, 1, 1, ANA_NONE, 1, ANA_CPU, 0};
	for (int i = 0; i < 4; i++)
		samples[n++] = (ana_sample){t += PERIOD_NS, 1, 2, 1, ANA_NONE, 1, ANA_OFFCPU, 0};
	s->samples = samples;
	s->nsamples = n;
	s->weight[ANA_CPU] = 11;
	s->weight[ANA_OFFCPU] = 4;
}

static void fixture_fini(fixture *x) { unlink(x->path); }

/* Run an exporter into memory; returns its code, *out (malloc'd, NUL-terminated). */
typedef int (*exporter)(FILE *, const ana_profile *, const exp_options *);

static int run(exporter fn, const ana_profile *p, const exp_options *o, char **out, size_t *len)
{
	*out = NULL;
	*len = 0;
	FILE *m = open_memstream(out, len);
	int rc = fn(m, p, o);
	fclose(m);
	return rc;
}

static fmt_error g_err;
static int chrome(FILE *f, const ana_profile *p, const exp_options *o) { return exp_chrome_trace(f, p, o, &g_err); }
static int speedscope(FILE *f, const ana_profile *p, const exp_options *o) { return exp_speedscope(f, p, o, &g_err); }

static size_t count(const char *s, const char *needle)
{
	size_t n = 0;
	for (const char *q = s; (q = strstr(q, needle)); q += strlen(needle))
		n++;
	return n;
}

/* The weight on the folded line whose frames are exactly `stack` (0 if none). */
static unsigned long long folded_weight(const char *text, const char *stack)
{
	size_t n = strlen(stack);
	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL)
		if (!strncmp(l, stack, n) && l[n] == ' ')
			return strtoull(l + n + 1, NULL, 10);
	return 0;
}

static unsigned long long folded_total(const char *text)
{
	unsigned long long sum = 0;
	for (const char *l = text; l && *l; l = strchr(l, '\n') ? strchr(l, '\n') + 1 : NULL) {
		const char *nl = strchr(l, '\n'), *last = NULL;
		for (const char *q = l; q < (nl ? nl : l + strlen(l)); q++)
			if (*q == ' ')
				last = q; /* the weight follows the last space */
		if (last)
			sum += strtoull(last + 1, NULL, 10);
	}
	return sum;
}

UNIT_TEST(export_folded)
{
	fixture x;
	fixture_init(&x);
	exp_options o;
	exp_options_init(&o);
	o.kind = ANA_CPU;
	char *s;
	size_t len;
	UNIT_CHECK_EQ(run(exp_folded, &x.p, &o, &s, &len), 0);
	UNIT_CHECK_EQ(folded_weight(s, "main;work;inl;leaf"), 5);
	UNIT_CHECK_EQ(folded_weight(s, "main;work"), 6);
	UNIT_CHECK_EQ(folded_total(s), 11);
	UNIT_CHECK_EQ(count(s, "\n"), 2);
	free(s);

	o.kind = ANA_OFFCPU;
	UNIT_CHECK_EQ(run(exp_folded, &x.p, &o, &s, &len), 0);
	UNIT_CHECK_EQ(folded_weight(s, "main;sleep"), 4);
	UNIT_CHECK_EQ(folded_total(s), 4);
	free(s);

	o.kind = ANA_CPU;
	o.prefix_thread = o.prefix_region = 1;
	UNIT_CHECK_EQ(run(exp_folded, &x.p, &o, &s, &len), 0);
	UNIT_CHECK_EQ(folded_weight(s, "main [100];{outer};{inner};main;work;inl;leaf"), 5);
	UNIT_CHECK_EQ(folded_weight(s, "main [100];{outer};main;work"), 4);
	UNIT_CHECK_EQ(folded_weight(s, "worker [101];main;work"), 2);
	UNIT_CHECK_EQ(folded_total(s), 11);
	free(s);

	/* Filters: a region by name (its nested regions included) and by path, a thread. */
	exp_options_init(&o);
	o.kind = ANA_CPU;
	o.region = "outer";
	UNIT_CHECK_EQ(run(exp_folded, &x.p, &o, &s, &len), 0);
	UNIT_CHECK_EQ(folded_total(s), 9);
	free(s);
	o.region = "inner";
	UNIT_CHECK_EQ(run(exp_folded, &x.p, &o, &s, &len), 0);
	UNIT_CHECK_EQ(folded_total(s), 5);
	free(s);
	o.region = "outer/inner";
	uint64_t w;
	UNIT_CHECK_EQ(exp_select_count(&x.p, &o, &w), 5);
	UNIT_CHECK_EQ(w, 5);
	o.region = "nowhere";
	UNIT_CHECK_EQ(exp_select_count(&x.p, &o, NULL), 0);
	UNIT_CHECK_EQ(run(exp_folded, &x.p, &o, &s, &len), FENNEC_ENODATA);
	free(s);
	o.region = NULL;
	o.has_tid = 1;
	o.tid = 101;
	UNIT_CHECK_EQ(run(exp_folded, &x.p, &o, &s, &len), 0);
	UNIT_CHECK_EQ(folded_total(s), 2);
	free(s);

	/* No samples at all: nothing to export, for every sample format. */
	x.p.smp.nsamples = 0;
	exp_options_init(&o);
	o.kind = ANA_CPU;
	UNIT_CHECK_EQ(run(exp_folded, &x.p, &o, &s, &len), FENNEC_ENODATA);
	free(s);
	UNIT_CHECK_EQ(run(exp_svg, &x.p, &o, &s, &len), FENNEC_ENODATA);
	free(s);
	UNIT_CHECK_EQ(run(exp_pprof, &x.p, &o, &s, &len), FENNEC_ENODATA);
	free(s);
	fixture_fini(&x);
}

/* ---- a protobuf reader, enough to check the pprof encoding ---- */

typedef struct pbf {
	unsigned field, wire;
	uint64_t v;          /* varint */
	const uint8_t *data; /* length-delimited */
	size_t len;
} pbf;

static int pb_next(const uint8_t **p, const uint8_t *end, pbf *f)
{
	uint64_t key;
	if (*p >= end || cm_varint_get(p, end, &key))
		return 0;
	f->field = (unsigned)(key >> 3);
	f->wire = (unsigned)(key & 7);
	if (f->wire == 0)
		return cm_varint_get(p, end, &f->v) == 0;
	if (f->wire != 2)
		return 0;
	uint64_t n;
	if (cm_varint_get(p, end, &n) || n > (uint64_t)(end - *p))
		return 0;
	f->data = *p;
	f->len = (size_t)n;
	*p += n;
	return 1;
}

/* The packed varints of a field into v (at most cap); returns how many. */
static size_t pb_unpack(const pbf *f, uint64_t *v, size_t cap)
{
	const uint8_t *p = f->data, *end = f->data + f->len;
	size_t n = 0;
	uint64_t x;
	while (p < end && !cm_varint_get(&p, end, &x))
		if (n < cap)
			v[n++] = x;
	return n;
}

static uint8_t *gunzip(const uint8_t *in, size_t n, size_t *out_len)
{
	z_stream z = {0};
	size_t cap = 1 << 16, len = 0;
	uint8_t *out = malloc(cap);
	if (!out || inflateInit2(&z, 15 + 16) != Z_OK) {
		free(out);
		return NULL;
	}
	z.next_in = (Bytef *)in;
	z.avail_in = (uInt)n;
	int rc;
	do {
		if (len == cap) {
			cap *= 2;
			uint8_t *o2 = realloc(out, cap);
			if (!o2)
				break;
			out = o2;
		}
		z.next_out = out + len;
		z.avail_out = (uInt)(cap - len);
		rc = inflate(&z, Z_NO_FLUSH);
		len = cap - z.avail_out;
	} while (rc == Z_OK);
	inflateEnd(&z);
	if (rc != Z_STREAM_END) {
		free(out);
		return NULL;
	}
	*out_len = len;
	return out;
}

UNIT_TEST(export_pprof)
{
	fixture x;
	fixture_init(&x);
	exp_options o;
	exp_options_init(&o);
	char *gz;
	size_t gzlen, len;
	UNIT_CHECK_EQ(run(exp_pprof, &x.p, &o, &gz, &gzlen), 0);
	UNIT_CHECK(gzlen > 2 && (uint8_t)gz[0] == 0x1f && (uint8_t)gz[1] == 0x8b); /* gzip magic */
	uint8_t *pb = gunzip((const uint8_t *)gz, gzlen, &len);
	UNIT_CHECK(pb != NULL);
	if (!pb) {
		free(gz);
		fixture_fini(&x);
		return;
	}
	const char *strs[64];
	size_t lens[64], nstr = 0, ntypes = 0, nsamples = 0, nloc = 0, nmap = 0, nfunc = 0;
	uint64_t sums[3] = {0}, inner_samples = 0, default_type = 0, period = 0;
	uint64_t lines_at_2000[4] = {0}, nlines_at_2000 = 0;
	int inner_label_key = -1, bid_ok = 0;
	/* Strings first: labels refer to them. */
	for (const uint8_t *p = pb, *end = pb + len; p < end;) {
		pbf f;
		if (!pb_next(&p, end, &f))
			break;
		if (f.field == 6 && nstr < 64) {
			strs[nstr] = (const char *)f.data;
			lens[nstr++] = f.len;
		}
	}
	UNIT_CHECK(nstr > 0 && lens[0] == 0); /* string 0 is "" */
	for (size_t i = 0; i < nstr; i++)
		if (lens[i] == 11 && !memcmp(strs[i], "outer/inner", 11))
			inner_label_key = (int)i;
	for (const uint8_t *p = pb, *end = pb + len; p < end;) {
		pbf f;
		if (!pb_next(&p, end, &f))
			break;
		if (f.field == 1)
			ntypes++;
		else if (f.field == 2) {
			nsamples++;
			uint64_t vals[3] = {0};
			size_t nv = 0;
			int inner = 0;
			for (const uint8_t *q = f.data, *qe = f.data + f.len; q < qe;) {
				pbf g;
				if (!pb_next(&q, qe, &g))
					break;
				if (g.field == 2)
					nv = pb_unpack(&g, vals, 3);
				if (g.field == 3)
					for (const uint8_t *r = g.data, *re = g.data + g.len; r < re;) {
						pbf h;
						if (!pb_next(&r, re, &h))
							break;
						if (h.field == 2 && (int)h.v == inner_label_key)
							inner = 1;
					}
			}
			UNIT_CHECK_EQ(nv, 3);
			for (size_t k = 0; k < 3; k++)
				sums[k] += vals[k];
			if (inner)
				inner_samples += vals[0];
		} else if (f.field == 3) {
			nmap++;
			for (const uint8_t *q = f.data, *qe = f.data + f.len; q < qe;) {
				pbf g;
				if (!pb_next(&q, qe, &g))
					break;
				if (g.field == 6 && g.v < nstr && lens[g.v] == 4 && !memcmp(strs[g.v], "abcd", 4))
					bid_ok = 1;
			}
		} else if (f.field == 4) {
			nloc++;
			uint64_t addr = 0, fids[4];
			size_t nf = 0;
			for (const uint8_t *q = f.data, *qe = f.data + f.len; q < qe;) {
				pbf g;
				if (!pb_next(&q, qe, &g))
					break;
				if (g.field == 3)
					addr = g.v;
				if (g.field == 4)
					for (const uint8_t *r = g.data, *re = g.data + g.len; r < re;) {
						pbf h;
						if (!pb_next(&r, re, &h))
							break;
						if (h.field == 1 && nf < 4)
							fids[nf++] = h.v;
					}
			}
			if (addr == 0x2000) {
				memcpy(lines_at_2000, fids, sizeof fids);
				nlines_at_2000 = nf;
			}
		} else if (f.field == 5)
			nfunc++;
		else if (f.field == 12)
			period = f.v;
		else if (f.field == 14)
			default_type = f.v;
	}
	UNIT_CHECK_EQ(ntypes, 3); /* samples, cpu, offcpu */
	UNIT_CHECK_EQ(nsamples, 4); /* distinct (stack, thread, region, kind) */
	UNIT_CHECK_EQ(sums[0], 15);
	UNIT_CHECK_EQ(sums[1], 11ull * PERIOD_NS);
	UNIT_CHECK_EQ(sums[2], 4ull * PERIOD_NS);
	UNIT_CHECK_EQ(inner_samples, 5);
	UNIT_CHECK_EQ(nloc, 4);   /* 0x1100, 0x2000 (work + inl), leaf, sleep */
	UNIT_CHECK_EQ(nfunc, 5);
	UNIT_CHECK_EQ(nmap, 3);
	UNIT_CHECK(bid_ok);
	UNIT_CHECK_EQ(period, PERIOD_NS);
	UNIT_CHECK(default_type < nstr && lens[default_type] == 3 && !memcmp(strs[default_type], "cpu", 3));
	/* The inlined function first, the function it was inlined into last. */
	UNIT_CHECK_EQ(nlines_at_2000, 2);
	UNIT_CHECK_EQ(lines_at_2000[0], F_INL + 1);
	UNIT_CHECK_EQ(lines_at_2000[1], F_WORK + 1);
	free(pb);
	free(gz);
	fixture_fini(&x);
}

UNIT_TEST(export_svg)
{
	fixture x;
	fixture_init(&x);
	exp_options o;
	exp_options_init(&o);
	o.kind = ANA_CPU;
	char *s;
	size_t len;
	UNIT_CHECK_EQ(run(exp_svg, &x.p, &o, &s, &len), 0);
	/* Frames: all, main, work, inl, leaf (S1 ends in work: no frame of its own). */
	UNIT_CHECK_EQ(count(s, "<g class=\"f\""), 5);
	UNIT_CHECK(strstr(s, "data-n=\"all\" data-s=\"11\"") != NULL);
	UNIT_CHECK(strstr(s, "data-n=\"work\" data-s=\"11\"") != NULL);
	UNIT_CHECK(strstr(s, "data-n=\"leaf\" data-s=\"5\"") != NULL);
	UNIT_CHECK(strstr(s, "<script") && strstr(s, "]]></script>"));
	free(s);
	fixture_fini(&x);
}

UNIT_TEST(export_speedscope_chrome)
{
	fixture x;
	fixture_init(&x);
	exp_options o;
	exp_options_init(&o);
	char *s;
	size_t len;
	UNIT_CHECK_EQ(run(speedscope, &x.p, &o, &s, &len), 0);
	/* Profiles: main CPU; worker CPU and off-CPU. No regions in the (empty) file. */
	UNIT_CHECK_EQ(count(s, "\"type\":\"sampled\""), 3);
	UNIT_CHECK(strstr(s, "\"name\":\"worker [101] off-CPU\"") != NULL);
	UNIT_CHECK(strstr(s, "\"weights\":[1000000,1000000,1000000,1000000,1000000,2000000,1000000,1000000]") != NULL);
	free(s);
	UNIT_CHECK_EQ(run(chrome, &x.p, &o, &s, &len), 0);
	UNIT_CHECK_EQ(count(s, "\"ph\":\"P\""), 14);
	/* stackFrames: main, work, inl, leaf, sleep: distinct (parent, function) pairs. */
	UNIT_CHECK_EQ(count(s, "\"category\":"), 5);
	UNIT_CHECK_EQ(count(s, "\"name\":\"thread_name\""), 2);
	free(s);
	o.has_tid = 1;
	o.tid = 100;
	UNIT_CHECK_EQ(run(chrome, &x.p, &o, &s, &len), 0);
	UNIT_CHECK_EQ(count(s, "\"ph\":\"P\""), 8);
	UNIT_CHECK_EQ(count(s, "\"name\":\"thread_name\""), 1);
	free(s);
	fixture_fini(&x);
}

typedef struct spool_check {
	uint32_t key, next, bad;
} spool_check;

static int spool_cb(void *ctx, const uint8_t *data, size_t len)
{
	spool_check *c = ctx;
	for (size_t i = 0; i + 8 <= len; i += 8) {
		uint32_t rec[2];
		memcpy(rec, data + i, sizeof rec);
		if (rec[0] != c->key || rec[1] != c->next)
			c->bad++;
		c->next += 3;
	}
	return 0;
}

UNIT_TEST(export_spool)
{
	exp_spool sp;
	/* A tiny limit: most records go through the temporary file. */
	UNIT_CHECK_EQ(exp_spool_init(&sp, 3, 64), 0);
	for (uint32_t i = 0; i < 3000; i++) {
		uint32_t rec[2] = {i % 3, i};
		exp_spool_put(&sp, i % 3, rec, sizeof rec);
	}
	UNIT_CHECK_EQ(sp.failed, 0);
	UNIT_CHECK(sp.nblocks > 10);
	/* Each key's records come back complete and in order. */
	for (uint32_t k = 0; k < 3; k++) {
		spool_check c = {k, k, 0};
		UNIT_CHECK_EQ(exp_spool_each(&sp, k, spool_cb, &c), 0);
		UNIT_CHECK_EQ(c.bad, 0);
		UNIT_CHECK_EQ(c.next, k + 3000);
	}
	exp_spool_fini(&sp);
}

/* With FENNEC_EXPORT_DIR: the hand-built profile's exports, for the consumer tests. */
UNIT_TEST(export_write_for_consumers)
{
	const char *dir = getenv("FENNEC_EXPORT_DIR");
	if (!dir)
		return;
	fixture x;
	fixture_init(&x);
	struct {
		const char *name;
		exporter fn;
		int kind;
	} outs[] = {
		{"built.folded", exp_folded, ANA_CPU},
		{"built.svg", exp_svg, ANA_CPU},
		{"built.pb.gz", exp_pprof, EXP_KIND_ALL},
		{"built.speedscope.json", speedscope, EXP_KIND_ALL},
		{"built.trace.json", chrome, EXP_KIND_ALL},
	};
	for (size_t i = 0; i < ARRAY_LEN(outs); i++) {
		char path[4096];
		snprintf(path, sizeof path, "%s/%s", dir, outs[i].name);
		FILE *f = fopen(path, "wb");
		UNIT_CHECK(f != NULL);
		if (!f)
			continue;
		exp_options o;
		exp_options_init(&o);
		o.kind = outs[i].kind;
		UNIT_CHECK_EQ(outs[i].fn(f, &x.p, &o), 0);
		UNIT_CHECK_EQ(fclose(f), 0);
	}
	fixture_fini(&x);
}

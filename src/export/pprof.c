/*
 * pprof.c - the samples as pprof's profile.proto (github.com/google/pprof, proto/
 * profile.proto), gzip-compressed, for `go tool pprof` and everything that reads it.
 *
 * A small protobuf encoder: every message is a sequence of (field << 3 | wire type)
 * keys and values, varints or length-delimited bytes. The Profile message is never held
 * whole: each top-level field (a string, a sample, a location, ...) is encoded on its own
 * and streamed through zlib as soon as it is known. Protobuf allows repeated fields to
 * interleave, and string_table indices are the order of appearance, so strings, functions,
 * mappings and locations are written the first time a sample needs them.
 *
 * Mapping: one pprof Location per (process, address); its Lines are the frames inlined
 * at that address, innermost first, the caller last (profile.proto's rule). One Function
 * per fennec function; one Mapping per loaded object that holds a sampled address, the
 * executable of the first process first.
 *
 * Memory (exp_options.memory): one Sample per allocation site of the heap profile, valued
 * in objects/count and space/bytes as pprof's own heap profiles are, labelled with pid
 * and region (a site has no thread).
 */
#include "export/internal.h"

#include <stdlib.h>
#include <zlib.h>

/* profile.proto field numbers */
enum {
	P_SAMPLE_TYPE = 1, P_SAMPLE = 2, P_MAPPING = 3, P_LOCATION = 4, P_FUNCTION = 5, P_STRING = 6,
	P_TIME_NANOS = 9, P_DURATION_NANOS = 10, P_PERIOD_TYPE = 11, P_PERIOD = 12, P_COMMENT = 13,
	P_DEFAULT_SAMPLE_TYPE = 14,
};
enum { VT_TYPE = 1, VT_UNIT = 2 };
enum { S_LOCATION_ID = 1, S_VALUE = 2, S_LABEL = 3 };
enum { L_KEY = 1, L_STR = 2, L_NUM = 3 };
enum {
	M_ID = 1, M_START = 2, M_LIMIT = 3, M_OFFSET = 4, M_FILENAME = 5, M_BUILD_ID = 6, M_HAS_FUNCTIONS = 7,
	M_HAS_FILENAMES = 8, M_HAS_LINES = 9, M_HAS_INLINE = 10,
};
enum { LOC_ID = 1, LOC_MAPPING = 2, LOC_ADDRESS = 3, LOC_LINE = 4 };
enum { LN_FUNCTION = 1, LN_LINE = 2 };
enum { F_ID = 1, F_NAME = 2, F_SYSTEM_NAME = 3, F_FILENAME = 4, F_START_LINE = 5 };

/* ---- protobuf encoding into a cm_buf ---- */

static void pb_key(cm_buf *b, unsigned field, unsigned wire) { cm_buf_varint(b, (uint64_t)field << 3 | wire); }

/* A varint field; proto3 leaves zero values out. */
static void pb_uint(cm_buf *b, unsigned field, uint64_t v)
{
	if (!v)
		return;
	pb_key(b, field, 0);
	cm_buf_varint(b, v);
}

static void pb_bytes(cm_buf *b, unsigned field, const void *data, size_t n)
{
	pb_key(b, field, 2);
	cm_buf_varint(b, n);
	cm_buf_put(b, data, n);
}

/* An embedded message: its bytes are in `sub`. */
static void pb_msg(cm_buf *b, unsigned field, const cm_buf *sub) { pb_bytes(b, field, sub->data, sub->len); }

/* A packed repeated varint field (zeros included: they are positions in the list). */
static void pb_packed(cm_buf *b, unsigned field, const uint64_t *v, size_t n, cm_buf *tmp)
{
	tmp->len = 0;
	for (size_t i = 0; i < n; i++)
		cm_buf_varint(tmp, v[i]);
	pb_bytes(b, field, tmp->data, tmp->len);
}

/* ---- the writer ---- */

typedef struct pw {
	const ana_profile *p;
	FILE *out;
	z_stream z;
	int z_open;
	uint8_t zbuf[1 << 16];
	cm_buf top, msg, sub, tmp; /* scratch: one top-level field, a message, a nested one, a packed list */
	exp_map strs;              /* (hash, probe) -> string index */
	char **str;                /* the string table so far (for collision checks) */
	uint32_t nstr, str_cap;
	exp_map locs;              /* (process, address) -> location id */
	exp_map maps;              /* (process, module << 32 | segment) -> mapping id */
	uint8_t *func_done;        /* per fennec function: its Function was written */
	uint64_t nloc, nmap;
	int rc;
} pw;

static void gz_write(pw *w, const void *data, size_t n, int flush)
{
	if (w->rc)
		return;
	w->z.next_in = (Bytef *)data;
	w->z.avail_in = (uInt)n;
	int zr;
	do {
		w->z.next_out = w->zbuf;
		w->z.avail_out = sizeof w->zbuf;
		zr = deflate(&w->z, flush);
		if (zr == Z_STREAM_ERROR) {
			w->rc = FENNEC_ECOMPRESS;
			return;
		}
		size_t have = sizeof w->zbuf - w->z.avail_out;
		if (have && fwrite(w->zbuf, 1, have, w->out) != have) {
			w->rc = FENNEC_EIO;
			return;
		}
	} while (w->z.avail_out == 0 || (flush == Z_FINISH && zr != Z_STREAM_END));
}

/* Write the message in w->msg as top-level field `field` of the Profile. */
static void emit(pw *w, unsigned field)
{
	if (w->msg.failed || w->top.failed) {
		w->rc = FENNEC_ENOMEM;
		return;
	}
	w->top.len = 0;
	pb_msg(&w->top, field, &w->msg);
	gz_write(w, w->top.data, w->top.len, Z_NO_FLUSH);
	w->msg.len = 0;
}

static uint64_t hash64(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ull;
	return h;
}

/* The string table index of s, writing it to the table the first time. */
static int64_t str_id(pw *w, const char *s)
{
	if (!s)
		s = "";
	uint64_t h = hash64(s);
	for (uint64_t probe = 0;; probe++) {
		int added;
		uint64_t *v = exp_map_put(&w->strs, h, probe, &added);
		if (!v) {
			w->rc = FENNEC_ENOMEM;
			return 0;
		}
		if (!added) {
			if (!strcmp(w->str[*v], s))
				return (int64_t)*v;
			continue;
		}
		if (w->nstr == w->str_cap) {
			uint32_t cap = w->str_cap ? w->str_cap * 2 : 256;
			char **a = realloc(w->str, cap * sizeof *a);
			if (!a) {
				w->rc = FENNEC_ENOMEM;
				return 0;
			}
			w->str = a;
			w->str_cap = cap;
		}
		if (!(w->str[w->nstr] = strdup(s))) {
			w->rc = FENNEC_ENOMEM;
			return 0;
		}
		*v = w->nstr;
		/* A string is a bare length-delimited field, not a message. */
		w->top.len = 0;
		pb_bytes(&w->top, P_STRING, s, strlen(s));
		gz_write(w, w->top.data, w->top.len, Z_NO_FLUSH);
		return (int64_t)w->nstr++;
	}
}

static const char *name_of(const ana_profile *p, uint32_t i) { return i < p->nnames ? p->names[i] : ""; }

static void value_type(pw *w, unsigned field, const char *type, const char *unit)
{
	int64_t t = str_id(w, type), u = str_id(w, unit);
	w->msg.len = 0;
	pb_uint(&w->msg, VT_TYPE, (uint64_t)t);
	pb_uint(&w->msg, VT_UNIT, (uint64_t)u);
	emit(w, field);
}

static uint64_t function_id(pw *w, uint32_t func)
{
	const ana_profile *p = w->p;
	if (func >= p->smp.nfuncs)
		return 0;
	if (!w->func_done[func]) {
		const ana_func *f = &p->smp.funcs[func];
		int64_t name = str_id(w, name_of(p, f->name));
		int64_t file = f->file != ANA_NONE ? str_id(w, name_of(p, f->file)) : 0;
		w->msg.len = 0;
		pb_uint(&w->msg, F_ID, func + 1ull);
		pb_uint(&w->msg, F_NAME, (uint64_t)name);
		pb_uint(&w->msg, F_SYSTEM_NAME, (uint64_t)name);
		pb_uint(&w->msg, F_FILENAME, (uint64_t)file);
		pb_uint(&w->msg, F_START_LINE, f->line);
		emit(w, P_FUNCTION);
		w->func_done[func] = 1;
	}
	return func + 1ull;
}

/* The mapping of module m of process `process`: its whole address range [lo, hi), with
 * the file offset of its lowest segment (what memory_start maps). */
static uint64_t module_mapping(pw *w, uint32_t process, const fmt_module *m)
{
	const fmt_file *f = &w->p->procs[process].file;
	int added;
	uint64_t *v = exp_map_put(&w->maps, process, (uint64_t)(m - f->modules), &added);
	if (!v) {
		w->rc = FENNEC_ENOMEM;
		return 0;
	}
	if (!added)
		return *v;
	uint64_t id = *v = ++w->nmap;
	uint64_t offset = 0;
	for (uint32_t k = 0; k < m->nsegs; k++)
		if (m->segs[k].start == m->lo)
			offset = m->segs[k].offset;
	char hex[2 * 64 + 1];
	size_t nb = m->build_id_len < 64 ? m->build_id_len : 64;
	for (size_t i = 0; i < nb; i++)
		snprintf(hex + 2 * i, 3, "%02x", m->build_id[i]);
	hex[2 * nb] = 0;
	int64_t file = str_id(w, m->path), bid = str_id(w, hex);
	w->msg.len = 0;
	pb_uint(&w->msg, M_ID, id);
	pb_uint(&w->msg, M_START, m->lo);
	pb_uint(&w->msg, M_LIMIT, m->hi);
	pb_uint(&w->msg, M_OFFSET, offset);
	pb_uint(&w->msg, M_FILENAME, (uint64_t)file);
	pb_uint(&w->msg, M_BUILD_ID, (uint64_t)bid);
	/* Symbolised here: pprof must not look the addresses up again. */
	pb_uint(&w->msg, M_HAS_FUNCTIONS, 1);
	pb_uint(&w->msg, M_HAS_FILENAMES, 1);
	pb_uint(&w->msg, M_HAS_LINES, 1);
	pb_uint(&w->msg, M_HAS_INLINE, 1);
	emit(w, P_MAPPING);
	return id;
}

static uint64_t mapping_id(pw *w, uint32_t process, uint64_t addr)
{
	if (process >= w->p->nprocs)
		return 0;
	const fmt_module *m = fmt_module_at(&w->p->procs[process].file, addr, UINT64_MAX);
	return m ? module_mapping(w, process, m) : 0;
}

/* pprof takes the first mapping for the main binary ("File:" in its reports): write the
 * first process's executable first. */
static void main_mapping(pw *w)
{
	if (!w->p->nprocs)
		return;
	const fmt_file *f = &w->p->procs[0].file;
	for (size_t i = 0; i < f->nmodules; i++)
		if (f->exe && f->modules[i].path && !strcmp(f->modules[i].path, f->exe)) {
			module_mapping(w, 0, &f->modules[i]);
			return;
		}
	if (f->nmodules)
		module_mapping(w, 0, &f->modules[0]);
}

/* The location id of the frames locs[from..to) of a stack (root first): one address,
 * the first frame the physical one, the rest inlined into it. */
static uint64_t location_id(pw *w, const uint32_t *locs, uint32_t from, uint32_t to)
{
	const ana_profile *p = w->p;
	const ana_loc *l = &p->smp.locs[locs[from]];
	int added;
	uint64_t *v = exp_map_put(&w->locs, l->process, l->addr, &added);
	if (!v) {
		w->rc = FENNEC_ENOMEM;
		return 0;
	}
	if (!added)
		return *v;
	uint64_t id = *v = ++w->nloc;
	uint64_t map = mapping_id(w, l->process, l->addr);
	/* Functions first: they use w->msg. Lines innermost first. */
	for (uint32_t k = from; k < to; k++)
		function_id(w, p->smp.locs[locs[k]].func);
	w->msg.len = 0;
	pb_uint(&w->msg, LOC_ID, id);
	pb_uint(&w->msg, LOC_MAPPING, map);
	pb_uint(&w->msg, LOC_ADDRESS, l->addr);
	for (uint32_t k = to; k-- > from;) {
		const ana_loc *x = &p->smp.locs[locs[k]];
		w->sub.len = 0;
		pb_uint(&w->sub, LN_FUNCTION, x->func < p->smp.nfuncs ? x->func + 1ull : 0);
		pb_uint(&w->sub, LN_LINE, x->line);
		pb_msg(&w->msg, LOC_LINE, &w->sub);
	}
	emit(w, P_LOCATION);
	return id;
}

typedef struct pagg {
	uint32_t stack, thread, node, kind;
	uint64_t weight;              /* sampling periods, or bytes (memory) */
	uint64_t count;               /* memory: allocations */
	uint32_t process;             /* memory: the site's process (a site has no thread) */
} pagg;

static int cmp_pagg(const void *a, const void *b)
{
	const pagg *x = a, *y = b;
	if (x->stack != y->stack)
		return x->stack < y->stack ? -1 : 1;
	if (x->thread != y->thread)
		return x->thread < y->thread ? -1 : 1;
	if (x->node != y->node)
		return x->node < y->node ? -1 : 1;
	return (x->kind > y->kind) - (x->kind < y->kind);
}

static void label_str(pw *w, const char *key, const char *val)
{
	int64_t k = str_id(w, key), s = str_id(w, val);
	w->sub.len = 0;
	pb_uint(&w->sub, L_KEY, (uint64_t)k);
	pb_uint(&w->sub, L_STR, (uint64_t)s);
	pb_msg(&w->msg, S_LABEL, &w->sub);
}

static void label_num(pw *w, const char *key, uint64_t num)
{
	int64_t k = str_id(w, key);
	w->sub.len = 0;
	pb_uint(&w->sub, L_KEY, (uint64_t)k);
	pb_uint(&w->sub, L_NUM, num);
	pb_msg(&w->msg, S_LABEL, &w->sub);
}

int exp_pprof(FILE *out, const ana_profile *p, const exp_options *o)
{
	pw *w = calloc(1, sizeof *w);
	exp_sel sel;
	exp_map agg = {0};
	pagg *a = NULL;
	uint64_t *ids = NULL;
	size_t na = 0;
	int has_off = 0;
	if (!w)
		return FENNEC_ENOMEM;
	w->p = p;
	w->out = out;
	int rc = exp_sel_init(&sel, p, o);
	/* Sum the selected samples per (stack, thread, region, kind). Allocation sites are
	 * distinct already; pprof sums what it shows the same anyway. */
	if (!rc && o->memory && p->mem.nsites && !(a = malloc(p->mem.nsites * sizeof *a)))
		rc = FENNEC_ENOMEM;
	for (size_t i = 0; i < p->mem.nsites && o->memory && !rc; i++) {
		const ana_mem_site *x = &p->mem.sites[i];
		uint64_t count, bytes = exp_site_bytes(x, o->memory, &count);
		if (bytes && exp_sel_site(&sel, x))
			a[na++] = (pagg){x->stack, ANA_NONE, x->node, ANA_CPU, bytes, count, x->process};
	}
	for (size_t i = 0; i < p->smp.nsamples && !o->memory && !rc; i++) {
		const ana_sample *x = &p->smp.samples[i];
		if (!exp_sel_sample(&sel, x))
			continue;
		uint64_t *v = exp_map_put(&agg, (uint64_t)x->stack << 32 | x->thread, (uint64_t)x->kind << 32 | x->node, NULL);
		if (!v)
			rc = FENNEC_ENOMEM;
		else
			*v += exp_weight(x);
		has_off |= x->kind == ANA_OFFCPU;
	}
	exp_sel_fini(&sel);
	if (!rc && !agg.n && !na)
		rc = FENNEC_ENODATA;
	if (!rc && !o->memory && !(a = malloc(agg.n * sizeof *a)))
		rc = FENNEC_ENOMEM;
	if (rc)
		goto out;
	for (size_t i = 0; i < agg.cap; i++)
		if (agg.used[i])
			a[na++] = (pagg){(uint32_t)(agg.keys[2 * i] >> 32), (uint32_t)agg.keys[2 * i],
					 (uint32_t)agg.keys[2 * i + 1], (uint32_t)(agg.keys[2 * i + 1] >> 32), agg.vals[i], 0, 0};
	exp_map_free(&agg);
	qsort(a, na, sizeof *a, cmp_pagg);

	w->func_done = calloc(p->smp.nfuncs ? p->smp.nfuncs : 1, 1);
	ids = malloc((FMT_MAX_FRAMES + 1) * sizeof *ids);
	if (!w->func_done || !ids) {
		rc = FENNEC_ENOMEM;
		goto out;
	}
	/* windowBits 15 + 16: a gzip wrapper, which is what pprof expects of a .pb.gz. */
	if (deflateInit2(&w->z, 6, Z_DEFLATED, 15 + 16, 8, Z_DEFAULT_STRATEGY) != Z_OK) {
		rc = FENNEC_ECOMPRESS;
		goto out;
	}
	w->z_open = 1;

	str_id(w, ""); /* string 0 is always the empty string */
	/* Memory: the names of pprof's own heap profiles (objects/count, space/bytes). */
	const char *const *types = o->memory ? (const char *const[]){"objects", "count", "space", "bytes"}
					     : (const char *const[]){"samples", "count", "cpu", "nanoseconds"};
	value_type(w, P_SAMPLE_TYPE, types[0], types[1]);
	value_type(w, P_SAMPLE_TYPE, types[2], types[3]);
	if (has_off)
		value_type(w, P_SAMPLE_TYPE, "offcpu", "nanoseconds");
	main_mapping(w);
	uint64_t period = o->memory ? (p->mem.mode == FMT_MEM_SAMPLED && p->mem.rate ? p->mem.rate : 1)
			  : p->smp.period_ns ? p->smp.period_ns
			  : p->smp.requested_hz ? 1000000000ull / p->smp.requested_hz : 1;

	for (size_t i = 0; i < na && !w->rc; i++) {
		/* An allocation site's stack can be unknown: a sample without locations. */
		const ana_stack *s = a[i].stack < p->smp.nstacks ? &p->smp.stacks[a[i].stack] : NULL;
		/* Locations leaf first; a location is a run of frames at one address, the physical
		 * frame followed by the frames inlined into it. */
		size_t nids = 0;
		uint32_t end = s ? s->n : 0;
		while (end > 0 && nids <= FMT_MAX_FRAMES) {
			uint32_t start = end - 1;
			while (start > 0) {
				const ana_loc *cur = &p->smp.locs[s->locs[start]], *prev = &p->smp.locs[s->locs[start - 1]];
				if (!cur->inlined || cur->process != prev->process || cur->addr != prev->addr)
					break;
				start--;
			}
			ids[nids++] = location_id(w, s->locs, start, end);
			end = start;
		}
		uint64_t vals[3] = {a[i].weight, a[i].kind == ANA_CPU ? a[i].weight * period : 0,
				    a[i].kind == ANA_OFFCPU ? a[i].weight * period : 0};
		if (o->memory)
			vals[0] = a[i].count, vals[1] = a[i].weight;
		/* Labels use w->sub and strings; the sample is assembled in w->msg. */
		w->msg.len = 0;
		pb_packed(&w->msg, S_LOCATION_ID, ids, nids, &w->tmp);
		pb_packed(&w->msg, S_VALUE, vals, has_off ? 3 : 2, &w->tmp);
		uint32_t t = a[i].thread;
		if (t != ANA_NONE) {
			label_str(w, "thread", exp_thread_name(p, t));
			label_num(w, "tid", exp_thread_tid(p, t));
			label_num(w, "pid", exp_thread_pid(p, t));
		} else if (a[i].process < p->nprocs)
			label_num(w, "pid", p->procs[a[i].process].file.pid);
		if (a[i].node < p->nnodes && p->nodes[a[i].node].path)
			label_str(w, "region", p->nodes[a[i].node].path);
		if (has_off)
			label_str(w, "kind", a[i].kind == ANA_OFFCPU ? "offcpu" : "cpu");
		emit(w, P_SAMPLE);
	}
	if (!w->rc) {
		char comment[256];
		snprintf(comment, sizeof comment, "fennec %d.%d.%d export of %s%s%s", FENNEC_VERSION_MAJOR,
			 FENNEC_VERSION_MINOR, FENNEC_VERSION_PATCH, p->nprocs ? p->procs[0].file.path : "",
			 o->memory ? ": " : "", exp_memory_what(o->memory));
		int64_t c = str_id(w, comment), def = str_id(w, types[2]);
		value_type(w, P_PERIOD_TYPE, types[2], types[3]);
		w->top.len = 0;
		/* The profile's start: the window's (--since), else the recording's. */
		if (p->nprocs)
			pb_uint(&w->top, P_TIME_NANOS, p->procs[0].file.start_real_ns +
						(p->window.active && p->window.begin_ns > p->window.rec_begin_ns
						 ? p->window.begin_ns - p->window.rec_begin_ns : 0));
		pb_uint(&w->top, P_DURATION_NANOS, p->wall_ns);
		pb_uint(&w->top, P_PERIOD, period);
		pb_uint(&w->top, P_COMMENT, (uint64_t)c);
		pb_uint(&w->top, P_DEFAULT_SAMPLE_TYPE, (uint64_t)def);
		if (w->top.failed)
			w->rc = FENNEC_ENOMEM;
		gz_write(w, w->top.data, w->top.len, Z_FINISH);
	}
	rc = w->rc;
	if (!rc && ferror(out))
		rc = FENNEC_EIO;
out:
	if (w->z_open)
		deflateEnd(&w->z);
	exp_map_free(&agg);
	exp_map_free(&w->strs);
	exp_map_free(&w->locs);
	exp_map_free(&w->maps);
	for (uint32_t i = 0; i < w->nstr; i++)
		free(w->str[i]);
	free(w->str);
	free(w->func_done);
	cm_buf_free(&w->top);
	cm_buf_free(&w->msg);
	cm_buf_free(&w->sub);
	cm_buf_free(&w->tmp);
	free(w);
	free(a);
	free(ids);
	return rc;
}

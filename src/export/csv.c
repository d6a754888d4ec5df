/*
 * csv.c - the analysis model as CSV tables for spreadsheets, pandas and plotting
 * scripts (docs/export.md): regions with the JSON report's statistics, steps, metric
 * updates, samples and threads. RFC 4180: a header row, CRLF line ends, fields with a
 * comma, a quote or a line break in double quotes (quotes doubled). Units are in the
 * column names; times are nanoseconds since the recording started.
 */
#include "export/internal.h"

#include <math.h>
#include <stdlib.h>

static const char *const table_names[] = {"regions", "steps", "metrics", "samples", "threads"};

int exp_csv_table_parse(const char *name)
{
	for (int i = 0; name && i < (int)ARRAY_LEN(table_names); i++)
		if (!strcmp(name, table_names[i]))
			return i;
	return -1;
}

const char *exp_csv_table_name(int table)
{
	return table >= 0 && table < (int)ARRAY_LEN(table_names) ? table_names[table] : "?";
}

/* One field, quoted when it holds a separator, a quote or a line break. */
static void put_str(FILE *out, const char *s)
{
	s = s ? s : "";
	if (!s[strcspn(s, ",\"\r\n")]) {
		fputs(s, out);
		return;
	}
	fputc('"', out);
	for (; *s; s++) {
		if (*s == '"')
			fputc('"', out);
		fputc(*s, out);
	}
	fputc('"', out);
}

static void put_u64(FILE *out, uint64_t v) { fprintf(out, "%llu", (unsigned long long)v); }

/* A number as the JSON report prints it: integral values without a fraction, others with
 * 17 significant digits; empty when not finite (or not computed). */
static void put_num(FILE *out, double v)
{
	if (!isfinite(v))
		return;
	if (v == floor(v) && fabs(v) < 9e15)
		fprintf(out, "%.0f", v);
	else
		fprintf(out, "%.17g", v);
}

#define SEP(out) fputc(',', out)
#define EOL(out) fputs("\r\n", out)

/* ns relative to the recording's start (the earliest process start); 0 before it. */
static uint64_t rel_ns(uint64_t t, uint64_t t0) { return t > t0 ? t - t0 : 0; }

static int regions(FILE *out, const ana_profile *p)
{
	if (!p->nnodes)
		return FENNEC_ENODATA;
	uint32_t *order = rep_region_order(p);
	if (!order)
		return FENNEC_ENOMEM;
	fputs("path,name,depth,count,total_ns,self_ns,mean_ns,std_ns,min_ns,max_ns,p50_ns,p95_ns,p99_ns,"
	      "share_pct,self_pct,threads,open,samples,offcpu_samples", out);
	EOL(out);
	const ana_sample_view *v = &p->smp.sel;
	for (uint32_t r = 0; r < p->nnodes; r++) {
		const ana_node *n = &p->nodes[order[r]];
		const ana_dist *d = &n->dist;
		put_str(out, n->path);
		SEP(out);
		put_str(out, p->names[n->name]);
		fprintf(out, ",%u,%llu,%llu,%llu", n->depth, (unsigned long long)d->count,
			(unsigned long long)n->total_ns, (unsigned long long)n->self_ns);
		double st[] = {d->mean, d->std, d->min, d->max, d->p50, d->p95, d->p99};
		for (size_t i = 0; i < ARRAY_LEN(st); i++) {
			SEP(out);
			put_num(out, d->count ? st[i] : NAN);
		}
		SEP(out);
		put_num(out, n->share_pct);
		SEP(out);
		put_num(out, n->self_pct);
		fprintf(out, ",%u,%llu,", n->threads, (unsigned long long)n->open);
		const ana_node_samples *ns = v->nodes ? &v->nodes[order[r]] : NULL;
		put_u64(out, ns ? ns->samples[ANA_CPU] : 0);
		SEP(out);
		put_u64(out, ns ? ns->samples[ANA_OFFCPU] : 0);
		EOL(out);
	}
	free(order);
	return 0;
}

static int steps(FILE *out, const ana_profile *p)
{
	size_t n = p->step_ns.n;
	if (p->step_start_ns.n < n)
		n = p->step_start_ns.n;
	if (p->step_items.n < n)
		n = p->step_items.n;
	if (!n)
		return FENNEC_ENODATA;
	uint64_t t0 = exp_t0_ns(p);
	fputs("step,start_ns,duration_ns,items", out);
	EOL(out);
	for (size_t i = 0; i < n; i++) {
		fprintf(out, "%zu,%llu,%llu,%llu", i + 1, (unsigned long long)rel_ns(p->step_start_ns.v[i], t0),
			(unsigned long long)p->step_ns.v[i], (unsigned long long)p->step_items.v[i]);
		EOL(out);
	}
	return 0;
}

static int metrics(FILE *out, const ana_profile *p)
{
	size_t rows = 0;
	for (uint32_t i = 0; i < p->nmetrics; i++)
		rows += p->metrics[i].npoints;
	if (!rows)
		return FENNEC_ENODATA;
	uint64_t t0 = exp_t0_ns(p);
	fputs("metric,kind,time_ns,value,running_total", out);
	EOL(out);
	for (uint32_t i = 0; i < p->nmetrics; i++) {
		const ana_metric *m = &p->metrics[i];
		double total = 0;
		for (size_t k = 0; k < m->npoints; k++) {
			const ana_point *pt = &m->points[k];
			put_str(out, p->names[m->name]);
			fprintf(out, ",%s,%llu,", ana_kind_name(m->kind), (unsigned long long)rel_ns(pt->t_ns, t0));
			put_num(out, pt->value);
			SEP(out);
			if (m->kind == FMT_SITE_COUNTER) {
				total += pt->value;
				put_num(out, total);
			}
			EOL(out);
		}
	}
	return 0;
}

/* A sample's stack as folded frames (root first, ';' between them, ';' in a name as ':'). */
static void put_stack(FILE *out, const ana_profile *p, const ana_stack *s, cm_buf *b)
{
	b->len = 0;
	for (uint32_t j = 0; s && j < s->n; j++) {
		uint32_t loc = s->locs[j];
		const char *name = exp_func_name(p, loc < p->smp.nlocs ? p->smp.locs[loc].func : ANA_NONE);
		if (j)
			cm_buf_u8(b, ';');
		for (; *name; name++)
			cm_buf_u8(b, (uint8_t)(*name == ';' ? ':' : *name));
	}
	cm_buf_u8(b, 0);
	put_str(out, b->failed ? "" : (const char *)b->data);
}

static int samples(FILE *out, const ana_profile *p, const exp_options *o)
{
	if (!exp_select_count(p, o, NULL))
		return FENNEC_ENODATA;
	exp_sel sel;
	int rc = exp_sel_init(&sel, p, o);
	if (rc) {
		exp_sel_fini(&sel);
		return rc;
	}
	uint64_t t0 = exp_t0_ns(p);
	cm_buf b = {0};
	fputs("time_ns,pid,tid,thread,kind,weight,step,region,function,module,stack", out);
	EOL(out);
	for (size_t i = 0; i < p->smp.nsamples; i++) {
		const ana_sample *x = &p->smp.samples[i];
		if (!exp_sel_sample(&sel, x))
			continue;
		const ana_stack *s = &p->smp.stacks[x->stack];
		uint32_t leaf = s->n && s->locs[s->n - 1] < p->smp.nlocs ? p->smp.locs[s->locs[s->n - 1]].func : ANA_NONE;
		fprintf(out, "%llu,%llu,%llu,", (unsigned long long)rel_ns(x->t_ns, t0),
			(unsigned long long)exp_thread_pid(p, x->thread), (unsigned long long)exp_thread_tid(p, x->thread));
		put_str(out, x->thread < p->nthreads ? p->threads[x->thread].name : "");
		fprintf(out, ",%s,%llu,%llu,", ana_sample_kind_name(x->kind), (unsigned long long)exp_weight(x),
			(unsigned long long)x->step);
		put_str(out, x->node < p->nnodes ? p->nodes[x->node].path : "");
		SEP(out);
		put_str(out, leaf == ANA_NONE ? "" : exp_func_name(p, leaf));
		SEP(out);
		put_str(out, leaf == ANA_NONE ? "" : exp_func_module(p, leaf));
		SEP(out);
		put_stack(out, p, s, &b);
		EOL(out);
		if (b.failed) {
			rc = FENNEC_ENOMEM;
			break;
		}
	}
	cm_buf_free(&b);
	exp_sel_fini(&sel);
	return rc;
}

static int threads(FILE *out, const ana_profile *p)
{
	if (!p->nthreads)
		return FENNEC_ENODATA;
	fputs("pid,tid,index,name,events,dropped_events,busy_ns,lifetime_ns,steps,samples,offcpu_samples", out);
	EOL(out);
	const ana_sample_view *v = &p->smp.all;
	for (uint32_t i = 0; i < p->nthreads; i++) {
		const ana_thread *t = &p->threads[i];
		fprintf(out, "%llu,%llu,", (unsigned long long)exp_thread_pid(p, i), (unsigned long long)t->tid);
		if (t->index != UINT32_MAX)
			put_u64(out, t->index);
		SEP(out);
		put_str(out, t->name);
		fprintf(out, ",%llu,%llu,%llu,%llu,%llu,", (unsigned long long)t->events, (unsigned long long)t->dropped,
			(unsigned long long)t->busy_ns, (unsigned long long)t->lifetime_ns, (unsigned long long)t->steps);
		put_u64(out, v->thread_samples ? v->thread_samples[(size_t)i * ANA_NKINDS + ANA_CPU] : 0);
		SEP(out);
		put_u64(out, v->thread_samples ? v->thread_samples[(size_t)i * ANA_NKINDS + ANA_OFFCPU] : 0);
		EOL(out);
	}
	return 0;
}

int exp_csv(FILE *out, const ana_profile *p, const exp_options *o, int table)
{
	int rc;
	switch (table) {
	case EXP_CSV_REGIONS: rc = regions(out, p); break;
	case EXP_CSV_STEPS: rc = steps(out, p); break;
	case EXP_CSV_METRICS: rc = metrics(out, p); break;
	case EXP_CSV_SAMPLES: rc = samples(out, p, o); break;
	case EXP_CSV_THREADS: rc = threads(out, p); break;
	default: return FENNEC_EINVAL;
	}
	return rc ? rc : ferror(out) ? FENNEC_EIO : 0;
}

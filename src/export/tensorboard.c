/*
 * tensorboard.c - `fennec export --format tensorboard -o DIR` (docs/export.md): the model's
 * per-step series as TensorBoard scalars, written by fennec itself: TFRecord framing (a
 * length, its masked CRC-32C, the data, its masked CRC-32C) around Event protobufs whose
 * Summary values are (tag, simple_value). One run folder per process that has something to
 * show: DIR itself for the first, DIR/pid<PID> (DIR/rank<R> for ranks) for the others.
 */
#include "analyze/system.h"
#include "export/export.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>

#define TB_TOP_REGIONS 8 /* regions whose time per step is a series */

/* ---- protobuf and TFRecord ---- */

static void pb_varint(cm_buf *b, uint64_t v) { cm_buf_varint(b, v); }

static void pb_tag(cm_buf *b, unsigned field, unsigned wire) { pb_varint(b, (uint64_t)field << 3 | wire); }

static void pb_bytes(cm_buf *b, unsigned field, const void *p, size_t n)
{
	pb_tag(b, field, 2);
	pb_varint(b, n);
	cm_buf_put(b, p, n);
}

static uint32_t masked_crc(const void *p, size_t n)
{
	uint32_t c = cm_crc32c(0, p, n);
	return ((c >> 15) | (c << 17)) + 0xa282ead8u;
}

typedef struct tb_file {
	FILE *f;
	char path[4200];
	int failed;
} tb_file;

static void record(tb_file *t, const cm_buf *ev)
{
	uint8_t len[8];
	for (int i = 0; i < 8; i++)
		len[i] = (uint8_t)((uint64_t)ev->len >> (8 * i));
	uint8_t c[4];
	cm_le32_put(c, masked_crc(len, 8));
	fwrite(len, 1, 8, t->f);
	fwrite(c, 1, 4, t->f);
	fwrite(ev->data, 1, ev->len, t->f);
	cm_le32_put(c, masked_crc(ev->data, ev->len));
	fwrite(c, 1, 4, t->f);
}

/* Event { double wall_time = 1; int64 step = 2; string file_version = 3; Summary summary = 5 } */
static void event_head(cm_buf *b, double wall_s, int64_t step)
{
	uint64_t u;
	memcpy(&u, &wall_s, 8);
	pb_tag(b, 1, 1);
	for (int i = 0; i < 8; i++)
		cm_buf_u8(b, (uint8_t)(u >> (8 * i)));
	if (step) {
		pb_tag(b, 2, 0);
		pb_varint(b, (uint64_t)step);
	}
}

/* One scalar: Summary { repeated Value value = 1 }, Value { string tag = 1; float simple_value = 2 } */
static void scalar(tb_file *t, const char *tag, double wall_s, int64_t step, double v)
{
	if (!isfinite(v))
		return;
	cm_buf val = {0}, sum = {0}, ev = {0};
	pb_bytes(&val, 1, tag, strlen(tag));
	float fv = (float)v;
	uint32_t u;
	memcpy(&u, &fv, 4);
	pb_tag(&val, 2, 5);
	cm_buf_u32(&val, u);
	pb_bytes(&sum, 1, val.data, val.len);
	event_head(&ev, wall_s, step);
	pb_bytes(&ev, 5, sum.data, sum.len);
	if (val.failed || sum.failed || ev.failed)
		t->failed = 1;
	else
		record(t, &ev);
	cm_buf_free(&val);
	cm_buf_free(&sum);
	cm_buf_free(&ev);
}

static void pb_double(cm_buf *b, unsigned field, double v)
{
	uint64_t u;
	memcpy(&u, &v, 8);
	pb_tag(b, field, 1);
	for (int i = 0; i < 8; i++)
		cm_buf_u8(b, (uint8_t)(u >> (8 * i)));
}

#define TB_HIST_BUCKETS 30

/* A histogram of v[0..n): Value { string tag = 1; HistogramProto histo = 5 },
 * HistogramProto { double min = 1, max = 2, num = 3, sum = 4, sum_squares = 5;
 * repeated double bucket_limit = 6 [packed], bucket = 7 [packed] }: TB_HIST_BUCKETS
 * equal buckets from min to max, each limit its upper edge. */
static void histogram(tb_file *t, const char *tag, double wall_s, int64_t step, const double *v, size_t n)
{
	if (!n)
		return;
	double lo = v[0], hi = v[0], sum = 0, sq = 0;
	for (size_t i = 0; i < n; i++) {
		lo = v[i] < lo ? v[i] : lo;
		hi = v[i] > hi ? v[i] : hi;
		sum += v[i];
		sq += v[i] * v[i];
	}
	double width = hi > lo ? (hi - lo) / TB_HIST_BUCKETS : 1, count[TB_HIST_BUCKETS] = {0};
	for (size_t i = 0; i < n; i++) {
		size_t k = hi > lo ? (size_t)((v[i] - lo) / width) : 0;
		count[k < TB_HIST_BUCKETS ? k : TB_HIST_BUCKETS - 1]++;
	}
	cm_buf h = {0}, lim = {0}, cnt = {0}, val = {0}, sm = {0}, ev = {0};
	pb_double(&h, 1, lo);
	pb_double(&h, 2, hi);
	pb_double(&h, 3, (double)n);
	pb_double(&h, 4, sum);
	pb_double(&h, 5, sq);
	for (int k = 0; k < TB_HIST_BUCKETS; k++) {
		cm_buf_f64(&lim, k == TB_HIST_BUCKETS - 1 ? hi : lo + width * (k + 1));
		cm_buf_f64(&cnt, count[k]);
	}
	pb_bytes(&h, 6, lim.data, lim.len);
	pb_bytes(&h, 7, cnt.data, cnt.len);
	pb_bytes(&val, 1, tag, strlen(tag));
	pb_bytes(&val, 5, h.data, h.len);
	pb_bytes(&sm, 1, val.data, val.len);
	event_head(&ev, wall_s, step);
	pb_bytes(&ev, 5, sm.data, sm.len);
	if (h.failed || lim.failed || cnt.failed || val.failed || sm.failed || ev.failed)
		t->failed = 1;
	else
		record(t, &ev);
	cm_buf_free(&h);
	cm_buf_free(&lim);
	cm_buf_free(&cnt);
	cm_buf_free(&val);
	cm_buf_free(&sm);
	cm_buf_free(&ev);
}

static int tb_open(tb_file *t, const char *dir, const ana_profile *p, uint32_t proc)
{
	const fmt_file *f = &p->procs[proc].file;
	if (mkdir(dir, 0755) < 0 && errno != EEXIST)
		return -1;
	const char *host = f->host && *f->host ? f->host : "localhost";
	snprintf(t->path, sizeof t->path, "%.3800s/events.out.tfevents.%llu.%.64s.%llu", dir,
		 (unsigned long long)(f->start_real_ns / 1000000000u), host, (unsigned long long)f->pid);
	t->f = fopen(t->path, "wb");
	if (!t->f)
		return -1;
	cm_buf ev = {0};
	event_head(&ev, (double)f->start_real_ns / 1e9, 0);
	pb_bytes(&ev, 3, "brain.Event:2", 13);
	record(t, &ev);
	cm_buf_free(&ev);
	return 0;
}

/* A CLOCK_MONOTONIC time of process `proc` as wall-clock seconds. */
static double wall_of(const ana_profile *p, uint32_t proc, uint64_t mono_ns)
{
	const fmt_file *f = &p->procs[proc].file;
	return ((double)f->start_real_ns + ((double)mono_ns - (double)f->start_mono_ns)) / 1e9;
}

/* The step (0-based, of p->step_start_ns) a time of the first process falls in; -1 before
 * the first step's start, the last step after it. */
static long step_at(const ana_profile *p, uint64_t t)
{
	size_t n = p->step_start_ns.n;
	if (!n || t < p->step_start_ns.v[0])
		return n ? 0 : -1;
	size_t lo = 0, hi = n;
	while (hi - lo > 1) {
		size_t mid = (lo + hi) / 2;
		if (p->step_start_ns.v[mid] <= t)
			lo = mid;
		else
			hi = mid;
	}
	return (long)lo;
}

static void metrics(tb_file *t, const ana_profile *p)
{
	char tag[512];
	for (uint32_t i = 0; i < p->nmetrics; i++) {
		const ana_metric *m = &p->metrics[i];
		snprintf(tag, sizeof tag, "%s/%s", m->kind == FMT_SITE_COUNTER ? "counters" : m->kind == FMT_SITE_GAUGE ? "gauges" : "values",
			 p->names[m->name]);
		if (!p->step_start_ns.n) { /* no steps: each update, numbered */
			double total = 0;
			for (size_t k = 0; k < m->npoints; k++) {
				total += m->points[k].value;
				scalar(t, tag, wall_of(p, 0, m->points[k].t_ns), (int64_t)k,
				       m->kind == FMT_SITE_COUNTER ? total : m->points[k].value);
			}
			continue;
		}
		/* per step: a value's mean, a gauge's last, a counter's running total at the step's end */
		double sum = 0, total = 0, last = NAN;
		size_t cnt = 0;
		long cur = -2;
		uint64_t cur_t = 0;
		for (size_t k = 0; k <= m->npoints; k++) {
			long s = k < m->npoints ? step_at(p, m->points[k].t_ns) : -3;
			if (s != cur && cur != -2 && cnt) {
				double v = m->kind == FMT_SITE_VALUE ? sum / (double)cnt : m->kind == FMT_SITE_GAUGE ? last : total;
				scalar(t, tag, wall_of(p, 0, cur_t), cur, v);
				sum = 0;
				cnt = 0;
			}
			if (k == m->npoints)
				break;
			cur = s;
			cur_t = m->points[k].t_ns;
			sum += m->points[k].value;
			total += m->points[k].value;
			last = m->points[k].value;
			cnt++;
		}
	}
}

/* The step time, throughput, regions, heap and system series of process `proc`. */
static void process_series(tb_file *t, const ana_profile *p, uint32_t proc, const uint32_t *top, uint32_t ntop)
{
	const ana_process *pr = &p->procs[proc];
	int first = proc == 0;
	const ana_u64vec *steps = first ? &p->step_ns : &pr->step_ns;
	for (size_t k = 0; k < steps->n; k++) {
		uint64_t end = first && k < p->step_start_ns.n ? p->step_start_ns.v[k] + steps->v[k] : pr->start_ns;
		double w = wall_of(p, proc, end), s = (double)steps->v[k] / 1e9;
		scalar(t, "step/time_ms", w, (int64_t)k, (double)steps->v[k] / 1e6);
		if (first && s > 0) {
			scalar(t, "step/steps_per_s", w, (int64_t)k, 1 / s);
			if (p->has_items && k < p->step_items.n)
				scalar(t, "step/items_per_s", w, (int64_t)k, (double)p->step_items.v[k] / s);
		}
	}
	/* step time histograms: one per block of steps (at most 50 blocks), at its last step */
	if (steps->n >= 2) {
		size_t block = (steps->n + 49) / 50;
		double *ms = malloc(block * sizeof *ms);
		for (size_t k0 = 0; ms && k0 < steps->n; k0 += block) {
			size_t m = steps->n - k0 < block ? steps->n - k0 : block;
			for (size_t i = 0; i < m; i++)
				ms[i] = (double)steps->v[k0 + i] / 1e6;
			size_t last = k0 + m - 1;
			uint64_t end = first && last < p->step_start_ns.n ? p->step_start_ns.v[last] + steps->v[last] : pr->start_ns;
			histogram(t, "step/time_ms_histogram", wall_of(p, proc, end), (int64_t)last, ms, m);
		}
		if (!ms)
			t->failed = 1;
		free(ms);
	}
	if (first && pr->step_thread != ANA_NONE) {
		char tag[600];
		for (uint32_t r = 0; r < ntop; r++) {
			snprintf(tag, sizeof tag, "regions/%s_ms", p->nodes[top[r]].path);
			for (size_t i = 0; i < p->nstep_nodes; i++) {
				const ana_step_node *sn = &p->step_nodes[i];
				if (sn->node != top[r] || sn->thread != pr->step_thread || sn->step >= p->step_start_ns.n)
					continue;
				scalar(t, tag, wall_of(p, 0, p->step_start_ns.v[sn->step] + p->step_ns.v[sn->step]),
				       (int64_t)sn->step, (double)sn->ns / 1e6);
			}
		}
		const ana_energy *e = p->energy;
		for (size_t k = 0; e && k < e->step_joules.n && k < p->step_start_ns.n; k++)
			scalar(t, e->estimate ? "energy/step_joules_estimate" : "energy/step_joules",
			       wall_of(p, 0, p->step_start_ns.v[k] + p->step_ns.v[k]), (int64_t)k, e->step_joules.v[k]);
	}
	/* heap and RSS: the timeline's points, by the steps completed at each */
	for (size_t k = 0; k < p->mem.npoints; k++) {
		const ana_mem_point *m = &p->mem.points[k];
		if (m->process != proc || (steps->n && m->reason != FMT_SNAP_STEP))
			continue;
		double w = wall_of(p, proc, m->t_ns);
		int64_t s = steps->n ? (int64_t)m->step : (int64_t)k;
		scalar(t, "memory/heap_bytes", w, s, (double)m->live_bytes);
		if (m->rss_bytes)
			scalar(t, "memory/rss_bytes", w, s, (double)m->rss_bytes);
	}
	/* system: each interval, at the steps completed at its end */
	for (uint32_t i = 0; p->sys && i < p->sys->nprocs; i++) {
		const ana_sys_proc *sp = &p->sys->procs[i];
		if (sp->process != proc)
			continue;
		for (size_t k = 0; k < sp->npoints; k++) {
			const ana_sys_point *pt = &sp->points[k];
			double w = wall_of(p, proc, pt->t_ns);
			int64_t s = steps->n ? (int64_t)pt->step : (int64_t)k;
			scalar(t, "system/cpu_pct", w, s, pt->cpu_pct);
			scalar(t, "system/rss_bytes", w, s, pt->rss_bytes);
			scalar(t, "system/disk_read_bytes_per_s", w, s, pt->disk_read_bps);
			scalar(t, "system/disk_write_bytes_per_s", w, s, pt->disk_write_bps);
			scalar(t, "system/net_rx_bytes_per_s", w, s, pt->net_rx_bps);
			scalar(t, "system/net_tx_bytes_per_s", w, s, pt->net_tx_bps);
		}
	}
}

static int cmp_total(const void *a, const void *b, void *ctx)
{
	const ana_profile *p = ctx;
	uint64_t x = p->nodes[*(const uint32_t *)a].total_ns, y = p->nodes[*(const uint32_t *)b].total_ns;
	return x < y ? 1 : x > y ? -1 : 0;
}

static int has_series(const ana_profile *p, uint32_t proc)
{
	if (p->procs[proc].step_ns.n)
		return 1;
	for (uint32_t i = 0; p->sys && i < p->sys->nprocs; i++)
		if (p->sys->procs[i].process == proc && p->sys->procs[i].npoints)
			return 1;
	return 0;
}

int exp_tensorboard(const ana_profile *p, const char *dir, fmt_error *err)
{
	uint32_t top[TB_TOP_REGIONS], ntop = 0;
	uint32_t *order = malloc((p->nnodes ? p->nnodes : 1) * sizeof *order);
	if (!order)
		return FENNEC_ENOMEM;
	for (uint32_t i = 0; i < p->nnodes; i++)
		order[i] = i;
	qsort_r(order, p->nnodes, sizeof *order, cmp_total, (void *)p);
	for (uint32_t i = 0; i < p->nnodes && ntop < TB_TOP_REGIONS; i++)
		top[ntop++] = order[i];
	free(order);
	int rc = 0;
	for (uint32_t proc = 0; proc < p->nprocs && !rc; proc++) {
		if (proc && !has_series(p, proc))
			continue;
		char sub[4200];
		const fmt_file *f = &p->procs[proc].file;
		if (!proc)
			snprintf(sub, sizeof sub, "%.3800s", dir);
		else if (p->nranks > 1 && f->rank >= 0 && p->ranks[p->procs[proc].rank_index].proc == proc)
			snprintf(sub, sizeof sub, "%.3800s/rank%lld", dir, (long long)f->rank);
		else
			snprintf(sub, sizeof sub, "%.3800s/pid%llu", dir, (unsigned long long)f->pid);
		tb_file t = {0};
		if (tb_open(&t, sub, p, proc) < 0) {
			err->code = FENNEC_EIO;
			snprintf(err->msg, sizeof err->msg, "%.400s: cannot write: %s", t.f ? t.path : sub, strerror(errno));
			if (t.f)
				fclose(t.f);
			return FENNEC_EIO;
		}
		process_series(&t, p, proc, top, ntop);
		if (!proc)
			metrics(&t, p);
		if (ferror(t.f) || t.failed)
			rc = FENNEC_EIO;
		if (fclose(t.f) != 0)
			rc = FENNEC_EIO;
		if (rc) {
			err->code = rc;
			snprintf(err->msg, sizeof err->msg, "%.400s: writing failed: %s", t.path, strerror(errno));
		}
	}
	return rc;
}

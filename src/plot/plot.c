/*
 * plot.c - the charts of `fennec plot`, drawn once over the canvas interface (canvas.h):
 * axes with round ticks in readable units (ns as µs/ms/s, bytes as KiB/MiB/GiB, large
 * counts as k/M/G), a title and a subtitle that say what is shown, a legend, the series.
 * A series with more than two points per pixel column is drawn as each column's minimum
 * and maximum (every peak stays visible); the subtitle says so.
 */
#include "plot/plot.h"

#include <math.h>
#include <stdlib.h>
#include <string.h>

#include "plot/canvas.h"
#include "report/report.h"

enum unit { U_PLAIN, U_NS, U_BYTES };

#define C_TEXT 0x222222
#define C_SUBTLE 0x666666
#define C_GRID 0xe8e8e8
#define C_AXIS 0x888888
#define C_SERIES 0x1f77b4
#define C_MEAN 0xff7f0e
#define C_RSS 0x2ca02c
#define C_TOTAL 0x9ecae1
#define C_SELF 0x3182bd

typedef struct axis {
	double lo, hi;        /* the range shown, data units */
	double step;          /* between ticks, data units */
	double div;           /* data units per displayed unit */
	const char *suffix;   /* the displayed unit */
	int decimals;         /* of tick labels */
} axis;

typedef struct chart {
	plot_canvas *c;
	const ana_profile *p;
	const plot_options *o;
	double k;             /* scale of fonts and spacing: 1 at 960 x 540 */
	double w, h;
	double x0, y0, x1, y1; /* the plot area */
	axis ax, ay;
	double legend_x;      /* where the next legend entry goes */
	char title[512];
} chart;

static const char *const kind_names[] = {"timing", "memory", "steps", "metrics"};

int plot_kind_parse(const char *name)
{
	for (int i = 0; name && i < PLOT_NKINDS; i++)
		if (!strcmp(name, kind_names[i]))
			return i;
	return -1;
}

const char *plot_kind_name(int kind) { return kind >= 0 && kind < PLOT_NKINDS ? kind_names[kind] : "?"; }

const ana_metric *plot_find_metric(const ana_profile *p, const char *name)
{
	for (uint32_t i = 0; name && i < p->nmetrics; i++)
		if (!strcmp(p->names[p->metrics[i].name], name))
			return &p->metrics[i];
	return NULL;
}

int plot_has_data(const ana_profile *p, const plot_options *o)
{
	switch (o->kind) {
	case PLOT_TIMING: return p->nnodes ? 0 : FENNEC_ENODATA;
	case PLOT_STEPS: return p->step_ns.n ? 0 : FENNEC_ENODATA;
	case PLOT_METRICS:
		if (!p->nmetrics)
			return FENNEC_ENODATA;
		return plot_find_metric(p, o->metric) ? 0 : FENNEC_ENOENT;
	case PLOT_MEMORY: return p->mem.present && p->mem.npoints ? 0 : FENNEC_ENODATA;
	default: return FENNEC_EINVAL;
	}
}

/* ---- text and numbers ---- */

/* Approximate advance width of UTF-8 text in a sans-serif font: the layout uses it
 * (both backends lay out alike; cairo measures again to anchor its text). */
static double text_w(const char *s, double size)
{
	size_t n = 0;
	for (; *s; s++)
		n += ((unsigned char)*s & 0xc0) != 0x80;
	return (double)n * 0.58 * size;
}

/* s cut from the left to fit `width` pixels, as "…tail" (paths keep their innermost end). */
static const char *fit_left(const char *s, double size, double width, char *buf, size_t n)
{
	if (text_w(s, size) <= width)
		return s;
	const char *t = s + strlen(s);
	while (t > s && text_w(t - 1, size) + size <= width)
		t--;
	while (((unsigned char)*t & 0xc0) == 0x80)
		t++;
	snprintf(buf, n, "…%s", t);
	return buf;
}

static void unit_scale(enum unit u, double mag, double *div, const char **suffix)
{
	if (u == U_NS) {
		*div = mag >= 1e9 ? 1e9 : mag >= 1e6 ? 1e6 : mag >= 1e3 ? 1e3 : 1;
		*suffix = mag >= 1e9 ? " s" : mag >= 1e6 ? " ms" : mag >= 1e3 ? " µs" : " ns";
	} else if (u == U_BYTES) {
		*div = mag >= 0x1p30 ? 0x1p30 : mag >= 0x1p20 ? 0x1p20 : mag >= 0x1p10 ? 0x1p10 : 1;
		*suffix = mag >= 0x1p30 ? " GiB" : mag >= 0x1p20 ? " MiB" : mag >= 0x1p10 ? " KiB" : " B";
	} else {
		*div = mag >= 1e9 ? 1e9 : mag >= 1e6 ? 1e6 : mag >= 1e4 ? 1e3 : 1;
		*suffix = mag >= 1e9 ? "G" : mag >= 1e6 ? "M" : mag >= 1e4 ? "k" : "";
	}
}

/* A value for reading, in its unit: "12.3 ms", "1.5 MiB", "0.25". */
static const char *fmt_value(enum unit u, double v, char *buf, size_t n)
{
	if (!isfinite(v))
		snprintf(buf, n, "-");
	else if (u == U_NS)
		ana_fmt_ns(v, buf, n);
	else {
		double div;
		const char *suffix;
		unit_scale(u, fabs(v), &div, &suffix);
		snprintf(buf, n, "%.4g%s", v / div, suffix);
	}
	return buf;
}

/* The unit a metric's name states: "..._ns" is time, "...bytes" is bytes. */
static enum unit metric_unit(const char *name)
{
	size_t n = strlen(name);
	if (n >= 3 && !strcmp(name + n - 3, "_ns"))
		return U_NS;
	if (n >= 5 && !strcmp(name + n - 5, "bytes"))
		return U_BYTES;
	return U_PLAIN;
}

/* ---- axes ---- */

static double nice_step(double range, int target)
{
	double raw = range / (target > 0 ? target : 1);
	double mag = pow(10, floor(log10(raw)));
	double f = raw / mag;
	return (f <= 1 ? 1 : f <= 2 ? 2 : f <= 2.5 ? 2.5 : f <= 5 ? 5 : 10) * mag;
}

/*
 * An axis over [lo, hi] with about `target` ticks, in the unit's readable scale. `whole`:
 * ticks on integers only (step numbers). `tight`: the range is [lo, hi] exactly, else it
 * is widened to the ticks around it.
 */
static axis axis_make(double lo, double hi, enum unit u, int target, int whole, int tight)
{
	axis a;
	if (!isfinite(lo) || !isfinite(hi)) {
		lo = 0;
		hi = 1;
	}
	if (!(hi > lo))
		hi = lo + (lo != 0 ? fabs(lo) * 0.1 : 1);
	unit_scale(u, fmax(fabs(lo), fabs(hi)), &a.div, &a.suffix);
	double step = nice_step((hi - lo) / a.div, target);
	if (whole && step * a.div < 1)
		step = 1 / a.div;
	a.step = step * a.div;
	a.lo = tight ? lo : floor(lo / a.step + 1e-9) * a.step;
	a.hi = tight ? hi : ceil(hi / a.step - 1e-9) * a.step;
	a.decimals = 0;
	while (a.decimals < 6 && fabs(step * pow(10, a.decimals) - round(step * pow(10, a.decimals))) > 1e-6)
		a.decimals++;
	return a;
}

static const char *tick_label(const axis *a, double v, char *buf, size_t n)
{
	double d = v / a->div;
	if (fabs(d) < 1e-9 * (a->step / a->div))
		d = 0; /* no "-0" */
	snprintf(buf, n, "%.*f%s", a->decimals, d, a->suffix);
	return buf;
}

#define MAX_TICKS 64

/* The ticks of an axis into t (at most MAX_TICKS: a range below the resolution of its
 * magnitude could otherwise repeat one value forever); returns how many. */
static int ticks(const axis *a, double *t)
{
	double first = ceil(a->lo / a->step - 1e-9) * a->step;
	int n = 0;
	for (int i = 0; n < MAX_TICKS; i++) {
		double v = first + i * a->step;
		if (v > a->hi + a->step * 1e-9)
			break;
		if (!n || v > t[n - 1])
			t[n++] = v;
	}
	return n;
}

static double px(const chart *ch, double v) { return ch->x0 + (v - ch->ax.lo) / (ch->ax.hi - ch->ax.lo) * (ch->x1 - ch->x0); }
static double py(const chart *ch, double v) { return ch->y1 - (v - ch->ay.lo) / (ch->ay.hi - ch->ay.lo) * (ch->y1 - ch->y0); }

/* ---- layout ---- */

/* The title, and the top, bottom and right edges of the plot area below it (and below
 * a legend row). */
static void header(chart *ch, int legend)
{
	double k = ch->k;
	const char *t = ch->o->title ? ch->o->title : ch->title;
	char buf[512];
	ch->c->ops->text(ch->c, 12 * k, 24 * k, fit_left(t, 16 * k, ch->w - 24 * k, buf, sizeof buf), 16 * k,
			 PLOT_ANCHOR_START, C_TEXT, 1, 0);
	ch->y0 = (legend ? 76 : 58) * k;
	ch->y1 = ch->h - 46 * k;
	ch->x1 = ch->w - 20 * k;
}

/* The left edge of the plot area, from the widest y tick label. */
static void left_edge(chart *ch)
{
	char buf[64];
	double wmax = 0, t[MAX_TICKS];
	for (int i = 0, n = ticks(&ch->ay, t); i < n; i++)
		wmax = fmax(wmax, text_w(tick_label(&ch->ay, t[i], buf, sizeof buf), 11 * ch->k));
	ch->x0 = 12 * ch->k + 16 * ch->k + wmax + 8 * ch->k;
	ch->legend_x = ch->x0;
}

/* The line under the title: what the chart shows, in numbers. */
static void subtitle(chart *ch, const char *s)
{
	ch->c->ops->text(ch->c, 12 * ch->k, 43 * ch->k, s, 11 * ch->k, PLOT_ANCHOR_START, C_SUBTLE, 0, 0);
}

static void legend(chart *ch, uint32_t color, int box, int dashed, const char *label)
{
	double k = ch->k, y = 62 * k;
	if (box)
		ch->c->ops->rect(ch->c, ch->legend_x, y - 9 * k, 14 * k, 10 * k, color, "legend", NULL);
	else
		ch->c->ops->line(ch->c, ch->legend_x, y - 4 * k, ch->legend_x + 18 * k, y - 4 * k, color, 2 * k, dashed,
				 "legend");
	ch->legend_x += (box ? 14 : 18) * k + 5 * k;
	ch->c->ops->text(ch->c, ch->legend_x, y, label, 11 * k, PLOT_ANCHOR_START, C_TEXT, 0, 0);
	ch->legend_x += text_w(label, 11 * k) + 16 * k;
}

/* Grid lines and tick labels of both axes (y: `ylines` draws horizontal lines), the axis
 * lines and the axis titles. */
static void axes(chart *ch, const char *xtitle, const char *ytitle, int ylines)
{
	plot_canvas *c = ch->c;
	double k = ch->k, t[MAX_TICKS];
	char buf[64];
	if (ylines)
		for (int i = 0, n = ticks(&ch->ay, t); i < n; i++) {
			double y = py(ch, t[i]);
			c->ops->line(c, ch->x0, y, ch->x1, y, C_GRID, 1, 0, "grid");
			c->ops->text(c, ch->x0 - 6 * k, y + 4 * k, tick_label(&ch->ay, t[i], buf, sizeof buf), 11 * k,
				     PLOT_ANCHOR_END, C_SUBTLE, 0, 0);
		}
	/* x ticks: skip labels that would run into the previous one. */
	double last_end = -1e300;
	for (int i = 0, n = ticks(&ch->ax, t); i < n; i++) {
		double x = px(ch, t[i]);
		const char *s = tick_label(&ch->ax, t[i], buf, sizeof buf);
		double tw = text_w(s, 11 * k);
		if (!ylines)
			c->ops->line(c, x, ch->y0, x, ch->y1, C_GRID, 1, 0, "grid");
		c->ops->line(c, x, ch->y1, x, ch->y1 + 4 * k, C_AXIS, 1, 0, "tick");
		if (x - tw / 2 > last_end + 6 * k && x + tw / 2 <= ch->w) {
			c->ops->text(c, x, ch->y1 + 17 * k, s, 11 * k, PLOT_ANCHOR_MIDDLE, C_SUBTLE, 0, 0);
			last_end = x + tw / 2;
		}
	}
	c->ops->line(c, ch->x0, ch->y1, ch->x1, ch->y1, C_AXIS, 1, 0, "axis");
	if (ylines)
		c->ops->line(c, ch->x0, ch->y0, ch->x0, ch->y1, C_AXIS, 1, 0, "axis");
	c->ops->text(c, (ch->x0 + ch->x1) / 2, ch->y1 + 36 * k, xtitle, 11 * k, PLOT_ANCHOR_MIDDLE, C_TEXT, 0, 0);
	if (ytitle)
		c->ops->text(c, 24 * k, (ch->y0 + ch->y1) / 2, ytitle, 11 * k, PLOT_ANCHOR_MIDDLE, C_TEXT, 0, 1);
}

/*
 * Points (x[i], y[i]) as pixels into xy (room for 2 * n points). Beyond two points per
 * pixel column, each column contributes its minimum and maximum, in the order they
 * came; *thinned is set then. x must be ascending. Returns the number of points.
 */
static size_t to_pixels(const chart *ch, const double *x, const double *y, size_t n, double *xy, int *thinned)
{
	size_t m = 0;
	*thinned = n > 2 * (size_t)(ch->x1 - ch->x0 + 1);
	if (!*thinned) {
		for (size_t i = 0; i < n; i++) {
			xy[2 * m] = px(ch, x[i]);
			xy[2 * m++ + 1] = py(ch, y[i]);
		}
		return m;
	}
	for (size_t i = 0; i < n;) {
		double col = floor(px(ch, x[i]));
		size_t lo = i, hi = i, j = i;
		for (; j < n && floor(px(ch, x[j])) == col; j++) {
			if (y[j] < y[lo])
				lo = j;
			if (y[j] > y[hi])
				hi = j;
		}
		size_t a = lo < hi ? lo : hi, b = lo < hi ? hi : lo;
		xy[2 * m] = col + 0.5;
		xy[2 * m++ + 1] = py(ch, y[a]);
		if (b != a) {
			xy[2 * m] = col + 0.5;
			xy[2 * m++ + 1] = py(ch, y[b]);
		}
		i = j;
	}
	return m;
}

/* A series as a polyline ("series"); a lone point also gets a mark, which a one-point
 * polyline does not draw. */
static int series(chart *ch, const double *x, const double *y, size_t n, uint32_t color, const char *tip, int *thinned)
{
	double *xy = calloc((n ? n : 1) * 2, sizeof *xy);
	if (!xy)
		return FENNEC_ENOMEM;
	size_t m = to_pixels(ch, x, y, n, xy, thinned);
	ch->c->ops->polyline(ch->c, xy, m, color, 1.6 * ch->k, "series", tip);
	if (m == 1)
		ch->c->ops->rect(ch->c, xy[0] - 3 * ch->k, xy[1] - 3 * ch->k, 6 * ch->k, 6 * ch->k, color, "point", tip);
	free(xy);
	return 0;
}

static const char *base_name(const char *path)
{
	const char *s = path ? strrchr(path, '/') : NULL;
	return s ? s + 1 : path ? path : "";
}

/* ---- charts ---- */

static int draw_timing(chart *ch)
{
	const ana_profile *p = ch->p;
	plot_canvas *c = ch->c;
	double k = ch->k;
	char sub[256], buf[256], v1[32], v2[32];
	uint32_t *order = rep_region_order(p);
	if (!order)
		return FENNEC_ENOMEM;
	snprintf(ch->title, sizeof ch->title, "%s: time by region", base_name(ch->o->source));
	header(ch, 1);
	/* As many rows as fit at 18 px each (scaled), at most 25. */
	uint32_t rows = (uint32_t)fmax(1, floor((ch->y1 - ch->y0) / (18 * k)));
	rows = rows > 25 ? 25 : rows;
	rows = rows > p->nnodes ? p->nnodes : rows;
	snprintf(sub, sizeof sub, "top %u of %u regions by total time, with their calls · wall time %s", rows, p->nnodes,
		 ana_fmt_ns((double)p->wall_ns, v1, sizeof v1));
	subtitle(ch, sub);

	double label_w = 0, max_total = 0;
	for (uint32_t r = 0; r < rows; r++) {
		const ana_node *n = &p->nodes[order[r]];
		label_w = fmax(label_w, text_w(n->path ? n->path : "", 11 * k));
		max_total = fmax(max_total, (double)n->total_ns);
	}
	label_w = fmin(label_w, 0.38 * ch->w);
	ch->x0 = 12 * k + label_w + 8 * k;
	ch->legend_x = ch->x0;
	ch->ax = axis_make(0, max_total, U_NS, (int)fmax(2, (ch->x1 - ch->x0) / (110 * k)), 0, 0);
	legend(ch, C_TOTAL, 1, 0, "total");
	legend(ch, C_SELF, 1, 0, "self (outside nested regions)");
	axes(ch, "time inside the region, all threads", NULL, 0);

	double band = (ch->y1 - ch->y0) / rows, bar_h = fmin(band * 0.72, 30 * k);
	for (uint32_t r = 0; r < rows; r++) {
		const ana_node *n = &p->nodes[order[r]];
		double y = ch->y0 + r * band + (band - bar_h) / 2, mid = y + bar_h / 2 + 4 * k;
		double xe = px(ch, (double)n->total_ns), xs = px(ch, (double)n->self_ns);
		snprintf(buf, sizeof buf, "%s: total %s (%.1f%% of wall time), self %s, %llu calls", n->path,
			 ana_fmt_ns((double)n->total_ns, v1, sizeof v1), n->share_pct,
			 ana_fmt_ns((double)n->self_ns, v2, sizeof v2), (unsigned long long)n->dist.count);
		c->ops->rect(c, ch->x0, y, fmax(xe - ch->x0, 1), bar_h, C_TOTAL, "bar", buf);
		if (n->self_ns)
			c->ops->rect(c, ch->x0, y, fmax(xs - ch->x0, 1), bar_h, C_SELF, "self", NULL);
		c->ops->text(c, ch->x0 - 8 * k, mid, fit_left(n->path ? n->path : "", 11 * k, label_w, buf, sizeof buf),
			     11 * k, PLOT_ANCHOR_END, C_TEXT, 0, 0);
		snprintf(buf, sizeof buf, "%s · %llu call%s", ana_fmt_ns((double)n->total_ns, v1, sizeof v1),
			 (unsigned long long)n->dist.count, n->dist.count == 1 ? "" : "s");
		/* Beside the bar when it fits, else inside its end. */
		if (xe + 6 * k + text_w(buf, 11 * k) <= ch->w - 4 * k)
			c->ops->text(c, xe + 6 * k, mid, buf, 11 * k, PLOT_ANCHOR_START, C_TEXT, 0, 0);
		else
			c->ops->text(c, xe - 6 * k, mid, buf, 11 * k, PLOT_ANCHOR_END, 0xffffff, 0, 0);
	}
	free(order);
	return 0;
}

static int draw_steps(chart *ch)
{
	const ana_profile *p = ch->p;
	const ana_dist *d = &p->step_dist;
	size_t n = p->step_ns.n;
	char sub[256], v1[32], v2[32], v3[32], lbl[64];
	double *x = malloc(n * sizeof *x), *y = malloc(n * sizeof *y), ymax = 0;
	if (!x || !y) {
		free(x);
		free(y);
		return FENNEC_ENOMEM;
	}
	for (size_t i = 0; i < n; i++) {
		x[i] = (double)(i + 1);
		y[i] = (double)p->step_ns.v[i];
		ymax = fmax(ymax, y[i]);
	}
	snprintf(ch->title, sizeof ch->title, "%s: step duration", base_name(ch->o->source));
	header(ch, 1);
	ch->ay = axis_make(0, ymax, U_NS, (int)fmax(2, (ch->y1 - ch->y0) / (60 * ch->k)), 0, 0);
	left_edge(ch);
	ch->ax = n > 1 ? axis_make(1, (double)n, U_PLAIN, (int)fmax(2, (ch->x1 - ch->x0) / (90 * ch->k)), 1, 1)
		       : axis_make(0, 2, U_PLAIN, 2, 1, 1);
	axes(ch, "step (step 1 starts when the process starts)", "duration", 1);
	int thinned, rc = series(ch, x, y, n, C_SERIES, "step duration", &thinned);
	if (!rc) {
		double ym = py(ch, d->mean);
		ch->c->ops->line(ch->c, ch->x0, ym, ch->x1, ym, C_MEAN, 1.5 * ch->k, 1, "mean");
		legend(ch, C_SERIES, 0, 0, "step duration");
		snprintf(lbl, sizeof lbl, "mean %s", ana_fmt_ns(d->mean, v1, sizeof v1));
		legend(ch, C_MEAN, 0, 1, lbl);
		snprintf(sub, sizeof sub, "%zu steps · mean %s · p50 %s · p95 %s%s", n, ana_fmt_ns(d->mean, v1, sizeof v1),
			 ana_fmt_ns(d->p50, v2, sizeof v2), ana_fmt_ns(d->p95, v3, sizeof v3),
			 thinned ? " · drawn as the min and max of each pixel column" : "");
		subtitle(ch, sub);
	}
	free(x);
	free(y);
	return rc;
}

/* The recording's time span: the earliest process start and the latest end. */
static void time_span(const ana_profile *p, uint64_t *t0, uint64_t *t_end)
{
	*t0 = UINT64_MAX;
	*t_end = 0;
	for (uint32_t i = 0; i < p->nprocs; i++) {
		*t0 = p->procs[i].start_ns < *t0 ? p->procs[i].start_ns : *t0;
		*t_end = p->procs[i].end_ns > *t_end ? p->procs[i].end_ns : *t_end;
	}
	if (*t0 == UINT64_MAX)
		*t0 = 0;
}

static int draw_metric(chart *ch)
{
	const ana_profile *p = ch->p;
	const ana_metric *m = plot_find_metric(p, ch->o->metric);
	if (!m)
		return FENNEC_ENOENT;
	const char *name = p->names[m->name];
	enum unit u = metric_unit(name);
	int counter = m->kind == FMT_SITE_COUNTER;
	uint64_t t0, t_end;
	time_span(p, &t0, &t_end);
	size_t n = 0, skipped = 0;
	double *x = malloc((m->npoints ? m->npoints : 1) * sizeof *x), *y = malloc((m->npoints ? m->npoints : 1) * sizeof *y);
	if (!x || !y) {
		free(x);
		free(y);
		return FENNEC_ENOMEM;
	}
	double total = 0, lo = INFINITY, hi = -INFINITY, xmax = (double)(t_end > t0 ? t_end - t0 : 0);
	for (size_t i = 0; i < m->npoints; i++) {
		double v = m->points[i].value;
		if (counter)
			v = total += v;
		if (!isfinite(v)) {
			skipped++;
			continue;
		}
		x[n] = m->points[i].t_ns > t0 ? (double)(m->points[i].t_ns - t0) : 0;
		y[n] = v;
		lo = fmin(lo, v);
		hi = fmax(hi, v);
		xmax = fmax(xmax, x[n]);
		n++;
	}
	/* Include zero when it is near: an axis from 0 shows proportions honestly. */
	if (lo > 0 && lo < hi * 0.5)
		lo = 0;
	if (hi < 0 && hi > lo * 0.5)
		hi = 0;
	snprintf(ch->title, sizeof ch->title, "%s: %s", base_name(ch->o->source), name);
	header(ch, 1);
	ch->ay = axis_make(n ? lo : 0, n ? hi : 1, u, (int)fmax(2, (ch->y1 - ch->y0) / (60 * ch->k)), 0, 0);
	left_edge(ch);
	ch->ax = axis_make(0, xmax, U_NS, (int)fmax(2, (ch->x1 - ch->x0) / (90 * ch->k)), 0, 1);
	axes(ch, "time since the recording started", counter ? "running total" : "value", 1);
	int thinned = 0, rc = series(ch, x, y, n, C_SERIES, name, &thinned);
	if (!rc) {
		char sub[384], lbl[300], v1[32], v2[32], v3[32];
		snprintf(lbl, sizeof lbl, counter ? "%s (running total)" : "%s", name);
		legend(ch, C_SERIES, 0, 0, lbl);
		int len;
		if (counter)
			len = snprintf(sub, sizeof sub, "counter · %llu updates · total %s", (unsigned long long)m->count,
				       fmt_value(u, m->total, v1, sizeof v1));
		else if (m->kind == FMT_SITE_GAUGE)
			len = snprintf(sub, sizeof sub, "gauge · %llu updates · last %s · min %s · max %s",
				       (unsigned long long)m->count, fmt_value(u, m->last, v1, sizeof v1),
				       fmt_value(u, m->min, v2, sizeof v2), fmt_value(u, m->max, v3, sizeof v3));
		else
			len = snprintf(sub, sizeof sub, "value · %llu records · mean %s · p50 %s · p95 %s",
				       (unsigned long long)m->count, fmt_value(u, m->dist.mean, v1, sizeof v1),
				       fmt_value(u, m->dist.p50, v2, sizeof v2), fmt_value(u, m->dist.p95, v3, sizeof v3));
		if (skipped && len > 0 && (size_t)len < sizeof sub)
			len += snprintf(sub + len, sizeof sub - (size_t)len, " · %zu non-finite values left out", skipped);
		if (thinned && len > 0 && (size_t)len < sizeof sub)
			snprintf(sub + len, sizeof sub - (size_t)len, " · drawn as the min and max of each pixel column");
		subtitle(ch, sub);
	}
	free(x);
	free(y);
	return rc;
}

/* Live heap and RSS of one process over time: the process with the heap's peak (the
 * timelines of several processes do not add up point by point). */
static int draw_memory(chart *ch)
{
	const ana_profile *p = ch->p;
	const ana_memory *mem = &p->mem;
	uint32_t proc = mem->peak_process;
	uint64_t t0, t_end;
	time_span(p, &t0, &t_end);
	size_t n = 0, nr = 0, cap = mem->npoints ? mem->npoints : 1;
	double *xh = malloc(cap * sizeof *xh), *yh = malloc(cap * sizeof *yh);
	double *xr = malloc(cap * sizeof *xr), *yr = malloc(cap * sizeof *yr);
	int rc = 0;
	if (!xh || !yh || !xr || !yr) {
		rc = FENNEC_ENOMEM;
		goto out;
	}
	double ymax = 0, xmax = (double)(t_end > t0 ? t_end - t0 : 0);
	for (size_t i = 0; i < mem->npoints; i++) {
		const ana_mem_point *pt = &mem->points[i];
		if (pt->process != proc)
			continue;
		double x = pt->t_ns > t0 ? (double)(pt->t_ns - t0) : 0;
		xh[n] = x;
		yh[n++] = (double)pt->live_bytes;
		if (pt->rss_bytes) { /* 0: not known at that point */
			xr[nr] = x;
			yr[nr++] = (double)pt->rss_bytes;
		}
		ymax = fmax(ymax, fmax((double)pt->live_bytes, (double)pt->rss_bytes));
		xmax = fmax(xmax, x);
	}
	uint64_t pid = proc < p->nprocs ? p->procs[proc].file.pid : 0;
	snprintf(ch->title, sizeof ch->title, "%s: memory", base_name(ch->o->source));
	header(ch, 1);
	ch->ay = axis_make(0, ymax, U_BYTES, (int)fmax(2, (ch->y1 - ch->y0) / (60 * ch->k)), 0, 0);
	left_edge(ch);
	ch->ax = axis_make(0, xmax, U_NS, (int)fmax(2, (ch->x1 - ch->x0) / (90 * ch->k)), 0, 1);
	axes(ch, "time since the recording started", "bytes", 1);
	int thin_h = 0, thin_r = 0;
	if (nr && (rc = series(ch, xr, yr, nr, C_RSS, "RSS", &thin_r)))
		goto out;
	if ((rc = series(ch, xh, yh, n, C_SERIES, "live heap", &thin_h)))
		goto out;
	legend(ch, C_SERIES, 0, 0, "live heap");
	if (nr)
		legend(ch, C_RSS, 0, 0, "RSS");
	char sub[384], v1[32], v2[32];
	snprintf(sub, sizeof sub, "process %llu · %zu snapshots · peak heap %s · peak RSS %s%s%s",
		 (unsigned long long)pid, n, fmt_value(U_BYTES, (double)mem->peak_bytes, v1, sizeof v1),
		 mem->peak_rss_bytes ? fmt_value(U_BYTES, (double)mem->peak_rss_bytes, v2, sizeof v2) : "unknown",
		 p->nprocs > 1 ? " · the process with the heap's peak" : "",
		 thin_h || thin_r ? " · drawn as the min and max of each pixel column" : "");
	subtitle(ch, sub);
out:
	free(xh);
	free(yh);
	free(xr);
	free(yr);
	return rc;
}

int plot_write(FILE *out, const ana_profile *p, const plot_options *o)
{
	if (o->kind < 0 || o->kind >= PLOT_NKINDS || o->width < PLOT_MIN_WIDTH || o->height < PLOT_MIN_HEIGHT ||
	    o->width > PLOT_MAX_SIZE || o->height > PLOT_MAX_SIZE || (o->format != PLOT_SVG && o->format != PLOT_PNG))
		return FENNEC_EINVAL;
	int rc = plot_has_data(p, o);
	if (rc)
		return rc;
	plot_canvas *c;
	rc = o->format == PLOT_SVG ? plot_canvas_svg(out, o->width, o->height, &c)
				   : plot_canvas_png(out, o->width, o->height, &c);
	if (rc)
		return rc;
	chart *ch = calloc(1, sizeof *ch);
	if (!ch) {
		c->ops->free(c);
		return FENNEC_ENOMEM;
	}
	ch->c = c;
	ch->p = p;
	ch->o = o;
	ch->w = o->width;
	ch->h = o->height;
	/* Fonts and spacing grow with the image, so a large plot reads like a small one. */
	ch->k = fmin(fmax(fmin(ch->w / 960, ch->h / 540), 0.8), 4);
	switch (o->kind) {
	case PLOT_TIMING: rc = draw_timing(ch); break;
	case PLOT_STEPS: rc = draw_steps(ch); break;
	case PLOT_METRICS: rc = draw_metric(ch); break;
	default: rc = draw_memory(ch); break;
	}
	if (!rc)
		rc = c->ops->finish(c);
	c->ops->free(c);
	free(ch);
	return rc;
}

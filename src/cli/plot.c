/*
 * plot.c - `fennec plot FILE --kind K -o OUT.svg|OUT.png`: a chart of a recording for a
 * slide or an issue (docs/plot.md). The charts are in src/plot/; this file parses the
 * options, says what is missing when the recording cannot give the chart, and writes to
 * a temporary file renamed at the end, so a failure leaves no half-written image.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>
#include <unistd.h>

#include "analyze/analyze.h"
#include "cli/cli.h"
#include "plot/plot.h"

static const char help[] =
	"usage: fennec plot FILE|DIR --kind KIND -o OUT.svg|OUT.png [options]\n"
	"\n"
	"  --kind KIND            timing   time by region: the top regions' total and self time, with calls\n"
	"                         steps    the duration of every step, with the mean\n"
	"                         metrics  a metric over time (a counter as its running total)\n"
	"                         memory   live heap and RSS over time (recordings with memory data)\n"
	"  -o, --output FILE      the image: SVG or PNG, by the file's extension\n"
	"  --width W, --height H  size in pixels (default 960 x 540; from 320 x 240 to 8192 x 8192)\n"
	"  --metric NAME          --kind metrics: which metric (needed when there are several)\n"
	"  --title TEXT           the chart's title (default: the file and what is shown)\n"
	"  --force                skip a damaged chunk to the next whole one, as analyze --force\n"
	"\n"
	"Charts, their units and how they are drawn: docs/plot.md.\n"
	CLI_WINDOW_HELP;

static int has_ext(const char *path, const char *ext)
{
	size_t n = strlen(path), e = strlen(ext);
	return n > e && !strcasecmp(path + n - e, ext);
}

/* The metric names of the recording, comma-separated, into buf. */
static const char *metric_names(const ana_profile *p, char *buf, size_t n)
{
	size_t len = 0;
	buf[0] = 0;
	for (uint32_t i = 0; i < p->nmetrics && len < n; i++) {
		int w = snprintf(buf + len, n - len, "%s%s", i ? ", " : "", p->names[p->metrics[i].name]);
		if (w < 0)
			break;
		len += (size_t)w;
	}
	if (len >= n && n > 4)
		strcpy(buf + n - 4, "...");
	return buf;
}

/* Why the recording cannot give the chart, in words. Returns the exit status. */
static int no_data(const char *path, const ana_profile *p, const plot_options *o)
{
	char names[1024];
	switch (o->kind) {
	case PLOT_TIMING:
		cli_error("plot", "no regions in %s: the program marked none (fennec_region_begin); "
				  "for sampled functions, see fennec export --format svg", path);
		break;
	case PLOT_STEPS:
		cli_error("plot", "no steps in %s: the program never called fennec_step()", path);
		break;
	case PLOT_MEMORY:
		cli_error("plot", "no memory data in %s: the recording has no heap or RSS timeline "
				  "(it was recorded with --memory off)", path);
		break;
	default:
		if (!p->nmetrics)
			cli_error("plot", "no metrics in %s: the program recorded none (fennec_counter_add, "
					  "fennec_gauge_set, fennec_value_record)", path);
		else
			cli_error("plot", "no metric '%s' in %s; its metrics: %s", o->metric, path,
				  metric_names(p, names, sizeof names));
	}
	return 1;
}

int cmd_plot(int argc, char **argv)
{
	const char *path = NULL, *out_path = NULL;
	plot_options o = {.kind = -1, .width = 960, .height = 540};
	ana_options ao = {.hot_threshold_pct = 10};
	for (int i = 1; i < argc; i++) {
		cli_arg x;
		cli_arg_read(&x, argc, argv, i);
		int wa;
		const char *a = x.a, *v = x.v;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fputs(help, stdout);
			return 0;
		} else if ((wa = cli_window_arg("plot", &x, &ao.window)) != 0) {
			if (wa < 0) {
				return 2;
			}
			i += cli_take(&x);
		} else if (!strcmp(a, "--kind") || !strcmp(a, "-k")) {
			if ((o.kind = plot_kind_parse(v)) < 0) {
				cli_error("plot", "--kind must be timing, steps, metrics or memory, not '%s'", v ? v : "");
				return 2;
			}
			i += cli_take(&x);
		} else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
			if (!v) {
				cli_error("plot", "%s needs a file name", a);
				return 2;
			}
			out_path = v;
			i += cli_take(&x);
		} else if (!strcmp(a, "--width") || !strcmp(a, "--height")) {
			if (cli_parse_u32("plot", a, v, a[2] == 'w' ? PLOT_MIN_WIDTH : PLOT_MIN_HEIGHT, PLOT_MAX_SIZE,
					  a[2] == 'w' ? &o.width : &o.height) < 0)
				return 2;
			i += cli_take(&x);
		} else if (!strcmp(a, "--metric")) {
			if (!v || !v[0]) {
				cli_error("plot", "--metric needs a metric's name");
				return 2;
			}
			o.metric = v;
			i += cli_take(&x);
		} else if (!strcmp(a, "--title")) {
			if (!v) {
				cli_error("plot", "--title needs a text");
				return 2;
			}
			o.title = v;
			i += cli_take(&x);
		} else if (!strcmp(a, "--force"))
			ao.force = 1;
		else if (a[0] == '-' && a[1]) {
			cli_error("plot", "unknown option '%s' (see fennec plot --help)", a);
			return 2;
		} else if (!path)
			path = a;
		else {
			cli_error("plot", "one recording at a time: '%s' and '%s'", path, a);
			return 2;
		}
		if (cli_arg_done("plot", &x) < 0)
			return 2;
	}
	if (!path) {
		cli_error("plot", "which recording? usage: fennec plot FILE --kind KIND -o OUT.svg|OUT.png");
		return 2;
	}
	if (o.kind < 0) {
		cli_error("plot", "which chart? --kind timing, steps, metrics or memory");
		return 2;
	}
	if (!out_path) {
		cli_error("plot", "where to? -o OUT.svg or -o OUT.png");
		return 2;
	}
	if (has_ext(out_path, ".svg"))
		o.format = PLOT_SVG;
	else if (has_ext(out_path, ".png"))
		o.format = PLOT_PNG;
	else {
		cli_error("plot", "the output's name must end in .svg or .png, not '%s'", out_path);
		return 2;
	}
	if (o.metric && o.kind != PLOT_METRICS) {
		cli_error("plot", "--metric applies to --kind metrics only");
		return 2;
	}
	if (cli_out_check("plot", out_path, &path, 1) < 0)
		return 2;
	o.source = path;
	const char *why;
	if (o.format == PLOT_PNG && plot_png_load(&why)) {
		cli_error("plot", "cannot write PNG: %s", why);
		return 1;
	}

	ana_profile p;
	fmt_error err;
	int rc = ana_load(path, &ao, &p, &err);
	if (rc) {
		fprintf(stderr, "fennec plot: %s\n", err.msg[0] ? err.msg : fennec_strerror(rc));
		rc = p.window.bad ? 2 : 1;
		ana_profile_free(&p);
		return rc;
	}
	/* One metric needs no name; several do. */
	if (o.kind == PLOT_METRICS && !o.metric && p.nmetrics == 1)
		o.metric = p.names[p.metrics[0].name];
	else if (o.kind == PLOT_METRICS && !o.metric && p.nmetrics > 1) {
		char names[1024];
		cli_error("plot", "which metric? %s has %u: --metric NAME, one of %s", path, p.nmetrics,
			  metric_names(&p, names, sizeof names));
		ana_profile_free(&p);
		return 2;
	}
	if (plot_has_data(&p, &o)) {
		rc = no_data(path, &p, &o);
		ana_profile_free(&p);
		return rc;
	}

	cli_out out;
	if (cli_out_open("plot", &out, out_path) < 0) {
		ana_profile_free(&p);
		return 1;
	}
	rc = plot_write(out.f, &p, &o);
	if (rc)
		cli_error("plot", "writing %s failed: %s", out_path, rc == FENNEC_EIO ? strerror(errno) : fennec_strerror(rc));
	if (cli_out_close("plot", &out, rc) < 0)
		rc = FENNEC_EIO;
	else
		for (uint32_t i = 0; i < p.nwarnings; i++)
			fprintf(stderr, "fennec plot: warning: %s\n", p.warnings[i]);
	ana_profile_free(&p);
	return rc ? 1 : 0;
}

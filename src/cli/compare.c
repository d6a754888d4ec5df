/*
 * compare.c - `fennec compare A B`: load two recordings (keeping every region call's
 * duration), compare them (src/analyze/compare.c) and render text or JSON
 * (src/report/compare_*.c, docs/compare.md) to stdout or -o FILE; html adds the differential
 * flame graph (src/export/diffsvg.c). A recording that cannot
 * be read exits 1 with the reader's message; a usage error exits 2.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyze/compare.h"
#include "cli/cli.h"
#include "export/export.h"
#include "report/compare.h"
#include "report/report.h"

static const char help[] =
	"usage: fennec compare A B [options]     (A: before, B: after; files or directories)\n"
	"\n"
	"  --format text|json|html  report format (default text; json schema: docs/compare.md;\n"
	"                         html: one self-contained page with charts and the flame graph)\n"
	"  -o, --output FILE      write the report to FILE instead of standard output (a recording\n"
	"                         there, read or not, is refused, not replaced)\n"
	"  --threshold PCT        smallest change called significant (default 2): a speedup\n"
	"                         within 1/(1+PCT/100) .. 1+PCT/100 is noise\n"
	"  --alpha P              significance level of the tests (default 0.05)\n"
	"  --resamples N          bootstrap resamples (default 2000)\n"
	"  --max-regions N        rows in the text region table (default 40, 0 = all)\n"
	"  --top N                rows in the text function table (default 20, 0 = all)\n"
	"  --force                skip a damaged chunk to the next whole one, as analyze --force\n"
	"  --native               Python programs: keep the interpreter's C frames (default: folded into\n"
	"                         the Python frames that run them)\n"
	"  --color, --no-color    colour the text report (default: on a terminal, unless NO_COLOR is set)\n"
	"\n"
	"speedup = A / B: 2.00x means B takes half the time of A. A differential flame graph:\n"
	"fennec export B --format diff-svg --base A -o diff.svg\n"
	CLI_WINDOW_HELP;

/* Load one side; prints why it failed. */
static int load(const char *path, const ana_options *opt, ana_profile *p)
{
	fmt_error err;
	int rc = ana_load(path, opt, p, &err);
	if (rc)
		fprintf(stderr, "fennec compare: %s\n", err.msg[0] ? err.msg : fennec_strerror(rc));
	return rc;
}

/* Write the report to out_path (through a temporary file renamed at the end, so a
 * failure leaves no half report) or stdout. Returns 0 or 1. */
enum { FMT_TEXT, FMT_JSON, FMT_HTML };

/* B's differential flame graph against A as SVG text (malloc'd), or NULL with *why set. */
static char *diff_svg(const ana_compare_result *r, const char **why)
{
	exp_options eo;
	exp_options_init(&eo);
	eo.kind = ANA_CPU;
	eo.title = "Differential flame graph: B against A";
	if (!exp_select_count(r->a.p, &eo, NULL) || !exp_select_count(r->b.p, &eo, NULL)) {
		*why = "No differential flame graph: one of the runs has no on-CPU samples (record with --sample=cpu).";
		return NULL;
	}
	char *buf = NULL;
	size_t len = 0;
	FILE *mem = open_memstream(&buf, &len);
	if (!mem || exp_diff_svg(mem, r->a.p, r->b.p, &eo)) {
		if (mem)
			fclose(mem);
		free(buf);
		*why = "No differential flame graph: out of memory drawing it.";
		return NULL;
	}
	fclose(mem);
	return buf;
}

static int render(FILE *f, int format, const ana_compare_result *r, const rep_compare_options *ro)
{
	if (format == FMT_JSON)
		return rep_compare_json(f, r, ro);
	if (format == FMT_TEXT)
		return rep_compare_text(f, r, ro);
	rep_web web;
	cli_web(&web);
	const char *why = NULL;
	char *svg = diff_svg(r, &why);
	int rc = rep_compare_html(f, r, ro, &web, svg, why);
	free(svg);
	return rc;
}

static int write_report(const char *out_path, int format, const ana_compare_result *r, const rep_compare_options *ro)
{
	cli_out o;
	if (cli_out_open("compare", &o, out_path) < 0)
		return 1;
	int rc = render(o.f, format, r, ro);
	if (rc)
		cli_error("compare", "writing %s failed: %s", out_path ? out_path : "the report",
			  rc == FENNEC_EIO ? strerror(errno) : fennec_strerror(rc));
	return cli_out_close("compare", &o, rc) < 0;
}

int cmd_compare(int argc, char **argv)
{
	const char *path[2] = {NULL, NULL}, *out_path = NULL;
	int format = FMT_TEXT;
	ana_options opt = {.hot_threshold_pct = 10, .keep_durations = 1};
	ana_compare_options co;
	ana_compare_options_init(&co);
	rep_compare_options ro = {.color = -1, .max_regions = 40, .max_funcs = 20};
	for (int i = 1; i < argc; i++) {
		cli_arg x;
		cli_arg_read(&x, argc, argv, i);
		int wa;
		const char *a = x.a, *v = x.v;
		unsigned n;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fputs(help, stdout);
			return 0;
		} else if ((wa = cli_window_arg("compare", &x, &opt.window)) != 0) {
			if (wa < 0) {
				return 2;
			}
			i += cli_take(&x);
		} else if (!strcmp(a, "--format") || !strcmp(a, "-f")) {
			if (!v || (strcmp(v, "text") && strcmp(v, "json") && strcmp(v, "html"))) {
				cli_error("compare", "--format must be text, json or html, not '%s'", v ? v : "");
				return 2;
			}
			format = !strcmp(v, "json") ? FMT_JSON : !strcmp(v, "html") ? FMT_HTML : FMT_TEXT;
			i += cli_take(&x);
		} else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
			if (!v) {
				cli_error("compare", "%s needs a file name", a);
				return 2;
			}
			out_path = v;
			i += cli_take(&x);
		} else if (!strcmp(a, "--threshold")) {
			if (cli_parse_double("compare", a, v, 0, 1000, &co.threshold_pct) < 0)
				return 2;
			i += cli_take(&x);
		} else if (!strcmp(a, "--alpha")) {
			if (cli_parse_double("compare", a, v, 1e-12, 0.5, &co.alpha) < 0)
				return 2;
			i += cli_take(&x);
		} else if (!strcmp(a, "--resamples")) {
			if (cli_parse_u32("compare", a, v, 100, 1000000, &co.resamples) < 0)
				return 2;
			i += cli_take(&x);
		} else if (!strcmp(a, "--max-regions") || !strcmp(a, "--top")) {
			if (cli_parse_u32("compare", a, v, 0, 1u << 30, &n) < 0)
				return 2;
			*(a[2] == 'm' ? &ro.max_regions : &ro.max_funcs) = (int)n;
			i += cli_take(&x);
		} else if (!strcmp(a, "--force"))
			opt.force = 1;
		else if (!strcmp(a, "--native"))
			opt.native = 1;
		else if (!strcmp(a, "--color"))
			ro.color = 1;
		else if (!strcmp(a, "--no-color"))
			ro.color = 0;
		else if (a[0] == '-' && a[1]) {
			cli_error("compare", "unknown option '%s' (see fennec compare --help)", a);
			return 2;
		} else if (!path[0])
			path[0] = a;
		else if (!path[1])
			path[1] = a;
		else {
			cli_error("compare", "two recordings, not three: '%s', '%s' and '%s'", path[0], path[1], a);
			return 2;
		}
		if (cli_arg_done("compare", &x) < 0)
			return 2;
	}
	if (!path[1]) {
		cli_error("compare", "which recordings? usage: fennec compare A B (see fennec compare --help)");
		return 2;
	}
	if (cli_out_check("compare", out_path, path, 2) < 0)
		return 2;
	ana_profile pa, pb;
	memset(&pb, 0, sizeof pb);
	if (load(path[0], &opt, &pa)) {
		int bad = pa.window.bad;
		ana_profile_free(&pa);
		return bad ? 2 : 1;
	}
	if (load(path[1], &opt, &pb)) {
		int bad = pb.window.bad;
		ana_profile_free(&pa);
		ana_profile_free(&pb);
		return bad ? 2 : 1;
	}
	ana_compare_result r;
	int rc = ana_compare(&pa, &pb, &co, &r);
	if (rc)
		cli_error("compare", "%s", fennec_strerror(rc));
	else {
		ro.a_name = path[0];
		ro.b_name = path[1];
		if (ro.color < 0)
			ro.color = format == FMT_TEXT && !out_path && isatty(STDOUT_FILENO) && !getenv("NO_COLOR");
		rc = write_report(out_path, format, &r, &ro);
	}
	/* The recordings' own warnings (cut short, dropped events) go to stderr. */
	for (int k = 0; !rc && k < 2; k++) {
		const ana_profile *p = k ? &pb : &pa;
		for (uint32_t i = 0; i < p->nwarnings; i++)
			fprintf(stderr, "fennec compare: warning: %s\n", p->warnings[i]);
	}
	ana_compare_free(&r);
	ana_profile_free(&pa);
	ana_profile_free(&pb);
	return rc ? 1 : 0;
}

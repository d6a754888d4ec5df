/*
 * analyze.c - `fennec analyze FILE|DIR...`: load a recording (with its sibling process
 * files), or merge several (the ranks of a job: a directory, or files named together),
 * run the rules and render text or JSON to stdout or -o FILE. Bad input exits 1 with the
 * reader's message (file, byte offset, problem).
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyze/analyze.h"
#include "cli/cli.h"
#include "report/report.h"

static const char help[] =
	"usage: fennec analyze FILE|DIR... [options]\n"
	"\n"
	"A directory, or several files, are merged: every recording found (one per process\n"
	"tree, e.g. one per MPI rank) is compared by rank (docs/ranks.md).\n"
	"\n"
	"  --format F             text (default), json (schema: docs/json.md) or html (one\n"
	"                         self-contained page with charts and tables: docs/html.md)\n"
	"  -o, --output FILE      write the report to FILE instead of standard output (a recording\n"
	"                         there, read or not, is refused, not replaced)\n"
	"  --hot-threshold PCT    share of wall time above which hot_operation fires (default 10)\n"
	"  --leak-threshold BYTES heap growth per step (or per second without steps) from which\n"
	"                         memory_leak fires (default 10MB; K, KiB, KB, M, MiB, MB, G,\n"
	"                         GiB, GB: 1024 for K, M, G and *iB, 1000 for *B)\n"
	"  --imbalance-threshold PCT  rank_imbalance fires from this imbalance between ranks\n"
	"                         (max / mean - 1, default 5)\n"
	"  --offcpu-threshold PCT off_cpu fires when a thread is blocked this share of the time it\n"
	"                         should compute (wall-clock sampling; default 30)\n"
	"  --outlier-factor X     step_variance: a step over X times the median is an outlier (default 1.5)\n"
	"  --gpu-sync-threshold PCT  cpu_gpu_sync fires when the host waits for the GPU this share\n"
	"                         of the GPU's busy time (default 10; docs/gpu.md)\n"
	"  --data-regions LIST    input_bound: the data-loading regions, comma-separated names or\n"
	"                         globs (default: names with a word load*, data*, batch*, fetch*,\n"
	"                         prefetch*, read* or io)\n"
	"  --calibration FILE     the roofline's ceilings (default: what `fennec calibrate` stored;\n"
	"                         docs/roofline.md)\n"
	"  --roofline-min-share PCT  memory_bound/compute_bound: regions from this share of the wall\n"
	"                         in their own code (default 5)\n"
	"  --carbon-intensity G   the grid's g CO2e per kWh for the carbon estimate (default 475,\n"
	"                         the world average; docs/json.md energy)\n"
	"  --cpu-watts W          energy estimate where no counter measures the CPU: W per busy\n"
	"                         core (default 10)\n"
	"  --max-regions N        rows in the text region table (default 40, 0 = all)\n"
	"  --top N                rows of the sample tables: hot functions, lines, regions\n"
	"                         (default 20 in text, all in JSON)\n"
	"  --thread TID           sample tables of this thread only\n"
	"  --process PID          sample tables of this process only\n"
	"  --region NAME          sample tables of the samples inside this region (a name, or a\n"
	"                         path such as train/forward; nested regions included)\n"
	"  --timeline-max N       html: intervals on the thread timeline (default 50000; more\n"
	"                         calls are merged into blocks, and the page says so)\n"
	"  --force                skip a damaged chunk to the next whole one (bytes and offset\n"
	"                         reported); analyse what precedes damage that cannot be skipped\n"
	"  --native               Python programs: keep the interpreter's C frames (default: folded into\n"
	"                         the Python frames that run them)\n"
	"  --color, --no-color    colour the text report (default: on a terminal, unless NO_COLOR is set)\n"
	CLI_WINDOW_HELP;

/* A sample filter that names nothing in the recording is a usage error, not an empty
 * report. Returns 0, or prints why and returns -1. */
static int check_selection(const ana_profile *p, const ana_sample_filter *f)
{
	int found = !f->pid;
	for (uint32_t k = 0; k < p->nprocs && !found; k++)
		found = p->procs[k].file.pid == f->pid;
	if (!found) {
		cli_error("analyze", "--process: no process with pid %llu in the recording", (unsigned long long)f->pid);
		return -1;
	}
	found = !f->tid;
	for (uint32_t k = 0; k < p->nthreads && !found; k++)
		found = p->threads[k].tid == f->tid && (!f->pid || p->procs[p->threads[k].process].file.pid == f->pid);
	if (!found) {
		cli_error("analyze", "--thread: no thread with tid %llu in the recording%s", (unsigned long long)f->tid,
			  f->pid ? " (in that process)" : "");
		return -1;
	}
	found = !f->region;
	for (uint32_t k = 0; k < p->nnodes && !found; k++)
		found = !strcmp(p->names[p->nodes[k].name], f->region) || (p->nodes[k].path && !strcmp(p->nodes[k].path, f->region));
	if (!found) {
		cli_error("analyze", "--region: no region named '%s' in the recording", f->region);
		return -1;
	}
	return 0;
}

int cmd_analyze(int argc, char **argv)
{
	const char *out_path = NULL, *format = "text";
	const char **paths = calloc((size_t)argc, sizeof *paths);
	size_t npaths = 0;
	int rc = 2;
	if (!paths) {
		cli_error("analyze", "out of memory");
		return 1;
	}
	ana_options opt = {.hot_threshold_pct = 10};
	rep_options ro = {.color = -1, .max_regions = 40};
	rep_page_options po = {0};
	for (int i = 1; i < argc; i++) {
		cli_arg x;
		cli_arg_read(&x, argc, argv, i);
		int wa;
		const char *a = x.a, *v = x.v;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fputs(help, stdout);
			rc = 0;
			goto out;
		} else if ((wa = cli_window_arg("analyze", &x, &opt.window)) != 0) {
			if (wa < 0) {
				rc = 2;
				goto out;
			}
			i += cli_take(&x);
		} else if (!strcmp(a, "--format") || !strcmp(a, "-f")) {
			if (!v || (strcmp(v, "text") && strcmp(v, "json") && strcmp(v, "html"))) {
				cli_error("analyze", "--format must be text, json or html, not '%s'", v ? v : "");
				goto out;
			}
			format = v;
			i += cli_take(&x);
		} else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
			if (!v) {
				cli_error("analyze", "%s needs a file name", a);
				goto out;
			}
			out_path = v;
			i += cli_take(&x);
		} else if (!strcmp(a, "--hot-threshold")) {
			if (cli_parse_double("analyze", a, v, 0, 100, &opt.hot_threshold_pct) < 0)
				goto out;
			i += cli_take(&x);
		} else if (!strcmp(a, "--imbalance-threshold")) {
			if (cli_parse_double("analyze", a, v, 0.01, 1e6, &opt.imbalance_threshold_pct) < 0)
				goto out;
			i += cli_take(&x);
		} else if (!strcmp(a, "--offcpu-threshold")) {
			if (cli_parse_double("analyze", a, v, 0.01, 100, &opt.offcpu_threshold_pct) < 0)
				goto out;
			i += cli_take(&x);
		} else if (!strcmp(a, "--outlier-factor")) {
			if (cli_parse_double("analyze", a, v, 1.01, 1e6, &opt.outlier_factor) < 0)
				goto out;
			i += cli_take(&x);
		} else if (!strcmp(a, "--data-regions")) {
			if (!v || !*v) {
				cli_error("analyze", "--data-regions needs region names or globs, comma-separated");
				goto out;
			}
			opt.data_regions = v;
			i += cli_take(&x);
		} else if (!strcmp(a, "--gpu-sync-threshold")) {
			if (cli_parse_double("analyze", a, v, 0.01, 1e6, &opt.gpu_sync_threshold_pct) < 0)
				goto out;
			i += cli_take(&x);
		} else if (!strcmp(a, "--calibration")) {
			if (!v || !*v) {
				cli_error("analyze", "--calibration needs a file (written by fennec calibrate)");
				goto out;
			}
			opt.calibration = v;
			i += cli_take(&x);
		} else if (!strcmp(a, "--roofline-min-share")) {
			if (cli_parse_double("analyze", a, v, 0.01, 100, &opt.roofline_min_share_pct) < 0)
				goto out;
			i += cli_take(&x);
		} else if (!strcmp(a, "--carbon-intensity")) {
			if (cli_parse_double("analyze", a, v, 0.001, 1e5, &opt.carbon_intensity) < 0)
				goto out;
			i += cli_take(&x);
		} else if (!strcmp(a, "--cpu-watts")) {
			if (cli_parse_double("analyze", a, v, 0.001, 1e4, &opt.cpu_watts) < 0)
				goto out;
			i += cli_take(&x);
		} else if (!strcmp(a, "--leak-threshold")) {
			uint64_t b;
			if (cli_parse_bytes("analyze", a, v, 1, (uint64_t)1e15, &b) < 0)
				goto out;
			opt.leak_threshold_bytes = (double)b;
			i += cli_take(&x);
		} else if (!strcmp(a, "--max-regions")) {
			unsigned n;
			if (cli_parse_u32("analyze", a, v, 0, 1u << 30, &n) < 0)
				goto out;
			ro.max_regions = (int)n;
			i += cli_take(&x);
		} else if (!strcmp(a, "--top")) {
			if (cli_parse_u32("analyze", a, v, 1, 1u << 30, &opt.top) < 0)
				goto out;
			i += cli_take(&x);
		} else if (!strcmp(a, "--thread") || !strcmp(a, "--process")) {
			unsigned id;
			if (cli_parse_u32("analyze", a, v, 1, UINT32_MAX, &id) < 0)
				goto out;
			if (a[2] == 't')
				opt.samples.tid = id;
			else
				opt.samples.pid = id;
			i += cli_take(&x);
		} else if (!strcmp(a, "--region")) {
			if (!v || !*v) {
				cli_error("analyze", "--region needs a region name or path");
				goto out;
			}
			opt.samples.region = v;
			i += cli_take(&x);
		} else if (!strcmp(a, "--timeline-max")) {
			unsigned n;
			if (cli_parse_u32("analyze", a, v, 1000, 10000000, &n) < 0)
				goto out;
			po.max_intervals = n;
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
			cli_error("analyze", "unknown option '%s' (see fennec analyze --help)", a);
			goto out;
		} else
			paths[npaths++] = a;
		if (cli_arg_done("analyze", &x) < 0)
			goto out;
	}
	if (!npaths) {
		cli_error("analyze", "which recording? usage: fennec analyze FILE|DIR...");
		goto out;
	}
	if (cli_out_check("analyze", out_path, paths, npaths) < 0)
		goto out;
	ana_profile p;
	fmt_error err;
	rc = ana_load_paths(paths, npaths, &opt, &p, &err);
	if (rc) {
		fprintf(stderr, "fennec analyze: %s\n", err.msg[0] ? err.msg : fennec_strerror(rc));
		rc = p.window.bad ? 2 : 1; /* a window the recording cannot give is a usage error */
		ana_profile_free(&p);
		goto out;
	}
	if (check_selection(&p, &opt.samples) < 0) {
		ana_profile_free(&p);
		rc = 2;
		goto out;
	}
	cli_out o;
	if (cli_out_open("analyze", &o, out_path) < 0) {
		ana_profile_free(&p);
		rc = 1;
		goto out;
	}
	FILE *out = o.f;
	if (ro.color < 0)
		ro.color = !out_path && isatty(STDOUT_FILENO) && !getenv("NO_COLOR");
	if (!strcmp(format, "html")) {
		rep_web web;
		cli_web(&web);
		rc = rep_html(out, &p, &ro, &web, &po);
	} else
		rc = !strcmp(format, "json") ? rep_json(out, &p, &ro) : rep_text(out, &p, &ro);
	if (rc)
		cli_error("analyze", "writing %s failed: %s", out_path ? out_path : "the report",
			  rc == FENNEC_EIO ? strerror(errno) : fennec_strerror(rc));
	rc = cli_out_close("analyze", &o, rc) < 0;
	/* Warnings also go to stderr when the report goes elsewhere or is JSON. */
	if (!rc && (out_path || strcmp(format, "text")))
		for (uint32_t i = 0; i < p.nwarnings; i++)
			fprintf(stderr, "fennec analyze: warning: %s\n", p.warnings[i]);
	ana_profile_free(&p);
	rc = rc ? 1 : 0;
out:
	free(paths);
	return rc;
}

/*
 * export.c - `fennec export FILE --format F [-o OUT]`: load a recording and write it in
 * another tool's format (docs/export.md): folded, svg, diff-svg, pprof, speedscope, chrome-trace,
 * csv.
 * The exporters are in src/export/; this file parses options, picks the output and turns
 * their codes into messages. Output goes to a temporary file renamed at the end, so a
 * failure leaves no half-written export.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyze/analyze.h"
#include "cli/cli.h"
#include "export/export.h"

static const char help[] =
	"usage: fennec export FILE|DIR --format FORMAT [-o OUT] [options]\n"
	"\n"
	"  --format FORMAT        folded        collapsed stacks for flamegraph.pl, speedscope, inferno\n"
	"                         svg           an interactive flame graph (one self-contained SVG)\n"
	"                         diff-svg      FILE's flame graph coloured by the change from --base\n"
	"                         pprof         profile.proto, gzipped, for go tool pprof\n"
	"                         speedscope    speedscope's JSON: samples and regions per thread\n"
	"                         chrome-trace  trace events for Perfetto and chrome://tracing\n"
	"                         csv           a table for spreadsheets and scripts (see --table)\n"
	"                         tensorboard   per-step scalars into -o DIR (events.out.tfevents.*):\n"
	"                                       tensorboard --logdir DIR\n"
	"  -o, --output FILE      write to FILE instead of standard output (a recording there,\n"
	"                         read or not, is refused, not replaced)\n"
	"  --kind cpu|offcpu|all  which samples (default: cpu for folded and svg, all for the others)\n"
	"  --thread TID           only this thread's samples (and, in traces, its events)\n"
	"  --region NAME          only samples taken inside this fennec region (a name, or a path a/b)\n"
	"  --prefix WHAT          folded, svg: start each stack with the thread, the region path, or\n"
	"                         both (WHAT = thread, region or thread,region)\n"
	"  --title TEXT           svg: the graph's title (default: the file and the kind of samples)\n"
	"  --base A               diff-svg: the recording FILE is compared with (red: larger share in\n"
	"                         FILE, blue: smaller; docs/compare.md)\n"
	"  --table T              csv: regions (default), steps, metrics, samples or threads\n"
	"  --memory WHAT          folded, svg, pprof, speedscope: allocation stacks weighted by heap\n"
	"                         bytes: allocated, peak (live at the peak), leaked (unfreed at exit,\n"
	"                         the C runtime's left out) or live (unfreed at exit, all)\n"
	"  --force                skip a damaged chunk to the next whole one, as analyze --force\n"
	"  --native               Python programs: keep the interpreter's C frames (default: folded into\n"
	"                         the Python frames that run them)\n"
	"\n"
	"Formats, options and what each consumer expects: docs/export.md.\n"
	CLI_WINDOW_HELP;

enum { F_FOLDED, F_SVG, F_PPROF, F_SPEEDSCOPE, F_CHROME, F_CSV, F_DIFF_SVG, F_TENSORBOARD };
static const char *const formats[] = {"folded", "svg", "pprof", "speedscope", "chrome-trace", "csv", "diff-svg",
				      "tensorboard"};

static int parse_prefix(const char *v, exp_options *o)
{
	char buf[64];
	if (!v || strlen(v) >= sizeof buf)
		return -1;
	strcpy(buf, v);
	for (char *save = NULL, *tok = strtok_r(buf, ",", &save); tok; tok = strtok_r(NULL, ",", &save)) {
		if (!strcmp(tok, "thread"))
			o->prefix_thread = 1;
		else if (!strcmp(tok, "region"))
			o->prefix_region = 1;
		else
			return -1;
	}
	return o->prefix_thread || o->prefix_region ? 0 : -1;
}

/* Why nothing is left to export, in words. */
static void no_data(const char *path, int format, const ana_profile *p, const exp_options *o, int kind_given,
		    int table)
{
	if (format == F_CSV && table != EXP_CSV_SAMPLES) {
		static const char *const why[] = {
			[EXP_CSV_REGIONS] = "no regions in %s: the program marked none (fennec_region_begin)",
			[EXP_CSV_STEPS] = "no steps in %s: the program never called fennec_step()",
			[EXP_CSV_METRICS] = "no metrics in %s: the program recorded none (fennec_counter_add, fennec_gauge_set, fennec_value_record)",
			[EXP_CSV_THREADS] = "no threads in %s",
		};
		cli_error("export", why[table], path);
		return;
	}
	if (o->memory) {
		if (!p->mem.present || p->mem.mode == FMT_MEM_OFF)
			cli_error("export", "no heap data in %s: record with --memory=sampled or --memory=full", path);
		else if (!p->mem.nsites)
			cli_error("export", "no allocation stacks in %s: none of its %llu bytes allocated was sampled; "
				  "record with --memory=full or a smaller --memory-rate", path, (unsigned long long)p->mem.alloc_bytes);
		else
			cli_error("export", "no %s in %s%s%s", exp_memory_what(o->memory), path, o->region ? " in region " : "",
				  o->region ? o->region : "");
		return;
	}
	if (!p->smp.nsamples) {
		if (format == F_SPEEDSCOPE)
			cli_error("export", "no samples and no regions in %s: record with --sample=cpu", path);
		else
			cli_error("export", "no samples in %s: record with --sample=cpu", path);
		return;
	}
	char what[256] = "";
	size_t n = 0;
	if (kind_given || o->kind != EXP_KIND_ALL)
		n += (size_t)snprintf(what + n, sizeof what - n, " --kind %s", o->kind == ANA_OFFCPU ? "offcpu" : o->kind == ANA_CPU ? "cpu" : "all");
	if (o->has_tid && n < sizeof what)
		n += (size_t)snprintf(what + n, sizeof what - n, " --thread %llu", (unsigned long long)o->tid);
	if (o->region && n < sizeof what)
		snprintf(what + n, sizeof what - n, " --region %s", o->region);
	cli_error("export", "no samples in %s match%s (it has %zu samples%s)", path, what, p->smp.nsamples,
		  o->kind == ANA_CPU && !p->smp.weight[ANA_CPU] && p->smp.weight[ANA_OFFCPU] ? ", all off-CPU: try --kind offcpu" : "");
}

typedef struct export_args {
	const char *path, *out_path, *base_path;
	int format, kind_given, table;
	exp_options o;
	ana_options ao;
} export_args;

/* fennec export's arguments into ea. -1 to go on, else the exit status (0 after --help,
 * 2 for a usage error, said). */
static int export_args_read(int argc, char **argv, export_args *ea)
{
	for (int i = 1; i < argc; i++) {
		cli_arg x;
		cli_arg_read(&x, argc, argv, i);
		int wa;
		const char *a = x.a, *v = x.v;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fputs(help, stdout);
			return 0;
		} else if ((wa = cli_window_arg("export", &x, &ea->ao.window)) != 0) {
			if (wa < 0) {
				return 2;
			}
			i += cli_take(&x);
		} else if (!strcmp(a, "--format") || !strcmp(a, "-f")) {
			ea->format = -1;
			for (int k = 0; v && k < (int)ARRAY_LEN(formats); k++)
				if (!strcmp(v, formats[k]))
					ea->format = k;
			if (ea->format < 0) {
				cli_error("export", "--format must be folded, svg, diff-svg, pprof, speedscope, chrome-trace, csv or tensorboard, not '%s'",
					  v ? v : "");
				return 2;
			}
			i += cli_take(&x);
		} else if (!strcmp(a, "-o") || !strcmp(a, "--output")) {
			if (!v) {
				cli_error("export", "%s needs a file name", a);
				return 2;
			}
			ea->out_path = v;
			i += cli_take(&x);
		} else if (!strcmp(a, "--kind")) {
			if (v && !strcmp(v, "cpu"))
				ea->o.kind = ANA_CPU;
			else if (v && !strcmp(v, "offcpu"))
				ea->o.kind = ANA_OFFCPU;
			else if (v && !strcmp(v, "all"))
				ea->o.kind = EXP_KIND_ALL;
			else {
				cli_error("export", "--kind must be cpu, offcpu or all, not '%s'", v ? v : "");
				return 2;
			}
			ea->kind_given = 1;
			i += cli_take(&x);
		} else if (!strcmp(a, "--thread")) {
			char *end;
			errno = 0;
			unsigned long long tid = v ? strtoull(v, &end, 10) : 0;
			if (!v || errno || end == v || *end || v[0] == '-') {
				cli_error("export", "--thread needs a thread id (a tid), not '%s'", v ? v : "");
				return 2;
			}
			ea->o.has_tid = 1;
			ea->o.tid = tid;
			i += cli_take(&x);
		} else if (!strcmp(a, "--region")) {
			if (!v || !v[0]) {
				cli_error("export", "--region needs a region name or path");
				return 2;
			}
			ea->o.region = v;
			i += cli_take(&x);
		} else if (!strcmp(a, "--prefix")) {
			if (parse_prefix(v, &ea->o) < 0) {
				cli_error("export", "--prefix must be thread, region or thread,region, not '%s'", v ? v : "");
				return 2;
			}
			i += cli_take(&x);
		} else if (!strcmp(a, "--title")) {
			if (!v) {
				cli_error("export", "--title needs a text");
				return 2;
			}
			ea->o.title = v;
			i += cli_take(&x);
		} else if (!strcmp(a, "--base")) {
			if (!v || !v[0]) {
				cli_error("export", "--base needs the recording to compare with");
				return 2;
			}
			ea->base_path = v;
			i += cli_take(&x);
		} else if (!strcmp(a, "--table")) {
			if ((ea->table = exp_csv_table_parse(v)) < 0) {
				cli_error("export", "--table must be regions, steps, metrics, samples or threads, not '%s'",
					  v ? v : "");
				return 2;
			}
			i += cli_take(&x);
		} else if (!strcmp(a, "--memory")) {
			if ((ea->o.memory = exp_memory_parse(v)) < 0) {
				cli_error("export", "--memory must be allocated, peak, leaked or live, not '%s'", v ? v : "");
				return 2;
			}
			i += cli_take(&x);
		} else if (!strcmp(a, "--force"))
			ea->ao.force = 1;
		else if (!strcmp(a, "--native"))
			ea->ao.native = 1;
		else if (a[0] == '-' && a[1]) {
			cli_error("export", "unknown option '%s' (see fennec export --help)", a);
			return 2;
		} else if (!ea->path)
			ea->path = a;
		else {
			cli_error("export", "one recording at a time: '%s' and '%s'", ea->path, a);
			return 2;
		}
		if (cli_arg_done("export", &x) < 0)
			return 2;
	}
	if (!ea->path) {
		cli_error("export", "which recording? usage: fennec export FILE --format FORMAT [-o OUT]");
		return 2;
	}
	if (ea->format < 0) {
		cli_error("export", "which format? --format folded, svg, diff-svg, pprof, speedscope, chrome-trace or csv");
		return 2;
	}
	return -1;
}

/* --format tensorboard: a folder of event files, from the analysis. */
static int export_tensorboard(export_args *ea)
{
	if (!ea->out_path) {
		cli_error("export", "tensorboard writes a folder of event files: give -o DIR");
		return 2;
	}
	if (ea->kind_given || ea->o.has_tid || ea->o.region || ea->o.memory || ea->o.title || ea->base_path || ea->table >= 0 ||
	    ea->o.prefix_thread || ea->o.prefix_region) {
		cli_error("export", "tensorboard takes no sample, table or title options");
		return 2;
	}
	ana_profile p;
	fmt_error err;
	int rc = ana_load(ea->path, &ea->ao, &p, &err);
	if (!rc) {
		memset(&err, 0, sizeof err);
		rc = exp_tensorboard(&p, ea->out_path, &err);
	}
	if (rc)
		fprintf(stderr, "fennec export: %s\n", err.msg[0] ? err.msg : fennec_strerror(rc));
	if (p.window.bad) {
		ana_profile_free(&p);
		return 2;
	}
	if (rc)
		;
	else
		for (uint32_t i = 0; i < p.nwarnings; i++)
			fprintf(stderr, "fennec export: warning: %s\n", p.warnings[i]);
	ana_profile_free(&p);
	return rc ? 1 : 0;
}

/* The options that depend on the format. -1 to go on, else 2 (said). */
static int export_args_check(export_args *ea)
{
	if (ea->table >= 0 && ea->format != F_CSV) {
		cli_error("export", "--table applies to csv only");
		return 2;
	}
	if (ea->format == F_CSV) {
		ea->table = ea->table < 0 ? EXP_CSV_REGIONS : ea->table;
		if (ea->table != EXP_CSV_SAMPLES && (ea->kind_given || ea->o.has_tid || ea->o.region)) {
			cli_error("export", "--kind, --thread and --region select samples: use them with --table samples");
			return 2;
		}
		if (ea->o.title) {
			cli_error("export", "--title applies to svg only");
			return 2;
		}
	}
	if ((ea->format == F_DIFF_SVG) != !!ea->base_path) {
		cli_error("export", ea->base_path ? "--base applies to diff-svg only" : "diff-svg needs --base A, the recording to compare with");
		return 2;
	}
	if ((ea->o.prefix_thread || ea->o.prefix_region) && ea->format != F_FOLDED && ea->format != F_SVG && ea->format != F_DIFF_SVG) {
		cli_error("export", "--prefix applies to folded, svg and diff-svg only");
		return 2;
	}
	/* One weight per stack: a flame graph shows one kind at a time. */
	if (ea->format == F_FOLDED || ea->format == F_SVG || ea->format == F_DIFF_SVG) {
		if (!ea->kind_given)
			ea->o.kind = ANA_CPU;
		else if (ea->o.kind == EXP_KIND_ALL) {
			cli_error("export", "%s shows one kind of sample: --kind cpu or --kind offcpu", formats[ea->format]);
			return 2;
		}
	}
	/* Allocation sites belong to a process, not a thread, and are of no sample kind. */
	if (ea->o.memory && (ea->format > F_SPEEDSCOPE || ea->kind_given || ea->o.has_tid || ea->o.prefix_thread)) {
		cli_error("export", ea->format > F_SPEEDSCOPE ? "--memory applies to folded, svg, pprof and speedscope"
							  : "--memory weighs allocation stacks: --kind, --thread and --prefix thread do not apply");
		return 2;
	}
	if (ea->format == F_PPROF && !ea->out_path && isatty(STDOUT_FILENO)) {
		cli_error("export", "pprof output is binary: give -o FILE (e.g. -o profile.pb.gz)");
		return 2;
	}
	const char *inputs[] = {ea->path, ea->base_path};
	if (cli_out_check("export", ea->out_path, inputs, 2) < 0)
		return 2;
	return -1;
}

int cmd_export(int argc, char **argv)
{
	export_args ea0 = {.format = -1, .table = -1, .ao = {.hot_threshold_pct = 10}}, *ea = &ea0;
	exp_options_init(&ea->o);
	int rc0 = export_args_read(argc, argv, ea);
	if (rc0 >= 0)
		return rc0;
	if (ea->format == F_TENSORBOARD)
		return export_tensorboard(ea);
	if ((rc0 = export_args_check(ea)) >= 0)
		return rc0;
	const char *path = ea->path, *out_path = ea->out_path, *base_path = ea->base_path;
	int format = ea->format, kind_given = ea->kind_given, table = ea->table;
	exp_options o = ea->o;
	ana_options ao = ea->ao;

	ana_profile p;
	fmt_error err;
	int rc = ana_load(path, &ao, &p, &err);
	if (rc) {
		fprintf(stderr, "fennec export: %s\n", err.msg[0] ? err.msg : fennec_strerror(rc));
		rc = p.window.bad ? 2 : 1;
		ana_profile_free(&p);
		return rc;
	}
	ana_profile bp;
	memset(&bp, 0, sizeof bp);
	if (base_path) {
		if ((rc = ana_load(base_path, &ao, &bp, &err)) != 0) {
			fprintf(stderr, "fennec export: %s\n", err.msg[0] ? err.msg : fennec_strerror(rc));
			ana_profile_free(&bp);
			ana_profile_free(&p);
			return 1;
		}
		if (!exp_select_count(&bp, &o, NULL)) {
			no_data(base_path, format, &bp, &o, kind_given, table);
			ana_profile_free(&bp);
			ana_profile_free(&p);
			return 1;
		}
	}
	/* Formats made of samples only: say so before creating any file. */
	if ((o.memory || (format != F_CHROME && format != F_SPEEDSCOPE && (format != F_CSV || table == EXP_CSV_SAMPLES))) &&
	    !exp_select_count(&p, &o, NULL)) {
		no_data(path, format, &p, &o, kind_given, table);
		ana_profile_free(&bp);
		ana_profile_free(&p);
		return 1;
	}

	char title[512];
	if (format == F_SVG && !o.title) {
		const char *base = strrchr(path, '/');
		snprintf(title, sizeof title, "%s: %s%s%s%s", base ? base + 1 : path,
			 o.memory ? exp_memory_what(o.memory) : o.kind == ANA_OFFCPU ? "off-CPU" : "on-CPU",
			 o.memory ? "" : " samples", o.region ? " in " : "", o.region ? o.region : "");
		o.title = title;
	} else if (format == F_DIFF_SVG && !o.title) {
		snprintf(title, sizeof title, "%s against %s: red = larger share of %s samples, blue = smaller",
			 strrchr(path, '/') ? strrchr(path, '/') + 1 : path,
			 strrchr(base_path, '/') ? strrchr(base_path, '/') + 1 : base_path, o.kind == ANA_OFFCPU ? "off-CPU" : "on-CPU");
		o.title = title;
	}
	cli_out co;
	if (cli_out_open("export", &co, out_path) < 0) {
		ana_profile_free(&bp);
		ana_profile_free(&p);
		return 1;
	}
	FILE *out = co.f;
	/* Exports are large: write in big blocks. */
	static char obuf[1 << 20];
	setvbuf(out, obuf, _IOFBF, sizeof obuf);
	memset(&err, 0, sizeof err);
	switch (format) {
	case F_FOLDED: rc = exp_folded(out, &p, &o); break;
	case F_SVG: rc = exp_svg(out, &p, &o); break;
	case F_DIFF_SVG: rc = exp_diff_svg(out, &bp, &p, &o); break;
	case F_PPROF: rc = exp_pprof(out, &p, &o); break;
	case F_SPEEDSCOPE: rc = exp_speedscope(out, &p, &o, &err); break;
	case F_CSV: rc = exp_csv(out, &p, &o, table); break;
	default: rc = exp_chrome_trace(out, &p, &o, &err); break;
	}
	int e = errno;
	if (rc == FENNEC_ENODATA)
		no_data(path, format, &p, &o, kind_given, table);
	else if (rc && err.msg[0])
		fprintf(stderr, "fennec export: %s\n", err.msg);
	else if (rc)
		cli_error("export", "writing %s failed: %s", out_path ? out_path : "the export",
			  rc == FENNEC_EIO ? strerror(e) : fennec_strerror(rc));
	int bad = cli_out_close("export", &co, rc) < 0 && !rc;
	if (!rc && !bad)
		for (uint32_t i = 0; i < p.nwarnings; i++)
			fprintf(stderr, "fennec export: warning: %s\n", p.warnings[i]);
	ana_profile_free(&bp);
	ana_profile_free(&p);
	return rc || bad ? 1 : 0;
}

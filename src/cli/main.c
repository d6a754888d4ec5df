/*
 * main.c - entry point of the fennec command: dispatches to one file per subcommand
 * (what they share, cli.h, is cli.c).
 */
#include <errno.h>
#include <stdio.h>
#include <string.h>

#include "cli/cli.h"
#include "fennec.h"
#include "format/format.h"

static const char usage[] =
	"usage: fennec <command> [options]\n"
	"\n"
	"commands:\n"
	"  record [options] -- PROGRAM [ARGS...]   run PROGRAM and record a profile (default fennec.fnc)\n"
	"  analyze FILE [options]                  report on a recording: text (default), --format json or html\n"
	"  compare A B [options]                   compare two recordings: speedups with significance, functions, findings\n"
	"  export FILE --format F [-o OUT]         write a recording as folded, svg, diff-svg, pprof, speedscope or chrome-trace\n"
	"  plot FILE --kind K -o OUT.svg|OUT.png   a chart for a slide: timing, steps, metrics or memory\n"
	"  view FILE [--port 8051]                 web dashboard of a recording, also of one in progress\n"
	"                                          (or record --view[=PORT] ... while recording)\n"
	"  calibrate                               measure this machine's peak bandwidth and FLOP/s for the roofline\n"
	"  version                                 print the version\n"
	"\n"
	"`fennec <command> --help` describes a command's options; a long option takes its value\n"
	"as the next argument or after '=' (--format json, --format=json). Documentation: docs/.\n";

static int run_command(int argc, char **argv)
{
	if (argc < 2 || !strcmp(argv[1], "-h") || !strcmp(argv[1], "--help") || !strcmp(argv[1], "help")) {
		fputs(usage, argc < 2 ? stderr : stdout);
		return argc < 2 ? 2 : 0;
	}
	const char *cmd = argv[1];
	if (!strcmp(cmd, "record"))
		return cli_record_wants_view(argc - 1, argv + 1) ? cmd_record_view(argc - 1, argv + 1)
								  : cmd_record(argc - 1, argv + 1);
	if (!strcmp(cmd, "analyze") || !strcmp(cmd, "analyse"))
		return cmd_analyze(argc - 1, argv + 1);
	if (!strcmp(cmd, "export"))
		return cmd_export(argc - 1, argv + 1);
	if (!strcmp(cmd, "plot"))
		return cmd_plot(argc - 1, argv + 1);
	if (!strcmp(cmd, "compare"))
		return cmd_compare(argc - 1, argv + 1);
	if (!strcmp(cmd, "calibrate"))
		return cmd_calibrate(argc - 1, argv + 1);
	if (!strcmp(cmd, "view"))
		return cmd_view(argc - 1, argv + 1);
	if (!strcmp(cmd, "version") || !strcmp(cmd, "--version")) {
		printf("fennec %d.%d.%d (profile format %d.%d)\n", FENNEC_VERSION_MAJOR, FENNEC_VERSION_MINOR,
		       FENNEC_VERSION_PATCH, FMT_MAJOR, FMT_MINOR);
		return 0;
	}
	fprintf(stderr, "fennec: unknown command '%s'\n\n%s", cmd, usage);
	return 2;
}

/* What a command printed to standard output must have reached it: `fennec --help >
 * /dev/full` exited 0 with nothing written. */
int main(int argc, char **argv)
{
	int rc = run_command(argc, argv);
	if (fflush(stdout) != 0 || ferror(stdout)) {
		fprintf(stderr, "fennec: writing to standard output failed: %s\n", strerror(errno ? errno : EIO));
		return rc ? rc : 1;
	}
	return rc;
}

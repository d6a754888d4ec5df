/*
 * cli.h - the fennec command. One file per subcommand; only this layer prints messages
 * and chooses exit codes (0 ok, 1 failure, 2 usage error; `record` exits as its target).
 */
#ifndef FENNEC_CLI_H
#define FENNEC_CLI_H

#include <signal.h>
#include <stdint.h>
#include <stdio.h>

int cmd_record(int argc, char **argv);
int cmd_analyze(int argc, char **argv);
int cmd_export(int argc, char **argv);
int cmd_plot(int argc, char **argv);
int cmd_compare(int argc, char **argv);
int cmd_view(int argc, char **argv);
int cmd_calibrate(int argc, char **argv);
/* `fennec record --view[=PORT] ...` (view.c): whether record's options ask for it, and the
 * command that records in a child and serves the dashboard meanwhile. */
int cli_record_wants_view(int argc, char **argv);
int cmd_record_view(int argc, char **argv);
/* The profile path of `fennec record -o GIVEN` for this process (record.c, docs/ranks.md):
 * %r, %p, %h expanded, a directory given fennec.fnc, a rank of a job of several given
 * `.rank<R>` before the extension; the directories it names are made. Returns 0, or prints
 * why and returns the exit status: 2 for a name it cannot expand (an unknown or unfinished
 * %, too long), 1 for a directory that cannot be made. */
int cli_record_output(const char *given, char *out, size_t n);
/* The signals `fennec record` (and the server of --view) catch while the program runs, and
 * pass on (record.c, above forward()): those whose default action would end the process,
 * less the faults; with own_group (no controlling terminal) also the stops and SIGCONT. */
void cli_forwarded_set(sigset_t *set, int own_group);

/* `fennec record --gpu` (gpu.c, docs/gpu.md). cli_gpu_check (before the program starts)
 * prints one line saying what GPU profiling lacks on this machine, if anything, and fills
 * *g; cli_gpu_env (in the child) sets the environment that turns it on. mode: 1 all, 2
 * kernels only; g->mode stays 0 when there is no driver. */
typedef struct cli_gpu {
	int mode;
	int inject;            /* CUPTI usable: the driver is to load libfennec */
	char cupti[4096];      /* its path */
} cli_gpu;
int cli_gpu_check(int mode, cli_gpu *g);
void cli_gpu_env(const cli_gpu *g, const char *lib);

/* `fennec record --continuous DIR` (continuous.c, docs/continuous.md): a pprof profile of
 * each interval of the recording at rec, written into dir while the program runs (tick,
 * every 100 ms from record's wait), and of what is left when it ends (close, which says
 * what was written unless quiet, and frees). open returns NULL when out of memory. */
typedef struct cli_continuous cli_continuous;
cli_continuous *cli_continuous_open(const char *dir, const char *rec, uint64_t interval_ms, unsigned keep, int quiet);
void cli_continuous_tick(cli_continuous *c);
void cli_continuous_close(cli_continuous *c);

/* The web front end embedded into the binary (web.c; struct rep_web: report/report.h). */
struct rep_web;
void cli_web(struct rep_web *w);

/*
 * An output that a failure never leaves half-written: a file is written beside its target
 * (PATH.tmp.PID) and renamed over it when complete; no path means standard output. A path
 * that exists and is not a regular file (/dev/null, a FIFO, a symbolic link) is written in
 * place: renaming over it would replace the device or the link with a file.
 * cli_out_open prints why it cannot create the file and returns -1. cli_out_close flushes
 * and closes; with `failed` (the writer failed and said why) it removes the temporary file
 * quietly and returns -1; otherwise it reports a write, close or rename error (returning
 * -1) or returns 0.
 */
typedef struct cli_out {
	FILE *f;
	const char *path;     /* NULL: standard output */
	char tmp[4096];
} cli_out;
int cli_out_open(const char *cmd, cli_out *o, const char *path);
int cli_out_close(const char *cmd, cli_out *o, int failed);
/* The fault-injection build (fault.c): f, as a stream whose Nth write fails. */
FILE *cli_fault_stream(FILE *f);

/*
 * Whether an output may be written: not when it is one of the inputs (the same file by
 * device and inode, so ./x, x and a link to x match), nor when it is a fennec recording (a
 * process file beside an input, one in an input directory, or another recording): the
 * report would replace it. out NULL (standard output) passes. Returns 0, or prints why
 * (naming the file) and returns -1, a usage error.
 */
int cli_out_check(const char *cmd, const char *out, const char *const *inputs, size_t n);
/* Whether path is a fennec profile file (it starts with the format's magic). */
int cli_is_profile(const char *path);
/* Read the first (up to) 8 bytes of path into magic: how many were read, -1 if it cannot. */
int cli_read_magic(const char *path, char magic[8]);

/*
 * One command-line argument as the subcommands' parsers read it. A long option given as
 * "--name=value" reads as "--name" with the value inline; otherwise the value is the next
 * argument. A branch that takes the value steps over it with `i += cli_take(&x)` (nothing
 * to step over when it was inline); cli_arg_done() then refuses a value given inline to an
 * option that takes none ("--quiet=1").
 */
typedef struct cli_arg {
	const char *a, *v; /* the option, or the argument; its value (NULL: none follows) */
	int inl, taken;    /* the value was inline; a branch took it */
	char name[64];
} cli_arg;
void cli_arg_read(cli_arg *x, int argc, char **argv, int i);
static inline int cli_take(cli_arg *x)
{
	x->taken = 1;
	return !x->inl;
}
int cli_arg_done(const char *cmd, const cli_arg *x);

/* Print "fennec <cmd>: <message>" to stderr. */
void cli_error(const char *cmd, const char *fmt, ...) __attribute__((format(printf, 2, 3)));

/* Parse a number option; returns 0 or prints an error and returns -1. */
int cli_parse_double(const char *cmd, const char *opt, const char *s, double lo, double hi, double *out);
int cli_parse_u32(const char *cmd, const char *opt, const char *s, unsigned lo, unsigned hi, unsigned *out);
/* A size in bytes: a number, optionally with a unit, as GNU coreutils reads them: K, KiB
 * (1024), KB (1000), M, MiB, MB, G, GiB, GB, B; "512K", "1.5MiB", "10MB". Rounded to a
 * whole byte, from lo to hi. */
int cli_parse_bytes(const char *cmd, const char *opt, const char *s, uint64_t lo, uint64_t hi, uint64_t *out);

/*
 * The window options of the commands that read a recording (analyze, export, view,
 * compare, plot; docs/json.md `window`): --since T, --until T (durations from the start of
 * the recording), --last D, --steps A:B. Returns 1 when x is one of them (its value parsed
 * into *w, which the first sets up), 0 when it is not, -1 after printing why the value is
 * bad (a usage error). What the recording alone can refuse (past its end, no such steps)
 * ana_load refuses, with ana_profile.window.bad set.
 */
struct ana_window_spec;
int cli_window_arg(const char *cmd, cli_arg *x, struct ana_window_spec *w);
#define CLI_WINDOW_HELP                                                                               \
	"  --since T, --until T   analyse only from / to T after the start of the recording (90s, 5m,\n" \
	"                         1h30m, 250ms, or seconds); the report says what it covers\n"          \
	"  --last D               analyse only the last D of the recording\n"                            \
	"  --steps A:B            analyse only steps A to B (A: or :B leave a side open)\n"

#endif

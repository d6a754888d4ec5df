/*
 * view.c - `fennec view FILE`: serve the dashboard of a recording over HTTP (src/view/)
 * until interrupted, analysing the recording again when its files change, so a recording
 * in progress updates in the browser. Binds to 127.0.0.1:8051 by default. Also
 * `fennec record --view[=PORT] ...`: the same, of the recording being made by a child
 * `fennec record`.
 */
#include <errno.h>
#include <fcntl.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/prctl.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "cli/cli.h"
#include "view/metrics.h"
#include "view/view.h"

static const char help[] =
	"usage: fennec view FILE|DIR [options]\n"
	"\n"
	"Serves the dashboard of a recording (the HTML report's tabs, live) and a JSON API:\n"
	"/api/analysis (docs/json.md), /api/page and /api/status (docs/html.md). A recording\n"
	"still being written is analysed again when it grows; the page updates about once a second.\n"
	"\n"
	"  --port N               port to listen on (default 8051; 0 = any free port)\n"
	"  --host ADDR            address to bind (default 127.0.0.1: this machine only; the\n"
	"                         URL printed carries a random token that every request needs;\n"
	"                         another address is warned about: the token travels unencrypted)\n"
	"  --metrics-listen [HOST:]PORT  also serve the recording's metrics for Prometheus at\n"
	"                         /metrics on this address (docs/prometheus.md; HOST defaults to\n"
	"                         127.0.0.1; no token: Prometheus scrapes it as it is)\n"
	"  --force                skip a damaged chunk to the next whole one (bytes and offset\n"
	"                         reported); analyse what precedes damage that cannot be skipped\n"
	CLI_WINDOW_HELP;

/*
 * Signals. The server stands for the recording as `fennec record` stands for the program
 * (src/cli/record.c, above forward()): it dies of no signal meant for the program (SIGUSR1
 * sent to the job's process group killed it, its exit status and the dashboard lost), and
 * a signal reaches the program once:
 *
 * - Without a controlling terminal the recording (`fennec record`, which puts the program
 *   in a group of its own too) runs in a process group of its own and dies with the server
 *   (PR_SET_PDEATHSIG): a signal to the server or to its group is passed on to it, and by
 *   it to the program, once (in the server's group it also got the group's copy).
 * - In a terminal all three stay in one group, for Ctrl-C and job control: what the
 *   terminal sent reached them all and is not passed on; what a process outside the group
 *   (or the server's parent) sent is, as `fennec record` does.
 *
 * Never passed on: what the server or the recording sent the server. SIGPIPE is ignored
 * (a browser that goes away), not passed on.
 */
static int view_pass_on(int sig, const siginfo_t *si, pid_t child, int own_group)
{
	if (si->si_code == SI_USER || si->si_code == SI_QUEUE || si->si_code == SI_TKILL) {
		if (si->si_pid == getpid() || si->si_pid == child)
			return 0;
		return own_group || si->si_pid <= 0 || si->si_pid == getppid() || getpgid(si->si_pid) != getpgrp();
	}
	return own_group && sig != SIGXCPU && sig != SIGXFSZ;
}

/*
 * Serve until SIGINT, SIGTERM or SIGHUP, analysing again when the files change. With a
 * `child` (fennec record --view), the signals of `set` stand for the recording while it
 * runs: passed on to it (view_pass_on()), never the end of this process, and serving goes
 * on, with the finished recording, until SIGINT, SIGTERM or SIGHUP after it ended; the
 * exit status is then the child's. The caller has blocked `set` (NULL: SIGINT, SIGTERM,
 * SIGHUP and SIGCHLD), or this does.
 */
static int serve(view_options *o, pid_t child, const sigset_t *fwd, int own_group)
{
	rep_web web;
	cli_web(&web);
	o->web = &web;
	const char *cmd = child ? "record" : "view";

	/* The server's threads inherit this mask: the signals come to sigtimedwait below. */
	sigset_t set;
	if (fwd)
		set = *fwd;
	else
		sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	view_server *s;
	view_error err;
	int rc = view_open(o, &s, &err), status = 0;
	if (rc) {
		if (err.sys_errno == EADDRINUSE)
			cli_error(cmd, "%s: the port is taken (another fennec view, or another server?); "
				  "choose another with --port N, or --port 0 for any free port", err.msg);
		else
			cli_error(cmd, "%s", err.msg);
		if (child) {
			kill(child, SIGTERM);
			waitpid(child, NULL, 0);
		}
		return 1;
	}
	const char *h = o->host;
	int v6 = strchr(h, ':') != NULL;
	if (!view_loopback(s))
		cli_error(cmd, "warning: %s is not a loopback address: other machines can reach the dashboard, and only the "
			 "URL's token keeps the profile (command line, paths, host name) from them; the token "
			 "travels unencrypted. The default, 127.0.0.1, with an SSH tunnel is safer", h);
	printf("fennec %s: serving %s at http://%s%s%s:%u/?token=%s (Ctrl-C to stop)\n", cmd, o->path, v6 ? "[" : "",
	       h, v6 ? "]" : "", view_port(s), view_token(s));
	fflush(stdout);
	for (;;) {
		struct timespec ts = {0, 500 * 1000 * 1000};
		siginfo_t si;
		int sig = sigtimedwait(&set, &si, &ts);
		if (sig == SIGCHLD || (child && sig < 0)) {
			int st;
			if (child && waitpid(child, &st, WNOHANG) == child) {
				child = 0;
				status = WIFEXITED(st) ? WEXITSTATUS(st) : 128 + WTERMSIG(st);
				view_refresh(s, NULL);
				printf("fennec record: the recording ended (exit status %d); still serving it at "
				       "http://%s%s%s:%u/?token=%s (Ctrl-C to stop)\n", status, v6 ? "[" : "", h, v6 ? "]" : "",
				       view_port(s), view_token(s));
				fflush(stdout);
			}
		} else if (sig > 0) {
			/* The recording stops first; the view stays until the next one. Once the
			 * recording has ended the others are nobody's: they are ignored. */
			if (!child && (sig == SIGINT || sig == SIGTERM || sig == SIGHUP))
				break;
			if (child && view_pass_on(sig, &si, child, own_group))
				kill(child, sig);
		} else if (errno != EAGAIN && errno != EINTR)
			break;
		if (view_refresh(s, NULL) == FENNEC_ENOMEM) {
			cli_error(cmd, "out of memory while analysing %s again", o->path);
			status = 1;
			break;
		}
	}
	view_close(s);
	if (child) {
		kill(child, SIGTERM);
		waitpid(child, NULL, 0);
	}
	return status;
}

int cmd_view(int argc, char **argv)
{
	view_options o = {.host = "127.0.0.1", .port = 8051, .ana = {.hot_threshold_pct = 10}};
	const char *metrics_listen = NULL;
	for (int i = 1; i < argc; i++) {
		cli_arg x;
		cli_arg_read(&x, argc, argv, i);
		int wa;
		const char *a = x.a, *v = x.v;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fputs(help, stdout);
			return 0;
		} else if ((wa = cli_window_arg("view", &x, &o.ana.window)) != 0) {
			if (wa < 0) {
				return 2;
			}
			i += cli_take(&x);
		} else if (!strcmp(a, "--port") || !strcmp(a, "-p")) {
			if (cli_parse_u32("view", a, v, 0, 65535, &o.port) < 0)
				return 2;
			i += cli_take(&x);
		} else if (!strcmp(a, "--host")) {
			if (!v || !*v) {
				cli_error("view", "--host needs an address, e.g. 127.0.0.1");
				return 2;
			}
			o.host = v;
			i += cli_take(&x);
		} else if (!strcmp(a, "--metrics-listen")) {
			char h[256], why[300];
			unsigned port;
			if (view_metrics_parse_listen(v, h, sizeof h, &port, why, sizeof why) < 0) {
				cli_error("view", "%s", why);
				return 2;
			}
			metrics_listen = v;
			i += cli_take(&x);
		} else if (!strcmp(a, "--force"))
			o.ana.force = 1;
		else if (a[0] == '-' && a[1]) {
			cli_error("view", "unknown option '%s' (see fennec view --help)", a);
			return 2;
		} else if (!o.path)
			o.path = a;
		else {
			cli_error("view", "one recording at a time: '%s' and '%s'", o.path, a);
			return 2;
		}
		if (cli_arg_done("view", &x) < 0)
			return 2;
	}
	if (!o.path) {
		cli_error("view", "which recording? usage: fennec view FILE");
		return 2;
	}
	view_metrics *m = NULL;
	if (metrics_listen) {
		char h[256], why[300];
		unsigned port;
		view_error err;
		view_metrics_parse_listen(metrics_listen, h, sizeof h, &port, why, sizeof why);
		if (view_metrics_open(h, port, o.path, &m, &err)) {
			cli_error("view", "--metrics-listen: %s%s", err.msg,
				  err.sys_errno == EADDRINUSE ? ": the port is taken; choose another, or port 0 for any free one" : "");
			return 1;
		}
		if (!view_metrics_loopback(m))
			cli_error("view", "warning: %s is not a loopback address: other machines can read the metrics", h);
		printf("fennec view: serving metrics at http://%s%s%s:%u/metrics\n", strchr(h, ':') ? "[" : "", h,
		       strchr(h, ':') ? "]" : "", view_metrics_port(m));
	}
	int rc = serve(&o, 0, NULL, 0);
	view_metrics_close(m);
	return rc;
}

/* ---- fennec record --view ---- */

/* Options of `fennec record` that take a value (src/cli/record.c): to find where its
 * options end without taking the program's own arguments for ours. */
static const char *const record_value_opts[] = {
	"-o", "--output", "--buffer-kb", "--flush-ms", "--step-fraction", "--step-schedule", "-F", "--freq",
	"--sample", "--memory", "--memory-rate", "--memory-interval", "--stack-depth", "--metrics-listen",
};

/* The index of --view or --view=PORT among `fennec record`'s options, or 0. */
static int view_arg(int argc, char **argv)
{
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		if (!strcmp(a, "--") || a[0] != '-')
			return 0;
		if (!strcmp(a, "--view") || !strncmp(a, "--view=", 7))
			return i;
		for (size_t k = 0; k < sizeof record_value_opts / sizeof record_value_opts[0]; k++)
			if (!strcmp(a, record_value_opts[k])) {
				i++;
				break;
			}
	}
	return 0;
}

int cli_record_wants_view(int argc, char **argv) { return view_arg(argc, argv) > 0; }

int cmd_record_view(int argc, char **argv)
{
	int k = view_arg(argc, argv);
	view_options o = {.host = "127.0.0.1", .port = 8051, .ana = {.hot_threshold_pct = 10}, .wait_for_data = 1,
			  .path = "fennec.fnc"};
	if (argv[k][6] == '=' && cli_parse_u32("record", "--view", argv[k] + 7, 0, 65535, &o.port) < 0)
		return 2;
	/* The output option, -o PATH, --output PATH or --output=PATH: the child is given the
	 * expanded name instead (argv[skip_at], and the next when skip_n is 2). */
	const char *out = o.path;
	int skip_at = 0, skip_n = 0;
	for (int i = 1; i < argc && argv[i][0] == '-' && strcmp(argv[i], "--"); i++) {
		if (!strncmp(argv[i], "--output=", 9)) {
			out = argv[i] + 9;
			skip_at = i, skip_n = 1;
		}
		for (size_t j = 0; j < sizeof record_value_opts / sizeof record_value_opts[0]; j++)
			if (!strcmp(argv[i], record_value_opts[j])) {
				if (j < 2 && i + 1 < argc) { /* -o, --output */
					out = argv[i + 1];
					skip_at = i, skip_n = 2;
				}
				i++;
				break;
			}
	}
	/* The name the child will write (%p, a directory, a rank): expanded here, once, and
	 * passed on expanded, so that both agree. */
	char named[4096];
	int orc = cli_record_output(out, named, sizeof named);
	if (orc)
		return orc;
	o.path = named;
	char self[4096];
	ssize_t n = readlink("/proc/self/exe", self, sizeof self - 1);
	if (n <= 0) {
		cli_error("record", "--view: cannot find the fennec binary: %s", strerror(errno));
		return 1;
	}
	self[n] = 0;
	/* The dashboard reads the file as it grows: the recording keeps its writer thread, which
	 * flushes every interval also while the program does not allocate (a lazy session's
	 * writes wait for the program's next safe point: docs/internals/collect.md). */
	setenv("FENNEC_WRITER", "thread", 1);
	/* The recording: `fennec record` without --view, in a child; this process serves. */
	char **args = calloc((size_t)argc + 4, sizeof *args);
	if (!args)
		return 1;
	int na = 0;
	args[na++] = self;
	args[na++] = "record";
	args[na++] = "-o";
	args[na++] = named;
	for (int i = 1; i < argc; i++)
		if (i != k && (i < skip_at || i >= skip_at + skip_n))
			args[na++] = argv[i];
	args[na] = NULL;
	/* What the child writes is newer than this; file times can lag the clock by a tick. */
	clock_gettime(CLOCK_REALTIME, &o.not_before);
	o.not_before.tv_nsec -= 20 * 1000 * 1000;
	if (o.not_before.tv_nsec < 0) {
		o.not_before.tv_nsec += 1000 * 1000 * 1000;
		o.not_before.tv_sec--;
	}
	/* Signals (above view_pass_on()): blocked from here, so that one that comes before
	 * the recording's pid is known is passed on, not lost. */
	int tty = open("/dev/tty", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	int own_group = tty < 0;
	if (tty >= 0)
		close(tty);
	sigset_t set, old;
	cli_forwarded_set(&set, own_group);
	sigdelset(&set, SIGPIPE);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	sigaddset(&set, SIGCHLD);
	pthread_sigmask(SIG_BLOCK, &set, &old);
	pid_t self_pid = getpid();
	pid_t child = fork();
	if (child < 0) {
		cli_error("record", "--view: fork failed: %s", strerror(errno));
		free(args);
		return 1;
	}
	if (child == 0) {
		if (own_group) {
			setpgid(0, 0);
			prctl(PR_SET_PDEATHSIG, SIGKILL);
			if (getppid() != self_pid) /* the server was killed before the line above */
				_exit(128 + SIGKILL);
		}
		pthread_sigmask(SIG_SETMASK, &old, NULL);
		setenv("FENNEC_OUTPUT_EXPANDED", "1", 1);
		execv(self, args);
		_exit(127);
	}
	if (own_group)
		setpgid(child, child); /* as the child does: whichever comes first */
	free(args);
	return serve(&o, child, &set, own_group);
}

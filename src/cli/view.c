/*
 * view.c - `fennec view FILE`: serve the dashboard of a recording over HTTP (src/view/)
 * until interrupted, analysing the recording again when its files change, so a recording
 * in progress updates in the browser. Binds to 127.0.0.1:8051 by default.
 */
#include <errno.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>

#include "cli/cli.h"
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
	"                         dashboard has no authentication, bind elsewhere with care)\n"
	"  --force                analyse what precedes a corrupt chunk instead of failing\n";

int cmd_view(int argc, char **argv)
{
	view_options o = {.host = "127.0.0.1", .port = 8051, .ana = {.hot_threshold_pct = 10}};
	for (int i = 1; i < argc; i++) {
		const char *a = argv[i];
		const char *v = i + 1 < argc ? argv[i + 1] : NULL;
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fputs(help, stdout);
			return 0;
		} else if (!strcmp(a, "--port") || !strcmp(a, "-p")) {
			if (cli_parse_u32("view", a, v, 0, 65535, &o.port) < 0)
				return 2;
			i++;
		} else if (!strcmp(a, "--host")) {
			if (!v || !*v) {
				cli_error("view", "--host needs an address, e.g. 127.0.0.1");
				return 2;
			}
			o.host = v;
			i++;
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
	}
	if (!o.path) {
		cli_error("view", "which recording? usage: fennec view FILE");
		return 2;
	}
	rep_web web;
	cli_web(&web);
	o.web = &web;

	/* The server's threads inherit this mask: the signals come to sigtimedwait below. */
	sigset_t set;
	sigemptyset(&set);
	sigaddset(&set, SIGINT);
	sigaddset(&set, SIGTERM);
	sigaddset(&set, SIGHUP);
	pthread_sigmask(SIG_BLOCK, &set, NULL);
	signal(SIGPIPE, SIG_IGN);

	view_server *s;
	view_error err;
	int rc = view_open(&o, &s, &err);
	if (rc) {
		if (err.sys_errno == EADDRINUSE)
			cli_error("view", "%s: the port is taken (another fennec view, or another server?); "
				  "choose another with --port N, or --port 0 for any free port", err.msg);
		else
			cli_error("view", "%s", err.msg);
		return 1;
	}
	const char *h = o.host;
	int v6 = strchr(h, ':') != NULL;
	printf("fennec view: serving %s at http://%s%s%s:%u/ (Ctrl-C to stop)\n", o.path, v6 ? "[" : "", h, v6 ? "]" : "",
	       view_port(s));
	fflush(stdout);
	for (;;) {
		struct timespec ts = {0, 500 * 1000 * 1000};
		int sig = sigtimedwait(&set, NULL, &ts);
		if (sig > 0)
			break;
		if (sig < 0 && errno != EAGAIN && errno != EINTR)
			break;
		if (view_refresh(s, NULL) == FENNEC_ENOMEM) {
			cli_error("view", "out of memory while analysing %s again", o.path);
			view_close(s);
			return 1;
		}
	}
	view_close(s);
	return 0;
}

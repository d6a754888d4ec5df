/*
 * view.h - the HTTP server of `fennec view` (docs/html.md): the dashboard page and a small
 * JSON API over one recording, which it analyses again when its files change (a
 * recording in progress). Built on libmicrohttpd; serves only what it holds in memory,
 * never files from disk.
 *
 * Threads: the server answers requests on its own threads; view_refresh() runs on the
 * caller's thread and swaps in new results under a lock. Library code: it never prints.
 */
#ifndef FENNEC_VIEW_H
#define FENNEC_VIEW_H

#include <time.h>

#include "analyze/analyze.h"
#include "report/report.h"

typedef struct view_options {
	const char *path;         /* the recording (file or directory) */
	const char *host;         /* address to bind (default "127.0.0.1") */
	unsigned port;            /* 0: any free port (view_port tells which) */
	const rep_web *web;       /* the page's files (borrowed for the server's life) */
	ana_options ana;          /* analysis options */
	size_t max_body_bytes;    /* larger request bodies get 413 (default 4096) */
	int wait_for_data;        /* serve even while the recording cannot be analysed yet: the
				   * API answers 503 and /api/status says why (fennec record --view) */
	struct timespec not_before; /* a named file last changed before this (CLOCK_REALTIME)
				     * is an older recording's: not analysed ({0, 0}: any) */
} view_options;

typedef struct view_error {
	int code;                 /* FENNEC_E* */
	int sys_errno;            /* errno of a failed bind or listen, else 0 */
	char msg[600];
} view_error;

typedef struct view_server view_server;

/*
 * Listen, analyse the recording once and start serving it. Returns 0 and *out, or a
 * FENNEC_E* code with *err filled in: sys_errno EADDRINUSE when the port is taken; the
 * reader's message when the recording cannot be analysed (unless o->wait_for_data).
 */
int view_open(const view_options *o, view_server **out, view_error *err);

/* The port the server listens on. */
unsigned view_port(const view_server *s);

/* The random token every request must carry (docs/html.md): in the URL to print,
 * `http://HOST:PORT/?token=TOKEN`; lives as long as the server. */
const char *view_token(const view_server *s);

/* Whether the server is bound to a loopback address (else other machines can reach it). */
int view_loopback(const view_server *s);

/*
 * Analyse the recording again if any of its files changed since the last analysis.
 * *changed (may be NULL) says whether new results were swapped in. A failed analysis
 * keeps the previous results and is reported by /api/status. Returns 0 or FENNEC_ENOMEM.
 */
int view_refresh(view_server *s, int *changed);

/* Requests answered so far, by status class: [0] 2xx, [1] 4xx, [2] 5xx. */
void view_counts(const view_server *s, uint64_t counts[3]);

/* Stop serving and free everything; view_close(NULL) is a no-op. */
void view_close(view_server *s);

#endif

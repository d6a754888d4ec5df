/*
 * metrics.h - live metrics of a recording for Prometheus (docs/prometheus.md): an HTTP
 * server that answers GET /metrics in the Prometheus text exposition format 0.0.4, or in
 * OpenMetrics 1.0 when the scraper's Accept header asks for application/openmetrics-text.
 * It follows the recording's files as they grow (fmt_follow: each scrape decodes only the
 * chunks written since the last one) and renders what it keeps: steps, step durations,
 * regions, heap, RSS, CPU, drops, the program's counters, gauges and values, GPU.
 *
 * Served by `fennec record --metrics-listen` (the record process, never the program) and
 * `fennec view --metrics-listen`. Built on libmicrohttpd, as view.h: only GET and HEAD of
 * /metrics (404 for any other path), no request bodies, bounded connections and requests,
 * the Host header checked when bound to loopback, nothing read from disk but the
 * recording. Library code: it never prints.
 */
#ifndef FENNEC_METRICS_H
#define FENNEC_METRICS_H

#include <stddef.h>
#include <stdio.h>

#include "view/view.h"

typedef struct view_metrics view_metrics;

/* Parse --metrics-listen's value: PORT (on 127.0.0.1), HOST:PORT or [IPV6]:PORT, the port
 * 0..65535 (0: any free one). Returns 0, or -1 with why (a sentence) filled in. */
int view_metrics_parse_listen(const char *spec, char *host, size_t host_size, unsigned *port, char *why,
			 size_t why_size);

/* Listen on host:port and serve the metrics of the recording at `path` (a file; its
 * sibling process files and per-rank files are found as `fennec analyze` finds them). The
 * files need not exist yet. Returns 0 and *out, or a FENNEC_E* code with *err filled in
 * (sys_errno EADDRINUSE when the port is taken). */
int view_metrics_open(const char *host, unsigned port, const char *path, view_metrics **out, view_error *err);
unsigned view_metrics_port(const view_metrics *s);
int view_metrics_loopback(const view_metrics *s);
/* Render the exposition now (what a scrape gets), after reading what is new; openmetrics
 * selects the format. 0 or FENNEC_ENOMEM. (Tests and `fennec view`'s first read.) */
int view_metrics_render(view_metrics *s, FILE *out, int openmetrics);
void view_metrics_close(view_metrics *s);

#endif

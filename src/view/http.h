/*
 * http.h - what fennec view's server and the metrics server (metrics.c) share, in
 * server.c: the listening socket and the Host check that keeps a loopback server from
 * answering pages of other sites (DNS rebinding).
 */
#ifndef FENNEC_VIEW_HTTP_H
#define FENNEC_VIEW_HTTP_H

#include "view/view.h"

/* A socket listening on host:port (port 0: any free one), close-on-exec. Sets *loopback
 * (bound to a loopback address) and bound (the address as a Host header names it,
 * "127.0.0.1" or "[::1]"). Returns the descriptor, or -1 with err set (sys_errno EADDRINUSE
 * for a taken port). */
int view_listen(const char *host, unsigned port, int *loopback, char *bound, size_t bound_size, view_error *err);

/* The port a listening socket is bound to, 0 if unknown. */
unsigned view_bound_port(int fd);

/* Whether a request's Host header may be answered by a server bound as given: any Host
 * when not on loopback, else only the loopback names and the bound address with its port. */
int view_host_ok(const char *host, int loopback, const char *bound, unsigned port);

#endif

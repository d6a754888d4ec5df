/*
 * server.c - `fennec view`'s HTTP server (view.h). The page is rendered once (it loads its
 * data from the API); the API's answers are rendered after each analysis into
 * reference-counted buffers that responses share, so a request costs no rendering and no
 * copy. Every request is checked before it is answered: method, size, path, when bound to
 * loopback the Host header (a page elsewhere cannot read the profile by DNS rebinding),
 * and the token of the printed URL (other users of the machine cannot read it either):
 * `?token=` once, which sets a cookie, or that cookie.
 */
#include "view/view.h"

#include <arpa/inet.h>
#include <errno.h>
#include <microhttpd.h>
#include <netdb.h>
#include <netinet/in.h>
#include <pthread.h>
#include <stdatomic.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/socket.h>
#include <sys/stat.h>
#include <time.h>
#include <unistd.h>

#include "common/lib.h"
#include "view/http.h"

#define MAX_URL 1024
#define MAX_CONNECTIONS 256
#define MAX_PER_CLIENT 32 /* connections from one address: one client cannot hold them all */
#define TOKEN_BYTES 16

/* libmicrohttpd is loaded by the first server (common/lib.h says why it is not linked);
 * its functions are called through mhd. */
#define MHD_FUNCS(X)                                                                                \
	X(MHD_start_daemon) X(MHD_stop_daemon) X(MHD_queue_response) X(MHD_destroy_response)        \
	X(MHD_create_response_from_buffer) X(MHD_create_response_from_buffer_with_free_callback_cls) \
	X(MHD_add_response_header) X(MHD_lookup_connection_value)

CM_LIB_FUNCS(mhd, MHD_FUNCS)
static cm_lib mhd_lib = {"libmicrohttpd.so.12", "libmicrohttpd12", mhd_bind, 0, ""};

/* An immutable rendered answer, shared by the responses that send it. */
typedef struct blob {
	atomic_int refs;
	size_t len;
	char data[];
} blob;

/* The model of the latest analysis, kept for requests that need it (/api/timeline) and
 * shared with them: freed when the last holder lets go. */
typedef struct held {
	atomic_int refs;
	ana_profile p;
} held;

static void held_unref(held *h)
{
	if (h && atomic_fetch_sub(&h->refs, 1) == 1) {
		ana_profile_free(&h->p);
		free(h);
	}
}

struct view_server {
	struct MHD_Daemon *d;
	int fd;
	unsigned port;
	int loopback;             /* bound to a loopback address: check Host */
	char bound[INET6_ADDRSTRLEN + 2]; /* the address bound, as a Host names it ("[::1]") */
	char token[2 * TOKEN_BYTES + 1];  /* of the printed URL: hex */
	char cookie[32];          /* the cookie's name: fennec_token_<port> */
	char *path;
	ana_options ana;
	size_t max_body;
	struct timespec not_before; /* see view_options; {0, 0} once the file is the recording's */
	char *page;               /* the dashboard HTML */
	size_t page_len;
	pthread_mutex_t timeline; /* one timeline detail at a time (a pass over the files) */
	pthread_mutex_t lock;     /* guards the fields below */
	blob *analysis, *pagedata;
	held *model;
	uint64_t generation;      /* analyses swapped in */
	uint64_t events, size_bytes;
	int cut_short;
	double analysis_ms;
	char *error;              /* the last analysis's failure, or NULL */
	uint64_t sig;             /* the files' sizes and times at the last analysis */
	char **files;             /* the files of the last analysis */
	uint32_t nfiles;
	double changed_at;        /* monotonic seconds of the last change seen */
	double next_at;           /* no analysis again before this (view_refresh's thread only) */
	atomic_uint_fast64_t counts[3];
};

static double mono_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return (double)ts.tv_sec + (double)ts.tv_nsec / 1e9;
}

static blob *blob_new(const char *data, size_t len)
{
	blob *b = malloc(sizeof *b + len + 1);
	if (!b)
		return NULL;
	atomic_init(&b->refs, 1);
	b->len = len;
	memcpy(b->data, data, len);
	b->data[len] = 0;
	return b;
}

static void blob_unref(void *p)
{
	blob *b = p;
	if (b && atomic_fetch_sub(&b->refs, 1) == 1)
		free(b);
}

/* Render into a blob with a renderer that writes to a FILE*. */
#define RENDER(bp, call)                                                                \
	do {                                                                            \
		char *buf_ = NULL;                                                      \
		size_t len_ = 0;                                                        \
		FILE *out = open_memstream(&buf_, &len_);                               \
		int rc_ = out ? (call) : FENNEC_ENOMEM;                                 \
		if (out && fclose(out) && !rc_)                                         \
			rc_ = FENNEC_ENOMEM;                                            \
		*(bp) = rc_ ? NULL : blob_new(buf_, len_);                              \
		free(buf_);                                                             \
	} while (0)

static void stat_sig(uint64_t *h, const char *path)
{
	struct stat st;
	uint64_t v[3] = {0, 0, 0};
	if (stat(path, &st) == 0) {
		v[0] = (uint64_t)st.st_size;
		v[1] = (uint64_t)st.st_mtim.tv_sec;
		v[2] = (uint64_t)st.st_mtim.tv_nsec;
	}
	for (int i = 0; i < 3; i++)
		*h = (*h ^ v[i]) * 1099511628211ull;
}

/* A signature of the recording's files: the named path, its directory (new sibling
 * files change it) and every file of the last analysis. */
static uint64_t files_sig(view_server *s)
{
	uint64_t h = 1469598103934665603ull;
	stat_sig(&h, s->path);
	char *dir = strdup(s->path);
	if (dir) {
		char *slash = strrchr(dir, '/');
		if (slash)
			*slash = 0;
		stat_sig(&h, slash ? (*dir ? dir : "/") : ".");
		free(dir);
	}
	for (uint32_t i = 0; i < s->nfiles; i++)
		if (strcmp(s->files[i], s->path)) /* the named file is in already */
			stat_sig(&h, s->files[i]);
	return h;
}

static void set_error(view_server *s, const char *msg)
{
	pthread_mutex_lock(&s->lock);
	free(s->error);
	s->error = msg ? strdup(msg) : NULL;
	pthread_mutex_unlock(&s->lock);
}

/* Analyse the recording and swap the results in. Returns 0 or a FENNEC_E* code with the
 * message in err (also kept for /api/status). */
static int analyse(view_server *s, view_error *err)
{
	fmt_error fe;
	double t0 = mono_s();
	struct stat st;
	if ((s->not_before.tv_sec || s->not_before.tv_nsec) &&
	    (stat(s->path, &st) < 0 || st.st_mtim.tv_sec < s->not_before.tv_sec ||
	     (st.st_mtim.tv_sec == s->not_before.tv_sec && st.st_mtim.tv_nsec < s->not_before.tv_nsec))) {
		err->code = FENNEC_ENODATA;
		snprintf(err->msg, sizeof err->msg, "waiting for the recording to start writing %s", s->path);
		set_error(s, err->msg);
		return FENNEC_ENODATA;
	}
	s->not_before = (struct timespec){0, 0}; /* from now on the file is this recording's */
	held *h = malloc(sizeof *h);
	if (!h) {
		err->code = FENNEC_ENOMEM;
		snprintf(err->msg, sizeof err->msg, "%s: out of memory", s->path);
		return FENNEC_ENOMEM;
	}
	atomic_init(&h->refs, 1);
	ana_profile *p = &h->p;
	int rc = ana_load(s->path, &s->ana, p, &fe);
	if (rc) {
		err->code = rc;
		snprintf(err->msg, sizeof err->msg, "%s", fe.msg[0] ? fe.msg : fennec_strerror(rc));
		set_error(s, err->msg);
		held_unref(h);
		return rc;
	}
	rep_options ro = {0};
	rep_page_options po = {.live = 1};
	blob *json, *page;
	RENDER(&json, rep_json(out, p, &ro));
	RENDER(&page, rep_page_data(out, p, &ro, &po));
	char **files = calloc(p->nprocs ? p->nprocs : 1, sizeof *files);
	uint64_t size = 0;
	if (!json || !page || !files) {
		blob_unref(json);
		blob_unref(page);
		free(files);
		held_unref(h);
		err->code = FENNEC_ENOMEM;
		snprintf(err->msg, sizeof err->msg, "%s: out of memory while rendering the analysis", s->path);
		set_error(s, err->msg);
		return FENNEC_ENOMEM;
	}
	for (uint32_t i = 0; i < p->nprocs; i++) {
		files[i] = strdup(p->procs[i].file.path);
		size += p->procs[i].file.size;
	}
	pthread_mutex_lock(&s->lock);
	blob_unref(s->analysis);
	blob_unref(s->pagedata);
	s->analysis = json;
	s->pagedata = page;
	s->generation++;
	s->events = p->events;
	s->size_bytes = size;
	s->cut_short = p->cut_short;
	s->analysis_ms = (mono_s() - t0) * 1e3;
	free(s->error);
	s->error = NULL;
	for (uint32_t i = 0; i < s->nfiles; i++)
		free(s->files[i]);
	free(s->files);
	s->files = files;
	s->nfiles = p->nprocs;
	held *old = s->model;
	s->model = h;
	pthread_mutex_unlock(&s->lock);
	held_unref(old);
	return 0;
}

/* ---- requests ---- */

static enum MHD_Result send_blob(struct MHD_Connection *c, unsigned status, blob *b, const char *type)
{
	struct MHD_Response *r = mhd.MHD_create_response_from_buffer_with_free_callback_cls(b->len, b->data, blob_unref, b);
	if (!r) {
		blob_unref(b);
		return MHD_NO;
	}
	mhd.MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, type);
	mhd.MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
	mhd.MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
	mhd.MHD_add_response_header(r, "Referrer-Policy", "no-referrer");
	mhd.MHD_add_response_header(r, "Content-Security-Policy",
				"default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
				"img-src data:; connect-src 'self'; frame-ancestors 'none'");
	if (status == MHD_HTTP_METHOD_NOT_ALLOWED)
		mhd.MHD_add_response_header(r, MHD_HTTP_HEADER_ALLOW, "GET, HEAD");
	enum MHD_Result ok = mhd.MHD_queue_response(c, status, r);
	mhd.MHD_destroy_response(r);
	return ok;
}

static enum MHD_Result send_text(view_server *s, struct MHD_Connection *c, unsigned status, const char *text,
				 const char *type)
{
	blob *b = blob_new(text, strlen(text));
	if (!b)
		return MHD_NO;
	atomic_fetch_add(&s->counts[status >= 500 ? 2 : status >= 400 ? 1 : 0], 1);
	return send_blob(c, status, b, type);
}

static enum MHD_Result send_error(view_server *s, struct MHD_Connection *c, unsigned status, const char *why)
{
	char buf[512];
	snprintf(buf, sizeof buf, "{\"error\": \"%s\", \"status\": %u}\n", why, status);
	return send_text(s, c, status, buf, "application/json");
}

static void json_str(FILE *out, const char *v)
{
	if (v)
		rep_json_string(out, v);
	else
		fputs("null", out);
}

static enum MHD_Result send_status(view_server *s, struct MHD_Connection *c)
{
	char *buf = NULL;
	size_t len = 0;
	FILE *out = open_memstream(&buf, &len);
	if (!out)
		return MHD_NO;
	pthread_mutex_lock(&s->lock);
	int growing = s->cut_short && mono_s() - s->changed_at < 5;
	fputs("{\"schema\": \"fennec.view/1\", \"file\": ", out);
	json_str(out, s->path);
	fprintf(out, ", \"generation\": %llu, \"size_bytes\": %llu, \"events\": %llu, \"cut_short\": %s, "
		"\"growing\": %s, \"analysis_ms\": %.1f, \"error\": ",
		(unsigned long long)s->generation, (unsigned long long)s->size_bytes, (unsigned long long)s->events,
		s->cut_short ? "true" : "false", growing ? "true" : "false", s->analysis_ms);
	json_str(out, s->error);
	fputs("}\n", out);
	pthread_mutex_unlock(&s->lock);
	int bad = fclose(out);
	enum MHD_Result r = bad ? MHD_NO : send_text(s, c, MHD_HTTP_OK, buf, "application/json");
	free(buf);
	return r;
}

static enum MHD_Result send_shared(view_server *s, struct MHD_Connection *c, blob **slot)
{
	pthread_mutex_lock(&s->lock);
	blob *b = *slot;
	if (b)
		atomic_fetch_add(&b->refs, 1);
	pthread_mutex_unlock(&s->lock);
	if (!b)
		return send_error(s, c, MHD_HTTP_SERVICE_UNAVAILABLE, "no analysis yet");
	atomic_fetch_add(&s->counts[0], 1);
	return send_blob(c, MHD_HTTP_OK, b, "application/json");
}

/* A decimal query argument, or -1 when missing or malformed. */
static int64_t arg_u64(struct MHD_Connection *c, const char *name)
{
	const char *v = mhd.MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, name);
	if (!v || !*v || strlen(v) > 18 || strspn(v, "0123456789") != strlen(v))
		return -1;
	return (int64_t)strtoull(v, NULL, 10);
}

/* /api/timeline?from_ns=A&to_ns=B: the calls in a window, with the whole interval budget.
 * One at a time (each is a pass over the files): 503 while another is being built. */
static enum MHD_Result send_timeline(view_server *s, struct MHD_Connection *c)
{
	int64_t from = arg_u64(c, "from_ns"), to = arg_u64(c, "to_ns");
	if (from < 0 || to <= from)
		return send_error(s, c, MHD_HTTP_BAD_REQUEST, "needs from_ns and to_ns, whole numbers, from_ns < to_ns");
	if (pthread_mutex_trylock(&s->timeline))
		return send_error(s, c, MHD_HTTP_SERVICE_UNAVAILABLE, "busy with another timeline; try again");
	pthread_mutex_lock(&s->lock);
	held *h = s->model;
	if (h)
		atomic_fetch_add(&h->refs, 1);
	pthread_mutex_unlock(&s->lock);
	blob *b = NULL;
	if (h) {
		rep_page_options po = {.live = 1};
		RENDER(&b, rep_page_timeline(out, &h->p, &po, (uint64_t)from, (uint64_t)to));
		held_unref(h);
	}
	pthread_mutex_unlock(&s->timeline);
	if (!b)
		return send_error(s, c, h ? MHD_HTTP_INTERNAL_SERVER_ERROR : MHD_HTTP_SERVICE_UNAVAILABLE,
				  h ? "out of memory" : "no analysis yet");
	atomic_fetch_add(&s->counts[0], 1);
	return send_blob(c, MHD_HTTP_OK, b, "application/json");
}

/* Host header of a loopback server: a loopback name with our port, or none (HTTP/1.0). */
int view_host_ok(const char *host, int loopback, const char *bound, unsigned port)
{
	if (!host || !loopback)
		return 1;
	char want[96];
	const char *names[] = {"127.0.0.1", "localhost", "[::1]", bound};
	for (size_t i = 0; i < sizeof names / sizeof names[0]; i++) {
		snprintf(want, sizeof want, "%s:%u", names[i], port);
		if (!strcasecmp(host, want) || (port == 80 && !strcasecmp(host, names[i])))
			return 1;
	}
	return 0;
}

/* Equal strings, in a time that does not depend on where they differ. */
static int same_secret(const char *a, const char *b)
{
	size_t n = strlen(b);
	if (strlen(a) != n)
		return 0;
	unsigned char d = 0;
	for (size_t i = 0; i < n; i++)
		d |= (unsigned char)(a[i] ^ b[i]);
	return d == 0;
}

/* The request carries the token: 2 in ?token= (the cookie is to be set), 1 in the cookie,
 * 0 not at all. */
static int token_ok(view_server *s, struct MHD_Connection *c)
{
	const char *q = mhd.MHD_lookup_connection_value(c, MHD_GET_ARGUMENT_KIND, "token");
	if (q && same_secret(q, s->token))
		return 2;
	const char *k = mhd.MHD_lookup_connection_value(c, MHD_COOKIE_KIND, s->cookie);
	return k && same_secret(k, s->token);
}

/* The raw request URI, before libmicrohttpd decodes it: a %00 would end the decoded path
 * early, out of sight of the checks on it. Its return value starts the request's state. */
static char bad_uri;
static void *on_uri(void *cls, const char *uri, struct MHD_Connection *c)
{
	(void)cls;
	(void)c;
	return uri && strstr(uri, "%00") ? &bad_uri : NULL;
}

static enum MHD_Result on_request(void *cls, struct MHD_Connection *c, const char *url, const char *method,
				  const char *version, const char *upload_data, size_t *upload_data_size,
				  void **req_cls)
{
	view_server *s = cls;
	(void)version;
	(void)upload_data;
	if (*req_cls == &bad_uri)
		return send_error(s, c, MHD_HTTP_BAD_REQUEST, "bad path");
	if (*req_cls) {
		/* A body we accepted (small): read and ignore it. */
		*upload_data_size = 0;
		return MHD_YES;
	}
	int get = !strcmp(method, MHD_HTTP_METHOD_GET), head = !strcmp(method, MHD_HTTP_METHOD_HEAD);
	const char *cl = mhd.MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_CONTENT_LENGTH);
	if (cl && strtoull(cl, NULL, 10) > s->max_body)
		return send_error(s, c, MHD_HTTP_CONTENT_TOO_LARGE, "request body too large");
	if (mhd.MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_TRANSFER_ENCODING))
		return send_error(s, c, MHD_HTTP_CONTENT_TOO_LARGE, "request bodies are not accepted");
	if (!get && !head)
		return send_error(s, c, MHD_HTTP_METHOD_NOT_ALLOWED, "only GET and HEAD");
	if (!view_host_ok(mhd.MHD_lookup_connection_value(c, MHD_HEADER_KIND, MHD_HTTP_HEADER_HOST), s->loopback,
			  s->bound, s->port))
		return send_error(s, c, MHD_HTTP_FORBIDDEN, "unexpected Host header");
	size_t n = strlen(url);
	if (n > MAX_URL)
		return send_error(s, c, MHD_HTTP_URI_TOO_LONG, "URL too long");
	/* The URL arrives decoded: no parent references, backslashes or control bytes. */
	if (url[0] != '/' || strstr(url, "..") || strchr(url, '\\') || strstr(url, "//"))
		return send_error(s, c, MHD_HTTP_BAD_REQUEST, "bad path");
	for (const unsigned char *p = (const unsigned char *)url; *p; p++)
		if (*p < 0x20 || *p == 0x7f)
			return send_error(s, c, MHD_HTTP_BAD_REQUEST, "bad path");
	int tok = token_ok(s, c);
	if (!tok)
		return send_error(s, c, MHD_HTTP_FORBIDDEN, "missing or wrong token: open the URL fennec view printed");
	if (cl && strtoull(cl, NULL, 10) > 0)
		*req_cls = s; /* let MHD read the small body; the next call answers */
	if (!strcmp(url, "/") || !strcmp(url, "/index.html")) {
		atomic_fetch_add(&s->counts[0], 1);
		struct MHD_Response *r = mhd.MHD_create_response_from_buffer(s->page_len, s->page, MHD_RESPMEM_PERSISTENT);
		if (!r)
			return MHD_NO;
		if (tok == 2) { /* the page's own requests carry the token as this cookie */
			char set[128];
			snprintf(set, sizeof set, "%s=%s; Path=/; HttpOnly; SameSite=Strict", s->cookie, s->token);
			mhd.MHD_add_response_header(r, MHD_HTTP_HEADER_SET_COOKIE, set);
		}
		mhd.MHD_add_response_header(r, MHD_HTTP_HEADER_CONTENT_TYPE, "text/html; charset=utf-8");
		mhd.MHD_add_response_header(r, MHD_HTTP_HEADER_CACHE_CONTROL, "no-store");
		mhd.MHD_add_response_header(r, "X-Content-Type-Options", "nosniff");
		mhd.MHD_add_response_header(r, "Content-Security-Policy",
					"default-src 'none'; script-src 'unsafe-inline'; style-src 'unsafe-inline'; "
					"img-src data:; connect-src 'self'; frame-ancestors 'none'");
		enum MHD_Result ok = mhd.MHD_queue_response(c, MHD_HTTP_OK, r);
		mhd.MHD_destroy_response(r);
		return ok;
	}
	if (!strcmp(url, "/api/status"))
		return send_status(s, c);
	if (!strcmp(url, "/api/analysis"))
		return send_shared(s, c, &s->analysis);
	if (!strcmp(url, "/api/page"))
		return send_shared(s, c, &s->pagedata);
	if (!strcmp(url, "/api/timeline"))
		return send_timeline(s, c);
	if (!strcmp(url, "/favicon.ico"))
		return send_text(s, c, MHD_HTTP_NO_CONTENT, "", "text/plain");
	return send_error(s, c, MHD_HTTP_NOT_FOUND, "not found");
}

/* ---- life cycle ---- */

int view_listen(const char *host, unsigned port, int *loopback, char *bound, size_t bound_size, view_error *err)
{
	struct addrinfo hints = {.ai_family = AF_UNSPEC, .ai_socktype = SOCK_STREAM, .ai_flags = AI_PASSIVE | AI_NUMERICSERV};
	struct addrinfo *ai = NULL;
	char ps[16];
	snprintf(ps, sizeof ps, "%u", port);
	int g = getaddrinfo(host, ps, &hints, &ai);
	if (g) {
		err->code = FENNEC_EINVAL;
		snprintf(err->msg, sizeof err->msg, "cannot resolve host '%s': %s", host, gai_strerror(g));
		return -1;
	}
	int fd = -1, e = 0;
	for (struct addrinfo *a = ai; a; a = a->ai_next) {
		fd = socket(a->ai_family, a->ai_socktype | SOCK_CLOEXEC, a->ai_protocol);
		if (fd < 0) {
			e = errno;
			continue;
		}
		int one = 1;
		setsockopt(fd, SOL_SOCKET, SO_REUSEADDR, &one, sizeof one);
		if (bind(fd, a->ai_addr, a->ai_addrlen) == 0 && listen(fd, 128) == 0) {
			char num[INET6_ADDRSTRLEN] = "";
			if (a->ai_family == AF_INET) {
				*loopback = (ntohl(((struct sockaddr_in *)a->ai_addr)->sin_addr.s_addr) >> 24) == 127;
				inet_ntop(AF_INET, &((struct sockaddr_in *)a->ai_addr)->sin_addr, num, sizeof num);
				snprintf(bound, bound_size, "%s", num);
			} else if (a->ai_family == AF_INET6) {
				const struct in6_addr *in6 = &((struct sockaddr_in6 *)a->ai_addr)->sin6_addr;
				/* ::ffff:127.x.y.z is IPv4 loopback, reached through an IPv6 socket */
				*loopback = IN6_IS_ADDR_LOOPBACK(in6) || (IN6_IS_ADDR_V4MAPPED(in6) && in6->s6_addr[12] == 127);
				inet_ntop(AF_INET6, in6, num, sizeof num);
				snprintf(bound, bound_size, "[%s]", num);
			}
			break;
		}
		e = errno;
		close(fd);
		fd = -1;
	}
	freeaddrinfo(ai);
	if (fd < 0) {
		err->code = FENNEC_EIO;
		err->sys_errno = e;
		snprintf(err->msg, sizeof err->msg, "cannot listen on %s port %u: %s", host, port, strerror(e));
	}
	return fd;
}

unsigned view_bound_port(int fd)
{
	struct sockaddr_storage ss;
	socklen_t len = sizeof ss;
	if (getsockname(fd, (struct sockaddr *)&ss, &len) < 0)
		return 0;
	if (ss.ss_family == AF_INET)
		return ntohs(((struct sockaddr_in *)&ss)->sin_port);
	if (ss.ss_family == AF_INET6)
		return ntohs(((struct sockaddr_in6 *)&ss)->sin6_port);
	return 0;
}

int view_open(const view_options *o, view_server **out, view_error *err)
{
	memset(err, 0, sizeof *err);
	*out = NULL;
	view_server *s = calloc(1, sizeof *s);
	if (!s || !(s->path = strdup(o->path))) {
		free(s);
		err->code = FENNEC_ENOMEM;
		snprintf(err->msg, sizeof err->msg, "out of memory");
		return FENNEC_ENOMEM;
	}
	s->fd = -1;
	s->ana = o->ana;
	s->max_body = o->max_body_bytes ? o->max_body_bytes : 4096;
	pthread_mutex_init(&s->lock, NULL);
	pthread_mutex_init(&s->timeline, NULL);
	s->not_before = o->not_before;
	int rc;
	const char *why;
	if ((rc = cm_lib_load(&mhd_lib, &why)) != 0) {
		err->code = rc;
		snprintf(err->msg, sizeof err->msg, "cannot serve: %s", why);
		goto fail;
	}
	/* Listen first: a port that is taken is said before any long analysis. */
	s->fd = view_listen(o->host ? o->host : "127.0.0.1", o->port, &s->loopback, s->bound, sizeof s->bound, err);
	if (s->fd < 0) {
		rc = err->code;
		goto fail;
	}
	s->port = view_bound_port(s->fd);
	snprintf(s->cookie, sizeof s->cookie, "fennec_token_%u", s->port);
	uint8_t rnd[TOKEN_BYTES];
	if (getrandom(rnd, sizeof rnd, 0) != (ssize_t)sizeof rnd) {
		rc = err->code = FENNEC_EIO;
		snprintf(err->msg, sizeof err->msg, "cannot make a token: %s", strerror(errno));
		goto fail;
	}
	for (int i = 0; i < TOKEN_BYTES; i++)
		snprintf(s->token + 2 * i, 3, "%02x", rnd[i]);
	s->sig = files_sig(s);
	s->changed_at = mono_s();
	rc = analyse(s, err);
	if (rc == FENNEC_ENOMEM || (rc && !o->wait_for_data))
		goto fail;
	memset(err, 0, sizeof *err);
	/* The page: the template with the scripts, loading its data from the API. */
	FILE *pg = open_memstream(&s->page, &s->page_len);
	rc = pg ? rep_html_page(pg, o->web, NULL, 0, 1) : FENNEC_ENOMEM;
	if (pg && fclose(pg) && !rc)
		rc = FENNEC_ENOMEM;
	if (rc) {
		err->code = rc;
		snprintf(err->msg, sizeof err->msg, "cannot render the page: %s", fennec_strerror(rc));
		goto fail;
	}
	s->d = mhd.MHD_start_daemon(MHD_USE_AUTO_INTERNAL_THREAD, 0, NULL, NULL, on_request, s,
				MHD_OPTION_LISTEN_SOCKET, s->fd,
				MHD_OPTION_THREAD_POOL_SIZE, (unsigned)2,
				MHD_OPTION_CONNECTION_LIMIT, (unsigned)MAX_CONNECTIONS,
				MHD_OPTION_PER_IP_CONNECTION_LIMIT, (unsigned)MAX_PER_CLIENT,
				MHD_OPTION_URI_LOG_CALLBACK, on_uri, (void *)NULL,
				MHD_OPTION_CONNECTION_TIMEOUT, (unsigned)15,
				MHD_OPTION_CONNECTION_MEMORY_LIMIT, (size_t)32768,
				MHD_OPTION_END);
	if (!s->d) {
		rc = err->code = FENNEC_EIO;
		snprintf(err->msg, sizeof err->msg, "cannot start the HTTP server on port %u", s->port);
		goto fail;
	}
	s->fd = -1; /* the daemon owns the socket now and closes it */
	*out = s;
	return 0;
fail:
	view_close(s);
	return rc;
}

unsigned view_port(const view_server *s) { return s->port; }

const char *view_token(const view_server *s) { return s->token; }

int view_loopback(const view_server *s) { return s->loopback; }

int view_refresh(view_server *s, int *changed)
{
	if (changed)
		*changed = 0;
	uint64_t sig = files_sig(s);
	pthread_mutex_lock(&s->lock);
	int have = s->generation > 0;
	pthread_mutex_unlock(&s->lock);
	if (sig == s->sig && have)
		return 0;
	/* A growing recording is analysed again at most once per four of its last analysis's
	 * durations (a 2 s analysis every 10 s): view's own CPU stays under a fifth of a core
	 * however long the recording and however often its files change. The change is kept:
	 * the first call after next_at sees it. */
	double t0 = mono_s();
	if (have && t0 < s->next_at)
		return 0;
	s->sig = sig;
	pthread_mutex_lock(&s->lock);
	s->changed_at = mono_s();
	pthread_mutex_unlock(&s->lock);
	view_error err;
	int rc = analyse(s, &err);
	s->next_at = mono_s() + 4 * (mono_s() - t0);
	/* s->sig stays the signature from before the analysis: a change during it (or new
	 * files it found) is seen by the next call. */
	if (rc == 0 && changed)
		*changed = 1;
	return rc == FENNEC_ENOMEM ? rc : 0;
}

void view_counts(const view_server *s, uint64_t counts[3])
{
	for (int i = 0; i < 3; i++)
		counts[i] = atomic_load(&((view_server *)s)->counts[i]);
}

void view_close(view_server *s)
{
	if (!s)
		return;
	if (s->d)
		mhd.MHD_stop_daemon(s->d);
	if (s->fd >= 0)
		close(s->fd);
	blob_unref(s->analysis);
	blob_unref(s->pagedata);
	held_unref(s->model);
	for (uint32_t i = 0; i < s->nfiles; i++)
		free(s->files[i]);
	free(s->files);
	free(s->error);
	free(s->page);
	free(s->path);
	pthread_mutex_destroy(&s->lock);
	pthread_mutex_destroy(&s->timeline);
	free(s);
}

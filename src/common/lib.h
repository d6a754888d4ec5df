/*
 * lib.h - libraries the analysis side loads when a command first needs them rather than
 * links: cairo (PNG charts) and libmicrohttpd (the web dashboard). Linked, they and the
 * libraries under them (X11, fontconfig, freetype; GnuTLS, nettle, gmp, p11-kit: 30 in
 * all) were loaded by every fennec command, `fennec record` included: 4.5-6.2 ms of CPU
 * against 0.9-1.2 ms without them (perf stat -e task-clock on empty programs linked both
 * ways), most of fennec's fixed cost on a short recording.
 *
 * A user declares the functions it calls as a struct of pointers typed from the library's
 * own header and a cm_lib whose bind function sets them (CM_LIB_FUNCS makes both);
 * cm_lib_load() loads the library and binds them the first time (under a lock), and says
 * what went wrong every time:
 *
 *	#define FUNCS(X) X(cairo_create) X(cairo_destroy) ...
 *	CM_LIB_FUNCS(cx, FUNCS)
 *	static cm_lib cairo = {"libcairo.so.2", "libcairo2", cx_bind};
 *	... if (cm_lib_load(&cairo, &why)) fail(why); cx.cairo_create(...);
 */
#ifndef FENNEC_COMMON_LIB_H
#define FENNEC_COMMON_LIB_H

#include <stddef.h>

typedef struct cm_lib {
	const char *soname;     /* what dlopen() is given */
	const char *package;    /* the Debian package that has it, for the message */
	/* Set the pointers from the library h; 0, or -1 with msg set (CM_LIB_FUNCS's does). */
	int (*bind)(void *h, const char *soname, char *msg, size_t n);
	int state;              /* 0: not tried yet, 1: bound, -1: failed */
	char msg[256];
} cm_lib;

/* Load and bind l on first use: 0, or FENNEC_EIO with the reason (naming the package) in
 * *msg when msg is not NULL. Thread-safe. */
int cm_lib_load(cm_lib *l, const char **msg);

/* The symbol `name` of a library; NULL with the reason in msg. */
void *cm_lib_sym(void *lib, const char *soname, const char *name, char *msg, size_t n);

/* `static struct { ... } var`, a pointer for each function of the list FUNCS (X(f) X(g)
 * ...), typed as the library's header declares it, and `var_bind`, a cm_lib's bind. */
#define CM_LIB_DECLARE(f) __typeof__(f) *f;
#define CM_LIB_BIND_ONE(f)                                                                     \
	if (!(cm_lib_var->f = (__typeof__(cm_lib_var->f))cm_lib_sym(cm_lib_h, cm_lib_so, #f, cm_lib_msg, cm_lib_n))) \
		return -1;
#define CM_LIB_FUNCS(var, FUNCS)                                                               \
	static struct {                                                                        \
		FUNCS(CM_LIB_DECLARE)                                                          \
	} var;                                                                                 \
	static int var##_bind(void *cm_lib_h, const char *cm_lib_so, char *cm_lib_msg, size_t cm_lib_n) \
	{                                                                                      \
		__typeof__(&var) cm_lib_var = &var;                                            \
		FUNCS(CM_LIB_BIND_ONE)                                                         \
		return 0;                                                                      \
	}

#endif

/*
 * lib.c - libraries loaded on first use (lib.h).
 */
#include "common/lib.h"

#include <dlfcn.h>
#include <pthread.h>
#include <stdio.h>

#include "fennec.h"

int cm_lib_load(cm_lib *l, const char **msg)
{
	static pthread_mutex_t lock = PTHREAD_MUTEX_INITIALIZER;
	pthread_mutex_lock(&lock);
	if (!l->state) {
		void *h = dlopen(l->soname, RTLD_NOW | RTLD_LOCAL);
		if (!h)
			snprintf(l->msg, sizeof l->msg, "cannot load %s (Debian package %s): %s", l->soname, l->package,
				 dlerror());
		l->state = h && l->bind(h, l->soname, l->msg, sizeof l->msg) == 0 ? 1 : -1;
	}
	int rc = l->state > 0 ? 0 : FENNEC_EIO;
	pthread_mutex_unlock(&lock);
	if (msg)
		*msg = l->msg;
	return rc;
}

void *cm_lib_sym(void *lib, const char *soname, const char *name, char *msg, size_t n)
{
	void *f = dlsym(lib, name);
	if (!f)
		snprintf(msg, n, "%s has no %s (a version too old?)", soname, name);
	return f;
}

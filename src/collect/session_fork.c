/*
 * session_fork.c - a recording kept whole across processes: pthread_atfork's handlers (a
 * fork child starts a file of its own and carries the forking thread's open regions over),
 * the exec family's wrappers (the file ends with END and the writer waits while the exec is
 * tried; one that fails goes on as before), and _exit, _Exit and the destructor that end
 * the session. Run on the program's threads. session.h says what it shares;
 * docs/internals/collect.md, "Processes", the design.
 */
#include "collect/collect.h"
#include "collect/gpu.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>

#include "collect/session.h" /* last: its short names are macros */

#define API FENNEC_API

/* ---- fork, exec, exit ---- */

void atfork_prepare(void)
{
	lock_flush();
	pthread_mutex_lock(&reg_lock);
	pthread_mutex_lock(&intern_lock);
}

void atfork_parent(void)
{
	col_mem_atfork_parent();
	pthread_mutex_unlock(&intern_lock);
	pthread_mutex_unlock(&reg_lock);
	pthread_mutex_unlock(&flush_lock);
}

void atfork_child(void)
{
	col_fd_forked();
	pthread_mutex_unlock(&intern_lock);
	pthread_mutex_unlock(&reg_lock);
	col_mem_atfork_child();
	col_gpu_atfork_child();
	if (!atomic_load(&col_on)) {
		pthread_mutex_unlock(&flush_lock);
		return;
	}
	/* The parent writes what its threads buffered; the child starts a file of its own
	 * in the same recording and carries the forking thread's open regions over. */
	pid_t parent = S.pid;
	atomic_store(&col_on, 0);
	files_close();
	S.origin = FMT_ORIGIN_FORK;
	S.parent_pid = parent;
	col_sample_atfork_child();
	uint32_t n = atomic_load(&nslots);
	col_thread *mine = col_tls;
	for (uint32_t i = 0; i < n; i++) {
		col_thread *t = atomic_load(&slots[i]);
		if (t && t != mine)
			atomic_store(&t->state, COL_T_FREE);
	}
	int rc = session_begin();
	pthread_mutex_unlock(&flush_lock);
	if (rc == 0 && mine)
		col_thread_register(); /* re-opens the inherited regions */
	if (mine && mine != col_tls)
		atomic_store(&mine->state, COL_T_FREE);
}

/* Before an exec replaces this image, the writer ends the file with END and waits (above
 * exec_freeze()); the new image (preloaded by `fennec record`) continues the recording in a
 * sibling file. FENNEC_EXEC_FROM tells it that it is this process after exec. In a vfork
 * child the session is the parent's: leave it alone. Returns 1 when the writer waits. */
static char exec_from_was[32]; /* FENNEC_EXEC_FROM before exec_prepare() set it ("" if unset) */
static int exec_from_had;

static int exec_prepare(void)
{
	if (!atomic_load(&col_on) || S.pid != getpid())
		return 0;
	/* The heap's last timeline point of this image, as at a stop: what was live when it
	 * exec'd (the timeline of a program that allocates and execs read 0 B throughout). */
	col_mem_exec();
	lock_flush();
	int ask = atomic_load(&col_on) && S.pid == getpid() && !S.stop_writer;
	if (ask && S.lazy) {
		/* No writer to freeze: this thread ends the file and keeps the flush lock over the
		 * exec (exec_failed() gives it back). */
		int was = col_mem_internal(1), e = errno;
		flush_inline(1, FMT_END_EXEC);
		col_mem_internal(was);
		S.exec_inline = 1;
		errno = e;
		goto frozen;
	}
	if (ask) {
		atomic_store(&exec_state, EXEC_ASKED);
		writer_wake();
	}
	pthread_mutex_unlock(&flush_lock);
	if (!ask)
		return 0;
	uint32_t st;
	while ((st = atomic_load(&exec_state)) == EXEC_ASKED)
		futex_wait(&exec_state, st);
	if (st != EXEC_FROZEN)
		return 0; /* the session was stopped meanwhile */
frozen:;
	int saved = errno;
	const char *was = getenv("FENNEC_EXEC_FROM");
	exec_from_had = was != NULL;
	snprintf(exec_from_was, sizeof exec_from_was, "%s", was ? was : "");
	char v[32];
	snprintf(v, sizeof v, "%d", (int)getpid());
	setenv("FENNEC_EXEC_FROM", v, 1);
	errno = saved;
	return 1;
}

/* The exec returned: it failed, and this image goes on, recorded as before. */
static void exec_failed(int was_waiting)
{
	if (!was_waiting)
		return;
	int saved = errno;
	if (exec_from_had)
		setenv("FENNEC_EXEC_FROM", exec_from_was, 1);
	else
		unsetenv("FENNEC_EXEC_FROM");
	if (S.exec_inline) {
		S.exec_inline = 0;
		int was = col_mem_internal(1);
		exec_resume();
		lazy_arm(1);
		col_mem_internal(was);
		pthread_mutex_unlock(&flush_lock);
		errno = saved;
		return;
	}
	atomic_store(&exec_state, EXEC_RESUME);
	futex_wake(&exec_state);
	errno = saved;
}

/* A copy of envp with FENNEC_EXEC_FROM set as in our environment, or envp itself when
 * that fails; *own receives the one string allocated for it. */
static char **env_with_exec_from(char *const envp[], char **own)
{
	const char *mine = getenv("FENNEC_EXEC_FROM");
	if (!envp || !mine)
		return (char **)envp;
	size_t n = 0;
	while (envp[n])
		n++;
	char **env = malloc((n + 2) * sizeof *env);
	if (!env || asprintf(own, "FENNEC_EXEC_FROM=%s", mine) < 0) {
		free(env);
		*own = NULL;
		return (char **)envp;
	}
	size_t k = 0;
	for (size_t i = 0; i < n; i++)
		if (strncmp(envp[i], "FENNEC_EXEC_FROM=", 17))
			env[k++] = envp[i];
	env[k++] = *own;
	env[k] = NULL;
	return env;
}

typedef int (*execve_fn)(const char *, char *const[], char *const[]);
typedef int (*execv_fn)(const char *, char *const[]);

/* execve with an explicit environment: pass FENNEC_EXEC_FROM in it. */
API int execve(const char *path, char *const argv[], char *const envp[])
{
	static execve_fn real;
	if (!real)
		real = (execve_fn)dlsym(RTLD_NEXT, "execve");
	int running = exec_prepare();
	char *own = NULL;
	char **env = running ? env_with_exec_from(envp, &own) : (char **)envp;
	int rc = real(path, argv, env);
	if (env != envp)
		free(env);
	free(own);
	exec_failed(running);
	return rc;
}

#define EXEC_WRAPPER(fn)                                                   \
	API int fn(const char *file, char *const argv[])                   \
	{                                                                  \
		static execv_fn real;                                      \
		if (!real)                                                 \
			real = (execv_fn)dlsym(RTLD_NEXT, #fn);            \
		int running = exec_prepare();                              \
		int rc = real(file, argv);                                 \
		exec_failed(running);                                      \
		return rc;                                                 \
	}
EXEC_WRAPPER(execv)
EXEC_WRAPPER(execvp)

API int execvpe(const char *file, char *const argv[], char *const envp[])
{
	static execve_fn real;
	if (!real)
		real = (execve_fn)dlsym(RTLD_NEXT, "execvpe");
	int running = exec_prepare();
	/* Same environment rule as execve: the caller's envp plus FENNEC_EXEC_FROM. */
	char *own = NULL;
	char **env = running ? env_with_exec_from(envp, &own) : (char **)envp;
	int rc = real(file, argv, env);
	if (env != envp)
		free(env);
	free(own);
	exec_failed(running);
	return rc;
}

/* The execl family builds argv and goes through the wrappers above: glibc's own execl
 * calls execve internally, where no interposition reaches. */
static char **collect_args(const char *arg0, va_list ap, char ***envp_out)
{
	size_t n = 1, cap = 16;
	char **argv = malloc(cap * sizeof *argv);
	if (!argv)
		return NULL;
	argv[0] = (char *)arg0;
	while (arg0) {
		char *a = va_arg(ap, char *);
		if (n + 1 >= cap) {
			char **b = realloc(argv, (cap *= 2) * sizeof *argv);
			if (!b) {
				free(argv);
				return NULL;
			}
			argv = b;
		}
		argv[n++] = a;
		if (!a)
			break;
	}
	if (!arg0)
		argv[1] = NULL;
	if (envp_out)
		*envp_out = va_arg(ap, char **);
	return argv;
}

typedef int (*execv_like)(const char *, char *const[]);

/* argv is fennec's own allocation, not the program's (nor counted). */
static int exec_list(execv_like fn, const char *file, const char *arg, va_list ap)
{
	int was = col_mem_internal(1);
	char **argv = collect_args(arg, ap, NULL);
	col_mem_internal(was);
	if (!argv) {
		errno = ENOMEM;
		return -1;
	}
	int rc = fn(file, argv);
	free(argv); /* fennec's own blocks are known by their address */
	return rc;
}

API int execl(const char *path, const char *arg, ...)
{
	va_list ap;
	va_start(ap, arg);
	int rc = exec_list(execv, path, arg, ap);
	va_end(ap);
	return rc;
}

API int execlp(const char *file, const char *arg, ...)
{
	va_list ap;
	va_start(ap, arg);
	int rc = exec_list(execvp, file, arg, ap);
	va_end(ap);
	return rc;
}

API int execle(const char *path, const char *arg, ...)
{
	va_list ap;
	char **envp;
	va_start(ap, arg);
	int was = col_mem_internal(1);
	char **argv = collect_args(arg, ap, &envp);
	col_mem_internal(was);
	va_end(ap);
	if (!argv) {
		errno = ENOMEM;
		return -1;
	}
	int rc = execve(path, argv, envp);
	free(argv);
	return rc;
}

typedef void (*exit_fn)(int);
static exit_fn real_exit, real_Exit; /* the next _exit and _Exit (col_autostart) */

__attribute__((constructor)) static void col_autostart(void)
{
	/* Looked up now: _exit may be called from a signal handler, where dlsym may not. */
	col_fd_init();
	real_exit = (exit_fn)dlsym(RTLD_NEXT, "_exit");
	real_Exit = (exit_fn)dlsym(RTLD_NEXT, "_Exit");
	if (col_autostart_value(getenv("FENNEC_AUTOSTART")))
		fennec_start(NULL);
}

__attribute__((destructor)) static void col_atexit(void)
{
	if (atomic_load(&col_on) && S.pid == getpid()) {
		col_mem_internal(1);
		session_end(1, NULL);
		col_mem_internal(0);
	}
}

/*
 * _exit and _Exit end the process without atexit handlers or destructors, so without
 * col_atexit(): a fork child that never execs (Python's multiprocessing workers and
 * PyTorch's DataLoader workers end with os._exit), or a program that leaves by os._exit
 * to skip a slow teardown, lost what it did since its last flush (up to 100 ms, all of a
 * short child) and read as cut short. The file is finished here, with exit reason 3, but
 * not:
 *   - in a vfork child (or a clone without fork's handlers): the session is the parent's,
 *     whose pid S.pid still holds;
 *   - on a thread inside fennec's own code (col_mem_busy()): _exit is async-signal-safe,
 *     and a handler that calls it may have interrupted fennec holding a lock.
 * The lock and the ends of the writer and wall threads are waited for 2 s at most: the
 * interrupted code may hold what they wait for (the loader's lock, which libunwind takes).
 * When that runs out, the file stays as it was, cut short, and the process exits then.
 */
static void exit_finish(void)
{
	if (!atomic_load(&col_on) || S.pid != getpid() || col_mem_busy())
		return;
	int saved = errno;
	struct timespec deadline;
	clock_gettime(CLOCK_REALTIME, &deadline);
	deadline.tv_sec += 2;
	col_mem_internal(1);
	session_end(3, &deadline);
	col_mem_internal(0);
	errno = saved;
}

static __attribute__((noreturn)) void exit_by(exit_fn real, int status)
{
	exit_finish();
	if (real)
		real(status);
	for (;;)
		syscall(SYS_exit_group, status);
}

API void _exit(int status) { exit_by(real_exit, status); }
API void _Exit(int status) { exit_by(real_Exit, status); }

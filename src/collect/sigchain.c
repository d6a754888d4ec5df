/*
 * sigchain.c - the program keeps the real-time signal that fennec samples with.
 *
 * fennec's sampling handler sits on one real-time signal (sample.c) for the rest of the
 * process's life. A program that installed its own handler on that signal later (a runtime
 * that takes every real-time signal, say) used to replace it: sampling stopped, and the
 * program's handler got fennec's timer signals. As the JVM's libjsig does, the program's
 * sigaction() on the signal fennec owns is answered here: the disposition is stored, not
 * installed, and read back as the program left it, so the program sees what it would see
 * alone. fennec's handler tells its own signals by their siginfo and hands every other
 * one to col_sig_forward(), which does what the stored disposition says. signal(),
 * bsd_signal(), ssignal(), sysv_signal(), sigset(), sigignore() and siginterrupt() call
 * libc's sigaction internally, where no interposition reaches: on real-time signals they
 * are done here, with glibc's semantics, through the same code as sigaction().
 *
 * The stored disposition is written under a sequence lock by writers that block every
 * signal while they hold it: a handler never finds it half written on its own thread, and
 * never waits for a thread that cannot run.
 */
#include "collect/collect.h"
#include "collect/sigchain.h"

#include <dlfcn.h>
#include <errno.h>
#include <sched.h>
#include <string.h>
#include <sys/syscall.h>
#include <ucontext.h>
#include <unistd.h>

/*
 * Under ThreadSanitizer nothing here is instrumented: its runtime's own sigaction() calls,
 * made while it initialises, reach this wrapper before it can run instrumented code (its
 * function-entry hook crashed). The state below is touched only here.
 */
#if defined(__SANITIZE_THREAD__)
#define NO_TSAN __attribute__((no_sanitize_thread))
#elif defined(__has_feature)
#if __has_feature(thread_sanitizer)
#define NO_TSAN __attribute__((disable_sanitizer_instrumentation))
#endif
#endif
#ifndef NO_TSAN
#define NO_TSAN
#endif

#define API FENNEC_API NO_TSAN

#ifndef SA_RESTORER
#define SA_RESTORER 0x04000000
#endif
#ifndef SA_EXPOSE_TAGBITS
#define SA_EXPOSE_TAGBITS 0x00000800
#endif
/* The flags the kernel reports back (it clears any other since Linux 5.11). */
#define UAPI_FLAGS (SA_NOCLDSTOP | SA_NOCLDWAIT | SA_SIGINFO | SA_ONSTACK | SA_RESTART | SA_NODEFER | \
		    SA_RESETHAND | SA_EXPOSE_TAGBITS | SA_RESTORER)
#define BIT(sig) (1ull << ((sig) - 1))

typedef int (*sigaction_fn)(int, const struct sigaction *, struct sigaction *);
typedef __sighandler_t (*signal_fn)(int, __sighandler_t);
typedef int (*sigignore_fn)(int);
typedef int (*siginterrupt_fn)(int, int);

/* libc's implementation, exported for its own use; called until the constructor below
 * has looked up the next sigaction (a sanitizer's comes before libc's). */
extern int __sigaction(int, const struct sigaction *, struct sigaction *);

static struct {
	_Atomic(sigaction_fn) sigaction;
	_Atomic(signal_fn) signal, bsd_signal, ssignal, sysv_signal, sigset;
	_Atomic(sigignore_fn) sigignore;
	_Atomic(siginterrupt_fn) siginterrupt;
} R;

static struct {
	_Atomic int sig;            /* the signal fennec owns; 0 before col_sig_own */
	_Atomic uint32_t seq;       /* odd while a writer holds the fields below */
	_Atomic uintptr_t handler;  /* the program's sa_handler or sa_sigaction */
	_Atomic int flags;          /* its sa_flags, as the kernel would report them */
	_Atomic uint64_t mask;      /* its sa_mask, signals 1 to 64 */
	_Atomic uintptr_t restorer; /* its sa_restorer, as libc would have set it */
	int libc_flags;             /* SA_RESTORER when libc adds it (and libc_restorer) */
	uintptr_t libc_restorer;
	_Atomic uint64_t intr;      /* real-time signals given siginterrupt(sig, 1), by bit */
	sigset_t fork_mask;         /* the forking thread's mask, while fork holds the lock */
} C;

/* The disposition as one read saw it. */
typedef struct disp {
	uintptr_t handler, restorer;
	uint64_t mask;
	int flags;
	uint32_t seq;
} disp;

NO_TSAN int col_sig_real(int sig, const struct sigaction *act, struct sigaction *old)
{
	sigaction_fn f = atomic_load_explicit(&R.sigaction, memory_order_acquire);
	return f ? f(sig, act, old) : __sigaction(sig, act, old);
}

NO_TSAN static int is_rt(int sig)
{
	return sig >= SIGRTMIN && sig <= SIGRTMAX;
}

/* Take the disposition for writing: every signal blocked first (a handler on this thread
 * then never meets the sequence odd), then the sequence made odd. */
NO_TSAN static void lock(sigset_t *saved)
{
	sigset_t all;
	sigfillset(&all);
	pthread_sigmask(SIG_SETMASK, &all, saved);
	for (;;) {
		uint32_t s = atomic_load_explicit(&C.seq, memory_order_relaxed);
		if (!(s & 1) &&
		    atomic_compare_exchange_weak_explicit(&C.seq, &s, s + 1, memory_order_acquire, memory_order_relaxed))
			return;
		sched_yield();
	}
}

NO_TSAN static void unlock(const sigset_t *saved)
{
	atomic_fetch_add_explicit(&C.seq, 1, memory_order_release);
	pthread_sigmask(SIG_SETMASK, saved, NULL);
}

/* A fork waits for a writer: the child would inherit the sequence odd, with no writer. */
NO_TSAN static void fork_prepare(void) { lock(&C.fork_mask); }
NO_TSAN static void fork_done(void) { unlock(&C.fork_mask); }

/* Async-signal-safe; spins only while a writer on another thread (signals blocked, never
 * waiting for anything) finishes. */
NO_TSAN static void disp_read(disp *d)
{
	for (;;) {
		uint32_t s = atomic_load_explicit(&C.seq, memory_order_acquire);
		if (s & 1) {
			sched_yield();
			continue;
		}
		/* Acquire loads keep the second read of seq after them; TSan understands
		 * these and not a fence (as blk_sample in sample_wall.c). */
		d->handler = atomic_load_explicit(&C.handler, memory_order_acquire);
		d->flags = atomic_load_explicit(&C.flags, memory_order_acquire);
		d->mask = atomic_load_explicit(&C.mask, memory_order_acquire);
		d->restorer = atomic_load_explicit(&C.restorer, memory_order_acquire);
		if (atomic_load_explicit(&C.seq, memory_order_relaxed) == s) {
			d->seq = s;
			return;
		}
	}
}

/* Under the lock. */
NO_TSAN static void disp_write(uintptr_t handler, int flags, uint64_t mask, uintptr_t restorer)
{
	atomic_store_explicit(&C.handler, handler, memory_order_relaxed);
	atomic_store_explicit(&C.flags, flags, memory_order_relaxed);
	atomic_store_explicit(&C.mask, mask, memory_order_relaxed);
	atomic_store_explicit(&C.restorer, restorer, memory_order_relaxed);
}

NO_TSAN static void disp_out(uintptr_t handler, int flags, uint64_t mask, uintptr_t restorer, struct sigaction *old)
{
	memset(old, 0, sizeof *old);
	old->sa_handler = (__sighandler_t)handler;
	old->sa_flags = flags;
	memcpy(&old->sa_mask, &mask, sizeof mask);
	old->sa_restorer = (void (*)(void))restorer;
}

NO_TSAN static uint64_t mask_word(const sigset_t *set)
{
	uint64_t m;
	memcpy(&m, set, sizeof m);
	return m;
}

NO_TSAN int col_sig_own(int sig, const struct sigaction *act)
{
	if (!is_rt(sig)) {
		errno = EINVAL;
		return -1;
	}
	int cur = atomic_load(&C.sig);
	if (cur && cur != sig) {
		errno = EBUSY;
		return -1;
	}
	if (cur)
		return 0;
	sigset_t saved;
	lock(&saved);
	struct sigaction old, mine;
	int rc = col_sig_real(sig, act, &old);
	if (rc == 0) {
		/* What libc puts in sa_restorer: the program reads it back with its handler. */
		if (col_sig_real(sig, NULL, &mine) == 0 && (mine.sa_flags & SA_RESTORER)) {
			C.libc_flags = SA_RESTORER;
			C.libc_restorer = (uintptr_t)mine.sa_restorer;
		}
		disp_write((uintptr_t)old.sa_handler, old.sa_flags, mask_word(&old.sa_mask), (uintptr_t)old.sa_restorer);
		atomic_store_explicit(&C.sig, sig, memory_order_release);
	}
	int saved_errno = errno;
	unlock(&saved);
	errno = saved_errno;
	return rc;
}

/*
 * The wrapper. On the owned signal: the program's disposition, read or replaced. On the
 * other real-time signals while fennec owns none yet: the real call, under the lock, so
 * that it cannot replace fennec's handler being installed meanwhile. Anything else goes
 * straight through. (libc's own __sigaction is not wrapped: programs do not call it.)
 */
NO_TSAN static int chain_sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	int owned = atomic_load_explicit(&C.sig, memory_order_acquire);
	if (sig != owned && (owned || !act || !is_rt(sig)))
		return col_sig_real(sig, act, old);
	if (!act) {
		disp d;
		disp_read(&d);
		if (old)
			disp_out(d.handler, d.flags, d.mask, d.restorer, old);
		return 0;
	}
	struct sigaction a = *act; /* act may be old */
	sigset_t saved;
	lock(&saved);
	int rc = 0;
	if (atomic_load_explicit(&C.sig, memory_order_relaxed) == sig) {
		if (old)
			disp_out(atomic_load_explicit(&C.handler, memory_order_relaxed),
				 atomic_load_explicit(&C.flags, memory_order_relaxed),
				 atomic_load_explicit(&C.mask, memory_order_relaxed),
				 atomic_load_explicit(&C.restorer, memory_order_relaxed), old);
		/* As the kernel keeps it: libc's restorer, SIGKILL and SIGSTOP never masked. */
		int flags = a.sa_flags | C.libc_flags;
		uintptr_t restorer = C.libc_flags ? C.libc_restorer : (uintptr_t)a.sa_restorer;
		disp_write((uintptr_t)a.sa_handler, flags & UAPI_FLAGS,
			   mask_word(&a.sa_mask) & ~(BIT(SIGKILL) | BIT(SIGSTOP)), restorer);
	} else {
		rc = col_sig_real(sig, &a, old);
	}
	int saved_errno = errno;
	unlock(&saved);
	errno = saved_errno;
	return rc;
}

API int sigaction(int sig, const struct sigaction *act, struct sigaction *old)
{
	return chain_sigaction(sig, act, old);
}

/* ---- forwarding ---- */

/* The default action of a real-time signal: the process ends, killed by it. */
NO_TSAN static void die_of(int sig)
{
	sigset_t saved;
	lock(&saved);
	struct sigaction dfl;
	memset(&dfl, 0, sizeof dfl);
	dfl.sa_handler = SIG_DFL;
	sigemptyset(&dfl.sa_mask);
	col_sig_real(sig, &dfl, NULL);
	unlock(&saved);
	/* Pending until the handler returns and the interrupted code's mask is back. */
	syscall(SYS_tgkill, getpid(), (pid_t)syscall(SYS_gettid), sig);
}

/* SA_RESETHAND: the disposition read in `d` becomes SIG_DFL, flags and mask kept (as the
 * kernel does), unless the program changed it meanwhile. */
NO_TSAN static void reset_hand(const disp *d)
{
	sigset_t saved;
	lock(&saved);
	if (atomic_load_explicit(&C.seq, memory_order_relaxed) == d->seq + 1)
		atomic_store_explicit(&C.handler, (uintptr_t)SIG_DFL, memory_order_relaxed);
	unlock(&saved);
}

NO_TSAN void col_sig_forward(int sig, siginfo_t *si, void *ucontext)
{
	disp d;
	disp_read(&d);
	if (d.handler == (uintptr_t)SIG_IGN)
		return;
	if (d.handler == (uintptr_t)SIG_DFL) {
		die_of(sig);
		return;
	}
	if (d.flags & SA_RESETHAND)
		reset_hand(&d);
	/* The mask the program's handler would run with: the interrupted code's, its sa_mask,
	 * and the signal itself unless SA_NODEFER. */
	sigset_t m, prev;
	const ucontext_t *uc = ucontext;
	if (uc)
		m = uc->uc_sigmask;
	else
		pthread_sigmask(SIG_SETMASK, NULL, &m);
	uint64_t w = mask_word(&m) | d.mask;
	if (!(d.flags & SA_NODEFER))
		w |= BIT(sig);
	memcpy(&m, &w, sizeof w);
	pthread_sigmask(SIG_SETMASK, &m, &prev);
	if (d.flags & SA_SIGINFO)
		((void (*)(int, siginfo_t *, void *))d.handler)(sig, si, ucontext);
	else
		((void (*)(int))d.handler)(sig);
	pthread_sigmask(SIG_SETMASK, &prev, NULL);
}

/* ---- the other ways to set a disposition ---- */

/* glibc's signal() family, for a real-time signal: through sigaction() above. */
NO_TSAN static __sighandler_t set_handler(int sig, __sighandler_t h, int flags, int mask_self)
{
	if (h == SIG_ERR || sig < 1 || sig >= NSIG) {
		errno = EINVAL;
		return SIG_ERR;
	}
	struct sigaction act, old;
	memset(&act, 0, sizeof act);
	act.sa_handler = h;
	sigemptyset(&act.sa_mask);
	if (mask_self)
		sigaddset(&act.sa_mask, sig);
	act.sa_flags = flags;
	if (chain_sigaction(sig, &act, &old) < 0)
		return SIG_ERR;
	return old.sa_handler;
}

/* BSD semantics, as glibc's signal(): SA_RESTART unless siginterrupt() said otherwise. */
NO_TSAN static __sighandler_t bsd_set(int sig, __sighandler_t h)
{
	int intr = (atomic_load(&C.intr) & BIT(sig)) != 0;
	return set_handler(sig, h, intr ? 0 : SA_RESTART, 1);
}

/* Non-real-time signals (never fennec's) go to the next definition, once looked up. */
#define NEXT(field, sig) (!is_rt(sig) ? atomic_load_explicit(&R.field, memory_order_acquire) : NULL)

API __sighandler_t signal(int sig, __sighandler_t h)
{
	signal_fn f = NEXT(signal, sig);
	return f ? f(sig, h) : bsd_set(sig, h);
}

API __sighandler_t bsd_signal(int sig, __sighandler_t h)
{
	signal_fn f = NEXT(bsd_signal, sig);
	return f ? f(sig, h) : bsd_set(sig, h);
}

API __sighandler_t ssignal(int sig, __sighandler_t h)
{
	signal_fn f = NEXT(ssignal, sig);
	return f ? f(sig, h) : bsd_set(sig, h);
}

/* System V semantics: reset on delivery, not masked while it runs, not restarting. */
API __sighandler_t sysv_signal(int sig, __sighandler_t h)
{
	signal_fn f = NEXT(sysv_signal, sig);
	return f ? f(sig, h) : set_handler(sig, h, SA_RESETHAND | SA_NODEFER, 0);
}

API __sighandler_t __sysv_signal(int sig, __sighandler_t h)
{
	return sysv_signal(sig, h);
}

API __sighandler_t sigset(int sig, __sighandler_t how)
{
	signal_fn f = NEXT(sigset, sig);
	if (f)
		return f(sig, how);
	if (how == SIG_ERR || sig < 1 || sig >= NSIG) {
		errno = EINVAL;
		return SIG_ERR;
	}
	sigset_t set, oset;
	sigemptyset(&set);
	sigaddset(&set, sig);
	if (how == SIG_HOLD) {
		if (pthread_sigmask(SIG_BLOCK, &set, &oset) != 0)
			return SIG_ERR;
		if (sigismember(&oset, sig))
			return SIG_HOLD;
		struct sigaction old;
		if (chain_sigaction(sig, NULL, &old) < 0)
			return SIG_ERR;
		return old.sa_handler;
	}
	__sighandler_t prev = set_handler(sig, how, 0, 0);
	if (prev == SIG_ERR || pthread_sigmask(SIG_UNBLOCK, &set, &oset) != 0)
		return SIG_ERR;
	return sigismember(&oset, sig) ? SIG_HOLD : prev;
}

API int sigignore(int sig)
{
	sigignore_fn f = NEXT(sigignore, sig);
	if (f)
		return f(sig);
	return set_handler(sig, SIG_IGN, 0, 0) == SIG_ERR ? -1 : 0;
}

API int siginterrupt(int sig, int interrupt)
{
	siginterrupt_fn f = NEXT(siginterrupt, sig);
	if (f)
		return f(sig, interrupt);
	if (sig < 1 || sig >= NSIG) {
		errno = EINVAL;
		return -1;
	}
	struct sigaction act;
	if (chain_sigaction(sig, NULL, &act) < 0)
		return -1;
	if (is_rt(sig)) {
		if (interrupt)
			atomic_fetch_or(&C.intr, BIT(sig));
		else
			atomic_fetch_and(&C.intr, ~BIT(sig));
	}
	if (interrupt)
		act.sa_flags &= ~SA_RESTART;
	else
		act.sa_flags |= SA_RESTART;
	return chain_sigaction(sig, &act, NULL);
}

/*
 * The next definitions, looked up before any other constructor of libfennec runs (the
 * session's may start sampling, and dlsym is not async-signal-safe). Until then, libc's
 * __sigaction, and the emulations above for the rest.
 */
NO_TSAN __attribute__((constructor(101))) static void sigchain_init(void)
{
	atomic_store(&R.sigaction, (sigaction_fn)dlsym(RTLD_NEXT, "sigaction"));
	atomic_store(&R.signal, (signal_fn)dlsym(RTLD_NEXT, "signal"));
	atomic_store(&R.bsd_signal, (signal_fn)dlsym(RTLD_NEXT, "bsd_signal"));
	atomic_store(&R.ssignal, (signal_fn)dlsym(RTLD_NEXT, "ssignal"));
	atomic_store(&R.sysv_signal, (signal_fn)dlsym(RTLD_NEXT, "sysv_signal"));
	atomic_store(&R.sigset, (signal_fn)dlsym(RTLD_NEXT, "sigset"));
	atomic_store(&R.sigignore, (sigignore_fn)dlsym(RTLD_NEXT, "sigignore"));
	atomic_store(&R.siginterrupt, (siginterrupt_fn)dlsym(RTLD_NEXT, "siginterrupt"));
	pthread_atfork(fork_prepare, fork_done, fork_done);
}

/*
 * sigchain.h - the sampling signal, shared with the program (sigchain.c): fennec's handler
 * stays installed, and the program's sigaction() on that signal records its disposition
 * instead, which fennec's handler runs for every signal that is not fennec's own.
 */
#ifndef FENNEC_SIGCHAIN_H
#define FENNEC_SIGCHAIN_H

#include <signal.h>

/* Install `act` (fennec's handler) on `sig` for real and take the signal over: what was
 * installed becomes the program's disposition, which its later sigaction() calls on `sig`
 * read and replace. One signal at most, for the life of the process (a second call for
 * another signal fails). 0, or -1 with errno. */
int col_sig_own(int sig, const struct sigaction *act);

/* From fennec's handler, for a signal on the owned `sig` that fennec did not send: do
 * what the program's disposition says (its handler, with its mask and flags; nothing for
 * SIG_IGN; for SIG_DFL, the default action of a real-time signal: the process ends, killed
 * by `sig`). Async-signal-safe: no allocation, no lock a handler could wait on forever. */
void col_sig_forward(int sig, siginfo_t *si, void *ucontext);

/* The next sigaction (the sanitizer's, else libc's), whichever signal. */
int col_sig_real(int sig, const struct sigaction *act, struct sigaction *old);

#endif

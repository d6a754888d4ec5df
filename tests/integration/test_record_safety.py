"""fennec record and what it must not destroy or lose: the file at its output path (an
earlier recording kept when the program cannot run; the program itself or any other file
that is not a recording refused), signals meant for the program (passed on once, never
the death of fennec record), and the low descriptor numbers. Fixtures: forker.c, empty.c,
fd_census.c; a signal counter built here."""

import filecmp
import json
import os
import shutil
import signal
import stat

from helpers import (SANITIZER, SLOW, assert_eq, assert_true, base_env, collector, fennec_bin, fixture, libfennec, record, run,
                     wait_for)


def record_raw(out, *prog, quiet=False):
    env = base_env({"FENNEC_LIB": libfennec()})
    return run([fennec_bin(), "record"] + (["-q"] if quiet else []) + ["-o", out, "--"] + list(prog), env=env,
               timeout_s=60)


def test_output_kept_when_the_program_cannot_run():
    """A program that is not there, or not executable, is said (exit status 127 or 126, as
    a shell gives) before anything at the output path is touched: the earlier recording and
    its process files are kept byte for byte (they were removed before the exec failed)."""
    _, path = record("forker", 2, out="keep.fnc")
    files = sorted(n for n in os.listdir(".") if n.startswith("keep.fnc"))
    assert_true(len(files) >= 2, "forker's recording has process files beside keep.fnc: %s" % files)
    os.mkdir("orig")
    for n in files:
        shutil.copy(n, os.path.join("orig", n))
    with open("noexec", "w") as f:
        f.write("#!/bin/sh\nexit 0\n")
    os.chmod("noexec", 0o644)
    for prog, rc in (("/nonexistent/prog", 127), ("no-such-program-in-path", 127), ("./noexec", 126),
                     ("/", 126)):
        r = record_raw("keep.fnc", prog)
        assert_true(r.returncode == rc and prog in r.stderr and "cannot run" in r.stderr,
                    "record -- %s: expected exit %d saying it cannot run it, got %s" % (prog, rc, r.describe()))
        assert_eq(sorted(n for n in os.listdir(".") if n.startswith("keep.fnc")), files, "files after -- %s" % prog)
        for n in files:
            assert_true(filecmp.cmp(n, os.path.join("orig", n), shallow=False), "%s kept as it was (-- %s)" % (n, prog))
    # a program found in PATH, and a recording replaced by the next one
    r = record_raw("keep.fnc", "true", quiet=True)
    assert_eq(r.returncode, 0, "record -- true: %s" % r.describe())
    assert_true(not filecmp.cmp("keep.fnc", os.path.join("orig", "keep.fnc"), shallow=False),
                "the earlier recording is replaced by the new one")
    assert_eq(sorted(n for n in os.listdir(".") if n.startswith("keep.fnc")), ["keep.fnc"],
              "the earlier recording's process files are removed")


def test_output_that_is_not_a_recording_is_refused():
    """-o naming the program being run (it deleted the binary, then failed to run it), or any
    existing file that is not a recording (a C source was silently overwritten): refused, exit
    status 2, the file named and left as it was. An empty file is recorded over."""
    shutil.copy("/bin/true", "prog")  # a fixture copied here would lose its rpath to libfennec
    with open("src_copy.c", "w") as f:
        f.write("int main(void) { return 0; }\n")
    shutil.copy("prog", "prog.orig")
    shutil.copy("src_copy.c", "src.orig")
    for out, prog, words in (("prog", "./prog", "program being run"), (os.path.abspath("prog"), "./prog", "program"),
                             ("src_copy.c", "true", "not a fennec recording"),
                             ("src_copy.c", fixture("empty"), "not a fennec recording")):
        r = record_raw(out, prog, quiet=True)
        assert_true(r.returncode == 2 and os.path.basename(out) in r.stderr and words in r.stderr,
                    "record -o %s -- %s: expected exit 2 naming the file (%s), got %s" % (out, prog, words, r.describe()))
    assert_true(filecmp.cmp("prog", "prog.orig", shallow=False) and os.stat("prog").st_mode & stat.S_IXUSR,
                "the program is left as it was")
    assert_true(filecmp.cmp("src_copy.c", "src.orig", shallow=False), "the source file is left as it was")
    r = run(["./prog"])
    assert_eq(r.returncode, 0, "the program still runs")
    open("empty.fnc", "w").close()
    r = record_raw("empty.fnc", fixture("empty"), quiet=True)
    assert_eq(r.returncode, 0, "record over an empty file: %s" % r.describe())
    with open("empty.fnc", "rb") as f:
        assert_eq(f.read(4), b"\x89FNC", "empty.fnc now holds a recording")


SIGCOUNT = r"""
#include <errno.h>
#include <signal.h>
#include <stdio.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

static const int sigs[] = {SIGHUP, SIGINT, SIGQUIT, SIGTERM, SIGUSR1, SIGUSR2, SIGALRM};
static volatile sig_atomic_t got[65];

/* Slow, so that a second copy of a signal arriving a little after the first is counted,
 * not merged into it while pending. */
static void on(int s)
{
	struct timespec t = {0, 50 * 1000 * 1000};
	got[s]++;
	nanosleep(&t, NULL);
}

/* Says its pid and the dispositions and mask it started with, counts the signals above
 * until its standard input closes, prints the counts and exits 3. */
int main(void)
{
	sigset_t mask;
	sigprocmask(SIG_SETMASK, NULL, &mask);
	printf("pid %d start", (int)getpid());
	for (unsigned i = 0; i < sizeof sigs / sizeof *sigs; i++) {
		struct sigaction sa;
		sigaction(sigs[i], NULL, &sa);
		printf(" %d:%s%s", sigs[i], sa.sa_handler == SIG_IGN ? "ign" : sa.sa_handler == SIG_DFL ? "dfl" : "caught",
		       sigismember(&mask, sigs[i]) ? ",blocked" : "");
		signal(sigs[i], on);
	}
	sigprocmask(SIG_UNBLOCK, &mask, NULL);
	printf("\n");
	fflush(stdout);
	char c;
	while (read(0, &c, 1) != 0)
		if (errno != EINTR)
			break;
	for (unsigned i = 0; i < sizeof sigs / sizeof *sigs; i++)
		printf("%d=%d ", sigs[i], (int)got[sigs[i]]);
	printf("\n");
	return 3;
}
"""


def build_sigcount():
    with open("sigcount.c", "w") as f:
        f.write(SIGCOUNT)
    run([os.environ.get("CC", "cc"), "-O1", "sigcount.c", "-o", "sigcount"], check=True)
    return os.path.abspath("sigcount")


class Counted:
    """`fennec record -- sigcount` in a session of its own (so that a signal to its process
    group reaches fennec record and what it started, nothing else)."""

    def __init__(self, prog, out="sig.fnc", preexec=None):
        import subprocess
        cmd = [fennec_bin(), "record", "-q", "-o", out, "--", prog]
        self.p = subprocess.Popen(cmd, env=base_env({"FENNEC_LIB": libfennec()}), stdin=subprocess.PIPE,
                                  stdout=subprocess.PIPE, start_new_session=True, preexec_fn=preexec)
        line = self.p.stdout.readline().decode()
        assert_true(line.startswith("pid "), "sigcount started: %r" % line)
        self.pid = int(line.split()[1])
        self.start = dict(w.split(":", 1) for w in line.split()[3:])

    def finish(self):
        """Close the program's input; (its counts by signal number, fennec record's status)."""
        import time
        time.sleep(0.3 * SLOW)  # what was sent is delivered, and a second copy would be
        self.p.stdin.close()
        out = self.p.stdout.read().decode()
        rc = self.p.wait(timeout=30 * SLOW)
        return {int(k): int(v) for k, v in (w.split("=") for w in out.split())}, rc

    def kill(self):
        if self.p.poll() is None:
            os.killpg(self.p.pid, signal.SIGKILL)
            self.p.wait()


SIGNALS = (signal.SIGTERM, signal.SIGHUP, signal.SIGINT, signal.SIGQUIT, signal.SIGUSR1, signal.SIGUSR2, signal.SIGALRM)


def test_signals_reach_the_program_once():
    """A signal sent to fennec record's process group (os.killpg), or to fennec record alone
    (os.kill), reaches the program once: SIGTERM and SIGHUP to the group counted 2 (the
    program got them from the group and again from fennec record), SIGINT and SIGQUIT to
    fennec record alone never reached it. fennec record dies of none of them (SIGUSR1,
    SIGUSR2 and SIGALRM to the group killed it, the program running on, its exit status
    lost) and exits with the program's status."""
    prog = build_sigcount()
    for send in (os.killpg, os.kill):
        for sig in SIGNALS:
            c = Counted(prog)
            try:
                send(c.p.pid, sig)
                counts, rc = c.finish()
            finally:
                c.kill()
            what = "%s(fennec record, %s)" % (send.__name__, sig.name)
            assert_eq(rc, 3, "%s: fennec record's exit status (the program's)" % what)
            assert_eq(counts, {int(s): int(s == sig) for s in SIGNALS}, "%s: the program's counts" % what)


def test_record_view_passes_signals_on_once_and_dies_of_none():
    """fennec record --view serves the dashboard from a process above the recording: a
    signal sent to its process group, or to it alone, reaches the program once, and the
    server dies of none of them (SIGUSR1 to the group killed it, the dashboard and the exit
    status lost); it goes on serving the finished recording, and exits with the program's
    status when told to stop after it."""
    import subprocess
    import time
    prog = build_sigcount()
    env = base_env({"FENNEC_LIB": libfennec()})
    for send in (os.killpg, os.kill):
        for sig in SIGNALS:
            what = "%s(fennec record --view, %s)" % (send.__name__, sig.name)
            p = subprocess.Popen([fennec_bin(), "record", "--view=0", "-q", "-o", "sig.fnc", "--", prog], env=env,
                                 stdin=subprocess.PIPE, stdout=subprocess.PIPE, start_new_session=True)
            try:
                lines = []
                while not (any(w.startswith("pid ") for w in lines) and any("serving" in w for w in lines)):
                    lines.append(p.stdout.readline().decode())
                    assert_true(lines[-1], "%s: the server and the program started: %r" % (what, lines))
                send(p.pid, sig)
                time.sleep(0.3 * SLOW)  # what was sent is delivered, and a second copy would be
                p.stdin.close()
                while "the recording ended" not in lines[-1]:
                    lines.append(p.stdout.readline().decode())
                    assert_true(lines[-1], "%s: the recording's end is said: %r" % (what, lines))
                assert_eq(p.poll(), None, "%s: the server still runs" % what)
                p.send_signal(signal.SIGTERM)
                rc = p.wait(timeout=30 * SLOW)
            finally:
                if p.poll() is None:
                    os.killpg(p.pid, signal.SIGKILL)
                    p.wait()
            counts = [w for w in lines if "=" in w and not w.startswith(("pid ", "fennec record:"))]
            assert_eq(rc, 3, "%s: the server's exit status (the program's)" % what)
            assert_eq(len(counts), 1, "%s: the program's counts line: %r" % (what, lines))
            got = {int(k): int(v) for k, v in (w.split("=") for w in counts[0].split())}
            assert_eq(got, {int(s): int(s == sig) for s in SIGNALS}, "%s: the program's counts" % what)


def test_sigint_to_fennec_record_ends_the_program():
    """SIGINT to fennec record alone ends a program that does not catch it, as it would have
    ended without fennec (it was ignored, and `sleep 30` ran on); fennec record's status is
    the program's, killed by SIGINT."""
    import subprocess
    import time
    env = base_env({"FENNEC_LIB": libfennec()})
    # SIGINT at its default, as a terminal gives it: a runner started in the background
    # by a non-interactive shell ignores it, and fennec record keeps an ignored SIGINT so
    def dfl():
        signal.signal(signal.SIGINT, signal.SIG_DFL)
    p = subprocess.Popen([fennec_bin(), "record", "-q", "-o", "sleep.fnc", "--", "sleep", "30"], env=env,
                         start_new_session=True, preexec_fn=dfl)
    try:
        time.sleep(0.5 * SLOW)
        os.kill(p.pid, signal.SIGINT)
        rc = p.wait(timeout=10 * SLOW)
    finally:
        if p.poll() is None:
            os.killpg(p.pid, signal.SIGKILL)
            p.wait()
    assert_eq(rc, -signal.SIGINT, "fennec record's status after SIGINT")


def test_program_starts_with_the_signal_state_fennec_record_was_given():
    """While the program runs fennec record catches signals and blocks them for a moment;
    the program starts with the dispositions and the mask fennec record started with (an
    ignored SIGUSR1 and a blocked SIGUSR2 stay so, the others default), as it would have
    without fennec."""
    prog = build_sigcount()

    def preexec():
        for s in SIGNALS:  # as given, whatever the runner inherited (nohup ignores SIGHUP)
            signal.signal(s, signal.SIG_DFL)
        signal.signal(signal.SIGUSR1, signal.SIG_IGN)
        signal.pthread_sigmask(signal.SIG_BLOCK, {signal.SIGUSR2})
    c = Counted(prog, preexec=preexec)
    try:
        start = c.start
        c.finish()
    finally:
        c.kill()
    expect = {str(int(s)): "dfl" for s in SIGNALS}
    expect[str(int(signal.SIGUSR1))] = "ign"
    expect[str(int(signal.SIGUSR2))] = "dfl,blocked"
    assert_eq(start, expect, "the program's dispositions and mask at its start")


def test_program_follows_fennec_record_stopped_continued_or_killed():
    """The program runs in a process group of its own, away from a terminal: SIGTSTP and
    SIGCONT to fennec record's group stop and continue it through fennec record, and a
    SIGKILL to the group, which fennec record cannot pass on, still ends it (with fennec
    record) rather than leave it running alone."""
    import time
    prog = build_sigcount()

    def state(pid):
        try:
            with open("/proc/%d/stat" % pid) as f:
                s = f.read()
            return s[s.rindex(")") + 2]
        except OSError:
            return None
    c = Counted(prog)
    try:
        os.killpg(c.p.pid, signal.SIGTSTP)
        wait_for(lambda: state(c.pid) == "T", 10, "the program to stop")
        os.killpg(c.p.pid, signal.SIGCONT)
        wait_for(lambda: state(c.pid) in ("S", "R"), 10, "the program to continue")
        assert_eq(c.p.poll(), None, "fennec record still runs")
        os.killpg(c.p.pid, signal.SIGKILL)
        c.p.wait(timeout=10 * SLOW)
        wait_for(lambda: state(c.pid) in (None, "Z"), 10, "the program to end with fennec record")
    finally:
        c.kill()
        if state(c.pid) not in (None, "Z"):
            os.kill(c.pid, signal.SIGKILL)


@collector
def test_fennecs_descriptors_are_placed_high():
    """Every descriptor a recording adds to the program is at or above three quarters of
    RLIMIT_NOFILE (docs/api.md, "What recording costs a program"), in every mode, with
    three threads: the file, statm, the perf counters or the wall sampler's /proc files,
    and libunwind's pipe. That pipe took the program's lowest free numbers (3 and 4, then
    5 and 6 for the remote unwinder) until 2026-12."""
    bare = json.loads(run([fixture("fd_census"), "3"], check=True).stdout)
    have = {fd for fd, _ in bare["fds"]}
    base = bare["nofile"] * 3 // 4
    for opts in (("--sample=off", "--memory=off"), ("--sample=off",), (), ("--sample=wall",),
                 ("--memory=full",)):
        what = " ".join(opts) or "the default"
        r, path = record("fd_census", 3, out="fd.fnc", opts=opts)
        got = json.loads(r.stdout.strip().splitlines()[-1])
        ours = [(fd, t) for fd, t in got["fds"] if fd not in have]
        low = [(fd, t) for fd, t in ours if fd < base]
        assert_eq(low, [], "%s: fennec's descriptors below %d (all of them: %s)" % (what, base, ours))
        assert_true(any(t.endswith(".fnc") for _, t in ours), "%s: the recording is not among %s" % (what, ours))
        # the unwinder ran (the heap profile's, or the sampler's): its pipe is there, high;
        # the sanitizer builds have no heap profile, and no unwinding in their handlers
        if not SANITIZER and opts != ("--sample=off", "--memory=off"):
            assert_true(sum(t.startswith("pipe:") for _, t in ours) >= 2,
                        "%s: libunwind's pipe is not among fennec's descriptors %s" % (what, ours))

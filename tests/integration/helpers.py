"""Shared helpers for the integration tests (tests/integration/test_*.py).

Every test runs in its own temporary directory (the current directory when the test
function is called) and in its own process; see tests/run.py.

Environment: FENNEC_BUILD (build directory, default "build"), FENNEC_SANITIZER ("asan",
"tsan" or empty).
"""

import json
import os
import re
import signal
import subprocess
import time

REPO = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
BUILD = os.path.join(REPO, os.environ.get("FENNEC_BUILD") or "build")
SANITIZER = os.environ.get("FENNEC_SANITIZER", "")
# Sanitizers slow programs down; timeouts are multiplied by this.
SLOW = {"asan": 3, "tsan": 5}.get(SANITIZER, 1)

MS = 1_000_000
SEC = 1_000_000_000


class Skip(Exception):
    """Raise to skip a test, with the reason."""


def skip_under(sanitizer, reason):
    """Skip the calling test when running under this sanitizer ("asan" or "tsan")."""
    if SANITIZER == sanitizer:
        raise Skip("under %s: %s" % (sanitizer, reason))


TSAN_FORK = ("TSan cannot follow a multi-threaded process's fork child that starts "
             "threads (the collector's writer): 'dup thread with used id'")


# --- markers (read by tests/run.py) ----------------------------------------------------

def collector(fn):
    """Mark a test as exercising the collector (threads, fork, signals): run by
    `tests/run.py --collector-only`, which is what the TSan build runs."""
    fn.collector = True
    return fn


def timing(fn):
    """Mark a test whose assertions are on wall-clock durations of busy loops: a stall of
    the (virtual) machine can break them, so tests/run.py runs a failed one once more and
    reports the first failure next to the pass."""
    fn.retries = 1
    return fn


def statistical(fn):
    """Mark a test whose assertions compare sampled shares with measured ones within a
    tolerance that binomial noise alone exceeds now and then: 3 points is 2.7 sigma of 2,000
    samples at a share of one half, about 1 check in 140 (test_analysis_stripped_binary
    failed so in CI, 52.40 % against 49.39 % +- 3). tests/run.py runs a failed one once more
    (both failing by chance: about 1 in 20,000) and reports the first failure next to the
    pass."""
    fn.retries = 1
    fn.why_retry = "statistical"
    return fn


def timeout(seconds):
    """Per-test timeout in seconds (before the sanitizer slow-down factor)."""
    def mark(fn):
        fn.timeout = seconds
        return fn
    return mark


# --- paths ------------------------------------------------------------------------------

def fennec_bin():
    p = os.path.join(BUILD, "bin", "fennec")
    if os.path.exists(p):
        return p
    # The TSan build (make test-tsan) builds the collector and fixtures only; the CLI
    # comes from the plain build.
    plain = os.path.join(REPO, "build", "bin", "fennec")
    if SANITIZER == "tsan" and os.path.exists(plain):
        return plain
    raise AssertionError("fennec binary not built: %s" % p)


def libfennec():
    return os.path.join(BUILD, "lib", "libfennec.so")


def fixture(name):
    p = os.path.join(BUILD, "fixtures", name)
    if not os.path.exists(p):
        raise AssertionError("fixture not built: %s (make fixtures)" % p)
    return p


# --- environment ------------------------------------------------------------------------

def base_env(extra=None):
    """The environment for fennec and the programs it records."""
    env = {k: v for k, v in os.environ.items()
           if not (k.startswith("FENNEC_") and k not in ("FENNEC_BUILD", "FENNEC_SANITIZER"))
           and k not in ("LD_PRELOAD", "RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK",
                         "SLURM_PROCID")}
    if SANITIZER == "asan":
        env["ASAN_OPTIONS"] = ("verify_asan_link_order=0:detect_leaks=0:abort_on_error=0:"
                               "print_legend=0:halt_on_error=1")
        env["UBSAN_OPTIONS"] = "halt_on_error=1:print_stacktrace=1"
    elif SANITIZER == "tsan":
        # die_after_fork=0: the collector starts its writer thread again in a fork child
        env["TSAN_OPTIONS"] = ("halt_on_error=1:second_deadlock_stack=1:report_signal_unsafe=0:"
                               "die_after_fork=0:suppressions=" + os.path.join(REPO, "tests", "tsan.supp"))
    if extra:
        env.update(extra)
    return env


# --- running ----------------------------------------------------------------------------

class Result:
    def __init__(self, cmd, returncode, stdout, stderr, elapsed):
        self.cmd = cmd
        self.returncode = returncode
        self.stdout = stdout
        self.stderr = stderr
        self.elapsed = elapsed

    def describe(self):
        def tail(s, n=1500):
            s = s.strip()
            return s if len(s) <= n else "..." + s[-n:]
        return "command: %s\n  exit: %s\n  stdout: %s\n  stderr: %s" % (
            " ".join(self.cmd), status_text(self.returncode), tail(self.stdout),
            tail(self.stderr))


def status_text(rc):
    if rc is None:
        return "none"
    if rc < 0:
        try:
            return "killed by %s (%d)" % (signal.Signals(-rc).name, rc)
        except ValueError:
            return "killed by signal %d" % -rc
    return "exit %d" % rc


def run(cmd, env=None, timeout_s=120, check=False, input_bytes=None):
    t0 = time.monotonic()
    try:
        p = subprocess.run(cmd, env=env if env is not None else base_env(),
                           stdout=subprocess.PIPE, stderr=subprocess.PIPE,
                           input=input_bytes, timeout=timeout_s * SLOW)
    except subprocess.TimeoutExpired as e:
        raise AssertionError("timed out after %ss: %s" % (timeout_s * SLOW, " ".join(cmd)))
    r = Result(cmd, p.returncode, p.stdout.decode(errors="replace"),
               p.stderr.decode(errors="replace"), time.monotonic() - t0)
    if check and r.returncode != 0:
        raise AssertionError("command failed\n  " + r.describe())
    assert_no_sanitizer_report(r)
    return r


def without_library(soname, cmd):
    """cmd run where the shared library `soname` cannot be loaded: in a mount namespace of
    its own (unshare -m, which needs root), /dev/null bound over the library's file.
    Skips the test where that is not possible."""
    path = None
    for line in subprocess.run(["/sbin/ldconfig", "-p"], stdout=subprocess.PIPE).stdout.decode().splitlines():
        if line.strip().startswith(soname + " ") and "=>" in line:
            path = os.path.realpath(line.split("=>")[1].strip())
            break
    if not path:
        raise Skip("%s is not installed" % soname)
    if subprocess.run(["unshare", "-m", "true"], stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL).returncode:
        raise Skip("cannot make a mount namespace (unshare -m) to hide %s" % soname)
    return ["unshare", "-m", "sh", "-c", 'mount --bind /dev/null "$0" && exec "$@"', path] + [str(c) for c in cmd]


def assert_no_sanitizer_report(r):
    for marker in ("ERROR: AddressSanitizer", "WARNING: ThreadSanitizer",
                   "ERROR: LeakSanitizer", "runtime error:", "ERROR: ThreadSanitizer"):
        if marker in r.stderr:
            raise AssertionError("sanitizer report (%s)\n  %s" % (marker, r.describe()))


def record_command(exe, args, out="run.fnc", opts=(), env=None):
    """(argv, env) for `fennec record -o OUT [opts] -- exe args`. FENNEC_LIB names this
    build's libfennec.so: the TSan build has no CLI of its own and borrows the plain
    build's, which would otherwise preload the plain collector."""
    env = dict(env if env is not None else base_env())
    env["FENNEC_LIB"] = libfennec()
    cmd = [fennec_bin(), "record"]
    if out is not None:
        cmd += ["-o", out]
    return cmd + list(opts) + ["--", exe] + [str(a) for a in args], env


def record(prog, *args, out="run.fnc", opts=(), env=None, expect_rc=0, timeout_s=120):
    """Record a fixture (or an absolute program path) with `fennec record`. Checks the
    exit status (expect_rc None: no check) and that OUT exists.
    Returns (Result, absolute path of OUT)."""
    exe = prog if os.path.isabs(prog) else fixture(prog)
    cmd, env = record_command(exe, args, out=out, opts=opts, env=env)
    r = run(cmd, env=env, timeout_s=timeout_s)
    if expect_rc is not None and r.returncode != expect_rc:
        raise AssertionError("fennec record: expected %s, got %s\n  %s" % (
            status_text(expect_rc), status_text(r.returncode), r.describe()))
    path = os.path.abspath(out if out is not None else "fennec.fnc")
    if expect_rc is not None and not os.path.exists(path):
        raise AssertionError("fennec record wrote no %s\n  %s" % (path, r.describe()))
    return r, path


def analyze_raw(path, *opts, timeout_s=120, env=None):
    return run([fennec_bin(), "analyze", str(path)] + [str(o) for o in opts],
               env=env, timeout_s=timeout_s)


def analyze(path, *opts, timeout_s=120):
    """`fennec analyze PATH --format json`, checked and parsed."""
    r = analyze_raw(path, "--format", "json", *opts, timeout_s=timeout_s)
    if r.returncode != 0:
        raise AssertionError("fennec analyze failed\n  " + r.describe())
    return parse_json(r.stdout, r)


def parse_json(text, r=None):
    try:
        doc = json.loads(text)
    except ValueError as e:
        raise AssertionError("output is not JSON (%s)\n  %s" % (
            e, r.describe() if r else text[:2000]))
    if not isinstance(doc, dict) or doc.get("schema") != "fennec.analysis/1":
        raise AssertionError("schema: expected 'fennec.analysis/1', got %r" % (
            doc.get("schema") if isinstance(doc, dict) else type(doc).__name__))
    return doc


def record_and_analyze(prog, *args, opts=(), analyze_opts=(), **kw):
    r, path = record(prog, *args, opts=opts, **kw)
    return analyze(path, *analyze_opts), path


# --- looking things up in a report ------------------------------------------------------

def region(report, path):
    """The region object with this path ("a/b"). Fails listing the paths there are."""
    for r in report.get("regions", []):
        if r.get("path") == path:
            return r
    raise AssertionError("no region %r in the report; regions: %s" % (
        path, [r.get("path") for r in report.get("regions", [])]))


def maybe_region(report, path):
    for r in report.get("regions", []):
        if r.get("path") == path:
            return r
    return None


def metric(report, name):
    for m in report.get("metrics", []):
        if m.get("name") == name:
            return m
    raise AssertionError("no metric %r in the report; metrics: %s" % (
        name, [m.get("name") for m in report.get("metrics", [])]))


# --- assertions -------------------------------------------------------------------------

def assert_eq(got, expected, what):
    if got != expected:
        raise AssertionError("%s: expected %r, got %r" % (what, expected, got))


def assert_close(got, expected, tol, what, unit=""):
    """|got - expected| <= tol (absolute)."""
    if got is None or not isinstance(got, (int, float)) or abs(got - expected) > tol:
        raise AssertionError("%s: expected %s%s +- %s, got %s%s" % (
            what, fmt(expected), unit, fmt(tol), fmt(got), unit))


def assert_rel(got, expected, rel, what, unit=""):
    """|got - expected| <= rel * |expected|."""
    if got is None or not isinstance(got, (int, float)) or \
            abs(got - expected) > rel * abs(expected):
        raise AssertionError("%s: expected %s%s +- %g%%, got %s%s" % (
            what, fmt(expected), unit, rel * 100, fmt(got), unit))


# Wall-clock durations made of busy loops on a shared machine: a preemption around a
# region's begin or end moves a few milliseconds between neighbours.
PREEMPT_SLACK = 10 * MS


def assert_duration(got, expected, what, calls=1, rel=0.02):
    """A duration built from `calls` busy-loop calls: within rel plus PREEMPT_SLACK spread
    over the calls (for a mean, pass the call count; for a total, leave calls=1)."""
    tol = rel * expected + PREEMPT_SLACK / calls
    if got is None or not isinstance(got, (int, float)) or abs(got - expected) > tol:
        raise AssertionError("%s: expected %s ns +- %s (%g%% + %g ms / %d), got %s ns" % (
            what, fmt(expected), fmt(tol), rel * 100, PREEMPT_SLACK / MS, calls, fmt(got)))


def assert_between(got, lo, hi, what, unit=""):
    if got is None or not isinstance(got, (int, float)) or not lo <= got <= hi:
        raise AssertionError("%s: expected between %s and %s%s, got %s%s" % (
            what, fmt(lo), fmt(hi), unit, fmt(got), unit))


def assert_true(cond, msg):
    if not cond:
        raise AssertionError(msg)


def fmt(x):
    if isinstance(x, float):
        return "%.6g" % x
    return repr(x)


def assert_clean_error(r, path, *words):
    """A rejected input: non-zero exit, not a signal, a message on stderr that names
    the file and contains each of `words` (case-insensitive)."""
    if r.returncode == 0:
        raise AssertionError("expected a non-zero exit for %s\n  %s" % (path, r.describe()))
    if r.returncode < 0 or r.returncode >= 128:
        raise AssertionError("crashed (%s) on %s\n  %s" % (
            status_text(r.returncode), path, r.describe()))
    msg = r.stderr + r.stdout
    if os.path.basename(str(path)) not in msg:
        raise AssertionError("error message does not name the file %s\n  %s" % (
            os.path.basename(str(path)), r.describe()))
    for w in words:
        if w.lower() not in msg.lower():
            raise AssertionError("error message lacks %r\n  %s" % (w, r.describe()))
    return msg


def numbers_in(text):
    return [int(x) for x in re.findall(r"(?<![\w.])(\d+)(?![\w.])", text)]


def wait_for(cond, timeout_s, what, interval=0.02):
    end = time.monotonic() + timeout_s * SLOW
    while time.monotonic() < end:
        v = cond()
        if v:
            return v
        time.sleep(interval)
    raise AssertionError("timed out after %ss waiting for %s" % (timeout_s * SLOW, what))


def descendants(pid):
    """Pids of all descendants of pid (from /proc)."""
    children = {}
    for d in os.listdir("/proc"):
        if not d.isdigit():
            continue
        try:
            with open("/proc/%s/stat" % d) as f:
                s = f.read()
            ppid = int(s[s.rindex(")") + 2:].split()[1])
        except (OSError, ValueError):
            continue
        children.setdefault(ppid, []).append(int(d))
    out, todo = [], [pid]
    while todo:
        p = todo.pop()
        for c in children.get(p, []):
            out.append(c)
            todo.append(c)
    return out


def exe_of(pid):
    try:
        return os.readlink("/proc/%d/exe" % pid)
    except OSError:
        return ""

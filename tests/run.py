#!/usr/bin/env python3
"""fennec test runner (Python 3 standard library only).

Runs the C unit test binary $FENNEC_BUILD/tests/unit if it exists, then every function
named test_* in tests/integration/test_*.py, each in its own subprocess and its own
temporary directory, with a per-test timeout. Prints one line per test:

    ok name (1.2s)
    FAIL name: reason
    skip name: reason

and ends with the line `N passed, N failed, N skipped`. A test marked @timing (its checks
are on wall-clock durations) or @statistical (sampled shares against measured ones) that
fails is run once more; a pass on retry is reported with the first failure. Exit status 1 if anything failed.

Options:
    --collector-only   only tests marked @collector (threads, fork, signals; the TSan run)
    -k SUBSTRING       only tests whose name (file.function) contains SUBSTRING
    --timeout S        default per-test timeout in seconds (default 120; tests may set
                       their own with @timeout; multiplied under sanitizers)
    --keep             keep the temporary directories (printed for failures)
Environment: FENNEC_BUILD (default build), FENNEC_SANITIZER (asan, tsan or empty).
"""

import argparse
import importlib.util
import json
import os
import re
import resource
import shutil
import signal
import subprocess
import sys
import tempfile
import time
import traceback

sys.dont_write_bytecode = True  # no __pycache__ in the source tree

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(HERE)
INTEGRATION = os.path.join(HERE, "integration")
SKIP_RC = 77


def load_module(path):
    name = os.path.splitext(os.path.basename(path))[0]
    if INTEGRATION not in sys.path:
        sys.path.insert(0, INTEGRATION)
    spec = importlib.util.spec_from_file_location(name, path)
    mod = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(mod)
    return mod


def discover():
    tests = []
    for fn in sorted(os.listdir(INTEGRATION)):
        if not (fn.startswith("test_") and fn.endswith(".py")):
            continue
        path = os.path.join(INTEGRATION, fn)
        mod = load_module(path)
        funcs = [(getattr(f, "__code__").co_firstlineno, n, f) for n, f in vars(mod).items()
                 if n.startswith("test_") and callable(f) and hasattr(f, "__code__")
                 and getattr(f, "__module__", None) == mod.__name__]
        for _, n, f in sorted(funcs):
            tests.append({"file": path, "func": n,
                          "name": "%s.%s" % (fn[:-3], n),
                          "collector": bool(getattr(f, "collector", False)),
                          "timeout": getattr(f, "timeout", None),
                          "retries": int(getattr(f, "retries", 0)),
                          "why_retry": getattr(f, "why_retry", "timing")})
    return tests


def child_main(path, func, result_path):
    """Runs one test in this process (the current directory is its temp dir)."""
    resource.setrlimit(resource.RLIMIT_CORE, (0, 0))
    result = {"status": "fail", "reason": "", "detail": ""}
    try:
        mod = load_module(path)
        helpers = sys.modules.get("helpers")
        skip_exc = getattr(helpers, "Skip", None) if helpers else None
        try:
            getattr(mod, func)()
            result["status"] = "ok"
        except Exception as e:  # noqa: BLE001 - report everything
            if skip_exc is not None and isinstance(e, skip_exc):
                result = {"status": "skip", "reason": str(e), "detail": ""}
            else:
                msg = str(e) or type(e).__name__
                if not isinstance(e, AssertionError):
                    msg = "%s: %s" % (type(e).__name__, msg)
                first, _, rest = msg.partition("\n")
                tb = traceback.extract_tb(e.__traceback__)
                where = ""
                for fr in reversed(tb):
                    if os.path.basename(fr.filename).startswith("test_"):
                        where = "%s:%d" % (os.path.basename(fr.filename), fr.lineno)
                        break
                result = {"status": "fail",
                          "reason": first + (" [%s]" % where if where else ""),
                          "detail": rest}
    finally:
        with open(result_path, "w") as f:
            json.dump(result, f)
    return 0


def kill_group(p):
    try:
        os.killpg(p.pid, signal.SIGKILL)
    except OSError:
        pass


def run_test(t, default_timeout, slow, keep):
    tmp = tempfile.mkdtemp(prefix="fennec-test-")
    result_path = os.path.join(tmp, ".result.json")
    work = os.path.join(tmp, "work")
    os.mkdir(work)
    limit = (t["timeout"] or default_timeout) * slow
    cmd = [sys.executable, os.path.abspath(__file__), "--child", t["file"], t["func"],
           result_path]
    t0 = time.monotonic()
    p = subprocess.Popen(cmd, cwd=work, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                         start_new_session=True, stdin=subprocess.DEVNULL)
    try:
        out, _ = p.communicate(timeout=limit)
        timed_out = False
    except subprocess.TimeoutExpired:
        kill_group(p)
        out, _ = p.communicate()
        timed_out = True
    # whatever the test left running in its session goes too
    kill_group(p)
    elapsed = time.monotonic() - t0
    res = None
    if timed_out:
        res = {"status": "fail", "reason": "timed out after %ds" % limit, "detail": ""}
    else:
        try:
            with open(result_path) as f:
                res = json.load(f)
        except (OSError, ValueError):
            res = {"status": "fail",
                   "reason": "test process died (%s) without a result" % p.returncode,
                   "detail": ""}
    res["output"] = out.decode(errors="replace")
    res["elapsed"] = elapsed
    res["tmp"] = tmp
    if res["status"] == "ok" and not keep:
        shutil.rmtree(tmp, ignore_errors=True)
    return res


def indent(text, n=4):
    return "\n".join(" " * n + line for line in text.rstrip().splitlines())


COUNTS_RE = re.compile(r"(\d+) passed, (\d+) failed(?:, (\d+) skipped)?")


def run_unit(build):
    """Runs the C unit test binary. Returns (passed, failed, skipped) or None if absent."""
    exe = os.path.join(build, "tests", "unit")
    if not os.path.exists(exe):
        print("(no unit test binary at %s; skipped)" % os.path.relpath(exe, REPO))
        return None
    env = dict(os.environ)
    if os.environ.get("FENNEC_SANITIZER") == "asan":
        env.setdefault("ASAN_OPTIONS", "detect_leaks=0")
    t0 = time.monotonic()
    try:
        p = subprocess.run([exe], cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                           timeout=600, env=env)
        out, rc = p.stdout.decode(errors="replace"), p.returncode
    except subprocess.TimeoutExpired as e:
        out, rc = (e.stdout or b"").decode(errors="replace") + "\n(timed out)", None
    elapsed = time.monotonic() - t0
    m = None
    for m in COUNTS_RE.finditer(out):
        pass
    # echo the unit binary's own lines, except its final counts line
    lines = [l for l in out.rstrip().splitlines() if not (m and l.strip() == m.group(0))]
    if lines:
        print(indent("\n".join(lines), 2))
    if m is None:
        print("FAIL unit: no 'N passed, N failed' line (exit %s)" % rc)
        return (0, 1, 0)
    passed, failed, skipped = int(m.group(1)), int(m.group(2)), int(m.group(3) or 0)
    if rc != 0 and failed == 0:
        print("FAIL unit: exited %s although it reported no failure" % rc)
        failed = 1
    else:
        print("%s unit: %d passed, %d failed (%.1fs)" % ("ok" if failed == 0 else "FAIL",
                                                        passed, failed, elapsed))
    return (passed, failed, skipped)


def main():
    if len(sys.argv) > 1 and sys.argv[1] == "--child":
        sys.exit(child_main(*sys.argv[2:5]))
    ap = argparse.ArgumentParser(description="fennec test runner")
    ap.add_argument("--collector-only", action="store_true")
    ap.add_argument("-k", dest="filter", default=None)
    ap.add_argument("--timeout", type=float, default=120)
    ap.add_argument("--keep", action="store_true")
    ap.add_argument("-v", "--verbose", action="store_true",
                    help="print the output of passing tests too")
    args = ap.parse_args()

    build = os.path.join(REPO, os.environ.get("FENNEC_BUILD") or "build")
    os.environ["FENNEC_BUILD"] = build
    san = os.environ.get("FENNEC_SANITIZER", "")
    slow = {"asan": 3, "tsan": 5}.get(san, 1)
    print("fennec tests: build %s%s%s" % (
        os.path.relpath(build, REPO), ", sanitizer " + san if san else "",
        ", collector tests only" if args.collector_only else ""))
    sys.stdout.flush()

    passed = failed = skipped = 0
    if not args.collector_only and (args.filter is None or args.filter in "unit"):
        u = run_unit(build)
        if u:
            passed, failed, skipped = passed + u[0], failed + u[1], skipped + u[2]

    try:
        tests = discover()
    except Exception:  # noqa: BLE001
        print("FAIL discovery: could not import the tests")
        print(indent(traceback.format_exc()))
        print("%d passed, %d failed, %d skipped" % (passed, failed + 1, skipped))
        return 1
    if args.collector_only:
        tests = [t for t in tests if t["collector"]]
    if args.filter:
        tests = [t for t in tests if args.filter in t["name"]]

    for t in tests:
        res = run_test(t, args.timeout, slow, args.keep)
        first = []
        for _ in range(t["retries"]):
            if res["status"] != "fail":
                break
            first.append(res["reason"])
            shutil.rmtree(res["tmp"], ignore_errors=True)
            res = run_test(t, args.timeout, slow, args.keep)
        if res["status"] == "ok":
            passed += 1
            print("ok %s (%.1fs)%s" % (t["name"], res["elapsed"], "".join(
                "\n    (passed on retry; a %s test; first run: %s)" % (t["why_retry"], r) for r in first)))
            if args.verbose and res["output"].strip():
                print(indent(res["output"]))
        elif res["status"] == "skip":
            skipped += 1
            print("skip %s: %s" % (t["name"], res["reason"]))
        else:
            failed += 1
            print("FAIL %s: %s%s" % (t["name"], res["reason"],
                                   " (also on retry)" if first else ""))
            if res.get("detail", "").strip():
                print(indent(res["detail"]))
            if res["output"].strip():
                print(indent("output:\n" + res["output"][-3000:]))
            print("    (files kept in %s)" % res["tmp"])
        sys.stdout.flush()

    print("%d passed, %d failed, %d skipped" % (passed, failed, skipped))
    return 1 if failed else 0


if __name__ == "__main__":
    sys.exit(main())

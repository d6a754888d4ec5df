"""The Python module (python/fennec, docs/python.md): real Python programs that use it,
recorded by `fennec record` and by themselves, checked against what they did."""

import os
import sys

from helpers import (MS, Skip, SANITIZER, analyze, analyze_raw, assert_eq, assert_rel, assert_true,
                     base_env, fennec_bin, libfennec, metric, record, region, run)

PYDIR = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "python"))


def plain_only():
    if SANITIZER:
        raise Skip("a sanitizer's runtime must be loaded first: ctypes loads libfennec into python late")


def script(name, text):
    with open(name, "w") as f:
        f.write(text)
    return os.path.abspath(name)


def c_part():
    """The module's C part that make built for the interpreter running the tests, if any."""
    import glob
    import importlib.machinery
    d = os.path.join(os.path.dirname(os.path.dirname(libfennec())), "python")
    return [p for s in importlib.machinery.EXTENSION_SUFFIXES for p in glob.glob(os.path.join(d, "_fennec" + s))]


def py_env(extra=None):
    env = base_env(extra)
    env["PYTHONPATH"] = PYDIR
    return env


TRAIN = r"""
import sys, time
import fennec

def spin(s):
    t = time.perf_counter()
    while time.perf_counter() - t < s:
        pass

@fennec.region("loss_fn")
def loss(i):
    spin(0.005)
    return 1.0 / (i + 1)

class Model:
    @fennec.region
    def forward(self):
        spin(0.02)

m = Model()
before = fennec.memory_stats()
keep = []
for i in range(10):
    with fennec.region("data"):
        spin(0.01)
    keep.append(bytearray(4 << 20))
    with fennec.region("forward"):
        m.forward()
    fennec.value("loss", loss(i))
    fennec.counter("tokens", 128)
    fennec.gauge("lr", 0.1 / (i + 1))
    fennec.step(items=32)
after = fennec.memory_stats()
print(before["tracking"], after["heap_bytes"] - before["heap_bytes"], fennec.is_running(), fennec.implementation)
"""


def test_python_regions_steps_and_metrics():
    """A training loop in Python under `fennec record`: regions as context managers and
    decorators (a method's qualified name, nested under the region that calls it), steps
    with items, a value, a counter and a gauge, and memory_stats() while it allocates 40
    MiB: the profile says what the script did. With the module's C part (built by make
    for this interpreter) and with ctypes alone (FENNEC_PY_CTYPES=1)."""
    plain_only()
    path = script("train.py", TRAIN)
    for impl in ("c", "ctypes"):
        env = py_env({"FENNEC_PY_CTYPES": "1"} if impl == "ctypes" else None)
        check_train(path, impl, env)


def check_train(path, impl, env):
    r, out = record(sys.executable, path, out="train-%s.fnc" % impl, opts=["--sample", "off"], env=env)
    tracking, grew, running, used = r.stdout.split()
    assert_eq(used, impl if impl == "ctypes" or c_part() else "ctypes", "fennec.implementation")
    assert_eq((tracking, running), ("True", "True"), "memory_stats()['tracking'] and is_running() under record")
    assert_true(int(grew) >= 40 << 20, "memory_stats(): heap_bytes grew by %s over 40 MiB of bytearrays" % grew)
    rep = analyze(out)
    for p, n, ms in (("data", 10, 10), ("forward", 10, 20), ("forward/Model.forward", 10, 20), ("loss_fn", 10, 5)):
        x = region(rep, p)
        assert_eq(x["count"], n, "%s: count" % p)
        assert_rel(x["total_ns"], n * ms * MS, 0.10, "%s: total_ns (busy loops of %d ms)" % (p, ms), "ns")
    st = rep["steps"]
    # ten marks at the ends of ten iterations: nine steps from one mark to the next (the first
    # iteration is set-up, with its 32 items)
    assert_eq((st["marks"], st["count"], st["items"]), (10, 9, 288), "steps: marks, count and items")
    loss = metric(rep, "loss")
    assert_eq((loss["kind"], loss["count"], loss["min"], loss["max"]), ("value", 10, 0.1, 1.0), "loss")
    tokens = metric(rep, "tokens")
    assert_eq((tokens["kind"], tokens["total"]), ("counter", 1280), "tokens")
    lr = metric(rep, "lr")
    assert_eq(lr["kind"], "gauge", "lr kind")
    assert_rel(lr["last"], 0.01, 1e-9, "lr last")


SELF = r"""
import sys, time
import fennec
mode = sys.argv[1]
def spin(s):
    t = time.perf_counter()
    while time.perf_counter() - t < s:
        pass
if mode == "session":
    with fennec.session("self.fnc", sample="cpu") as s:
        with fennec.region("work"):
            spin(0.2)
    print(s.started, fennec.is_running(), fennec.stop())
else:
    started = fennec.start("self.fnc", sample="cpu", hz=499)
    with fennec.region("work"):
        spin(0.2)
    print(started, fennec.is_running(), fennec.stop(), fennec.is_running(), fennec.stop())
"""


def test_python_records_itself():
    """Without `fennec record` the script records itself into self.fnc, with session() or
    start() and stop(): regions and CPU samples (the library found beside the module, in
    the source tree). Under `fennec record`, which records already, start() returns False,
    session() leaves that recording running, and the script's regions are in it."""
    plain_only()
    path = script("self.py", SELF)
    env = py_env()
    env.pop("FENNEC_LIB", None)
    for mode, says in (("session", "True False False"), ("start", "True True True False False")):
        r = run([sys.executable, path, mode], env=env)
        assert_eq(r.returncode, 0, "%s: exit status\n  %s" % (mode, r.describe()))
        # session: started, running after the block, stop() again; start: started, running,
        # stop(), running after it, stop() again
        assert_eq(r.stdout.strip(), says, "%s: what the script saw" % mode)
        rep = analyze("self.fnc")
        assert_eq(region(rep, "work")["count"], 1, "%s: the region" % mode)
        assert_true(rep["samples"]["cpu_samples"] >= 50, "%s: CPU samples over 0.2 s at %s Hz: %d" % (
            mode, "999" if mode == "session" else "499", rep["samples"]["cpu_samples"]))
        os.remove("self.fnc")
    r, out = record(sys.executable, path, "session", out="rec.fnc", opts=["--sample", "off"], env=py_env())
    assert_eq(r.stdout.split(), ["False", "True", "True"], "under record: started, running after, stop()")
    assert_true(not os.path.exists("self.fnc"), "under record, session() writes no file of its own")
    assert_eq(region(analyze(out), "work")["count"], 1, "under record: the script's region")


FAILS = r"""
import sys
import fennec
with fennec.region("outer"):
    try:
        with fennec.region("raises"):
            raise KeyError("x")
    except KeyError:
        pass
    with fennec.region("after"):
        pass
sys.exit(3)
"""


def test_python_region_left_by_an_exception_is_closed():
    """A region an exception leaves is closed: the next one is its sibling, not its child;
    and the script's exit status is fennec record's."""
    plain_only()
    path = script("fails.py", FAILS)
    r, out = record(sys.executable, path, out="fails.fnc", opts=["--sample", "off"], env=py_env(), expect_rc=3)
    rep = analyze(out)
    paths = sorted(x["path"] for x in rep["regions"])
    assert_eq(paths, ["outer", "outer/after", "outer/raises"], "the regions' paths")


ERRORS = r"""
import sys
import fennec
def check(what, fn, kind, *words):
    try:
        fn()
    except kind as e:
        msg = str(e)
        missing = [w for w in words if w not in msg]
        print("%s: %s" % (what, "ok" if not missing else "message %r lacks %r" % (msg, missing)))
    else:
        print("%s: no %s" % (what, kind.__name__))
check("unwritable", lambda: fennec.start("/nonexistent-dir/x.fnc"), fennec.FennecError, "/nonexistent-dir/x.fnc")
check("sample", lambda: fennec.start("x.fnc", sample="gpu"), ValueError, "sample", "gpu", "cpu")
check("hz", lambda: fennec.start("x.fnc", hz=-5), ValueError, "hz", "-5")
check("steps", lambda: fennec.start("x.fnc", steps={"wiat": 1}), ValueError, "wiat")
check("name", lambda: fennec.region(""), TypeError, "name")
check("metric", lambda: fennec.value(None, 1), TypeError, "None")
check("analyze", lambda: fennec.analyze("missing.fnc"), fennec.FennecError, "missing.fnc")
print("running", fennec.is_running())
"""


def test_python_bad_input_gets_a_clear_error():
    """Wrong arguments and files raise an exception that names what is wrong; a library
    that cannot be found fails the import saying where it looked."""
    plain_only()
    path = script("errors.py", ERRORS)
    for impl in ("c", "ctypes"):
        env = py_env({"FENNEC_CLI": fennec_bin(), "FENNEC_PY_CTYPES": "1" if impl == "ctypes" else "0"})
        env.pop("FENNEC_LIB", None)
        r = run([sys.executable, path], env=env)
        assert_eq(r.returncode, 0, "%s: exit status\n  %s" % (impl, r.describe()))
        lines = r.stdout.splitlines()
        bad = [l for l in lines if not l.endswith(": ok") and l != "running False"]
        assert_eq(bad, [], "%s: checks that failed (all: %s)" % (impl, lines))
        assert_eq(len(lines), 8, "%s: lines: %s" % (impl, lines))
    env["FENNEC_LIB"] = "/nonexistent/libfennec.so"
    r = run([sys.executable, "-c", "import fennec"], env=env)
    assert_true(r.returncode != 0 and "FENNEC_LIB=/nonexistent/libfennec.so" in r.stderr,
                "import with FENNEC_LIB pointing nowhere\n  " + r.describe())


def test_python_memory_stats_without_a_recording():
    """memory_stats() without the library preloaded: no heap counters (the allocator is not
    interposed), but the RSS, which a 64 MiB bytearray raises."""
    plain_only()
    env = py_env({"FENNEC_LIB": libfennec()})
    code = ("import fennec\na = fennec.memory_stats()\nb = bytearray(64 << 20)\nfor i in range(0, len(b), 4096): b[i] = 1\n"
            "c = fennec.memory_stats()\nprint(a['tracking'], c['rss_bytes'] - a['rss_bytes'], c['rss_peak_bytes'] >= c['rss_bytes'])")
    r = run([sys.executable, "-c", code], env=env)
    assert_eq(r.returncode, 0, "exit status\n  " + r.describe())
    tracking, grew, peak = r.stdout.split()
    assert_eq((tracking, peak), ("False", "True"), "tracking, and the peak RSS at least the RSS")
    assert_true(int(grew) >= 60 << 20, "rss_bytes grew by %s over 64 MiB touched" % grew)


SPIN = r"""
import time
def spin(s):
    t = time.perf_counter()
    x = 0.0
    while time.perf_counter() - t < s:
        x += 1.5 * 2.5
    return x
spin(0.8)
"""


def test_python_code_is_one_finding_that_says_what_it_is():
    """A pure-Python busy loop under `fennec record`: the CPU is in the interpreter's C
    functions (the evaluation loop, float objects, the clock). Up to five hot_function
    findings said to optimise _PyEval_EvalFrameDefault and its like; one finding now says
    this is the program's Python code, which samples cannot name, and to mark it with
    fennec.region(). The vDSO's clock, called from libc's clock_gettime, is library code
    reached from where the interpreter calls it, not code to optimise."""
    plain_only()
    path = script("spin.py", SPIN)
    # without Python frames (an interpreter fennec could not read): test_pyframes.py has
    # the finding with them
    r, out = record(sys.executable, path, out="spin.fnc", env=py_env({"FENNEC_PYTHON": "0"}))
    rep = analyze(out)
    if rep["samples"]["cpu_samples"] < 300:
        raise Skip("too few CPU samples: %d" % rep["samples"]["cpu_samples"])
    hot = [f for f in rep["findings"] if f["type"] == "hot_function"]
    py = [f for f in hot if f["evidence"].get("python_interpreter")]
    assert_eq(len(py), 1, "findings on the interpreter's code as a whole (all: %s)" % [f["subject"] for f in hot])
    assert_true(py[0]["subject"].startswith("Python code (interpreted by ") and "fennec.region()" in py[0]["recommendation"],
                "the finding: %s / %s" % (py[0]["subject"], py[0]["recommendation"]))
    assert_true(py[0]["evidence"]["self_pct"] >= 30, "the interpreter's share: %r" % py[0]["evidence"])
    names = [f["subject"] for f in hot]
    assert_true(not any(n.startswith("_PyEval") or n.startswith("PyFloat") for n in names),
                "no finding on one interpreter function: %s" % names)
    for f in hot:
        if f["subject"].startswith("__vdso"):
            assert_true("is library code ([vdso]), reached mostly from " in f["recommendation"]
                        and "through __clock_gettime" in f["recommendation"],
                        "the vDSO clock's advice: %s" % f["recommendation"])
    # with them: the Python function itself, with Python's remedies
    r, out = record(sys.executable, path, out="spin2.fnc", env=py_env())
    rep = analyze(out)
    hot = [f for f in rep["findings"] if f["type"] == "hot_function"]
    assert_true(not any(f["evidence"].get("python_interpreter") for f in hot),
                "the interpreter finding with Python frames: %s" % [f["subject"] for f in hot])
    spin = [f for f in hot if f["subject"] == "spin"]
    assert_eq(len(spin), 1, "hot_function on spin() (all: %s)" % [f["subject"] for f in hot])
    rec = spin[0]["recommendation"]
    assert_true(spin[0]["evidence"].get("python") == 1 and "numpy" in rec and "spin.py:" in rec
                and "_Py" not in rec and "C API" not in rec, "spin's advice: %s" % rec)

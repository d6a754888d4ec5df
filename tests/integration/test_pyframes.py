"""Python frames in samples (docs/python.md, "Python frames"): unmodified Python programs
recorded with `fennec record`, whose profiles must name their Python functions, files and
lines, with the shares the programs measured themselves.

Fixtures: tests/fixtures/python/shares.py (three functions of known CPU shares, measured
with the thread's CPU clock around every call), shapes.py (a thread, a generator, fork and
spawn workers, numpy called from Python, a sleeping thread).
"""

import glob
import json
import math
import os
import re

from helpers import (SANITIZER, Skip, analyze, analyze_raw, assert_close, assert_eq, assert_true, base_env,
                     fennec_bin, record, run, statistical, timeout)

HERE = os.path.dirname(os.path.abspath(__file__))
PYFIX = os.path.normpath(os.path.join(HERE, "..", "fixtures", "python"))
SHARE_TOL = 3.0  # percentage points, at the default 999 Hz (docs/python.md)


def interpreters():
    """CPython builds fennec reads, that this machine has: Debian's, and pyenv's 3.12 and
    3.13 when installed."""
    out = []
    if os.path.exists("/usr/bin/python3"):
        out.append("/usr/bin/python3")
    for v in ("3.12", "3.13"):
        out += sorted(glob.glob(os.path.expanduser("~/.pyenv/versions/%s.*/bin/python%s" % (v, v))))[-1:]
    return out


def need_plain():
    if SANITIZER:
        raise Skip("the interpreter is not built with the sanitizer's runtime")


def py_version(exe):
    r = run([exe, "-c", "import sys; print('%d.%d' % sys.version_info[:2])"])
    return r.stdout.strip()


def funcs(report):
    return report.get("functions", [])


def func(report, name):
    for f in funcs(report):
        if f["name"] == name:
            return f
    raise AssertionError("no function %r in the report; top ones: %s" % (
        name, [(f["name"], f.get("language")) for f in funcs(report)[:15]]))


def check_shares(exe, xopts=()):
    r, path = record(exe, *xopts, os.path.join(PYFIX, "shares.py"), 3, "truth.json", timeout_s=180)
    truth = json.load(open("truth.json"))
    rep = analyze(path)
    py = rep["samples"]["python"]
    assert_true(py and py["frames"] == "ok", "samples.python: %r" % (py,))
    assert_true(py["samples"] >= 0.95 * rep["samples"]["cpu_weight"],
                "Python frames in %s of %s samples" % (py["samples"], rep["samples"]["cpu_weight"]))
    main = func(rep, "main")
    assert_true(main["language"] == "python" and main["file"].endswith("shares.py"), "main: %r" % (main,))
    bodies = {"leaf_a": (10, 14), "leaf_b": (17, 21), "Worker.leaf_c": (25, 29)}
    for name, spent in truth["spent_ns"].items():
        f = func(rep, name)
        assert_true(f["language"] == "python", "%s: language %r" % (name, f.get("language")))
        assert_true(f["file"].endswith("tests/fixtures/python/shares.py"), "%s: file %r" % (name, f["file"]))
        lo, hi = bodies[name]
        assert_true(lo <= f["line"] <= hi, "%s: line %s outside its body %s-%s" % (name, f["line"], lo, hi))
        # a share of what main() ran, against the share the fixture measured
        got = 100.0 * f["total_samples"] / main["total_samples"]
        want = 100.0 * spent / truth["total_ns"]
        assert_close(got, want, SHARE_TOL, "%s's share of main() (%s %s)" % (name, exe, " ".join(xopts)), "%")
    # the interpreter's C code is folded into the Python frames: the loop stays only in
    # samples without any (a frame chain cut, or read while a call was being set up: one
    # sample in about five runs of 3,000 here, whose -X perf trampoline stays too)
    without_py = rep["samples"]["cpu_weight"] - py["samples"]
    for f in funcs(rep)[:20]:
        assert_true(f["name"] != "_PyEval_EvalFrameDefault" or f["total_samples"] <= without_py,
                    "the interpreter loop is in the table (%d samples without Python frames): %r" % (without_py, f))
    return path


@statistical
@timeout(240)
def test_python_perf_trampolines():
    """CPython 3.12+ with -X perf: each Python call runs through a trampoline of generated
    code, named in /tmp/perf-PID.map ("py::leaf_a:.../shares.py"). The walk goes through
    them (generated code between the evaluator's frames), and they are dropped beside the
    Python frames that say the same: the shares are those without -X perf, and py::
    frames are in the table (with --native or without) only for the few samples without
    Python frames."""
    need_plain()
    exes = [e for e in interpreters() if tuple(map(int, py_version(e).split("."))) >= (3, 12)]
    if not exes:
        raise Skip("no CPython 3.12+ here (pyenv)")
    for exe in exes:
        path = check_shares(exe, ("-X", "perf"))
        # a sample whose Python frames could not be read (cut, or taken while the thread
        # had no frame) keeps its trampolines, the only Python names it has: a few at most
        for opts in ((), ("--native",)):
            rep = analyze(path, *opts)
            tr = [f for f in funcs(rep) if f["name"].startswith("py::")]
            assert_true(sum(f["total_samples"] for f in tr) <= 0.01 * rep["samples"]["cpu_samples"],
                        "%s %s: trampoline frames in the table: %s" % (
                            exe, opts, [(f["name"], f["total_samples"]) for f in tr[:5]]))
        rep = analyze(path, "--native")
        main = func(rep, "main")
        # the walk went through the trampolines: the thread's start is below the Python
        # frames (measured: Py_BytesMain's total is 99.2-99.3 % of main()'s on 3.12.1, all
        # of it on 3.13.0; before, the walk stopped at the innermost trampoline in nearly
        # all; and until the fast unwinder read PLT entries' rules, 3.12's samples in its
        # __tls_get_addr PLT entry, one in ten, were left to libunwind, which stops at the
        # first trampoline: 89-90 %, below this bound in CI)
        start = [f for f in funcs(rep) if f["name"] in ("Py_BytesMain", "Py_RunMain", "_start")]
        assert_true(start and start[0]["total_samples"] >= 0.95 * main["total_samples"],
                    "%s --native: the stacks stop at a trampoline: %s" % (exe, [(f["name"], f["total_samples"]) for f in start]))


@statistical
@timeout(240)
def test_python_shares_every_interpreter():
    need_plain()
    exes = interpreters()
    if not exes:
        raise Skip("no CPython 3.11+ here")
    for exe in exes:
        check_shares(exe)


def test_python_native_keeps_the_interpreter():
    need_plain()
    r, path = record("/usr/bin/python3", os.path.join(PYFIX, "shares.py"), 1, "truth.json")
    rep = analyze(path, "--native")
    names = [f["name"] for f in funcs(rep)]
    assert_true("leaf_a" in names, "--native: leaf_a missing: %s" % names[:20])
    assert_true(any(f["language"] == "native" and f["module"].split("/")[-1].startswith(("python3", "libpython3"))
                    for f in funcs(rep)), "--native shows no interpreter frame: %s" % names[:20])
    assert_true(rep["samples"]["python"]["native"] is True, "samples.python.native")


def record_numpy():
    """shapes.py numpy (use_numpy() calling numpy's sort) recorded and analysed by Debian's
    interpreter: (path, report)."""
    need_plain()
    r = run(["/usr/bin/python3", "-c", "import numpy"])
    if r.returncode != 0:
        raise Skip("numpy is not installed (Debian: python3-numpy)")
    r, path = record("/usr/bin/python3", os.path.join(PYFIX, "shapes.py"), "numpy", 1.5)
    return path, analyze(path)


def test_python_callee_in_c_extension():
    """numpy's sort, called from use_numpy(): one stack holds both, the Python caller
    above the native callee."""
    path, rep = record_numpy()
    use = func(rep, "use_numpy")
    native = [f for f in funcs(rep) if f["language"] == "native" and "numpy" in f["module"]]
    assert_true(native, "no numpy frame: %s" % [(f["name"], f["module"]) for f in funcs(rep)[:15]])
    assert_true(use["total_samples"] >= 0.6 * rep["samples"]["cpu_weight"], "use_numpy: %r" % (use,))
    fold = run([fennec_bin(), "export", path, "--format", "folded", "-o", "f.txt"])
    assert_true(fold.returncode == 0, fold.describe())
    below = 0
    nat = {f["name"] for f in native}
    for line in open("f.txt"):
        stack, _, n = line.rstrip("\n").rpartition(" ")
        frames = stack.split(";")
        if "use_numpy" in frames and any(x in nat for x in frames[frames.index("use_numpy") + 1:]):
            below += int(n)
    assert_true(below >= 0.5 * use["total_samples"],
                "numpy frames below use_numpy in %d of its %d samples" % (below, use["total_samples"]))


def test_python_html_frame_kinds():
    """The HTML page's call graph knows each frame's kind (docs/html.md, `flame.kinds`): the
    Python caller use_numpy is Python code (blue-green), numpy's sort native (red-yellow),
    bracketed pseudo-frames neither (grey)."""
    path, rep = record_numpy()
    lang = {f["name"]: f["language"] for f in funcs(rep)}
    h = analyze_raw(path, "--format", "html", "-o", "report.html")
    assert_true(h.returncode == 0, h.describe())
    m = re.search(r'<script id="fennec-data" type="application/json">(.*?)</script>',
                  open("report.html", encoding="utf-8").read(), re.S)
    assert_true(m, "no page data in the report")
    fl = json.loads(m.group(1))["flame"]
    assert_true(len(fl["kinds"]) == len(fl["names"]), "one kind per name: %d kinds, %d names" % (
        len(fl["kinds"]), len(fl["names"])))
    kind = dict(zip(fl["names"], fl["kinds"]))
    assert_true(kind.get("use_numpy") == 1, "use_numpy's kind: %r" % kind.get("use_numpy"))
    native = [n for n, l in lang.items() if l == "native" and n in kind and not n.startswith("[")]
    assert_true(native, "no native frame in the flame graph: %s" % sorted(kind)[:20])
    for n in native:
        assert_true(kind[n] == 0, "native %s has kind %r" % (n, kind[n]))
    for n, k in kind.items():
        if n not in lang:
            continue  # the report lists the top functions only
        want = 1 if lang.get(n) == "python" else 2 if n.startswith("[") and n.endswith("]") else 0
        assert_true(k == want, "%s: kind %r, want %r (language %r)" % (n, k, want, lang.get(n)))


@timeout(180)
def test_python_threads_generators_fork_spawn():
    need_plain()
    r, path = record("/usr/bin/python3", os.path.join(PYFIX, "shapes.py"), "all", 1, timeout_s=150)
    files = sorted(glob.glob("run.fnc*"))
    assert_true(len(files) >= 3, "process files: %s" % files)
    rep = analyze(".")
    for name in ("thread_work", "gen_work", "fork_work", "spawn_work", "burn"):
        f = func(rep, name)
        assert_true(f["language"] == "python" and f["file"].endswith("shapes.py"), "%s: %r" % (name, f))
    # each worker's time is its own burn(): callers are the right functions
    assert_true(func(rep, "gen_work")["total_samples"] >= 30, "gen_work: %r" % (func(rep, "gen_work"),))
    unknown = [f["name"] for f in funcs(rep) if f["name"].startswith("<python code")]
    assert_true(not unknown, "code objects without a name: %s" % unknown)


def test_python_wall_mode_sleeping_thread():
    need_plain()
    r, path = record("/usr/bin/python3", os.path.join(PYFIX, "shapes.py"), "sleep", 1.5, opts=("--sample", "wall"))
    rep = analyze(path)
    sl = [f for f in rep.get("offcpu_functions", funcs(rep)) if f["name"] == "sleeper"]
    txt = analyze_raw(path).stdout
    assert_true(sl or "sleeper" in txt, "no sleeper in the off-CPU view:\n" + txt[:3000])


def test_python_unknown_version_and_off():
    need_plain()
    env = base_env({"FENNEC_TEST_PY_VERSION": "0x030e00f0"})
    r, path = record("/usr/bin/python3", os.path.join(PYFIX, "shares.py"), 0.5, "truth.json", env=env)
    txt = analyze_raw(path)
    assert_true(txt.returncode == 0, txt.describe())
    lines = [l for l in txt.stdout.splitlines() + txt.stderr.splitlines() if "CPython 3.14" in l]
    assert_true(len(lines) == 1 and "native frames only" in lines[0], "the line about 3.14: %s" % lines)
    rep = analyze(path)
    assert_true(rep["samples"]["python"]["frames"] == "unsupported_version", repr(rep["samples"]["python"]))
    assert_true(all(f["language"] == "native" for f in funcs(rep)), "Python frames from an unknown layout")
    assert_true(any(f["name"] == "_PyEval_EvalFrameDefault" for f in funcs(rep)), "native frames missing")
    env = base_env({"FENNEC_PYTHON": "0"})
    r, path = record("/usr/bin/python3", os.path.join(PYFIX, "shares.py"), 0.5, "truth.json", env=env, out="off.fnc")
    rep = analyze(path)
    assert_true(rep["samples"]["python"]["frames"] == "off", repr(rep["samples"]["python"]))
    assert_true(all(f["language"] == "native" for f in funcs(rep)), "Python frames while off")


def test_python_leak_named_by_line():
    """A list that keeps a 256 KiB bytearray every step (leak.py:12): the heap's stacks
    carry Python frames, so the growing memory is named by that line, in sampled mode with
    a memory_leak finding, in full mode as the stack live at the peak (a 256 KiB bytearray
    is a block of malloc's, pymalloc or not)."""
    need_plain()
    line = [i for i, l in enumerate(open(os.path.join(PYFIX, "leak.py")), 1) if "the leak: this line" in l][0]
    r, path = record("/usr/bin/python3", os.path.join(PYFIX, "leak.py"), 60, opts=("--memory", "sampled"))
    rep = analyze(path)
    leaks = [f for f in rep["findings"] if f["type"] == "memory_leak"]
    assert_true(any("leak.py:%d" % line in json.dumps(f) for f in leaks),
                "memory_leak naming leak.py:%d: %s" % (line, leaks))
    for mode in ("sampled", "full"):
        r, path = record("/usr/bin/python3", os.path.join(PYFIX, "leak.py"), 60, opts=("--memory", mode),
                         out=mode + ".fnc")
        rep = analyze(path)
        top = rep["memory"]["at_peak"][0]
        assert_true(top["function"] == "step" and top["stack"][0].endswith("leak.py:%d" % line),
                    "%s: the stack live at the peak: %r" % (mode, top))
        # full mode: the blocks themselves; sampled: each 256 KiB block is sampled with
        # p = 1 - exp(-size / rate) and stands for 1 / p blocks, a standard error of
        # size * sqrt(n (1 - p) / p): within three of them (the estimate rule)
        want, size = 60 * 262144, 262144
        tol = 0.25 * want
        if mode == "sampled":
            p = 1 - math.exp(-size / rep["memory"]["sample_rate_bytes"])
            tol = 3 * size * math.sqrt(60 * (1 - p) / p)
        assert_close(top["bytes"], want, tol, "%s: bytes live at the peak at leak.py:%d" % (mode, line))


def test_python_gil_wait():
    """Three CPU-bound Python threads in wall mode take turns for the GIL (about two thirds
    of their samples wait): a gil_wait finding; a single-threaded program has none."""
    need_plain()
    r, path = record("/usr/bin/python3", os.path.join(PYFIX, "shapes.py"), "gil", 1.5, opts=("--sample", "wall"))
    rep = analyze(path)
    py = rep["samples"]["python"]
    assert_true(py["gil_wait_samples"] >= 0.3 * py["samples"], "waiting for the GIL: %r" % (py,))
    g = [f for f in rep["findings"] if f["type"] == "gil_wait"]
    assert_true(len(g) == 1 and "ProcessPoolExecutor" in g[0]["recommendation"], "gil_wait: %s" % g)
    w = func(rep, "[waiting for the GIL]")
    assert_true(w["caller"] == "burn", "who waits: %r" % (w,))
    r, path = record("/usr/bin/python3", os.path.join(PYFIX, "shares.py"), 1, "truth.json", opts=("--sample", "wall"),
                     out="one.fnc")
    rep = analyze(path)
    assert_true(not [f for f in rep["findings"] if f["type"] == "gil_wait"], "gil_wait on one thread")


@statistical
@timeout(300)
def test_pytorch_operator_table():
    """examples/torch_train.py (a CNN, a DataLoader, SGD) under fennec record: the operator
    table names the aten operators and autograd nodes with the Python line that called
    them, and agrees with torch.profiler's key_averages() (self CPU) of the same run (the
    script's --torch-profile, inside fennec record): at least 4 of the top 5 aten operators
    in common, each of torch.profiler's top 5 within 5 points of its share there (shares of
    the aten operators' self totals). Measured (docs/python.md, "PyTorch operators"): 5 of 5,
    within 1.7 points. Run separately, the two tools' shares differed by up to 17 points, as
    each varies that much from run to run on this machine."""
    need_plain()
    if run(["/usr/bin/python3", "-c", "import torch"]).returncode != 0:
        raise Skip("PyTorch is not installed (Debian: python3-torch)")
    ex = os.path.normpath(os.path.join(HERE, "..", "..", "examples", "torch_train.py"))
    r, path = record("/usr/bin/python3", ex, "--torch-profile", "tp.json", timeout_s=240)
    rep = analyze(path)
    ops = {o["name"]: o for o in rep["operators"]}
    for name, caller in (("aten::addmm", "Linear.forward"), ("aten::mkldnn_convolution", "Conv2d._conv_forward"),
                         ("aten::max_pool2d_with_indices", None), ("aten::convolution_backward", None)):
        assert_true(name in ops, "%s missing from the operators: %s" % (name, list(ops)[:20]))
        if caller:
            assert_true(ops[name]["top_caller"] == caller and ops[name]["top_caller_file"].endswith(".py"),
                        "%s's caller: %r" % (name, ops[name]))
    assert_true(any(n.endswith("Backward0") for n in ops), "no autograd node: %s" % list(ops))
    # importing torch loads and relocates its libraries: a start-up cost, said so
    for f in rep["findings"]:
        if f["type"] == "hot_function" and f["subject"].startswith("_dl_"):
            assert_true(f["evidence"].get("loading_libraries") == 1 and "dynamic loader" in f["recommendation"],
                        "the loader's finding: %r" % (f,))
    t = {o["name"]: o["self_us"] for o in json.load(open("tp.json"))["operators"] if o["name"].startswith("aten::")}
    f = {n: o["self_samples"] for n, o in ops.items() if n.startswith("aten::")}
    ts, fs = sum(t.values()), sum(f.values())
    top_t = sorted(t, key=lambda k: -t[k])[:5]
    top_f = sorted(f, key=lambda k: -f[k])[:5]
    common = set(top_t) & set(top_f)
    assert_true(len(common) >= 4, "the top 5 operators: torch.profiler %s, fennec %s" % (top_t, top_f))
    for n in top_t:
        assert_close(100.0 * f.get(n, 0) / fs, 100.0 * t[n] / ts, 5.0, "%s's share of the aten operators' self "
                     "time (fennec against torch.profiler, the same run)" % n, " points")


def need_torch():
    need_plain()
    if run(["/usr/bin/python3", "-c", "import torch"]).returncode != 0:
        raise Skip("PyTorch is not installed (Debian: python3-torch)")


def jit_samples(rep):
    """The on-CPU samples in functions named by a perf map (/tmp/perf-PID.map)."""
    return sum(f["self_samples"] for f in funcs(rep) if re.search(r"/perf-\d+\.map$", f.get("module") or ""))


@timeout(300)
def test_pytorch_leak_and_healthy_loop():
    """examples/torch_train.py --leak calls backward(retain_graph=True) and keeps every
    step's loss: the graphs and their saved activations live on (about 88 MiB a second,
    250 MiB over 30 steps, in one run). fennec finds the growth and names the Python line
    that made the tensors that grow (Net.forward, torch_train.py:56 or 57, the relu and
    pool lines), not the allocator under them (every site read "libc10.so.1.13+0x1b1d0").
    The same loop without --leak has no memory_leak finding: its heap rises while python3
    imports torch and makes the dataset (to 84 MiB in 1.8 s) and is flat while it trains,
    which read as "heap grows 38 MiB per second" (HIGH) on a fast run."""
    need_torch()
    ex = os.path.normpath(os.path.join(HERE, "..", "..", "examples", "torch_train.py"))
    r, path = record("/usr/bin/python3", ex, "--leak", out="leak.fnc", timeout_s=240)
    rep = analyze(path)
    g = [f for f in rep["findings"] if f["type"] == "memory_leak" and f["subject"].startswith("heap grows")]
    assert_true(len(g) == 1, "a growth finding with --leak: %r" % [f["subject"] for f in rep["findings"]])
    ev = g[0]["evidence"]
    assert_true(ev["slope_bytes_per_s"] > 20e6 and ev["tail_slope_bytes_per_s"] > 0.5 * ev["slope_bytes_per_s"], "%r" % ev)
    assert_true(re.search(r"the stack that grows most: Net\.forward \(torch_train\.py:5[67]\)", ev["text"]),
                "the growing stack named by its Python line: %s" % ev["text"])
    r, path = record("/usr/bin/python3", ex, out="healthy.fnc", timeout_s=240)
    rep = analyze(path)
    assert_eq([f["subject"] for f in rep["findings"] if f["type"] == "memory_leak"], [],
              "memory_leak findings of the loop without --leak")


@timeout(240)
def test_pytorch_blas_workers_under_their_operator():
    """tests/fixtures/python/torch_mm.py: torch.mm hands its sgemm to OpenBLAS, which runs
    part of it on a worker thread of its own, whose stacks begin at the thread's start and
    hold no operator. Those samples go to the operator the calling thread ran at the time
    (operators.c, attribute_workers()): here all but a few of the worker's sgemm samples
    (1,271 of 1,273 in one run) go to aten::mm, which before counted only the caller's half
    (27 % self against 51 %). The worker's idle samples (sched_yield) go to no operator."""
    need_torch()
    r, path = record("/usr/bin/python3", os.path.join(PYFIX, "torch_mm.py"), 3, timeout_s=180)
    rep = analyze(path)
    fold = run([fennec_bin(), "export", path, "--format", "folded", "-o", "f.txt"])
    assert_true(fold.returncode == 0, fold.describe())
    work = idle = 0
    for line in open("f.txt"):
        stack, n = line.rsplit(" ", 1)
        frames = stack.split(";")
        if "start_thread" not in frames[:3] or not any(f.startswith("libopenblas") for f in frames):
            continue
        if frames[-1] in ("__sched_yield", "sched_yield"):
            idle += int(n)
        elif any("gemm" in f for f in frames):
            work += int(n)
    ops = {o["name"]: o for o in rep["operators"]}
    mm = ops.get("aten::mm")
    assert_true(work >= 100, "the worker's sgemm samples: %d (idle %d); nothing to attribute" % (work, idle))
    assert_true(mm and work * 0.8 <= mm["worker_samples"] <= work + 0.05 * idle + 5,
                "aten::mm's worker samples %r, the worker's sgemm samples %d, idle %d" % (mm, work, idle))
    others = sum(o["worker_samples"] for n, o in ops.items() if n != "aten::mm")
    assert_true(others <= 0.05 * work, "worker samples given to other operators: %d" % others)
    assert_true(mm["self_samples"] >= mm["worker_samples"], "%r" % mm)


@timeout(300)
def test_dataloader_workers_that_cost_more_than_they_save():
    """examples/torch_train.py with 2 DataLoader workers and batches of 4 images: making a
    batch is cheap (374 ms of the workers' 875 ms of CPU in one run), and the workers' own
    costs and the main process receiving the batches (549 ms) are more: dataloader_workers
    fires, advising num_workers=0 (measured here: 3.9-4.2 s with num_workers=0 against
    5.0-6.0 s with 2). Without workers there is nothing to say. With --jitter (pure-Python
    augmentation in __getitem__) the workers' batches cost more than their overhead and the
    rule is silent, though on 2 vCPUs num_workers=0 was faster there too (3.5 s against
    5.4 s): that difference is the cores they compete for, which cpu_starved reports."""
    need_torch()
    ex = os.path.normpath(os.path.join(HERE, "..", "..", "examples", "torch_train.py"))
    r, path = record("/usr/bin/python3", ex, "--workers", "2", "--batch", "4", "--steps", "300", timeout_s=240)
    rep = analyze(path)
    f = [x for x in rep["findings"] if x["type"] == "dataloader_workers"]
    assert_true(len(f) == 1, "dataloader_workers: %r" % [x["type"] for x in rep["findings"]])
    n = f[0]["evidence"]
    assert_true(n["workers"] == 2, "workers: %r" % n)
    assert_true(0 < n["make_ns"] < n["worker_cpu_ns"] and n["main_loader_ns"] > 0, "%r" % n)
    assert_true(n["worker_cpu_ns"] - n["make_ns"] + n["main_loader_ns"] > n["make_ns"], "%r" % n)
    assert_true("num_workers=0" in f[0]["recommendation"], f[0]["recommendation"])
    r, path = record("/usr/bin/python3", ex, "--workers", "0", "--batch", "4", "--steps", "300", out="w0.fnc",
                     timeout_s=240)
    rep = analyze(path)
    assert_true(not [x for x in rep["findings"] if x["type"] == "dataloader_workers"], "a finding without workers")


@timeout(240)
def test_pytorch_jit_kernels_under_their_operator():
    """tests/fixtures/python/torch_conv.py: two Conv2d layers on one thread, whose time is in
    kernels oneDNN generates at run time (in no loaded object, without unwind tables).
    fennec record asks oneDNN to name them in a perf map (ONEDNN_JIT_PROFILE=2), and the
    signal handler's walk finds the return address into libdnnl above them, so the
    kernels' samples have the operator and the Python caller above them. Measured: the
    kernels 55 % of the samples, aten::mkldnn_convolution 58 % self (its own code beside
    the kernels), every kernel's caller in libdnnl."""
    need_torch()
    r, path = record("/usr/bin/python3", os.path.join(PYFIX, "torch_conv.py"), 3, timeout_s=180)
    rep = analyze(path)
    total = rep["samples"]["cpu_samples"]
    jit = jit_samples(rep)
    assert_true(jit >= 0.2 * total, "the JIT kernels: %d of %d samples; top functions %s" % (
        jit, total, [(f["name"], f.get("module")) for f in funcs(rep)[:8]]))
    for f in funcs(rep):
        if re.search(r"/perf-\d+\.map$", f.get("module") or "") and f["self_samples"] >= 0.05 * total:
            assert_true((f.get("caller") or "").startswith("libdnnl"), "%s's caller: %r" % (f["name"], f))
    ops = {o["name"]: o for o in rep["operators"]}
    conv = ops.get("aten::mkldnn_convolution")
    assert_true(conv and conv["self_samples"] >= 0.9 * jit and conv["top_caller"] == "Conv2d._conv_forward",
                "the kernels' %d samples and the operator: %r" % (jit, conv))
    # a value of the user's stays: with the profile off, no kernel is named
    env = base_env()
    env["ONEDNN_JIT_PROFILE"] = "0"
    r, path = record("/usr/bin/python3", os.path.join(PYFIX, "torch_conv.py"), 1.5, env=env, out="off.fnc",
                     timeout_s=180)
    rep = analyze(path)
    assert_true(jit_samples(rep) == 0, "ONEDNN_JIT_PROFILE=0, yet kernels were named: %d samples" % jit_samples(rep))
    ops = {o["name"]: o for o in rep["operators"]}
    assert_true("aten::mkldnn_convolution" in ops, "no convolution operator without the names: %s" % list(ops)[:10])

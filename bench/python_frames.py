#!/usr/bin/env python3
"""What Python frames cost and how right they are (docs/python.md, bench/README.md
"python_frames"): bench/work_python.py unprofiled, under fennec with native frames only
(FENNEC_PYTHON=0), under fennec with Python frames (the default), under Scalene (CPU only)
and under cProfile, interleaved, R rounds. Per variant: the workload's own loop time (its
CPU clock, start-up left out) as a ratio to the unprofiled run's, and the attribution
error: the largest difference, in percentage points, between a function's share of the
loop as the profile says it and as the workload measured it.

With --torch, the workload is examples/torch_train.py (PyTorch on the CPU): the cost is the
training loop's wall time as the example measures it, and no share error is computed.

usage: bench/python_frames.py [-r ROUNDS] [-n CALL_ROUNDS] [--python /usr/bin/python3] [--torch]
"""
import argparse
import json
import os
import pstats
import shutil
import statistics
import subprocess
import sys
import tempfile

ROOT = os.path.dirname(os.path.dirname(os.path.abspath(__file__)))
BUILD = os.environ.get("FENNEC_BUILD", os.path.join(ROOT, "build"))
if not os.path.isabs(BUILD):
    BUILD = os.path.join(ROOT, BUILD)
FENNEC = os.path.join(BUILD, "bin", "fennec")
WORK = os.path.join(ROOT, "bench", "work_python.py")
FUNCS = ("leaf_a", "leaf_b", "leaf_c")


def shares_fennec(path, env):
    out = subprocess.run([FENNEC, "analyze", path, "--format", "json"], capture_output=True, text=True, env=env)
    rep = json.loads(out.stdout)
    fn = {f["name"]: f for f in rep.get("functions", [])}
    if "loop" not in fn:
        return None  # native frames only: no Python function to name
    return {k: 100.0 * fn[k]["total_samples"] / fn["loop"]["total_samples"] if k in fn else 0.0 for k in FUNCS}


def shares_scalene(path):
    d = json.load(open(path))
    for name, f in d.get("files", {}).items():
        if name.endswith("work_python.py"):
            pct = {x["line"]: x["n_cpu_percent_python"] + x["n_cpu_percent_c"] + x.get("n_sys_percent", 0)
                   for x in f["functions"]}
            total = sum(pct.values()) or 1.0
            return {k: 100.0 * pct.get(k, 0.0) / total for k in FUNCS}
    return None


def shares_cprofile(path):
    st = pstats.Stats(path).stats
    by = {k[2]: v for k, v in st.items() if k[0].endswith("work_python.py")}
    loop = by.get("loop")
    if not loop:
        return None
    return {k: 100.0 * by[k][3] / loop[3] if k in by else 0.0 for k in FUNCS}  # cumtime


def main():
    ap = argparse.ArgumentParser()
    ap.add_argument("-r", type=int, default=5)
    ap.add_argument("-n", type=int, default=150)
    ap.add_argument("--python", default="/usr/bin/python3")
    ap.add_argument("--torch", action="store_true")
    a = ap.parse_args()
    py = a.python
    if a.torch:
        return torch_bench(a)
    has_scalene = subprocess.run([py, "-c", "import scalene"], capture_output=True).returncode == 0
    tmp = tempfile.mkdtemp(prefix="fennec-bench-py-")
    env = dict(os.environ)
    env.pop("FENNEC_PYTHON", None)
    variants = [
        ("unprofiled", lambda t: [py, WORK, t, str(a.n)], None, None),
        ("fennec, native frames", lambda t: [FENNEC, "record", "-o", t + ".fnc", "--", py, WORK, t, str(a.n)],
         {"FENNEC_PYTHON": "0"}, lambda t, e: shares_fennec(t + ".fnc", e)),
        ("fennec, Python frames", lambda t: [FENNEC, "record", "-o", t + ".fnc", "--", py, WORK, t, str(a.n)],
         {}, lambda t, e: shares_fennec(t + ".fnc", e)),
    ]
    if has_scalene:
        variants.append(("scalene --cpu", lambda t: [py, "-m", "scalene", "--cli", "--json", "--cpu", "--outfile",
                                                     t + ".scalene.json", WORK, t, str(a.n)],
                         {}, lambda t, e: shares_scalene(t + ".scalene.json")))
    else:
        print("scalene: not installed for %s (Debian: python3-scalene); left out" % py)
    variants.append(("cProfile", lambda t: [py, "-m", "cProfile", "-o", t + ".prof", WORK, t, str(a.n)],
                     {}, lambda t, e: shares_cprofile(t + ".prof")))
    cpu = {v[0]: [] for v in variants}
    err = {v[0]: [] for v in variants}
    for r in range(a.r + 1):  # round 0 warms the caches and is not counted
        for name, cmd, extra, shares in variants:
            t = os.path.join(tmp, "%s.%d.json" % (name.split()[0].strip(","), r))
            e = dict(env)
            e.update(extra or {})
            p = subprocess.run(cmd(t), env=e, capture_output=True, text=True)
            if p.returncode != 0:
                sys.exit("%s: exit %d\n%s" % (name, p.returncode, p.stderr[-2000:]))
            truth = json.load(open(t))
            if r == 0:
                continue
            cpu[name].append(truth["loop_cpu_ns"])
            if shares:
                got = shares(t, e)
                if got is not None:
                    want = {k: 100.0 * truth["spent_ns"][k] / truth["loop_cpu_ns"] for k in FUNCS}
                    err[name].append(max(abs(got[k] - want[k]) for k in FUNCS))
    base = statistics.median(cpu["unprofiled"])
    print("bench/python_frames.py: %s, %d rounds of %d call rounds, medians" % (py, a.r, a.n))
    print("%-24s %12s %10s %22s" % ("variant", "loop CPU ms", "ratio", "share error, points"))
    os.makedirs(os.path.join(BUILD, "bench-results"), exist_ok=True)
    with open(os.path.join(BUILD, "bench-results", "python_frames.tsv"), "w") as tsv:
        tsv.write("variant\tloop_cpu_ms\tratio\tshare_error_pp\n")
        for name, *_ in variants:
            m = statistics.median(cpu[name])
            e = "%.1f (max %.1f)" % (statistics.median(err[name]), max(err[name])) if err[name] else "-"
            print("%-24s %12.1f %9.2fx %22s" % (name, m / 1e6, m / base, e))
            tsv.write("%s\t%.3f\t%.4f\t%s\n" % (name, m / 1e6, m / base,
                                                 "%.2f" % statistics.median(err[name]) if err[name] else ""))
    shutil.rmtree(tmp, ignore_errors=True)


def torch_bench(a):
    import re
    py = a.python
    ex = os.path.join(ROOT, "examples", "torch_train.py")
    tmp = tempfile.mkdtemp(prefix="fennec-bench-torch-")
    out = os.path.join(tmp, "t.fnc")
    variants = [("unprofiled", [py, ex], {}),
                ("fennec, native frames", [FENNEC, "record", "-o", out, "--", py, ex], {"FENNEC_PYTHON": "0"}),
                ("fennec, Python frames", [FENNEC, "record", "-o", out, "--", py, ex], {})]
    if subprocess.run([py, "-c", "import scalene"], capture_output=True).returncode == 0:
        variants.append(("scalene --cpu", [py, "-m", "scalene", "--cli", "--json", "--cpu", "--outfile",
                                          os.path.join(tmp, "s.json"), ex], {}))
    variants.append(("cProfile", [py, "-m", "cProfile", "-o", os.path.join(tmp, "c.prof"), ex], {}))
    secs = {v[0]: [] for v in variants}
    for r in range(a.r + 1):
        for name, cmd, extra in variants:
            e = dict(os.environ)
            e.pop("FENNEC_PYTHON", None)
            e.update(extra)
            p = subprocess.run(cmd, env=e, capture_output=True, text=True)
            m = re.search(r"trained \d+ steps in ([0-9.]+) s", p.stdout)
            if p.returncode != 0 or not m:
                sys.exit("%s: exit %d\n%s" % (name, p.returncode, (p.stdout + p.stderr)[-2000:]))
            if r:
                secs[name].append(float(m.group(1)))
    base = statistics.median(secs["unprofiled"])
    print("bench/python_frames.py --torch: %s examples/torch_train.py, %d rounds, medians of the training loop's wall time" % (py, a.r))
    print("%-24s %12s %10s" % ("variant", "loop s", "ratio"))
    for name, *_ in variants:
        m = statistics.median(secs[name])
        print("%-24s %12.2f %9.2fx" % (name, m, m / base))
    shutil.rmtree(tmp, ignore_errors=True)


main()

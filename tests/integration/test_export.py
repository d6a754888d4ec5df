"""fennec export: each format fed to a real consumer, and what the consumer reports checked
against fennec's own analysis (analyze --format json) or against what the program is known
to do. Consumers: speedscope's own importer (npm package, run under node by
tests/consumers/speedscope_import.js) for folded, speedscope, chrome-trace and pprof;
ajv with speedscope's published file-format schema; `go tool pprof` (Debian golang-go);
Python's XML parser for the SVG; the Trace Event Format's rules, checked here, for
chrome-trace. Install the npm consumers with `make consumers` (make test does).

Samples: the tests on sampled recordings skip while the analysis model has no samples
(the samples analysis not yet on main); the exporters' sample paths are also tested on
a profile built by hand in tests/unit/test_export.c, whose exports (FENNEC_EXPORT_DIR)
go to the same consumers here."""

import gzip
import json
import os
import shutil
import subprocess
import xml.etree.ElementTree as ET

from helpers import (BUILD, REPO, Skip, analyze, assert_between, assert_close, assert_eq, assert_rel,
                     assert_true, base_env, fennec_bin, record, region, run, timeout)

CONSUMERS = os.path.join(REPO, "tests", "consumers")
SPEEDSCOPE = os.path.join(CONSUMERS, "speedscope_import.js")


# --- running exports and consumers -----------------------------------------------------

def export_raw(path, fmt, *opts, out=None):
    cmd = [fennec_bin(), "export", str(path), "--format", fmt] + [str(o) for o in opts]
    if out:
        cmd += ["-o", out]
    return run(cmd, timeout_s=300)


def export(path, fmt, *opts, out=None):
    """Export to OUT (default: export.<fmt>), checked; returns OUT's path."""
    out = out or "export." + fmt
    r = export_raw(path, fmt, *opts, out=out)
    if r.returncode != 0:
        raise AssertionError("fennec export --format %s failed\n  %s" % (fmt, r.describe()))
    assert_true(os.path.exists(out), "fennec export wrote no %s" % out)
    return out


def need_node():
    if not shutil.which("node"):
        raise Skip("node is not installed (make consumers installs it)")
    if not os.path.isdir(os.path.join(CONSUMERS, "node_modules", "speedscope")):
        raise Skip("the npm consumers are not installed: run make consumers")


def speedscope_import(path):
    """What speedscope's importer makes of the file: {importer, profiles: [{name, unit,
    total_weight, frames: [{name, self, total}]}]}."""
    need_node()
    r = run(["node", SPEEDSCOPE, path], timeout_s=300)
    if r.returncode != 0:
        raise AssertionError("speedscope importer failed\n  " + r.describe())
    doc = json.loads(r.stdout)
    assert_true(doc.get("imported"), "speedscope did not recognise %s: %s" % (path, doc))
    return doc


def speedscope_schema_valid(path):
    need_node()
    r = run(["node", SPEEDSCOPE, "--schema", path], timeout_s=300)
    if r.returncode != 0:
        raise AssertionError("schema validation failed to run\n  " + r.describe())
    doc = json.loads(r.stdout)
    assert_true(doc["valid"], "%s does not follow speedscope's file-format schema: %s" % (
        path, json.dumps(doc["errors"])[:2000]))


def go_pprof(*args):
    if not shutil.which("go"):
        raise Skip("go is not installed (Debian golang-go; make deps installs it)")
    env = dict(os.environ, HOME=os.getcwd(), GOCACHE=os.path.join(os.getcwd(), "gocache"),
               PPROF_TMPDIR=os.getcwd(), GOFLAGS="")
    r = run(["go", "tool", "pprof"] + list(args), env=env, timeout_s=300)
    if r.returncode != 0:
        raise AssertionError("go tool pprof failed\n  " + r.describe())
    return r.stdout


def pprof_top(path, sample_index, *extra):
    """go tool pprof -top rows, no node dropped: {name: (flat, flat%, cum, cum%)}, flat and
    cum as printed (in the sample type's unit), the shares as numbers."""
    out = go_pprof("-top", "-nodecount=100000", "-nodefraction=0", "-edgefraction=0",
                   "-sample_index=" + sample_index, *(list(extra) + [path]))
    rows, started = {}, False
    for line in out.splitlines():
        if line.strip().startswith("flat"):
            started = True
            continue
        if not started or not line.strip():
            continue
        parts = line.split()
        flat, flat_pct, _, cum, cum_pct = parts[:5]
        name = " ".join(parts[5:]).replace(" (inline)", "")
        rows[name] = (flat, float(flat_pct.rstrip("%")), cum, float(cum_pct.rstrip("%")))
    assert_true(rows, "go tool pprof -top printed no rows:\n%s" % out)
    return rows, out


def pprof_pct(value, total):
    """A share as go tool pprof prints it (measurement.Percentage): 100 from 99.95 on, two
    decimals from 1 %, two significant digits below."""
    r = 100.0 * value / total
    if 99.95 <= r <= 100.05:
        return 100.0
    return float("%.2f" % r) if r >= 1.0 else float("%.2g" % r)


def read_folded(path):
    stacks = {}
    with open(path) as f:
        for line in f:
            line = line.rstrip("\n")
            frames, _, n = line.rpartition(" ")
            assert_true(frames and n.isdigit(), "not a folded line: %r" % line)
            stacks[frames] = stacks.get(frames, 0) + int(n)
    return stacks


# --- the Trace Event Format's rules ----------------------------------------------------

def check_trace(doc, asyncs=None):
    """Checks a Chrome trace (JSON object format) and returns per-thread facts:
    {(pid, tid): {"paths": {path: count}, "steps": n}}, plus counters and samples.
    Rules: known phases and fields; on each thread, timestamps never go backwards in file
    order; every E closes the innermost open B of its thread, with its name; X events nest
    in the open B and do not overlap their siblings; no region is left open. Async events
    (NVTX ranges): every "e" ends the open "b" of its category and id, with its name, not
    before it; ids are not reused while open; none is left open. ASYNCS, a dict, gets
    {id: {"name", "cat", "pid", "tid", "b", "e", "e_tid", "e_args"}} of the pairs."""
    open_async = {}
    assert_eq(doc.get("displayTimeUnit"), "ns", "displayTimeUnit")
    events = doc.get("traceEvents")
    assert_true(isinstance(events, list) and events, "traceEvents: a non-empty list")
    frames = doc.get("stackFrames", {})
    threads, counters, samples, names = {}, {}, [], {}
    for e in events:
        ph = e.get("ph")
        assert_true(ph in ("B", "E", "X", "i", "C", "M", "P", "b", "e"), "unknown phase in %r" % e)
        assert_true(isinstance(e.get("pid"), int) and isinstance(e.get("tid"), int),
                    "pid and tid are integers: %r" % e)
        if ph == "M":
            names[(e["name"], e["pid"], e["tid"])] = e["args"]["name"] if "name" in e["args"] else e["args"]
            continue
        ts = e.get("ts")
        assert_true(isinstance(ts, (int, float)) and ts >= 0, "ts: a number >= 0 in %r" % e)
        key = (e["pid"], e["tid"])
        th = threads.setdefault(key, {"last": 0.0, "stack": [], "paths": {}, "steps": 0,
                                      "sibling_end": [0.0]})
        assert_true(ts >= th["last"], "thread %s: ts goes backwards (%s after %s): %r" % (
            key, ts, th["last"], e))
        th["last"] = ts
        st = th["stack"]
        if ph in ("B", "X"):
            path = "/".join([s["name"] for s in st] + [e["name"]])
            th["paths"][path] = th["paths"].get(path, 0) + 1
            assert_true(ts >= th["sibling_end"][-1] - 1e-3,
                        "thread %s: %s at %s overlaps its previous sibling (ends %s)" % (
                            key, path, ts, th["sibling_end"][-1]))
        if ph == "B":
            st.append({"name": e["name"], "start": ts, "child_end": ts})
            th["sibling_end"].append(ts)
        elif ph == "X":
            end = ts + e["dur"]
            assert_true(e["dur"] >= 0, "negative dur: %r" % e)
            if st:
                st[-1]["child_end"] = max(st[-1]["child_end"], end)
            th["sibling_end"][-1] = end
        elif ph == "E":
            assert_true(st, "thread %s: E with no open B: %r" % (key, e))
            top = st.pop()
            th["sibling_end"].pop()
            assert_eq(e.get("name"), top["name"], "thread %s: E's name (the innermost open B)" % (key,))
            assert_true(ts >= top["child_end"] - 1e-3, "thread %s: %s ends at %s before its child (%s)" % (
                key, top["name"], ts, top["child_end"]))
            th["sibling_end"][-1] = ts
        elif ph == "i":
            if e.get("cat") == "step":
                th["steps"] += 1
        elif ph == "C":
            v = e["args"]["value"]
            assert_true(isinstance(v, (int, float)), "counter value: %r" % e)
            counters.setdefault((e["pid"], e["name"]), []).append(v)
        elif ph == "P":
            sf = str(e["sf"])
            assert_true(sf in frames, "sample's sf %s not in stackFrames" % sf)
            samples.append(e)
        elif ph in ("b", "e"):
            assert_true("id" in e and isinstance(e.get("name"), str) and e.get("cat"),
                        "async event with an id, a name and a category: %r" % e)
            k = (e["cat"], e["id"])
            if ph == "b":
                assert_true(k not in open_async, "async id %s begun again while open: %r" % (k, e))
                open_async[k] = {"name": e["name"], "cat": e["cat"], "pid": e["pid"], "tid": e["tid"],
                                 "b": ts}
            else:
                assert_true(k in open_async, "async e with no open b: %r" % e)
                a = open_async.pop(k)
                assert_eq(e["name"], a["name"], "async %s: e's name (its b's)" % (k,))
                assert_true(ts >= a["b"], "async %s ends (%s) before it begins (%s)" % (k, ts, a["b"]))
                a.update(e=ts, e_tid=e["tid"], e_args=e.get("args", {}))
                if asyncs is not None:
                    assert_true(e["id"] not in asyncs, "async id %s used twice" % e["id"])
                    asyncs[e["id"]] = a
    assert_eq(sorted(open_async), [], "async events left open")
    for key, th in threads.items():
        assert_eq([s["name"] for s in th["stack"]], [], "thread %s: regions left open" % (key,))
    for fid, fr in frames.items():
        assert_true("name" in fr, "stackFrames[%s] has no name" % fid)
        if "parent" in fr:
            assert_true(str(fr["parent"]) in frames, "stackFrames[%s]: parent %s missing" % (
                fid, fr["parent"]))
    return threads, counters, samples, names


def region_counts(threads):
    total = {}
    for th in threads.values():
        for path, n in th["paths"].items():
            total[path] = total.get(path, 0) + n
    return total


# --- chrome-trace on regions, steps and metrics -----------------------------------------

def test_chrome_trace_regions_match_analysis():
    _, path = record("nested", 300, opts=("--sample", "off"))
    rep = analyze(path)
    out = export(path, "chrome-trace")
    with open(out) as f:
        doc = json.load(f)
    threads, _, _, names = check_trace(doc)
    counts = region_counts(threads)
    want = {r["path"]: r["count"] + r["open"] for r in rep["regions"]}
    assert_eq(counts, want, "region calls per path in the trace vs fennec analyze")
    steps = sum(th["steps"] for th in threads.values())
    assert_eq(steps, rep["summary"]["marks"], "step events vs summary.marks")
    for t in rep["threads"]:
        assert_true(("thread_name", t["pid"], t["tid"]) in names,
                    "no thread_name metadata for pid %s tid %s" % (t["pid"], t["tid"]))
    for p in rep["processes"]:
        assert_true(("process_name", p["pid"], 0) in names, "no process_name for pid %s" % p["pid"])
    # speedscope's Trace Event importer: each region's total time, in microseconds
    ss = speedscope_import(out)
    assert_true(any("Trace Event" in m for m in ss["importer"]), "importer: %s" % ss["importer"])
    assert_eq(len(ss["profiles"]), 1, "speedscope profiles (one thread)")
    frames = {fr["name"]: fr for fr in ss["profiles"][0]["frames"]}
    for name in ("phase_a", "phase_b", "inner_x"):
        r = [x for x in rep["regions"] if x["name"] == name][0]
        # one microsecond of rounding per call at most
        assert_close(frames[name]["total"], r["total_ns"] / 1000.0, r["count"] * 0.002 + 0.01,
                     "speedscope total of %s vs analyze total_ns" % name, "us")


def test_chrome_trace_threads_and_metrics():
    _, path = record("threads", 10, opts=("--sample", "off"))
    rep = analyze(path)
    doc = json.load(open(export(path, "chrome-trace")))
    threads, _, _, _ = check_trace(doc)
    want = {r["path"]: r["count"] + r["open"] for r in rep["regions"]}
    assert_eq(region_counts(threads), want, "region calls per path, 4 threads")
    busy = [k for k, th in threads.items() if th["paths"]]
    assert_eq(len(busy), 4, "threads with regions")
    # --thread: only that thread's events
    tid = [t for t in rep["threads"] if t["name"] == "worker-2"][0]["tid"]
    doc = json.load(open(export(path, "chrome-trace", "--thread", tid, out="t2.json")))
    threads, _, _, _ = check_trace(doc)
    assert_eq(sorted(k[1] for k, th in threads.items() if th["paths"]), [tid], "threads with --thread")
    assert_eq(region_counts(threads), {"work": 15, "tail_2": 1}, "worker-2's regions")

    _, path = record("metrics", out="m.fnc", opts=("--sample", "off"))
    rep = analyze(path)
    doc = json.load(open(export(path, "chrome-trace", out="m.json")))
    _, counters, _, _ = check_trace(doc)
    for m in rep["metrics"]:
        vals = [v for (pid, name), vs in counters.items() if name == m["name"] for v in vs]
        assert_eq(len(vals), m["count"], "counter events of %s" % m["name"])
        if m["kind"] == "counter":
            assert_close(vals[-1], m["total"], 1e-9, "last value of counter %s (running total)" % m["name"])
        elif m["kind"] == "gauge":
            assert_close(vals[-1], m["last"], 1e-12, "last value of gauge %s" % m["name"])
            assert_close(min(vals), m["min"], 1e-12, "min of gauge %s" % m["name"])


def test_chrome_trace_processes_line_up():
    _, path = record("forker", "exec", opts=("--sample", "off"))
    rep = analyze(path)
    doc = json.load(open(export(path, "chrome-trace")))
    threads, _, _, names = check_trace(doc)
    assert_eq(region_counts(threads), {r["path"]: r["count"] + r["open"] for r in rep["regions"]},
              "region calls per path, all processes")
    pids = {k[0] for k, th in threads.items() if th["paths"]}
    assert_eq(len(pids), len({p["pid"] for p in rep["processes"]}), "processes with events")

    # One time line: the child's work starts after the parent's (it forks after it).
    def first(name):
        return min(e["ts"] for e in doc["traceEvents"] if e.get("name") == name and e["ph"] in "BX")
    assert_true(first("parent_work") < first("child_work") < first("exec_work"),
                "parent_work, child_work, exec_work in time order: %s %s %s" % (
                    first("parent_work"), first("child_work"), first("exec_work")))
    wall_us = rep["summary"]["wall_ns"] / 1000.0
    last = max(e["ts"] + e.get("dur", 0) for e in doc["traceEvents"] if "ts" in e)
    assert_between(last, 0, wall_us * 1.5 + 100000, "last event time", "us")


def test_chrome_trace_nvtx():
    """NVTX start/end ranges and marks of tests/gpu/nvtx_app.c: b/e pairs with one id each
    (the range ended by another thread too, on the thread that started it) and instant
    events, named as the program named them, as many as the analysis counts, lasting what
    it measured."""
    exe = os.path.join(BUILD, "tests", "nvtx_app")
    if not os.path.exists(exe):
        raise Skip("built without the CUDA toolkit's headers (tests/gpu/nvtx_app.c includes NVTX 3)")
    env = base_env({"FENNEC_LIBCUDA": os.path.join(BUILD, "fixtures", "libfakecuda.so"),
                    "FENNEC_NVML": "/nonexistent/libnvidia-ml.so.1"})
    _, path = record(exe, opts=["--gpu", "--sample", "off"], env=env)
    rep = analyze(path)
    out = export(path, "chrome-trace")
    doc = json.load(open(out))
    asyncs = {}
    threads, _, _, _ = check_trace(doc, asyncs)
    # the push/pop ranges are regions, as before
    assert_eq(region_counts(threads), {r["path"]: r["count"] + r["open"] for r in rep["regions"]},
              "region calls per path")
    main = [t for t in rep["threads"] if t["name"] == "main" or t["tid"] == rep["processes"][0]["pid"]][0]
    pid = rep["processes"][0]["pid"]
    ranges = {}
    for a in asyncs.values():
        assert_eq((a["cat"], a["pid"], a["tid"], a["e_tid"]), ("nvtx", pid, main["tid"], main["tid"]),
                  "range %s: category, and both ends on the starting thread" % a["name"])
        ranges.setdefault(a["name"], []).append(a)
    want = {r["name"]: r for r in rep["gpu"]["nvtx"]["ranges"]}
    assert_eq(sorted(ranges), ["handoff", "io", "load", "wide start"], "range names")
    for name, r in want.items():
        got = ranges[name]
        assert_eq(len(got), r["count"], "%s: b/e pairs" % name)
        total_us = sum(a["e"] - a["b"] for a in got)
        # each end rounded to a microsecond with three decimals
        assert_close(total_us, r["total_ns"] / 1000.0, 0.002 * r["count"] + 0.001, "%s: total time" % name, "us")
    (h,) = ranges["handoff"]
    other = h["e_args"].get("ended_on_tid")
    assert_true(isinstance(other, int) and other != main["tid"], "handoff: ended on another thread: %r" % h)
    for name in ("load", "io", "wide start"):
        assert_true(all("ended_on_tid" not in a["e_args"] for a in ranges[name]), "%s: ended where it began" % name)
    marks = {}
    for e in doc["traceEvents"]:
        if e.get("cat") == "nvtx" and e["ph"] == "i":
            assert_eq((e.get("s"), e["pid"], e["tid"]), ("t", pid, main["tid"]), "mark %r: thread scope, its thread" % e)
            marks[e["name"]] = marks.get(e["name"], 0) + 1
    assert_eq(marks, {m["name"]: m["count"] for m in rep["gpu"]["nvtx"]["marks"]}, "marks by name vs the analysis")
    assert_eq(marks, {"epoch": 3, "checkpoint \u2713": 1, "sync point": 1}, "marks by name")
    # --thread of the thread that only ended a range: none of the NVTX events
    doc = json.load(open(export(path, "chrome-trace", "--thread", other, out="other.json")))
    assert_eq([e for e in doc["traceEvents"] if e.get("cat") == "nvtx"], [], "NVTX events with --thread OTHER")
    # speedscope's importer still reads the file
    try:
        ss = speedscope_import(out)
    except Skip:
        return
    assert_true(any("Trace Event" in m for m in ss["importer"]), "importer: %s" % ss["importer"])


# --- speedscope on regions --------------------------------------------------------------

def test_speedscope_regions():
    _, path = record("nested", 300, opts=("--sample", "off"))
    rep = analyze(path)
    out = export(path, "speedscope")
    speedscope_schema_valid(out)
    ss = speedscope_import(out)
    assert_true(any("speedscope" in m for m in ss["importer"]), "importer: %s" % ss["importer"])
    prof = [p for p in ss["profiles"] if p["name"].endswith("regions")]
    assert_eq(len(prof), 1, "evented region profiles (one thread)")
    frames = {fr["name"]: fr for fr in prof[0]["frames"]}
    for r in rep["regions"]:
        # per call, the begin and end are rounded to the ns separately
        assert_close(frames[r["name"]]["total"], r["total_ns"], 2 * r["count"] + 1,
                     "speedscope total of %s vs analyze total_ns" % r["name"], " ns")
    a, x = region(rep, "phase_a"), region(rep, "phase_a/inner_x")
    assert_close(frames["phase_a"]["self"], a["self_ns"], 4 * a["count"] + 1,
                 "speedscope self of phase_a vs analyze self_ns", " ns")
    assert_eq(prof[0]["unit"], "nanoseconds", "unit")


# --- no samples ------------------------------------------------------------------------

def test_sample_formats_without_samples():
    _, path = record("nested", 100, opts=("--sample", "off"))
    for fmt in ("folded", "svg", "pprof"):
        r = export_raw(path, fmt, out="x." + fmt)
        assert_true(r.returncode == 1, "export --format %s of a recording without samples: exit 1\n  %s" % (
            fmt, r.describe()))
        assert_true("no samples in %s: record with --sample=cpu" % path in r.stderr,
                    "message for --format %s: %r" % (fmt, r.stderr))
        assert_true(not os.path.exists("x." + fmt), "no output file is left behind (%s)" % fmt)
    # the trace formats still work on regions alone
    export(path, "chrome-trace")
    export(path, "speedscope")


def test_usage_errors():
    _, path = record("nested", 50, opts=("--sample", "off"))
    for args, word in ((["--format", "nope"], "--format"), (["--format", "folded", "--kind", "x"], "--kind"),
                       (["--format", "svg", "--kind", "all"], "one kind"),
                       (["--format", "pprof", "--prefix", "thread"], "--prefix"),
                       (["--format", "folded", "--thread", "abc"], "--thread"), ([], "format")):
        r = run([fennec_bin(), "export", path] + args)
        assert_eq(r.returncode, 2, "exit status of fennec export %s" % " ".join(args))
        assert_true(word in r.stderr, "message of %s names %r: %r" % (args, word, r.stderr))


# --- the hand-built sample profile (tests/unit/test_export.c) through the consumers -------

def built_exports():
    unit = os.path.join(BUILD, "tests", "unit")
    if not os.path.exists(unit):
        raise AssertionError("unit test binary not built: %s" % unit)
    d = os.path.abspath("built")
    os.makedirs(d, exist_ok=True)
    env = dict(os.environ, FENNEC_EXPORT_DIR=d)
    r = run([unit], env=env, timeout_s=300)
    # Only the export tests matter here (the unit run reports the others on its own).
    for name in ("export_write_for_consumers", "export_folded", "export_pprof"):
        assert_true("ok unit/%s\n" % name in r.stdout, "unit test %s failed\n  %s" % (name, r.describe()))
    for f in ("built.folded", "built.svg", "built.pb.gz", "built.speedscope.json", "built.trace.json"):
        assert_true(os.path.exists(os.path.join(d, f)), "the unit tests wrote no %s" % f)
    return d


def test_built_profile_pprof():
    d = built_exports()
    pb = os.path.join(d, "built.pb.gz")
    # by construction: on-CPU leaf 5, inl 6 (self, in work's address), total 11 periods of 1 ms
    rows, out = pprof_top(pb, "cpu")
    assert_true("Type: cpu" in out, "default sample type cpu:\n" + out)
    assert_close(rows["leaf"][1], 100 * 5 / 11, 0.01, "leaf flat% (cpu)", "%")
    assert_close(rows["inl"][1], 100 * 6 / 11, 0.01, "inl flat% (cpu; inlined into work)", "%")
    assert_close(rows["main"][3], 100.0, 0.01, "main cum%", "%")
    assert_eq(rows["work"][0], "0", "work flat: its samples are at inl's line")
    rows, out = pprof_top(pb, "offcpu")
    assert_close(rows["sleep"][1], 100.0, 0.01, "sleep flat% (offcpu)", "%")
    raw = go_pprof("-raw", pb)
    assert_true("region:[outer/inner]" in raw and "thread:[worker]" in raw and "tid:[101]" in raw,
                "labels thread, tid and region:\n" + raw)
    assert_true("abcd" in raw, "build id of the executable's mapping:\n" + raw)
    # speedscope reads it too
    ss = speedscope_import(pb)
    assert_eq(ss["profiles"][0]["total_weight"], 11 * 1000000, "speedscope: cpu ns")


def test_built_profile_folded_svg_speedscope_trace():
    d = built_exports()
    stacks = read_folded(os.path.join(d, "built.folded"))
    assert_eq(stacks, {"main;work;inl;leaf": 5, "main;work": 6}, "folded stacks (cpu)")
    ss = speedscope_import(os.path.join(d, "built.folded"))
    frames = {f["name"]: f for f in ss["profiles"][0]["frames"]}
    assert_eq(ss["profiles"][0]["total_weight"], 11, "speedscope: folded total")
    assert_eq((frames["work"]["self"], frames["leaf"]["self"]), (6, 5), "speedscope: self of work, leaf")

    check_svg(os.path.join(d, "built.svg"), 11, stacks)

    sj = os.path.join(d, "built.speedscope.json")
    speedscope_schema_valid(sj)
    ss = speedscope_import(sj)
    totals = {p["name"]: p["total_weight"] for p in ss["profiles"]}
    assert_eq(totals, {"main [100] CPU": 9000000, "worker [101] CPU": 2000000,
                       "worker [101] off-CPU": 4000000}, "speedscope profiles and their ns")

    doc = json.load(open(os.path.join(d, "built.trace.json")))
    _, _, samples, _ = check_trace(doc)
    assert_eq(len(samples), 14, "P events")
    frames = doc["stackFrames"]
    leafs = {}
    for s in samples:
        names, f = [], str(s["sf"])
        while f:
            names.append(frames[f]["name"])
            f = str(frames[f].get("parent", ""))
        key = ";".join(reversed(names))
        leafs[key] = leafs.get(key, 0) + s["args"]["weight"]
    assert_eq(leafs, {"main;work;inl;leaf": 5, "main;work": 6, "main;sleep": 4}, "stacks of the P events")


def check_svg(path, total, stacks):
    """Parse the SVG; its frames are the folded stacks merged into a tree: the number of
    frames, the root's samples and each frame's samples follow from `stacks`."""
    tree = ET.parse(path)
    ns = "{http://www.w3.org/2000/svg}"
    root = tree.getroot()
    assert_eq(root.tag, ns + "svg", "root element")
    assert_true(root.find(ns + "script") is not None, "inline script")
    frames = [g for g in root.iter(ns + "g") if g.get("class") == "f"]
    assert_true(frames, "no frames in the SVG")
    top = [g for g in frames if g.get("data-d") == "0"]
    assert_eq(len(top), 1, "one root frame")
    assert_eq(int(top[0].get("data-s")), total, "root frame samples = total")
    assert_eq(int(root.get("data-total")), total, "data-total")
    # the tree of the folded stacks, and which of its nodes are wide enough to draw
    nodes = {}
    for st, n in stacks.items():
        parts = st.split(";")
        for i in range(1, len(parts) + 1):
            nodes[tuple(parts[:i])] = nodes.get(tuple(parts[:i]), 0) + n
    min_w = 0.1 * total / (1200 - 20)
    want = {k: v for k, v in nodes.items() if v >= min_w and all(
        nodes[k[:j]] >= min_w for j in range(1, len(k)))}
    got = {}
    for g in frames:
        d = int(g.get("data-d"))
        if d == 0:
            continue
        got.setdefault((d, g.get("data-n")), []).append(int(g.get("data-s")))
        title = g.find(ns + "title").text
        assert_true(title.startswith(g.get("data-n")) and "samples" in title and "%" in title,
                    "hover title with name, samples and %%: %r" % title)
    assert_eq(len(frames) - 1, len(want), "frames drawn (root excluded)")
    by_level = {}
    for k, v in want.items():
        by_level.setdefault((len(k), k[-1]), []).append(v)
    assert_eq({k: sorted(v) for k, v in got.items()}, {k: sorted(v) for k, v in by_level.items()},
              "frames (depth, name) and their samples")


# --- sampled recordings ----------------------------------------------------------------

def record_sampled(prog, *args, opts=("--sample", "cpu"), out="run.fnc"):
    _, path = record(prog, *args, opts=opts, out=out)
    r = export_raw(path, "folded", out="probe.folded")
    if r.returncode != 0 and "no samples in" in r.stderr:
        raise Skip("the analysis model has no samples yet (the samples analysis is not on main): %s"
                   % r.stderr.strip())
    if r.returncode != 0:
        raise AssertionError("fennec export --format folded failed\n  " + r.describe())
    return path


def check_pprof_against_report(pb, funcs, weight, index, kind=None):
    """go tool pprof against fennec analyze's function list (functions or offcpu_functions)
    and that kind's summed weight: for every function with at least 0.5 % of it, pprof's
    flat and cum sample counts are the report's self_samples and total_samples, and its
    share in the time sample type (cpu or offcpu) is the report's self share."""
    extra = ("-tagfocus=kind=^%s$" % kind,) if kind else ()  # a regexp: cpu is in offcpu
    counts, out = pprof_top(pb, "samples", *extra)
    shares, _ = pprof_top(pb, index, *extra)
    lead = [f for f in funcs if f["self_samples"] >= 0.005 * weight]
    assert_true(lead, "%s: no function with 0.5 %% of the samples in the report" % index)
    # pprof's -top merges functions of one name (usleep of libc and of an interposer):
    # compare per name; a merged total is between the largest and the sum.
    by_name = {}
    for f in funcs:
        by_name.setdefault(f["name"], []).append(f)
    for f in lead:
        name, same = f["name"], by_name[f["name"]]
        assert_true(name in counts, "%s: %s missing from go tool pprof -top:\n%s" % (index, name, out))
        flat, _, cum, _ = counts[name]
        self_ = sum(g["self_samples"] for g in same)
        assert_eq(int(flat), self_, "%s: pprof flat samples of %s vs analyze self_samples" % (index, name))
        if len(same) == 1:
            assert_eq(int(cum), f["total_samples"], "%s: pprof cum samples of %s vs analyze total_samples" % (
                index, name))
        else:
            assert_between(int(cum), max(g["total_samples"] for g in same),
                           sum(g["total_samples"] for g in same), "%s: pprof cum of %s (merged)" % (index, name))
        assert_close(shares[name][1], pprof_pct(self_, weight), 1e-9,
                     "%s: pprof flat%% of %s vs its share in the report" % (index, name), "%")


@timeout(240)
def test_sampled_cpu_shares_all_formats():
    path = record_sampled("cpu_shares", 2000, "truth.json")
    truth = json.load(open("truth.json"))
    rep = analyze(path)
    weight = rep["samples"]["cpu_weight"]
    stacks = read_folded(export(path, "folded"))
    total = sum(stacks.values())
    assert_eq(total, weight, "folded total vs analyze samples.cpu_weight")
    assert_true(total > 200, "enough samples (%d)" % total)

    def self_of(name):
        return sum(n for st, n in stacks.items() if st.split(";")[-1] == name)
    funcs = {f["name"]: f for f in rep["functions"]}
    for fn in ("work_a", "work_b", "work_c"):
        assert_eq(self_of(fn), funcs[fn]["self_samples"], "folded self of %s vs analyze self_samples" % fn)
        # and what the program measured itself: sampling error is well within 5 points here
        assert_close(100.0 * self_of(fn) / total, 100.0 * truth[fn + "_ns"] / truth["thread_cpu_ns"], 5.0,
                     "folded: %s share vs its measured CPU share" % fn, "%")

    # pprof through go tool pprof: the same functions and shares as fennec's report
    pb = export(path, "pprof", out="cpu.pb.gz")
    with gzip.open(pb) as f:
        assert_true(len(f.read()) > 0, "pprof output inflates")
    check_pprof_against_report(pb, rep["functions"], weight, "cpu")

    # speedscope: schema-valid, imported, weights in ns of the recording's period
    sj = export(path, "speedscope")
    speedscope_schema_valid(sj)
    ss = speedscope_import(sj)
    cpu = [p for p in ss["profiles"] if p["name"].endswith(" CPU")]
    assert_eq(sum(p["total_weight"] for p in cpu), weight * rep["samples"]["period_ns"],
              "speedscope CPU ns vs cpu_weight * period_ns")
    sframes = {}
    for p in cpu:
        for fr in p["frames"]:
            sframes[fr["name"]] = sframes.get(fr["name"], 0) + fr["self"]
    for fn in ("work_a", "work_b", "work_c"):
        assert_eq(sframes[fn], funcs[fn]["self_samples"] * rep["samples"]["period_ns"],
                  "speedscope self of %s" % fn)
    ssf = speedscope_import(export(path, "folded", out="again.folded"))
    assert_eq(ssf["profiles"][0]["total_weight"], total, "speedscope's reading of folded")

    # svg: frames and root total from the folded stacks
    check_svg(export(path, "svg"), total, stacks)

    # chrome-trace: one P event per sample, every sf in the tree
    doc = json.load(open(export(path, "chrome-trace")))
    _, _, samples, _ = check_trace(doc)
    assert_eq(len(samples), rep["samples"]["count"], "chrome-trace P events vs samples.count")
    assert_eq(sum(s["args"]["weight"] for s in samples if s["cat"] == "cpu"), total,
              "chrome-trace sample weights vs folded")


@timeout(240)
def test_sampled_offcpu():
    path = record_sampled("offcpu", 10, 100, opts=("--sample", "wall"))
    rep = analyze(path)
    off = read_folded(export(path, "folded", "--kind", "offcpu", out="off.folded"))
    assert_eq(sum(off.values()), rep["samples"]["offcpu_weight"], "folded --kind offcpu total vs offcpu_weight")
    on = read_folded(export(path, "folded", out="on.folded"))
    assert_eq(sum(on.values()), rep["samples"]["cpu_weight"], "folded (cpu) total vs cpu_weight")
    pb = export(path, "pprof", out="wall.pb.gz")
    check_pprof_against_report(pb, rep["offcpu_functions"], rep["samples"]["offcpu_weight"], "offcpu", "offcpu")
    check_pprof_against_report(pb, rep["functions"], rep["samples"]["cpu_weight"], "cpu", "cpu")
    sj = export(path, "speedscope")
    speedscope_schema_valid(sj)
    ss = speedscope_import(sj)
    offp = [p for p in ss["profiles"] if p["name"].endswith("off-CPU")]
    assert_eq(sum(p["total_weight"] for p in offp), rep["samples"]["offcpu_weight"] * rep["samples"]["period_ns"],
              "speedscope off-CPU ns")


@timeout(240)
def test_sampled_regions_filter_and_prefix():
    path = record_sampled("region_funcs", 10, 100)
    all_ = read_folded(export(path, "folded"))
    total = sum(all_.values())
    fwd = read_folded(export(path, "folded", "--region", "forward", out="fwd.folded"))
    pre = read_folded(export(path, "folded", "--prefix", "thread,region", out="pre.folded"))
    assert_eq(sum(pre.values()), total, "prefixed total = total")
    in_fwd = sum(n for st, n in pre.items() if "{forward}" in st.split(";"))
    assert_eq(sum(fwd.values()), in_fwd, "--region forward = stacks under {forward} with --prefix region")
    assert_true(all(st.split(";")[0].endswith("]") for st in pre), "thread frame first: %s" % list(pre)[:3])
    fwd_fn = sum(n for st, n in fwd.items() if "forward_fn" in st.split(";"))
    assert_rel(fwd_fn, sum(fwd.values()), 0.1, "samples in region forward are in forward_fn")
    # the same selection as fennec analyze --region and --thread
    sel = analyze(path, "--region", "forward")["samples"]["selection"]
    assert_eq(sum(fwd.values()), sel["cpu_weight"], "--region forward vs analyze --region forward")
    rep = analyze(path)
    tid = rep["threads"][0]["tid"]
    one = read_folded(export(path, "folded", "--thread", tid, out="one.folded"))
    sel = analyze(path, "--thread", tid)["samples"]["selection"]
    assert_eq(sum(one.values()), sel["cpu_weight"], "--thread vs analyze --thread")
    # chrome-trace: the samples interleave with the regions of their thread in time order
    doc = json.load(open(export(path, "chrome-trace")))
    threads, _, samples, _ = check_trace(doc)
    assert_eq(region_counts(threads), {r["path"]: r["count"] + r["open"] for r in rep["regions"]},
              "region calls per path")
    assert_eq(len(samples), rep["samples"]["count"], "P events vs samples.count")
    for r in ("forward", "backward"):
        calls = [e for e in doc["traceEvents"] if e.get("name") == r and e["ph"] in "BX"]
        assert_true(calls, "no %s events" % r)
    ss = speedscope_import(export(path, "speedscope"))
    names = sorted(p["name"].rsplit(" ", 1)[1] for p in ss["profiles"])
    assert_eq(names, ["CPU", "regions"], "speedscope profiles of the thread")

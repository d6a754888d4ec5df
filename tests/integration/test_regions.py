"""Regions: shares, counts, nesting, self vs total, threads, and the report formats.
Fixtures: nested.c (known shares), threads.c (4 threads)."""

import os

from helpers import (timing, MS, SLOW, analyze, base_env, analyze_raw, assert_between, assert_close,
                     assert_duration, assert_eq, assert_rel, assert_true, collector, maybe_region,
                     parse_json, record, record_and_analyze, region)

NESTED_MS = 1000
# known by construction (nested.c): path -> (count, share %, self %)
NESTED = {
    "phase_a": (10, 30.0, 20.0),
    "phase_a/inner_x": (10, 10.0, 10.0),
    "phase_b": (10, 50.0, 50.0),
}


@timing
def test_nested_shares():
    rep, _ = record_and_analyze("nested", NESTED_MS)
    wall = rep["summary"]["wall_ns"]
    assert_between(wall, NESTED_MS * MS, NESTED_MS * MS + 250 * MS * SLOW, "summary.wall_ns")
    for path, (_, share, self_share) in NESTED.items():
        r = region(rep, path)
        assert_close(r["share_pct"], share, 2.0, "%s share_pct" % path, "%")
        assert_close(r["self_pct"], self_share, 2.0, "%s self_pct" % path, "%")
        # share_pct is total_ns / wall_ns by definition
        assert_close(r["share_pct"], r["total_ns"] * 100.0 / wall, 0.01,
                     "%s share_pct vs total_ns/wall_ns" % path)


@timing
def test_nested_counts_and_durations():
    rep, _ = record_and_analyze("nested", NESTED_MS)
    iter_ns = NESTED_MS * MS // 10
    for path, (count, share, self_share) in NESTED.items():
        r = region(rep, path)
        assert_eq(r["count"], count, "%s count" % path)
        assert_eq(r["name"], path.split("/")[-1], "%s name" % path)
        assert_eq(r["depth"], path.count("/"), "%s depth" % path)
        assert_eq(r["threads"], 1, "%s threads" % path)
        assert_eq(r["open"], 0, "%s open" % path)
        call = iter_ns * share / 100
        assert_duration(r["total_ns"], call * count, "%s total_ns" % path)
        assert_duration(r["mean_ns"], call, "%s mean_ns" % path, calls=count)
        assert_duration(r["self_ns"], iter_ns * self_share / 100 * count, "%s self_ns" % path)
        assert_true(r["min_ns"] <= r["p50_ns"] <= r["p95_ns"] <= r["p99_ns"] <= r["max_ns"],
                    "%s: expected min <= p50 <= p95 <= p99 <= max, got %s" % (
                        path, [r[k] for k in ("min_ns", "p50_ns", "p95_ns", "p99_ns",
                                              "max_ns")]))
        # a call preempted at its end overruns, the next one is shorter: loose bounds
        assert_rel(r["min_ns"], call, 0.25, "%s min_ns" % path, "ns")
        assert_rel(r["max_ns"], call, 0.25, "%s max_ns" % path, "ns")
        assert_rel(r["p50_ns"], call, 0.05, "%s p50_ns" % path, "ns")
        assert_between(r["std_ns"], 0, call * 0.10, "%s std_ns" % path, "ns")
    # no other regions
    assert_eq(sorted(r["path"] for r in rep["regions"]), sorted(NESTED), "region paths")
    # sorted by total_ns descending
    totals = [r["total_ns"] for r in rep["regions"]]
    assert_eq(totals, sorted(totals, reverse=True), "regions sorted by total_ns desc")


def test_nested_self_vs_total():
    rep, _ = record_and_analyze("nested", 300)
    a, x, b = region(rep, "phase_a"), region(rep, "phase_a/inner_x"), region(rep, "phase_b")
    assert_close(a["self_ns"], a["total_ns"] - x["total_ns"], 1000,
                 "phase_a self_ns = total_ns - inner_x total_ns", "ns")
    assert_eq(x["self_ns"], x["total_ns"], "inner_x (a leaf) self_ns == total_ns")
    assert_eq(b["self_ns"], b["total_ns"], "phase_b (a leaf) self_ns == total_ns")
    assert_true(maybe_region(rep, "inner_x") is None,
                "inner_x must only appear nested under phase_a, not at top level")


@timing
def test_nested_steps():
    rep, _ = record_and_analyze("nested", NESTED_MS)
    s = rep["summary"]
    assert_eq(s["steps"], 10, "summary.steps")
    assert_rel(s["step_mean_ns"], NESTED_MS * MS / 10, 0.05, "summary.step_mean_ns", "ns")
    assert_rel(s["step_p50_ns"], NESTED_MS * MS / 10, 0.05, "summary.step_p50_ns", "ns")
    assert_rel(s["steps_per_s"], 10 * 1000 / NESTED_MS, 0.05, "summary.steps_per_s")
    assert_eq(s["items_per_s"], None, "summary.items_per_s without items")
    assert_eq(s["processes"], 1, "summary.processes")
    assert_eq(s["cut_short"], False, "summary.cut_short")
    assert_eq(s["dropped_events"], 0, "summary.dropped_events")
    # 10 iterations * (3 begin + 3 end + 1 step) events at least
    assert_true(s["events"] >= 70, "summary.events: expected >= 70, got %r" % s["events"])
    assert_eq(rep["steps"]["count"], 10, "steps.count")
    assert_eq(len(rep["steps"]["durations_ns"]), 10, "len(steps.durations_ns)")


SCHEMA = {
    "summary": ["command", "wall_ns", "cpu_user_ns", "cpu_sys_ns", "steps", "marks", "setup_ns", "step_mean_ns",
                "step_p50_ns", "step_p95_ns", "step_min_ns", "step_max_ns", "steps_per_s",
                "items_per_s", "items", "dropped_events", "processes", "threads",
                "cut_short", "events"],
    "regions": ["name", "path", "depth", "count", "total_ns", "self_ns", "mean_ns", "std_ns",
                "min_ns", "max_ns", "p50_ns", "p95_ns", "p99_ns", "share_pct", "self_pct",
                "threads", "open"],
    "steps": ["count", "marks", "setup_ns", "recorded", "durations_ns", "items"],
    "threads": ["pid", "tid", "index", "name", "events", "dropped_events", "busy_ns",
                "lifetime_ns"],
    "processes": ["pid", "ppid", "parent_pid", "origin", "rank", "command", "file", "wall_ns",
                  "cpu_user_ns", "cpu_sys_ns", "max_rss_bytes", "threads", "dropped_events",
                  "cut_short"],
}


def test_json_schema_keys():
    rep, path = record_and_analyze("nested", 200)
    for k in ("schema", "fennec_version", "files", "warnings", "summary", "regions", "steps",
              "threads", "processes", "metrics", "findings"):
        assert_true(k in rep, "top-level key %r missing; keys: %s" % (k, sorted(rep)))
    assert_eq(rep["fennec_version"], "0.1.0", "fennec_version")
    assert_eq([os.path.basename(f) for f in rep["files"]], ["run.fnc"], "files")
    assert_eq(rep["warnings"], [], "warnings")
    for section, keys in SCHEMA.items():
        objs = [rep[section]] if isinstance(rep[section], dict) else rep[section]
        assert_true(objs, "section %r is empty" % section)
        for o in objs:
            missing = [k for k in keys if k not in o]
            assert_true(not missing, "%s: keys missing: %s (has %s)" % (
                section, missing, sorted(o)))
    s = rep["summary"]
    assert_true("nested" in s["command"] and "200" in s["command"],
                "summary.command: expected the fixture's command line, got %r" % s["command"])
    p = rep["processes"][0]
    assert_eq(p["origin"], "first", "processes[0].origin")
    assert_eq(p["parent_pid"], 0, "processes[0].parent_pid")
    assert_true(p["rank"] in (None, -1), "processes[0].rank without a RANK variable: "
                "expected null or -1, got %r" % p["rank"])
    assert_true(p["max_rss_bytes"] > 0, "processes[0].max_rss_bytes: expected > 0, got %r"
                % p["max_rss_bytes"])
    for f in rep["findings"]:
        for k in ("type", "severity", "subject", "evidence", "recommendation",
                  "expected_gain_pct"):
            assert_true(k in f, "finding lacks %r: %s" % (k, f))
        assert_true(f["severity"] in ("HIGH", "MEDIUM", "LOW"), "finding severity %r"
                    % f["severity"])
        assert_true("text" in f["evidence"], "finding evidence lacks 'text': %s" % f)


@collector
@timing
def test_threads():
    # 4 spinning threads may share fewer CPUs: a region can overrun its deadline by a
    # time slice when the thread is preempted at its end (the next one is then shorter,
    # the deadlines are chained), so per-call checks allow OVERRUN.
    overrun = 15 * MS * SLOW
    rep, _ = record_and_analyze("threads", 20)
    unit = 20 * MS
    w = region(rep, "work")
    assert_eq(w["count"], 5 + 10 + 15 + 20, "work count")
    assert_eq(w["threads"], 4, "work threads")
    assert_between(w["total_ns"], 50 * unit - 4 * overrun, 50 * unit + 4 * overrun,
                   "work total_ns", "ns")
    for i in range(4):
        t = region(rep, "tail_%d" % i)
        assert_eq(t["count"], 1, "tail_%d count" % i)
        assert_eq(t["threads"], 1, "tail_%d threads" % i)
        assert_close(t["total_ns"], (i + 1) * unit / 2, overrun, "tail_%d total_ns" % i,
                     "ns")
    assert_true(rep["summary"]["threads"] >= 4,
                "summary.threads: expected >= 4, got %r" % rep["summary"]["threads"])
    workers = {t["name"]: t for t in rep["threads"] if t["name"].startswith("worker-")}
    assert_eq(sorted(workers), ["worker-%d" % i for i in range(4)], "worker thread names")
    for i in range(4):
        t = workers["worker-%d" % i]
        busy = (i + 1) * (5 * unit + unit / 2)
        assert_between(t["busy_ns"], busy - overrun, busy + overrun,
                       "worker-%d busy_ns" % i, "ns")
        # 2 events per region call, plus at least a TIME event
        assert_true(t["events"] >= 2 * ((i + 1) * 5 + 1),
                    "worker-%d events: expected >= %d, got %r" % (
                        i, 2 * ((i + 1) * 5 + 1), t["events"]))
    tids = [t["tid"] for t in rep["threads"]]
    assert_eq(len(tids), len(set(tids)), "distinct thread tids")


def test_text_format():
    _, path = record("nested", 200)
    r = analyze_raw(path)
    assert_eq(r.returncode, 0, "fennec analyze (text) exit status")
    for name in ("phase_a", "inner_x", "phase_b"):
        assert_true(name in r.stdout, "text report lacks region %r:\n%s" % (name, r.stdout))
    low = r.stdout.lower()
    assert_true(any(w in low for w in ("wall", "summary")),
                "text report has no summary (no 'wall' or 'summary'):\n%s" % r.stdout)
    r2 = analyze_raw(path, "--format", "text")
    assert_eq(r2.stdout, r.stdout, "--format text output == default output")


def test_output_option():
    _, path = record("nested", 200)
    r = analyze_raw(path, "--format", "json", "-o", "out.json")
    assert_eq(r.returncode, 0, "fennec analyze -o out.json exit status")
    assert_true(os.path.exists("out.json"), "-o out.json wrote no file")
    assert_true("phase_a" not in r.stdout, "-o: the report also went to stdout: %r" % r.stdout)
    with open("out.json") as f:
        rep = parse_json(f.read())
    assert_eq(region(rep, "phase_b")["count"], 10, "phase_b count (from -o file)")
    r = analyze_raw(path, "-o", "out.txt")
    assert_eq(r.returncode, 0, "fennec analyze -o out.txt exit status")
    with open("out.txt") as f:
        txt = f.read()
    assert_true("phase_b" in txt, "text report in -o file lacks phase_b:\n%s" % txt)


def test_hot_threshold():
    _, path = record("nested", 300)

    def hot_subjects(threshold):
        rep = analyze(path, "--hot-threshold", threshold)
        return [f["subject"] for f in rep["findings"] if f["type"] == "hot_operation"]

    low = hot_subjects(20)
    assert_true(any("phase_b" in s for s in low),
                "--hot-threshold 20: expected a hot_operation finding for phase_b (50%%), "
                "got hot_operation subjects %s" % low)
    high = hot_subjects(90)
    assert_true(not any("phase_b" in s for s in high),
                "--hot-threshold 90: expected no hot_operation finding for phase_b (50%%), "
                "got %s" % high)


def test_reference_decoder_agrees():
    """Decode a raw (uncompressed, CLOCK_MONOTONIC) recording with the Python reference
    decoder in fncfile.py and compare with the analysis."""
    import fncfile
    env = base_env({"FENNEC_COMPRESSION": "0", "FENNEC_CLOCK_MONOTONIC": "1"})
    for prog, args in (("nested", [300]), ("threads", [5]), ("steps", [20, 5, 8])):
        out = prog + ".fnc"
        _, path = record(prog, *args, out=out, env=env)
        with open(path, "rb") as f:
            dec = fncfile.decode(f.read())
        assert_eq(dec["header"].get(11), 1, "%s: header clock (1 = CLOCK_MONOTONIC)" % prog)
        ref = fncfile.region_stats(dec)
        rep = analyze(path)
        got = {r["path"]: (r["count"], r["total_ns"]) for r in rep["regions"]}
        assert_eq(sorted(got), sorted(ref), "%s: region paths (analysis vs reference)" % prog)
        for p, (count, ticks) in ref.items():
            assert_eq(got[p][0], count, "%s: %s count (analysis vs reference)" % (prog, p))
            assert_close(got[p][1], ticks, 1000 * count,
                         "%s: %s total_ns (analysis vs reference)" % (prog, p), "ns")
        steps = sum(1 for evs in dec["events"].values() for e in evs if e[0] == "S")
        assert_eq(rep["summary"]["marks"], steps, "%s: step marks (analysis vs reference)" % prog)
        assert_eq(rep["summary"]["steps"], max(steps - 1, 0), "%s: steps, from one mark to the next" % prog)
        events = sum(len(evs) for evs in dec["events"].values())
        assert_true(abs(rep["summary"]["events"] - events) <= events * 0.05 + 10,
                    "%s: summary.events %r vs %d events decoded by the reference"
                    % (prog, rep["summary"]["events"], events))


def test_site_table_full_is_counted():
    """many_sites 100000: a region name per call, each at an address of its own, past the
    65,536 names the collector keeps a process. The calls past the table are one region,
    "<site table full>", and the report's warning counts them: all calls but the 65,535
    that got a name (ids 1 to 65535)."""
    rep, _ = record_and_analyze("many_sites", 100000)
    full = region(rep, "<site table full>")
    named = [r for r in rep["regions"] if r["name"].startswith("r")]
    assert_eq(len(named) + full["count"], 100001, "named regions plus the ones past the table")
    assert_between(full["count"], 100001 - 65535, 100001 - 65000, "calls past the table")
    msg = [w for w in rep["warnings"] if "table of 65536" in w]
    assert_true(msg and ("%d calls were recorded" % full["count"]) in msg[0], "the warning: %r" % rep["warnings"])

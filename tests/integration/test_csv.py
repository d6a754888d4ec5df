"""fennec export --format csv: every table parsed with Python's csv module (RFC 4180) and
checked against what the fixture is known to do (counts, steps, metric values) and
against fennec's own JSON report (analyze --format json), number for number.
Fixtures: nested.c, steps.c, metrics.c (docs/export.md, "csv")."""

import csv
import io
import os

from helpers import (analyze, assert_clean_error, assert_eq, assert_true, fennec_bin, fixture,
                     metric, record, region, run)


def export_csv_raw(path, *opts, out="out.csv"):
    cmd = [fennec_bin(), "export", str(path), "--format", "csv"] + [str(o) for o in opts]
    if out:
        cmd += ["-o", out]
    return run(cmd, timeout_s=300)


def read_csv(path, *opts, out="out.csv"):
    """Export a table, check RFC 4180's line ends, parse it: (header, rows as dicts)."""
    r = export_csv_raw(path, *opts, out=out)
    if r.returncode != 0:
        raise AssertionError("fennec export --format csv failed\n  " + r.describe())
    with open(out, "rb") as f:
        data = f.read()
    assert_true(data.endswith(b"\r\n"), "%s: the last record does not end with CRLF" % out)
    assert_true(b"\n" not in data.replace(b"\r\n", b""),
                "%s: a line ends with LF alone (RFC 4180: CRLF)" % out)
    rows = list(csv.reader(io.StringIO(data.decode("utf-8"), newline="")))
    assert_true(rows, "%s is empty" % out)
    header = rows[0]
    for i, row in enumerate(rows[1:], 2):
        assert_eq(len(row), len(header), "%s: fields on line %d" % (out, i))
    return header, [dict(zip(header, row)) for row in rows[1:]]


def num(s):
    """A CSV number as the JSON report would hold it (None for an empty field)."""
    if s == "":
        return None
    f = float(s)
    return int(f) if f == int(f) and "." not in s and "e" not in s else f


REGION_KEYS = ["path", "name", "depth", "count", "total_ns", "self_ns", "mean_ns", "std_ns", "min_ns",
               "max_ns", "p50_ns", "p95_ns", "p99_ns", "share_pct", "self_pct", "threads", "open",
               "samples", "offcpu_samples"]


def test_csv_regions_match_analysis():
    _, path = record("nested", 300)
    rep = analyze(path)
    header, rows = read_csv(path)  # regions is the default table
    assert_eq(header, REGION_KEYS, "regions header")
    assert_eq([r["path"] for r in rows], [r["path"] for r in rep["regions"]],
              "region rows, in the report's order (total time, descending)")
    for name in ("phase_a", "phase_a/inner_x", "phase_b"):
        row = next(r for r in rows if r["path"] == name)
        assert_eq(int(row["count"]), 10, "%s count (the fixture's 10 iterations)" % name)
    totals = [int(r["total_ns"]) for r in rows]
    assert_eq(totals, sorted(totals, reverse=True), "rows by total_ns, descending")
    for row in rows:
        js = region(rep, row["path"])
        for k in REGION_KEYS:
            got = row[k] if k in ("path", "name") else num(row[k])
            assert_eq(got, js[k], "%s.%s: CSV against the JSON report" % (row["path"], k))
    # the same table named explicitly
    _, again = read_csv(path, "--table", "regions", out="again.csv")
    assert_eq(again, rows, "--table regions = the default table")


def test_csv_steps():
    n, step_ms, items = 20, 10, 32
    _, path = record("steps", n, step_ms, items)
    rep = analyze(path)
    header, rows = read_csv(path, "--table", "steps")
    assert_eq(header, ["step", "start_ns", "duration_ns", "items"], "steps header")
    assert_eq(len(rows), n, "one row per step")
    assert_eq([int(r["step"]) for r in rows], list(range(1, n + 1)), "step numbers")
    assert_eq([int(r["duration_ns"]) for r in rows], rep["steps"]["durations_ns"],
              "duration_ns = the report's steps.durations_ns")
    assert_eq([int(r["items"]) for r in rows], [items] * n, "items of every step (the fixture's)")
    assert_eq(sum(int(r["items"]) for r in rows), rep["summary"]["items"], "items summed = summary.items")
    # a step starts where the previous one ended (the mark), give or take rounding to ns
    for a, b in zip(rows, rows[1:]):
        end = int(a["start_ns"]) + int(a["duration_ns"])
        assert_true(abs(int(b["start_ns"]) - end) <= 2,
                    "step %s starts at %s ns, the previous one ended at %d ns" % (
                        b["step"], b["start_ns"], end))
    last_end = int(rows[-1]["start_ns"]) + int(rows[-1]["duration_ns"])
    assert_true(last_end <= rep["summary"]["wall_ns"],
                "the last step ends at %d ns, after the recording's wall time %d ns" % (
                    last_end, rep["summary"]["wall_ns"]))


def test_csv_metrics():
    _, path = record("metrics", opts=("--sample", "off"))
    rep = analyze(path)
    header, rows = read_csv(path, "--table", "metrics")
    assert_eq(header, ["metric", "kind", "time_ns", "value", "running_total"], "metrics header")
    by = {}
    for r in rows:
        by.setdefault(r["metric"], []).append(r)
    assert_eq(sorted(by), ["balance", "bytes", "loss", "lr", "mt_bytes"], "metrics in the table")
    for name, pts in by.items():
        assert_eq(len(pts), metric(rep, name)["count"], "%s: one row per update (report count)" % name)
        assert_eq({p["kind"] for p in pts}, {metric(rep, name)["kind"]}, "%s kind" % name)
        times = [int(p["time_ns"]) for p in pts]
        assert_eq(times, sorted(times), "%s: rows in time order" % name)
    # counters: the increments as recorded and their running total
    assert_eq({float(p["value"]) for p in by["bytes"]}, {100.0}, "bytes increments")
    assert_eq([num(p["running_total"]) for p in by["bytes"]], list(range(100, 100001, 100)),
              "bytes running_total")
    assert_eq([num(p["value"]) for p in by["balance"]], [5] * 10 + [-3] * 10, "balance increments, in order")
    assert_eq(num(by["balance"][-1]["running_total"]), metric(rep, "balance")["total"], "balance final total")
    assert_eq(num(by["mt_bytes"][-1]["running_total"]), 4000, "mt_bytes final total (4 threads x 250 x 4)")
    # values and gauges, as recorded, in the order they were recorded
    assert_eq([num(p["value"]) for p in by["loss"]], list(range(1, 101)), "loss values")
    assert_eq([float(p["value"]) for p in by["lr"]], [0.1, 0.5, 0.3, 0.25], "lr gauge values")
    assert_eq({p["running_total"] for p in by["loss"] + by["lr"]}, {""},
              "running_total is empty for values and gauges")


def test_csv_samples_and_threads():
    # A program whose name needs quoting: its main thread is named after it (comm), so
    # the thread name in the tables has a comma and a double quote.
    exe = os.path.abspath('st,ep"s')
    os.symlink(fixture("steps"), exe)
    _, path = record(exe, 20, 10, 32)
    rep = analyze(path)
    header, rows = read_csv(path, "--table", "threads", out="threads.csv")
    assert_eq(header, ["pid", "tid", "index", "name", "events", "dropped_events", "busy_ns", "lifetime_ns",
                       "steps", "samples", "offcpu_samples"], "threads header")
    assert_eq(len(rows), len(rep["threads"]), "one row per thread")
    for row, js in zip(rows, rep["threads"]):
        for k in header:
            got = row[k] if k == "name" else num(row[k])
            assert_eq(got, js[k], "thread %s.%s: CSV against the JSON report" % (js["tid"], k))
    assert_eq(rows[0]["name"], 'st,ep"s', "main thread name, through RFC 4180 quoting")

    samples = rep["samples"]
    if not samples["count"]:
        r = export_csv_raw(path, "--table", "samples", out="none.csv")
        assert_clean_error(r, path, "no samples")
        return
    header, rows = read_csv(path, "--table", "samples", out="samples.csv")
    assert_eq(header, ["time_ns", "pid", "tid", "thread", "kind", "weight", "step", "region", "function",
                       "module", "stack"], "samples header")
    assert_eq(len(rows), samples["count"], "one row per sample (samples.count)")
    assert_eq(sum(int(r["weight"]) for r in rows if r["kind"] == "cpu"), samples["cpu_weight"],
              "weights summed = samples.cpu_weight")
    for r in rows:
        assert_true(r["stack"].split(";")[-1] == r["function"],
                    "the leaf of the stack is the function: %r" % r)
        assert_eq(r["thread"], 'st,ep"s', "sample thread name")
        # 21 marks (the loop's start and each step's end): a sample after the last, in
        # the program's exit, has step index 21
        assert_true(0 <= int(r["step"]) <= 21, "step before the sample: %s" % r["step"])
    assert_true({r["region"] for r in rows} <= {"fwd", "bwd", ""}, "regions of the samples: %s" % sorted(
        {r["region"] for r in rows}))
    for name in ("fwd", "bwd"):
        w = sum(int(r["weight"]) for r in rows if r["region"] == name and r["kind"] == "cpu")
        assert_eq(w, region(rep, name)["samples"], "%s: sample weight inside it = the report's" % name)
    # the export's sample filters apply
    _, fwd = read_csv(path, "--table", "samples", "--region", "fwd", "--kind", "cpu", out="fwd.csv")
    assert_eq(len(fwd), sum(1 for r in rows if r["region"] == "fwd" and r["kind"] == "cpu"),
              "--region fwd --kind cpu rows")


def test_csv_errors():
    _, path = record("metrics", opts=("--sample", "off"))
    r = export_csv_raw(path, "--table", "steps", out="steps.csv")
    assert_clean_error(r, path, "no steps", "fennec_step")
    assert_eq(r.returncode, 1, "exit status without steps")
    assert_true(not os.path.exists("steps.csv"), "a failed export left steps.csv behind")
    r = export_csv_raw(path, "--table", "samples", out="samples.csv")
    assert_clean_error(r, path, "no samples")
    r = export_csv_raw(path, "--table", "bogus")
    assert_eq(r.returncode, 2, "exit status of an unknown table")
    assert_true("regions, steps, metrics, samples or threads" in r.stderr, "names the tables: " + r.stderr)
    r = run([fennec_bin(), "export", path, "--format", "folded", "--table", "steps"])
    assert_eq(r.returncode, 2, "--table with another format")
    r = export_csv_raw(path, "--table", "regions", "--region", "x")
    assert_eq(r.returncode, 2, "--region with a table other than samples")
    r = export_csv_raw(path, "--table", "metrics", out="/nonexistent-dir/m.csv")
    assert_eq(r.returncode, 1, "exit status of an unwritable output")
    assert_true("cannot write /nonexistent-dir/m.csv" in r.stderr, "names the output: " + r.stderr)

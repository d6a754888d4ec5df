"""Metrics (exact totals) and steps (counts, durations, throughput, step sampling).
Fixtures: metrics.c, steps.c."""

from helpers import (timing, MS, analyze_raw, assert_between, assert_close, assert_duration, assert_eq, assert_rel,
                     assert_true, collector, metric, record_and_analyze, region)


def analyze_text(rep_path):
    r = analyze_raw(rep_path, "--format", "text")
    assert_eq(r.returncode, 0, "fennec analyze --format text: " + r.describe())
    return r.stdout


@collector
def test_metrics_exact():
    rep, _ = record_and_analyze("metrics")
    b = metric(rep, "bytes")
    assert_eq(b["kind"], "counter", "bytes kind")
    assert_eq(b["count"], 1000, "bytes count")
    assert_eq(b["total"], 100000, "bytes total")
    assert_true(b["rate_per_s"] is not None and b["rate_per_s"] > 0,
                "bytes rate_per_s: expected > 0, got %r" % b["rate_per_s"])
    bal = metric(rep, "balance")
    assert_eq(bal["count"], 20, "balance count")
    assert_eq(bal["total"], 20, "balance total (10 * 5 + 10 * -3)")
    mt = metric(rep, "mt_bytes")
    assert_eq(mt["count"], 1000, "mt_bytes count (4 threads * 250)")
    assert_eq(mt["total"], 4000, "mt_bytes total")
    loss = metric(rep, "loss")
    assert_eq(loss["kind"], "value", "loss kind")
    assert_eq(loss["count"], 100, "loss count")
    assert_close(loss["mean"], 50.5, 1e-9, "loss mean")
    assert_eq(loss["min"], 1.0, "loss min")
    assert_eq(loss["max"], 100.0, "loss max")
    assert_eq(loss["p50"], 50.0, "loss p50 (nearest rank)")
    assert_eq(loss["p95"], 95.0, "loss p95 (nearest rank)")
    assert_eq(loss["p99"], 99.0, "loss p99 (nearest rank)")
    assert_close(loss["std"], (99_99 / 12) ** 0.5, 1e-6, "loss std (population)")
    lr = metric(rep, "lr")
    assert_eq(lr["kind"], "gauge", "lr kind")
    assert_eq(lr["count"], 4, "lr count")
    assert_eq(lr["last"], 0.25, "lr last")
    assert_eq(lr["min"], 0.1, "lr min")
    assert_eq(lr["max"], 0.5, "lr max")
    assert_eq(sorted(m["name"] for m in rep["metrics"]),
              ["balance", "bytes", "loss", "lr", "mt_bytes"], "metric names")
    assert_eq(region(rep, "metrics_main")["count"], 1, "metrics_main count")


def _check_steps(rep, n=50, step_ms=10, items=32):
    s = rep["summary"]
    assert_eq(s["steps"], n, "summary.steps")
    assert_rel(s["step_mean_ns"], step_ms * MS, 0.05, "summary.step_mean_ns", "ns")
    assert_rel(s["step_p50_ns"], step_ms * MS, 0.05, "summary.step_p50_ns", "ns")
    assert_rel(s["steps_per_s"], 1000 / step_ms, 0.05, "summary.steps_per_s")
    assert_rel(s["items_per_s"], items * 1000 / step_ms, 0.05, "summary.items_per_s")
    assert_eq(s["items"], n * items, "summary.items")
    assert_true(s["step_min_ns"] <= s["step_p50_ns"] <= s["step_p95_ns"] <= s["step_max_ns"],
                "expected step min <= p50 <= p95 <= max, got %s" % [
                    s[k] for k in ("step_min_ns", "step_p50_ns", "step_p95_ns",
                                   "step_max_ns")])
    st = rep["steps"]
    assert_eq((st["count"], st["marks"]), (n, n + 1), "steps.count, steps.marks (the loop's start marked)")
    assert_eq(st["items"], n * items, "steps.items")
    assert_eq(len(st["durations_ns"]), n, "len(steps.durations_ns)")
    # the start-up before main and the loop's start are set-up, no step: every step is
    # step_ms long, give or take a preemption at its end (the deadlines are chained): most
    off = [(i, d) for i, d in enumerate(st["durations_ns"])
           if abs(d - step_ms * MS) > 0.10 * step_ms * MS]
    assert_true(len(off) <= n // 5, "steps.durations_ns: expected at most %d of %d steps "
                "off %d ms by more than 10%%, got %d: %s" % (n // 5, n, step_ms, len(off),
                                                              off[:10]))


@timing
def test_steps_stats():
    rep, _ = record_and_analyze("steps", 50, 10, 32)
    _check_steps(rep)
    assert_eq(rep["steps"]["recorded"], 50, "steps.recorded (no sampling)")
    fwd, bwd = region(rep, "fwd"), region(rep, "bwd")
    assert_eq(fwd["count"], 50, "fwd count")
    assert_eq(bwd["count"], 50, "bwd count")
    assert_duration(fwd["mean_ns"], 4 * MS, "fwd mean_ns", calls=50)
    assert_duration(bwd["mean_ns"], 5 * MS, "bwd mean_ns", calls=50)
    assert_close(fwd["share_pct"], 40, 2, "fwd share_pct", "%")
    assert_close(bwd["share_pct"], 50, 2, "bwd share_pct", "%")
    assert_eq(metric(rep, "tokens")["total"], 50 * 32, "tokens total")


@timing
def test_steps_after_setup():
    """400 ms of set-up, then 30 steps of 10 ms: the set-up is reported as such and is no
    step; the step statistics and throughput are the loop's. Without the mark at the loop's
    start the first iteration is set-up too (it ends at the first mark): 29 steps."""
    rep, _ = record_and_analyze("steps", 30, 10, 32, 400, opts=["--sample", "off"])
    _check_steps(rep, n=30)
    s = rep["summary"]
    assert_between(s["setup_ns"], 400 * MS, 400 * MS + 150 * MS, "summary.setup_ns (400 ms of set-up)", "ns")
    assert_eq(rep["steps"]["setup_ns"], s["setup_ns"], "steps.setup_ns")
    assert_duration(region(rep, "setup")["total_ns"], 400 * MS, "the set-up region")
    assert_true(s["step_max_ns"] < 2 * 10 * MS, "no step holds the set-up: max %d ns" % s["step_max_ns"])
    rep, _ = record_and_analyze("steps", 30, 10, 32, 400, 0, opts=["--sample", "off"])
    s = rep["summary"]
    assert_eq((s["steps"], s["marks"], s["items"]), (29, 30, 29 * 32), "without the start mark: steps, marks, items")
    assert_rel(s["step_mean_ns"], 10 * MS, 0.05, "step_mean_ns without the start mark", "ns")
    assert_rel(s["steps_per_s"], 100, 0.05, "steps_per_s without the start mark")
    assert_between(s["setup_ns"], 410 * MS, 410 * MS + 150 * MS, "setup_ns: 400 ms and the first iteration", "ns")
    text = analyze_text(rep_path="run.fnc")
    line = [l for l in text.splitlines() if l.strip().startswith("set-up")]
    assert_true(line and "not a step" in line[0], "the text report's set-up line: %r" % line)


@timing
def test_step_fraction():
    rep, _ = record_and_analyze("steps", 50, 10, 32, opts=["--step-fraction", "0.5"])
    _check_steps(rep)
    rec = rep["steps"]["recorded"]
    assert_true(24 <= rec <= 26, "steps.recorded with --step-fraction 0.5 of 50 steps: "
                "expected 25 +- 1, got %r" % rec)
    fwd, bwd = region(rep, "fwd"), region(rep, "bwd")
    assert_eq(fwd["count"], rec, "fwd count == steps.recorded")
    assert_eq(bwd["count"], rec, "bwd count == steps.recorded")
    assert_duration(fwd["mean_ns"], 4 * MS, "fwd mean_ns", calls=rec)
    assert_eq(metric(rep, "tokens")["total"], rec * 32, "tokens total (recorded steps only)")


@timing
def test_step_schedule():
    # wait 5, warm up 5, record 10, twice: steps 10-19 and 30-39 are recorded
    rep, _ = record_and_analyze("steps", 50, 10, 32, opts=["--step-schedule", "5,5,10,2"])
    _check_steps(rep)
    assert_eq(rep["steps"]["recorded"], 20, "steps.recorded with --step-schedule 5,5,10,2")
    assert_eq(region(rep, "fwd")["count"], 20, "fwd count")
    assert_eq(region(rep, "bwd")["count"], 20, "bwd count")
    assert_eq(metric(rep, "tokens")["total"], 20 * 32, "tokens total (recorded steps only)")

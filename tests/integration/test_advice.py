"""Advice that fits the time and the memory (docs/bottlenecks.md): hot_operation splits a
region's time into on-CPU and off-CPU time before it advises; kernel_time and
rss_above_heap say where time in the kernel and resident memory beyond the heap come from.
The fixture (tests/fixtures/advice.c) measures its own truth."""

import json

from helpers import (SANITIZER, analyze, assert_between, assert_close, assert_eq, assert_true, record, skip_under,
                     statistical, timing)

WALL = ("--sample=wall",)


def findings(rep, kind):
    return [f for f in rep["findings"] if f["type"] == kind]


def one(rep, kind, subject=None):
    f = [x for x in findings(rep, kind) if subject is None or x["subject"] == subject]
    assert_eq(len(f), 1, "%s findings (all findings: %s)" % (kind, [(x["type"], x["subject"]) for x in rep["findings"]]))
    return f[0]


@timing
@statistical
def test_hot_operation_asleep_advises_on_the_wait():
    """advice sleepy 20 20 17: region "serve" computes 17 % of its time and sleeps the rest.
    hot_operation says what share is on CPU (its own measure of thread CPU time, within a
    few points), and advises on the wait, not "halving it saves 50 %"; the saving it
    promises from faster code is the on-CPU part only. In wall mode too, where a thread
    that waits for a CPU counts as running (a busy machine raises the on-CPU share)."""
    skip_under("tsan", "on-CPU shares under TSan measure TSan")
    for opts, over in (((), 6), (WALL, 15)):
        r, path = record("advice", "sleepy", 20, 20, 17, opts=opts)
        t = json.loads(r.stdout)
        truth = 100.0 * t["cpu_ns"] / t["region_ns"]
        f = one(analyze(path), "hot_operation", "serve")
        e = f["evidence"]
        assert_between(e["oncpu_pct"], truth - 6, truth + over, "serve's on-CPU share (%s)" % (opts or "cpu"), " %")
        assert_close(e["oncpu_pct"] + e["offcpu_pct"], 100, 0.01, "on + off", " %")
        rec = f["recommendation"]
        assert_true("off CPU" in rec and "Halving" not in rec, "advice on the wait: %r" % rec)
        on_share = e["share_pct"] * e["oncpu_pct"] / 100
        assert_true("%.1f%%" % on_share in rec, "the on-CPU part of the run (%.1f %%) in %r" % (on_share, rec))


@timing
@statistical
def test_hot_operation_on_cpu_advises_on_the_code():
    """advice sleepy 20 20 100: "serve" computes all its time. Its on-CPU share is the
    measured one, and the advice is about its code, with the saving of halving it."""
    skip_under("tsan", "on-CPU shares under TSan measure TSan")
    r, path = record("advice", "sleepy", 20, 20, 100)
    t = json.loads(r.stdout)
    truth = 100.0 * t["cpu_ns"] / t["region_ns"]
    f = one(analyze(path), "hot_operation", "serve")
    assert_between(f["evidence"]["oncpu_pct"], truth - 6, 100, "serve's on-CPU share", " %")
    if truth >= 60:
        assert_true("Halving its on-CPU time" in f["recommendation"] and "off CPU" not in f["recommendation"],
                    "advice on the code: %r" % f["recommendation"])

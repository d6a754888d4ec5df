"""The critical path of each step (docs/critical_path.md) on steps whose path is known by
construction (tests/fixtures/critpath.c): a main thread that loads, hands work to two
threads, waits for them and updates; the same with the imbalance flipped in some steps; one
thread alone. The walk itself has known-answer unit tests (tests/unit/test_critpath.c)."""

from helpers import (MS, analyze, analyze_raw, assert_close, assert_eq, assert_true, record, region,
                     timing)

UNIT_MS = 5


def cp_of(rep):
    cp = rep.get("critical_path")
    assert_true(cp is not None, "a critical_path with steps")
    return cp


def on_path(cp, name, thread=None):
    """The critical_path.regions entry of region `name` (on `thread`), or None."""
    rows = [r for r in cp["regions"] if r["name"] == name and (thread is None or r["thread"] == thread)]
    assert_true(len(rows) <= 1, "one entry for %s: %r" % (name, rows))
    return rows[0] if rows else None


def chain_names(step, min_share=0.05):
    """The names along a step's chain, pieces under min_share of the step left out."""
    return [c["name"] for c in step["chain"] if c["ns"] >= min_share * step["ns"]]


def check_pieces(step, known, what):
    """The median step's pieces of `known` {name: units} last that long: a sleep may wake
    late on a busy machine (later, never earlier), so up to 4 ms more."""
    for c in step["chain"]:
        if c["name"] in known:
            want = known[c["name"]] * UNIT_MS * MS
            assert_true(want - 0.2 * MS <= c["ns"] <= want + 4 * MS,
                        "%s: %s's piece of the median step: %.2f ms for %d ms" % (what, c["name"], c["ns"] / MS, want / MS))


def check_share(cp, r):
    """A share is the time on the path over the analysed steps' time."""
    assert_close(r["share_pct"], 100.0 * r["ns"] / cp["step_ns"], 1e-6, "%s share_pct" % r["name"], " %")


def check_tiles(cp, what):
    """Each chain covers its step; the shares and untracked time add up to 100 %."""
    for k in ("slowest_step", "median_step"):
        st = cp[k]
        assert_eq(sum(c["ns"] for c in st["chain"]), st["ns"], "%s: %s chain covers the step" % (what, k))
        at = 0
        for c in st["chain"]:
            assert_eq(c["start_ns"], at, "%s: %s pieces follow one another" % (what, k))
            at += c["ns"]
    total = sum(r["share_pct"] for r in cp["regions"]) + cp["untracked_pct"]
    assert_close(total, 100.0, 0.01, "%s: shares + untracked" % what, " %")


@timing
def test_critical_path_fork_join():
    """critpath fork: load 2 units, work_a 6 (worker-a) and work_b 3 (worker-b) while main
    waits in "wait", update 1. Path: load -> work_a -> update; work_b is not on it."""
    steps = 10
    _, path = record("critpath", "fork", steps, UNIT_MS)
    rep = analyze(path)
    cp = cp_of(rep)
    assert_eq(cp["steps"], steps, "steps analysed")
    assert_eq(cp["lanes"], 3, "threads with regions in the steps")
    check_tiles(cp, "fork")
    a = on_path(cp, "work_a", "worker-a")
    assert_true(a is not None, "work_a on the path: %r" % cp["regions"])
    assert_eq(on_path(cp, "work_b"), None, "work_b (half as long as work_a) on the path")
    # Every call of work_a, load and update is on the path, whole: the path's time is theirs.
    for name, path_ in (("work_a", "work_a"), ("load", "iteration/load"), ("update", "iteration/update")):
        r = on_path(cp, name)
        assert_true(r is not None, "%s on the path" % name)
        assert_eq(r["steps_on_path"], steps, "%s: steps on the path" % name)
        assert_close(r["ns"], region(rep, path_)["total_ns"], 0.002 * region(rep, path_)["total_ns"],
                     "%s: time on the path against its total" % name, " ns")
    # Shares: 6, 2 and 1 of the step's 9 units (the first step also holds the start-up, and
    # sleeps wake late on a busy machine: the measured times are the reference).
    for r in cp["regions"]:
        check_share(cp, r)
    load, update = on_path(cp, "load"), on_path(cp, "update")
    assert_true(a["share_pct"] > 1.5 * load["share_pct"] and load["share_pct"] > 1.2 * update["share_pct"],
                "shares in the order of 6, 2, 1 units: %.1f %.1f %.1f %%" % (a["share_pct"], load["share_pct"], update["share_pct"]))
    assert_true(a["share_pct"] > 45, "work_a share %.1f %%, 6/9 known" % a["share_pct"])
    check_pieces(cp["median_step"], {"load": 2, "work_a": 6, "update": 1}, "fork")
    w = on_path(cp, "wait")
    assert_true(w is None or (w["waiting"] and w["share_pct"] < 3),
                "wait is waiting on work_a, only its wake-up latency may be on the path: %r" % w)
    assert_true(cp["untracked_pct"] < 5, "untracked share %.2f %%" % cp["untracked_pct"])
    assert_eq(chain_names(cp["median_step"]), ["load", "work_a", "update"], "the median step's chain")
    assert_eq([c["thread"] for c in cp["median_step"]["chain"] if c["name"] == "work_a"], ["worker-a"],
              "work_a's thread in the chain")
    assert_true(cp["slowest_step"]["ns"] >= cp["median_step"]["ns"], "slowest step not faster than the median")
    text = analyze_raw(path).stdout
    assert_true("Critical path of the steps" in text and "worker-a" in text and "load (" in text,
                "the text report's critical path section:\n" + text)


@timing
def test_critical_path_flips():
    """critpath flip: in steps 3, 7 and 11 of 12, work_b (6 units) outlasts work_a (3): the
    path goes through work_b in those 3 steps and through work_a in the other 9."""
    steps = 12
    _, path = record("critpath", "flip", steps, UNIT_MS)
    cp = cp_of(analyze(path))
    assert_eq(cp["steps"], steps, "steps analysed")
    check_tiles(cp, "flip")
    a, b = on_path(cp, "work_a", "worker-a"), on_path(cp, "work_b", "worker-b")
    assert_true(a is not None and b is not None, "both workers on the path: %r" % cp["regions"])
    # A worker woken 15 ms late (seen under ASan on a busy machine) really does end last:
    # one step more for work_b is the timing's answer, not a wrong one.
    assert_true(b["steps_on_path"] in (3, 4), "work_b: steps on the path: %d, 3 known" % b["steps_on_path"])
    assert_eq(a["steps_on_path"], steps - b["steps_on_path"], "work_a: steps on the path: the others")
    if b["steps_on_path"] == 3:  # then only the 6-unit calls are on the path
        assert_close(b["ns"], 3 * 6 * UNIT_MS * MS, 0.05 * 3 * 6 * UNIT_MS * MS, "work_b on the path", " ns")
        assert_close(a["ns"], 9 * 6 * UNIT_MS * MS, 0.05 * 9 * 6 * UNIT_MS * MS, "work_a on the path", " ns")
    for name in ("load", "update"):
        assert_eq(on_path(cp, name)["steps_on_path"], steps, "%s: steps on the path" % name)


@timing
def test_critical_path_single_thread():
    """critpath single: one thread, load 2 units, compute 4, update 1: the path is the
    step's own regions in order, and the text report leaves the section out."""
    steps = 8
    _, path = record("critpath", "single", steps, UNIT_MS)
    rep = analyze(path)
    cp = cp_of(rep)
    assert_eq((cp["steps"], cp["lanes"]), (steps, 1), "steps and lanes")
    check_tiles(cp, "single")
    for name in ("load", "compute", "update"):
        r = on_path(cp, name)
        assert_true(r is not None, "%s on the path" % name)
        assert_eq(r["steps_on_path"], steps, "%s: steps on the path" % name)
        check_share(cp, r)
        assert_close(r["ns"], region(rep, "iteration/" + name)["total_ns"],
                     0.002 * region(rep, "iteration/" + name)["total_ns"], "%s: all of it on the path" % name, " ns")
    assert_true(on_path(cp, "compute")["share_pct"] > 40, "compute share, 4/7 known")
    check_pieces(cp["median_step"], {"load": 2, "compute": 4, "update": 1}, "single")
    assert_eq(chain_names(cp["median_step"]), ["load", "compute", "update"], "the median step's chain")
    text = analyze_raw(path).stdout
    assert_true("Critical path" not in text, "no critical path section for one thread:\n" + text)


@timing
def test_critical_path_step_sampling():
    """--step-fraction 0.5: steps whose regions were not recorded are left out, not walked
    as untracked time."""
    steps = 8
    _, path = record("critpath", "fork", steps, UNIT_MS, opts=("--step-fraction", "0.5"))
    rep = analyze(path)
    cp = cp_of(rep)
    recorded = rep["steps"]["recorded"]
    assert_true(0 < recorded < steps, "some steps recorded: %r" % recorded)
    assert_eq(cp["steps"], recorded, "steps analysed: the recorded ones")
    assert_eq(cp["steps_unrecorded"], steps - recorded, "steps left out")
    assert_eq(on_path(cp, "work_a")["steps_on_path"], recorded, "work_a: steps on the path")
    assert_true(cp["untracked_pct"] < 10, "untracked share %.2f %%" % cp["untracked_pct"])


def test_critical_path_no_steps():
    """A recording without steps has no critical path: null in JSON, nothing in the text."""
    _, path = record("threads", 2)
    assert_eq(analyze(path)["critical_path"], None, "critical_path without steps")
    text = analyze_raw(path).stdout
    assert_true("Critical path" not in text, "no critical path section:\n" + text)

"""The critical path of each step (docs/critical_path.md) on steps whose path is known by
construction (tests/fixtures/critpath.c): a main thread that loads, hands work to two
threads, waits for them and updates; the same with the imbalance flipped in some steps; one
thread alone. Then GPU streams, on recordings written here with every region and kernel at
a chosen time (fncwrite.py): a host that waits for a kernel, for a kernel and a copy on two
streams, a kernel that starts inside its launch region, a kernel off the path. The walk
itself has known-answer unit tests (tests/unit/test_critpath.c)."""

import fncwrite
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


def test_critical_path_steps_without_regions():
    """Steps marked, no region ever opened (a written file): every step is untracked time,
    the chain of each step one untracked piece, and nothing else (under UBSan this once
    sorted a NULL array of entries)."""
    w = fncwrite.Writer()
    m = w.thread(100, MAIN)
    t = w.start_mono_ns
    for k in range(5):
        t += (k + 1) * MS
        w.step(m, t)
    with open("steps.fnc", "wb") as f:
        f.write(w.data())
    cp = cp_of(analyze("steps.fnc"))
    assert_eq((cp["regions"], cp["untracked_pct"]), ([], 100), "regions on the path, untracked share")
    assert_eq([c["untracked"] for c in cp["slowest_step"]["chain"]], [True], "the slowest step's chain")
    check_tiles(cp, "steps without regions")


# --- GPU streams, on recordings written here (tests/integration/fncwrite.py) ------------
#
# Every region, step mark and GPU record lies at a time chosen below, so the path of each
# step is known exactly: the expected chains follow the walk of docs/critical_path.md by
# hand. The kernel's name is mangled as CUPTI reports it; the report demangles it.

GEMM = "gemm(float*, float*, int)"
MAIN, S7, S8 = "main", "GPU 0 stream 7", "GPU 0 stream 8"
KERNEL = {"type": "kernel", "device": 0, "context": 1, "name": 1, "grid_x": 64, "grid_y": 1, "grid_z": 1,
          "block_x": 256, "block_y": 1, "block_z": 1, "registers": 32}


def gpu_steps(shape, steps=6):
    """run.fnc with `steps` steps of `shape` on thread "main" and stream 7 (8 for a copy);
    returns (path, [expected chain per step: [(name or None, lane, ns)]]).

    sync:      launch 2 ms; sync (a waiting name) 20 ms while gemm runs 18 ms on stream 7
               from launch's end; update 3 ms. Path: launch, gemm, sync's last 2 ms, update.
               Step 3's gemm runs 28 ms (sync 30 ms): the slowest step.
    untracked: the same with the wait outside any region: its last 2 ms untracked.
    copy:      gemm 14 ms, then a DtoH copy 4 ms on stream 8: the path crosses both streams.
    overlap:   gemm starts 0.5 ms before launch ends (inside the region that launches it).
    parallel:  gemm 5 ms while the host prepares for 10 ms, sync 1 ms: gemm is off the path
               and sync, which nothing tracked explains, is on it whole."""
    w = fncwrite.Writer()
    m = w.thread(100, MAIN)
    recs, chains = [], []
    t = w.start_mono_ns
    w.step(m, t)  # the loop starts here: a step runs from one mark to the next
    for k in range(steps):
        g = 28 if shape == "sync" and k == 3 else 18
        if shape == "parallel":
            w.region(m, "launch", t, t + 2 * MS)
            w.region(m, "prepare", t + 2 * MS, t + 12 * MS)
            w.region(m, "sync", t + 12 * MS, t + 13 * MS)
            w.region(m, "update", t + 13 * MS, t + 16 * MS)
            recs.append(dict(KERNEL, stream=7, start_ns=t + 2 * MS, end_ns=t + 7 * MS, correlation=k + 1))
            chains.append([("launch", MAIN, 2 * MS), ("prepare", MAIN, 10 * MS), ("sync", MAIN, MS),
                           ("update", MAIN, 3 * MS)])
            n = 16 * MS
        else:
            w.region(m, "launch", t, t + 2 * MS)
            if shape != "untracked":
                w.region(m, "sync", t + 2 * MS, t + (g + 4) * MS)
            w.region(m, "update", t + (g + 4) * MS, t + (g + 7) * MS)
            start = t + 3 * MS // 2 if shape == "overlap" else t + 2 * MS
            if shape == "copy":
                recs.append(dict(KERNEL, stream=7, start_ns=start, end_ns=t + 16 * MS, correlation=2 * k + 1))
                recs.append({"type": "memcpy", "device": 0, "context": 1, "stream": 8, "start_ns": t + 16 * MS,
                             "end_ns": t + 20 * MS, "copy_kind": 2, "src_kind": 3, "dst_kind": 1,
                             "bytes": 1 << 20, "correlation": 2 * k + 2})
                gpu = [(GEMM, S7, 14 * MS), ("memcpy DtoH", S8, 4 * MS)]
            else:
                recs.append(dict(KERNEL, stream=7, start_ns=start, end_ns=t + (g + 2) * MS, correlation=k + 1))
                gpu = [(GEMM, S7, t + (g + 2) * MS - start)]
            chains.append([("launch", MAIN, start - t)] + gpu +
                          [(None if shape == "untracked" else "sync", MAIN, 2 * MS), ("update", MAIN, 3 * MS)])
            n = (g + 7) * MS
        t += n
        w.step(m, t)
    w.gpu(recs, strings=[(1, "_Z4gemmPfS_i")])
    with open("run.fnc", "wb") as f:
        f.write(w.data())
    return "run.fnc", chains


def check_gpu_path(shape, gpu_lanes, waiting=("sync",)):
    """The JSON critical_path of gpu_steps(shape) against the chains known by construction:
    every entry's time, share and steps on the path, untracked time, the slowest and median
    steps' chains (within 1 us a piece: the clock fit's rounding). Returns the report."""
    steps = 6
    path, chains = gpu_steps(shape, steps)
    rep = analyze(path)
    cp = cp_of(rep)
    what = "gpu " + shape
    assert_eq((cp["steps"], cp["steps_total"], cp["gpu_lanes"]), (steps, steps, gpu_lanes),
              "%s: steps analysed, steps, GPU lanes" % what)
    assert_eq(cp["lanes"], 1 + gpu_lanes, "%s: lanes with activity" % what)
    step_ns = [sum(ns for _, _, ns in c) for c in chains]
    assert_close(cp["step_ns"], sum(step_ns), steps * 1000, "%s: step_ns" % what, " ns")
    check_tiles(cp, what)
    want = {}
    for c in chains:
        for name, lane, ns in c:
            e = want.setdefault((name, lane), [0, 0])
            e[0] += ns
            e[1] += 1
    untracked = want.pop((None, MAIN), [0, 0])[0]
    assert_close(cp["untracked_ns"], untracked, steps * 1000, "%s: untracked" % what, " ns")
    got = {(r["name"], r["thread"]): r for r in cp["regions"]}
    assert_eq(sorted(got), sorted(want), "%s: the regions on the path (name, lane)" % what)
    for (name, lane), (ns, n) in want.items():
        r = got[(name, lane)]
        assert_close(r["ns"], ns, n * 1000, "%s: %s on %s, time on the path" % (what, name, lane), " ns")
        assert_eq(r["steps_on_path"], n, "%s: %s steps on the path" % (what, name))
        check_share(cp, r)
        assert_eq(r["gpu"], lane != MAIN, "%s: %s is on a GPU stream" % (what, name))
        assert_eq(r["waiting"], name in waiting, "%s: %s waiting" % (what, name))
    by_ns = sorted(step_ns)
    for key, ns_k in (("slowest_step", by_ns[-1]), ("median_step", by_ns[(steps + 1) // 2 - 1])):
        st = cp[key]
        k = st["index"]  # steps of equal length are all right
        assert_true(0 <= k < steps and step_ns[k] == ns_k, "%s: %s is step %d (%r ns), of %r ns expected"
                    % (what, key, k, step_ns[k] if 0 <= k < steps else None, ns_k))
        got_chain = [(c["name"], c["thread"]) for c in st["chain"]]
        assert_eq(got_chain, [(n, l) for n, l, _ in chains[k]], "%s: %s chain" % (what, key))
        for c, (name, lane, ns) in zip(st["chain"], chains[k]):
            assert_close(c["ns"], ns, 1000, "%s: %s piece %s" % (what, key, name), " ns")
            assert_eq(c["gpu"], lane != MAIN, "%s: %s piece %s on a stream" % (what, key, name))
    return rep


def critpath_section(path):
    text = analyze_raw(path).stdout
    at = text.find("Critical path of the steps")
    assert_true(at >= 0, "the text report's critical path section:\n" + text)
    end = text.find("\n\n", at)
    return text[at:end if end >= 0 else len(text)]


def test_critical_path_gpu_sync():
    """The host waits in "sync" for gemm on stream 7: launch -> gemm (stream 7) -> sync's
    last 2 ms -> update, in every step; shares 2/25, 18/25, 2/25, 3/25 of a 25 ms step
    (the slowest step's 28 ms kernel moves them a little)."""
    rep = check_gpu_path("sync", 1)
    cp = rep["critical_path"]
    gemm = on_path(cp, GEMM, S7)
    assert_close(gemm["share_pct"], 100.0 * (5 * 18 + 28) / (5 * 25 + 35), 0.01, "gemm share", " %")
    assert_eq(cp["untracked_ns"], 0, "untracked time")
    assert_eq(cp["slowest_step"]["index"], 3, "the slowest step: the one with the 28 ms kernel")
    sec = critpath_section("run.fnc")
    assert_true(S7 in sec and GEMM in sec, "the stream and its kernel in the text section:\n" + sec)
    assert_true("launch (main)" in sec and "(GPU 0 stream 7)" in sec,
                "the slowest and median chains go through the stream:\n" + sec)


def test_critical_path_gpu_untracked_wait():
    """The same with the wait outside any region: the 2 ms the host still waits after the
    kernel are untracked; the rest of the path is unchanged."""
    check_gpu_path("untracked", 1, waiting=())


def test_critical_path_gpu_copy():
    """gemm (stream 7) then a DtoH copy (stream 8) while the host waits: the path crosses
    from one stream to the other: launch -> gemm -> memcpy DtoH -> sync -> update."""
    check_gpu_path("copy", 2)
    sec = critpath_section("run.fnc")
    assert_true(S7 in sec and S8 in sec and "memcpy DtoH" in sec, "both streams in the text section:\n" + sec)


def test_critical_path_gpu_kernel_inside_launch():
    """The kernel starts 0.5 ms before the region that launches it ends: the stream's idle
    start goes back to launch (1.5 ms), not to untracked time on the stream."""
    rep = check_gpu_path("overlap", 1)
    assert_eq(rep["critical_path"]["untracked_ns"], 0, "untracked time")


def test_critical_path_gpu_off_path():
    """A 5 ms kernel while the host prepares for 10 ms: the kernel is not on the path, and
    the host's 1 ms sync, which nothing tracked explains, is on it whole, as waiting."""
    check_gpu_path("parallel", 1)
    sec = critpath_section("run.fnc")
    assert_true(GEMM not in sec and "prepare (main)" in sec, "gemm off the path in the text section:\n" + sec)

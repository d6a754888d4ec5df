"""The collector alone, checked with the Python reference decoder (fncfile.decode) on
raw recordings (FENNEC_COMPRESSION=0, FENNEC_CLOCK_MONOTONIC=1: ticks are ns), so a
failure here is the collector's (or the writer's), not the reader's or the analysis'."""

import fncfile
from helpers import (timing, MS, TSAN_FORK, assert_close, assert_eq, assert_true, base_env,
                     collector, record, skip_under, timeout)

RAW = {"FENNEC_COMPRESSION": "0", "FENNEC_CLOCK_MONOTONIC": "1"}


def raw_record(prog, *args, extra=None, **kw):
    env = base_env(dict(RAW, **(extra or {})))
    _, path = record(prog, *args, env=env, **kw)
    with open(path, "rb") as f:
        data = f.read()
    bad = [c for c, ok in fncfile.verify_crcs(data) if not ok]
    assert_eq(bad, [], "chunks with a bad CRC-32C")
    try:
        return fncfile.decode(data)
    except (ValueError, IndexError, KeyError) as e:
        raise AssertionError("reference decoder rejects the recording of %s: %s" % (prog, e))


def metric_events(dec, name):
    ids = [i for i, (k, n) in dec["sites"].items() if n == name]
    assert_eq(len(ids), 1, "sites named %r" % name)
    return [e for evs in dec["events"].values() for e in evs
            if e[0] in "CGV" and e[2] == ids[0]]


@collector
@timing
def test_raw_nested():
    dec = raw_record("nested", 300)
    assert_true(dec["end"], "no END chunk")
    st = fncfile.region_stats(dec)
    assert_eq(sorted(st), ["phase_a", "phase_a/inner_x", "phase_b"], "region paths")
    for path, share in (("phase_a", 30), ("phase_a/inner_x", 10), ("phase_b", 50)):
        assert_eq(st[path][0], 10, "%s count" % path)
        # chained deadlines; a preemption right before a begin shortens that call
        assert_close(st[path][1], 3 * share * MS, 3 * share * MS * 0.02 + 10 * MS,
                     "%s total ns" % path, "ns")
    steps = [e for evs in dec["events"].values() for e in evs if e[0] == "S"]
    assert_eq(len(steps), 11, "STEP events (the loop's start marked too)")
    assert_true(all(e[2] for e in steps), "every step should be marked recorded")


@collector
def test_raw_metrics():
    dec = raw_record("metrics")
    b = metric_events(dec, "bytes")
    assert_eq((len(b), sum(e[3] for e in b)), (1000, 100000), "bytes (count, sum)")
    mt = metric_events(dec, "mt_bytes")
    assert_eq((len(mt), sum(e[3] for e in mt)), (1000, 4000), "mt_bytes (count, sum)")
    bal = metric_events(dec, "balance")
    assert_eq((len(bal), sum(e[3] for e in bal)), (20, 20), "balance (count, sum)")
    loss = metric_events(dec, "loss")
    assert_eq([e[3] for e in loss], [float(i) for i in range(1, 101)], "loss values")
    lr = metric_events(dec, "lr")
    assert_eq([e[3] for e in lr], [0.1, 0.5, 0.3, 0.25], "lr values")


@collector
def test_raw_step_schedule():
    dec = raw_record("steps", 50, 2, 8, extra={"FENNEC_STEP_SCHEDULE": "5,5,10,2"})
    steps = [e for evs in dec["events"].values() for e in evs if e[0] == "S"]
    assert_eq(len(steps), 51, "STEP events (the loop's start marked too)")
    assert_eq([i for i, e in enumerate(steps) if e[2]], list(range(10, 20)) +
              list(range(30, 40)), "steps marked recorded")
    assert_eq(sum(e[3] or 0 for e in steps), 50 * 8, "items")
    st = fncfile.region_stats(dec)
    assert_eq(st.get("fwd", [0])[0], 20, "fwd count")


@collector
@timeout(180)
def test_raw_many_threads():
    dec = raw_record("many_threads", 1000, timeout_s=120)
    assert_true(len(dec["threads"]) >= 1000, "THREAD records: expected >= 1000, got %d"
                % len(dec["threads"]))
    st = fncfile.region_stats(dec)
    assert_eq(st.get("t", [0])[0], 1000, "t count")


@collector
def test_raw_fork_stack():
    skip_under("tsan", TSAN_FORK)
    import glob
    env = base_env(RAW)
    _, path = record("forker", "stack", env=env)
    sib = glob.glob(path + ".*")
    assert_eq(len(sib), 1, "sibling files (%s)" % sib)
    with open(path, "rb") as f:
        parent = fncfile.decode(f.read())
    with open(sib[0], "rb") as f:
        child = fncfile.decode(f.read())
    assert_eq(parent["header"].get(1), child["header"].get(1), "recording_id of both files")
    assert_eq(child["header"].get(13), 1, "child's origin (1 = fork)")
    assert_eq(child["header"].get(12), parent["header"].get(2), "child's parent_pid")
    stacks = [e for evs in child["events"].values() for e in evs if e[0] == "K"]
    assert_eq(len(stacks), 1, "STACK events in the child")
    assert_eq([child["sites"][i][1] for i in stacks[0][2]], ["outer"],
              "inherited regions in the child's STACK event")
    st = fncfile.region_stats(child)
    assert_eq(st.get("outer/child_work", [0])[0], 1, "child: outer/child_work count")
    assert_eq(st.get("outer", [0])[0], 1, "child: outer count")


@collector
def test_raw_heap2_replays_to_the_known_leaks():
    """HEAP2 (format 1.3) decoded by the reference decoder alone: a FREE names the stack and
    size of a block live at that point, and what is left at the end holds the 13 blocks and
    27000 bytes mem_leaks leaks (plus the C runtime's own blocks, not freed either)."""
    from helpers import SANITIZER, Skip
    if SANITIZER:
        raise Skip("the %s build does not interpose malloc" % SANITIZER)
    n = 3000
    dec = raw_record("mem_leaks", n, opts=["--memory=full", "--sample", "off"])
    heap = dec["heap"]
    assert_true(heap is not None, "no HEAP2 chunk")
    live, temporaries = {}, 0
    for r in heap["records"]:
        if r[0] == "alloc":
            key = (r[6], r[5])
            live[key] = live.get(key, 0) + 1
        elif r[0] == "free":
            key = (r[4], r[5])
            assert_true(live.get(key, 0) > 0, "a FREE of stack %d, %d bytes, with none of them live" % key)
            live[key] -= 1
            temporaries += r[6]
    left = {k: c for k, c in live.items() if c}
    left_bytes = sum(size * c for (_, size), c in left.items())
    assert_true(sum(left.values()) >= 13 and left_bytes >= 27000,
                "blocks left at the end: %d, %d bytes (13 and 27000 leaked on purpose)" % (
                    sum(left.values()), left_bytes))
    for size, count in ((1000, 5), (2000, 4), (5000, 1), (3000, 3)):
        got = sum(c for (_, sz), c in left.items() if sz == size)
        assert_true(got >= count, "%d-byte blocks left: %d, leaked: %d" % (size, got, count))
    allocs = sum(1 for r in heap["records"] if r[0] == "alloc")
    assert_eq(allocs, heap["counters"]["allocs"], "ALLOC records against the allocations counted")
    # churn: n malloc/free pairs, each freed before its thread allocates again
    assert_true(temporaries >= n, "temporary frees: %d, churn made %d" % (temporaries, n))



@collector
def test_raw_reach_tells_lost_from_reachable():
    """REACH (format 1.6) decoded by the reference decoder alone: mem_leaks' 13 blocks and
    27000 bytes are lost when it clears the array that held them, and still reachable when
    it keeps them (`reachable`); the blocks each stack has live at the end, per the HEAP2
    replay, are its reachable and lost blocks, no more, no less."""
    from helpers import SANITIZER, Skip
    if SANITIZER:
        raise Skip("the %s build does not interpose malloc" % SANITIZER)
    for how in ("lost", "reachable"):
        dec = raw_record("mem_leaks", 3000, *(["reachable"] if how == "reachable" else []),
                         opts=["--memory=full", "--sample", "off"])
        reach = dec.get("reach")
        assert_true(reach is not None, "%s: no REACH chunk" % how)
        assert_eq(reach["status"], 0, "%s: the scan was made" % how)
        assert_true(reach["root_bytes"] > 0, "%s: roots were read" % how)
        live = {}
        for r in dec["heap"]["records"]:
            if r[0] in ("alloc", "free"):
                sid, size = (r[6], r[5]) if r[0] == "alloc" else (r[4], r[5])
                c, b = live.get(sid, (0, 0))
                d = 1 if r[0] == "alloc" else -1
                live[sid] = (c + d, b + d * size)
        left = {sid: cb for sid, cb in live.items() if cb[0]}
        assert_eq({sid: (e[0] + e[2], e[1] + e[3]) for sid, e in reach["stacks"].items()}, left,
                  "%s: per stack, reachable + lost blocks and bytes against the replay's live ones" % how)
        by_size = {}
        for e in reach["stacks"].values():
            if e[2] and e[3] // e[2] in (1000, 2000, 3000, 5000):
                by_size[e[3] // e[2]] = by_size.get(e[3] // e[2], 0) + e[2]
        sizes = sorted(by_size.items())
        if how == "lost":
            assert_eq(sizes, [(1000, 5), (2000, 4), (3000, 3), (5000, 1)], "lost blocks of the leaking stacks")
        else:
            assert_eq(sizes, [], "lost blocks of the leaking stacks while the array holds them")

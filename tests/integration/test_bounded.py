"""Capped recordings (fennec record --max-size, --max-duration; docs/format.md, "Capped
recordings"): the files stay within the cap, the analysis covers what is kept and says
what was dropped, bad values are refused, a damaged segment is a clean error.
Fixture: steps.c (steps of STEP_MS, region "fwd" 40 % and "bwd" 50 % of each, busy)."""

import glob
import os

from helpers import (analyze, analyze_raw, assert_between, assert_clean_error, assert_close, assert_eq,
                     assert_true, collector, fixture, record, record_command, region, run, skip_under)

MS = 1000000
STEPS, STEP_MS = 1500, 10  # 15 s
CAP = 256 * 1024


def files_of(path):
    return [path] + sorted(glob.glob(path + ".seg.*"))


def capped(opts, steps=STEPS):
    _, path = record("steps", steps, STEP_MS, opts=opts)
    rep = analyze(path)
    return rep, path


def test_max_size_keeps_the_last_steps_within_the_cap():
    # -F 4999: enough samples that 15 s are several times the cap
    rep, path = capped(("--max-size", "256K", "-F", "4999"))
    sizes = [os.path.getsize(p) for p in files_of(path)]
    assert_true(sum(sizes) <= CAP, "files %s sum to %d bytes, over the 256 KiB cap" % (sizes, sum(sizes)))
    assert_true(len(sizes) >= 3, "a capped recording is an entry file and segments: %s" % files_of(path))
    pr = rep["processes"][0]
    cap = pr["capped"]
    assert_eq(cap["max_size_bytes"], CAP, "capped.max_size_bytes")
    assert_true(cap["first_segment"] > 0, "15 s at -F 4999 exceed 256 KiB: older segments are dropped")
    kept = rep["summary"]["steps"]
    # STEP events: the loop's start mark and one per iteration (STEPS + 1); the kept
    # steps run between kept marks, so the dropped marks and the kept steps add up to
    # the total, give or take the step at the cut
    assert_between(cap["dropped_steps"] + kept, STEPS - 1, STEPS + 1, "dropped + kept steps")
    assert_eq(cap["first_step"], cap["dropped_steps"], "the kept steps are the last ones")
    wall = rep["summary"]["wall_ns"]
    assert_close(cap["dropped_ns"] + wall, STEPS * STEP_MS * MS, 300 * MS, "dropped + kept time", "ns")
    assert_close(wall, kept * STEP_MS * MS, 250 * MS, "the kept time is the kept steps'", "ns")
    for name, share in (("fwd", 40.0), ("bwd", 50.0)):
        assert_close(region(rep, name)["share_pct"], share, 3.0, "%s share_pct of what is kept" % name, "%")
    r = analyze_raw(path)
    assert_true(r.returncode == 0 and "were dropped to stay within 256.0 KiB" in r.stdout + r.stderr,
                "the text report says what was dropped\n  " + r.describe())


def test_max_duration_keeps_about_the_last_duration():
    rep, path = capped(("--max-duration", "3s"), steps=800)  # 8 s
    wall = rep["summary"]["wall_ns"]
    # segments of a quarter of the duration, the oldest dropped while the rest cover it
    assert_between(wall, 3000 * MS, 3750 * MS + 250 * MS, "kept time under --max-duration 3s")
    cap = rep["processes"][0]["capped"]
    assert_eq(cap["max_duration_ns"], 3000 * MS, "capped.max_duration_ns")
    assert_close(cap["dropped_ns"] + wall, 800 * STEP_MS * MS, 300 * MS, "dropped + kept time", "ns")


def test_uncapped_recording_has_no_segments():
    rep, path = capped((), steps=20)
    assert_eq(files_of(path), [path], "files of an uncapped recording")
    assert_eq(rep["processes"][0]["capped"], None, "capped of an uncapped recording")


def test_bad_values_exit_2():
    for opts, words in ((("--max-size", "12x"),), ("--max-size",)), \
                       ((("--max-size", "10K"),), ("--max-size",)), \
                       ((("--max-duration", "soon"),), ("--max-duration",)), \
                       ((("--max-duration", "0s"),), ("--max-duration",)), \
                       ((("--max-size", "1M", "--memory", "full"),), ("heap",)), \
                       ((("--max-size", "1M", "--gpu"),), ("--gpu",)):
        cmd, env = record_command(fixture("steps"), (2, 1), opts=opts[0])
        r = run(cmd, env=env)
        assert_eq(r.returncode, 2, "exit status of fennec record %s" % " ".join(opts[0]))
        for w in words:
            assert_true(w in r.stderr, "message names %r\n  %s" % (w, r.describe()))


def test_damaged_segment_is_a_clean_error():
    _, path = record("steps", 400, STEP_MS, opts=("--max-size", "64K", "-F", "4999"))
    segs = files_of(path)[1:]
    assert_true(len(segs) >= 3, "segments: %s" % segs)
    mid = segs[1]
    with open(mid, "rb") as f:
        data = f.read()
    with open(mid, "wb") as f:  # cut in the middle of a chunk
        f.write(data[:len(data) // 2])
    r = analyze_raw(path)
    assert_clean_error(r, mid, "byte")
    with open(mid, "wb") as f:
        f.write(data[:7])  # inside its preamble
    assert_clean_error(analyze_raw(path), mid, "preamble")
    os.unlink(mid)  # a gap
    assert_clean_error(analyze_raw(path), path, "missing")


def test_small_cap_counts_what_its_segments_hold():
    """64 KiB at -F 4999: segments of 16 KiB, a few flushes each, so a segment's first
    events and samples (committed before the flush that opened it) are a large part of it.
    A segment opens at the previous flush's start, before all it holds: the kept time
    holds every kept step and the shares stay those of the fixture. (Opened at its own
    flush, 35 kept steps of 10 ms read as 257 ms of wall time, fwd and bwd 126 %.)"""
    rep, path = capped(("--max-size", "64K", "-F", "4999"), steps=400)
    assert_true(rep["processes"][0]["capped"]["first_segment"] > 0, "4 s at -F 4999 exceed 64 KiB")
    kept, wall = rep["summary"]["steps"], rep["summary"]["wall_ns"]
    assert_between(wall, kept * STEP_MS * MS, kept * STEP_MS * MS + 200 * MS, "the kept time holds the kept steps", "ns")
    total = 0.0
    for name, share in (("fwd", 40.0), ("bwd", 50.0)):
        got = region(rep, name)["share_pct"]
        total += got
        assert_close(got, share, 5.0, "%s share_pct of what is kept" % name, "%")
    assert_true(total <= 100.0, "fwd and bwd %.1f %% of the kept time" % total)


@collector
def test_program_memory_is_flat_in_a_long_run():
    """The collector's rings keep to the pages they touched (ring.h, col_ring_reserve()):
    between the middle and the end of rss_flat, 0.7 MiB of events and 1.4 MiB of heap
    records, the program's resident size grew 2.6 MiB before (the rings' first lap), and
    by 16-48 KiB after. The program itself allocates nothing that lasts."""
    skip_under("asan", "ASan's quarantine and shadow pages grow with every malloc")
    skip_under("tsan", "TSan's shadow memory grows with the pages the program touches")
    # full mode: a 16 MiB heap ring of huge pages, three alloc/free records a step; three
    # times the steps, so that its first quarter (4 MiB) is behind at the middle
    for opts, n in (((), 48000), (("--sample", "off"), 48000), (("--memory", "full"), 144000)):
        what = " ".join(opts) or "defaults"
        r, path = record("rss_flat", n, opts=opts)
        mid, end = (int(x) for x in r.stdout.split()[1:3])
        assert_true(end - mid < 256, "%s: resident size grew %d KiB between the middle and the end "
                    "(from %d KiB; expected under 256)" % (what, end - mid, mid))
        rep = analyze(path)
        assert_eq(rep["steps"]["count"], n, "%s: steps" % what)
        assert_eq(region(rep, "layer")["count"], 8 * n, "%s: layer calls" % what)


@collector
def test_fast_thread_keeps_its_whole_ring():
    """A thread that writes events as fast as it can keeps its whole ring: it skips to the
    next lap only when its quarter took 100 ms or more (api.c, ring_rewind()). flood writes
    10 M pairs in about half a second; with the skip at every quarter it had a quarter of
    its 32 MiB ring until the writer passed the gap, and lost 80 k to 3.2 M of its 20 M
    events in 2 of 3 runs here, where it now loses none. Under a sanitizer the writer is
    slower than the thread, and drops say nothing about the ring."""
    skip_under("asan", "the writer's zstd under ASan drains slower than flood writes")
    skip_under("tsan", "the writer's zstd under TSan drains slower than flood writes")
    r, path = record("flood", "10000000", opts=("--buffer-kb", "32768"))
    rep = analyze(path)
    assert_eq(rep["summary"]["dropped_events"], 0, "dropped events")
    assert_eq(rep["summary"]["events"], 20000001, "events")

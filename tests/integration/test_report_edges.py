"""Reports that used to mislead (tests/fixtures/report_edges.c): a nesting deeper than the
collector tracks blamed on the buffer, steps of several threads counted silently on one,
no samples with no reason, and a megabyte region name kept whole. Each is measured
against what the fixture knows it did."""

from helpers import analyze, analyze_raw, assert_eq, assert_true, record

MAX_DEPTH = 128  # docs/format.md: open regions the collector tracks per thread


def test_deep_nesting_is_not_blamed_on_the_buffer():
    """10,000 nested regions, 3 times: the 128 outermost of each nest are recorded, the rest
    counted as dropped (a begin and an end each); the warning names the nesting limit, not
    --buffer-kb, which would not help."""
    depth, reps = 10000, 3
    _, path = record("report_edges", "deep", depth, reps, opts=("--sample=off",))
    rep = analyze(path)
    levels = [r for r in rep["regions"] if set(r["path"].split("/")) == {"level"}]
    assert_eq(len(levels), MAX_DEPTH, "nesting levels recorded")
    assert_eq(sorted(set(r["count"] for r in levels)), [reps], "calls of each recorded level")
    assert_eq(rep["summary"]["dropped_events"], 2 * (depth - MAX_DEPTH) * reps, "events dropped")
    w = [x for x in rep["warnings"] if "dropped" in x]
    assert_eq(len(w), 1, "one warning of dropped events: %s" % rep["warnings"])
    assert_true("128 open regions" in w[0] and "nesting" in w[0], "it names the nesting limit: %s" % w[0])
    assert_true("--buffer-kb" not in w[0], "no buffer advice for a nesting limit: %s" % w[0])


def test_steps_on_several_threads_are_said():
    """20 steps on the main thread, 5 on another: the step statistics are the main
    thread's 20, and the warning and steps.threads / steps.tid say so."""
    _, path = record("report_edges", "steps", 20, 5, opts=("--sample=off",))
    rep = analyze(path)
    by_tid = {t["tid"]: t["steps"] for t in rep["threads"]}
    assert_eq(sorted(by_tid.values()), [5, 20], "steps per thread")
    main_tid = [t for t, n in by_tid.items() if n == 20][0]
    st = rep["steps"]
    assert_eq((st["count"], st["threads"], st["tid"]), (20, 2, main_tid), "steps count, threads, tid")
    w = [x for x in rep["warnings"] if "steps were marked on 2 threads" in x]
    assert_eq(len(w), 1, "a warning of steps on two threads: %s" % rep["warnings"])
    assert_true(str(main_tid) in w[0] and " 5" in w[0], "it names the thread counted and the 5 left out: %s" % w[0])
    one = analyze(record("report_edges", "steps", 20, 0, out="one.fnc", opts=("--sample=off",))[1])
    assert_eq((one["steps"]["threads"], [x for x in one["warnings"] if "steps were marked" in x]), (1, []),
              "steps on one thread: no warning")


def test_a_thread_that_blocks_every_signal_gets_a_reason():
    """Wall mode, the only thread blocking every signal for 300 ms: no samples, and the
    report says why instead of a bare "0 Hz, no samples"."""
    _, path = record("report_edges", "blocked", 300, opts=("--sample=wall",))
    rep = analyze(path)
    assert_eq((rep["samples"]["mode"], rep["samples"]["count"], rep["samples"]["taken"]), ("wall", 0, 0),
              "wall mode, no samples")
    w = [x for x in rep["warnings"] if "no samples" in x]
    assert_eq(len(w), 1, "a warning of no samples: %s" % rep["warnings"])
    assert_true("blocks every signal" in w[0], "it gives the reason: %s" % w[0])
    text = analyze_raw(path).stdout
    assert_true("no samples: the sampling signal reached no thread" in text, "the text report's reason")


def test_a_huge_region_name_is_cut_and_said():
    """A region named by 1 MiB of 'x': kept as 1024 bytes at most (ending in an ellipsis),
    with a warning giving its length; the text report stays small."""
    n = 1 << 20
    _, path = record("report_edges", "name", n, opts=("--sample=off",))
    rep = analyze(path)
    names = [r["name"] for r in rep["regions"]]
    assert_eq(len(names), 1, "one region")
    assert_true(len(names[0].encode()) <= 1024 and names[0].endswith("\u2026") and set(names[0][:-1]) == {"x"},
                "the name cut: %d bytes, ends %r" % (len(names[0].encode()), names[0][-3:]))
    w = [x for x in rep["warnings"] if "name" in x and str(n) in x]
    assert_eq(len(w), 1, "a warning with the name's length: %s" % [x[:200] for x in rep["warnings"]])
    r = analyze_raw(path)
    assert_true(len(r.stdout) < 64 * 1024, "text report of %d bytes" % len(r.stdout))

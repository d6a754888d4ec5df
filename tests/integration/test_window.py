"""The analysis window: --since, --until, --last, --steps (analyze, export).
Fixture: phases.c: after a first mark, 10 steps of 100 ms in region "a" (function
phase_a_work), then 10 in region "b" (phase_b_work); so region "a" runs from about 0 to
1 s of the recording, "b" from 1 to 2 s, and step k starts about k * 100 ms in."""

import json

from helpers import (MS, SLOW, analyze, analyze_raw, assert_between, assert_close, assert_eq,
                     assert_true, fennec_bin, maybe_region, record, region, run, timing)

STEPS, STEP_MS = 10, 100
EDGE = 30 * MS * SLOW  # start-up before the first mark, and scheduling at the edges


def _record():
    _, path = record("phases", STEPS, STEP_MS)
    return path


@timing
def test_since_until_selects_phase():
    path = _record()
    # 300 ms to 800 ms: inside phase a only
    rep = analyze(path, "--since", "300ms", "--until", "0.8")
    w = rep["window"]
    assert_eq(w["active"], True, "window.active")
    assert_close(w["begin_ns"], 300 * MS, 1 * MS, "window.begin_ns", "ns")
    assert_close(w["end_ns"], 800 * MS, 1 * MS, "window.end_ns", "ns")
    assert_close(w["duration_ns"], 500 * MS, 1 * MS, "window.duration_ns", "ns")
    assert_eq(w["to_end"], False, "window.to_end")
    assert_close(rep["summary"]["wall_ns"], 500 * MS, 1 * MS, "summary.wall_ns (the window's)", "ns")
    a = region(rep, "a")
    # a runs the whole window, clipped at both edges
    assert_close(a["total_ns"], 500 * MS, EDGE, "a total_ns in the window", "ns")
    assert_close(a["share_pct"], 100.0, 100.0 * EDGE / (500 * MS), "a share_pct of the window", "%")
    assert_true(maybe_region(rep, "b") is None, "region b ran after the window: %r" % maybe_region(rep, "b"))
    # a window across the change of phase: half each
    rep = analyze(path, "--since", "0.5s", "--until", "1500ms")
    assert_close(region(rep, "a")["total_ns"], 500 * MS, EDGE, "a total_ns, 0.5 to 1.5 s", "ns")
    assert_close(region(rep, "b")["total_ns"], 500 * MS, EDGE, "b total_ns, 0.5 to 1.5 s", "ns")


@timing
def test_steps_window():
    path = _record()
    rep = analyze(path, "--steps", "12:15")
    w = rep["window"]
    assert_eq(w["steps"], 4, "window.steps")
    assert_eq(w["first_step"], 12, "window.first_step")
    assert_close(w["duration_ns"], 4 * STEP_MS * MS, 2 * MS * SLOW, "window.duration_ns of 4 steps", "ns")
    b = region(rep, "b")
    assert_eq(b["count"], 4, "b calls in steps 12-15")
    assert_true(maybe_region(rep, "a") is None, "region a ran before step 10")
    # open ends: from step 15 to the last (19)
    rep = analyze(path, "--steps", "15:")
    assert_eq(rep["window"]["steps"], 5, "steps in 15:")
    rep = analyze(path, "--steps", ":4")
    assert_eq(rep["window"]["steps"], 5, "steps in :4")
    assert_eq(rep["window"]["first_step"], 0, "first_step of :4")
    assert_eq(region(rep, "a")["count"], 5, "a calls in steps 0-4")
    # the text report says what it covers
    r = analyze_raw(path, "--steps", "12:15", "--no-color")
    assert_eq(r.returncode, 0, "analyze --steps rc")
    assert_true("window: " in r.stdout and "(steps 12-15)" in r.stdout,
                "the text report names the window:\n" + r.stdout[:400])


@timing
def test_last():
    path = _record()
    rep = analyze(path, "--last", "500ms")
    w = rep["window"]
    assert_eq(w["to_end"], True, "window.to_end of --last")
    assert_close(w["duration_ns"], 500 * MS, 1 * MS, "window.duration_ns", "ns")
    assert_close(w["end_ns"], w["recording_ns"], 1, "window ends with the recording", "ns")
    assert_close(region(rep, "b")["total_ns"], 500 * MS, EDGE, "b total_ns in the last 500 ms", "ns")
    assert_true(maybe_region(rep, "a") is None, "region a ran a second before the end")
    whole = analyze(path)
    assert_eq(whole["window"]["active"], False, "no window: window.active")
    assert_eq(whole["window"]["duration_ns"], whole["summary"]["wall_ns"], "no window: the whole recording")


@timing
def test_export_folded_window():
    path = _record()

    def functions(*opts):
        r = run([fennec_bin(), "export", path, "--format", "folded"] + list(opts))
        assert_eq(r.returncode, 0, "export folded %s rc\n  %s" % (opts, r.describe()))
        n = {"phase_a_work": 0, "phase_b_work": 0}
        for line in r.stdout.splitlines():
            stack, _, count = line.rpartition(" ")
            for f in n:
                if f in stack.split(";"):
                    n[f] += int(count)
        return n

    whole = functions()
    assert_true(whole["phase_a_work"] > 0 and whole["phase_b_work"] > 0, "both phases sampled: %r" % whole)
    first = functions("--until", "900ms")
    assert_true(first["phase_a_work"] > 0 and first["phase_b_work"] == 0,
                "until 900 ms: phase a's stacks only, got %r" % first)
    last = functions("--last", "900ms")
    assert_true(last["phase_b_work"] > 0 and last["phase_a_work"] == 0,
                "last 900 ms: phase b's stacks only, got %r" % last)


def _export_json(path, fmt, *opts):
    r = run([fennec_bin(), "export", path, "--format", fmt] + list(opts))
    assert_eq(r.returncode, 0, "export %s %s rc\n  %s" % (fmt, opts, r.describe()))
    assert_true("warning" not in r.stderr or "window" not in r.stderr,
                "no warning that the window is left out: %r" % r.stderr)
    return json.loads(r.stdout)


def _check_calls(calls, lo_ns, hi_ns, what):
    """calls: (name, begin_ns, end_ns) from a balanced replay; all inside [lo, hi]."""
    for name, b, e in calls:
        assert_true(lo_ns - 2 * MS <= b <= e <= hi_ns + 2 * MS,
                    "%s: call of %s from %.3f to %.3f ms, outside the window [%.0f, %.0f] ms"
                    % (what, name, b / MS, e / MS, lo_ns / MS, hi_ns / MS))
    return sorted({name for name, _, _ in calls})


def _chrome_calls(trace, what):
    """The region calls of a chrome trace, every B paired with its E on its thread."""
    calls, open_ = [], {}
    for ev in trace["traceEvents"]:
        if ev.get("cat") != "region":
            continue
        ns = int(round(ev["ts"] * 1000))
        stack = open_.setdefault((ev["pid"], ev["tid"]), [])
        if ev["ph"] == "X":
            calls.append((ev["name"], ns, ns + int(round(ev["dur"] * 1000))))
        elif ev["ph"] == "B":
            stack.append((ev["name"], ns))
        elif ev["ph"] == "E":
            assert_true(stack and stack[-1][0] == ev["name"], "%s: an E of %s without its B: %r" % (what, ev["name"], ev))
            name, b = stack.pop()
            calls.append((name, b, ns))
    left = {k: v for k, v in open_.items() if v}
    assert_true(not left, "%s: B events without their E: %r" % (what, left))
    return calls


def _speedscope_calls(doc, what):
    frames = doc["shared"]["frames"]
    calls = []
    for prof in doc["profiles"]:
        if prof["type"] != "evented":
            continue
        stack = []
        for ev in prof["events"]:
            if ev["type"] == "O":
                stack.append((ev["frame"], ev["at"]))
            else:
                assert_true(stack and stack[-1][0] == ev["frame"], "%s: a C without its O: %r" % (what, ev))
                fr, b = stack.pop()
                calls.append((frames[fr]["name"], b, ev["at"]))
        assert_true(not stack, "%s: O events without their C in %s: %r" % (what, prof["name"], stack))
        assert_true(not prof["events"] or (prof["startValue"] == prof["events"][0]["at"]
                                           and prof["endValue"] == prof["events"][-1]["at"]),
                    "%s: %s spans its events" % (what, prof["name"]))
    return calls


def _check_timeline_window(fmt, calls_of):
    path = _record()
    whole = calls_of(_export_json(path, fmt), "whole")
    assert_eq(sorted({n for n, _, _ in whole}), ["a", "b"], "%s without a window: both phases" % fmt)
    # inside phase a: its calls only, two of them cut at the window's edges
    calls = calls_of(_export_json(path, fmt, "--since", "300ms", "--until", "800ms"), "300-800 ms")
    names = _check_calls(calls, 300 * MS, 800 * MS, "%s 300-800 ms" % fmt)
    assert_eq(names, ["a"], "%s 300-800 ms: the regions" % fmt)
    assert_between(len(calls), 4, 7, "%s 300-800 ms: calls of a (100 ms each)" % fmt)
    assert_close(min(b for _, b, _ in calls), 300 * MS, 2 * MS, "%s: the first call, cut at the window's start" % fmt, "ns")
    assert_close(max(e for _, _, e in calls), 800 * MS, 2 * MS, "%s: the last call, cut at the window's end" % fmt, "ns")
    # across the change of phase: both, each on its side of it
    calls = calls_of(_export_json(path, fmt, "--since", "700ms", "--until", "1300ms"), "700-1300 ms")
    assert_eq(_check_calls(calls, 700 * MS, 1300 * MS, "%s 700-1300 ms" % fmt), ["a", "b"],
              "%s 700-1300 ms: the regions" % fmt)
    a_end = max(e for n, _, e in calls if n == "a")
    b_begin = min(b for n, b, _ in calls if n == "b")
    assert_true(a_end <= b_begin, "%s: a ends (%.1f ms) before b begins (%.1f ms)" % (fmt, a_end / MS, b_begin / MS))
    assert_close(a_end, 1000 * MS, EDGE, "%s: the change of phase" % fmt, "ns")


@timing
def test_export_chrome_trace_window():
    _check_timeline_window("chrome-trace", _chrome_calls)
    # steps and metrics: the window's only, the step numbers the recording's
    path = _record()
    trace = _export_json(path, "chrome-trace", "--since", "300ms", "--until", "800ms")
    steps = [e for e in trace["traceEvents"] if e.get("cat") == "step"]
    for e in steps + [e for e in trace["traceEvents"] if e.get("cat") in ("metric", "cpu", "offcpu")]:
        assert_true(300 * MS - 2 * MS <= e["ts"] * 1000 <= 800 * MS + 2 * MS, "an event outside the window: %r" % e)
    assert_between(len(steps), 4, 6, "step marks between 300 and 800 ms")
    assert_between(min(e["args"]["step"] for e in steps), 3, 5, "the first mark's number counts the marks before")


@timing
def test_export_speedscope_window():
    _check_timeline_window("speedscope", _speedscope_calls)


@timing
def test_bad_values_exit_2():
    path = _record()
    cases = [
        (("--since", "5x"), "--since"),
        (("--until", ""), "--until"),
        (("--since", "2s", "--until", "1s"), "--since"),
        (("--steps", "5:2"), "--steps"),
        (("--steps", "abc"), "--steps"),
        (("--steps", "50:"), "--steps"),      # past the recording's 20 steps
        (("--since", "10m"), "--since"),      # past the end of a 2 s recording
        (("--last", "0"), "--last"),
    ]
    for opts, name in cases:
        r = analyze_raw(path, *opts)
        assert_eq(r.returncode, 2, "analyze %s exit status\n  %s" % (" ".join(opts), r.describe()))
        err = r.stderr.strip().splitlines()
        assert_true(err and name in err[-1], "analyze %s: a message naming %s, got %r" % (opts, name, r.stderr))
    r = run([fennec_bin(), "export", path, "--format", "folded", "--steps", "99:"])
    assert_eq(r.returncode, 2, "export --steps 99: exit status\n  " + r.describe())

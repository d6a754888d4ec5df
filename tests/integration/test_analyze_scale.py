"""Analysis of a big recording: memory bounded, not 8 bytes a region call (issue 29 item 4),
and the two-thread reader (format/pipe.c) giving the same JSON as one thread (issue 34 item 3)."""

import json
import os
import subprocess

from helpers import assert_eq, assert_true, base_env, fennec_bin, parse_json, record, region, SANITIZER, timeout

PAIRS = 20000000  # 40 M events, 4-7 MB on disk: before, the analysis needed ~170 MiB


def analyze_rss(path, threads):
    """`fennec analyze PATH --format json` with FENNEC_ANALYZE_THREADS=threads: (stdout bytes,
    the child's peak RSS in KiB, from its own rusage)."""
    env = base_env({"FENNEC_ANALYZE_THREADS": str(threads)})
    p = subprocess.Popen([fennec_bin(), "analyze", path, "--format", "json"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, env=env)
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    p.returncode = os.waitstatus_to_exitcode(status)
    assert_eq(p.returncode, 0, "fennec analyze exit status (FENNEC_ANALYZE_THREADS=%d)" % threads)
    return out, ru.ru_maxrss


@timeout(240)
def test_big_recording_bounded_memory_and_same_json_on_one_or_two_threads():
    # Its size is the writer's chunks' (a writer late on a loaded machine writes 8 MB chunks,
    # which zstd takes to a few hundred KB): under the reader's 1 MiB, three times the pairs
    pairs = PAIRS
    for tries in range(2):
        r, path = record("flood", pairs, out="big.fnc", opts=("--sample=off", "--memory=off", "--buffer-kb", "32768"))
        if os.path.getsize(path) > 1 << 20 or tries:
            break
        pairs *= 3
    assert_true(os.path.getsize(path) > 1 << 20, "the recording of %d pairs (%d bytes) is smaller than the "
                "two-thread reader's 1 MiB" % (pairs, os.path.getsize(path)))
    one, rss_one = analyze_rss(path, 1)
    two, rss_two = analyze_rss(path, 2)
    assert_true(one == two, "FENNEC_ANALYZE_THREADS=1 and =2 gave different JSON (%d and %d bytes)"
                % (len(one), len(two)))
    rep = parse_json(one.decode())
    dropped = rep["summary"]["dropped_events"]
    flood = region(rep, "flood")
    assert_eq(flood["count"] + dropped // 2, pairs, "flood calls read plus dropped pairs")
    assert_true(flood["min_ns"] <= flood["p50_ns"] <= flood["p95_ns"] <= flood["p99_ns"] <= flood["max_ns"],
                "flood percentiles out of order: %r" % flood)
    if not SANITIZER:  # a sanitizer's shadow memory is not fennec's
        for what, rss in (("one thread", rss_one), ("two threads", rss_two)):
            assert_true(rss < 100 * 1024, "analysing %d region pairs on %s took %d KiB, over 100 MiB"
                        % (pairs, what, rss))


COMPARE_PAIRS = 10000000  # 10 M calls of one region a side: before, compare kept all 80 MB of each


@timeout(240)
def test_compare_of_a_big_recording_bounded_memory():
    """`fennec compare` kept every call's duration for its tests (~8 bytes a call and side,
    twice more for the test's copies: 948 MiB and 14.7 s for 10 M calls); past 1,048,576 calls a region is tested on a uniform
    sample of its calls (analyze/sketch.c). The recording compared with itself: the same
    sample on both sides, so nothing is significant, while count and speedup are of all calls."""
    r, path = record("flood", COMPARE_PAIRS, out="big.fnc",
                     opts=("--sample=off", "--memory=off", "--buffer-kb", "32768"))
    p = subprocess.Popen([fennec_bin(), "compare", path, path, "--format", "json"], stdout=subprocess.PIPE,
                         stderr=subprocess.DEVNULL, env=base_env())
    out = p.stdout.read()
    _, status, ru = os.wait4(p.pid, 0)
    assert_eq(os.waitstatus_to_exitcode(status), 0, "fennec compare exit status")
    doc = json.loads(out)
    assert_eq(doc.get("schema"), "fennec.compare/1", "compare's JSON schema")
    reps = [x for x in doc["regions"] if x["path"] == "flood"]
    assert_eq(len(reps), 1, "one flood region in the comparison")
    x = reps[0]
    dropped = parse_json(subprocess.run([fennec_bin(), "analyze", path, "--format", "json"], stdout=subprocess.PIPE,
                                        env=base_env(), check=True).stdout.decode())["summary"]["dropped_events"]
    assert_eq(x["a_count"] + dropped // 2, COMPARE_PAIRS, "flood calls compared plus dropped pairs")
    assert_eq(x["speedup"], 1, "speedup of a recording against itself")
    assert_true(not x["significant"] and x["p_value"] > 0.9 and x["ci_low"] <= 1 <= x["ci_high"],
                "a recording against itself: nothing significant: %r" % x)
    if not SANITIZER:
        assert_true(ru.ru_maxrss < 200 * 1024, "comparing %d calls a side took %d KiB, over 200 MiB (948 MiB before the sample)"
                    % (COMPARE_PAIRS, ru.ru_maxrss))

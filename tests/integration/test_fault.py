"""Fault injection (make FAULT=1, make test-fault; docs/internals/testing.md): every
allocation and every write of fennec's reports in turn fails, and the collector's writes
fail one by one, in a build whose rings and buffers are small. Skipped in other builds."""

import json
import os
import re

from helpers import (analyze, assert_eq, assert_true, base_env, fennec_bin, record, run, Skip,
                     status_text, timeout)

COUNT_RE = re.compile(r"fennec-fault: (\d+) allocations, (\d+) writes")

# Each report of one recording (REC) or two (compare), written to OUT. Every one of the
# first DENSE allocations fails in turn, then every STRIDE-th (a report makes ~400).
REPORTS = [
    ["analyze", "REC", "--format", "json", "-o", "OUT"],
    ["export", "REC", "--format", "chrome-trace", "-o", "OUT"],
    ["plot", "REC", "--kind", "timing", "-o", "OUT.svg"],
    ["compare", "REC", "REC", "--format", "json", "-o", "OUT"],
]
DENSE, STRIDE = 64, 4


def fault_env(extra):
    env = base_env(extra)
    for k in ("FENNEC_FAULT_ALLOC", "FENNEC_FAULT_WRITE", "FENNEC_FAULT_COUNT", "FENNEC_FAULT_TRACE"):
        if k not in extra:
            env.pop(k, None)
    return env


def require_fault_build():
    r = run([fennec_bin(), "version"], env=fault_env({"FENNEC_FAULT_COUNT": "1"}))
    if not COUNT_RE.search(r.stderr):
        raise Skip("not a fault-injection build (make FAULT=1; make test-fault runs this)")


def leftovers(out):
    d = os.path.dirname(out) or "."
    base = os.path.basename(out)
    return [f for f in os.listdir(d) if f == base or f.startswith(base + ".tmp.")]


@timeout(1200)
def test_fault_every_allocation_and_write_of_the_reports():
    """For each report, the Nth allocation fails (every N of the first DENSE, then every
    STRIDE-th, up to as many as the report makes), then each write in turn: never a crash or a sanitizer report; a failure exits 1 with a
    'fennec CMD:' message and leaves no output behind (nor its temporary file); a failed
    write is always a failure. An allocation failure that the report survives must give
    the same output as none: those that do not are counted and printed (the known gap,
    docs/internals/testing.md), not failed."""
    require_fault_build()
    _, rec = record("nested", 200, out="rec.fnc", opts=("--memory=full",))
    silent = []
    for cmd in REPORTS:
        out = os.path.abspath("out." + cmd[0] + ("." + cmd[3] if cmd[3] != "timing" else ".svg"))
        args = [fennec_bin()] + [rec if a == "REC" else out if a.startswith("OUT") else a for a in cmd]
        name = " ".join(cmd)
        r = run(args, env=fault_env({"FENNEC_FAULT_COUNT": "1"}))
        m = COUNT_RE.search(r.stderr)
        assert_true(r.returncode == 0 and m, "%s without faults: %s" % (name, r.describe()))
        allocs, writes = int(m.group(1)), int(m.group(2))
        assert_true(allocs > 50 and writes >= 1, "%s: %d allocations, %d writes" % (name, allocs, writes))
        with open(out, "rb") as f:
            good = f.read()
        for kind, n in (("ALLOC", allocs), ("WRITE", writes)):
            for i in (range(1, n + 1) if kind == "WRITE" else
                      list(range(1, min(n, DENSE) + 1)) + list(range(DENSE + STRIDE, n + 1, STRIDE))):
                for f in leftovers(out):
                    os.unlink(os.path.join(os.path.dirname(out), f))
                r = run(args, env=fault_env({"FENNEC_FAULT_" + kind: str(i)}))
                what = "%s with %s %d failing" % (name, kind.lower(), i)
                assert_true(0 <= r.returncode < 128, "%s: %s\n  %s" % (what, status_text(r.returncode), r.describe()))
                if r.returncode == 0:
                    assert_true(kind == "ALLOC", "%s: exit 0\n  %s" % (what, r.describe()))
                    with open(out, "rb") as f:
                        if f.read() != good:
                            silent.append(what)
                    continue
                lines = r.stderr.strip().splitlines()
                assert_true(r.returncode == 1 and lines and lines[-1].startswith("fennec %s: " % cmd[0]),
                            "%s: expected exit 1 and a 'fennec %s:' message\n  %s" % (what, cmd[0], r.describe()))
                assert_eq(leftovers(out), [], "%s: files left behind" % what)
    if silent:
        print("%d allocation failures changed a report without an error (the known gap):" % len(silent))
        for s in silent:
            print("  " + s)


def test_fault_collector_writes_fail_one_by_one():
    """The collector of the fault build (rings of 64 KiB, heap chunks of 16 KiB) with its
    Nth write failing (FENNEC_TEST_FAIL_WRITE), for each write a run makes: the program's
    exit status is its own, and the file is a prefix the analysis reads, cut short, or (the
    header lost) a profile the analysis refuses with its name; past the writes a run makes,
    the file is whole."""
    require_fault_build()
    r, good = record("flood", 300000, out="good.fnc", opts=("--memory=full",))
    rep = analyze(good)
    assert_eq(rep["summary"]["cut_short"], False, "without a failed write: cut_short")
    cut = refused = 0
    for n in range(1, 13):
        out = "w%d.fnc" % n
        r, path = record("flood", 300000, out=out, opts=("--memory=full",), expect_rc=None,
                         env=base_env({"FENNEC_TEST_FAIL_WRITE": str(n)}))
        assert_eq(r.returncode, 0, "the program's exit status with write %d failing: %s" % (n, r.describe()))
        if not os.path.exists(path):
            continue
        a = run([fennec_bin(), "analyze", path, "--format", "json"])
        if a.returncode == 0:
            # whole where the run made fewer than n writes
            cut += json.loads(a.stdout)["summary"]["cut_short"]
        else:
            refused += 1
            assert_true(a.returncode == 1 and out in a.stderr,
                        "write %d failed: a clean refusal naming %s\n  %s" % (n, out, a.describe()))
    assert_true(refused >= 1 and cut >= 2, "recordings refused (header lost): %d, read cut short: %d" % (refused, cut))

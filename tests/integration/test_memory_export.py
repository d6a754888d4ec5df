"""fennec export --memory: memory flame graphs (allocation stacks weighted by heap bytes) in
the folded, svg, pprof and speedscope formats, checked against what the fixture
tests/fixtures/mem_export.c is known to allocate: leak_here leaks 5 x 1000 bytes,
churn_here allocates and frees 100 x 4096 bytes one at a time inside the region "churn",
and the C runtime allocates stdout's buffer. Consumers as in test_export.py: go tool pprof,
speedscope's importer and schema, Python's XML parser.

libfennec does not interpose malloc in sanitizer builds (the sanitizer owns it): the tests
that need heap stacks skip there."""

import re
import os
import xml.etree.ElementTree as ET

from helpers import (SANITIZER, Skip, analyze, assert_eq, assert_rel, assert_true, fennec_bin, record,
                     run)
from test_export import (export, export_raw, go_pprof, read_folded, speedscope_import,
                         speedscope_schema_valid)

LEAK = 5 * 1000
CHURN = 100 * 4096


def need_heap():
    if SANITIZER:
        raise Skip("under %s: libfennec does not interpose malloc" % SANITIZER)


def record_full():
    need_heap()
    _, path = record("mem_export", opts=("--memory=full",))
    return path


def leaf_bytes(stacks, leaf):
    """{stack: bytes} of the folded stacks whose innermost frame is `leaf`."""
    return {k: v for k, v in stacks.items() if k.split(";")[-1] == leaf}


def one_stack(stacks, leaf, what):
    got = leaf_bytes(stacks, leaf)
    assert_eq(len(got), 1, "%s: stacks ending in %s (%s)" % (what, leaf, sorted(stacks)))
    stack, n = next(iter(got.items()))
    assert_eq(stack.split(";")[-2:], ["main", leaf], "%s: %s is called from main" % (what, leaf))
    return n


def test_folded_bytes_per_stack():
    path = record_full()
    mem = analyze(path)["memory"]
    leaked = read_folded(export(path, "folded", "--memory", "leaked", out="leaked.folded"))
    assert_eq(leaked, {k: v for k, v in leaked.items() if k.endswith(";leak_here")},
              "leaked: only leak_here's stack (the C runtime's buffer is left out)")
    assert_eq(one_stack(leaked, "leak_here", "leaked"), LEAK, "leaked bytes of leak_here")

    allocated = read_folded(export(path, "folded", "--memory", "allocated", out="alloc.folded"))
    assert_eq(one_stack(allocated, "churn_here", "allocated"), CHURN, "allocated bytes of churn_here")
    assert_eq(one_stack(allocated, "leak_here", "allocated"), LEAK, "allocated bytes of leak_here")
    # full mode records every allocation: the stacks add up to the exact counter
    assert_eq(sum(allocated.values()), mem["allocated_bytes"], "allocated: sum of the stacks")

    peak = read_folded(export(path, "folded", "--memory", "peak", out="peak.folded"))
    assert_eq(one_stack(peak, "leak_here", "peak"), LEAK, "leak_here's blocks are all live at the peak")
    assert_eq(one_stack(peak, "churn_here", "peak"), 4096, "one churn block at a time")
    assert_eq(sum(peak.values()), mem["peak_bytes"], "peak: sum of the stacks = the peak")

    live = read_folded(export(path, "folded", "--memory", "live", out="live.folded"))
    assert_eq(one_stack(live, "leak_here", "live"), LEAK, "live at exit: leak_here")
    assert_true(not leaf_bytes(live, "churn_here"), "churn_here freed everything: %r" % live)
    assert_eq(sum(live.values()), LEAK + mem["runtime_bytes"], "live at exit = leaks + the runtime's")


def test_region_filter_and_prefix():
    path = record_full()
    inside = read_folded(export(path, "folded", "--memory", "allocated", "--region", "churn", out="in.folded"))
    assert_eq(list(inside.values()), [CHURN], "--region churn: churn_here's bytes only (%r)" % inside)
    assert_true(next(iter(inside)).endswith(";main;churn_here"), "the stack: %r" % inside)
    pre = read_folded(export(path, "folded", "--memory", "allocated", "--prefix", "region", out="pre.folded"))
    churn = leaf_bytes(pre, "churn_here")
    assert_eq(list(churn.values()), [CHURN], "churn_here under --prefix region")
    assert_true(next(iter(churn)).startswith("{churn};"), "region frame first: %r" % churn)
    r = export_raw(path, "folded", "--memory", "leaked", "--region", "churn", out="none.folded")
    assert_eq(r.returncode, 1, "nothing leaked inside churn: exit 1")
    assert_true("no heap bytes leaked" in r.stderr and "churn" in r.stderr, "message: %r" % r.stderr)


def test_svg_in_bytes():
    path = record_full()
    out = export(path, "svg", "--memory", "leaked", out="leaked.svg")
    ns = "{http://www.w3.org/2000/svg}"
    root = ET.parse(out).getroot()
    assert_eq(root.tag, ns + "svg", "root element")
    assert_eq(int(root.get("data-total")), LEAK, "data-total: the leaked bytes")
    title = "".join(t.text or "" for t in root.iter(ns + "text") if t.get("id") == "title")
    assert_true("bytes" in title and "leaked" in title, "the title says leaked bytes: %r" % title)
    frames = {g.get("data-n"): g for g in root.iter(ns + "g") if g.get("class") == "f"}
    for name in ("all", "main", "leak_here"):
        assert_true(name in frames, "frame %s in the graph (%s)" % (name, sorted(frames)))
        assert_eq(int(frames[name].get("data-s")), LEAK, "bytes of frame %s" % name)
    assert_true("churn_here" not in frames, "churn_here leaked nothing")
    hover = frames["leak_here"].find(ns + "title").text
    assert_true("5000 bytes" in hover, "hover says bytes: %r" % hover)

    out = export(path, "svg", "--memory", "allocated", out="alloc.svg")
    frames = {g.get("data-n"): int(g.get("data-s")) for g in ET.parse(out).getroot().iter(ns + "g")
              if g.get("class") == "f"}
    assert_eq(frames.get("churn_here"), CHURN, "allocated: churn_here's frame")


def test_pprof_bytes_and_objects():
    path = record_full()
    pb = export(path, "pprof", "--memory", "allocated", out="alloc.pb.gz")
    rows = {}
    for index in ("space", "objects"):
        out = go_pprof("-top", "-unit=B" if index == "space" else "-unit=count", "-nodecount=1000",
                       "-sample_index=" + index, pb)
        assert_true("Type: %s" % index in out, "sample type %s:\n%s" % (index, out))
        for line in out.splitlines():
            parts = line.split()
            if len(parts) == 6 and parts[5] in ("churn_here", "leak_here"):
                rows[(index, parts[5])] = parts[0]
    assert_eq(rows, {("space", "churn_here"): "%dB" % CHURN, ("space", "leak_here"): "%dB" % LEAK,
                     ("objects", "churn_here"): "100", ("objects", "leak_here"): "5"},
              "go tool pprof -top: flat bytes and objects")
    # a full-mode sample stands for itself: period 1 (it read the file's sampling rate)
    raw = go_pprof("-raw", pb)
    assert_true(re.search(r"^Period: 1$", raw, re.M), "full mode's period:\n%s" % raw[:300])
    out = go_pprof("-top", "-unit=B", "-tagfocus=region=churn", pb)
    assert_true("churn_here" in out and "leak_here" not in out, "-tagfocus=region=churn:\n%s" % out)
    leaked = export(path, "pprof", "--memory", "leaked", out="leaked.pb.gz")
    out = go_pprof("-top", "-unit=B", leaked)
    assert_true("Total samples = %dB" % LEAK in out, "leaked total:\n%s" % out)


def test_speedscope_in_bytes():
    path = record_full()
    out = export(path, "speedscope", "--memory", "allocated", out="alloc.speedscope.json")
    speedscope_schema_valid(out)
    doc = speedscope_import(out)
    assert_eq(len(doc["profiles"]), 1, "one profile")
    prof = doc["profiles"][0]
    assert_eq(prof["unit"], "bytes", "unit")
    assert_eq(prof["total_weight"], analyze(path)["memory"]["allocated_bytes"], "total weight")
    selfs = {f["name"]: f["self"] for f in prof["frames"]}
    assert_eq((selfs.get("churn_here"), selfs.get("leak_here")), (CHURN, LEAK), "self bytes")


def test_sampled_mode_estimates():
    need_heap()
    # a mean of 1 KiB between sampled allocations: 4096-byte blocks are sampled with
    # probability 1 - exp(-4) = 0.98 each, so churn_here's estimate is within a few %
    _, path = record("mem_export", opts=("--memory=sampled", "--memory-rate", "1024"))
    stacks = read_folded(export(path, "folded", "--memory", "allocated"))
    assert_rel(one_stack(stacks, "churn_here", "sampled"), CHURN, 0.15, "churn_here's estimated bytes")


def test_without_heap_stacks():
    _, path = record("mem_export", opts=("--memory=off",))
    for fmt in ("folded", "svg", "pprof", "speedscope"):
        r = export_raw(path, fmt, "--memory", "leaked", out="x." + fmt)
        assert_eq(r.returncode, 1, "export --format %s --memory of a --memory=off recording" % fmt)
        assert_true("no heap data in %s: record with --memory=sampled or --memory=full" % path in r.stderr,
                    "message: %r" % r.stderr)
        assert_true(not os.path.exists("x." + fmt), "no output file is left behind (%s)" % fmt)


def test_usage_errors():
    _, path = record("mem_export", opts=("--memory=off",))
    for args, word in ((["--format", "folded", "--memory", "nope"], "--memory must be"),
                       (["--format", "folded", "--memory"], "--memory must be"),
                       (["--format", "csv", "--memory", "leaked"], "applies to folded, svg, pprof"),
                       (["--format", "chrome-trace", "--memory", "leaked"], "applies to folded, svg, pprof"),
                       (["--format", "folded", "--memory", "leaked", "--kind", "cpu"], "--kind"),
                       (["--format", "svg", "--memory", "peak", "--thread", "1"], "--thread"),
                       (["--format", "folded", "--memory", "live", "--prefix", "thread"], "--prefix thread")):
        r = run([fennec_bin(), "export", path] + args)
        assert_eq(r.returncode, 2, "exit status of fennec export %s" % " ".join(args))
        assert_true(word in r.stderr, "message of %s names %r: %r" % (args, word, r.stderr))

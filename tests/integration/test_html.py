"""fennec analyze --format html: the self-contained report, opened in a real browser
(Debian's headless Chromium driven by playwright-core through tests/browser/check_page.js):
no console or page errors, no network request, every chart of every tab drawn, tab
switching, zoom by mouse wheel, search; screenshots under the test's directory. The page
data embedded in the report is checked against the JSON report and against what the
fixtures are known to do (docs/html.md)."""

import json
import os
import re
import shutil

from helpers import (BUILD, REPO, SANITIZER, Skip, analyze, analyze_raw, assert_close, assert_eq, assert_rel,
                     assert_true, base_env, record, region, run, timeout)

CHECK_PAGE = os.path.join(REPO, "tests", "browser", "check_page.js")
PLAYWRIGHT = os.path.join(REPO, "tests", "consumers", "node_modules", "playwright-core")


def html_report(path, *opts, out="report.html"):
    r = analyze_raw(path, "--format", "html", "-o", out, *opts, timeout_s=300)
    if r.returncode != 0:
        raise AssertionError("fennec analyze --format html failed\n  " + r.describe())
    with open(out, encoding="utf-8") as f:
        return f.read()


def page_data(html):
    """The page data embedded in a report (fennec.page/1)."""
    m = re.search(r'<script id="fennec-data" type="application/json">(.*?)</script>', html, re.S)
    assert_true(m, "no page data element in the report")
    doc = json.loads(m.group(1))
    assert_eq(doc.get("page"), "fennec.page/1", "page data schema")
    assert_eq(doc["analysis"].get("schema"), "fennec.analysis/1", "analysis schema")
    return doc


def need_browser():
    if not (shutil.which("chromium") or os.path.exists("/usr/bin/chromium")):
        raise Skip("chromium is not installed (Debian package chromium; make deps installs it)")
    if not shutil.which("node"):
        raise Skip("node is not installed (make consumers installs it)")
    if not os.path.isdir(PLAYWRIGHT):
        raise Skip("playwright-core is not installed: run make consumers")


def browse(url, shots, *extra, timeout_s=240):
    """check_page.js's findings on URL; screenshots go to SHOTS."""
    need_browser()
    os.makedirs(shots, exist_ok=True)
    env = dict(os.environ)
    for k in ("http_proxy", "https_proxy", "HTTP_PROXY", "HTTPS_PROXY", "all_proxy", "ALL_PROXY"):
        env.pop(k, None)
    r = run(["node", CHECK_PAGE, url, shots] + list(extra), env=env, timeout_s=timeout_s)
    try:
        doc = json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise AssertionError("check_page.js printed no result\n  " + r.describe())
    if doc.get("skip"):
        raise Skip(doc["skip"])
    assert_true("fatal" not in doc, "the browser run failed: %s" % doc.get("fatal"))
    return doc


def assert_clean_page(doc):
    assert_eq(doc["console_errors"], [], "console errors")
    assert_eq(doc["page_errors"], [], "page errors")
    assert_eq(doc["fennec_errors"], [], "errors the page reported")
    assert_eq(doc["failed_requests"], [], "failed requests")
    for shot in doc["screenshots"]:
        assert_true(os.path.getsize(shot) > 5000, "screenshot %s is empty" % shot)


def assert_charts_drawn(doc, expected):
    """Every visible chart of every tab rendered and has pixels on its canvas; the charts
    in `expected` ({tab: [chart ids]}) are among them."""
    for tab, want in expected.items():
        t = doc["tabs"].get(tab)
        assert_true(t and t["visible"], "tab %s not shown after its click" % tab)
        for cid in want:
            c = t["charts"].get(cid)
            assert_true(c and c["visible"], "tab %s: chart %s not visible: %s" % (tab, cid, c))
        for cid, c in t["charts"].items():
            if not c["visible"]:
                continue
            assert_true(c["rendered"] and c["canvases"] >= 1 and c["width"] > 100 and c["height"] > 100,
                        "tab %s: chart %s not rendered: %s" % (tab, cid, c))
            assert_true(c["drawn_pixels"] > 200, "tab %s: chart %s is blank: %s" % (tab, cid, c))


def assert_zoomed(doc, chart):
    z = doc["zoom"].get(chart)
    assert_true(z and z["before"] and z["after"], "no zoom state for %s: %s" % (chart, z))
    before, after = z["before"], z["after"]
    assert_true(after[1] - after[0] < (before[1] - before[0]) * 0.9,
                "%s: the mouse wheel did not zoom in (%s -> %s)" % (chart, before, after))


# --- the page data ---------------------------------------------------------------------

def test_page_data_is_the_json_report():
    """The report embeds the JSON report unchanged, names no network resource, and the
    timeline of a small recording holds every call exactly."""
    _, path = record("nested", 200)
    html = html_report(path)
    doc = page_data(html)
    rep = analyze(path)
    a = doc["analysis"]
    for k in ("summary", "regions", "steps", "threads", "metrics", "findings", "functions"):
        assert_eq(json.dumps(a[k], sort_keys=True), json.dumps(rep[k], sort_keys=True),
                  "page data %s vs analyze --format json" % k)
    assert_true("echarts" in html and "window.fennec" in html, "charting library and page script inlined")
    for bad in re.findall(r'(?:src|href)\s*=\s*"(https?:[^"]*)"', html):
        raise AssertionError("the report loads %s from the network" % bad)
    tl = doc["timeline"]
    names = {r["path"]: r for r in rep["regions"]}
    assert_eq(tl["blocks"], 0, "blocks in a small recording")
    assert_eq(tl["resolution_ns"], 0, "resolution of a small recording")
    assert_eq(tl["calls"], sum(r["count"] for r in rep["regions"]), "timeline calls vs region counts")
    for col in ("start_ns", "dur_ns", "busy_ns", "thread", "depth", "name", "count"):
        assert_eq(len(tl[col]), tl["intervals"], "length of timeline column %s" % col)
    # Per region name: the intervals' durations add up to the region's total.
    per = {}
    for i in range(tl["intervals"]):
        n = tl["names"][tl["name"][i]]
        per[n] = per.get(n, 0) + tl["dur_ns"][i]
    for n in ("phase_a", "phase_b", "inner_x"):
        total = sum(r["total_ns"] for r in rep["regions"] if r["name"] == n)
        assert_close(per.get(n, 0), total, 2 * 1000 + total * 1e-6, "timeline duration of %s" % n, " ns")
    # Nesting: inner_x lies inside a phase_a interval one level up.
    outer = [(tl["start_ns"][i], tl["start_ns"][i] + tl["dur_ns"][i]) for i in range(tl["intervals"])
             if tl["names"][tl["name"][i]] == "phase_a" and tl["depth"][i] == 0]
    for i in range(tl["intervals"]):
        if tl["names"][tl["name"][i]] == "inner_x":
            assert_eq(tl["depth"][i], 1, "depth of inner_x")
            s, e = tl["start_ns"][i], tl["start_ns"][i] + tl["dur_ns"][i]
            assert_true(any(a <= s and e <= b for a, b in outer), "inner_x [%d, %d] in no phase_a" % (s, e))
    assert_true(names["phase_a/inner_x"], "region tree")


def test_timeline_threads():
    """Four threads with known calls: one timeline row set per thread, with its calls."""
    _, path = record("threads", 10)
    doc = page_data(html_report(path))
    a, tl = doc["analysis"], doc["timeline"]
    by_thread = {}
    for i in range(tl["intervals"]):
        t = a["threads"][tl["thread"][i]]
        by_thread.setdefault(t["name"], []).append(tl["names"][tl["name"][i]])
    for i in range(4):
        calls = by_thread.get("worker-%d" % i, [])
        assert_eq(calls.count("work"), (i + 1) * 5, "worker-%d's work calls on the timeline" % i)
        assert_eq(calls.count("tail_%d" % i), 1, "worker-%d's tail call" % i)


def test_timeline_downsampled_and_says_so():
    """More calls than the budget: blocks that account for every call and its time, at most
    the budget of intervals, and the page says it reduced them."""
    _, path = record("flood", 300000, opts=("--buffer-kb", "32768"))
    rep = analyze(path)
    flood = region(rep, "flood")
    doc = page_data(html_report(path, "--timeline-max", "2000"))
    tl = doc["timeline"]
    assert_true(tl["intervals"] <= 2000, "intervals %d over the budget 2000" % tl["intervals"])
    assert_true(tl["blocks"] > 0 and tl["resolution_ns"] > 0, "blocks and a resolution: %s" % {
        k: v for k, v in tl.items() if not isinstance(v, list)})
    assert_eq(sum(tl["count"]), flood["count"], "calls the blocks stand for")
    assert_eq(tl["calls"], flood["count"], "timeline calls")
    # The model rounds each call's duration to a ns, the timeline each call's start and
    # end: up to half a ns apart per call.
    busy = sum(tl["busy_ns"])
    assert_close(busy, flood["total_ns"], flood["count"] * 0.5 + 1000, "busy time of the blocks", " ns")
    for i in range(tl["intervals"]):
        if tl["count"][i] > 1:
            assert_true(tl["dur_ns"][i] <= tl["resolution_ns"], "a block longer than the resolution: %d > %d" % (
                tl["dur_ns"][i], tl["resolution_ns"]))
            assert_true(tl["busy_ns"][i] <= tl["dur_ns"][i] + tl["count"][i], "busy over span in block %d" % i)


def test_usage():
    r = analyze_raw("nothing.fnc", "--format", "html")
    assert_true(r.returncode == 1 and "nothing.fnc" in r.stderr, "missing file: " + r.describe())
    r = analyze_raw("nothing.fnc", "--format", "pdf")
    assert_true(r.returncode == 2 and "html" in r.stderr, "unknown format names html: " + r.describe())
    r = run([os.path.join(BUILD, "bin", "fennec"), "analyze", "--help"])
    assert_true("html" in r.stdout and "docs/html.md" in r.stdout, "help names html")


# --- in the browser --------------------------------------------------------------------

def memory_opts():
    """`--memory full` when this fennec records the heap, else nothing."""
    r = run([os.path.join(BUILD, "bin", "fennec"), "record", "--help"])
    return ("--memory", "full") if "--memory" in r.stdout else ()


LEAKER = r"""
#include <fennec.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
static void *kept[400];
int main(void)
{
	for (int s = 0; s < 200; s++) {
		fennec_region_begin("work");
		char *tmp = malloc(1 << 16);
		memset(tmp, 1, 1 << 16);
		free(tmp);
		kept[s] = malloc(16384); /* never freed: 200 x 16 KiB */
		memset(kept[s], 2, 16384);
		struct timespec ts = {0, 1000000};
		nanosleep(&ts, NULL);
		fennec_region_end();
		fennec_step();
	}
	return 0;
}
"""

@timeout(400)
def test_browser_full_report():
    """A training-loop example with samples, steps, metrics and findings: every tab and
    chart drawn, zoom, search, no errors, no network."""
    exe = os.path.join(BUILD, "examples", "mlp_train")
    _, path = record(exe, out="run.fnc", opts=memory_opts())
    html_report(path)
    doc = browse("file://" + os.path.abspath("report.html"), os.path.abspath("shots"))
    assert_clean_page(doc)
    assert_eq(doc["external_requests"], [], "requests leaving the page")
    expected = {"summary": ["chart-breakdown", "chart-steps"],
                "operations": ["chart-timeline", "chart-sunburst", "chart-rflame"],
                "memory": ["chart-rss"],
                "callgraph": [],
                "bottlenecks": []}
    rep = page_data(open("report.html", encoding="utf-8").read())["analysis"]
    if rep["samples"]["cpu_samples"]:
        expected["callgraph"] = ["chart-cflame"]
    if rep.get("memory") and rep["memory"].get("timeline"):
        expected["memory"].append("chart-memory")
    # the system sampler's CPU, RSS, disk and network over time
    assert_true(rep["system"] and rep["system"]["processes"][0]["timeline"], "system points in the report")
    expected["summary"] += ["chart-sys-cpu", "chart-sys-io"]
    assert_charts_drawn(doc, expected)
    assert_zoomed(doc, "chart-timeline")
    assert_zoomed(doc, "chart-rflame")
    if expected["callgraph"]:
        assert_zoomed(doc, "chart-cflame")
    assert_true(doc["search"].get("term") and "matches" in (doc["search"].get("match") or ""),
                "flame graph search: %s" % doc["search"])
    shots = sorted(os.path.basename(s) for s in doc["screenshots"])
    for tab in ("summary", "operations", "memory", "callgraph", "bottlenecks"):
        assert_true("tab-%s.png" % tab in shots, "screenshot of tab %s: %s" % (tab, shots))


@timeout(400)
def test_browser_no_regions_no_samples():
    """A recording with nothing to chart: the page still opens cleanly and says so."""
    _, path = record("empty", opts=("--sample=off",))
    html_report(path)
    doc = browse("file://" + os.path.abspath("report.html"), os.path.abspath("shots"))
    assert_clean_page(doc)
    assert_charts_drawn(doc, {"summary": ["chart-breakdown"], "bottlenecks": []})


@timeout(600)
def test_browser_big_recording():
    """A recording with more calls than the timeline budget opens with every chart drawn,
    stays zoomable, and the page says the timeline was reduced."""
    if SANITIZER:
        raise Skip("a million calls under a sanitizer: the plain build runs this")
    _, path = record("flood", 1000000, opts=("--buffer-kb", "32768", "--sample=off"), timeout_s=300)
    html = html_report(path)
    tl = page_data(html)["timeline"]
    assert_true(tl["blocks"] > 0 and tl["intervals"] <= 50000, "reduced timeline: %s" % {
        k: v for k, v in tl.items() if not isinstance(v, list)})
    doc = browse("file://" + os.path.abspath("report.html"), os.path.abspath("shots"))
    assert_clean_page(doc)
    assert_charts_drawn(doc, {"operations": ["chart-timeline"]})
    assert_zoomed(doc, "chart-timeline")
    assert_true("Timeline reduced for display" in doc["notices"], "the summary says the timeline was reduced: %r"
                % doc["notices"])


@timeout(400)
def test_browser_memory_leak():
    """A program that keeps 16 KiB per step: the memory tab draws the heap over time with
    its trend and the leak, and lists the leak with its size."""
    opts = memory_opts()
    if not opts:
        raise Skip("this fennec has no heap profiler (fennec record --memory)")
    if SANITIZER:
        raise Skip("the %s build does not interpose malloc (its runtime owns it)" % SANITIZER)
    with open("leaker.c", "w") as f:
        f.write(LEAKER)
    cc = os.environ.get("CC", "cc")
    run([cc, "-O1", "-g", "-I", os.path.join(REPO, "include"), "leaker.c", "-o", "leaker"] +
        ["-L", os.path.join(BUILD, "lib"), "-lfennec", "-Wl,-rpath," + os.path.join(BUILD, "lib")], check=True)
    _, path = record(os.path.abspath("leaker"), out="leak.fnc", opts=opts)
    doc = page_data(html_report(path))
    mem = doc["analysis"].get("memory")
    assert_true(mem and mem.get("timeline"), "a memory section with a timeline: %s" % (mem and list(mem)))
    assert_close(mem["leaked_bytes"], 200 * 16384, 16384, "leaked bytes", " B")
    b = browse("file://" + os.path.abspath("report.html"), os.path.abspath("shots"))
    assert_clean_page(b)
    assert_charts_drawn(b, {"memory": ["chart-memory", "chart-memory-stacks", "chart-rss"]})
    series = b["tabs"]["memory"]["charts"]["chart-memory"]["series"]
    assert_true(series >= 3, "heap, RSS and trend series: %d" % series)
    top = mem["stacks_over_time"][0]
    assert_true(top["function"] == "main" and abs(top["trend"]["slope_bytes_per_step"] - 16384) < 200,
                "the kept blocks' stack over time: %s" % {k: top[k] for k in ("function", "trend", "max_bytes")})
    peak_rows = b["tables"].get("peak-live-table", [])
    assert_true(len(peak_rows) >= 2 and any(r[3].startswith("main") for r in peak_rows[1:]),
                "the table of what was live at the peak names main: %s" % peak_rows[:3])
    # the findings table: a leak's gain is memory, in bytes (not "0.0 %")
    rows = b["tables"]["finding-table"]
    gain = rows[0].index("gain ≤")
    leaks = [r for r in rows[1:] if r[1] == "memory_leak"]
    assert_true(leaks and all(re.match(r"[0-9.]+ (B|KiB|MiB|GiB) memory$", r[gain]) for r in leaks),
                "memory_leak rows' gain column: %s" % [r[gain] for r in leaks])


@timeout(400)
def test_browser_memory_of_a_killed_process():
    """mem_edge killed frees its 2,000 blocks and kills itself before the next flush: the
    memory tab lists no leak, and shows the blocks apart, in "Live when killed or crashed",
    with a card that says they are not leaks."""
    if not memory_opts():
        raise Skip("this fennec has no heap profiler (fennec record --memory)")
    if SANITIZER:
        raise Skip("the %s build does not interpose malloc (its runtime owns it)" % SANITIZER)
    _, path = record("mem_edge", "killed", out="killed.fnc", opts=["--sample", "off", "--memory=full"],
                     expect_rc=-9)
    html_report(path)
    b = browse("file://" + os.path.abspath("report.html"), os.path.abspath("shots"))
    assert_clean_page(b)
    assert_eq(b["tables"]["leak-table"][1:], [["none"]], "the leaks table")
    rows = b["tables"].get("cut-live-table", [])
    assert_true(len(rows) == 2 and rows[1][1] == "2,000" and rows[1][3].startswith("killed_blocks"),
                "the table of blocks live when killed: %s" % rows)


@timeout(400)
def test_browser_memory_still_reachable():
    """mem_leaks reachable keeps its 13 unfreed blocks in a global array to the end: the
    memory tab lists no leak of them and shows them in "Still reachable at exit", in full
    mode and in sampled mode (every byte sampled; the panel says what sampled mode's scan
    can tell)."""
    if not memory_opts():
        raise Skip("this fennec has no heap profiler (fennec record --memory)")
    if SANITIZER:
        raise Skip("the %s build does not interpose malloc (its runtime owns it)" % SANITIZER)
    for mode in (["--memory=full"], ["--memory=sampled", "--memory-rate", "1"]):
        _, path = record("mem_leaks", 1000, "reachable", out="reach.fnc", opts=["--sample", "off"] + mode)
        html_report(path)
        b = browse("file://" + os.path.abspath("report.html"), os.path.abspath("shots"))
        assert_clean_page(b)
        leak_rows = b["tables"].get("leak-table", [])
        assert_true(not any("leak_" in " ".join(r) for r in leak_rows[1:]), "%s: the leaks table: %s" % (mode[0], leak_rows))
        rows = b["tables"].get("reach-table", [])
        where = sorted(r[3].split(" ")[0] for r in rows[1:])
        assert_eq(where, ["leak_calloc", "leak_malloc", "leak_realloc", "leak_thread"],
                  "%s: the table of blocks still reachable: %s" % (mode[0], rows))


@timeout(400)
def test_browser_memory_live_at_exec():
    """execs.c (test_memory's KEEPS_THEN_EXECS) keeps 2 MiB from main, then execs /bin/true:
    the memory tab lists no leak and shows the block apart, in "Live at exec", with its size,
    count and stack as the JSON has them, and a card that says it is not a leak (there was
    none: "Never freed 0 B" and 2 MiB allocated, with nothing to say where it went)."""
    from test_memory import KEEPS_THEN_EXECS, build_program
    if not memory_opts():
        raise Skip("this fennec has no heap profiler (fennec record --memory)")
    if SANITIZER:
        raise Skip("the %s build does not interpose malloc (its runtime owns it)" % SANITIZER)
    build_program(KEEPS_THEN_EXECS, "execs.c", ("cc", "gcc"))
    _, path = record(os.path.abspath("execs"), out="execs.fnc", opts=["--sample", "off", "--memory=full"])
    mem = page_data(html_report(path))["analysis"]["memory"]
    live = mem.get("exec_live", [])
    assert_eq([(l["function"], l["bytes"], l["count"]) for l in live], [("main", 2 << 20, 1)], "memory.exec_live")
    line = re.match(r"main \S*execs\.c:(\d+)$", live[0]["stack"][0])
    assert_true(line, "exec_live's innermost frame: %r" % live[0]["stack"][:1])
    b = browse("file://" + os.path.abspath("report.html"), os.path.abspath("shots"))
    assert_clean_page(b)
    assert_eq(b["tables"].get("leak-table", [])[1:], [["none"]], "the leaks table")
    rows = b["tables"].get("exec-live-table", [])
    assert_eq(rows[:1], [["bytes", "blocks", "region", "allocated at"]], "the header of the table of blocks live at exec")
    assert_eq([r[:3] for r in rows[1:]], [["2.00 MiB", "1", ""]], "the table of blocks live at exec: %s" % rows)
    assert_true(rows[1][3].startswith("main execs.c:%s ← " % line.group(1)),
                "the row's stack is exec_live's (main execs.c:%s first): %r" % (line.group(1), rows[1][3]))
    cards = {c[0]: c[1:] for c in b["cards"].get("memory-cards", [])}
    assert_eq(cards.get("Never freed"), ["0 B", "0 blocks"], "the Never freed card")
    assert_eq(cards.get("Live at exec"), ["2.00 MiB", "1 block in 1 process that exec'd another program: not leaks"],
              "the Live at exec card (cards: %s)" % cards)


# --- GPU, ranks, and names that look like markup -------------------------------------------

# A name that would run script or make elements if the page put it into HTML unescaped.
EVIL = "<script>window.__fennec_injected=1</script><img src=x onerror=\"window.__fennec_injected=1\">&'"

MS = 1000000


def assert_escaped(doc):
    assert_eq(doc["injection"], {"ran": False, "elements": 0}, "a name with markup ran or made elements")


def gpu_recording(name="gpu.fnc", base=None):
    """valid_nested_raw.fnc (or the recording BASE, changed in place) with a GPU chunk
    encoded here: a V100-like device, 3 stencil kernels (streams 1 and 2), 2 kernels named
    EVIL (stream 1), a copy (stream 3), memory records, NVML samples with utilisation,
    memory, power and temperature. Returns the path and the known kernel counts."""
    import fncfile
    from test_gpu import base_file, with_gpu
    data = open(base, "rb").read() if base else base_file()
    t = fncfile.decode(data)["header"][9] + MS
    dev = {"id": 0, "name": "Synthetic V100", "cc_major": 7, "sm_count": 80, "warp_size": 32,
           "max_threads_per_block": 1024, "max_warps_per_sm": 64, "max_blocks_per_sm": 32,
           "regs_per_sm": 65536, "regs_per_block": 65536, "smem_per_sm": 98304,
           "smem_per_block": 98304, "memory_bytes": 32 << 30}
    K = {"type": "kernel", "device": 0, "context": 1, "grid_x": 160, "grid_y": 1, "grid_z": 1,
         "block_x": 512, "block_y": 1, "block_z": 1, "registers": 40, "static_smem": 16384}
    recs = [dict(K, name=1, stream=1, start_ns=t, end_ns=t + 4 * MS),
            dict(K, name=1, stream=2, start_ns=t + 2 * MS, end_ns=t + 6 * MS),
            dict(K, name=1, stream=1, start_ns=t + 7 * MS, end_ns=t + 9 * MS),
            dict(K, name=2, stream=1, start_ns=t + 10 * MS, end_ns=t + 11 * MS),
            dict(K, name=2, stream=1, start_ns=t + 12 * MS, end_ns=t + 13 * MS),
            {"type": "memcpy", "device": 0, "context": 1, "stream": 3, "start_ns": t + 5 * MS,
             "end_ns": t + 15 * MS, "copy_kind": 1, "src_kind": 1, "dst_kind": 3, "bytes": 100000000},
            {"type": "memory", "operation": 1, "memory_kind": 3, "device": 0, "start_ns": t + MS,
             "address": 0x1000, "bytes": 1 << 30},
            {"type": "memory", "operation": 2, "memory_kind": 3, "device": 0, "start_ns": t + 3 * MS,
             "address": 0x1000, "bytes": 1 << 30}]
    for i in range(8):
        recs.append({"type": "nvml", "device": 0, "start_ns": t + i * 2 * MS, "sm_pct": 10 * i, "mem_pct": 5 * i,
                     "mem_used_bytes": (1 + i % 3) << 30, "mem_total_bytes": 32 << 30, "power_mw": 100000 + 10000 * i,
                     "temperature_c": 40 + i})
    payload = fncfile.gpu_payload({"cupti_version": 130001, "records": len(recs)}, [dev],
                                  [(1, "_Z7stencilPKfPfi"), (2, EVIL)], recs)
    counts = {"stencil(float const*, float*, int)": 3, EVIL: 2}
    if not base:
        return with_gpu(payload, name), counts
    with open(base, "wb") as f:
        f.write(fncfile.insert_before_end(data, fncfile.make_chunk(12, payload)))
    return os.path.abspath(base), counts


def record_ranks(out="job/run.fnc", steps=12, ms=(5, 10)):
    """steps.c as fake ranks 0 and 1 (Open MPI's variables set by hand), rank r spending
    ms[r] per step: rank 1 is the slowest. Uncompressed, so that gpu_recording can add to
    a file."""
    for rank, m in enumerate(ms):
        record("steps", steps, m, out=out, env=base_env({"OMPI_COMM_WORLD_RANK": str(rank),
                                                         "OMPI_COMM_WORLD_SIZE": str(len(ms)),
                                                         "FENNEC_COMPRESSION": "0"}), expect_rc=None)


def test_gpu_page_data():
    """The GPU kernels, copies and memsets are lanes of the timeline, one per stream, each
    interval where the record put it; the JSON report's GPU section is in the page data."""
    path, counts = gpu_recording()
    doc = page_data(html_report(path))
    rep = analyze(path)
    assert_eq(json.dumps(doc["analysis"]["gpu"], sort_keys=True), json.dumps(rep["gpu"], sort_keys=True),
              "page data gpu vs analyze --format json")
    tl = doc["timeline"]
    assert_eq(tl["gpu_work"], 6, "GPU kernels and copies on the timeline")
    assert_eq(tl["gpu_lane_base"], len(doc["analysis"]["threads"]), "GPU lanes follow the threads")
    lanes = {(l["device"], l["stream"]) for l in tl["gpu_lanes"]}
    assert_eq(lanes, {(0, 1), (0, 2), (0, 3)}, "one lane per stream")
    got = {}
    for i in range(tl["intervals"]):
        if tl["thread"][i] < tl["gpu_lane_base"]:
            continue
        lane = tl["gpu_lanes"][tl["thread"][i] - tl["gpu_lane_base"]]
        got.setdefault(tl["names"][tl["name"][i]], []).append(
            (lane["stream"], tl["depth"][i], tl["dur_ns"][i], tl["count"][i]))
    assert_eq(sorted(got["stencil(float const*, float*, int)"]), [(1, 0, 2 * MS, 1), (1, 0, 4 * MS, 1), (2, 0, 4 * MS, 1)],
              "stencil kernels: stream, depth, duration, count")
    assert_eq(sorted(got[EVIL]), [(1, 0, MS, 1)] * 2, "the other kernel")
    assert_eq(got["memcpy HtoD"], [(3, 1, 10 * MS, 1)], "the copy, a row below its stream's kernels")
    # The kernels start where the records put them, 1 ms after the file's start time.
    first = min(tl["start_ns"][i] for i in range(tl["intervals"]) if tl["thread"][i] >= tl["gpu_lane_base"])
    assert_close(first, doc["analysis"]["gpu"]["devices"][0]["first_ns"], 1000, "first GPU interval's start", " ns")


def test_gpu_timeline_downsampled_like_regions():
    """Many short kernels: merged into blocks by the same rules and resolution as the
    regions' calls; the blocks account for every kernel."""
    import fncfile
    from test_gpu import t0, with_gpu
    t = t0() + MS
    n = 6000
    recs = [{"type": "kernel", "device": 0, "context": 1, "stream": 1 + i % 2, "name": 1, "start_ns": t + i * 10000,
             "end_ns": t + i * 10000 + 4000} for i in range(n)]
    payload = fncfile.gpu_payload({"cupti_version": 130001, "records": n}, [], [(1, "tiny")], recs)
    doc = page_data(html_report(with_gpu(payload), "--timeline-max", "1000"))
    tl = doc["timeline"]
    assert_true(tl["intervals"] <= 1000 and tl["blocks"] > 0, "reduced: %d intervals, %d blocks" % (tl["intervals"], tl["blocks"]))
    base = tl["gpu_lane_base"]
    gpu = [i for i in range(tl["intervals"]) if tl["thread"][i] >= base]
    assert_eq(sum(tl["count"][i] for i in gpu), n, "kernels the GPU blocks stand for")
    assert_eq(sum(tl["busy_ns"][i] for i in gpu), n * 4000, "kernel time in the GPU blocks")
    for i in gpu:
        if tl["count"][i] > 1:
            assert_true(tl["dur_ns"][i] <= tl["resolution_ns"], "a GPU block longer than the resolution")


@timeout(400)
def test_browser_gpu_tab():
    """The GPU tab of a recording with kernels, copies, memory and NVML: its charts drawn,
    the kernel table with the known names and launch counts, the GPU lanes on the thread
    timeline, a kernel name made of markup shown as text; no errors."""
    path, counts = gpu_recording()
    html_report(path)
    doc = browse("file://" + os.path.abspath("report.html"), os.path.abspath("shots"))
    assert_clean_page(doc)
    assert_escaped(doc)
    assert_true("gpu" in doc["tab_buttons"] and "ranks" not in doc["tab_buttons"], "tabs shown: %s" % doc["tab_buttons"])
    assert_charts_drawn(doc, {"gpu": ["chart-gpu-kernels", "chart-gpu-memory", "chart-gpu-util", "chart-gpu-power"],
                              "operations": ["chart-timeline"]})
    rows = doc["tables"]["gpu-kernel-table"]
    head = rows[0]
    got = {r[head.index("kernel")]: int(r[head.index("launches")]) for r in rows[1:]}
    assert_eq(got, counts, "kernel table: names (as text) and launch counts")
    copies = doc["tables"]["gpu-copy-table"]
    assert_eq([r[0] for r in copies[1:]], ["HtoD"], "copy directions")
    streams = doc["tables"]["gpu-stream-table"]
    assert_eq(len(streams) - 1, 3, "stream rows")
    assert_true("tab-gpu.png" in [os.path.basename(s) for s in doc["screenshots"]], "screenshot of the GPU tab")
    assert_true("GPU kernels, copies and memsets" in doc["zoom"]["chart-timeline"]["note"],
                "the timeline note counts the GPU work: %r" % doc["zoom"]["chart-timeline"]["note"])
    assert_eq(doc["gpu_nvtx"]["shown"], False, "no NVTX tables without NVTX data")
    assert_true("gpu-nvtx-range-table" not in doc["tables"], "no NVTX range table shown")


@timeout(400)
def test_browser_gpu_nvtx():
    """NVTX start/end ranges and marks (a GPUX chunk encoded here: "load" twice, once ended
    on another thread; a range and a mark named EVIL; "epoch" marked twice on two threads;
    a range never ended): the GPU tab's NVTX tables list them by message with the
    analysis's counts, the names as text, and the note says what never ended."""
    import fncfile
    from test_gpu import t0, with_gpux
    t = t0() + MS
    recs = [{"type": "range_start", "range_id": 1, "tid": 1, "start_ns": t, "text": "load"},
            {"type": "mark", "tid": 1, "start_ns": t + MS, "text": "epoch"},
            {"type": "range_end", "range_id": 1, "tid": 1, "start_ns": t + 3 * MS},
            {"type": "range_start", "range_id": 2, "tid": 1, "start_ns": t + 4 * MS, "text": "load"},
            {"type": "range_start", "range_id": 3, "tid": 2, "start_ns": t + 4 * MS, "text": EVIL},
            {"type": "mark", "tid": 2, "start_ns": t + 5 * MS, "text": EVIL},
            {"type": "mark", "tid": 2, "start_ns": t + 5 * MS, "text": "epoch"},
            {"type": "range_end", "range_id": 2, "tid": 2, "start_ns": t + 9 * MS},
            {"type": "range_end", "range_id": 3, "tid": 2, "start_ns": t + 10 * MS},
            {"type": "range_start", "range_id": 4, "tid": 1, "start_ns": t + 11 * MS, "text": "open"}]
    path = with_gpux(fncfile.gpux_payload(0, recs), "nvtx.fnc")
    rep = page_data(html_report(path))["analysis"]
    nv = rep["gpu"]["nvtx"]
    assert_eq(({r["name"]: r["count"] for r in nv["ranges"]}, nv["open"]), ({"load": 2, EVIL: 1}, 1),
              "the analysis's ranges")
    doc = browse("file://" + os.path.abspath("report.html"), os.path.abspath("shots"))
    assert_clean_page(doc)
    assert_escaped(doc)
    assert_eq((doc["gpu_nvtx"]["shown"], doc["gpu_nvtx"]["ranges"], doc["gpu_nvtx"]["marks"]), (True, True, True),
              "NVTX tables shown")
    rows = doc["tables"]["gpu-nvtx-range-table"]
    head = rows[0]
    col = lambda r, k: r[head.index(k)]
    got = {col(r, "range"): (int(col(r, "count")), int(col(r, "threads")), int(col(r, "ended on another thread")))
           for r in rows[1:]}
    assert_eq(got, {"load": (2, 2, 1), EVIL: (1, 1, 0)}, "range table: names (as text), count, threads, ended elsewhere")
    load = [r for r in rows[1:] if col(r, "range") == "load"][0]
    assert_eq((col(load, "total"), col(load, "min"), col(load, "max")), ("8.00 ms", "3.00 ms", "5.00 ms"),
              "load: total, min, max")
    marks = doc["tables"]["gpu-nvtx-mark-table"]
    assert_eq({r[0]: (int(r[1]), int(r[2])) for r in marks[1:]}, {"epoch": (2, 2), EVIL: (1, 1)},
              "mark table: names (as text), count, threads")
    assert_true("1 never ended" in doc["gpu_nvtx"]["note"], "the note counts the open range: %r" % doc["gpu_nvtx"]["note"])


@timeout(400)
def test_browser_gpu_stand_in_driver():
    """A recording with the stand-in driver (timers only: no kernels, no device, no NVML):
    the GPU tab opens, lists the timers and says there are no kernels, without errors."""
    from test_gpu import fake_driver
    env = base_env({"FENNEC_LIBCUDA": fake_driver(), "FENNEC_NVML": "/nonexistent/libnvidia-ml.so.1"})
    _, path = record("gpu_fake", fake_driver(), "timers", opts=["--gpu", "--sample", "off"], env=env, expect_rc=3)
    rep = page_data(html_report(path))["analysis"]
    if "gpu" not in rep:
        raise Skip("the stand-in driver's recording has no GPU section here")
    doc = browse("file://" + os.path.abspath("report.html"), os.path.abspath("shots"))
    assert_clean_page(doc)
    assert_true("gpu" in doc["tab_buttons"], "GPU tab shown: %s" % doc["tab_buttons"])
    assert_charts_drawn(doc, {"gpu": []})
    assert_true("No kernels or copies were recorded" in doc["gpu_notices"], "the GPU tab says why it has no kernels: %r"
                % doc["gpu_notices"])
    timers = {r[0]: int(r[1]) for r in doc["tables"]["gpu-timer-table"][1:]}
    assert_eq(timers, {"step": 3, "bench": 5}, "GPU timers and their counts")


@timeout(400)
def test_browser_ranks_tab():
    """Two fake ranks (steps.c: rank 1 does twice rank 0's work): `fennec analyze DIR
    --format html` has a Ranks tab with both ranks, rank 1 marked the slowest, a step-time
    line per rank and the regions where it loses time."""
    record_ranks()
    d = page_data(html_report("job"))
    assert_eq(d["analysis"]["balance"]["slowest_rank"], 1, "the slowest rank (analysis)")
    rs = {r["rank"]: r for r in d["rank_steps"]}
    assert_eq(sorted(rs), [0, 1], "step series of both ranks")
    for r in (0, 1):
        assert_eq(len(rs[r]["durations_ns"]), 12, "rank %d's steps" % r)
    assert_rel(sorted(rs[1]["durations_ns"])[6], 10 * MS, 0.2, "rank 1's median step", "ns")
    doc = browse("file://" + os.path.abspath("report.html"), os.path.abspath("shots"))
    assert_clean_page(doc)
    assert_true("ranks" in doc["tab_buttons"] and "gpu" not in doc["tab_buttons"], "tabs shown: %s" % doc["tab_buttons"])
    assert_charts_drawn(doc, {"ranks": ["chart-rank-steps", "chart-rank-work"]})
    assert_eq(doc["tabs"]["ranks"]["charts"]["chart-rank-steps"]["series"], 2, "a step-time line per rank")
    rows = doc["tables"]["rank-table"][1:]
    assert_eq([r[0].split()[:2] for r in rows], [["rank", "0"], ["rank", "1"]], "both ranks in the table")
    slow = [r[0] for r in rows if "slowest" in r[0]]
    assert_eq(slow, ["rank 1 slowest"], "rank 1 marked the slowest")
    losses = [r[0] for r in doc["tables"]["rank-loss-table"][1:]]
    assert_true(losses and set(losses) <= {"fwd", "bwd"}, "where the slowest rank loses time: %s" % losses)
    assert_true("tab-ranks.png" in [os.path.basename(s) for s in doc["screenshots"]], "screenshot of the Ranks tab")


EVIL_C = r"""
#include <fennec.h>
#include <time.h>
int main(void)
{
	for (int i = 0; i < 5; i++) {
		fennec_region_begin(NAME);
		struct timespec ts = {0, 2000000};
		nanosleep(&ts, NULL);
		fennec_region_end();
		fennec_step();
	}
	return 0;
}
"""


@timeout(400)
def test_browser_markup_in_names():
    """A region named like markup (<script>, <img onerror>, &, quotes) is shown as text
    everywhere: tables, cards, chart tooltips; nothing runs."""
    with open("evil.c", "w") as f:
        f.write(EVIL_C)
    cc = os.environ.get("CC", "cc")
    name = EVIL.replace("\\", "\\\\").replace('"', '\\"')
    run([cc, "-O1", "-I", os.path.join(REPO, "include"), '-DNAME="%s"' % name, "evil.c", "-o", "evil"] +
        ["-L", os.path.join(BUILD, "lib"), "-lfennec", "-Wl,-rpath," + os.path.join(BUILD, "lib")], check=True)
    _, path = record(os.path.abspath("evil"), out="evil.fnc", opts=("--sample=off",))
    html = html_report(path)
    assert_true(EVIL not in html, "the name is not in the page's HTML as it is")
    assert_eq([r["name"] for r in page_data(html)["analysis"]["regions"]], [EVIL], "the region's name in the page data")
    doc = browse("file://" + os.path.abspath("report.html"), os.path.abspath("shots"))
    assert_clean_page(doc)
    assert_escaped(doc)
    rows = doc["tables"]["region-table"]
    assert_true(rows[1][0].strip() == EVIL, "the region table shows the name as text: %r" % rows[1][0])

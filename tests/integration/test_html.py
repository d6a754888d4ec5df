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

from helpers import (BUILD, REPO, SANITIZER, Skip, analyze, analyze_raw, assert_close, assert_eq, assert_true,
                     record, region, run, timeout)

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
    assert_charts_drawn(b, {"memory": ["chart-memory", "chart-rss"]})
    series = b["tabs"]["memory"]["charts"]["chart-memory"]["series"]
    assert_true(series >= 3, "heap, RSS and trend series: %d" % series)

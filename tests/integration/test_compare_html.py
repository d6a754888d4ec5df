"""fennec compare --format html: the self-contained comparison page, on recordings of
tests/fixtures/variant.c (see test_compare.py: variant 1 against 2 is a 2x speedup of
region "work" and none in "same"; B alone has region "extra"). The page data must be the
comparison itself (the same numbers as --format json, both runs' step durations, B's
differential flame graph); in Debian's headless Chromium (tests/browser/check_compare.js)
the page has no errors, no network request, every chart drawn, the forest plot has one
point per tested region, the region filter works and the flame graph's frame is drawn
with coloured frames. Screenshots go under the test's directory."""

import json
import os
import re

from helpers import REPO, Skip, assert_eq, assert_true, record, run
from test_compare import compare_json, compare_raw, record_pair, region, starved
from test_html import need_browser

CHECK = os.path.join(REPO, "tests", "browser", "check_compare.js")


def compare_html(a, b, out="compare.html"):
    r = compare_raw(a, b, "--format", "html", "-o", out)
    if r.returncode != 0:
        raise AssertionError("fennec compare --format html failed\n  " + r.describe())
    with open(out, encoding="utf-8") as f:
        html = f.read()
    m = re.search(r'<script id="fennec-data" type="application/json">(.*?)</script>', html, re.S)
    assert_true(m, "no page data element in the page")
    doc = json.loads(m.group(1))
    assert_eq(doc.get("page"), "fennec.compare-page/1", "page data schema")
    assert_true(not re.search(r'<(script|link|img)[^>]+(src|href)="https?:', html),
                "the page loads something from the network")
    return html, doc


def browse(path, shots, filt=None):
    need_browser()
    os.makedirs(shots, exist_ok=True)
    env = {k: v for k, v in os.environ.items() if not k.lower().endswith("_proxy")}
    r = run(["node", CHECK, "file://" + os.path.abspath(path), shots] + ([filt] if filt else []), env=env,
            timeout_s=240)
    try:
        res = json.loads(r.stdout.strip().splitlines()[-1])
    except (ValueError, IndexError):
        raise AssertionError("check_compare.js printed no result\n  " + r.describe())
    if res.get("skip"):
        raise Skip(res["skip"])
    assert_true("fatal" not in res, "the browser run failed: %s" % res.get("fatal"))
    for k in ("console_errors", "page_errors", "fennec_errors", "failed_requests", "external_requests"):
        assert_eq(res[k], [], k)
    for cid, c in res["charts"].items():
        assert_true(c["visible"] and c["rendered"] and c["drawn_pixels"] > 50,
                    "chart %s not drawn: %s" % (cid, c))
    return res


def test_compare_html_page():
    a, b = record_pair(["--cpu", "2", "40"], ["--cpu", "1", "40", "2000", "1000"])
    want = compare_json(a, b)
    html, doc = compare_html(a, b)
    got = doc["compare"]
    # The page carries the comparison unchanged: same schema, same verdicts and numbers.
    assert_eq(got["schema"], "fennec.compare/1", "compare schema")
    assert_eq(got["regions"], want["regions"], "regions in the page vs --format json")
    assert_eq(got["steps"], want["steps"], "steps in the page vs --format json")
    assert_eq(got["findings"], want["findings"], "findings in the page vs --format json")
    assert_eq(len(doc["steps"]["a"]), want["steps"]["a_count"], "A's step durations")
    assert_eq(len(doc["steps"]["b"]), want["steps"]["b_count"], "B's step durations")
    assert_true(doc["diff_svg"] and doc["diff_svg"].lstrip().startswith(("<?xml", "<svg")),
                "the page has B's differential flame graph")
    assert_true("variant_work" in doc["diff_svg"] and "variant_extra" in doc["diff_svg"],
                "the flame graph names the fixture's functions")
    assert_eq(doc["diff_note"], None, "diff_note when the graph is there")

    res = browse("compare.html", "shots", filt="work")
    tested = [r for r in want["regions"] if r["tested"] and r["speedup"] and r["ci_low"]]
    assert_eq(res["charts"]["chart-forest"]["points"], len(tested), "forest plot points (tested regions)")
    assert_eq(res["charts"]["chart-steps"]["points"], want["steps"]["a_count"] + want["steps"]["b_count"],
              "step chart points (both runs)")
    assert_eq(len(res["regions"]), len(want["regions"]), "region table rows")
    assert_eq([r[0] for r in res["filtered"]], ["work"], "region table filtered by 'work'")
    assert_true(res["diff"]["shown"] and res["diff"]["frames"] >= 5,
                "the flame graph frame is drawn: %s" % res["diff"])
    assert_true(res["diff"]["coloured"] >= 1, "frames coloured by change: %s" % res["diff"])
    why = starved(want)
    work = region(want, "work")
    verdict = res["verdict"]
    if work["significant"] and want["steps"]["significant"]:
        assert_true(verdict.startswith("B is ") and "faster per step" in verdict, "verdict line: %r" % verdict)
    elif why:
        raise Skip(why)
    for shot in res["screenshots"]:
        assert_true(os.path.getsize(shot) > 5000, "screenshot %s is empty" % shot)


def test_compare_html_without_samples():
    """Recordings without CPU samples: the page says why there is no flame graph."""
    a = record("variant", "2", "12", out="ns_a.fnc", opts=["--sample=off"])[1]
    b = record("variant", "1", "12", out="ns_b.fnc", opts=["--sample=off"])[1]
    _, doc = compare_html(a, b, out="plain.html")
    assert_eq(doc["diff_svg"], None, "no flame graph without samples")
    assert_true("no on-CPU samples" in doc["diff_note"], "diff_note: %r" % doc["diff_note"])
    res = browse("plain.html", "shots-plain")
    assert_true(not res["diff"]["shown"] and "no on-CPU samples" in res["diff"]["note"],
                "the page shows the reason: %s" % res["diff"])

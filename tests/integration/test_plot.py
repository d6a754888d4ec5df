"""fennec plot: charts of real recordings (fixtures nested.c, steps.c, metrics.c) checked by
parsing the files. SVG with Python's XML parser: the size attributes, the data series as
polylines with one point per step or metric update, placed as the analysis's numbers say
(a linear y axis: every point and the mean line where the durations put them), bars as
long as the regions' totals. PNG by decoding it here (signature, IHDR, zlib, the scanline
filters): the size asked for, and pixels of the series' colours, not a blank image.
No timing thresholds: positions are checked against the report's own numbers."""

import os
import struct
import xml.etree.ElementTree as ET
import zlib

from helpers import (Skip, analyze, assert_clean_error, assert_eq, assert_true, fennec_bin, metric,
                     record, region, run, without_library)

NS = "{http://www.w3.org/2000/svg}"
SERIES_RGB = (0x1f, 0x77, 0xb4)


def plot_raw(path, *opts):
    return run([fennec_bin(), "plot", str(path)] + [str(o) for o in opts], timeout_s=300)


def plot(path, kind, out, *opts):
    r = plot_raw(path, "--kind", kind, "-o", out, *opts)
    if r.returncode != 0:
        raise AssertionError("fennec plot --kind %s failed\n  %s" % (kind, r.describe()))
    assert_true(os.path.exists(out), "fennec plot wrote no %s" % out)
    return out


# --- SVG ---------------------------------------------------------------------------------

def read_svg(path, width, height):
    root = ET.parse(path).getroot()
    assert_eq(root.tag, NS + "svg", "root element")
    assert_eq((root.get("width"), root.get("height")), (str(width), str(height)), "SVG width and height")
    assert_eq(root.get("viewBox"), "0 0 %d %d" % (width, height), "viewBox")
    return root


def by_class(root, tag, cls):
    return [e for e in root.iter(NS + tag) if e.get("class") == cls]


def points(polyline):
    return [tuple(float(v) for v in p.split(",")) for p in polyline.get("points").split()]


def texts(root):
    return [t.text or "" for t in root.iter(NS + "text")]


def check_linear(values, ys, what):
    """ys are a decreasing linear function of values (a y axis, pixels down): fitted on the
    extremes, every point within 0.05 px (coordinates are written with 2 decimals).
    Returns the fit (value -> y)."""
    lo, hi = values.index(min(values)), values.index(max(values))
    assert_true(values[hi] > values[lo], "%s: the values are all equal" % what)
    scale = (ys[hi] - ys[lo]) / (values[hi] - values[lo])
    assert_true(scale < 0, "%s: larger values must be drawn higher (smaller y)" % what)
    fit = lambda v: ys[lo] + (v - values[lo]) * scale
    for i, (v, y) in enumerate(zip(values, ys)):
        assert_true(abs(fit(v) - y) <= 0.05, "%s: point %d (value %s) at y %.2f, the axis puts it at %.2f"
                    % (what, i, v, y, fit(v)))
    return fit


# --- PNG ---------------------------------------------------------------------------------

def read_png(path, width, height):
    """Decode an 8-bit RGB or RGBA PNG: checks the signature, IHDR, the CRCs and the size;
    returns rows of (r, g, b) pixels."""
    with open(path, "rb") as f:
        data = f.read()
    assert_eq(data[:8], b"\x89PNG\r\n\x1a\n", "PNG signature")
    pos, chunks = 8, []
    while pos < len(data):
        n, typ = struct.unpack(">I4s", data[pos:pos + 8])
        body = data[pos + 8:pos + 8 + n]
        crc, = struct.unpack(">I", data[pos + 8 + n:pos + 12 + n])
        assert_eq(zlib.crc32(typ + body) & 0xffffffff, crc, "CRC of the %s chunk" % typ)
        chunks.append((typ, body))
        pos += 12 + n
    assert_eq(chunks[0][0], b"IHDR", "first chunk")
    assert_eq(chunks[-1][0], b"IEND", "last chunk")
    w, h, depth, ctype, _, _, interlace = struct.unpack(">IIBBBBB", chunks[0][1])
    assert_eq((w, h), (width, height), "PNG size (IHDR)")
    assert_eq(depth, 8, "bit depth")
    assert_true(ctype in (2, 6), "colour type RGB or RGBA, got %d" % ctype)
    assert_eq(interlace, 0, "interlace")
    raw = zlib.decompress(b"".join(body for typ, body in chunks if typ == b"IDAT"))
    bpp = 3 if ctype == 2 else 4
    stride = w * bpp
    assert_eq(len(raw), h * (stride + 1), "decompressed image data length")
    rows, prev = [], bytearray(stride)
    for y in range(h):
        ftype, line = raw[y * (stride + 1)], bytearray(raw[y * (stride + 1) + 1:(y + 1) * (stride + 1)])
        for i in range(stride):
            a = line[i - bpp] if i >= bpp else 0
            b, c = prev[i], prev[i - bpp] if i >= bpp else 0
            if ftype == 1:
                line[i] = (line[i] + a) & 0xff
            elif ftype == 2:
                line[i] = (line[i] + b) & 0xff
            elif ftype == 3:
                line[i] = (line[i] + (a + b) // 2) & 0xff
            elif ftype == 4:
                pa, pb, pc = abs(b - c), abs(a - c), abs(a + b - 2 * c)
                line[i] = (line[i] + (a if pa <= pb and pa <= pc else b if pb <= pc else c)) & 0xff
            else:
                assert_eq(ftype, 0, "scanline filter type")
        rows.append([tuple(line[x * bpp:x * bpp + 3]) for x in range(w)])
        prev = line
    return rows


def colour_count(rows, rgb, tol=24):
    return sum(1 for row in rows for p in row if all(abs(p[i] - rgb[i]) <= tol for i in range(3)))


def check_png_drawn(rows, *colours):
    pixels = sum(len(r) for r in rows)
    white = colour_count(rows, (255, 255, 255), 0)
    assert_true(pixels - white >= pixels // 200,
                "the image is blank: %d of %d pixels are not white" % (pixels - white, pixels))
    for rgb in colours:
        assert_true(colour_count(rows, rgb) >= 20, "no pixels of colour #%02x%02x%02x (a series)" % rgb)


# --- tests -------------------------------------------------------------------------------

def test_plot_steps_svg():
    n = 20
    _, path = record("steps", n, 10, 32, opts=("--sample", "off"))
    rep = analyze(path)
    root = read_svg(plot(path, "steps", "steps.svg", "--width", 800, "--height", 450), 800, 450)
    series = by_class(root, "polyline", "series")
    assert_eq(len(series), 1, "one series")
    pts = points(series[0])
    assert_eq(len(pts), n, "one point per step")
    xs = [p[0] for p in pts]
    assert_true(all(b > a for a, b in zip(xs, xs[1:])), "steps from left to right: %s" % xs)
    gaps = [b - a for a, b in zip(xs, xs[1:])]
    assert_true(max(gaps) - min(gaps) <= 0.02, "steps evenly spaced: %s" % gaps)
    fit = check_linear(rep["steps"]["durations_ns"], [p[1] for p in pts], "step durations")
    mean = by_class(root, "line", "mean")
    assert_eq(len(mean), 1, "one mean line")
    y_mean = float(mean[0].get("y1"))
    assert_true(abs(y_mean - fit(rep["summary"]["step_mean_ns"])) <= 0.05,
                "the mean line is at y %.2f, the mean step duration is at %.2f" % (
                    y_mean, fit(rep["summary"]["step_mean_ns"])))
    assert_true(all(0 <= x <= 800 for x in xs) and all(0 <= p[1] <= 450 for p in pts), "points inside the image")
    t = texts(root)
    assert_true(any("%d steps" % n in s for s in t), "subtitle with the step count: %s" % t)
    assert_true(any(s.startswith("mean ") for s in t), "legend entry for the mean: %s" % t)
    assert_true(any(s.endswith(" ms") for s in t), "tick labels in ms: %s" % t)


def test_plot_steps_png():
    _, path = record("steps", 20, 10, 32, opts=("--sample", "off"))
    for w, h in ((640, 360), (1200, 800)):
        out = "steps_%dx%d.png" % (w, h)
        rows = read_png(plot(path, "steps", out, "--width", w, "--height", h), w, h)
        # (the mean line runs along the series here: steps of one length; the SVG test
        # checks where it is)
        check_png_drawn(rows, SERIES_RGB)


def test_plot_timing():
    _, path = record("nested", 300, opts=("--sample", "off"))
    rep = analyze(path)
    root = read_svg(plot(path, "timing", "timing.svg"), 960, 540)
    bars = by_class(root, "rect", "bar")
    assert_eq(len(bars), 3, "a bar per region (phase_b, phase_a, phase_a/inner_x)")
    tips = [b.find(NS + "title").text for b in bars]
    paths = [t.split(":")[0] for t in tips]
    assert_eq(paths, [r["path"] for r in rep["regions"]], "bars in the report's order (total time)")
    for t in tips:
        assert_true("10 calls" in t, "each region's 10 calls in its tooltip: %r" % t)
    widths = [float(b.get("width")) for b in bars]
    lefts = {b.get("x") for b in bars}
    assert_eq(len(lefts), 1, "bars start on one axis")
    # lengths proportional to the totals (2 decimals of a pixel)
    scale = widths[0] / rep["regions"][0]["total_ns"]
    for p, w in zip(paths, widths):
        assert_true(abs(w - region(rep, p)["total_ns"] * scale) <= 0.05,
                    "%s: bar %.2f px, its total puts it at %.2f" % (p, w, region(rep, p)["total_ns"] * scale))
    # the self part of phase_a: its share of the bar
    selfs = {b.get("y"): float(b.get("width")) for b in by_class(root, "rect", "self")}
    a = region(rep, "phase_a")
    bar_a = bars[paths.index("phase_a")]
    assert_true(abs(selfs[bar_a.get("y")] - a["self_ns"] * scale) <= 0.05,
                "phase_a self part %.2f px, its self time puts it at %.2f" % (
                    selfs[bar_a.get("y")], a["self_ns"] * scale))
    t = texts(root)
    for p in paths:
        assert_true(p in t, "label %s: %s" % (p, t))
    assert_true(any("10 calls" in s for s in t), "calls shown beside the bars")
    assert_true({"total", "self (outside nested regions)"} <= set(t), "legend: %s" % t)
    rows = read_png(plot(path, "timing", "timing.png", "--width", 800, "--height", 400), 800, 400)
    check_png_drawn(rows, (0x31, 0x82, 0xbd))


def test_plot_metrics():
    _, path = record("metrics", opts=("--sample", "off"))
    rep = analyze(path)
    # a value: 1, 2, ..., 100 in time order
    root = read_svg(plot(path, "metrics", "loss.svg", "--metric", "loss"), 960, 540)
    pts = points(by_class(root, "polyline", "series")[0])
    assert_eq(len(pts), metric(rep, "loss")["count"], "one point per update of loss")
    check_linear(list(range(1, 101)), [p[1] for p in pts], "loss values")
    xs = [p[0] for p in pts]
    assert_eq(xs, sorted(xs), "points in time order")
    # a gauge: 0.1, 0.5, 0.3, 0.25
    root = read_svg(plot(path, "metrics", "lr.svg", "--metric", "lr", "--width", 500, "--height", 300), 500, 300)
    pts = points(by_class(root, "polyline", "series")[0])
    check_linear([0.1, 0.5, 0.3, 0.25], [p[1] for p in pts], "lr values")
    t = texts(root)
    assert_true(any(s.startswith("gauge") and "4 updates" in s for s in t), "gauge subtitle: %s" % t)
    # a counter, as its running total: 1000 updates of 100 bytes, the axis in KiB
    root = read_svg(plot(path, "metrics", "bytes.svg", "--metric", "bytes"), 960, 540)
    pts = points(by_class(root, "polyline", "series")[0])
    assert_eq(len(pts), 1000, "one point per update of bytes")
    check_linear(list(range(100, 100001, 100)), [p[1] for p in pts], "bytes running total")
    t = texts(root)
    assert_true("bytes (running total)" in t, "legend of a counter: %s" % t)
    assert_true(any(s.endswith(" KiB") for s in t), "a byte axis in KiB: %s" % t)
    rows = read_png(plot(path, "metrics", "loss.png", "--metric", "loss"), 960, 540)
    check_png_drawn(rows, SERIES_RGB)


def test_plot_one_metric_needs_no_name():
    _, path = record("steps", 5, 10, 32, opts=("--sample", "off"))
    root = read_svg(plot(path, "metrics", "tokens.svg"), 960, 540)
    pts = points(by_class(root, "polyline", "series")[0])
    assert_eq(len(pts), 5, "tokens: one update per step")


def test_plot_title_from_any_bytes():
    # The default title names the recording's file, whose name can be any bytes: the SVG
    # stays well-formed XML and cairo draws it (both need valid UTF-8).
    name = os.fsdecode(b"a&<\"\xff.fnc")
    _, path = record("steps", 3, 10, 32, out=name, opts=("--sample", "off"))
    root = read_svg(plot(path, "steps", "t.svg"), 960, 540)
    assert_true('a&<"?.fnc: step duration' in texts(root), "title: %s" % texts(root)[:3])
    read_png(plot(path, "steps", "t.png", "--title", os.fsdecode(b"x\xc0\xafy")), 960, 540)


def test_plot_memory():
    _, path = record("steps", 20, 10, 32, opts=("--sample", "off", "--memory", "full"))
    rep = analyze(path)
    mem = rep.get("memory")
    if not mem or not mem.get("timeline"):
        raise Skip("the recording has no memory timeline (--memory full): %s" % (mem,))
    timeline = mem["timeline"]
    root = read_svg(plot(path, "memory", "mem.svg"), 960, 540)
    series = {s.find(NS + "title").text: points(s) for s in by_class(root, "polyline", "series")}
    assert_eq(sorted(series), ["RSS", "live heap"] if any(p["rss_bytes"] for p in timeline) else ["live heap"],
              "series")
    live, rss = series["live heap"], series.get("RSS", [])
    assert_eq(len(live), len(timeline), "one live heap point per snapshot of the timeline")
    assert_eq(len(rss), sum(1 for p in timeline if p["rss_bytes"]), "one RSS point per snapshot with an RSS")
    xs = [p[0] for p in live]
    assert_eq(xs, sorted(xs), "snapshots in time order")
    values = [p["live_bytes"] for p in timeline] + [p["rss_bytes"] for p in timeline if p["rss_bytes"]]
    if len(set(values)) > 1:
        check_linear(values, [p[1] for p in live + rss], "live heap and RSS on one byte axis")
    t = texts(root)
    assert_true("live heap" in t, "legend: %s" % t)
    assert_true(any(s.endswith("iB") or s.endswith(" B") for s in t), "a byte axis: %s" % t)
    rows = read_png(plot(path, "memory", "mem.png", "--width", 700, "--height", 400), 700, 400)
    check_png_drawn(rows, SERIES_RGB)


def test_plot_memory_without_memory_data():
    _, path = record("nested", 100, opts=("--sample", "off", "--memory", "off"))
    r = plot_raw(path, "--kind", "memory", "-o", "mem.png")
    assert_clean_error(r, path, "no memory data", "--memory off")
    assert_eq(r.returncode, 1, "exit status")
    assert_true(not os.path.exists("mem.png"), "no image written")


def test_plot_errors():
    _, path = record("metrics", opts=("--sample", "off"))
    r = plot_raw(path, "--kind", "pie", "-o", "x.svg")
    assert_eq(r.returncode, 2, "unknown kind")
    assert_true("--kind must be timing, steps, metrics or memory, not 'pie'" in r.stderr, r.stderr)
    for opt, val in (("--width", "10"), ("--height", "100000"), ("--width", "wide"), ("--height", "-5")):
        r = plot_raw(path, "--kind", "timing", "-o", "x.svg", opt, val)
        assert_eq(r.returncode, 2, "bad size %s %s" % (opt, val))
        assert_true(opt in r.stderr and val in r.stderr, "the message names the option: " + r.stderr)
    r = plot_raw(path, "--kind", "timing", "-o", "x.jpg")
    assert_eq(r.returncode, 2, "unknown image format")
    assert_true(".svg or .png" in r.stderr, r.stderr)
    r = plot_raw(path, "--kind", "timing")
    assert_eq(r.returncode, 2, "no output")
    r = plot_raw(path, "--kind", "timing", "-o", "/nonexistent-dir/x.png")
    assert_eq(r.returncode, 1, "unwritable output")
    assert_true("cannot write /nonexistent-dir/x.png" in r.stderr, r.stderr)
    r = plot_raw(path, "--kind", "steps", "-o", "x.svg")
    assert_clean_error(r, path, "no steps", "fennec_step")
    r = plot_raw(path, "--kind", "metrics", "-o", "x.svg")
    assert_eq(r.returncode, 2, "several metrics and no --metric")
    for name in ("balance", "bytes", "loss", "lr", "mt_bytes"):
        assert_true(name in r.stderr, "the message lists the metrics: " + r.stderr)
    r = plot_raw(path, "--kind", "metrics", "--metric", "nope", "-o", "x.svg")
    assert_clean_error(r, path, "no metric 'nope'", "loss")
    assert_true(not os.path.exists("x.svg"), "no image written by the failures")
    _, empty = record("empty", out="empty.fnc", opts=("--sample", "off"))
    r = plot_raw(empty, "--kind", "timing", "-o", "x.svg")
    assert_clean_error(r, empty, "no regions")
    r = plot_raw("missing.fnc", "--kind", "timing", "-o", "x.svg")
    assert_clean_error(r, "missing.fnc")


def test_plot_without_cairo():
    """cairo is loaded when a PNG is first written, not linked (src/common/lib.h): without
    it, a PNG fails before the recording is read, with a message that names the package,
    and writes nothing; SVG works."""
    _, path = record("steps", 20, 2, opts=("--sample", "off"))
    r = run(without_library("libcairo.so.2", [fennec_bin(), "plot", path, "--kind", "steps", "-o", "x.png"]))
    assert_eq(r.returncode, 1, "exit status without cairo (stderr %r)" % r.stderr)
    assert_true("cannot write PNG" in r.stderr and "libcairo.so.2" in r.stderr and "libcairo2" in r.stderr,
                "the message names the library and its package: %r" % r.stderr)
    assert_true(not os.path.exists("x.png"), "no PNG written")
    r = run(without_library("libcairo.so.2", [fennec_bin(), "plot", path, "--kind", "steps", "-o", "x.svg"]))
    assert_eq(r.returncode, 0, "SVG without cairo (stderr %r)" % r.stderr)
    read_svg("x.svg", 960, 540)

"""The roofline (docs/roofline.md): `fennec calibrate` measures and stores this machine's
ceilings; regions annotated with fennec_region_work() are placed against them. The
ceilings the analysis tests use are written by hand, so the expected numbers follow from
the fixture's known work (tests/fixtures/roofline.c: FLOP and bytes per call, 20 calls)
and the region times the same analysis reports; the measurement itself is checked for
shape and sanity only (no timing thresholds)."""

import math
import os

from helpers import (analyze, analyze_raw, assert_close, assert_eq, assert_true, base_env, fennec_bin, record,
                     run)

CALLS = 20
N = 1 << 20
WORK = {  # path: (FLOP, bytes) per call
    "stream": (2 * N, 24 * N),
    "dense": (2 * 8 * 200000, 64),
    "dense32": (2 * 8 * 200000, 64),
    "outer/inner": (1000000, 1024 * 1024),
}
CEIL = {"bw_triad": 1e10, "bw_triad_1t": 8e9, "flops_fp64": 1e11, "flops_fp64_1t": 5e10, "flops_fp32": 2e11,
        "flops_fp32_1t": 1e11}


def write_calibration(path, **over):
    c = dict(CEIL, **over)
    with open(path, "w") as f:
        f.write("fennec-calibration 1\nthreads 2\nhost test\ncpu test\nisa avx2+fma\n")
        for k, v in c.items():
            f.write("%s %r\n" % (k, v))
    return os.path.abspath(path)


def rel_close(got, want, what, rel=1e-9):
    assert_true(got is not None and abs(got - want) <= rel * abs(want),
                "%s: got %r, expected %r" % (what, got, want))


def test_calibrate_measures_and_stores():
    r = run([fennec_bin(), "calibrate", "-o", "cal/machine", "--mib", "16", "--reps", "1"], timeout_s=300)
    assert_eq(r.returncode, 0, "fennec calibrate exit status\n  " + r.describe())
    with open("cal/machine") as f:
        lines = f.read().splitlines()
    assert_eq(lines[0], "fennec-calibration 1", "first line")
    vals = dict(l.split(" ", 1) for l in lines[1:] if l and not l.startswith("#"))
    for k in ("bw_read", "bw_copy", "bw_triad", "bw_read_1t", "bw_triad_1t", "flops_fp64", "flops_fp32",
              "flops_fp64_1t", "flops_fp32_1t"):
        v = float(vals[k])
        assert_true(math.isfinite(v) and v > 0, "%s = %r" % (k, vals[k]))
    # Sanity, not speed: bandwidth between 100 MB/s and 10 TB/s, FLOP/s between 100 MFLOP/s
    # and 100 TFLOP/s, whatever the machine and its load.
    assert_true(1e8 < float(vals["bw_triad"]) < 1e13, "triad bandwidth %s" % vals["bw_triad"])
    assert_true(1e8 < float(vals["flops_fp64"]) < 1e14, "fp64 FLOP/s %s" % vals["flops_fp64"])
    assert_true(vals["isa"] in ("avx512f", "avx2+fma", "scalar"), "isa %r" % vals["isa"])
    r = run([fennec_bin(), "calibrate", "--show", "-o", "cal/machine"])
    assert_eq(r.returncode, 0, "--show\n  " + r.describe())
    assert_true("ridge point" in r.stdout and "GFLOP/s" in r.stdout, "--show prints the ceilings:\n" + r.stdout)
    # The default place: $FENNEC_CALIBRATION, else under $HOME.
    env = base_env({"HOME": os.path.abspath("home")})
    env.pop("FENNEC_CALIBRATION", None)
    env.pop("XDG_CONFIG_HOME", None)
    r = run([fennec_bin(), "calibrate", "--show"], env=env)
    assert_eq(r.returncode, 1, "--show without a calibration\n  " + r.describe())
    assert_true("no calibration yet" in r.stderr and "home/.config/fennec/calibration" in r.stderr,
                "says where it looked:\n" + r.stderr)


def test_calibrate_errors():
    for args, want in ((["--threads", "0"], 2), (["--mib", "x"], 2), (["--bogus"], 2),
                       (["-o", "/proc/fennec-no/cal", "--mib", "4", "--reps", "1"], 1)):
        r = run([fennec_bin(), "calibrate"] + args, timeout_s=300)
        assert_eq(r.returncode, want, "fennec calibrate %s\n  %s" % (" ".join(args), r.describe()))
        assert_true(r.stderr.startswith("fennec calibrate:"), "one clear message:\n" + r.stderr)
    with open("bad", "w") as f:
        f.write("fennec-calibration 1\nbw_triad fast\n")
    r = run([fennec_bin(), "calibrate", "--show", "-o", "bad"])
    assert_eq(r.returncode, 1, "--show of a corrupt file")
    assert_true("bad:2" in r.stderr, "names the file and line:\n" + r.stderr)


def test_roofline_known_work():
    _, path = record("roofline", CALLS)
    cal = write_calibration("cal")
    rep = analyze(path, "--calibration", cal)
    rl = rep["roofline"]
    assert_true(rl and rl["calibrated"], "roofline section, calibrated: %r" % rl)
    assert_eq(rl["calibration"], cal, "the calibration used")
    assert_eq(rl["ridge_ai"], 10.0, "ridge point of the all-thread ceilings")
    assert_eq(rl["ridge_ai_fp32"], 20.0, "fp32 ridge point of the all-thread ceilings")
    text = analyze_raw(path, "--calibration", cal).stdout
    assert_true("ridge        10.00 FLOP/byte fp64, 20.00 fp32 (one thread: 6.25, 12.50)" in text,
                "the header gives both ridges, as the regions are judged:\n" + text)
    got = {r["path"]: r for r in rl["regions"]}
    assert_eq(sorted(got), sorted(WORK), "annotated regions (outer and plain have no work of their own)")
    regions = {r["path"]: r for r in rep["regions"]}
    for path_, (fl, by) in WORK.items():
        r = got[path_]
        assert_eq(r["flops"], CALLS * fl, path_ + " FLOP")
        assert_eq(r["bytes"], CALLS * by, path_ + " bytes")
        assert_eq(r["self_ns"], regions[path_]["self_ns"], path_ + " own time = the region's self time")
        assert_true(r["one_thread"], path_ + " ran on one thread")
        s = r["self_ns"] / 1e9
        rel_close(r["ai"], fl / by, path_ + " intensity")
        rel_close(r["flops_per_s"], CALLS * fl / s, path_ + " FLOP/s")
        rel_close(r["bytes_per_s"], CALLS * by / s, path_ + " bytes/s")
        # one-thread ceilings: 50 GFLOP/s fp64 (100 fp32) and 8 GB/s, ridge 6.25 (12.5 fp32)
        fp32 = path_ == "dense32"
        assert_eq(r["precision"], "fp32" if fp32 else "fp64", path_ + " precision")
        peak = 1e11 if fp32 else 5e10
        rel_close(r["ridge_ai"], peak / 8e9, path_ + " ridge")
        roof = min(peak, fl / by * 8e9)
        rel_close(r["roof"], roof, path_ + " roof")
        rel_close(r["roof_pct"], 100 * CALLS * fl / s / roof, path_ + " % of roof")
        assert_eq(r["bound"], "memory" if fl / by < peak / 8e9 else "compute", path_ + " bound")
    # The counters are there too.
    m = {x["name"]: x for x in rep["metrics"]}
    assert_eq(m["fennec.flops"]["total"], CALLS * sum(w[0] for w in WORK.values()), "fennec.flops total")
    assert_eq(m["fennec.flops32"]["total"], CALLS * WORK["dense32"][0], "fennec.flops32 total")
    assert_eq(m["fennec.bytes"]["total"], CALLS * sum(w[1] for w in WORK.values()), "fennec.bytes total")
    # Findings: every annotated region from 5 % of the wall, with the gain it documents.
    fs = [f for f in rep["findings"] if f["type"] in ("memory_bound", "compute_bound")]
    want = {p_ for p_ in WORK if regions[p_]["self_pct"] >= 5}
    assert_eq(sorted(f["subject"] for f in fs), sorted(want), "roofline findings")
    for f in fs:
        r = got[f["subject"]]
        assert_eq(f["type"], r["bound"] + "_bound", f["subject"] + " finding type")
        gain = regions[f["subject"]]["self_pct"] * max(0.0, 1 - r["roof_pct"] / 100)
        assert_close(f["expected_gain_pct"], gain, 1e-6, f["subject"] + " expected gain", "%")
        sev = "HIGH" if gain >= 10 else "MEDIUM" if gain >= 3 else "LOW"
        assert_eq(f["severity"], sev, f["subject"] + " severity")
    text = analyze_raw(path, "--calibration", cal).stdout
    assert_true("Roofline" in text and "dense" in text and "compute" in text, "text section:\n" + text)
    # A higher threshold leaves them out.
    rep = analyze(path, "--calibration", cal, "--roofline-min-share", "100")
    assert_eq([f for f in rep["findings"] if f["type"].endswith("_bound")], [], "findings above 100 %")


def test_roofline_without_calibration():
    _, path = record("roofline", 4)
    env = base_env({"HOME": os.path.abspath("home")})
    for k in ("FENNEC_CALIBRATION", "XDG_CONFIG_HOME"):
        env.pop(k, None)
    r = analyze_raw(path, env=env)
    assert_eq(r.returncode, 0, "analyze without a calibration\n  " + r.describe())
    assert_true("run `fennec calibrate`" in r.stdout, "the text says how to get the ceilings:\n" + r.stdout)
    r = analyze_raw(path, "--format", "json", env=env)
    import json
    rep = json.loads(r.stdout)
    rl = rep["roofline"]
    assert_eq(rl["calibrated"], False, "calibrated")
    assert_eq(rl["calibration_error"], None, "no error when none was asked for")
    assert_true(all(x["roof_pct"] is None and x["bound"] is None and x["ai"] > 0 for x in rl["regions"]),
                "intensities without roofs or bounds: %r" % rl["regions"])
    assert_eq([f for f in rep["findings"] if f["type"].endswith("_bound")], [], "no roofline finding")
    # A calibration file that cannot be read is said, not ignored.
    with open("broken", "w") as f:
        f.write("not a calibration\n")
    rep = analyze(path, "--calibration", "broken")
    assert_eq(rep["roofline"]["calibrated"], False, "calibrated with a broken file")
    assert_true("not" in (rep["roofline"]["calibration_error"] or ""), "the error: %r" % rep["roofline"])


def test_no_annotation_no_roofline():
    _, path = record("nested", 100)
    rep = analyze(path)
    assert_eq(rep["roofline"], None, "roofline of a recording without annotations")

"""`fennec export --format tensorboard -o DIR` (docs/export.md): read back with a decoder of
TFRecord framing (masked CRC-32C checked) and of the Event and Summary protobufs written
here, independently of fennec, on a synthetic recording whose every value is known."""

import glob
import os
import struct

import fncwrite
from helpers import TSAN_FORK, assert_eq, assert_rel, assert_true, collector, fennec_bin, record, run, skip_under

MS = 1_000_000
STEPS_MS = [100, 200, 300, 400, 500]


def crc32c(data):
    crc = 0xFFFFFFFF
    for b in data:
        crc ^= b
        for _ in range(8):
            crc = (crc >> 1) ^ (0x82F63B78 if crc & 1 else 0)
    return crc ^ 0xFFFFFFFF


def masked(data):
    c = crc32c(data)
    return (((c >> 15) | (c << 17)) + 0xA282EAD8) & 0xFFFFFFFF


def varint(b, pos):
    v = shift = 0
    while True:
        x = b[pos]
        pos += 1
        v |= (x & 0x7F) << shift
        shift += 7
        if not x & 0x80:
            return v, pos


def fields(b):
    """(field, wire type, value) of a protobuf message: varints as ints, fixed64 and
    fixed32 as bytes, length-delimited as bytes."""
    pos, out = 0, []
    while pos < len(b):
        key, pos = varint(b, pos)
        f, w = key >> 3, key & 7
        if w == 0:
            v, pos = varint(b, pos)
        elif w == 1:
            v, pos = b[pos:pos + 8], pos + 8
        elif w == 5:
            v, pos = b[pos:pos + 4], pos + 4
        elif w == 2:
            n, pos = varint(b, pos)
            v, pos = b[pos:pos + n], pos + n
        else:
            raise AssertionError("wire type %d" % w)
        out.append((f, w, v))
    assert_eq(pos, len(b), "message length")
    return out


def histo(b):
    """HistogramProto: min, max, num, sum, sum_squares, bucket_limit, bucket (packed)."""
    h = {}
    for f, w, v in fields(b):
        if w == 1:
            h[{1: "min", 2: "max", 3: "num", 4: "sum", 5: "sum_squares"}[f]] = struct.unpack("<d", v)[0]
        elif w == 2:
            h[{6: "bucket_limit", 7: "bucket"}[f]] = list(struct.unpack("<%dd" % (len(v) // 8), v))
    return h


def read_events(path):
    """Every Event of a TFRecord file: {"wall_time", "step", "file_version"} or with
    "scalars" [(tag, value)]. Every length and record CRC is checked."""
    data = open(path, "rb").read()
    pos, events = 0, []
    while pos < len(data):
        head = data[pos:pos + 8]
        n = struct.unpack("<Q", head)[0]
        assert_eq(struct.unpack("<I", data[pos + 8:pos + 12])[0], masked(head), "length CRC at %d" % pos)
        body = data[pos + 12:pos + 12 + n]
        assert_eq(struct.unpack("<I", data[pos + 12 + n:pos + 16 + n])[0], masked(body), "data CRC at %d" % pos)
        pos += 16 + n
        ev = {"step": 0}
        for f, w, v in fields(body):
            if f == 1 and w == 1:
                ev["wall_time"] = struct.unpack("<d", v)[0]
            elif f == 2 and w == 0:
                ev["step"] = v
            elif f == 3 and w == 2:
                ev["file_version"] = v.decode()
            elif f == 5 and w == 2:
                ev["scalars"] = []
                for sf, sw, sv in fields(v):
                    assert_eq((sf, sw), (1, 2), "Summary.value")
                    tag = val = None
                    for vf, vw, vv in fields(sv):
                        if vf == 1:
                            tag = vv.decode()
                        elif vf == 2 and vw == 5:
                            val = struct.unpack("<f", vv)[0]
                        elif vf == 5 and vw == 2:
                            val = histo(vv)
                    ev["scalars"].append((tag, val))
        events.append(ev)
    return events


def series(events):
    out = {}
    for ev in events:
        for tag, v in ev.get("scalars", ()):
            out.setdefault(tag, []).append((ev["step"], v))
    return out


def test_crc32c_check_value():
    """The test's own CRC-32C is the standard one (check value of "123456789")."""
    assert_eq(crc32c(b"123456789"), 0xE3069283, "CRC-32C check value")


def test_tensorboard_known_values():
    """Five steps of 100..500 ms, each with a region of half the step, a loss of 1/(k+1)
    and a learning rate of 0.1 (k+1): each series has those values at steps 0..4."""
    w = fncwrite.Writer()
    main = w.thread(4242, "main")
    t = w.start_mono_ns
    w.step(main, t)  # the loop starts here: a step runs from mark to mark
    for k, ms in enumerate(STEPS_MS):
        w.region(main, "work", t, t + ms * MS // 2)
        w.value(main, "loss", t + ms * MS // 2, 1.0 / (k + 1))
        w.value(main, "lr", t + ms * MS // 2, 0.1 * (k + 1), gauge=True)
        t += ms * MS
        w.step(main, t)
    open("tb.fnc", "wb").write(w.data(end_ns=t + MS))
    r = run([fennec_bin(), "export", "tb.fnc", "--format", "tensorboard", "-o", "tb"])
    assert_eq(r.returncode, 0, "export\n" + r.describe())
    files = glob.glob("tb/events.out.tfevents.*")
    assert_eq(len(files), 1, "one event file: %r" % os.listdir("tb"))
    name = os.path.basename(files[0])
    assert_true(name.endswith(".synthetic-host.4242"), "named by host and pid: %s" % name)
    ev = read_events(files[0])
    assert_eq(ev[0].get("file_version"), "brain.Event:2", "the first event is the file version")
    s = series(ev)
    got = [(st, round(v, 3)) for st, v in s["step/time_ms"]]
    assert_eq(got, [(k, float(ms)) for k, ms in enumerate(STEPS_MS)], "step times")
    for k, ms in enumerate(STEPS_MS):
        assert_rel(s["step/steps_per_s"][k][1], 1000.0 / ms, 1e-6, "steps/s of step %d" % k)
    assert_eq([st for st, _ in s["values/loss"]], list(range(5)), "loss by step")
    for k, (_, v) in enumerate(s["values/loss"]):
        assert_rel(v, 1.0 / (k + 1), 1e-6, "loss of step %d" % k)
    for k, (_, v) in enumerate(s["gauges/lr"]):
        assert_rel(v, 0.1 * (k + 1), 1e-6, "lr of step %d" % k)
    work = s["regions/work_ms"]
    assert_eq([st for st, _ in work], list(range(5)), "region time by step")
    for k, (_, v) in enumerate(work):
        assert_rel(v, STEPS_MS[k] / 2, 1e-4, "work of step %d" % k)
    hs = s["step/time_ms_histogram"]
    assert_eq(len(hs), 5, "one histogram per step (5 steps, blocks of one)")
    for k, (st, h) in enumerate(hs):
        assert_eq((st, h["num"], h["min"], h["max"], sum(h["bucket"])), (k, 1.0, STEPS_MS[k], STEPS_MS[k], 1.0),
                  "histogram of step %d" % k)
    walls = [e["wall_time"] for e in ev]
    assert_true(all(1.6e9 < x < 1.8e9 for x in walls), "wall times in seconds: %r" % walls[:3])


def test_tensorboard_needs_dir():
    """Without -o DIR: a usage error."""
    w = fncwrite.Writer()
    w.thread(1, "main")
    open("x.fnc", "wb").write(w.data())
    r = run([fennec_bin(), "export", "x.fnc", "--format", "tensorboard"])
    assert_eq(r.returncode, 2, "usage error")
    assert_true("-o DIR" in r.stderr, "says what to give: %r" % r.stderr)


@collector
def test_tensorboard_processes_in_run_folders():
    """A fork child with system points has a run folder of its own, pid<PID>."""
    skip_under("tsan", TSAN_FORK)
    _, path = record("forker", "fork", opts=["--system-interval", "50"])
    r = run([fennec_bin(), "export", path, "--format", "tensorboard", "-o", "runs"])
    assert_eq(r.returncode, 0, "export\n" + r.describe())
    subs = sorted(d for d in os.listdir("runs") if os.path.isdir(os.path.join("runs", d)))
    assert_eq(len(subs), 1, "one sub-folder for the child: %r" % os.listdir("runs"))
    assert_true(subs[0].startswith("pid"), "named by pid: %r" % subs)
    child = glob.glob(os.path.join("runs", subs[0], "events.out.tfevents.*"))
    assert_eq(len(child), 1, "the child's event file")
    s = series(read_events(child[0]))
    assert_true(s.get("system/cpu_pct"), "the child's CPU series: %r" % sorted(s))
    assert_true(glob.glob("runs/events.out.tfevents.*"), "the first process's file in DIR itself")

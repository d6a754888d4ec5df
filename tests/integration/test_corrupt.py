"""Damaged, foreign and truncated profiles, built here from a real recording: the reader
must reject them with a message naming the file (and, where it applies, the offset and
the problem), or analyse what is valid with a warning; it must never crash."""

import json
import os
import random
import shutil

import fncfile
from helpers import (analyze, analyze_raw, assert_clean_error, assert_eq, assert_true, fennec_bin, run,
                     numbers_in, record, region)


def base_recording():
    """A small real recording (nested.c, 200 ms) as bytes."""
    _, path = record("nested", 200, out="base.fnc")
    with open(path, "rb") as f:
        data = f.read()
    major, minor, chunks = fncfile.parse(data)
    assert_eq((major, minor), (1, 9), "profile version (format 1.9: capped recordings)")
    assert_eq(chunks[0].type, 1, "first chunk type (HEADER)")
    assert_eq(chunks[-1].type, 7, "last chunk type (END)")
    assert_eq(chunks[-1].end, len(data), "chunks end at the end of the file")
    bad = [c for c, ok in fncfile.verify_crcs(data) if not ok]
    assert_eq(bad, [], "chunks with a bad CRC-32C in a fresh recording")
    return data


def write(name, data):
    with open(name, "wb") as f:
        f.write(data)
    return name


def test_valid_recording_parses():
    data = base_recording()
    rep = analyze(write("ok.fnc", data))
    assert_eq(region(rep, "phase_a")["count"], 10, "phase_a count")


def test_flipped_payload_byte():
    data = base_recording()
    bad, chunk = fncfile.flip_payload_byte(data)
    path = write("flipped.fnc", bad)
    r = analyze_raw(path, "--format", "json")
    msg = assert_clean_error(r, path, "checksum")
    nums = numbers_in(msg)
    assert_true(any(chunk.offset <= n < chunk.end for n in nums),
                "error should give the offset of the damaged %s chunk (bytes %d..%d), "
                "numbers in it: %s\n  %s" % (chunk.name, chunk.offset, chunk.end, nums,
                                              r.describe()))


def test_truncated_preamble():
    data = base_recording()
    for n in (1, 8, 10, 15):
        path = write("trunc%d.fnc" % n, data[:n])
        assert_clean_error(analyze_raw(path), path)


def test_truncated_header_chunk():
    data = base_recording()
    _, _, chunks = fncfile.parse(data)
    h = chunks[0]
    for n in (fncfile.PREAMBLE_LEN, fncfile.PREAMBLE_LEN + 5, h.payload_offset + 1,
              h.end - 1):
        path = write("hdr%d.fnc" % n, data[:n])
        assert_clean_error(analyze_raw(path), path)


def test_foreign_files():
    png = write("image.png", fncfile.PNG_BYTES)
    assert_clean_error(analyze_raw(png), png, "not a fennec profile")
    shutil.copy("/bin/true", "true.bin")
    assert_clean_error(analyze_raw("true.bin"), "true.bin", "not a fennec profile")
    txt = write("notes.txt", b"hello, this is not a profile at all\n" * 10)
    assert_clean_error(analyze_raw(txt), txt, "not a fennec profile")


def test_newer_major_version():
    data = base_recording()
    path = write("v2.fnc", fncfile.set_major(data, 2))
    assert_clean_error(analyze_raw(path), path, "version")


def test_newer_minor_version_is_read():
    data = base_recording()
    rep = analyze(write("v1_9.fnc", fncfile.set_minor(data, 9)))
    assert_eq(region(rep, "phase_a")["count"], 10, "phase_a count (minor 9)")


def test_unknown_chunk_type_is_skipped():
    data = base_recording()
    rep = analyze(write("unknown.fnc", fncfile.insert_unknown_chunk(data)))
    assert_eq(region(rep, "phase_a")["count"], 10, "phase_a count")
    assert_eq(region(rep, "phase_b")["count"], 10, "phase_b count")


def test_huge_raw_len():
    data = base_recording()
    bad, c = fncfile.huge_raw_len(data)
    path = write("huge.fnc", bad)
    assert_clean_error(analyze_raw(path), path)


def test_torn_tail():
    data = base_recording()
    torn, cut = fncfile.torn_tail(data)
    path = write("torn.fnc", torn)
    r = analyze_raw(path, "--format", "json")
    assert_eq(r.returncode, 0, "torn tail: fennec analyze exit status (stderr %r)" % r.stderr)
    rep = json.loads(r.stdout)
    assert_eq(rep["summary"]["cut_short"], True, "summary.cut_short")
    assert_true(rep["warnings"], "torn tail: expected a warning, got none")
    assert_true(any("torn.fnc" in w for w in rep["warnings"]),
                "warning should name the file: %s" % rep["warnings"])


def flushed_recording():
    """A real recording of many flushes (nested.c, 400 ms, a flush every 20 ms) as
    (path, bytes, chunks)."""
    _, path = record("nested", 400, out="base.fnc", opts=("--flush-ms=20", "--sample=off"))
    with open(path, "rb") as f:
        data = f.read()
    _, _, chunks = fncfile.parse(data)
    return path, data, chunks


def test_force_ends_the_run_where_the_damage_is():
    """A chunk that is whole (its checksum right) but does not decode stops the reading:
    --force analyses what precedes it, and the wall time ends there too, at most that of
    the file cut off before that chunk, with the same regions. It used to run on to the
    clock points of the intact chunks after the damage (the reader's first pass, which
    takes the clock points, checks only their own chunks), about twice the prefix for
    damage in the middle. The fit of the clock uses every point, the prefix's only its
    own: the two walls may differ by a part in a thousand."""
    path, data, chunks = flushed_recording()
    events = [i for i, c in enumerate(chunks) if c.type == 4]
    mid = events[len(events) // 2]
    later = [c for c in chunks[mid + 1:] if c.type in (5, 7)]
    assert_true(len(later) >= 3, "clock points (STATS, END) after the chunk to damage: %s" % chunks)
    chunk = chunks[mid]
    # In its place a whole EVENTS chunk whose first segment names thread 127, unknown.
    bad = data[:chunk.offset] + fncfile.make_chunk(4, bytes([127, 0])) + data[chunk.end:]
    write("bad.fnc", bad)
    write("prefix.fnc", data[:chunk.offset])
    r = analyze_raw("bad.fnc", "--format", "json")
    assert_clean_error(r, "bad.fnc")
    forced = analyze("bad.fnc", "--force")
    prefix, whole = analyze("prefix.fnc"), analyze(path)
    wall = forced["summary"]["wall_ns"]
    assert_true(wall <= prefix["summary"]["wall_ns"] * 1.001,
                "--force on a file damaged at byte %d: wall %d ns, the file cut off there %d ns (whole file %d ns)"
                % (chunk.offset, wall, prefix["summary"]["wall_ns"], whole["summary"]["wall_ns"]))
    assert_true(wall < whole["summary"]["wall_ns"] * 0.9, "the damage is in the middle of the run: wall %d of %d ns"
                % (wall, whole["summary"]["wall_ns"]))
    assert_eq([(x["name"], x["count"]) for x in forced["regions"]],
              [(x["name"], x["count"]) for x in prefix["regions"]], "regions read before the damage")
    assert_true(forced["summary"]["cut_short"], "the forced analysis says the run was cut short")


def test_force_skips_a_chunk_whose_checksum_fails():
    """A chunk whose checksum fails in the middle of a run: an error naming its offset;
    with --force the reader skips it to the next whole chunk and reads on, to the END: the
    warning says where and how many bytes, the wall is the whole run's, and the regions
    lose at most the events of that one chunk."""
    path, data, chunks = flushed_recording()
    events = [i for i, c in enumerate(chunks) if c.type == 4]
    mid = events[len(events) // 2]
    bad, chunk = fncfile.flip_payload_byte(data, mid)
    write("bad.fnc", bad)
    assert_clean_error(analyze_raw("bad.fnc", "--format", "json"), "bad.fnc", "checksum")
    forced, whole = analyze("bad.fnc", "--force"), analyze(path)
    skipped = chunk.end - chunk.offset
    warn = [w for w in forced["warnings"] if "skipped" in w]
    assert_eq(len(warn), 1, "one warning of skipped bytes: %s" % forced["warnings"])
    for n in (chunk.offset, skipped, chunk.end):  # where, how many bytes, where reading went on
        assert_true(n in numbers_in(warn[0]), "%d in the warning: %s" % (n, warn[0]))
    assert_true(not forced["summary"]["cut_short"], "the END was read: not cut short")
    assert_true(abs(forced["summary"]["wall_ns"] - whole["summary"]["wall_ns"]) <= whole["summary"]["wall_ns"] * 0.001,
                "wall %d ns, the whole file's %d ns" % (forced["summary"]["wall_ns"], whole["summary"]["wall_ns"]))
    lost = 0
    for x in whole["regions"]:
        got = region(forced, x["path"])["count"]
        assert_true(got <= x["count"], "%s: %d of %d calls" % (x["path"], got, x["count"]))
        lost += x["count"] - got
    # A 20 ms flush of nested.c holds about one call of each region (10 of each in 400 ms).
    assert_true(lost <= 3, "calls lost with one EVENTS chunk: %d" % lost)


def test_corrupt_length_is_not_a_torn_tail():
    """The second chunk's stored_len set to 4,000,000 in a file of a few hundred KB: that
    is corruption, not a run cut short. It used to read as a torn tail (exit 0, no events,
    "the run was cut short"). Now it is an error with the chunk's offset and the next
    whole chunk's; --force skips the damaged bytes, says how many and where, and reads
    everything after them."""
    _, path = record("nested", 400, out="base.fnc", opts=("--flush-ms=20",))
    with open(path, "rb") as f:
        data = f.read()
    _, _, chunks = fncfile.parse(data)
    bad, chunk = fncfile.set_stored_len(data, 1, 4000000)
    assert_true(4000000 > len(data) - chunk.payload_offset, "the length claims more than the file holds")
    write("bad.fnc", bad)
    nxt = chunks[2].offset
    r = analyze_raw("bad.fnc", "--format", "json")
    msg = assert_clean_error(r, "bad.fnc", "corrupt")
    nums = numbers_in(msg)
    assert_true(chunk.offset in nums and nxt in nums, "offsets %d and %d in: %s" % (chunk.offset, nxt, msg))
    assert_true("cut short" not in r.stderr, "not called a run cut short: %s" % r.stderr)
    forced, whole = analyze("bad.fnc", "--force"), analyze(path)
    warn = [w for w in forced["warnings"] if "skipped" in w]
    assert_eq(len(warn), 1, "one warning of skipped bytes: %s" % forced["warnings"])
    for n in (chunk.offset, nxt - chunk.offset, nxt):
        assert_true(n in numbers_in(warn[0]), "%d in the warning: %s" % (n, warn[0]))
    assert_true(not forced["summary"]["cut_short"], "the END was read")
    lost = chunks[1].name
    # What the skipped chunk held is lost; every region event after it is read.
    if lost != "EVENTS":
        assert_eq([(x["name"], x["count"]) for x in forced["regions"]],
                  [(x["name"], x["count"]) for x in whole["regions"]], "regions after the skipped %s chunk" % lost)
    assert_true(forced["summary"]["wall_ns"] >= whole["summary"]["wall_ns"] * 0.999, "the whole run's wall")


def test_missing_end_chunk():
    data = base_recording()
    path = write("noend.fnc", fncfile.drop_end(data))
    rep = analyze(path)
    assert_eq(rep["summary"]["cut_short"], True, "summary.cut_short")
    assert_true(rep["warnings"], "no END: expected a warning, got none")


def test_empty_file():
    path = write("empty.fnc", b"")
    assert_clean_error(analyze_raw(path), path)


def test_every_truncation():
    """Cut the file at every chunk boundary and inside every chunk: before the HEADER is
    complete it is an error, after that a cut-short analysis; never a crash."""
    data = base_recording()
    _, _, chunks = fncfile.parse(data)
    cuts = set()
    for c in chunks:
        cuts.update((c.offset, c.offset + 7, c.payload_offset, c.payload_offset +
                     c.stored_len // 2, c.end - 1))
    for n in sorted(x for x in cuts if 0 < x < len(data)):
        path = write("cut.fnc", data[:n])
        r = analyze_raw(path, "--format", "json")
        if n < chunks[0].end:
            assert_clean_error(r, path)
        else:
            assert_eq(r.returncode, 0, "cut at byte %d of %d: exit status (stderr %r)" % (
                n, len(data), r.stderr))
            assert_true('"cut_short": true' in r.stdout.replace("\n", " ") or
                        '"cut_short":true' in r.stdout,
                        "cut at byte %d: summary.cut_short should be true" % n)


def test_random_byte_flips_never_crash():
    data = base_recording()
    rng = random.Random(1234)
    for i in range(40):
        b = bytearray(data)
        for _ in range(rng.choice((1, 1, 2, 8))):
            pos = rng.randrange(len(b))
            b[pos] = rng.randrange(256)
        path = write("mut.fnc", bytes(b))
        r = analyze_raw(path, "--format", "json")
        if r.returncode != 0:
            assert_clean_error(r, path)


def test_empty_folder():
    """A folder with no recording in it: a clean error naming it. It used to qsort a NULL
    array (undefined behaviour that aborts the ASan/UBSan build)."""
    os.mkdir("nothing")
    for cmd in (("analyze",), ("export", "--format", "folded", "-o", "out.folded")):
        r = run([fennec_bin()] + list(cmd[:1]) + ["nothing"] + list(cmd[1:]))
        assert_clean_error(r, "nothing", "no fennec profiles")


def test_fifo_is_refused_not_waited_on():
    """A FIFO named as a recording: analyze, export, view and compare refuse it at once
    ("not a regular file"). They used to block in open() for a writer that never came,
    before the check could run. No writer is ever opened here: a hang is the failure."""
    os.mkfifo("pipe.fnc")
    for cmd in (["analyze", "pipe.fnc"], ["export", "pipe.fnc", "--format", "folded", "-o", "o.folded"],
                ["view", "pipe.fnc", "--port", "0"], ["compare", "pipe.fnc", "pipe.fnc"]):
        r = run([fennec_bin()] + cmd, timeout_s=60)
        assert_clean_error(r, "pipe.fnc", "not a regular file")


def test_pseudo_file_is_read_not_called_empty():
    """/proc/self/maps stats as 0 bytes but is not empty: it is read and refused as not a
    profile, not reported as an "empty file"."""
    r = analyze_raw("/proc/self/maps")
    msg = assert_clean_error(r, "maps", "not a fennec profile")
    assert_true("empty" not in msg, "called empty: %s" % msg)


def test_regression_corpus():
    """tests/corpus/regress/: inputs that once broke fennec, each with its expected exit
    status and message (EXPECTED, written by make_regress.py). Also the fuzzers' seeds."""
    here = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "corpus", "regress")
    cases = []
    with open(os.path.join(here, "EXPECTED")) as f:
        for line in f:
            if line.strip() and not line.startswith("#"):
                cases.append(line.rstrip("\n").split("\t"))
    assert_true(len(cases) >= 5, "cases in EXPECTED: %s" % cases)
    for name, opts, rc, msg in cases:
        path = os.path.join(here, name)
        r = analyze_raw(path, *([] if opts == "-" else opts.split()))
        what = "%s %s" % (name, opts)
        if int(rc):
            assert_clean_error(r, name, *([] if msg == "-" else [msg]))
        else:
            assert_eq(r.returncode, 0, "%s: exit status (stderr %r)" % (what, r.stderr))
            if msg != "-":
                assert_true(msg in r.stderr + r.stdout, "%s: warning %r in %r" % (what, msg, r.stderr + r.stdout[:2000]))

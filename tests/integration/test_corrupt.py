"""Damaged, foreign and truncated profiles, built here from a real recording: the reader
must reject them with a message naming the file (and, where it applies, the offset and
the problem), or analyse what is valid with a warning; it must never crash."""

import json
import random
import shutil

import fncfile
from helpers import (analyze, analyze_raw, assert_clean_error, assert_eq, assert_true,
                     numbers_in, record, region)


def base_recording():
    """A small real recording (nested.c, 200 ms) as bytes."""
    _, path = record("nested", 200, out="base.fnc")
    with open(path, "rb") as f:
        data = f.read()
    major, minor, chunks = fncfile.parse(data)
    assert_eq((major, minor), (1, 7), "profile version (format 1.7: PYCODE chunks)")
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
    rep = analyze(write("v1_7.fnc", fncfile.set_minor(data, 7)))
    assert_eq(region(rep, "phase_a")["count"], 10, "phase_a count (minor 7)")


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


def test_force_ends_the_run_where_the_damage_is():
    """--force analyses what precedes a damaged chunk: the wall time ends there too, at
    most that of the file cut off before the damaged chunk, with the same regions. It used
    to run on to the clock points of the intact chunks after the damage (the reader's first
    pass, which takes the clock points, checks only their own chunks), about twice the
    prefix for damage in the middle. The fit of the clock uses every point, the prefix's
    only its own: the two walls may differ by a part in a thousand."""
    _, path = record("nested", 400, out="base.fnc", opts=("--flush-ms=20", "--sample=off"))
    with open(path, "rb") as f:
        data = f.read()
    _, _, chunks = fncfile.parse(data)
    events = [i for i, c in enumerate(chunks) if c.type == 4]
    mid = events[len(events) // 2]
    later = [c for c in chunks[mid + 1:] if c.type in (5, 7)]
    assert_true(len(later) >= 3, "clock points (STATS, END) after the chunk to damage: %s" % chunks)
    bad, chunk = fncfile.flip_payload_byte(data, mid)
    write("bad.fnc", bad)
    write("prefix.fnc", data[:chunk.offset])
    r = analyze_raw("bad.fnc", "--format", "json")
    assert_clean_error(r, "bad.fnc", "checksum")
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

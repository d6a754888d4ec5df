#!/usr/bin/env python3
"""Regenerates tests/corpus/regress/: inputs that once broke fennec (fuzzing, the issue
reports), each with the outcome expected of `fennec analyze` in EXPECTED, which
tests/integration/test_corrupt.py::test_regression_corpus checks and the fuzzers take as
seeds (make fuzz-run). Derived from ../valid_nested_raw.fnc and ../valid_nested.fnc. Python 3 standard library.

EXPECTED: one line per case, tab-separated: file, options (or -), exit status, and a
substring of the message (stderr for a failure, a warning otherwise; - for none).
A new finding: add its file here (or a rule that makes it), and its line to EXPECTED.

Usage: python3 tests/corpus/regress/make_regress.py
"""

import os
import struct
import sys

sys.dont_write_bytecode = True
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, os.path.join(HERE, "..", "..", "integration"))
import fncfile  # noqa: E402

ZSTD_EMPTY = bytes.fromhex("28b52ffd2000010000")  # a zstd frame of no content


def main():
    with open(os.path.join(HERE, "..", "valid_nested_raw.fnc"), "rb") as f:
        base = f.read()
    _, _, chunks = fncfile.parse(base)
    cases = []

    def put(name, data, opts, rc, msg):
        with open(os.path.join(HERE, name), "wb") as f:
            f.write(data)
        cases.append((name, opts, rc, msg))

    # issue 29 item 3: a length past the end while whole chunks follow read as a torn tail
    # (a zstd chunk: in a raw one stored_len != raw_len is a bad header already)
    with open(os.path.join(HERE, "..", "valid_nested.fnc"), "rb") as f:
        zbase = f.read()
    _, _, zchunks = fncfile.parse(zbase)
    k = [i for i, c in enumerate(zchunks) if i and c.codec == 1][0]
    bad, c = fncfile.set_stored_len(zbase, k, 4000000)
    put("len_past_end.fnc", bad, "-", 1, "its length is corrupt, not a torn tail")
    put("len_past_end.fnc", bad, "--force", 0, "skipped %d bytes" % (zchunks[k + 1].offset - c.offset))
    # a chunk header with a nonzero reserved field, whole chunks after it
    b = bytearray(base)
    struct.pack_into("<H", b, chunks[1].offset + 2, 1)
    put("bad_header.fnc", bytes(b), "-", 1, "bad chunk header")
    put("bad_header.fnc", bytes(b), "--force", 0, "a chunk header with impossible fields")
    # issue 29 item 8: an empty zstd chunk decompressed into a NULL buffer (NULL + 0)
    empty = fncfile.make_chunk(2, ZSTD_EMPTY, codec=1, raw_len=0)
    put("empty_zstd_chunk.fnc", base[:chunks[1].offset] + empty + base[chunks[1].offset:], "-", 0, "-")

    # found by analysis_fuzz once CRCs were fixed up: a 24-byte SITES record with id
    # 8,236,070 made the reader allocate a 512 MB table (3 s under ASan)
    sites = bytes([0xa6, 0xd8, 0xf6, 0x03, 0x00, 0x01, 0x61, 0x00, 0x00])  # id, kind 0, "a", "", line 0
    put("huge_site_id.fnc", base[:chunks[1].offset] + fncfile.make_chunk(2, sites) + base[chunks[1].offset:],
        "-", 1, "bad site record (id 8236070")

    # found by reader_fuzz seeded with the capped recordings: a THREAD record with index
    # 4,673,748 after none made the reader zero a 300 MB thread table (34 s under ASan, a
    # libFuzzer timeout); an index is now below the records before it plus 65536
    thr = fncfile._put_varint(4673748) + fncfile._put_varint(1) + b"\x00" + fncfile._put_varint(0)
    put("huge_thread_index.fnc", base[:chunks[1].offset] + fncfile.make_chunk(3, thr) + base[chunks[1].offset:],
        "-", 1, "bad thread record (index 4673748)")

    # found by analysis_fuzz: the writer names its energy domains again in each segment of
    # a capped recording; the reader freed the first name on the second DOMAIN record while
    # the analysis held it for the report (heap-use-after-free in rep_sys_json). The same
    # definition again is read; a different one for the same id is refused.
    at = chunks[1].offset
    one = fncfile.energy_payload([(1, 1, "package", "package-0")], [(1, 1000, 5000, 1 << 32)])
    again = fncfile.energy_payload([(1, 1, "package", "package-0")], [(1, 2000, 9000, 1 << 32)])
    other = fncfile.energy_payload([(1, 1, "dram", "dram")], [(1, 2000, 9000, 1 << 32)])
    put("energy_domain_again.fnc", base[:at] + fncfile.make_chunk(18, one) + fncfile.make_chunk(18, again) +
        base[at:], "-", 0, "-")
    put("energy_domain_redefined.fnc", base[:at] + fncfile.make_chunk(18, one) + fncfile.make_chunk(18, other) +
        base[at:], "-", 1, "redefines domain 1")

    # found by analysis_fuzz (kept as it minimised, not made here): with --force a sample
    # with no frames reached the stack table before any other, memcpy from a NULL buffer
    # (UBSan in samples.c stack_for)
    cases.append(("zero_frame_sample.fnc", "--force", 0, "SAMPLES: bad region or frame count"))

    seen = set()
    with open(os.path.join(HERE, "EXPECTED"), "w") as f:
        f.write("# file\toptions\texit\tmessage (make_regress.py; checked by test_corrupt.py)\n")
        for name, opts, rc, msg in cases:
            f.write("%s\t%s\t%d\t%s\n" % (name, opts, rc, msg))
            seen.add(name)
    print("wrote %s" % ", ".join(sorted(seen)))


if __name__ == "__main__":
    main()

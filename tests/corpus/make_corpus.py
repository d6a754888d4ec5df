#!/usr/bin/env python3
"""Regenerates the sample profiles in tests/corpus/ from real recordings of the fixtures.

They are small valid and damaged files: the seed corpus of the reader fuzzer
(`make fuzz-run` passes tests/corpus to tests/fuzz/reader_fuzz) and samples for reading
by hand. Needs a build (make all): records its fixtures with `fennec record`.

Usage: python3 tests/corpus/make_corpus.py [--build DIR]   (default: $FENNEC_BUILD or build)

Files written (every one under 64 KiB, the fuzzer's -max_len):
  valid_nested.fnc      nested.c 50 ms, zstd chunks
  valid_nested_raw.fnc  the same with raw chunks (FENNEC_COMPRESSION=0)
  valid_threads_raw.fnc threads.c, 4 threads, raw chunks
  valid_metrics_raw.fnc metrics.c (counters, gauge, values), raw chunks
  valid_steps_raw.fnc   steps.c 20 steps, raw chunks
  valid_empty.fnc       empty.c: a header and an END chunk only
  valid_samples_raw.fnc nested.c 50 ms sampled at 2000 Hz (SAMPLES, MODULES, TASKS), raw
  valid_wall_raw.fnc    threads.c sampled in wall mode, raw
  valid_heap_raw.fnc    mem_leaks.c 200, heap profiled in full mode (HEAP), raw
  torn_tail.fnc         valid_nested_raw.fnc cut inside a chunk (analysed as cut short)
  no_end.fnc            valid_nested_raw.fnc without its END chunk (cut short)
  unknown_chunk.fnc     valid_nested_raw.fnc plus a chunk of unknown type 99 (skipped)
  bad_checksum.fnc      valid_nested_raw.fnc with one payload byte flipped (error)
  trunc_preamble.fnc    the first 10 bytes (error)
  trunc_header.fnc      cut inside the HEADER chunk (error)
  newer_major.fnc       major version 2 (error)
  huge_raw_len.fnc      a chunk claiming raw_len 1 GiB with a valid CRC (error)
  foreign.png           a PNG (not a fennec profile)
  empty.fnc             zero bytes (error)
"""

import argparse
import os
import subprocess
import sys
import tempfile

sys.dont_write_bytecode = True

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(HERE))
sys.path.insert(0, os.path.join(REPO, "tests", "integration"))


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.environ.get("FENNEC_BUILD") or "build")
    args = ap.parse_args()
    os.environ["FENNEC_BUILD"] = args.build
    import fncfile
    import helpers

    tmp = tempfile.mkdtemp(prefix="fennec-corpus-")
    raw_env = helpers.base_env({"FENNEC_COMPRESSION": "0"})

    def rec(name, prog, *pargs, env=None):
        out = os.path.join(tmp, name)
        cmd, e = helpers.record_command(helpers.fixture(prog), pargs, out=out, env=env)
        p = subprocess.run(cmd, env=e, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if p.returncode != 0 or not os.path.exists(out):
            sys.exit("make_corpus: recording %s failed (exit %d): %s" % (
                prog, p.returncode, p.stderr.decode(errors="replace")))
        with open(out, "rb") as f:
            return f.read()

    files = {
        "valid_nested.fnc": rec("a.fnc", "nested", 50),
        "valid_nested_raw.fnc": rec("b.fnc", "nested", 50, env=raw_env),
        "valid_threads_raw.fnc": rec("c.fnc", "threads", 2, env=raw_env),
        "valid_metrics_raw.fnc": rec("d.fnc", "metrics", env=raw_env),
        "valid_steps_raw.fnc": rec("e.fnc", "steps", 20, 1, 4, env=raw_env),
        "valid_empty.fnc": rec("f.fnc", "empty"),
        "valid_samples_raw.fnc": rec("g.fnc", "nested", 50, env=helpers.base_env(
            {"FENNEC_COMPRESSION": "0", "FENNEC_SAMPLE": "cpu", "FENNEC_HZ": "2000"})),
        "valid_wall_raw.fnc": rec("h.fnc", "threads", 2, env=helpers.base_env(
            {"FENNEC_COMPRESSION": "0", "FENNEC_SAMPLE": "wall"})),
        "valid_heap_raw.fnc": rec("i.fnc", "mem_leaks", 200, env=helpers.base_env(
            {"FENNEC_COMPRESSION": "0", "FENNEC_SAMPLE": "off", "FENNEC_MEMORY": "full"})),
    }
    base = files["valid_nested_raw.fnc"]
    _, _, chunks = fncfile.parse(base)
    files["torn_tail.fnc"] = fncfile.torn_tail(base)[0]
    files["no_end.fnc"] = fncfile.drop_end(base)
    files["unknown_chunk.fnc"] = fncfile.insert_unknown_chunk(base)
    files["bad_checksum.fnc"] = fncfile.flip_payload_byte(base)[0]
    files["trunc_preamble.fnc"] = base[:10]
    files["trunc_header.fnc"] = base[:chunks[0].payload_offset + chunks[0].stored_len // 2]
    files["newer_major.fnc"] = fncfile.set_major(base, 2)
    files["huge_raw_len.fnc"] = fncfile.huge_raw_len(base)[0]
    files["foreign.png"] = fncfile.PNG_BYTES
    files["empty.fnc"] = b""

    for name, data in sorted(files.items()):
        if len(data) > 65536:
            sys.exit("make_corpus: %s is %d bytes, over the fuzzer's 64 KiB" % (name, len(data)))
        with open(os.path.join(HERE, name), "wb") as f:
            f.write(data)
        print("%-24s %6d bytes" % (name, len(data)))
    for f in os.listdir(tmp):
        os.unlink(os.path.join(tmp, f))
    os.rmdir(tmp)


if __name__ == "__main__":
    main()

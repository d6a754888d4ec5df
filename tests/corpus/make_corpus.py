#!/usr/bin/env python3
"""Regenerates the sample profiles in tests/corpus/ from real recordings of the fixtures.

They are small valid and damaged files: the seed corpus of the fuzzers (`make fuzz-run`
passes tests/corpus and tests/corpus/regress to tests/fuzz/reader_fuzz and
analysis_fuzz, whose mutator recomputes chunk CRCs; the raw-chunk files let mutations
reach the decoders) and samples for reading by hand. Inputs that once broke fennec live
in tests/corpus/regress/ with their expected messages (make_regress.py). Needs a build (make all): records its fixtures with `fennec record`.

Usage: python3 tests/corpus/make_corpus.py [--build DIR] [NAME...]
  --build: default $FENNEC_BUILD or build; NAMEs: write only these files

Files written (every one under 64 KiB, the fuzzer's -max_len):
  valid_nested.fnc      nested.c 50 ms, zstd chunks
  valid_nested_raw.fnc  the same with raw chunks (FENNEC_COMPRESSION=0)
  valid_threads_raw.fnc threads.c, 4 threads, raw chunks
  valid_metrics_raw.fnc metrics.c (counters, gauge, values), raw chunks
  valid_steps_raw.fnc   steps.c 20 steps, raw chunks
  valid_empty.fnc       empty.c: a header and an END chunk only
  valid_samples_raw.fnc nested.c 50 ms sampled at 2000 Hz (SAMPLES, MODULES, TASKS), signal
                        source (samples carry their regions and step), raw
  valid_ring_raw.fnc    region_funcs.c, 3 steps of 20 ms, sampled by the ring source (samples
                        whose regions and step come from the events by time, format 1.3), raw
  valid_wall_raw.fnc    threads.c sampled in wall mode, raw
  valid_heap_raw.fnc    mem_leaks.c 200, heap profiled in full mode (HEAP2, format 1.3), raw
  valid_reach_raw.fnc   mem_leaks.c 200 reachable, full mode: a REACH chunk (format 1.6), raw
  valid_gpu_raw.fnc     valid_nested_raw.fnc plus a GPU chunk of every record type (encoded by
                        fncfile.gpu_payload: no GPU is needed to make it)
  valid_gpux_raw.fnc    valid_gpu_raw.fnc plus a GPUX chunk (format 1.4) of every record type
                        (NVTX start/end ranges and marks, NVLink counters; fncfile.gpux_payload)
  valid_system_raw.fnc  sys_load.c cpu 200 with the system sampler every 20 ms (SYSTEM chunks),
                        raw, plus an ENERGY chunk (fncfile.energy_payload: a package counter
                        that wraps, a DRAM counter)
  valid_capped_raw.fnc  steps.c 400 x 10 ms recorded with --max-size 64K -F 4999, raw (format
                        1.9): the entry file and its kept segment files joined as the reader
                        joins them (each segment's chunks after its 16-byte preamble), one
                        SEGMENT chunk per segment; the oldest were dropped (first kept K > 0)
  valid_capped_all_raw.fnc  steps.c 20 x 10 ms with --max-size 64K, raw, joined the same way:
                        nothing dropped (segments from K = 0)
  valid_sites_refused_raw.fnc  nested.c 50 ms, raw, with the trailing STATS/END field
                        sites_refused set to 34466 in every STATS and END chunk (a real table
                        overflow needs 65,536 names, far over 64 KiB; the count is what
                        many_sites 100000 gives), the analysis warns with it
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

Not written here, kept as they were made:
  valid_heap_1_2_raw.fnc  mem_leaks.c 200 in full mode as format 1.2 wrote it (HEAP chunks, by
                          address), so that readers keep reading 1.2 files
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


def gpu_example(t0):
    """A GPU payload with one record of every type, starting 1 ms after t0 (CLOCK_MONOTONIC ns)."""
    import fncfile
    t = t0 + 1000000
    dev = {"id": 0, "name": "Corpus GPU", "uuid": bytes(range(16)), "cc_major": 8, "cc_minor": 0,
           "sm_count": 108, "warp_size": 32, "max_threads_per_block": 1024, "max_warps_per_sm": 64,
           "max_blocks_per_sm": 32, "regs_per_sm": 65536, "regs_per_block": 65536,
           "smem_per_sm": 167936, "smem_per_block": 166912, "memory_bytes": 40 << 30,
           "clock_khz": 1410000}
    recs = [
        {"type": "api", "domain": 0, "tid": 1, "start_ns": t, "end_ns": t + 5000, "name": 2,
         "cbid": 211, "correlation": 1},
        {"type": "kernel", "device": 0, "context": 1, "stream": 7, "start_ns": t + 8000,
         "end_ns": t + 20000, "name": 1, "grid_x": 108, "grid_y": 1, "grid_z": 1, "block_x": 256,
         "block_y": 1, "block_z": 1, "registers": 32, "static_smem": 0, "dynamic_smem": 4096,
         "correlation": 1},
        {"type": "memcpy", "device": 0, "context": 1, "stream": 7, "start_ns": t + 21000,
         "end_ns": t + 30000, "copy_kind": 2, "src_kind": 3, "dst_kind": 1, "bytes": 1 << 20,
         "correlation": 3},
        {"type": "memset", "device": 0, "context": 1, "stream": 7, "start_ns": t + 31000,
         "end_ns": t + 32000, "memory_kind": 3, "bytes": 4096, "correlation": 4},
        {"type": "sync", "sync_type": 3, "context": 1, "stream": 7, "start_ns": t + 6000,
         "end_ns": t + 30500, "correlation": 5},
        {"type": "memory", "operation": 1, "memory_kind": 3, "device": 0, "context": 1,
         "start_ns": t - 1000, "address": 0x7f0000000000, "bytes": 1 << 26, "correlation": 6},
        {"type": "overhead", "overhead_kind": 8, "object_kind": 2, "object_id": 1,
         "start_ns": t + 100, "end_ns": t + 900},
        {"type": "nvml", "device": 0, "start_ns": t + 40000, "sm_pct": 55, "mem_pct": 20,
         "mem_used_bytes": 1 << 30, "mem_total_bytes": 40 << 30, "power_mw": 150000},
        {"type": "timer", "name": 3, "tid": 1, "start_ns": t, "stream": 0, "elapsed_ns": 25000,
         "step": 0},
    ]
    return fncfile.gpu_payload({"cupti_version": 130001, "records": len(recs)}, [dev],
                               [(1, "void corpus_kernel<float>(float*, int)"), (2, "cudaLaunchKernel"),
                                (3, "forward")], recs)


def gpux_example(t0):
    """A GPUX payload with one record of every type, starting 2 ms after t0: a range "load"
    of 3 ms started and ended on two threads, a mark, two NVLink points 1 ms apart."""
    import fncfile
    t = t0 + 2000000
    recs = [
        {"type": "range_start", "range_id": 1, "tid": 100, "start_ns": t, "text": "load"},
        {"type": "mark", "tid": 100, "start_ns": t + 500000, "text": "epoch \u2713"},
        {"type": "nvlink", "device": 0, "start_ns": t + 1000000, "tx_bytes": 1 << 30, "rx_bytes": 1 << 29},
        {"type": "nvlink", "device": 0, "start_ns": t + 2000000, "tx_bytes": (1 << 30) + 50000000,
         "rx_bytes": (1 << 29) + 25000000},
        {"type": "range_end", "range_id": 1, "tid": 101, "start_ns": t + 3000000},
    ]
    return fncfile.gpux_payload(0, recs)


def main():
    ap = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    ap.add_argument("--build", default=os.environ.get("FENNEC_BUILD") or "build")
    ap.add_argument("names", nargs="*", help="write only these files")
    args = ap.parse_args()
    os.environ["FENNEC_BUILD"] = args.build
    import fncfile
    import helpers

    tmp = tempfile.mkdtemp(prefix="fennec-corpus-")
    raw_env = helpers.base_env({"FENNEC_COMPRESSION": "0"})

    def rec(name, prog, *pargs, env=None, opts=()):
        out = os.path.join(tmp, name)
        cmd, e = helpers.record_command(helpers.fixture(prog), pargs, out=out, opts=opts, env=env)
        p = subprocess.run(cmd, env=e, cwd=tmp, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
        if p.returncode != 0 or not os.path.exists(out):
            sys.exit("make_corpus: recording %s failed (exit %d): %s" % (
                prog, p.returncode, p.stderr.decode(errors="replace")))
        with open(out, "rb") as f:
            return f.read()

    def rec_capped(name, prog, *pargs, env=None, opts=()):
        """A capped recording as one buffer: the entry file, then each kept segment file
        (OUT.seg.K in K order) after its preamble, as the reader joins them (seg_gather in
        src/format/reader.c). The fuzzers take one input, and this is the form the
        decoders see; an analysis of it finds no segment files beside it."""
        entry = rec(name, prog, *pargs, env=env, opts=opts)
        base = name + ".seg."
        ks = sorted(int(f[len(base):]) for f in os.listdir(tmp) if f.startswith(base))
        if not ks:
            sys.exit("make_corpus: %s: the capped recording has no segment files" % name)
        data = entry
        for k in ks:
            with open(os.path.join(tmp, base + str(k)), "rb") as f:
                seg = f.read()
            if seg[:8] != entry[:8]:
                sys.exit("make_corpus: %s%d is no fennec segment" % (base, k))
            data += seg[16:]
        return data

    def set_sites_refused(data, n):
        """Every STATS (5) and END (7) chunk with its last field, sites_refused, set to n
        (the collector writes 0 as one byte; raw chunks only)."""
        _, _, chunks = fncfile.parse(data)
        out = data[:chunks[0].offset]
        done = 0
        for c in chunks:
            whole = data[c.offset:c.end]
            if c.type in (5, 7):
                p = data[c.payload_offset:c.end]
                if c.codec != 0 or not p or p[-1] != 0:
                    sys.exit("make_corpus: chunk %r does not end in sites_refused 0" % c)
                whole = fncfile.make_chunk(c.type, p[:-1] + fncfile._put_varint(n))
                done += 1
            out += whole
        if not done:
            sys.exit("make_corpus: no STATS or END chunk")
        return out + data[chunks[-1].end:]

    files = {
        "valid_nested.fnc": rec("a.fnc", "nested", 50),
        "valid_nested_raw.fnc": rec("b.fnc", "nested", 50, env=raw_env),
        "valid_threads_raw.fnc": rec("c.fnc", "threads", 2, env=raw_env),
        "valid_metrics_raw.fnc": rec("d.fnc", "metrics", env=raw_env),
        "valid_steps_raw.fnc": rec("e.fnc", "steps", 20, 1, 4, env=raw_env),
        "valid_empty.fnc": rec("f.fnc", "empty"),
        "valid_samples_raw.fnc": rec("g.fnc", "nested", 50, env=helpers.base_env(
            {"FENNEC_COMPRESSION": "0", "FENNEC_SAMPLE": "cpu", "FENNEC_HZ": "2000",
             "FENNEC_SAMPLE_SOURCE": "signal"})),
        "valid_ring_raw.fnc": rec("j.fnc", "region_funcs", 3, 20, env=helpers.base_env(
            {"FENNEC_COMPRESSION": "0", "FENNEC_SAMPLE": "cpu", "FENNEC_SAMPLE_SOURCE": "ring",
             "FENNEC_MEMORY": "off"})),
        "valid_wall_raw.fnc": rec("h.fnc", "threads", 2, env=helpers.base_env(
            {"FENNEC_COMPRESSION": "0", "FENNEC_SAMPLE": "wall"})),
        "valid_heap_raw.fnc": rec("i.fnc", "mem_leaks", 200, env=helpers.base_env(
            {"FENNEC_COMPRESSION": "0", "FENNEC_SAMPLE": "off", "FENNEC_MEMORY": "full"})),
        "valid_reach_raw.fnc": rec("k.fnc", "mem_leaks", 200, "reachable", env=helpers.base_env(
            {"FENNEC_COMPRESSION": "0", "FENNEC_SAMPLE": "off", "FENNEC_MEMORY": "full"})),
        "valid_system_raw.fnc": rec("s.fnc", "sys_load", "cpu", 200, env=helpers.base_env(
            {"FENNEC_COMPRESSION": "0", "FENNEC_SAMPLE": "off", "FENNEC_MEMORY": "off",
             "FENNEC_SYSTEM_MS": "20", "FENNEC_WRITER": "thread"})),
        "valid_capped_raw.fnc": rec_capped("l.fnc", "steps", 400, 10, env=raw_env,
                                           opts=("--max-size", "64K", "-F", "4999")),
        "valid_capped_all_raw.fnc": rec_capped("m.fnc", "steps", 20, 10, env=raw_env,
                                               opts=("--max-size", "64K")),
        "valid_sites_refused_raw.fnc": set_sites_refused(rec("n.fnc", "nested", 50, env=raw_env), 34466),
    }
    sysf = files["valid_system_raw.fnc"]
    st = fncfile.decode(sysf)["header"][9]
    files["valid_system_raw.fnc"] = fncfile.insert_before_end(sysf, fncfile.make_chunk(18, fncfile.energy_payload(
        [(1, 1, "package", "package-0"), (2, 1, "dram", "dram")],
        [(d, st + k * 20_000_000, (k * 900_000 + 500_000 * d) % (3_000_000 if d == 1 else 1 << 40),
          3_000_000 if d == 1 else 0) for k in range(10) for d in (1, 2)])))
    base = files["valid_nested_raw.fnc"]
    _, _, chunks = fncfile.parse(base)
    files["valid_gpu_raw.fnc"] = fncfile.insert_before_end(base, fncfile.make_chunk(
        12, gpu_example(fncfile.decode(base)["header"][9])))
    t0 = fncfile.decode(base)["header"][9]
    files["valid_gpux_raw.fnc"] = fncfile.insert_before_end(files["valid_gpu_raw.fnc"], fncfile.make_chunk(
        14, gpux_example(t0)))
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

    unknown = set(args.names) - set(files)
    if unknown:
        sys.exit("make_corpus: no such file: %s" % ", ".join(sorted(unknown)))
    for name, data in sorted(files.items()):
        if args.names and name not in args.names:
            continue
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

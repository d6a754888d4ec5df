"""GPU profiling (docs/gpu.md) without a GPU: the GPU chunk through the reference decoder
and the reader, the reader's errors on damaged GPU records, `fennec record --gpu` on a
machine without a driver or without CUPTI, and the analysis of GPU records built from
synthetic CUPTI activity records (tests/gpu/) or encoded here with known answers."""

import os

import fncfile
from helpers import (BUILD, REPO, Skip, analyze, analyze_raw, assert_clean_error, assert_eq,
                     assert_true, base_env, collector, libfennec, maybe_region, record, region, run,
                     skip_under)

CORPUS_GPU = os.path.join(REPO, "tests", "corpus", "valid_gpu_raw.fnc")


def base_file():
    with open(os.path.join(REPO, "tests", "corpus", "valid_nested_raw.fnc"), "rb") as f:
        return f.read()


def with_gpu(payload, name="gpu.fnc"):
    """valid_nested_raw.fnc with one GPU chunk of `payload` before its END, written to name."""
    data = fncfile.insert_before_end(base_file(), fncfile.make_chunk(12, payload))
    with open(name, "wb") as f:
        f.write(data)
    return os.path.abspath(name)


def t0():
    return fncfile.decode(base_file())["header"][9]


def test_gpu_corpus_decodes():
    with open(CORPUS_GPU, "rb") as f:
        dec = fncfile.decode(f.read())
    g = dec["gpu"]
    assert_true(g is not None, "the corpus GPU file has a GPU chunk")
    assert_eq(sorted({r["type"] for r in g["records"]}),
              ["api", "kernel", "memcpy", "memory", "memset", "nvml", "overhead", "sync", "timer"],
              "record types")
    assert_eq(g["devices"][0]["sm_count"], 108, "device SM count")
    k = [r for r in g["records"] if r["type"] == "kernel"][0]
    assert_eq(k["name_str"], "void corpus_kernel<float>(float*, int)", "kernel name")
    assert_eq(k["end_ns"] - k["start_ns"], 12000, "kernel duration")
    r = analyze_raw(CORPUS_GPU)
    assert_eq(r.returncode, 0, "fennec analyze of a file with a GPU chunk: exit status")


def test_gpux_corpus_decodes():
    """A 1.4 file with a GPUX chunk: the reference decoder and the analysis agree on its NVTX
    range (3 ms, started and ended on two threads), its mark and its NVLink traffic."""
    path = os.path.join(REPO, "tests", "corpus", "valid_gpux_raw.fnc")
    with open(path, "rb") as f:
        dec = fncfile.decode(f.read())
    recs = dec["gpu"]["records"]
    assert_eq(sorted({r["type"] for r in recs if r["type"] in ("range_start", "range_end", "mark", "nvlink")}),
              ["mark", "nvlink", "range_end", "range_start"], "GPUX record types")
    g = analyze(path)["gpu"]
    r = g["nvtx"]["ranges"][0]
    assert_eq((r["name"], r["count"], r["total_ns"], r["threads"], r["cross_thread"]), ("load", 1, 3 * MS, 2, 1),
              "the range")
    assert_eq(g["nvtx"]["marks"], [{"name": "epoch \u2713", "count": 1, "threads": 1}], "the mark")
    link = g["devices"][0]["nvlink"]
    assert_eq((link["tx_bytes"], link["rx_bytes"]), (50000000, 25000000), "NVLink bytes between the two points")
    assert_near(link["tx_bytes_per_s"], 5e10, "NVLink sent per second (50 MB in 1 ms)")


def with_gpux(payload, name="gpux.fnc"):
    data = fncfile.insert_before_end(base_file(), fncfile.make_chunk(14, payload))
    with open(name, "wb") as f:
        f.write(data)
    return os.path.abspath(name)


def test_gpux_chunk_errors():
    t = t0() + MS
    path = with_gpux(fncfile.gpux_payload(0, [{"type": "mark", "tid": 1, "start_ns": t, "text": "m"}])[:-1])
    assert_clean_error(analyze_raw(path), path, "byte", "GPUX", "type 3")
    path = with_gpux(fncfile.gpux_payload(0, [{"type": "range_end", "range_id": 0, "tid": 1, "start_ns": t}]), "g2.fnc")
    assert_clean_error(analyze_raw(path), path, "byte", "GPUX", "type 2")
    path = with_gpux(fncfile.gpux_payload(0) + bytes([9]), "g3.fnc")
    assert_clean_error(analyze_raw(path), path, "byte", "GPUX", "unknown record type 9")
    # an end without its start, a start never ended: counted, not an error
    recs = [{"type": "range_end", "range_id": 5, "tid": 1, "start_ns": t},
            {"type": "range_start", "range_id": 6, "tid": 1, "start_ns": t, "text": "x"}]
    nv = analyze(with_gpux(fncfile.gpux_payload(3, recs), "g4.fnc"))["gpu"]["nvtx"]
    assert_eq((nv["unmatched"], nv["open"], nv["dropped"], nv["ranges"]), (1, 1, 3, []),
              "unmatched end, open start, dropped count")


def test_gpu_chunk_undefined_string():
    rec = {"type": "kernel", "start_ns": t0() + 1000, "end_ns": t0() + 2000, "name": 9}
    path = with_gpu(fncfile.gpu_payload({}, records=[rec]))
    r = analyze_raw(path)
    assert_clean_error(r, path, "byte", "GPU", "undefined string 9")


def test_gpu_chunk_truncated_record():
    rec = {"type": "memcpy", "start_ns": t0() + 1000, "end_ns": t0() + 2000, "bytes": 1 << 40}
    payload = fncfile.gpu_payload({}, records=[rec])
    path = with_gpu(payload[:-3])
    r = analyze_raw(path)
    assert_clean_error(r, path, "byte", "GPU", "payload byte")


def test_gpu_chunk_bad_kind():
    rec = {"type": "sync", "sync_type": 9, "start_ns": t0() + 1000, "end_ns": t0() + 2000}
    path = with_gpu(fncfile.gpu_payload({}, records=[rec]))
    r = analyze_raw(path)
    assert_clean_error(r, path, "byte", "GPU", "type 6")


# --- fennec record --gpu without a GPU ---------------------------------------------------

def fake_driver():
    return os.path.join(BUILD, "fixtures", "libfakecuda.so")


def cupti_built():
    """Whether this build's collector has CUPTI support (the Makefile found CUPTI's headers):
    then libfennec exports InitializeInjection, the entry point of CUDA_INJECTION64_PATH."""
    with open(libfennec(), "rb") as f:
        return b"InitializeInjection\0" in f.read()  # not InitializeInjectionNvtx2


def gpu_lines(stderr):
    return [l for l in stderr.splitlines() if "--gpu" in l]


def test_gpu_record_without_driver():
    env = base_env({"FENNEC_LIBCUDA": "/nonexistent/libcuda.so.1"})
    r, path = record("exitcode", 3, opts=["--gpu"], env=env, expect_rc=3)
    lines = gpu_lines(r.stderr)
    assert_eq(len(lines), 1, "lines about --gpu on standard error (%r)" % r.stderr)
    assert_true("no NVIDIA driver" in lines[0] and "recording without GPU activity" in lines[0],
                "the line says the driver is missing: %r" % lines[0])
    rep = analyze(path)
    assert_eq(region(rep, "before_exit")["count"], 1, "the program's region was recorded")


def test_gpu_record_without_cupti():
    env = base_env({"FENNEC_LIBCUDA": fake_driver(), "FENNEC_CUPTI": "/nonexistent/libcupti.so",
                    "FENNEC_NVML": "/nonexistent/libnvidia-ml.so.1"})
    r, path = record("gpu_fake", fake_driver(), opts=["--gpu"], env=env, expect_rc=3)
    lines = gpu_lines(r.stderr)
    assert_eq(len(lines), 1, "lines about --gpu on standard error (%r)" % r.stderr)
    want = "libcupti not found" if cupti_built() else "without CUPTI's headers"
    assert_true(want in lines[0] and "NVML not found" in lines[0] and "recording the rest" in lines[0],
                "the line says what is missing: %r" % lines[0])
    assert_true("injection \n" in r.stdout + "\n" and "cuInit 100" in r.stdout,
                "no injection without CUPTI: %r" % r.stdout)
    assert_eq(region(analyze(path), "work")["count"], 1, "the program's region was recorded")


@collector
def test_gpu_record_injection():
    """With a driver (a stand-in that calls InitializeInjection as the real one does) and
    CUPTI, the program loads CUPTI through libfennec and runs on; the file says so."""
    if not cupti_built():
        raise Skip("built without CUPTI's headers")
    # make test-tsan builds no CLI: the plain one records, and its driver check cannot
    # dlopen the TSan-built stand-in driver ("cannot allocate memory in static TLS block").
    skip_under("tsan", "the plain CLI cannot load the TSan-built stand-in driver")
    env = base_env({"FENNEC_LIBCUDA": fake_driver(), "FENNEC_COMPRESSION": "0",
                    "FENNEC_NVML": "/nonexistent/libnvidia-ml.so.1"})
    r, path = record("gpu_fake", fake_driver(), opts=["--gpu", "--sample", "off"], env=env,
                     expect_rc=3)
    if "libcupti not found" in r.stderr:
        raise Skip("no libcupti on this machine")
    assert_true("injection " + os.path.realpath(libfennec()) in r.stdout,
                "CUDA_INJECTION64_PATH names libfennec: %r" % r.stdout)
    assert_eq(len(gpu_lines(r.stderr)), 1, "one line: NVML is missing (%r)" % r.stderr)
    with open(path, "rb") as f:
        dec = fncfile.decode(f.read())
    g = dec["gpu"]
    assert_true(g is not None, "a GPU chunk says that CUPTI was loaded")
    assert_true(g["prefix"]["cupti_version"] > 0, "CUPTI version recorded: %r" % g["prefix"])
    assert_true(g["prefix"]["clock"] in (0, 1), "CUPTI's clock mapped: %r" % g["prefix"])
    assert_eq(g["prefix"]["flags"], 0, "flags (all activity)")
    assert_eq(region(analyze(path), "work")["count"], 1, "the program's region was recorded")
    # Inside a step schedule's wait the writer switches CUPTI's kinds off (and would switch
    # them on for recorded steps): the program runs on as before.
    r, path = record("gpu_fake", fake_driver(), out="sched.fnc", env=env, expect_rc=3,
                     opts=["--gpu", "--sample", "off", "--step-schedule", "1,0,1,1"])
    assert_true(maybe_region(analyze(path), "work") is None, "no region recorded in the wait step")


def test_gpu_record_kernels_only():
    if not cupti_built():
        raise Skip("built without CUPTI's headers")
    env = base_env({"FENNEC_LIBCUDA": fake_driver(), "FENNEC_COMPRESSION": "0",
                    "FENNEC_NVML": "/nonexistent/libnvidia-ml.so.1"})
    r, path = record("gpu_fake", fake_driver(), opts=["--gpu-kernels-only", "--sample", "off"],
                     env=env, expect_rc=3)
    if "libcupti not found" in r.stderr:
        raise Skip("no libcupti on this machine")
    with open(path, "rb") as f:
        g = fncfile.decode(f.read())["gpu"]
    assert_eq(g["prefix"]["flags"], 1, "flags (kernels only)")


def cupti_test_file():
    """Run tests/gpu/cupti_test.c: synthetic CUPTI records -> translation -> writer."""
    exe = os.path.join(BUILD, "tests", "cupti_test")
    if not os.path.exists(exe):
        raise Skip("built without CUPTI's headers (tests/gpu/cupti_test.c needs them)")
    r = run([exe, "cupti.fnc"], env=base_env({"FENNEC_COMPRESSION": "0"}))
    if "skip:" in r.stdout:
        raise Skip(r.stdout.strip())
    assert_eq(r.returncode, 0, "cupti_test exit status\n  " + r.describe())
    for name in ("translate_kernel", "translate_memcpy", "translate_others", "calibrate",
                 "buffer_to_file"):
        assert_true("ok " + name in r.stdout, "cupti_test: ok %s\n  %s" % (name, r.describe()))
    return os.path.abspath("cupti.fnc")


def test_cupti_translation_to_file():
    path = cupti_test_file()
    with open(path, "rb") as f:
        g = fncfile.decode(f.read())["gpu"]
    kinds = {}
    for rec in g["records"]:
        kinds[rec["type"]] = kinds.get(rec["type"], 0) + 1
    assert_eq(kinds, {"kernel": 6, "memcpy": 2, "memset": 1, "sync": 1, "api": 8, "memory": 3,
                      "overhead": 1}, "records by type")
    assert_eq(g["prefix"]["dropped"], 1, "the incomplete kernel is counted as dropped")
    assert_eq(g["prefix"]["unknown"], 1, "the NAME record is counted as unknown")
    assert_eq(g["devices"][0]["name"], "Fake A100", "device name")
    names = sorted(set(g["strings"].values()))
    assert_true("_Z4gemmPfS_S_i" in names and "cudaLaunchKernel_v7000" in names,
                "kernel and API names interned: %r" % names)


# --- analysis: known answers -------------------------------------------------------------

MS = 1000000


def assert_near(got, want, what, tol=1e-6):
    assert_true(got is not None and abs(got - want) <= tol * max(1.0, abs(want)),
                "%s: got %r, expected %r" % (what, got, want))


def test_gpu_analysis_cupti_scenario():
    """tests/gpu/cupti_test.c's scenario (see its header), analysed: every number is known."""
    rep = analyze(cupti_test_file())
    g = rep["gpu"]
    assert_eq(g["busy_ns"], 6650000, "busy: the union of kernels, copies and memsets")
    assert_eq(g["kernel_ns"], 6 * MS, "kernel time")
    assert_eq(g["sync_ns"], 6300000, "host time in cudaStreamSynchronize")
    assert_eq(g["launch_calls"], 4, "cudaLaunchKernel calls")
    assert_eq(g["peak_allocated_bytes"], 96 << 20, "peak allocated")
    assert_eq(g["peak_allocated_region"], "setup", "region of the call that reached the peak")
    assert_eq(g["sync_regions"][0]["region"], "work", "region of the synchronising call")
    d = g["devices"][0]
    assert_eq(d["name"], "Fake A100", "device name")
    assert_eq(d["overlap_ns"], 500000, "time with both streams busy")
    assert_near(d["window_busy_pct"], 66.5, "busy share of the 10 ms activity window")
    assert_eq(d["allocated_end_bytes"], 32 << 20, "still allocated at the end")
    k = {x["name"]: x for x in g["kernels"]}
    gemm = k["gemm(float*, float*, float*, int)"]
    assert_eq((gemm["count"], gemm["total_ns"]), (4, 4 * MS), "gemm count and time (demangled name)")
    assert_near(gemm["occupancy_pct"], 100, "gemm occupancy (256 threads, 32 registers)")
    assert_near(k["relu_kernel"]["occupancy_pct"], 50, "relu occupancy (128 threads, 64 registers)")
    assert_eq(k["relu_kernel"]["occupancy_limiter"], "registers", "relu's limiter")
    assert_near(gemm["gpu_time_pct"], 200 / 3, "gemm's share of kernel time")
    s = {x["stream"]: x for x in g["streams"]}
    assert_eq((s[7]["busy_ns"], s[8]["busy_ns"]), (5150000, 2 * MS), "busy time per stream")
    c = {x["kind"]: x for x in g["memcpy"]}
    assert_near(c["HtoD"]["bandwidth_bytes_per_s"], (8 << 20) / 0.8e-3, "HtoD bandwidth")
    assert_eq((c["HtoD"]["pageable_pct"], c["DtoH"]["pageable_pct"]), (100, 0), "pageable shares")


def synthetic_gpu(name="synthetic.fnc"):
    """A V100-like device, three streams, NVML, memory, SYNC records without API records and
    a timer, encoded here; the answers are in test_gpu_analysis_synthetic."""
    t = t0() + MS
    dev = {"id": 0, "name": "Synthetic V100", "cc_major": 7, "sm_count": 80, "warp_size": 32,
           "max_threads_per_block": 1024, "max_warps_per_sm": 64, "max_blocks_per_sm": 32,
           "regs_per_sm": 65536, "regs_per_block": 65536, "smem_per_sm": 98304,
           "smem_per_block": 98304, "memory_bytes": 32 << 30}
    K = {"type": "kernel", "device": 0, "context": 1, "name": 1, "grid_x": 160, "grid_y": 1,
         "grid_z": 1, "block_x": 512, "block_y": 1, "block_z": 1, "registers": 40,
         "static_smem": 16384}
    recs = [
        dict(K, stream=1, start_ns=t, end_ns=t + 4 * MS),
        dict(K, stream=2, start_ns=t + 2 * MS, end_ns=t + 6 * MS),
        {"type": "memcpy", "device": 0, "context": 1, "stream": 3, "start_ns": t + 5 * MS,
         "end_ns": t + 15 * MS, "copy_kind": 1, "src_kind": 1, "dst_kind": 3, "bytes": 100000000},
        {"type": "sync", "sync_type": 3, "context": 1, "stream": 1, "start_ns": t + 6 * MS,
         "end_ns": t + 8 * MS},
        {"type": "sync", "sync_type": 4, "context": 1, "stream": 0, "start_ns": t + 7 * MS,
         "end_ns": t + 9 * MS},
        {"type": "memory", "operation": 1, "memory_kind": 3, "device": 0, "start_ns": t + 1 * MS,
         "address": 0x1000, "bytes": 1 << 30},
        {"type": "memory", "operation": 1, "memory_kind": 3, "device": 0, "start_ns": t + 2 * MS,
         "address": 0x2000, "bytes": 512 << 20},
        {"type": "memory", "operation": 2, "memory_kind": 3, "device": 0, "start_ns": t + 3 * MS,
         "address": 0x1000, "bytes": 1 << 30},
        {"type": "memory", "operation": 1, "memory_kind": 3, "device": 0, "start_ns": t + 4 * MS,
         "address": 0x3000, "bytes": 2 << 30},
        {"type": "timer", "name": 2, "tid": 1, "start_ns": t, "elapsed_ns": 5 * MS},
        {"type": "timer", "name": 2, "tid": 1, "start_ns": t + MS, "elapsed_ns": 5 * MS},
        {"type": "timer", "name": 2, "tid": 1, "start_ns": t + 2 * MS, "elapsed_ns": 7 * MS},
    ]
    for i, (sm, used) in enumerate(((20, 1), (40, 3), (60, 2))):
        recs.append({"type": "nvml", "device": 0, "start_ns": t + i * 5 * MS, "sm_pct": sm,
                     "mem_used_bytes": used << 30, "mem_total_bytes": 32 << 30})
    payload = fncfile.gpu_payload({"cupti_version": 130001, "records": len(recs)}, [dev],
                                  [(1, "_Z7stencilPKfPfi"), (2, "forward")], recs)
    return with_gpu(payload, name)


def test_gpu_analysis_synthetic():
    g = analyze(synthetic_gpu())["gpu"]
    d = g["devices"][0]
    assert_eq(d["busy_ns"], 15 * MS, "busy: [0, 6] and [5, 15] ms")
    assert_eq(d["overlap_ns"], 3 * MS, "overlap: [2, 4] (streams 1, 2) and [5, 6] (streams 2, 3)")
    assert_eq(d["stream_busy_ns"], 18 * MS, "sum of the streams' busy times")
    assert_near(d["window_busy_pct"], 100, "busy over the activity window")
    assert_true(0 < d["busy_pct"] < 100, "busy share of the process's wall time: %r" % d["busy_pct"])
    k = g["kernels"][0]
    assert_eq(k["name"], "stencil(float const*, float*, int)", "demangled kernel name")
    assert_near(k["occupancy_pct"], 75, "occupancy: 512 threads, 40 registers, 16 KiB on a V100")
    assert_eq(k["occupancy_limiter"], "registers", "limiter")
    c = g["memcpy"][0]
    assert_eq((c["kind"], c["bytes"]), ("HtoD", 100000000), "copy kind and bytes")
    assert_near(c["bandwidth_bytes_per_s"], 1e10, "bandwidth: 100 MB in 10 ms")
    assert_near(c["pageable_pct"], 100, "pageable share")
    assert_eq(g["sync_ns"], 3 * MS, "SYNC records without API records: their union")
    assert_eq(g["peak_allocated_bytes"], (2 << 30) + (512 << 20), "peak allocated")
    assert_eq(d["allocated_end_bytes"], (2 << 30) + (512 << 20), "allocated at the end")
    assert_eq(g["peak_reserved_bytes"], 3 << 30, "peak device memory used (NVML)")
    assert_near(d["nvml"]["sm_pct_mean"], 40, "mean SM utilisation")
    assert_eq(len(d["utilisation"]), 3, "utilisation timeline points")
    tm = g["timers"][0]
    assert_eq((tm["name"], tm["count"], tm["min_ns"], tm["max_ns"]), ("forward", 3, 5 * MS, 7 * MS),
              "GPU timer")
    r = analyze_raw(synthetic_gpu("again.fnc"))
    assert_true("\nGPU\n" in r.stdout and "stencil" in r.stdout and "HtoD" in r.stdout,
                "the text report has a GPU section\n" + r.stdout[-3000:])


def test_gpu_absent_without_gpu_data():
    rep = analyze(os.path.join(REPO, "tests", "corpus", "valid_nested_raw.fnc"))
    assert_true("gpu" not in rep, "no gpu section in the JSON of a recording without GPU chunks")


# --- findings (docs/bottlenecks.md), each on a profile made to show it --------------------

A100 = {"id": 0, "name": "Rule GPU", "cc_major": 8, "sm_count": 108, "warp_size": 32,
        "max_threads_per_block": 1024, "max_warps_per_sm": 64, "max_blocks_per_sm": 32,
        "regs_per_sm": 65536, "regs_per_block": 65536, "smem_per_sm": 167936,
        "smem_per_block": 166912, "memory_bytes": 40 << 30}


def kernel(stream, start, end, name=1):
    return {"type": "kernel", "device": 0, "context": 1, "stream": stream, "start_ns": start,
            "end_ns": end, "name": name, "grid_x": 1, "grid_y": 1, "grid_z": 1, "block_x": 256,
            "block_y": 1, "block_z": 1, "registers": 32}


def findings_of(recs, name="rules.fnc", strings=((1, "k"), (2, "cudaLaunchKernel_v7000")), opts=(),
                base=None):
    payload = fncfile.gpu_payload({"cupti_version": 130001, "records": len(recs)}, [A100],
                                  list(strings), recs)
    if base is None:
        path = with_gpu(payload, name)
    else:
        with open(base, "rb") as f:
            data = fncfile.insert_before_end(f.read(), fncfile.make_chunk(12, payload))
        with open(name, "wb") as f:
            f.write(data)
        path = os.path.abspath(name)
    rep = analyze(path, *opts)
    return rep, {f["type"]: f for f in rep["findings"]}


def test_rule_cpu_gpu_sync():
    t = t0() + MS
    recs = [kernel(7, t, t + 6 * MS),
            {"type": "sync", "sync_type": 4, "context": 1, "start_ns": t + MS, "end_ns": t + 6 * MS}]
    rep, f = findings_of(recs)
    x = f.get("cpu_gpu_sync")
    assert_true(x is not None, "cpu_gpu_sync fires: %r" % list(f))
    assert_eq(x["severity"], "HIGH", "severity: 83% of the GPU's busy time")
    assert_near(x["evidence"]["share_of_gpu_busy_pct"], 500 / 6, "share of GPU busy time")
    assert_eq(x["evidence"]["sync_ns"], 5 * MS, "sync time")
    _, f = findings_of(recs, name="rules2.fnc", opts=("--gpu-sync-threshold", "90"))
    assert_true("cpu_gpu_sync" not in f, "not above a threshold of 90%")


@collector
def test_rule_cpu_gpu_sync_host_stacks():
    """A program blocked 30 ms in the stand-in driver's cuCtxSynchronize, called from its
    sync_step(), sampled on CPU; the GPU records CUPTI would have made of it (the API call at
    the times the program printed, a kernel over it) are added to the file. The finding and
    gpu.sync_stacks name the function that waits and its caller."""
    env = base_env({"FENNEC_LIBCUDA": fake_driver()})
    r, path = record("gpu_fake", fake_driver(), "sync", opts=["--sample", "cpu"], env=env, expect_rc=3)
    line = [l.split() for l in r.stdout.splitlines() if l.startswith("sync ")]
    assert_eq(len(line), 1, "the program synchronised: %r" % r.stdout)
    tid, start, end = map(int, line[0][1:4])
    assert_true(end - start >= 30 * MS, "30 ms in cuCtxSynchronize: %d ns" % (end - start))
    recs = [kernel(7, start, end),
            {"type": "api", "domain": 1, "tid": tid, "start_ns": start, "end_ns": end, "name": 2, "cbid": 1}]
    rep, f = findings_of(recs, name="sync.fnc", strings=((1, "k"), (2, "cuCtxSynchronize")), base=path)
    g = rep["gpu"]
    assert_eq(g["sync_ns"], end - start, "the synchronising call")
    st = g["sync_stacks"]
    assert_true(st and all(x["call"] == "cuCtxSynchronize" and x["caller"] == "sync_step" for x in st),
                "every stack sampled inside the call waits in cuCtxSynchronize: %r" % st)
    top = st[0]["frames"]
    assert_true("cuCtxSynchronize" in top and "sync_step" in top, "the waiting stack names the driver's "
                "function and its caller: %r" % top)
    assert_true(top.index("cuCtxSynchronize") < top.index("sync_step"), "leaf first: %r" % top)
    assert_eq((st[0]["call"], st[0]["caller"]), ("cuCtxSynchronize", "sync_step"), "the waiting call and its caller")
    x = f.get("cpu_gpu_sync")
    assert_true(x is not None and "cuCtxSynchronize < sync_step" in x["evidence"]["text"]
                and x["evidence"]["sync_samples"] > 0 and "from sync_step" in x["recommendation"],
                "the finding names the stack and the caller: %r" % x)


def test_rule_gpu_idle_launch_bound():
    t = t0() + MS
    recs = []
    for i in range(11):  # 0.1 ms kernels 1 ms apart, each launched by a 0.2 ms call
        recs.append({"type": "api", "domain": 0, "tid": 1, "start_ns": t + i * MS - 300000,
                     "end_ns": t + i * MS - 100000, "name": 2, "cbid": 211, "correlation": i + 1})
        recs.append(kernel(7, t + i * MS, t + i * MS + 100000))
    rep, f = findings_of(recs)
    x = f.get("gpu_idle")
    assert_true(x is not None, "gpu_idle fires: %r" % list(f))
    assert_near(x["evidence"]["idle_pct"], 100 - 100 * 1.1 / 10.1, "idle share of the window")
    assert_eq(x["severity"], "HIGH", "severity")
    assert_true("launch-bound" in x["recommendation"], "launch-bound: %r" % x["recommendation"])


def test_rule_gpu_idle_input_bound():
    t = t0() + MS
    recs = [kernel(7, t + i * MS, t + i * MS + 500000) for i in range(11)]
    rep, f = findings_of(recs)
    x = f.get("gpu_idle")
    assert_true(x is not None, "gpu_idle fires: %r" % list(f))
    assert_eq(x["severity"], "MEDIUM", "severity: idle 46%")
    assert_true("input-bound" in x["recommendation"], "input-bound: %r" % x["recommendation"])


def test_rule_small_kernels():
    t = t0() + MS
    recs = [kernel(7, t + i * 10000, t + i * 10000 + 2000) for i in range(1200)]
    rep, f = findings_of(recs)
    x = f.get("small_kernels")
    assert_true(x is not None, "small_kernels fires: %r" % list(f))
    assert_eq(x["evidence"]["small_launches"], 1200, "small launches")
    recs = [kernel(7, t + i * 30000, t + i * 30000 + 20000) for i in range(1200)]
    _, f = findings_of(recs, name="rules2.fnc")
    assert_true("small_kernels" not in f, "20 us kernels are not small")


def test_rule_pageable_memcpy():
    t = t0() + MS
    copy = {"type": "memcpy", "device": 0, "context": 1, "stream": 7, "copy_kind": 1,
            "src_kind": 1, "dst_kind": 3, "bytes": 20000000}
    recs = [dict(copy, start_ns=t, end_ns=t + 4 * MS), dict(copy, start_ns=t + 5 * MS, end_ns=t + 9 * MS)]
    rep, f = findings_of(recs)
    x = f.get("pageable_memcpy")
    assert_true(x is not None, "pageable_memcpy fires: %r" % list(f))
    assert_eq(x["evidence"]["pageable_bytes"], 40000000, "pageable bytes")
    assert_eq(x["evidence"]["pageable_ns"], 8 * MS, "pageable copy time")
    pinned = [dict(r, src_kind=2) for r in recs]
    _, f = findings_of(pinned, name="rules2.fnc")
    assert_true("pageable_memcpy" not in f, "pinned copies do not fire")


def test_rule_gpu_memory_leak():
    base = os.path.join(REPO, "tests", "corpus", "valid_steps_raw.fnc")
    rep = analyze(base)
    with open(base, "rb") as f:
        start = fncfile.decode(f.read())["header"][9]
    ends, t = [], start + rep["steps"]["setup_ns"]  # the steps start at the first mark
    for d in rep["steps"]["durations_ns"]:
        t += d
        ends.append((t, d))
    recs = [{"type": "memory", "operation": 1, "memory_kind": 3, "device": 0,
             "start_ns": end - d // 2, "address": 0x1000 + i, "bytes": 64 << 20}
            for i, (end, d) in enumerate(ends)]
    recs.append(kernel(7, start, start + MS))
    rep, f = findings_of(recs, base=base)
    x = f.get("gpu_memory_leak")
    assert_true(x is not None, "gpu_memory_leak fires: %r" % list(f))
    assert_near(x["evidence"]["slope_bytes_per_step"], 64 << 20, "growth per step", tol=1e-3)
    assert_eq(x["evidence"]["steps"], len(ends), "steps fitted")


def test_rule_stream_serialisation():
    t = t0() + MS
    recs = [kernel(7, t, t + 3 * MS), kernel(8, t + 3 * MS, t + 6 * MS),
            kernel(7, t + 6 * MS, t + 9 * MS), kernel(8, t + 9 * MS, t + 12 * MS)]
    rep, f = findings_of(recs)
    x = f.get("stream_serialisation")
    assert_true(x is not None, "stream_serialisation fires: %r" % list(f))
    assert_eq((x["evidence"]["streams"], x["evidence"]["overlap_ns"]), (2, 0), "streams and overlap")
    _, f = findings_of([kernel(7, t, t + 6 * MS), kernel(8, t + 2 * MS, t + 8 * MS)], name="rules2.fnc")
    assert_true("stream_serialisation" not in f, "overlapping streams do not fire")


# --- GPU timers (include/fennec.h) through a stand-in driver whose events time the host ----

@collector
def test_gpu_timers():
    env = base_env({"FENNEC_LIBCUDA": fake_driver()})
    r, path = record("gpu_fake", fake_driver(), "timers", opts=["--sample", "off"], env=env,
                     expect_rc=3)
    assert_true("timers 0 0 0" in r.stdout, "three timers begun and ended: %r" % r.stdout)
    bench = [l.split() for l in r.stdout.splitlines() if l.startswith("bench ")][0]
    rc, count, mean, lo, hi, median = int(bench[1]), int(bench[2]), *map(float, bench[3:7])
    assert_eq((rc, count), (0, 5), "fennec_gpu_time: status and timed calls")
    assert_true(1e6 <= lo <= median <= hi and median < 3e6,
                "fennec_gpu_time of a 1 ms function: min %s median %s max %s ns" % (lo, median, hi))
    g = analyze(path)["gpu"]
    t = {x["name"]: x for x in g["timers"]}
    assert_eq(t["step"]["count"], 3, "timers resolved by the writer")
    assert_true(t["step"]["min_ns"] >= 5e6, "each timer spans its 5 ms: %r" % t["step"])
    assert_eq(t["bench"]["count"], 5, "fennec_gpu_time's calls recorded too")
    assert_eq(g["devices"], [], "no device: timers only")


@collector
def test_gpu_nvml_nvlink():
    """NVML through the stand-in (tests/fixtures/lib/fakecuda.c), whose NVLink counters grow at
    1e9 bytes/s sent and 5e8 received: the utilisation samples and the NVLink throughput
    reach the report."""
    skip_under("tsan", "the plain CLI cannot load the TSan-built stand-in driver and NVML "
                       "(--gpu finds no driver: cannot allocate memory in static TLS block)")
    env = base_env({"FENNEC_LIBCUDA": fake_driver(), "FENNEC_NVML": fake_driver(),
                    "FENNEC_GPU_INTERVAL_MS": "10"})
    r, path = record("gpu_fake", fake_driver(), opts=["--gpu", "--sample", "off"], env=env, expect_rc=3)
    g = analyze(path)["gpu"]
    d = [x for x in g["devices"] if x["id"] == 65536]
    assert_eq(len(d), 1, "the NVML device, matched to no CUDA device: %r" % [x["id"] for x in g["devices"]])
    d = d[0]
    assert_near(d["nvml"]["sm_pct_mean"], 50, "SM utilisation")
    link = d["nvlink"]
    assert_true(link is not None and link["samples"] >= 2, "NVLink readings: %r" % link)
    # each reading is stamped with the middle of the NVML call that made it; counters in KiB
    assert_true(0.95e9 <= link["tx_bytes_per_s"] <= 1.05e9, "NVLink sent per second: %r" % link)
    assert_true(0.95 * 5e8 <= link["rx_bytes_per_s"] <= 1.05 * 5e8, "NVLink received per second: %r" % link)
    assert_true(abs(link["tx_bytes"] - 2 * link["rx_bytes"]) <= 4096, "sent twice what was received: %r" % link)
    text = analyze_raw(path).stdout
    assert_true("NVLink" in text, "the text report shows NVLink traffic\n" + text[-2000:])
    # The stand-in does not support power or temperature: null, not 0, as in every sample
    nv = d["nvml"]
    assert_eq((nv["power_mw_mean"], nv["power_mw_max"], nv["temperature_max_c"]), (None, None, None),
              "NVML statistics of fields the device never gave: %r" % nv)
    assert_true(all("power_mw" not in u and "temperature_c" not in u for u in d["utilisation"]),
                "no power or temperature in the samples: %r" % d["utilisation"][:3])
    assert_eq((nv["mem_used_max_bytes"], nv["mem_total_bytes"]), (1 << 30, 16 << 30), "NVML memory (1 of 16 GiB)")


@collector
def test_gpu_nvml_power_temperature():
    """A device that reports power (200 W and 300 W, alternating) and temperature (65 C):
    the statistics are numbers, the samples carry them."""
    skip_under("tsan", "the plain CLI cannot load the TSan-built stand-in driver and NVML "
                       "(--gpu finds no driver: cannot allocate memory in static TLS block)")
    env = base_env({"FENNEC_LIBCUDA": fake_driver(), "FENNEC_NVML": fake_driver(),
                    "FENNEC_GPU_INTERVAL_MS": "10", "FAKECUDA_NVML_POWER": "1"})
    r, path = record("gpu_fake", fake_driver(), opts=["--gpu", "--sample", "off"], env=env, expect_rc=3)
    d = [x for x in analyze(path)["gpu"]["devices"] if x["id"] == 65536][0]
    nv = d["nvml"]
    assert_true(nv["samples"] >= 2, "NVML samples: %r" % nv)
    assert_eq((nv["power_mw_max"], nv["temperature_max_c"]), (300000, 65), "power and temperature maxima")
    assert_true(200000 <= nv["power_mw_mean"] <= 300000, "mean power between the two readings: %r" % nv)
    powers = [u["power_mw"] for u in d["utilisation"]]
    assert_eq(sorted(set(powers)), [200000, 300000], "power in the samples")
    assert_near(nv["power_mw_mean"], sum(powers) / len(powers), "mean power over the samples")


def test_gpu_timers_without_driver():
    env = base_env({"FENNEC_LIBCUDA": "/nonexistent/libcuda.so.1"})
    r, path = record("gpu_fake", "/nonexistent/libcuda.so.1", "timers", opts=["--sample", "off"],
                     env=env, expect_rc=3)
    assert_true("timers -3 -3 -3" in r.stdout and "bench -3 " in r.stdout,
                "FENNEC_EIO without a driver: %r" % r.stdout)
    assert_eq(region(analyze(path), "work")["count"], 1, "the program went on")


def test_gpu_chunk_mutations_never_crash():
    """Bytes of a GPU payload changed at random, the checksum made right again: the reader
    rejects the file with a message naming it, or the analysis takes what it says; never a
    crash (the fuzzer cannot pass the checksum, this reaches the decoder and the analysis)."""
    import random
    rng = random.Random(7)
    with open(CORPUS_GPU, "rb") as f:
        data = f.read()
    _, _, chunks = fncfile.parse(data)
    c = [c for c in chunks if c.type == 12][0]
    payload = data[c.payload_offset:c.end]
    for i in range(80):
        p = bytearray(payload)
        for _ in range(rng.randint(1, 4)):
            p[rng.randrange(len(p))] = rng.randrange(256)
        mutated = data[:c.offset] + fncfile.make_chunk(12, bytes(p)) + data[c.end:]
        name = "m%d.fnc" % i
        with open(name, "wb") as f:
            f.write(mutated)
        r = analyze_raw(name, "--format", "json")
        assert_true(r.returncode in (0, 1), "mutation %d: exit %s\n  %s" % (i, r.returncode, r.describe()))
        if r.returncode:
            assert_true(name in r.stderr, "mutation %d: the error names the file: %r" % (i, r.stderr))


# --- NVTX ranges as regions ----------------------------------------------------------------

def test_nvtx_ranges_are_regions():
    exe = os.path.join(BUILD, "tests", "nvtx_app")
    if not os.path.exists(exe):
        raise Skip("built without the CUDA toolkit's headers (tests/gpu/nvtx_app.c includes NVTX 3)")
    env = base_env({"FENNEC_LIBCUDA": fake_driver(), "FENNEC_NVML": "/nonexistent/libnvidia-ml.so.1"})
    r, path = record(exe, opts=["--gpu", "--sample", "off"], env=env)
    rep = analyze(path)
    assert_eq(region(rep, "step")["count"], 3, "nvtxRangePushA/Pop: outer ranges")
    for name, ms in (("forward", 10), ("backward", 5), ("aten::mm", 2)):
        x = region(rep, "step/" + name)
        assert_eq(x["count"], 3, "%s: calls (nested in step)" % name)
        assert_true(x["min_ns"] >= ms * MS, "%s: each at least its %d ms: %r" % (name, ms, x["min_ns"]))
    x = region(rep, "wide r\u00e9gion")
    assert_true(x["count"] == 1 and x["min_ns"] >= 3 * MS, "nvtxRangePushW: a region named in UTF-8: %r" % x)
    nv = rep["gpu"]["nvtx"]
    got = {r["name"]: r for r in nv["ranges"]}
    assert_eq(sorted(got), ["handoff", "io", "load", "wide start"],
              "start/end ranges: A, Ex, a domain range with a registered string, W")
    for name, count, ms in (("load", 3, 4), ("io", 1, 3), ("wide start", 1, 2), ("handoff", 1, 8)):
        r = got[name]
        assert_eq(r["count"], count, "%s: ranges" % name)
        # at least its spin; at most a generous 20x (two CPUs shared with the rest of the tests)
        assert_true(ms * MS <= r["min_ns"] <= r["max_ns"] <= 20 * ms * MS,
                    "%s: each lasts its %d ms: %r" % (name, ms, r))
        assert_near(r["mean_ns"], r["total_ns"] / count, "%s: mean" % name)
    assert_eq((got["handoff"]["threads"], got["handoff"]["cross_thread"]), (2, 1),
              "handoff: started on one thread, ended on another")
    assert_eq((got["load"]["threads"], got["load"]["cross_thread"]), (1, 0), "load: one thread")
    marks = {m["name"]: m["count"] for m in nv["marks"]}
    assert_eq(marks, {"epoch": 3, "checkpoint \u2713": 1, "sync point": 1},
              "marks: A, W (UTF-8 from a wide message), a domain mark")
    assert_eq((nv["open"], nv["unmatched"], nv["dropped"]), (0, 0, 0), "every range ended; nothing lost")
    text = analyze_raw(path).stdout
    assert_true("NVTX range" in text and "handoff" in text and "NVTX mark" in text,
                "the text report lists the ranges and marks\n" + text[-2000:])


def test_gpu_two_devices():
    """Each device on its own: busy time, peaks; the largest peak names its device even when
    the other device is first seen after it."""
    t = t0() + MS
    mem = {"type": "memory", "operation": 1, "memory_kind": 3, "address": 0x1000}
    recs = [dict(mem, device=0, start_ns=t, bytes=1 << 30),
            dict(kernel(7, t, t + 2 * MS), device=0),
            dict(mem, device=1, start_ns=t + MS, bytes=512 << 20),
            dict(kernel(9, t + MS, t + 4 * MS), device=1)]
    dev1 = dict(A100, id=1, name="Second GPU")
    payload = fncfile.gpu_payload({"cupti_version": 130001}, [A100, dev1], [(1, "k")], recs)
    g = analyze(with_gpu(payload))["gpu"]
    d = {x["id"]: x for x in g["devices"]}
    assert_eq((d[0]["busy_ns"], d[1]["busy_ns"]), (2 * MS, 3 * MS), "busy per device")
    assert_eq((d[0]["peak_allocated_bytes"], d[1]["peak_allocated_bytes"]), (1 << 30, 512 << 20),
              "peak per device")
    assert_eq((g["peak_allocated_bytes"], g["peak_allocated_device"]), (1 << 30, 0), "the largest peak")
    assert_eq(g["busy_ns"], 5 * MS, "busy summed over devices")

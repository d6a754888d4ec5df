"""GPU profiling (docs/gpu.md) without a GPU: the GPU chunk through the reference decoder
and the reader, the reader's errors on damaged GPU records, `fennec record --gpu` on a
machine without a driver or without CUPTI, and the analysis of GPU records built from
synthetic CUPTI activity records (tests/gpu/) or encoded here with known answers."""

import os

import fncfile
from helpers import (BUILD, REPO, Skip, analyze, analyze_raw, assert_clean_error, assert_eq,
                     assert_true, base_env, libfennec, record, region, run)

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
    """Whether this build has CUPTI support (the Makefile found CUPTI's headers)."""
    return os.path.exists(os.path.join(BUILD, "tests", "cupti_test"))


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


def test_gpu_record_injection():
    """With a driver (a stand-in that calls InitializeInjection as the real one does) and
    CUPTI, the program loads CUPTI through libfennec and runs on; the file says so."""
    if not cupti_built():
        raise Skip("built without CUPTI's headers")
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

"""GPU profiling (docs/gpu.md) without a GPU: the GPU chunk through the reference decoder
and the reader, the reader's errors on damaged GPU records, `fennec record --gpu` on a
machine without a driver or without CUPTI, and the analysis of GPU records built from
synthetic CUPTI activity records (tests/gpu/) or encoded here with known answers."""

import os

import fncfile
from helpers import (REPO, Skip, analyze, analyze_raw, assert_clean_error, assert_eq,
                     assert_true)

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

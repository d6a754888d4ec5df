"""Bottleneck rules step_variance, off_cpu and input_bound on fixtures with one known
bottleneck each (tests/fixtures/rules.c), and no finding at all on healthy programs
(tests/fixtures/healthy.c and the healthy modes of rules.c): false positives are bugs.
docs/bottlenecks.md has the rules; rank_imbalance is tested in test_ranks.py."""

import json

from helpers import (MS, SANITIZER, SLOW, Skip, analyze, assert_between, assert_close, assert_eq, assert_true,
                     base_env, record, skip_under, timing)

WALL = ("--sample=wall",)
# A run of the healthy fixture stopped this long by a busy machine is not healthy: run again.
STALL = 50 * MS


def san_flags():
    """A program the tests compile runs under the build's collector: with the sanitizer's
    runtime, whose library must come first, when the build has one."""
    return {"asan": ["-fsanitize=address,undefined"], "tsan": ["-fsanitize=thread"]}.get(SANITIZER, [])


def findings(rep, kind):
    return [f for f in rep["findings"] if f["type"] == kind]


def one(rep, kind):
    f = findings(rep, kind)
    assert_eq(len(f), 1, "%s findings (all findings: %s)" % (kind, [(x["type"], x["subject"]) for x in rep["findings"]]))
    return f[0]


def wall_of(rep):
    return rep["summary"]["wall_ns"]


def gain_between(f, known_pct, what, under=0.9, over=10):
    """An expected gain from busy loops on a shared machine: preemption mostly adds time to
    the slow part, so the gain may be above the known value, not much below (sampled
    estimates may be a little below)."""
    assert_between(f["expected_gain_pct"], known_pct * under, known_pct + over, what + " expected_gain_pct", " %")


# --- step_variance ---------------------------------------------------------------------------

@timing
def test_step_variance_periodic():
    """rules spikes 40 20 60 10: every 10th step also runs "checkpoint" for 60 ms."""
    steps, step_ms, spike_ms, period = 40, 20, 60, 10
    _, path = record("rules", "spikes", steps, step_ms, spike_ms, period)
    rep = analyze(path)
    f = one(rep, "step_variance")
    e = f["evidence"]
    assert_eq(e["period"], period, "the period detected")
    assert_true("every 10 steps" in f["subject"], "the subject says the period: %r" % f["subject"])
    assert_between(e["outliers"], steps // period, steps // period + 3, "outlier steps (4 checkpoints, a busy machine adds some)")
    assert_between(e["median_ns"], step_ms * MS * 0.98, step_ms * MS * 1.4, "median step (a busy machine adds)", "ns")
    assert_close(e["region_extra_per_step_ns"], spike_ms * MS, 6 * MS * SLOW, "checkpoint's extra per slow step", "ns")
    assert_true("checkpoint" in f["recommendation"] and "every 10 steps" in f["recommendation"],
                "the recommendation names the region and the period: %r" % f["recommendation"])
    gain_between(f, 100.0 * (steps // period) * spike_ms * MS / wall_of(rep), "step_variance")
    assert_close(f["expected_gain_pct"], 100.0 * e["excess_ns"] / wall_of(rep), 0.01, "gain = excess / wall", " %")
    # a step must be 5x the median to count: the 4x checkpoint steps do not
    rep = analyze(path, "--outlier-factor", 5)
    assert_eq(findings(rep, "step_variance"), [], "no step_variance with --outlier-factor 5")


@timing
def test_step_variance_irregular():
    """rules spikes 40 20 60 0: steps 4, 9, 10, 23 and 37 run the checkpoint: no period."""
    _, path = record("rules", "spikes", 40, 20, 60, 0)
    f = one(analyze(path), "step_variance")
    assert_eq(f["evidence"]["period"], 0, "no period in irregular outliers")
    assert_between(f["evidence"]["outliers"], 5, 8, "outlier steps")
    assert_true("outliers" in f["subject"], "the subject counts the outliers: %r" % f["subject"])
    assert_true("checkpoint" in f["recommendation"], "the recommendation starts with checkpoint: %r" % f["recommendation"])


# --- off_cpu ----------------------------------------------------------------------------------

@timing
def test_off_cpu_lock():
    """rules lock 30 20 50 with wall-clock sampling: every step the main thread computes
    10 ms, then blocks 10 ms in pthread_mutex_lock (from lock_shared, in region "update")
    on a mutex another thread holds."""
    skip_under("tsan", "off-CPU shares under TSan measure TSan (test_sampling.py says why)")
    steps, step_ms, pct = 30, 20, 50
    _, path = record("rules", "lock", steps, step_ms, pct, opts=WALL)
    rep = analyze(path)
    f = one(rep, "off_cpu")
    e = f["evidence"]
    # a busy machine makes the computing half longer in wall time (a runnable thread counts as
    # on CPU), so the share is lower, not higher
    assert_between(e["offcpu_pct"], pct - 18, pct + 10, "off-CPU share of the main thread's working samples", " %")
    blocked = steps * step_ms * pct / 100 * MS
    assert_between(e["blocked_ns"], blocked * 0.75, blocked * 1.3, "blocked time (samples x period)", "ns")
    assert_eq(e["tid"], rep["processes"][0]["pid"], "the main thread")
    assert_true("pthread_mutex_lock" in f["subject"], "the subject names the blocking call: %r" % f["subject"])
    assert_true("lock_shared" in f["evidence"]["text"] and "update" in f["evidence"]["text"],
                "the evidence names the caller and the region: %r" % f["evidence"]["text"])
    assert_true("lock" in f["recommendation"], "a lock recommendation: %r" % f["recommendation"])
    gain_between(f, 100.0 * blocked / wall_of(rep), "off_cpu", under=0.8)
    # the holder thread sleeps outside regions: it should not compute, no finding for it
    assert_eq([x for x in findings(rep, "off_cpu") if x["evidence"]["tid"] != e["tid"]], [], "off_cpu of other threads")
    rep = analyze(path, "--offcpu-threshold", 80)
    assert_eq(findings(rep, "off_cpu"), [], "no off_cpu under --offcpu-threshold 80")


def test_off_cpu_needs_wall_samples():
    _, path = record("rules", "lock", 10, 20, 50)
    assert_eq(findings(analyze(path), "off_cpu"), [], "no off_cpu from CPU sampling (no off-CPU samples)")


# --- input_bound --------------------------------------------------------------------------------

@timing
def test_input_bound_on_main_thread():
    """rules loader 30 6 14: the stepping thread loads each batch itself (load_batch 6 ms,
    forward 14 ms): 30 % of its steps."""
    steps, load_ms, compute_ms = 30, 6, 14
    _, path = record("rules", "loader", steps, load_ms, compute_ms)
    rep = analyze(path)
    f = one(rep, "input_bound")
    e = f["evidence"]
    load = steps * load_ms * MS
    assert_between(e["region_ns"], load * 0.98, load * 1.6 + 30 * MS * SLOW, "time in load_batch on the main thread", "ns")
    assert_eq(e["loaders"], 0, "no loader threads")
    assert_close(e["share_pct"], 100.0 * e["load_ns"] / wall_of(rep), 0.01, "share = load / wall", " %")
    assert_true(f["subject"].startswith("load_batch"), "the subject is the region: %r" % f["subject"])
    assert_true("load_batch" in f["recommendation"] and "prefetch" in f["recommendation"],
                "a prefetching recommendation naming load_batch: %r" % f["recommendation"])
    assert_eq(e["workers_needed"], 1, "one loader keeps up with 6 ms loads against 14 ms of compute")
    gain_between(f, 100.0 * load / wall_of(rep), "input_bound")
    # --data-regions names the loading regions instead of the default words
    rep = analyze(path, "--data-regions", "forw*")
    f = one(rep, "input_bound")
    assert_true(f["subject"].startswith("forward"), "--data-regions forw*: the subject is forward: %r" % f["subject"])
    rep = analyze(path, "--data-regions", "nothing_here")
    assert_eq(findings(rep, "input_bound"), [], "no input_bound when no region is named a loader")


@timing
def test_input_bound_leaves_one_off_work_out():
    """rules loader 30 6 14 600: a one-time make_dataset of 600 ms in the set-up, then 30
    steps that load 6 ms and compute 14 ms each: the per-batch loading is the 180 ms of
    load_batch, not 780 ms; make_dataset is reported as one-off, not as batch loading."""
    steps, load_ms, compute_ms, dataset_ms = 30, 6, 14, 600
    _, path = record("rules", "loader", steps, load_ms, compute_ms, dataset_ms)
    rep = analyze(path)
    f = one(rep, "input_bound")
    e = f["evidence"]
    load = steps * load_ms * MS
    assert_between(e["region_ns"], load * 0.98, load * 1.6 + 30 * MS * SLOW, "per-batch loading (load_batch only)", "ns")
    assert_between(e["one_off_ns"], dataset_ms * MS * 0.98, dataset_ms * MS * 1.3, "one-off loading (make_dataset)", "ns")
    assert_between(e["load_per_step_ns"], load_ms * MS * 0.98, load_ms * MS * 1.6, "loading per step", "ns")
    assert_between(e["compute_per_step_ns"], compute_ms * MS * 0.98, compute_ms * MS * 1.6, "compute per step", "ns")
    assert_true(f["subject"].startswith("load_batch"), "the subject is the per-batch region: %r" % f["subject"])
    assert_true("make_dataset" not in f["recommendation"], "no advice to prefetch make_dataset: %r" % f["recommendation"])
    assert_close(e["share_pct"], 100.0 * e["load_ns"] / wall_of(rep), 0.01, "share = per-batch load / wall", " %")


@timing
def test_input_bound_slow_loader():
    """rules prefetch 30 25 10 with wall-clock sampling: a loader thread takes 25 ms a
    batch, the main loop computes 10 ms and waits the other 15 ms in wait_batch."""
    skip_under("tsan", "off-CPU shares under TSan measure TSan")
    steps, load_ms, compute_ms = 30, 25, 10
    _, path = record("rules", "prefetch", steps, load_ms, compute_ms, opts=WALL)
    rep = analyze(path)
    f = one(rep, "input_bound")
    e = f["evidence"]
    wait = steps * (load_ms - compute_ms) * MS
    assert_between(e["blocked_ns"], wait * 0.6, wait * 1.4, "time blocked in wait_batch (wall samples)", "ns")
    assert_eq(e["region_ns"], 0, "the main thread runs no loading region")
    assert_true(e["loaders"] >= 1, "the loader thread is seen: %r" % e["loaders"])
    # 25 ms loads against 10 ms of compute need 3 loaders; a busy machine lengthens both
    assert_between(e["load_per_batch_ns"], load_ms * MS * 0.98, load_ms * MS * 1.5, "a batch's load (the loader's calls)", "ns")
    assert_between(e["compute_per_step_ns"], compute_ms * MS * 0.98, compute_ms * MS * 1.5, "compute per step (forward)", "ns")
    assert_eq(e["workers_needed"], -(-e["load_per_batch_ns"] // e["compute_per_step_ns"]), "workers needed = ceil(load / compute)")
    assert_between(e["workers_needed"], 2, 4, "loader workers needed")
    assert_true("wait_batch" in f["subject"], "the subject names the waiting function: %r" % f["subject"])
    assert_true("loader workers" in f["recommendation"], "more loader workers: %r" % f["recommendation"])
    # the same wait is not an off_cpu finding as well
    assert_eq(findings(rep, "off_cpu"), [], "a data-loading wait is input_bound's, not off_cpu's")


# --- no false positives ---------------------------------------------------------------------------

@timing
def test_healthy_no_findings():
    """healthy.c (20 equal phases, equal steps, nothing blocks or loads), in CPU and in
    wall-clock sampling: not one finding of any rule. rules prefetch with a loader faster
    than the compute: no input_bound, no off_cpu."""
    for opts in ((), WALL):
        for attempt in range(4):
            r, path = record("healthy", opts=opts)
            gap = json.loads(r.stdout)["max_gap_ns"]
            if gap < STALL:
                break
        else:
            raise Skip("the machine stopped the program for %.0f ms or more in each of 4 runs: a "
                       "stalled phase is not healthy" % (STALL / MS))
        rep = analyze(path)
        assert_eq([(f["type"], f["subject"]) for f in rep["findings"]], [],
                  "findings on the healthy fixture (%s; longest stall %.1f ms)" % (opts or "cpu", gap / MS))
    # (its steps are not checked: this fixture cannot tell a stall of the machine from a slow step)
    _, path = record("rules", "prefetch", 30, 6, 14, opts=WALL)
    rep = analyze(path)
    for kind in ("input_bound", "off_cpu"):
        assert_eq(findings(rep, kind), [], "%s with a loader that keeps up" % kind)


def test_hot_library_code_names_where_the_program_entered_it():
    """sort_ints spends its CPU in glibc's sort loop (an internal function whose caller is
    qsort, in libc too) and in the comparator libc calls back. The advice for the library's
    internal function names sort_all, where the program entered libc, not qsort; the
    comparator is the program's own code to optimise, called back by libc from sort_all."""
    r, path = record("sort_ints", 1000)
    rep = analyze(path)
    if rep["samples"]["cpu_samples"] < 200:
        raise Skip("too few CPU samples: %d" % rep["samples"]["cpu_samples"])
    mods = {f["name"]: f["module"] for f in rep["functions"]}
    hot = {f["subject"]: f for f in findings(rep, "hot_function")}
    inner = [name for name, f in hot.items() if "libc.so" in mods.get(name, "")
             and "libc.so" in mods.get(next((g["caller"] for g in rep["functions"] if g["name"] == name), ""), "")]
    if not inner:
        raise Skip("no hot libc function called from libc here: %s" % sorted(hot))
    for name in inner:
        text = hot[name]["recommendation"]
        assert_true("reached mostly from sort_all" in text and "make sort_all call it less" in text,
                    "%s's advice names where the program entered libc: %s" % (name, text))
        assert_true(hot[name]["evidence"].get("entry_pct", 0) > 90, "entry_pct of %s: %r" % (name, hot[name]["evidence"]))
        row = next(g for g in rep["functions"] if g["name"] == name)
        assert_true(row["entry"] == "sort_all" and row["entry_pct"] > 90,
                    "functions[] gives %s's entry: %r" % (name, {k: row[k] for k in ("caller", "entry", "entry_pct")}))
    assert_true("cmp_int" in hot, "the comparator is hot: %s" % sorted(hot))
    text = hot["cmp_int"]["recommendation"]
    row = next(g for g in rep["functions"] if g["name"] == "cmp_int")
    assert_true(row["entry"] == row["caller"] and "libc.so" in mods.get(row["entry"], ""),
                "cmp_int's entry is the libc function that calls it back: %r" % row)
    assert_true(text.startswith("Optimise cmp_int") and "calls it back" in text and "from sort_all" in text,
                "the comparator is the program's to optimise, called back by libc: %s" % text)


# --- hot_function: the reference BLAS ------------------------------------------------------

GEMM = r"""
#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
typedef void (*gemm_fn)(const char *, const char *, const int *, const int *, const int *, const float *,
			const float *, const int *, const float *, const int *, const float *, float *, const int *);
__attribute__((noinline)) void multiply(gemm_fn f, const float *a, const float *b, float *c, int n)
{
	float one = 1, zero = 0;
	f("N", "N", &n, &n, &n, &one, a, &n, b, &n, &zero, c, &n);
}
int main(int argc, char **argv)
{
	void *h = dlopen(argv[1], RTLD_NOW | RTLD_LOCAL);
	gemm_fn f = h ? (gemm_fn)dlsym(h, "sgemm_") : NULL;
	if (!f) {
		fprintf(stderr, "%s\n", dlerror());
		return 2;
	}
	int n = 192;
	float *a = malloc(sizeof(float) * n * n), *b = malloc(sizeof(float) * n * n), *c = malloc(sizeof(float) * n * n);
	for (int i = 0; i < n * n; i++)
		a[i] = b[i] = (float)(i % 7) / 7;
	struct timespec t0, t;
	clock_gettime(CLOCK_MONOTONIC, &t0);
	do {
		multiply(f, a, b, c, n);
		clock_gettime(CLOCK_MONOTONIC, &t);
	} while ((t.tv_sec - t0.tv_sec) + (t.tv_nsec - t0.tv_nsec) / 1e9 < atof(argv[2]));
	printf("%g\n", c[n + 1]);
	return 0;
}
"""


def test_hot_reference_blas_says_to_use_an_optimised_one():
    """A program whose time is in sgemm_ of the reference BLAS (Debian's libblas3, which
    numpy and scipy use unless an optimised one is installed): the hot_function finding
    says so and how to change it without touching the program (numpy's two-layer MLP
    training ran 12x faster with OpenBLAS here: steps of 40 ms became 3.3 ms). The same
    program on OpenBLAS computes in OpenBLAS's kernels: no such advice."""
    import os
    import shutil
    import subprocess
    cc = shutil.which("cc") or shutil.which("gcc")
    if not cc:
        raise Skip("no C compiler")
    arch = subprocess.run([cc, "-print-multiarch"], stdout=subprocess.PIPE, text=True).stdout.strip()
    libs = {"reference": "/usr/lib/%s/blas/libblas.so.3" % arch,
            "openblas": "/usr/lib/%s/openblas-pthread/libblas.so.3" % arch}
    missing = [p for p in libs.values() if not os.path.exists(p)]
    if missing:
        raise Skip("not installed (make deps: libblas3, libopenblas0-pthread): %s" % missing)
    with open("gemm.c", "w") as f:
        f.write(GEMM)
    subprocess.run([cc, "-O1", "-g"] + san_flags() + ["-o", "gemm", "gemm.c", "-ldl"], check=True)
    for which, lib in libs.items():
        r, path = record(os.path.abspath("gemm"), lib, 0.6, out="%s.fnc" % which,
                         env=base_env({"OPENBLAS_NUM_THREADS": "2"}))
        rep = analyze(path)
        if rep["samples"]["cpu_samples"] < 200:
            raise Skip("too few CPU samples: %d" % rep["samples"]["cpu_samples"])
        ref = [f for f in findings(rep, "hot_function") if f["evidence"].get("reference_blas")]
        if which == "reference":
            assert_eq([f["subject"] for f in ref], ["sgemm_"], "%s: the findings that name the reference BLAS (all: %s)"
                      % (which, [(f["subject"], f["evidence"]) for f in findings(rep, "hot_function")]))
            text = ref[0]["recommendation"]
            assert_true("that is the reference BLAS (" in text and "libblas.so.3)" in text,
                        "%s: the advice names the library: %s" % (which, text))
            assert_true("apt install libopenblas0-pthread" in text and "no change to the program" in text,
                        "%s: the advice says how: %s" % (which, text))
        else:
            assert_eq(ref, [], "%s: no reference-BLAS advice (hot: %s)" % (
                which, [f["subject"] for f in findings(rep, "hot_function")]))
            # OpenBLAS computes on threads it started, whose workers yield in a loop between
            # calls: "make start_thread call it less often" was the advice for both
            for f in findings(rep, "hot_function"):
                assert_true("make start_thread" not in f["recommendation"],
                            "%s: advice naming a thread's start: %s" % (f["subject"], f["recommendation"]))
                if f["subject"] == "__sched_yield":
                    assert_true("busy waiting" in f["recommendation"] and "OPENBLAS_NUM_THREADS" in f["recommendation"],
                                "the yield loop's advice: %s" % f["recommendation"])
                    assert_eq(f["evidence"].get("busy_wait"), 1, "evidence busy_wait")
                if f["evidence"].get("library_threads"):
                    assert_true("on threads the library started itself" in f["recommendation"],
                                "%s: the advice for code on OpenBLAS's threads: %s" % (f["subject"], f["recommendation"]))


# --- parallel_wait ---------------------------------------------------------------------------

OMP = r"""
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
__attribute__((noinline)) static double work(int n)
{
	double s = 0;
	for (int k = 0; k < n; k++)
		s += sin(k * 1e-3);
	return s;
}
int main(int argc, char **argv)
{
	double total = 0;
	int reps = atoi(argv[2]);
	if (!strcmp(argv[1], "uneven")) {
		for (int rep = 0; rep < reps; rep++) {
			/* the first half of the iterations cost 8 times the second: static gives thread 0 the first half */
#pragma omp parallel for reduction(+:total) schedule(static)
			for (int i = 0; i < 64; i++)
				total += work(i < 32 ? 80000 : 10000);
		}
	} else {
		for (int rep = 0; rep < reps; rep++) {
#pragma omp parallel for reduction(+:total) schedule(dynamic, 1)
			for (int i = 0; i < 64; i++)
				total += work(40000);
		}
	}
	printf("%g\n", total);
	return 0;
}
"""


def test_parallel_wait_openmp_loop_with_uneven_iterations():
    """An OpenMP loop on 2 threads whose first half of iterations costs 8 times the second,
    under schedule(static): thread 0 computes about 8 times what thread 1 does, which
    waits for it at the barrier, about 44% of the team's time. That showed only as a
    hot_function on an unnamed address of libgomp ("make start_thread call it less
    often"); now one parallel_wait finding names the outlined loop (main._omp_fn.0), each
    thread's work and schedule(dynamic). The same work in even iterations under
    schedule(dynamic, 1): no finding (a busy machine may stall a thread: run again)."""
    import os
    import shutil
    import subprocess
    cc = shutil.which("gcc") or shutil.which("cc")
    if not cc:
        raise Skip("no C compiler")
    with open("omp.c", "w") as f:
        f.write(OMP)
    if subprocess.run([cc, "-O1", "-g", "-fopenmp"] + san_flags() + ["-o", "omp", "omp.c", "-lm"]).returncode != 0:
        raise Skip("no OpenMP (libgomp) for %s" % cc)
    env = base_env({"OMP_NUM_THREADS": "2"})
    r, path = record(os.path.abspath("omp"), "uneven", 12, out="uneven.fnc", opts=WALL, env=env)
    rep = analyze(path)
    f = one(rep, "parallel_wait")
    ev = f["evidence"]
    assert_eq(ev["threads"], 2, "threads in the team")
    assert_between(ev["wait_pct"], 25, 60, "wait_pct (about 44: thread 1 idles 7/8 of its time)", " %")
    assert_true(ev["most_work_ns"] >= 3 * ev["least_work_ns"],
                "each thread's work in the loop: %.0f and %.0f ns" % (ev["most_work_ns"], ev["least_work_ns"]))
    assert_true("main._omp_fn.0 (omp.c:" in f["recommendation"] and "schedule(dynamic" in f["recommendation"],
                "the advice: %s" % f["recommendation"])
    libgomp = [x["subject"] for x in findings(rep, "hot_function") if "libgomp" in x["subject"]]
    assert_eq(libgomp, [], "hot_function findings on the runtime's code")
    for attempt in range(3):
        r, path = record(os.path.abspath("omp"), "even", 12, out="even.fnc", opts=WALL, env=env)
        got = findings(analyze(path), "parallel_wait")
        if not got:
            break
        print("even iterations, attempt %d: %s" % (attempt + 1, got[0]["subject"]))
    assert_eq([x["subject"] for x in got], [], "parallel_wait findings of even iterations (3 runs)")

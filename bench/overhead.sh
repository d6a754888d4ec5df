#!/usr/bin/env bash
# bench/overhead.sh - what fennec says it costs a program (summary.overhead_cpu_ns) beside
# what the program pays: its CPU time under `fennec record` (the recording's own
# cpu_user_ns + cpu_sys_ns) less its CPU time alone (rusage), for fixed work
# (tests/fixtures/plain/cost_work.c, built without libfennec): allocations (memory off,
# sampled, full), region pairs, and 4999 Hz CPU sampling of a stack 120 frames deep. Each
# repetition runs alone and recorded alternately; the fastest of each is kept, the reported
# cost is the median. Prints one row a case: CPU alone and recorded, measured and reported
# cost, their ratio, and the reported parts. test_overhead.py checks the same cases.
# Usage: bench/overhead.sh [results_dir]   (env: REPS, default 5; CASES, a subset)
set -euo pipefail
. "$(dirname "$0")/paths.sh"
mkdir -p "$results"
(cd "$root" && make -s -j"$(nproc)" fixtures cli lib)
REPS=${REPS:-5} CASES=${CASES:-"alloc-off alloc-sampled alloc-full regions sampling"} \
FENNEC="$FENNEC" WORK="$B/fixtures/cost_work" OUT="$results/overhead.tsv" python3 - <<'PY'
import json, os, subprocess, tempfile
cases = {
    "alloc-off": (["alloc", "24000000"], ["--sample", "off", "--memory=off"]),
    "alloc-sampled": (["alloc", "24000000"], ["--sample", "off", "--memory=sampled"]),
    "alloc-full": (["alloc", "3000000"], ["--sample", "off", "--memory=full"]),
    "regions": (["regions", "20000000"], ["--sample", "off"]),
    "sampling": (["deep", "1500000"], ["-F", "4999", "--memory=off"]),
}
fennec, work, reps = os.environ["FENNEC"], os.environ["WORK"], int(os.environ["REPS"])
tmp = tempfile.mkdtemp(prefix="fennec-overhead-")
rows = ["case\talone_s\trecorded_s\tmeasured_s\treported_s\treported/measured\twriter_s\tevents_s\theap_s\tsamples_s"]
print("%-14s %8s %9s %9s %9s %7s   %s" % ("case", "alone", "recorded", "measured", "reported", "ratio",
                                            "reported parts: writer, events, heap, samples (s)"))
for name in os.environ["CASES"].split():
    args, opts = cases[name]
    alone, withf, rep, parts = [], [], [], None
    for i in range(reps):
        p = subprocess.Popen([work] + args, stdout=subprocess.DEVNULL)
        _, _, ru = os.wait4(p.pid, 0)
        alone.append(ru.ru_utime + ru.ru_stime)
        f = os.path.join(tmp, "r.fnc")
        subprocess.run([fennec, "record", "-o", f] + opts + ["--", work] + args, check=True,
                       stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
        s = json.loads(subprocess.run([fennec, "analyze", f, "--format", "json"], check=True,
                                      stdout=subprocess.PIPE, stderr=subprocess.DEVNULL).stdout)["summary"]
        withf.append((s["cpu_user_ns"] + s["cpu_sys_ns"]) / 1e9)
        rep.append(s["overhead_cpu_ns"] / 1e9)
        parts = s["overhead"]
    m, r = min(withf) - min(alone), sorted(rep)[len(rep) // 2]
    ps = [parts[k] / 1e9 for k in ("writer_ns", "events_ns", "heap_ns", "samples_ns")]
    print("%-14s %8.3f %9.3f %9.3f %9.3f %7.2f   %s" % (name, min(alone), min(withf), m, r, r / m if m > 0 else float("nan"),
                                                      ", ".join("%.3f" % x for x in ps)))
    rows.append("\t".join([name] + ["%.4f" % x for x in (min(alone), min(withf), m, r, r / m if m > 0 else 0)] +
                          ["%.4f" % x for x in ps]))
with open(os.environ["OUT"], "w") as fo:
    fo.write("\n".join(rows) + "\n")
print("wrote " + os.environ["OUT"])
PY

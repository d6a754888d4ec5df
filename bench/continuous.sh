#!/usr/bin/env bash
# bench/continuous.sh - what leaving `fennec record --continuous` on costs a PyTorch training
# run (examples/torch_train.py, Debian's python3-torch on the CPU), beside perf record at the
# same rate, the profiler people leave on today. Four ways, interleaved, REPS times each:
#   alone        python3 examples/torch_train.py --steps STEPS
#   continuous   fennec record --continuous DIR --interval 10s (49 Hz, a pprof file every 10 s,
#                the recording capped; the analysis of each interval runs in fennec record)
#   default      fennec record (999 Hz, heap sampled: a profile to read, not one to leave on)
#   perf-49      perf record -F 49 --call-graph dwarf (perf's own process counted)
# Per way, the medians: wall time, CPU of the whole process tree (wait4's rusage: the
# program, fennec record or perf), and the disk left at the end; the ratios are to alone.
# On a 2-vCPU VM whose torch uses both, these move 5-10 % from run to run, more than 49 Hz
# costs; so also, as measured inside: fennec's own share of the program's CPU (the
# recording's summary.overhead_cpu_ns, the collector's measure of itself, over what the
# recording keeps) and the CPU fennec record spent reading the intervals (its summary line).
# Usage: bench/continuous.sh [results_dir]   (env: REPS, default 3; STEPS, default 900)
set -euo pipefail
. "$(dirname "$0")/paths.sh"
mkdir -p "$results"
(cd "$root" && make -s -j"$(nproc)" cli lib)
PY=/usr/bin/python3
"$PY" -c "import torch" 2>/dev/null || { echo "bench/continuous.sh: needs Debian's python3-torch" >&2; exit 1; }
REPS=${REPS:-3} STEPS=${STEPS:-900} FENNEC="$FENNEC" PY="$PY" TRAIN="$root/examples/torch_train.py" \
OUT="$results/continuous.tsv" python3 - <<'PY'
import os, shutil, statistics, subprocess, tempfile
fennec, py, train = os.environ["FENNEC"], os.environ["PY"], os.environ["TRAIN"]
reps, steps = int(os.environ["REPS"]), os.environ["STEPS"]
tmp = tempfile.mkdtemp(prefix="fennec-continuous-")
prog = [py, train, "--steps", steps]
ways = {
    "alone": lambda d: prog,
    "continuous": lambda d: [fennec, "record", "--continuous", d, "--interval", "10s", "--"] + prog,
    "default": lambda d: [fennec, "record", "-q", "-o", os.path.join(d, "r.fnc"), "--"] + prog,
    "perf-49": lambda d: ["perf", "record", "-q", "-F", "49", "--call-graph", "dwarf", "-o",
                          os.path.join(d, "perf.data"), "--"] + prog,
}
if not shutil.which("perf"):
    del ways["perf-49"]
got = {w: [] for w in ways}
import json, re
UNIT = {"ns": 1e-9, "us": 1e-6, "ms": 1e-3, "s": 1.0}


def own_share(path):
    """fennec's share of the program's CPU, as the recording says (%)."""
    if not os.path.exists(path):
        return float("nan")
    s = json.loads(subprocess.run([fennec, "analyze", path, "--format", "json"], stdout=subprocess.PIPE,
                                  stderr=subprocess.DEVNULL, check=True).stdout)["summary"]
    cpu = s["cpu_user_ns"] + s["cpu_sys_ns"]
    return 100.0 * s["overhead_cpu_ns"] / cpu if cpu else float("nan")

for rep in range(reps):
    for w, cmd in ways.items():
        d = os.path.join(tmp, "%s-%d" % (w, rep))
        os.makedirs(d)
        t0 = os.times().elapsed
        p = subprocess.Popen(cmd(d), stdout=subprocess.DEVNULL, stderr=subprocess.PIPE)
        err = p.stderr.read().decode(errors="replace")
        _, status, ru = os.wait4(p.pid, 0)
        wall = os.times().elapsed - t0
        if status:
            raise SystemExit("%s: exit status %d" % (w, status))
        disk = sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))
        files = len([f for f in os.listdir(d) if f.endswith(".pb.gz")])
        m = re.search(r"made with ([0-9.]+) (ns|us|ms|s) of fennec record's CPU", err)
        reading = float(m.group(1)) * UNIT[m.group(2)] if m else 0.0
        share = own_share(os.path.join(d, "recording.fnc" if w == "continuous" else "r.fnc")) \
            if w in ("continuous", "default") else float("nan")
        got[w].append((wall, ru.ru_utime + ru.ru_stime, disk, files, share, reading))
        shutil.rmtree(d)
med = {w: [statistics.median(x[i] for x in v) for i in range(6)] for w, v in got.items()}
spread = {w: (min(x[0] for x in v), max(x[0] for x in v)) for w, v in got.items()}
a = med["alone"]
rows = ["way\twall_s\tcpu_s\tdisk_bytes\tpprof_files\twall_ratio\tcpu_ratio\tfennec_share_pct\treading_cpu_s"]
print("torch_train.py --steps %s, %d repetitions, medians; ratios to alone" % (steps, reps))
print("%-11s %8s %15s %8s %10s %6s %7s %7s %8s %9s" % ("way", "wall s", "[min, max]", "CPU s", "disk", "pprof",
                                                     "wall x", "CPU x", "fennec %", "reading s"))
for w, (wall, cpu, disk, files, share, reading) in med.items():
    print("%-11s %8.2f  [%5.2f, %5.2f] %8.2f %9.1fK %6d %7.3f %7.3f %8.2f %9.3f" % (
        w, wall, spread[w][0], spread[w][1], cpu, disk / 1024, files, wall / a[0], cpu / a[1], share, reading))
    rows.append("%s\t%.3f\t%.3f\t%d\t%d\t%.4f\t%.4f\t%.3f\t%.4f" % (w, wall, cpu, disk, files, wall / a[0],
                                                                   cpu / a[1], share, reading))
open(os.environ["OUT"], "w").write("\n".join(rows) + "\n")
shutil.rmtree(tmp)
PY

#!/usr/bin/env bash
# bench/soak.sh - a long run's memory and disk under fennec: examples/torch_train.py (Debian's
# python3-torch, CPU) trained for DURATION seconds in each way below, one after another; every
# EVERY seconds the training process's resident memory (VmRSS) and the recording's bytes on
# disk are read. Ways:
#   alone        the program without fennec: the curve the others are compared with
#   default      fennec record (999 Hz, sampled heap): the recording grows with the run
#   capped       fennec record --max-size 1M --memory off: the disk stays under the cap
#   continuous   fennec record --continuous DIR --interval 30s: capped, a pprof file a step
# Prints, per way, RSS and disk at each reading, then the trend of RSS after warm-up (a
# quarter in; a least-squares slope, KiB per minute) beside alone's, and the disk at the end.
# Usage: bench/soak.sh [results_dir]   (env: DURATION, default 600; EVERY, default 30; WAYS)
set -euo pipefail
. "$(dirname "$0")/paths.sh"
mkdir -p "$results"
(cd "$root" && make -s -j"$(nproc)" cli lib)
PY=/usr/bin/python3
"$PY" -c "import torch" 2>/dev/null || { echo "bench/soak.sh: needs Debian's python3-torch" >&2; exit 1; }
DURATION=${DURATION:-600} EVERY=${EVERY:-30} WAYS=${WAYS:-"alone default capped continuous"} FENNEC="$FENNEC" \
PY="$PY" TRAIN="$root/examples/torch_train.py" OUT="$results/soak.tsv" python3 - <<'PY'
import os, shutil, signal, subprocess, tempfile, time
fennec, py, train = os.environ["FENNEC"], os.environ["PY"], os.environ["TRAIN"]
duration, every = float(os.environ["DURATION"]), float(os.environ["EVERY"])
tmp = tempfile.mkdtemp(prefix="fennec-soak-")
prog = [py, train, "--steps", "100000000", "--images", "4096"]
ways = {
    "alone": lambda d: prog,
    "default": lambda d: [fennec, "record", "-q", "-o", os.path.join(d, "r.fnc"), "--"] + prog,
    "capped": lambda d: [fennec, "record", "-q", "--max-size", "1M", "--memory", "off", "-o",
                         os.path.join(d, "r.fnc"), "--"] + prog,
    "continuous": lambda d: [fennec, "record", "-q", "--continuous", d, "--interval", "30s", "--"] + prog,
}


def rss_kib(pid):
    try:
        for line in open("/proc/%d/status" % pid):
            if line.startswith("VmRSS:"):
                return int(line.split()[1])
    except OSError:
        pass
    return None


def trainer(pid):
    """The python process: pid itself, or fennec record's child."""
    if os.path.basename(os.readlink("/proc/%d/exe" % pid)).startswith("python"):
        return pid
    for t in os.listdir("/proc/%d/task" % pid):
        kids = open("/proc/%d/task/%s/children" % (pid, t)).read().split()
        if kids:
            return int(kids[0])
    return None


def disk(d):
    return sum(os.path.getsize(os.path.join(d, f)) for f in os.listdir(d))


rows = ["way\tt_s\trss_kib\tdisk_bytes"]
summary = []
for w in os.environ["WAYS"].split():
    d = os.path.join(tmp, w)
    os.makedirs(d)
    p = subprocess.Popen(ways[w](d), stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, start_new_session=True)
    t0 = time.monotonic()
    time.sleep(3)
    pid = trainer(p.pid)
    readings = []
    while time.monotonic() - t0 < duration:
        time.sleep(every - (time.monotonic() - t0) % every)
        r = rss_kib(pid) if pid else None
        readings.append((time.monotonic() - t0, r, disk(d)))
        rows.append("%s\t%.0f\t%s\t%d" % (w, readings[-1][0], r, readings[-1][2]))
    os.killpg(p.pid, signal.SIGINT)
    try:
        p.wait(timeout=30)
    except subprocess.TimeoutExpired:
        os.killpg(p.pid, signal.SIGKILL)
        p.wait()
    print("%s: t (s), RSS (MiB), disk (KiB)" % w)
    print("  " + "  ".join("%.0f:%.1f/%.0f" % (t, (r or 0) / 1024, b / 1024) for t, r, b in readings))
    warm = [x for x in readings if x[0] >= duration / 4 and x[1]]
    # least squares over the readings after warm-up: torch's allocator moves RSS by MiBs
    # between two readings, so two points would measure that, not a trend
    if len(warm) > 1:
        mt = sum(x[0] for x in warm) / len(warm)
        mr = sum(x[1] for x in warm) / len(warm)
        slope = 60 * sum((x[0] - mt) * (x[1] - mr) for x in warm) / sum((x[0] - mt) ** 2 for x in warm)
    else:
        slope = float("nan")
    summary.append((w, warm[0][1] if warm else 0, warm[-1][1] if warm else 0, slope, readings[-1][2]))
    shutil.rmtree(d)
print()
print("%-11s %12s %12s %14s %12s" % ("way", "RSS warm KiB", "RSS end KiB", "growth KiB/min", "disk end KiB"))
for w, a, b, s, dk in summary:
    print("%-11s %12d %12d %14.1f %12.0f" % (w, a, b, s, dk / 1024))
open(os.environ["OUT"], "w").write("\n".join(rows) + "\n")
shutil.rmtree(tmp)
PY

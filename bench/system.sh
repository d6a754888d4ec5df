#!/bin/bash
# bench/system.sh - what the system sampler costs (bench/README.md, "system"): a program that
# burns 2 s of CPU (tests/fixtures/sys_load cpu) recorded with the sampler off, at its
# default period and at 20 ms, N runs each (interleaved); per setting the medians of the
# points taken, fennec's own CPU (collector_cpu_ns: the writer thread, where the sampler
# runs; FENNEC_WRITER=thread, as a session without CPU sampling would otherwise have no
# writer thread) and the program's wall time; then the CPU each point costs, from the difference to
# the runs without the sampler. Usage: bench/system.sh [RESULTS_DIR] [RUNS]
set -eu
source "$(dirname "$0")/paths.sh"
runs=${2:-5}
prog=$B/fixtures/sys_load
[ -x "$prog" ] || { echo "bench/system.sh: $prog missing: make all" >&2; exit 1; }
mkdir -p "$results"
tmp=$(mktemp -d)
trap 'rm -rf "$tmp"' EXIT
out=$results/system.tsv
echo -e "setting\trun\tpoints\tcollector_cpu_ns\twall_ns" > "$out"
for r in $(seq "$runs"); do
	for ms in 0 200 20; do
		FENNEC_WRITER=thread "$FENNEC" record -q --sample off --memory off --system-interval "$ms" -o "$tmp/r.fnc" -- "$prog" cpu 2000 > /dev/null
		"$FENNEC" analyze "$tmp/r.fnc" --format json 2>/dev/null | python3 -c '
import json, sys
d = json.load(sys.stdin)
s = d["system"]
pts = len(s["processes"][0]["timeline"]) + 1 if s else 0
print("%s\t%s\t%d\t%d\t%d" % (sys.argv[1], sys.argv[2], pts, d["summary"]["collector_cpu_ns"], d["summary"]["wall_ns"]))
' "$ms" "$r" >> "$out"
		rm -f "$tmp"/r.fnc*
	done
done
python3 - "$out" <<'PY'
import statistics, sys
rows = [l.rstrip("\n").split("\t") for l in open(sys.argv[1])][1:]
med = {}
for ms in ("0", "200", "20"):
    rs = [r for r in rows if r[0] == ms]
    med[ms] = [statistics.median(int(r[k]) for r in rs) for k in (2, 3, 4)]
print("%-22s %8s %16s %12s %14s" % ("system sampler", "points", "fennec CPU ms", "wall ms", "us per point"))
for ms, label in (("0", "off"), ("200", "every 200 ms (default)"), ("20", "every 20 ms")):
    p, c, w = med[ms]
    per = (c - med["0"][1]) / (p - med["0"][0]) / 1e3 if ms != "0" and p > med["0"][0] else float("nan")
    print("%-22s %8d %16.2f %12.1f %14.1f" % (label, p, c / 1e6, w / 1e6, per))
PY

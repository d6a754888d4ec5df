#!/usr/bin/env bash
# bench/sampling.sh - the cost of CPU sampling with call stacks, fennec beside its peers, in
# one run: slowdown of two workloads (build/bench/work_calls: deep recursion and many small
# functions; build/bench/work_compute: a matrix multiply) under
#   fennec      fennec record -F HZ --memory off (cpu mode, the ring source, 128 frames;
#               heap profiling, on by default, has its own benchmark: memory.sh)
#   fennec-libunwind  the same with FENNEC_CFI=0 (every sample unwound by libunwind, not by
#               fennec's cached DWARF rules, src/collect/cfi.c)
#   fennec-signal  the same with FENNEC_SAMPLE_SOURCE=signal (a signal per sample, the
#               stack taken in the handler: the fallback source)
#   perf-fp     perf record -F HZ -g               (frame pointers: Debian's libc has none)
#   perf-dwarf  perf record -F HZ --call-graph dwarf (copies 8 KiB of stack per sample)
#   gperftools  LD_PRELOAD=libprofiler.so CPUPROFILE_FREQUENCY=HZ (setitimer: ~250/s here)
# against the unprofiled program, as ratios. Time is taken in-process (the workload prints
# the CLOCK_MONOTONIC and the process CPU time of its work: the CPU time includes what the
# profiler does inside the process, its signal handlers and threads, and is robust against
# other load on the machine) and end to end (the whole command, with the profiler's
# start-up and write-out: wall time, and the CPU time of all its processes, the perf tool
# included, from /usr/bin/time). Each repetition runs every variant, in a rotated order;
# cells are the median ratio over the repetitions with [min, max]. Also: samples in each
# profile per second of in-process CPU time, frames per sample (what each profiler's stacks
# hold: perf -g needs frame pointers, so the Makefile builds the workloads with them),
# profile size, and the time to turn a profile into a text report (fennec analyze, perf
# report --stdio, google-pprof --text), median of 3. A last table sets fennec's in-process
# CPU against each other profiler's within the same repetition.
# perf runs with --no-bpf-event (PERF_OPTS): without it, perf spends about 1 s at exit here
# scanning BPF programs, which would swamp the end-to-end columns.
# Usage: bench/sampling.sh [results_dir]
#   env: REPS (default 5), SCALE (workload size, default 10: ~1.5 s each), HZ (default 999),
#        WORKLOADS (default "work_calls work_compute"), PERF_OPTS (default --no-bpf-event),
#        VARIANTS (a subset of: base fennec fennec-libunwind fennec-signal perf-fp
#        perf-dwarf gperftools; default all that are installed),
#        FENNEC_BUILD (default build), KEEP=1 keeps the profiles.
# Writes <results_dir>/sampling.tsv (one line per run) and prints one table.
set -euo pipefail
. "$(dirname "$0")/paths.sh"
REPS=${REPS:-5}
SCALE=${SCALE:-10}
HZ=${HZ:-999}
WORKLOADS=${WORKLOADS:-work_calls work_compute}
PERF_OPTS=${PERF_OPTS:---no-bpf-event}
LIBPROFILER=${LIBPROFILER:-$(ls /usr/lib/*/libprofiler.so 2>/dev/null | head -1 || true)}
mkdir -p "$results"
for w in $WORKLOADS; do
	[ -x "$B/bench/$w" ] || { echo "sampling: $B/bench/$w missing; run 'make bench'" >&2; exit 1; }
done
for f in "$FENNEC" /usr/bin/time; do
	[ -x "$f" ] || { echo "sampling: $f missing; run 'make bench' (and make deps)" >&2; exit 1; }
done
have_perf=0
command -v perf >/dev/null && perf record -q -o /dev/null -- true >/dev/null 2>&1 && have_perf=1
have_gperf=0
[ -n "$LIBPROFILER" ] && [ -f "$LIBPROFILER" ] && have_gperf=1
tmp=$(mktemp -d /tmp/fennec-bench-smp.XXXXXX)
if [ "${KEEP:-0}" = 1 ]; then echo "keeping $tmp"; else trap 'rm -rf "$tmp"' EXIT; fi

variants=(base fennec fennec-libunwind fennec-signal)
if [ $have_perf = 1 ]; then variants+=(perf-fp perf-dwarf); else echo "sampling: perf unusable here; skipped" >&2; fi
if [ $have_gperf = 1 ]; then variants+=(gperftools); else echo "sampling: libprofiler.so not found (apt-get install libgoogle-perftools-dev); skipped" >&2; fi
if [ -n "${VARIANTS:-}" ]; then # a subset, e.g. VARIANTS="base fennec perf-fp"
	keep=()
	for v in "${variants[@]}"; do [[ " $VARIANTS " == *" $v "* ]] && keep+=("$v"); done
	variants=("${keep[@]}")
fi

# Samples in a gperftools CPU profile (legacy format: 64-bit words; header 0 3 0 period 0,
# then records count depth pc*depth, ending with the record 0 1 0); with "frames", the mean
# depth of a sample instead.
gperf_samples() {
	python3 - "$1" "${2:-}" <<'PY'
import struct, sys
d = open(sys.argv[1], "rb").read()
w = lambda i: struct.unpack_from("<Q", d, 8 * i)[0]
i, n, f = 5, 0, 0
while 8 * (i + 2) <= len(d):
    count, depth = w(i), w(i + 1)
    if count == 0 and depth == 1:
        break
    n += count
    f += count * depth
    i += 2 + depth
print("%.1f" % (f / n) if sys.argv[2] == "frames" and n else n)
PY
}

# run_one VARIANT WORKLOAD PROFILE: runs once; prints
# "inproc_ns inproc_cpu_ns e2e_ns e2e_cpu_ns" (NA where unknown)
run_one() {
	local v=$1 w=$2 prof=$3 exe=$B/bench/$2 out t0 t1 tm=$tmp/time.txt
	local T=(/usr/bin/time -f '%U %S' -o "$tm")
	rm -f "$prof" "$prof".* "$tm"
	t0=$(date +%s%N)
	if ! case $v in
	base) out=$("${T[@]}" "$exe" "$SCALE") ;;
	fennec) out=$("${T[@]}" "$FENNEC" record -q -F "$HZ" --memory off -o "$prof" -- "$exe" "$SCALE") ;;
	fennec-libunwind) out=$("${T[@]}" env FENNEC_CFI=0 "$FENNEC" record -q -F "$HZ" --memory off -o "$prof" -- "$exe" "$SCALE") ;;
	fennec-signal) out=$("${T[@]}" env FENNEC_SAMPLE_SOURCE=signal "$FENNEC" record -q -F "$HZ" --memory off -o "$prof" -- "$exe" "$SCALE") ;;
	perf-fp) out=$("${T[@]}" perf record -q $PERF_OPTS -F "$HZ" -g -o "$prof" -- "$exe" "$SCALE" 2>/dev/null) ;;
	perf-dwarf) out=$("${T[@]}" perf record -q $PERF_OPTS -F "$HZ" --call-graph dwarf -o "$prof" -- "$exe" "$SCALE" 2>/dev/null) ;;
	gperftools) out=$("${T[@]}" env LD_PRELOAD="$LIBPROFILER" CPUPROFILE="$prof" CPUPROFILE_FREQUENCY="$HZ" "$exe" "$SCALE" 2>/dev/null) ;;
	esac; then
		echo "sampling: $v $w failed" >&2
		echo "NA NA NA NA"
		return
	fi
	t1=$(date +%s%N)
	local ns cns ecpu
	ns=$(sed -n 's/.*elapsed_ns=\([0-9]*\).*/\1/p' <<<"$out")
	cns=$(sed -n 's/.* cpu_ns=\([0-9]*\).*/\1/p' <<<"$out")
	ecpu=$(awk 'NF == 2 { printf "%.0f", ($1 + $2) * 1e9 }' "$tm" 2>/dev/null || true)
	echo "${ns:-NA} ${cns:-NA} $((t1 - t0)) ${ecpu:-NA}"
}

# samples_of VARIANT PROFILE: samples in the profile ("NA" if it cannot tell)
samples_of() {
	case $1 in
	base) echo 0 ;;
	fennec*) "$FENNEC" analyze "$2" --format json 2>/dev/null | jq -r '.samples.count // "NA"' 2>/dev/null || echo NA ;;
	perf-*) perf report -i "$2" --stats 2>/dev/null | awk '/SAMPLE events:/ { print $3; exit }' | grep . || echo NA ;;
	gperftools) gperf_samples "$2" 2>/dev/null || echo NA ;;
	esac
}

# frames_of VARIANT WORKLOAD PROFILE: mean frames per sample, as each profiler's own tool
# lists them (fennec: its folded stacks, inline functions included; perf: perf script, for
# DWARF mode after its unwinding; gperftools: the stored depth); "NA" if it cannot tell
frames_of() {
	case $1 in
	fennec*) "$FENNEC" export "$3" --format folded 2>/dev/null |
		awk '{ c = $NF; n += c; f += c * split($1, a, ";") } END { if (n) printf "%.1f", f / n; else print "NA" }' ;;
	perf-*) perf script -i "$3" -F ip 2>/dev/null |
		awk 'NF == 0 { if (k) { n++; f += k }; k = 0; next } { k++ } END { if (k) { n++; f += k }; if (n) printf "%.1f", f / n; else print "NA" }' ;;
	gperftools) gperf_samples "$3" frames 2>/dev/null || echo NA ;;
	*) echo NA ;;
	esac
}

# writer_pct_of VARIANT PROFILE: fennec's writer thread's share of the process's CPU, % (the
# recording's summary.collector_cpu_ns); NA for the others, whose work is in another process
writer_pct_of() {
	case $1 in
	fennec*) "$FENNEC" analyze "$2" --format json 2>/dev/null | jq -r '.summary.collector_cpu_pct // "NA"' 2>/dev/null || echo NA ;;
	*) echo NA ;;
	esac
}

bytes_of() {
	local total=0 f
	for f in "$1" "$1".*; do
		[ -f "$f" ] && total=$((total + $(stat -c %s "$f")))
	done
	echo "$total"
}

# analysis_s VARIANT WORKLOAD PROFILE: median of 3 timings of a text report, seconds
analysis_s() {
	local v=$1 exe=$B/bench/$2 prof=$3 t0 t1 times=()
	for _ in 1 2 3; do
		t0=$(date +%s%N)
		case $v in
		fennec*) "$FENNEC" analyze "$prof" -o /dev/null >/dev/null 2>&1 || true ;;
		perf-*) perf report -i "$prof" --stdio >/dev/null 2>&1 || true ;;
		gperftools) google-pprof --text "$exe" "$prof" >/dev/null 2>&1 || true ;;
		esac
		t1=$(date +%s%N)
		times+=("$((t1 - t0))")
	done
	printf '%s\n' "${times[@]}" | sort -n | sed -n 2p | awk '{ printf "%.3f", $1 / 1e9 }'
}

tsv=$results/sampling.tsv
printf 'workload\trep\tvariant\tinproc_ns\tinproc_cpu_ns\te2e_ns\te2e_cpu_ns\tsamples\tbytes\tanalysis_s\twriter_pct\tframes\n' >"$tsv"
echo "fennec sampling: $REPS repetitions x ${#variants[@]} variants x {$WORKLOADS}, -F $HZ, scale $SCALE"
nv=${#variants[@]}
for w in $WORKLOADS; do
	for rep in $(seq "$REPS"); do
		for k in $(seq 0 $((nv - 1))); do
			v=${variants[$(((k + rep) % nv))]}
			prof=$tmp/$w.$v.prof
			read -r inproc inproc_cpu e2e e2e_cpu < <(run_one "$v" "$w" "$prof")
			samples=NA bytes=NA an=NA wpct=NA frames=NA
			if [ "$e2e" != NA ] && [ "$v" != base ]; then
				samples=$(samples_of "$v" "$prof")
				wpct=$(writer_pct_of "$v" "$prof")
				bytes=$(bytes_of "$prof")
				if [ "$rep" = "$REPS" ]; then
					an=$(analysis_s "$v" "$w" "$prof")
					frames=$(frames_of "$v" "$w" "$prof")
				fi
			fi
			printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$w" "$rep" "$v" "$inproc" "$inproc_cpu" "$e2e" "$e2e_cpu" "$samples" "$bytes" "$an" "$wpct" "$frames" >>"$tsv"
		done
		echo "  $w: repetition $rep done"
	done
done

python3 - "$tsv" "$HZ" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
hz = sys.argv[2]
num = lambda s: None if s in (None, "", "NA") else float(s)
order = ["base", "fennec", "fennec-libunwind", "fennec-signal", "perf-fp", "perf-dwarf", "gperftools"]
label = {"base": "unprofiled", "fennec": "fennec -F %s" % hz,
         "fennec-libunwind": "fennec (libunwind) -F %s" % hz,
         "fennec-signal": "fennec (signal) -F %s" % hz, "perf-fp": "perf -F %s -g" % hz,
         "perf-dwarf": "perf -F %s --call-graph dwarf" % hz,
         "gperftools": "gperftools, CPUPROFILE_FREQUENCY=%s" % hz}
TIMES = ["inproc_ns", "inproc_cpu_ns", "e2e_ns", "e2e_cpu_ns"]
med = lambda x: statistics.median(x) if x else None

def cell(vals, fmt="%.3f"):
    vals = [v for v in vals if v is not None]
    if not vals:
        return "NA"
    return (fmt + " [" + fmt + ", " + fmt + "]") % (med(vals), min(vals), max(vals))

print()
print("| workload | profiler | in-process wall | in-process CPU | end-to-end wall | end-to-end CPU "
      "| samples | samples / CPU s | frames / sample | profile bytes | bytes / sample | text report s |")
print("|---|---|---|---|---|---|---|---|---|---|---|---|")
for w in dict.fromkeys(r["workload"] for r in rows):
    base = {r["rep"]: r for r in rows if r["workload"] == w and r["variant"] == "base"}
    for v in order:
        rs = [r for r in rows if r["workload"] == w and r["variant"] == v]
        if not rs:
            continue
        if v == "base":
            cells = [cell([num(r[k]) / 1e9 for r in rs if num(r[k])], "%.2f") + " s"
                     for k in TIMES]
            print("| %s | %s | %s | | | | | | |" % (w, label[v], " | ".join(cells)))
            continue
        ratios = {k: [] for k in TIMES}
        sm, rate, by = [], [], []
        for r in rs:
            b = base.get(r["rep"])
            for k in TIMES:
                if b and num(r[k]) and num(b[k]):
                    ratios[k].append(num(r[k]) / num(b[k]))
            s = num(r["samples"])
            if s is not None:
                sm.append(s)
                if num(r["inproc_cpu_ns"]):
                    rate.append(s / (num(r["inproc_cpu_ns"]) / 1e9))
            if num(r["bytes"]) is not None:
                by.append(num(r["bytes"]))
        an = [num(r["analysis_s"]) for r in rs if num(r["analysis_s"]) is not None]
        fr = [num(r.get("frames")) for r in rs if num(r.get("frames")) is not None]
        s_med, b_med = med(sm), med(by)
        print("| %s | %s | %s | %s | %s | %s | %s | %s | %s |" % (
            w, label[v], " | ".join(cell(ratios[k]) for k in TIMES),
            "%d" % s_med if s_med is not None else "NA",
            "%.0f" % med(rate) if rate else "NA",
            "%.1f" % fr[0] if fr else "NA",
            "{:,.0f}".format(b_med) if b_med is not None else "NA",
            "%.1f" % (b_med / s_med) if s_med and b_med is not None else "NA",
            "%.3f" % an[0] if an else "NA"))
print()
print("time columns: profiled / unprofiled in the same repetition, median [min, max] over %d "
      "repetitions (unprofiled rows: seconds)" % len({r["rep"] for r in rows}))
print("in-process: the workload's own clocks around its work (CPU: all its threads);")
print("end-to-end: the whole command; its CPU is that of all its processes (/usr/bin/time), the perf tool included")
print("samples / CPU s: samples in the profile per second of in-process CPU time (median); text report: median of 3")
print("frames / sample: mean stack depth in the last repetition's profile, as the profiler's own tool lists it")

# Where fennec's in-process cost goes: its writer thread (its recording's collector_cpu_ns,
# measured by the thread's own CPU clock, so this machine's noise does not move it) and the
# rest, on the program's threads (the kernel's sample, a signal handler). perf and
# gperftools do their writing in another process or in the handler: their in-process CPU
# ratio is all on the program's side.
print()
print("| workload | profiler | writer, % of process CPU | in-process CPU ratio | fastest run | fastest run less the writer |")
print("|---|---|---|---|---|---|")
for w in dict.fromkeys(r["workload"] for r in rows):
    bases = [num(r["inproc_cpu_ns"]) for r in rows if r["workload"] == w and r["variant"] == "base" and num(r["inproc_cpu_ns"])]
    if not bases:
        continue
    fastest_base = min(bases)
    for v in order[1:]:
        rs = [r for r in rows if r["workload"] == w and r["variant"] == v and num(r["inproc_cpu_ns"])]
        if not rs:
            continue
        wp = [num(r["writer_pct"]) for r in rs if num(r["writer_pct"]) is not None]
        base = {r["rep"]: num(r["inproc_cpu_ns"]) for r in rows if r["workload"] == w and r["variant"] == "base"}
        ratios = [num(r["inproc_cpu_ns"]) / base[r["rep"]] for r in rs if base.get(r["rep"])]
        fast = min(rs, key=lambda r: num(r["inproc_cpu_ns"]))
        f = num(fast["inproc_cpu_ns"]) / fastest_base
        fw = num(fast["writer_pct"])
        print("| %s | %s | %s | %s | %.3f | %s |" % (
            w, label[v], cell(wp, "%.2f") if wp else "(in its handler)" if v == "gperftools" else "(another process)", cell(ratios),
            f, "%.3f" % (f * (1 - fw / 100)) if fw is not None else "%.3f" % f))
print()
print("fastest run: the variant's fastest in-process CPU over the fastest unprofiled one (noise only adds);")
print("less the writer: that run's CPU without its writer thread's, over the same: the cost on the program's threads")

# fennec against each peer within a repetition: the two runs of a repetition share the
# machine's state of the moment, so their ratio is steadier than either's to the base.
peers = [v for v in order if v not in ("base", "fennec")]
table = []
for w in dict.fromkeys(r["workload"] for r in rows):
    fen = {r["rep"]: num(r["inproc_cpu_ns"]) for r in rows if r["workload"] == w and r["variant"] == "fennec" and num(r["inproc_cpu_ns"])}
    for v in peers:
        other = {r["rep"]: num(r["inproc_cpu_ns"]) for r in rows if r["workload"] == w and r["variant"] == v and num(r["inproc_cpu_ns"])}
        pairs = [fen[k] / other[k] for k in fen if k in other]
        if pairs:
            table.append((w, v, pairs))
if table:
    print()
    print("| workload | fennec -F %s against | in-process CPU, fennec / it, same repetition: median [min, max] | fennec cheaper in |" % hz)
    print("|---|---|---|---|")
    for w, v, pairs in table:
        print("| %s | %s | %s | %d of %d |" % (w, label[v], cell(pairs), sum(p < 1 for p in pairs), len(pairs)))
PY
echo "wrote $tsv"

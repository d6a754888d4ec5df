#!/usr/bin/env bash
# bench/memory.sh - the cost of heap profiling, fennec beside its peers, in one run: three
# allocation-heavy workloads (bench/work_alloc.c: mixed malloc/free against a live set,
# realloc chains, two threads freeing each other's blocks) and two real programs (jq, from
# Debian, filtering and grouping a generated JSON document: millions of small allocations
# by an allocator-heavy interpreter, from a few stacks; cc1plus, GCC's C++ compiler,
# compiling a generated file: allocations from thousands of stacks) run unprofiled and under
#   fennec-off      fennec record --sample off --memory=off      (interposed counters only)
#   fennec-sampled  fennec record --sample off --memory=sampled  (counters + Poisson-sampled stacks)
#   fennec-thread   the same with FENNEC_WRITER=thread: the writer thread from the start, as
#                   before the lazy writer (docs/internals/collect.md); only when VARIANTS
#                   names it
#   fennec-full     fennec record --sample off --memory=full     (every allocation and free, stacks)
#   heaptrack       heaptrack -o FILE                            (every call, stacks)
#   massif          valgrind --tool=massif                       (snapshots of the heap tree)
#   tcmalloc        LD_PRELOAD=libtcmalloc.so                    (no profile: the allocator
#                                                                 gperftools' profiler runs on)
#   gperftools      LD_PRELOAD=libtcmalloc.so HEAPPROFILE=FILE   (every allocation's stack in a
#                                                                 table; a dump per GiB allocated)
# as ratios to the unprofiled run of the same repetition: the workload's own wall and CPU
# clocks around its work (in-process), the whole command's wall and CPU time (end to end,
# /usr/bin/time, with the profiler's start-up, write-out and helper processes), the
# workload's peak RSS (getrusage in the profiled process: what the profiler adds inside it),
# the largest process of the command (/usr/bin/time %M: heaptrack_interpret, valgrind), and
# the size of what each profiler wrote. Each repetition runs every variant in a rotated
# order; cells are medians over the repetitions with [min, max]. A second table gives each
# profiler's fastest run over the fastest unprofiled run (CPU, in-process and end to end):
# noise on a shared machine only adds time, so it moves less than the medians.
# Then fennec's numbers (fennec analyze --format json) beside the counts the workload itself
# made: allocations, frees, requested bytes and the peak of requested live bytes.
#
# The workload is compiled here without libfennec (a program linked with -lfennec gets
# fennec's malloc even unprofiled): every variant runs that one binary.
# Usage: bench/memory.sh [results_dir]
#   env: REPS (default 3), SCALE (default 10: 0.1-0.2 s of CPU per workload natively; jq's
#        document has 5,000 x SCALE records, 0.4 s; cc1plus compiles SCALE functions,
#        0.9 s), WORKLOADS (default "mixed realloc threads jq cc1plus"), VARIANTS (default:
#        all found),
#        FENNEC_BUILD (default build), KEEP=1 keeps the profiles.
# Needs: heaptrack, valgrind, libgoogle-perftools-dev (libtcmalloc.so), jq, g++, /usr/bin/time;
# a variant whose tool is missing is left out with a message.
# Writes <results_dir>/memory.tsv (one line per run) and prints the tables.
set -euo pipefail
. "$(dirname "$0")/paths.sh"
REPS=${REPS:-3}
SCALE=${SCALE:-10}
WORKLOADS=${WORKLOADS:-mixed realloc threads jq cc1plus}
TCMALLOC=${TCMALLOC:-$(ls /usr/lib/*/libtcmalloc.so 2>/dev/null | head -1 || true)}
mkdir -p "$results"
for f in "$FENNEC" /usr/bin/time; do
	[ -x "$f" ] || { echo "memory: $f missing; run 'make' (and make deps)" >&2; exit 1; }
done
command -v jq >/dev/null || { echo "memory: jq missing (apt-get install jq)" >&2; exit 1; }
tmp=$(mktemp -d /tmp/fennec-bench-mem.XXXXXX)
if [ "${KEEP:-0}" = 1 ]; then echo "keeping $tmp"; else trap 'rm -rf "$tmp"' EXIT; fi
exe=$tmp/work_alloc
${CC:-cc} -std=gnu11 -O2 -g -D_GNU_SOURCE "$root/bench/work_alloc.c" -o "$exe" -lpthread

# The real program: jq over a document of 5,000 x SCALE records (fixed seed). It has no
# clocks of its own: its rows have end-to-end columns only.
JQ_FILTER='[.[] | select(.score > 0.3) | {id, name, city: .address.city, n: (.tags | length)}]
	| group_by(.city) | map({city: .[0].city, n: length, tags: (map(.n) | add)})'
if [[ " $WORKLOADS " == *" jq "* ]]; then
	python3 - "$tmp/data.json" $((5000 * SCALE)) <<'PY'
import json, random, sys
r = random.Random(7)
json.dump([{"id": i, "name": "user%d" % i, "email": "u%d@example.org" % i, "score": round(r.random(), 4),
            "tags": [r.choice(["a", "bb", "ccc", "dddd", "e"]) for _ in range(r.randint(0, 6))],
            "address": {"city": r.choice(["Oslo", "Lima", "Pune", "Kyiv"]), "zip": "%05d" % r.randint(0, 99999)}}
           for i in range(int(sys.argv[2]))], open(sys.argv[1], "w"))
PY
fi

# A second real program: GCC's C++ compiler proper (cc1plus, from g++, which the build
# needs anyway) compiling a generated translation unit of SCALE functions over the
# standard containers, preprocessed once here. Its allocations come from thousands of
# distinct stacks (parser, templates, optimiser), unlike jq's few: the case for the cost of
# unwinding new stacks.
CC1=
if [[ " $WORKLOADS " == *" cc1plus "* ]]; then
	CC1=$(${CXX:-g++} -print-prog-name=cc1plus 2>/dev/null || true)
	[ -x "$CC1" ] || { echo "memory: cc1plus not found (apt-get install g++)" >&2; exit 1; }
	{
		printf '#include <algorithm>\n#include <map>\n#include <string>\n#include <vector>\n'
		for i in $(seq "$SCALE"); do
			printf 'std::map<std::string, std::vector<int>> f%d(int n) {\n' "$i"
			printf '  std::map<std::string, std::vector<int>> m;\n'
			printf '  for (int k = 0; k < n; k++) m[std::to_string(k %% %d)].push_back(k * %d);\n' $((i + 2)) "$i"
			printf '  for (auto &e : m) std::sort(e.second.begin(), e.second.end(), [](int a, int b) { return a %% %d < b %% %d; });\n' $((i + 3)) $((i + 3))
			printf '  return m;\n}\n'
		done
	} >"$tmp/unit.cc"
	${CXX:-g++} -E "$tmp/unit.cc" -o "$tmp/unit.ii"
fi

if [ -n "${VARIANTS:-}" ]; then
	read -r -a variants <<<"$VARIANTS"
else
	variants=(base fennec-off fennec-sampled fennec-full)
	if command -v heaptrack >/dev/null; then variants+=(heaptrack); else echo "memory: heaptrack not found (apt-get install heaptrack); skipped" >&2; fi
	if command -v valgrind >/dev/null; then variants+=(massif); else echo "memory: valgrind not found (apt-get install valgrind); skipped" >&2; fi
	if [ -n "$TCMALLOC" ] && [ -f "$TCMALLOC" ]; then variants+=(tcmalloc gperftools); else echo "memory: libtcmalloc.so not found (apt-get install libgoogle-perftools-dev); skipped" >&2; fi
fi

# run_one VARIANT WORKLOAD PROFILE: runs once; prints the workload's line (key=value) with
# e2e_ns, e2e_cpu_ns and e2e_rss_kb added, or "failed"
run_one() {
	local v=$1 w=$2 prof=$3 out t0 t1 tm=$tmp/time.txt
	local T=(/usr/bin/time -f '%U %S %M' -o "$tm")
	local C=("$exe" "$w" "$SCALE")
	[ "$w" = jq ] && C=(jq -c "$JQ_FILTER" "$tmp/data.json")
	[ "$w" = cc1plus ] && C=("$CC1" -fpreprocessed "$tmp/unit.ii" -quiet -O2 -o "$tmp/unit.s")
	rm -rf "$prof" "$prof".* "$tm"
	t0=$(date +%s%N)
	if ! case $v in
	base) out=$("${T[@]}" "${C[@]}") ;;
	fennec-off) out=$("${T[@]}" "$FENNEC" record -q --sample off --memory=off -o "$prof" -- "${C[@]}") ;;
	fennec-sampled) out=$("${T[@]}" "$FENNEC" record -q --sample off --memory=sampled -o "$prof" -- "${C[@]}") ;;
	fennec-thread) out=$("${T[@]}" env FENNEC_WRITER=thread "$FENNEC" record -q --sample off --memory=sampled -o "$prof" -- "${C[@]}") ;;
	fennec-full) out=$("${T[@]}" "$FENNEC" record -q --sample off --memory=full -o "$prof" -- "${C[@]}") ;;
	heaptrack) out=$("${T[@]}" heaptrack -o "$prof" "${C[@]}" 2>/dev/null) ;;
	massif) out=$("${T[@]}" valgrind -q --tool=massif --massif-out-file="$prof" "${C[@]}" 2>/dev/null) ;;
	tcmalloc) out=$("${T[@]}" env LD_PRELOAD="$TCMALLOC" "${C[@]}" 2>/dev/null) ;;
	gperftools) out=$("${T[@]}" env LD_PRELOAD="$TCMALLOC" HEAPPROFILE="$prof" "${C[@]}" 2>/dev/null) ;;
	esac; then
		echo "memory: $v $w failed" >&2
		echo failed
		return
	fi
	t1=$(date +%s%N)
	local line
	if [ "$w" = jq ]; then
		# the same answer under every profiler: 4 groups
		[ "$(grep -m1 '^\[' <<<"$out" | jq length 2>/dev/null)" = 4 ] ||
			{ echo "memory: $v $w: wrong output" >&2; echo failed; return; }
		line=program=jq
	elif [ "$w" = cc1plus ]; then
		# the assembly of every function
		[ "$(grep -cE '^_Z[0-9]+f[0-9]+(B5cxx11)?i:' "$tmp/unit.s" 2>/dev/null)" = "$SCALE" ] ||
			{ echo "memory: $v $w: wrong output" >&2; echo failed; return; }
		rm -f "$tmp/unit.s"
		line=program=cc1plus
	else
		line=$(grep -m1 '^elapsed_ns=' <<<"$out" || true)
	fi
	[ -n "$line" ] || { echo "memory: $v $w printed no result" >&2; echo failed; return; }
	echo "$line e2e_ns=$((t1 - t0)) $(awk 'NF == 3 { printf "e2e_cpu_ns=%.0f e2e_rss_kb=%d", ($1 + $2) * 1e9, $3 }' "$tm")"
}

bytes_of() {
	local total=0 f
	for f in "$1" "$1".*; do
		[ -f "$f" ] && total=$((total + $(stat -c %s "$f")))
	done
	echo "$total"
}

# fennec's heap numbers: allocations frees allocated_bytes peak_bytes leaked_bytes
fennec_numbers() {
	"$FENNEC" analyze "$1" --format json 2>/dev/null |
		jq -r '.memory | if . == null then "NA NA NA NA NA" else
			"\(.allocations) \(.frees) \(.allocated_bytes) \(.peak_bytes) \(.leaked_bytes)" end' 2>/dev/null ||
		echo "NA NA NA NA NA"
}

kv() { sed -n "s/.*\\b$1=\\([0-9-]*\\).*/\\1/p" <<<"$2"; }

tsv=$results/memory.tsv
printf 'workload\trep\tvariant\tinproc_ns\tinproc_cpu_ns\te2e_ns\te2e_cpu_ns\trss_kb\te2e_rss_kb\tbytes\tallocs\tfrees\talloc_bytes\tpeak_bytes\tf_allocs\tf_frees\tf_alloc_bytes\tf_peak_bytes\tf_leaked_bytes\n' >"$tsv"
echo "fennec memory: $REPS repetitions x ${#variants[@]} variants x {$WORKLOADS}, scale $SCALE"
nv=${#variants[@]}
for w in $WORKLOADS; do
	for rep in $(seq "$REPS"); do
		for k in $(seq 0 $((nv - 1))); do
			v=${variants[$(((k + rep) % nv))]}
			prof=$tmp/$w.$v.prof
			line=$(run_one "$v" "$w" "$prof")
			[ "$line" = failed ] && continue
			bytes=NA
			fn="NA NA NA NA NA"
			if [ "$v" != base ] && [ "$v" != tcmalloc ]; then
				bytes=$(bytes_of "$prof")
				case $v in fennec-*) fn=$(fennec_numbers "$prof") ;; esac
			fi
			printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$w" "$rep" "$v" \
				"$(kv elapsed_ns "$line")" "$(kv cpu_ns "$line")" "$(kv e2e_ns "$line")" "$(kv e2e_cpu_ns "$line")" \
				"$(kv maxrss_kb "$line")" "$(kv e2e_rss_kb "$line")" "$bytes" "$(kv allocs "$line")" \
				"$(kv frees "$line")" "$(kv bytes "$line")" "$(kv peak_bytes "$line")" "${fn// /$'\t'}" >>"$tsv"
		done
		echo "  $w: repetition $rep done"
	done
done

python3 - "$tsv" <<'PY'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
num = lambda s: None if s in (None, "", "NA", "null") else float(s)
order = ["base", "fennec-off", "fennec-sampled", "fennec-thread", "fennec-full", "heaptrack", "massif", "tcmalloc", "gperftools"]
label = {"base": "unprofiled", "fennec-off": "fennec --memory=off", "fennec-sampled": "fennec --memory=sampled",
         "fennec-thread": "fennec --memory=sampled, FENNEC_WRITER=thread",
         "fennec-full": "fennec --memory=full", "heaptrack": "heaptrack", "massif": "valgrind --tool=massif",
         "tcmalloc": "tcmalloc, no profile", "gperftools": "gperftools HEAPPROFILE (tcmalloc)"}
RATIOS = ["inproc_ns", "inproc_cpu_ns", "e2e_ns", "e2e_cpu_ns", "rss_kb"]
med = statistics.median

def cell(vals, fmt="%.2f"):
    vals = [v for v in vals if v is not None]
    if not vals:
        return "NA"
    return (fmt + " [" + fmt + ", " + fmt + "]") % (med(vals), min(vals), max(vals))

print()
print("| workload | profiler | in-process wall | in-process CPU | end-to-end wall | end-to-end CPU "
      "| peak RSS (program) | largest process RSS | output bytes |")
print("|---|---|---|---|---|---|---|---|---|")
for w in dict.fromkeys(r["workload"] for r in rows):
    base = {r["rep"]: r for r in rows if r["workload"] == w and r["variant"] == "base"}
    for v in order:
        rs = [r for r in rows if r["workload"] == w and r["variant"] == v]
        if not rs:
            continue
        rss = [num(r["e2e_rss_kb"]) / 1024 for r in rs if num(r["e2e_rss_kb"])]
        if v == "base":
            unit = lambda c, u: c if c == "NA" else c + u
            cells = [unit(cell([num(r[k]) / 1e9 for r in rs if num(r[k])], "%.3f"), " s") for k in RATIOS[:4]]
            cells.append(unit(cell([num(r["rss_kb"]) / 1024 for r in rs if num(r["rss_kb"])], "%.1f"), " MiB"))
            print("| %s | %s | %s | %s | |" % (w, label[v], " | ".join(cells), cell(rss, "%.1f") + " MiB"))
            continue
        ratios = {k: [] for k in RATIOS}
        for r in rs:
            b = base.get(r["rep"])
            for k in RATIOS:
                if b and num(r[k]) and num(b[k]):
                    ratios[k].append(num(r[k]) / num(b[k]))
        by = [num(r["bytes"]) for r in rs if num(r["bytes"]) is not None]
        print("| %s | %s | %s | %s | %s |" % (
            w, label[v], " | ".join(cell(ratios[k]) for k in RATIOS), cell(rss, "%.1f") + " MiB",
            "{:,.0f}".format(med(by)) if by else "-"))
print()
print("ratios: profiled / unprofiled in the same repetition, median [min, max] over %d repetitions "
      "(unprofiled rows: seconds, MiB)" % len({r["rep"] for r in rows}))
print("in-process: the workload's clocks around its work and its own getrusage peak RSS; end-to-end: the "
      "whole command (/usr/bin/time), CPU of all its processes; largest process: /usr/bin/time %M")

# On a shared machine noise only adds time: each profiler's fastest run against the fastest
# unprofiled one is the steadier reading when the medians move between runs.
def fastest(vals):
    vals = [v for v in vals if v]
    return min(vals) if vals else None

# The per-repetition ratios' median, with a 95 % interval that assumes nothing of their
# distribution (the order statistics of ranks n/2 -+ 1.96 sqrt(n)/2): with REPS of 20 or
# more, whether a target such as "at most 1.15x" is met stands apart from the noise.
def median_ci(vals):
    vals = sorted(v for v in vals if v)
    n = len(vals)
    if n < 6:
        return "NA (%d repetitions)" % n
    half = 0.98 * n ** 0.5
    j, k = max(1, int(n / 2 - half)), min(n, -int(-(1 + n / 2 + half) // 1))
    return "%.3f [%.3f, %.3f]" % (med(vals), vals[j - 1], vals[k - 1])

def fastest_ratio(rs, base, k):
    a, b = fastest(num(r[k]) for r in rs), fastest(num(r[k]) for r in base.values())
    return "%.2f" % (a / b) if a and b else "NA"

def ratio_ci(rs, base, k):
    b = lambda r: base.get(r["rep"])
    return median_ci(num(r[k]) / num(b(r)[k]) for r in rs if b(r) and num(r[k]) and num(b(r)[k]))

# A table of each profiler's CPU (in-process, end to end) against the unprofiled runs.
def cpu_table(title, cell):
    print()
    print(title)
    print()
    print("| workload | profiler | in-process CPU | end-to-end CPU |")
    print("|---|---|---|---|")
    for w in dict.fromkeys(r["workload"] for r in rows):
        base = {r["rep"]: r for r in rows if r["workload"] == w and r["variant"] == "base"}
        for v in order[1:]:
            rs = [r for r in rows if r["workload"] == w and r["variant"] == v]
            if rs and base:
                print("| %s | %s | %s |" % (w, label[v], " | ".join(cell(rs, base, k) for k in ("inproc_cpu_ns", "e2e_cpu_ns"))))

cpu_table("fastest run of each profiler / fastest unprofiled run", fastest_ratio)
cpu_table("the ratio's median and its 95 % interval, over the repetitions", ratio_ci)

print()
print("fennec against the workload's own counts (last repetition; fennec counts the whole process: "
      "the C runtime's and the thread library's allocations too)")
print()
print("| workload | mode | allocations: workload / fennec | frees: workload / fennec | requested bytes: workload / fennec "
      "| peak live bytes: workload / fennec (error) | leaked bytes (fennec) |")
print("|---|---|---|---|---|---|---|")
for w in dict.fromkeys(r["workload"] for r in rows):
    for v in ("fennec-off", "fennec-sampled", "fennec-full"):
        rs = [r for r in rows if r["workload"] == w and r["variant"] == v]
        if not rs:
            continue
        r = rs[-1]
        def pair(a, b):
            x, y = num(r[a]), num(r[b])
            if x is None or y is None:
                return "NA"
            return "{:,.0f} / {:,.0f} ({:+,.0f})".format(x, y, y - x)
        x, y = num(r["peak_bytes"]), num(r["f_peak_bytes"])
        peak = "NA" if x is None or y is None else "{:,.0f} / {:,.0f} ({:+.2f} %)".format(x, y, 100 * (y - x) / x)
        lk = num(r["f_leaked_bytes"])
        print("| %s | %s | %s | %s | %s | %s | %s |" % (w, v.split("-")[1], pair("allocs", "f_allocs"),
              pair("frees", "f_frees"), pair("alloc_bytes", "f_alloc_bytes"), peak,
              "NA" if lk is None else "{:,.0f}".format(lk)))
print()
print("peak: full mode replays requested bytes; sampled and off report the interposer's counter of usable "
      "bytes (malloc_usable_size), a little above the requested sizes")
PY
echo "wrote $tsv"

#!/usr/bin/env bash
# bench/spawn.sh - what profiling costs a program made of many short processes (a shell
# script, a build): each process starts fennec's collector (its file, its writer thread,
# its sample rings, its heap state) and ends it. Two workloads:
#   shell  a bash loop that runs /bin/true N times (fork + exec; N = 100 x SCALE)
#   build  make -j2 compiling 10 x SCALE small C files with cc (cc, cc1, as, collect2, ld:
#          five processes a file, seconds of real work)
# run unprofiled and under
#   fennec-off      fennec record --sample off --memory=off   (the collector, nothing sampled)
#   fennec-cpu      fennec record --memory=off                (CPU sampling at 999 Hz)
#   fennec          fennec record                             (the default: CPU sampling and
#                                                              the sampled heap profile)
#   fennec-full     fennec record --memory=full
#   old             fennec record with the library OLD_LIB (when set: an A/B of a change)
#   perf            perf record -F 999 -g                     (follows children too)
# as ratios of the command's wall time to the unprofiled run of the same repetition, with
# the milliseconds each process costs (the added wall time over the processes the command
# ran, counted by fennec). Each repetition runs every variant in a rotated order; cells are
# medians over the repetitions with [min, max].
# Usage: bench/spawn.sh [results_dir]
#   env: REPS (default 5), SCALE (default 1), WORKLOADS (default "shell build"),
#        VARIANTS (default: all found), OLD_LIB, FENNEC_BUILD (default build)
# Writes <results_dir>/spawn.tsv (one line per run) and prints the table.
set -euo pipefail
. "$(dirname "$0")/paths.sh"
REPS=${REPS:-5}
SCALE=${SCALE:-1}
WORKLOADS=${WORKLOADS:-shell build}
mkdir -p "$results"
case $results in /*) ;; *) results=$PWD/$results ;; esac
[ -x "$FENNEC" ] || { echo "spawn: $FENNEC missing; run 'make'" >&2; exit 1; }
tmp=$(mktemp -d /tmp/fennec-bench-spawn.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

all="base fennec-off fennec-cpu fennec fennec-full"
[ -n "${OLD_LIB:-}" ] && all="$all old"
command -v perf >/dev/null && perf record -q -o /dev/null -- true 2>/dev/null && all="$all perf"
VARIANTS=${VARIANTS:-$all}

n=$((100 * SCALE))
printf 'for i in $(seq %d); do /bin/true; done\n' "$n" > "$tmp/loop.sh"
mkdir -p "$tmp/src"
files=$((10 * SCALE))
objs=""
for i in $(seq "$files"); do
	cat > "$tmp/src/f$i.c" <<EOF
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
struct rec$i { int id; double v[8]; char name[32]; };
static int cmp$i(const void *a, const void *b)
{
	const struct rec$i *x = a, *y = b;
	return (x->v[0] > y->v[0]) - (x->v[0] < y->v[0]);
}
double f$i(int n)
{
	struct rec$i *r = calloc((size_t)n, sizeof *r);
	double s = 0;
	for (int k = 0; k < n; k++) {
		r[k].id = k;
		for (int j = 0; j < 8; j++)
			r[k].v[j] = (k * 31 + j * $i) % 97;
		snprintf(r[k].name, sizeof r[k].name, "r%d", k);
	}
	qsort(r, (size_t)n, sizeof *r, cmp$i);
	for (int k = 0; k < n; k++)
		s += r[k].v[0] + strlen(r[k].name);
	free(r);
	return s;
}
EOF
	objs="$objs f$i.o"
done
printf 'all: lib.a\nlib.a:%s\n\tar rcs $@ $^\n%%.o: %%.c\n\t$(CC) -O2 -c $< -o $@\nclean:\n\trm -f *.o lib.a\n' "$objs" > "$tmp/src/Makefile"

workload_cmd() { # workload -> the command, run in $tmp/src for build
	case $1 in
	shell) echo "bash $tmp/loop.sh" ;;
	build) echo "make -s -C $tmp/src -j2" ;;
	esac
}

tsv=$results/spawn.tsv
printf 'workload\trep\tvariant\twall_s\tprocesses\n' > "$tsv"
# processes per workload, counted once by fennec (its Processes table)
declare -A nproc
for w in $WORKLOADS; do
	make -s -C "$tmp/src" clean
	"$FENNEC" record -q --sample off -o "$tmp/count.fnc" -- $(workload_cmd "$w") > /dev/null
	nproc[$w]=$("$FENNEC" analyze --format json "$tmp/count.fnc" | python3 -c 'import json,sys; print(len(json.load(sys.stdin)["processes"]))')
done

run_one() { # workload variant -> wall seconds
	local w=$1 v=$2 cmd
	cmd=$(workload_cmd "$w")
	[ "$w" = build ] && make -s -C "$tmp/src" clean
	local t0 t1
	t0=$(date +%s%N)
	case $v in
	base) $cmd ;;
	fennec-off) "$FENNEC" record -q --sample off --memory=off -o "$tmp/f.fnc" -- $cmd ;;
	fennec-cpu) "$FENNEC" record -q --memory=off -o "$tmp/f.fnc" -- $cmd ;;
	fennec) "$FENNEC" record -q -o "$tmp/f.fnc" -- $cmd ;;
	fennec-full) "$FENNEC" record -q --memory=full -o "$tmp/f.fnc" -- $cmd ;;
	old) FENNEC_LIB=$OLD_LIB "$FENNEC" record -q -o "$tmp/f.fnc" -- $cmd ;;
	perf) perf record -q -F 999 -g -o "$tmp/perf.data" -- $cmd 2>/dev/null ;;
	esac > /dev/null
	t1=$(date +%s%N)
	rm -rf "$tmp/f.fnc" "$tmp/perf.data"
	awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.4f\n", (b - a) / 1e9 }'
}

set -- $VARIANTS
nv=$#
for w in $WORKLOADS; do
	for rep in $(seq "$REPS"); do
		vs=($VARIANTS)
		for k in $(seq 0 $((nv - 1))); do
			v=${vs[$(((k + rep) % nv))]}
			s=$(run_one "$w" "$v")
			printf '%s\t%s\t%s\t%s\t%s\n' "$w" "$rep" "$v" "$s" "${nproc[$w]}" >> "$tsv"
		done
	done
done

python3 - "$tsv" "$VARIANTS" <<'EOF'
import csv, statistics, sys
rows = list(csv.DictReader(open(sys.argv[1]), delimiter="\t"))
variants = sys.argv[2].split()
wall = {}
for r in rows:
    wall[(r["workload"], r["rep"], r["variant"])] = float(r["wall_s"])
print("| workload | processes | variant | wall s, median | ratio to unprofiled: median [min, max] | ms added per process |")
print("|---|---|---|---|---|---|")
for w in dict.fromkeys(r["workload"] for r in rows):
    reps = sorted({r["rep"] for r in rows if r["workload"] == w})
    nproc = int(next(r["processes"] for r in rows if r["workload"] == w))
    for v in variants:
        ws = [wall[(w, k, v)] for k in reps]
        if v == "base":
            print("| %s | %d | unprofiled | %.3f | | |" % (w, nproc, statistics.median(ws)))
            continue
        ratios = [wall[(w, k, v)] / wall[(w, k, "base")] for k in reps]
        added = [1000 * (wall[(w, k, v)] - wall[(w, k, "base")]) / nproc for k in reps]
        print("| %s | %d | %s | %.3f | **%.2f** [%.2f, %.2f] | %.2f |" % (
            w, nproc, v, statistics.median(ws), statistics.median(ratios), min(ratios), max(ratios),
            statistics.median(added)))
EOF
echo "wrote $tsv"

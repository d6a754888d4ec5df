#!/usr/bin/env bash
# bench/file_size.sh - bytes per region begin/end pair in the files `fennec record` writes,
# for three shapes of program (build/bench/gen_events): a tight loop, ~1 us of work per
# pair, and a realistic nested training-loop shape, with the default settings and with a
# 32 MiB buffer / no compression beside them. Target: <= 6 bytes per pair on average.
# Usage: bench/file_size.sh [results_dir]   (FENNEC_BUILD=dir picks the build, default build)
# Writes <results_dir>/file_size.tsv (default build/bench-results).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
B=${FENNEC_BUILD:-$root/build}
FENNEC=$B/bin/fennec
GEN=$B/bench/gen_events
results=${1:-$B/bench-results}
mkdir -p "$results"
for f in "$FENNEC" "$GEN"; do
	[ -x "$f" ] || { echo "file_size: $f missing; run 'make bench'" >&2; exit 1; }
done
tmp=$(mktemp -d /tmp/fennec-bench-fs.XXXXXX)
trap 'rm -rf "$tmp"' EXIT

# name shape pairs work_ns buffer_kb zstd_level ("-": the defaults, 2048 KiB and level 1)
cases=(
	"tight       tight  10000000 0    -     -"
	"tight.32M   tight  10000000 0    32768 -"
	"work1us     work    1000000 1000 -     -"
	"work1us.raw work    1000000 1000 -     0"
	"nested      nested  2000000 500  -     -"
	"nested.32M  nested  2000000 500  32768 -"
	"nested.raw  nested  2000000 500  -     0"
)

tsv=$results/file_size.tsv
printf 'case\tshape\twork_ns\tbuffer_kb\tzstd_level\tpairs\tfiles\tbytes\tbytes_per_pair\tevents\tdropped_events\tbytes_per_recorded_pair\tgen_ns_per_pair\n' >"$tsv"
echo "fennec file_size: bytes of the recording per region begin/end pair (target <= 6)"
printf '%-11s %-7s %7s %7s %4s %9s %10s %7s %9s %9s %8s %9s\n' case shape work_ns buf_kb zstd pairs bytes B/pair events dropped B/rec.p gen_ns/p
for c in "${cases[@]}"; do
	read -r name shape pairs work buf level <<<"$c"
	out=$tmp/$name.fnc
	bufopt=()
	[ "$buf" = - ] || bufopt=(--buffer-kb "$buf")
	[ "$level" = - ] && level=1
	genline=$(FENNEC_COMPRESSION=$level "$FENNEC" record -q "${bufopt[@]}" -o "$out" -- "$GEN" -s "$shape" -n "$pairs" -w "$work" | grep '^gen_events:' || true)
	emitted=$(sed -n 's/.* pairs=\([0-9]*\).*/\1/p' <<<"$genline")
	genns=$(sed -n 's/.* ns_per_pair=\([0-9.]*\).*/\1/p' <<<"$genline")
	[ -n "$emitted" ] || { echo "file_size: $name: generator printed nothing" >&2; emitted=$pairs; genns=NA; }
	nfiles=0
	bytes=0
	for f in "$out" "$out".*; do
		[ -f "$f" ] || continue
		nfiles=$((nfiles + 1))
		bytes=$((bytes + $(stat -c %s "$f")))
	done
	json=$("$FENNEC" analyze "$out" --format json 2>/dev/null || true)
	events=$(jq -r '.summary.events // "NA"' <<<"$json" 2>/dev/null || echo NA)
	dropped=$(jq -r '.summary.dropped_events // "NA"' <<<"$json" 2>/dev/null || echo NA)
	bpp=$(awk -v b="$bytes" -v p="$emitted" 'BEGIN { printf "%.3f", b / p }')
	bprp=$(awk -v b="$bytes" -v e="$events" 'BEGIN { if (e + 0 > 1) printf "%.3f", 2 * b / e; else print "NA" }')
	[ "$buf" = - ] && buf=default
	printf '%-11s %-7s %7s %7s %4s %9s %10s %7s %9s %9s %8s %9s\n' "$name" "$shape" "$work" "$buf" "$level" "$emitted" "$bytes" "$bpp" "$events" "$dropped" "$bprp" "$genns"
	printf '%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$shape" "$work" "$buf" "$level" "$emitted" "$nfiles" "$bytes" "$bpp" "$events" "$dropped" "$bprp" "$genns" >>"$tsv"
done
echo "B/pair = whole recording (all files; header, sites, stats, END included) / pairs emitted;"
echo "B/rec.p = the same per pair actually in the file (events / 2): differs when events were dropped"
echo "zstd 0 = FENNEC_COMPRESSION=0 (chunks stored raw): the event encoding itself"
echo "wrote $tsv"

#!/usr/bin/env bash
# bench/analyze_throughput.sh - how fast `fennec analyze` reads a big recording: 100 million
# region events (50M begin/end pairs, nested shape, from build/bench/gen_events with the
# 32 MiB buffer), timed with /usr/bin/time -v. Prints events/s and max RSS beside the
# floor of reading the same file with `cat FILE > /dev/null`. Targets: >= 20M events/s,
# max RSS < 2 GiB.
# Usage: bench/analyze_throughput.sh [results_dir]
#   env: PAIRS (default 50000000), WORK_NS (mean leaf work, default 50: varied deltas), RUNS (default 3),
#        FENNEC_BUILD (default build), KEEP=1 keeps the recording.
# Writes <results_dir>/analyze_throughput.tsv (default build/bench-results).
set -euo pipefail
root=$(cd "$(dirname "$0")/.." && pwd)
B=${FENNEC_BUILD:-$root/build}
FENNEC=$B/bin/fennec
GEN=$B/bench/gen_events
results=${1:-$B/bench-results}
PAIRS=${PAIRS:-50000000}
WORK_NS=${WORK_NS:-50}
RUNS=${RUNS:-3}
mkdir -p "$results"
for f in "$FENNEC" "$GEN" /usr/bin/time; do
	[ -x "$f" ] || { echo "analyze_throughput: $f missing; run 'make bench'" >&2; exit 1; }
done
tmp=$(mktemp -d /tmp/fennec-bench-at.XXXXXX)
if [ "${KEEP:-0}" = 1 ]; then echo "keeping $tmp"; else trap 'rm -rf "$tmp"' EXIT; fi
big=$tmp/big.fnc

median() { sort -g | awk '{ a[NR] = $1 } END { print (NR % 2) ? a[(NR + 1) / 2] : (a[NR / 2] + a[NR / 2 + 1]) / 2 }'; }

echo "fennec analyze_throughput: generating $PAIRS pairs (nested shape, leaf work ${WORK_NS} ns, 32 MiB buffer)"
"$B/bench/gen_events" -s nested -n "$PAIRS" -w "$WORK_NS" -b 32768 -o "$big"
bytes=$(stat -c %s "$big")

# Once untimed: warms the page cache and reads the event and drop counts.
json=$("$FENNEC" analyze "$big" --format json)
events=$(jq -r '.summary.events' <<<"$json")
dropped=$(jq -r '.summary.dropped_events' <<<"$json")
echo "recording: $bytes bytes, summary.events = $events, summary.dropped_events = $dropped"
if [ "$dropped" != 0 ]; then
	echo "WARNING: the collector dropped $dropped events; the file holds fewer than $((PAIRS * 2)) events"
fi

cat_s=()
for _ in $(seq "$RUNS"); do
	t0=$(date +%s%N)
	cat "$big" >/dev/null
	t1=$(date +%s%N)
	cat_s+=("$(awk -v a="$t0" -v b="$t1" 'BEGIN { printf "%.6f", (b - a) / 1e9 }')")
done
an_s=() an_rss=() an_cpu=()
for _ in $(seq "$RUNS"); do
	/usr/bin/time -v -o "$tmp/time.txt" "$FENNEC" analyze "$big" --format json -o /dev/null
	wall=$(awk -F': ' '/Elapsed \(wall clock\)/ { n = split($2, p, ":"); s = 0; for (i = 1; i <= n; i++) s = s * 60 + p[i]; print s }' "$tmp/time.txt")
	rss=$(awk -F': ' '/Maximum resident set size/ { print $2 }' "$tmp/time.txt")
	cpu=$(awk -F': ' '/User time/ { u = $2 } /System time/ { s = $2 } END { print u + s }' "$tmp/time.txt")
	an_s+=("$wall") an_rss+=("$rss") an_cpu+=("$cpu")
done
cat_med=$(printf '%s\n' "${cat_s[@]}" | median)
an_med=$(printf '%s\n' "${an_s[@]}" | median)
rss_med=$(printf '%s\n' "${an_rss[@]}" | median)
cpu_med=$(printf '%s\n' "${an_cpu[@]}" | median)

echo
echo "median of $RUNS runs; file $bytes bytes, $events events"
printf '%-40s %9s %14s %12s %12s\n' what wall_s events/s MB/s max_rss_MiB
awk -v w="$an_med" -v e="$events" -v b="$bytes" -v r="$rss_med" -v c="$cpu_med" 'BEGIN {
	printf "%-40s %9.3f %14.0f %12.1f %12.1f\n", "fennec analyze --format json -o /dev/null", w, e / w, b / w / 1e6, r / 1024
	printf "%-40s %9s %14.0f\n", "  (per CPU second: user+sys " c " s)", "", e / c }'
awk -v w="$cat_med" -v e="$events" -v b="$bytes" 'BEGIN {
	printf "%-40s %9.3f %14.0f %12.1f %12s\n", "cat FILE > /dev/null (floor)", w, e / w, b / w / 1e6, "-" }'
echo "targets: >= 20000000 events/s, max RSS < 2048 MiB"

tsv=$results/analyze_throughput.tsv
{
	printf 'what\tpairs\tfile_bytes\tevents\tdropped_events\truns\tmedian_wall_s\tevents_per_s\tmax_rss_kb\tcpu_s\n'
	awk -v w="$an_med" -v e="$events" -v b="$bytes" -v r="$rss_med" -v c="$cpu_med" -v p="$PAIRS" -v d="$dropped" -v n="$RUNS" \
		'BEGIN { printf "fennec_analyze_json\t%s\t%s\t%s\t%s\t%s\t%.4f\t%.0f\t%s\t%s\n", p, b, e, d, n, w, e / w, r, c }'
	awk -v w="$cat_med" -v e="$events" -v b="$bytes" -v p="$PAIRS" -v d="$dropped" -v n="$RUNS" \
		'BEGIN { printf "cat_floor\t%s\t%s\t%s\t%s\t%s\t%.4f\t%.0f\tNA\tNA\n", p, b, e, d, n, w, e / w }'
} >"$tsv"
echo "wrote $tsv"

# bench/paths.sh - sourced by the benchmark scripts: the repository root, the build
# (FENNEC_BUILD, default build, made absolute), the fennec binary and the results
# directory (the script's first argument, default <build>/bench-results).
root=$(cd "$(dirname "${BASH_SOURCE[1]}")/.." && pwd)
B=${FENNEC_BUILD:-$root/build}
case $B in /*) ;; *) B=$root/$B ;; esac
FENNEC=$B/bin/fennec
results=${1:-$B/bench-results}

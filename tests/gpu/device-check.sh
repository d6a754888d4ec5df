#!/usr/bin/env bash
# device-check.sh - the check of fennec's GPU support that a machine with an NVIDIA GPU
# runs (docs/gpu.md "Checking on a GPU"): builds a CUDA program with nvcc (three kernels,
# two streams, a deliberate synchronous copy from pageable memory in the loop), records it
# with --gpu, cross-checks fennec's kernel counts against the launches the program counted
# itself and its GPU times against nsys (when on the PATH), measures the overhead against
# unprofiled runs, and prints one table. About 1-3 minutes on an H100/H200.
#
#   tests/gpu/device-check.sh          the check (needs a GPU, a driver and nvcc)
#   tests/gpu/device-check.sh --dry    what runs without a GPU (make test): the program
#                                      compiles with nvcc when there is one, and the
#                                      comparison and table code runs on canned numbers
# Environment: FENNEC_BUILD (default build), CUDA_HOME (default /usr/local/cuda), ITERS
# (default 200), RUNS (unprofiled and profiled runs each, default 3), OUT (a directory
# for the files; default a new temporary one). Exit status: 0 all checks passed, 1 one
# failed, 77 the machine cannot run the check (no GPU or no nvcc).
set -u
HERE=$(cd "$(dirname "$0")" && pwd)
REPO=$(cd "$HERE/../.." && pwd)
BUILD=${FENNEC_BUILD:-build}
case $BUILD in /*) ;; *) BUILD=$REPO/$BUILD ;; esac
CUDA_HOME=${CUDA_HOME:-/usr/local/cuda}
ITERS=${ITERS:-200}
RUNS=${RUNS:-3}
DRY=0
[ "${1:-}" = "--dry" ] && DRY=1
if [ -z "${OUT:-}" ]; then
	OUT=$(mktemp -d /tmp/fennec-device-check.XXXXXX)
	[ $DRY = 1 ] && trap 'rm -rf "$OUT"' EXIT # the check keeps its files for a look
fi
mkdir -p "$OUT"
NVCC=$(command -v nvcc || { [ -x "$CUDA_HOME/bin/nvcc" ] && echo "$CUDA_HOME/bin/nvcc"; } || true)

# The program. Truth it prints itself, as JSON: the launches of each kernel, the pageable
# copies it made, and the wall time of its loop (CLOCK_MONOTONIC, for the overhead).
cat > "$OUT/gpucheck.cu" <<'EOF'
#include <cuda_runtime.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>
#define CK(x) do { cudaError_t e_ = (x); if (e_ != cudaSuccess) { \
	fprintf(stderr, "gpucheck: %s: %s\n", #x, cudaGetErrorString(e_)); exit(3); } } while (0)
__global__ void scale_kernel(float *a, int n, float s) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] *= s; }
__global__ void add_kernel(float *a, const float *b, int n) { int i = blockIdx.x * blockDim.x + threadIdx.x; if (i < n) a[i] += b[i]; }
__global__ void heavy_kernel(float *a, int n, int reps)
{
	int i = blockIdx.x * blockDim.x + threadIdx.x;
	if (i >= n) return;
	float x = a[i];
	for (int r = 0; r < reps; r++) x = x * 0.999f + 0.001f;
	a[i] = x;
}
static double now_s(void) { struct timespec t; clock_gettime(CLOCK_MONOTONIC, &t); return t.tv_sec + t.tv_nsec * 1e-9; }
int main(int argc, char **argv)
{
	int iters = argc > 1 ? atoi(argv[1]) : 200, n = 1 << 22;
	size_t bytes = (size_t)n * sizeof(float);
	float *a, *b, *host = (float *)malloc(bytes); /* pageable on purpose */
	for (int i = 0; i < n; i++) host[i] = 1.0f;
	CK(cudaMalloc(&a, bytes));
	CK(cudaMalloc(&b, bytes));
	cudaStream_t s1, s2;
	CK(cudaStreamCreate(&s1));
	CK(cudaStreamCreate(&s2));
	CK(cudaMemcpy(b, host, bytes, cudaMemcpyHostToDevice));
	CK(cudaDeviceSynchronize());
	long scale = 0, add = 0, heavy = 0, pageable = 0;
	double t0 = now_s();
	for (int it = 0; it < iters; it++) {
		scale_kernel<<<(n + 255) / 256, 256, 0, s1>>>(a, n, 0.5f); scale++;
		add_kernel<<<(n + 255) / 256, 256, 0, s1>>>(a, b, n); add++;
		heavy_kernel<<<(n + 255) / 256, 256, 0, s2>>>(b, n, 64); heavy++;
		if (it % 10 == 0) {
			/* the deliberate mistake: a synchronous copy to pageable memory in the loop */
			CK(cudaMemcpy(host, a, bytes, cudaMemcpyDeviceToHost));
			pageable++;
		}
	}
	CK(cudaDeviceSynchronize());
	double t1 = now_s();
	printf("{\"scale_kernel\": %ld, \"add_kernel\": %ld, \"heavy_kernel\": %ld, \"pageable_copies\": %ld, "
	       "\"loop_s\": %.6f}\n", scale, add, heavy, pageable, t1 - t0);
	return 0;
}
EOF

# The comparison and the table, from files: fennec's analysis (JSON), the program's truth
# (JSON lines, one per run, the first profiled), nsys's kernel summary (CSV, optional).
cat > "$OUT/compare.py" <<'EOF'
import csv, json, statistics, sys
analysis, truth_prof, truth_plain, nsys = sys.argv[1:5]
rep = json.load(open(analysis))
prof = [json.loads(l) for l in open(truth_prof) if l.strip().startswith("{")]
plain = [json.loads(l) for l in open(truth_plain) if l.strip().startswith("{")]
rows, failed = [], 0
def row(what, fennec, other, source, ok):
    global failed
    failed += ok is False
    rows.append((what, fennec, other, source, "-" if ok is None else "ok" if ok else "FAIL"))
gpu = rep.get("gpu") or {}
kern = {k["name"].split("(")[0]: k for k in gpu.get("kernels", [])}
for name in ("scale_kernel", "add_kernel", "heavy_kernel"):
    got = kern.get(name, {}).get("count", 0)
    row(name + " launches", "%d" % got, "%d" % prof[0][name], "program", got == prof[0][name])
copies = sum(c.get("pageable_count", 0) for c in gpu.get("memcpy", []) if c.get("kind") == "DtoH")
row("pageable DtoH copies", "%d" % copies, "%d" % prof[0]["pageable_copies"], "program",
    copies == prof[0]["pageable_copies"])
types = [f["type"] for f in rep.get("findings", [])]
row("pageable_memcpy finding", "yes" if "pageable_memcpy" in types else "no", "yes", "known", "pageable_memcpy" in types)
streams = {s.get("stream") for k in gpu.get("kernels", []) for s in k.get("streams", [])}
row("streams with kernels", "%d" % len(streams), "2", "program", len(streams) == 2)
if nsys != "-":
    ns = {}
    with open(nsys) as f:
        lines = [l for l in f if "," in l]
    for r in csv.DictReader(lines):
        nm = (r.get("Name") or "").split("(")[0]
        tot = r.get("Total Time (ns)")
        if nm and tot:
            ns[nm] = (float(tot), int(float(r.get("Instances") or 0)))
    for name in ("scale_kernel", "add_kernel", "heavy_kernel"):
        if name not in ns:
            row(name + " GPU time", "-", "missing", "nsys", False)
            continue
        got = kern.get(name, {}).get("total_ns", 0)
        ok = ns[name][0] > 0 and abs(got - ns[name][0]) <= 0.10 * ns[name][0]
        row(name + " GPU time", "%.2f ms" % (got / 1e6), "%.2f ms" % (ns[name][0] / 1e6), "nsys (10 %)", ok)
        row(name + " launches", "%d" % kern.get(name, {}).get("count", 0), "%d" % ns[name][1], "nsys",
            kern.get(name, {}).get("count", 0) == ns[name][1])
else:
    row("GPU time against nsys", "%.2f ms" % (gpu.get("kernel_ns", 0) / 1e6), "-", "nsys absent", None)
tp = statistics.median(r["loop_s"] for r in prof)
tu = statistics.median(r["loop_s"] for r in plain)
over = 100 * (tp / tu - 1) if tu > 0 else float("nan")
row("loop time (median of %d)" % len(prof), "%.3f s" % tp, "%.3f s" % tu, "unprofiled", None)
row("overhead of --gpu", "%.1f %%" % over, "-", "measured", None)
w = [max(len(str(r[i])) for r in rows + [("check", "fennec", "reference", "source", "result")]) for i in range(5)]
for r in [("check", "fennec", "reference", "source", "result")] + rows:
    print("  ".join(str(c).ljust(w[i]) for i, c in enumerate(r)))
print("%d of %d checks failed" % (failed, sum(1 for r in rows if r[4] != "-")))
sys.exit(1 if failed else 0)
EOF

if [ $DRY = 1 ]; then
	# Canned numbers: a run that agrees, then one that does not; the table must say so.
	cat > "$OUT/dry.json" <<'EOF'
{"gpu": {"kernel_ns": 3000000, "kernels": [
  {"name": "scale_kernel(float*, int, float)", "count": 20, "total_ns": 1000000, "streams": [{"stream": 13}]},
  {"name": "add_kernel(float*, float const*, int)", "count": 20, "total_ns": 1000000, "streams": [{"stream": 13}]},
  {"name": "heavy_kernel(float*, int, int)", "count": 20, "total_ns": 1000000, "streams": [{"stream": 14}]}],
 "memcpy": [{"kind": "DtoH", "count": 2, "pageable_count": 2}]},
 "findings": [{"type": "pageable_memcpy"}]}
EOF
	echo '{"scale_kernel": 20, "add_kernel": 20, "heavy_kernel": 20, "pageable_copies": 2, "loop_s": 1.10}' > "$OUT/dry.prof"
	echo '{"scale_kernel": 20, "add_kernel": 20, "heavy_kernel": 20, "pageable_copies": 2, "loop_s": 1.00}' > "$OUT/dry.plain"
	printf '"Time (%%)","Total Time (ns)","Instances","Avg (ns)","Name"\n33.3,1020000,20,51000,"scale_kernel(float *, int, float)"\n33.3,990000,20,49500,"add_kernel(float *, const float *, int)"\n33.3,1000000,20,50000,"heavy_kernel(float *, int, int)"\n' > "$OUT/dry.csv"
	python3 "$OUT/compare.py" "$OUT/dry.json" "$OUT/dry.prof" "$OUT/dry.plain" "$OUT/dry.csv" > "$OUT/dry.txt" ||
		{ cat "$OUT/dry.txt"; echo "device-check --dry: a run that agrees failed"; exit 1; }
	grep -q "overhead of --gpu  *10.0 %" "$OUT/dry.txt" || { cat "$OUT/dry.txt"; echo "device-check --dry: overhead"; exit 1; }
	echo '{"scale_kernel": 21, "add_kernel": 20, "heavy_kernel": 20, "pageable_copies": 2, "loop_s": 1.10}' > "$OUT/dry.prof"
	if python3 "$OUT/compare.py" "$OUT/dry.json" "$OUT/dry.prof" "$OUT/dry.plain" - > "$OUT/dry2.txt"; then
		cat "$OUT/dry2.txt"; echo "device-check --dry: a launch count that differs passed"; exit 1
	fi
	grep -q "scale_kernel launches .*FAIL" "$OUT/dry2.txt" || { cat "$OUT/dry2.txt"; exit 1; }
	if [ -n "$NVCC" ]; then
		"$NVCC" -O2 -o "$OUT/gpucheck" "$OUT/gpucheck.cu" > "$OUT/nvcc.txt" 2>&1 ||
			{ cat "$OUT/nvcc.txt"; echo "device-check --dry: nvcc failed"; exit 1; }
		echo "device-check --dry: ok (the program compiles with $NVCC; the comparison passes and fails as it should)"
	else
		echo "device-check --dry: ok (no nvcc: the program was not compiled; the comparison passes and fails as it should)"
	fi
	exit 0
fi

[ -n "$NVCC" ] || { echo "device-check: no nvcc (set CUDA_HOME)"; exit 77; }
command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L >/dev/null 2>&1 ||
	{ echo "device-check: no NVIDIA GPU or driver here"; exit 77; }
if [ ! -x "$BUILD/bin/fennec" ]; then
	echo "device-check: building fennec"
	make -C "$REPO" -j"$(nproc)" lib cli > "$OUT/make.txt" 2>&1 || { tail -20 "$OUT/make.txt"; exit 1; }
fi
FENNEC=$BUILD/bin/fennec
echo "device-check: $(nvidia-smi --query-gpu=name,driver_version --format=csv,noheader | head -1), $("$NVCC" --version | tail -1), files in $OUT"
"$NVCC" -O2 -lineinfo -o "$OUT/gpucheck" "$OUT/gpucheck.cu" > "$OUT/nvcc.txt" 2>&1 || { cat "$OUT/nvcc.txt"; exit 1; }
"$OUT/gpucheck" 10 > /dev/null || { echo "device-check: the program does not run"; exit 1; } # warm-up
: > "$OUT/plain.jsonl"
: > "$OUT/prof.jsonl"
for r in $(seq "$RUNS"); do
	timeout 120 "$OUT/gpucheck" "$ITERS" >> "$OUT/plain.jsonl" || { echo "device-check: unprofiled run $r failed"; exit 1; }
	timeout 180 "$FENNEC" record --gpu -o "$OUT/run$r.fnc" -- "$OUT/gpucheck" "$ITERS" >> "$OUT/prof.jsonl" 2> "$OUT/record$r.txt" ||
		{ cat "$OUT/record$r.txt"; echo "device-check: fennec record --gpu failed"; exit 1; }
done
timeout 120 "$FENNEC" analyze "$OUT/run1.fnc" --format json > "$OUT/analysis.json" 2> "$OUT/analyze.txt" ||
	{ cat "$OUT/analyze.txt"; exit 1; }
"$FENNEC" analyze "$OUT/run1.fnc" > "$OUT/analysis.txt" 2>&1
NSYS_CSV=-
if command -v nsys >/dev/null 2>&1; then
	if timeout 240 nsys profile -t cuda -o "$OUT/nsys" -f true "$OUT/gpucheck" "$ITERS" > "$OUT/nsys.txt" 2>&1 &&
	   timeout 120 nsys stats -q --report cuda_gpu_kern_sum --format csv "$OUT/nsys.nsys-rep" > "$OUT/nsys_kern.csv" 2>> "$OUT/nsys.txt"; then
		NSYS_CSV=$OUT/nsys_kern.csv
	else
		echo "device-check: nsys failed (see $OUT/nsys.txt); GPU times not cross-checked"
	fi
fi
# first line of prof.jsonl is run 1, the one analysed
python3 "$OUT/compare.py" "$OUT/analysis.json" "$OUT/prof.jsonl" "$OUT/plain.jsonl" "$NSYS_CSV"

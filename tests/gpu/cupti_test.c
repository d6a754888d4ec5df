/*
 * cupti_test.c - the CUPTI side of GPU collection without a GPU: activity records built
 * in memory with the installed CUPTI headers' own structs (CUpti_ActivityKernel10,
 * CUpti_ActivityMemcpy6, ...) go through col_cupti_translate, checked field by field,
 * then a whole buffer of them through the buffer-completed callback (iterated by the real
 * libcupti's cuptiActivityGetNextRecord) and the writer into a profile whose analysis
 * tests/integration/test_gpu.py checks against the answers known here.
 *
 * Usage: cupti_test OUT.fnc     (FENNEC_CUPTI: libcupti's path, else the loader's)
 * Prints "ok NAME" / "FAIL NAME: ..." per check, "skip: REASON" when libcupti cannot be
 * loaded (the translation checks still run), and exits 1 if any check failed.
 *
 * The scenario, in ms from t0 (all on device 0, an A100's limits; see test_gpu.py):
 *   region "setup" [-2.5 or earlier, 1.5), region "work" [1.5, 12)
 *   stream 7: HtoD 8 MiB pageable [0, 0.8]; gemm x4 [1,2] [3,4] [5,6] [7,8] (256 threads,
 *             32 registers: 100% occupancy); DtoH 4 MiB pinned [8, 8.25]; memset [8.5, 8.6]
 *   stream 8: relu x2 [1.5, 2.5] [9, 10] (128 threads, 64 registers: 50% occupancy)
 *   busy 6.65 ms, stream 7 5.15 ms, stream 8 2 ms, overlap 0.5 ms
 *   cudaMalloc 64 MiB at 0.1 and 32 MiB at 0.2 (peak 96 MiB, in "setup"), cudaFree of the
 *   64 MiB at 9.5; cudaStreamSynchronize [2, 8.3] on this thread (in "work"): 6.3 ms
 */
#include <fennec.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#include "collect/gpu_cupti.h"

static int failures;

#define CHECK_EQ(name, got, want)                                                                  \
	do {                                                                                       \
		long long g_ = (long long)(got), w_ = (long long)(want);                           \
		if (g_ != w_) {                                                                    \
			printf("FAIL %s: %s = %lld, expected %lld\n", name, #got, g_, w_);         \
			failures++;                                                                \
		}                                                                                  \
	} while (0)

#define MS 1000000ull

static void spin_until(uint64_t t)
{
	while (cm_mono_ns() < t)
		;
}

/* ---- translation, record by record ---- */

static void translate_kernel(void)
{
	CUpti_ActivityKernel10 k;
	memset(&k, 0, sizeof k);
	k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
	k.start = 1000;
	k.end = 4000;
	k.deviceId = 1;
	k.contextId = 2;
	k.streamId = 13;
	k.gridX = 80;
	k.gridY = 2;
	k.gridZ = 1;
	k.blockX = 256;
	k.blockY = 1;
	k.blockZ = 1;
	k.registersPerThread = 40;
	k.staticSharedMemory = 1024;
	k.dynamicSharedMemory = 49152;
	k.correlationId = 77;
	k.name = "_Z4gemmPfS_S_i";
	fmt_gpu g;
	fmt_gpu_device d;
	const char *name;
	CHECK_EQ("kernel", col_cupti_translate((CUpti_Activity *)&k, 500, &g, &d, &name), COL_CUPTI_RECORD);
	CHECK_EQ("kernel", g.type, FMT_GR_KERNEL);
	CHECK_EQ("kernel", g.start_ns, 1500);
	CHECK_EQ("kernel", g.end_ns, 4500);
	CHECK_EQ("kernel", g.device, 1);
	CHECK_EQ("kernel", g.context, 2);
	CHECK_EQ("kernel", g.stream, 13);
	CHECK_EQ("kernel", g.grid[0] * g.grid[1] * g.grid[2], 160);
	CHECK_EQ("kernel", g.block[0], 256);
	CHECK_EQ("kernel", g.regs, 40);
	CHECK_EQ("kernel", g.smem_static, 1024);
	CHECK_EQ("kernel", g.smem_dynamic, 49152);
	CHECK_EQ("kernel", g.correlation, 77);
	CHECK_EQ("kernel", name == k.name, 1);
	k.start = CUPTI_TIMESTAMP_UNKNOWN; /* a forced flush's incomplete record */
	CHECK_EQ("kernel", col_cupti_translate((CUpti_Activity *)&k, 0, &g, &d, &name), COL_CUPTI_INCOMPLETE);
	printf("ok translate_kernel\n");
}

static void translate_memcpy(void)
{
	CUpti_ActivityMemcpy6 m;
	memset(&m, 0, sizeof m);
	m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
	m.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_HTOD;
	m.srcKind = CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE;
	m.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
	m.bytes = 1 << 20;
	m.start = 10;
	m.end = 20;
	m.deviceId = 3;
	m.streamId = 5;
	m.correlationId = 9;
	fmt_gpu g;
	fmt_gpu_device d;
	const char *name;
	CHECK_EQ("memcpy", col_cupti_translate((CUpti_Activity *)&m, 0, &g, &d, &name), COL_CUPTI_RECORD);
	CHECK_EQ("memcpy", g.type, FMT_GR_MEMCPY);
	CHECK_EQ("memcpy", g.kind, FMT_CPY_HTOD);
	CHECK_EQ("memcpy", g.mem_kind, FMT_GMEM_PAGEABLE);
	CHECK_EQ("memcpy", g.dst_kind, FMT_GMEM_DEVICE);
	CHECK_EQ("memcpy", g.bytes, 1 << 20);
	CHECK_EQ("memcpy", g.src_device, 3);
	CHECK_EQ("memcpy", g.dst_device, 3);
	CHECK_EQ("memcpy", g.correlation, 9);

	CUpti_ActivityMemcpyPtoP4 p;
	memset(&p, 0, sizeof p);
	p.kind = CUPTI_ACTIVITY_KIND_MEMCPY2;
	p.copyKind = CUPTI_ACTIVITY_MEMCPY_KIND_PTOP;
	p.srcKind = p.dstKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
	p.bytes = 4096;
	p.start = 100;
	p.end = 300;
	p.deviceId = 0;
	p.srcDeviceId = 0;
	p.dstDeviceId = 1;
	CHECK_EQ("memcpy2", col_cupti_translate((CUpti_Activity *)&p, 0, &g, &d, &name), COL_CUPTI_RECORD);
	CHECK_EQ("memcpy2", g.kind, FMT_CPY_PTOP);
	CHECK_EQ("memcpy2", g.dst_device, 1);
	CHECK_EQ("memcpy2", g.end_ns - g.start_ns, 200);
	printf("ok translate_memcpy\n");
}

static void translate_others(void)
{
	fmt_gpu g;
	fmt_gpu_device d;
	const char *name;
	CUpti_ActivityMemset4 s;
	memset(&s, 0, sizeof s);
	s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
	s.value = 0xff;
	s.bytes = 64;
	s.start = 1;
	s.end = 2;
	s.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_MANAGED;
	CHECK_EQ("memset", col_cupti_translate((CUpti_Activity *)&s, 0, &g, &d, &name), COL_CUPTI_RECORD);
	CHECK_EQ("memset", g.mem_kind, FMT_GMEM_MANAGED);
	CHECK_EQ("memset", g.value, 0xff);

	CUpti_ActivitySynchronization2 y;
	memset(&y, 0, sizeof y);
	y.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
	y.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_CONTEXT_SYNCHRONIZE;
	y.start = 5;
	y.end = 50;
	y.streamId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
	y.cudaEventId = CUPTI_SYNCHRONIZATION_INVALID_VALUE;
	CHECK_EQ("sync", col_cupti_translate((CUpti_Activity *)&y, 0, &g, &d, &name), COL_CUPTI_RECORD);
	CHECK_EQ("sync", g.kind, FMT_SYNC_CONTEXT);
	CHECK_EQ("sync", g.value, 0);

	CUpti_ActivityAPI a;
	memset(&a, 0, sizeof a);
	a.kind = CUPTI_ACTIVITY_KIND_DRIVER;
	a.cbid = 307;
	a.start = 7;
	a.end = 9;
	a.threadId = 4242;
	a.correlationId = 3;
	CHECK_EQ("api", col_cupti_translate((CUpti_Activity *)&a, 0, &g, &d, &name), COL_CUPTI_RECORD);
	CHECK_EQ("api", g.kind, FMT_API_DRIVER);
	CHECK_EQ("api", g.tid, 4242);
	CHECK_EQ("api", g.cbid, 307);

	CUpti_ActivityMemory4 m;
	memset(&m, 0, sizeof m);
	m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
	m.memoryOperationType = CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE;
	m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
	m.address = 0xdead000;
	m.bytes = 1 << 24;
	m.timestamp = 100;
	m.memoryPoolConfig.memoryPoolType = CUPTI_ACTIVITY_MEMORY_POOL_TYPE_LOCAL;
	CHECK_EQ("memory", col_cupti_translate((CUpti_Activity *)&m, 0, &g, &d, &name), COL_CUPTI_RECORD);
	CHECK_EQ("memory", g.kind, FMT_GMOP_FREE);
	CHECK_EQ("memory", g.dst_kind, 1);
	CHECK_EQ("memory", g.start_ns, g.end_ns);

	CUpti_ActivityOverhead3 o;
	memset(&o, 0, sizeof o);
	o.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
	o.overheadKind = CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST;
	o.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
	o.objectId.pt.threadId = 99;
	o.start = 1;
	o.end = 3;
	CHECK_EQ("overhead", col_cupti_translate((CUpti_Activity *)&o, 0, &g, &d, &name), COL_CUPTI_RECORD);
	CHECK_EQ("overhead", g.kind, 8);
	CHECK_EQ("overhead", g.mem_kind, 2);
	CHECK_EQ("overhead", g.tid, 99);

	CUpti_ActivityDevice5 v;
	memset(&v, 0, sizeof v);
	v.kind = CUPTI_ACTIVITY_KIND_DEVICE;
	v.id = 2;
	v.name = "Fake A100";
	v.numMultiprocessors = 108;
	v.maxWarpsPerMultiprocessor = 64;
	v.computeCapabilityMajor = 8;
	memset(v.uuid.bytes, 7, 16);
	CHECK_EQ("device", col_cupti_translate((CUpti_Activity *)&v, 0, &g, &d, &name), COL_CUPTI_DEVICE);
	CHECK_EQ("device", d.id, 2);
	CHECK_EQ("device", d.sm_count, 108);
	CHECK_EQ("device", d.uuid[15], 7);
	CHECK_EQ("device", strcmp(d.name, "Fake A100"), 0);

	CUpti_ActivityName n = {.kind = CUPTI_ACTIVITY_KIND_NAME};
	CHECK_EQ("name", col_cupti_translate((CUpti_Activity *)&n, 0, &g, &d, &name), COL_CUPTI_SKIP);
	printf("ok translate_others\n");
}

/* ---- the scenario through the callback and the writer ---- */

static uint8_t *buf;
static size_t used, cap = 1 << 16;

#define ADD(rec) add(&(rec), sizeof(rec))
static void add(const void *rec, size_t n)
{
	memcpy(buf + used, rec, n);
	used += (n + 7) & ~(size_t)7;
}

static void kernel(uint64_t t0, double s_ms, double e_ms, uint32_t stream, const char *name, int threads, int regs,
		   uint32_t corr)
{
	CUpti_ActivityKernel10 k;
	memset(&k, 0, sizeof k);
	k.kind = CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL;
	k.start = s_ms < 0 ? CUPTI_TIMESTAMP_UNKNOWN : t0 + (uint64_t)(s_ms * MS);
	k.end = t0 + (uint64_t)(e_ms * MS);
	k.contextId = 1;
	k.streamId = stream;
	k.gridX = 216;
	k.gridY = k.gridZ = 1;
	k.blockX = threads;
	k.blockY = k.blockZ = 1;
	k.registersPerThread = (uint16_t)regs;
	k.correlationId = corr;
	k.name = name;
	ADD(k);
}

static void copy(uint64_t t0, double s_ms, double e_ms, int kind, int src, int dst, uint64_t bytes, uint32_t corr)
{
	CUpti_ActivityMemcpy6 m;
	memset(&m, 0, sizeof m);
	m.kind = CUPTI_ACTIVITY_KIND_MEMCPY;
	m.copyKind = (uint8_t)kind;
	m.srcKind = (uint8_t)src;
	m.dstKind = (uint8_t)dst;
	m.bytes = bytes;
	m.start = t0 + (uint64_t)(s_ms * MS);
	m.end = t0 + (uint64_t)(e_ms * MS);
	m.contextId = 1;
	m.streamId = 7;
	m.correlationId = corr;
	ADD(m);
}

static void call(uint64_t t0, double s_ms, double e_ms, int cbid, uint32_t corr, uint32_t tid)
{
	CUpti_ActivityAPI a;
	memset(&a, 0, sizeof a);
	a.kind = CUPTI_ACTIVITY_KIND_RUNTIME;
	a.cbid = cbid;
	a.start = t0 + (uint64_t)(s_ms * MS);
	a.end = t0 + (uint64_t)(e_ms * MS);
	a.processId = (uint32_t)getpid();
	a.threadId = tid;
	a.correlationId = corr;
	ADD(a);
}

static void alloc(uint64_t t0, double at_ms, int op, uint64_t addr, uint64_t bytes, uint32_t corr)
{
	CUpti_ActivityMemory4 m;
	memset(&m, 0, sizeof m);
	m.kind = CUPTI_ACTIVITY_KIND_MEMORY2;
	m.memoryOperationType = op;
	m.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
	m.address = addr;
	m.bytes = bytes;
	m.timestamp = t0 + (uint64_t)(at_ms * MS);
	m.contextId = 1;
	m.correlationId = corr;
	ADD(m);
}

static void scenario(uint64_t t0)
{
	uint32_t tid = (uint32_t)syscall(SYS_gettid);
	CUpti_ActivityDevice5 v;
	memset(&v, 0, sizeof v);
	v.kind = CUPTI_ACTIVITY_KIND_DEVICE;
	v.id = 0;
	v.name = "Fake A100";
	v.computeCapabilityMajor = 8;
	v.numMultiprocessors = 108;
	v.numThreadsPerWarp = 32;
	v.maxThreadsPerBlock = 1024;
	v.maxWarpsPerMultiprocessor = 64;
	v.maxBlocksPerMultiprocessor = 32;
	v.maxRegistersPerMultiprocessor = 65536;
	v.maxRegistersPerBlock = 65536;
	v.maxSharedMemoryPerMultiprocessor = 167936;
	v.maxSharedMemoryPerBlock = 166912;
	v.globalMemorySize = 40ull << 30;
	v.coreClockRate = 1410000;
	memset(v.uuid.bytes, 0xa1, 16);
	ADD(v);
	copy(t0, 0, 0.8, CUPTI_ACTIVITY_MEMCPY_KIND_HTOD, CUPTI_ACTIVITY_MEMORY_KIND_PAGEABLE,
	     CUPTI_ACTIVITY_MEMORY_KIND_DEVICE, 8 << 20, 1);
	call(t0, 0.05, 0.1, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, 20, tid);
	alloc(t0, 0.1, CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 0x7f0000000000ull, 64 << 20, 20);
	call(t0, 0.15, 0.2, CUPTI_RUNTIME_TRACE_CBID_cudaMalloc_v3020, 21, tid);
	alloc(t0, 0.2, CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION, 0x7f0010000000ull, 32 << 20, 21);
	for (int i = 0; i < 4; i++) {
		call(t0, 1 + 2 * i - 0.02, 1 + 2 * i - 0.01, CUPTI_RUNTIME_TRACE_CBID_cudaLaunchKernel_v7000, 2 + i, tid);
		kernel(t0, 1 + 2 * i, 2 + 2 * i, 7, "_Z4gemmPfS_S_i", 256, 32, 2 + i);
	}
	kernel(t0, 1.5, 2.5, 8, "relu_kernel", 128, 64, 10);
	kernel(t0, 9, 10, 8, "relu_kernel", 128, 64, 11);
	call(t0, 2, 8.3, CUPTI_RUNTIME_TRACE_CBID_cudaStreamSynchronize_v3020, 12, tid);
	CUpti_ActivitySynchronization2 y;
	memset(&y, 0, sizeof y);
	y.kind = CUPTI_ACTIVITY_KIND_SYNCHRONIZATION;
	y.type = CUPTI_ACTIVITY_SYNCHRONIZATION_TYPE_STREAM_SYNCHRONIZE;
	y.start = t0 + 2 * MS;
	y.end = t0 + (uint64_t)(8.3 * MS);
	y.contextId = 1;
	y.streamId = 7;
	y.correlationId = 12;
	ADD(y);
	copy(t0, 8, 8.25, CUPTI_ACTIVITY_MEMCPY_KIND_DTOH, CUPTI_ACTIVITY_MEMORY_KIND_DEVICE,
	     CUPTI_ACTIVITY_MEMORY_KIND_PINNED, 4 << 20, 13);
	CUpti_ActivityMemset4 s;
	memset(&s, 0, sizeof s);
	s.kind = CUPTI_ACTIVITY_KIND_MEMSET;
	s.bytes = 1 << 20;
	s.start = t0 + (uint64_t)(8.5 * MS);
	s.end = t0 + (uint64_t)(8.6 * MS);
	s.contextId = 1;
	s.streamId = 7;
	s.memoryKind = CUPTI_ACTIVITY_MEMORY_KIND_DEVICE;
	s.correlationId = 14;
	ADD(s);
	call(t0, 9.45, 9.5, CUPTI_RUNTIME_TRACE_CBID_cudaFree_v3020, 22, tid);
	alloc(t0, 9.5, CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE, 0x7f0000000000ull, 64 << 20, 22);
	CUpti_ActivityOverhead3 o;
	memset(&o, 0, sizeof o);
	o.kind = CUPTI_ACTIVITY_KIND_OVERHEAD;
	o.overheadKind = CUPTI_ACTIVITY_OVERHEAD_ACTIVITY_BUFFER_REQUEST;
	o.objectKind = CUPTI_ACTIVITY_OBJECT_THREAD;
	o.objectId.pt.threadId = tid;
	o.start = t0 + (uint64_t)(0.3 * MS);
	o.end = t0 + (uint64_t)(0.31 * MS);
	ADD(o);
	kernel(t0, -1, 0, 8, "incomplete", 32, 8, 15); /* start unknown: dropped, counted */
	CUpti_ActivityName n;
	memset(&n, 0, sizeof n);
	n.kind = CUPTI_ACTIVITY_KIND_NAME; /* not translated: counted as unknown */
	ADD(n);
}

int main(int argc, char **argv)
{
	if (argc != 2) {
		fprintf(stderr, "usage: cupti_test OUT.fnc\n");
		return 2;
	}
	translate_kernel();
	translate_memcpy();
	translate_others();

	char why[512];
	if (col_cupti_load(getenv("FENNEC_CUPTI"), why, sizeof why) < 0) {
		printf("skip: %s\n", why);
		return failures ? 1 : 0;
	}
	/* CUPTI's own clock here is CLOCK_REALTIME: the calibrated offset is MONOTONIC - REALTIME. */
	uint64_t err;
	int64_t off = col_cupti_calibrate(&err);
	int64_t want = (int64_t)cm_mono_ns() - (int64_t)cm_real_ns();
	int64_t diff = off - want;
	if (diff < -1000000 || diff > 1000000 || err > 1000000) {
		printf("FAIL calibrate: offset %lld, CLOCK_MONOTONIC - CLOCK_REALTIME %lld, error %llu ns\n",
		       (long long)off, (long long)want, (unsigned long long)err);
		failures++;
	} else
		printf("ok calibrate (offset error %llu ns)\n", (unsigned long long)err);

	setenv("FENNEC_GPU", "all", 1);
	fennec_config cfg;
	fennec_config_init(&cfg);
	cfg.output = argv[1];
	cfg.sample_mode = FENNEC_SAMPLE_OFF;
	cfg.memory_mode = FENNEC_MEMORY_OFF;
	int rc = fennec_start(&cfg);
	if (rc) {
		printf("FAIL start: %s\n", fennec_strerror(rc));
		return 1;
	}
	col_gpu_set_clock(CUPTI_API_VERSION, FMT_GCLK_MONO, 0, 0); /* the records below are on CLOCK_MONOTONIC */
	/* The scenario's times are placed after the regions, from when "work" began: a busy
	 * machine may stretch a region, never move the synthetic records out of it. */
	fennec_region_begin("setup");
	spin_until(cm_mono_ns() + 2 * MS);
	fennec_region_end();
	fennec_region_begin("work");
	uint64_t t0 = cm_mono_ns() - 3 * MS / 2;
	spin_until(t0 + 12 * MS);
	fennec_region_end();
	buf = aligned_alloc(8, cap);
	memset(buf, 0, cap);
	scenario(t0);
	col_cupti_buffer_completed(NULL, 0, buf, cap, used); /* frees buf */
	rc = fennec_stop();
	if (rc) {
		printf("FAIL stop: %s\n", fennec_strerror(rc));
		failures++;
	} else
		printf("ok buffer_to_file\n");
	return failures ? 1 : 0;
}

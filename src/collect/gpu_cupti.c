/*
 * gpu_cupti.c - CUDA activity through CUPTI (docs/gpu.md). The CUDA driver loads
 * libfennec again through CUDA_INJECTION64_PATH (`fennec record --gpu`) and calls
 * InitializeInjection inside cuInit; that dlopens libcupti, puts CUPTI's clock on
 * CLOCK_MONOTONIC, enables the activity kinds and registers the buffer callbacks, which
 * translate every record (col_cupti_translate, a pure function the tests drive with
 * records built from these same headers) and hand them to the writer (gpu.c).
 *
 * Built with CUPTI's headers only (FENNEC_HAVE_CUPTI, set by the Makefile when it finds
 * them); nothing links libcupti or libcuda: both are the program's, at run time.
 */
#include "collect/gpu.h"

#ifndef FENNEC_HAVE_CUPTI

void col_cupti_flush(int forced) { (void)forced; }
void col_cupti_stop(void) {}
void col_cupti_gate(int on) { (void)on; }

#else

#include <dlfcn.h>
#include <stdio.h>
#include <stdlib.h>
#include <time.h>

#include <cupti.h>

#include "collect/gpu_cupti.h"

#define CUPTI_BUFFER_BYTES (8u << 20)

/* The CUPTI functions fennec calls, from the library loaded at run time. */
static struct {
	void *lib;
	CUptiResult (*GetVersion)(uint32_t *);
	CUptiResult (*GetResultString)(CUptiResult, const char **);
	CUptiResult (*RegisterCallbacks)(CUpti_BuffersCallbackRequestFunc, CUpti_BuffersCallbackCompleteFunc);
	CUptiResult (*Enable)(CUpti_ActivityKind);
	CUptiResult (*Disable)(CUpti_ActivityKind);
	CUptiResult (*FlushAll)(uint32_t);
	CUptiResult (*GetNextRecord)(uint8_t *, size_t, CUpti_Activity **);
	CUptiResult (*GetNumDropped)(CUcontext, uint32_t, size_t *);
	CUptiResult (*GetTimestamp)(uint64_t *);
	CUptiResult (*RegisterTimestamp)(CUpti_TimestampCallbackFunc); /* optional */
	CUptiResult (*SetThreadIdType)(CUpti_ActivityThreadIdType);   /* optional */
	CUptiResult (*GetCallbackName)(CUpti_CallbackDomain, uint32_t, const char **); /* optional */
	uint32_t version;
	int64_t offset_ns;      /* added to CUPTI's times (0 with the timestamp callback) */
	_Atomic int active;     /* kinds enabled; release-stored once the rest is set up */
	CUpti_ActivityKind enabled[16];
	int nenabled;
	int gate;               /* the kinds other than DEVICE are on (step schedule) */
} C;

/* ---- translation (pure) ---- */

static uint64_t shifted(uint64_t t, int64_t offset_ns) { return (uint64_t)((int64_t)t + offset_ns); }

static uint8_t mem_kind(unsigned k) { return k <= FMT_GMEM_MAX ? (uint8_t)k : FMT_GMEM_UNKNOWN; }

/* A timed record whose times CUPTI could not complete (a forced flush) is not kept. */
static int times(fmt_gpu *g, uint64_t start, uint64_t end, int64_t off)
{
	if (start == CUPTI_TIMESTAMP_UNKNOWN || end < start)
		return COL_CUPTI_INCOMPLETE;
	g->start_ns = shifted(start, off);
	g->end_ns = shifted(end, off);
	return COL_CUPTI_RECORD;
}

static uint32_t dim(int32_t v) { return v > 0 ? (uint32_t)v : 0; }

static int kernel(const CUpti_ActivityKernel10 *k, int64_t off, fmt_gpu *g, const char **name)
{
	g->type = FMT_GR_KERNEL;
	g->device = k->deviceId;
	g->context = k->contextId;
	g->stream = k->streamId;
	g->grid[0] = dim(k->gridX);
	g->grid[1] = dim(k->gridY);
	g->grid[2] = dim(k->gridZ);
	g->block[0] = dim(k->blockX);
	g->block[1] = dim(k->blockY);
	g->block[2] = dim(k->blockZ);
	g->regs = k->registersPerThread;
	g->smem_static = dim(k->staticSharedMemory);
	g->smem_dynamic = dim(k->dynamicSharedMemory);
	g->correlation = k->correlationId;
	*name = k->name;
	return times(g, k->start, k->end, off);
}

static int memcpy1(const CUpti_ActivityMemcpy6 *m, int64_t off, fmt_gpu *g)
{
	g->type = FMT_GR_MEMCPY;
	g->device = g->src_device = g->dst_device = m->deviceId;
	g->context = m->contextId;
	g->stream = m->streamId;
	g->kind = m->copyKind <= FMT_CPY_MAX ? m->copyKind : FMT_CPY_UNKNOWN;
	g->mem_kind = mem_kind(m->srcKind);
	g->dst_kind = mem_kind(m->dstKind);
	g->bytes = m->bytes;
	g->correlation = m->correlationId;
	return times(g, m->start, m->end, off);
}

static int memcpy2(const CUpti_ActivityMemcpyPtoP4 *m, int64_t off, fmt_gpu *g)
{
	g->type = FMT_GR_MEMCPY;
	g->device = m->deviceId;
	g->src_device = m->srcDeviceId;
	g->dst_device = m->dstDeviceId;
	g->context = m->contextId;
	g->stream = m->streamId;
	g->kind = m->copyKind <= FMT_CPY_MAX ? m->copyKind : FMT_CPY_UNKNOWN;
	g->mem_kind = mem_kind(m->srcKind);
	g->dst_kind = mem_kind(m->dstKind);
	g->bytes = m->bytes;
	g->correlation = m->correlationId;
	return times(g, m->start, m->end, off);
}

static int memset1(const CUpti_ActivityMemset4 *m, int64_t off, fmt_gpu *g)
{
	g->type = FMT_GR_MEMSET;
	g->device = m->deviceId;
	g->context = m->contextId;
	g->stream = m->streamId;
	g->mem_kind = mem_kind(m->memoryKind);
	g->bytes = m->bytes;
	g->value = m->value;
	g->correlation = m->correlationId;
	return times(g, m->start, m->end, off);
}

static int sync1(const CUpti_ActivitySynchronization2 *s, int64_t off, fmt_gpu *g)
{
	g->type = FMT_GR_SYNC;
	g->kind = (unsigned)s->type <= FMT_SYNC_MAX ? (uint8_t)s->type : FMT_SYNC_UNKNOWN;
	g->context = s->contextId;
	g->stream = s->streamId;
	g->correlation = s->correlationId;
	g->value = s->cudaEventId == CUPTI_SYNCHRONIZATION_INVALID_VALUE ? 0 : s->cudaEventId;
	return times(g, s->start, s->end, off);
}

static int api(const CUpti_ActivityAPI *a, int64_t off, fmt_gpu *g)
{
	g->type = FMT_GR_API;
	g->kind = a->kind == CUPTI_ACTIVITY_KIND_DRIVER ? FMT_API_DRIVER : FMT_API_RUNTIME;
	g->tid = a->threadId;
	g->cbid = a->cbid;
	g->correlation = a->correlationId;
	g->value = a->returnValue;
	return times(g, a->start, a->end, off);
}

static int memory(const CUpti_ActivityMemory4 *m, int64_t off, fmt_gpu *g)
{
	g->type = FMT_GR_MEMORY;
	if (m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_ALLOCATION)
		g->kind = FMT_GMOP_ALLOC;
	else if (m->memoryOperationType == CUPTI_ACTIVITY_MEMORY_OPERATION_TYPE_RELEASE)
		g->kind = FMT_GMOP_FREE;
	else
		return COL_CUPTI_SKIP;
	g->mem_kind = mem_kind(m->memoryKind);
	g->dst_kind = m->memoryPoolConfig.memoryPoolType <= CUPTI_ACTIVITY_MEMORY_POOL_TYPE_IMPORTED ?
			      (uint8_t)m->memoryPoolConfig.memoryPoolType : 0;
	g->device = m->deviceId;
	g->context = m->contextId;
	g->stream = m->streamId;
	g->address = m->address;
	g->bytes = m->bytes;
	g->correlation = m->correlationId;
	return times(g, m->timestamp, m->timestamp, off);
}

static int overhead(const CUpti_ActivityOverhead3 *o, int64_t off, fmt_gpu *g)
{
	g->type = FMT_GR_OVERHEAD;
	unsigned k = o->overheadKind;
	/* CUPTI numbers its own overheads n << 16; the format numbers them 1 + n. */
	g->kind = k == CUPTI_ACTIVITY_OVERHEAD_DRIVER_COMPILER ? 1 :
		  (k & 0xffff) == 0 && k >> 16 >= 1 && k >> 16 <= FMT_OVH_MAX - 1 ? (uint8_t)(1 + (k >> 16)) : 0;
	g->mem_kind = o->objectKind <= FMT_OBJ_MAX ? (uint8_t)o->objectKind : 0;
	switch (o->objectKind) {
	case CUPTI_ACTIVITY_OBJECT_PROCESS: g->tid = o->objectId.pt.processId; break;
	case CUPTI_ACTIVITY_OBJECT_THREAD: g->tid = o->objectId.pt.threadId; break;
	case CUPTI_ACTIVITY_OBJECT_DEVICE:
	case CUPTI_ACTIVITY_OBJECT_CONTEXT:
	case CUPTI_ACTIVITY_OBJECT_STREAM: g->tid = o->objectId.dcs.deviceId; break;
	default: break;
	}
	return times(g, o->start, o->end, off);
}

static int device(const CUpti_ActivityDevice5 *d, fmt_gpu_device *out)
{
	*out = (fmt_gpu_device){
		.id = d->id, .name = d->name, .has_uuid = 1, .cc_major = d->computeCapabilityMajor,
		.cc_minor = d->computeCapabilityMinor, .sm_count = d->numMultiprocessors,
		.warp_size = d->numThreadsPerWarp, .max_threads_per_block = d->maxThreadsPerBlock,
		.max_warps_per_sm = d->maxWarpsPerMultiprocessor, .max_blocks_per_sm = d->maxBlocksPerMultiprocessor,
		.regs_per_sm = d->maxRegistersPerMultiprocessor, .regs_per_block = d->maxRegistersPerBlock,
		.smem_per_sm = d->maxSharedMemoryPerMultiprocessor, .smem_per_block = d->maxSharedMemoryPerBlock,
		.memory_bytes = d->globalMemorySize, .clock_khz = d->coreClockRate};
	memcpy(out->uuid, d->uuid.bytes, 16);
	return COL_CUPTI_DEVICE;
}

int col_cupti_translate(const CUpti_Activity *rec, int64_t offset_ns, fmt_gpu *g, fmt_gpu_device *dev, const char **name)
{
	memset(g, 0, sizeof *g);
	*name = NULL;
	switch (rec->kind) {
	case CUPTI_ACTIVITY_KIND_KERNEL:
	case CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL:
		return kernel((const CUpti_ActivityKernel10 *)rec, offset_ns, g, name);
	case CUPTI_ACTIVITY_KIND_MEMCPY: return memcpy1((const CUpti_ActivityMemcpy6 *)rec, offset_ns, g);
	case CUPTI_ACTIVITY_KIND_MEMCPY2: return memcpy2((const CUpti_ActivityMemcpyPtoP4 *)rec, offset_ns, g);
	case CUPTI_ACTIVITY_KIND_MEMSET: return memset1((const CUpti_ActivityMemset4 *)rec, offset_ns, g);
	case CUPTI_ACTIVITY_KIND_SYNCHRONIZATION:
		return sync1((const CUpti_ActivitySynchronization2 *)rec, offset_ns, g);
	case CUPTI_ACTIVITY_KIND_RUNTIME:
	case CUPTI_ACTIVITY_KIND_DRIVER: return api((const CUpti_ActivityAPI *)rec, offset_ns, g);
	case CUPTI_ACTIVITY_KIND_MEMORY2: return memory((const CUpti_ActivityMemory4 *)rec, offset_ns, g);
	case CUPTI_ACTIVITY_KIND_OVERHEAD: return overhead((const CUpti_ActivityOverhead3 *)rec, offset_ns, g);
	case CUPTI_ACTIVITY_KIND_DEVICE: return device((const CUpti_ActivityDevice5 *)rec, dev);
	default: return COL_CUPTI_SKIP;
	}
}

/* ---- loading ---- */

static void *sym(const char *name, int required, int *missing)
{
	void *p = dlsym(C.lib, name);
	if (!p && required)
		*missing = 1;
	return p;
}

int col_cupti_load(const char *path, char *why, size_t n)
{
	if (C.lib)
		return 0;
	if (!path || !*path)
		path = "libcupti.so";
	C.lib = dlopen(path, RTLD_NOW | RTLD_LOCAL);
	if (!C.lib) {
		snprintf(why, n, "cannot load %s: %s", path, dlerror());
		return -1;
	}
	int missing = 0;
	*(void **)&C.GetVersion = sym("cuptiGetVersion", 1, &missing);
	*(void **)&C.GetResultString = sym("cuptiGetResultString", 0, &missing);
	*(void **)&C.RegisterCallbacks = sym("cuptiActivityRegisterCallbacks", 1, &missing);
	*(void **)&C.Enable = sym("cuptiActivityEnable", 1, &missing);
	*(void **)&C.Disable = sym("cuptiActivityDisable", 1, &missing);
	*(void **)&C.FlushAll = sym("cuptiActivityFlushAll", 1, &missing);
	*(void **)&C.GetNextRecord = sym("cuptiActivityGetNextRecord", 1, &missing);
	*(void **)&C.GetNumDropped = sym("cuptiActivityGetNumDroppedRecords", 0, &missing);
	*(void **)&C.GetTimestamp = sym("cuptiGetTimestamp", 1, &missing);
	*(void **)&C.RegisterTimestamp = sym("cuptiActivityRegisterTimestampCallback", 0, &missing);
	*(void **)&C.SetThreadIdType = sym("cuptiSetThreadIdType", 0, &missing);
	*(void **)&C.GetCallbackName = sym("cuptiGetCallbackName", 0, &missing);
	uint32_t v = 0;
	if (missing || C.GetVersion(&v) != CUPTI_SUCCESS) {
		snprintf(why, n, "%s is not a usable CUPTI library (functions missing)", path);
		goto fail;
	}
	/* Records are read with this build's structs: the library must lay them out the same,
	 * which CUPTI keeps within one API major (CUDA 13: 13xxxx). */
	if (v / 10000 != CUPTI_API_VERSION / 10000) {
		snprintf(why, n, "%s has CUPTI API version %u; this fennec was built with version %u", path, v,
			 (unsigned)CUPTI_API_VERSION);
		goto fail;
	}
	C.version = v;
	return 0;
fail:
	dlclose(C.lib);
	C.lib = NULL;
	return -1;
}

/* ---- clock ---- */

static uint64_t CUPTIAPI mono_now(void) { return cm_mono_ns(); }

/* CLOCK_MONOTONIC minus CUPTI's clock at the midpoint of the narrowest of a few brackets,
 * and half that bracket. */
int64_t col_cupti_calibrate(uint64_t *error_ns)
{
	uint64_t best = UINT64_MAX;
	int64_t off = 0;
	for (int i = 0; i < 7; i++) {
		uint64_t t, m0 = cm_mono_ns();
		if (C.GetTimestamp(&t) != CUPTI_SUCCESS)
			continue;
		uint64_t m1 = cm_mono_ns();
		if (m1 - m0 < best) {
			best = m1 - m0;
			off = (int64_t)(m0 + (m1 - m0) / 2) - (int64_t)t;
		}
	}
	*error_ns = best == UINT64_MAX ? 0 : best / 2;
	return off;
}

static void clock_setup(void)
{
	if (C.RegisterTimestamp && C.RegisterTimestamp(mono_now) == CUPTI_SUCCESS) {
		C.offset_ns = 0;
		col_gpu_set_clock(C.version, FMT_GCLK_MONO, 0, 0);
		return;
	}
	uint64_t err;
	C.offset_ns = col_cupti_calibrate(&err);
	col_gpu_set_clock(C.version, FMT_GCLK_OFFSET, C.offset_ns, err);
}

/* ---- buffers ---- */

static void CUPTIAPI buffer_requested(uint8_t **buffer, size_t *size, size_t *max_records)
{
	int was = col_mem_internal(1);
	void *p = NULL;
	if (posix_memalign(&p, 8, CUPTI_BUFFER_BYTES))
		p = NULL;
	col_mem_internal(was);
	*buffer = p;
	*size = p ? CUPTI_BUFFER_BYTES : 0;
	*max_records = 0;
}

/* An API function's name, kept per (domain, cbid) once asked. */
static const char *api_name(unsigned domain, uint32_t cbid)
{
	static const char *names[2][2048]; /* under the producer lock */
	if (!C.GetCallbackName || cbid >= 2048)
		return NULL;
	const char **slot = &names[domain][cbid];
	if (!*slot && C.GetCallbackName(domain == FMT_API_DRIVER ? CUPTI_CB_DOMAIN_DRIVER_API : CUPTI_CB_DOMAIN_RUNTIME_API,
					cbid, slot) != CUPTI_SUCCESS)
		*slot = NULL;
	return *slot;
}

void col_cupti_buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid)
{
	(void)size;
	int was = col_mem_internal(1);
	col_gpu_batch *b = col_gpu_batch_begin();
	CUpti_Activity *rec = NULL;
	uint64_t unknown = 0, incomplete = 0, lost = 0;
	while (!b && buffer && C.GetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS)
		lost++; /* no session records them */
	while (b && buffer && C.GetNextRecord(buffer, valid, &rec) == CUPTI_SUCCESS) {
		fmt_gpu g;
		fmt_gpu_device d;
		const char *name;
		switch (col_cupti_translate(rec, C.offset_ns, &g, &d, &name)) {
		case COL_CUPTI_RECORD:
			if (g.type == FMT_GR_API)
				name = api_name(g.kind, g.cbid);
			col_gpu_batch_add(b, &g, name);
			break;
		case COL_CUPTI_DEVICE: col_gpu_batch_device(b, &d); break;
		case COL_CUPTI_INCOMPLETE: incomplete++; break;
		default: unknown++; break;
		}
	}
	size_t dropped = 0;
	if (!C.GetNumDropped || C.GetNumDropped(ctx, stream, &dropped) != CUPTI_SUCCESS)
		dropped = 0;
	col_gpu_batch_end(b);
	col_gpu_count(dropped, unknown, incomplete + lost);
	free(buffer);
	col_mem_internal(was);
}

static void CUPTIAPI buffer_completed(CUcontext ctx, uint32_t stream, uint8_t *buffer, size_t size, size_t valid)
{
	col_cupti_buffer_completed(ctx, stream, buffer, size, valid);
}

/* ---- the session ---- */

static void enable(CUpti_ActivityKind k)
{
	if (C.nenabled < (int)ARRAY_LEN(C.enabled) && C.Enable(k) == CUPTI_SUCCESS)
		C.enabled[C.nenabled++] = k;
}

void col_cupti_flush(int forced)
{
	if (atomic_load_explicit(&C.active, memory_order_acquire))
		C.FlushAll(forced ? CUPTI_ACTIVITY_FLAG_FLUSH_FORCED : 0);
}

/* Follow the step schedule: the kinds (all but DEVICE, which costs nothing after start)
 * are on only in recorded steps. */
void col_cupti_gate(int on)
{
	if (!atomic_load_explicit(&C.active, memory_order_acquire) || on == C.gate)
		return;
	C.gate = on;
	for (int i = 0; i < C.nenabled; i++)
		if (C.enabled[i] != CUPTI_ACTIVITY_KIND_DEVICE)
			(on ? C.Enable : C.Disable)(C.enabled[i]);
}

void col_cupti_stop(void)
{
	if (!atomic_load_explicit(&C.active, memory_order_acquire))
		return;
	C.FlushAll(CUPTI_ACTIVITY_FLAG_FLUSH_FORCED);
	for (int i = 0; i < C.nenabled; i++)
		C.Disable(C.enabled[i]);
	C.nenabled = 0;
	C.active = 0;
}

/* Exit: CUDA tears itself down in handlers registered before this one, which run after
 * it; flush while CUPTI still works. The writer's last drain takes the records. */
static void cupti_atexit(void) { col_cupti_flush(1); }

int col_cupti_start(int mode, char *why, size_t n)
{
	if (C.active)
		return 0;
	if (col_cupti_load(getenv("FENNEC_CUPTI"), why, n) < 0)
		return -1;
	if (C.SetThreadIdType)
		C.SetThreadIdType(CUPTI_ACTIVITY_THREAD_ID_TYPE_SYSTEM); /* OS tids, as THREAD records have */
	clock_setup(); /* before any kind is enabled, or early records keep CUPTI's clock */
	if (C.RegisterCallbacks(buffer_requested, buffer_completed) != CUPTI_SUCCESS) {
		snprintf(why, n, "cuptiActivityRegisterCallbacks failed");
		return -1;
	}
	enable(CUPTI_ACTIVITY_KIND_DEVICE);
	enable(CUPTI_ACTIVITY_KIND_CONCURRENT_KERNEL);
	if (mode == COL_GPU_ALL) {
		enable(CUPTI_ACTIVITY_KIND_MEMCPY);
		enable(CUPTI_ACTIVITY_KIND_MEMCPY2);
		enable(CUPTI_ACTIVITY_KIND_MEMSET);
		enable(CUPTI_ACTIVITY_KIND_SYNCHRONIZATION);
		enable(CUPTI_ACTIVITY_KIND_RUNTIME);
		enable(CUPTI_ACTIVITY_KIND_DRIVER);
		enable(CUPTI_ACTIVITY_KIND_MEMORY2);
		enable(CUPTI_ACTIVITY_KIND_OVERHEAD);
	}
	C.gate = 1; /* the writer's next look (2 ms) applies the step schedule */
	atomic_store_explicit(&C.active, 1, memory_order_release);
	atexit(cupti_atexit);
	return 0;
}

/*
 * Called by the CUDA driver inside cuInit when CUDA_INJECTION64_PATH names this library.
 * A failure is counted nowhere but here: `fennec record --gpu` already said what was
 * missing before the program started, and the program must run on regardless.
 */
FENNEC_API int InitializeInjection(void)
{
	static int done;
	if (done++)
		return 1;
	int mode = col_gpu_mode_parse(getenv("FENNEC_GPU"));
	if (mode <= COL_GPU_OFF)
		return 1;
	int was = col_mem_internal(1);
	char why[256];
	col_cupti_start(mode, why, sizeof why);
	col_mem_internal(was);
	return 1;
}

#endif

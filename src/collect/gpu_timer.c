/*
 * gpu_timer.c - GPU timers for code the user owns (include/fennec.h, docs/gpu.md): CUDA
 * events recorded on the caller's stream through the driver API (libcuda, loaded at run
 * time), resolved later by the writer thread, which never waits for the GPU: a timer whose
 * events have not completed stays for the next flush. And fennec_gpu_time, which times a
 * function with warm-up and repeats and does wait, as a benchmark must.
 */
#include "collect/gpu.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>

#define TIMER_SLOTS 4096
#define CU_NOT_READY 600

enum { T_FREE = 0, T_RUNNING = 1, T_ENDED = 2 };

typedef struct tslot {
	_Atomic int state;
	void *start, *stop;     /* CUevents, made on the slot's first use and kept */
	void *ctx;              /* the context they belong to */
	const char *name;
	uint64_t stream, host_ns, tid, step;
} tslot;

static tslot slots[TIMER_SLOTS];
static _Atomic uint32_t next_slot;
static _Atomic uint32_t ended;      /* slots waiting for the writer */

/* The driver functions timers use (CUDA's cu* API; handles are pointers). */
static struct {
	int (*EventCreate)(void **, unsigned);
	int (*EventRecord)(void *, void *);
	int (*EventQuery)(void *);
	int (*EventSynchronize)(void *);
	int (*EventElapsed)(float *, void *, void *);
	int (*EventDestroy)(void *);
	int (*CtxGetCurrent)(void **);
	int (*CtxPush)(void *);
	int (*CtxPop)(void **);
	int ok;
} D;
static pthread_once_t driver_once = PTHREAD_ONCE_INIT;

static void driver_load(void)
{
	const char *path = getenv("FENNEC_LIBCUDA");
	void *h = dlopen(path && *path ? path : "libcuda.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!h)
		return;
	*(void **)&D.EventCreate = dlsym(h, "cuEventCreate");
	*(void **)&D.EventRecord = dlsym(h, "cuEventRecord");
	*(void **)&D.EventQuery = dlsym(h, "cuEventQuery");
	*(void **)&D.EventSynchronize = dlsym(h, "cuEventSynchronize");
	*(void **)&D.EventElapsed = dlsym(h, "cuEventElapsedTime_v2");
	if (!D.EventElapsed)
		*(void **)&D.EventElapsed = dlsym(h, "cuEventElapsedTime");
	*(void **)&D.EventDestroy = dlsym(h, "cuEventDestroy_v2");
	*(void **)&D.CtxGetCurrent = dlsym(h, "cuCtxGetCurrent");
	*(void **)&D.CtxPush = dlsym(h, "cuCtxPushCurrent_v2");
	*(void **)&D.CtxPop = dlsym(h, "cuCtxPopCurrent_v2");
	D.ok = D.EventCreate && D.EventRecord && D.EventQuery && D.EventSynchronize && D.EventElapsed &&
	       D.EventDestroy && D.CtxGetCurrent && D.CtxPush && D.CtxPop;
}

/* The driver and the calling thread's context: 0, FENNEC_ENODRIVER or FENNEC_ENOCONTEXT. */
static int driver(void **ctx)
{
	pthread_once(&driver_once, driver_load);
	*ctx = NULL;
	if (!D.ok)
		return FENNEC_ENODRIVER;
	return D.CtxGetCurrent(ctx) == 0 && *ctx ? 0 : FENNEC_ENOCONTEXT;
}

FENNEC_API int fennec_gpu_timer_begin(const char *name, void *stream)
{
	void *ctx;
	if (!atomic_load_explicit(&col_on, memory_order_relaxed))
		return FENNEC_ENOTRUNNING;
	int drc = driver(&ctx);
	if (drc < 0)
		return drc;
	for (int tries = 0; tries < 64; tries++) {
		uint32_t i = atomic_fetch_add(&next_slot, 1) % TIMER_SLOTS;
		tslot *s = &slots[i];
		int expect = T_FREE;
		if (!atomic_compare_exchange_strong(&s->state, &expect, T_RUNNING))
			continue;
		if (s->ctx != ctx) /* events belong to a context: a slot moving to another makes new ones */
			s->start = s->stop = NULL;
		if ((!s->start && D.EventCreate(&s->start, 0)) || (!s->stop && D.EventCreate(&s->stop, 0)) ||
		    D.EventRecord(s->start, stream)) {
			s->start = s->stop = NULL;
			atomic_store(&s->state, T_FREE);
			return FENNEC_EIO;
		}
		s->ctx = ctx;
		s->name = name;
		s->stream = (uint64_t)(uintptr_t)stream;
		s->host_ns = cm_mono_ns();
		s->tid = (uint64_t)syscall(SYS_gettid);
		s->step = col_step_index();
		return (int)i;
	}
	return FENNEC_EFULL;
}

FENNEC_API int fennec_gpu_timer_end(int handle)
{
	if (handle < 0 || handle >= TIMER_SLOTS)
		return FENNEC_EINVAL;
	tslot *s = &slots[handle];
	if (atomic_load(&s->state) != T_RUNNING)
		return FENNEC_EINVAL;
	int rc = D.EventRecord(s->stop, (void *)(uintptr_t)s->stream) ? FENNEC_EIO : 0;
	if (rc) {
		atomic_store(&s->state, T_FREE);
		return rc;
	}
	atomic_fetch_add(&ended, 1);
	atomic_store_explicit(&s->state, T_ENDED, memory_order_release);
	return 0;
}

/* A timer's record: the host's time at begin, the events' elapsed time. */
static void timer_record(col_gpu_batch *b, const char *name, uint64_t host_ns, float ms, uint64_t tid,
			 uint64_t stream, uint64_t step)
{
	fmt_gpu g = {.type = FMT_GR_TIMER, .start_ns = host_ns, .tid = tid, .value = stream, .step = step};
	g.end_ns = host_ns + (uint64_t)(ms > 0 ? (double)ms * 1e6 + 0.5 : 0);
	col_gpu_batch_add(b, &g, name ? name : "gpu timer");
}

void col_gpu_timers_poll(void)
{
	if (!atomic_load(&ended))
		return;
	col_gpu_batch *b = col_gpu_batch_begin();
	for (uint32_t i = 0; i < TIMER_SLOTS; i++) {
		tslot *s = &slots[i];
		if (atomic_load_explicit(&s->state, memory_order_acquire) != T_ENDED)
			continue;
		void *old;
		float ms = 0;
		if (D.CtxPush(s->ctx))
			continue;
		int q = D.EventQuery(s->stop);
		if (q == 0 && D.EventElapsed(&ms, s->start, s->stop) == 0)
			timer_record(b, s->name, s->host_ns, ms, s->tid, s->stream, s->step);
		else if (q != CU_NOT_READY)
			col_gpu_count(0, 0, 1);
		D.CtxPop(&old);
		if (q == CU_NOT_READY)
			continue; /* the GPU is not there yet: next flush */
		atomic_fetch_sub(&ended, 1);
		atomic_store(&s->state, T_FREE);
	}
	col_gpu_batch_end(b);
}

static int cmp_double(const void *a, const void *b)
{
	double x = *(const double *)a, y = *(const double *)b;
	return (x > y) - (x < y);
}

static void stats(double *v, uint32_t n, fennec_gpu_stats *out)
{
	double sum = 0, sq = 0;
	for (uint32_t i = 0; i < n; i++)
		sum += v[i];
	double mean = sum / n;
	for (uint32_t i = 0; i < n; i++)
		sq += (v[i] - mean) * (v[i] - mean);
	qsort(v, n, sizeof *v, cmp_double);
	out->count = n;
	out->mean_ns = mean;
	out->std_ns = __builtin_sqrt(sq / n);
	out->min_ns = v[0];
	out->max_ns = v[n - 1];
	out->median_ns = n % 2 ? v[n / 2] : (v[n / 2 - 1] + v[n / 2]) / 2;
}

FENNEC_API int fennec_gpu_time(const char *name, void (*fn)(void *arg, void *stream), void *arg, void *stream,
			       uint32_t warmup, uint32_t repeat, fennec_gpu_stats *out)
{
	void *ctx;
	if (!fn || !out || out->size < sizeof *out || !repeat)
		return FENNEC_EINVAL;
	int drc = driver(&ctx);
	if (drc < 0)
		return drc;
	int was = col_mem_internal(1);
	void **ev = calloc(2 * (size_t)repeat, sizeof *ev);
	double *ns = malloc(repeat * sizeof *ns);
	uint64_t *host = malloc(repeat * sizeof *host);
	col_mem_internal(was);
	int rc = ev && ns && host ? 0 : FENNEC_ENOMEM;
	for (uint32_t i = 0; i < 2 * repeat && !rc; i++)
		if (D.EventCreate(&ev[i], 0))
			rc = FENNEC_EIO;
	for (uint32_t i = 0; i < warmup && !rc; i++)
		fn(arg, stream);
	for (uint32_t i = 0; i < repeat && !rc; i++) {
		host[i] = cm_mono_ns();
		if (D.EventRecord(ev[2 * i], stream))
			rc = FENNEC_EIO;
		fn(arg, stream);
		if (!rc && D.EventRecord(ev[2 * i + 1], stream))
			rc = FENNEC_EIO;
	}
	if (!rc && D.EventSynchronize(ev[2 * repeat - 1]))
		rc = FENNEC_EIO;
	for (uint32_t i = 0; i < repeat && !rc; i++) {
		float ms;
		if (D.EventElapsed(&ms, ev[2 * i], ev[2 * i + 1]))
			rc = FENNEC_EIO;
		ns[i] = (double)ms * 1e6;
	}
	if (!rc) {
		col_gpu_batch *b = col_gpu_batch_begin(); /* NULL without a recording: nothing kept */
		uint64_t tid = (uint64_t)syscall(SYS_gettid), step = col_step_index();
		for (uint32_t i = 0; b && i < repeat; i++)
			timer_record(b, name, host[i], (float)(ns[i] / 1e6), tid, (uint64_t)(uintptr_t)stream, step);
		col_gpu_batch_end(b);
		stats(ns, repeat, out);
	}
	for (uint32_t i = 0; ev && i < 2 * repeat; i++)
		if (ev[i])
			D.EventDestroy(ev[i]);
	was = col_mem_internal(1);
	free(ev);
	free(ns);
	free(host);
	col_mem_internal(was);
	return rc;
}

/*
 * gpu.c - the GPU side of the session (docs/gpu.md): batches of GPU records from their
 * producers (CUPTI's buffer callbacks in gpu_cupti.c, NVML rounds here) to the writer,
 * which frames each batch as a GPU chunk; the per-file string table; NVML, dlopen'ed and
 * read by the writer thread at the GPU sampling period. Built everywhere: nothing here
 * needs a CUDA header.
 */
#include "collect/gpu.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>

#define GPU_PENDING_MAX (64u << 20) /* encoded bytes waiting for the writer, at most */
#define GPU_MAX_DEVICES 64
#define NVML_FIRST_ID 65536          /* NVML devices no CUDA device was matched to */

typedef struct gstr {
	uint64_t hash;
	uint32_t id;                 /* 0: empty slot */
	uint64_t batch;              /* the batch that defined it; 0: its batch was lost */
	char *s;
} gstr;

typedef struct gdev {
	fmt_gpu_device d;
	char name[96];               /* d.name points here */
} gdev;

static struct {
	int mode;                    /* enum col_gpu_mode of the session */
	uint64_t interval_ns;        /* NVML period */
	int pcie;                    /* also read PCIe throughput (NVML blocks 20 ms for it) */
	pthread_mutex_t lock;        /* producers: strings, devices, batch order */
	_Atomic(col_gpu_batch *) done; /* finished batches, newest first */
	_Atomic uint64_t pending;    /* their bytes */
	_Atomic uint64_t records, dropped, cupti_dropped, unknown;
	gstr *str;                   /* open addressing on the string's hash */
	uint32_t str_cap, nstr;
	uint64_t batches;            /* batches begun (their sequence numbers) */
	gdev dev[GPU_MAX_DEVICES];   /* CUDA devices seen (DEVICE records), for NVML and new files */
	uint32_t ndev;
	int devices_written;         /* in this session's file */
	_Atomic int accepting;       /* batches are taken: a session began and has not ended */
	uint64_t cupti_version;      /* how CUPTI's times were mapped (col_gpu_set_clock) */
	unsigned clock;
	int64_t offset_ns;
	uint64_t offset_error_ns;
	fmt_gpu_info written;        /* the prefix last written to this file */
} G = {.lock = PTHREAD_MUTEX_INITIALIZER, .clock = FMT_GCLK_NONE};

int col_gpu_mode_parse(const char *s)
{
	if (!s || !*s)
		return -1;
	if (!strcmp(s, "off") || !strcmp(s, "0"))
		return COL_GPU_OFF;
	if (!strcmp(s, "on") || !strcmp(s, "all") || !strcmp(s, "1"))
		return COL_GPU_ALL;
	if (!strcmp(s, "kernels"))
		return COL_GPU_KERNELS;
	return -1;
}

int col_gpu_mode(void) { return G.mode; }

void col_gpu_set_clock(uint64_t cupti_version, unsigned clock, int64_t offset_ns, uint64_t offset_error_ns)
{
	pthread_mutex_lock(&G.lock);
	G.cupti_version = cupti_version;
	G.clock = clock;
	G.offset_ns = offset_ns;
	G.offset_error_ns = offset_error_ns;
	pthread_mutex_unlock(&G.lock);
}

void col_gpu_count(uint64_t cupti_dropped, uint64_t unknown, uint64_t dropped)
{
	atomic_fetch_add(&G.cupti_dropped, cupti_dropped);
	atomic_fetch_add(&G.unknown, unknown);
	atomic_fetch_add(&G.dropped, dropped);
}

/* ---- strings (under G.lock) ---- */

static uint64_t str_hash(const char *s)
{
	uint64_t h = 1469598103934665603ull;
	for (; *s; s++)
		h = (h ^ (uint8_t)*s) * 1099511628211ull;
	return h | 1;
}

static void strings_reset(void)
{
	for (uint32_t i = 0; i < G.str_cap; i++)
		free(G.str[i].s);
	free(G.str);
	G.str = NULL;
	G.str_cap = G.nstr = 0;
}

static int strings_grow(void)
{
	uint32_t cap = G.str_cap ? G.str_cap * 2 : 1024;
	gstr *t = calloc(cap, sizeof *t);
	if (!t)
		return -1;
	for (uint32_t i = 0; i < G.str_cap; i++) {
		gstr *e = &G.str[i];
		if (!e->id)
			continue;
		uint32_t k = (uint32_t)e->hash & (cap - 1);
		while (t[k].id)
			k = (k + 1) & (cap - 1);
		t[k] = *e;
	}
	free(G.str);
	G.str = t;
	G.str_cap = cap;
	return 0;
}

/* The id of `s` in this file; a new one is defined in b first (and one whose defining
 * batch was lost, again). 0 when out of memory. */
static uint32_t intern(col_gpu_batch *b, const char *s)
{
	if ((G.nstr + 1) * 2 > G.str_cap && strings_grow() < 0)
		return 0;
	uint64_t h = str_hash(s);
	uint32_t k = (uint32_t)h & (G.str_cap - 1);
	for (; G.str[k].id; k = (k + 1) & (G.str_cap - 1))
		if (G.str[k].hash == h && !strcmp(G.str[k].s, s))
			break;
	gstr *e = &G.str[k];
	if (!e->id) {
		char *copy = strdup(s);
		if (!copy)
			return 0;
		*e = (gstr){h, ++G.nstr, 0, copy};
	}
	if (!e->batch) {
		e->batch = b->seq;
		fmt_gpu_string_put(&b->body, e->id, s, strlen(s));
	}
	return e->id;
}

/* Batch `seq` was lost: its strings are defined again by the next batch that uses them. */
static void strings_lost(uint64_t seq)
{
	for (uint32_t i = 0; i < G.str_cap; i++)
		if (G.str[i].id && G.str[i].batch == seq)
			G.str[i].batch = 0;
}

/* ---- batches ---- */

/* From a session's start to its last drain (which comes after col_on is cleared), with or
 * without --gpu: GPU timers need no more than a session. */
static int recording(void) { return atomic_load(&G.accepting) != 0; }

int col_gpu_recording(void) { return recording(); }

/* The GPUX chunk being built (1.4: NVTX start/end ranges and marks, NVLink counters): the
 * writer thread's only, so no lock. */
static struct {
	cm_buf body;
	uint64_t prev_ns;
} X;

static void gpux_add(const fmt_gpu *r)
{
	int was = col_mem_internal(1);
	fmt_gpux_put(&X.body, r, &X.prev_ns);
	col_mem_internal(was);
}

/* Frame what the writer gathered as one GPUX chunk. */
static void gpux_emit(void (*emit)(unsigned type, cm_buf *raw))
{
	int was = col_mem_internal(1);
	col_nvtx_drain(&X.body, &X.prev_ns);
	if (X.body.len && !X.body.failed) {
		cm_buf raw = {0};
		fmt_gpux_prefix(&raw, col_nvtx_dropped());
		cm_buf_put(&raw, X.body.data, X.body.len);
		emit(FMT_GPUX, &raw);
		cm_buf_free(&raw);
	}
	X.body.len = 0;
	X.body.failed = 0;
	X.prev_ns = 0;
	col_mem_internal(was);
}

col_gpu_batch *col_gpu_batch_begin(void)
{
	if (!recording())
		return NULL;
	int was = col_mem_internal(1);
	col_gpu_batch *b = calloc(1, sizeof *b);
	col_mem_internal(was);
	if (b) {
		pthread_mutex_lock(&G.lock);
		b->seq = ++G.batches;
	}
	return b;
}

void col_gpu_batch_add(col_gpu_batch *b, fmt_gpu *r, const char *name)
{
	if (!b) {
		atomic_fetch_add(&G.dropped, 1);
		return;
	}
	int was = col_mem_internal(1);
	r->name = name && *name ? intern(b, name) : 0;
	fmt_gpu_put(&b->body, r, &b->prev_ns);
	b->records++;
	col_mem_internal(was);
}

/* Remember a CUDA device (for NVML and for later files); the latest description wins. */
static void remember_device(const fmt_gpu_device *d)
{
	uint32_t i = 0;
	while (i < G.ndev && G.dev[i].d.id != d->id)
		i++;
	if (i == GPU_MAX_DEVICES)
		return;
	gdev *g = &G.dev[i];
	g->d = *d;
	snprintf(g->name, sizeof g->name, "%s", d->name ? d->name : "");
	g->d.name = g->name;
	if (i == G.ndev)
		G.ndev++;
}

void col_gpu_batch_device(col_gpu_batch *b, const fmt_gpu_device *d)
{
	if (!b)
		return;
	int was = col_mem_internal(1);
	fmt_gpu_device_put(&b->body, d);
	remember_device(d);
	col_mem_internal(was);
}

static void batch_free(col_gpu_batch *b)
{
	int was = col_mem_internal(1);
	cm_buf_free(&b->body);
	free(b);
	col_mem_internal(was);
}

void col_gpu_batch_end(col_gpu_batch *b)
{
	if (!b)
		return;
	uint64_t len = b->body.len;
	if (b->body.failed || !len || atomic_load(&G.pending) + len > GPU_PENDING_MAX) {
		strings_lost(b->seq);
		atomic_fetch_add(&G.dropped, b->records);
		pthread_mutex_unlock(&G.lock);
		batch_free(b);
		return;
	}
	atomic_fetch_add(&G.pending, len);
	atomic_fetch_add(&G.records, b->records);
	col_gpu_batch *top = atomic_load(&G.done);
	do
		b->next = top;
	while (!atomic_compare_exchange_weak(&G.done, &top, b));
	pthread_mutex_unlock(&G.lock);
}

/* ---- NVML (the writer thread only) ---- */

typedef struct nvml_util { unsigned gpu, memory; } nvml_util;
typedef struct nvml_mem { unsigned long long total, free, used; } nvml_mem;
enum { NVML_OK = 0, NVML_TEMP_GPU = 0, NVML_CLK_SM = 1, NVML_CLK_MEM = 2, NVML_PCIE_TX = 0, NVML_PCIE_RX = 1 };
/* nvml.h: nvmlFieldValue_t, and the NVLink data counters (cumulative KiB, all links) */
typedef struct nvml_field {
	unsigned field_id, scope_id;
	long long timestamp_us, latency_us;
	int value_type, ret;             /* nvmlValueType_t, nvmlReturn_t */
	union {
		double d;
		unsigned u;
		unsigned long ul;
		unsigned long long ull;
		long long sll;
		int si;
	} value;
} nvml_field;
enum { NVML_FI_NVLINK_DATA_TX = 138, NVML_FI_NVLINK_DATA_RX = 139 };
enum { NVML_VT_DOUBLE, NVML_VT_UINT, NVML_VT_ULONG, NVML_VT_ULLONG, NVML_VT_SLLONG, NVML_VT_SINT };

static struct {
	void *lib;
	int (*init)(void);
	int (*count)(unsigned *);
	int (*handle)(unsigned, void **);
	int (*get_uuid)(void *, char *, unsigned);
	int (*util)(void *, nvml_util *);
	int (*mem)(void *, nvml_mem *);
	int (*power)(void *, unsigned *);
	int (*temp)(void *, int, unsigned *);
	int (*clock)(void *, int, unsigned *);
	int (*pcie)(void *, int, unsigned *);
	int (*fields)(void *, int, nvml_field *);
	int (*energy)(void *, unsigned long long *);
	unsigned n;
	void *dev[GPU_MAX_DEVICES];
	uint8_t uuid[GPU_MAX_DEVICES][16];
	int has_uuid[GPU_MAX_DEVICES];
	uint32_t failed[GPU_MAX_DEVICES]; /* fields the device refused: not asked again */
	uint8_t no_nvlink[GPU_MAX_DEVICES]; /* the device reports no NVLink counters */
	uint64_t next_ns;
	int tried;
} N;

/* "GPU-8e3f...-..." -> 16 bytes; 0 or -1. */
static int parse_uuid(const char *s, uint8_t out[16])
{
	if (strncmp(s, "GPU-", 4))
		return -1;
	int n = 0;
	for (s += 4; *s && n < 32; s++) {
		int v = *s >= '0' && *s <= '9' ? *s - '0' : *s >= 'a' && *s <= 'f' ? *s - 'a' + 10 :
			*s >= 'A' && *s <= 'F' ? *s - 'A' + 10 : -1;
		if (v < 0) {
			if (*s == '-')
				continue;
			return -1;
		}
		out[n / 2] = (uint8_t)(n & 1 ? out[n / 2] | v : v << 4);
		n++;
	}
	return n == 32 ? 0 : -1;
}

static void nvml_open(void)
{
	N.tried = 1;
	const char *path = getenv("FENNEC_NVML");
	N.lib = dlopen(path && *path ? path : "libnvidia-ml.so.1", RTLD_NOW | RTLD_LOCAL);
	if (!N.lib)
		return;
	*(void **)&N.init = dlsym(N.lib, "nvmlInit_v2");
	*(void **)&N.count = dlsym(N.lib, "nvmlDeviceGetCount_v2");
	*(void **)&N.handle = dlsym(N.lib, "nvmlDeviceGetHandleByIndex_v2");
	*(void **)&N.get_uuid = dlsym(N.lib, "nvmlDeviceGetUUID");
	*(void **)&N.util = dlsym(N.lib, "nvmlDeviceGetUtilizationRates");
	*(void **)&N.mem = dlsym(N.lib, "nvmlDeviceGetMemoryInfo");
	*(void **)&N.power = dlsym(N.lib, "nvmlDeviceGetPowerUsage");
	*(void **)&N.temp = dlsym(N.lib, "nvmlDeviceGetTemperature");
	*(void **)&N.clock = dlsym(N.lib, "nvmlDeviceGetClockInfo");
	*(void **)&N.pcie = dlsym(N.lib, "nvmlDeviceGetPcieThroughput");
	*(void **)&N.fields = dlsym(N.lib, "nvmlDeviceGetFieldValues");
	*(void **)&N.energy = dlsym(N.lib, "nvmlDeviceGetTotalEnergyConsumption");
	unsigned n = 0;
	if (!N.init || !N.count || !N.handle || N.init() != NVML_OK || N.count(&n) != NVML_OK) {
		dlclose(N.lib);
		N.lib = NULL;
		return;
	}
	for (unsigned i = 0; i < n && N.n < GPU_MAX_DEVICES; i++) {
		char u[96];
		if (N.handle(i, &N.dev[N.n]) != NVML_OK)
			continue;
		N.has_uuid[N.n] = N.get_uuid && N.get_uuid(N.dev[N.n], u, sizeof u) == NVML_OK && parse_uuid(u, N.uuid[N.n]) == 0;
		N.n++;
	}
}

/* The CUDA id of NVML device i (by UUID), else NVML_FIRST_ID + i. */
static uint32_t nvml_device_id(unsigned i)
{
	for (uint32_t k = 0; N.has_uuid[i] && k < G.ndev; k++)
		if (G.dev[k].d.has_uuid && !memcmp(G.dev[k].d.uuid, N.uuid[i], 16))
			return G.dev[k].d.id;
	return NVML_FIRST_ID + i;
}

/* Ask for one field; a device that refuses it is not asked again. */
#define NV_READ(i, g, field, call, v_)                                  \
	do {                                                           \
		if (!(N.failed[i] >> (field) & 1)) {                   \
			if ((call) == NVML_OK) {                        \
				(g).nvml[field] = (v_);                 \
				(g).value |= 1u << (field);             \
			} else                                          \
				N.failed[i] |= 1u << (field);           \
		}                                                      \
	} while (0)

/* A field value as an integer (0 for a negative or unknown type). */
static uint64_t field_u64(const nvml_field *f)
{
	switch (f->value_type) {
	case NVML_VT_DOUBLE: return f->value.d > 0 ? (uint64_t)f->value.d : 0;
	case NVML_VT_UINT: return f->value.u;
	case NVML_VT_ULONG: return f->value.ul;
	case NVML_VT_ULLONG: return f->value.ull;
	case NVML_VT_SLLONG: return f->value.sll > 0 ? (uint64_t)f->value.sll : 0;
	case NVML_VT_SINT: return f->value.si > 0 ? (uint64_t)f->value.si : 0;
	default: return 0;
	}
}

/* NVLink data sent and received by device i since the driver loaded, into the GPUX chunk;
 * a device that does not report both counters is not asked again. The reading is stamped
 * with the middle of the call that made it: rates divide counter deltas by these times, and
 * the round's other NVML calls (the PCIe counters wait 20 ms) or a preemption before this
 * call would otherwise skew them. */
static void nvlink_read(unsigned i, uint32_t device)
{
	if (!N.fields || N.no_nvlink[i])
		return;
	nvml_field f[2];
	memset(f, 0, sizeof f);
	f[0].field_id = NVML_FI_NVLINK_DATA_TX;
	f[1].field_id = NVML_FI_NVLINK_DATA_RX;
	uint64_t t0 = cm_mono_ns();
	if (N.fields(N.dev[i], 2, f) != NVML_OK || f[0].ret != NVML_OK || f[1].ret != NVML_OK) {
		N.no_nvlink[i] = 1;
		return;
	}
	uint64_t t_ns = t0 + (cm_mono_ns() - t0) / 2;
	fmt_gpu g = {.type = FMT_GR_NVLINK, .device = device, .start_ns = t_ns, .end_ns = t_ns,
		     .tx_bytes = field_u64(&f[0]) * 1024, .rx_bytes = field_u64(&f[1]) * 1024};
	gpux_add(&g);
}

static void nvml_round(void)
{
	col_gpu_batch *b = col_gpu_batch_begin();
	if (!b)
		return;
	for (unsigned i = 0; i < N.n; i++) {
		void *d = N.dev[i];
		fmt_gpu g = {.type = FMT_GR_NVML, .start_ns = cm_mono_ns()};
		g.device = nvml_device_id(i);
		g.end_ns = g.start_ns;
		nvml_util u;
		nvml_mem m;
		unsigned v = 0;
		int ru = N.util ? N.util(d, &u) : -1, rm = N.mem ? N.mem(d, &m) : -1;
		NV_READ(i, g, FMT_NV_SM_PCT, ru, u.gpu);
		NV_READ(i, g, FMT_NV_MEM_PCT, ru, u.memory);
		NV_READ(i, g, FMT_NV_MEM_USED, rm, m.used);
		NV_READ(i, g, FMT_NV_MEM_TOTAL, rm, m.total);
		NV_READ(i, g, FMT_NV_POWER_MW, N.power ? N.power(d, &v) : -1, v);
		NV_READ(i, g, FMT_NV_TEMP_C, N.temp ? N.temp(d, NVML_TEMP_GPU, &v) : -1, v);
		NV_READ(i, g, FMT_NV_SM_MHZ, N.clock ? N.clock(d, NVML_CLK_SM, &v) : -1, v);
		NV_READ(i, g, FMT_NV_MEM_MHZ, N.clock ? N.clock(d, NVML_CLK_MEM, &v) : -1, v);
		if (G.pcie) { /* KB/s, over a 20 ms window the call waits for */
			NV_READ(i, g, FMT_NV_PCIE_TX, N.pcie ? N.pcie(d, NVML_PCIE_TX, &v) : -1, (uint64_t)v * 1024);
			NV_READ(i, g, FMT_NV_PCIE_RX, N.pcie ? N.pcie(d, NVML_PCIE_RX, &v) : -1, (uint64_t)v * 1024);
		}
		if (g.value)
			col_gpu_batch_add(b, &g, NULL);
		nvlink_read(i, g.device);
	}
	col_gpu_batch_end(b);
}

int col_gpu_energy_mj(unsigned i, uint64_t *mj)
{
	if (!G.mode || !N.lib || i >= N.n)
		return -1;
	unsigned long long v = 0;
	if (!N.energy || N.energy(N.dev[i], &v) != NVML_OK)
		return 1;
	*mj = v;
	return 0;
}

void col_gpu_tick(uint64_t now_ns)
{
	if (!G.mode)
		return;
	/* A step schedule (--step-schedule, --step-fraction) gates CUPTI like the regions:
	 * activity records only in recorded steps, switched within a writer slice (2 ms). */
	col_cupti_gate(atomic_load_explicit(&col_gate, memory_order_relaxed));
	if (!N.lib || now_ns < N.next_ns)
		return;
	N.next_ns = now_ns + G.interval_ns;
	nvml_round();
}

/* ---- the session ---- */

static void discard_batches(void)
{
	col_gpu_batch *b = atomic_exchange(&G.done, NULL);
	while (b) {
		col_gpu_batch *next = b->next;
		batch_free(b);
		b = next;
	}
	atomic_store(&G.pending, 0);
}

void col_gpu_prepare(void)
{
	/* What cannot be used is said (col_config_warn()), the default taken instead. */
	const char *gm = getenv("FENNEC_GPU");
	int mode = col_gpu_mode_parse(gm);
	if (mode < 0 && gm && *gm)
		col_config_warn("FENNEC_GPU", gm, "expected one of all, kernels, off; GPU profiling off");
	uint64_t ms = col_env_number("FENNEC_GPU_INTERVAL_MS", 100, 1, 3600000, "ms");
	const char *pcie = getenv("FENNEC_GPU_PCIE");
	if (pcie && *pcie && strcmp(pcie, "1") && strcmp(pcie, "0"))
		col_config_warn("FENNEC_GPU_PCIE", pcie, "expected 1 (PCIe throughput too) or 0; not measured");
	pthread_mutex_lock(&G.lock);
	G.mode = mode > 0 ? mode : COL_GPU_OFF;
	G.interval_ns = ms * 1000000u;
	G.pcie = pcie && !strcmp(pcie, "1");
	/* A new file: its strings and devices are defined again; what the last file did not
	 * take is not this file's. */
	strings_reset();
	G.devices_written = 0;
	memset(&G.written, 0, sizeof G.written);
	atomic_store(&G.accepting, 1);
	discard_batches();
	col_nvtx_reset();
	X.body.len = 0;
	X.prev_ns = 0;
	atomic_store(&G.records, 0);
	atomic_store(&G.dropped, 0);
	atomic_store(&G.cupti_dropped, 0);
	atomic_store(&G.unknown, 0);
	pthread_mutex_unlock(&G.lock);
}

void col_gpu_start(void)
{
	if (!G.mode)
		return;
	int was = col_mem_internal(1);
	if (!N.tried)
		nvml_open();
	N.next_ns = 0;
	col_mem_internal(was);
}

/* Devices seen by an earlier file of this process are described in this one too. */
static void devices_again(void)
{
	G.devices_written = 1;
	if (!G.ndev)
		return;
	col_gpu_batch *b = col_gpu_batch_begin();
	if (!b)
		return;
	for (uint32_t i = 0; i < G.ndev; i++)
		fmt_gpu_device_put(&b->body, &G.dev[i].d);
	col_gpu_batch_end(b);
}

void col_gpu_drain(void (*emit)(unsigned type, cm_buf *raw), int final)
{
	if (final != COL_GPU_DRAIN_EXIT)
		col_gpu_timers_poll();
	if (G.mode && final == COL_GPU_DRAIN_FINAL && N.lib)
		nvml_round(); /* the last point of the utilisation timeline */
	gpux_emit(emit);
	if (G.mode) {
		if (!G.devices_written)
			devices_again();
		if (final != COL_GPU_DRAIN_EXIT)
			col_cupti_flush(final == COL_GPU_DRAIN_FINAL);
	} else if (!atomic_load(&G.done))
		goto out;
	col_gpu_batch *b = atomic_exchange(&G.done, NULL), *order = NULL;
	while (b) { /* newest first: reverse into the order they ended */
		col_gpu_batch *next = b->next;
		b->next = order;
		order = b;
		b = next;
	}
	pthread_mutex_lock(&G.lock);
	fmt_gpu_info in;
	memset(&in, 0, sizeof in); /* compared with memcmp below: no stray padding */
	in.cupti_version = G.cupti_version;
	in.clock = G.clock;
	in.offset_ns = G.offset_ns;
	in.offset_error_ns = G.offset_error_ns;
	in.flags = G.mode == COL_GPU_KERNELS ? FMT_GPU_KERNELS_ONLY : 0;
	pthread_mutex_unlock(&G.lock);
	in.records = atomic_load(&G.records);
	in.dropped = atomic_load(&G.dropped);
	in.cupti_dropped = atomic_load(&G.cupti_dropped);
	in.unknown = atomic_load(&G.unknown);
	cm_buf raw = {0};
	for (b = order; b; b = order) {
		order = b->next;
		raw.len = 0;
		fmt_gpu_prefix(&raw, &in);
		cm_buf_put(&raw, b->body.data, b->body.len);
		atomic_fetch_sub(&G.pending, b->body.len);
		emit(FMT_GPU, &raw);
		batch_free(b);
		G.written = in;
	}
	/* A chunk of the prefix alone when it changed: the file then says that CUPTI was
	 * loaded (and how its clock was mapped) even when no GPU work ran, and has the last
	 * counts. */
	if (G.mode && memcmp(&in, &G.written, sizeof in)) {
		raw.len = 0;
		fmt_gpu_prefix(&raw, &in);
		emit(FMT_GPU, &raw);
		G.written = in;
	}
	cm_buf_free(&raw);
out:
	if (final) /* what comes later belongs to no file (a next session discards it) */
		atomic_store(&G.accepting, 0);
}

void col_gpu_stop(void)
{
	if (G.mode)
		col_cupti_stop();
}

void col_gpu_resume(void)
{
	atomic_store(&G.accepting, 1);
}

void col_gpu_atfork_child(void)
{
	/* CUDA does not survive fork: the child records no GPU activity. A producer may have
	 * held the lock at the fork; its thread does not exist here. */
	pthread_mutex_init(&G.lock, NULL);
	G.mode = COL_GPU_OFF;
	atomic_store(&G.accepting, 0);
	atomic_store(&G.done, NULL);
	atomic_store(&G.pending, 0);
	G.str = NULL; /* the parent's copies leak once rather than race a free */
	G.str_cap = G.nstr = 0;
	G.ndev = 0;
	X.body = (cm_buf){0}; /* the parent's buffer leaks once */
	X.prev_ns = 0;
	col_nvtx_atfork_child();
}

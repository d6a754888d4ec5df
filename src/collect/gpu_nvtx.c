/*
 * gpu_nvtx.c - NVTX ranges as fennec regions (docs/gpu.md). `fennec record --gpu` sets
 * NVTX_INJECTION64_PATH to libfennec; the NVTX loader compiled into the program (NVTX 3
 * is header-only; PyTorch's torch.cuda.nvtx and emit_nvtx use it) dlopens it at the first
 * NVTX call and calls InitializeInjectionNvtx2, which fills NVTX's function table with the
 * push and pop handlers below. A push opens a region named by the message on the calling
 * thread, a pop closes it: exactly fennec_region_begin_id / fennec_region_end.
 *
 * The few NVTX types needed are declared here (NVTX keeps its injection ABI stable and
 * versioned), so this file builds without the CUDA toolkit.
 */
#include "collect/collect.h"

#include <stdint.h>

/* nvtxTypes.h: modules and callback ids of the function tables */
enum { NVTX_MODULE_CORE = 1, NVTX_MODULE_CORE2 = 5 };
enum { CB_CORE_RangePushEx = 8, CB_CORE_RangePushA = 9, CB_CORE_RangePop = 11 };
enum { CB_CORE2_DomainRangePushEx = 4, CB_CORE2_DomainRangePop = 5, CB_CORE2_DomainRegisterStringA = 10 };
enum { NVTX_ETID_CALLBACKS = 1 };
enum { NVTX_MESSAGE_ASCII = 1, NVTX_MESSAGE_REGISTERED = 3 };

typedef void (*nvtx_fn)(void);
typedef nvtx_fn **nvtx_table;
typedef struct nvtx_callbacks {
	size_t struct_size;
	int (*GetModuleFunctionTable)(int module, nvtx_table *out, unsigned *size);
} nvtx_callbacks;
typedef const void *(*nvtx_get_export_table)(uint32_t id);

/* nvToolsExt.h: nvtxEventAttributes_v2, the fields read here */
typedef struct nvtx_attributes {
	uint16_t version, size;
	uint32_t category;
	int32_t color_type;
	uint32_t color;
	int32_t payload_type, reserved0;
	uint64_t payload;
	int32_t message_type;
	union {
		const char *ascii;
		const void *unicode;
		const void *registered; /* our string handle: a site id */
	} message;
} nvtx_attributes;

/*
 * The region id of an NVTX message. PyTorch's emit_nvtx appends ", seq = N" (and shapes)
 * to every operator's name: one region per operator, not per call.
 */
static uint32_t message_id(const char *s)
{
	if (!s)
		return 0;
	const char *cut = strstr(s, ", seq = ");
	if (!cut)
		return fennec_intern(s);
	char buf[256];
	size_t n = (size_t)(cut - s) < sizeof buf - 1 ? (size_t)(cut - s) : sizeof buf - 1;
	memcpy(buf, s, n);
	buf[n] = 0;
	return fennec_intern(buf);
}

static uint32_t attributes_id(const nvtx_attributes *a)
{
	if (!a || a->size < sizeof *a)
		return 0;
	if (a->message_type == NVTX_MESSAGE_ASCII)
		return message_id(a->message.ascii);
	if (a->message_type == NVTX_MESSAGE_REGISTERED)
		return (uint32_t)(uintptr_t)a->message.registered;
	return 0;
}

/* A push that cannot be named still opens a region, so that its pop stays balanced. */
static int push(uint32_t id)
{
	static uint32_t unnamed;
	if (!id && !(id = unnamed))
		id = unnamed = fennec_intern("nvtx range");
	fennec_region_begin_id(id);
	return 0;
}

static int range_push_a(const char *message) { return push(message_id(message)); }
static int range_push_ex(const nvtx_attributes *a) { return push(attributes_id(a)); }
static int range_pop(void)
{
	fennec_region_end();
	return 0;
}
static int domain_push_ex(const void *domain, const nvtx_attributes *a)
{
	(void)domain;
	return push(attributes_id(a));
}
static int domain_pop(const void *domain)
{
	(void)domain;
	return range_pop();
}
static const void *domain_register_a(const void *domain, const char *s)
{
	(void)domain;
	return (const void *)(uintptr_t)message_id(s);
}

static int set(const nvtx_callbacks *cb, int module, unsigned slot, nvtx_fn fn)
{
	nvtx_table table = NULL;
	unsigned size = 0;
	if (!cb->GetModuleFunctionTable(module, &table, &size) || !table || slot >= size || !table[slot])
		return 0;
	*table[slot] = fn;
	return 1;
}

FENNEC_API int InitializeInjectionNvtx2(nvtx_get_export_table get)
{
	const nvtx_callbacks *cb = get ? get(NVTX_ETID_CALLBACKS) : NULL;
	if (!cb || cb->struct_size < sizeof *cb || !cb->GetModuleFunctionTable)
		return 0;
	int ok = set(cb, NVTX_MODULE_CORE, CB_CORE_RangePushA, (nvtx_fn)range_push_a) &&
		 set(cb, NVTX_MODULE_CORE, CB_CORE_RangePushEx, (nvtx_fn)range_push_ex) &&
		 set(cb, NVTX_MODULE_CORE, CB_CORE_RangePop, (nvtx_fn)range_pop);
	/* domains are optional: an older NVTX without them still gets the core ranges */
	set(cb, NVTX_MODULE_CORE2, CB_CORE2_DomainRangePushEx, (nvtx_fn)domain_push_ex);
	set(cb, NVTX_MODULE_CORE2, CB_CORE2_DomainRangePop, (nvtx_fn)domain_pop);
	set(cb, NVTX_MODULE_CORE2, CB_CORE2_DomainRegisterStringA, (nvtx_fn)domain_register_a);
	return ok;
}

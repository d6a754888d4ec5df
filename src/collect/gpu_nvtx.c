/*
 * gpu_nvtx.c - NVTX annotations (docs/gpu.md). `fennec record --gpu` sets
 * NVTX_INJECTION64_PATH to libfennec; the NVTX loader compiled into the program (NVTX 3
 * is header-only; PyTorch's torch.cuda.nvtx and emit_nvtx use it) dlopens it at the first
 * NVTX call and calls InitializeInjectionNvtx2, which fills NVTX's function tables with the
 * handlers below. Push and pop ranges are nested on their thread: they open and close
 * fennec regions (fennec_region_begin_id / fennec_region_end). Start/end ranges may end on
 * another thread and marks are instants: they go through a bounded lock-free queue to the
 * writer, which writes them into GPUX chunks (gpu.c). Wide-character messages are converted
 * to UTF-8 into bounded buffers.
 *
 * The few NVTX types needed are declared here (NVTX keeps its injection ABI stable and
 * versioned; the ids are those of nvtx3/nvtxDetail/nvtxTypes.h), so this file builds
 * without the CUDA toolkit.
 */
#include "collect/collect.h"

#include "collect/gpu.h"

#include <stdint.h>
#include <stdlib.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <wchar.h>

/* nvtxTypes.h: modules and callback ids of the function tables */
enum { NVTX_MODULE_CORE = 1, NVTX_MODULE_CORE2 = 5 };
enum {
	CB_CORE_MarkEx = 1, CB_CORE_MarkA = 2, CB_CORE_MarkW = 3, CB_CORE_RangeStartEx = 4, CB_CORE_RangeStartA = 5,
	CB_CORE_RangeStartW = 6, CB_CORE_RangeEnd = 7, CB_CORE_RangePushEx = 8, CB_CORE_RangePushA = 9,
	CB_CORE_RangePushW = 10, CB_CORE_RangePop = 11,
};
enum {
	CB_CORE2_DomainMarkEx = 1, CB_CORE2_DomainRangeStartEx = 2, CB_CORE2_DomainRangeEnd = 3,
	CB_CORE2_DomainRangePushEx = 4, CB_CORE2_DomainRangePop = 5, CB_CORE2_DomainRegisterStringA = 10,
	CB_CORE2_DomainRegisterStringW = 11,
};
enum { NVTX_ETID_CALLBACKS = 1 };
enum { NVTX_MESSAGE_ASCII = 1, NVTX_MESSAGE_UNICODE = 2, NVTX_MESSAGE_REGISTERED = 3 };

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
		const wchar_t *unicode;
		const void *registered; /* our string handle: a struct nvtx_string */
	} message;
} nvtx_attributes;

#define TEXT_MAX 216       /* bytes of a queued message, its NUL included: a slot is 256 bytes */
#define QUEUE_SLOTS 8192    /* NVTX start, end and mark records between two flushes, at most */

/* ---- messages ---- */

/* Copy at most n - 1 bytes of s into out, NUL-terminated, never cutting a UTF-8 sequence. */
static size_t copy_text(char *out, size_t n, const char *s)
{
	size_t len = 0;
	while (s[len] && len < n - 1)
		len++;
	if (s[len]) /* cut: back off to the start of the last (incomplete) character */
		while (len && ((uint8_t)s[len] & 0xC0) == 0x80)
			len--;
	memcpy(out, s, len);
	out[len] = 0;
	return len;
}

/*
 * A wide (UTF-32 on Linux) message as UTF-8 in out[n], NUL-terminated: as many whole
 * characters as fit; a value that is no Unicode scalar becomes U+FFFD. Allocates nothing.
 */
size_t col_nvtx_utf8(char *out, size_t n, const wchar_t *w)
{
	size_t len = 0;
	if (!n)
		return 0;
	for (; w && *w; w++) {
		uint32_t c = (uint32_t)*w;
		if (c > 0x10FFFF || (c >= 0xD800 && c <= 0xDFFF))
			c = 0xFFFD;
		uint8_t b[4];
		size_t k = c < 0x80 ? 1 : c < 0x800 ? 2 : c < 0x10000 ? 3 : 4;
		if (k == 1)
			b[0] = (uint8_t)c;
		else {
			for (size_t i = k - 1; i > 0; i--, c >>= 6)
				b[i] = (uint8_t)(0x80 | (c & 0x3F));
			b[0] = (uint8_t)((k == 2 ? 0xC0 : k == 3 ? 0xE0 : 0xF0) | c);
		}
		if (len + k > n - 1)
			break;
		memcpy(out + len, b, k);
		len += k;
	}
	out[len] = 0;
	return len;
}

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

static uint32_t wide_id(const wchar_t *w)
{
	char buf[256];
	if (!w)
		return 0;
	col_nvtx_utf8(buf, sizeof buf, w);
	return message_id(buf);
}

/* A registered string (nvtxDomainRegisterString*): its region id and its text. Never freed:
 * NVTX has no unregistration, and programs register a few. */
typedef struct nvtx_string {
	uint32_t id;
	char text[];
} nvtx_string;

static const void *register_string(const char *s)
{
	if (!s)
		return NULL;
	int was = col_mem_internal(1);
	size_t n = strlen(s);
	nvtx_string *r = malloc(sizeof *r + n + 1);
	col_mem_internal(was);
	if (!r)
		return NULL;
	r->id = message_id(s);
	memcpy(r->text, s, n + 1);
	return r;
}

static uint32_t attributes_id(const nvtx_attributes *a)
{
	if (!a || a->size < sizeof *a)
		return 0;
	if (a->message_type == NVTX_MESSAGE_ASCII)
		return message_id(a->message.ascii);
	if (a->message_type == NVTX_MESSAGE_UNICODE)
		return wide_id(a->message.unicode);
	if (a->message_type == NVTX_MESSAGE_REGISTERED && a->message.registered)
		return ((const nvtx_string *)a->message.registered)->id;
	return 0;
}

/* The message of a, as UTF-8 in out[n] ("" when it has none). */
static void attributes_text(const nvtx_attributes *a, char *out, size_t n)
{
	out[0] = 0;
	if (!a || a->size < sizeof *a)
		return;
	if (a->message_type == NVTX_MESSAGE_ASCII && a->message.ascii)
		copy_text(out, n, a->message.ascii);
	else if (a->message_type == NVTX_MESSAGE_UNICODE)
		col_nvtx_utf8(out, n, a->message.unicode);
	else if (a->message_type == NVTX_MESSAGE_REGISTERED && a->message.registered)
		copy_text(out, n, ((const nvtx_string *)a->message.registered)->text);
}

/* ---- push and pop: regions ---- */

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
static int range_push_w(const wchar_t *message) { return push(wide_id(message)); }
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
	return register_string(s);
}
static const void *domain_register_w(const void *domain, const wchar_t *s)
{
	char buf[256];
	(void)domain;
	if (!s)
		return NULL;
	col_nvtx_utf8(buf, sizeof buf, s);
	return register_string(buf);
}

/* ---- start/end ranges and marks: a bounded queue to the writer ---- */

/*
 * A multi-producer, single-consumer bounded queue (D. Vyukov's): a producer claims
 * position `tail` with a CAS when the slot's seq says it is free for that position (seq ==
 * pos), fills it and publishes it (seq = pos + 1); the writer reads slots in position order
 * while seq == pos + 1 and frees each for the next lap (seq = pos + QUEUE_SLOTS). A full
 * queue drops the record (counted). Program threads never wait and never allocate here.
 * A start is queued before its id is returned, so before any end of it.
 */
typedef struct nvtx_slot {
	_Atomic uint64_t seq;
	uint64_t id;          /* range id (start, end) */
	uint64_t tid;
	uint64_t t_ns;        /* CLOCK_MONOTONIC */
	uint8_t type;         /* FMT_GR_RANGE_START, _END, FMT_GR_MARK */
	char text[TEXT_MAX];
} nvtx_slot;

static struct {
	nvtx_slot *slot;      /* QUEUE_SLOTS of them, from the first InitializeInjectionNvtx2 */
	_Atomic uint64_t tail; /* next position to claim */
	uint64_t head;        /* the consumer's next position */
	_Atomic uint64_t next_id; /* range ids, from 1 */
	_Atomic uint64_t dropped;
	_Atomic unsigned fork_gen; /* a fork child's threads have new tids */
} Q;

static __thread uint64_t tls_tid;
static __thread unsigned tls_gen;

static uint64_t my_tid(void)
{
	unsigned gen = atomic_load_explicit(&Q.fork_gen, memory_order_relaxed) + 1;
	if (tls_gen != gen) {
		tls_tid = (uint64_t)syscall(SYS_gettid);
		tls_gen = gen;
	}
	return tls_tid;
}

/* Claim a slot (NULL: not recording, or full) */
static nvtx_slot *claim(void)
{
	nvtx_slot *q = Q.slot;
	if (!q || !col_gpu_recording())
		return NULL;
	uint64_t pos = atomic_load_explicit(&Q.tail, memory_order_relaxed);
	for (;;) {
		nvtx_slot *s = &q[pos & (QUEUE_SLOTS - 1)];
		uint64_t seq = atomic_load_explicit(&s->seq, memory_order_acquire);
		int64_t d = (int64_t)(seq - pos);
		if (d == 0) {
			if (atomic_compare_exchange_weak_explicit(&Q.tail, &pos, pos + 1, memory_order_relaxed,
								  memory_order_relaxed))
				return s;
		} else if (d < 0) {
			atomic_fetch_add_explicit(&Q.dropped, 1, memory_order_relaxed);
			return NULL;
		} else
			pos = atomic_load_explicit(&Q.tail, memory_order_relaxed);
	}
}

static void publish(nvtx_slot *s, uint8_t type, uint64_t id)
{
	s->type = type;
	s->id = id;
	s->tid = my_tid();
	s->t_ns = cm_mono_ns();
	uint64_t pos = atomic_load_explicit(&s->seq, memory_order_relaxed);
	atomic_store_explicit(&s->seq, pos + 1, memory_order_release);
}

static uint64_t range_start(const nvtx_attributes *a, const char *ascii, const wchar_t *wide)
{
	uint64_t id = atomic_fetch_add_explicit(&Q.next_id, 1, memory_order_relaxed) + 1;
	nvtx_slot *s = claim();
	if (!s)
		return id;
	if (a)
		attributes_text(a, s->text, sizeof s->text);
	else if (wide)
		col_nvtx_utf8(s->text, sizeof s->text, wide);
	else
		copy_text(s->text, sizeof s->text, ascii ? ascii : "");
	publish(s, FMT_GR_RANGE_START, id);
	return id;
}

static void range_end(uint64_t id)
{
	nvtx_slot *s = claim();
	if (s)
		publish(s, FMT_GR_RANGE_END, id);
}

static void mark(const nvtx_attributes *a, const char *ascii, const wchar_t *wide)
{
	nvtx_slot *s = claim();
	if (!s)
		return;
	if (a)
		attributes_text(a, s->text, sizeof s->text);
	else if (wide)
		col_nvtx_utf8(s->text, sizeof s->text, wide);
	else
		copy_text(s->text, sizeof s->text, ascii ? ascii : "");
	publish(s, FMT_GR_MARK, 0);
}

static uint64_t range_start_ex(const nvtx_attributes *a) { return range_start(a, NULL, NULL); }
static uint64_t range_start_a(const char *m) { return range_start(NULL, m, NULL); }
static uint64_t range_start_w(const wchar_t *m) { return range_start(NULL, NULL, m ? m : L""); }
static void mark_ex(const nvtx_attributes *a) { mark(a, NULL, NULL); }
static void mark_a(const char *m) { mark(NULL, m, NULL); }
static void mark_w(const wchar_t *m) { mark(NULL, NULL, m ? m : L""); }
static uint64_t domain_range_start_ex(const void *domain, const nvtx_attributes *a)
{
	(void)domain;
	return range_start(a, NULL, NULL);
}
static void domain_range_end(const void *domain, uint64_t id)
{
	(void)domain;
	range_end(id);
}
static void domain_mark_ex(const void *domain, const nvtx_attributes *a)
{
	(void)domain;
	mark(a, NULL, NULL);
}

void col_nvtx_drain(cm_buf *out, uint64_t *prev_ns)
{
	nvtx_slot *q = Q.slot;
	if (!q)
		return;
	for (;; Q.head++) {
		nvtx_slot *s = &q[Q.head & (QUEUE_SLOTS - 1)];
		if (atomic_load_explicit(&s->seq, memory_order_acquire) != Q.head + 1)
			break;
		if (out) {
			fmt_gpu g = {.type = s->type, .range_id = s->id, .tid = s->tid, .start_ns = s->t_ns,
				     .end_ns = s->t_ns, .text = s->text};
			fmt_gpux_put(out, &g, prev_ns);
		}
		atomic_store_explicit(&s->seq, Q.head + QUEUE_SLOTS, memory_order_release);
	}
}

uint64_t col_nvtx_dropped(void) { return atomic_load(&Q.dropped); }

void col_nvtx_reset(void)
{
	col_nvtx_drain(NULL, NULL); /* a previous session's leftovers belong to no file */
	atomic_store(&Q.dropped, 0);
}

void col_nvtx_atfork_child(void)
{
	/* A parent's thread may have claimed a slot and not published it: the child starts on
	 * a fresh queue (the parent's stays allocated, once). */
	atomic_fetch_add(&Q.fork_gen, 1);
	Q.slot = NULL;
	atomic_store(&Q.dropped, 0);
}

/* ---- injection ---- */

static int set(const nvtx_callbacks *cb, int module, unsigned slot, nvtx_fn fn)
{
	nvtx_table table = NULL;
	unsigned size = 0;
	if (!cb->GetModuleFunctionTable(module, &table, &size) || !table || slot >= size || !table[slot])
		return 0;
	*table[slot] = fn;
	return 1;
}

static void queue_init(void)
{
	if (Q.slot)
		return;
	int was = col_mem_internal(1);
	nvtx_slot *q = calloc(QUEUE_SLOTS, sizeof *q);
	col_mem_internal(was);
	if (!q)
		return; /* start/end ranges and marks are then dropped, uncounted */
	for (uint64_t i = 0; i < QUEUE_SLOTS; i++)
		atomic_init(&q[i].seq, i);
	atomic_store(&Q.tail, 0);
	Q.head = 0;
	Q.slot = q;
}

FENNEC_API int InitializeInjectionNvtx2(nvtx_get_export_table get)
{
	const nvtx_callbacks *cb = get ? get(NVTX_ETID_CALLBACKS) : NULL;
	if (!cb || cb->struct_size < sizeof *cb || !cb->GetModuleFunctionTable)
		return 0;
	queue_init();
	int ok = set(cb, NVTX_MODULE_CORE, CB_CORE_RangePushA, (nvtx_fn)range_push_a) &&
		 set(cb, NVTX_MODULE_CORE, CB_CORE_RangePushEx, (nvtx_fn)range_push_ex) &&
		 set(cb, NVTX_MODULE_CORE, CB_CORE_RangePop, (nvtx_fn)range_pop);
	/* the rest are optional: an older NVTX without them still gets the core ranges */
	set(cb, NVTX_MODULE_CORE, CB_CORE_RangePushW, (nvtx_fn)range_push_w);
	set(cb, NVTX_MODULE_CORE, CB_CORE_MarkEx, (nvtx_fn)mark_ex);
	set(cb, NVTX_MODULE_CORE, CB_CORE_MarkA, (nvtx_fn)mark_a);
	set(cb, NVTX_MODULE_CORE, CB_CORE_MarkW, (nvtx_fn)mark_w);
	set(cb, NVTX_MODULE_CORE, CB_CORE_RangeStartEx, (nvtx_fn)range_start_ex);
	set(cb, NVTX_MODULE_CORE, CB_CORE_RangeStartA, (nvtx_fn)range_start_a);
	set(cb, NVTX_MODULE_CORE, CB_CORE_RangeStartW, (nvtx_fn)range_start_w);
	set(cb, NVTX_MODULE_CORE, CB_CORE_RangeEnd, (nvtx_fn)range_end);
	set(cb, NVTX_MODULE_CORE2, CB_CORE2_DomainRangePushEx, (nvtx_fn)domain_push_ex);
	set(cb, NVTX_MODULE_CORE2, CB_CORE2_DomainRangePop, (nvtx_fn)domain_pop);
	set(cb, NVTX_MODULE_CORE2, CB_CORE2_DomainRegisterStringA, (nvtx_fn)domain_register_a);
	set(cb, NVTX_MODULE_CORE2, CB_CORE2_DomainRegisterStringW, (nvtx_fn)domain_register_w);
	set(cb, NVTX_MODULE_CORE2, CB_CORE2_DomainMarkEx, (nvtx_fn)domain_mark_ex);
	set(cb, NVTX_MODULE_CORE2, CB_CORE2_DomainRangeStartEx, (nvtx_fn)domain_range_start_ex);
	set(cb, NVTX_MODULE_CORE2, CB_CORE2_DomainRangeEnd, (nvtx_fn)domain_range_end);
	return ok;
}

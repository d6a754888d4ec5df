/*
 * pyframes.c - the Python frames of a sampled thread, read from the sampling signal's
 * handler on that thread, for CPython 3.11, 3.12 and 3.13 (unmodified interpreters; the
 * version is read from the interpreter's own Py_Version at the session's start). Design
 * and the rules of validation: docs/internals/python.md.
 *
 * The chain: the thread's PyThreadState (PyGILState_GetThisThreadState(): a thread-local
 * read), its current _PyInterpreterFrame, then `previous` outwards. A frame is read in
 * place when it lies inside one of the thread's data-stack chunks (the interpreter's
 * frames); any other (3.12's entry frames on the C stack, a generator's or coroutine's
 * frame inside its object on the heap) is copied with
 * process_vm_readv, which fails instead of faulting. The innermost frame's code object is
 * read the same way (the interpreter may be pushing that frame as the signal comes); the
 * outer frames hold references to their code objects, which therefore live. Every code
 * object must have PyCode_Type as its type. A frame that fails a check cuts the chain
 * there (FMT_S_PYCUT), it is never followed.
 *
 * Code objects get small ids, kept in a table keyed by address and a fingerprint of the
 * object (names, first line): a code object freed and another allocated at its address gets
 * a new id. The first sample that meets a code object copies its names into a ring of
 * descriptions (col_ring: lock-free, several handlers at once), which the writer turns into
 * PYCODE records. Nothing here allocates, locks or calls what is not async-signal-safe.
 */
#include "collect/pyframes.h"
#include "collect/collect.h"
#include "collect/ring.h"

#include <dlfcn.h>
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/syscall.h>
#include <sys/uio.h>
#include <unistd.h>

/* The parts of CPython's layout read here, per minor version (offsets in bytes, from the
 * interpreter's own internal headers: Include/internal/pycore_frame.h, pycore_code.h,
 * cpython/pystate.h, cpython/unicodeobject.h; tests/unit/pyoffsets.c checks them against
 * the headers of each version when they are installed). */
typedef struct py_layout {
	unsigned minor;
	uint16_t ts_cframe;       /* PyThreadState.cframe (3.11, 3.12), 0xffff: none */
	uint16_t cframe_current;  /* _PyCFrame.current_frame */
	uint16_t ts_current;      /* PyThreadState.current_frame (3.13) */
	uint16_t ts_datastack;    /* PyThreadState.datastack_chunk */
	uint16_t ts_interp;       /* PyThreadState.interp */
	uint16_t fr_code;         /* _PyInterpreterFrame.f_code / f_executable */
	uint16_t fr_previous;
	uint16_t fr_instr;        /* prev_instr (3.11, 3.12), instr_ptr (3.13) */
	uint16_t fr_owner;
	uint16_t fr_is_entry;     /* 3.11 only, 0xffff: none */
	uint16_t fr_size;         /* bytes of the frame header read */
	uint16_t co_qualname, co_filename, co_firstlineno, co_linetable, co_code;
	uint16_t str_ascii_data;  /* sizeof(PyASCIIObject) */
	uint16_t str_compact_data; /* sizeof(PyCompactUnicodeObject) */
	uint16_t gil_runtime_holder; /* 3.11: _PyRuntime.gilstate.tstate_current */
	uint16_t interp_gil;      /* 3.12+: PyInterpreterState.ceval.gil */
	uint16_t gil_locked, gil_holder; /* 3.12+: struct _gil_runtime_state */
} py_layout;

#define NONE 0xffff
#define OWNED_BY_GENERATOR 1
#define OWNED_BY_CSTACK 3

static const py_layout layouts[] = {
	{11, 56, 8, NONE, 296, 16, 32, 48, 56, 69, 68, 72, 128, 112, 72, 136, 184, 48, 72, 576, NONE, 0, 0},
	{12, 56, 0, NONE, 232, 16, 0, 8, 56, 70, NONE, 72, 128, 112, 68, 136, 192, 40, 56, NONE, 384, 16, 8},
	{13, NONE, 0, 72, 232, 16, 0, 8, 56, 70, NONE, 72, 128, 112, 68, 136, 200, 40, 56, NONE, 16, 16, 8},
};

/* Offsets shared by every version: object header, bytes, stack chunks. */
#define OB_TYPE 8
#define OB_SIZE 16
#define BYTES_DATA 32
#define STR_LENGTH 16
#define STR_STATE 32
#define CHUNK_SIZE 8
#define CHUNK_DATA 24
#define CO_HEAD 256           /* bytes of a code object read: every field above */
#define MAX_CHUNKS 16
#define MAX_LINETABLE 65536   /* a location table longer than this: the line is not looked up */

#define CODE_SLOTS 32768      /* code object ids (power of two) */
#define CODE_PROBES 64
#define DESC_RING (2u << 20)  /* descriptions waiting for the writer */
#define NAME_MAX_BYTES 400    /* of a qualified name or a file name, in UTF-8 */

typedef struct code_slot {
	_Atomic uint64_t key;     /* code object address; 0: free */
	_Atomic uint64_t fp;      /* fingerprint, set before id */
	_Atomic uint32_t id;      /* 0 until the description is in the ring */
} code_slot;

static struct {
	_Atomic int on;           /* read by every thread's handler and sleeping calls while a session starts */
	unsigned status;
	uint64_t version;
	const py_layout *L;
	pid_t pid;
	int vm_ok;                /* process_vm_readv works here */
	void *(*this_tstate)(void);
	uintptr_t code_type;      /* &PyCode_Type */
	uintptr_t runtime;        /* &_PyRuntime */
	code_slot *slots;
	_Atomic uint32_t next_id;
	col_ring desc;
	_Atomic uint64_t lost_desc;
	cm_buf chunk;
} Y;

uint64_t col_py_version(void) { return Y.version; }
unsigned col_py_status(void) { return Y.status; }
int col_py_on(void) { return Y.on; }

/* A fork child writes a file of its own: its code objects are described again there. */
void col_py_atfork_child(void)
{
	Y.pid = (pid_t)syscall(SYS_getpid);
	if (Y.slots)
		memset(Y.slots, 0, CODE_SLOTS * sizeof *Y.slots);
	atomic_store(&Y.next_id, 0);
	if (Y.desc.buf)
		col_ring_reset(&Y.desc);
}

/* Walks from the thread's own code (col_py_walk_here): memory the frames name is read in
 * place. */
static __thread int y_here;

/* Copy n bytes at addr, failing instead of faulting. */
static int safe_read(uintptr_t addr, void *dst, size_t n)
{
	if (addr < 4096)
		return -1;
	if (y_here) {
		memcpy(dst, (const void *)addr, n);
		return 0;
	}
	if (!Y.vm_ok)
		return -1;
	struct iovec l = {dst, n}, r = {(void *)addr, n};
	return process_vm_readv(Y.pid, &l, 1, &r, 1, 0) == (ssize_t)n ? 0 : -1;
}

static uint64_t rd64(const uint8_t *p, unsigned off)
{
	uint64_t v;
	memcpy(&v, p + off, 8);
	return v;
}

static uint32_t rd32(const uint8_t *p, unsigned off)
{
	uint32_t v;
	memcpy(&v, p + off, 4);
	return v;
}

void col_py_prepare(void)
{
	Y.on = 0;
	Y.status = FMT_PY_OK;
	Y.version = 0;
	const unsigned long *pv = dlsym(RTLD_DEFAULT, "Py_Version");
	void *gts = dlsym(RTLD_DEFAULT, "PyGILState_GetThisThreadState");
	if (!gts)
		return; /* not a Python process */
	uint64_t version = pv ? *pv : 0;
	if (!pv) {
		/* before 3.11: no Py_Version; "3.10.13 (main, ...)" */
		const char *(*gv)(void) = (const char *(*)(void))dlsym(RTLD_DEFAULT, "Py_GetVersion");
		const char *s = gv ? gv() : NULL;
		unsigned ma = 0, mi = 0;
		if (s && sscanf(s, "%u.%u", &ma, &mi) == 2)
			version = (uint64_t)ma << 24 | (uint64_t)mi << 16;
		else
			version = 0x03000000;
	}
	const char *e = getenv("FENNEC_TEST_PY_VERSION"); /* tests: an interpreter of another version */
	if (e && *e)
		version = strtoull(e, NULL, 0);
	Y.version = version;
	Y.L = NULL;
	for (size_t i = 0; i < sizeof layouts / sizeof *layouts; i++)
		if ((version >> 24) == 3 && ((version >> 16) & 0xff) == layouts[i].minor)
			Y.L = &layouts[i];
	e = getenv("FENNEC_PYTHON");
	if (e && !strcmp(e, "0")) {
		Y.status = FMT_PY_OFF;
		return;
	}
	Y.this_tstate = (void *(*)(void))gts;
	Y.code_type = (uintptr_t)dlsym(RTLD_DEFAULT, "PyCode_Type");
	Y.runtime = (uintptr_t)dlsym(RTLD_DEFAULT, "_PyRuntime");
	if (!Y.L || !Y.code_type) {
		Y.status = FMT_PY_VERSION;
		return;
	}
	Y.pid = getpid();
	uint64_t probe = 0x1122334455667788ull, got = 0;
	Y.vm_ok = 1;
	Y.vm_ok = safe_read((uintptr_t)&probe, &got, sizeof got) == 0 && got == probe;
	if (!Y.slots) {
		Y.slots = calloc(CODE_SLOTS, sizeof *Y.slots);
		if (!Y.slots || col_ring_init(&Y.desc, DESC_RING) < 0) {
			Y.status = FMT_PY_VERSION;
			return;
		}
	}
	Y.on = 1;
}

/* ---- strings ---- */

static size_t utf8_put(uint8_t *out, size_t at, size_t max, uint32_t c)
{
	uint8_t b[4];
	size_t n;
	if (c < 0x80) {
		b[0] = (uint8_t)c;
		n = 1;
	} else if (c < 0x800) {
		b[0] = (uint8_t)(0xc0 | c >> 6);
		b[1] = (uint8_t)(0x80 | (c & 63));
		n = 2;
	} else if (c < 0x10000) {
		b[0] = (uint8_t)(0xe0 | c >> 12);
		b[1] = (uint8_t)(0x80 | ((c >> 6) & 63));
		b[2] = (uint8_t)(0x80 | (c & 63));
		n = 3;
	} else {
		b[0] = (uint8_t)(0xf0 | (c >> 18 & 7));
		b[1] = (uint8_t)(0x80 | ((c >> 12) & 63));
		b[2] = (uint8_t)(0x80 | ((c >> 6) & 63));
		b[3] = (uint8_t)(0x80 | (c & 63));
		n = 4;
	}
	if (at + n > max)
		return at;
	memcpy(out + at, b, n);
	return at + n;
}

/* A str object's text as UTF-8 into out (at most max bytes). Returns its length, or -1
 * when the object cannot be read or is not a compact str. */
static int read_str(uintptr_t obj, uint8_t *out, size_t max)
{
	uint8_t h[64];
	if (!obj || safe_read(obj, h, sizeof h) < 0)
		return -1;
	uint64_t len = rd64(h, STR_LENGTH);
	uint32_t state = rd32(h, STR_STATE);
	unsigned kind = (state >> 2) & 7, compact = (state >> 5) & 1, ascii = (state >> 6) & 1;
	if (!compact || len > 1u << 20)
		return -1;
	if (ascii) {
		size_t n = len < max ? (size_t)len : max;
		return safe_read(obj + Y.L->str_ascii_data, out, n) < 0 ? -1 : (int)n;
	}
	if (kind != 1 && kind != 2 && kind != 4)
		return -1;
	uint8_t raw[NAME_MAX_BYTES * 4];
	size_t units = len < NAME_MAX_BYTES ? (size_t)len : NAME_MAX_BYTES;
	if (safe_read(obj + Y.L->str_compact_data, raw, units * kind) < 0)
		return -1;
	size_t at = 0;
	for (size_t i = 0; i < units; i++) {
		uint32_t c = kind == 1 ? raw[i] : kind == 2 ? (uint32_t)(raw[2 * i] | raw[2 * i + 1] << 8) : rd32(raw, (unsigned)(4 * i));
		size_t next = utf8_put(out, at, max, c);
		if (next == at)
			break;
		at = next;
	}
	return (int)at;
}

/* ---- code objects ---- */

/* Put a code object's description into the ring. */
static int describe(uint32_t id, const uint8_t *co)
{
	uint8_t q[NAME_MAX_BYTES], f[NAME_MAX_BYTES];
	int qn = read_str((uintptr_t)rd64(co, Y.L->co_qualname), q, sizeof q);
	int fn = read_str((uintptr_t)rd64(co, Y.L->co_filename), f, sizeof f);
	if (qn < 0)
		qn = 0;
	if (fn < 0)
		fn = 0;
	uint32_t len = (uint32_t)((16 + qn + fn + 7) & ~7);
	uint64_t pos;
	if (col_ring_reserve(&Y.desc, len, &pos) < 0)
		return -1;
	uint8_t h[12];
	uint32_t first = rd32(co, Y.L->co_firstlineno);
	uint16_t ql = (uint16_t)qn, fl = (uint16_t)fn;
	memcpy(h, &id, 4);
	memcpy(h + 4, &first, 4);
	memcpy(h + 8, &ql, 2);
	memcpy(h + 10, &fl, 2);
	col_ring_put(&Y.desc, pos + 4, h, sizeof h);
	col_ring_put(&Y.desc, pos + 16, q, (size_t)qn);
	col_ring_put(&Y.desc, pos + 16 + (uint64_t)qn, f, (size_t)fn);
	col_ring_publish(&Y.desc, pos, len);
	return 0;
}

/* The id of the code object at addr whose head is co (0: none could be given). */
static uint32_t code_id(uintptr_t addr, const uint8_t *co)
{
	uint64_t fp = cm_mix64(rd64(co, Y.L->co_qualname) ^ cm_mix64(rd64(co, Y.L->co_filename)) ^
			  (uint64_t)rd32(co, Y.L->co_firstlineno) << 40) | 1;
	uint64_t h = cm_mix64(addr ^ fp);
	for (unsigned i = 0; i < CODE_PROBES; i++) {
		code_slot *s = &Y.slots[(h + i) & (CODE_SLOTS - 1)];
		uint64_t k = atomic_load_explicit(&s->key, memory_order_acquire);
		if (!k) {
			uint64_t zero = 0;
			if (!atomic_compare_exchange_strong_explicit(&s->key, &zero, addr, memory_order_acq_rel,
								     memory_order_acquire)) {
				k = zero;
				goto taken;
			}
			atomic_store_explicit(&s->fp, fp, memory_order_release);
			uint32_t id = atomic_fetch_add_explicit(&Y.next_id, 1, memory_order_relaxed) + 1;
			if (describe(id, co) < 0) {
				atomic_fetch_add_explicit(&Y.lost_desc, 1, memory_order_relaxed);
				return 0; /* the slot stays without an id: its code shows as unknown */
			}
			atomic_store_explicit(&s->id, id, memory_order_release);
			return id;
		}
	taken:
		if (k == addr && atomic_load_explicit(&s->fp, memory_order_acquire) == fp)
			return atomic_load_explicit(&s->id, memory_order_acquire);
	}
	return 0;
}

/* Line of the instruction at code unit `unit` from the location table (PEP 626/657 form,
 * Objects/locations.md in CPython). */
static uint32_t line_of(const uint8_t *t, uint64_t n, uint32_t first, uint64_t unit)
{
	uint64_t at = 0;
	int64_t line = first;
	const uint8_t *p = t, *end = t + n;
	while (p < end) {
		uint8_t b = *p++;
		if (!(b & 0x80))
			return 0; /* not at an entry: not a table we know */
		unsigned code = (b >> 3) & 15, len = (b & 7) + 1;
		int64_t delta = 0;
		if (code == 15) {
			delta = 0;
		} else if (code == 14 || code == 13) {
			uint64_t v = 0;
			unsigned shift = 0;
			uint8_t c;
			do {
				if (p >= end || shift > 30)
					return 0;
				c = *p++;
				v |= (uint64_t)(c & 63) << shift;
				shift += 6;
			} while (c & 64);
			delta = v & 1 ? -(int64_t)(v >> 1) : (int64_t)(v >> 1);
			if (code == 14)
				for (int k = 0; k < 3; k++)
					while (p < end && (*p++ & 64))
						;
		} else if (code >= 10) {
			delta = code - 10;
			p += 2;
		} else {
			p += 1;
		}
		line += delta;
		if (unit < at + len)
			return code == 15 || line < 0 ? 0 : (uint32_t)line;
		at += len;
	}
	return 0;
}

/* ---- the walk ---- */

typedef struct span {
	uintptr_t lo, hi;
} span;

static int inside(const span *v, unsigned n, uintptr_t a, size_t len)
{
	for (unsigned i = 0; i < n; i++)
		if (a >= v[i].lo && a + len <= v[i].hi && a + len > a)
			return 1;
	return 0;
}

static uint32_t walk(uint64_t *out, uint32_t max, unsigned *flags);

uint32_t col_py_walk(uint64_t *out, uint32_t max, unsigned *flags)
{
	if (!Y.on)
		return 0;
	/* a signal that comes during a walk from the thread's own code walks with checks */
	int was = y_here;
	y_here = 0;
	uint32_t n = walk(out, max, flags);
	y_here = was;
	return n;
}

uint32_t col_py_walk_here(uint64_t *out, uint32_t max, unsigned *flags)
{
	if (!Y.on)
		return 0;
	y_here = 1;
	uint32_t n = walk(out, max, flags);
	y_here = 0;
	return n;
}

static uint32_t walk(uint64_t *out, uint32_t max, unsigned *flags)
{
	const py_layout *L = Y.L;
	const uint8_t *ts = Y.this_tstate();
	if (!ts)
		return 0;
	*flags |= FMT_S_PYTHON;
	/* The GIL's holder. */
	if (L->gil_runtime_holder != NONE && Y.runtime) {
		uintptr_t holder = __atomic_load_n((const uintptr_t *)(Y.runtime + L->gil_runtime_holder), __ATOMIC_RELAXED);
		if (holder == (uintptr_t)ts)
			*flags |= FMT_S_GIL;
	} else if (L->interp_gil != NONE) {
		/* the interpreter and its GIL live as long as the thread state */
		const uint8_t *interp = (const uint8_t *)rd64(ts, L->ts_interp);
		const uint8_t *g = interp ? (const uint8_t *)rd64(interp, L->interp_gil) : NULL;
		if (g && __atomic_load_n((const int *)(g + L->gil_locked), __ATOMIC_RELAXED) &&
		    __atomic_load_n((const uintptr_t *)(g + L->gil_holder), __ATOMIC_RELAXED) == (uintptr_t)ts)
			*flags |= FMT_S_GIL;
	}
	/* The thread's data-stack chunks: a chunk is freed only after the thread state
	 * stops naming it, so the list read from the live thread state is mapped. */
	span ok[MAX_CHUNKS];
	unsigned nok = 0;
	const uint8_t *ch = (const uint8_t *)rd64(ts, L->ts_datastack);
	while (ch && nok < MAX_CHUNKS) {
		uint64_t size = rd64(ch, CHUNK_SIZE);
		if (size < CHUNK_DATA || size > (1ull << 32))
			break;
		ok[nok++] = (span){(uintptr_t)ch + CHUNK_DATA, (uintptr_t)ch + size};
		ch = (const uint8_t *)rd64(ch, 0);
	}
	uintptr_t fr;
	if (L->ts_cframe != NONE) {
		/* the thread state's root cframe, or one on this thread's stack in a running
		 * interpreter loop */
		const uint8_t *cf = (const uint8_t *)rd64(ts, L->ts_cframe);
		if (!cf)
			return 0;
		fr = (uintptr_t)rd64(cf, L->cframe_current);
	} else {
		fr = (uintptr_t)rd64(ts, L->ts_current);
	}
	uint32_t n = 0;
	int innermost = 1;
	for (unsigned steps = 0; fr; steps++) {
		if (n >= max || steps >= 4 * max) {
			*flags |= FMT_S_PYCUT;
			break;
		}
		uint8_t hb[96];
		const uint8_t *h;
		if (inside(ok, nok, fr, L->fr_size)) {
			h = (const uint8_t *)fr;
		} else if (safe_read(fr, hb, L->fr_size) == 0) {
			h = hb;
		} else {
			*flags |= FMT_S_PYCUT;
			break;
		}
		unsigned owner = h[L->fr_owner];
		uintptr_t prev = (uintptr_t)rd64(h, L->fr_previous);
		if (owner == OWNED_BY_CSTACK && L->fr_is_entry == NONE) {
			/* 3.12+: the shim frame an interpreter loop starts with */
			if (n)
				out[n - 1] |= 1;
			fr = prev;
			continue;
		}
		if (owner > OWNED_BY_CSTACK) {
			*flags |= FMT_S_PYCUT;
			break;
		}
		uintptr_t code = (uintptr_t)rd64(h, L->fr_code);
		uint8_t cb[CO_HEAD];
		const uint8_t *co;
		if (!innermost && inside(ok, nok, fr, L->fr_size) && code >= 4096) {
			co = (const uint8_t *)code; /* the frame holds a reference: it lives */
		} else if (safe_read(code, cb, sizeof cb) == 0) {
			co = cb;
		} else {
			*flags |= FMT_S_PYCUT;
			break;
		}
		if (rd64(co, OB_TYPE) != Y.code_type || (int64_t)rd64(co, 0) <= 0) {
			if (innermost && n == 0) {
				/* a frame being pushed: start at the one it is called from */
				innermost = 0;
				fr = prev;
				continue;
			}
			*flags |= FMT_S_PYCUT;
			break;
		}
		uint32_t id = code_id(code, co);
		uint32_t line = 0;
		uintptr_t instr = (uintptr_t)rd64(h, L->fr_instr), start = code + L->co_code;
		const uint8_t *lt = (const uint8_t *)rd64(co, L->co_linetable);
		if (instr >= start && instr - start < (1u << 26) && lt) {
			/* the table: a bytes object the code object holds */
			uint64_t tn = 0;
			if (co == cb ? safe_read((uintptr_t)lt + OB_SIZE, &tn, 8) == 0 : (memcpy(&tn, lt + OB_SIZE, 8), 1)) {
				uint32_t first = rd32(co, L->co_firstlineno);
				line = tn <= MAX_LINETABLE ? line_of(lt + BYTES_DATA, tn, first, (instr - start) / 2) : first;
			}
		}
		unsigned entry = L->fr_is_entry != NONE ? h[L->fr_is_entry] & 1 : 0;
		out[n++] = fmt_pyframe(id, line, entry);
		innermost = 0;
		fr = prev;
	}
	return n;
}

/* ---- the writer ---- */

void col_py_drain(void (*emit)(unsigned type, cm_buf *raw))
{
	if (!Y.desc.buf)
		return;
	uint64_t head = atomic_load_explicit(&Y.desc.head, memory_order_relaxed);
	cm_buf *b = &Y.chunk;
	b->len = 0;
	for (;;) {
		uint32_t len = col_ring_ready(&Y.desc, head);
		if (!len)
			break;
		if (len & COL_RING_PAD) { /* the rest of a lap */
			col_ring_skip(&Y.desc, &head, len);
			col_ring_release(&Y.desc, head);
			continue;
		}
		uint8_t h[12];
		col_ring_get(&Y.desc, head + 4, h, sizeof h);
		uint32_t id, first;
		uint16_t ql, fl;
		memcpy(&id, h, 4);
		memcpy(&first, h + 4, 4);
		memcpy(&ql, h + 8, 2);
		memcpy(&fl, h + 10, 2);
		char q[NAME_MAX_BYTES], f[NAME_MAX_BYTES];
		if (ql > sizeof q || fl > sizeof f)
			ql = fl = 0;
		col_ring_get(&Y.desc, head + 16, q, ql);
		col_ring_get(&Y.desc, head + 16 + ql, f, fl);
		col_ring_consume(&Y.desc, &head, len);
		cm_buf_varint(b, id);
		cm_buf_string(b, q, ql);
		cm_buf_string(b, f, fl);
		cm_buf_varint(b, first);
	}
	if (b->len)
		emit(FMT_PYCODE, b);
}

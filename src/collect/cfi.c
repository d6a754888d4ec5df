/*
 * cfi.c - the ring source's fast unwinder (cfi.h).
 *
 * libunwind's remote step costs about 40 ns a frame here even with its cache (a lock, a
 * cache probe, the register-state machinery), which on 129-frame stacks made unwinding
 * the largest part of the writer's time (bench/README.md, sampling). Nearly every frame
 * of compiled code has one of a few rules: the canonical frame address (CFA) is rsp or
 * rbp plus a constant, the return address sits at CFA - 8, and the caller's rbp, if the
 * function saved it, at a fixed offset from the CFA. No other register is needed to find
 * the frames (a rule that computes the CFA from another one is refused). This file runs
 * the DWARF call-frame program of an address once (the object's .eh_frame, found through
 * its .eh_frame_hdr search table, read from memory, so a binary deleted or replaced on
 * disk does not matter), reduces the row to such a rule, and caches it by address.
 * A frame is then a cache probe and one or two loads from the stack copy.
 *
 * Anything else is refused, and the sample is unwound by libunwind from its start:
 * signal frames ('S' augmentation), CFA expressions other than rsp plus a constant (those
 * of PLT entries are taken: cfa_expr_eval; stack realignment's are not), an
 * rbp kept in another register or by an expression, code without an FDE, a frame whose
 * rule needs an rbp that was saved below the copied stack. FENNEC_CFI=check (perfring.c)
 * runs both unwinders on every sample and counts where they differ.
 *
 * Memory: the call-frame tables are read only inside loaded PT_LOAD segments (the
 * caller's table of them, the one its libunwind accessor checks too), and only while the
 * loader's lock is held (perfring.c), so no object can be unmapped under a read. The stack is read only from the sample's copy.
 */
#include "collect/cfi.h"

#include <dlfcn.h>
#include <stdlib.h>
#include <string.h>
#include <sys/uio.h>
#include <unistd.h>

#define CACHE_BITS 12

typedef struct cfi_mod {
	uintptr_t lo, hi;        /* from its lowest to its highest PT_LOAD byte */
	uintptr_t hdr;           /* its .eh_frame_hdr */
	int local;               /* from _dl_find_object (cfi_walk_local): bounded by lo, hi */
} cfi_mod;

static struct {
	cfi_mod *m;
	size_t n, cap;
	uintptr_t (*seg_end)(uintptr_t); /* the caller's table of loaded segments */
} mods;

/* A reduced row. kind: RULE_RSP or RULE_RBP (the CFA's register), RULE_END (the return
 * address is undefined: the outermost frame), RULE_NONE (refused). The return address is
 * at CFA + 8 * ra, the caller's rbp at CFA + 8 * bp (bp == 0: rbp keeps its value). No other
 * register matters: a rule that computes the CFA from one is refused. */
enum { RULE_EMPTY, RULE_RSP, RULE_RBP, RULE_END, RULE_NONE };
typedef struct cfi_rule {
	uint64_t pc;
	int32_t cfa_off;
	uint8_t kind;
	int8_t ra, bp;
} cfi_rule;
_Static_assert(sizeof(cfi_rule) == 16, "cfi_rule is two words");

static cfi_rule cache[1u << CACHE_BITS];
static cfi_stats stats;

/* ---- modules ---- */

void cfi_modules_reset(void)
{
	mods.n = 0;
	memset(cache, 0, sizeof cache);
}

void cfi_module_add(const struct dl_phdr_info *info)
{
	cfi_mod m;
	memset(&m, 0, sizeof m);
	m.lo = UINTPTR_MAX;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		uintptr_t lo = info->dlpi_addr + ph->p_vaddr;
		if (ph->p_type == PT_GNU_EH_FRAME) {
			m.hdr = lo;
		} else if (ph->p_type == PT_LOAD && ph->p_memsz) {
			uintptr_t hi = lo + ph->p_memsz;
			if (lo < m.lo)
				m.lo = lo;
			if (hi > m.hi)
				m.hi = hi;
		}
	}
	if (!m.hdr || !m.hi)
		return; /* no search table: libunwind's business */
	if (mods.n == mods.cap) {
		size_t cap = mods.cap ? mods.cap * 2 : 64;
		cfi_mod *p = realloc(mods.m, cap * sizeof *p);
		if (!p)
			return;
		mods.m = p;
		mods.cap = cap;
	}
	mods.m[mods.n++] = m;
}

static int mod_cmp(const void *a, const void *b)
{
	uintptr_t x = ((const cfi_mod *)a)->lo, y = ((const cfi_mod *)b)->lo;
	return (x > y) - (x < y);
}

void cfi_modules_done(uintptr_t (*seg_end)(uintptr_t addr))
{
	mods.seg_end = seg_end;
	qsort(mods.m, mods.n, sizeof *mods.m, mod_cmp);
}

static const cfi_mod *mod_of(uintptr_t pc)
{
	size_t lo = 0, hi = mods.n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (mods.m[mid].lo <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo || pc >= mods.m[lo - 1].hi)
		return NULL;
	return &mods.m[lo - 1];
}

/* The end of the loaded segment that holds [p, p + n), or 0. A local walk's module is
 * the object's whole mapping: its own tables, read while it runs. */
static uintptr_t load_end(const cfi_mod *m, uintptr_t p, uintptr_t n)
{
	if (m->local)
		return p >= m->lo && p < m->hi && m->hi - p >= n ? m->hi : 0;
	uintptr_t e = mods.seg_end(p);
	return e && e - p >= n ? e : 0;
}

/* ---- reading DWARF from memory, bounded ---- */

typedef struct rd {
	const uint8_t *p, *end;
	int bad;
} rd;

/* Loads of the program's tables (n is 1, 2, 4 or 8): outside the sanitizer's view, like
 * perfring.c's. */
__attribute__((no_sanitize("address"))) static void take(rd *r, void *dst, size_t n)
{
	if (r->bad || (size_t)(r->end - r->p) < n) {
		r->bad = 1;
		memset(dst, 0, n);
		return;
	}
	switch (n) { /* fixed sizes: plain loads, no call the sanitizer intercepts */
	case 1: __builtin_memcpy(dst, r->p, 1); break;
	case 2: __builtin_memcpy(dst, r->p, 2); break;
	case 4: __builtin_memcpy(dst, r->p, 4); break;
	default: __builtin_memcpy(dst, r->p, 8); break;
	}
	r->p += n;
}

static void skip(rd *r, uint64_t n)
{
	if (r->bad || (uint64_t)(r->end - r->p) < n)
		r->bad = 1;
	else
		r->p += n;
}

static uint8_t u8(rd *r)
{
	uint8_t v;
	take(r, &v, 1);
	return v;
}

static uint64_t uleb(rd *r)
{
	uint64_t v = 0;
	for (unsigned shift = 0;; shift += 7) {
		uint8_t b = u8(r);
		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		if (!(b & 0x80) || r->bad)
			return v;
	}
}

static int64_t sleb(rd *r)
{
	uint64_t v = 0;
	unsigned shift = 0;
	uint8_t b;
	do {
		b = u8(r);
		if (shift < 64)
			v |= (uint64_t)(b & 0x7f) << shift;
		shift += 7;
	} while ((b & 0x80) && !r->bad);
	if (shift < 64 && (b & 0x40))
		v |= ~(uint64_t)0 << shift;
	return (int64_t)v;
}

enum {
	PE_ABS = 0x00, PE_ULEB = 0x01, PE_U2 = 0x02, PE_U4 = 0x03, PE_U8 = 0x04,
	PE_SLEB = 0x09, PE_S2 = 0x0a, PE_S4 = 0x0b, PE_S8 = 0x0c,
	PE_PCREL = 0x10, PE_DATAREL = 0x30, PE_INDIRECT = 0x80, PE_OMIT = 0xff,
};

/* A pointer encoded as `enc` says (DW_EH_PE_*); `data` is the base of datarel values. The
 * value is not dereferenced (indirect personality pointers are only skipped). */
static uint64_t enc_ptr(rd *r, uint8_t enc, uintptr_t data)
{
	uintptr_t at = (uintptr_t)r->p;
	uint64_t v;
	switch (enc & 0x0f) {
	case PE_ABS: case PE_U8: case PE_S8: {
		uint64_t x;
		take(r, &x, 8);
		v = x;
		break;
	}
	case PE_ULEB: v = uleb(r); break;
	case PE_SLEB: v = (uint64_t)sleb(r); break;
	case PE_U2: { uint16_t x; take(r, &x, 2); v = x; break; }
	case PE_S2: { int16_t x; take(r, &x, 2); v = (uint64_t)(int64_t)x; break; }
	case PE_U4: { uint32_t x; take(r, &x, 4); v = x; break; }
	case PE_S4: { int32_t x; take(r, &x, 4); v = (uint64_t)(int64_t)x; break; }
	default: r->bad = 1; return 0;
	}
	switch (enc & 0x70) {
	case 0: break;
	case PE_PCREL: v += at; break;
	case PE_DATAREL: v += data; break;
	default: r->bad = 1; /* textrel, funcrel, aligned: not in x86-64 tables */
	}
	return v;
}

/* ---- the call-frame program ---- */

enum { HOW_SAME, HOW_OFFSET, HOW_UNDEF, HOW_OTHER };
typedef struct row {
	uint8_t cfa_reg, cfa_expr;
	int64_t cfa_off;
	rd expr; /* the CFA's expression, when cfa_expr */
	uint8_t how[CFI_NREGS];
	int64_t off[CFI_NREGS];
} row;

typedef struct cie {
	uint64_t code_align;
	int64_t data_align;
	uint8_t fde_enc;
	int aug_z, signal;
	rd init; /* its initial instructions */
} cie;

#define STATE_DEPTH 8

/* A factored offset, wrapping instead of overflowing on nonsense tables. */
static int64_t fac(uint64_t v, int64_t align)
{
	return (int64_t)(v * (uint64_t)align);
}

/* The CFA's register: 0xff (taken by no rule) for a number out of range. */
static uint8_t cfa_reg(uint64_t reg)
{
	return reg < CFI_NREGS ? (uint8_t)reg : 0xff;
}

static void set_reg(row *w, uint64_t reg, uint8_t how, int64_t off)
{
	if (reg < CFI_NREGS) {
		w->how[reg] = how;
		w->off[reg] = off;
	}
}

/*
 * Run instructions `r` over row *w, the address starting at *loc, until the address
 * would pass pc. `init` is the row after the CIE's instructions (for DW_CFA_restore), or
 * NULL while running them. Returns 0, or -1 on what this unwinder does not read.
 */
static int run(rd *r, const cie *c, row *w, const row *init, uint64_t *loc, uint64_t pc)
{
	row stack[STATE_DEPTH];
	int depth = 0;
	while (r->p < r->end && !r->bad) {
		uint8_t op = u8(r);
		uint64_t reg, delta = 0;
		switch (op >> 6) {
		case 1: delta = (op & 0x3f) * c->code_align; goto advance;
		case 2: set_reg(w, op & 0x3f, HOW_OFFSET, fac(uleb(r), c->data_align)); continue;
		case 3:
			if (!init)
				return -1;
			reg = op & 0x3f;
			if (reg < CFI_NREGS)
				set_reg(w, reg, init->how[reg], init->off[reg]);
			continue;
		}
		switch (op) {
		case 0x00: continue; /* nop */
		case 0x01: { /* set_loc */
			uint64_t to = enc_ptr(r, c->fde_enc, 0);
			if (to > pc)
				return 0;
			*loc = to;
			continue;
		}
		case 0x02: delta = u8(r) * c->code_align; goto advance;
		case 0x03: { uint16_t x; take(r, &x, 2); delta = x * c->code_align; goto advance; }
		case 0x04: { uint32_t x; take(r, &x, 4); delta = x * c->code_align; goto advance; }
		case 0x05: reg = uleb(r); set_reg(w, reg, HOW_OFFSET, fac(uleb(r), c->data_align)); continue;
		case 0x06:
			reg = uleb(r);
			if (!init)
				return -1;
			if (reg < CFI_NREGS)
				set_reg(w, reg, init->how[reg], init->off[reg]);
			continue;
		case 0x07: set_reg(w, uleb(r), HOW_UNDEF, 0); continue;
		case 0x08: set_reg(w, uleb(r), HOW_SAME, 0); continue;
		case 0x09: reg = uleb(r); uleb(r); set_reg(w, reg, HOW_OTHER, 0); continue; /* register */
		case 0x0a:
			if (depth == STATE_DEPTH)
				return -1;
			stack[depth++] = *w;
			continue;
		case 0x0b:
			if (!depth)
				return -1;
			*w = stack[--depth];
			continue;
		case 0x0c: w->cfa_reg = cfa_reg(uleb(r)); w->cfa_off = (int64_t)uleb(r); w->cfa_expr = 0; continue;
		case 0x0d: w->cfa_reg = cfa_reg(uleb(r)); w->cfa_expr = 0; continue;
		case 0x0e: w->cfa_off = (int64_t)uleb(r); continue;
		case 0x0f: { /* def_cfa_expression */
			uint64_t n = uleb(r);
			w->expr = (rd){r->p, r->p, 0};
			skip(r, n);
			w->expr.end = r->bad ? w->expr.p : r->p;
			w->cfa_expr = 1;
			continue;
		}
		case 0x10: case 0x16: /* expression, val_expression */
			reg = uleb(r);
			skip(r, uleb(r));
			set_reg(w, reg, HOW_OTHER, 0);
			continue;
		case 0x11: reg = uleb(r); set_reg(w, reg, HOW_OFFSET, fac((uint64_t)sleb(r), c->data_align)); continue;
		case 0x12: w->cfa_reg = cfa_reg(uleb(r)); w->cfa_off = fac((uint64_t)sleb(r), c->data_align); w->cfa_expr = 0; continue;
		case 0x13: w->cfa_off = fac((uint64_t)sleb(r), c->data_align); continue;
		case 0x14: reg = uleb(r); uleb(r); set_reg(w, reg, HOW_OTHER, 0); continue; /* val_offset */
		case 0x15: reg = uleb(r); sleb(r); set_reg(w, reg, HOW_OTHER, 0); continue; /* val_offset_sf */
		case 0x2e: uleb(r); continue; /* GNU_args_size */
		case 0x2f: reg = uleb(r); set_reg(w, reg, HOW_OFFSET, (int64_t)(0 - (uint64_t)fac(uleb(r), c->data_align))); continue;
		default: return -1;
		}
	advance:
		if (*loc + delta > pc)
			return 0;
		*loc += delta;
	}
	return r->bad ? -1 : 0;
}

/*
 * A CFA expression that, at this pc, is rsp plus a constant: *off gets the constant. The
 * linker's PLT entries have one (binutils, x86-64: rsp + 8, plus 8 once the entry's push
 * ran, told by rip & 15), and a sample in one is common where a library calls
 * __tls_get_addr or another function through its PLT in a loop (CPython 3.12's
 * allocator: one sample in ten). rip is the pc the rule is for, exact for the innermost
 * frame, the only one a PLT entry can be (it calls nothing). The value is a*rsp + b: rsp
 * and constants go in, +, -, and the bitwise and comparison operators combine constants,
 * and the result must be rsp plus one; anything else (a load, another register: the
 * realigned stacks' expressions) is refused. At most 16 values, 64 operations.
 */
static int cfa_expr_eval(rd e, uint64_t pc, int64_t *off)
{
	struct { uint64_t a, b; } st[16]; /* a: rsp's multiplier (0 or 1), b: the constant */
	int n = 0;
	for (int ops = 0; e.p < e.end && !e.bad; ops++) {
		if (ops == 64)
			return -1;
		uint8_t op = u8(&e);
		uint64_t v;
		if (op >= 0x30 && op <= 0x4f) { /* lit0-31 */
			v = op - 0x30u;
			goto push_const;
		}
		switch (op) {
		case 0x08: v = u8(&e); goto push_const;                          /* const1u */
		case 0x09: v = (uint64_t)(int64_t)(int8_t)u8(&e); goto push_const; /* const1s */
		case 0x10: v = uleb(&e); goto push_const;                        /* constu */
		case 0x11: v = (uint64_t)sleb(&e); goto push_const;              /* consts */
		case 0x77:                                                        /* breg7: rsp + off */
			if (n == 16)
				return -1;
			st[n].a = 1;
			st[n++].b = (uint64_t)sleb(&e);
			continue;
		case 0x80:                                                        /* breg16: rip + off */
			v = pc + (uint64_t)sleb(&e);
			goto push_const;
		case 0x23:                                                        /* plus_uconst */
			if (!n)
				return -1;
			st[n - 1].b += uleb(&e);
			continue;
		}
		if (n < 2)
			return -1;
		uint64_t xa = st[n - 2].a, x = st[n - 2].b, ya = st[n - 1].a, y = st[n - 1].b;
		n--;
		if (op == 0x22) { /* plus */
			if (xa && ya)
				return -1;
			st[n - 1].a = xa | ya;
			st[n - 1].b = x + y;
			continue;
		}
		if (op == 0x1c && !ya) { /* minus, a constant */
			st[n - 1].b = x - y;
			continue;
		}
		if (xa || ya)
			return -1;
		switch (op) {
		case 0x1a: v = x & y; break;
		case 0x21: v = x | y; break;
		case 0x27: v = x ^ y; break;
		case 0x24: v = y < 64 ? x << y : 0; break;
		case 0x25: v = y < 64 ? x >> y : 0; break;
		case 0x29: v = x == y; break;
		case 0x2a: v = (int64_t)x >= (int64_t)y; break;
		case 0x2b: v = (int64_t)x > (int64_t)y; break;
		case 0x2c: v = (int64_t)x <= (int64_t)y; break;
		case 0x2d: v = (int64_t)x < (int64_t)y; break;
		case 0x2e: v = x != y; break;
		default: return -1;
		}
		st[n - 1].a = 0;
		st[n - 1].b = v;
		continue;
	push_const:
		if (n == 16)
			return -1;
		st[n].a = 0;
		st[n++].b = v;
	}
	if (e.bad || n != 1 || st[0].a != 1)
		return -1;
	*off = (int64_t)st[0].b;
	return 0;
}

/* Parse the CIE at p (the module's tables end at `end`). */
static int read_cie(uintptr_t p, uintptr_t end, cie *c)
{
	rd r = {(const uint8_t *)p, (const uint8_t *)end, 0};
	uint32_t len, id;
	take(&r, &len, 4);
	if (r.bad || len == 0 || len == 0xffffffffu || len > (uint64_t)(r.end - r.p))
		return -1;
	r.end = r.p + len;
	take(&r, &id, 4);
	uint8_t version = u8(&r);
	if (id != 0 || (version != 1 && version != 3))
		return -1;
	char aug[8];
	size_t na = 0;
	for (uint8_t ch; (ch = u8(&r)) != 0 && !r.bad;) {
		if (na == sizeof aug - 1)
			return -1;
		aug[na++] = (char)ch;
	}
	aug[na] = 0;
	memset(c, 0, sizeof *c);
	c->code_align = uleb(&r);
	c->data_align = sleb(&r);
	uint64_t ra = version == 1 ? u8(&r) : uleb(&r);
	if (ra != 16)
		return -1;
	c->fde_enc = PE_ABS;
	if (aug[0] == 'z') {
		c->aug_z = 1;
		uint64_t n = uleb(&r);
		if (r.bad || n > (uint64_t)(r.end - r.p))
			return -1;
		rd a = {r.p, r.p + n, 0};
		for (size_t i = 1; i < na; i++) {
			switch (aug[i]) {
			case 'R': c->fde_enc = u8(&a); break;
			case 'P': enc_ptr(&a, u8(&a), 0); break;
			case 'L': u8(&a); break;
			case 'S': c->signal = 1; break;
			default: return -1;
			}
		}
		if (a.bad)
			return -1;
		r.p += n;
	} else if (na) {
		return -1;
	}
	if (r.bad)
		return -1;
	c->init = r;
	return 0;
}

/* The FDE that covers pc in module m, by the binary search table of its .eh_frame_hdr:
 * its address, or 0. */
static uintptr_t find_fde(const cfi_mod *m, uintptr_t pc, uintptr_t *end)
{
	uintptr_t tend = load_end(m, m->hdr, 4);
	if (!tend)
		return 0;
	rd r = {(const uint8_t *)m->hdr, (const uint8_t *)tend, 0};
	uint8_t version = u8(&r), ptr_enc = u8(&r), count_enc = u8(&r), table_enc = u8(&r);
	if (version != 1 || table_enc != (PE_DATAREL | PE_S4) || count_enc == PE_OMIT)
		return 0;
	enc_ptr(&r, ptr_enc, m->hdr);
	uint64_t count = enc_ptr(&r, count_enc, m->hdr);
	if (r.bad || !count || count > (uint64_t)(r.end - r.p) / 8)
		return 0;
	const uint8_t *table = r.p;
	uint64_t lo = 0, hi = count;
	while (lo < hi) { /* the last entry whose start is at most pc */
		uint64_t mid = lo + (hi - lo) / 2;
		int32_t start;
		rd e = {table + 8 * mid, table + 8 * mid + 4, 0};
		take(&e, &start, 4);
		if ((uintptr_t)((intptr_t)m->hdr + start) <= pc)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return 0;
	int32_t fde_off;
	rd e = {table + 8 * (lo - 1) + 4, table + 8 * lo, 0};
	take(&e, &fde_off, 4);
	uintptr_t fde = (uintptr_t)((intptr_t)m->hdr + fde_off);
	*end = load_end(m, fde, 8);
	return *end ? fde : 0;
}

/* Compute the rule of pc in module m (NULL: none). */
static void compute_in(const cfi_mod *m, uintptr_t pc, cfi_rule *out)
{
	out->kind = RULE_NONE;
	uintptr_t end;
	uintptr_t fde = m ? find_fde(m, pc, &end) : 0;
	if (!fde)
		goto refused;
	rd r = {(const uint8_t *)fde, (const uint8_t *)end, 0};
	uint32_t len, cie_off;
	take(&r, &len, 4);
	if (r.bad || len == 0 || len == 0xffffffffu || len > (uint64_t)(r.end - r.p))
		goto refused;
	r.end = r.p + len;
	uintptr_t at = (uintptr_t)r.p;
	take(&r, &cie_off, 4);
	cie c;
	uintptr_t cie_at = at - cie_off, cie_end = r.bad || !cie_off ? 0 : load_end(m, cie_at, 8);
	if (!cie_end || read_cie(cie_at, cie_end, &c) < 0 || c.signal)
		goto refused; /* a CIE outside the object's segments is not read */
	uint64_t begin = enc_ptr(&r, c.fde_enc, 0);
	uint64_t range = enc_ptr(&r, c.fde_enc & 0x0f, 0);
	if (c.aug_z)
		skip(&r, uleb(&r));
	if (r.bad || pc < begin || pc - begin >= range)
		goto refused;
	row w, init;
	memset(&w, 0, sizeof w);
	uint64_t loc = begin;
	rd ci = c.init;
	if (run(&ci, &c, &w, NULL, &loc, UINT64_MAX) < 0)
		goto refused;
	init = w;
	loc = begin;
	if (run(&r, &c, &w, &init, &loc, pc) < 0)
		goto refused;
	if (w.cfa_expr) {
		if (cfa_expr_eval(w.expr, pc, &w.cfa_off) < 0)
			goto refused;
		w.cfa_reg = 7;
	}
	if ((w.cfa_reg != 7 && w.cfa_reg != 6) || w.cfa_off < INT32_MIN || w.cfa_off > INT32_MAX)
		goto refused;
	if (w.how[16] == HOW_UNDEF) {
		out->kind = RULE_END;
		return;
	}
	if (w.how[16] != HOW_OFFSET || w.off[16] % 8 || w.off[16] / 8 < -128 || w.off[16] / 8 > 127)
		goto refused;
	if (w.how[6] == HOW_OTHER)
		goto refused; /* rbp kept in another register, or by an expression */
	out->kind = w.cfa_reg == 7 ? RULE_RSP : RULE_RBP;
	out->cfa_off = (int32_t)w.cfa_off;
	out->ra = (int8_t)(w.off[16] / 8);
	out->bp = 0; /* same value; undefined (outermost frames) is taken as the same */
	if (w.how[6] == HOW_OFFSET) {
		if (!w.off[6] || w.off[6] % 8 || w.off[6] / 8 < -128 || w.off[6] / 8 > 127)
			goto refused;
		out->bp = (int8_t)(w.off[6] / 8);
	}
	return;
refused:
	out->kind = RULE_NONE;
}

static void compute(uintptr_t pc, cfi_rule *out)
{
	stats.computed++;
	compute_in(mod_of(pc), pc, out);
	if (out->kind == RULE_NONE)
		stats.refused++;
}

static const cfi_rule *rule_of(uint64_t pc)
{
	cfi_rule *e = &cache[(pc * 0x9e3779b97f4a7c15ull) >> (64 - CACHE_BITS)];
	if (e->pc != pc || e->kind == RULE_EMPTY) {
		e->pc = pc;
		compute((uintptr_t)pc, e);
	}
	return e;
}

/* ---- the walk ---- */

/* Beyond the copy but this close above sp, an address is taken to be the thread's stack
 * (as perfring.c's accessor does for libunwind). */
#define STACK_WINDOW (64u << 20)

/* Whether the 8 bytes at a lie in the copy; else, *ran_off when they lie above it, within
 * the thread's stack. */
static inline int in_copy(const cfi_sample *s, uint64_t a, int *ran_off)
{
	uint64_t sp0 = s->regs[7];
	if (a >= sp0 && s->size >= 8 && a - sp0 <= s->size - 8)
		return 1;
	if (a >= sp0 && a - sp0 < STACK_WINDOW)
		*ran_off = 1;
	return 0;
}

uint32_t cfi_walk(const cfi_sample *s, uint64_t *frames, uint32_t depth, int *ran_off)
{
	uint64_t sp0 = s->regs[7], sp = sp0, bp = s->regs[6], ip = s->regs[16];
	int bp_known = 1; /* rbp's value is known (a save slot below the copy leaves it not) */
	frames[0] = ip;
	uint32_t n = 1;
	uint64_t look = ip; /* the first frame's exact pc; then the call's, in the instruction before */
	while (n <= depth) {
		const cfi_rule *u = rule_of(look);
		if (u->kind == RULE_END)
			return n;
		if (u->kind == RULE_NONE || (u->kind == RULE_RBP && !bp_known))
			return 0;
		uint64_t cfa = (u->kind == RULE_RSP ? sp : bp) + (uint64_t)(int64_t)u->cfa_off;
		if (cfa <= sp)
			return 0; /* no progress: let libunwind judge */
		uint64_t ra = cfa + (uint64_t)(int64_t)u->ra * 8;
		if (!in_copy(s, ra, ran_off))
			return *ran_off ? n : 0;
		memcpy(&ip, s->stack + (ra - sp0), 8);
		if (u->bp) {
			uint64_t at = cfa + (uint64_t)(int64_t)u->bp * 8;
			int off = 0;
			bp_known = in_copy(s, at, &off);
			if (bp_known)
				memcpy(&bp, s->stack + (at - sp0), 8);
		}
		sp = cfa;
		if (!ip)
			return n;
		frames[n++] = ip;
		look = ip - 1;
	}
	return n;
}

cfi_stats cfi_get_stats(void)
{
	return stats;
}

/* ---- walks of the caller's own stack (heap_stacks.c) ---- */

_Atomic uint64_t cfi_local_gen;

#if defined(__x86_64__) && defined(DLFO_EH_SEGMENT_TYPE) /* glibc 2.35 and later */

/* Rules by address, shared by every thread without a lock: an entry is the rule packed in a
 * word and that word xor a hash of its address, written in that order. A reader takes an
 * entry whose two words agree with its address; one torn by two writers agrees with
 * neither's address (or, if their rules were equal, gives that rule). 256 KiB, touched as
 * used; emptied when cfi_local_gen changes (a dlclose). */
#define LOCAL_BITS 14
static struct {
	_Atomic uint64_t check, data;
} lcache[1u << LOCAL_BITS];
static _Atomic uint64_t lcache_gen;

/* Return addresses found after an indirect call, by hash: a stack of -X perf trampolines
 * (one a Python call) costs a read each only the first time. Emptied with the rule cache (jit_return_slot below). */
#define CALLS_BITS 10
static _Atomic uint64_t calls_seen[1u << CALLS_BITS];


static inline uint64_t pc_hash(uint64_t pc)
{
	return (pc ^ (pc >> 29)) * 0x9e3779b97f4a7c15ull;
}

static uint64_t rule_pack(const cfi_rule *u)
{
	return (uint64_t)u->kind | (uint64_t)(uint8_t)u->ra << 8 | (uint64_t)(uint8_t)u->bp << 16 |
	       (uint64_t)(uint32_t)u->cfa_off << 32;
}

static void rule_unpack(uint64_t d, cfi_rule *u)
{
	u->kind = (uint8_t)d;
	u->ra = (int8_t)(uint8_t)(d >> 8);
	u->bp = (int8_t)(uint8_t)(d >> 16);
	u->cfa_off = (int32_t)(uint32_t)(d >> 32);
}

static void local_rule_of(uint64_t pc, cfi_rule *u)
{
	uint64_t h = pc_hash(pc);
	__typeof__(&lcache[0]) e = &lcache[h >> (64 - LOCAL_BITS)];
	uint64_t d = atomic_load_explicit(&e->data, memory_order_relaxed);
	if (d && (atomic_load_explicit(&e->check, memory_order_relaxed) ^ d) == h) {
		rule_unpack(d, u);
		return;
	}
	struct dl_find_object o;
	if (_dl_find_object((void *)(uintptr_t)pc, &o) != 0 || !o.dlfo_eh_frame) {
		u->kind = RULE_NONE;
	} else {
		cfi_mod m = {(uintptr_t)o.dlfo_map_start, (uintptr_t)o.dlfo_map_end, (uintptr_t)o.dlfo_eh_frame, 1};
		compute_in(&m, (uintptr_t)pc, u);
	}
	d = rule_pack(u); /* kind is never 0: never an empty word */
	atomic_store_explicit(&e->data, d, memory_order_relaxed);
	atomic_store_explicit(&e->check, h ^ d, memory_order_relaxed);
}

/* A library was closed (cfi_local_gen moved on): its addresses may come to hold another's
 * code, so the rules cached go. */
static void local_cache_check(void)
{
	uint64_t gen = atomic_load_explicit(&cfi_local_gen, memory_order_acquire);
	uint64_t seen = atomic_load_explicit(&lcache_gen, memory_order_relaxed);
	if (seen != gen && atomic_compare_exchange_strong(&lcache_gen, &seen, gen)) {
		for (size_t i = 0; i < sizeof lcache / sizeof lcache[0]; i++)
			atomic_store_explicit(&lcache[i].data, 0, memory_order_relaxed);
		for (size_t i = 0; i < sizeof calls_seen / sizeof calls_seen[0]; i++)
			atomic_store_explicit(&calls_seen[i], 0, memory_order_relaxed);
	}
}

/*
 * One frame outwards on the calling thread's stack, reading [*sp, stack_hi) only: 1 with
 * the caller's ip, sp, bp and the address to look its rule up by; 0 at the stack's end (the
 * rules say so, or a zero return address); -1 when these rules cannot go on (no rule, no
 * progress); -2 when the return address lies at or above stack_hi.
 */
static int local_step(uint64_t *look, uint64_t *ip, uint64_t *sp, uint64_t *bp, uint64_t stack_hi)
{
	cfi_rule r;
	local_rule_of(*look, &r);
	if (r.kind == RULE_END)
		return 0;
	if (r.kind != RULE_RSP && r.kind != RULE_RBP)
		return -1;
	uint64_t cfa = (r.kind == RULE_RSP ? *sp : *bp) + (uint64_t)(int64_t)r.cfa_off;
	uint64_t ra = cfa + (uint64_t)(int64_t)r.ra * 8;
	if (cfa <= *sp || ra < *sp)
		return -1;
	if (ra + 8 > stack_hi)
		return -2;
	memcpy(ip, (const void *)(uintptr_t)ra, 8);
	if (r.bp) {
		uint64_t at = cfa + (uint64_t)(int64_t)r.bp * 8;
		if (at < *sp || at + 8 > stack_hi)
			return -1;
		memcpy(bp, (const void *)(uintptr_t)at, 8);
	}
	*sp = cfa;
	if (!*ip)
		return 0;
	*look = *ip - 1; /* the call, in the instruction before the return address */
	return 1;
}

/* Kept out of line: its registers, taken at its start, are the walk's first frame. */
__attribute__((noinline)) uint32_t cfi_walk_local(uint64_t stack_hi, uint64_t *ips, uint64_t *sps, uint32_t max,
						  int *full, const cfi_join *join)
{
	uint64_t ip, sp, bp;
	__asm__ volatile("lea 0(%%rip), %0\n\tmov %%rsp, %1\n\tmov %%rbp, %2" : "=r"(ip), "=r"(sp), "=r"(bp));
	local_cache_check();
	*full = 0;
	uint32_t n = 0, jc = 0;
	uint64_t look = ip; /* the first frame's exact pc; then the call's, in the instruction before */
	if (join)
		*join->at = 0;
	for (;;) {
		if (n == max) {
			*full = 1;
			return n;
		}
		ips[n] = ip;
		sps[n++] = sp;
		if (join && sp - 8 > join->above) { /* a frame of the stack walked before? */
			while (jc < join->n && join->locs[jc] < sp - 8)
				jc++;
			if (jc < join->n && join->locs[jc] == sp - 8 && join->ips[jc] == ip) {
				*join->at = jc + 1;
				return n;
			}
		}
		int rc = local_step(&look, &ip, &sp, &bp, stack_hi);
		if (rc <= 0)
			return rc ? 0 : n; /* no rule, no progress, or off the thread's stack: libgcc judges */
	}
}

/*
 * Code generated at run time (oneDNN's kernels under PyTorch's convolutions and matrix
 * products, any JIT) lies in no loaded object and has no call-frame rules, so a walk
 * stopped at its first frame and the sample lost the operator and everything above it.
 * Such code is entered by an indirect call from compiled code (a function pointer), whose
 * return address is then on the stack a little above sp, below whatever the generated code
 * pushed. JIT_SCAN bytes above sp are searched, lowest first, for a word that (1) lies in a
 * loaded object, (2) follows an indirect call instruction there (FF /2, read with
 * process_vm_readv, which fails instead of faulting on a page that cannot be read), and
 * (3) is in a function whose rule finds the frame from rsp alone. The first such word is
 * taken as the frame's return address and the walk goes on from it; rbp, which generated
 * code is free to use, is not trusted again until a frame restores it from its save slot,
 * and a frame that needs it ends the walk there. Bounded: JIT_SCAN / 8 object lookups and
 * JIT_READS reads a frame, JIT_HOPS such frames a walk. A wrong word (a stale return address left in the generated code's
 * frame) gives wrong callers, not a fault; the walk after it must hold together too.
 */
#define JIT_SCAN 4096
#define JIT_READS 16
#ifndef JIT_HOPS
#define JIT_HOPS 64 /* frames of generated code a walk goes through (-DJIT_HOPS=0: none, to measure) */
#endif

/* Whether the instruction that ends at ra is an indirect near call (FF /2), checked for
 * each of its encodings' lengths: FF, ModRM, SIB if any, displacement (a REX prefix before
 * FF does not change where the bytes after it lie). */
static int after_indirect_call(uint64_t ra)
{
	_Atomic uint64_t *seen = &calls_seen[pc_hash(ra) >> (64 - CALLS_BITS)];
	if (atomic_load_explicit(seen, memory_order_relaxed) == ra)
		return 1;
	uint8_t b[7]; /* b[i] is the byte at ra - 7 + i */
	struct iovec l = {b, sizeof b}, r = {(void *)(uintptr_t)(ra - sizeof b), sizeof b};
	if (process_vm_readv(getpid(), &l, 1, &r, 1, 0) != (ssize_t)sizeof b)
		return 0;
	for (unsigned len = 2; len <= 7; len++) {
		unsigned at = 7 - len;
		uint8_t modrm = b[at + 1];
		if (b[at] != 0xff || (modrm >> 3 & 7) != 2)
			continue;
		unsigned mod = modrm >> 6, rm = modrm & 7, n = 2;
		if (mod != 3 && rm == 4) {
			if (at + 2 >= sizeof b)
				continue;
			n++; /* SIB */
			if (mod == 0 && (b[at + 2] & 7) == 5)
				n += 4;
		}
		n += mod == 1 ? 1 : mod == 2 ? 4 : (mod == 0 && rm == 5) ? 4 : 0;
		if (n == len) {
			atomic_store_explicit(seen, ra, memory_order_relaxed);
			return 1;
		}
	}
	return 0;
}

/* The frame of generated code that ip is in, at sp: its return address's slot, or 0. */
static uint64_t jit_return_slot(uint64_t ip, uint64_t sp, uint64_t stack_hi)
{
	struct dl_find_object o;
	if (_dl_find_object((void *)(uintptr_t)ip, &o) == 0)
		return 0; /* in an object: its rules said no, nothing to guess */
	uint64_t end = stack_hi - sp > JIT_SCAN ? sp + JIT_SCAN : stack_hi;
	int reads = 0;
	for (uint64_t a = sp; a + 8 <= end && reads < JIT_READS; a += 8) {
		uint64_t w;
		memcpy(&w, (const void *)(uintptr_t)a, 8);
		if (w < 4096 + 7 || w >> 47 || _dl_find_object((void *)(uintptr_t)w, &o) != 0)
			continue;
		reads++;
		if (!after_indirect_call(w))
			continue;
		cfi_rule u;
		local_rule_of(w - 1, &u);
		if (u.kind == RULE_RSP)
			return a;
	}
	return 0;
}

uint32_t cfi_walk_regs(uint64_t ip, uint64_t sp, uint64_t bp, uint64_t stack_hi, uint64_t *ips, uint32_t max,
		       int *full)
{
	local_cache_check();
	*full = 0;
	uint32_t n = 0;
	uint64_t look = ip; /* the interrupted instruction's exact pc */
	int bp_known = 1, hops = 0;
	for (;;) {
		if (n == max) {
			*full = 1;
			return n;
		}
		ips[n++] = ip;
		if (!bp_known) {
			cfi_rule u;
			local_rule_of(look, &u);
			if (u.kind == RULE_RBP)
				return n; /* rbp may be the generated code's: the frames so far are sure */
			bp_known = u.kind == RULE_RSP && u.bp;
		}
		int rc = local_step(&look, &ip, &sp, &bp, stack_hi);
		if (rc == -1 && hops < JIT_HOPS) {
			/* generated code, innermost or called from compiled code (CPython's -X perf
			 * trampolines lie between its evaluator's frames) */
			uint64_t slot = jit_return_slot(ip, sp, stack_hi);
			if (slot) {
				memcpy(&ip, (const void *)(uintptr_t)slot, 8);
				sp = slot + 8;
				look = ip - 1;
				bp_known = 0;
				hops++;
				continue;
			}
		}
		if (rc == -1)
			return bp_known && !hops ? 0 : n; /* past generated code, the frames so far are all there is */
		if (rc <= 0)
			return n; /* the end, or the thread's stack ends here (its start, above which are fennec's frames) */
	}
}
#else
uint32_t cfi_walk_regs(uint64_t ip, uint64_t sp, uint64_t bp, uint64_t stack_hi, uint64_t *ips, uint32_t max,
		       int *full)
{
	(void)ip, (void)sp, (void)bp, (void)stack_hi, (void)ips, (void)max;
	*full = 0;
	return 0;
}

uint32_t cfi_walk_local(uint64_t stack_hi, uint64_t *ips, uint64_t *sps, uint32_t max, int *full,
			const cfi_join *join)
{
	(void)stack_hi, (void)ips, (void)sps, (void)max, (void)join;
	*full = 0;
	return 0; /* the caller walks another way */
}
#endif

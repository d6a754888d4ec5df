/*
 * test_symbol.c - unit tests of the symboliser (src/symbol/) on this very binary: its
 * loaded objects as the collector would record them (dl_iterate_phdr), functions and an
 * inlined function of this file, the demangler, a missing file, a changed build id, a
 * stripped copy and a perf map.
 */
#include <elf.h>
#include <limits.h>
#include <link.h>
#include <stdlib.h>
#include <sys/stat.h>
#include <unistd.h>

#include "symbol/symbol.h"
#include "unit.h"

/* ---- the probes: their addresses and lines are what the tests look up ---- */

static volatile uint64_t captured;
static volatile int sink;

__attribute__((noinline, noclone)) static int capture(void)
{
	captured = (uint64_t)__builtin_extract_return_addr(__builtin_return_address(0));
	return sink;
}

enum { PLAIN_LINE = __LINE__ + 1 };
__attribute__((noinline, noclone)) int unit_probe_plain(int x)
{
	return x * 3 + sink;
}

enum { INNER_CALL_LINE = __LINE__ + 3 };
static inline __attribute__((always_inline)) int probe_inner(int x)
{
	int r = capture();
	return r + x * 7;
}

enum { OUTER_CALL_LINE = __LINE__ + 3 };
__attribute__((noinline, noclone)) int unit_probe_outer(int x)
{
	int r = probe_inner(x);
	sink = r;
	return r + 1;
}

/* ---- the loaded objects, as MODULES records ---- */

typedef struct mods {
	fmt_module m[64];
	size_t n;
} mods;

static int module_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	mods *ms = arg;
	if (ms->n == 64)
		return 1;
	char path[PATH_MAX];
	const char *name = info->dlpi_name;
	if (!name || !*name) {
		if (ms->n)
			return 0;
		ssize_t k = readlink("/proc/self/exe", path, sizeof path - 1);
		if (k <= 0)
			return 0;
		path[k] = 0;
		name = path;
	} else if (!strncmp(name, "linux-vdso", 10))
		name = "[vdso]";
	fmt_module *m = &ms->m[ms->n];
	memset(m, 0, sizeof *m);
	m->path = strdup(name);
	m->bias = info->dlpi_addr;
	m->segs = calloc(info->dlpi_phnum, sizeof *m->segs);
	m->lo = UINT64_MAX;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type == PT_LOAD) {
			fmt_segment *s = &m->segs[m->nsegs++];
			s->start = info->dlpi_addr + ph->p_vaddr;
			s->end = s->start + ph->p_memsz;
			s->offset = ph->p_offset;
			m->lo = s->start < m->lo ? s->start : m->lo;
			m->hi = s->end > m->hi ? s->end : m->hi;
		} else if (ph->p_type == PT_NOTE && !m->build_id) {
			const uint8_t *p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
			while (p + sizeof(ElfW(Nhdr)) <= end) {
				const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
				const uint8_t *desc = p + sizeof *nh + ((nh->n_namesz + 3) & ~3u);
				if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && !memcmp(p + sizeof *nh, "GNU", 4)) {
					m->build_id = malloc(nh->n_descsz);
					memcpy(m->build_id, desc, nh->n_descsz);
					m->build_id_len = nh->n_descsz;
					break;
				}
				p = desc + ((nh->n_descsz + 3) & ~3u);
			}
		}
	}
	ms->n++;
	return 0;
}

static void mods_load(mods *ms)
{
	ms->n = 0;
	dl_iterate_phdr(module_cb, ms);
}

static void mods_free(mods *ms)
{
	for (size_t i = 0; i < ms->n; i++) {
		free(ms->m[i].path);
		free(ms->m[i].build_id);
		free(ms->m[i].segs);
	}
	ms->n = 0;
}

static const fmt_module *mod_of(const mods *ms, uint64_t addr)
{
	for (size_t i = 0; i < ms->n; i++)
		for (uint32_t k = 0; k < ms->m[i].nsegs; k++)
			if (addr >= ms->m[i].segs[k].start && addr < ms->m[i].segs[k].end)
				return &ms->m[i];
	return NULL;
}

static int ends_with(const char *s, const char *suffix)
{
	size_t n = s ? strlen(s) : 0, k = strlen(suffix);
	return n >= k && !strcmp(s + n - k, suffix);
}

/* ---- tests ---- */

UNIT_TEST(symbol_function)
{
	mods ms;
	mods_load(&ms);
	sym_ctx *s;
	UNIT_CHECK_EQ(sym_open(NULL, &s), 0);
	uint64_t addr = (uint64_t)(uintptr_t)unit_probe_plain;
	const fmt_module *fm = mod_of(&ms, addr);
	UNIT_CHECK(fm != NULL && fm->build_id_len > 0);
	uint32_t id, id2;
	UNIT_CHECK_EQ(sym_add_module(s, fm, &id), 0);
	UNIT_CHECK_EQ(sym_add_module(s, fm, &id2), 0);
	UNIT_CHECK_EQ(id2, id); /* the same object again: one handle */
	const sym_frame *fr;
	uint32_t n;
	UNIT_CHECK_EQ(sym_lookup(s, id, addr, 1, &fr, &n), 0);
	UNIT_CHECK_EQ(n, 1);
	UNIT_CHECK_EQ(sym_module_status(s, id), SYM_OK);
	UNIT_CHECK_STR(fr[0].func, "unit_probe_plain");
	UNIT_CHECK(ends_with(fr[0].file, "tests/unit/test_symbol.c"));
	UNIT_CHECK(fr[0].line >= PLAIN_LINE && fr[0].line <= PLAIN_LINE + 2);
	UNIT_CHECK_EQ(fr[0].inlined, 0);
	/* A return address just past the function's start still names it (addr - 1 ... ),
	 * and the same lookup again comes from the cache: the very same array. */
	const sym_frame *fr2;
	UNIT_CHECK_EQ(sym_lookup(s, id, addr + 1, 0, &fr2, &n), 0);
	UNIT_CHECK(n == 1 && !strcmp(fr2[0].func, "unit_probe_plain"));
	const sym_frame *fr3;
	UNIT_CHECK_EQ(sym_lookup(s, id, addr, 1, &fr3, &n), 0);
	UNIT_CHECK(fr3 == fr);
	/* A function of libc, through its .dynsym at least. */
	uint64_t libc_addr = (uint64_t)(uintptr_t)&getpid;
	const fmt_module *lm = mod_of(&ms, libc_addr);
	UNIT_CHECK(lm != NULL && lm != fm);
	if (lm) {
		UNIT_CHECK_EQ(sym_add_module(s, lm, &id2), 0);
		UNIT_CHECK_EQ(sym_lookup(s, id2, libc_addr, 1, &fr, &n), 0);
		UNIT_CHECK(n >= 1 && strstr(fr[n - 1].func, "getpid") != NULL);
		if (n >= 1 && !strstr(fr[n - 1].func, "getpid"))
			printf("    libc frame: %s\n", fr[n - 1].func);
	}
	sym_close(s);
	mods_free(&ms);
}

UNIT_TEST(symbol_inline)
{
	unit_probe_outer(2);
	uint64_t ret = captured; /* a return address inside the inlined probe_inner */
	mods ms;
	mods_load(&ms);
	sym_ctx *s;
	UNIT_CHECK_EQ(sym_open(NULL, &s), 0);
	uint32_t id;
	const fmt_module *fm = mod_of(&ms, ret);
	UNIT_CHECK(fm != NULL);
	UNIT_CHECK_EQ(sym_add_module(s, fm, &id), 0);
	const sym_frame *fr;
	uint32_t n;
	UNIT_CHECK_EQ(sym_lookup(s, id, ret, 0, &fr, &n), 0);
	UNIT_CHECK_EQ(n, 2);
	if (n == 2) {
		UNIT_CHECK_STR(fr[0].func, "probe_inner");
		UNIT_CHECK_EQ(fr[0].inlined, 1);
		UNIT_CHECK_EQ(fr[0].line, INNER_CALL_LINE);
		UNIT_CHECK(ends_with(fr[0].file, "test_symbol.c"));
		UNIT_CHECK_STR(fr[1].func, "unit_probe_outer");
		UNIT_CHECK_EQ(fr[1].inlined, 0);
		UNIT_CHECK_EQ(fr[1].line, OUTER_CALL_LINE);
		UNIT_CHECK(ends_with(fr[1].file, "test_symbol.c"));
	}
	sym_close(s);
	mods_free(&ms);
}

UNIT_TEST(symbol_demangle)
{
	char *d;
	UNIT_CHECK_STR(d = sym_demangle("_ZNSt6vectorIiSaIiEE9push_backERKi"),
		       "std::vector<int, std::allocator<int> >::push_back(int const&)");
	free(d);
	UNIT_CHECK_STR(d = sym_demangle("_ZN5fluid6solver4stepEPdi"), "fluid::solver::step(double*, int)");
	free(d);
	UNIT_CHECK_STR(d = sym_demangle("_ZL4gemmPKfS0_Pfiii.constprop.0"),
		       "gemm(float const*, float const*, float*, int, int, int) [clone .constprop.0]");
	free(d);
	/* Rust legacy: the hash goes; escapes are decoded. */
	UNIT_CHECK_STR(d = sym_demangle("_ZN3std2rt10lang_start17h0123456789abcdefE"), "std::rt::lang_start");
	free(d);
	UNIT_CHECK_STR(d = sym_demangle("_ZN4core3ptr85drop_in_place$LT$std..rt..lang_start$LT$$LP$$RP$$GT$..$u7b$$u7b$"
					"closure$u7d$$u7d$$GT$17h3fca4ac0c7b45e39E"),
		       "core::ptr::drop_in_place<std::rt::lang_start<()>::{{closure}}>");
	free(d);
	/* Rust v0. */
	UNIT_CHECK_STR(d = sym_demangle("_RNvCs1234_7mycrate3foo"), "mycrate::foo");
	free(d);
	UNIT_CHECK_STR(d = sym_demangle("_RINvNtC3std3mem8align_ofjEC3foo"), "std::mem::align_of::<usize>");
	free(d);
	/* Not mangled: NULL, the caller keeps the name. */
	UNIT_CHECK(sym_demangle("main") == NULL);
	UNIT_CHECK(sym_demangle("_Znot a symbol") == NULL);
	UNIT_CHECK(sym_demangle("") == NULL);
}

UNIT_TEST(symbol_missing_file)
{
	uint8_t id_bytes[20] = {0xde, 0xad, 0xbe, 0xef, 1, 2, 3, 4, 5, 6, 7, 8, 9, 10, 11, 12, 13, 14, 15, 16};
	fmt_segment seg = {0x7f0000001000, 0x7f0000009000, 0x1000};
	fmt_module m = {.path = "/nonexistent/dir/libgone.so.1", .build_id = id_bytes, .build_id_len = 20,
			.bias = 0x7f0000000000, .segs = &seg, .nsegs = 1, .lo = seg.start, .hi = seg.end};
	sym_ctx *s;
	UNIT_CHECK_EQ(sym_open(NULL, &s), 0);
	uint32_t id;
	UNIT_CHECK_EQ(sym_add_module(s, &m, &id), 0);
	const sym_frame *fr;
	uint32_t n;
	UNIT_CHECK_EQ(sym_lookup(s, id, 0x7f0000001234, 0, &fr, &n), 0);
	UNIT_CHECK_EQ(n, 1);
	UNIT_CHECK_STR(fr[0].func, "libgone.so.1+0x1234"); /* the recorded address, not addr - 1 */
	UNIT_CHECK(fr[0].file == NULL && fr[0].line == 0 && !fr[0].symbolised);
	UNIT_CHECK_EQ(sym_module_status(s, id), SYM_MISSING);
	UNIT_CHECK_STR(sym_status_name(SYM_MISSING), "missing");
	/* A pseudo path ([vdso] of another kernel, say) is missing too, never opened. */
	m.path = "[vdso]";
	UNIT_CHECK_EQ(sym_add_module(s, &m, &id), 0);
	UNIT_CHECK_EQ(sym_lookup(s, id, 0x7f0000001234, 1, &fr, &n), 0);
	UNIT_CHECK(n == 1 && !strcmp(fr[0].func, "[vdso]+0x1234"));
	sym_close(s);
}

UNIT_TEST(symbol_changed_build_id)
{
	mods ms;
	mods_load(&ms);
	uint64_t addr = (uint64_t)(uintptr_t)unit_probe_plain;
	fmt_module *fm = (fmt_module *)mod_of(&ms, addr);
	UNIT_CHECK(fm != NULL && fm->build_id_len > 0);
	if (!fm || !fm->build_id_len) {
		mods_free(&ms);
		return;
	}
	fm->build_id[0] ^= 0xff; /* as if the binary had been rebuilt since the recording */
	sym_ctx *s;
	UNIT_CHECK_EQ(sym_open(NULL, &s), 0);
	uint32_t id;
	UNIT_CHECK_EQ(sym_add_module(s, fm, &id), 0);
	const sym_frame *fr;
	uint32_t n;
	UNIT_CHECK_EQ(sym_lookup(s, id, addr, 1, &fr, &n), 0);
	UNIT_CHECK_EQ(sym_module_status(s, id), SYM_BUILDID);
	char want[256];
	const char *base = strrchr(fm->path, '/');
	snprintf(want, sizeof want, "%s+0x%llx", base ? base + 1 : fm->path, (unsigned long long)(addr - fm->bias));
	UNIT_CHECK(n == 1);
	UNIT_CHECK_STR(fr[0].func, want);
	UNIT_CHECK_EQ(fr[0].symbolised, 0);
	/* A module recorded without a build id cannot be checked: the file is used. */
	fmt_module copy = *fm;
	copy.build_id = NULL;
	copy.build_id_len = 0;
	UNIT_CHECK_EQ(sym_add_module(s, &copy, &id), 0);
	UNIT_CHECK_EQ(sym_lookup(s, id, addr, 1, &fr, &n), 0);
	UNIT_CHECK(n == 1 && !strcmp(fr[0].func, "unit_probe_plain"));
	sym_close(s);
	mods_free(&ms);
}

UNIT_TEST(symbol_stripped)
{
	mods ms;
	mods_load(&ms);
	uint64_t addr = (uint64_t)(uintptr_t)unit_probe_plain;
	fmt_module *fm = (fmt_module *)mod_of(&ms, addr);
	char dir[] = "/tmp/fennec-unit-XXXXXX", cmd[PATH_MAX * 2 + 64], path[PATH_MAX];
	if (!fm || !mkdtemp(dir)) {
		UNIT_CHECK(0);
		mods_free(&ms);
		return;
	}
	snprintf(path, sizeof path, "%s/unit-stripped", dir);
	snprintf(cmd, sizeof cmd, "strip -s -o '%s' '%s' 2>/dev/null", path, fm->path);
	if (system(cmd) != 0) {
		printf("    (no strip(1): stripped binary not tested)\n");
	} else {
		free(fm->path);
		fm->path = strdup(path); /* same build id: strip keeps the note */
		sym_ctx *s;
		UNIT_CHECK_EQ(sym_open(NULL, &s), 0);
		uint32_t id;
		UNIT_CHECK_EQ(sym_add_module(s, fm, &id), 0);
		const sym_frame *fr;
		uint32_t n;
		/* unit_probe_plain is global, so it is in .dynsym only if exported; either its
		 * name or the module+offset fallback, never another function's name. */
		UNIT_CHECK_EQ(sym_lookup(s, id, addr, 1, &fr, &n), 0);
		UNIT_CHECK(n == 1 && fr[0].file == NULL);
		char want[256];
		snprintf(want, sizeof want, "unit-stripped+0x%llx", (unsigned long long)(addr - fm->bias));
		UNIT_CHECK(n == 1 && (!strcmp(fr[0].func, want) || !strcmp(fr[0].func, "unit_probe_plain")));
		if (n == 1 && strcmp(fr[0].func, want) && strcmp(fr[0].func, "unit_probe_plain"))
			printf("    stripped frame: %s\n", fr[0].func);
		sym_close(s);
		unlink(path);
	}
	rmdir(dir);
	mods_free(&ms);
}

UNIT_TEST(symbol_perf_map)
{
	char dir[] = "/tmp/fennec-unit-XXXXXX", path[PATH_MAX];
	UNIT_CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof path, "%s/perf-4242.map", dir);
	FILE *f = fopen(path, "w");
	UNIT_CHECK(f != NULL);
	if (!f)
		return;
	fputs("7f0000010000 100 py::train:/work/train.py\n"
	      "7f0000010100 80 LazyCompile:~forward /work/model.js:12\n"
	      "0x7f0000020000 40 _ZN3jit4stubEv\n"
	      "garbage line\n"
	      "7f0000010100 80 LazyCompile:*forward /work/model.js:12\n", f); /* recompiled in place */
	fclose(f);
	sym_ctx *s;
	sym_options o = {.perf_map_dir = dir};
	UNIT_CHECK_EQ(sym_open(&o, &s), 0);
	uint32_t id;
	UNIT_CHECK_EQ(sym_add_perf_map(s, 4242, 0, &id), 0);
	const sym_frame *fr;
	uint32_t n;
	UNIT_CHECK_EQ(sym_lookup(s, id, 0x7f0000010010, 1, &fr, &n), 0);
	UNIT_CHECK(n == 1 && !strcmp(fr[0].func, "py::train:/work/train.py"));
	UNIT_CHECK_EQ(sym_lookup(s, id, 0x7f0000010101, 0, &fr, &n), 0); /* return address: 0x...100 */
	UNIT_CHECK(n == 1 && !strcmp(fr[0].func, "LazyCompile:*forward /work/model.js:12"));
	UNIT_CHECK_EQ(sym_lookup(s, id, 0x7f0000020010, 1, &fr, &n), 0);
	UNIT_CHECK(n == 1 && !strcmp(fr[0].func, "jit::stub()"));
	UNIT_CHECK_EQ(sym_lookup(s, id, 0x7f0000010180, 1, &fr, &n), 0); /* past the end */
	UNIT_CHECK_EQ(n, 0);
	UNIT_CHECK_EQ(sym_module_status(s, id), SYM_OK);
	/* A map older than the process belongs to an earlier process with the same pid. */
	UNIT_CHECK_EQ(sym_add_perf_map(s, 4242, (uint64_t)4e18, &id), 0);
	UNIT_CHECK_EQ(sym_lookup(s, id, 0x7f0000010010, 1, &fr, &n), 0);
	UNIT_CHECK_EQ(n, 0);
	UNIT_CHECK_EQ(sym_module_status(s, id), SYM_MISSING);
	UNIT_CHECK_EQ(sym_add_perf_map(s, 4243, 0, &id), 0);
	UNIT_CHECK_EQ(sym_module_status(s, id), SYM_MISSING);
	sym_close(s);
	unlink(path);
	rmdir(dir);
}

/*
 * test_symbol.c - unit tests of the symboliser (src/symbol/) on this very binary: its
 * loaded objects as the collector would record them (dl_iterate_phdr), functions and an
 * inlined function of this file, the demangler, a missing file, a changed build id, a
 * stripped copy and a perf map.
 */
#include <dlfcn.h>
#include <elf.h>
#include <math.h>
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
	/* A FIFO or a device at the path (a crafted profile): not opened, never blocks. */
	char dir[] = "/tmp/fennec-unit-XXXXXX", fifo[PATH_MAX];
	if (mkdtemp(dir)) {
		snprintf(fifo, sizeof fifo, "%s/fifo", dir);
		UNIT_CHECK_EQ(mkfifo(fifo, 0600), 0);
		const char *paths[] = {fifo, "/dev/zero"};
		for (size_t i = 0; i < 2; i++) {
			m.path = (char *)paths[i];
			UNIT_CHECK_EQ(sym_add_module(s, &m, &id), 0);
			UNIT_CHECK_EQ(sym_lookup(s, id, 0x7f0000001234, 0, &fr, &n), 0);
			UNIT_CHECK_EQ(sym_module_status(s, id), SYM_MISSING);
		}
		unlink(fifo);
		rmdir(dir);
	}
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

UNIT_TEST(symbol_debug_file_by_build_id)
{
	/* The recorded binary is gone, but a debug file with its build id is installed
	 * (<dir>/.build-id/xx/yyyy.debug): its names are used, because its build id says it is
	 * the same code. Here the "debug file" is a copy of this binary. */
	mods ms;
	mods_load(&ms);
	uint64_t addr = (uint64_t)(uintptr_t)unit_probe_plain;
	fmt_module *fm = (fmt_module *)mod_of(&ms, addr);
	char dir[] = "/tmp/fennec-unit-XXXXXX", sub[256], file[512], cmd[1024];
	if (!fm || fm->build_id_len < 2 || !mkdtemp(dir)) {
		UNIT_CHECK(0);
		mods_free(&ms);
		return;
	}
	char hex[129] = "";
	for (size_t i = 0; i < fm->build_id_len && i < 64; i++)
		snprintf(hex + 2 * i, 3, "%02x", fm->build_id[i]);
	snprintf(sub, sizeof sub, "%s/.build-id/%.2s", dir, hex);
	snprintf(file, sizeof file, "%s/%s.debug", sub, hex + 2);
	snprintf(cmd, sizeof cmd, "mkdir -p '%s' && cp '%s' '%s'", sub, fm->path, file);
	UNIT_CHECK_EQ(system(cmd), 0);
	free(fm->path);
	fm->path = strdup("/nonexistent/unit-recorded");
	sym_options o = {.debug_path = dir};
	sym_ctx *s;
	UNIT_CHECK_EQ(sym_open(&o, &s), 0);
	uint32_t id;
	const sym_frame *fr;
	uint32_t n;
	UNIT_CHECK_EQ(sym_add_module(s, fm, &id), 0);
	UNIT_CHECK_EQ(sym_lookup(s, id, addr, 1, &fr, &n), 0);
	UNIT_CHECK_EQ(sym_module_status(s, id), SYM_OK);
	UNIT_CHECK(n == 1 && !strcmp(fr[0].func, "unit_probe_plain") && ends_with(fr[0].file, "test_symbol.c"));
	/* with another build id recorded, the debug file is not this module's */
	fm->build_id[0] ^= 0xff;
	UNIT_CHECK_EQ(sym_add_module(s, fm, &id), 0);
	UNIT_CHECK_EQ(sym_lookup(s, id, addr, 1, &fr, &n), 0);
	UNIT_CHECK_EQ(sym_module_status(s, id), SYM_MISSING);
	sym_close(s);
	snprintf(cmd, sizeof cmd, "rm -rf '%s'", dir);
	UNIT_CHECK_EQ(system(cmd), 0);
	mods_free(&ms);
}

UNIT_TEST(symbol_vdso)
{
	void *h = dlopen("linux-vdso.so.1", RTLD_NOW | RTLD_NOLOAD);
	void *fn = h ? dlsym(h, "__vdso_clock_gettime") : NULL;
	if (!fn) {
		printf("    (no vDSO clock_gettime here: not tested)\n");
		return;
	}
	mods ms;
	mods_load(&ms);
	const fmt_module *vm = mod_of(&ms, (uint64_t)(uintptr_t)fn);
	UNIT_CHECK(vm && !strcmp(vm->path, "[vdso]"));
	sym_ctx *s;
	UNIT_CHECK_EQ(sym_open(NULL, &s), 0);
	uint32_t id;
	const sym_frame *fr;
	uint32_t n;
	if (vm) {
		UNIT_CHECK_EQ(sym_add_module(s, vm, &id), 0);
		UNIT_CHECK_EQ(sym_lookup(s, id, (uint64_t)(uintptr_t)fn + 2, 1, &fr, &n), 0);
		UNIT_CHECK(n == 1 && strstr(fr[0].func, "clock_gettime"));
		UNIT_CHECK_EQ(sym_module_status(s, id), SYM_OK);
		/* another kernel's vDSO (another build id): not this one's symbols */
		fmt_module other = *vm;
		uint8_t bid[20] = {1, 2, 3};
		other.build_id = bid;
		other.build_id_len = sizeof bid;
		UNIT_CHECK_EQ(sym_add_module(s, &other, &id), 0);
		UNIT_CHECK_EQ(sym_lookup(s, id, (uint64_t)(uintptr_t)fn, 1, &fr, &n), 0);
		UNIT_CHECK(n == 1 && !strncmp(fr[0].func, "[vdso]+0x", 9));
		UNIT_CHECK_EQ(sym_module_status(s, id), SYM_BUILDID);
	}
	sym_close(s);
	mods_free(&ms);
	dlclose(h);
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
		/* Further into the function: the same name (the function's start, from the
		 * unwind tables, when there is no symbol). */
		const sym_frame *fr2;
		UNIT_CHECK_EQ(sym_lookup(s, id, addr + 3, 1, &fr2, &n), 0);
		UNIT_CHECK(n == 1 && fr2[0].func == fr[0].func);
		if (n == 1 && fr2[0].func != fr[0].func)
			printf("    %s vs %s\n", fr2[0].func, fr[0].func);
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

/* ---- samples through the whole analysis: a profile built by hand, then ana_load ---- */

#include "analyze/aggregate.h"

typedef struct fsample {
	uint8_t flags;
	uint64_t tid;
	uint32_t weight, nregions, nframes;
	uint32_t regions[4];
	uint64_t frames[4];
} fsample;

static void put_module(cm_buf *b, const fmt_module *m)
{
	cm_buf_varint(b, 0);
	cm_buf_string(b, m->path, strlen(m->path));
	cm_buf_string(b, (const char *)m->build_id, m->build_id_len);
	cm_buf_varint(b, m->bias);
	cm_buf_varint(b, m->nsegs);
	for (uint32_t i = 0; i < m->nsegs; i++) {
		cm_buf_varint(b, m->segs[i].start);
		cm_buf_varint(b, m->segs[i].end);
		cm_buf_varint(b, m->segs[i].offset);
	}
}

/*
 * A one-process profile (ticks are nanoseconds): regions outer/inner on thread 1234 from
 * 0 to 1 s, the given modules and samples (one every 1 ms), task names, and an END with
 * 1 s of CPU time. Written to `path`.
 */
static int write_profile(const char *path, uint64_t pid, const fmt_module *modv, size_t nmods, const fsample *s,
			 size_t ns)
{
	cm_buf out = {0}, h = {0}, c = {0};
	uint8_t pre[FMT_PREAMBLE_LEN];
	fmt_preamble(pre);
	cm_buf_put(&out, pre, sizeof pre);
	fmt_hdr_varint(&h, FMT_H_RECORDING, 77);
	fmt_hdr_varint(&h, FMT_H_PID, pid);
	fmt_hdr_string(&h, FMT_H_CMDLINE, "synthetic", 9);
	fmt_hdr_varint(&h, FMT_H_START_MONO, 1000);
	fmt_hdr_varint(&h, FMT_H_START_TICKS, 0);
	fmt_hdr_varint(&h, FMT_H_CLOCK, 1);
	fmt_hdr_varint(&h, FMT_H_SAMPLE_MODE, FMT_SAMPLE_WALL);
	fmt_hdr_varint(&h, FMT_H_SAMPLE_PERIOD, 1000000);
	fmt_hdr_varint(&h, FMT_H_SAMPLE_SOURCE, FMT_SRC_WALL);
	fmt_hdr_varint(&h, FMT_H_SAMPLE_DEPTH, 128);
	fmt_hdr_varint(&h, FMT_H_SAMPLE_HZ, 1000);
	fmt_chunk_append(&out, FMT_HEADER, h.data, h.len, 0, NULL);
	const char *names[] = {NULL, "outer", "inner"};
	for (uint32_t id = 1; id <= 2; id++) {
		cm_buf_varint(&c, id);
		cm_buf_u8(&c, FMT_SITE_REGION);
		cm_buf_string(&c, names[id], strlen(names[id]));
		cm_buf_string(&c, "x.c", 3);
		cm_buf_varint(&c, id);
	}
	fmt_chunk_append(&out, FMT_SITES, c.data, c.len, 0, NULL);
	c.len = 0;
	cm_buf_varint(&c, 0);
	cm_buf_varint(&c, 1234);
	cm_buf_string(&c, "main", 4);
	cm_buf_varint(&c, 0);
	fmt_chunk_append(&out, FMT_THREAD, c.data, c.len, 0, NULL);
	c.len = 0;
	for (size_t i = 0; i < nmods; i++)
		put_module(&c, &modv[i]);
	if (nmods)
		fmt_chunk_append(&out, FMT_MODULES, c.data, c.len, 0, NULL);
	c.len = 0;
	cm_buf_varint(&c, 5678);
	cm_buf_string(&c, "worker", 6);
	fmt_chunk_append(&out, FMT_TASKS, c.data, c.len, 0, NULL);
	/* outer [0, 1 s) containing inner [1 ms, 999 ms) */
	cm_buf ev = {0};
	cm_buf_u8(&ev, FMT_EV_TIME);
	cm_buf_varint(&ev, 0);
	cm_buf_u8(&ev, FMT_EV_BEGIN | 1 << 4);
	cm_buf_varint(&ev, 0);
	cm_buf_u8(&ev, FMT_EV_BEGIN | 2 << 4);
	cm_buf_varint(&ev, 1000000);
	cm_buf_u8(&ev, FMT_EV_END);
	cm_buf_varint(&ev, 998000000);
	cm_buf_u8(&ev, FMT_EV_END);
	cm_buf_varint(&ev, 1000000);
	c.len = 0;
	cm_buf_varint(&c, 0);
	cm_buf_varint(&c, ev.len);
	cm_buf_put(&c, ev.data, ev.len);
	fmt_chunk_append(&out, FMT_EVENTS, c.data, c.len, 0, NULL);
	c.len = 0;
	cm_buf_varint(&c, ns);
	cm_buf_varint(&c, 0);
	cm_buf_varint(&c, 0);
	for (size_t i = 0; i < ns; i++) {
		cm_buf_u8(&c, s[i].flags);
		cm_buf_varint(&c, s[i].tid);
		cm_buf_varint(&c, cm_zigzag(i ? 1000000 : 2000000));
		cm_buf_varint(&c, s[i].weight);
		cm_buf_varint(&c, 0);
		cm_buf_varint(&c, s[i].nregions);
		for (uint32_t k = 0; k < s[i].nregions; k++)
			cm_buf_varint(&c, s[i].regions[k]);
		cm_buf_varint(&c, s[i].nframes);
		for (uint32_t k = 0; k < s[i].nframes; k++)
			cm_buf_varint(&c, k ? cm_zigzag((int64_t)(s[i].frames[k] - s[i].frames[k - 1])) : s[i].frames[0]);
	}
	fmt_chunk_append(&out, FMT_SAMPLES, c.data, c.len, 3, NULL);
	c.len = 0;
	uint64_t end[] = {1001000, 1000000000, 1000000000, 0, 1000, 1, 0, 0, 0};
	for (size_t i = 0; i < ARRAY_LEN(end); i++)
		cm_buf_varint(&c, end[i]);
	fmt_chunk_append(&out, FMT_END, c.data, c.len, 0, NULL);
	FILE *f = fopen(path, "wb");
	int ok = f && fwrite(out.data, 1, out.len, f) == out.len;
	if (f)
		fclose(f);
	cm_buf_free(&out);
	cm_buf_free(&h);
	cm_buf_free(&c);
	cm_buf_free(&ev);
	return ok ? 0 : -1;
}

static const ana_hot_func *hot(const ana_profile *p, const ana_sample_view *v, unsigned kind, const char *name)
{
	for (uint32_t i = 0; i < v->nfuncs[kind]; i++)
		if (!strcmp(p->names[p->smp.funcs[v->funcs[kind][i].func].name], name))
			return &v->funcs[kind][i];
	return NULL;
}

static const ana_finding *finding(const ana_profile *p, const char *type, const char *subject)
{
	for (uint32_t i = 0; i < p->nfindings; i++)
		if (!strcmp(p->findings[i].type, type) && (!subject || !strcmp(p->findings[i].subject, subject)))
			return &p->findings[i];
	return NULL;
}

UNIT_TEST(samples_model)
{
	unit_probe_outer(1);
	uint64_t ret = captured, plain = (uint64_t)(uintptr_t)unit_probe_plain, libc = (uint64_t)(uintptr_t)&getpid;
	mods ms;
	mods_load(&ms);
	fsample *s = calloc(200, sizeof *s);
	size_t n = 0;
	/* 60 on-CPU samples in unit_probe_plain called from the inlined probe_inner, inside
	 * outer/inner; 30 in libc's getpid on the worker thread (no THREAD record, a TASKS name);
	 * 10 at an address in no module; 8 off-CPU in getpid (weight 2 each). */
	for (int i = 0; i < 60; i++)
		s[n++] = (fsample){FMT_S_EXACT_PC, 1234, 1, 2, 2, {1, 2}, {plain + 4, ret}};
	for (int i = 0; i < 30; i++)
		s[n++] = (fsample){FMT_S_EXACT_PC, 5678, 1, 0, 2, {0}, {libc, ret}};
	for (int i = 0; i < 10; i++)
		s[n++] = (fsample){FMT_S_EXACT_PC, 1234, 1, 1, 1, {1}, {0x1000}};
	for (int i = 0; i < 8; i++)
		s[n++] = (fsample){FMT_S_OFFCPU | FMT_S_EXACT_PC, 1234, 2, 1, 2, {1}, {libc, ret}};
	char dir[] = "/tmp/fennec-unit-XXXXXX", path[PATH_MAX];
	UNIT_CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof path, "%s/run.fnc", dir);
	UNIT_CHECK_EQ(write_profile(path, 4000000001u, ms.m, ms.n, s, n), 0);
	ana_profile p;
	fmt_error err;
	int rc = ana_load(path, NULL, &p, &err);
	UNIT_CHECK_EQ(rc, 0);
	if (rc)
		printf("    %s\n", err.msg);
	const ana_sampling *sm = &p.smp;
	UNIT_CHECK(sm->present);
	UNIT_CHECK_EQ(sm->nsamples, 108);
	UNIT_CHECK_EQ(sm->mode, FMT_SAMPLE_WALL);
	UNIT_CHECK_EQ(sm->weight[ANA_CPU], 100);
	UNIT_CHECK_EQ(sm->weight[ANA_OFFCPU], 16);
	UNIT_CHECK(fabs(sm->achieved_hz - 100.0) < 1e-9); /* 100 on-CPU samples in 1 s of CPU */
	const ana_sample_view *v = &sm->all;
	UNIT_CHECK_EQ(v->samples[ANA_CPU], 100);
	UNIT_CHECK(v->nfuncs[ANA_CPU] > 0 && !strcmp(p.names[sm->funcs[v->funcs[ANA_CPU][0].func].name], "unit_probe_plain"));
	const ana_hot_func *h = hot(&p, v, ANA_CPU, "unit_probe_plain");
	UNIT_CHECK(h && h->self == 60 && h->total == 60 && fabs(h->self_pct - 60.0) < 1e-9);
	UNIT_CHECK(h && h->caller != ANA_NONE && !strcmp(p.names[sm->funcs[h->caller].name], "probe_inner"));
	UNIT_CHECK(h && h->file != ANA_NONE && ends_with(p.names[h->file], "test_symbol.c"));
	/* the inlined function and the one it is inlined into are both on those stacks */
	h = hot(&p, v, ANA_CPU, "probe_inner");
	UNIT_CHECK(h && h->self == 0 && h->total == 90);
	h = hot(&p, v, ANA_CPU, "unit_probe_outer");
	UNIT_CHECK(h && h->self == 0 && h->total == 90 && fabs(h->total_pct - 90.0) < 1e-9);
	h = hot(&p, v, ANA_CPU, "[unknown]");
	UNIT_CHECK(h && h->self == 10);
	UNIT_CHECK_EQ(sm->unknown_frames, 10);
	h = hot(&p, v, ANA_OFFCPU, "unit_probe_outer");
	UNIT_CHECK(h && h->total == 16 && fabs(h->total_pct - 100.0) < 1e-9);
	/* the call tree: unit_probe_outer -> probe_inner -> {unit_probe_plain, getpid} */
	uint32_t root = ANA_NONE;
	for (uint32_t i = 0; i < v->ntree; i++)
		if (v->tree[i].parent == ANA_NONE && !strcmp(p.names[sm->funcs[v->tree[i].func].name], "unit_probe_outer"))
			root = i;
	UNIT_CHECK(root != ANA_NONE && v->tree[root].total[ANA_CPU] == 90 && v->tree[root].self[ANA_CPU] == 0);
	UNIT_CHECK(root != ANA_NONE && v->tree[root].first_child != ANA_NONE &&
		   v->tree[v->tree[root].first_child].next_sibling == ANA_NONE);
	/* regions: inner holds the 60, outer those 60 and the 10 unknown ones */
	uint32_t outer = ana_node_find(&p, ANA_NONE, ana_intern(&p, "outer"));
	uint32_t inner = outer == ANA_NONE ? ANA_NONE : ana_node_find(&p, outer, ana_intern(&p, "inner"));
	UNIT_CHECK(outer != ANA_NONE && inner != ANA_NONE);
	if (inner != ANA_NONE) {
		UNIT_CHECK_EQ(v->nodes[inner].samples[ANA_CPU], 60);
		UNIT_CHECK_EQ(v->nodes[outer].samples[ANA_CPU], 70);
		UNIT_CHECK_EQ(v->nodes[outer].samples[ANA_OFFCPU], 8);
		UNIT_CHECK(v->nodes[inner].ntop == 1 && fabs(v->nodes[inner].top_pct[0] - 100.0) < 1e-9);
		UNIT_CHECK(v->nodes[outer].ntop == 2 && fabs(v->nodes[outer].top_pct[0] - 600.0 / 7) < 1e-9);
	}
	/* threads: the worker exists now, named from TASKS, with no file index */
	uint32_t worker = ANA_NONE;
	for (uint32_t i = 0; i < p.nthreads; i++)
		if (p.threads[i].tid == 5678)
			worker = i;
	UNIT_CHECK(worker != ANA_NONE);
	if (worker != ANA_NONE) {
		UNIT_CHECK_STR(p.threads[worker].name, "worker");
		UNIT_CHECK_EQ(p.threads[worker].index, UINT32_MAX);
		UNIT_CHECK_EQ(v->thread_samples[worker * ANA_NKINDS + ANA_CPU], 30);
	}
	/* selections: a region, a thread */
	ana_sample_view sel;
	ana_sample_filter flt = {.region = "inner"};
	UNIT_CHECK_EQ(ana_sample_view_build(&p, &flt, &sel), 0);
	UNIT_CHECK_EQ(sel.samples[ANA_CPU], 60);
	UNIT_CHECK(sel.nfuncs[ANA_CPU] >= 1 && fabs(sel.funcs[ANA_CPU][0].self_pct - 100.0) < 1e-9);
	ana_sample_view_free(&sel);
	flt = (ana_sample_filter){.tid = 5678};
	UNIT_CHECK_EQ(ana_sample_view_build(&p, &flt, &sel), 0);
	UNIT_CHECK_EQ(sel.samples[ANA_CPU], 30);
	UNIT_CHECK_EQ(sel.samples[ANA_OFFCPU], 0);
	ana_sample_view_free(&sel);
	/* findings: unit_probe_plain is 60 % of the on-CPU samples; [unknown] never fires */
	const ana_finding *fd = finding(&p, "hot_function", "unit_probe_plain");
	UNIT_CHECK(fd && fd->severity == ANA_HIGH && fd->recommendation && strstr(fd->recommendation, "probe_inner"));
	UNIT_CHECK(finding(&p, "hot_function", "[unknown]") == NULL);
	UNIT_CHECK_EQ(p.nwarnings, 0);
	ana_profile_free(&p);

	/* The executable rebuilt since the recording: its frames are module+offset, one warning
	 * counting every sample with a frame in it (60 + 30 + 8). */
	fmt_module *exe = (fmt_module *)mod_of(&ms, plain);
	if (exe && exe->build_id_len) {
		exe->build_id[0] ^= 0xff;
		UNIT_CHECK_EQ(write_profile(path, 4000000001u, ms.m, ms.n, s, n), 0);
		UNIT_CHECK_EQ(ana_load(path, NULL, &p, &err), 0);
		int warned = 0;
		char want[PATH_MAX + 64];
		snprintf(want, sizeof want, "%s: build id differs from the recording; 98 samples unsymbolised", exe->path);
		for (uint32_t i = 0; i < p.nwarnings; i++)
			warned += !strcmp(p.warnings[i], want);
		UNIT_CHECK_EQ(warned, 1);
		if (warned != 1)
			for (uint32_t i = 0; i < p.nwarnings; i++)
				printf("    warning: %s\n", p.warnings[i]);
		UNIT_CHECK(hot(&p, &p.smp.all, ANA_CPU, "unit_probe_plain") == NULL);
		const ana_hot_func *top = p.smp.all.nfuncs[ANA_CPU] ? &p.smp.all.funcs[ANA_CPU][0] : NULL;
		UNIT_CHECK(top && strstr(p.names[p.smp.funcs[top->func].name], "+0x") && top->self == 60);
		int status_seen = 0;
		for (uint32_t i = 0; i < p.smp.nmodules; i++)
			status_seen |= p.smp.modules[i].status == 2 && !strcmp(p.names[p.smp.modules[i].path], exe->path);
		UNIT_CHECK(status_seen);
		/* one finding for the module as a whole, none per address */
		char subject[PATH_MAX];
		const char *base = strrchr(exe->path, '/');
		snprintf(subject, sizeof subject, "%s (not symbolised)", base ? base + 1 : exe->path);
		const ana_finding *mf = finding(&p, "hot_function", subject);
		UNIT_CHECK(mf && mf->severity == ANA_HIGH);
		int per_address = 0;
		for (uint32_t i = 0; i < p.nfindings; i++)
			per_address += !strcmp(p.findings[i].type, "hot_function") && strstr(p.findings[i].subject, "+0x");
		UNIT_CHECK_EQ(per_address, 0);
		ana_profile_free(&p);
		exe->build_id[0] ^= 0xff;
	}
	unlink(path);
	rmdir(dir);
	free(s);
	mods_free(&ms);
}

UNIT_TEST(samples_flat_profile)
{
	/* JIT code of 20 functions, one perf map symbol each, sampled evenly: 5 % each. */
	uint64_t pid = 4000000002u;
	char map[PATH_MAX];
	snprintf(map, sizeof map, "/tmp/perf-%llu.map", (unsigned long long)pid);
	FILE *f = fopen(map, "w");
	UNIT_CHECK(f != NULL);
	if (!f)
		return;
	for (int i = 0; i < 20; i++)
		fprintf(f, "%llx 100 jit_fn_%d\n", 0x7e0000000000ull + 0x1000ull * (unsigned)i, i);
	fclose(f);
	fsample *s = calloc(400, sizeof *s);
	size_t n = 0;
	for (int r = 0; r < 20; r++)
		for (int i = 0; i < 20; i++)
			s[n++] = (fsample){FMT_S_EXACT_PC, 1234, 1, 0, 1, {0}, {0x7e0000000000ull + 0x1000ull * (unsigned)i + 8}};
	char dir[] = "/tmp/fennec-unit-XXXXXX", path[PATH_MAX];
	UNIT_CHECK(mkdtemp(dir) != NULL);
	snprintf(path, sizeof path, "%s/run.fnc", dir);
	UNIT_CHECK_EQ(write_profile(path, pid, NULL, 0, s, n), 0);
	ana_profile p;
	fmt_error err;
	UNIT_CHECK_EQ(ana_load(path, NULL, &p, &err), 0);
	const ana_sample_view *v = &p.smp.all;
	UNIT_CHECK_EQ(v->nfuncs[ANA_CPU], 20);
	const ana_hot_func *h = hot(&p, v, ANA_CPU, "jit_fn_7");
	UNIT_CHECK(h && h->self == 20 && fabs(h->self_pct - 5.0) < 1e-9);
	UNIT_CHECK(h && ends_with(p.names[p.smp.funcs[h->func].module], "perf-4000000002.map"));
	UNIT_CHECK(finding(&p, "hot_function", NULL) == NULL);
	ana_profile_free(&p);
	unlink(path);
	rmdir(dir);
	unlink(map);
	free(s);
}

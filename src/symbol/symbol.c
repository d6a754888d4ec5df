/*
 * symbol.c - the symboliser (symbol.h): one libdwfl session per distinct module, opened
 * on first use after its build id is checked against the recording; a cache of every
 * address looked up; perf maps for JIT code. Strings and frame arrays are carved from an
 * arena of the context, so what a lookup returns stays valid until sym_close().
 */
#include "symbol/symbol.h"

#include <dwarf.h>
#include <elfutils/libdw.h>
#include <elfutils/libdwfl.h>
#include <gelf.h>
#include <errno.h>
#include <fcntl.h>
#include <inttypes.h>
#include <libiberty/demangle.h>
#include <stdio.h>
#include <stdlib.h>
#include <link.h>
#include <sys/auxv.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>

/* ---- arena and interned strings ---- */

typedef struct block {
	struct block *next;
	size_t used, cap;
	char data[];
} block;

typedef struct strset {
	const char **slot;
	uint64_t *hash;
	size_t cap, n;
} strset;

typedef struct perf_sym {
	uint64_t start, size;
	const char *name;
	uint32_t order;       /* line number in the map: later lines win */
} perf_sym;

/* A function symbol of a module, by runtime address. */
typedef struct fsym {
	uint64_t start, end;
	const char *name;     /* as in the symbol table (owned by libelf) */
	int rank;             /* preference among aliases: global 3, weak 2, local 1 */
} fsym;

typedef struct smod {
	char *path;           /* as recorded (perf maps: the map file's path) */
	const char *name;     /* file name without directory, for fallback frames */
	uint8_t *build_id;
	size_t build_id_len;
	uint64_t bias;
	int perf_map;         /* a perf map pseudo-module */
	uint64_t pid, since_real_ns;
	int opened;
	int status;           /* enum sym_status, valid once opened */
	Dwfl *dwfl;
	Dwfl_Module *mod;
	perf_sym *syms;
	size_t nsyms;
	fsym *fsyms;          /* function symbols sorted by start, built on first lookup */
	size_t nfsyms;
	int fsyms_built;
	const uint8_t *eh_table; /* .eh_frame_hdr search table: (start, fde) int32 pairs */
	size_t eh_count;
	uint64_t eh_vaddr;    /* the section's address, which the pairs are relative to */
	int eh_built;
} smod;

typedef struct centry {
	uint64_t addr;
	uint32_t key;         /* module id << 1 | exact; UINT32_MAX: empty slot */
	uint32_t n;
	sym_frame *frames;
} centry;

struct sym_ctx {
	sym_options opt;
	char *debug_path;     /* owned copy given to libdwfl */
	Dwfl_Callbacks cb;
	block *blocks;
	strset strs;
	smod *mods;
	uint32_t nmods, mods_cap;
	centry *cache;
	size_t cache_cap, cache_n;
};

static void *arena_alloc(sym_ctx *s, size_t n)
{
	n = (n + 7) & ~(size_t)7;
	block *b = s->blocks;
	if (!b || b->cap - b->used < n) {
		size_t cap = n > 65536 ? n : 65536;
		block *nb = malloc(sizeof *nb + cap);
		if (!nb)
			return NULL;
		nb->used = 0;
		nb->cap = cap;
		/* A large one-off block goes behind the current one, which keeps its free space. */
		if (b && n > 65536) {
			nb->next = b->next;
			b->next = nb;
		} else {
			nb->next = b;
			s->blocks = nb;
		}
		b = nb;
	}
	void *p = b->data + b->used;
	b->used += n;
	return p;
}

static uint64_t hash_bytes(const void *p, size_t n, uint64_t h)
{
	const unsigned char *c = p;
	for (size_t i = 0; i < n; i++)
		h = (h ^ c[i]) * 1099511628211ull;
	return h;
}

/* The context's copy of `str` (one copy per distinct string); NULL on allocation failure. */
static const char *intern(sym_ctx *s, const char *str)
{
	strset *t = &s->strs;
	if ((t->n + 1) * 2 > t->cap) {
		size_t cap = t->cap ? t->cap * 2 : 1024;
		const char **slot = calloc(cap, sizeof *slot);
		uint64_t *hash = calloc(cap, sizeof *hash);
		if (!slot || !hash) {
			free(slot);
			free(hash);
			return NULL;
		}
		for (size_t i = 0; i < t->cap; i++) {
			if (!t->slot[i])
				continue;
			size_t j = t->hash[i] & (cap - 1);
			while (slot[j])
				j = (j + 1) & (cap - 1);
			slot[j] = t->slot[i];
			hash[j] = t->hash[i];
		}
		free(t->slot);
		free(t->hash);
		t->slot = slot;
		t->hash = hash;
		t->cap = cap;
	}
	size_t len = strlen(str);
	uint64_t h = cm_mix64(hash_bytes(str, len, 1469598103934665603ull));
	size_t i = h & (t->cap - 1);
	for (; t->slot[i]; i = (i + 1) & (t->cap - 1))
		if (t->hash[i] == h && !strcmp(t->slot[i], str))
			return t->slot[i];
	char *copy = arena_alloc(s, len + 1);
	if (!copy)
		return NULL;
	memcpy(copy, str, len + 1);
	t->slot[i] = copy;
	t->hash[i] = h;
	t->n++;
	return copy;
}

/* ---- demangling ---- */

static int is_hex(char c) { return (c >= '0' && c <= '9') || (c >= 'a' && c <= 'f'); }

/* Drop a Rust legacy hash, "::h" and 16 hex digits at the end, in place. */
static void strip_rust_hash(char *s)
{
	size_t n = strlen(s);
	if (n < 19 || memcmp(s + n - 19, "::h", 3))
		return;
	for (size_t i = n - 16; i < n; i++)
		if (!is_hex(s[i]))
			return;
	s[n - 19] = 0;
}

char *sym_demangle(const char *name)
{
	if (!name || name[0] != '_' || (name[1] != 'Z' && name[1] != 'R'))
		return NULL;
	/* DMGL_AUTO tries Itanium C++, Rust legacy (itself Itanium-shaped) and Rust v0. */
	char *d = cplus_demangle(name, DMGL_PARAMS | DMGL_ANSI | DMGL_AUTO);
	if (d)
		strip_rust_hash(d);
	return d;
}

/* ---- modules ---- */

int sym_open(const sym_options *opt, sym_ctx **out)
{
	*out = NULL;
	sym_ctx *s = calloc(1, sizeof *s);
	if (!s)
		return FENNEC_ENOMEM;
	if (opt)
		s->opt = *opt;
	if (!s->opt.perf_map_dir)
		s->opt.perf_map_dir = "/tmp";
	s->opt.perf_map_dir = strdup(s->opt.perf_map_dir);
	s->debug_path = s->opt.debug_path ? strdup(s->opt.debug_path) : NULL;
	s->opt.debug_path = s->debug_path;
	if (!s->opt.perf_map_dir || (opt && opt->debug_path && !s->debug_path)) {
		sym_close(s);
		return FENNEC_ENOMEM;
	}
	s->cb.find_elf = dwfl_build_id_find_elf;
	s->cb.find_debuginfo = dwfl_standard_find_debuginfo;
	s->cb.section_address = dwfl_offline_section_address;
	s->cb.debuginfo_path = s->debug_path ? &s->debug_path : NULL;
	*out = s;
	return 0;
}

void sym_close(sym_ctx *s)
{
	if (!s)
		return;
	for (uint32_t i = 0; i < s->nmods; i++) {
		if (s->mods[i].dwfl)
			dwfl_end(s->mods[i].dwfl);
		free(s->mods[i].path);
		free(s->mods[i].build_id);
		free(s->mods[i].syms);
		free(s->mods[i].fsyms);
	}
	free(s->mods);
	free(s->cache);
	free(s->strs.slot);
	free(s->strs.hash);
	for (block *b = s->blocks, *next; b; b = next) {
		next = b->next;
		free(b);
	}
	free((char *)s->opt.perf_map_dir);
	free(s->debug_path);
	free(s);
}

static smod *new_mod(sym_ctx *s, uint32_t *id)
{
	if (s->nmods == s->mods_cap) {
		uint32_t cap = s->mods_cap ? s->mods_cap * 2 : 32;
		smod *m = realloc(s->mods, cap * sizeof *m);
		if (!m)
			return NULL;
		s->mods = m;
		s->mods_cap = cap;
	}
	*id = s->nmods;
	smod *m = &s->mods[s->nmods++];
	memset(m, 0, sizeof *m);
	return m;
}

int sym_add_module(sym_ctx *s, const fmt_module *fm, uint32_t *id)
{
	const char *path = fm->path ? fm->path : "";
	for (uint32_t i = 0; i < s->nmods; i++) {
		smod *m = &s->mods[i];
		if (!m->perf_map && m->bias == fm->bias && m->build_id_len == fm->build_id_len && !strcmp(m->path, path) &&
		    (!fm->build_id_len || !memcmp(m->build_id, fm->build_id, fm->build_id_len))) {
			*id = i;
			return 0;
		}
	}
	smod *m = new_mod(s, id);
	if (!m)
		return FENNEC_ENOMEM;
	m->path = strdup(path);
	if (fm->build_id_len && (m->build_id = malloc(fm->build_id_len)))
		memcpy(m->build_id, fm->build_id, fm->build_id_len);
	if (!m->path || (fm->build_id_len && !m->build_id)) {
		free(m->path);
		free(m->build_id);
		s->nmods--;
		return FENNEC_ENOMEM;
	}
	m->build_id_len = fm->build_id_len;
	m->bias = fm->bias;
	const char *slash = strrchr(m->path, '/');
	m->name = slash && slash[1] ? slash + 1 : m->path;
	return 0;
}

int sym_add_perf_map(sym_ctx *s, uint64_t pid, uint64_t since_real_ns, uint32_t *id)
{
	for (uint32_t i = 0; i < s->nmods; i++)
		if (s->mods[i].perf_map && s->mods[i].pid == pid && s->mods[i].since_real_ns == since_real_ns) {
			*id = i;
			return 0;
		}
	smod *m = new_mod(s, id);
	if (!m)
		return FENNEC_ENOMEM;
	if (asprintf(&m->path, "%s/perf-%" PRIu64 ".map", s->opt.perf_map_dir, pid) < 0) {
		m->path = NULL;
		s->nmods--;
		return FENNEC_ENOMEM;
	}
	m->name = strrchr(m->path, '/') + 1;
	m->perf_map = 1;
	m->pid = pid;
	m->since_real_ns = since_real_ns;
	return 0;
}

/* Open a regular file only: a profile is untrusted, and a path naming a FIFO or a device
 * must not block or feed the analysis. */
static int open_regular(const char *file)
{
	int fd = open(file, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	struct stat st;
	if (fd >= 0 && (fstat(fd, &st) != 0 || !S_ISREG(st.st_mode))) {
		close(fd);
		fd = -1;
	}
	return fd;
}

static int cmp_perf_sym(const void *a, const void *b)
{
	const perf_sym *x = a, *y = b;
	if (x->start != y->start)
		return (x->start > y->start) - (x->start < y->start);
	return (x->order > y->order) - (x->order < y->order);
}

/* Read a perf map: sorted by start, a symbol redefined at the same start keeps its last
 * definition (a JIT reusing freed code memory). */
static void open_perf_map(sym_ctx *s, smod *m)
{
	m->status = SYM_MISSING;
	int fd = open_regular(m->path);
	FILE *fp = fd >= 0 ? fdopen(fd, "r") : NULL;
	if (!fp) {
		if (fd >= 0)
			close(fd);
		return;
	}
	struct stat st;
	if (m->since_real_ns && fstat(fileno(fp), &st) == 0 &&
	    (uint64_t)st.st_mtim.tv_sec * 1000000000ull + (uint64_t)st.st_mtim.tv_nsec < m->since_real_ns) {
		fclose(fp);
		return; /* written before this process started: another process with this pid */
	}
	char *line = NULL;
	size_t cap = 0, n = 0, alloc = 0;
	perf_sym *syms = NULL;
	uint32_t order = 0;
	while (getline(&line, &cap, fp) > 0) {
		char *p = line, *end;
		uint64_t start = strtoull(p, &end, 16);
		if (end == p || *end != ' ')
			continue;
		p = end + 1;
		uint64_t size = strtoull(p, &end, 16);
		if (end == p || *end != ' ' || !size)
			continue;
		p = end + 1;
		p[strcspn(p, "\r\n")] = 0;
		if (!*p)
			continue;
		if (n == alloc) {
			size_t c = alloc ? alloc * 2 : 256;
			perf_sym *ns = realloc(syms, c * sizeof *ns);
			if (!ns)
				break;
			syms = ns;
			alloc = c;
		}
		char *dm = sym_demangle(p);
		const char *name = intern(s, dm ? dm : p);
		free(dm);
		if (!name)
			break;
		syms[n++] = (perf_sym){start, size, name, order++};
	}
	free(line);
	fclose(fp);
	qsort(syms, n, sizeof *syms, cmp_perf_sym);
	size_t k = 0;
	for (size_t i = 0; i < n; i++) {
		if (k && syms[k - 1].start == syms[i].start)
			k--;
		syms[k++] = syms[i];
	}
	m->syms = syms;
	m->nsyms = k;
	m->status = SYM_OK;
}

/* The build id of `mod`'s main file, or 0 bytes. */
static int mod_build_id(Dwfl_Module *mod, const unsigned char **bits)
{
	GElf_Addr vaddr;
	Dwarf_Addr bias;
	if (!dwfl_module_getelf(mod, &bias))
		return 0;
	int n = dwfl_module_build_id(mod, bits, &vaddr);
	return n > 0 ? n : 0;
}

/* Report `file` at the module's bias in a fresh session; keep it if its build id is the
 * recorded one (or none was recorded). Returns 1 when kept. */
static int try_fd(sym_ctx *s, smod *m, const char *file, int fd, int *seen_other)
{
	if (fd < 0)
		return 0;
	Dwfl *d = dwfl_begin(&s->cb);
	if (!d) {
		close(fd);
		return 0;
	}
	dwfl_report_begin(d);
	Dwfl_Module *mod = dwfl_report_elf(d, m->name, file, fd, m->bias, false); /* consumes fd */
	dwfl_report_end(d, NULL, NULL);
	if (!mod) {
		close(fd); /* consumed only on success */
		dwfl_end(d);
		return 0;
	}
	if (m->build_id_len) {
		const unsigned char *bits;
		int n = mod_build_id(mod, &bits);
		if ((size_t)n != m->build_id_len || memcmp(bits, m->build_id, m->build_id_len)) {
			*seen_other = 1;
			dwfl_end(d);
			return 0;
		}
	}
	m->dwfl = d;
	m->mod = mod;
	return 1;
}

static int try_file(sym_ctx *s, smod *m, const char *file, int *seen_other)
{
	return try_fd(s, m, file, open_regular(file), seen_other);
}

/* The vDSO has no file, but this process has one too: when its build id is the recorded
 * one (same kernel), a copy of it in a memory file serves. */
static int try_own_vdso(sym_ctx *s, smod *m, int *seen_other)
{
	const ElfW(Ehdr) *eh = (const ElfW(Ehdr) *)getauxval(AT_SYSINFO_EHDR);
	if (!eh || memcmp(eh->e_ident, ELFMAG, SELFMAG) || !m->build_id_len)
		return 0;
	size_t size = (size_t)eh->e_shoff + (size_t)eh->e_shnum * eh->e_shentsize;
	if (size < sizeof *eh || size > (1u << 20))
		return 0;
	int fd = memfd_create("fennec-vdso", MFD_CLOEXEC);
	if (fd < 0)
		return 0;
	if (write(fd, eh, size) != (ssize_t)size || lseek(fd, 0, SEEK_SET) != 0) {
		close(fd);
		return 0;
	}
	return try_fd(s, m, "[vdso]", fd, seen_other);
}

static void open_module(sym_ctx *s, smod *m)
{
	m->opened = 1;
	if (m->perf_map) {
		open_perf_map(s, m);
		return;
	}
	int other = 0, found = 0;
	/* "[vdso]" and the like have no file. */
	if (m->path[0] == '/' || m->path[0] == '.')
		found = try_file(s, m, m->path, &other);
	else if (!strcmp(m->path, "[vdso]"))
		found = try_own_vdso(s, m, &other);
	if (!found && m->build_id_len) {
		/* The object at the path is gone or changed: a debug file with the recorded
		 * build id still has its symbols, DWARF and program headers. */
		char hex[2 * 64 + 1];
		size_t n = m->build_id_len < 64 ? m->build_id_len : 64;
		for (size_t i = 0; i < n; i++)
			snprintf(hex + 2 * i, 3, "%02x", m->build_id[i]);
		const char *dp = s->debug_path ? s->debug_path : ":.debug:/usr/lib/debug";
		while (*dp && !found) {
			size_t len = strcspn(dp, ":");
			const char *dir = dp;
			if (*dir == '+' || *dir == '-') {
				dir++;
				len--;
			}
			if (len > 0 && dir[0] == '/' && len < 3000 && n > 1) {
				char file[4096];
				snprintf(file, sizeof file, "%.*s/.build-id/%.2s/%s.debug", (int)len, dir, hex, hex + 2);
				found = try_file(s, m, file, &other);
			}
			dp = dir + len;
			if (*dp == ':')
				dp++;
		}
	}
	if (!found) {
		m->status = other ? SYM_BUILDID : SYM_MISSING;
		return;
	}
	Dwarf_Addr bias;
	int nsyms = dwfl_module_getsymtab(m->mod);
	m->status = nsyms > 0 || dwfl_module_getdwarf(m->mod, &bias) ? SYM_OK : SYM_NOSYMS;
}

int sym_module_status(sym_ctx *s, uint32_t id)
{
	if (id >= s->nmods)
		return SYM_MISSING;
	if (!s->mods[id].opened)
		open_module(s, &s->mods[id]);
	return s->mods[id].status;
}

const char *sym_module_path(const sym_ctx *s, uint32_t id) { return id < s->nmods ? s->mods[id].path : ""; }
const char *sym_module_name(const sym_ctx *s, uint32_t id) { return id < s->nmods ? s->mods[id].name : ""; }

const char *sym_status_name(int status)
{
	static const char *n[] = {"ok", "missing", "build id differs", "no symbols"};
	return status >= 0 && status < 4 ? n[status] : "unknown";
}

/* ---- lookups ---- */

static int cmp_fsym(const void *a, const void *b)
{
	const fsym *x = a, *y = b;
	if (x->start != y->start)
		return (x->start > y->start) - (x->start < y->start);
	if (x->rank != y->rank)
		return y->rank - x->rank; /* preferred alias first */
	return strcmp(x->name, y->name);
}

/*
 * The module's function symbols (.symtab, else .dynsym), sorted once. libdwfl's
 * dwfl_module_addrinfo scans the whole table on every call, which for a binary with 10^5
 * symbols (node, a JVM, libtorch) costs milliseconds per address. Only symbols with a size
 * are kept: a sizeless one says where a function starts, not where it ends, and naming
 * the code after it would be a guess (the unwind tables name such code instead).
 */
static void build_fsyms(smod *m)
{
	m->fsyms_built = 1;
	int n = dwfl_module_getsymtab(m->mod);
	if (n <= 0)
		return;
	fsym *v = malloc((size_t)n * sizeof *v);
	if (!v)
		return;
	size_t k = 0;
	for (int i = 1; i < n; i++) {
		GElf_Sym sym;
		GElf_Addr addr;
		GElf_Word shndx;
		const char *name = dwfl_module_getsym_info(m->mod, i, &sym, &addr, &shndx, NULL, NULL);
		int type = GELF_ST_TYPE(sym.st_info), bind = GELF_ST_BIND(sym.st_info);
		if (!name || !name[0] || !sym.st_size || shndx == SHN_UNDEF ||
		    (type != STT_FUNC && type != STT_GNU_IFUNC && type != STT_NOTYPE))
			continue;
		v[k++] = (fsym){addr, addr + sym.st_size, name, bind == STB_GLOBAL ? 3 : bind == STB_WEAK ? 2 : 1};
	}
	qsort(v, k, sizeof *v, cmp_fsym);
	/* one entry per start: the preferred alias */
	size_t u = 0;
	for (size_t i = 0; i < k; i++)
		if (!u || v[u - 1].start != v[i].start)
			v[u++] = v[i];
		else if (v[i].end > v[u - 1].end) /* aliases of different sizes: the largest covers */
			v[u - 1].end = v[i].end;
	m->fsyms = v;
	m->nfsyms = u;
}

/* Find the binary search table of .eh_frame_hdr (the form GNU ld writes: count udata4,
 * entries datarel sdata4); the table stays valid as long as the module's session. */
static void build_eh_table(smod *m)
{
	m->eh_built = 1;
	Dwarf_Addr bias;
	Elf *elf = dwfl_module_getelf(m->mod, &bias);
	size_t shstrndx;
	if (!elf || elf_getshdrstrndx(elf, &shstrndx) != 0)
		return;
	for (Elf_Scn *scn = NULL; (scn = elf_nextscn(elf, scn));) {
		GElf_Shdr sh;
		const char *name;
		if (!gelf_getshdr(scn, &sh) || sh.sh_type != SHT_PROGBITS ||
		    !(name = elf_strptr(elf, shstrndx, sh.sh_name)) || strcmp(name, ".eh_frame_hdr"))
			continue;
		Elf_Data *d = elf_getdata(scn, NULL);
		if (!d || !d->d_buf || d->d_size < 4)
			return;
		const uint8_t *h = d->d_buf;
		size_t ptr_len = (h[1] & 0x0f) == 0x03 || (h[1] & 0x0f) == 0x0b ? 4 : (h[1] & 0x0f) == 0x04 || (h[1] & 0x0f) == 0x0c ? 8 : 0;
		if (h[0] != 1 || !ptr_len || h[2] != 0x03 || h[3] != 0x3b || d->d_size < 4 + ptr_len + 4)
			return;
		uint32_t count;
		memcpy(&count, h + 4 + ptr_len, 4);
		if ((d->d_size - 8 - ptr_len) / 8 < count)
			return;
		m->eh_table = h + 8 + ptr_len;
		m->eh_count = count;
		m->eh_vaddr = sh.sh_addr;
		return;
	}
}

/* The start (ELF address) of the function whose unwind entry covers runtime address `a`;
 * 0 when unknown. */
static uint64_t function_start(smod *m, uint64_t a)
{
	Dwarf_Addr cbias = 0;
	Dwarf_CFI *cfi = dwfl_module_eh_cfi(m->mod, &cbias);
	Dwarf_Frame *frame;
	if (!cfi || dwarf_cfi_addrframe(cfi, a - cbias, &frame) != 0)
		return 0; /* no unwind entry covers it */
	free(frame);
	if (!m->eh_built)
		build_eh_table(m);
	/* Entries are sorted and do not overlap: the covering one starts last at or before it. */
	int64_t rel = (int64_t)(a - m->bias - m->eh_vaddr);
	size_t lo = 0, hi = m->eh_count;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		int32_t start;
		memcpy(&start, m->eh_table + 8 * mid, 4);
		if (start <= rel)
			lo = mid + 1;
		else
			hi = mid;
	}
	if (!lo)
		return 0;
	int32_t start;
	memcpy(&start, m->eh_table + 8 * (lo - 1), 4);
	return m->eh_vaddr + (uint64_t)(int64_t)start;
}

/* The name of the function symbol covering `a`, or NULL. */
static const char *fsym_find(smod *m, uint64_t a)
{
	if (!m->fsyms_built)
		build_fsyms(m);
	size_t lo = 0, hi = m->nfsyms;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (m->fsyms[mid].start <= a)
			lo = mid + 1;
		else
			hi = mid;
	}
	/* The nearest start below; a symbol nested in a larger one wins over it. */
	for (size_t i = lo, seen = 0; i-- > 0 && seen < 16; seen++)
		if (a < m->fsyms[i].end)
			return m->fsyms[i].name;
	return NULL;
}

/* The name of a subprogram or inlined subroutine DIE: its linkage name demangled when it
 * has one (C++, Rust), else its plain name. NULL when it has neither. */
static const char *die_name(sym_ctx *s, Dwarf_Die *die)
{
	Dwarf_Attribute a;
	const char *n = NULL;
	if (dwarf_attr_integrate(die, DW_AT_linkage_name, &a) || dwarf_attr_integrate(die, DW_AT_MIPS_linkage_name, &a))
		n = dwarf_formstring(&a);
	if (n) {
		char *d = sym_demangle(n);
		if (d) {
			const char *r = intern(s, d);
			free(d);
			return r;
		}
	}
	if (dwarf_attr_integrate(die, DW_AT_name, &a) && (n = dwarf_formstring(&a)))
		return intern(s, n);
	return n ? intern(s, n) : NULL;
}

/* `file` made absolute with the compilation directory when it is relative (as GCC
 * records files named relative to where it ran), interned. */
static const char *source_path(sym_ctx *s, const char *comp_dir, const char *file)
{
	if (!file)
		return NULL;
	if (file[0] == '/' || !comp_dir || !comp_dir[0])
		return intern(s, file);
	char buf[4096];
	while (file[0] == '.' && file[1] == '/')
		file += 2;
	snprintf(buf, sizeof buf, "%s%s%s", comp_dir, comp_dir[strlen(comp_dir) - 1] == '/' ? "" : "/", file);
	return intern(s, buf);
}

static const char *cu_comp_dir(Dwarf_Die *cu)
{
	Dwarf_Attribute a;
	return dwarf_attr(cu, DW_AT_comp_dir, &a) ? dwarf_formstring(&a) : NULL;
}

static const char *call_file(sym_ctx *s, Dwarf_Die *cu, Dwarf_Die *inl, uint32_t *line)
{
	Dwarf_Attribute a;
	Dwarf_Word idx = 0, ln = 0;
	*line = 0;
	if (dwarf_attr(inl, DW_AT_call_line, &a) && dwarf_formudata(&a, &ln) == 0)
		*line = (uint32_t)ln;
	if (!dwarf_attr(inl, DW_AT_call_file, &a) || dwarf_formudata(&a, &idx) != 0)
		return NULL;
	Dwarf_Files *files;
	size_t nfiles;
	if (dwarf_getsrcfiles(cu, &files, &nfiles) != 0 || idx >= nfiles)
		return NULL;
	return source_path(s, cu_comp_dir(cu), dwarf_filesrc(files, idx, NULL, NULL));
}

#define MAX_INLINE 64

/* Frames of module m at lookup address a (already adjusted for return addresses); the
 * fallback name uses `addr`, the address as recorded. */
static int resolve(sym_ctx *s, smod *m, uint64_t addr, uint64_t a, sym_frame *out, uint32_t *nout)
{
	*nout = 0;
	if (m->perf_map) {
		size_t lo = 0, hi = m->nsyms;
		while (lo < hi) {
			size_t mid = lo + (hi - lo) / 2;
			if (m->syms[mid].start <= a)
				lo = mid + 1;
			else
				hi = mid;
		}
		if (lo && a - m->syms[lo - 1].start < m->syms[lo - 1].size) {
			out[0] = (sym_frame){m->syms[lo - 1].name, NULL, 0, 0, 1};
			*nout = 1;
		}
		return 0;
	}
	uint32_t n = 0;
	if (m->status == SYM_OK) {
		const char *elf_name = fsym_find(m, a);
		const char *file0 = NULL;
		int line0 = 0;
		Dwfl_Line *l = dwfl_module_getsrc(m->mod, a);
		if (l) {
			const char *f = dwfl_lineinfo(l, NULL, &line0, NULL, NULL, NULL);
			file0 = source_path(s, dwfl_line_comp_dir(l), f);
			if (line0 < 0)
				line0 = 0;
		}
		Dwarf_Addr bias = 0;
		Dwarf_Die *cu = dwfl_module_addrdie(m->mod, a, &bias);
		Dwarf_Die *scopes = NULL;
		int nsc = cu ? dwarf_getscopes(cu, a - bias, &scopes) : 0;
		/* Past the innermost inlined subroutine, dwarf_getscopes gives the scopes of its
		 * abstract definition, not the subroutines it was inlined into: a chain of six
		 * (std::vector's constructor down to __new_allocator::allocate, in worker) came
		 * out as two, the outer one with the inner one's call line (a header's). The
		 * concrete nesting is that DIE's own parents, as eu-addr2line -i reads them. */
		for (int i = 0; i < nsc; i++) {
			int tag = dwarf_tag(&scopes[i]);
			if (tag == DW_TAG_subprogram)
				break;
			if (tag == DW_TAG_inlined_subroutine) {
				Dwarf_Die *chain = NULL;
				int nc = dwarf_getscopes_die(&scopes[i], &chain);
				if (nc > 0) {
					free(scopes);
					scopes = chain;
					nsc = nc;
				} else {
					free(chain);
				}
				break;
			}
		}
		const char *file = file0;
		uint32_t line = (uint32_t)line0;
		for (int i = 0; i < nsc && n < MAX_INLINE; i++) {
			int tag = dwarf_tag(&scopes[i]);
			if (tag != DW_TAG_inlined_subroutine && tag != DW_TAG_subprogram)
				continue;
			const char *name = die_name(s, &scopes[i]);
			if (!name && tag == DW_TAG_subprogram && elf_name) {
				char *d = sym_demangle(elf_name);
				name = intern(s, d ? d : elf_name);
				free(d);
			}
			if (!name)
				name = intern(s, "[inlined]");
			if (!name) {
				free(scopes);
				return FENNEC_ENOMEM;
			}
			out[n++] = (sym_frame){name, file, line, tag == DW_TAG_inlined_subroutine, 1};
			if (tag == DW_TAG_subprogram)
				break;
			file = call_file(s, cu, &scopes[i], &line);
		}
		free(scopes);
		/* An inline chain without its subprogram (unusual DWARF): the symbol closes it. */
		if ((n == 0 || out[n - 1].inlined) && elf_name && n < MAX_INLINE) {
			char *d = sym_demangle(elf_name);
			const char *name = intern(s, d ? d : elf_name);
			free(d);
			if (!name)
				return FENNEC_ENOMEM;
			out[n] = (sym_frame){name, n ? file : file0, n ? line : (uint32_t)line0, 0, 1};
			n++;
		}
	}
	if (!n) {
		/* No symbol: name the place by the start of its function when the unwind tables
		 * (present even in stripped objects) know it, so that the addresses of one
		 * function stay one function; else by the address itself. */
		uint64_t off = addr - m->bias;
		uint64_t start = m->status == SYM_OK || m->status == SYM_NOSYMS ? function_start(m, a) : 0;
		if (start)
			off = start;
		char buf[512];
		snprintf(buf, sizeof buf, "%s+0x%" PRIx64, m->name, off);
		const char *name = intern(s, buf);
		if (!name)
			return FENNEC_ENOMEM;
		out[n++] = (sym_frame){name, NULL, 0, 0, 0};
	}
	*nout = n;
	return 0;
}

static int cache_grow(sym_ctx *s)
{
	size_t cap = s->cache_cap ? s->cache_cap * 2 : 4096;
	centry *c = malloc(cap * sizeof *c);
	if (!c)
		return -1;
	for (size_t i = 0; i < cap; i++)
		c[i].key = UINT32_MAX;
	for (size_t i = 0; i < s->cache_cap; i++) {
		centry *e = &s->cache[i];
		if (e->key == UINT32_MAX)
			continue;
		size_t j = cm_mix64(e->addr ^ (uint64_t)e->key << 40) & (cap - 1);
		while (c[j].key != UINT32_MAX)
			j = (j + 1) & (cap - 1);
		c[j] = *e;
	}
	free(s->cache);
	s->cache = c;
	s->cache_cap = cap;
	return 0;
}

int sym_lookup(sym_ctx *s, uint32_t id, uint64_t addr, int exact, const sym_frame **frames, uint32_t *n)
{
	static const sym_frame none[1];
	*frames = none;
	*n = 0;
	if (id >= s->nmods || id >= (1u << 30))
		return FENNEC_EINVAL;
	if ((s->cache_n + 1) * 2 > s->cache_cap && cache_grow(s) < 0)
		return FENNEC_ENOMEM;
	uint32_t key = id << 1 | (exact ? 1 : 0);
	size_t i = cm_mix64(addr ^ (uint64_t)key << 40) & (s->cache_cap - 1);
	for (; s->cache[i].key != UINT32_MAX; i = (i + 1) & (s->cache_cap - 1))
		if (s->cache[i].key == key && s->cache[i].addr == addr) {
			*frames = s->cache[i].frames;
			*n = s->cache[i].n;
			return 0;
		}
	smod *m = &s->mods[id];
	if (!m->opened)
		open_module(s, m);
	sym_frame tmp[MAX_INLINE];
	uint32_t k;
	int rc = resolve(s, m, addr, exact || !addr ? addr : addr - 1, tmp, &k);
	if (rc)
		return rc;
	sym_frame *keep = k ? arena_alloc(s, k * sizeof *keep) : NULL;
	if (k && !keep)
		return FENNEC_ENOMEM;
	if (k)
		memcpy(keep, tmp, k * sizeof *keep);
	s->cache[i] = (centry){addr, key, k, keep};
	s->cache_n++;
	*frames = keep ? keep : none;
	*n = k;
	return 0;
}

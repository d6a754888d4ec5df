/*
 * symbol.h - the symboliser of the analysis side: runtime addresses of a recorded
 * process -> function (demangled C++ and Rust), inlined frames, source file and line,
 * from the binaries' ELF and DWARF through elfutils libdwfl, and from perf map files
 * (/tmp/perf-<pid>.map) for JIT code. Design notes: docs/internals/symbol.md.
 *
 * It never guesses: a module whose file is gone, or whose build id differs from the one
 * recorded, is not read at all; its frames are named "<module>+0x<offset>" and its status
 * says why. Separate debug files are found the elfutils way (build id under
 * /usr/lib/debug/.build-id, .gnu_debuglink), and a file replaced since the recording is
 * still found there by its build id when a debug file for it is installed.
 *
 * Ownership: a sym_ctx owns every string and frame array it returns; they live until
 * sym_close(). Not thread safe: one context per thread.
 */
#ifndef FENNEC_SYMBOL_H
#define FENNEC_SYMBOL_H

#include "format/reader.h"

#define SYM_NONE UINT32_MAX

/* Status of a module; the numbers are those of ana_module.status. */
enum sym_status {
	SYM_OK = 0,       /* read: symbols (and DWARF when there is any) */
	SYM_MISSING = 1,  /* no file at the recorded path and no debug file with its build id */
	SYM_BUILDID = 2,  /* the file at the path has another build id than the recorded one */
	SYM_NOSYMS = 3,   /* read, but it has neither a symbol table nor DWARF */
};

/* One symbolised frame. */
typedef struct sym_frame {
	const char *func;  /* demangled name, or "<module>+0x<offset>"; never NULL */
	const char *file;  /* source file, NULL when unknown */
	uint32_t line;     /* 0 when unknown */
	int inlined;       /* 1: an inlined function; the next frame is the one it was inlined into */
	int symbolised;    /* 0: func is the "<module>+0x<offset>" fallback */
} sym_frame;

typedef struct sym_options {
	const char *perf_map_dir;  /* where perf-<pid>.map files live; NULL: "/tmp" */
	const char *debug_path;    /* elfutils debuginfo path; NULL: ":.debug:/usr/lib/debug" */
} sym_options;

typedef struct sym_ctx sym_ctx;

/* A new context (options copied; NULL for the defaults). Returns 0 or FENNEC_ENOMEM. */
int sym_open(const sym_options *opt, sym_ctx **out);

/* Ends every libdwfl session and frees everything the context returned. NULL: no-op. */
void sym_close(sym_ctx *s);

/*
 * Register a loaded object (a MODULES record) and return its handle in *id. The same
 * object (path, build id, load bias) registered again, by another process of the
 * recording for instance, gets the same handle, so its file is opened and each of its
 * addresses symbolised once. The file is opened on first use. Returns 0 or FENNEC_ENOMEM.
 */
int sym_add_module(sym_ctx *s, const fmt_module *m, uint32_t *id);

/*
 * Register the perf map of process `pid` (<perf_map_dir>/perf-<pid>.map, "START SIZE name"
 * in hex, one symbol a line, as written by JITs: Python 3.12 -X perf, Node --perf-basic-prof,
 * the JVM with perf-map-agent). A map last written before `since_real_ns` (CLOCK_REALTIME;
 * 0: no check) belongs to an earlier process with the same pid and is ignored. Returns 0
 * or FENNEC_ENOMEM; a missing map is not an error (its status is SYM_MISSING).
 */
int sym_add_perf_map(sym_ctx *s, uint64_t pid, uint64_t since_real_ns, uint32_t *id);

/*
 * Symbolise the runtime address `addr` of module `id`. `exact`: addr is the interrupted
 * instruction itself; otherwise it is a return address and the call before it (addr - 1)
 * is looked up. Sets *frames to the frames at that address, innermost first: the inlined
 * functions (inlined = 1), then the function they were inlined into; *n is at least 1 for
 * a module (its fallback name when nothing is known) and 0 for a perf map without a symbol
 * there. Results are cached: each distinct (module, address, exact) is looked up once.
 * Returns 0 or FENNEC_ENOMEM (then *n is 0).
 */
int sym_lookup(sym_ctx *s, uint32_t id, uint64_t addr, int exact, const sym_frame **frames, uint32_t *n);

/* The status of module `id` (opening it if that was not done yet). */
int sym_module_status(sym_ctx *s, uint32_t id);

/* The recorded path of module `id`, and the name used in fallback frames (the file name
 * without its directory). */
const char *sym_module_path(const sym_ctx *s, uint32_t id);
const char *sym_module_name(const sym_ctx *s, uint32_t id);

/* "ok", "missing", "build id differs", "no symbols". */
const char *sym_status_name(int status);

/*
 * Demangle a C++ (Itanium), Rust legacy or Rust v0 symbol; Rust legacy hashes
 * ("::h0123456789abcdef") are dropped. Returns a malloc'd string the caller frees, or
 * NULL when `name` is not a mangled name (use it as it is).
 */
char *sym_demangle(const char *name);

#endif

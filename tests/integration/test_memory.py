"""Heap profiling (docs/memory.md): fixtures with known leaks, allocation counts and live-heap
shapes, recorded with `fennec record --memory=...`, checked against what they are known to do.

Fixtures: mem_leaks.c (13 blocks, 27000 bytes unfreed from four call sites, one on a second
thread, one grown by realloc, one zeroed by calloc; the rest freed, some by another thread;
`clean` frees everything), mem_growth.c (grow: 12 MiB more live per step; flat: the same
allocated and freed; spike: the peak inside region "load"; stats: fennec_memory_stats();
sessions: sampled, full and sampled sessions one after the other through the API),
mem_edge.c (fork while another thread allocates; a leak from a library loaded with dlopen
and closed before exit; malloc_usable_size and the aligned allocators).

The sanitizer builds own malloc themselves: libfennec does not interpose it there, so these
tests run on the plain build only.
"""

import json
import re
import shutil

import os

from helpers import (REPO, SANITIZER, Skip, statistical, timing, analyze, analyze_raw, assert_between, assert_close, assert_eq, assert_rel, assert_true,
                     base_env, collector, fennec_bin, fixture, record, run)

MIB = 1024 * 1024
LEAKS = {"leak_thread": (9000, 3), "leak_calloc": (8000, 4), "leak_malloc": (5000, 5),
         "leak_realloc": (5000, 1)}


def plain_only():
    if SANITIZER:
        raise Skip("the %s build does not interpose malloc (its runtime owns it)" % SANITIZER)


def mem(rep):
    assert_true("memory" in rep, "the report has a memory section (keys: %s)" % sorted(rep))
    return rep["memory"]


def build_program(source, name, compilers, *flags):
    """Compile `source`, written to `name` (leaks.cpp), into the program name without its
    suffix (leaks), at -O0 -g, with the first of `compilers` found (none: Skip)."""
    cc = next(filter(None, map(shutil.which, compilers)), None)
    if not cc:
        raise Skip("no compiler of %s" % " ".join(compilers))
    with open(name, "w") as f:
        f.write(source)
    run([cc, "-O0", "-g"] + list(flags) + [name, "-o", os.path.splitext(name)[0]], check=True)


def leak_findings(rep):
    return [f for f in rep["findings"] if f["type"] == "memory_leak"]


def leaks_by_function(m, rows=None):
    out = {}
    for l in m["leaks"] if rows is None else rows:
        b, c = out.get(l["function"], (0, 0))
        out[l["function"]] = (b + l["bytes"], c + l["count"])
    return out


def unfreed(m):
    """Every stack with blocks unfreed at exit: lost (leaks) and still reachable (full mode's
    scan tells them apart; tests of what was recorded, not of whether it was lost, take both)."""
    return m["leaks"] + m.get("reachable", [])


def unfreed_by_function(m):
    return leaks_by_function(m, unfreed(m))


@collector
def test_full_mode_reports_known_leaks_exactly():
    plain_only()
    r, path = record("mem_leaks", 20000, opts=["--memory=full"])
    truth = json.loads(r.stdout)
    m = mem(analyze(path))
    rep = analyze(path)
    assert_eq(m["mode"], "full", "memory.mode")
    assert_eq(m["leaks_estimated"], False, "memory.leaks_estimated in full mode")
    assert_eq(m["leaked_bytes"], truth["leaked_bytes"], "memory.leaked_bytes")
    assert_eq(m["leaked_count"], truth["leaked_blocks"], "memory.leaked_count")
    assert_eq(leaks_by_function(m), LEAKS, "unfreed bytes and blocks per allocating function")
    for l in m["leaks"]:
        assert_true(l["stack"] and l["stack"][0].startswith(l["function"] + " "),
                    "a leak's stack starts at its allocating function: %r" % l["stack"][:3])
    thread = [l for l in m["leaks"] if l["function"] == "leak_thread"][0]
    assert_true(any(s.startswith("thread_main ") for s in thread["stack"]),
                "the second thread's leak is reached from thread_main: %r" % thread["stack"])
    subjects = " | ".join(f["subject"] for f in leak_findings(rep))
    for fn in LEAKS:
        assert_true(fn in subjects, "a memory_leak finding names %s (findings: %s)" % (fn, subjects))
    assert_true(all(f["evidence"]["estimated"] == 0 for f in leak_findings(rep)),
                "full-mode leak findings are not estimates")
    # a leak saves memory, not time: the gain is the bytes it leaves, said so in the text
    for f in leak_findings(rep):
        assert_eq((f["expected_gain_pct"], f["expected_gain_bytes"]), (0, f["evidence"]["bytes"]),
                  "%s: expected gains (time %%, bytes)" % f["subject"])
    text = analyze_raw(path).stdout
    for f in leak_findings(rep):
        assert_true(re.search(re.escape(f["subject"]) + r"\n.*\n.*\n +gain: +up to [0-9.]+ [KM]?i?B of memory\n", text),
                    "the text report's gain line of %r, in bytes:\n%s" % (f["subject"], text[text.find("Findings"):][:1500]))
    # (a loaded machine may add a cpu_starved finding, whose gain is time: memory ones only)
    blocks = re.split(r"\n(?=  \[)", text[text.find("Findings"):])
    assert_true(not [b for b in blocks if "memory_leak" in b and "% of the run" in b],
                "a memory finding's gain in % of the run")


def own_frames(m):
    """Frames of fennec's collector in the program's allocation stacks."""
    return sorted({f for s in m["top_allocators"] + m["at_peak"] + m["leaks"] for f in s["stack"]
                   if re.match(r"(col_|tid_add |blk_enter |tramp_main |collect_args |exec_list )", f)})


@collector
def test_fennec_allocations_are_not_the_programs():
    """fennec's own allocations are never recorded as the program's. A thread's start took
    its perf ring's bookkeeping from the program's heap (col_pr_open <- tid_add <-
    col_sample_thread_begin, on the new thread), and wall mode the first sleeping call's
    saved-stack block (blk_enter): both showed in the top allocators and the live set."""
    plain_only()
    r, path = record("mem_leaks", 200, opts=["--memory=full"], out="own-cpu.fnc")
    assert_eq(own_frames(mem(analyze(path))), [], "CPU sampling: fennec's frames in allocation stacks")
    r, path = record("offcpu", 20, 50, opts=["--memory=full", "--sample=wall"], out="own-wall.fnc")
    assert_eq(own_frames(mem(analyze(path))), [], "wall sampling: fennec's frames in allocation stacks")
    # execl builds its argv in fennec's wrapper: fennec's block, not the program's; and the
    # trampoline that starts threads (mem_leaks leaks from a second thread) is not a frame
    # of the program's stacks
    build_program(EXECS, "execs.c", ("cc", "gcc"))
    r, path = record(os.path.abspath("execs"), opts=["--memory=full", "--sample=off"], out="own-exec.fnc")
    m = mem(analyze(path))
    assert_eq(own_frames(m), [], "execl: fennec's frames in allocation stacks")
    assert_true(all(l["function"] == "main" for l in m["leaks"] if "execs.c" in " ".join(l["stack"])),
                "the leaks of execs are main's: %r" % m["leaks"])


EXECS = r"""
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
int main(void)
{
	char *volatile config = malloc(4096);
	memset(config, 1, 4096);
	execl("/bin/true", "true", (char *)0);
	return 1;
}
"""


@collector
def test_inline_frames_of_an_allocation():
    """inline_chain: malloc inside level3, inlined into level2, into level1, into outer.
    Every inlined level is a frame, at the line of its call (the CALL markers of the
    source). Before, only the innermost inlined function was read: the stack went level3,
    outer (with level2's line, where level3 is called), main."""
    plain_only()
    src = os.path.join(REPO, "tests", "fixtures", "inline_chain.c")
    lines = {}
    for i, text in enumerate(open(src), 1):
        m = re.search(r"/\* (CALL\d) \*/", text)
        if m:
            lines[m.group(1)] = i
    r, path = record("inline_chain", opts=["--memory=full", "--sample=off"], out="inline.fnc")
    m = mem(analyze(path))
    leak = [l for l in unfreed(m) if l["function"] == "level3"]
    assert_eq([(l["bytes"], l["count"]) for l in leak], [(40000, 10)], "the kept blocks, at level3")
    got = [(f.split(" ")[0], int(f.rsplit(":", 1)[1])) for f in leak[0]["stack"][:4]]
    assert_eq(got, [("level3", lines["CALL4"]), ("level2", lines["CALL3"]), ("level1", lines["CALL2"]),
                    ("outer", lines["CALL1"])], "the allocation's frames (function, line)")


CXX_LEAKS = r"""
#include <map>
#include <memory>
#include <string>
#include <thread>
#include <vector>
struct Node { std::string name; std::vector<int> data; };
static void worker(int id)
{
	std::map<int, std::string> m;
	for (int i = 0; i < 2000; i++)
		m[i] = std::to_string(i * id); // MAP
	for (int i = 0; i < 50; i++) {
		std::vector<int> v(256); // DATA
		new Node{"leak" + std::to_string(i), std::move(v)}; // NODE
	}
}
int main()
{
	std::thread a(worker, 1), b(worker, 2);
	a.join();
	b.join();
	return 0;
}
"""


@collector
def test_cxx_allocations_named_by_the_programs_line():
    """A C++ program allocates through the standard library (operator new under
    std::__new_allocator<T>::allocate under std::vector's or std::map's members): each
    heap row and leak names the program's line that allocated (worker, at the MAP and NODE
    lines), not a std:: frame, and the text report shortens the template-laden callers."""
    plain_only()
    # -O0: the standard library's functions are calls of their own, skipped by name
    # (inlined ones are test_inline_frames_of_an_allocation's)
    build_program(CXX_LEAKS, "leaks.cpp", ("c++", "g++"), "-pthread")
    line = {tag: i for i, text in enumerate(CXX_LEAKS.splitlines(), 1) for tag in ("MAP", "DATA", "NODE")
            if text.endswith("// " + tag)}
    r, path = record(os.path.abspath("leaks"), opts=["--memory=full", "--sample=off"], out="cxx.fnc")
    m = mem(analyze(path))

    def line_of(site):  # the line of the site's function in its stack
        f = [f for f in site["stack"] if f.startswith(site["function"] + " ")]
        return f[0].rsplit(":", 1)[1] if f else None

    where = sorted({(l["function"], line_of(l)) for l in m["leaks"]})
    # the nodes (56 B) and their vectors' data (1 KiB), 100 of each
    assert_eq(where, sorted([("worker", str(line["DATA"])), ("worker", str(line["NODE"]))]),
              "the leaks' function and line")
    assert_eq(sorted((l["bytes"], l["count"]) for l in m["leaks"])[-1], (102400, 100),
              "the leaked vectors' data (100 x 1 KiB)")
    top = m["top_allocators"][0]
    assert_eq((top["function"], line_of(top)), ("worker", str(line["MAP"])), "the top allocator, the map's nodes")
    # text rows: "BYTES COUNT FUNCTION FILE:LINE <- CALLER": callers shortened as functions are
    text = analyze_raw(path).stdout
    rows = [r for r in text[text.find("Unfreed at exit"):text.find("Findings")].splitlines() if " <- " in r]
    callers = [r.split(" <- ", 1)[1].split("  in ")[0] for r in rows]
    assert_true(rows and all(len(c) <= 90 for c in callers), "callers in the heap rows, at most 90 "
                "characters:\n%s" % "\n".join(c for c in callers if len(c) > 90)[:2000])


LAYERED_LEAKS = r"""
#include <stdlib.h>
#define LAYER __attribute__((noinline, used))
/* Allocation layers named as CPython's, NumPy's and GLib's are, and one that is not */
LAYER void *PyMem_RawMalloc(size_t n) { return malloc(n); }
LAYER void *_PyObject_Malloc(size_t n) { return PyMem_RawMalloc(n); }
LAYER void *PyDataMem_UserNEW(size_t n) { return malloc(n); }
LAYER void *g_malloc0(size_t n) { return calloc(1, n); }
LAYER void *g_malloc_extra(size_t n) { return malloc(n); }
/* C libraries' wrappers: jq's, gnulib's, OpenSSL's, SQLite's (two deep), FFmpeg's, Lua's */
LAYER void *jv_mem_alloc(size_t n) { return malloc(n); }
LAYER void *xzalloc(size_t n) { return calloc(1, n); }
LAYER void *CRYPTO_zalloc(size_t n, const char *file, int line) { (void)file; (void)line; return calloc(1, n); }
LAYER void *sqlite3Malloc(size_t n) { return malloc(n); }
LAYER void *sqlite3MallocZero(size_t n) { return sqlite3Malloc(n); }
LAYER void *av_mallocz(size_t n) { return calloc(1, n); }
LAYER void *luaM_malloc_(void *L, size_t n, int tag) { (void)L; (void)tag; return malloc(n); }
/* pymalloc's arena map: the interpreter's own table, kept to the end */
LAYER void *arena_map_get(void) { return calloc(1, 1 << 18); }
static void *keep[1000];
static int nkeep;
LAYER void make_objects(void) { for (int i = 0; i < 100; i++) keep[nkeep++] = _PyObject_Malloc(1000); }
LAYER void make_arrays(void) { for (int i = 0; i < 50; i++) keep[nkeep++] = PyDataMem_UserNEW(4096); }
LAYER void make_strings(void) { for (int i = 0; i < 20; i++) keep[nkeep++] = g_malloc0(64); }
LAYER void make_extra(void) { for (int i = 0; i < 10; i++) keep[nkeep++] = g_malloc_extra(128); }
LAYER void make_json(void) { for (int i = 0; i < 9; i++) keep[nkeep++] = jv_mem_alloc(40); }
LAYER void make_text(void) { for (int i = 0; i < 8; i++) keep[nkeep++] = xzalloc(24); }
LAYER void make_keys(void) { for (int i = 0; i < 7; i++) keep[nkeep++] = CRYPTO_zalloc(56, __FILE__, __LINE__); }
LAYER void make_rows(void) { for (int i = 0; i < 6; i++) keep[nkeep++] = sqlite3MallocZero(72); }
LAYER void make_frames(void) { for (int i = 0; i < 5; i++) keep[nkeep++] = av_mallocz(200); }
LAYER void make_tables(void) { for (int i = 0; i < 4; i++) keep[nkeep++] = luaM_malloc_(0, 88, 0); }
int main(void)
{
	keep[nkeep++] = arena_map_get();
	make_objects();
	make_arrays();
	make_strings();
	make_extra();
	make_json();
	make_text();
	make_keys();
	make_rows();
	make_frames();
	make_tables();
	return 0;
}
"""


@collector
def test_allocation_layers_are_not_named_as_where():
    """Blocks allocated through layers over malloc that allocate for their caller, named as
    CPython's (_PyObject_Malloc over PyMem_RawMalloc), NumPy's (PyDataMem_UserNEW) and GLib's
    (g_malloc0), and as C libraries' wrappers are (jq's jv_mem_alloc, gnulib's xzalloc,
    OpenSSL's CRYPTO_zalloc, SQLite's sqlite3MallocZero over sqlite3Malloc, FFmpeg's
    av_mallocz, Lua's luaM_malloc_): each leak names the program's function that called the layer, as a
    C++ program's names the line under operator new. A function whose name only begins
    like one (g_malloc_extra) is the program's own; pymalloc's arena map is the
    interpreter's table, counted as the runtime's, not as a leak."""
    plain_only()
    build_program(LAYERED_LEAKS, "layers.c", ("cc", "gcc"))
    r, path = record(os.path.abspath("layers"), opts=["--memory=full", "--sample=off"], out="layers.fnc")
    m = mem(analyze(path))
    got = {l["function"]: (l["count"], l["bytes"]) for l in unfreed(m)}
    assert_eq(got, {"make_objects": (100, 100000), "make_arrays": (50, 204800), "make_strings": (20, 1280),
                    "g_malloc_extra": (10, 1280), "make_json": (9, 360), "make_text": (8, 192),
                    "make_keys": (7, 392), "make_rows": (6, 432), "make_frames": (5, 1000),
                    "make_tables": (4, 352)}, "leaks by function: count, bytes")
    assert_true(m["runtime_bytes"] >= 1 << 18, "runtime_bytes %d: the arena map's 256 KiB in it" % m["runtime_bytes"])
    text = analyze_raw(path).stdout
    start = min(i for i in (text.find("Unfreed at exit"), text.find("Still reachable at exit"), len(text)) if i >= 0)
    rows = text[start:text.find("Findings")]
    assert_true("make_objects layers.c:" in rows and "<- main" in rows,
                "text rows name the caller of the layer, with its line:\n" + rows)


CHURN = r"""
#include <stdlib.h>
static void *slot[4096];
int main(void)
{
	unsigned x = 1;
	for (long i = 0; i < 3000000; i++) {
		x = x * 1103515245 + 12345;
		unsigned k = (x >> 8) % 4096;
		free(slot[k]);
		slot[k] = malloc(16 + (x >> 20) % 240);
	}
	for (int k = 0; k < 4096; k++)
		free(slot[k]);
	return 0;
}
"""


STRIPPED_LAYER_LIB = r"""
#include <stdlib.h>
__attribute__((noinline)) static void *pool_get(size_t n) { void *p = malloc(n); return p; }
void *sqlite3Malloc(size_t n) { return pool_get(n); }
"""

STRIPPED_LAYER_MAIN = r"""
#include <stddef.h>
void *sqlite3Malloc(size_t n);
static void *volatile keep[16];
__attribute__((noinline)) void insert_rows(void) { for (int i = 0; i < 9; i++) keep[i] = sqlite3Malloc(100); }
int main(void) { insert_rows(); return 0; }
"""


@collector
def test_allocation_layer_of_a_stripped_library():
    """A stripped library names only what it exports: SQLite's sqlite3Malloc (in its dynamic
    symbols) calls a static function, which calls malloc, and has no name. Every row of a
    program using Debian's libsqlite3 read "libsqlite3.so.0+0xa74f0". A frame without a
    name called from an allocation layer is in the layer: the row names insert_rows."""
    plain_only()
    cc = os.environ.get("CC", "cc")
    with open("layer.c", "w") as f:
        f.write(STRIPPED_LAYER_LIB)
    with open("rows.c", "w") as f:
        f.write(STRIPPED_LAYER_MAIN)
    run([cc, "-O1", "-fPIC", "-shared", "-o", "liblayer.so", "layer.c"], check=True)
    run(["strip", "--strip-unneeded", "liblayer.so"], check=True)
    run([cc, "-O1", "-g", "-o", "rows", "rows.c", "-L.", "-llayer", "-Wl,-rpath," + os.getcwd()], check=True)
    r, path = record(os.path.abspath("rows"), opts=["--memory=full", "--sample=off"], out="rows.fnc")
    m = mem(analyze(path))
    got = {l["function"]: (l["count"], l["bytes"]) for l in unfreed(m)}
    assert_eq(got.get("insert_rows"), (9, 900), "the leak names insert_rows: %r" % got)
    assert_true(any("liblayer.so+0x" in fr for l in unfreed(m) for fr in l["stack"]),
                "the unnamed frame is in the stack: %r" % unfreed(m))


@collector
def test_fennecs_own_code_is_one_entry_and_no_finding():
    """In full mode a program that allocates without pause spends a share of its samples in
    fennec's recording of each call (put_rec, record_alloc, the stack cache). That is the
    profiler's cost: it is one function, [fennec], called from main (the program's function
    that called malloc and free), no other function of libfennec has samples, and no
    finding is about it. The allocator's own work under fennec's wrappers (glibc's malloc
    and free, which the program asked for) stays the program's, under main."""
    plain_only()
    build_program(CHURN, "churn.c", ("cc", "gcc"))
    r, path = record(os.path.abspath("churn"), opts=["--memory=full"], out="churn.fnc")
    rep = analyze(path, "--hot-threshold", "1")
    fns = rep["functions"]
    ours = [f for f in fns if "libfennec" in os.path.basename(f["module"])]
    assert_eq(sorted({f["name"] for f in ours}), ["[fennec]"], "libfennec's functions in the profile")
    own = ours[0]
    assert_true(own["self_samples"] >= 10, "fennec's recording of 6 million calls is sampled: %r" % own)
    assert_eq(own.get("caller"), "main", "[fennec]'s caller, the program's function that paid for it")
    libc = [f for f in fns if "libc.so" in f["module"] and f["self_samples"]]
    assert_true(libc, "glibc's malloc and free keep their samples: %r" % fns[:10])
    assert_eq([f["subject"] for f in rep["findings"] if "fennec" in (f.get("subject") or "")], [],
              "findings about fennec's own code")
    hot = {f["subject"] for f in rep["findings"] if f["type"] == "hot_function"}
    assert_eq(hot & {f["name"] for f in ours}, set(), "hot_function findings about libfennec")
    # fennec compare leaves it out, and the shares it compares are of the program's samples
    r = run([fennec_bin(), "compare", path, path, "--format", "json"], check=True)
    cmp = json.loads(r.stdout)["functions"]
    assert_eq([f["name"] for f in cmp if "libfennec" in os.path.basename(f["module"])], [],
              "libfennec's functions compared")
    assert_close(sum(f["a_self_pct"] for f in cmp), 100, 0.5, "the compared shares' sum", " %")


REPEATED_LEAK = r"""
#include <stdlib.h>
#include <sys/wait.h>
#include <unistd.h>
__attribute__((noinline)) void leak_some(int k)
{
	for (int i = 0; i < k; i++) {
		void *volatile lost = malloc(1000); // LEAK
		(void)lost;
	}
}
int main(void)
{
	pid_t c = fork();
	if (c == 0) {
		leak_some(100);
		return 0;
	}
	waitpid(c, NULL, 0);
	leak_some(100);
	leak_some(50);
	return 0;
}
"""


@collector
def test_one_leak_from_several_stacks_and_processes_is_one_finding():
    """A function that leaks, called from two places in a process and from its fork child:
    three allocation stacks in two processes, whose findings read the same ("leak_some
    (repeat.c:10) called from main"). They are one finding with their sums, which says so;
    JSON's leaks keep one entry per stack."""
    plain_only()
    build_program(REPEATED_LEAK, "repeat.c", ("cc", "gcc"))
    line = [i for i, t in enumerate(REPEATED_LEAK.splitlines(), 1) if t.endswith("// LEAK")][0]
    r, path = record(os.path.abspath("repeat"), opts=["--memory=full", "--sample=off"], out="repeat.fnc")
    rep = analyze(path)
    assert_eq(sorted((l["count"], l["bytes"]) for l in mem(rep)["leaks"]),
              [(50, 50000), (100, 100000), (100, 100000)], "leaks, one per stack")
    f = leak_findings(rep)
    assert_eq([x["subject"] for x in f], ["unfreed at exit: leak_some (repeat.c:%d) called from main" % line],
              "memory_leak findings")
    ev = f[0]["evidence"]
    assert_eq((ev["bytes"], ev["count"], ev["stacks"], ev["processes"]), (250000, 250, 3, 2),
              "the finding's bytes, count, stacks, processes")
    assert_true("250 allocations made at leak_some (repeat.c:%d) (from 3 call stacks, in 2 processes)" % line
                in ev["text"], "the evidence says where from: %s" % ev["text"])


@collector
def test_full_mode_counts_every_call():
    plain_only()
    n = 30000
    r, path = record("mem_leaks", n, opts=["--memory=full"])
    m = mem(analyze(path))
    # The program's own calls: n churn mallocs, a chain of 16 reallocs from NULL, 100
    # blocks freed by another thread, 5 + 4 + 3 leaks and a malloc + 3 reallocs. A realloc
    # counts as a free and an allocation. The C runtime adds a few of its own.
    own = n + 16 + 100 + 12 + 4
    assert_between(m["allocations"], own, own + 40, "memory.allocations")
    assert_between(m["frees"], own - 13, own - 13 + 40, "memory.frees")
    assert_eq(m["largest_bytes"], 1 << 19, "memory.largest_bytes (the last step of the realloc chain)")
    assert_true(m["temporary_allocations"] >= n, "churn's %d malloc/free pairs are temporary: %r" % (
        n, m["temporary_allocations"]))
    assert_eq(m["dropped_records"], 0, "memory.dropped_records")


TEMPORARIES = r"""
#include <stdlib.h>
static char *keep[200];
__attribute__((noinline)) char *block(size_t n) { return malloc(n); }
int main(void)
{
	for (int i = 0; i < 200; i++) {
		char *volatile p = block(i % 2 ? 1000 : 100); /* one stack for both */
		p[0] = 1;
		if (i % 2)
			free(p); /* before the next allocation: temporary */
		else
			keep[i] = p; /* freed at the end, after other allocations */
	}
	for (int i = 0; i < 200; i++)
		free(keep[i]);
	return 0;
}
"""


@collector
def test_temporary_allocations_count_only_the_temporary_bytes():
    """A stack's temporary row is of its temporary blocks: one stack allocates 100 blocks of
    1000 bytes freed at once and 100 of 100 bytes kept across other allocations, which
    are not temporary and not in its row."""
    plain_only()
    build_program(TEMPORARIES, "temps.c", ("cc", "gcc"), "-O1")
    r, path = record(os.path.abspath("temps"), opts=["--memory=full", "--sample=off"], out="temps.fnc")
    m = mem(analyze(path))
    rows = {t["function"]: (t["count"], t["bytes"]) for t in m["temporary"]}
    assert_eq(rows.get("block"), (100, 100000), "block's temporary row: %r" % m["temporary"])
    assert_between(m["temporary_bytes"], 100000, 100000 + 4096, "memory.temporary_bytes")
    text = analyze_raw(path).stdout
    assert_true("Temporary allocations" in text and "block" in text.split("Temporary allocations")[1],
                "the text report lists the temporary stacks:\n%s" % text)


KEEPS_THEN_EXECS = r"""
#include <stdlib.h>
#include <string.h>
#include <unistd.h>
static char *config;
int main(void)
{
	config = malloc(2 << 20);
	memset(config, 1, 2 << 20);
	execl("/bin/true", "true", (char *)0);
	return 1;
}
"""


@collector
def test_blocks_live_at_exec_are_not_leaks():
    """A program keeps 2 MiB, then execs /bin/true (as a launcher or a pyenv shim's shell
    does): the exec released the block with the image. It is reported apart ("at exec",
    exec_bytes), not as unfreed, and makes no memory_leak finding (a MEDIUM one before).
    The timeline ends the image with a point at the exec. Sampled mode with every block
    sampled, where the session has no writer thread (the exec's thread ends the file
    itself: session_writer.c, the lazy writer), tells the same."""
    plain_only()
    build_program(KEEPS_THEN_EXECS, "execs.c", ("cc", "gcc"))
    for opts in (["--memory=full"], ["--memory=sampled", "--memory-rate", "1"]):
        exec_case(opts)


def exec_case(opts):
    r, path = record(os.path.abspath("execs"), opts=opts + ["--sample=off"], out="execs.fnc")
    rep = analyze(path)
    m = mem(rep)
    assert_eq((m["exec_bytes"], m["exec_count"], m["exec_processes"]), (2 << 20, 1, 1), "memory.exec_*")
    assert_eq([l for l in m["leaks"] if l["function"] == "main"], [], "main's block in memory.leaks")
    assert_eq(leak_findings(rep), [], "memory_leak findings")
    text = analyze_raw(path).stdout
    assert_true(re.search(r"at exec      (about )?2\.0 MiB in 1 block", text), "the text report's at-exec line")
    # and by stack: JSON exec_live, the text table of them
    assert_eq([(l["function"], l["bytes"], l["count"]) for l in m["exec_live"]], [("main", 2 << 20, 1)],
              "memory.exec_live")
    table = text.split("Live when the process exec'd another program")[1].split("\n\n")[0] if "exec'd another" in text else ""
    assert_true("main execs.c:" in table, "the text report's table of blocks live at exec: %r" % table)
    # the heap's timeline has the image's last point, at the exec: 2 MiB live (it read 0 B
    # throughout, its points all taken before the block)
    live = [pt["live_bytes"] for pt in m["timeline"]]
    assert_true(max(live) >= 2 << 20, "the timeline's live bytes: %r" % live)


FORKS_AND_LEAKS = r"""
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
static void *volatile keep[64];
__attribute__((noinline)) void parent_keeps(void) { for (int i = 0; i < 3; i++) memset(keep[i] = malloc(50000), 1, 50000); }
__attribute__((noinline)) void child_keeps(void) { for (int i = 0; i < 20; i++) memset(keep[10 + i] = malloc(10000), 1, 10000); }
int main(void)
{
	parent_keeps();
	for (int c = 0; c < 3; c++) {
		pid_t pid = fork();
		if (!pid) {
			child_keeps();
			return 0;
		}
		waitpid(pid, NULL, 0);
	}
	return 0;
}
"""


@collector
def test_the_peak_is_one_process():
    """A parent keeps 150,000 bytes, then three children in turn keep 200,000 bytes each.
    The peak is one process's, at one moment: what was live at it adds up to peak_bytes,
    in the JSON and in export --memory peak, and names that process. Each process's own
    peak was summed before: 750,000 bytes "live at the peak" of a 200,000-byte peak."""
    plain_only()
    build_program(FORKS_AND_LEAKS, "forks.c", ("cc", "gcc"))
    r, path = record(os.path.abspath("forks"), opts=["--memory=full", "--sample=off"], out="forks.fnc")
    rep = analyze(path)
    m = mem(rep)
    assert_eq(rep["summary"]["processes"], 4, "processes")
    assert_between(m["peak_bytes"], 200000, 200000 + 8192, "memory.peak_bytes (a child's)")
    assert_true(m["peak_process"] in [p["pid"] for p in rep["processes"] if p["origin"] == "fork"],
                "memory.peak_process is a child: %r" % m["peak_process"])
    at_peak = sum(s["bytes"] for s in m["at_peak"])
    assert_eq(at_peak, m["peak_bytes"], "the stacks live at the peak add up to it")
    assert_true(all(s["process"] == m["peak_process"] for s in m["at_peak"]), "at_peak is the peak's process")
    out = run([fennec_bin(), "export", path, "--format", "folded", "--memory", "peak", "-o", "peak.folded"])
    assert_eq(out.returncode, 0, "fennec export --memory peak: %s" % out.stderr)
    with open("peak.folded") as f:
        total = sum(int(l.rsplit(" ", 1)[1]) for l in f if l.strip())
    assert_eq(total, m["peak_bytes"], "export --memory peak adds up to memory.peak_bytes")


@collector
def test_leak_free_program_reports_no_leak():
    plain_only()
    for mode in ("full", "sampled"):
        r, path = record("mem_leaks", 50000, "clean", opts=["--memory=" + mode, "--memory-rate", "4096"])
        rep = analyze(path)
        m = mem(rep)
        assert_eq(m["leaked_bytes"], 0, "memory.leaked_bytes of a leak-free program (%s mode)" % mode)
        assert_eq(m["leaks"], [], "memory.leaks of a leak-free program (%s mode)" % mode)
        assert_eq(leak_findings(rep), [], "memory_leak findings of a leak-free program (%s mode)" % mode)
        # nor any of the timing rules: one thread, no steps to vary, nothing blocks or loads
        others = [f["type"] for f in rep["findings"]
                  if f["type"] in ("step_variance", "off_cpu", "input_bound", "rank_imbalance")]
        assert_eq(others, [], "timing findings of a leak-free program (%s mode)" % mode)


@collector
def test_sampled_mode_every_byte_sampled_matches_full():
    plain_only()
    r, path = record("mem_leaks", 2000, opts=["--memory=sampled", "--memory-rate", "1"])
    m = mem(analyze(path))
    assert_eq(m["mode"], "sampled", "memory.mode")
    assert_eq(m["leaks_estimated"], True, "memory.leaks_estimated in sampled mode")
    # With a mean of 1 byte between samples every allocation is sampled (weight ~1).
    assert_rel(m["leaked_bytes"], 27000, 0.01, "estimated memory.leaked_bytes")
    got = leaks_by_function(m)
    for fn, (b, c) in LEAKS.items():
        assert_rel(got.get(fn, (0, 0))[0], b, 0.01, "estimated unfreed bytes of %s" % fn)


@collector
def test_sampled_stacks_add_up_to_the_exact_totals():
    """Sampled mode knows each process's allocations and requested bytes exactly: the
    stacks' estimates are scaled to them. mem_leaks 2000 allocates ~0.6 MB, a handful of
    samples at 64 KiB, each standing for ~64 KiB: their sum read anywhere from 0.5x to 2x
    the exact total, and a stack could read more than the whole program allocated. The
    unfreed line gives the exact live count beside the estimate."""
    plain_only()
    for n, rate in ((2000, "64K"), (100000, "16K")):
        r, path = record("mem_leaks", n, opts=["--sample=off", "--memory=sampled", "--memory-rate", rate],
                         out="s%d.fnc" % n)
        rep = analyze(path, "--top", "100")
        m = mem(rep)
        rows = m["top_allocators"]
        assert_true(m["sampled_allocations"] >= 1 and rows, "samples taken: %r" % m["sampled_allocations"])
        assert_rel(sum(x["bytes"] for x in rows), m["allocated_bytes"], 0.01, "the stacks' bytes against the exact total")
        assert_rel(sum(x["count"] for x in rows), m["allocations"], 0.01, "the stacks' allocations against the exact count")
        assert_eq(m["live_at_end_count"], m["allocations"] - m["frees"], "memory.live_at_end_count")
        text = analyze_raw(path).stdout
        assert_true("exact at the end: %d more allocations than frees" % m["live_at_end_count"] in text,
                    "the unfreed line gives the exact count: %s" % [l for l in text.splitlines() if "unfreed" in l or "exact" in l])


@collector
@statistical
def test_sampled_estimates_are_unbiased():
    """mem_leaks 200000 at a 16 KiB rate: the estimated bytes and count of churn's 200,000
    allocations (sizes 1..512 in turn). The count's error is not normal: a sampled block of
    s bytes stands for about 16384 / s allocations, so the rare sample of a 1- or 2-byte
    block adds 8 % or 4 % at once (about 1 run in 40 samples one). Ten runs read -4.3 % to
    +6.1 % (standard deviation 3.1 %, as the variance sum_s n/512 x 16384/s predicts);
    CI at 8679eff read +11.8 % once. Statistical: a failure is run once more."""
    plain_only()
    n = 200000
    r, path = record("mem_leaks", n, opts=["--memory=sampled", "--memory-rate", "16384"])
    m = mem(analyze(path))
    # churn allocates sizes 1..512 cyclically: n * 256.5 bytes at one line.
    truth = n * 256.5
    churn = [s for s in m["top_allocators"] if s["function"] == "churn" and s["bytes"] > truth / 2]
    assert_true(churn, "churn's small blocks are in memory.top_allocators: %r" % m["top_allocators"][:3])
    # ~3100 samples: the bytes' standard error is under 2 % (a sample of any size stands
    # for about 16 KiB); the count's is 3.3 % (docstring).
    assert_rel(churn[0]["bytes"], truth, 0.08, "estimated bytes allocated by churn")
    assert_rel(churn[0]["count"], n, 0.10, "estimated allocations by churn")
    # The totals are exact counters in every mode.
    assert_between(m["allocations"], n + 132, n + 132 + 40, "memory.allocations (exact in sampled mode)")


@collector
def test_growth_per_step_slope_and_finding():
    plain_only()
    r, path = record("mem_growth", "grow", 12, 20)
    rep = analyze(path)
    m = mem(rep)
    t = m["trend"]
    assert_eq(t["basis"], "step", "memory.trend.basis")
    assert_rel(t["slope_bytes_per_step"], 12 * MIB, 0.05, "memory.trend.slope_bytes_per_step")
    assert_true(t["r2"] > 0.99, "memory.trend.r2 of linear growth: %r" % t["r2"])
    assert_rel(m["peak_bytes"], 240 * MIB, 0.03, "memory.peak_bytes")
    steps = [p["step"] for p in m["timeline"]]
    for k in range(1, 21):
        assert_true(k in steps, "a timeline point at step %d" % k)
    assert_true(max(p["rss_bytes"] for p in m["timeline"]) > 200 * MIB,
                "the timeline's RSS follows the touched heap")
    growth = [f for f in leak_findings(rep) if f["subject"].startswith("heap grows")]
    assert_eq(len(growth), 1, "one memory_leak growth finding")
    assert_rel(growth[0]["evidence"]["slope_bytes_per_step"], 12 * MIB, 0.05, "finding's slope")
    assert_eq(growth[0]["evidence"]["threshold_bytes"], 10e6, "default threshold (10 MB per step)")
    # everything is freed at exit: the finding names the stack whose live bytes grew (an
    # estimate from ~480 samples of 512 KiB: relative error ~5 %, so 3 sigma)
    assert_rel(growth[0]["evidence"]["stack_slope_bytes_per_step"], 12 * MIB, 0.15, "the growing stack's slope")
    assert_true("the stack that grows most: block" in growth[0]["evidence"]["text"],
                "the finding names the growing stack: %s" % growth[0]["evidence"]["text"])
    # what fixing it gives back: the growth over the run, 20 steps of 12 MiB
    assert_rel(growth[0]["expected_gain_bytes"], 20 * 12 * MIB, 0.05, "the growth finding's gain in bytes")


GROWS_THEN_FREES = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
__attribute__((noinline)) void *grow_cache(size_t n)
{
	void *p = malloc(n);
	memset(p, 1, n);
	return p;
}
static double now(void)
{
	struct timespec t;
	clock_gettime(CLOCK_MONOTONIC, &t);
	return t.tv_sec + t.tv_nsec / 1e9;
}
static void sleep_ms(long ms)
{
	struct timespec t = {ms / 1000, ms % 1000 * 1000000};
	nanosleep(&t, NULL);
}
/* grows TICK_MS TEARDOWN_MS: keeps 1 MiB every TICK_MS ms, 40 times, prints its rate;
 * then frees 30 of the 40, waits TEARDOWN_MS ms, and frees the rest. */
int main(int argc, char **argv)
{
	static void *keep[40];
	long tick = argc > 1 ? atol(argv[1]) : 10, teardown = argc > 2 ? atol(argv[2]) : 0;
	double t0 = now();
	for (int i = 0; i < 40; i++) {
		keep[i] = grow_cache(1 << 20);
		sleep_ms(tick);
	}
	printf("%.0f\n", 40.0 * (1 << 20) / (now() - t0));
	for (int i = 0; i < 30; i++)
		free(keep[i]);
	sleep_ms(teardown);
	for (int i = 30; i < 40; i++)
		free(keep[i]);
	return 0;
}
"""


def growth_findings(rep):
    return [f for f in leak_findings(rep) if f["subject"].startswith("heap grows")]


@collector
def test_growth_per_second_leaves_out_the_teardown():
    """Without steps, live heap grows 1 MiB every ~30 ms for ~1.3 s; then the program frees
    three quarters, waits 100 ms (two or three timeline points at 10 MiB) and frees the rest
    before exiting, as an interpreter or a C++ program's destructors do. The trend is of the
    run: the points of the teardown, and the one taken at exit, are left out, so the slope
    is the program's own rate (it prints it) and the growth finding names grow_cache. With
    the exit point in, the fit read r^2 well under the finding's 0.8; with the teardown's
    points in, 0.86 and a slope 20 % low."""
    plain_only()
    build_program(GROWS_THEN_FREES, "grows.c", ("cc", "gcc"))
    r, path = record(os.path.abspath("grows"), "30", "100", opts=["--sample=off", "--memory-interval=40"],
                     out="grows.fnc")
    rate = float(r.stdout.split()[-1])
    rep = analyze(path)
    t = mem(rep)["trend"]
    assert_eq(t["basis"], "second", "memory.trend.basis")
    assert_true(t["r2"] > 0.95, "memory.trend.r2 of linear growth: %r" % t)
    assert_rel(t["slope_bytes_per_s"], rate, 0.1, "memory.trend.slope_bytes_per_s against the program's rate")
    growth = growth_findings(rep)
    assert_eq(len(growth), 1, "one memory_leak growth finding")
    assert_true("the stack that grows most: grow_cache" in growth[0]["evidence"]["text"],
                "the finding names the growing stack: %s" % growth[0]["evidence"]["text"])
    # the growth over the fitted points: about the 40 MiB kept, never more than the heap rose
    assert_rel(growth[0]["expected_gain_bytes"], 40 * MIB, 0.2, "the growth finding's gain in bytes")
    assert_true(t["growth_bytes"] <= mem(rep)["peak_bytes"] * 1.01, "growth within the peak: %r" % t)


@collector
def test_growth_in_under_a_second_is_not_judged():
    """The same growth in ~0.45 s (a tick of 10 ms), as a short program that loads its input
    grows (jq parsing a document): the trend is measured, but a run that short reads the
    same whether it leaks or loads, and no growth finding is made."""
    plain_only()
    build_program(GROWS_THEN_FREES, "grows.c", ("cc", "gcc"))
    r, path = record(os.path.abspath("grows"), "10", "0", opts=["--sample=off", "--memory-interval=20"],
                     out="short.fnc")
    rep = analyze(path)
    t = mem(rep)["trend"]
    assert_true(t and t["basis"] == "second" and t["span_s"] < 1.0, "a trend over under a second: %r" % t)
    assert_eq([f["subject"] for f in growth_findings(rep)], [], "growth findings of a run under a second")


@collector
def test_slow_growth_that_adds_up_is_a_leak():
    """2 MiB a step is under the 10 MB-per-step threshold, but over 60 steps it is 120 MiB:
    ten thresholds or more over the run on a close fit make a finding. Over 20 steps (40
    MiB) it is under ten thresholds, and still a leak by its shape: the steady growth rule
    fires (the whole heap is growth, r^2 = 1, as fast at the end)."""
    plain_only()
    r, path = record("mem_growth", "grow", 2, 60, out="slow.fnc")
    rep = analyze(path)
    growth = growth_findings(rep)
    assert_eq(len(growth), 1, "one growth finding for 2 MiB a step over 60 steps")
    ev = growth[0]["evidence"]
    assert_rel(ev["slope_bytes_per_step"], 2 * MIB, 0.05, "the finding's slope")
    assert_rel(ev["growth_bytes"], 59 * 2 * MIB, 0.05, "the finding's growth over the run")
    assert_true("ten times that over the run" in ev["text"], "the evidence says why: %s" % ev["text"])
    r, path = record("mem_growth", "grow", 2, 20, out="slow20.fnc")
    growth = growth_findings(analyze(path))
    assert_eq([f["subject"] for f in growth], ["heap grows steadily, 2.0 MiB per step"],
              "growth findings for 40 MiB over 20 steps")
    assert_true("ten times" not in growth[0]["evidence"]["text"], "not by the threshold: %s" % growth[0]["evidence"]["text"])


@collector
def test_steady_growth_under_the_threshold():
    """Growth under --leak-threshold that is a leak by its shape, relative to the heap, and
    shapes that are not (tests/fixtures/mem_growth.c, known by construction): grow 1 30
    keeps 1 MiB a step for 30 steps (r^2 = 1, the whole heap); drip 2 3 keeps 2 MiB a
    second for 3 s without steps. flat, plateau (a warm-up then a plateau) and cache (filling
    to a bound) grow no more at the end: silent. So is startup 40 2, without steps: 40 MiB
    a second for 2 s, then 1 s on a flat heap, as python3 importing torch then training:
    its fit over the run is close (r^2 0.93, 31 MiB a second) and made a HIGH growth
    finding before the trend's last quarter was fitted on its own (flat)."""
    plain_only()
    for args, basis, slope in ((("grow", 1, 30), "step", MIB), (("drip", 2, 3), "second", 2 * MIB)):
        r, path = record("mem_growth", *args, opts=["--sample=off"], out="%s.fnc" % args[0])
        rep = analyze(path)
        growth = growth_findings(rep)
        what = "mem_growth %s %d %d" % args
        assert_eq(len(growth), 1, "%s: one growth finding (%s)" % (what, [f["subject"] for f in leak_findings(rep)]))
        f = growth[0]
        ev = f["evidence"]
        key = "slope_bytes_per_" + ("step" if basis == "step" else "s")
        assert_rel(ev[key], slope, 0.1, "%s: the slope per %s" % (what, basis))
        assert_true(ev["r2"] > 0.99 and ev["late_r2"] > 0.9, "%s: the fits: %r" % (what, ev))
        assert_rel(ev["late_" + key], slope, 0.15, "%s: as fast in the later half" % what)
        assert_rel(mem(rep)["trend"]["tail_" + key], slope, 0.2, "%s: as fast in the last quarter" % what)
        assert_true(ev["growth_share_pct"] >= 80, "%s: the growth's share of the peak: %r" % (what, ev))
        assert_true(ev["points"] >= 10, "%s: points observed: %r" % (what, ev))
        assert_true("the stack that grows most: block (mem_growth.c:" in ev["text"],
                    "%s: names the growing stack: %s" % (what, ev["text"]))
        assert_eq(f["severity"], "HIGH", "%s: severity" % what)
    for args in (("flat", 1, 30), ("plateau", 1, 40), ("cache", 1, 40), ("startup", 40, 2)):
        r, path = record("mem_growth", *args, opts=["--sample=off"], out="%s.fnc" % args[0])
        rep = analyze(path)
        assert_eq([f["subject"] for f in leak_findings(rep)], [], "memory_leak findings of mem_growth %s %d %d" % args)
    t = mem(rep)["trend"]
    assert_true(t["basis"] == "second" and t["r2"] > 0.8 and t["slope_bytes_per_s"] > 10e6,
                "startup 40 2: a close fit over the run, over the threshold: %r" % t)
    assert_true(abs(t["tail_slope_bytes_per_s"]) < 0.1 * t["slope_bytes_per_s"], "startup 40 2: flat at the end: %r" % t)
    # and a threshold of its own does not silence the steady rule for a leak under it
    rep = analyze("grow.fnc", "--leak-threshold", "1G")
    assert_eq(len(growth_findings(rep)), 1, "grow 1 30 with --leak-threshold 1G: the steady rule")


@collector
def test_leak_severity_counts_blocks():
    """mem_growth kept 8: keep_once keeps one 8 MiB block, keep_each 8 MiB in 100 blocks;
    each is half the peak heap. A leak repeats: keep_each's is HIGH; a block kept once is
    as often kept on purpose: keep_once's is MEDIUM (both were HIGH, by size alone).
    Sampled mode at 64 KiB: a block of 82 KiB is sampled with probability 0.72, so the
    estimate of keep_each's 100 blocks is 100 +- 6 (one sigma). At the default 512 KiB it was
    100 +- 24, and the bound of 50 failed once in a dozen runs (47: seven blocks sampled)."""
    plain_only()
    for mode in ("full", "sampled"):
        rate = ["--memory-rate", "64K"] if mode == "sampled" else []
        r, path = record("mem_growth", "kept", 8, opts=["--memory=" + mode] + rate, out="kept-%s.fnc" % mode)
        rep = analyze(path)
        sev = {}
        for f in leak_findings(rep):
            for fn in ("keep_once", "keep_each"):
                if f["subject"].endswith("called from " + fn):
                    sev[fn] = (f["severity"], round(f["evidence"]["count"]))
        assert_eq(sorted(sev), ["keep_each", "keep_once"], "%s mode: findings of both stacks: %s"
                  % (mode, [f["subject"] for f in leak_findings(rep)]))
        assert_eq(sev["keep_once"], ("MEDIUM", 1), "%s mode: keep_once's finding (severity, blocks)" % mode)
        assert_eq(sev["keep_each"][0], "HIGH", "%s mode: keep_each's finding" % mode)
        # 100 exactly in full mode; sampled, 4 sigma below 100
        assert_true(sev["keep_each"][1] >= 75, "%s mode: keep_each's blocks: %s" % (mode, sev["keep_each"]))


@collector
def test_allocation_churn_needs_many_allocations_not_only_a_high_rate():
    """mem_leaks N clean makes about N malloc/free pairs in a few ms per 100,000, no steps:
    1.5 million of them are churn (over a million a second, and a million in all); 50,000
    are not, though their rate is as high."""
    plain_only()
    r, path = record("mem_leaks", 1500000, "clean", opts=["--sample=off"], out="many.fnc")
    rep = analyze(path)
    churn = [f for f in rep["findings"] if f["type"] == "allocation_churn"]
    assert_eq(len(churn), 1, "an allocation_churn finding for 1.5 million allocations")
    assert_true(churn[0]["evidence"]["allocations"] >= 1500000 and "churn" in churn[0]["evidence"]["text"],
                "its evidence: %r" % churn[0]["evidence"])
    r, path = record("mem_leaks", 50000, "clean", opts=["--sample=off"], out="few.fnc")
    rep = analyze(path)
    assert_true(mem(rep)["allocation_rate_per_s"] > 1e6, "50,000 allocations at over a million a second: %r" %
                mem(rep)["allocation_rate_per_s"])
    assert_eq([f["subject"] for f in rep["findings"] if f["type"] == "allocation_churn"], [],
              "allocation_churn findings for 50,000 allocations")


@collector
def test_flat_heap_no_growth_finding():
    plain_only()
    r, path = record("mem_growth", "flat", 12, 20)
    rep = analyze(path)
    m = mem(rep)
    assert_true(abs(m["trend"]["slope_bytes_per_step"]) < 0.5 * MIB,
                "a flat heap has no slope: %r" % m["trend"])
    assert_eq(leak_findings(rep), [], "memory_leak findings on a flat heap")
    assert_true(not [f for f in rep["findings"] if f["type"] == "allocation_churn"],
                "1000 allocations per step is not churn")


@collector
def test_live_bytes_by_stack_over_time():
    """mem_growth shift 2 20: fill_b keeps 40 MiB and hold_c 3 MiB, then each of 20 steps
    grow_a keeps 2 MiB more and 2 MiB of fill_b's are freed. The heap is flat (no growth
    finding), but the stacks over time show grow_a rising by 2 MiB per step and fill_b
    falling as fast, each to 40 MiB at its highest, and hold_c level (slope 0, r^2 1), in
    the JSON and in the text report. Full mode exactly; sampled mode at a rate of 64 KiB (a
    1 MiB block is sampled with probability 1 - e^-16)."""
    plain_only()
    for mode, tol in (("full", 0.001), ("sampled", 0.02)):
        opts = ["--memory=" + mode] + (["--memory-rate", "65536"] if mode == "sampled" else [])
        r, path = record("mem_growth", "shift", 2, 20, opts=opts, out="shift-%s.fnc" % mode)
        rep = analyze(path)
        m = mem(rep)
        assert_true(abs(m["trend"]["slope_bytes_per_step"]) < 0.1 * MIB, "a flat heap (%s): %r" % (mode, m["trend"]))
        assert_eq(leak_findings(rep), [], "memory_leak findings on a flat heap (%s)" % mode)
        sot = {s["function"]: s for s in m["stacks_over_time"]}
        for fn, sign in (("grow_a", 1), ("fill_b", -1)):
            s = sot.get(fn)
            assert_true(s is not None, "%s among the stacks over time (%s): %s" % (fn, mode, list(sot)))
            assert_eq(s["trend"]["basis"], "step", "%s's trend basis" % fn)
            assert_rel(s["trend"]["slope_bytes_per_step"], sign * 2 * MIB, tol, "%s's slope (%s)" % (fn, mode))
            assert_true(s["trend"]["r2"] > 0.99, "%s's r^2 (%s): %r" % (fn, mode, s["trend"]))
            assert_rel(s["max_bytes"], 40 * MIB, tol, "%s's highest live bytes (%s)" % (fn, mode))
            assert_true(s["stack"][0].startswith(fn + " ") and "mem_growth.c:" in s["stack"][0],
                        "%s's stack: %r" % (fn, s["stack"][:2]))
            # the level at each step point: fill_b 40 - 2k MiB, grow_a 2k MiB after step k
            pts = [b for t, b in s["points"]]
            assert_true(len(pts) >= 21, "%s's points: %d" % (fn, len(pts)))
            if mode == "full":
                want = [(2 * k if sign > 0 else 40 - 2 * k) * MIB for k in range(21)]
                assert_eq([w for w in want if w not in pts], [], "%s's levels at the steps missing from %r" % (fn, pts))
        c = sot.get("hold_c")
        assert_true(c is not None, "hold_c among the stacks over time (%s): %s" % (mode, list(sot)))
        assert_rel(c["max_bytes"], 3 * MIB, tol, "hold_c's level (%s)" % mode)
        assert_eq((c["trend"]["slope_bytes_per_step"], c["trend"]["r2"]), (0, 1), "hold_c's trend (%s)" % mode)
        assert_eq(sorted(m["stacks_over_time"], key=lambda s: -s["max_bytes"])[:2] ==
                  m["stacks_over_time"][:2], True, "stacks over time, highest first")
        text = analyze_raw(path).stdout
        rows = text.split("Live over time")[1].split("\n\n")[0].splitlines()[1:]
        grow = [l for l in rows if " grow_a " in l]
        assert_true(grow and "+2.0 MiB/step" in grow[0], "grow_a's row in the text report (%s): %s" % (mode, rows))


@collector
def test_peak_region_and_live_set_at_peak():
    plain_only()
    for mode in ("full", "sampled"):
        r, path = record("mem_growth", "spike", 64, opts=["--memory=" + mode])
        m = mem(analyze(path))
        assert_eq(m["peak_region"], "load", "memory.peak_region (%s mode)" % mode)
        # the issue: within 1 % in full mode (which replays requested sizes: exact but for
        # the C runtime's own few blocks); sampled mode counts usable bytes, batched per
        # thread up to 64 KiB (docs/memory.md): 2 % is far outside that
        assert_rel(m["peak_bytes"], 65 * MIB, 0.01 if mode == "full" else 0.02,
                   "memory.peak_bytes (%s mode)" % mode)
        top = m["at_peak"][0]
        assert_eq(top["function"], "block", "the stack holding the most at the peak (%s)" % mode)
        assert_rel(top["bytes"], 65 * MIB, 0.02 if mode == "full" else 0.5,
                   "bytes live at the peak from block (%s mode)" % mode)


def test_memory_stats_api_without_recording():
    plain_only()
    env = base_env()
    r = run([fixture("mem_growth"), "stats"], env=env, check=True)
    s = json.loads(r.stdout)
    assert_eq(s["tracking"], 1, "fennec_mem_stats.tracking (libfennec linked)")
    assert_eq(s["alloc_delta"], 8, "allocations between the two calls")
    assert_eq(s["bytes_delta"], 8 * MIB, "requested bytes between the two calls")
    assert_between(s["heap_delta"], 8 * MIB, 8 * MIB + 8 * 8192, "live heap growth (usable sizes)")
    assert_true(s["peak"] >= 8 * MIB, "heap_peak_bytes")
    assert_true(s["rss_peak"] >= s["rss"] >= 8 * MIB, "RSS now and peak: %r" % s)
    assert_eq(s["largest"], MIB, "largest_bytes")


@collector
def test_sessions_of_different_modes_in_one_process():
    """mem_growth sessions: three sessions in one process through the API, sampled (a rate
    of 1 byte: every allocation sampled), full, sampled again. Each file holds its own
    session's counts and leaks, exactly, symbolised: a later session's file had no
    MODULES and its stacks read [unknown]. Full mode sees every free (free()'s filter is
    all set while it runs: a free it missed shows as a leak of churn_n), and frees of
    blocks from an earlier session are counted without confusing the leaks."""
    plain_only()
    out = os.path.abspath("sessions")
    os.makedirs(out, exist_ok=True)
    run([fixture("mem_growth"), "sessions", out], env=base_env(), check=True)
    want = {"s1": ("sampled", 32, 16, 16 * 1000, 16), "s2": ("full", 70, 66, 20 * 3000, 20),
            "s3": ("sampled", 42, 50, 12 * 5000, 12)}
    for name, (mode, allocs, frees, leak_bytes, leak_count) in sorted(want.items()):
        m = mem(analyze(os.path.join(out, name + ".fnc")))
        assert_eq(m["mode"], mode, "%s: mode" % name)
        assert_eq(m["allocations"], allocs, "%s: allocations in the session" % name)
        assert_eq(m["frees"], frees, "%s: frees in the session" % name)
        assert_eq(unfreed_by_function(m), {"keep": (leak_bytes, leak_count)}, "%s: unfreed by function" % name)


@collector
def test_memory_off_and_default():
    plain_only()
    r, path = record("mem_growth", "flat", 2, 3, opts=["--memory=off"])
    rep = analyze(path)
    assert_true("memory" not in rep, "--memory=off: no memory section")
    r, path = record("mem_growth", "flat", 2, 3)
    assert_eq(mem(analyze(path))["mode"], "sampled", "fennec record profiles the heap, sampled, by default")


@collector
def test_full_mode_python_runs_unchanged():
    plain_only()
    code = "import json\nprint(sum(len(json.dumps(list(range(i)))) for i in range(1500)))"
    expect = run(["python3", "-c", code], check=True).stdout
    r, path = record("/usr/bin/python3", "-c", code, opts=["--memory=full"])
    assert_eq(r.stdout, expect, "python's output under --memory=full")
    m = mem(analyze(path))
    assert_true(m["allocations"] > 10000 and m["dropped_records"] == 0,
                "python's allocations recorded, none dropped: %r" % {k: m[k] for k in ("allocations", "dropped_records")})


def test_bad_memory_options():
    plain_only()
    from helpers import fennec_bin
    for opts, word in ((["--memory=most"], "--memory"), (["--memory-rate", "0"], "--memory-rate"),
                       (["--memory-rate", "64X"], "--memory-rate"), (["--memory-rate", "2GiB"], "--memory-rate"),
                       (["--memory-mmap=-1"], "--memory-mmap")):
        r = run([fennec_bin(), "record"] + opts + ["--", "true"])
        assert_eq(r.returncode, 2, "exit status of fennec record %s" % " ".join(opts))
        assert_true(word in r.stderr, "the message names %s: %r" % (word, r.stderr))


def test_sizes_with_units():
    """--memory-rate, --memory-mmap= and analyze --leak-threshold take sizes as GNU tools
    write them: K and KiB are 1024, KB 1000, likewise M and G."""
    plain_only()
    for given, rate in (("64K", 65536), ("64KiB", 65536), ("64KB", 64000), ("1.5M", 1572864), ("4096", 4096)):
        r, path = record("mem_leaks", 200, opts=["--sample", "off", "--memory-rate", given], out="u.fnc")
        assert_eq(mem(analyze(path))["sample_rate_bytes"], rate, "--memory-rate %s" % given)
    # mem_growth grow 12 5: the heap grows 12 MiB per step; the threshold decides (the 48
    # MiB over the run are under ten thresholds, which would fire whatever the slope)
    r, path = record("mem_growth", "grow", 12, 5, out="g.fnc")
    for given, fires in (("13MiB", False), ("12.5MB", True), ("11M", True), ("13000000", False)):
        rep = analyze(path, "--leak-threshold", given)
        growth = [f for f in leak_findings(rep) if f["subject"].startswith("heap grows")]
        assert_eq(bool(growth), fires, "a growth finding with --leak-threshold %s" % given)
    r = analyze_raw(path, "--leak-threshold", "10 parsecs")
    assert_eq(r.returncode, 2, "exit status of analyze --leak-threshold '10 parsecs'")
    assert_true("--leak-threshold" in r.stderr and "KiB" in r.stderr, "the message: %r" % r.stderr)


def test_format_1_2_and_1_3_heap_files_agree():
    """tests/corpus keeps a full-mode recording of `mem_leaks 200` as format 1.2 wrote it
    (HEAP chunks: frees by address) beside one made by this collector (HEAP2: frees by stack
    and size): the reader reads both, and the analysis finds the same heap in each."""
    keys = ("mode", "allocations", "frees", "allocated_bytes", "leaked_bytes", "leaked_count",
            "runtime_bytes", "temporary_allocations", "peak_bytes")
    got = {}
    for name in ("valid_heap_1_2_raw.fnc", "valid_heap_raw.fnc"):
        m = mem(analyze(os.path.join(REPO, "tests", "corpus", name)))
        got[name] = {k: m[k] for k in keys}
        assert_eq((m["leaked_bytes"], m["leaked_count"]), (27000, 13), "%s: leaked bytes and blocks" % name)
    assert_eq(got["valid_heap_raw.fnc"], got["valid_heap_1_2_raw.fnc"], "the 1.3 file's heap against the 1.2 file's")



def edge_truth(r):
    return json.loads([l for l in r.stdout.splitlines() if l.startswith("{")][-1])


@collector
def test_fork_while_another_thread_allocates():
    """mem_edge fork: 20 forks while a second thread allocates and frees without pause.
    No child hangs on an allocator lock taken at the fork (the recording would time out);
    every child's 4 x 1000 bytes unfreed in child_leak are found in its own profile."""
    plain_only()
    for mode in ("full", "sampled"):
        opts = ["--memory=" + mode] + (["--memory-rate", "1"] if mode == "sampled" else [])
        r, path = record("mem_edge", "fork", opts=opts, out="fork-%s.fnc" % mode, timeout_s=120)
        t = edge_truth(r)
        assert_eq(t["children_ok"], 20, "children that exited 0 (%s mode)" % mode)
        rep = analyze(path)
        assert_eq(rep["summary"]["processes"], 21, "processes in the recording (%s mode)" % mode)
        m = mem(rep)
        child = [l for l in unfreed(m) if l["function"] == "child_leak"]
        assert_eq((sum(l["bytes"] for l in child), sum(l["count"] for l in child)), (80000, 80),
                  "bytes and blocks unfreed in child_leak over the 20 children (%s mode)" % mode)
        assert_eq(sorted({l["function"] for l in m["leaks"]}), ["child_leak"],
                  "the functions with unfreed blocks (%s mode)" % mode)
        # The text report shows the 20 children's leaks from one place as one row.
        text = analyze_raw(path).stdout
        lines = text.split("Unfreed at exit")[1].split("\n\n")[0].splitlines()[1:]
        rows = [l.split()[2:3] + l.split()[-2:] for l in lines if "child_leak" in l]
        assert_eq(rows, [["80", "(20", "processes)"]],
                  "child_leak's rows of the text report's unfreed blocks (%s mode): %s" % (mode, lines))
        # over time: one series for the children's stack, which says how many there were
        sot = [(s["processes"], s["max_bytes"], s["last_bytes"]) for s in m["stacks_over_time"]
               if s["function"] == "child_leak"]
        assert_eq(sot, [(20, 4000, 4000)], "child_leak's stacks over time (%s mode)" % mode)


@collector
def test_full_heap_buffer_loses_no_free():
    """mem_edge burst: two threads allocate 30,000 blocks and free them all, 30 times, with
    every allocation sampled (--memory-rate 1) into a 64 KiB heap buffer (FENNEC_HEAP_RING),
    which the records outrun: sampled allocations are dropped, but never the free of a
    block whose allocation was recorded, which would read as a leak (before: megabytes of
    'unfreed' blocks from the last round in every run). Full mode waits instead: every
    allocation in the per-stack table, nothing unfreed, and no stall (before, the writer
    waited a second for room for its own timeline point in the ring it drains: over a
    minute for this run)."""
    plain_only()
    env = base_env({"FENNEC_HEAP_RING": "65536"})
    for mode in ("sampled", "full"):
        opts = ["--sample", "off", "--memory=" + mode] + (["--memory-rate", "1"] if mode == "sampled" else [])
        r, path = record("mem_edge", "burst", opts=opts, env=env, out="burst-%s.fnc" % mode, timeout_s=120)
        assert edge_truth(r)["ok"], r.stdout
        m = mem(analyze(path))
        # 1,800,000 blocks and two arrays; the runtime's own few (thread start, stdio) beside
        assert_true(1800002 <= m["frees"] <= m["allocations"] <= 1800020,
                    "calls counted (%s mode): %d allocations, %d frees" % (mode, m["allocations"], m["frees"]))
        if mode == "sampled":
            assert m["dropped_records"] > 0, "a 64 KiB buffer dropped nothing: the test tests nothing"
        else:  # only timeline points may be dropped
            assert_eq(sum(a["count"] for a in m["top_allocators"]), m["allocations"],
                      "allocations in the per-stack table (full mode, %d records dropped)" % m["dropped_records"])
        assert_eq([(l["function"], l["bytes"], l["count"]) for l in m["leaks"]], [],
                  "blocks reported unfreed (%s mode, %d records dropped)" % (mode, m["dropped_records"]))


@collector
def test_lost_frees_are_counted():
    """A free's record waits about a second for room in a full heap buffer, then is lost,
    and its block reads as unfreed. mem_edge wide (100,000 blocks of 64 B, then all freed),
    every block sampled into a 64 KiB buffer whose writer first sleeps 2.5 s
    (FENNEC_TEST_WRITER_STALL_MS, as a stalled writer would): the allocations beyond the
    buffer are dropped at once; then the first frees of recorded blocks wait a second each
    and are lost, until the writer looks. The profile says how many records of each kind
    were lost (before: one total), the blocks reported unfreed are exactly the lost frees'
    blocks, and the finding says that up to that many may have been freed."""
    plain_only()
    env = base_env({"FENNEC_HEAP_RING": "65536", "FENNEC_TEST_WRITER_STALL_MS": "2500"})
    r, path = record("mem_edge", "wide", opts=["--sample", "off", "--memory=sampled", "--memory-rate", "1"],
                     env=env, out="stalled.fnc")
    assert edge_truth(r)["ok"], r.stdout
    rep = analyze(path)
    m = mem(rep)
    lost = m["dropped_frees"]
    # 2.5 s of stall less the allocations' few milliseconds: two or three waits of ~1 s
    assert_between(lost, 1, 3, "frees lost", "")
    # a 64 KiB buffer holds ~1,400 ALLOC records of a repeated stack; the rest are dropped
    assert_between(m["dropped_allocations"], 90000, 99999, "allocations lost", "")
    assert_true(m["dropped_records"] >= m["dropped_allocations"] + lost,
                "dropped_records %d covers the allocations and frees lost" % m["dropped_records"])
    leaks = [(l["function"], l["count"], l["bytes"]) for l in m["leaks"]]
    assert_eq(leaks, [("mode_wide", lost, 64 * lost)], "blocks reported unfreed: those of the lost frees")
    f = [f for f in rep["findings"] if f["type"] == "memory_leak"]
    assert_eq(len(f), 1, "memory_leak findings")
    assert_true("%d free%s of the run %s lost" % (lost, "s" if lost > 1 else "", "were" if lost > 1 else "was")
                in f[0]["evidence"]["text"], "the finding names the lost frees: %s" % f[0]["evidence"])
    assert_eq(f[0]["evidence"]["lost_frees"], lost, "the finding's lost_frees")
    a = analyze_raw(path)
    assert_true("%d frees" % lost in a.stderr + a.stdout, "the warning counts the frees lost")


@collector
@timing
def test_live_blocks_of_a_killed_process_are_no_leaks():
    """mem_edge killed allocates 2,000 blocks, lets the writer flush them, frees them all and
    kills itself before the next flush: its frees are lost with the end of its file, and the
    blocks read as live. They are counted apart (cut_short_*), and nothing is reported
    unfreed (before: a HIGH leak of 2,000 blocks it had freed)."""
    plain_only()
    r, path = record("mem_edge", "killed", opts=["--sample", "off", "--memory=full"], expect_rc=-9)
    rep = analyze(path)
    m = mem(rep)
    assert_eq(m["leaks"], [], "blocks reported unfreed")
    assert_eq(m["leaked_count"], 0, "leaked_count")
    assert_eq([f["subject"] for f in rep["findings"] if f["type"] == "memory_leak"], [], "memory_leak findings")
    assert_eq((m["cut_short_count"], m["cut_short_bytes"] >= 1000 * 2000, m["cut_short_processes"]),
              (2000, True, 1), "blocks live at the end of the killed process")
    # where they were allocated is still shown, apart
    assert_eq([(l["function"], l["count"], l["bytes"]) for l in m["cut_short_live"]],
              [("killed_blocks", 2000, 2000 * 1000)], "cut_short_live")
    a = analyze_raw(path)
    assert_true("killed or crashed" in a.stdout, "the text says so: %s" % a.stdout[:3000])
    table = a.stdout.split("Live when killed or crashed, not leaks", 1)
    assert_true(len(table) == 2 and "killed_blocks" in table[1].split("\n\n")[0],
                "the text's table of blocks live when killed: %s" % a.stdout[:3000])


@collector
def test_sampled_blocks_beyond_the_watch_set():
    """mem_edge wide: 100,000 blocks live at once, every one sampled (--memory-rate 1), all
    freed. fennec watches the frees of 65,536 sampled blocks at most; a sampled allocation
    beyond that is left out (counted, with a warning) rather than recorded with a free that
    would go unseen (before: 'unfreed' megabytes, 59.7 MB for 200,000 such blocks)."""
    plain_only()
    # a heap ring of 64 MiB holds all 100,000 records (4.8 MB): none dropped, which would
    # free room in the set; so at most 65,536 are watched and 34,464 or more left out
    env = base_env({"FENNEC_HEAP_RING": str(64 << 20)})
    r, path = record("mem_edge", "wide", opts=["--sample", "off", "--memory=sampled", "--memory-rate", "1"],
                     env=env, out="wide.fnc")
    assert edge_truth(r)["ok"], r.stdout
    a = analyze_raw(path)
    m = mem(analyze(path))
    assert_eq(m["dropped_records"], 0, "records dropped")
    assert_true(100000 - 65536 <= m["untracked_allocations"] <= 100000 - 30000,
                "sampled allocations left out: %d" % m["untracked_allocations"])
    assert_true("sampled allocations were left out" in a.stdout, "the warning: %s" % a.stdout[:2000])
    assert_eq([(l["function"], l["bytes"], l["count"]) for l in m["leaks"]], [], "blocks reported unfreed")


@collector
def test_free_filter_race():
    """mem_edge race: a sampled block is allocated at the same bit of the free filter that
    another thread's free is clearing, and freed by its thread while the bit is off.
    FENNEC_FILTER_DELAY_US=100000 holds the clearing free 100 ms before and after its clear,
    which makes the interleaving certain. Before, the second block's free went unseen and
    it read as a 64-byte leak (race_second); now its allocation waits for the clear to
    end and sets the bit again."""
    plain_only()
    env = base_env({"FENNEC_FILTER_DELAY_US": "100000"})
    r, path = record("mem_edge", "race", opts=["--sample", "off", "--memory=sampled", "--memory-rate", "1"],
                     env=env, out="race.fnc")
    assert edge_truth(r)["ok"], r.stdout
    m = mem(analyze(path))
    assert_true(m["allocations"] >= 2 and m["frees"] >= 2, "allocations %d, frees %d"
                % (m["allocations"], m["frees"]))
    assert_eq([(l["function"], l["bytes"], l["count"]) for l in m["leaks"]], [], "blocks reported unfreed")


@collector
def test_leak_in_library_loaded_and_closed():
    """mem_edge dlopen: libfxalloc.so, loaded with dlopen and closed again within a few
    milliseconds (before any flush), leaks 3 x 777 bytes from fxalloc_leak: the leak is
    named by the library's function and line, because dlclose records the library first."""
    plain_only()
    for mode in ("full", "sampled"):
        opts = ["--memory=" + mode] + (["--memory-rate", "1"] if mode == "sampled" else [])
        r, path = record("mem_edge", "dlopen", opts=opts, out="dl-%s.fnc" % mode)
        m = mem(analyze(path))
        assert_eq(leaks_by_function(m), {"fxalloc_leak": (2331, 3)},
                  "unfreed bytes and blocks per allocating function (%s mode)" % mode)
        top = m["leaks"][0]["stack"]
        assert_true(top[0].startswith("fxalloc_leak ") and "fxalloc.c:" in top[0] and
                    any(f.startswith("mode_dlopen ") for f in top),
                    "the leak's stack, through the closed library (%s mode): %r" % (mode, top[:3]))
        assert_true(m["allocations"] >= 1003, "allocations counted in and around the library: %d"
                    % m["allocations"])


@collector
def test_usable_size_and_aligned_allocators():
    """mem_edge usable: under fennec, malloc_usable_size is at least the size asked for and
    every usable byte is writable, memalign/posix_memalign/aligned_alloc/valloc keep their
    alignment, calloc zeroes, a realloc within the usable size keeps the contents (the
    program checks these and exits 1 otherwise); fennec counts every call exactly."""
    plain_only()
    for mode in ("full", "sampled"):
        r, path = record("mem_edge", "usable", opts=["--memory=" + mode], out="u-%s.fnc" % mode)
        t = edge_truth(r)
        assert_eq(t["failures"], 0, "the program's own checks (%s mode)" % mode)
        m = mem(analyze(path))
        # + 1: the C runtime's stdout buffer, allocated by the final printf and never freed
        assert_eq((m["allocations"], m["frees"]), (t["allocs"] + 1, t["allocs"]),
                  "allocations and frees (%s mode)" % mode)
        assert_eq(m["leaked_bytes"], 0, "memory.leaked_bytes (%s mode)" % mode)


OTHER_ALLOCATORS = ("libtcmalloc_minimal.so.4", "libjemalloc.so.2")


def other_allocators():
    """The other allocators installed from Debian (libtcmalloc-minimal4, libjemalloc2)."""
    found = []
    for name in OTHER_ALLOCATORS:
        for d in ("/usr/lib/x86_64-linux-gnu", "/usr/lib/aarch64-linux-gnu", "/usr/lib64", "/usr/lib"):
            if os.path.exists(os.path.join(d, name)):
                found.append(os.path.join(d, name))
                break
    return found


@collector
def test_other_allocator_preloaded():
    """A program run on tcmalloc or jemalloc (LD_PRELOAD=the allocator; fennec goes first
    and forwards to it): fennec asks that allocator for usable sizes and counts what the
    program does. tcmalloc exports __libc_malloc as its own, which once made fennec take
    it for glibc's and read glibc chunk headers out of its blocks: live bytes stayed at 0,
    or the peak read 9.2e18. Checked: the peak within 1 % (full mode, requested sizes) and
    2 % (sampled mode, the allocator's usable sizes) of the spike's 65 MiB, the usable peak
    within 5 % of it, the peak in region load; and mem_leaks' leaks and calls, exactly."""
    plain_only()
    libs = other_allocators()
    if not libs:
        raise Skip("neither %s is installed (make deps installs them)" % " nor ".join(OTHER_ALLOCATORS))
    mode_checked = 0
    for lib in libs:
        name = os.path.basename(lib)
        for mode in ("full", "sampled"):
            env = base_env({"LD_PRELOAD": lib})
            r, path = record("mem_growth", "spike", 64, opts=["--memory=" + mode], env=env,
                             out="%s-%s.fnc" % (name, mode))
            m = mem(analyze(path))
            what = "%s, %s mode" % (name, mode)
            assert_rel(m["peak_bytes"], 65 * MIB, 0.01 if mode == "full" else 0.02,
                       "memory.peak_bytes (%s)" % what)
            assert_rel(m["peak_usable_bytes"], 65 * MIB, 0.05, "memory.peak_usable_bytes (%s)" % what)
            assert_eq(m["peak_region"], "load", "memory.peak_region (%s)" % what)
            mode_checked += 1
        # the known leaks, exactly, and every call (test_full_mode_* on glibc's heap)
        n = 20000
        r, path = record("mem_leaks", n, opts=["--memory=full"], env=base_env({"LD_PRELOAD": lib}),
                         out="%s-leaks.fnc" % name)
        truth = json.loads(r.stdout)
        m = mem(analyze(path))
        assert_eq(m["leaked_bytes"], truth["leaked_bytes"], "memory.leaked_bytes (%s)" % name)
        assert_eq(leaks_by_function(m), LEAKS, "unfreed bytes and blocks per function (%s)" % name)
        own = n + 16 + 100 + 12 + 4
        assert_between(m["allocations"], own, own + 40, "memory.allocations (%s)" % name)
        assert_between(m["frees"], own - 13, own - 13 + 40, "memory.frees (%s)" % name)
    assert_eq(mode_checked, 2 * len(libs), "recordings checked")


MMAP_LEFT = {"anon": (4 * MIB, 4), "map_grow": (768 * 1024, 1)}


def mmap_report(*opts):
    r, path = record("mem_mmap", opts=["--sample", "off"] + list(opts))
    return json.loads(r.stdout.strip().splitlines()[-1]), analyze(path)


@collector
def test_mmap_full_mode():
    """--memory-mmap: mem_mmap's anonymous mappings of 64 KiB or more count as allocations
    with their stacks, munmap as their free; partial munmap and mremap as documented; the
    16 KiB mapping and the file mapping do not count."""
    plain_only()
    truth, rep = mmap_report("--memory=full", "--memory-mmap")
    m = mem(rep)
    assert_eq(m["mmap_min_bytes"], 65536, "memory.mmap_min_bytes (the default threshold)")
    assert_eq(leaks_by_function(m), MMAP_LEFT, "mappings left at exit per allocating function")
    assert_eq((m["leaked_bytes"], m["leaked_count"]), (truth["left_bytes"], truth["left_count"]),
              "memory.leaked_bytes and leaked_count")
    big = [l for l in m["leaks"] if l["function"] == "anon"][0]
    assert_true(any(s.startswith("map_big ") for s in big["stack"]), "anon is called by map_big: %r" % big["stack"])
    # 10 map_big + map_grow's 256 KiB and its mremap to 768 KiB + map_trim's 2 MiB and the
    # 1 MiB left after its first munmap; the C runtime's stdout buffer is the one malloc.
    assert_between(m["allocations"], 15, 17, "memory.allocations")
    assert_between(m["frees"], 9, 11, "memory.frees (6 map_big, the mremap's old, map_trim's two)")
    assert_between(m["allocated_bytes"], 14 * MIB, 14 * MIB + 16 * 1024, "memory.allocated_bytes")
    assert_eq(m["largest_bytes"], 2 * MIB, "memory.largest_bytes (map_trim)")
    assert_between(m["peak_bytes"], truth["peak_bytes"], truth["peak_bytes"] + 64 * 1024, "memory.peak_bytes")


@collector
def test_mmap_sampled_mode_and_default():
    """Sampled mode counts the same mappings exactly (totals and peak) and estimates what is
    left; without --memory-mmap no mapping counts; --memory off with it is refused."""
    plain_only()
    truth, rep = mmap_report("--memory-mmap")
    m = mem(rep)
    assert_eq(m["mode"], "sampled", "memory.mode")
    assert_between(m["allocations"], 15, 17, "memory.allocations")
    assert_between(m["allocated_bytes"], 14 * MIB, 14 * MIB + 16 * 1024, "memory.allocated_bytes")
    assert_between(m["peak_bytes"], truth["peak_bytes"], truth["peak_bytes"] + 64 * 1024, "memory.peak_bytes")
    assert_eq(m["leaks_estimated"], True, "memory.leaks_estimated in sampled mode")
    assert_eq(m["mmap_min_bytes"], 65536, "memory.mmap_min_bytes")
    _, rep = mmap_report()
    assert_eq(mem(rep)["mmap_min_bytes"], None, "memory.mmap_min_bytes without --memory-mmap")
    assert_true(mem(rep)["peak_bytes"] < MIB, "no mapping counts without --memory-mmap: %r" % mem(rep)["peak_bytes"])
    r = run([fennec_bin(), "record", "--memory", "off", "--memory-mmap", "--", fixture("mem_mmap")])
    assert_eq(r.returncode, 2, "--memory off --memory-mmap (stderr %r)" % r.stderr)
    assert_true("--memory-mmap" in r.stderr, r.stderr)


@collector
def test_allocation_on_a_small_alternate_stack():
    """A signal handler that allocates on an 8 KiB alternate stack (a guard page below it)
    runs to the end under heap profiling: off the thread's stack and near the end of an
    alternate stack, fennec records the caller alone instead of unwinding (libunwind needs
    ~10 KiB there). Before, the program died of SIGSEGV in full mode."""
    plain_only()
    for opts in (["--memory=full"], ["--memory=sampled", "--memory-rate", "1"]):
        r, path = record("mem_altstack", opts=["--sample", "off"] + opts)
        assert_eq(json.loads(r.stdout)["ok"], True, "%s: the program ran to the end" % opts)
        m = mem(analyze(path))
        # at --memory-rate 1 every allocation of 100 bytes or more is sampled (weight 1)
        assert_eq(unfreed_by_function(m).get("handler_alloc"), (2090, 20),
                  "%s: the 20 blocks the handler left, from handler_alloc" % opts)


HEAP_UNWIND_LINE = re.compile(r"fennec: heap unwind check: .*: (\d+) stacks walked by both, (\d+) differ, "
                              r"(\d+) by fennec only, (\d+) by libunwind only; (\d+) walks by rules, (\d+) by libgcc")


@collector
def test_allocation_stacks_fast_walk_and_libunwind_agree():
    """The stack cache's entries are walked with cfi.c's call-frame rules, cached by address
    (libgcc's unwinder where a frame needs more; no lock, no system call: libunwind's
    unw_step blocked all signals around every frame). libunwind also walks every fill
    (FENNEC_HEAP_UNWIND=check) of mem_stacks (20 depths of recursion, each filled once) and
    of python3: the same frames, read from the same places, every time, nearly all walked by
    the rules. Then the blocks mem_stacks left carry their exact stacks with each walker
    (rules, libgcc alone, libunwind alone): leaf, rec x (d + 1), main, for 1000 + d bytes."""
    plain_only()
    log = os.path.abspath("unwind.log")
    env = base_env({"FENNEC_HEAP_UNWIND": "check", "FENNEC_HEAP_UNWIND_LOG": log})
    record("mem_stacks", 20, opts=["--sample", "off", "--memory=full"], env=env, out="check.fnc")
    code = "import json\nfor i in range(300): json.loads(json.dumps({'k': [str(j) for j in range(i)]}))"
    record("/usr/bin/python3", "-c", code, opts=["--sample", "off", "--memory=full"], env=env, out="py.fnc")
    with open(log) as f:
        lines = [HEAP_UNWIND_LINE.match(l) for l in f]
    assert_true(len(lines) == 2 and all(lines), "one check line per recorded process: %r" % lines)
    for name, m, least in zip(("mem_stacks", "python3"), lines, (20, 100)):
        both, differ, fast_only, unw_only, rules, gcc = [int(x) for x in m.groups()]
        assert_true(both >= least, "%s: entries compared: %d" % (name, both))
        assert_eq((differ, fast_only, unw_only), (0, 0, 0),
                  "%s: entries that differ, that only fennec's walk filled, that only libunwind filled" % name)
        assert_true(rules >= 0.9 * (rules + gcc), "%s: walks by the rules %d, by libgcc %d" % (name, rules, gcc))
    for walker in ("1", "gcc", "0"):
        r, path = record("mem_stacks", 20, opts=["--sample", "off", "--memory=full"],
                         env=base_env({"FENNEC_HEAP_UNWIND": walker}), out="w%s.fnc" % walker)
        leaks = [l for l in unfreed(mem(analyze(path))) if l["function"] == "leaf"]
        assert_eq(sorted((l["bytes"], l["count"]) for l in leaks), [(1000 + d, 1) for d in range(20)],
                  "FENNEC_HEAP_UNWIND=%s: the 20 blocks leaf left" % walker)
        for l in leaks:
            names = [s.split(" ")[0] for s in l["stack"]]
            d = l["bytes"] - 1000
            assert_eq(names[:d + 3], ["leaf"] + ["rec"] * (d + 1) + ["main"],
                      "FENNEC_HEAP_UNWIND=%s: the stack of the block of %d bytes" % (walker, l["bytes"]))


EXIT_LEAKS = r"""
#include <stdlib.h>
__attribute__((noinline)) void leak_some(int k)
{
	for (int i = 0; i < k; i++) {
		void *volatile lost = malloc(1000); // LOST
		(void)lost;
	}
}
__attribute__((noinline)) void hold_and_exit(void)
{
	void *volatile held = malloc(4000); // HELD
	(void)held;
	exit(0);
}
__attribute__((noinline)) void leak_all(void)
{
	leak_some(100);
	leak_some(50);
}
int main(int argc, char **argv)
{
	leak_all(); /* a level deeper than hold_and_exit: no stale pointer in its live frame */
	if (argc > 1)
		hold_and_exit();
	return 0;
}
"""


@collector
def test_unfreed_blocks_lost_or_still_reachable_at_exit():
    """Full mode tells the blocks unfreed at exit that no pointer reaches any more (leaks) from
    those the program still points to (docs/memory.md, "Reachable at exit"). leak_some drops
    its 150 blocks: all lost, though the frames that held them left their pointers in the
    stack that exit() then ran on (one read as reachable when the scan took the stack from
    the stopping thread's pointer up), and glibc's pointer to its top chunk points into the
    last one's end. hold_and_exit calls exit() with its block in its frame, which is live:
    reachable, not a leak, and no finding. Each program's file says the scan was made.
    (A live frame's unused slots may hold a returned call's pointers, as for any
    conservative scan: leak_some runs a level deeper than hold_and_exit's frame.)"""
    plain_only()
    build_program(EXIT_LEAKS, "exits.c", ("cc", "gcc"))
    for how, args, reach in (("return", [], {}), ("exit", ["x"], {"hold_and_exit": (4000, 1)})):
        r, path = record(os.path.abspath("exits"), *args, opts=["--memory=full", "--sample=off"], out=how + ".fnc")
        rep = analyze(path)
        m = mem(rep)
        assert_eq(leaks_by_function(m), {"leak_some": (150000, 150)}, "%s: lost blocks by function" % how)
        assert_eq(leaks_by_function(m, m["reachable"]), reach, "%s: still reachable blocks by function" % how)
        assert_eq((m["leaked_bytes"], m["leaked_count"]), (150000, 150), "%s: leaked bytes and count" % how)
        assert_eq(m["leak_scan"]["processes"], 1, "%s: processes scanned" % how)
        assert_true(m["leak_scan"]["root_bytes"] > 0, "%s: roots read: %r" % (how, m["leak_scan"]))
        subjects = [f["subject"] for f in leak_findings(rep)]
        assert_eq(len(subjects), 1, "%s: one memory_leak finding: %r" % (how, subjects))
        assert_true("leak_some" in subjects[0], "%s: the finding names leak_some: %r" % (how, subjects))
        text = analyze_raw(path).stdout
        if reach:
            assert_true("Still reachable at exit" in text and "hold_and_exit" in text.split("Still reachable at exit")[1],
                        "%s: the text report lists the reachable block" % how)
    # Sampled mode scans its sampled blocks: with every block sampled, the same answer.
    for how, args, reach in (("return", [], {}), ("exit", ["x"], {"hold_and_exit": (4000, 1)})):
        r, path = record(os.path.abspath("exits"), *args, opts=["--memory=sampled", "--memory-rate", "1", "--sample=off"],
                         out="sampled-%s.fnc" % how)
        m = mem(analyze(path))
        assert_eq(m["leak_scan"]["processes"], 1, "sampled mode, %s: processes scanned" % how)
        got = {k: (round(b), round(c)) for k, (b, c) in leaks_by_function(m).items()}
        assert_eq(got, {"leak_some": (150000, 150)}, "sampled mode, %s: lost blocks by function" % how)
        got = {k: (round(b), round(c)) for k, (b, c) in leaks_by_function(m, m["reachable"]).items()}
        assert_eq(got, reach, "sampled mode, %s: still reachable blocks by function" % how)


HELD_FROM_THE_HEAP = r"""
#include <stdlib.h>
#include <string.h>
#define BIG (4 << 20)
struct holder { void *big[4]; };
static struct holder *volatile table; /* a global points to a small block, which holds the rest */
__attribute__((noinline)) void *make_big(void)
{
	void *p = malloc(BIG);
	memset(p, 1, BIG);
	return p;
}
__attribute__((noinline)) void keep_big(void)
{
	struct holder *h = malloc(sizeof *h);
	for (int i = 0; i < 4; i++)
		h->big[i] = make_big();
	table = h;
}
__attribute__((noinline)) void lose_big(void)
{
	for (int i = 0; i < 3; i++) {
		void *volatile p = make_big();
		(void)p;
	}
}
int main(void)
{
	keep_big();
	lose_big();
	return 0;
}
"""


@collector
def test_sampled_mode_tells_lost_blocks_from_those_the_heap_still_holds():
    """Sampled mode, the default, reported every block unfreed at exit as a leak: gcc's cc1,
    which keeps its 108 MiB of tables to the end on purpose, read as a HIGH memory_leak.
    Its scan now reads the heap whole as a root (the blocks that were not sampled may hold
    the pointers), less the sampled blocks. Here a global points to a 32-byte holder, which
    points to four 4 MiB blocks; three more are dropped. At a 64 KiB rate the big blocks
    are sampled (p = 1 - e^-64) and the holder almost never (p ~ 0.0005; sampled, it is
    reached from the global and read): 16 MiB reachable through memory no sample saw,
    12 MiB lost, one finding, for lose_big. At a rate of 1 byte, everything sampled, the
    same."""
    plain_only()
    build_program(HELD_FROM_THE_HEAP, "held.c", ("cc", "gcc"))
    big = 4 << 20
    for rate in ("64K", "1"):
        r, path = record(os.path.abspath("held"), opts=["--memory=sampled", "--memory-rate", rate, "--sample=off"],
                         out="held-%s.fnc" % rate)
        rep = analyze(path)
        m = mem(rep)
        assert_eq(m["leak_scan"]["processes"], 1, "rate %s: processes scanned" % rate)
        lost = leaks_by_function(m)
        held = leaks_by_function(m, m["reachable"])
        assert_eq(sorted(lost), ["make_big"], "rate %s: lost blocks by function: %r" % (rate, lost))
        assert_rel(lost["make_big"][0], 3 * big, 0.02, "rate %s: bytes lost" % rate)
        assert_rel(lost["make_big"][1], 3, 0.02, "rate %s: blocks lost" % rate)
        assert_rel(held.get("make_big", (0, 0))[0], 4 * big, 0.02, "rate %s: bytes still reachable: %r" % (rate, held))
        assert_rel(m["leaked_bytes"], 3 * big, 0.02, "rate %s: memory.leaked_bytes" % rate)
        subjects = [f["subject"] for f in leak_findings(rep)]
        assert_eq(len(subjects), 1, "rate %s: one memory_leak finding: %r" % (rate, subjects))
        assert_true("lose_big" in subjects[0], "rate %s: the finding is lose_big's: %r" % (rate, subjects))
        text = analyze_raw(path).stdout
        assert_true("reachable    about 16.0 MiB" in text, "rate %s: the text report's reachable line: %s" % (
            rate, [l for l in text.splitlines() if "reachable" in l]))


TWO_CALLERS = r"""
#include <stdlib.h>
#include <time.h>
static void *keep[2][400];
__attribute__((noinline)) void *make_node(void) { return malloc(4096); }
__attribute__((noinline)) void build_tree(int which, int i) { keep[which][i] = make_node(); }
__attribute__((noinline)) void from_left(int i) { build_tree(0, i); } // LEFT
__attribute__((noinline)) void from_right(int i) { build_tree(1, i); build_tree(1, i + 200); } // RIGHT
int main(void)
{
	struct timespec ts = {0, 2000000};
	for (int i = 0; i < 200; i++) {
		from_left(i);
		from_right(i);
		nanosleep(&ts, NULL);
	}
	return 0;
}
"""


@collector
def test_live_over_time_rows_that_read_the_same_say_where_they_part():
    """make_node, called by build_tree, which from_left and from_right call: two stacks whose
    live bytes grow (800 KiB and 1.6 MiB), two series. Their rows of the text report's "Live
    over time" read the same ("make_node <- build_tree"), twice, indistinguishable: each now
    says where its stack parts from the other's (via from_left or from_right, with the line)."""
    plain_only()
    build_program(TWO_CALLERS, "two.c", ("cc", "gcc"))
    line = {tag: i for i, t in enumerate(TWO_CALLERS.splitlines(), 1) for tag in ("LEFT", "RIGHT")
            if t.endswith("// " + tag)}
    r, path = record(os.path.abspath("two"), opts=["--memory=full", "--sample=off"], out="two.fnc")
    text = analyze_raw(path).stdout
    rows = [l for l in text.split("Live over time")[1].split("\n\n")[0].splitlines()[1:] if "make_node" in l]
    assert_eq(len(rows), 2, "make_node's rows: %s" % rows)
    assert_true("1.6 MiB" in rows[0] and "[via from_right two.c:%d]" % line["RIGHT"] in rows[0],
                "the first row, from_right's: %s" % rows[0])
    assert_true("800.0 KiB" in rows[1] and "[via from_left two.c:%d]" % line["LEFT"] in rows[1],
                "the second row, from_left's: %s" % rows[1])


MERGED_MAPPING = r"""
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/mman.h>
static void *volatile big;
int main(void)
{
	big = malloc(4 << 20); /* a mapping of its own (glibc's mmap threshold) */
	memset(big, 0, 4 << 20);
	/* the program's own mapping, right below it: the kernel merges the two */
	char *region = mmap((char *)big - 16 - (1 << 20), 1 << 20, PROT_READ | PROT_WRITE,
			    MAP_PRIVATE | MAP_ANONYMOUS | MAP_FIXED_NOREPLACE, -1, 0);
	if (region == MAP_FAILED)
		return 2;
	void *volatile *slot = (void *volatile *)region;
	slot[0] = malloc(100); /* the only pointer to it: in the program's mapping */
	memset((void *)slot[0], 1, 100);
	FILE *f = fopen("/proc/self/maps", "r");
	char line[512];
	unsigned long lo, hi;
	while (f && fgets(line, sizeof line, f))
		if (sscanf(line, "%lx-%lx", &lo, &hi) == 2 && lo <= (unsigned long)region && (unsigned long)region < hi)
			printf("{\"merged\": %d}\n", hi > (unsigned long)big);
	if (f)
		fclose(f);
	return 0;
}
"""


@collector
def test_a_block_pointed_to_from_a_mapping_merged_with_a_large_block_is_reachable():
    """A large block is a mapping of its own, and the kernel merges it with the program's
    mapping next to it when their settings agree (Python's arenas next to its large
    buffers). The scan leaves the block out of the roots, not the whole mapping: a block
    whose only pointer is in the program's part is reachable. It read as a leak when every
    mapping that held a live block was left out."""
    plain_only()
    build_program(MERGED_MAPPING, "merged.c", ("cc", "gcc"))
    r, path = record(os.path.abspath("merged"), opts=["--memory=full", "--sample=off"], out="merged.fnc")
    lines = [l for l in r.stdout.splitlines() if l.startswith("{")]
    assert_eq([json.loads(l)["merged"] for l in lines], [1], "the program's mapping merged with the block's")
    m = mem(analyze(path))
    assert_eq(m["leaks"], [], "memory.leaks")
    assert_eq(sorted(l["bytes"] for l in m["reachable"]), [100, 4 << 20], "reachable blocks' bytes")


FORK_CHILD_SCAN = r"""
#include <stdlib.h>
#include <string.h>
#include <sys/wait.h>
#include <unistd.h>
#define NOLD 1600
#define OLD_SIZE (64 << 10)
static void **old;             /* the parent's heap, 100 MiB of blocks that point to each other */
static void *volatile kept;    /* the child's block held by a global */
struct holder { void *p; char pad[56]; };
static struct holder *volatile holder; /* allocated before the fork, written after it */
__attribute__((noinline)) void *child_block(size_t n) { void *p = malloc(n); memset(p, 7, n); return p; }
__attribute__((noinline)) void child_loses(void)
{
	for (int i = 0; i < 5; i++) {
		void *volatile p = child_block(1000);
		(void)p;
	}
}
int main(void)
{
	old = malloc(NOLD * sizeof *old);
	for (int i = 0; i < NOLD; i++) {
		old[i] = malloc(OLD_SIZE);
		memset(old[i], 1, OLD_SIZE);
		*(void **)old[i] = i ? old[i - 1] : NULL;
	}
	holder = malloc(sizeof *holder);
	pid_t pid = fork();
	if (pid == 0) {
		kept = child_block(3000);
		holder->p = child_block(4000);
		child_loses();
		return 0;
	}
	waitpid(pid, NULL, 0);
	for (int i = 0; i < NOLD; i++)
		free(old[i]);
	free(old);
	free(holder);
	return 0;
}
"""


@collector
def test_a_fork_child_scans_only_the_pages_it_wrote():
    """A fork child's blocks are younger than the fork, so the pointers to them are in pages
    it wrote since, which the kernel copied for it: the pages it still shares with its
    parent are not read. Each multiprocessing worker of a Python parent with a 300 MB heap
    read that whole heap as it exited (169 ms each; 0.08 s of program took 0.58 s). Here the
    parent's 100 MiB of blocks stay shared; the child keeps one block from a global and one
    from a block the parent made, and loses five: the same answer in full mode and with
    every block sampled, from a few MiB read (the parent frees its heap before it exits).
    The block held from the parent's: the child's map lacks the blocks made before the fork,
    so a fork child's heap is a root, less its own blocks (it read as lost in full mode)."""
    plain_only()
    build_program(FORK_CHILD_SCAN, "forkscan.c", ("cc", "gcc"))
    for mode in (["--memory=full"], ["--memory=sampled", "--memory-rate", "1"]):
        r, path = record(os.path.abspath("forkscan"), opts=mode + ["--sample=off"], out="fork%s.fnc" % mode[0][9:])
        m = mem(analyze(path))
        got = {k: (round(b), round(c)) for k, (b, c) in leaks_by_function(m).items()}
        assert_eq(got, {"child_block": (5000, 5)}, "%s: lost blocks by function" % mode[0])
        held = {k: (round(b), round(c)) for k, (b, c) in leaks_by_function(m, m["reachable"]).items()}
        assert_eq(held, {"child_block": (7000, 2)}, "%s: still reachable blocks" % mode[0])
        scan = m["leak_scan"]
        assert_eq((scan["processes"], scan["unscanned_processes"]), (2, 0), "%s: processes scanned" % mode[0])
        assert_true(scan["root_bytes"] < 20 << 20, "%s: roots read by the two: %d bytes (the parent's heap, which "
                    "the child shares, is over 100 MiB)" % (mode[0], scan["root_bytes"]))


LAZY_WRITER = r"""
#include <dirent.h>
#include <fennec.h>
#include <pthread.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/single_threaded.h>
#include <time.h>

/* fennec's writer threads in this process, by the name in /proc/self/task/N/comm */
static int writers(void)
{
	DIR *d = opendir("/proc/self/task");
	struct dirent *e;
	int n = 0;
	while (d && (e = readdir(d))) {
		char p[300], name[32] = "";
		snprintf(p, sizeof p, "/proc/self/task/%s/comm", e->d_name);
		FILE *f = fopen(p, "r");
		if (!f)
			continue;
		if (fgets(name, sizeof name, f) && !strncmp(name, "fennec-writer", 13))
			n++;
		fclose(f);
	}
	if (d)
		closedir(d);
	return n;
}

static double now_s(void)
{
	struct timespec ts;
	clock_gettime(CLOCK_MONOTONIC, &ts);
	return ts.tv_sec + ts.tv_nsec / 1e9;
}

static void *keep[400];

/* A step keeps a block of 64 KiB and churns small blocks for 2 ms. */
static void step(int i)
{
	keep[i] = malloc(65536);
	memset(keep[i], i, 65536);
	double end = now_s() + 0.002;
	while (now_s() < end) {
		char *p = malloc(100);
		memset(p, 0, 100);
		free(p);
	}
	fennec_step();
}

static void *worker(void *arg)
{
	for (int i = 0; i < 1000; i++)
		free(malloc(200));
	return arg;
}

int main(int argc, char **argv)
{
	for (int i = 0; i < 200; i++)
		step(i);
	printf("single=%d writers=%d\n", (int)__libc_single_threaded, writers());
	fflush(stdout);
	if (argc > 1 && !strcmp(argv[1], "kill"))
		raise(SIGKILL);
	pthread_t t;
	if (pthread_create(&t, NULL, worker, NULL) || pthread_join(t, NULL))
		return 1;
	printf("with a thread: writers=%d\n", writers());
	for (int i = 200; i < 400; i++)
		step(i);
	for (int i = 0; i < 400; i++)
		free(keep[i]);
	return 0;
}
"""


def test_a_single_threaded_program_keeps_glibc_single_threaded():
    """A writer thread switches glibc's allocator to its multi-threaded paths (an arena lock
    in every malloc): on bench/work_alloc's mixed loop that cost more than fennec's heap
    counters. A session with no CPU sampling, no GPU and no full heap profile, in a process
    that has made no thread, runs without its writer until the program makes one
    (session_writer.c, "the lazy writer"): glibc still says the process is single-threaded, the
    program's own thread writes the file at its safe points, every flush interval (a
    program killed after 0.4 s of steps keeps most of them), and the writer starts before
    the program's first thread. FENNEC_WRITER=thread keeps the writer from the start."""
    plain_only()
    lib = os.path.join(REPO, os.environ.get("FENNEC_BUILD") or "build", "lib")
    build_program(LAZY_WRITER, "lazy.c", ("cc", "gcc"), "-I", os.path.join(REPO, "include"), "-L", lib,
                  "-Wl,--no-as-needed,-rpath," + lib, "-lfennec", "-lpthread")
    opts = ["--sample=off", "--memory=sampled"]
    r, path = record(os.path.abspath("lazy"), opts=opts, out="lazy.fnc")
    assert_eq(r.stdout.split("\n")[:2], ["single=1 writers=0", "with a thread: writers=1"],
              "glibc's view of the process, fennec's writer threads, before and after its first thread")
    rep = analyze(path)
    assert_eq((rep["steps"]["marks"], rep["steps"]["count"], rep["summary"]["cut_short"]), (400, 399, False),
              "step marks, steps (from one mark to the next), cut short")
    m = mem(rep)
    assert_rel(m["trend"]["slope_bytes_per_step"], 65544, 0.05, "live bytes per step (a 64 KiB block)")
    own = rep["processes"][0]["collector_cpu_ns"]
    assert_true(own and own > 0, "fennec's own CPU, the program's thread's share included: %s" % own)

    r, path = record(os.path.abspath("lazy"), opts=opts, out="thread.fnc", env=base_env({"FENNEC_WRITER": "thread"}))
    assert_eq(r.stdout.split("\n")[0], "single=0 writers=1", "FENNEC_WRITER=thread: a writer from the start")
    assert_eq(analyze(path)["steps"]["marks"], 400, "FENNEC_WRITER=thread: step marks")

    # Killed: no end, no final flush. What the looks flushed, every 100 ms, stays.
    r, path = record(os.path.abspath("lazy"), "kill", opts=opts, out="kill.fnc", expect_rc=None)
    assert_eq(r.stdout.split("\n")[0], "single=1 writers=0", "the killed run: no writer")
    rep = analyze(path)
    assert_true(rep["summary"]["cut_short"], "the killed run's file is cut short")
    assert_between(rep["steps"]["count"], 120, 200, "steps of the killed run written by the looks")


@collector
@statistical
def test_sampled_estimates_agree_with_the_exact_counters():
    """mem_leaks 20000 leaks 27000 bytes in 13 blocks (known by construction) among 20,000
    freed ones; sampled at 8 KiB most of those blocks are not sampled and each sampled one
    stands for others. The counters give the blocks live at the end exactly: the estimates
    are scaled to them (the leaks never count more blocks than were live), and each carries
    its standard error, within which (three of them) the truth lies. (Before: an estimate of
    17 blocks beside 10 live, with no error given.)"""
    plain_only()
    r, path = record("mem_leaks", 20000, opts=["--memory=sampled", "--memory-rate", "8K", "--sample=off"])
    rep = analyze(path)
    m = mem(rep)
    assert_true(m["leaked_count"] <= m["live_at_end_count"] + 0.5,
                "leaked blocks %r within the %r live at the end (exact)" % (m["leaked_count"], m["live_at_end_count"]))
    assert_true(m["leaked_bytes_stderr"] > 0 and m["leaked_count_stderr"] > 0, "standard errors given: %r" % m)
    assert_true(abs(m["leaked_bytes"] - 27000) <= 3 * m["leaked_bytes_stderr"] + 1000,
                "leaked bytes %r +- %r against 27000" % (m["leaked_bytes"], m["leaked_bytes_stderr"]))
    assert_true(abs(m["leaked_count"] - 13) <= 3 * m["leaked_count_stderr"] + 2,
                "leaked blocks %r +- %r against 13" % (m["leaked_count"], m["leaked_count_stderr"]))
    for x in m["leaks"] + m["top_allocators"]:
        assert_true(x["bytes_stderr"] is not None and x["count_stderr"] is not None, "errors of %r" % x)
    assert_true(sum(x["bytes"] for x in m["top_allocators"]) <= m["allocated_bytes"] * 1.001 + 1,
                "the allocators' estimated bytes within the exact total")
    leaks = [f for f in leak_findings(rep) if f["subject"].startswith("unfreed")]
    assert_true(leaks, "unfreed-at-exit findings")
    for f in leaks:
        assert_true("+-" in f["evidence"]["text"] and f["evidence"]["bytes_stderr"] > 0,
                    "the finding's estimate carries its error: %r" % f["evidence"])
    # full mode: exact, no error
    r, path = record("mem_leaks", 20000, opts=["--memory=full", "--sample=off"], out="full.fnc")
    m = mem(analyze(path))
    assert_eq((m["leaked_bytes"], m["leaked_count"], m["leaked_bytes_stderr"]), (27000, 13, 0), "full mode: exact")

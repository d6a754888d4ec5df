/*
 * rules_cpu.c - the rules on where the CPU time goes (docs/bottlenecks.md): hot_operation,
 * a region with a large share of the wall time, split on and off the CPU; hot_function, a
 * function with a large share of the on-CPU samples, with advice by the module it is in
 * (BLAS, the Python interpreter, the kernel's part); memory_bound and compute_bound, a
 * region placed on the roofline (docs/roofline.md). Run by ana_rules() (rules.c).
 */
#include "analyze/aggregate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "analyze/rules.h"

/* From this share of its on-CPU time in the kernel, a hot region's or function's advice is
 * about the kernel's part (page faults, system calls), not "optimise its code": a program
 * that only touches new pages was 40-49 % kernel on these VMs, where the hypervisor's part
 * of a fault is counted as the guest's user time (the fixture's own getrusage). */
#define KERNEL_ADVICE_SHARE 0.4
/*
 * A region's time split by what its threads were doing (docs/bottlenecks.md "hot_operation"):
 * on CPU, its on-CPU samples times the period (they are taken on CPU time, in wall mode
 * too), and off it, the rest of its time: asleep, blocked, or waiting for a CPU. Returns 0
 * when the recording cannot tell: no CPU samples.
 */
static int region_split(const ana_profile *p, uint32_t i, double *on_ns, double *off_ns)
{
	/* (the kernel part of on_ns: ana_node_kernel_ns()) */
	const ana_sampling *s = &p->smp;
	const ana_node *n = &p->nodes[i];
	if (!s->present || !s->period_ns || !s->all.nodes || !s->all.weight[ANA_CPU] || !n->total_ns)
		return 0;
	double total = (double)n->total_ns;
	double on = (double)s->all.nodes[i].weight[ANA_CPU] * (double)s->period_ns;
	*on_ns = on < total ? on : total;
	*off_ns = total - *on_ns;
	return 1;
}

static int python_interpreter(const char *path);

/* The region's hottest on-CPU function that is the program's (not [fennec], fennec's own
 * work), among its top functions; -1 when none. */
static int region_top_func(const ana_profile *p, const ana_node_samples *ns)
{
	for (uint32_t k = 0; k < ns->ntop; k++)
		if (!ana_module_is_fennec(p->names[p->smp.funcs[ns->top[k]].module]))
			return (int)k;
	return -1;
}

/*
 * hot_operation: a region whose total time is a large share of the wall time. Wrappers
 * (regions whose children account for 90 % or more of their time) are skipped: the
 * children carry the finding. Severity: HIGH above 30 %, MEDIUM from 10 %, LOW from the
 * configured threshold when that is below 10 %.
 */
void rule_hot_operation(ana_profile *p)
{
	double thr = p->opt.hot_threshold_pct;
	double *kern = p->smp.present ? ana_node_kernel_ns(p) : NULL;
	for (uint32_t i = 0; i < p->nnodes; i++) {
		ana_node *n = &p->nodes[i];
		if (n->share_pct < thr || n->dist.count == 0)
			continue;
		if (n->first_child != ANA_NONE && n->child_ns >= 0.9 * (double)n->total_ns)
			continue;
		ana_severity sev = n->share_pct > 30 ? ANA_HIGH : n->share_pct >= 10 ? ANA_MEDIUM : ANA_LOW;
		ana_finding *f = ana_finding_add(p, "hot_operation", sev);
		if (!f)
			break;
		char a[32], b[32], c[32];
		double self_frac = n->total_ns ? (double)n->self_ns / (double)n->total_ns : 0;
		f->subject = strdup(n->path ? n->path : p->names[n->name]);
		f->evidence = ana_strf("%s takes %.1f%% of the wall time (%s in %llu calls, mean %s, p99 %s); "
				       "%.0f%% of it is its own code, %.0f%% in nested regions",
				       f->subject, n->share_pct, ana_fmt_ns((double)n->total_ns, a, sizeof a),
				       (unsigned long long)n->dist.count, ana_fmt_ns(n->dist.mean, b, sizeof b),
				       ana_fmt_ns(n->dist.p99, c, sizeof c), 100 * self_frac, 100 * (1 - self_frac));
		ana_finding_num(f, "share_pct", n->share_pct);
		ana_finding_num(f, "self_pct", n->self_pct);
		ana_finding_num(f, "total_ns", (double)n->total_ns);
		ana_finding_num(f, "count", (double)n->dist.count);
		ana_finding_num(f, "mean_ns", n->dist.mean);
		ana_finding_num(f, "p99_ns", n->dist.p99);
		double on_ns = 0, off_ns = 0;
		int split = region_split(p, i, &on_ns, &off_ns);
		double kern_ns = split && kern ? (kern[i] < on_ns ? kern[i] : on_ns) : 0;
		/* wall mode: off-CPU samples are taken for blocked threads only; the rest of the
		 * off-CPU time was spent runnable, waiting for a CPU */
		double blocked_ns = split && p->smp.mode == FMT_SAMPLE_WALL && p->smp.all.nodes
					    ? (double)p->smp.all.nodes[i].weight[ANA_OFFCPU] * (double)p->smp.period_ns : off_ns;
		if (blocked_ns > off_ns)
			blocked_ns = off_ns;
		double runnable_ns = off_ns - blocked_ns;
		/* the share of the run that faster code in the region could save at most */
		double on_share = split ? n->share_pct * on_ns / (on_ns + off_ns) : n->share_pct;
		if (split) {
			char *ev = ana_strf("%s; %.0f%% of it on CPU, %.0f%% off CPU (asleep, blocked or waiting "
					    "for a CPU)", f->evidence ? f->evidence : "", 100 * on_ns / (on_ns + off_ns),
					    100 * off_ns / (on_ns + off_ns));
			if (ev) {
				free(f->evidence);
				f->evidence = ev;
			}
			ana_finding_num(f, "oncpu_pct", 100 * on_ns / (on_ns + off_ns));
			ana_finding_num(f, "offcpu_pct", 100 * off_ns / (on_ns + off_ns));
			ana_finding_num(f, "oncpu_ns", on_ns);
			ana_finding_num(f, "offcpu_ns", off_ns);
			ana_finding_num(f, "kernel_ns", kern_ns);
			if (p->smp.mode == FMT_SAMPLE_WALL)
				ana_finding_num(f, "runnable_ns", runnable_ns);
			ana_finding_num(f, "kernel_pct", 100 * kern_ns / (on_ns + off_ns));
		}
		/* The largest child, to point at when the time is not the region's own. */
		uint32_t top = ANA_NONE;
		for (uint32_t k = n->first_child; k != ANA_NONE; k = p->nodes[k].next_sibling)
			if (top == ANA_NONE || p->nodes[k].total_ns > p->nodes[top].total_ns)
				top = k;
		if (self_frac < 0.5 && top != ANA_NONE)
			f->recommendation = ana_strf("Most of %s is spent in nested regions; start with %s "
						     "(%.1f%% of the wall time), then the rest of %s's children.",
						     f->subject, p->nodes[top].path, p->nodes[top].share_pct, f->subject);
		else if (split && kern_ns >= KERNEL_ADVICE_SHARE * on_ns && kern_ns >= off_ns)
			f->recommendation = ana_strf("%s spends %.0f%% of its time in the kernel (%s of its %s on CPU): page "
						     "faults or system calls, not its own code; the kernel_time finding "
						     "names them. Touch less new memory (reuse buffers instead of "
						     "allocating and freeing large blocks each call) or make fewer, larger "
						     "system calls.",
						     f->subject, 100 * kern_ns / (on_ns + off_ns), ana_fmt_ns(kern_ns, a, sizeof a),
						     ana_fmt_ns(on_ns, b, sizeof b));
		else if (split && off_ns >= on_ns && runnable_ns > off_ns / 2)
			f->recommendation = ana_strf("%s is off CPU %.0f%% of its time (%s), and its threads were not "
						     "blocked for most of it (wall-clock samples): they were waiting for a "
						     "CPU, which other threads or programs held. Run it on a machine with "
						     "CPUs to spare, or with fewer threads than cores; its on-CPU part is "
						     "%.1f%% of the run.",
						     f->subject, 100 * off_ns / (on_ns + off_ns), ana_fmt_ns(off_ns, a, sizeof a),
						     on_share);
		else if (split && off_ns >= on_ns)
			f->recommendation = ana_strf("%s is off CPU %.0f%% of its time (%s: asleep, blocked on a lock or "
						     "I/O, or waiting for a CPU on a busy machine) and on CPU %.0f%% (%s): "
						     "faster code saves at most the on-CPU part, %.1f%% of the run. Find "
						     "what it waits for (%s) and overlap or remove the wait.",
						     f->subject, 100 * off_ns / (on_ns + off_ns), ana_fmt_ns(off_ns, a, sizeof a),
						     100 * on_ns / (on_ns + off_ns), ana_fmt_ns(on_ns, b, sizeof b), on_share,
						     p->smp.mode == FMT_SAMPLE_WALL ? "the off_cpu finding and the off-CPU hot "
										      "functions name the blocking calls"
										    : "record with --sample=wall: the off-CPU "
										      "samples name the blocking calls");
		else if (n->dist.count >= 10000 && n->dist.mean < 20000)
			f->recommendation = ana_strf("%s is called %llu times at %s each: per-call overhead "
						     "dominates. Batch the work into fewer, larger calls or fuse it "
						     "with its caller; if the region itself is too fine-grained, "
						     "move it outward.",
						     f->subject, (unsigned long long)n->dist.count,
						     ana_fmt_ns(n->dist.mean, b, sizeof b));
		else if (n->dist.p99 > 3 * n->dist.p50 && n->dist.count >= 20)
			f->recommendation = ana_strf("%s is slow on some calls: p99 %s vs median %s. Find what "
						     "differs on the slow calls (input size, cache misses, I/O, "
						     "allocation) before optimising the common case.",
						     f->subject, ana_fmt_ns(n->dist.p99, c, sizeof c),
						     ana_fmt_ns(n->dist.p50, a, sizeof a));
		else if (p->smp.present && p->smp.all.nodes && region_top_func(p, &p->smp.all.nodes[i]) >= 0) {
			/* The samples inside the region say where its own code spends the time. */
			const ana_node_samples *ns = &p->smp.all.nodes[i];
			int t = region_top_func(p, ns);
			const ana_func *fn = &p->smp.funcs[ns->top[t]];
			char where[512] = "";
			if (fn->file != ANA_NONE && fn->line)
				snprintf(where, sizeof where, " (%s:%u)", base_name(p->names[fn->file]), fn->line);
			if (python_interpreter(p->names[fn->module]))
				f->recommendation = ana_strf("%s's own code dominates, and %.0f%% of its %llu on-CPU samples "
							     "are in the Python interpreter (%s), running the region's "
							     "Python code, which CPU samples cannot name: mark its parts "
							     "with nested fennec.region()s to see which, then move their "
							     "loops into vectorised calls (numpy, torch) or compiled code. "
							     "Halving its on-CPU time saves about %.0f%% of the run.",
							     f->subject, ns->top_pct[t], (unsigned long long)ns->samples[ANA_CPU],
							     p->names[fn->name], on_share / 2 > 50 ? 50.0 : on_share / 2);
			else
				f->recommendation = ana_strf("%s's own code dominates, and %.0f%% of its %llu on-CPU samples are "
							     "in %s%s: reduce the work there (algorithm, vectorisation, data "
							     "layout) or run it in parallel. Halving its on-CPU time saves about "
							     "%.0f%% of the run.",
							     f->subject, ns->top_pct[t], (unsigned long long)ns->samples[ANA_CPU],
							     p->names[fn->name], where, on_share / 2 > 50 ? 50.0 : on_share / 2);
		} else
			f->recommendation = ana_strf("%s's own code dominates: record it with CPU sampling on (the "
						     "default of fennec record; not --sample off) to see its hot "
						     "functions and lines, then reduce the work per call "
						     "(algorithm, vectorisation, data layout) or run it in parallel. "
						     "Halving it saves about %.0f%% of the run.",
						     f->subject, on_share / 2 > 50 ? 50.0 : on_share / 2);
		f->expected_gain_pct = n->share_pct > 100 ? 100 : n->share_pct;
	}
	free(kern);
}

/*
 * hot_function: a function whose own code (sampled self weight) is a large share of the
 * on-CPU samples. Severity as for hot_operation: HIGH above 30 %, MEDIUM from 10 %, LOW
 * from a configured threshold below 10 %. Needs HOT_FUNCTION_MIN_TOTAL on-CPU samples and
 * HOT_FUNCTION_MIN_SELF in the function, so that a share is not noise; a flat profile, with
 * no function at the threshold, gives no finding. At most HOT_FUNCTION_MAX findings.
 */
#define HOT_FUNCTION_MIN_TOTAL 50
#define HOT_FUNCTION_MIN_SELF 10
#define HOT_FUNCTION_MAX 5

/* The status of module path `path` (names index): the worst over the processes. */
static int module_status(const ana_sampling *s, uint32_t path)
{
	int st = 0;
	for (uint32_t i = 0; i < s->nmodules; i++)
		if (s->modules[i].path == path && (s->modules[i].status == 1 || s->modules[i].status == 2))
			st = s->modules[i].status;
	return st;
}

/* Whether a module is the system's (the C library, libstdc++, libm, a Debian package's):
 * code the program does not change, only its calls into it. */
static int system_module(const char *path)
{
	return !strcmp(path, "[vdso]") || !strncmp(path, "/lib/", 5) || !strncmp(path, "/lib64/", 7) || !strncmp(path, "/usr/lib/", 9) ||
	       !strncmp(path, "/usr/lib64/", 11);
}

/*
 * Whether `name` is a BLAS routine of levels 2 and 3 by its Fortran symbol (sgemm_,
 * dtrsm_, zgemv_): the ones that do O(n^3) or O(n^2) work a call. The reference BLAS
 * (netlib's, Debian's libblas3) computes them in their own code, plain loops on one
 * thread; an optimised BLAS (OpenBLAS, BLIS, MKL) enters them and computes in kernels
 * (sgemm_kernel_HASWELL, ...), so there they have almost no self time.
 */
/* A thread's first frame: a function there has no caller of the program's. */
static int thread_root(const char *name)
{
	return !strcmp(name, "start_thread") || !strcmp(name, "clone") || !strcmp(name, "clone3") ||
	       !strcmp(name, "__clone") || !strcmp(name, "__clone3") || !strcmp(name, "thread_start");
}

/* The dynamic loader's work of loading and relocating a library (dlopen, and the start of a
 * program): glibc's _dl_* functions and the dlopen worker, wherever they are linked. */
static int loader_call(const char *name)
{
	return !strncmp(name, "_dl_", 4) || !strcmp(name, "dlopen_doit") || !strcmp(name, "dl_open_worker") ||
	       !strcmp(name, "dl_open_worker_begin") || !strcmp(name, "do_lookup_x") || !strcmp(name, "_dlerror_run");
}

/* A call that gives the CPU up for a moment: a thread that waits by calling it in a loop
 * busy-waits. */
static int yield_call(const char *name)
{
	return !strcmp(name, "__sched_yield") || !strcmp(name, "sched_yield") || !strcmp(name, "pthread_yield") ||
	       !strcmp(name, "thrd_yield");
}

static int blas_compute_routine(const char *name)
{
	static const char *const ops[] = {"gemm", "symm", "hemm", "syrk", "herk", "syr2k", "her2k", "trmm", "trsm",
					  "gemv", "gbmv", "symv", "hemv", "sbmv", "spmv", "trmv", "trsv", "tbmv",
					  "tpmv", "ger", "gerc", "geru", "syr", "her", "syr2", "her2"};
	size_t n = strlen(name);
	if (n < 4 || name[n - 1] != '_' || !strchr("sdcz", name[0]))
		return 0;
	for (size_t k = 0; k < sizeof ops / sizeof *ops; k++)
		if (strlen(ops[k]) == n - 2 && !strncmp(name + 1, ops[k], n - 2))
			return 1;
	return 0;
}

/*
 * The on-CPU self weight of the functions of module m, the first `max` of them (the
 * hottest first) into top[0..*ntop); 0 for a file counted already, in another process's
 * list of modules.
 */
static uint64_t module_self(const ana_profile *p, uint32_t m, uint32_t *top, uint32_t max, uint32_t *ntop)
{
	const ana_sampling *s = &p->smp;
	const ana_sample_view *v = &s->all;
	uint32_t path = s->modules[m].path;
	for (uint32_t k = 0; k < m; k++)
		if (s->modules[k].path == path)
			return 0;
	uint64_t self = 0;
	for (uint32_t i = 0; i < v->nfuncs[ANA_CPU]; i++)
		if (s->funcs[v->funcs[ANA_CPU][i].func].module == path) {
			self += v->funcs[ANA_CPU][i].self;
			if (*ntop < max)
				top[(*ntop)++] = i; /* sorted by self weight */
		}
	return self;
}

/* A hot_function finding for a module's code judged as a whole, when its share passes. */
static ana_finding *module_finding(ana_profile *p, uint64_t self, double pct, double thr)
{
	if (pct < thr || self < HOT_FUNCTION_MIN_SELF)
		return NULL;
	return ana_finding_add(p, "hot_function", pct > 30 ? ANA_HIGH : pct >= 10 ? ANA_MEDIUM : ANA_LOW);
}


/* Whether a module is CPython's interpreter: libpython3.11.so.1.0, or an executable
 * python3.11 with libpython linked in (Debian's). */
static int python_interpreter(const char *path)
{
	const char *b = base_name(path);
	if (!strncmp(b, "libpython", 9))
		return 1;
	if (strncmp(b, "python", 6) || !b[6])
		return 0;
	for (b += 6; *b; b++)
		if (!(*b >= '0' && *b <= '9') && *b != '.')
			return 0;
	return 1;
}

/*
 * The Python interpreter's own code, judged as a whole: its functions (the evaluation loop,
 * float and dict operations, pymalloc) are how the script's Python code runs, and CPU
 * samples see their C frames, never the Python functions. Five findings on
 * _PyEval_EvalFrameDefault, pymalloc_pool_extend and others said to optimise those: one
 * now says what the time is and how to find which Python code it is.
 */
/* Whether the program loaded PyTorch (its libtorch modules were sampled). */
static int uses_torch(const ana_profile *p)
{
	for (uint32_t m = 0; m < p->smp.nmodules; m++)
		if (strstr(base_name(p->names[p->smp.modules[m].path]), "libtorch"))
			return 1;
	return 0;
}

static void hot_python(ana_profile *p, double thr, double cpu_frac)
{
	const ana_sampling *s = &p->smp;
	const ana_sample_view *v = &s->all;
	for (uint32_t m = 0; m < s->nmodules; m++) {
		const ana_module *mod = &s->modules[m];
		if (!python_interpreter(p->names[mod->path]) || mod->status == 1 || mod->status == 2)
			continue;
		uint32_t top[3], ntop = 0;
		uint64_t self = module_self(p, m, top, 3, &ntop);
		double pct = 100.0 * (double)self / (double)v->weight[ANA_CPU];
		ana_finding *f = module_finding(p, self, pct, thr);
		if (!f)
			continue;
		const char *path = p->names[mod->path];
		char hottest[512] = "";
		size_t n = 0;
		for (uint32_t k = 0; k < ntop && n < sizeof hottest; k++) {
			const ana_hot_func *h = &v->funcs[ANA_CPU][top[k]];
			int w = snprintf(hottest + n, sizeof hottest - n, "%s%s %.1f%%", k ? ", " : "",
					 p->names[s->funcs[h->func].name], h->self_pct);
			n += w > 0 ? (size_t)w : 0;
		}
		f->subject = ana_strf("Python code (interpreted by %s)", base_name(path));
		f->evidence = ana_strf("%.1f%% of the on-CPU samples (%llu of %llu) are in the Python interpreter's own "
				       "code (%s), running the program's Python code; its hottest functions: %s",
				       pct, (unsigned long long)self, (unsigned long long)v->weight[ANA_CPU], path, hottest);
		ana_finding_num(f, "self_pct", pct);
		ana_finding_num(f, "self_samples", (double)self);
		ana_finding_num(f, "cpu_samples", (double)v->weight[ANA_CPU]);
		ana_finding_num(f, "python_interpreter", 1);
		f->recommendation = ana_strf("This is the time of the program's Python code, which CPU samples cannot name: "
					     "they see the interpreter's C frames, not Python functions. Mark the script's "
					     "phases with fennec.region() (python/fennec, docs/python.md): the regions and "
					     "\"Hot functions by region\" then say which Python code it is. Then move its "
					     "loops into vectorised calls (numpy) or compiled code. Up to %.0f%% of the run.",
					     pct * cpu_frac);
		f->expected_gain_pct = pct * cpu_frac;
	}
}

/*
 * A hot function of the program's own (not a system library's: a system call wrapper is
 * in the kernel by nature, and its advice is about its callers) whose self samples were
 * mostly taken in the kernel (FMT_S_KERNEL) spends its time in page faults, not in its
 * code: the advice says so instead (kernel_time has the whole picture).
 */
static void kernel_advice(ana_profile *p, ana_finding *f, uint32_t func, const char *name)
{
	double kpct = ana_func_kernel_pct(p, func);
	ana_finding_num(f, "kernel_pct", kpct);
	if (kpct < 100 * KERNEL_ADVICE_SHARE || ana_module_is_system(p->names[p->smp.funcs[func].module]))
		return;
	char *r = ana_strf("%.0f%% of %s's own samples were taken in the kernel: its time is page faults "
			   "(memory it touches for the first time) or system calls, not its code. Touch less "
			   "new memory (reuse buffers instead of allocating and freeing large blocks) or make "
			   "fewer calls; see the kernel_time finding for where the kernel time goes.",
			   kpct, name);
	if (r) {
		free(f->recommendation);
		f->recommendation = r;
	}
}

/* Code of a module that could not be read (missing, or rebuilt since) has one name per
 * address, which says nothing: its share is judged as a whole, per module (hot_function,
 * threshold thr). */
static void hot_unsymbolised_modules(ana_profile *p, double thr)
{
	const ana_sampling *s = &p->smp;
	const ana_sample_view *v = &s->all;
	for (uint32_t m = 0; m < s->nmodules; m++) {
		const ana_module *mod = &s->modules[m];
		if ((mod->status != 1 && mod->status != 2) || p->names[mod->path][0] == '[')
			continue;
		uint32_t ntop = 0;
		uint64_t self = module_self(p, m, NULL, 0, &ntop);
		double pct = 100.0 * (double)self / (double)v->weight[ANA_CPU];
		ana_finding *f = module_finding(p, self, pct, thr);
		if (!f)
			continue;
		const char *path = p->names[mod->path];
		f->subject = ana_strf("%s (not symbolised)", base_name(path));
		f->evidence = ana_strf("%.1f%% of the on-CPU samples (%llu of %llu) are in the code of %s, which could "
				       "not be symbolised: %s",
				       pct, (unsigned long long)self, (unsigned long long)v->weight[ANA_CPU], path,
				       mod->status == 2 ? "the file there now has another build id than the recorded one"
						        : "the file is gone");
		ana_finding_num(f, "self_pct", pct);
		ana_finding_num(f, "self_samples", (double)self);
		ana_finding_num(f, "cpu_samples", (double)v->weight[ANA_CPU]);
		f->recommendation = ana_strf("Analyse where the recorded %s is, or install its debug file (the one "
					     "with the recorded build id, under /usr/lib/debug/.build-id/), and run fennec "
					     "analyze again: its hot functions will then have names and lines.",
					     base_name(path));
		double cpu_all = (double)(p->cpu_user_ns + p->cpu_sys_ns);
		double frac = p->wall_ns && cpu_all > 0 && cpu_all < (double)p->wall_ns ? cpu_all / (double)p->wall_ns : 1;
		f->expected_gain_pct = pct * frac;
	}
}

void rule_hot_function(ana_profile *p)
{
	const ana_sampling *s = &p->smp;
	const ana_sample_view *v = &s->all;
	if (!s->present || v->samples[ANA_CPU] < HOT_FUNCTION_MIN_TOTAL || !v->weight[ANA_CPU])
		return;
	double thr = p->opt.hot_threshold_pct;
	hot_unsymbolised_modules(p, thr);
	/* The part of the wall time that is CPU time bounds what faster code can save. */
	double cpu = (double)(p->cpu_user_ns + p->cpu_sys_ns);
	double cpu_frac = p->wall_ns && cpu > 0 ? cpu / (double)p->wall_ns : 1;
	if (cpu_frac > 1)
		cpu_frac = 1;
	/* Where the samples carry Python frames, the functions are named: no module finding */
	if (!(s->py_samples && s->py_status == FMT_PY_OK && !p->opt.native))
		hot_python(p, thr, cpu_frac);
	int fired = 0;
	for (uint32_t i = 0; i < v->nfuncs[ANA_CPU] && fired < HOT_FUNCTION_MAX; i++) {
		const ana_hot_func *h = &v->funcs[ANA_CPU][i];
		if (h->self_pct < thr)
			break; /* sorted by self weight */
		const ana_func *fn = &s->funcs[h->func];
		const char *name = p->names[fn->name];
		if (h->self < HOT_FUNCTION_MIN_SELF || !strcmp(name, "[unknown]") || module_status(s, fn->module) ||
		    python_interpreter(p->names[fn->module]) || openmp_runtime(p->names[fn->module]))
			continue; /* the interpreter's: hot_python(); an OpenMP runtime's: rule_parallel_wait() */
		/* fennec's own code in the program's threads (recording an allocation, its stack
		 * cache), one function [fennec] of the profile (samples_symbols.c), is the profiler's
		 * cost, never the program's to optimise. */
		int ours = ana_module_is_fennec(p->names[fn->module]);
		if (ours)
			continue;
		ana_severity sev = h->self_pct > 30 ? ANA_HIGH : h->self_pct >= 10 ? ANA_MEDIUM : ANA_LOW;
		ana_finding *f = ana_finding_add(p, "hot_function", sev);
		if (!f)
			return;
		fired++;
		f->subject = strdup(name);
		/* Its hottest line, and that line's share of the function's own samples. */
		char where[512] = "", line_note[640] = "";
		double line_pct = 0;
		if (h->file != ANA_NONE && h->line) {
			snprintf(where, sizeof where, "%s:%u", base_name(p->names[h->file]), h->line);
			for (uint32_t k = 0; k < v->nlines[ANA_CPU]; k++) {
				const ana_hot_line *l = &v->lines[ANA_CPU][k];
				if (l->file == h->file && l->line == h->line) {
					line_pct = h->self ? 100.0 * (double)l->self / (double)h->self : 0;
					break;
				}
			}
			snprintf(line_note, sizeof line_note, ", hottest at %s (%.0f%% of its samples)", where,
				 line_pct > 100 ? 100.0 : line_pct);
		}
		const char *caller = h->caller != ANA_NONE ? p->names[s->funcs[h->caller].name] : NULL;
		f->evidence = ana_strf("%s has %.1f%% of the on-CPU samples in its own code (%llu of %llu)%s; "
				       "%.1f%% with what it calls%s%s",
				       name, h->self_pct, (unsigned long long)h->self, (unsigned long long)v->weight[ANA_CPU],
				       line_note, h->total_pct, caller ? "; called from " : "", caller ? caller : "");
		ana_finding_num(f, "self_pct", h->self_pct);
		ana_finding_num(f, "total_pct", h->total_pct);
		ana_finding_num(f, "self_samples", (double)h->self);
		ana_finding_num(f, "total_samples", (double)h->total);
		ana_finding_num(f, "cpu_samples", (double)v->weight[ANA_CPU]);
		if (h->line)
			ana_finding_num(f, "line", h->line);
		if (caller)
			ana_finding_num(f, "caller_pct", h->caller_pct);
		f->expected_gain_pct = h->self_pct * cpu_frac;
		/* A library function (libc's memcpy, libm's expf) is rarely the thing to change:
		 * its caller decides how often and how much. For a system library's internal
		 * function (glibc's _int_malloc under malloc) that is the caller where the program
		 * entered the library. */
		int library = caller && fn->module != s->funcs[h->caller].module;
		/* ... but the program's own function that a system library calls back (qsort's
		 * comparison) is the program's to optimise */
		int callback = library && system_module(p->names[s->funcs[h->caller].module]) &&
			       !system_module(p->names[fn->module]);
		library = library && !callback;
		const char *entry = NULL, *through = NULL;
		double entry_pct = h->caller_pct;
		if (library) {
			entry = caller;
			/* called from another system library (the kernel's vDSO clock from libc's
			 * clock_gettime): where the program entered that one, through it */
			for (uint32_t k = 0; system_module(p->names[s->funcs[h->caller].module]) && k < v->nfuncs[ANA_CPU]; k++)
				if (v->funcs[ANA_CPU][k].func == h->caller && v->funcs[ANA_CPU][k].entry != ANA_NONE) {
					entry = p->names[s->funcs[v->funcs[ANA_CPU][k].entry].name];
					through = caller;
					break;
				}
		} else if (caller && h->entry != ANA_NONE && system_module(p->names[fn->module])) {
			through = caller;
			entry = p->names[s->funcs[h->entry].name];
			entry_pct = h->entry_pct;
			ana_finding_num(f, "entry_pct", entry_pct);
		}
		/* where the entry is a thread's start, the library runs the code on threads it started
		 * itself (OpenBLAS's workers): no frame of the program is on those stacks */
		int own_threads = entry && thread_root(entry);
		const char *spinner = caller && yield_call(name) ? base_name(p->names[s->funcs[h->caller].module]) : NULL;
		if (loader_call(name) || (caller && loader_call(caller) && system_module(p->names[fn->module]))) {
			/* loading libraries: a cost of the start, not code to optimise */
			ana_finding_num(f, "loading_libraries", 1);
			f->recommendation = ana_strf("%s is the dynamic loader loading and relocating shared libraries (dlopen%s%s): "
						     "a cost paid once, when the program starts or first imports a C extension "
						     "(a large one such as libtorch takes seconds), not code to optimise. It "
						     "weighs %.0f%% here because the run is short: a longer run spreads it; to cut "
						     "it, import only what is used, and late (inside the function that needs it), "
						     "or keep one long-lived process for many jobs instead of starting one each time.",
						     name, entry ? ", reached from " : "", entry ? entry : "", h->self_pct);
		} else if (fn->lang == ANA_LANG_PYTHON) {
			/* Python code, named by its frames: Python's remedies, never the C API's */
			ana_finding_num(f, "python", 1);
			f->recommendation = ana_strf("%s is Python code that the interpreter runs one bytecode at a time%s%s. Move its "
						     "loop into whole-array calls (numpy, or torch tensor operations), use a "
						     "builtin or library function that does the loop in C (sum, sorted, "
						     "collections.Counter, str.join), cache what it recomputes "
						     "(functools.lru_cache), or compile it (numba.njit, Cython)%s. Up to %.0f%% of "
						     "the run is in its own code.",
						     name, where[0] ? "; its hottest line is " : "", where,
						     uses_torch(p) ? "; work done per batch on the input side belongs in the "
								     "DataLoader's workers (num_workers > 0)"
								   : "",
						     f->expected_gain_pct);
		} else if (spinner) {
			/* a library's threads that yield in a loop while they wait for work */
			ana_finding_num(f, "busy_wait", 1);
			f->recommendation = ana_strf("Threads of %s call %s in a loop while they wait for work (busy waiting): the CPU "
						     "they take does nothing for the program, and with fewer cores than busy "
						     "threads it slows the threads that compute. Give the library fewer threads "
						     "(OpenBLAS: OPENBLAS_NUM_THREADS; an OpenMP runtime: OMP_NUM_THREADS) or let "
						     "them sleep when idle (OMP_WAIT_POLICY=passive). Up to %.0f%% of the CPU "
						     "time; the run gains less, or loses a little (a numpy MLP on 2 cores: "
						     "OPENBLAS_NUM_THREADS=1 took its CPU time from 558 to 282 ms, its median step "
						     "from 2.36 to 2.57 ms; docs/bottlenecks.md).",
						     spinner, name, h->self_pct);
		} else if (own_threads) {
			ana_finding_num(f, "library_threads", 1);
			f->recommendation = ana_strf("%s is library code (%s) that runs mostly on threads the library started itself "
						     "(%.0f%% of its samples are on stacks that begin at %s): how much of it runs is "
						     "decided by the program's calls into %s from its own threads. Make those calls "
						     "less often or on more data at a time, or pick a cheaper routine. Removing its "
						     "time would save up to %.0f%% of the run.",
						     name, base_name(p->names[fn->module]), entry_pct, entry,
						     base_name(p->names[(through ? s->funcs[h->caller] : *fn).module]), f->expected_gain_pct);
		} else if (blas_compute_routine(name) && h->self * 5 >= h->total * 4) {
			/* computing in its own code: the reference BLAS (docs/bottlenecks.md) */
			ana_finding_num(f, "reference_blas", 1);
			f->recommendation = ana_strf("%s computes in its own code: that is the reference BLAS (%s), plain loops "
						     "on one thread. An optimised BLAS runs the same calls many times faster "
						     "and on every core, with no change to the program: on Debian or Ubuntu "
						     "`apt install libopenblas0-pthread` (update-alternatives makes it "
						     "libblas.so.3), or link OpenBLAS, BLIS or MKL. A 512x512x512 sgemm took "
						     "59 ms with the reference BLAS and 2.2 ms with OpenBLAS on a 2-core VM "
						     "(docs/bottlenecks.md). Up to %.0f%% of the run is in it.",
						     name, p->names[fn->module], f->expected_gain_pct);
		} else if (entry)
			f->recommendation = ana_strf("%s is library code (%s%s), reached mostly from %s (%.0f%% of its "
						     "samples%s%s): make %s call it less often or on more data at a time "
						     "(batch, cache its results, pick a cheaper routine). Removing its "
						     "time would save up to %.0f%% of the run.",
						     name, base_name(p->names[fn->module]),
						     ours ? ": fennec's wrapper, which the recording adds to it" : "", entry,
						     entry_pct, through ? ", through " : "", through ? through : "", entry,
						     f->expected_gain_pct);
		else if (callback) {
			/* where the program entered the library that calls it back: that caller's entry */
			const char *via = NULL;
			for (uint32_t k = 0; k < v->nfuncs[ANA_CPU] && !via; k++)
				if (v->funcs[ANA_CPU][k].func == h->caller && v->funcs[ANA_CPU][k].entry != ANA_NONE)
					via = p->names[s->funcs[v->funcs[ANA_CPU][k].entry].name];
			f->recommendation = ana_strf("Optimise %s%s%s: reduce the work of its own code (algorithm, "
						     "vectorisation, data layout, memory access order), or have it called "
						     "less: %s calls it back from %s%s%s. Halving it saves about %.0f%% of "
						     "the run.",
						     name, where[0] ? ", starting at " : "", where,
						     base_name(p->names[s->funcs[h->caller].module]), caller,
						     via ? ", which the program enters from " : "", via ? via : "",
						     f->expected_gain_pct / 2);
		}
		else
			f->recommendation = ana_strf("Optimise %s%s%s: reduce the work of its own code (algorithm, "
						     "vectorisation, data layout, memory access order)%s%s%s. Halving it "
						     "saves about %.0f%% of the run.",
						     name, where[0] ? ", starting at " : "", where,
						     caller ? ", or call it less from " : "", caller ? caller : "",
						     caller ? (h->caller_pct >= 99.5 ? " (its only caller)" : " (its main caller)") : "",
						     f->expected_gain_pct / 2);
		kernel_advice(p, f, h->func, name);
	}
}

/*
 * memory_bound / compute_bound (docs/roofline.md): a region annotated with
 * fennec_region_work, of at least --roofline-min-share % of the wall in its own code,
 * placed on this machine's roofline. Below the ridge point it is memory bound, above it
 * compute bound; what reaching its roof would save (self share x (1 - roof %)) is the
 * gain and sets the severity: HIGH from 10 points, MEDIUM from 3, LOW under.
 */
void rule_roofline(ana_profile *p)
{
	const ana_roofline *rl = &p->roof;
	if (rl->calibrated != 1)
		return;
	for (uint32_t i = 0; i < rl->n; i++) {
		const ana_roof *r = &rl->r[i];
		const ana_node *n = &p->nodes[r->node];
		if (n->self_pct < p->opt.roofline_min_share_pct || !isfinite(r->roof_pct))
			continue;
		double head = r->roof_pct >= 100 ? 0 : 1 - r->roof_pct / 100;
		double gain = n->self_pct * head;
		ana_finding *f = ana_finding_add(p, r->memory_bound ? "memory_bound" : "compute_bound",
					         gain >= 10 ? ANA_HIGH : gain >= 3 ? ANA_MEDIUM : ANA_LOW);
		if (!f)
			return;
		char t[32], bw[32], rb[32];
		ana_fmt_ns((double)n->self_ns, t, sizeof t);
		ana_fmt_bytes(r->bytes_per_s, bw, sizeof bw);
		ana_fmt_bytes(r->roof, rb, sizeof rb);
		f->subject = ana_strf("%s", n->path);
		if (r->flops > 0)
			f->evidence = ana_strf("%s does %.3g FLOP per byte: %.3g GFLOP/s and %s/s over %s of its own time (%.1f%% of the "
					       "wall, %s, %s); the %s roof at that intensity is %.3g GFLOP/s (ridge point %.2f FLOP/byte), "
					       "so it reaches %.0f%% of it%s",
					       n->path, r->ai, r->flops_per_s / 1e9, bw, t, n->self_pct,
					       r->one_thread ? "one thread" : "several threads", r->fp32 ? "fp32" : "fp64",
					       r->memory_bound ? "memory" : "compute",
					       r->roof / 1e9, r->ridge, r->roof_pct,
					       r->memory_bound && r->roof_pct > 110 ? " (above the memory roof: its data comes from cache)" : "");
		else
			f->evidence = ana_strf("%s moves %s/s over %s of its own time (%.1f%% of the wall, %s) and does no annotated "
					       "FLOP; peak bandwidth is %s/s, so it reaches %.0f%% of it",
					       n->path, bw, t, n->self_pct, r->one_thread ? "one thread" : "several threads", rb,
					       r->roof_pct);
		ana_finding_num(f, "arithmetic_intensity", r->ai);
		ana_finding_num(f, "flops_per_s", r->flops_per_s);
		ana_finding_num(f, "bytes_per_s", r->bytes_per_s);
		ana_finding_num(f, "roof", r->roof);
		ana_finding_num(f, "roof_pct", r->roof_pct);
		ana_finding_num(f, "self_pct", n->self_pct);
		int at_roof = r->roof_pct >= 80;
		if (r->memory_bound && at_roof)
			f->recommendation = ana_strf("%s runs at the memory roof: only moving fewer bytes helps. Fuse passes over the "
						     "same data, tile or block so that data is reused from cache, or use smaller types "
						     "(fp32, bf16, int8) where precision allows.", n->path);
		else if (r->memory_bound)
			f->recommendation = ana_strf("%s is memory bound but uses %.0f%% of the bandwidth its intensity allows: make "
						     "its accesses contiguous and prefetchable (unit stride, structure of arrays, no "
						     "pointer chasing)%s, then raise its intensity by tiling for cache or fusing loops. "
						     "Reaching the roof would save up to %.1f%% of the run.",
						     n->path, r->roof_pct, r->one_thread ? " and spread it over the cores" : "", gain);
		else if (at_roof)
			f->recommendation = ana_strf("%s runs at the compute roof: only fewer operations help (a cheaper algorithm, "
						     "lower precision, skipping work that does not change the result).", n->path);
		else
			f->recommendation = ana_strf("%s is compute bound at %.0f%% of peak FLOP/s: vectorise it (-O3 -march=native, "
						     "contiguous aligned data, restrict pointers, no branches in the inner loop), keep "
						     "enough independent FMAs in flight%s. Reaching the roof would save up to %.1f%% of "
						     "the run.", n->path, r->roof_pct, r->one_thread ? " and use all cores" : "", gain);
		f->expected_gain_pct = gain;
	}
}

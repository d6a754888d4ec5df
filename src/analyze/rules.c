/*
 * rules.c - the bottleneck rules (docs/bottlenecks.md) over the analysis model. Each
 * rule turns numbers into a finding with a severity from documented thresholds, the
 * evidence, a recommendation specific to that evidence, and an upper bound on the gain.
 */
#include "analyze/aggregate.h"

#include <math.h>
#include <stdarg.h>
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

void rule_hot_function(ana_profile *p)
{
	const ana_sampling *s = &p->smp;
	const ana_sample_view *v = &s->all;
	if (!s->present || v->samples[ANA_CPU] < HOT_FUNCTION_MIN_TOTAL || !v->weight[ANA_CPU])
		return;
	double thr = p->opt.hot_threshold_pct;
	/* Code of a module that could not be read (missing, or rebuilt since) has one name per
	 * address, which says nothing: its share is judged as a whole, per module. */
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
		 * cache), one function [fennec] of the profile (samples.c), is the profiler's
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

/*
 * off_cpu: with wall-clock sampling, a thread that is blocked (off-CPU samples) for much
 * of the time it should compute: inside a region, or, on a stepping thread, within its
 * steps. Fires when the off-CPU share of those samples is at least the threshold (default
 * 30 %) and the blocked time is at least 5 % of its process's wall time, over 20 samples
 * or more. HIGH from 60 % blocked and 25 % of the wall time, MEDIUM from 10 % of it.
 */
#define OFFCPU_MIN_SAMPLES 20
#define OFFCPU_MAX 3

static int should_compute(const ana_profile *p, const ana_sample *s)
{
	const ana_process *pr = &p->procs[p->threads[s->thread].process];
	return s->node != ANA_NONE || (pr->step_thread == s->thread && s->step < pr->marks);
}

/* What the blocking stack waits for, from its function names (innermost first). */
static const char *block_kind(const ana_profile *p, const ana_stack *st)
{
	static const struct { const char *needle, *kind; } k[] = {
		{"mutex", "lock"}, {"lll_lock", "lock"}, {"rwlock", "lock"}, {"spin_lock", "lock"},
		{"cond_wait", "handover"}, {"cond_timedwait", "handover"}, {"sem_wait", "handover"}, {"sem_timedwait", "handover"},
		{"pthread_join", "join"}, {"waitpid", "child"}, {"wait4", "child"},
		{"nanosleep", "sleep"}, {"usleep", "sleep"}, {"sleep", "sleep"},
		{"poll", "event"}, {"select", "event"}, {"epoll", "event"},
		{"recv", "io"}, {"read", "io"}, {"write", "io"}, {"send", "io"}, {"fsync", "io"}, {"open", "io"}, {"accept", "io"},
	};
	for (uint32_t i = st->n; i-- > 0;) {
		const char *name = p->names[p->smp.funcs[p->smp.locs[st->locs[i]].func].name];
		for (size_t j = 0; j < ARRAY_LEN(k); j++)
			if (strstr(name, k[j].needle))
				return k[j].kind;
	}
	return "other";
}

static const char *frame_name(const ana_profile *p, const ana_stack *st, uint32_t i)
{
	return p->names[p->smp.funcs[p->smp.locs[st->locs[i]].func].name];
}

/* The innermost frame of the program itself (its executable), or UINT32_MAX. */
static uint32_t program_frame(const ana_profile *p, const ana_stack *st, uint32_t proc)
{
	const char *exe = p->procs[proc].file.exe;
	for (uint32_t i = st->n; exe && i-- > 0;) {
		const ana_func *fn = &p->smp.funcs[p->smp.locs[st->locs[i]].func];
		if (!strcmp(p->names[fn->module], exe) && strcmp(p->names[fn->name], "[unknown]"))
			return i;
	}
	return UINT32_MAX;
}

/* The call the program made that blocked: the frame below its innermost own frame
 * (pthread_mutex_lock rather than the futex_wait inside it), without the symbol version
 * and the leading underscores of libc's internal aliases; the leaf when unknown. */
static void blocking_call(const ana_profile *p, const ana_stack *st, uint32_t prog, char *buf, size_t n)
{
	uint32_t i = prog != UINT32_MAX && prog + 1 < st->n ? prog + 1 : st->n - 1;
	const char *name = frame_name(p, st, i);
	while (*name == '_' && name[1])
		name++;
	snprintf(buf, n, "%.*s", (int)strcspn(name, "@"), name);
}

static void offcpu_finding(ana_profile *p, uint32_t t, uint64_t cpu, uint64_t off, const uint8_t *data)
{
	const ana_sampling *s = &p->smp;
	const ana_thread *th = &p->threads[t];
	const ana_process *pr = &p->procs[th->process];
	double blocked = (double)off * (double)s->period_ns, pct = 100.0 * (double)off / (double)(cpu + off);
	double wall_pct = pr->wall_ns ? 100 * blocked / (double)pr->wall_ns : 0;
	/* the heaviest blocking stack and the region it blocks in */
	uint32_t top = ANA_NONE, node = ANA_NONE;
	uint64_t top_w = 0;
	uint64_t *w = calloc(s->nstacks ? s->nstacks : 1, sizeof *w);
	if (!w)
		return;
	for (size_t i = 0; i < s->nsamples; i++) {
		const ana_sample *x = &s->samples[i];
		if (x->thread != t || x->kind != ANA_OFFCPU || !should_compute(p, x) || data[x->stack])
			continue;
		if ((w[x->stack] += x->weight) > top_w) {
			top_w = w[x->stack];
			top = x->stack;
			node = x->node;
		}
	}
	free(w);
	if (top == ANA_NONE || !p->smp.stacks[top].n)
		return;
	ana_severity sev = pct >= 60 && wall_pct >= 25 ? ANA_HIGH : wall_pct >= 10 ? ANA_MEDIUM : ANA_LOW;
	ana_finding *f = ana_finding_add(p, "off_cpu", sev);
	if (!f)
		return;
	const ana_stack *st = &p->smp.stacks[top];
	uint32_t prog = program_frame(p, st, th->process);
	const char *caller = prog != UINT32_MAX ? frame_name(p, st, prog) : "code outside the program";
	const char *kind = block_kind(p, st), *region = node != ANA_NONE ? p->nodes[node].path : NULL;
	char a[32], tname[96], call[256];
	blocking_call(p, st, prog, call, sizeof call);
	const char *leaf = call;
	snprintf(tname, sizeof tname, "thread %llu%s%s%s", (unsigned long long)th->tid, th->name && *th->name ? " (" : "",
		 th->name ? th->name : "", th->name && *th->name ? ")" : "");
	f->subject = ana_strf("%s blocked %.0f%% of its working time in %s", tname, pct, leaf);
	f->evidence = ana_strf("%s of pid %llu was off CPU in %llu of %llu wall-clock samples taken while it should compute "
			       "(inside regions or steps): %.1f%%, about %s, %.1f%% of its process's wall time; the heaviest "
			       "blocking stack (%.0f%% of them) waits in %s, called from %s%s%s",
			       tname, (unsigned long long)pr->file.pid, (unsigned long long)off, (unsigned long long)(cpu + off), pct,
			       ana_fmt_ns(blocked, a, sizeof a), wall_pct, 100.0 * (double)top_w / (double)off, leaf, caller,
			       region ? " in region " : "", region ? region : "");
	ana_finding_num(f, "offcpu_pct", pct);
	ana_finding_num(f, "offcpu_samples", (double)off);
	ana_finding_num(f, "samples", (double)(cpu + off));
	ana_finding_num(f, "blocked_ns", blocked);
	ana_finding_num(f, "wall_pct", wall_pct);
	ana_finding_num(f, "tid", (double)th->tid);
	ana_finding_num(f, "stack_pct", 100.0 * (double)top_w / (double)off);
	f->expected_gain_pct = wall_pct > 100 ? 100 : wall_pct;
	const char *in = region ? region : caller;
	if (!strcmp(kind, "lock"))
		f->recommendation = ana_strf("%s waits for a lock in %s (%s): shorten the critical section, split the lock "
					     "(per thread or per shard data, reduce-at-the-end) or use lock-free updates. Not "
					     "waiting saves up to %.1f%% of the run.", tname, in, leaf, f->expected_gain_pct);
	else if (!strcmp(kind, "handover") || !strcmp(kind, "join"))
		f->recommendation = ana_strf("%s waits for another thread in %s (%s): the work it waits for is the "
					     "bottleneck. Speed that producer up or add producers, queue more work ahead, or "
					     "give this thread other work meanwhile. Up to %.1f%% of the run.",
					     tname, in, leaf, f->expected_gain_pct);
	else if (!strcmp(kind, "io"))
		f->recommendation = ana_strf("%s does blocking I/O in %s (%s): overlap it with the computation (a reader "
					     "or writer thread, asynchronous I/O, prefetching), read and write larger blocks, "
					     "or cache what is read again. Up to %.1f%% of the run.",
					     tname, in, leaf, f->expected_gain_pct);
	else if (!strcmp(kind, "sleep"))
		f->recommendation = ana_strf("%s sleeps in %s (%s) where it should compute: remove the sleep, or wait on "
					     "the event itself (a condition variable, a blocking read) instead of sleeping and "
					     "polling. Up to %.1f%% of the run.", tname, in, leaf, f->expected_gain_pct);
	else
		f->recommendation = ana_strf("%s blocks in %s (%s) where it should compute: make the call asynchronous or "
					     "move it off this thread, or do it less often. Up to %.1f%% of the run.",
					     tname, in, leaf, f->expected_gain_pct);
}

/* A stack with a data-loading function (ana_name_is_data): input_bound reports that wait. */
static int data_stack(const ana_profile *p, const ana_stack *st)
{
	for (uint32_t k = 0; k < st->n; k++)
		if (ana_name_is_data(frame_name(p, st, k), p->opt.data_regions))
			return 1;
	return 0;
}

void rule_off_cpu(ana_profile *p)
{
	const ana_sampling *s = &p->smp;
	if (!s->present || !s->all.samples[ANA_OFFCPU] || !s->period_ns || !p->nthreads)
		return;
	double thr = p->opt.offcpu_threshold_pct > 0 ? p->opt.offcpu_threshold_pct : 30;
	uint64_t *w = calloc((size_t)p->nthreads * 2, sizeof *w);
	uint8_t *data = calloc(s->nstacks ? s->nstacks : 1, 1);
	if (!w || !data) {
		free(w);
		free(data);
		return;
	}
	for (uint32_t i = 0; i < s->nstacks; i++)
		data[i] = (uint8_t)data_stack(p, &s->stacks[i]);
	for (size_t i = 0; i < s->nsamples; i++) {
		const ana_sample *x = &s->samples[i];
		if (x->thread < p->nthreads && should_compute(p, x) && !(x->kind == ANA_OFFCPU && data[x->stack]))
			w[(size_t)x->thread * 2 + (x->kind == ANA_OFFCPU)] += x->weight;
	}
	for (int fired = 0; fired < OFFCPU_MAX;) {
		/* the thread with the most blocked time that passes the thresholds */
		uint32_t best = ANA_NONE;
		for (uint32_t t = 0; t < p->nthreads; t++) {
			uint64_t cpu = w[t * 2], off = w[t * 2 + 1];
			const ana_process *pr = &p->procs[p->threads[t].process];
			double blocked = (double)off * (double)s->period_ns;
			if (cpu + off < OFFCPU_MIN_SAMPLES || 100.0 * (double)off < thr * (double)(cpu + off) ||
			    blocked < 0.05 * (double)pr->wall_ns)
				continue;
			if (best == ANA_NONE || off > w[best * 2 + 1])
				best = t;
		}
		if (best == ANA_NONE)
			break;
		offcpu_finding(p, best, w[best * 2], w[best * 2 + 1], data);
		w[best * 2] = w[best * 2 + 1] = 0;
		fired++;
	}
	free(w);
	free(data);
}

/*
 * parallel_wait: the threads of an OpenMP team (GCC's libgomp, LLVM's libomp, Intel's
 * libiomp5) wait in the runtime instead of computing. A sample waits when its innermost
 * frame outside the C library is the runtime's: spinning at a barrier on the CPU, or
 * blocked in its futex (wall-clock samples). An OpenMP loop whose iterations differ in cost
 * under schedule(static) showed only as "hot_function: libgomp.so.1+0x1f780 ... make
 * start_thread call it less often". Per process, over the threads that ever ran the
 * runtime's code (the team), from PARALLEL_WAIT_MIN_PCT of their samples: LOW, MEDIUM from
 * 15 %, HIGH from 30 %.
 */
#define PARALLEL_WAIT_MIN_PCT 10
#define PARALLEL_WAIT_MIN_SAMPLES 100


void rule_parallel_wait(ana_profile *p)
{
	const ana_sampling *s = &p->smp;
	if (!s->present || !p->nthreads || !s->nstacks || !s->period_ns)
		return;
	/* per stack: 1 a frame of the runtime, 2 waiting in it; the outlined function (the
	 * frame just inside the runtime's outermost frame: main._omp_fn.0) */
	uint8_t *cls = calloc(s->nstacks, 1);
	uint32_t *fn_of = malloc(s->nstacks * sizeof *fn_of);
	uint64_t *w = calloc((size_t)p->nthreads * 3, sizeof *w); /* all, waiting, in the top outlined function */
	uint64_t *fw = calloc(s->nfuncs ? s->nfuncs : 1, sizeof *fw);
	if (!cls || !fn_of || !w || !fw)
		goto out;
	for (uint32_t i = 0; i < s->nstacks; i++) {
		const ana_stack *st = &s->stacks[i];
		fn_of[i] = ANA_NONE;
		for (uint32_t k = 0; k < st->n; k++) { /* outermost first */
			const ana_func *fn = &s->funcs[s->locs[st->locs[k]].func];
			if (openmp_runtime(p->names[fn->module])) {
				cls[i] |= 1;
				if (fn_of[i] == ANA_NONE && k + 1 < st->n) {
					uint32_t in = s->locs[st->locs[k + 1]].func;
					if (!openmp_runtime(p->names[s->funcs[in].module]) && !below_runtime(p->names[s->funcs[in].module]))
						fn_of[i] = in;
				}
			}
		}
		for (uint32_t k = st->n; (cls[i] & 1) && k-- > 0;) { /* innermost first */
			const char *mod = p->names[s->funcs[s->locs[st->locs[k]].func].module];
			if (below_runtime(mod))
				continue;
			if (openmp_runtime(mod))
				cls[i] |= 2;
			break;
		}
	}
	uint8_t *team = calloc(p->nthreads, 1);
	if (!team)
		goto out;
	for (size_t i = 0; i < s->nsamples; i++) {
		const ana_sample *x = &s->samples[i];
		if (x->thread >= p->nthreads)
			continue;
		team[x->thread] |= cls[x->stack] & 1;
		w[(size_t)x->thread * 3] += x->weight;
		if (cls[x->stack] & 2)
			w[(size_t)x->thread * 3 + 1] += x->weight;
	}
	for (uint32_t proc = 0; proc < p->nprocs; proc++) {
		uint64_t all = 0, wait = 0, spin = 0, blocked = 0;
		uint32_t n = 0, top = ANA_NONE;
		for (uint32_t t = 0; t < p->nthreads; t++)
			if (team[t] && p->threads[t].process == proc) {
				n++;
				all += w[(size_t)t * 3];
				wait += w[(size_t)t * 3 + 1];
			}
		if (n < 2 || all < PARALLEL_WAIT_MIN_SAMPLES || 100 * wait < PARALLEL_WAIT_MIN_PCT * all)
			continue;
		/* this process's outlined function with the most work (another process's may differ) */
		memset(fw, 0, (s->nfuncs ? s->nfuncs : 1) * sizeof *fw);
		for (size_t i = 0; i < s->nsamples; i++) {
			const ana_sample *x = &s->samples[i];
			if (x->thread < p->nthreads && team[x->thread] && p->threads[x->thread].process == proc &&
			    !(cls[x->stack] & 2) && fn_of[x->stack] != ANA_NONE)
				fw[fn_of[x->stack]] += x->weight;
		}
		for (uint32_t f = 0; f < s->nfuncs; f++)
			if (fw[f] && (top == ANA_NONE || fw[f] > fw[top]))
				top = f;
		/* per thread: waiting on and off the CPU, and the work in the top outlined function */
		for (size_t i = 0; i < s->nsamples; i++) {
			const ana_sample *x = &s->samples[i];
			if (x->thread >= p->nthreads || !team[x->thread] || p->threads[x->thread].process != proc)
				continue;
			if (cls[x->stack] & 2)
				*(x->kind == ANA_OFFCPU ? &blocked : &spin) += x->weight;
			else if (top != ANA_NONE && fn_of[x->stack] == top)
				w[(size_t)x->thread * 3 + 2] += x->weight;
		}
		uint32_t most = ANA_NONE, least = ANA_NONE;
		for (uint32_t t = 0; t < p->nthreads; t++) {
			if (!team[t] || p->threads[t].process != proc)
				continue;
			if (most == ANA_NONE || w[(size_t)t * 3 + 2] > w[(size_t)most * 3 + 2])
				most = t;
			if (least == ANA_NONE || w[(size_t)t * 3 + 2] < w[(size_t)least * 3 + 2])
				least = t;
		}
		double pct = 100.0 * (double)wait / (double)all, per = (double)s->period_ns;
		ana_finding *f = ana_finding_add(p, "parallel_wait", pct >= 30 ? ANA_HIGH : pct >= 15 ? ANA_MEDIUM : ANA_LOW);
		if (!f)
			break;
		const char *runtime = "the OpenMP runtime";
		for (uint32_t m = 0; m < s->nmodules; m++)
			if (s->modules[m].process == proc && openmp_runtime(p->names[s->modules[m].path]))
				runtime = base_name(p->names[s->modules[m].path]);
		char a[32], b[32], c[32], d[32], where[600] = "", work[400] = "";
		if (top != ANA_NONE) {
			const ana_func *tf = &s->funcs[top];
			const char *file = NULL;
			uint32_t line = 0;
			for (uint32_t k = 0; k < s->nlocs && !file; k++)
				if (s->locs[k].func == top && s->locs[k].file != ANA_NONE && s->locs[k].line) {
					file = p->names[s->locs[k].file];
					line = s->locs[k].line;
				}
			if (file)
				snprintf(where, sizeof where, "%s (%s:%u)", p->names[tf->name], base_name(file), line);
			else
				snprintf(where, sizeof where, "%s", p->names[tf->name]);
			snprintf(work, sizeof work, "; in %s, thread %llu computed %s and thread %llu %s", where,
				 (unsigned long long)p->threads[most].tid, ana_fmt_ns((double)w[(size_t)most * 3 + 2] * per, c, sizeof c),
				 (unsigned long long)p->threads[least].tid, ana_fmt_ns((double)w[(size_t)least * 3 + 2] * per, d, sizeof d));
		}
		f->subject = ana_strf("pid %llu: OpenMP threads wait %.0f%% of their time in %s",
				      (unsigned long long)p->procs[proc].file.pid, pct, runtime);
		f->evidence = ana_strf("the %u threads of pid %llu that ran %s were sampled waiting in it in %llu of %llu samples "
				       "(%.1f%%): spinning on the CPU %s, blocked %s%s%s",
				       n, (unsigned long long)p->procs[proc].file.pid, runtime, (unsigned long long)wait,
				       (unsigned long long)all, pct, ana_fmt_ns((double)spin * per, a, sizeof a),
				       ana_fmt_ns((double)blocked * per, b, sizeof b),
				       s->all.samples[ANA_OFFCPU] ? "" : " (CPU samples: blocked time is not seen; --sample=wall sees it)",
				       work);
		ana_finding_num(f, "wait_pct", pct);
		ana_finding_num(f, "wait_samples", (double)wait);
		ana_finding_num(f, "samples", (double)all);
		ana_finding_num(f, "spin_ns", (double)spin * per);
		ana_finding_num(f, "blocked_ns", (double)blocked * per);
		ana_finding_num(f, "threads", n);
		if (top != ANA_NONE) {
			ana_finding_num(f, "most_work_ns", (double)w[(size_t)most * 3 + 2] * per);
			ana_finding_num(f, "least_work_ns", (double)w[(size_t)least * 3 + 2] * per);
		}
		f->expected_gain_pct = pct;
		char mostly[640] = "";
		if (top != ANA_NONE)
			snprintf(mostly, sizeof mostly, " (mostly %s)", where);
		f->recommendation = ana_strf("The threads of the parallel regions%s wait for each other. When a parallel loop's "
					     "iterations differ in cost, schedule(static) (the default) gives each thread the "
					     "same number of them, not the same work: use schedule(dynamic, chunk) or "
					     "schedule(guided), or split the costly iterations. If the wait is between parallel "
					     "regions, the serial code there holds the team up: parallelise it, or join the "
					     "regions. Balanced, up to %.0f%% of the threads' time goes back to computing.",
					     mostly, pct);
	}
	free(team);
out:
	free(cls);
	free(fn_of);
	free(w);
	free(fw);
}

/*
 * gil_wait (docs/bottlenecks.md): the samples of Python threads waiting for the GIL (inside
 * CPython's take_gil without holding it: the [waiting for the GIL] frame), against all the
 * samples of Python threads. The waiting functions are the Python frames that called.
 */
#define GIL_WAIT_MIN_PCT 10.0
#define GIL_WAIT_MIN_SAMPLES 50
void rule_gil_wait(ana_profile *p)
{
	const ana_sampling *s = &p->smp;
	if (!s->py_samples || s->py_gil_wait < GIL_WAIT_MIN_SAMPLES)
		return;
	double pct = 100.0 * (double)s->py_gil_wait / (double)s->py_samples;
	if (pct < GIL_WAIT_MIN_PCT)
		return;
	/* who waits: the callers of the pseudo-function, in either view */
	const ana_sample_view *v = &s->all;
	const char *who = NULL;
	double who_pct = 0;
	for (unsigned k = 0; k < ANA_NKINDS && !who; k++)
		for (uint32_t i = 0; i < v->nfuncs[k]; i++) {
			const ana_hot_func *h = &v->funcs[k][i];
			if (strcmp(p->names[s->funcs[h->func].name], ANA_GIL_WAIT) || h->caller == ANA_NONE)
				continue;
			who = p->names[s->funcs[h->caller].name];
			who_pct = h->caller_pct;
			break;
		}
	ana_finding *f = ana_finding_add(p, "gil_wait", pct >= 30 ? ANA_HIGH : ANA_MEDIUM);
	if (!f)
		return;
	f->subject = strdup("the GIL");
	f->evidence = ana_strf("%.1f%% of the samples of Python threads (%llu of %llu) wait for the GIL (in CPython's "
			       "take_gil, not holding it)%s%s%s; %s",
			       pct, (unsigned long long)s->py_gil_wait, (unsigned long long)s->py_samples,
			       who ? "; most from " : "", who ? who : "", who ? "" : "",
			       s->mode == FMT_SAMPLE_WALL ? "wall-clock samples: blocked waits included"
							  : "CPU samples see only the waits that spin or hand over");
	ana_finding_num(f, "wait_pct", pct);
	ana_finding_num(f, "wait_samples", (double)s->py_gil_wait);
	ana_finding_num(f, "python_samples", (double)s->py_samples);
	if (who)
		ana_finding_num(f, "caller_pct", who_pct);
	f->recommendation = ana_strf("Python threads run Python code one at a time: the threads here take turns "
				     "instead of running together. Run CPU-bound Python work in processes "
				     "(multiprocessing, concurrent.futures.ProcessPoolExecutor; for input pipelines "
				     "a DataLoader with num_workers > 0), or do the work in calls that release the "
				     "GIL (numpy and torch operations on large arrays, file and socket I/O), so that "
				     "threads overlap. Up to %.0f%% of the Python threads' time is waiting.",
				     pct);
	f->expected_gain_pct = NAN;
}

static int cmp_finding(const void *a, const void *b)
{
	const ana_finding *x = a, *y = b;
	if (x->severity != y->severity)
		return (int)y->severity - (int)x->severity;
	return (y->expected_gain_pct > x->expected_gain_pct) - (y->expected_gain_pct < x->expected_gain_pct);
}

void ana_rules(ana_profile *p)
{
	rule_hot_operation(p);
	rule_hot_function(p);
	rule_memory_leak(p);
	rule_memory_steady_growth(p);
	rule_allocation_churn(p);
	rule_roofline(p);
	rule_rank_imbalance(p);
	rule_step_variance(p);
	rule_off_cpu(p);
	rule_parallel_wait(p);
	rule_input_bound(p);
	rule_gil_wait(p);
	ana_kernel_rules(p);
	ana_gpu_rules(p);
	ana_sys_rules(p);
	if (p->nfindings > 1)
		qsort(p->findings, p->nfindings, sizeof *p->findings, cmp_finding);
}

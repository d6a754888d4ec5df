/*
 * sys_rules.c - the rules on what the operating system does for the program
 * (docs/bottlenecks.md): kernel_time, on-CPU time spent in the kernel, named by the system
 * calls and page faults behind it; rss_above_heap, resident memory far above the live heap.
 * Called from ana_rules() (rules.c), over the same model.
 */
#include "analyze/aggregate.h"

#include <stdio.h>
#include <stdlib.h>

#define KERNEL_MIN_SAMPLES 50  /* on-CPU samples of the recording, for a share that is not noise */
#define KERNEL_MIN_IN 20       /* of them in the kernel */
#define KERNEL_PCT 25          /* the share from which kernel_time fires */
#define KERNEL_TOP 3           /* places named in the evidence */

/* Where a stack entered the kernel: its innermost function, and the innermost function
 * outside the system's libraries (the program's code that made the call). */
static void kernel_place(const ana_profile *p, const ana_stack *st, uint32_t *leaf, uint32_t *prog)
{
	const ana_sampling *s = &p->smp;
	*leaf = *prog = ANA_NONE;
	if (!st->n)
		return;
	*leaf = s->locs[st->locs[st->n - 1]].func;
	for (uint32_t k = st->n; k-- > 0;) {
		uint32_t fn = s->locs[st->locs[k]].func;
		if (!ana_module_is_system(p->names[s->funcs[fn].module])) {
			*prog = fn;
			return;
		}
	}
}

/*
 * kernel_time: the share of the on-CPU samples taken in the kernel (FMT_S_KERNEL: a system
 * call or a page fault; the ring source where kernel time is sampled) is KERNEL_PCT or more.
 * The evidence names the functions where the program entered the kernel, the program's
 * function that made each call, and the region with the most of that time; the advice
 * depends on whether page faults (the program's own instruction trapped) or calls into the
 * system's libraries dominate. fennec's own work ([fennec]) is left out.
 */
static void rule_kernel_time(ana_profile *p)
{
	const ana_sampling *s = &p->smp;
	if (!s->present || !s->period_ns || !s->nsamples)
		return;
	uint64_t cpu = 0, kern = 0, faults = 0;
	double *by_leaf = calloc(s->nfuncs + 1, sizeof *by_leaf);
	uint32_t *prog_of = malloc((s->nfuncs + 1) * sizeof *prog_of);
	double *by_node = calloc(p->nnodes + 1, sizeof *by_node);
	if (!by_leaf || !prog_of || !by_node)
		goto out;
	for (uint32_t i = 0; i < s->nfuncs; i++)
		prog_of[i] = ANA_NONE;
	for (size_t i = 0; i < s->nsamples; i++) {
		const ana_sample *x = &s->samples[i];
		if (x->kind != ANA_CPU)
			continue;
		cpu += x->weight;
		if (!x->kernel || x->stack >= s->nstacks)
			continue;
		uint32_t leaf, prog;
		kernel_place(p, &s->stacks[x->stack], &leaf, &prog);
		if (leaf == ANA_NONE || ana_module_is_fennec(p->names[s->funcs[leaf].module]))
			continue; /* fennec's own system calls: its cost, not the program's */
		kern += x->weight;
		by_leaf[leaf] += x->weight;
		if (prog_of[leaf] == ANA_NONE)
			prog_of[leaf] = prog;
		if (!ana_module_is_system(p->names[s->funcs[leaf].module]))
			faults += x->weight;
		if (x->node != ANA_NONE && x->node < p->nnodes)
			by_node[x->node] += x->weight;
	}
	if (cpu < KERNEL_MIN_SAMPLES || kern < KERNEL_MIN_IN)
		goto out;
	double pct = 100.0 * (double)kern / (double)cpu;
	if (pct < KERNEL_PCT)
		goto out;
	ana_finding *f = ana_finding_add(p, "kernel_time", pct > 50 ? ANA_HIGH : ANA_MEDIUM);
	if (!f)
		goto out;
	/* the top places, the hottest first */
	uint32_t top[KERNEL_TOP], ntop = 0;
	for (uint32_t i = 0; i < s->nfuncs; i++) {
		if (!by_leaf[i])
			continue;
		uint32_t k;
		if (ntop < KERNEL_TOP)
			k = ntop++;
		else if (by_leaf[i] > by_leaf[top[KERNEL_TOP - 1]])
			k = KERNEL_TOP - 1;
		else
			continue;
		for (; k > 0 && by_leaf[top[k - 1]] < by_leaf[i]; k--)
			top[k] = top[k - 1];
		top[k] = i;
	}
	char where[1024] = "";
	size_t n = 0;
	for (uint32_t k = 0; k < ntop && n < sizeof where; k++) {
		const ana_func *fn = &s->funcs[top[k]];
		int fault = !ana_module_is_system(p->names[fn->module]);
		uint32_t prog = prog_of[top[k]];
		int w = snprintf(where + n, sizeof where - n, "%s%.0f%% %s %s%s%s", k ? "; " : "",
				 100.0 * by_leaf[top[k]] / (double)kern, fault ? "page faults in" : "in",
				 p->names[fn->name], !fault && prog != ANA_NONE ? " called from " : "",
				 !fault && prog != ANA_NONE ? p->names[s->funcs[prog].name] : "");
		n += w > 0 ? (size_t)w : 0;
	}
	uint32_t node = ANA_NONE;
	for (uint32_t i = 0; i < p->nnodes; i++)
		if (by_node[i] && (node == ANA_NONE || by_node[i] > by_node[node]))
			node = i;
	double kern_ns = (double)kern * (double)s->period_ns, fault_pct = 100.0 * (double)faults / (double)kern;
	char a[32], region[600] = "";
	if (node != ANA_NONE)
		snprintf(region, sizeof region, "; most in region %s (%.0f%% of it)", p->nodes[node].path,
			 100.0 * by_node[node] / (double)kern);
	f->subject = ana_strf("%.0f%% of the CPU time in the kernel", pct);
	f->evidence = ana_strf("%.1f%% of the on-CPU samples (%llu of %llu, about %s) were taken in the kernel: "
			       "%s%s. Of that time %.0f%% is page faults of the program's own code (memory "
			       "touched for the first time) and %.0f%% system calls or faults in the system's "
			       "libraries",
			       pct, (unsigned long long)kern, (unsigned long long)cpu, ana_fmt_ns(kern_ns, a, sizeof a),
			       where, region, fault_pct, 100 - fault_pct);
	ana_finding_num(f, "kernel_pct", pct);
	ana_finding_num(f, "kernel_ns", kern_ns);
	ana_finding_num(f, "kernel_samples", (double)kern);
	ana_finding_num(f, "cpu_samples", (double)cpu);
	ana_finding_num(f, "fault_pct", fault_pct);
	if (fault_pct >= 50)
		f->recommendation = ana_strf("The kernel is mostly filling pages the program touches for the first time. "
					     "Reuse buffers across steps instead of allocating and freeing large blocks "
					     "(glibc gives blocks above its mmap threshold back to the kernel on free, so "
					     "each new one faults again: raise it, MALLOC_MMAP_THRESHOLD_=<bytes> or "
					     "mallopt(M_MMAP_THRESHOLD), and keep the heap's top, MALLOC_TOP_PAD_), "
					     "touch or map a buffer once with MAP_POPULATE, or use huge pages for large "
					     "arrays. If the resident memory keeps growing, see memory_leak and "
					     "rss_above_heap.");
	else
		f->recommendation = ana_strf("The kernel works for the library calls named above: system calls they make, "
					     "or pages they touch for the first time (an allocator growing its heap: "
					     "_int_malloc, brk, mmap). Make fewer calls: buffer small reads and writes "
					     "into larger ones, keep files, sockets and mappings open instead of "
					     "reopening them, wait on an event instead of polling; reuse memory instead "
					     "of allocating and freeing large blocks (MALLOC_TOP_PAD_ and "
					     "MALLOC_MMAP_THRESHOLD_ keep glibc from giving it back each time).");
	double wall = (double)p->wall_ns;
	f->expected_gain_pct = wall > 0 ? 100.0 * kern_ns / wall : pct;
	if (f->expected_gain_pct > 100)
		f->expected_gain_pct = 100;
out:
	free(by_leaf);
	free(prog_of);
	free(by_node);
}

#define RSS_MIN_EXCESS (128ull << 20) /* resident beyond heap and objects, for a finding */
#define RSS_FACTOR 3                  /* ... and at least this many times the live heap */

/* The bytes of the objects (executable, libraries) process `proc` mapped: at most what
 * their code and data can hold of its RSS. */
static uint64_t mapped_objects(const ana_profile *p, uint32_t proc)
{
	const fmt_file *f = &p->procs[proc].file;
	uint64_t b = 0;
	for (size_t i = 0; i < f->nmodules; i++)
		for (uint32_t k = 0; k < f->modules[i].nsegs; k++)
			if (f->modules[i].segs[k].end > f->modules[i].segs[k].start)
				b += f->modules[i].segs[k].end - f->modules[i].segs[k].start;
	return b;
}

/*
 * rss_above_heap: at the point of its heap timeline where a process's RSS is highest, the
 * RSS less its live heap and less everything its loaded objects could hold is at least
 * RSS_MIN_EXCESS and RSS_FACTOR times the live heap: memory that neither malloc's live
 * blocks nor code explain (the allocator's free lists between live blocks, mappings made
 * outside malloc). One finding per process.
 */
static void rule_rss_above_heap(ana_profile *p)
{
	const ana_memory *m = &p->mem;
	if (!m->present || !m->npoints)
		return;
	for (uint32_t proc = 0; proc < p->nprocs; proc++) {
		const ana_mem_point *top = NULL;
		uint64_t heap_peak = 0;
		for (size_t i = 0; i < m->npoints; i++) {
			const ana_mem_point *x = &m->points[i];
			if (x->process != proc)
				continue;
			if (x->live_bytes > heap_peak)
				heap_peak = x->live_bytes;
			if (x->rss_bytes && (!top || x->rss_bytes > top->rss_bytes))
				top = x;
		}
		if (!top)
			continue;
		if (m->peak_process == proc && m->peak_usable_bytes > heap_peak)
			heap_peak = m->peak_usable_bytes;
		uint64_t objs = mapped_objects(p, proc), rss = top->rss_bytes, live = top->live_bytes;
		if (rss < live + objs)
			continue;
		uint64_t excess = rss - live - objs;
		if (excess < RSS_MIN_EXCESS || excess < RSS_FACTOR * live)
			continue;
		ana_finding *f = ana_finding_add(p, "rss_above_heap", excess > 8 * live ? ANA_HIGH : ANA_MEDIUM);
		if (!f)
			return;
		char a[32], b[32], c[32], d[32], e[32];
		uint64_t pid = p->procs[proc].file.pid;
		f->subject = ana_strf("process %llu: RSS %.0fx its live heap", (unsigned long long)pid,
				      live ? (double)rss / (double)live : (double)rss);
		f->evidence = ana_strf("process %llu's resident memory peaked at %s while its live heap was %s; its "
				       "executable and libraries map %s in all, so at least %s is neither heap nor "
				       "code. The heap's own peak was %s",
				       (unsigned long long)pid, ana_fmt_bytes((double)rss, a, sizeof a),
				       ana_fmt_bytes((double)live, b, sizeof b), ana_fmt_bytes((double)objs, c, sizeof c),
				       ana_fmt_bytes((double)excess, d, sizeof d), ana_fmt_bytes((double)heap_peak, e, sizeof e));
		ana_finding_num(f, "pid", (double)pid);
		ana_finding_num(f, "rss_bytes", (double)rss);
		ana_finding_num(f, "live_bytes", (double)live);
		ana_finding_num(f, "objects_bytes", (double)objs);
		ana_finding_num(f, "excess_bytes", (double)excess);
		ana_finding_num(f, "heap_peak_bytes", (double)heap_peak);
		ana_finding_num(f, "t_ns", (double)top->t_ns);
		int fell = heap_peak > 2 * live && heap_peak - live >= excess / 2;
		f->recommendation = ana_strf("%s Give freed memory back (malloc_trim(0) after freeing a large set; fewer "
					     "arenas with MALLOC_ARENA_MAX=2 for many threads), keep long-lived blocks "
					     "apart from short-lived ones (allocate what lives long first, or from a pool "
					     "of its own), or use an allocator that returns memory (jemalloc, tcmalloc). "
					     "Memory mapped outside malloc (mmap'd files or anonymous maps, thread stacks, "
					     "a GPU driver's pinned memory, another allocator's arenas) counts here too: "
					     "record with --memory-mmap to see the mappings.",
					     fell ? "The heap fell from its peak but the RSS did not: glibc keeps freed "
						    "chunks that lie between live ones, and returns only the top of the "
						    "heap to the kernel (fragmentation)."
						  : "The live heap does not explain the resident memory.");
		f->expected_gain_bytes = (double)excess;
	}
}

double ana_func_kernel_pct(const ana_profile *p, uint32_t func)
{
	const ana_sampling *s = &p->smp;
	uint64_t self = 0, kern = 0;
	for (size_t i = 0; i < s->nsamples; i++) {
		const ana_sample *x = &s->samples[i];
		if (x->kind != ANA_CPU || x->stack >= s->nstacks || !s->stacks[x->stack].n)
			continue;
		const ana_stack *st = &s->stacks[x->stack];
		if (s->locs[st->locs[st->n - 1]].func != func)
			continue;
		self += x->weight;
		kern += x->kernel ? x->weight : 0;
	}
	return self ? 100.0 * (double)kern / (double)self : 0;
}

double *ana_node_kernel_ns(const ana_profile *p)
{
	const ana_sampling *s = &p->smp;
	double *w = calloc(p->nnodes + 1, sizeof *w);
	if (!w)
		return NULL;
	for (size_t i = 0; i < s->nsamples; i++) {
		const ana_sample *x = &s->samples[i];
		if (x->kind != ANA_CPU || !x->kernel)
			continue;
		for (uint32_t n = x->node; n != ANA_NONE && n < p->nnodes; n = p->nodes[n].parent)
			w[n] += (double)x->weight * (double)s->period_ns;
	}
	return w;
}

void ana_kernel_rules(ana_profile *p)
{
	rule_kernel_time(p);
	rule_rss_above_heap(p);
}

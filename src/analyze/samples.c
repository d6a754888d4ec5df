/*
 * samples.c - sampled call stacks in the analysis model. While the reader streams a file,
 * each sample is kept with its raw stack and region path interned per process; at the end
 * every process's stacks are symbolised (samples_symbols.c, src/symbol/), each distinct
 * address once, into locations, functions and stacks shared by the whole recording, the
 * samples are put in time order with their threads and region nodes, the views that the
 * renderers show are aggregated (samples_views.c: hot functions and lines, the call tree,
 * per region and per thread numbers), and what limits them (dropped samples, cut stacks,
 * modules without symbols, a low rate) is said in warnings. What the files share is
 * samples.h. Design notes: docs/internals/symbol.md.
 */
#include "analyze/aggregate.h"
#include "symbol/symbol.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "analyze/samples.h"

/* ---- raw samples, kept while reading ---- */

static uint64_t hash_u64s(const uint64_t *v, size_t n, uint64_t h)
{
	for (size_t i = 0; i < n; i++)
		h = cm_mix64(h ^ v[i]) + 0x9e3779b97f4a7c15ull;
	return h;
}

typedef struct sstate {
	pstate *ps;           /* per process */
	size_t nps, ps_cap;
} sstate;

/* The process state of `proc`, made on first use; NULL when out of memory. */
static pstate *pstate_of(ana_profile *p, uint32_t proc)
{
	sstate *ss = p->smp.priv;
	if (!ss && !(ss = p->smp.priv = calloc(1, sizeof *ss)))
		return NULL;
	if (ana_grow(&ss->ps, &ss->ps_cap, proc, sizeof *ss->ps) < 0)
		return NULL;
	if (proc >= ss->nps)
		ss->nps = proc + 1;
	return &ss->ps[proc];
}

/* Intern a raw stack of the process in *sid. Returns 0 or FENNEC_ENOMEM. */
static int intern_raw(pstate *ps, const fmt_file *f, const uint64_t *frames, uint32_t n, uint8_t sflags, uint32_t *sid_out)
{
	/* New modules: does one replace an earlier one? Then an epoch ends. */
	for (; ps->nmods_seen < f->nmodules; ps->nmods_seen++) {
		size_t j = ps->nmods_seen;
		for (size_t i = 0; i < j; i++)
			if (mods_overlap(&f->modules[i], &f->modules[j])) {
				if (ana_grow(&ps->epoch_end, &ps->epoch_cap, ps->nepochs, sizeof *ps->epoch_end) < 0)
					return FENNEC_ENOMEM;
				ps->epoch_end[ps->nepochs++] = j;
				ps->epoch++;
				break;
			}
	}
	uint64_t h = hash_u64s(frames, n, (uint64_t)ps->epoch << 8 | sflags);
	if (itab_reserve(&ps->stab) < 0)
		return FENNEC_ENOMEM;
	size_t slot = h & (ps->stab.cap - 1);
	uint32_t sid = ANA_NONE;
	for (; ps->stab.id[slot] != UINT32_MAX; slot = (slot + 1) & (ps->stab.cap - 1)) {
		if (ps->stab.h[slot] != h)
			continue;
		rstack *r = &ps->st[ps->stab.id[slot]];
		if (r->n == n && r->epoch == ps->epoch && r->flags == sflags &&
		    !memcmp(ps->frames + r->off, frames, n * sizeof *frames)) {
			sid = ps->stab.id[slot];
			break;
		}
	}
	if (sid == ANA_NONE) {
		if (ps->nst >= UINT32_MAX - 1 || ana_grow(&ps->st, &ps->st_cap, ps->nst, sizeof *ps->st) < 0 ||
		    (n && ana_grow(&ps->frames, &ps->frames_cap, ps->nframes + n, sizeof *ps->frames) < 0))
			return FENNEC_ENOMEM;
		sid = (uint32_t)ps->nst++;
		ps->st[sid] = (rstack){ps->nframes, n, ps->epoch, sflags, ANA_NONE, 0};
		if (n)
			memcpy(ps->frames + ps->nframes, frames, n * sizeof *frames);
		ps->nframes += n;
		ps->stab.id[slot] = sid;
		ps->stab.h[slot] = h;
		ps->stab.n++;
	}
	*sid_out = sid;
	return 0;
}

static uint64_t py_tag(uint64_t v);

int ana_samples_intern_stack(ana_profile *p, uint32_t proc, const fmt_file *f, const uint64_t *frames, uint32_t n,
			     const uint64_t *py, uint32_t npy, int truncated, uint32_t *handle)
{
	pstate *ps = pstate_of(p, proc);
	if (!ps)
		return FENNEC_ENOMEM;
	if (!py || !npy)
		return intern_raw(ps, f, frames, n, truncated ? FMT_S_TRUNCATED : 0, handle);
	uint64_t *both = malloc((n + npy) * sizeof *both);
	if (!both)
		return FENNEC_ENOMEM;
	memcpy(both, frames, n * sizeof *both);
	for (uint32_t i = 0; i < npy; i++)
		both[n + i] = py_tag(py[i]);
	int rc = intern_raw(ps, f, both, n + npy, (truncated ? FMT_S_TRUNCATED : 0) | FMT_S_PYTHON, handle);
	free(both);
	return rc;
}

uint32_t ana_samples_stack_of(const ana_profile *p, uint32_t proc, uint32_t handle)
{
	const ana_sampling *s = &p->smp;
	return proc < s->nrawmap && handle < s->rawmap[proc].n ? s->rawmap[proc].stack[handle] : ANA_NONE;
}

/*
 * Whether n cut samples of `taken` are worth a warning: at least 1 % of them. A cut sample
 * only lowers the totals of the functions outside its cut by its share, and the counts
 * stay in the summary's line and JSON's `samples.truncated`; one sample of 194 cut where
 * the stack grew into a new page read as a defect to fix.
 */
static int worth_warning(uint64_t n, uint64_t taken)
{
	return n && n * 100 >= taken;
}

/* v as a Python frame of a raw stack (PY_TAG, samples.h). */
static uint64_t py_tag(uint64_t v)
{
	uint64_t line = fmt_pyframe_line(v);
	return PY_TAG | (uint64_t)fmt_pyframe_entry(v) << 55 | (uint64_t)(fmt_pyframe_code(v) & 0x7fffffffu) << 24 |
	       (line < 0xffffff ? line : 0xffffff);
}

int ana_samples_event(ana_profile *p, uint32_t proc, const fmt_file *f, const fmt_event *ev)
{
	pstate *ps = pstate_of(p, proc);
	if (!ps)
		return FENNEC_ENOMEM;
	uint32_t sid;
	const uint64_t *frames = ev->frames;
	uint32_t nframes = ev->nframes;
	uint64_t both[2 * FMT_MAX_FRAMES];
	if (ev->flags & FMT_S_PYTHON) {
		/* the Python frames after the native ones, tagged (py_tag) */
		memcpy(both, ev->frames, nframes * sizeof *both);
		for (uint32_t i = 0; i < ev->npy && nframes < 2 * FMT_MAX_FRAMES; i++)
			both[nframes++] = py_tag(ev->pyframes[i]);
		frames = both;
		p->smp.py_samples += (uint64_t)ev->i;
		if (ev->flags & FMT_S_GIL)
			p->smp.py_gil += (uint64_t)ev->i;
		if (ev->flags & FMT_S_PYCUT)
			p->smp.py_cut += (uint64_t)ev->i;
	}
	if (intern_raw(ps, f, frames, nframes,
		       ev->flags & (FMT_S_EXACT_PC | FMT_S_TRUNCATED | FMT_S_PYTHON | FMT_S_GIL | FMT_S_PYCUT), &sid))
		return FENNEC_ENOMEM;
	ps->st[sid].count++;
	if ((ev->flags & FMT_S_TRUNCATED) && ev->nframes < f->sample_depth)
		p->smp.truncated_short++;
	/* Intern the region path. */
	uint32_t pid = ANA_NONE;
	if (ev->nregions) {
		uint64_t ph = 1469598103934665603ull;
		for (uint32_t i = 0; i < ev->nregions; i++)
			ph = cm_mix64(ph ^ ev->regions[i]) + i;
		if (itab_reserve(&ps->ptab) < 0)
			return FENNEC_ENOMEM;
		size_t slot = ph & (ps->ptab.cap - 1);
		for (; ps->ptab.id[slot] != UINT32_MAX; slot = (slot + 1) & (ps->ptab.cap - 1)) {
			if (ps->ptab.h[slot] != ph)
				continue;
			rpath *r = &ps->rp[ps->ptab.id[slot]];
			if (r->n == ev->nregions && !memcmp(ps->sites + r->off, ev->regions, ev->nregions * sizeof *ev->regions)) {
				pid = ps->ptab.id[slot];
				break;
			}
		}
		if (pid == ANA_NONE) {
			if (ana_grow(&ps->rp, &ps->rp_cap, ps->nrp, sizeof *ps->rp) < 0 ||
			    ana_grow(&ps->sites, &ps->sites_cap, ps->nsites + ev->nregions, sizeof *ps->sites) < 0)
				return FENNEC_ENOMEM;
			pid = (uint32_t)ps->nrp++;
			ps->rp[pid] = (rpath){ps->nsites, ev->nregions, ANA_NONE};
			if (ev->nregions) /* ps->sites and ev->regions may be NULL then */
				memcpy(ps->sites + ps->nsites, ev->regions, ev->nregions * sizeof *ev->regions);
			ps->nsites += ev->nregions;
			ps->ptab.id[slot] = pid;
			ps->ptab.h[slot] = ph;
			ps->ptab.n++;
		}
	}
	if (ana_grow(&ps->s, &ps->s_cap, ps->ns, sizeof *ps->s) < 0)
		return FENNEC_ENOMEM;
	unsigned kind = (ev->flags & FMT_S_KIND_MASK) == FMT_S_OFFCPU ? ANA_OFFCPU : ANA_CPU;
	ps->s[ps->ns++] = (rsample){ev->ticks, ev->tid, ev->u, sid, pid,
				    ev->i > UINT32_MAX ? UINT32_MAX : (uint32_t)ev->i, (uint8_t)kind,
				    (uint8_t)!!(ev->flags & FMT_S_KERNEL)};
	return 0;
}

static void pstate_free(pstate *ps)
{
	free(ps->s);
	free(ps->st);
	free(ps->frames);
	itab_free(&ps->stab);
	free(ps->rp);
	free(ps->sites);
	itab_free(&ps->ptab);
	free(ps->epoch_end);
	memset(ps, 0, sizeof *ps);
}

void ana_samples_discard(ana_profile *p, uint32_t proc)
{
	sstate *ss = p->smp.priv;
	if (ss && proc < ss->nps)
		pstate_free(&ss->ps[proc]);
}

static void sstate_free(ana_profile *p)
{
	sstate *ss = p->smp.priv;
	if (!ss)
		return;
	for (size_t i = 0; i < ss->nps; i++)
		pstate_free(&ss->ps[i]);
	free(ss->ps);
	free(ss);
	p->smp.priv = NULL;
}

/* ---- the finish: samples in time order, threads, warnings ---- */

/* The region node of a path of site ids: the deepest node of the path that exists (a
 * region whose begin was dropped has none; its samples go to its parent). */
uint32_t ana_path_node(ana_profile *p, const fmt_file *f, const uint32_t *sites, uint32_t n)
{
	uint32_t node = ANA_NONE;
	for (uint32_t i = 0; i < n; i++) {
		uint32_t id = sites[i];
		const char *nm = id < f->nsites && f->sites[id].defined && f->sites[id].name ? f->sites[id].name : NULL;
		if (!nm)
			break;
		uint32_t name = ana_intern(p, nm);
		uint32_t next = name == ANA_NONE ? ANA_NONE : ana_node_find(p, node, name);
		if (next == ANA_NONE)
			break;
		node = next;
	}
	return node;
}

/* The thread of `tid` in process `proc`: one that used the API, else a new entry named
 * from the file's THREAD or TASKS records. */
static uint32_t thread_for(ana_profile *p, kmap *tids, uint32_t proc, const fmt_file *f, uint64_t tid)
{
	int isnew;
	uint64_t *v = kmap_slot(tids, tid, &isnew);
	if (!v)
		return ANA_NONE;
	if (!isnew)
		return (uint32_t)*v;
	uint32_t index = UINT32_MAX;
	const char *name = NULL;
	for (uint32_t i = 0; i < f->nthreads; i++)
		if (f->threads[i].known && f->threads[i].tid == tid) {
			index = i;
			name = f->threads[i].name;
		}
	for (size_t i = 0; i < f->ntasks && !name; i++)
		if (f->tasks[f->ntasks - 1 - i].tid == tid)
			name = f->tasks[f->ntasks - 1 - i].name; /* its latest name */
	size_t cap = p->threads_cap;
	if (ana_grow(&p->threads, &cap, p->nthreads, sizeof *p->threads) < 0)
		return ANA_NONE;
	p->threads_cap = (uint32_t)cap;
	ana_thread *t = &p->threads[p->nthreads];
	memset(t, 0, sizeof *t);
	t->process = proc;
	t->index = index;
	t->tid = tid;
	t->name = name ? name : "";
	*v = p->nthreads;
	return p->nthreads++;
}

static int cmp_sample(const void *a, const void *b)
{
	const ana_sample *x = a, *y = b;
	if (x->t_ns != y->t_ns)
		return (x->t_ns > y->t_ns) - (x->t_ns < y->t_ns);
	return (x->thread > y->thread) - (x->thread < y->thread);
}

/* Processes by CPU, the most first, in file order among equals. */
struct proc_cpu {
	uint64_t cpu;
	uint32_t i;
};

static int cmp_proc_cpu(const void *a, const void *b)
{
	const struct proc_cpu *x = a, *y = b;
	return x->cpu != y->cpu ? (x->cpu < y->cpu ? 1 : -1) : (x->i > y->i) - (x->i < y->i);
}

/* The finish's warnings: sampling on and no samples, dropped samples, stacks cut short,
 * modules without symbols (bad), an on-CPU rate (cpu_samples) below the one requested. */
static void finish_warnings(ana_profile *p, const badmod *bad, size_t nbad, uint64_t cpu_samples)
{
	ana_sampling *s = &p->smp;
	if (s->mode != FMT_SAMPLE_OFF && !s->taken && !s->nsamples && s->period_ns) {
		/* Sampling was on and nothing came: say why, not just "0 Hz". */
		/* CPU mode: the program's CPU, less the writer's (fennec's own threads are never
		 * sampled: under ASan an empty program's 15.6 ms of CPU was most of it fennec's) */
		double cpu = (double)(p->cpu_user_ns + p->cpu_sys_ns), own = (double)p->collector_cpu_ns;
		double basis = s->mode == FMT_SAMPLE_WALL ? (double)p->wall_ns : cpu > own ? cpu - own : 0;
		double due = basis / (double)s->period_ns;
		char a[32], b[32];
		if (due >= 10) {
			s->none_why = "the sampling signal reached no thread (a thread that blocks every signal is never sampled)";
			ana_warn(p, "no samples where about %.0f were due (%s mode, one every %s of %s time, %s of it): the "
				    "sampling signal reached no thread; a thread that blocks every signal (sigprocmask or "
				    "pthread_sigmask of a full set) cannot be sampled, so only its regions are reported",
				 due, ana_sample_mode_name(s->mode), ana_fmt_ns((double)s->period_ns, a, sizeof a),
				 s->mode == FMT_SAMPLE_WALL ? "wall" : "CPU", ana_fmt_ns(basis, b, sizeof b));
		} else
			s->none_why = "the run was shorter than ten sample periods";
	}
	if (s->dropped)
		ana_warn(p, "%llu of %llu samples were dropped (the sample buffer was full): shares are computed "
			    "from the samples kept; record again with a lower -F or a smaller --flush-ms",
			 (unsigned long long)s->dropped, (unsigned long long)(s->taken + s->dropped));
	if (s->truncated) {
		/* A sample cut with fewer frames than the limit was cut where the kernel's copy of
		 * the stack ended: a stack of large frames (fennec's own unwinding of an
		 * allocation among them), or a sample taken as the stack grew into a new page,
		 * which gets no copy (docs/sampling.md). */
		uint64_t depth = p->procs[0].file.sample_depth;
		uint64_t shortn = s->truncated_short < s->truncated ? s->truncated_short : s->truncated;
		if (worth_warning(s->truncated - shortn, s->taken))
			ana_warn(p, "%llu of %llu samples had call stacks deeper than the %llu-frame limit and lost "
				    "their outermost frames: total shares of outer functions are low; %s",
				 (unsigned long long)(s->truncated - shortn), (unsigned long long)s->taken,
				 (unsigned long long)depth,
				 depth >= 512 ? "512 frames is the most fennec keeps (a recursion this deep is best "
						"read from its innermost frames)"
				 : depth >= 256 ? "record again with --stack-depth 512 (FENNEC_STACK_DEPTH=512)"
						: "record again with --stack-depth 256 or more (FENNEC_STACK_DEPTH)");
		if (worth_warning(shortn, s->taken))
			ana_warn(p, "%llu of %llu samples lost their outer frames where the copy of the stack ended, "
				    "short of the %llu-frame limit (large stack frames, or a sample taken as the stack grew "
				    "into a new page): total shares of outer functions are low; a larger --stack-depth "
				    "copies more (FENNEC_STACK_COPY sets the bytes)",
				 (unsigned long long)shortn, (unsigned long long)s->taken, (unsigned long long)depth);
	}
	for (size_t i = 0; i < nbad; i++) {
		if (bad[i].status == SYM_NOSYMS)
			ana_warn(p, "%s: no symbols (stripped); %llu samples shown as module+offset", p->names[bad[i].path],
				 (unsigned long long)bad[i].samples);
		else
			ana_warn(p, "%s: %s; %llu samples unsymbolised", p->names[bad[i].path],
				 bad[i].status == SYM_BUILDID ? "build id differs from the recording" : "missing",
				 (unsigned long long)bad[i].samples);
	}
	/* (with a budget's stride the rate was lowered on purpose: the budget line says so) */
	if (s->mode == FMT_SAMPLE_CPU && s->requested_hz && cpu_samples >= 50 && isfinite(s->achieved_hz) &&
	    !s->nbudget_changes && s->achieved_hz < 0.5 * (double)s->requested_hz)
		ana_warn(p, "sampled at %.0f Hz of CPU time, below the %llu Hz requested%s; shares remain unbiased "
			    "estimates, from fewer samples",
			 s->achieved_hz, (unsigned long long)s->requested_hz,
			 s->source == FMT_SRC_TIMER ? " (POSIX CPU timers fire at most at the kernel tick rate)" : "");
}

int ana_samples_finish(ana_profile *p)
{
	ana_sampling *s = &p->smp;
	sstate *ss = s->priv;
	int rc = FENNEC_ENOMEM;
	fin x = {.p = p, .unknown_func = ANA_NONE, .kernel_func = ANA_NONE, .eval_name = ANA_NONE, .take_gil = ANA_NONE, .fennec_loc = ANA_NONE};
	badmod *bad = NULL;
	size_t nbad = 0, bad_cap = 0;
	kmap tids = {0};

	/* Sampling facts, from the headers and the last SAMPLES counters. */
	for (uint32_t i = 0; i < p->nprocs; i++) {
		const fmt_file *f = &p->procs[i].file;
		if (f->sample_mode == FMT_SAMPLE_OFF && !f->samples)
			continue;
		if (!s->present) {
			s->present = 1;
			s->mode = f->sample_mode;
			s->period_ns = f->sample_period_ns;
			s->requested_hz = f->sample_hz;
			s->source = f->sample_source;
		}
		s->taken += f->samples_taken > f->samples ? f->samples_taken : f->samples;
		s->dropped += f->samples_dropped;
		s->truncated += f->samples_truncated;
	}
	/* the budget's changes, the process that used the most CPU first: short processes
	 * (a launcher's shell, its helpers) change at their start and say little */
	struct proc_cpu *order = p->nprocs ? malloc(p->nprocs * sizeof *order) : NULL;
	if (p->nprocs && !order)
		goto out;
	for (uint32_t i = 0; i < p->nprocs; i++)
		order[i] = (struct proc_cpu){p->procs[i].file.cpu_user_ns + p->procs[i].file.cpu_sys_ns, i};
	if (p->nprocs > 1)
		qsort(order, p->nprocs, sizeof *order, cmp_proc_cpu);
	for (uint32_t oi = 0; oi < p->nprocs; oi++) {
		const fmt_file *f = &p->procs[order[oi].i].file;
		if (!f->budget_ppm)
			continue;
		if (!s->budget_ppm)
			s->budget_ppm = f->budget_ppm;
		if (f->stride > s->budget_stride)
			s->budget_stride = f->stride;
		if ((double)f->budget_share_ppm / 1e4 > s->budget_share_pct)
			s->budget_share_pct = (double)f->budget_share_ppm / 1e4;
		s->budget_changes_more += f->stride_changes_more;
		if (!f->nstride_changes)
			continue;
		struct ana_budget_change *a = realloc(s->budget_changes, (s->nbudget_changes + f->nstride_changes) * sizeof *a);
		if (!a) {
			free(order);
			goto out;
		}
		s->budget_changes = a;
		double t0 = (double)f->start_mono_ns;
		for (uint32_t k = 0; k < f->nstride_changes; k++) {
			const struct fmt_stride_change *c = &f->stride_changes[k];
			double at = fmt_ticks_to_ns(f, c->ticks) - t0;
			a[s->nbudget_changes++] = (struct ana_budget_change){f->pid, at > 0 ? at : 0, c->stride,
									       (double)c->share_ppm / 1e4};
		}
	}
	free(order);
	/* Python: the first Python process's interpreter, and one line for every one whose
	 * frames could not be read */
	uint64_t py_said = 0;
	for (uint32_t i = 0; i < p->nprocs; i++) {
		const fmt_file *f = &p->procs[i].file;
		if (!f->py_version || f->sample_mode == FMT_SAMPLE_OFF)
			continue;
		if (!s->py_version) {
			s->py_version = f->py_version;
			s->py_status = f->py_status;
		}
		unsigned ma = (unsigned)(f->py_version >> 24), mi = (unsigned)(f->py_version >> 16) & 0xff;
		uint64_t said = (uint64_t)1 << (f->py_status & 7);
		if (f->py_status == FMT_PY_OK || (py_said & said))
			continue;
		py_said |= said;
		if (f->py_status == FMT_PY_VERSION)
			ana_warn(p, "CPython %u.%u: fennec cannot read this interpreter's frames (it reads 3.11, 3.12 and 3.13); "
				    "the samples show its native frames only", ma, mi);
		else if (f->py_status == FMT_PY_OFF)
			ana_warn(p, "CPython %u.%u: Python frames were turned off (FENNEC_PYTHON=0); the samples show native frames only", ma, mi);
		else if (f->py_status == FMT_PY_SOURCE && f->sample_mode)
			ana_warn(p, "CPython %u.%u: FENNEC_SAMPLE_SOURCE=ring cannot take Python frames (they are read on the "
				    "sampled thread); the samples show native frames only", ma, mi);
	}
	size_t raw = 0;
	for (size_t i = 0; ss && i < ss->nps; i++)
		raw += ss->ps[i].nst;
	if (!s->present && !raw) {
		sstate_free(p);
		return 0;
	}
	if (ss && ss->nps && !(s->rawmap = calloc(ss->nps, sizeof *s->rawmap)))
		goto out;
	s->nrawmap = ss ? (uint32_t)ss->nps : 0;
	if (sym_open(NULL, &x.sym))
		goto out;

	size_t total = 0;
	for (size_t i = 0; ss && i < ss->nps; i++)
		total += ss->ps[i].ns;
	if (total && !(s->samples = malloc(total * sizeof *s->samples)))
		goto out;
	s->samples_cap = total;
	for (uint32_t proc = 0; ss && proc < ss->nps && proc < p->nprocs; proc++) {
		pstate *ps = &ss->ps[proc];
		const fmt_file *f = &p->procs[proc].file;
		if (!ps->nst)
			continue;
		if (symbolise_process(&x, proc, ps, &bad, &nbad, &bad_cap))
			goto out;
		/* Heap stacks (src/analyze/memory.c) are resolved through this map later. */
		if (!(s->rawmap[proc].stack = malloc(ps->nst * sizeof *s->rawmap[proc].stack)))
			goto out;
		for (size_t i = 0; i < ps->nst; i++)
			s->rawmap[proc].stack[i] = ps->st[i].stack;
		s->rawmap[proc].n = (uint32_t)ps->nst;
		for (size_t i = 0; i < ps->nrp; i++)
			ps->rp[i].node = ana_path_node(p, f, ps->sites + ps->rp[i].off, ps->rp[i].n);
		kmap_free(&tids);
		for (uint32_t t = 0; t < p->nthreads; t++)
			if (p->threads[t].process == proc) {
				uint64_t *v = kmap_slot(&tids, p->threads[t].tid, NULL);
				if (!v)
					goto out;
				*v = t;
			}
		for (size_t i = 0; i < ps->ns; i++) {
			const rsample *r = &ps->s[i];
			uint32_t th = thread_for(p, &tids, proc, f, r->tid);
			if (th == ANA_NONE)
				goto out;
			double t = fmt_ticks_to_ns(f, r->ticks);
			s->samples[s->nsamples++] = (ana_sample){
				.t_ns = t > 0 ? (uint64_t)llround(t) : 0,
				.step = r->step,
				.stack = ps->st[r->stack].stack,
				.thread = th,
				.node = r->path == ANA_NONE ? ANA_NONE : ps->rp[r->path].node,
				.weight = r->weight,
				.kind = r->kind,
				.kernel = r->kernel,
			};
			s->weight[r->kind] += r->weight;
		}
		pstate_free(ps); /* the raw data is no longer needed */
	}
	if (s->nsamples > 1)
		qsort(s->samples, s->nsamples, sizeof *s->samples, cmp_sample);

	/* The achieved rate: on-CPU samples per second of CPU time. */
	uint64_t cpu_samples = 0;
	for (size_t i = 0; i < s->nsamples; i++)
		cpu_samples += s->samples[i].kind == ANA_CPU;
	double cpu_s = (double)(p->cpu_user_ns + p->cpu_sys_ns) / 1e9;
	s->achieved_hz = cpu_s > 0 ? (double)cpu_samples / cpu_s : NAN;
	if (p->window.active) /* the CPU time is the session's, the samples the window's: unknown */
		s->achieved_hz = NAN;

	if (ana_sample_view_build(p, NULL, &s->all))
		goto out;
	for (uint32_t k = 0; k < ANA_NKINDS; k++)
		for (uint32_t i = 0; i < s->all.nfuncs[k]; i++) {
			const ana_hot_func *h = &s->all.funcs[k][i];
			s->funcs[h->func].self[k] = h->self;
			s->funcs[h->func].total[k] = h->total;
		}
	const ana_sample_filter *flt = &p->opt.samples;
	if (ana_sample_view_build(p, flt->pid || flt->tid || flt->region ? flt : NULL, &s->sel))
		goto out;

	finish_warnings(p, bad, nbad, cpu_samples);
	rc = 0;
out:
	sym_close(x.sym);
	itab_free(&x.ftab);
	itab_free(&x.stab);
	free(x.tmp);
	free(x.py);
	free(bad);
	kmap_free(&tids);
	sstate_free(p);
	return rc;
}

void ana_samples_free(ana_profile *p)
{
	ana_sampling *s = &p->smp;
	sstate_free(p);
	free(s->samples);
	free(s->budget_changes);
	for (uint32_t i = 0; i < s->nstacks; i++)
		free(s->stacks[i].locs);
	free(s->stacks);
	free(s->locs);
	free(s->funcs);
	free(s->modules);
	for (uint32_t i = 0; i < s->nrawmap; i++)
		free(s->rawmap[i].stack);
	free(s->rawmap);
	ana_sample_view_free(&s->all);
	ana_sample_view_free(&s->sel);
	memset(s, 0, sizeof *s);
}

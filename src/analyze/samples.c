/*
 * samples.c - sampled call stacks in the analysis model. While the reader streams a file,
 * each sample is kept with its raw stack and region path interned per process; at the end
 * every process's stacks are symbolised (src/symbol/), each distinct address once, into
 * locations, functions and stacks shared by the whole recording, and the views that the
 * renderers show are aggregated: hot functions and lines, the call tree, per region and per
 * thread numbers. Design notes: docs/internals/symbol.md.
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

static int mods_overlap(const fmt_module *a, const fmt_module *b)
{
	if (a->hi <= b->lo || b->hi <= a->lo)
		return 0;
	for (uint32_t i = 0; i < a->nsegs; i++)
		for (uint32_t k = 0; k < b->nsegs; k++)
			if (a->segs[i].start < b->segs[k].end && b->segs[k].start < a->segs[i].end)
				return 1;
	return 0;
}

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

	/* Warnings. */
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

/* ---- symbolisation, per process ---- */

/* A loaded segment of an effective module of one epoch. */
typedef struct seg {
	uint64_t start, end;
	uint32_t mod;         /* index into the file's modules */
} seg;

static int cmp_seg(const void *a, const void *b)
{
	const seg *x = a, *y = b;
	return (x->start > y->start) - (x->start < y->start);
}

/* The segments of the modules known at the end of an epoch, each replaced module left out,
 * sorted; *out is non-NULL on success. */
static int epoch_segments(const fmt_file *f, size_t known, seg **out, size_t *nout)
{
	size_t n = 0, cap = 0;
	seg *v = NULL;
	for (size_t i = 0; i < known; i++) {
		int replaced = 0;
		for (size_t j = i + 1; j < known && !replaced; j++)
			replaced = mods_overlap(&f->modules[i], &f->modules[j]);
		if (replaced)
			continue;
		for (uint32_t k = 0; k < f->modules[i].nsegs; k++) {
			if (ana_grow(&v, &cap, n, sizeof *v) < 0) {
				free(v);
				return FENNEC_ENOMEM;
			}
			v[n++] = (seg){f->modules[i].segs[k].start, f->modules[i].segs[k].end, (uint32_t)i};
		}
	}
	if (!v && !(v = malloc(sizeof *v))) /* no modules: an empty table, still non-NULL */
		return FENNEC_ENOMEM;
	if (n > 1)
		qsort(v, n, sizeof *v, cmp_seg);
	*out = v;
	*nout = n;
	return 0;
}

static uint32_t seg_find(const seg *v, size_t n, uint64_t addr)
{
	size_t lo = 0, hi = n;
	while (lo < hi) {
		size_t mid = lo + (hi - lo) / 2;
		if (v[mid].start <= addr)
			lo = mid + 1;
		else
			hi = mid;
	}
	return lo && addr < v[lo - 1].end ? v[lo - 1].mod : ANA_NONE;
}

static uint32_t func_for(fin *x, uint32_t name, uint32_t module, uint32_t file, uint32_t line)
{
	ana_sampling *s = &x->p->smp;
	uint64_t h = cm_mix64((uint64_t)name << 32 | module);
	if (itab_reserve(&x->ftab) < 0)
		return ANA_NONE;
	size_t i = h & (x->ftab.cap - 1);
	for (; x->ftab.id[i] != UINT32_MAX; i = (i + 1) & (x->ftab.cap - 1)) {
		ana_func *fn = &s->funcs[x->ftab.id[i]];
		if (fn->name == name && fn->module == module)
			return x->ftab.id[i];
	}
	size_t cap = s->funcs_cap;
	if (s->nfuncs == UINT32_MAX - 1 || ana_grow(&s->funcs, &cap, s->nfuncs, sizeof *s->funcs) < 0)
		return ANA_NONE;
	s->funcs_cap = (uint32_t)(cap < UINT32_MAX ? cap : UINT32_MAX);
	uint32_t id = s->nfuncs++;
	s->funcs[id] = (ana_func){.name = name, .module = module, .file = file, .line = line};
	x->ftab.id[i] = id;
	x->ftab.h[i] = h;
	x->ftab.n++;
	return id;
}

static uint32_t new_loc(fin *x, uint32_t func, uint32_t file, uint32_t line, uint32_t proc, uint64_t addr,
			uint64_t rel, int inlined)
{
	ana_sampling *s = &x->p->smp;
	size_t cap = s->locs_cap;
	if (func == ANA_NONE || s->nlocs == UINT32_MAX - 1 || ana_grow(&s->locs, &cap, s->nlocs, sizeof *s->locs) < 0)
		return ANA_NONE;
	s->locs_cap = (uint32_t)(cap < UINT32_MAX ? cap : UINT32_MAX);
	s->locs[s->nlocs] = (ana_loc){func, file, line, proc, addr, rel, inlined};
	return s->nlocs++;
}

/* Whether a module is the system's (the C library, libgcc, libstdc++, the vDSO, the
 * kernel): code that fennec's own work calls into as much as the program does. */
int ana_module_is_system(const char *path)
{
	return path[0] == '[' || !strncmp(path, "/lib/", 5) || !strncmp(path, "/lib64/", 7) ||
	       !strncmp(path, "/usr/lib/", 9) || !strncmp(path, "/usr/lib64/", 11);
}

/* A name with the C library's decorations taken off: leading underscores and a libc_
 * prefix (__libc_malloc, ___dlopen, __posix_memalign are malloc, dlopen, posix_memalign). */
static const char *plain_name(const char *s)
{
	while (*s == '_')
		s++;
	if (!strncmp(s, "libc_", 5))
		for (s += 5; *s == '_'; s++)
			;
	return s;
}

/*
 * Whether library function `callee`, called from fennec's wrapper function `wrapper`, is
 * the call the wrapper forwards (the real malloc under fennec's malloc, glibc's
 * __pthread_create_2_1 under its pthread_create): the program's work, not fennec's. The
 * paths of a wrapper are named after the function it wraps (malloc_slow, free_marked),
 * and the wrapper itself is often gone from the stack, reached by a tail call.
 */
static int forwarded_call(const char *callee, const char *wrapper)
{
	const char *a = plain_name(callee), *b = plain_name(wrapper);
	size_t n = strlen(a), m = strlen(b);
	if (n && !strncmp(a, b, n) && (!b[n] || b[n] == '_'))
		return 1;
	return m && !strncmp(a, b, m) && a[m] == '_' && a[m + 1] >= '0' && a[m + 1] <= '9'; /* a version */
}

/*
 * fennec's own work out of the program's stack (x->tmp, nl locations innermost first). The
 * innermost run of libfennec frames is entered at its outermost frame, the entry: the
 * wrapper or API function the program called (malloc, fennec_region_begin), or the
 * trampoline that starts a thread. A sample is fennec's own when its innermost frame is in
 * libfennec, or in a system library that fennec's frames call for their own work (the
 * unwinder's _Unwind_Find_FDE under the stack cache; a clock read) while program code
 * lies further out. Its frames up to the entry become one location, [fennec], so that
 * fennec's functions (col_site_id, alloc_slow, record_alloc) are one entry of the
 * profile, below the program's function whose call paid for them (the entry itself is
 * often gone from the stack: malloc reaches malloc_slow by a tail call). What the wrapper forwards (glibc's
 * malloc under fennec's) and what the trampoline or a signal chain calls back (the
 * thread's function, the program's handler) stay the program's. Further-out fennec frames
 * (the trampoline below every thread's function, the pthread_create and exec wrappers the
 * program's calls pass through) are dropped. Returns the new length, SIZE_MAX when out of memory.
 */
static size_t fold_fennec(fin *x, size_t nl, uint32_t proc)
{
	ana_profile *p = x->p;
	const ana_sampling *s = &p->smp;
	size_t a = 0, b;
	int ours = 1;
#define MOD_OF(i) (p->names[s->funcs[s->locs[x->tmp[i]].func].module])
	while (a < nl && !ana_module_is_fennec(MOD_OF(a)))
		a++;
	if (a == nl)
		return nl;
	for (b = a; b < nl && ana_module_is_fennec(MOD_OF(b)); b++)
		;
	const ana_func *entry = &s->funcs[s->locs[x->tmp[b - 1]].func];
	if (a) {
		const ana_func *callee = &s->funcs[s->locs[x->tmp[a - 1]].func];
		int program_outside = 0;
		for (size_t i = b; i < nl && !program_outside; i++)
			program_outside = !ana_module_is_fennec(MOD_OF(i)) && !ana_module_is_system(MOD_OF(i));
		ours = program_outside && ana_module_is_system(p->names[callee->module]);
		for (size_t i = a; i < b && ours; i++)
			ours = !forwarded_call(p->names[callee->name], p->names[s->funcs[s->locs[x->tmp[i]].func].name]);
	}
	size_t k = a;
	if (ours) {
		if (x->fennec_loc == ANA_NONE) {
			uint32_t nm = ana_intern(p, "[fennec]");
			uint32_t fn = nm == ANA_NONE ? ANA_NONE : func_for(x, nm, entry->module, ANA_NONE, 0);
			if ((x->fennec_loc = new_loc(x, fn, ANA_NONE, 0, proc, 0, 0, 0)) == ANA_NONE)
				return SIZE_MAX;
		}
		x->tmp[0] = x->fennec_loc;
		k = 1;
	}
	for (size_t i = b; i < nl; i++)
		if (!ana_module_is_fennec(MOD_OF(i)))
			x->tmp[k++] = x->tmp[i];
#undef MOD_OF
	return k;
}

static uint32_t stack_for(fin *x, const uint32_t *locs, uint32_t n, int truncated)
{
	ana_sampling *s = &x->p->smp;
	uint64_t h = 0x51ed270b27u ^ (uint64_t)truncated;
	for (uint32_t i = 0; i < n; i++)
		h = cm_mix64(h ^ locs[i]) + i;
	if (itab_reserve(&x->stab) < 0)
		return ANA_NONE;
	size_t i = h & (x->stab.cap - 1);
	for (; x->stab.id[i] != UINT32_MAX; i = (i + 1) & (x->stab.cap - 1)) {
		const ana_stack *st = &s->stacks[x->stab.id[i]];
		if (x->stab.h[i] == h && st->n == n && st->truncated == truncated &&
		    (!n || !memcmp(st->locs, locs, n * sizeof *locs)))
			return x->stab.id[i];
	}
	size_t cap = s->stacks_cap;
	if (s->nstacks == UINT32_MAX - 1 || ana_grow(&s->stacks, &cap, s->nstacks, sizeof *s->stacks) < 0)
		return ANA_NONE;
	s->stacks_cap = (uint32_t)(cap < UINT32_MAX ? cap : UINT32_MAX);
	uint32_t *copy = malloc((n ? n : 1) * sizeof *copy);
	if (!copy)
		return ANA_NONE;
	if (n) /* a sample with no frames: locs may be NULL (nothing put in the buffer yet) */
		memcpy(copy, locs, n * sizeof *locs);
	uint32_t id = s->nstacks++;
	s->stacks[id] = (ana_stack){copy, n, truncated};
	x->stab.id[i] = id;
	x->stab.h[i] = h;
	x->stab.n++;
	return id;
}

/* Per-module bookkeeping of one process. */
typedef struct pmod {
	uint32_t sym;         /* symboliser handle, ANA_NONE until used */
	uint32_t ana;         /* index into smp.modules, ANA_NONE until used */
	uint32_t name;        /* names index of its path */
	uint64_t stamp;       /* last raw stack counted in `samples` + 1 */
	uint64_t samples;     /* samples with a frame in it */
} pmod;

static uint32_t ana_module_for(ana_profile *p, uint32_t proc, uint32_t path, int status)
{
	ana_sampling *s = &p->smp;
	size_t cap = s->modules_cap;
	if (ana_grow(&s->modules, &cap, s->nmodules, sizeof *s->modules) < 0)
		return ANA_NONE;
	s->modules_cap = (uint32_t)cap;
	s->modules[s->nmodules] = (ana_module){proc, path, 0, status};
	return s->nmodules++;
}

/* The locations of one address of one module, chained per address. */
typedef struct acache {
	uint32_t mod;         /* index into the file's modules, ANA_NONE: none */
	int exact;
	uint32_t first, n;    /* locs [first, first + n) */
	uint64_t next;        /* next entry of the same address + 1, 0: none */
} acache;

static int ld_so(const char *path)
{
	const char *b = strrchr(path, '/');
	return !strncmp(b ? b + 1 : path, "ld-linux", 8);
}

/* Whether the frame at `i` of a stack (locs innermost first) is the dynamic loader's, called
 * by the interpreter itself (its thread-local lookups, __tls_get_addr): the loader's frames
 * and then the interpreter's. A loader reached through libc (dlopen under an import) is
 * the loader's own work, and stays. */
static int called_by_interp(const ana_profile *p, const uint32_t *locs, size_t i, size_t n, uint32_t interp)
{
	for (; i < n; i++) {
		uint32_t mod = p->smp.funcs[p->smp.locs[locs[i]].func].module;
		if (mod == interp)
			return 1;
		if (mod == ANA_NONE || !ld_so(p->names[mod]))
			return 0;
	}
	return 0;
}

/* The location of a tagged Python frame of process proc. */
static uint32_t py_loc(fin *x, uint32_t proc, const fmt_file *f, kmap *cache, uint64_t v)
{
	ana_profile *p = x->p;
	uint64_t key = v & ~(1ull << 55);
	int isnew = 0;
	uint64_t *slot = kmap_slot(cache, key, &isnew);
	if (!slot)
		return ANA_NONE;
	if (!isnew && *slot)
		return (uint32_t)(*slot - 1);
	uint32_t code = (uint32_t)(v >> 24) & 0x7fffffffu, line = (uint32_t)(v & 0xffffff);
	const fmt_pycode *pc = fmt_pycode_get(f, code);
	char unk[48];
	snprintf(unk, sizeof unk, "<python code %u>", code);
	const char *qn = pc && pc->qualname && *pc->qualname ? pc->qualname : unk;
	const char *fn = pc && pc->filename && *pc->filename ? pc->filename : "<unknown>";
	uint32_t nm = ana_intern(p, qn), file = ana_intern(p, fn);
	if (nm == ANA_NONE || file == ANA_NONE)
		return ANA_NONE;
	uint32_t fid = func_for(x, nm, file, file, pc ? pc->firstlineno : 0);
	if (fid == ANA_NONE)
		return ANA_NONE;
	p->smp.funcs[fid].lang = ANA_LANG_PYTHON;
	uint32_t l = new_loc(x, fid, file, line, proc, key, 0, 0);
	if (l != ANA_NONE)
		*slot = (uint64_t)l + 1;
	return l;
}

/*
 * Put a sample's Python frames (py, n, innermost first) into its native stack (x->tmp,
 * *nl locations innermost first): each run of Python frames that one interpreter loop
 * ran (up to and with a frame marked entry) takes the place of that loop's
 * _PyEval_EvalFrameDefault frame, the k-th run from the inside the k-th such frame; runs
 * beyond the outermost loop go with it. Without opt.native, the interpreter's other C
 * frames (those of the module the loop is in) fold into the Python frame that runs them,
 * and the native frames outside the outermost Python frame (the thread's start) go.
 */
/* The pseudo-function that stands for the interpreter's wait for the GIL, per process. */
static uint32_t gil_loc(fin *x, uint32_t proc, kmap *cache)
{
	ana_profile *p = x->p;
	uint64_t *slot = kmap_slot(cache, PY_TAG | 0x00ffffffffffffffull, NULL);
	if (!slot)
		return ANA_NONE;
	if (*slot)
		return (uint32_t)(*slot - 1);
	uint32_t nm = ana_intern(p, ANA_GIL_WAIT), mod = ana_intern(p, "[python]");
	if (nm == ANA_NONE || mod == ANA_NONE)
		return ANA_NONE;
	uint32_t fid = func_for(x, nm, mod, ANA_NONE, 0);
	if (fid == ANA_NONE)
		return ANA_NONE;
	p->smp.funcs[fid].lang = ANA_LANG_PYTHON;
	uint32_t l = new_loc(x, fid, ANA_NONE, 0, proc, 0, 0, 0);
	if (l != ANA_NONE)
		*slot = (uint64_t)l + 1;
	return l;
}

static int py_merge(fin *x, uint32_t proc, const fmt_file *f, const uint64_t *py, uint32_t n, size_t *nl,
		    kmap *cache, uint64_t count, unsigned flags)
{
	ana_profile *p = x->p;
	if (!n)
		return 0;
	if (x->eval_name == ANA_NONE && (x->eval_name = ana_intern(p, "_PyEval_EvalFrameDefault")) == ANA_NONE)
		return -1;
	/* CPython 3.12+ run with -X perf calls each Python function through a trampoline of
	 * its own, named "py::qualname:file" in the perf map: the Python frame read from the
	 * interpreter says the same, so the trampoline goes, in --native too (it would be a
	 * second, self-less frame of each Python call). */
	size_t kept = 0;
	for (size_t i = 0; i < *nl; i++) {
		const ana_func *fn = &p->smp.funcs[p->smp.locs[x->tmp[i]].func];
		const char *mod = fn->module != ANA_NONE ? p->names[fn->module] : "";
		size_t ml = strlen(mod);
		if (!strncmp(p->names[fn->name], "py::", 4) && ml > 4 && !strcmp(mod + ml - 4, ".map") &&
		    strstr(mod, "perf-"))
			continue;
		x->tmp[kept++] = x->tmp[i];
	}
	*nl = kept;
	uint32_t interp = ANA_NONE, evals = 0;
	for (size_t i = 0; i < *nl; i++) {
		const ana_func *fn = &p->smp.funcs[p->smp.locs[x->tmp[i]].func];
		if (fn->name == x->eval_name) {
			interp = fn->module;
			evals++;
		}
	}
	/* A thread without the GIL inside the interpreter's take_gil waits for it: its leaf
	 * frames (the condition variable's wait, the futex) become one [waiting for the GIL].
	 * An interpreter without its static symbols (Debian's python3.11 is stripped to its
	 * dynamic ones: take_gil is "python3.11+0x4f92c0") is known by its wait instead: the
	 * first frame of the interpreter, unnamed, right above libc's pthread_cond_timedwait,
	 * which only take_gil calls there (sleeps, I/O and threading's locks wait in
	 * clock_nanosleep, read, select and sem_clockwait). */
	if (!(flags & FMT_S_GIL) && !p->opt.native) {
		if (x->take_gil == ANA_NONE && (x->take_gil = ana_intern(p, "take_gil")) == ANA_NONE)
			return -1;
		int cond_wait = 0;
		for (size_t i = 0; i < *nl; i++) {
			const ana_func *fn = &p->smp.funcs[p->smp.locs[x->tmp[i]].func];
			const char *nm = p->names[fn->name];
			int unnamed_wait = 0;
			if (interp != ANA_NONE && fn->module == interp) {
				unnamed_wait = cond_wait == 1 && strstr(nm, "+0x") != NULL;
				cond_wait = -1; /* the first interpreter frame decides */
			} else if (cond_wait >= 0 && strstr(nm, "pthread_cond_timedwait")) {
				cond_wait = 1;
			}
			if (fn->name == x->take_gil || !strncmp(nm, "take_gil.", 9) || unnamed_wait) {
				uint32_t g = gil_loc(x, proc, cache);
				if (g == ANA_NONE)
					return -1;
				x->tmp[i] = g;
				memmove(x->tmp, x->tmp + i, (*nl - i) * sizeof *x->tmp);
				*nl -= i;
				p->smp.py_gil_wait += count;
				break;
			}
		}
	}
	if (ana_grow(&x->py, &x->py_cap, n, sizeof *x->py) < 0)
		return -1;
	for (uint32_t i = 0; i < n; i++)
		if ((x->py[i] = py_loc(x, proc, f, cache, py[i])) == ANA_NONE)
			return -1;
	/* the result, built in a copy */
	size_t cap = *nl + n + 1;
	uint32_t *out = malloc(cap * sizeof *out);
	if (!out)
		return -1;
	size_t k = 0, at = 0; /* at: next Python frame */
	uint32_t seen = 0;
	size_t last_py = SIZE_MAX;
	for (size_t i = 0; i < *nl; i++) {
		uint32_t loc = x->tmp[i];
		const ana_func *fn = &p->smp.funcs[p->smp.locs[loc].func];
		if (fn->name == x->eval_name) {
			seen++;
			size_t before = at;
			/* this loop's run: to the next entry mark; the outermost loop takes the rest */
			while (at < n) {
				int entry = (py[at] >> 55) & 1;
				out[k++] = x->py[at++];
				last_py = k;
				if (entry && seen < evals)
					break;
			}
			if (p->opt.native && at == before)
				out[k++] = loc;
			continue;
		}
		if (!p->opt.native && interp != ANA_NONE && (fn->module == interp || called_by_interp(p, x->tmp, i, *nl, interp)))
			continue; /* the interpreter, and the dynamic loader's code it calls itself (TLS lookups) */
		out[k++] = loc;
	}
	if (at < n) {
		/* no interpreter loop to stand in for (an interpreter without symbols): outermost */
		p->smp.py_unplaced += count;
		while (at < n)
			out[k++] = x->py[at++];
		last_py = k;
	}
	if (!p->opt.native && last_py != SIZE_MAX)
		k = last_py;
	if (ana_grow(&x->tmp, &x->tmp_cap, k, sizeof *x->tmp) < 0) {
		free(out);
		return -1;
	}
	memcpy(x->tmp, out, k * sizeof *out);
	*nl = k;
	free(out);
	return 0;
}

int symbolise_process(fin *x, uint32_t proc, pstate *ps, badmod **bad, size_t *nbad, size_t *bad_cap)
{
	ana_profile *p = x->p;
	const fmt_file *f = &p->procs[proc].file;
	int rc = FENNEC_ENOMEM;
	x->fennec_loc = ANA_NONE;
	pmod *pm = calloc(f->nmodules + 1, sizeof *pm);
	seg **segs = calloc(ps->epoch + 1, sizeof *segs);
	size_t *nsegs = calloc(ps->epoch + 1, sizeof *nsegs);
	kmap addr_idx = {0};    /* address -> first cache entry + 1 */
	kmap py_locs = {0};     /* Python frame (tagged, without the entry mark) -> location + 1 */
	acache *ac = NULL;      /* entries, chained per address */
	size_t nac = 0, ac_cap = 0;
	uint32_t perf_sym = ANA_NONE, perf_ana = ANA_NONE, perf_path = ANA_NONE, unk_ana = ANA_NONE;
	if (!pm || !segs || !nsegs)
		goto out;
	for (size_t i = 0; i < f->nmodules; i++) {
		pm[i].sym = pm[i].ana = pm[i].name = ANA_NONE;
	}
	for (uint32_t sid = 0; sid < ps->nst; sid++) {
		rstack *r = &ps->st[sid];
		uint32_t e = r->epoch;
		if (!segs[e]) {
			size_t known = e < ps->nepochs ? ps->epoch_end[e] : f->nmodules;
			if (epoch_segments(f, known, &segs[e], &nsegs[e]))
				goto out;
		}
		size_t nl = 0;
		uint32_t nnat = r->n;
		while (nnat && is_py(ps->frames[r->off + nnat - 1]))
			nnat--;
		for (uint32_t k = 0; k < nnat; k++) {
			uint64_t addr = ps->frames[r->off + k];
			int exact = k == 0 && (r->flags & FMT_S_EXACT_PC);
			uint32_t mi = seg_find(segs[e], nsegs[e], addr);
			/* the address's locations, cached per (module, address, exact) */
			uint64_t *head = kmap_slot(&addr_idx, addr, NULL);
			if (!head)
				goto out;
			uint32_t first = ANA_NONE, cnt = 0;
			uint64_t e_at = *head;
			while (e_at && (ac[e_at - 1].mod != mi || ac[e_at - 1].exact != exact))
				e_at = ac[e_at - 1].next;
			if (e_at) {
				first = ac[e_at - 1].first;
				cnt = ac[e_at - 1].n;
			} else {
				const sym_frame *fr = NULL;
				uint32_t nfr = 0;
				uint32_t modname = ANA_NONE;
				uint64_t rel = addr;
				if (mi != ANA_NONE) {
					const fmt_module *fm = &f->modules[mi];
					if (pm[mi].sym == ANA_NONE && sym_add_module(x->sym, fm, &pm[mi].sym))
						goto out;
					if (sym_lookup(x->sym, pm[mi].sym, addr, exact, &fr, &nfr))
						goto out;
					if (pm[mi].name == ANA_NONE && (pm[mi].name = ana_intern(p, fm->path ? fm->path : "")) == ANA_NONE)
						goto out;
					if (pm[mi].ana == ANA_NONE &&
					    (pm[mi].ana = ana_module_for(p, proc, pm[mi].name, sym_module_status(x->sym, pm[mi].sym))) == ANA_NONE)
						goto out;
					modname = pm[mi].name;
					rel = addr - fm->bias;
				} else if (addr < 0xffff800000000000ull) {
					if (perf_sym == ANA_NONE) {
						uint64_t since = f->start_real_ns > 5000000000ull ? f->start_real_ns - 5000000000ull : 0;
						if (sym_add_perf_map(x->sym, f->pid, since, &perf_sym))
							goto out;
					}
					if (sym_lookup(x->sym, perf_sym, addr, exact, &fr, &nfr))
						goto out;
					if (nfr) {
						if (perf_path == ANA_NONE &&
						    (perf_path = ana_intern(p, sym_module_path(x->sym, perf_sym))) == ANA_NONE)
							goto out;
						if (perf_ana == ANA_NONE && (perf_ana = ana_module_for(p, proc, perf_path, SYM_OK)) == ANA_NONE)
							goto out;
						modname = perf_path;
					}
				}
				if (!nfr) {
					/* In no module: [unknown], or the kernel (samples taken in a system call
					 * with kernel call chains). */
					int kernel = addr >= 0xffff800000000000ull;
					uint32_t *fid = kernel ? &x->kernel_func : &x->unknown_func;
					if (*fid == ANA_NONE) {
						uint32_t nm = ana_intern(p, kernel ? "[kernel]" : "[unknown]");
						if (nm == ANA_NONE || (*fid = func_for(x, nm, nm, ANA_NONE, 0)) == ANA_NONE)
							goto out;
					}
					if (unk_ana == ANA_NONE && !kernel &&
					    (unk_ana = ana_module_for(p, proc, p->smp.funcs[*fid].module, SYM_MISSING)) == ANA_NONE)
						goto out;
					if (!kernel)
						p->smp.unknown_frames += r->count;
					first = new_loc(x, *fid, ANA_NONE, 0, proc, addr, addr, 0);
					if (first == ANA_NONE)
						goto out;
					cnt = 1;
				} else {
					for (uint32_t i = 0; i < nfr; i++) {
						uint32_t nm = ana_intern(p, fr[i].func);
						uint32_t file = fr[i].file ? ana_intern(p, fr[i].file) : ANA_NONE;
						if (nm == ANA_NONE || (fr[i].file && file == ANA_NONE))
							goto out;
						uint32_t fn = func_for(x, nm, modname, file, fr[i].line);
						uint32_t l = new_loc(x, fn, file, fr[i].line, proc, addr, rel, fr[i].inlined);
						if (l == ANA_NONE)
							goto out;
						if (!i)
							first = l;
					}
					cnt = nfr;
				}
				if (ana_grow(&ac, &ac_cap, nac, sizeof *ac) < 0)
					goto out;
				ac[nac] = (acache){mi, exact, first, cnt, *head};
				*head = ++nac;
			}
			/* module accounting: frames, and samples with a frame in the module */
			if (mi != ANA_NONE) {
				p->smp.modules[pm[mi].ana].samples += r->count;
				if (pm[mi].stamp != (uint64_t)sid + 1) {
					pm[mi].stamp = (uint64_t)sid + 1;
					pm[mi].samples += r->count;
				}
			} else if (unk_ana != ANA_NONE && p->smp.locs[first].func == x->unknown_func) {
				p->smp.modules[unk_ana].samples += r->count;
			} else if (perf_ana != ANA_NONE && p->smp.locs[first].func != x->kernel_func) {
				p->smp.modules[perf_ana].samples += r->count;
			}
			if (ana_grow(&x->tmp, &x->tmp_cap, nl + cnt, sizeof *x->tmp) < 0)
				goto out;
			for (uint32_t i = 0; i < cnt; i++)
				x->tmp[nl++] = first + i;
		}
		nl = fold_fennec(x, nl, proc);
		if (nl == SIZE_MAX)
			goto out;
		if (r->flags & FMT_S_PYTHON) {
			if (py_merge(x, proc, f, ps->frames + r->off + nnat, r->n - nnat, &nl, &py_locs, r->count, r->flags) < 0)
				goto out;
		}
		/* innermost first -> outermost first */
		for (size_t a = 0, b = nl ? nl - 1 : 0; a < b; a++, b--) {
			uint32_t t = x->tmp[a];
			x->tmp[a] = x->tmp[b];
			x->tmp[b] = t;
		}
		if (nl > UINT32_MAX)
			goto out;
		r->stack = stack_for(x, x->tmp, (uint32_t)nl, !!(r->flags & FMT_S_TRUNCATED));
		if (r->stack == ANA_NONE)
			goto out;
	}
	/* Modules that could not be read, for the warnings. */
	for (size_t i = 0; i < f->nmodules; i++) {
		if (pm[i].ana == ANA_NONE || p->smp.modules[pm[i].ana].status == SYM_OK)
			continue;
		const char *path = p->names[pm[i].name];
		if (path[0] == '[')
			continue; /* [vdso] and the like: no file to read, nothing to fix */
		size_t k = 0;
		while (k < *nbad && (*bad)[k].path != pm[i].name)
			k++;
		if (k == *nbad) {
			if (ana_grow(bad, bad_cap, k, sizeof **bad) < 0)
				goto out;
			(*bad)[k] = (badmod){pm[i].name, p->smp.modules[pm[i].ana].status, 0};
			(*nbad)++;
		}
		(*bad)[k].samples += pm[i].samples;
	}
	rc = 0;
out:
	if (segs)
		for (uint32_t e = 0; e <= ps->epoch; e++)
			free(segs[e]);
	free(segs);
	free(nsegs);
	free(pm);
	kmap_free(&addr_idx);
	kmap_free(&py_locs);
	free(ac);
	return rc;
}

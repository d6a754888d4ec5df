/*
 * rules_wait.c - the rules on threads that wait instead of computing (docs/bottlenecks.md):
 * off_cpu, blocked in a region or a step (wall-clock samples), named by the blocking call;
 * parallel_wait, an OpenMP team waiting in its runtime; gil_wait, Python threads waiting
 * for the GIL. Run by ana_rules() (rules.c) over the samples (samples.c).
 */
#include "analyze/aggregate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>

#include "analyze/rules.h"

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

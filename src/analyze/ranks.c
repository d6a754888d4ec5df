/*
 * ranks.c - processes and ranks of a merged recording: per-process and per-rank totals
 * (busy time, work, steps, top region) and the balance between ranks (docs/ranks.md):
 * the imbalance, the slowest rank, and the regions where it loses time to the others.
 * Everything here is computed once for every renderer and for the rules (rules_steps.c).
 */
#include "analyze/aggregate.h"

#include <ctype.h>
#include <fnmatch.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>

/* ---- names ---- */

/* The next word of a region name into w (lower case): words split at anything that is not
 * a letter or digit, and where a lower-case letter is followed by an upper-case one
 * (loadBatch -> load, batch). Returns the position after it, or NULL at the end. */
static const char *next_word(const char *s, char *w, size_t n)
{
	while (*s && !isalnum((unsigned char)*s))
		s++;
	if (!*s)
		return NULL;
	size_t k = 0;
	for (; *s && isalnum((unsigned char)*s); s++) {
		if (k && islower((unsigned char)s[-1]) && isupper((unsigned char)*s))
			break;
		if (k + 1 < n)
			w[k++] = (char)tolower((unsigned char)*s);
	}
	w[k] = 0;
	return s;
}

static int starts(const char *w, const char *prefix) { return !strncmp(w, prefix, strlen(prefix)); }

int ana_name_is_comm(const char *name)
{
	static const char *const prefix[] = {"mpi", "nccl", "gloo", "allreduce", "allgather", "alltoall", "barrier",
					     "bcast", "broadcast", "wait", "sync", "send", "recv", "receive", "gather",
					     "scatter", "reduce", "exchange", "halo", "collective"};
	static const char *const exact[] = {"comm", "comms", "communicate", "communication"};
	char w[64];
	for (const char *s = name; (s = next_word(s, w, sizeof w));) {
		for (size_t i = 0; i < ARRAY_LEN(prefix); i++)
			if (starts(w, prefix[i]))
				return 1;
		for (size_t i = 0; i < ARRAY_LEN(exact); i++)
			if (!strcmp(w, exact[i]))
				return 1;
	}
	return 0;
}

/* One entry of a comma-separated list matches the name (a glob, or the exact name). */
static int list_match(const char *name, const char *list)
{
	char pat[256];
	for (const char *s = list; *s;) {
		size_t n = strcspn(s, ",");
		if (n && n < sizeof pat) {
			memcpy(pat, s, n);
			pat[n] = 0;
			if (!fnmatch(pat, name, 0))
				return 1;
		}
		s += n;
		if (*s == ',')
			s++;
	}
	return 0;
}

int ana_name_is_data(const char *name, const char *list)
{
	if (list)
		return list_match(name, list);
	static const char *const prefix[] = {"load", "data", "batch", "fetch", "prefetch", "read"};
	char w[64];
	int data = 0;
	for (const char *s = name; (s = next_word(s, w, sizeof w));) {
		/* batch_norm and layer norms compute; "ready" is not "read" */
		if (starts(w, "norm") || !strcmp(w, "ready"))
			return 0;
		for (size_t i = 0; i < ARRAY_LEN(prefix) && !data; i++)
			data = starts(w, prefix[i]);
		data |= !strcmp(w, "io");
	}
	return data;
}

/* ---- per process and per rank ---- */

/* Whether node n or one of its ancestors is a communication region. */
static int under_comm(const ana_profile *p, uint32_t n)
{
	for (; n != ANA_NONE; n = p->nodes[n].parent)
		if (ana_name_is_comm(p->names[p->nodes[n].name]))
			return 1;
	return 0;
}

/* Communication time of a node on a thread: only the outermost communication node of a
 * path counts (its nested regions are inside it). */
static uint64_t comm_ns(const ana_profile *p, const ana_tnode *t, const uint8_t *comm)
{
	uint32_t parent = p->nodes[t->node].parent;
	return comm[t->node] && (parent == ANA_NONE || !comm[parent]) ? t->total_ns : 0;
}

static void dist_of(ana_dist *d, const ana_u64vec *v)
{
	memset(d, 0, sizeof *d);
	uint64_t *tmp = v->n ? malloc(v->n * sizeof *tmp) : NULL;
	if (!tmp)
		return;
	memcpy(tmp, v->v, v->n * sizeof *tmp); /* the selection reorders: keep the series */
	ana_dist_compute_u64(d, tmp, v->n);
	free(tmp);
}

/* Sum the self time per node of the tnodes in idx[] into acc (a node array), noting the
 * nodes touched in `touched`; returns how many were touched. */
static uint32_t sum_self(const ana_profile *p, const uint32_t *idx, uint32_t n, double *acc, uint32_t *touched,
			 uint32_t ntouched)
{
	for (uint32_t i = 0; i < n; i++) {
		const ana_tnode *t = &p->tnodes[idx[i]];
		if (acc[t->node] == 0)
			touched[ntouched++] = t->node;
		double self = t->total_ns > t->child_ns ? (double)(t->total_ns - t->child_ns) : 0;
		acc[t->node] += self > 0 ? self : 1e-9; /* nonzero: marks it touched */
	}
	return ntouched;
}

/* The node with the most self time among the touched ones; clears them. */
static uint32_t top_and_clear(double *acc, const uint32_t *touched, uint32_t n, uint64_t *top_ns)
{
	uint32_t best = ANA_NONE;
	for (uint32_t i = 0; i < n; i++) {
		if (best == ANA_NONE || acc[touched[i]] > acc[best])
			best = touched[i];
	}
	*top_ns = best != ANA_NONE ? (uint64_t)llround(acc[best]) : 0;
	for (uint32_t i = 0; i < n; i++)
		acc[touched[i]] = 0;
	return best;
}

/* Ranks: one per recording, processes of a recording are contiguous (files.c orders them). */
static int make_ranks(ana_profile *p)
{
	p->ranks = calloc(p->nprocs ? p->nprocs : 1, sizeof *p->ranks);
	if (!p->ranks)
		return FENNEC_ENOMEM;
	for (uint32_t i = 0; i < p->nprocs; i++) {
		ana_process *pr = &p->procs[i];
		if (!i || pr->file.recording_id != p->procs[i - 1].file.recording_id) {
			ana_rank *r = &p->ranks[p->nranks++];
			r->rank = pr->file.rank >= 0 ? pr->file.rank : -1;
			r->recording_id = pr->file.recording_id;
			r->proc = i;
			r->wall_ns = pr->wall_ns;
			r->top_node = ANA_NONE;
		}
		ana_rank *r = &p->ranks[p->nranks - 1];
		pr->rank_index = p->nranks - 1;
		r->nprocs++;
		r->cpu_ns += pr->file.cpu_user_ns + pr->file.cpu_sys_ns;
	}
	return 0;
}

/* Busy, work and top region of every process and rank. */
static int process_totals(ana_profile *p)
{
	uint8_t *comm = calloc(p->nnodes ? p->nnodes : 1, 1);
	double *pacc = calloc(p->nnodes ? p->nnodes : 1, sizeof *pacc);
	double *racc = calloc(p->nnodes ? p->nnodes : 1, sizeof *racc);
	uint32_t *ptouch = malloc((p->nnodes ? p->nnodes : 1) * sizeof *ptouch);
	uint32_t *rtouch = malloc((p->nnodes ? p->nnodes : 1) * sizeof *rtouch);
	uint32_t *order = malloc((p->ntnodes ? p->ntnodes : 1) * sizeof *order);
	uint32_t *start = calloc((size_t)p->nprocs + 1, sizeof *start);
	int rc = comm && pacc && racc && ptouch && rtouch && order && start ? 0 : FENNEC_ENOMEM;
	if (rc)
		goto out;
	for (uint32_t n = 0; n < p->nnodes; n++)
		comm[n] = (uint8_t)under_comm(p, n);
	for (uint32_t t = 0; t < p->nthreads; t++)
		p->procs[p->threads[t].process].busy_ns += p->threads[t].busy_ns;
	/* tnodes grouped by process (a counting sort) */
	for (uint32_t i = 0; i < p->ntnodes; i++)
		start[p->threads[p->tnodes[i].thread].process + 1]++;
	for (uint32_t k = 0; k < p->nprocs; k++)
		start[k + 1] += start[k];
	for (uint32_t i = 0; i < p->ntnodes; i++) {
		uint32_t pr = p->threads[p->tnodes[i].thread].process;
		order[start[pr]++] = i;
	}
	for (uint32_t k = p->nprocs; k > 0; k--)
		start[k] = start[k - 1];
	start[0] = 0;
	uint32_t rt = 0;
	for (uint32_t i = 0; i < p->nprocs; i++) {
		ana_process *pr = &p->procs[i];
		uint64_t cns = 0;
		for (uint32_t k = start[i]; k < start[i + 1]; k++)
			cns += comm_ns(p, &p->tnodes[order[k]], comm);
		pr->work_ns = pr->busy_ns > cns ? pr->busy_ns - cns : 0;
		uint32_t pt = sum_self(p, order + start[i], start[i + 1] - start[i], pacc, ptouch, 0);
		pr->top_node = top_and_clear(pacc, ptouch, pt, &pr->top_self_ns);
		dist_of(&pr->step_dist, &pr->step_ns);
		ana_rank *r = &p->ranks[pr->rank_index];
		r->busy_ns += pr->busy_ns;
		r->work_ns += pr->work_ns;
		r->comm_ns += pr->busy_ns - pr->work_ns;
		if (!r->steps && pr->step_ns.n) {
			r->steps = pr->step_ns.n;
			r->step_dist = pr->step_dist;
		}
		rt = sum_self(p, order + start[i], start[i + 1] - start[i], racc, rtouch, rt);
		if (i + 1 == p->nprocs || p->procs[i + 1].rank_index != pr->rank_index) {
			r->top_node = top_and_clear(racc, rtouch, rt, &r->top_self_ns);
			rt = 0;
		}
	}
out:
	free(comm);
	free(pacc);
	free(racc);
	free(ptouch);
	free(rtouch);
	free(order);
	free(start);
	return rc;
}

/* ---- work from samples ---- */

/* Whether a sampled function is communication code: a collective library's (Open MPI,
 * NCCL, gloo), PyTorch's distributed layer (c10d, whose Reducer is DDP's gradient
 * all-reduce), or Python code of torch.distributed. */
static int func_is_comm(const ana_profile *p, const ana_func *fn)
{
	static const char *const prefix[] = {"MPI_", "PMPI_", "ompi_", "mca_", "nccl", "gloo::", "c10d::",
					     "torch::distributed::", "c10d_"};
	const char *nm = p->names[fn->name];
	for (size_t i = 0; i < ARRAY_LEN(prefix); i++)
		if (!strncmp(nm, prefix[i], strlen(prefix[i])))
			return 1;
	if (fn->lang == ANA_LANG_PYTHON && fn->file != ANA_NONE && strstr(p->names[fn->file], "/torch/distributed/"))
		return 1;
	return 0;
}

/* Whether a sampled stack is communication (a communication function anywhere in it) or
 * a spin-wait (sched_yield innermost: OpenBLAS's idle threads, gloo's polling), not work.
 * fcomm: func_is_comm by function, or NULL. */
static int stack_waits(const ana_profile *p, const ana_stack *st, const uint8_t *fcomm)
{
	const ana_sampling *s = &p->smp;
	if (st->n) {
		const char *leaf = p->names[s->funcs[s->locs[st->locs[st->n - 1]].func].name];
		if (!strcmp(leaf, "sched_yield") || !strcmp(leaf, "__sched_yield"))
			return 1;
	}
	for (uint32_t k = 0; k < st->n; k++) {
		uint32_t fn = s->locs[st->locs[k]].func;
		if (fcomm ? fcomm[fn] : func_is_comm(p, &s->funcs[fn]))
			return 1;
	}
	return 0;
}

/* Whether an on-CPU sample counts for the sampled work: when every rank marks steps, only
 * those inside its steps (from the first mark to its last), so that start-up (importing
 * torch: seconds) does not dilute the difference of the ranks' steps. */
static int in_loop(const ana_profile *p, const ana_sample *sm)
{
	const ana_sampling *s = &p->smp;
	if (sm->kind != ANA_CPU || sm->stack >= s->nstacks || sm->thread >= p->nthreads)
		return 0;
	for (uint32_t r = 0; r < p->nranks; r++)
		if (!p->ranks[r].steps)
			return 1;
	uint64_t steps = p->ranks[p->procs[p->threads[sm->thread].process].rank_index].steps;
	return sm->step >= 1 && sm->step <= steps;
}

/*
 * Ranks without regions (a PyTorch DDP script, an MPI program nobody marked up) still
 * have samples: a rank's work is then its on-CPU sampled time outside communication code
 * (a sample with a communication function anywhere in its stack is communication), and
 * where the slowest loses time is the functions (the sample's innermost) whose self time
 * there exceeds the others' mean the most. Returns 1 when every rank has such work (and
 * sets the ranks' work and comm from it), 0 when not, -1 out of memory.
 */
static int sample_work(ana_profile *p)
{
	const ana_sampling *s = &p->smp;
	if (!s->present || !s->nsamples || !s->nfuncs || !s->period_ns)
		return 0;
	uint8_t *fcomm = malloc(s->nfuncs);
	int8_t *scomm = malloc(s->nstacks ? s->nstacks : 1);
	uint64_t *work = calloc(p->nranks, sizeof *work), *comm = calloc(p->nranks, sizeof *comm);
	if (!fcomm || !scomm || !work || !comm) {
		free(fcomm), free(scomm), free(work), free(comm);
		return -1;
	}
	for (uint32_t i = 0; i < s->nfuncs; i++)
		fcomm[i] = (uint8_t)func_is_comm(p, &s->funcs[i]);
	for (uint32_t i = 0; i < s->nstacks; i++)
		scomm[i] = (int8_t)stack_waits(p, &s->stacks[i], fcomm);
	for (size_t i = 0; i < s->nsamples; i++) {
		const ana_sample *sm = &s->samples[i];
		if (!in_loop(p, sm))
			continue;
		uint32_t r = p->procs[p->threads[sm->thread].process].rank_index;
		(scomm[sm->stack] ? comm : work)[r] += (uint64_t)sm->weight * s->period_ns;
	}
	int all = 1;
	for (uint32_t r = 0; r < p->nranks; r++)
		all &= work[r] > 0;
	if (all)
		for (uint32_t r = 0; r < p->nranks; r++) {
			p->ranks[r].work_ns = work[r];
			p->ranks[r].comm_ns = comm[r];
		}
	free(fcomm);
	free(scomm);
	free(work);
	free(comm);
	return all;
}

/* Keep a region (node) or function (func) among the slowest rank's top ANA_LOSSES losses,
 * by its time there (slow) over the other ranks' mean (from all, every rank's). */
static void add_loss(ana_profile *p, uint32_t node, uint32_t func, double slow, double all)
{
	ana_balance *b = &p->balance;
	double others = (all - slow) / (double)(p->nranks - 1), excess = slow - others;
	if (excess <= 0)
		return;
	uint32_t k = b->nlosses < ANA_LOSSES ? b->nlosses++ : ANA_LOSSES;
	if (k == ANA_LOSSES && excess <= b->losses[ANA_LOSSES - 1].excess_ns)
		return;
	if (k == ANA_LOSSES)
		k--;
	while (k > 0 && b->losses[k - 1].excess_ns < excess) {
		b->losses[k] = b->losses[k - 1];
		k--;
	}
	b->losses[k] = (ana_loss){node, func, (uint64_t)llround(slow), others, excess};
}

/* The functions whose self time (on-CPU samples outside communication code) in the slowest
 * rank exceeds the other ranks' mean the most. */
static int find_sample_losses(ana_profile *p)
{
	ana_balance *b = &p->balance;
	const ana_sampling *s = &p->smp;
	double *slow = calloc(s->nfuncs, sizeof *slow), *all = calloc(s->nfuncs, sizeof *all);
	uint8_t *skip = calloc(s->nstacks ? s->nstacks : 1, 1);
	if (!slow || !all || !skip) {
		free(slow), free(all), free(skip);
		return FENNEC_ENOMEM;
	}
	for (uint32_t i = 0; i < s->nstacks; i++)
		skip[i] = (uint8_t)stack_waits(p, &s->stacks[i], NULL);
	for (size_t i = 0; i < s->nsamples; i++) {
		const ana_sample *sm = &s->samples[i];
		if (!in_loop(p, sm) || skip[sm->stack] || !s->stacks[sm->stack].n)
			continue;
		const ana_stack *st = &s->stacks[sm->stack];
		uint32_t fn = s->locs[st->locs[st->n - 1]].func;
		double ns = (double)sm->weight * (double)s->period_ns;
		all[fn] += ns;
		if (p->procs[p->threads[sm->thread].process].rank_index == b->slowest)
			slow[fn] += ns;
	}
	for (uint32_t n = 0; n < s->nfuncs; n++)
		add_loss(p, ANA_NONE, n, slow[n], all[n]);
	free(slow);
	free(all);
	free(skip);
	return 0;
}

const char *ana_loss_name(const ana_profile *p, const ana_loss *l, char *buf, size_t n)
{
	if (l->node != ANA_NONE)
		return p->nodes[l->node].path;
	const ana_func *fn = &p->smp.funcs[l->func];
	const char *file = fn->file != ANA_NONE ? p->names[fn->file] : NULL, *base = file ? strrchr(file, '/') : NULL;
	if (file && fn->line)
		snprintf(buf, n, "%s (%s:%u)", p->names[fn->name], base ? base + 1 : file, fn->line);
	else
		snprintf(buf, n, "%s", p->names[fn->name]);
	return buf;
}

/* ---- balance ---- */

/* The measure of a rank that the imbalance compares, per the basis. */
static double basis_of(const ana_rank *r, const char *basis)
{
	if (!strcmp(basis, "work") || !strcmp(basis, "samples"))
		return (double)r->work_ns;
	if (!strcmp(basis, "steps"))
		return r->step_dist.mean;
	return (double)r->wall_ns;
}

/* Regions whose self time in the slowest rank exceeds the other ranks' mean the most
 * (communication regions left out: the slowest rank waits less there, not more). */
static int find_losses(ana_profile *p)
{
	ana_balance *b = &p->balance;
	double *slow = calloc(p->nnodes ? p->nnodes : 1, sizeof *slow);
	double *all = calloc(p->nnodes ? p->nnodes : 1, sizeof *all);
	if (!slow || !all) {
		free(slow);
		free(all);
		return FENNEC_ENOMEM;
	}
	for (uint32_t i = 0; i < p->ntnodes; i++) {
		const ana_tnode *t = &p->tnodes[i];
		double self = t->total_ns > t->child_ns ? (double)(t->total_ns - t->child_ns) : 0;
		all[t->node] += self;
		if (p->procs[p->threads[t->thread].process].rank_index == b->slowest)
			slow[t->node] += self;
	}
	for (uint32_t n = 0; n < p->nnodes; n++) {
		if (under_comm(p, n))
			continue;
		add_loss(p, n, ANA_NONE, slow[n], all[n]);
	}
	free(slow);
	free(all);
	return 0;
}

static int balance(ana_profile *p)
{
	ana_balance *b = &p->balance;
	b->step_imbalance_pct = NAN;
	if (p->nranks < 2)
		return 0;
	int work = 1, steps = 1;
	for (uint32_t i = 0; i < p->nranks; i++) {
		if (p->ranks[i].rank < 0)
			return 0; /* separate runs, not the ranks of a job: nothing to balance */
		work &= p->ranks[i].work_ns > 0;
		steps &= p->ranks[i].steps > 0;
	}
	b->present = 1;
	int sampled = 0;
	if (!work && (sampled = sample_work(p)) < 0)
		return FENNEC_ENOMEM;
	b->basis = work ? "work" : sampled ? "samples" : steps ? "steps" : "wall";
	double sum = 0, smean = 0, smax = 0;
	for (uint32_t i = 0; i < p->nranks; i++) {
		double v = basis_of(&p->ranks[i], b->basis);
		sum += v;
		if (!i || v > b->max_ns) {
			b->max_ns = v;
			b->slowest = i;
		}
		if (!i || v < b->min_ns) {
			b->min_ns = v;
			b->fastest = i;
		}
		if (steps) {
			smean += p->ranks[i].step_dist.mean;
			if (p->ranks[i].step_dist.mean > smax)
				smax = p->ranks[i].step_dist.mean;
		}
	}
	b->mean_ns = sum / p->nranks;
	b->others_mean_ns = (sum - b->max_ns) / (p->nranks - 1);
	b->imbalance_pct = b->mean_ns > 0 ? 100 * (b->max_ns / b->mean_ns - 1) : 0;
	smean /= p->nranks;
	if (steps && smean > 0)
		b->step_imbalance_pct = 100 * (smax / smean - 1);
	return sampled ? find_sample_losses(p) : find_losses(p);
}

int ana_ranks(ana_profile *p)
{
	int rc = make_ranks(p);
	if (!rc)
		rc = process_totals(p);
	if (!rc)
		rc = balance(p);
	return rc;
}

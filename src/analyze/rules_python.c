/*
 * rules_python.c - the rules that only a Python program's frames can decide
 * (docs/bottlenecks.md): dataloader_workers, PyTorch DataLoader worker processes that cost
 * more CPU than the batches they make.
 */
#include "analyze/aggregate.h"

#include <math.h>
#include <stdlib.h>

#include "analyze/rules.h"

static int ends_with(const char *s, const char *tail)
{
	size_t n = strlen(s), k = strlen(tail);
	return n >= k && !strcmp(s + n - k, tail);
}

/*
 * dataloader_workers: a process is a DataLoader worker when one of its samples runs
 * torch's `_worker_loop`. Of the workers' CPU, `make` is what ran in a fetcher's fetch
 * (`_MapDatasetFetcher.fetch`, `_IterableDatasetFetcher.fetch`: the dataset's __getitem__
 * and the collate), the work num_workers=0 would do in the main process; the rest of their
 * CPU (their start, receiving indices, putting batches into shared memory and the queue)
 * and the main processes' CPU in `_MultiProcessingDataLoaderIter` (starting the workers,
 * receiving and rebuilding the batches) are what the workers cost beyond it. The finding
 * fires when that cost exceeds `make` by 3 % of the run's on-CPU samples or more: the
 * workers took more CPU than they took off the main process.
 */
#define DLW_MIN_PCT 3.0
#define DLW_MEDIUM_PCT 10.0
#define DLW_MIN_SAMPLES 30
void rule_dataloader_workers(ana_profile *p)
{
	const ana_sampling *s = &p->smp;
	if (!s->nstacks || !s->nfuncs || !p->nprocs || !s->py_samples)
		return;
	uint8_t *ff = calloc(s->nfuncs, 1);  /* 1 _worker_loop, 2 fetch, 4 the iterator */
	uint8_t *sf = calloc(s->nstacks, 1); /* the same, of a stack */
	uint8_t *worker = calloc(p->nprocs, 1);
	if (!ff || !sf || !worker)
		goto out;
	for (uint32_t i = 0; i < s->nfuncs; i++) {
		if (s->funcs[i].lang != ANA_LANG_PYTHON)
			continue;
		const char *n = p->names[s->funcs[i].name];
		ff[i] = !strcmp(n, "_worker_loop")						? 1
			: ends_with(n, "DatasetFetcher.fetch")					? 2
			: !strncmp(n, "_MultiProcessingDataLoaderIter.", 31)			? 4
												: 0;
	}
	for (uint32_t i = 0; i < s->nstacks; i++)
		for (uint32_t k = 0; k < s->stacks[i].n; k++)
			sf[i] |= ff[s->locs[s->stacks[i].locs[k]].func];
	uint64_t all = 0, wall = 0, make = 0, iter = 0, init = 0;
	for (size_t i = 0; i < s->nsamples; i++) {
		const ana_sample *sm = &s->samples[i];
		if (sm->kind == ANA_CPU && sm->stack < s->nstacks && (sf[sm->stack] & 1) && sm->thread < p->nthreads &&
		    p->threads[sm->thread].process < p->nprocs)
			worker[p->threads[sm->thread].process] = 1;
	}
	uint32_t nworkers = 0;
	for (uint32_t i = 0; i < p->nprocs; i++)
		nworkers += worker[i];
	if (!nworkers)
		goto out;
	uint32_t init_name = ana_intern(p, "_MultiProcessingDataLoaderIter.__init__");
	for (size_t i = 0; i < s->nsamples; i++) {
		const ana_sample *sm = &s->samples[i];
		if (sm->kind != ANA_CPU || sm->stack >= s->nstacks || sm->thread >= p->nthreads)
			continue;
		all += sm->weight;
		uint32_t pr = p->threads[sm->thread].process;
		if (pr < p->nprocs && worker[pr]) {
			wall += sm->weight;
			if (sf[sm->stack] & 2)
				make += sm->weight;
		} else if (sf[sm->stack] & 4) {
			iter += sm->weight;
			const ana_stack *st = &s->stacks[sm->stack];
			for (uint32_t k = 0; k < st->n; k++)
				if (s->funcs[s->locs[st->locs[k]].func].name == init_name) {
					init += sm->weight;
					break;
				}
		}
	}
	uint64_t cost = (wall - make) + iter;
	if (!all || cost <= make || cost - make < DLW_MIN_SAMPLES)
		goto out;
	double net_pct = 100.0 * (double)(cost - make) / (double)all;
	if (net_pct < DLW_MIN_PCT)
		goto out;
	double per = (double)s->period_ns;
	char a[32], b[32], c[32], d[32], e[32];
	ana_finding *f = ana_finding_add(p, "dataloader_workers", net_pct >= DLW_MEDIUM_PCT ? ANA_MEDIUM : ANA_LOW);
	if (!f)
		goto out;
	f->subject = strdup("DataLoader workers");
	f->evidence = ana_strf("%u DataLoader worker process%s used %s of CPU, %s of it making batches (the dataset's "
			       "__getitem__ and the collate, in fetch); the main process spent %s in "
			       "_MultiProcessingDataLoaderIter (%s of it starting the workers): the workers cost "
			       "%.1f%% of the run's CPU more than the work they took off the main process",
			       nworkers, nworkers == 1 ? "" : "es", ana_fmt_ns((double)wall * per, a, sizeof a),
			       ana_fmt_ns((double)make * per, b, sizeof b), ana_fmt_ns((double)iter * per, c, sizeof c),
			       ana_fmt_ns((double)init * per, d, sizeof d), net_pct);
	ana_finding_num(f, "workers", nworkers);
	ana_finding_num(f, "worker_cpu_ns", (double)wall * per);
	ana_finding_num(f, "make_ns", (double)make * per);
	ana_finding_num(f, "main_loader_ns", (double)iter * per);
	ana_finding_num(f, "start_ns", (double)init * per);
	ana_finding_num(f, "net_pct", net_pct);
	f->recommendation = ana_strf("Making the batches is cheap here (%s), and the workers' own costs are not: "
				     "starting them, passing every batch through shared memory and a queue, and "
				     "receiving it in the main process. Load in the main process "
				     "(DataLoader(num_workers=0)), or use fewer workers; keep them across epochs "
				     "with persistent_workers=True where they start again each epoch; workers pay "
				     "off when __getitem__ does real work (decoding, augmentation) and cores are "
				     "free for them. Up to %.0f%% of the run's CPU time would go.",
				     ana_fmt_ns((double)make * per, e, sizeof e), net_pct);
	f->expected_gain_pct = NAN;
out:
	free(ff);
	free(sf);
	free(worker);
}

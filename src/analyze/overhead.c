/*
 * overhead.c - what fennec cost the recorded program: its writer thread's CPU, which the
 * collector measures, and its work on the program's own threads, from the COST chunk
 * (format 1.8): the time measured there (signal handlers, heap records) and the counts
 * the file holds (events, heap calls, samples) times the costs the collector calibrated on
 * the same machine. docs/json.md, `summary.overhead`; docs/internals/collect.md, "What
 * fennec costs".
 */
#include "analyze/analyze.h"
#include <string.h>

int ana_overhead_file(const fmt_file *f, ana_overhead *o)
{
	memset(o, 0, sizeof *o);
	if (!f->has_cost || !f->has_collector_cpu)
		return 0;
	o->writer_ns = (double)f->collector_cpu_ns;
	o->events_ns = (double)f->events * (double)f->cost_event_ps / 1000.0;
	o->heap_ns = (double)f->cost_heap_record_ns;
	/* the wrappers count every call in every heap mode; HEAP chunks (sampled, full) hold
	 * the same counts */
	double calls = f->has_cost_heap_calls ? (double)f->cost_heap_calls
		       : f->has_heap ? (double)(f->heap.allocs + f->heap.frees) : 0;
	o->heap_ns += calls * (double)f->cost_heap_call_ps / 1000.0;
	o->samples_ns = (double)f->cost_handler_ns + (double)f->samples_taken * (double)f->cost_sample_kernel_ns;
	o->total_ns = o->writer_ns + o->events_ns + o->heap_ns + o->samples_ns;
	o->known = 1;
	return 1;
}

void ana_overhead_sum(ana_profile *p)
{
	ana_overhead sum = {0};
	uint32_t known = 0;
	for (uint32_t i = 0; i < p->nprocs; i++) {
		ana_overhead o;
		if (!ana_overhead_file(&p->procs[i].file, &o))
			continue;
		sum.writer_ns += o.writer_ns;
		sum.events_ns += o.events_ns;
		sum.heap_ns += o.heap_ns;
		sum.samples_ns += o.samples_ns;
		sum.total_ns += o.total_ns;
		known++;
	}
	sum.known = p->nprocs > 0 && known == p->nprocs;
	p->overhead = sum;
}

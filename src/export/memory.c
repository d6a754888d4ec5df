/*
 * memory.c - memory flame graphs: the heap profile's allocation stacks (p->mem.sites,
 * src/analyze/memory.c) weighted by bytes instead of samples. Which bytes is the option's
 * choice (enum exp_memory); the stack exporters (stacks.c for folded and svg, pprof.c,
 * speedscope.c) take the weights from here and draw them as they draw samples.
 */
#include "export/internal.h"

#include <math.h>

static const char *const names[] = {
	[EXP_MEM_ALLOCATED] = "allocated", [EXP_MEM_PEAK] = "peak", [EXP_MEM_LEAKED] = "leaked", [EXP_MEM_LIVE] = "live",
};

static const char *const what[] = {
	[EXP_MEM_ALLOCATED] = "heap bytes allocated",
	[EXP_MEM_PEAK] = "heap bytes live at the peak",
	[EXP_MEM_LEAKED] = "heap bytes leaked (unfreed at exit)",
	[EXP_MEM_LIVE] = "heap bytes live at the end, the runtime's and those of processes cut short included",
};

int exp_memory_parse(const char *name)
{
	for (int i = EXP_MEM_ALLOCATED; name && i < (int)ARRAY_LEN(names); i++)
		if (!strcmp(name, names[i]))
			return i;
	return -1;
}

const char *exp_memory_name(int memory)
{
	return memory > EXP_MEM_NONE && memory < (int)ARRAY_LEN(names) ? names[memory] : "";
}

const char *exp_memory_what(int memory)
{
	return memory > EXP_MEM_NONE && memory < (int)ARRAY_LEN(what) ? what[memory] : "";
}

static uint64_t whole(double v) { return v > 0 && isfinite(v) ? (uint64_t)llround(v) : 0; }

uint64_t exp_site_bytes(const ana_mem_site *s, int memory, uint64_t *count)
{
	double bytes = 0, n = 0;
	switch (memory) {
	case EXP_MEM_ALLOCATED: bytes = s->bytes, n = s->allocs; break;
	case EXP_MEM_PEAK: bytes = s->peak_bytes, n = s->peak_count; break;
	case EXP_MEM_LEAKED:
	case EXP_MEM_LIVE:
		/* What the analysis counts as unfreed (ana_memory_finish): a site whose estimated
		 * live count rounds to none holds nothing. */
		if (s->live_count > 0.5 && !(memory == EXP_MEM_LEAKED && (s->runtime || s->cut_short)))
			bytes = s->live_bytes, n = s->live_count;
		break;
	}
	if (count)
		*count = whole(n);
	return whole(bytes);
}

int exp_sel_site(const exp_sel *s, const ana_mem_site *x)
{
	return !s->node_in || (x->node < s->p->nnodes && s->node_in[x->node]);
}

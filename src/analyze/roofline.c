/*
 * roofline.c - regions annotated with fennec_region_work() placed against this machine's
 * ceilings from `fennec calibrate` (docs/roofline.md). The work is the innermost region's,
 * so it is set against the region's self time. One-thread ceilings for a region that ran
 * on one thread, the all-thread ones otherwise.
 */
#include "analyze/aggregate.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static void load_calibration(ana_profile *p)
{
	ana_roofline *r = &p->roof;
	if (p->opt.calibration)
		snprintf(r->path, sizeof r->path, "%s", p->opt.calibration);
	else if (ana_calib_default_path(r->path, sizeof r->path) < 0)
		return;
	int line;
	if (ana_calib_load(r->path, &r->calib, &line) == 0) {
		r->calibrated = 1;
		return;
	}
	if (errno == ENOENT && !p->opt.calibration)
		return; /* not calibrated: the report says how */
	r->calibrated = -1;
	if (errno == EINVAL && line)
		snprintf(r->error, sizeof r->error, "line %d is not a calibration entry", line);
	else if (errno == EINVAL)
		snprintf(r->error, sizeof r->error, "not a fennec calibration file (no bandwidth or FLOP/s in it)");
	else
		snprintf(r->error, sizeof r->error, "%s", strerror(errno));
}

static int cmp_self(const void *a, const void *b)
{
	double x = ((const ana_roof *)a)->self_s, y = ((const ana_roof *)b)->self_s;
	return (x < y) - (x > y);
}

int ana_roofline_build(ana_profile *p)
{
	ana_roofline *r = &p->roof;
	uint32_t n = 0;
	for (uint32_t i = 0; i < p->nnodes; i++)
		n += p->nodes[i].flops > 0 || p->nodes[i].bytes > 0;
	if (!n)
		return 0;
	load_calibration(p);
	if (!(r->r = calloc(n, sizeof *r->r)))
		return FENNEC_ENOMEM;
	const ana_calib *c = &r->calib;
	for (uint32_t i = 0; i < p->nnodes; i++) {
		const ana_node *nd = &p->nodes[i];
		if (!(nd->flops > 0 || nd->bytes > 0))
			continue;
		ana_roof *x = &r->r[r->n++];
		x->node = i;
		x->flops = nd->flops;
		x->bytes = nd->bytes;
		x->self_s = (double)nd->self_ns * 1e-9;
		x->ai = nd->bytes > 0 ? nd->flops / nd->bytes : NAN;
		x->flops_per_s = x->self_s > 0 ? nd->flops / x->self_s : NAN;
		x->bytes_per_s = x->self_s > 0 ? nd->bytes / x->self_s : NAN;
		x->one_thread = nd->threads <= 1;
		x->fp32 = nd->flops32 * 2 > nd->flops;
		x->roof = x->roof_pct = x->ridge = NAN;
		if (r->calibrated != 1) {
			x->memory_bound = nd->flops <= 0;
			continue;
		}
		double bw = x->one_thread && c->bw_triad_1t > 0 ? c->bw_triad_1t : c->bw_triad;
		double p64 = x->one_thread && c->flops_fp64_1t > 0 ? c->flops_fp64_1t : c->flops_fp64;
		double p32 = x->one_thread && c->flops_fp32_1t > 0 ? c->flops_fp32_1t : c->flops_fp32;
		double peak = x->fp32 && p32 > 0 ? p32 : p64;
		x->ridge = peak / bw;
		if (nd->flops <= 0) { /* bytes only: against the bandwidth */
			x->memory_bound = 1;
			x->roof = bw;
			x->roof_pct = 100 * x->bytes_per_s / bw;
		} else {
			double mem = nd->bytes > 0 ? x->ai * bw : INFINITY;
			x->memory_bound = mem < peak;
			x->roof = x->memory_bound ? mem : peak;
			x->roof_pct = 100 * x->flops_per_s / x->roof;
		}
	}
	qsort(r->r, r->n, sizeof *r->r, cmp_self);
	return 0;
}

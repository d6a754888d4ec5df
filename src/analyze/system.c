/*
 * system.c - system metrics and energy (analyze/system.h): SYSTEM points of each process
 * into totals and a timeline of rates, ENERGY counters into joules per domain (wraps
 * undone, each host's counters counted once), an estimate from CPU time where no counter
 * measured the CPU, carbon at a grid intensity, energy per step; and the rules io_bound,
 * cpu_starved and swapping (docs/bottlenecks.md).
 */
#include "analyze/aggregate.h"

#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

static ana_system *sys_get(ana_profile *p)
{
	if (!p->sys)
		p->sys = calloc(1, sizeof *p->sys);
	return p->sys;
}

static ana_sys_proc *sys_proc(ana_profile *p, uint32_t proc)
{
	ana_system *s = sys_get(p);
	if (!s)
		return NULL;
	if (s->nprocs && s->procs[s->nprocs - 1].process == proc)
		return &s->procs[s->nprocs - 1];
	for (uint32_t i = 0; i < s->nprocs; i++)
		if (s->procs[i].process == proc)
			return &s->procs[i];
	size_t cap = s->cap;
	if (ana_grow(&s->procs, &cap, s->nprocs, sizeof *s->procs) < 0)
		return NULL;
	s->cap = (uint32_t)cap;
	ana_sys_proc *sp = &s->procs[s->nprocs++];
	memset(sp, 0, sizeof *sp);
	sp->process = proc;
	return sp;
}

static double field(const fmt_sys *s, unsigned f) { return s->present >> f & 1 ? (double)s->v[f] : NAN; }

/* The counter `f` gained from a to b (0 when either lacks it or it went back). */
static double gain(const fmt_sys *a, const fmt_sys *b, unsigned f)
{
	if (!(a->present >> f & 1) || !(b->present >> f & 1) || b->v[f] < a->v[f])
		return 0;
	return (double)(b->v[f] - a->v[f]);
}

static int sys_point(ana_profile *p, uint32_t proc, const fmt_file *f, const fmt_sys *r)
{
	ana_sys_proc *sp = sys_proc(p, proc);
	if (!sp)
		return -1;
	ana_system *s = p->sys;
	if (!s->present) {
		s->present = 1;
		s->interval_ns = f->sys_interval_ns;
		s->cpus = f->sys_cpus;
		s->mem_total = f->sys_mem_total;
	}
	sp->present |= r->present;
	if (!sp->first.t_ns && !sp->first.present) {
		sp->first = sp->last = *r;
		return 0;
	}
	if (r->t_ns <= sp->last.t_ns) /* points arrive in time order; a repeat adds nothing */
		return 0;
	if (ana_grow(&sp->points, &sp->cap, sp->npoints, sizeof *sp->points) < 0)
		return -1;
	const fmt_sys *a = &sp->last;
	double dt = (double)(r->t_ns - a->t_ns), per_s = 1e9 / dt;
	ana_sys_point *pt = &sp->points[sp->npoints++];
	memset(pt, 0, sizeof *pt);
	pt->t_ns = r->t_ns;
	pt->step = r->step;
	pt->dt_ns = dt;
	pt->cpu_user_pct = 100 * gain(a, r, FMT_SY_CPU_USER_NS) / dt;
	pt->cpu_sys_pct = 100 * gain(a, r, FMT_SY_CPU_SYS_NS) / dt;
	pt->cpu_pct = pt->cpu_user_pct + pt->cpu_sys_pct;
	pt->rss_bytes = field(r, FMT_SY_RSS);
	pt->swap_bytes = field(r, FMT_SY_SWAP);
	pt->threads = field(r, FMT_SY_THREADS);
	pt->fds = field(r, FMT_SY_FDS);
	pt->disk_read_bps = gain(a, r, FMT_SY_DISK_READ) * per_s;
	pt->disk_write_bps = gain(a, r, FMT_SY_DISK_WRITE) * per_s;
	pt->net_rx_bps = gain(a, r, FMT_SY_NET_RX) * per_s;
	pt->net_tx_bps = gain(a, r, FMT_SY_NET_TX) * per_s;
	pt->rw_bps = a->present >> FMT_SY_RCHAR & r->present >> FMT_SY_RCHAR & 1
			     ? (gain(a, r, FMT_SY_RCHAR) + gain(a, r, FMT_SY_WCHAR)) * per_s : NAN;
	pt->major_faults_per_s = gain(a, r, FMT_SY_MAJFLT) * per_s;
	pt->ivcsw_per_s = gain(a, r, FMT_SY_IVCSW) * per_s;
	pt->wait_pct = a->present >> FMT_SY_RUN_DELAY_NS & r->present >> FMT_SY_RUN_DELAY_NS & 1
			       ? 100 * gain(a, r, FMT_SY_RUN_DELAY_NS) / dt : NAN;
	double busy = gain(a, r, FMT_SY_MACH_BUSY_NS), idle = gain(a, r, FMT_SY_MACH_IDLE_NS);
	pt->machine_cpu_pct = busy + idle > 0 ? 100 * busy / (busy + idle) : NAN;
	pt->machine_iowait_pct = busy + idle > 0 ? 100 * gain(a, r, FMT_SY_MACH_IOWAIT_NS) / (busy + idle) : NAN;
	pt->load1 = r->present >> FMT_SY_LOAD1_MILLI & 1 ? (double)r->v[FMT_SY_LOAD1_MILLI] / 1000 : NAN;
	pt->procs_running = field(r, FMT_SY_PROCS_RUNNING);
	sp->last = *r;
	return 0;
}

static ana_energy *energy_get(ana_profile *p)
{
	if (!p->energy)
		p->energy = calloc(1, sizeof *p->energy);
	return p->energy;
}

static int energy_reading(ana_profile *p, uint32_t proc, const fmt_energy *e)
{
	ana_energy *en = energy_get(p);
	if (!en)
		return -1;
	ana_energy_domain *d = NULL;
	for (uint32_t i = en->ndomains; i-- > 0;)
		if (en->domains[i].process == proc && en->domains[i].domain == e->domain) {
			d = &en->domains[i];
			break;
		}
	if (!d) {
		size_t cap = en->cap;
		if (ana_grow(&en->domains, &cap, en->ndomains, sizeof *en->domains) < 0)
			return -1;
		en->cap = (uint32_t)cap;
		d = &en->domains[en->ndomains++];
		memset(d, 0, sizeof *d);
		d->process = proc;
		d->domain = e->domain;
		d->source = e->source;
		d->kind = e->kind;
		d->name = e->name;
	}
	if (d->n && e->t_ns <= d->t_ns[d->n - 1])
		return 0;
	size_t c1 = d->cap, c2 = d->cap;
	if (ana_grow(&d->t_ns, &c1, d->n, sizeof *d->t_ns) < 0 || ana_grow(&d->uj, &c2, d->n, sizeof *d->uj) < 0)
		return -1;
	d->cap = c1 < c2 ? c1 : c2;
	double v = 0;
	if (d->n) {
		uint64_t prev = d->last_raw;
		double step;
		if (e->uj >= prev) {
			step = (double)(e->uj - prev);
		} else { /* the counter wrapped at max_uj (RAPL's max_energy_range_uj), or was reset */
			step = e->max_uj >= prev ? (double)(e->max_uj - prev) + (double)e->uj : (double)e->uj;
			d->wraps++;
		}
		v = d->uj[d->n - 1] + step;
	}
	d->t_ns[d->n] = e->t_ns;
	d->uj[d->n] = v;
	d->n++;
	d->last_raw = e->uj;
	return 0;
}

int ana_sys_event(ana_profile *p, uint32_t proc, const fmt_file *f, const fmt_event *ev)
{
	if (ev->type == FMT_EV_SYS)
		return sys_point(p, proc, f, ev->sys) < 0 ? FENNEC_ENOMEM : 0;
	if (ev->type == FMT_EV_ENERGY)
		return energy_reading(p, proc, ev->energy) < 0 ? FENNEC_ENOMEM : 0;
	return 0;
}

void ana_sys_discard(ana_profile *p, uint32_t proc)
{
	if (p->sys) {
		ana_system *s = p->sys;
		uint32_t k = 0;
		for (uint32_t i = 0; i < s->nprocs; i++) {
			if (s->procs[i].process == proc)
				free(s->procs[i].points);
			else
				s->procs[k++] = s->procs[i];
		}
		s->nprocs = k;
	}
	if (p->energy) {
		ana_energy *en = p->energy;
		uint32_t k = 0;
		for (uint32_t i = 0; i < en->ndomains; i++) {
			if (en->domains[i].process == proc) {
				free(en->domains[i].t_ns);
				free(en->domains[i].uj);
			} else {
				en->domains[k++] = en->domains[i];
			}
		}
		en->ndomains = k;
	}
}

void ana_sys_free(ana_profile *p)
{
	if (p->sys) {
		for (uint32_t i = 0; i < p->sys->nprocs; i++)
			free(p->sys->procs[i].points);
		free(p->sys->procs);
		free(p->sys);
		p->sys = NULL;
	}
	if (p->energy) {
		for (uint32_t i = 0; i < p->energy->ndomains; i++) {
			free(p->energy->domains[i].t_ns);
			free(p->energy->domains[i].uj);
		}
		free(p->energy->domains);
		free(p->energy->step_joules.v);
		free(p->energy);
		p->energy = NULL;
	}
}

const char *ana_energy_kind_name(unsigned kind)
{
	static const char *const n[] = {"other", "package", "core", "uncore", "dram", "psys", "gpu"};
	return kind < ARRAY_LEN(n) ? n[kind] : "other";
}

static int same_host(const ana_profile *p, uint32_t a, uint32_t b)
{
	const char *x = p->procs[a].file.host, *y = p->procs[b].file.host;
	return !strcmp(x ? x : "", y ? y : "");
}

static void sys_totals(ana_profile *p)
{
	ana_system *s = p->sys;
	double cpu_ns = 0;
	for (uint32_t i = 0; i < s->nprocs; i++) {
		ana_sys_proc *sp = &s->procs[i];
		const fmt_sys *a = &sp->first, *b = &sp->last;
		sp->span_ns = (double)(b->t_ns - a->t_ns);
		sp->disk_read_bytes = gain(a, b, FMT_SY_DISK_READ);
		sp->disk_write_bytes = gain(a, b, FMT_SY_DISK_WRITE);
		sp->net_rx_bytes = gain(a, b, FMT_SY_NET_RX);
		sp->net_tx_bytes = gain(a, b, FMT_SY_NET_TX);
		sp->minor_faults = gain(a, b, FMT_SY_MINFLT);
		sp->major_faults = gain(a, b, FMT_SY_MAJFLT);
		sp->voluntary_switches = gain(a, b, FMT_SY_VCSW);
		sp->involuntary_switches = gain(a, b, FMT_SY_IVCSW);
		sp->cpu_ns = gain(a, b, FMT_SY_CPU_USER_NS) + gain(a, b, FMT_SY_CPU_SYS_NS);
		/* run-queue waits summed per interval: a thread that ended takes its waits out of the sum */
		sp->run_delay_ns = sp->present >> FMT_SY_RUN_DELAY_NS & 1 ? 0 : NAN;
		sp->cpu_pct_mean = sp->span_ns > 0 ? 100 * sp->cpu_ns / sp->span_ns : NAN;
		sp->cpu_pct_max = sp->rss_max_bytes = sp->swap_max_bytes = sp->threads_max = sp->fds_max = NAN;
		sp->load1_max = NAN;
		double mbusy = 0, mdt = 0, run = 0, nrun = 0;
		for (size_t k = 0; k < sp->npoints; k++) {
			const ana_sys_point *pt = &sp->points[k];
#define MAXF(x, v) do { if (isfinite(v) && !((x) >= (v))) (x) = (v); } while (0)
			MAXF(sp->cpu_pct_max, pt->cpu_pct);
			MAXF(sp->rss_max_bytes, pt->rss_bytes);
			MAXF(sp->swap_max_bytes, pt->swap_bytes);
			MAXF(sp->threads_max, pt->threads);
			MAXF(sp->fds_max, pt->fds);
			MAXF(sp->load1_max, pt->load1);
			if (isfinite(pt->machine_cpu_pct)) {
				mbusy += pt->machine_cpu_pct * pt->dt_ns;
				mdt += pt->dt_ns;
			}
			if (isfinite(pt->wait_pct) && isfinite(sp->run_delay_ns))
				sp->run_delay_ns += pt->wait_pct / 100 * pt->dt_ns;
			if (isfinite(pt->procs_running)) {
				run += pt->procs_running;
				nrun++;
			}
		}
		sp->machine_cpu_pct_mean = mdt > 0 ? mbusy / mdt : NAN;
		sp->procs_running_mean = nrun ? run / nrun : NAN;
		s->disk_read_bytes += sp->disk_read_bytes;
		s->disk_write_bytes += sp->disk_write_bytes;
		s->minor_faults += sp->minor_faults;
		s->major_faults += sp->major_faults;
		s->voluntary_switches += sp->voluntary_switches;
		s->involuntary_switches += sp->involuntary_switches;
		cpu_ns += sp->cpu_ns;
		MAXF(s->cpu_pct_max, sp->cpu_pct_max);
	}
	/* network counters are the namespace's: once per host, from its longest observer */
	for (uint32_t i = 0; i < s->nprocs; i++) {
		ana_sys_proc *sp = &s->procs[i];
		int best = 1;
		for (uint32_t j = 0; j < s->nprocs && best; j++)
			if (j != i && same_host(p, sp->process, s->procs[j].process) &&
			    (s->procs[j].span_ns > sp->span_ns || (s->procs[j].span_ns == sp->span_ns && j < i)))
				best = 0;
		if (best) {
			sp->net_counted = 1;
			s->net_rx_bytes += sp->net_rx_bytes;
			s->net_tx_bytes += sp->net_tx_bytes;
		}
	}
	double span = s->nprocs ? s->procs[0].span_ns : 0;
	s->cpu_pct_mean = span > 0 ? 100 * cpu_ns / span : NAN;
}

/* Domain d's cumulative microjoules at t_ns, linear between readings, held at the ends. */
static double domain_at(const ana_energy_domain *d, double t)
{
	if (!d->n)
		return 0;
	if (t <= (double)d->t_ns[0])
		return d->uj[0];
	if (t >= (double)d->t_ns[d->n - 1])
		return d->uj[d->n - 1];
	size_t lo = 0, hi = d->n - 1;
	while (hi - lo > 1) {
		size_t mid = (lo + hi) / 2;
		if ((double)d->t_ns[mid] <= t)
			lo = mid;
		else
			hi = mid;
	}
	double t0 = (double)d->t_ns[lo], t1 = (double)d->t_ns[hi];
	return d->uj[lo] + (d->uj[hi] - d->uj[lo]) * (t - t0) / (t1 - t0);
}

/* The CPU ns of the stepping process at t (its SYSTEM points), for the estimate per step. */
static double cpu_at(const ana_sys_proc *sp, double t)
{
	double c0 = 0;
	const fmt_sys *a = &sp->first;
	if (t <= (double)a->t_ns || !sp->npoints)
		return 0;
	uint64_t prev_t = a->t_ns;
	for (size_t k = 0; k < sp->npoints; k++) {
		const ana_sys_point *pt = &sp->points[k];
		double c1 = c0 + (pt->cpu_pct / 100) * pt->dt_ns;
		if (t <= (double)pt->t_ns)
			return c0 + (c1 - c0) * (t - (double)prev_t) / pt->dt_ns;
		c0 = c1;
		prev_t = pt->t_ns;
	}
	return c0;
}

static int energy_finish(ana_profile *p)
{
	ana_energy *en = energy_get(p);
	if (!en)
		return -1;
	en->present = 1;
	en->cpu_joules = en->dram_joules = en->gpu_joules = NAN;
	en->watts_per_core = NAN;
	en->grid_gco2_per_kwh = p->opt.carbon_intensity > 0 ? p->opt.carbon_intensity : ANA_GRID_GCO2_DEFAULT;
	/* Each host's counters once: from the process whose readings of that source span longest. */
	double pkg = 0, dram = 0, gpu = 0, span_ns = 0;
	int has_pkg = 0, has_dram = 0, has_gpu = 0;
	for (uint32_t i = 0; i < en->ndomains; i++) {
		ana_energy_domain *d = &en->domains[i];
		if (d->n < 2)
			continue;
		double span = (double)(d->t_ns[d->n - 1] - d->t_ns[0]);
		int best = 1;
		for (uint32_t j = 0; j < en->ndomains && best; j++) {
			const ana_energy_domain *o = &en->domains[j];
			if (j == i || o->process == d->process || o->source != d->source || o->n < 2 ||
			    !same_host(p, o->process, d->process))
				continue;
			double os = (double)(o->t_ns[o->n - 1] - o->t_ns[0]);
			if (os > span || (os == span && o->process < d->process))
				best = 0;
		}
		if (!best)
			continue;
		d->used = 1;
		en->wraps += d->wraps;
		double j = d->uj[d->n - 1] / 1e6;
		if (span > span_ns)
			span_ns = span;
		if (d->kind == FMT_EK_PACKAGE) {
			pkg += j;
			has_pkg = 1;
		} else if (d->kind == FMT_EK_DRAM) {
			dram += j;
			has_dram = 1;
		} else if (d->kind == FMT_EK_GPU) {
			gpu += j;
			has_gpu = 1;
		}
	}
	double watts = p->opt.cpu_watts > 0 ? p->opt.cpu_watts : ANA_CPU_WATTS_DEFAULT;
	if (has_pkg) {
		en->cpu_joules = pkg;
	} else {
		en->estimate = 1;
		en->watts_per_core = watts;
		en->cpu_joules = (double)(p->cpu_user_ns + p->cpu_sys_ns) / 1e9 * watts;
		if (span_ns <= 0)
			span_ns = (double)p->wall_ns;
	}
	if (has_dram)
		en->dram_joules = dram;
	if (has_gpu)
		en->gpu_joules = gpu;
	en->source = has_pkg ? (has_gpu ? "rapl+nvml" : "rapl") : has_gpu ? "estimate+nvml" : "estimate";
	en->total_joules = en->cpu_joules + (has_dram ? dram : 0) + (has_gpu ? gpu : 0);
	en->kwh = en->total_joules / 3.6e6;
	en->co2_grams = en->kwh * en->grid_gco2_per_kwh;
	en->span_s = span_ns / 1e9;
	en->mean_watts = span_ns > 0 ? en->total_joules / en->span_s : NAN;
	/* per step: the counters' gain over each step (interpolated between readings); the
	 * estimate, the stepping process's CPU time over the step times the model */
	en->step_joules_mean = NAN;
	if (p->step_ns.n && p->step_start_ns.n == p->step_ns.n) {
		const ana_sys_proc *sp = NULL;
		if (!has_pkg && p->sys)
			for (uint32_t i = 0; i < p->sys->nprocs && !sp; i++)
				if (p->sys->procs[i].process == 0)
					sp = &p->sys->procs[i];
		if (has_pkg || sp) {
			double sum = 0;
			for (size_t k = 0; k < p->step_ns.n; k++) {
				double t0 = (double)p->step_start_ns.v[k], t1 = t0 + (double)p->step_ns.v[k], j = 0;
				for (uint32_t i = 0; i < en->ndomains; i++) {
					const ana_energy_domain *d = &en->domains[i];
					if (d->used && (d->kind == FMT_EK_DRAM || d->kind == FMT_EK_GPU ||
							(has_pkg && d->kind == FMT_EK_PACKAGE)))
						j += (domain_at(d, t1) - domain_at(d, t0)) / 1e6;
				}
				if (!has_pkg)
					j += (cpu_at(sp, t1) - cpu_at(sp, t0)) / 1e9 * watts;
				if (ana_grow(&en->step_joules.v, &en->step_joules.cap, en->step_joules.n, sizeof(double)) < 0)
					return -1;
				en->step_joules.v[en->step_joules.n++] = j;
				sum += j;
			}
			en->step_joules_mean = sum / (double)p->step_ns.n;
		}
	}
	return 0;
}

int ana_sys_finish(ana_profile *p)
{
	if (p->sys && p->sys->nprocs)
		sys_totals(p);
	return energy_finish(p) < 0 ? FENNEC_ENOMEM : 0;
}

/* ---- rules (docs/bottlenecks.md) ---- */

#define IO_RATE_BPS (1u << 20)    /* disk or network from 1 MiB/s counts as moving data */
#define IO_IDLE_CPU_PCT 50.0      /* ... while the process used under half a core */
#define IO_SHARE_PCT 20.0         /* io_bound from this share of the process's time */
#define STARVED_SHARE_PCT 25.0    /* cpu_starved: waits from this share of the runnable time */
#define STARVED_MIN_CORES 0.1     /* ... and at least a tenth of a core's worth of waiting */
#define STARVED_MIN_NS 50e6       /* ... and 50 ms of it: a 2 ms shell fork's 1 ms wait is no finding */

static const char *proc_label(const ana_profile *p, uint32_t proc, char *buf, size_t n)
{
	const fmt_file *f = &p->procs[proc].file;
	snprintf(buf, n, "process %llu (%s)", (unsigned long long)f->pid, ana_origin_name(f->origin));
	return buf;
}

static void rule_io_bound(ana_profile *p, const ana_sys_proc *sp)
{
	double t_io = 0, t_all = 0, disk = 0, net = 0, cpu = 0;
	for (size_t k = 0; k < sp->npoints; k++) {
		const ana_sys_point *pt = &sp->points[k];
		t_all += pt->dt_ns;
		double d = pt->disk_read_bps + pt->disk_write_bps;
		/* the namespace's traffic, as far as the process's own reads and writes could
		 * have moved it (other programs' traffic is in the counters too) */
		double nt = sp->net_counted ? pt->net_rx_bps + pt->net_tx_bps : 0;
		if (isfinite(pt->rw_bps) && pt->rw_bps < nt)
			nt = pt->rw_bps;
		if ((d >= IO_RATE_BPS || nt >= IO_RATE_BPS) && pt->cpu_pct < IO_IDLE_CPU_PCT) {
			t_io += pt->dt_ns;
			disk += d * pt->dt_ns / 1e9;
			net += nt * pt->dt_ns / 1e9;
			cpu += pt->cpu_pct * pt->dt_ns;
		}
	}
	double share = t_all > 0 ? 100 * t_io / t_all : 0;
	if (share < IO_SHARE_PCT)
		return;
	ana_finding *f = ana_finding_add(p, "io_bound", share >= 50 ? ANA_HIGH : ANA_MEDIUM);
	if (!f)
		return;
	char who[64], a[32], b[32];
	const char *what = disk >= net ? "disk" : "network";
	double secs = t_io / 1e9;
	f->subject = ana_strf("%s waits on %s I/O", proc_label(p, sp->process, who, sizeof who), what);
	f->evidence = ana_strf("for %.0f%% of its time (%.2f s) it moved data (%s of disk, %s of network, %.1f MiB/s) "
			       "while using %.0f%% of a core",
			       share, secs, ana_fmt_bytes(disk, a, sizeof a), ana_fmt_bytes(net, b, sizeof b),
			       secs > 0 ? (disk + net) / secs / 1048576 : 0, t_io > 0 ? cpu / t_io : 0);
	ana_finding_num(f, "io_share_pct", share);
	ana_finding_num(f, "io_ns", t_io);
	ana_finding_num(f, "disk_bytes", disk);
	ana_finding_num(f, "net_bytes", net);
	ana_finding_num(f, "cpu_pct", t_io > 0 ? cpu / t_io : 0);
	f->recommendation = ana_strf("The CPU waits for %s: overlap I/O with compute (prefetch the next batch on other "
				     "threads or processes, asynchronous reads), read and write in larger blocks, cache "
				     "what is read again, or move the data to faster storage.",
				     disk >= net ? "the disk" : "the network");
	f->expected_gain_pct = share;
}

static void rule_cpu_starved(ana_profile *p, const ana_sys_proc *sp)
{
	double secs = sp->span_ns / 1e9;
	if (secs <= 0 || !isfinite(sp->run_delay_ns))
		return;
	/* of the time its threads were runnable, the share they waited for a CPU */
	double want = sp->run_delay_ns + sp->cpu_ns, share = want > 0 ? 100 * sp->run_delay_ns / want : 0;
	double wait_cores = sp->run_delay_ns / sp->span_ns;
	if (share < STARVED_SHARE_PCT || wait_cores < STARVED_MIN_CORES || sp->run_delay_ns < STARVED_MIN_NS)
		return;
	ana_finding *f = ana_finding_add(p, "cpu_starved", share >= 50 ? ANA_HIGH : ANA_MEDIUM);
	if (!f)
		return;
	char who[64];
	double cpus = (double)p->sys->cpus, ivcsw_s = sp->involuntary_switches / secs;
	f->subject = ana_strf("%s waits for a CPU", proc_label(p, sp->process, who, sizeof who));
	f->evidence = ana_strf("its threads waited %.2f s for a CPU while runnable, %.0f%% of the time they wanted one "
			       "(they ran %.2f s); %.1f runnable tasks on %.0f CPUs on average (1-minute load up to %.2f); "
			       "preempted %.0f times a second",
			       sp->run_delay_ns / 1e9, share, sp->cpu_ns / 1e9,
			       isfinite(sp->procs_running_mean) ? sp->procs_running_mean : 0, cpus,
			       isfinite(sp->load1_max) ? sp->load1_max : 0, ivcsw_s);
	ana_finding_num(f, "wait_share_pct", share);
	ana_finding_num(f, "run_delay_ns", sp->run_delay_ns);
	ana_finding_num(f, "runnable_mean", sp->procs_running_mean);
	ana_finding_num(f, "cpus", cpus);
	ana_finding_num(f, "load1_max", sp->load1_max);
	ana_finding_num(f, "involuntary_switches_per_s", ivcsw_s);
	f->recommendation = ana_strf("More threads want to run than there are CPUs: use no more threads than cores "
				     "(OMP_NUM_THREADS, torch.set_num_threads, the data loader's workers), stop what "
				     "else runs on the machine, or give the job more cores.");
	f->expected_gain_pct = share;
}

static void rule_swapping(ana_profile *p, const ana_sys_proc *sp)
{
	double secs = sp->span_ns / 1e9;
	double swap = isfinite(sp->swap_max_bytes) ? sp->swap_max_bytes : 0;
	if (secs <= 0 || swap <= 0 || sp->major_faults < 100)
		return;
	double per_s = sp->major_faults / secs;
	ana_finding *f = ana_finding_add(p, "swapping", per_s >= 100 ? ANA_HIGH : ANA_MEDIUM);
	if (!f)
		return;
	char who[64], a[32], b[32];
	f->subject = ana_strf("%s is swapping", proc_label(p, sp->process, who, sizeof who));
	f->evidence = ana_strf("up to %s of it was in swap, and it took %.0f major page faults (%.0f a second) reading "
			       "pages back; resident set up to %s",
			       ana_fmt_bytes(swap, a, sizeof a), sp->major_faults, per_s,
			       ana_fmt_bytes(isfinite(sp->rss_max_bytes) ? sp->rss_max_bytes : 0, b, sizeof b));
	ana_finding_num(f, "swap_max_bytes", swap);
	ana_finding_num(f, "major_faults", sp->major_faults);
	ana_finding_num(f, "major_faults_per_s", per_s);
	f->recommendation = ana_strf("The process needs more memory than the machine gives it: use less (smaller "
				     "batches, free what is no longer needed, memory-map data instead of loading it), "
				     "or run where there is more memory.");
	f->expected_gain_pct = 0;
}

void ana_sys_rules(ana_profile *p)
{
	if (!p->sys)
		return;
	for (uint32_t i = 0; i < p->sys->nprocs; i++) {
		rule_io_bound(p, &p->sys->procs[i]);
		rule_cpu_starved(p, &p->sys->procs[i]);
		rule_swapping(p, &p->sys->procs[i]);
	}
}

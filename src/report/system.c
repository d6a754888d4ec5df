/*
 * system.c (report) - the `system` and `energy` sections of the JSON (docs/json.md) and
 * their lines in the text summary, from p->sys and p->energy (analyze/system.h).
 */
#include "analyze/system.h"
#include "report/report.h"

#include <math.h>

#define IND ""
#define SYS_TIMELINE_MAX 2000 /* points per process, evenly thinned */

static uint64_t rel(const ana_profile *p, uint64_t t)
{
	uint64_t t0 = p->procs[0].file.start_mono_ns;
	return t > t0 ? t - t0 : 0;
}

static void counters(FILE *out, const char *ind, double dr, double dw, double nrx, double ntx, double minf, double majf,
		     double vcs, double ivcs, int *f)
{
	rep_json_knum(out, ind, "disk_read_bytes", dr, f);
	rep_json_knum(out, ind, "disk_write_bytes", dw, f);
	rep_json_knum(out, ind, "net_rx_bytes", nrx, f);
	rep_json_knum(out, ind, "net_tx_bytes", ntx, f);
	rep_json_knum(out, ind, "minor_faults", minf, f);
	rep_json_knum(out, ind, "major_faults", majf, f);
	rep_json_knum(out, ind, "voluntary_switches", vcs, f);
	rep_json_knum(out, ind, "involuntary_switches", ivcs, f);
}

static void sys_proc_json(FILE *out, const ana_profile *p, const ana_sys_proc *sp)
{
	const fmt_file *file = &p->procs[sp->process].file;
	int f = 1;
	rep_json_knum(out, IND, "pid", (double)file->pid, &f);
	rep_json_kstr(out, IND, "origin", ana_origin_name(file->origin), &f);
	rep_json_kstr(out, IND, "command", file->cmdline, &f);
	rep_json_knum(out, IND, "span_ns", sp->span_ns, &f);
	counters(out, IND, sp->disk_read_bytes, sp->disk_write_bytes, sp->net_rx_bytes, sp->net_tx_bytes, sp->minor_faults,
		 sp->major_faults, sp->voluntary_switches, sp->involuntary_switches, &f);
	rep_json_key(out, IND, "net_counted", &f);
	fputs(sp->net_counted ? "true" : "false", out);
	rep_json_knum(out, IND, "cpu_ns", sp->cpu_ns, &f);
	rep_json_knum(out, IND, "run_delay_ns", sp->run_delay_ns, &f);
	rep_json_knum(out, IND, "cpu_pct_mean", sp->cpu_pct_mean, &f);
	rep_json_knum(out, IND, "cpu_pct_max", sp->cpu_pct_max, &f);
	rep_json_knum(out, IND, "rss_max_bytes", sp->rss_max_bytes, &f);
	rep_json_knum(out, IND, "swap_max_bytes", sp->swap_max_bytes, &f);
	rep_json_knum(out, IND, "threads_max", sp->threads_max, &f);
	rep_json_knum(out, IND, "fds_max", sp->fds_max, &f);
	rep_json_knum(out, IND, "machine_cpu_pct_mean", sp->machine_cpu_pct_mean, &f);
	rep_json_knum(out, IND, "load1_max", sp->load1_max, &f);
	rep_json_knum(out, IND, "runnable_mean", sp->procs_running_mean, &f);
	rep_json_key(out, IND, "timeline", &f);
	fputc('[', out);
	size_t n = sp->npoints, stride = n > SYS_TIMELINE_MAX ? (n + SYS_TIMELINE_MAX - 1) / SYS_TIMELINE_MAX : 1;
	for (size_t k = 0; k < n; k += stride) {
		const ana_sys_point *pt = &sp->points[k];
		int g = 1;
		fputs(k ? ",\n     {" : "\n     {", out);
		rep_json_knum(out, IND, "t_ns", (double)rel(p, pt->t_ns), &g);
		rep_json_knum(out, IND, "step", (double)pt->step, &g);
		rep_json_knum(out, IND, "cpu_pct", pt->cpu_pct, &g);
		rep_json_knum(out, IND, "cpu_user_pct", pt->cpu_user_pct, &g);
		rep_json_knum(out, IND, "cpu_sys_pct", pt->cpu_sys_pct, &g);
		rep_json_knum(out, IND, "rss_bytes", pt->rss_bytes, &g);
		rep_json_knum(out, IND, "swap_bytes", pt->swap_bytes, &g);
		rep_json_knum(out, IND, "threads", pt->threads, &g);
		rep_json_knum(out, IND, "fds", pt->fds, &g);
		rep_json_knum(out, IND, "disk_read_bytes_per_s", pt->disk_read_bps, &g);
		rep_json_knum(out, IND, "disk_write_bytes_per_s", pt->disk_write_bps, &g);
		rep_json_knum(out, IND, "net_rx_bytes_per_s", pt->net_rx_bps, &g);
		rep_json_knum(out, IND, "net_tx_bytes_per_s", pt->net_tx_bps, &g);
		rep_json_knum(out, IND, "machine_cpu_pct", pt->machine_cpu_pct, &g);
		rep_json_knum(out, IND, "load1", pt->load1, &g);
		rep_json_knum(out, IND, "runnable", pt->procs_running, &g);
		rep_json_knum(out, IND, "wait_pct", pt->wait_pct, &g);
		fputc('}', out);
	}
	fputs(n ? "\n    ]" : "]", out);
}

void rep_sys_json(FILE *out, const ana_profile *p)
{
	const ana_system *s = p->sys;
	fputs("  \"system\": ", out);
	if (!s || !s->present) {
		fputs("null,\n", out);
	} else {
		int f = 1;
		fputc('{', out);
		rep_json_knum(out, IND, "interval_ns", (double)s->interval_ns, &f);
		rep_json_knum(out, IND, "cpus", s->cpus ? (double)s->cpus : NAN, &f);
		rep_json_knum(out, IND, "memory_total_bytes", s->mem_total ? (double)s->mem_total : NAN, &f);
		counters(out, IND, s->disk_read_bytes, s->disk_write_bytes, s->net_rx_bytes, s->net_tx_bytes, s->minor_faults,
			 s->major_faults, s->voluntary_switches, s->involuntary_switches, &f);
		rep_json_knum(out, IND, "cpu_pct_mean", s->cpu_pct_mean, &f);
		rep_json_knum(out, IND, "cpu_pct_max", s->cpu_pct_max, &f);
		rep_json_key(out, IND, "processes", &f);
		fputc('[', out);
		for (uint32_t i = 0; i < s->nprocs; i++) {
			fputs(i ? ",\n   {" : "\n   {", out);
			sys_proc_json(out, p, &s->procs[i]);
			fputc('}', out);
		}
		fputs(s->nprocs ? "\n  ]},\n" : "]},\n", out);
	}
	const ana_energy *e = p->energy;
	fputs("  \"energy\": ", out);
	if (!e || !e->present) {
		fputs("null,\n", out);
		return;
	}
	int f = 1;
	fputc('{', out);
	rep_json_kstr(out, IND, "source", e->source, &f);
	rep_json_key(out, IND, "estimate", &f);
	fputs(e->estimate ? "true" : "false", out);
	rep_json_knum(out, IND, "total_joules", e->total_joules, &f);
	rep_json_knum(out, IND, "cpu_joules", e->cpu_joules, &f);
	rep_json_knum(out, IND, "dram_joules", e->dram_joules, &f);
	rep_json_knum(out, IND, "gpu_joules", e->gpu_joules, &f);
	rep_json_knum(out, IND, "watts_per_core", e->watts_per_core, &f);
	rep_json_knum(out, IND, "mean_watts", e->mean_watts, &f);
	rep_json_knum(out, IND, "span_s", e->span_s, &f);
	rep_json_knum(out, IND, "counter_wraps", e->wraps, &f);
	rep_json_knum(out, IND, "kwh", e->kwh, &f);
	rep_json_knum(out, IND, "grid_gco2_per_kwh", e->grid_gco2_per_kwh, &f);
	rep_json_knum(out, IND, "co2_grams", e->co2_grams, &f);
	rep_json_knum(out, IND, "per_step_joules", e->step_joules_mean, &f);
	size_t ns = e->step_joules.n, stride = ns > 10000 ? (ns + 9999) / 10000 : 1;
	rep_json_key(out, IND, "step_joules", &f);
	fputc('[', out);
	for (size_t i = 0; i < ns; i += stride) {
		if (i)
			fputc(',', out);
		rep_json_number(out, e->step_joules.v[i]);
	}
	fputc(']', out);
	rep_json_key(out, IND, "domains", &f);
	fputc('[', out);
	int first = 1;
	for (uint32_t i = 0; i < e->ndomains; i++) {
		const ana_energy_domain *d = &e->domains[i];
		if (!d->used)
			continue;
		int g = 1;
		fputs(first ? "{" : ", {", out);
		first = 0;
		rep_json_kstr(out, IND, "name", d->name, &g);
		rep_json_kstr(out, IND, "source", d->source == FMT_ES_RAPL ? "rapl" : "nvml", &g);
		rep_json_kstr(out, IND, "kind", ana_energy_kind_name(d->kind), &g);
		rep_json_knum(out, IND, "pid", (double)p->procs[d->process].file.pid, &g);
		rep_json_knum(out, IND, "joules", d->n ? d->uj[d->n - 1] / 1e6 : 0, &g);
		rep_json_knum(out, IND, "wraps", d->wraps, &g);
		fputc('}', out);
	}
	fputs("]},\n", out);
}

void rep_sys_text(FILE *out, const ana_profile *p, const char *bold, const char *reset)
{
	const ana_system *s = p->sys;
	char a[32], b[32], c[32], d[32];
	if (s && s->present) {
		fprintf(out, "\n%sSystem%s (every %.0f ms and at steps)\n", bold, reset, (double)s->interval_ns / 1e6);
		fprintf(out, "  cpu          %.0f%% of a core on average, %.0f%% at most", isfinite(s->cpu_pct_mean) ? s->cpu_pct_mean : 0,
			isfinite(s->cpu_pct_max) ? s->cpu_pct_max : 0);
		if (s->cpus)
			fprintf(out, " (the machine has %llu CPUs)", (unsigned long long)s->cpus);
		fputc('\n', out);
		fprintf(out, "  disk         %s read, %s written\n", ana_fmt_bytes(s->disk_read_bytes, a, sizeof a),
			ana_fmt_bytes(s->disk_write_bytes, b, sizeof b));
		fprintf(out, "  network      %s received, %s sent (the network namespace's interfaces)\n",
			ana_fmt_bytes(s->net_rx_bytes, c, sizeof c), ana_fmt_bytes(s->net_tx_bytes, d, sizeof d));
		fprintf(out, "  faults       %.0f minor, %.0f major   switches %.0f voluntary, %.0f involuntary\n",
			s->minor_faults, s->major_faults, s->voluntary_switches, s->involuntary_switches);
		for (uint32_t i = 0; i < s->nprocs && s->nprocs > 1 && i < 16; i++) {
			const ana_sys_proc *sp = &s->procs[i];
			fprintf(out, "  pid %-8llu %5.0f%% CPU  RSS max %s  disk %s / %s  threads %.0f  fds %.0f\n",
				(unsigned long long)p->procs[sp->process].file.pid, isfinite(sp->cpu_pct_mean) ? sp->cpu_pct_mean : 0,
				ana_fmt_bytes(isfinite(sp->rss_max_bytes) ? sp->rss_max_bytes : 0, a, sizeof a),
				ana_fmt_bytes(sp->disk_read_bytes, b, sizeof b), ana_fmt_bytes(sp->disk_write_bytes, c, sizeof c),
				isfinite(sp->threads_max) ? sp->threads_max : 0, isfinite(sp->fds_max) ? sp->fds_max : 0);
		}
	}
	const ana_energy *e = p->energy;
	if (!e || !e->present)
		return;
	fprintf(out, "\n%sEnergy%s (%s%s)\n", bold, reset, e->source,
		e->estimate ? ": the CPU part is an ESTIMATE from CPU time" : "");
	fprintf(out, "  total        %.4g J (%.3g kWh), %.3g g CO2e at %.0f g/kWh", e->total_joules, e->kwh, e->co2_grams,
		e->grid_gco2_per_kwh);
	if (isfinite(e->mean_watts))
		fprintf(out, ", %.1f W on average", e->mean_watts);
	fputc('\n', out);
	fprintf(out, "  cpu          %.4g J%s", e->cpu_joules, e->estimate ? " (estimate)" : "");
	if (e->estimate)
		fprintf(out, ": %.0f W per busy core", e->watts_per_core);
	if (isfinite(e->dram_joules))
		fprintf(out, "   dram %.4g J", e->dram_joules);
	if (isfinite(e->gpu_joules))
		fprintf(out, "   gpu %.4g J", e->gpu_joules);
	fputc('\n', out);
	if (isfinite(e->step_joules_mean))
		fprintf(out, "  per step     %.4g J%s\n", e->step_joules_mean, e->estimate ? " (estimate)" : "");
}

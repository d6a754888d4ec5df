/*
 * system.h - the system metrics and the energy of a recording (src/analyze/system.c):
 * SYSTEM points made into per-process totals and a timeline of rates, ENERGY counters
 * unwrapped into joules (or CPU time into an estimate), and carbon. Owned by the
 * ana_profile (p->sys, p->energy); renderers read them, none computes a number here.
 */
#ifndef FENNEC_ANALYZE_SYSTEM_H
#define FENNEC_ANALYZE_SYSTEM_H

#include "analyze/analyze.h"

#define ANA_CPU_WATTS_DEFAULT 10.0     /* W per busy core, the estimate's model (docs/json.md) */
#define ANA_GRID_GCO2_DEFAULT 475.0    /* g CO2e per kWh: the world average (IEA 2019, CodeCarbon's default) */

/* The interval between two points of a process, ending at t_ns. Rates are per second over
 * the interval; CPU is % of one core (200: two cores busy), the machine's % of all. */
typedef struct ana_sys_point {
	uint64_t t_ns;            /* CLOCK_MONOTONIC */
	uint64_t step;            /* steps completed at t_ns */
	double dt_ns;
	double cpu_pct, cpu_user_pct, cpu_sys_pct;
	double rss_bytes, swap_bytes, threads, fds;
	double disk_read_bps, disk_write_bps, net_rx_bps, net_tx_bps;
	double rw_bps;            /* bytes through its read and write calls (rchar + wchar; NAN: unknown) */
	double major_faults_per_s, ivcsw_per_s;
	double wait_pct;          /* the threads' run-queue waits over the interval, % of one core */
	double machine_cpu_pct, machine_iowait_pct, load1, procs_running;
} ana_sys_point;

typedef struct ana_sys_proc {
	uint32_t process;         /* p->procs index */
	uint64_t present;         /* fields some point had (bit per enum fmt_sys_field) */
	fmt_sys first, last;      /* the first and the latest point */
	ana_sys_point *points;    /* one per point after the first, in time order */
	size_t npoints, cap;
	/* over the session: the latest point less the first */
	double span_ns;
	double disk_read_bytes, disk_write_bytes, net_rx_bytes, net_tx_bytes;
	double minor_faults, major_faults, voluntary_switches, involuntary_switches;
	double cpu_ns;
	double run_delay_ns;      /* time its threads waited, runnable, for a CPU (NAN: unknown) */
	double cpu_pct_mean, cpu_pct_max, rss_max_bytes, swap_max_bytes, threads_max, fds_max;
	double machine_cpu_pct_mean, load1_max, procs_running_mean;
	int net_counted;          /* its network counters are in the recording's totals */
} ana_sys_proc;

typedef struct ana_system {
	int present;
	uint64_t interval_ns, cpus, mem_total; /* of the first process with points */
	ana_sys_proc *procs;
	uint32_t nprocs, cap;
	/* the recording: per-process counters summed; network counters (the namespace's, not
	 * the process's) once per host, from its process that saw them longest */
	double disk_read_bytes, disk_write_bytes, net_rx_bytes, net_tx_bytes;
	double minor_faults, major_faults, voluntary_switches, involuntary_switches;
	double cpu_pct_mean;      /* all processes' CPU time over the first's span, % of a core */
	double cpu_pct_max;       /* the highest interval of any one process */
} ana_system;

/* One energy counter as read by one process, unwrapped. */
typedef struct ana_energy_domain {
	uint32_t process, domain;
	unsigned source, kind;    /* enum fmt_energy_source, enum fmt_energy_kind */
	const char *name;         /* borrowed from the process's file */
	uint64_t *t_ns;
	double *uj;               /* cumulative since its first reading, wraps undone */
	size_t n, cap;
	uint64_t last_raw;
	uint32_t wraps;
	int used;                 /* counted in the totals (its host's longest reader) */
} ana_energy_domain;

typedef struct ana_energy {
	int present;
	const char *source;       /* "rapl", "nvml", "rapl+nvml", "estimate", "estimate+nvml" */
	int estimate;             /* the CPU part is CPU time times watts_per_core */
	double cpu_joules, dram_joules, gpu_joules, total_joules; /* NAN: not measured */
	double kwh, grid_gco2_per_kwh, co2_grams, mean_watts, span_s;
	double watts_per_core;    /* the estimate's model (NAN when measured) */
	uint32_t wraps;           /* counter wraps undone */
	ana_f64vec step_joules;   /* per step of p->step_ns (interpolated between readings) */
	double step_joules_mean;  /* NAN without steps */
	ana_energy_domain *domains;
	uint32_t ndomains, cap;
} ana_energy;

/* "package", "core", "uncore", "dram", "psys", "gpu", "other" */
const char *ana_energy_kind_name(unsigned kind);

#endif

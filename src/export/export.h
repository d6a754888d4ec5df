/*
 * export.h - `fennec export`: the analysis model written in other tools' formats
 * (docs/export.md): collapsed stacks, an interactive SVG flame graph, pprof's
 * profile.proto, speedscope's JSON, the Chrome trace event format and CSV tables.
 *
 * Every exporter streams to a FILE*: output is written as it is produced, never built
 * whole in memory. Memory grows with the distinct stacks, frames and threads of the
 * recording, not with its samples or events. Exporters read the model only (and, for
 * the formats that show every region call, the recording's files again through the
 * reader); they compute no number that analyze/ does not.
 *
 * Errors: 0, FENNEC_ENODATA when nothing is left to export (no samples, or none that
 * the filters select: see exp_select_count), FENNEC_ENOMEM, FENNEC_EIO when writing
 * fails, or a reader error (with err filled in) when a file cannot be read again.
 * Exporters print nothing; the CLI turns the codes into messages.
 */
#ifndef FENNEC_EXPORT_H
#define FENNEC_EXPORT_H

#include <stdio.h>

#include "analyze/analyze.h"

#define EXP_KIND_ALL (-1) /* exp_options.kind: on-CPU and off-CPU samples */

/* exp_options.memory: what weighs the stacks of a memory flame graph (docs/export.md).
 * Heap bytes per allocation stack from p->mem.sites instead of samples; sampled-mode
 * recordings give estimates, full-mode ones exact requested bytes. */
enum exp_memory {
	EXP_MEM_NONE = 0,    /* not a memory export: sampled call stacks */
	EXP_MEM_ALLOCATED,   /* every byte allocated during the run */
	EXP_MEM_PEAK,        /* live at the heap's peak */
	EXP_MEM_LEAKED,      /* unfreed at exit, the C runtime's and fennec's own left out */
	EXP_MEM_LIVE,        /* unfreed at exit, everything */
};

typedef struct exp_options {
	int kind;            /* ANA_CPU, ANA_OFFCPU or EXP_KIND_ALL */
	int has_tid;         /* only samples (and, in traces, events) of threads with this tid */
	uint64_t tid;
	const char *region;  /* only samples taken inside this region: a name ("inner"), matched
			      * at any depth, or a path from the top ("outer/inner"); NULL: all */
	int prefix_thread;   /* folded, svg: the thread as the outermost frame */
	int prefix_region;   /* folded, svg: the open fennec regions as frames above the stack */
	const char *title;   /* svg: the heading (NULL: "Flame graph") */
	int memory;          /* enum exp_memory: folded, svg, pprof and speedscope weigh
			      * allocation stacks by heap bytes; kind and tid do not apply */
} exp_options;

/* Defaults: all kinds, no filter, no prefix. */
void exp_options_init(exp_options *o);

/* The number of samples the filters of `o` select, and their summed weight (periods) in
 * *weight (may be NULL). 0 also when the recording has no samples (p->smp.nsamples).
 * With o->memory: the allocation stacks with bytes of that kind, and the bytes. */
size_t exp_select_count(const ana_profile *p, const exp_options *o, uint64_t *weight);

/* The memory weight named "allocated", "peak", "leaked" or "live"; -1 for others. */
int exp_memory_parse(const char *name);
/* Its name, and its description for titles ("heap bytes unfreed at exit"). */
const char *exp_memory_name(int memory);
const char *exp_memory_what(int memory);

/* Collapsed stacks: `frame;frame;...;leaf WEIGHT`, root first, WEIGHT in sampling periods,
 * one line per distinct sequence of frame names, sorted. o->kind must be ANA_CPU or
 * ANA_OFFCPU. */
int exp_folded(FILE *out, const ana_profile *p, const exp_options *o);

/* A self-contained interactive flame graph (SVG with inline JavaScript) of the same
 * stacks as exp_folded. */
int exp_svg(FILE *out, const ana_profile *p, const exp_options *o);

/* A differential flame graph: p's flame graph (widths from p) with each frame coloured by
 * the change of its self share from `base` (red: larger in p, blue: smaller; shares of
 * each run's own total), frames matched by name path. FENNEC_ENODATA when either has no
 * selected samples. */
int exp_diff_svg(FILE *out, const ana_profile *base, const ana_profile *p, const exp_options *o);

/* profile.proto, gzip-compressed, as `go tool pprof` reads it. */
int exp_pprof(FILE *out, const ana_profile *p, const exp_options *o);

/* speedscope's file format: per thread a sampled profile (when there are samples) and an
 * evented profile of its fennec regions (read again from the recording's files). Needs
 * samples or regions; FENNEC_ENODATA when there are neither. */
int exp_speedscope(FILE *out, const ana_profile *p, const exp_options *o, fmt_error *err);

/* TensorBoard (tensorboard.c, docs/export.md): per-step scalars as TFRecord files of Event
 * protobufs, DIR/events.out.tfevents.<start>.<host>.<pid> for the first process and one
 * sub-folder per other process with series (pid<PID>, rank<R> for ranks). DIR is made if
 * it does not exist. 0, FENNEC_EIO or FENNEC_ENOMEM with err's message. */
int exp_tensorboard(const ana_profile *p, const char *dir, fmt_error *err);

/* CSV tables (RFC 4180, a header row, CRLF): one table of the model per call. */
enum exp_csv_table { EXP_CSV_REGIONS, EXP_CSV_STEPS, EXP_CSV_METRICS, EXP_CSV_SAMPLES, EXP_CSV_THREADS };

/* The table named "regions", "steps", "metrics", "samples" or "threads"; -1 for others. */
int exp_csv_table_parse(const char *name);
const char *exp_csv_table_name(int table);

/* Write one table: regions (the JSON report's statistics, by total time), steps (one row
 * per step), metrics (one row per update), samples (one row per sample the filters of `o`
 * select) or threads. FENNEC_ENODATA when the table would have no rows. */
int exp_csv(FILE *out, const ana_profile *p, const exp_options *o, int table);

/* Chrome trace event JSON: regions, steps and metrics from the recording's files (read
 * again), samples from the model. Works without samples. */
int exp_chrome_trace(FILE *out, const ana_profile *p, const exp_options *o, fmt_error *err);

#endif

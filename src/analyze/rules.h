/*
 * rules.h - what the files of the bottleneck rules share (src/analyze/rules*.c,
 * docs/bottlenecks.md): the rules that ana_rules() (rules.c) runs, one file per what
 * they look at: rules_cpu.c the CPU samples and the roofline (hot_operation,
 * hot_function, memory_bound/compute_bound), rules_memory.c the heap (memory_leak,
 * memory_steady_growth, allocation_churn), rules_steps.c the steps and the ranks
 * (rank_imbalance, step_variance, input_bound), rules_wait.c the threads that wait
 * (off_cpu, parallel_wait, gil_wait), rules_python.c what only Python frames decide
 * (dataloader_workers); and the names of modules they all read. Only they
 * include it.
 */
#ifndef FENNEC_ANALYZE_RULES_H
#define FENNEC_ANALYZE_RULES_H

#include <string.h>

#include "analyze/aggregate.h"

/* Short names for the rules; the symbols are prefixed (libfennec-analysis.a is linked into
 * programs beside their own names). Macros: include this header last. */
#define rule_hot_operation ana_rule_hot_operation
#define rule_hot_function ana_rule_hot_function
#define rule_roofline ana_rule_roofline
#define rule_memory_leak ana_rule_memory_leak
#define rule_memory_steady_growth ana_rule_memory_steady_growth
#define rule_allocation_churn ana_rule_allocation_churn
#define rule_rank_imbalance ana_rule_rank_imbalance
#define rule_step_variance ana_rule_step_variance
#define rule_input_bound ana_rule_input_bound
#define rule_off_cpu ana_rule_off_cpu
#define rule_parallel_wait ana_rule_parallel_wait
#define rule_gil_wait ana_rule_gil_wait
#define rule_dataloader_workers ana_rule_dataloader_workers

/* Each adds its findings to p (ana_finding_add()); ana_rules() sorts them afterwards. */
void rule_hot_operation(ana_profile *p);
void rule_hot_function(ana_profile *p);
void rule_roofline(ana_profile *p);
void rule_memory_leak(ana_profile *p);
void rule_memory_steady_growth(ana_profile *p);
void rule_allocation_churn(ana_profile *p);
void rule_rank_imbalance(ana_profile *p);
void rule_step_variance(ana_profile *p);
void rule_input_bound(ana_profile *p);
void rule_off_cpu(ana_profile *p);
void rule_parallel_wait(ana_profile *p);
void rule_gil_wait(ana_profile *p);
void rule_dataloader_workers(ana_profile *p);

/* The file name of a path: what follows its last '/', or the path. */
static inline const char *base_name(const char *path)
{
	const char *s = strrchr(path, '/');
	return s && s[1] ? s + 1 : path;
}

/* An OpenMP runtime: GCC's libgomp, LLVM's libomp, Intel's libiomp5 (rule_parallel_wait()). */
static inline int openmp_runtime(const char *path)
{
	const char *b = base_name(path);
	return !strncmp(b, "libgomp.so", 10) || !strncmp(b, "libomp.so", 9) || !strncmp(b, "libiomp5.so", 11);
}

/* The C library and what has no module: a waiting runtime blocks in them. */
static inline int below_runtime(const char *path)
{
	const char *b = base_name(path);
	return path[0] == '[' || !strncmp(b, "libc.so", 7) || !strncmp(b, "ld-linux", 8) || !strncmp(b, "libpthread.so", 13);
}

#endif

/*
 * rules.c - the bottleneck rules (docs/bottlenecks.md) over the analysis model. Each
 * rule turns numbers into a finding with a severity from documented thresholds, the
 * evidence, a recommendation specific to that evidence, and an upper bound on the gain.
 * This file runs them and sorts the findings, by severity then expected gain;
 * the rules are in rules_cpu.c, rules_memory.c, rules_steps.c, rules_wait.c and rules_python.c (rules.h),
 * gpu_rules.c, sys_rules.c and system.c.
 */
#include "analyze/aggregate.h"

#include <stdlib.h>

#include "analyze/rules.h"

static int cmp_finding(const void *a, const void *b)
{
	const ana_finding *x = a, *y = b;
	if (x->severity != y->severity)
		return (int)y->severity - (int)x->severity;
	return (y->expected_gain_pct > x->expected_gain_pct) - (y->expected_gain_pct < x->expected_gain_pct);
}

void ana_rules(ana_profile *p)
{
	rule_hot_operation(p);
	rule_hot_function(p);
	rule_memory_leak(p);
	rule_memory_steady_growth(p);
	rule_allocation_churn(p);
	rule_roofline(p);
	rule_rank_imbalance(p);
	rule_step_variance(p);
	rule_off_cpu(p);
	rule_parallel_wait(p);
	rule_input_bound(p);
	rule_gil_wait(p);
	rule_dataloader_workers(p);
	ana_kernel_rules(p);
	ana_gpu_rules(p);
	ana_sys_rules(p);
	if (p->nfindings > 1)
		qsort(p->findings, p->nfindings, sizeof *p->findings, cmp_finding);
}

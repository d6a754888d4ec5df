/*
 * budget.c - the overhead budget (`fennec record --overhead-budget PCT`,
 * FENNEC_OVERHEAD_BUDGET): the writer measures, about once a second, what fennec cost the
 * program in the last window (the figure of the COST chunk: its writer's CPU and its work
 * on the program's threads) as a share of the process's CPU, and samples less often while
 * that share is over the budget, more often again (up to the rate asked for) while it is
 * well under. It lowers only what sampling costs: region events and heap wrappers cost
 * what the program's calls make them cost, and the report says when those alone are over.
 * Design: docs/internals/collect.md, "The overhead budget". Every function here runs on
 * the flushing thread under the session's flush lock.
 */
#include "collect/collect.h"
#include "format/format.h"

#include <stdlib.h>
#include <string.h>

#define CHECK_NS 1000000000ull     /* a window: about a second of the program's life */
#define ARM_NS 260000000ull        /* the first window opens this long into the session ... */
#define FIRST_NS 150000000ull      /* ... and lasts this long, so that a costly start is short */
#define MIN_CPU_NS 20000000ull     /* ... with at least 20 ms of its CPU in it */
#define FLOOR_HZ 10                /* the lowest rate the budget sets (if the asked one is higher) */

static struct {
	uint32_t ppm;                /* the budget, in millionths of the process's CPU (0: none) */
	uint32_t kmax;               /* the largest stride: FLOOR_HZ */
	int armed;                   /* a first point has been taken */
	uint32_t looks;              /* windows judged */
	col_cost_now last;           /* the window's start */
	uint64_t last_mono;
	uint64_t start_mono;         /* the session's start */
	uint32_t share_ppm;          /* fennec's share in the last window that had enough CPU */
} B;

/* "1", "1%", "0.5 %", "2.25": a percentage from 0.01 to 50, as millionths; 0 if not one.
 * Not strtod: the program's locale may want a comma. */
static uint32_t parse_pct(const char *s)
{
	uint64_t whole = 0, frac = 0, scale = 1;
	int digits = 0;
	while (*s >= '0' && *s <= '9' && whole < 1000)
		whole = whole * 10 + (uint64_t)(*s++ - '0'), digits++;
	if (*s == '.') {
		s++;
		while (*s >= '0' && *s <= '9') {
			if (scale < 10000)
				frac = frac * 10 + (uint64_t)(*s - '0'), scale *= 10;
			s++, digits++;
		}
	}
	while (*s == ' ')
		s++;
	if (*s == '%')
		s++;
	if (*s || !digits)
		return 0;
	uint64_t ppm = whole * 10000 + frac * 10000 / scale;
	return ppm >= 100 && ppm <= 500000 ? (uint32_t)ppm : 0;
}

uint32_t col_budget_prepare(uint32_t hz, int sampling, uint64_t start_mono_ns)
{
	memset(&B, 0, sizeof B);
	B.start_mono = start_mono_ns;
	const char *v = getenv("FENNEC_OVERHEAD_BUDGET");
	if (!v || !*v)
		return 0;
	uint32_t ppm = parse_pct(v);
	if (!ppm) {
		col_config_warn("FENNEC_OVERHEAD_BUDGET", v, "expected a percentage from 0.01 to 50 (1%); no budget");
		return 0;
	}
	if (!sampling) {
		col_config_warn("FENNEC_OVERHEAD_BUDGET", v, "the budget lowers the sampling rate, and sampling is off; no budget");
		return 0;
	}
	B.ppm = ppm;
	B.kmax = hz > FLOOR_HZ ? hz / FLOOR_HZ : 1; /* stride 1 is the rate asked for */
	return ppm;
}

/* The window's costs are differences of these; `kernel_ns`, the kernel's part of a sample,
 * is the latest calibration's for both ends (it is calibrated once, 250 ms in). */
static uint64_t cost_ns(const col_cost_now *c, uint64_t kernel_ns, uint64_t *sampling)
{
	uint64_t samp = c->handler_ns + c->taken * kernel_ns + c->writer_sample_ns;
	*sampling = samp;
	return samp + (c->writer_ns - (c->writer_sample_ns < c->writer_ns ? c->writer_sample_ns : c->writer_ns)) +
	       c->heap_record_ns + c->events * c->event_ps / 1000 + c->heap_calls * c->heap_call_ps / 1000;
}

/*
 * One look: over the window since the last one, fennec's share of the process's CPU. Over
 * the budget, the stride grows so that sampling's part of the window, at the new stride,
 * would leave a fifth of the budget free (in proportion to the whole share where the rest
 * leaves sampling almost nothing). Within it, the stride shrinks the same way when that
 * gives a quarter more samples or more, to a quarter of it at most in one look: a quiet
 * window does not undo a lowering at once, and the band between four fifths of the
 * budget and all of it keeps the rate from moving at every look.
 */
void col_budget_check(uint64_t mono_ns, const col_cost_now *now)
{
	if (!B.ppm)
		return;
	/* The start's one-off work (the heap and kernel calibrations, 50 and 250 ms in, the
	 * first reading of the modules) is no rate's cost: the first window opens after it. */
	if (!B.armed && mono_ns - B.start_mono < ARM_NS)
		return;
	if (!B.armed) {
		B.last = *now;
		B.last_mono = mono_ns;
		B.armed = 1;
		return;
	}
	if (mono_ns - B.last_mono < (B.looks ? CHECK_NS : FIRST_NS) || now->proc_cpu_ns - B.last.proc_cpu_ns < MIN_CPU_NS)
		return;
	B.looks++;
	uint64_t s1, s0;
	double total = (double)cost_ns(now, now->sample_kernel_ns, &s1) - (double)cost_ns(&B.last, now->sample_kernel_ns, &s0);
	double samp = (double)s1 - (double)s0;
	double cpu = (double)(now->proc_cpu_ns - B.last.proc_cpu_ns);
	B.last = *now;
	B.last_mono = mono_ns;
	if (total < 0 || samp < 0)
		return;
	double share = total / cpu, budget = (double)B.ppm / 1e6;
	B.share_ppm = (uint32_t)(share * 1e6 < 4e9 ? share * 1e6 : 4e9);
	uint32_t k = col_sample_stride(), want = k;
	double allowed = 0.8 * budget * cpu - (total - samp); /* what sampling may cost */
	if (share > budget) {
		/* With room left by the rest, sampling gets what the rest leaves; where the rest
		 * alone is near or over the budget (a start's module reading, a burst of events),
		 * sampling shrinks in proportion, as if all of fennec's cost were its */
		double w = allowed > 0.1 * budget * cpu && samp > 0 ? (double)k * samp / allowed
								     : (double)k * share / (0.8 * budget);
		want = w >= (double)B.kmax ? B.kmax : (uint32_t)w + 1;
		if (want <= k)
			want = k * 2;
	} else if (k > 1 && allowed > 0 && (double)k * samp / allowed < 0.75 * k) {
		/* room for a quarter more samples, or more, within four fifths of the budget */
		double w = (double)k * samp / allowed;
		want = w < 1 ? 1 : (uint32_t)w + 1;
		if (want < k / 4)
			want = k / 4 ? k / 4 : 1;
	}
	if (want > B.kmax)
		want = B.kmax;
	if (want < 1)
		want = 1;
	if (want != k)
		col_sample_set_stride(want);
}

/* The STATS and END fields after `sites_refused` (docs/format.md): the stride in force and
 * fennec's share in the budget's last window, in millionths (0: no budget, or no window
 * yet). Every session writes them. */
void col_budget_stats(cm_buf *b)
{
	cm_buf_varint(b, col_sample_stride());
	cm_buf_varint(b, B.ppm ? B.share_ppm : 0);
}

/*
 * continuous.c - `fennec record --continuous DIR`: while the program runs, one pprof
 * profile per interval in DIR (docs/continuous.md), the format Pyroscope and Parca ingest.
 *
 * The collector records as usual, into a capped recording (the last two intervals and 15 s, unless
 * --max-size or --max-duration says otherwise). fennec record, the program's parent, looks
 * every 100 ms; a second after an interval ends (ten flushes of the collector) it loads
 * that interval of the recording (the window --since/--until, src/analyze) and writes its
 * samples with the pprof exporter, into a file written beside its name and renamed, so a
 * reader never sees half a profile. The newest --keep files stay; older ones, only those
 * this run wrote, are removed. Nothing runs inside the program.
 */
#include <errno.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <time.h>
#include <unistd.h>

#include "analyze/analyze.h"
#include "cli/cli.h"
#include "export/export.h"

#define GRACE_NS 1000000000ull   /* after an interval's end: ten of the collector's flushes */
#define LATE_NS 10000000000ull   /* an interval the recording has not reached after this is written as it is */

struct cli_continuous {
	char dir[4096], rec[4096];
	uint64_t interval_ns, start_ns; /* start: when the program was started (CLOCK_MONOTONIC) */
	unsigned keep, next;            /* next: the interval to write */
	unsigned written, failed, empty;
	uint64_t cpu_ns;                /* this thread's CPU in write_interval: the reading's cost */
	char **names;                   /* the last `keep` files written, a ring */
	int quiet;
};

static uint64_t clock_ns(clockid_t id)
{
	struct timespec ts;
	clock_gettime(id, &ts);
	return (uint64_t)ts.tv_sec * 1000000000ull + (uint64_t)ts.tv_nsec;
}

static uint64_t mono_ns(void) { return clock_ns(CLOCK_MONOTONIC); }

cli_continuous *cli_continuous_open(const char *dir, const char *rec, uint64_t interval_ms, unsigned keep, int quiet)
{
	cli_continuous *c = calloc(1, sizeof *c);
	if (!c || !(c->names = calloc(keep ? keep : 1, sizeof *c->names))) {
		free(c);
		return NULL;
	}
	snprintf(c->dir, sizeof c->dir, "%s", dir);
	snprintf(c->rec, sizeof c->rec, "%s", rec);
	c->interval_ns = interval_ms * 1000000ull;
	c->keep = keep ? keep : 1;
	c->quiet = quiet;
	c->start_ns = mono_ns();
	return c;
}

/* Interval k of the recording (to its end when `last`) into DIR. 0 written; 1 not yet (the
 * recording has not reached the interval's end); -1 failed or nothing to write (said). */
static int write_interval_at(cli_continuous *c, unsigned k, int last, int late);

static int write_interval(cli_continuous *c, unsigned k, int last, int late)
{
	uint64_t t0 = clock_ns(CLOCK_THREAD_CPUTIME_ID);
	int rc = write_interval_at(c, k, last, late);
	c->cpu_ns += clock_ns(CLOCK_THREAD_CPUTIME_ID) - t0;
	return rc;
}

static int write_interval_at(cli_continuous *c, unsigned k, int last, int late)
{
	ana_options ao = {.hot_threshold_pct = 10};
	ao.window.set = 1;
	ao.window.since_ns = (int64_t)(k * c->interval_ns);
	ao.window.until_ns = last ? -1 : (int64_t)((k + 1) * c->interval_ns);
	ao.window.last_ns = ao.window.step_lo = ao.window.step_hi = -1;
	char since[32], until[32];
	snprintf(since, sizeof since, "%.3fs", (double)ao.window.since_ns / 1e9);
	snprintf(until, sizeof until, "%.3fs", (double)ao.window.until_ns / 1e9);
	ao.window.since_arg = since;
	ao.window.until_arg = until;
	ana_profile p;
	fmt_error err;
	memset(&err, 0, sizeof err);
	int rc = ana_load(c->rec, &ao, &p, &err);
	if (rc) {
		ana_profile_free(&p);
		if (!last && !late)
			return 1; /* the recording does not reach the interval yet */
		if (!last) {
			c->failed++;
			fprintf(stderr, "fennec record: --continuous: interval %u (%s to %s) could not be read from %s: %s\n", k,
				since, until, c->rec, err.msg[0] ? err.msg : fennec_strerror(rc));
		}
		return -1;
	}
	/* A window that ends past the recording's end is cut there: wait for the data, for a
	 * while (a program stopped, or one whose collector writes late, gets what there is). */
	if (!last && !late && p.window.end_ns < p.window.rec_begin_ns + (k + 1) * c->interval_ns &&
	    p.window.rec_end_ns < p.window.rec_begin_ns + (k + 1) * c->interval_ns) {
		ana_profile_free(&p);
		return 1;
	}
	uint64_t real = p.nprocs ? p.procs[0].file.start_real_ns + (p.window.begin_ns - p.window.rec_begin_ns) : 0;
	time_t secs = (time_t)(real / 1000000000ull);
	struct tm tm;
	char stamp[32] = "unknown";
	if (gmtime_r(&secs, &tm))
		strftime(stamp, sizeof stamp, "%Y%m%dT%H%M%SZ", &tm);
	char path[4200];
	snprintf(path, sizeof path, "%s/profile-%06u-%s.pb.gz", c->dir, k, stamp);
	exp_options o;
	exp_options_init(&o);
	if (!last && !exp_select_count(&p, &o, NULL))
		c->empty++; /* an idle interval: an empty profile says so */
	cli_out co;
	if (cli_out_open("record", &co, path) < 0) {
		c->failed++;
		ana_profile_free(&p);
		return -1;
	}
	if (last && !exp_select_count(&p, &o, NULL)) { /* the run's last part, without samples */
		cli_out_close("record", &co, 1);
		ana_profile_free(&p);
		return -1;
	}
	rc = exp_pprof(co.f, &p, &o);
	int e = errno;
	if (rc)
		cli_error("record", "--continuous: writing %s failed: %s", path,
			  rc == FENNEC_EIO ? strerror(e) : fennec_strerror(rc));
	int bad = cli_out_close("record", &co, rc) < 0;
	ana_profile_free(&p);
	if (rc || bad) {
		c->failed++;
		return -1;
	}
	/* Keep the newest: the slot of the oldest this run wrote. */
	unsigned slot = c->written % c->keep;
	if (c->names[slot]) {
		unlink(c->names[slot]);
		free(c->names[slot]);
	}
	c->names[slot] = strdup(path);
	c->written++;
	return 0;
}

void cli_continuous_tick(cli_continuous *c)
{
	uint64_t now = mono_ns();
	while (now >= c->start_ns + (uint64_t)(c->next + 1) * c->interval_ns + GRACE_NS) {
		int late = now >= c->start_ns + (uint64_t)(c->next + 1) * c->interval_ns + LATE_NS;
		if (write_interval(c, c->next, 0, late) > 0)
			return; /* not there yet: at the next look */
		c->next++;
	}
}

void cli_continuous_close(cli_continuous *c)
{
	if (!c)
		return;
	/* The program ended: its files are complete, so every whole interval can be read now,
	 * and the part after the last one is a profile of its own if it has samples. */
	uint64_t end = mono_ns();
	while (c->start_ns + (uint64_t)(c->next + 1) * c->interval_ns <= end) {
		write_interval(c, c->next, 0, 1);
		c->next++;
	}
	write_interval(c, c->next, 1, 1);
	if (!c->quiet) {
		char every[32];
		ana_fmt_ns((double)c->interval_ns, every, sizeof every);
		fprintf(stderr, "fennec record: --continuous: %u pprof profile%s (one every %s", c->written,
			c->written == 1 ? "" : "s", every);
		if (c->written > c->keep)
			fprintf(stderr, "; the newest %u kept", c->keep);
		if (c->empty)
			fprintf(stderr, "; %u without samples", c->empty);
		char cpu[32];
		ana_fmt_ns((double)c->cpu_ns, cpu, sizeof cpu);
		fprintf(stderr, ") in %s, made with %s of fennec record's CPU%s\n", c->dir, cpu,
			c->failed ? "; some could not be written (above)" : "");
	}
	for (unsigned i = 0; i < c->keep; i++)
		free(c->names[i]);
	free(c->names);
	free(c);
}

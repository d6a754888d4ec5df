/*
 * config.c - the collector's configuration: the FENNEC_* environment read into a
 * fennec_config (defaults, then the variables), and the list of values that could not be
 * used, which session.c writes into every file's header. The subsystems (sample.c,
 * heap_session.c, gpu*.c, system.c, pyframes.c) read their own variables through
 * col_env_number() and col_config_warn().
 */
#include "collect/collect.h"

#include <errno.h>
#include <limits.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <strings.h>

#define API FENNEC_API

/*
 * FENNEC_* variables whose values cannot be used. The collector runs inside someone else's
 * program: a bad value never ends it or changes what it returns, and the collector says
 * nothing to the program's standard error (STYLE.md: it never reports to the host
 * program, whose output may be parsed). The default is used instead (out of range, the
 * nearest bound, or the default for a 0), and every file of the session carries one line
 * per variable in its header (key 33), "FENNEC_HZ=abc: expected a whole number from 1 to
 * 20000 per second; using 999": `fennec record` says them when the program ends, and
 * `fennec analyze` among its warnings. The list is the current session's: start() clears
 * it and parses again.
 */
static char cfg_warn[2048];  /* messages, one a line, for the header */
static size_t cfg_warn_len;
static int cfg_quiet;        /* fennec_config_init(): the environment read without a word */

void col_config_warnings_clear(void) { cfg_warn_len = 0; }

const char *col_config_warnings(size_t *len)
{
	*len = cfg_warn_len;
	return cfg_warn;
}

/* Whether `msg` is one of the lines of buf[0..len). */
static int has_line(const char *buf, size_t len, const char *msg)
{
	size_t n = strlen(msg);
	for (const char *p = buf; p < buf + len;) {
		const char *nl = memchr(p, '\n', (size_t)(buf + len - p));
		size_t l = nl ? (size_t)(nl - p) : (size_t)(buf + len - p);
		if (l == n && !memcmp(p, msg, n))
			return 1;
		p += l + 1;
	}
	return 0;
}

static void add_line(char *buf, size_t cap, size_t *len, const char *msg)
{
	size_t n = strlen(msg);
	if (*len + n + 1 < cap) {
		memcpy(buf + *len, msg, n);
		buf[*len + n] = '\n';
		*len += n + 1;
	}
}

void col_config_warn(const char *name, const char *value, const char *what)
{
	char v[80], msg[400];
	size_t k = 0;
	if (cfg_quiet)
		return;
	for (const char *c = value ? value : ""; *c && k + 4 < sizeof v; c++)
		v[k++] = (unsigned char)*c < 0x20 || *c == 0x7f ? '?' : *c; /* one line, whatever it holds */
	if (value && strlen(value) > k)
		v[k++] = '.', v[k++] = '.', v[k++] = '.';
	v[k] = 0;
	snprintf(msg, sizeof msg, "%s=%s: %s", name, v, what);
	if (!has_line(cfg_warn, cfg_warn_len, msg))
		add_line(cfg_warn, sizeof cfg_warn, &cfg_warn_len, msg);
}

uint64_t col_env_number(const char *name, uint64_t dflt, uint64_t lo, uint64_t hi, const char *unit)
{
	const char *s = getenv(name);
	if (!s || !*s)
		return dflt;
	char what[160];
	size_t n = strspn(s, "0123456789");
	errno = 0;
	unsigned long long v = n && !s[n] ? strtoull(s, NULL, 10) : 0;
	if (!n || s[n] || errno) {
		if (!n || s[n]) {
			snprintf(what, sizeof what, "expected a whole number from %llu to %llu%s%s; using %llu",
				 (unsigned long long)lo, (unsigned long long)hi, unit ? " " : "", unit ? unit : "",
				 (unsigned long long)dflt);
			col_config_warn(name, s, what);
			return dflt;
		}
		v = ULLONG_MAX; /* digits too many: out of range */
	}
	if (v >= lo && v <= hi)
		return v;
	uint64_t use = v > hi ? hi : v == 0 ? dflt : lo; /* 0 meant the default where it is no value */
	snprintf(what, sizeof what, "expected a whole number from %llu to %llu%s%s; using %llu",
		 (unsigned long long)lo, (unsigned long long)hi, unit ? " " : "", unit ? unit : "",
		 (unsigned long long)use);
	col_config_warn(name, s, what);
	return use;
}

/* An environment number the collector only reads (tests, internal hand-offs): no warning. */
uint64_t col_env_u64(const char *name, uint64_t dflt)
{
	const char *s = getenv(name);
	if (!s || !*s)
		return dflt;
	char *end;
	errno = 0;
	unsigned long long v = strtoull(s, &end, 0);
	return (errno || *end) ? dflt : v;
}

int col_env_rank(void)
{
	static const char *names[] = {"RANK", "OMPI_COMM_WORLD_RANK", "PMI_RANK", "SLURM_PROCID"};
	for (size_t i = 0; i < ARRAY_LEN(names); i++) {
		const char *s = getenv(names[i]);
		if (s && *s) {
			char *end;
			long v = strtol(s, &end, 10);
			if (!*end && v >= 0 && v < INT_MAX)
				return (int)v;
		}
	}
	return -1;
}

/* FENNEC_STEP_SCHEDULE's four whole numbers, digits only, ACTIVE > 0 (as fennec record's
 * --step-schedule): 0 or -1. */
static int parse_schedule(const char *s, unsigned out[4])
{
	return cm_parse_schedule(s, out) == 0 && out[2] > 0 ? 0 : -1;
}

/* FENNEC_AUTOSTART: 1 (yes, true, on) starts a session when the library loads, 0 (no,
 * false, off, empty) does not. Another value starts one too, whose header says the value
 * (col_config_env()): not starting lost the word, there being no file to say it in. */
int col_autostart_value(const char *a)
{
	static const char *const yes[] = {"1", "yes", "true", "on"}, *const no[] = {"0", "no", "false", "off", ""};
	for (size_t i = 0; a && i < sizeof yes / sizeof *yes; i++)
		if (!strcasecmp(a, yes[i]))
			return 1;
	for (size_t i = 0; a && i < sizeof no / sizeof *no; i++)
		if (!strcasecmp(a, no[i]))
			return 0;
	return a ? -1 : 0;
}

/* Defaults plus the environment into cfg; with `warn`, what cannot be used is said
 * (col_config_warn()). */
void col_config_env(fennec_config *cfg, int warn)
{
	memset(cfg, 0, sizeof *cfg);
	cfg->size = sizeof *cfg;
	cfg->output = getenv("FENNEC_OUTPUT");
	if (!cfg->output || !*cfg->output)
		cfg->output = "fennec.fnc";
	int was = cfg_quiet;
	cfg_quiet = !warn;
	const char *a = getenv("FENNEC_AUTOSTART");
	if (col_autostart_value(a) < 0)
		col_config_warn("FENNEC_AUTOSTART", a, "expected 1 (record from the start) or 0; recording as for 1");
	cfg->buffer_kb = (uint32_t)col_env_number("FENNEC_BUFFER_KB", 2048, 64, 32768, "KiB");
	cfg->flush_interval_ms = (uint32_t)col_env_number("FENNEC_FLUSH_MS", 100, 1, 60000, "ms");
	cfg->compression_level = (int)col_env_number("FENNEC_COMPRESSION", 1, 0, 22, "(zstd level)");
	cfg->rank = -1;
	cfg->step_fraction = 1.0;
	const char *sched = getenv("FENNEC_STEP_SCHEDULE");
	unsigned sc[4];
	if (sched && *sched && parse_schedule(sched, sc) == 0) {
		cfg->step_wait = sc[0];
		cfg->step_warmup = sc[1];
		cfg->step_active = sc[2];
		cfg->step_repeat = sc[3];
	} else if (sched && *sched)
		col_config_warn("FENNEC_STEP_SCHEDULE", sched,
				"expected WAIT,WARMUP,ACTIVE,REPEAT, four whole numbers with ACTIVE > 0; recording every step");
	const char *smode = getenv("FENNEC_SAMPLE");
	int mode = col_sample_mode_parse(smode);
	cfg->sample_mode = mode > 0 ? mode : FENNEC_SAMPLE_OFF;
	if (mode < 0 && smode && *smode)
		col_config_warn("FENNEC_SAMPLE", smode, "expected one of cpu, wall, off; sampling off");
	cfg->sample_hz = (uint32_t)col_env_number("FENNEC_HZ", 999, 1, 20000, "per second");
	cfg->stack_depth = (uint32_t)col_env_number("FENNEC_STACK_DEPTH", 256, 4, 512, "frames");
	const char *mmode = getenv("FENNEC_MEMORY");
	int mem = col_mem_mode_parse(mmode);
	cfg->memory_mode = mem > 0 ? mem : FENNEC_MEMORY_OFF;
	if (mem < 0 && mmode && *mmode)
		col_config_warn("FENNEC_MEMORY", mmode, "expected one of sampled, full, off, none; heap profiling off");
	cfg->memory_rate = col_env_number("FENNEC_MEMORY_RATE", 512 * 1024, 1, 1u << 30, "bytes");
	cfg->memory_interval_ms = (uint32_t)col_env_number("FENNEC_MEMORY_INTERVAL_MS", 50, 1, 3600000, "ms");
	const char *frac = getenv("FENNEC_STEP_FRACTION");
	if (frac && *frac) {
		char *end;
		double f = strtod(frac, &end);
		if (end != frac && !*end && f > 0 && f <= 1) /* a NaN is neither */
			cfg->step_fraction = f;
		else
			col_config_warn("FENNEC_STEP_FRACTION", frac,
					"expected a fraction of the steps, 0 < F <= 1; recording every step");
	}
	cfg_quiet = was;
}

API void fennec_config_init(fennec_config *cfg)
{
	if (!cfg)
		return;
	/* Quiet: fennec_start() reads the environment again and says what it cannot use. */
	col_config_env(cfg, 0);
}

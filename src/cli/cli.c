/*
 * cli.c - what every subcommand uses (cli.h): its messages, output files that a failure
 * never leaves half-written, the checks that an output is not an input or a recording,
 * and the reading of options and their values.
 */
#include <ctype.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#include "analyze/analyze.h"
#include "cli/cli.h"
#include "format/format.h"

void cli_error(const char *cmd, const char *fmt, ...)
{
	va_list ap;
	fprintf(stderr, "fennec %s: ", cmd);
	va_start(ap, fmt);
	vfprintf(stderr, fmt, ap);
	va_end(ap);
	fputc('\n', stderr);
}

int cli_out_open(const char *cmd, cli_out *o, const char *path)
{
	o->path = path;
	o->tmp[0] = 0;
	o->f = stdout;
#ifdef FENNEC_FAULT
	if (!path && !(o->f = cli_fault_stream(stdout))) {
		cli_error(cmd, "cannot write to standard output: %s", strerror(errno));
		return -1;
	}
#endif
	if (!path)
		return 0;
	struct stat st;
	if (lstat(path, &st) == 0 && !S_ISREG(st.st_mode)) {
		o->f = fopen(path, "w"); /* written in place (cli.h) */
	} else {
		snprintf(o->tmp, sizeof o->tmp, "%s.tmp.%d", path, (int)getpid());
		o->f = fopen(o->tmp, "w");
	}
	if (!o->f) {
		cli_error(cmd, "cannot write %s: %s", path, strerror(errno));
		return -1;
	}
#ifdef FENNEC_FAULT
	if (!(o->f = cli_fault_stream(o->f))) {
		cli_error(cmd, "cannot write %s: %s", path, strerror(errno));
		if (o->tmp[0])
			unlink(o->tmp);
		return -1;
	}
#endif
	return 0;
}

int cli_out_close(const char *cmd, cli_out *o, int failed)
{
	int bad = fflush(o->f) || ferror(o->f);
	int e = errno;
	if (!o->path) {
		if (!failed && bad) {
			cli_error(cmd, "writing to standard output failed: %s", strerror(e));
			return -1;
		}
		return failed ? -1 : 0;
	}
	if (fclose(o->f) && !bad) {
		bad = 1;
		e = errno;
	}
	if (failed || bad) {
		if (!failed)
			cli_error(cmd, "writing %s failed: %s", o->path, strerror(e));
		if (o->tmp[0])
			unlink(o->tmp);
		return -1;
	}
	if (o->tmp[0] && rename(o->tmp, o->path) < 0) {
		cli_error(cmd, "cannot create %s: %s", o->path, strerror(errno));
		unlink(o->tmp);
		return -1;
	}
	return 0;
}

int cli_read_magic(const char *path, char magic[8])
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	ssize_t n = read(fd, magic, 8);
	close(fd);
	return (int)n;
}

int cli_is_profile(const char *path)
{
	char magic[8];
	return cli_read_magic(path, magic) == 8 && !memcmp(magic, FMT_MAGIC, 8);
}

int cli_out_check(const char *cmd, const char *out, const char *const *inputs, size_t n)
{
	struct stat so, si;
	if (!out || stat(out, &so) != 0)
		return 0;
	for (size_t i = 0; i < n; i++)
		if (inputs[i] && stat(inputs[i], &si) == 0 && si.st_dev == so.st_dev && si.st_ino == so.st_ino) {
			cli_error(cmd, "-o %s is %s%sthe recording being read: writing there would destroy it; "
				  "choose another output file", out, strcmp(out, inputs[i]) ? inputs[i] : "",
				  strcmp(out, inputs[i]) ? ", " : "");
			return -1;
		}
	if (S_ISREG(so.st_mode) && cli_is_profile(out)) {
		cli_error(cmd, "-o %s is a fennec recording: writing there would destroy it; "
			  "remove it first, or choose another output file", out);
		return -1;
	}
	return 0;
}

void cli_arg_read(cli_arg *x, int argc, char **argv, int i)
{
	const char *a = argv[i], *eq = strchr(a, '=');
	x->inl = x->taken = 0;
	x->a = a;
	x->v = i + 1 < argc ? argv[i + 1] : NULL;
	if (a[0] == '-' && a[1] == '-' && a[2] && eq && (size_t)(eq - a) < sizeof x->name) {
		memcpy(x->name, a, (size_t)(eq - a));
		x->name[eq - a] = 0;
		x->a = x->name;
		x->v = eq + 1;
		x->inl = 1;
	}
}

int cli_arg_done(const char *cmd, const cli_arg *x)
{
	if (x->inl && !x->taken) {
		cli_error(cmd, "%s takes no value, not '%s' (see fennec %s --help)", x->a, x->v, cmd);
		return -1;
	}
	return 0;
}

int cli_parse_double(const char *cmd, const char *opt, const char *s, double lo, double hi, double *out)
{
	char *end;
	errno = 0;
	double v = s ? strtod(s, &end) : 0;
	/* strtod reads "nan" and "inf" too; a NaN passes every comparison below, so that a
	 * threshold of nan silently fired every rule. */
	if (!s || errno || end == s || *end || !isfinite(v) || v < lo || v > hi) {
		cli_error(cmd, "%s needs a number from %g to %g, not '%s'", opt, lo, hi, s ? s : "");
		return -1;
	}
	*out = v;
	return 0;
}

int cli_parse_u32(const char *cmd, const char *opt, const char *s, unsigned lo, unsigned hi, unsigned *out)
{
	char *end;
	errno = 0;
	/* Digits only: strtoul skips blanks and negates a '-' after them (" -1" is ULONG_MAX). */
	unsigned long v = s && isdigit((unsigned char)s[0]) ? strtoul(s, &end, 10) : 0;
	if (!s || !isdigit((unsigned char)s[0]) || errno || *end || v < lo || v > hi) {
		cli_error(cmd, "%s needs a whole number from %u to %u, not '%s'", opt, lo, hi, s ? s : "");
		return -1;
	}
	*out = (unsigned)v;
	return 0;
}

int cli_parse_bytes(const char *cmd, const char *opt, const char *s, uint64_t lo, uint64_t hi, uint64_t *out)
{
	static const struct { const char *unit; double mul; } units[] = {
		{"", 1}, {"B", 1},
		{"K", 1024.0}, {"KiB", 1024.0}, {"k", 1024.0}, {"KB", 1e3}, {"kB", 1e3},
		{"M", 1048576.0}, {"MiB", 1048576.0}, {"MB", 1e6},
		{"G", 1073741824.0}, {"GiB", 1073741824.0}, {"GB", 1e9},
	};
	char *end;
	errno = 0;
	double v = s && s[0] != '-' ? strtod(s, &end) : -1;
	if (v >= 0 && !errno && end != s && isfinite(v)) {
		for (size_t i = 0; i < sizeof units / sizeof units[0]; i++) {
			if (strcmp(end, units[i].unit))
				continue;
			double b = round(v * units[i].mul);
			if (b >= (double)lo && b <= (double)hi) {
				*out = (uint64_t)b;
				return 0;
			}
		}
	}
	char a[32], b[32];
	cli_error(cmd, "%s needs a size from %s to %s (bytes, or a number with K, KiB, KB, M, MiB, MB, G, GiB or GB), "
		  "not '%s'", opt, ana_fmt_bytes((double)lo, a, sizeof a), ana_fmt_bytes((double)hi, b, sizeof b), s ? s : "");
	return -1;
}

/* A duration: "90s", "5m", "1h30m", "250ms", "1.5s", or plain seconds ("12.5"). Units h, m,
 * s, ms, us, ns, summed. Returns 0 and the ns in *out, or -1. */
static int parse_duration(const char *s, int64_t *out)
{
	static const struct { const char *unit; double ns; } units[] = {
		{"ms", 1e6}, {"us", 1e3}, {"ns", 1}, {"h", 3600e9}, {"m", 60e9}, {"s", 1e9},
	};
	double total = 0;
	if (!s || !*s)
		return -1;
	while (*s) {
		char *end;
		if (!(*s >= '0' && *s <= '9') && *s != '.')
			return -1;
		double v = strtod(s, &end);
		if (end == s || !(v >= 0) || v > 1e12)
			return -1;
		s = end;
		if (!*s && total == 0) { /* plain seconds */
			total = v * 1e9;
			break;
		}
		size_t k = 0;
		while (k < ARRAY_LEN(units) && strncmp(s, units[k].unit, strlen(units[k].unit)))
			k++;
		if (k == ARRAY_LEN(units))
			return -1;
		total += v * units[k].ns;
		s += strlen(units[k].unit);
	}
	if (total > 9e18)
		return -1;
	*out = (int64_t)llround(total);
	return 0;
}

static int parse_step(const char *s, const char *end, int64_t *out)
{
	if (s == end) {
		*out = -1;
		return 0;
	}
	uint64_t v = 0;
	for (const char *c = s; c < end; c++) {
		if (*c < '0' || *c > '9' || v > (uint64_t)1e15)
			return -1;
		v = v * 10 + (uint64_t)(*c - '0');
	}
	*out = (int64_t)v;
	return 0;
}

int cli_window_arg(const char *cmd, cli_arg *x, ana_window_spec *w)
{
	const char *a = x->a, *v = x->v;
	if (strcmp(a, "--since") && strcmp(a, "--until") && strcmp(a, "--last") && strcmp(a, "--steps"))
		return 0;
	if (!w->set) {
		w->set = 1;
		w->since_ns = w->until_ns = w->last_ns = w->step_lo = w->step_hi = -1;
	}
	if (!v || !*v) {
		cli_error(cmd, "%s needs a value (%s)", a, a[2] == 's' && a[3] == 't' ? "steps A:B, A: or :B" : "a duration: 90s, 5m, 1h30m, 250ms");
		return -1;
	}
	if (!strcmp(a, "--steps")) {
		const char *colon = strchr(v, ':');
		if (!colon || parse_step(v, colon, &w->step_lo) < 0 ||
		    parse_step(colon + 1, v + strlen(v), &w->step_hi) < 0 || (w->step_lo < 0 && w->step_hi < 0)) {
			cli_error(cmd, "--steps '%s': give step numbers A:B, A: or :B (e.g. 100:199)", v);
			return -1;
		}
		if (w->step_hi >= 0 && w->step_lo > w->step_hi) {
			cli_error(cmd, "--steps '%s': the step range is empty (%lld > %lld)", v, (long long)w->step_lo,
				  (long long)w->step_hi);
			return -1;
		}
		w->steps_arg = v;
	} else {
		int64_t ns;
		if (parse_duration(v, &ns) < 0) {
			cli_error(cmd, "%s '%s': not a duration (90s, 5m, 1h30m, 250ms, or seconds)", a, v);
			return -1;
		}
		if (a[2] == 's') {
			w->since_ns = ns;
			w->since_arg = v;
		} else if (a[2] == 'u') {
			if (!ns) {
				cli_error(cmd, "--until '%s': the window would be empty", v);
				return -1;
			}
			w->until_ns = ns;
			w->until_arg = v;
		} else {
			if (!ns) {
				cli_error(cmd, "--last '%s': the window would be empty", v);
				return -1;
			}
			w->last_ns = ns;
			w->last_arg = v;
		}
		if (w->since_ns >= 0 && w->until_ns >= 0 && w->since_ns >= w->until_ns) {
			cli_error(cmd, "--since %s is not before --until %s", w->since_arg, w->until_arg);
			return -1;
		}
	}
	return 1;
}

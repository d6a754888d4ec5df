/*
 * calib.c - the calibration file (docs/roofline.md): one "key value" pair a line after a
 * first line "fennec-calibration 1", so that a person can read and edit it and a newer
 * fennec can add keys that this one skips.
 */
#include "analyze/calib.h"

#include <errno.h>
#include <math.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/stat.h>
#include <unistd.h>

#define MAGIC "fennec-calibration 1"

int ana_calib_default_path(char *out, size_t n)
{
	const char *e = getenv("FENNEC_CALIBRATION"), *x = getenv("XDG_CONFIG_HOME"), *h = getenv("HOME");
	int k;
	if (e && *e)
		k = snprintf(out, n, "%s", e);
	else if (x && *x)
		k = snprintf(out, n, "%s/fennec/calibration", x);
	else if (h && *h)
		k = snprintf(out, n, "%s/.config/fennec/calibration", h);
	else
		return -1;
	return k > 0 && (size_t)k < n ? 0 : -1;
}

static const struct field {
	const char *key;
	size_t off;
	int text; /* 0 number, else the size of a text field */
} fields[] = {
#define NUM(k) {#k, offsetof(ana_calib, k), 0}
#define TXT(k) {#k, offsetof(ana_calib, k), (int)sizeof(((ana_calib *)0)->k)}
	TXT(host), TXT(cpu), TXT(isa), NUM(measured_at),
	NUM(bw_read), NUM(bw_copy), NUM(bw_triad), NUM(bw_read_1t), NUM(bw_triad_1t),
	NUM(flops_fp64), NUM(flops_fp32), NUM(flops_fp64_1t), NUM(flops_fp32_1t),
#undef NUM
#undef TXT
};

int ana_calib_load(const char *path, ana_calib *c, int *line)
{
	memset(c, 0, sizeof *c);
	*line = 0;
	FILE *f = fopen(path, "r");
	if (!f)
		return -1;
	char buf[1024];
	int n = 0, bad = 0;
	while (!bad && fgets(buf, sizeof buf, f)) {
		n++;
		buf[strcspn(buf, "\n")] = 0;
		if (n == 1) {
			bad = strcmp(buf, MAGIC) != 0;
			continue;
		}
		if (!buf[0] || buf[0] == '#')
			continue;
		char *v = strchr(buf, ' ');
		if (!v) {
			bad = 1;
			break;
		}
		*v++ = 0;
		if (!strcmp(buf, "threads")) {
			char *end;
			unsigned long t = strtoul(v, &end, 10);
			bad = *end || !t || t > 65536;
			c->threads = (unsigned)t;
			continue;
		}
		for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
			if (strcmp(buf, fields[i].key))
				continue;
			if (fields[i].text) {
				snprintf((char *)c + fields[i].off, (size_t)fields[i].text, "%s", v);
			} else {
				char *end;
				double d = strtod(v, &end);
				bad = *end || !isfinite(d) || d < 0;
				*(double *)((char *)c + fields[i].off) = d;
			}
			break;
		} /* unknown keys: a newer fennec's, skipped */
	}
	fclose(f);
	if (!bad && n == 0)
		bad = 1;
	/* The roofline needs both ceilings. */
	if (!bad && (c->bw_triad <= 0 || c->flops_fp64 <= 0)) {
		n = 0;
		bad = 1;
	}
	if (bad) {
		*line = n;
		errno = EINVAL;
		return -1;
	}
	return 0;
}

static int mkdir_p(char *dir)
{
	for (char *s = dir + 1; *s; s++)
		if (*s == '/') {
			*s = 0;
			int rc = mkdir(dir, 0755);
			*s = '/';
			if (rc && errno != EEXIST)
				return -1;
		}
	return mkdir(dir, 0755) && errno != EEXIST ? -1 : 0;
}

int ana_calib_save(const char *path, const ana_calib *c)
{
	char dir[4096], tmp[4200];
	snprintf(dir, sizeof dir, "%s", path);
	char *slash = strrchr(dir, '/');
	if (slash && slash != dir) {
		*slash = 0;
		if (mkdir_p(dir))
			return -1;
	}
	snprintf(tmp, sizeof tmp, "%s.tmp.%d", path, (int)getpid());
	FILE *f = fopen(tmp, "w");
	if (!f)
		return -1;
	fprintf(f, "%s\n# written by fennec calibrate (docs/roofline.md); bytes/s and FLOP/s\n", MAGIC);
	fprintf(f, "threads %u\n", c->threads);
	for (size_t i = 0; i < sizeof fields / sizeof *fields; i++) {
		const char *p = (const char *)c + fields[i].off;
		if (fields[i].text)
			fprintf(f, "%s %s\n", fields[i].key, p);
		else
			fprintf(f, "%s %.6g\n", fields[i].key, *(const double *)p);
	}
	int bad = fflush(f) || ferror(f);
	int e = errno;
	if (fclose(f) && !bad) {
		bad = 1;
		e = errno;
	}
	if (bad || rename(tmp, path)) {
		if (!bad)
			e = errno;
		unlink(tmp);
		errno = e;
		return -1;
	}
	return 0;
}

double ana_calib_ceiling(const ana_calib *c, double ai, int fp32)
{
	double peak = fp32 && c->flops_fp32 > 0 ? c->flops_fp32 : c->flops_fp64;
	double mem = ai * c->bw_triad;
	return mem < peak ? mem : peak;
}

/*
 * calib.h - this machine's ceilings for the roofline (docs/roofline.md): peak memory
 * bandwidth and peak floating-point rate, measured by `fennec calibrate` and stored in a
 * small text file for every later analysis to read.
 */
#ifndef FENNEC_ANALYZE_CALIB_H
#define FENNEC_ANALYZE_CALIB_H

#include <stddef.h>

typedef struct ana_calib {
	char host[256];
	char cpu[256];
	char isa[32];            /* the widest instruction set the FLOP kernel used */
	unsigned threads;        /* threads the all-core numbers used */
	double measured_at;      /* seconds since the epoch */
	double bw_read, bw_copy, bw_triad;  /* bytes/s, all threads, STREAM byte counting */
	double bw_read_1t, bw_triad_1t;     /* one thread */
	double flops_fp64, flops_fp32;      /* FLOP/s, all threads (an FMA counts as 2) */
	double flops_fp64_1t, flops_fp32_1t;
} ana_calib;

/* The file used when none is named: $FENNEC_CALIBRATION, else
 * $XDG_CONFIG_HOME/fennec/calibration, else $HOME/.config/fennec/calibration. Returns 0,
 * or -1 when no home is known. */
int ana_calib_default_path(char *out, size_t n);

/* Read a calibration file. Returns 0; -1 with errno (ENOENT: not calibrated yet) or
 * EINVAL (not a calibration file, or a number out of range) and *line set to the line at
 * fault (0 when the whole file is). */
int ana_calib_load(const char *path, ana_calib *c, int *line);

/* Write it through a temporary file renamed over `path`, creating the directory. 0 or -1
 * with errno. */
int ana_calib_save(const char *path, const ana_calib *c);

/* The roofline ceiling at arithmetic intensity `ai` (FLOP per byte): min(peak FLOP/s,
 * ai x peak bandwidth), fp64 unless `fp32`. */
double ana_calib_ceiling(const ana_calib *c, double ai, int fp32);

#endif

/*
 * gpu.c - `fennec record --gpu` (docs/gpu.md): before the program starts, find what GPU
 * profiling needs on this machine (the NVIDIA driver, CUPTI, NVML), say in one line what
 * is missing, and give the program the environment that makes the CUDA driver load
 * libfennec's InitializeInjection. A missing piece never stops the recording.
 */
#include <dlfcn.h>
#include <limits.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>

#include "cli/cli.h"

#ifdef FENNEC_HAVE_CUPTI
#include <cupti_version.h>
#endif

/* Can the loader open `name`? Its dlerror() in why otherwise. */
static int loadable(const char *name, char *why, size_t n)
{
	void *h = dlopen(name, RTLD_LAZY | RTLD_LOCAL);
	if (!h) {
		const char *e = dlerror();
		snprintf(why, n, "%s", e ? e : name);
		return 0;
	}
	dlclose(h);
	return 1;
}

#ifdef FENNEC_HAVE_CUPTI
/* Open a CUPTI candidate: its absolute path in out and its API version, or 0. */
static int try_cupti(const char *cand, char *out, size_t n, uint32_t *version)
{
	void *h = dlopen(cand, RTLD_LAZY | RTLD_LOCAL);
	if (!h)
		return 0;
	int (*get)(uint32_t *) = (int (*)(uint32_t *))dlsym(h, "cuptiGetVersion");
	Dl_info info;
	int ok = get && get(version) == 0 && dladdr((void *)get, &info) && info.dli_fname;
	if (ok) {
		char real[PATH_MAX];
		snprintf(out, n, "%s", realpath(info.dli_fname, real) ? real : info.dli_fname);
	}
	dlclose(h);
	return ok;
}

/* $FENNEC_CUPTI, the loader's path, then the toolkit's usual places. */
static int find_cupti(char *out, size_t n, uint32_t *version)
{
	const char *env = getenv("FENNEC_CUPTI");
	if (env && *env)
		return try_cupti(env, out, n, version);
	const char *home = getenv("CUDA_HOME");
	char a[PATH_MAX], b[PATH_MAX];
	snprintf(a, sizeof a, "%s/lib64/libcupti.so", home && *home ? home : "/usr/local/cuda");
	snprintf(b, sizeof b, "%s/extras/CUPTI/lib64/libcupti.so", home && *home ? home : "/usr/local/cuda");
	const char *cands[] = {"libcupti.so", "libcupti.so.13", a, b, "/usr/local/cuda/lib64/libcupti.so",
			       "/usr/lib/x86_64-linux-gnu/libcupti.so"};
	for (size_t i = 0; i < sizeof cands / sizeof *cands; i++)
		if (try_cupti(cands[i], out, n, version))
			return 1;
	return 0;
}
#endif

int cli_gpu_check(int mode, cli_gpu *g)
{
	memset(g, 0, sizeof *g);
	char why[512];
	const char *drv = getenv("FENNEC_LIBCUDA");
	g->mode = mode; /* NVTX ranges need no driver: they are recorded in any case */
	if (!loadable(drv && *drv ? drv : "libcuda.so.1", why, sizeof why)) {
		fprintf(stderr, "fennec record: --gpu: no NVIDIA driver on this machine (%s); recording without "
				"GPU activity (NVTX ranges still become regions)\n", why);
		return 0;
	}
	char missing[6000] = "";
#ifdef FENNEC_HAVE_CUPTI
	uint32_t v = 0;
	if (!find_cupti(g->cupti, sizeof g->cupti, &v))
		snprintf(missing, sizeof missing, "libcupti not found (set FENNEC_CUPTI to its path): no kernels, "
						  "transfers or API calls");
	else if (v / 10000 != CUPTI_API_VERSION / 10000) {
		snprintf(missing, sizeof missing, "%s has CUPTI API version %u, this fennec was built with %u: no "
						  "kernels, transfers or API calls", g->cupti, v, (unsigned)CUPTI_API_VERSION);
		g->cupti[0] = 0;
	} else
		g->inject = 1;
#else
	snprintf(missing, sizeof missing, "this fennec was built without CUPTI's headers (no CUDA toolkit at build "
					  "time): no kernels, transfers or API calls");
#endif
	const char *nvml = getenv("FENNEC_NVML");
	if (!loadable(nvml && *nvml ? nvml : "libnvidia-ml.so.1", why, sizeof why)) {
		size_t len = strlen(missing);
		snprintf(missing + len, sizeof missing - len, "%sNVML not found (%s): no utilisation, memory or power "
							   "samples", len ? "; " : "", why);
	}
	if (missing[0])
		fprintf(stderr, "fennec record: --gpu: %s; recording the rest\n", missing);
	return 0;
}

void cli_gpu_env(const cli_gpu *g, const char *lib)
{
	if (!g->mode)
		return;
	char real[PATH_MAX];
	const char *abs = realpath(lib, real) ? real : lib; /* the driver and NVTX dlopen it */
	setenv("FENNEC_GPU", g->mode == 2 ? "kernels" : "all", 1);
	setenv("NVTX_INJECTION64_PATH", abs, 1); /* NVTX ranges as regions: needs no CUPTI */
	if (!g->inject)
		return;
	setenv("FENNEC_CUPTI", g->cupti, 1);
	setenv("CUDA_INJECTION64_PATH", abs, 1);
}

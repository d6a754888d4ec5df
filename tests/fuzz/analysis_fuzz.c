/*
 * analysis_fuzz.c - libFuzzer harness for the whole analysis: each input is written to a
 * file and analysed as `fennec analyze` does (load, replay, samples, memory, rules), then
 * rendered as JSON and as text. Any input must be analysed or refused, never crash, hang
 * or leak. Inputs of odd length are read with --force (resync). The mutator recomputes
 * chunk CRCs (fuzz_crc.h). `make fuzz-run` runs it briefly, seeded with tests/corpus/.
 */
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <unistd.h>

#include "analyze/analyze.h"
#include "fuzz_crc.h"
#include "report/report.h"

static char path[64];
static FILE *devnull;

int LLVMFuzzerInitialize(int *argc, char ***argv)
{
	(void)argc;
	(void)argv;
	char dir[] = "/tmp/fennec-fuzz-XXXXXX";
	if (!mkdtemp(dir))
		abort();
	snprintf(path, sizeof path, "%s/fuzz.fnc", dir);
	devnull = fopen("/dev/null", "w");
	if (!devnull)
		abort();
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0600);
	if (fd < 0)
		abort();
	for (size_t off = 0; off < size;) {
		ssize_t n = write(fd, data + off, size - off);
		if (n <= 0)
			abort();
		off += (size_t)n;
	}
	close(fd);
	ana_options opt = {.hot_threshold_pct = 10, .force = (int)(size & 1)};
	ana_profile p;
	fmt_error err;
	if (ana_load(path, &opt, &p, &err) == 0) {
		rep_options ro = {0};
		rep_json(devnull, &p, &ro);
		rep_text(devnull, &p, &ro);
	}
	ana_profile_free(&p);
	return 0;
}

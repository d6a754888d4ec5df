/*
 * reader_fuzz.c - libFuzzer harness for the profile reader: any byte string must be
 * either decoded or rejected with an error, never crash, hang or leak. `make fuzz-run`
 * runs it briefly, seeded with tests/corpus/.
 */
#include "format/reader.h"

static int sink(void *ctx, const fmt_file *f, const fmt_event *ev)
{
	(void)f;
	*(uint64_t *)ctx += ev->ticks ^ ev->id;
	return 0;
}

int LLVMFuzzerTestOneInput(const uint8_t *data, size_t size)
{
	fmt_file f;
	fmt_error e;
	uint64_t acc = 0;
	fmt_read_mem(data, size, "fuzz", &f, sink, &acc, &e);
	fmt_file_free(&f);
	return 0;
}

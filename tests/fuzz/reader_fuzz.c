/*
 * reader_fuzz.c - libFuzzer harness for the profile reader: any byte string must be
 * either decoded or rejected with an error, never crash, hang or leak. Each input is read
 * twice, plainly and with FMT_READ_RESYNC (--force). The mutator recomputes chunk CRCs
 * (fuzz_crc.h). `make fuzz-run` runs it briefly, seeded with tests/corpus/.
 */
#include "format/reader.h"
#include "fuzz_crc.h"

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
	fmt_read_mem_ex(data, size, "fuzz", FMT_READ_RESYNC, &f, sink, &acc, &e);
	fmt_file_free(&f);
	return 0;
}

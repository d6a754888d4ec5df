/*
 * test_ranks.c - the region-name classes of src/analyze/ranks.c: which regions are
 * communication (not work, for the balance between ranks) and which load data
 * (input_bound). Their word splitting decides false positives, so each case is here.
 */
#include "unit.h"

#include "analyze/aggregate.h"

/* Each name of `names` classified as `want` by `fn`; a mismatch names the name. */
#define CHECK_NAMES(fn, names, list, want)                                                          \
	for (size_t i_ = 0; i_ < sizeof names / sizeof *names; i_++)                                \
		if (fn(names[i_] list) != (want)) {                                                 \
			printf("    %s:%d: %s(\"%s\") != %d\n", __FILE__, __LINE__, #fn, names[i_], want); \
			(*unit_failures)++;                                                         \
		}

UNIT_TEST(ranks_comm_names)
{
	static const char *const comm[] = {"MPI_Allreduce", "mpi_wait", "barrier", "allreduce_grads", "sync", "cudaSync",
					   "halo_exchange", "ncclAllGather", "comm", "send_recv", "wait_for_peers",
					   "reduce_scatter", "Broadcast"};
	static const char *const work[] = {"compute", "forward", "update", "commit", "asynchronous_io_x", "gemm",
					   "waveform", "linear2_bwd"};
	CHECK_NAMES(ana_name_is_comm, comm, , 1);
	CHECK_NAMES(ana_name_is_comm, work, , 0);
}

#define COMMA_NULL , NULL

UNIT_TEST(ranks_data_names)
{
	static const char *const data[] = {"load_batch", "DataLoader", "next_batch", "loadBatch", "io", "read_shard",
					   "fetch", "prefetch_queue", "dataset_get", "disk_io"};
	static const char *const other[] = {"batch_norm", "BatchNorm2d", "forward", "thread_main", "ready_wait",
					    "ratio", "optimizer_step", "payload", "upload"};
	CHECK_NAMES(ana_name_is_data, data, COMMA_NULL, 1);
	CHECK_NAMES(ana_name_is_data, other, COMMA_NULL, 0);
	/* a list replaces the words: names or globs */
	UNIT_CHECK_EQ(ana_name_is_data("decode_jpeg", "decode_*,augment"), 1);
	UNIT_CHECK_EQ(ana_name_is_data("augment", "decode_*,augment"), 1);
	UNIT_CHECK_EQ(ana_name_is_data("load_batch", "decode_*,augment"), 0);
}

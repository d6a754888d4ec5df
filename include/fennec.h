/*
 * fennec.h - the public C API of the fennec collector (libfennec.so / libfennec.a).
 *
 * This header is the manual. A program marks named regions, steps and metrics; the
 * collector appends them to per-thread buffers and a writer thread streams them to a
 * profile file that `fennec analyze` reads. Nothing is analysed in the process.
 *
 * Cost model. Every call is safe to make at any time: before fennec_start(), after
 * fennec_stop(), from any thread, in a fork child. When the collector is not running a
 * call costs one load and a branch. When it runs, a region begin/end pair costs two
 * timestamp reads plus a few stores: no locks, no system calls, no malloc.
 *
 * Thread safety. All functions may be called from any thread. fennec_start() and
 * fennec_stop() must not race with each other.
 *
 * Errors. Functions that can fail return 0 or a negative FENNEC_E* code;
 * fennec_strerror() names it. The collector never prints, aborts or exits: what it had
 * to drop (full buffers, a full disk) is counted and written into the profile.
 */
#ifndef FENNEC_H
#define FENNEC_H

#include <stddef.h>
#include <stdint.h>

#ifdef __cplusplus
extern "C" {
#endif

#define FENNEC_VERSION_MAJOR 0
#define FENNEC_VERSION_MINOR 1
#define FENNEC_VERSION_PATCH 0

#if defined(__GNUC__)
#define FENNEC_API __attribute__((visibility("default")))
#else
#define FENNEC_API
#endif

/* Error codes: one list, used by the collector, the reader and the CLI. */
#define FENNEC_ERRNO_MAP(X)                                                   \
	X(OK, 0, "success")                                                   \
	X(EINVAL, -1, "invalid argument")                                     \
	X(ENOMEM, -2, "out of memory")                                        \
	X(EIO, -3, "input/output error")                                      \
	X(EALREADY, -4, "the collector is already running")                   \
	X(ENOTRUNNING, -5, "the collector is not running")                    \
	X(EFOREIGN, -6, "not a fennec profile")                               \
	X(EVERSION, -7, "profile version is newer than this fennec supports") \
	X(ETRUNCATED, -8, "profile is truncated")                             \
	X(ECORRUPT, -9, "profile is corrupt")                                 \
	X(ECHECKSUM, -10, "chunk checksum mismatch")                          \
	X(ECOMPRESS, -11, "compression or decompression failed")              \
	X(ENOENT, -12, "no such file or directory")                           \
	X(EFULL, -13, "table full")                                           \
	X(ENODATA, -14, "no data")

typedef enum fennec_err {
#define FENNEC__ERR_ENUM(name, code, text) FENNEC_##name = (code),
	FENNEC_ERRNO_MAP(FENNEC__ERR_ENUM)
#undef FENNEC__ERR_ENUM
} fennec_err;

/* A static message for an error code; "unknown error" for codes not in the list. */
FENNEC_API const char *fennec_strerror(int err);

/*
 * Configuration. Initialise with fennec_config_init(), which fills in the defaults and then
 * applies the FENNEC_* environment variables (docs/api.md lists them); change fields after
 * that. Strings are borrowed for the duration of fennec_start() only.
 */
enum fennec_sample_mode { FENNEC_SAMPLE_OFF = 0, FENNEC_SAMPLE_CPU = 1, FENNEC_SAMPLE_WALL = 2 };
enum fennec_memory_mode { FENNEC_MEMORY_OFF = 0, FENNEC_MEMORY_SAMPLED = 1, FENNEC_MEMORY_FULL = 2 };

typedef struct fennec_config {
	uint32_t size;              /* sizeof(fennec_config); set by fennec_config_init() */
	const char *output;         /* profile path; default $FENNEC_OUTPUT or "fennec.fnc" */
	uint32_t buffer_kb;         /* per-thread ring buffer, KiB (default 2048, min 64) */
	uint32_t flush_interval_ms; /* writer period, ms (default 100; shortens when busy) */
	int compression_level;      /* zstd level for chunks (default 1; 0 = store raw) */
	int rank;                   /* distributed rank; -1 = from RANK, OMPI_..., PMI_RANK, SLURM_PROCID */
	/* Step sampling: which steps record regions and metrics. Step boundaries are always
	 * recorded. A schedule (like torch.profiler's) skips `step_wait` steps, then warms up
	 * for `step_warmup` (not recorded), records `step_active`, and repeats the cycle
	 * `step_repeat` times (0 = forever). step_active == 0 disables the schedule.
	 * step_fraction in (0, 1] records that fraction of steps, evenly spread (1 = all). */
	uint32_t step_wait;
	uint32_t step_warmup;
	uint32_t step_active;
	uint32_t step_repeat;
	double step_fraction;
	/* CPU sampling (docs/sampling.md): 0 = off, 1 = on-CPU time, 2 = wall time (also
	 * threads that wait, as off-CPU samples). Default $FENNEC_SAMPLE ("off", "cpu",
	 * "wall"), else off; `fennec record` turns it on. */
	int sample_mode;
	uint32_t sample_hz;         /* samples per second of CPU (or wall) time; default 999 */
	uint32_t stack_depth;       /* deepest stack kept, frames; default 128, max 512 */
	/* Heap profiling (docs/memory.md): 0 = off, 1 = sampled (exact totals, stacks of
	 * allocations picked by Poisson sampling over bytes), 2 = full (every allocation and
	 * free with its stack). Needs the allocator interposed: libfennec.so preloaded or
	 * linked. Default $FENNEC_MEMORY ("off", "sampled", "full"), else off; `fennec record`
	 * turns sampled on. */
	int memory_mode;
	uint64_t memory_rate;       /* sampled: mean bytes allocated between two sampled allocations; default 512 KiB */
	uint32_t memory_interval_ms; /* heap and RSS timeline period, ms (default 50); also at every step */
} fennec_config;

/* Defaults plus FENNEC_* environment variables. */
FENNEC_API void fennec_config_init(fennec_config *cfg);

/*
 * Start collecting into cfg->output (NULL cfg: defaults plus environment). Returns 0,
 * FENNEC_EALREADY if running, or an error if the file cannot be created. A program run
 * under `fennec record` is started automatically before main().
 */
FENNEC_API int fennec_start(const fennec_config *cfg);

/* Flush everything, write the end record and close the file. Called at exit too. */
FENNEC_API int fennec_stop(void);

/* Nonzero while the collector runs in this process. */
FENNEC_API int fennec_is_running(void);

/*
 * Regions. fennec_region_begin(name) opens a region on the calling thread and
 * fennec_region_end() closes the innermost open one; pairs nest. `name` is identified by
 * its address, never hashed or copied on the hot path: it must be a string with static
 * storage duration (a literal). For names built at run time, intern them once with
 * fennec_intern() and use fennec_region_begin_id().
 */
FENNEC_API void fennec_region_begin(const char *name);
FENNEC_API void fennec_region_end(void);

/* A call site: the FENNEC_REGION macros declare one as a static, so its id is cached in
 * it and the hot path does no lookup at all. Treat `id_` as private. */
typedef struct fennec_site {
	const char *name;
	const char *file;
	int line;
	uint32_t id_; /* 0 until first use; owned by the collector */
} fennec_site;

FENNEC_API void fennec_region_begin_site(fennec_site *site);

/* Copy `name` into the collector's string table once and return its id (> 0), or 0 if
 * the table is full or name is NULL. The same string gives the same id. Not for hot paths:
 * it hashes the characters. Usable before fennec_start(). */
FENNEC_API uint32_t fennec_intern(const char *name);
FENNEC_API void fennec_region_begin_id(uint32_t id);

/*
 * Steps. fennec_step() marks the end of one iteration (a batch); the interval between
 * consecutive marks is one step. The time before the first mark is set-up, never a step:
 * call fennec_step() once where the loop starts so that its first iteration is a step.
 * fennec_step_items() does the same and says how many items (samples, tokens) the step
 * that it ends processed, so throughput can be reported. Call from one thread (usually
 * the training loop's).
 */
FENNEC_API void fennec_step(void);
FENNEC_API void fennec_step_items(uint64_t items);

/*
 * Metrics, by name (same address rule as regions):
 *   counter: a running sum of deltas (bytes read, tokens seen);
 *   gauge:   a level that is set (queue depth, learning rate);
 *   value:   a recorded observation; the analysis gives its distribution (loss, latency).
 */
FENNEC_API void fennec_counter_add(const char *name, int64_t delta);
FENNEC_API void fennec_gauge_set(const char *name, double value);
FENNEC_API void fennec_value_record(const char *name, double value);

/*
 * Roofline annotation: the calling thread's innermost open region did `flops`
 * floating-point operations (an FMA counts as 2) and moved `bytes` bytes between the core
 * and memory (what the data structures are: for y = A x with an n x n matrix of doubles,
 * 2n^2 FLOP and about 8n^2 bytes). Call it once per region call, or several times: the
 * analysis sums per region and, with this machine's ceilings from `fennec calibrate`,
 * reports each annotated region's arithmetic intensity, achieved FLOP/s and bandwidth, the
 * % of the roofline it reaches and whether it is memory or compute bound
 * (docs/roofline.md). Recorded as the counters "fennec.flops" and "fennec.bytes".
 */
FENNEC_API void fennec_region_work(uint64_t flops, uint64_t bytes);
/* The same for single-precision work: placed against the fp32 peak (counter
 * "fennec.flops32", its FLOP counted in "fennec.flops" too). */
FENNEC_API void fennec_region_work_fp32(uint64_t flops, uint64_t bytes);

/*
 * Memory. When libfennec.so is preloaded (`fennec record`) or linked, it interposes the
 * malloc family and keeps exact heap counters from the start of the process, with or
 * without a recording. Heap bytes are the allocator's usable sizes of the live blocks
 * (malloc_usable_size: the requested size rounded up to the allocator's granule). RSS is
 * read from /proc/self. `tracking` is 0 when the allocator is not interposed (libfennec
 * loaded with dlopen, or the heap counters disabled with FENNEC_MEMORY=none): the heap
 * fields are then 0. Returns 0, or FENNEC_EINVAL for a NULL or too small struct.
 */
typedef struct fennec_mem_stats {
	uint32_t size;              /* sizeof(fennec_mem_stats), set by the caller */
	int tracking;               /* 1 when heap counters run */
	uint64_t heap_bytes;        /* live heap now */
	uint64_t heap_peak_bytes;   /* highest live heap since the process started */
	uint64_t allocations, frees; /* calls since the process started (realloc counts as both) */
	uint64_t allocated_bytes;   /* requested bytes, summed */
	uint64_t largest_bytes;     /* largest single request */
	uint64_t rss_bytes;         /* resident set now */
	uint64_t rss_peak_bytes;    /* highest resident set (VmHWM) */
} fennec_mem_stats;
FENNEC_API int fennec_memory_stats(fennec_mem_stats *out);

/*
 * GPU timers (docs/gpu.md). fennec_gpu_timer_begin records a CUDA event on `stream` (a
 * cudaStream_t or CUstream; NULL: the default stream) and returns a handle;
 * fennec_gpu_timer_end records a second one on the same stream. Neither waits for the
 * GPU: the collector's writer thread reads the elapsed time once both events completed and
 * writes it into the profile as a GPU timer named `name` (`gpu.timers` of the analysis).
 * `name` must have static storage duration, like a region name. Both need the CUDA driver
 * (loaded at run time) and a current CUDA context on the calling thread (any CUDA runtime
 * call makes one); they cost two event records, a few microseconds. begin returns a
 * handle >= 0, or FENNEC_ENOTRUNNING (no recording), FENNEC_EIO (no driver or context, or
 * the event failed), FENNEC_EFULL (4096 timers waiting for their GPU work); end returns 0,
 * FENNEC_EINVAL (not a running timer) or FENNEC_EIO.
 */
FENNEC_API int fennec_gpu_timer_begin(const char *name, void *stream);
FENNEC_API int fennec_gpu_timer_end(int handle);

/*
 * Time fn(arg, stream) on the GPU, as a benchmark: `warmup` untimed calls, then `repeat`
 * calls, each between two CUDA events on `stream`; waits for the last event and fills *out
 * with statistics of the elapsed times. Each timed call is also written into the profile as
 * a GPU timer `name` when a recording runs. Blocks until the GPU finished. Returns 0,
 * FENNEC_EINVAL (no fn or out, out->size too small, repeat 0), FENNEC_EIO (no driver or
 * context, or an event failed) or FENNEC_ENOMEM.
 */
typedef struct fennec_gpu_stats {
	uint32_t size;              /* sizeof(fennec_gpu_stats), set by the caller */
	uint32_t count;             /* timed calls */
	double mean_ns, std_ns;     /* population standard deviation */
	double min_ns, max_ns, median_ns;
} fennec_gpu_stats;
FENNEC_API int fennec_gpu_time(const char *name, void (*fn)(void *arg, void *stream), void *arg, void *stream,
			       uint32_t warmup, uint32_t repeat, fennec_gpu_stats *out);

#define FENNEC__CAT2(a, b) a##b
#define FENNEC__CAT(a, b) FENNEC__CAT2(a, b)

/* Open a region at this call site; the hot path reads the id cached in a static site. */
#define FENNEC_REGION_BEGIN(name_)                                                        \
	do {                                                                              \
		static fennec_site FENNEC__CAT(fennec__site_, __LINE__) = {name_, __FILE__, \
								      __LINE__, 0};   \
		fennec_region_begin_site(&FENNEC__CAT(fennec__site_, __LINE__));          \
	} while (0)
#define FENNEC_REGION_END() fennec_region_end()

#if defined(__cplusplus)
/* C++: a scoped region closed by the destructor. */
namespace fennec_detail {
struct scope {
	explicit scope(fennec_site *s) { fennec_region_begin_site(s); }
	~scope() { fennec_region_end(); }
	scope(const scope &) = delete;
	scope &operator=(const scope &) = delete;
};
} // namespace fennec_detail
#define FENNEC_REGION(name_)                                                               \
	static fennec_site FENNEC__CAT(fennec__site_, __LINE__) = {name_, __FILE__, __LINE__, 0}; \
	fennec_detail::scope FENNEC__CAT(fennec__scope_, __LINE__)(&FENNEC__CAT(fennec__site_, __LINE__))
#elif defined(__GNUC__)
/* C (GCC, Clang): a region that closes when the enclosing block is left, by any path
 * other than longjmp. */
static inline void fennec__scope_end(int *unused)
{
	(void)unused;
	fennec_region_end();
}
#define FENNEC_REGION(name_)                                                               \
	static fennec_site FENNEC__CAT(fennec__site_, __LINE__) = {name_, __FILE__, __LINE__, 0}; \
	int FENNEC__CAT(fennec__scope_, __LINE__) __attribute__((cleanup(fennec__scope_end), unused)) = \
		(fennec_region_begin_site(&FENNEC__CAT(fennec__site_, __LINE__)), 0)
#endif

#ifdef __cplusplus
}
#endif
#endif /* FENNEC_H */

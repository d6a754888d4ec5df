/*
 * format.h - constants of the profile file (docs/format.md is normative) and the chunk
 * writer shared by the collector and the tests. The reader is in reader.h.
 */
#ifndef FENNEC_FORMAT_H
#define FENNEC_FORMAT_H

#include "common/common.h"

#define FMT_MAGIC "\x89" "FNC\r\n\x1a\n"
#define FMT_MAJOR 1
#define FMT_MINOR 9
#define FMT_PREAMBLE_LEN 16
#define FMT_CHUNK_HDR_LEN 16
#define FMT_MAX_RAW (64u << 20)

enum fmt_chunk_type {
	FMT_HEADER = 1,
	FMT_SITES = 2,
	FMT_THREAD = 3,
	FMT_EVENTS = 4,
	FMT_STATS = 5,
	FMT_THREAD_END = 6,
	FMT_END = 7,
	FMT_SAMPLES = 8,
	FMT_MODULES = 9,
	FMT_TASKS = 10,
	FMT_HEAP = 11,
	FMT_GPU = 12,
	FMT_HEAP2 = 13,
	FMT_GPUX = 14,
	FMT_REACH = 15, /* what the program could still reach at the end (1.6) */
	FMT_PYCODE = 16, /* Python code objects that samples name (1.7) */
	FMT_SYSTEM = 17, /* system metrics: the process's and the machine's (1.7; docs/format.md) */
	FMT_ENERGY = 18, /* energy counters: RAPL (powercap), NVML */
	FMT_COST = 19, /* what fennec costs the program's threads (1.8; docs/format.md) */
	FMT_SEGMENT = 20, /* opens a segment file of a capped recording (1.9; docs/format.md) */
};

enum fmt_codec { FMT_RAW = 0, FMT_ZSTD = 1 };

enum fmt_ev_type {
	FMT_EV_BEGIN = 1,
	FMT_EV_END = 2,
	FMT_EV_STEP = 3,
	FMT_EV_COUNTER = 4,
	FMT_EV_GAUGE = 5,
	FMT_EV_VALUE = 6,
	FMT_EV_TIME = 7,
	FMT_EV_STACK = 8,
	FMT_EV_SAMPLE = 16, /* not a stream event: a SAMPLES record as delivered by the reader */
	FMT_EV_ALLOC = 17,  /* HEAP records as delivered by the reader */
	FMT_EV_FREE = 18,
	FMT_EV_HEAP_SNAP = 19,
	FMT_EV_GPU = 20,      /* a GPU chunk record (fmt_event.gpu) */
	FMT_EV_SYS = 21,      /* a SYSTEM chunk record (fmt_event.sys) */
	FMT_EV_ENERGY = 22,   /* an ENERGY reading (fmt_event.energy) */
};

/* SAMPLES flags (docs/format.md) */
enum fmt_sample_flag {
	FMT_S_KIND_MASK = 3,
	FMT_S_CPU = 0,
	FMT_S_OFFCPU = 1,
	FMT_S_TRUNCATED = 4,
	FMT_S_EXACT_PC = 8,
	FMT_S_BY_TIME = 16, /* regions and step from the thread's events by time (1.3) */
	FMT_S_PYTHON = 32,  /* Python frames follow the native ones (1.7) */
	FMT_S_GIL = 64,     /* the thread held the GIL (1.7) */
	FMT_S_PYCUT = 128,  /* the Python frames were cut (1.7) */
	FMT_S_KERNEL = 256, /* taken in the kernel: a system call or a page fault of the thread (1.7) */
};

enum fmt_sample_mode { FMT_SAMPLE_OFF = 0, FMT_SAMPLE_CPU = 1, FMT_SAMPLE_WALL = 2 };
enum fmt_sample_source { FMT_SRC_PERF = 0, FMT_SRC_TIMER = 1, FMT_SRC_WALL = 2, FMT_SRC_RING = 3 };
#define FMT_MAX_FRAMES 1024  /* readers reject deeper stacks */
#define FMT_MAX_REGIONS 4096
#define FMT_MAX_DEPTH 128      /* open regions a collector tracks per thread: deeper begins (and
				* their ends) are not written, and count as dropped */
#define FMT_MAX_SITE_ID (1u << 17) /* site ids are below this; a reader sizes its table by them */
#define FMT_MAX_THREAD_AHEAD (1u << 16) /* a THREAD index is below the records before it plus this */
#define FMT_MAX_NAME 1024      /* readers keep this many bytes of a site's name, and count longer ones */

enum fmt_site_kind { FMT_SITE_REGION = 0, FMT_SITE_COUNTER = 1, FMT_SITE_GAUGE = 2, FMT_SITE_VALUE = 3 };

enum fmt_hkey {
	FMT_H_RECORDING = 1, FMT_H_PID, FMT_H_PPID, FMT_H_RANK, FMT_H_HOST, FMT_H_CMDLINE,
	FMT_H_EXE, FMT_H_START_REAL, FMT_H_START_MONO, FMT_H_START_TICKS, FMT_H_CLOCK,
	FMT_H_PARENT_PID, FMT_H_ORIGIN, FMT_H_BUFFER, FMT_H_STEP_WAIT, FMT_H_STEP_WARMUP,
	FMT_H_STEP_ACTIVE, FMT_H_STEP_REPEAT, FMT_H_STEP_FRACTION, FMT_H_VERSION,
	FMT_H_TICKS_PER_NS, FMT_H_SAMPLE_MODE, FMT_H_SAMPLE_PERIOD, FMT_H_SAMPLE_SOURCE,
	FMT_H_SAMPLE_DEPTH, FMT_H_SAMPLE_HZ, FMT_H_MEM_MODE, FMT_H_MEM_RATE, FMT_H_MEM_INTERVAL,
	FMT_H_CPU_START_USER, FMT_H_CPU_START_SYS, FMT_H_MEM_MMAP,
	FMT_H_CONFIG_WARNINGS, /* 33: FENNEC_* values the collector could not use, one a line */
	FMT_H_SYS_INTERVAL,    /* 34: system sampler period, ns (absent: no sampler) */
	FMT_H_SYS_CPUS,        /* 35: CPUs online */
	FMT_H_SYS_MEM_TOTAL,   /* 36: the machine's memory, bytes */
	FMT_H_ENERGY_SOURCES,  /* 37: energy counters found: bit 0 RAPL, bit 1 NVML */
	FMT_H_PY_VERSION = 38, /* the CPython interpreter's PY_VERSION_HEX (1.7) */
	FMT_H_PY_STATUS = 39,  /* enum fmt_py_status (1.7) */
	FMT_H_SEG_MAX_SIZE = 40, /* capped recording: bytes the files may hold (1.9) */
	FMT_H_SEG_MAX_DURATION = 41, /* capped recording: ns of the run kept (1.9) */
	FMT_H_OVERHEAD_BUDGET = 42, /* the overhead budget: millionths of the process's CPU */
};

/* HEAP2 STACK flags (docs/format.md) */
enum fmt_heap_stack_flag { FMT_HS_TRUNCATED = 1, FMT_HS_PYTHON = 2 /* Python frames follow (1.7) */ };

/* Why a Python process's samples have (no) Python frames (header key 39). */
enum fmt_py_status { FMT_PY_OK = 0, FMT_PY_VERSION = 1, FMT_PY_OFF = 2, FMT_PY_SOURCE = 3 };

/* One Python frame as the collector and the reader hold it: the code object's id in the
 * PYCODE records, the line running, and whether the frame is the first one an interpreter
 * loop (_PyEval_EvalFrameDefault) runs. */
static inline uint64_t fmt_pyframe(uint32_t code, uint32_t line, unsigned entry)
{
	return (uint64_t)code << 32 | (uint64_t)(line & 0x7fffffffu) << 1 | (entry & 1u);
}
static inline uint32_t fmt_pyframe_code(uint64_t v) { return (uint32_t)(v >> 32); }
static inline uint32_t fmt_pyframe_line(uint64_t v) { return (uint32_t)(v >> 1) & 0x7fffffffu; }
static inline unsigned fmt_pyframe_entry(uint64_t v) { return (unsigned)(v & 1); }

/* HEAP records (docs/format.md, "Heap (1.2)") */
enum fmt_heap_rec { FMT_HR_STACK = 1, FMT_HR_ALLOC = 2, FMT_HR_FREE = 3, FMT_HR_SNAP = 4 };
/* HEAP2 records (docs/format.md, "Heap (1.3)"): a tag's low 3 bits are the type, the rest
 * flags of ALLOC and FREE */
enum fmt_heap2_rec {
	FMT_H2_TIME = 0, FMT_H2_STACK = 1, FMT_H2_ALLOC = 2, FMT_H2_FREE = 3, FMT_H2_SNAP = 4,
	FMT_H2_THREAD = 5, FMT_H2_STEP = 6,
};
#define FMT_H2_TYPE 7
#define FMT_H2_SAME 8   /* ALLOC, FREE: the stack of the thread's previous ALLOC or FREE */
#define FMT_H2_TEMP 16  /* FREE: of the thread's latest allocation (a temporary) */
#define FMT_H2_LAST 32  /* FREE: of the thread's latest ALLOC in this chunk; nothing follows */
/* fmt_event.flags of ALLOC and FREE events read from HEAP2 chunks */
#define FMT_HEV_NOADDR 1 /* addr is 0: a FREE names its block by id (stack) and size */
#define FMT_HEV_TEMP 2   /* FREE of the thread's latest allocation */
enum fmt_mem_mode { FMT_MEM_OFF = 0, FMT_MEM_SAMPLED = 1, FMT_MEM_FULL = 2 };
/* REACH: whether the scan was made (0) or why not */
enum fmt_reach_status { FMT_REACH_DONE = 0, FMT_REACH_UNREADABLE = 1, FMT_REACH_TIME = 2, FMT_REACH_NOMEM = 3,
			FMT_REACH_OFF = 4, FMT_REACH_LOST = 5 };
enum fmt_snap_reason { FMT_SNAP_TIMER = 0, FMT_SNAP_STEP = 1, FMT_SNAP_FINAL = 2 };

/* GPU records (docs/format.md "GPU (1.3)"). The same struct is what the collector encodes
 * (fmt_gpu_put) and what the reader delivers (fmt_event.gpu). */
enum fmt_gpu_type {
	FMT_GR_DEVICE = 1, FMT_GR_STRING = 2, FMT_GR_KERNEL = 3, FMT_GR_MEMCPY = 4, FMT_GR_MEMSET = 5,
	FMT_GR_SYNC = 6, FMT_GR_API = 7, FMT_GR_MEMORY = 8, FMT_GR_OVERHEAD = 9, FMT_GR_NVML = 10,
	FMT_GR_TIMER = 11,
	/* delivered by the reader from GPUX chunks (1.4), whose own record types are enum
	 * fmt_gpux_rec; never in a GPU chunk */
	FMT_GR_RANGE_START = 12, FMT_GR_RANGE_END = 13, FMT_GR_MARK = 14, FMT_GR_NVLINK = 15,
};
/* GPUX records (docs/format.md "GPU additions (1.4)") */
enum fmt_gpux_rec { FMT_GX_RANGE_START = 1, FMT_GX_RANGE_END = 2, FMT_GX_MARK = 3, FMT_GX_NVLINK = 4 };
#define FMT_GPUX_TEXT_MAX 4096 /* bytes of an NVTX message, at most */
enum fmt_gpu_copy { FMT_CPY_UNKNOWN = 0, FMT_CPY_HTOD = 1, FMT_CPY_DTOH = 2, FMT_CPY_DTOD = 8, FMT_CPY_HTOH = 9,
		    FMT_CPY_PTOP = 10, FMT_CPY_MAX = 10 };
enum fmt_gpu_mem { FMT_GMEM_UNKNOWN = 0, FMT_GMEM_PAGEABLE = 1, FMT_GMEM_PINNED = 2, FMT_GMEM_DEVICE = 3,
		   FMT_GMEM_ARRAY = 4, FMT_GMEM_MANAGED = 5, FMT_GMEM_DEVICE_STATIC = 6, FMT_GMEM_MANAGED_STATIC = 7,
		   FMT_GMEM_MAX = 7 };
enum fmt_gpu_sync { FMT_SYNC_UNKNOWN = 0, FMT_SYNC_EVENT = 1, FMT_SYNC_STREAM_WAIT = 2, FMT_SYNC_STREAM = 3,
		    FMT_SYNC_CONTEXT = 4, FMT_SYNC_MAX = 4 };
enum fmt_gpu_api { FMT_API_RUNTIME = 0, FMT_API_DRIVER = 1 };
enum fmt_gpu_memop { FMT_GMOP_ALLOC = 1, FMT_GMOP_FREE = 2 };
enum fmt_gpu_clock { FMT_GCLK_MONO = 0, FMT_GCLK_OFFSET = 1, FMT_GCLK_NONE = 2 };
#define FMT_GPU_KERNELS_ONLY 1u   /* prefix flags */
#define FMT_OVH_MAX 9
#define FMT_OBJ_MAX 5
/* NVML fields, in `present` bit order */
enum fmt_nvml {
	FMT_NV_SM_PCT, FMT_NV_MEM_PCT, FMT_NV_MEM_USED, FMT_NV_MEM_TOTAL, FMT_NV_POWER_MW, FMT_NV_TEMP_C,
	FMT_NV_SM_MHZ, FMT_NV_MEM_MHZ, FMT_NV_PCIE_TX, FMT_NV_PCIE_RX, FMT_NV_COUNT
};

typedef struct fmt_gpu {
	uint8_t type;            /* enum fmt_gpu_type */
	uint8_t kind;            /* MEMCPY copy kind, SYNC type, API domain, MEMORY operation, OVERHEAD kind */
	uint8_t mem_kind;        /* MEMCPY source, MEMSET and MEMORY: enum fmt_gpu_mem; OVERHEAD: object kind */
	uint8_t dst_kind;        /* MEMCPY destination; MEMORY: pool */
	uint32_t device, context, stream;
	uint32_t correlation;
	uint32_t name;           /* STRING id (KERNEL, API, TIMER); 0: none */
	uint64_t start_ns, end_ns; /* CLOCK_MONOTONIC; instants have end_ns == start_ns */
	uint64_t bytes;          /* MEMCPY, MEMSET, MEMORY */
	uint64_t address;        /* MEMORY */
	uint64_t tid;            /* API, TIMER; OVERHEAD: object id */
	uint64_t value;          /* MEMSET value, API return value, SYNC event, TIMER stream, NVML present */
	uint64_t step;           /* TIMER */
	uint32_t grid[3], block[3];
	uint32_t regs, smem_static, smem_dynamic;
	uint32_t src_device, dst_device; /* MEMCPY */
	uint32_t cbid;           /* API */
	uint64_t nvml[FMT_NV_COUNT]; /* NVML fields whose bit is set in `value` */
	uint64_t range_id;       /* RANGE_START, RANGE_END: the NVTX range */
	uint64_t tx_bytes, rx_bytes; /* NVLINK: data sent and received since the driver loaded */
	const char *text;        /* RANGE_START, MARK: the message (NUL-terminated, may be empty); the
				  * reader's is borrowed for the callback only */
	const char *name_str;    /* reader: the STRING of `name` (NULL: none); ignored by the writer */
} fmt_gpu;

typedef struct fmt_gpu_device {
	uint32_t id;
	const char *name;        /* reader: owned by the fmt_file */
	uint8_t uuid[16];
	int has_uuid;
	uint32_t cc_major, cc_minor, sm_count, warp_size, max_threads_per_block;
	uint32_t max_warps_per_sm, max_blocks_per_sm, regs_per_sm, regs_per_block;
	uint32_t smem_per_sm, smem_per_block;
	uint64_t memory_bytes;
	uint32_t clock_khz;
} fmt_gpu_device;

/* The prefix of a GPU chunk. */
typedef struct fmt_gpu_info {
	uint64_t cupti_version;
	unsigned clock;          /* enum fmt_gpu_clock */
	int64_t offset_ns;
	uint64_t offset_error_ns;
	uint64_t flags;
	uint64_t records, dropped, cupti_dropped, unknown;
} fmt_gpu_info;

/* GPU chunk encoding (writer.c): the prefix, then records. *prev_ns is the previous timed
 * record's start in the chunk (0 at the start of a chunk). */
void fmt_gpu_prefix(cm_buf *b, const fmt_gpu_info *info);
void fmt_gpu_put(cm_buf *b, const fmt_gpu *r, uint64_t *prev_ns);
void fmt_gpu_device_put(cm_buf *b, const fmt_gpu_device *d);
void fmt_gpu_string_put(cm_buf *b, uint32_t id, const char *s, size_t n);
/* GPUX chunk encoding (1.4): the prefix (NVTX records the collector lost, cumulative), then
 * records of types FMT_GR_RANGE_START .. FMT_GR_NVLINK; *prev_ns as for fmt_gpu_put. */
void fmt_gpux_prefix(cm_buf *b, uint64_t dropped);
void fmt_gpux_put(cm_buf *b, const fmt_gpu *r, uint64_t *prev_ns);

/* SYSTEM records (docs/format.md "System metrics"): one sample of the process and the
 * machine. The same struct is what the collector encodes and the reader delivers. */
enum fmt_sys_reason { FMT_SYS_START = 0, FMT_SYS_TIMER = 1, FMT_SYS_STEP = 2, FMT_SYS_FINAL = 3, FMT_SYS_REASON_MAX = 3 };
/* fields, in `present` bit order */
enum fmt_sys_field {
	FMT_SY_CPU_USER_NS, FMT_SY_CPU_SYS_NS, FMT_SY_RSS, FMT_SY_SWAP, FMT_SY_MINFLT, FMT_SY_MAJFLT,
	FMT_SY_VCSW, FMT_SY_IVCSW, FMT_SY_THREADS, FMT_SY_FDS, FMT_SY_DISK_READ, FMT_SY_DISK_WRITE,
	FMT_SY_RCHAR, FMT_SY_WCHAR, FMT_SY_NET_RX, FMT_SY_NET_TX, FMT_SY_MACH_BUSY_NS, FMT_SY_MACH_IDLE_NS,
	FMT_SY_MACH_IOWAIT_NS, FMT_SY_LOAD1_MILLI, FMT_SY_PROCS_RUNNING,
	FMT_SY_RUN_DELAY_NS, FMT_SY_COUNT
};
typedef struct fmt_sys {
	uint8_t reason;          /* enum fmt_sys_reason */
	uint64_t t_ns;           /* CLOCK_MONOTONIC */
	uint64_t step;           /* steps completed */
	uint64_t present;        /* bit i: v[i] was read */
	uint64_t v[FMT_SY_COUNT];
} fmt_sys;
/* SYSTEM chunk encoding (writer.c): the prefix (samples taken, cumulative), then records;
 * *prev_ns is the previous record's time in the chunk (0 at its start). */
void fmt_sys_prefix(cm_buf *b, uint64_t taken);
void fmt_sys_put(cm_buf *b, const fmt_sys *r, uint64_t *prev_ns);

/* ENERGY records (docs/format.md "Energy"): a counter's definition, then its readings. */
enum fmt_energy_rec { FMT_ER_DOMAIN = 1, FMT_ER_READING = 2 };
enum fmt_energy_source { FMT_ES_RAPL = 1, FMT_ES_NVML = 2, FMT_ES_MAX = 2 };
enum fmt_energy_kind { FMT_EK_OTHER = 0, FMT_EK_PACKAGE = 1, FMT_EK_CORE = 2, FMT_EK_UNCORE = 3, FMT_EK_DRAM = 4,
		       FMT_EK_PSYS = 5, FMT_EK_GPU = 6, FMT_EK_MAX = 6 };
typedef struct fmt_energy {
	uint8_t type;            /* enum fmt_energy_rec */
	uint8_t source, kind;    /* DOMAIN */
	uint32_t domain;         /* the counter's id in the file (from 1) */
	const char *name;        /* DOMAIN: "package-0", "dram", "gpu0" (reader: owned by the file) */
	uint64_t t_ns;           /* READING: CLOCK_MONOTONIC */
	uint64_t uj;             /* READING: the counter, microjoules */
	uint64_t max_uj;         /* READING: the counter wraps to 0 after this (0: never) */
} fmt_energy;
void fmt_energy_put(cm_buf *b, const fmt_energy *r, uint64_t *prev_ns);

enum fmt_kind { FMT_K_VARINT = 0, FMT_K_STRING = 1, FMT_K_ZIGZAG = 2, FMT_K_F64 = 3 };

enum fmt_origin { FMT_ORIGIN_FIRST = 0, FMT_ORIGIN_FORK = 1, FMT_ORIGIN_EXEC = 2, FMT_ORIGIN_SPAWN = 3 };
/* END's exit_reason: how the session ended */
enum fmt_end { FMT_END_STOP = 0, FMT_END_EXIT = 1, FMT_END_EXEC = 2, FMT_END__EXIT = 3 };

#define FMT_EV_BEGIN_MAX 16 /* tag + id + dt */
#define FMT_EV_END_MAX 11   /* tag + dt */

/*
 * A capped recording (docs/format.md, "Capped recordings"): the writer follows each
 * thread's event stream as it copies it, so that a segment file can open with the state
 * its first events continue from: the thread's clock and its open regions. The same
 * reading as the reader's (decode_segment), without delivering anything.
 */
typedef struct fmt_scan {
	uint64_t ticks;          /* the thread's clock after its last event */
	uint32_t depth;          /* regions open (at most FMT_MAX_DEPTH are kept in ids) */
	uint32_t ids[FMT_MAX_DEPTH];
} fmt_scan;
/* Follow `len` bytes of whole events of one thread; *steps and *events count the STEP
 * events and all events. Returns 0, or -1 at a malformed event (the rest is skipped). */
int fmt_scan_events(fmt_scan *s, const uint8_t *p, size_t len, uint64_t *steps, uint64_t *events);
#define FMT_SEG_SUFFIX ".seg." /* a segment file is the entry file's name, this, its number */

/* Header field helpers: append one key/value to a HEADER payload. */
void fmt_hdr_varint(cm_buf *b, unsigned key, uint64_t v);
void fmt_hdr_zigzag(cm_buf *b, unsigned key, int64_t v);
void fmt_hdr_string(cm_buf *b, unsigned key, const char *s, size_t n);
void fmt_hdr_f64(cm_buf *b, unsigned key, double v);

/* The 16-byte preamble. */
void fmt_preamble(uint8_t out[FMT_PREAMBLE_LEN]);

/*
 * Frame `raw` as one chunk of `type`, appended to `out`: compressed with zstd at `level`
 * when level > 0 and it helps, stored raw otherwise. `zctx` is a ZSTD_CCtx* or NULL
 * (then one is made and freed). Returns 0, or FENNEC_ENOMEM / FENNEC_EINVAL (too large).
 */
int fmt_chunk_append(cm_buf *out, unsigned type, const uint8_t *raw, size_t raw_len, int level, void *zctx);

#endif

/*
 * system.c - the system sampler: the process's CPU, memory, faults, context switches,
 * threads, descriptors, disk and network counters and the machine's CPU and load, read
 * from /proc, and the machine's energy counters (RAPL through powercap, NVML through
 * gpu.c), into SYSTEM and ENERGY chunks (docs/format.md). It runs on the writer thread
 * (col_sys_tick) and at the session's start and final flush, never on the program's
 * threads while they run; nothing here is on a hot path, so it may allocate.
 */
#include "collect/collect.h"
#include "collect/gpu.h"

#include <dirent.h>
#include <fcntl.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <unistd.h>

#define SYS_DEFAULT_MS 200       /* FENNEC_SYSTEM_MS: docs/api.md */
#define SYS_STEP_GAP_NS 10000000u /* a step's point no closer than this, or a quarter period, to the one before */
#define SYS_MAX_ZONES 32

typedef struct zone {
	char path[640];          /* .../energy_uj */
	uint64_t max_uj;
	uint32_t id;
	uint8_t kind;
	char name[64];
	int announced;
} zone;

static struct {
	uint64_t interval_ns;    /* 0: off */
	uint64_t step_gap_ns;    /* a step's point comes at least this long after the one before */
	uint64_t next_ns, last_ns, last_step;
	uint64_t taken;
	long clk_tck;
	cm_buf recs, erecs;      /* SYSTEM and ENERGY records since the last drain */
	uint64_t prev_ns, eprev_ns; /* dtime state of the chunk being built */
	zone z[SYS_MAX_ZONES];
	unsigned nz;
	unsigned sources;        /* bit 0 RAPL, bit 1 NVML */
	uint32_t next_domain;
	uint32_t gpu_domain[16]; /* NVML device i's domain id (0: not yet) */
	int started;             /* set (release) after the first point, read (acquire) by the writer */
} Y;

/* session_begin starts the writer thread before col_sys_start takes the first point: the
 * writer's col_sys_tick must not see started before the state that point wrote (TSan:
 * Y.next_ns written by col_sys_start, read by writer_main's tick). */
static int sys_started(void)
{
	return __atomic_load_n(&Y.started, __ATOMIC_ACQUIRE);
}

/* Read a small file into buf (NUL-terminated); the bytes read, or -1. No allocation. */
static ssize_t slurp(const char *path, char *buf, size_t cap)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	size_t n = 0;
	while (n + 1 < cap) {
		ssize_t r = read(fd, buf + n, cap - 1 - n);
		if (r <= 0)
			break;
		n += (size_t)r;
	}
	close(fd);
	buf[n] = 0;
	return (ssize_t)n;
}

/* The number after "key" at the start of a line of buf; -1 if none. */
static int64_t keyed(const char *buf, const char *key)
{
	size_t kl = strlen(key);
	for (const char *p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL)
		if (!strncmp(p, key, kl)) {
			p += kl;
			while (*p == ' ' || *p == '\t' || *p == ':')
				p++;
			return strtoll(p, NULL, 10);
		}
	return -1;
}

static void put(fmt_sys *s, unsigned f, int64_t v)
{
	if (v < 0)
		return;
	s->v[f] = (uint64_t)v;
	s->present |= 1ull << f;
}

/* Open descriptors: the size of /proc/self/fd (Linux 6.2 and later count them there, from
 * the open-descriptor bitmap), else counted with getdents64 into a stack buffer. The
 * directory's listing walks every slot of the descriptor table, which fennec's own
 * descriptors, moved high (fdguard.c), make long: 250 us a point here. */
static int64_t count_fds(void)
{
	struct stat st;
	if (stat("/proc/self/fd", &st) == 0 && st.st_size > 0)
		return (int64_t)st.st_size;
	int fd = open("/proc/self/fd", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	char buf[4096];
	int64_t n = 0;
	long r;
	while ((r = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0)
		for (long off = 0; off < r;) {
			struct { uint64_t ino; int64_t off; unsigned short reclen; unsigned char type; char name[]; } *d =
				(void *)(buf + off);
			if (d->name[0] != '.')
				n++;
			off += d->reclen;
		}
	close(fd);
	return n - 1; /* the one opened here */
}

#define SYS_MAX_TASKS 256 /* threads whose run-queue waits are summed, at most */

/* The time the process's threads waited for a CPU while runnable: the second field of each
 * /proc/self/task/TID/schedstat (run_delay, ns), summed over at most SYS_MAX_TASKS live
 * threads (an ended thread's waits leave the sum with it). -1 when unreadable. */
static int64_t run_delay(void)
{
	int fd = open("/proc/self/task", O_RDONLY | O_DIRECTORY | O_CLOEXEC);
	if (fd < 0)
		return -1;
	char buf[4096], path[64], st[128];
	int64_t sum = 0;
	int n = 0, any = 0;
	long r;
	while (n < SYS_MAX_TASKS && (r = syscall(SYS_getdents64, fd, buf, sizeof buf)) > 0)
		for (long off = 0; off < r && n < SYS_MAX_TASKS;) {
			struct { uint64_t ino; int64_t off; unsigned short reclen; unsigned char type; char name[]; } *d =
				(void *)(buf + off);
			off += d->reclen;
			if (d->name[0] < '0' || d->name[0] > '9')
				continue;
			snprintf(path, sizeof path, "/proc/self/task/%.20s/schedstat", d->name);
			n++;
			if (slurp(path, st, sizeof st) <= 0)
				continue;
			char *e;
			strtoull(st, &e, 10);
			sum += (int64_t)strtoull(e, NULL, 10);
			any = 1;
		}
	close(fd);
	return any ? sum : -1;
}

static void sample(fmt_sys *s)
{
	static char buf[1 << 15]; /* static: every caller holds the session's flush lock */
	memset(s, 0, sizeof *s);
	s->t_ns = cm_mono_ns();
	s->step = col_step_index();
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) == 0) {
		put(s, FMT_SY_CPU_USER_NS, (int64_t)ru.ru_utime.tv_sec * 1000000000 + ru.ru_utime.tv_usec * 1000);
		put(s, FMT_SY_CPU_SYS_NS, (int64_t)ru.ru_stime.tv_sec * 1000000000 + ru.ru_stime.tv_usec * 1000);
		put(s, FMT_SY_MINFLT, ru.ru_minflt);
		put(s, FMT_SY_MAJFLT, ru.ru_majflt);
		put(s, FMT_SY_VCSW, ru.ru_nvcsw);
		put(s, FMT_SY_IVCSW, ru.ru_nivcsw);
	}
	if (slurp("/proc/self/status", buf, sizeof buf) > 0) {
		int64_t v;
		if ((v = keyed(buf, "VmRSS")) >= 0)
			put(s, FMT_SY_RSS, v * 1024);
		if ((v = keyed(buf, "VmSwap")) >= 0)
			put(s, FMT_SY_SWAP, v * 1024);
		put(s, FMT_SY_THREADS, keyed(buf, "Threads"));
	}
	put(s, FMT_SY_FDS, count_fds());
	put(s, FMT_SY_RUN_DELAY_NS, run_delay());
	if (slurp("/proc/self/io", buf, sizeof buf) > 0) {
		put(s, FMT_SY_DISK_READ, keyed(buf, "read_bytes"));
		put(s, FMT_SY_DISK_WRITE, keyed(buf, "write_bytes"));
		put(s, FMT_SY_RCHAR, keyed(buf, "rchar"));
		put(s, FMT_SY_WCHAR, keyed(buf, "wchar"));
	}
	/* Every interface of the process's network namespace: "  lo: rx_bytes ... (8 fields)
	 * tx_bytes ..." after two header lines. */
	if (slurp("/proc/self/net/dev", buf, sizeof buf) > 0) {
		uint64_t rx = 0, tx = 0;
		int any = 0;
		for (char *p = buf; p && *p; p = strchr(p, '\n'), p = p ? p + 1 : NULL) {
			char *c = strchr(p, ':'), *nl = strchr(p, '\n');
			if (!c || (nl && c > nl))
				continue;
			unsigned long long f[9];
			if (sscanf(c + 1, "%llu %llu %llu %llu %llu %llu %llu %llu %llu", &f[0], &f[1], &f[2], &f[3], &f[4],
				   &f[5], &f[6], &f[7], &f[8]) == 9) {
				rx += f[0];
				tx += f[8];
				any = 1;
			}
		}
		if (any) {
			put(s, FMT_SY_NET_RX, (int64_t)rx);
			put(s, FMT_SY_NET_TX, (int64_t)tx);
		}
	}
	/* The whole of /proc/stat: procs_running comes after a per-interrupt line that is long
	 * on big machines. Static: every caller holds the session's flush lock. */
	static char big[1 << 16];
	if (slurp("/proc/stat", big, sizeof big) > 0 && !strncmp(big, "cpu ", 4)) {
		unsigned long long u = 0, ni = 0, sy = 0, id = 0, io = 0, irq = 0, sirq = 0, st = 0;
		put(s, FMT_SY_PROCS_RUNNING, keyed(big, "procs_running"));
		if (sscanf(big + 4, "%llu %llu %llu %llu %llu %llu %llu %llu", &u, &ni, &sy, &id, &io, &irq, &sirq, &st) >= 4 &&
		    Y.clk_tck > 0) {
			uint64_t k = 1000000000u / (uint64_t)Y.clk_tck;
			put(s, FMT_SY_MACH_BUSY_NS, (int64_t)((u + ni + sy + irq + sirq + st) * k));
			put(s, FMT_SY_MACH_IDLE_NS, (int64_t)((id + io) * k));
			put(s, FMT_SY_MACH_IOWAIT_NS, (int64_t)(io * k));
		}
	}
	if (slurp("/proc/loadavg", buf, sizeof buf) > 0) {
		double l = strtod(buf, NULL);
		if (l >= 0)
			put(s, FMT_SY_LOAD1_MILLI, (int64_t)(l * 1000 + 0.5));
	}
}

/* ---- energy ---- */

static uint8_t zone_kind(const char *name)
{
	if (!strncmp(name, "package", 7))
		return FMT_EK_PACKAGE;
	if (!strcmp(name, "core"))
		return FMT_EK_CORE;
	if (!strcmp(name, "uncore"))
		return FMT_EK_UNCORE;
	if (!strcmp(name, "dram"))
		return FMT_EK_DRAM;
	if (!strcmp(name, "psys"))
		return FMT_EK_PSYS;
	return FMT_EK_OTHER;
}

/* The RAPL zones of the powercap tree (FENNEC_POWERCAP: another root, for tests). */
static void rapl_find(void)
{
	const char *root = getenv("FENNEC_POWERCAP");
	if (!root || !*root)
		root = "/sys/class/powercap";
	DIR *d = opendir(root);
	if (!d)
		return;
	struct dirent *e;
	while ((e = readdir(d)) && Y.nz < SYS_MAX_ZONES) {
		/* intel-rapl:0, intel-rapl:0:1 (the control type "intel-rapl" has no counter) */
		if (strncmp(e->d_name, "intel-rapl:", 11) && strncmp(e->d_name, "amd-rapl:", 9))
			continue;
		zone *z = &Y.z[Y.nz];
		char p[512], buf[60];
		snprintf(p, sizeof p, "%s/%s/name", root, e->d_name);
		if (slurp(p, buf, sizeof buf) <= 0)
			continue;
		buf[strcspn(buf, "\n")] = 0;
		snprintf(z->name, sizeof z->name, "%s", buf);
		snprintf(p, sizeof p, "%s/%s/max_energy_range_uj", root, e->d_name);
		z->max_uj = slurp(p, buf, sizeof buf) > 0 ? strtoull(buf, NULL, 10) : 0;
		snprintf(z->path, sizeof z->path, "%s/%s/energy_uj", root, e->d_name);
		if (slurp(z->path, buf, sizeof buf) <= 0) /* unreadable (not root, since 2020 kernels) */
			continue;
		z->kind = zone_kind(z->name);
		z->id = ++Y.next_domain;
		z->announced = 0;
		Y.nz++;
	}
	closedir(d);
	if (Y.nz)
		Y.sources |= 1;
}

static void energy_read(uint64_t now, int nvml)
{
	char buf[64];
	for (unsigned i = 0; i < Y.nz; i++) {
		zone *z = &Y.z[i];
		if (slurp(z->path, buf, sizeof buf) <= 0)
			continue;
		if (!z->announced) {
			fmt_energy d = {.type = FMT_ER_DOMAIN, .source = FMT_ES_RAPL, .kind = z->kind, .domain = z->id,
					.name = z->name};
			fmt_energy_put(&Y.erecs, &d, &Y.eprev_ns);
			z->announced = 1;
		}
		fmt_energy r = {.type = FMT_ER_READING, .domain = z->id, .t_ns = now, .uj = strtoull(buf, NULL, 10),
				.max_uj = z->max_uj};
		fmt_energy_put(&Y.erecs, &r, &Y.eprev_ns);
	}
	/* NVML's energy counters (mJ since the driver loaded), where GPU collection runs */
	for (unsigned i = 0; nvml && i < 16; i++) {
		uint64_t mj;
		int rc = col_gpu_energy_mj(i, &mj);
		if (rc < 0)
			break;
		if (rc)
			continue;
		if (!Y.gpu_domain[i]) {
			char name[16];
			snprintf(name, sizeof name, "gpu%u", i);
			Y.gpu_domain[i] = ++Y.next_domain;
			fmt_energy d = {.type = FMT_ER_DOMAIN, .source = FMT_ES_NVML, .kind = FMT_EK_GPU,
					.domain = Y.gpu_domain[i], .name = name};
			fmt_energy_put(&Y.erecs, &d, &Y.eprev_ns);
			Y.sources |= 2;
		}
		fmt_energy r = {.type = FMT_ER_READING, .domain = Y.gpu_domain[i], .t_ns = now, .uj = mj * 1000};
		fmt_energy_put(&Y.erecs, &r, &Y.eprev_ns);
	}
}

/* ---- the session ---- */

static void take(unsigned reason, int nvml)
{
	fmt_sys s;
	sample(&s);
	s.reason = (uint8_t)reason;
	if (!Y.recs.len)
		fmt_sys_prefix(&Y.recs, 0); /* patched at the drain: see col_sys_drain */
	fmt_sys_put(&Y.recs, &s, &Y.prev_ns);
	Y.taken++;
	Y.last_ns = s.t_ns;
	Y.last_step = s.step;
	energy_read(s.t_ns, nvml);
}

void col_sys_prepare(void)
{
	cm_buf_free(&Y.recs);
	cm_buf_free(&Y.erecs);
	memset(&Y, 0, sizeof Y);
	Y.clk_tck = sysconf(_SC_CLK_TCK);
	uint64_t ms = col_env_number("FENNEC_SYSTEM_MS", SYS_DEFAULT_MS, 0, 3600000, "ms (0: off)");
	Y.interval_ns = ms * 1000000u;
	Y.step_gap_ns = Y.interval_ns / 4 > SYS_STEP_GAP_NS ? Y.interval_ns / 4 : SYS_STEP_GAP_NS;
	if (Y.interval_ns)
		rapl_find();
}

void col_sys_header(cm_buf *h)
{
	if (!Y.interval_ns)
		return;
	fmt_hdr_varint(h, FMT_H_SYS_INTERVAL, Y.interval_ns);
	long n = sysconf(_SC_NPROCESSORS_ONLN);
	if (n > 0)
		fmt_hdr_varint(h, FMT_H_SYS_CPUS, (uint64_t)n);
	long pages = sysconf(_SC_PHYS_PAGES), psz = sysconf(_SC_PAGESIZE);
	if (pages > 0 && psz > 0)
		fmt_hdr_varint(h, FMT_H_SYS_MEM_TOTAL, (uint64_t)pages * (uint64_t)psz);
	fmt_hdr_varint(h, FMT_H_ENERGY_SOURCES, Y.sources | (col_gpu_mode() != COL_GPU_OFF ? 2u : 0u));
}

void col_sys_start(void)
{
	if (!Y.interval_ns)
		return;
	int was = col_mem_internal(1);
	take(FMT_SYS_START, 1);
	col_mem_internal(was);
	Y.next_ns = Y.last_ns + Y.interval_ns;
	__atomic_store_n(&Y.started, 1, __ATOMIC_RELEASE);
}

void col_sys_tick(uint64_t now_ns)
{
	if (!sys_started())
		return;
	if (now_ns >= Y.next_ns) {
		take(FMT_SYS_TIMER, 1);
		Y.next_ns = now_ns + Y.interval_ns;
	} else if (col_step_index() != Y.last_step && now_ns >= Y.last_ns + Y.step_gap_ns) {
		take(FMT_SYS_STEP, 1);
	}
}

uint64_t col_sys_quiet_ns(uint64_t now_ns)
{
	if (!sys_started())
		return UINT64_MAX;
	return Y.next_ns > now_ns ? Y.next_ns - now_ns : 0;
}

/* final: 0 periodic, 1 the session's last, 2 the last at _exit (no NVML call) */
/* A capped recording's new segment: the energy counters defined so far, again, so that
 * its readings name domains of their own file even when the segment that first defined
 * them is dropped (docs/format.md, "Capped recordings"). */
void col_sys_domains(void (*emit)(unsigned type, cm_buf *raw))
{
	if (!sys_started())
		return;
	cm_buf b = {0};
	uint64_t prev = 0;
	for (unsigned i = 0; i < Y.nz; i++)
		if (Y.z[i].announced) {
			fmt_energy d = {.type = FMT_ER_DOMAIN, .source = FMT_ES_RAPL, .kind = Y.z[i].kind,
					.domain = Y.z[i].id, .name = Y.z[i].name};
			fmt_energy_put(&b, &d, &prev);
		}
	for (unsigned i = 0; i < 16; i++)
		if (Y.gpu_domain[i]) {
			char name[16];
			snprintf(name, sizeof name, "gpu%u", i);
			fmt_energy d = {.type = FMT_ER_DOMAIN, .source = FMT_ES_NVML, .kind = FMT_EK_GPU,
					.domain = Y.gpu_domain[i], .name = name};
			fmt_energy_put(&b, &d, &prev);
		}
	if (b.len)
		emit(FMT_ENERGY, &b);
	cm_buf_free(&b);
}

void col_sys_drain(void (*emit)(unsigned type, cm_buf *raw), int final)
{
	if (!sys_started())
		return;
	if (final)
		take(FMT_SYS_FINAL, final != 2);
	if (Y.recs.len) {
		/* The prefix is the cumulative count, known now: rewrite the chunk's first varint */
		cm_buf c = {0};
		fmt_sys_prefix(&c, Y.taken);
		cm_buf_put(&c, Y.recs.data + 1, Y.recs.len - 1); /* the placeholder 0 is one byte */
		emit(FMT_SYSTEM, &c);
		cm_buf_free(&c);
		Y.recs.len = 0;
		Y.prev_ns = 0;
	}
	if (Y.erecs.len) {
		emit(FMT_ENERGY, &Y.erecs);
		Y.erecs.len = 0;
		Y.eprev_ns = 0;
	}
	if (Y.recs.cap > (1u << 20))
		cm_buf_free(&Y.recs);
}

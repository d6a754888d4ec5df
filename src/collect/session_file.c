/*
 * session_file.c - the profile file the session writes: writes that leave a valid prefix
 * when they fail (a full disk, RLIMIT_FSIZE, a descriptor the program took), the header,
 * opening the process's file, and the segments of a capped recording. Run under flush_lock
 * by whichever thread flushes (the writer, or a program thread in lazy mode, at a stop, an
 * exit or an exec). session.h says what it shares; docs/internals/collect.md, "Capped
 * recordings", the segments' design.
 */
#include "collect/collect.h"
#include "collect/gpu.h"
#include "collect/pyframes.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <limits.h>
#include <signal.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/syscall.h>
#include <time.h>
#include <unistd.h>
#include <zstd.h>

#include "collect/session.h" /* last: its short names are macros */

/* ---- the file ---- */

/* write() all of buf or nothing: a failed chunk is cut off again, so the file stays
 * a valid prefix and the loss is counted. After a failure (a full disk, a quota) nothing
 * more is written: a later chunk that fitted would name stacks, strings and threads that
 * the lost one defined, and the reader would refuse the whole file ("names undefined
 * stack"). The file ends where the failure was, as if the process had been killed there;
 * `fennec record` says so when the filesystem is (nearly) full. */
/* Whether S.fd is still the recording's file: a program that closed it with a system call
 * fdguard.c does not see, then opened a file of its own, has its file at that number. */
static int fd_is(int fd, dev_t dev, ino_t ino)
{
	struct stat st;
	return fstat(fd, &st) == 0 && st.st_dev == dev && st.st_ino == ino;
}

int fd_is_ours(void) { return fd_is(S.fd, S.dev, S.ino); }

/*
 * A write beyond RLIMIT_FSIZE fails with EFBIG and sends the writing thread SIGXFSZ, whose
 * default action ends the process. The writer thread blocks every signal, so there it is
 * only EFBIG; a flush on the program's thread (the lazy writer, fennec_start's header,
 * the final flush of a stop, an exit or an exec) blocks SIGXFSZ around its writes, and
 * takes back the signal its own write raised, so that the program goes on (exit 153 "File
 * size limit exceeded" instead of its own status, until 2026-12). One that was pending
 * before (the program's, which it blocks) is left for the program.
 */
__thread int all_blocked; /* fennec's writer thread: every signal blocked for good */

typedef struct xfsz {
	sigset_t old;
	int blocked;     /* SIGXFSZ was blocked here: the old mask is restored */
	int pending;     /* one was pending already: not ours to take */
} xfsz;

static void xfsz_block(xfsz *x)
{
	if (all_blocked) { /* SIGXFSZ stays pending there, never delivered: nothing to do */
		x->blocked = 0;
		return;
	}
	sigset_t s;
	sigemptyset(&s);
	sigaddset(&s, SIGXFSZ);
	x->blocked = pthread_sigmask(SIG_BLOCK, &s, &x->old) == 0;
	x->pending = 0;
	if (x->blocked && sigismember(&x->old, SIGXFSZ)) { /* the program's mask already */
		sigset_t p;
		x->pending = sigpending(&p) == 0 && sigismember(&p, SIGXFSZ);
	}
}

static void xfsz_unblock(xfsz *x, int efbig)
{
	if (!x->blocked)
		return;
	if (efbig && !x->pending) {
		sigset_t s;
		sigemptyset(&s);
		sigaddset(&s, SIGXFSZ);
		struct timespec zero = {0, 0};
		/* The system call: sigtimedwait is one of fennec's wrappers (sample_wall.c). */
		syscall(SYS_rt_sigtimedwait, &s, NULL, &zero, (size_t)(_NSIG / 8));
	}
	pthread_sigmask(SIG_SETMASK, &x->old, NULL);
}

static void write_to(int fd, dev_t dev, ino_t ino, uint64_t *off, const uint8_t *buf, size_t n)
{
	if (fd < 0 || S.write_failed || !fd_is(fd, dev, ino)) {
		S.lost_bytes += n;
		S.write_failed = 1;
		return;
	}
	size_t done = 0;
	int fail = S.fail_write && ++S.writes == S.fail_write, efbig = 0;
	xfsz x;
	xfsz_block(&x);
	while (done < n) {
		ssize_t w = fail ? (errno = ENOSPC, -1) : write(fd, buf + done, n - done);
		if (w < 0 && errno == EINTR)
			continue;
		if (w <= 0) {
			efbig = w < 0 && errno == EFBIG;
			if (ftruncate(fd, (off_t)*off) == 0)
				lseek(fd, (off_t)*off, SEEK_SET);
			S.lost_bytes += n;
			S.write_failed = 1;
			xfsz_unblock(&x, efbig);
			return;
		}
		done += (size_t)w;
	}
	xfsz_unblock(&x, 0);
	*off += n;
}

void file_write(const uint8_t *buf, size_t n) { write_to(S.fd, S.dev, S.ino, &S.file_off, buf, n); }


/* A capped recording keeps what later chunks name in its entry file, never dropped. */
static int seg_def_chunk(unsigned type)
{
	return type == FMT_SITES || type == FMT_THREAD || type == FMT_MODULES || type == FMT_TASKS ||
	       type == FMT_PYCODE || type == FMT_THREAD_END;
}

void emit_chunk(unsigned type, cm_buf *raw)
{
	cm_buf *to = S.seg.on && seg_def_chunk(type) ? &S.seg.defs : &S.out;
	if (raw->failed || fmt_chunk_append(to, type, raw->data, raw->len, S.cfg.compression_level, S.zctx) < 0)
		S.lost_bytes += raw->len;
	raw->len = 0;
	raw->failed = 0;
}

/* Append the whole of a small /proc file to b. */
static void read_file(const char *path, cm_buf *b)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return;
	char tmp[4096];
	ssize_t n;
	while ((n = read(fd, tmp, sizeof tmp)) > 0)
		cm_buf_put(b, tmp, (size_t)n);
	close(fd);
}

void write_header(uint64_t start_mono, uint64_t start_ticks, uint64_t start_real)
{
	cm_buf h = {0}, tmp = {0};
	char host[256] = "";
	gethostname(host, sizeof host - 1);
	fmt_hdr_varint(&h, FMT_H_RECORDING, S.recording_id);
	fmt_hdr_varint(&h, FMT_H_PID, (uint64_t)S.pid);
	fmt_hdr_varint(&h, FMT_H_PPID, (uint64_t)getppid());
	fmt_hdr_zigzag(&h, FMT_H_RANK, S.cfg.rank >= 0 ? S.cfg.rank : col_env_rank());
	fmt_hdr_string(&h, FMT_H_HOST, host, strlen(host));
	read_file("/proc/self/cmdline", &tmp);
	while (tmp.len && tmp.data[tmp.len - 1] == 0)
		tmp.len--;
	fmt_hdr_string(&h, FMT_H_CMDLINE, (const char *)tmp.data, tmp.len);
	char exe[PATH_MAX];
	ssize_t n = readlink("/proc/self/exe", exe, sizeof exe - 1);
	fmt_hdr_string(&h, FMT_H_EXE, exe, n > 0 ? (size_t)n : 0);
	fmt_hdr_varint(&h, FMT_H_START_REAL, start_real);
	fmt_hdr_varint(&h, FMT_H_START_MONO, start_mono);
	fmt_hdr_varint(&h, FMT_H_START_TICKS, start_ticks);
	fmt_hdr_varint(&h, FMT_H_CLOCK, col_use_tsc ? 0 : 1);
	fmt_hdr_varint(&h, FMT_H_PARENT_PID, (uint64_t)S.parent_pid);
	fmt_hdr_varint(&h, FMT_H_ORIGIN, S.origin);
	fmt_hdr_varint(&h, FMT_H_BUFFER, S.cfg.buffer_kb * 1024ull);
	fmt_hdr_varint(&h, FMT_H_STEP_WAIT, S.cfg.step_wait);
	fmt_hdr_varint(&h, FMT_H_STEP_WARMUP, S.cfg.step_warmup);
	fmt_hdr_varint(&h, FMT_H_STEP_ACTIVE, S.cfg.step_active);
	fmt_hdr_varint(&h, FMT_H_STEP_REPEAT, S.cfg.step_repeat);
	fmt_hdr_f64(&h, FMT_H_STEP_FRACTION, S.cfg.step_fraction);
	fmt_hdr_varint(&h, FMT_H_VERSION, FENNEC_VERSION_MAJOR * 10000 + FENNEC_VERSION_MINOR * 100 + FENNEC_VERSION_PATCH);
	fmt_hdr_f64(&h, FMT_H_TICKS_PER_NS, S.ticks_per_ns);
	fmt_hdr_varint(&h, FMT_H_SAMPLE_MODE, S.sample.mode);
	if (S.sample.mode) {
		fmt_hdr_varint(&h, FMT_H_SAMPLE_PERIOD, S.sample.period_ns);
		fmt_hdr_varint(&h, FMT_H_SAMPLE_SOURCE, S.sample.source);
		fmt_hdr_varint(&h, FMT_H_SAMPLE_DEPTH, S.sample.depth);
		fmt_hdr_varint(&h, FMT_H_SAMPLE_HZ, S.sample.hz);
		if (S.budget_ppm)
			fmt_hdr_varint(&h, FMT_H_OVERHEAD_BUDGET, S.budget_ppm);
	}
	if (col_py_version()) {
		/* the source must be one with a signal for Python frames */
		unsigned st = col_py_status();
		if (st == FMT_PY_OK && S.sample.mode && S.sample.source == FMT_SRC_RING)
			st = FMT_PY_SOURCE;
		fmt_hdr_varint(&h, FMT_H_PY_VERSION, col_py_version());
		fmt_hdr_varint(&h, FMT_H_PY_STATUS, st);
	}
	if (S.mem.mode) {
		fmt_hdr_varint(&h, FMT_H_MEM_MODE, S.mem.mode);
		fmt_hdr_varint(&h, FMT_H_MEM_RATE, S.mem.rate);
		fmt_hdr_varint(&h, FMT_H_MEM_INTERVAL, S.mem.interval_ns);
		if (S.mem.mmap_min)
			fmt_hdr_varint(&h, FMT_H_MEM_MMAP, S.mem.mmap_min);
	}
	/* FENNEC_* values the collector could not use (col_config_warn()), one a line */
	size_t cfg_warn_len;
	const char *cfg_warn = col_config_warnings(&cfg_warn_len);
	if (cfg_warn_len)
		fmt_hdr_string(&h, FMT_H_CONFIG_WARNINGS, cfg_warn, cfg_warn_len - 1);
	col_sys_header(&h);
	if (S.seg.on) {
		if (S.seg.max_bytes)
			fmt_hdr_varint(&h, FMT_H_SEG_MAX_SIZE, S.seg.max_bytes);
		if (S.seg.max_ns)
			fmt_hdr_varint(&h, FMT_H_SEG_MAX_DURATION, S.seg.max_ns);
	}
	/* The process's CPU time so far, which the STATS and END records' getrusage() include:
	 * a session started late, or a process's second one, is its own time less this. */
	struct rusage ru;
	if (getrusage(RUSAGE_SELF, &ru) == 0) {
		fmt_hdr_varint(&h, FMT_H_CPU_START_USER, (uint64_t)ru.ru_utime.tv_sec * 1000000000u + (uint64_t)ru.ru_utime.tv_usec * 1000u);
		fmt_hdr_varint(&h, FMT_H_CPU_START_SYS, (uint64_t)ru.ru_stime.tv_sec * 1000000000u + (uint64_t)ru.ru_stime.tv_usec * 1000u);
	}
	uint8_t pre[FMT_PREAMBLE_LEN];
	fmt_preamble(pre);
	cm_buf_put(&S.out, pre, sizeof pre);
	emit_chunk(FMT_HEADER, &h);
	file_write(S.out.data, S.out.len);
	S.out.len = 0;
	cm_buf_free(&h);
	cm_buf_free(&tmp);
}

static void seg_unlink_stale(void);

/* Open this process's file: the base path for the first process, else a new sibling. */
int open_file(void)
{
	if (S.origin == FMT_ORIGIN_FIRST) {
		snprintf(S.file, sizeof S.file, "%s", S.path);
		S.fd = open(S.file, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	} else {
		for (int n = 0; n < 1000; n++) {
			snprintf(S.file, sizeof S.file, "%s.%d.%d", S.path, (int)S.pid, n);
			S.fd = open(S.file, O_WRONLY | O_CREAT | O_EXCL | O_CLOEXEC, 0644);
			if (S.fd >= 0 || errno != EEXIST)
				break;
		}
	}
	S.file_off = 0;
	if (S.fd < 0)
		return errno == ENOENT ? FENNEC_ENOENT : FENNEC_EIO;
	S.fd = col_fd_keep(S.fd);
	struct stat st;
	if (fstat(S.fd, &st) != 0) {
		col_fd_close(S.fd);
		S.fd = -1;
		return FENNEC_EIO;
	}
	S.dev = st.st_dev;
	S.ino = st.st_ino;
	seg_unlink_stale();
	return 0;
}

/*
 * The program's dup2() or dup3() is about to make fd a copy of another descriptor
 * (fdguard.c): if fd is the recording's, move the recording to another number first.
 * Under the flush lock, so that the writer is not between its check of the file and its
 * write; waited for a second at most (a signal handler's dup2 may have interrupted the
 * lock's holder), then moved without it. Returns 0 when fd was the recording's.
 */
int col_session_fd_move(int fd)
{
	if (fd < 0 || (fd != S.fd && fd != S.seg.efd))
		return -1;
	struct timespec dl;
	clock_gettime(CLOCK_REALTIME, &dl);
	dl.tv_sec += 1;
	int locked = lock_flush_by(&dl) == 0;
	int rc = -1;
	if (fd == S.fd || fd == S.seg.efd) {
		int hi = col_fd_keep(fcntl(fd, F_DUPFD_CLOEXEC, fd + 1));
		if (hi >= 0) {
			*(fd == S.fd ? &S.fd : &S.seg.efd) = hi;
			col_fd_close(fd); /* the number is the program's now (dup2 would close it) */
			rc = 0;
		}
	}
	if (locked)
		pthread_mutex_unlock(&flush_lock);
	return rc;
}

/* ---- capped recordings (docs/internals/collect.md, "Capped recordings") ----
 *
 * The entry file (S.file) keeps the HEADER and every chunk that later ones name (sites,
 * threads, modules, tasks, Python code); the rest goes to segment files S.file.seg.K, a
 * quarter of the size cap (or of the duration) each. A new segment opens at the start of
 * a flush and begins with a SEGMENT chunk: what was written before it (steps, events, the
 * process's CPU) and where each thread's stream stands (its clock, its open regions), which
 * the writer follows as it copies the streams (fmt_scan). The oldest segments are deleted
 * while the files would hold more than the cap, or while the newer ones cover the duration.
 * Under flush_lock. */

static void seg_path(char *out, size_t n, uint64_t k)
{
	snprintf(out, n, "%s" FMT_SEG_SUFFIX "%llu", S.file, (unsigned long long)k);
}

/* Segments of an earlier recording at the same name would be read as this one's. */
static void seg_unlink_stale(void)
{
	char dir[sizeof S.file], path[sizeof S.file + 300];
	snprintf(dir, sizeof dir, "%s", S.file);
	char *slash = strrchr(dir, '/');
	const char *base = slash ? slash + 1 : dir;
	if (slash)
		*slash = 0;
	DIR *d = opendir(slash ? (dir[0] ? dir : "/") : ".");
	if (!d)
		return;
	size_t bl = strlen(base), sl = strlen(FMT_SEG_SUFFIX);
	struct dirent *e;
	while ((e = readdir(d))) {
		const char *n = e->d_name;
		if (strncmp(n, base, bl) || strncmp(n + bl, FMT_SEG_SUFFIX, sl) || !n[bl + sl])
			continue;
		const char *q = n + bl + sl;
		while (*q >= '0' && *q <= '9')
			q++;
		if (*q)
			continue;
		snprintf(path, sizeof path, "%s/%s", slash ? (dir[0] ? dir : "") : ".", n);
		unlink(path);
	}
	closedir(d);
}

void seg_scan(uint32_t index, const uint8_t *p, size_t len)
{
	if (index >= S.seg.nth) {
		uint32_t n = index + 16;
		col_seg_thread *t = realloc(S.seg.th, n * sizeof *t);
		if (!t)
			return;
		memset(t + S.seg.nth, 0, (n - S.seg.nth) * sizeof *t);
		S.seg.th = t;
		S.seg.nth = n;
	}
	S.seg.th[index].used = 1;
	fmt_scan_events(&S.seg.th[index].scan, p, len, &S.seg.steps, &S.seg.events);
}

static uint64_t seg_total(void)
{
	uint64_t t = S.seg.eoff + S.file_off;
	for (uint64_t k = S.seg.first; k < S.seg.k; k++)
		t += S.seg.size[k % SEG_KEEP];
	return t;
}

static void seg_drop_oldest(void)
{
	char path[sizeof S.file + 32];
	seg_path(path, sizeof path, S.seg.first);
	unlink(path);
	S.seg.dropped_bytes += S.seg.size[S.seg.first % SEG_KEEP];
	S.seg.first++;
}

/* Drop the oldest closed segments while the files and `incoming` bytes exceed the size
 * cap, or while the newer segments alone cover the duration. */
static void seg_drop(uint64_t incoming)
{
	uint64_t now = cm_mono_ns();
	while (S.seg.first < S.seg.k) {
		int over_size = S.seg.max_bytes && seg_total() + incoming > S.seg.max_bytes;
		int over_time = S.seg.max_ns && S.seg.start_ns[(S.seg.first + 1) % SEG_KEEP] + S.seg.max_ns <= now;
		if (!over_size && !over_time)
			break;
		seg_drop_oldest();
	}
}

/* Open segment k as S.fd and write its opening. S.out is empty. */
static void seg_open(uint64_t k, uint64_t mono, uint64_t ticks)
{
	char path[sizeof S.file + 32];
	seg_path(path, sizeof path, k);
	int fd = open(path, O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
	struct stat st;
	if (fd >= 0)
		fd = col_fd_keep(fd);
	if (fd < 0 || fstat(fd, &st) != 0) {
		if (fd >= 0)
			col_fd_close(fd);
		S.write_failed = 1;
		return;
	}
	if (S.fd >= 0)
		col_fd_close(S.fd);
	S.fd = fd;
	S.dev = st.st_dev;
	S.ino = st.st_ino;
	S.file_off = 0;
	S.seg.k = k;
	S.seg.size[k % SEG_KEEP] = 0;
	S.seg.start_ns[k % SEG_KEEP] = mono;
	uint8_t pre[FMT_PREAMBLE_LEN];
	fmt_preamble(pre);
	cm_buf_put(&S.out, pre, sizeof pre);
	struct rusage ru;
	getrusage(RUSAGE_SELF, &ru);
	cm_buf b = {0};
	cm_buf_varint(&b, k);
	cm_buf_varint(&b, S.recording_id);
	cm_buf_varint(&b, mono);
	cm_buf_varint(&b, ticks);
	cm_buf_varint(&b, S.seg.steps);
	cm_buf_varint(&b, S.seg.events);
	cm_buf_varint(&b, (uint64_t)ru.ru_utime.tv_sec * 1000000000u + (uint64_t)ru.ru_utime.tv_usec * 1000u);
	cm_buf_varint(&b, (uint64_t)ru.ru_stime.tv_sec * 1000000000u + (uint64_t)ru.ru_stime.tv_usec * 1000u);
	uint32_t n = 0;
	for (uint32_t i = 0; i < S.seg.nth; i++)
		n += S.seg.th[i].used;
	cm_buf_varint(&b, n);
	for (uint32_t i = 0; i < S.seg.nth; i++) {
		const fmt_scan *sc = &S.seg.th[i].scan;
		if (!S.seg.th[i].used)
			continue;
		uint32_t depth = sc->depth < FMT_MAX_DEPTH ? sc->depth : FMT_MAX_DEPTH;
		cm_buf_varint(&b, i);
		cm_buf_varint(&b, sc->ticks);
		cm_buf_varint(&b, depth);
		for (uint32_t d = 0; d < depth; d++)
			cm_buf_varint(&b, sc->ids[d]);
	}
	emit_chunk(FMT_SEGMENT, &b);
	cm_buf_free(&b);
	col_sys_domains(emit_chunk); /* readings of this segment name their counters in it */
	file_write(S.out.data, S.out.len);
	S.out.len = 0;
}

/* FENNEC_MAX_SIZE and FENNEC_MAX_DURATION_MS, before the header names them. */
void seg_config(void)
{
	free(S.seg.th);
	cm_buf_free(&S.seg.defs);
	int efd = S.seg.efd;
	memset(&S.seg, 0, sizeof S.seg);
	S.seg.efd = efd;
	uint64_t mb = col_env_u64("FENNEC_MAX_SIZE", 0), md = col_env_u64("FENNEC_MAX_DURATION_MS", 0);
	if (!mb && !md)
		return;
	if (mb && mb < (64u << 10)) {
		col_config_warn("FENNEC_MAX_SIZE", getenv("FENNEC_MAX_SIZE"), "at least 65536 bytes; not capped");
		return;
	}
	if (S.cfg.memory_mode != FENNEC_MEMORY_OFF || col_gpu_mode() != COL_GPU_OFF) {
		col_config_warn(mb ? "FENNEC_MAX_SIZE" : "FENNEC_MAX_DURATION_MS", getenv(mb ? "FENNEC_MAX_SIZE" : "FENNEC_MAX_DURATION_MS"),
				"not with heap profiling or GPU collection (FENNEC_MEMORY=off, no FENNEC_GPU); not capped");
		return;
	}
	S.seg.on = 1;
	S.seg.max_bytes = mb;
	S.seg.max_ns = md * 1000000u;
}

/* After the header: the entry file becomes efd, segment 0 opens. */
void seg_start(uint64_t mono, uint64_t ticks)
{
	if (!S.seg.on)
		return;
	S.seg.efd = S.fd;
	S.seg.edev = S.dev;
	S.seg.eino = S.ino;
	S.seg.eoff = S.file_off;
	S.fd = -1;
	S.seg.prev_mono = mono;
	S.seg.prev_ticks = ticks;
	seg_open(0, mono, ticks);
}

/* At the start of a flush: a new segment when the current one is full or old enough. */
void seg_rotate(void)
{
	uint64_t mono, ticks;
	calib_point(&mono, &ticks);
	/* The new segment starts at the previous flush's start, not now: this flush writes
	 * the events and samples that came after the previous one read each ring, all newer
	 * than its start and some older than now (a segment opened now was read as covering
	 * less time than its events did: shares above 100 % with a 64 KiB cap at 4999 Hz). */
	uint64_t from_mono = S.seg.prev_mono, from_ticks = S.seg.prev_ticks;
	S.seg.prev_mono = mono;
	S.seg.prev_ticks = ticks;
	int full = S.seg.max_bytes && S.file_off >= S.seg.max_bytes / 4;
	int old = S.seg.max_ns && mono - S.seg.start_ns[S.seg.k % SEG_KEEP] >= S.seg.max_ns / 4;
	if (!S.seg.rotate && !full && !old)
		return;
	S.seg.rotate = 0;
	if (S.seg.k - S.seg.first + 1 >= SEG_KEEP)
		seg_drop_oldest();
	S.seg.size[S.seg.k % SEG_KEEP] = S.file_off;
	seg_open(S.seg.k + 1, from_mono, from_ticks);
}

/* A flush's chunks: definitions to the entry file first, then the rest to the segment,
 * after dropping what the cap needs. */
void seg_write(void)
{
	if (S.seg.defs.len) {
		write_to(S.seg.efd, S.seg.edev, S.seg.eino, &S.seg.eoff, S.seg.defs.data, S.seg.defs.len);
		S.seg.defs.len = 0;
	}
	seg_drop(S.out.len);
	if (S.seg.max_bytes && seg_total() + S.out.len > S.seg.max_bytes) {
		/* No room even with the older segments gone: the flush is lost (counted), and the
		 * next opens a new segment, whose SEGMENT chunk resumes after it. */
		S.lost_bytes += S.out.len;
		S.seg.rotate = 1;
		return;
	}
	file_write(S.out.data, S.out.len);
}

/* Close the recording's files. */
void files_close(void)
{
	if (S.fd >= 0)
		col_fd_close(S.fd);
	S.fd = -1;
	if (S.seg.efd >= 0)
		col_fd_close(S.seg.efd);
	S.seg.efd = -1;
}

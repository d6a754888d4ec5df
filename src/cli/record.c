/*
 * record.c - `fennec record [options] -- PROGRAM ARGS`: run PROGRAM with libfennec
 * preloaded and started, following its forks and execs, and exit exactly as it did
 * (same code, or the same signal). The recording is the output file plus one sibling
 * per further process (docs/format.md).
 */
#include <ctype.h>
#include <dirent.h>
#include <elf.h>
#include <errno.h>
#include <fcntl.h>
#include <libgen.h>
#include <limits.h>
#include <linux/perf_event.h>
#include <signal.h>
#include <stddef.h>
#include <stdint.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/random.h>
#include <sys/prctl.h>
#include <sys/resource.h>
#include <sys/stat.h>
#include <sys/statvfs.h>
#include <sys/syscall.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>

#include "analyze/analyze.h"
#include "cli/cli.h"
#include "common/common.h"
#include "format/format.h"
#include "view/metrics.h"


/* A disabled task-clock counter on this process, close-on-exec, never closed. */
static void hold_perf_hooks(void)
{
	struct perf_event_attr a;
	memset(&a, 0, sizeof a);
	a.type = PERF_TYPE_SOFTWARE;
	a.size = sizeof a;
	a.config = PERF_COUNT_SW_TASK_CLOCK;
	a.disabled = 1;
	a.exclude_kernel = 1;
	a.exclude_hv = 1;
	(void)syscall(SYS_perf_event_open, &a, 0, -1, -1, PERF_FLAG_FD_CLOEXEC);
}
static const char help[] =
	"usage: fennec record [options] [--] PROGRAM [ARGS...]\n"
	"\n"
	"Runs PROGRAM with the fennec collector and writes a profile. PROGRAM's exit status is\n"
	"preserved. Forked children and exec'd programs are recorded too (FILE.<pid>.<n>).\n"
	"\n"
	"  -o, --output FILE          profile path (default fennec.fnc); %r is the rank of an MPI or\n"
	"                             torchrun job, %p the pid of fennec record, %h the host name,\n"
	"                             %% a %; any other %, or one at the end, is refused (status 2).\n"
	"                             A directory (existing, or a name ending in /) gets fennec.fnc;\n"
	"                             missing directories are made. An existing FILE must be an\n"
	"                             earlier recording (it is replaced) or empty: another file (the\n"
	"                             program, a source file, /dev/null, a FIFO, a symbolic link) is\n"
	"                             refused. A PROGRAM that cannot be run leaves FILE as it was\n"
	"                             (exit status 127 when not found, 126 when not executable).\n"
	"                             Under a launcher of several ranks a name without %r gets\n"
	"                             .rank<R> before its extension: mpirun -np 4 fennec record -o\n"
	"                             out/run.fnc -- ./app writes out/run.rank0.fnc ... (docs/ranks.md)\n"
	"  --buffer-kb N              per-thread buffer in KiB (default 2048; 64..32768)\n"
	"  --flush-ms N               writer period in ms (default 100)\n"
	"  --step-fraction F          record regions in this fraction of steps (0 < F <= 1)\n"
	"  --step-schedule W,U,A,R    skip W steps, warm up U, record A, repeat R times (0 = forever)\n"
	"  -F, --freq HZ              sampling rate in samples per second (default 999: off-round,\n"
	"                             so sampling does not lock step with periodic work; 1..20000)\n"
	"  --sample MODE              cpu: on-CPU call stacks (default, or $FENNEC_SAMPLE); wall:\n"
	"                             every thread, also while blocked (off-CPU time); off:\n"
	"                             regions and metrics only\n"
	"  --stack-depth N            deepest call stack kept, frames (default 256; 4..512)\n"
	"  --overhead-budget PCT      keep fennec's cost under PCT of the program's CPU (0.01 .. 50,\n"
	"                             as 1 or 1%%): it measures its cost about every second and samples\n"
	"                             less often while over (down to 10 Hz), more often again while\n"
	"                             well under; the report says what it changed and when\n"
	"                             (docs/sampling.md)\n"
	"  --memory MODE              heap profiling (docs/memory.md): sampled (default: exact totals,\n"
	"                             stacks of allocations sampled over bytes), full (every allocation\n"
	"                             and free with its stack: exact leaks), off\n"
	"  --memory-rate BYTES        sampled: mean bytes between sampled allocations (default 512K;\n"
	"                             sizes take K, KiB, KB, M, MiB, MB, G, GiB, GB)\n"
	"  --memory-interval MS       heap and RSS timeline period (default 50; also at every step)\n"
	"  --system-interval MS       system metrics period: CPU, memory, faults, switches, disk,\n"
	"                             network, energy (default 200; also after steps; 0: off)\n"
	"  --memory-mmap[=BYTES]      also count the program's anonymous mmap()s of at least BYTES\n"
	"                             (default 65536) as allocations, munmap()s as frees\n"
	"  --gpu                      CUDA kernels, transfers, synchronisation, API calls and GPU memory\n"
	"                             (CUPTI), GPU utilisation (NVML): docs/gpu.md\n"
	"  --gpu-kernels-only         --gpu with kernels only, the lowest overhead\n"
	"  --view[=PORT]              serve the live dashboard of the recording on 127.0.0.1:PORT\n"
	"                             (default 8051) while it runs and after (docs/html.md); the\n"
	"                             server passes signals on and dies of none, as below\n"
	"  --max-size SIZE            cap the recording's files at SIZE (64K .. 4G-1; K, M, G): it is\n"
	"                             kept as segments FILE.seg.N, the oldest deleted; the analysis\n"
	"                             says what was dropped (docs/format.md). Heap profiling is off\n"
	"  --max-duration D           keep about the last D of the run (1s .. 366d; ms, s, m, h)\n"
	"  --metrics-listen [HOST:]PORT  serve live metrics for Prometheus at /metrics, from\n"
	"                             fennec record, while the program runs (docs/prometheus.md);\n"
	"                             HOST defaults to 127.0.0.1; PORT 0 takes any free port; the\n"
	"                             address is printed on standard error\n"
	"  --continuous DIR           write a pprof profile of every --interval into DIR while the\n"
	"                             program runs, for Pyroscope, Parca or go tool pprof (docs/\n"
	"                             continuous.md): sampling at 49 Hz unless -F says otherwise, the\n"
	"                             recording (DIR/recording.fnc unless -o) capped to the last two\n"
	"                             intervals and 15 s unless --max-size or --max-duration say; heap\n"
	"                             profiling off\n"
	"  --interval D               --continuous: the length of each profile (default 60s; 1s .. 1d)\n"
	"  --keep N                   --continuous: the newest N profiles stay (default 1440, a day\n"
	"                             of minutes); the older ones this run wrote are removed\n"
	"  -q, --quiet                no summary line on standard error\n"
	"\n"
	"While PROGRAM runs, fennec record passes on to it the signals sent to fennec record, and\n"
	"dies of none of them (SIGKILL and SIGSTOP cannot be caught). Without a controlling\n"
	"terminal PROGRAM runs in a process group of its own: a signal sent to fennec record, or to\n"
	"its process group, reaches PROGRAM once, and PROGRAM is killed if fennec record is. In a\n"
	"terminal PROGRAM stays in fennec record's process group, so that Ctrl-C, Ctrl-Z and job\n"
	"control reach it directly, not a second time through fennec record (a kill -- -PGID from\n"
	"another terminal reaches it twice).\n"
	"\n"
	"The collector reads the same settings from FENNEC_* variables (docs/api.md).\n";

/*
 * Signals while the program runs. fennec record stands for the program: it dies of no
 * signal meant for the program (SIGUSR1 sent to the job killed it, leaving the program
 * running with its exit status lost), passes on what is sent to it, and exits as the
 * program does. kill() to one process and to its process group look the same to the one
 * that receives it (SI_USER and the sender's pid), so where the program runs decides:
 *
 * - Without a controlling terminal (scripts, job schedulers, containers, CI) the program
 *   runs in a process group of its own, as under tini, and every signal fennec record gets
 *   is passed on: one sent to fennec record alone, or to its group, reaches it once (in the
 *   same group, it also got the group's copy: a SIGTERM to the group counted 2).
 *   The program is killed with fennec record (PR_SET_PDEATHSIG), as a SIGKILL to the group
 *   would have killed it; a SIGSTOP to the group, which no one can catch, stops fennec
 *   record only.
 * - With one (a shell, its jobs and pipelines), the program stays in fennec record's group,
 *   so that Ctrl-C, Ctrl-\, Ctrl-Z and job control reach it as they would without fennec.
 *   What the terminal sends (si_code SI_KERNEL) reached the program too and is not passed
 *   on; what a process sends is, unless the sender is in that group (the program's own
 *   kill(0, ...)) and not fennec record's parent (fennec record --view's server). A signal
 *   sent to the group from outside (kill -- -PGID) then reaches the program twice, as it
 *   does under sudo without a pty.
 *
 * Never passed on: what fennec record sent itself (SIGPIPE of its own writes), what the
 * program sent (a notice to its parent), and, from the kernel, fennec record's own
 * SIGXCPU and SIGXFSZ. Faults (SIGSEGV, SIGBUS, SIGFPE, SIGILL, SIGTRAP, SIGSYS, SIGABRT)
 * keep their default action: they are fennec record's own.
 */
static volatile pid_t child; /* the program, until it ended (0: none) */
static int own_group;        /* the program runs in a process group of its own */

/* Whether a signal fennec record got is to be passed on to the program c. */
static int pass_on(int sig, const siginfo_t *si, pid_t c)
{
	if (si->si_code == SI_USER || si->si_code == SI_QUEUE || si->si_code == SI_TKILL) {
		/* si_pid is 0 for a sender outside this pid namespace (docker stop) */
		if (si->si_pid == getpid() || si->si_pid == c)
			return 0;
		return si->si_pid <= 0 || si->si_pid == getppid() || getpgid(si->si_pid) != getpgid(c);
	}
	if (!own_group)
		return 0;
	return sig != SIGXCPU && sig != SIGXFSZ;
}

static void forward(int sig, siginfo_t *si, void *ctx)
{
	int e = errno;
	pid_t c = child;
	if (c > 0 && pass_on(sig, si, c))
		kill(c, sig);
	errno = e;
}

/* The signals fennec record catches while the program runs: those whose default action
 * would end it, less the faults, and in a group of its own the stops and SIGCONT. */
void cli_forwarded_set(sigset_t *set, int group)
{
	static const int term[] = {SIGHUP, SIGINT, SIGQUIT, SIGUSR1, SIGUSR2, SIGPIPE, SIGALRM, SIGTERM,
				   SIGSTKFLT, SIGXCPU, SIGXFSZ, SIGVTALRM, SIGPROF, SIGIO, SIGPWR};
	static const int job[] = {SIGTSTP, SIGTTIN, SIGTTOU, SIGCONT};
	sigemptyset(set);
	for (size_t k = 0; k < sizeof term / sizeof *term; k++)
		sigaddset(set, term[k]);
	for (int s = SIGRTMIN; s <= SIGRTMAX; s++)
		sigaddset(set, s);
	for (size_t k = 0; group && k < sizeof job / sizeof *job; k++)
		sigaddset(set, job[k]);
}

/* libfennec.so beside the fennec binary: <prefix>/bin/fennec -> <prefix>/lib/libfennec.so. */
static int find_library(char *out, size_t n)
{
	const char *env = getenv("FENNEC_LIB");
	if (env && *env) {
		snprintf(out, n, "%s", env);
		return access(out, R_OK);
	}
	char exe[PATH_MAX];
	ssize_t len = readlink("/proc/self/exe", exe, sizeof exe - 1);
	if (len <= 0)
		return -1;
	exe[len] = 0;
	char *dir = dirname(exe);
	const char *cands[] = {"%s/../lib/libfennec.so", "%s/libfennec.so", "%s/../lib/fennec/libfennec.so"};
	for (size_t i = 0; i < sizeof cands / sizeof *cands; i++) {
		snprintf(out, n, cands[i], dir);
		char real[PATH_MAX];
		if (realpath(out, real) && access(real, R_OK) == 0) {
			snprintf(out, n, "%s", real);
			return 0;
		}
	}
	return -1;
}

/* Whether the regular file at path may be replaced by a recording: a fennec profile, or
 * what is left of one that could not write its header (empty, or the magic's beginning).
 * Anything else is someone's data: a program, a source file, a report. */
static int replaceable(const char *path)
{
	char magic[8];
	int n = cli_read_magic(path, magic);
	return n >= 0 && !memcmp(magic, FMT_MAGIC, (size_t)n);
}

/*
 * Why program `path` cannot load libfennec, or NULL when nothing says it cannot: a
 * statically linked ELF file (no PT_INTERP: no dynamic loader to preload the collector)
 * or a set-user or set-group id one (the loader ignores LD_PRELOAD for it).
 */
static const char *why_no_preload(const char *path)
{
	struct stat st;
	if (stat(path, &st) == 0 && (st.st_mode & (S_ISUID | S_ISGID)))
		return "it is set-user-ID or set-group-ID, and the dynamic loader ignores LD_PRELOAD for such "
		       "a program; run a copy without the bit, or link libfennec.a and call fennec_start()";
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return NULL;
	Elf64_Ehdr eh;
	const char *why = NULL;
	if (pread(fd, &eh, sizeof eh, 0) == (ssize_t)sizeof eh && !memcmp(eh.e_ident, ELFMAG, SELFMAG) &&
	    eh.e_ident[EI_CLASS] == ELFCLASS64 && eh.e_phentsize == sizeof(Elf64_Phdr) && eh.e_phnum < 4096) {
		int interp = 0;
		for (unsigned k = 0; k < eh.e_phnum && !interp; k++) {
			Elf64_Phdr ph;
			if (pread(fd, &ph, sizeof ph, (off_t)(eh.e_phoff + k * sizeof ph)) != (ssize_t)sizeof ph)
				break;
			interp = ph.p_type == PT_INTERP;
		}
		if (!interp)
			why = "it is statically linked: fennec's collector is a shared library that the dynamic "
			      "loader preloads, and a static program has no loader (nor can it link libfennec.a, "
			      "whose malloc and free replace the C library's); relink it without -static";
	}
	close(fd);
	return why;
}

/*
 * The file that execvp(name) would run, searched as execvp searches (a name with a '/' as
 * it is, else each directory of $PATH, or of the system's default path), into out.
 * Returns 0, or the errno that execvp would fail with: ENOENT when there is no such file,
 * EACCES when there is one but not an executable regular file. So that a program that
 * cannot be run is said before the recording at the output path is removed.
 */
static int find_program(const char *name, char *out, size_t n)
{
	struct stat st;
	if (!*name)
		return ENOENT;
	if (strchr(name, '/')) {
		if (stat(name, &st) != 0)
			return errno;
		if (!S_ISREG(st.st_mode) || access(name, X_OK) != 0)
			return EACCES;
		snprintf(out, n, "%s", name);
		return 0;
	}
	char defpath[PATH_MAX] = "/bin:/usr/bin";
	const char *path = getenv("PATH");
	if (!path) {
		size_t k = confstr(_CS_PATH, defpath, sizeof defpath);
		path = k > 0 && k <= sizeof defpath ? defpath : "/bin:/usr/bin";
	}
	int err = ENOENT;
	for (const char *p = path;; p++) {
		size_t len = strcspn(p, ":");
		/* an empty entry is the current directory */
		if ((size_t)snprintf(out, n, "%.*s%s%s", (int)len, p, len ? "/" : "", name) < n && stat(out, &st) == 0) {
			if (S_ISREG(st.st_mode) && access(out, X_OK) == 0)
				return 0;
			err = EACCES;
		}
		p += len;
		if (!*p)
			break;
	}
	return err;
}

/* Remove the sibling files of an earlier recording at the same path, so that analysis
 * does not mix runs. Only files that are fennec profiles are touched. */
static void remove_old_siblings(const char *path)
{
	char d[PATH_MAX], b[PATH_MAX];
	snprintf(d, sizeof d, "%s", path);
	snprintf(b, sizeof b, "%s", path);
	const char *dir = dirname(d), *base = basename(b);
	size_t bl = strlen(base);
	DIR *dp = opendir(dir);
	if (!dp)
		return;
	struct dirent *e;
	while ((e = readdir(dp))) {
		if (strncmp(e->d_name, base, bl) || e->d_name[bl] != '.')
			continue;
		const char *s = e->d_name + bl + 1;
		if (strspn(s, "0123456789.") != strlen(s) || !*s)
			continue;
		char full[PATH_MAX * 2];
		snprintf(full, sizeof full, "%s/%s", dir, e->d_name);
		if (cli_is_profile(full))
			unlink(full);
	}
	closedir(dp);
}

/* Whether a profile file ends with its END chunk, found by walking the chunk headers
 * (no payload is read). A file without one was cut short: its process was killed, is
 * still running, or could not write (the collector stops at the first failed write). */
static int file_finished(const char *path)
{
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0)
		return 1; /* gone meanwhile: nothing to say about it */
	struct stat st;
	int last = -1;
	uint64_t off = FMT_PREAMBLE_LEN;
	if (fstat(fd, &st) == 0) {
		uint8_t h[FMT_CHUNK_HDR_LEN];
		while (off + FMT_CHUNK_HDR_LEN <= (uint64_t)st.st_size &&
		       pread(fd, h, sizeof h, (off_t)off) == (ssize_t)sizeof h) {
			last = h[0];
			off += FMT_CHUNK_HDR_LEN + cm_le32(h + 4);
		}
	}
	close(fd);
	return last == FMT_END && off == (uint64_t)st.st_size;
}

/* The free space of the filesystem holding path, in words, when it is low (else ""). */
static void low_space(const char *path, char *fr, size_t n)
{
	char d[PATH_MAX];
	snprintf(d, sizeof d, "%s", path);
	struct statvfs vs;
	fr[0] = 0;
	if (statvfs(dirname(d), &vs) == 0) {
		double avail = (double)vs.f_bavail * (double)vs.f_frsize;
		if (avail < 16.0 * 1048576)
			ana_fmt_bytes(avail, fr, n);
	}
}

/* Files cut short although the program exited, on a filesystem with little room: say so.
 * Elsewhere a file without END is a process killed by a signal, one that called _exit from
 * a signal handler that had interrupted fennec's own code (session_fork.c, exit_finish()), one
 * that made the exit system call itself, or one still running: nothing to warn about. */
static void report_unfinished(const char *path, int unfinished, int files)
{
	char fr[32];
	low_space(path, fr, sizeof fr);
	if (files == 1)
		fprintf(stderr, "fennec record: the profile ends early, without its end record: ");
	else
		fprintf(stderr, "fennec record: %d of the %d process files end early, without their end record: ", unfinished, files);
	if (*fr)
		fprintf(stderr, "the filesystem holding %s has %s free, and the collector stops writing at the first chunk "
				"that does not fit (a full disk or a quota); `fennec analyze` reads what was written\n", path, fr);
	else
		fprintf(stderr, "%s killed or crashed, or a write failed (a file size limit, a descriptor the program "
				"closed); `fennec analyze` reads what was written\n",
			files == 1 ? "the process was" : "their processes were");
}

/* Process files of the recording that hold no profile (their header could not be written). */
static void report_empty(const char *path, int empty)
{
	char fr[32];
	low_space(path, fr, sizeof fr);
	fprintf(stderr, "fennec record: %d process file%s of %s %s empty: %s could not write a profile", empty,
		empty == 1 ? "" : "s", path, empty == 1 ? "is" : "are", empty == 1 ? "its process" : "their processes");
	if (*fr)
		fprintf(stderr, " (the filesystem holding it has %s free)", fr);
	fprintf(stderr, "\n");
}

/* Total size and count of the recording's files, how many end without END, and how many
 * files of the recording's names hold too little to be a profile (a header write failed). */
/* Add the lines of `lines` that `buf` (NUL-terminated, cap bytes) does not hold yet. */
static void merge_lines(char *buf, size_t cap, const char *lines)
{
	for (const char *l = lines; l && *l;) {
		const char *nl = strchr(l, '\n');
		size_t n = nl ? (size_t)(nl - l) : strlen(l), have = strlen(buf);
		int found = 0;
		for (const char *b = buf; *b && !found;) {
			const char *bn = strchr(b, '\n');
			size_t bl = bn ? (size_t)(bn - b) : strlen(b);
			found = bl == n && !memcmp(b, l, n);
			b += bl + (bn != NULL);
		}
		if (n && !found && have + n + 2 <= cap) {
			memcpy(buf + have, l, n);
			buf[have + n] = '\n';
			buf[have + n + 1] = 0;
		}
		l += n + (nl != NULL);
	}
}

/* The recording's files: their bytes, how many, how many end early and how many are
 * empty; in warn, the FENNEC_* values their collectors could not use (header key 33), one
 * a line, each once. */
static void recording_size(const char *path, unsigned long long *bytes, int *files, int *unfinished, int *empty,
			   char *warn, size_t warn_cap)
{
	warn[0] = 0;
	char d[PATH_MAX], b[PATH_MAX];
	snprintf(d, sizeof d, "%s", path);
	snprintf(b, sizeof b, "%s", path);
	const char *dir = dirname(d), *base = basename(b);
	size_t bl = strlen(base);
	*bytes = 0;
	*files = 0;
	*unfinished = 0;
	*empty = 0;
	DIR *dp = opendir(dir);
	if (!dp)
		return;
	struct dirent *e;
	while ((e = readdir(dp))) {
		if (strncmp(e->d_name, base, bl) || (e->d_name[bl] && e->d_name[bl] != '.'))
			continue;
		char full[PATH_MAX * 2];
		struct stat st;
		snprintf(full, sizeof full, "%s/%s", dir, e->d_name);
		if (stat(full, &st) != 0 || !S_ISREG(st.st_mode))
			continue;
		if (fmt_is_segment_name(e->d_name)) { /* a capped recording's: its entry file counts */
			*bytes += (unsigned long long)st.st_size;
			continue;
		}
		if (cli_is_profile(full)) {
			*bytes += (unsigned long long)st.st_size;
			(*files)++;
			fmt_file f = {0};
			fmt_error err;
			int hrc = fmt_read_header(full, &f, &err);
			/* a capped recording's END is in its last segment */
			*unfinished += !(hrc == 0 && f.seg_capped) && !file_finished(full);
			if (hrc == 0)
				merge_lines(warn, warn_cap, f.config_warnings);
			fmt_file_free(&f);
		} else if (st.st_size < FMT_PREAMBLE_LEN) {
			const char *sfx = e->d_name + bl; /* "" or ".PID[.N]": a name the collector gives */
			*empty += !*sfx || (strspn(sfx + 1, "0123456789.") == strlen(sfx + 1) && sfx[1]);
		}
	}
	closedir(dp);
}

/*
 * Launchers of distributed jobs and the variables that give a process its rank and the
 * job's size. The rank variables and their order are the collector's (col_env_rank in
 * src/collect/config.c), so that a file's name and its header agree.
 */
static const struct { const char *rank, *size; } launchers[] = {
	{"RANK", "WORLD_SIZE"},                          /* torchrun, torch.distributed */
	{"OMPI_COMM_WORLD_RANK", "OMPI_COMM_WORLD_SIZE"}, /* Open MPI's mpirun */
	{"PMI_RANK", "PMI_SIZE"},                        /* MPICH and Intel MPI (Hydra) */
	{"SLURM_PROCID", "SLURM_NTASKS"},                /* srun */
};

/* This process's rank (-1: none) and the job's size (0: unknown). */
static long job_rank(long *size)
{
	for (size_t i = 0; i < sizeof launchers / sizeof *launchers; i++) {
		const char *r = getenv(launchers[i].rank), *z = getenv(launchers[i].size);
		char *end;
		if (!r || !*r)
			continue;
		long v = strtol(r, &end, 10);
		if (*end || v < 0 || v >= INT_MAX)
			continue;
		*size = z && *z ? strtol(z, NULL, 10) : 0;
		return v;
	}
	*size = 0;
	return -1;
}

/* mkdir -p: 0, or -1 with errno and *failed naming the directory whose creation failed
 * (a component that exists and is no directory fails with ENOTDIR there), so that the
 * message names the step that failed, not a later one that could only say ENOENT. */
static int make_dirs(const char *path, char *failed, size_t n)
{
	char d[PATH_MAX];
	snprintf(d, sizeof d, "%s", path);
	size_t len = strlen(d);
	while (len > 1 && d[len - 1] == '/')
		d[--len] = 0;
	for (char *s = d + 1;; s++) {
		if (*s && *s != '/')
			continue;
		char c = *s;
		*s = 0;
		struct stat st;
		int e = mkdir(d, 0777) == 0 ? 0 : errno;
		if (e == EEXIST && stat(d, &st) == 0 && !S_ISDIR(st.st_mode))
			e = ENOTDIR;
		if (e && e != EEXIST) {
			snprintf(failed, n, "%s", d);
			errno = e;
			return -1;
		}
		if (!c)
			return 0;
		*s = c;
	}
}

/* Says why make_dirs() failed for the recording at path (errno as it left it); returns 1. */
static int dirs_failed(const char *failed, const char *path)
{
	int e = errno;
	struct stat st;
	if (e == ENOTDIR && stat(failed, &st) == 0)
		cli_error("record", "cannot record to %s: %s is in the way, and is not a directory", path, failed);
	else
		cli_error("record", "cannot record to %s: cannot create directory %s: %s", path, failed, strerror(e));
	return 1;
}

int cli_record_output(const char *given, char *out, size_t n)
{
	long size, rank = job_rank(&size);
	char name[PATH_MAX], host[256] = "localhost", failed[PATH_MAX];
	size_t k = 0;
	int has_rank = 0;
	gethostname(host, sizeof host - 1);
	host[strcspn(host, ".")] = 0;
	const char *s;
	for (s = given; *s && k + 1 < sizeof name; s++) {
		if (*s != '%') {
			name[k++] = *s;
			continue;
		}
		s++;
		if (*s == 'r') {
			has_rank = 1;
			k += (size_t)snprintf(name + k, sizeof name - k, "%ld", rank >= 0 ? rank : 0);
		} else if (*s == 'p')
			k += (size_t)snprintf(name + k, sizeof name - k, "%ld", (long)getpid());
		else if (*s == 'h')
			k += (size_t)snprintf(name + k, sizeof name - k, "%s", host);
		else if (*s == '%')
			name[k++] = '%';
		else if (!*s) {
			cli_error("record", "-o %s: a %% at the end of the name (a %% is written %%%%; %%r, %%p and %%h "
					    "stand for the rank, the pid and the host)", given);
			return 2;
		} else {
			cli_error("record", "-o %s: unknown %%%c (use %%r, %%p, %%h or %%%%)", given, *s);
			return 2;
		}
		if (k >= sizeof name) {
			cli_error("record", "-o %s: output path too long", given);
			return 2;
		}
	}
	if (*s) {
		cli_error("record", "-o %s: output path too long", given);
		return 2;
	}
	name[k] = 0;
	struct stat st;
	size_t len = strlen(name);
	if ((len && name[len - 1] == '/') || (stat(name, &st) == 0 && S_ISDIR(st.st_mode))) {
		if (make_dirs(name, failed, sizeof failed) < 0)
			return dirs_failed(failed, name);
		snprintf(name + len, sizeof name - len, "%sfennec.fnc", len && name[len - 1] == '/' ? "" : "/");
	}
	/* Several ranks must not write one file: each gets its own name. */
	if (!has_rank && rank >= 0 && size != 1) {
		char *base = strrchr(name, '/'), *dot;
		base = base ? base + 1 : name;
		dot = strrchr(base, '.');
		char ext[PATH_MAX] = "";
		if (dot && dot != base) {
			snprintf(ext, sizeof ext, "%s", dot);
			*dot = 0;
		}
		len = strlen(name);
		snprintf(name + len, sizeof name - len, ".rank%ld%s", rank, ext);
	}
	if ((size_t)snprintf(out, n, "%s", name) >= n) {
		cli_error("record", "-o %s: output path too long", given);
		return 2;
	}
	/* The directory of the profile is made if missing: every rank of a job may be the
	 * first to get there (one that exists is no failure). */
	char *slash = strrchr(name, '/');
	if (slash && slash != name) {
		*slash = 0;
		if (make_dirs(name, failed, sizeof failed) < 0)
			return dirs_failed(failed, out);
	}
	return 0;
}

/* --metrics-listen SPEC: the metrics server of the recording at abs (src/view/metrics.c).
 * Returns 0, or the exit status of a failure, said. */
static int start_metrics(const char *spec, const char *abs, view_metrics **out)
{
	char host[256], why[300];
	unsigned port;
	if (view_metrics_parse_listen(spec, host, sizeof host, &port, why, sizeof why) < 0) {
		cli_error("record", "%s", why);
		return 2;
	}
	view_error err;
	if (view_metrics_open(host, port, abs, out, &err)) {
		if (err.sys_errno == EADDRINUSE)
			cli_error("record", "--metrics-listen: %s: the port is taken; choose another, or port 0 for any "
					    "free one (the program was not started)", err.msg);
		else
			cli_error("record", "--metrics-listen: %s (the program was not started)", err.msg);
		return 1;
	}
	int v6 = strchr(host, ':') != NULL;
	if (!view_metrics_loopback(*out))
		cli_error("record", "warning: %s is not a loopback address: other machines can read the metrics "
				    "(pids, host name, region and metric names)", host);
	fprintf(stderr, "fennec record: serving metrics at http://%s%s%s:%u/metrics\n", v6 ? "[" : "", host,
		v6 ? "]" : "", view_metrics_port(*out));
	setenv("FENNEC_WRITER", "thread", 1);
	return 0;
}

/*
 * fennec record's options (its help above), as a table: each row's value is checked as it
 * is read and kept, as given, in a field of rec_opts; a row with `env` hands it to the
 * collector in the program's environment (in the table's order), or `dflt` when neither
 * the option nor the environment gives one.
 */
typedef struct rec_opts {
	const char *output;
	const char *buffer, *flush, *fraction, *schedule, *sample, *freq, *depth, *memory, *mem_rate, *mem_interval,
		*sys_interval, *mem_mmap;
	const char *metrics_listen; /* --metrics-listen (src/view/metrics.c) */
	const char *max_size, *max_dur; /* --max-size, --max-duration: a capped recording */
	const char *continuous, *interval, *keep; /* --continuous DIR, --interval, --keep (continuous.c) */
	const char *budget;                       /* --overhead-budget (collect/budget.c) */
	char mem_rate_s[24], mem_mmap_s[24], max_size_s[24], max_dur_s[24], interval_s[24]; /* bytes, ms */
	int gpu_mode, quiet;
} rec_opts;

enum rec_kind {
	REC_FILE,     /* a file name, not empty */
	REC_U32,      /* a whole number in [lo, hi] */
	REC_FRACTION, /* a fraction of the steps, 0 < F <= 1 */
	REC_SCHEDULE, /* WAIT,WARMUP,ACTIVE,REPEAT */
	REC_CHOICE,   /* one of `choices` */
	REC_BYTES,    /* a size in [lo, hi] with units, kept as bytes in `buf` */
	REC_BYTES_OPT, /* the same, optional: only --name=BYTES gives one, else `dflt` */
	REC_GPU,      /* a flag: gpu_mode = lo */
	REC_QUIET,    /* a flag */
	REC_LISTEN,   /* [HOST:]PORT (view_metrics_parse_listen) */
	REC_DURATION, /* a duration with a unit (ms, s, m, h; none: s) in [lo, hi] s, kept as ms in `buf` */
	REC_PERCENT,  /* a percentage from lo/100 to hi, with or without %, passed on as given */
};

typedef struct rec_option {
	const char *name, *alt; /* "--freq", "-F" (NULL: none) */
	unsigned kind;          /* enum rec_kind */
	size_t field;           /* offsetof(rec_opts, ...): its value */
	const char *env;        /* the collector's variable it sets in the program, or NULL */
	unsigned lo, hi;
	const char *choices[3];
	const char *dflt;
	size_t buf;             /* REC_BYTES*: offsetof(rec_opts, ...) of the bytes' digits */
} rec_option;

#define REC_AT(f) offsetof(rec_opts, f)
static const rec_option rec_options[] = {
	{"--output", "-o", REC_FILE, REC_AT(output), NULL, 0, 0, {0}, NULL, 0},
	{"--buffer-kb", NULL, REC_U32, REC_AT(buffer), "FENNEC_BUFFER_KB", 64, 32768, {0}, NULL, 0},
	{"--flush-ms", NULL, REC_U32, REC_AT(flush), "FENNEC_FLUSH_MS", 1, 60000, {0}, NULL, 0},
	{"--step-fraction", NULL, REC_FRACTION, REC_AT(fraction), "FENNEC_STEP_FRACTION", 0, 0, {0}, NULL, 0},
	{"--step-schedule", NULL, REC_SCHEDULE, REC_AT(schedule), "FENNEC_STEP_SCHEDULE", 0, 0, {0}, NULL, 0},
	{"--sample", NULL, REC_CHOICE, REC_AT(sample), "FENNEC_SAMPLE", 0, 0, {"cpu", "wall", "off"}, "cpu", 0},
	{"--freq", "-F", REC_U32, REC_AT(freq), "FENNEC_HZ", 1, 20000, {0}, NULL, 0},
	{"--stack-depth", NULL, REC_U32, REC_AT(depth), "FENNEC_STACK_DEPTH", 4, 512, {0}, NULL, 0},
	{"--overhead-budget", NULL, REC_PERCENT, REC_AT(budget), "FENNEC_OVERHEAD_BUDGET", 1, 50, {0}, NULL, 0},
	{"--memory", NULL, REC_CHOICE, REC_AT(memory), "FENNEC_MEMORY", 0, 0, {"sampled", "full", "off"}, "sampled", 0},
	{"--memory-rate", NULL, REC_BYTES, REC_AT(mem_rate), "FENNEC_MEMORY_RATE", 1, 1u << 30, {0}, NULL,
	 REC_AT(mem_rate_s)},
	{"--memory-interval", NULL, REC_U32, REC_AT(mem_interval), "FENNEC_MEMORY_INTERVAL_MS", 1, 3600000, {0}, NULL,
	 0},
	{"--system-interval", NULL, REC_U32, REC_AT(sys_interval), "FENNEC_SYSTEM_MS", 0, 3600000, {0}, NULL, 0},
	{"--memory-mmap", NULL, REC_BYTES_OPT, REC_AT(mem_mmap), "FENNEC_MEMORY_MMAP", 1, 1u << 30, {0}, "65536",
	 REC_AT(mem_mmap_s)},
	{"--gpu", NULL, REC_GPU, 0, NULL, 1, 0, {0}, NULL, 0},
	{"--gpu-kernels-only", NULL, REC_GPU, 0, NULL, 2, 0, {0}, NULL, 0},
	{"--max-size", NULL, REC_BYTES, REC_AT(max_size), "FENNEC_MAX_SIZE", 64u << 10, 0xffffffffu, {0}, NULL,
	 REC_AT(max_size_s)},
	{"--max-duration", NULL, REC_DURATION, REC_AT(max_dur), "FENNEC_MAX_DURATION_MS", 1, 366u * 86400, {0}, NULL,
	 REC_AT(max_dur_s)},
	{"--metrics-listen", NULL, REC_LISTEN, REC_AT(metrics_listen), NULL, 0, 0, {0}, NULL, 0},
	{"--continuous", NULL, REC_FILE, REC_AT(continuous), NULL, 0, 0, {0}, NULL, 0},
	{"--interval", NULL, REC_DURATION, REC_AT(interval), NULL, 1, 86400, {0}, NULL, REC_AT(interval_s)},
	{"--keep", NULL, REC_U32, REC_AT(keep), NULL, 1, 1000000, {0}, NULL, 0},
	{"--quiet", "-q", REC_QUIET, 0, NULL, 0, 0, {0}, NULL, 0},
};

/* Option `r`, read at x, into o. 0, or -1 with the message said. */
static int rec_option_read(const rec_option *r, cli_arg *x, rec_opts *o)
{
	const char *a = x->a, *v = x->v;
	const char **val = (const char **)((char *)o + r->field); /* flags: unused */
	unsigned u;
	double f;
	uint64_t b;
	switch (r->kind) {
	case REC_FILE:
		if (!v || !*v) {
			cli_error("record", "%s needs a file name", a);
			return -1;
		}
		break;
	case REC_U32:
		if (cli_parse_u32("record", a, v, r->lo, r->hi, &u) < 0)
			return -1;
		break;
	case REC_FRACTION:
		if (cli_parse_double("record", a, v, 1e-9, 1, &f) < 0)
			return -1;
		break;
	case REC_SCHEDULE: {
		unsigned sched[4];
		if (cm_parse_schedule(v, sched) < 0 || sched[2] == 0) { /* digits only: sscanf's %u took "-1" */
			cli_error("record", "--step-schedule needs WAIT,WARMUP,ACTIVE,REPEAT, four whole numbers "
					    "(none negative) with ACTIVE > 0, not '%s'", v ? v : "");
			return -1;
		}
		break;
	}
	case REC_CHOICE:
		if (!v || (strcmp(v, r->choices[0]) && strcmp(v, r->choices[1]) && strcmp(v, r->choices[2]))) {
			cli_error("record", "%s needs %s, %s or %s, not '%s'", a, r->choices[0], r->choices[1],
				  r->choices[2], v ? v : "");
			return -1;
		}
		break;
	case REC_BYTES_OPT:
		if (!x->inl) {
			*val = r->dflt;
			return 0;
		}
		/* fall through */
	case REC_BYTES:
		if (cli_parse_bytes("record", r->name, v, r->lo, r->hi, &b) < 0)
			return -1;
		snprintf((char *)o + r->buf, sizeof o->mem_rate_s, "%llu", (unsigned long long)b);
		v = (char *)o + r->buf;
		break;
	case REC_DURATION: {
		char *end = NULL;
		double d = v && *v ? strtod(v, &end) : -1, mul = 1000;
		if (end && !strcmp(end, "ms"))
			mul = 1;
		else if (end && (!*end || !strcmp(end, "s")))
			mul = 1000;
		else if (end && !strcmp(end, "m"))
			mul = 60000;
		else if (end && !strcmp(end, "h"))
			mul = 3600000;
		else
			d = -1;
		if (!(d * mul >= r->lo * 1000.0 && d * mul <= r->hi * 1000.0)) {
			cli_error("record", "%s needs a duration from %us to %ud with a unit (500ms, 10s, 10m, 2h), not '%s'",
				  a, r->lo, r->hi / 86400, v ? v : "");
			return -1;
		}
		snprintf((char *)o + r->buf, sizeof o->max_dur_s, "%llu", (unsigned long long)(d * mul + 0.5));
		v = (char *)o + r->buf;
		break;
	}
	case REC_PERCENT: {
		/* the collector's reading (budget.c): digits, an optional fraction, an optional % */
		size_t n = v ? strspn(v, "0123456789.") : 0;
		char *end = NULL;
		double d = n && n < 16 ? strtod(v, &end) : -1;
		if (!end || end != v + n || (v[n] && strcmp(v + n, "%")) || !(d >= r->lo / 100.0 && d <= r->hi)) {
			cli_error("record", "%s needs a percentage from %g to %u (1 or 1%%), not '%s'", a, r->lo / 100.0,
				  r->hi, v ? v : "");
			return -1;
		}
		break;
	}
	case REC_GPU:
		o->gpu_mode = (int)r->lo;
		return 0;
	case REC_QUIET:
		o->quiet = 1;
		return 0;
	case REC_LISTEN: {
		char h[256], why[300];
		unsigned port;
		if (view_metrics_parse_listen(v, h, sizeof h, &port, why, sizeof why) < 0) {
			cli_error("record", "%s", why);
			return -1;
		}
		break;
	}
	}
	*val = v;
	return cli_take(x);
}

/* Read argv[1..] up to the program into o, *first its index. -1, or the exit status:
 * 0 after --help, 2 for a usage error (said). */
static int rec_options_read(int argc, char **argv, rec_opts *o, int *first)
{
	int i;
	for (i = 1; i < argc; i++) {
		cli_arg x;
		cli_arg_read(&x, argc, argv, i);
		const char *a = x.a;
		if (!strcmp(a, "--")) {
			i++;
			break;
		}
		if (!strcmp(a, "-h") || !strcmp(a, "--help")) {
			fputs(help, stdout);
			return 0;
		}
		const rec_option *r = NULL;
		for (size_t k = 0; k < ARRAY_LEN(rec_options) && !r; k++)
			if (!strcmp(a, rec_options[k].name) || (rec_options[k].alt && !strcmp(a, rec_options[k].alt)))
				r = &rec_options[k];
		if (!r && a[0] == '-') {
			cli_error("record", "unknown option '%s' (see fennec record --help)", a);
			return 2;
		}
		if (!r)
			break;
		int took = rec_option_read(r, &x, o);
		if (took < 0 || cli_arg_done("record", &x) < 0)
			return 2;
		i += took;
	}
	*first = i;
	return -1;
}

/* The options' values into the program's environment, for the collector (the child, before exec). */
static void rec_options_env(const rec_opts *o)
{
	for (size_t k = 0; k < ARRAY_LEN(rec_options); k++) {
		const rec_option *r = &rec_options[k];
		if (!r->env)
			continue;
		const char *v = *(const char *const *)((const char *)o + r->field), *e;
		if (v)
			setenv(r->env, v, 1);
		else if (r->dflt && r->kind != REC_BYTES_OPT && (!(e = getenv(r->env)) || !*e))
			setenv(r->env, r->dflt, 1); /* --sample, else FENNEC_SAMPLE, else cpu (--memory alike) */
	}
}

/* --sample off, or FENNEC_SAMPLE saying so without the option */
static int sampling_off(const rec_opts *o)
{
	const char *smp = o->sample ? o->sample : getenv("FENNEC_SAMPLE");
	return smp && (!strcmp(smp, "off") || !strcmp(smp, "none") || !strcmp(smp, "0"));
}

/* The options that depend on each other and on the environment, checked before anything
 * is touched: --continuous's defaults (its folder made, its recording and cap), the budget,
 * FENNEC_SAMPLE and FENNEC_MEMORY, a cap's exclusions. -1 to go on, else the exit status
 * (said). */
static int rec_options_check(rec_opts *o, const char *default_output, int have_program, char *cont_out,
			     size_t cont_cap, uint64_t *interval_ms)
{
	if (!o->continuous && (o->interval || o->keep)) {
		cli_error("record", "%s applies to --continuous only", o->interval ? "--interval" : "--keep");
		return 2;
	}
	if (o->continuous) {
		if (sampling_off(o)) {
			cli_error("record", "--continuous writes sampled profiles: not with --sample off");
			return 2;
		}
		if (o->interval)
			*interval_ms = strtoull(o->interval_s, NULL, 10);
		char failed[PATH_MAX];
		if (make_dirs(o->continuous, failed, sizeof failed) < 0)
			return dirs_failed(failed, o->continuous);
		if (o->output == default_output) {
			if ((size_t)snprintf(cont_out, cont_cap, "%s/recording.fnc", o->continuous) >= cont_cap) {
				cli_error("record", "--continuous %s: path too long", o->continuous);
				return 2;
			}
			o->output = cont_out;
		}
		if (!o->max_size && !o->max_dur) {
			/* an interval is read up to 10 s after its end (continuous.c, LATE_NS), and the
			 * oldest segment goes whole: 2 intervals and 15 s (with 1 s intervals and a cap
			 * of 2 s, the segment holding an interval's start was gone when it was read) */
			snprintf(o->max_dur_s, sizeof o->max_dur_s, "%llu", (unsigned long long)(2 * *interval_ms + 15000));
			o->max_dur = o->max_dur_s;
		}
		const char *hz = getenv("FENNEC_HZ");
		if (!o->freq && (!hz || !*hz))
			o->freq = "49";
	}
	if (o->budget) {
		if (sampling_off(o)) {
			cli_error("record", "--overhead-budget lowers the sampling rate: not with --sample off");
			return 2;
		}
	}
	if (!have_program) {
		cli_error("record", "no program to run: fennec record [options] -- PROGRAM [ARGS...]");
		return 2;
	}
	/* FENNEC_SAMPLE and FENNEC_MEMORY stand in for --sample and --memory (the collector's
	 * own aliases accepted): a value neither can take is refused as the option's would be,
	 * not passed on to turn sampling or heap profiling off. The other FENNEC_* variables
	 * reach the collector, which says what it cannot use (docs/api.md). */
	static const struct { const char *env, *opt, *ok[6]; } stand_in[] = {
		{"FENNEC_SAMPLE", "--sample", {"cpu", "wall", "off", "on", "none", "0"}},
		{"FENNEC_MEMORY", "--memory", {"sampled", "full", "off", "none", NULL, NULL}},
	};
	for (size_t k = 0; k < sizeof stand_in / sizeof *stand_in; k++) {
		const char *e = getenv(stand_in[k].env);
		if (!e || !*e || (k == 0 ? o->sample : o->memory))
			continue;
		int ok = k == 0 && !strcmp(e, "1");
		for (size_t j = 0; j < 6 && stand_in[k].ok[j]; j++)
			ok |= !strcmp(e, stand_in[k].ok[j]);
		if (!ok) {
			cli_error("record", "%s=%s in the environment: expected %s (it is %s's default; unset it, or "
					    "give %s)", stand_in[k].env, e, k == 0 ? "cpu, wall or off" : "sampled, full or off",
				  stand_in[k].opt, stand_in[k].opt);
			return 2;
		}
	}
	/* A capped recording drops its oldest segments: heap blocks and GPU activity of a
	 * dropped segment would still be counted live, and live metrics follow one file, so
	 * those are refused rather than reported wrong (docs/format.md, "Capped recordings"). */
	if (o->max_size || o->max_dur) {
		const char *cap = o->max_size ? "--max-size" : "--max-duration";
		const char *me = o->memory ? o->memory : getenv("FENNEC_MEMORY");
		if (me && *me && strcmp(me, "off") && strcmp(me, "none")) {
			cli_error("record", "%s: not with heap profiling (--memory %s): the live heap would count blocks of "
					    "dropped segments; give --memory off or leave it out", cap, me);
			return 2;
		}
		if (o->gpu_mode) {
			cli_error("record", "%s: not with --gpu (its activity spans dropped segments)", cap);
			return 2;
		}
		if (o->metrics_listen) {
			cli_error("record", "%s: not with --metrics-listen (it follows one file, not segments)", cap);
			return 2;
		}
		if (o->mem_mmap) {
			cli_error("record", "%s: not with --memory-mmap (heap profiling)", cap);
			return 2;
		}
		o->memory = "off";
	}
	return -1;
}

/* What a recording needs before the program starts: the collector's libraries, the output
 * (named for this process, made absolute), the program found, and an old recording there
 * removed, in an order that loses nothing when one of them fails. -1 to go on, else the
 * exit status (said). */
typedef struct rec_paths {
	char lib[PATH_MAX], maplib[PATH_MAX + 32];
	char named[PATH_MAX], abs[PATH_MAX], prog[PATH_MAX];
	const char *output; /* as the user is told: the name for this process */
} rec_paths;

static int rec_paths_make(const rec_opts *o, const char *program, rec_paths *rp)
{
	rp->output = o->output;
	rp->maplib[0] = 0;
	if (find_library(rp->lib, sizeof rp->lib) < 0) {
		cli_error("record", "cannot find libfennec.so next to the fennec binary (set FENNEC_LIB to its path)");
		return 1;
	}
	if (o->mem_mmap) {
		if (o->memory && !strcmp(o->memory, "off")) {
			cli_error("record", "--memory-mmap counts mappings as heap allocations: not with --memory off");
			return 2;
		}
		/* libfennec-mmap.so beside libfennec.so */
		snprintf(rp->maplib, sizeof rp->maplib, "%s", rp->lib);
		char *slash = strrchr(rp->maplib, '/');
		snprintf(slash ? slash + 1 : rp->maplib, sizeof rp->maplib - (size_t)(slash ? slash + 1 - rp->maplib : 0),
			 "libfennec-mmap.so");
		if (access(rp->maplib, R_OK) != 0) {
			cli_error("record", "--memory-mmap: cannot read %s (built beside libfennec.so)", rp->maplib);
			return 1;
		}
	}
	/* The name for this process (ranks, a directory), then absolute: the program may
	 * change directory. */
	const char *expanded = getenv("FENNEC_OUTPUT_EXPANDED"); /* by fennec record --view */
	int orc;
	if (expanded && !strcmp(expanded, "1"))
		unsetenv("FENNEC_OUTPUT_EXPANDED");
	else if ((orc = cli_record_output(rp->output, rp->named, sizeof rp->named)) != 0)
		return orc;
	else
		rp->output = rp->named;
	if (rp->output[0] == '/')
		snprintf(rp->abs, sizeof rp->abs, "%s", rp->output);
	else {
		char cwd[PATH_MAX];
		if (!getcwd(cwd, sizeof cwd)) {
			cli_error("record", "cannot read the current directory: %s", strerror(errno));
			return 1;
		}
		if ((size_t)snprintf(rp->abs, sizeof rp->abs, "%s/%s", cwd, rp->output) >= sizeof rp->abs) {
			cli_error("record", "output path too long");
			return 1;
		}
	}
	/* The old recording at PATH is removed below: first make sure the program can be
	 * started, as execvp in the child will look for it, so that a mistyped name does not
	 * cost the last recording. */
	int perr = find_program(program, rp->prog, sizeof rp->prog);
	if (perr) {
		fprintf(stderr, "fennec record: cannot run '%s': %s\n", program, strerror(perr));
		return perr == ENOENT ? 127 : 126;
	}
	/* A recording is files: PATH, and PATH.PID.N beside it for each further process. A
	 * device, FIFO or symbolic link there is refused before anything is opened: the old
	 * recording at PATH is removed below, and removing /dev/null as root replaced the
	 * device with the recording. So is a regular file that is not a recording: -o naming
	 * the program, or a source file, replaced it. */
	struct stat st, pst;
	int existed = lstat(rp->abs, &st) == 0;
	if (existed && !S_ISREG(st.st_mode)) {
		cli_error("record", "cannot record to %s: it is not a regular file (a recording is a file there "
				    "plus one beside it per further process; name a file, or a directory with -o DIR/)", rp->abs);
		return 1;
	}
	if (existed && stat(rp->prog, &pst) == 0 && pst.st_dev == st.st_dev && pst.st_ino == st.st_ino) {
		cli_error("record", "cannot record to %s: it is the program being run; choose another name with -o", rp->output);
		return 2;
	}
	if (existed && !replaceable(rp->abs)) {
		cli_error("record", "cannot record to %s: it exists and is not a fennec recording; remove it, or "
				    "choose another name with -o", rp->output);
		return 2;
	}
	/* Fail early, with the reason, if the profile cannot be created. */
	int probe = open(rp->abs, O_WRONLY | O_CREAT | O_CLOEXEC, 0644);
	if (probe < 0) {
		cli_error("record", "cannot create %s: %s", rp->abs, strerror(errno));
		return 1;
	}
	close(probe);
	unlink(rp->abs); /* a regular file: the earlier recording, or the probe's */
	remove_old_siblings(rp->abs);
	return -1;
}

/* The child: the program's signal state as fennec record was given it, the collector's
 * environment, then the program. */
static __attribute__((noreturn)) void rec_exec_child(char **argv, const rec_opts *o, const rec_paths *rp,
						    const sigset_t *fwd_set, const sigset_t *orig_mask,
						    const struct sigaction *old, uint64_t rec_id, const char *tsc,
						    const cli_gpu *gpu, pid_t self)
{
	if (own_group) {
		setpgid(0, 0);
		prctl(PR_SET_PDEATHSIG, SIGKILL);
		if (getppid() != self) /* fennec record was killed before the line above */
			_exit(128 + SIGKILL);
	}
	for (int s = 1; s < _NSIG; s++)
		if (sigismember(fwd_set, s) == 1)
			sigaction(s, &old[s], NULL);
	sigprocmask(SIG_SETMASK, orig_mask, NULL);
	char v[PATH_MAX * 3 + 64];
	const char *pre = getenv("LD_PRELOAD");
	snprintf(v, sizeof v, "%s%s%s%s%s", rp->lib, *rp->maplib ? ":" : "", rp->maplib, pre && *pre ? ":" : "",
		 pre && *pre ? pre : "");
	setenv("LD_PRELOAD", v, 1);
	setenv("FENNEC_AUTOSTART", "1", 1);
	setenv("FENNEC_OUTPUT", rp->abs, 1);
	snprintf(v, sizeof v, "%llx", (unsigned long long)rec_id);
	setenv("FENNEC_RECORDING_ID", v, 1);
	snprintf(v, sizeof v, "%d", (int)getpid());
	setenv("FENNEC_ROOT_PID", v, 1);
	unsetenv("FENNEC_EXEC_FROM");
	if (*tsc)
		setenv(CM_TSC_RATE_ENV, tsc, 1);
	else
		unsetenv(CM_TSC_RATE_ENV);
	rec_options_env(o);
	cli_gpu_env(gpu, rp->lib);
	/* oneDNN (PyTorch's CPU convolutions and matrix products) runs kernels it generates
	 * as it goes, in no object; asked to, it names each in /tmp/perf-PID.map, which
	 * the analysis reads (symbol.c). A value the user set stays. */
	if (!getenv("ONEDNN_JIT_PROFILE") && !getenv("DNNL_JIT_PROFILE")) {
		setenv("ONEDNN_JIT_PROFILE", "2", 1);
		setenv("DNNL_JIT_PROFILE", "2", 1); /* the name before oneDNN 2.x's rename */
	}
	execvp(argv[0], argv);
	int e = errno;
	fprintf(stderr, "fennec record: cannot run '%s': %s\n", argv[0], strerror(e));
	_exit(e == ENOENT ? 127 : 126);
}

/* After the program: what the collector could not use, and the summary line. */
static void rec_report(const char *program, const rec_paths *rp, int status, int quiet, int launched)
{
	unsigned long long bytes = 0;
	int files = 0, unfinished = 0, empty = 0;
	char warn[4096] = "";
	if (launched)
		recording_size(rp->abs, &bytes, &files, &unfinished, &empty, warn, sizeof warn);
	/* What the collector could not use, said here: it says nothing to the program's
	 * standard error (STYLE.md). Even with -q: it is no summary. */
	for (const char *l = warn; *l;) {
		const char *nl = strchr(l, '\n');
		int n = nl ? (int)(nl - l) : (int)strlen(l);
		fprintf(stderr, "fennec record: warning: the collector could not use %.*s\n", n, l);
		l += n + (nl != NULL);
	}
	if (!quiet && launched) {
		char fr[32];
		if (!files && empty) {
			low_space(rp->abs, fr, sizeof fr);
			fprintf(stderr, "fennec record: no profile could be written: %s is empty", rp->output);
			if (*fr)
				fprintf(stderr, " (the filesystem holding it has %s free)", fr);
			fprintf(stderr, "\n");
		} else if (!files) {
			const char *why = why_no_preload(rp->prog);
			if (why)
				fprintf(stderr, "fennec record: no profile was written: %s cannot be profiled because %s\n",
					program, why);
			else
				fprintf(stderr, "fennec record: no profile was written: %s did not load libfennec "
						"(a static or setuid program ignores LD_PRELOAD)\n", program);
		}
		else {
			fprintf(stderr, "fennec record: wrote %s (%llu bytes", rp->output, bytes);
			if (files > 1)
				fprintf(stderr, " in %d process files", files);
			fprintf(stderr, ")");
			if (WIFSIGNALED(status))
				fprintf(stderr, "; %s was killed by signal %d (%s): the profile holds what was flushed "
						"before",
					program, WTERMSIG(status), strsignal(WTERMSIG(status)));
			fprintf(stderr, "\n");
			if (unfinished && !(WIFSIGNALED(status) && files == 1))
				report_unfinished(rp->abs, unfinished, files);
			if (empty)
				report_empty(rp->abs, empty);
		}
	}
}

/* fennec record's exit status is the program's: its code, or death by its signal. */
static int rec_exit_as(int status)
{
	if (WIFEXITED(status))
		return WEXITSTATUS(status);
	if (WIFSIGNALED(status)) {
		/* Die of the same signal, without a core file of our own. */
		int sig = WTERMSIG(status);
		struct rlimit no_core = {0, 0};
		setrlimit(RLIMIT_CORE, &no_core);
		signal(sig, SIG_DFL);
		sigset_t set;
		sigemptyset(&set);
		sigaddset(&set, sig);
		sigprocmask(SIG_UNBLOCK, &set, NULL);
		raise(sig);
		return 128 + sig;
	}
	return 1;
}

int cmd_record(int argc, char **argv)
{
	static const char default_output[] = "fennec.fnc";
	rec_opts o = {.output = default_output};
	int i, rc = rec_options_read(argc, argv, &o, &i);
	if (rc >= 0)
		return rc;
	/* --continuous DIR (continuous.c): CPU profiles at a rate cheap enough to leave on, from
	 * a recording capped to the last two intervals and 15 s (the cap turns heap profiling off, and
	 * refuses --gpu and --metrics-listen, below). */
	char cont_out[PATH_MAX + 32];
	uint64_t interval_ms = 60000;
	if ((rc = rec_options_check(&o, default_output, i < argc, cont_out, sizeof cont_out, &interval_ms)) >= 0)
		return rc;
	int gpu_mode = o.gpu_mode, quiet = o.quiet;
	static rec_paths rp; /* 20 KiB: not on the stack */
	int orc;
	if ((orc = rec_paths_make(&o, argv[i], &rp)) >= 0)
		return orc;
	const char *abs = rp.abs;

	/* --metrics-listen: listening before the program starts, so that a port that cannot be
	 * had stops the run here; the collector then flushes on its writer thread, also while
	 * the program does not allocate (docs/internals/collect.md). */
	view_metrics *metrics = NULL;
	if (o.metrics_listen && (orc = start_metrics(o.metrics_listen, abs, &metrics)) != 0)
		return orc;

	uint64_t rec_id;
	if (getrandom(&rec_id, sizeof rec_id, 0) != sizeof rec_id)
		rec_id = (uint64_t)getpid() << 32 ^ (uint64_t)time(NULL);

	/* The first perf event of a system costs its opener 4-12 ms here (the kernel turns
	 * on its scheduler hooks); one held by this process for the whole run pays that
	 * before the program starts, so the program's own start-up and first step are
	 * not delayed. Best effort: without permission the program falls back anyway. */
	hold_perf_hooks();
	cli_gpu gpu = {0};
	if (gpu_mode)
		cli_gpu_check(gpu_mode, &gpu);
	/* The TSC's rate, measured once here (2 ms) for every process of the recording on this
	 * machine, instead of 200 us at the start of each (session.c, tsc_rate()). */
	char tsc[96] = "";
	char boot[40];
	if (!getenv("FENNEC_CLOCK_MONOTONIC") && cm_tsc_invariant() && cm_boot_id(boot) == 0)
		snprintf(tsc, sizeof tsc, "%s %.9f", boot, cm_tsc_per_ns(2000000));
	/* Signals (above forward()). They are blocked from here until the program's pid is
	 * known, so that one arriving meanwhile is passed on, not lost; the program starts with
	 * the dispositions and the mask fennec record was given. */
	int tty = open("/dev/tty", O_RDONLY | O_NONBLOCK | O_CLOEXEC);
	own_group = tty < 0;
	if (tty >= 0)
		close(tty);
	sigset_t fwd_set, orig_mask;
	static struct sigaction old[_NSIG];
	cli_forwarded_set(&fwd_set, own_group);
	sigprocmask(SIG_BLOCK, &fwd_set, &orig_mask);
	struct sigaction fwd = {.sa_sigaction = forward, .sa_flags = SA_SIGINFO | SA_RESTART, .sa_mask = fwd_set};
	for (int s = 1; s < _NSIG; s++)
		if (sigismember(&fwd_set, s) == 1)
			sigaction(s, &fwd, &old[s]);
	cli_continuous *cont = NULL;
	if (o.continuous &&
	    !(cont = cli_continuous_open(o.continuous, abs, interval_ms, o.keep ? (unsigned)strtoul(o.keep, NULL, 10) : 1440, quiet))) {
		cli_error("record", "--continuous: out of memory");
		return 1;
	}
	pid_t self = getpid();
	child = fork();
	if (child < 0) {
		cli_error("record", "fork failed: %s", strerror(errno));
		return 1;
	}
	if (child == 0)
		rec_exec_child(argv + i, &o, &rp, &fwd_set, &orig_mask, old, rec_id, tsc, &gpu, self);
	if (own_group)
		setpgid(child, child); /* as the child does: whichever comes first */
	sigprocmask(SIG_SETMASK, &orig_mask, NULL);
	/* Wait without reaping, so that a signal passed on meanwhile cannot reach another
	 * process given the pid; from its end on, signals are no longer passed on. */
	int status;
	siginfo_t ended;
	for (;;) {
		/* --continuous: a look every 100 ms (cli_continuous_tick) while the program runs */
		memset(&ended, 0, sizeof ended);
		int w = waitid(P_PID, (id_t)child, &ended, WEXITED | WNOWAIT | (cont ? WNOHANG : 0));
		if (w == 0 && (!cont || ended.si_pid == child))
			break;
		if (w < 0 && errno != EINTR) {
			cli_error("record", "waiting for %s failed: %s", argv[i], strerror(errno));
			return 1;
		}
		if (w == 0) {
			cli_continuous_tick(cont);
			struct timespec nap = {0, 100000000};
			nanosleep(&nap, NULL);
		}
	}
	sigprocmask(SIG_BLOCK, &fwd_set, NULL);
	pid_t c = child;
	child = 0;
	while (waitpid(c, &status, 0) < 0)
		if (errno != EINTR) {
			cli_error("record", "waitpid failed: %s", strerror(errno));
			return 1;
		}
	view_metrics_close(metrics); /* the endpoint ends with the program */
	int launched = !(WIFEXITED(status) && (WEXITSTATUS(status) == 127 || WEXITSTATUS(status) == 126) && access(abs, F_OK) != 0);
	rec_report(argv[i], &rp, status, quiet, launched);
	if (launched)
		cli_continuous_close(cont); /* the last intervals, now that the files are complete */
	return rec_exit_as(status);
}

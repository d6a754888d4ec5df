/*
 * session.c - the collector's session: its start and stop (configuration, the recording's
 * identity, which process of it this is), the clock, step sampling, the name (site) table
 * and the thread registry. Only the slow paths live here; api.c has the hot ones. The
 * profile file is session_file.c, the writer session_writer.c, fork/exec/exit
 * session_fork.c (session.h says what they share); the FENNEC_* environment and what cannot
 * be used of it is config.c. See docs/internals/collect.md for the design and its invariants.
 */
#include "collect/collect.h"
#include "collect/gpu.h"
#include "format/encode.h"

#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/prctl.h>
#include <sys/random.h>
#include <sys/syscall.h>
#include <unistd.h>
#include <zstd.h>

#include "collect/session.h" /* last: its short names are macros */

#define API FENNEC_API

_Atomic uint32_t col_on;
_Atomic int col_gate = 1;
int col_use_tsc;
uint64_t col_us_ticks = 1000; /* ticks in a microsecond (set with the clock at a session's start) */
__thread col_thread *col_tls;
col_site col_sites[COL_MAX_SITES];
_Atomic uint32_t col_nsites = 1; /* id 0 is reserved: "site table full" */

static _Atomic(uintptr_t) site_keys[COL_SITE_HASH];
static _Atomic uint32_t site_vals[COL_SITE_HASH]; /* kind << 24 | id, 0 while being filled */

_Atomic(col_thread *) slots[COL_MAX_THREADS];
_Atomic uint32_t nslots;
pthread_mutex_t reg_lock = PTHREAD_MUTEX_INITIALIZER;    /* slot allocation */
pthread_mutex_t flush_lock = PTHREAD_MUTEX_INITIALIZER;  /* writer state, file */
/* Threads other than the writer waiting for flush_lock (lock_flush_by()). The writer, which
 * takes the lock back at once after a flush while the rings stay full, lets them in first:
 * a mutex handed straight back to its holder kept a fork's atfork_prepare waiting for 2 to
 * 10 s while three threads allocated in full mode. */
_Atomic int flush_waiters;

int lock_flush_by(const struct timespec *deadline)
{
	atomic_fetch_add_explicit(&flush_waiters, 1, memory_order_relaxed);
	int rc = deadline ? pthread_mutex_timedlock(&flush_lock, deadline) : pthread_mutex_lock(&flush_lock);
	atomic_fetch_sub_explicit(&flush_waiters, 1, memory_order_relaxed);
	return rc;
}

void lock_flush(void) { lock_flush_by(NULL); }
pthread_mutex_t intern_lock = PTHREAD_MUTEX_INITIALIZER; /* fennec_intern table */
static pthread_key_t thread_key;
static pthread_once_t once = PTHREAD_ONCE_INIT;

/* Session state (session.h): written under flush_lock or before the writer exists. */
struct col_session_state S = {.fd = -1, .end_off = UINT64_MAX, .seg = {.efd = -1}};

/* ---- clock ---- */

/* A (mono_ns, ticks) pair read at one instant, in col_ticks()'s unit. */
void calib_point(uint64_t *mono, uint64_t *ticks)
{
	if (col_use_tsc)
		cm_tsc_point(mono, ticks);
	else
		*mono = *ticks = cm_mono_ns();
}

/*
 * The TSC's rate, written in the header: the reader fits each process's clock points, and
 * falls back to this rate where they span less than a millisecond (a short process).
 * `fennec record` measures it once for the whole recording (CM_TSC_RATE_ENV): measured
 * here, 200 us of spinning was a fifth of what the collector cost each process of a shell
 * loop. Its value is taken only on the machine it was measured on.
 */
static double tsc_rate(void)
{
	const char *e = getenv(CM_TSC_RATE_ENV);
	char id[40];
	size_t n;
	if (e && (n = strcspn(e, " ")) > 0 && e[n] == ' ' && cm_boot_id(id) == 0 && strlen(id) == n &&
	    !memcmp(e, id, n)) {
		char *end;
		double r = strtod(e + n + 1, &end);
		if (*end == 0 && r > 0.01 && r < 100)
			return r;
	}
	return cm_tsc_per_ns(200000);
}

/* ---- step sampling ---- */

/* Whether step k (0-based) records regions and metrics. */
static int step_recorded(uint64_t k)
{
	const fennec_config *c = &S.cfg;
	if (c->step_fraction < 1.0 && (uint64_t)((double)(k + 1) * c->step_fraction) ==
					      (uint64_t)((double)k * c->step_fraction))
		return 0;
	if (c->step_active) {
		uint64_t cycle = (uint64_t)c->step_wait + c->step_warmup + c->step_active;
		if (c->step_repeat && k / cycle >= c->step_repeat)
			return 0;
		if (k % cycle < (uint64_t)c->step_wait + c->step_warmup)
			return 0;
	}
	return 1;
}

uint64_t col_step_index(void)
{
	return __atomic_load_n(&S.step_index, __ATOMIC_RELAXED);
}

void col_step_advance(uint64_t *recorded_out)
{
	/* One stepping thread is the documented contract; the atomics keep a second one
	 * from corrupting state, not from interleaving its steps. */
	*recorded_out = (uint64_t)atomic_load_explicit(&col_gate, memory_order_relaxed);
	uint64_t k = __atomic_add_fetch(&S.step_index, 1, __ATOMIC_RELAXED);
	atomic_store_explicit(&col_gate, step_recorded(k), memory_order_relaxed);
}

/* ---- sites ---- */

static inline uint32_t site_hash(uintptr_t key, unsigned kind)
{
	uint64_t h = ((uint64_t)key ^ kind) * 0x9E3779B97F4A7C15ull;
	return (uint32_t)(h >> 40) & (COL_SITE_HASH - 1);
}

/* Calls that got no site (id 0, the region "<site table full>") because the table was
 * full: written in STATS and END, said by the analysis. Keys (name addresses) past
 * SITE_KEYS_MAX are not added, so that a probe stays short (at 3/4 full, about 8.5 slots
 * for a key not there) when a program names regions by fresh buffers. */
_Atomic uint64_t sites_refused;
static _Atomic uint32_t site_keys_used;
#define SITE_KEYS_MAX (COL_SITE_HASH / 4 * 3)

uint32_t col_site_id(const void *key, unsigned kind, const char *name, const char *file, int line)
{
	uintptr_t k = (uintptr_t)key;
	uint32_t h = site_hash(k, kind);
	for (uint32_t probe = 0; probe < COL_SITE_HASH; probe++, h = (h + 1) & (COL_SITE_HASH - 1)) {
		uintptr_t cur = atomic_load_explicit(&site_keys[h], memory_order_acquire);
		if (cur == 0) {
			if (atomic_load_explicit(&site_keys_used, memory_order_relaxed) >= SITE_KEYS_MAX)
				break;
			uintptr_t expect = 0;
			if (atomic_compare_exchange_strong(&site_keys[h], &expect, k)) {
				atomic_fetch_add_explicit(&site_keys_used, 1, memory_order_relaxed);
				uint32_t id = atomic_load_explicit(&col_nsites, memory_order_relaxed);
				while (id < COL_MAX_SITES &&
				       !atomic_compare_exchange_weak(&col_nsites, &id, id + 1))
					;
				if (id >= COL_MAX_SITES) {
					id = 0;
					atomic_fetch_add_explicit(&sites_refused, 1, memory_order_relaxed);
				} else {
					col_site *s = &col_sites[id];
					s->name = name;
					s->file = file;
					s->line = line;
					s->kind = kind;
					__atomic_store_n(&s->key, key, __ATOMIC_RELEASE);
				}
				atomic_store_explicit(&site_vals[h], kind << 24 | id, memory_order_release);
				return id;
			}
			cur = expect;
		}
		if (cur == k) {
			uint32_t v;
			while ((v = atomic_load_explicit(&site_vals[h], memory_order_acquire)) == 0)
				;
			if (v >> 24 == kind) {
				if (unlikely(!(v & 0xffffff)))
					atomic_fetch_add_explicit(&sites_refused, 1, memory_order_relaxed);
				return v & 0xffffff;
			}
		}
	}
	atomic_fetch_add_explicit(&sites_refused, 1, memory_order_relaxed);
	return 0;
}

/* fennec_intern: a string-keyed table of copies. Not a hot path. */
struct interned {
	struct interned *next;
	uint32_t id;
	char name[];
};
static struct interned *intern_tab[1024];

API uint32_t fennec_intern(const char *name)
{
	if (!name)
		return 0;
	uint64_t h = 1469598103934665603ull;
	for (const char *p = name; *p; p++)
		h = (h ^ (uint8_t)*p) * 1099511628211ull;
	uint32_t id = 0;
	pthread_mutex_lock(&intern_lock);
	struct interned **b = &intern_tab[h & (ARRAY_LEN(intern_tab) - 1)];
	for (struct interned *e = *b; e; e = e->next)
		if (!strcmp(e->name, name)) {
			id = e->id;
			goto out;
		}
	/* Bounded: once every site is taken (COL_MAX_SITES) a new name gets id 0 and no copy,
	 * so that a program interning a fresh name per step does not grow this table. */
	if (atomic_load_explicit(&col_nsites, memory_order_relaxed) >= COL_MAX_SITES)
		goto out;
	size_t n = strlen(name);
	int was = col_mem_internal(1);
	struct interned *e = malloc(sizeof *e + n + 1);
	col_mem_internal(was);
	if (!e)
		goto out;
	memcpy(e->name, name, n + 1);
	e->id = col_site_id(e->name, FMT_SITE_REGION, e->name, NULL, 0);
	e->next = *b;
	*b = e;
	id = e->id;
out:
	pthread_mutex_unlock(&intern_lock);
	return id;
}

/* ---- threads ---- */

static void thread_exit(void *arg)
{
	col_thread *t = arg;
	if (t && t->pid == getpid()) {
		t->end_ticks = col_ticks();
		atomic_store_explicit(&t->state, COL_T_DEAD, memory_order_release);
	}
	col_tls = NULL;
}

static void once_init(void)
{
	pthread_key_create(&thread_key, thread_exit);
}

static void write_time_event(col_thread *t, uint64_t now)
{
	uint8_t *p = t->ring + (t->tail & (t->size - 1)); /* fresh ring: no wrap */
	t->tail += fmt_enc_time(p, now, &t->last_ticks);
}

col_thread *col_thread_register(void)
{
	uint32_t gen = atomic_load_explicit(&col_on, memory_order_acquire);
	col_thread *old = col_tls;
	if (!gen)
		return NULL;
	uint64_t size = S.cfg.buffer_kb * 1024ull;
	col_thread *t = NULL;

	pthread_mutex_lock(&reg_lock);
	uint32_t n = atomic_load_explicit(&nslots, memory_order_relaxed);
	for (uint32_t i = 0; i < n; i++) {
		col_thread *c = atomic_load_explicit(&slots[i], memory_order_relaxed);
		if (c && c->size == size &&
		    atomic_load_explicit(&c->state, memory_order_acquire) == COL_T_FREE) {
			t = c;
			break;
		}
	}
	if (!t && n < COL_MAX_THREADS) {
		size_t hdr = (sizeof(col_thread) + 4095) & ~(size_t)4095;
		void *m = mmap(NULL, hdr + size, PROT_READ | PROT_WRITE,
			       MAP_PRIVATE | MAP_ANONYMOUS | MAP_NORESERVE, -1, 0);
		if (m != MAP_FAILED) {
			t = m;
			t->ring = (uint8_t *)m + hdr;
			t->size = size;
			atomic_store_explicit(&slots[n], t, memory_order_release);
			atomic_store_explicit(&nslots, n + 1, memory_order_release);
		}
	}
	if (t) {
		/* Reset everything the previous owner left; the writer ignores FREE slots. */
		t->tail = t->head_cache = t->reserve = 0;
		t->rewind_at = size >= (4u << COL_NUDGE_SHIFT) ? size / 4 : UINT64_MAX; /* api.c */
		t->lap_ticks = col_ticks();
		t->lim = 0;
		atomic_store_explicit(&t->jump_from, UINT64_MAX, memory_order_relaxed);
		atomic_store_explicit(&t->jump_to, UINT64_MAX, memory_order_relaxed);
		t->depth = 0;
		atomic_store_explicit(&t->dropped, 0, memory_order_relaxed);
		atomic_store_explicit(&t->committed, 0, memory_order_relaxed);
		atomic_store_explicit(&t->head, 0, memory_order_relaxed);
		t->tid = (pid_t)syscall(SYS_gettid);
		memset(t->name, 0, sizeof t->name);
		prctl(PR_GET_NAME, t->name); /* once per thread; the writer may see it only after it ended */
		t->pid = getpid();
		t->gen = gen;
		t->index = atomic_fetch_add(&S.next_index, 1);
		t->announced = 0;
		t->dropped_written = 0;
		t->end_ticks = 0;
		uint64_t now = col_ticks();
		t->start_ticks = now;
		write_time_event(t, now);
		/* Regions open in the previous generation (a fork child's inherited stack)
		 * continue here: re-open the recorded ones now, keep the marks of the rest. */
		if (old && old->gen != gen) {
			uint32_t depth = old->depth < COL_MAX_DEPTH ? old->depth : COL_MAX_DEPTH;
			uint8_t *p = t->ring + t->tail;
			uint32_t recorded = 0;
			uint8_t ids[COL_MAX_DEPTH * 5];
			size_t nb = 0;
			for (uint32_t i = 0; i < depth; i++) {
				t->stack[i] = old->stack[i];
				if (!(old->stack[i] & (COL_UNREC_GATED | COL_UNREC_DROPPED))) {
					nb += fmt_enc_varint(ids + nb, old->stack[i]);
					recorded++;
				}
			}
			t->depth = old->depth;
			if (recorded) {
				size_t len = fmt_enc_stack_head(p, recorded);
				memcpy(p + len, ids, nb);
				t->tail += len + nb;
				t->reserve = recorded * FMT_EV_END_MAX;
			}
			if (old->pid != getpid())
				atomic_store_explicit(&old->state, COL_T_FREE, memory_order_release);
		}
		atomic_store_explicit(&t->committed, t->tail, memory_order_relaxed);
		atomic_store_explicit(&t->state, COL_T_LIVE, memory_order_release);
	}
	pthread_mutex_unlock(&reg_lock);
	if (!t)
		return NULL;
	col_tls = t;
	pthread_once(&once, once_init);
	pthread_setspecific(thread_key, t);
	return t;
}

/* ---- start and stop ---- */


static uint64_t new_recording_id(void)
{
	const char *s = getenv("FENNEC_RECORDING_ID");
	if (s && *s)
		return strtoull(s, NULL, 16);
	uint64_t id = 0;
	if (getrandom(&id, sizeof id, GRND_NONBLOCK) != sizeof id)
		id = cm_real_ns() ^ ((uint64_t)getpid() << 32);
	return id;
}

/* Start a session into S.path for this process; S.origin and S.parent_pid are set. */
int session_begin(void)
{
	uint64_t mono, ticks;
	calib_point(&mono, &ticks);
	uint64_t real = cm_real_ns();
	S.pid = getpid();
	int rc = open_file();
	if (rc < 0)
		return rc;
	if (!S.zctx)
		S.zctx = ZSTD_createCCtx();
	S.lost_bytes = 0;
	S.write_failed = 0;
	S.writes = 0;
	S.fail_write = (uint32_t)col_env_u64("FENNEC_TEST_FAIL_WRITE", 0);
	S.stall_ms = (uint32_t)col_env_u64("FENNEC_TEST_WRITER_STALL_MS", 0);
	S.sites_written = 1; /* id 0 is never written */
	atomic_store(&S.next_index, 0);
	col_modules_reset(); /* a new file names every loaded object again */
	col_sample_prepare(S.cfg.sample_mode, S.cfg.sample_hz, S.cfg.stack_depth, &S.sample);
	S.budget_ppm = col_budget_prepare(S.sample.hz, S.sample.mode != 0, mono);
	S.sample_cpu_ns = 0;
	col_mem_prepare(S.cfg.memory_mode, S.cfg.memory_rate, S.cfg.memory_interval_ms, S.cfg.stack_depth, &S.mem);
	col_gpu_prepare();
	col_sys_prepare();
	seg_config();
	write_header(mono, ticks, real);
	seg_start(mono, ticks);
	S.start_mono_ns = mono;
	S.heap_calls_from = col_mem_calls();
	S.gen++;
	if (S.gen == 0)
		S.gen = 1;
	S.step_index = 0;
	atomic_store(&col_gate, step_recorded(0));
	S.lazy_cpu_ns = S.lazy_cpu_from = 0;
	S.exec_inline = 0;
	S.stop_writer = 0;
	S.lazy = lazy_allowed();
	if (S.lazy) {
		uint64_t look = LAZY_LOOK_NS;
		if (S.cfg.memory_mode != FENNEC_MEMORY_OFF && S.cfg.memory_interval_ms &&
		    (uint64_t)S.cfg.memory_interval_ms * 1000000u < look)
			look = (uint64_t)S.cfg.memory_interval_ms * 1000000u;
		S.lazy_look_ticks = (uint64_t)((double)look * S.ticks_per_ns);
		S.lazy_flush_ns = mono + 10000000u; /* an early calibration point, as the writer's */
		atomic_store(&col_writer_dozing, 1); /* rings crossing 64 KiB call col_ring_crossed() */
	} else if (start_writer() < 0) {
		files_close();
		return FENNEC_ENOMEM;
	}
	lazy_arm(0);
	atomic_store_explicit(&col_on, S.gen, memory_order_release);
	col_sample_start();
	col_mem_start();
	col_gpu_start();
	col_sys_start(); /* the first point, before the program goes on */
	return 0;
}

static int start(const fennec_config *cfg);

/* fennec's own allocations (buffers, the compressor) are never counted as the program's. */
API int fennec_start(const fennec_config *cfg)
{
	int was = col_mem_internal(1);
	int rc = start(cfg);
	col_mem_internal(was);
	return rc;
}

static int start(const fennec_config *cfg)
{
	static int atfork_done;
	if (atomic_load(&col_on))
		return FENNEC_EALREADY;
	fennec_config c;
	col_config_warnings_clear(); /* this session's */
	col_config_env(&c, 1);
	if (cfg) {
		if (cfg->size < offsetof(fennec_config, step_fraction) + sizeof(double))
			return FENNEC_EINVAL;
		/* A caller built against an older, shorter struct keeps the defaults of
		 * the fields it does not know. */
		memcpy(&c, cfg, cfg->size < sizeof c ? cfg->size : sizeof c);
		c.size = sizeof c;
	}
	if (!c.output || !*c.output || c.step_fraction <= 0 || c.step_fraction > 1 ||
	    c.sample_mode < FENNEC_SAMPLE_OFF || c.sample_mode > FENNEC_SAMPLE_WALL)
		return FENNEC_EINVAL;
	if (c.buffer_kb < 64)
		c.buffer_kb = 64;
	if (c.buffer_kb > 32768)
		c.buffer_kb = 32768;
	/* Ring sizes are powers of two. */
	uint32_t kb = 64;
	while (kb < c.buffer_kb)
		kb *= 2;
	c.buffer_kb = kb;
	if (c.flush_interval_ms == 0)
		c.flush_interval_ms = 100;
	if (strlen(c.output) >= sizeof S.path - 32)
		return FENNEC_EINVAL;

	lock_flush();
	S.cfg = c;
	S.cfg.output = NULL; /* borrowed; S.path has the copy */
	const char *w = getenv("FENNEC_WRITER");
	S.writer_thread = w && !strcmp(w, "thread");
	if (w && *w && !S.writer_thread && strcmp(w, "lazy"))
		col_config_warn("FENNEC_WRITER", w, "expected thread or lazy; using lazy");
	snprintf(S.path, sizeof S.path, "%s", c.output);
	if (!S.ticks_per_ns) {
		col_use_tsc = COL_HAVE_TSC && cm_tsc_invariant() && !getenv("FENNEC_CLOCK_MONOTONIC");
		S.ticks_per_ns = col_use_tsc ? tsc_rate() : 1.0;
		col_us_ticks = (uint64_t)(S.ticks_per_ns * 1000.0);
	}
	if (!S.recording_id)
		S.recording_id = new_recording_id();
	/* Which process of the recording are we? `fennec record` names the first one. */
	pid_t me = getpid();
	long root = (long)col_env_u64("FENNEC_ROOT_PID", 0), from = (long)col_env_u64("FENNEC_EXEC_FROM", 0);
	if (from == me) {
		S.origin = FMT_ORIGIN_EXEC;
		S.parent_pid = me;
	} else if (root && root != me) {
		S.origin = FMT_ORIGIN_SPAWN;
		S.parent_pid = getppid();
	} else {
		S.origin = FMT_ORIGIN_FIRST;
		S.parent_pid = 0;
	}
	int rc = session_begin();
	pthread_mutex_unlock(&flush_lock);
	if (rc == 0 && !atfork_done) {
		pthread_atfork(atfork_prepare, atfork_parent, atfork_child);
		atfork_done = 1;
	}
	return rc;
}

/* The flush lock, waited for until `deadline` (CLOCK_REALTIME) when there is one: 0, or
 * an error when the time ran out. */
static int flush_lock_by(const struct timespec *deadline)
{
	return lock_flush_by(deadline);
}

/*
 * Stop the session: the writer makes the final flush (what the threads committed, END)
 * and closes the file, then ends (writer_main). With a deadline (_exit, maybe from a
 * signal handler): FENNEC_EIO when the lock or the writer's end was not had by then, and
 * the file is left as the writer had it, cut short. The final flush is the writer's, not
 * this thread's, for that case: the code a handler interrupted may hold a lock that the
 * flush takes (the sanitizers' allocators' in the ASan and TSan builds, where fennec's
 * allocations are theirs), and only another thread's wait for it can be timed.
 */
int session_end(unsigned exit_reason, const struct timespec *deadline)
{
	if (flush_lock_by(deadline))
		return FENNEC_EIO;
	if (!atomic_load(&col_on) || S.pid != getpid()) {
		pthread_mutex_unlock(&flush_lock);
		return FENNEC_ENOTRUNNING;
	}
	if (col_sample_stop(deadline)) {
		pthread_mutex_unlock(&flush_lock);
		return FENNEC_EIO;
	}
	col_mem_stop(exit_reason != FMT_END__EXIT);
	/* Not at _exit: its caller may be a signal handler that interrupted a CUDA call holding
	 * the driver's locks, which a forced flush of CUPTI's buffers may wait for. The GPU
	 * activity CUPTI had not yet handed over is lost then (the writer takes it about every
	 * 100 ms); the final drain makes no CUDA or NVML call either (flush_locked()). */
	if (!deadline)
		col_gpu_stop();
	atomic_store(&col_on, 0);
	S.end_reason = exit_reason;
	S.stop_writer = 1;
	if (S.lazy) {
		/* No writer: the final flush is this thread's (the lazy writer, above). A handler
		 * calling _exit is not inside fennec's own code (exit_finish()), and no other thread
		 * of the program holds a lock of fennec's: it has none (else the writer would run). */
		int was = col_mem_internal(1);
		lazy_end();
		flush_inline(1, exit_reason);
		files_close();
		col_mem_internal(was);
		pthread_mutex_unlock(&flush_lock);
		return S.lost_bytes ? FENNEC_EIO : 0;
	}
	writer_wake();
	pthread_mutex_unlock(&flush_lock);
	/* Threads may still be inside an event; what they committed is written. A writer that
	 * did not end in time may be writing yet: the file is not touched here. */
	if (deadline ? pthread_timedjoin_np(S.writer, NULL, deadline) : pthread_join(S.writer, NULL))
		return FENNEC_EIO;
	return S.lost_bytes ? FENNEC_EIO : 0;
}

API int fennec_stop(void)
{
	int was = col_mem_internal(1);
	int rc = session_end(0, NULL);
	col_mem_internal(was);
	return rc;
}

API int fennec_is_running(void) { return atomic_load(&col_on) != 0; }

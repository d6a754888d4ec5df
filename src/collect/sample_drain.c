/*
 * sample_drain.c - the sampling profiler's writer side (docs/internals/collect.md,
 * "Samples" and "Ring samples"): the loaded objects for MODULES, thread names for TASKS,
 * the ring source's rings unwound into the sample ring, the overhead budget's stride, and
 * the drain of the sample ring into SAMPLES chunks. Runs on the writer, and on a thread
 * that closes a library (dlclose).
 */
#include "collect/cfi.h"
#include "collect/collect.h"
#include "collect/pyframes.h"
#include "format/encode.h"

#include <dlfcn.h>
#include <elf.h>
#include <fcntl.h>
#include <limits.h>
#include <link.h>
#include <linux/perf_event.h>
#include <stdio.h>
#include <stdlib.h>
#include <string.h>
#include <sys/ioctl.h>
#include <time.h>
#include <unistd.h>

#include "collect/sample.h" /* last: its short names are macros */

/* ---- the writer's side ---- */

/*
 * The module table (P.mods, P.modules) is the writer's, and also a closing thread's: a
 * library loaded and closed between two flushes would otherwise never be written, and the
 * heap stacks and samples taken in it could not be named. Lock order: the session's flush
 * lock, mod_lock, the loader's lock (dl_iterate_phdr).
 */
static pthread_mutex_t mod_lock = PTHREAD_MUTEX_INITIALIZER;

/* A fork waits for a drain in progress (a dlclose's, say): the drain holds the loader's
 * lock, which the child would inherit taken. Registered before the session's handlers, so
 * this prepare runs after the session's (flush lock first, as the writer takes them). */
void unwind_lock_take(void)
{
	pthread_mutex_lock(&P.unwind_lock);
	pthread_mutex_lock(&mod_lock);
}
void unwind_lock_drop(void)
{
	pthread_mutex_unlock(&mod_lock);
	pthread_mutex_unlock(&P.unwind_lock);
}

typedef struct mod_scan {
	cm_buf *out;
	uint64_t now;
	int count;
} mod_scan;

static int known_module(uintptr_t base, const char *path)
{
	for (size_t i = 0; i < P.nmods; i++)
		if (P.mods[i].base == base && !strcmp(P.mods[i].path, path))
			return 1;
	return 0;
}

static void build_id_of(struct dl_phdr_info *info, const uint8_t **id, size_t *len)
{
	*id = NULL;
	*len = 0;
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_NOTE)
			continue;
		const uint8_t *p = (const uint8_t *)(info->dlpi_addr + ph->p_vaddr), *end = p + ph->p_memsz;
		while (p + sizeof(ElfW(Nhdr)) <= end) {
			const ElfW(Nhdr) *nh = (const ElfW(Nhdr) *)p;
			const uint8_t *name = p + sizeof *nh;
			const uint8_t *desc = name + ((nh->n_namesz + 3) & ~3u);
			const uint8_t *next = desc + ((nh->n_descsz + 3) & ~3u);
			if (next > end)
				break;
			if (nh->n_type == NT_GNU_BUILD_ID && nh->n_namesz == 4 && !memcmp(name, "GNU", 4)) {
				*id = desc;
				*len = nh->n_descsz;
				return;
			}
			p = next;
		}
	}
}

static int module_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	mod_scan *ms = arg;
	char path[PATH_MAX];
	const char *name = info->dlpi_name;
	if (!name || !*name) {
		if (ms->count++ > 0)
			return 0; /* only the first nameless object is the executable */
		ssize_t n = readlink("/proc/self/exe", path, sizeof path - 1);
		if (n <= 0)
			return 0;
		path[n] = 0;
		name = path;
	} else {
		ms->count++;
		if (!strncmp(name, "linux-vdso", 10) || !strncmp(name, "linux-gate", 10))
			name = "[vdso]";
	}
	if (known_module(info->dlpi_addr, name))
		return 0;
	uint32_t nseg = 0;
	for (int i = 0; i < info->dlpi_phnum; i++)
		nseg += info->dlpi_phdr[i].p_type == PT_LOAD;
	if (!nseg || nseg > 64)
		return 0;
	if (P.nmods == P.mods_cap) {
		size_t cap = P.mods_cap ? P.mods_cap * 2 : 64;
		struct modkey *m = realloc(P.mods, cap * sizeof *m);
		if (!m)
			return 0;
		P.mods = m;
		P.mods_cap = cap;
	}
	char *copy = strdup(name);
	if (!copy)
		return 0;
	P.mods[P.nmods++] = (struct modkey){info->dlpi_addr, ms->now, copy};
	const uint8_t *id;
	size_t idlen;
	build_id_of(info, &id, &idlen);
	cm_buf_varint(ms->out, ms->now);
	cm_buf_string(ms->out, name, strlen(name));
	cm_buf_string(ms->out, (const char *)id, idlen);
	cm_buf_varint(ms->out, info->dlpi_addr);
	cm_buf_varint(ms->out, nseg);
	for (int i = 0; i < info->dlpi_phnum; i++) {
		const ElfW(Phdr) *ph = &info->dlpi_phdr[i];
		if (ph->p_type != PT_LOAD)
			continue;
		cm_buf_varint(ms->out, info->dlpi_addr + ph->p_vaddr);
		cm_buf_varint(ms->out, info->dlpi_addr + ph->p_vaddr + ph->p_memsz);
		cm_buf_varint(ms->out, ph->p_offset);
	}
	return 0;
}

/* Counts of loads and unloads, from the first object's dl_phdr_info. */
static int adds_cb(struct dl_phdr_info *info, size_t size, void *arg)
{
	unsigned long long *v = arg;
	v[0] = info->dlpi_adds;
	v[1] = info->dlpi_subs;
	return 1;
}

/*
 * Thread names for TASKS. A thread is often renamed just after it starts, possibly after
 * its first sample: its name is read again in the next few flushes in which it has
 * samples (once per flush), and a new record is written when it changed. The reader keeps
 * the latest.
 */
#define NAME_CHECKS 8

static void name_task(pid_t tid)
{
	struct named_ent *e = NULL;
	for (size_t i = 0; i < P.nnamed; i++)
		if (P.named[i].tid == tid) {
			e = &P.named[i];
			break;
		}
	if (e && (e->flush == P.flushes || e->checks >= NAME_CHECKS))
		return;
	if (!e) {
		if (P.nnamed == P.named_cap) {
			size_t cap = P.named_cap ? P.named_cap * 2 : 64;
			struct named_ent *n = realloc(P.named, cap * sizeof *n);
			if (!n)
				return;
			P.named = n;
			P.named_cap = cap;
		}
		e = &P.named[P.nnamed++];
		memset(e, 0, sizeof *e);
		e->tid = tid;
	}
	e->flush = P.flushes;
	e->checks++;
	char path[64], name[64] = "";
	snprintf(path, sizeof path, "/proc/self/task/%d/comm", (int)tid);
	int fd = open(path, O_RDONLY | O_CLOEXEC);
	if (fd < 0) {
		e->checks = NAME_CHECKS; /* ended: the THREAD record, if any, names it */
		return;
	}
	ssize_t n = read(fd, name, sizeof name - 1);
	close(fd);
	while (n > 0 && (name[n - 1] == '\n' || name[n - 1] == 0))
		n--;
	name[n > 0 ? n : 0] = 0;
	if (e->checks > 1 && !strcmp(e->name, name))
		return;
	snprintf(e->name, sizeof e->name, "%s", name);
	cm_buf_varint(&P.tasks, (uint64_t)tid);
	cm_buf_string(&P.tasks, name, strlen(name));
}

static void emit_samples(void (*emit)(unsigned type, cm_buf *raw), void (*before)(void), cm_buf *body)
{
	/* Every region a drained sample names was registered before the sample was taken,
	 * so a SITES chunk written now names them all, ahead of the samples. */
	before();
	if (P.tasks.len)
		emit(FMT_TASKS, &P.tasks); /* names before the samples that use them */
	cm_buf *b = &P.recs;
	b->len = 0;
	P.last_taken = atomic_load(&P.taken);
	P.last_dropped = atomic_load(&P.dropped);
	P.last_truncated = atomic_load(&P.truncated);
	cm_buf_varint(b, P.last_taken);
	cm_buf_varint(b, P.last_dropped);
	cm_buf_varint(b, P.last_truncated);
	cm_buf_put(b, body->data, body->len);
	emit(FMT_SAMPLES, b);
	P.counters_written = 1;
	body->len = 0;
}

/* Add the objects loaded since the last scan to P.modules. Called with mod_lock held. */
static void modules_scan(uint64_t now_ticks)
{
	unsigned long long ad[2] = {0, 0};
	dl_iterate_phdr(adds_cb, ad);
	if (!P.mod_scanned || ad[0] != P.mod_adds || ad[1] != P.mod_subs) {
		mod_scan ms = {&P.modules, now_ticks, 0};
		dl_iterate_phdr(module_cb, &ms);
		P.mod_adds = ad[0];
		P.mod_subs = ad[1];
		P.mod_scanned = 1;
	}
}

/* A new file: its MODULES name every object loaded again, not only those loaded since the
 * previous session's last scan (a second session of a process had none, and its heap
 * stacks and samples stayed unsymbolised). */
void col_modules_reset(void)
{
	pthread_mutex_lock(&mod_lock);
	for (size_t i = 0; i < P.nmods; i++)
		free(P.mods[i].path);
	P.nmods = 0;
	P.mod_scanned = 0;
	P.modules.len = 0;
	pthread_mutex_unlock(&mod_lock);
}

/* MODULES: the objects loaded since the last call (samples and heap stacks need them). */
void col_modules_drain(void (*emit)(unsigned type, cm_buf *raw), uint64_t now_ticks)
{
	pthread_mutex_lock(&mod_lock);
	modules_scan(now_ticks);
	if (P.modules.len)
		emit(FMT_MODULES, &P.modules);
	pthread_mutex_unlock(&mod_lock);
}

/* ---- the ring source, writer side ---- */

/* A clock point for converting ring samples' CLOCK_MONOTONIC times to ticks: with the
 * TSC, along the line through the point taken at start and this one (the TSC's rate is
 * constant; over a baseline of milliseconds or more, a sample 100 ms old is placed within
 * a few microseconds, and a long run makes it better). */
typedef struct ring_clock {
	uint64_t mono, ticks;
	double rate; /* ticks per ns */
} ring_clock;

static void ring_clock_now(ring_clock *c)
{
	uint64_t t0 = col_ticks();
	c->mono = cm_mono_ns();
	uint64_t t1 = col_ticks();
	c->ticks = t0 + (t1 - t0) / 2;
	c->rate = c->mono > P.cal_mono && c->ticks > P.cal_ticks
			  ? (double)(c->ticks - P.cal_ticks) / (double)(c->mono - P.cal_mono)
			  : 1.0;
}

/* The stride in force at `mono` (under unwind_lock): the newest change at or before it. A
 * sample the kernel took just after a change may still belong to the old period: one
 * sample a thread a change is weighed with the other stride (docs/internals/collect.md,
 * "The overhead budget"). */
static uint32_t stride_at(uint64_t mono)
{
	uint32_t n = P.nhist < 32 ? P.nhist : 32;
	for (uint32_t i = 0; i < n; i++) {
		const struct stride_at *h = &P.hist[(P.nhist - 1 - i) % 32];
		if (h->mono <= mono)
			return h->k;
	}
	return P.nhist <= 32 ? 1 : P.hist[(P.nhist - 32) % 32].k; /* before them: the session's 1 */
}

static void ring_emit(void *ctx, pid_t tid, uint64_t mono, unsigned flags, const uint64_t *frames, uint32_t nf)
{
	const ring_clock *c = ctx;
	uint64_t ticks = mono;
	if (col_use_tsc)
		ticks = c->ticks - (uint64_t)(int64_t)((double)(int64_t)(c->mono - mono) * c->rate);
	/* No regions, step 0: the analysis takes them from the thread's events by time. */
	ring_write_at(tid, flags | FMT_S_BY_TIME, stride_at(mono), ticks ? ticks : 1, 0, frames, nf, NULL, 0, NULL, 0);
}

/*
 * Unwind the samples of the rings at least `min_pct` full (0: all) and of the released
 * threads' rings, up to now, into the sample ring; then free the released ones. Rings are
 * read and freed only here, under P.unwind_lock (the unwinder's state is not shared), so
 * the snapshot is read without P.lock. Returns the time it took samples up to, in ticks.
 */
static uint64_t rings_drain(unsigned min_pct)
{
	pthread_mutex_lock(&P.unwind_lock);
	pthread_mutex_lock(&P.lock);
	size_t n = 0, nret = P.nretired, want = P.ntids + nret;
	if (want > P.snap_cap) {
		col_pr **a = realloc(P.snap, want * sizeof *a);
		if (!a) {
			pthread_mutex_unlock(&P.lock);
			pthread_mutex_unlock(&P.unwind_lock);
			return col_ticks();
		}
		P.snap = a;
		P.snap_cap = want;
	}
	for (uint32_t i = 0; i < P.ntids; i++)
		if (P.tids[i].pr && (!min_pct || col_pr_fill_pct(P.tids[i].pr) >= min_pct))
			P.snap[n++] = P.tids[i].pr;
	for (size_t i = 0; i < nret; i++)
		P.snap[n++] = P.retired[i];
	pthread_mutex_unlock(&P.lock);
	/* The clock point after the snapshot: every released thread ended before it. */
	ring_clock c;
	ring_clock_now(&c);
	if (min_pct <= 1)
		atomic_store_explicit(&P.drained_ns, c.mono, memory_order_relaxed);
	if (n) {
		uint64_t lost = col_pr_drain(P.snap, n, c.mono, P.depth, ring_emit, &c);
		atomic_fetch_add_explicit(&P.dropped, lost, memory_order_relaxed);
	}
	if (nret) {
		pthread_mutex_lock(&P.lock);
		for (size_t i = 0; i < nret; i++)
			col_pr_free(P.retired[i]);
		P.fd_budget += (int)nret;
		memmove(P.retired, P.retired + nret, (P.nretired - nret) * sizeof *P.retired);
		P.nretired -= nret;
		pthread_mutex_unlock(&P.lock);
	}
	pthread_mutex_unlock(&P.unwind_lock);
	return c.ticks;
}

/*
 * The writer, between flushes, unwinds the ring source's rings (col_sample_tick), so that
 * rings of a few dozen samples last from one flush to the next; the other sources write
 * into one ring drained at every flush. A ring fills no faster than the sampling rate (a
 * sample per period of its thread's CPU time), so the writer looks every half of the time
 * the smallest ring takes to fill, and then unwinds every ring that holds a sample: a ring
 * is at most half full at a look, and the writer may be late by that half (41 ms with the
 * default 1 MiB rings at 999 Hz) before one overflows. Looks in between (the writer looks
 * sooner while events flow; each flush drains every ring) take only rings half full.
 * Before, the writer looked every quarter and took the rings a quarter full, which
 * tolerated the same lateness (a ring just under the mark waited a look more) with 50
 * wakeups a second at 999 Hz instead of 30 (10 of them the flushes), at about 50 us of CPU
 * a wakeup on this project's VMs (bench/README.md, "sampling").
 */
uint64_t col_sample_quiet_ns(void)
{
	uint64_t bytes = atomic_load_explicit(&P.ring_min_bytes, memory_order_relaxed);
	if (P.mode == FMT_SAMPLE_OFF || P.source != FMT_SRC_RING || !bytes)
		return UINT64_MAX;
	uint64_t records = bytes / (P.prc.stack_bytes + 256);
	return (records / 2 ? records / 2 : 1) * P.period_ns * atomic_load_explicit(&P.stride, memory_order_relaxed);
}

/*
 * The overhead budget (budget.c) samples every `k` periods: each source is re-armed at k
 * times the session's period, and each sample weighs k (SAMPLES' weight), so that a
 * sample's time stays weight times the header's period for every reader. The writer's,
 * under the session's flush lock.
 */
void col_sample_set_stride(uint32_t k)
{
	if (P.mode == FMT_SAMPLE_OFF || !k || k == atomic_load_explicit(&P.stride, memory_order_relaxed))
		return;
	uint64_t per = P.period_ns * k;
	pthread_mutex_lock(&P.unwind_lock);
	P.hist[P.nhist % 32] = (struct stride_at){cm_mono_ns(), k};
	P.nhist++;
	atomic_store_explicit(&P.stride, k, memory_order_relaxed);
	pthread_mutex_lock(&P.lock);
	P.prc.period_ns = per; /* threads that start from now */
	struct itimerspec its;
	its.it_interval.tv_sec = (time_t)(per / 1000000000u);
	its.it_interval.tv_nsec = (long)(per % 1000000000u);
	its.it_value = its.it_interval;
	for (uint32_t i = 0; i < P.ntids; i++) {
		tid_ent *e = &P.tids[i];
		if (e->pr)
			col_pr_set_period(e->pr, per);
		if (e->fd >= 0 && col_fd_marked(e->fd))
			ioctl(e->fd, PERF_EVENT_IOC_PERIOD, &per);
		if (e->has_timer)
			timer_settime(e->timer, 0, &its, NULL);
	}
	pthread_mutex_unlock(&P.lock);
	pthread_mutex_unlock(&P.unwind_lock);
}

uint32_t col_sample_stride(void) { return atomic_load_explicit(&P.stride, memory_order_relaxed); }

uint64_t col_sample_taken(void) { return atomic_load_explicit(&P.taken, memory_order_relaxed); }

void col_sample_tick(void)
{
	if (P.mode == FMT_SAMPLE_OFF || P.source != FMT_SRC_RING)
		return;
	uint64_t q = col_sample_quiet_ns(), now = cm_mono_ns();
	uint64_t last = atomic_load_explicit(&P.drained_ns, memory_order_relaxed);
	/* An eighth early still counts: drained_ns is read from the clock inside the last
	 * drain, after that look began, so the next look can come a little short of q */
	rings_drain(now - last >= q - q / 8 ? 1 : 50);
}

/*
 * A library about to be unloaded takes its code and unwind tables with it: ring samples
 * taken in it and not unwound yet would keep their first frame only. They are unwound
 * now, by the unloading thread (samples taken between this and the unmapping still are
 * not: microseconds).
 */
FENNEC_API int dlclose(void *handle)
{
	static int (*real)(void *);
	if (!real)
		real = (int (*)(void *))dlsym(RTLD_NEXT, "dlclose");
	if (atomic_load_explicit(&col_on, memory_order_acquire)) {
		int was = col_mem_internal(1);
		/* The library's record, for the next flush to write. A thread that closes a
		 * library from a destructor of another being closed holds the loader's lock:
		 * it only tries (the writer, if it holds mod_lock, is scanning anyway). */
		if (pthread_mutex_trylock(&mod_lock) == 0) {
			modules_scan(col_ticks());
			pthread_mutex_unlock(&mod_lock);
		}
		if (P.mode != FMT_SAMPLE_OFF && P.source == FMT_SRC_RING && atomic_load(&P.active))
			rings_drain(0);
		col_mem_internal(was);
	}
	int rc = real ? real(handle) : -1;
	/* The objects whose code its addresses held may be gone: the heap stack walks' cached
	 * call-frame rules (cfi_walk_local) start over. */
	atomic_fetch_add_explicit(&cfi_local_gen, 1, memory_order_release);
	return rc;
}

/*
 * Drain the sample ring into chunk payloads: TASKS and SAMPLES, handed to `emit` in that
 * order (after col_modules_drain has written the MODULES they need). The rings of the
 * ring source are unwound first, up to now: the flush drained the threads' events just
 * before, so every event earlier than these samples precedes the next SAMPLES chunk, and
 * every event written before this one is older than them (docs/format.md, "Regions and
 * step by time").
 */
void col_sample_drain(void (*emit)(unsigned type, cm_buf *raw), void (*before)(void))
{
	if (P.mode == FMT_SAMPLE_OFF || !P.ring.buf)
		return;
	/* A dlclose may unwind ring samples newer than this cut while the loop below runs:
	 * they, and what follows them in the ring, wait for the next flush. */
	uint64_t cut = P.source == FMT_SRC_RING ? rings_drain(0) : UINT64_MAX;
	P.flushes++;
	uint64_t head = atomic_load_explicit(&P.ring.head, memory_order_relaxed);
	uint64_t prev = 0;
	int any = 0;
	uint64_t frames[COL_SAMPLE_MAX_DEPTH], py[COL_PY_MAX_FRAMES];
	uint32_t regions[COL_MAX_DEPTH];
	cm_buf body = {0};
	col_py_drain(emit); /* the code objects the samples below name, or most of them */
	for (;;) {
		uint32_t len = col_ring_ready(&P.ring, head);
		if (!len)
			break;
		if (len & COL_RING_PAD) { /* the rest of a lap */
			col_ring_skip(&P.ring, &head, len);
			col_ring_release(&P.ring, head);
			continue;
		}
		rec r;
		col_ring_get(&P.ring, head, &r, REC_HDR);
		if ((r.flags & FMT_S_BY_TIME) && r.ticks > cut)
			break;
		uint64_t step = r.step;
		uint32_t nf = r.nframes <= COL_SAMPLE_MAX_DEPTH ? r.nframes : 0;
		uint32_t nr = r.nregions <= COL_MAX_DEPTH ? r.nregions : 0;
		uint32_t npy = r.npy <= COL_PY_MAX_FRAMES ? r.npy : 0;
		col_ring_get(&P.ring, head + REC_HDR, frames, 8 * (size_t)nf);
		col_ring_get(&P.ring, head + REC_HDR + 8 * (uint64_t)nf, py, 8 * (size_t)npy);
		col_ring_get(&P.ring, head + REC_HDR + 8 * (uint64_t)(nf + r.npy), regions, 4 * (size_t)nr);
		col_ring_consume(&P.ring, &head, len);
		name_task((pid_t)r.tid);
		fmt_sample_rec sr = {r.flags, r.tid, r.ticks, r.weight, step, nr, nf, npy, regions, frames, py};
		if (cm_buf_reserve(&body, FMT_SAMPLE_MAX(nr, nf, npy)) == 0)
			body.len += fmt_enc_sample(body.data + body.len, &sr, prev);
		prev = r.ticks;
		any = 1;
		if (body.len > (4u << 20)) {
			emit_samples(emit, before, &body);
			any = 0;
			prev = 0; /* times restart from 0 in every chunk */
		}
	}
	if (P.tasks.len)
		emit(FMT_TASKS, &P.tasks);
	if (any || !P.counters_written || P.last_taken != atomic_load(&P.taken) ||
	    P.last_dropped != atomic_load(&P.dropped) || P.last_truncated != atomic_load(&P.truncated))
		emit_samples(emit, before, &body);
	cm_buf_free(&body);
}

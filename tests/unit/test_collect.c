/*
 * test_collect.c - unit tests of the collector, linked from libfennec.a: the shared record
 * ring (collect/ring.h) around its end, full and unpublished; the site table (col_site_id)
 * from several threads at once; and the event encoding of api.c, through a real session,
 * read back by the reader event for event, with the thread's ring wrapping many times.
 */
#include <fennec.h>
#include <pthread.h>
#include <stdlib.h>
#include <unistd.h>

#include "collect/collect.h"
#include "collect/ring.h"
#include "format/reader.h"
#include <sys/mman.h>

#include "unit.h"

/* The byte at offset k of record number n (k >= 4: the first word is the length). */
static uint8_t ring_byte(uint64_t n, uint32_t k)
{
	return (uint8_t)(n * 31 + k * 7 + 1);
}

UNIT_TEST(collect_ring)
{
	col_ring r = {0};
	UNIT_CHECK_EQ(col_ring_init(&r, 4096), 0);
	UNIT_CHECK_EQ(col_ring_used(&r), 0);
	UNIT_CHECK_EQ(col_ring_ready(&r, 0), 0); /* empty: nothing published */
	/* Past a quarter a producer skips to the next lap once the writer has followed it
	 * there (ring.h): the rest of the lap is one pad record. */
	col_ring q = {0};
	UNIT_CHECK_EQ(col_ring_init(&q, 4096), 0);
	uint64_t at = 0, h0 = 0;
	for (int k = 0; k < 1024 / 64; k++) {
		UNIT_CHECK_EQ(col_ring_reserve(&q, 64, &at), 0);
		col_ring_publish(&q, at, 64);
		col_ring_consume(&q, &h0, 64);
	}
	UNIT_CHECK_EQ(col_ring_reserve(&q, 64, &at), 0);
	UNIT_CHECK_EQ(at, 4096); /* the next lap's start */
	uint32_t pad = col_ring_ready(&q, h0);
	UNIT_CHECK(pad & COL_RING_PAD);
	col_ring_skip(&q, &h0, pad);
	UNIT_CHECK_EQ(h0, 4096);
	col_ring_publish(&q, at, 64);
	col_ring_consume(&q, &h0, 64);
	munmap(q.buf, 4096);
	r.rewind = r.size; /* below: every offset of the ring, the wrap-around at its end */
	/* Records of 8 to 256 bytes through a 4 KiB ring, 40 times its size: every record is
	 * written where it was reserved and read back whole, across the end too. */
	uint64_t head = 0, wrapped = 0;
	uint8_t rec[256], got[256];
	for (uint64_t n = 0; n < 2000; n++) {
		uint32_t len = 8 + (uint32_t)(n * 40 % 249) / 8 * 8;
		uint64_t pos = 0;
		UNIT_CHECK_EQ(col_ring_reserve(&r, len, &pos), 0);
		UNIT_CHECK_EQ(pos, head);
		for (uint32_t k = 4; k < len; k++)
			rec[k] = ring_byte(n, k);
		col_ring_put(&r, pos + 4, rec + 4, len - 4);
		wrapped += (pos & 4095) + len > 4096;
		UNIT_CHECK(col_ring_span(&r, pos, len) == ((pos & 4095) + len <= 4096 ? r.buf + (pos & 4095) : NULL));
		UNIT_CHECK_EQ(col_ring_ready(&r, head), 0); /* reserved, not yet published */
		col_ring_publish(&r, pos, len);
		UNIT_CHECK_EQ(col_ring_ready(&r, head), len);
		col_ring_get(&r, head + 4, got + 4, len - 4);
		UNIT_CHECK(!memcmp(got + 4, rec + 4, len - 4));
		col_ring_consume(&r, &head, len);
		UNIT_CHECK_EQ(col_ring_used(&r), 0);
		UNIT_CHECK_EQ(col_ring_ready(&r, head), 0); /* consumed: cleared */
	}
	UNIT_CHECK(wrapped > 10);

	/* Full: a reservation that does not fit reserves nothing; consuming makes room. */
	uint64_t pos = 0, first = head;
	uint32_t n = 0;
	while (col_ring_reserve(&r, 64, &pos) == 0)
		n++;
	UNIT_CHECK_EQ(n, 4096 / 64);
	UNIT_CHECK_EQ(col_ring_used(&r), 4096);
	UNIT_CHECK_EQ(col_ring_reserve(&r, 8, &pos), -1);
	UNIT_CHECK_EQ(col_ring_used(&r), 4096);
	/* The second record published before the first: the writer stops at the first. */
	col_ring_publish(&r, first + 64, 64);
	UNIT_CHECK_EQ(col_ring_ready(&r, first), 0);
	col_ring_publish(&r, first, 64);
	UNIT_CHECK_EQ(col_ring_ready(&r, first), 64);
	/* A batch cleared then released at once (the writer's way) */
	col_ring_clear(&r, &head, 64);
	col_ring_clear(&r, &head, 64);
	UNIT_CHECK_EQ(col_ring_used(&r), 4096); /* not released yet */
	UNIT_CHECK_EQ(col_ring_reserve(&r, 8, &pos), -1);
	col_ring_release(&r, head);
	UNIT_CHECK_EQ(col_ring_used(&r), 4096 - 128);
	UNIT_CHECK_EQ(col_ring_reserve(&r, 128, &pos), 0);
	UNIT_CHECK_EQ(col_ring_reserve(&r, 8, &pos), -1);
	/* A fork child's reset: empty, zeroed, usable. */
	col_ring_reset(&r);
	UNIT_CHECK_EQ(col_ring_used(&r), 0);
	UNIT_CHECK_EQ(col_ring_ready(&r, 0), 0);
	int zero = 1;
	for (uint32_t k = 0; k < 4096; k++)
		zero &= r.buf[k] == 0;
	UNIT_CHECK(zero);
	UNIT_CHECK_EQ(col_ring_reserve(&r, 4096, &pos), 0);
	UNIT_CHECK_EQ(pos, 0);
	UNIT_CHECK_EQ(col_ring_init(&r, 8192), 0); /* already mapped: kept */
	UNIT_CHECK_EQ(r.size, 4096);
}

/* The site table: keys are addresses, several threads register the same ones at once. */
#define SITE_KEYS 3000
#define SITE_THREADS 4
static char site_names[SITE_KEYS][8];

struct site_run {
	int order;
	uint32_t ids[SITE_KEYS][2]; /* as a region, as a counter */
};

static void *site_worker(void *arg)
{
	struct site_run *w = arg;
	for (int i = 0; i < SITE_KEYS; i++) {
		int k = w->order ? SITE_KEYS - 1 - (i * 7 % SITE_KEYS) : i;
		w->ids[k][0] = col_site_id(site_names[k], FMT_SITE_REGION, site_names[k], "f.c", k);
		w->ids[k][1] = col_site_id(site_names[k], FMT_SITE_COUNTER, site_names[k], NULL, 0);
	}
	return NULL;
}

UNIT_TEST(collect_site_table)
{
	for (int k = 0; k < SITE_KEYS; k++)
		snprintf(site_names[k], sizeof site_names[k], "s%d", k);
	uint32_t before = atomic_load(&col_nsites);
	static struct site_run runs[SITE_THREADS];
	pthread_t th[SITE_THREADS];
	for (int t = 0; t < SITE_THREADS; t++) {
		runs[t].order = t & 1;
		UNIT_CHECK_EQ(pthread_create(&th[t], NULL, site_worker, &runs[t]), 0);
	}
	for (int t = 0; t < SITE_THREADS; t++)
		pthread_join(th[t], NULL);
	/* One id per (key, kind), the same on every thread, each id's entry that key's. */
	UNIT_CHECK_EQ(atomic_load(&col_nsites) - before, 2 * SITE_KEYS);
	static uint8_t seen[COL_MAX_SITES];
	int agree = 1, fields = 1, unique = 1;
	for (int k = 0; k < SITE_KEYS; k++)
		for (int kind = 0; kind < 2; kind++) {
			uint32_t id = runs[0].ids[k][kind];
			for (int t = 1; t < SITE_THREADS; t++)
				agree &= runs[t].ids[k][kind] == id;
			unique &= id >= before && id < before + 2 * SITE_KEYS && !seen[id];
			seen[id] = 1;
			const col_site *s = &col_sites[id];
			fields &= s->key == site_names[k] && s->name == site_names[k] &&
				  s->kind == (kind ? FMT_SITE_COUNTER : FMT_SITE_REGION) &&
				  s->line == (kind ? 0 : k) && (kind ? !s->file : !strcmp(s->file, "f.c"));
		}
	UNIT_CHECK(agree);
	UNIT_CHECK(unique);
	UNIT_CHECK(fields);
	/* Looked up again: the same id, nothing added. */
	UNIT_CHECK_EQ(col_site_id(site_names[5], FMT_SITE_REGION, "other", NULL, 0), runs[0].ids[5][0]);
	UNIT_CHECK_EQ(atomic_load(&col_nsites) - before, 2 * SITE_KEYS);
}

/* The events the session below writes, as the reader must give them back. */
struct want {
	unsigned type;
	const char *name; /* BEGIN, metrics */
	int64_t i;        /* COUNTER */
	double f;         /* GAUGE, VALUE */
	uint64_t u;       /* STEP items */
};
#define ENC_ROUNDS 40
#define ENC_PER_ROUND 400
#define ENC_EVENTS (ENC_ROUNDS * (ENC_PER_ROUND * 9 + 1))

struct enc_read {
	const struct want *want;
	size_t n, bad;
	uint32_t thread;
	uint64_t last_ticks;
	int backwards;
	char first_bad[200];
};

static int enc_event(void *ctx, const fmt_file *f, const fmt_event *ev)
{
	struct enc_read *r = ctx;
	if (ev->type > FMT_EV_VALUE || ev->thread != r->thread)
		return 0;
	if (ev->ticks < r->last_ticks)
		r->backwards = 1;
	r->last_ticks = ev->ticks;
	const struct want *w = r->n < ENC_EVENTS ? &r->want[r->n] : NULL;
	const char *name = ev->type != FMT_EV_END && ev->type != FMT_EV_STEP && ev->id < f->nsites &&
				   f->sites[ev->id].defined ? f->sites[ev->id].name : NULL;
	int ok = w && ev->type == w->type;
	if (ok && w->name)
		ok = name && !strcmp(name, w->name);
	if (ok && w->type == FMT_EV_COUNTER)
		ok = ev->i == w->i;
	if (ok && (w->type == FMT_EV_GAUGE || w->type == FMT_EV_VALUE))
		ok = ev->f == w->f;
	if (ok && w->type == FMT_EV_STEP)
		ok = ev->u == w->u;
	if (!ok && !r->bad++)
		snprintf(r->first_bad, sizeof r->first_bad,
			 "event %zu: type %u name %s i %lld f %g u %llu, expected type %u name %s", r->n, ev->type,
			 name ? name : "-", (long long)ev->i, ev->f, (unsigned long long)ev->u, w ? w->type : 0,
			 w && w->name ? w->name : "-");
	r->n++;
	return 0;
}

/* Waits until the writer took everything this thread wrote (at most ~10 s). */
static int drained(void)
{
	for (int i = 0; i < 10000; i++) {
		col_thread *t = col_tls;
		if (t && atomic_load(&t->head) == atomic_load(&t->committed))
			return 1;
		usleep(1000);
	}
	return 0;
}

UNIT_TEST(collect_event_encoding)
{
	static struct want want[ENC_EVENTS];
	char path[] = "/tmp/fennec-unit-XXXXXX";
	int fd = mkstemp(path);
	UNIT_CHECK(fd >= 0);
	if (fd < 0)
		return;
	close(fd);
	setenv("FENNEC_WRITER", "thread", 1); /* a thread drains the ring while this one waits */
	fennec_config cfg;
	fennec_config_init(&cfg);
	cfg.output = path;
	cfg.buffer_kb = 64; /* the smallest ring: the events below wrap it many times */
	cfg.sample_mode = FENNEC_SAMPLE_OFF;
	cfg.memory_mode = FENNEC_MEMORY_OFF;
	int rc = fennec_start(&cfg);
	UNIT_CHECK_EQ(rc, 0);
	if (rc) {
		unlink(path);
		return;
	}
	static fennec_site site = {"enc_site", __FILE__, __LINE__, 0};
	uint32_t interned = fennec_intern("enc_interned");
	size_t n = 0;
	int all_drained = 1;
	for (int round = 0; round < ENC_ROUNDS; round++) {
		for (int i = 0; i < ENC_PER_ROUND; i++) {
			int64_t k = round * ENC_PER_ROUND + i;
			/* deltas of every varint length, both signs */
			int64_t delta = (k % 3 ? 1 : -1) * ((int64_t)1 << (k % 63));
			double g = (double)k * 0.5, v = -1.25e300 / (double)(k + 1);
			fennec_region_begin("enc_outer");
			want[n++] = (struct want){.type = FMT_EV_BEGIN, .name = "enc_outer"};
			fennec_counter_add("enc_count", delta);
			want[n++] = (struct want){.type = FMT_EV_COUNTER, .name = "enc_count", .i = delta};
			fennec_region_begin_site(&site);
			want[n++] = (struct want){.type = FMT_EV_BEGIN, .name = "enc_site"};
			fennec_gauge_set("enc_gauge", g);
			want[n++] = (struct want){.type = FMT_EV_GAUGE, .name = "enc_gauge", .f = g};
			fennec_region_begin_id(interned);
			want[n++] = (struct want){.type = FMT_EV_BEGIN, .name = "enc_interned"};
			fennec_value_record("enc_value", v);
			want[n++] = (struct want){.type = FMT_EV_VALUE, .name = "enc_value", .f = v};
			for (int e = 0; e < 3; e++) {
				fennec_region_end();
				want[n++] = (struct want){.type = FMT_EV_END};
			}
		}
		fennec_step_items((uint64_t)round + 1);
		want[n++] = (struct want){.type = FMT_EV_STEP, .u = (uint64_t)round + 1};
		all_drained &= drained();
	}
	uint64_t total = col_tls ? col_tls->tail : 0;
	UNIT_CHECK_EQ(fennec_stop(), 0);
	unsetenv("FENNEC_WRITER");
	UNIT_CHECK(all_drained);
	UNIT_CHECK_EQ(n, ENC_EVENTS);
	UNIT_CHECK(total > 4 * 64 * 1024); /* the ring wrapped: records crossed its end */
	if (total <= 4 * 64 * 1024)
		printf("    %llu bytes of events\n", (unsigned long long)total);

	fmt_file f;
	fmt_error e;
	struct enc_read r = {.want = want};
	/* this thread is the file's only one with events */
	rc = fmt_read(path, &f, enc_event, &r, &e);
	UNIT_CHECK_EQ(rc, 0);
	if (rc)
		printf("    %s\n", e.msg);
	UNIT_CHECK_EQ(r.n, ENC_EVENTS);
	UNIT_CHECK_EQ(r.bad, 0);
	if (r.bad)
		printf("    first difference: %s\n", r.first_bad);
	UNIT_CHECK(!r.backwards);
	uint64_t dropped = 0;
	for (uint32_t t = 0; !rc && t < f.nthreads; t++)
		dropped += f.threads[t].dropped;
	UNIT_CHECK_EQ(dropped, 0);
	UNIT_CHECK(!rc && f.has_end && !f.cut_short);
	fmt_file_free(&f);
	unlink(path);
}

/*
 * pipe.c - see pipe.h. A ring of FMT_PIPE_SLOTS batches of FMT_PIPE_BATCH events between
 * one producer (the reading thread) and one consumer (the callback's thread), under one
 * mutex taken once a batch.
 */
#include "format/pipe.h"

#include <pthread.h>
#include <stdlib.h>
#include <string.h>

struct fmt_pipe {
	fmt_event_fn fn;
	void *ctx;
	const fmt_file *f;
	pthread_t thread;
	pthread_mutex_t mu;
	pthread_cond_t more, room; /* a batch was published / taken */
	fmt_pipe_ev *ev[FMT_PIPE_SLOTS];
	uint32_t len[FMT_PIPE_SLOTS];
	uint64_t published, taken;    /* batches, counted from the start (slot = count % SLOTS) */
	uint32_t fill;                /* events in the batch being filled (slot published % SLOTS) */
	int stop;
	int consumer_waits, producer_waits; /* signalled only when someone waits */
	int rc;                       /* the callback's first failure */
};

static void *consume(void *arg)
{
	fmt_pipe *p = arg;
	fmt_event ev;
	memset(&ev, 0, sizeof ev);
	pthread_mutex_lock(&p->mu);
	for (;;) {
		while (p->taken == p->published && !p->stop) {
			p->consumer_waits = 1;
			pthread_cond_wait(&p->more, &p->mu);
			p->consumer_waits = 0;
		}
		if (p->taken == p->published)
			break;
		uint32_t slot = (uint32_t)(p->taken % FMT_PIPE_SLOTS), n = p->len[slot];
		int failed = p->rc;
		pthread_mutex_unlock(&p->mu);
		int rc = 0;
		const fmt_pipe_ev *q = p->ev[slot];
		for (uint32_t k = 0; k < n && !failed && !rc; k++) {
			ev.type = q[k].type;
			ev.flags = q[k].flags;
			ev.thread = q[k].thread;
			ev.id = q[k].id;
			ev.ticks = q[k].ticks;
			ev.u = q[k].u;
			ev.i = ev.type == FMT_EV_COUNTER ? q[k].i : 0;
			ev.f = ev.type == FMT_EV_GAUGE || ev.type == FMT_EV_VALUE ? q[k].f : 0;
			rc = p->fn(p->ctx, p->f, &ev);
		}
		pthread_mutex_lock(&p->mu);
		if (rc && !p->rc)
			p->rc = rc;
		p->taken++;
		/* Wake the producer once a quarter of the ring is free, or all of it (a drain). */
		if (p->producer_waits && (p->published - p->taken <= FMT_PIPE_SLOTS * 3 / 4 || p->taken == p->published))
			pthread_cond_signal(&p->room);
	}
	pthread_mutex_unlock(&p->mu);
	return NULL;
}

fmt_pipe *fmt_pipe_start(fmt_event_fn fn, void *ctx, const fmt_file *f)
{
	/* Asked for only (FENNEC_ANALYZE_THREADS=2 or more): on this project's 2-vCPU VMs, quiet,
	 * the queue made 100 M region events take 4.1 s of wall time and 5.6 s of CPU where one
	 * thread takes 2.6 and 2.5. Each queued event is 40 bytes written on one core and read
	 * on the other, and the producer's stores into lines the consumer last read were 48 % of
	 * the CPU (perf: fmt_rd_decode_events 0.37 s alone, 3.1 s beside the consumer). */
	const char *e = getenv("FENNEC_ANALYZE_THREADS");
	if (!fn || !e || atoi(e) < 2)
		return NULL;
	fmt_pipe *p = calloc(1, sizeof *p);
	if (!p)
		return NULL;
	p->fn = fn;
	p->ctx = ctx;
	p->f = f;
	for (int i = 0; i < FMT_PIPE_SLOTS; i++)
		if (!(p->ev[i] = malloc(FMT_PIPE_BATCH * sizeof *p->ev[i])))
			goto fail;
	if (pthread_mutex_init(&p->mu, NULL))
		goto fail;
	pthread_cond_init(&p->more, NULL);
	pthread_cond_init(&p->room, NULL);
	if (pthread_create(&p->thread, NULL, consume, p)) {
		pthread_cond_destroy(&p->more);
		pthread_cond_destroy(&p->room);
		pthread_mutex_destroy(&p->mu);
		goto fail;
	}
	return p;
fail:
	for (int i = 0; i < FMT_PIPE_SLOTS; i++)
		free(p->ev[i]);
	free(p);
	return NULL; /* the reader delivers on its own thread */
}

/* Hand the batch being filled to the consumer (waiting for a free slot after it). A
 * waiting consumer is woken once a quarter of the ring is queued, or at once for a drain
 * (`now`): a wake-up a batch cost a context switch each on a busy machine. */
static void publish(fmt_pipe *p, int now)
{
	pthread_mutex_lock(&p->mu);
	p->len[p->published % FMT_PIPE_SLOTS] = p->fill;
	p->published++;
	p->fill = 0;
	if (p->consumer_waits && (now || p->published - p->taken >= FMT_PIPE_SLOTS / 4))
		pthread_cond_signal(&p->more);
	while (p->published - p->taken >= FMT_PIPE_SLOTS) {
		p->producer_waits = 1;
		pthread_cond_wait(&p->room, &p->mu);
		p->producer_waits = 0;
	}
	pthread_mutex_unlock(&p->mu);
}

fmt_pipe_ev *fmt_pipe_next(fmt_pipe *p)
{
	if (p->fill == FMT_PIPE_BATCH) {
		publish(p, 0);
		pthread_mutex_lock(&p->mu);
		int rc = p->rc;
		pthread_mutex_unlock(&p->mu);
		if (rc)
			return NULL;
	}
	return &p->ev[p->published % FMT_PIPE_SLOTS][p->fill++];
}

int fmt_pipe_drain(fmt_pipe *p)
{
	if (p->fill)
		publish(p, 1);
	pthread_mutex_lock(&p->mu);
	if (p->consumer_waits && p->taken != p->published)
		pthread_cond_signal(&p->more); /* batches published below the wake-up mark */
	while (p->taken != p->published) {
		p->producer_waits = 1;
		pthread_cond_wait(&p->room, &p->mu);
		p->producer_waits = 0;
	}
	int rc = p->rc;
	pthread_mutex_unlock(&p->mu);
	return rc;
}

int fmt_pipe_stop(fmt_pipe *p)
{
	if (!p)
		return 0;
	int rc = fmt_pipe_drain(p);
	pthread_mutex_lock(&p->mu);
	p->stop = 1;
	pthread_cond_signal(&p->more); /* unconditionally: the flag is set under this lock */
	pthread_mutex_unlock(&p->mu);
	pthread_join(p->thread, NULL);
	pthread_cond_destroy(&p->more);
	pthread_cond_destroy(&p->room);
	pthread_mutex_destroy(&p->mu);
	for (int i = 0; i < FMT_PIPE_SLOTS; i++)
		free(p->ev[i]);
	free(p);
	return rc;
}

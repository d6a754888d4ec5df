/*
 * reader_system.c - the reader's decoding of SYSTEM and ENERGY chunks (docs/format.md,
 * "System metrics", "Energy"). reader.c's chunk loop calls the decoders.
 */
#include <math.h>

#include "format/decode.h"

/* ---- SYSTEM and ENERGY (docs/format.md "System metrics", "Energy") ---- */

static uint64_t ns_to_ticks(const fmt_file *f, uint64_t ns)
{
	double t = f->fit_b > 0 ? ((double)ns - f->fit_a) / f->fit_b : (double)ns;
	return t > 0 ? (uint64_t)llround(t) : 0;
}

int decode_system(rd *r, cur *c)
{
	fmt_file *f = r->f;
	f->sys_taken = cur_varint(c);
	uint64_t t = 0;
	const uint8_t *base = c->p;
	while (c->p < c->end && !c->bad) {
		const uint8_t *at = c->p;
		fmt_sys s = {0};
		s.reason = cur_u8(c);
		t += (uint64_t)cm_unzigzag(cur_varint(c));
		s.t_ns = t;
		s.step = cur_varint(c);
		uint64_t present = cur_varint(c);
		/* one varint per bit set; bits this reader does not know are read and dropped */
		for (unsigned i = 0; i < 64 && !c->bad; i++)
			if (present >> i & 1) {
				uint64_t v = cur_varint(c);
				if (i < FMT_SY_COUNT)
					s.v[i] = v;
			}
		s.present = present & ((1ull << FMT_SY_COUNT) - 1);
		if (c->bad || s.reason > FMT_SYS_REASON_MAX || (int64_t)t < 0)
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "SYSTEM: bad or truncated record at payload byte %td",
				    at - base);
		fmt_event ev = {.type = FMT_EV_SYS, .thread = UINT32_MAX, .sys = &s, .ticks = ns_to_ticks(f, s.t_ns)};
		int rc = r->fn ? r->fn(r->ctx, f, &ev) : 0;
		if (rc)
			return rc;
	}
	return 0;
}

#define MAX_ENERGY_DOMAINS 4096u

int decode_energy(rd *r, cur *c)
{
	fmt_file *f = r->f;
	uint64_t t = 0;
	const uint8_t *base = c->p;
	while (c->p < c->end && !c->bad) {
		const uint8_t *at = c->p;
		fmt_energy e = {0};
		e.type = cur_u8(c);
		uint64_t id = cur_varint(c);
		if (c->bad || !id || id >= MAX_ENERGY_DOMAINS || (e.type != FMT_ER_DOMAIN && e.type != FMT_ER_READING))
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "ENERGY: bad record at payload byte %td", at - base);
		e.domain = (uint32_t)id;
		if (e.type == FMT_ER_DOMAIN) {
			unsigned src = cur_u8(c), kind = cur_u8(c);
			char *name = cur_string(c);
			if (c->bad || !src || src > FMT_ES_MAX || kind > FMT_EK_MAX ||
			    grow((void **)&f->energy_domains, &f->nenergy_domains, (uint32_t)id + 1, sizeof *f->energy_domains,
				 MAX_ENERGY_DOMAINS) < 0) {
				free(name);
				return fail(r, FENNEC_ECORRUPT, r->chunk_off, "ENERGY: bad DOMAIN record at payload byte %td", at - base);
			}
			fmt_energy_domain *d = &f->energy_domains[id];
			if (d->defined) {
				/* The writer names its domains again in every segment of a capped
				 * recording (read joined, as one file). The readings handed on before
				 * hold this name (the analysis keeps the pointer): the first
				 * definition stays for the file's life. Freeing it here left the
				 * analysis a freed name (heap-use-after-free in the JSON report,
				 * found by analysis_fuzz). A domain redefined otherwise is corrupt. */
				int same = d->source == src && d->kind == kind && !strcmp(d->name, name);
				free(name);
				if (!same)
					return fail(r, FENNEC_ECORRUPT, r->chunk_off,
						    "ENERGY: DOMAIN record at payload byte %td redefines domain %u", at - base,
						    (unsigned)id);
				continue;
			}
			*d = (fmt_energy_domain){src, kind, name, 1};
			continue;
		}
		t += (uint64_t)cm_unzigzag(cur_varint(c));
		e.t_ns = t;
		e.uj = cur_varint(c);
		e.max_uj = cur_varint(c);
		if (c->bad || (int64_t)t < 0)
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "ENERGY: truncated READING at payload byte %td", at - base);
		if (id >= f->nenergy_domains || !f->energy_domains[id].defined)
			return fail(r, FENNEC_ECORRUPT, r->chunk_off, "ENERGY: READING at payload byte %td names undefined domain %u",
				    at - base, (unsigned)id);
		e.source = (uint8_t)f->energy_domains[id].source;
		e.kind = (uint8_t)f->energy_domains[id].kind;
		e.name = f->energy_domains[id].name;
		fmt_event ev = {.type = FMT_EV_ENERGY, .thread = UINT32_MAX, .energy = &e, .ticks = ns_to_ticks(f, e.t_ns)};
		int rc = r->fn ? r->fn(r->ctx, f, &ev) : 0;
		if (rc)
			return rc;
	}
	return 0;
}


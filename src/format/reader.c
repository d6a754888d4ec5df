/*
 * reader.c - decodes profile files (docs/format.md) for every consumer. Chunks are
 * validated before their payload is looked at; payload decoding checks every length
 * against the bytes that remain. Events reach the caller through a callback with
 * absolute ticks, so a 100-million-event file is never materialised. This file frames
 * them (the preamble, chunk headers, checksums, decompression, skipping damage), fits the
 * clock and reads memory, files, a capped recording's segments and growing files
 * (fmt_follow); each chunk type's payload is decoded in reader_events.c, reader_heap.c,
 * reader_gpu.c or reader_system.c (decode.h).
 */
#include "format/reader.h"

#include <dirent.h>
#include <errno.h>
#include <fcntl.h>
#include <math.h>
#include <stdarg.h>
#include <stdio.h>
#include <stdlib.h>
#include <sys/mman.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zstd.h>

#include "format/decode.h"

/* A mapped file's pages behind the chunk at `off` are not read again in this pass: give
 * them back, so that the resident set of a big file's analysis stays a window, not the
 * file (a clean private file page is read again from the page cache if ever touched). */
#define DROP_WINDOW (32u << 20)
static void drop_behind(rd *r, const uint8_t *data, uint64_t off)
{
	if (!r->mapped || off - r->dropped < 2 * (uint64_t)DROP_WINDOW)
		return;
	uint64_t to = (off - DROP_WINDOW) & ~(uint64_t)0xfffff; /* 1 MiB: a multiple of the page size */
	if (to > r->dropped && !madvise((void *)(data + r->dropped), to - r->dropped, MADV_DONTNEED))
		r->dropped = to;
}

static void fmt_file_free_records(fmt_file *f);

int fail(rd *r, int code, uint64_t off, const char *fmt, ...)
{
	va_list ap;
	char what[384];
	va_start(ap, fmt);
	vsnprintf(what, sizeof what, fmt, ap);
	va_end(ap);
	r->err->code = code;
	r->err->offset = off;
	const char *name = r->name;
	for (uint32_t i = r->nparts; i-- > 0;) /* in a segment: its name, its offset */
		if (off >= r->parts[i].at) {
			off = off - r->parts[i].at + r->parts[i].file_off;
			name = r->parts[i].path;
			r->err->offset = off;
			break;
		}
	snprintf(r->err->msg, sizeof r->err->msg, "%s: byte %llu: %s", name, (unsigned long long)off, what);
	return code;
}

/* Least-squares fit of mono_ns against ticks over the calibration points. */
static void fit_clock(fmt_file *f)
{
	double b = f->clock == 1 ? 1.0 : (f->ticks_per_ns_hdr > 0 ? 1.0 / f->ticks_per_ns_hdr : 1.0);
	if (f->ncalib >= 2) {
		double mt = 0, mm = 0;
		for (size_t i = 0; i < f->ncalib; i++) {
			mt += (double)(f->calib[i].ticks - f->calib[0].ticks);
			mm += (double)(f->calib[i].mono_ns - f->calib[0].mono_ns);
		}
		mt /= (double)f->ncalib;
		mm /= (double)f->ncalib;
		double sxy = 0, sxx = 0;
		for (size_t i = 0; i < f->ncalib; i++) {
			double x = (double)(f->calib[i].ticks - f->calib[0].ticks) - mt;
			double y = (double)(f->calib[i].mono_ns - f->calib[0].mono_ns) - mm;
			sxy += x * y;
			sxx += x * x;
		}
		/* Points closer than 1 ms apart fit worse than the measured header rate. */
		double span = (double)(f->calib[f->ncalib - 1].mono_ns - f->calib[0].mono_ns);
		if (sxx > 0 && span > 1e6 && sxy / sxx > 0)
			b = sxy / sxx;
	}
	f->fit_b = b;
	f->fit_a = (double)f->start_mono_ns - b * (double)f->start_ticks;
}

/* Whether a whole chunk starts at `off`: plausible header fields (a zstd payload opens
 * with the zstd magic), its payload inside the file and its checksum right. The search
 * is bounded by r->scan_budget, so that a file crafted full of near-headers costs a few
 * times its size, not its square. */
static int whole_chunk_at(rd *r, const uint8_t *data, size_t len, uint64_t off)
{
	if (len - off < FMT_CHUNK_HDR_LEN)
		return 0;
	const uint8_t *h = data + off;
	unsigned codec = h[1];
	uint32_t stored = cm_le32(h + 4), raw = cm_le32(h + 8);
	if (h[0] == 0 || h[2] || h[3] || codec > FMT_ZSTD || raw > FMT_MAX_RAW ||
	    stored > len - off - FMT_CHUNK_HDR_LEN)
		return 0;
	if (codec == FMT_RAW ? stored != raw : stored < 4 || memcmp(h + FMT_CHUNK_HDR_LEN, "\x28\xb5\x2f\xfd", 4) != 0)
		return 0;
	if (r->scan_budget < stored)
		return 0;
	r->scan_budget -= stored;
	return cm_crc32c(cm_crc32c(0, h, 12), h + FMT_CHUNK_HDR_LEN, stored) == cm_le32(h + 12);
}

/* The offset of the first whole chunk after byte `off`, or 0 when none follows. */
static uint64_t next_whole_chunk(rd *r, const uint8_t *data, size_t len, uint64_t off)
{
	for (uint64_t q = off + 1; q < len && len - q >= FMT_CHUNK_HDR_LEN; q++)
		if (whole_chunk_at(r, data, len, q))
			return q;
	return 0;
}

/* FMT_READ_RESYNC, after the HEADER: the damaged chunk at `off` is skipped to the next whole
 * chunk (`next`, found by the caller or here), recorded in f->skips. Returns where reading
 * goes on, or 0 when it cannot (no resync, no HEADER yet, no whole chunk after). */
static uint64_t skip_damage(rd *r, const uint8_t *data, size_t len, uint64_t off, uint64_t next, unsigned why)
{
	fmt_file *f = r->f;
	if (!(r->flags & FMT_READ_RESYNC) || !r->seen_header)
		return 0;
	if (!next && !(next = next_whole_chunk(r, data, len, off)))
		return 0;
	if (f->nskips < FMT_MAX_SKIPS)
		f->skips[f->nskips] = (fmt_skip){off, next - off, why, data[off], cm_le32(data + off + 4)};
	f->nskips++;
	f->skipped_bytes += next - off;
	return next;
}

static int read_chunks_from(rd *r, const uint8_t *data, size_t len, uint64_t start);

static int read_chunks(rd *r, const uint8_t *data, size_t len)
{
	return read_chunks_from(r, data, len, 0);
}

/* Decode the chunks from byte `start` (0: the file's start, with its preamble). With
 * r->follow a chunk not yet whole (a growing file) stops reading there, at r->stop_off. */
static int read_chunks_from(rd *r, const uint8_t *data, size_t len, uint64_t start)
{
	fmt_file *f = r->f;
	f->size = len;
	if (r->follow && len < (start ? start : FMT_PREAMBLE_LEN)) {
		r->stop_off = start;
		return 0;
	}
	if (start)
		goto chunks;
	if (len < FMT_PREAMBLE_LEN) {
		if (len >= 4 && memcmp(data, FMT_MAGIC, 4) != 0)
			return fail(r, FENNEC_EFOREIGN, 0, "not a fennec profile (wrong magic)");
		return fail(r, len ? FENNEC_ETRUNCATED : FENNEC_ENODATA, len, len ? "file ends inside the 16-byte preamble" : "empty file");
	}
	if (memcmp(data, FMT_MAGIC, 8) != 0)
		return fail(r, FENNEC_EFOREIGN, 0, "not a fennec profile (wrong magic)");
	f->major = cm_le16(data + 8);
	f->minor = cm_le16(data + 10);
	if (f->major > FMT_MAJOR)
		return fail(r, FENNEC_EVERSION, 8, "format version %u.%u is newer than this fennec reads (%u.x); upgrade fennec",
			    f->major, f->minor, FMT_MAJOR);
	if (f->major == 0)
		return fail(r, FENNEC_ECORRUPT, 8, "format version 0 is invalid");
chunks:;
	uint64_t off = start ? start : FMT_PREAMBLE_LEN;
	r->scan_budget = 4 * (uint64_t)len + (1u << 20);
	r->dropped = 0;
	while (off < len) {
		r->chunk_off = off;
		r->stop_off = off;
		if (r->follow && (len - off < FMT_CHUNK_HDR_LEN ||
				  cm_le32(data + off + 4) > len - off - FMT_CHUNK_HDR_LEN)) {
			/* not yet whole: the writer is still at it. (A corrupt length stalls the
			 * following here; the full reader says what it is.) */
			return 0;
		}
		drop_behind(r, data, off);
		if (len - off < FMT_CHUNK_HDR_LEN) {
			if (!r->seen_header)
				return fail(r, FENNEC_ETRUNCATED, off, "file ends inside the first chunk header");
			f->torn_offset = off;
			break;
		}
		const uint8_t *h = data + off;
		unsigned type = h[0], codec = h[1];
		uint32_t stored = cm_le32(h + 4), raw = cm_le32(h + 8), crc = cm_le32(h + 12);
		if (codec > FMT_ZSTD || raw > FMT_MAX_RAW || stored > FMT_MAX_RAW + (FMT_MAX_RAW >> 7) + 1024 ||
		    (codec == FMT_RAW && stored != raw) || cm_le16(h + 2) != 0) {
			uint64_t next = skip_damage(r, data, len, off, 0, FMT_SKIP_HEADER);
			if (next) {
				off = next;
				continue;
			}
			return fail(r, FENNEC_ECORRUPT, off, "bad chunk header (type %u, codec %u, stored %u, raw %u)", type, codec, stored, raw);
		}
		if (stored > len - off - FMT_CHUNK_HDR_LEN) {
			if (!r->seen_header)
				return fail(r, FENNEC_ETRUNCATED, off, "file ends inside the HEADER chunk");
			/* A torn tail has nothing whole after it. A chunk that claims more than the
			 * file holds while a whole chunk follows has a corrupt length instead. */
			uint64_t next = next_whole_chunk(r, data, len, off);
			if (!next) {
				f->torn_offset = off; /* a partial chunk: the run was cut mid-write */
				break;
			}
			if (skip_damage(r, data, len, off, next, FMT_SKIP_LENGTH)) {
				off = next;
				continue;
			}
			return fail(r, FENNEC_ECORRUPT, off,
				    "chunk (type %u) claims %u bytes, more than the %llu left in the file, yet a whole chunk "
				    "follows at byte %llu: its length is corrupt, not a torn tail (--force skips the %llu bytes to it)",
				    type, stored, (unsigned long long)(len - off - FMT_CHUNK_HDR_LEN), (unsigned long long)next,
				    (unsigned long long)(next - off));
		}
		const uint8_t *payload = h + FMT_CHUNK_HDR_LEN;
		int clock_chunk = !r->seen_header || type == FMT_STATS || type == FMT_END;
		if (r->calib_pass && !clock_chunk && !(r->flags & FMT_READ_RESYNC)) {
			off += FMT_CHUNK_HDR_LEN + stored;
			continue;
		}
		/* With FMT_READ_RESYNC the first pass checks every chunk, to skip what the second will. */
		uint32_t got = cm_crc32c(cm_crc32c(0, h, 12), payload, stored);
		if (got != crc) {
			uint64_t next = skip_damage(r, data, len, off, 0, FMT_SKIP_CHECKSUM);
			if (next) {
				off = next;
				continue;
			}
			return fail(r, FENNEC_ECHECKSUM, off, "chunk checksum mismatch (type %u, stored crc %08x, computed %08x)", type, crc, got);
		}
		if (r->calib_pass && !clock_chunk) {
			off += FMT_CHUNK_HDR_LEN + stored;
			continue;
		}
		if (!r->seen_header && type != FMT_HEADER)
			return fail(r, FENNEC_ECORRUPT, off, "first chunk is type %u, not HEADER", type);
		const uint8_t *p = payload;
		if (codec == FMT_ZSTD) {
			if (raw > r->bufcap) {
				uint8_t *b = realloc(r->buf, raw);
				if (!b)
					return fail(r, FENNEC_ENOMEM, off, "out of memory for a %u-byte chunk", raw);
				r->buf = b;
				r->bufcap = raw;
			}
			if (!r->dctx && !(r->dctx = ZSTD_createDCtx()))
				return fail(r, FENNEC_ENOMEM, off, "out of memory");
			size_t z = ZSTD_decompressDCtx(r->dctx, r->buf, raw, payload, stored);
			if (ZSTD_isError(z) || z != raw)
				return fail(r, FENNEC_ECOMPRESS, off, "chunk does not decompress to its %u bytes (%s)", raw,
					    ZSTD_isError(z) ? ZSTD_getErrorName(z) : "size differs");
			p = raw ? r->buf : payload; /* r->buf is NULL before the first chunk with a payload */
		}
		cur c = {p, p + raw, 0};
		int rc = 0;
		/* Other chunks change the tables the callback reads, or call it themselves. */
		if (r->pipe && type != FMT_EVENTS && (rc = fmt_pipe_drain(r->pipe)) != 0)
			return rc;
		switch (type) {
		case FMT_HEADER:
			if (r->seen_header)
				return fail(r, FENNEC_ECORRUPT, off, "second HEADER chunk");
			r->seen_header = 1;
			rc = decode_header(r, &c);
			if (!rc && r->header_only)
				return 0;
			if (!rc && r->follow)
				fit_clock(f); /* the header's rate, for the events of this poll */
			break;
		case FMT_SITES: rc = decode_sites(r, &c); break;
		case FMT_THREAD: rc = decode_threads(r, &c); break;
		case FMT_EVENTS: rc = decode_events(r, &c); break;
		case FMT_STATS: rc = decode_stats(r, &c, 0); break;
		case FMT_THREAD_END: rc = decode_thread_end(r, &c); break;
		case FMT_END: rc = decode_stats(r, &c, 1); break;
		case FMT_SAMPLES: rc = decode_samples(r, &c); break;
		case FMT_MODULES: rc = decode_modules(r, &c); break;
		case FMT_TASKS: rc = decode_tasks(r, &c); break;
		case FMT_HEAP: rc = decode_heap(r, &c); break;
		case FMT_HEAP2: rc = decode_heap2(r, &c); break;
		case FMT_GPU: rc = decode_gpu(r, &c); break;
		case FMT_GPUX: rc = decode_gpux(r, &c); break;
		case FMT_REACH: rc = decode_reach(r, &c); break;
		case FMT_PYCODE: rc = decode_pycode(r, &c); break;
		case FMT_SYSTEM: rc = decode_system(r, &c); break;
		case FMT_ENERGY: rc = decode_energy(r, &c); break;
		case FMT_COST: rc = decode_cost(r, &c); break;
		case FMT_SEGMENT: rc = decode_seg(r, &c); break;
		default: break; /* newer chunk type */
		}
		if (rc)
			return rc;
		off += FMT_CHUNK_HDR_LEN + stored;
		r->stop_off = off;
		if (type == FMT_END)
			break; /* anything after END is not part of this session */
	}
	if (!r->seen_header && r->follow)
		return 0;
	if (!r->seen_header)
		return fail(r, FENNEC_ETRUNCATED, off, "no HEADER chunk");
	f->cut_short = !f->has_end;
	return 0;
}

/* Two passes: the clock points first (small chunks only), so that events are delivered
 * with the final clock fit available; then everything, validated. */
static int read_two_pass(rd *r, const uint8_t *data, size_t len)
{
	fmt_file *f = r->f;
	fmt_error quiet;
	fmt_error *err = r->err;
	r->err = &quiet;
	r->calib_pass = 1;
	read_chunks(r, data, len); /* errors are reported by the second pass */
	fit_clock(f);
	double a = f->fit_a, b = f->fit_b;
	fmt_calib *calib = f->calib;
	size_t ncalib = f->ncalib, cap = f->calib_cap;
	char *path = f->path;
	fmt_file_free_records(f);
	memset(f, 0, sizeof *f);
	f->path = path;
	f->calib = calib;
	f->ncalib = ncalib;
	f->calib_cap = cap;
	f->fit_a = a;
	f->fit_b = b;
	r->err = err;
	r->calib_pass = 0;
	r->seen_header = 0;
	r->threads_read = 0;
	int rc = read_chunks(r, data, len);
	if (r->pipe) { /* what was queued before the end (or the damage) is delivered first */
		int prc = fmt_pipe_drain(r->pipe);
		if (prc)
			rc = prc;
	}
	/* The first pass checks the clock chunks only: it also took the points of intact chunks
	 * after a damaged one, where the second pass stopped. What is kept of a damaged file
	 * (with --force) ends where the reading did: its time ends at the last clock point
	 * before the damage, not at one after it. The fit keeps every point: they are whole
	 * chunks, and the events were converted with it. */
	if (rc && err->code)
		while (f->ncalib > 1 && f->calib[f->ncalib - 1].offset >= r->chunk_off)
			f->ncalib--;
	for (size_t i = 0; i < f->ncalib; i++)
		if (f->calib[i].ticks > f->last_ticks)
			f->last_ticks = f->calib[i].ticks;
	/* Samples of a flush cut short (a torn tail; with --force, a corrupt chunk) take the
	 * regions and steps read so far. */
	if (r->bt && r->fn && (rc == 0 || err->code)) {
		fmt_error keep = *err;
		int frc = bt_flush(r);
		if (rc)
			*err = keep;
		else
			rc = frc;
	}
	return rc;
}

static int read_mem_parts(const uint8_t *data, size_t len, const char *name, unsigned flags, fmt_file *f,
			  fmt_event_fn fn, void *ctx, fmt_error *err, int header_only, int mapped,
			  const seg_part *parts, uint32_t nparts);

static int read_mem(const uint8_t *data, size_t len, const char *name, unsigned flags, fmt_file *f,
		    fmt_event_fn fn, void *ctx, fmt_error *err, int header_only, int mapped)
{
	return read_mem_parts(data, len, name, flags, f, fn, ctx, err, header_only, mapped, NULL, 0);
}

static int read_mem_parts(const uint8_t *data, size_t len, const char *name, unsigned flags, fmt_file *f,
			  fmt_event_fn fn, void *ctx, fmt_error *err, int header_only, int mapped,
			  const seg_part *parts, uint32_t nparts)
{
	memset(f, 0, sizeof *f);
	memset(err, 0, sizeof *err);
	f->path = strdup(name ? name : "<memory>");
	rd r = {.f = f, .name = f->path ? f->path : "<memory>", .err = err, .fn = fn, .ctx = ctx,
		.header_only = header_only, .flags = flags, .mapped = mapped, .parts = parts, .nparts = nparts};
	/* A second core for recordings big enough to repay a thread (pipe.h). */
	if (!header_only && fn && len >= FMT_PIPE_MIN_BYTES)
		r.pipe = fmt_pipe_start(fn, ctx, f);
	int rc = header_only ? read_chunks(&r, data, len) : read_two_pass(&r, data, len);
	fmt_pipe_stop(r.pipe);
	f->read_flags = flags;
	bt_free(r.bt);
	ZSTD_freeDCtx(r.dctx);
	free(r.buf);
	return rc;
}

int fmt_read_mem(const uint8_t *data, size_t len, const char *name, fmt_file *f, fmt_event_fn fn,
		 void *ctx, fmt_error *err)
{
	return read_mem(data, len, name, 0, f, fn, ctx, err, 0, 0);
}

int fmt_read_mem_ex(const uint8_t *data, size_t len, const char *name, unsigned flags, fmt_file *f,
		    fmt_event_fn fn, void *ctx, fmt_error *err)
{
	return read_mem(data, len, name, flags, f, fn, ctx, err, 0, 0);
}

/* ---- capped recordings: the entry file and its segments read as one ----
 *
 * docs/format.md, "Capped recordings". The segments PATH.seg.K kept (contiguous numbers)
 * follow the entry file's chunks, each without its preamble; errors in them name the
 * segment file and its own offsets (seg_part). */

static int seg_num_cmp(const void *a, const void *b)
{
	uint64_t x = *(const uint64_t *)a, y = *(const uint64_t *)b;
	return x < y ? -1 : x > y;
}

/* Join `path` (its `len` bytes at `data`) and its segments. Returns 0 with *out NULL when
 * there are none, 0 with the joined buffer (malloc'd) and parts, or an error in err. */
static int seg_gather(const char *path, const uint8_t *data, size_t len, uint8_t **out, size_t *out_len,
		      seg_part **parts_out, uint32_t *nparts_out, fmt_error *err)
{
	*out = NULL;
	*parts_out = NULL;
	*nparts_out = 0;
	char dir[4096];
	snprintf(dir, sizeof dir, "%s", path);
	char *slash = strrchr(dir, '/');
	const char *base = slash ? slash + 1 : dir;
	if (slash)
		*slash = 0;
	const char *dname = slash ? (dir[0] ? dir : "/") : ".";
	DIR *d = opendir(dname);
	if (!d)
		return 0;
	uint64_t *nums = NULL;
	size_t n = 0, cap = 0;
	size_t bl = strlen(base), sl = strlen(FMT_SEG_SUFFIX);
	struct dirent *e;
	while ((e = readdir(d))) {
		const char *nm = e->d_name;
		if (strncmp(nm, base, bl) || strncmp(nm + bl, FMT_SEG_SUFFIX, sl) || !nm[bl + sl])
			continue;
		char *end;
		errno = 0;
		unsigned long long k = strtoull(nm + bl + sl, &end, 10);
		if (*end || errno || !(nm[bl + sl] >= '0' && nm[bl + sl] <= '9'))
			continue;
		if (n == cap) {
			uint64_t *nn = realloc(nums, (cap = cap ? 2 * cap : 16) * sizeof *nums);
			if (!nn) {
				free(nums);
				closedir(d);
				err->code = FENNEC_ENOMEM;
				snprintf(err->msg, sizeof err->msg, "%s: out of memory", path);
				return err->code;
			}
			nums = nn;
		}
		nums[n++] = k;
	}
	closedir(d);
	if (!n)
		return 0;
	qsort(nums, n, sizeof *nums, seg_num_cmp);
	int rc = 0;
	seg_part *parts = calloc(n, sizeof *parts);
	size_t total = len, cap_b = len + (1u << 20);
	uint8_t *buf = malloc(cap_b);
	if (!parts || !buf) {
		rc = FENNEC_ENOMEM;
		snprintf(err->msg, sizeof err->msg, "%s: out of memory", path);
		goto out;
	}
	memcpy(buf, data, len);
	for (size_t i = 0; i < n; i++) {
		char sp[4096 + 64];
		snprintf(sp, sizeof sp, "%s" FMT_SEG_SUFFIX "%llu", path, (unsigned long long)nums[i]);
		if (i && nums[i] != nums[i - 1] + 1) {
			rc = FENNEC_ECORRUPT;
			snprintf(err->msg, sizeof err->msg, "%s: segment %llu is missing (segments %llu and %llu are there): "
				 "a capped recording drops its oldest segments only", path, (unsigned long long)nums[i - 1] + 1,
				 (unsigned long long)nums[i - 1], (unsigned long long)nums[i]);
			goto out;
		}
		FILE *fp = fopen(sp, "rb");
		if (!fp) {
			/* dropped by the writer while we looked: only the oldest can be */
			if (i == 0 && errno == ENOENT)
				continue;
			rc = FENNEC_EIO;
			snprintf(err->msg, sizeof err->msg, "%.400s: %s", sp, strerror(errno));
			goto out;
		}
		uint8_t pre[FMT_PREAMBLE_LEN];
		size_t got = fread(pre, 1, sizeof pre, fp);
		if (got < FMT_PREAMBLE_LEN || memcmp(pre, FMT_MAGIC, 8) != 0) {
			fclose(fp);
			rc = got < FMT_PREAMBLE_LEN ? FENNEC_ETRUNCATED : FENNEC_EFOREIGN;
			snprintf(err->msg, sizeof err->msg, "%.400s: byte 0: %s", sp,
				 got < FMT_PREAMBLE_LEN ? "segment file ends inside its 16-byte preamble"
							: "not a fennec segment (wrong magic)");
			goto out;
		}
		parts[*nparts_out].at = total;
		parts[*nparts_out].file_off = FMT_PREAMBLE_LEN;
		parts[*nparts_out].path = strdup(sp);
		++*nparts_out;
		for (;;) {
			if (cap_b - total < (64u << 10)) {
				uint8_t *nb = realloc(buf, cap_b *= 2);
				if (!nb) {
					fclose(fp);
					rc = FENNEC_ENOMEM;
					snprintf(err->msg, sizeof err->msg, "%.400s: out of memory", sp);
					goto out;
				}
				buf = nb;
			}
			size_t k = fread(buf + total, 1, cap_b - total, fp);
			total += k;
			if (k == 0)
				break;
		}
		fclose(fp);
	}
	*out = buf;
	*out_len = total;
	*parts_out = parts;
	buf = NULL;
	parts = NULL;
out:
	if (rc) {
		err->code = rc;
		for (uint32_t i = 0; i < *nparts_out; i++)
			free((*parts_out ? *parts_out : parts)[i].path);
		*nparts_out = 0;
	}
	free(parts);
	free(buf);
	free(nums);
	return rc;
}

int fmt_is_segment_name(const char *name)
{
	const char *s = strstr(name, FMT_SEG_SUFFIX), *q;
	for (; s; s = strstr(s + 1, FMT_SEG_SUFFIX)) {
		q = s + strlen(FMT_SEG_SUFFIX);
		if (!*q)
			continue;
		while (*q >= '0' && *q <= '9')
			q++;
		if (!*q)
			return 1;
	}
	return 0;
}

/* What a file that stats as empty holds: /proc and /sys files give st_size 0 and have
 * content. Reads at most `cap` bytes (more is not a profile of this kind: *len = cap + 1).
 * Returns a malloc'd buffer (NULL with *len 0: truly empty) or NULL with errno set. */
static uint8_t *read_small(int fd, size_t cap, size_t *len)
{
	uint8_t *b = NULL;
	size_t n = 0, bcap = 0;
	*len = 0;
	for (;;) {
		if (n == bcap) {
			if (bcap > cap) {
				*len = cap + 1;
				return b;
			}
			uint8_t *nb = realloc(b, bcap = bcap ? bcap * 2 : 4096);
			if (!nb) {
				free(b);
				errno = ENOMEM;
				return NULL;
			}
			b = nb;
		}
		ssize_t k = read(fd, b + n, bcap - n);
		if (k < 0 && errno == EINTR)
			continue;
		if (k < 0) {
			int e = errno;
			free(b);
			errno = e;
			return NULL;
		}
		if (k == 0)
			break;
		n += (size_t)k;
	}
	if (!n) {
		free(b);
		b = NULL;
	}
	*len = n;
	errno = 0;
	return b;
}

static int read_path(const char *path, unsigned flags, fmt_file *f, fmt_event_fn fn, void *ctx, fmt_error *err,
		     int header_only)
{
	/* O_NONBLOCK: opening a FIFO for reading blocks until a writer comes, before the
	 * check below could refuse it; on a regular file it changes nothing. */
	int fd = open(path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0) {
		int e = errno;
		if (fd >= 0)
			close(fd);
		memset(f, 0, sizeof *f);
		memset(err, 0, sizeof *err);
		err->code = e == ENOENT ? FENNEC_ENOENT : FENNEC_EIO;
		snprintf(err->msg, sizeof err->msg, "%s: %s", path, strerror(e));
		return err->code;
	}
	if (!S_ISREG(st.st_mode)) {
		close(fd);
		memset(f, 0, sizeof *f);
		err->code = FENNEC_EINVAL;
		snprintf(err->msg, sizeof err->msg, "%s: not a regular file", path);
		return err->code;
	}
	size_t len = (size_t)st.st_size;
	const uint8_t *data = NULL;
	uint8_t *copy = NULL;
	if (!len) {
		copy = read_small(fd, 1u << 20, &len);
		if (!copy && errno) {
			int e = errno;
			close(fd);
			memset(f, 0, sizeof *f);
			err->code = e == ENOMEM ? FENNEC_ENOMEM : FENNEC_EIO;
			snprintf(err->msg, sizeof err->msg, "%s: %s", path, strerror(e));
			return err->code;
		}
		if (len > (1u << 20)) { /* a pseudo-file: no recording is written there */
			free(copy);
			close(fd);
			memset(f, 0, sizeof *f);
			err->code = FENNEC_EFOREIGN;
			snprintf(err->msg, sizeof err->msg, "%s: not a fennec profile (its size is not known ahead)", path);
			return err->code;
		}
		data = copy;
	} else {
		data = mmap(NULL, len, PROT_READ, MAP_PRIVATE, fd, 0);
		if (data == MAP_FAILED) {
			close(fd);
			memset(f, 0, sizeof *f);
			err->code = FENNEC_EIO;
			snprintf(err->msg, sizeof err->msg, "%s: cannot map file: %s", path, strerror(errno));
			return err->code;
		}
		madvise((void *)data, len, MADV_SEQUENTIAL);
	}
	close(fd);
	uint8_t *joined = NULL;
	size_t jlen = 0;
	seg_part *parts = NULL;
	uint32_t nparts = 0;
	int rc = header_only ? 0 : seg_gather(path, data ? data : (const uint8_t *)"", len, &joined, &jlen, &parts, &nparts, err);
	if (rc)
		memset(f, 0, sizeof *f);
	else if (joined)
		rc = read_mem_parts(joined, jlen, path, flags, f, fn, ctx, err, 0, 0, parts, nparts);
	else
		rc = read_mem(data ? data : (const uint8_t *)"", len, path, flags, f, fn, ctx, err, header_only, data && !copy);
	free(joined);
	for (uint32_t i = 0; i < nparts; i++)
		free(parts[i].path);
	free(parts);
	if (copy)
		free(copy);
	else if (data)
		munmap((void *)data, len);
	return rc;
}

int fmt_read(const char *path, fmt_file *f, fmt_event_fn fn, void *ctx, fmt_error *err)
{
	return read_path(path, 0, f, fn, ctx, err, 0);
}

int fmt_read_ex(const char *path, unsigned flags, fmt_file *f, fmt_event_fn fn, void *ctx, fmt_error *err)
{
	return read_path(path, flags, f, fn, ctx, err, 0);
}

int fmt_read_header(const char *path, fmt_file *f, fmt_error *err)
{
	return read_path(path, 0, f, NULL, NULL, err, 1);
}

/* Free what decoding allocated, except path and calib. */
static void fmt_file_free_records(fmt_file *f)
{
	for (uint32_t i = 0; i < f->npycode; i++) {
		free(f->pycode[i].qualname);
		free(f->pycode[i].filename);
	}
	free(f->pycode);
	f->pycode = NULL;
	f->npycode = 0;
	free(f->stride_changes);
	f->stride_changes = NULL;
	f->nstride_changes = 0;
	f->stride_changes_more = 0;
	for (uint32_t i = 0; i < f->nsites; i++) {
		free(f->sites[i].name);
		free(f->sites[i].file);
	}
	for (uint32_t i = 0; i < f->nthreads; i++)
		free(f->threads[i].name);
	for (size_t i = 0; i < f->nmodules; i++) {
		free(f->modules[i].path);
		free(f->modules[i].build_id);
		free(f->modules[i].segs);
	}
	for (size_t i = 0; i < f->ntasks; i++)
		free(f->tasks[i].name);
	for (uint32_t i = 0; i < f->nheap_stacks; i++) {
		free(f->heap_stacks[i].frames);
		free(f->heap_stacks[i].regions);
		free(f->heap_stacks[i].pyframes);
	}
	free(f->heap_stacks);
	free(f->reach);
	for (uint32_t i = 0; i < f->ngpu_devices; i++)
		free((char *)f->gpu_devices[i].name);
	free(f->gpu_devices);
	for (uint32_t i = 0; i < f->ngpu_strings; i++)
		free(f->gpu_strings[i]);
	free(f->gpu_strings);
	for (uint32_t i = 0; i < f->nenergy_domains; i++)
		free(f->energy_domains[i].name);
	free(f->energy_domains);
	free(f->modules);
	free(f->tasks);
	free(f->sites);
	free(f->threads);
	free(f->host);
	free(f->config_warnings);
	free(f->cmdline);
	free(f->exe);
}

void fmt_file_free(fmt_file *f)
{
	if (!f)
		return;
	fmt_file_free_records(f);
	free(f->calib);
	free(f->path);
	memset(f, 0, sizeof *f);
}

/* ---- following a growing file (fmt_follow_*) ---- */

struct fmt_follow {
	rd r;
	fmt_file f;
	fmt_error err;
	uint64_t off;      /* the next chunk to decode; 0: the file's start */
	dev_t dev;
	ino_t ino;
	int opened;        /* dev and ino are the file's */
	uint64_t generation; /* files seen at the path, less one (a replaced file restarts) */
	int failed;        /* a decoding error: nothing more is read of this file */
};

fmt_follow *fmt_follow_new(const char *path)
{
	fmt_follow *w = calloc(1, sizeof *w);
	if (!w || !(w->f.path = strdup(path))) {
		free(w);
		return NULL;
	}
	w->r.f = &w->f;
	w->r.name = w->f.path;
	w->r.err = &w->err;
	w->r.follow = 1;
	return w;
}

/* Start again at the file's start (a new file at the path). */
static void follow_reset(fmt_follow *w)
{
	char *path = w->f.path;
	fmt_file_free_records(&w->f);
	free(w->f.calib);
	memset(&w->f, 0, sizeof w->f);
	w->f.path = path;
	bt_free(w->r.bt);
	w->r.bt = NULL;
	w->r.seen_header = 0;
	w->off = 0;
	w->failed = 0;
	w->generation++;
}

int fmt_follow_poll(fmt_follow *w, fmt_event_fn fn, void *ctx, fmt_error *err)
{
	memset(err, 0, sizeof *err);
	int fd = open(w->f.path, O_RDONLY | O_CLOEXEC | O_NONBLOCK);
	struct stat st;
	if (fd < 0 || fstat(fd, &st) < 0 || !S_ISREG(st.st_mode)) {
		int e = fd < 0 ? errno : 0;
		if (fd >= 0)
			close(fd);
		err->code = e == ENOENT ? FENNEC_ENOENT : e ? FENNEC_EIO : FENNEC_EINVAL;
		snprintf(err->msg, sizeof err->msg, "%s: %s", w->f.path, e ? strerror(e) : "not a regular file");
		return err->code;
	}
	uint64_t len = (uint64_t)st.st_size;
	if (w->opened && (st.st_dev != w->dev || st.st_ino != w->ino || len < w->off))
		follow_reset(w); /* replaced, or truncated: another recording */
	w->dev = st.st_dev;
	w->ino = st.st_ino;
	w->opened = 1;
	if (w->failed || w->f.has_end || len <= w->off || len < FMT_PREAMBLE_LEN) {
		close(fd);
		if (w->failed)
			*err = w->err;
		return w->failed ? w->err.code : 0;
	}
	/* The whole file is mapped, and only the pages from w->off on are touched. */
	const uint8_t *data = mmap(NULL, (size_t)len, PROT_READ, MAP_PRIVATE, fd, 0);
	close(fd);
	if (data == MAP_FAILED) {
		err->code = FENNEC_EIO;
		snprintf(err->msg, sizeof err->msg, "%s: cannot map file: %s", w->f.path, strerror(errno));
		return err->code;
	}
	w->r.fn = fn;
	w->r.ctx = ctx;
	w->r.stop_off = w->off;
	memset(&w->err, 0, sizeof w->err);
	int rc = read_chunks_from(&w->r, data, (size_t)len, w->off);
	munmap((void *)data, (size_t)len);
	w->off = w->r.stop_off;
	fit_clock(&w->f);
	for (size_t i = 0; i < w->f.ncalib; i++)
		if (w->f.calib[i].ticks > w->f.last_ticks)
			w->f.last_ticks = w->f.calib[i].ticks;
	if (rc && w->err.code) {
		w->failed = 1;
		*err = w->err;
	}
	w->r.fn = NULL;
	return rc;
}

const fmt_file *fmt_follow_file(const fmt_follow *w) { return w->r.seen_header ? &w->f : NULL; }

uint64_t fmt_follow_offset(const fmt_follow *w) { return w->off; }

uint64_t fmt_follow_generation(const fmt_follow *w) { return w->generation; }

void fmt_follow_free(fmt_follow *w)
{
	if (!w)
		return;
	fmt_file_free(&w->f);
	bt_free(w->r.bt);
	ZSTD_freeDCtx(w->r.dctx);
	free(w->r.buf);
	free(w);
}

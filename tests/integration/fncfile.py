"""Reading and damaging fennec profile files (docs/format.md), for the tests and for
tests/corpus/make_corpus.py. Python 3 standard library only."""

import bisect
import struct

MAGIC = b"\x89FNC\r\n\x1a\n"
PREAMBLE_LEN = 16
CHUNK_HDR_LEN = 16

CHUNK_NAMES = {1: "HEADER", 2: "SITES", 3: "THREAD", 4: "EVENTS", 5: "STATS",
               6: "THREAD_END", 7: "END", 8: "SAMPLES", 9: "MODULES", 10: "TASKS",
               11: "HEAP", 12: "GPU", 13: "HEAP2", 14: "GPUX", 15: "REACH",
               19: "COST"}

# SAMPLES flags (docs/format.md "Samples (1.1)")
SAMPLE_KIND_MASK = 3        # 0 = on CPU, 1 = off CPU
SAMPLE_TRUNCATED = 4        # the stack was cut: at the depth limit, or where the stack copy ended
SAMPLE_EXACT_PC = 8         # frame_0 is the interrupted instruction, not a return address
SAMPLE_BY_TIME = 16         # regions and step come from the thread's events by time (1.3)
SAMPLE_PYTHON = 32          # Python frames follow the native ones (1.7)
SAMPLE_GIL = 64             # the thread held the GIL (1.7)
SAMPLE_PYCUT = 128          # the Python frames were cut (1.7)
SAMPLE_KERNEL = 256         # taken in the kernel (a system call, a page fault): the ring source (1.7)

# A minimal PNG: signature + IHDR of a 1x1 image + IEND.
PNG_BYTES = bytes.fromhex(
    "89504e470d0a1a0a0000000d49484452000000010000000108060000001f15c489"
    "0000000d4944415478da63f8cfc0f01f0005000201a8e5c2d30000000049454e44ae426082")


def _crc32c_table():
    poly = 0x82F63B78
    table = []
    for i in range(256):
        c = i
        for _ in range(8):
            c = (c >> 1) ^ poly if c & 1 else c >> 1
        table.append(c)
    return table


_TABLE = _crc32c_table()


def crc32c(data, crc=0):
    crc ^= 0xFFFFFFFF
    for b in data:
        crc = _TABLE[(crc ^ b) & 0xFF] ^ (crc >> 8)
    return crc ^ 0xFFFFFFFF


class Chunk:
    def __init__(self, offset, ctype, codec, stored_len, raw_len, crc):
        self.offset = offset          # offset of the chunk header in the file
        self.type = ctype
        self.codec = codec
        self.stored_len = stored_len
        self.raw_len = raw_len
        self.crc = crc

    @property
    def payload_offset(self):
        return self.offset + CHUNK_HDR_LEN

    @property
    def end(self):
        return self.payload_offset + self.stored_len

    @property
    def name(self):
        return CHUNK_NAMES.get(self.type, "type%d" % self.type)

    def __repr__(self):
        return "<%s @%d len %d>" % (self.name, self.offset, self.stored_len)


def parse(data):
    """Split a well-formed profile into (major, minor, [Chunk]). Raises ValueError."""
    if len(data) < PREAMBLE_LEN or data[:8] != MAGIC:
        raise ValueError("not a fennec profile")
    major, minor = struct.unpack_from("<HH", data, 8)
    chunks = []
    off = PREAMBLE_LEN
    while off + CHUNK_HDR_LEN <= len(data):
        ctype, codec, _res, stored, raw, crc = struct.unpack_from("<BBHIII", data, off)
        if off + CHUNK_HDR_LEN + stored > len(data):
            break
        chunks.append(Chunk(off, ctype, codec, stored, raw, crc))
        off += CHUNK_HDR_LEN + stored
    return major, minor, chunks


def chunk_crc(header12, payload):
    return crc32c(header12 + payload)


def make_chunk(ctype, payload, codec=0, raw_len=None):
    """A chunk with a correct CRC (codec 0: raw payload)."""
    raw_len = len(payload) if raw_len is None else raw_len
    h12 = struct.pack("<BBHII", ctype, codec, 0, len(payload), raw_len)
    return h12 + struct.pack("<I", chunk_crc(h12, payload)) + payload


def verify_crcs(data):
    """[(chunk, ok)] for every complete chunk."""
    _, _, chunks = parse(data)
    out = []
    for c in chunks:
        h12 = data[c.offset:c.offset + 12]
        payload = data[c.payload_offset:c.end]
        out.append((c, chunk_crc(h12, payload) == c.crc))
    return out


# --- damage -------------------------------------------------------------------------

def flip_payload_byte(data, chunk_index=None):
    """Flip one byte in the middle of a chunk payload that is not the last chunk.
    Returns (new_data, chunk)."""
    _, _, chunks = parse(data)
    candidates = [c for c in chunks[:-1] if c.stored_len > 0]
    if chunk_index is not None:
        c = chunks[chunk_index]
    else:
        # prefer a chunk after HEADER, in the middle of the file
        later = [c for c in candidates if c.type != 1] or candidates
        c = later[len(later) // 2]
    pos = c.payload_offset + c.stored_len // 2
    b = bytearray(data)
    b[pos] ^= 0x5A
    return bytes(b), c


def set_stored_len(data, chunk_index, stored_len):
    """The chunk's stored_len field set to stored_len (its CRC left as it was, so wrong).
    Returns (new_data, chunk)."""
    _, _, chunks = parse(data)
    c = chunks[chunk_index]
    b = bytearray(data)
    struct.pack_into("<I", b, c.offset + 4, stored_len)
    return bytes(b), c


def fix_crc(data, chunk):
    """The CRC of `chunk` (a Chunk of data's layout) recomputed over what data holds."""
    b = bytearray(data)
    h12 = bytes(b[chunk.offset:chunk.offset + 12])
    struct.pack_into("<I", b, chunk.offset + 12, chunk_crc(h12, bytes(b[chunk.payload_offset:chunk.end])))
    return bytes(b)


def set_major(data, major):
    b = bytearray(data)
    struct.pack_into("<H", b, 8, major)
    return bytes(b)


def set_minor(data, minor):
    b = bytearray(data)
    struct.pack_into("<H", b, 10, minor)
    return bytes(b)


def torn_tail(data):
    """Cut the file in the middle of a chunk after HEADER (so no END chunk remains and
    the last chunk extends past the end of the file). Returns (new_data, cut_offset)."""
    _, _, chunks = parse(data)
    # the last chunk that is not END, at least the second chunk
    body = [c for c in chunks[1:] if c.type != 7] or chunks[1:]
    c = body[-1]
    cut = c.payload_offset + max(1, c.stored_len // 2)
    return data[:cut], cut


def drop_end(data):
    """Remove the END chunk (a run cut short exactly at a chunk boundary)."""
    _, _, chunks = parse(data)
    if chunks and chunks[-1].type == 7:
        return data[:chunks[-1].offset]
    return data


def insert_unknown_chunk(data, ctype=99, payload=b"future chunk type, to be skipped"):
    """Insert a well-formed chunk of an unknown type right after HEADER."""
    _, _, chunks = parse(data)
    at = chunks[0].end
    return data[:at] + make_chunk(ctype, payload) + data[at:]


def huge_raw_len(data):
    """Rewrite the second chunk's raw_len to 1 GiB (> 64 MiB limit) with a valid CRC."""
    _, _, chunks = parse(data)
    c = chunks[1]
    b = bytearray(data)
    struct.pack_into("<I", b, c.offset + 8, 1 << 30)
    h12 = bytes(b[c.offset:c.offset + 12])
    struct.pack_into("<I", b, c.offset + 12, chunk_crc(h12, bytes(b[c.payload_offset:c.end])))
    return bytes(b), c


# --- a reference decoder (raw chunks only: record with FENNEC_COMPRESSION=0) ------------

def _varint(buf, pos):
    v = shift = 0
    while True:
        b = buf[pos]
        pos += 1
        v |= (b & 0x7F) << shift
        if not b & 0x80:
            return v, pos
        shift += 7
        if shift > 63:
            raise ValueError("varint too long")


def _unzigzag(u):
    return (u >> 1) ^ -(u & 1)


def _string(buf, pos):
    n, pos = _varint(buf, pos)
    return bytes(buf[pos:pos + n]), pos + n


def decode(data):
    """Decode a profile whose chunks are all stored raw (codec 0) into
    {"header": {key: value}, "sites": {id: (kind, name)}, "threads": {index: (tid, name)},
     "events": {index: [(type, time_ticks, operand...)]}, "end": bool,
     "samples": [sample dict, see _samples], "sample_counts": (taken, dropped, truncated)
     of the last SAMPLES chunk (cumulative) or None, "sample_chunks": n,
     "modules": [{"ticks", "path", "build_id", "bias", "segs": [(start, end, offset)]}]
     in file order, "tasks": {tid: name}, "heap": see _heap, or None, "gpu": see _gpu, or None}.
    Raises ValueError on compressed chunks or malformed data."""
    major, minor, chunks = parse(data)
    out = {"header": {}, "sites": {}, "threads": {}, "events": {}, "end": False,
           "samples": [], "sample_counts": None, "sample_chunks": 0, "modules": [],
           "tasks": {}, "heap": None, "gpu": None}
    streams = {}
    starts = {}
    for c in chunks:
        if c.codec != 0:
            raise ValueError("chunk %r is compressed (record with FENNEC_COMPRESSION=0)" % c)
        p = data[c.payload_offset:c.end]
        pos = 0
        if c.type == 1:
            while pos < len(p):
                key, pos = _varint(p, pos)
                kind = p[pos]
                pos += 1
                if kind == 0:
                    v, pos = _varint(p, pos)
                elif kind == 1:
                    v, pos = _string(p, pos)
                elif kind == 2:
                    u, pos = _varint(p, pos)
                    v = _unzigzag(u)
                elif kind == 3:
                    v = struct.unpack_from("<d", p, pos)[0]
                    pos += 8
                else:
                    raise ValueError("header kind %d" % kind)
                out["header"][key] = v
        elif c.type == 2:
            while pos < len(p):
                sid, pos = _varint(p, pos)
                kind = p[pos]
                pos += 1
                name, pos = _string(p, pos)
                _file, pos = _string(p, pos)
                _line, pos = _varint(p, pos)
                out["sites"][sid] = (kind, name.decode())
        elif c.type == 3:
            while pos < len(p):
                idx, pos = _varint(p, pos)
                tid, pos = _varint(p, pos)
                name, pos = _string(p, pos)
                st, pos = _varint(p, pos)
                out["threads"][idx] = (tid, name.decode(errors="replace"))
                starts[idx] = st
        elif c.type == 4:
            while pos < len(p):
                idx, pos = _varint(p, pos)
                n, pos = _varint(p, pos)
                streams.setdefault(idx, bytearray()).extend(p[pos:pos + n])
                pos += n
        elif c.type == 7:
            out["end"] = True
        elif c.type == 8:
            out["sample_counts"] = _samples(p, out["samples"])
            out["sample_chunks"] += 1
        elif c.type == 9:
            while pos < len(p):
                m = {}
                m["ticks"], pos = _varint(p, pos)
                path, pos = _string(p, pos)
                m["path"] = path.decode(errors="replace")
                m["build_id"], pos = _string(p, pos)
                m["bias"], pos = _varint(p, pos)
                nsegs, pos = _varint(p, pos)
                m["segs"] = []
                for _ in range(nsegs):
                    start, pos = _varint(p, pos)
                    end, pos = _varint(p, pos)
                    off, pos = _varint(p, pos)
                    m["segs"].append((start, end, off))
                out["modules"].append(m)
        elif c.type == 10:
            while pos < len(p):
                tid, pos = _varint(p, pos)
                name, pos = _string(p, pos)
                out["tasks"][tid] = name.decode(errors="replace")
        elif c.type in (11, 13):
            if out["heap"] is None:
                out["heap"] = {"counters": None, "stacks": {}, "records": []}
            (_heap if c.type == 11 else _heap2)(p, out["heap"])
        elif c.type == 15:
            if out.get("reach") is not None:
                raise ValueError("a second REACH chunk")
            out["reach"] = _reach(p, out["heap"])
        elif c.type == 17:
            out.setdefault("system", []).extend(_system(p, out))
        elif c.type == 18:
            _energy(p, out.setdefault("energy", {"domains": {}, "readings": []}))
        elif c.type in (12, 14):
            if out["gpu"] is None:
                out["gpu"] = {"prefix": None, "devices": {}, "strings": {}, "records": []}
            (_gpu if c.type == 12 else _gpux)(p, out["gpu"])
    for idx, s in streams.items():
        out["events"][idx] = _events(bytes(s))
    _by_time(out, starts)
    return out


def _by_time(out, starts):
    """Give samples flagged SAMPLE_BY_TIME their regions and step from the events, by time
    (docs/format.md "Regions and step by time"): the open regions of the latest thread of
    their tid that started by then, after every event at or before the sample; the number of
    STEP events of the file at or before it. Independent of the file-order protocol the C
    reader relies on: the whole file is known here."""
    pending = [s for s in out["samples"] if s["flags"] & SAMPLE_BY_TIME]
    if not pending:
        return
    steps = sorted(e[1] for evs in out["events"].values() for e in evs if e[0] == "S")
    changes = {}  # thread index -> ([time], [open regions after the events up to then])
    for idx, evs in out["events"].items():
        times, stacks, stack = [], [], []
        for e in evs:
            if e[0] == "B":
                stack = stack + [e[2]]
            elif e[0] == "K":
                stack = stack + list(e[2])
            elif e[0] == "E":
                stack = stack[:-1]
            else:
                continue
            times.append(e[1])
            stacks.append(stack)
        changes[idx] = (times, stacks)
    by_tid = {}
    for idx, (tid, _name) in out["threads"].items():
        by_tid.setdefault(tid, []).append(idx)
    for s in pending:
        idx = None
        for i in by_tid.get(s["tid"], []):
            if starts.get(i, 0) <= s["ticks"] and (idx is None or starts[i] >= starts[idx]):
                idx = i
        regions = []
        if idx is not None and idx in changes:
            times, stacks = changes[idx]
            k = bisect.bisect_right(times, s["ticks"])
            regions = list(stacks[k - 1]) if k else []
        s["regions"] = regions
        s["step"] = bisect.bisect_right(steps, s["ticks"])


def _samples(p, out):
    """Append the samples of one SAMPLES payload to `out` as dicts {"kind" (0 on CPU, 1 off
    CPU), "flags", "tid", "ticks", "weight", "step", "regions": [site id, outermost first],
    "frames": [address, innermost first]}. Returns (taken, dropped, truncated)."""
    taken, pos = _varint(p, 0)
    dropped, pos = _varint(p, pos)
    truncated, pos = _varint(p, pos)
    t = 0
    while pos < len(p):
        flags, pos = _varint(p, pos)  # a u8 before 1.7: the same byte below 128
        if flags & ~511:
            raise ValueError("sample flags 0x%x: reserved bits set" % flags)
        if flags & (SAMPLE_GIL | SAMPLE_PYCUT) and not flags & SAMPLE_PYTHON:
            raise ValueError("sample flags 0x%x: Python flags without Python frames" % flags)
        tid, pos = _varint(p, pos)
        dt, pos = _varint(p, pos)
        t += _unzigzag(dt)
        weight, pos = _varint(p, pos)
        step, pos = _varint(p, pos)
        n, pos = _varint(p, pos)
        regions = []
        for _ in range(n):
            sid, pos = _varint(p, pos)
            regions.append(sid)
        n, pos = _varint(p, pos)
        frames = []
        for i in range(n):
            v, pos = _varint(p, pos)
            if i == 0:
                frames.append(v)
            else:
                frames.append((frames[-1] + _unzigzag(v)) & 0xFFFFFFFFFFFFFFFF)
        py = []
        if flags & SAMPLE_PYTHON:
            n, pos = _varint(p, pos)
            for _ in range(n):
                code, pos = _varint(p, pos)
                line, pos = _varint(p, pos)
                py.append((code >> 1, line, code & 1))  # (code id, line, entry)
        if flags & SAMPLE_BY_TIME and (regions or step):
            raise ValueError("sample attributed by time carries regions or a step")
        out.append({"kind": flags & SAMPLE_KIND_MASK, "flags": flags, "tid": tid,
                    "ticks": t, "weight": weight, "step": step, "regions": regions,
                    "frames": frames, "python": py})
    return taken, dropped, truncated


HEAP_COUNTERS = ("allocs", "frees", "alloc_bytes", "live_bytes", "peak_bytes", "peak_ticks",
                 "peak_step", "peak_site", "largest_bytes", "records", "dropped", "truncated",
                 "untracked")


def _heap(p, heap):
    """Decode one HEAP payload into heap = {"counters": {name: value} (the latest chunk's),
    "stacks": {id: {"truncated", "regions", "frames" (innermost first)}}, "records": [
    ("alloc", tid, ticks, step, addr, size, stack) | ("free", tid, ticks, addr) |
    ("snap", ticks, step, live, rss, allocs, frees, alloc_bytes, reason)]}."""
    pos = 0
    counters = {}
    for name in HEAP_COUNTERS:
        counters[name], pos = _varint(p, pos)
    heap["counters"] = counters
    t = 0
    while pos < len(p):
        rtype = p[pos]
        pos += 1
        if rtype == 1:
            pos = _heap_stack(p, pos, heap)
        elif rtype == 2:
            tid, pos = _varint(p, pos)
            dt, pos = _varint(p, pos)
            t += _unzigzag(dt)
            vals = []
            for _ in range(4):
                v, pos = _varint(p, pos)
                vals.append(v)
            step, addr, size, sid = vals
            if sid not in heap["stacks"]:
                raise ValueError("HEAP allocation names undefined stack %d" % sid)
            heap["records"].append(("alloc", tid, t, step, addr, size, sid))
        elif rtype == 3:
            tid, pos = _varint(p, pos)
            dt, pos = _varint(p, pos)
            t += _unzigzag(dt)
            addr, pos = _varint(p, pos)
            heap["records"].append(("free", tid, t, addr))
        elif rtype == 4:
            dt, pos = _varint(p, pos)
            t += _unzigzag(dt)
            vals = []
            for _ in range(6):
                v, pos = _varint(p, pos)
                vals.append(v)
            reason = p[pos]
            pos += 1
            heap["records"].append(("snap", t) + tuple(vals) + (reason,))
        else:
            raise ValueError("HEAP record type %d" % rtype)


GPU_PREFIX = ("cupti_version", "clock", "offset_ns", "offset_error_ns", "flags", "records",
              "dropped", "cupti_dropped", "unknown")
GPU_DEVICE_FIELDS = ("cc_major", "cc_minor", "sm_count", "warp_size", "max_threads_per_block",
                     "max_warps_per_sm", "max_blocks_per_sm", "regs_per_sm", "regs_per_block",
                     "smem_per_sm", "smem_per_block", "memory_bytes", "clock_khz")
# Timed GPU records (docs/format.md "GPU (1.3)"): type -> (name, fields). "u8" fields are
# bytes, "t" the zigzag start delta, "d" the duration, "nvml" the present mask and values;
# every other field is a varint.
GPU_RECORDS = {
    3: ("kernel", ("device", "context", "stream", "t", "d", "name", "grid_x", "grid_y", "grid_z",
                   "block_x", "block_y", "block_z", "registers", "static_smem", "dynamic_smem",
                   "correlation")),
    4: ("memcpy", ("device", "context", "stream", "t", "d", "u8:copy_kind", "u8:src_kind",
                   "u8:dst_kind", "bytes", "correlation", "src_device", "dst_device")),
    5: ("memset", ("device", "context", "stream", "t", "d", "u8:memory_kind", "bytes", "value",
                   "correlation")),
    6: ("sync", ("u8:sync_type", "context", "stream", "t", "d", "correlation", "event")),
    7: ("api", ("u8:domain", "tid", "t", "d", "name", "cbid", "correlation", "return_value")),
    8: ("memory", ("u8:operation", "u8:memory_kind", "u8:pool", "device", "context", "stream", "t",
                   "address", "bytes", "correlation")),
    9: ("overhead", ("u8:overhead_kind", "u8:object_kind", "object_id", "t", "d")),
    10: ("nvml", ("device", "t", "nvml")),
    11: ("timer", ("name", "tid", "t", "stream", "elapsed_ns", "step")),
}
NVML_FIELDS = ("sm_pct", "mem_pct", "mem_used_bytes", "mem_total_bytes", "power_mw",
               "temperature_c", "sm_mhz", "mem_mhz", "pcie_tx_bytes_per_s", "pcie_rx_bytes_per_s")


def _gpu(p, gpu):
    """Decode one GPU payload into gpu = {"prefix": {name: value} (the latest chunk's),
    "devices": {id: {"name", "uuid", field: value}}, "strings": {id: str}, "records":
    [{"type": "kernel" | ..., field: value, "start_ns", "end_ns"}]} (names resolved into
    "name_str")."""
    pos = 0
    prefix = {}
    for name in GPU_PREFIX:
        if name == "clock":
            prefix[name] = p[pos]
            pos += 1
        else:
            prefix[name], pos = _varint(p, pos)
    prefix["offset_ns"] = _unzigzag(prefix["offset_ns"])
    gpu["prefix"] = prefix
    t = 0
    while pos < len(p):
        rtype = p[pos]
        pos += 1
        if rtype == 1:
            dev = {}
            did, pos = _varint(p, pos)
            name, pos = _string(p, pos)
            dev["name"] = name.decode(errors="replace")
            dev["uuid"], pos = _string(p, pos)
            for f in GPU_DEVICE_FIELDS:
                dev[f], pos = _varint(p, pos)
            gpu["devices"][did] = dev
            continue
        if rtype == 2:
            sid, pos = _varint(p, pos)
            s, pos = _string(p, pos)
            if sid in gpu["strings"]:
                raise ValueError("GPU string %d defined twice" % sid)
            gpu["strings"][sid] = s.decode(errors="replace")
            continue
        if rtype not in GPU_RECORDS:
            raise ValueError("GPU record type %d" % rtype)
        kind, fields = GPU_RECORDS[rtype]
        rec = {"type": kind}
        for f in fields:
            if f.startswith("u8:"):
                rec[f[3:]] = p[pos]
                pos += 1
            elif f == "t":
                u, pos = _varint(p, pos)
                t += _unzigzag(u)
                rec["start_ns"] = rec["end_ns"] = t
            elif f == "d":
                d, pos = _varint(p, pos)
                rec["end_ns"] = rec["start_ns"] + d
            elif f == "nvml":
                present, pos = _varint(p, pos)
                for i, nf in enumerate(NVML_FIELDS):
                    if present >> i & 1:
                        rec[nf], pos = _varint(p, pos)
            else:
                rec[f], pos = _varint(p, pos)
        if rec.get("name"):
            if rec["name"] not in gpu["strings"]:
                raise ValueError("GPU record names undefined string %d" % rec["name"])
            rec["name_str"] = gpu["strings"][rec["name"]]
        if kind == "timer":
            rec["end_ns"] = rec["start_ns"] + rec["elapsed_ns"]
        gpu["records"].append(rec)


# GPUX records (docs/format.md "GPU additions (1.4)"): type -> (name, fields), as
# GPU_RECORDS; "s" is a string (the message).
GPUX_RECORDS = {
    1: ("range_start", ("range_id", "tid", "t", "s")),
    2: ("range_end", ("range_id", "tid", "t")),
    3: ("mark", ("tid", "t", "s")),
    4: ("nvlink", ("device", "t", "tx_bytes", "rx_bytes")),
}


def _gpux(p, gpu):
    """Decode one GPUX payload: gpu["gpux_dropped"], and its records appended to
    gpu["records"] ({"type": "range_start" | ..., field: value, "start_ns", "text"})."""
    gpu["gpux_dropped"], pos = _varint(p, 0)
    t = 0
    while pos < len(p):
        rtype = p[pos]
        pos += 1
        if rtype not in GPUX_RECORDS:
            raise ValueError("GPUX record type %d" % rtype)
        kind, fields = GPUX_RECORDS[rtype]
        rec = {"type": kind}
        for f in fields:
            if f == "t":
                u, pos = _varint(p, pos)
                t += _unzigzag(u)
                rec["start_ns"] = rec["end_ns"] = t
            elif f == "s":
                b, pos = _string(p, pos)
                rec["text"] = b.decode(errors="replace")
            else:
                rec[f], pos = _varint(p, pos)
        gpu["records"].append(rec)


def gpux_payload(dropped=0, records=()):
    """Encode a GPUX chunk payload (the inverse of _gpux), for tests and the corpus."""
    out = bytearray(_put_varint(dropped))
    t = 0
    types = {v[0]: k for k, v in GPUX_RECORDS.items()}
    for r in records:
        rtype = types[r["type"]]
        out.append(rtype)
        for f in GPUX_RECORDS[rtype][1]:
            if f == "t":
                out += _put_varint(_zigzag(r["start_ns"] - t))
                t = r["start_ns"]
            elif f == "s":
                b = r.get("text", "").encode()
                out += _put_varint(len(b)) + b
            else:
                out += _put_varint(r.get(f, 0))
    return bytes(out)


def _put_varint(v):
    out = bytearray()
    while v >= 0x80:
        out.append((v & 0x7F) | 0x80)
        v >>= 7
    out.append(v)
    return bytes(out)


def _zigzag(v):
    return (v << 1) ^ (v >> 63)  # Python's >> is arithmetic: -1 for negative v


def gpu_payload(prefix, devices=(), strings=(), records=()):
    """Encode a GPU chunk payload: prefix {name: value} (missing: 0), devices [{"id", "name",
    "uuid" (bytes), field: value}], strings [(id, str)], records [dicts as _gpu returns them,
    with start_ns (and end_ns)]. The inverse of _gpu, for tests and the corpus."""
    out = bytearray()
    for name in GPU_PREFIX:
        v = prefix.get(name, 0)
        if name == "clock":
            out.append(v)
        elif name == "offset_ns":
            out += _put_varint(_zigzag(v))
        else:
            out += _put_varint(v)
    for d in devices:
        out.append(1)
        out += _put_varint(d["id"])
        name = d.get("name", "").encode()
        out += _put_varint(len(name)) + name
        uuid = d.get("uuid", b"")
        out += _put_varint(len(uuid)) + uuid
        for f in GPU_DEVICE_FIELDS:
            out += _put_varint(d.get(f, 0))
    for sid, s in strings:
        b = s.encode()
        out.append(2)
        out += _put_varint(sid) + _put_varint(len(b)) + b
    t = 0
    types = {v[0]: k for k, v in GPU_RECORDS.items()}
    for r in records:
        rtype = types[r["type"]]
        out.append(rtype)
        for f in GPU_RECORDS[rtype][1]:
            if f.startswith("u8:"):
                out.append(r.get(f[3:], 0))
            elif f == "t":
                out += _put_varint(_zigzag(r["start_ns"] - t))
                t = r["start_ns"]
            elif f == "d":
                out += _put_varint(r.get("end_ns", r["start_ns"]) - r["start_ns"])
            elif f == "nvml":
                present = sum(1 << i for i, nf in enumerate(NVML_FIELDS) if nf in r)
                out += _put_varint(present)
                for nf in NVML_FIELDS:
                    if nf in r:
                        out += _put_varint(r[nf])
            else:
                out += _put_varint(r.get(f, 0))
    return bytes(out)


def insert_before_end(data, chunk):
    """Insert a whole chunk (make_chunk's output) before the END chunk (or at the end)."""
    _, _, chunks = parse(data)
    at = chunks[-1].offset if chunks and chunks[-1].type == 7 else len(data)
    return data[:at] + chunk + data[at:]


def _heap_stack(p, pos, heap):
    sid, pos = _varint(p, pos)
    trunc = p[pos]
    pos += 1
    n, pos = _varint(p, pos)
    regions = []
    for _ in range(n):
        r, pos = _varint(p, pos)
        regions.append(r)
    n, pos = _varint(p, pos)
    frames = []
    for i in range(n):
        v, pos = _varint(p, pos)
        frames.append(v if i == 0 else (frames[-1] + _unzigzag(v)) & 0xFFFFFFFFFFFFFFFF)
    if sid in heap["stacks"]:
        raise ValueError("HEAP stack %d defined twice" % sid)
    heap["stacks"][sid] = {"truncated": trunc, "regions": regions, "frames": frames}
    return pos


H2_SAME, H2_TEMP, H2_LAST = 8, 16, 32


def _heap2(p, heap):
    """Decode one HEAP2 payload (format 1.3) into `heap` as _heap does, with records
    ("alloc", tid, ticks, step, None, size, stack) | ("free", tid, ticks, None, stack, size,
    temporary) | ("snap", ...) as _heap's: HEAP2 has no addresses."""
    pos = 0
    counters = {}
    for name in HEAP_COUNTERS:
        counters[name], pos = _varint(p, pos)
    heap["counters"] = counters
    shift, pos = _varint(p, pos)
    q = step = 0
    tids, cur = [], None
    cur_stack, last = {}, {}   # by thread index: current stack; latest live ALLOC (stack, size)
    while pos < len(p):
        tag = p[pos]
        pos += 1
        rtype, flags = tag & 7, tag & ~7
        if flags and rtype not in (2, 3):
            raise ValueError("HEAP2 flags 0x%x on record type %d" % (flags, rtype))
        if rtype in (2, 3) and cur is None:
            raise ValueError("HEAP2 allocation or free before any THREAD record")
        if rtype == 0:
            dq, pos = _varint(p, pos)
            q += _unzigzag(dq)
        elif rtype == 1:
            pos = _heap_stack(p, pos, heap)
        elif rtype == 6:
            step, pos = _varint(p, pos)
        elif rtype == 5:
            idx, pos = _varint(p, pos)
            if idx == len(tids):
                tid, pos = _varint(p, pos)
                tids.append(tid)
            elif idx > len(tids):
                raise ValueError("HEAP2 THREAD index %d of %d" % (idx, len(tids)))
            cur = idx
        elif rtype == 2:
            if flags & ~H2_SAME:
                raise ValueError("HEAP2 ALLOC flags 0x%x" % flags)
            size, pos = _varint(p, pos)
            if flags & H2_SAME:
                sid = cur_stack.get(cur)
            else:
                sid, pos = _varint(p, pos)
            if sid not in heap["stacks"]:
                raise ValueError("HEAP2 allocation names undefined stack %r" % sid)
            cur_stack[cur] = sid
            last[cur] = (sid, size)
            heap["records"].append(("alloc", tids[cur], q << shift, step, None, size, sid))
        elif rtype == 3:
            if flags & H2_LAST:
                if flags != H2_LAST or cur not in last:
                    raise ValueError("HEAP2 FREE LAST without a live ALLOC of the thread")
                sid, size = last.pop(cur)
                temp = True
            else:
                if flags & H2_SAME:
                    sid = cur_stack.get(cur)
                else:
                    sid, pos = _varint(p, pos)
                size, pos = _varint(p, pos)
                temp = bool(flags & H2_TEMP)
                if temp:
                    last.pop(cur, None)
            if sid not in heap["stacks"]:
                raise ValueError("HEAP2 free names undefined stack %r" % sid)
            cur_stack[cur] = sid
            heap["records"].append(("free", tids[cur], q << shift, None, sid, size, temp))
        elif rtype == 4:
            vals = []
            for _ in range(6):
                v, pos = _varint(p, pos)
                vals.append(v)
            reason = p[pos]
            pos += 1
            heap["records"].append(("snap", q << shift) + tuple(vals) + (reason,))
        else:
            raise ValueError("HEAP2 record type %d" % rtype)
    if pos != len(p):
        raise ValueError("HEAP2 record runs past the end of the chunk")


def _reach(p, heap):
    """REACH (1.6): {"status", "ns", "root_bytes", "heap_bytes", "stacks": {stack id:
    (reachable count, reachable bytes, lost count, lost bytes)}}; its stacks must be defined."""
    vals = []
    pos = 0
    for _ in range(5):
        v, pos = _varint(p, pos)
        vals.append(v)
    status, ns, roots, heapb, n = vals
    if n and status:
        raise ValueError("REACH entries with status %d" % status)
    out = {"status": status, "ns": ns, "root_bytes": roots, "heap_bytes": heapb, "stacks": {}}
    prev = 0
    for _ in range(n):
        e = []
        for _ in range(5):
            v, pos = _varint(p, pos)
            e.append(v)
        if heap is None or e[0] not in heap["stacks"] or e[0] <= prev or not (e[1] or e[3]):
            raise ValueError("REACH entry for stack %d" % e[0])
        prev = e[0]
        out["stacks"][e[0]] = tuple(e[1:])
    if pos != len(p):
        raise ValueError("REACH runs past its entries")
    return out


def module_of(dec, addr):
    """The MODULES record of a decode() result that maps `addr` (the last one in file
    order, as a later record for an overlapping range replaces an earlier one), or None."""
    found = None
    for m in dec["modules"]:
        for start, end, _off in m["segs"]:
            if start <= addr < end:
                found = m
    return found


def _events(s):
    evs = []
    pos = 0
    t = 0
    while pos < len(s):
        tag = s[pos]
        pos += 1
        typ, op = tag & 15, tag >> 4
        if typ == 1:
            sid = op
            if op == 15:
                sid, pos = _varint(s, pos)
            dt, pos = _varint(s, pos)
            t += dt
            evs.append(("B", t, sid))
        elif typ == 2:
            dt, pos = _varint(s, pos)
            t += dt
            evs.append(("E", t))
        elif typ == 3:
            dt, pos = _varint(s, pos)
            t += dt
            items = None
            if op & 2:
                items, pos = _varint(s, pos)
            evs.append(("S", t, bool(op & 1), items))
        elif typ in (4, 5, 6):
            sid, pos = _varint(s, pos)
            dt, pos = _varint(s, pos)
            t += dt
            if typ == 4:
                u, pos = _varint(s, pos)
                v = _unzigzag(u)
            else:
                v = struct.unpack_from("<d", s, pos)[0]
                pos += 8
            evs.append(("CGV"[typ - 4], t, sid, v))
        elif typ == 7:
            t, pos = _varint(s, pos)
            evs.append(("T", t))
        elif typ == 8:
            depth, pos = _varint(s, pos)
            ids = []
            for _ in range(depth):
                i, pos = _varint(s, pos)
                ids.append(i)
            evs.append(("K", t, ids))
        else:
            raise ValueError("event type %d at stream byte %d" % (typ, pos - 1))
    return evs


def region_stats(dec):
    """{path: [count, total_ticks]} from a decode() result (completed calls only)."""
    stats = {}
    for idx, evs in dec["events"].items():
        stack = []
        for e in evs:
            if e[0] == "B":
                stack.append((dec["sites"][e[2]][1], e[1]))
            elif e[0] == "K":
                stack.extend((dec["sites"][i][1], e[1]) for i in e[2])
            elif e[0] == "E" and stack:
                path = "/".join(n for n, _ in stack)
                _, t0 = stack.pop()
                st = stats.setdefault(path, [0, 0])
                st[0] += 1
                st[1] += e[1] - t0
    return stats


# SYSTEM fields by bit (docs/format.md "System metrics")
SYSTEM_FIELDS = ["cpu_user_ns", "cpu_sys_ns", "rss_bytes", "swap_bytes", "minor_faults", "major_faults",
                 "voluntary_switches", "involuntary_switches", "threads", "fds", "disk_read_bytes",
                 "disk_write_bytes", "rchar", "wchar", "net_rx_bytes", "net_tx_bytes", "machine_busy_ns",
                 "machine_idle_ns", "machine_iowait_ns", "load1_milli", "procs_running"]
SYSTEM_REASONS = ["start", "timer", "step", "final"]


def _system(p, out):
    """Decode one SYSTEM payload: out["system_taken"], and its points as dicts
    {"reason", "t_ns", "step", field: value for the fields present}."""
    out["system_taken"], pos = _varint(p, 0)
    t = 0
    points = []
    while pos < len(p):
        reason = p[pos]
        pos += 1
        if reason >= len(SYSTEM_REASONS):
            raise ValueError("SYSTEM reason %d" % reason)
        u, pos = _varint(p, pos)
        t += _unzigzag(u)
        step, pos = _varint(p, pos)
        present, pos = _varint(p, pos)
        pt = {"reason": SYSTEM_REASONS[reason], "t_ns": t, "step": step}
        for i in range(64):
            if present >> i & 1:
                v, pos = _varint(p, pos)
                if i < len(SYSTEM_FIELDS):
                    pt[SYSTEM_FIELDS[i]] = v
        points.append(pt)
    return points


def system_payload(points, taken=None):
    """Encode a SYSTEM payload (the inverse of _system)."""
    out = bytearray(_put_varint(len(points) if taken is None else taken))
    t = 0
    for pt in points:
        out.append(SYSTEM_REASONS.index(pt.get("reason", "timer")))
        d = pt["t_ns"] - t
        out += _put_varint(((d << 1) ^ (d >> 63)) & 0xFFFFFFFFFFFFFFFF)
        t = pt["t_ns"]
        out += _put_varint(pt.get("step", 0))
        present = 0
        for i, f in enumerate(SYSTEM_FIELDS):
            if f in pt:
                present |= 1 << i
        out += _put_varint(present)
        for f in SYSTEM_FIELDS:
            if f in pt:
                out += _put_varint(pt[f])
    return bytes(out)


ENERGY_KINDS = ["other", "package", "core", "uncore", "dram", "psys", "gpu"]


def _energy(p, en):
    """Decode one ENERGY payload into en["domains"] {id: (source, kind, name)} and
    en["readings"] [(id, t_ns, uj, max_uj)]."""
    pos = 0
    t = 0
    while pos < len(p):
        rtype = p[pos]
        pos += 1
        dom, pos = _varint(p, pos)
        if rtype == 1:
            src, kind = p[pos], p[pos + 1]
            name, pos = _string(p, pos + 2)
            en["domains"][dom] = (src, ENERGY_KINDS[kind], name.decode())
        elif rtype == 2:
            if dom not in en["domains"]:
                raise ValueError("ENERGY reading of undefined domain %d" % dom)
            u, pos = _varint(p, pos)
            t += _unzigzag(u)
            uj, pos = _varint(p, pos)
            mx, pos = _varint(p, pos)
            en["readings"].append((dom, t, uj, mx))
        else:
            raise ValueError("ENERGY record type %d" % rtype)


def energy_payload(domains, readings):
    """Encode an ENERGY payload: domains [(id, source, kind name, name)], then readings
    [(id, t_ns, uj, max_uj)] in time order."""
    out = bytearray()
    for dom, src, kind, name in domains:
        b = name.encode()
        out += bytes([1]) + _put_varint(dom) + bytes([src, ENERGY_KINDS.index(kind)]) + _put_varint(len(b)) + b
    t = 0
    for dom, tn, uj, mx in readings:
        d = tn - t
        out += bytes([2]) + _put_varint(dom) + _put_varint(((d << 1) ^ (d >> 63)) & 0xFFFFFFFFFFFFFFFF)
        out += _put_varint(uj) + _put_varint(mx)
        t = tn
    return bytes(out)

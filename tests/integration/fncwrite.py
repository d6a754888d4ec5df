"""Writing small fennec profile files from scratch (docs/format.md), for tests whose answer
must be known exactly: every region begin and end, step mark, CPU sample and GPU record at
a time the test chooses, with no scheduler in the way. Python 3 standard library only; the chunk and
GPU payload encoders are fncfile's.

    w = Writer(start_mono_ns=10**12, ticks_per_ns=2.0)
    main = w.thread(1234, "main")
    w.begin(main, "launch", t_ns); w.end(main, t_ns + 2 * MS); w.step(main, t_ns + 25 * MS)
    w.gpu(records, strings=[(1, "gemm")])
    open("run.fnc", "wb").write(w.data())

Times are CLOCK_MONOTONIC nanoseconds; the writer turns them into ticks of an invariant TSC
running at `ticks_per_ns` (header key 21, and an END calibration point on the same line),
so that the reader's clock fit is exercised and thread and GPU times meet on one clock."""

import struct

import fncfile

MS = 1_000_000


_varint = fncfile._put_varint


def _zigzag(v):
    return ((v << 1) ^ (v >> 63)) & 0xFFFFFFFFFFFFFFFF


def _string(s):
    b = s.encode() if isinstance(s, str) else s
    return _varint(len(b)) + b


class Writer:
    """One process's file: threads with region, step and TIME events, one GPU chunk."""

    def __init__(self, start_mono_ns=10**12, ticks_per_ns=2.0, start_ticks=7_000_000_000,
                 pid=4242, recording_id=0x5EED, exe="/synthetic/gpu_steps"):
        self.start_mono_ns = start_mono_ns
        self.ticks_per_ns = ticks_per_ns
        self.start_ticks = start_ticks
        self.pid = pid
        self.recording_id = recording_id
        self.exe = exe
        self.sites = {}      # name -> id
        self.threads = []    # [tid, name, start_ns, events bytearray, last ticks, open depth]
        self.gpu_chunks = []
        self.last_ns = start_mono_ns
        self.cpu_ns = (0, 0)            # END's user and system CPU
        self.collector_cpu_ns = None    # END's collector CPU (a 1.5 file), None: a 1.4 file
        self.samples = []    # (flags, tid, ticks, weight, frames) of CPU samples
        self.sample_depth = 64
        self.site_kinds = {}    # name -> SITES kind (0 region, 2 gauge, 3 value)
        self.extra_header = []  # (key, varint value)
        self.extra_chunks = []  # (type, payload), written before THREAD_END

    def ticks(self, ns):
        """The TSC value at CLOCK_MONOTONIC time ns (an integer: ticks_per_ns should make
        it exact, e.g. 2.0)."""
        t = self.start_ticks + (ns - self.start_mono_ns) * self.ticks_per_ns
        assert t == int(t) and t >= self.start_ticks, "ticks of %d ns: %r" % (ns, t)
        return int(t)

    def thread(self, tid, name, start_ns=None):
        """A new thread; returns its index. Its stream starts with a TIME event."""
        start_ns = self.start_mono_ns if start_ns is None else start_ns
        t = self.ticks(start_ns)
        ev = bytearray(b"\x07" + _varint(t))
        self.threads.append([tid, name, start_ns, ev, t, 0])
        return len(self.threads) - 1

    def _at(self, th, ns):
        t = self.ticks(ns)
        rec = self.threads[th]
        assert t >= rec[4], "thread %d: events out of order at %d ns" % (th, ns)
        dt = t - rec[4]
        rec[4] = t
        self.last_ns = max(self.last_ns, ns)
        return _varint(dt)

    def begin(self, th, name, ns):
        sid = self.sites.setdefault(name, len(self.sites) + 1)
        ev = self.threads[th][3]
        if sid < 15:
            ev.append(1 | sid << 4)
        else:
            ev.append(1 | 15 << 4)
            ev += _varint(sid)
        ev += self._at(th, ns)
        self.threads[th][5] += 1

    def end(self, th, ns):
        assert self.threads[th][5] > 0, "END with no open region"
        self.threads[th][3].append(2)
        self.threads[th][3] += self._at(th, ns)
        self.threads[th][5] -= 1

    def value(self, th, name, ns, v, gauge=False):
        """A VALUE (or, with gauge, a GAUGE) event of metric `name` at ns."""
        sid = self.sites.setdefault(name, len(self.sites) + 1)
        self.site_kinds[name] = 2 if gauge else 3
        ev = self.threads[th][3]
        ev.append(5 if gauge else 6)
        ev += _varint(sid) + self._at(th, ns) + struct.pack("<d", v)

    def region(self, th, name, start_ns, end_ns):
        self.begin(th, name, start_ns)
        self.end(th, end_ns)

    def step(self, th, ns):
        """A recorded step mark (STEP with s & 1)."""
        self.threads[th][3].append(3 | 1 << 4)
        self.threads[th][3] += self._at(th, ns)

    def sample(self, th, ns, frames, flags=0, weight=1):
        """A CPU sample (1 ms period, signal source) of thread th at ns: frames are addresses,
        innermost first; flags fncfile.SAMPLE_* (SAMPLE_TRUNCATED: the stack was cut, at
        the depth limit when it has sample_depth frames, else where the copy ended). No
        MODULES chunk: the frames stay unsymbolised."""
        assert frames and len(frames) <= self.sample_depth, "a sample of %d frames" % len(frames)
        self.samples.append((flags, self.threads[th][0], self.ticks(ns), weight, list(frames)))
        self.last_ns = max(self.last_ns, ns)

    def _samples_chunk(self):
        out = bytearray()
        cut = sum(1 for x in self.samples if x[0] & fncfile.SAMPLE_TRUNCATED)
        out += _varint(len(self.samples)) + _varint(0) + _varint(cut)  # taken, dropped, truncated
        prev = 0
        for flags, tid, t, weight, frames in self.samples:
            out.append(flags)
            out += _varint(tid) + _varint(_zigzag(t - prev)) + _varint(weight) + _varint(0) + _varint(0)
            prev = t
            out += _varint(len(frames)) + _varint(frames[0])
            out += b"".join(_varint(_zigzag(b - a)) for a, b in zip(frames, frames[1:]))
        return bytes(out)

    def gpu(self, records, strings=(), devices=None):
        """A GPU chunk (fncfile.gpu_payload): records with start_ns and end_ns in
        CLOCK_MONOTONIC ns (GPU clock 0). Devices default to one device 0."""
        if devices is None:
            devices = [{"id": 0, "name": "Synthetic GPU", "sm_count": 80, "warp_size": 32,
                        "memory_bytes": 16 << 30}]
        for r in records:
            self.last_ns = max(self.last_ns, r.get("end_ns", r["start_ns"]))
        self.gpu_chunks.append(fncfile.gpu_payload({"cupti_version": 130001, "records": len(records)},
                                                   devices, strings, records))

    def system(self, points, interval_ns=200 * MS, cpus=4, energy=None):
        """SYSTEM points (fncfile.system_payload: dicts with t_ns in CLOCK_MONOTONIC ns and
        the fields given) and, optionally, an ENERGY chunk (domains, readings)."""
        self.extra_header += [(34, interval_ns), (35, cpus)]
        for pt in points:
            self.last_ns = max(self.last_ns, pt["t_ns"])
        self.extra_chunks.append((17, fncfile.system_payload(points)))
        if energy:
            self.extra_chunks.append((18, fncfile.energy_payload(*energy)))

    def data(self, end_ns=None):
        """The whole file: HEADER, SITES, THREAD, EVENTS, the GPU chunks, THREAD_END, END
        (whose calibration point lies on the same clock line as the header's)."""
        end_ns = self.last_ns + MS if end_ns is None else end_ns
        h = bytearray()

        def hv(key, v):
            h.extend(_varint(key) + b"\x00" + _varint(v))

        hv(1, self.recording_id)
        hv(2, self.pid)
        hv(3, 1)
        h.extend(_varint(4) + b"\x02" + _varint(1))  # rank -1 (zigzag)
        h.extend(_varint(5) + b"\x01" + _string("synthetic-host"))
        h.extend(_varint(6) + b"\x01" + _string(self.exe))
        h.extend(_varint(7) + b"\x01" + _string(self.exe))
        hv(8, 1_700_000_000 * 10**9)
        hv(9, self.start_mono_ns)
        hv(10, self.start_ticks)
        hv(11, 0)  # invariant TSC
        hv(12, 0)
        hv(13, 0)
        hv(14, 1 << 20)
        hv(20, 10000)
        h.extend(_varint(21) + b"\x03" + struct.pack("<d", self.ticks_per_ns))
        if self.samples:
            hv(22, 1)            # cpu sampling
            hv(23, 1_000_000)    # 1 ms period
            hv(24, 0)            # perf_event task-clock raising a signal
            hv(25, self.sample_depth)
            hv(26, 1000)
        else:
            hv(22, 0)
        for key, v in self.extra_header:
            hv(key, v)
        sites = b"".join(_varint(sid) + bytes([self.site_kinds.get(name, 0)]) + _string(name) + _string("synthetic.c") + _varint(1)
                         for name, sid in self.sites.items())
        threads = b"".join(_varint(i) + _varint(tid) + _string(name) + _varint(self.ticks(st))
                           for i, (tid, name, st, _ev, _t, _d) in enumerate(self.threads))
        events = b"".join(_varint(i) + _varint(len(ev)) + bytes(ev)
                          for i, (_tid, _name, _st, ev, _t, _d) in enumerate(self.threads))
        end_t = self.ticks(end_ns)
        thread_end = b"".join(_varint(i) + _varint(end_t) for i in range(len(self.threads)))
        stats = (_varint(end_ns) + _varint(end_t) + _varint(self.cpu_ns[0]) + _varint(self.cpu_ns[1]) + _varint(1024) +
                 _varint(len(self.threads)) + _varint(len(self.threads)) +
                 b"".join(_varint(i) + _varint(0) for i in range(len(self.threads))) +
                 _varint(0) + _varint(0))  # lost bytes (src/collect/session_file.c), exit reason
        if self.collector_cpu_ns is not None:
            stats += _varint(self.collector_cpu_ns)
        out = bytearray(fncfile.MAGIC + struct.pack("<HHI", 1, 4 if self.collector_cpu_ns is None else 5, 0))
        out += fncfile.make_chunk(1, bytes(h))
        out += fncfile.make_chunk(2, sites)
        out += fncfile.make_chunk(3, threads)
        out += fncfile.make_chunk(4, events)
        if self.samples:
            out += fncfile.make_chunk(8, self._samples_chunk())
        for g in self.gpu_chunks:
            out += fncfile.make_chunk(12, g)
        for ctype, payload in self.extra_chunks:
            out += fncfile.make_chunk(ctype, payload)
        out += fncfile.make_chunk(6, thread_end)
        out += fncfile.make_chunk(7, stats)
        return bytes(out)

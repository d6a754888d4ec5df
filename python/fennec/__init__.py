"""fennec for Python: regions, steps, metrics and heap numbers, over libfennec's C API.

    import fennec

    for step in range(steps):
        with fennec.region("data_loading"):
            batch = next(loader)
        with fennec.region("forward"):
            loss = model(batch)
        fennec.value("loss", loss)
        fennec.step(items=len(batch))

Run the script under `fennec record -- python3 script.py` (CPU samples, heap profile,
everything the C library collects), or record from the script itself with
`fennec.start("run.fnc")` ... `fennec.stop()` (or `with fennec.session("run.fnc"):`).
Without a recording every call is a cheap no-op, so the calls can stay in the code.
docs/python.md is the reference.
"""

import ctypes
import functools
import importlib.machinery
import importlib.util
import json
import os
import subprocess

__all__ = ["FennecError", "start", "stop", "session", "is_running", "region", "step", "counter",
           "gauge", "value", "work", "memory_stats", "analyze", "library_path", "implementation"]


class FennecError(OSError):
    """A call of libfennec failed, or `fennec analyze` did: the message says what and where;
    `code` is the C library's error code (include/fennec.h; negative), or the command's exit
    status."""

    def __init__(self, code, message):
        super().__init__(message)
        self.code = code


def _loaded_library():
    """The path of the libfennec.so this process has loaded already (`fennec record`
    preloads it), or None."""
    try:
        with open("/proc/self/maps") as f:
            for line in f:
                path = line.split(None, 5)[-1].strip() if line.count(" ") >= 5 else ""
                if os.path.basename(path) == "libfennec.so":
                    return path
    except OSError:
        pass
    return None


def _find_library():
    path = _loaded_library()
    if path:
        return path
    env = os.environ.get("FENNEC_LIB")
    if env:
        if not os.path.isfile(env):
            raise ImportError("fennec: FENNEC_LIB=%s: no such file" % env)
        return env
    here = os.path.dirname(os.path.abspath(__file__))
    tried = [os.path.normpath(os.path.join(here, rel)) for rel in (
        "libfennec.so",                     # a copy beside the module
        "lib/libfennec.so",                 # pip install: fennec/lib beside fennec/bin/fennec
        "../../lib/libfennec.so",           # an install: PREFIX/lib/pythonX/fennec -> PREFIX/lib
        "../../build/lib/libfennec.so")]    # the source tree: python/fennec -> build/lib
    for path in tried:
        if os.path.isfile(path):
            return path
    raise ImportError("fennec: libfennec.so is not loaded and was not found (tried %s); "
                      "run under `fennec record`, or set FENNEC_LIB to its path" % ", ".join(tried))


class _Config(ctypes.Structure):
    # include/fennec.h, struct fennec_config, in order
    _fields_ = [("size", ctypes.c_uint32), ("output", ctypes.c_char_p), ("buffer_kb", ctypes.c_uint32),
                ("flush_interval_ms", ctypes.c_uint32), ("compression_level", ctypes.c_int),
                ("rank", ctypes.c_int), ("step_wait", ctypes.c_uint32), ("step_warmup", ctypes.c_uint32),
                ("step_active", ctypes.c_uint32), ("step_repeat", ctypes.c_uint32),
                ("step_fraction", ctypes.c_double), ("sample_mode", ctypes.c_int),
                ("sample_hz", ctypes.c_uint32), ("stack_depth", ctypes.c_uint32),
                ("memory_mode", ctypes.c_int), ("memory_rate", ctypes.c_uint64),
                ("memory_interval_ms", ctypes.c_uint32)]


class _MemStats(ctypes.Structure):
    # include/fennec.h, struct fennec_mem_stats
    _fields_ = [("size", ctypes.c_uint32), ("tracking", ctypes.c_int), ("heap_bytes", ctypes.c_uint64),
                ("heap_peak_bytes", ctypes.c_uint64), ("allocations", ctypes.c_uint64),
                ("frees", ctypes.c_uint64), ("allocated_bytes", ctypes.c_uint64),
                ("largest_bytes", ctypes.c_uint64), ("rss_bytes", ctypes.c_uint64),
                ("rss_peak_bytes", ctypes.c_uint64)]


library_path = _find_library()
# Calls that may wait (start, stop: the final flush) release the GIL; the others are short
# and do not block, and keep it (ctypes.PyDLL: no release and reacquire around each call).
_lib = ctypes.CDLL(library_path)
_fast = ctypes.PyDLL(library_path)


def _sig(lib, name, res, *args):
    f = getattr(lib, name)
    f.restype = res
    f.argtypes = list(args)
    return f


_strerror = _sig(_lib, "fennec_strerror", ctypes.c_char_p, ctypes.c_int)
_config_init = _sig(_lib, "fennec_config_init", None, ctypes.POINTER(_Config))
_start = _sig(_lib, "fennec_start", ctypes.c_int, ctypes.POINTER(_Config))
_stop = _sig(_lib, "fennec_stop", ctypes.c_int)
_running = _sig(_fast, "fennec_is_running", ctypes.c_int)
_intern = _sig(_fast, "fennec_intern", ctypes.c_uint32, ctypes.c_char_p)
_begin_id = _sig(_fast, "fennec_region_begin_id", None, ctypes.c_uint32)
_end = _sig(_fast, "fennec_region_end", None)
_step = _sig(_fast, "fennec_step", None)
_step_items = _sig(_fast, "fennec_step_items", None, ctypes.c_uint64)
_counter_add = _sig(_fast, "fennec_counter_add", None, ctypes.c_char_p, ctypes.c_int64)
_gauge_set = _sig(_fast, "fennec_gauge_set", None, ctypes.c_char_p, ctypes.c_double)
_value_record = _sig(_fast, "fennec_value_record", None, ctypes.c_char_p, ctypes.c_double)
_work = _sig(_fast, "fennec_region_work", None, ctypes.c_uint64, ctypes.c_uint64)
_work32 = _sig(_fast, "fennec_region_work_fp32", None, ctypes.c_uint64, ctypes.c_uint64)
_mem_stats = _sig(_lib, "fennec_memory_stats", ctypes.c_int, ctypes.POINTER(_MemStats))

_probe = _Config()
_config_init(ctypes.byref(_probe))
if _probe.size != ctypes.sizeof(_Config):
    raise ImportError("fennec: %s has a fennec_config of %d bytes, this module %d: a different version "
                      "of the library" % (library_path, _probe.size, ctypes.sizeof(_Config)))
del _probe

_EALREADY, _ENOTRUNNING = -4, -5  # include/fennec.h, FENNEC_ERRNO_MAP


def _load_c():
    """The C part (src/python/_fennec.c), built by make beside the library (../python/
    from its lib/) for this interpreter, bound to the library loaded here; None without it
    or with FENNEC_PY_CTYPES=1."""
    if os.environ.get("FENNEC_PY_CTYPES") == "1":
        return None
    here = os.path.dirname(os.path.abspath(__file__))
    libdir = os.path.dirname(os.path.realpath(library_path))
    for d in (here, os.path.join(libdir, "..", "python")):
        for suffix in importlib.machinery.EXTENSION_SUFFIXES:
            path = os.path.normpath(os.path.join(d, "_fennec" + suffix))
            if not os.path.isfile(path):
                continue
            try:
                spec = importlib.util.spec_from_file_location("fennec._fennec", path)
                mod = importlib.util.module_from_spec(spec)
                spec.loader.exec_module(mod)
                mod.bind(library_path)
                return mod
            except ImportError:
                continue
    return None


_c = _load_c()
implementation = "c" if _c else "ctypes"


def _error(rc, what):
    msg = (_strerror(rc) or b"unknown error").decode(errors="replace")
    return FennecError(rc, "%s: %s" % (what, msg))


# ---- sessions ----

_SAMPLE = {"off": 0, "cpu": 1, "wall": 2}
_MEMORY = {"off": 0, "sampled": 1, "full": 2}


def start(output=None, *, sample=None, hz=None, memory=None, memory_rate=None, stack_depth=None,
          rank=None, steps=None):
    """Record this process into `output` (default $FENNEC_OUTPUT, else fennec.fnc).

    sample: "off", "cpu" or "wall" (CPU sampling; default $FENNEC_SAMPLE, else off);
    hz: samples per second (999); memory: "off", "sampled" or "full" (needs the library
    preloaded, as `fennec record` does: the allocator is interposed from the start);
    memory_rate: sampled mode's mean bytes between samples; stack_depth: frames kept;
    rank: the distributed rank (default from RANK, SLURM_PROCID, ...); steps: a schedule
    of recorded steps, a dict with wait, warmup, active, repeat (as torch.profiler's).

    Returns True when it started, False when a recording already runs in this process
    (under `fennec record`, which started it before the script). Raises FennecError when
    the file cannot be written or a value is wrong."""
    cfg = _Config()
    _config_init(ctypes.byref(cfg))
    path = None
    if output is not None:
        path = os.fsencode(output)
        cfg.output = path
    if sample is not None:
        if sample not in _SAMPLE:
            raise ValueError("fennec.start: sample=%r: expected one of %s" % (sample, ", ".join(_SAMPLE)))
        cfg.sample_mode = _SAMPLE[sample]
    if memory is not None:
        if memory not in _MEMORY:
            raise ValueError("fennec.start: memory=%r: expected one of %s" % (memory, ", ".join(_MEMORY)))
        cfg.memory_mode = _MEMORY[memory]
    for name, v, lo in (("hz", hz, 1), ("memory_rate", memory_rate, 1), ("stack_depth", stack_depth, 1)):
        if v is not None:
            if not isinstance(v, int) or v < lo:
                raise ValueError("fennec.start: %s=%r: expected a whole number >= %d" % (name, v, lo))
            setattr(cfg, {"hz": "sample_hz"}.get(name, name), v)
    if rank is not None:
        cfg.rank = int(rank)
    if steps:
        unknown = set(steps) - {"wait", "warmup", "active", "repeat"}
        if unknown:
            raise ValueError("fennec.start: steps: unknown key%s %s" % ("s" if len(unknown) > 1 else "",
                                                                       ", ".join(sorted(unknown))))
        for k in ("wait", "warmup", "active", "repeat"):
            setattr(cfg, "step_" + k, int(steps.get(k, 0)))
    rc = _start(ctypes.byref(cfg))
    if rc == 0:
        return True
    if rc == _EALREADY:
        return False
    raise _error(rc, "fennec.start(%s)" % (os.fsdecode(path) if path else "default output"))


def stop():
    """End the recording: flush, write the end record, close the file (it happens at exit
    too). Returns False when nothing was recording."""
    rc = _stop()
    if rc == _ENOTRUNNING:
        return False
    if rc != 0:
        raise _error(rc, "fennec.stop()")
    return True


def is_running():
    """Whether this process records (started here or by `fennec record`)."""
    return bool(_running())


class session:
    """with fennec.session("run.fnc", sample="cpu"): ... records the block (start()'s
    arguments). Under `fennec record`, which records already, it leaves that recording
    alone and does not stop it."""

    def __init__(self, output=None, **options):
        self.output, self.options, self.started = output, options, False

    def __enter__(self):
        self.started = start(self.output, **self.options)
        return self

    def __exit__(self, *exc):
        if self.started:
            stop()
        return False


# ---- regions ----

_ids = {}


def _region_id(name):
    i = _ids.get(name)
    if i is None:
        i = _intern(name.encode())
        if not i:
            raise FennecError(0, "fennec.region(%r): the collector's table of names is full" % name)
        _ids[name] = i
    return i


class _RegionCtypes:
    """A region by name: a context manager, and a decorator (region())."""

    __slots__ = ("name", "_id")

    def __init__(self, name):
        if not isinstance(name, str) or not name:
            raise TypeError("fennec.region: the name must be a non-empty str, got %r" % (name,))
        self.name = name
        self._id = _region_id(name)

    def __enter__(self):
        _begin_id(self._id)
        return self

    def __exit__(self, *exc):
        _end()
        return False

    def __call__(self, fn):
        if not callable(fn):
            raise TypeError("fennec.region(%r) decorates a function, not %r" % (self.name, fn))
        rid = self._id
        begin, end = (_c.begin, _c.end) if _c else (_begin_id, _end)

        @functools.wraps(fn)
        def inner(*args, **kwargs):
            begin(rid)
            try:
                return fn(*args, **kwargs)
            finally:
                end()
        return inner

    def __repr__(self):
        return "fennec.region(%r)" % self.name


if _c:
    class _Region(_c.Region):
        """The same with entry and exit in C (src/python/_fennec.c)."""

        __slots__ = ()

        def __init__(self, name):
            if not isinstance(name, str) or not name:
                raise TypeError("fennec.region: the name must be a non-empty str, got %r" % (name,))
            super().__init__(name)

        __call__ = _RegionCtypes.__call__
else:
    _Region = _RegionCtypes


def region(name):
    """A named region of this thread's time, as a context manager or a decorator:

        with fennec.region("forward"):
            ...

        @fennec.region("loss")          # or @fennec.region: the function's qualified name
        def loss(...): ...

    Regions nest; one left by an exception is closed all the same. A region opened on one
    thread must be closed on it (asyncio: a region around an await covers whatever the
    event loop runs meanwhile). The name is interned once; a region costs two calls into
    the library."""
    if callable(name) and not isinstance(name, str):
        fn = name
        return _Region(getattr(fn, "__qualname__", None) or getattr(fn, "__name__", None) or repr(fn))(fn)
    return _Region(name)


# ---- steps and metrics ----

def step(items=None):
    """The end of one iteration (a batch); items: how many samples or tokens it processed,
    for throughput. Call from one thread, usually the training loop's."""
    if items is None:
        _step()
    else:
        _step_items(int(items))


# The C library identifies a metric by its name's address: one buffer per name, kept.
_names = {}


def _name(name):
    b = _names.get(name)
    if b is None:
        if not isinstance(name, str) or not name:
            raise TypeError("fennec: a metric's name must be a non-empty str, got %r" % (name,))
        b = _names[name] = ctypes.create_string_buffer(name.encode())
    return b


def counter(name, delta=1):
    """Add delta (a whole number) to the counter `name` (bytes read, tokens seen)."""
    _counter_add(_name(name), int(delta))


def gauge(name, level):
    """Set the gauge `name` to `level` (queue depth, learning rate)."""
    _gauge_set(_name(name), float(level))


def value(name, v):
    """Record one observation of `name` (loss, latency): the analysis gives its
    distribution."""
    _value_record(_name(name), float(v))


if _c:
    step, counter, gauge, value = _c.step, _c.counter, _c.gauge, _c.value


def work(flops, bytes, fp32=False):
    """The innermost open region did `flops` floating-point operations and moved `bytes`
    bytes (docs/roofline.md); fp32: single precision."""
    (_work32 if fp32 else _work)(int(flops), int(bytes))


# ---- memory and analysis ----

def memory_stats():
    """This process's heap and RSS now, as a dict: heap_bytes, heap_peak_bytes,
    allocations, frees, allocated_bytes, largest_bytes (exact, counted from the start,
    when the allocator is interposed: `tracking`), rss_bytes and rss_peak_bytes (always).
    Python's small objects live in pymalloc's arenas, which the heap counts as blocks of
    256 KiB (PYTHONMALLOC=malloc counts every object)."""
    s = _MemStats()
    s.size = ctypes.sizeof(s)
    rc = _mem_stats(ctypes.byref(s))
    if rc != 0:
        raise _error(rc, "fennec.memory_stats()")
    out = {k: getattr(s, k) for k, _ in _MemStats._fields_ if k != "size"}
    out["tracking"] = bool(out["tracking"])
    return out


def _cli():
    env = os.environ.get("FENNEC_CLI")
    if env:
        return env
    lib_dir = os.path.dirname(os.path.realpath(library_path))
    beside = os.path.normpath(os.path.join(lib_dir, "..", "bin", "fennec"))
    return beside if os.path.isfile(beside) else "fennec"


def analyze(path, *options):
    """`fennec analyze --format json path options...`, as a dict (docs/json.md). Raises
    FennecError with the command's message when it fails (no such file, corrupt data)."""
    cmd = [_cli(), "analyze", "--format", "json"] + [str(o) for o in options] + [os.fspath(path)]
    try:
        r = subprocess.run(cmd, stdout=subprocess.PIPE, stderr=subprocess.PIPE)
    except OSError as e:
        raise FennecError(e.errno, "fennec.analyze: cannot run %s: %s (set FENNEC_CLI)" % (cmd[0], e.strerror))
    if r.returncode != 0:
        msg = r.stderr.decode(errors="replace").strip() or "exit status %d" % r.returncode
        raise FennecError(r.returncode, "fennec.analyze(%s): %s" % (os.fspath(path), msg))
    return json.loads(r.stdout)

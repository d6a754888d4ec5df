#!/usr/bin/env python3
"""What a region costs a Python program: `with fennec.region(name):` beside the timer
context manager Python profilers offer (time.perf_counter_ns() at entry and exit, the
duration added to a dict under the name: `with profiler.profile(name)` of the profilers in
docs' seeds), contextlib.nullcontext() and an empty loop, in one process, rounds
alternating, medians. Run it with and without a recording:

    PYTHONPATH=python python3 bench/python_region.py            # no recording: the calls are no-ops
    PYTHONPATH=python build/bin/fennec record -q --sample off -o /tmp/p.fnc -- python3 bench/python_region.py

Prints ns per entry and exit pair, and each as a ratio to the timer's.
"""

import contextlib
import statistics
import sys
import time

import fennec

N = int(sys.argv[1]) if len(sys.argv) > 1 else 200000
ROUNDS = int(sys.argv[2]) if len(sys.argv) > 2 else 11


class Timer:
    """The usual pure-Python region timer: a duration per name, summed."""

    def __init__(self):
        self.totals = {}

    @contextlib.contextmanager
    def profile(self, name):
        t = time.perf_counter_ns()
        try:
            yield
        finally:
            self.totals[name] = self.totals.get(name, 0) + time.perf_counter_ns() - t


class SlotTimer:
    """The same without a generator: __enter__ and __exit__ of a class."""

    __slots__ = ("totals", "name", "t")

    def __init__(self, totals, name):
        self.totals, self.name = totals, name

    def __enter__(self):
        self.t = time.perf_counter_ns()

    def __exit__(self, *exc):
        self.totals[self.name] = self.totals.get(self.name, 0) + time.perf_counter_ns() - self.t
        return False


def loop_empty(n):
    for _ in range(n):
        pass


def loop_null(n):
    c = contextlib.nullcontext()
    for _ in range(n):
        with c:
            pass


def loop_fennec(n):
    r = fennec.region("bench")
    for _ in range(n):
        with r:
            pass


def loop_timer(n):
    p = Timer()
    for _ in range(n):
        with p.profile("bench"):
            pass


def loop_slot_timer(n):
    totals = {}
    t = SlotTimer(totals, "bench")
    for _ in range(n):
        with t:
            pass


CASES = [("empty loop", loop_empty), ("contextlib.nullcontext()", loop_null),
         ("timer class (perf_counter_ns, dict)", loop_slot_timer),
         ("@contextmanager timer (profiler.profile)", loop_timer), ("fennec.region", loop_fennec)]

times = {name: [] for name, _ in CASES}
for r in range(ROUNDS):
    order = CASES[r % len(CASES):] + CASES[:r % len(CASES)]
    for name, fn in order:
        t = time.perf_counter_ns()
        fn(N)
        times[name].append((time.perf_counter_ns() - t) / N)

base = statistics.median(times["empty loop"])
timer = statistics.median(times["@contextmanager timer (profiler.profile)"]) - base
print("python %s, %d pairs x %d rounds, recording: %s, fennec's calls: %s (FENNEC_PY_CTYPES=1: ctypes)"
      % (sys.version.split()[0], N, ROUNDS, "yes" if fennec.is_running() else "no", fennec.implementation))
print("%-42s %12s %14s" % ("", "ns a pair", "vs the timer"))
for name, _ in CASES[1:]:
    m = statistics.median(times[name]) - base
    print("%-42s %12.1f %14.2f" % (name, m, m / timer))

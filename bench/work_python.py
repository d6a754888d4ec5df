"""The pure-Python workload of bench/python_frames.py: three functions, a fixed amount of
work in calls of random length (seeded), each call timed with the thread's CPU clock (the
truth the profiles are compared with). argv: truth.json [rounds]."""
import json
import random
import sys
import time


def leaf_a(n):
    s = 0
    for i in range(n):
        s += i * i
    return s


def leaf_b(n):
    s = 0.0
    for i in range(n):
        s += i / 3.0
    return s


def leaf_c(n):
    s = 0
    for i in range(n):
        s ^= i
    return s


def loop(rounds):
    rng = random.Random(11)
    spent = {"leaf_a": 0, "leaf_b": 0, "leaf_c": 0}
    calls = (("leaf_a", leaf_a, 5), ("leaf_b", leaf_b, 3), ("leaf_c", leaf_c, 2))
    c0, w0 = time.thread_time_ns(), time.perf_counter_ns()
    for _ in range(rounds):
        for name, fn, weight in calls:
            n = rng.randint(2000, 12000) * weight
            t = time.thread_time_ns()
            fn(n)
            spent[name] += time.thread_time_ns() - t
    return spent, time.thread_time_ns() - c0, time.perf_counter_ns() - w0


spent, cpu, wall = loop(int(sys.argv[2]) if len(sys.argv) > 2 else 150)
with open(sys.argv[1], "w") as f:
    json.dump({"spent_ns": spent, "loop_cpu_ns": cpu, "loop_wall_ns": wall}, f)

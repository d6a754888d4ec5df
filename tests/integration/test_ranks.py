"""Several processes and ranks: `fennec analyze DIR` (or several files) merges the
recordings of a job and compares the ranks (docs/ranks.md, rank_imbalance in
docs/bottlenecks.md). Fixtures: mpi_ranks.c under Open MPI's mpirun (a known straggler),
steps.c run as fake ranks (the launcher's variables set by hand), pool.c (a fork-based
worker pool, one recording)."""

import json
import os
import shutil

from helpers import (BUILD, MS, SANITIZER, SLOW, Skip, analyze, analyze_raw, assert_between, assert_close, assert_eq,
                     assert_rel, assert_true, base_env, fixture, record, record_command, run, timing)


def findings(rep, kind):
    return [f for f in rep["findings"] if f["type"] == kind]


def rank_env(rank, size):
    """The environment Open MPI's mpirun gives rank `rank` of `size`."""
    return base_env({"OMPI_COMM_WORLD_RANK": str(rank), "OMPI_COMM_WORLD_SIZE": str(size)})


def by_rank(rep):
    return {r["rank"]: r for r in rep["ranks"]}


# --- naming: every rank its own file ------------------------------------------------------

def test_record_names_per_rank():
    """Under a launcher of several ranks, -o run.fnc becomes run.rank<R>.fnc (the ranks
    would otherwise truncate one file); %r, %p, %h and a directory are expanded."""
    for rank in (0, 1):
        r, _ = record("steps", 3, 5, out="out/run.fnc", env=rank_env(rank, 2), expect_rc=None)
        assert_eq(r.returncode, 0, "fennec record of rank %d" % rank)
        assert_true(os.path.exists("out/run.rank%d.fnc" % rank),
                    "rank %d wrote out/run.rank%d.fnc; out/ has %s" % (rank, rank, os.listdir("out")))
        assert_true("out/run.rank%d.fnc" % rank in r.stderr, "the summary line names the file: %r" % r.stderr)
    assert_true(not os.path.exists("out/run.fnc"), "no shared out/run.fnc")
    rep = analyze("out/run.rank1.fnc")
    assert_eq(rep["processes"][0]["rank"], 1, "the header's rank agrees with the name")
    # %r in the name: used as is
    record("steps", 3, 5, out="r%r.fnc", env=rank_env(3, 4), expect_rc=None)
    assert_true(os.path.exists("r3.fnc"), "%%r expanded to the rank: %s" % sorted(os.listdir(".")))
    # a job of one: the name unchanged
    record("steps", 3, 5, out="one.fnc", env=rank_env(0, 1))
    # a directory: fennec.fnc in it, made if missing
    record("steps", 3, 5, out="dir/", expect_rc=None)
    assert_true(os.path.exists("dir/fennec.fnc"), "-o dir/ writes dir/fennec.fnc: %s" % os.listdir("dir"))
    # %p, %h, %%
    cmd, env = record_command(fixture("steps"), [3, 5], out="p%p-%h-%%.fnc")
    r = run(cmd, env=env, check=True)
    names = [n for n in os.listdir(".") if n.startswith("p") and n.endswith("-%.fnc")]
    assert_eq(len(names), 1, "one file named p<pid>-<host>-%%.fnc (%s)" % sorted(os.listdir(".")))
    assert_true(names[0].split("-")[0][1:].isdigit(), "%%p is a number: %r" % names[0])
    cmd, env = record_command(fixture("steps"), [3, 5], out="bad%q.fnc")
    r = run(cmd, env=env)
    assert_eq(r.returncode, 2, "an unknown %% escape is refused, as a usage error")
    assert_true("%q" in r.stderr, "the message names the escape: %r" % r.stderr)


# --- fake ranks: the launcher's variables set by hand -------------------------------------

STEP_MS = {0: 10, 1: 20}  # rank 1 does twice the work in every region
FAKE_STEPS = 20


def record_fake_job(out="job/run.fnc", steps=FAKE_STEPS):
    for rank, ms in STEP_MS.items():
        record("steps", steps, ms, out=out, env=rank_env(rank, len(STEP_MS)), expect_rc=None)


@timing
def test_fake_ranks_imbalance():
    """steps.c as rank 0 (10 ms steps) and rank 1 (20 ms), 20 steps: 90 % of a step in
    regions fwd (40 %) and bwd (50 %). Work 180 vs 360 ms: imbalance 360 / 270 - 1 = 33.3 %;
    rank 1 the straggler, losing most in bwd (+100 ms); the others wait 180 ms."""
    n = FAKE_STEPS
    record_fake_job()
    rep = analyze("job")
    assert_eq(rep["summary"]["ranks"], 2, "summary.ranks")
    assert_eq(rep["summary"]["processes"], 2, "summary.processes")
    ranks = by_rank(rep)
    assert_eq(sorted(ranks), [0, 1], "ranks")
    for rank, ms in STEP_MS.items():
        r = ranks[rank]
        assert_eq(r["steps"], n, "rank %d steps" % rank)
        assert_eq(r["processes"], 1, "rank %d processes" % rank)
        # the first step also holds the start-up, which the chained deadlines take from it
        assert_close(r["work_ns"], n * ms * 0.9 * MS, 20 * MS * SLOW, "rank %d work_ns" % rank, "ns")
        assert_eq(r["comm_ns"], 0, "rank %d comm_ns (no communication region)" % rank)
        assert_rel(r["step_p50_ns"], ms * MS, 0.10, "rank %d step_p50_ns" % rank, "ns")
        # rank 0's 4 ms and 5 ms regions are close enough for start-up to swap them
        if rank == 1:
            assert_eq(r["top_region"], "bwd", "rank %d top region (50 %% of its steps)" % rank)
    b = rep["balance"]
    assert_true(b is not None, "balance of two ranks")
    assert_eq(b["basis"], "work", "balance.basis")
    assert_close(b["imbalance_pct"], 100 * (180 / 135 - 1), 5, "balance.imbalance_pct", " %")
    assert_close(b["step_imbalance_pct"], 100 * (20 / 15 - 1), 5, "balance.step_imbalance_pct", " %")
    assert_eq(b["slowest_rank"], 1, "balance.slowest_rank")
    assert_eq(b["fastest_rank"], 0, "balance.fastest_rank")
    assert_close(b["wait_ns"], n * 9 * MS, 25 * MS * SLOW, "balance.wait_ns", "ns")
    losses = {l["region"]: l for l in b["losses"]}
    assert_eq(sorted(losses), ["bwd", "fwd"], "balance.losses regions")
    excess = [l["excess_ns"] for l in b["losses"]]
    assert_eq(excess, sorted(excess, reverse=True), "balance.losses, largest first")
    assert_close(losses["bwd"]["excess_ns"], n * 5 * MS, 20 * MS * SLOW, "bwd's excess on rank 1", "ns")
    assert_close(losses["fwd"]["excess_ns"], n * 4 * MS, 20 * MS * SLOW, "fwd's excess on rank 1", "ns")
    f = findings(rep, "rank_imbalance")
    assert_eq(len(f), 1, "one rank_imbalance finding")
    f = f[0]
    assert_eq(f["severity"], "HIGH" if b["imbalance_pct"] >= 30 else "MEDIUM", "severity: HIGH from 30 %, MEDIUM from 10 %")
    assert_true("rank 1" in f["subject"], "the subject names rank 1: %r" % f["subject"])
    assert_true(b["losses"][0]["region"] in f["recommendation"] and "rank 1" in f["recommendation"],
                "the recommendation names the region and the rank: %r" % f["recommendation"])
    wall1 = ranks[1]["wall_ns"]
    assert_close(f["expected_gain_pct"], 100 * f["evidence"]["wait_ns"] / wall1, 0.01,
                 "expected gain: the others' wait over the straggler's wall time", " %")
    assert_close(f["expected_gain_pct"], 100 * n * 9 * MS / wall1, 8, "expected gain vs the known wait", " %")
    # the same from the two files named together, and from the name without its rank
    for args in (["job/run.rank0.fnc", "job/run.rank1.fnc"], ["job/run.fnc"]):
        r = analyze_raw(*args, "--format", "json")
        assert_eq(r.returncode, 0, "fennec analyze %s" % " ".join(args))
        other = json.loads(r.stdout)
        assert_eq(sorted(x["rank"] for x in other["ranks"]), [0, 1], "ranks of analyze %s" % " ".join(args))
    # the text report has the rank table and the balance
    r = analyze_raw("job")
    for words in ("Ranks", "imbalance", "slowest      rank 1", "loses time   "):
        assert_true(words in r.stdout, "the text report has %r:\n%s" % (words, r.stdout))
    # --imbalance-threshold above the imbalance: no finding
    rep = analyze("job", "--imbalance-threshold", 50)
    assert_eq(findings(rep, "rank_imbalance"), [], "no rank_imbalance under --imbalance-threshold 50")


def test_stale_rank_file_skipped():
    """A directory that also holds an older run's file of a rank keeps the newer."""
    record("steps", 3, 5, out="job/old.fnc", env=rank_env(1, 2), expect_rc=None)
    assert_true(os.path.exists("job/old.rank1.fnc"), "rank 1 of an older run: %s" % os.listdir("job"))
    record_fake_job(steps=3)
    r = analyze_raw("job", "--format", "json")
    assert_eq(r.returncode, 0, "fennec analyze job")
    rep = json.loads(r.stdout)
    assert_eq(sorted(x["rank"] for x in rep["ranks"]), [0, 1], "one recording per rank")
    assert_true(all("old" not in f for f in rep["files"]), "the older file is not analysed: %s" % rep["files"])
    assert_true(any("old.rank1.fnc" in w and "rank 1" in w for w in rep["warnings"]),
                "a warning says the older file was skipped: %s" % rep["warnings"])


def test_single_recording_has_one_rank_no_balance():
    _, path = record("steps", 5, 5)
    rep = analyze(path)
    assert_eq(len(rep["ranks"]), 1, "one rank row for one recording")
    assert_eq(rep["ranks"][0]["rank"], None, "rank null without a launcher")
    assert_eq(rep["balance"], None, "balance null for one recording")
    assert_eq(rep["summary"]["ranks"], 1, "summary.ranks")


# --- a fork-based worker pool: one recording, several processes ---------------------------

@timing
def test_pool_processes():
    """pool.c: worker i handles (i + 1) * 5 items of 20 ms of CPU time each."""
    items, item_ms = 5, 20
    r, path = record("pool", 3, items, item_ms)
    truth = json.loads(r.stdout)
    rep = analyze(path)
    procs = {p["pid"]: p for p in rep["processes"]}
    assert_eq(len(procs), 4, "the parent and three workers")
    assert_eq(rep["summary"]["ranks"], 1, "one recording")
    parent = procs[truth["parent"]]
    assert_eq(parent["origin"], "first", "the parent's origin")
    assert_eq(parent["steps"], 0, "the parent has no steps")
    for i, pid in enumerate(truth["workers"]):
        p = procs.get(pid)
        assert_true(p is not None, "worker %d (pid %d) in processes: %s" % (i, pid, sorted(procs)))
        n = (i + 1) * items
        cpu = n * item_ms * MS
        assert_eq(p["origin"], "fork", "worker %d origin" % i)
        assert_eq(p["parent_pid"], truth["parent"], "worker %d parent_pid" % i)
        assert_eq(p["steps"], n, "worker %d steps" % i)
        assert_eq(p["top_region"], "work", "worker %d top region" % i)
        assert_between(p["cpu_user_ns"] + p["cpu_sys_ns"], cpu * 0.95, cpu + 60 * MS * SLOW,
                       "worker %d CPU time" % i, "ns")
        # the region's wall time holds its CPU time, and more when workers share a core
        assert_between(p["busy_ns"], cpu * 0.97, cpu * 4 + 200 * MS * SLOW, "worker %d busy_ns" % i, "ns")
        assert_between(p["step_mean_ns"], item_ms * MS * 0.97, item_ms * MS * 4 + 40 * MS * SLOW,
                       "worker %d step_mean_ns" % i, "ns")
    assert_eq(findings(rep, "rank_imbalance"), [], "no rank_imbalance inside one recording")
    # "work" runs in the three workers only: its share is of their wall times, summed, and
    # per process of each one's (before: of the parent's wall, over 200 % for the three)
    work = [x for x in rep["regions"] if x["path"] == "work"][0]
    walls = {pid: procs[pid]["wall_ns"] for pid in truth["workers"]}
    assert_eq((work["processes"], work["share_base_ns"]), (3, sum(walls.values())), "work: processes, share base")
    assert_close(work["share_pct"], 100.0 * work["total_ns"] / work["share_base_ns"], 1e-6, "work: share_pct", " %")
    assert_true(work["share_pct"] <= 100, "work's share of the workers' time: %r" % work["share_pct"])
    by = {x["pid"]: x for x in work["by_process"]}
    assert_eq(sorted(by), sorted(truth["workers"]), "work: by_process pids")
    assert_eq(sum(x["total_ns"] for x in by.values()), work["total_ns"], "work: by_process totals add up")
    for pid, x in by.items():
        assert_close(x["share_pct"], 100.0 * x["total_ns"] / walls[pid], 1e-6, "pid %d: share of its wall" % pid, " %")
        assert_true(x["share_pct"] <= 100, "pid %d: a share of its own wall time: %r" % (pid, x))
    r = analyze_raw(path)
    for pid in truth["workers"]:
        assert_true(str(pid) in r.stdout, "the text Processes table lists worker %d" % pid)
    assert_true("share: of the wall time of the processes a region ran in" in r.stdout,
                "the text report says what the shares are of")


# --- Open MPI ------------------------------------------------------------------------------

def mpirun_command(np_):
    """mpirun for np_ ranks on this machine, or Skip with the reason."""
    mpirun = shutil.which("mpirun")
    if not mpirun:
        raise Skip("no mpirun (Debian: apt-get install openmpi-bin libopenmpi-dev)")
    if not os.path.exists(os.path.join(BUILD, "fixtures", "mpi_ranks")):
        raise Skip("mpi_ranks not built: mpicc was missing when the fixtures were built")
    cmd = [mpirun, "-np", str(np_), "--oversubscribe"]  # more ranks than cores: 2 here
    if os.geteuid() == 0:
        cmd.append("--allow-run-as-root")
    env = {}
    if not shutil.which("ssh") and not shutil.which("rsh"):
        env["OMPI_MCA_plm_rsh_agent"] = ""  # one node: no remote shell needed
    return cmd, env


def record_mpi(out, *args, np_=2):
    mpi, extra = mpirun_command(np_)
    cmd, env = record_command(fixture("mpi_ranks"), args, out=out)
    env.update(extra)
    r = run(mpi + cmd, env=env, timeout_s=180)
    assert_eq(r.returncode, 0, "mpirun fennec record: %s" % r.describe())
    return r


@timing
def test_mpi_straggler():
    """mpirun -np 2 fennec record -o out/run.fnc -- mpi_ranks 20 10 1 2: rank 1 computes
    20 ms a step, rank 0 10 ms, both update 10 ms, then an MPI_Barrier (region sync).
    Work 400 vs 600 ms: imbalance 20 %; rank 1 loses 200 ms in compute, which rank 0
    waits in sync."""
    steps, unit = 20, 10
    r = record_mpi("out/run.fnc", steps, unit, 1, 2)
    for rank in (0, 1):
        assert_true(os.path.exists("out/run.rank%d.fnc" % rank),
                    "rank %d has its own file; out/ has %s" % (rank, sorted(os.listdir("out"))))
    rep = analyze("out")
    ranks = by_rank(rep)
    assert_eq(sorted(ranks), [0, 1], "ranks from OMPI_COMM_WORLD_RANK")
    for rank, work_units in ((0, 2), (1, 3)):
        x = ranks[rank]
        assert_eq(x["steps"], steps, "rank %d steps" % rank)
        # regions end at deadlines: a preempted end overruns by a time slice
        assert_between(x["work_ns"], work_units * unit * steps * MS * 0.98,
                       work_units * unit * steps * MS * 1.5 + 60 * MS * SLOW, "rank %d work_ns" % rank, "ns")
    assert_true(ranks[0]["comm_ns"] > ranks[1]["comm_ns"], "rank 0 waits longer in sync: %r vs %r"
                % (ranks[0]["comm_ns"], ranks[1]["comm_ns"]))
    assert_eq(ranks[1]["top_region"], "compute", "rank 1's top region")
    # the barrier makes the ranks' steps equal
    assert_rel(ranks[0]["step_mean_ns"], ranks[1]["step_mean_ns"], 0.10, "step means of the two ranks", "ns")
    b = rep["balance"]
    assert_close(b["imbalance_pct"], 20, 8, "balance.imbalance_pct (known 20 %)", " %")
    assert_eq(b["slowest_rank"], 1, "balance.slowest_rank")
    assert_eq(b["losses"][0]["region"], "compute", "where rank 1 loses time")
    # one-sided: a region preempted at its end overruns its deadline
    known = unit * steps * MS
    assert_between(b["losses"][0]["excess_ns"], 0.9 * known, 1.5 * known + 20 * MS * SLOW, "compute's excess", "ns")
    f = findings(rep, "rank_imbalance")
    assert_eq(len(f), 1, "one rank_imbalance finding: %s" % [x["subject"] for x in rep["findings"]])
    f = f[0]
    assert_true("rank 1" in f["subject"], "the finding names rank 1: %r" % f["subject"])
    assert_true("compute" in f["recommendation"], "the recommendation names compute: %r" % f["recommendation"])
    assert_between(f["evidence"]["wait_ns"], 0.8 * known, 1.5 * known + 20 * MS * SLOW, "the others' wait", "ns")
    assert_close(f["expected_gain_pct"], 100 * f["evidence"]["wait_ns"] / ranks[1]["wall_ns"], 0.01,
                 "expected gain = wait / the straggler's wall time", " %")
    # `fennec analyze out/run.fnc`: the name the user gave finds the rank files
    r = analyze_raw("out/run.fnc", "--format", "json")
    assert_eq(r.returncode, 0, "fennec analyze out/run.fnc: %s" % r.describe())
    assert_eq(len(json.loads(r.stdout)["ranks"]), 2, "ranks found from out/run.fnc")


@timing
def test_mpi_balanced_no_finding():
    """The same program with every rank doing the same work: no rank_imbalance."""
    record_mpi("bal/run.fnc", 15, 10, 1, 1)
    rep = analyze("bal")
    assert_eq(len(rep["ranks"]), 2, "two ranks")
    assert_between(rep["balance"]["imbalance_pct"], 0, 5, "imbalance of a balanced job", " %")
    assert_eq(findings(rep, "rank_imbalance"), [], "no rank_imbalance on a balanced job")


# --- PyTorch DistributedDataParallel ------------------------------------------------------

def test_torch_ddp_straggler_from_samples():
    """examples/torch_ddp.py as two ranks of a DDP job on the gloo backend (launched by
    hand with torch.distributed's variables: Debian's torchrun of torch 1.13 fails under
    Python 3.11 before it starts a worker), each under fennec record. Rank 1 busy-loops
    20 ms more every step (busy(), a pure-Python loop); the all-reduce in backward makes
    the other rank wait, so the step times are equal. There are no regions: the balance
    is of the ranks' on-CPU samples inside their steps outside communication code and
    spin-waits (docs/ranks.md), which finds rank 1 and busy(). Measured: work 2.7 ms a
    step on rank 0, 19.7 ms on rank 1 (the two ranks share 2 vCPUs), busy() 17 ms a step."""
    if SANITIZER:
        raise Skip("the interpreter is not built with the sanitizer's runtime")
    if run(["/usr/bin/python3", "-c", "import torch.distributed"]).returncode != 0:
        raise Skip("PyTorch is not installed (Debian: python3-torch)")
    import socket
    import subprocess
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = s.getsockname()[1]
    root = os.path.normpath(os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", ".."))
    ex = os.path.join(root, "examples", "torch_ddp.py")
    steps, slow_ms = 30, 20
    procs = []
    for rank in (0, 1):
        env = base_env({"RANK": str(rank), "LOCAL_RANK": str(rank), "WORLD_SIZE": "2", "MASTER_ADDR": "127.0.0.1",
                        "MASTER_PORT": str(port), "PYTHONPATH": os.path.join(root, "python")})
        cmd, env = record_command("/usr/bin/python3", [ex, "--steps", steps, "--slow-rank", 1, "--slow-ms", slow_ms],
                                  out="ddp/run.fnc", env=env)
        procs.append(subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT))
    outs = [p.communicate(timeout=240)[0].decode(errors="replace") for p in procs]
    for rank, p in enumerate(procs):
        assert_eq(p.returncode, 0, "rank %d: %s" % (rank, outs[rank][-2000:]))
    rep = analyze("ddp")
    ranks = by_rank(rep)
    assert_eq(sorted(ranks), [0, 1], "ranks from RANK")
    for rank in (0, 1):
        assert_eq(ranks[rank]["steps"], steps, "rank %d steps" % rank)
    # the all-reduce every step: equal step times
    assert_rel(ranks[0]["step_mean_ns"], ranks[1]["step_mean_ns"], 0.15, "step means of the two ranks", "ns")
    b = rep["balance"]
    assert_eq(b["basis"], "samples", "balance.basis without regions")
    assert_eq(b["slowest_rank"], 1, "balance.slowest_rank")
    assert_true(b["losses"] and b["losses"][0].get("function", "").startswith("busy (torch_ddp.py:"),
                "where rank 1 loses time: %r" % b["losses"])
    # at most the 20 ms a step it busy-loops; at least half of it as CPU on 2 shared vCPUs
    wait = b["wait_ns"]
    assert_between(wait, 0.5 * steps * slow_ms * MS, 1.1 * steps * slow_ms * MS, "the other rank's wait", "ns")
    f = findings(rep, "rank_imbalance")
    assert_eq(len(f), 1, "one rank_imbalance finding: %s" % [x["subject"] for x in rep["findings"]])
    assert_true("rank 1" in f[0]["subject"] and "busy (torch_ddp.py:" in f[0]["recommendation"],
                "the finding: %r" % f[0])

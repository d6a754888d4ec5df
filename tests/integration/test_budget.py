"""The overhead budget (fennec record --overhead-budget PCT; docs/sampling.md, "The overhead
budget"): the collector measures its own cost about once a second and samples every k
periods while over the budget, each sample weighing k, so that sampled times stay whole;
the report says what changed and when, and why a run went over anyway.
Fixtures: deep_stack.c (costly samples: 400 frames), cpu_shares.c (50/30/20 % of CPU in
three leaves, measured), budget_phases.c (a malloc/free loop, whose heap wrappers cost
more than any budget, then arithmetic), offcpu.c (40 % on CPU, 60 % blocked)."""

import json

from helpers import (MS, SANITIZER, analyze, analyze_raw, assert_close, assert_eq, assert_rel, assert_true, collector,
                     fixture, record, record_command, run, skip_under, statistical)


def budget_of(rep):
    b = rep["samples"]["budget"]
    assert_true(b is not None, "a budgeted recording has samples.budget")
    return b


def truth(r):
    return json.loads(r.stdout.strip().splitlines()[-1])


def func(rep, name):
    for f in rep["functions"]:
        if f["name"] == name:
            return f
    raise AssertionError("no function %s among %s" % (name, [f["name"] for f in rep["functions"][:12]]))


@collector
def test_budget_lowers_a_costly_sampling_rate_and_keeps_the_time_whole():
    # 400-frame stacks at 4999 Hz: 15-25 % of the CPU without a budget (bench/README.md)
    opts = ("-F", "4999", "--stack-depth", "512", "--memory", "off")
    r0, p0 = record("deep_stack", 400, 3000, out="free.fnc", opts=opts)
    r, path = record("deep_stack", 400, 3000, out="budget.fnc", opts=opts + ("--overhead-budget", "1%"))
    free, rep = analyze(p0), analyze(path)
    b = budget_of(rep)
    assert_eq(b["budget_pct"], 1.0, "budget_pct")
    assert_true(b["changes"], "4999 Hz of 400-frame stacks is over a 1 %% budget: the rate was lowered; %s" % b)
    first = b["changes"][0]
    assert_true(first["at_ns"] < 1500 * MS, "the first change comes at the first look (150 ms in), not %.0f ms"
                % (first["at_ns"] / MS))
    assert_true(first["share_pct"] > 1.0, "it was made for a share over the budget: %s" % first)
    assert_true(b["final_stride"] > 1, "the run ended sampling every k > 1 periods: %s" % b)
    # the collector's own figure for its last window, and the whole run's against the same
    # run without a budget (its start, before the first look, is in the whole run's)
    assert_true(b["last_share_pct"] <= 1.5, "the last window's share %.2f %% is near the 1 %% budget"
                % b["last_share_pct"])
    with_b, without = rep["summary"]["overhead_pct"], free["summary"]["overhead_pct"]
    # a third; under a sanitizer a half: the start, 0.4 s at 4999 Hz before the first look,
    # is 5-15x slower there and weighs more of a 3 s run (TSan: 12.9 % against 37.7 %)
    cut = 2 if SANITIZER else 3
    assert_true(with_b < without / cut, "the budget cut fennec's cost: %.2f %% with it, %.2f %% without"
                % (with_b, without))
    # each sample weighs its stride: the sampled CPU time is still the program's
    s = rep["samples"]
    assert_rel(s["cpu_weight"] * s["period_ns"], truth(r)["cpu_ns"], 0.12, "sampled CPU time (weights x period)",
               " ns")
    assert_true(s["count"] * 3 < s["cpu_weight"], "fewer samples than periods: %d samples weigh %d"
                % (s["count"], s["cpu_weight"]))
    text = analyze_raw(path)
    assert_true("budget       1% of the program's CPU:" in text.stdout and " Hz from " in text.stdout,
                "the text report lists the changes\n  " + text.describe())


@statistical
def test_budget_keeps_shares_unbiased():
    r, path = record("cpu_shares", 6000, opts=("-F", "4999", "--overhead-budget", "1", "--memory", "off"))
    t, rep = truth(r), analyze(path)
    assert_true(budget_of(rep)["changes"], "4999 Hz is over 1 % here too")
    names = ("work_a", "work_b", "work_c")
    got = {n: func(rep, n)["self_samples"] for n in names}
    inside, true_in = sum(got.values()), sum(t[n + "_ns"] for n in names)
    assert_true(inside >= 300, "a few hundred samples' weight at least: %s" % got)
    for n in names:
        # a few hundred samples, not 6000: 6 points is about 3.5 sigma at a share of one half
        assert_close(100.0 * got[n] / inside, 100.0 * t[n + "_ns"] / true_in, 6.0, "%s share of the weight" % n,
                     " %")


def test_budget_raises_the_rate_again_when_the_cost_falls():
    skip_under("asan", "the heap calibration is off under ASan (its allocator is not glibc's): the first "
               "phase's wrapper cost is not counted, so nothing drives the rate down")
    r, path = record("budget_phases", 2500, 3000, opts=("--overhead-budget", "1%"))
    t, rep = truth(r), analyze(path)
    ch = budget_of(rep)["changes"]
    start = t["compute_start_ns"]
    # a look judges the second before it: the one that reaches the floor may come just
    # after the phase's end, the ones that raise the rate a look or two into the second
    low = [i for i, c in enumerate(ch) if c["stride"] >= 50]
    assert_true(low and ch[low[0]]["at_ns"] < start + 1200 * MS,
                "the heap wrappers' 10-30 %% drive sampling to its floor (10 Hz, stride 99) in the first phase "
                "(it ended %.0f ms in): %s" % (start / MS, ch))
    later = [c for c in ch[low[0] + 1:] if c["at_ns"] > start]
    assert_true(later and later[-1]["stride"] < ch[low[0]]["stride"] / 2,
                "the arithmetic costs fennec little: the rate rises again after %.0f ms: %s" % (start / MS, ch))
    assert_rel(func(rep, "compute_phase")["total_samples"] * rep["samples"]["period_ns"], t["compute_ns"], 0.15,
               "compute_phase's sampled CPU time, strides of both phases weighed", " ns")
    w = " ".join(rep["warnings"])
    assert_true("over the --overhead-budget of 1%" in w and "the heap wrappers alone cost" in w,
                "the report says the heap wrappers, which the budget does not lower, went over: %s" % w)


def test_budget_changes_nothing_when_fennec_is_cheap():
    r, path = record("cpu_shares", 1500, opts=("-F", "99", "--overhead-budget", "5%", "--memory", "off"))
    rep = analyze(path)
    b = budget_of(rep)
    assert_eq(b["changes"], [], "99 Hz is far under 5 %: no change")
    assert_eq(b["final_stride"], 1, "final_stride")
    assert_true(0 < b["last_share_pct"] < 5, "the last look measured a share: %s" % b)
    text = analyze_raw(path).stdout
    assert_true("budget       5% of the program's CPU: no change needed" in text, text)
    assert_true(not any("overhead-budget" in x for x in rep["warnings"]), rep["warnings"])


@statistical
def test_budget_in_wall_mode_keeps_on_and_off_cpu_shares():
    # 4999 Hz of wall samples cost 30-50 % here; 5 % leaves a few hundred Hz. The periods
    # the budget sets are near the program's 100 ms cycles only at its floor, where the
    # sampler's jittered intervals keep the phases apart (sample_wall.c, wall_main).
    _, path = record("offcpu", 60, 100, opts=("--sample", "wall", "-F", "4999", "--overhead-budget", "5%"))
    rep = analyze(path)
    assert_true(budget_of(rep)["changes"], "wall mode at 4999 Hz is over 5 %")
    on = func(rep, "compute_part")["total_samples"]
    off = sum(f["total_samples"] for f in rep["offcpu_functions"] if f["name"].startswith("block_"))
    # the main thread's time: 40 % computing, 60 % in six blocking calls
    assert_close(100.0 * on / (on + off), 40.0, 8.0, "compute_part's share of the main thread's weight", " %")


def test_budget_bad_values_are_refused():
    for v in ("0", "51", "abc", "1%%", "-1", "", "1e1"):
        cmd, env = record_command(fixture("empty"), [], opts=("--overhead-budget", v))
        r = run(cmd, env=env)
        assert_eq(r.returncode, 2, "--overhead-budget %r: a usage error\n  %s" % (v, r.describe()))
        assert_true("--overhead-budget needs a percentage from 0.01 to 50" in r.stderr, r.describe())
    cmd, env = record_command(fixture("empty"), [], opts=("--overhead-budget", "1", "--sample", "off"))
    r = run(cmd, env=env)
    assert_eq(r.returncode, 2, "--overhead-budget with --sample off\n  " + r.describe())
    assert_true("not with --sample off" in r.stderr, r.describe())
    # the variable set by hand: the collector says what it did instead
    env = dict(env, FENNEC_OVERHEAD_BUDGET="lots")
    cmd, _ = record_command(fixture("cpu_shares"), [200], out="env.fnc")
    r = run(cmd, env=env)
    assert_eq(r.returncode, 0, r.describe())
    rep = analyze("env.fnc")
    assert_eq(rep["samples"]["budget"], None, "no budget from a bad FENNEC_OVERHEAD_BUDGET")
    assert_true(any("FENNEC_OVERHEAD_BUDGET=lots" in w for w in rep["warnings"]), rep["warnings"])

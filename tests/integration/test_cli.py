"""The CLI's plumbing: default output name, FENNEC_OUTPUT, usage errors."""

import os

from helpers import (analyze, analyze_raw, assert_clean_error, assert_eq, assert_true,
                     base_env, collector, fennec_bin, fixture, libfennec, record, region, run)


def test_default_output_name():
    r, path = record("nested", 100, out=None)
    assert_eq(os.path.basename(path), "fennec.fnc", "default output")
    assert_eq(region(analyze(path), "phase_a")["count"], 10, "phase_a count")


@collector
def test_autostart_env_without_record():
    # the collector alone, started by the environment; FENNEC_OUTPUT names the file
    env = base_env({"FENNEC_AUTOSTART": "1", "FENNEC_OUTPUT": "env.fnc"})
    env["LD_PRELOAD"] = libfennec()
    r = run([fixture("nested"), "200"], env=env)
    assert_eq(r.returncode, 0, "nested exit status")
    assert_true(os.path.exists("env.fnc"), "FENNEC_OUTPUT=env.fnc: no env.fnc written")
    rep = analyze("env.fnc")
    assert_eq(region(rep, "phase_a")["count"], 10, "phase_a count")
    assert_eq(region(rep, "phase_a/inner_x")["count"], 10, "phase_a/inner_x count")


def test_analyze_missing_file():
    r = analyze_raw("does-not-exist.fnc")
    assert_clean_error(r, "does-not-exist.fnc")


def test_record_usage_errors():
    r = run([fennec_bin(), "record"])
    assert_true(0 < r.returncode < 128, "fennec record with no program: expected a usage "
                "error, got %s" % r.describe())
    r = run([fennec_bin(), "record", "-o", "x.fnc", "--", "./no-such-program"])
    assert_true(0 < r.returncode < 128, "fennec record of a missing program: expected an "
                "error exit, got %s" % r.describe())
    assert_true("no-such-program" in r.stderr, "error should name the program:\n  %s"
                % r.describe())
    r = run([fennec_bin(), "frobnicate"])
    assert_true(0 < r.returncode < 128, "unknown subcommand: expected an error exit, got %s"
                % r.describe())


def test_analyze_bad_format_option():
    r, path = record("empty")
    r = analyze_raw(path, "--format", "yaml")
    assert_true(0 < r.returncode < 128, "--format yaml: expected an error exit, got %s"
                % r.describe())

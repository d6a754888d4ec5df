"""The CLI's plumbing: default output name, FENNEC_OUTPUT, usage errors."""

import os
import subprocess

from helpers import (analyze, analyze_raw, assert_clean_error, assert_eq, assert_true,
                     base_env, collector, fennec_bin, fixture, libfennec, record, record_command, region, run, Skip,
                     SANITIZER, REPO, TSAN_FORK, skip_under)


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


def test_long_options_take_their_value_after_an_equals_sign():
    """--name=value reads as --name value in every command. An option without a value
    refuses one given with '=' (--quiet=1), and --memory-mmap's value stays optional.
    The sanitizer builds do not interpose malloc: there the memory options have no
    section to show."""
    import json
    r, path = record("mem_leaks", 1000, opts=["--sample=off", "--memory=full", "--memory-interval=20",
                                          "--memory-mmap=4096", "--output=eq.fnc"], out="eq.fnc")
    spaced = run([fennec_bin(), "analyze", path, "--format", "json"])
    joined = run([fennec_bin(), "analyze", path, "--format=json", "--hot-threshold=10"])
    assert_eq(joined.returncode, 0, "analyze --format=json: " + joined.describe())
    rep = json.loads(joined.stdout)
    assert_eq(rep, json.loads(spaced.stdout), "the same analysis either way")
    assert_eq(rep["samples"]["count"], 0, "--sample=off")
    if not SANITIZER:
        assert_eq((rep["memory"]["mode"], rep["memory"]["mmap_min_bytes"]), ("full", 4096),
                  "--memory=full --memory-mmap=4096")
    cmds = [["analyze", path, "--top=5"], ["export", path, "--format=chrome-trace", "--output=t.json"],
            ["compare", path, path, "--format=json"]]
    if not SANITIZER:
        cmds += [["export", path, "--format=folded", "--memory=leaked", "--output=m.folded"],
                 ["plot", path, "--kind=memory", "--output=m.svg"]]
    for cmd in cmds:
        r = run([fennec_bin()] + cmd)
        assert_eq(r.returncode, 0, "fennec %s: %s" % (" ".join(cmd), r.describe()))
    for out in ("t.json",) + (() if SANITIZER else ("m.folded", "m.svg")):
        assert_true(os.path.getsize(out) > 0, "%s written" % out)
    for cmd, opt in ((["record", "--quiet=1", "--", "true"], "--quiet"), (["analyze", path, "--color=1"], "--color")):
        r = run([fennec_bin()] + cmd)
        assert_eq(r.returncode, 2, "fennec %s: a usage error" % " ".join(cmd))
        assert_true(opt + " takes no value" in r.stderr, "the error names the option: %s" % r.describe())


def test_output_that_is_not_a_regular_file():
    """-o through a symbolic link writes the file it points to and keeps the link; -o
    /dev/null writes nothing anywhere and leaves /dev/null a device (the output used to be
    written beside it, /dev/null.tmp.PID, and renamed over it: as root that replaced the
    device with a file, as anyone else it failed); -o to a regular file still replaces it
    whole. The link comes first: a regression fails there, before touching /dev/null."""
    import stat
    _, path = record("nested", 100)
    with open("target.json", "w") as f:
        f.write("old")
    os.symlink("target.json", "link.json")
    r = run([fennec_bin(), "analyze", path, "--format", "json", "-o", "link.json"])
    assert_eq(r.returncode, 0, "analyze -o link.json: %s" % r.describe())
    assert_true(os.path.islink("link.json"), "the link is still a link")
    with open("target.json") as f:
        doc = f.read()
    assert_true(doc.startswith("{") and '"summary"' in doc, "the link's target holds the report: %r" % doc[:80])
    r = run([fennec_bin(), "analyze", path, "--format", "json", "-o", "target.json"])
    assert_eq((r.returncode, os.path.islink("target.json")), (0, False), "a regular file: replaced")
    before = os.stat("/dev/null")
    assert_true(stat.S_ISCHR(before.st_mode), "/dev/null is a character device to begin with")
    for fmt in ("text", "json"):
        r = run([fennec_bin(), "analyze", path, "--format", fmt, "-o", "/dev/null"])
        assert_eq(r.returncode, 0, "analyze -o /dev/null (%s): %s" % (fmt, r.describe()))
    r = run([fennec_bin(), "export", path, "--format", "folded", "-o", "/dev/null"])
    assert_eq(r.returncode, 0, "export -o /dev/null: %s" % r.describe())
    after = os.stat("/dev/null")
    assert_true(stat.S_ISCHR(after.st_mode) and after.st_rdev == before.st_rdev,
                "/dev/null is still the same device")
    assert_eq([n for n in os.listdir("/dev") if n.startswith("null.tmp")], [], "no temporary file left in /dev")


def test_record_refuses_an_output_that_is_not_a_regular_file():
    """fennec record -o to a FIFO, a symbolic link or /dev/null: refused before the program
    starts, with the reason, and the path left as it was (the recorder used to remove the
    path before recording: as root, -o /dev/null replaced the device with the recording).
    The FIFO comes first: a regression fails there, before touching /dev/null."""
    import stat
    os.mkfifo("out.fifo")
    os.symlink("elsewhere.fnc", "link.fnc")
    for out in ("out.fifo", "link.fnc", "/dev/null"):
        before = os.lstat(out)
        r = run([fennec_bin(), "record", "-o", out, "--", fixture("empty")], timeout_s=20)
        assert_true(r.returncode != 0 and "not a regular file" in r.stderr and out in r.stderr,
                    "record -o %s: %s" % (out, r.describe()))
        after = os.lstat(out)
        assert_eq((stat.S_IFMT(after.st_mode), after.st_ino, after.st_rdev),
                  (stat.S_IFMT(before.st_mode), before.st_ino, before.st_rdev), "%s left as it was" % out)
    assert_true(not os.path.exists("elsewhere.fnc"), "nothing written through the link")
    assert_eq([n for n in os.listdir("/dev") if n.startswith("null.") and n[5:6].isdigit()], [],
              "no recording files in /dev")


@collector
def test_failed_write_ends_the_file():
    """After a write fails (FENNEC_TEST_FAIL_WRITE=N, tests only: the Nth write fails as on a
    full disk) the collector writes nothing more, so the file is a prefix that reads whole,
    cut short. Writing on (as before) made later chunks name what the lost one defined:
    with the second write lost, "EVENTS: segment for unknown thread 0", and no analysis."""
    for n, least in ((2, 0), (3, 1)):
        env = base_env({"FENNEC_TEST_FAIL_WRITE": str(n)})
        r, path = record("flood", 2000000, out="fail%d.fnc" % n, opts=("--sample=off", "--memory=off"), env=env)
        assert_eq(r.returncode, 0, "the program's exit status with write %d failing" % n)
        rep = analyze(path)
        assert_eq(rep["summary"]["cut_short"], True, "write %d failed: summary.cut_short" % n)
        count = sum(x["count"] for x in rep["regions"] if x["name"] == "flood")
        assert_true(least <= count < 2000000 and (count > 0) == (least > 0),
                    "write %d failed: flood pairs read: %d" % (n, count))


@collector
def test_file_size_limit_keeps_the_exit_status():
    """Under `ulimit -f 2048` (RLIMIT_FSIZE; dash counts 512-byte blocks: 1 MiB), which the
    recording reaches (20 M pairs: about 10 MB, 16 MB under ASan; before, 640 blocks were
    320 KiB, and the whole 4 M-event recording, 320,292 bytes compressed, could fit under
    them: no cut, the test failed; and 128 KiB could hold nothing of it: the ASan build's
    first EVENTS chunk is 113-174 KB, 33-96 KB in the plain build): a write past it
    fails with EFBIG and raises SIGXFSZ, whose default action ends the process. The writer
    thread blocks it; the lazy writer (--sample off, a single thread: fennec writes on the
    program's thread) let it through, and the program died "File size limit exceeded"
    (exit 153) instead of exiting 13. Now every mode keeps the program's status, and the
    file is a prefix that reads whole, cut short."""
    for opts in (("--sample=off", "--memory=off"), ("--sample=off",), ("--memory=off",)):
        what = " ".join(opts)
        out = "fsize%d.fnc" % len(opts)
        # 20 M pairs: 2 M compressed to 107-808 KB from run to run (a late writer's large
        # chunks compress best), sometimes under the limit
        cmd, env = record_command(fixture("flood"), (20000000, 13), out=out, opts=opts)
        r = run(["sh", "-c", 'ulimit -f 2048 && exec "$@"', "sh"] + cmd, env=env)
        assert_eq(r.returncode, 13, "%s: the program's exit status under ulimit -f (%s)" % (what, r.describe()))
        rep = analyze(out)
        assert_eq(rep["summary"]["cut_short"], True, "%s: summary.cut_short" % what)
        n = sum(x["count"] for x in rep["regions"] if x["name"] == "flood")
        assert_true(0 < n < 20000000, "%s: flood pairs in what fitted: %d" % (what, n))


@collector
def test_full_disk():
    """A recording on a filesystem that fills (a 512 KiB tmpfs): the program runs and exits
    as it would; the collector stops writing at the first chunk that does not fit, so the
    file is a clean prefix (a later chunk would name stacks and strings of the lost one:
    before, fennec analyze refused such a file, "names undefined stack"); fennec record
    says the profile ends early and names the full filesystem; fennec analyze reads what
    was written, cut short, with a warning. With no room at all, record says that no
    profile could be written (not that the program ignored LD_PRELOAD). Reports and exports
    to the full filesystem fail with the file named and nothing left behind."""
    import subprocess, tempfile
    if os.geteuid() != 0:
        raise Skip("mounting a small tmpfs needs root")
    d = tempfile.mkdtemp(prefix="fennec-full-")
    # 512 KiB: the ASan build's first events chunk of flood is 174 KB (83 KB in the plain
    # build), more than a 128 KiB filesystem holds after the header
    m = subprocess.run(["mount", "-t", "tmpfs", "-o", "size=512k", "tmpfs", d], stderr=subprocess.PIPE)
    if m.returncode != 0:
        os.rmdir(d)
        raise Skip("cannot mount a tmpfs: %s" % m.stderr.decode(errors="replace").strip())
    try:
        out = os.path.join(d, "fl.fnc")
        # 16,000,000 pairs: 2.3 MB of profile, four times what the filesystem holds. With
        # 4,000,000 the whole profile was 550-675 KB from run to run (its chunks compress
        # better the larger they are, and their size follows the writer's timing), so on
        # some machines all of it fitted in the 512 KiB and nothing ended early (CI, 2026-12-02)
        pairs = 16000000
        r, path = record("flood", pairs, out=out, opts=("--sample=off", "--memory=off"))
        assert_true("ends early" in r.stderr and "free" in r.stderr and d in r.stderr,
                    "fennec record names the full filesystem (the file: %d bytes): %s" % (
                        os.path.getsize(path), r.stderr.strip().replace("\n", " | ")))
        rep = analyze(path)
        assert_eq(rep["summary"]["cut_short"], True, "summary.cut_short")
        assert_true(any("a write failed" in w for w in rep["warnings"]), "warnings: %s" % rep["warnings"])
        # what was saved before the disk filled: ~370,000 pairs in a plain build, 16,828
        # under TSan (which records slower, in smaller chunks)
        n = region(rep, "flood")["count"]
        assert_true(0 < n < pairs, "flood pairs in what was written: %d" % n)
        os.unlink(path)

        # a heap profile in full mode: a 1 MiB chunk fails where later small ones would fit;
        # they are not written, so the file stays a prefix that reads whole (before: the
        # later chunks were written, and could name stacks of the lost one). bench's
        # work_alloc: random sizes, which compress little (a fixture's repeated blocks
        # compressed to 20-600 KB, sometimes all of it fitting)
        if not SANITIZER:
            exe = os.path.abspath("work_alloc")
            run([os.environ.get("CC", "cc"), "-std=gnu11", "-O2", "-D_GNU_SOURCE",
                 os.path.join(REPO, "bench", "work_alloc.c"), "-o", exe, "-lpthread"], check=True)
            r, path = record(exe, "mixed", 2, out=os.path.join(d, "heap.fnc"),
                             opts=("--sample=off", "--memory=full"))
            assert_true("ends early" in r.stderr, "fennec record on the heap profile:\n%s" % r.stderr)
            rep = analyze(path)
            assert_eq(rep["summary"]["cut_short"], True, "the heap profile is cut where the disk filled")
            # (its memory section is there if a heap chunk fitted before the disk filled)
            assert_true("memory" not in rep or rep["memory"]["allocations"] > 0, "the heap profile's allocations")
            os.unlink(path)

        # no room at all: the header cannot be written
        with open(os.path.join(d, "fill"), "wb") as f:
            try:
                while True:
                    f.write(b"\0" * 65536)
                    f.flush()
            except OSError:
                pass
        r, _ = record("flood", 10, out=os.path.join(d, "none.fnc"), opts=("--sample=off",), expect_rc=None)
        assert_eq(r.returncode, 0, "the program's exit status with no room for its profile")
        assert_true("no profile could be written" in r.stderr and "none.fnc" in r.stderr,
                    "fennec record with no room:\n%s" % r.stderr)
        assert_true("LD_PRELOAD" not in r.stderr, "blamed on LD_PRELOAD:\n%s" % r.stderr)

        _, small = record("flood", 1000, out="small.fnc", opts=("--sample=off",))
        for cmd, target in (([fennec_bin(), "analyze", small, "--format", "html", "-o"], "r.html"),
                            ([fennec_bin(), "export", small, "--format", "chrome-trace", "-o"], "t.json")):
            t = os.path.join(d, target)
            e = run(cmd + [t])
            assert_clean_error(e, t, "no space")
            assert_true(not os.path.exists(t), "%s left behind" % t)
    finally:
        subprocess.run(["umount", d])
        os.rmdir(d)


def test_numbers_refused_when_not_finite_or_negative():
    """A number option is refused, exit 2, with the option named, when its value is NaN or
    infinite (strtod reads "nan" and "inf", and a NaN passes every range check: --hot-threshold
    nan fired hot_operation on every region) or negative where the field is unsigned (sscanf's
    %u took --step-schedule -1,0,1,0 as 4294967295)."""
    _, path = record("nested", 100, out="n.fnc")
    bad = []
    for opt in ("--hot-threshold", "--imbalance-threshold", "--offcpu-threshold", "--outlier-factor",
                "--gpu-sync-threshold", "--roofline-min-share"):
        for v in ("nan", "NaN", "inf", "-inf", "infinity"):
            bad.append((["analyze", path, opt, v], opt))
    for opt in ("--threshold", "--alpha"):
        for v in ("nan", "inf"):
            bad.append((["compare", path, path, opt, v], opt))
    for v in ("-1,0,1,0", "0,-1,1,0", "0,0,1,-1", "0,0,-1,0", " 1,0,1,0", "0,0,1,0,", "+1,0,1,0"):
        bad.append((["record", "--step-schedule", v, "--", fixture("empty")], "--step-schedule"))
    bad.append((["record", "--step-fraction", "nan", "--", fixture("empty")], "--step-fraction"))
    for v in (" -1", "-0", "+100"):
        bad.append((["analyze", path, "--top", v], "--top"))
    for cmd, opt in bad:
        r = run([fennec_bin()] + cmd, timeout_s=60)
        assert_true(r.returncode == 2 and opt in r.stderr, "fennec %s: expected a usage error naming %s, got %s"
                    % (" ".join(cmd), opt, r.describe()))
    # what is still accepted
    r = run([fennec_bin(), "record", "-q", "-o", "s.fnc", "--step-schedule", "0,0,1,0", "--", fixture("empty")])
    assert_eq(r.returncode, 0, "--step-schedule 0,0,1,0: %s" % r.describe())
    r = run([fennec_bin(), "analyze", path, "--hot-threshold", "12.5", "--top", "5"])
    assert_eq(r.returncode, 0, "--hot-threshold 12.5: %s" % r.describe())


def test_output_that_is_a_recording_is_refused():
    """-o naming the recording being read (as itself, through another name, or through a
    link), a process file beside it, or another recording: refused with exit status 2 and a
    message naming the file, and the recording left byte for byte. analyze, export and
    compare used to exit 0 having replaced the recording with the report."""
    import filecmp
    import shutil
    _, path = record("forker", 2, out="self.fnc")
    shutil.copy(path, "other.fnc")
    shutil.copy(path, "pristine")
    sibling = sorted(n for n in os.listdir(".") if n.startswith("self.fnc."))
    assert_true(sibling, "forker's child wrote a process file beside self.fnc: %s" % os.listdir("."))
    shutil.copy(sibling[0], "pristine.sibling")
    os.symlink("self.fnc", "link.fnc")
    cases = []
    for out in ("self.fnc", "./self.fnc", os.path.abspath("self.fnc"), "link.fnc", sibling[0], "other.fnc"):
        cases += [["analyze", "self.fnc", "-o", out], ["analyze", "self.fnc", "--format", "json", "-o", out],
                  ["export", "self.fnc", "--format", "folded", "-o", out],
                  ["compare", "other.fnc", "self.fnc", "-o", out]]
    cases += [["export", "other.fnc", "--format", "diff-svg", "--base", "link.fnc", "-o", "self.fnc"],
              ["analyze", ".", "-o", "self.fnc"]]
    for cmd in cases:
        r = run([fennec_bin()] + cmd, timeout_s=60)
        out = cmd[-1]
        assert_true(r.returncode == 2 and out in r.stderr and "recording" in r.stderr,
                    "fennec %s: expected exit 2 naming %s, got %s" % (" ".join(cmd), out, r.describe()))
        assert_true(filecmp.cmp("self.fnc", "pristine", shallow=False) and
                    filecmp.cmp("other.fnc", "pristine", shallow=False) and
                    filecmp.cmp(sibling[0], "pristine.sibling", shallow=False) and os.path.islink("link.fnc"),
                    "fennec %s left the recordings as they were" % " ".join(cmd))
    # a report over an older report is still replaced
    for cmd in (["analyze", "self.fnc", "-o", "r.txt"], ["analyze", "self.fnc", "-o", "r.txt"],
                ["analyze", "self.fnc", "--format", "json", "-o", "r.txt"]):
        r = run([fennec_bin()] + cmd)
        assert_eq(r.returncode, 0, "fennec %s: %s" % (" ".join(cmd), r.describe()))


def test_standard_output_that_cannot_be_written():
    """`fennec --help > /dev/full` and `fennec version > /dev/full` exited 0 with nothing
    written. What a command prints to standard output must reach it: exit 1 and a message."""
    if not os.path.exists("/dev/full"):
        raise Skip("no /dev/full here")
    for args in (["--help"], ["version"], ["record", "--help"], ["analyze", "--help"]):
        with open("/dev/full", "w") as full:
            r = subprocess.run([fennec_bin()] + args, stdout=full, stderr=subprocess.PIPE, text=True, timeout=60)
        assert_true(r.returncode == 1 and "standard output" in r.stderr,
                    "fennec %s > /dev/full: exit %d, %r" % (" ".join(args), r.returncode, r.stderr))


KILLS_ITS_CHILD = r"""
#include <signal.h>
#include <stdlib.h>
#include <sys/wait.h>
#include <time.h>
#include <unistd.h>
int main(void)
{
	pid_t c = fork();
	if (!c) {
		for (;;)
			free(malloc(100));
	}
	struct timespec t = {0, 300000000};
	nanosleep(&t, NULL);
	kill(c, SIGKILL);
	waitpid(c, NULL, 0);
	return 0;
}
"""


@collector
def test_record_says_which_process_files_end_early():
    """A child killed by its parent leaves a process file without its end record, on a disk
    with room: fennec record said nothing (it spoke only of a full disk). It now says how
    many of the files end early and why they may."""
    skip_under("tsan", TSAN_FORK)
    with open("kills.c", "w") as f:
        f.write(KILLS_ITS_CHILD)
    run([os.environ.get("CC", "cc"), "-O1", "-o", "kills", "kills.c"], check=True)
    r, path = record(os.path.abspath("kills"), out="kills.fnc", opts=("--sample=off",))
    assert_true("1 of the 2 process files end early" in r.stderr and "killed or crashed" in r.stderr,
                "fennec record's summary:\n%s" % r.stderr)


def test_record_refuses_an_output_pattern_it_cannot_expand():
    """-o takes %r, %p, %h and %% (docs/ranks.md). An unknown % escape, or a % at the end of
    the name, is a usage error (exit status 2) that quotes the name, with or without --view,
    and nothing is recorded: `-o %` and `-o run%` used to write a file named '%' or 'run%'."""
    for out in ("%", "run%", "runs/%", "a%q.fnc"):
        for view in ((), ("--view=0",)):
            r = run([fennec_bin(), "record"] + list(view) + ["-o", out, "--", fixture("empty")], timeout_s=30)
            assert_eq(r.returncode, 2, "record %s -o %s: a usage error\n  %s" % (" ".join(view), out, r.describe()))
            assert_true("-o %s:" % out in r.stderr and "%%" in r.stderr,
                        "record -o %s: the message quotes the name and says how to write a %%\n  %s"
                        % (out, r.describe()))
    assert_eq(os.listdir("."), [], "nothing written for a name that could not be expanded")
    cmd, env = record_command(fixture("empty"), [], out="100%%-%p.fnc")
    r = run(cmd, env=env, timeout_s=30)
    assert_eq(r.returncode, 0, "record -o 100%%-%p.fnc: " + r.describe())
    names = os.listdir(".")
    assert_true(len(names) == 1 and names[0] == "100%%-%s.fnc" % names[0][5:-4] and names[0][5:-4].isdigit(),
                "-o 100%%-%%p.fnc (%%%% is a %%, %%p the pid) wrote %s" % names)


def test_record_says_which_directory_it_cannot_make():
    """The directories of -o are made as needed; when one cannot be, the message names it
    and gives the error of that step: a directory without write permission says 'Permission
    denied' (it said 'No such file or directory' of the recording, the error of opening it
    once the directory was not made), a file in the way says so. As root, the permission
    case runs as the user nobody (runuser); without runuser it is left out (a skip, once
    the rest passed)."""
    import shutil
    import tempfile
    prefix, skip = [], None
    if os.geteuid() == 0:
        if shutil.which("runuser"):
            prefix = ["runuser", "-u", "nobody", "--"]
        else:
            skip = "root without runuser: cannot be refused permission to make a directory"
    work = tempfile.mkdtemp(prefix="fennec-nobody-")
    try:
        os.chmod(work, 0o777)
        locked = os.path.join(work, "locked")
        os.mkdir(locked)
        os.chmod(locked, 0o555)
        env = base_env({"FENNEC_LIB": libfennec()})
        keep = ["%s=%s" % (k, env[k]) for k in sorted(env) if k.startswith(("FENNEC_", "ASAN_", "UBSAN_"))]
        for out in ((os.path.join(locked, "sub", "x.fnc"), os.path.join(locked, "sub") + "/") if not skip else ()):
            r = run(prefix + ["env"] + keep + [fennec_bin(), "record", "-o", out, "--", fixture("empty")],
                    env=env, timeout_s=30)
            if r.returncode != 0 and prefix and "Permission denied" in r.stderr and "directory" not in r.stderr:
                raise Skip("user nobody cannot reach the build: %s" % r.stderr.strip()[:200])
            assert_true(r.returncode == 1 and "cannot create directory %s: Permission denied"
                        % os.path.join(locked, "sub") in r.stderr,
                        "record -o %s under a directory without write permission:\n  %s" % (out, r.describe()))
        assert_eq(os.listdir(locked), [], "nothing made in the locked directory")
    finally:
        os.chmod(os.path.join(work, "locked"), 0o755)
        shutil.rmtree(work, ignore_errors=True)
    with open("afile", "w") as f:
        f.write("data")
    for out in ("afile/sub/x.fnc", "afile/sub/", "afile/"):
        r = run([fennec_bin(), "record", "-o", out, "--", fixture("empty")], timeout_s=30)
        assert_true(r.returncode == 1 and "afile is in the way" in r.stderr and "No such file" not in r.stderr,
                    "record -o %s with a file at afile:\n  %s" % (out, r.describe()))
    with open("afile") as f:
        assert_eq(f.read(), "data", "the file in the way is left as it was")
    if skip:
        raise Skip(skip)


BAD_ENV = {
    "FENNEC_SAMPLE": ("bogus", "expected one of cpu, wall, off; sampling off"),
    "FENNEC_STEP_SCHEDULE": ("1,2", "ACTIVE > 0; recording every step"),
    "FENNEC_STEP_FRACTION": ("2", "0 < F <= 1; recording every step"),
    "FENNEC_MEMORY_RATE": ("-5", "from 1 to 1073741824 bytes; using 524288"),
    "FENNEC_FLUSH_MS": ("0", "from 1 to 60000 ms; using 100"),
    "FENNEC_GPU": ("maybe", "expected one of all, kernels, off; GPU profiling off"),
}


def collector_lines(stderr):
    return [l for l in stderr.splitlines() if l.startswith("fennec: ")]


def record_warnings(stderr):
    pre = "fennec record: warning: the collector could not use "
    return [l[len(pre):] for l in stderr.splitlines() if l.startswith(pre)]


@collector
def test_collector_says_which_environment_values_it_cannot_use():
    """A FENNEC_* value the collector cannot use (FENNEC_SAMPLE=bogus recorded no samples
    and said nothing) is kept in the recording, whose analysis lists it among its warnings
    (once for a recording of several processes), and fennec record says it when the program
    ends, one line per variable, once; the collector itself says nothing to the program's
    standard error (STYLE.md), the default is used instead and the program's exit status is
    its own. fennec record passes such values on to the collector, except FENNEC_SAMPLE and
    FENNEC_MEMORY, which stand in for its --sample and --memory and are refused as a bad
    option value would be."""
    # the collector alone, preloaded and started by the environment
    env = base_env({"FENNEC_AUTOSTART": "1", "FENNEC_OUTPUT": "env.fnc"})
    env.update({k: v for k, (v, _) in BAD_ENV.items()})
    env["LD_PRELOAD"] = libfennec()
    r = run([fixture("nested"), "200"], env=env)
    assert_eq(r.returncode, 0, "nested's exit status: " + r.describe())
    assert_eq(collector_lines(r.stderr), [], "lines of the collector on the program's standard error")
    rep = analyze("env.fnc")
    for name, (value, what) in BAD_ENV.items():
        assert_eq(len([w for w in rep["warnings"] if "%s=%s: " % (name, value) in w and what in w]), 1,
                  "the analysis warns of %s=%s: %s" % (name, value, rep["warnings"]))
    assert_eq((rep["samples"]["count"], rep["steps"]["count"], rep["steps"]["recorded"]), (0, 10, 10),
              "samples (sampling off), steps and steps recorded (every one)")
    assert_eq(region(rep, "phase_a")["count"], 10, "phase_a count")

    # a number the collector cannot read: its default, not 0 nor the program's end
    env = base_env({"FENNEC_AUTOSTART": "1", "FENNEC_OUTPUT": "hz.fnc", "FENNEC_SAMPLE": "cpu", "FENNEC_HZ": "abc"})
    env["LD_PRELOAD"] = libfennec()
    r = run([fixture("exitcode"), "7"], env=env)
    assert_eq(r.returncode, 7, "exitcode 7's exit status: " + r.describe())
    assert_eq(collector_lines(r.stderr), [], "what the collector said")
    rep = analyze("hz.fnc")
    assert_eq(rep["samples"]["requested_hz"], 999, "the sampling rate")
    assert_true(any("FENNEC_HZ=abc: expected a whole number from 1 to 20000 per second; using 999" in w
                    for w in rep["warnings"]), "the analysis's warning: %s" % rep["warnings"])

    # fennec record: passed on, said once for the recording of two processes, by fennec
    # record, with -q too (a warning, not the summary)
    skip_under("tsan", TSAN_FORK)
    extra = {"FENNEC_HZ": "abc", "FENNEC_STEP_FRACTION": "2"}
    for opts in ((), ("-q",)):
        r, path = record("forker", "fork", out="rec.fnc", opts=opts, env=base_env(extra))
        assert_eq(collector_lines(r.stderr), [], "the collector's lines under fennec record")
        said = record_warnings(r.stderr)
        assert_eq(sorted(l.split(":")[0] for l in said), ["FENNEC_HZ=abc", "FENNEC_STEP_FRACTION=2"],
                  "fennec record %s says each once: %s" % (" ".join(opts), r.describe()))
    rep = analyze(path)
    assert_eq(rep["summary"]["processes"], 2, "processes")
    assert_eq(sorted(w.split("use ")[1].split(":")[0] for w in rep["warnings"] if "could not use" in w),
              ["FENNEC_HZ=abc", "FENNEC_STEP_FRACTION=2"], "the analysis's warnings: %s" % rep["warnings"])
    for name, value, opt in (("FENNEC_SAMPLE", "bogus", "--sample"), ("FENNEC_MEMORY", "most", "--memory")):
        r = run(record_command(fixture("empty"), [], out="refused.fnc")[0], env=base_env({name: value}))
        assert_true(r.returncode == 2 and "%s=%s" % (name, value) in r.stderr and opt in r.stderr,
                    "fennec record with %s=%s in the environment: %s" % (name, value, r.describe()))
        assert_true(not os.path.exists("refused.fnc"), "nothing recorded")
        r, _ = record("empty", out="given.fnc", opts=(opt, "off"), env=base_env({name: value}))
        assert_eq(record_warnings(r.stderr), [], "%s off given: the environment's %s is not used" % (opt, name))


# The sampler's and the heap profiler's variables, once read with atoi or strtoull and a
# silent fallback: FENNEC_LEAK_SCAN_MS=soon read as 0 turned the leak scan off,
# FENNEC_STACK_COPY=0x2000 was taken as hexadecimal, FENNEC_SIGNAL=99 and
# FENNEC_SAMPLE_SOURCE=bogus were replaced without a word.
BAD_SAMPLER_ENV = {
    "FENNEC_SIGNAL": ("99", "expected a real-time signal number "),  # SIGRTMIN-SIGRTMAX, 34-64 with glibc
    "FENNEC_SAMPLE_SOURCE": ("bogus", "expected one of ring, signal, perf, timer; using ring"),
    "FENNEC_STACK_COPY": ("0x2000", "expected a whole number from 4096 to 61440 bytes; using "),
    "FENNEC_CFI": ("yes", "or check; using 1"),
    "FENNEC_HEAP_RING": ("12", "expected a whole number from 65536 to 1073741824 bytes; using 65536"),
    "FENNEC_HEAP_UNWIND": ("fast", "or check; using 1"),
    "FENNEC_MEMORY_MMAP": ("-1", "expected a whole number from 0 to 1073741824 bytes (0: none); using 0"),
    "FENNEC_LEAK_SCAN_MS": ("soon", "(0: no scan); using 10000"),
}


@collector
def test_autostart_takes_yes_and_no_and_records_an_odd_value():
    """FENNEC_AUTOSTART, for a library preloaded by hand: yes, true and on start a session as
    1 does, no, false and off do not, as 0; another value (maybe) starts one whose analysis
    says the value. It did not record and could say nothing of it: there was no file."""
    for value, starts in (("yes", True), ("TRUE", True), ("on", True), ("no", False), ("off", False), ("maybe", True)):
        out = "auto-%s.fnc" % value
        env = base_env({"FENNEC_AUTOSTART": value, "FENNEC_OUTPUT": out})
        env["LD_PRELOAD"] = libfennec()
        r = run([fixture("exitcode"), "5"], env=env)
        assert_eq(r.returncode, 5, "%s: the program's exit status: %s" % (value, r.describe()))
        assert_eq(collector_lines(r.stderr), [], "%s: what the collector said to the program's stderr" % value)
        assert_eq(os.path.exists(out), starts, "%s: a recording was made" % value)
        if starts:
            odd = [w for w in analyze(out)["warnings"] if "FENNEC_AUTOSTART" in w]
            assert_eq(len(odd), 1 if value == "maybe" else 0, "%s: the analysis's warnings of FENNEC_AUTOSTART: %s"
                      % (value, odd))
            assert_true(all("FENNEC_AUTOSTART=maybe: expected 1 (record from the start) or 0; recording as for 1" in w
                            for w in odd), "%s: the warning: %s" % (value, odd))


@collector
def test_collector_says_which_sampler_and_heap_values_it_cannot_use():
    """The sampler's and the heap profiler's FENNEC_* values that the collector cannot use
    are said as the others are (test_collector_says_which_environment_values_it_cannot_use):
    once each by fennec record and in the analysis, never by the collector on the program's
    standard error, and the recording is made with the defaults: samples by the source and at
    the rate a recording without them has, and (where malloc is interposed) the leak scan
    made, not turned off."""
    env = base_env({k: v for k, (v, _) in BAD_SAMPLER_ENV.items()})
    r, path = record("cpu_shares", 300, out="bad.fnc", opts=("--memory", "full"), env=env)
    assert_eq(collector_lines(r.stderr), [], "the collector's lines under fennec record")
    said = record_warnings(r.stderr)
    for name, (value, what) in BAD_SAMPLER_ENV.items():
        lines = [l for l in said if l.startswith("%s=%s: " % (name, value))]
        assert_true(len(lines) == 1 and what in lines[0],
                    "fennec record says %s=%s once, with '%s': %s" % (name, value, what, r.describe()))
    assert_eq(len(said), len(BAD_SAMPLER_ENV), "fennec record's warnings: %s" % said)
    rep = analyze(path)
    for name, (value, what) in BAD_SAMPLER_ENV.items():
        assert_eq(len([w for w in rep["warnings"] if "%s=%s: " % (name, value) in w and what in w]), 1,
                  "the analysis warns of %s=%s once: %s" % (name, value, rep["warnings"]))

    r, good_path = record("cpu_shares", 300, out="good.fnc", opts=("--memory", "full"))
    assert_eq(record_warnings(r.stderr), [], "fennec record's warnings without the bad values")
    good = analyze(good_path)
    assert_eq((rep["samples"]["source"], rep["samples"]["requested_hz"]),
              (good["samples"]["source"], good["samples"]["requested_hz"]), "the sample source and rate")
    assert_true(rep["samples"]["count"] >= 100, "samples of 300 ms of CPU at 999 Hz: %d" % rep["samples"]["count"])
    if not SANITIZER:  # the sanitizer builds do not interpose malloc: no heap data
        scan = rep["memory"]["leak_scan"]
        assert_true(scan is not None and scan["processes"] == 1, "the leak scan made (not off): %r" % scan)


# Where each command's usage errors are tried (test_usage_errors_exit_2_in_every_command):
# arguments that make a valid command line, to which an option is added. Options whose
# value is free text (a file to write, a name, a title) have no bad value to try.
USAGE_BASE = {
    "analyze": ["REC"],
    "export": ["REC", "--format", "folded", "-o", "out.folded"],
    "plot": ["REC", "--kind", "timing", "-o", "out.svg"],
    "compare": ["REC", "REC"],
    "view": ["REC"],
    "calibrate": [],
    "record": [],
}
FREE_TEXT = {"FILE", "DIR", "LIST", "NAME", "TEXT", "A", "ADDR"}  # DIR: --continuous, a path like FILE


def help_options(cmd):
    """The options `fennec CMD --help` lists: [(name, metavar or None)], an option whose
    value is optional ('--view[=PORT]') given as having none."""
    r = run([fennec_bin(), cmd, "--help"], check=True)
    opts = []
    for line in r.stdout.splitlines():
        if not line.startswith("  -"):
            continue
        for item in line.strip().split("  ")[0].split(", "):
            name, _, meta = item.partition(" ")
            opts.append((name.split("[")[0], meta or None))
    return opts


def test_usage_errors_exit_2_in_every_command():
    """cli.h: a usage error exits 2, in every subcommand. For each option of each command's
    --help (so that a new option is held to it too): given last without its value, and
    given a value it cannot take; an unknown option; a command without the recording it
    needs. Each exits 2 with a message that names what was wrong, and runs nothing."""
    r, rec = record("nested", 20, out="rec.fnc")
    sub = lambda args: [rec if a == "REC" else a for a in args]
    tried = 0

    def usage_error(args, names):
        nonlocal tried
        tried += 1
        r = run([fennec_bin()] + args, timeout_s=30)
        assert_true(r.returncode == 2 and names in r.stderr,
                    "fennec %s: expected exit 2 and a message naming %r, got %s"
                    % (" ".join(args), names, r.describe()))
        assert_true(not os.path.exists("out.folded") and not os.path.exists("out.svg"),
                    "fennec %s: wrote its output" % " ".join(args))

    for cmd, base in USAGE_BASE.items():
        opts = help_options(cmd)
        assert_true(len(opts) >= 3, "fennec %s --help lists its options: %r" % (cmd, opts))
        tail = ["--", "/bin/true"] if cmd == "record" else []
        usage_error([cmd] + sub(base) + ["--no-such-option"] + tail, "--no-such-option")
        for name, meta in opts:
            if meta is None:
                continue
            # record's options end where the program begins: its option goes last alone
            usage_error([cmd] + sub(base) + [name], name.lstrip("-"))
            if meta not in FREE_TEXT:
                usage_error([cmd] + sub(base) + [name, "x@!"] + tail, "x@!")
    for cmd in ("analyze", "export", "plot", "view"):
        usage_error([cmd] + [a for a in USAGE_BASE[cmd] if a != "REC"], "which recording")
    usage_error(["compare", rec], "which recordings")
    usage_error(["record", "-q"], "no program")
    usage_error(["calibrate", "extra"], "extra")
    usage_error(["frobnicate"], "frobnicate")
    r = run([fennec_bin()])
    assert_true(r.returncode == 2 and "usage" in r.stderr, "fennec alone: %s" % r.describe())
    assert_true(tried > 80, "usage errors tried: %d" % tried)

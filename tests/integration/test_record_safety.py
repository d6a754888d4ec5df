"""fennec record and what it must not destroy or lose: the file at its output path (an
earlier recording kept when the program cannot run; the program itself or any other file
that is not a recording refused), and signals meant for the program (passed on once, never
the death of fennec record). Fixtures: forker.c, empty.c; a signal counter built here."""

import filecmp
import os
import shutil
import stat

from helpers import (assert_eq, assert_true, base_env, fennec_bin, fixture, libfennec, record, run)


def record_raw(out, *prog, quiet=False):
    env = base_env({"FENNEC_LIB": libfennec()})
    return run([fennec_bin(), "record"] + (["-q"] if quiet else []) + ["-o", out, "--"] + list(prog), env=env,
               timeout_s=60)


def test_output_kept_when_the_program_cannot_run():
    """A program that is not there, or not executable, is said (exit status 127 or 126, as
    a shell gives) before anything at the output path is touched: the earlier recording and
    its process files are kept byte for byte (they were removed before the exec failed)."""
    _, path = record("forker", 2, out="keep.fnc")
    files = sorted(n for n in os.listdir(".") if n.startswith("keep.fnc"))
    assert_true(len(files) >= 2, "forker's recording has process files beside keep.fnc: %s" % files)
    os.mkdir("orig")
    for n in files:
        shutil.copy(n, os.path.join("orig", n))
    with open("noexec", "w") as f:
        f.write("#!/bin/sh\nexit 0\n")
    os.chmod("noexec", 0o644)
    for prog, rc in (("/nonexistent/prog", 127), ("no-such-program-in-path", 127), ("./noexec", 126),
                     ("/", 126)):
        r = record_raw("keep.fnc", prog)
        assert_true(r.returncode == rc and prog in r.stderr and "cannot run" in r.stderr,
                    "record -- %s: expected exit %d saying it cannot run it, got %s" % (prog, rc, r.describe()))
        assert_eq(sorted(n for n in os.listdir(".") if n.startswith("keep.fnc")), files, "files after -- %s" % prog)
        for n in files:
            assert_true(filecmp.cmp(n, os.path.join("orig", n), shallow=False), "%s kept as it was (-- %s)" % (n, prog))
    # a program found in PATH, and a recording replaced by the next one
    r = record_raw("keep.fnc", "true", quiet=True)
    assert_eq(r.returncode, 0, "record -- true: %s" % r.describe())
    assert_true(not filecmp.cmp("keep.fnc", os.path.join("orig", "keep.fnc"), shallow=False),
                "the earlier recording is replaced by the new one")
    assert_eq(sorted(n for n in os.listdir(".") if n.startswith("keep.fnc")), ["keep.fnc"],
              "the earlier recording's process files are removed")


def test_output_that_is_not_a_recording_is_refused():
    """-o naming the program being run (it deleted the binary, then failed to run it), or any
    existing file that is not a recording (a C source was silently overwritten): refused, exit
    status 2, the file named and left as it was. An empty file is recorded over."""
    shutil.copy(fixture("empty"), "prog")
    with open("src_copy.c", "w") as f:
        f.write("int main(void) { return 0; }\n")
    shutil.copy("prog", "prog.orig")
    shutil.copy("src_copy.c", "src.orig")
    for out, prog, words in (("prog", "./prog", "program being run"), (os.path.abspath("prog"), "./prog", "program"),
                             ("src_copy.c", "true", "not a fennec recording"),
                             ("src_copy.c", fixture("empty"), "not a fennec recording")):
        r = record_raw(out, prog, quiet=True)
        assert_true(r.returncode == 2 and os.path.basename(out) in r.stderr and words in r.stderr,
                    "record -o %s -- %s: expected exit 2 naming the file (%s), got %s" % (out, prog, words, r.describe()))
    assert_true(filecmp.cmp("prog", "prog.orig", shallow=False) and os.stat("prog").st_mode & stat.S_IXUSR,
                "the program is left as it was")
    assert_true(filecmp.cmp("src_copy.c", "src.orig", shallow=False), "the source file is left as it was")
    r = run(["./prog"])
    assert_eq(r.returncode, 0, "the program still runs")
    open("empty.fnc", "w").close()
    r = record_raw("empty.fnc", fixture("empty"), quiet=True)
    assert_eq(r.returncode, 0, "record over an empty file: %s" % r.describe())
    with open("empty.fnc", "rb") as f:
        assert_eq(f.read(4), b"\x89FNC", "empty.fnc now holds a recording")

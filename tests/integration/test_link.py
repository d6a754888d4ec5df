"""Linking fennec (docs/api.md "Linking"): libfennec.a links into a program with the
libraries the doc lists, and a fully static program, which cannot be profiled, is told why
by fennec record, which still exits as the program did."""

import os
import shutil

from helpers import BUILD, REPO, SANITIZER, Skip, assert_eq, assert_true, base_env, record_command, run

MAIN = r"""
#include <fennec.h>
#include <stdio.h>
int main(void)
{
	int rc = fennec_start(NULL);
	fennec_region_begin("linked");
	fennec_region_end();
	printf("start %d stop %d\n", rc, fennec_stop());
	return 3;
}
"""


def cc():
    c = shutil.which("gcc") or shutil.which("cc")
    if not c:
        raise Skip("no C compiler")
    if SANITIZER:
        raise Skip("the sanitizer builds' libfennec.a needs the sanitizer's runtime")
    return c


def test_static_library_links_with_the_documented_libraries():
    """The link line of docs/api.md, -lm included (libfennec.a uses log and sqrt)."""
    c = cc()
    with open("main.c", "w") as f:
        f.write(MAIN)
    lib = os.path.join(BUILD, "lib", "libfennec.a")
    r = run([c, "-I" + os.path.join(REPO, "include"), "main.c", lib, "-lunwind-x86_64", "-lunwind", "-lzstd",
             "-lpthread", "-ldl", "-lm", "-o", "main"])
    assert_eq(r.returncode, 0, "the documented link line links: %s" % r.stderr[-2000:])
    env = base_env({"FENNEC_OUTPUT": "api.fnc"})
    r = run(["./main"], env=env)
    assert_true(r.returncode == 3 and "start 0 stop 0" in r.stdout, "runs and records: %r" % r.stdout)


def test_fully_static_program_is_told_why():
    c = cc()
    with open("st.c", "w") as f:
        f.write("int main(void) { return 5; }\n")
    r = run([c, "-static", "st.c", "-o", "st"])
    if r.returncode:
        raise Skip("no static C library here: %s" % r.stderr[-300:])
    cmd, env = record_command(os.path.abspath("st"), [])
    r = run(cmd, env=env)
    assert_eq(r.returncode, 5, "fennec record exits as the program did")
    assert_true("cannot be profiled because it is statically linked" in r.stderr and "-static" in r.stderr,
                "says why: %r" % r.stderr)

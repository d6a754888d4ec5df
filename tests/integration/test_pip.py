"""`python3 -m pip install` of the source tree (pyproject.toml, python/backend/fennec_build.py,
docs/python.md "Installing with pip"): into a fresh virtual environment, with no index and
no network, then the package and the command used from there alone, without PYTHONPATH or
LD_LIBRARY_PATH."""

import glob
import json
import os
import shutil

from helpers import (BUILD, MS, REPO, SANITIZER, Skip, assert_eq, assert_rel, assert_true, base_env,
                     parse_json, region, run, timeout)

SCRIPT = r"""
import json, time
import fennec

def spin(s):
    t = time.perf_counter()
    while time.perf_counter() - t < s:
        pass

for i in range(3):
    with fennec.region("pip_region"):
        spin(0.05)
print(json.dumps({"file": fennec.__file__, "library": fennec.library_path,
                  "implementation": fennec.implementation, "running": fennec.is_running()}))
"""

ANALYZE = r"""
import json, sys
import fennec
rep = fennec.analyze(sys.argv[1])
print(json.dumps([r["count"] for r in rep["regions"] if r["path"] == "pip_region"]))
"""


def clean_env():
    """Nothing that would find fennec outside the environment."""
    # no user configuration, no wheel left in the user's cache
    env = base_env({"PIP_DISABLE_PIP_VERSION_CHECK": "1", "PIP_NO_INPUT": "1", "PIP_CONFIG_FILE": os.devnull,
                    "PIP_NO_CACHE_DIR": "1"})
    for k in ("PYTHONPATH", "PYTHONHOME", "LD_LIBRARY_PATH", "VIRTUAL_ENV"):
        env.pop(k, None)
    return env


def inside(path, d):
    return os.path.realpath(path).startswith(os.path.realpath(d) + os.sep)


@timeout(300)
def test_pip_install_into_venv():
    """A fresh venv, `venv/bin/python -m pip install --no-index <repo>` (pip's isolated build:
    the backend needs nothing installed), reusing the tests' build directory
    (--config-settings O=, so make has nothing to do). Then from the venv alone: `import fennec` finds the packaged library
    and the C part; `venv/bin/fennec record -- venv/bin/python script.py` preloads its own
    packaged collector, the script's regions are recorded (3 of 50 ms), `venv/bin/fennec
    analyze` shows them, fennec.analyze() finds the packaged CLI; pip uninstall takes the
    command away again."""
    if SANITIZER:
        raise Skip("the wheel holds the plain build; a sanitizer's runtime cannot be loaded into python late")
    base = "/usr/bin/python3" if os.path.exists("/usr/bin/python3") else shutil.which("python3")
    env = clean_env()
    venv = os.path.abspath("venv")
    r = run([base, "-m", "venv", venv], env=env, timeout_s=120)
    if r.returncode != 0:
        raise Skip("%s -m venv does not work here (Debian: python3-venv): %s" % (base, r.stderr.strip()[-300:]))
    py = os.path.join(venv, "bin", "python")
    if run([py, "-m", "pip", "--version"], env=env).returncode != 0:
        raise Skip("no pip in the venv (Debian: python3-venv, python3-pip-whl)")

    r = run([py, "-m", "pip", "install", "--no-index", "--config-settings", "O=" + BUILD, REPO], env=env, timeout_s=240)
    assert_true(r.returncode == 0, "pip install failed\n  " + r.describe())
    fennec = os.path.join(venv, "bin", "fennec")
    assert_true(os.access(fennec, os.X_OK), "pip installed no %s" % fennec)

    # the package, outside the source tree (the cwd is the test's own directory)
    r = run([py, "-c", "import fennec, json; print(json.dumps([fennec.__file__, fennec.library_path, "
             "fennec.implementation]))"], env=env, check=True)
    file, lib, impl = json.loads(r.stdout)
    assert_true(inside(file, venv), "import fennec found %s, not the venv's" % file)
    assert_true(inside(lib, venv) and os.path.basename(lib) == "libfennec.so",
                "fennec.library_path is %s, not the venv's" % lib)
    # the C part is built for the venv's interpreter where its headers are (python3-dev)
    r = run([py, "-c", "import os, sysconfig; print(os.path.isfile(os.path.join("
             "sysconfig.get_paths()['include'], 'Python.h')))"], env=env, check=True)
    assert_eq(impl, "c" if r.stdout.strip() == "True" else "ctypes", "fennec.implementation in the venv")

    with open("script.py", "w") as f:
        f.write(SCRIPT)
    r = run([fennec, "record", "-q", "--sample", "off", "-o", "x.fnc", "--", py, "script.py"], env=env, timeout_s=120)
    assert_true(r.returncode == 0, "venv/bin/fennec record failed\n  " + r.describe())
    seen = json.loads(r.stdout.strip().splitlines()[-1])
    assert_true(inside(seen["library"], venv), "under venv/bin/fennec record the script used %s" % seen["library"])
    assert_eq(seen["running"], True, "fennec.is_running() under venv/bin/fennec record")

    r = run([fennec, "analyze", "x.fnc", "--format", "json"], env=env, check=True)
    x = region(parse_json(r.stdout, r), "pip_region")
    assert_eq(x["count"], 3, "pip_region: count")
    assert_rel(x["total_ns"], 150 * MS, 0.10, "pip_region: total_ns (3 busy loops of 50 ms)", "ns")

    with open("an.py", "w") as f:
        f.write(ANALYZE)
    r = run([py, "an.py", "x.fnc"], env=env, check=True)
    assert_eq(json.loads(r.stdout), [3], "fennec.analyze() in the venv (the packaged CLI): pip_region's count")

    r = run([py, "-m", "pip", "uninstall", "-y", "fennec"], env=env, check=True)
    assert_true(not os.path.exists(fennec), "pip uninstall left %s" % fennec)
    left = glob.glob(os.path.join(venv, "lib", "python*", "site-packages", "fennec"))
    assert_true(not left, "pip uninstall left %s" % left)

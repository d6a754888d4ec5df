"""fennec's PEP 517 build backend: `python3 -m pip install .` builds fennec with make and
installs it as the `fennec` package (docs/python.md, "Installing with pip").

It is in the tree (pyproject.toml's backend-path) and needs nothing but the standard
library (requires = []), so pip's isolated build installs nothing and works without a
network. A wheel holds the package as the CLI and the module find their pieces in it:

    fennec/__init__.py               python/fennec
    fennec/_fennec<EXT_SUFFIX>       the module's C part, for the interpreter that builds
    fennec/lib/libfennec.so          the collector (and libfennec-mmap.so beside it)
    fennec/bin/fennec                the CLI: its ../lib/libfennec.so is the one above
    fennec-V.data/scripts/fennec     the command pip puts on the interpreter's scripts
                                     directory: it runs fennec/bin/fennec

`fennec record` finds libfennec.so from its own path (../lib, src/cli/record.c), the module
from its file (lib/), and fennec.analyze() the CLI from the library (../bin): one layout
for the three. The build directory is make's default (build/, reused when it is built
already; make rebuilds only what changed); `-C O=dir` (pip's --config-settings) picks
another. The C part is built for the interpreter running pip (make PYTHON=...), so the
wheel is tagged for it.
"""

import base64
import hashlib
import io
import os
import re
import subprocess
import sys
import sysconfig
import tarfile
import zipfile

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
NAME = "fennec"

# The command: a launcher, not the binary itself, because pip installs a wheel's scripts
# apart from its package (venv/bin against site-packages) and the binary finds its library
# relative to itself. find_spec locates the package without importing it (importing loads
# libfennec.so). pip writes this interpreter's path over "#!python".
LAUNCHER = '''#!python
"""fennec, installed by pip: runs the fennec binary of the fennec package (docs/python.md)."""
import importlib.util
import os
import sys

spec = importlib.util.find_spec("fennec")
if spec is None or not spec.submodule_search_locations:
    sys.exit("fennec: the fennec package is not installed for %s" % sys.executable)
exe = os.path.join(list(spec.submodule_search_locations)[0], "bin", "fennec")
try:
    os.execv(exe, ["fennec"] + sys.argv[1:])
except OSError as e:
    sys.exit("fennec: cannot run %s: %s" % (exe, e.strerror))
'''


def _version():
    with open(os.path.join(ROOT, "include", "fennec.h")) as f:
        text = f.read()
    parts = [re.search(r"#define FENNEC_VERSION_%s (\d+)" % p, text).group(1) for p in ("MAJOR", "MINOR", "PATCH")]
    return ".".join(parts)


def _metadata(version):
    summary = "A low-overhead profiler for compute and machine-learning workloads"
    return ("Metadata-Version: 2.1\nName: %s\nVersion: %s\nSummary: %s\nLicense: see the source tree\n"
            "Requires-Python: >=3.8\n" % (NAME, version, summary))


def _c_part_suffix():
    """EXT_SUFFIX where this interpreter's headers are (make builds the C part then), else None."""
    inc = sysconfig.get_paths().get("include") or ""
    suffix = sysconfig.get_config_var("EXT_SUFFIX")
    return suffix if suffix and os.path.isfile(os.path.join(inc, "Python.h")) else None


def _tag(with_c_part):
    plat = re.sub(r"[-.]", "_", sysconfig.get_platform())
    if with_c_part and sys.implementation.name == "cpython":
        py = "cp%d%d" % sys.version_info[:2]
        return "%s-%s-%s" % (py, py, plat)
    # ctypes only: any Python 3, but the binaries are still this machine's
    return "py3-none-%s" % plat


def _build(config_settings):
    out = (config_settings or {}).get("O") or "build"
    out_abs = os.path.join(ROOT, out)
    suffix = _c_part_suffix()
    targets = ["lib", "cli"] + (["pyext"] if suffix else [])
    cmd = ["make", "-C", ROOT, "-j2", "O=" + out, "PYTHON=" + sys.executable] + targets
    # make's output goes to stderr: pip shows it with -v, and on failure
    print("fennec: " + " ".join(cmd), file=sys.stderr, flush=True)
    try:
        rc = subprocess.call(cmd, stdout=sys.stderr.fileno())
    except OSError as e:
        raise RuntimeError("fennec: cannot run make (%s): the build needs make and a C compiler "
                           "(`make deps` installs the rest)" % e.strerror)
    if rc != 0:
        raise RuntimeError("fennec: `%s` failed (exit status %d); `make deps` installs the Debian "
                           "packages the build needs" % (" ".join(cmd), rc))
    files = {  # path in the wheel: path built
        "fennec/bin/fennec": os.path.join(out_abs, "bin", "fennec"),
        "fennec/lib/libfennec.so": os.path.join(out_abs, "lib", "libfennec.so"),
        "fennec/lib/libfennec-mmap.so": os.path.join(out_abs, "lib", "libfennec-mmap.so"),
    }
    if suffix:
        files["fennec/_fennec" + suffix] = os.path.join(out_abs, "python", "_fennec" + suffix)
    pkg = os.path.join(ROOT, "python", "fennec")
    for fn in sorted(os.listdir(pkg)):
        if fn.endswith(".py"):
            files["fennec/" + fn] = os.path.join(pkg, fn)
    for dst, src in files.items():
        if not os.path.isfile(src):
            raise RuntimeError("fennec: make did not build %s" % src)
    return files, bool(suffix)


def _record_line(arcname, data):
    digest = base64.urlsafe_b64encode(hashlib.sha256(data).digest()).rstrip(b"=").decode()
    return "%s,sha256=%s,%d" % (arcname, digest, len(data))


def _dist_info(version, tag):
    d = "%s-%s.dist-info" % (NAME, version)
    return d, {
        d + "/METADATA": _metadata(version).encode(),
        d + "/WHEEL": ("Wheel-Version: 1.0\nGenerator: fennec_build\nRoot-Is-Purelib: false\nTag: %s\n"
                       % tag).encode(),
    }


# --- PEP 517 hooks ------------------------------------------------------------------------

def get_requires_for_build_wheel(config_settings=None):
    return []


def prepare_metadata_for_build_wheel(metadata_directory, config_settings=None):
    # The tag is not known before the build; pip reads only METADATA from here.
    d, entries = _dist_info(_version(), _tag(_c_part_suffix() is not None))
    for name, data in entries.items():
        path = os.path.join(metadata_directory, name)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "wb") as f:
            f.write(data)
    return d


def build_wheel(wheel_directory, config_settings=None, metadata_directory=None):
    version = _version()
    files, with_c_part = _build(config_settings)
    tag = _tag(with_c_part)
    d, meta = _dist_info(version, tag)
    wheel_name = "%s-%s-%s.whl" % (NAME, version, tag)
    record = []
    path = os.path.join(wheel_directory, wheel_name)
    with zipfile.ZipFile(path, "w", zipfile.ZIP_DEFLATED) as z:
        def add(arcname, data, mode):
            info = zipfile.ZipInfo(arcname, date_time=(1980, 1, 1, 0, 0, 0))
            info.external_attr = (0o100000 | mode) << 16  # a regular file; pip keeps the x bits
            info.compress_type = zipfile.ZIP_DEFLATED
            z.writestr(info, data)
            record.append(_record_line(arcname, data))
        for arcname, src in sorted(files.items()):
            with open(src, "rb") as f:
                data = f.read()
            add(arcname, data, 0o755 if os.access(src, os.X_OK) and not arcname.endswith(".py") else 0o644)
        add("%s-%s.data/scripts/fennec" % (NAME, version), LAUNCHER.encode(), 0o755)
        for arcname, data in meta.items():
            add(arcname, data, 0o644)
        record.append(d + "/RECORD,,")
        info = zipfile.ZipInfo(d + "/RECORD", date_time=(1980, 1, 1, 0, 0, 0))
        info.external_attr = (0o100644) << 16
        z.writestr(info, "\n".join(record) + "\n")
    return wheel_name


def get_requires_for_build_sdist(config_settings=None):
    return []


def _source_files():
    """The tracked files (git ls-files); without git, the tree less what builds leave."""
    try:
        out = subprocess.run(["git", "-C", ROOT, "ls-files", "-z"], stdout=subprocess.PIPE,
                             stderr=subprocess.DEVNULL, check=True).stdout
        return sorted(f for f in out.decode().split("\0") if f and os.path.isfile(os.path.join(ROOT, f)))
    except (OSError, subprocess.CalledProcessError):
        pass
    files = []
    for d, dirs, names in os.walk(ROOT):
        rel = os.path.relpath(d, ROOT)
        dirs[:] = [x for x in dirs if x not in ("node_modules", "__pycache__", ".git")
                   and not (rel == "." and x.startswith("build"))]
        files += [os.path.normpath(os.path.join(rel, n)) for n in names if n != ".git" and not n.endswith(".pyc")]
    return sorted(files)


def build_sdist(sdist_directory, config_settings=None):
    version = _version()
    base = "%s-%s" % (NAME, version)
    name = base + ".tar.gz"
    with tarfile.open(os.path.join(sdist_directory, name), "w:gz", format=tarfile.PAX_FORMAT) as t:
        for f in _source_files():
            t.add(os.path.join(ROOT, f), arcname=base + "/" + f, recursive=False)
        data = _metadata(version).encode()
        info = tarfile.TarInfo(base + "/PKG-INFO")
        info.size, info.mode = len(data), 0o644
        t.addfile(info, io.BytesIO(data))
    return name

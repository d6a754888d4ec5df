"""tests/gpu/device-check.sh, the check a machine with a GPU runs (docs/gpu.md): its parts
that need no GPU. The CUDA program compiles with nvcc when there is one, and the comparison
passes on numbers that agree and fails on a launch count that differs."""

import os

from helpers import REPO, assert_true, run


def test_device_check_dry():
    r = run([os.path.join(REPO, "tests", "gpu", "device-check.sh"), "--dry"], timeout_s=300)
    assert_true(r.returncode == 0 and "device-check --dry: ok" in r.stdout,
                "device-check.sh --dry: rc %d\n%s%s" % (r.returncode, r.stdout, r.stderr))

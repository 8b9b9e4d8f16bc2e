"""The one loader of fsscope's C code: several libraries in one process each stay themselves."""

import subprocess
import sys

# In a fresh interpreter, so no earlier test has loaded either library already.
SCRIPT = """
from fsscope.aging import native as ager
from fsscope.workloads import probe
lib, why = ager.library()
assert lib is not None, why
call, why = probe.native_call()
assert call is not None, why
print(lib.fsscope_ager_run is not None, call is not None)
"""


def test_two_libraries_in_one_process_are_two_libraries():
    # The loader opens each library under /proc/self/fd/N; the dynamic loader knows a library
    # by that name, so a reused descriptor number once handed the ager's library to the probe
    # ("undefined symbol: fsscope_probe_loop").
    out = subprocess.run([sys.executable, "-c", SCRIPT], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr
    assert out.stdout.split() == ["True", "True"]

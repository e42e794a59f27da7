"""Every exported nvml* function was exercised by this test run.

The library records (in process) which of its API functions were called;
conftest runs this test last. It only judges complete runs of this
directory: with -k/-m/--lf/--deselect or a subset of files it is skipped.
"""

import ctypes
import subprocess

import pytest

from fakenvml_util import FAKE_LIB, LIB_PATH


def test_every_export_is_exercised(request):
    if not getattr(request.config, "_fakenvml_complete", False):
        pytest.skip("only meaningful when the whole fake-nvml test directory runs")
    failed = request.session.testsfailed
    out = subprocess.run(
        ["nm", "-D", "--defined-only", str(LIB_PATH)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    exported = {
        line.split()[-1]
        for line in out.splitlines()
        if line.split()[-1].startswith("nvml")
    }
    buf = ctypes.create_string_buffer(64 * 1024)
    n = FAKE_LIB.gpuopsFakeNvmlCalledFunctions(buf, len(buf))
    assert n >= 0
    called = set(buf.value.decode().split())
    missing = sorted(exported - called)
    assert (
        not missing
    ), f"exported but never called by any test ({failed} test(s) failed earlier): {missing}"
    hooks = {"gpuopsFakeNvmlSimulateReboot", "gpuopsFakeNvmlResetGpu", "gpuopsFakeNvmlSetBusy",
             "gpuopsFakeNvmlClearBusy", "gpuopsFakeNvmlDescribe"}
    assert hooks <= called, sorted(hooks - called)

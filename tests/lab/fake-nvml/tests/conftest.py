"""Test fixtures for the fake NVML library.

fakenvml_util (imported first) builds the library if needed and loads it by
ABSOLUTE path with ctypes before pynvml is imported, so that pynvml's
CDLL("libnvidia-ml.so.1") finds the already-loaded fake by its soname.
Profiles are selected per test through GPUOPS_FAKE_NVML_PROFILE /
GPUOPS_FAKE_NVML_STATE, which the library reads at every nvmlInit.
"""

from pathlib import Path

from fakenvml_util import FAKE_LIB, profile_path  # noqa: I001  (loads the fake first)

import pynvml
import pytest


@pytest.fixture
def nvml(tmp_path, monkeypatch):
    """nvml(profile, state=None) -> pynvml, initialised on that profile.

    The state file defaults to one per profile under tmp_path. Every
    successful init is balanced by an nvmlShutdown at teardown.
    """
    inits = []

    # the simulated node's boot record and installed driver package: none unless a test writes them
    monkeypatch.setenv("GPUOPS_FAKE_NVML_BOOT", str(tmp_path / "boot"))
    monkeypatch.setenv("GPUOPS_FAKE_NVML_LIBRARY", str(tmp_path / "libnvidia-ml1.txt"))

    def start(profile, state=None):
        monkeypatch.setenv("GPUOPS_FAKE_NVML_PROFILE", str(profile_path(profile)))
        monkeypatch.setenv(
            "GPUOPS_FAKE_NVML_STATE",
            str(state or tmp_path / f"{Path(str(profile)).stem}.state"),
        )
        pynvml.nvmlInit()
        inits.append(profile)
        return pynvml

    yield start
    for _init in inits:  # tests may have shut down themselves already
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError_Uninitialized:
            break


@pytest.fixture(autouse=True)
def _nvml_isolation():
    """No test leaves the library initialised for the next one."""
    yield
    for _attempt in range(100):
        if FAKE_LIB.nvmlShutdown() != 0:
            break


@pytest.fixture
def h100(nvml):
    return nvml("hgx-h100")


# ---- keep the symbol-coverage check last, and only judge complete runs ----

COVERAGE_TEST = "test_fakenvml_zz_coverage.py"


@pytest.hookimpl(trylast=True)
def pytest_collection_modifyitems(session, config, items):
    ours = [i for i in items if i.path.parent == Path(__file__).parent]
    cov = [i for i in ours if i.path.name == COVERAGE_TEST]
    for item in cov:
        items.remove(item)
        items.append(item)
    files_run = {i.path.name for i in ours}
    files_all = {p.name for p in Path(__file__).parent.glob("test_*.py")}
    config._fakenvml_complete = (
        files_run == files_all
        and not config.getoption("keyword")
        and not config.getoption("markexpr")
        and not config.getoption("lf", False)
        and not config.getoption("deselect", None)
    )

# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Contract test against a real NVIDIA GPU: gpu_info, read-only, on this machine's driver.

Runs only where an NVIDIA driver is loaded (/proc/driver/nvidia/version exists); everywhere
else it is skipped with that reason. It changes nothing: no MIG mode, clocks or resets."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys

import pytest

from conftest import REPO, _env, require  # pylint: disable=import-error

pytestmark = pytest.mark.skipif(not os.path.exists("/proc/driver/nvidia/version"),
                                reason="no NVIDIA driver loaded on this machine (no real GPU)")


@pytest.fixture(scope="module")
def real():
    env = _env()
    env.pop("LD_LIBRARY_PATH", None)
    env.pop("GPUOPS_FAKE_NVML_PROFILE", None)
    proc = subprocess.run([os.path.join(os.path.dirname(sys.executable), "ansible"), "localhost",
                           "-m", "gpuops.nvidia.gpu_info", "-a", "xid_wait_ms=100"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=300, check=True)
    return json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]


def test_driver_and_gpus(real):
    assert real["changed"] is False
    assert real["driver"]["loaded"] is True, real["driver"]
    assert real["driver"]["kernel_module"]["loaded"] is True
    assert real["driver"]["version"] == real["driver"]["kernel_module"]["version"]
    assert real["gpu_count"] >= 1
    for gpu in real["gpus"]:
        assert gpu["name"] and gpu["uuid"].startswith("GPU-")
        assert gpu["pci"]["vendor_id"] == "0x10de"
        assert gpu["memory"]["total_mib"] > 0
        assert gpu["architecture"] != "unknown"
    print("\nreal GPU contract: driver %s (CUDA %s, %s module), %d GPU(s): %s; findings: %s" % (
        real["driver"]["version"], real["driver"]["cuda_driver_version"],
        real["driver"]["kernel_module"]["flavour"], real["gpu_count"],
        ", ".join("%s %s MiB %s PCIe Gen%s x%s" % (g["name"], g["memory"]["total_mib"], g["architecture"],
                                                   g["pcie"]["gen_current"], g["pcie"]["width_current"])
                  for g in real["gpus"]),
        [f["code"] for f in real["health"]]))


def test_agrees_with_nvidia_smi(real):
    require(shutil.which("nvidia-smi"), "nvidia-smi", "it comes with the NVIDIA driver's utilities; install them")
    out = subprocess.run(["nvidia-smi", "--query-gpu=index,uuid,name,pci.bus_id,memory.total",
                          "--format=csv,noheader,nounits"], capture_output=True, text=True, check=True,
                         env=dict(os.environ, LANG="C")).stdout
    rows = [[cell.strip() for cell in line.split(",")] for line in out.strip().splitlines()]
    assert [(int(r[0]), r[1], r[2], r[3].lower()) for r in rows] == [
        (g["index"], g["uuid"], g["name"], g["pci"]["bus_id"]) for g in real["gpus"]]
    assert [int(r[4]) for r in rows] == [g["memory"]["total_mib"] for g in real["gpus"]]

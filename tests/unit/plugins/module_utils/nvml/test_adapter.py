# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVML adapter against the lab's fake libnvidia-ml.so.1, through the real pynvml.

The fake is loaded by absolute path before pynvml opens `libnvidia-ml.so.1`, so pynvml binds
to it; each test picks a node profile through the environment the fake reads at nvmlInit."""
from __future__ import annotations

import ctypes
import json
import os
import subprocess
import sys

import pytest

TESTS = os.path.dirname(os.path.abspath(__file__))
COLLECTION = os.path.abspath(os.path.join(TESTS, "..", "..", "..", "..", ".."))
FAKE = os.path.join(COLLECTION, "tests", "lab", "fake-nvml")
LIB = os.path.join(FAKE, "build", "libnvidia-ml.so.1")

if not os.path.exists(LIB):
    raise RuntimeError("build the lab's fake NVML first: make fake-nvml (missing %s)" % LIB)
ctypes.CDLL(LIB)

import pynvml  # noqa: E402  pylint: disable=wrong-import-position

from ansible_collections.gpuops.nvidia.plugins.module_utils.report import health
from ansible_collections.gpuops.nvidia.plugins.module_utils.nvml import adapter as nvml


@pytest.fixture
def node(tmp_path, monkeypatch):
    """node(profile) selects a simulated node; nvml.read_node() then reads it."""
    def select(profile):
        monkeypatch.setenv("GPUOPS_FAKE_NVML_PROFILE", os.path.join(FAKE, "profiles", profile + ".profile"))
        monkeypatch.setenv("GPUOPS_FAKE_NVML_STATE", str(tmp_path / (profile + ".state")))
    return select


def test_hgx_h100(node):
    node("hgx-h100")
    snap = nvml.read_node()
    driver, gpus = snap["driver"], snap["gpus"]
    assert driver["loaded"] is True and driver["reason"] is None
    assert driver["version"] == "570.172.08"
    assert driver["cuda_driver_version"] == "12.8"
    assert driver["nvml_version"] == "12.570.172.08"
    assert len(gpus) == 8
    assert {g["name"] for g in gpus} == {"NVIDIA H100 80GB HBM3"}
    assert [g["index"] for g in gpus] == list(range(8))
    assert len({g["uuid"] for g in gpus}) == 8 and all(g["uuid"].startswith("GPU-") for g in gpus)
    assert len({g["pci"]["bus_id"] for g in gpus}) == 8
    first = gpus[0]
    assert first["architecture"] == "hopper" and first["compute_capability"] == "9.0"
    assert first["pci"]["pci_device_id"] == "0x233010DE"
    assert first["pci"]["device_id"] == "0x2330" and first["pci"]["vendor_id"] == "0x10de"
    assert first["memory"]["total_mib"] == 81559
    assert first["pcie"] == {"gen_current": 5, "gen_max": 5, "gen_gpu_max": 5, "width_current": 16, "width_max": 16}
    assert first["persistence_mode"] is True
    assert first["power"]["limit_w"] == 700.0
    assert first["temperature_c"] == 31
    assert first["temperature_limits_c"] == {"shutdown": 92, "slowdown": 89, "memory_max": 95, "gpu_max": 87}
    assert first["ecc"]["enabled"] is True
    assert first["remapped_rows"] == {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False}
    assert first["nvlink"]["total"] == 18 and first["nvlink"]["active"] == 18
    assert {link["remote_type"] for link in first["nvlink"]["links"]} == {"nvswitch"}
    assert [g["numa_node"] for g in gpus] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert gpus[0]["cpu_affinity"] == "0-55,112-167"
    assert gpus[7]["cpu_affinity"] == "56-111,168-223"
    assert first["mig"] == {"capable": True, "current": False, "pending": False, "gpu_instances": [], "devices": []}
    assert first["clock_event_reasons"] == ["gpu_idle"]
    # 8 GPUs: 28 pairs, every one over NVLink through the NVSwitches.
    assert len(snap["topology"]) == 28
    assert all(pair["nvlink"] for pair in snap["topology"])


def test_pcie_server_topology_without_nvlink(node):
    node("l40s-x4")
    snap = nvml.read_node()
    assert [g["name"] for g in snap["gpus"]] == ["NVIDIA L40S"] * 4
    assert snap["gpus"][0]["architecture"] == "ada"
    assert snap["gpus"][0]["mig"] == {"capable": False}
    assert snap["gpus"][0]["nvlink"] == {"links": [], "total": 0, "active": 0}
    # limits the GPU does not report are null, not an error
    assert snap["gpus"][0]["temperature_limits_c"] == dict.fromkeys(["shutdown", "slowdown", "memory_max", "gpu_max"])
    assert len(snap["topology"]) == 6
    assert not any(pair["nvlink"] for pair in snap["topology"])
    assert {pair["pcie"] for pair in snap["topology"]} <= {"PIX", "PXB", "PHB", "NODE", "SYS"}


@pytest.mark.parametrize("profile, reason, code", [
    ("driver-not-loaded", "driver_not_loaded", 9),
    ("version-mismatch", "version_mismatch", 18),
])
def test_driver_states(node, profile, reason, code):
    node(profile)
    snap = nvml.read_node()
    assert snap["gpus"] == [] and snap["topology"] == []
    assert snap["driver"]["loaded"] is False
    assert snap["driver"]["reason"] == reason
    assert snap["driver"]["nvml_error_code"] == code
    assert snap["driver"]["message"]


def test_library_not_found_is_a_reason(monkeypatch):
    def missing():
        raise pynvml.NVMLError(pynvml.NVML_ERROR_LIBRARY_NOT_FOUND)
    monkeypatch.setattr(pynvml, "nvmlInit", missing)
    snap = nvml.read_node()
    assert snap["driver"]["reason"] == "library_not_found"


def test_faults(node):
    node("hgx-h100-faults")
    gpus = nvml.read_node(xid_wait_ms=50)["gpus"]
    assert len(gpus) == 8
    lost = [g for g in gpus if g["lost"]]
    assert [g["index"] for g in lost] == [7]
    assert lost[0]["pci"]["bus_id"] == "00000000:df:00.0"
    assert sorted(gpus[1]["xids"]) == [48, 79]
    assert gpus[2]["xids"] == [94]
    assert gpus[1]["ecc"]["volatile"]["uncorrected"] == 2
    assert gpus[2]["remapped_rows"]["failure"] is True
    assert (gpus[3]["pcie"]["width_current"], gpus[3]["pcie"]["gen_current"]) == (8, 3)
    assert {"hw_slowdown", "sw_thermal_slowdown", "sw_power_cap"} <= set(gpus[4]["clock_event_reasons"])
    assert [link["link"] for link in gpus[5]["nvlink"]["links"] if not link["active"]] == [0, 7, 12]
    # The lost GPU drops out of the topology; the others stay.
    assert all(7 not in pair["gpus"] for pair in nvml.read_node()["topology"])


def test_a_gpu_whose_handle_fails_is_unreachable_not_a_new_gpu(node):
    """nvmlDeviceGetHandleByIndex failing with an error other than GPU_IS_LOST (here UNKNOWN):
    the GPU is reported lost with NVML's error, so the inventory does not see a GPU swapped for
    one without a serial on every run. (Faults are read once per process: a child process.)"""
    node("hgx-h100")
    script = ("import ctypes, json; ctypes.CDLL(%r); "
              "from ansible_collections.gpuops.nvidia.plugins.module_utils.nvml import adapter as nvml; "
              "print(json.dumps(nvml.read_node()['gpus']))" % LIB)
    env = dict(os.environ, GPUOPS_FAKE_NVML_FAULTS="nvmlDeviceGetHandleByIndex_v2:4=UNKNOWN",
               PYTHONPATH=os.pathsep.join(p for p in sys.path if p))
    out = subprocess.run([sys.executable, "-c", script], env=env, capture_output=True, text=True, check=True)
    gpus = json.loads(out.stdout)
    broken = [g for g in gpus if g["lost"]]
    assert len(gpus) == 8 and [g["index"] for g in broken] == [3] and "Unknown Error" in broken[0]["error"]
    found = health.gpu_findings(broken[0])
    assert found[0]["code"] == "gpu_lost" and "NVML answers Unknown Error" in found[0]["message"]


def test_xids_only_when_listening(node):
    node("hgx-h100-faults")
    assert all(g["xids"] == [] for g in nvml.read_node(xid_wait_ms=0)["gpus"])


def _enable_mig_with_instances(index):
    """Set up MIG on one GPU through pynvml, as an operator's tool would: 4g.40gb + 3g.40gb."""
    pynvml.nvmlInit()
    try:
        handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        pynvml.nvmlDeviceSetMigMode(handle, pynvml.NVML_DEVICE_MIG_ENABLE)
        for profile_index in (pynvml.NVML_GPU_INSTANCE_PROFILE_4_SLICE, pynvml.NVML_GPU_INSTANCE_PROFILE_3_SLICE):
            info = pynvml.nvmlDeviceGetGpuInstanceProfileInfo(handle, profile_index)
            gpu_instance = pynvml.nvmlDeviceCreateGpuInstance(handle, info.id)
            ci_info = pynvml.nvmlGpuInstanceGetComputeInstanceProfileInfo(
                gpu_instance, profile_index, pynvml.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED)
            pynvml.nvmlGpuInstanceCreateComputeInstance(gpu_instance, ci_info.id)
    finally:
        pynvml.nvmlShutdown()


def test_mig_layout(node):
    node("hgx-h100")
    _enable_mig_with_instances(2)
    gpus = nvml.read_node()["gpus"]
    mig = gpus[2]["mig"]
    assert mig["capable"] and mig["current"] and mig["pending"]
    assert [(gi["profile"], gi["profile_id"], gi["placement"]) for gi in mig["gpu_instances"]] == [
        ("4g.40gb", 5, {"start": 0, "size": 4}), ("3g.40gb", 9, {"start": 4, "size": 4})]
    assert all(len(gi["compute_instances"]) == 1 for gi in mig["gpu_instances"])
    assert len(mig["devices"]) == 2
    assert all(dev["uuid"].startswith("MIG-") for dev in mig["devices"])
    assert [dev["memory_total_mib"] for dev in mig["devices"]] == [40448, 40448]
    assert {dev["gpu_instance_id"] for dev in mig["devices"]} == {gi["id"] for gi in mig["gpu_instances"]}
    # The other GPUs are untouched.
    assert gpus[0]["mig"]["current"] is False


@pytest.mark.parametrize("code, reason", [
    (pynvml.NVML_ERROR_LIBRARY_NOT_FOUND, "library_not_found"),
    (pynvml.NVML_ERROR_DRIVER_NOT_LOADED, "driver_not_loaded"),
    (pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH, "version_mismatch"),
    (pynvml.NVML_ERROR_NO_PERMISSION, "no_permission"),
    (pynvml.NVML_ERROR_UNKNOWN, "nvml_error"),
])
def test_a_session_that_cannot_open_says_why(monkeypatch, code, reason):
    def refuse():
        raise pynvml.NVMLError(code)
    monkeypatch.setattr(pynvml, "nvmlInit", refuse)
    with pytest.raises(nvml.NvmlError) as err:
        with nvml.session():
            pytest.fail("the block runs only with NVML open")
    assert (err.value.reason, err.value.code) == (reason, code) and err.value.message


def test_a_session_maps_nvml_errors_and_always_shuts_down(node, monkeypatch):
    node("hgx-h100")
    shutdowns = []
    real = pynvml.nvmlShutdown
    monkeypatch.setattr(pynvml, "nvmlShutdown", lambda: shutdowns.append(real()))
    with pytest.raises(nvml.NvmlError) as err:
        with nvml.session():
            pynvml.nvmlDeviceGetHandleByIndex(99)
    assert err.value.reason is None and err.value.code == pynvml.NVML_ERROR_INVALID_ARGUMENT
    with pytest.raises(nvml.NvmlError):
        with nvml.session():
            nvml.call("nvmlDeviceGetHandleByIndex", 99)
    with nvml.session():
        assert nvml.call("nvmlDeviceGetCount") == 8
        assert nvml.quiet("nvmlDeviceGetHandleByIndex", 99) is None
        assert nvml.quiet("nvmlNoSuchFunction") is None
    assert len(shutdowns) == 3


def test_without_bindings_no_session_opens(monkeypatch):
    monkeypatch.setattr(nvml, "HAS_PYNVML", False)
    with pytest.raises(nvml.NvmlError) as err:
        with nvml.session():
            pytest.fail("the block runs only with NVML open")
    assert err.value.reason == "bindings_missing"
    assert nvml.read_driver() == {"loaded": False, "reason": "bindings_missing", "message": "pynvml is not installed",
                                  "version": None}
    assert nvml.read_node()["driver"]["reason"] == "bindings_missing"

# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpuops.nvidia.gpu_info through `ansible localhost -m`, on every simulated node and driver
state. Everything crosses the real process boundary: ansible -> module subprocess -> pynvml ->
the lab's libnvidia-ml.so.1."""
from __future__ import annotations

import os
import subprocess
import sys

import pytest

from conftest import REPO, mig_script  # pylint: disable=import-error

GPU_PROFILES = [
    # profile, count, name, architecture, compute capability, MIG capable, NVLinks per GPU
    ("hgx-h100", 8, "NVIDIA H100 80GB HBM3", "hopper", "9.0", True, 18),
    ("hgx-h200", 8, "NVIDIA H200", "hopper", "9.0", True, 18),
    ("dgx-a100", 8, "NVIDIA A100-SXM4-40GB", "ampere", "8.0", True, 12),
    ("a100-80gb-pcie-x2", 2, "NVIDIA A100 80GB PCIe", "ampere", "8.0", True, None),
    ("l40s-x4", 4, "NVIDIA L40S", "ada", "8.9", False, 0),
    ("t4-x1", 1, "Tesla T4", "turing", "7.5", False, 0),
    ("hgx-b200", 8, "NVIDIA B200", "blackwell", "10.0", True, 18),
]


@pytest.mark.parametrize("profile, count, name, arch, cc, mig, nvlinks", GPU_PROFILES)
def test_profiles(lab, profile, count, name, arch, cc, mig, nvlinks):
    result = lab.module(profile)
    assert result["changed"] is False
    assert result["driver"]["loaded"] is True
    assert result["driver"]["version"]
    assert int(result["driver"]["version"].split(".")[0]) >= 535
    assert result["driver"]["cuda_driver_version"]
    assert result["gpu_count"] == count == len(result["gpus"])
    for gpu in result["gpus"]:
        assert gpu["name"] == name
        assert gpu["architecture"] == arch and gpu["compute_capability"] == cc
        assert gpu["mig"]["capable"] is mig
        assert gpu["uuid"].startswith("GPU-") and gpu["serial"]
        assert gpu["pci"]["vendor_id"] == "0x10de"
        assert gpu["memory"]["total_mib"] > 15000
        assert gpu["pcie"]["width_current"] == gpu["pcie"]["width_max"]
        assert 0 < gpu["power"]["draw_w"] < gpu["power"]["limit_w"]
        assert 0 < gpu["temperature_c"] < 90
        if nvlinks is not None:
            assert gpu["nvlink"]["total"] == nvlinks == gpu["nvlink"]["active"]
    assert len({gpu["uuid"] for gpu in result["gpus"]}) == count
    assert len(result["topology"]) == count * (count - 1) // 2
    assert result["health"] == [] and result["healthy"] is True


def test_hgx_h100_check_mode_reports_the_same(lab):
    normal = lab.module("hgx-h100", args="kernel_log=false")
    checked = lab.module("hgx-h100", args="kernel_log=false", check_mode=True)
    assert checked["changed"] is False
    assert [g["uuid"] for g in checked["gpus"]] == [g["uuid"] for g in normal["gpus"]]


@pytest.mark.parametrize("profile, reason, code", [
    ("none", "library_not_found", "library_not_found"),
    ("driver-not-loaded", "driver_not_loaded", "driver_not_loaded"),
    ("version-mismatch", "version_mismatch", "version_mismatch"),
])
def test_driver_states_are_reported_not_failed(lab, profile, reason, code):
    result = lab.module(profile)
    assert result.get("failed") is not True
    assert result["changed"] is False
    assert result["driver"]["loaded"] is False
    assert result["driver"]["reason"] == reason
    assert result["gpu_count"] == 0
    assert [f["code"] for f in result["health"]] == [code]
    assert result["healthy"] is False


def test_faults_are_findings(lab):
    result = lab.module("hgx-h100-faults")
    found = {(f["gpu"], f["code"]) for f in result["health"]}
    assert found == {
        (1, "xid"), (1, "ecc_uncorrectable"),
        (2, "ecc_uncorrectable"), (2, "row_remap_failure"),
        (3, "pcie_link_degraded"),
        (4, "throttle_hw_slowdown"), (4, "throttle_thermal"), (4, "throttle_power_cap"),
        (5, "nvlink_down"),
        (7, "gpu_lost"),
    }
    xids = sorted((f["gpu"], f["xid"]) for f in result["health"] if f["code"] == "xid")
    # XID 48 (GPU 1) and 94 (GPU 2) are the ECC counters' events: one finding each, both sources named
    assert xids == [(1, 79)]
    merged = {f["gpu"]: f for f in result["health"] if f["code"] == "ecc_uncorrectable"}
    assert merged[1]["xids"] == [48] and merged[2]["xids"] == [94]
    assert merged[1]["sources"] == ["NVML ECC counters", "XID 48 (double-bit ECC error (DBE))"]
    assert result["healthy"] is False
    assert result["health_counts"] == {"error": 6, "warning": 3, "info": 1}
    for finding in result["health"]:
        assert finding["message"] and finding["fix"] and finding["subject"]
        assert finding["uuid"] or finding["code"] == "gpu_lost"


def test_kernel_log_and_loaded_module_from_host_root(lab, tmp_path):
    (tmp_path / "proc/driver/nvidia").mkdir(parents=True)
    (tmp_path / "proc/driver/nvidia/version").write_text(
        "NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.172.08  Release Build  "
        "(dvs-builder@U16-I3-B03-4-3)  Wed Jul  2 14:39:51 UTC 2025\n")
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev/kmsg").write_text(
        "4,1187,9123456789,-;NVRM: Xid (PCI:0000:1b:00): 63, pid=1, name=python3, Row remapper: New row marked for remapping\n"
        "4,1188,9123456790,-;NVRM: Xid (PCI:0000:ee:00): 79, pid=0, name=<unknown>, GPU has fallen off the bus.\n")
    result = lab.module("hgx-h100", args="host_root=%s xid_wait_ms=0" % tmp_path)
    assert result["driver"]["kernel_module"] == {
        "loaded": True, "version": "570.172.08", "flavour": "open", "source": "/proc/driver/nvidia/version"}
    assert result["kernel_log"] == {"read": True, "error": None}
    assert result["gpus"][0]["xids"] == [63]
    # the node's findings by severity: the XID of a GPU NVML no longer lists first
    assert [(f["gpu"], f["code"], f["severity"]) for f in result["health"]] == [
        (None, "xid", "error"), (0, "xid", "warning")]
    assert "00000000:ee:00.0" in result["health"][0]["message"]
    assert result["health"][0]["subject"] == "00000000:ee:00.0"


def test_unreadable_kernel_log_is_reported(lab, tmp_path):
    result = lab.module("t4-x1", args="host_root=%s" % tmp_path)
    assert result["kernel_log"]["read"] is False
    assert "/dev/kmsg" in result["kernel_log"]["error"]
    assert result["healthy"] is True


def test_bad_argument_fails_clearly(lab):
    result = lab.module("t4-x1", args="xid_wait_ms=-5", expect_failure=True)
    assert result["failed"] is True
    assert "xid_wait_ms must be 0 (off) or a positive number" in result["msg"]


def test_existing_mig_layout_is_reported(lab):
    # Another process (an operator's tool) partitions GPU 0; gpu_info, in its own process, sees it.
    lab.run("hgx-h200", [sys.executable, "-c", mig_script(0, "1_SLICE", 3)])
    result = lab.module("hgx-h200")
    mig = result["gpus"][0]["mig"]
    assert mig["current"] is True
    assert [gi["profile"] for gi in mig["gpu_instances"]] == ["1g.18gb"] * 3
    assert [gi["profile_id"] for gi in mig["gpu_instances"]] == [19] * 3
    starts = [gi["placement"]["start"] for gi in mig["gpu_instances"]]
    assert len(set(starts)) == 3 and all(0 <= start <= 6 for start in starts)
    assert {gi["placement"]["size"] for gi in mig["gpu_instances"]} == {1}
    assert len(mig["devices"]) == 3
    assert len({d["uuid"] for d in mig["devices"]}) == 3
    assert result["gpus"][1]["mig"]["current"] is False


def test_mig_mode_pending_until_reset(lab):
    script = ("import pynvml; pynvml.nvmlInit(); h = pynvml.nvmlDeviceGetHandleByIndex(3); "
              "print(pynvml.nvmlDeviceSetMigMode(h, 1)); pynvml.nvmlShutdown()")
    lab.run("dgx-a100-mig-pending", [sys.executable, "-c", script])
    mig = lab.module("dgx-a100-mig-pending")["gpus"][3]["mig"]
    assert (mig["current"], mig["pending"]) == (False, True)
    lab.run("dgx-a100-mig-pending", [os.path.join(REPO, "tests/lab/fake-nvml/fake-nvml-reset")])
    mig = lab.module("dgx-a100-mig-pending")["gpus"][3]["mig"]
    assert (mig["current"], mig["pending"]) == (True, True)


def test_module_needs_pynvml(lab, tmp_path):
    """On a host without the bindings the module fails and says what to install."""
    venv = tmp_path / "bare"
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", str(venv)], check=True)
    proc = lab.run("t4-x1", [os.path.join(os.path.dirname(sys.executable), "ansible"), "localhost",
                             "-m", "gpuops.nvidia.gpu_info"], check=False,
                   env={"ANSIBLE_PYTHON_INTERPRETER": str(venv / "bin" / "python")})
    assert proc.returncode != 0
    assert "nvidia-ml-py (Python module pynvml)" in proc.stdout


def test_as_facts_reach_later_plays(lab):
    _proc, out = lab.playbook("dgx-a100", os.path.join(REPO, "tests", "integration", "playbooks", "facts.yml"))
    facts = out["plays"][1]["tasks"][0]["hosts"]["localhost"]["ansible_facts"]
    assert facts == {"models": ["NVIDIA A100-SXM4-40GB"], "mig_capable": 8}


@pytest.mark.parametrize("module, args", [
    ("gpuops.nvidia.gpu_info", ""), ("gpuops.nvidia.driver_status", ""), ("gpuops.nvidia.container_runtime_info", ""),
    ("gpuops.nvidia.gpu_report", ""), ("gpuops.nvidia.node_audit", ""), ("gpuops.nvidia.cdi_spec_check", ""),
    ("gpuops.nvidia.preflight", "driver_branch=580"), ("gpuops.nvidia.mig", "config_name=all-disabled"),
])
def test_a_mistyped_host_root_fails_instead_of_reading_an_empty_node(lab, tmp_path, module, args):
    """A host_root that does not exist was read as a node with nothing on it ("no NVIDIA driver
    is installed", no runtime, no GPU files): every module that reads under it now refuses it."""
    missing = str(tmp_path / "hots")
    result = lab.module("hgx-h100", module=module, args=("%s host_root=%s" % (args, missing)).strip(),
                        expect_failure=True)
    assert result.get("failed") is True, result
    assert result["msg"] == ("host_root %s does not exist: give the directory where the node's / is mounted (for "
                             "example /host), or / on the node itself; nothing was read or changed" % missing)

# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpuops.nvidia.preflight through `ansible localhost -m` on simulated nodes, with and without
a driver, for good plans and every kind of bad one. The module must change nothing."""
from __future__ import annotations

import os

import pytest

from conftest import tree_digest  # pylint: disable=import-error

GOOD_PLANS = [
    ("hgx-h100", "driver_branch=580 cuda_version=13.0 mig_required=true", "open"),
    ("hgx-h200", "driver_branch=R580 mig_required=true", "open"),
    ("hgx-b200", "driver_branch=580 cuda_version=12.8", "open"),
    ("dgx-a100", "driver_branch=570 mig_required=true", "open"),
    ("a100-80gb-pcie-x2", "driver_branch=580", "open"),
    ("l40s-x4", "driver_branch=580 cuda_version=12.9", "open"),
    ("t4-x1", "driver_branch=580 kernel_module_type=proprietary", "proprietary"),
]


@pytest.mark.parametrize("profile, args, flavour", GOOD_PLANS)
def test_good_plans_pass(lab, profile, args, flavour):
    result = lab.module(profile, module="gpuops.nvidia.preflight", args=args)
    assert result["changed"] is False
    assert result["passed"] is True
    assert [f for f in result["findings"] if f["severity"] == "error"] == []
    assert result["recommendation"]["kernel_module_type"] == flavour
    assert len(result["gpus"]) >= 1


def test_r470_on_h100_fails_naming_hopper_and_the_branches(lab):
    result = lab.module("hgx-h100", module="gpuops.nvidia.preflight", args="driver_branch=470", expect_failure=True)
    assert result["failed"] is True
    assert "NVIDIA H100 80GB HBM3 (Hopper) needs driver branch R525 and newer; branch R470 was requested" in result["msg"]
    assert "Supported branches for Hopper: R535," in result["msg"] and "R580" in result["msg"]


def test_r580_on_h100_recommends_open_modules_and_fabric_manager(lab):
    result = lab.module("hgx-h100", module="gpuops.nvidia.preflight", args="driver_branch=580")
    assert result["passed"] is True
    assert result["recommendation"]["kernel_module_type"] == "open"
    assert result["nvswitch_count"] == 4  # seen behind the GPUs' NVLinks
    assert "nvidia-fabricmanager-580" in result["recommendation"]["packages"]


BAD_PLANS = [
    ("hgx-h100", "driver_branch=470", "branch_unsupported_gpu", "Hopper"),
    ("hgx-b200", "driver_branch=580 kernel_module_type=proprietary", "flavour_open_required",
     "NVIDIA B200 (Blackwell) only runs with the open kernel modules"),
    ("hgx-h100", "driver_branch=535 cuda_version=13.0", "cuda_driver_too_old",
     "CUDA 13.0 needs driver >= 580.65.06; branch 535 was requested"),
    ("l40s-x4", "driver_branch=580 mig_required=true", "mig_unsupported", "NVIDIA L40S (Ada) does not support MIG"),
    ("t4-x1", "driver_branch=580 mig_required=true", "mig_unsupported", "Tesla T4 (Turing) does not support MIG"),
    ("hgx-h100", "driver_branch=latest", "branch_invalid", "is not a branch number"),
    ("hgx-h100", "driver_branch=123", "branch_unknown", "R123 is not a published NVIDIA datacenter branch"),
]


@pytest.mark.parametrize("profile, args, code, text", BAD_PLANS)
def test_bad_plans_fail_clearly_and_change_nothing(lab, profile, args, code, text):
    watched = ("/etc/apt", "/etc/modprobe.d")
    before = tree_digest(*watched)
    result = lab.module(profile, module="gpuops.nvidia.preflight", args=args, expect_failure=True)
    assert result["failed"] is True and result["changed"] is False
    errors = [f for f in result["findings"] if f["severity"] == "error"]
    assert code in [f["code"] for f in errors]
    assert text in result["msg"]
    assert all(f["fix"] for f in result["findings"])
    assert tree_digest(*watched) == before


def _host_tree(root, os_release, pci_ids=None, devices=()):
    files = {"etc/os-release": os_release, "proc/sys/kernel/osrelease": "6.1.0-28-amd64\n"}
    if pci_ids:
        files["usr/share/misc/pci.ids"] = pci_ids
    for bus_id, device, pci_class in devices:
        for name, value in (("vendor", 0x10de), ("device", device), ("class", pci_class),
                            ("subsystem_vendor", 0x10de), ("subsystem_device", 0x16c1)):
            files["sys/bus/pci/devices/%s/%s" % (bus_id, name)] = "0x%04x\n" % value
    for rel, content in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as handle:
            handle.write(content)
    os.makedirs(os.path.join(root, "lib/modules/6.1.0-28-amd64/build"))
    return root


def test_unsupported_distribution(lab, tmp_path):
    os_release = 'ID="opensuse-leap"\nID_LIKE="suse opensuse"\nVERSION_ID="15.5"\nPRETTY_NAME="openSUSE Leap 15.5"\n'
    root = _host_tree(str(tmp_path / "host"), os_release)
    before = tree_digest(root)
    result = lab.module("hgx-h100", module="gpuops.nvidia.preflight",
                        args="driver_branch=580 host_root=%s" % root, expect_failure=True)
    assert "NVIDIA's CUDA repositories do not serve openSUSE Leap 15.5" in result["msg"]
    assert tree_digest(root) == before


PCI_IDS = "10de  NVIDIA Corporation\n\t22a3  GH100 [H100 NVSwitch]\n\t2330  GH100 [H100 SXM5 80GB]\n"


def test_before_any_driver_gpus_come_from_the_pci_bus(lab, tmp_path):
    devices = [("0000:%02x:00.0" % bus, 0x2330, 0x030200) for bus in (0x18, 0x2a, 0x3a, 0x5d)]
    devices += [("0000:%02x:00.0" % bus, 0x22a3, 0x068000) for bus in (0x05, 0x06)]
    os_release = 'ID=debian\nVERSION_ID="12"\nPRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\n'
    root = _host_tree(str(tmp_path / "host"), os_release, PCI_IDS, devices)
    result = lab.module("none", module="gpuops.nvidia.preflight",
                        args="driver_branch=470 host_root=%s" % root, expect_failure=True)
    assert result["driver"]["reason"] == "library_not_found"
    assert [g["name"] for g in result["gpus"]] == ["GH100 [H100 SXM5 80GB]"] * 4
    assert result["nvswitch_count"] == 2
    assert "GH100 [H100 SXM5 80GB] (Hopper) needs driver branch R525 and newer" in result["msg"]
    good = lab.module("none", module="gpuops.nvidia.preflight", args="driver_branch=580 host_root=%s" % root)
    assert good["passed"] is True
    assert good["recommendation"]["packages"] == ["nvidia-open", "nvidia-fabricmanager-580"]
    # Debian's own packages stop at R535 and have no fabric manager for the NVSwitches.
    distro = lab.module("none", module="gpuops.nvidia.preflight",
                        args="driver_branch=535 source=distro host_root=%s" % root, expect_failure=True)
    assert {f["code"] for f in distro["findings"] if f["severity"] == "error"} == {"fabric_manager_unavailable"}


def test_fail_on_problems_false_returns_the_findings(lab):
    result = lab.module("l40s-x4", module="gpuops.nvidia.preflight",
                        args="driver_branch=470 mig_required=true fail_on_problems=false")
    assert result.get("failed") is not True and result["passed"] is False
    assert {f["code"] for f in result["findings"] if f["severity"] == "error"} == {
        "branch_unsupported_gpu", "mig_unsupported"}


def test_driver_status_on_a_host_without_a_driver(lab, tmp_path):
    result = lab.module("none", module="gpuops.nvidia.driver_status", args="host_root=%s" % tmp_path)
    assert result["changed"] is False
    assert result["state"] == "not_installed"
    assert result["reboot_required"] is False
    assert result["installed_version"] is None and result["loaded_version"] is None


def test_driver_status_reads_the_loaded_module(lab, tmp_path):
    (tmp_path / "sys/module/nvidia").mkdir(parents=True)
    (tmp_path / "sys/module/nvidia/version").write_text("580.95.05\n")
    (tmp_path / "run").mkdir()
    (tmp_path / "run/.containerenv").write_text("")
    result = lab.module("none", module="gpuops.nvidia.driver_status", args="host_root=%s" % tmp_path)
    assert result["loaded_version"] == "580.95.05"
    assert result["can_load_module"] is False
    assert result["state"] in ("loaded_unmanaged", "ready", "loaded_outdated")

# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The gpu_report role and the site playbook through ansible-playbook on simulated nodes."""
from __future__ import annotations

import json
import os

from conftest import REPO  # pylint: disable=import-error

PLAYBOOK = os.path.join(REPO, "tests", "integration", "playbooks", "gpu_report.yml")


def _stats(output):
    return output["stats"]["localhost"]


def _task(output, name):
    for play in output["plays"]:
        for task in play["tasks"]:
            if task["task"]["name"].split(" : ")[-1] == name:
                return task["hosts"]["localhost"]
    raise KeyError(name)


def test_record_check_mode_then_converge_then_idempotent(lab, tmp_path):
    record = tmp_path / "gpuops" / "gpu-inventory.json"
    extra = {"gpu_report_inventory_path": str(record)}

    proc, out = lab.playbook("hgx-h100", PLAYBOOK, extra_vars=extra, check=True, check_mode=True)
    assert _stats(out)["failures"] == 0
    assert not record.exists(), "check mode must not write the record"

    proc, out = lab.playbook("hgx-h100", PLAYBOOK, extra_vars=extra)
    assert _stats(out)["changed"] == 2  # directory and record
    data = json.loads(record.read_text())
    assert data["schema"] == "gpuops.nvidia/gpu-inventory/v1"
    assert data["driver"]["version"] == "570.172.08" and data["driver"]["loaded"] is True
    assert data["gpu_count"] == 8
    assert [g["name"] for g in data["gpus"]] == ["NVIDIA H100 80GB HBM3"] * 8
    assert all(set(g) == {"index", "name", "uuid", "serial", "board_part_number", "vbios_version", "pci",
                          "architecture", "compute_capability", "lost", "mig_mode"} for g in data["gpus"])
    assert oct(record.stat().st_mode & 0o777) == "0o644"
    summary = _task(out, "Show the GPU report")["msg"]
    assert summary[0].startswith("driver 570.172.08 (CUDA 12.8")
    assert summary[1].startswith("GPU 0 NVIDIA H100 80GB HBM3 GPU-")
    assert summary[-1].startswith("health: OK")

    # Readings (power, temperature) change between runs; the record must not.
    proc, out = lab.playbook("hgx-h100", PLAYBOOK, extra_vars=extra)
    assert _stats(out)["changed"] == 0


def test_record_changes_when_the_hardware_does(lab, tmp_path):
    record = tmp_path / "gpu-inventory.json"
    extra = {"gpu_report_inventory_path": str(record)}
    lab.playbook("hgx-h100", PLAYBOOK, extra_vars=extra)
    before = json.loads(record.read_text())
    _proc, out = lab.playbook("hgx-h200", PLAYBOOK, extra_vars=extra)
    assert _stats(out)["changed"] == 1
    after = json.loads(record.read_text())
    assert {g["uuid"] for g in before["gpus"]}.isdisjoint({g["uuid"] for g in after["gpus"]})


def test_health_policy_fails_the_host_with_the_findings(lab, tmp_path):
    extra = {"gpu_report_inventory_path": "", "gpu_report_fail_on": ["error"]}
    proc, out = lab.playbook("hgx-h100-faults", PLAYBOOK, extra_vars=extra, check=False)
    assert proc.returncode != 0
    result = _task(out, "Apply the health policy")
    assert result["failed"] is True
    assert "localhost is not GPU-ready" in result["msg"]
    assert "GPU 7" in result["msg"] and "is lost" in result["msg"]
    assert "XID 79" in result["msg"]
    # Warnings alone do not fail the host when the policy only names errors.
    proc, out = lab.playbook("hgx-h100", PLAYBOOK, extra_vars=extra)
    assert _stats(out)["failures"] == 0


def test_missing_driver_is_reported_and_optionally_fatal(lab, tmp_path):
    extra = {"gpu_report_inventory_path": str(tmp_path / "rec.json")}
    _proc, out = lab.playbook("driver-not-loaded", PLAYBOOK, extra_vars=extra)
    assert _task(out, "Show the GPU report")["msg"][0] == "driver not usable: driver_not_loaded (Driver Not Loaded)"
    assert json.loads((tmp_path / "rec.json").read_text())["driver"]["reason"] == "driver_not_loaded"
    extra["gpu_report_require_driver"] = True
    proc, out = lab.playbook("driver-not-loaded", PLAYBOOK, extra_vars=extra, check=False)
    assert proc.returncode != 0
    msg = _task(out, "Apply the health policy")["msg"]
    assert msg.startswith("localhost is not GPU-ready: [error] node: the NVIDIA driver is installed but its kernel "
                          "module is not loaded (fix: reboot the node"), msg


def test_site_playbook_report_stage(lab, tmp_path):
    # Only the report stage: the driver stages would install packages on the test machine
    # (they are tested in the molecule scenarios and the lab).
    extra = {"gpu_report_install_bindings": False, "gpu_report_inventory_path": str(tmp_path / "rec.json")}
    _proc, out = lab.playbook("l40s-x4", os.path.join(REPO, "playbooks", "site.yml"), extra_vars=extra,
                              tags="report")
    # (a role's argument validation is tagged always, so it shows in every play that has a role)
    ran = [p["play"]["name"] for p in out["plays"]
           if any(not t["task"]["name"].split(" : ")[-1].startswith("Validating arguments") for t in p["tasks"])]
    assert ran == [
        "Stage 0 - check the controller and the inventory",
        "Stage 4 - report the GPUs, driver and GPU health of every node",
        "Stage 7b - stop the nodes that fail the health policy (now that they are labelled and tainted)",
    ]
    assert _stats(out)["failures"] == 0
    assert json.loads((tmp_path / "rec.json").read_text())["gpu_count"] == 4

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
    assert _stats(out)["failures"] == 0 and _stats(out)["changed"] == 1
    assert not record.exists(), "check mode must not write the record"

    proc, out = lab.playbook("hgx-h100", PLAYBOOK, extra_vars=extra)
    assert _stats(out)["changed"] == 1
    data = json.loads(record.read_text())
    assert data["schema"] == "gpuops.nvidia/gpu-inventory/v2" and data["host"] == "localhost"
    assert data["driver"]["version"] == "570.172.08" and data["driver"]["loaded"] is True
    assert data["gpu_count"] == 8 and data["events"] == []
    assert [g["name"] for g in data["gpus"]] == ["NVIDIA H100 80GB HBM3"] * 8
    assert all(g["state"] == "present" and g["slot"] == g["pci"]["bus_id"].lower() for g in data["gpus"])
    assert data["gpus"][7]["serial"] == "1652223008586"
    assert not any("temperature_c" in g or "power" in g for g in data["gpus"]), "readings are not identity"
    assert oct(record.stat().st_mode & 0o777) == "0o644"
    lines = _task(out, "Show the GPU report")["msg"]
    assert lines[0] == "verdict: healthy"
    assert lines[1].startswith("driver 570.172.08 (CUDA 12.8")
    assert lines[2].split()[:3] == ["GPU", "model", "UUID"]
    # one line per GPU: status, index, model, short UUID, temperature/slowdown, power/cap ...
    first = lines[3].split()
    assert first[:5] == ["ok", "0", "H100", "80GB", "HBM3"] and first[5].startswith("GPU-") and len(first[5]) == 12
    assert first[6:8] == ["31/89", "71/700"] and first[-2:] == ["5x16", "18/18"]
    assert len(lines) == 11 and all(len(line) <= 100 for line in lines)

    # Readings (power, temperature) change between runs; the record must not.
    before = record.read_text()
    proc, out = lab.playbook("hgx-h100", PLAYBOOK, extra_vars=extra)
    assert _stats(out)["changed"] == 0 and record.read_text() == before


def test_a_lost_gpu_keeps_its_serial_and_the_report_says_reboot_then_rma(lab, tmp_path):
    """The GPU falls off the bus between two runs: the record keeps its serial and UUID with when it
    was last seen, the change is reported, and the verdict asks for a reboot (an RMA if it stays
    lost), next to the GPU that needs an RMA now."""
    record = tmp_path / "gpu-inventory.json"
    # the simulated node's XID 79 is an NVML event (it has no kernel log of its own): the report
    # listens for it, as on a node whose kernel log cannot be read
    extra = {"gpu_report_inventory_path": str(record), "gpu_report_xid_wait_ms": 200}
    lab.playbook("hgx-h100", PLAYBOOK, extra_vars=extra)
    healthy = json.loads(record.read_text())
    _proc, out = lab.playbook("hgx-h100-faults", PLAYBOOK, extra_vars=extra, check=True, check_mode=True)
    assert json.loads(record.read_text()) == healthy, "check mode must not write the record"
    _proc, out = lab.playbook("hgx-h100-faults", PLAYBOOK, extra_vars=extra)
    assert _stats(out)["changed"] == 1
    data = json.loads(record.read_text())
    gpu7 = data["gpus"][7]
    assert gpu7["state"] == "lost" and gpu7["serial"] == "1652223008586"
    assert gpu7["uuid"] == healthy["gpus"][7]["uuid"] and gpu7["slot"] == "00000000:df:00.0"
    assert gpu7["last_seen"] == healthy["updated"] and gpu7["lost_since"] == data["updated"]
    assert [(e["event"], e["index"], e["serial"]) for e in data["events"]] == [("gpu_lost", 7, "1652223008586")]

    result = _task(out, "Read the driver, GPUs and health, and keep the inventory record")
    assert result["verdict"]["status"] == "rma"
    assert result["changes"][0]["event"] == "gpu_lost"
    lines = _task(out, "Show the GPU report")["msg"]
    text = "\n".join(lines)
    assert all(len(line) <= 100 for line in lines)
    verdict = " ".join(line.strip() for line in lines[:lines.index(next(l for l in lines if l.startswith("driver")))])
    assert verdict.startswith("verdict: RMA GPU 2 (serial 1652223008290, row-remap failure, uncorrectable ECC); "
                              "drain the node and reboot it for GPU 7 (serial 1652223008586, last seen %s, lost; "
                              "RMA if it stays lost after the reboot" % healthy["updated"]), verdict
    assert "drain and investigate GPU 1 (XID 79, uncorrectable ECC), GPU 5 (NVLink down)" in verdict
    assert "check GPU 3 (PCIe link degraded), GPU 4 (HW slowdown, thermal slowdown)" in verdict
    # each unhealthy GPU marked on its own line; the lost one with what the record knows
    marks = {line.split()[1]: line.split()[0] for line in lines if line.split()[:1] in (["ok"], ["warn"], ["ERROR"],
                                                                                        ["LOST"])}
    assert marks == {"0": "ok", "1": "ERROR", "2": "ERROR", "3": "warn", "4": "warn", "5": "ERROR", "6": "ok",
                     "7": "LOST"}
    assert "serial 1652223008586, slot 00000000:df:00.0, last seen" in text
    assert "change: GPU 7 (NVIDIA H100 80GB HBM3, serial 1652223008586" in text
    # findings errors first, numbers included, the DBE once with both sources
    findings = [line for line in lines if line.startswith("[")]
    severities = [line[1:line.index("]")] for line in findings]
    assert severities == sorted(severities, key=["error", "warning", "info"].index)
    assert sum("uncorrectable ECC errors" in line for line in findings) == 2  # GPUs 1 and 2, once each
    assert "reported it as XID 48 (double-bit ECC error (DBE))" in text.replace("\n    ", " ")
    assert "88 C (max operating 87 C, HW slowdown at 89 C, shutdown at 92 C)" in text.replace("\n    ", " ")

    # the next run in the same boot changes nothing; the GPU comes back: reported, record updated
    _proc, out = lab.playbook("hgx-h100-faults", PLAYBOOK, extra_vars=extra)
    assert _stats(out)["changed"] == 0
    _proc, out = lab.playbook("hgx-h100", PLAYBOOK, extra_vars=extra)
    data = json.loads(record.read_text())
    assert [e["event"] for e in data["events"]] == ["gpu_lost", "gpu_returned"] and data["gpus"][7]["state"] == "present"


def test_a_swapped_gpu_is_reported(lab, tmp_path):
    """Same slot, another serial: the board was replaced."""
    record = tmp_path / "gpu-inventory.json"
    extra = {"gpu_report_inventory_path": str(record)}
    lab.playbook("hgx-h100", PLAYBOOK, extra_vars=extra)
    profile = tmp_path / "hgx-h100-swapped.profile"
    base = os.path.join(REPO, "tests", "lab", "fake-nvml", "profiles", "hgx-h100.profile")
    profile.write_text("description = hgx-h100 with GPU 3 replaced\ninclude = %s\n\n[gpu.3]\nserial = 1652223099999\n"
                       "uuid = GPU-99999999-0000-4000-8000-000000000003\n" % base)
    _proc, out = lab.playbook(str(profile), PLAYBOOK, extra_vars=extra)
    result = _task(out, "Read the driver, GPUs and health, and keep the inventory record")
    assert [(c["event"], c["index"], c["serial"], c["previous_serial"]) for c in result["changes"]] == [
        ("gpu_swapped", 3, "1652223099999", "1652223008317")]
    assert json.loads(record.read_text())["gpus"][3]["serial"] == "1652223099999"
    assert result["verdict"]["text"] == "healthy"


def test_a_gpu_gone_from_nvml_is_an_error_with_its_recorded_serial(lab, tmp_path):
    """NVML lists seven GPUs where the record knows eight: the missing one is an error finding and
    a line of the report with the serial the record kept, and the node is drained for a reboot."""
    record = tmp_path / "gpu-inventory.json"
    extra = {"gpu_report_inventory_path": str(record)}
    lab.playbook("hgx-h100", PLAYBOOK, extra_vars=extra)
    profile = tmp_path / "hgx-h100-seven.profile"
    base = os.path.join(REPO, "tests", "lab", "fake-nvml", "profiles", "hgx-h100.profile")
    profile.write_text("description = hgx-h100 with GPU 7 gone from the bus\ninclude = %s\n\n[node]\ngpu_count = 7\n"
                       % base)
    _proc, out = lab.playbook(str(profile), PLAYBOOK, extra_vars=extra)
    result = _task(out, "Read the driver, GPUs and health, and keep the inventory record")
    assert json.loads(record.read_text())["gpus"][7]["state"] == "missing"
    assert [(f["code"], f["severity"], f["gpu"]) for f in result["health"]] == [("gpu_missing", "error", 7)]
    assert result["healthy"] is False and result["health_counts"]["error"] == 1
    assert result["verdict"]["status"] == "degraded"
    assert "GPU 7 (serial 1652223008586" in result["verdict"]["text"]
    lines = _task(out, "Show the GPU report")["msg"]
    assert any(line.split()[:2] == ["GONE", "7"] and "serial 1652223008586" in line for line in lines), lines


def test_record_changes_when_the_hardware_does(lab, tmp_path):
    record = tmp_path / "gpu-inventory.json"
    extra = {"gpu_report_inventory_path": str(record)}
    lab.playbook("hgx-h100", PLAYBOOK, extra_vars=extra)
    before = json.loads(record.read_text())
    _proc, out = lab.playbook("hgx-h200", PLAYBOOK, extra_vars=extra)
    assert _stats(out)["changed"] == 1
    after = json.loads(record.read_text())
    assert {g["uuid"] for g in before["gpus"]}.isdisjoint({g["uuid"] for g in after["gpus"] if g["state"] == "present"})


def test_a_foreign_record_file_is_refused_and_left_alone(lab, tmp_path):
    record = tmp_path / "gpu-inventory.json"
    record.write_text('{"schema": "someone/else"}\n')
    proc, out = lab.playbook("hgx-h100", PLAYBOOK, extra_vars={"gpu_report_inventory_path": str(record)}, check=False)
    assert proc.returncode != 0
    msg = _task(out, "Read the driver, GPUs and health, and keep the inventory record")["msg"]
    assert "cannot read the GPU inventory record" in msg and "gpu_report_inventory_path" in msg
    assert record.read_text() == '{"schema": "someone/else"}\n'


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
    lines = _task(out, "Show the GPU report")["msg"]
    assert lines[0].startswith("verdict: not ready: reboot the node (or load the module)")
    assert "driver not usable: driver_not_loaded (Driver Not Loaded)" in lines
    assert json.loads((tmp_path / "rec.json").read_text())["driver"]["reason"] == "driver_not_loaded"
    extra["gpu_report_require_driver"] = True
    proc, out = lab.playbook("driver-not-loaded", PLAYBOOK, extra_vars=extra, check=False)
    assert proc.returncode != 0
    msg = _task(out, "Apply the health policy")["msg"]
    assert msg.startswith("localhost is not GPU-ready (not ready: reboot the node (or load the module); check dmesg "
                          "and Secure Boot if it still does not load): [error] node: the NVIDIA driver is installed "
                          "but its kernel module is not loaded (fix: reboot the node"), msg


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
        "Fleet summary - one line per node",
    ]
    assert _stats(out)["failures"] == 0
    assert json.loads((tmp_path / "rec.json").read_text())["gpu_count"] == 4
    # the run ends with the fleet summary, and hands it to AWX
    summary = _task(out, "Summarise the run, one line per node")["msg"]
    assert summary[0].split() == ["localhost", "healthy", "driver", "580.95.05", "(loaded)", "|", "no", "changes"]
    assert summary[-1] == "1 node(s): 1 healthy; 0 changed"
    stats = _task(out, "Hand the summary to AWX workflows (set_stats gpuops_fleet)")["ansible_stats"]
    assert stats["data"]["gpuops_fleet"]["localhost"]["verdict"] == "healthy" and stats["aggregate"] is True

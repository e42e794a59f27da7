# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils.report import fleet


def facts(status="healthy", text="healthy", changes=None, toolkit="1.18.0"):
    return {
        "gpuops_nvidia": {"verdict": {"status": status, "text": text}, "driver": {"version": "570.172.08", "loaded": True}},
        "driver_result": {"installed_version": "570.172.08", "state": "ready"},
        "container_toolkit_result": {"version": toolkit, "runtime": "containerd"} if toolkit else None,
        "driver_changes": changes or [],
    }


def test_a_record_per_node_from_its_facts():
    item = fleet.record("gpu-a", facts(changes=["driver 570.172.08 installed"]))
    assert item == {"node": "gpu-a", "failed": False, "verdict": "healthy", "verdict_text": "healthy",
                    "driver": "570.172.08", "driver_state": "ready", "toolkit": "1.18.0", "runtime": "containerd",
                    "changes": ["driver 570.172.08 installed"], "hardware": []}


def test_a_node_that_ran_only_some_stages():
    item = fleet.record("gpu-b", {"gpuops_nvidia": {"driver": {"version": "580.95.05", "loaded": True}}})
    assert (item["verdict"], item["driver"], item["driver_state"], item["toolkit"]) == (None, "580.95.05", "loaded", None)
    assert fleet.line(item).split() == ["gpu-b", "not", "reported", "driver", "580.95.05", "(loaded)", "|", "no", "changes"]


def test_lines_put_failed_and_worst_first_and_name_the_action():
    records = [
        fleet.record("gpu-a", facts()),
        fleet.record("gpu-b", facts("rma", "RMA GPU 7 (serial 1652223008586, lost)")),
        fleet.record("gpu-c", facts(changes=["toolkit configured"]), failed=True),
        fleet.record("gpu-d", facts("attention", "attention: check GPU 3 (PCIe link degraded)")),
    ]
    out = fleet.lines(records)
    # a node's line, and its continuation when it is longer than 100 columns
    joined = []
    for text in out:
        if text.startswith(" ") and joined:
            joined[-1] += " " + text.strip()
        else:
            joined.append(text)
    assert all(len(text) <= 100 for text in out)
    assert [text.split()[0] for text in joined[:4]] == ["gpu-c", "gpu-b", "gpu-d", "gpu-a"]
    assert joined[0].split()[1] == "FAILED" and joined[0].endswith("| changed toolkit configured")
    assert joined[3].split()[1:] == ["healthy", "driver", "570.172.08", "(ready)", "toolkit", "1.18.0", "containerd",
                                     "|", "no", "changes"]
    assert joined[4:6] == ["gpu-b: RMA GPU 7 (serial 1652223008586, lost)",
                           "gpu-d: attention: check GPU 3 (PCIe link degraded)"]
    assert out[-1] == "4 node(s): 1 attention, 1 failed, 1 healthy, 1 rma; 1 changed"


def test_hardware_changes_the_report_found_are_named():
    item = facts("rma", "RMA GPU 7 (serial 1652223008586)")
    item["gpuops_nvidia"]["inventory_changes"] = [{"event": "gpu_lost", "message": "GPU 7 (...) is lost"}]
    out = fleet.lines([fleet.record("gpu-b", item)])
    assert "gpu-b: GPU 7 (...) is lost" in out


def test_long_lines_wrap_within_100_columns():
    changes = ["driver repository", "driver 570.172.08 installed", "toolkit repository", "toolkit installed",
               "containerd configured and restarted", "CDI spec", "rebooted"]
    out = fleet.lines([fleet.record("gpuops-lab-h100", facts(changes=changes))])
    assert all(len(line) <= 100 for line in out)
    assert out[0].startswith("gpuops-lab-h100") and out[1].startswith("      ")
    assert " ".join(line.strip() for line in out[:-1]).endswith("| changed " + ", ".join(changes))


def test_the_reports_own_verdict_wins_over_a_later_gpu_info():
    item = facts("healthy")
    item["gpuops_gpu_report"] = {"verdict": {"status": "rma", "text": "RMA GPU 7 (serial 1652223008586, lost)"},
                                 "inventory_changes": []}
    assert fleet.record("gpu-a", item)["verdict"] == "rma"


# what each stage changed, from its modules' registered results (the <stage>_changes facts)
INSTALL = {"changed": True, "changed_packages": [{"name": "dkms", "version": "3.0.10-8"},
                                                 {"name": "cuda-drivers-570", "version": "570.172.08-1"}]}


def test_driver_changes_name_the_repository_the_version_and_the_reboot():
    results = {"repo_changed": True, "install": INSTALL, "prerequisites": ["dkms"], "version": "570.172.08",
               "rebooted": True}
    assert fleet.stage_changes("driver", results) == ["driver repository", "driver 570.172.08 installed", "rebooted"]


def test_prerequisites_alone_are_not_a_driver_install():
    install = {"changed": True, "changed_packages": [{"name": "dkms", "version": "3.0.10-8"}]}
    assert fleet.stage_changes("driver", {"install": install, "prerequisites": ["dkms"], "version": "570"}) == []


def test_a_converged_stage_changed_nothing():
    assert fleet.stage_changes("driver", {"install": {"changed": False, "changed_packages": []}}) == []
    assert fleet.stage_changes("container_toolkit", {"install": {}, "packages": ["nvidia-container-toolkit"],
                                                     "runtime_result": {"changed": False},
                                                     "cdi_result": {"regenerated": False, "refresh_units": []}}) == []
    assert fleet.stage_changes("mig", {"result": {"changed": False}, "absent_result": {}}) == []


def test_toolkit_changes_in_stage_order():
    install = {"changed_packages": [{"name": "nvidia-container-toolkit", "version": "1.18.0-1"},
                                    {"name": "python3-tomlkit", "version": "0.11.7-1"}]}
    results = {"repo_changed": True, "install": install, "packages": ["nvidia-container-toolkit"],
               "runtime": "crio", "runtime_result": {"changed": True},
               "cdi_result": {"regenerated": True, "refresh_units": ["enabled nvidia-cdi-refresh.service"]}}
    assert fleet.stage_changes("container_toolkit", results) == [
        "toolkit repository", "toolkit installed", "crio configured and restarted", "CDI spec",
        "CDI refresh units: enabled nvidia-cdi-refresh.service"]


def test_only_the_toolkit_packages_count_as_the_toolkit_installed():
    install = {"changed_packages": [{"name": "python3-tomlkit", "version": "0.11.7-1"}]}
    assert fleet.stage_changes("container_toolkit", {"install": install, "packages": ["nvidia-container-toolkit"]}) == []


def test_mig_changes():
    assert fleet.stage_changes("mig", {"config_name": "all-1g.18gb", "result": {"changed": True}}) == ["MIG all-1g.18gb"]
    assert fleet.stage_changes("mig", {"absent_result": {"changed": True}}) == ["MIG off"]


def test_an_unknown_stage_is_refused():
    with pytest.raises(ValueError, match="driver, container_toolkit and mig"):
        fleet.stage_changes("gfd", {})

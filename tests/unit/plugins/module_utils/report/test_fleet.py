# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

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

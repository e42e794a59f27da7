# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import copy

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils import health

HEALTHY_GPU = {
    "index": 3,
    "name": "NVIDIA H100 80GB HBM3",
    "uuid": "GPU-00000000-0000-0000-0000-000000000003",
    "lost": False,
    "pci": {"bus_id": "00000000:5d:00.0"},
    "pcie": {"gen_current": 5, "gen_max": 5, "width_current": 16, "width_max": 16},
    "ecc": {"supported": True, "enabled": True, "enabled_pending": True,
            "volatile": {"corrected": 0, "uncorrected": 0},
            "aggregate": {"corrected": 12, "uncorrected": 0}},
    "remapped_rows": {"correctable": 0, "uncorrectable": 0, "pending": False, "failure": False},
    "clock_event_reasons": ["gpu_idle"],
    "nvlink": {"links": [{"link": n, "active": True} for n in range(18)], "total": 18, "active": 18},
    "xids": [],
}


def gpu(**changes):
    item = copy.deepcopy(HEALTHY_GPU)
    for key, value in changes.items():
        if isinstance(value, dict) and isinstance(item.get(key), dict):
            item[key].update(value)
        else:
            item[key] = value
    return item


def codes(findings):
    return [(f["code"], f["severity"]) for f in findings]


def test_healthy_gpu_has_no_findings():
    assert health.gpu_findings(gpu()) == []


@pytest.mark.parametrize("changes, expected", [
    ({"pcie": {"width_current": 8, "gen_current": 3}}, [("pcie_link_degraded", "warning")]),
    # A lower link generation while idle is power saving, not a fault ...
    ({"pcie": {"gen_current": 1}}, []),
    # ... but on a busy GPU it is.
    ({"pcie": {"gen_current": 3}, "clock_event_reasons": []}, [("pcie_link_degraded", "warning")]),
    ({"xids": [79, 13, 79]}, [("xid", "error"), ("xid", "warning")]),
    ({"xids": [1234]}, [("xid", "error")]),
    ({"ecc": {"volatile": {"corrected": 0, "uncorrected": 2}, "aggregate": {"corrected": 0, "uncorrected": 5}}},
     [("ecc_uncorrectable", "error")]),
    ({"ecc": {"aggregate": {"corrected": 0, "uncorrected": 5}}}, [("ecc_uncorrectable_history", "info")]),
    ({"remapped_rows": {"uncorrectable": 9, "failure": True, "pending": True}}, [("row_remap_failure", "error")]),
    ({"remapped_rows": {"uncorrectable": 1, "pending": True}}, [("row_remap_pending", "warning")]),
    ({"clock_event_reasons": ["hw_slowdown", "sw_thermal_slowdown", "hw_thermal_slowdown", "sw_power_cap"]},
     [("throttle_hw_slowdown", "warning"), ("throttle_thermal", "warning"), ("throttle_power_cap", "info")]),
    # Errors come first within a GPU, whatever check found them.
    ({"pcie": {"width_current": 8}, "xids": [48], "clock_event_reasons": ["sw_power_cap"]},
     [("xid", "error"), ("pcie_link_degraded", "warning"), ("throttle_power_cap", "info")]),
    ({"clock_event_reasons": ["hw_power_brake_slowdown"]}, [("throttle_power_brake", "warning")]),
    ({"nvlink": {"links": [{"link": 0, "active": True}, {"link": 1, "active": False}, {"link": 2, "active": False}]}},
     [("nvlink_down", "error")]),
    # A GPU without NVLink (links empty) has nothing down.
    ({"nvlink": {"links": [], "total": 0, "active": 0}}, []),
    ({"lost": True, "xids": [79]}, [("gpu_lost", "error")]),
])
def test_gpu_findings(changes, expected):
    assert codes(health.gpu_findings(gpu(**changes))) == expected


def test_finding_names_the_gpu_and_what_to_do():
    finding = health.gpu_findings(gpu(pcie={"width_current": 8, "gen_current": 3}))[0]
    assert finding["gpu"] == 3
    assert finding["uuid"] == HEALTHY_GPU["uuid"]
    assert "GPU 3 (NVIDIA H100 80GB HBM3, 00000000:5d:00.0)" in finding["message"]
    assert "x8 Gen3" in finding["message"] and "x16 Gen5" in finding["message"]
    assert finding["fix"] and finding["subject"].startswith("GPU ")
    assert finding["current"] == {"gen": 3, "width": 8}


def test_nvlink_finding_lists_links():
    finding = health.gpu_findings(gpu(nvlink={"links": [{"link": 0, "active": True}, {"link": 7, "active": False}]}))[0]
    assert finding["links_down"] == [7]
    assert "1 of 2 NVLinks down (links 7)" in finding["message"]


@pytest.mark.parametrize("reason, code", [
    ("library_not_found", "library_not_found"),
    ("driver_not_loaded", "driver_not_loaded"),
    ("version_mismatch", "version_mismatch"),
    ("nvml_error", "nvml_error"),
    (None, "nvml_unavailable"),
])
def test_node_findings_driver(reason, code):
    found = health.node_findings({"loaded": False, "reason": reason, "message": "x"}, [])
    assert codes(found) == [(code, "error")]
    assert found[0]["gpu"] is None and found[0]["fix"] and found[0]["subject"] == "node"


def test_node_findings_collects_every_gpu():
    found = health.node_findings({"loaded": True}, [gpu(), gpu(index=4, xids=[48]), gpu(index=5, lost=True)])
    assert [(f["gpu"], f["code"]) for f in found] == [(4, "xid"), (5, "gpu_lost")]


@pytest.mark.parametrize("severities, healthy", [
    ([], True), (["info"], True), (["warning"], False), (["error", "info"], False),
])
def test_summarize(severities, healthy):
    summary = health.summarize([{"severity": s} for s in severities])
    assert summary["healthy"] is healthy
    assert sum(summary["counts"].values()) == len(severities)

# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import copy

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils.report import health

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


# ---- one event, one finding ------------------------------------------------------------------

@pytest.mark.parametrize("changes, xid, code", [
    ({"ecc": {"volatile": {"corrected": 0, "uncorrected": 2}, "aggregate": {"corrected": 0, "uncorrected": 3}}},
     48, "ecc_uncorrectable"),
    ({"ecc": {"volatile": {"corrected": 0, "uncorrected": 1}, "aggregate": {"corrected": 0, "uncorrected": 1}}},
     94, "ecc_uncorrectable"),
    ({"remapped_rows": {"uncorrectable": 9, "failure": True}}, 64, "row_remap_failure"),
    ({"remapped_rows": {"uncorrectable": 1, "pending": True}}, 63, "row_remap_pending"),
    ({"nvlink": {"links": [{"link": 0, "active": False}]}}, 74, "nvlink_down"),
])
def test_an_xid_and_the_reading_of_the_same_event_are_one_finding(changes, xid, code):
    found = health.gpu_findings(gpu(xids=[xid], **changes))
    assert [f["code"] for f in found] == [code]
    assert found[0]["xids"] == [xid]
    assert found[0]["sources"][0] == health.SOURCES[code] and found[0]["sources"][1].startswith("XID %d (" % xid)
    assert "XID %d" % xid in found[0]["message"]


def test_an_xid_without_its_reading_stays_a_finding():
    # XID 63 (a remap recorded) with no pending remap in NVML: the XID alone
    assert codes(health.gpu_findings(gpu(xids=[63]))) == [("xid", "warning")]
    # XID 64 (recording a remap failed) is another event than a pending remap: both stay
    found = health.gpu_findings(gpu(xids=[64], remapped_rows={"uncorrectable": 1, "pending": True}))
    assert codes(found) == [("xid", "error"), ("row_remap_pending", "warning")]
    assert health.gpu_findings(gpu(xids=[79], lost=True))[0]["xids"] == [79]


def test_each_finding_names_its_source():
    found = health.gpu_findings(gpu(pcie={"width_current": 8}, clock_event_reasons=["sw_power_cap"]))
    assert [f["sources"] for f in found] == [["NVML PCIe link state"], ["NVML clock event reasons"]]


# ---- findings carry their numbers ------------------------------------------------------------

def test_thermal_slowdown_says_the_temperature_and_the_gpus_own_limits():
    found = health.gpu_findings(gpu(
        clock_event_reasons=["sw_thermal_slowdown"], temperature_c=88,
        temperature_limits_c={"shutdown": 92, "slowdown": 89, "gpu_max": 87, "memory_max": 95},
        clocks={"sm_mhz": 1095, "sm_max_mhz": 1980}))
    assert len(found) == 1
    message = found[0]["message"]
    assert "88 C (max operating 87 C, HW slowdown at 89 C, shutdown at 92 C)" in message
    assert "SM clock 1095 of 1980 MHz" in message
    assert (found[0]["temperature_c"], found[0]["slowdown_c"], found[0]["gpu_max_c"]) == (88, 89, 87)


def test_thermal_slowdown_without_limits_says_so():
    found = health.gpu_findings(gpu(clock_event_reasons=["hw_thermal_slowdown"], temperature_c=91,
                                    temperature_limits_c=dict.fromkeys(["shutdown", "slowdown", "gpu_max"])))
    assert "91 C (the GPU reports no slowdown threshold)" in found[0]["message"]


def test_power_cap_says_draw_and_cap():
    found = health.gpu_findings(gpu(clock_event_reasons=["sw_power_cap"], power={"draw_w": 699.1, "limit_w": 700.0}))
    assert "drawing 699.1 W of a 700 W cap" in found[0]["message"]
    assert (found[0]["power_w"], found[0]["power_limit_w"]) == (699.1, 700.0)


# ---- the node's verdict ----------------------------------------------------------------------

def verdict_of(*gpus, driver=None, known=None):
    return health.verdict(health.node_findings(driver or {"loaded": True}, list(gpus)), known)


def test_verdict_healthy():
    assert verdict_of(gpu()) == {"status": "healthy", "text": "healthy", "gpus": []}


def test_verdict_attention_names_the_gpu_and_the_reason():
    result = verdict_of(gpu(), gpu(index=4, pcie={"width_current": 8}))
    assert result["status"] == "attention"
    assert result["text"] == "attention: check GPU 4 (PCIe link degraded)"
    assert result["gpus"] == [4]


def test_verdict_degraded_drains_and_names_each_gpu_once():
    dbe = {"volatile": {"corrected": 0, "uncorrected": 2}, "aggregate": {"corrected": 0, "uncorrected": 3}}
    result = verdict_of(gpu(index=2, ecc=dbe, xids=[48]),
                        gpu(index=5, nvlink={"links": [{"link": 0, "active": False}]}))
    assert result["status"] == "degraded"
    assert result["text"] == "degraded: drain and investigate GPU 2 (uncorrectable ECC), GPU 5 (NVLink down)"


def test_verdict_a_lost_gpu_is_a_reboot_first_and_an_rma_once_a_reboot_did_not_bring_it_back():
    lost = gpu(index=7, lost=True, xids=[79])
    result = verdict_of(gpu(), lost, known={7: {"serial": "1652223008586", "last_seen": "2026-12-01T10:00:00Z"}})
    assert result["status"] == "degraded"
    assert result["text"] == ("degraded: drain the node and reboot it for GPU 7 (serial 1652223008586, last seen "
                              "2026-12-01T10:00:00Z, lost; RMA if it stays lost after the reboot)")
    again = verdict_of(lost, known={7: {"serial": "1652223008586", "lost_after_reboot": True}})
    assert again["status"] == "rma"
    assert again["text"] == "RMA GPU 7 (serial 1652223008586, still lost after a reboot)"


def test_a_gpu_nvml_no_longer_lists_is_an_error_with_its_recorded_identity():
    record = {"gpus": [{"index": 0, "state": "present", "serial": "1"},
                       {"index": 3, "state": "missing", "serial": "1652223008317", "uuid": "GPU-3",
                        "name": "NVIDIA H100 80GB HBM3", "slot": "00000000:3a:00.0",
                        "last_seen": "2026-12-01T10:00:00Z", "lost_after_reboot": False}]}
    found = health.missing_findings(record)
    assert [(f["code"], f["severity"], f["gpu"], f["uuid"]) for f in found] == [("gpu_missing", "error", 3, "GPU-3")]
    assert "serial 1652223008317" in found[0]["message"] and "00000000:3a:00.0" in found[0]["message"]
    assert health.missing_findings(None) == [] and health.missing_findings({"gpus": record["gpus"][:1]}) == []
    known = {3: {"serial": "1652223008317", "last_seen": "2026-12-01T10:00:00Z"}}
    result = health.verdict(found, known)
    assert result["status"] == "degraded" and result["gpus"] == [3]
    assert "GPU 3 (serial 1652223008317, last seen 2026-12-01T10:00:00Z, missing; RMA if it stays missing" in result["text"]
    assert health.verdict(found, {3: dict(known[3], lost_after_reboot=True)})["text"] == (
        "RMA GPU 3 (serial 1652223008317, last seen 2026-12-01T10:00:00Z, still missing after a reboot)")


def test_verdict_rma_first_then_the_rest():
    failed = gpu(index=2, remapped_rows={"uncorrectable": 9, "failure": True})
    slow = gpu(index=3, pcie={"width_current": 8})
    result = verdict_of(failed, slow, known={})
    assert result["status"] == "rma"
    assert result["text"] == "RMA GPU 2 (row-remap failure); check GPU 3 (PCIe link degraded)"


def test_verdict_not_ready_gives_the_drivers_fix():
    result = verdict_of(driver={"loaded": False, "reason": "version_mismatch", "message": "x"})
    assert result["status"] == "not_ready"
    assert result["text"] == "not ready: reboot the node so the newly installed driver module loads"


def test_verdict_a_gpu_to_replace_takes_its_other_errors_and_its_serial():
    dbe = {"volatile": {"corrected": 0, "uncorrected": 1}, "aggregate": {"corrected": 0, "uncorrected": 1}}
    failed = gpu(index=2, ecc=dbe, xids=[94], remapped_rows={"uncorrectable": 9, "failure": True, "pending": True})
    result = verdict_of(failed, known={2: {"serial": "1652223008290"}})
    assert result["text"] == "RMA GPU 2 (serial 1652223008290, row-remap failure, uncorrectable ECC)"

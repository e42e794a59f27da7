# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The alert rules as data (promtool checks and unit-tests them in tests/integration/test_alerts.py)."""
from __future__ import annotations

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils.report import alerts, health


def _by(alert, **labels):
    found = [rule for rule in alerts.rules() if rule["alert"] == alert
             and all(rule["labels"].get(key) == value for key, value in labels.items())]
    assert len(found) == 1, (alert, labels, found)
    return found[0]


@pytest.mark.parametrize("xid, finding, action, severity", [
    (79, "gpu_lost", "node-reboot", "critical"),
    (48, "ecc_uncorrectable", "gpu-reset", "critical"),
    (95, "ecc_uncorrectable", "gpu-reset", "critical"),
    (94, "ecc_uncorrectable", "restart-workload", "critical"),
    (64, "row_remap_failure", "quarantine", "critical"),
    (13, "xid", "restart-workload", "critical"),
    (119, "xid", "gpu-reset", "critical"),
    (92, "xid", "none", "warning"),
])
def test_an_xid_rule_per_catalogue_entry_with_its_action(xid, finding, action, severity):
    rule = _by("GPUXidError", xid=str(xid))
    assert rule["expr"] == 'label_replace(DCGM_FI_DEV_XID_ERRORS == %d, "node", "$1", "Hostname", "(.+)")' % xid
    assert rule["labels"] == {"finding": finding, "action": action, "severity": severity, "xid": str(xid)}
    assert "for" not in rule


def test_the_other_rules_by_finding():
    assert _by("GPURowRemapFailure")["labels"] == {"finding": "row_remap_failure", "action": "quarantine",
                                                   "severity": "critical"}
    assert _by("GPUMissing")["labels"]["action"] == "node-reboot"
    assert _by("GPUMissing")["for"] == "2m"
    assert _by("GPUPCIeLinkDegraded")["labels"] == {"finding": "pcie_link_degraded", "action": "none",
                                                    "severity": "warning"}
    thermal = _by("GPUClocksSlowdown", finding="throttle_thermal")
    # NVML: SW thermal slowdown 0x20, HW thermal slowdown 0x40
    assert "floor(DCGM_FI_DEV_CLOCKS_EVENT_REASONS / 64) % 2 == 1" in thermal["expr"]
    assert "floor(DCGM_FI_DEV_CLOCKS_EVENT_REASONS / 32) % 2 == 1" in thermal["expr"]
    assert "/ 128)" in _by("GPUClocksSlowdown", finding="throttle_power_brake")["expr"]
    assert "/ 8)" in _by("GPUClocksSlowdown", finding="throttle_hw_slowdown")["expr"]


def test_groups_take_an_interval():
    assert [group["name"] for group in alerts.rule_groups()] == ["gpuops-nvidia-gpu-health"]
    assert "interval" not in alerts.rule_groups()[0]
    assert alerts.rule_groups("30s")[0]["interval"] == "30s"


def test_missing_fields_names_the_rules_an_exporter_cannot_feed():
    exported = ["DCGM_FI_DEV_XID_ERRORS", "DCGM_FI_DEV_GPU_TEMP", "DCGM_FI_DEV_ROW_REMAP_FAILURE",
                "DCGM_FI_DEV_PCIE_LINK_WIDTH"]
    missing = alerts.missing_fields(exported)
    assert {item["alert"] for item in missing} == {"GPUUncorrectableECC", "GPURowRemapPending",
                                                   "GPUPCIeLinkDegraded", "GPUClocksSlowdown"}
    pcie = [item for item in missing if item["alert"] == "GPUPCIeLinkDegraded"]
    assert pcie == [{"alert": "GPUPCIeLinkDegraded", "finding": "pcie_link_degraded",
                     "fields": ["DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH"]}]
    assert alerts.missing_fields(alerts.fields()) == []


@pytest.mark.parametrize("code, xid, action", [
    ("xid", 79, "node-reboot"), ("xid", 31, "restart-workload"), ("ecc_uncorrectable", None, "gpu-reset"),
    ("gpu_missing", None, "node-reboot"), ("row_remap_failure", None, "quarantine"),
    ("throttle_thermal", None, "none"), ("driver_mismatch", None, "none"),
])
def test_action_of(code, xid, action):
    assert health.action_of(code, xid) == action


def test_an_xid_without_a_class_is_an_error_naming_the_catalogue():
    with pytest.raises(ValueError, match="XID 999 has no action class; look it up in NVIDIA's XID catalogue"):
        health.action_of("xid", 999)

# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils.report import gpu_facts


def _driver(reason, module_loaded):
    return {"loaded": False, "reason": reason, "message": "Unknown Error",
            "kernel_module": {"loaded": module_loaded}}


@pytest.mark.parametrize("reason, module_loaded, expected", [
    ("nvml_error", False, "driver_not_loaded"),   # Debian 13's NVML without a module
    ("nvml_error", True, "nvml_error"),           # a module is loaded: the error is something else
    ("version_mismatch", False, "version_mismatch"),
    ("library_not_found", False, "library_not_found"),
])
def test_explain_unloaded_driver(reason, module_loaded, expected):
    driver = _driver(reason, module_loaded)
    gpu_facts.explain_unloaded_driver(driver)
    assert driver["reason"] == expected
    if expected != reason:
        assert driver["message"] == "Unknown Error (no NVIDIA kernel module is loaded)"


def test_loaded_driver_is_left_alone():
    driver = {"loaded": True, "reason": None, "message": None, "kernel_module": {"loaded": False}}
    gpu_facts.explain_unloaded_driver(driver)
    assert driver["reason"] is None


def test_merge_kernel_xids():
    gpus = [{"pci": {"bus_id": "00000000:1b:00.0"}, "xids": [48]},
            {"pci": {"bus_id": "00000000:43:00.0"}, "xids": []}]
    records = [{"bus_id": "00000000:1b:00.0", "xid": 48}, {"bus_id": "00000000:1b:00.0", "xid": 63},
               {"bus_id": "00000000:43:00.0", "xid": 79}, {"bus_id": "00000000:ee:00.0", "xid": 79}]
    orphans = gpu_facts.merge_kernel_xids(gpus, records)
    assert [g["xids"] for g in gpus] == [[48, 63], [79]]
    assert orphans == [{"bus_id": "00000000:ee:00.0", "xid": 79}]

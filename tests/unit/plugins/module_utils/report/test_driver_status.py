# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""driver_status's service: the loaded driver, the verification of a ready one, the record."""
from __future__ import annotations

import json

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils.host import records
from ansible_collections.gpuops.nvidia.plugins.module_utils.report import driver_status as status

NVML_580 = {"loaded": True, "version": "580.95.05"}


@pytest.mark.parametrize("kernel_version, through_nvml, expected", [
    ("580.95.05", {"loaded": True, "version": "570.172.08"}, "580.95.05"),  # procfs/sysfs first
    (None, NVML_580, "580.95.05"),  # a container: NVML tells
    (None, {"loaded": False, "version": "580.95.05"}, None),
    (None, status.NOT_ASKED, None),
])
def test_the_loaded_driver(kernel_version, through_nvml, expected):
    assert status.loaded_version({"version": kernel_version}, through_nvml) == expected


@pytest.mark.parametrize("driver, count, wanted, problem", [
    (NVML_580, 8, 8, None),
    (NVML_580, 8, 0, None),
    (NVML_580, 7, 8, "NVML reports 580.95.05 with 7 GPU(s); expected 580.95.05 with 8"),
    ({"loaded": True, "version": "570.172.08"}, 8, 8, "NVML reports 570.172.08 with 8 GPU(s); expected 580.95.05"),
    ({"loaded": False, "version": None}, 0, 0, "NVML reports no driver with 0 GPU(s)"),
])
def test_a_ready_driver_is_verified_through_nvml(driver, count, wanted, problem):
    found = status.verify_problem(driver, count, "580.95.05", wanted)
    if problem is None:
        assert found is None
    else:
        assert problem in found


def test_the_record_keeps_the_keys_asked_for():
    text = status.record_text({"state": "ready", "held": ["nvidia-open"], "packages": {"x": "1"}}, ["state", "held", "message"])
    assert json.loads(text) == {"state": "ready", "held": ["nvidia-open"], "message": None}
    assert text == records.dumps(json.loads(text))


def test_no_record_path_reads_nothing():
    assert status.read_record("") is None


@pytest.mark.parametrize("content, problem", [
    (None, None),
    (b'{"state": "ready"}', None),
    (b"[]", "holds a JSON list where a JSON object was expected"),
    (b"not json", "is not JSON"),
    (b"\xff", "is not UTF-8 text"),
])
def test_the_record_is_read_through_records(tmp_path, content, problem):
    path = tmp_path / "driver-state.json"
    if content is not None:
        path.write_bytes(content)
    if problem is None:
        assert status.read_record(str(path)) == (content.decode() if content else None)
        return
    with pytest.raises(records.RecordError) as err:
        status.read_record(str(path))
    assert str(path) in str(err.value) and problem in str(err.value) and "driver state record" in str(err.value)

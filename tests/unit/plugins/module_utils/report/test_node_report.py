# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_report's service: the inventory record read through host/records (every unusable record a
RecordError naming the file and the fix), the GPUs the record knows and NVML lost, the facts."""
from __future__ import annotations

import json

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils.host import records
from ansible_collections.gpuops.nvidia.plugins.module_utils.report import inventory
from ansible_collections.gpuops.nvidia.plugins.module_utils.report import node_report

GOOD = {"schema": inventory.SCHEMA, "host": "n", "gpus": [{"index": 0, "slot": "00000000:18:00.0",
                                                          "state": "present", "serial": "1"}], "events": []}


def test_a_missing_record_is_none(tmp_path):
    assert node_report.read_inventory(str(tmp_path / "none.json")) == (None, None)


def test_a_good_record_is_read(tmp_path):
    path = tmp_path / "inv.json"
    path.write_text(json.dumps(GOOD))
    assert node_report.read_inventory(str(path)) == (json.dumps(GOOD), GOOD)


@pytest.mark.parametrize("content, problem", [
    (b"{not json", "is not JSON"),
    (b"\xff\xfe{}", "is not UTF-8 text"),
    (b"[1, 2]", "holds a JSON list where a JSON object was expected"),
    (b'{"schema": "someone/else"}', "not a gpuops.nvidia GPU inventory record (schema 'someone/else')"),
    (json.dumps(dict(GOOD, gpus=3)).encode(), "its gpus is a number where a list of objects was expected"),
    (json.dumps(dict(GOOD, gpus=[1, "x"])).encode(), "its gpus is a list holding a number, a string"),
    (json.dumps(dict(GOOD, events={"a": 1})).encode(), "its events is an object where a list of objects"),
])
def test_an_unusable_record_names_the_file_the_problem_and_the_fix(tmp_path, content, problem):
    path = tmp_path / "inv.json"
    path.write_bytes(content)
    with pytest.raises(records.RecordError) as err:
        node_report.read_inventory(str(path))
    message = str(err.value)
    assert str(path) in message and problem in message, message
    assert "move it away" in message, message


@pytest.mark.parametrize("where, problem", [
    ("a directory", "is a directory, not a file: move it away"),
    ("under a file", "a part of its path is a file, not a directory"),
])
def test_a_record_that_is_no_file_is_refused(tmp_path, where, problem):
    if where == "a directory":
        path = tmp_path / "inv.json"
        path.mkdir()
    else:
        (tmp_path / "file").write_text("")
        path = tmp_path / "file" / "inv.json"
    with pytest.raises(records.RecordError, match=problem):
        node_report.read_inventory(str(path))


def info(loaded=True, health=()):
    return {"driver": {"loaded": loaded}, "health": list(health), "gpus": [], "healthy": True,
            "health_counts": {"error": 0, "warning": 0, "info": 0}}


MISSING = {"index": 7, "slot": "00000000:df:00.0", "state": "missing", "serial": "1652223008586",
           "last_seen": "2026-12-01T10:00:00Z", "name": "NVIDIA H100 80GB HBM3", "uuid": "GPU-7"}
WARNING = {"code": "pcie_degraded", "severity": "warning", "message": "m", "fix": "f", "subject": "GPU 3"}


@pytest.mark.parametrize("loaded, gpus, expected_codes", [
    (True, [MISSING], ["gpu_missing", "pcie_degraded"]),
    (True, [dict(MISSING, state="lost")], None),
    (True, [], None),
    (False, [MISSING], None),  # NVML lists nothing without a driver: nothing is missing
])
def test_gpus_the_record_knows_and_nvml_no_longer_lists_are_errors(loaded, gpus, expected_codes):
    update = node_report.missing_update(info(loaded, [WARNING]), {"gpus": gpus})
    if expected_codes is None:
        assert update == {}
        return
    assert [f["code"] for f in update["health"]] == expected_codes  # errors first
    assert update["healthy"] is False and update["health_counts"]["error"] == 1
    assert update["missing_gpus"] == gpus
    assert "serial 1652223008586" in update["health"][0]["message"]


def test_the_facts_keep_the_reports_own_verdict_and_changes():
    verdict, changes = {"status": "healthy"}, [{"event": "gpu_added"}]
    facts = node_report.as_facts(info(), verdict, changes)
    assert facts["gpuops_nvidia"]["verdict"] == verdict and facts["gpuops_nvidia"]["inventory_changes"] == changes
    assert facts["gpuops_gpu_report"] == {"verdict": verdict, "inventory_changes": changes}
    assert facts["gpuops_nvidia"]["driver"] == {"loaded": True}

# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""node_audit's service: an unusable record is a drift item naming the file and the fix (a
read-only check reports, it does not fail); the runtime's configuration and the expectations."""
from __future__ import annotations

import json

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils.host import records
from ansible_collections.gpuops.nvidia.plugins.module_utils.report import audit
from ansible_collections.gpuops.nvidia.plugins.module_utils.report import inventory
from ansible_collections.gpuops.nvidia.plugins.module_utils.report import node_report


def test_an_unusable_record_is_a_drift_item_with_the_stage_that_rewrites_it():
    problem = records.RecordError("the driver package record /r.json is not JSON (x): move it away")
    item = audit.record_item(audit.DRIVER_RECORD, problem)
    assert item == {"item": "driver package record", "expected": "readable", "actual": str(problem), "ok": False,
                    "fix": "move the file away; the driver stage (site.yml --tags driver) writes it anew"}
    assert "report stage" in audit.record_item(node_report.WHAT, problem)["fix"]


@pytest.mark.parametrize("content, expected", [
    (None, []),
    ({"owner": "driver"}, []),
    ({"requires": ["nvidia-open", "firmware-nvidia-gsp"]}, ["nvidia-open", "firmware-nvidia-gsp"]),
    ({"requires": "nvidia-open"}, "not a list of package names"),
    ({"requires": [1]}, "not a list of package names"),
    (["nvidia-open"], "holds a JSON list where a JSON object was expected"),
])
def test_the_driver_record_requires(tmp_path, content, expected):
    path = tmp_path / "driver.json"
    if content is not None:
        path.write_text(json.dumps(content))
    if isinstance(expected, list):
        assert audit.driver_requires(str(path)) == expected
        return
    with pytest.raises(records.RecordError) as err:
        audit.driver_requires(str(path))
    assert str(path) in str(err.value) and expected in str(err.value) and "move it away" in str(err.value)


VERDICT = {"status": "healthy", "text": "healthy"}


def snapshot(loaded=True):
    return {"verdict": VERDICT, "health": [], "gpus": [], "driver": {"loaded": loaded}}


@pytest.mark.parametrize("content, items", [
    (None, [("GPU health", True)]),
    (json.dumps({"schema": inventory.SCHEMA, "gpus": [], "events": []}), [("GPU health", True)]),
    ("{broken", [("GPU health", True), ("GPU inventory record", False)]),
    (json.dumps({"schema": inventory.SCHEMA, "gpus": 8}), [("GPU health", True), ("GPU inventory record", False)]),
    (json.dumps([1]), [("GPU health", True), ("GPU inventory record", False)]),
])
def test_the_inventory_record_in_the_hardware_items(tmp_path, content, items):
    path = tmp_path / "inv.json"
    if content is not None:
        path.write_text(content)
    found = audit.hardware_items({"inventory_path": str(path)}, "/", snapshot())
    assert [(i["item"], i["ok"]) for i in found] == items
    if not found[-1]["ok"]:
        assert str(path) in found[-1]["actual"] and "report stage" in found[-1]["fix"]


def test_the_inventory_record_is_read_under_the_host_root(tmp_path):
    (tmp_path / "var").mkdir()
    (tmp_path / "var" / "inv.json").mkdir()  # a directory where the record should be
    found = audit.hardware_items({"inventory_path": "/var/inv.json"}, str(tmp_path), snapshot())
    assert found[-1]["item"] == "GPU inventory record" and "is a directory" in found[-1]["actual"]
    assert str(tmp_path / "var" / "inv.json") in found[-1]["actual"]


def test_without_a_driver_there_is_no_health_item():
    assert audit.hardware_items({"inventory_path": ""}, "/", snapshot(loaded=False)) == []


def test_the_runtime_configuration_and_its_drop_ins(tmp_path):
    (tmp_path / "etc" / "containerd" / "conf.d").mkdir(parents=True)
    (tmp_path / "etc" / "containerd" / "config.toml").write_text("version = 2\n")
    (tmp_path / "etc" / "containerd" / "conf.d" / "99-nvidia.toml").write_text("x = 1\n")
    (tmp_path / "etc" / "containerd" / "conf.d" / "README").write_text("not a drop-in\n")
    texts = audit.config_texts(str(tmp_path), "/etc/containerd/config.toml", "/etc/containerd/conf.d")
    assert texts == {"/etc/containerd/config.toml": "version = 2\n", "/etc/containerd/conf.d/99-nvidia.toml": "x = 1\n"}
    assert audit.config_texts(str(tmp_path), "/etc/crio/crio.conf", "/etc/crio/crio.conf.d") == {}


@pytest.mark.parametrize("asked, runtime, version, expected", [
    ("true", "containerd", (1, 6, 0), True),
    ("false", "containerd", (2, 0, 0), False),
    ("auto", "containerd", (1, 7, 24), True),
    ("auto", "containerd", (1, 6, 20), False),
    ("auto", "docker", None, False),
])
def test_cdi_asked_or_where_the_runtime_supports_it(asked, runtime, version, expected):
    assert audit.uses_cdi(asked, runtime, version) is expected


@pytest.mark.parametrize("runtime, version, expected", [
    ("containerd", (1, 7, 24), "containerd 1.7.24"),
    ("crio", None, "crio ?"),
])
def test_the_runtime_fact(runtime, version, expected):
    assert audit.runtime_fact(runtime, version) == expected


@pytest.mark.parametrize("params, expected", [
    ({"driver_version": "580.95.05", "driver_branch": "580", "toolkit_version": ""},
     {"driver": "580.95.05", "toolkit": None}),
    ({"driver_version": "", "driver_branch": "580", "toolkit_version": "1.18.0"}, {"driver": "580", "toolkit": "1.18.0"}),
    ({"driver_version": "", "driver_branch": "", "toolkit_version": ""}, {"driver": None, "toolkit": None}),
])
def test_what_the_node_was_asked_for(params, expected):
    assert audit.expected(params) == expected


@pytest.mark.parametrize("content", [b"\xff\xfe\x00", b"version: v1\nmig-configs: [unclosed\n", b"", None])
def test_a_mig_config_that_cannot_be_read_is_the_items_finding_not_a_crash(tmp_path, content):
    path = tmp_path / "etc" / "mig.yaml"
    path.parent.mkdir()
    if content is None:
        path.mkdir()
    else:
        path.write_bytes(content)
    found = audit.mig_item({"mig_config_file": "/etc/mig.yaml", "mig_config_name": "all-balanced"}, str(tmp_path))
    assert found["ok"] is False and found["actual"].startswith("config not readable: the MIG config %s" % path), found

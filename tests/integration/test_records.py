# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node-local records of gpu_report, driver_status and node_audit, through the real modules
on a simulated node: a record that cannot be used (a directory, a path under a regular file, not
UTF-8, not JSON, of the wrong shape) stops gpu_report and driver_status with a message naming the
file, the problem and the fix, and leaves the file as it was; node_audit, a read-only check,
reports it as a drift item instead."""
from __future__ import annotations

import json
import os


# (name, how the bad record is made at path, what the message says)
UNUSABLE = [
    ("directory", os.mkdir, "is a directory, not a file: move it away"),
    ("not UTF-8", lambda path: _write(path, b"\xff\xfe{}"), "is not UTF-8 text"),
    ("not JSON", lambda path: _write(path, b"{broken"), "is not JSON"),
    ("a list", lambda path: _write(path, b"[1, 2]\n"), "holds a JSON list where a JSON object was expected"),
    ("under a file", None, "a part of its path is a file, not a directory"),
]
# an inventory record of the wrong shape (JSON text, what the message says)
INVENTORY_SHAPES = [
    ("gpus a number", json.dumps({"schema": "gpuops.nvidia/gpu-inventory/v2", "gpus": 8}),
     "its gpus is a number where a list of objects was expected; move it away or set gpu_report_inventory_path"),
    ("foreign schema", json.dumps({"schema": "someone/else"}),
     "not a gpuops.nvidia GPU inventory record (schema 'someone/else'); move it away"),
]
# each bad record in one play: a module run per record, each failure kept for the test to read
PLAY = """
- name: Run the module on each bad record
  hosts: gpu_nodes
  gather_facts: false
  tasks:
    - name: Run {module} on a record
      gpuops.nvidia.{module}:
        {option}: "{{{{ item }}}}"
      loop: {paths}
      ignore_errors: true  # every record is expected to fail; the test reads each failure
"""


def _write(path, content):
    with open(path, "wb") as handle:
        handle.write(content)


def _snapshot(path):
    """What is at path now: its bytes, 'directory', or None."""
    if os.path.isdir(path):
        return "directory"
    if os.path.exists(path):
        with open(path, "rb") as handle:
            return handle.read()
    return None


def _bad_records(tmp_path, cases):
    """{path: (name, problem)} of a record made unusable per case, each in its own directory."""
    made = {}
    for number, (name, how, problem) in enumerate(cases):
        case = tmp_path / ("case%d" % number)
        case.mkdir()
        if how is None:
            (case / "blocker").write_text("a regular file\n")
            path = str(case / "blocker" / "record.json")
        else:
            path = str(case / "record.json")
            how(path)
        made[path] = (name, problem)
    return made


def _item_failed(result):
    """Whether a loop item's result failed: its "failed" flag, which ansible-core 2.21 no longer
    hands callbacks for loop items (there an item's failure carries its "exception" key instead)."""
    return result.get("failed") is True or (result.get("failed") is None and "exception" in result)


def _run_on_each(lab, tmp_path, module, option, paths):
    """{path: result} of module run once per path (option=path) in one play."""
    playbook = tmp_path / "each.yml"
    playbook.write_text(PLAY.format(module=module, option=option, paths=json.dumps(sorted(paths))))
    _proc, out = lab.playbook("hgx-h100", str(playbook))
    task = out["plays"][0]["tasks"][0]["hosts"]["localhost"]
    return {result["item"]: result for result in task["results"]}


def test_gpu_report_refuses_an_unusable_inventory_record_and_changes_nothing(lab, tmp_path):
    cases = _bad_records(tmp_path, UNUSABLE + [(name, lambda path, text=text: _write(path, text.encode()), problem)
                                               for name, text, problem in INVENTORY_SHAPES])
    before = {path: _snapshot(path) for path in cases}
    results = _run_on_each(lab, tmp_path, "gpu_report", "path", cases)
    for path, (name, problem) in cases.items():
        msg = results[path].get("msg", "")
        assert _item_failed(results[path]), (name, results[path])
        assert path in msg and problem in msg, (name, msg)
        assert msg.endswith("; nothing was changed"), (name, msg)
        assert _snapshot(path) == before[path], name


def test_driver_status_refuses_an_unusable_state_record_and_changes_nothing(lab, tmp_path):
    cases = _bad_records(tmp_path, UNUSABLE)
    before = {path: _snapshot(path) for path in cases}
    results = _run_on_each(lab, tmp_path, "driver_status", "record", cases)
    for path, (name, problem) in cases.items():
        msg = results[path].get("msg", "")
        assert _item_failed(results[path]), (name, results[path])
        assert "driver state record %s" % path in msg and problem in msg, (name, msg)
        assert msg.endswith("; nothing was changed"), (name, msg)
        assert _snapshot(path) == before[path], name


def test_driver_status_keeps_its_record_through_check_mode_and_once(lab, tmp_path):
    path = tmp_path / "gpuops" / "driver-state.json"
    args = "record=%s" % path
    planned = lab.module("hgx-h100", module="gpuops.nvidia.driver_status", args=args, check_mode=True)
    assert planned["changed"] is True and not path.exists()
    done = lab.module("hgx-h100", module="gpuops.nvidia.driver_status", args=args)
    assert done["changed"] is True
    assert json.loads(path.read_text())["state"] == done["state"]
    again = lab.module("hgx-h100", module="gpuops.nvidia.driver_status", args=args)
    assert again["changed"] is False


def test_node_audit_reports_unusable_records_as_drift_and_fails_not(lab, tmp_path):
    inventory = tmp_path / "gpu-inventory.json"
    inventory.write_text(json.dumps({"schema": "gpuops.nvidia/gpu-inventory/v2", "gpus": 8}))
    (tmp_path / "packages").mkdir()
    driver = tmp_path / "packages" / "driver.json"
    driver.write_text("[\"nvidia-open\"]\n")
    args = "runtime=none inventory_path=%s driver_record=%s" % (inventory, driver)
    result = lab.module("hgx-h100", module="gpuops.nvidia.node_audit", args=args, check_mode=True)
    assert not result.get("failed") and result["changed"] is False and result["drifted"] is True
    bad = {i["item"]: i for i in result["audit_items"] if not i["ok"]}
    record = bad["GPU inventory record"]
    assert str(inventory) in record["actual"] and "its gpus is a number" in record["actual"]
    assert record["fix"] == "move the file away; the report stage (site.yml --tags report) writes it anew"
    package = bad["driver package record"]
    assert str(driver) in package["actual"] and "holds a JSON list" in package["actual"]
    assert "driver stage" in package["fix"]
    # the other checks still ran: the GPUs' health from NVML
    assert any(i["item"] == "GPU health" and i["ok"] for i in result["audit_items"]), result["audit_items"]
    assert result["facts"]["gpu_models"] == ["NVIDIA H100 80GB HBM3"]


def test_node_audit_with_good_records_has_no_record_item(lab, tmp_path):
    inventory = tmp_path / "gpu-inventory.json"
    lab.module("hgx-h100", module="gpuops.nvidia.gpu_report", args="path=%s kernel_log=false" % inventory)
    (tmp_path / "driver.json").write_text(json.dumps({"requires": ["nvidia-open"]}))
    args = "runtime=none inventory_path=%s driver_record=%s" % (inventory, tmp_path / "driver.json")
    result = lab.module("hgx-h100", module="gpuops.nvidia.node_audit", args=args, check_mode=True)
    checked = {i["item"]: i["ok"] for i in result["audit_items"]}
    assert "GPU inventory record" not in checked and "driver package record" not in checked
    assert checked["GPU health"] is True

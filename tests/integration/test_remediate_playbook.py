# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The remediation playbook refuses what it cannot act on before it contacts any node or cluster:
a malformed alert (by its argument spec and the planner's own checks, naming the problem and the
fix), and an alert for a node that no host of the inventory is. The inventory's host has an
address nothing answers on and the kubeconfig does not exist, so a contact would fail the run in
another way than the one asserted. (The lab's tests run the whole loop: test_remediation.py.)"""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from conftest import BIN, REPO, _env  # pylint: disable=import-error


def _run(tmp_path, *extra_vars):
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("[gpu_nodes]\ngpu-01 ansible_host=192.0.2.1 ansible_connection=ssh\n")
    argv = [os.path.join(BIN, "ansible-playbook"), "-i", str(inventory), os.path.join(REPO, "playbooks", "remediate.yml"),
            "-e", json.dumps({"gpuops_kubeconfig": str(tmp_path / "no-such-kubeconfig")})]
    for value in extra_vars:
        argv += ["-e", json.dumps(value)]
    env = _env()
    env.pop("ANSIBLE_STDOUT_CALLBACK")
    return subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, check=False, timeout=120)


@pytest.mark.parametrize("variables, named", [
    ({"gpuops_remediation_alert": {"node": "gpu-01", "finding": "xid", "action": "reboot-everything"}},
     "gpuops_remediation_alert.action is 'reboot-everything'; it must be one of none, restart-workload, "
     "gpu-reset, node-reboot, quarantine"),
    ({"gpuops_remediation_alert": {"finding": "xid", "action": "gpu-reset"}},
     "gpuops_remediation_alert.node is missing: the alert must carry the label node"),
    ({"gpuops_remediation_alert": {"node": "gpu-01", "finding": "xid", "action": "gpu-reset"},
      "gpuops_remediation_max_action": "everything"},
     "value of gpuops_remediation_max_action must be one of: none, restart-workload, gpu-reset, node-reboot, "
     "quarantine, got: everything"),
    ({}, "give the alert as gpuops_remediation_alert (a dict; the rulebook does) or gpuops_remediation_alert_json"),
])
def test_a_bad_alert_is_refused_before_any_node_is_contacted(tmp_path, variables, named):
    res = _run(tmp_path, variables)
    out = " ".join((res.stdout + res.stderr).split())
    assert res.returncode != 0
    assert named in out, out[-3000:]
    assert "UNREACHABLE" not in res.stdout and "Read the node" not in res.stdout


def test_an_alert_for_a_node_the_inventory_lacks_is_refused(tmp_path):
    alert = {"node": "gpu-99", "finding": "gpu_lost", "action": "node-reboot", "labels": {"gpu": "1"},
             "starts_at": "2026-12-05T10:00:00Z", "fingerprint": "0011223344556677"}
    res = _run(tmp_path, {"gpuops_remediation_alert": alert})
    out = " ".join((res.stdout + res.stderr).split())
    assert res.returncode != 0
    assert ("the alert names node gpu-99, which no host of the inventory's gpu_nodes is (a host's node name is "
            "node_labels_node_name, else its inventory name): nothing was changed") in out, out[-3000:]
    assert "UNREACHABLE" not in res.stdout and "Read the node" not in res.stdout


def test_an_alertmanager_alert_as_json_text_is_taken(tmp_path):
    """What an AWX survey passes (gpuops_remediation_alert_json), an Alertmanager alert as it is:
    read, checked, and refused for its unknown node - the same path as the rulebook's dict."""
    raw = {"status": "firing", "labels": {"node": "gpu-98", "finding": "xid", "action": "gpu-reset", "xid": "95"},
           "startsAt": "2026-12-05T10:00:00Z", "fingerprint": "8899aabbccddeeff"}
    res = _run(tmp_path, {"gpuops_remediation_alert_json": json.dumps(raw)})
    assert res.returncode != 0
    assert "the alert names node gpu-98" in " ".join(res.stdout.split()), res.stdout[-3000:]

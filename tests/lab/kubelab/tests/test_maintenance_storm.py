# -*- coding: utf-8 -*-
"""One maintenance budget across kinds: an alert storm during a rolling driver upgrade. Synthetic
GPU nodes (kwok) of the lab cluster: a rolling upgrade of some (playbooks/upgrade.yml) runs, and
once it has taken its first node out, GPU-reset alerts for the others all arrive at once, each
starting gpuops.nvidia.remediate as the rulebook does (one run per node). With max_unavailable 2
for both, never more than two GPU nodes of the cluster are out of service at any moment; a
remediation that has to wait says so (its node is labelled remediation-waiting, with the
reason in gpuops.nvidia/maintenance-waiting) and goes on when a slot frees; the upgrade and every
remediation finish. The host of a synthetic node is the lab's stand-in: for the upgrade
tests/lab/upgrade-host-standin.yml, for the GPU reset an nvidia-smi that takes a moment and
records the GPU it reset."""
from __future__ import annotations

import json
import os
import stat
import threading
import time

import synthetic_fleet as fleet

PROFILE = "hgx-h100"
TARGET = "580.95.05"
UPGRADED, ALERTED = 3, 3
BUDGET = 2
RECORD = "gpuops.nvidia/remediation"
WAITING = "gpuops.nvidia/maintenance-waiting"

STANDIN = """#!/bin/sh
# the lab's stand-in for nvidia-smi on the host of a synthetic node: a GPU reset takes a moment
echo "$*" >> "{log}"
sleep 2
echo "GPU $3 was successfully reset."
"""


def _alert(node, uuid, fingerprint):
    return {"node": node, "finding": "xid", "action": "gpu-reset", "fingerprint": fingerprint,
            "starts_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "labels": {"alertname": "GPUXidError", "gpu": "0", "UUID": uuid, "xid": "95"}}


def test_an_alert_storm_during_a_rolling_upgrade_never_takes_more_nodes_than_the_budget(lab_only, tmp_path):
    kube = lab_only
    names = fleet.create_nodes(UPGRADED + ALERTED, PROFILE)
    try:
        upgraded, alerted = names[:UPGRADED], names[UPGRADED:]
        binaries = tmp_path / "bin"
        binaries.mkdir()
        resets = tmp_path / "resets.log"
        standin = binaries / "nvidia-smi"
        standin.write_text(STANDIN.format(log=resets))
        standin.chmod(standin.stat().st_mode | stat.S_IXUSR)
        report = tmp_path / "remediation.jsonl"
        results = {}
        with fleet.NodeWatch(kube.kubeconfig) as watch:
            upgrade = threading.Thread(target=lambda: results.update(upgrade=fleet.upgrade(
                upgraded, TARGET, max_unavailable=str(BUDGET), parallel=2, step=4)))
            upgrade.start()
            # the storm comes once the upgrade has a node out of service
            kube.wait(lambda: any(n in watch._out_since for n in upgraded) or not upgrade.is_alive(),  # pylint: disable=protected-access
                      timeout=180, what="the upgrade to take its first node out of service")
            runs = {node: fleet.playbook(
                "remediate.yml", [node], {"driver_upgrade_validate": False, "driver_upgrade_max_unavailable": BUDGET},
                {"gpuops_remediation_alert": _alert(node, "GPU-storm-%d" % i, "%016x" % (0xa1e47 + i)),
                 "gpuops_remediation_report": str(report)},
                env={"PATH": "%s:%s" % (binaries, os.environ["PATH"])}, wait=False)
                for i, node in enumerate(alerted)}
            for proc in runs.values():
                proc.wait(timeout=900)
            upgrade.join(900)
        res = results["upgrade"]
        assert res.returncode == 0, res.stdout[-6000:]
        for node, proc in runs.items():
            with open(proc.stdout_path, encoding="utf-8") as handle:
                out = handle.read()
            assert proc.returncode == 0, (node, out[-6000:])

        # never more GPU nodes out of service than the one budget, and the budget used
        assert watch.peak == BUDGET, (watch.peak, watch.out_total)
        # the upgrade: every node done, on the new driver, schedulable
        for node in upgraded:
            item = kube.get("node", node)
            assert item["metadata"]["labels"][fleet.STATE] == "upgrade-done"
            assert item["metadata"]["labels"][fleet.DRIVER_LABEL] == TARGET
            assert not item["spec"].get("unschedulable")
        # the remediations: each GPU reset once, each node through the engine's states, done and back
        assert sorted(line.split()[-1] for line in resets.read_text().splitlines()) == \
            ["GPU-storm-%d" % i for i in range(ALERTED)]
        for node in alerted:
            item = kube.get("node", node)
            record = json.loads(item["metadata"]["annotations"][RECORD])
            assert record["state"] == "remediation-done", record
            assert [(a["action"], a["result"]) for a in record["attempts"]] == [("gpu-reset", "done")]
            assert item["metadata"]["labels"]["gpuops.nvidia/remediation-state"] == "remediation-done"
            assert item["metadata"]["labels"][fleet.STATE] == "upgrade-done"
            assert not item["spec"].get("unschedulable") and WAITING not in item["metadata"]["annotations"]
            assert watch.states[node][-1] == "upgrade-done" and "pod-restart-required" in watch.states[node]
        # with two slots, an upgrade node out and three alerts at once, some remediation had to wait,
        # and said so, then went on
        waited = [n for n in alerted if "remediation-waiting" in watch.remediation.get(n, [])]
        assert waited, watch.remediation
        for node in waited:
            states = watch.remediation[node]
            assert states[states.index("remediation-waiting") + 1:][:1] == ["remediation-in-progress"], states
        assert {json.loads(line)["node"] for line in report.read_text().splitlines()} == set(alerted)
    finally:
        fleet.delete_nodes()


def test_a_quarantine_alert_leaves_the_node_cordoned_tainted_and_drained_with_an_rma_record(lab_only, tmp_path):
    """The quarantine path against the real API server (a synthetic node: the quarantine touches
    no host): cordoned, tainted gpuops.nvidia/quarantined, its pods drained, upgrade-failed so that
    no upgrade resumes it, its record quarantined with the RMA - without gpu_report's inventory
    record on its host, the RMA says how to get the serial; a second alert does nothing more."""
    kube = lab_only
    node = fleet.create_nodes(1, PROFILE)[0]
    try:
        alert = {"node": node, "finding": "row_remap_failure", "action": "quarantine", "fingerprint": "0fa11ed0c0ffee00",
                 "starts_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
                 "labels": {"alertname": "GPURowRemapFailure", "gpu": "3", "UUID": "GPU-quarantine-3"}}
        report = tmp_path / "remediation.jsonl"
        inventory = {"driver_upgrade_validate": False, "gpu_report_inventory_path": str(tmp_path / "none.json")}
        res = fleet.playbook("remediate.yml", [node], inventory,
                             {"gpuops_remediation_alert": alert, "gpuops_remediation_report": str(report)})
        assert res.returncode == 0, res.stdout[-6000:]
        item = kube.get("node", node)
        labels = item["metadata"]["labels"]
        assert item["spec"].get("unschedulable") is True
        assert {"key": "gpuops.nvidia/quarantined", "value": "true", "effect": "NoSchedule"} in item["spec"]["taints"]
        assert labels[fleet.STATE] == "upgrade-failed" and labels["gpuops.nvidia/remediation-state"] == "quarantined"
        record = json.loads(item["metadata"]["annotations"][RECORD])
        assert record["state"] == "quarantined"
        assert record["rma"]["uuid"] == "GPU-quarantine-3" and record["rma"]["serial"] is None
        assert "run the gpu_report role on the node" in record["rma"]["note"]
        assert "RMA: GPU 3, UUID GPU-quarantine-3, serial unknown" in res.stdout
        # the same alert again: the node is quarantined, a person brings it back
        again = fleet.playbook("remediate.yml", [node], inventory,
                               {"gpuops_remediation_alert": dict(alert, fingerprint="0fa11ed0c0ffee01"),
                                "gpuops_remediation_report": str(report)})
        assert again.returncode == 0 and "is quarantined" in again.stdout, again.stdout[-4000:]
        assert json.loads(kube.get("node", node)["metadata"]["annotations"][RECORD])["attempts"] == record["attempts"]
    finally:
        fleet.delete_nodes()

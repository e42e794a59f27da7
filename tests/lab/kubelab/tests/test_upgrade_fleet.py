# -*- coding: utf-8 -*-
"""A rolling driver upgrade of a fleet: 24 synthetic GPU nodes (kwok) of the lab cluster move from
the driver their profile reports to another through playbooks/upgrade.yml - the canary first and
alone, tainted; then the rest in waves of upgrade_max_parallel, never more GPU nodes cordoned than
max_unavailable allows, a node an administrator cordoned for other reasons counted; each node
through the GPU Operator's states to upgrade-done. A node labelled gpu-driver-upgrade.skip is left
alone, a workload's PodDisruptionBudget holds throughout, a pod labelled drain.skip stays. The
host step of a synthetic node is the lab's stand-in (tests/lab/upgrade-host-standin.yml: the node
then reports the new driver, as GPU Feature Discovery labels it); everything else is the role
against the real API server. 24 nodes give the same shape as 64 (the canary, then four waves held
back by max_unavailable, not by upgrade_max_parallel) at a third of the cost; the scale is
measured by tests/benchmarks/upgrade_bench.py, which upgrades 64 the same way and prints the
figures.)"""
from __future__ import annotations

import json
import math
import os
import re
import subprocess
import threading

import pytest

from conftest import KUBECTL
import synthetic_fleet as fleet

PROFILE = "hgx-h100"
FROM, TARGET = "570.172.08", "580.95.05"  # the profile's driver, and the upgrade's
NODES = 24
PARALLEL = 20  # more than max_unavailable leaves free: the limit, not the batch, holds them back
CANARY_TAINT = "gpuops.nvidia/driver-upgrade-canary"
STEPS = ["cordon-required", "pod-deletion-required", "drain-required", "pod-restart-required",
         "validation-required", "uncordon-required", "upgrade-done"]
NS = "gpuops-fleet-upgrade-test"


class BudgetWatch:
    """The fewest healthy pods a PodDisruptionBudget counted while the upgrade ran (every status
    update the disruption controller writes is a watch event)."""

    def __init__(self, kube, name):
        self.fewest = None
        self._stop = threading.Event()
        self._proc = None
        self._args = [KUBECTL, "get", "pdb", name, "-n", NS, "--watch", "-o", "jsonpath={.status.currentHealthy}{\"\\n\"}"]
        self._env = dict(os.environ, KUBECONFIG=kube.kubeconfig)
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            self._proc = subprocess.Popen(self._args, stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True,
                                          env=self._env)
            for line in self._proc.stdout:
                if line.strip().isdigit():
                    healthy = int(line)
                    self.fewest = healthy if self.fewest is None else min(self.fewest, healthy)
            self._proc.wait()

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        if self._proc is not None:
            self._proc.terminate()
        self._thread.join(10)


@pytest.fixture
def fleet_nodes(lab_only):
    """The fleet (the upgrade's NODES, one labelled to be skipped), and one more node an
    administrator cordoned; all removed afterwards."""
    kube = lab_only
    names = fleet.create_nodes(NODES + 2, PROFILE)
    yield kube, names[:NODES], names[NODES], names[NODES + 1]
    kube.run("delete", "namespace", NS, "--ignore-not-found", "--wait=false", check=False)
    fleet.delete_nodes()


def test_a_fleet_of_synthetic_nodes_upgrades_canary_first_then_in_waves_within_max_unavailable(fleet_nodes):
    kube, names, skipped, cordoned = fleet_nodes
    kube.run("label", "node", skipped, "nvidia.com/gpu-driver-upgrade.skip=true")
    kube.run("cordon", cordoned)
    # a workload on the fleet whose budget allows one pod at a time to go, and a pod the drain keeps
    kube.run("create", "namespace", NS, check=False)
    labels = {"app": "guarded"}
    on_kwok = {"tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists", "effect": "NoSchedule"}],
               "nodeSelector": {"gpuops.lab/node": "synthetic"}, "terminationGracePeriodSeconds": 0,
               "containers": [{"name": "work", "image": "localhost/gpuops-lab/toolbox:1"}]}
    kube.apply({"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "guarded", "namespace": NS},
                "spec": {"replicas": 4, "selector": {"matchLabels": labels},
                         "template": {"metadata": {"labels": labels}, "spec": on_kwok}}},
               {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "guarded", "namespace": NS},
                "spec": {"minAvailable": 3, "selector": {"matchLabels": labels}}},
               {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "keep-me", "namespace": NS,
                             "labels": {"nvidia.com/gpu-driver-upgrade-drain.skip": "true"}},
                "spec": dict(on_kwok, nodeName=names[10])},
               namespace=NS)
    kube.wait(lambda: kube.get("-n", NS, "deployment", "guarded")["status"].get("availableReplicas") == 4
              and kube.pod_phase(NS, "keep-me") == "Running", timeout=120, what="the workload on the fleet")
    before = {p["metadata"]["uid"]: p["spec"]["nodeName"] for p in kube.get("-n", NS, "pod", "-l", "app=guarded")["items"]}
    keep_uid = kube.get("-n", NS, "pod", "keep-me")["metadata"]["uid"]

    gpu_nodes = fleet.gpu_node_count()
    limit = math.ceil(gpu_nodes * 0.25)  # max_unavailable 25%, rounded up as the operator rounds it
    with fleet.NodeWatch(kube.kubeconfig) as watch, BudgetWatch(kube, "guarded") as budget:
        res = fleet.upgrade(names + [skipped], TARGET, max_unavailable="25%", parallel=PARALLEL, step=1)
    out = res.stdout
    assert res.returncode == 0, out[max(out.find("fatal: ") - 2000, 0):][:8000] if "fatal: " in out else out[-6000:]

    # the plan: the first node by name is the canary, the skipped node is named, the others wait
    canary = sorted(names)[0]
    assert f"canary: {canary}" in out and f"skipped (nvidia.com/gpu-driver-upgrade.skip=true): {skipped}" in out
    # the canary alone and tainted until it was done; no other node started before that
    assert CANARY_TAINT in watch.taints[canary], watch.taints[canary]
    canary_done = watch.reached[(canary, "upgrade-done")]
    assert all(watch.first_change[n] >= canary_done for n in names if n != canary)
    # then the waves: as many nodes at once as max_unavailable leaves with the administrator's
    # cordoned node counted (fewer than upgrade_max_parallel), the canary's wave + ceil((NODES - 1) / slots);
    # never more cordoned GPU nodes than the limit, and the limit used
    slots = min(limit - 1, PARALLEL)
    assert f"max_unavailable {limit}, {slots} at once" in out
    assert fleet.waves(out) == 1 + math.ceil((NODES - 1) / slots)
    assert watch.peak == limit, (watch.peak, limit, gpu_nodes)
    # every node of the fleet through the operator's states, done, schedulable, on the new driver
    for name in names:
        assert watch.states[name] == [None] + STEPS, (name, watch.states[name])
        item = kube.get("node", name)
        assert item["metadata"]["labels"][fleet.STATE] == "upgrade-done"
        assert item["metadata"]["labels"][fleet.DRIVER_LABEL] == TARGET
        assert not item["spec"].get("unschedulable")
        assert CANARY_TAINT not in {t["key"] for t in item["spec"].get("taints", [])}
    # the skipped node left alone, the administrator's cordon left in place
    for name, driver in ((skipped, FROM), (cordoned, FROM)):
        assert watch.states[name] == [None]
        assert kube.get("node", name)["metadata"]["labels"][fleet.DRIVER_LABEL] == driver
    assert kube.get("node", cordoned)["spec"].get("unschedulable") is True
    assert not kube.get("node", skipped)["spec"].get("unschedulable") and watch.out_total.get(skipped, 0) == 0
    # the workload: evicted from the nodes as they drained, never below its budget; the kept pod kept
    assert budget.fewest is not None and budget.fewest >= 3, budget.fewest
    after = {p["metadata"]["uid"] for p in kube.get("-n", NS, "pod", "-l", "app=guarded")["items"]}
    evicted = [uid for uid, node in before.items() if node in names]
    assert evicted and not set(evicted) & after, (before, after)
    assert kube.get("-n", NS, "pod", "keep-me")["metadata"]["uid"] == keep_uid
    # a second run finds the fleet done and changes nothing
    again = fleet.upgrade(names + [skipped], TARGET, max_unavailable="25%", parallel=PARALLEL, step=1)
    assert again.returncode == 0 and re.search(r"done already: %s(, |\n|$)" % re.escape(canary), again.stdout), \
        again.stdout[-3000:]


def test_a_node_that_fails_in_a_wave_stops_the_waves_after_it(lab_only, tmp_path):
    """The waves run under the free strategy (each node on to its next step without waiting for the
    wave's slowest): a node whose host step fails is left upgrade-failed and cordoned, the other node
    of its wave finishes, and no later wave starts - its nodes are not touched, and the run says so
    and fails. (A wave whose every node fails stops the run as Ansible stops it.)"""
    kube = lab_only
    names = sorted(fleet.create_nodes(5, PROFILE))
    canary, failing, other, later = names[0], names[1], names[2], names[3:]
    host_tasks = tmp_path / "host-tasks.yml"
    host_tasks.write_text(
        "- name: Fail the host step of the test's node\n"
        "  ansible.builtin.fail:\n"
        "    msg: the driver install failed (the test's)\n"
        f"  when: driver_upgrade_node_name == '{failing}'\n"
        "- name: The lab's stand-in for the others\n"
        f"  ansible.builtin.include_tasks: {os.path.join(fleet.LAB, 'upgrade-host-standin.yml')}\n")
    try:
        res = fleet.upgrade(names, TARGET, max_unavailable=2, parallel=2, step=1,
                            extra={"driver_upgrade_host_tasks": str(host_tasks)})
        out = res.stdout
        assert res.returncode != 0, out[-4000:]
        assert f"the driver upgrade of {failing} failed at" in out, out[-4000:]
        # (the message as one line: the job log folds it)
        assert f"not started: {', '.join(later)} and the waves after them, as {failing} failed in an earlier wave" \
            in " ".join(out.split()), out[-4000:]
        states = {n["metadata"]["name"]: (n["metadata"]["labels"].get(fleet.STATE), bool(n["spec"].get("unschedulable")))
                  for n in json.loads(fleet.kubectl("get", "nodes", "-o", "json"))["items"] if n["metadata"]["name"] in names}
        assert states == {canary: ("upgrade-done", False), failing: ("upgrade-failed", True),
                          other: ("upgrade-done", False), later[0]: (None, False), later[1]: (None, False)}, states
    finally:
        fleet.delete_nodes()

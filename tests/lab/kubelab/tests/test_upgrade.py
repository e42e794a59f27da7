# -*- coding: utf-8 -*-
"""Rolling driver upgrades on the lab cluster (playbooks/upgrade.yml): the two lab nodes move from
their drivers to 580.65.06 from the lab's NVIDIA-style repository, the canary first, each through
the GPU Operator's upgrade states (nvidia.com/gpu-driver-upgrade-state) as the operator writes
them, with a PodDisruptionBudget that refuses the eviction until the workload has a second replica,
a pod labelled to be skipped by the drain, a failure that leaves the node upgrade-failed and
cordoned, and a second run that resumes. --check lists the waves and changes nothing. Afterwards
the lab's own drivers are put back (the site's driver stage)."""
from __future__ import annotations

import json
import threading

import pytest

import synthetic_fleet as fleet
from test_roles import extra, playbook

H100, L40S = "gpuops-lab-h100", "gpuops-lab-l40s"
STATE = "nvidia.com/gpu-driver-upgrade-state"
CANARY_TAINT = "gpuops.nvidia/driver-upgrade-canary"
TARGET = "580.65.06"
# the lab's "reboot" is the simulated node's: the fake NVML's reboot ends processes and MIG
# instances, then what a boot runs - the simulated driver loads what is installed now
# (gpuops-fake-boot, the driver root of gpuops-fake-driver) and the toolkit's refresh service
# writes the CDI spec; the boot time is the fake NVML state file's
LAB_BOOT = ("fake-nvml-reset && systemctl restart gpuops-fake-boot.service gpuops-fake-driver.service"
            " && systemctl restart nvidia-cdi-refresh.service")
LAB_REBOOT = {"driver_reboot_command": "sh -c '%s'" % LAB_BOOT,
              # (a node whose fake NVML never wrote its state yet has booted "never")
              "driver_reboot_boot_time_command": "sh -c 'stat -c %.9Y /var/lib/gpuops-fake-nvml/state 2>/dev/null"
                                                 " || echo never'",
              "validate_workload_timeout": 90, "validate_prometheus_url": "", "driver_upgrade_drain_delay": 3}


def upgrade(*args, check=True, **values):
    return playbook("upgrade.yml", *extra(driver_version=TARGET, driver_branch="580", **dict(LAB_REBOOT, **values)),
                    *args, check=check, timeout=1800)


def node(kube, name):
    return kube.get("node", name)


def refused_evictions(kube):
    """How many evictions the API server refused (HTTP 429: a PodDisruptionBudget said no) since it
    started, by its own request counter."""
    text = kube.run("get", "--raw", "/metrics").stdout
    return sum(float(line.rsplit(" ", 1)[1]) for line in text.splitlines()
               if line.startswith("apiserver_request_total{") and 'subresource="eviction"' in line
               and 'code="429"' in line)


def guarded_workload(namespace, name):
    """A workload (deployment "guarded", one replica) on node ``name`` and its PodDisruptionBudget,
    which refuses the eviction of its one pod."""
    labels = {"app": "guarded"}
    return [{"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "guarded", "namespace": namespace},
             "spec": {"replicas": 1, "selector": {"matchLabels": labels},
                      "template": {"metadata": {"labels": labels},
                                   "spec": {"nodeSelector": {"kubernetes.io/hostname": name},
                                            "terminationGracePeriodSeconds": 1,
                                            "containers": [{"name": "sleep", "image": "localhost/gpuops-lab/toolbox:1",
                                                            "imagePullPolicy": "Never",
                                                            "command": ["sleep", "100000"]}]}}}},
            {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "guarded", "namespace": namespace},
             "spec": {"minAvailable": 1, "selector": {"matchLabels": labels}}}]


def allow_eviction_once_refused(kube, name, namespace, errors, timeout=1500):
    """While node ``name`` drains, the PodDisruptionBudget of the deployment "guarded" refuses its
    eviction; once the API server counted a refusal, the workload gets a second replica elsewhere
    (its nodeSelector removed), so the budget allows it. (A helper thread: failures go to errors.)"""
    try:
        kube.wait(lambda: node(kube, name)["metadata"]["labels"].get(STATE) == "drain-required", timeout=timeout,
                  interval=1, what=f"{name} to drain")
        # the drain asks again every driver_upgrade_drain_delay seconds while the budget refuses
        refused = refused_evictions(kube)
        kube.wait(lambda: refused_evictions(kube) > refused, timeout=60,
                  what=f"the budget to refuse an eviction from the draining {name} (the API server's count of "
                       "HTTP 429 evictions)")
        kube.run("patch", "deployment", "guarded", "-n", namespace, "--type=json", "-p",
                 json.dumps([{"op": "remove", "path": "/spec/template/spec/nodeSelector"},
                             {"op": "replace", "path": "/spec/replicas", "value": 2}]))
    except AssertionError as exc:
        errors.append(exc)


def shape(kube, name):
    """What the upgrade could change on a Node (its status moves with every kubelet heartbeat)."""
    item = node(kube, name)
    labels = {k: v for k, v in item["metadata"].get("labels", {}).items() if k != "nvidia.com/gfd.timestamp"}
    annotations = {k: v for k, v in item["metadata"].get("annotations", {}).items() if k.startswith("gpuops.nvidia/")}
    return labels, annotations, item["spec"].get("taints"), item["spec"].get("unschedulable")


@pytest.fixture(scope="module")
def upgrade_lab(lab_only):
    kube = lab_only
    yield kube
    # the lab's own drivers again (570.172.08 and 580.95.05, the inventory's), nothing left behind
    kube.run("delete", "namespace", "gpuops-upgrade-test", "--ignore-not-found", "--wait=false", check=False)
    for name in (H100, L40S):
        kube.run("uncordon", name, check=False)
        kube.run("label", "node", name, f"{STATE}-", check=False)
        kube.run("taint", "node", name, f"{CANARY_TAINT}-", check=False)
    playbook("site.yml", "--tags", "driver", *extra(driver_allow_branch_change=True, **LAB_REBOOT), timeout=1800)
    # the operands keep the driver they started with (the DRA driver's CDI spec names its libraries
    # by version): as an upgrade does, restart them on both nodes, and wait for them
    old = {p["metadata"]["uid"] for p in kube.get("-n", "gpuops-nvidia", "pods")["items"]}
    kube.run("-n", "gpuops-nvidia", "delete", "pods", "--all", "--wait=false")

    def back():
        pods = kube.get("-n", "gpuops-nvidia", "pods")["items"]
        sets = kube.get("-n", "gpuops-nvidia", "daemonsets")["items"]
        return not {p["metadata"]["uid"] for p in pods} & old and all(
            d["status"].get("numberReady") == d["status"].get("desiredNumberScheduled") for d in sets) and all(
            any(c["type"] == "Ready" and c["status"] == "True" for c in p["status"].get("conditions", [])) for p in pods)
    kube.wait(back, timeout=240, what="the operands restarted on the lab's drivers")


def test_check_mode_lists_the_waves_and_changes_nothing(upgrade_lab):
    kube = upgrade_lab
    before = {n: shape(kube, n) for n in (H100, L40S)}
    res = upgrade("--check", upgrade_max_parallel=1, driver_upgrade_max_unavailable=1)
    out = res.stdout
    assert f"target driver {TARGET}; 2 GPU node(s), max_unavailable 1, 1 at once" in out, out[-4000:]
    assert f"canary: {H100}" in out and f"wave: {L40S}" in out
    assert "each node, as its label nvidia.com/gpu-driver-upgrade-state says:" in out
    assert "  cordon-required: cordon the node" in out and "  drain-required: drain the node" in out
    assert "  validation-required: validate the node" in out and "  upgrade-done: done" in out
    after = {n: shape(kube, n) for n in (H100, L40S)}
    assert after == before


def test_a_node_labelled_to_be_skipped_is_left_alone(upgrade_lab):
    kube = upgrade_lab
    kube.run("label", "node", L40S, "nvidia.com/gpu-driver-upgrade.skip=true", "--overwrite")
    try:
        res = upgrade("--check")
        assert f"skipped (nvidia.com/gpu-driver-upgrade.skip=true): {L40S}" in res.stdout
        assert f"wave: {L40S}" not in res.stdout
    finally:
        kube.run("label", "node", L40S, "nvidia.com/gpu-driver-upgrade.skip-", check=False)


def test_a_failed_validation_stops_the_run_and_leaves_the_node_labelled_and_cordoned(upgrade_lab):
    kube = upgrade_lab
    kube.run("create", "namespace", "gpuops-upgrade-test", check=False)
    failing = {"apiVersion": "v1", "kind": "Pod",
               "metadata": {"name": "smoke", "namespace": "gpuops-upgrade-test"},
               "spec": {"containers": [{"name": "smoke", "image": "localhost/gpuops-lab/toolbox:1",
                                        "imagePullPolicy": "Never", "command": ["sh", "-c", "exit 3"]}]}}
    res = upgrade(check=False, driver_upgrade_test_pod=failing, driver_upgrade_max_unavailable=1)
    assert res.returncode != 0
    assert f"the driver upgrade of {H100} failed at" in res.stdout and "ended Failed" in res.stdout, res.stdout[-4000:]
    h100, l40s = node(kube, H100), node(kube, L40S)
    assert h100["metadata"]["labels"][STATE] == "upgrade-failed" and h100["spec"].get("unschedulable") is True
    # the run stopped before the next wave: the other node was not touched
    assert STATE not in l40s["metadata"]["labels"] and not l40s["spec"].get("unschedulable")
    # a second run refuses to go on until told to retry the failed node
    res = upgrade(check=False)
    assert res.returncode != 0 and "upgrade_retry_failed" in res.stdout


def test_the_upgrade_moves_both_nodes_through_the_operators_states(upgrade_lab):
    """A node a run left midway (H100) first, then the wave (L40S); a workload with a
    PodDisruptionBudget that refuses its eviction until it has a second replica elsewhere; a pod
    labelled drain.skip stays."""
    kube = upgrade_lab
    ns = "gpuops-upgrade-test"
    kube.run("create", "namespace", ns, check=False)
    kube.apply(*guarded_workload(ns, L40S),
               {"apiVersion": "v1", "kind": "Pod",
                "metadata": {"name": "keep-me", "namespace": ns,
                             "labels": {"nvidia.com/gpu-driver-upgrade-drain.skip": "true"}},
                "spec": {"nodeName": L40S, "terminationGracePeriodSeconds": 1,
                         "containers": [{"name": "sleep", "image": "localhost/gpuops-lab/toolbox:1",
                                         "imagePullPolicy": "Never", "command": ["sleep", "100000"]}]}},
               namespace=ns)
    kube.wait(lambda: kube.get("-n", ns, "deployment", "guarded")["status"].get("readyReplicas") == 1, timeout=120,
              what="the guarded workload")

    helper_errors = []

    # the earlier test left the H100 upgrade-failed; as if a run had then been killed while it drained
    # it, the node says drain-required: this run resumes it first, without being told to retry
    kube.run("label", "node", H100, f"{STATE}=drain-required", "--overwrite")
    helper = threading.Thread(target=allow_eviction_once_refused, args=(kube, L40S, ns, helper_errors), daemon=True)
    helper.start()
    with fleet.NodeWatch(kube.kubeconfig) as watch:
        # no canary this time (the failed run had one: its taint goes too)
        res = upgrade("-v", check=False, driver_upgrade_max_unavailable=1, upgrade_canary=0)
    helper.join(5)
    out = res.stdout
    assert not helper_errors, helper_errors
    assert res.returncode == 0, out[-6000:]
    assert f"resume (left midway by an earlier run): {H100}" in out and f"wave: {L40S}" in out
    steps = ["cordon-required", "pod-deletion-required", "drain-required", "pod-restart-required",
             "validation-required", "uncordon-required", "upgrade-done"]
    assert watch.states[H100][0] == "drain-required" and watch.states[H100][-5:] == steps[2:], watch.states
    assert watch.states[L40S] == [None] + steps, watch.states
    assert watch.peak == 1  # max_unavailable 1: never more GPU nodes cordoned at once
    # the budget refused at first, the eviction was asked again until it allowed it (the module's
    # result, which -v shows)
    drained = [task for task in out.split("TASK [") if task.startswith("gpuops.nvidia.driver_upgrade : Take the node out")
               and f"changed: [{L40S}" in task]
    assert len(drained) == 1 and "PodDisruptionBudgets refused" in drained[0], out[-6000:]
    assert "gpuops-upgrade-test/guarded-" in drained[0] and "gpuops-upgrade-test/keep-me" not in drained[0]
    assert kube.get("-n", ns, "pod", "keep-me")["status"]["phase"] == "Running"
    for name in (H100, L40S):
        item = node(kube, name)
        assert not item["spec"].get("unschedulable") and not any(
            t["key"] == CANARY_TAINT for t in item["spec"].get("taints", [])), item["spec"]
        kube.wait(lambda n=name: node(kube, n)["metadata"]["labels"].get("nvidia.com/cuda.driver-version.full") == TARGET,
                  timeout=180, what=f"GFD to label {name} with driver {TARGET}")
    # a second run finds both done and changes nothing
    again = upgrade(check=False)
    assert "done already: %s, %s" % (H100, L40S) in again.stdout

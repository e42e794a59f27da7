# -*- coding: utf-8 -*-
"""MIG in the cluster, label-driven as with NVIDIA's MIG manager: the node's nvidia.com/mig.config
label chooses the layout, the role pauses the GPU operands on that node (their
nvidia.com/gpu.deploy.* labels go to paused-for-mig-change and their pods leave), applies,
reports nvidia.com/mig.config.state and restores exactly the labels it paused; NVIDIA's device
plugin (migStrategy mixed) then advertises nvidia.com/mig-* and GFD labels them, and validation
passes. A failure midway leaves the state label `failed` and the operands restored. Runs the site
playbook's mig stage on the lab's H100 node (8 simulated H100 80GB)."""
from __future__ import annotations

import json
import os
import threading
import time

import pytest

from conftest import require
from test_roles import INVENTORY, extra, playbook

NODE = "gpuops-lab-h100"
DEPLOY = ["nvidia.com/gpu.deploy." + o for o in ("device-plugin", "gpu-feature-discovery", "dcgm-exporter")]
STATE = "nvidia.com/mig.config.state"
RECORD = "gpuops.nvidia/mig.paused-operands"
OPERAND_PODS = "app.kubernetes.io/name in (nvidia-device-plugin,gpu-feature-discovery,dcgm-exporter)"
CONFIGS = {"default": {"flags": {"migStrategy": "none"}}, "mig-mixed": {"flags": {"migStrategy": "mixed"}}}
DP_CONFIGS = extra(device_plugin_configs=CONFIGS)
NS = "gpuops-nvidia"
# the node's labels and annotations the set-up and the tests change (GFD's and NFD's follow the GPUs)
RESTORED_NODE_KEYS = ("nvidia.com/device-plugin.config", "nvidia.com/mig.config", "nvidia.com/gpu.deploy.",
                      "gpuops.nvidia/")


class LabelWatch:
    """Polls the node's labels while a playbook runs: every distinct value each key had."""

    def __init__(self, kube, keys):
        self.kube, self.keys, self.seen, self._stop = kube, keys, {k: [] for k in keys}, threading.Event()
        self.operand_pods_while_pending = []  # how many operand pods the node had at each poll while pending
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        while not self._stop.is_set():
            res = self.kube.run("get", "node", NODE, "-o", "json", check=False)
            if res.returncode == 0:
                labels = json.loads(res.stdout)["metadata"].get("labels", {})
                for key in self.keys:
                    value = labels.get(key)
                    if not self.seen[key] or self.seen[key][-1] != value:
                        self.seen[key].append(value)
                if labels.get(STATE) == "pending":
                    pods = self.kube.run("get", "pods", "-n", "gpuops-nvidia", "--field-selector",
                                         "spec.nodeName=" + NODE, "-l", OPERAND_PODS, "-o", "name", check=False)
                    if pods.returncode == 0:
                        self.operand_pods_while_pending.append(len(pods.stdout.split()))
            time.sleep(0.3)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(10)


def mig_stage(*args, check=True):
    return playbook("site.yml", "--tags", "mig", "--limit", NODE, *extra(gpuops_mig_follow_label=True), *DP_CONFIGS,
                    *args, check=check)


def node(kube):
    return kube.get("node", NODE)


def plugin_pod(kube):
    pods = kube.get("pods", "-n", "gpuops-nvidia", "-l", "app.kubernetes.io/name=nvidia-device-plugin",
                    "--field-selector", "spec.nodeName=" + NODE)["items"]
    return pods[0] if pods else None


def ready(pod):
    return bool(pod) and any(c["type"] == "Ready" and c["status"] == "True"
                             for c in pod.get("status", {}).get("conditions", []))


@pytest.fixture(scope="module")
def mig_node(kube):
    """The H100 node with the device plugin config mig-mixed (migStrategy mixed); afterwards MIG
    off, the labels and the default config back as make lab left them."""
    require(kube.lab, "the lab's own cluster", "this test reconfigures the lab node's GPUs: run it on the lab")
    host_vars = os.path.join(INVENTORY, "host_vars")
    os.makedirs(host_vars, exist_ok=True)
    path = os.path.join(host_vars, f"{NODE}.yml")
    saved_objects, saved_meta = kube.applied_objects(NS), kube.node_meta(NODE)
    with open(path, "w", encoding="utf-8") as f:
        f.write("node_labels_device_plugin_config: mig-mixed\n")
    try:
        playbook("site.yml", "--tags", "labels,operands", "--limit", NODE, *DP_CONFIGS)
        yield kube
    finally:
        kube.node_exec(NODE, "fake-nvml-busy --clear")
        kube.run("label", "node", NODE, "nvidia.com/mig.config-", f"{STATE}-", check=False)
        os.remove(path)
        # MIG off on the node's GPUs and its boot unit gone (the mig role's removal)
        playbook("site.yml", "--tags", "mig", "--limit", NODE, *extra(mig_state="absent", mig_cluster=False),
                 check=False)
        # what the set-up run and the tests changed in the cluster, put back: the node's config,
        # MIG and deploy labels and our annotations, the operands' configurations and DaemonSets
        kube.restore_node_meta(NODE, saved_meta, RESTORED_NODE_KEYS)
        kube.reapply_changed(NS, saved_objects)
        now = kube.node_meta(NODE)
        assert {k: v for part in ("labels", "annotations") for k, v in now[part].items()
                if k.startswith(RESTORED_NODE_KEYS)} == {k: v for part in ("labels", "annotations")
                                                         for k, v in saved_meta[part].items()
                                                         if k.startswith(RESTORED_NODE_KEYS)}
        kube.wait(lambda: node(kube)["status"]["allocatable"].get("nvidia.com/gpu") == "8", timeout=180,
                  what=f"{NODE}: 8 whole GPUs again")


def test_the_label_chooses_the_layout_and_the_operands_are_paused_then_restored(mig_node, tmp_path):
    kube = mig_node
    before = plugin_pod(kube)
    assert ready(before)
    kube.run("label", "node", NODE, "nvidia.com/mig.config=all-1g.10gb", "--overwrite")
    with LabelWatch(kube, DEPLOY + [STATE]) as watch:
        res = mig_stage()
    # while the GPUs changed, the state was pending and every operand paused; then success and
    # every label exactly as before
    assert watch.seen[STATE][-2:] == ["pending", "success"], watch.seen
    for key in DEPLOY:
        assert watch.seen[key] == ["true", "paused-for-mig-change", "true"], (key, watch.seen)
    # the operands' pods left the node while the change was pending (they hold the GPUs on a real node)
    assert 0 in watch.operand_pods_while_pending, watch.operand_pods_while_pending
    labels, annotations = node(kube)["metadata"]["labels"], node(kube)["metadata"].get("annotations", {})
    assert labels[STATE] == "success" and RECORD not in annotations
    assert "all-1g.10gb" in res.stdout and "GPU 7: none -> " in res.stdout
    # the plugin pod left the node and came back (a new pod); NVIDIA's device plugin advertises
    # the MIG devices under the mixed strategy, and GFD labels them
    kube.wait(lambda: ready(plugin_pod(kube)) and plugin_pod(kube)["metadata"]["uid"] != before["metadata"]["uid"],
              timeout=180, what="a new, ready device plugin pod")
    kube.wait(lambda: node(kube)["status"]["allocatable"].get("nvidia.com/mig-1g.10gb") == "56", timeout=180,
              what=f"{NODE}: 56 allocatable nvidia.com/mig-1g.10gb")
    # (the kubelet updates each resource as the plugin reports it: the whole GPUs go a moment later)
    kube.wait(lambda: node(kube)["status"]["allocatable"].get("nvidia.com/gpu", "0") == "0", timeout=120,
              what=f"{NODE}: no whole nvidia.com/gpu allocatable once every GPU is in MIG mode")
    kube.wait(lambda: node(kube)["metadata"]["labels"].get("nvidia.com/mig-1g.10gb.count") == "56", timeout=180,
              what="GFD's nvidia.com/mig-1g.10gb.count")
    assert node(kube)["metadata"]["labels"]["nvidia.com/mig.strategy"] == "mixed"
    # validation: allocatable as the layout says, a workload on a MIG device (its own report:
    # make lab's stays for test_roles)
    path = os.path.join(tmp_path, "validate-report.json")
    res = playbook("validate.yml", "--limit", NODE, *DP_CONFIGS, *extra(
        validate_workload_timeout=60, validate_prometheus_wait=40, validate_report_path=path), check=False)
    with open(path, encoding="utf-8") as f:
        nodes = {n["node"]: n for n in json.load(f)["nodes"]}
    assert nodes[NODE]["ok"], (nodes[NODE]["summary"], res.stdout[-3000:])
    allocatable = next(c for c in nodes[NODE]["checks"] if c["check"] == "allocatable")
    assert "nvidia.com/mig-1g.10gb=56" in allocatable["evidence"][0], allocatable
    # a second run: the node has its layout; nothing is paused, nothing changes
    with LabelWatch(kube, DEPLOY) as watch:
        again = mig_stage()
    assert all(watch.seen[k] == ["true"] for k in DEPLOY), watch.seen
    recap = again.stdout[again.stdout.rindex("PLAY RECAP"):]
    assert "changed=0" in recap, recap


def test_a_device_plugin_strategy_that_cannot_show_the_layout_is_refused_before_anything_changes(mig_node):
    kube = mig_node
    kube.run("label", "node", NODE, "nvidia.com/mig.config=all-balanced", "--overwrite")
    res = playbook("site.yml", "--tags", "mig", "--limit", NODE, *extra(gpuops_mig_follow_label=True),
                   *extra(device_plugin_configs={"default": CONFIGS["default"], "mig-mixed": {"flags": {
                       "migStrategy": "single"}}}), check=False)
    assert res.returncode != 0
    assert "does not suit migStrategy single" in res.stdout, res.stdout[-3000:]
    labels = node(kube)["metadata"]["labels"]
    assert labels[STATE] == "failed"
    assert all(labels[k] == "true" for k in DEPLOY)
    assert node(kube)["status"]["allocatable"].get("nvidia.com/mig-1g.10gb") == "56"  # nothing changed
    # and the boot unit still applies the layout the node has, not the refused one
    unit = kube.node_exec(NODE, "systemctl cat gpuops-mig.service")
    assert " all-1g.10gb" in unit.stdout and "all-balanced" not in unit.stdout, unit.stdout


def test_a_failure_midway_leaves_state_failed_and_the_operands_restored_and_a_rerun_converges(mig_node):
    kube = mig_node
    # a client (as DCGM would) holds a compute instance of GPU 0: the plan cannot see it, NVML
    # refuses to destroy it midway
    gi = kube.node_exec(NODE, "python3 -c 'import pynvml as n; n.nvmlInit(); "
                              "m = n.nvmlDeviceGetMigDeviceHandleByIndex(n.nvmlDeviceGetHandleByIndex(0), 0); "
                              "print(n.nvmlDeviceGetGpuInstanceId(m))'")
    assert gi.returncode == 0, gi.stderr
    busy = kube.node_exec(NODE, f"fake-nvml-busy --gpu 0 --gi {gi.stdout.strip()} --ci 0 --pid 4242 --kind client")
    assert busy.returncode == 0, busy.stderr
    kube.run("label", "node", NODE, "nvidia.com/mig.config=all-disabled", "--overwrite")
    with LabelWatch(kube, DEPLOY + [STATE]) as watch:
        res = mig_stage(check=False)
    assert res.returncode != 0
    assert "failed at" in res.stdout and "nvidia.com/mig.config.state=failed" in res.stdout, res.stdout[-4000:]
    assert "pending" in watch.seen[STATE] and watch.seen[STATE][-1] == "failed", watch.seen
    assert all("paused-for-mig-change" in watch.seen[k] for k in DEPLOY), watch.seen
    meta = node(kube)["metadata"]
    assert all(meta["labels"][k] == "true" for k in DEPLOY) and RECORD not in meta.get("annotations", {})
    kube.wait(lambda: ready(plugin_pod(kube)), timeout=180, what="the device plugin back after the failure")
    # the client goes: the next run converges
    assert kube.node_exec(NODE, "fake-nvml-busy --clear").returncode == 0
    mig_stage()
    assert node(kube)["metadata"]["labels"][STATE] == "success"
    kube.wait(lambda: node(kube)["status"]["allocatable"].get("nvidia.com/gpu") == "8", timeout=180,
              what=f"{NODE}: 8 whole GPUs with MIG off")


def test_a_run_that_died_with_the_operands_paused_is_undone_by_the_next(mig_node):
    kube = mig_node
    # what a run killed between pause and restore leaves: paused labels and the record
    record = json.dumps({DEPLOY[0]: "true"})
    kube.run("label", "node", NODE, f"{DEPLOY[0]}=paused-for-mig-change", "--overwrite")
    kube.run("annotate", "node", NODE, f"{RECORD}={record}", "--overwrite")
    mig_stage()
    meta = node(kube)["metadata"]
    assert meta["labels"][DEPLOY[0]] == "true" and RECORD not in meta.get("annotations", {})


def test_a_change_that_waits_for_a_reset_stays_pending_and_with_mig_reboot_the_node_reboots(mig_node):
    kube = mig_node
    # a client (as nvidia-persistenced would) holds GPU 0, whose MIG is off: Hopper refuses the change
    assert kube.node_exec(NODE, "fake-nvml-busy --gpu 0 --pid 4343 --kind client").returncode == 0
    kube.run("label", "node", NODE, "nvidia.com/mig.config=all-1g.10gb", "--overwrite")
    res = mig_stage(check=False)
    assert res.returncode != 0 and "waits for a GPU reset" in res.stdout, res.stdout[-3000:]
    labels = node(kube)["metadata"]["labels"]
    assert labels[STATE] == "pending" and all(labels[k] == "true" for k in DEPLOY)
    # with mig_reboot the node reboots for it: the lab's reboot is the fake driver's (a client does
    # not survive it, MIG instances and Hopper's MIG mode neither), its boot time the state file's
    with LabelWatch(kube, [STATE, DEPLOY[0]]) as watch:
        mig_stage(*extra(mig_reboot=True, mig_reboot_command="fake-nvml-reset",
                         mig_reboot_boot_time_command="stat -c %.9Y /var/lib/gpuops-fake-nvml/state"))
    assert watch.seen[STATE][-3:] == ["pending", "rebooting", "success"], watch.seen
    assert watch.seen[DEPLOY[0]] == ["true", "paused-for-mig-change", "true"], watch.seen
    kube.wait(lambda: node(kube)["status"]["allocatable"].get("nvidia.com/mig-1g.10gb") == "56", timeout=180,
              what=f"{NODE}: 56 allocatable nvidia.com/mig-1g.10gb after the reboot")

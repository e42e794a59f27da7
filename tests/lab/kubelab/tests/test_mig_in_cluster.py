# -*- coding: utf-8 -*-
"""MIG in the cluster, label-driven as with NVIDIA's MIG manager: the node's nvidia.com/mig.config
label chooses the layout, the role pauses the GPU operands on that node (their
nvidia.com/gpu.deploy.* labels go to paused-for-mig-change and their pods leave), applies,
reports nvidia.com/mig.config.state and restores exactly the labels it paused; NVIDIA's device
plugin (migStrategy mixed) then advertises nvidia.com/mig-* and GFD labels them, and validation
passes. A failure midway leaves the state label `failed` and the operands restored. Runs the site
playbook's mig stage on the lab's H100 node (8 simulated H100 80GB).

make lab leaves the H100 a DRA node (test_dra has MIG through the DRA driver): the module first
switches it to the device plugin with the allocation playbook - planned in check mode, then through
the upgrade's node machinery with a PodDisruptionBudget in the way - and at the end, MIG off, removes
the DRA driver that no node asks for any more (dra_driver_state: absent) and switches the node back
to DRA, the driver deployed again."""
from __future__ import annotations

import json
import os
import threading
import time

import pytest

import synthetic_fleet as fleet
from conftest import require
from labfacts import H100_UUIDS
from test_roles import INVENTORY, extra, playbook
from test_upgrade import allow_eviction_once_refused, guarded_workload

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
# the allocation switch through the maintenance machinery (max_unavailable 1 of the lab's two GPU
# nodes); the metrics check is left to the lab's own validation (the exporter is the same either way)
SWITCH_VARS = extra(driver_upgrade_max_unavailable=1, driver_upgrade_drain_delay=2, validate_workload_timeout=120,
                    validate_prometheus_url="")
UPGRADE_STATE = "nvidia.com/gpu-driver-upgrade-state"
MAINTENANCE_STEPS = ["cordon-required", "pod-deletion-required", "drain-required", "pod-restart-required",
                     "validation-required", "uncordon-required", "upgrade-done"]
GUARDED = "gpuops-switch-guarded"
DRA_OBJECTS = [("deviceclass", "gpu.nvidia.com"), ("deviceclass", "mig.nvidia.com"),
               ("validatingadmissionpolicy", "resourceslices-policy-dra-driver-nvidia-gpu")]
# what the switches did, read by the tests (the fixture switches, the last test switches back)
SWITCHED = {}


class LabelWatch:
    """Polls the node's labels while a playbook runs: every distinct value each key had."""

    def __init__(self, kube, keys):
        self.kube, self.keys, self.seen, self._stop = kube, keys, {k: [] for k in keys}, threading.Event()
        self.operand_pods_while_pending = []  # how many operand pods the node had at each poll while pending
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _poll(self):
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

    def _run(self):
        while not self._stop.is_set():
            self._poll()
            time.sleep(0.3)

    def __enter__(self):
        self._thread.start()
        return self

    def __exit__(self, *exc):
        self._stop.set()
        self._thread.join(10)
        # the labels as the run left them (its last write may come after the thread's last poll)
        self._poll()


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


def switch(*args, check=True):
    """The allocation playbook on the H100: the allocator its inventory (and this module's host_vars
    file, while it is there) names."""
    return playbook("allocation.yml", "--limit", NODE, *SWITCH_VARS, *DP_CONFIGS, *args, check=check, timeout=1200)


def mig_off(kube):
    """No client on the GPUs, no layout asked for, MIG off and the mig role's boot unit gone."""
    kube.node_exec(NODE, "fake-nvml-busy --clear")
    kube.run("label", "node", NODE, "nvidia.com/mig.config-", f"{STATE}-", check=False)
    playbook("site.yml", "--tags", "mig", "--limit", NODE, *extra(mig_state="absent", mig_cluster=False), check=False)


@pytest.fixture(scope="module")
def mig_node(kube):
    """The H100 switched to the device plugin with the config mig-mixed (migStrategy mixed): its
    plan in check mode (nothing changes), then the switch with a guarded workload on the node,
    watched. Afterwards (the last test, or here if it did not get to it) MIG off and the node back
    on DRA; the labels, the operands' objects and the default config as make lab left them."""
    require(kube.lab, "the lab's own cluster", "this test reconfigures the lab node's GPUs: run it on the lab")
    host_vars = os.path.join(INVENTORY, "host_vars")
    os.makedirs(host_vars, exist_ok=True)
    path = os.path.join(host_vars, f"{NODE}.yml")
    saved_objects, saved_meta = kube.applied_objects(NS), kube.node_meta(NODE)
    SWITCHED.clear()
    # the device plugin's and GFD's configurations with mig-mixed first, as an operator deploys a
    # new configuration before a node's label names it (the switch deploys the allocators only)
    playbook("site.yml", "--tags", "operands", *DP_CONFIGS)
    with open(path, "w", encoding="utf-8") as f:
        f.write("gpu_allocation: device-plugin\nnode_labels_device_plugin_config: mig-mixed\n")
    try:
        SWITCHED["labels_before"] = node(kube)["metadata"]["labels"]
        SWITCHED["plan"] = switch("--check")
        SWITCHED["labels_after_plan"] = node(kube)["metadata"]["labels"]
        # a workload on the node whose budget refuses its eviction until it has a replica elsewhere
        kube.run("create", "namespace", GUARDED)
        kube.apply(*guarded_workload(GUARDED, NODE))
        kube.wait(lambda: kube.get("-n", GUARDED, "deployment", "guarded")["status"].get("readyReplicas") == 1,
                  timeout=120, what="the guarded workload")
        errors = []
        helper = threading.Thread(target=allow_eviction_once_refused, args=(kube, NODE, GUARDED, errors, 600),
                                  daemon=True)
        helper.start()
        with fleet.NodeWatch(kube.kubeconfig) as watch:
            SWITCHED["run"] = switch("-v")
        helper.join(5)
        SWITCHED["watch"], SWITCHED["helper_errors"] = watch, errors
        yield kube
    finally:
        kube.run("delete", "namespace", GUARDED, "--wait=false", check=False)
        if os.path.exists(path):
            os.remove(path)
        if "back" not in SWITCHED:  # the last test did not get to it (a failed switch: retried)
            mig_off(kube)
            switch(*extra(gpuops_allocation_retry_failed=True), check=False)
        # the maintenance state the switches wrote, which a cluster keeps, goes: make lab's node
        # had none (read by the tests of the upgrade)
        kube.run("label", "node", NODE, f"{UPGRADE_STATE}-", check=False)
        # what the set-up run and the tests changed in the cluster, put back: the node's config,
        # MIG and deploy labels and our annotations, the operands' configurations and DaemonSets
        kube.restore_node_meta(NODE, saved_meta, RESTORED_NODE_KEYS)
        kube.reapply_changed(NS, saved_objects)
        now = kube.node_meta(NODE)
        assert {k: v for part in ("labels", "annotations") for k, v in now[part].items()
                if k.startswith(RESTORED_NODE_KEYS)} == {k: v for part in ("labels", "annotations")
                                                         for k, v in saved_meta[part].items()
                                                         if k.startswith(RESTORED_NODE_KEYS)}
        kube.wait(lambda: kube.advertised_gpus(NODE, "dra") == "8", timeout=180,
                  what=f"{NODE}: its 8 whole GPUs in its ResourceSlices again")


def test_the_switch_to_the_device_plugin_was_planned_and_went_through_the_maintenance_states(mig_node):
    """--check printed the plan and changed nothing; the switch then cordoned the node, waited while
    the budget refused the guarded pod's eviction, switched, validated (the go-live checklist on the
    device-plugin node: allocatable nvidia.com/gpu, a CUDA workload) and uncordoned it, never more
    than max_unavailable (1) out; the device plugin serves the node, the DRA plugin left it."""
    kube = mig_node
    plan = " ".join(SWITCHED["plan"].stdout.split())
    assert "GPU allocation switch; " in plan and "max_unavailable 1, 1 at once" in plan, plan[-3000:]
    assert f"switch {NODE}: dra -> device-plugin" in plan and f"wave: {NODE}" in plan
    assert SWITCHED["labels_after_plan"] == SWITCHED["labels_before"]
    res, watch = SWITCHED["run"], SWITCHED["watch"]
    assert not SWITCHED["helper_errors"], SWITCHED["helper_errors"]
    assert res.returncode == 0, res.stdout[-6000:]
    assert watch.states[NODE][-7:] == MAINTENANCE_STEPS, watch.states
    assert watch.peak == 1 and "gpuops-lab-l40s" not in watch.out_total, (watch.peak, watch.out_total)
    drained = [task for task in res.stdout.split("TASK [") if task.startswith("gpuops.nvidia.driver_upgrade : Take the node out")]
    assert len(drained) == 1 and "PodDisruptionBudgets refused" in drained[0] and f"{GUARDED}/guarded-" in drained[0], \
        res.stdout[-6000:]
    # the go-live checklist passed on the node before it was uncordoned
    checked = [task for task in res.stdout.split("TASK [") if task.startswith("gpuops.nvidia.validate : Show the node's checklist")]
    assert checked and f"{NODE}: PASS" in checked[0], res.stdout[-6000:]
    said = " ".join(checked[0].split())
    assert "allocatable: nvidia.com/gpu=8 (configuration mig-mixed)" in said, checked[0]
    item = node(kube)
    assert not item["spec"].get("unschedulable") and item["metadata"]["labels"][UPGRADE_STATE] == "upgrade-done"
    # (the record of which maintenance took the node out went with the uncordon)
    assert "gpuops.nvidia/maintenance" not in item["metadata"].get("annotations", {})
    # the guarded workload runs elsewhere now, never below its budget
    assert kube.get("-n", GUARDED, "deployment", "guarded")["status"].get("readyReplicas") == 2
    # one allocator: the device plugin's; the DRA plugin and the node's ResourceSlices gone; NVIDIA's
    # runtime the node's default again (the seeds' plain pod gets its GPU through it)
    labels = item["metadata"]["labels"]
    assert labels.get("nvidia.com/gpu.deploy.device-plugin") == "true"
    assert "nvidia.com/gpu.deploy.dra-driver" not in labels
    assert ready(plugin_pod(kube))
    kube.wait(lambda: not kube.slice_devices(NODE), timeout=60, what=f"{NODE}: no ResourceSlice of the DRA driver")
    assert item["status"]["allocatable"].get("nvidia.com/gpu") == "8"
    assert 'default_runtime_name = "nvidia"' in kube.node_exec(NODE, "containerd config dump").stdout


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
    # make lab's stays for test_roles; the metrics check is the lab's own validation's, as in
    # SWITCH_VARS: the exporter is the same either way)
    path = os.path.join(tmp_path, "validate-report.json")
    res = playbook("validate.yml", "--limit", NODE, *DP_CONFIGS, *extra(
        validate_workload_timeout=60, validate_prometheus_url="", validate_report_path=path), check=False)
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


def test_back_to_dra_with_the_driver_removed_while_no_node_asked_for_it(mig_node):
    """The end of the module: MIG off; with no node of the inventory on DRA, dra_driver_state: absent
    leaves none of the DRA driver's objects; the switch back to DRA (the inventory's own
    gpu_allocation) deploys the driver again and the node's ResourceSlices list its eight GPUs."""
    kube = mig_node
    mig_off(kube)
    playbook("site.yml", "--tags", "operands", *DP_CONFIGS, *extra(dra_driver_state="absent"))
    for kind, name in DRA_OBJECTS:
        assert kube.run("get", kind, name, check=False).returncode != 0, (kind, name)
    assert kube.run("-n", NS, "get", "daemonset", "dra-driver-nvidia-gpu-kubelet-plugin", check=False).returncode != 0
    os.remove(os.path.join(INVENTORY, "host_vars", f"{NODE}.yml"))
    SWITCHED["back"] = res = switch()
    assert f"switch {NODE}: device-plugin -> dra" in " ".join(res.stdout.split())
    back = node(kube)
    assert not back["spec"].get("unschedulable") and back["metadata"]["labels"][UPGRADE_STATE] == "upgrade-done"
    labels = back["metadata"]["labels"]
    assert labels.get("nvidia.com/gpu.deploy.dra-driver") == "true"
    assert "nvidia.com/gpu.deploy.device-plugin" not in labels
    for kind, name in DRA_OBJECTS:
        kube.get(kind, name)
    devices = kube.slice_devices(NODE)
    assert sorted(next(iter(d["attributes"]["uuid"].values())) for d in devices.values()) == sorted(H100_UUIDS)
    assert 'default_runtime_name = "runc"' in kube.node_exec(NODE, "containerd config dump").stdout

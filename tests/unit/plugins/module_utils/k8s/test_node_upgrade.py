# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The per-node phases of a driver upgrade over an in-memory API (nodes, pods, the Eviction API's
429 while a budget refuses). The same phases run against the lab cluster's real API server in
tests/lab/kubelab/tests/test_upgrade.py; here the decisions and their order are pinned down."""
from __future__ import annotations

import copy
import os

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils.k8s import node_upgrade as nu
from ansible_collections.gpuops.nvidia.plugins.module_utils.k8s.api import KubeError

NODE = "gpu-01"


def node(name=NODE, state=None, unschedulable=False, ready=True, labels=None, annotations=None, taints=None):
    all_labels = {"nvidia.com/gpu.present": "true"}
    all_labels.update(labels or {})
    if state:
        all_labels[nu.STATE_LABEL] = state
    spec = {"unschedulable": True} if unschedulable else {}
    if taints:
        spec["taints"] = taints
    return {"metadata": {"name": name, "labels": all_labels, "annotations": dict(annotations or {})}, "spec": spec,
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def pod(name, ns="work", node_name=NODE, gpu=False, owner="ReplicaSet", labels=None, phase="Running",
        volumes=None, annotations=None):
    resources = {"limits": {"nvidia.com/gpu": "1"}} if gpu else {}
    owners = [{"kind": owner, "name": "x", "uid": "uid-%s-x" % owner, "controller": True}] if owner else []
    return {"metadata": {"name": name, "namespace": ns, "uid": "uid-" + name, "labels": dict(labels or {}),
                         "ownerReferences": owners, "annotations": dict(annotations or {})},
            "spec": {"nodeName": node_name, "containers": [{"name": "c", "resources": resources}],
                     "volumes": volumes or []},
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True"}] if phase == "Running" else []}}


def _matches(labels, selector):
    for term in filter(None, (selector or "").split(",")):
        if "!=" in term:
            key, value = term.split("!=")
            if labels.get(key) == value:
                return False
        else:
            key, value = term.split("=")
            if labels.get(key) != value:
                return False
    return True


def _merge(target, patch):
    for key, value in patch.items():
        if value is None:
            target.pop(key, None)
        elif isinstance(value, dict) and isinstance(target.get(key), dict):
            _merge(target[key], value)
        else:
            target[key] = copy.deepcopy(value)


class FakeKube:
    """Nodes and pods in memory; ``budget`` refuses the eviction of a pod that many times (429);
    ``patches`` records every node patch, in order."""

    def __init__(self, nodes, pods=(), budget=None):
        self._nodes = {n["metadata"]["name"]: copy.deepcopy(n) for n in nodes}
        self._pods = {"%s/%s" % (p["metadata"]["namespace"], p["metadata"]["name"]): copy.deepcopy(p) for p in pods}
        self.budget = dict(budget or {})
        self.patches, self.deleted, self.evicted = [], [], []
        self.daemonsets_start = None
        self._starting = {}
        self.clock = None
        self.leases, self.lease_log = {}, []
        self.watched = []  # the keys of the watches the waits made (kube_api.Kube.wait_change)

    def node(self, name):
        return copy.deepcopy(self._nodes.get(name))

    def nodes(self, label_selector=""):
        return [copy.deepcopy(n) for n in self._nodes.values() if _matches(n["metadata"]["labels"], label_selector)]

    def patch_node(self, name, body):
        self.patches.append(copy.deepcopy(body))
        _merge(self._nodes[name], body)
        return copy.deepcopy(self._nodes[name])

    def pods(self, node_name, namespace="", label_selector=""):
        for key in list(self._starting):
            self._starting[key] -= 1
            if self._starting[key] <= 0:
                self._pods[key]["status"] = {"phase": "Running", "conditions": [{"type": "Ready", "status": "True"}]}
                del self._starting[key]
        return [copy.deepcopy(p) for p in self._pods.values() if p["spec"]["nodeName"] == node_name
                and (not namespace or p["metadata"]["namespace"] == namespace)
                and _matches(p["metadata"]["labels"], label_selector)]

    def pod(self, namespace, name):
        return copy.deepcopy(self._pods.get("%s/%s" % (namespace, name)))

    def delete_pod(self, namespace, name):
        self.deleted.append("%s/%s" % (namespace, name))
        gone = self._pods.pop("%s/%s" % (namespace, name), None)
        owners = gone["metadata"]["ownerReferences"] if gone else []
        if owners and owners[0]["kind"] == "DaemonSet" and self.daemonsets_start is not None:
            # the DaemonSet starts a new pod on the node: Ready after daemonsets_start polls
            new = copy.deepcopy(gone)
            new["metadata"].update(name=name + "-new", uid="uid-%s-new" % name)
            new["status"] = {"phase": "Pending", "conditions": []}
            self._pods["%s/%s-new" % (namespace, name)] = new
            self._starting["%s/%s-new" % (namespace, name)] = self.daemonsets_start
        return gone is not None

    def evict_pod(self, namespace, name):
        key = "%s/%s" % (namespace, name)
        if self.budget.get(key, 0) > 0:
            self.budget[key] -= 1
            raise KubeError("evict pod %s: Cannot evict pod as it would violate the pod's disruption budget." % key,
                            status=429, reason="Cannot evict pod as it would violate the pod's disruption budget.")
        self.evicted.append(key)
        return self._pods.pop(key, None) is not None

    def wait_change(self, key, timeout):
        """A watch that sees no change before its timeout (the fake's pods change when listed)."""
        self.watched.append(key)
        if self.clock is not None:
            self.clock.sleep(timeout)
        return False

    def create_lease(self, namespace, name, holder, seconds):
        key = (namespace, name)
        if key in self.leases:
            return None
        self.lease_log.append(("create", holder))
        self.leases[key] = {"metadata": {"name": name, "namespace": namespace, "uid": "lease-%d" % len(self.lease_log),
                                         "resourceVersion": "1"},
                            "spec": {"holderIdentity": holder, "leaseDurationSeconds": seconds}}
        return copy.deepcopy(self.leases[key])

    def lease(self, namespace, name):
        return copy.deepcopy(self.leases.get((namespace, name)))

    def delete_lease(self, namespace, name, uid):
        held = self.leases.get((namespace, name))
        if held is None or held["metadata"]["uid"] != uid:
            return False
        self.lease_log.append(("delete", held["spec"]["holderIdentity"]))
        del self.leases[(namespace, name)]
        return True

    def label(self, name=NODE):
        return self._nodes[name]["metadata"]["labels"].get(nu.STATE_LABEL)


class Clock:
    def __init__(self):
        self.now = 0.0

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.now += seconds


def run(kube, step, check=False, name=NODE, **options):
    clock = Clock()
    kube.clock = clock
    opts = dict({"max_unavailable": "25%", "gpu_node_selector": "nvidia.com/gpu.present=true", "drain": True,
                 "drain_delay": 10, "drain_retries": 30, "poll_interval": 10, "slot_timeout": 3600}, **options)
    return nu.NodeUpgrade(kube, name, opts, check=check, clock=clock, sleep=clock.sleep).run(step)


def test_a_fresh_node_goes_through_the_operators_states_to_pod_restart_required():
    kube = FakeKube([node()], [pod("train", gpu=True), pod("web"), pod("dcgm", ns="gpuops", owner="DaemonSet"),
                               pod("keep", labels={nu.DRAIN_SKIP_LABEL: "true"}, owner=None)])
    result = run(kube, "drained")
    assert result["states"] == ["cordon-required", "pod-deletion-required", "drain-required", "pod-restart-required"]
    assert kube.label() == "pod-restart-required" and result["state"] == "pod-restart-required"
    assert result["cordoned"] and kube.node(NODE)["spec"]["unschedulable"] is True
    # the GPU pod deleted, the other drained, the DaemonSet's and the skip-labelled pod left
    assert result["deleted"] == ["work/train"] and kube.deleted == ["work/train"]
    assert result["evicted"] == ["work/web"] and kube.evicted == ["work/web"]
    assert sorted(kube._pods) == ["gpuops/dcgm", "work/keep"]
    # the cordon and the next state are one write, as the operator moves a node on
    assert kube.patches[1] == {"metadata": {"labels": {nu.STATE_LABEL: "pod-deletion-required"}},
                               "spec": {"unschedulable": True}}
    assert result["changed"] and "evicted 1 pod(s)" in result["msg"]


def test_a_second_call_changes_nothing():
    kube = FakeKube([node()], [pod("train", gpu=True)])
    run(kube, "drained")
    again = run(kube, "drained")
    assert not again["changed"] and again["states"] == [] and len(kube.patches) == 4


def test_jobs_are_waited_for_between_the_cordon_and_the_pod_deletion():
    job = pod("job", owner="Job", labels={"app": "batch"})
    kube = FakeKube([node()], [job])
    calls = {"n": 0}
    pods = kube.pods

    def finishing(node_name, namespace="", label_selector=""):
        if label_selector == "app=batch":
            calls["n"] += 1
            if calls["n"] == 3:
                kube._pods["work/job"]["status"]["phase"] = "Succeeded"
        return pods(node_name, namespace, label_selector)
    kube.pods = finishing
    result = run(kube, "drained", wait_for_jobs_selector="app=batch")
    assert result["states"][:3] == ["cordon-required", "wait-for-jobs-required", "pod-deletion-required"]
    assert result["waited_for"] == ["work/job"] and calls["n"] == 3


def test_jobs_that_do_not_finish_stop_the_node_at_wait_for_jobs_required():
    kube = FakeKube([node()], [pod("job", owner="Job", labels={"app": "batch"})])
    with pytest.raises(nu.UpgradeError, match=r"the pods matching app=batch have not finished after 60s: work/job"):
        run(kube, "drained", wait_for_jobs_selector="app=batch", wait_for_jobs_timeout=60)
    assert kube.label() == "wait-for-jobs-required"


def test_a_refused_eviction_is_asked_again_until_the_budget_allows_it():
    kube = FakeKube([node()], [pod("guarded")], budget={"work/guarded": 3})
    result = run(kube, "drained")
    assert result["evicted"] == ["work/guarded"] and result["refused"] == {"work/guarded": 3}
    assert "PodDisruptionBudgets refused 3 eviction(s) first" in result["msg"]


def test_a_budget_that_never_allows_it_stops_with_the_pod_and_the_fix():
    kube = FakeKube([node()], [pod("guarded")], budget={"work/guarded": 100})
    with pytest.raises(nu.UpgradeError) as exc:
        run(kube, "drained", drain_retries=2, drain_delay=5)
    assert "refused the eviction of work/guarded 3 times over 15s" in str(exc.value)
    assert "disruption budget" in str(exc.value) and "driver_upgrade_drain_retries" in str(exc.value)
    assert kube.label() == "drain-required"


@pytest.mark.parametrize("extra, problem", [
    ({"owner": None}, "pods no controller manages would be lost: work/bare"),
    ({"volumes": [{"name": "scratch", "emptyDir": {}}]}, "pods with emptyDir data would lose it: work/bare"),
])
def test_pods_a_drain_would_lose_stop_it_before_any_eviction(extra, problem):
    kube = FakeKube([node()], [pod("bare", **extra), pod("web")])
    with pytest.raises(nu.UpgradeError, match=problem):
        run(kube, "drained", delete_emptydir_data=False)
    # refused before the node changed
    assert kube.evicted == [] and kube.patches == [] and kube.label() is None


def test_force_and_emptydir_options_let_the_drain_take_those_pods():
    kube = FakeKube([node()], [pod("bare", owner=None, volumes=[{"name": "s", "emptyDir": {}}])])
    assert run(kube, "drained", force=True, delete_emptydir_data=True)["evicted"] == ["work/bare"]


def test_mirror_pods_and_finished_pods():
    mirror = pod("static", owner=None, annotations={nu.MIRROR_ANNOTATION: "x"})
    done = pod("finished", owner=None, phase="Succeeded")
    evict, problems = nu.drain_pods([mirror, done])
    assert evict == ["work/finished"] and problems == []


def test_a_node_labelled_skip_is_left_alone():
    kube = FakeKube([node(labels={nu.SKIP_LABEL: "true"})], [pod("train", gpu=True)])
    result = run(kube, "drained")
    assert result["skip_label"] and not result["changed"] and kube.patches == [] and kube.deleted == []
    assert "left alone" in result["msg"]


def test_a_resumed_node_is_not_moved_back_and_does_not_wait_for_a_slot():
    others = [node("gpu-%02d" % i, unschedulable=True) for i in range(2, 5)]
    kube = FakeKube([node(state="drain-required", unschedulable=True)] + others, [pod("web")])
    result = run(kube, "drained", max_unavailable=1)
    assert result["previous_state"] == "drain-required"
    assert result["states"] == ["pod-restart-required"] and not result["cordoned"]
    assert result["evicted"] == ["work/web"]


def test_no_free_slot_stops_before_the_node_changes_and_names_the_nodes():
    others = [node("gpu-02", unschedulable=True), node("gpu-03", ready=False)]
    kube = FakeKube([node()] + others)
    with pytest.raises(nu.UpgradeError, match=r"no free slot after 30s: 2 GPU node\(s\) out of service already "
                                              r"\(max_unavailable 1\): gpu-02, gpu-03"):
        run(kube, "drained", max_unavailable="25%", slot_timeout=30)
    # it said it waited, and why, and that it waits no more
    said = "driver: 2 GPU node(s) out of service already (max_unavailable 1): gpu-02, gpu-03"
    assert kube.patches == [{"metadata": {"annotations": {nu.WAITING_ANNOTATION: said}}},
                            {"metadata": {"annotations": {nu.WAITING_ANNOTATION: None}}}]
    assert nu.WAITING_ANNOTATION not in kube.node(NODE)["metadata"].get("annotations", {})
    assert not kube.node(NODE)["spec"].get("unschedulable")


def test_a_wave_that_does_not_fit_waits_as_a_whole_and_says_so():
    # 8 GPU nodes, max_unavailable 25% = 2, one cordoned by an admin: alone the node has a slot,
    # with its wave of two it has none (the admin's node and the wave would be 3)
    others = [node("gpu-%02d" % i) for i in range(2, 8)] + [node("gpu-08", unschedulable=True)]
    kube = FakeKube([node()] + others[1:])
    with pytest.raises(nu.UpgradeError, match=r"no free slot after 30s: 1 GPU node\(s\) out of service already "
                                              r"besides this wave of 2 \(max_unavailable 2\): gpu-08"):
        run(kube, "drained", slot_timeout=30, wave=[NODE, "gpu-03"])
    assert len(kube.patches) == 2 and not kube.node(NODE)["spec"].get("unschedulable")
    assert run(kube, "drained", wave=[NODE])["state"] == "pod-restart-required"


def test_a_node_an_admin_cordoned_stays_cordoned_after_its_upgrade():
    kube = FakeKube([node(unschedulable=True)])
    first = run(kube, "drained")
    assert first["keep_cordoned"] and not first["cordoned"]
    # (and which maintenance took it out: a driver upgrade)
    assert kube.node(NODE)["metadata"]["annotations"] == {nu.CORDONED_ANNOTATION: "true",
                                                          "gpuops.nvidia/maintenance": "driver"}
    run(kube, "restarted")
    done = run(kube, "done")
    assert done["states"] == ["uncordon-required", "upgrade-done"]
    item = kube.node(NODE)
    assert item["spec"]["unschedulable"] is True and item["metadata"]["annotations"] == {}


def test_done_uncordons_in_the_same_write_as_upgrade_done():
    kube = FakeKube([node(state="validation-required", unschedulable=True)])
    result = run(kube, "done")
    assert result["states"] == ["uncordon-required", "upgrade-done"] and kube.label() == "upgrade-done"
    # (the record of which maintenance it was goes in the same write)
    assert kube.patches[-1] == {"metadata": {"labels": {nu.STATE_LABEL: "upgrade-done"},
                                             "annotations": {"gpuops.nvidia/maintenance": None}},
                                "spec": {"unschedulable": False}}
    assert not run(kube, "done")["changed"]


def test_a_maintenance_records_its_kind_when_it_starts_and_a_resumed_one_keeps_it():
    kube = FakeKube([node()])
    run(kube, "drained", maintenance="allocation")
    assert kube.node(NODE)["metadata"]["annotations"] == {"gpuops.nvidia/maintenance": "allocation"}
    # resumed midway (by any caller), the record stays as the maintenance that started wrote it
    kube = FakeKube([node(state="drain-required", unschedulable=True, annotations={"gpuops.nvidia/maintenance": "allocation"})])
    run(kube, "drained")
    assert kube.node(NODE)["metadata"]["annotations"] == {"gpuops.nvidia/maintenance": "allocation"}


def test_the_canary_taint_is_added_before_the_cordon_once():
    taint = {"key": "gpuops.nvidia/driver-upgrade-canary", "value": "true", "effect": "NoSchedule"}
    other = {"key": "dedicated", "value": "ml", "effect": "NoSchedule"}
    kube = FakeKube([node(taints=[other])])
    run(kube, "drained", taint=taint)
    assert kube.node(NODE)["spec"]["taints"] == [other, taint]
    assert kube.patches[1] == {"spec": {"taints": [other, taint]}}
    assert nu.with_taint(kube.node(NODE), taint) is None


def test_restarted_deletes_the_operands_on_the_node_only():
    kube = FakeKube([node(state="pod-restart-required", unschedulable=True)],
                    [pod("plugin-a", ns="gpuops", owner="DaemonSet", labels={"app.kubernetes.io/managed-by": "gpuops.nvidia"}),
                     pod("plugin-b", ns="gpuops", owner="DaemonSet", node_name="gpu-02",
                         labels={"app.kubernetes.io/managed-by": "gpuops.nvidia"}),
                     pod("other", ns="gpuops", owner="DaemonSet")])
    kube.daemonsets_start = 3
    result = run(kube, "restarted", operand_namespace="gpuops", operand_selector="app.kubernetes.io/managed-by=gpuops.nvidia")
    assert result["restarted"] == ["gpuops/plugin-a"] and result["states"] == ["validation-required"]
    # validation-required only once the DaemonSet's new pod is Running and Ready
    assert kube.pod("gpuops", "plugin-a-new")["status"]["phase"] == "Running"
    assert not run(kube, "restarted", operand_namespace="gpuops")["changed"]


def test_operands_that_do_not_come_back_ready_stop_the_node_before_validation():
    kube = FakeKube([node(state="pod-restart-required", unschedulable=True)],
                    [pod("exporter", ns="gpuops", owner="DaemonSet")])
    kube.daemonsets_start = 10 ** 6
    with pytest.raises(nu.UpgradeError, match=r"the operands did not come back Ready on gpu-01 after 20s: "
                                              r"DaemonSet/x \(exporter-new Pending\)"):
        run(kube, "restarted", operand_namespace="gpuops", operand_selector="", pod_deletion_timeout=20)
    assert kube.label() == "pod-restart-required"


def test_failed_marks_the_node_and_leaves_it_cordoned():
    kube = FakeKube([node(state="validation-required", unschedulable=True)])
    assert run(kube, "failed")["state"] == "upgrade-failed"
    assert kube.node(NODE)["spec"]["unschedulable"] is True
    assert not run(kube, "failed")["changed"]


def test_check_mode_reports_and_changes_nothing():
    kube = FakeKube([node()], [pod("train", gpu=True), pod("web")])
    result = run(kube, "drained", check=True)
    assert result["changed"] and result["states"][-1] == "pod-restart-required"
    assert result["deleted"] == ["work/train"] and result["evicted"] == ["work/web"]
    assert kube.patches == [] and kube.deleted == [] and kube.evicted == [] and kube.label() is None


def test_a_node_the_cluster_does_not_have_is_named():
    with pytest.raises(nu.UpgradeError, match="the cluster has no node named gpu-01; set driver_upgrade_node_name"):
        run(FakeKube([]), "drained")


def test_a_bare_gpu_pod_is_not_deleted_unless_force_says_so():
    kube = FakeKube([node()], [pod("notebook", gpu=True, owner=None)])
    with pytest.raises(nu.UpgradeError, match=r"gpu-01 was not changed: pods no controller manages would be lost: "
                                              r"work/notebook; .*driver_upgrade_force: true"):
        run(kube, "drained", drain=False)
    assert kube.deleted == [] and kube.patches == []
    assert run(kube, "drained", drain=False, force=True)["deleted"] == ["work/notebook"]


def test_done_again_leaves_a_cordon_made_since_alone():
    kube = FakeKube([node(state="validation-required", unschedulable=True)])
    run(kube, "done")
    kube.patch_node(NODE, {"spec": {"unschedulable": True}})  # an admin cordons the node afterwards
    again = run(kube, "done")
    assert not again["changed"] and kube.node(NODE)["spec"]["unschedulable"] is True


def test_restarted_before_the_drain_is_refused():
    for state in (None, "upgrade-done", "drain-required"):
        kube = FakeKube([node(state=state)], [pod("exporter", ns="gpuops", owner="DaemonSet")])
        with pytest.raises(nu.UpgradeError, match="not pod-restart-required: its operands are restarted after"):
            run(kube, "restarted", operand_namespace="gpuops", operand_selector="")
        assert kube.deleted == []


def test_no_operands_on_the_node_is_said():
    kube = FakeKube([node(state="pod-restart-required", unschedulable=True)])
    upgrade = nu.NodeUpgrade(kube, NODE, {"operand_namespace": "gpuops", "operand_selector": "app=x"})
    assert upgrade.run("restarted")["state"] == "validation-required"
    assert upgrade.warnings == ["no operand pods on gpu-01 in namespace gpuops match app=x: none restarted (check "
                                "driver_upgrade_namespace and driver_upgrade_operand_selector)"]


def test_failed_leaves_a_node_the_upgrade_never_took_out_of_service():
    for state in (None, "upgrade-done"):
        kube = FakeKube([node(state=state)])
        assert not run(kube, "failed")["changed"] and kube.label() == state and kube.patches == []


def test_an_api_server_that_does_not_answer_for_a_moment_is_waited_for():
    kube = FakeKube([node(), node("gpu-02", unschedulable=True)])
    nodes, calls = kube.nodes, {"n": 0}

    def flaky(label_selector=""):
        calls["n"] += 1
        if calls["n"] == 1:
            raise KubeError("list nodes: service unavailable", status=503)
        if calls["n"] == 2:
            raise KubeError("list nodes: connection refused")
        kube._nodes["gpu-02"]["spec"] = {}  # the other node is back
        return nodes(label_selector)
    kube.nodes = flaky
    # (two failed lists, the one that finds the slot, and the look again under the budget's lock)
    assert run(kube, "drained", max_unavailable=1)["state"] == "pod-restart-required" and calls["n"] == 4


def test_a_refusal_of_the_api_server_is_not_waited_for():
    kube = FakeKube([node()])

    def forbidden(label_selector=""):
        raise KubeError("list nodes: forbidden", status=403)
    kube.nodes = forbidden
    with pytest.raises(KubeError, match="forbidden"):
        run(kube, "drained")


def test_the_label_never_moves_back():
    assert not nu.advances("drain-required", "cordon-required")
    assert nu.advances("upgrade-done", "cordon-required") and nu.advances("upgrade-failed", "cordon-required")
    assert nu.advances("validation-required", "upgrade-failed")


def test_done_with_restart_operands_restarts_them_and_uncordons_in_one_call():
    kube = FakeKube([node(state="pod-restart-required", unschedulable=True)],
                    [pod("plugin-a", ns="gpuops", owner="DaemonSet")])
    kube.daemonsets_start = 2
    result = run(kube, "done", restart_operands=True, operand_namespace="gpuops", operand_selector="")
    assert result["restarted"] == ["gpuops/plugin-a"]
    assert result["states"] == ["validation-required", "uncordon-required", "upgrade-done"]
    assert result["previous_state"] == "pod-restart-required" and kube.label() == "upgrade-done"
    assert kube.node(NODE)["spec"]["unschedulable"] is False
    # (the new operand pod was Ready before the uncordon)
    assert kube.pod("gpuops", "plugin-a-new")["status"]["phase"] == "Running"


def test_done_without_restart_operands_does_not_restart_them():
    kube = FakeKube([node(state="pod-restart-required", unschedulable=True)],
                    [pod("plugin-a", ns="gpuops", owner="DaemonSet")])
    result = run(kube, "done", operand_namespace="gpuops", operand_selector="")
    assert result["restarted"] == [] and kube.deleted == []


def test_done_with_restart_operands_past_the_restart_restarts_nothing():
    kube = FakeKube([node(state="validation-required", unschedulable=True)],
                    [pod("plugin-a", ns="gpuops", owner="DaemonSet")])
    result = run(kube, "done", restart_operands=True, operand_namespace="gpuops", operand_selector="")
    assert result["restarted"] == [] and result["states"] == ["uncordon-required", "upgrade-done"]


def test_the_waits_watch_what_they_wait_for():
    # the slot: the GPU nodes; the operands: their pods on the node - each wait watches its own list
    kube = FakeKube([node(), node("gpu-02", unschedulable=True)])
    with pytest.raises(nu.UpgradeError, match="no free slot after 60s"):
        run(kube, "drained", max_unavailable=1, slot_timeout=60)
    assert set(kube.watched) == {("nodes", "nvidia.com/gpu.present=true")}
    # (a watch returns on a change; without one, at the latest after WATCH_RELIST seconds it lists again)
    assert len(kube.watched) == 2
    kube = FakeKube([node(state="pod-restart-required", unschedulable=True)],
                    [pod("plugin-a", ns="gpuops", owner="DaemonSet", labels={"app": "x"})])
    kube.daemonsets_start = 3
    run(kube, "restarted", operand_namespace="gpuops", operand_selector="app=x")
    assert set(kube.watched) == {("pods", NODE, "gpuops", "app=x")}


def test_an_api_server_that_fails_a_watch_for_a_moment_is_polled_instead():
    kube = FakeKube([node(), node("gpu-02", unschedulable=True)])

    def broken(key, timeout):
        kube.watched.append(key)
        kube._nodes["gpu-02"]["spec"] = {}  # (the other node comes back meanwhile)
        raise KubeError("watch nodes: connection reset")
    kube.wait_change = broken
    result = run(kube, "drained", max_unavailable=1, poll_interval=7)
    assert result["state"] == "pod-restart-required" and len(kube.watched) == 1


def test_a_maintenance_that_waits_for_a_slot_says_so_until_it_takes_one():
    kube = FakeKube([node(), node("gpu-02", unschedulable=True)])
    listed = {"n": 0}
    nodes = kube.nodes

    def others_come_back(label_selector=""):
        listed["n"] += 1
        if listed["n"] == 3:  # the other node is back after two looks
            kube._nodes["gpu-02"]["spec"] = {}
        return nodes(label_selector)
    kube.nodes = others_come_back
    waiting = {"gpuops.nvidia/remediation-state": "remediation-waiting"}
    started = {"gpuops.nvidia/remediation-state": "remediation-in-progress"}
    result = run(kube, "drained", max_unavailable=1, maintenance="remediation", waiting_labels=waiting,
                 started_labels=started)
    assert result["waited_for_slot"] == "1 GPU node(s) out of service already (max_unavailable 1): gpu-02"
    # first the wait and its reason, then the slot taken: the reason gone and the state moved on in one write
    assert kube.patches[0] == {"metadata": {
        "annotations": {nu.WAITING_ANNOTATION: "remediation: " + result["waited_for_slot"]}, "labels": waiting}}
    assert kube.patches[1]["metadata"]["annotations"][nu.WAITING_ANNOTATION] is None
    assert kube.patches[1]["metadata"]["labels"] == dict(started, **{nu.STATE_LABEL: "cordon-required"})
    item = kube.node(NODE)
    assert item["metadata"]["labels"]["gpuops.nvidia/remediation-state"] == "remediation-in-progress"
    assert nu.WAITING_ANNOTATION not in item["metadata"]["annotations"]


def test_a_maintenance_with_a_free_slot_never_says_it_waits():
    kube = FakeKube([node()])
    result = run(kube, "drained", started_labels={"gpuops.nvidia/remediation-state": "remediation-in-progress"})
    assert "waited_for_slot" not in result
    assert all(nu.WAITING_ANNOTATION not in (p.get("metadata") or {}).get("annotations", {}) for p in kube.patches)
    assert kube.node(NODE)["metadata"]["labels"]["gpuops.nvidia/remediation-state"] == "remediation-in-progress"


def test_the_slot_is_taken_under_the_budgets_lock_and_the_lock_given_back():
    kube = FakeKube([node()])
    assert run(kube, "drained")["state"] == "pod-restart-required"
    assert kube.lease_log == [("create", "driver gpu-01 pid %d" % os.getpid()),
                              ("delete", "driver gpu-01 pid %d" % os.getpid())]
    assert kube.leases == {}


def test_a_slot_another_maintenance_took_meanwhile_is_waited_for_again():
    # the first look finds a slot; under the lock the look again finds it taken (another node
    # cordoned in between), so the node waits until that one is back
    kube = FakeKube([node(), node("gpu-02")])
    nodes, looks = kube.nodes, {"n": 0}

    def racing(label_selector=""):
        looks["n"] += 1
        if looks["n"] == 2:
            kube._nodes["gpu-02"]["spec"] = {"unschedulable": True}
        if looks["n"] == 4:
            kube._nodes["gpu-02"]["spec"] = {}
        return nodes(label_selector)
    kube.nodes = racing
    result = run(kube, "drained", max_unavailable=1)
    assert result["state"] == "pod-restart-required" and looks["n"] == 5
    assert result["waited_for_slot"] == "1 GPU node(s) out of service already (max_unavailable 1): gpu-02"
    # two turns of the lock, each given back
    assert [entry[0] for entry in kube.lease_log] == ["create", "delete", "create", "delete"]


def test_a_lock_left_by_a_run_that_died_is_taken_over_after_its_duration():
    kube = FakeKube([node()])
    kube.leases[("kube-system", nu.LOCK_NAME)] = {
        "metadata": {"name": nu.LOCK_NAME, "namespace": "kube-system", "uid": "dead", "resourceVersion": "7"},
        "spec": {"holderIdentity": "driver gpu-09 pid 1", "leaseDurationSeconds": 30}}
    clock = Clock()
    kube.clock = clock
    opts = {"max_unavailable": "25%", "gpu_node_selector": "nvidia.com/gpu.present=true", "poll_interval": 10}
    result = nu.NodeUpgrade(kube, NODE, opts, clock=clock, sleep=clock.sleep).run("drained")
    assert result["state"] == "pod-restart-required"
    # (it watched the Lease for its duration, unchanged; then took it over, and gave it back)
    assert clock.now == 30 and kube.watched[0] == ("lease", "kube-system", nu.LOCK_NAME) and kube.leases == {}


def test_a_lock_that_stays_held_stops_before_the_node_changes_and_says_how_to_free_it():
    kube = FakeKube([node()])

    class Renewed(dict):  # a holder that keeps renewing it: a new resourceVersion at every look
        n = 0

        def get(self, key, default=None):
            if key == ("kube-system", nu.LOCK_NAME):
                Renewed.n += 1
                return {"metadata": {"name": nu.LOCK_NAME, "uid": "alive", "resourceVersion": str(Renewed.n)},
                        "spec": {"holderIdentity": "remediation gpu-07 pid 42", "leaseDurationSeconds": 30}}
            return dict.get(self, key, default)

        def __contains__(self, key):
            return key == ("kube-system", nu.LOCK_NAME)
    kube.leases = Renewed()
    with pytest.raises(nu.UpgradeError, match=r"the maintenance budget's lock \(Lease kube-system/gpuops-nvidia-"
                                              r"maintenance-budget\) is held by remediation gpu-07 pid 42 for more "
                                              r"than 300s; if no maintenance runs, delete it"):
        run(kube, "drained")
    assert kube.patches == []


def test_a_node_another_maintenance_claimed_counts_as_out_before_its_cordon():
    # (the claim, cordon-required, and the cordon are two writes: between them the node is out)
    kube = FakeKube([node(), node("gpu-02", state="cordon-required")])
    with pytest.raises(nu.UpgradeError, match=r"no free slot after 30s: 1 GPU node\(s\) out of service already "
                                              r"\(max_unavailable 1\): gpu-02"):
        run(kube, "drained", max_unavailable=1, slot_timeout=30)


def test_a_bare_pod_being_deleted_already_does_not_stop_the_drain():
    # (a test's namespace going away: its bare pod terminating is lost to nobody; the drain waits for it)
    going = pod("holder", gpu=True, owner=None)
    going["metadata"]["deletionTimestamp"] = "2026-12-05T16:55:00Z"
    kube = FakeKube([node()], [going])
    assert run(kube, "drained")["state"] == "pod-restart-required"
    assert kube.pod("work", "holder") is None

# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The applier behind gpuops.nvidia.k8s_apply, over a fake API that keeps objects as a server
does (a resourceVersion bumped only by a write that changes something). The module against a
real API server: the lab cluster's tests (tests/lab/kubelab)."""

from __future__ import annotations

import copy
import json

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils.k8s import api as kube_api
from ansible_collections.gpuops.nvidia.plugins.module_utils.k8s import apply as k8s_apply

NS = "gpuops-nvidia"
MINE = {"app.kubernetes.io/managed-by": "gpuops.nvidia"}


def obj(kind, name, namespace=None, api="v1", labels=None, **body):
    meta = {"name": name, "labels": dict(labels or MINE)}
    if namespace:
        meta["namespace"] = namespace
    return dict({"apiVersion": api, "kind": kind, "metadata": meta}, **body)


class FakeAPI:
    """Objects by (kind, namespace, name); server-side apply merges the body over what is there."""

    def __init__(self, *existing):
        self.store = {}
        self.calls = []
        self.version = 100
        self.rollouts = {}  # (kind, name) -> polls until it has rolled out (None: never)
        self.pods, self.nodes, self.events = [], [], []
        for item in existing:
            self._put(copy.deepcopy(item))

    def _key(self, kind, name, namespace):
        return (kind, namespace, name)

    def _put(self, item):
        self.version += 1
        item["metadata"]["resourceVersion"] = str(self.version)
        item["metadata"]["managedFields"] = [{"manager": "somebody"}]
        self.store[self._key(item["kind"], item["metadata"]["name"], item["metadata"].get("namespace"))] = item
        return item

    def get(self, api_version, kind, name, namespace=None):
        self.calls.append(("get", kind, name))
        item = self.store.get(self._key(kind, name, namespace))
        if item is not None and kind in ("DaemonSet", "Deployment"):
            item = copy.deepcopy(item)
            left = self.rollouts.get((kind, name), 0)
            if left is None or left > 0:
                self.rollouts[(kind, name)] = None if left is None else left - 1
                item["status"] = {"observedGeneration": 1, "desiredNumberScheduled": 2, "updatedNumberScheduled": 1,
                                  "numberAvailable": 1, "replicas": 2, "updatedReplicas": 1, "availableReplicas": 1}
            else:
                item["status"] = {"observedGeneration": 1, "desiredNumberScheduled": 2, "updatedNumberScheduled": 2,
                                  "numberAvailable": 2, "replicas": 1, "updatedReplicas": 1, "availableReplicas": 1}
            item["metadata"]["generation"] = 1
        return copy.deepcopy(item)

    def apply(self, item, dry_run):
        self.calls.append(("apply-dry" if dry_run else "apply", item["kind"], item["metadata"]["name"]))
        namespace = item["metadata"].get("namespace")
        if namespace and ("Namespace", None, namespace) not in self.store:
            raise kube_api.KubeError("apply %s: namespaces %s not found" % (item["kind"], namespace), status=404)
        key = self._key(item["kind"], item["metadata"]["name"], namespace)
        current = copy.deepcopy(self.store.get(key)) or {}
        merged = copy.deepcopy(current)
        for field, value in item.items():
            merged[field] = copy.deepcopy(value) if field != "metadata" else dict(current.get("metadata") or {}, **value)
        strip = k8s_apply.normalised
        if strip(merged) == strip(current or None):
            return current
        if dry_run:
            return merged
        return copy.deepcopy(self._put(merged))

    def delete(self, item, dry_run):
        self.calls.append(("delete-dry" if dry_run else "delete", item["kind"], item["metadata"]["name"]))
        key = self._key(item["kind"], item["metadata"]["name"], item["metadata"].get("namespace"))
        if key not in self.store:
            return False
        if not dry_run:
            del self.store[key]
        return True

    def list(self, api_version, kind, namespace=None, label_selector=""):
        return {"Pod": self.pods, "Node": self.nodes, "Event": self.events}[kind]


class Clock:
    def __init__(self):
        self.now = 0.0
        self.slept = []

    def __call__(self):
        return self.now

    def sleep(self, seconds):
        self.slept.append(seconds)
        self.now += seconds


def applier(api, check_mode=False):
    clock = Clock()
    return k8s_apply.Applier(api, check_mode=check_mode, clock=clock, sleep=clock.sleep), clock


NAMESPACE = obj("Namespace", NS)
CONFIG = obj("ConfigMap", "plugin-config", NS, data={"config.yaml": "version: v1\n"})
DS = obj("DaemonSet", "nvidia-device-plugin", NS, api="apps/v1",
         spec={"selector": {"matchLabels": {"app": "dp"}}, "template": {"spec": {"nodeSelector": {"gpu": "true"}}}})
WAIT = [{"kind": "DaemonSet", "name": "nvidia-device-plugin", "namespace": NS}]


def test_a_first_apply_creates_everything_and_a_second_changes_nothing():
    api = FakeAPI()
    first = applier(api)[0].run([NAMESPACE, CONFIG, DS], wait=WAIT)
    assert first["changed"] is True
    assert first["applied"] == ["Namespace/" + NS, "ConfigMap/plugin-config", "DaemonSet/nvidia-device-plugin"]
    versions = {key: item["metadata"]["resourceVersion"] for key, item in api.store.items()}
    again = applier(api)[0].run([NAMESPACE, CONFIG, DS], wait=WAIT)
    assert again["changed"] is False and again["applied"] == [] and again["diff"] == []
    assert {key: item["metadata"]["resourceVersion"] for key, item in api.store.items()} == versions


def test_a_changed_value_is_the_one_change_and_its_diff_shows_it():
    api = FakeAPI(NAMESPACE, CONFIG)
    wanted = copy.deepcopy(CONFIG)
    wanted["data"] = {"config.yaml": "version: v1\nsharing: {}\n"}
    result = applier(api)[0].run([NAMESPACE, wanted])
    assert result["applied"] == ["ConfigMap/plugin-config"]
    (diff,) = result["diff"]
    assert "sharing" in diff["after"] and "sharing" not in diff["before"]
    assert "managedFields" not in diff["before"] + diff["after"]
    assert "resourceVersion" not in diff["before"] + diff["after"]


def test_check_mode_is_a_dry_run_and_reports_what_would_change():
    api = FakeAPI()
    result = applier(api, check_mode=True)[0].run([NAMESPACE, CONFIG, DS], wait=WAIT)
    assert result["changed"] is True
    # a namespace the run would create cannot hold a dry-run object: it would be created too
    assert result["applied"] == ["Namespace/" + NS, "ConfigMap/plugin-config", "DaemonSet/nvidia-device-plugin"]
    assert api.store == {}
    assert [call[0] for call in api.calls if call[0].startswith("apply")] == ["apply-dry"] * 3
    # and nothing is waited for
    assert ("get", "DaemonSet", "nvidia-device-plugin") in api.calls
    assert api.calls.count(("get", "DaemonSet", "nvidia-device-plugin")) == 1


def test_check_mode_does_not_hide_a_missing_namespace_it_would_not_create():
    api = FakeAPI()
    with pytest.raises(kube_api.KubeError, match="namespaces gpuops-nvidia not found"):
        applier(api, check_mode=True)[0].run([CONFIG])


def test_a_shared_object_someone_else_made_is_neither_changed_nor_deleted():
    theirs = obj("RuntimeClass", "nvidia", api="node.k8s.io/v1", labels={"owner": "rke2"}, handler="nvidia")
    ours = obj("RuntimeClass", "nvidia", api="node.k8s.io/v1", handler="nvidia-cdi")
    api = FakeAPI(theirs, NAMESPACE)
    result = applier(api)[0].run([ours, CONFIG])
    assert result["foreign"] == ["RuntimeClass/nvidia"]
    assert api.store[("RuntimeClass", None, "nvidia")]["handler"] == "nvidia"
    assert not [call for call in api.calls if call[0] == "apply" and call[1] == "RuntimeClass"]
    gone = applier(api)[0].run([ours], state="absent")
    assert gone["deleted"] == [] and ("RuntimeClass", None, "nvidia") in api.store


def test_a_shared_object_of_ours_is_applied():
    api = FakeAPI(obj("RuntimeClass", "nvidia", api="node.k8s.io/v1", handler="old"))
    result = applier(api)[0].run([obj("RuntimeClass", "nvidia", api="node.k8s.io/v1", handler="nvidia")])
    assert result["foreign"] == [] and result["applied"] == ["RuntimeClass/nvidia"]


def test_state_absent_deletes_in_reverse_order_and_waits_until_they_are_gone():
    api = FakeAPI(NAMESPACE, CONFIG)
    result = applier(api)[0].run([NAMESPACE, CONFIG, DS], state="absent")
    assert result["deleted"] == ["ConfigMap/plugin-config", "Namespace/" + NS]
    assert [call[1] for call in api.calls if call[0] == "delete"] == ["DaemonSet", "ConfigMap", "Namespace"]
    assert api.store == {}
    assert result["diff"][0]["before"] and result["diff"][0]["after"] == ""


def test_state_absent_in_check_mode_deletes_nothing():
    api = FakeAPI(NAMESPACE, CONFIG)
    result = applier(api, check_mode=True)[0].run([NAMESPACE, CONFIG], state="absent")
    assert result["deleted"] == ["ConfigMap/plugin-config", "Namespace/" + NS]
    assert len(api.store) == 2


def test_objects_that_stay_after_deletion_fail_by_name():
    class Sticky(FakeAPI):
        def delete(self, item, dry_run):
            return True  # accepted, but a finalizer keeps it

    api = Sticky(NAMESPACE, CONFIG)
    with pytest.raises(k8s_apply.ApplyError, match=r"still there 10s after they were deleted: ConfigMap/plugin-config"):
        applier(api)[0].run([CONFIG], state="absent", timeout=10)


def test_the_wait_polls_until_the_rollout_is_done():
    api = FakeAPI(NAMESPACE)
    api.rollouts[("DaemonSet", "nvidia-device-plugin")] = 3
    run, clock = applier(api)
    run.run([NAMESPACE, DS], wait=WAIT, timeout=60)
    assert clock.slept == [k8s_apply.POLL_SECONDS] * 3


def test_a_rollout_that_does_not_finish_names_the_nodes_and_why():
    api = FakeAPI(NAMESPACE)
    api.rollouts[("DaemonSet", "nvidia-device-plugin")] = None
    api.nodes = [{"metadata": {"name": "node-a"}}, {"metadata": {"name": "node-b"}}]
    api.pods = [{"metadata": {"name": "dp-1"}, "spec": {"nodeName": "node-a"},
                 "status": {"phase": "Pending", "containerStatuses": [
                     {"name": "plugin", "ready": False, "state": {"waiting": {"reason": "ImagePullBackOff"}}}]}}]
    run, clock = applier(api)
    with pytest.raises(k8s_apply.ApplyError) as error:
        run.run([NAMESPACE, DS], wait=WAIT, timeout=30)
    message = str(error.value)
    assert message.startswith("DaemonSet/nvidia-device-plugin in gpuops-nvidia did not become ready within 30s: ")
    assert "node-a: pod dp-1 Pending; container plugin waiting: ImagePullBackOff" in message
    assert "node-b: no nvidia-device-plugin pod" in message
    assert clock.now >= 30


def test_a_workload_that_is_not_there_says_so():
    api = FakeAPI(NAMESPACE)
    with pytest.raises(k8s_apply.ApplyError, match="did not become ready within 4s: it does not exist"):
        applier(api)[0].run([NAMESPACE], wait=WAIT, timeout=4)


@pytest.mark.parametrize("status, done", [
    ({"observedGeneration": 2, "desiredNumberScheduled": 2, "updatedNumberScheduled": 2, "numberAvailable": 2}, True),
    # the controller has not seen the newest spec yet
    ({"observedGeneration": 1, "desiredNumberScheduled": 2, "updatedNumberScheduled": 2, "numberAvailable": 2}, False),
    ({"observedGeneration": 2, "desiredNumberScheduled": 2, "updatedNumberScheduled": 1, "numberAvailable": 2}, False),
    ({"observedGeneration": 2, "desiredNumberScheduled": 2, "updatedNumberScheduled": 2, "numberAvailable": 1}, False),
    # no node to run on is rolled out (kubectl rollout status says so too)
    ({"observedGeneration": 2, "desiredNumberScheduled": 0}, True),
])
def test_a_daemonset_has_rolled_out_when_every_pod_runs_the_newest_spec(status, done):
    assert k8s_apply.rollout_done({"kind": "DaemonSet", "metadata": {"generation": 2}, "status": status}) is done


@pytest.mark.parametrize("status, done", [
    ({"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "availableReplicas": 1}, True),
    # an old pod is still there
    ({"observedGeneration": 1, "replicas": 2, "updatedReplicas": 1, "availableReplicas": 1}, False),
    ({"observedGeneration": 1, "replicas": 1, "updatedReplicas": 1, "availableReplicas": 0}, False),
])
def test_a_deployment_has_rolled_out_when_its_replicas_are_new_and_available(status, done):
    deployment = {"kind": "Deployment", "metadata": {"generation": 1}, "spec": {"replicas": 1}, "status": status}
    assert k8s_apply.rollout_done(deployment) is done


def test_only_workloads_are_waited_for():
    with pytest.raises(k8s_apply.ApplyError, match="only DaemonSets and Deployments"):
        k8s_apply.rollout_done({"kind": "Job", "metadata": {"name": "x"}})


@pytest.mark.parametrize("bad", [{"kind": "ConfigMap", "metadata": {"name": "x"}}, "ConfigMap/x",
                                 {"apiVersion": "v1", "kind": "ConfigMap", "metadata": {}}])
def test_something_that_is_no_object_is_refused_before_any_call(bad):
    api = FakeAPI()
    with pytest.raises(k8s_apply.ApplyError, match=r"objects\[1\] is no Kubernetes object"):
        applier(api)[0].run([NAMESPACE, bad])
    assert api.calls == []


def test_secret_values_never_reach_the_diff():
    api = FakeAPI(NAMESPACE)
    secret = obj("Secret", "pull", NS, type="kubernetes.io/dockerconfigjson",
                 data={".dockerconfigjson": "c2VjcmV0LXBhc3N3b3Jk"}, stringData={"token": "hunter2"})
    result = applier(api)[0].run([secret])
    text = json.dumps(result)
    assert "c2VjcmV0LXBhc3N3b3Jk" not in text and "hunter2" not in text
    assert result["applied"] == ["Secret/pull"]

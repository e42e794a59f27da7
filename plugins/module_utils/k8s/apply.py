# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Applying a role's objects to the cluster in one call: the service behind the module
gpuops.nvidia.k8s_apply (and so behind the role gpuops.nvidia.k8s_objects, the step every
Kubernetes role ends with).

Plan, then act: the shared cluster-scoped objects that exist and were not made by this
collection are left alone (objects.SHARED_KINDS); the rest are server-side applied with the
field manager ``gpuops-nvidia`` (dry-run in check mode), or deleted in reverse order; then the
workloads named are waited for, and a workload that does not roll out is explained node by node
(objects.rollout_problems). Objects are plain dicts shaped as the API returns them; the API is
reached through a small client interface (``Client``) so the logic is tested without a cluster."""

from __future__ import annotations

__metaclass__ = type

import copy
import json
import time

from ansible_collections.gpuops.nvidia.plugins.module_utils.k8s import api as kube_api
from ansible_collections.gpuops.nvidia.plugins.module_utils.k8s import objects as k8s_objects

FIELD_MANAGER = "gpuops-nvidia"
POLL_SECONDS = 2
# what the API server adds that says nothing about what was asked for
_VOLATILE_METADATA = ("managedFields", "resourceVersion", "generation", "uid", "creationTimestamp",
                      "selfLink", "deletionTimestamp", "deletionGracePeriodSeconds")


class ApplyError(Exception):
    """A failure to report as the task's message."""


def normalised(obj: dict | None) -> dict | None:
    """OBJ without its status and the metadata the server keeps for itself; Secret values masked
    (what a diff may show)."""
    if obj is None:
        return None
    out = copy.deepcopy(obj)
    out.pop("status", None)
    meta = out.get("metadata") or {}
    for key in _VOLATILE_METADATA:
        meta.pop(key, None)
    annotations = meta.get("annotations") or {}
    annotations.pop("deprecated.daemonset.template.generation", None)
    annotations.pop("deployment.kubernetes.io/revision", None)
    if not annotations:
        meta.pop("annotations", None)
    if out.get("kind") == "Secret":
        for key in ("data", "stringData"):
            if isinstance(out.get(key), dict):
                out[key] = {name: "********" for name in out[key]}
    return out


def _key(obj: dict) -> str:
    return k8s_objects.object_key(obj)


def _namespace(obj: dict) -> str | None:
    return (obj.get("metadata") or {}).get("namespace")


def rollout_done(obj: dict | None) -> bool:
    """Whether a DaemonSet or Deployment has rolled out: the controller saw the newest spec,
    every pod it wants runs that spec and is available (kubectl rollout status's conditions)."""
    if not obj:
        return False
    spec, status = obj.get("spec") or {}, obj.get("status") or {}
    if status.get("observedGeneration", 0) < (obj.get("metadata") or {}).get("generation", 0):
        return False
    if obj.get("kind") == "DaemonSet":
        desired = status.get("desiredNumberScheduled", 0)
        return status.get("updatedNumberScheduled", 0) >= desired and status.get("numberAvailable", 0) >= desired
    if obj.get("kind") == "Deployment":
        wanted = spec.get("replicas", 1)
        return (status.get("updatedReplicas", 0) >= wanted and status.get("availableReplicas", 0) >= wanted
                and status.get("replicas", 0) <= status.get("updatedReplicas", 0))
    raise ApplyError("cannot wait for %s/%s: only DaemonSets and Deployments are waited for"
                     % (obj.get("kind"), (obj.get("metadata") or {}).get("name")))


class Client:
    """The calls the applier makes, over the kubernetes client's dynamic client; every failure is
    a KubeError naming the call."""

    def __init__(self, api_client):
        from kubernetes.dynamic import DynamicClient  # pylint: disable=import-outside-toplevel
        from kubernetes.dynamic.exceptions import ResourceNotFoundError  # pylint: disable=import-outside-toplevel
        self._dynamic = DynamicClient(api_client)
        self._not_found = ResourceNotFoundError

    def _resource(self, api_version, kind):
        try:
            return self._dynamic.resources.get(api_version=api_version, kind=kind)
        except self._not_found:
            # a kind a CustomResourceDefinition of this very call just added: discover again
            self._dynamic.resources.invalidate_cache()
            try:
                return self._dynamic.resources.get(api_version=api_version, kind=kind)
            except self._not_found:
                raise kube_api.KubeError("the cluster serves no %s %s (is its CustomResourceDefinition installed?)"
                                         % (api_version, kind), status=404)

    def _call(self, what, method, *args, **kwargs):
        return kube_api.call(what, method, *args, **kwargs).to_dict()

    def get(self, api_version, kind, name, namespace=None):
        """The object, or None when there is none."""
        try:
            resource = self._resource(api_version, kind)
            return self._call("read %s/%s" % (kind, name), self._dynamic.get, resource, name=name, namespace=namespace)
        except kube_api.KubeError as exc:
            if exc.status == 404:
                return None
            raise

    def apply(self, obj, dry_run):
        resource = self._resource(obj["apiVersion"], obj["kind"])
        extra = {"dry_run": "All"} if dry_run else {}
        return self._call("apply %s" % _key(obj), self._dynamic.server_side_apply, resource, body=obj,
                          namespace=_namespace(obj), field_manager=FIELD_MANAGER, force_conflicts=True, **extra)

    def delete(self, obj, dry_run):
        resource = self._resource(obj["apiVersion"], obj["kind"])
        extra = {"dry_run": "All"} if dry_run else {}
        try:
            self._call("delete %s" % _key(obj), self._dynamic.delete, resource, name=obj["metadata"]["name"],
                       namespace=_namespace(obj), body={"propagationPolicy": "Foreground"}, **extra)
        except kube_api.KubeError as exc:
            if exc.status == 404:
                return False
            raise
        return True

    def list(self, api_version, kind, namespace=None, label_selector=""):
        resource = self._resource(api_version, kind)
        return self._call("list %s" % kind, self._dynamic.get, resource, namespace=namespace,
                          label_selector=label_selector or None)["items"]


class Applier:
    """apply(objects, state, wait, timeout) -> result dict (changed, applied, deleted, foreign,
    diff). CLIENT: a Client (or a fake with its methods); CLOCK and SLEEP: time's, replaceable."""

    def __init__(self, client, check_mode=False, clock=time.monotonic, sleep=time.sleep):
        self.client = client
        self.check_mode = check_mode
        self.clock = clock
        self.sleep = sleep

    def foreign(self, objs):
        """The shared objects of OBJS that exist and were not made by this collection (Kind/name)."""
        found = []
        for obj in objs:
            if obj.get("kind") in k8s_objects.SHARED_KINDS:
                current = self.client.get(obj["apiVersion"], obj["kind"], obj["metadata"]["name"], _namespace(obj))
                if current is not None:
                    found.append({"resources": [current]})
        return k8s_objects.foreign(found)

    def run(self, objs, state="present", wait=None, timeout=300):
        check_objects(objs)
        foreign = self.foreign(objs)
        mine = k8s_objects.without(objs, foreign)
        result = dict(changed=False, foreign=foreign, applied=[], deleted=[], diff=[])
        if state == "present":
            for obj in mine:
                before = self.client.get(obj["apiVersion"], obj["kind"], obj["metadata"]["name"], _namespace(obj))
                try:
                    after = self.client.apply(obj, self.check_mode)
                except kube_api.KubeError as exc:
                    # check mode: a dry run cannot place an object in a namespace this call creates
                    if not (self.check_mode and exc.status == 404 and before is None
                            and "Namespace/%s" % _namespace(obj) in result["applied"]):
                        raise
                    after = obj
                old, new = normalised(before), normalised(after)
                if old != new:
                    result["applied"].append(_key(obj))
                    result["diff"].append(_diff(obj, old, new))
            if not self.check_mode:
                for workload in wait or []:
                    self.wait_for(workload, objs, timeout)
        else:
            for obj in reversed(mine):
                if self.client.delete(obj, self.check_mode):
                    result["deleted"].append(_key(obj))
                    result["diff"].append(_diff(obj, normalised(obj), None))
            if not self.check_mode:
                self.wait_gone([obj for obj in mine if _key(obj) in result["deleted"]], timeout)
        result["changed"] = bool(result["applied"] or result["deleted"])
        return result

    def wait_for(self, workload, objs, timeout):
        kind, name, namespace = workload["kind"], workload["name"], workload.get("namespace")
        deadline = self.clock() + timeout
        while True:
            current = self.client.get("apps/v1", kind, name, namespace)
            if rollout_done(current):
                return
            if self.clock() >= deadline:
                break
            self.sleep(POLL_SECONDS)
        spec = next((obj for obj in objs if obj.get("kind") == kind and obj["metadata"].get("name") == name), {})
        template = ((spec.get("spec") or {}).get("template") or {}).get("spec") or {}
        match = ((spec.get("spec") or {}).get("selector") or {}).get("matchLabels") or {}
        pods = self.client.list("v1", "Pod", namespace, ",".join(k8s_objects.selector(match))) if match else []
        nodes = self.client.list("v1", "Node", None, ",".join(k8s_objects.selector(template.get("nodeSelector"))))
        events = self.client.list("v1", "Event", namespace)
        problems = k8s_objects.rollout_problems(name, pods, events, [node["metadata"]["name"] for node in nodes])
        raise ApplyError("%s/%s in %s did not become ready within %ss: %s" % (
            kind, name, namespace, timeout,
            "; ".join(problems) if problems else ("it does not exist" if current is None else "no pod reported a problem")))

    def wait_gone(self, objs, timeout):
        deadline = self.clock() + timeout
        left = list(objs)
        while left:
            left = [obj for obj in left
                    if self.client.get(obj["apiVersion"], obj["kind"], obj["metadata"]["name"], _namespace(obj))]
            if not left:
                return
            if self.clock() >= deadline:
                raise ApplyError("still there %ss after they were deleted: %s" % (
                    timeout, ", ".join(_key(obj) for obj in left)))
            self.sleep(POLL_SECONDS)


def _diff(obj, before, after):
    dump = json.dumps
    return {"before_header": _key(obj), "after_header": _key(obj),
            "before": dump(before, indent=2, sort_keys=True) + "\n" if before else "",
            "after": dump(after, indent=2, sort_keys=True) + "\n" if after else ""}


def check_objects(objs):
    """Every object has apiVersion, kind and metadata.name: a clear error before any call."""
    for index, obj in enumerate(objs):
        if not isinstance(obj, dict) or not obj.get("apiVersion") or not obj.get("kind") \
                or not isinstance(obj.get("metadata"), dict) or not obj["metadata"].get("name"):
            raise ApplyError("objects[%d] is no Kubernetes object (it needs apiVersion, kind and metadata.name): %s"
                             % (index, json.dumps(obj)[:200]))


def run(params, check_mode):
    """The module's one call: connect, apply or delete, wait. Returns the result; raises
    ApplyError or KubeError."""
    applier = Applier(Client(kube_api.connect(params).api_client()), check_mode=check_mode)
    return applier.run(params["objects"], params["state"], params["wait"], params["wait_timeout"])

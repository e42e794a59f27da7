# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""One node's Kubernetes side of a driver upgrade, as NVIDIA's GPU Operator moves it through its
upgrade states (label nvidia.com/gpu-driver-upgrade-state, REFERENCE.md section 7), in one process:

- ``drained``: wait for a free slot (max_unavailable), record a cordon an admin made before, the
  canary taint, cordon-required, cordon, wait-for-jobs-required (wait for the pods of the jobs
  selector to finish), pod-deletion-required (delete the pods that use the node's GPUs),
  drain-required (evict the rest through the Eviction API, retried while a PodDisruptionBudget
  refuses - HTTP 429 - as kubernetes.core.k8s_drain does not), then pod-restart-required: the host
  is the driver's to upgrade.

Every wait (a slot, jobs, pods gone, operands Ready) watches what it waits for from the list it
made (kube.wait_change), so it goes on as soon as the API server has the change, not at the next
poll.
- ``restarted``: delete the operands' pods on the node (their DaemonSets start them on the new
  driver), then validation-required.
- ``done``: uncordon-required, then upgrade-done and uncordoned in one patch (a node an admin had
  cordoned before stays cordoned); with ``restart_operands``, a node still at pod-restart-required
  goes through ``restarted`` first (a maintenance that validates nothing between the two).
- ``failed``: upgrade-failed; the node stays cordoned.

Every step is idempotent, and the label never moves back: a node a run left midway is resumed by
running the same steps again. ``kube`` is a kube_api.Kube (or anything with its methods); the
decisions (which pods, which state next) are pure functions below."""

from __future__ import annotations

__metaclass__ = type

import contextlib
import os
import time

from ansible_collections.gpuops.nvidia.plugins.module_utils.k8s import upgrade_plan
from ansible_collections.gpuops.nvidia.plugins.module_utils.k8s.api import KubeError
from ansible_collections.gpuops.nvidia.plugins.module_utils.k8s.objects import pod_ready

STATE_LABEL = upgrade_plan.STATE_LABEL
SKIP_LABEL = upgrade_plan.SKIP_LABEL
DRAIN_SKIP_LABEL = upgrade_plan.DRAIN_SKIP_LABEL
# set on a node that was cordoned before the upgrade started: the upgrade leaves it cordoned
CORDONED_ANNOTATION = "gpuops.nvidia/driver-upgrade.was-cordoned"
MIRROR_ANNOTATION = "kubernetes.io/config.mirror"
# on a node while its maintenance waits for a slot of the budget: the kind and the reason
WAITING_ANNOTATION = "gpuops.nvidia/maintenance-waiting"
STEPS = ("drained", "restarted", "done", "failed")
# the longest a wait watches before it lists again
WATCH_RELIST = 30
# the budget's lock: a Lease held while a maintenance looks at the slots and takes one (well under
# a second); one left by a run that died is taken over after LOCK_SECONDS unchanged
LOCK_NAME = "gpuops-nvidia-maintenance-budget"
LOCK_SECONDS = 30
LOCK_TIMEOUT = 300
LOCK_RETRY = 1


class UpgradeError(Exception):
    """A step that cannot go on; the message names what and how to fix it."""


# ---- pure decisions ----------------------------------------------------------------------------

def rank(state: str) -> int:
    """Where a label value stands in the operator's order: a node not upgrading (no label,
    upgrade-required, upgrade-done, upgrade-failed) starts again at 0."""
    return upgrade_plan.STATES.index(state) if state in upgrade_plan.IN_PROGRESS else 0


def advances(current: str, state: str) -> bool:
    """Whether writing ``state`` moves the node on (a resumed node's label never moves back)."""
    return state == upgrade_plan.FAILED or state == "upgrade-done" or rank(state) > rank(current)


def keeps_cordon(node: dict) -> bool:
    """Whether the node stays cordoned after its upgrade: an admin cordoned it before the upgrade
    started (cordoned, not in an upgrade state), or a run this one resumes recorded so."""
    meta, spec = node.get("metadata") or {}, node.get("spec") or {}
    state = (meta.get("labels") or {}).get(STATE_LABEL, "")
    if (meta.get("annotations") or {}).get(CORDONED_ANNOTATION) == "true":
        return True
    return bool(spec.get("unschedulable")) and state in ("", "upgrade-required", "upgrade-done")


def with_taint(node: dict, taint: dict) -> list | None:
    """The node's taints with ``taint`` added, or None when it has it already."""
    taints = list((node.get("spec") or {}).get("taints") or [])
    if any(t.get("key") == taint["key"] and t.get("effect") == taint["effect"] for t in taints):
        return None
    return taints + [{k: v for k, v in taint.items() if k in ("key", "value", "effect") and v is not None}]


def _name(pod: dict) -> str:
    meta = pod.get("metadata") or {}
    return "%s/%s" % (meta.get("namespace"), meta.get("name"))


def drain_pods(pods: list, delete_emptydir_data: bool = True, force: bool = False):
    """What `kubectl drain --ignore-daemonsets` evicts of ``pods`` (those the label selector kept):
    not DaemonSet pods, not mirror (static) pods. Returns (to evict [ns/name], problems [str]):
    pods no controller manages (unless force) and pods with emptyDir data (unless
    delete_emptydir_data) are problems, as kubectl refuses them, and nothing is evicted then."""
    evict, unmanaged, local = [], [], []
    for pod in pods or []:
        meta = pod.get("metadata") or {}
        if MIRROR_ANNOTATION in (meta.get("annotations") or {}):
            continue
        owners = meta.get("ownerReferences") or []
        if any(o.get("kind") == "DaemonSet" and o.get("controller") for o in owners):
            continue
        # (a finished pod, or one being deleted already, is lost to nobody by the drain)
        finished = (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed") or bool(meta.get("deletionTimestamp"))
        if not finished and not any(o.get("controller") for o in owners) and not force:
            unmanaged.append(_name(pod))
        if not finished and any("emptyDir" in v for v in (pod.get("spec") or {}).get("volumes") or []) \
                and not delete_emptydir_data:
            local.append(_name(pod))
        evict.append(_name(pod))
    problems = []
    if unmanaged:
        problems.append("pods no controller manages would be lost: %s; delete them, label them %s=true to keep "
                        "them, or set driver_upgrade_force: true" % (", ".join(sorted(unmanaged)), DRAIN_SKIP_LABEL))
    if local:
        problems.append("pods with emptyDir data would lose it: %s; set driver_upgrade_delete_emptydir_data: true "
                        "or label them %s=true" % (", ".join(sorted(local)), DRAIN_SKIP_LABEL))
    return sorted(evict), problems


def controller(pod: dict) -> tuple | None:
    """(kind, name, uid) of the pod's controller (its DaemonSet), or None."""
    for owner in (pod.get("metadata") or {}).get("ownerReferences") or []:
        if owner.get("controller"):
            return owner.get("kind"), owner.get("name"), owner.get("uid")
    return None


def not_ready(pods: list, owners: set, old_uids: set) -> list:
    """The controllers of ``owners`` (kind, name, uid) without a new pod (not one of old_uids)
    Running and Ready among ``pods``: "DaemonSet/name (pod phase)" for each."""
    waiting = []
    for owner in sorted(owners, key=lambda o: (o[0] or "", o[1] or "")):
        mine = [p for p in pods if controller(p) == owner and (p.get("metadata") or {}).get("uid") not in old_uids]
        if not any(pod_ready(p) for p in mine):
            waiting.append("%s/%s (%s)" % (owner[0], owner[1], ", ".join(
                "%s %s" % ((p.get("metadata") or {}).get("name"), (p.get("status") or {}).get("phase") or "Pending")
                for p in mine) or "no new pod yet"))
    return waiting


def selector(*parts: str) -> str:
    return ",".join(p.strip() for p in parts if p and p.strip())


# ---- the steps ---------------------------------------------------------------------------------

class NodeUpgrade:
    """One node's steps. ``options``: the module's parameters. ``check``: report, change nothing."""

    def __init__(self, kube, name: str, options: dict, check: bool = False, clock=time.monotonic, sleep=time.sleep):
        self.kube, self.name, self.opt, self.check = kube, name, options, check
        self.clock, self.sleep = clock, sleep
        self.result = {"changed": False, "node": name, "states": [], "cordoned": False, "waited_for": [],
                       "deleted": [], "evicted": [], "refused": {}, "restarted": [], "skip_label": False}
        self.node = None
        self.state = ""
        self.warnings = []

    # -- helpers
    def _read(self) -> dict:
        node = self.kube.node(self.name)
        if node is None:
            raise UpgradeError("the cluster has no node named %s; set driver_upgrade_node_name (or "
                               "node_labels_node_name) for this host to its Kubernetes node name" % self.name)
        self.node = node
        self.state = ((node.get("metadata") or {}).get("labels") or {}).get(STATE_LABEL, "")
        return node

    def _patch(self, body: dict):
        self.result["changed"] = True
        if not self.check:
            self.node = self.kube.patch_node(self.name, body)

    def _mark(self, state: str, extra: dict | None = None):
        """Moves the label to ``state`` (when that moves the node on), with ``extra`` in the same patch."""
        body = dict(extra or {})
        if advances(self.state, state) and self.state != state:
            body.setdefault("metadata", {}).setdefault("labels", {})[STATE_LABEL] = state
            self.result["states"].append(state)
            self.state = state
        if body:
            self._patch(body)

    def _wait(self, what: str, timeout: float, interval: float, done, fix: str = "", watch=None):
        """Calls done() until it returns a falsy 'still waiting for' value, or fails after timeout
        with ``fix``. Between two calls: a watch of the list done() made last (``watch``, the key
        of kube.wait_change), which returns as soon as one of its objects changes - or, without
        one, ``interval`` seconds of sleep. An API server that does not answer for a moment (no
        status, or 5xx: a restart, a failover) is waited for as well."""
        deadline = self.clock() + timeout
        while True:
            try:
                waiting = done()
            except KubeError as exc:
                if exc.status is not None and exc.status < 500:
                    raise
                waiting = "the API server did not answer (%s)" % exc
            if not waiting or self.check:
                return waiting
            left = deadline - self.clock()
            if left <= 0:
                raise UpgradeError("%s after %ds: %s%s" % (what, timeout, waiting, "; " + fix if fix else ""))
            if watch is not None and not waiting.startswith("the API server did not answer"):
                try:
                    # (at least every WATCH_RELIST seconds a fresh list, as informers resync)
                    self.kube.wait_change(watch, min(left, max(interval, WATCH_RELIST)))
                    continue
                except KubeError as exc:
                    if exc.status is not None and exc.status < 500:
                        raise
            self.sleep(interval)

    def _gone(self, names: list, timeout: float, what: str, uids: dict, fix: str):
        """Waits until none of the pods ``names`` (ns/name) is on the node any more as the pod it was."""
        def left():
            there = {_name(p): (p.get("metadata") or {}).get("uid") for p in self.kube.pods(self.name)}
            return ", ".join(name for name in names if name in there and there[name] == uids.get(name))
        self._wait("%s still there" % what, timeout, 1, left, fix, watch=("pods", self.name, "", ""))

    # -- drained
    def drained(self):
        node = self._read()
        labels = (node.get("metadata") or {}).get("labels") or {}
        if labels.get(SKIP_LABEL) == "true":
            self.result["skip_label"] = True
            return self.result
        self.result["previous_state"] = self.state
        if self.state not in upgrade_plan.IN_PROGRESS and not self.check:
            # the slot is looked at again and taken (the cordon) under the budget's lock, so that
            # maintenances started side by side (a rolling upgrade, a storm of remediations) never
            # take more slots between them than there are
            self._refusals()
            while True:
                self._slot()
                with self._budget_lock():
                    if not self._busy():
                        self._claim(self._read())
                        break
        else:
            if self.state not in upgrade_plan.IN_PROGRESS:
                self._slot()  # (check mode: says whether it would wait)
            self._refusals()
            self._claim(node)
        self._take()
        jobs = self.opt.get("wait_for_jobs_selector") or ""
        if jobs:
            self._jobs(jobs)
            self._mark("pod-deletion-required")
        self._delete_gpu_pods()
        if self.opt.get("drain", True):
            self._mark("drain-required")
            self._drain()
        self._mark("pod-restart-required")
        return self.result

    def _claim(self, node):
        """The slot taken: cordon-required, with the record of an admin's cordon and of the
        maintenance, in one patch (a node at cordon-required counts as out of service)."""
        # record a cordon an admin made before (a node this upgrade cordoned is not such a node)
        keep = keeps_cordon(node)
        self.result["keep_cordoned"] = keep
        record = {}
        if keep and ((node.get("metadata") or {}).get("annotations") or {}).get(CORDONED_ANNOTATION) != "true":
            record = {"metadata": {"annotations": {CORDONED_ANNOTATION: "true"}}}
        if self.state not in upgrade_plan.IN_PROGRESS:  # (a maintenance starts: say which)
            record.setdefault("metadata", {}).setdefault("annotations", {})[upgrade_plan.MAINTENANCE_ANNOTATION] = \
                self.opt.get("maintenance") or "driver"
        if WAITING_ANNOTATION in ((self.node.get("metadata") or {}).get("annotations") or {}):
            record.setdefault("metadata", {}).setdefault("annotations", {})[WAITING_ANNOTATION] = None
        if self.opt.get("started_labels") and self.state not in upgrade_plan.IN_PROGRESS:
            record.setdefault("metadata", {}).setdefault("labels", {}).update(self.opt["started_labels"])
        self._mark("cordon-required", record)

    def _take(self):
        """The node out of service: the taint, then cordoned with the state after cordon-required
        in one patch."""
        if self.opt.get("taint"):
            taints = with_taint(self.node, self.opt["taint"])
            if taints is not None:
                self._patch({"spec": {"taints": taints}})
        # one patch: cordoned, and the label at the next state, as the operator moves it on
        jobs = self.opt.get("wait_for_jobs_selector") or ""
        cordon = {} if (self.node.get("spec") or {}).get("unschedulable") else {"spec": {"unschedulable": True}}
        self.result["cordoned"] = bool(cordon)
        self._mark("wait-for-jobs-required" if jobs else "pod-deletion-required", cordon)

    def _refusals(self):
        """Before the node changes: pods the pod deletion or the drain would lose (no controller,
        emptyDir data) and the options do not allow, as the operator's podDeletion/drain force and
        deleteEmptyDir settings refuse them."""
        force, emptydir = self.opt.get("force", False), self.opt.get("delete_emptydir_data", True)
        if force and emptydir:
            return
        pods = self.kube.pods(self.name)
        gpu = {"%s/%s" % (p["namespace"], p["name"]) for p in upgrade_plan.gpu_pods(pods)}
        taken = [p for p in pods if _name(p) in gpu]
        if self.opt.get("drain", True):
            drained = set(_name(p) for p in self.kube.pods(self.name, label_selector=selector(
                DRAIN_SKIP_LABEL + "!=true", self.opt.get("drain_selector") or "")))
            taken += [p for p in pods if _name(p) in drained and _name(p) not in gpu]
        problems = drain_pods(taken, emptydir, force)[1]
        if problems:
            raise UpgradeError("%s was not changed: %s" % (self.name, "; ".join(problems)))

    def _say_waiting(self, reason):
        """The node says it waits, and why, once (gpuops.nvidia/maintenance-waiting, and the
        caller's waiting_labels); the patch that takes the slot removes it."""
        if "waited_for_slot" in self.result or self.check:
            return
        self.result["waited_for_slot"] = reason
        body = {"metadata": {"annotations": {WAITING_ANNOTATION: "%s: %s" % (
            self.opt.get("maintenance") or "driver", reason)}}}
        if self.opt.get("waiting_labels"):
            body["metadata"]["labels"] = dict(self.opt["waiting_labels"])
        self._patch(body)

    def _busy(self) -> str:
        """Why the node has no slot now ("" when it has one)."""
        wave = self.opt.get("wave") or []
        try:
            found = upgrade_plan.slot(self.kube.nodes(self.opt.get("gpu_node_selector") or ""), self.name,
                                      self.opt.get("max_unavailable") or "25%", wave)
        except upgrade_plan.PlanError as exc:
            raise UpgradeError(str(exc))
        if found["free"]:
            return ""
        reason = "%d GPU node(s) out of service already%s (max_unavailable %d): %s" % (
            len(found["unavailable"]), " besides this wave of %d" % len(set(wave) | {self.name}) if wave else "",
            found["limit"], ", ".join(found["unavailable"]) or "none")
        self._say_waiting(reason)
        return reason

    def _slot(self):
        """Waits until the node has a slot."""
        try:
            self._wait("no free slot", self.opt.get("slot_timeout", 3600), self.opt.get("poll_interval", 10),
                       self._busy,
                       "bring those nodes back, or raise driver_upgrade_max_unavailable or driver_upgrade_slot_timeout",
                       watch=("nodes", self.opt.get("gpu_node_selector") or ""))
        except UpgradeError:
            if "waited_for_slot" in self.result and not self.check:  # (it waits no more: the node is as it was)
                self._patch({"metadata": {"annotations": {WAITING_ANNOTATION: None}}})
            raise

    @contextlib.contextmanager
    def _budget_lock(self):
        """The budget's lock: a Lease (coordination.k8s.io) that one maintenance at a time creates
        while it looks at the slots and takes one; an API server's create is atomic. A Lease left by
        a run that died is taken over once it stayed unchanged for its duration (by this process's
        clock: no clock of another machine is compared)."""
        namespace = self.opt.get("lock_namespace") or "kube-system"
        holder = "%s %s pid %d" % (self.opt.get("maintenance") or "driver", self.name, os.getpid())
        deadline = self.clock() + LOCK_TIMEOUT
        seen = {}
        while True:
            lease = self.kube.create_lease(namespace, LOCK_NAME, holder, LOCK_SECONDS)
            if lease is not None:
                break
            held = self.kube.lease(namespace, LOCK_NAME)
            if held is None:
                continue  # (given back meanwhile)
            meta = held.get("metadata") or {}
            version = (meta.get("uid"), meta.get("resourceVersion"))
            first = seen.setdefault(version, self.clock())
            duration = (held.get("spec") or {}).get("leaseDurationSeconds") or LOCK_SECONDS
            if self.clock() - first >= duration:
                self.kube.delete_lease(namespace, LOCK_NAME, meta.get("uid"))  # (its holder is gone)
                continue
            if self.clock() >= deadline:
                raise UpgradeError(
                    "the maintenance budget's lock (Lease %s/%s) is held by %s for more than %ds; if no "
                    "maintenance runs, delete it (kubectl delete lease -n %s %s)" % (
                        namespace, LOCK_NAME, (held.get("spec") or {}).get("holderIdentity"), LOCK_TIMEOUT,
                        namespace, LOCK_NAME))
            # until the holder gives it back (a watch of the Lease from the version read)
            try:
                self.kube.wait_change(("lease", namespace, LOCK_NAME),
                                      min(deadline - self.clock(), duration - (self.clock() - first)))
            except KubeError as exc:
                if exc.status is not None and exc.status < 500:
                    raise
                self.sleep(LOCK_RETRY)
        try:
            yield
        finally:
            self.kube.delete_lease(namespace, LOCK_NAME, (lease.get("metadata") or {}).get("uid"))

    def _jobs(self, jobs: str):
        def active():
            found = upgrade_plan.active_pods(self.kube.pods(self.name, label_selector=jobs))
            for name in found:
                if name not in self.result["waited_for"]:
                    self.result["waited_for"].append(name)
            return ", ".join(found)
        self._wait("the pods matching %s have not finished" % jobs, self.opt.get("wait_for_jobs_timeout", 3600),
                   self.opt.get("poll_interval", 10), active,
                   "let them finish, or raise driver_upgrade_wait_for_jobs_timeout", watch=("pods", self.name, "", jobs))

    def _delete_gpu_pods(self):
        pods = self.kube.pods(self.name)
        uids = {_name(p): (p.get("metadata") or {}).get("uid") for p in pods}
        names = ["%s/%s" % (p["namespace"], p["name"]) for p in upgrade_plan.gpu_pods(pods)]
        self._delete(names, uids, "deleted", "GPU pods deleted but")

    def _delete(self, names: list, uids: dict, key: str, what: str) -> bool:
        """Deletes the pods ``names`` (recorded in result[key]) and waits until they are gone;
        False when there were none (or in check mode)."""
        for name in names:
            self.result["changed"] = True
            self.result[key].append(name)
            if not self.check:
                self.kube.delete_pod(*name.split("/", 1))
        if not names or self.check:
            return False
        self._gone(names, self.opt.get("pod_deletion_timeout", 300), what, uids,
                   "look at their finalizers and termination grace, or raise driver_upgrade_pod_deletion_timeout")
        return True

    def _drain(self):
        pods = self.kube.pods(self.name, label_selector=selector(DRAIN_SKIP_LABEL + "!=true",
                                                                 self.opt.get("drain_selector") or ""))
        uids = {_name(p): (p.get("metadata") or {}).get("uid") for p in pods}
        names, problems = drain_pods(pods, self.opt.get("delete_emptydir_data", True), self.opt.get("force", False))
        if problems:
            raise UpgradeError("cannot drain %s: %s" % (self.name, "; ".join(problems)))
        if self.check:  # (the GPU pods the deletion step would have deleted are not there to drain)
            names = [n for n in names if n not in self.result["deleted"]]
        if not names:
            return
        self.result["changed"] = True
        if self.check:
            self.result["evicted"] = names
            return
        pending, tries = list(names), 0
        refusals = {}
        while pending:
            for name in list(pending):
                try:
                    self.kube.evict_pod(*name.split("/", 1))
                except KubeError as exc:
                    if exc.status != 429:
                        raise
                    self.result["refused"][name] = self.result["refused"].get(name, 0) + 1
                    refusals[name] = exc.reason or str(exc)
                    continue
                pending.remove(name)
                self.result["evicted"].append(name)
            if not pending:
                break
            tries += 1
            if tries > self.opt.get("drain_retries", 30):
                raise UpgradeError(
                    "a PodDisruptionBudget refused the eviction of %s %d times over %ds (%s); let the budget allow "
                    "it (more replicas on other nodes), or raise driver_upgrade_drain_retries / "
                    "driver_upgrade_drain_delay" % (", ".join(pending), tries, tries * self.opt.get("drain_delay", 10),
                                                    "; ".join(sorted(set(refusals[n] for n in pending)))))
            self.sleep(self.opt.get("drain_delay", 10))
        self._gone(names, self.opt.get("drain_timeout", 300), "evicted pods", uids,
                   "look at their finalizers and termination grace, or raise driver_upgrade_drain_timeout")

    # -- restarted
    def restarted(self):
        self._read()
        self.result["previous_state"] = self.state
        if rank(self.state) >= rank("validation-required"):
            return self.result
        if self.state != "pod-restart-required":
            raise UpgradeError("the node is at %s, not pod-restart-required: its operands are restarted after it was "
                               "drained (state=drained) and its driver upgraded" % (self.state or "no upgrade state"))
        pods = self.kube.pods(self.name, namespace=self.opt.get("operand_namespace") or "",
                              label_selector=self.opt.get("operand_selector") or "")
        uids = {_name(p): (p.get("metadata") or {}).get("uid") for p in pods}
        if not pods:
            self.warnings.append("no operand pods on %s in namespace %s match %s: none restarted (check "
                                 "driver_upgrade_namespace and driver_upgrade_operand_selector)" % (
                                     self.name, self.opt.get("operand_namespace") or "(all)",
                                     self.opt.get("operand_selector") or "(everything)"))
        if self._delete(sorted(uids), uids, "restarted", "operand pods deleted but"):
            # as the operator does before validation: their controllers' new pods Running and Ready
            owners = {controller(p) for p in pods} - {None}
            self._wait("the operands did not come back Ready on %s" % self.name,
                       self.opt.get("pod_deletion_timeout", 300), 2,
                       lambda: ", ".join(not_ready(self.kube.pods(
                           self.name, namespace=self.opt.get("operand_namespace") or "",
                           label_selector=self.opt.get("operand_selector") or ""), owners, set(uids.values()))),
                       "look at the pods' events (the new driver may not load), or raise driver_upgrade_pod_deletion_timeout",
                       watch=("pods", self.name, self.opt.get("operand_namespace") or "",
                              self.opt.get("operand_selector") or ""))
        self._mark("validation-required")
        return self.result

    # -- done
    def done(self):
        node = self._read()
        previous = self.state
        if self.opt.get("restart_operands") and self.state == "pod-restart-required":
            # (no validation between: the operands' restart and the uncordon in one call)
            self.restarted()
            node = self.node
        self.result["previous_state"] = previous
        meta = node.get("metadata") or {}
        keep = (meta.get("annotations") or {}).get(CORDONED_ANNOTATION) == "true"
        self.result["keep_cordoned"] = keep
        if self.state == "upgrade-done":  # (a cordon made since is not the upgrade's to lift)
            return self.result
        self._mark("uncordon-required")
        # one patch: upgrade-done, the maintenance's record gone, and uncordoned unless an admin had
        # cordoned the node before
        ended = {upgrade_plan.MAINTENANCE_ANNOTATION: None}
        if keep:
            self._mark("upgrade-done", {"metadata": {"annotations": dict(ended, **{CORDONED_ANNOTATION: None})}})
        else:
            self._mark("upgrade-done", {"spec": {"unschedulable": False}, "metadata": {"annotations": ended}})
        return self.result

    # -- failed
    def failed(self):
        self._read()
        self.result["previous_state"] = self.state
        # a node the upgrade never took out of service (it stopped before the cordon) is left as it is
        if self.state in upgrade_plan.IN_PROGRESS:
            self._mark(upgrade_plan.FAILED)
        return self.result

    def run(self, step: str) -> dict:
        if step not in STEPS:
            raise UpgradeError("step must be one of %s, got %r" % (", ".join(STEPS), step))
        result = getattr(self, step)()
        result["state"] = self.state
        result["msg"] = summary(step, result)
        return result


def summary(step: str, result: dict) -> str:
    """One line for the job log."""
    if result.get("skip_label"):
        return "%s is labelled %s=true: left alone" % (result["node"], SKIP_LABEL)
    parts = []
    if result.get("waited_for"):
        parts.append("waited for %d job pod(s)" % len(result["waited_for"]))
    if result.get("deleted"):
        parts.append("deleted %d GPU pod(s)" % len(result["deleted"]))
    if result.get("evicted"):
        refused = sum(result.get("refused", {}).values())
        parts.append("evicted %d pod(s)%s" % (len(result["evicted"]), (
            " (PodDisruptionBudgets refused %d eviction(s) first)" % refused) if refused else ""))
    if result.get("restarted"):
        parts.append("restarted %d operand pod(s)" % len(result["restarted"]))
    states = " -> ".join(result.get("states") or []) or "unchanged"
    return "%s %s: %s%s" % (result["node"], step, states, ("; " + ", ".join(parts)) if parts else "")

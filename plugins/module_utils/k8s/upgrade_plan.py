# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rolling driver upgrades as NVIDIA's GPU Operator runs them (its upgrade state machine and
node labels, REFERENCE.md section 7), planned in waves: a canary first, then the rest, never more
nodes out of service than ``max_unavailable`` (nodes already unavailable for other reasons
included) nor more upgrading at once than ``max_parallel``. Pure functions: the nodes (name,
labels, whether Ready and schedulable, the driver they run) in, the plan out.

The per-node label ``nvidia.com/gpu-driver-upgrade-state`` goes through STATES; a node labelled
``nvidia.com/gpu-driver-upgrade.skip=true`` is left alone; pods labelled
``nvidia.com/gpu-driver-upgrade-drain.skip=true`` are never drained. A node found in an
intermediate state is an upgrade a previous run did not finish: it is resumed first."""

from __future__ import annotations

__metaclass__ = type

import math
import re

from ansible_collections.gpuops.nvidia.plugins.module_utils.report import drift

STATE_LABEL = "nvidia.com/gpu-driver-upgrade-state"
SKIP_LABEL = "nvidia.com/gpu-driver-upgrade.skip"
DRAIN_SKIP_LABEL = "nvidia.com/gpu-driver-upgrade-drain.skip"
# the GPU Operator's states, in the order a node goes through them
STATES = ("upgrade-required", "cordon-required", "wait-for-jobs-required", "pod-deletion-required",
          "drain-required", "pod-restart-required", "validation-required", "uncordon-required",
          "upgrade-done")
FAILED = "upgrade-failed"
IN_PROGRESS = STATES[1:-1]
# which maintenance took the node through those states (the node_upgrade module writes it when it
# starts one): a run resumes and retries only its own kind; none written is a driver upgrade
MAINTENANCE_ANNOTATION = "gpuops.nvidia/maintenance"
# a remediation's state (remediation_plan.STATE_LABEL, which imports this module)
REMEDIATION_STATE_LABEL = "gpuops.nvidia/remediation-state"
MAINTENANCE_PLAYBOOKS = {"driver": "gpuops.nvidia.upgrade", "allocation": "gpuops.nvidia.allocation",
                         "remediation": "gpuops.nvidia.remediate"}


class PlanError(ValueError):
    """An input the plan cannot take (says which and how to fix it)."""


def scaled(value, total: int, name: str = "max_unavailable") -> int:
    """A count or a percentage of total, rounded up as the operator rounds maxUnavailable
    (intstr.GetScaledValueFromIntOrPercent with roundUp)."""
    text = str(value).strip()
    try:
        if text.endswith("%"):
            percent = float(text[:-1])
            if percent < 0:
                raise ValueError
            return int(math.ceil(total * percent / 100.0))
        count = int(text)
        if count < 0:
            raise ValueError
        return count
    except ValueError:
        raise PlanError("%s must be a count (2) or a percentage of the GPU nodes (25%%), got %r" % (name, value))


def at_target(driver: str | None, target: str | None) -> bool:
    """Whether a node running driver ``driver`` has the target: the exact version, or any version
    of the target branch ('580' takes 580.95.05)."""
    if not target or not driver:
        return False
    return driver == target or ("." not in target and driver.split(".")[0] == target)


def node_view(node: dict, target: str | None) -> dict:
    """What the plan needs of one node: {name, state, skip, available, at_target}.

    node: {name, labels, ready, unschedulable, driver} (driver: the version it runs, if known)."""
    labels = node.get("labels") or {}
    state = labels.get(STATE_LABEL) or ""
    return {
        "name": node["name"],
        "state": state,
        "maintenance": (node.get("annotations") or {}).get(MAINTENANCE_ANNOTATION) or "driver",
        "skip": labels.get(SKIP_LABEL) == "true",
        # quarantined by a remediation for its RMA (remediation_plan.STATE_LABEL): a person brings it back
        "quarantined": labels.get(REMEDIATION_STATE_LABEL) == "quarantined",
        "available": bool(node.get("ready", True)) and not node.get("unschedulable"),
        # (a plan of another maintenance says itself whether the node is where it should be)
        "at_target": node["at_target"] if "at_target" in node else at_target(node.get("driver"), target),
    }


def _canary(pending: list, canary) -> list:
    if isinstance(canary, int) or (isinstance(canary, str) and canary.isdigit()):
        return sorted(pending)[:int(canary)]
    names = list(canary or [])
    return [name for name in sorted(pending) if name in names]


def plan(nodes: list, target: str | None, max_unavailable="25%", max_parallel: int = 1, canary=1,
         retry_failed: bool = False, members=None, canary_group_missing: bool = False, kind: str = "driver") -> dict:
    """The waves of an upgrade to driver ``target``.

    canary: a count (the first nodes by name) or the names of the canary group; its waves come
    first and the run holds after them until they are validated. members: the nodes this run may
    upgrade (its inventory's); the other GPU nodes only count for max_unavailable. Returns {slots, max_unavailable,
    resume, canary, waves (after the canary), skipped, done, failed, unavailable, problems}, every
    list of node names sorted; problems stop the run before any node changes."""
    views = [node_view(node, target) for node in nodes]
    total = len(views)
    limit = scaled(max_unavailable, total)
    parallel = int(max_parallel)
    if parallel < 0:
        raise PlanError("max_parallel must be 0 (no limit) or a positive count, got %r" % max_parallel)
    if limit < 1:
        raise PlanError("max_unavailable %r of %d GPU node(s) is 0 nodes: no node could ever be upgraded; "
                        "allow at least one (1, or a percentage that is at least one node)" % (max_unavailable, total))
    skipped = sorted(v["name"] for v in views if v["skip"] and (members is None or v["name"] in members))
    considered = [v for v in views if not v["skip"] and (members is None or v["name"] in members)]
    # (a node another kind of maintenance left midway or failed is that maintenance's to finish)
    # (a node quarantined for its RMA is left alone, as a skipped one: it counts as out of service)
    quarantined = sorted(v["name"] for v in considered if v["quarantined"] and kind != "remediation")
    considered = [v for v in considered if v["name"] not in quarantined]
    other = sorted(v["name"] for v in considered
                   if (v["state"] in IN_PROGRESS or v["state"] == FAILED) and v["maintenance"] != kind)
    others = {v["name"]: v["maintenance"] for v in considered if v["name"] in other}
    considered = [v for v in considered if v["name"] not in other]
    done = sorted(v["name"] for v in considered if v["at_target"] and v["state"] in ("", STATES[-1]))
    failed = sorted(v["name"] for v in considered if v["state"] == FAILED)
    resume = sorted(v["name"] for v in considered if v["state"] in IN_PROGRESS)
    pending = sorted(v["name"] for v in considered
                     if v["name"] not in done and v["name"] not in resume and (v["state"] != FAILED or retry_failed))
    # nodes out of service for another reason (NotReady, cordoned by someone) count against
    # max_unavailable, as the operator counts them; those among them that need the upgrade take it
    # in the first wave after the canary without taking a slot (an admin's cordon stays)
    unavailable = sorted(v["name"] for v in views if not v["available"] and v["name"] not in resume)
    free = [name for name in pending if name in unavailable]
    # (the nodes resumed first hold slots of their own until they are done)
    slots = limit - len(unavailable)
    if parallel:
        slots = min(slots, parallel)
    problems = []
    for name in other:
        if others[name] == "remediation":
            problems.append("%s is midway through (or failed in) a remediation (label %s): the alert, still firing, "
                            "resumes it, or run the playbook %s with it; then run this one again"
                            % (name, STATE_LABEL, MAINTENANCE_PLAYBOOKS["remediation"]))
            continue
        problems.append("%s is midway through (or failed in) another maintenance, a %s (label %s): finish it with the "
                        "playbook %s first" % (name, "GPU allocation switch" if others[name] == "allocation"
                                               else "driver upgrade", STATE_LABEL,
                                               MAINTENANCE_PLAYBOOKS.get(others[name], others[name])))
    if failed and not retry_failed:
        problems.append("node(s) %s are in %s from an earlier run: look at why (the label stays until a run "
                        "succeeds), then run again with gpuops_upgrade_retry_failed: true" % (", ".join(failed), FAILED))
    if slots < 1 and [name for name in pending if name not in free]:
        problems.append("no node can be taken out of service: %d GPU node(s) are unavailable already (%s) and "
                        "max_unavailable allows %d; bring them back or raise max_unavailable"
                        % (len(unavailable), ", ".join(unavailable), limit))
    if members is not None:
        unknown = sorted(set(members) - {v["name"] for v in views})
        if unknown:
            problems.append("%s: not a GPU node of the cluster (no Node of that name, or without the GPU node label); "
                            "set driver_upgrade_node_name (or node_labels_node_name) to the host's Kubernetes node "
                            "name, or run the labels stage first" % ", ".join(unknown))
    if isinstance(canary, (list, tuple)) and canary_group_missing:
        problems.append("the canary group has no GPU node of this run: check the group name in gpuops_upgrade_canary")
    canaries = _canary([name for name in pending if name not in free], canary)
    rest = [name for name in pending if name not in canaries and name not in free]
    size = max(slots, 1)
    waves = [rest[i:i + size] for i in range(0, len(rest), size)]
    if free:
        waves = [free + waves[0]] + waves[1:] if waves else [free]
    return {
        "target": target,
        "total": total,
        "max_unavailable": limit,
        "slots": slots,
        "resume": resume,
        "canary": [canaries[i:i + size] for i in range(0, len(canaries), size)],
        "waves": waves,
        "skipped": skipped,
        "quarantined": quarantined,
        "done": done,
        "failed": failed,
        "unavailable": unavailable,
        "problems": problems,
    }


def play_inputs(hosts: list, node_names: list, preflight: list | None = None, canary=1, phase: str = "all",
                groups: dict | None = None) -> dict:
    """The plan's inputs from the playbook's play: ``hosts`` (its inventory hosts) with their
    Kubernetes ``node_names`` and driver pre-flight results (``preflight``, in the same order;
    missing: none); ``canary``, the playbook's setting - a count of nodes or an inventory group's
    name (none in phase ``rest``: the canary ran in a job of its own); ``groups``, the inventory's.

    Returns {members (the nodes this run may upgrade), drivers (node -> its pre-flight result),
    canary (a count, or the node names of the group's hosts in the play), canary_group_missing}."""
    members = list(node_names)
    if len(members) != len(hosts):
        raise PlanError("%d host(s) but %d node name(s)" % (len(hosts), len(members)))
    results = list(preflight or [])
    drivers = {name: results[i] if i < len(results) else {} for i, name in enumerate(members)}
    setting = "0" if phase == "rest" else str(1 if canary is None else canary).strip()
    if re.match(r"^[0-9]+$", setting):
        return {"members": members, "drivers": drivers, "canary": int(setting), "canary_group_missing": False}
    node_of = dict(zip(hosts, members))
    names = [node_of[host] for host in (groups or {}).get(setting) or [] if host in node_of]
    return {"members": members, "drivers": drivers, "canary": names, "canary_group_missing": not names}


def play_plan(node_objects: list, target: str | None, hosts: list, node_names: list, preflight: list | None = None,
              canary=1, phase: str = "all", groups: dict | None = None, max_unavailable="25%", max_parallel: int = 1,
              retry_failed: bool = False) -> dict:
    """plan() for the playbook's play: its nodes from the cluster's Node objects (the driver each
    runs from its host's pre-flight result, else GFD's label), its inputs from play_inputs()."""
    inputs = play_inputs(hosts, node_names, preflight, canary=canary, phase=phase, groups=groups)
    return plan(from_node_objects(node_objects, drivers=inputs["drivers"]), target, max_unavailable=max_unavailable,
                max_parallel=max_parallel, canary=inputs["canary"], retry_failed=retry_failed,
                members=inputs["members"], canary_group_missing=inputs["canary_group_missing"])


def lines(plan_result: dict, policy: dict | None = None) -> list:
    """The plan as the playbook shows it: the target and slots, the nodes resumed, the canary's and
    the rest's waves, the nodes left out and why, then what each node goes through (steps(policy))."""
    out = ["%s; %d GPU node(s), max_unavailable %d, %d at once"
           % (plan_result.get("title") or "target driver %s" % plan_result["target"], plan_result["total"],
              plan_result["max_unavailable"], plan_result["slots"])]
    out += [("switch %s: %s -> %s" % (name, change[0], change[1])) if change[0] != change[1]
            else "retry %s: %s already, validate and uncordon" % (name, change[1])
            for name, change in sorted((plan_result.get("changes") or {}).items())]
    if plan_result["resume"]:
        out.append("resume (left midway by an earlier run): " + ", ".join(plan_result["resume"]))
    out += ["canary: " + ", ".join(wave) for wave in plan_result["canary"]]
    out += ["wave: " + ", ".join(wave) for wave in plan_result["waves"]]
    for key, what in (("done", "done already"), ("skipped", "skipped (%s=true)" % SKIP_LABEL),
                      ("quarantined", "quarantined for an RMA, left alone until a person brings it back"),
                      ("unavailable", "unavailable for other reasons")):
        if plan_result.get(key):
            out.append("%s: %s" % (what, ", ".join(plan_result[key])))
    out.append("each node, as its label %s says:" % STATE_LABEL)
    return out + ["  %s: %s" % step for step in steps(policy or {})]


def steps(policy: dict) -> list:
    """What each node goes through, as the operator's states name it, for check mode's listing.

    policy: {wait_for_jobs (pod selector or ''), drain (bool), reboot (bool)}."""
    out = [("cordon-required", "cordon the node")]
    if policy.get("wait_for_jobs"):
        out.append(("wait-for-jobs-required", "wait for the pods matching %s to finish (%ss at most)"
                    % (policy["wait_for_jobs"], policy.get("wait_timeout", 0))))
    out.append(("pod-deletion-required", "delete the pods that use GPUs (not those labelled %s=true)" % DRAIN_SKIP_LABEL))
    if policy.get("drain"):
        out.append(("drain-required", "drain the node, PodDisruptionBudgets respected (retried while they "
                                      "refuse), pods labelled %s=true kept" % DRAIN_SKIP_LABEL))
    out.append(("pod-restart-required", policy.get("action") or "upgrade the driver, then %s" % (
        "reboot the node" if policy.get("reboot") else "reload its kernel modules")))
    out.append(("validation-required", "validate the node (driver, toolkit, a CUDA workload, allocatable GPUs)"))
    out.append(("uncordon-required", "uncordon the node"))
    out.append((STATES[-1], "done"))
    return out


# ---- the GPU allocation switch (playbooks/allocation.yml), through the same node machinery ---

# the node labels that deploy each allocator on a node (the node_labels role writes them)
ALLOCATION_LABELS = dict(drift.ALLOCATORS)


def allocation_of(labels: dict | None) -> str:
    """The allocator a node's labels deploy: device-plugin, dra, both or none."""
    found = drift.allocators_on(labels)
    return found[0] if len(found) == 1 else ("both" if found else "none")


def allocation_play_plan(node_objects: list, hosts: list, node_names: list, allocations: list,
                         max_unavailable="25%", max_parallel: int = 1, retry_failed: bool = False) -> dict:
    """The waves of a GPU allocation switch: the play's nodes whose labels deploy another allocator
    than their host's gpu_allocation (``allocations``, in the order of ``hosts``) go out of service
    through the upgrade's states, never more than max_unavailable GPU nodes at once (nodes
    unavailable for other reasons counted), no canary. plan()'s result with title, changes ({node:
    [now, wanted]} of the nodes it switches) and the problems of this kind of run added: an unknown
    gpu_allocation, and a node midway through another maintenance (its allocation already as
    asked: a driver upgrade a run left midway, which the upgrade playbook must finish)."""
    inputs = play_inputs(hosts, node_names, canary=0)
    if len(allocations) != len(hosts):
        raise PlanError("%d host(s) but %d gpu_allocation value(s)" % (len(hosts), len(allocations)))
    wanted = dict(zip(inputs["members"], [str(a) for a in allocations]))
    unknown = sorted("%s (%s)" % (name, mode) for name, mode in wanted.items() if mode not in ALLOCATION_LABELS)
    if unknown:
        raise PlanError("gpu_allocation must be device-plugin or dra; %s: set it to one of them" % ", ".join(unknown))
    nodes = from_node_objects(node_objects)
    now = {}
    for node in nodes:
        now[node["name"]] = allocation_of(node["labels"])
        node["at_target"] = now[node["name"]] == wanted.get(node["name"])
    result = plan(nodes, None, max_unavailable=max_unavailable, max_parallel=max_parallel, canary=0,
                  retry_failed=retry_failed, members=inputs["members"], kind="allocation")
    # (a failed switch is retried with this playbook's variable)
    result["problems"] = [p.replace("gpuops_upgrade_retry_failed", "gpuops_allocation_retry_failed")
                          for p in result["problems"]]
    moving = result["resume"] + [name for wave in result["waves"] for name in wave]
    # the node_labels role never overwrites an admin's "false" nor a MIG change's "paused-*": a switch
    # to an allocator the node holds so would drain it for nothing
    labels_of = {node["name"]: node["labels"] for node in nodes}
    for name in moving:
        value = (labels_of.get(name) or {}).get(ALLOCATION_LABELS.get(wanted.get(name)), "")
        if value == "false" or value.startswith("paused"):
            result["problems"].append(
                "%s: its label %s is %r (%s), which the switch does not overwrite: %s, then switch"
                % (name, ALLOCATION_LABELS[wanted[name]], value,
                   "an admin opted the node out" if value == "false" else "a MIG change is in progress",
                   "remove that label if the node is to run it" if value == "false"
                   else "let the MIG change finish (site.yml --tags mig)"))
    result["changes"] = {name: [now.get(name, "none"), wanted[name]] for name in moving if name in wanted}
    result["title"] = "GPU allocation switch"
    return result


def simulate(plan_result: dict, minutes_per_node: float = 1.0, canary_hold: float = 0.0) -> dict:
    """Run the plan on a clock, every node of a wave out of service for minutes_per_node and the
    waves one after another (the canary held canary_hold minutes after its waves). Returns the
    waves, the most nodes unavailable at any moment (those unavailable for other reasons included),
    the GPU-node-minutes the upgrade took out of service, the least it could (each node it took out
    once), and the wall time."""
    base = set(plan_result["unavailable"])
    waves = ([plan_result["resume"]] if plan_result["resume"] else []) + plan_result["canary"] + plan_result["waves"]
    peak = max([len(base | set(wave)) for wave in waves] or [len(base)])
    taken = [name for wave in waves for name in wave if name not in base]
    wall = len(waves) * minutes_per_node + (canary_hold if plan_result["canary"] else 0)
    return {"waves": len(waves), "peak_unavailable": peak, "nodes": sum(len(wave) for wave in waves),
            "node_minutes": len(taken) * minutes_per_node, "least_node_minutes": len(taken) * minutes_per_node,
            "wall_minutes": wall}


# ---- what the per-node steps read ------------------------------------------------------------

def _requests_gpu(pod: dict) -> bool:
    # (a pod with ResourceClaims holds devices a DRA driver allocated: NVIDIA's DRA driver's GPUs)
    if (pod.get("spec") or {}).get("resourceClaims"):
        return True
    for container in ((pod.get("spec") or {}).get("containers") or []) + ((pod.get("spec") or {}).get("initContainers") or []):
        resources = container.get("resources") or {}
        for kind in ("limits", "requests"):
            if any(name.startswith("nvidia.com/") for name in (resources.get(kind) or {})):
                return True
    return False


def gpu_pods(pods: list, include_skipped: bool = False) -> list:
    """The pods the pod-deletion step deletes: running or pending pods that ask for an NVIDIA
    resource or hold ResourceClaims, not owned by a DaemonSet, not labelled DRAIN_SKIP_LABEL=true
    (with include_skipped, those too: a GPU allocation switch cannot leave them). [{name, namespace}]."""
    found = []
    for pod in pods or []:
        meta = pod.get("metadata") or {}
        if (meta.get("labels") or {}).get(DRAIN_SKIP_LABEL) == "true" and not include_skipped:
            continue
        if any(owner.get("kind") == "DaemonSet" for owner in meta.get("ownerReferences") or []):
            continue
        if (pod.get("status") or {}).get("phase") in ("Succeeded", "Failed"):
            continue
        if _requests_gpu(pod):
            found.append({"name": meta.get("name"), "namespace": meta.get("namespace")})
    return found


def active_pods(pods: list) -> list:
    """Names of the pods not finished yet (the wait-for-jobs step waits for none)."""
    return sorted("%s/%s" % ((p.get("metadata") or {}).get("namespace"), (p.get("metadata") or {}).get("name"))
                  for p in pods or [] if (p.get("status") or {}).get("phase") not in ("Succeeded", "Failed"))


def node_available(node: dict) -> bool:
    """Ready, schedulable, and in no maintenance's states (a node a maintenance has claimed, at
    cordon-required, is out already: the claim and the cordon are two writes)."""
    spec, status = node.get("spec") or {}, node.get("status") or {}
    ready = any(c.get("type") == "Ready" and c.get("status") == "True" for c in status.get("conditions") or [])
    state = ((node.get("metadata") or {}).get("labels") or {}).get(STATE_LABEL, "")
    return ready and not spec.get("unschedulable") and state not in IN_PROGRESS


def slot(nodes: list, me: str, max_unavailable, wave=()) -> dict:
    """Whether node ``me`` may go out of service now: the GPU nodes unavailable other than itself
    (NotReady or cordoned, an upgrade in progress included) must be fewer than max_unavailable.
    With ``wave`` (the node names going out of service together, ``me`` among them) the whole wave
    must fit: the unavailable nodes outside it and every node of it at most max_unavailable, so
    nodes that look at the same moment never take more slots between them than there are, and a
    wave either goes or waits as one. Returns {free, limit, unavailable (names)}."""
    limit = scaled(max_unavailable, len(nodes))
    wave = set(wave or ()) | {me} if wave else set()
    names = {(n.get("metadata") or {}).get("name") for n in nodes}
    others = sorted((n.get("metadata") or {}).get("name") for n in nodes
                    if (n.get("metadata") or {}).get("name") not in (wave or {me}) and not node_available(n))
    if wave:
        return {"free": len(others) + len(wave & names) <= limit, "limit": limit, "unavailable": others}
    return {"free": len(others) < limit, "limit": limit, "unavailable": others}


def from_node_objects(nodes: list, driver_label: str = "nvidia.com/cuda.driver-version.full",
                      drivers: dict | None = None) -> list:
    """The plan's node dicts from Node objects: the driver each runs from ``drivers`` (node name ->
    the version the host itself reports, or the driver role's pre-flight result that holds it, for
    the run's own nodes), else GFD's label."""
    out = []
    versions = {}
    for name, value in (drivers or {}).items():
        if isinstance(value, dict):  # a pre-flight result: its driver's version, when it has one
            value = (value.get("driver") or {}).get("version")
        versions[name] = value
    for node in nodes or []:
        meta = node.get("metadata") or {}
        labels = meta.get("labels") or {}
        conditions = (node.get("status") or {}).get("conditions") or []
        out.append({"name": meta.get("name"), "labels": labels, "annotations": meta.get("annotations") or {},
                    "ready": any(c.get("type") == "Ready" and c.get("status") == "True" for c in conditions),
                    "unschedulable": bool((node.get("spec") or {}).get("unschedulable")),
                    "driver": versions.get(meta.get("name")) or labels.get(driver_label)})
    return out


def tainted(nodes: list, key: str) -> list:
    """Names of the Node objects carrying a taint with this key (the canary's, say)."""
    return sorted((n.get("metadata") or {}).get("name") for n in nodes or []
                  if any(t.get("key") == key for t in (n.get("spec") or {}).get("taints") or []))


def order(plan_result: dict, phase: str = "all") -> list:
    """[[group, node]] in the order the playbook upgrades them: the nodes an earlier run left midway
    and the canary first (gpuops_upgrade_first), then the waves (gpuops_upgrade_rest). In phase
    ``rest`` (after the canary's own run) the nodes left midway go first among the rest."""
    canary = [name for wave in plan_result["canary"] for name in wave]
    rest = [name for wave in plan_result["waves"] for name in wave]
    if phase == "rest":
        return [["gpuops_upgrade_rest", name] for name in plan_result["resume"] + canary + rest]
    return ([["gpuops_upgrade_first", name] for name in plan_result["resume"] + canary]
            + [["gpuops_upgrade_rest", name] for name in rest])


def batches(plan_result: dict, phase: str = "all") -> dict:
    """The playbook's batches (its plays' serial) for each group of order(): the planned waves'
    sizes, so a batch never takes out of service more nodes than the plan found slots for (the
    nodes left midway are a batch of their own, first)."""
    resume = [len(plan_result["resume"])] if plan_result["resume"] else []
    canary = [len(wave) for wave in plan_result["canary"]]
    rest = [len(wave) for wave in plan_result["waves"]]
    if phase == "rest":
        return {"gpuops_upgrade_first": [], "gpuops_upgrade_rest": resume + canary + rest}
    return {"gpuops_upgrade_first": resume + canary, "gpuops_upgrade_rest": rest}

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Applying a MIG config: plan, destroy and change modes, handle mode changes that wait for a
GPU reset, read the node again, plan and create the instances, read back. Shared by the
gpuops.nvidia.mig module and the boot-time applier the mig role installs (which runs this file
with mig_config, mig_plan and mig_nvml next to it, without Ansible).

NVML must be open (nvmlInit) around every call here."""

from __future__ import annotations

import json

__metaclass__ = type

try:
    from ansible_collections.gpuops.nvidia.plugins.module_utils import mig_config, mig_nvml, mig_plan
except ImportError:  # the boot-time applier: the three files beside this one
    import mig_config  # type: ignore[no-redef]
    import mig_nvml  # type: ignore[no-redef]
    import mig_plan  # type: ignore[no-redef]


def read_record(path):
    """The MIG profiles recorded on earlier runs ({PCI device id: profiles}); {} without one."""
    if not path:
        return {}
    try:
        with open(path, encoding="utf-8") as handle:
            data = json.load(handle)
        return data if isinstance(data, dict) else {}
    except (OSError, ValueError):
        return {}


class ApplyError(Exception):
    """The config cannot be applied or a step failed; .result says what was done."""

    def __init__(self, message, result):
        Exception.__init__(self, message)
        self.message = message
        self.result = result


def generated(gpus, name):
    """The usual named layouts for these GPUs (mig_plan.named_layouts). While some MIG-capable
    GPUs report no profiles yet (MIG off, nothing recorded), a name the layouts do not have yet
    turns MIG on for those GPUs: the layout is decided once they report their profiles."""
    document = mig_plan.named_layouts(gpus)
    unknown = [g["index"] for g in gpus if g.get("mig_capable") and g.get("profiles") is None]
    if name not in document["mig-configs"] and unknown and name != "all-disabled":
        document["mig-configs"][name] = [{"devices": unknown, "mig-enabled": True, "mig-devices": {}}]
    return document


def make_plan(document, name, gpus):
    """(plan, assignment); ApplyError for a config that does not fit the node's GPUs. A document
    of None means the usual named layouts, generated from the GPUs."""
    if document is None:
        document = generated(gpus, name)
    try:
        entries = mig_config.select(document, name)
        assignment = mig_config.assign(name, entries, gpus)
    except mig_config.ConfigError as exc:
        raise ApplyError("MIG config: %s" % exc, {"changed": False})
    return mig_plan.plan(gpus, assignment, name), assignment


def devices_of(indexes):
    return [d for i in indexes for d in mig_nvml.mig_devices(i)]


def plan_only(document, name, record=None):
    """The plan without changing anything: (result, record of the profiles seen)."""
    gpus, record = mig_nvml.read_node(record)
    first, assignment = make_plan(document, name, gpus)
    result = {"changed": False, "matches": first["matches"], "plan": first, "done": [], "not_done": [],
              "reset_required": [], "mig_devices": devices_of(sorted(assignment)), "converged": first["matches"],
              "diff": mig_plan.diff_text(first)}
    if first["errors"]:
        raise ApplyError("MIG config %s cannot be applied; nothing was changed: %s" % (
            name, "; ".join(first["errors"])), result)
    return result, record


def apply(document, name, record=None, reset=None):
    """Applies config `name`. `reset(gpu)` resets a GPU whose mode change waits and returns (ok,
    output), or None when resets are not allowed. Returns (result, record); raises ApplyError
    with the partial result when a step fails or the layout does not fit."""
    result, record = plan_only(document, name, record)
    first = result["plan"]
    if first["matches"]:
        return result, record
    gpus, record = mig_nvml.read_node(record)
    selected = sorted(p["gpu"] for p in first["gpus"])
    applier = mig_nvml.Applier()
    unvalidated = {p["gpu"] for p in first["gpus"] if not p["validated"]}
    mode_before = {g["index"]: g["mig_current"] for g in gpus}

    def fail(exc, remaining):
        result["changed"] = bool(result["done"])
        result["not_done"] = remaining
        result["mig_devices"] = devices_of(selected)
        raise ApplyError("MIG config %s: %s. Done: %d step(s); not done: %d (see done / not_done); run again to "
                         "converge once the cause is fixed" % (name, exc.message, len(result["done"]), len(remaining)),
                         result)

    creating = ("create_gpu_instance", "create_compute_instance")
    # 1. destroy, and change modes
    first_steps = [s for s in first["steps"] if s["action"] not in creating]
    for i, step in enumerate(first_steps):
        try:
            result["done"].append(dict(step, **applier.run(step)))
        except mig_nvml.StepFailed as exc:
            fail(exc, first_steps[i:] + [s for s in first["steps"] if s["action"] in creating])
    # 2. mode changes that wait for a GPU reset
    by_index = {g["index"]: g for g in gpus}
    waiting = set()
    for gpu_index, status in sorted(applier.activation.items()):
        if status == 0:
            continue
        now = mig_nvml.read_gpu(gpu_index)
        item = {"gpu": gpu_index, "uuid": now["uuid"], "activation": mig_nvml.error_name(status),
                "processes": now["processes"]}
        if reset is not None and not now["processes"]:
            ok, output = reset(by_index[gpu_index])
            result["done"].append({"gpu": gpu_index, "action": "reset_gpu", "ok": ok, "output": output})
            now = mig_nvml.read_gpu(gpu_index)
            if ok and now["mig_current"] == now["mig_pending"]:
                continue
            item["reset_output"] = output
        waiting.add(gpu_index)
        result["reset_required"].append(item)
    # 3. read the node again and plan the creations (with the profiles of GPUs just enabled)
    gpus, record = mig_nvml.read_node(record)
    second, _assignment = make_plan(document, name, gpus)
    if second["errors"]:
        reverted = []
        for gpu_index in sorted(unvalidated):
            if not mode_before[gpu_index]:
                try:
                    applier.run({"gpu": gpu_index, "action": "set_mig_mode", "enabled": False})
                    reverted.append(gpu_index)
                except mig_nvml.StepFailed:
                    pass
        result["changed"] = True
        raise ApplyError("MIG config %s cannot be applied: %s. MIG mode was turned back off on GPU(s) %s" % (
            name, "; ".join(second["errors"]), ", ".join(map(str, reverted)) or "none"), result)
    creations = [s for s in second["steps"] if s["gpu"] not in waiting and s["action"] in creating]
    result["not_done"] = [s for s in second["steps"] if s["gpu"] in waiting]
    for i, step in enumerate(creations):
        try:
            result["done"].append(dict(step, **applier.run(step)))
        except mig_nvml.StepFailed as exc:
            fail(exc, creations[i:] + result["not_done"])
    gpus, record = mig_nvml.read_node(record)
    final, _assignment = make_plan(document, name, gpus)
    result["converged"] = final["matches"]
    result["changed"] = bool(result["done"])
    result["mig_devices"] = devices_of(selected)
    result["diff"]["after"] = mig_plan.diff_text(final)["before"]
    return result, record

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Applying a MIG config: plan, destroy and change modes, handle mode changes that wait for a
GPU reset, read the node again, plan and create the instances, read back. Shared by the
gpuops.nvidia.mig module (through mig/service.py) and the boot-time applier the mig role installs
(which runs this file with mig_config, mig_plan, mig_nvml, nvml_adapter and gpu_model next to it,
without Ansible). Runs no command: a GPU reset is the caller's `reset`.

NVML must be open (adapter.session()) around every call here."""

from __future__ import annotations

import os

__metaclass__ = type

if os.environ.get("GPUOPS_MIG_STANDALONE") == "1":  # the boot-time applier: the files beside this one
    import mig_config  # pylint: disable=import-error
    import mig_nvml  # pylint: disable=import-error
    import mig_plan  # pylint: disable=import-error
    import nvml_adapter as nvml  # pylint: disable=import-error
else:
    from ansible_collections.gpuops.nvidia.plugins.module_utils.mig import config as mig_config
    from ansible_collections.gpuops.nvidia.plugins.module_utils.nvml import mig as mig_nvml
    from ansible_collections.gpuops.nvidia.plugins.module_utils.mig import plan as mig_plan
    from ansible_collections.gpuops.nvidia.plugins.module_utils.nvml import adapter as nvml


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
    if unknown and name != "all-disabled":
        entries = document["mig-configs"].setdefault(name, [])
        try:
            covered = set(mig_config.assign(name, entries, gpus)) if entries else set()
        except mig_config.ConfigError:
            covered = set()
        rest = [i for i in unknown if i not in covered]
        if rest:
            entries.append({"devices": rest, "mig-enabled": True, "mig-devices": {}})
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


def devices_of(indexes, gpus=None):
    """The MIG devices of these GPUs; `gpus`: the node's facts read just now, if there are any."""
    by_index = {g["index"]: g for g in gpus or []}
    return [d for i in indexes for d in nvml.mig_devices(i, by_index.get(i))]


def plan_only(document, name, record=None):
    """The plan without changing anything: (result, record of the profiles seen)."""
    result, record, _gpus = _plan_node(document, name, record)
    return result, record


def _plan_node(document, name, record):
    """(result, record, the node's GPU facts) of planning config `name` on the node as it is."""
    try:
        gpus, record = mig_nvml.read_node(record)
    except nvml.NvmlError as exc:
        raise ApplyError("NVML failed while reading the GPUs: %s; nothing was changed" % exc, {"changed": False})
    first, assignment = make_plan(document, name, gpus)
    result = {"changed": False, "matches": first["matches"], "plan": first, "done": [], "not_done": [],
              "reset_required": [], "mig_devices": devices_of(sorted(assignment), gpus),
              "converged": first["matches"], "diff": mig_plan.diff_text(first)}
    if first["errors"]:
        raise ApplyError("MIG config %s cannot be applied; nothing was changed: %s" % (
            name, "; ".join(first["errors"])), result)
    return result, record, gpus


def apply(document, name, record=None, reset=None):
    """Applies config `name`. `reset(gpu)` resets a GPU whose mode change waits and returns (ok,
    output), or None when resets are not allowed. Returns (result, record); raises ApplyError
    with the partial result when a step fails or the layout does not fit."""
    result, record, gpus = _plan_node(document, name, record)
    if result["plan"]["matches"]:
        return result, record
    try:
        return _apply(document, name, record, reset, result, gpus)
    except nvml.NvmlError as exc:
        result["changed"] = bool(result["done"])
        raise ApplyError("MIG config %s: NVML failed: %s; done: %d step(s) (see done); run again to converge once "
                         "the cause is fixed" % (name, exc, len(result["done"])), result)


def _run(applier, steps, result, name, selected):
    """Runs steps in order, recording each; on a failure raises ApplyError naming what was not done."""
    for i, step in enumerate(steps):
        try:
            result["done"].append(dict(step, **applier.run(step)))
        except mig_nvml.StepFailed as exc:
            result["changed"] = bool(result["done"])
            result["not_done"] = steps[i:] + result["not_done"]
            try:
                result["mig_devices"] = devices_of(selected)
            except nvml.NvmlError:
                pass
            raise ApplyError("MIG config %s: %s. Done: %d step(s); not done: %d (see done / not_done); run again to "
                             "converge once the cause is fixed" % (name, exc.message, len(result["done"]),
                                                                   len(result["not_done"])), result)


def _replan(document, name, record, result):
    gpus, record = mig_nvml.read_node(record)
    try:
        plan, _assignment = make_plan(document, name, gpus)
    except ApplyError as exc:
        result["changed"] = bool(result["done"])
        raise ApplyError(exc.message, result)
    return gpus, record, plan


def _apply(document, name, record, reset, result, gpus):
    first = result["plan"]
    selected = sorted(p["gpu"] for p in first["gpus"])
    applier = mig_nvml.Applier()
    creating = ("create_gpu_instance", "create_compute_instance")
    # 0. GPUs whose profiles are not known yet: MIG on first, then check their layout, before any
    #    other GPU is touched; a layout that does not fit turns their MIG back off
    unvalidated = [p["gpu"] for p in first["gpus"] if not p["validated"]]
    wanted_mode = {s["gpu"]: s["enabled"] for s in first["steps"] if s["action"] == "set_mig_mode"}
    if unvalidated:
        mode_before = {g["index"]: g["mig_current"] for g in gpus}
        _run(applier, [s for s in first["steps"] if s["gpu"] in unvalidated and s["action"] == "set_mig_mode"],
             result, name, selected)
        gpus, record, first = _replan(document, name, record, result)
        errors = [e for p in first["gpus"] if p["gpu"] in unvalidated for e in p["errors"]] or first["errors"]
        if errors:
            reverted = []
            for gpu_index in unvalidated:
                if not mode_before[gpu_index]:
                    step = {"gpu": gpu_index, "action": "set_mig_mode", "enabled": False}
                    try:
                        result["done"].append(dict(step, **applier.run(step)))
                        reverted.append(gpu_index)
                    except mig_nvml.StepFailed:
                        pass
            result["changed"] = True
            raise ApplyError("MIG config %s cannot be applied: %s. Nothing else was changed; MIG mode was turned back "
                             "off on GPU(s) %s" % (name, "; ".join(errors), ", ".join(map(str, reverted)) or "none"),
                             result)
    # 1. destroy, and change modes, GPU by GPU (not again where step 0's change waits for a reset)
    held = {g for g in unvalidated if applier.activation.get(g, 0) != 0}
    _run(applier, [s for s in first["steps"] if s["action"] not in creating and s["gpu"] not in held],
         result, name, selected)
    # 2. mode changes that wait for a GPU reset
    by_index = {g["index"]: g for g in gpus}
    waiting = set()
    for gpu_index, status in sorted(applier.activation.items()):
        if status == 0:
            continue
        now = nvml.mig_gpu(gpu_index)
        if now["mig_current"] == wanted_mode.get(gpu_index, now["mig_pending"]):
            continue  # applied since (a GPU turned on in step 0, then reset); a refused change stays waiting
        item = {"gpu": gpu_index, "uuid": now["uuid"], "activation": mig_nvml.error_name(status),
                "processes": now["processes"]}
        if reset is not None and not now["processes"]:
            ok, output = reset(by_index[gpu_index])
            result["done"].append({"gpu": gpu_index, "action": "reset_gpu", "ok": ok, "output": output})
            now = nvml.mig_gpu(gpu_index)
            if ok and now["mig_current"] == wanted_mode.get(gpu_index, now["mig_pending"]):
                continue
            item["reset_output"] = output
        waiting.add(gpu_index)
        result["reset_required"].append(item)
    # 3. read the node again and carry out what is left (the creations) on the GPUs not waiting
    gpus, record, second = _replan(document, name, record, result)
    if second["errors"]:
        result["changed"] = True
        raise ApplyError("MIG config %s: after the mode changes the layout no longer fits: %s" % (
            name, "; ".join(second["errors"])), result)
    result["not_done"] = [s for s in second["steps"] if s["gpu"] in waiting]
    _run(applier, [s for s in second["steps"] if s["gpu"] not in waiting], result, name, selected)
    gpus, record, final = _replan(document, name, record, result)
    result["converged"] = final["matches"]
    result["changed"] = bool(result["done"])
    result["mig_devices"] = devices_of(selected, gpus)
    result["diff"]["after"] = mig_plan.diff_text(final)["before"]
    return result, record

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A node's MIG change in the cluster, as NVIDIA's MIG manager (k8s-mig-manager) does it, in node
labels: the layout wanted (``nvidia.com/mig.config``), the state of the change
(``nvidia.com/mig.config.state``: pending, rebooting, success, failed), and the GPU operands paused
for the change (their ``nvidia.com/gpu.deploy.<operand>`` labels set to ``paused-for-mig-change``)
and restored afterwards - exactly the labels that were paused, to exactly their values, so that
no ``paused-*`` value is left behind, also after a failure.

Unlike the MIG manager, what was paused is also recorded on the node (annotation
``gpuops.nvidia/mig.paused-operands``), so that a run that died midway is undone by the next one.

A GPU reset (a remediation) pauses the operands the same way, as its own reason (``reason``
``gpu-reset``: the value ``paused-for-gpu-reset``, the annotation
``gpuops.nvidia/gpu-reset.paused-operands``): nvidia-smi resets no GPU that DCGM or the device
plugin holds, and neither pause undoes the other's.

JSON patches guarded by test operations: a label someone changed meanwhile makes the patch fail
instead of being overwritten. Pure functions over plain data (Node and Pod objects as the API
returns them); no I/O."""

from __future__ import annotations

__metaclass__ = type

import json

from ansible_collections.gpuops.nvidia.plugins.module_utils.k8s.node_labels import DEPLOY_LABEL_PREFIX, OPERANDS, escape, json_record
from ansible_collections.gpuops.nvidia.plugins.module_utils.k8s.objects import pod_ready

CONFIG_LABEL = "nvidia.com/mig.config"
STATE_LABEL = "nvidia.com/mig.config.state"
STATES = ("pending", "rebooting", "success", "failed")
PAUSED = "paused-for-mig-change"
ANNOTATION = "gpuops.nvidia/mig.paused-operands"
# what pauses the operands: the deploy labels' value, and the annotation that records them
PAUSES = {"mig-change": (PAUSED, ANNOTATION),
          "gpu-reset": ("paused-for-gpu-reset", "gpuops.nvidia/gpu-reset.paused-operands")}
STRATEGIES = ("none", "single", "mixed")


def _meta(node, key):
    return ((node or {}).get("metadata") or {}).get(key) or {}


def _path(kind, key):
    return "/metadata/%s/%s" % (kind, escape(key))


def _set(node, kind, key, value):
    """Guarded ops that give metadata.<kind>[key] `value` (None: remove it)."""
    current_map = _meta(node, kind)
    current = current_map.get(key)
    if current == value:
        return []
    if value is None:
        return [{"op": "test", "path": _path(kind, key), "value": current},
                {"op": "remove", "path": _path(kind, key)}]
    if current is None:
        if ((node or {}).get("metadata") or {}).get(kind) is None:  # no map at all yet
            return [{"op": "add", "path": "/metadata/" + kind, "value": {key: value}}]
        return [{"op": "add", "path": _path(kind, key), "value": value}]
    return [{"op": "test", "path": _path(kind, key), "value": current},
            {"op": "replace", "path": _path(kind, key), "value": value}]


def wanted_config(node, default=""):
    """The config the node's label asks for, else `default` (the inventory's mig_config_name)."""
    value = _meta(node, "labels").get(CONFIG_LABEL)
    return value if value else default


def _pause_of(reason):
    if reason not in PAUSES:
        raise ValueError("%r pauses no operands (%s)" % (reason, ", ".join(sorted(PAUSES))))
    return PAUSES[reason]


def paused_record(node, reason="mig-change"):
    """{label key: value before the pause} that this collection recorded on the node; {} when none.
    ValueError when the annotation is not such a JSON object (fix or remove it by hand)."""
    annotation = _pause_of(reason)[1]
    return json_record(_meta(node, "annotations"), annotation, lambda key, value: isinstance(key, str) and key.startswith(
        DEPLOY_LABEL_PREFIX) and isinstance(value, str), "nvidia.com/gpu.deploy.* label -> value before the %s" % (
            "MIG change" if reason == "mig-change" else reason.replace("-", " ")))


def pause(node, operands=OPERANDS, reason="mig-change"):
    """{"patch", "paused"}: the operands deployed on the node ("true") are paused; "paused" maps each
    paused label to its value before, merged with what an earlier run recorded and did not restore.
    An admin's "false", an absent label (the operand is not deployed there) and other paused-*
    values are left as they are. The record goes into the node annotation in the same patch.
    ``reason``: a key of PAUSES."""
    value, annotation = _pause_of(reason)
    labels = _meta(node, "labels")
    record = paused_record(node, reason)
    paused = {k: v for k, v in record.items() if labels.get(k) == value}
    patch = []
    for operand in operands:
        key = DEPLOY_LABEL_PREFIX + operand
        if labels.get(key) == "true":
            patch += _set(node, "labels", key, value)
            paused[key] = "true"
    if paused != record:
        patch = _set(node, "annotations", annotation,
                     json.dumps(paused, sort_keys=True, separators=(",", ":")) if paused else None) + patch
    return {"patch": patch, "paused": paused}


def restore(node, reason="mig-change"):
    """The patch that gives each label recorded as paused (for ``reason``) its value back and
    removes the record; a label that is no longer paused-for-<reason> (someone changed it
    meanwhile) is left alone."""
    value, annotation = _pause_of(reason)
    labels = _meta(node, "labels")
    record = paused_record(node, reason)
    patch = []
    for key in sorted(record):
        if labels.get(key) == value:
            patch += _set(node, "labels", key, record[key])
    if annotation in _meta(node, "annotations"):
        patch += _set(node, "annotations", annotation, None)
    return patch


def state(node, value):
    """The patch that sets the state label (no op when it already has that value)."""
    if value not in STATES:
        raise ValueError("%r is not a MIG config state (%s)" % (value, ", ".join(STATES)))
    return _set(node, "labels", STATE_LABEL, value)


def leftovers(node):
    """Deploy labels paused for a MIG change that nothing records (NVIDIA's MIG manager, or
    someone by hand): reported, never touched."""
    record = paused_record(node)
    return sorted(k for k, v in _meta(node, "labels").items()
                  if k.startswith(DEPLOY_LABEL_PREFIX) and v == PAUSED and k not in record)


def operand_pods(pods, node_name, keys):
    """'namespace/name' of the pods on node `node_name` that a paused label keeps there: their
    node selector (DaemonSets copy theirs into each pod) asks for one of `keys`. Terminating pods
    count: they still hold the GPUs."""
    keys = set(keys or ())
    out = []
    for pod in pods or []:
        spec = pod.get("spec") or {}
        if spec.get("nodeName") != node_name:
            continue
        if keys & set(spec.get("nodeSelector") or {}):
            meta = pod.get("metadata") or {}
            out.append("%s/%s" % (meta.get("namespace", ""), meta.get("name", "")))
    return sorted(out)


def operands_not_back(node, daemonsets, pods, keys):
    """'namespace/name' of the DaemonSets the given-back labels `keys` bring back to `node` - their
    pods' node selector asks for one of `keys`, and the whole of it matches the node's labels (read
    after the give-back) - that have no pod on the node Running and Ready yet (one being deleted does
    not count): what the node waits for before it takes work again. A DaemonSet no pause kept off
    the node, or one that does not select it, is none of them."""
    meta = node.get("metadata") or {}
    name, labels, keys = meta.get("name"), meta.get("labels") or {}, set(keys or ())
    out = []
    for daemonset in daemonsets or []:
        ds_meta = daemonset.get("metadata") or {}
        template = ((daemonset.get("spec") or {}).get("template") or {}).get("spec") or {}
        selector = template.get("nodeSelector") or {}
        if not keys & set(selector) or any(labels.get(k) != v for k, v in selector.items()):
            continue
        uid = ds_meta.get("uid")
        back = [p for p in pods or [] if (p.get("spec") or {}).get("nodeName") == name
                and not (p.get("metadata") or {}).get("deletionTimestamp")
                and any(o.get("uid") == uid for o in (p.get("metadata") or {}).get("ownerReferences") or [])
                and pod_ready(p)]
        if not back:
            out.append("%s/%s" % (ds_meta.get("namespace", ""), ds_meta.get("name", "")))
    return sorted(out)


def _describe(after):
    if not after.get("mig_enabled"):
        return "MIG off"
    return ", ".join("%d x %s" % (c, p) for p, c in sorted((after.get("devices") or {}).items()) if c)


def strategy_errors(plan, strategy):
    """Why the device plugin's MIG strategy on the node does not fit the planned layout: with
    "none" it advertises MIG-enabled GPUs whole and none of their MIG devices; "single" needs every
    GPU in MIG mode with one and the same profile, or none in MIG mode (upstream's
    "all devices on the node must be of the same type"); "mixed" takes any layout. [] when it
    fits; an empty strategy skips the check."""
    if not strategy:
        return []
    if strategy not in STRATEGIES:
        return ["device plugin MIG strategy %r is none of %s" % (strategy, ", ".join(STRATEGIES))]
    gpus = [(g["gpu"], g.get("after") or g.get("before") or {}) for g in (plan or {}).get("gpus") or []]
    on = [(i, a) for i, a in gpus if a.get("mig_enabled")]
    name = (plan or {}).get("config", "")
    if strategy == "none" and on:
        return ["config %s turns MIG on for GPU(s) %s, but the node's device plugin runs with migStrategy none, "
                "which advertises them as whole nvidia.com/gpu and none of their MIG devices: give the node a device "
                "plugin config with migStrategy mixed or single (node_labels_device_plugin_config), or set "
                "mig_device_plugin_strategy if the plugin is not this collection's"
                % (name, ", ".join(str(i) for i, _a in on))]
    if strategy == "single" and on:
        off = [i for i, a in gpus if not a.get("mig_enabled")]
        kinds = sorted({p for _i, a in on for p, c in (a.get("devices") or {}).items() if c})
        empty = [i for i, a in on if not any((a.get("devices") or {}).values())]
        if off or len(kinds) != 1 or empty:
            layouts = "; ".join("GPU %d: %s" % (i, _describe(a)) for i, a in gpus)
            return ["config %s does not suit migStrategy single, which needs every GPU in MIG mode with one and the same "
                    "profile: %s; use migStrategy mixed for the node, or a layout with one profile on every GPU"
                    % (name, layouts)]
    return []

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Kubernetes node labels and the taint this collection manages on a GPU node, planned from
the node's gpu_info result, and the JSON Patch (RFC 6902) that brings the Node object there (for
kubernetes.core.k8s_json_patch). Pure functions: no I/O.

Labels:

* the GPU Operator's node-targeting labels: ``nvidia.com/gpu.present``,
  ``nvidia.com/gpu.deploy.<operand>`` (each operand DaemonSet selects on its own label),
  ``nvidia.com/mig.capable`` and, when asked for, ``nvidia.com/device-plugin.config`` (the
  device plugin's config manager picks its named config from it);
* our own: ``gpuops.nvidia/gpu.health`` (``healthy`` or the unhealthy finding codes) and the
  topology labels ``gpuops.nvidia/gpu.nvlink``, ``gpu.nvswitch``, ``gpu.numa-nodes`` and
  ``gpu.per-numa-node``.

The plan never overwrites an operand's deploy label that an admin set to ``"false"`` or that the
MIG manager or the driver upgrade controller paused (``paused-for-...``). It records, in the
node annotation ``gpuops.nvidia/previous-labels``, what each label it adds or changes was before
(null when it did not exist), so that a label no longer wanted, or all of them with state absent,
go back to what they were."""

from __future__ import annotations

import json
import re

__metaclass__ = type

from ansible_collections.gpuops.nvidia.plugins.module_utils.gpu.model import NVLINK_REMOTE_TYPES, normalize_bus_id

OPERANDS = ("device-plugin", "gpu-feature-discovery", "dcgm-exporter")

PRESENT_LABEL = "nvidia.com/gpu.present"
DEPLOY_LABEL_PREFIX = "nvidia.com/gpu.deploy."
MIG_CAPABLE_LABEL = "nvidia.com/mig.capable"
DEVICE_PLUGIN_CONFIG_LABEL = "nvidia.com/device-plugin.config"

HEALTH_LABEL = "gpuops.nvidia/gpu.health"
NVLINK_LABEL = "gpuops.nvidia/gpu.nvlink"
NVSWITCH_LABEL = "gpuops.nvidia/gpu.nvswitch"
NUMA_NODES_LABEL = "gpuops.nvidia/gpu.numa-nodes"
PER_NUMA_NODE_LABEL = "gpuops.nvidia/gpu.per-numa-node"
TOPOLOGY_LABELS = (NVLINK_LABEL, NVSWITCH_LABEL, NUMA_NODES_LABEL, PER_NUMA_NODE_LABEL)

ANNOTATION = "gpuops.nvidia/previous-labels"

NVLINK_FULL_MESH = "full-mesh"
NVLINK_PARTIAL = "partial"
NVLINK_NONE = "none"

HEALTHY = "healthy"
MORE = "more"
TAINT_EFFECTS = ("NoSchedule", "PreferNoSchedule", "NoExecute")
STATES = ("present", "absent")

# The remote type gpu_model gives an NVLink that ends at an NVSwitch ("nvswitch"), and at a GPU.
NVSWITCH_REMOTE = NVLINK_REMOTE_TYPES[2]
GPU_REMOTE = NVLINK_REMOTE_TYPES[0]

MAX_VALUE = 63
_NAME_RE = re.compile(r"^[A-Za-z0-9]([-A-Za-z0-9_.]*[A-Za-z0-9])?$")
_PREFIX_RE = re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?(\.[a-z0-9]([-a-z0-9]*[a-z0-9])?)*$")
_INVALID_CHARS_RE = re.compile(r"[^A-Za-z0-9_.-]+")


# ---- label syntax ------------------------------------------------------------------------------

def valid_label_value(value) -> bool:
    """A Kubernetes label value: empty, or up to 63 characters of [A-Za-z0-9_.-] that start and
    end with a letter or digit. Taint values follow the same rules."""
    return isinstance(value, str) and (value == "" or (len(value) <= MAX_VALUE and bool(_NAME_RE.match(value))))


def valid_label_key(key) -> bool:
    """A Kubernetes label key (also a taint key): an optional DNS-subdomain prefix and '/', then a
    name of up to 63 characters like a non-empty label value."""
    if not isinstance(key, str):
        return False
    prefix, slash, name = key.rpartition("/")
    if slash and (not prefix or len(prefix) > 253 or not _PREFIX_RE.match(prefix)):
        return False
    return 0 < len(name) <= MAX_VALUE and bool(_NAME_RE.match(name))


def deploy_label(operand: str) -> str:
    """The GPU Operator's label that deploys one operand on a node: nvidia.com/gpu.deploy.<operand>."""
    key = DEPLOY_LABEL_PREFIX + str(operand)
    if not isinstance(operand, str) or not operand or not valid_label_key(key):
        raise ValueError("operand %r does not make a valid label key (%s)" % (operand, key))
    return key


# ---- desired labels ----------------------------------------------------------------------------

def _usable_gpus(info: dict) -> list:
    """The GPUs NVML could read (a lost GPU has little more than its index)."""
    return [gpu for gpu in info.get("gpus") or [] if isinstance(gpu, dict) and not gpu.get("lost")]


def _is_gpu_node(info: dict, gpu_present: bool | None) -> bool:
    if gpu_present is not None:
        return bool(gpu_present)
    pci_devices = info.get("pci_devices")
    if pci_devices is not None and (isinstance(pci_devices, bool) or not isinstance(pci_devices, int)
                                    or pci_devices < 0):
        raise ValueError("pci_devices must be a number of NVIDIA PCI devices (0 or more), got %r" % (pci_devices,))
    pci_gpus = len(((info.get("pci") or {}).get("gpus")) or [])  # gpu_info's view of the PCI bus
    return bool(info.get("gpus")) or (info.get("gpu_count") or 0) > 0 or (pci_devices or 0) > 0 or pci_gpus > 0


def _bus_id(value) -> str | None:
    if not value:
        return None
    try:
        return normalize_bus_id(str(value))
    except (ValueError, IndexError):
        return str(value).strip().lower()


def _active_links(gpu: dict) -> list:
    return [link for link in (gpu.get("nvlink") or {}).get("links") or [] if link.get("active")]


def nvlink_mesh(gpus: list, pairs: list | None = None) -> str:
    """How the GPUs are connected by NVLink: 'full-mesh' when every pair of GPUs is connected
    (directly, or both through the NVSwitch fabric), 'none' when no pair is (or there are fewer
    than two GPUs), 'partial' otherwise.

    A pair is connected when an active link of one GPU ends at the other's PCI bus id, when both
    have an active link to an NVSwitch, or when the topology entry of the pair (gpu_info's
    ``topology``: ``{gpus: [a, b], nvlink: bool}``) says NVLink. Only active links count."""
    indexes = [gpu.get("index") for gpu in gpus]
    if len(indexes) < 2:
        return NVLINK_NONE
    by_bus = {}
    for gpu in gpus:
        bus = _bus_id((gpu.get("pci") or {}).get("bus_id"))
        if bus:
            by_bus[bus] = gpu.get("index")
    connected = set()
    on_switch = []
    for gpu in gpus:
        links = _active_links(gpu)
        if any(link.get("remote_type") == NVSWITCH_REMOTE for link in links):
            on_switch.append(gpu.get("index"))
        for link in links:
            if link.get("remote_type") == GPU_REMOTE:
                peer = by_bus.get(_bus_id(link.get("remote_bus_id")))
                if peer is not None and peer != gpu.get("index"):
                    connected.add(frozenset((gpu.get("index"), peer)))
    for pos, first in enumerate(on_switch):
        for second in on_switch[pos + 1:]:
            connected.add(frozenset((first, second)))
    for pair in pairs or []:
        members = pair.get("gpus") or []
        if pair.get("nvlink") and len(members) == 2 and members[0] != members[1]:
            connected.add(frozenset(members))
    wanted = {frozenset((first, second)) for pos, first in enumerate(indexes) for second in indexes[pos + 1:]}
    found = len(wanted & connected)
    if found == len(wanted):
        return NVLINK_FULL_MESH
    return NVLINK_NONE if found == 0 else NVLINK_PARTIAL


def topology_labels(info: dict) -> dict:
    """The topology labels for the usable (not lost) GPUs of a gpu_info result; empty when no GPU
    is known. The NUMA labels are left out when any GPU's NUMA node is unknown."""
    gpus = _usable_gpus(info)
    if not gpus:
        return {}
    labels = {
        NVLINK_LABEL: nvlink_mesh(gpus, info.get("topology")),
        NVSWITCH_LABEL: "true" if any(link.get("remote_type") == NVSWITCH_REMOTE
                                      for gpu in gpus for link in _active_links(gpu)) else "false",
    }
    numa = [gpu.get("numa_node") for gpu in gpus]
    if all(isinstance(node, int) and not isinstance(node, bool) for node in numa):
        counts = [numa.count(node) for node in sorted(set(numa))]
        labels[NUMA_NODES_LABEL] = str(len(counts))
        per_node = str(counts[0]) if len(set(counts)) == 1 else "-".join(str(count) for count in counts)
        if valid_label_value(per_node):
            labels[PER_NUMA_NODE_LABEL] = per_node
    return labels


def desired_labels(info: dict, operands=OPERANDS, device_plugin_config: str | None = None,
                   topology: bool = True, gpu_present: bool | None = None) -> dict:
    """The labels this collection wants on a node, from its gpu_info result.

    Whether the node is a GPU node: ``gpu_present`` when given (True/False forces it); otherwise
    it is when ``info["gpus"]`` is not empty, ``info["gpu_count"] > 0``, or the optional
    ``info["pci_devices"]`` (the number of NVIDIA PCI devices, from lspci or sysfs: a node whose
    driver is not loaded yet reports no GPUs through NVML but still is a GPU node) is above 0.
    A node that is not a GPU node gets no labels at all ({}).

    On a GPU node: ``nvidia.com/gpu.present=true``, ``nvidia.com/gpu.deploy.<operand>=true`` for
    each operand, ``nvidia.com/device-plugin.config`` when ``device_plugin_config`` is given
    (None or "" mean none; ValueError when it is not a valid label value), and, only when NVML
    could read at least one GPU: ``nvidia.com/mig.capable`` ("true" when any GPU is MIG capable)
    and, with ``topology``, the topology labels (see topology_labels())."""
    if isinstance(operands, str):
        operands = [operands]
    keys = [deploy_label(operand) for operand in operands or []]
    if device_plugin_config is not None and device_plugin_config != "":
        if not valid_label_value(device_plugin_config):
            raise ValueError(
                "device_plugin_config %r is not a valid label value for %s: up to 63 characters of "
                "letters, digits, '-', '_' and '.', starting and ending with a letter or digit"
                % (device_plugin_config, DEVICE_PLUGIN_CONFIG_LABEL))
    if not _is_gpu_node(info, gpu_present):
        return {}
    labels = {PRESENT_LABEL: "true"}
    labels.update((key, "true") for key in keys)
    if device_plugin_config:
        labels[DEVICE_PLUGIN_CONFIG_LABEL] = device_plugin_config
    gpus = _usable_gpus(info)
    if gpus:
        labels[MIG_CAPABLE_LABEL] = "true" if any((gpu.get("mig") or {}).get("capable") for gpu in gpus) else "false"
        if topology:
            labels.update(topology_labels(info))
    return labels


# ---- health ------------------------------------------------------------------------------------

def unhealthy_codes(info: dict, severities=("error",), codes=("pcie_link_degraded",)) -> list:
    """The sorted, unique codes of the findings in ``info["health"]`` whose severity is one of
    ``severities`` or whose code is one of ``codes``."""
    if isinstance(severities, str):
        severities = [severities]
    if isinstance(codes, str):
        codes = [codes]
    found = set()
    for item in info.get("health") or []:
        code = item.get("code")
        if code and (item.get("severity") in severities or code in codes):
            found.add(str(code))
    return sorted(found)


def _code_part(code, limit: int) -> str:
    text = _INVALID_CHARS_RE.sub("_", str(code))[:limit]
    return re.sub(r"^[^A-Za-z0-9]+|[^A-Za-z0-9]+$", "", text)


def health_value(codes) -> str:
    """A label (and taint) value naming the codes, in the order given, joined by '.':
    'ecc_uncorrectable.xid'; 'healthy' when there are none. Characters a label value cannot hold
    become '_'. When they do not fit in 63 characters, whole codes are dropped from the end and
    the value ends with '.more'."""
    parts = []
    for code in codes or []:
        part = _code_part(code, MAX_VALUE)
        if part and part not in parts:
            parts.append(part)
    if not parts:
        return HEALTHY
    value = ".".join(parts)
    if len(value) <= MAX_VALUE:
        return value
    room = MAX_VALUE - len(MORE) - 1
    kept = []
    for part in parts:
        if len(".".join(kept + [part])) > room:
            break
        kept.append(part)
    if not kept:
        kept = [_code_part(parts[0], room)]
    return ".".join(kept + [MORE])


def validate_taint(taint: dict | None) -> dict | None:
    """The taint as {key, effect, value?}; ValueError when the key, effect or value is invalid."""
    if taint is None:
        return None
    if not isinstance(taint, dict):
        raise ValueError("taint must be a dict with key, effect and an optional value, got %r" % (taint,))
    key, effect, value = taint.get("key"), taint.get("effect"), taint.get("value")
    if not valid_label_key(key):
        raise ValueError("taint key %r is not a valid key (an optional DNS prefix and '/', then a name of up to "
                         "63 letters, digits, '-', '_' and '.')" % (key,))
    if effect not in TAINT_EFFECTS:
        raise ValueError("taint effect must be one of %s, not %r" % (", ".join(TAINT_EFFECTS), effect))
    if value is not None and not valid_label_value(value):
        raise ValueError("taint value %r is not a valid label value" % (value,))
    result = {"key": key, "effect": effect}
    if value is not None:
        result["value"] = value
    return result


# ---- JSON Pointer ------------------------------------------------------------------------------

def escape(token: str) -> str:
    """One JSON Pointer reference token (RFC 6901): '~' becomes '~0', '/' becomes '~1'."""
    return token.replace("~", "~0").replace("/", "~1")


# ---- the plan ----------------------------------------------------------------------------------

def json_record(annotations: dict, key: str, valid, what: str) -> dict:
    """The JSON object kept in node annotation `key` ({} when there is none), each item checked with
    valid(key, value). ValueError naming `what` it must hold when it is not such an object (fix or
    remove it by hand)."""
    text = (annotations or {}).get(key)
    if text is None:
        return {}
    try:
        record = json.loads(text)
    except (TypeError, ValueError):
        record = None
    if not isinstance(record, dict) or not all(valid(k, v) for k, v in record.items()):
        raise ValueError("node annotation %s must be a JSON object of %s, got %r; fix or remove it" % (key, what, text))
    return record


def read_record(annotations: dict) -> dict:
    """The previous values recorded in the node annotation: {label key: previous value or None}.
    ValueError when the annotation is not such a JSON object (fix or remove it by hand)."""
    return json_record(annotations, ANNOTATION, lambda key, value: isinstance(key, str) and (
        value is None or isinstance(value, str)), "label key -> previous value or null")


def _dump_record(record: dict) -> str:
    return json.dumps(record, sort_keys=True, separators=(",", ":"))


def _preservation(key: str, current, preserve_values, preserve_prefixes):
    """(reason, transient) when the current value of an operand's deploy label must stay."""
    if current is None or not key.startswith(DEPLOY_LABEL_PREFIX):
        return None
    if current in preserve_values:
        return ("%r is an opt-out (preserve_values), never overwritten" % current, False)
    for prefix in preserve_prefixes:
        if prefix and current.startswith(prefix):
            return ("%r is a pause by another controller (prefix %r), never overwritten" % (current, prefix), True)
    return None


def _taint_matches(have: dict, want: dict) -> bool:
    return (have.get("key") == want["key"] and have.get("effect") == want["effect"]
            and (have.get("value") or "") == (want.get("value") or ""))


def _plan_taints(taints: list, taint: dict | None, want: dict | None) -> list:
    if taint is None:
        return taints
    key = taint["key"]
    ours = [item for item in taints if item.get("key") == key]
    if want is None:
        return [item for item in taints if item.get("key") != key]
    if len(ours) == 1 and _taint_matches(ours[0], want):
        return taints
    result, placed = [], False
    for item in taints:
        if item.get("key") != key:
            result.append(item)
        elif not placed:
            result.append(want)
            placed = True
    if not placed:
        result.append(want)
    return result


def _container_ops(obj: dict, parts: tuple) -> list:
    """'add' operations creating the objects of ``parts`` (('metadata', 'labels')) that are missing."""
    ops, node, path = [], obj, ""
    for part in parts:
        path += "/" + escape(part)
        if not isinstance(node, dict) or not isinstance(node.get(part), dict):
            ops.append({"op": "add", "path": path, "value": {}})
            node = {}
        else:
            node = node[part]
    return ops


def _map_ops(obj: dict, parts: tuple, current: dict, changes: dict, tests: list) -> list:
    """Operations that set (value) or remove (None) the members in ``changes`` of the object at
    ``parts``; 'test' operations on values replaced or removed go to ``tests``."""
    if not changes:
        return []
    base = "/" + "/".join(escape(part) for part in parts)
    ops = _container_ops(obj, parts) if any(value is not None for value in changes.values()) else []
    for key in sorted(changes):
        path = "%s/%s" % (base, escape(key))
        value = changes[key]
        if key in current:
            tests.append({"op": "test", "path": path, "value": current[key]})
            ops.append({"op": "remove", "path": path} if value is None else
                       {"op": "replace", "path": path, "value": value})
        elif value is not None:
            ops.append({"op": "add", "path": path, "value": value})
    return ops


def plan(node: dict, desired: dict, *, unhealthy: list, taint: dict | None, state: str = "present",
         preserve_values=("false",), preserve_prefixes=("paused-",)) -> dict:
    """Plan the labels, the taint and the previous-labels annotation of one Node object (as the
    API returns it: metadata.labels, metadata.annotations and spec.taints may be missing).

    state present: the labels are ``desired`` plus the health label (health_value(unhealthy)).
    With ``taint`` ({key, effect, value?}; value defaults to health_value(unhealthy)), an
    unhealthy node gets that taint (replacing any taint with its key) and a healthy one loses
    every taint with its key. Other taints are never touched; with taint None none are.

    state absent: every recorded label goes back to its previous value (removed when it had
    none), the taint with ``taint``'s key is removed and the annotation too. A node without the
    annotation gets no operations.

    A ``nvidia.com/gpu.deploy.*`` label whose current value is in ``preserve_values`` or starts
    with one of ``preserve_prefixes`` is never changed (listed in ``kept``). When such a label
    would have been restored, an opt-out drops its record, a pause keeps it so that a later run
    restores the label once the pause is over.

    Returns {ops (JSON Patch, empty when nothing changes), labels_before and labels_after (the
    managed keys present before/after), taints_before, taints_after, kept ({key: reason})}.
    ValueError for an unknown state, an invalid taint, label key or value, or a broken
    annotation."""
    if state not in STATES:
        raise ValueError("state must be one of %s, not %r" % (", ".join(STATES), state))
    taint = validate_taint(taint)
    preserve_values = [preserve_values] if isinstance(preserve_values, str) else list(preserve_values or ())
    preserve_prefixes = [preserve_prefixes] if isinstance(preserve_prefixes, str) else list(preserve_prefixes or ())
    metadata = node.get("metadata") or {}
    labels = dict(metadata.get("labels") or {})
    annotations = dict(metadata.get("annotations") or {})
    spec = node.get("spec") or {}
    taints = list(spec.get("taints") or [])
    record = read_record(annotations)
    new_record = dict(record)
    kept = {}
    changes = {}

    target = {}
    want_taint = None
    if state == "present":
        target = dict(desired or {})
        health = health_value(unhealthy)
        target[HEALTH_LABEL] = health
        for key, label in target.items():
            if not valid_label_key(key) or not valid_label_value(label):
                raise ValueError("label %r=%r is not a valid Kubernetes label" % (key, label))
        if unhealthy and taint is not None:
            want_taint = {"key": taint["key"], "value": taint.get("value", health), "effect": taint["effect"]}
            if not want_taint["value"]:
                del want_taint["value"]
        for key in sorted(target):
            current = labels.get(key)
            if current == target[key]:
                continue
            kept_for = _preservation(key, current, preserve_values, preserve_prefixes)
            if kept_for:
                kept[key] = kept_for[0]
                continue
            changes[key] = target[key]
            new_record.setdefault(key, current)
    elif ANNOTATION not in annotations:
        return {"ops": [], "labels_before": {}, "labels_after": {}, "taints_before": taints,
                "taints_after": taints, "kept": {}}

    for key in sorted(record):
        if key in target:
            continue
        current, previous = labels.get(key), record[key]
        if current != previous:
            kept_for = _preservation(key, current, preserve_values, preserve_prefixes)
            if kept_for:
                kept[key] = kept_for[0]
                if kept_for[1]:
                    continue
            else:
                changes[key] = previous
        del new_record[key]

    tests, ops = [], []
    after = dict(labels)
    for key, value in changes.items():
        if value is None:
            after.pop(key, None)
        else:
            after[key] = value
    ops.extend(_map_ops(node, ("metadata", "labels"), labels, changes, tests))

    # Compared as data, so that an annotation written with other spacing is not rewritten.
    if not new_record and ANNOTATION in annotations:
        ops.extend(_map_ops(node, ("metadata", "annotations"), annotations, {ANNOTATION: None}, tests))
    elif new_record and (new_record != record or ANNOTATION not in annotations):
        ops.extend(_map_ops(node, ("metadata", "annotations"), annotations,
                            {ANNOTATION: _dump_record(new_record)}, tests))

    new_taints = _plan_taints(taints, taint, want_taint)
    if new_taints != taints:
        if isinstance(spec.get("taints"), list):
            tests.append({"op": "test", "path": "/spec/taints", "value": taints})
            ops.append({"op": "replace", "path": "/spec/taints", "value": new_taints} if new_taints else
                       {"op": "remove", "path": "/spec/taints"})
        else:
            ops.extend(_container_ops(node, ("spec",)))
            ops.append({"op": "add", "path": "/spec/taints", "value": new_taints})

    managed = set(target) | set(record)
    return {
        "ops": tests + ops,
        "labels_before": {key: labels[key] for key in sorted(managed) if key in labels},
        "labels_after": {key: after[key] for key in sorted(managed) if key in after},
        "taints_before": taints,
        "taints_after": new_taints,
        "kept": kept,
    }


def changes(result: dict) -> list:
    """What a plan (the result of plan()) changes, one line each, for the role's output."""
    before = result.get("labels_before") or {}
    after = result.get("labels_after") or {}
    lines = []
    for key in sorted(set(before) | set(after)):
        if key not in after:
            lines.append(f"remove {key} (was {before[key]})")
        elif key not in before:
            lines.append(f"add {key}={after[key]}")
        elif before[key] != after[key]:
            lines.append(f"change {key}: {before[key]} -> {after[key]}")
    for key, reason in sorted((result.get("kept") or {}).items()):
        lines.append(f"keep {key}: {reason}")
    old = {(t.get("key"), t.get("value"), t.get("effect")) for t in result.get("taints_before") or []}
    new = {(t.get("key"), t.get("value"), t.get("effect")) for t in result.get("taints_after") or []}
    for key, value, effect in sorted(new - old, key=str):
        lines.append(f"taint {key}={value or ''}:{effect}")
    for key, value, effect in sorted(old - new, key=str):
        lines.append(f"untaint {key}={value or ''}:{effect}")
    return lines

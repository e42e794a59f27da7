# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""CDI specs against the GPUs NVML reports: every GPU (and MIG device) must be named by index and
by UUID, no device that is gone may still be listed, and the device nodes must exist. A spec
left over from before a MIG change or a GPU swap is the classic failure. Pure functions, plus two
readers of the host (the spec directories, and which device nodes exist), whose results the
checker takes as data."""

from __future__ import annotations

import json
import os

__metaclass__ = type

from ansible_collections.gpuops.nvidia.plugins.module_utils.report import findings as fnd

try:
    import yaml
    HAS_YAML = True
except ImportError:
    yaml = None
    HAS_YAML = False


def expected_names(gpus: list) -> set:
    """CDI device names nvidia-ctk gives the GPUs: index and UUID of every GPU, 'i:j' and the
    UUID of every MIG device, and 'all'. A GPU in MIG mode is named by its MIG devices only:
    nvidia-ctk 1.18 leaves the GPU itself out (1.17 still listed it), see optional_names()."""
    names = {"all"}
    for gpu in gpus:
        if gpu.get("lost"):
            continue
        if not _mig_enabled(gpu):
            names.add(str(gpu["index"]))
            if gpu.get("uuid"):
                names.add(gpu["uuid"])
        for position, device in enumerate((gpu.get("mig") or {}).get("devices") or []):
            # nvidia-ctk names a MIG device by its GPU's index and its MIG handle index
            names.add("%d:%d" % (gpu["index"], device.get("index", position)))
            if device.get("uuid"):
                names.add(device["uuid"])
    return names


def optional_names(gpus: list) -> set:
    """Names a spec may carry without being stale: those of the GPUs in MIG mode themselves
    (nvidia-ctk 1.17 lists them, 1.18 does not: pkg/nvcdi/lib-nvml.go skips a MIG-enabled GPU)."""
    names = set()
    for gpu in gpus:
        if not gpu.get("lost") and _mig_enabled(gpu):
            names.add(str(gpu["index"]))
            if gpu.get("uuid"):
                names.add(gpu["uuid"])
    return names


def _mig_enabled(gpu: dict) -> bool:
    return bool((gpu.get("mig") or {}).get("current"))


def read_specs(directories, root: str = "/") -> tuple:
    """(specs, problems): specs as [{'path', 'data'}] from *.yaml, *.yml, *.json files."""
    specs, problems = [], []
    for directory in directories:
        base = os.path.join(root, directory.lstrip("/"))
        if not os.path.isdir(base):
            continue
        for name in sorted(os.listdir(base)):
            path = os.path.join(base, name)
            if not name.endswith((".yaml", ".yml", ".json")) or not os.path.isfile(path):
                continue
            try:
                with open(path, encoding="utf-8") as handle:
                    text = handle.read()
                data = json.loads(text) if name.endswith(".json") else yaml.safe_load(text)
            except (ValueError, OSError, getattr(yaml, "YAMLError", ValueError)) as exc:
                problems.append({"path": os.path.join(directory, name), "error": str(exc).splitlines()[0]})
                continue
            # another vendor's spec, or no spec at all, is left to its owner, as before; an NVIDIA
            # spec the checks read must have the shape they read
            if not isinstance(data, dict):
                data = {}
            problem = shape_problem(data) if str(data.get("kind", "")).startswith("nvidia.com/") else None
            if problem:
                problems.append({"path": os.path.join(directory, name), "error": problem})
                continue
            specs.append({"path": os.path.join(directory, name), "data": data})
    return specs, problems


def _kind(value) -> str:
    return {dict: "mapping", list: "list", str: "string", type(None): "nothing (it is empty)"}.get(
        type(value), type(value).__name__)


def shape_problem(data) -> str | None:
    """Why a parsed file is not shaped as a CDI spec (the parts the checks read), or None."""
    if not isinstance(data, dict):
        return "holds a %s, not a CDI spec (a mapping with cdiVersion, kind, devices)" % _kind(data)
    devices = data.get("devices") or []
    if not isinstance(devices, list):
        return "devices is a %s, not a list" % _kind(devices)
    edits = [("containerEdits", data.get("containerEdits"))]
    for index, device in enumerate(devices):
        if not isinstance(device, dict):
            return "devices[%d] is a %s, not a mapping" % (index, _kind(device))
        edits.append(("devices[%d].containerEdits" % index, device.get("containerEdits")))
    for where, edit in edits:
        if edit is None:
            continue
        if not isinstance(edit, dict):
            return "%s is a %s, not a mapping" % (where, _kind(edit))
        nodes = edit.get("deviceNodes") or []
        if not isinstance(nodes, list) or not all(isinstance(node, dict) for node in nodes):
            return "%s.deviceNodes must be a list of mappings (path, hostPath)" % where
    return None


def _finding(code, severity, message, fix, subject="CDI spec", **extra):
    return fnd.finding(code, severity, message, fix, subject=subject, **extra)


def device_nodes(specs: list, kind: str = "nvidia.com/gpu") -> list:
    """The host paths of every device node the specs of one kind give containers."""
    paths = set()
    for spec in specs:
        if spec["data"].get("kind") != kind:
            continue
        edits = [spec["data"].get("containerEdits") or {}]
        edits += [device.get("containerEdits") or {} for device in spec["data"].get("devices") or []]
        for edit in edits:
            for node in edit.get("deviceNodes") or []:
                path = node.get("hostPath") or node.get("path")
                if path:
                    paths.add(path)
    return sorted(paths)


def present_paths(paths, root: str = "/") -> set:
    """The paths (host paths, read under root) that exist."""
    return {path for path in paths if os.path.exists(os.path.join(root, path.lstrip("/")))}


def check(specs: list, problems: list, gpus: list, kind: str = "nvidia.com/gpu", present_nodes=None) -> dict:
    """Findings for the specs of one kind against the GPUs. present_nodes is the set of device
    node paths that exist on the host (see device_nodes() and present_paths()); None skips the
    device-node check. Returns {'findings', 'stale', 'blocked' (a lost GPU keeps nvidia-ctk from
    generating), 'listed', 'expected', 'spec_files'}."""
    findings = [_finding("cdi_spec_unreadable", "error", "CDI spec %s cannot be read: %s" % (p["path"], p["error"]),
                         "regenerate it (nvidia-ctk cdi generate) or remove it", subject=p["path"], path=p["path"])
                for p in problems]
    ours = [spec for spec in specs if spec["data"].get("kind") == kind]
    expected = expected_names(gpus) if gpus else set()
    listed = set()
    for spec in ours:
        for device in spec["data"].get("devices") or []:
            listed.add(str(device.get("name")))
    lost = [gpu for gpu in gpus or [] if gpu.get("lost")]
    if not ours:
        if gpus:
            findings.append(_finding(
                "cdi_spec_missing", "error", "no CDI spec for kind %s, while NVML lists %d GPU(s)" % (kind, len(gpus)),
                "generate one: nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml"))
            findings.extend(_blocked(lost))
        return {"findings": findings, "stale": bool(gpus), "blocked": bool(lost), "listed": [],
                "expected": sorted(expected), "spec_files": []}
    if len(ours) > 1:
        findings.append(_finding(
            "cdi_spec_duplicate", "error",
            "kind %s is defined by %d spec files (%s); CDI refuses conflicting device names"
            % (kind, len(ours), ", ".join(spec["path"] for spec in ours)),
            "keep one spec for the kind (generated specs go to /var/run/cdi, static ones to /etc/cdi)"))
    missing = sorted(expected - listed)
    gone = sorted(listed - expected - optional_names(gpus) - {"all"}) if gpus else []
    if missing:
        findings.append(_finding(
            "cdi_device_missing", "error",
            "the CDI spec does not name %s, which NVML reports" % ", ".join(missing),
            "regenerate the spec (nvidia-ctk cdi generate), e.g. after a MIG change", devices=missing))
    if gone:
        findings.append(_finding(
            "cdi_device_stale", "error",
            "the CDI spec still names %s, which NVML no longer reports" % ", ".join(gone),
            "regenerate the spec: containers asking for these devices would fail", devices=gone))
    if present_nodes is not None:
        absent = sorted(set(device_nodes(ours, kind)) - set(present_nodes))
        if absent:
            findings.append(_finding(
                "cdi_device_node_missing", "error",
                "device nodes in the CDI spec do not exist: %s" % ", ".join(absent),
                "load the NVIDIA driver (nvidia-modprobe creates the nodes) and regenerate the spec",
                paths=absent))
    stale = any(f["code"] in ("cdi_device_missing", "cdi_device_stale", "cdi_spec_missing") for f in findings)
    if stale:
        findings.extend(_blocked(lost))
    return {"findings": fnd.ordered(findings), "stale": stale, "blocked": bool(lost), "listed": sorted(listed),
            "expected": sorted(expected), "spec_files": [spec["path"] for spec in ours]}


def check_node(gpus: list, spec_dirs, kind: str = "nvidia.com/gpu", device_nodes_too: bool = True,
               root: str = "/") -> dict:
    """check() of the specs under root's spec_dirs against the GPUs NVML lists, the device nodes
    the specs mount included (device_nodes_too)."""
    specs, problems = read_specs(spec_dirs, root)
    present = present_paths(device_nodes(specs, kind), root) if device_nodes_too else None
    return check(specs, problems, gpus, kind=kind, present_nodes=present)


def _blocked(lost: list) -> list:
    """nvidia-ctk writes no spec at all while a GPU is lost: it asks every GPU's name first and
    stops at the error (go-nvlib's device visitor), so regenerating cannot help."""
    return [_finding(
        "cdi_generation_blocked", "error",
        "nvidia-ctk cannot generate a CDI spec while GPU %s is lost: it stops at that GPU" % gpu.get("index"),
        "the node needs attention first (gpu_lost): drain and reboot it; the spec is generated once every GPU "
        "answers", subject="GPU %s" % gpu.get("index"), gpu=gpu.get("index")) for gpu in lost]

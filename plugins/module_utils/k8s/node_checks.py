# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The go-live checks of a GPU node (role validate), as pure functions over what the role read:
the node's gpu_info facts, its Node object, the test pod's logs, the exporter's metrics text.
Each returns the list of problems (empty: the check passes), worded with the evidence."""

from __future__ import annotations

import json
import re

from ansible_collections.gpuops.nvidia.plugins.module_utils.gpu.model import normalize_bus_id
from ansible_collections.gpuops.nvidia.plugins.module_utils.k8s import objects as k8s_objects

__metaclass__ = type

CHECKS = ("host", "operands", "labels", "allocatable", "workload", "metrics")

# `nvidia-smi -L`: a line per GPU, and below a GPU in MIG mode an indented line per MIG device
# the process can see ("  MIG 1g.10gb     Device  0: (UUID: MIG-...)"; drivers before R470 print
# MIG-GPU-<uuid>/<gi>/<ci> UUIDs)
_SMI_GPU_LINE = re.compile(r"^GPU (\d+): (.+?) \(UUID: (GPU-[^)\s]+)\)")
_SMI_MIG_LINE = re.compile(r"^MIG (\S+)\s+Device\s+(\d+): \(UUID: (MIG-[^)\s]+)\)")
_UUID_LABEL = re.compile(r'\bUUID="([^"]+)"')


def _live(info: dict) -> list:
    return [g for g in info.get("gpus") or [] if not g.get("lost")]


def _bus_id(text) -> str:
    """A PCI address as sysfs writes it (NVML's has an 8-digit domain): 0000:1b:00.0."""
    try:
        return normalize_bus_id(str(text))[4:]
    except (ValueError, IndexError):
        return str(text or "").lower()


def _bus_mismatch(pci_gpus: list, gpus: list) -> str:
    """The PCI bus and NVML disagree: the counts, and which GPUs only one of them has."""
    on_bus = {_bus_id(g.get("bus_id")) for g in pci_gpus}
    listed = {_bus_id((g.get("pci") or {}).get("bus_id")): g.get("index") for g in gpus}
    only_nvml = [f"GPU {listed[b]} ({b})" for b in sorted(listed) if b and b not in on_bus]
    only_bus = sorted(b for b in on_bus if b not in listed)
    message = f"{len(pci_gpus)} NVIDIA GPUs on the PCI bus but NVML lists {len(gpus)}"
    details = []
    if only_nvml and pci_gpus:
        details.append("not on the PCI bus: " + ", ".join(only_nvml))
    if only_bus:
        details.append("on the PCI bus only: " + ", ".join(only_bus))
    if not pci_gpus:
        details.append("a GPU that fell off the bus, or a host that cannot see its PCI bus "
                       "(/sys/bus/pci hidden from it, as in some containers)")
    return message + (" (" + "; ".join(details) + ")" if details else "")


def host_problems(info: dict) -> list:
    """The node's own state: PCI devices, the driver, GPU health."""
    problems = []
    driver = info.get("driver") or {}
    pci_gpus = ((info.get("pci") or {}).get("gpus")) or []
    gpus = info.get("gpus") or []
    if not pci_gpus and not gpus:
        problems.append("no NVIDIA GPU on the PCI bus and none listed by NVML")
    if not driver.get("loaded"):
        problems.append(f"the driver is not usable: {driver.get('reason') or 'unknown'} "
                        f"({driver.get('message') or 'NVML did not open'})")
    if pci_gpus and not gpus and driver.get("loaded"):
        drivers = sorted({g.get("driver") or "none" for g in pci_gpus})
        problems.append(f"{len(pci_gpus)} NVIDIA GPUs on the PCI bus but NVML lists none "
                        f"(kernel driver bound: {', '.join(drivers)})")
    if gpus and "pci" in info and len(pci_gpus) != len(gpus):
        problems.append(_bus_mismatch(pci_gpus, gpus))
    for finding in info.get("health") or []:
        if finding.get("severity") == "error":
            problems.append(f"{finding.get('subject', 'node')}: {finding.get('code')}: {finding.get('message')}")
    return problems


def operand_problems(pods: list, operands: list) -> list:
    """Each operand (its pods' app.kubernetes.io/name) has a pod on the node, Running and Ready."""
    problems = []
    for operand in operands:
        mine = [p for p in pods or [] if ((p.get("metadata") or {}).get("labels") or {})
                .get("app.kubernetes.io/name") == operand]
        if not mine:
            problems.append(f"{operand}: no pod on the node (is the node labelled "
                            "nvidia.com/gpu.deploy.<operand>=true, and the operand deployed?)")
            continue
        for pod in mine:
            status = pod.get("status") or {}
            conds = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
            if status.get("phase") != "Running" or conds.get("Ready") != "True":
                problems.extend(f"{operand}: {line}" for line in k8s_objects.pods_not_ready([pod]))
    return problems


def gfd_labels_expected(info: dict) -> dict:
    """The GPU Feature Discovery labels the node's GPUs should produce."""
    gpus = info.get("gpus") or []
    live = _live(info)
    if not live:
        return {}
    first = live[0]
    expected = {
        "nvidia.com/gpu.product": re.sub(r"\s+", "-", first.get("name", "").strip()),
        "nvidia.com/gpu.count": str(len(gpus)),
    }
    memory = (first.get("memory") or {}).get("total_mib")
    if memory:
        expected["nvidia.com/gpu.memory"] = str(memory)
    version = (info.get("driver") or {}).get("version")
    if version:
        expected["nvidia.com/cuda.driver-version.full"] = version
    cc = first.get("compute_capability")
    if cc and "." in str(cc):
        major, minor = str(cc).split(".", 1)
        expected["nvidia.com/gpu.compute.major"] = major
        expected["nvidia.com/gpu.compute.minor"] = minor
    return expected


def label_problems(info: dict, labels: dict) -> list:
    """GFD's labels on the node against gpu_info. The product may carry GFD's -SHARED or -MIG-...
    suffix."""
    labels = labels or {}
    problems = []
    # with the single MIG strategy GFD describes the MIG devices (product -MIG-<profile>, their
    # count and memory), not the GPUs
    mig_single = "-MIG-" in labels.get("nvidia.com/gpu.product", "")
    for key, want in gfd_labels_expected(info).items():
        if mig_single and key in ("nvidia.com/gpu.count", "nvidia.com/gpu.memory"):
            continue
        have = labels.get(key)
        if have is None:
            problems.append(f"{key} is missing (expected {want}): GFD's labels have not reached the node; "
                            "is GFD running there and Node Feature Discovery's master running?")
        elif key == "nvidia.com/gpu.product":
            if have != want and not have.startswith(want + "-"):
                problems.append(f"{key} is {have}, but the node's GPUs are {want}")
        elif have != want:
            problems.append(f"{key} is {have}, but gpu_info reports {want}")
    return problems


def allocatable_problems(expected: dict, allocatable: dict) -> list:
    """The node's allocatable NVIDIA resources against what its device plugin configuration
    makes of its GPUs: the same names, the same counts."""
    # a resource the plugin no longer advertises stays in allocatable at 0 (kubelet behaviour)
    have = {k: str(v) for k, v in (allocatable or {}).items() if k.startswith("nvidia.com/") and str(v) != "0"}
    want = {k: str(v) for k, v in (expected or {}).items()}
    problems = []
    for key in sorted(set(have) | set(want)):
        if key not in have:
            problems.append(f"{key}: the node advertises none, expected {want[key]}")
        elif key not in want:
            problems.append(f"{key}: the node advertises {have[key]}, its configuration gives none")
        elif have[key] != want[key]:
            problems.append(f"{key}: the node advertises {have[key]}, expected {want[key]}")
    return problems


DRA_DRIVER = "gpu.nvidia.com"


def dra_slice_devices(slices: list, node: str) -> list:
    """The devices NVIDIA's DRA driver publishes for NODE: [{name, type, uuid}] from its
    ResourceSlices (resource.k8s.io/v1) of that node."""
    out = []
    for item in slices or []:
        spec = item.get("spec") or {}
        if spec.get("driver") != DRA_DRIVER or spec.get("nodeName") != node:
            continue
        for device in spec.get("devices") or []:
            attrs = device.get("attributes") or {}
            value = {k: next(iter((v or {}).values()), None) for k, v in attrs.items() if isinstance(v, dict)}
            out.append({"name": device.get("name"), "type": value.get("type"), "uuid": value.get("uuid")})
    return out


def dra_allocated_claims(claims: list) -> list:
    """The ResourceClaims (namespace/name) with devices of NVIDIA's DRA driver for GPUs allocated."""
    held = []
    for claim in claims or []:
        results = ((((claim.get("status") or {}).get("allocation") or {}).get("devices") or {}).get("results") or [])
        if any(r.get("driver") == DRA_DRIVER for r in results):
            meta = claim.get("metadata") or {}
            held.append("%s/%s" % (meta.get("namespace"), meta.get("name")))
    return sorted(held)


def _in_mig_mode(gpu: dict) -> bool:
    """Whether a GPU is in MIG mode with MIG devices: the DRA driver then publishes those, not it."""
    mig = gpu.get("mig") or {}
    return bool(mig.get("current") and mig.get("devices"))


def nvml_devices(info: dict) -> list:
    """The devices NVIDIA's DRA driver publishes for the GPUs gpu_info read from NVML: a GPU in MIG
    mode by its MIG devices, any other by itself. [{uuid, type (gpu or mig), what}]."""
    out = []
    for gpu in _live(info):
        if _in_mig_mode(gpu):
            out += [{"uuid": dev.get("uuid"), "type": "mig", "what": f"MIG device {dev.get('uuid')} of GPU {gpu.get('index')}"}
                    for dev in gpu["mig"]["devices"]]
        else:
            out.append({"uuid": gpu.get("uuid"), "type": "gpu", "what": f"GPU {gpu.get('index')} ({gpu.get('uuid')})"})
    return out


def dra_slice_problems(info: dict, devices: list) -> list:
    """A DRA node's ResourceSlices (dra_slice_devices) against the GPUs and MIG devices gpu_info
    reads from NVML."""
    return dra_device_problems(nvml_devices(info), devices)


def dra_device_problems(nvml: list, devices: list) -> list:
    """The devices a DRA node's ResourceSlices list (dra_slice_devices) against those NVML lists
    there (nvml_devices): UUID for UUID, each device of the right type."""
    want = {d.get("uuid"): (d.get("type"), d.get("what")) for d in nvml or []}
    have = {d.get("uuid"): d for d in devices or []}
    problems = [f"{what} is in NVML but in no ResourceSlice of {DRA_DRIVER}"
                for uuid, (_kind, what) in sorted(want.items()) if uuid not in have]
    problems += [f"ResourceSlice device {d.get('name')} ({uuid}) is not a device NVML lists"
                 for uuid, d in sorted(have.items(), key=lambda item: str(item[0])) if uuid not in want]
    problems += [f"{what} is published as type {have[uuid].get('type')}, not {kind}"
                 for uuid, (kind, what) in sorted(want.items()) if uuid in have and have[uuid].get("type") != kind]
    return problems


def _smi_lines(log: str) -> tuple:
    """(GPU line matches, MIG device line matches) of `nvidia-smi -L` output."""
    stripped = [text.strip() for text in (log or "").splitlines()]
    return ([m for m in (_SMI_GPU_LINE.match(text) for text in stripped) if m],
            [m for m in (_SMI_MIG_LINE.match(text) for text in stripped) if m])


def _mig_profiles(gpu: dict) -> dict:
    """{MIG device UUID: its GPU instance's profile} of a GPU."""
    mig = gpu.get("mig") or {}
    profiles = {gi.get("id"): gi.get("profile") for gi in mig.get("gpu_instances") or []}
    return {d.get("uuid"): profiles.get(d.get("gpu_instance_id")) for d in mig.get("devices") or []}


def dra_claim_request(info: dict) -> dict:
    """The test pod's ResourceClaim on a DRA node asks for one device by attribute, as a user's claim
    does: {device_class, type, attribute, value, expression (CEL), what}. A whole GPU by the product
    name NVML gives it (DeviceClass gpu.nvidia.com), or on a node whose GPUs are all in MIG mode a
    MIG device by its profile (mig.nvidia.com). (CEL's string literals are JSON's.)"""
    def request(device_class, kind, attribute, value):
        return {"device_class": device_class, "type": kind, "attribute": attribute, "value": value,
                "what": f"{attribute} {value}",
                "expression": f"device.attributes['{DRA_DRIVER}'].{attribute} == {json.dumps(value)}"}
    gpus = _live(info)
    whole = [g for g in gpus if not _in_mig_mode(g)]
    if whole:
        return request(DRA_DRIVER, "gpu", "productName", whole[0].get("name") or "")
    for gpu in gpus:
        profile = next((p for p in _mig_profiles(gpu).values() if p), None)
        if profile:
            return request("mig.nvidia.com", "mig", "profile", profile)
    # (no GPU NVML can read: the host check has failed already; the claim then asks for any device)
    return {"device_class": DRA_DRIVER, "type": "gpu", "attribute": None, "value": None, "what": "any device",
            "expression": "true"}


def dra_claim_problems(request: dict, info: dict, devices: list, log: str) -> list:
    """`nvidia-smi -L` in the test pod of a DRA node against its ResourceClaim's REQUEST
    (dra_claim_request): the one device the pod sees (a MIG device by its MIG UUID) is a device
    the node's ResourceSlices publish (dra_slice_devices), of the requested type, and one the
    request's attribute selects by what NVML says of it. (The claim itself is gone by the time the
    pod has ended: the scheduler's claim is deallocated and deleted with the pod's end; smi_problems
    checks that there is exactly one device.)"""
    gpu_lines, mig_lines = _smi_lines(log)
    shown = [m.group(3) for m in mig_lines or gpu_lines]
    if len(shown) != 1:
        return []  # smi_problems names it
    uuid = shown[0]
    published = {d.get("uuid"): d for d in devices or []}
    if uuid not in published:
        return [f"nvidia-smi in the test pod shows {uuid}, which the node's ResourceSlices of {DRA_DRIVER} do not publish"]
    kind = published[uuid].get("type")
    if kind != request.get("type"):
        return [f"nvidia-smi in the test pod shows {uuid}, a device of type {kind}, but its ResourceClaim asked for "
                f"one of type {request.get('type')} ({request.get('device_class')})"]
    if request.get("attribute") == "productName":
        have = next((g.get("name") for g in _live(info) if g.get("uuid") == uuid), None)
    elif request.get("attribute") == "profile":
        have = next((p for g in _live(info) for u, p in _mig_profiles(g).items() if u == uuid), None)
    else:
        return []
    if have != request.get("value"):
        return [f"nvidia-smi in the test pod shows {uuid}, whose {request.get('attribute')} is {have}, but its "
                f"ResourceClaim selected {request.get('what')}"]
    return []


def smi_problems(log: str, info: dict) -> list:
    """`nvidia-smi -L` inside the test pod: exactly one device, one of this node's. A pod given a
    MIG device sees that device's GPU and, below it, the one MIG device."""
    gpu_lines, mig_lines = _smi_lines(log)
    if not gpu_lines and not mig_lines:
        return [f"nvidia-smi listed no GPU in the test pod (log: {(log or '').strip()[-300:] or 'empty'})"]
    uuids = {g.get("uuid") for g in info.get("gpus") or []}
    uuids |= {d.get("uuid") for g in info.get("gpus") or [] for d in (g.get("mig") or {}).get("devices") or []}
    problems = []
    if len(gpu_lines) != 1:
        problems.append(f"the test pod asked for one GPU but nvidia-smi lists {len(gpu_lines)}")
    if len(mig_lines) > 1:
        problems.append(f"the test pod asked for one GPU but nvidia-smi lists {len(mig_lines)} MIG devices")
    shown = [(m.group(3), m.group(2)) for m in gpu_lines] + [(m.group(3), "MIG " + m.group(1)) for m in mig_lines]
    for uuid, name in shown:
        if uuid not in uuids:
            problems.append(f"nvidia-smi in the test pod shows {uuid} ({name}), which is not a GPU of this node")
    return problems


def sample_problems(log: str) -> list:
    """The CUDA vectorAdd sample's verdict."""
    if "Test PASSED" in (log or ""):
        return []
    return [f"the CUDA sample did not pass (log: {(log or '').strip()[-300:] or 'empty'})"]


def metric_uuids(text: str) -> set:
    """The GPU UUIDs that have series in an exporter's /metrics text."""
    return {m.group(1) for line in (text or "").splitlines() if not line.startswith("#")
            for m in _UUID_LABEL.finditer(line)}


def metrics_problems(text: str, info: dict) -> list:
    """The exporter serves a series for every GPU of the node."""
    have = metric_uuids(text)
    missing = [g["uuid"] for g in _live(info) if g.get("uuid") and g["uuid"] not in have]
    if missing:
        return [f"the exporter serves no series for {', '.join(missing)}"]
    return []


def prometheus_target_problems(targets: dict, address: str) -> list:
    """Prometheus scrapes the node's exporter: the target ADDRESS is active and up."""
    active = ((targets or {}).get("data") or {}).get("activeTargets") or []
    mine = [t for t in active if (t.get("discoveredLabels") or {}).get("__address__") == address
            or (t.get("labels") or {}).get("instance") == address]
    if not mine:
        return [f"Prometheus has no target {address}"]
    if not any(t.get("health") == "up" for t in mine):
        last = mine[0]
        return [f"Prometheus target {address} is {last.get('health')}: {last.get('lastError') or ''}".strip()]
    return []


def prometheus_query_problems(query: dict, info: dict) -> list:
    """Prometheus answers a query for each GPU of the node (a result per UUID)."""
    results = ((query or {}).get("data") or {}).get("result") or []
    answered = {(r.get("metric") or {}).get("UUID") for r in results}
    missing = [g["uuid"] for g in _live(info) if g.get("uuid") and g["uuid"] not in answered]
    if missing:
        return [f"Prometheus has no DCGM series for {', '.join(missing)}"]
    return []


def pod_of(pods: list, operand: str) -> dict:
    """The node's pod of OPERAND (app.kubernetes.io/name)."""
    for pod in pods or []:
        if ((pod.get("metadata") or {}).get("labels") or {}).get("app.kubernetes.io/name") == operand:
            return pod
    raise ValueError(f"no {operand} pod on the node")


def verdict(results: list) -> dict:
    """The node's verdict from its check results ({check, ok, evidence}, in checklist order)."""
    failed = [r for r in results if not r.get("ok")]
    first = failed[0] if failed else None
    return {
        "ok": not failed,
        "first_failure": first["check"] if first else None,
        "summary": (f"{first['check']}: {'; '.join(first.get('evidence') or [])}" if first
                    else "all checks passed: " + ", ".join(r["check"] for r in results)),
    }


REUSED = ("not run again: it passed on this node with driver %s, and this run's host stages (driver, toolkit, "
          "MIG) changed nothing there (validate_workload_when: always runs it every time)")


def workload_reuse(previous, node: str, driver, changes, earlier: list):
    """The workload check carried over from the last report (PREVIOUS, its JSON text) when running
    it again would prove nothing new: it passed there for NODE with the same DRIVER, every stage
    change list in CHANGES is empty (None: the stage did not run in this run, so nothing is known),
    and the EARLIER checks of this run passed. Returns the check's result, or None to run it."""
    if not driver or any(change is None or change for change in changes or [None]):
        return None
    if not earlier or not all(result.get("ok") and not result.get("skipped") for result in earlier):
        return None
    try:
        report = json.loads(previous) if previous else None
    except ValueError:
        return None
    nodes = report.get("nodes") if isinstance(report, dict) else None
    entry = next((n for n in nodes or [] if isinstance(n, dict) and n.get("node") == node), None)
    if not entry or entry.get("driver") != driver:
        return None
    check = next((c for c in entry.get("checks") or [] if isinstance(c, dict) and c.get("check") == "workload"), None)
    if not check or not check.get("ok") or check.get("skipped"):
        return None
    evidence = [e for e in check.get("evidence") or [] if isinstance(e, str) and not e.startswith("not run again:")]
    return {"check": "workload", "ok": True, "reused": True, "evidence": [REUSED % driver] + evidence}


def line(result: dict) -> str:
    """One check's line for the log: `  ok   host: ...`, `  FAIL operands: ...`."""
    mark = "skip" if result.get("skipped") else ("ok" if result.get("ok") else "FAIL")
    return f"  {mark:<4} {result.get('check')}: {'; '.join(result.get('evidence') or [])}"

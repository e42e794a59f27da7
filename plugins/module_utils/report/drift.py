# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Drift of a GPU node from what its inventory asks, and of the fleet from itself - the seeds'
"some pods fail only on some nodes". Pure functions: what a node reads of itself in, the items
(each expected against actual, with the fix) and the fleet's groups and outliers out.

An item is {item, expected, actual, ok, fix}; a node's record is {node, items, facts}."""

from __future__ import annotations

__metaclass__ = type

import json
import re

try:
    import tomllib as _toml
except ImportError:  # Python < 3.11: tomli, else tomlkit (which runtime_config needs anyway)
    try:
        import tomli as _toml
    except ImportError:
        _toml = None
try:
    import tomlkit as _tomlkit
except ImportError:
    _tomlkit = None

from ansible_collections.gpuops.nvidia.plugins.module_utils.k8s import node_checks

# the facts the fleet view groups the nodes by
FLEET_KEYS = ("driver", "toolkit", "runtime", "kernel", "gpu_models", "mig_layout", "device_plugin", "dcgm_exporter")
# the facts on which a node differing from its peers is an outlier (not the hardware): peers are the
# nodes the inventory asks the same of (record["expected"][key]), and it takes three to tell
OUTLIER_KEYS = ("driver", "toolkit", "runtime", "kernel", "device_plugin", "dcgm_exporter")


def item(name: str, expected, actual, ok: bool, fix: str) -> dict:
    return {"item": name, "expected": expected, "actual": actual, "ok": bool(ok), "fix": "" if ok else fix}


def _wanted(version: str | None, branch: str | None) -> str:
    return version or (branch and "branch %s" % branch) or "any"


def _on_target(actual: str | None, version: str | None, branch: str | None) -> bool:
    if not actual:
        return False
    if version:
        return actual == version
    return not branch or actual.split(".")[0] == str(branch)


# what the driver role holds: its packages but firmware, kernel headers and modules, Python bindings
_NOT_HELD = re.compile(r"^(firmware-|linux-modules-|linux-headers-|python3-)")


def held_packages(requires: list, installed: set) -> list:
    """The packages of the driver role's record that it holds, as installed now."""
    return sorted(name for name in requires if not _NOT_HELD.match(name) and name in installed)


def driver_items(installed: str | None, loaded: str | None, held: list, driver_packages: list, pin_text: str | None,
                 version: str | None, branch: str | None, hold: bool = True) -> list:
    """The driver as installed, loaded, held and pinned, against driver_version / driver_branch."""
    wanted = _wanted(version, branch)
    out = [
        item("driver installed", wanted, installed, _on_target(installed, version, branch),
             "run the driver stage (site.yml --tags driver), or upgrade.yml for a new version"),
        item("driver loaded", installed, loaded, bool(installed) and loaded == installed,
             "reboot the node so the installed driver loads" if installed else "install the driver"),
    ]
    if hold:
        unheld = sorted(set(driver_packages) - set(held))
        out.append(item("driver packages held", "held", "not held: %s" % ", ".join(unheld) if unheld else "held",
                        not unheld, "run the driver stage: it holds them (unattended upgrades would replace the driver)"))
    pinned = None
    if pin_text:
        match = re.search(r"^Pin:\s*version\s+(\S+)", pin_text, re.M)
        pinned = match.group(1) if match else None
    expected_pin = ("%s-*" % version) if version else ("%s.*" % branch if branch else None)
    if expected_pin:
        out.append(item("driver pinned", expected_pin, pinned, pinned == expected_pin,
                        "run the driver stage: it pins the driver packages to the branch or version"))
    return out


def toolkit_item(installed: str | None, version: str | None) -> dict:
    return item("container toolkit", version or "installed", installed,
                bool(installed) and (not version or installed == version),
                "run the toolkit stage (site.yml --tags toolkit)")


class NoTomlParser(Exception):
    """Neither tomllib, tomli nor tomlkit: a TOML configuration cannot be audited."""


def _toml_load(text: str | None) -> dict:
    if not text:
        return {}
    try:
        if _toml is not None:
            return _toml.loads(text)
        if _tomlkit is not None:
            return _tomlkit.parse(text).unwrap()
    except ValueError:
        return {}
    raise NoTomlParser("no TOML parser on the node: install tomli or tomlkit for the Python that runs Ansible's "
                       "modules, to audit the container runtime's configuration")


def _find_runtime(tree, runtime_name: str):
    """The NVIDIA runtime table of a containerd configuration, in any CRI plugin layout."""
    for key in ("io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime", "cri"):
        cri = ((tree.get("plugins") or {}).get(key)) or {}
        runtime = ((cri.get("containerd") or {}).get("runtimes") or {}).get(runtime_name)
        if runtime:
            return cri, runtime
    return None, None


def containerd_items(texts: dict, runtime_name: str = "nvidia", cdi: bool = False) -> list:
    """texts: {path: content} of the main configuration and its drop-ins. The NVIDIA runtime with
    nvidia-container-runtime as its binary, and CDI enabled when expected."""
    found, enabled = None, False
    for path, text in texts.items():
        cri, runtime = _find_runtime(_toml_load(text), runtime_name)
        if runtime:
            binary = ((runtime.get("options") or {}).get("BinaryName")) or ""
            if binary.endswith("nvidia-container-runtime"):
                found = path
        if cri and cri.get("enable_cdi"):
            enabled = True
    out = [item("containerd: NVIDIA runtime", "runtimes.%s (nvidia-container-runtime)" % runtime_name,
                found or "missing", bool(found), "run the toolkit stage: it adds the runtime (drop-in or in place)")]
    if cdi:
        out.append(item("containerd: CDI", "enable_cdi = true", "on" if enabled else "off", enabled,
                        "run the toolkit stage (container_toolkit_enable_cdi)"))
    return out


def docker_items(text: str | None, runtime_name: str = "nvidia", cdi: bool = False) -> list:
    try:
        data = json.loads(text) if text else {}
    except ValueError:
        data = {}
    path = ((data.get("runtimes") or {}).get(runtime_name) or {}).get("path") or ""
    out = [item("docker: NVIDIA runtime", "runtimes.%s" % runtime_name, path or "missing",
                path.endswith("nvidia-container-runtime"), "run the toolkit stage: it merges the runtime into daemon.json")]
    if cdi:
        enabled = bool((data.get("features") or {}).get("cdi"))
        out.append(item("docker: CDI", "features.cdi = true", "on" if enabled else "off", enabled,
                        "run the toolkit stage (container_toolkit_enable_cdi)"))
    return out


def crio_items(texts: dict, runtime_name: str = "nvidia") -> list:
    found = None
    for path, text in texts.items():
        runtime = (((_toml_load(text).get("crio") or {}).get("runtime") or {}).get("runtimes") or {}).get(runtime_name)
        if runtime and str(runtime.get("runtime_path", "")).endswith("nvidia-container-runtime"):
            found = path
    return [item("cri-o: NVIDIA runtime", "crio.runtime.runtimes.%s" % runtime_name, found or "missing", bool(found),
                 "run the toolkit stage: it writes the CRI-O drop-in")]


_CDI_WORDS = {"cdi_device_missing": "misses %d device(s) NVML reports", "cdi_device_stale": "names %d device(s) NVML "
              "no longer reports", "cdi_device_node_missing": "%d device node(s) missing"}


def cdi_item(report: dict) -> dict:
    """From cdi.check()'s report: the spec names every GPU and nothing stale (the devices counted,
    not listed: a stale MIG spec names dozens)."""
    errors = [f for f in report.get("findings") or [] if f.get("severity") == "error"]
    said = []
    for finding in errors:
        words = _CDI_WORDS.get(finding.get("code"))
        count = len(finding.get("devices") or finding.get("paths") or [])
        said.append(words % count if words and count else finding["message"][:120])
    return item("CDI spec", "matches the GPUs", "; ".join(said) or "matches",
                not errors, "regenerate it: run the toolkit stage (it regenerates a stale spec)")


def mig_item(name: str, plan: dict | None, error: str | None = None) -> dict:
    """From mig_apply.plan_only(): the layout matches when the plan has no step."""
    steps = (plan or {}).get("steps") or []
    actual = error or ("matches" if not steps else "%d step(s) away" % len(steps))
    return item("MIG layout", name, actual, not error and not steps,
                "run the mig stage (site.yml --tags mig), or let the node's nvidia.com/mig.config label choose")


def hardware_items(verdict: dict | None, events: list) -> list:
    out = []
    if verdict is not None:
        out.append(item("GPU health", "healthy", verdict.get("text"), verdict.get("status") in ("healthy", "attention"),
                        "see the node's GPU report (site.yml --tags report)"))
    for event in events or []:
        if event.get("event") in ("gpu_lost", "gpu_swapped", "gpu_added"):
            out.append(item("GPU %s" % event.get("index"), "as recorded", event.get("message"), False,
                            "look at the GPU; the report stage records the change"))
    return out


def summary(node_items: list) -> dict:
    drifted = [i for i in node_items if not i["ok"]]
    return {"drifted": bool(drifted), "count": len(drifted), "items": [i["item"] for i in drifted]}


def _text(value) -> str:
    return value if isinstance(value, str) else json.dumps(value, sort_keys=True)


def fleet(records: list) -> dict:
    """The fleet by each FLEET_KEYS fact: {key: {value: [nodes]}}, and the outliers: among nodes the
    inventory asks the same of (record["expected"], when given), a node whose value differs from
    the one a strict majority of at least three such nodes has."""
    groups, outliers = {}, []
    for key in FLEET_KEYS:
        by_value = {}
        for record in records:
            value = (record.get("facts") or {}).get(key)
            if value is not None:
                by_value.setdefault(_text(value), []).append(record["node"])
        if by_value:
            groups[key] = {value: sorted(nodes) for value, nodes in sorted(by_value.items())}
        if key not in OUTLIER_KEYS:
            continue
        peers = {}
        for record in records:
            value = (record.get("facts") or {}).get(key)
            if value is not None:
                peers.setdefault(_text((record.get("expected") or {}).get(key)), []).append((record["node"], _text(value)))
        for members in peers.values():
            counts = {}
            for _node, value in members:
                counts[value] = counts.get(value, 0) + 1
            majority, most = max(counts.items(), key=lambda pair: (pair[1], pair[0]))
            if len(members) < 3 or most * 2 <= len(members):
                continue
            outliers += [{"node": node, "key": key, "value": value, "majority": majority}
                         for node, value in sorted(members) if value != majority]
    return {"groups": groups, "outliers": outliers}


def lines(records: list, view: dict) -> list:
    """The audit for a job log: a line per node (drift or not), then the fleet's groups where they
    differ, then the outliers."""
    out = []
    width = max([len(r["node"]) for r in records] or [0])
    for record in sorted(records, key=lambda r: (not r["summary"]["drifted"], r["node"])):
        drifted = [i for i in record["items"] if not i["ok"]]
        if not drifted:
            out.append("%s  no drift" % record["node"].ljust(width))
            continue
        out.append("%s  DRIFT %d: %s" % (record["node"].ljust(width), len(drifted), ", ".join(i["item"] for i in drifted)))
        for entry in drifted:
            out.append("    %s: expected %s, found %s; fix: %s" % (entry["item"], entry["expected"], entry["actual"], entry["fix"]))
    for key, groups in view["groups"].items():
        if len(groups) > 1:
            out.append("%s differs across the fleet: %s" % (key, "; ".join(
                "%s on %s" % (value, ", ".join(nodes)) for value, nodes in groups.items())))
    for outlier in view["outliers"]:
        out.append("outlier: %s has %s %s (most nodes: %s)"
                   % (outlier["node"], outlier["key"], outlier["value"], outlier["majority"]))
    drifted = sum(1 for r in records if r["summary"]["drifted"])
    out.append("%d node(s): %d drifted, %d outlier(s)" % (len(records), drifted, len({o["node"] for o in view["outliers"]})))
    return out


# ---- the cluster's side of a node --------------------------------------------------------------

def _images(obj: dict) -> dict:
    spec = (obj.get("spec") or {})
    spec = (spec.get("template") or {}).get("spec") or spec
    return {c.get("name"): c.get("image") for c in spec.get("containers") or []}


ALLOCATORS = (("device-plugin", "nvidia.com/gpu.deploy.device-plugin"), ("dra", "nvidia.com/gpu.deploy.dra-driver"))


def allocators_on(labels: dict | None) -> list:
    """The allocators a node's deploy labels run there (device-plugin, dra), in ALLOCATORS' order."""
    return [name for name, label in ALLOCATORS if (labels or {}).get(label) == "true"]


def allocation_item(allocation: str, have: dict) -> dict:
    """What allocates the node's GPUs, by its deploy labels, against its gpu_allocation: one of
    the device plugin and NVIDIA's DRA driver; both at once is drift whatever was asked."""
    on = allocators_on(have)
    actual = " and ".join(on) if on else "none"
    return item("GPU allocation", allocation, actual, on == [allocation],
                "run the labels and operands stages (site.yml --tags labels,operands) with the node's gpu_allocation; "
                "a node is served by the device plugin or the DRA driver, never both")


def dra_devices_item(node_name: str, slices: list, devices: list) -> dict:
    """A DRA node's ResourceSlices against the devices NVML lists on it (node_audit's devices),
    UUID for UUID: a GPU NVML sees and the slices do not list, or the reverse, is drift."""
    problems = node_checks.dra_device_problems(devices, node_checks.dra_slice_devices(slices, node_name))
    return item("DRA devices", "the %d device(s) NVML lists" % len(devices or []),
                "; ".join(problems) if problems else "the same %d device(s)" % len(devices or []), not problems,
                "the DRA driver's kubelet plugin publishes what NVML showed when it started: restart its pod on the "
                "node (after a MIG change outside the mig role, say); a GPU NVML lost is hardware (see the GPU items)")


def cluster_items(node_name: str, nodes: list, pods: list, daemonsets: list, labels: dict,
                  allocation: str | None = None, slices: list | None = None, devices: list | None = None) -> tuple:
    """(items, facts) of one node as the cluster sees it: the labels the collection sets with the
    values asked for, what allocates its GPUs against ``allocation`` (its gpu_allocation, when
    given), on a DRA node its ResourceSlices against the ``devices`` NVML lists there (when the
    node's part of the audit read them and the slices could be read: None is not), and every operand pod on the node running its
    DaemonSet's current image (a pod left on an old image is a rollout that did not reach the node)."""
    node = next((n for n in nodes or [] if (n.get("metadata") or {}).get("name") == node_name), None)
    if node is None:
        return [item("Kubernetes node", node_name, "not in the cluster", False,
                     "join the node, or set node_labels_node_name to its node name")], {}
    have = (node.get("metadata") or {}).get("labels") or {}
    out, facts = [], {}
    for key, value in sorted((labels or {}).items()):
        out.append(item("label %s" % key, value, have.get(key), have.get(key) == value,
                        "run the labels stage (site.yml --tags labels)"))
    if allocation:
        out.append(allocation_item(allocation, have))
    if allocation == "dra" and devices and slices is not None:
        out.append(dra_devices_item(node_name, slices, devices))
    wanted = {}
    for ds in daemonsets or []:
        meta = ds.get("metadata") or {}
        wanted[(meta.get("namespace"), meta.get("name"))] = _images(ds)
    for pod in pods or []:
        meta = pod.get("metadata") or {}
        if (pod.get("spec") or {}).get("nodeName") != node_name:
            continue
        owner = next((o.get("name") for o in meta.get("ownerReferences") or [] if o.get("kind") == "DaemonSet"), None)
        images = wanted.get((meta.get("namespace"), owner))
        if images is None:
            continue
        for container, image in sorted(_images(pod).items()):
            facts[owner.replace("nvidia-", "").replace("-", "_")] = image
            out.append(item("%s image" % owner, images.get(container), image, images.get(container) == image,
                            "the rollout did not reach the node: look at the DaemonSet's pods (site.yml --tags operands)"))
    return out, facts


def record(node: str, node_result: dict, extra_items: list = (), extra_facts: dict | None = None) -> dict:
    """A node's audit record from node_audit's result and the cluster's items; ``expected`` is what
    its inventory asks (the fleet view compares a node with the nodes asked the same)."""
    all_items = list((node_result or {}).get("audit_items") or []) + list(extra_items or [])
    facts = dict((node_result or {}).get("facts") or {}, **(extra_facts or {}))
    return {"node": node, "items": all_items, "facts": facts, "expected": (node_result or {}).get("expected") or {},
            "summary": summary(all_items)}

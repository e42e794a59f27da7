# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""node_audit's service: one read-only pass over a node - the driver (installed, loaded, held,
pinned), the container toolkit, the container runtime's configuration, the CDI spec, the MIG
layout, the GPUs' health and identity against the inventory record - turned into drift items
(report/drift) and the facts the fleet view groups nodes by.

Reads only; the records (the driver role's package record, the GPU inventory record) are read
through host/records, and one that cannot be used is a drift item naming the file, what is wrong
with it and the fix - a read-only check reports it rather than failing."""

from __future__ import annotations

__metaclass__ = type

import os

from ansible_collections.gpuops.nvidia.plugins.module_utils.host import commands
from ansible_collections.gpuops.nvidia.plugins.module_utils.host import driver_state
from ansible_collections.gpuops.nvidia.plugins.module_utils.host import files
from ansible_collections.gpuops.nvidia.plugins.module_utils.host import kernel
from ansible_collections.gpuops.nvidia.plugins.module_utils.host import records
from ansible_collections.gpuops.nvidia.plugins.module_utils.k8s import node_checks
from ansible_collections.gpuops.nvidia.plugins.module_utils.nvml import adapter as nvml
from ansible_collections.gpuops.nvidia.plugins.module_utils.report import drift
from ansible_collections.gpuops.nvidia.plugins.module_utils.report import gpu_facts
from ansible_collections.gpuops.nvidia.plugins.module_utils.report import health
from ansible_collections.gpuops.nvidia.plugins.module_utils.report import inventory
from ansible_collections.gpuops.nvidia.plugins.module_utils.report import node_report
from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime import cdi
from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime import detect

DRIVER_RECORD = "driver package record"
# the stage that writes each record anew once the unusable one is moved away
REWRITTEN_BY = {DRIVER_RECORD: "the driver stage (site.yml --tags driver)",
                node_report.WHAT: "the report stage (site.yml --tags report)"}


def record_item(what: str, problem) -> dict:
    """The drift item of a record that cannot be used (problem: the RecordError, which names the
    file and what is wrong with it)."""
    return drift.item(what, "readable", str(problem), False,
                      "move the file away; %s writes it anew" % REWRITTEN_BY.get(what, "the stage that keeps it"))


def driver_requires(path: str) -> list:
    """The packages the driver role's record says it installed (requires); [] when there is no
    record. Raises RecordError when it cannot be used."""
    _text, record = records.read(path, dict, DRIVER_RECORD)
    requires = (record or {}).get("requires") or []
    if not isinstance(requires, list) or not all(isinstance(name, str) for name in requires):
        raise records.RecordError("the %s %s holds requires that are not a list of package names: move it away "
                                  "and run the driver stage to write it anew" % (DRIVER_RECORD, path))
    return requires


def runtime(module, requested: str, root: str) -> tuple:
    """(runtime, version) the audit checks: asked for, else the kubelet's, the one running or the
    one installed; (None, None) when there is none."""
    found = detect.probe(module, requested, root)
    chosen = found["choice"]["runtime"]
    return chosen, (found["installed"].get(chosen) or {}).get("version")


def config_texts(root: str, main: str, directory: str | None) -> dict:
    """{path: text} of a runtime's main configuration file and its drop-ins."""
    texts = {}
    text = files.read_text(records.under(root, main))
    if text is not None:
        texts[main] = text
    if directory and os.path.isdir(records.under(root, directory)):
        for name in sorted(os.listdir(records.under(root, directory))):
            if name.endswith((".toml", ".conf")):
                texts[os.path.join(directory, name)] = files.read_text(records.under(root, os.path.join(directory, name))) or ""
    return texts


def uses_cdi(cdi_asked: str, name: str, version: tuple | None) -> bool:
    return cdi_asked == "true" or (cdi_asked == "auto" and bool(detect.cdi_supported(name, version)))


def runtime_fact(name: str, version: tuple | None) -> str:
    return "%s %s" % (name, ".".join(map(str, version)) if version else "?")


def runtime_items(module, params: dict, root: str) -> tuple:
    """(items, the runtime fact) of the container runtime's configuration. Raises
    drift.NoTomlParser when a TOML configuration cannot be read on this node."""
    name, version = runtime(module, params["runtime"], root)
    if not name:
        return [drift.item("container runtime", "installed", "none found", False,
                           "install the container runtime the kubelet uses")], None
    cdi_on = uses_cdi(params["cdi"], name, version)
    main, drop_in = detect.CONFIG_FILES[name]
    directory = os.path.dirname(drop_in) if drop_in else None
    try:
        if name == "containerd":
            found = drift.containerd_items(config_texts(root, main, directory), params["runtime_name"], cdi_on)
        elif name == "docker":
            found = drift.docker_items(files.read_text(records.under(root, main)), params["runtime_name"], cdi_on)
        else:
            found = drift.crio_items(config_texts(root, main, directory), params["runtime_name"])
    except files.FileError as exc:
        # a configuration file that cannot be read is the finding (the runtime cannot read it either)
        found = [drift.item("%s configuration" % name, "readable", str(exc), False,
                            "fix or move away the file the message names, then run the toolkit stage")]
    return found, runtime_fact(name, version)


def mig_item(params: dict, root: str) -> dict:
    from ansible_collections.gpuops.nvidia.plugins.module_utils.mig import apply as mig_apply
    from ansible_collections.gpuops.nvidia.plugins.module_utils.mig import service as mig_service
    try:
        # a config that cannot be read or parsed, or of the wrong shape, is the item's finding
        document = mig_service.load_config(records.under(root, params["mig_config_file"]), None)
        result, _record = mig_apply.plan_only(document, params["mig_config_name"])
    except mig_service.MigError as exc:
        return drift.mig_item(params["mig_config_name"], None, "config not readable: %s" % exc.message)
    except mig_apply.ApplyError as exc:
        return drift.mig_item(params["mig_config_name"], None, exc.message)
    return drift.mig_item(params["mig_config_name"], result["plan"])


def driver_items(module, params: dict, root: str, info: dict | None) -> tuple:
    """(items, driver fact): installed, loaded, held and pinned, and the driver record when it
    cannot be used."""
    packages, held = driver_state.read_installed(root, lambda argv: commands.output(module, argv))
    installed, _source = driver_state.installed_driver_version(packages)
    # where procfs/sysfs do not show the module (in a container), NVML tells which driver answers
    loaded = kernel.loaded_module(root)["version"] or ((info or {}).get("driver") or {}).get("version")
    unusable = []
    try:
        requires = driver_requires(records.under(root, params["driver_record"]))
    except records.RecordError as exc:
        requires, unusable = [], [record_item(DRIVER_RECORD, exc)]
    holdable = drift.held_packages(requires, set(packages))
    try:
        pin = files.read_text(records.under(root, params["driver_pin_file"]), "driver pin")
    except files.FileError as exc:
        pin = None
        unusable.append(drift.item("driver pin", "readable", str(exc), False,
                                   "move the file away; the driver stage writes it anew"))
    items = drift.driver_items(installed, loaded, held, holdable, pin, params["driver_version"],
                               params["driver_branch"], params["driver_hold"])
    return items + unusable, loaded or installed


def toolkit_version(root: str) -> str | None:
    toolkit = (driver_state.read_dpkg_status(root) or {}).get("nvidia-container-toolkit") or {}
    return driver_state.upstream_version(toolkit["version"]) if toolkit.get("installed") else None


def hardware_items(params: dict, root: str, info: dict) -> list:
    """GPU health and identity against the inventory record (its hardware changes), and the
    inventory record when it cannot be used."""
    events, node_verdict, items = [], info["verdict"], []
    if params["inventory_path"]:
        try:
            _text, previous = node_report.read_inventory(records.under(root, params["inventory_path"]))
            record, events = inventory.merge(previous, info, host="", now="now")
            # GPUs the record knows that NVML no longer lists are errors too
            node_verdict = health.verdict(info["health"] + health.missing_findings(record),
                                          inventory.identities(record, info["gpus"]))
        except records.RecordError as exc:
            items.append(record_item(node_report.WHAT, exc))
    return drift.hardware_items(node_verdict if info["driver"]["loaded"] else None, events) + items


def gpu_items(params: dict, root: str, info: dict) -> tuple:
    """(items, facts) of what NVML shows: health and identity, the CDI spec, the MIG layout."""
    facts = {"gpu_models": sorted({gpu.get("name") or "unknown (lost)" for gpu in info["gpus"]})}
    items = hardware_items(params, root, info)
    if params["cdi_spec_dirs"] and info["driver"]["loaded"] and cdi.HAS_YAML:
        specs, problems = cdi.read_specs(params["cdi_spec_dirs"], root)
        items.append(drift.cdi_item(cdi.check(specs, problems, info["gpus"])))
    if params["mig_config_name"] and info["driver"]["loaded"]:
        items.append(mig_item(params, root))
        facts["mig_layout"] = params["mig_config_name"] if items[-1]["ok"] else items[-1]["actual"]
    return items, facts


def expected(params: dict) -> dict:
    """What the node was asked for (the fleet view compares nodes asked the same)."""
    return {"driver": params["driver_version"] or params["driver_branch"] or None,
            "toolkit": params["toolkit_version"] or None}


def audit(module, params: dict) -> dict:
    """node_audit's result (params: its options): items, drifted, facts, expected. Raises
    drift.NoTomlParser when the runtime's TOML configuration cannot be read on this node."""
    root = params["host_root"]
    info = gpu_facts.gather(host_root=root, xid_wait_ms=0, kernel_log=False) if nvml.HAS_PYNVML else None
    items, facts = [], {}
    found, facts["driver"] = driver_items(module, params, root, info)
    items += found
    facts["toolkit"] = toolkit_version(root)
    items.append(drift.toolkit_item(facts["toolkit"], params["toolkit_version"]))
    if params["runtime"] != "none":
        found, facts["runtime"] = runtime_items(module, params, root)
        items += found
    facts["kernel"] = os.uname()[2] if root == "/" else None
    if info is not None:
        found, gpu_facts_found = gpu_items(params, root, info)
        items += found
        facts.update(gpu_facts_found)
    return {"changed": False, "audit_items": items, "drifted": any(not i["ok"] for i in items), "facts": facts,
            "expected": expected(params),
            # (what a DRA node's ResourceSlices must list: the audit's cluster part compares them)
            "devices": node_checks.nvml_devices(info) if info is not None else []}

#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

__metaclass__ = type

DOCUMENTATION = r"""
---
module: node_audit
short_description: Audit a GPU node against what its inventory asks, in one read-only pass
version_added: 0.2.0
description:
  - Reads, in one pass on the node, everything the drift audit compares - the NVIDIA driver
    (installed, loaded, held, pinned), the container toolkit's version, the container runtime's
    configuration for the NVIDIA runtime and CDI, the CDI spec against the GPUs, the MIG layout
    against the one asked for, the GPUs' health and identity against the node's inventory record
    - and returns one item per check (expected, actual, ok, fix) and the facts the fleet view groups
    nodes by.
  - Changes nothing; an hourly check-mode job over a whole fleet costs one task per node.
author:
  - gpuops.nvidia maintainers (@gpuops)
requirements:
  - nvidia-ml-py (Python module C(pynvml)) on the node, for the GPU, CDI and MIG items
options:
  driver_branch:
    description: The driver branch asked for (C(driver_branch)).
    type: str
    default: ""
  driver_version:
    description: The exact driver version asked for (C(driver_version)); empty - any of the branch.
    type: str
    default: ""
  driver_hold:
    description: Whether the driver packages must be held (C(driver_hold)).
    type: bool
    default: true
  driver_pin_file:
    description: The apt pin the driver role writes.
    type: path
    default: /etc/apt/preferences.d/gpuops-nvidia-driver.pref
  driver_record:
    description: The record of the driver role's installations (the packages it holds are read from it).
    type: path
    default: /var/lib/gpuops/packages/driver.json
  toolkit_version:
    description: The container toolkit version asked for (C(container_toolkit_version)); empty - any.
    type: str
    default: ""
  runtime:
    description: The container runtime to check (C(auto) - the kubelet's, else the one running, else the one installed); C(none) checks none.
    type: str
    default: auto
    choices: [auto, containerd, crio, docker, none]
  runtime_name:
    description: The name of the NVIDIA runtime in the runtime's configuration.
    type: str
    default: nvidia
  cdi:
    description: Whether the runtime must have CDI enabled (C(auto) - where it supports it).
    type: str
    default: auto
    choices: ["auto", "true", "false"]
  cdi_spec_dirs:
    description: Where the CDI specs are; empty - no CDI item.
    type: list
    elements: path
    default: [/etc/cdi, /var/run/cdi]
  mig_config_name:
    description: The MIG layout asked for (C(mig_config_name)); empty - no MIG item.
    type: str
    default: ""
  mig_config_file:
    description: The mig-parted config the mig role writes.
    type: path
    default: /etc/gpuops-nvidia/mig-config.yaml
  inventory_path:
    description: The node's GPU inventory record (the gpu_report role's); empty - no hardware item.
    type: path
    default: /var/lib/gpuops/gpu-inventory.json
  host_root:
    description: Where the host's file systems are (a container that mounts the host elsewhere).
    type: path
    default: /
extends_documentation_fragment:
  - gpuops.nvidia.attributes.read_only
seealso:
  - module: gpuops.nvidia.gpu_report
  - module: gpuops.nvidia.driver_status
"""

EXAMPLES = r"""
- name: Audit the node against the inventory
  gpuops.nvidia.node_audit:
    driver_branch: "{{ driver_branch }}"
    driver_version: "{{ driver_version }}"
    mig_config_name: "{{ mig_config_name | default('') }}"
  register: audit

- name: Say what drifted
  ansible.builtin.debug:
    msg: "{{ audit.items | rejectattr('ok') | map(attribute='item') | list }}"
"""

RETURN = r"""
items:
  description: One check each - C(item), C(expected), C(actual), C(ok), C(fix).
  returned: always
  type: list
  elements: dict
  sample:
    - {item: driver loaded, expected: 580.95.05, actual: 570.172.08, ok: false, fix: reboot the node so the installed driver loads}
drifted:
  description: Whether any item is not ok.
  returned: always
  type: bool
expected:
  description: What the node was asked for (the fleet view compares a node with the nodes asked the same).
  returned: always
  type: dict
  sample: {driver: 580.95.05, toolkit: null}
facts:
  description: What the fleet view groups nodes by - driver, toolkit, runtime, kernel, gpu_models, mig_layout.
  returned: always
  type: dict
  sample: {driver: 580.95.05, toolkit: 1.18.0, runtime: containerd 1.7.24, kernel: 6.1.0-40-amd64, gpu_models: [NVIDIA H100 80GB HBM3]}
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuops.nvidia.plugins.module_utils.host import commands
from ansible_collections.gpuops.nvidia.plugins.module_utils.host import driver_state
from ansible_collections.gpuops.nvidia.plugins.module_utils.report import drift
from ansible_collections.gpuops.nvidia.plugins.module_utils.host import files
from ansible_collections.gpuops.nvidia.plugins.module_utils.report import gpu_facts
from ansible_collections.gpuops.nvidia.plugins.module_utils.report import inventory as gpu_inventory
from ansible_collections.gpuops.nvidia.plugins.module_utils.report import health
from ansible_collections.gpuops.nvidia.plugins.module_utils.host import kernel
from ansible_collections.gpuops.nvidia.plugins.module_utils.nvml import adapter as nvml
from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime import detect

CONFIGS = {
    "containerd": ("/etc/containerd/config.toml", "/etc/containerd/conf.d"),
    "crio": ("/etc/crio/crio.conf", "/etc/crio/crio.conf.d"),
    "docker": ("/etc/docker/daemon.json", None),
}


def _under(root, path):
    return os.path.join(root, path.lstrip("/"))


def _texts(root, main, directory):
    texts = {}
    text = files.read_text(_under(root, main))
    if text is not None:
        texts[main] = text
    if directory and os.path.isdir(_under(root, directory)):
        for name in sorted(os.listdir(_under(root, directory))):
            if name.endswith((".toml", ".conf")):
                texts[os.path.join(directory, name)] = files.read_text(_under(root, os.path.join(directory, name))) or ""
    return texts


def _json(text):
    try:
        data = json.loads(text) if text else {}
    except ValueError:
        return {}
    return data if isinstance(data, dict) else {}


def _runtime(module, requested, root):
    installed, active = {}, []
    systemctl = module.get_bin_path("systemctl")
    for runtime in detect.RUNTIMES:
        binary = module.get_bin_path(detect.BINARIES[runtime], opt_dirs=["/usr/local/bin", "/usr/bin", "/usr/sbin"])
        if systemctl and commands.output(module, [systemctl, "is-active", detect.SERVICES[runtime]]).strip() == "active":
            active.append(runtime)
        if binary:
            installed[runtime] = detect.parse_version(commands.output(module, [binary, "--version"]))
    endpoint, source = detect.kubelet_endpoint(root)
    choice = detect.choose(requested, installed, active, endpoint, source)
    return choice["runtime"], installed.get(choice["runtime"])


def _runtime_items(module, params, root):
    runtime, version = _runtime(module, params["runtime"], root)
    if not runtime:
        return [drift.item("container runtime", "installed", "none found", False,
                           "install the container runtime the kubelet uses")], None
    cdi = params["cdi"] == "true" or (params["cdi"] == "auto" and bool(detect.cdi_supported(runtime, version)))
    main, directory = CONFIGS[runtime]
    if runtime == "containerd":
        found = drift.containerd_items(_texts(root, main, directory), params["runtime_name"], cdi)
    elif runtime == "docker":
        found = drift.docker_items(files.read_text(_under(root, main)), params["runtime_name"], cdi)
    else:
        found = drift.crio_items(_texts(root, main, directory), params["runtime_name"])
    return found, "%s %s" % (runtime, ".".join(map(str, version)) if version else "?")


def _mig_item(params, root):
    from ansible_collections.gpuops.nvidia.plugins.module_utils.mig import apply as mig_apply
    try:
        import yaml  # pylint: disable=import-outside-toplevel
        with open(_under(root, params["mig_config_file"]), encoding="utf-8") as handle:
            document = yaml.safe_load(handle)
        result, _record = mig_apply.plan_only(document, params["mig_config_name"])
    except (OSError, ImportError) as exc:
        return drift.mig_item(params["mig_config_name"], None, "config not readable: %s" % exc)
    except mig_apply.ApplyError as exc:
        return drift.mig_item(params["mig_config_name"], None, exc.message)
    return drift.mig_item(params["mig_config_name"], result["plan"])


def main():
    module = AnsibleModule(
        argument_spec=dict(
            driver_branch=dict(type="str", default=""),
            driver_version=dict(type="str", default=""),
            driver_hold=dict(type="bool", default=True),
            driver_pin_file=dict(type="path", default="/etc/apt/preferences.d/gpuops-nvidia-driver.pref"),
            driver_record=dict(type="path", default="/var/lib/gpuops/packages/driver.json"),
            toolkit_version=dict(type="str", default=""),
            runtime=dict(type="str", default="auto", choices=["auto", "containerd", "crio", "docker", "none"]),
            runtime_name=dict(type="str", default="nvidia"),
            cdi=dict(type="str", default="auto", choices=["auto", "true", "false"]),
            cdi_spec_dirs=dict(type="list", elements="path", default=["/etc/cdi", "/var/run/cdi"]),
            mig_config_name=dict(type="str", default=""),
            mig_config_file=dict(type="path", default="/etc/gpuops-nvidia/mig-config.yaml"),
            inventory_path=dict(type="path", default="/var/lib/gpuops/gpu-inventory.json"),
            host_root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    root = params["host_root"]
    items, facts = [], {}

    info = gpu_facts.gather(host_root=root, xid_wait_ms=0, kernel_log=False) if nvml.HAS_PYNVML else None
    packages, held = driver_state.read_installed(root, lambda argv: commands.output(module, argv))
    installed, _source = driver_state.installed_driver_version(packages)
    # where procfs/sysfs do not show the module (in a container), NVML tells which driver answers
    loaded = kernel.loaded_module(root)["version"] or ((info or {}).get("driver") or {}).get("version")
    record = _json(files.read_text(_under(root, params["driver_record"])))
    holdable = drift.held_packages(record.get("requires") or [], set(packages))
    items += drift.driver_items(installed, loaded, held, holdable, files.read_text(_under(root, params["driver_pin_file"])),
                                params["driver_version"], params["driver_branch"], params["driver_hold"])
    facts["driver"] = loaded or installed

    status = driver_state.read_dpkg_status(root) or {}
    toolkit = status.get("nvidia-container-toolkit") or {}
    toolkit_version = driver_state.upstream_version(toolkit["version"]) if toolkit.get("installed") else None
    items.append(drift.toolkit_item(toolkit_version, params["toolkit_version"]))
    facts["toolkit"] = toolkit_version

    if params["runtime"] != "none":
        try:
            found, facts["runtime"] = _runtime_items(module, params, root)
        except drift.NoTomlParser as exc:
            module.fail_json(msg=str(exc))
        items += found
    facts["kernel"] = os.uname()[2] if root == "/" else None

    if info is not None:
        facts["gpu_models"] = sorted({gpu.get("name") or "unknown (lost)" for gpu in info["gpus"]})
        events, node_verdict = [], info["verdict"]
        if params["inventory_path"]:
            text = files.read_text(_under(root, params["inventory_path"]))
            try:
                previous = json.loads(text) if text else None
                record, events = gpu_inventory.merge(previous, info, host="", now="now")
                # GPUs the record knows that NVML no longer lists are errors too
                node_verdict = health.verdict(info["health"] + health.missing_findings(record),
                                              gpu_inventory.identities(record, info["gpus"]))
            except (ValueError, gpu_inventory.RecordError):
                events = []
        items += drift.hardware_items(node_verdict if info["driver"]["loaded"] else None, events)
        if params["cdi_spec_dirs"] and info["driver"]["loaded"]:
            from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime import cdi
            if cdi.HAS_YAML:
                specs, problems = cdi.read_specs(params["cdi_spec_dirs"], root)
                items.append(drift.cdi_item(cdi.check(specs, problems, info["gpus"])))
        if params["mig_config_name"] and info["driver"]["loaded"]:
            items.append(_mig_item(params, root))
            facts["mig_layout"] = params["mig_config_name"] if items[-1]["ok"] else items[-1]["actual"]
    expected = {"driver": params["driver_version"] or params["driver_branch"] or None,
                "toolkit": params["toolkit_version"] or None}
    module.exit_json(changed=False, items=items, drifted=any(not i["ok"] for i in items), facts=facts,
                     expected=expected)


if __name__ == "__main__":
    main()

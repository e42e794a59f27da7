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
    description:
      - Where the host's file systems are (a container that mounts the host elsewhere).
      - A path that does not exist or is not a directory (a typo) fails the module before anything is read.
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
    msg: "{{ audit.audit_items | rejectattr('ok') | map(attribute='item') | list }}"
"""

RETURN = r"""
audit_items:
  description: One check each - C(item), C(expected), C(actual), C(ok), C(fix). (Named C(items)
    until the return keys were renamed, since a key named like a dict method cannot be read with dot notation.)
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
devices:
  description:
    - The GPUs and MIG devices NVML lists as NVIDIA's DRA driver publishes them (a GPU in MIG mode by
      its MIG devices) - C(uuid), C(type) (C(gpu) or C(mig)), C(what). Empty without NVML.
    - The drift audit compares them with a DRA node's ResourceSlices.
  returned: always
  type: list
  elements: dict
  sample: [{uuid: GPU-5b664595-2565-157e-c347-d4a5b72f7928, type: gpu, what: "GPU 0 (GPU-5b664595-2565-157e-c347-d4a5b72f7928)"}]
facts:
  description: What the fleet view groups nodes by - driver, toolkit, runtime, kernel, gpu_models, mig_layout.
  returned: always
  type: dict
  sample: {driver: 580.95.05, toolkit: 1.18.0, runtime: containerd 1.7.24, kernel: 6.1.0-40-amd64, gpu_models: [NVIDIA H100 80GB HBM3]}
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuops.nvidia.plugins.module_utils.report import audit
from ansible_collections.gpuops.nvidia.plugins.module_utils.report import drift
from ansible_collections.gpuops.nvidia.plugins.module_utils.host import files


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
    files.require_root(module)
    try:
        result = audit.audit(module, module.params)
    except drift.NoTomlParser as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()

#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

__metaclass__ = type

DOCUMENTATION = r"""
---
module: cdi_spec_check
short_description: Check the node's CDI specs against the GPUs NVML reports
version_added: 0.1.0
description:
  - "Reads the CDI specs of one kind (C(nvidia.com/gpu)) from the spec directories and compares
    them with NVML: every GPU must be named by its index and UUID, every MIG device by
    C(gpu:mig) and its UUID, no device that is gone may still be listed, and the device nodes the
    spec mounts must exist."
  - A spec left over from before a MIG change or a GPU replacement is reported as RV(stale), so a
    play can regenerate it.
author:
  - gpuops.nvidia maintainers (@gpuops)
requirements:
  - nvidia-ml-py (Python module C(pynvml)) and PyYAML on the managed host
options:
  spec_dirs:
    description: Directories holding CDI specs.
    type: list
    elements: path
    default: [/etc/cdi, /var/run/cdi]
  kind:
    description: The CDI kind to check.
    type: str
    default: nvidia.com/gpu
  check_device_nodes:
    description: Check that the device nodes the spec mounts exist on the host.
    type: bool
    default: true
  host_root:
    description:
      - Directory under which the spec directories and device nodes are looked up.
      - A path that does not exist or is not a directory (a typo) fails the module before anything is read.
    type: path
    default: /
extends_documentation_fragment:
  - gpuops.nvidia.attributes.read_only
"""

EXAMPLES = r"""
- name: Check the CDI spec after a MIG change
  gpuops.nvidia.cdi_spec_check:
  register: cdi

- name: Regenerate a stale spec
  ansible.builtin.command: nvidia-ctk cdi generate --output=/var/run/cdi/nvidia.yaml
  changed_when: true
  when: cdi.stale
"""

RETURN = r"""
stale:
  description: True when the spec is missing, lacks a device NVML reports, or lists one that is gone.
  returned: always
  type: bool
findings:
  description: Problems found, each with code, severity, message and fix.
  returned: always
  type: list
  elements: dict
spec_files:
  description: Spec files of the kind that were read.
  returned: always
  type: list
  elements: str
listed:
  description: Device names the specs list.
  returned: always
  type: list
  elements: str
expected:
  description: Device names the GPUs should have.
  returned: always
  type: list
  elements: str
driver:
  description: The NVIDIA driver as NVML sees it.
  returned: always
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime import cdi
from ansible_collections.gpuops.nvidia.plugins.module_utils.nvml import adapter as nvml
from ansible_collections.gpuops.nvidia.plugins.module_utils.host import files


def main():
    module = AnsibleModule(
        argument_spec=dict(
            spec_dirs=dict(type="list", elements="path", default=["/etc/cdi", "/var/run/cdi"]),
            kind=dict(type="str", default="nvidia.com/gpu"),
            check_device_nodes=dict(type="bool", default=True),
            host_root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )
    files.require_root(module)
    if not nvml.HAS_PYNVML:
        module.fail_json(msg=missing_required_lib("nvidia-ml-py (Python module pynvml)"),
                         exception=nvml.PYNVML_IMPORT_ERROR)
    if not cdi.HAS_YAML:
        module.fail_json(msg=missing_required_lib("PyYAML"))
    node = nvml.read_node()
    root, kind = module.params["host_root"], module.params["kind"]
    report = cdi.check_node(node["gpus"], module.params["spec_dirs"], kind, module.params["check_device_nodes"], root)
    module.exit_json(changed=False, driver=node["driver"], **report)


if __name__ == "__main__":
    main()

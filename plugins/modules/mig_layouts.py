#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

__metaclass__ = type

DOCUMENTATION = r"""
---
module: mig_layouts
short_description: The usual named MIG layouts for the GPUs of a host, from what NVML reports
version_added: 0.1.0
description:
  - "Returns a mig-parted config (C(version: v1), C(mig-configs)) with the usual named layouts for the
    host's GPU models, built from the MIG profiles each GPU reports through NVML, never from a table
    per model: C(all-disabled), C(all-enabled), C(all-<profile>) (as many of that profile as fit, for
    every profile without a media or engine suffix) and C(all-balanced) (two of the smallest 1-slice
    profile, one 2-slice and one 3-slice profile, as far as they fit)."
  - Where the host has GPUs of more than one model, each layout has one entry per model, selected by
    C(device-filter) (the PCI device id).
  - NVML reports profiles only while a GPU's MIG mode is on. For GPUs whose MIG is off the profiles
    another GPU of the same model reports are used, or those the M(gpuops.nvidia.mig) module recorded
    on an earlier run (O(profile_record)); GPUs with none are listed in RV(unknown) and only get
    C(all-disabled) and C(all-enabled).
  - Changes nothing on the host.
author:
  - gpuops.nvidia maintainers (@gpuops)
requirements:
  - nvidia-ml-py (Python module C(pynvml)) on the managed host
options:
  profile_record:
    description:
      - The record of MIG profiles the M(gpuops.nvidia.mig) module keeps. Empty string ignores it.
      - A record an earlier release kept at C(/var/lib/gpuops-nvidia/mig-profiles.json) is read where it is.
    type: str
    default: /var/lib/gpuops/mig-profiles.json
extends_documentation_fragment:
  - gpuops.nvidia.attributes.read_only
seealso:
  - module: gpuops.nvidia.mig
"""

EXAMPLES = r"""
- name: Read the usual layouts for this node's GPUs
  gpuops.nvidia.mig_layouts:
  register: layouts

- name: Apply the balanced one
  gpuops.nvidia.mig:
    config: "{{ layouts.config }}"
    config_name: all-balanced
"""

RETURN = r"""
config:
  description: The mig-parted config document with the named layouts.
  returned: always
  type: dict
  sample:
    version: v1
    mig-configs:
      all-disabled: [{devices: all, mig-enabled: false}]
      all-balanced: [{devices: all, mig-enabled: true, mig-devices: {1g.10gb: 2, 2g.20gb: 1, 3g.40gb: 1}}]
names:
  description: The layout names in RV(config), sorted.
  returned: always
  type: list
  elements: str
unknown:
  description: Indexes of MIG-capable GPUs whose profiles are not known yet (MIG off and no record).
  returned: always
  type: list
  elements: int
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gpuops.nvidia.plugins.module_utils.host import records
from ansible_collections.gpuops.nvidia.plugins.module_utils.mig import service
from ansible_collections.gpuops.nvidia.plugins.module_utils.nvml import adapter as nvml


def main():
    module = AnsibleModule(argument_spec=dict(
        profile_record=dict(type="str", default=records.MIG_PROFILES)),
        supports_check_mode=True)
    if not nvml.HAS_PYNVML:
        module.fail_json(msg=missing_required_lib("nvidia-ml-py (Python module pynvml)"),
                         exception=nvml.PYNVML_IMPORT_ERROR)
    try:
        module.exit_json(**service.layouts(module))
    except service.MigError as exc:
        module.fail_json(msg=exc.message, **exc.result)


if __name__ == "__main__":
    main()

#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

__metaclass__ = type

DOCUMENTATION = r"""
---
module: driver_config
short_description: The NVIDIA driver's node configuration - nouveau blacklisted, the nvidia module's options, its services enabled
version_added: 0.1.0
description:
  - "Writes the two C(modprobe.d) files the driver role owns whole: the nouveau blacklist (so the
    NVIDIA module can bind the GPUs) and the C(nvidia) module's options (C(options nvidia
    key=value ...), or a note that none is set), and enables the driver's services
    (C(nvidia-persistenced), C(nvidia-fabricmanager) on NVSwitch systems) - in one step."
  - A file is rewritten only when its text differs, backed up first (O(backup)) and replaced
    atomically. RV(modprobe_changed) says the initramfs no longer matches the files (the role
    rebuilds it).
  - "Refused before anything changes: an option name that is no kernel module parameter name, a
    value modprobe would read differently (spaces, quotes, a newline, C(#)), a service name that is
    no systemd unit name, and a service that does not exist on the node."
author:
  - gpuops.nvidia maintainers (@gpuops)
options:
  module_options:
    description:
      - "Options of the C(nvidia) kernel module, e.g. C({NVreg_EnableGpuFirmware: 1}). Empty - the
        file says that none is set (an option taken out of the inventory leaves the node too)."
    type: dict
    default: {}
  blacklist_nouveau:
    description: Write the nouveau blacklist. C(false) leaves that file as it is.
    type: bool
    default: true
  services:
    description: Systemd services to enable (not start). Leave out those whose package is not
      installed yet.
    type: list
    elements: str
    default: []
  options_conf:
    description: The options file.
    type: path
    default: /etc/modprobe.d/nvidia-gpuops.conf
  nouveau_conf:
    description: The nouveau blacklist file.
    type: path
    default: /etc/modprobe.d/blacklist-nouveau-gpuops.conf
  backup:
    description: Keep a copy of a file before replacing it (C(<file>.<pid>.<time>~), which modprobe
      does not read).
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    description: Reports what would be written and enabled, changing nothing.
  diff_mode:
    support: full
    description: Before and after of each file that changes.
  idempotent:
    support: full
    description: A second run with the same options changes nothing.
"""

EXAMPLES = r"""
- name: Blacklist nouveau, set the module's options and enable nvidia-persistenced
  gpuops.nvidia.driver_config:
    module_options: {NVreg_EnableGpuFirmware: 1}
    services: [nvidia-persistenced]
  register: driver_config
"""

RETURN = r"""
modprobe_changed:
  description: Whether a C(modprobe.d) file changed (or would in check mode) - the initramfs is stale.
  returned: always
  type: bool
  sample: true
files:
  description: The files written (or that would be in check mode).
  returned: always
  type: list
  elements: str
  sample: [/etc/modprobe.d/nvidia-gpuops.conf]
enabled:
  description: The services enabled by this run (or that would be in check mode).
  returned: always
  type: list
  elements: str
  sample: [nvidia-persistenced]
backup_files:
  description: The backups made.
  returned: always
  type: list
  elements: str
  sample: []
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuops.nvidia.plugins.module_utils.host import driver_config, files


def main():
    module = AnsibleModule(
        argument_spec=dict(
            module_options=dict(type="dict", default={}),
            blacklist_nouveau=dict(type="bool", default=True),
            services=dict(type="list", elements="str", default=[]),
            options_conf=dict(type="path", default="/etc/modprobe.d/nvidia-gpuops.conf"),
            nouveau_conf=dict(type="path", default="/etc/modprobe.d/blacklist-nouveau-gpuops.conf"),
            backup=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    try:
        module.exit_json(**driver_config.apply(module, module.params))
    except (driver_config.DriverConfigError, files.FileError) as exc:
        module.fail_json(msg=str(exc))


if __name__ == "__main__":
    main()

#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

__metaclass__ = type

DOCUMENTATION = r"""
---
module: driver_status
short_description: Compare the installed NVIDIA driver with the one loaded in the kernel
version_added: 0.1.0
description:
  - Reads the installed NVIDIA driver packages (dpkg or rpm), which of them are held or
    version-locked, DKMS's build state, and the kernel module loaded now (procfs/sysfs).
  - The loaded driver is the kernel module's version from procfs/sysfs, else the version NVML
    reports (O(nvml)).
  - Says which state the host is in (C(not_installed), C(installed_not_loaded),
    C(loaded_outdated), C(loaded_unmanaged), C(ready)) and whether a reboot is needed to run the
    installed driver. A host that cannot load kernel modules (no C(CAP_SYS_MODULE), as in a
    container, or module loading disabled) never needs one.
  - Changes nothing.
author:
  - gpuops.nvidia maintainers (@gpuops)
options:
  host_root:
    description:
      - Directory under which every host file is read - C(/proc), C(/sys), the package database
        (C(/var/lib/dpkg/status), or rpm's with C(--root)), the DKMS tree (C(/var/lib/dkms)) and
        the capabilities in C(/proc/self/status) - for checking a mounted image or a prepared
        tree. NVML (O(nvml)) always answers for the running host.
    type: path
    default: /
  nvml:
    description: Ask NVML which driver answers when procfs/sysfs show no NVIDIA module (needs C(pynvml)).
    type: bool
    default: true
extends_documentation_fragment:
  - gpuops.nvidia.attributes.read_only
seealso:
  - module: gpuops.nvidia.gpu_info
"""

EXAMPLES = r"""
- name: Is a reboot needed to run the installed driver?
  gpuops.nvidia.driver_status:
  register: driver

- name: Reboot when it is
  ansible.builtin.reboot:
  when: driver.reboot_required
"""

RETURN = r"""
state:
  description: not_installed, installed_not_loaded, loaded_outdated, loaded_unmanaged or ready.
  returned: always
  type: str
  sample: installed_not_loaded
message:
  description: The state in an operator's words.
  returned: always
  type: str
  sample: driver 535.247.01 is installed but its kernel module is not loaded
reboot_required:
  description: True when a reboot would load the installed driver.
  returned: always
  type: bool
can_load_module:
  description: False where kernel modules cannot be loaded (no C(CAP_SYS_MODULE), as in a container, or loading disabled).
  returned: always
  type: bool
installed_version:
  description: Driver version of the installed packages, or null.
  returned: always
  type: str
  sample: 535.247.01
installed_from:
  description: The package the installed version was read from.
  returned: always
  type: str
  sample: nvidia-driver
loaded_version:
  description: Version of the NVIDIA driver loaded now (procfs/sysfs, else NVML), or null.
  returned: always
  type: str
nvml:
  description: The driver as NVML sees it (loaded, version, reason, message).
  returned: always
  type: dict
kernel_module:
  description: The loaded module as read from procfs/sysfs (version, flavour, source).
  returned: always
  type: dict
packages:
  description: Installed NVIDIA driver packages and their versions.
  returned: always
  type: dict
  sample: {nvidia-driver: 535.247.01-1~deb12u1, libnvidia-ml1: 535.247.01-1~deb12u1}
held:
  description: NVIDIA packages held (apt-mark hold) or version-locked (dnf versionlock).
  returned: always
  type: list
  elements: str
dkms:
  description: DKMS entries of NVIDIA modules (module, version, kernel, state).
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuops.nvidia.plugins.module_utils import commands, driver_state, kernel, nvml


def main():
    module = AnsibleModule(
        argument_spec=dict(host_root=dict(type="path", default="/"), nvml=dict(type="bool", default=True)),
        supports_check_mode=True,
    )
    root = module.params["host_root"]
    packages, held = driver_state.read_installed(root, lambda argv: commands.output(module, argv))
    installed, source = driver_state.installed_driver_version(packages)
    loaded = kernel.loaded_module(root)
    # Where procfs/sysfs do not show the module (a container sees the host's, or none), NVML
    # tells which driver answers.
    not_asked = {"loaded": False, "version": None, "reason": "not asked"}
    through_nvml = nvml.read_driver() if module.params["nvml"] else not_asked
    version = loaded["version"] or (through_nvml["version"] if through_nvml["loaded"] else None)
    loading = kernel.module_loading(root)
    decision = driver_state.decide(installed, version, loading["possible"], loading["reason"])
    module.exit_json(
        changed=False,
        installed_version=installed,
        installed_from=source,
        loaded_version=version,
        kernel_module=loaded,
        nvml={key: through_nvml.get(key) for key in ("loaded", "version", "reason", "message")},
        packages=packages,
        held=held,
        dkms=driver_state.read_dkms_tree(root),
        **decision
    )


if __name__ == "__main__":
    main()

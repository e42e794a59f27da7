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
  - Changes nothing on the host except, with O(record), the node-local record of the state.
  - With O(verify_gpus), a C(ready) driver is verified - NVML must answer with the installed
    version and see at least that many GPUs - and the task fails, naming what NVML reports, when
    it does not.
author:
  - gpuops.nvidia maintainers (@gpuops)
options:
  host_root:
    description:
      - Directory under which every host file is read - C(/proc), C(/sys), the package database
        (C(/var/lib/dpkg/status), or rpm's with C(--root)), the DKMS tree (C(/var/lib/dkms)) and
        the capabilities in C(/proc/self/status) - for checking a mounted image or a prepared
        tree. NVML (O(nvml)) always answers for the running host.
      - A path that does not exist or is not a directory (a typo) fails the module before anything is read.
    type: path
    default: /
  nvml:
    description: Ask NVML which driver answers when procfs/sysfs show no NVIDIA module (needs C(pynvml)).
    type: bool
    default: true
  verify_gpus:
    description:
      - When the driver is C(ready), fail unless NVML answers with the installed version and lists
        at least this many GPUs. V(-1) does not verify.
    type: int
    default: -1
  record:
    description:
      - Write the state (O(record_keys) of the result) to this JSON file for fleet reports and
        audits; written atomically, only when it changed. Empty - no record.
    type: path
    default: ""
  record_keys:
    description: The keys of the result the record keeps.
    type: list
    elements: str
    default: [state, message, reboot_required, can_load_module, installed_version, installed_from, loaded_version, held]
attributes:
  check_mode:
    support: full
    description: Reads as always; reports whether the record would change without writing it.
  diff_mode:
    support: full
    description: The record's content before and after.
  idempotent:
    support: full
    description: The record is rewritten only when the state changed.
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

- name: Read the driver, verify it sees the node's 8 GPUs once loaded, and keep the record
  gpuops.nvidia.driver_status:
    verify_gpus: 8
    record: /var/lib/gpuops/driver-state.json
"""

RETURN = r"""
gpus_seen:
  description: The number of GPUs NVML lists, when O(verify_gpus) verified a ready driver.
  returned: when verified
  type: int
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

from ansible_collections.gpuops.nvidia.plugins.module_utils.host import commands
from ansible_collections.gpuops.nvidia.plugins.module_utils.host import records
from ansible_collections.gpuops.nvidia.plugins.module_utils.report import driver_status as status
from ansible_collections.gpuops.nvidia.plugins.module_utils.host import files


def main():
    module = AnsibleModule(
        argument_spec=dict(
            host_root=dict(type="path", default="/"),
            nvml=dict(type="bool", default=True),
            verify_gpus=dict(type="int", default=-1),
            record=dict(type="path", default=""),
            record_keys=dict(type="list", elements="str", no_log=False,
                             default=["state", "message", "reboot_required", "can_load_module", "installed_version",
                                      "installed_from", "loaded_version", "held"]),
        ),
        supports_check_mode=True,
    )
    files.require_root(module)
    params = module.params
    try:
        before = status.read_record(params["record"])
    except records.RecordError as exc:
        module.fail_json(msg="%s; nothing was changed" % exc)
    result = status.read(params["host_root"], params["nvml"], lambda argv: commands.output(module, argv))
    if params["verify_gpus"] >= 0 and result["state"] == "ready":
        problem = status.verify(result, params["verify_gpus"])
        if problem:
            module.fail_json(msg=problem, **result)
    if params["record"]:
        status.write_record(module, result, params["record"], params["record_keys"], before)
    module.exit_json(**result)


if __name__ == "__main__":
    main()

#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpu_info
short_description: Report the NVIDIA driver, GPUs, topology and GPU health of a host
version_added: 0.1.0
description:
  - Reads the NVIDIA driver state and every GPU's facts through NVML (the C(pynvml) bindings
    from the C(nvidia-ml-py) package), the loaded kernel module from procfs/sysfs, and XID
    errors from NVML events and the kernel log.
  - Works on hosts with or without a working driver. When NVML cannot be opened, the module does
    not fail; RV(driver.reason) says why (C(library_not_found), C(driver_not_loaded),
    C(version_mismatch), C(no_permission) or C(nvml_error)).
  - "Computes health findings (degraded PCIe link, XIDs, uncorrectable ECC errors, row-remap
    failure or pending remap, clock throttling, NVLink down, lost GPUs, driver not usable), each
    in the collection's one finding shape: code, severity, subject (C(node) or C(GPU N)), message
    and fix, plus the GPU's index and UUID."
  - Changes nothing on the host.
author:
  - gpuops.nvidia maintainers (@gpuops)
requirements:
  - nvidia-ml-py (Python module C(pynvml)) on the managed host
options:
  xid_wait_ms:
    description:
      - How long, in milliseconds, to listen for XID events through NVML.
      - NVML only delivers XIDs that happen while the module listens; past XIDs come from the
        kernel log (see O(kernel_log)). C(0) turns event listening off.
    type: int
    default: 200
  kernel_log:
    description:
      - Read XID records from the kernel ring buffer (C(/dev/kmsg)) and attach them to the GPUs
        by PCI bus id. Needs root; when the log cannot be read, RV(kernel_log) says why.
    type: bool
    default: true
  host_root:
    description:
      - Directory under which C(proc/driver/nvidia/version), C(sys/module/nvidia/version) and
        C(dev/kmsg) are read. Only useful when the host's file systems are mounted elsewhere
        (for example inside a container that mounts the host at C(/host)).
      - A path that does not exist or is not a directory (a typo) fails the module before anything is read.
    type: path
    default: /
  as_facts:
    description:
      - Also return the result as the host fact C(gpuops_nvidia) for later plays.
    type: bool
    default: false
extends_documentation_fragment:
  - gpuops.nvidia.attributes.read_only
notes:
  - Power, temperature, clock and utilization readings change from run to run; compare
    identities (UUIDs, bus ids, versions) for drift, not readings.
seealso:
  - name: NVIDIA NVML API reference
    description: The library the module reads.
    link: https://docs.nvidia.com/deploy/nvml-api/
  - name: NVIDIA XID errors
    description: What each XID means.
    link: https://docs.nvidia.com/deploy/xid-errors/
"""

EXAMPLES = r"""
- name: Read the GPUs and driver of every GPU node
  gpuops.nvidia.gpu_info:
  register: gpu

- name: Stop when the node is not healthy
  ansible.builtin.assert:
    that: gpu.healthy
    fail_msg: "{{ gpu.health | map(attribute='message') | join('; ') }}"

- name: Report why the driver is unusable, without failing the play
  ansible.builtin.debug:
    msg: "driver not usable: {{ gpu.driver.reason }}"
  when: not gpu.driver.loaded

- name: Keep the facts for later plays, skipping the kernel log
  gpuops.nvidia.gpu_info:
    as_facts: true
    kernel_log: false
    xid_wait_ms: 0
"""

RETURN = r"""
driver:
  description: The NVIDIA driver as NVML and the kernel see it.
  returned: always
  type: dict
  contains:
    loaded:
      description: Whether NVML could be opened (driver installed and its module loaded).
      type: bool
      sample: true
    reason:
      description: Why NVML could not be opened; null when it could.
      type: str
      sample: driver_not_loaded
    message:
      description: NVML's own error text; null when NVML opened.
      type: str
      sample: Driver Not Loaded
    version:
      description: Driver version, when loaded.
      type: str
      sample: 570.172.08
    cuda_driver_version:
      description: Newest CUDA version the driver supports.
      type: str
      sample: "12.8"
    nvml_version:
      description: NVML library version.
      type: str
      sample: 12.570.172.08
    kernel_module:
      description: The kernel module as loaded now, from procfs/sysfs.
      type: dict
      sample: {loaded: true, version: 570.172.08, flavour: open, source: /proc/driver/nvidia/version}
gpu_count:
  description: Number of GPUs NVML lists (0 when the driver is not usable).
  returned: always
  type: int
  sample: 8
gpus:
  description:
    - One entry per GPU in NVML index order, with identity (name, uuid, serial, pci), architecture,
      compute capability, memory (MiB), persistence mode, power (W), temperature (C) and the
      GPU's temperature limits (C(temperature_limits_c) - shutdown, slowdown, gpu_max,
      memory_max; null where the GPU does not report one), clocks,
      utilization, PCIe link (gen/width current and max), ECC counters, remapped rows, clock
      event reasons, NVLink links, NUMA node, CPU affinity, MIG mode and instances, and XIDs.
    - A GPU that NVML reports as lost has C(lost=true) and little else.
  returned: always
  type: list
  elements: dict
  sample:
    - index: 0
      name: NVIDIA H100 80GB HBM3
      uuid: GPU-5f2d1c3e-8a7b-4c21-9d0e-1f2a3b4c5d6e
      pci: {bus_id: "00000000:18:00.0", device_id: "0x2330", vendor_id: "0x10de"}
      architecture: hopper
      compute_capability: "9.0"
      memory: {total_mib: 81559}
      pcie: {gen_current: 5, gen_max: 5, width_current: 16, width_max: 16}
      mig: {capable: true, current: false, pending: false, gpu_instances: [], devices: []}
topology:
  description: How each pair of GPUs is connected, like C(nvidia-smi topo -m).
  returned: always
  type: list
  elements: dict
  sample:
    - gpus: [0, 1]
      nvlink: true
      pcie: NODE
      description: NVLink; PCIe across host bridges within one NUMA node
health:
  description: Health findings of the whole node, errors first, then warnings, then info.
  returned: always
  type: list
  elements: dict
  sample:
    - code: pcie_link_degraded
      severity: warning
      subject: GPU 2
      gpu: 2
      uuid: GPU-...
      message: GPU 2 (NVIDIA H100 80GB HBM3, 00000000:3a:00.0) runs its PCIe link at x8 Gen3, below its maximum x16 Gen5
      fix: reseat the GPU or riser and check the slot
healthy:
  description: True when there is no error or warning finding.
  returned: always
  type: bool
verdict:
  description:
    - The node's verdict from its findings - C(status) (C(healthy), C(attention), C(not_ready),
      C(degraded) or C(rma)), C(text) with the action, C(gpus) concerned - as
      M(gpuops.nvidia.gpu_report) gives it, except that a lost GPU's serial needs
      gpu_report's inventory record.
  returned: always
  type: dict
  sample: {status: degraded, text: "degraded: drain and investigate GPU 2 (uncorrectable ECC)", gpus: [2]}
health_counts:
  description: Number of findings per severity.
  returned: always
  type: dict
  sample: {error: 0, warning: 1, info: 0}
pci:
  description:
    - The NVIDIA devices on the PCI bus (from sysfs, like C(lspci -d 10de:)), whether or not a
      driver is loaded; C(gpus) and C(nvswitches), each with C(bus_id), C(device_id), C(name),
      and the kernel C(driver) bound to it.
  returned: always
  type: dict
  sample: {gpus: [{bus_id: "0000:18:00.0", device_id: "0x2330", name: "GH100 [H100 SXM5 80GB]", driver: nvidia}], nvswitches: []}
kernel_log:
  description: Whether the kernel log was read for XIDs, and why not.
  returned: always
  type: dict
  sample: {read: false, error: "/dev/kmsg: Permission denied"}
ansible_facts:
  description: The same data under C(gpuops_nvidia), when O(as_facts=true).
  returned: when O(as_facts=true)
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gpuops.nvidia.plugins.module_utils.report import gpu_facts
from ansible_collections.gpuops.nvidia.plugins.module_utils.nvml import adapter as nvml
from ansible_collections.gpuops.nvidia.plugins.module_utils.host import files


def main():
    module = AnsibleModule(
        argument_spec=dict(
            xid_wait_ms=dict(type="int", default=200),
            kernel_log=dict(type="bool", default=True),
            host_root=dict(type="path", default="/"),
            as_facts=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    files.require_root(module)
    if not nvml.HAS_PYNVML:
        module.fail_json(msg=missing_required_lib("nvidia-ml-py (Python module pynvml)"),
                         exception=nvml.PYNVML_IMPORT_ERROR)
    if module.params["xid_wait_ms"] < 0:
        module.fail_json(msg="xid_wait_ms must be 0 (off) or a positive number of milliseconds, "
                             "got %d" % module.params["xid_wait_ms"])

    result = gpu_facts.gather(
        host_root=module.params["host_root"],
        xid_wait_ms=module.params["xid_wait_ms"],
        kernel_log=module.params["kernel_log"],
    )
    if module.params["as_facts"]:
        result["ansible_facts"] = {"gpuops_nvidia": dict(result)}
    module.exit_json(changed=False, **result)


if __name__ == "__main__":
    main()

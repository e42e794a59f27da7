#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

__metaclass__ = type

DOCUMENTATION = r"""
---
module: gpu_report
short_description: Report a GPU node's verdict and GPUs, and keep its GPU inventory record
version_added: 0.2.0
description:
  - Reads what M(gpuops.nvidia.gpu_info) reads (driver, GPUs, health findings) and turns it into
    what an on-call engineer acts on without logging in to the node - a verdict with the action
    (C(healthy); C(attention) - a warning wants a look; C(not_ready) - the driver is not usable;
    C(degraded) - drain and investigate the GPUs named; C(rma) - a GPU needs replacing, named
    with its serial), one line per GPU (temperature against its slowdown threshold, power
    against its cap, memory, utilisation, ECC errors, persistence, MIG, PCIe link, NVLink)
    and the findings, errors first, every line within 100 columns.
  - Keeps the node-local inventory record O(path) (JSON) - every GPU slot with the identity of
    its GPU (serial, UUID, board part number, VBIOS, PCI ids) - and keeps the last-known
    identity of a GPU that is lost or gone, with when it was last seen, because that is when an
    RMA needs it. Reports the hardware changes since the previous record (RV(changes) -
    C(gpu_lost), C(gpu_swapped) - same slot, another serial, C(gpu_returned), C(gpu_added)).
  - The record holds no readings, so it is rewritten only when the hardware, its firmware or
    the driver change; C(last_seen) of a lost GPU is therefore the last time the record was
    written with it present, and C(lost_since) when a run first found it lost.
author:
  - gpuops.nvidia maintainers (@gpuops)
requirements:
  - nvidia-ml-py (Python module C(pynvml)) on the managed host
options:
  path:
    description:
      - The node-local inventory record. Empty - no record is read or written (lost GPUs then
        have no serial in the verdict).
    type: path
    default: /var/lib/gpuops/gpu-inventory.json
  host:
    description:
      - The node's name in the record (the role gives its inventory hostname). Default - the
        host's own name.
    type: str
  xid_wait_ms:
    description: As in M(gpuops.nvidia.gpu_info).
    type: int
    default: 200
  kernel_log:
    description: As in M(gpuops.nvidia.gpu_info).
    type: bool
    default: true
  host_root:
    description:
      - As in M(gpuops.nvidia.gpu_info); the boot id is read from under it too.
      - A path that does not exist or is not a directory (a typo) fails the module before anything is read.
    type: path
    default: /
  as_facts:
    description:
      - Also return what M(gpuops.nvidia.gpu_info) returns as the host fact C(gpuops_nvidia),
        with C(verdict) and C(inventory_changes) (RV(changes)) added, for later plays (node
        labels, validation, the fleet summary).
    type: bool
    default: false
  bindings_pending:
    description:
      - The NVML bindings are about to be installed by the same run (its check mode, where the
        install was only simulated). Without the bindings the module then reports that the
        report waits for them (RV(lines); only RV(lines), RV(changes) and RV(record) are
        returned then) instead of failing.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Reads the node and reports the record's change and diff without writing it.
  diff_mode:
    support: full
    description: Before and after of the inventory record.
  idempotent:
    support: full
    description: The record only changes with the hardware, its firmware or the driver.
notes:
  - A GPU lost in one boot and still lost after a reboot is reported as such (the record keeps
    the boot id of the loss).
seealso:
  - module: gpuops.nvidia.gpu_info
  - name: NVIDIA RMA policy thresholds for row remapping
    description: When a GPU with a row-remapping failure qualifies for an RMA.
    link: https://docs.nvidia.com/deploy/a100-gpu-mem-error-mgmt/rma-policy-thresholds-for-row-remapping.html
"""

EXAMPLES = r"""
- name: Report the node and keep its inventory record
  gpuops.nvidia.gpu_report:
  register: report

- name: Show the report
  ansible.builtin.debug:
    msg: "{{ report.lines }}"

- name: Page someone when a GPU needs an RMA
  ansible.builtin.debug:
    msg: "{{ inventory_hostname }}: {{ report.verdict.text }}"
  when: report.verdict.status == 'rma'
"""

RETURN = r"""
verdict:
  description: The node's verdict.
  returned: always
  type: dict
  contains:
    status:
      description: C(healthy), C(attention), C(not_ready), C(degraded) or C(rma) (worst first
        in the reverse order).
      type: str
      sample: degraded
    text:
      description: The verdict with its action, in one sentence.
      type: str
      sample: "degraded: drain and investigate GPU 2 (uncorrectable ECC)"
    gpus:
      description: The indexes of the GPUs with an error or warning finding.
      type: list
      elements: int
      sample: [2]
lines:
  description: The report as lines of at most 100 characters (verdict, driver, a line per GPU,
    hardware changes, findings).
  returned: always
  type: list
  elements: str
changes:
  description: The hardware changes since the previous record (empty on the first record).
  returned: always
  type: list
  elements: dict
  sample:
    - {event: gpu_lost, slot: "00000000:df:00.0", index: 7, serial: "1652223008586",
       message: "GPU 7 (NVIDIA H100 80GB HBM3, serial 1652223008586, slot 00000000:df:00.0) is lost ..."}
record:
  description: The inventory record as written (or as it would be, in check mode); null when
    O(path) is empty.
  returned: always
  type: dict
health:
  description: The findings, errors first, as M(gpuops.nvidia.gpu_info) returns them.
  returned: always
  type: list
  elements: dict
gpus:
  description: The GPUs, as M(gpuops.nvidia.gpu_info) returns them.
  returned: always
  type: list
  elements: dict
driver:
  description: The driver, as M(gpuops.nvidia.gpu_info) returns it.
  returned: always
  type: dict
healthy:
  description: True when there is no error or warning finding.
  returned: always
  type: bool
health_counts:
  description: Number of findings per severity.
  returned: always
  type: dict
gpu_count:
  description: Number of GPUs NVML lists.
  returned: always
  type: int
ansible_facts:
  description: The gpu_info data and the verdict under C(gpuops_nvidia), and the verdict and the
    hardware changes under C(gpuops_gpu_report), when O(as_facts=true).
  returned: when O(as_facts=true)
  type: dict
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gpuops.nvidia.plugins.module_utils.host import records
from ansible_collections.gpuops.nvidia.plugins.module_utils.nvml import adapter as nvml
from ansible_collections.gpuops.nvidia.plugins.module_utils.report import node_report
from ansible_collections.gpuops.nvidia.plugins.module_utils.host import files


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", default="/var/lib/gpuops/gpu-inventory.json"),
            host=dict(type="str"),
            xid_wait_ms=dict(type="int", default=200),
            kernel_log=dict(type="bool", default=True),
            host_root=dict(type="path", default="/"),
            as_facts=dict(type="bool", default=False),
            bindings_pending=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    files.require_root(module)
    if not nvml.HAS_PYNVML and module.params["bindings_pending"]:
        module.exit_json(changed=False, changes=[], record=None, lines=[
            "The NVML bindings would be installed first; the GPU report runs once they are."])
    if not nvml.HAS_PYNVML:
        module.fail_json(msg=missing_required_lib("nvidia-ml-py (Python module pynvml)"),
                         exception=nvml.PYNVML_IMPORT_ERROR)
    if module.params["xid_wait_ms"] < 0:
        module.fail_json(msg="xid_wait_ms must be 0 (off) or a positive number of milliseconds, "
                             "got %d" % module.params["xid_wait_ms"])
    try:
        result = node_report.report(module, module.params)
    except records.RecordError as exc:
        module.fail_json(msg="%s; nothing was changed" % exc)
    module.exit_json(**result)


if __name__ == "__main__":
    main()

#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

__metaclass__ = type

DOCUMENTATION = r"""
---
module: mig
short_description: Partition NVIDIA GPUs with MIG from a mig-parted config, with a plan first
version_added: 0.1.0
description:
  - "Applies one named config of an NVIDIA C(mig-parted) config (C(version: v1), C(mig-configs)) to the
    GPUs of the host through NVML, the way C(nvidia-mig-parted apply) does, and says what it will do
    before it does it."
  - "Before any change the config is checked against what each GPU reports through NVML: unknown profile
    names, counts above a profile's maximum, combinations no placement fits, MIG on a GPU that cannot do
    it, GPU indexes the host does not have, a malformed config. Each error names the GPU, the config
    entry and the reason, and nothing is changed."
  - "The plan is an ordered list of NVML steps: destroy compute instances, destroy GPU instances, change
    the MIG mode, create GPU instances at explicit placements (largest first, from the placements NVML
    reports), create one compute instance of the full size in each. GPU instances that already match
    (profile and placement read back with C(nvmlGpuInstanceGetInfo)) are kept: a second run changes
    nothing."
  - NVML reports a GPU's profiles only while its MIG mode is on. For a GPU whose MIG is off the profiles
    of another GPU of the same PCI device id are used, or those recorded on an earlier run
    (O(profile_record)); where there are none, the profile names are checked first against the names
    NVIDIA's MIG user guide gives the A100 40GB and 80GB, H100 80GB and H200 (a name the model does not
    have is refused and MIG mode is not touched), and the GPU's layout is checked right after its mode
    change, which is changed back if the layout does not fit (or, on another model, names a profile
    NVML then does not report).
  - "A mode change that does not take effect at once (A100: a client holds the GPU, or a VM where NVML
    cannot reset it) is reported in RV(reset_required), with the processes that hold the GPU. The module
    resets such a GPU (C(nvidia-smi -r)) only when O(allow_gpu_reset=true) and no process uses it."
  - A failure midway stops at that step and reports what was done and what was not (RV(done),
    RV(not_done)); the layout left behind is consistent and the next run converges.
author:
  - gpuops.nvidia maintainers (@gpuops)
requirements:
  - nvidia-ml-py (Python module C(pynvml)) on the managed host
  - PyYAML on the managed host for O(config_file) in YAML (JSON needs nothing)
options:
  config_file:
    description:
      - Path on the managed host of a mig-parted config file (YAML or JSON).
      - At most one of O(config_file) and O(config); with neither, the usual named layouts that
        M(gpuops.nvidia.mig_layouts) generates from what the GPUs report are used (C(all-balanced),
        C(all-1g.10gb), ...). Where GPUs report no profiles yet (MIG off), their MIG mode is turned on first
        and the layout is decided once they report them.
    type: path
  config:
    description:
      - The mig-parted config itself (C(version), C(mig-configs)), for example read on the controller
        with C(lookup('file', ...) | from_yaml).
    type: dict
  config_name:
    description:
      - The name of the config under C(mig-configs) to apply.
    type: str
    required: true
  allow_gpu_reset:
    description:
      - Reset a GPU whose MIG mode change is pending (with C(nvidia-smi -r -i)), when no process uses it.
      - A reset drops every MIG instance of the GPU and fails while a client such as
        C(nvidia-persistenced) or DCGM holds it; stop those first (the P(gpuops.nvidia.mig#role) role does).
    type: bool
    default: false
  profile_record:
    description:
      - File on the managed host where the module records the MIG profiles each GPU model reports, so
        that a later check-mode run can check a layout for GPUs whose MIG mode is off. Empty string
        turns the record off.
      - A record an earlier release kept at C(/var/lib/gpuops-nvidia/mig-profiles.json) is moved to
        the default path on the first run (read where it is in check mode).
    type: str
    default: /var/lib/gpuops/mig-profiles.json
  host_root:
    description:
      - Directory under which O(profile_record) is read and written. Only useful when the host's file
        systems are mounted elsewhere (for example inside a container that mounts the host at C(/host)).
      - A path that does not exist or is not a directory (a typo) fails the module before anything is read.
    type: path
    default: /
attributes:
  check_mode:
    support: full
    description: Returns the plan and whether the host already matches the config; changes nothing.
  diff_mode:
    support: full
    description: The layout of each GPU before and after, one line per GPU.
  idempotent:
    support: full
    description: A second run with the same config reports C(changed=false).
notes:
  - GPU and compute instances do not survive a GPU reset or a reboot, and on Hopper and later GPUs the MIG
    mode does not either. The P(gpuops.nvidia.mig#role) role installs a boot unit that applies the config again.
  - Compute-instance profiles (C(1c.3g.40gb)) are not supported; each GPU instance gets one compute
    instance of its full size, as the device plugin's MIG strategies expect.
seealso:
  - name: NVIDIA mig-parted
    description: The config format and the tool this module is compared with.
    link: https://github.com/NVIDIA/mig-parted
  - name: NVIDIA MIG user guide
    description: Profiles, placements, and MIG mode changes per GPU generation.
    link: https://docs.nvidia.com/datacenter/tesla/mig-user-guide/
"""

EXAMPLES = r"""
- name: Show what the all-balanced layout would change (check mode)
  gpuops.nvidia.mig:
    config_file: /etc/gpuops-nvidia/mig-config.yaml
    config_name: all-balanced
  check_mode: true
  register: mig_plan

- name: The usual balanced layout, generated from what the GPUs report
  gpuops.nvidia.mig:
    config_name: all-balanced

- name: Apply a file's layout, resetting GPUs whose mode change waits for a reset
  gpuops.nvidia.mig:
    config_file: /etc/gpuops-nvidia/mig-config.yaml
    config_name: all-balanced
    allow_gpu_reset: true

- name: Per-GPU layouts from an inline config
  gpuops.nvidia.mig:
    config_name: mixed
    config:
      version: v1
      mig-configs:
        mixed:
          - devices: [0, 1, 2, 3]
            mig-enabled: false
          - devices: [4, 5, 6, 7]
            device-filter: ["0x233010DE"]
            mig-enabled: true
            mig-devices: {"3g.40gb": 2}
"""

RETURN = r"""
matches:
  description: Whether the GPUs already had the config's layout before the run.
  returned: always
  type: bool
plan:
  description: The plan, per GPU and as one ordered list of steps.
  returned: always
  type: dict
  contains:
    config:
      description: The config name.
      type: str
    gpus:
      description: >-
        Per selected GPU, its config entry, its steps, and the layout before and after
        (C(mig_enabled), C(mig_pending), C(layout) as one line; C(after) also has C(devices), the
        count of each MIG profile).
      type: list
      elements: dict
    steps:
      description: >-
        Every step in order, each with C(gpu), C(action) (C(destroy_compute_instance),
        C(destroy_gpu_instance), C(set_mig_mode), C(create_gpu_instance), C(create_compute_instance)) and
        its arguments (profile, placement, instance ids, enabled).
      type: list
      elements: dict
  sample:
    config: all-balanced
    steps:
      - {gpu: 0, action: set_mig_mode, enabled: true}
      - {gpu: 0, action: create_gpu_instance, profile: 3g.40gb, profile_id: 9, placement: [4, 4]}
done:
  description: The steps carried out, each with what NVML returned (new instance ids, activation status).
  returned: always
  type: list
  elements: dict
not_done:
  description: Steps of the plan that were not carried out (after a failure, or on GPUs waiting for a reset).
  returned: always
  type: list
  elements: dict
reset_required:
  description: >-
    GPUs whose MIG mode change waits for a GPU reset or reboot: C(gpu), C(uuid), C(activation)
    (C(RESET_REQUIRED) or C(IN_USE)) and the C(processes) holding the GPU.
  returned: always
  type: list
  elements: dict
mig_devices:
  description: The MIG devices of the selected GPUs after the run.
  returned: always
  type: list
  elements: dict
  sample:
    - {gpu: 0, gpu_instance: 2, compute_instance: 0, profile: 3g.40gb, placement: [4, 4], uuid: MIG-0b8c...}
converged:
  description: Whether the GPUs have the config's layout after the run (read back through NVML).
  returned: always
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gpuops.nvidia.plugins.module_utils.host import records
from ansible_collections.gpuops.nvidia.plugins.module_utils.mig import service
from ansible_collections.gpuops.nvidia.plugins.module_utils.nvml import adapter as nvml
from ansible_collections.gpuops.nvidia.plugins.module_utils.host import files


def main():
    module = AnsibleModule(
        argument_spec=dict(
            config_file=dict(type="path"),
            config=dict(type="dict"),
            config_name=dict(type="str", required=True),
            allow_gpu_reset=dict(type="bool", default=False),
            profile_record=dict(type="str", default=records.MIG_PROFILES),
            host_root=dict(type="path", default="/"),
        ),
        mutually_exclusive=[("config_file", "config")],
        supports_check_mode=True,
    )
    files.require_root(module)
    if not nvml.HAS_PYNVML:
        module.fail_json(msg=missing_required_lib("nvidia-ml-py (Python module pynvml)"),
                         exception=nvml.PYNVML_IMPORT_ERROR)
    try:
        result = service.run(module)
    except service.MigError as exc:
        module.fail_json(msg=exc.message, **exc.result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()

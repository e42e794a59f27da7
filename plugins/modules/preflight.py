#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

__metaclass__ = type

DOCUMENTATION = r"""
---
module: preflight
short_description: Check that a host can take an NVIDIA driver plan before anything changes
version_added: 0.1.0
description:
  - Finds the host's NVIDIA GPUs and NVSwitches on the PCI bus (no driver needed; names from the
    host's C(pci.ids)), or through NVML when a driver is loaded, and checks the requested driver
    plan against them and the host.
  - "Checks: GPU architecture against the driver branch and against the kernel module flavour;
    the driver CUDA O(cuda_version) needs; the MIG minimum driver and MIG support of each model;
    the distribution release against the chosen O(source); kernel headers when DKMS will build;
    Secure Boot with an unsigned build; nouveau loaded or not blacklisted; a driver installed by
    NVIDIA's .run installer; NVSwitches that need the fabric manager; free disk space."
  - Compares the plan with the driver the host has installed (its package database) and loaded,
    and says what a run will do (RV(plan)) - install, keep, update within the branch, or change
    the branch, which is refused unless O(allow_branch_change=true).
  - Reports every problem at once, each with a code, a message that names the GPU model, what is
    required and what was asked, and a fix. Changes nothing.
  - With O(container_runtime), also finds the container runtime the NVIDIA Container Toolkit will
    configure, as M(gpuops.nvidia.container_runtime_info) does, so one look at the node checks the
    toolkit's runtime too before any stage changes it (RV(container_runtime)).
author:
  - gpuops.nvidia maintainers (@gpuops)
requirements:
  - nvidia-ml-py (Python module C(pynvml)) on the managed host only to read GPUs through a
    loaded driver; without it the PCI bus is used.
options:
  driver_branch:
    description: Driver branch to install, for example C(580) or C(R580).
    type: str
    required: true
  driver_version:
    description:
      - Exact driver version to pin (for example C(580.95.05)); checked against the CUDA and MIG
        minimums instead of the branch.
      - Must be a whole version (C(580) alone is refused) on O(driver_branch).
    type: str
  allow_branch_change:
    description:
      - Allow a plan whose branch differs from the driver the host has installed (or loaded).
        Changing the branch is an upgrade that needs the node drained and rebooted; without this
        it is an error finding, so a default or a typo never starts one.
    type: bool
    default: false
  kernel_module_type:
    description: Kernel module flavour. C(auto) chooses from the GPUs and the branch.
    type: str
    choices: [auto, open, proprietary]
    default: auto
  cuda_version:
    description: Newest CUDA release the workloads need (for example C(12.8)).
    type: str
  mig_required:
    description: The GPUs must support MIG with this driver.
    type: bool
    default: false
  source:
    description:
      - Where the driver comes from. C(cuda_repo) is NVIDIA's CUDA repository; C(distro) is the
        distribution's own packages (Debian non-free, Ubuntu's signed precompiled modules).
    type: str
    choices: [cuda_repo, distro]
    default: cuda_repo
  min_free_mib:
    description: Free space needed on C(/usr) and C(/var), in MiB.
    type: int
    default: 2048
  container_runtime:
    description:
      - Also find the container runtime the toolkit will configure - C(auto) (the kubelet's, else
        the one that runs, else the one installed) or one by name - and return it as
        RV(container_runtime). Its problems are not findings of the driver plan and never fail this
        module; the P(gpuops.nvidia.container_toolkit#role) role's pre-flight judges them.
      - Not probed when omitted.
    type: str
    choices: [auto, containerd, crio, docker]
  gpu_allocation:
    description:
      - What will allocate the node's GPUs to pods. C(dra) - NVIDIA's DRA driver - adds its
        prerequisites as findings - a container runtime that injects devices through CDI
        (containerd 1.7 or 2.x, CRI-O 1.27 or newer; containerd 1.6 and Docker are refused), a driver
        of branch R565 or newer (loaded, or planned when none is), and the kubelet's plugin
        directories O(kubelet_plugin_dirs). The runtime is found as for O(container_runtime)
        (C(auto) when that is omitted) and returned as RV(container_runtime).
    type: str
    choices: [device-plugin, dra]
    default: device-plugin
  kubelet_plugin_dirs:
    description: The kubelet's plugin and plugin registration directories (with O(gpu_allocation=dra)).
    type: list
    elements: path
    default: [/var/lib/kubelet/plugins, /var/lib/kubelet/plugins_registry]
  fail_on_problems:
    description: Fail when any finding is an error. The findings are returned either way.
    type: bool
    default: true
  host_root:
    description:
      - Directory under which C(/sys), C(/proc), C(/etc), C(/lib/modules), the package database and
        C(pci.ids) are read; only useful when the host's file systems are mounted elsewhere.
      - A path that does not exist or is not a directory (a typo) fails the module before anything is read.
    type: path
    default: /
extends_documentation_fragment:
  - gpuops.nvidia.attributes.read_only
seealso:
  - module: gpuops.nvidia.gpu_info
"""

EXAMPLES = r"""
- name: Check the plan before touching the host
  gpuops.nvidia.preflight:
    driver_branch: "580"
    cuda_version: "13.0"
    mig_required: true

- name: Collect the findings without failing
  gpuops.nvidia.preflight:
    driver_branch: "{{ driver_branch }}"
    source: distro
    fail_on_problems: false
  register: preflight

- name: Use the recommendation
  ansible.builtin.debug:
    msg: "install {{ preflight.recommendation.packages | join(', ') }}"
  when: preflight.recommendation
"""

RETURN = r"""
passed:
  description: True when no finding is an error.
  returned: always
  type: bool
findings:
  description: Every problem found, errors first.
  returned: always
  type: list
  elements: dict
  sample:
    - code: branch_unsupported_gpu
      severity: error
      message: "NVIDIA H100 80GB HBM3 (Hopper) needs driver branch R525 and newer; branch R470 was requested.
        Supported branches for Hopper: R535, R550, R560, R565, R570, R575, R580, R590, R595, R610, R620"
      fix: set driver_branch to one of 535, 550, ...
      subject: GPU 0, 1, 2, 3
plan:
  description:
    - What the run will do to the driver (C(action) - C(install), C(keep), C(update) to another
      version of the same branch, or C(change_branch)) compared with what is installed and
      loaded, in words in C(message). Null when the branch is invalid or unknown.
  returned: always
  type: dict
  sample: {action: change_branch, installed: 570.172.08, loaded: 570.172.08, branch: 580, version: null,
           message: "installed 570.172.08 (loaded); branch R580 was requested: the run would change the driver branch"}
recommendation:
  description: The branch, module flavour, source and packages to install; null when the plan
    cannot be worked out (invalid or unknown branch, conflicting flavours).
  returned: always
  type: dict
  sample: {branch: 580, kernel_module_type: open, source: cuda_repo, packages: [nvidia-open],
           fabric_manager: false, dkms: true}
gpus:
  description: The GPUs the plan was checked against (from NVML when the driver answers, else PCI).
  returned: always
  type: list
  elements: dict
nvswitch_count:
  description: NVSwitches found on the PCI bus or behind the GPUs' NVLinks.
  returned: always
  type: int
host:
  description: What was read from the host (OS release, kernel and headers, Secure Boot, nouveau,
    runfile install, free space).
  returned: always
  type: dict
driver:
  description: The NVIDIA driver as NVML sees it now (see M(gpuops.nvidia.gpu_info)).
  returned: always
  type: dict
container_runtime:
  description:
    - The container runtime O(container_runtime) asked for, with the keys
      M(gpuops.nvidia.container_runtime_info) returns (C(requested), C(runtime), C(reason),
      C(version), C(cdi_supported), C(installed), C(kubelet_endpoint), C(problems)).
  returned: when O(container_runtime) is given, or O(gpu_allocation=dra)
  type: dict
  sample: {requested: auto, runtime: containerd, version: 1.6.20, cdi_supported: false, problems: []}
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuops.nvidia.plugins.module_utils.host import commands
from ansible_collections.gpuops.nvidia.plugins.module_utils.host import driver_state
from ansible_collections.gpuops.nvidia.plugins.module_utils.host import kernel
from ansible_collections.gpuops.nvidia.plugins.module_utils.nvml import adapter as nvml
from ansible_collections.gpuops.nvidia.plugins.module_utils.host import pci
from ansible_collections.gpuops.nvidia.plugins.module_utils.gpu import preflight
from ansible_collections.gpuops.nvidia.plugins.module_utils.host import readiness as host_facts
from ansible_collections.gpuops.nvidia.plugins.module_utils.host import files
from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime import detect


def main():
    module = AnsibleModule(
        argument_spec=dict(
            driver_branch=dict(type="str", required=True),
            driver_version=dict(type="str"),
            allow_branch_change=dict(type="bool", default=False),
            kernel_module_type=dict(type="str", default="auto", choices=["auto", "open", "proprietary"]),
            cuda_version=dict(type="str"),
            mig_required=dict(type="bool", default=False),
            source=dict(type="str", default="cuda_repo", choices=list(preflight.SOURCES)),
            min_free_mib=dict(type="int", default=2048),
            container_runtime=dict(type="str", choices=["auto"] + list(detect.RUNTIMES)),
            gpu_allocation=dict(type="str", default="device-plugin", choices=["device-plugin", "dra"]),
            kubelet_plugin_dirs=dict(type="list", elements="path",
                                     default=["/var/lib/kubelet/plugins", "/var/lib/kubelet/plugins_registry"]),
            fail_on_problems=dict(type="bool", default=True),
            host_root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )
    files.require_root(module)
    params = module.params
    root = params["host_root"]

    node = nvml.read_node() if nvml.HAS_PYNVML else {
        "driver": {"loaded": False, "reason": "bindings_missing", "message": "pynvml is not installed"},
        "gpus": []}
    devices = pci.nvidia_devices(root)
    behind_nvlink = {link.get("remote_bus_id") for gpu in node["gpus"]
                     for link in (gpu.get("nvlink") or {}).get("links", [])
                     if link.get("remote_type") == "nvswitch"}
    if not devices["nvswitches"] and behind_nvlink:
        devices["nvswitches"] = [{"bus_id": bus_id} for bus_id in sorted(behind_nvlink)]
    host = host_facts.gather(root)
    gpus = preflight.gpu_list(node["gpus"], devices["gpus"])
    packages, _held = driver_state.read_installed(root, lambda argv: commands.output(module, argv))
    loaded = kernel.loaded_module(root)["version"] or (node["driver"].get("version") if node["driver"]["loaded"]
                                                       else None)
    runtime = None
    if params["container_runtime"] or params["gpu_allocation"] == "dra":
        runtime = detect.report(module, params["container_runtime"] or "auto", root)
    dra = None
    if params["gpu_allocation"] == "dra":
        dra = {"runtime": runtime, "missing_dirs": [path for path in params["kubelet_plugin_dirs"]
                                                    if not os.path.isdir(os.path.join(root, path.lstrip("/")))]}
    report = preflight.run(params, host, devices, gpus,
                           {"installed": driver_state.installed_driver_version(packages)[0], "loaded": loaded}, dra)

    result = dict(
        changed=False,
        passed=report["errors"] == 0,
        findings=report["findings"],
        recommendation=report["recommendation"],
        plan=report["action"],
        gpus=gpus,
        nvswitch_count=len(devices["nvswitches"]),
        host=host,
        driver=node["driver"],
    )
    if runtime is not None:
        result["container_runtime"] = runtime
        for message in result["container_runtime"].pop("warnings"):
            module.warn(message)
    if report["errors"] and params["fail_on_problems"]:
        errors = ["%s (fix: %s)" % (f["message"], f["fix"]) for f in report["findings"] if f["severity"] == "error"]
        module.fail_json(msg="pre-flight found %d problem(s): %s" % (len(errors), " | ".join(errors)), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()

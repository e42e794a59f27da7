#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

__metaclass__ = type

DOCUMENTATION = r"""
---
module: container_runtime_info
short_description: Find the container runtime a node actually uses, and say why
version_added: 0.1.0
description:
  - Finds the installed container runtimes (containerd, CRI-O, Docker) and their versions, which
    of their services run, and the kubelet's C(--container-runtime-endpoint) (from the running
    kubelet, kubeadm's flags file or the kubelet's configuration).
  - Chooses the runtime to configure for the NVIDIA runtime - the kubelet's when there is a
    kubelet, else the one whose service runs (Docker before the containerd it brings along),
    else the one installed - and returns the reason in words.
  - With a runtime asked for (O(runtime)), says when it is not installed (RV(problems)), and
    warns when the kubelet uses another one, so nothing is written for a runtime the node does
    not have.
author:
  - gpuops.nvidia maintainers (@gpuops)
options:
  runtime:
    description: The runtime asked for; C(auto) chooses as described above.
    type: str
    choices: [auto, containerd, crio, docker]
    default: auto
  host_root:
    description:
      - Directory under which the kubelet's files and C(/proc) are read.
      - A path that does not exist or is not a directory (a typo) fails the module before anything is read.
    type: path
    default: /
extends_documentation_fragment:
  - gpuops.nvidia.attributes.read_only
seealso:
  - module: gpuops.nvidia.runtime_config
"""

EXAMPLES = r"""
- name: Find the node's container runtime
  gpuops.nvidia.container_runtime_info:
  register: runtime

- name: Stop when there is nothing to configure
  ansible.builtin.assert:
    that: runtime.problems | length == 0
    fail_msg: "{{ runtime.problems | gpuops.nvidia.finding_lines | join('; ') }}"

- name: Say which runtime and why
  ansible.builtin.debug:
    msg: "configuring {{ runtime.runtime }}: {{ runtime.reason }}"
"""

RETURN = r"""
requested:
  description: The runtime asked for (O(runtime)).
  returned: always
  type: str
  sample: auto
runtime:
  description: The runtime to configure (C(containerd), C(crio), C(docker)), null when there is none.
  returned: always
  type: str
  sample: docker
reason:
  description: Why that runtime, in words.
  returned: always
  type: str
  sample: docker.service is active (the containerd that runs beside it is Docker's own)
version:
  description: The chosen runtime's version, null when unknown.
  returned: always
  type: str
  sample: 26.1.5
cdi_supported:
  description: Whether the chosen runtime's version does CDI (containerd 1.7, CRI-O 1.23, Docker 25); null when unknown.
  returned: always
  type: bool
installed:
  description: Every runtime found, with its binary and version.
  returned: always
  type: dict
  sample: {containerd: {binary: /usr/bin/containerd, version: 1.6.20, active: true}}
kubelet_endpoint:
  description: The kubelet's container runtime endpoint and where it was read; nulls without a kubelet.
  returned: always
  type: dict
  sample: {endpoint: "unix:///run/containerd/containerd.sock", source: /var/lib/kubelet/kubeadm-flags.env}
problems:
  description:
    - Why the runtime cannot be configured, as findings (C(runtime_not_installed),
      C(runtime_ambiguous), C(no_runtime)); empty when it can.
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime import detect
from ansible_collections.gpuops.nvidia.plugins.module_utils.host import files


def main():
    module = AnsibleModule(
        argument_spec=dict(
            runtime=dict(type="str", default="auto", choices=["auto"] + list(detect.RUNTIMES)),
            host_root=dict(type="path", default="/"),
        ),
        supports_check_mode=True,
    )
    files.require_root(module)
    found = detect.report(module, module.params["runtime"], module.params["host_root"])
    for message in found.pop("warnings"):
        module.warn(message)
    module.exit_json(changed=False, **found)


if __name__ == "__main__":
    main()

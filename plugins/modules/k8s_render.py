#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

__metaclass__ = type

DOCUMENTATION = r"""
---
module: k8s_render
short_description: Write a role's Kubernetes objects as files for GitOps (render mode)
version_added: 0.1.0
description:
  - "Render mode's writer (C(gpuops_render_dir)): each object becomes one YAML file in O(directory),
    named by rank, kind, namespace and name (so that C(kubectl apply -f DIR) creates namespaces and
    CRDs before what uses them), under a first line naming the role that rendered it."
  - "Files O(owner) rendered before whose objects it no longer produces are removed. Every other file
    in the directory (another role's, a C(kustomization.yaml), anything written by hand) is left alone."
  - "Secrets are never written (a Git repository is no place for them): their names are returned in
    RV(not_rendered), for a sealed or external secret to provide them."
  - "Bad input fails before any file is written: two objects that would share a file, an object
    without kind or name, a file of an object's name that O(owner) did not render, a directory
    that cannot be written."
  - "Files are written atomically and only when their text changes; a file's owner and mode are kept."
  - Runs where the files are to be written (the controller, with C(delegate_to) localhost).
author:
  - gpuops.nvidia maintainers (@gpuops)
requirements:
  - PyYAML (ansible-core's own dependency)
options:
  objects:
    description: The Kubernetes objects (each with C(kind) and C(metadata.name)).
    type: list
    elements: dict
    required: true
  directory:
    description: The render directory; created (mode 0755) when a file is to be written.
    type: path
    required: true
  owner:
    description:
      - "The role the objects belong to (for example C(device_plugin)); its files carry the header
        C(# gpuops.nvidia.OWNER: rendered, not applied (gpuops_render_dir))."
      - Only files with this header are ever replaced or removed.
    type: str
    required: true
  state:
    description:
      - V(present) writes the objects and removes the owner's other files.
      - V(absent) removes every file the owner rendered, writing none (the role's objects are removed).
    type: str
    choices: [present, absent]
    default: present
attributes:
  check_mode:
    support: full
    description: Reports the files that would be written and removed, changing nothing.
  diff_mode:
    support: full
    description: Before and after of each file written or removed.
  idempotent:
    support: full
    description: Rendering the same objects again changes no file.
"""

EXAMPLES = r"""
- name: Render the device plugin's objects for a GitOps repository
  gpuops.nvidia.k8s_render:
    objects: "{{ device_plugin_objects }}"
    directory: /srv/gitops/gpu-operands
    owner: device_plugin
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
written:
  description: Names of the files written (new or changed).
  returned: always
  type: list
  elements: str
removed:
  description: Names of the owner's files removed (their objects are no longer produced).
  returned: always
  type: list
  elements: str
files:
  description: Names of every file the owner's objects have now.
  returned: always
  type: list
  elements: str
not_rendered:
  description: Names of the Secrets left out.
  returned: always
  type: list
  elements: str
directory:
  description: The render directory.
  returned: always
  type: str
"""

from ansible.module_utils.basic import AnsibleModule
from ansible_collections.gpuops.nvidia.plugins.module_utils.host import files
from ansible_collections.gpuops.nvidia.plugins.module_utils.k8s import render


def main():
    module = AnsibleModule(
        argument_spec=dict(
            objects=dict(type="list", elements="dict", required=True),
            directory=dict(type="path", required=True),
            owner=dict(type="str", required=True),
            state=dict(type="str", choices=["present", "absent"], default="present"),
        ),
        supports_check_mode=True,
    )
    try:
        module.exit_json(**render.render(module, module.params))
    except (render.RenderError, files.FileError) as exc:
        module.fail_json(msg=str(exc))


if __name__ == "__main__":
    main()

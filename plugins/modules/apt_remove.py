#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

__metaclass__ = type

DOCUMENTATION = r"""
---
module: apt_remove
short_description: Remove exactly the packages a role installed, never one that something else still needs
version_added: 0.1.0
description:
  - Removes (purges) the installed packages of O(name) - typically every package a role's
    installation added, its dependencies included, as the role recorded them.
  - Asks apt first (a simulation) what the removal would take away. Packages that another of
    the collection's roles needs (O(keep)), or that other installed packages depend on, are kept
    together with everything they depend on; the removal never takes a package outside O(name).
  - Changes nothing when there is nothing to remove.
  - With O(owner), a role's whole removal in one step, from the records of the collection's
    installations (O(record_dir)/<owner>.json, written by M(gpuops.nvidia.apt_install)) - the
    holds on what the role's installations added are released, what they added is removed but
    every package another record requires (and what those depend on), what stays for another
    role is handed to that role's record (its own removal takes it back later), and the role's
    record is removed. Without a record nothing is removed (RV(msg) says so).
author:
  - gpuops.nvidia maintainers (@gpuops)
options:
  name:
    description:
      - Packages that may be removed (those not installed are ignored).
      - Required without O(owner); mutually exclusive with it.
    type: list
    elements: str
  owner:
    description:
      - The role whose installations' packages go, as its record in O(record_dir) lists them.
      - Mutually exclusive with O(name).
    type: str
    version_added: 0.2.0
  record_dir:
    description: Where the records of the roles' installations are kept (with O(owner)).
    type: path
    default: /var/lib/gpuops/packages
    version_added: 0.2.0
  keep:
    description: Packages that must stay installed (other roles need them), with their dependencies.
      With O(owner), what the other records require is kept too.
    type: list
    elements: str
    default: []
  purge:
    description: Purge the packages' configuration files too.
    type: bool
    default: true
  allow_held:
    description: Remove packages that are held (C(apt-mark hold)), as a role's own holds are.
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    description: Simulates the removal and reports what it would take away.
  diff_mode:
    support: full
    description: The installed packages that go, as a before/after list (with O(owner), also the records that change).
  idempotent:
    support: full
    description: A second run finds nothing installed to remove (with O(owner), no record left).
seealso:
  - module: ansible.builtin.apt
"""

EXAMPLES = r"""
- name: Remove what the driver role installed
  gpuops.nvidia.apt_remove:
    name: "{{ record.added }}"
    keep: [python3-pynvml]

- name: Remove what the driver role's installations added, as its record says
  gpuops.nvidia.apt_remove:
    owner: driver
"""

RETURN = r"""
removed:
  description: The packages removed (or, in check mode, that would be).
  returned: always
  type: list
  elements: str
kept:
  description: Packages of O(name) left installed, with the reason.
  returned: always
  type: list
  elements: dict
  sample: [{name: python3-pynvml, why: another role needs it}]
released:
  description: The packages whose hold was released (would be, in check mode).
  returned: with O(owner)
  type: list
  elements: str
records:
  description: The records that changed - others' that took over what was kept, and the role's own, removed.
  returned: with O(owner)
  type: list
  elements: str
msg:
  description: Why nothing was removed (no record of the role's installations).
  returned: with O(owner), when the role has no record
  type: str
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuops.nvidia.plugins.module_utils.apt import ops, remove


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="list", elements="str"),
            owner=dict(type="str"),
            record_dir=dict(type="path", default="/var/lib/gpuops/packages"),
            keep=dict(type="list", elements="str", default=[]),
            purge=dict(type="bool", default=True),
            allow_held=dict(type="bool", default=True),
        ),
        mutually_exclusive=[("name", "owner")],
        required_one_of=[("name", "owner")],
        supports_check_mode=True,
    )
    params = module.params
    try:
        if params["owner"]:
            result = remove.remove_owned(module, params["owner"], params["record_dir"], params["keep"], params["purge"],
                                         params["allow_held"])
        else:
            result = remove.remove(module, params["name"], params["keep"], params["purge"], params["allow_held"])
    except ops.AptError as exc:
        module.fail_json(**exc.result())
    module.exit_json(**result)


if __name__ == "__main__":
    main()

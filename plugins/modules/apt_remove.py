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
author:
  - gpuops.nvidia maintainers (@gpuops)
options:
  name:
    description: Packages that may be removed (those not installed are ignored).
    type: list
    elements: str
    required: true
  keep:
    description: Packages that must stay installed (other roles need them), with their dependencies.
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
    description: The installed packages that go, as a before/after list.
  idempotent:
    support: full
    description: A second run finds nothing installed to remove.
seealso:
  - module: ansible.builtin.apt
"""

EXAMPLES = r"""
- name: Remove what the driver role installed
  gpuops.nvidia.apt_remove:
    name: "{{ record.added }}"
    keep: [python3-pynvml]
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
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuops.nvidia.plugins.module_utils.apt import parse as apt
from ansible_collections.gpuops.nvidia.plugins.module_utils.host import commands


def _closure(module, names):
    """names and everything installed they depend on (recursively)."""
    if not names:
        return set()
    rc, out, err = commands.run(module, ["apt-cache", "depends", "--recurse", "--installed", "--no-recommends",
                                         "--no-suggests", "--no-conflicts", "--no-breaks", "--no-replaces",
                                         "--no-enhances"] + sorted(names))
    if rc != 0:
        module.fail_json(msg="apt-cache depends failed: %s" % (err.strip() or out.strip()))
    return apt.parse_depends(out) | set(names)


def _verb(module):
    return "purge" if module.params["purge"] else "remove"


def _simulate(module, names, options):
    rc, out, err = commands.run(module, ["apt-get", "-s", "-q", "-y"] + options + [_verb(module)] + sorted(names))
    if rc != 0:
        module.fail_json(msg="apt cannot plan the removal of %s: %s" % (", ".join(sorted(names)),
                                                                        (err.strip() or out.strip())))
    return set(apt.parse_simulation(out))


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="list", elements="str", required=True),
            keep=dict(type="list", elements="str", default=[]),
            purge=dict(type="bool", default=True),
            allow_held=dict(type="bool", default=True),
        ),
        supports_check_mode=True,
    )
    _rc, listing, _err = commands.run(module, ["dpkg-query", "-W", "-f=${db:Status-Abbrev} ${Package}\\n"])
    installed = apt.parse_installed(listing)
    options = ["--allow-change-held-packages"] if module.params["allow_held"] else []
    candidates = set(module.params["name"]) & installed
    kept = {}
    protected = _closure(module, set(module.params["keep"]) & installed)
    for name in sorted(candidates & protected):
        kept[name] = "another role needs it" if name in module.params["keep"] else "a package another role needs depends on it"
    candidates -= protected
    # What apt would take away beyond the candidates depends on them: keep what those need.
    for _attempt in range(5):
        if not candidates:
            break
        extra = _simulate(module, candidates, options) - candidates
        if not extra:
            break
        needed = _closure(module, extra) & candidates
        for name in sorted(needed):
            kept[name] = "installed packages depend on it (%s)" % ", ".join(sorted(extra)[:5])
        candidates -= needed
    else:
        module.fail_json(msg="apt would still remove more than asked for; nothing was removed", kept=kept)

    result = dict(changed=bool(candidates), removed=sorted(candidates),
                  kept=[{"name": name, "why": why} for name, why in sorted(kept.items())])
    if module._diff and candidates:
        result["diff"] = {"before": "\n".join(sorted(installed & set(module.params["name"]))) + "\n",
                          "after": "\n".join(sorted((installed & set(module.params["name"])) - candidates)) + "\n"}
    if candidates and not module.check_mode:
        rc, out, err = commands.run(module, ["apt-get", "-q", "-y"] + options + [_verb(module)] + sorted(candidates),
                                    env={"DEBIAN_FRONTEND": "noninteractive"})
        if rc != 0:
            problem = err.strip() or out.strip()
            module.fail_json(msg="apt-get could not remove %s: %s" % (", ".join(sorted(candidates)), problem), **result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()

#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

__metaclass__ = type

DOCUMENTATION = r"""
---
module: apt_install
short_description: Install a role's packages, record what the installation added, and hold them - in one step
version_added: 0.2.0
description:
  - One task for what a stage does with packages - refresh the package lists when they are older
    than O(cache_valid_time) (naming a failing source, apt's reason and the fix), install
    O(names) (missing ones, or every one to its candidate version with O(latest)), record in
    O(record_dir)/<owner>.json what the role needs and every package its installations added
    (dependencies included, so that M(gpuops.nvidia.apt_remove) takes back exactly that), and
    hold or release O(hold).
  - Check mode simulates the installation with C(apt-get -s) against the lists as they are and
    reports the packages that would change; diff mode shows them with their versions.
  - Recommends are never installed; held packages may be changed (the role that holds them is
    the one changing them), with a downgrade only when O(allow_downgrade) says so.
author:
  - gpuops.nvidia maintainers (@gpuops)
options:
  names:
    description: The packages to install (apt names, C(name=version) pins allowed).
    type: list
    elements: str
    required: true
  owner:
    description: The role the installation is for (names its record).
    type: str
    required: true
  record_dir:
    description: Where the records of the roles' installations are kept.
    type: path
    default: /var/lib/gpuops/packages
  prerequisites:
    description:
      - Packages the role's own modules need (Python libraries of the distribution), installed in
        the same transaction as O(names) when they are missing, and recorded with them - never
        upgraded, downgraded or held, whatever O(latest), O(allow_downgrade) and O(hold) say.
      - They come from the distribution's repositories, so check mode simulates them even with
        O(repository_pending) (RV(added) says which would be installed).
    type: list
    elements: str
    default: []
  latest:
    description: Bring every package of O(names) to its candidate version (an upgrade, or a
      downgrade with O(allow_downgrade)); otherwise only missing packages are installed.
    type: bool
    default: false
  allow_downgrade:
    description: Let apt install a candidate older than the installed version (an exact version pin).
    type: bool
    default: false
  retire_branch_packages:
    description:
      - Remove, in the same transaction, the packages the role's record required before that end
        in a branch number and are no longer asked for - on a driver branch change
        C(nvidia-fabricmanager-570) makes way for C(nvidia-fabricmanager-580), which depend on
        different versions of the same driver packages. Held ones are released.
    type: bool
    default: false
  repository_pending:
    description:
      - In check mode, the packages' repository is not in place yet (the same run would add it
        first), so apt cannot resolve them - the installation is reported as a change, with the
        reason in RV(msg), without asking apt about O(names) (the missing O(prerequisites), from
        the distribution, are still simulated). Ignored outside check mode.
    type: bool
    default: false
  hold:
    description: Packages to hold (or release with O(hold_state=false)) once installed.
    type: list
    elements: str
    default: []
  hold_state:
    description: C(true) holds O(hold); C(false) releases them.
    type: bool
    default: true
  cache_valid_time:
    description: Refresh the package lists when the newest is older than this many seconds; C(0)
      refreshes every time. Never in check mode.
    type: int
    default: 3600
  tolerate:
    description: Source files (glob patterns) whose refresh failure is only a warning (another
      stage's repository, whose key that stage brings up to date).
    type: list
    elements: str
    default: []
  strict:
    description: Source files whose refresh must succeed even when O(tolerate) matches them.
    type: list
    elements: path
    default: []
  hints:
    description: Fixes in the caller's words per problem kind (C(key), C(not_found), C(proxy)),
      added to refresh failures.
    type: dict
    default: {}
  environment:
    description: Environment for apt (C(http_proxy), C(https_proxy)); never logged, as a proxy URL may carry a password.
    type: dict
    default: {}
attributes:
  check_mode:
    support: full
    description: Simulates the installation (C(apt-get -s)) and reports what would change.
  diff_mode:
    support: full
    description: The packages that change, with their versions before and after.
  idempotent:
    support: full
    description: Installed packages, their record and holds as asked change nothing.
seealso:
  - module: gpuops.nvidia.apt_refresh
  - module: gpuops.nvidia.apt_remove
"""

EXAMPLES = r"""
- name: Install the driver, record it and hold it
  gpuops.nvidia.apt_install:
    names: [nvidia-open, nvidia-fabricmanager-580]
    owner: driver
    hold: [nvidia-open, nvidia-fabricmanager-580]
    environment:
      https_proxy: http://proxy.example:3128
"""

RETURN = r"""
msg:
  description: Why the installation was not simulated (O(repository_pending) in check mode).
  returned: when O(repository_pending) applies
  type: str
changed_packages:
  description: The packages the installation installed or changed (would, in check mode), with versions.
  returned: always
  type: list
  elements: dict
  sample: [{name: nvidia-open, before: null, after: 580.95.05-1}]
added:
  description: Packages this installation added that were not installed before (dependencies included).
  returned: always
  type: list
  elements: str
retired:
  description: The earlier branch's packages removed (O(retire_branch_packages)).
  returned: always
  type: list
  elements: str
held:
  description: The packages of O(hold) whose hold changed.
  returned: always
  type: list
  elements: str
refreshed:
  description: Whether the package lists were refreshed.
  returned: always
  type: bool
record:
  description: The role's installation record as written.
  returned: always
  type: dict
  sample: {owner: driver, requires: [nvidia-open], added: [nvidia-open, nvidia-kernel-open-dkms]}
problems:
  description: Refresh problems of tolerated sources (each also a warning).
  returned: always
  type: list
  elements: dict
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuops.nvidia.plugins.module_utils.apt import parse as apt
from ansible_collections.gpuops.nvidia.plugins.module_utils.apt import ops as apt_ops
from ansible_collections.gpuops.nvidia.plugins.module_utils.host import files


def _base_name(name: str) -> str:
    return name.split("=")[0].split(":")[0]


def _record(module, path: str) -> dict | None:
    text = files.read_text(path)
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        module.fail_json(msg="the installation record %s is not JSON (%s); move it away; nothing was changed" % (path, exc))


def _record_partial(module, path: str, previous: dict | None, params: dict, before: dict, retired: list):
    now = apt_ops.installed(module)
    added = sorted(name for name in now if name not in before)
    gone = [name for name in retired if name not in now]
    if added or gone:
        record = apt.install_record(previous, params["owner"],
                                    [_base_name(n) for n in params["names"] + params["prerequisites"]], added,
                                    retired=gone)
        files.write_atomic(module, path, json.dumps(record, indent=2, sort_keys=True) + "\n", mode=0o644)


def _exit_pending(module, result, before, state):
    """Check mode before the repository is in place: apt cannot resolve its packages, so only the
    missing prerequisites (the distribution's) are simulated; the installation is a change."""
    params = module.params
    missing = [name for name in params["prerequisites"] if _base_name(name) not in before]
    planned = apt_ops.simulate_install(module, missing, ["--no-install-recommends"], params["environment"]) \
        if missing else []
    result.update(changed=True, retired=state["retired"],
                  msg="the repository would be added first; apt cannot resolve its packages before it is, so "
                      "the installation is not simulated" + (" (only the missing prerequisites are)" if missing else ""),
                  changed_packages=[{"name": name, "before": before.get(name), "after": version}
                                    for name, version in sorted(planned)],
                  added=sorted(name for name, _version in planned if name not in before))
    result["record"] = apt.install_record(state["previous"], params["owner"],
                                          [_base_name(n) for n in params["names"] + params["prerequisites"]],
                                          result["added"], retired=state["retired"])
    _add_diff(module, result)
    module.exit_json(**result)


def _add_diff(module, result):
    """Diff mode: the packages that change, with their versions."""
    if module._diff and result["changed_packages"]:
        result["diff"] = {
            "before_header": "packages", "after_header": "packages",
            "before": "".join("%s %s\n" % (p["name"], p["before"] or "(not installed)") for p in result["changed_packages"]),
            "after": "".join("%s %s\n" % (p["name"], p["after"]) for p in result["changed_packages"])}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            names=dict(type="list", elements="str", required=True),
            prerequisites=dict(type="list", elements="str", default=[]),
            owner=dict(type="str", required=True),
            record_dir=dict(type="path", default="/var/lib/gpuops/packages"),
            latest=dict(type="bool", default=False),
            allow_downgrade=dict(type="bool", default=False),
            retire_branch_packages=dict(type="bool", default=False),
            repository_pending=dict(type="bool", default=False),
            hold=dict(type="list", elements="str", default=[]),
            hold_state=dict(type="bool", default=True),
            cache_valid_time=dict(type="int", default=3600),
            tolerate=dict(type="list", elements="str", default=[]),
            strict=dict(type="list", elements="path", default=[]),
            hints=dict(type="dict", default={}),
            environment=dict(type="dict", default={}, no_log=True),
        ),
        supports_check_mode=True,
    )
    params = module.params
    if not params["names"]:
        module.fail_json(msg="names is empty: give the packages to install")
    environment = params["environment"]
    result = {"changed": False, "refreshed": False, "problems": [], "changed_packages": [], "added": [], "held": []}
    pending = module.check_mode and params["repository_pending"]
    try:
        if not module.check_mode and apt_ops.needs_refresh(params["cache_valid_time"]):
            refreshed = apt_ops.refresh(module, tolerate=params["tolerate"], strict=params["strict"],
                                        hints=params["hints"], environment=environment)
            result.update(refreshed=True, problems=refreshed["problems"])
        before = apt_ops.installed(module)
        path = os.path.join(params["record_dir"], "%s.json" % params["owner"])
        previous = _record(module, path)
        retired = apt.retired_branch_packages((previous or {}).get("requires") or [],
                                              [_base_name(n) for n in params["names"] + params["prerequisites"]],
                                              before) \
            if params["retire_branch_packages"] else []
        if pending:
            _exit_pending(module, result, before, dict(path=path, previous=previous, retired=retired))
        wanted = [name for name in params["names"] if params["latest"] or _base_name(name) not in before]
        if retired:
            wanted = list(params["names"]) + ["%s-" % name for name in retired]
        wanted += [name for name in params["prerequisites"] if _base_name(name) not in before]
        options = ["--no-install-recommends", "--allow-change-held-packages"]
        options += ["--allow-downgrades"] if params["allow_downgrade"] else []
        planned = apt_ops.simulate_install(module, wanted, options, environment) if wanted else []
        if planned and not module.check_mode:
            try:
                apt_ops.install(module, wanted, options, environment)
            except apt_ops.AptError:
                # what apt installed before it failed is recorded too, so a removal takes it away
                _record_partial(module, path, previous, params, before, retired)
                raise
            after = apt_ops.installed(module)
            planned = [(name, version) for name, version in after.items() if before.get(name) != version]
        else:
            after = dict(before, **dict(planned))
        result["changed_packages"] = [{"name": name, "before": before.get(name), "after": version}
                                      for name, version in sorted(planned)]
        result["added"] = sorted(name for name, _version in planned if name not in before)
        result["retired"] = retired
        if retired and module.check_mode:
            after = {name: version for name, version in after.items() if name not in retired}

        record = apt.install_record(previous, params["owner"],
                                    [_base_name(n) for n in params["names"] + params["prerequisites"]],
                                    result["added"], retired=retired)
        result["record"] = record
        if record != previous:
            if not module.check_mode:
                files.write_atomic(module, path, json.dumps(record, indent=2, sort_keys=True) + "\n", mode=0o644)
            result["changed"] = True

        hold = {_base_name(name) for name in params["hold"]}
        current = apt_ops.held(module) if hold else set()
        change = (hold - current) if params["hold_state"] else (hold & current)
        # a package still to be installed is held once it is (check mode cannot hold it yet)
        change = {name for name in change if name in after}
        if change:
            if not module.check_mode:
                apt_ops.mark(module, "hold" if params["hold_state"] else "unhold", change)
            result["held"] = sorted(change)
    except apt_ops.AptError as exc:
        module.fail_json(msg=str(exc), problems=exc.problems, changed=result["changed"] or exc.changed)
    result["changed"] = result["changed"] or bool(result["changed_packages"]) or bool(result["held"]) or bool(retired)
    _add_diff(module, result)
    module.exit_json(**result)


if __name__ == "__main__":
    main()

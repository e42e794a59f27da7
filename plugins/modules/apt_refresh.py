#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

__metaclass__ = type

DOCUMENTATION = r"""
---
module: apt_refresh
short_description: Refresh apt's package lists for given sources only, and say which source failed and why
version_added: 0.1.0
description:
  - Runs C(apt-get update) for the given source files only (O(sources)), so a stage refreshes the
    repository it changed and a broken source of another stage (a key that rotated, a mirror that
    moved) does not stop it. Without O(sources) it refreshes every source when the lists are older
    than O(cache_valid_time).
  - When apt fails, the message names each failing source file and URL, apt's reason - C(NO_PUBKEY)
    after a key rotation, an expired or bad signature, 404, an unreachable host or proxy - and the
    fix, instead of apt's bare exit status. Sources O(tolerate) names (another stage's, which that
    stage keeps up to date) only warn.
author:
  - gpuops.nvidia maintainers (@gpuops)
options:
  sources:
    description: apt source files (C(.sources) or C(.list)) to refresh; empty refreshes every source.
    type: list
    elements: path
    default: []
  cache_valid_time:
    description: With no O(sources), refresh only when the lists are older than this many seconds (0 - always).
    type: int
    default: 0
  tolerate:
    description:
      - With no O(sources), source files (shell patterns) whose failure to refresh is only
        warned about - another stage's repository, say, whose key that stage brings up to date.
        Failures of every other source fail the task.
    type: list
    elements: str
    default: []
  strict:
    description: Source files that fail the task even when O(tolerate) matches them (a stage's own).
    type: list
    elements: path
    default: []
  hints:
    description:
      - Words to add to the fix per kind of problem (C(key), C(not_found), C(proxy), C(network)),
        for example the role variable that holds a repository's key.
    type: dict
    default: {}
  environment:
    description: Environment for apt, for example C(http_proxy) / C(https_proxy); never logged, as a proxy URL may carry a password.
    type: dict
    default: {}
attributes:
  check_mode:
    support: full
    description: Reports whether a refresh would run, and does not run it.
  diff_mode:
    support: none
    description: The package lists are a cache; there is no diff.
  idempotent:
    support: partial
    description: C(changed) is true when apt fetched new lists, which depends on the repositories.
seealso:
  - module: ansible.builtin.apt
"""

EXAMPLES = r"""
- name: Refresh the lists of NVIDIA's repository only
  gpuops.nvidia.apt_refresh:
    sources: [/etc/apt/sources.list.d/gpuops-nvidia-cuda.sources]
    hints:
      key: set driver_repo_key (or driver_repo_key_url) to the repository's current key

- name: Refresh every source when the lists are older than an hour; other stages' sources only warn
  gpuops.nvidia.apt_refresh:
    cache_valid_time: 3600
    tolerate: [/etc/apt/sources.list.d/gpuops-*.sources]
    strict: [/etc/apt/sources.list.d/gpuops-nvidia-cuda.sources]
"""

RETURN = r"""
refreshed:
  description: Whether apt-get update ran.
  returned: always
  type: bool
problems:
  description:
    - Sources apt could not refresh, as findings (code C(apt_refresh_<kind>), with the source,
      URL, kind and apt's reason); on success, those O(tolerate) let it only warn about.
  returned: always
  type: list
  elements: dict
  sample:
    - code: apt_refresh_key
      severity: error
      subject: /etc/apt/sources.list.d/gpuops-nvidia-container-toolkit.sources
      message: "/etc/apt/sources.list.d/gpuops-nvidia-container-toolkit.sources (https://nvidia.github.io/libnvidia-container/stable/deb/amd64):
        its Release file is signed with key A4B469963BF863CC, which the source's keyring does not hold"
      fix: "the repository's signing key changed (a key rotation) or the wrong key was given: install the repository's current key"
      source: /etc/apt/sources.list.d/gpuops-nvidia-container-toolkit.sources
      url: https://nvidia.github.io/libnvidia-container/stable/deb/amd64
      kind: key
      reason: its Release file is signed with key A4B469963BF863CC, which the source's keyring does not hold
"""

import os

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuops.nvidia.plugins.module_utils.apt import ops as apt_ops


def main():
    module = AnsibleModule(
        argument_spec=dict(
            sources=dict(type="list", elements="path", default=[]),
            cache_valid_time=dict(type="int", default=0),
            tolerate=dict(type="list", elements="str", default=[]),
            strict=dict(type="list", elements="path", default=[]),
            hints=dict(type="dict", default={}),
            environment=dict(type="dict", default={}, no_log=True),
        ),
        supports_check_mode=True,
    )
    params = module.params
    for path in params["sources"]:
        if not os.path.isfile(path):
            module.fail_json(msg="apt source %s does not exist; add the source before refreshing it" % path)
    if not params["sources"] and not apt_ops.needs_refresh(params["cache_valid_time"]):
        module.exit_json(changed=False, refreshed=False, problems=[])
    if module.check_mode:
        module.exit_json(changed=True, refreshed=False, problems=[])
    try:
        result = apt_ops.refresh(module, sources=params["sources"], tolerate=params["tolerate"], strict=params["strict"],
                                 hints=params["hints"], environment=params["environment"])
    except apt_ops.AptError as exc:
        module.fail_json(msg=str(exc), problems=exc.problems, changed=exc.changed)
    module.exit_json(changed=result["changed"], refreshed=True, problems=result["problems"])


if __name__ == "__main__":
    main()

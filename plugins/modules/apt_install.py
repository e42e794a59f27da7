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
  - With O(source), the repository it installs from (source file, signing key, pin) is set up first
    in the same step, as M(gpuops.nvidia.apt_source) does.
  - Check mode simulates the installation with C(apt-get -s) against the lists as they are and
    reports the packages that would change; diff mode shows them with their versions. Packages that
    are all installed at their candidate versions (pins included) are not simulated - nothing would
    change.
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
  source:
    description:
      - The repository to install from, set up first in the same step exactly as
        M(gpuops.nvidia.apt_source) sets it up with the same options (and O(hints) and O(environment)) -
        its source file, its signing key and its pin, its lists refreshed when they changed. Its result
        is RV(source).
      - In check mode a source, key or pin that would change makes the installation pending, as
        O(repository_pending) does.
      - Removing a source is M(gpuops.nvidia.apt_source)'s (O(gpuops.nvidia.apt_source#module:state=absent)).
    type: dict
    suboptions:
      name:
        description: As in M(gpuops.nvidia.apt_source).
        type: str
        required: true
      url:
        description: As in M(gpuops.nvidia.apt_source); empty - no source, only the pin.
        type: str
        default: ""
      key:
        description: As in M(gpuops.nvidia.apt_source). Mutually exclusive with O(source.key_url).
        type: str
      key_url:
        description: As in M(gpuops.nvidia.apt_source) (downloaded in 30 seconds at most, the certificate verified).
        type: str
      pin:
        description: As in M(gpuops.nvidia.apt_source).
        type: dict
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

- name: Add NVIDIA's repository with its key and the branch's pin, then install from it - one step
  gpuops.nvidia.apt_install:
    names: [nvidia-open]
    owner: driver
    latest: true
    source:
      name: gpuops-nvidia-cuda
      url: https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/
      key_url: https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/3bf863cc.pub
      pin: {name: gpuops-nvidia-driver, packages: [nvidia-*, libnvidia-*], version: "580.*"}
"""

RETURN = r"""
source:
  description: What setting up O(source) did, as M(gpuops.nvidia.apt_source) returns it (C(changed), C(source_changed), C(files), ...).
  returned: when O(source) is given
  type: dict
  sample: {changed: false, source_changed: false, files: [], refreshed: false}
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

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuops.nvidia.plugins.module_utils.apt import install, ops, sources
from ansible_collections.gpuops.nvidia.plugins.module_utils.host import files


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
            source=dict(type="dict", options=sources.SOURCE_OPTIONS, mutually_exclusive=[("key", "key_url")]),
        ),
        supports_check_mode=True,
    )
    if not module.params["names"]:
        module.fail_json(msg="names is empty: give the packages to install")
    try:
        result = install.apply(module, module.params)
    except ops.AptError as exc:
        module.fail_json(**exc.result())
    except files.FileError as exc:
        module.fail_json(msg="%s; nothing was changed" % exc)
    module.exit_json(**result)


if __name__ == "__main__":
    main()

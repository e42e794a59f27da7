#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

__metaclass__ = type

DOCUMENTATION = r"""
---
module: apt_source
short_description: A package repository trusted only through its own key, and its pin - in one step
version_added: 0.2.0
description:
  - One task for a stage's package repository - its signing key in its own keyring
    (C(/etc/apt/keyrings/<name>.asc), from the key's content or a URL fetched every run, checked
    to be an OpenPGP public key before anything is written), the deb822 source
    (C(/etc/apt/sources.list.d/<name>.sources)) trusted only with that key (C(Signed-By)), an apt
    pin (C(/etc/apt/preferences.d/<pin name>.pref)) that keeps packages at a version pattern, and
    a refresh of this source's lists when the key or the source changed (naming apt's reason and
    the fix when it fails). A refresh that failed is tried again on the next run - a marker
    (C(/var/lib/gpuops/apt-sources/<name>.refreshed)) records the key and source last refreshed.
  - Without O(url) only the pin is managed (packages from the distribution's own sources).
  - Key changes and diffs show fingerprints, algorithms, creation dates and uids, never base64.
  - Every option is checked before anything is read or written - the names, the URLs, the pin's
    version and package patterns - and refused with the fix named when apt could not take it as
    it is (see the options).
  - A source or pin file of the same name that this module did not write (a source names itself
    in C(X-Repolib-Name), a pin in its C(Explanation)) - Debian's own C(debian.sources), an
    administrator's file - is never taken over - writing it fails and changes nothing - nor
    removed - removing it (O(state=absent), or a pin with an empty version) leaves it, and the
    key of such a source, as they are, warns and names them in RV(kept).
  - A file it replaces is backed up first, under C(/var/lib/gpuops/backups/apt) (not beside it, as
    apt reads every file in its directories; the newest five copies of each file are kept); a file
    it removes is not (the same options write it again).
  - A user, password or query string (a token) in O(url) or O(key_url) is masked in the module's
    result and messages; O(url) refuses credentials, O(key_url) passes them to the download.
author:
  - gpuops.nvidia maintainers (@gpuops)
options:
  name:
    description:
      - The source's name (its files are named after it) - letters, digits, C(.), C(_) and C(-),
        starting with a letter or digit, as apt reads names in its directories.
    type: str
    required: true
  url:
    description:
      - The repository's URL (a flat repository - C(Suites) C(/)); empty - no source, only the pin.
      - C(scheme://host/path) (C(http), C(https), or the scheme of an apt transport the node has,
        such as C(s3) or C(ar+https)) or C(file:/path); several mirrors separated by single spaces.
        No other whitespace, no line break and no credentials - those belong in
        C(/etc/apt/auth.conf.d/) (mode 0600), where apt reads them, never in a world-readable
        source file.
    type: str
    default: ""
  key:
    description: The signing key, ASCII-armored (air-gapped sites). Mutually exclusive with O(key_url).
    type: str
  key_url:
    description: Where to download the signing key (fetched every run, so a rotation is noticed).
    type: str
  pin:
    description:
      - An apt pin - C(name) (the file's), C(packages) (name patterns) and C(version) (a pattern,
        C(580.*) or C(580.95.05-*); priority 1001 also allows the downgrade to it). An empty
        version removes the pin.
      - The name follows O(name)'s rule; with a version, C(packages) may not be empty (an empty
        C(Package) line stops every later C(apt-get install)), and the version (a quoted string, as
        a YAML number loses digits) and each pattern are one token each (no whitespace or line
        break).
    type: dict
  state:
    description: C(absent) removes the source, its key and the pin.
    type: str
    choices: [present, absent]
    default: present
  refresh:
    description:
      - Refresh this source's lists when the key or the source changed, or when they were not
        refreshed successfully since (never in check mode).
    type: bool
    default: true
  hints:
    description: Fixes in the caller's words per refresh problem kind (C(key), C(not_found), C(proxy)).
    type: dict
    default: {}
  environment:
    description: Environment for the key download and apt (C(http_proxy), C(https_proxy)); never logged, as a proxy URL may carry a password.
    type: dict
    default: {}
  timeout:
    description: Seconds to wait for O(key_url).
    type: int
    default: 30
  validate_certs:
    description: Verify the TLS certificate of O(key_url).
    type: bool
    default: true
attributes:
  check_mode:
    support: full
    description: Fetches and checks the key, reports every change and its diff, writes nothing.
  diff_mode:
    support: full
    description: The key by fingerprint and uid, the source and the pin.
  idempotent:
    support: full
    description: The same key, source and pin change nothing.
seealso:
  - module: gpuops.nvidia.repo_key
  - module: gpuops.nvidia.apt_install
"""

EXAMPLES = r"""
- name: NVIDIA's CUDA repository, its key, and the driver pinned to a branch
  gpuops.nvidia.apt_source:
    name: nvidia-cuda
    url: https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/
    key_url: https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/3bf863cc.pub
    pin:
      name: nvidia-driver
      packages: [cuda-drivers, cuda-drivers-*, nvidia-*, libnvidia-*]
      version: 580.*
"""

RETURN = r"""
keyring_keys:
  description: The keys of the keyring (or that would be, in check mode). (Named C(keys) before
    the return keys were renamed, since a key named like a dict method cannot be read with dot notation.)
  returned: when O(url) is given and O(state=present)
  type: list
  elements: dict
files:
  description: The files that changed (would, in check mode).
  returned: always
  type: list
  elements: str
source_changed:
  description: Whether the key or the source changed (their lists were, or would be, refreshed).
  returned: always
  type: bool
refreshed:
  description: Whether this source's lists were refreshed.
  returned: always
  type: bool
backups:
  description: The copies of the files it replaced (would be none in check mode).
  returned: always
  type: list
  elements: str
kept:
  description: Files of the source's name that this module did not write, left as they are (O(state=absent)).
  returned: always
  type: list
  elements: str
refresh_needed:
  description: Whether this source's lists were (would be, in check mode) refreshed because the last refresh of this key and source did not succeed.
  returned: always
  type: bool
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuops.nvidia.plugins.module_utils.apt import ops, sources
from ansible_collections.gpuops.nvidia.plugins.module_utils.host import files


def main():
    module = AnsibleModule(
        argument_spec=dict(
            sources.SOURCE_OPTIONS,
            state=dict(type="str", choices=["present", "absent"], default="present"),
            refresh=dict(type="bool", default=True),
            hints=dict(type="dict", default={}),
            environment=dict(type="dict", default={}, no_log=True),
            timeout=dict(type="int", default=30),
            validate_certs=dict(type="bool", default=True),
        ),
        mutually_exclusive=[("key", "key_url")],
        supports_check_mode=True,
    )
    try:
        result = sources.apply(module, module.params)
    except ops.AptError as exc:
        module.fail_json(**exc.result())
    except files.FileError as exc:
        module.fail_json(msg="%s; nothing was changed" % exc)
    module.exit_json(**result)


if __name__ == "__main__":
    main()

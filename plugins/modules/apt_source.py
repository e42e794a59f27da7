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
author:
  - gpuops.nvidia maintainers (@gpuops)
options:
  name:
    description: The source's name (its files are named after it).
    type: str
    required: true
  url:
    description: The repository's URL (a flat repository - C(Suites) C(/)); empty - no source, only the pin.
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
keys:
  description: The keys of the keyring (or that would be, in check mode).
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
refresh_needed:
  description: Whether this source's lists were (would be, in check mode) refreshed because the last refresh of this key and source did not succeed.
  returned: always
  type: bool
"""

import hashlib
import os

from ansible.module_utils.basic import AnsibleModule
from ansible.module_utils.common.text.converters import to_text

from ansible_collections.gpuops.nvidia.plugins.module_utils.apt import parse as apt
from ansible_collections.gpuops.nvidia.plugins.module_utils.apt import ops as apt_ops
from ansible_collections.gpuops.nvidia.plugins.module_utils.host import files

KEYRINGS = "/etc/apt/keyrings"
SOURCES = "/etc/apt/sources.list.d"
PREFERENCES = "/etc/apt/preferences.d"
MARKERS = "/var/lib/gpuops/apt-sources"


def main():
    module = AnsibleModule(
        argument_spec=dict(
            name=dict(type="str", required=True),
            url=dict(type="str", default=""),
            key=dict(type="str", no_log=False),
            key_url=dict(type="str", no_log=False),
            pin=dict(type="dict"),
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
    params = module.params
    name, present = params["name"], params["state"] == "present"
    keyring = os.path.join(KEYRINGS, "%s.asc" % name)
    source = os.path.join(SOURCES, "%s.sources" % name)
    pin = params["pin"] or {}
    if pin and (not pin.get("name") or not isinstance(pin.get("packages") or [], list)):
        module.fail_json(msg="pin needs a name and a list of packages (and a version, or '' to remove it)")
    if present and params["url"] and not (params["key"] or params["key_url"]):
        module.fail_json(msg="the source %s needs its signing key: give key (its content) or key_url" % name)
    for variable, value in params["environment"].items():
        os.environ[variable] = str(value)

    # what each file should hold (None: absent); the key is fetched and checked before any write
    wanted, diffs = {}, []
    result = {"changed": False, "files": [], "source_changed": False, "refreshed": False, "refresh_needed": False}
    try:
        if params["url"] or not present:
            key_bytes, keys = (apt_ops.wanted_key(module, params["key"], params["key_url"], keyring, params["timeout"])
                               if present else (None, []))
            if present:
                result["keys"] = keys
            wanted[keyring] = key_bytes
            wanted[source] = apt.deb822_source(name, params["url"], keyring) if present else None
        if pin:
            pin_path = os.path.join(PREFERENCES, "%s.pref" % pin["name"])
            wanted[pin_path] = (apt.pin_text(pin["name"], pin.get("packages") or [], pin["version"])
                                if present and pin.get("version") else None)
    except apt_ops.AptError as exc:
        module.fail_json(msg=str(exc))

    for path, after in wanted.items():
        before = apt_ops.read_bytes(path)
        after_bytes = after if isinstance(after, bytes) or after is None else after.encode("utf-8")
        if before == after_bytes:
            continue
        problem = files.check_writable(path)
        if problem:
            module.fail_json(msg="cannot change %s: %s; nothing was changed" % (path, problem))
        result["files"].append(path)
        if path in (keyring, source):
            result["source_changed"] = True
        if module._diff:
            if path == keyring:
                diffs.append(apt_ops.key_diff(path, before, after_bytes, apt_ops.known_keys(before), result.get("keys") or []))
            else:
                diffs.append(files.diff_entry(path, to_text(before) if before is not None else None,
                                              to_text(after_bytes) if after_bytes is not None else None))
    # the key and source whose lists were last refreshed: a refresh that failed is tried again
    marker = os.path.join(MARKERS, "%s.refreshed" % name)
    stamp = None
    if present and params["url"]:
        stamp = hashlib.sha256(wanted[keyring] + b"\0" + wanted[source].encode("utf-8")).hexdigest() + "\n"
    refresh = bool(stamp and params["refresh"] and (result["source_changed"] or files.read_text(marker) != stamp))
    result["refresh_needed"] = refresh and not result["source_changed"]
    result["changed"] = bool(result["files"]) or refresh
    if result["changed"] and not module.check_mode:
        for path in result["files"]:
            if wanted[path] is None:
                files.remove(module, path)
            else:
                files.write_atomic(module, path, wanted[path], mode=0o644)
        if refresh:
            try:
                apt_ops.refresh(module, sources=[source], hints=params["hints"], environment=params["environment"])
            except apt_ops.AptError as exc:
                module.fail_json(msg=str(exc), problems=exc.problems, changed=True)
            files.write_atomic(module, marker, stamp, mode=0o644)
            result["refreshed"] = True
    if not present and os.path.exists(marker) and not module.check_mode:
        files.remove(module, marker)
    if diffs:
        result["diff"] = diffs
    module.exit_json(**result)


if __name__ == "__main__":
    main()

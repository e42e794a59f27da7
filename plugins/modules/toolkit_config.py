#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

__metaclass__ = type

DOCUMENTATION = r"""
---
module: toolkit_config
short_description: Set keys of the NVIDIA Container Toolkit's config.toml, keeping the rest
version_added: 0.1.0
description:
  - "Edits C(/etc/nvidia-container-runtime/config.toml) key by key (the toolkit package owns the
    file, so it is never templated): the runtime mode, the CDI spec directories and kind, and
    the log level. Every other key, comment and value stays as it was."
author:
  - gpuops.nvidia maintainers (@gpuops)
requirements:
  - tomlkit on the managed host
options:
  path:
    description: The toolkit's configuration file.
    type: path
    default: /etc/nvidia-container-runtime/config.toml
  mode:
    description: C(nvidia-container-runtime.mode).
    type: str
    choices: [auto, legacy, cdi, csv]
  cdi_spec_dirs:
    description: C(nvidia-container-runtime.modes.cdi.spec-dirs).
    type: list
    elements: path
  cdi_default_kind:
    description: C(nvidia-container-runtime.modes.cdi.default-kind), e.g. C(nvidia.com/gpu).
    type: str
  log_level:
    description: C(nvidia-container-runtime.log-level).
    type: str
  backup:
    description: Back up the file before changing it.
    type: bool
    default: false
attributes:
  check_mode:
    support: full
    description: Reports the change and the diff without writing.
  diff_mode:
    support: full
    description: Before and after of the file.
  idempotent:
    support: full
    description: A second run with the same options changes nothing.
"""

EXAMPLES = r"""
- name: Use CDI mode with the standard spec directories
  gpuops.nvidia.toolkit_config:
    mode: cdi
    cdi_spec_dirs: [/etc/cdi, /var/run/cdi]
"""

RETURN = r"""
settings:
  description: The settings now in the file. (Named C(values) until the return keys were renamed, since a
    key named like a dict method cannot be read with dot notation.)
  returned: always
  type: dict
  sample: {mode: cdi, cdi_spec_dirs: [/etc/cdi, /var/run/cdi]}
toolkit_version:
  description: The NVIDIA Container Toolkit's version, as C(nvidia-ctk --version) says; null when
    nvidia-ctk is not installed.
  returned: always
  type: str
  sample: 1.18.0
backup_file:
  description: The backup made, if any.
  returned: when a backup was made
  type: str
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gpuops.nvidia.plugins.module_utils.host import files
from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime import containerd, toolkit
from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime.common import ConfigError


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", default="/etc/nvidia-container-runtime/config.toml"),
            mode=dict(type="str", choices=list(toolkit.MODES)),
            cdi_spec_dirs=dict(type="list", elements="path"),
            cdi_default_kind=dict(type="str"),
            log_level=dict(type="str"),
            backup=dict(type="bool", default=False),
        ),
        supports_check_mode=True,
    )
    if not containerd.HAS_TOMLKIT:
        module.fail_json(msg=missing_required_lib("tomlkit"), exception=containerd.TOMLKIT_IMPORT_ERROR)
    path = module.params["path"]
    settings = {name: module.params[name] for name in toolkit.KEYS}
    try:
        before = files.read_text(path, "toolkit configuration")
        plan = toolkit.configure(before, settings, source=path)
    except (ConfigError, files.FileError) as exc:
        module.fail_json(msg=str(exc))
    result = {"changed": plan["changed"], "settings": plan["values"], "toolkit_version": toolkit.installed_version(module)}
    if plan["changed"]:
        problem = files.check_writable(path)
        if problem:
            module.fail_json(msg="cannot change %s: %s; nothing was changed" % (path, problem))
        if not module.check_mode:
            backup = files.write_atomic(module, path, plan["text"], keep_backup=module.params["backup"])
            if backup:
                result["backup_file"] = backup
        if module._diff:
            result["diff"] = files.diff_entry(path, before, plan["text"])
    module.exit_json(**result)


if __name__ == "__main__":
    main()

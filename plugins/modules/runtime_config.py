#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

__metaclass__ = type

DOCUMENTATION = r"""
---
module: runtime_config
short_description: Configure containerd, CRI-O or Docker for the NVIDIA runtime and CDI without clobbering
version_added: 0.1.0
description:
  - Adds the NVIDIA runtime (and optionally makes it the default) and CDI to a container
    runtime's configuration, keeping every existing key, comment and value.
  - "containerd: configuration versions 1 to 4; the NVIDIA runtime copies the runc runtime's
    options and sets C(BinaryName). By default the settings go to a drop-in file and the main
    file only gains an C(imports) glob; before containerd 2.1 imported files replace whole
    plugin sections, so the drop-in then carries the main file's complete CRI section."
  - "CRI-O: a drop-in file only. Docker: a merge into C(daemon.json)."
  - Validates the result with C(containerd config dump) over the planned files in a scratch
    directory before anything replaces the live files; an invalid result is never installed.
  - Malformed existing files make the module fail with the file, line and parser message,
    leaving them untouched. Credentials in existing configurations are masked in results and
    diffs.
author:
  - gpuops.nvidia maintainers (@gpuops)
requirements:
  - tomlkit on the managed host (containerd and CRI-O)
options:
  runtime:
    description: The container runtime to configure.
    type: str
    choices: [containerd, crio, docker]
    default: containerd
  config_path:
    description: The runtime's main configuration file.
      Default C(/etc/containerd/config.toml), C(/etc/crio/crio.conf), C(/etc/docker/daemon.json).
    type: path
  drop_in_path:
    description:
      - Drop-in file for the NVIDIA settings. Default C(/etc/containerd/conf.d/99-nvidia.toml)
        or C(/etc/crio/crio.conf.d/99-nvidia.toml). Ignored for Docker.
    type: path
  edit_mode:
    description:
      - C(drop_in) writes the NVIDIA settings to O(drop_in_path); C(in_place) edits O(config_path)
        itself (containerd only), marking every value it adds so O(state=absent) can remove it.
    type: str
    choices: [drop_in, in_place]
    default: drop_in
  runtime_name:
    description: Name of the NVIDIA runtime.
    type: str
    default: nvidia
  runtime_path:
    description: Path of the NVIDIA container runtime binary.
    type: path
    default: /usr/bin/nvidia-container-runtime
  set_as_default:
    description: Make the NVIDIA runtime the default runtime.
    type: bool
    default: false
  enable_cdi:
    description:
      - Enable the Container Device Interface. C(auto) skips it with a warning where the runtime
        cannot do it (containerd before 1.7, Docker before 25), where C(true) fails.
    type: str
    choices: ['true', 'false', auto]
    default: 'true'
  cdi_spec_dirs:
    description: Directories containerd reads CDI specs from.
    type: list
    elements: path
    default: [/etc/cdi, /var/run/cdi]
  state:
    description: C(absent) removes exactly what the module added.
    type: str
    choices: [present, absent]
    default: present
  backup:
    description: Back up every file before changing it.
    type: bool
    default: false
  validate:
    description:
      - Check the planned configuration with the runtime's own parser when its binary is present
        (C(containerd config dump); C(dockerd --validate), Docker 23 and later), before the live
        file changes. An invalid result is never installed.
    type: bool
    default: true
  containerd_version:
    description: containerd's version (e.g. C(1.7.24)); detected from the binary when not set.
    type: str
attributes:
  check_mode:
    support: full
    description: Plans, validates and reports the diff without writing.
  diff_mode:
    support: full
    description: Before and after of every file, credentials masked.
  idempotent:
    support: full
    description: A second run with the same options changes nothing.
seealso:
  - name: containerd configuration
    description: containerd's documentation of config.toml versions and imports.
    link: https://github.com/containerd/containerd/blob/main/docs/man/containerd-config.toml.5.md
"""

EXAMPLES = r"""
- name: Add the NVIDIA runtime and CDI to containerd through a drop-in
  gpuops.nvidia.runtime_config:
    runtime: containerd
  register: runtime
  notify: Restart containerd

- name: Edit a kubeadm node's config.toml in place and make nvidia the default
  gpuops.nvidia.runtime_config:
    runtime: containerd
    edit_mode: in_place
    set_as_default: true
    backup: true

- name: Docker with CDI
  gpuops.nvidia.runtime_config:
    runtime: docker

- name: Remove what was added
  gpuops.nvidia.runtime_config:
    runtime: containerd
    state: absent
"""

RETURN = r"""
files:
  description: The files written or removed.
  returned: always
  type: list
  elements: str
  sample: [/etc/containerd/config.toml, /etc/containerd/conf.d/99-nvidia.toml]
config_version:
  description: containerd configuration version of the main file (containerd only).
  returned: when runtime is containerd
  type: int
  sample: 2
docker_version:
  description: The version of the installed dockerd (Docker only; null when it is not installed).
  returned: when runtime is docker
  type: str
  sample: 26.1.5
restart_required:
  description: True when a file changed, so the runtime must be restarted to use it.
  returned: always
  type: bool
backups:
  description: Backup files made.
  returned: always
  type: list
  elements: str
diff:
  description: Before and after of each file, credentials masked.
  returned: when diff mode is on and something changed
  type: list
  elements: dict
"""

import os

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gpuops.nvidia.plugins.module_utils import files
from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime import containerd, crio, docker
from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime.common import ConfigError

DEFAULTS = {
    "containerd": ("/etc/containerd/config.toml", "/etc/containerd/conf.d/99-nvidia.toml"),
    "crio": ("/etc/crio/crio.conf", "/etc/crio/crio.conf.d/99-nvidia.toml"),
    "docker": ("/etc/docker/daemon.json", None),
}


def _plan_containerd(module, params, config_path, drop_in_path):
    version = params["containerd_version"]
    binary = module.get_bin_path("containerd")
    if not version:
        if not binary:
            module.fail_json(msg="containerd is not installed and containerd_version is not set; set it "
                                 "(e.g. containerd_version=1.7.24) to configure a host before containerd is there")
        _rc, out, _err = module.run_command([binary, "--version"], check_rc=True)
        version = out
    main = files.read_text(config_path)
    plan = containerd.configure(
        main, containerd_version=version, runtime_name=params["runtime_name"],
        runtime_path=params["runtime_path"], set_as_default=params["set_as_default"],
        enable_cdi=params["enable_cdi"], cdi_spec_dirs=params["cdi_spec_dirs"], state=params["state"],
        drop_in_path=drop_in_path, source=config_path)
    changes = [(config_path, main, plan["main"])]
    if drop_in_path:
        changes.append((drop_in_path, files.read_text(drop_in_path), plan["drop_in"]))
    if params["validate"] and binary and any(before != after for _p, before, after in changes):
        others = {}
        if drop_in_path and os.path.isdir(os.path.dirname(drop_in_path)):
            for name in sorted(os.listdir(os.path.dirname(drop_in_path))):
                path = os.path.join(os.path.dirname(drop_in_path), name)
                if name.endswith(".toml") and path != drop_in_path and os.path.isfile(path):
                    others[path] = files.read_text(path)
        problems = containerd.validate(module.run_command, binary, plan, drop_in_path, others,
                                       params["runtime_name"], params["runtime_path"], params["state"])
        if problems:
            module.fail_json(msg="the planned containerd configuration is not valid, nothing was changed: %s"
                                 % "; ".join(problems))
    return changes, plan["warnings"], {"config_version": plan["config_version"]}


def _plan_crio(params, config_path, drop_in_path):
    current = files.read_text(drop_in_path)
    if current is not None:
        crio.check_drop_in(current)
    after = None if params["state"] == "absent" else crio.drop_in(
        runtime_name=params["runtime_name"], runtime_path=params["runtime_path"],
        set_as_default=params["set_as_default"])
    return [(drop_in_path, current, after)], [], {}


def _plan_docker(module, params, config_path):
    binary = module.get_bin_path("dockerd")
    version = None
    if binary:
        _rc, out, _err = module.run_command([binary, "--version"], check_rc=True)
        version = docker.parse_version(out)
    enable_cdi, cdi_warning = docker.cdi_decision(params["enable_cdi"], version)
    current = files.read_text(config_path)
    result = docker.configure(current, runtime_name=params["runtime_name"], runtime_path=params["runtime_path"],
                              set_as_default=params["set_as_default"], enable_cdi=enable_cdi,
                              state=params["state"], source=config_path)
    warnings = list(result["warnings"]) + ([cdi_warning] if cdi_warning else [])
    if params["validate"] and binary and result["text"] != current:
        problems, notes = docker.validate(module.run_command, binary, result["text"], version)
        if problems:
            module.fail_json(msg="the planned Docker configuration is not valid, nothing was changed: %s"
                                 % "; ".join(problems))
        warnings += notes
    return [(config_path, current, result["text"])], warnings, {"docker_version": docker.format_version(version)}


def main():
    module = AnsibleModule(
        argument_spec=dict(
            runtime=dict(type="str", default="containerd", choices=["containerd", "crio", "docker"]),
            config_path=dict(type="path"),
            drop_in_path=dict(type="path"),
            edit_mode=dict(type="str", default="drop_in", choices=["drop_in", "in_place"]),
            runtime_name=dict(type="str", default="nvidia"),
            runtime_path=dict(type="path", default="/usr/bin/nvidia-container-runtime"),
            set_as_default=dict(type="bool", default=False),
            enable_cdi=dict(type="str", default="true", choices=["true", "false", "auto"]),
            cdi_spec_dirs=dict(type="list", elements="path", default=["/etc/cdi", "/var/run/cdi"]),
            state=dict(type="str", default="present", choices=["present", "absent"]),
            backup=dict(type="bool", default=False),
            validate=dict(type="bool", default=True),
            containerd_version=dict(type="str"),
        ),
        supports_check_mode=True,
    )
    params = module.params
    runtime = params["runtime"]
    if runtime in ("containerd", "crio") and not containerd.HAS_TOMLKIT:
        module.fail_json(msg=missing_required_lib("tomlkit"), exception=containerd.TOMLKIT_IMPORT_ERROR)
    if params["edit_mode"] == "in_place" and runtime != "containerd":
        module.fail_json(msg="edit_mode=in_place is for containerd; CRI-O is configured through a drop-in "
                             "and Docker's daemon.json is always merged in place")
    config_path = params["config_path"] or DEFAULTS[runtime][0]
    drop_in_path = None if params["edit_mode"] == "in_place" else (params["drop_in_path"] or DEFAULTS[runtime][1])

    try:
        if runtime == "containerd":
            changes, warnings, extra = _plan_containerd(module, params, config_path, drop_in_path)
        elif runtime == "crio":
            changes, warnings, extra = _plan_crio(params, config_path, drop_in_path)
        else:
            changes, warnings, extra = _plan_docker(module, params, config_path)
    except ConfigError as exc:
        module.fail_json(msg=str(exc))

    changed = [(path, before, after) for path, before, after in changes if before != after]
    for path, _before, _after in changed:
        problem = files.check_writable(path)
        if problem:
            module.fail_json(msg="cannot change %s: %s; nothing was changed" % (path, problem))
    for message in warnings:
        module.warn(message)

    backups = []
    if changed and not module.check_mode:
        for path, _before, after in changed:
            if after is None:
                backup = files.remove(module, path, params["backup"])
            else:
                # A drop-in that carries the main file's CRI section (credentials included) gets
                # the main file's owner and mode.
                backup = files.write_atomic(module, path, after, backup=params["backup"],
                                            like=config_path if path != config_path else None)
            if backup:
                backups.append(backup)

    result = dict(changed=bool(changed), files=[path for path, _b, _a in changed],
                  restart_required=bool(changed), backups=backups, **extra)
    if module._diff and changed:
        result["diff"] = [files.diff_entry(path, before, after) for path, before, after in changed]
    module.exit_json(**result)


if __name__ == "__main__":
    main()

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
  - "CRI-O: a drop-in file only. CRI-O's effective configuration (C(crio.conf), then every file
    under the drop-in's directory in the order CRI-O reads them) gives the NVIDIA handler the
    monitor settings of the node's default runtime (C(monitor_path), C(monitor_cgroup),
    C(monitor_exec_cgroup), C(monitor_env)) and the options NVIDIA carries over
    (C(runtime_root), C(allowed_annotations) ...), so it starts on every packaging of CRI-O
    (upstream's keeps conmon in C(/usr/libexec/crio/)); O(handler_options) overrides them."
  - "Docker: a merge into C(daemon.json)."
  - Validates the result with the runtime's own parser over the planned files in a scratch
    directory before anything replaces the live files (C(containerd config dump),
    C(crio config), C(dockerd --validate)); an invalid result is never installed.
  - Malformed existing files make the module fail with the file, line and parser message,
    leaving them untouched. Options the runtime would misread fail with the option's name and
    the fix, before anything changes; that includes an O(runtime_name) that is no valid
    RuntimeClass handler name (a DNS label) or that would take over another runtime (C(runc),
    C(crun), or a runtime the configuration already defines that is not NVIDIA's).
  - "Credentials are masked in diffs, results, warnings and messages: values of credential keys
    (C(password), C(auth), C(token), C(Authorization) headers ...) and the password of every
    URL (C(http://user:PASSWORD@proxy:3128))."
author:
  - gpuops.nvidia maintainers (@gpuops)
requirements:
  - tomlkit on the managed host for containerd (not needed to remove what is not there), and for
    CRI-O on Python older than 3.11 (tomli works too)
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
    description:
      - Back up every file before changing it. CRI-O drop-ins are backed up under O(state_dir)
        (C(backups/)), since CRI-O reads every file in C(crio.conf.d), backups included.
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
  handler_options:
    description:
      - "CRI-O only. Fields of the NVIDIA handler (C([crio.runtime.runtimes.<runtime_name>])) to set
        instead of those copied from the default runtime, for example
        C({monitor_path: /usr/libexec/crio/conmon}); a null value leaves a copied field out."
      - The module refuses a handler CRI-O would not start with (no C(monitor_path) while conmon is
        not in C($PATH), a C(monitor_path) that is no executable, a C(monitor_cgroup) that does not
        suit the cgroup manager).
    type: dict
    default: {}
  option_names:
    description:
      - "What to call the module's options in its error messages, as C({option: name}); a role
        passes the names of its own variables (C({edit_mode: container_toolkit_edit_mode})) so an
        error names what its user sets. The result's RV(option) keeps the module's own name."
    type: dict
    default: {}
  state_dir:
    description:
      - Directory of the module's records of what it added where a file cannot carry a marker
        (Docker's C(daemon.json) is JSON, which has no comments). O(state=absent) takes back exactly
        what the record lists and restores what it replaced, so keys the operator had set before
        (C(features.cdi), another C(default-runtime)) stay.
    type: path
    default: /var/lib/gpuops/runtime_config
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
handler:
  description: CRI-O only - the NVIDIA handler's fields besides runtime_path and runtime_type.
  returned: when runtime is crio
  type: dict
  sample: {monitor_path: /usr/libexec/crio/conmon, runtime_root: /run/crun, allowed_annotations: [io.containers.trace-syscall]}
handler_from:
  description: CRI-O only - the runtime the handler's fields were copied from, and the file that defines it.
  returned: when runtime is crio
  type: dict
  sample: {runtime: crun, from: /etc/crio/crio.conf.d/10-crio.conf}
restart_required:
  description: True when a file changed, so the runtime must be restarted to use it.
  returned: always
  type: bool
state_files:
  description: The module's own records written or removed (see O(state_dir)).
  returned: always
  type: list
  elements: str
  sample: [/var/lib/gpuops/runtime_config/docker_etc_docker_daemon.json.json]
backups:
  description: Backup files made.
  returned: always
  type: list
  elements: str
option:
  description: The module's option an input error is about (the message may name it as O(option_names) says).
  returned: failure, when an option's value is refused
  type: str
  sample: edit_mode
diff:
  description: Before and after of each file, credentials masked.
  returned: when diff mode is on and something changed
  type: list
  elements: dict
"""

import json
import os

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gpuops.nvidia.plugins.module_utils.host import files
from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime import validation
from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime import containerd, crio, docker
from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime.common import (
    ConfigError, mask_secrets, mask_text, option_error)

DEFAULTS = {
    "containerd": ("/etc/containerd/config.toml", "/etc/containerd/conf.d/99-nvidia.toml"),
    "crio": ("/etc/crio/crio.conf", "/etc/crio/crio.conf.d/99-nvidia.toml"),
    "docker": ("/etc/docker/daemon.json", None),
}


def _keep_foreign_drop_in(changes, drop_in_path, state, warnings):
    """A drop-in file at drop_in_path that this module did not write (no gpuops.nvidia mark) is the
    operator's: present refuses to replace it, absent leaves it."""
    kept = []
    for path, before, after in changes:
        if path == drop_in_path and before is not None and containerd.MARK not in before:
            if state == "present":
                raise option_error("drop_in_path", "%s exists and was not written by this module; it would be replaced"
                                   % path, "move it away, or give the NVIDIA settings another drop_in_path")
            warnings.append("%s was not written by this module (no gpuops.nvidia mark): it is left as it is" % path)
            after = before
        kept.append((path, before, after))
    return kept


def _nothing_added(config_path, drop_in_path):
    """True when containerd's files hold nothing of this module's: no drop-in, no marker."""
    main = files.read_text(config_path)
    return (not drop_in_path or files.read_text(drop_in_path) is None) and (main is None or containerd.MARK not in main)


def _neighbours(drop_in_path, suffixes):
    """{path: text} of the other files in the drop-in's directory that the runtime reads."""
    found = {}
    directory = os.path.dirname(drop_in_path)
    if os.path.isdir(directory):
        for name in sorted(os.listdir(directory)):
            path = os.path.join(directory, name)
            if name.endswith(suffixes) and path != drop_in_path and os.path.isfile(path):
                found[path] = files.read_text(path)
    return found


def _plan_containerd(module, params, config_path, drop_in_path):
    version = params["containerd_version"]
    binary = module.get_bin_path("containerd")
    if not version:
        if not binary:
            raise option_error("containerd_version", "containerd is not installed and its version is not given",
                               "set containerd_version (e.g. 1.7.24) to configure a host before containerd is there")
        _rc, out, _err = module.run_command([binary, "--version"], check_rc=True)
        version = out
    main = files.read_text(config_path)
    others = _neighbours(drop_in_path, (".toml",)) if drop_in_path else {}
    plan = containerd.configure(
        main, containerd_version=version, runtime_name=params["runtime_name"],
        runtime_path=params["runtime_path"], set_as_default=params["set_as_default"],
        enable_cdi=params["enable_cdi"], cdi_spec_dirs=params["cdi_spec_dirs"], state=params["state"],
        drop_in_path=drop_in_path, source=config_path, other_runtimes=containerd.drop_in_runtimes(others))
    changes = [(config_path, main, plan["main"])]
    if drop_in_path:
        changes.append((drop_in_path, files.read_text(drop_in_path), plan["drop_in"]))
    if params["validate"] and binary and any(before != after for _p, before, after in changes):
        problems = validation.containerd_config(module.run_command, binary, plan, drop_in_path, others,
                                                params["runtime_name"], params["runtime_path"], params["state"])
        if problems:
            raise ConfigError("the planned containerd configuration is not valid, nothing was changed: %s"
                              % "; ".join(problems))
    return changes, [], plan["warnings"], {"config_version": plan["config_version"]}


def _walk(directory):
    """Files under directory in the order CRI-O reads them (names in byte order, directories
    at their place)."""
    found = []
    for name in sorted(os.listdir(directory)) if os.path.isdir(directory) else []:
        path = os.path.join(directory, name)
        if os.path.isdir(path):
            found.extend(_walk(path))
        elif os.path.isfile(path):
            found.append(path)
    return found


def _plan_crio(module, params, config_path, drop_in_path):
    config_dir = os.path.dirname(drop_in_path)
    read = [(config_path, files.read_text(config_path))] if os.path.isfile(config_path) else []
    later, after_drop_in = [], False
    for path in _walk(config_dir):
        if path == drop_in_path:
            after_drop_in = True
            continue
        read.append((path, files.read_text(path)))
        if after_drop_in:
            later.append(path)
    current = files.read_text(drop_in_path)
    if current is not None:
        crio.parse_crio_config(current, drop_in_path)  # a malformed drop-in is named, not silently replaced
    plan = crio.configure(read, drop_in_path=drop_in_path, runtime_name=params["runtime_name"],
                          runtime_path=params["runtime_path"], set_as_default=params["set_as_default"],
                          handler_options=params["handler_options"], state=params["state"], later=later)
    if params["state"] == "present":
        monitor = plan["handler"].get("monitor_path")
        executables = {monitor: os.path.isfile(monitor) and os.access(monitor, os.X_OK)} if monitor else {}
        problems = crio.handler_problems(plan["handler"], plan["cgroup_manager"], bool(module.get_bin_path("conmon")),
                                         executables)
        if problems:
            raise option_error("handler_options", "the NVIDIA handler would stop CRI-O from starting (%s); nothing was "
                               "changed" % "; ".join(problems),
                               "set handler_options (e.g. monitor_path: /usr/libexec/crio/conmon) to what this node's "
                               "CRI-O packaging needs")
    binary = module.get_bin_path("crio", opt_dirs=["/usr/local/bin", "/usr/bin"])
    if params["validate"] and binary and plan["text"] != current:
        problems = validation.crio_config(module.run_command, binary, config_path, read, plan["text"], drop_in_path,
                                          config_dir, params["runtime_name"], params["runtime_path"], params["state"])
        if problems:
            raise ConfigError("the planned CRI-O configuration is not valid, nothing was changed: %s" % "; ".join(problems))
    # what the handler copied may hold credentials (a proxy URL in monitor_env): shown masked
    extra = {"handler": mask_secrets(plan["handler"]), "handler_from": plan["base"]}
    return [(drop_in_path, current, plan["text"])], [], plan["warnings"], extra


def _record_path(params, config_path):
    return os.path.join(params["state_dir"], "docker%s.json" % config_path.replace(os.sep, "_"))


def _read_record(path):
    text = files.read_text(path)
    if text is None:
        return None
    try:
        return json.loads(text)
    except ValueError as exc:
        raise ConfigError("%s: the record of what gpuops.nvidia added is not valid JSON (%s); remove it to start over"
                          % (path, exc))


def _plan_docker(module, params, config_path):
    binary = module.get_bin_path("dockerd")
    version = None
    if binary:
        _rc, out, _err = module.run_command([binary, "--version"], check_rc=True)
        version = docker.parse_version(out)
    enable_cdi, cdi_warning = docker.cdi_decision(params["enable_cdi"], version)
    current = files.read_text(config_path)
    record_path = _record_path(params, config_path)
    record_text = files.read_text(record_path)
    result = docker.configure(current, runtime_name=params["runtime_name"], runtime_path=params["runtime_path"],
                              set_as_default=params["set_as_default"], enable_cdi=enable_cdi,
                              state=params["state"], source=config_path, record=_read_record(record_path))
    warnings = list(result["warnings"]) + ([cdi_warning] if cdi_warning else [])
    if params["validate"] and binary and result["text"] != current:
        problems, notes = validation.docker_config(module.run_command, binary, result["text"], version)
        if problems:
            raise ConfigError("the planned Docker configuration is not valid, nothing was changed: %s"
                              % "; ".join(problems))
        warnings += notes
    new_record = None if result["record"] is None else docker.render(result["record"])
    if new_record is not None and record_text is not None and json.loads(record_text) == result["record"]:
        new_record = record_text
    return ([(config_path, current, result["text"])], [(record_path, record_text, new_record)], warnings,
            {"docker_version": docker.format_version(version)})


def _apply(module, changed, backup, like, backup_dir=None):
    backups = []
    for path, _before, after in changed:
        if after is None:
            made = files.remove(module, path, keep_backup=backup, backup_dir=backup_dir)
        else:
            # A drop-in that carries the main file's CRI section (credentials included) gets
            # the main file's owner and mode.
            made = files.write_atomic(module, path, after, keep_backup=backup, backup_dir=backup_dir,
                                      like=like if path != like else None)
        if made:
            backups.append(made)
    return backups


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
            state_dir=dict(type="path", default="/var/lib/gpuops/runtime_config"),
            handler_options=dict(type="dict", default={}),
            option_names=dict(type="dict", default={}),
        ),
        supports_check_mode=True,
    )
    params = module.params
    runtime = params["runtime"]
    config_path = params["config_path"] or DEFAULTS[runtime][0]
    drop_in_path = None if params["edit_mode"] == "in_place" else (params["drop_in_path"] or DEFAULTS[runtime][1])
    if runtime == "containerd" and not containerd.HAS_TOMLKIT:
        if params["state"] == "absent" and _nothing_added(config_path, drop_in_path):
            # removing what was never there (again) needs no TOML editor: every value this module
            # adds to containerd's files carries its marker, and the drop-in is its own
            module.exit_json(changed=False, files=[], state_files=[], restart_required=False, backups=[])
        module.fail_json(msg=missing_required_lib("tomlkit"), exception=containerd.TOMLKIT_IMPORT_ERROR)
    if runtime == "crio" and not crio.HAS_TOML_PARSER:
        module.fail_json(msg=missing_required_lib("tomli or tomlkit (Python < 3.11)"), exception=crio.TOMLKIT_IMPORT_ERROR)

    try:
        if drop_in_path and runtime != "docker" and os.path.abspath(drop_in_path) == os.path.abspath(config_path):
            raise option_error("drop_in_path", "is the main configuration file (config_path); the operator's file would "
                               "be replaced", "give the drop-in a file of its own (the default is %s)"
                               % DEFAULTS[runtime][1])
        if params["edit_mode"] == "in_place" and runtime != "containerd":
            raise option_error("edit_mode", "in_place is for containerd; CRI-O is configured through a drop-in and "
                                            "Docker's daemon.json is always merged in place", "set edit_mode=drop_in")
        if runtime == "containerd":
            changes, records, warnings, extra = _plan_containerd(module, params, config_path, drop_in_path)
        elif runtime == "crio":
            changes, records, warnings, extra = _plan_crio(module, params, config_path, drop_in_path)
        else:
            changes, records, warnings, extra = _plan_docker(module, params, config_path)
        changes = _keep_foreign_drop_in(changes, drop_in_path, params["state"], warnings)
    except ConfigError as exc:
        msg = str(exc)
        name = params["option_names"].get(exc.option) if exc.option else None
        if name and msg.startswith(exc.option + ":"):
            # 'OPTION: problem; fix' (the option's name may also be a word of the problem)
            msg = str(name) + msg[len(exc.option):]
        module.fail_json(msg=mask_text(msg), option=exc.option)

    changed = [(path, before, after) for path, before, after in changes if before != after]
    records = [(path, before, after) for path, before, after in records if before != after]
    for path, _before, _after in changed + records:
        problem = files.check_writable(path)
        if problem:
            module.fail_json(msg="cannot change %s: %s; nothing was changed" % (path, problem))
    for message in warnings:
        module.warn(mask_text(message))

    backups = []
    if (changed or records) and not module.check_mode:
        # CRI-O reads every file in crio.conf.d, a backup left there included: keep them elsewhere
        backups = _apply(module, changed, params["backup"], config_path,
                         os.path.join(params["state_dir"], "backups") if runtime == "crio" else None)
        _apply(module, records, False, None)

    result = dict(changed=bool(changed or records), files=[path for path, _b, _a in changed],
                  state_files=[path for path, _b, _a in records], restart_required=bool(changed), backups=backups,
                  **extra)
    if module._diff and changed:
        result["diff"] = [files.diff_entry(path, before, after) for path, before, after in changed]
    module.exit_json(**result)


if __name__ == "__main__":
    main()

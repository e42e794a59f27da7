# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the gpuops.nvidia.runtime_config module does behind its argspec: read the runtime's files,
plan the edit with the runtime's editor (containerd.py, crio.py, docker.py), keep an operator's
drop-in, validate the planned files with the runtime's own parser, then write them (atomically,
backed up) and the record of what was added.

run() returns the module's result; every refusal is a ConfigError naming the option and the
fix, raised before anything changes."""

from __future__ import annotations

import json
import os

__metaclass__ = type

from ansible.module_utils.basic import missing_required_lib

from ansible_collections.gpuops.nvidia.plugins.module_utils.host import commands, files
from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime import containerd, crio, detect, docker, validation
from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime.common import (
    ConfigError, mask_secrets, mask_text, option_error)

DEFAULTS = detect.CONFIG_FILES


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


def _runner(module):
    """run(argv) -> (rc, out, err) for the validators, through host/commands (C locale)."""
    return lambda argv: commands.run(module, argv)


def _version_output(module, binary):
    rc, out, err = commands.run(module, [binary, "--version"])
    if rc != 0:
        raise ConfigError("%s --version failed (exit %d): %s; is the runtime installed correctly?"
                          % (binary, rc, (err or out).strip()[-500:]))
    return out


def _plan_containerd(module, params, config_path, drop_in_path):
    version = params["containerd_version"]
    binary = module.get_bin_path("containerd")
    if not version:
        if not binary:
            raise option_error("containerd_version", "containerd is not installed and its version is not given",
                               "set containerd_version (e.g. 1.7.24) to configure a host before containerd is there")
        version = _version_output(module, binary)
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
        problems = validation.containerd_config(_runner(module), binary, plan, drop_in_path, others,
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
        problems = validation.crio_config(_runner(module), binary, config_path, read, plan["text"], drop_in_path,
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
        version = detect.parse_version(_version_output(module, binary))
    enable_cdi, cdi_warning = docker.cdi_decision(params["enable_cdi"], version)
    current = files.read_text(config_path)
    record_path = _record_path(params, config_path)
    record_text = files.read_text(record_path)
    result = docker.configure(current, runtime_name=params["runtime_name"], runtime_path=params["runtime_path"],
                              set_as_default=params["set_as_default"], enable_cdi=enable_cdi,
                              state=params["state"], source=config_path, record=_read_record(record_path))
    warnings = list(result["warnings"]) + ([cdi_warning] if cdi_warning else [])
    if params["validate"] and binary and result["text"] != current:
        problems, notes = validation.docker_config(_runner(module), binary, result["text"], version)
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


def _refused_input(params, runtime, config_path, drop_in_path):
    if drop_in_path and runtime != "docker" and os.path.abspath(drop_in_path) == os.path.abspath(config_path):
        raise option_error("drop_in_path", "is the main configuration file (config_path); the operator's file would "
                           "be replaced", "give the drop-in a file of its own (the default is %s)" % DEFAULTS[runtime][1])
    if params["edit_mode"] == "in_place" and runtime != "containerd":
        raise option_error("edit_mode", "in_place is for containerd; CRI-O is configured through a drop-in and "
                                        "Docker's daemon.json is always merged in place", "set edit_mode=drop_in")


def _plan(module, params, runtime, config_path, drop_in_path):
    """(file changes, record changes, warnings, extra result keys): each change (path, before, after)."""
    _refused_input(params, runtime, config_path, drop_in_path)
    if runtime == "containerd":
        changes, records, warnings, extra = _plan_containerd(module, params, config_path, drop_in_path)
    elif runtime == "crio":
        changes, records, warnings, extra = _plan_crio(module, params, config_path, drop_in_path)
    else:
        changes, records, warnings, extra = _plan_docker(module, params, config_path)
    return _keep_foreign_drop_in(changes, drop_in_path, params["state"], warnings), records, warnings, extra


def _named(exc, option_names):
    """The error's message with the option called as the caller knows it (option_names)."""
    msg = str(exc)
    name = option_names.get(exc.option) if exc.option else None
    if name and msg.startswith(exc.option + ":"):
        # 'OPTION: problem; fix' (the option's name may also be a word of the problem)
        msg = str(name) + msg[len(exc.option):]
    return mask_text(msg)


def run(module):
    """The runtime_config module's work: its result, or fail_json before anything changed."""
    params = module.params
    runtime = params["runtime"]
    config_path = params["config_path"] or DEFAULTS[runtime][0]
    drop_in_path = None if params["edit_mode"] == "in_place" else (params["drop_in_path"] or DEFAULTS[runtime][1])
    if runtime == "containerd" and not containerd.HAS_TOMLKIT:
        if params["state"] == "absent" and _nothing_added(config_path, drop_in_path):
            # removing what was never there (again) needs no TOML editor: every value this module
            # adds to containerd's files carries its marker, and the drop-in is its own
            return dict(changed=False, files=[], state_files=[], restart_required=False, backups=[])
        module.fail_json(msg=missing_required_lib("tomlkit"), exception=containerd.TOMLKIT_IMPORT_ERROR)
    if runtime == "crio" and not crio.HAS_TOML_PARSER:
        module.fail_json(msg=missing_required_lib("tomli or tomlkit (Python < 3.11)"), exception=crio.TOMLKIT_IMPORT_ERROR)
    try:
        changes, records, warnings, extra = _plan(module, params, runtime, config_path, drop_in_path)
    except ConfigError as exc:
        module.fail_json(msg=_named(exc, params["option_names"]), option=exc.option)

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
    if module._diff and changed:  # pylint: disable=protected-access
        result["diff"] = [files.diff_entry(path, before, after) for path, before, after in changed]
    return result

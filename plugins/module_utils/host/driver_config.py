# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVIDIA driver's node configuration (module driver_config): nouveau blacklisted and the
nvidia module's options, each a modprobe.d file the driver role owns whole, and the driver's
services enabled. Planned from the inputs (pure), then applied through files and commands."""

from __future__ import annotations

import re

__metaclass__ = type

from ansible_collections.gpuops.nvidia.plugins.module_utils.host import commands, files

NOUVEAU_TEXT = ("# Managed by gpuops.nvidia.driver: the NVIDIA driver needs the GPUs without nouveau.\n"
                "blacklist nouveau\n"
                "options nouveau modeset=0\n")
OPTIONS_HEADER = "# Managed by gpuops.nvidia.driver (driver_module_options).\n"
_OPTION_NAME = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_OPTION_VALUE = re.compile(r"^[^\s\"'#]+$")
_SERVICE = re.compile(r"^[A-Za-z0-9][A-Za-z0-9:_.@-]*$")


class DriverConfigError(Exception):
    """Input that would write a broken modprobe.d file or name no service; nothing was changed."""


def options_text(options: dict) -> str:
    """The options file: `options nvidia key=value ...` (keys sorted), or a note that none is set.
    A key or value modprobe would read differently (spaces, quotes, a newline, '#') is refused."""
    problems = []
    for key, value in sorted((options or {}).items()):
        if not _OPTION_NAME.match(str(key)):
            problems.append("%r is no kernel module parameter name (letters, digits and _)" % (key,))
        if isinstance(value, (dict, list)) or value is None or not _OPTION_VALUE.match(str(value)):
            problems.append("the value of %s, %r, is not one word without quotes or '#'" % (key, value))
    if problems:
        raise DriverConfigError("driver_module_options: %s; fix the value (for example {NVreg_EnableGpuFirmware: 1}). "
                                "Nothing was changed." % "; ".join(problems))
    if not options:
        return OPTIONS_HEADER + "# (no options set)\n"
    return OPTIONS_HEADER + "options nvidia %s\n" % " ".join("%s=%s" % (k, v) for k, v in sorted(options.items()))


def plan(params: dict, read=files.read_text) -> dict:
    """{files: [(path, before, after)] that differ, services: [names]} from the module's inputs."""
    bad = [name for name in params.get("services") or [] if not _SERVICE.match(name)]
    if bad:
        raise DriverConfigError("services: %s is no systemd unit name; nothing was changed" % ", ".join(map(repr, bad)))
    wanted = [(params["options_conf"], options_text(params.get("module_options") or {}))]
    if params.get("blacklist_nouveau"):
        wanted.append((params["nouveau_conf"], NOUVEAU_TEXT))
    changes = []
    for path, after in wanted:
        before = read(path, "modprobe.d file")
        if before != after:
            changes.append((path, before, after))
    return {"files": changes, "services": list(params.get("services") or [])}


def _disabled(module, names: list) -> list:
    """The services of names that are not enabled (systemctl is-enabled); a unit that does not
    exist is a DriverConfigError."""
    out = []
    for name in names:
        rc, stdout, stderr = commands.run(module, ["systemctl", "is-enabled", name])
        if rc == 0:
            continue
        if "No such file" in stderr or "not-found" in stdout:
            raise DriverConfigError("the service %s does not exist on the node: install the package that brings it "
                                    "(driver_packages) or leave it out; nothing was changed" % name)
        out.append(name)
    return out


def apply(module, params: dict) -> dict:
    """Write the files that differ (backed up, atomically) and enable the services that are not;
    in check mode only report. The result names both, and modprobe_changed says the initramfs is
    stale."""
    work = plan(params)
    for path, _before, _after in work["files"]:
        problem = files.check_writable(path)
        if problem:
            raise DriverConfigError("cannot write %s: %s; nothing was changed" % (path, problem))
    enable = _disabled(module, work["services"])
    result = {"changed": bool(work["files"] or enable), "modprobe_changed": bool(work["files"]),
              "files": [path for path, _b, _a in work["files"]], "enabled": enable, "backup_files": []}
    if module._diff:  # pylint: disable=protected-access
        result["diff"] = [files.diff_entry(path, before, after) for path, before, after in work["files"]]
    if module.check_mode:
        return result
    for path, _before, after in work["files"]:
        backup = files.write_atomic(module, path, after, mode=0o644, keep_backup=params.get("backup"))
        if backup:
            result["backup_files"].append(backup)
    for name in enable:
        rc, _out, err = commands.run(module, ["systemctl", "enable", name])
        if rc != 0:
            raise DriverConfigError("systemctl enable %s failed: %s" % (name, err.strip()))
    return result

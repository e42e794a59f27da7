# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The NVIDIA Container Toolkit's /etc/nvidia-container-runtime/config.toml, edited key by key
with tomlkit (the package owns the file as a conffile: it is edited, never templated)."""

from __future__ import annotations

__metaclass__ = type

import re

from ansible_collections.gpuops.nvidia.plugins.module_utils.host import commands
from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime import containerd
from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime.common import ConfigError

MODES = ("auto", "legacy", "cdi", "csv")
KEYS = {
    "mode": ("nvidia-container-runtime", "mode"),
    "cdi_spec_dirs": ("nvidia-container-runtime", "modes", "cdi", "spec-dirs"),
    "cdi_default_kind": ("nvidia-container-runtime", "modes", "cdi", "default-kind"),
    "log_level": ("nvidia-container-runtime", "log-level"),
}


def installed_version(module) -> str | None:
    """'1.18.0' from 'NVIDIA Container Toolkit CLI version 1.18.0'; None without nvidia-ctk."""
    match = re.search(r"version\s+v?(\d+\.\d+\.\d+\S*)", commands.output(module, ["nvidia-ctk", "--version"]))
    return match.group(1) if match else None


def configure(text: str | None, settings: dict, source: str = "/etc/nvidia-container-runtime/config.toml") -> dict:
    """Set the given settings (names from KEYS; None leaves a key alone). Returns
    {'text', 'changed', 'values'}: every other key, comment and value stays as it was."""
    if not containerd.HAS_TOMLKIT:
        raise ConfigError("the Python library tomlkit is required on the managed host")
    unknown = sorted(set(settings) - set(KEYS))
    if unknown:
        raise ConfigError("unknown toolkit settings %s (known: %s)" % (", ".join(unknown), ", ".join(sorted(KEYS))))
    if settings.get("mode") is not None and settings["mode"] not in MODES:
        raise ConfigError("mode %r is not one of %s" % (settings["mode"], ", ".join(MODES)))
    doc = containerd.parse(text, source)
    values = {}
    for name, value in sorted(settings.items()):
        if value is None:
            continue
        path = KEYS[name]
        table = containerd.ensure_table(doc, path[:-1])
        current = table.get(path[-1])
        if containerd.plain(current) != value:
            table[path[-1]] = value
        values[name] = value
    new_text = containerd.tomlkit.dumps(doc)
    return {"text": new_text, "changed": new_text != (text or ""), "values": values}

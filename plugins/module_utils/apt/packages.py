# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""dpkg's package state: the one reader of what is installed and held, and the one writer of
holds.

Read: dpkg's database under a root directory (``/`` is the host; tests and a host mounted
elsewhere give another) - ``var/lib/dpkg/status`` and the journal entries dpkg has not folded into
it yet (``var/lib/dpkg/updates/``), as dpkg-query reads them. A package is installed when dpkg's
status of it is ``installed`` (C(ii), C(hi) in dpkg-query's abbreviation) and held when its
selection is ``hold``. Written: holds, through ``apt-mark hold|unhold`` (module_utils/host/commands,
C locale)."""

from __future__ import annotations

import os
import re

__metaclass__ = type

from ansible_collections.gpuops.nvidia.plugins.module_utils.apt import ops
from ansible_collections.gpuops.nvidia.plugins.module_utils.host import commands

STATUS = "var/lib/dpkg/status"
UPDATES = "var/lib/dpkg/updates"


def _stanzas(text: str) -> list:
    """The fields of each stanza of a dpkg database file (continuation lines skipped)."""
    found = []
    for stanza in re.split(r"\n\s*\n", text or ""):
        fields = {}
        for line in stanza.splitlines():
            if line[:1] in (" ", "\t") or ":" not in line:
                continue  # continuation of a multi-line field
            key, value = line.split(":", 1)
            fields[key.strip()] = value.strip()
        if fields.get("Package"):
            found.append(fields)
    return found


def _entries(texts) -> dict:
    """{(package, architecture): fields}, a later text's stanza replacing an earlier one's."""
    entries = {}
    for text in texts:
        for fields in _stanzas(text):
            entries[(fields["Package"], fields.get("Architecture"))] = fields
    return entries


def _fold(entries: dict) -> dict:
    """{package: {'version', 'installed', 'held'}}: one entry per name - an installed
    architecture's when there is one (libc6:amd64 next to a purged libc6:i386)."""
    packages = {}
    for (name, _arch), fields in sorted(entries.items(), key=lambda item: (item[0][0], item[0][1] or "")):
        want, _flag, status = (fields.get("Status", "") + "   ").split(" ", 2)
        info = {"version": fields.get("Version"), "installed": status.strip() == "installed", "held": want == "hold"}
        if name not in packages or (info["installed"] and not packages[name]["installed"]):
            packages[name] = info
    return packages


def parse(*texts: str) -> dict:
    """dpkg's status database (then its journal entries, in order) -> {package: {'version',
    'installed', 'held'}} for every package dpkg knows."""
    return _fold(_entries(texts))


def read(root: str = "/") -> dict | None:
    """parse of root's dpkg database; None when root has no dpkg database."""
    texts = []
    try:
        with open(os.path.join(root, STATUS), encoding="utf-8", errors="replace") as handle:
            texts.append(handle.read())
    except FileNotFoundError:
        return None
    journal = os.path.join(root, UPDATES)
    names = sorted((name for name in os.listdir(journal) if name.isdigit()), key=int) if os.path.isdir(journal) else []
    for name in names:
        try:
            with open(os.path.join(journal, name), encoding="utf-8", errors="replace") as handle:
                texts.append(handle.read())
        except FileNotFoundError:
            continue  # dpkg folded it in meanwhile
    return parse(*texts)


def versions(status: dict) -> dict:
    """{package: version} of the installed packages (held ones included)."""
    return {name: info["version"] for name, info in status.items() if info["installed"]}


def holds(status: dict) -> set:
    """The packages whose selection is hold."""
    return {name for name, info in status.items() if info["held"]}


def installed(root: str = "/") -> dict:
    """{package: version} of what dpkg has installed under root (held ones included)."""
    return versions(read(root) or {})


def held(root: str = "/") -> set:
    """The packages held under root."""
    return holds(read(root) or {})


def hold_changes(current: set, names, hold: bool = True, present=None) -> list:
    """The packages of names whose hold a hold (or, with hold false, a release) changes: those
    not held yet (held ones), limited to present (the installed packages) when given - a package
    still to be installed is held once it is."""
    names = set(names)
    change = (names - set(current)) if hold else (names & set(current))
    return sorted(name for name in change if present is None or name in present)


def set_holds(module, names, hold: bool = True) -> None:
    """Hold (or release) names: the one writer of holds. Raises ops.AptError with apt's reason."""
    if not names:
        return
    verb = "hold" if hold else "unhold"
    rc, out, err = commands.run(module, ["apt-mark", verb] + sorted(names))
    if rc != 0:
        raise ops.AptError("apt-mark %s %s failed: %s" % (verb, " ".join(sorted(names)), ops.apt_reason(out, err)),
                           changed=True)

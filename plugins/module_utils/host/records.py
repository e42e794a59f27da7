# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node-local records of this collection, in one root: ``/var/lib/gpuops``.

    /var/lib/gpuops/driver-state.json       the driver's state (driver_status)
    /var/lib/gpuops/gpu-inventory.json      every GPU slot and the GPU in it (gpu_report)
    /var/lib/gpuops/mig-profiles.json       the MIG profiles each GPU model reported (mig)
    /var/lib/gpuops/packages/<owner>.json   what a role's installation added (apt_install)
    /var/lib/gpuops/apt-sources/            when a repository was last refreshed (apt_source)

Every reader and writer of a record goes through here. A record is read with ``read``: a missing
file is None; a file that cannot be read (a directory, a path under a regular file, no
permission), that is not UTF-8, not JSON or not of the record's shape raises ``RecordError``,
whose message names the file, what is wrong with it and the fix. A record is written with
``write`` (module_utils/host/files: atomic, check mode, diff).

Releases before 0.2 kept the MIG profile record under ``/var/lib/gpuops-nvidia``: ``carry_over``
moves a record found under that old root to its place under the one root (the first run of a
module that keeps the record does it), so nothing recorded on a node is lost."""

from __future__ import annotations

import json
import os

__metaclass__ = type

from ansible_collections.gpuops.nvidia.plugins.module_utils.host import files

ROOT = "/var/lib/gpuops"
# older roots, newest first: a record found there is carried over to ROOT
LEGACY_ROOTS = ("/var/lib/gpuops-nvidia",)

DRIVER_STATE = ROOT + "/driver-state.json"
GPU_INVENTORY = ROOT + "/gpu-inventory.json"
MIG_PROFILES = ROOT + "/mig-profiles.json"
PACKAGES = ROOT + "/packages"
APT_SOURCES = ROOT + "/apt-sources"


# A record that exists but cannot be used; the message names the file and the fix. The same class
# as files.FileError, so a caller that handles one handles a record that cannot even be read.
RecordError = files.FileError


def under(root: str, path: str) -> str:
    """path as seen from a host root directory (``/`` is the host itself)."""
    if not root or root == "/":
        return path
    return os.path.join(root, path.lstrip("/"))


def read_text(path: str, what: str = "record") -> str | None:
    """The record's text, or None when there is none (files.read_text: anything else that stops it
    being read is a RecordError naming the file)."""
    return files.read_text(path, what)


def parse(text: str, path: str, shape: type = dict, what: str = "record"):
    """A record's JSON text as data of the record's shape (a dict unless told otherwise)."""
    try:
        data = json.loads(text)
    except ValueError as exc:
        raise RecordError("the %s %s is not JSON (%s): move it away and run again to write it anew"
                          % (what, path, exc))
    if not isinstance(data, shape):
        raise RecordError("the %s %s holds a %s where a %s was expected: move it away and run again "
                          "to write it anew" % (what, path, _kind(data), _kind(shape())))
    return data


def read(path: str, shape: type = dict, what: str = "record") -> tuple:
    """(text, data) of a record; (None, None) when there is none."""
    text = read_text(path, what)
    if text is None:
        return None, None
    return text, parse(text, path, shape, what)


def dumps(data) -> str:
    """A record's text as this collection writes it."""
    return json.dumps(data, indent=2, sort_keys=True) + "\n"


def legacy_paths(path: str) -> list:
    """Where an older release kept the record that now lives at path (under ROOT)."""
    if not path.startswith(ROOT + "/"):
        return []
    return [old + path[len(ROOT):] for old in LEGACY_ROOTS]


def carry_over(module, path: str, root: str = "/") -> str | None:
    """The record at path, carried over from an older root when only that one exists (moved:
    written under ROOT, then removed from the old root; in check mode only read). Returns the
    old path it came from, or None."""
    if os.path.lexists(under(root, path)):
        return None
    for old in legacy_paths(path):
        text = read_text(under(root, old))
        if text is None:
            continue
        if not module.check_mode:
            problem = files.check_writable(under(root, path))
            if problem:
                raise RecordError("cannot carry the record %s over to %s: %s" % (old, path, problem))
            files.write_atomic(module, under(root, path), text, mode=0o644)
            os.unlink(under(root, old))
        return old
    return None


def read_carried(module, path: str, shape: type = dict, what: str = "record", root: str = "/") -> tuple:
    """(text, data) of a record, looked for under the older roots too (see carry_over); in check
    mode the old record is read where it is."""
    old = carry_over(module, path, root)
    source = under(root, old) if old and module.check_mode else under(root, path)
    return read(source, shape, what)


def write(module, result: dict, path: str, what: str, before: str | None, after: str) -> None:
    """Write a record's text when it changed (files.write_record: atomic, check mode, diff)."""
    if before == after:
        return
    files.write_record(module, result, path, what, before, after)


def _kind(value) -> str:
    return {dict: "JSON object", list: "JSON list", str: "string", int: "number", float: "number",
            bool: "boolean"}.get(type(value), type(value).__name__)

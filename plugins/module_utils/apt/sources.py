# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A package repository and its trust, for apt_source and repo_key: the signing key (from its
content or a URL, checked to be an OpenPGP public key before anything is written) in its own
keyring, the deb822 source trusted only with that key, an apt pin, and a refresh of the source's
lists when the key or the source changed - or when the last refresh of them failed (a marker
under records.APT_SOURCES says which key and source were last refreshed).

``plan`` is pure: the options in, the file each path should hold (None: absent) out; ``apply``
compares them with the files, writes (not in check mode) and refreshes. Raises ops.AptError."""

from __future__ import annotations

import hashlib
import os

__metaclass__ = type

from ansible.module_utils.common.text.converters import to_bytes, to_text

from ansible_collections.gpuops.nvidia.plugins.module_utils.apt import openpgp, ops
from ansible_collections.gpuops.nvidia.plugins.module_utils.apt import parse as apt
from ansible_collections.gpuops.nvidia.plugins.module_utils.host import files, records

KEYRINGS = "/etc/apt/keyrings"
SOURCES = "/etc/apt/sources.list.d"
PREFERENCES = "/etc/apt/preferences.d"
MARKERS = records.APT_SOURCES


def read_bytes(path: str) -> bytes | None:
    """The file's bytes, or None when it does not exist."""
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def download(module, url: str, timeout: int = 30) -> bytes:
    """The key at url (Ansible's fetch_url: the module's proxy settings and validate_certs)."""
    from ansible.module_utils.urls import fetch_url  # pylint: disable=import-outside-toplevel
    response, info = fetch_url(module, url, timeout=timeout)
    if info.get("status") != 200 or response is None:
        raise ops.AptError("cannot download the repository key from %s: %s %s; nothing was changed"
                           % (url, info.get("status"), info.get("msg")))
    return response.read()


def wanted_key(module, content: str | None, url: str | None, path: str, timeout: int = 30) -> tuple:
    """(bytes, keys) of the key to install from its content or URL, checked to be an OpenPGP public
    key (ASCII-armored where path is an .asc keyring) before anything is written."""
    source = url or "the given content"
    data = download(module, url, timeout) if url else to_bytes(content)
    if path.endswith(".asc") and not data.lstrip().startswith(b"-----BEGIN PGP PUBLIC KEY BLOCK-----"):
        raise ops.AptError("the repository key from %s is not ASCII-armored, which %s (.asc) must be for apt; give the "
                           "armored key (gpg --armor --export) or its URL; nothing was changed" % (source, path))
    try:
        return data, openpgp.keys(data)
    except (openpgp.KeyFileError, IndexError) as exc:
        raise ops.AptError("the repository key from %s is not an OpenPGP public key (%s); give the key's ASCII-armored "
                           "content or its URL; nothing was changed" % (source, exc))


def known_keys(data: bytes | None) -> list:
    """The keys of a keyring's bytes; [] when there are none or it is not a key."""
    if not data:
        return []
    try:
        return openpgp.keys(data)
    except (openpgp.KeyFileError, IndexError):
        return []


def key_diff(path: str, before: bytes | None, after: bytes | None, previous: list, keys: list) -> dict:
    """A keyring's diff by fingerprint, algorithm, date and uid - never base64."""
    return {"before_header": path if before is not None else "%s (absent)" % path,
            "after_header": path if after is not None else "%s (absent)" % path,
            "before": openpgp.describe(previous) if previous else ("" if before is None else "(not a key)\n"),
            "after": openpgp.describe(keys) if after is not None else ""}


def paths(name: str, pin: dict | None = None) -> dict:
    """Where a source's files live: keyring, source, marker and (with a pin) the pin's file."""
    found = {"keyring": os.path.join(KEYRINGS, "%s.asc" % name), "source": os.path.join(SOURCES, "%s.sources" % name),
             "marker": os.path.join(MARKERS, "%s.refreshed" % name)}
    if pin:
        found["pin"] = os.path.join(PREFERENCES, "%s.pref" % pin["name"])
    return found


def check(params: dict) -> str | None:
    """Why the options cannot be applied, or None."""
    pin = params.get("pin") or {}
    if pin and (not pin.get("name") or not isinstance(pin.get("packages") or [], list)):
        return "pin needs a name and a list of packages (and a version, or '' to remove it)"
    if params["state"] == "present" and params["url"] and not (params.get("key") or params.get("key_url")):
        return "the source %s needs its signing key: give key (its content) or key_url" % params["name"]
    return None


def plan(params: dict, key: bytes | None) -> dict:
    """{path: bytes, text or None (absent)} each file should hold, the key given as bytes (None
    when absent); the marker's stamp under 'stamp' (None without a source)."""
    present, pin, where = params["state"] == "present", params.get("pin") or {}, paths(params["name"], params.get("pin"))
    wanted = {}
    if params["url"] or not present:
        wanted[where["keyring"]] = key if present else None
        wanted[where["source"]] = apt.deb822_source(params["name"], params["url"], where["keyring"]) if present else None
    if pin:
        wanted[where["pin"]] = (apt.pin_text(pin["name"], pin.get("packages") or [], pin["version"])
                                if present and pin.get("version") else None)
    stamp = None
    if present and params["url"]:
        stamp = hashlib.sha256(key + b"\0" + wanted[where["source"]].encode("utf-8")).hexdigest() + "\n"
    return {"files": wanted, "stamp": stamp, "paths": where}


def apply(module, params: dict) -> dict:
    """The source, its key and its pin as params say: the result apt_source reports."""
    problem = check(params)
    if problem:
        raise ops.AptError(problem)
    for variable, value in params["environment"].items():
        os.environ[variable] = str(value)  # the key's download goes through the proxy too
    present = params["state"] == "present"
    result = {"changed": False, "files": [], "source_changed": False, "refreshed": False, "refresh_needed": False}
    key, keys = None, []
    if present and params["url"]:
        key, keys = wanted_key(module, params.get("key"), params.get("key_url"), paths(params["name"])["keyring"],
                               params["timeout"])
        result["keys"] = keys
    steps = plan(params, key)
    where, diffs = steps["paths"], []
    for path, after in steps["files"].items():
        before = read_bytes(path)
        after = to_bytes(after) if after is not None else None
        if before == after:
            continue
        problem = files.check_writable(path)
        if problem:
            raise ops.AptError("cannot change %s: %s; nothing was changed" % (path, problem))
        result["files"].append(path)
        result["source_changed"] = result["source_changed"] or path in (where["keyring"], where["source"])
        if module._diff:  # pylint: disable=protected-access
            diffs.append(key_diff(path, before, after, known_keys(before), keys) if path == where["keyring"] else
                         files.diff_entry(path, to_text(before) if before is not None else None,
                                          to_text(after) if after is not None else None))
        steps["files"][path] = after
    refresh = bool(steps["stamp"] and params["refresh"]
                   and (result["source_changed"] or files.read_text(where["marker"]) != steps["stamp"]))
    result["refresh_needed"] = refresh and not result["source_changed"]
    result["changed"] = bool(result["files"]) or refresh
    if result["changed"] and not module.check_mode:
        for path in result["files"]:
            if steps["files"][path] is None:
                files.remove(module, path)
            else:
                files.write_atomic(module, path, steps["files"][path], mode=0o644)
        if refresh:
            try:
                ops.refresh(module, sources=[where["source"]], hints=params["hints"], environment=params["environment"])
            except ops.AptError as exc:
                exc.changed = True
                raise
            files.write_atomic(module, where["marker"], steps["stamp"], mode=0o644)
            result["refreshed"] = True
    if not present and os.path.exists(where["marker"]) and not module.check_mode:
        files.remove(module, where["marker"])
    if diffs:
        result["diff"] = diffs
    return result


def apply_key(module, params: dict) -> dict:
    """One keyring at params' path as params say: the result repo_key reports."""
    path = params["path"]
    before = read_bytes(path)
    previous = known_keys(before)
    result = {"changed": False, "previous_keys": previous}
    after, keys = None, []
    if params["state"] != "absent":
        after, keys = wanted_key(module, params["content"], params["url"], path, params["timeout"])
        result["keys"] = keys
    if after != before:
        problem = files.check_writable(path)
        if problem:
            raise ops.AptError("cannot change %s: %s; nothing was changed" % (path, problem))
        result["changed"] = True
        if not module.check_mode:
            if after is None:
                files.remove(module, path)
            else:
                files.write_atomic(module, path, after, mode=0o644)
        if module._diff:  # pylint: disable=protected-access
            result["diff"] = key_diff(path, before, after, previous, keys)
    return result

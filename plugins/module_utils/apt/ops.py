# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""apt on the node, for the modules that change it (apt_refresh, apt_install): refresh the lists
(all, or one source) naming a failing source and apt's reason; read what dpkg has installed and
held; simulate and run an installation. Commands run through module_utils/host/commands (C locale);
the parsing is module_utils/apt/parse's."""

from __future__ import annotations

__metaclass__ = type

import fnmatch
import os
import time

from ansible_collections.gpuops.nvidia.plugins.module_utils.apt import parse as apt
from ansible_collections.gpuops.nvidia.plugins.module_utils.host import commands

LISTS = "/var/lib/apt/lists"
NONINTERACTIVE = {"DEBIAN_FRONTEND": "noninteractive"}


class AptError(Exception):
    """apt failed; ``problems`` names the sources and reasons when there are any."""

    def __init__(self, message, problems=None, changed=False):
        super().__init__(message)
        self.problems = problems or []
        self.changed = changed


def lists_state() -> dict:
    state = {}
    if os.path.isdir(LISTS):
        for name in os.listdir(LISTS):
            path = os.path.join(LISTS, name)
            if os.path.isfile(path):
                stat = os.stat(path)
                state[name] = (stat.st_size, stat.st_mtime_ns)
    return state


def lists_age(state: dict) -> float | None:
    """Seconds since the newest Release file was fetched; None when there is none."""
    releases = [mtime for name, (_size, mtime) in state.items() if name.endswith(("_InRelease", "_Release"))]
    return None if not releases else time.time() - max(releases) / 1e9


def needs_refresh(cache_valid_time: int) -> bool:
    age = lists_age(lists_state())
    return not cache_valid_time or age is None or age >= cache_valid_time


def _tolerated(source, tolerate, strict) -> bool:
    return bool(source) and source not in strict and any(fnmatch.fnmatch(source, pattern) for pattern in tolerate)


def refresh(module, sources=(), tolerate=(), strict=(), hints=None, environment=None) -> dict:
    """apt-get update of the given source files (each alone), or of every source. Raises AptError
    naming each failing source, apt's reason and the fix (hints: fixes in the caller's words, per
    kind); a failing source matched by tolerate (and not in strict) is only a warning.
    Returns {changed, problems (the tolerated ones)}."""
    for path in sources:
        if not os.path.isfile(path):
            raise AptError("apt source %s does not exist; add the source before refreshing it" % path)
    before = lists_state()
    runs = [(path, ["-o", "Dir::Etc::sourcelist=%s" % path, "-o", "Dir::Etc::sourceparts=-",
                    "-o", "APT::Get::List-Cleanup=0"]) for path in sources] or [(None, [])]
    known = apt.read_sources("/", commands.output(module, ["dpkg", "--print-architecture"]).strip() or None)
    problems, tolerated = [], []
    environ = {key: str(value) for key, value in (environment or {}).items()}
    for path, options in runs:
        rc, out, err = commands.run(module, ["apt-get", "update", "-q"] + options, env=environ)
        found = apt.update_problems(out + "\n" + err, known, default_source=path)
        for item in found:
            (tolerated if path is None and _tolerated(item["source"], tolerate, strict) else problems).append(item)
        if rc != 0 and not found:
            last = (err.strip() or out.strip() or "apt-get update failed (exit %d)" % rc).splitlines()[-1]
            problems.append(apt.problem(path, None, "other", last, "run apt-get update on the node to see apt's own message"))
    changed = lists_state() != before
    if problems:
        raise AptError(apt.describe(problems, hints or {}), problems=problems, changed=changed)
    for item in tolerated:
        module.warn("apt could not refresh %s; fix: %s" % (item["message"], item["fix"]))
    return {"changed": changed, "problems": tolerated}


def installed(module) -> dict:
    """{package: version} of what dpkg has installed (held ones included)."""
    _rc, out, _err = commands.run(module, ["dpkg-query", "-W", "-f=${db:Status-Abbrev} ${Package} ${Version}\\n"])
    return apt.parse_versions(out)


def held(module) -> set:
    _rc, out, _err = commands.run(module, ["apt-mark", "showhold"])
    return {line.strip().split(":")[0] for line in out.splitlines() if line.strip()}


def simulate_install(module, names, options, environment=None) -> list:
    """[(name, version)] an `apt-get install` of names would install or change."""
    rc, out, err = commands.run(module, ["apt-get", "-s", "-q", "-y"] + options + ["install"] + list(names),
                                env={key: str(value) for key, value in (environment or {}).items()})
    if rc != 0:
        raise AptError("apt cannot install %s: %s" % (", ".join(names), _apt_reason(out, err)))
    return apt.parse_install_simulation(out)


def install(module, names, options, environment=None) -> None:
    env = dict(NONINTERACTIVE, **{key: str(value) for key, value in (environment or {}).items()})
    rc, out, err = commands.run(module, ["apt-get", "-q", "-y", "-o", "Dpkg::Options::=--force-confdef",
                                         "-o", "Dpkg::Options::=--force-confold"] + options + ["install"] + list(names),
                                env=env)
    if rc != 0:
        raise AptError("apt-get could not install %s: %s" % (", ".join(names), _apt_reason(out, err)), changed=True)


def mark(module, verb: str, names) -> None:
    rc, out, err = commands.run(module, ["apt-mark", verb] + sorted(names))
    if rc != 0:
        raise AptError("apt-mark %s %s failed: %s" % (verb, " ".join(sorted(names)), _apt_reason(out, err)), changed=True)


def _apt_reason(out: str, err: str) -> str:
    """apt's own lines that say why (E: and W: lines, unmet dependencies), else its last line."""
    text = (err or "") + "\n" + (out or "")
    lines = [line.strip() for line in text.splitlines() if line.startswith(("E: ", "W: ")) or "Depends:" in line]
    if lines:
        return " | ".join(lines[-8:])
    rest = [line.strip() for line in text.splitlines() if line.strip()]
    return rest[-1] if rest else "no output"


# ---- repository keys ---------------------------------------------------------------------------

def read_bytes(path: str) -> bytes | None:
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def download(module, url: str, timeout: int = 30) -> bytes:
    from ansible.module_utils.urls import fetch_url  # pylint: disable=import-outside-toplevel
    response, info = fetch_url(module, url, timeout=timeout)
    if info.get("status") != 200 or response is None:
        raise AptError("cannot download the repository key from %s: %s %s; nothing was changed"
                       % (url, info.get("status"), info.get("msg")))
    return response.read()


def wanted_key(module, content: str | None, url: str | None, path: str, timeout: int = 30) -> tuple:
    """(bytes, keys) of the key to install from its content or URL, checked to be an OpenPGP public
    key (ASCII-armored where path is an .asc keyring) before anything is written."""
    from ansible.module_utils.common.text.converters import to_bytes  # pylint: disable=import-outside-toplevel
    from ansible_collections.gpuops.nvidia.plugins.module_utils.apt import openpgp
    source = url or "the given content"
    data = download(module, url, timeout) if url else to_bytes(content)
    if path.endswith(".asc") and not data.lstrip().startswith(b"-----BEGIN PGP PUBLIC KEY BLOCK-----"):
        raise AptError("the repository key from %s is not ASCII-armored, which %s (.asc) must be for apt; give the "
                       "armored key (gpg --armor --export) or its URL; nothing was changed" % (source, path))
    try:
        return data, openpgp.keys(data)
    except (openpgp.KeyFileError, IndexError) as exc:
        raise AptError("the repository key from %s is not an OpenPGP public key (%s); give the key's ASCII-armored "
                       "content or its URL; nothing was changed" % (source, exc))


def known_keys(data: bytes | None) -> list:
    from ansible_collections.gpuops.nvidia.plugins.module_utils.apt import openpgp
    if not data:
        return []
    try:
        return openpgp.keys(data)
    except (openpgp.KeyFileError, IndexError):
        return []


def key_diff(path: str, before: bytes | None, after: bytes | None, previous: list, keys: list) -> dict:
    from ansible_collections.gpuops.nvidia.plugins.module_utils.apt import openpgp
    return {"before_header": path if before is not None else "%s (absent)" % path,
            "after_header": path if after is not None else "%s (absent)" % path,
            "before": openpgp.describe(previous) if previous else ("" if before is None else "(not a key)\n"),
            "after": openpgp.describe(keys) if after is not None else ""}

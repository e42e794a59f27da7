# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""apt's commands on the node, for the modules that change it: refresh the lists (all, or one
source) naming a failing source and apt's reason; simulate and run an installation or a removal;
what installed packages depend on. Commands run through module_utils/host/commands (C locale);
the parsing is module_utils/apt/parse's. What dpkg has installed and held is read (and holds are
written) by module_utils/apt/packages only."""

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

    def __init__(self, message, problems=None, changed=False, details=None):
        super().__init__(message)
        self.problems = problems or []
        self.changed = changed
        self.details = details or {}

    def result(self) -> dict:
        """fail_json's arguments: the message, the problems, whether something changed, and the
        details the failing step adds (what was kept or removed so far)."""
        return dict(self.details, msg=str(self), problems=self.problems, changed=self.changed)


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


def simulate_install(module, names, options, environment=None) -> list:
    """[(name, version)] an `apt-get install` of names would install or change."""
    rc, out, err = commands.run(module, ["apt-get", "-s", "-q", "-y"] + options + ["install"] + list(names),
                                env={key: str(value) for key, value in (environment or {}).items()})
    if rc != 0:
        raise AptError("apt cannot install %s: %s" % (", ".join(names), apt_reason(out, err)))
    return apt.parse_install_simulation(out)


def at_candidate(module, names) -> bool:
    """True when every package of names is installed at the version apt would install now (its
    candidate, pins included): an `apt-get install` of them would change nothing, so it need not be
    simulated (`apt-cache policy` reads the cache without resolving the whole archive)."""
    rc, out, _err = commands.run(module, ["apt-cache", "policy"] + list(names))
    if rc != 0:
        return False
    found = apt.parse_policy(out)
    return all(found.get(name, (None, None))[0] is not None and found[name][0] == found[name][1] for name in names)


def install(module, names, options, environment=None) -> None:
    env = dict(NONINTERACTIVE, **{key: str(value) for key, value in (environment or {}).items()})
    rc, out, err = commands.run(module, ["apt-get", "-q", "-y", "-o", "Dpkg::Options::=--force-confdef",
                                         "-o", "Dpkg::Options::=--force-confold"] + options + ["install"] + list(names),
                                env=env)
    if rc != 0:
        raise AptError("apt-get could not install %s: %s" % (", ".join(names), apt_reason(out, err)), changed=True)


def apt_reason(out: str, err: str) -> str:
    """apt's own lines that say why (E: and W: lines, unmet dependencies), else its last line."""
    text = (err or "") + "\n" + (out or "")
    lines = [line.strip() for line in text.splitlines() if line.startswith(("E: ", "W: ")) or "Depends:" in line]
    if lines:
        return " | ".join(lines[-8:])
    rest = [line.strip() for line in text.splitlines() if line.strip()]
    return rest[-1] if rest else "no output"


def depends(module, names) -> set:
    """names and every installed package they depend on (recursively; not recommends)."""
    if not names:
        return set()
    rc, out, err = commands.run(module, ["apt-cache", "depends", "--recurse", "--installed", "--no-recommends",
                                         "--no-suggests", "--no-conflicts", "--no-breaks", "--no-replaces",
                                         "--no-enhances"] + sorted(names))
    if rc != 0:
        raise AptError("apt-cache depends failed: %s" % (err.strip() or out.strip()))
    return apt.parse_depends(out) | set(names)


def simulate_remove(module, verb: str, names, options) -> set:
    """The packages an `apt-get remove|purge` of names would take away."""
    rc, out, err = commands.run(module, ["apt-get", "-s", "-q", "-y"] + options + [verb] + sorted(names))
    if rc != 0:
        raise AptError("apt cannot plan the removal of %s: %s" % (", ".join(sorted(names)), (err.strip() or out.strip())))
    return set(apt.parse_simulation(out))


def remove(module, verb: str, names, options, details=None) -> None:
    rc, out, err = commands.run(module, ["apt-get", "-q", "-y"] + options + [verb] + sorted(names), env=NONINTERACTIVE)
    if rc != 0:
        raise AptError("apt-get could not remove %s: %s" % (", ".join(sorted(names)), err.strip() or out.strip()),
                       changed=True, details=details)

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""apt_install's transaction: refresh the lists when they are old, install a role's packages (a
simulation first: check mode stops there), record what the installation added in the role's
record (records.PACKAGES/<owner>.json, also when apt fails halfway), retire an earlier branch's
packages, and hold or release packages.

``plan`` is pure (the options, what dpkg has installed and the role's record in; what to ask apt
out); ``changes``, ``record`` and ``diff`` are pure too; ``apply`` runs the transaction and returns
apt_install's result. Failures raise ops.AptError (a record that cannot be used included)."""

from __future__ import annotations

import os

__metaclass__ = type

from ansible_collections.gpuops.nvidia.plugins.module_utils.apt import ops, packages, sources
from ansible_collections.gpuops.nvidia.plugins.module_utils.apt import parse as apt
from ansible_collections.gpuops.nvidia.plugins.module_utils.host import records

NO_RECOMMENDS = ["--no-install-recommends"]
PENDING = ("the repository would be added first; apt cannot resolve its packages before it is, so the "
           "installation is not simulated")


def base_name(name: str) -> str:
    """'nvidia-open=580.95.05-1' or 'libc6:amd64' -> the package's name."""
    return name.split("=")[0].split(":")[0]


def plan(params: dict, installed: dict, previous: dict | None) -> dict:
    """What to ask apt: {requires (the names the record keeps), retired (an earlier branch's
    packages to remove), missing (prerequisites not installed), wanted (apt-get install's
    arguments), options, hold (names to hold or release)}."""
    requires = [base_name(name) for name in params["names"] + params["prerequisites"]]
    retired = apt.retired_branch_packages((previous or {}).get("requires") or [], requires, installed) \
        if params["retire_branch_packages"] else []
    missing = [name for name in params["prerequisites"] if base_name(name) not in installed]
    wanted = [name for name in params["names"] if params["latest"] or base_name(name) not in installed]
    if retired:
        wanted = list(params["names"]) + ["%s-" % name for name in retired]
    options = NO_RECOMMENDS + ["--allow-change-held-packages"] + (["--allow-downgrades"] if params["allow_downgrade"] else [])
    return {"requires": requires, "retired": retired, "missing": missing, "wanted": wanted + missing,
            "options": options, "hold": sorted({base_name(name) for name in params["hold"]})}


def changes(before: dict, changed: list) -> tuple:
    """([{name, before, after}], [added]) of the (name, version) pairs an installation changed."""
    return ([{"name": name, "before": before.get(name), "after": version} for name, version in sorted(changed)],
            sorted(name for name, _version in changed if name not in before))


def record(previous: dict | None, owner: str, steps: dict, added: list) -> dict:
    """The role's record after this installation."""
    return apt.install_record(previous, owner, steps["requires"], added, retired=steps["retired"])


def diff(changed_packages: list) -> dict | None:
    """Diff mode: the packages that change, with their versions; None when none do."""
    if not changed_packages:
        return None
    return {"before_header": "packages", "after_header": "packages",
            "before": "".join("%s %s\n" % (p["name"], p["before"] or "(not installed)") for p in changed_packages),
            "after": "".join("%s %s\n" % (p["name"], p["after"]) for p in changed_packages)}


def record_path(params: dict) -> str:
    return os.path.join(params["record_dir"], "%s.json" % params["owner"])


def apply(module, params: dict, root: str = "/") -> dict:
    """The transaction as params (apt_install's options) say; root is where dpkg's database is read.
    With params' source, the repository, its key and its pin first (as apt_source sets them: its
    result is the result's source); in check mode a source that would change makes the installation
    pending (apt cannot resolve packages from a source, key or pin not written yet)."""
    source = None
    if params.get("source"):
        source = sources.apply(module, dict(params["source"], state="present", refresh=True, timeout=30,
                                            hints=params["hints"], environment=params["environment"]))
        if module.check_mode and source["changed"]:
            params = dict(params, repository_pending=True)
    result = {"changed": False, "refreshed": False, "problems": [], "changed_packages": [], "added": [],
              "held": [], "retired": []}
    try:
        _transaction(module, params, result, root)
    except records.RecordError as exc:
        raise ops.AptError("%s; nothing was changed" % exc)
    except ops.AptError as exc:
        exc.changed = exc.changed or result["changed"] or bool(source and source["changed"])
        raise
    diffs = list((source or {}).get("diff") or [])
    if module._diff and diff(result["changed_packages"]):  # pylint: disable=protected-access
        diffs.append(diff(result["changed_packages"]))
    if diffs:
        result["diff"] = diffs if len(diffs) > 1 else diffs[0]
    if source is not None:
        result["source"] = source
        result["changed"] = result["changed"] or source["changed"]
    return result


def _at_candidate(module, steps: dict, before: dict) -> bool:
    """An installation of packages that are all installed already, nothing retired, at the versions
    apt's candidates (pins included) are: apt would change nothing (the usual latest=true run on a
    converged node)."""
    plain = [name for name in steps["wanted"] if name == base_name(name)]
    return (not steps["retired"] and not steps["missing"] and len(plain) == len(steps["wanted"])
            and all(name in before for name in plain) and ops.at_candidate(module, plain))


def _write_record(module, path: str, text: str | None, after: dict) -> None:
    records.write(module, {}, path, "installation record", text, records.dumps(after))


def _transaction(module, params: dict, result: dict, root: str) -> None:
    check, environment = module.check_mode, params["environment"]
    if not check and ops.needs_refresh(params["cache_valid_time"]):
        refreshed = ops.refresh(module, tolerate=params["tolerate"], strict=params["strict"], hints=params["hints"],
                                environment=environment)
        result.update(refreshed=True, problems=refreshed["problems"])
    before = packages.installed(root)
    path = record_path(params)
    text, previous = records.read(path, dict, "installation record")
    steps = plan(params, before, previous)
    result["retired"] = steps["retired"]
    if check and params["repository_pending"]:
        # apt cannot resolve the repository's packages yet: only the missing prerequisites (the
        # distribution's) are simulated, and the installation is a change
        planned = ops.simulate_install(module, steps["missing"], NO_RECOMMENDS, environment) if steps["missing"] else []
        result["changed_packages"], result["added"] = changes(before, planned)
        result.update(changed=True, msg=PENDING + (" (only the missing prerequisites are)" if steps["missing"] else ""),
                      record=record(previous, params["owner"], steps, result["added"]))
        return
    planned = ops.simulate_install(module, steps["wanted"], steps["options"], environment) \
        if steps["wanted"] and not _at_candidate(module, steps, before) else []
    if planned and not check:
        try:
            ops.install(module, steps["wanted"], steps["options"], environment)
        except ops.AptError:
            # what apt installed before it failed is recorded too, so a removal takes it away
            now = packages.installed(root)
            added = sorted(name for name in now if name not in before)
            gone = [name for name in steps["retired"] if name not in now]
            if added or gone:
                _write_record(module, path, text, apt.install_record(previous, params["owner"], steps["requires"],
                                                                     added, retired=gone))
            raise
        after = packages.installed(root)
        planned = [(name, version) for name, version in after.items() if before.get(name) != version]
    else:
        after = dict(before, **dict(planned))
        after = {name: version for name, version in after.items() if not (check and name in steps["retired"])}
    result["changed_packages"], result["added"] = changes(before, planned)
    result["record"] = record(previous, params["owner"], steps, result["added"])
    if result["record"] != previous:
        _write_record(module, path, text, result["record"])
        result["changed"] = True
    change = packages.hold_changes(packages.held(root) if steps["hold"] else set(), steps["hold"],
                                   params["hold_state"], present=after)
    if change and not check:
        packages.set_holds(module, change, params["hold_state"])
    result["held"] = change
    result["changed"] = result["changed"] or bool(result["changed_packages"] or result["held"] or steps["retired"])

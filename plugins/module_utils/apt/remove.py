# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""apt_remove's removal: take away exactly the packages asked for, never one another role needs.

``remove`` asks apt first (a simulation) what the removal would take; packages of ``keep`` (other
roles' needs), and those installed packages depend on, stay with everything they depend on.

``remove_owned`` is a role's whole removal from its installation record
(records.PACKAGES/<owner>.json, apt_install's): release the holds on what the role added, remove
what it added but what the other records require, hand what stayed to the roles that require it
(their removal takes it back later, nothing is left unowned), and remove the record.

``owned``, ``kept_why`` and ``hand_over`` are pure. Failures raise ops.AptError, whose details
carry what was decided so far."""

from __future__ import annotations

import glob
import os

__metaclass__ = type

from ansible_collections.gpuops.nvidia.plugins.module_utils.apt import ops, packages
from ansible_collections.gpuops.nvidia.plugins.module_utils.host import files, records

ATTEMPTS = 5
WHAT = "installation record"


def owned(found: dict, owner: str, record_dir: str) -> dict:
    """From the records {path: data}: {path (owner's record), mine (its data, {} without one),
    others ({path: data} of every other record), keep (what the others require)}."""
    path = os.path.join(record_dir, "%s.json" % owner)
    others = {where: data for where, data in found.items() if where != path}
    keep = sorted({name for data in others.values() for name in data.get("requires") or []})
    return {"path": path, "mine": found.get(path) or {}, "others": others, "keep": keep}


def kept_why(name: str, keep) -> str:
    return "another role needs it" if name in keep else "a package another role needs depends on it"


def hand_over(others: dict, kept: list) -> dict:
    """{path: data} of the other records that take over what stayed: each that still requires
    packages gains the kept ones in its added (those already holding them are left out)."""
    return {path: dict(data, added=sorted(set(data.get("added") or []) | set(kept)))
            for path, data in sorted(others.items())
            if data.get("requires") and set(kept) - set(data.get("added") or [])}


def remove(module, names, keep=(), purge: bool = True, allow_held: bool = True, root: str = "/") -> dict:
    """Remove names (those installed) but keep and what needs them: apt_remove's result."""
    verb = "purge" if purge else "remove"
    installed = set(packages.installed(root))
    options = ["--allow-change-held-packages"] if allow_held else []
    candidates, kept = set(names) & installed, {}
    protected = ops.depends(module, set(keep) & installed)
    for name in sorted(candidates & protected):
        kept[name] = kept_why(name, keep)
    candidates -= protected
    # What apt would take away beyond the candidates depends on them: keep what those need.
    for _attempt in range(ATTEMPTS):
        if not candidates:
            break
        extra = ops.simulate_remove(module, verb, candidates, options) - candidates
        if not extra:
            break
        needed = ops.depends(module, extra) & candidates
        for name in sorted(needed):
            kept[name] = "installed packages depend on it (%s)" % ", ".join(sorted(extra)[:5])
        candidates -= needed
    else:
        raise ops.AptError("apt would still remove more than asked for; nothing was removed", details={"kept": kept})
    result = dict(changed=bool(candidates), removed=sorted(candidates),
                  kept=[{"name": name, "why": why} for name, why in sorted(kept.items())])
    if module._diff and candidates:  # pylint: disable=protected-access
        result["diff"] = {"before": "\n".join(sorted(installed & set(names))) + "\n",
                          "after": "\n".join(sorted((installed & set(names)) - candidates)) + "\n"}
    if candidates and not module.check_mode:
        ops.remove(module, verb, candidates, options, details=result)
    return result


def read_records(record_dir: str) -> tuple:
    """({path: text}, {path: data}) of every record in record_dir."""
    texts, found = {}, {}
    for path in sorted(glob.glob(os.path.join(record_dir, "*.json"))):
        texts[path], found[path] = records.read(path, dict, WHAT)
    return texts, found


def remove_owned(module, owner: str, record_dir: str, keep=(), purge: bool = True, allow_held: bool = True,
                 root: str = "/") -> dict:
    """owner's whole removal from its record (see the module's docstring): apt_remove's result."""
    try:
        texts, found = read_records(record_dir)
    except records.RecordError as exc:
        raise ops.AptError("%s; nothing was removed" % exc)
    mine = owned(found, owner, record_dir)
    added = mine["mine"].get("added") or []
    status = packages.read(root) or {}
    released = packages.hold_changes(packages.holds(status), added, hold=False, present=packages.versions(status))
    if released and not module.check_mode:
        packages.set_holds(module, released, hold=False)
    try:
        result = remove(module, added, sorted(set(mine["keep"]) | set(keep)), purge, allow_held, root)
    except ops.AptError as exc:
        exc.changed = exc.changed or bool(released and not module.check_mode)
        raise
    diffs = [dict(result.pop("diff"), before_header="packages", after_header="packages")] if "diff" in result else []
    result.update(released=released, changed=result["changed"] or bool(released), records=[])
    if not mine["mine"]:
        result["msg"] = ("there is no record of the packages %s installed (%s): none are removed; remove them with "
                         "apt if this role installed them before it kept records" % (owner, mine["path"]))
    for path, data in hand_over(mine["others"], [item["name"] for item in result["kept"]]).items():
        scratch = {}
        records.write(module, scratch, path, WHAT, texts[path], records.dumps(data))
        diffs += [scratch["diff"]] if "diff" in scratch else []
        result.update(changed=True, records=result["records"] + [path])
    if os.path.lexists(mine["path"]):
        if not module.check_mode:
            files.remove(module, mine["path"])
        diffs += [files.diff_entry(mine["path"], texts.get(mine["path"]), None)] if module._diff else []  # pylint: disable=protected-access
        result.update(changed=True, records=result["records"] + [mine["path"]])
    if diffs:
        result["diff"] = diffs
    return result

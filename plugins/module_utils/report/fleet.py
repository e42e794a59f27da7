# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet summary that ends a playbook run: one record and one line per node - its verdict,
driver, toolkit and what the run changed on it - from the facts the stages leave on each host
(gpuops_nvidia from the GPU report, driver_result from the driver stage, container_toolkit_result
from the toolkit stage, <stage>_changes from the driver, toolkit and MIG stages, which stage_changes
computes from their modules' results). Pure functions; the records are what
set_stats hands to AWX, one key per node, so the summaries of job slices merge."""

from __future__ import annotations

__metaclass__ = type

from ansible_collections.gpuops.nvidia.plugins.module_utils.report.lines import wrap

WIDTH = 100
# what each stage says it changed on the node, in stage order
CHANGES = ("driver_changes", "container_toolkit_changes", "mig_changes")


def _installed(install: dict | None, names=None, but=()) -> list:
    """The packages an apt_install result says it changed: those of names (all when None), but
    not those of but."""
    return [item.get("name") for item in (install or {}).get("changed_packages") or []
            if (names is None or item.get("name") in names) and item.get("name") not in but]


def _changed(result) -> bool:
    return isinstance(result, dict) and bool(result.get("changed"))


def stage_changes(stage: str, results: dict) -> list:
    """What a stage changed on the node, in words, from its modules' registered results:

    - driver: repo_changed, install (apt_install), prerequisites (packages installed with the
      driver that are not the driver), version, rebooted;
    - container_toolkit: repo_changed, install, packages, runtime, runtime_result (runtime_config),
      cdi_result (cdi_spec);
    - mig: config_name, result (mig present), absent_result (mig absent)."""
    changes = []
    if stage == "driver":
        if results.get("repo_changed"):
            changes.append("driver repository")
        if _installed(results.get("install"), but=set(results.get("prerequisites") or [])):
            changes.append("driver %s installed" % results.get("version"))
        if results.get("rebooted"):
            changes.append("rebooted")
    elif stage == "container_toolkit":
        cdi = results.get("cdi_result") or {}
        if results.get("repo_changed"):
            changes.append("toolkit repository")
        if _installed(results.get("install"), set(results.get("packages") or [])):
            changes.append("toolkit installed")
        if _changed(results.get("runtime_result")):
            changes.append("%s configured and restarted" % results.get("runtime"))
        if cdi.get("regenerated"):
            changes.append("CDI spec")
        if cdi.get("refresh_units"):
            changes.append("CDI refresh units: " + ", ".join(cdi["refresh_units"]))
    elif stage == "mig":
        if _changed(results.get("result")):
            changes.append("MIG %s" % results.get("config_name"))
        if _changed(results.get("absent_result")):
            changes.append("MIG off")
    else:
        raise ValueError("stage_changes knows the stages driver, container_toolkit and mig, not %r" % (stage,))
    return changes


def record(name: str, facts: dict, failed: bool = False) -> dict:
    """One node's summary record from its host facts."""
    report = facts.get("gpuops_nvidia") or {}
    own = facts.get("gpuops_gpu_report") or {}
    verdict = own.get("verdict") or report.get("verdict") or {}
    driver_result = facts.get("driver_result") or {}
    toolkit = facts.get("container_toolkit_result") or {}
    driver = driver_result.get("installed_version") or (report.get("driver") or {}).get("version")
    driver_state = driver_result.get("state") or ("loaded" if (report.get("driver") or {}).get("loaded") else None)
    return {
        "node": name,
        "failed": bool(failed),
        "verdict": verdict.get("status"),
        "verdict_text": verdict.get("text"),
        "driver": driver,
        "driver_state": driver_state,
        "toolkit": toolkit.get("version"),
        "runtime": toolkit.get("runtime"),
        "changes": [change for key in CHANGES for change in facts.get(key) or []],
        # hardware changes the GPU report found (a GPU lost, swapped ...)
        "hardware": [change.get("message") for change in
                     own.get("inventory_changes") or report.get("inventory_changes") or []],
    }


def line(item: dict, node_width: int = 0) -> str:
    """'node-a  degraded  driver 580.95.05 (ready)  toolkit 1.18.0 containerd | changed ...', as one
    string (lines() wraps it)."""
    status = "FAILED" if item["failed"] else (item["verdict"] or "not reported")
    parts = [item["node"].ljust(node_width), status.ljust(12)]
    driver = item["driver"] or "none"
    parts.append("driver %s%s" % (driver, " (%s)" % item["driver_state"] if item["driver_state"] else ""))
    if item["toolkit"] or item["runtime"]:
        parts.append("toolkit %s%s" % (item["toolkit"] or "?", " %s" % item["runtime"] if item["runtime"] else ""))
    # (no ': ' in the line, so YAML-formatted job logs print it unquoted and unfolded)
    return "  ".join(parts) + (" | changed %s" % ", ".join(item["changes"]) if item["changes"] else " | no changes")


def _events(items: list) -> list:
    return ["%s: %s" % (item["node"], message) for item in items for message in item.get("hardware") or []]


def lines(records: list) -> list:
    """The summary: a line per node (failed and worst verdicts first), then each node's verdict text
    where it asks for action, then the totals."""
    order = {"rma": 0, "degraded": 1, "not_ready": 2, "attention": 3, "healthy": 4, None: 5}
    items = sorted(records, key=lambda r: (not r["failed"], order.get(r["verdict"], 5), r["node"]))
    out = []
    width = min(max([len(item["node"]) for item in items] or [0]), 32)
    for item in items:
        out += wrap(line(item, width), indent=" " * 6, first="")
    for item in items:
        if item["verdict"] not in (None, "healthy") and item["verdict_text"]:
            out += wrap("%s: %s" % (item["node"], item["verdict_text"]), indent=" " * 6, first="")
    for event in _events(items):
        out += wrap(event, indent=" " * 6, first="")
    counts = {}
    for item in items:
        key = "failed" if item["failed"] else (item["verdict"] or "not reported")
        counts[key] = counts.get(key, 0) + 1
    changed = sum(1 for item in items if item["changes"])
    out.append("%d node(s): %s; %d changed" % (len(items), ", ".join("%d %s" % (n, k) for k, n in sorted(counts.items())),
                                               changed))
    return out

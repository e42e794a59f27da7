# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpu_report's service: the node's GPU report (gpu_info's data, the verdict, one line per GPU)
and its GPU inventory record (report/inventory), read and written through host/records.

The record is read before anything else: a record that cannot be used (not a file, not UTF-8,
not JSON, not of the inventory's schema or shape) raises records.RecordError naming the file,
what is wrong with it and the fix, and nothing is written."""

from __future__ import annotations

__metaclass__ = type

import datetime
import os

from ansible_collections.gpuops.nvidia.plugins.module_utils.host import files
from ansible_collections.gpuops.nvidia.plugins.module_utils.host import records
from ansible_collections.gpuops.nvidia.plugins.module_utils.report import findings
from ansible_collections.gpuops.nvidia.plugins.module_utils.report import gpu_facts
from ansible_collections.gpuops.nvidia.plugins.module_utils.report import health
from ansible_collections.gpuops.nvidia.plugins.module_utils.report import inventory
from ansible_collections.gpuops.nvidia.plugins.module_utils.report import lines

WHAT = "GPU inventory record"


def read_inventory(path: str) -> tuple:
    """(text, record) of the GPU inventory record at path; (None, None) when there is none."""
    text, record = records.read(path, dict, WHAT)
    try:
        inventory.previous_gpus(record)
    except inventory.RecordError as exc:
        raise records.RecordError("cannot read the %s %s: %s" % (WHAT, path, exc))
    return text, record


def now() -> str:
    return datetime.datetime.now(datetime.timezone.utc).strftime("%Y-%m-%dT%H:%M:%SZ")


def boot_id(host_root: str) -> str | None:
    text = files.read_text(os.path.join(host_root, "proc/sys/kernel/random/boot_id"))
    return text.strip() if text else None


def missing_update(info: dict, record: dict) -> dict:
    """What the GPUs the record knows and NVML no longer lists at all change in gpu_info's data:
    each an error finding with the identity the record kept ({} when there is none, or when the
    driver is not loaded and NVML lists nothing)."""
    missing = [entry for entry in record["gpus"] if entry.get("state") == "missing"]
    if not missing or not info["driver"].get("loaded"):
        return {}
    items = findings.ordered(info["health"] + health.missing_findings(record))
    summary = health.summarize(items)
    return {"health": items, "healthy": summary["healthy"], "health_counts": summary["counts"], "missing_gpus": missing}


def as_facts(info: dict, verdict: dict, changes: list) -> dict:
    return {
        "gpuops_nvidia": dict(info, verdict=verdict, inventory_changes=changes),
        # the report's own verdict and changes, which a later gpu_info (node labels, the
        # validation) that refreshes gpuops_nvidia leaves alone
        "gpuops_gpu_report": {"verdict": verdict, "inventory_changes": changes}}


def report(module, params: dict) -> dict:
    """gpu_report's result (params: its options); the record written when it changed (not in check
    mode). Raises records.RecordError when the record cannot be used."""
    path = params["path"] or ""
    before, previous = read_inventory(path) if path else (None, None)
    info = gpu_facts.gather(host_root=params["host_root"], xid_wait_ms=params["xid_wait_ms"],
                            kernel_log=params["kernel_log"])
    result = dict(info, changed=False, changes=[], record=None)
    known = inventory.identities(None, info["gpus"])
    if path:
        record, events = inventory.merge(previous, info, host=params["host"] or os.uname()[1], now=now(),
                                         boot_id=boot_id(params["host_root"]))
        known = inventory.identities(record, info["gpus"])
        update = missing_update(info, record)
        info.update(update)
        result.update(update, record=record, changes=events)
        if previous is None or record["updated"] != previous.get("updated"):
            records.write(module, result, path, WHAT, before, records.dumps(record))
    result["verdict"] = health.verdict(info["health"], known)
    result["lines"] = lines.lines(info, result["verdict"], result["changes"], known)
    if params["as_facts"]:
        result["ansible_facts"] = as_facts(info, result["verdict"], result["changes"])
    return result

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Assemble what gpu_info reports: NVML's snapshot, the kernel module as loaded, XIDs from the
kernel log, and the health findings over all of it."""

from __future__ import annotations

__metaclass__ = type

from ansible_collections.gpuops.nvidia.plugins.module_utils.host import pci
from ansible_collections.gpuops.nvidia.plugins.module_utils.report import findings as fnd
from ansible_collections.gpuops.nvidia.plugins.module_utils.report import health
from ansible_collections.gpuops.nvidia.plugins.module_utils.host import kernel
from ansible_collections.gpuops.nvidia.plugins.module_utils.nvml import adapter as nvml


def merge_kernel_xids(gpus: list, records: list) -> list:
    """Attach kernel-log XID records to GPUs by PCI bus id; return the records no GPU claims
    (a lost GPU that NVML no longer lists, say)."""
    by_bus = {(gpu.get("pci") or {}).get("bus_id"): gpu for gpu in gpus}
    orphans = []
    for record in records:
        gpu = by_bus.get(record["bus_id"])
        if gpu is None:
            orphans.append(record)
        elif record["xid"] not in gpu["xids"]:
            gpu["xids"].append(record["xid"])
    return orphans


def explain_unloaded_driver(driver: dict) -> None:
    """Some NVML releases answer a missing kernel module with a generic error (Debian 13's
    550 library says "Unknown Error" where 535 says "Driver Not Loaded"). When NVML fails for
    no specific reason and no NVIDIA kernel module is loaded, that is the reason."""
    if (not driver["loaded"] and driver["reason"] == "nvml_error"
            and not driver["kernel_module"]["loaded"]):
        driver["reason"] = "driver_not_loaded"
        driver["message"] = "%s (no NVIDIA kernel module is loaded)" % driver["message"]


def gather(host_root: str = "/", xid_wait_ms: int = 0, kernel_log: bool = True) -> dict:
    """Everything gpu_info returns, as plain data."""
    node = nvml.read_node(xid_wait_ms=xid_wait_ms)
    driver = node["driver"]
    driver["kernel_module"] = kernel.loaded_module(host_root)
    explain_unloaded_driver(driver)
    log_status = {"read": False, "error": "not requested"}
    unclaimed = []
    if kernel_log:
        lines, error = kernel.read_kmsg(host_root)
        log_status = {"read": error is None, "error": error}
        unclaimed = merge_kernel_xids(node["gpus"], kernel.parse_xid_records(lines))
    findings = health.node_findings(driver, node["gpus"])
    for record in unclaimed:
        findings.append(fnd.finding(
            "xid", "error",
            "the kernel logged XID %d for PCI device %s, which NVML does not list" % (record["xid"], record["bus_id"]),
            "the GPU may have fallen off the bus; drain and reboot the node",
            subject=record["bus_id"], gpu=None, uuid=None, xid=record["xid"], bus_id=record["bus_id"]))
    findings = fnd.ordered(findings)
    summary = health.summarize(findings)
    identities = {gpu.get("index"): {"serial": gpu.get("serial"), "uuid": gpu.get("uuid")}
                  for gpu in node["gpus"] if not gpu.get("lost")}
    return {
        "driver": driver,
        "gpu_count": len(node["gpus"]),
        "gpus": node["gpus"],
        "topology": node["topology"],
        "health": findings,
        "healthy": summary["healthy"],
        "health_counts": summary["counts"],
        # without the inventory record, a lost GPU's serial is unknown here (gpu_report knows it)
        "verdict": health.verdict(findings, identities),
        "kernel_log": log_status,
        # what the PCI bus shows, with or without a driver (lspci's view)
        "pci": pci.nvidia_devices(host_root),
    }

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Health findings for a GPU node, computed from a gpu_info snapshot. Pure functions.

Findings have the collection's one shape (module_utils/findings.py: code, severity, message,
fix, subject), plus gpu (index, or None for the node) and uuid."""

from __future__ import annotations

__metaclass__ = type

from ansible_collections.gpuops.nvidia.plugins.module_utils import findings as fnd

# XID meanings from NVIDIA's XID catalogue (the ones seen on datacenter fleets), and whether the
# XID means the GPU needs attention before it takes work again.
XID_CATALOG = {
    13: ("graphics engine exception", False, "usually an application fault; check the job's logs"),
    31: ("GPU memory page fault", False, "usually an application fault; check the job's logs"),
    43: ("GPU stopped processing", False, "usually an application fault; the GPU recovers"),
    45: ("preemptive cleanup after a fault", False, "follows other XIDs; look at the earlier one"),
    48: ("double-bit ECC error (DBE)", True, "drain the node and reset the GPU; replace it if DBEs recur"),
    61: ("internal micro-controller breakpoint", True, "reset the GPU; report to NVIDIA if it recurs"),
    62: ("internal micro-controller halt", True, "reset the GPU; report to NVIDIA if it recurs"),
    63: ("ECC page retirement or row remap recorded", False, "a GPU reset applies the remap; watch the count"),
    64: ("ECC page retirement or row remap recording failed", True, "drain the node; the GPU needs an RMA"),
    74: ("NVLink error", True, "check NVLink state and the fabric manager; reset the GPU"),
    79: ("GPU has fallen off the bus", True, "drain and reboot the node; check power, seating and PCIe"),
    92: ("high single-bit ECC error rate", False, "watch ECC counters; plan a replacement if it grows"),
    94: ("contained ECC error", True, "restart the affected application; reset the GPU when drained"),
    95: ("uncontained ECC error", True, "drain the node and reset the GPU"),
    109: ("context switch timeout", False, "usually an application fault; check the job's logs"),
    119: ("GSP RPC timeout", True, "drain the node and reset the GPU; update the driver if it recurs"),
    120: ("GSP error", True, "drain the node and reset the GPU; update the driver if it recurs"),
}

_THROTTLE_FINDINGS = {
    "hw_slowdown": ("throttle_hw_slowdown", "warning",
                    "hardware slowdown is active (clocks cut by half or more)",
                    "check power supply and cooling; HW slowdown signals an external condition"),
    "hw_thermal_slowdown": ("throttle_thermal", "warning",
                            "hardware thermal slowdown is active",
                            "check airflow, fans and inlet temperature of the node"),
    "sw_thermal_slowdown": ("throttle_thermal", "warning",
                            "software thermal slowdown is active (GPU or memory too hot)",
                            "check airflow and cooling; compare temperature with the slowdown threshold"),
    "hw_power_brake_slowdown": ("throttle_power_brake", "warning",
                                "hardware power brake slowdown is active",
                                "check the chassis power supply; the power brake is asserted externally"),
    "sw_power_cap": ("throttle_power_cap", "info",
                     "clocks are capped by the power limit",
                     "normal under heavy load; raise the power limit only if the hardware allows it"),
}


def _finding(code: str, severity: str, gpu: dict | None, message: str, fix: str, **extra) -> dict:
    return fnd.finding(code, severity, message, fix, subject=fnd.gpu_subject(gpu),
                       gpu=gpu.get("index") if gpu else None, uuid=gpu.get("uuid") if gpu else None, **extra)


def _label(gpu: dict) -> str:
    return "GPU %s (%s, %s)" % (gpu.get("index"), gpu.get("name") or "unknown model",
                                (gpu.get("pci") or {}).get("bus_id") or "unknown bus id")


def _pcie_findings(gpu: dict) -> list:
    pcie = gpu.get("pcie") or {}
    found = []
    width, width_max = pcie.get("width_current"), pcie.get("width_max")
    gen, gen_max = pcie.get("gen_current"), pcie.get("gen_max")
    idle = "gpu_idle" in (gpu.get("clock_event_reasons") or [])
    if width is not None and width_max and width < width_max:
        found.append(_finding(
            "pcie_link_degraded", "warning", gpu,
            "%s runs its PCIe link at x%s Gen%s, below its maximum x%s Gen%s"
            % (_label(gpu), width, gen, width_max, gen_max),
            "reseat the GPU or riser and check the slot; a narrow link cuts host-to-GPU bandwidth",
            current={"gen": gen, "width": width}, maximum={"gen": gen_max, "width": width_max}))
    elif gen is not None and gen_max and gen < gen_max and not idle:
        # Links train down to a lower generation while a GPU idles to save power; only a busy
        # GPU on a slower link is a finding.
        found.append(_finding(
            "pcie_link_degraded", "warning", gpu,
            "%s is busy but its PCIe link runs at Gen%s, below its maximum Gen%s"
            % (_label(gpu), gen, gen_max),
            "check BIOS PCIe settings, risers and retimers for the slot",
            current={"gen": gen, "width": width}, maximum={"gen": gen_max, "width": width_max}))
    return found


def _ecc_findings(gpu: dict) -> list:
    ecc = gpu.get("ecc") or {}
    found = []
    volatile = (ecc.get("volatile") or {}).get("uncorrected") or 0
    aggregate = (ecc.get("aggregate") or {}).get("uncorrected") or 0
    if volatile:
        found.append(_finding(
            "ecc_uncorrectable", "error", gpu,
            "%s has %d uncorrectable ECC errors since the last driver load (%d in its lifetime)"
            % (_label(gpu), volatile, aggregate),
            "drain the node, reset the GPU and check row remapping; replace the GPU if errors recur",
            volatile=volatile, aggregate=aggregate))
    elif aggregate:
        found.append(_finding(
            "ecc_uncorrectable_history", "info", gpu,
            "%s has %d uncorrectable ECC errors in its lifetime, none since the last driver load"
            % (_label(gpu), aggregate),
            "no action now; track the lifetime count in fleet reports",
            aggregate=aggregate))
    return found


def _remap_findings(gpu: dict) -> list:
    rows = gpu.get("remapped_rows") or {}
    if rows.get("failure"):
        return [_finding(
            "row_remap_failure", "error", gpu,
            "%s failed to remap a memory row (%s uncorrectable remaps so far)"
            % (_label(gpu), rows.get("uncorrectable")),
            "drain the node: the GPU can no longer repair its memory and needs an RMA")]
    if rows.get("pending"):
        return [_finding(
            "row_remap_pending", "warning", gpu,
            "%s has a row remap pending that takes effect at the next GPU reset" % _label(gpu),
            "drain the node and reset the GPU (or reboot) to apply the remap")]
    return []


def _nvlink_findings(gpu: dict) -> list:
    links = (gpu.get("nvlink") or {}).get("links") or []
    down = [link["link"] for link in links if not link.get("active")]
    if links and down:
        return [_finding(
            "nvlink_down", "error", gpu,
            "%s has %d of %d NVLinks down (links %s)"
            % (_label(gpu), len(down), len(links), ", ".join(str(n) for n in down)),
            "check the fabric manager service and NVSwitch health; reset the GPU or reboot the node",
            links_down=down)]
    return []


def _xid_findings(gpu: dict) -> list:
    found = []
    for xid in sorted(set(gpu.get("xids") or [])):
        meaning, critical, fix = XID_CATALOG.get(
            xid, ("XID %d" % xid, True, "look the XID up in NVIDIA's XID catalogue"))
        found.append(_finding(
            "xid", "error" if critical else "warning", gpu,
            "%s reported XID %d: %s" % (_label(gpu), xid, meaning), fix, xid=xid))
    return found


def _throttle_findings(gpu: dict) -> list:
    found, seen = [], set()
    for reason in gpu.get("clock_event_reasons") or []:
        spec = _THROTTLE_FINDINGS.get(reason)
        if spec and spec[0] not in seen:
            seen.add(spec[0])
            code, severity, text, fix = spec
            found.append(_finding(code, severity, gpu, "%s: %s" % (_label(gpu), text), fix,
                                  reason=reason))
    return found


def gpu_findings(gpu: dict) -> list:
    """All findings for one GPU snapshot."""
    if gpu.get("lost"):
        return [_finding(
            "gpu_lost", "error", gpu,
            "%s is lost: the driver can no longer reach it" % _label(gpu),
            "drain the node and reboot it; if the GPU stays lost, check power, seating and XID 79 "
            "in the kernel log")]
    found = []
    for check in (_pcie_findings, _xid_findings, _ecc_findings, _remap_findings,
                  _throttle_findings, _nvlink_findings):
        found.extend(check(gpu))
    return fnd.ordered(found)


def node_findings(driver: dict, gpus: list) -> list:
    """Findings for the whole node: driver state first, then every GPU."""
    found = []
    if not driver.get("loaded"):
        reason = driver.get("reason")
        fixes = {
            "library_not_found": ("the NVIDIA driver is not installed (libnvidia-ml.so.1 not found)",
                                  "install the driver with the gpuops.nvidia driver role"),
            "driver_not_loaded": ("the NVIDIA driver is installed but its kernel module is not loaded",
                                  "reboot the node (or load the module); check dmesg and Secure Boot "
                                  "if it still does not load"),
            "version_mismatch": ("the loaded kernel module and the installed NVML library are "
                                 "different driver versions",
                                 "reboot the node so the newly installed driver module loads"),
        }
        message, fix = fixes.get(reason, ("NVML could not be initialised: %s" % driver.get("message"),
                                          "check the driver installation and dmesg"))
        found.append(_finding(reason or "nvml_unavailable", "error", None, message, fix))
    for gpu in gpus:
        found.extend(gpu_findings(gpu))
    return found


def summarize(items: list) -> dict:
    """Counts by severity, and whether the node is healthy (no errors or warnings)."""
    found = fnd.summary(items)
    return {"healthy": found["healthy"], "counts": found["counts"]}

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Health findings for a GPU node, computed from a gpu_info snapshot. Pure functions.

Findings have the collection's one shape (module_utils/report/findings.py: code, severity, message,
fix, subject), plus gpu (index, or None for the node) and uuid."""

from __future__ import annotations

__metaclass__ = type

from ansible_collections.gpuops.nvidia.plugins.module_utils.report import findings as fnd

# XID meanings from NVIDIA's XID catalogue (the ones seen on datacenter fleets), and whether the
# XID means the GPU needs attention before it takes work again.
XID_CATALOG = {
    8: ("GPU stopped processing (channel idle timeout)", False, "restart the application; report it if it recurs"),
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
    109: ("context switch timeout", True, "reset the GPU once drained; report it if it recurs"),
    119: ("GSP RPC timeout", True, "drain the node and reset the GPU; update the driver if it recurs"),
    120: ("GSP error", True, "drain the node and reset the GPU; update the driver if it recurs"),
}

# What each failure calls for on a node (the alerts' and the remediation planner's action class),
# mildest first. NVIDIA's XID catalogue ("Analyzing Xid Errors with the Xid Catalog",
# docs.nvidia.com/deploy/xid-errors/analyzing-xid-catalog.html, column "Resolution Bucket
# (Immediate Action)") gives each XID its automatable action: RESTART_APP -> restart-workload,
# RESET_GPU -> gpu-reset, RESTART_BM (restart bare metal) -> node-reboot, IGNORE -> none. Where the
# catalogue names a workflow, the collection takes its first step: WORKFLOW_XID_48 (solo: RESET_GPU),
# WORKFLOW_NVLINK_ERR (a GPU reset), WORKFLOW_XID_45 (follow the other XID: none). XID 64 (row remap
# failure: RESET_GPU, then CONTACT_SUPPORT) is quarantined instead: NVIDIA's "RMA Policy Thresholds
# for Row Remapping" makes a remapping failure an RMA criterion. XID 154 names its own recovery
# action in its message, which DCGM_FI_DEV_XID_ERRORS does not carry: it has no alert.
# quarantine is this collection's name for "take the node out and open an RMA".
ACTIONS = ("none", "restart-workload", "gpu-reset", "node-reboot", "quarantine")
XID_ACTIONS = {
    8: "restart-workload", 13: "restart-workload", 31: "restart-workload", 43: "none", 45: "none",
    48: "gpu-reset", 62: "gpu-reset", 63: "none", 64: "quarantine", 74: "gpu-reset", 79: "node-reboot",
    92: "none", 94: "restart-workload", 95: "gpu-reset", 109: "gpu-reset", 119: "gpu-reset", 120: "gpu-reset",
}
FINDING_ACTIONS = {
    "ecc_uncorrectable": "gpu-reset", "row_remap_pending": "gpu-reset", "nvlink_down": "gpu-reset",
    "row_remap_failure": "quarantine", "gpu_lost": "node-reboot", "gpu_missing": "node-reboot",
    "pcie_link_degraded": "none", "throttle_thermal": "none", "throttle_hw_slowdown": "none",
    "throttle_power_brake": "none", "throttle_power_cap": "none", "ecc_uncorrectable_history": "none",
}


def action_of(code: str, xid=None) -> str:
    """The action class of a finding (of an XID's, when xid is given): the XID's own bucket first,
    else the finding's, else none. Raises ValueError for an XID the table does not know."""
    if xid is not None:
        xid = int(xid)
        if xid not in XID_ACTIONS:
            raise ValueError("XID %d has no action class; look it up in NVIDIA's XID catalogue" % xid)
        return XID_ACTIONS[xid]
    return FINDING_ACTIONS.get(code, "none")


_THROTTLE_FINDINGS = {
    "hw_slowdown": ("throttle_hw_slowdown", "warning",
                    "hardware slowdown is active (clocks cut by half or more)",
                    "check power supply and cooling; HW slowdown signals an external condition"),
    "hw_thermal_slowdown": ("throttle_thermal", "warning",
                            "hardware thermal slowdown is active",
                            "check airflow, fans and inlet temperature of the node"),
    "sw_thermal_slowdown": ("throttle_thermal", "warning",
                            "software thermal slowdown is active (GPU or memory too hot)",
                            "check airflow, fans and inlet temperature of the node"),
    "hw_power_brake_slowdown": ("throttle_power_brake", "warning",
                                "hardware power brake slowdown is active",
                                "check the chassis power supply; the power brake is asserted externally"),
    "sw_power_cap": ("throttle_power_cap", "info",
                     "clocks are capped by the power limit",
                     "normal under heavy load; raise the power limit only if the hardware allows it"),
}
# what to do about each slowdown finding (the alert rules' descriptions)
SLOWDOWN_FIXES = {code: fix for code, _severity, _message, fix in _THROTTLE_FINDINGS.values()}

# XIDs that are the driver's report of an event an NVML reading also shows: one event, one finding
# (NVIDIA, "GPU Memory Error Management": XID 48 is an uncorrectable (double-bit) ECC error, 94 and
# 95 contained and uncontained ECC errors, 63 and 64 a row remap recorded and failing to record;
# XID 74 an NVLink error; XID 79 a GPU fallen off the bus, which NVML then reports as lost).
XID_EVENTS = {48: "ecc_uncorrectable", 94: "ecc_uncorrectable", 95: "ecc_uncorrectable",
              63: "row_remap_pending", 64: "row_remap_failure", 74: "nvlink_down", 79: "gpu_lost"}

# Where each finding's evidence comes from.
SOURCES = {
    "pcie_link_degraded": "NVML PCIe link state",
    "xid": "the driver's XID report (kernel log or NVML events)",
    "ecc_uncorrectable": "NVML ECC counters",
    "ecc_uncorrectable_history": "NVML ECC counters",
    "row_remap_failure": "NVML remapped rows",
    "row_remap_pending": "NVML remapped rows",
    "nvlink_down": "NVML NVLink state",
    "gpu_lost": "NVML (GPU is lost)",
    "gpu_missing": "the inventory record (NVML no longer lists the GPU)",
}

# A few words per finding, for the node's verdict line.
SHORT = {
    "ecc_uncorrectable": "uncorrectable ECC",
    "ecc_uncorrectable_history": "past uncorrectable ECC",
    "row_remap_failure": "row-remap failure",
    "row_remap_pending": "row remap pending",
    "gpu_lost": "lost",
    "gpu_missing": "missing",
    "nvlink_down": "NVLink down",
    "pcie_link_degraded": "PCIe link degraded",
    "throttle_thermal": "thermal slowdown",
    "throttle_hw_slowdown": "HW slowdown",
    "throttle_power_brake": "power brake",
    "throttle_power_cap": "power capped",
}

# Findings that mean the GPU itself must be replaced (NVIDIA, "RMA Policy Thresholds for Row
# Remapping": a row-remapping failure is an RMA criterion; XID 64 is the driver's report of one).
RMA_CODES = ("row_remap_failure",)
RMA_XIDS = (64,)
# A GPU lost (XID 79, NVML: GPU is lost) or missing from NVML: the node is drained and rebooted
# first, because a reboot often brings it back; one still gone after a reboot is hardware (RMA).
GONE_CODES = ("gpu_lost", "gpu_missing")


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


def _temperature_text(gpu: dict) -> str:
    """'88 C (max operating 87 C, HW slowdown at 89 C, shutdown at 92 C)', as far as known."""
    temperature = gpu.get("temperature_c")
    if temperature is None:
        return ""
    limits = gpu.get("temperature_limits_c") or {}
    known = [("max operating", limits.get("gpu_max")), ("HW slowdown at", limits.get("slowdown")),
             ("shutdown at", limits.get("shutdown"))]
    text = "%s C" % temperature
    named = ["%s %s C" % (name, value) for name, value in known if value]
    if named:
        text += " (%s)" % ", ".join(named)
    else:
        text += " (the GPU reports no slowdown threshold)"
    return text


def _power_text(gpu: dict) -> str:
    power = gpu.get("power") or {}
    if power.get("draw_w") is None:
        return ""
    if power.get("limit_w"):
        return "drawing %s W of a %s W cap" % (_number(power["draw_w"]), _number(power["limit_w"]))
    return "drawing %s W" % _number(power["draw_w"])


def _clock_text(gpu: dict) -> str:
    clocks = gpu.get("clocks") or {}
    if clocks.get("sm_mhz") is None or not clocks.get("sm_max_mhz"):
        return ""
    return "SM clock %s of %s MHz" % (clocks["sm_mhz"], clocks["sm_max_mhz"])


def _number(value) -> str:
    return ("%d" % value) if float(value).is_integer() else ("%.1f" % value)


def _throttle_findings(gpu: dict) -> list:
    """Clock event reasons, each with the readings that explain it: temperature against the GPU's
    own limits, power against its cap, the SM clock against its maximum."""
    found, seen = [], set()
    readings = {"temperature": _temperature_text(gpu), "power": _power_text(gpu), "clock": _clock_text(gpu)}
    numbers = {"throttle_thermal": ["temperature", "clock"], "throttle_hw_slowdown": ["temperature", "power", "clock"],
               "throttle_power_brake": ["power", "clock"], "throttle_power_cap": ["power", "clock"]}
    limits = gpu.get("temperature_limits_c") or {}
    for reason in gpu.get("clock_event_reasons") or []:
        spec = _THROTTLE_FINDINGS.get(reason)
        if spec and spec[0] not in seen:
            seen.add(spec[0])
            code, severity, text, fix = spec
            shown = [readings[name] for name in numbers[code] if readings[name]]
            message = "%s: %s" % (_label(gpu), text) + ("; %s" % "; ".join(shown) if shown else "")
            if code == "throttle_thermal":
                fix = fix + "; the GPU slows down at its max operating temperature and stops at shutdown"
            found.append(_finding(code, severity, gpu, message, fix, reason=reason,
                                  temperature_c=gpu.get("temperature_c"),
                                  slowdown_c=limits.get("slowdown"), gpu_max_c=limits.get("gpu_max"),
                                  power_w=(gpu.get("power") or {}).get("draw_w"),
                                  power_limit_w=(gpu.get("power") or {}).get("limit_w")))
    return found


def _merge_events(found: list) -> list:
    """One event, one finding: an XID that reports what an NVML reading shows too (XID 48 and the
    uncorrectable ECC counters) is folded into that reading's finding, which then names both
    sources; an XID with no such finding stays a finding of its own."""
    by_code = {}
    for item in found:
        by_code.setdefault(item["code"], item)
    merged = []
    for item in found:
        target = by_code.get(XID_EVENTS.get(item.get("xid"))) if item["code"] == "xid" else None
        if target is None:
            merged.append(item)
            continue
        meaning = XID_CATALOG.get(item["xid"], ("XID %d" % item["xid"],))[0]
        target["xids"] = sorted(set(target.get("xids", [])) | {item["xid"]})
        target["sources"] = target["sources"] + ["XID %d (%s)" % (item["xid"], meaning)]
        target["message"] += "; the driver reported it as XID %d (%s)" % (item["xid"], meaning)
        if fnd.SEVERITY_ORDER[item["severity"]] < fnd.SEVERITY_ORDER[target["severity"]]:
            target["severity"] = item["severity"]
    return merged


def _with_source(item: dict) -> dict:
    item.setdefault("sources", [SOURCES.get(item["code"], "NVML clock event reasons")])
    return item


def gpu_findings(gpu: dict) -> list:
    """All findings for one GPU snapshot, related ones merged, errors first."""
    if gpu.get("lost"):
        why = ("NVML answers %s for it" % gpu["error"]) if gpu.get("error") else "the driver can no longer reach it"
        found = [_finding(
            "gpu_lost", "error", gpu,
            "%s is lost: %s" % (_label(gpu), why),
            "drain the node and reboot it; if the GPU stays lost, check power, seating and XID 79 "
            "in the kernel log, and RMA it")]
        found += _xid_findings(gpu)
    else:
        found = []
        for check in (_pcie_findings, _xid_findings, _ecc_findings, _remap_findings,
                      _throttle_findings, _nvlink_findings):
            found.extend(check(gpu))
    return fnd.ordered(_merge_events([_with_source(item) for item in found]))


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


def missing_findings(record: dict | None) -> list:
    """Errors for the GPUs the inventory record knows that NVML no longer lists at all (state
    "missing": gone from the bus, or hidden from the driver), with the identity the record kept."""
    found = []
    for entry in (record or {}).get("gpus") or []:
        if entry.get("state") != "missing":
            continue
        gpu = {"index": entry.get("index"), "uuid": entry.get("uuid"), "name": entry.get("name"),
               "pci": {"bus_id": entry.get("slot")}}
        found.append(_with_source(_finding(
            "gpu_missing", "error", gpu,
            "%s is missing: NVML no longer lists it (serial %s, last seen %s)"
            % (_label(gpu), entry.get("serial") or "unknown", entry.get("last_seen") or "unknown"),
            "drain the node and reboot it; if the GPU stays missing, check lspci, power and seating "
            "and the kernel log for XID 79, and RMA it")))
    return found


def summarize(items: list) -> dict:
    """Counts by severity, and whether the node is healthy (no errors or warnings)."""
    found = fnd.summary(items)
    return {"healthy": found["healthy"], "counts": found["counts"]}


# ---- the node's verdict ------------------------------------------------------------------------
# From worst to best. rma: a GPU must be replaced; degraded: drain the node and investigate (an
# error finding); not_ready: the node cannot use its GPUs yet (the driver); attention: the node
# works, a warning wants a look; healthy.
VERDICTS = ("rma", "degraded", "not_ready", "attention", "healthy")


def _short(item: dict) -> str:
    if item["code"] == "xid":
        return "XID %s" % item.get("xid")
    return SHORT.get(item["code"], item["code"].replace("_", " "))


def _needs_rma(item: dict, identities: dict) -> bool:
    if item["code"] in GONE_CODES:
        return bool((identities.get(item.get("gpu")) or {}).get("lost_after_reboot"))
    return item["code"] in RMA_CODES or (item["code"] == "xid" and item.get("xid") in RMA_XIDS)


def _by_subject(items: list) -> list:
    """[(subject, [short reason, ...])] in the findings' order, one entry per subject."""
    grouped = {}
    for item in items:
        reasons = grouped.setdefault(item.get("subject", "node"), [])
        if _short(item) not in reasons:
            reasons.append(_short(item))
    return list(grouped.items())


def _gone_details(known: dict, reasons: list) -> list:
    details = []
    if known.get("serial"):
        details.append("serial %s" % known["serial"])
    gone = [reason for reason in reasons if reason in ("lost", "missing")]
    if gone:
        if known.get("last_seen"):
            details.append("last seen %s" % known["last_seen"])
        details.append("still %s after a reboot" % gone[0] if known.get("lost_after_reboot")
                       else "%s; RMA if it stays %s after the reboot" % (gone[0], gone[0]))
    details.extend(reason for reason in reasons if reason not in ("lost", "missing"))
    return details


def _entries(items: list, identities: dict) -> str:
    gpu_of = {item.get("subject"): item.get("gpu") for item in items}
    return ", ".join("%s (%s)" % (subject, ", ".join(_gone_details(identities.get(gpu_of[subject]) or {}, reasons)))
                     for subject, reasons in _by_subject(items))


def verdict(items: list, identities: dict | None = None) -> dict:
    """The node's verdict from its findings: the status (VERDICTS), one line an on-call engineer
    acts on ('degraded: drain and investigate GPU 2 (uncorrectable ECC)', 'RMA GPU 7 (serial ...)'),
    and the GPUs concerned. identities: GPU index -> what the inventory record knows of it (serial,
    last_seen, lost_after_reboot), for GPUs NVML no longer describes. A GPU lost or missing is a
    reboot first (degraded) and an RMA once it is still gone after a reboot."""
    identities = identities or {}
    errors = [item for item in items if item["severity"] == "error"]
    warnings = [item for item in items if item["severity"] == "warning"]
    rma_subjects = {item.get("subject") for item in errors if _needs_rma(item, identities)}
    # a GPU to replace (or to reboot for) takes its other errors into its entry
    rma = [item for item in errors if item.get("subject") in rma_subjects]
    rma.sort(key=lambda item: not _needs_rma(item, identities))
    gone_subjects = {item.get("subject") for item in errors
                     if item["code"] in GONE_CODES and item.get("subject") not in rma_subjects}
    gone = [item for item in errors if item.get("subject") in gone_subjects]
    gone.sort(key=lambda item: item["code"] not in GONE_CODES)
    gpu_errors = [item for item in errors if item.get("subject") not in rma_subjects | gone_subjects
                  and item.get("subject") != "node"]
    node_errors = [item for item in errors if item.get("subject") == "node"]
    parts = []
    if rma:
        parts.append("RMA " + _entries(rma, identities))
    if gone:
        parts.append("drain the node and reboot it for " + _entries(gone, identities))
    if gpu_errors:
        parts.append("drain and investigate " + ", ".join(
            "%s (%s)" % (subject, ", ".join(reasons)) for subject, reasons in _by_subject(gpu_errors)))
    if node_errors:
        parts.append("; ".join(item["fix"] for item in node_errors))
    if warnings:
        parts.append("check " + ", ".join(
            "%s (%s)" % (subject, ", ".join(reasons)) for subject, reasons in _by_subject(warnings)))
    if rma:
        status = "rma"
    elif gone or gpu_errors:
        status = "degraded"
    elif node_errors:
        status = "not_ready"
    elif warnings:
        status = "attention"
    else:
        status = "healthy"
    if status == "healthy":
        text = "healthy"
    elif status == "rma":
        text = "; ".join(parts)
    else:
        text = "%s: %s" % (status.replace("_", " "), "; ".join(parts))
    concerned = sorted({item["gpu"] for item in errors + warnings if item.get("gpu") is not None})
    return {"status": status, "text": text, "gpus": concerned}

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the kernel says about the NVIDIA driver, read from files (no NVML needed):
the loaded module's version and flavour (open or proprietary) from procfs/sysfs, and XID
records from the kernel log. Parsers are pure; readers take a root directory so tests can
point them at a prepared tree."""

from __future__ import annotations

import errno
import os
import re

__metaclass__ = type

from ansible_collections.gpuops.nvidia.plugins.module_utils.gpu.model import normalize_bus_id

PROC_VERSION = "proc/driver/nvidia/version"
PROC_STATUS = "proc/self/status"
MODULES_DISABLED = "proc/sys/kernel/modules_disabled"
CAP_SYS_MODULE = 16
SYS_MODULE_VERSION = "sys/module/nvidia/version"
KMSG = "dev/kmsg"

_NVRM_RE = re.compile(r"NVRM version:\s*(?P<text>.*?)\s+(?P<version>\d+\.\d+(?:\.\d+)?)\s")
_XID_RE = re.compile(r"NVRM: Xid \(PCI:(?P<bus>[0-9a-fA-F:.]+)\): (?P<xid>\d+)\b(?P<rest>.*)")


def parse_proc_version(text: str) -> dict:
    """Parse /proc/driver/nvidia/version.

    Open modules say 'NVIDIA UNIX Open Kernel Module for x86_64  570.172.08 ...', proprietary
    ones 'NVIDIA UNIX x86_64 Kernel Module  535.183.01 ...'."""
    match = _NVRM_RE.search(text)
    if not match:
        return {"version": None, "flavour": None}
    flavour = "open" if "Open Kernel Module" in match.group("text") else "proprietary"
    return {"version": match.group("version"), "flavour": flavour}


def _read(path: str) -> str | None:
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def loaded_module(root: str = "/") -> dict:
    """The NVIDIA kernel module as loaded now: version, flavour and where that was read.

    Returns version/flavour None when no module is loaded (or the files are not readable)."""
    info = {"loaded": False, "version": None, "flavour": None, "source": None}
    proc_text = _read(os.path.join(root, PROC_VERSION))
    if proc_text:
        info.update(parse_proc_version(proc_text))
        info["source"] = "/" + PROC_VERSION
    sys_text = _read(os.path.join(root, SYS_MODULE_VERSION))
    if sys_text and sys_text.strip():
        info["version"] = info["version"] or sys_text.strip()
        info["source"] = info["source"] or "/" + SYS_MODULE_VERSION
    info["loaded"] = info["version"] is not None
    return info


def parse_capabilities(status_text: str | None) -> int | None:
    """The effective capability set (CapEff) from /proc/<pid>/status text, or None."""
    match = re.search(r"^CapEff:\s*([0-9a-fA-F]+)\s*$", status_text or "", re.M)
    return int(match.group(1), 16) if match else None


def module_loading(root: str = "/") -> dict:
    """Whether this host can load kernel modules, and why not: {'possible', 'reason'}.
    Module loading needs CAP_SYS_MODULE (containers run without it) and is off for good once
    /proc/sys/kernel/modules_disabled is 1."""
    if (_read(os.path.join(root, MODULES_DISABLED)) or "").strip() == "1":
        return {"possible": False, "reason": "loading kernel modules is disabled (/proc/sys/kernel/modules_disabled is 1)"}
    caps = parse_capabilities(_read(os.path.join(root, PROC_STATUS)))
    if caps is not None and not caps & (1 << CAP_SYS_MODULE):
        return {"possible": False, "reason": "this host may not load kernel modules (no CAP_SYS_MODULE: a container?)"}
    return {"possible": True, "reason": None}


def parse_xid_records(lines) -> list:
    """XID records from kernel log lines (kmsg records or dmesg text).

    Returns [{'bus_id': NVML-style id, 'xid': int, 'detail': str}] in log order."""
    records = []
    for line in lines:
        match = _XID_RE.search(line)
        if not match:
            continue
        try:
            bus_id = normalize_bus_id(match.group("bus"))
        except (ValueError, IndexError):
            continue
        records.append({"bus_id": bus_id, "xid": int(match.group("xid")),
                        "detail": match.group("rest").lstrip(", ").strip()})
    return records


def read_kmsg(root: str = "/", limit: int = 100000) -> tuple:
    """Read the kernel ring buffer without blocking. Returns (lines, error or None).

    /dev/kmsg hands out every record still in the buffer to each new reader; reading stops at
    EAGAIN (no more records). Unreadable (no permission, no /dev/kmsg in a container) is not an
    error of the caller's: the reason is returned instead."""
    path = os.path.join(root, KMSG)
    try:
        fd = os.open(path, os.O_RDONLY | os.O_NONBLOCK)
    except OSError as exc:
        return [], "%s: %s" % ("/" + KMSG, exc.strerror)
    lines = []
    try:
        while len(lines) < limit:
            try:
                data = os.read(fd, 8192)
            except OSError as exc:
                if exc.errno == errno.EAGAIN:
                    break
                if exc.errno == errno.EPIPE:  # record overwritten while reading: go on
                    continue
                return lines, "%s: %s" % ("/" + KMSG, exc.strerror)
            if not data:
                break
            lines.append(data.decode("utf-8", errors="replace"))
    finally:
        os.close(fd)
    text = "".join(lines)
    return text.splitlines(), None

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a host's files say about its readiness for an NVIDIA driver: OS release, running
kernel and its headers, Secure Boot, nouveau, a runfile-installed driver, free disk space.
Every reader takes a root directory (tests point it at a prepared tree) and only reads."""

from __future__ import annotations

import glob
import os
import re

__metaclass__ = type

SECURE_BOOT_VAR = "sys/firmware/efi/efivars/SecureBoot-8be4df61-93ca-11d2-aa0d-00e098032b8c"
RUNFILE_MARKERS = ("usr/bin/nvidia-uninstall", "var/log/nvidia-installer.log", "usr/bin/nvidia-installer")


def _read(root: str, rel: str) -> str | None:
    try:
        with open(os.path.join(root, rel), encoding="utf-8", errors="replace") as handle:
            return handle.read()
    except OSError:
        return None


def parse_os_release(text: str) -> dict:
    values = {}
    for line in (text or "").splitlines():
        match = re.match(r'^([A-Z_]+)=(.*)$', line.strip())
        if match:
            values[match.group(1)] = match.group(2).strip().strip('"').strip("'")
    return {
        "id": values.get("ID", "").lower(),
        "id_like": values.get("ID_LIKE", "").lower().split(),
        "version_id": values.get("VERSION_ID", ""),
        "codename": values.get("VERSION_CODENAME", ""),
        "pretty_name": values.get("PRETTY_NAME", ""),
    }


def os_release(root: str = "/") -> dict:
    return parse_os_release(_read(root, "etc/os-release") or _read(root, "usr/lib/os-release") or "")


def kernel(root: str = "/", release: str | None = None) -> dict:
    """The running kernel (release given, or from /proc) and whether its headers are there."""
    if release is None:
        release = (_read(root, "proc/sys/kernel/osrelease") or "").strip() or os.uname().release
    build = os.path.join(root, "lib/modules", release, "build")
    return {"release": release, "headers": os.path.isdir(build)}


def secure_boot(root: str = "/") -> bool | None:
    """True/False from the SecureBoot EFI variable; None on a host without EFI variables."""
    try:
        with open(os.path.join(root, SECURE_BOOT_VAR), "rb") as handle:
            data = handle.read()
    except OSError:
        return None if not os.path.isdir(os.path.join(root, "sys/firmware/efi")) else False
    return bool(data) and data[-1] == 1


def modprobe_blacklists(root: str = "/") -> set:
    """Module names blacklisted in modprobe.d configuration."""
    names = set()
    for pattern in ("etc/modprobe.d/*.conf", "usr/lib/modprobe.d/*.conf", "lib/modprobe.d/*.conf"):
        for path in sorted(glob.glob(os.path.join(root, pattern))):
            for line in (_read(root, os.path.relpath(path, root)) or "").splitlines():
                parts = line.split("#", 1)[0].split()
                if len(parts) >= 2 and parts[0] == "blacklist":
                    names.add(parts[1])
    return names


def module_loaded(root: str, name: str) -> bool:
    return os.path.isdir(os.path.join(root, "sys/module", name))


def runfile_install(root: str = "/") -> str | None:
    """Path of a marker left by NVIDIA's .run installer, or None."""
    for rel in RUNFILE_MARKERS:
        if os.path.exists(os.path.join(root, rel)):
            return "/" + rel
    return None


def free_mib(root: str = "/", path: str = "/") -> int | None:
    """Free space (MiB) for unprivileged use at path, following it up to an existing parent."""
    target = os.path.join(root, path.lstrip("/"))
    while not os.path.exists(target) and target not in ("", "/"):
        target = os.path.dirname(target)
    try:
        stat = os.statvfs(target)
    except OSError:
        return None
    return stat.f_bavail * stat.f_frsize // (1024 * 1024)


def gather(root: str = "/", kernel_release: str | None = None) -> dict:
    """All of the above, as plain data."""
    blacklisted = modprobe_blacklists(root)
    return {
        "os": os_release(root),
        "kernel": kernel(root, kernel_release),
        "secure_boot": secure_boot(root),
        "nouveau": {"loaded": module_loaded(root, "nouveau"), "blacklisted": "nouveau" in blacklisted},
        "runfile_install": runfile_install(root),
        "free_mib": {"/usr": free_mib(root, "/usr"), "/var": free_mib(root, "/var")},
    }

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Installed versus loaded NVIDIA driver: parsers for package-manager and DKMS output, and
the pure decision of what state the host is in and whether it needs a reboot."""

from __future__ import annotations

import re

__metaclass__ = type

# Packages whose version is the driver's version, most telling first.
DRIVER_PACKAGE_PATTERNS = (
    r"^nvidia-driver(-\d+)?(-open)?$",
    r"^nvidia-headless-\d+(-server)?(-open)?$",
    r"^cuda-drivers(-\d+)?$",
    r"^nvidia-open(-\d+)?$",
    r"^libnvidia-ml1$",
    r"^libnvidia-compute-\d+(-server)?$",
    r"^nvidia-driver-cuda$",
    r"^kmod-nvidia.*$",
)
# Driver packages: not the container toolkit's (nvidia-container-*, libnvidia-container*).
RELATED_PACKAGES = r"^(nvidia-(?!container)|libnvidia-(?!container)|cuda-drivers|xserver-xorg-video-nvidia|firmware-nvidia|kmod-nvidia)"

DPKG_FORMAT = "${Package}\\t${Version}\\t${db:Status-Abbrev}\\n"
RPM_FORMAT = "%{NAME}\\t%{VERSION}-%{RELEASE}\\tii\\n"


def upstream_version(package_version: str) -> str | None:
    """'535.216.01-1~deb12u1' -> '535.216.01'; '1:580.95.05-1ubuntu1' -> '580.95.05'."""
    match = re.match(r"^(?:\d+:)?(\d+\.\d+(?:\.\d+)?)", package_version or "")
    return match.group(1) if match else None


def parse_package_list(text: str) -> dict:
    """`dpkg-query -W -f=DPKG_FORMAT` (or rpm with RPM_FORMAT) output -> {name: version} of the
    installed NVIDIA driver packages (dpkg status 'ii' or 'hi' = installed)."""
    found = {}
    for line in (text or "").splitlines():
        parts = line.split("\t")
        if len(parts) < 3:
            continue
        name = parts[0].split(":")[0]  # ${binary:Package} carries ':amd64'
        if re.match(RELATED_PACKAGES, name) and parts[2].strip()[:2] in ("ii", "hi"):
            found[name] = parts[1]
    return found


def parse_held(text: str) -> list:
    """NVIDIA package names from `apt-mark showhold` (one name a line) or `dnf versionlock
    list` ('nvidia-driver-3:580.95.05-1.el9.*')."""
    names = set()
    for line in (text or "").splitlines():
        entry = line.strip()
        match = re.match(r"^(.+?)-(?:\d+:)?\d[^-]*-[^-]+$", entry)
        name = match.group(1) if match else entry
        if re.match(RELATED_PACKAGES, name):
            names.add(name)
    return sorted(names)


def installed_driver_version(packages: dict) -> tuple:
    """(version, package it came from) of the installed driver, or (None, None)."""
    for pattern in DRIVER_PACKAGE_PATTERNS:
        for name in sorted(packages):
            if re.match(pattern, name):
                version = upstream_version(packages[name])
                if version:
                    return version, name
    return None, None


def parse_dkms_status(text: str) -> list:
    """`dkms status` lines -> [{module, version, kernel, state}]. Handles both the old
    'nvidia, 535.216.01, 6.1.0-28-amd64, x86_64: installed' and the new
    'nvidia-current/535.216.01, 6.1.0-28-amd64, x86_64: installed' forms; 'added' lines have
    no kernel."""
    entries = []
    for line in (text or "").splitlines():
        if ":" not in line:
            continue
        head, state = line.rsplit(":", 1)
        fields = [f.strip() for f in head.split(",")]
        if "/" in fields[0]:
            module, version = fields[0].split("/", 1)
            rest = fields[1:]
        elif len(fields) >= 2:
            module, version, rest = fields[0], fields[1], fields[2:]
        else:
            continue
        if "nvidia" not in module:
            continue
        entries.append({"module": module, "version": version, "kernel": rest[0] if rest else None,
                        "state": state.strip().split()[0] if state.strip() else None})
    return entries


def decide(installed: str | None, loaded: str | None, container: bool) -> dict:
    """The host's driver state and what it takes to get the installed driver running."""
    if installed is None and loaded is None:
        state, reboot, why = "not_installed", False, "no NVIDIA driver is installed"
    elif installed is None:
        state, reboot, why = "loaded_unmanaged", False, (
            "driver %s is loaded but no driver package is installed (a .run install?)" % loaded)
    elif loaded is None:
        state, reboot, why = "installed_not_loaded", True, (
            "driver %s is installed but its kernel module is not loaded" % installed)
    elif loaded != installed:
        state, reboot, why = "loaded_outdated", True, (
            "driver %s is installed but %s is still loaded" % (installed, loaded))
    else:
        state, reboot, why = "ready", False, "driver %s is installed and loaded" % installed
    can_load = not container
    if reboot and not can_load:
        why += "; this host is a container, which cannot load kernel modules: the state stays as it is"
    return {"state": state, "reboot_required": reboot and can_load, "can_load_module": can_load,
            "message": why}

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Installed versus loaded NVIDIA driver: the package database (dpkg's through
module_utils/apt/packages, the one reader of it; rpm's through a command) and the DKMS tree read
under a root directory (tests point it at a prepared tree), pure parsers of them, and the pure
decision of what state the host is in and whether it needs a reboot."""

from __future__ import annotations

import os
import re

__metaclass__ = type

from ansible_collections.gpuops.nvidia.plugins.module_utils.apt import packages as dpkg

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

DPKG_STATUS = dpkg.STATUS
DKMS_TREE = "var/lib/dkms"
RPM_FORMAT = "%{NAME}\\t%{VERSION}-%{RELEASE}\\tii\\n"


def upstream_version(package_version: str) -> str | None:
    """'535.216.01-1~deb12u1' -> '535.216.01'; '1:580.95.05-1ubuntu1' -> '580.95.05'."""
    match = re.match(r"^(?:\d+:)?(\d+\.\d+(?:\.\d+)?)", package_version or "")
    return match.group(1) if match else None


def parse_dpkg_status(text: str) -> dict:
    """dpkg's status database -> {package: {'version', 'installed', 'held'}} for every package
    dpkg knows (module_utils/apt/packages parses it)."""
    return dpkg.parse(text)


def read_dpkg_status(root: str = "/") -> dict | None:
    """root's dpkg database as module_utils/apt/packages reads it; None when the host has no
    dpkg database."""
    return dpkg.read(root)


def driver_packages(status: dict) -> tuple:
    """({name: version} of the installed NVIDIA driver packages, [held driver packages])."""
    installed = {name: version for name, version in dpkg.versions(status).items()
                 if re.match(RELATED_PACKAGES, name)}
    return installed, sorted(set(installed) & dpkg.holds(status))


def read_installed(root: str = "/", run=None) -> tuple:
    """({name: version}, [held]) of the NVIDIA driver packages installed under root: dpkg's
    database, else rpm's through run(argv) -> stdout text (rpm and dnf with --root/--installroot).
    """
    status = read_dpkg_status(root)
    if status is not None:
        return driver_packages(status)
    if run is None:
        return {}, []
    packages = parse_package_list(run(["rpm", "--root", root, "-qa", "--qf", RPM_FORMAT]))
    return packages, parse_held(run(["dnf", "--installroot", root, "versionlock", "list"]))


def read_dkms_tree(root: str = "/") -> list:
    """The NVIDIA modules DKMS knows, from its tree (var/lib/dkms/MODULE/VERSION/...), as
    `dkms status` would list them: [{module, version, kernel, state}] with state 'added'
    (source registered), 'built' or 'installed' (the MODULE/kernel-KERNEL-ARCH link exists)."""
    base = os.path.join(root, DKMS_TREE)
    entries = []
    for module in sorted(os.listdir(base)) if os.path.isdir(base) else []:
        if "nvidia" not in module or not os.path.isdir(os.path.join(base, module)):
            continue
        installed = {}
        for name in os.listdir(os.path.join(base, module)):
            link = os.path.join(base, module, name)
            if name.startswith("kernel-") and os.path.islink(link):
                installed[os.path.normpath(os.readlink(link))] = True
        for version in sorted(os.listdir(os.path.join(base, module))):
            vdir = os.path.join(base, module, version)
            if version.startswith("kernel-") or not os.path.isdir(vdir) or os.path.islink(vdir):
                continue
            kernels = [k for k in sorted(os.listdir(vdir)) if k != "source" and os.path.isdir(os.path.join(vdir, k))]
            if not kernels:
                entries.append({"module": module, "version": version, "kernel": None, "state": "added"})
            for kernel in kernels:
                arches = sorted(os.listdir(os.path.join(vdir, kernel))) or [None]
                state = "installed" if any(os.path.normpath(os.path.join(version, kernel, arch or "")) in installed
                                           for arch in arches) else "built"
                entries.append({"module": module, "version": version, "kernel": kernel, "state": state})
    return entries


def parse_package_list(text: str) -> dict:
    """`rpm -qa --qf RPM_FORMAT` output -> {name: version} of the installed NVIDIA driver
    packages."""
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
    """NVIDIA package names from `dnf versionlock list` ('nvidia-driver-3:580.95.05-1.el9.*')."""
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


def decide(installed: str | None, loaded: str | None, can_load: bool = True, why_not: str | None = None) -> dict:
    """The host's driver state and what it takes to get the installed driver running. A host
    that cannot load kernel modules (why_not says why) never needs a reboot for it."""
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
    if reboot and not can_load:
        why += "; %s, so a reboot would not load it: the state stays as it is" % (why_not or "this host cannot load kernel modules")
    return {"state": state, "reboot_required": reboot and can_load, "can_load_module": can_load,
            "message": why}

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVIDIA devices as the PCI bus shows them, without any NVIDIA driver: GPUs and NVSwitches
from sysfs, their names from the host's pci.ids, and the GPU architecture from the PCI device
id. Readers take a root directory so tests can point them at a prepared tree."""

from __future__ import annotations

import os

__metaclass__ = type

NVIDIA_VENDOR = 0x10DE
GPU_CLASSES = (0x0300, 0x0302)  # VGA compatible controller, 3D controller
BRIDGE_OTHER_CLASS = 0x0680     # NVSwitches enumerate as "bridge: other"
PCI_IDS_PATHS = ("usr/share/misc/pci.ids", "usr/share/hwdata/pci.ids", "usr/share/pci.ids")

# PCI device id ranges of NVIDIA GPU chips -> architecture (from the chips' published ids).
_DEVICE_RANGES = (
    (0x0FC0, 0x102F, "kepler"), (0x1180, 0x12FF, "kepler"),
    (0x1340, 0x13FF, "maxwell"), (0x1400, 0x17FF, "maxwell"),
    (0x15F0, 0x15FF, "pascal"), (0x1B00, 0x1D7F, "pascal"),
    (0x1D80, 0x1DFF, "volta"),
    (0x1E00, 0x1FFF, "turing"), (0x2180, 0x21FF, "turing"),
    (0x2080, 0x20FF, "ampere"), (0x2200, 0x25FF, "ampere"),
    (0x2300, 0x23FF, "hopper"),
    (0x2600, 0x28FF, "ada"),
    (0x2900, 0x2FFF, "blackwell"),
)


def architecture_from_device_id(device_id: int) -> str:
    """Architecture of an NVIDIA GPU from its 16-bit PCI device id ('unknown' if unlisted).
    Narrow ranges are listed before the wide ones that contain them."""
    for low, high, arch in sorted(_DEVICE_RANGES, key=lambda r: r[1] - r[0]):
        if low <= device_id <= high:
            return arch
    return "unknown"


def parse_pci_ids(text: str, vendor: int = NVIDIA_VENDOR) -> dict:
    """Device and subsystem names of one vendor from pci.ids text.

    Returns {'devices': {device_id: name}, 'subsystems': {(device_id, subvendor, subdevice): name}}."""
    devices, subsystems = {}, {}
    in_vendor, device = False, None
    for line in text.splitlines():
        if not line or line.startswith("#"):
            continue
        if not line.startswith("\t"):
            if line.startswith("C "):
                break  # device classes follow the vendor list
            in_vendor = line[:4].lower() == "%04x" % vendor
            device = None
            continue
        if not in_vendor:
            continue
        if line.startswith("\t\t") and device is not None:
            parts = line.strip().split(None, 2)
            if len(parts) == 3:
                subsystems[(device, int(parts[0], 16), int(parts[1], 16))] = parts[2]
        else:
            parts = line.strip().split(None, 1)
            if len(parts) == 2:
                device = int(parts[0], 16)
                devices[device] = parts[1]
    return {"devices": devices, "subsystems": subsystems}


def _read_hex(path: str) -> int | None:
    try:
        with open(path, encoding="ascii") as handle:
            return int(handle.read().strip(), 16)
    except (OSError, ValueError):
        return None


def load_pci_ids(root: str = "/") -> dict:
    for rel in PCI_IDS_PATHS:
        path = os.path.join(root, rel)
        if os.path.exists(path):
            with open(path, encoding="utf-8", errors="replace") as handle:
                return parse_pci_ids(handle.read())
    return {"devices": {}, "subsystems": {}}


def nvidia_devices(root: str = "/") -> dict:
    """NVIDIA GPUs and NVSwitches in /sys/bus/pci/devices.

    Returns {'gpus': [...], 'nvswitches': [...]}, each entry with bus_id, device_id, name,
    architecture (GPUs), driver (the kernel driver bound now, e.g. nvidia, nouveau, vfio-pci)."""
    base = os.path.join(root, "sys/bus/pci/devices")
    names = load_pci_ids(root)
    found = {"gpus": [], "nvswitches": []}
    try:
        entries = sorted(os.listdir(base))
    except OSError:
        return found
    for bus_id in entries:
        path = os.path.join(base, bus_id)
        if _read_hex(os.path.join(path, "vendor")) != NVIDIA_VENDOR:
            continue
        device = _read_hex(os.path.join(path, "device"))
        pci_class = _read_hex(os.path.join(path, "class"))
        if device is None or pci_class is None:
            continue
        sub_vendor = _read_hex(os.path.join(path, "subsystem_vendor"))
        sub_device = _read_hex(os.path.join(path, "subsystem_device"))
        driver_link = os.path.join(path, "driver")
        driver = os.path.basename(os.readlink(driver_link)) if os.path.islink(driver_link) else None
        name = names["subsystems"].get((device, sub_vendor, sub_device)) or names["devices"].get(device)
        entry = {"bus_id": bus_id, "device_id": "0x%04x" % device, "name": name, "driver": driver}
        if (pci_class >> 8) in GPU_CLASSES:
            entry["architecture"] = architecture_from_device_id(device)
            found["gpus"].append(entry)
        elif (pci_class >> 8) == BRIDGE_OTHER_CLASS:
            found["nvswitches"].append(entry)
    return found

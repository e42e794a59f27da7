# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Plain facts about NVIDIA GPUs: architectures, NVML enums turned into names, and the
vocabulary used in gpu_info results. Pure data and pure functions: no NVML, no I/O."""

from __future__ import annotations

__metaclass__ = type

# NVML's nvmlDeviceArchitecture_t values.
NVML_ARCHITECTURES = {
    2: "kepler",
    3: "maxwell",
    4: "pascal",
    5: "volta",
    6: "turing",
    7: "ampere",
    8: "ada",
    9: "hopper",
    10: "blackwell",
    13: "rubin",
}

# (major, minor) compute capability -> architecture. Minor versions not listed fall back to
# the major version's entry.
_CC_EXACT = {
    (7, 0): "volta",
    (7, 2): "volta",
    (7, 5): "turing",
    (8, 9): "ada",
}
_CC_MAJOR = {
    3: "kepler",
    5: "maxwell",
    6: "pascal",
    7: "volta",
    8: "ampere",
    9: "hopper",
    10: "blackwell",
    11: "blackwell",
    12: "blackwell",
}

# Clock event ("throttle") reason bits, nvmlClocksEventReason*.
CLOCK_EVENT_REASONS = (
    (0x1, "gpu_idle"),
    (0x2, "applications_clocks_setting"),
    (0x4, "sw_power_cap"),
    (0x8, "hw_slowdown"),
    (0x10, "sync_boost"),
    (0x20, "sw_thermal_slowdown"),
    (0x40, "hw_thermal_slowdown"),
    (0x80, "hw_power_brake_slowdown"),
    (0x100, "display_clock_setting"),
)

# nvmlGpuTopologyLevel_t -> the short names `nvidia-smi topo -m` prints, and a description.
TOPOLOGY_LEVELS = {
    0: ("BOARD", "on the same board"),
    10: ("PIX", "through a single PCIe switch"),
    20: ("PXB", "through several PCIe switches, without a host bridge"),
    30: ("PHB", "through a PCIe host bridge"),
    40: ("NODE", "across host bridges within one NUMA node"),
    50: ("SYS", "across the SMP interconnect between CPU sockets"),
}

NVLINK_REMOTE_TYPES = {0: "gpu", 1: "ibm_npu", 2: "nvswitch", 0xFF: "unknown"}


def architecture_from_compute_capability(major: int, minor: int) -> str:
    """Return the architecture name for a CUDA compute capability, or 'unknown'."""
    if (major, minor) in _CC_EXACT:
        return _CC_EXACT[(major, minor)]
    return _CC_MAJOR.get(major, "unknown")


def architecture_name(nvml_arch: int | None, major: int | None, minor: int | None) -> str:
    """Prefer the compute capability (always reported) over NVML's architecture enum, which
    older drivers do not know for newer GPUs."""
    if major is not None and minor is not None:
        name = architecture_from_compute_capability(major, minor)
        if name != "unknown":
            return name
    return NVML_ARCHITECTURES.get(nvml_arch, "unknown") if nvml_arch is not None else "unknown"


def clock_event_reason_names(mask: int) -> list:
    """Decode an nvmlClocksEventReason bit mask into names (unknown bits as hex)."""
    names = [name for bit, name in CLOCK_EVENT_REASONS if mask & bit]
    known = 0
    for bit, _name in CLOCK_EVENT_REASONS:
        known |= bit
    rest = mask & ~known
    if rest:
        names.append("unknown_0x%x" % rest)
    return names


def topology_path(level: int | None, nvlink: bool) -> dict:
    """Describe how two GPUs are connected, like a cell of `nvidia-smi topo -m`."""
    short, text = TOPOLOGY_LEVELS.get(level, ("X", "unknown")) if level is not None else ("X", "unknown")
    return {
        "pcie": short,
        "nvlink": nvlink,
        "description": ("NVLink; PCIe %s" % text) if nvlink else "PCIe %s" % text,
    }


def mib(num_bytes: int | None) -> int | None:
    """Bytes to MiB, as nvidia-smi shows memory."""
    return None if num_bytes is None else int(num_bytes // (1024 * 1024))


def normalize_bus_id(bus_id: str) -> str:
    """Normalize PCI bus ids to NVML's form: 8-digit domain, lower-case, function included.
    Accepts '0000:18:00.0', '00000000:18:00.0', '18:00.0' and '0000:18:00' (kernel log form)."""
    text = bus_id.strip().lower()
    parts = text.split(":")
    if len(parts) == 2:
        parts.insert(0, "0")
    domain, bus, devfn = parts[-3], parts[-2], parts[-1]
    if "." not in devfn:
        devfn += ".0"
    dev, fn = devfn.split(".", 1)
    return "%08x:%02x:%02x.%x" % (int(domain, 16), int(bus, 16), int(dev, 16), int(fn, 16))

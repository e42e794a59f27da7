# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils.gpu import model as gpu_model


@pytest.mark.parametrize("major, minor, arch", [
    (3, 7, "kepler"), (5, 2, "maxwell"), (6, 0, "pascal"), (7, 0, "volta"), (7, 2, "volta"),
    (7, 5, "turing"), (8, 0, "ampere"), (8, 6, "ampere"), (8, 7, "ampere"), (8, 9, "ada"),
    (9, 0, "hopper"), (10, 0, "blackwell"), (12, 0, "blackwell"), (2, 1, "unknown"),
])
def test_architecture_from_compute_capability(major, minor, arch):
    assert gpu_model.architecture_from_compute_capability(major, minor) == arch


@pytest.mark.parametrize("nvml_arch, major, minor, arch", [
    (9, 9, 0, "hopper"),
    (0xFFFFFFFF, 10, 0, "blackwell"),   # old driver, new GPU: compute capability wins
    (7, None, None, "ampere"),          # no compute capability: NVML's enum
    (None, None, None, "unknown"),
    (42, None, None, "unknown"),
])
def test_architecture_name(nvml_arch, major, minor, arch):
    assert gpu_model.architecture_name(nvml_arch, major, minor) == arch


@pytest.mark.parametrize("mask, names", [
    (0, []),
    (0x1, ["gpu_idle"]),
    (0x4 | 0x20, ["sw_power_cap", "sw_thermal_slowdown"]),
    (0x8 | 0x40 | 0x80, ["hw_slowdown", "hw_thermal_slowdown", "hw_power_brake_slowdown"]),
    (0x1000 | 0x1, ["gpu_idle", "unknown_0x1000"]),
])
def test_clock_event_reason_names(mask, names):
    assert gpu_model.clock_event_reason_names(mask) == names


@pytest.mark.parametrize("level, nvlink, pcie, text", [
    (10, False, "PIX", "PCIe through a single PCIe switch"),
    (50, True, "SYS", "NVLink; PCIe across the SMP interconnect between CPU sockets"),
    (None, False, "X", "PCIe unknown"),
])
def test_topology_path(level, nvlink, pcie, text):
    assert gpu_model.topology_path(level, nvlink) == {"pcie": pcie, "nvlink": nvlink, "description": text}


@pytest.mark.parametrize("raw, normal", [
    ("00000000:18:00.0", "00000000:18:00.0"),
    ("0000:3B:00.0", "00000000:3b:00.0"),
    ("0000:3b:00", "00000000:3b:00.0"),
    ("18:00.1", "00000000:18:00.1"),
])
def test_normalize_bus_id(raw, normal):
    assert gpu_model.normalize_bus_id(raw) == normal


def test_mib():
    assert gpu_model.mib(85520809984) == 81559
    assert gpu_model.mib(None) is None

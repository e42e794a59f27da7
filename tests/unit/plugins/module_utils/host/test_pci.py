# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import os

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils.host import pci

PCI_IDS = """# sample of the pci.ids format
10de  NVIDIA Corporation
\t1db1  GV100GL [Tesla V100 SXM2 16GB]
\t20b0  GA100 [A100 SXM4 40GB]
\t22a3  GH100 [H100 NVSwitch]
\t2330  GH100 [H100 SXM5 80GB]
\t\t10de 16c1  H100 SXM5 80GB HBM3
\t26b9  AD102GL [L40S]
10df  Emulex Corporation
\t2330  Not an NVIDIA device
C 03  Display controller
"""


def test_parse_pci_ids():
    names = pci.parse_pci_ids(PCI_IDS)
    assert names["devices"][0x2330] == "GH100 [H100 SXM5 80GB]"
    assert names["devices"][0x26b9] == "AD102GL [L40S]"
    assert names["subsystems"][(0x2330, 0x10de, 0x16c1)] == "H100 SXM5 80GB HBM3"
    assert len(names["devices"]) == 5


@pytest.mark.parametrize("device, arch", [
    (0x1024, "kepler"), (0x13f2, "maxwell"), (0x15f8, "pascal"), (0x1b38, "pascal"), (0x1db1, "volta"),
    (0x1eb8, "turing"), (0x20b0, "ampere"), (0x2236, "ampere"), (0x2330, "hopper"), (0x2335, "hopper"),
    (0x26b9, "ada"), (0x2901, "blackwell"), (0x0001, "unknown"),
])
def test_architecture_from_device_id(device, arch):
    assert pci.architecture_from_device_id(device) == arch


def make_device(root, bus_id, device, pci_class, driver=None, subsystem=(0x10de, 0x16c1), vendor=0x10de):
    path = os.path.join(root, "sys/bus/pci/devices", bus_id)
    os.makedirs(path)
    for name, value in (("vendor", vendor), ("device", device), ("class", pci_class),
                        ("subsystem_vendor", subsystem[0]), ("subsystem_device", subsystem[1])):
        with open(os.path.join(path, name), "w") as handle:
            handle.write("0x%04x\n" % value)
    if driver:
        os.makedirs(os.path.join(root, "sys/bus/pci/drivers", driver), exist_ok=True)
        os.symlink(os.path.join(root, "sys/bus/pci/drivers", driver), os.path.join(path, "driver"))


def test_nvidia_devices(tmp_path):
    root = str(tmp_path)
    os.makedirs(os.path.join(root, "usr/share/misc"))
    with open(os.path.join(root, "usr/share/misc/pci.ids"), "w") as handle:
        handle.write(PCI_IDS)
    make_device(root, "0000:18:00.0", 0x2330, 0x030200, driver="nouveau")
    make_device(root, "0000:2a:00.0", 0x2330, 0x030200, subsystem=(0x10de, 0x0000))
    make_device(root, "0000:05:00.0", 0x22a3, 0x068000)
    make_device(root, "0000:00:02.0", 0x1234, 0x030000, vendor=0x8086)  # not NVIDIA
    found = pci.nvidia_devices(root)
    assert found["gpus"] == [
        {"bus_id": "0000:18:00.0", "device_id": "0x2330", "name": "H100 SXM5 80GB HBM3",
         "driver": "nouveau", "architecture": "hopper"},
        {"bus_id": "0000:2a:00.0", "device_id": "0x2330", "name": "GH100 [H100 SXM5 80GB]",
         "driver": None, "architecture": "hopper"},
    ]
    assert found["nvswitches"] == [{"bus_id": "0000:05:00.0", "device_id": "0x22a3",
                                    "name": "GH100 [H100 NVSwitch]", "driver": None}]


def test_no_pci_bus(tmp_path):
    assert pci.nvidia_devices(str(tmp_path)) == {"gpus": [], "nvswitches": []}

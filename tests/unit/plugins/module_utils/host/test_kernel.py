# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils.host import kernel

OPEN = ("NVRM version: NVIDIA UNIX Open Kernel Module for x86_64  570.172.08  Release Build  "
        "(dvs-builder@U16-I3-B03-4-3)  Wed Jul  2 14:39:51 UTC 2025\n"
        "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")
PROPRIETARY = ("NVRM version: NVIDIA UNIX x86_64 Kernel Module  535.183.01  Sun May 12 19:39:15 UTC 2024\n"
               "GCC version:  gcc version 12.2.0 (Debian 12.2.0-14)\n")


@pytest.mark.parametrize("text, version, flavour", [
    (OPEN, "570.172.08", "open"),
    (PROPRIETARY, "535.183.01", "proprietary"),
    ("garbage", None, None),
    ("", None, None),
])
def test_parse_proc_version(text, version, flavour):
    assert kernel.parse_proc_version(text) == {"version": version, "flavour": flavour}


def _tree(tmp_path, files):
    for rel, content in files.items():
        path = tmp_path / rel
        path.parent.mkdir(parents=True, exist_ok=True)
        path.write_text(content)
    return str(tmp_path)


def test_loaded_module_from_proc(tmp_path):
    root = _tree(tmp_path, {kernel.PROC_VERSION: OPEN, kernel.SYS_MODULE_VERSION: "570.172.08\n"})
    assert kernel.loaded_module(root) == {
        "loaded": True, "version": "570.172.08", "flavour": "open",
        "source": "/proc/driver/nvidia/version"}


def test_loaded_module_from_sysfs_only(tmp_path):
    root = _tree(tmp_path, {kernel.SYS_MODULE_VERSION: "535.183.01\n"})
    assert kernel.loaded_module(root) == {
        "loaded": True, "version": "535.183.01", "flavour": None,
        "source": "/sys/module/nvidia/version"}


def test_loaded_module_absent(tmp_path):
    assert kernel.loaded_module(str(tmp_path)) == {
        "loaded": False, "version": None, "flavour": None, "source": None}


KMSG = [
    "6,1021,5123456789,-;nvidia-nvlink: Nvlink Core is being initialized",
    "4,1187,9123456789,-;NVRM: Xid (PCI:0000:3b:00): 79, pid='<unknown>', name=<unknown>, GPU has fallen off the bus.",
    "[ 1234.567890] NVRM: Xid (PCI:0000:18:00): 48, pid=2213, name=python3, "
    "An uncorrectable double bit error (DBE) has been detected on GPU in the framebuffer.",
    "4,1190,9123457000,-;NVRM: GPU at PCI:0000:3b:00: GPU-5f2d1c3e-8a7b-4c21-9d0e-1f2a3b4c5d6e",
]


def test_parse_xid_records():
    records = kernel.parse_xid_records(KMSG)
    assert [(r["bus_id"], r["xid"]) for r in records] == [
        ("00000000:3b:00.0", 79), ("00000000:18:00.0", 48)]
    assert records[0]["detail"].endswith("GPU has fallen off the bus.")


def test_read_kmsg_from_file(tmp_path):
    root = _tree(tmp_path, {kernel.KMSG: "\n".join(KMSG) + "\n"})
    lines, error = kernel.read_kmsg(root)
    assert error is None
    assert lines == KMSG


def test_read_kmsg_missing(tmp_path):
    lines, error = kernel.read_kmsg(str(tmp_path))
    assert lines == []
    assert "/dev/kmsg" in error

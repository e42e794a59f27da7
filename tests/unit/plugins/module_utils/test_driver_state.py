# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils import driver_state

DPKG = "\n".join([
    "adduser\t3.134\tii ",
    "libnvidia-ml1:amd64\t535.247.01-1~deb12u1\tii ",
    "libnvidia-ml1\t535.247.01-1~deb12u1\tii ",
    "nvidia-driver\t535.247.01-1~deb12u1\thi ",
    "nvidia-kernel-dkms\t535.247.01-1~deb12u1\tii ",
    "nvidia-legacy-check\t535.247.01-1~deb12u1\trc ",
    "python3-pynvml\t11.525.112-1\tii ",
])


def test_parse_package_list():
    assert driver_state.parse_package_list(DPKG) == {
        "libnvidia-ml1": "535.247.01-1~deb12u1", "nvidia-driver": "535.247.01-1~deb12u1",
        "nvidia-kernel-dkms": "535.247.01-1~deb12u1"}


@pytest.mark.parametrize("packages, version, source", [
    ({"nvidia-driver": "535.247.01-1~deb12u1", "libnvidia-ml1": "535.247.01-1~deb12u1"}, "535.247.01", "nvidia-driver"),
    ({"nvidia-driver-580-open": "580.95.05-0ubuntu1"}, "580.95.05", "nvidia-driver-580-open"),
    ({"nvidia-headless-570-server-open": "570.172.08-0ubuntu0.24.04.1"}, "570.172.08", "nvidia-headless-570-server-open"),
    ({"cuda-drivers-580": "580.65.06-1", "nvidia-fabricmanager-580": "580.65.06-1"}, "580.65.06", "cuda-drivers-580"),
    ({"libnvidia-ml1": "1:550.163.01-2"}, "550.163.01", "libnvidia-ml1"),
    ({"nvidia-fabricmanager-580": "580.65.06-1"}, None, None),
    ({}, None, None),
])
def test_installed_driver_version(packages, version, source):
    assert driver_state.installed_driver_version(packages) == (version, source)


def test_parse_held():
    assert driver_state.parse_held("nvidia-driver\nlibnvidia-ml1\nopenssl\n") == ["libnvidia-ml1", "nvidia-driver"]
    # the container toolkit's holds are not the driver's
    assert driver_state.parse_held("nvidia-container-toolkit\nlibnvidia-container1\nnvidia-open\n") == ["nvidia-open"]
    assert driver_state.parse_held("nvidia-driver-3:580.95.05-1.el9.*\nkernel-5.14.0-1.el9.*\n") == ["nvidia-driver"]


def test_parse_dkms_status():
    text = ("nvidia-current/535.247.01, 6.1.0-28-amd64, x86_64: installed\n"
            "nvidia, 470.256.02, 5.15.0-1-generic, x86_64: installed (WARNING! Diff between built and installed module!)\n"
            "nvidia-current/535.247.01: added\n"
            "zfs/2.1.11, 6.1.0-28-amd64, x86_64: installed\n")
    assert driver_state.parse_dkms_status(text) == [
        {"module": "nvidia-current", "version": "535.247.01", "kernel": "6.1.0-28-amd64", "state": "installed"},
        {"module": "nvidia", "version": "470.256.02", "kernel": "5.15.0-1-generic", "state": "installed"},
        {"module": "nvidia-current", "version": "535.247.01", "kernel": None, "state": "added"},
    ]


@pytest.mark.parametrize("installed, loaded, container, state, reboot", [
    (None, None, False, "not_installed", False),
    ("580.95.05", None, False, "installed_not_loaded", True),
    ("580.95.05", None, True, "installed_not_loaded", False),
    ("580.95.05", "570.172.08", False, "loaded_outdated", True),
    ("580.95.05", "580.95.05", False, "ready", False),
    (None, "570.172.08", False, "loaded_unmanaged", False),
])
def test_decide(installed, loaded, container, state, reboot):
    decision = driver_state.decide(installed, loaded, container)
    assert (decision["state"], decision["reboot_required"]) == (state, reboot)
    assert decision["can_load_module"] is not container
    if container and state == "installed_not_loaded":
        assert "container" in decision["message"]

# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils.host import driver_state

# A slice of a real dpkg status database (/var/lib/dpkg/status), with a held package, a
# removed-but-not-purged one ("deinstall ok config-files") and a multi-line field.
DPKG_STATUS = """Package: adduser
Status: install ok installed
Priority: important
Version: 3.134

Package: libnvidia-ml1
Status: install ok installed
Architecture: amd64
Version: 535.247.01-1~deb12u1
Description: NVIDIA Management Library (NVML) runtime library
 The NVIDIA Management Library (NVML) provides a monitoring and management API.
 .
 Status: this continuation line is no field

Package: nvidia-driver
Status: hold ok installed
Version: 535.247.01-1~deb12u1

Package: nvidia-kernel-dkms
Status: install ok installed
Version: 535.247.01-1~deb12u1

Package: nvidia-legacy-check
Status: deinstall ok config-files
Version: 535.247.01-1~deb12u1

Package: nvidia-container-toolkit
Status: hold ok installed
Version: 1.17.8-1

Package: python3-pynvml
Status: install ok installed
Version: 11.525.112-1
"""


def test_parse_dpkg_status():
    status = driver_state.parse_dpkg_status(DPKG_STATUS)
    assert status["nvidia-driver"] == {"version": "535.247.01-1~deb12u1", "installed": True, "held": True}
    assert status["nvidia-legacy-check"]["installed"] is False
    assert status["libnvidia-ml1"] == {"version": "535.247.01-1~deb12u1", "installed": True, "held": False}
    assert sorted(status) == ["adduser", "libnvidia-ml1", "nvidia-container-toolkit", "nvidia-driver",
                              "nvidia-kernel-dkms", "nvidia-legacy-check", "python3-pynvml"]


def test_read_installed_reads_the_database_under_the_root(tmp_path):
    (tmp_path / "var" / "lib" / "dpkg").mkdir(parents=True)
    (tmp_path / "var" / "lib" / "dpkg" / "status").write_text(DPKG_STATUS)

    def run(argv):
        raise AssertionError("a dpkg host needs no command: %s" % argv)
    packages, held = driver_state.read_installed(str(tmp_path), run)
    # the container toolkit and python3-pynvml are not driver packages
    assert packages == {"libnvidia-ml1": "535.247.01-1~deb12u1", "nvidia-driver": "535.247.01-1~deb12u1",
                        "nvidia-kernel-dkms": "535.247.01-1~deb12u1"}
    assert held == ["nvidia-driver"]


def test_read_installed_uses_rpm_with_the_root_elsewhere(tmp_path):
    calls = []

    def run(argv):
        calls.append(argv)
        return "nvidia-driver\t580.95.05-1.el9\tii\n" if argv[0] == "rpm" else "nvidia-driver-3:580.95.05-1.el9.*\n"
    assert driver_state.read_installed(str(tmp_path), run) == ({"nvidia-driver": "580.95.05-1.el9"}, ["nvidia-driver"])
    assert calls[0][:3] == ["rpm", "--root", str(tmp_path)] and calls[1][:3] == ["dnf", "--installroot", str(tmp_path)]


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
    # the container toolkit's locks are not the driver's
    assert driver_state.parse_held("nvidia-driver-3:580.95.05-1.el9.*\nkernel-5.14.0-1.el9.*\n"
                                   "nvidia-container-toolkit-0:1.17.8-1.*\n") == ["nvidia-driver"]


def test_read_dkms_tree(tmp_path):
    """The tree DKMS keeps: MODULE/VERSION/source, MODULE/VERSION/KERNEL/ARCH once built, and the
    MODULE/kernel-KERNEL-ARCH link once installed."""
    base = tmp_path / "var" / "lib" / "dkms"
    (base / "nvidia-current" / "535.247.01" / "source").mkdir(parents=True)
    (base / "nvidia-current" / "535.247.01" / "6.1.0-28-amd64" / "x86_64").mkdir(parents=True)
    (base / "nvidia-current" / "kernel-6.1.0-28-amd64-x86_64").symlink_to("535.247.01/6.1.0-28-amd64/x86_64")
    (base / "nvidia-current" / "535.247.01" / "6.1.0-30-amd64" / "x86_64").mkdir(parents=True)
    (base / "nvidia" / "580.95.05" / "source").mkdir(parents=True)
    (base / "zfs" / "2.1.11" / "6.1.0-28-amd64" / "x86_64").mkdir(parents=True)
    assert driver_state.read_dkms_tree(str(tmp_path)) == [
        {"module": "nvidia", "version": "580.95.05", "kernel": None, "state": "added"},
        {"module": "nvidia-current", "version": "535.247.01", "kernel": "6.1.0-28-amd64", "state": "installed"},
        {"module": "nvidia-current", "version": "535.247.01", "kernel": "6.1.0-30-amd64", "state": "built"},
    ]
    assert driver_state.read_dkms_tree(str(tmp_path / "nothing")) == []


@pytest.mark.parametrize("installed, loaded, can_load, state, reboot", [
    (None, None, True, "not_installed", False),
    ("580.95.05", None, True, "installed_not_loaded", True),
    ("580.95.05", None, False, "installed_not_loaded", False),
    ("580.95.05", "570.172.08", True, "loaded_outdated", True),
    ("580.95.05", "570.172.08", False, "loaded_outdated", False),
    ("580.95.05", "580.95.05", True, "ready", False),
    (None, "570.172.08", True, "loaded_unmanaged", False),
])
def test_decide(installed, loaded, can_load, state, reboot):
    decision = driver_state.decide(installed, loaded, can_load, None if can_load else "no CAP_SYS_MODULE")
    assert (decision["state"], decision["reboot_required"]) == (state, reboot)
    assert decision["can_load_module"] is can_load
    if not can_load and state in ("installed_not_loaded", "loaded_outdated"):
        assert decision["message"].endswith("; no CAP_SYS_MODULE, so a reboot would not load it: the state stays as it is")


def test_read_installed_reads_dpkgs_journal_too(tmp_path):
    """The one reader of dpkg's database (module_utils/apt/packages): an entry dpkg has not folded
    into its status file yet counts, as it does for dpkg-query."""
    dpkg = tmp_path / "var" / "lib" / "dpkg"
    (dpkg / "updates").mkdir(parents=True)
    (dpkg / "status").write_text(DPKG_STATUS)
    (dpkg / "updates" / "0000").write_text("Package: nvidia-driver\nStatus: install ok installed\n"
                                           "Version: 580.95.05-1\n")
    packages, held = driver_state.read_installed(str(tmp_path))
    assert packages["nvidia-driver"] == "580.95.05-1" and held == []
    assert driver_state.read_dpkg_status(str(tmp_path / "elsewhere")) is None

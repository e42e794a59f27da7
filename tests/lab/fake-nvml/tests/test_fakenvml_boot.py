"""The simulated node's boot and driver packages: the kernel module loaded at boot is the driver
installed then; a driver package installed since makes NVML answer "Driver/library version
mismatch" until the next boot, as NVIDIA documents for a new libnvidia-ml beside an old module."""

import os
import subprocess

import pynvml

from fakenvml_util import FAKE_DIR, nvml_raises

BOOT = FAKE_DIR / "debian" / "gpuops-fake-boot"


def marker(tmp_path, version):
    """What the lab CUDA-style repository's libnvidia-ml1 package installs."""
    (tmp_path / "libnvidia-ml1.txt").write_text(
        "package=libnvidia-ml1\nversion=%s-1\nupstream-version=%s\n" % (version, version))


def boot(tmp_path):
    """The node's boot unit, run as systemd runs it at boot."""
    env = dict(os.environ, GPUOPS_FAKE_NVML_BOOT=str(tmp_path / "run" / "boot"),
               GPUOPS_FAKE_NVML_LIBRARY=str(tmp_path / "libnvidia-ml1.txt"))
    subprocess.run(["sh", str(BOOT)], env=env, check=True)


def test_without_driver_packages_the_profiles_driver_is_loaded(nvml):
    n = nvml("hgx-h100")
    assert n.nvmlSystemGetDriverVersion() == "570.172.08"


def test_an_installed_driver_is_a_mismatch_until_the_next_boot(nvml, tmp_path, monkeypatch):
    marker(tmp_path, "580.95.05")
    with nvml_raises(pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH):
        nvml("hgx-h100")
    monkeypatch.setenv("GPUOPS_FAKE_NVML_BOOT", str(tmp_path / "run" / "boot"))
    boot(tmp_path)
    assert (tmp_path / "run" / "boot").read_text() == "driver_version 580.95.05\n"
    n = nvml("hgx-h100")
    assert n.nvmlSystemGetDriverVersion() == "580.95.05"
    assert n.nvmlDeviceGetCount() == 8


def test_the_same_version_as_the_profiles_is_no_mismatch(nvml, tmp_path):
    marker(tmp_path, "580.95.05")
    assert nvml("l40s-x4").nvmlSystemGetDriverVersion() == "580.95.05"


def test_an_upgrade_after_the_boot_is_a_mismatch_again(nvml, tmp_path, monkeypatch):
    monkeypatch.setenv("GPUOPS_FAKE_NVML_BOOT", str(tmp_path / "boot"))
    (tmp_path / "boot").write_text("driver_version 580.65.06\n")
    marker(tmp_path, "580.95.05")
    with nvml_raises(pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH):
        nvml("hgx-h100")


def test_boot_without_a_driver_package_writes_nothing(tmp_path):
    boot(tmp_path)
    assert not (tmp_path / "run" / "boot").exists()


def test_a_profile_whose_driver_is_not_loaded_stays_so(nvml, tmp_path):
    marker(tmp_path, "580.95.05")
    with nvml_raises(pynvml.NVML_ERROR_DRIVER_NOT_LOADED):
        nvml("driver-not-loaded")

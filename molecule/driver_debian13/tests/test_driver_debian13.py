"""A Debian 13 node after the driver role (distro source, branch 550)."""
import json


def test_driver_550_installed_and_held(host):
    assert host.package("nvidia-driver").version.startswith("550.")
    held = set(host.check_output("apt-mark showhold").split())
    assert {"nvidia-driver", "nvidia-kernel-dkms"} <= held


def test_pin_keeps_the_branch(host):
    assert "Pin: version 550.*" in host.file("/etc/apt/preferences.d/gpuops-nvidia-driver.pref").content_string


def test_state_reported(host):
    record = json.loads(host.file("/var/lib/gpuops/driver-state.json").content_string)
    assert record["state"] == "installed_not_loaded" and record["installed_version"].startswith("550.")


def test_module_options_set_for_modprobe(host):
    conf = host.file("/etc/modprobe.d/nvidia-gpuops.conf")
    assert "options nvidia NVreg_EnableGpuFirmware=0 NVreg_PreserveVideoMemoryAllocations=1" in conf.content_string.splitlines()
    assert "options nvidia NVreg_EnableGpuFirmware=0 NVreg_PreserveVideoMemoryAllocations=1" in host.check_output(
        "modprobe --showconfig 2>/dev/null | grep '^options nvidia ' || true")

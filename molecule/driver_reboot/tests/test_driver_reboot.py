"""After the role moved the node from 570 to 580.95.05, rebooted it and verified the result."""
import json


def test_the_node_was_rebooted(host):
    before = host.file("/var/tmp/gpuops-boot-before").content_string.strip()
    now = host.check_output("cut -d ' ' -f 22 /proc/1/stat").strip()
    assert now != before
    # the simulated driver loaded, at that boot, the driver installed then
    assert host.file("/run/gpuops-fake-nvml/boot").content_string == "driver_version 580.95.05\n"


def test_the_installed_driver_runs(host):
    record = json.loads(host.file("/var/lib/gpuops/driver-state.json").content_string)
    assert record["state"] == "ready" and record["reboot_required"] is False
    assert record["installed_version"] == record["loaded_version"] == "580.95.05"
    assert record["can_load_module"] is True
    version = host.check_output("python3 -c 'import pynvml; pynvml.nvmlInit(); print(pynvml.nvmlSystemGetDriverVersion())'")
    assert version.strip() == "580.95.05"


def test_the_driver_is_pinned_and_held(host):
    pin = host.file("/etc/apt/preferences.d/gpuops-nvidia-driver.pref").content_string
    assert "Pin: version 580.95.05-*" in pin
    # the open kernel modules (Hopper) and the fabric manager of the NVSwitches, at the driver's version
    assert {"nvidia-open", "nvidia-fabricmanager-580"} <= set(host.check_output("apt-mark showhold").split())
    assert host.package("nvidia-fabricmanager-580").version == "580.95.05-1"

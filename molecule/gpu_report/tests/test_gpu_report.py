"""The node after gpu_report: bindings installed from Debian on top of the simulated driver,
and an inventory record that matches what NVML itself says on the node."""
import json
import re

LIST_GPUS = (
    "python3 -c 'import json, pynvml; pynvml.nvmlInit(); "
    "print(json.dumps([pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(i)) "
    "for i in range(pynvml.nvmlDeviceGetCount())]))'"
)


def test_bindings_come_from_debian_without_the_real_library(host):
    assert host.package("python3-pynvml").is_installed
    assert host.package("gpuops-lab-fake-nvml").is_installed
    assert not host.package("libnvidia-ml1").is_installed


def test_inventory_record(host):
    record = host.file("/var/lib/gpuops/gpu-inventory.json")
    assert record.is_file
    assert (record.user, record.group, record.mode) == ("root", "root", 0o644)
    data = json.loads(record.content_string)
    assert data["schema"] == "gpuops.nvidia/gpu-inventory/v2"
    assert {gpu["state"] for gpu in data["gpus"]} == {"present"} and data["events"] == []
    assert data["driver"]["loaded"] is True
    assert data["driver"]["version"] == "570.172.08"
    assert data["gpu_count"] == 8
    assert {gpu["name"] for gpu in data["gpus"]} == {"NVIDIA H100 80GB HBM3"}
    assert {gpu["architecture"] for gpu in data["gpus"]} == {"hopper"}
    # The record names the same GPUs NVML lists on the node, in the same order.
    uuids = json.loads(host.check_output(LIST_GPUS))
    assert [gpu["uuid"] for gpu in data["gpus"]] == uuids
    assert len(set(uuids)) == 8


def test_the_record_agrees_with_nvidia_smi_and_the_node_profile(host):
    # the node's profile (tests/lab/fake-nvml/profiles/hgx-h100.profile): 8 GPUs, driver 570.172.08
    profile = host.file("/etc/gpuops-fake-nvml/profile").content_string
    assert re.search(r"^gpu_count = 8$", profile, re.M) and re.search(r"^driver_version = 570.172.08$", profile, re.M)
    # the driver's nvidia-smi: its GPUs (MIG devices are listed below them) and its version
    smi = re.findall(r"^GPU (\d+): (.+) \(UUID: (GPU-[0-9a-f-]+)\)$", host.check_output("nvidia-smi -L"), re.M)
    assert len(smi) == 8
    assert "DRIVER version      : 570.172.08" in host.check_output("nvidia-smi --version")
    data = json.loads(host.file("/var/lib/gpuops/gpu-inventory.json").content_string)
    assert [(g["index"], g["name"], g["uuid"]) for g in data["gpus"]] == [(int(i), name, uuid) for i, name, uuid in smi]
    assert data["driver"]["version"] == "570.172.08"

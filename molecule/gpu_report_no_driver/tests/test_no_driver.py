"""A node with Debian's real libnvidia-ml1 and no loaded NVIDIA module."""
import json


def test_real_library_installed(host):
    assert host.package("libnvidia-ml1").is_installed
    assert host.package("python3-pynvml").is_installed
    assert not host.file("/proc/driver/nvidia/version").exists


def test_real_nvml_loads_but_cannot_initialise(host):
    # Debian's library is found and loaded; without a kernel module its nvmlInit fails. In these
    # containers it answers "Unknown Error" (where a full driver install on a host says
    # "Driver Not Loaded"); gpu_info reads the missing module from /proc and /sys either way.
    out = host.run("python3 -c 'import pynvml; pynvml.nvmlInit()'")
    assert out.rc != 0
    assert "pynvml.NVMLError" in out.stderr
    assert "Library Not Found" not in out.stderr


def test_no_nvidia_kernel_module(host):
    # the kernel's view, which the record's driver_not_loaded must match
    # (the container has no /proc/modules: the module's sysfs and procfs entries say it)
    assert not host.file("/sys/module/nvidia").exists
    assert not host.file("/proc/driver/nvidia").exists


def test_record_says_why(host):
    data = json.loads(host.file("/var/lib/gpuops/gpu-inventory.json").content_string)
    assert data["driver"] == {"loaded": False, "reason": "driver_not_loaded", "version": None,
                              "cuda_driver_version": None, "kernel_module_flavour": None}
    assert data["gpu_count"] == 0 and data["gpus"] == []

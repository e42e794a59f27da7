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


def test_module_explains_it(host):
    result = host.ansible("gpuops.nvidia.gpu_info", "xid_wait_ms=0", check=False)
    assert result.get("failed") is not True
    assert result["driver"]["loaded"] is False
    assert result["driver"]["reason"] == "driver_not_loaded"
    assert result["driver"]["kernel_module"]["loaded"] is False
    assert [finding["code"] for finding in result["health"]] == ["driver_not_loaded"]


def test_record_says_why(host):
    data = json.loads(host.file("/var/lib/gpuops/gpu-inventory.json").content_string)
    assert data["driver"] == {"loaded": False, "reason": "driver_not_loaded", "version": None,
                              "cuda_driver_version": None, "kernel_module_flavour": None}
    assert data["gpu_count"] == 0 and data["gpus"] == []

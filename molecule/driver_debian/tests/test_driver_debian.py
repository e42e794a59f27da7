"""A Debian 12 node after the driver role (distro source, branch 535)."""
import json

DRIVER_PACKAGES = ("nvidia-driver", "nvidia-kernel-dkms", "firmware-misc-nonfree", "nvidia-persistenced")
# nvmlInit_v2 of the node's libnvidia-ml.so.1, through ctypes (not the collection's code): its
# return code and NVML's name for it
NVML_INIT = ("python3 -c 'import ctypes; lib = ctypes.CDLL(\"libnvidia-ml.so.1\"); code = lib.nvmlInit_v2(); "
             "lib.nvmlErrorString.restype = ctypes.c_char_p; print(code, lib.nvmlErrorString(code).decode())'")


def test_debian_driver_packages_installed(host):
    for name in DRIVER_PACKAGES:
        package = host.package(name)
        assert package.is_installed, name
    assert host.package("nvidia-driver").version.startswith("535.")
    assert host.package("libnvidia-ml1").is_installed


def test_driver_packages_held(host):
    held = set(host.check_output("apt-mark showhold").split())
    assert {"nvidia-driver", "nvidia-kernel-dkms", "nvidia-persistenced"} <= held
    assert "firmware-misc-nonfree" not in held  # firmware does not carry the driver's version


def test_nouveau_blacklisted(host):
    conf = host.file("/etc/modprobe.d/blacklist-nouveau-gpuops.conf")
    assert conf.is_file and conf.mode == 0o644
    assert "blacklist nouveau" in conf.content_string.splitlines()
    assert "options nouveau modeset=0" in conf.content_string.splitlines()
    # modprobe itself reads the blacklist
    assert "blacklist nouveau" in host.check_output("modprobe --showconfig 2>/dev/null | grep nouveau || true")


def test_module_options_file_sets_none_without_driver_module_options(host):
    conf = host.file("/etc/modprobe.d/nvidia-gpuops.conf")
    assert conf.is_file and conf.mode == 0o644
    assert conf.content_string.startswith("# Managed by gpuops.nvidia.driver")
    assert not any(line.startswith("options") for line in conf.content_string.splitlines())
    # modprobe reads no nvidia options at all
    assert "options nvidia " not in host.check_output("modprobe --showconfig 2>/dev/null | grep -i nvidia || true")


def test_persistenced_enabled(host):
    assert host.service("nvidia-persistenced").is_enabled


def test_dkms_registered_the_module(host):
    assert "nvidia" in host.check_output("dkms status")


def test_the_driver_is_installed_but_not_loaded(host):
    # the kernel's view: no nvidia module (a container cannot load one)
    assert not host.file("/proc/driver/nvidia/version").exists
    assert not host.file("/sys/module/nvidia").exists
    # Debian's NVML library loads, and its own nvmlInit refuses without the module
    out = host.run(NVML_INIT)
    assert out.rc == 0, out.stderr
    code = int(out.stdout.split()[0])
    assert code != 0, out.stdout  # NVML_SUCCESS would mean a driver answered


def test_role_reported_the_state(host):
    record = json.loads(host.file("/var/lib/gpuops/driver-state.json").content_string)
    assert record["state"] == "installed_not_loaded"
    assert record["installed_version"].startswith("535.")
    assert record["loaded_version"] is None
    assert record["can_load_module"] is False and record["reboot_required"] is False
    assert "container" in record["message"]
    assert "nvidia-driver" in record["held"]

"""A Debian 12 node after the driver role (distro source, branch 535)."""
import json

DRIVER_PACKAGES = ("nvidia-driver", "nvidia-kernel-dkms", "firmware-misc-nonfree", "nvidia-persistenced")


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


def test_nvml_says_not_loaded(host):
    result = host.ansible("gpuops.nvidia.gpu_info", "xid_wait_ms=0", check=False)
    assert result["driver"]["loaded"] is False
    assert result["driver"]["reason"] == "driver_not_loaded"


def test_role_reported_the_state(host):
    record = json.loads(host.file("/var/lib/gpuops/driver-state.json").content_string)
    assert record["state"] == "installed_not_loaded"
    assert record["installed_version"].startswith("535.")
    assert record["loaded_version"] is None
    assert record["can_load_module"] is False and record["reboot_required"] is False
    assert "container" in record["message"]
    assert "nvidia-driver" in record["held"]

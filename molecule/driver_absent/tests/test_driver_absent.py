"""After driver_state=absent: what the role installed is gone, the rest is untouched."""


def test_driver_packages_removed(host):
    for name in ("nvidia-open", "cuda-drivers", "nvidia-persistenced", "python3-pynvml"):
        assert not host.package(name).is_installed, name
    assert "nvidia" not in host.check_output("apt-mark showhold")


def test_role_files_removed(host):
    for path in ("/etc/apt/preferences.d/gpuops-nvidia-driver.pref",
                 "/etc/apt/sources.list.d/gpuops-nvidia-cuda.sources",
                 "/etc/apt/keyrings/gpuops-nvidia-cuda.asc",
                 "/etc/modprobe.d/blacklist-nouveau-gpuops.conf",
                 "/var/lib/gpuops/driver-state.json"):
        assert not host.file(path).exists, path


def test_other_files_kept(host):
    own = host.file("/etc/modprobe.d/operator-own.conf")
    assert own.exists and own.content_string == "options snd_hda_intel power_save=0\n"
    assert host.package("python3").is_installed

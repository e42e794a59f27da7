"""After container_toolkit_state: absent on a node the role had set up."""

PACKAGES = ("nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools",
            "libnvidia-container1")


def test_toolkit_packages_pin_repo_and_key_gone(host):
    for name in PACKAGES:
        assert not host.package(name).is_installed, name
    assert not any(name in PACKAGES for name in host.check_output("apt-mark showhold").split())
    for path in ("/etc/apt/preferences.d/gpuops-nvidia-container-toolkit.pref",
                 "/etc/apt/sources.list.d/gpuops-nvidia-container-toolkit.sources",
                 "/etc/apt/keyrings/gpuops-nvidia-container-toolkit.asc"):
        assert not host.file(path).exists, path


def test_cdi_refresh_units_and_spec_gone(host):
    assert not host.file("/var/run/cdi/nvidia.yaml").exists
    assert not host.file("/etc/systemd/system/multi-user.target.wants/nvidia-cdi-refresh.path").exists
    assert not host.file("/etc/systemd/system/multi-user.target.wants/nvidia-cdi-refresh.service").exists


def test_containerd_runs_the_operators_configuration_again(host):
    assert host.service("containerd").is_running
    assert not host.file("/etc/containerd/conf.d/99-nvidia.toml").exists
    assert host.check_output("containerd config dump") == host.file("/var/tmp/containerd-dump-before.toml").content_string.rstrip("\n")
    plugins = host.check_output("ctr plugins ls")
    assert any(line.split()[:2] == ["io.containerd.grpc.v1", "cri"] and line.split()[-1] == "ok"
               for line in plugins.splitlines())

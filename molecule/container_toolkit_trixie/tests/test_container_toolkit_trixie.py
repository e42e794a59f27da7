"""Debian 13, containerd 1.7 under systemd, after the toolkit role with CDI and nvidia default."""
import tomllib


def test_newest_toolkit_installed(host):
    assert host.package("nvidia-container-toolkit").version == "1.18.1-1"


def test_containerd_17_has_cdi_and_nvidia_default(host):
    assert host.service("containerd").is_running
    assert host.check_output("containerd --version").split()[2].startswith("1.7")
    cri = tomllib.loads(host.check_output("containerd config dump"))["plugins"]["io.containerd.grpc.v1.cri"]
    assert cri["enable_cdi"] is True
    assert cri["cdi_spec_dirs"] == ["/etc/cdi", "/var/run/cdi"]
    assert cri["containerd"]["default_runtime_name"] == "nvidia"
    assert cri["containerd"]["runtimes"]["nvidia"]["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    assert cri["sandbox_image"] == "registry.example.com/pause:3.9"


def test_toolkit_in_cdi_mode(host):
    config = tomllib.loads(host.file("/etc/nvidia-container-runtime/config.toml").content_string)
    assert config["nvidia-container-runtime"]["mode"] == "cdi"


def test_cri_plugin_loaded(host):
    assert any(line.split()[:2] == ["io.containerd.grpc.v1", "cri"] and line.split()[-1] == "ok"
               for line in host.check_output("ctr plugins ls").splitlines())

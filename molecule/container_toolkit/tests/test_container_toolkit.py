"""Debian 12, containerd 1.6 under systemd, after the toolkit role (1.17.8 pinned, CDI skipped)."""
import tomllib

CRI = 'plugins."io.containerd.grpc.v1.cri"'


def dump(host):
    return tomllib.loads(host.check_output("containerd config dump"))["plugins"]["io.containerd.grpc.v1.cri"]


def test_toolkit_pinned_and_held(host):
    for name in ("nvidia-container-toolkit", "nvidia-container-toolkit-base", "libnvidia-container-tools",
                 "libnvidia-container1"):
        assert host.package(name).version == "1.17.8-1", name
    assert "nvidia-container-toolkit" in host.check_output("apt-mark showhold").split()
    assert host.check_output("nvidia-ctk --version").splitlines()[0] == "NVIDIA Container Toolkit CLI version 1.17.8"


def test_toolkit_config_edited_not_replaced(host):
    config = tomllib.loads(host.file("/etc/nvidia-container-runtime/config.toml").content_string)
    assert config["nvidia-container-runtime"]["mode"] == "auto"
    assert config["nvidia-container-runtime"]["modes"]["cdi"]["spec-dirs"] == ["/etc/cdi", "/var/run/cdi"]
    assert "nvidia-container-cli" in config  # the package's other sections are still there


def test_containerd_runs_the_merged_configuration(host):
    assert host.service("containerd").is_running
    cri = dump(host)
    nvidia = cri["containerd"]["runtimes"]["nvidia"]
    assert nvidia["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    assert nvidia["options"]["SystemdCgroup"] is True  # copied from runc
    assert cri["sandbox_image"] == "registry.example.com/pause:3.9"
    assert cri["registry"]["mirrors"]["hub.example.com"]["endpoint"] == ["https://mirror.example.com"]
    assert cri["registry"]["configs"]["registry.example.com"]["auth"]["username"] == "deploy"
    assert cri["containerd"]["default_runtime_name"] == "runc"


def test_cri_plugin_loaded_after_the_restart(host):
    plugins = host.check_output("ctr plugins ls")
    assert any(line.split()[:2] == ["io.containerd.grpc.v1", "cri"] and line.split()[-1] == "ok"
               for line in plugins.splitlines())
    # containerd was (re)started after the drop-in was written
    started = host.check_output("date -d \"$(systemctl show containerd -p ActiveEnterTimestamp --value)\" +%s")
    written = host.check_output("stat -c %Y /etc/containerd/conf.d/99-nvidia.toml")
    assert int(started) >= int(written)


def test_drop_in_keeps_the_credentials_private(host):
    main = host.file("/etc/containerd/config.toml")
    drop_in = host.file("/etc/containerd/conf.d/99-nvidia.toml")
    assert drop_in.mode == main.mode == 0o600
    assert "/etc/containerd/conf.d/*.toml" in main.content_string
    assert "# operator's containerd configuration" in main.content_string

"""Debian 12, containerd 1.6 under systemd, after the toolkit role (1.17.8 pinned, CDI skipped)."""
import json
import tomllib

import yaml

from gpuops_lab_testinfra import started_after_written  # pylint: disable=import-error

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
    assert started_after_written(host, "containerd", "/etc/containerd/conf.d/99-nvidia.toml")


def test_drop_in_keeps_the_credentials_private(host):
    main = host.file("/etc/containerd/config.toml")
    drop_in = host.file("/etc/containerd/conf.d/99-nvidia.toml")
    assert drop_in.mode == main.mode == 0o600
    assert "/etc/containerd/conf.d/*.toml" in main.content_string
    assert "# operator's containerd configuration" in main.content_string


def test_cdi_spec_generated_once_the_driver_is_loaded(host):
    """Converge ran with the driver not loaded (no spec, no failure); after the "reboot" the
    role generated the spec with nvidia-ctk and it names the 4 GPUs NVML reports."""
    result = json.loads(host.file("/var/tmp/gpuops-cdi-result.json").content_string)
    assert result["driver"]["loaded"] is True
    assert result["stale"] is False and result["findings"] == []
    assert result["spec_files"] == ["/var/run/cdi/nvidia.yaml"]
    uuids = json.loads(host.check_output(
        "python3 -c 'import json, pynvml; pynvml.nvmlInit(); "
        "print(json.dumps([pynvml.nvmlDeviceGetUUID(pynvml.nvmlDeviceGetHandleByIndex(i)) "
        "for i in range(pynvml.nvmlDeviceGetCount())]))'"))
    assert len(uuids) == 4
    spec = yaml.safe_load(host.file("/var/run/cdi/nvidia.yaml").content_string)
    assert spec["kind"] == "nvidia.com/gpu"
    assert {device["name"] for device in spec["devices"]} == {"0", "1", "2", "3", "all"} | set(uuids)
    # written once, after the "reboot" (converge and idempotence had no driver), and not again
    # by the run that found it current
    stats = json.loads(host.file("/var/tmp/gpuops-cdi-spec-stat.json").content_string)
    assert stats["generated"] == stats["again"]
    # NVIDIA's nvidia-ctk wrote it: its own header and the device nodes of the simulated driver
    nodes = {node["path"] for device in spec["devices"] for node in device["containerEdits"].get("deviceNodes", [])}
    assert spec["cdiVersion"] and nodes >= {"/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia2", "/dev/nvidia3"}
    for path in nodes:
        assert host.check_output("stat -c %%F %s" % path) == "character special file", path


def test_no_refresh_units_in_toolkit_117(host):
    assert not host.file("/etc/systemd/system/nvidia-cdi-refresh.path").exists
    assert not host.file("/usr/lib/systemd/system/nvidia-cdi-refresh.path").exists

"""Debian 13, containerd 1.7 under systemd, after the toolkit role with CDI and nvidia default."""
import json
import tomllib

import yaml


def test_newest_toolkit_installed(host):
    assert host.package("nvidia-container-toolkit").version == "1.18.0-1"
    # NVIDIA's own program, built from its Go module, not a stand-in
    assert "NVIDIA Container Toolkit CLI" in host.check_output("nvidia-ctk --version")


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


def nvml_names(host):
    """CDI names of the GPUs and MIG devices, as NVML on the node reports them: nvidia-ctk 1.18
    names a GPU in MIG mode by its MIG devices only."""
    return set(json.loads(host.check_output("""python3 -c '
import json, pynvml
pynvml.nvmlInit()
names = []
for i in range(pynvml.nvmlDeviceGetCount()):
    gpu = pynvml.nvmlDeviceGetHandleByIndex(i)
    if pynvml.nvmlDeviceGetMigMode(gpu)[0] != 1:
        names += [str(i), pynvml.nvmlDeviceGetUUID(gpu)]
        continue
    for j in range(pynvml.nvmlDeviceGetMaxMigDeviceCount(gpu)):
        try:
            mig = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(gpu, j)
        except pynvml.NVMLError:
            continue
        names += ["%d:%d" % (i, j), pynvml.nvmlDeviceGetUUID(mig)]
print(json.dumps(names))'""")))


def test_cdi_refresh_units_enabled(host):
    assert host.service("nvidia-cdi-refresh.path").is_enabled
    assert host.service("nvidia-cdi-refresh.path").is_running
    assert host.service("nvidia-cdi-refresh.service").is_enabled


def test_refresh_service_has_its_discovery_mode(host):
    # container_toolkit_mode cdi: toolkit 1.18 would take "cdi" as the discovery mode
    env = host.file("/etc/nvidia-container-toolkit/nvidia-cdi-refresh.env")
    lines = env.content_string.splitlines()
    assert lines.count("NVIDIA_CTK_CDI_GENERATE_MODE=auto") == 1
    assert not any(line.startswith("NVIDIA_CTK_CDI_GENERATE_MODE=") and line.endswith("=cdi") for line in lines)
    shown = host.check_output("systemctl show nvidia-cdi-refresh.service -p EnvironmentFiles")
    assert "/etc/nvidia-container-toolkit/nvidia-cdi-refresh.env" in shown


def test_stale_spec_regenerated_after_the_mig_change(host):
    names = nvml_names(host)
    assert {"0:0", "0:1"} <= names and len([n for n in names if n.startswith("MIG-")]) == 2
    result = json.loads(host.file("/var/tmp/gpuops-cdi-result.json").content_string)
    assert result["stale"] is False and result["findings"] == []
    spec = yaml.safe_load(host.file("/var/run/cdi/nvidia.yaml").content_string)
    assert {device["name"] for device in spec["devices"]} == names | {"all"}
    generations = json.loads(host.file("/var/tmp/gpuops-cdi-generations.json").content_string)
    # nvidia-ctk (run by nvidia-cdi-refresh.service) generated the spec at install; the role did
    # not regenerate a current spec, and regenerated the stale one exactly once
    assert generations["start"] >= 1
    assert generations["unchanged"] == generations["start"]
    assert generations["after_mig"] == generations["start"] + 1
    # the device nodes the spec names exist (the check ran with check_device_nodes on)
    for device in spec["devices"]:
        for node in device["containerEdits"].get("deviceNodes", []):
            assert host.check_output("stat -c %%F %s" % node["path"]) == "character special file", node["path"]
    shown = host.check_output("systemctl show nvidia-cdi-refresh.service -p Result -p ExecMainStatus -p ExecMainStartTimestamp")
    props = dict(line.split("=", 1) for line in shown.splitlines())
    assert props["Result"] == "success" and props["ExecMainStatus"] == "0" and props["ExecMainStartTimestamp"]

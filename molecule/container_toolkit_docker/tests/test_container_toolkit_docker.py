"""Debian 13, Docker 26 under systemd, after the toolkit role with nvidia default and CDI."""
import json

import yaml

from gpuops_lab_testinfra import started_after_written  # pylint: disable=import-error


def info(host):
    return json.loads(host.check_output("docker info --format '{{json .}}'"))


def test_docker_runs_with_the_nvidia_runtime_as_default(host):
    assert host.service("docker").is_running
    docker = info(host)
    assert docker["Runtimes"]["nvidia"]["path"] == "/usr/bin/nvidia-container-runtime"
    assert "runc" in docker["Runtimes"]
    assert docker["DefaultRuntime"] == "nvidia"
    assert docker["CDISpecDirs"] == ["/etc/cdi", "/var/run/cdi"]


def test_operator_settings_survive(host):
    docker = info(host)
    assert docker["RegistryConfig"]["Mirrors"] == ["https://mirror.example.com/"]
    assert docker["LoggingDriver"] == "json-file" and docker["Driver"] == "vfs"
    daemon = json.loads(host.file("/etc/docker/daemon.json").content_string)
    assert daemon["log-opts"] == {"max-size": "10m", "max-file": "3"}
    assert daemon["iptables"] is False and daemon["bridge"] == "none"
    assert daemon["features"] == {"cdi": True}


def test_docker_restarted_after_daemon_json_changed(host):
    assert started_after_written(host, "docker", "/etc/docker/daemon.json")


def test_containerd_left_alone(host):
    # docker.io brought containerd along; the role was told to configure Docker only
    assert not host.file("/etc/containerd/conf.d/99-nvidia.toml").exists


def test_cdi_spec_for_the_four_gpus(host):
    spec = yaml.safe_load(host.file("/var/run/cdi/nvidia.yaml").content_string)
    names = {device["name"] for device in spec["devices"]}
    assert {"0", "1", "2", "3", "all"} <= names and len([n for n in names if n.startswith("GPU-")]) == 4

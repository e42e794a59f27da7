# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpuops.nvidia.runtime_config through `ansible localhost -m`, with the real containerd of
this machine (Debian 12: 1.6) checking every produced configuration with `config dump`, and the
containerd binaries of Debian 13 (1.7) and unstable (2.x) and the dockerd of Debian 12 (20.10) and
13 (26), fetched by tests/lab/runtime-binaries."""
from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
import tomlkit

from conftest import BIN, REPO, flat, release as release_binary, require, tree_digest  # pylint: disable=import-error

FIXTURES = os.path.join(REPO, "tests", "unit", "plugins", "module_utils", "runtime", "fixtures")
CRI2 = ("plugins", "io.containerd.grpc.v1.cri")


@pytest.fixture(autouse=True)
def _containerd():
    require(shutil.which("containerd"), "containerd", "apt-get install containerd (make test installs it)")


def dump(config, binary="containerd"):
    out = subprocess.run([binary, "--config", config, "config", "dump"], check=True,
                         capture_output=True, text=True).stdout
    return tomlkit.parse(out).unwrap()


def get(tree, path):
    for key in path:
        tree = (tree or {}).get(key)
    return tree


@pytest.fixture
def node(tmp_path):
    """A containerd config directory: config.toml (from a fixture) and conf.d/."""
    def make(fixture):
        (tmp_path / "etc").mkdir(exist_ok=True)
        shutil.copy(os.path.join(FIXTURES, fixture), tmp_path / "etc" / "config.toml")
        return tmp_path / "etc"
    return make


def args(etc, extra=""):
    return "config_path=%s/config.toml drop_in_path=%s/conf.d/99-nvidia.toml %s" % (etc, etc, extra)


FIXTURES_16 = [
    ("containerd-1.6-default.toml", CRI2), ("debian12-packaged.toml", CRI2), ("kubeadm-v2.toml", CRI2), ("k3s-v2.toml", CRI2),
    ("eks-mirrors-auth-v2.toml", CRI2), ("existing-nvidia-v2.toml", CRI2),
]


@pytest.mark.parametrize("fixture, cri", FIXTURES_16)
def test_drop_in_with_real_containerd(lab, node, fixture, cri):
    etc = node(fixture)
    before_dump = dump(str(etc / "config.toml"))
    result = lab.module("none", module="gpuops.nvidia.runtime_config", args=args(etc, "enable_cdi=auto"))
    assert result["changed"] is True and result["restart_required"] is True
    merged = dump(str(etc / "config.toml"))
    nvidia = get(merged, cri + ("containerd", "runtimes", "nvidia"))
    assert nvidia["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    runc_options = get(merged, cri + ("containerd", "runtimes", "runc", "options")) or {}
    if fixture != "existing-nvidia-v2.toml":
        assert {k: v for k, v in nvidia["options"].items() if k != "BinaryName"} == {
            k: v for k, v in runc_options.items() if k != "BinaryName"}
    # runc is still the default and still configured (the CRI plugin needs it)
    assert get(merged, cri + ("containerd", "default_runtime_name")) == "runc"
    assert get(merged, cri + ("containerd", "runtimes", "runc", "runtime_type")) == "io.containerd.runc.v2"
    # Everything containerd saw before, it still sees (the nvidia runtime aside).
    for key in ("sandbox_image", "registry", "cni"):
        assert get(merged, cri + (key,)) == get(before_dump, cri + (key,))
    assert lab.module("none", module="gpuops.nvidia.runtime_config", args=args(etc, "enable_cdi=auto"))["changed"] is False
    gone = lab.module("none", module="gpuops.nvidia.runtime_config", args=args(etc, "state=absent"))
    assert gone["changed"] is True
    assert dump(str(etc / "config.toml")) == before_dump
    assert not (etc / "conf.d" / "99-nvidia.toml").exists()


def test_version_1_in_place_with_real_containerd(lab, node):
    etc = node("v1-legacy.toml")
    before_dump = dump(str(etc / "config.toml"))
    result = lab.module("none", module="gpuops.nvidia.runtime_config",
                        args="config_path=%s/config.toml edit_mode=in_place enable_cdi=auto" % etc)
    assert result["changed"] and result["config_version"] == 1
    # containerd 1.6 prints a version 1 file migrated to version 2
    nvidia = get(dump(str(etc / "config.toml")), CRI2 + ("containerd", "runtimes", "nvidia"))
    assert nvidia["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    lab.module("none", module="gpuops.nvidia.runtime_config",
               args="config_path=%s/config.toml edit_mode=in_place state=absent" % etc)
    assert dump(str(etc / "config.toml")) == before_dump
    refused = lab.module("none", module="gpuops.nvidia.runtime_config", args=args(etc, "enable_cdi=auto"),
                         expect_failure=True)
    assert "use edit_mode=in_place" in refused["msg"]


def test_in_place_default_runtime(lab, node):
    etc = node("kubeadm-v2.toml")
    result = lab.module("none", module="gpuops.nvidia.runtime_config",
                        args="config_path=%s/config.toml edit_mode=in_place set_as_default=true enable_cdi=auto backup=true" % etc)
    assert result["changed"] and len(result["backups"]) == 1
    merged = dump(str(etc / "config.toml"))
    assert get(merged, CRI2 + ("containerd", "default_runtime_name")) == "nvidia"
    assert "# kubeadm node: systemd cgroups, pinned pause image" in (etc / "config.toml").read_text()
    with open(result["backups"][0]) as handle:
        assert handle.read() == open(os.path.join(FIXTURES, "kubeadm-v2.toml")).read()


def test_check_mode_and_diff_mask_credentials(lab, node):
    etc = node("eks-mirrors-auth-v2.toml")
    before = tree_digest(str(etc))
    proc = lab.run("none", [os.path.join(BIN, "ansible"), "localhost", "-m", "gpuops.nvidia.runtime_config", "-a", args(etc, "enable_cdi=auto"),
                            "--check", "--diff"])
    result = json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]
    assert result["changed"] is True
    assert tree_digest(str(etc)) == before, "check mode must not write"
    assert "s3cr3t-registry-password" not in proc.stdout
    assert "********" in json.dumps(result["diff"])
    assert [d["after_header"] for d in result["diff"]] == [str(etc / "config.toml"), str(etc / "conf.d" / "99-nvidia.toml")]


@pytest.mark.parametrize("fixture, extra, message", [
    ("malformed.toml", "", "config.toml: line 2, column"),
    ("kubeadm-v2.toml", "enable_cdi=true", "containerd 1.6.20 does not support CDI"),
    ("cri-disabled-v2.toml", "", "disables the CRI plugin"),
])
def test_bad_input_changes_nothing(lab, node, fixture, extra, message):
    etc = node(fixture)
    before = tree_digest(str(etc))
    result = lab.module("none", module="gpuops.nvidia.runtime_config", args=args(etc, extra), expect_failure=True)
    assert result["failed"] is True and message in result["msg"]
    assert tree_digest(str(etc)) == before


def test_invalid_result_is_never_installed(lab, node):
    etc = node("kubeadm-v2.toml")
    with open(etc / "config.toml", "a") as handle:
        handle.write('\n[plugins."io.containerd.grpc.v1.cri".cni]\n  max_conf_num = "many"\n')
    before = tree_digest(str(etc))
    result = lab.module("none", module="gpuops.nvidia.runtime_config", args=args(etc, "enable_cdi=auto"),
                        expect_failure=True)
    assert "the planned containerd configuration is not valid, nothing was changed" in result["msg"]
    assert tree_digest(str(etc)) == before


def test_unwritable_drop_in_directory(lab, node):
    etc = node("kubeadm-v2.toml")
    (etc / "conf.d").mkdir()
    subprocess.run(["chattr", "+i", str(etc / "conf.d")], check=True)
    try:
        before = tree_digest(str(etc))
        result = lab.module("none", module="gpuops.nvidia.runtime_config", args=args(etc, "enable_cdi=auto"),
                            expect_failure=True)
        assert "is not writable; nothing was changed" in result["msg"]
        assert tree_digest(str(etc)) == before
    finally:
        subprocess.run(["chattr", "-i", str(etc / "conf.d")], check=True)


def test_unknown_runtime_is_refused(lab):
    result = lab.module("none", module="gpuops.nvidia.runtime_config", args="runtime=podman", expect_failure=True)
    assert "value of runtime must be one of: containerd, crio, docker" in result["msg"]


def docker_env(suite):
    """PATH with the dockerd (and docker-proxy, which --validate looks for) of a Debian suite."""
    return {"PATH": os.pathsep.join([release(suite, "dockerd"), BIN, os.environ["PATH"]])}


def test_docker_daemon_json_merge(lab, tmp_path):
    """Merged into the operator's daemon.json and checked by Docker 26's `dockerd --validate`."""
    daemon = tmp_path / "daemon.json"
    original = {"registry-mirrors": ["https://mirror.internal.example"], "log-driver": "json-file",
                "log-opts": {"max-size": "10m"}, "exec-opts": ["native.cgroupdriver=systemd"],
                "runtimes": {"runsc": {"path": "/usr/local/bin/runsc"}}}
    daemon.write_text(json.dumps(original, indent=2) + "\n")
    env = docker_env("trixie")
    result = lab.module("none", module="gpuops.nvidia.runtime_config",
                        args="runtime=docker config_path=%s set_as_default=true" % daemon, env=env)
    assert result["changed"] is True and result["docker_version"] == "26.1.5"
    assert not result.get("warnings")  # validated: no "could not validate" note
    validated = subprocess.run([os.path.join(release("trixie", "dockerd"), "dockerd"), "--validate", "--config-file",
                                str(daemon)], capture_output=True, text=True, env={**os.environ, **env}, check=False)
    assert validated.returncode == 0, validated.stderr
    merged = json.loads(daemon.read_text())
    assert merged["runtimes"]["nvidia"] == {"path": "/usr/bin/nvidia-container-runtime"}
    assert merged["default-runtime"] == "nvidia" and merged["features"]["cdi"] is True
    assert {k: merged[k] for k in original if k != "runtimes"} == {k: v for k, v in original.items() if k != "runtimes"}
    assert merged["runtimes"]["runsc"] == original["runtimes"]["runsc"]
    assert lab.module("none", module="gpuops.nvidia.runtime_config",
                      args="runtime=docker config_path=%s set_as_default=true" % daemon)["changed"] is False
    lab.module("none", module="gpuops.nvidia.runtime_config", args="runtime=docker config_path=%s state=absent" % daemon)
    restored = json.loads(daemon.read_text())
    assert "nvidia" not in restored["runtimes"] and "default-runtime" not in restored


def test_docker_malformed_json_is_left_alone(lab, tmp_path):
    daemon = tmp_path / "daemon.json"
    daemon.write_text('{\n  "log-driver": "json-file"\n  "data-root": "/srv/docker"\n}\n')
    before = daemon.read_text()
    result = lab.module("none", module="gpuops.nvidia.runtime_config", args="runtime=docker config_path=%s" % daemon,
                        expect_failure=True)
    assert "%s: line 3, column 3" % daemon in result["msg"]
    assert daemon.read_text() == before


def test_drop_in_gets_the_main_files_mode(lab, node):
    etc = node("eks-mirrors-auth-v2.toml")  # carries registry credentials
    os.chmod(etc / "config.toml", 0o600)
    lab.module("none", module="gpuops.nvidia.runtime_config", args=args(etc, "enable_cdi=auto"))
    assert oct(os.stat(etc / "conf.d" / "99-nvidia.toml").st_mode & 0o777) == "0o600"


def release(suite, name="containerd"):
    """Directory holding a runtime binary of another Debian suite."""
    return os.path.dirname(release_binary(suite, name))


def cri_runtime_path(merged):
    """Where the dump of this containerd keeps the CRI runtime settings (1.x / 2.x)."""
    for path in (("plugins", "io.containerd.cri.v1.runtime"), CRI2):
        if get(merged, path + ("containerd",)):
            return path
    raise AssertionError("no CRI runtime section in containerd's dump")


def ours(path, cri):
    """Keys runtime_config may add or change: the nvidia runtime, CDI, the imports line."""
    return (path == ("imports",) or path[:len(cri) + 3] == cri + ("containerd", "runtimes", "nvidia")
            or path in (cri + ("enable_cdi",), cri + ("cdi_spec_dirs",)))


NEWER = [(suite, fixture) for suite in ("trixie", "sid") for fixture in (
    "containerd-1.7-default.toml", "kubeadm-v2.toml", "k3s-v2.toml", "eks-mirrors-auth-v2.toml",
    "existing-nvidia-v2.toml")] + [
    ("sid", "containerd-2.1-default.toml"), ("sid", "containerd-2.0-v3.toml"), ("sid", "rke2-v3.toml")]


@pytest.mark.parametrize("suite, fixture", NEWER)
def test_drop_in_with_containerd_17_and_2x(lab, node, suite, fixture):
    """containerd 1.7 and 2.x read the produced files: the effective configuration gains the nvidia
    runtime and CDI and differs in nothing else (2.1+ merges drop-ins, 1.7 replaces sections)."""
    bindir = release(suite)
    binary = os.path.join(bindir, "containerd")
    env = {"PATH": os.pathsep.join([bindir, BIN, os.environ["PATH"]])}
    etc = node(fixture)
    before = dump(str(etc / "config.toml"), binary)
    result = lab.module("none", module="gpuops.nvidia.runtime_config", args=args(etc, "enable_cdi=true"), env=env)
    assert result["changed"] is True and result["restart_required"] is True
    merged = dump(str(etc / "config.toml"), binary)
    cri = cri_runtime_path(merged)
    nvidia = get(merged, cri + ("containerd", "runtimes", "nvidia"))
    assert nvidia["options"]["BinaryName"] == "/usr/bin/nvidia-container-runtime"
    assert nvidia["runtime_type"] == "io.containerd.runc.v2"
    assert get(merged, cri + ("enable_cdi",)) is True
    assert get(merged, cri + ("cdi_spec_dirs",)) == ["/etc/cdi", "/var/run/cdi"]
    flat_before, flat_after = flat(before), flat(merged)
    changed = {path for path in set(flat_before) | set(flat_after) if flat_before.get(path) != flat_after.get(path)}
    assert {path for path in changed if not ours(path, cri)} == set()
    again = lab.module("none", module="gpuops.nvidia.runtime_config", args=args(etc, "enable_cdi=true"), env=env)
    assert again["changed"] is False
    lab.module("none", module="gpuops.nvidia.runtime_config", args=args(etc, "state=absent"), env=env)
    assert dump(str(etc / "config.toml"), binary) == before


def test_docker_invalid_result_is_never_installed(lab, tmp_path):
    daemon = tmp_path / "daemon.json"
    daemon.write_text('{\n  "log-level": "verbose",\n  "storage-driver": "overlay2"\n}\n')
    before = daemon.read_text()
    result = lab.module("none", module="gpuops.nvidia.runtime_config", args="runtime=docker config_path=%s" % daemon,
                        env=docker_env("trixie"), expect_failure=True)
    assert "the planned Docker configuration is not valid, nothing was changed" in result["msg"]
    assert "invalid logging level: verbose" in result["msg"] and str(daemon) not in result["msg"]
    assert daemon.read_text() == before


def test_docker_20_10_has_no_cdi(lab, tmp_path):
    """Debian 12's Docker 20.10: CDI required is refused before anything changes; auto skips it
    with a warning (and says that this dockerd cannot validate)."""
    daemon = tmp_path / "daemon.json"
    daemon.write_text('{\n  "log-driver": "journald"\n}\n')
    before = daemon.read_text()
    env = docker_env("bookworm")
    refused = lab.module("none", module="gpuops.nvidia.runtime_config",
                         args="runtime=docker config_path=%s enable_cdi=true" % daemon, env=env, expect_failure=True)
    assert "Docker 20.10.24 does not support CDI (features.cdi needs Docker 25 or newer)" in refused["msg"]
    assert daemon.read_text() == before
    auto = lab.module("none", module="gpuops.nvidia.runtime_config",
                      args="runtime=docker config_path=%s enable_cdi=auto" % daemon, env=env)
    assert auto["changed"] is True and auto["docker_version"] == "20.10.24"
    assert any("does not support CDI" in w for w in auto["warnings"])
    assert any("--validate needs Docker 23" in w for w in auto["warnings"])
    merged = json.loads(daemon.read_text())
    assert "features" not in merged and merged["log-driver"] == "journald"
    assert merged["runtimes"]["nvidia"]["path"] == "/usr/bin/nvidia-container-runtime"

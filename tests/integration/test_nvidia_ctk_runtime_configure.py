# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The project's runtime editors (plugins/module_utils/runtime: containerd.configure, docker.configure,
crio.drop_in) against NVIDIA's own `nvidia-ctk runtime configure` (1.18.0, built by
tests/lab/go-binaries), on the editors' fixtures and on Docker and CRI-O samples.

Compared is meaning, not bytes: for containerd the effective configuration `containerd config dump`
of the matching release prints for both results (1.6 from this machine, 1.7 and 2.1 from
tests/lab/runtime-binaries), for Docker the parsed daemon.json (checked with dockerd 26's --validate),
for CRI-O the parsed drop-ins. Where they agree, one parametrized test says so; every difference in
meaning has a test of its own that asserts it and says why the project's editor differs (or, where
the editor was wrong, became a test that the editor now agrees)."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import tomllib

import pytest

from conftest import REPO, flat, go_binaries, release  # pylint: disable=import-error

from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime import containerd, crio, docker  # pylint: disable=wrong-import-order
from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime.common import ConfigError  # pylint: disable=wrong-import-order

FIXTURES = os.path.join(REPO, "tests", "unit", "plugins", "module_utils", "runtime", "fixtures")
RUNTIME = "/usr/bin/nvidia-container-runtime"
CRI2 = ("plugins", "io.containerd.grpc.v1.cri")
CRI3 = ("plugins", "io.containerd.cri.v1.runtime")


@pytest.fixture(scope="module")
def ctk():
    return os.path.join(go_binaries("toolkit-1.18.0"), "nvidia-ctk")


def containerd_binary(version):
    if version.startswith("1.6."):
        binary = shutil.which("containerd")
        if binary is None:
            pytest.fail("containerd (Debian 12's 1.6) is not installed: make apt installs it")
        return binary
    return release("trixie" if version.startswith("1.7.") else "sid", "containerd")


def fixture(name):
    with open(os.path.join(FIXTURES, name), encoding="utf-8") as handle:
        return handle.read()


def run_ctk(ctk, *args, check=True):
    res = subprocess.run([ctk, "runtime", "configure", *map(str, args)], capture_output=True, text=True,
                         check=False, timeout=60)
    if check:
        assert res.returncode == 0, res.stderr
    return res


def ctk_containerd(ctk, tmp_path, text, *flags, cdi=True):
    """nvidia-ctk on a copy of the main file, with its drop-in next to it; returns the main path."""
    main = tmp_path / "ctk" / "config.toml"
    main.parent.mkdir(parents=True, exist_ok=True)
    main.write_text(text)
    run_ctk(ctk, "--runtime=containerd", "--config=%s" % main, "--drop-in-config=%s" % (main.parent / "conf.d" /
            "99-nvidia.toml"), "--nvidia-runtime-path=%s" % RUNTIME, *(["--cdi.enabled"] if cdi else []), *flags)
    return main


def ours_containerd(tmp_path, text, version, **kwargs):
    """The project's editor, its files written where nvidia-ctk's would be; returns the main path."""
    main = tmp_path / "ours" / "config.toml"
    (main.parent / "conf.d").mkdir(parents=True, exist_ok=True)
    kwargs.setdefault("enable_cdi", "auto")
    plan = containerd.configure(text, containerd_version=version, drop_in_path=str(main.parent / "conf.d" /
                                "99-nvidia.toml"), source=str(main), **kwargs)
    main.write_text(plan["main"])
    if plan["drop_in"]:
        (main.parent / "conf.d" / "99-nvidia.toml").write_text(plan["drop_in"])
    return main


def dump(version, main):
    out = subprocess.run([containerd_binary(version), "--config", str(main), "config", "dump"], capture_output=True,
                         text=True, check=True, timeout=60).stdout
    return tomllib.loads(out)


def meaning(dumped):
    """A dump without the import paths (they name the two result directories), and without runtime
    options at their zero values (runc's options are a Go struct: absent means zero)."""
    out = {}
    for path, value in flat(dumped).items():
        if path[0] == "imports":
            continue
        if "options" in path[:-1] and path[path.index("options") - 2] == "runtimes" and value in ("", 0, False, {}):
            continue
        out[path] = value
    return out


def differences(a, b):
    fa, fb = meaning(a), meaning(b)
    return {path: (fa.get(path, "<absent>"), fb.get(path, "<absent>"))
            for path in set(fa) | set(fb) if fa.get(path, "<absent>") != fb.get(path, "<absent>")}


def get(tree, path):
    for key in path:
        tree = tree[key]
    return tree


# ------------------------------------------------------------------ containerd: where they agree

AGREE = [
    # fixture, containerd release whose `config dump` reads both results, CRI table in its dump
    ("containerd-1.6-default.toml", "1.6.20", CRI2),
    ("kubeadm-v2.toml", "1.7.24", CRI2),
    ("k3s-v2.toml", "1.7.24", CRI2),
    ("eks-mirrors-auth-v2.toml", "1.7.24", CRI2),
    ("containerd-1.7-default.toml", "1.7.24", CRI2),
]


@pytest.mark.parametrize("set_as_default", [True, False], ids=["default", "not-default"])
@pytest.mark.parametrize("name, version, cri", AGREE)
def test_containerd_same_effective_configuration(ctk, tmp_path, name, version, cri, set_as_default):
    """Drop-in on both sides (nvidia-ctk 1.18 writes one too, with the main file's CRI section
    copied in, as the project's editor does before containerd 2.1): the same nvidia runtime
    (runc.v2, BinaryName, runc's options), the same default runtime and CDI, nothing else changed.
    On 1.6 nvidia-ctk writes enable_cdi, which 1.6 drops, and the editor skips it (auto)."""
    theirs = dump(version, ctk_containerd(ctk, tmp_path, fixture(name), *(["--set-as-default"] if set_as_default
                                                                          else [])))
    ours = dump(version, ours_containerd(tmp_path, fixture(name), version, set_as_default=set_as_default))
    assert differences(theirs, ours) == {}
    nvidia = get(ours, cri + ("containerd", "runtimes", "nvidia"))
    assert nvidia["runtime_type"] == "io.containerd.runc.v2" and nvidia["options"]["BinaryName"] == RUNTIME
    default = get(ours, cri + ("containerd", "default_runtime_name"))
    assert default == ("nvidia" if set_as_default else "runc")
    if not version.startswith("1.6."):
        assert get(ours, cri + ("enable_cdi",)) is True


def test_both_copy_runc_options_before_containerd_21(ctk, tmp_path):
    """kubeadm's runc has SystemdCgroup = true: both give the nvidia runtime the same option."""
    for main in (ctk_containerd(ctk, tmp_path, fixture("kubeadm-v2.toml")),
                 ours_containerd(tmp_path, fixture("kubeadm-v2.toml"), "1.7.24")):
        assert get(dump("1.7.24", main), CRI2 + ("containerd", "runtimes", "nvidia", "options", "SystemdCgroup")) is True


# ------------------------------------------------------------------ containerd: differences


@pytest.mark.parametrize("name", ["rke2-v3.toml", "containerd-2.0-v3.toml", "containerd-2.1-default.toml"])
def test_containerd_21_same_effective_configuration(ctk, tmp_path, name):
    """containerd 2.1 merges imports: the drop-in's nvidia runtime carries runc's options itself
    (SystemdCgroup = true, sandboxer ...), as nvidia-ctk's does."""
    theirs = dump("2.1.9", ctk_containerd(ctk, tmp_path, fixture(name)))
    ours = dump("2.1.9", ours_containerd(tmp_path, fixture(name), "2.1.9"))
    assert differences(theirs, ours) == {}


def test_cdi_spec_dirs_written_by_ours_only(ctk, tmp_path):
    """The editor writes cdi_spec_dirs next to enable_cdi, naming the directories the toolkit's
    config.toml and the refresh units use, so the node does not depend on containerd's default;
    nvidia-ctk writes only enable_cdi. containerd 1.7's default is the same list: the effective
    configurations agree."""
    theirs = tomllib.loads((ctk_containerd(ctk, tmp_path, fixture("kubeadm-v2.toml")).parent / "conf.d" /
                            "99-nvidia.toml").read_text())
    ours = tomllib.loads((ours_containerd(tmp_path, fixture("kubeadm-v2.toml"), "1.7.24").parent / "conf.d" /
                          "99-nvidia.toml").read_text())
    assert "cdi_spec_dirs" not in get(theirs, CRI2) and get(theirs, CRI2)["enable_cdi"] is True
    assert get(ours, CRI2)["cdi_spec_dirs"] == ["/etc/cdi", "/var/run/cdi"] and get(ours, CRI2)["enable_cdi"] is True
    dumped = dump("1.7.24", tmp_path / "ctk" / "config.toml")
    assert get(dumped, CRI2 + ("cdi_spec_dirs",)) == ["/etc/cdi", "/var/run/cdi"]


def test_containerd_16_cdi_refused_by_ours(ctk, tmp_path):
    """containerd 1.6 has no CDI: nvidia-ctk --cdi.enabled writes enable_cdi anyway and 1.6 drops
    it without a word (it is not in the dump); the editor refuses enable_cdi=true, so a play that
    asks for CDI does not report success on a node that cannot do it (auto skips it with a warning)."""
    theirs = ctk_containerd(ctk, tmp_path, fixture("containerd-1.6-default.toml"))
    drop_in = tomllib.loads((theirs.parent / "conf.d" / "99-nvidia.toml").read_text())
    assert get(drop_in, CRI2)["enable_cdi"] is True
    assert "enable_cdi" not in get(dump("1.6.20", theirs), CRI2)
    with pytest.raises(ConfigError, match="does not support CDI"):
        containerd.configure(fixture("containerd-1.6-default.toml"), containerd_version="1.6.20", enable_cdi="true")
    auto = containerd.configure(fixture("containerd-1.6-default.toml"), containerd_version="1.6.20", enable_cdi="auto")
    assert auto["cdi"] is False and any("does not support CDI" in w for w in auto["warnings"])


def test_runc_kept_when_the_runtimes_table_is_new(ctk, tmp_path):
    """A configuration without a runtimes table (Debian 12's packaged one): a runtimes table in the
    drop-in replaces containerd's built-in one, which holds runc. The editor writes runc next to
    nvidia; nvidia-ctk does not, so its effective configuration has no runc at all and a default
    of runc names a runtime that is not there (the CRI plugin refuses to start)."""
    theirs = dump("1.6.20", ctk_containerd(ctk, tmp_path, fixture("debian12-packaged.toml"), cdi=False))
    ours = dump("1.6.20", ours_containerd(tmp_path, fixture("debian12-packaged.toml"), "1.6.20"))
    runtimes = CRI2 + ("containerd", "runtimes")
    assert sorted(get(theirs, runtimes)) == ["nvidia"]
    assert sorted(get(ours, runtimes)) == ["nvidia", "runc"]
    assert get(theirs, CRI2 + ("containerd", "default_runtime_name")) == "runc"
    assert {path[:len(runtimes) + 1] for path in differences(theirs, ours)} == {runtimes + ("runc",)}


def test_existing_nvidia_runtime_keeps_its_options(ctk, tmp_path):
    """A node that already has an nvidia runtime with options of its own (Root = /run/nvidia-runc):
    the editor keeps that entry and sets BinaryName; nvidia-ctk replaces it with a copy of runc's."""
    theirs = dump("1.7.24", ctk_containerd(ctk, tmp_path, fixture("existing-nvidia-v2.toml")))
    ours = dump("1.7.24", ours_containerd(tmp_path, fixture("existing-nvidia-v2.toml"), "1.7.24"))
    root = CRI2 + ("containerd", "runtimes", "nvidia", "options", "Root")
    assert differences(theirs, ours) == {root: ("<absent>", "/run/nvidia-runc")}


def test_existing_imports_are_kept(ctk, tmp_path):
    """The main file imports a drop-in of the operator's: the editor appends its glob to imports;
    nvidia-ctk 1.18.0 replaces the list with its own (its ensureImports reads the list as []string,
    which the TOML library never returns), so the operator's drop-in is no longer read."""
    extra = tmp_path / "extra"
    extra.mkdir()
    (extra / "10-oom.toml").write_text("version = 2\noom_score = -999\n")
    text = fixture("existing-nvidia-v2.toml").replace("/etc/containerd/extra/*.toml", str(extra / "*.toml"))
    theirs = ctk_containerd(ctk, tmp_path, text)
    ours = ours_containerd(tmp_path, text, "1.7.24")
    assert tomllib.loads(theirs.read_text())["imports"] == [str(theirs.parent / "conf.d" / "*.toml")]
    assert tomllib.loads(ours.read_text())["imports"] == [str(extra / "*.toml"), str(ours.parent / "conf.d" / "*.toml")]
    assert dump("1.7.24", theirs)["oom_score"] == 0
    assert dump("1.7.24", ours)["oom_score"] == -999


def test_disabled_cri_plugin_refused_by_ours(ctk, tmp_path):
    """disabled_plugins names the CRI plugin: nvidia-ctk adds the runtime to a plugin containerd
    never loads and reports success; the editor refuses, since Kubernetes could not use it."""
    theirs = ctk_containerd(ctk, tmp_path, fixture("cri-disabled-v2.toml"))
    drop_in = tomllib.loads((theirs.parent / "conf.d" / "99-nvidia.toml").read_text())
    assert get(drop_in, CRI2 + ("containerd", "runtimes", "nvidia", "options", "BinaryName")) == RUNTIME
    with pytest.raises(ConfigError, match="disables the CRI plugin"):
        containerd.configure(fixture("cri-disabled-v2.toml"), containerd_version="1.7.24")


def test_not_default_leaves_an_existing_nvidia_default(ctk, tmp_path):
    """The node already runs nvidia as its default runtime: without --set-as-default nvidia-ctk
    removes default_runtime_name (back to runc); the editor's set_as_default=false means "do not
    manage the default" and leaves it."""
    text = fixture("kubeadm-v2.toml").replace('default_runtime_name = "runc"', 'default_runtime_name = "nvidia"')
    text += ('\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n'
             '  runtime_type = "io.containerd.runc.v2"\n'
             '[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]\n'
             '  BinaryName = "%s"\n  SystemdCgroup = true\n' % RUNTIME)
    assert text.count("default_runtime_name") == 1
    theirs = dump("1.7.24", ctk_containerd(ctk, tmp_path, text))
    ours = dump("1.7.24", ours_containerd(tmp_path, text, "1.7.24", set_as_default=False))
    default = CRI2 + ("containerd", "default_runtime_name")
    assert differences(theirs, ours) == {default: ("runc", "nvidia")}


def test_version_1_drop_in(ctk, tmp_path):
    """A version 1 configuration cannot import drop-ins: nvidia-ctk still writes its (complete) file
    to the drop-in path and leaves the main file alone, so nothing reads it and the effective
    configuration has no nvidia runtime; the editor refuses drop-in mode for version 1 and says to
    edit in place."""
    theirs = ctk_containerd(ctk, tmp_path, fixture("v1-legacy.toml"), cdi=False)
    assert theirs.read_text() == fixture("v1-legacy.toml")
    assert "nvidia" in (theirs.parent / "conf.d" / "99-nvidia.toml").read_text()
    assert "nvidia" not in get(dump("1.6.20", theirs), CRI2 + ("containerd", "runtimes"))
    with pytest.raises(ConfigError, match="version 1 configuration"):
        containerd.configure(fixture("v1-legacy.toml"), containerd_version="1.6.20", enable_cdi="false")


def test_runtime_named_nvidia_that_is_not_nvidias(ctk, tmp_path):
    """A runtime already called nvidia runs something else: nvidia-ctk replaces it; the editor
    refuses, naming the runtime, rather than take over an operator's runtime."""
    text = fixture("kubeadm-v2.toml") + ('\n[plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]\n'
                                         '  runtime_type = "io.containerd.kata.v2"\n')
    theirs = dump("1.7.24", ctk_containerd(ctk, tmp_path, text))
    nvidia = get(theirs, CRI2 + ("containerd", "runtimes", "nvidia"))
    assert nvidia["runtime_type"] == "io.containerd.runc.v2" and nvidia["options"]["BinaryName"] == RUNTIME
    with pytest.raises(ConfigError, match="already defines a runtime 'nvidia'"):
        containerd.configure(text, containerd_version="1.7.24")


def test_default_drop_in_paths(ctk, tmp_path):
    """Where each puts the drop-in by default: nvidia-ctk /etc/containerd/config.d/99-nvidia.toml,
    the editor /etc/containerd/conf.d/99-nvidia.toml; both add the matching glob to imports, so
    either file is read (two NVIDIA drop-ins on one node would both be)."""
    main = tmp_path / "config.toml"
    main.write_text(fixture("kubeadm-v2.toml"))
    res = run_ctk(ctk, "--runtime=containerd", "--config=%s" % main, "--dry-run")
    assert 'imports = ["/etc/containerd/config.d/*.toml"]' in res.stdout
    assert main.read_text() == fixture("kubeadm-v2.toml")  # --dry-run writes nothing
    plan = containerd.configure(fixture("kubeadm-v2.toml"), containerd_version="1.7.24")
    assert tomllib.loads(plan["main"])["imports"] == ["/etc/containerd/conf.d/*.toml"]


def test_main_file_text(ctk, tmp_path):
    """Not a difference in meaning, one in what the operator sees: nvidia-ctk writes the main file
    anew (comments and layout gone, defaults it knows spelled out), the editor adds one imports
    line and keeps every other byte."""
    original = fixture("containerd-1.7-default.toml")
    theirs = ctk_containerd(ctk, tmp_path, original).read_text()
    ours = ours_containerd(tmp_path, original, "1.7.24").read_text()
    assert "# containerd config default" not in theirs
    kept = [line for line in original.splitlines() if not line.startswith("imports")]
    assert [line for line in ours.splitlines() if not line.startswith("imports")] == kept


# ------------------------------------------------------------------ Docker

DAEMON = {"log-driver": "journald", "registry-mirrors": ["https://mirror.example.com"], "live-restore": True}


def ctk_docker(ctk, path, *flags):
    run_ctk(ctk, "--runtime=docker", "--config=%s" % path, *flags)
    return json.loads(path.read_text())


def validate(path):
    dockerd = release("trixie", "dockerd")
    env = dict(os.environ, PATH=os.pathsep.join([os.path.dirname(dockerd), os.environ["PATH"]]))
    res = subprocess.run([dockerd, "--validate", "--config-file", str(path)], capture_output=True, text=True,
                         env=env, check=False, timeout=60)
    assert res.returncode == 0, res.stderr


@pytest.mark.parametrize("set_as_default", [True, False], ids=["default", "not-default"])
def test_docker_same_meaning(ctk, tmp_path, set_as_default):
    """daemon.json: the same runtime path, default runtime and features.cdi, every other key kept.
    nvidia-ctk also writes "args": [] into the runtime entry, a key Docker ignores (its runtime
    options are path and runtimeArgs): dockerd --validate accepts both files."""
    theirs_file = tmp_path / "ctk.json"
    theirs_file.write_text(json.dumps(DAEMON))
    theirs = ctk_docker(ctk, theirs_file, "--nvidia-runtime-path=%s" % RUNTIME, "--cdi.enabled",
                        *(["--set-as-default"] if set_as_default else []))
    ours = json.loads(docker.configure(json.dumps(DAEMON), set_as_default=set_as_default, enable_cdi=True)["text"])
    assert theirs["runtimes"]["nvidia"].pop("args") == []
    assert theirs == ours
    assert ours["runtimes"] == {"nvidia": {"path": RUNTIME}} and ours["features"] == {"cdi": True}
    assert ("default-runtime" in ours) is set_as_default
    ours_file = tmp_path / "ours.json"
    ours_file.write_text(json.dumps(ours))
    validate(theirs_file)
    validate(ours_file)


def test_docker_runtime_args_kept(ctk, tmp_path):
    """An nvidia runtime entry with runtimeArgs of the operator's: the editor sets path and keeps
    them; nvidia-ctk replaces the entry (path and an empty args), so the arguments are gone."""
    daemon = dict(DAEMON, runtimes={"nvidia": {"path": "/opt/nvidia/nvidia-container-runtime",
                                               "runtimeArgs": ["--debug"]}})
    path = tmp_path / "daemon.json"
    path.write_text(json.dumps(daemon))
    theirs = ctk_docker(ctk, path, "--nvidia-runtime-path=%s" % RUNTIME)
    ours = json.loads(docker.configure(json.dumps(daemon), enable_cdi=False)["text"])
    assert theirs["runtimes"]["nvidia"] == {"args": [], "path": RUNTIME}
    assert ours["runtimes"]["nvidia"] == {"path": RUNTIME, "runtimeArgs": ["--debug"]}


def test_docker_other_features_kept(ctk, tmp_path):
    """features holds other flags (BuildKit): the editor adds cdi to them; nvidia-ctk 1.18.0 writes
    features anew with cdi alone, so BuildKit is switched off."""
    daemon = dict(DAEMON, features={"buildkit": True})
    path = tmp_path / "daemon.json"
    path.write_text(json.dumps(daemon))
    theirs = ctk_docker(ctk, path, "--nvidia-runtime-path=%s" % RUNTIME, "--cdi.enabled")
    ours = json.loads(docker.configure(json.dumps(daemon), enable_cdi=True)["text"])
    assert theirs["features"] == {"cdi": True}
    assert ours["features"] == {"buildkit": True, "cdi": True}


def test_docker_default_runtime_path(ctk, tmp_path):
    """Without a runtime path nvidia-ctk writes the bare name nvidia-container-runtime (dockerd
    looks it up in its own PATH); the editor writes /usr/bin/nvidia-container-runtime, where the
    toolkit package installs it, so the runtime does not depend on dockerd's environment."""
    path = tmp_path / "daemon.json"
    path.write_text("{}")
    assert ctk_docker(ctk, path)["runtimes"]["nvidia"]["path"] == "nvidia-container-runtime"
    assert json.loads(docker.configure("{}")["text"])["runtimes"]["nvidia"]["path"] == RUNTIME


def test_docker_runtime_named_nvidia_that_is_not_nvidias(ctk, tmp_path):
    """A runtime called nvidia that runs something else: nvidia-ctk replaces it, the editor refuses."""
    daemon = dict(DAEMON, runtimes={"nvidia": {"path": "/usr/local/bin/kata-runtime"}})
    path = tmp_path / "daemon.json"
    path.write_text(json.dumps(daemon))
    assert ctk_docker(ctk, path)["runtimes"]["nvidia"]["path"] == "nvidia-container-runtime"
    with pytest.raises(ConfigError, match="not NVIDIA's"):
        docker.configure(json.dumps(daemon))


# ------------------------------------------------------------------ CRI-O

# A crio.conf in the shape of CRI-O 1.3x's own (crun the default runtime, conmon its monitor)
CRIO_CONF = """\
[crio]
log_dir = "/var/log/crio/pods"

[crio.runtime]
default_runtime = "crun"
cgroup_manager = "systemd"

[crio.runtime.runtimes.crun]
runtime_path = "/usr/libexec/crio/crun"
runtime_type = "oci"
runtime_root = "/run/crun"
monitor_path = "/usr/libexec/crio/conmon"
monitor_cgroup = "system.slice"
monitor_env = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]
allowed_annotations = ["io.containers.trace-syscall"]

[crio.image]
pause_image = "registry.example.com/pause:3.10"
"""


def ctk_crio(ctk, tmp_path, *flags):
    main = tmp_path / "crio.conf"
    main.write_text(CRIO_CONF)
    drop_in = tmp_path / "crio.conf.d" / "99-nvidia.toml"
    res = run_ctk(ctk, "--runtime=crio", "--config=%s" % main, "--drop-in-config=%s" % drop_in,
                  "--nvidia-runtime-path=%s" % RUNTIME, *flags)
    assert main.read_text() == CRIO_CONF  # both leave crio.conf alone
    return tomllib.loads(drop_in.read_text()), res


@pytest.mark.parametrize("set_as_default", [True, False], ids=["default", "not-default"])
def test_crio_same_handler_and_default(ctk, tmp_path, set_as_default):
    """The handler's runtime_path and runtime_type and the default runtime agree; CDI needs no
    setting (nvidia-ctk ignores --cdi.enabled for CRI-O, which enables CDI itself)."""
    theirs, res = ctk_crio(ctk, tmp_path, "--cdi.enabled",
                           *(["--set-as-default"] if set_as_default else []))
    assert "Ignoring cdi.enabled flag for crio" in res.stderr
    ours = tomllib.loads(crio.drop_in(set_as_default=set_as_default))
    for drop_in in (theirs, ours):
        handler = drop_in["crio"]["runtime"]["runtimes"]["nvidia"]
        assert (handler["runtime_path"], handler["runtime_type"]) == (RUNTIME, "oci")
        assert drop_in["crio"]["runtime"].get("default_runtime") == ("nvidia" if set_as_default else None)


def test_crio_handler_copies_the_default_runtimes_settings(ctk, tmp_path):
    """nvidia-ctk builds the nvidia handler from a copy of the default runtime's (crun here, as in
    CRI-O's own configuration): its runtime_root (/run/crun), monitor settings and
    allowed_annotations come along. The editor writes runtime_path and runtime_type only, so the handler gets CRI-O's
    defaults (its own runtime_root, no extra annotations) and nothing of another runtime's state."""
    theirs, _res = ctk_crio(ctk, tmp_path)
    handler = theirs["crio"]["runtime"]["runtimes"]["nvidia"]
    assert handler == {"runtime_path": RUNTIME, "runtime_type": "oci", "runtime_root": "/run/crun",
                       "monitor_path": "/usr/libexec/crio/conmon", "monitor_cgroup": "system.slice",
                       "monitor_env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
                       "allowed_annotations": ["io.containers.trace-syscall"]}
    ours = tomllib.loads(crio.drop_in())["crio"]["runtime"]["runtimes"]["nvidia"]
    assert ours == {"runtime_path": RUNTIME, "runtime_type": "oci"}


def test_crio_default_drop_in_path(ctk, tmp_path):
    """nvidia-ctk's default drop-in is /etc/crio/conf.d/99-nvidia.toml, a directory CRI-O does not
    read unless told (its --config-dir default is /etc/crio/crio.conf.d); the editor writes
    /etc/crio/crio.conf.d/99-nvidia.toml. Seen in a private mount namespace with a scratch /etc."""
    if os.geteuid() != 0:
        pytest.fail("needs root (a mount namespace with its own /etc)", pytrace=False)
    script = ('mount -t tmpfs gpuops /etc && mkdir /etc/crio && cat > /etc/crio/crio.conf && "$0" runtime configure '
              '--runtime=crio --config=/etc/crio/crio.conf >/dev/null 2>&1 && find /etc/crio -type f | sort')
    res = subprocess.run(["unshare", "--mount", "--propagation", "private", "sh", "-c", script, ctk],
                         input=CRIO_CONF, capture_output=True, text=True, check=False,
                         timeout=60)
    assert res.returncode == 0, res.stderr
    assert res.stdout.split() == ["/etc/crio/conf.d/99-nvidia.toml", "/etc/crio/crio.conf"]
    assert crio.DEFAULT_SOURCE == "/etc/crio/crio.conf.d/99-nvidia.toml"

# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""runtime_config's entry point: every argument combination the argspec allows but the editors
refuse ends in fail_json naming the option and the fix - never a traceback - and nothing is
written."""
from __future__ import annotations

import json
import os

import pytest

from ansible_collections.gpuops.nvidia.plugins.modules import runtime_config

REFUSED = [
    # (runtime, args, option, start of the message)
    ("docker", {"runtime_name": "runc"}, "runtime_name", "runtime_name: 'runc' is Docker's own runtime"),
    ("docker", {"runtime_name": ""}, "runtime_name", "runtime_name: '' is not a valid runtime handler name"),
    ("docker", {"runtime_name": "io.containerd.runc.v2"}, "runtime_name", "runtime_name: 'io.containerd.runc.v2' is not"),
    ("docker", {"runtime_name": "my gpu"}, "runtime_name", "runtime_name: 'my gpu' is not a valid runtime handler"),
    ("docker", {"runtime_path": ""}, "runtime_path", "runtime_path: must be the path"),
    ("docker", {"edit_mode": "in_place"}, "edit_mode", "edit_mode: in_place is for containerd"),
    ("containerd", {"runtime_name": "", "edit_mode": "in_place"}, "runtime_name", "runtime_name: '' is not a valid"),
    ("containerd", {"runtime_name": "runc", "edit_mode": "in_place"}, "runtime_name",
     "runtime_name: 'runc' is containerd's own runtime"),
    ("containerd", {"runtime_name": "runc"}, "runtime_name", "runtime_name: 'runc' is containerd's own runtime"),
    ("containerd", {"runtime_name": 'nv"idia'}, "runtime_name", "runtime_name: 'nv\"idia' is not a valid"),
    ("containerd", {"runtime_path": ""}, "runtime_path", "runtime_path: must be the path"),
    ("containerd", {"containerd_version": "1.6.20", "enable_cdi": "true"}, "enable_cdi",
     "enable_cdi: containerd 1.6.20 does not support CDI"),
    ("containerd", {"containerd_version": "latest"}, "containerd_version",
     "containerd_version: cannot read a containerd version from 'latest'"),
    ("crio", {"runtime_name": "runc"}, "runtime_name", "runtime_name: 'runc' is CRI-O's own runtime"),
    ("crio", {"runtime_name": "crun"}, "runtime_name", "runtime_name: 'crun' is CRI-O's own runtime"),
    ("crio", {"runtime_name": "nvidia legacy"}, "runtime_name", "runtime_name: 'nvidia legacy' is not a valid"),
    ("crio", {"runtime_path": ""}, "runtime_path", "runtime_path: must be the path"),
    ("crio", {"edit_mode": "in_place"}, "edit_mode", "edit_mode: in_place is for containerd"),
    ("crio", {"handler_options": {"monitor_pth": "/usr/bin/conmon"}}, "handler_options",
     "handler_options: CRI-O 1.34 has no runtime handler field monitor_pth"),
    ("crio", {"handler_options": {"monitor_env": [1, 2]}}, "handler_options",
     "handler_options: monitor_env entries must look like NAME=value, not 1"),
    ("crio", {"handler_options": {"monitor_path": ["/x"]}}, "handler_options",
     "handler_options: monitor_path must be an absolute path"),
    ("crio", {"handler_options": {"monitor_cgroup": 5}}, "handler_options", "handler_options: monitor_cgroup must be a string"),
    ("crio", {"handler_options": {"runtime_path": "/evil"}}, "handler_options",
     "handler_options: runtime_path is not a handler option here"),
    ("containerd", {"drop_in_path": "CONFIG"}, "drop_in_path", "drop_in_path: is the main configuration file"),
    ("crio", {"drop_in_path": "CONFIG"}, "drop_in_path", "drop_in_path: is the main configuration file"),
    ("crio", {"handler_options": {"monitor_path": "/nonexistent/conmon"}}, "handler_options",
     "handler_options: the NVIDIA handler would stop CRI-O from starting"),
]


def paths(tmp_path, runtime):
    base = tmp_path / runtime
    base.mkdir()
    config = {"containerd": "config.toml", "crio": "crio.conf", "docker": "daemon.json"}[runtime]
    return {"config_path": str(base / config), "drop_in_path": str(base / "conf.d" / "99-nvidia.toml"),
            "state_dir": str(tmp_path / "state")}


@pytest.mark.parametrize("runtime, args, option, message", REFUSED)
def test_refused_options_fail_cleanly(run_module, tmp_path, runtime, args, option, message):
    full = dict(paths(tmp_path, runtime), runtime=runtime, validate=False)
    if runtime == "containerd":
        full["containerd_version"] = "1.7.24"
    full.update(args)
    if full.get("drop_in_path") == "CONFIG":
        full["drop_in_path"] = full["config_path"]
    failed, result = run_module(runtime_config.main, full)
    assert failed is True
    assert result["msg"].startswith(message), result["msg"]
    assert result.get("option") == option
    assert not os.listdir(tmp_path / runtime)  # nothing written


def test_a_malformed_file_fails_with_its_position(run_module, tmp_path):
    args = paths(tmp_path, "docker")
    with open(args["config_path"], "w") as handle:
        handle.write('{"log-level": "warn",\n  "debug": tru}\n')
    failed, result = run_module(runtime_config.main, dict(args, runtime="docker", validate=False))
    assert failed and result["msg"].startswith(args["config_path"] + ": line 2, column 12: ")


def test_an_unreadable_record_fails_with_its_path(run_module, tmp_path):
    args = paths(tmp_path, "docker")
    os.makedirs(args["state_dir"])
    record = os.path.join(args["state_dir"], "docker%s.json" % args["config_path"].replace(os.sep, "_"))
    with open(record, "w") as handle:
        handle.write("{not json")
    failed, result = run_module(runtime_config.main, dict(args, runtime="docker", validate=False, state="absent"))
    assert failed and result["msg"].startswith(record + ": the record of what gpuops.nvidia added is not valid JSON")


def test_docker_record_is_written_and_absent_takes_back_exactly_that(run_module, tmp_path):
    args = dict(paths(tmp_path, "docker"), runtime="docker", validate=False)
    with open(args["config_path"], "w") as handle:
        handle.write('{"features": {"buildkit": true}}\n')
    failed, present = run_module(runtime_config.main, args, diff=True)
    assert not failed and present["changed"] and len(present["state_files"]) == 1
    assert present["diff"][0]["before_header"] == args["config_path"]
    failed, again = run_module(runtime_config.main, args)
    assert again["changed"] is False
    failed, absent = run_module(runtime_config.main, dict(args, state="absent"))
    assert absent["changed"] and absent["state_files"] == present["state_files"]
    with open(args["config_path"]) as handle:
        assert json.load(handle) == {"features": {"buildkit": True}}
    assert not os.path.exists(present["state_files"][0])


def test_check_mode_writes_nothing(run_module, tmp_path):
    args = dict(paths(tmp_path, "containerd"), validate=False, containerd_version="1.7.24")
    failed, result = run_module(runtime_config.main, args, check_mode=True, diff=True)
    assert not failed and result["changed"] and result["diff"]
    assert not os.listdir(tmp_path / "containerd")


def test_absent_of_nothing_needs_no_tomlkit(run_module, tmp_path, monkeypatch):
    """A second state=absent after the role removed python3-tomlkit with the toolkit."""
    from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime import containerd
    monkeypatch.setattr(containerd, "HAS_TOMLKIT", False)
    args = dict(paths(tmp_path, "containerd"), validate=False, containerd_version="1.7.24", state="absent")
    with open(args["config_path"], "w") as handle:
        handle.write('version = 2\n[plugins."io.containerd.grpc.v1.cri"]\n  sandbox_image = "pause:3.9"\n')
    failed, result = run_module(runtime_config.main, args)
    assert not failed and result["changed"] is False
    # with something of ours still there, tomlkit is needed and its absence is said
    with open(args["config_path"], "a") as handle:
        handle.write('imports = ["/etc/containerd/conf.d/*.toml"] # gpuops.nvidia\n')
    failed, result = run_module(runtime_config.main, args)
    assert failed and "tomlkit" in result["msg"]


def test_a_docker_shim_runtime_is_not_taken_over(run_module, tmp_path):
    """Docker 23+ runtimes can name a containerd shim (runtimeType) instead of a path."""
    args = dict(paths(tmp_path, "docker"), runtime="docker", validate=False, runtime_name="kata")
    with open(args["config_path"], "w") as handle:
        json.dump({"runtimes": {"kata": {"runtimeType": "io.containerd.kata.v2"}}}, handle)
    failed, result = run_module(runtime_config.main, args)
    assert failed and result["msg"].startswith("runtime_name: the Docker configuration already defines a runtime 'kata' "
                                               "(io.containerd.kata.v2) that is not NVIDIA's")


@pytest.mark.parametrize("runtime", ["containerd", "crio"])
def test_a_drop_in_the_module_did_not_write_is_kept(run_module, tmp_path, runtime):
    args = dict(paths(tmp_path, runtime), runtime=runtime, validate=False)
    if runtime == "containerd":
        args["containerd_version"] = "1.7.24"
    os.makedirs(os.path.dirname(args["drop_in_path"]))
    own = '[crio.runtime]\nlog_level = "debug"\n' if runtime == "crio" else "version = 2\n"
    with open(args["drop_in_path"], "w") as handle:
        handle.write(own)
    failed, result = run_module(runtime_config.main, args)
    assert failed and result["option"] == "drop_in_path" and "was not written by this module" in result["msg"]
    failed, result = run_module(runtime_config.main, dict(args, state="absent"))
    assert not failed and result["changed"] is False
    assert any("was not written by this module" in warning for warning in result.get("warnings", []))
    with open(args["drop_in_path"]) as handle:
        assert handle.read() == own


def test_a_refused_option_is_named_as_the_caller_names_it(run_module, tmp_path):
    """A role passes its variables' names: the error names what the role's user sets, the result
    keeps the module's own option name, and nothing is written."""
    args = dict(paths(tmp_path, "crio"), runtime="crio", validate=False, edit_mode="in_place",
                option_names={"edit_mode": "container_toolkit_edit_mode"})
    failed, result = run_module(runtime_config.main, args)
    assert failed and result["option"] == "edit_mode"
    assert result["msg"].startswith("container_toolkit_edit_mode: in_place is for containerd"), result["msg"]
    assert not os.path.exists(args["drop_in_path"])
    failed, result = run_module(runtime_config.main, dict(args, option_names={}))
    assert failed and result["msg"].startswith("edit_mode: in_place is for containerd"), result["msg"]

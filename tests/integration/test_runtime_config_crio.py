# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpuops.nvidia.runtime_config for CRI-O through `ansible localhost -m`, on a host laid out like
CRI-O's upstream packages (conmon in usr/libexec/crio, not in $PATH), with the real CRI-O 1.34
(tests/lab/go-binaries) checking the result twice: the module's own `crio config` validation,
and here the daemon's start-up checks, which are what refuse a handler without conmon."""
from __future__ import annotations

import os
import tomllib

import pytest

from conftest import require, tree_digest  # pylint: disable=import-error
from crio_check import UpstreamHost, crio_binary  # pylint: disable=import-error

CRIO = crio_binary()


@pytest.fixture
def host(tmp_path):
    require(CRIO and os.access(CRIO, os.X_OK), "crio", "tests/lab/go-binaries crio builds it")
    upstream = UpstreamHost(tmp_path, CRIO)
    upstream.etc = tmp_path / "etc" / "crio"
    (upstream.etc / "crio.conf.d").mkdir(parents=True)
    (upstream.etc / "crio.conf.d" / "10-crio.conf").write_text(upstream.upstream)
    return upstream


def run(lab, host, extra="", expect_failure=False, check_mode=False):
    args = ("runtime=crio config_path=%s/crio.conf drop_in_path=%s/crio.conf.d/99-nvidia.toml runtime_path=%s "
            "state_dir=%s %s" % (host.etc, host.etc, host.nvidia, host.tmp / "state", extra))
    # the crio binary on PATH: the module validates with `crio config`
    return lab.module("l40s-x4", module="gpuops.nvidia.runtime_config", args=args, expect_failure=expect_failure,
                      check_mode=check_mode, env={"PATH": os.path.dirname(CRIO) + os.pathsep + os.environ["PATH"]})


def drop_ins(host):
    base = host.etc / "crio.conf.d"
    return {str(path.relative_to(base)): path.read_text() for path in sorted(base.rglob("*")) if path.is_file()}


def test_the_handler_starts_crio_from_the_upstream_packages(lab, host):
    result = run(lab, host, "set_as_default=true")
    assert result["changed"] is True and result["restart_required"] is True
    assert result["handler_from"] == {"runtime": "crun", "from": "%s/crio.conf.d/10-crio.conf" % host.etc}
    written = tomllib.loads((host.etc / "crio.conf.d" / "99-nvidia.toml").read_text())
    assert written["crio"]["runtime"]["runtimes"]["nvidia"] == {
        "runtime_path": host.nvidia, "runtime_type": "oci", "runtime_root": "/run/crun",
        "monitor_path": host.conmon, "allowed_annotations": ["io.containers.trace-syscall"]}
    # CRI-O's own start-up checks pass: conmon is found through the copied monitor_path
    rc, config, error, _warnings = host.start(None, drop_ins(host))
    assert (rc, error) == (0, "")
    nvidia = tomllib.loads(config)["crio"]["runtime"]["runtimes"]["nvidia"]
    assert nvidia["monitor_path"] == host.conmon and nvidia["runtime_path"] == host.nvidia
    assert tomllib.loads(config)["crio"]["runtime"]["default_runtime"] == "nvidia"
    assert run(lab, host, "set_as_default=true")["changed"] is False


def test_without_the_copied_monitor_fields_crio_would_not_start(host):
    """What the editor wrote before (runtime_path and runtime_type only) on the same host: the
    failure the copied fields prevent."""
    rc, _config, error, _warnings = host.start(None, dict(drop_ins(host), **{"99-nvidia.toml": host.nvidia_drop_in()}))
    assert rc == 1 and "failed to translate monitor fields for runtime nvidia" in error


def test_handler_options_override_what_is_copied(lab, host):
    result = run(lab, host, "handler_options='{\"monitor_cgroup\": \"pod\", \"runtime_root\": null}'")
    assert result["handler"] == {"monitor_path": host.conmon, "monitor_cgroup": "pod",
                                 "allowed_annotations": ["io.containers.trace-syscall"]}
    assert host.start(None, drop_ins(host)).rc == 0


def test_a_handler_crio_would_refuse_is_not_written(lab, host):
    before = tree_digest(str(host.etc))
    result = run(lab, host, "handler_options='{\"monitor_path\": \"/nonexistent/conmon\"}'", expect_failure=True)
    assert result["msg"].startswith("handler_options: the NVIDIA handler would stop CRI-O from starting (the handler's "
                                    "monitor_path /nonexistent/conmon is no executable file on this node)")
    assert result["option"] == "handler_options"
    assert tree_digest(str(host.etc)) == before


@pytest.mark.parametrize("name, text, where", [
    ("50-broken.conf", '[crio.runtime]\nlog_level = "info\n', "line 2, column 18"),
    ("sub/20-broken.conf", '[crio.runtime.runtimes.kata\nruntime_path = "/x"\n', "line 1, column 28"),
])
def test_a_malformed_neighbour_is_named_with_line_and_column(lab, host, name, text, where):
    path = host.etc / "crio.conf.d" / name
    path.parent.mkdir(exist_ok=True)
    path.write_text(text)
    before = tree_digest(str(host.etc))
    result = run(lab, host, expect_failure=True)
    assert result["msg"].startswith("%s: %s: " % (path, where)), result["msg"]
    assert result["msg"].endswith("; the file was left unchanged")
    assert tree_digest(str(host.etc)) == before


def test_a_malformed_drop_in_is_named_as_itself(lab, host):
    drop_in = host.etc / "crio.conf.d" / "99-nvidia.toml"
    drop_in.write_text('[crio.runtime.runtimes.nvidia]\nruntime_path = \n')
    result = run(lab, host, expect_failure=True)
    assert result["msg"].startswith("%s: line 2, column 16: " % drop_in)


def test_backups_are_kept_out_of_the_drop_in_directory(lab, host):
    """CRI-O reads every file of crio.conf.d, a backup too (after the file it copies, so it would win)."""
    run(lab, host)
    result = run(lab, host, "set_as_default=true backup=true")
    assert len(result["backups"]) == 1
    assert result["backups"][0].startswith(str(host.tmp / "state" / "backups") + "/99-nvidia.toml.")
    assert sorted(drop_ins(host)) == ["10-crio.conf", "99-nvidia.toml"]


def test_absent_removes_the_drop_in_and_check_mode_changes_nothing(lab, host):
    before = tree_digest(str(host.etc))
    planned = run(lab, host, check_mode=True)
    assert planned["changed"] is True and tree_digest(str(host.etc)) == before
    run(lab, host)
    gone = run(lab, host, "state=absent")
    assert gone["changed"] is True and sorted(drop_ins(host)) == ["10-crio.conf"]
    assert host.start(None, drop_ins(host)).rc == 0


def test_crio_rejects_what_the_module_would_write_when_the_default_is_unknown(lab, host):
    """A neighbour that names a default runtime no file defines: `crio config` (the module's
    validation) refuses the merged result, so nothing is written."""
    (host.etc / "crio.conf.d" / "50-default.conf").write_text('[crio.runtime]\ndefault_runtime = "kata"\n')
    before = tree_digest(str(host.etc))
    result = run(lab, host, expect_failure=True)
    assert result["msg"] == ('the planned CRI-O configuration is not valid, nothing was changed: CRI-O rejected the '
                             'planned configuration: validating runtime config: default_runtime set to "kata", but no '
                             'runtime entry table [crio.runtime.runtimes.kata] was found')
    assert tree_digest(str(host.etc)) == before

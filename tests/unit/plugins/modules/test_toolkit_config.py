# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""toolkit_config's entry point: the keys it manages, check mode, diff, idempotence, and a
malformed file refused with its position."""
from __future__ import annotations

import pytest

from ansible_collections.gpuops.nvidia.plugins.modules import toolkit_config

CONFIG = """disable-require = false
# operator's comment

[nvidia-container-runtime]
log-level = "info"
mode = "auto"
runtimes = ["docker-runc", "runc", "crun"]

[nvidia-container-runtime.modes.cdi]
default-kind = "nvidia.com/gpu"
spec-dirs = ["/etc/cdi", "/var/run/cdi"]
"""


@pytest.fixture
def path(tmp_path):
    target = tmp_path / "config.toml"
    target.write_text(CONFIG)
    return target


def test_check_mode_diff_apply_and_idempotence(run_module, path):
    args = {"path": str(path), "mode": "cdi", "cdi_spec_dirs": ["/etc/cdi"]}
    failed, planned = run_module(toolkit_config.main, args, check_mode=True, diff=True)
    assert not failed and planned["changed"] is True
    assert path.read_text() == CONFIG  # check mode wrote nothing
    assert '-mode = "auto"' not in planned["diff"]["before"] and 'mode = "cdi"' in planned["diff"]["after"]
    failed, applied = run_module(toolkit_config.main, args)
    assert applied["changed"] is True and applied["settings"] == {"mode": "cdi", "cdi_spec_dirs": ["/etc/cdi"]}
    text = path.read_text()
    assert "# operator's comment" in text and 'runtimes = ["docker-runc", "runc", "crun"]' in text
    assert 'mode = "cdi"' in text and 'spec-dirs = ["/etc/cdi"]' in text
    failed, again = run_module(toolkit_config.main, args)
    assert again["changed"] is False and path.read_text() == text


def test_unset_options_leave_keys_alone(run_module, path):
    failed, result = run_module(toolkit_config.main, {"path": str(path), "log_level": "debug"})
    assert result["changed"] and path.read_text() == CONFIG.replace('log-level = "info"', 'log-level = "debug"')


def test_backup(run_module, path):
    failed, result = run_module(toolkit_config.main, {"path": str(path), "mode": "legacy", "backup": True})
    assert open(result["backup_file"]).read() == CONFIG


def test_malformed_file(run_module, path):
    path.write_text('[nvidia-container-runtime]\nmode = "cdi\n')
    failed, result = run_module(toolkit_config.main, {"path": str(path), "mode": "cdi"})
    assert failed and result["msg"].startswith("%s: line 2, column " % path)
    assert path.read_text() == '[nvidia-container-runtime]\nmode = "cdi\n'

# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpuops.nvidia.toolkit_config through `ansible localhost -m`: check mode changes nothing, the
diff shows the change, a second run changes nothing, and the toolkit's other keys and comments
stay. The file is the one NVIDIA's own `nvidia-ctk config` writes for toolkit 1.18.0 (the lab's
toolkit package generates it that way)."""
from __future__ import annotations

import json
import os
import subprocess
import tomllib

from conftest import BIN, REPO, _env, tree_digest  # pylint: disable=import-error

GO_BINARIES = os.path.join(REPO, "tests", "lab", "go-binaries")


def nvidia_ctk_default_config(tmp_path):
    """config.toml as `nvidia-ctk config --config-file F --in-place` writes it (NVIDIA's defaults)."""
    ctk = os.path.join(subprocess.run([GO_BINARIES, "--dir", "toolkit-1.18.0"], capture_output=True, text=True,
                                      check=True).stdout.strip(), "nvidia-ctk")
    path = tmp_path / "config.toml"
    subprocess.run([ctk, "config", "--config-file", str(path), "--in-place"], check=True, capture_output=True)
    return path


def ansible(args, check=False, diff=False):
    argv = [os.path.join(BIN, "ansible"), "localhost", "-m", "gpuops.nvidia.toolkit_config", "-a", args]
    argv += (["--check"] if check else []) + (["--diff"] if diff else [])
    return subprocess.run(argv, capture_output=True, text=True, env=_env(ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default"),
                          check=False)


def test_check_mode_diff_apply_and_idempotence(tmp_path):
    path = nvidia_ctk_default_config(tmp_path)
    original = path.read_text()
    before = tomllib.loads(original)
    args = "path=%s mode=cdi cdi_spec_dirs=/etc/cdi,/var/run/cdi" % path
    digest = tree_digest(str(tmp_path))
    planned = ansible(args, check=True, diff=True)
    assert planned.returncode == 0 and "changed: [localhost]" in planned.stdout, planned.stdout
    assert '+mode = "cdi"' in planned.stdout and '-mode = "auto"' in planned.stdout
    assert tree_digest(str(tmp_path)) == digest  # check mode wrote nothing
    applied = ansible(args)
    assert applied.returncode == 0 and "changed: [localhost]" in applied.stdout
    after = tomllib.loads(path.read_text())
    assert after["nvidia-container-runtime"]["mode"] == "cdi"
    assert after["nvidia-container-runtime"]["modes"]["cdi"]["spec-dirs"] == ["/etc/cdi", "/var/run/cdi"]
    # everything else NVIDIA's default configuration has is still there
    for table in ("nvidia-container-cli", "nvidia-ctk"):
        assert after[table] == before[table]
    again = ansible(args, diff=True)
    assert again.returncode == 0 and "ok: [localhost]" in again.stdout and "--- before" not in again.stdout


def test_an_invalid_mode_is_refused_and_nothing_changes(tmp_path):
    path = nvidia_ctk_default_config(tmp_path)
    digest = tree_digest(str(tmp_path))
    result = ansible("path=%s mode=cuda" % path)
    assert result.returncode != 0 and "value of mode must be one of: auto, legacy, cdi, csv" in result.stdout
    assert tree_digest(str(tmp_path)) == digest


def test_the_toolkit_version_is_nvidia_ctks_own(tmp_path):
    """NVIDIA's nvidia-ctk 1.18.0 on the PATH: its --version is the reported version; none without it."""
    ctk_dir = subprocess.run([GO_BINARIES, "--dir", "toolkit-1.18.0"], capture_output=True, text=True,
                             check=True).stdout.strip()
    path = nvidia_ctk_default_config(tmp_path)
    argv = [os.path.join(BIN, "ansible"), "localhost", "-m", "gpuops.nvidia.toolkit_config", "-a", "path=%s" % path]
    env = _env()
    with_ctk = subprocess.run(argv, capture_output=True, text=True, check=False,
                              env=dict(env, PATH=ctk_dir + os.pathsep + env["PATH"]))
    result = json.loads(with_ctk.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]
    assert result["toolkit_version"] == "1.18.0" and result["changed"] is False
    without = subprocess.run(argv, capture_output=True, text=True, check=False,
                             env=dict(env, PATH=os.pathsep.join(p for p in env["PATH"].split(os.pathsep)
                                                                if not os.path.exists(os.path.join(p, "nvidia-ctk")))))
    assert json.loads(without.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]["toolkit_version"] is None

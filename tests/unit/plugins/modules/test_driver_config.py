# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""driver_config: the two modprobe.d files written as modprobe reads them, check mode, diff,
backups, idempotence; hostile option values and unknown services refused before any change.
(Services go through a stand-in systemctl on PATH; the molecule scenarios and the lab enable them
with the real one.)"""
from __future__ import annotations

import os
import stat

import pytest

from ansible_collections.gpuops.nvidia.plugins.modules import driver_config

NOUVEAU = ("# Managed by gpuops.nvidia.driver: the NVIDIA driver needs the GPUs without nouveau.\n"
           "blacklist nouveau\noptions nouveau modeset=0\n")


@pytest.fixture
def paths(tmp_path):
    return {"options_conf": str(tmp_path / "modprobe.d" / "nvidia-gpuops.conf"),
            "nouveau_conf": str(tmp_path / "modprobe.d" / "blacklist-nouveau-gpuops.conf")}


@pytest.fixture
def systemctl(tmp_path, monkeypatch):
    """A systemctl that knows nvidia-persistenced (disabled until enabled) and logs its calls."""
    bindir = tmp_path / "bin"
    bindir.mkdir()
    log, state = tmp_path / "systemctl.log", tmp_path / "enabled"
    script = bindir / "systemctl"
    script.write_text(f"""#!/bin/sh
echo "$@" >> {log}
case "$2" in nvidia-persistenced) ;; *) echo "Failed to get unit file state for $2.service: No such file or directory" >&2; exit 1;; esac
if [ "$1" = is-enabled ]; then if [ -e {state} ]; then echo enabled; exit 0; fi; echo disabled; exit 1; fi
if [ "$1" = enable ]; then touch {state}; exit 0; fi
exit 1
""")
    script.chmod(0o755)
    monkeypatch.setenv("PATH", "%s%s%s" % (bindir, os.pathsep, os.environ["PATH"]))
    return log


def test_writes_both_files_as_modprobe_reads_them_then_changes_nothing(run_module, paths):
    args = dict(paths, module_options={"NVreg_PreserveVideoMemoryAllocations": 1, "NVreg_EnableGpuFirmware": 0})
    failed, planned = run_module(driver_config.main, args, check_mode=True, diff=True)
    assert not failed and planned["changed"] and planned["modprobe_changed"]
    assert not os.path.exists(paths["options_conf"])  # check mode wrote nothing
    assert [d["after_header"] for d in planned["diff"]] == [paths["options_conf"], paths["nouveau_conf"]]
    failed, applied = run_module(driver_config.main, args)
    assert not failed and applied["files"] == [paths["options_conf"], paths["nouveau_conf"]]
    with open(paths["options_conf"], encoding="utf-8") as handle:
        assert handle.read() == ("# Managed by gpuops.nvidia.driver (driver_module_options).\n"
                                 "options nvidia NVreg_EnableGpuFirmware=0 NVreg_PreserveVideoMemoryAllocations=1\n")
    with open(paths["nouveau_conf"], encoding="utf-8") as handle:
        assert handle.read() == NOUVEAU
    assert stat.S_IMODE(os.stat(paths["options_conf"]).st_mode) == 0o644
    failed, again = run_module(driver_config.main, args)
    assert not failed and not again["changed"] and not again["modprobe_changed"] and again["files"] == []


def test_options_taken_out_leave_the_node_with_a_backup(run_module, paths):
    run_module(driver_config.main, dict(paths, module_options={"NVreg_EnableGpuFirmware": 1}))
    failed, result = run_module(driver_config.main, dict(paths, module_options={}))
    assert not failed and result["files"] == [paths["options_conf"]]
    with open(paths["options_conf"], encoding="utf-8") as handle:
        assert handle.read() == "# Managed by gpuops.nvidia.driver (driver_module_options).\n# (no options set)\n"
    assert len(result["backup_files"]) == 1 and not result["backup_files"][0].endswith(".conf")
    with open(result["backup_files"][0], encoding="utf-8") as handle:
        assert "NVreg_EnableGpuFirmware=1" in handle.read()


def test_blacklist_nouveau_false_leaves_that_file_alone(run_module, paths):
    failed, result = run_module(driver_config.main, dict(paths, blacklist_nouveau=False))
    assert not failed and result["files"] == [paths["options_conf"]]
    assert not os.path.exists(paths["nouveau_conf"])


@pytest.mark.parametrize("options, named", [
    ({"NVreg_EnableGpuFirmware": "0\ninstall nvidia /bin/sh"}, "the value of NVreg_EnableGpuFirmware"),
    ({"NVreg_RegistryDwords": "a b"}, "the value of NVreg_RegistryDwords"),
    ({"NVreg_X": '"1"'}, "the value of NVreg_X"),
    ({"NVreg_X": "1#"}, "the value of NVreg_X"),
    ({"NVreg_X": None}, "the value of NVreg_X"),
    ({"NVreg_X": [1, 2]}, "the value of NVreg_X"),
    ({"bad name": 1}, "'bad name' is no kernel module parameter name"),
    ({"x\nblacklist nvidia": 1}, "is no kernel module parameter name"),
])
def test_a_value_modprobe_would_read_differently_is_refused_before_any_change(run_module, paths, options, named):
    failed, result = run_module(driver_config.main, dict(paths, module_options=options))
    assert failed and named in result["msg"] and "Nothing was changed" in result["msg"]
    assert not os.path.exists(paths["options_conf"]) and not os.path.exists(paths["nouveau_conf"])


def test_services_are_enabled_once(run_module, paths, systemctl):
    failed, planned = run_module(driver_config.main, dict(paths, services=["nvidia-persistenced"]), check_mode=True)
    assert not failed and planned["enabled"] == ["nvidia-persistenced"]
    with open(systemctl, encoding="utf-8") as handle:
        assert "enable nvidia-persistenced\n" not in handle.read().splitlines(keepends=True)
    failed, applied = run_module(driver_config.main, dict(paths, services=["nvidia-persistenced"]))
    assert not failed and applied["enabled"] == ["nvidia-persistenced"]
    failed, again = run_module(driver_config.main, dict(paths, services=["nvidia-persistenced"]))
    assert not failed and again["enabled"] == [] and not again["changed"]


@pytest.mark.parametrize("service, named", [
    ("nvidia-fabricmanager", "the service nvidia-fabricmanager does not exist on the node"),
    ("x; reboot", "is no systemd unit name"),
])
def test_a_service_that_cannot_be_enabled_is_refused_before_any_change(run_module, paths, systemctl, service, named):
    failed, result = run_module(driver_config.main, dict(paths, services=["nvidia-persistenced", service]))
    assert failed and named in result["msg"]
    assert not os.path.exists(paths["options_conf"])


def test_a_directory_where_the_file_belongs_is_named(run_module, paths):
    os.makedirs(paths["options_conf"])
    failed, result = run_module(driver_config.main, paths)
    assert failed and "is a directory" in result["msg"] and paths["options_conf"] in result["msg"]

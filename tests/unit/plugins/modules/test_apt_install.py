# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""apt_install's entry point when apt fails halfway: what it installed before failing is in the
record, so the role's removal takes it away. (apt itself is replaced here; the real installs run
in tests/integration/test_apt_install.py and the molecule scenarios.)"""
from __future__ import annotations

import json

from ansible_collections.gpuops.nvidia.plugins.module_utils.apt import ops as apt_ops
from ansible_collections.gpuops.nvidia.plugins.module_utils.apt import packages
from ansible_collections.gpuops.nvidia.plugins.modules import apt_install


def test_a_failed_install_records_what_it_added(run_module, monkeypatch, tmp_path):
    states = iter([{"dpkg": "1.21"}, {"dpkg": "1.21", "nvidia-kernel-common": "580.95.05-1"}])
    monkeypatch.setattr(apt_ops, "needs_refresh", lambda seconds: False)
    monkeypatch.setattr(packages, "installed", lambda root="/": next(states))
    monkeypatch.setattr(apt_ops, "simulate_install", lambda module, names, options, environment=None: [
        ("nvidia-kernel-common", "580.95.05-1"), ("nvidia-driver", "580.95.05-1")])

    def install(module, names, options, environment=None):
        raise apt_ops.AptError("dpkg: error processing package nvidia-driver (--configure)", changed=True)
    monkeypatch.setattr(apt_ops, "install", install)
    failed, result = run_module(apt_install.main, {"names": ["nvidia-driver"], "owner": "driver",
                                                   "record_dir": str(tmp_path)})
    assert failed and "error processing package nvidia-driver" in result["msg"] and result["changed"] is True
    record = json.loads((tmp_path / "driver.json").read_text())
    assert record == {"owner": "driver", "requires": ["nvidia-driver"], "added": ["nvidia-kernel-common"]}

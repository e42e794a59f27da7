# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import pytest
import tomlkit

from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime import toolkit
from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime.common import ConfigError

PACKAGED = """#accept-nvidia-visible-devices-as-volume-mounts = false
disable-require = false
supported-driver-capabilities = "compat32,compute,display,graphics,ngx,utility,video"

[nvidia-container-cli]
environment = []
ldconfig = "@/sbin/ldconfig.real"
load-kmods = true

[nvidia-container-runtime]
log-level = "info"
mode = "auto"
runtimes = ["docker-runc", "runc", "crun"]

[nvidia-container-runtime.modes.cdi]
annotation-prefixes = ["cdi.k8s.io/"]
default-kind = "nvidia.com/gpu"
spec-dirs = ["/etc/cdi", "/var/run/cdi"]
"""


def test_sets_keys_and_keeps_the_rest():
    plan = toolkit.configure(PACKAGED, {"mode": "cdi", "cdi_spec_dirs": ["/etc/cdi"], "log_level": None})
    assert plan["changed"] is True
    data = tomlkit.parse(plan["text"]).unwrap()
    assert data["nvidia-container-runtime"]["mode"] == "cdi"
    assert data["nvidia-container-runtime"]["modes"]["cdi"]["spec-dirs"] == ["/etc/cdi"]
    assert data["nvidia-container-runtime"]["log-level"] == "info"
    assert data["nvidia-container-cli"]["ldconfig"] == "@/sbin/ldconfig.real"
    assert plan["text"].startswith("#accept-nvidia-visible-devices-as-volume-mounts = false\n")
    assert toolkit.configure(plan["text"], {"mode": "cdi", "cdi_spec_dirs": ["/etc/cdi"]})["changed"] is False


def test_missing_file_gets_only_the_keys():
    plan = toolkit.configure(None, {"mode": "legacy"})
    assert tomlkit.parse(plan["text"]).unwrap() == {"nvidia-container-runtime": {"mode": "legacy"}}


@pytest.mark.parametrize("settings, message", [
    ({"mode": "fast"}, "mode 'fast' is not one of auto, legacy, cdi, csv"),
    ({"colour": "blue"}, "unknown toolkit settings colour"),
])
def test_bad_settings(settings, message):
    with pytest.raises(ConfigError, match=message):
        toolkit.configure(PACKAGED, settings)


def test_malformed_file():
    with pytest.raises(ConfigError, match=r"config.toml: line 1, column \d+"):
        toolkit.configure("[nvidia-container-runtime\nmode = 1\n", {"mode": "cdi"})

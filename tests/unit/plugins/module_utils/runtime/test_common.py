# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What every runtime editor shares: credential masking and the checks of the runtime's name."""
from __future__ import annotations

import re

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime.common import (
    ConfigError, check_runtime_name, mask_secrets, mask_text)


@pytest.mark.parametrize("text, masked", [
    ("http://u:Pr0xy@proxy:3128", "http://u:********@proxy:3128"),
    ("https://ghp_T0ken@host/x", "https://********@host/x"),
    ("HTTPS_PROXY=socks5://a:b@p:1080", "HTTPS_PROXY=socks5://a:********@p:1080"),
    ('Authorization = ["Basic QmFzaWM=", "Bearer x"]', 'Authorization = ["********", "********"]'),
    ('"identitytoken": "eyJ.e30.sig"', '"identitytoken": "********"'),
    ("password = 'single'", "password = '********'"),
    ('password = ""', 'password = ""'),
    ("https://mirror.example/path@v2", "https://mirror.example/path@v2"),  # an @ after the host is no userinfo
    ("user@example.com", "user@example.com"),
    ('Authorization = [\n  "Bearer abc123",\n]', 'Authorization = [\n  "********",\n]'),  # over several lines
    ('password = """x\ny"""', 'password = """********"""'),  # TOML multi-line string
    ('"X-Auth-Token" = ["t0k"]', '"X-Auth-Token" = ["********"]'),  # a secret word inside the name
    ('registry_password: "pw"', 'registry_password: "********"'),
])
def test_mask_text(text, masked):
    assert mask_text(text) == masked


def test_mask_secrets_in_data():
    data = {"proxies": {"http-proxy": "http://u:P@p:3128"}, "auth": "x",
            "headers": {"Authorization": ["Basic y"], "X-Auth-Token": ["z"]},
            "mirrors": ["https://t0k@m"], "debug": True, "n": 3}
    assert mask_secrets(data) == {"proxies": {"http-proxy": "http://u:********@p:3128"}, "auth": "********",
                                  "headers": {"Authorization": ["********"], "X-Auth-Token": ["********"]},
                                  "mirrors": ["https://********@m"], "debug": True, "n": 3}
    assert data["auth"] == "x"  # a copy


@pytest.mark.parametrize("name, reserved, existing, message", [
    ("nvidia", (), None, None),
    ("nvidia-cdi", ("runc",), {"runc": None}, None),
    ("runc", ("runc",), None, "'runc' is containerd's own runtime"),
    ("kata", (), {"kata": "/opt/kata/bin/containerd-shim-kata-v2"}, "already defines a runtime 'kata'"),
    ("nvidia", (), {"nvidia": "/usr/local/nvidia/toolkit/nvidia-container-runtime"}, None),
    ("nvidia", (), {"nvidia": "/usr/bin/nvidia-container-runtime.cdi"}, None),
    ("nvidia", (), {"nvidia": None}, "already defines a runtime 'nvidia' (runc)"),
    ("Nvidia", (), None, "is not a valid runtime handler name"),
    ("-nvidia", (), None, "is not a valid runtime handler name"),
    ("nvidia.cdi", (), None, "is not a valid runtime handler name"),
])
def test_check_runtime_name(name, reserved, existing, message):
    if message is None:
        check_runtime_name(name, "containerd", reserved=reserved, existing=existing)
        return
    with pytest.raises(ConfigError, match=re.escape(message)) as err:
        check_runtime_name(name, "containerd", reserved=reserved, existing=existing)
    assert err.value.option == "runtime_name"

# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""No credential of a runtime configuration reaches Ansible's output: known secrets are seeded
into every place a runtime keeps one (credential keys, URL userinfo of mirrors, endpoints and
proxies, Authorization headers, conmon's environment), and the whole output of check-mode,
apply and absent runs with --diff and -v is searched for them."""
from __future__ import annotations

import json
import os
import shutil

from conftest import BIN, require  # pylint: disable=import-error
from crio_check import UpstreamHost, crio_binary  # pylint: disable=import-error

SECRETS = {
    "url_password": "UrlPassw0rd-1",
    "token_userinfo": "ghp_T0kenInUserinfo2",
    "auth_password": "Regis7ryPassword-3",
    "header": "QmFzaWMgSGVhZGVyU2VjcmV0NA==",
    "identitytoken": "eyJIdGVudGl0eTUi.e30.sig",
    "proxy_password": "Pr0xyPassword-6",
    "conmon_proxy": "C0nmonProxy-7",
    "multiline_header": "MultiLineBearer-8",
    "warning_url": "InAWarning-9",
}

CONTAINERD = """version = 2

[plugins."io.containerd.grpc.v1.cri"]
  sandbox_image = "registry.internal.example/pause:3.9"

  [plugins."io.containerd.grpc.v1.cri".registry.mirrors."docker.io"]
    endpoint = ["https://mirror-user:%(url_password)s@mirror.internal.example:5000",
                "https://%(token_userinfo)s@second-mirror.internal.example"]

  [plugins."io.containerd.grpc.v1.cri".registry.configs."registry.internal.example".auth]
    username = "puller"
    password = "%(auth_password)s"
    identitytoken = "%(identitytoken)s"

  [plugins."io.containerd.grpc.v1.cri".registry.headers]
    Authorization = ["Basic %(header)s"]
    X-Auth-Token = [
      "%(multiline_header)s",
    ]
""" % SECRETS

DOCKER = {
    "registry-mirrors": ["https://mirror-user:%(url_password)s@mirror.internal.example" % SECRETS],
    "proxies": {"http-proxy": "http://proxy-user:%(proxy_password)s@proxy.internal.example:3128" % SECRETS,
                "no-proxy": "localhost"},
    "log-driver": "journald",
}


def ansible(lab, args, check=False, profile="none", env=None):
    """The ad-hoc module run with diff and verbose output: every byte Ansible prints."""
    argv = [os.path.join(BIN, "ansible"), "localhost", "-m", "gpuops.nvidia.runtime_config", "-a", args,
            "--diff", "-v"] + (["--check"] if check else [])
    proc = lab.run(profile, argv, env=env)
    return proc.stdout + proc.stderr


def assert_masked(outputs):
    text = "\n".join(outputs)
    for name, secret in SECRETS.items():
        assert secret not in text, "%s leaked" % name
    assert "********" in text  # the diffs were shown, masked


def test_containerd(lab, tmp_path):
    require(shutil.which("containerd"), "containerd", "apt-get install containerd (make test installs it)")
    (tmp_path / "config.toml").write_text(CONTAINERD)
    args = "config_path=%s/config.toml drop_in_path=%s/conf.d/99-nvidia.toml enable_cdi=auto" % (tmp_path, tmp_path)
    outputs = [ansible(lab, args, check=True), ansible(lab, args), ansible(lab, args + " state=absent")]
    in_place = "config_path=%s/config.toml edit_mode=in_place set_as_default=true enable_cdi=auto" % tmp_path
    outputs += [ansible(lab, in_place, check=True), ansible(lab, in_place), ansible(lab, in_place + " state=absent")]
    assert_masked(outputs)
    # masking is for display only: the file keeps its real values (blank lines may move)
    assert (tmp_path / "config.toml").read_text().rstrip("\n") == CONTAINERD.rstrip("\n")


def test_docker(lab, tmp_path):
    daemon = tmp_path / "daemon.json"
    # a duplicate key makes the editor warn about the file: the warning must not show the secret
    daemon.write_text(json.dumps(DOCKER, indent=2)[:-2] + ',\n  "log-driver": "journald",\n  "labels": '
                      '["mirror=https://u:%s@m.example"]\n}\n' % SECRETS["warning_url"])
    args = "runtime=docker config_path=%s state_dir=%s/state set_as_default=true" % (daemon, tmp_path)
    outputs = [ansible(lab, args, check=True), ansible(lab, args), ansible(lab, args + " state=absent")]
    assert "appears more than once" in outputs[0]
    assert_masked(outputs)
    assert json.loads(daemon.read_text()) == dict(DOCKER, labels=["mirror=https://u:%s@m.example" % SECRETS["warning_url"]])


def test_crio(lab, tmp_path):
    crio = crio_binary()
    require(crio and os.access(crio, os.X_OK), "crio", "tests/lab/go-binaries crio builds it")
    host = UpstreamHost(tmp_path, crio)
    conf_d = tmp_path / "etc" / "crio.conf.d"
    conf_d.mkdir(parents=True)
    (conf_d / "10-crio.conf").write_text(host.upstream.replace(
        'runtime_root = "/run/crun"\n',
        'runtime_root = "/run/crun"\nmonitor_env = ["HTTPS_PROXY=http://proxy-user:%s@proxy.internal.example:3128"]\n'
        % SECRETS["conmon_proxy"], 1))
    args = ("runtime=crio config_path=%s/crio.conf drop_in_path=%s/99-nvidia.toml runtime_path=%s state_dir=%s/state"
            % (tmp_path / "etc", conf_d, host.nvidia, tmp_path))
    env = {"PATH": os.path.dirname(crio) + os.pathsep + os.environ["PATH"]}
    outputs = [ansible(lab, args, check=True, env=env), ansible(lab, args, env=env)]
    # the copied environment is in the drop-in for real
    assert SECRETS["conmon_proxy"] in (conf_d / "99-nvidia.toml").read_text()
    outputs.append(ansible(lab, args + " state=absent", env=env))
    assert_masked(outputs)

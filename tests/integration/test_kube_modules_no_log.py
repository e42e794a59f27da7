# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The bearer token of the collection's own Kubernetes modules (node_upgrade, cluster_info) never
reaches the log, even at -vvv and when the call fails: the installed collection, run by
ansible-playbook against an API server address nothing answers on."""
from __future__ import annotations

import json
import os
import subprocess

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
TOKEN = "gpuops-test-bearer-token-6f1c2a9e"


@pytest.mark.parametrize("task", [
    {"gpuops.nvidia.cluster_info": {"namespace": "gpuops-nvidia"}},
    {"gpuops.nvidia.node_upgrade": {"name": "gpu-01", "state": "failed"}},
])
def test_the_token_is_not_logged(tmp_path, task):
    play = [{"hosts": "localhost", "gather_facts": False, "tasks": [dict(task, **{
        "module_defaults": {name: {"host": "https://127.0.0.1:9", "api_key": TOKEN, "validate_certs": False}
                            for name in task}})]}]
    path = tmp_path / "play.yml"
    path.write_text(json.dumps(play))
    # (ansible-core 2.21 echoes module arguments only with inject_invocation on: on, so the masked
    # token must show)
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_FORCE_COLOR="0",
               ANSIBLE_INJECT_INVOCATION="1")
    res = subprocess.run([os.path.join(REPO, ".venv", "bin", "ansible-playbook"), "-i", "localhost,", "-c", "local",
                          "-e", "ansible_python_interpreter=" + os.path.join(REPO, ".venv", "bin", "python"),
                          "-vvv", str(path)], cwd=REPO, env=env, capture_output=True, text=True, timeout=300,
                         check=False)
    log = res.stdout + res.stderr
    # the call failed (nothing answers there) and said so, naming the API call, not the token
    assert res.returncode != 0 and "failed=1" in log, log[-3000:]
    assert TOKEN not in log
    assert "api_key" in log and "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER" in log

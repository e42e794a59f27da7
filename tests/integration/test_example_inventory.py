# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""inventories/example is a production inventory to copy: every variable it sets is an option of
one of the roles, with a valid value (checked against the roles' argument specs by Ansible's own
validate_argument_spec), and the site playbook accepts it."""
from __future__ import annotations

import json
import os
import subprocess

import pytest
import yaml

from conftest import BIN, REPO, _env  # pylint: disable=import-error

EXAMPLE = os.path.join(REPO, "inventories", "example")
ROLES = ("driver", "container_toolkit", "mig", "gpu_report", "cluster", "node_labels", "device_plugin",
         "gpu_feature_discovery", "dcgm_exporter", "dra_driver", "validate")


def hostvars(host):
    out = subprocess.run([os.path.join(BIN, "ansible-inventory"), "-i", EXAMPLE, "--host", host],
                         check=True, capture_output=True, text=True, env=_env()).stdout
    return json.loads(out)


def spec(role):
    with open(os.path.join(REPO, "roles", role, "meta", "argument_specs.yml")) as handle:
        return yaml.safe_load(handle)["argument_specs"]["main"]["options"]


@pytest.mark.parametrize("host", ["gpu-hgx-01.example.com", "gpu-l40s-01.example.com"])
def test_every_variable_is_a_documented_role_option(host):
    variables = {key for key in hostvars(host) if not key.startswith("ansible_")}
    documented = set().union(*(spec(role) for role in ROLES))
    assert variables - documented == set()
    assert {"driver_branch", "driver_repo_url", "driver_reboot", "container_toolkit_runtime"} <= variables


def test_the_values_pass_the_roles_argument_specs(tmp_path):
    plays = []
    values = hostvars("gpu-hgx-01.example.com")
    for role in ROLES:
        options = spec(role)
        plays.append({"name": role, "hosts": "localhost", "gather_facts": False, "tasks": [{
            "name": "Validate the example's %s variables" % role,
            "ansible.builtin.validate_argument_spec": {
                "argument_spec": options,
                "provided_arguments": {key: value for key, value in values.items() if key in options}}}]})
    playbook = tmp_path / "validate.yml"
    playbook.write_text(yaml.safe_dump(plays))
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), str(playbook)], capture_output=True, text=True,
                          env=_env(ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default"), check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]


def test_the_site_playbook_accepts_the_inventory():
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", EXAMPLE, "--syntax-check",
                           os.path.join(REPO, "playbooks", "site.yml")], capture_output=True, text=True,
                          env=_env(ANSIBLE_STDOUT_CALLBACK="ansible.builtin.default"), check=False)
    assert proc.returncode == 0, proc.stdout + proc.stderr

# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The lab's connection to its node containers: containers.podman.podman with pipelining.

containers.podman 1.18 (in the `ansible` 12 bundle) runs `podman exec` without `-i`,
so a module cannot be sent on its standard input and every task costs a temporary directory, a
copy and a second exec. With `-i` when there is input, a module runs in one `podman exec`: on the
lab's two-core machines a role's run takes about half the time. Newer releases (1.21 in the `ansible` 14
bundle) pass `-i` themselves: then this plugin only turns pipelining on, which their
documentation leaves to the global setting (off by default). Used by the lab inventory (ansible.cfg's connection_plugins) and the molecule
scenarios (.config/molecule/config.yml); the collection itself knows nothing of it."""
from __future__ import annotations

import shlex

from ansible.module_utils.common.text.converters import to_native
from ansible_collections.containers.podman.plugins.connection.podman import Connection as PodmanConnection

DOCUMENTATION = """
name: gpuops_lab_podman
short_description: The lab's node containers through podman exec, with pipelining
description:
  - containers.podman.podman, whose C(podman exec) also passes a module on its standard input, so
    pipelining works (on by default).
author: gpuops.nvidia lab
options:
  remote_addr:
    description: The container's name or ID.
    default: inventory_hostname
    vars:
      - name: inventory_hostname
      - name: ansible_host
      - name: ansible_podman_host
  remote_user:
    description: The user in the container (podman exec --user).
    vars:
      - name: ansible_user
  podman_executable:
    description: The podman command.
    default: podman
    vars:
      - name: ansible_podman_executable
  podman_extra_args:
    description: Arguments put before podman's subcommand.
    default: ''
    vars:
      - name: ansible_podman_extra_args
  container_timeout:
    description: Seconds a podman command may take, 0 for no limit (newer containers.podman releases).
    type: int
    default: 0
  mount_detection:
    description: Copy files through the container's mount point (newer containers.podman releases).
    type: bool
    default: true
  ignore_mount_errors:
    description: Copy through podman cp when mounting fails (newer containers.podman releases).
    type: bool
    default: true
  extra_env_vars:
    description: Environment variables set in the container (newer containers.podman releases).
    type: dict
    default: {}
  privilege_escalation_method:
    description: How privileges are escalated inside the container (newer containers.podman releases).
    type: str
    default: auto
    choices: [auto, sudo, su, none]
  working_directory:
    description: Working directory of the commands (newer containers.podman releases).
    type: str
  pipelining:
    description: Send modules on the exec's standard input instead of copying them first.
    type: boolean
    default: true
    env:
      - name: ANSIBLE_PIPELINING
    vars:
      - name: ansible_pipelining
"""


class Connection(PodmanConnection):
    """podman exec -i when the command has input."""

    transport = "gpuops_lab_podman"
    has_pipelining = True

    def exec_command(self, cmd, in_data=None, sudoable=False):
        if hasattr(PodmanConnection, "_run_podman_command"):  # newer containers.podman: exec -i itself
            return super().exec_command(cmd, in_data=in_data, sudoable=sudoable)
        if not self._connected:
            self._connect()
        args = shlex.split(to_native(cmd, errors="surrogate_or_strict"))
        exec_args = ["exec", "-i"] if in_data is not None else ["exec"]
        if self.user:
            exec_args += ["--user", self.user]
        return self._podman(exec_args, args, in_data)

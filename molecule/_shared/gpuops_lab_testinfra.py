"""pytest plugin for the molecule testinfra verifier: run commands with `podman exec`.

testinfra (10.x) has no native mapping for Ansible's podman connection, so with molecule's
inventory (ansible_connection: podman) every host.run / host.package / host.service goes
through a full `ansible` ad-hoc run (about a second each).  This plugin teaches testinfra's
Ansible backend to hand such hosts to its native podman backend (`podman exec NAME sh -c`),
while host.ansible(...) and host.ansible.get_variables() keep working as before.

Loaded by .config/molecule/config.yml via
    verifier.env: PYTHONPATH=<repo>/molecule/_shared, PYTEST_PLUGINS=gpuops_lab_testinfra
Podman runs with the verifier's environment, so CONTAINERS_CONF applies.
"""

from __future__ import annotations

from typing import Any

import testinfra
from testinfra.utils import ansible_runner

_PODMAN_CONNECTIONS = {"podman", "containers.podman.podman", "gpuops_lab_podman"}
_original_get_ansible_host = ansible_runner.get_ansible_host


def _get_ansible_host(config: Any, inventory: Any, host: str, **kwargs: Any) -> Any:
    hostvars = (inventory or {}).get("_meta", {}).get("hostvars", {}).get(host, {})
    if hostvars.get("ansible_connection") in _PODMAN_CONNECTIONS:
        # Ansible's podman connection addresses the container by ansible_host (default:
        # the inventory name); ansible_user, if any, becomes `podman exec -u`.
        name = hostvars.get("ansible_host", host)
        user = hostvars.get("ansible_user")
        spec = f"{user}@{name}" if user else name
        return testinfra.get_host(f"podman://{spec}")
    return _original_get_ansible_host(config, inventory, host, **kwargs)


ansible_runner.get_ansible_host = _get_ansible_host


def started_after_written(host, unit, path):
    """True when the unit's current run started after path was last written, compared at
    microsecond resolution (systemd's --timestamp=us+utc, the file's mtime in nanoseconds): a
    restart before the write, or no restart, is False."""
    import datetime  # pylint: disable=import-outside-toplevel
    shown = host.check_output("systemctl show %s -p ActiveEnterTimestamp --value --timestamp=us+utc" % unit)
    started = datetime.datetime.strptime(shown.strip(), "%a %Y-%m-%d %H:%M:%S.%f %Z").replace(
        tzinfo=datetime.timezone.utc)
    written_ns = int(host.check_output("stat -c %%.9Y %s" % path).replace(".", ""))
    started_us = int(started.timestamp()) * 1000000 + started.microsecond
    return started_us > written_ns // 1000

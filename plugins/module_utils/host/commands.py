# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one way modules read a command's output: through AnsibleModule.run_command, with the C
locale forced so parsers see the messages they were written for."""

from __future__ import annotations

__metaclass__ = type

C_LOCALE = {"LANG": "C", "LC_ALL": "C", "LANGUAGE": "C"}


def output(module, argv) -> str:
    """stdout of argv when the command exists and succeeds, else ''."""
    if not module.get_bin_path(argv[0]):
        return ""
    rc, out, _err = module.run_command(argv, environ_update=C_LOCALE)
    return out if rc == 0 else ""


def run(module, argv, env: dict | None = None) -> tuple:
    """(rc, stdout, stderr) of argv in the C locale (plus env)."""
    return module.run_command(argv, environ_update=dict(C_LOCALE, **(env or {})))

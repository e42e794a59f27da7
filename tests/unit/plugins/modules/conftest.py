# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Run a module's main() in-process with given arguments and catch what it exits with."""
from __future__ import annotations

import pytest

from ansible.module_utils import basic
from ansible.module_utils.testing import patch_module_args


class Exit(Exception):
    """exit_json was called."""

    def __init__(self, result):
        super().__init__(result)
        self.result = result


class Fail(Exception):
    """fail_json was called."""

    def __init__(self, result):
        super().__init__(result)
        self.result = result


def _exit(self, **result):
    result.setdefault("changed", False)
    result.setdefault("warnings", list(getattr(self, "_test_warnings", [])))
    raise Exit(result)


def _warn(self, message):
    if not hasattr(self, "_test_warnings"):
        self._test_warnings = []  # pylint: disable=protected-access
    self._test_warnings.append(message)  # pylint: disable=protected-access


def _fail(self, msg, **result):
    result["msg"] = msg
    result["failed"] = True
    raise Fail(result)


@pytest.fixture
def run_module(monkeypatch):
    """run_module(main, args) -> (failed, result). Any other exception is a defect of the module
    (a traceback for the user) and fails the test."""
    monkeypatch.setattr(basic.AnsibleModule, "exit_json", _exit)
    monkeypatch.setattr(basic.AnsibleModule, "fail_json", _fail)
    monkeypatch.setattr(basic.AnsibleModule, "warn", _warn)

    def run(main, args, check_mode=False, diff=False):
        args = dict(args)
        if check_mode:
            args["_ansible_check_mode"] = True
        if diff:
            args["_ansible_diff"] = True
        with patch_module_args(args):
            try:
                main()
            except Exit as done:
                return False, done.result
            except Fail as failed:
                return True, failed.result
        raise AssertionError("the module returned without exit_json or fail_json")
    return run

# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A stand-in for AnsibleModule that answers apt's and dpkg's commands from a script, and a dpkg
database under a temporary root."""
from __future__ import annotations

import os

import pytest


class FakeModule:
    """What module_utils/apt needs of AnsibleModule. ``answers`` maps the start of a command line
    (a tuple of its first words) to (rc, stdout, stderr) or to a function of argv giving them;
    every command run is kept in ``calls``."""

    def __init__(self, answers=None, check_mode=False, diff=False):
        self.answers = dict(answers or {})
        self.check_mode = check_mode
        self._diff = diff
        self.calls = []
        self.warnings = []

    def run_command(self, argv, environ_update=None):
        self.calls.append(list(argv))
        for size in range(len(argv), 0, -1):
            answer = self.answers.get(tuple(argv[:size]))
            if answer is not None:
                return answer(argv) if callable(answer) else answer
        raise AssertionError("unexpected command %s" % argv)

    def get_bin_path(self, name):
        return "/usr/bin/" + name

    def warn(self, message):
        self.warnings.append(message)

    def fail_json(self, **result):
        raise AssertionError("fail_json(%s)" % result)

    def atomic_move(self, src, dst, unsafe_writes=False):
        os.rename(src, dst)

    def ran(self, *words) -> list:
        """The commands run that start with words."""
        return [argv for argv in self.calls if tuple(argv[:len(words)]) == words]


def stanza(name, version="1.0-1", status="install ok installed", arch="amd64"):
    """One package's entry in dpkg's database."""
    return "Package: %s\nStatus: %s\nArchitecture: %s\nVersion: %s\n" % (name, status, arch, version)


@pytest.fixture
def fake():
    """The FakeModule class."""
    return FakeModule


@pytest.fixture
def dpkg_root(tmp_path):
    """dpkg_root({name: (version, status)}) -> a root directory whose dpkg database holds them."""
    def make(entries):
        path = tmp_path / "root" / "var" / "lib" / "dpkg"
        path.mkdir(parents=True, exist_ok=True)
        (path / "status").write_text("\n".join(stanza(name, version, status)
                                               for name, (version, status) in entries.items()))
        return str(tmp_path / "root")
    return make

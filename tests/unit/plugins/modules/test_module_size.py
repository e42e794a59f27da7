# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Modules stay thin: a module is its documentation, its argument spec, one call into a service
in module_utils and the result. Counted: lines of code outside DOCUMENTATION, EXAMPLES and RETURN,
without blank lines and comments. `python3 test_module_size.py` prints every module's count."""
from __future__ import annotations

import ast
import glob
import os

import pytest

MODULES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..", "plugins", "modules")
LIMIT = 80
SOFT_LIMIT = 60
ABOVE_SOFT_LIMIT = 3


def code_lines(path: str) -> int:
    with open(path, encoding="utf-8") as handle:
        source = handle.read()
    docs = set()
    for node in ast.parse(source).body:
        if isinstance(node, ast.Assign) and any(getattr(t, "id", "") in ("DOCUMENTATION", "EXAMPLES", "RETURN")
                                                for t in node.targets):
            docs.update(range(node.lineno, node.end_lineno + 1))
    return sum(1 for number, line in enumerate(source.splitlines(), 1)
               if number not in docs and line.strip() and not line.strip().startswith("#"))


def counts() -> dict:
    return {os.path.basename(p)[:-3]: code_lines(p) for p in sorted(glob.glob(os.path.join(MODULES, "*.py")))}


def test_the_modules_are_found():
    assert len(counts()) >= 19


@pytest.mark.parametrize("name", sorted(counts()))
def test_a_module_is_at_most_80_lines_of_code(name):
    assert counts()[name] <= LIMIT, "%s has %d lines of code: move its work into a service in module_utils" % (
        name, counts()[name])


def test_at_most_three_modules_above_60_lines():
    above = {name: n for name, n in counts().items() if n > SOFT_LIMIT}
    assert len(above) <= ABOVE_SOFT_LIMIT, above


if __name__ == "__main__":
    for module, lines in sorted(counts().items(), key=lambda item: item[1]):
        print("%4d  %s" % (lines, module))

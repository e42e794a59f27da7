# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The rolling upgrade's filters: the plan of the playbook's play, its lines, and the playbooks'
deprecated variable names (each set one a deprecation warning naming its new name)."""
from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError
from ansible.utils.display import Display

from ansible_collections.gpuops.nvidia.plugins.filter import upgrade
from ansible_collections.gpuops.nvidia.plugins.filter.upgrade import FilterModule

RENAMED = {"upgrade_phase": "gpuops_upgrade_phase", "upgrade_canary": "gpuops_upgrade_canary"}


@pytest.fixture
def filters():
    return FilterModule().filters()


@pytest.fixture
def deprecations(monkeypatch):
    seen = []
    monkeypatch.setattr(Display, "deprecated", lambda self, msg, **kwargs: seen.append((msg, kwargs)))
    return seen


@pytest.mark.parametrize("old_names, expected", [
    ([], []),
    (["unrelated_variable"], []),
    (["upgrade_canary"], ["upgrade_canary"]),
    (["upgrade_phase", "upgrade_canary", "upgrade_phase"], ["upgrade_canary", "upgrade_phase"]),
])
def test_each_deprecated_name_set_is_named_with_its_new_name(filters, deprecations, old_names, expected):
    messages = filters["renamed_variables"](old_names, RENAMED)
    assert [message.split()[3] for message in messages] == expected
    for old, message in zip(expected, messages):
        assert "set %s instead" % RENAMED[old] in message and upgrade.RENAMED_UNTIL in message
    assert [msg for msg, _kwargs in deprecations] == messages
    assert all(kwargs == {"version": upgrade.RENAMED_UNTIL, "collection_name": "gpuops.nvidia"}
               for _msg, kwargs in deprecations)


def test_the_play_plan_and_its_lines(filters):
    nodes = [{"metadata": {"name": name, "labels": {}}, "status": {"conditions": [{"type": "Ready", "status": "True"}]}}
             for name in ("a", "b")]
    plan = filters["upgrade_play_plan"](nodes, "580.95.05", ["h-a", "h-b"], ["a", "b"], None, canary="first",
                                        groups={"first": ["h-b"]}, max_unavailable=1)
    assert plan["canary"] == [["b"]] and plan["waves"] == [["a"]]
    assert filters["upgrade_plan_lines"](plan)[1:3] == ["canary: b", "wave: a"]


@pytest.mark.parametrize("args, kwargs, fragment", [
    (([], "580", ["h-a"], []), {}, "1 host(s) but 0 node name(s)"),
    (([], "580", [], []), {"max_unavailable": "lots"}, "max_unavailable must be a count"),
])
def test_a_plan_that_cannot_be_made_is_a_filter_error(filters, args, kwargs, fragment):
    with pytest.raises(AnsibleFilterError, match=fragment.replace("(", r"\(").replace(")", r"\)")):
        filters["upgrade_play_plan"](*args, **kwargs)

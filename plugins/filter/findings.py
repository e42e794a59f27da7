# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over findings (module_utils/report/findings.py), so roles and templates print them the one
way the modules build them."""

from __future__ import annotations

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.nvidia.plugins.module_utils.report import findings
from ansible_collections.gpuops.nvidia.plugins.module_utils.report import lines as report


def finding_lines(items):
    if not isinstance(items, list) or not all(isinstance(item, dict) for item in items):
        raise AnsibleFilterError("finding_lines expects a list of findings (dicts), got %s" % type(items).__name__)
    try:
        return findings.lines(items)
    except KeyError as exc:
        raise AnsibleFilterError("finding_lines: a finding lacks the key %s" % exc)


def finding_report(items):
    """The findings for a job log: '[severity] subject: message' then 'fix: ...', errors first,
    wrapped within 100 columns (module_utils/report/lines.finding_lines)."""
    finding_lines(items)  # the same checks
    return report.finding_lines(items)


class FilterModule:
    def filters(self):
        return {"finding_lines": finding_lines, "finding_report": finding_report}

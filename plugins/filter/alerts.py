# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over the collection's alert rules (module_utils/report/alerts.py), for the alerts role."""

from __future__ import annotations

__metaclass__ = type

import re

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.nvidia.plugins.module_utils.report import alerts

_DURATION = re.compile(r"^([0-9]+(ms|s|m|h))+$")


def alert_rule_groups(interval=""):
    interval = "" if interval is None else str(interval)
    if interval and not _DURATION.match(interval):
        raise AnsibleFilterError("alert_rule_groups: the interval must be a Prometheus duration such as 30s, not %r"
                                 % interval)
    return alerts.rule_groups(interval)


def alert_rules_missing(exported):
    if not isinstance(exported, list) or not all(isinstance(name, str) for name in exported):
        raise AnsibleFilterError("alert_rules_missing expects the exporter's field names (a list of strings)")
    return alerts.missing_fields(exported)


class FilterModule:
    def filters(self):
        return {"alert_rule_groups": alert_rule_groups, "alert_rules_missing": alert_rules_missing}

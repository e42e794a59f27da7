# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters over the remediation planner (module_utils/k8s/remediation_plan.py), for the remediate
playbook: the plan, its lines, the node's record after a step, and the alert's problems."""

from __future__ import annotations

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.nvidia.plugins.module_utils.k8s import remediation_plan as rp


def _plain(value):
    """Plain containers (templated values can be lazy containers)."""
    if isinstance(value, dict):
        return {str(key): _plain(item) for key, item in value.items()}
    if isinstance(value, (list, tuple)):
        return [_plain(item) for item in value]
    return value


def remediation_alert(event):
    return rp.alert_of(_plain(event))


def remediation_alert_errors(alert):
    return rp.alert_errors(_plain(alert))


def remediation_plan(alert, node=None, inventory=None, policy=None, now=None):
    if node is not None and not isinstance(node, dict):
        raise AnsibleFilterError("remediation_plan: the node must be the Node object (a dict) or None")
    try:
        return rp.plan(_plain(alert), _plain(node) if node else None, _plain(inventory) if inventory else None,
                       _plain(policy) if policy else None, now)
    except rp.PlanError as exc:
        raise AnsibleFilterError(str(exc))


def remediation_record(plan, node=None, alert=None, state="remediation-done", result="done", now=None):
    if not isinstance(plan, dict):
        raise AnsibleFilterError("remediation_record expects the plan (remediation_plan's result)")
    try:
        return rp.record(_plain(node) if node else None, _plain(plan), _plain(alert or {}), state, result, now)
    except rp.PlanError as exc:
        raise AnsibleFilterError(str(exc))


def remediation_plan_lines(plan):
    if not isinstance(plan, dict) or "node" not in plan:
        raise AnsibleFilterError("remediation_plan_lines expects the plan (remediation_plan's result)")
    return rp.lines(_plain(plan))


class FilterModule:
    def filters(self):
        return {"remediation_alert": remediation_alert, "remediation_alert_errors": remediation_alert_errors, "remediation_plan": remediation_plan,
                "remediation_record": remediation_record, "remediation_plan_lines": remediation_plan_lines}

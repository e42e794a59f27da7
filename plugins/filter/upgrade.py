# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the rolling driver upgrade (module_utils/k8s/upgrade_plan.py):

- ``upgrade_plan(nodes, target, max_unavailable, max_parallel, canary, retry_failed, members)``: the waves.
- ``upgrade_nodes(node_objects, driver_label)``: the plan's node dicts from Node objects.
- ``upgrade_steps(policy)``: what each node goes through, as [state, text].
- ``upgrade_tainted(node_objects, key)``: the nodes carrying a taint with this key.
- ``upgrade_order(plan)``: [[group, node]] in the order the playbook upgrades them.
- ``upgrade_batches(plan)``: {group: [batch sizes]}, the plays' serial: the planned waves."""

from __future__ import annotations

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.nvidia.plugins.module_utils.k8s import upgrade_plan


def _plan(nodes, target, max_unavailable="25%", max_parallel=1, canary=1, retry_failed=False, members=None,
          canary_group_missing=False):
    try:
        return upgrade_plan.plan(nodes, target, max_unavailable=max_unavailable, max_parallel=max_parallel,
                                 canary=canary, retry_failed=retry_failed, members=members,
                                 canary_group_missing=canary_group_missing)
    except upgrade_plan.PlanError as exc:
        raise AnsibleFilterError(str(exc))


def _steps(policy):
    return [list(step) for step in upgrade_plan.steps(policy or {})]


class FilterModule:
    def filters(self):
        return {
            "upgrade_plan": _plan,
            "upgrade_nodes": upgrade_plan.from_node_objects,
            "upgrade_steps": _steps,
            "upgrade_tainted": upgrade_plan.tainted,
            "upgrade_order": upgrade_plan.order,
            "upgrade_batches": upgrade_plan.batches,
        }

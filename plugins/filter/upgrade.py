# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the rolling driver upgrade (module_utils/k8s/upgrade_plan.py):

- ``upgrade_play_plan(node_objects, target, hosts, node_names, preflight, canary, phase, groups,
  max_unavailable, max_parallel, retry_failed)``: the waves of the playbook's play (its canary setting,
  a count or an inventory group, resolved to node names).
- ``allocation_play_plan(node_objects, hosts, node_names, allocations, max_unavailable, max_parallel,
  retry_failed)``: the waves of a GPU allocation switch (playbooks/allocation.yml).
- ``upgrade_plan_lines(plan, policy)``: the plan as the playbook shows it.
- ``upgrade_tainted(node_objects, key)``: the nodes carrying a taint with this key.
- ``upgrade_order(plan)``: [[group, node]] in the order the playbook upgrades them.
- ``upgrade_batches(plan)``: {group: [batch sizes]}, the plays' serial: the planned waves.
- ``upgrade_gpu_pods(pods, include_skipped)``: the pods that hold GPUs (an NVIDIA resource or
  ResourceClaims), not DaemonSets' (with include_skipped also those labelled to stay).
- ``renamed_variables(old_names, renamed)``: the playbooks' deprecated variable names that are set,
  each with a deprecation warning naming the new one (the playbooks map them to the new names)."""

from __future__ import annotations

__metaclass__ = type

from ansible.errors import AnsibleFilterError
from ansible.utils.display import Display

from ansible_collections.gpuops.nvidia.plugins.module_utils.k8s import upgrade_plan


def _play_plan(node_objects, target, hosts, node_names, preflight=None, canary=1, phase="all", groups=None,
               max_unavailable="25%", max_parallel=1, retry_failed=False):
    try:
        return upgrade_plan.play_plan(node_objects, target, hosts, node_names, preflight, canary=canary, phase=phase,
                                      groups=groups, max_unavailable=max_unavailable, max_parallel=max_parallel,
                                      retry_failed=retry_failed)
    except upgrade_plan.PlanError as exc:
        raise AnsibleFilterError(str(exc))


def _allocation_play_plan(node_objects, hosts, node_names, allocations, max_unavailable="25%", max_parallel=1,
                          retry_failed=False):
    try:
        return upgrade_plan.allocation_play_plan(node_objects, hosts, node_names, allocations,
                                                 max_unavailable=max_unavailable, max_parallel=max_parallel,
                                                 retry_failed=retry_failed)
    except upgrade_plan.PlanError as exc:
        raise AnsibleFilterError(str(exc))


# the release whose playbooks no longer take the names before gpuops_ (upgrade_*, audit_*)
RENAMED_UNTIL = "0.3.0"


def renamed_variables(old_names, renamed):
    """The messages for the OLD_NAMES set (those of RENAMED, {old name: new name}), each also a
    deprecation warning; the playbook maps the old name to the new one."""
    messages = []
    for old in sorted(set(old_names or []) & set(renamed or {})):
        message = "the playbook variable %s is deprecated: set %s instead (the old name works until gpuops.nvidia %s)" % (
            old, renamed[old], RENAMED_UNTIL)
        Display().deprecated(message, version="0.3.0", collection_name="gpuops.nvidia")
        messages.append(message)
    return messages


class FilterModule:
    def filters(self):
        return {
            "upgrade_play_plan": _play_plan,
            "allocation_play_plan": _allocation_play_plan,
            "upgrade_plan_lines": upgrade_plan.lines,
            "upgrade_tainted": upgrade_plan.tainted,
            "upgrade_order": upgrade_plan.order,
            "upgrade_batches": upgrade_plan.batches,
            "upgrade_gpu_pods": upgrade_plan.gpu_pods,
            "renamed_variables": renamed_variables,
        }

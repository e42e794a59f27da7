# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the fleet summary that ends the playbooks (module_utils/report/fleet.py):

- ``fleet_records(hosts, hostvars, hosts_ok)``: one summary record per node of ``hosts`` (the play's
  hosts, ``ansible_play_hosts_all``) from the facts the stages left; a node not in ``hosts_ok``
  (``ansible_play_hosts``) failed.
- ``fleet_lines(records)``: the summary as lines: one per node, failed and worst first, the verdicts
  that ask for action, the totals.
- ``results | stage_changes(stage)``: what the driver, container_toolkit or mig stage changed on
  the node, in words, from its modules' registered results (the <stage>_changes facts)."""

from __future__ import annotations

__metaclass__ = type

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.nvidia.plugins.module_utils.report import fleet

# the host facts a record reads
FACTS = ("gpuops_nvidia", "gpuops_gpu_report", "driver_result", "container_toolkit_result") + fleet.CHANGES


def fleet_records(hosts, hostvars, hosts_ok=None):
    if not isinstance(hosts, list):
        raise AnsibleFilterError("fleet_records expects the list of the play's hosts, got %s" % type(hosts).__name__)
    ok = set(hosts_ok if hosts_ok is not None else hosts)
    records = []
    for name in hosts:
        facts = hostvars[name]
        # gpu_report's facts from ansible_facts (they are not variables when INJECT_FACTS_AS_VARS is
        # off); the stages' results are variables (set_fact, register)
        gathered = facts.get("ansible_facts") or {}
        records.append(fleet.record(name, {key: gathered.get(key, facts.get(key)) for key in FACTS},
                                    failed=name not in ok))
    return records


def stage_changes(results, stage):
    if not isinstance(results, dict):
        raise AnsibleFilterError("stage_changes expects a dict of the stage's registered results, got %s"
                                 % type(results).__name__)
    try:
        return fleet.stage_changes(stage, results)
    except ValueError as exc:
        raise AnsibleFilterError(str(exc))


class FilterModule:
    def filters(self):
        return {"fleet_records": fleet_records, "fleet_lines": fleet.lines, "stage_changes": stage_changes}

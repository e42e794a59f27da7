# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The fleet summary's and the findings' filters as the playbooks call them."""
from __future__ import annotations

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.nvidia.plugins.filter import fleet as fleet_filters
from ansible_collections.gpuops.nvidia.plugins.filter import findings as finding_filters


def test_fleet_records_read_each_hosts_facts_and_mark_the_failed():
    hostvars = {
        "gpu-a": {"gpuops_nvidia": {"verdict": {"status": "healthy", "text": "healthy"}},
                  "driver_result": {"installed_version": "580.95.05", "state": "ready"},
                  "driver_changes": ["driver 580.95.05 installed"], "unrelated": "x"},
        "gpu-b": {},
    }
    records = fleet_filters.fleet_records(["gpu-a", "gpu-b"], hostvars, ["gpu-a"])
    assert [(r["node"], r["failed"], r["verdict"], r["changes"]) for r in records] == [
        ("gpu-a", False, "healthy", ["driver 580.95.05 installed"]), ("gpu-b", True, None, [])]
    assert fleet_filters.FilterModule().filters()["fleet_lines"](records)[0].split()[:2] == ["gpu-b", "FAILED"]


def test_fleet_records_read_the_reports_facts_from_ansible_facts_when_they_are_not_variables():
    """INJECT_FACTS_AS_VARS off (the default from ansible-core 2.24): gpu_report's facts are only
    under ansible_facts; the stages' results (set_fact) stay variables."""
    hostvars = {"gpu-a": {"ansible_facts": {"gpuops_nvidia": {"verdict": {"status": "degraded", "text": "degraded"},
                                                              "driver": {"version": "570.172.08", "loaded": True}}},
                          "container_toolkit_result": {"version": "1.18.0"}}}
    record = fleet_filters.fleet_records(["gpu-a"], hostvars)[0]
    assert (record["verdict"], record["driver"], record["toolkit"]) == ("degraded", "570.172.08", "1.18.0"), record


def test_fleet_records_wants_the_list_of_hosts():
    with pytest.raises(AnsibleFilterError, match="list of the play's hosts"):
        fleet_filters.fleet_records("gpu-a", {})


def test_finding_report_wraps_and_checks_like_finding_lines():
    item = {"code": "x", "severity": "warning", "subject": "node", "message": "m " * 80, "fix": "do it"}
    lines = finding_filters.finding_report([item])
    assert lines[0].startswith("[warning] node: m m") and all(len(line) <= 100 for line in lines)
    assert lines[-1] == "    fix: do it"
    with pytest.raises(AnsibleFilterError):
        finding_filters.finding_report("not a list")


def test_stage_changes_filter_refuses_what_is_not_a_dict_of_results():
    from ansible.errors import AnsibleFilterError
    from ansible_collections.gpuops.nvidia.plugins.filter.fleet import stage_changes
    with pytest.raises(AnsibleFilterError, match="dict of the stage's registered results"):
        stage_changes(["driver repository"], "driver")
    with pytest.raises(AnsibleFilterError, match="not 'toolkit'"):
        stage_changes({}, "toolkit")
    assert stage_changes({"repo_changed": True}, "driver") == ["driver repository"]

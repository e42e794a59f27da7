# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters of the drift audit (module_utils/report/drift.py):

- ``audit_cluster(node_name, nodes, pods, daemonsets, labels, allocation, slices, devices)``: [items,
  facts] of a node as the cluster sees it (the collection's labels, what allocates its GPUs against
  its gpu_allocation, a DRA node's ResourceSlices against the devices NVML lists there, operand
  images against their DaemonSets).
- ``audit_record(node_audit_result, node, cluster)``: a node's audit record.
- ``audit_fleet(records)``: the fleet grouped by version, and the outliers.
- ``audit_lines(records, fleet)``: the audit as lines for a job log."""

from __future__ import annotations

__metaclass__ = type

from ansible_collections.gpuops.nvidia.plugins.module_utils.report import drift


def audit_cluster(node_name, nodes, pods, daemonsets, labels=None, allocation=None, slices=None, devices=None):
    found, facts = drift.cluster_items(node_name, nodes, pods, daemonsets, labels or {}, allocation,
                                       slices=slices, devices=devices)
    return [found, facts]


def audit_record(node_result, node, cluster=None):
    cluster = cluster or [[], {}]
    return drift.record(node, node_result, cluster[0], cluster[1])


class FilterModule:
    def filters(self):
        return {"audit_cluster": audit_cluster, "audit_record": audit_record, "audit_fleet": drift.fleet,
                "audit_lines": drift.lines}

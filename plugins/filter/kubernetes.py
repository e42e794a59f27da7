# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Filters the Kubernetes roles build and check their objects with. Each is a thin wrapper over
a pure function in module_utils (k8s_objects, node_labels, device_plugin_config, dcgm_fields), so
the logic is tested there and the roles stay a readable sequence.

- ``image_ref(image, registry)``: IMAGE with its registry replaced by an air-gapped mirror.
- ``image_problem(image, registry, name)``, ``image_problem_of([image, name], registry)``: why an image
  variable is unusable (None when it is fine).
- ``k8s_render_name(obj)``: the file name render mode writes OBJ to.
- ``k8s_name_errors({variable: [value, kind]})``: why values are no Kubernetes names (namespace:
  ``label``, priority or runtime class: ``subdomain``; a trailing ``?`` allows empty).
- ``rollout_problems(pods, workload, events, nodes)``: why a workload is not ready, per node.
- ``pods_not_ready(pods)``: the pods that are not Running and Ready, with the reason.
- ``nfd_cleanup_patch(node)``: the patch removing the labels and annotations NFD left on a node.
- ``node_desired_labels(info, operands, device_plugin_config, topology)``, ``node_unhealthy_codes
  (info, severities, codes)``, ``node_label_plan(node, desired, unhealthy, taint, state)``,
  ``node_label_changes(plan)``: the
  node labels and taint of a GPU node from its gpu_info facts, as a JSON patch.
- ``device_plugin_config_errors(configs, default, cdi)``, ``device_plugin_config_render(config,
  cdi)``, ``device_plugin_expected_resources(config, gpus)``, ``device_plugin_node_config(label,
  configs, default)``: NVIDIA device plugin configuration files.
- ``validate_host``, ``validate_labels``, ``validate_allocatable``, ``validate_smi``, ``validate_sample``,
  ``validate_metrics``, ``validate_prometheus_target``, ``validate_prometheus_query``,
  ``validate_pod_of``, ``validate_operands``, ``validate_verdict``, ``validate_workload_reuse``: the go-live checks of role
  validate (module_utils/k8s/node_checks.py), each returning the problems it found.
- ``validate_dra_claim_request(info)``, ``validate_dra_claim(request, info, devices, log)``: the test
  pod's ResourceClaim on a DRA node (one device by attribute) and whether the one device the pod saw
  is published in the node's ResourceSlices and selected by that request.
- ``dra_allocated_claims(claims)``: the ResourceClaims (namespace/name) that hold devices of NVIDIA's
  DRA driver (its role refuses to remove it while there are any).
- ``validate_report_changed(text, previous)``: whether the validation report (its JSON text) says
  anything the report the last run wrote does not: a passed check's evidence that only names what
  this run happened to see (which GPU the test pod got, the exporter pod's address) is no change.
- ``mig_cluster_wanted(node, default)``, ``mig_cluster_pause(node, operands, reason)``,
  ``mig_cluster_restore(node, reason)`` (reason mig-change, or gpu-reset: a remediation's reset),
  ``mig_cluster_state(node, state)``, ``mig_cluster_leftovers(node)``, ``mig_operand_pods(pods, node,
  keys)``, ``mig_operands_not_back(node, daemonsets, pods, keys)``, ``mig_strategy_errors(plan, strategy)``: a node's MIG change in the cluster, as NVIDIA's
  MIG manager does it in node labels (module_utils/mig/cluster.py).
- ``dcgm_metrics(extra)``, ``dcgm_metrics_errors(rows)``, ``dcgm_metrics_csv(rows)``,
  ``dcgm_metric_names(rows)``: the DCGM exporter's counters file.
- ``remediation_alert(event)``, ``remediation_alert_errors(alert)``, ``remediation_plan(alert, node,
  inventory, policy, now)``, ``remediation_record(plan, node, alert, state, result, now)``,
  ``remediation_plan_lines(plan)``: what to do about a GPU alert on a node, and the node's record of
  it (module_utils/k8s/remediation_plan.py).
"""

from __future__ import annotations

import json

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.nvidia.plugins.module_utils.k8s import dcgm_fields
from ansible_collections.gpuops.nvidia.plugins.module_utils.k8s import device_plugin_config
from ansible_collections.gpuops.nvidia.plugins.module_utils.k8s import objects as k8s_objects
from ansible_collections.gpuops.nvidia.plugins.module_utils.mig import cluster as mig_cluster
from ansible_collections.gpuops.nvidia.plugins.module_utils.k8s import node_checks
from ansible_collections.gpuops.nvidia.plugins.module_utils.k8s import remediation_plan
from ansible_collections.gpuops.nvidia.plugins.module_utils.k8s import node_labels

__metaclass__ = type


def _plain(value):
    """VALUE with its dicts and lists as plain ones: what the templating engine passes a filter
    may be its own lazy containers, which the pure functions must not copy or keep (a deep copy of
    one copies the engine with it, deprecated from ansible-core 2.21)."""
    if isinstance(value, dict):
        return {key: _plain(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_plain(item) for item in value]
    return value


def remediation_record(plan, node=None, alert=None, state="remediation-done", result="done", now=None):
    """The node's remediation record once the plan reached STATE (the plan first, as filters take it)."""
    return remediation_plan.record(node, plan, alert or {}, state, result, now)


def _wrap(func, name):
    def run(*args, **kwargs):
        try:
            return func(*(_plain(arg) for arg in args), **{key: _plain(arg) for key, arg in kwargs.items()})
        except (ValueError, TypeError, KeyError, AttributeError) as exc:
            raise AnsibleFilterError(f"{name}: {exc}") from exc
    run.__name__ = name
    return run


def image_ref(image, registry=None):
    return k8s_objects.image_ref(image, registry or None)


def image_problem_of(pair, registry=None):
    """[image, variable name] -> why it is unusable, or None."""
    image, name = pair
    return k8s_objects.image_problem(image, registry or None, name)


def rollout_problems(pods, workload, events=None, nodes=None):
    return k8s_objects.rollout_problems(workload, pods or [], events or [], nodes or [])


def node_desired_labels(info, operands=None, device_plugin_config=None, topology=True, gpu_present=None):
    return node_labels.desired_labels(info, operands=tuple(operands or node_labels.OPERANDS),
                                      device_plugin_config=device_plugin_config or None, topology=topology,
                                      gpu_present=gpu_present)


def node_unhealthy_codes(info, severities=("error",), codes=("pcie_link_degraded",)):
    return node_labels.unhealthy_codes(info, severities=tuple(severities), codes=tuple(codes))


def node_label_plan(node, desired, unhealthy=None, taint=None, state="present"):
    return node_labels.plan(node, desired, unhealthy=list(unhealthy or []), taint=taint or None, state=state)


def dcgm_metrics(extra=None):
    return dcgm_fields.merge(list(dcgm_fields.DEFAULT_COUNTERS), dcgm_fields.parse_rows(extra or []))


# the checks whose evidence, when they pass, names objects of this run only: the GPU the test pod
# was given (any of the node's) and the exporter pod's address
_TRANSIENT_EVIDENCE = ("workload", "metrics")


def _lasting(report: dict) -> dict:
    """The report without the evidence of passed checks that only says what this run happened to see."""
    def lasting(check):
        if isinstance(check, dict) and check.get("ok") and check.get("check") in _TRANSIENT_EVIDENCE:
            return {key: value for key, value in check.items() if key != "evidence"}
        return check
    nodes = [dict(node, checks=[lasting(check) for check in node.get("checks") or []])
             if isinstance(node, dict) else node for node in report.get("nodes") or []]
    return dict(report, nodes=nodes)


def validate_report_changed(text: str, previous: str = "") -> bool:
    """Whether the validation report TEXT (JSON, as it is written) says more than PREVIOUS (the text of
    the report the last run wrote; empty when there is none) beyond the evidence of passed checks
    that names this run's own objects."""
    try:
        before = json.loads(previous) if previous else None
    except ValueError:
        return True
    if not isinstance(before, dict):
        return True
    return _lasting(json.loads(text)) != _lasting(before)


class FilterModule:
    def filters(self):
        table = {
            "image_ref": image_ref,
            "k8s_render_name": k8s_objects.render_name,
            "k8s_name_errors": k8s_objects.name_errors,
            "image_problem": k8s_objects.image_problem,
            "image_problem_of": image_problem_of,
            "rollout_problems": rollout_problems,
            "pods_not_ready": k8s_objects.pods_not_ready,
            "nfd_cleanup_patch": k8s_objects.nfd_cleanup_patch,
            "node_desired_labels": node_desired_labels,
            "node_unhealthy_codes": node_unhealthy_codes,
            "node_label_plan": node_label_plan,
            "node_label_changes": node_labels.changes,
            "device_plugin_config_errors": device_plugin_config.errors,
            "device_plugin_config_render": device_plugin_config.render,
            "device_plugin_expected_resources": device_plugin_config.expected_resources,
            "device_plugin_node_config": device_plugin_config.node_config_name,
            "validate_host": node_checks.host_problems,
            "validate_operands": node_checks.operand_problems,
            "validate_labels": node_checks.label_problems,
            "validate_allocatable": node_checks.allocatable_problems,
            "validate_dra_devices": node_checks.dra_slice_devices,
            "dra_allocated_claims": node_checks.dra_allocated_claims,
            "validate_dra_slices": node_checks.dra_slice_problems,
            "validate_dra_claim_request": node_checks.dra_claim_request,
            "validate_dra_claim": node_checks.dra_claim_problems,
            "validate_smi": node_checks.smi_problems,
            "validate_sample": node_checks.sample_problems,
            "validate_metrics": node_checks.metrics_problems,
            "validate_prometheus_target": node_checks.prometheus_target_problems,
            "validate_prometheus_query": node_checks.prometheus_query_problems,
            "validate_pod_of": node_checks.pod_of,
            "validate_verdict": node_checks.verdict,
            "validate_workload_reuse": node_checks.workload_reuse,
            "validate_line": node_checks.line,
            "validate_report_changed": validate_report_changed,
            "mig_cluster_wanted": mig_cluster.wanted_config,
            "mig_cluster_pause": mig_cluster.pause,
            "mig_cluster_restore": mig_cluster.restore,
            "mig_cluster_state": mig_cluster.state,
            "mig_cluster_leftovers": mig_cluster.leftovers,
            "mig_operand_pods": mig_cluster.operand_pods,
            "mig_operands_not_back": mig_cluster.operands_not_back,
            "mig_strategy_errors": mig_cluster.strategy_errors,
            "dcgm_metrics": dcgm_metrics,
            "dcgm_metrics_errors": dcgm_fields.errors,
            "dcgm_metrics_csv": dcgm_fields.to_csv,
            "dcgm_metric_names": dcgm_fields.metric_names,
            "remediation_alert": remediation_plan.alert_of,
            "remediation_alert_errors": remediation_plan.alert_errors,
            "remediation_plan": remediation_plan.plan,
            "remediation_record": remediation_record,
            "remediation_plan_lines": remediation_plan.lines,
        }
        return {name: _wrap(func, name) for name, func in table.items()}

# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Kubernetes roles' filters: every name the roles and templates use is there, each is a thin
wrapper over module_utils, and a mistake inside becomes an AnsibleFilterError that names the filter."""
from __future__ import annotations

import importlib
import json
import os
import re

import pytest

from ansible.errors import AnsibleFilterError

from ansible_collections.gpuops.nvidia.plugins.filter import kubernetes
from ansible_collections.gpuops.nvidia.plugins.filter.kubernetes import FilterModule

COLLECTION = os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "..", "..", "..")

# the filters the Kubernetes roles are built on (more may be added; none of these may go)
FILTER_NAMES = {
    "image_ref", "k8s_render_name", "rollout_problems", "pods_not_ready",
    "node_desired_labels", "node_unhealthy_codes", "node_label_plan", "node_label_changes",
    "device_plugin_config_errors", "device_plugin_config_render", "device_plugin_expected_resources",
    "device_plugin_node_config", "mig_cluster_wanted", "mig_cluster_pause", "mig_cluster_restore",
    "mig_cluster_state", "mig_cluster_leftovers", "mig_operand_pods", "mig_strategy_errors",
    "dcgm_metrics", "dcgm_metrics_errors", "dcgm_metrics_csv", "dcgm_metric_names",
}


def _other_plugins():
    """The filters of the collection's other filter plugins (findings, fleet ...)."""
    names = set()
    for name in sorted(os.listdir(os.path.join(COLLECTION, "plugins", "filter"))):
        if name.endswith(".py") and name not in ("__init__.py", "kubernetes.py"):
            module = importlib.import_module("ansible_collections.gpuops.nvidia.plugins.filter." + name[:-3])
            names |= set(module.FilterModule().filters())
    return names


OTHER_PLUGINS = _other_plugins()


@pytest.fixture(scope="module")
def filters():
    return FilterModule().filters()


def test_every_filter_is_there(filters):
    assert FILTER_NAMES - set(filters) == set()


def test_every_documented_filter_is_there(filters):
    documented = set(re.findall(r"``(\w+)\(", kubernetes.__doc__))
    assert documented >= {"image_ref", "k8s_render_name", "rollout_problems", "dcgm_metrics"}
    assert documented - set(filters) == set()


def roles_filter_uses():
    """The gpuops.nvidia filters the roles apply: `| gpuops.nvidia.NAME` and map('gpuops.nvidia.NAME')."""
    used = set()
    for top, _dirs, files in os.walk(os.path.join(COLLECTION, "roles")):
        for name in files:
            if name.endswith((".yml", ".yaml", ".j2")):
                with open(os.path.join(top, name), encoding="utf-8") as handle:
                    text = handle.read()
                used.update(re.findall(r"\|\s*gpuops\.nvidia\.(\w+)", text))
                used.update(re.findall(r"\b(?:map|select|reject)\(\s*['\"]gpuops\.nvidia\.(\w+)", text))
    return used


def test_every_filter_the_roles_use_is_there(filters):
    used = roles_filter_uses()
    assert {"image_ref", "rollout_problems"} <= used
    assert used - set(filters) - OTHER_PLUGINS == set()


@pytest.mark.parametrize("name", sorted(FILTER_NAMES))
def test_each_filter_is_callable_under_its_name(filters, name):
    assert callable(filters[name])
    assert filters[name].__name__ == name


# ---- the wrappers pass their arguments on ---------------------------------------------------------

PLUGIN = "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"
POD = {"metadata": {"name": "dp-a"}, "spec": {"nodeName": "node-a"},
       "status": {"phase": "Pending", "containerStatuses": [
           {"name": "nvidia-device-plugin", "ready": False, "state": {"waiting": {"reason": "ContainerCreating"}}}]}}

RESULTS = [
    # (id, filter, args, kwargs, expected)
    ("image_ref-mirror", "image_ref", (PLUGIN, "mirror.example:5000"), {},
     "mirror.example:5000/nvidia/k8s-device-plugin:v0.20.0"),
    # gpuops_image_registry | default('') gives '' when unset: no rewrite
    ("image_ref-empty-registry", "image_ref", (PLUGIN, ""), {}, PLUGIN),
    ("image_ref-no-registry", "image_ref", (PLUGIN,), {}, PLUGIN),
    ("k8s_render_name", "k8s_render_name", ({"kind": "Namespace", "metadata": {"name": "gpuops-nvidia"}},), {},
     "00-namespace-gpuops-nvidia.yaml"),
    # the pods come first (they are what the filter is applied to), then the workload
    ("rollout_problems", "rollout_problems", ([POD], "nvidia-device-plugin", None, ["node-a", "node-b"]), {},
     ["node-a: pod dp-a Pending; container nvidia-device-plugin waiting: ContainerCreating",
      "node-b: no nvidia-device-plugin pod (check the node's labels, taints and the DaemonSet's nodeSelector "
      "and tolerations)"]),
    ("rollout_problems-defaults", "rollout_problems", (None, "dcgm-exporter"), {}, []),
    ("pods_not_ready", "pods_not_ready", ([POD],), {},
     ["dp-a: Pending; container nvidia-device-plugin waiting: ContainerCreating"]),
]


@pytest.mark.parametrize("name, args, kwargs, expected", [case[1:] for case in RESULTS],
                         ids=[case[0] for case in RESULTS])
def test_filter_results(filters, name, args, kwargs, expected):
    assert filters[name](*args, **kwargs) == expected


# ---- errors inside become AnsibleFilterError naming the filter --------------------------------------

ERRORS = [
    # (id, filter, args, a fragment of the message after "<filter>: ")
    ("image_ref-no-tag", "image_ref", ("nvcr.io/nvidia/k8s-device-plugin", "mirror.example:5000"),
     "has neither a tag nor a digest"),
    ("image_ref-bad-digest", "image_ref", ("nvcr.io/nvidia/x@sha256:abc",),
     "the digest must be sha256:<64 hex digits>"),
    ("image_ref-empty", "image_ref", ("",), "an image must be a non-empty string"),
    # a KeyError: a pod without metadata
    ("pods_not_ready-key-error", "pods_not_ready", ([{"status": {"phase": "Running"}}],), "'metadata'"),
    ("rollout_problems-key-error", "rollout_problems", ([{"spec": {"nodeName": "n"}}], "x", [], ["n"]),
     "'metadata'"),
    # a TypeError: severities that are not a list
    ("node_unhealthy_codes-type-error", "node_unhealthy_codes", ({"health": []}, None), "not iterable"),
    ("node_label_plan-bad-state", "node_label_plan", ({}, {}, [], None, "gone"), "state must be one of"),
    ("node_desired_labels-bad-config-name", "node_desired_labels", ({"gpus": [{}]}, None, "bad value!"),
     "is not a valid label value for nvidia.com/device-plugin.config"),
    ("mig_cluster_state-bad-state", "mig_cluster_state", ({}, "done"), "'done' is not a MIG config state"),
    ("mig_cluster_pause-bad-record", "mig_cluster_pause",
     ({"metadata": {"labels": {}, "annotations": {"gpuops.nvidia/mig.paused-operands": "{"}}},),
     "must be a JSON object"),
    ("dcgm_metrics-malformed-row", "dcgm_metrics", (["DCGM_FI_DEV_GPU_TEMP"],),
     "row 1 (DCGM_FI_DEV_GPU_TEMP): malformed: 1 comma-separated parts, dcgm-exporter needs exactly 3"),
    ("dcgm_metrics_csv-bad-mapping", "dcgm_metrics_csv", ([{"x": 1}],), "malformed: the mapping lacks field"),
]


@pytest.mark.parametrize("name, args, fragment", [case[1:] for case in ERRORS], ids=[case[0] for case in ERRORS])
def test_errors_name_the_filter(filters, name, args, fragment):
    with pytest.raises(AnsibleFilterError) as err:
        filters[name](*args)
    message = str(err.value)
    assert message.startswith(name + ": ")
    assert fragment in message
    # the original exception is kept as the cause
    assert isinstance(err.value.__cause__, (ValueError, TypeError, KeyError))


def test_value_error_inside_becomes_filter_error(filters):
    with pytest.raises(AnsibleFilterError, match=r"^image_ref: image 'nvcr\.io/nvidia/x' has neither a tag nor a "
                                                 r"digest: pin one") as err:
        filters["image_ref"]("nvcr.io/nvidia/x")
    assert isinstance(err.value.__cause__, ValueError)


# ---- the validation report is rewritten only when it says something new ----------------------------

def _report(workload="GPU 0: NVIDIA L40S (UUID: GPU-0a); the CUDA sample: Test PASSED", ok=True,
            metrics="the exporter at 10.0.0.7:9400 serves all 4 GPUs", allocatable="nvidia.com/gpu=4", **node):
    checks = [{"check": "allocatable", "ok": True, "evidence": [allocatable]},
              {"check": "workload", "ok": ok, "evidence": [workload]},
              {"check": "metrics", "ok": True, "evidence": [metrics]}]
    entry = dict({"host": "n1", "node": "n1", "ok": ok, "driver": "580.95.05", "checks": checks}, **node)
    return json.dumps({"checks": ["allocatable", "workload", "metrics"], "nodes": [entry]}, indent=2) + "\n"


@pytest.mark.parametrize("report, previous, changed", [
    (_report(), _report(), False),
    # what this run happened to see: another GPU for the test pod, the exporter pod's new address
    (_report(workload="GPU 3: NVIDIA L40S (UUID: GPU-3d); the CUDA sample: Test PASSED"), _report(), False),
    (_report(metrics="the exporter at 10.0.0.9:9400 serves all 4 GPUs"), _report(), False),
    # what the report says of the node
    (_report(allocatable="nvidia.com/gpu=16"), _report(), True),
    (_report(driver="580.65.06"), _report(), True),
    (_report(ok=False, workload="the test pod ended Failed"), _report(), True),
    (_report(ok=False, workload="the test pod ended Failed"), _report(ok=False, workload="no GPU"), True),
    # no report before, or one that is not a report
    (_report(), "", True),
    (_report(), "{not json", True),
    (_report(), "[]", True),
])
def test_validate_report_changed(filters, report, previous, changed):
    assert filters["validate_report_changed"](report, previous) is changed


class _EngineDict(dict):
    """Stands for the templating engine's lazy dict: copying it would copy the engine."""

    def __deepcopy__(self, memo):
        raise AssertionError("a filter deep-copied the engine's container")


def test_the_filters_hand_the_functions_plain_containers():
    """ansible-core 2.21 deprecates deep copies of the templating engine's lazy containers: the
    filters pass the pure functions plain dicts and lists (with plain dicts and lists inside)."""
    config = _EngineDict(flags=_EngineDict(migStrategy="mixed"), sharing={"timeSlicing": {"resources": [
        _EngineDict(name="nvidia.com/gpu", replicas=2)]}})
    rendered = FilterModule().filters()["device_plugin_config_render"](config, True)
    assert rendered["version"] == "v1" and rendered["flags"]["migStrategy"] == "mixed"
    assert rendered["flags"]["plugin"]["deviceListStrategy"] == "cdi-cri"
    assert not isinstance(rendered["sharing"]["timeSlicing"]["resources"][0], _EngineDict)

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node labels of a MIG change in the cluster (NVIDIA MIG manager semantics): pausing the
deployed operands, restoring exactly what was paused (also after a run that died), the state
label, guarded patches that fail instead of overwriting a label someone changed meanwhile, the
operand pods to wait for, and the device plugin's MIG strategy against the planned layout."""

from __future__ import annotations

import json

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils.mig import cluster as mig_cluster
from ansible_collections.gpuops.nvidia.tests.unit.plugins.module_utils.k8s.json_patch import apply_patch

DP, GFD, DCGM = ("nvidia.com/gpu.deploy." + o for o in ("device-plugin", "gpu-feature-discovery", "dcgm-exporter"))
HOST = {"kubernetes.io/hostname": "n1"}


def node(labels, annotations=None):
    meta = {"name": "n1", "labels": dict(labels)}
    if annotations is not None:
        meta["annotations"] = dict(annotations)
    return {"metadata": meta}


def patched(obj, patch):
    return apply_patch(obj, patch)


def test_pause_and_restore_give_back_exactly_what_was_there():
    before = node({DP: "true", GFD: "false", DCGM: "true", mig_cluster.CONFIG_LABEL: "all-balanced", **HOST},
                  {"node.alpha.kubernetes.io/ttl": "0"})
    out = mig_cluster.pause(before)
    during = patched(before, out["patch"])
    labels = during["metadata"]["labels"]
    # deployed operands are paused, an admin's "false" stays
    assert labels[DP] == labels[DCGM] == mig_cluster.PAUSED and labels[GFD] == "false"
    assert out["paused"] == {DP: "true", DCGM: "true"}
    assert json.loads(during["metadata"]["annotations"][mig_cluster.ANNOTATION]) == out["paused"]
    after = patched(during, mig_cluster.restore(during))
    assert after == before
    assert mig_cluster.leftovers(after) == [] and mig_cluster.restore(after) == []


def test_an_operand_without_its_label_is_not_deployed_there_and_stays_so():
    before = node({DP: "true"}, {})
    out = mig_cluster.pause(before)
    assert out["paused"] == {DP: "true"}
    assert GFD not in patched(before, out["patch"])["metadata"]["labels"]


def test_nothing_deployed_means_no_patch():
    assert mig_cluster.pause(node({GFD: "false"}, {})) == {"patch": [], "paused": {}}


def test_a_node_without_annotations_gets_the_record_all_the_same():
    before = node({DP: "true"})
    during = patched(before, mig_cluster.pause(before)["patch"])
    assert mig_cluster.paused_record(during) == {DP: "true"}
    after = patched(during, mig_cluster.restore(during))
    assert after["metadata"]["labels"] == {DP: "true"} and after["metadata"]["annotations"] == {}


def test_a_run_that_died_is_undone_by_the_next_and_its_record_is_kept_when_pausing_again():
    before = node({DP: "true", GFD: "true"}, {})
    died = patched(before, mig_cluster.pause(before)["patch"])  # paused, never restored
    again = mig_cluster.pause(died)
    assert again["paused"] == {DP: "true", GFD: "true"} and again["patch"] == []
    assert patched(died, mig_cluster.restore(died))["metadata"]["labels"] == before["metadata"]["labels"]


def test_a_gpu_reset_pauses_with_its_own_value_and_record_and_neither_pause_undoes_the_other():
    before = node({DP: "true", DCGM: "true", GFD: "true"}, {})
    out = mig_cluster.pause(before, ["device-plugin", "dcgm-exporter"], "gpu-reset")
    during = patched(before, out["patch"])
    labels = during["metadata"]["labels"]
    assert labels[DP] == labels[DCGM] == "paused-for-gpu-reset" and labels[GFD] == "true"
    assert json.loads(during["metadata"]["annotations"]["gpuops.nvidia/gpu-reset.paused-operands"]) == {
        DP: "true", DCGM: "true"}
    # a MIG change's restore finds nothing of its own to restore; the reset's gives back what it paused
    assert mig_cluster.restore(during) == [] and mig_cluster.paused_record(during) == {}
    assert patched(during, mig_cluster.restore(during, "gpu-reset")) == before


def test_an_unknown_reason_to_pause_is_refused():
    with pytest.raises(ValueError, match="'reboot' pauses no operands"):
        mig_cluster.pause(node({DP: "true"}), reason="reboot")


def test_a_label_changed_during_the_change_is_left_alone():
    before = node({DP: "true", DCGM: "true"}, {})
    during = patched(before, mig_cluster.pause(before)["patch"])
    during["metadata"]["labels"][DP] = "false"  # an admin turned the plugin off meanwhile
    after = patched(during, mig_cluster.restore(during))
    assert after["metadata"]["labels"] == {DP: "false", DCGM: "true"}
    assert mig_cluster.ANNOTATION not in after["metadata"]["annotations"]


def test_the_pause_patch_fails_when_a_label_moved_since_it_was_read():
    patch = mig_cluster.pause(node({DP: "true"}, {}))["patch"]
    with pytest.raises(ValueError, match="test failed"):
        apply_patch(node({DP: "false"}, {}), patch)


def test_paused_labels_nothing_recorded_are_reported_and_never_touched():
    by_mig_manager = node({DP: mig_cluster.PAUSED, GFD: "true", DCGM: mig_cluster.PAUSED}, {})
    assert mig_cluster.leftovers(by_mig_manager) == [DCGM, DP]
    assert mig_cluster.restore(by_mig_manager) == []
    assert mig_cluster.pause(by_mig_manager)["paused"] == {GFD: "true"}


@pytest.mark.parametrize("text", ["{", "[]", '{"x": "true"}', '{"nvidia.com/gpu.deploy.device-plugin": 1}'])
def test_a_broken_record_is_named(text):
    with pytest.raises(ValueError, match="gpuops.nvidia/mig.paused-operands must be a JSON object"):
        mig_cluster.pause(node({DP: "true"}, {mig_cluster.ANNOTATION: text}))


def test_state_label():
    assert mig_cluster.state(node({}, {}), "pending") == [
        {"op": "add", "path": "/metadata/labels/nvidia.com~1mig.config.state", "value": "pending"}]
    obj = patched(node({}, {}), mig_cluster.state(node({}, {}), "pending"))
    obj = patched(obj, mig_cluster.state(obj, "success"))
    assert obj["metadata"]["labels"] == {mig_cluster.STATE_LABEL: "success"}
    assert mig_cluster.state(obj, "success") == []
    with pytest.raises(ValueError, match="'done' is not a MIG config state"):
        mig_cluster.state(obj, "done")


def test_the_label_wins_over_the_inventory():
    assert mig_cluster.wanted_config(node({mig_cluster.CONFIG_LABEL: "all-1g.10gb"}), "all-balanced") == "all-1g.10gb"
    assert mig_cluster.wanted_config(node({}), "all-balanced") == "all-balanced"
    assert mig_cluster.wanted_config(node({mig_cluster.CONFIG_LABEL: ""}), "all-balanced") == "all-balanced"


def pod(name, node_name, selector, namespace="gpuops-nvidia"):
    return {"metadata": {"name": name, "namespace": namespace},
            "spec": {"nodeName": node_name, "nodeSelector": selector}}


def test_operand_pods_are_those_a_paused_label_selects_on_this_node():
    pods = [pod("dp-1", "n1", {DP: "true"}), pod("dp-2", "n2", {DP: "true"}),
            pod("work", "n1", {}), pod("gfd-1", "n1", {GFD: "true", "x": "y"}), pod("other", "n1", {"a": "b"})]
    assert mig_cluster.operand_pods(pods, "n1", [DP, GFD]) == ["gpuops-nvidia/dp-1", "gpuops-nvidia/gfd-1"]
    assert mig_cluster.operand_pods(pods, "n1", []) == []


def daemonset(name, uid, selector, namespace="gpuops-nvidia"):
    return {"metadata": {"name": name, "namespace": namespace, "uid": uid},
            "spec": {"template": {"spec": {"nodeSelector": dict(selector)}}}}


def owned_pod(name, node_name, owner_uid, phase="Running", ready=True, deleting=False):
    meta = {"name": name, "namespace": "gpuops-nvidia", "ownerReferences": [{"kind": "DaemonSet", "uid": owner_uid}]}
    if deleting:
        meta["deletionTimestamp"] = "2026-12-05T10:00:00Z"
    return {"metadata": meta, "spec": {"nodeName": node_name},
            "status": {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def test_operands_not_back_are_the_given_back_daemonsets_without_a_ready_pod_on_the_node():
    after = node({DP: "true", DCGM: "true", GFD: "false", "nvidia.com/gpu.present": "true", **HOST})
    sets = [daemonset("nvidia-device-plugin", "u-dp", {DP: "true"}),
            daemonset("dcgm-exporter", "u-dcgm", {DCGM: "true", "nvidia.com/gpu.present": "true"}),
            # an admin's "false" keeps GFD off the node: nothing to wait for
            daemonset("gpu-feature-discovery", "u-gfd", {GFD: "true"}),
            # selects the node by another label only: none of the given-back operands
            daemonset("node-exporter", "u-ne", {"kubernetes.io/os": "linux"}),
            # a deploy label's DaemonSet that does not match the node otherwise
            daemonset("dra", "u-dra", {"nvidia.com/gpu.deploy.dra-driver": "true"})]
    keys = [DP, DCGM, GFD, "nvidia.com/gpu.deploy.dra-driver"]
    # no pods yet: both operands the node runs are waited for
    assert mig_cluster.operands_not_back(after, sets, [], keys) == [
        "gpuops-nvidia/dcgm-exporter", "gpuops-nvidia/nvidia-device-plugin"]
    pods = [owned_pod("dp-old", "n1", "u-dp", deleting=True),          # the paused one, leaving
            owned_pod("dp-new", "n1", "u-dp", phase="Pending", ready=False),
            owned_pod("dcgm-elsewhere", "n2", "u-dcgm")]
    assert mig_cluster.operands_not_back(after, sets, pods, keys) == [
        "gpuops-nvidia/dcgm-exporter", "gpuops-nvidia/nvidia-device-plugin"]
    pods += [owned_pod("dp-new2", "n1", "u-dp"), owned_pod("dcgm-new", "n1", "u-dcgm", ready=False)]
    assert mig_cluster.operands_not_back(after, sets, pods, keys) == ["gpuops-nvidia/dcgm-exporter"]
    pods.append(owned_pod("dcgm-new2", "n1", "u-dcgm"))
    assert mig_cluster.operands_not_back(after, sets, pods, keys) == []
    # a label still paused (someone's, or the give-back failed) brings nothing back to wait for
    still = node({DP: mig_cluster.PAUSES["gpu-reset"][0], **HOST})
    assert mig_cluster.operands_not_back(still, sets, [], keys) == []
    assert mig_cluster.operands_not_back({}, sets, [], keys) == []


def gpu(index, enabled, devices=None):
    return {"gpu": index, "after": {"mig_enabled": enabled, "devices": devices or {}}}


@pytest.mark.parametrize("gpus, strategy, problem", [
    ([gpu(0, True, {"1g.10gb": 7})], "none", "migStrategy none"),
    ([gpu(0, False)], "none", None),
    ([gpu(0, True, {"1g.10gb": 7}), gpu(1, True, {"1g.10gb": 7})], "single", None),
    ([gpu(0, True, {"1g.10gb": 7}), gpu(1, True, {"3g.40gb": 2})], "single", "GPU 1: 2 x 3g.40gb"),
    ([gpu(0, True, {"1g.10gb": 1, "3g.40gb": 2})], "single", "one and the same profile"),
    ([gpu(0, True, {"1g.10gb": 7}), gpu(1, False)], "single", "GPU 1: MIG off"),
    ([gpu(0, True)], "single", "GPU 0: ;"[:-1]),
    ([gpu(0, False), gpu(1, False)], "single", None),
    ([gpu(0, True, {"1g.10gb": 1, "3g.40gb": 2}), gpu(1, False)], "mixed", None),
    ([gpu(0, True, {"1g.10gb": 7})], "", None),
    ([gpu(0, True, {"1g.10gb": 7})], "auto", "is none of none, single, mixed"),
])
def test_the_device_plugin_strategy_must_suit_the_layout(gpus, strategy, problem):
    errors = mig_cluster.strategy_errors({"config": "c", "gpus": gpus}, strategy)
    if problem is None:
        assert errors == []
    else:
        assert len(errors) == 1 and problem in errors[0], errors

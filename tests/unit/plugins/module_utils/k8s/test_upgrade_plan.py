# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import math

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils.k8s import upgrade_plan as up

OLD, NEW = "570.172.08", "580.95.05"


def node(name, driver=OLD, state=None, skip=False, ready=True, unschedulable=False):
    labels = {}
    if state:
        labels[up.STATE_LABEL] = state
    if skip:
        labels[up.SKIP_LABEL] = "true"
    return {"name": name, "labels": labels, "ready": ready, "unschedulable": unschedulable, "driver": driver}


def fleet(count, **kwargs):
    return [node("gpu-%02d" % i, **kwargs) for i in range(count)]


@pytest.mark.parametrize("value, total, expected", [
    ("25%", 64, 16), ("25%", 2, 1), ("10%", 64, 7), ("1%", 3, 1), (3, 64, 3), ("0", 5, 0), ("100%", 7, 7),
])
def test_max_unavailable_rounds_up_like_the_operator(value, total, expected):
    assert up.scaled(value, total) == expected


@pytest.mark.parametrize("value", ["a lot", "-1", "-5%"])
def test_a_bad_max_unavailable_is_refused(value):
    with pytest.raises(up.PlanError, match="max_unavailable must be a count"):
        up.scaled(value, 10)


def test_zero_nodes_allowed_is_refused_before_anything():
    with pytest.raises(up.PlanError, match="no node could ever be upgraded"):
        up.plan(fleet(3), NEW, max_unavailable=0)


@pytest.mark.parametrize("count, max_unavailable, max_parallel", [
    (64, "25%", 0), (64, "25%", 4), (64, 5, 0), (2, "25%", 1), (10, "30%", 0), (7, 2, 3),
])
def test_waves_are_the_fewest_that_respect_the_limits(count, max_unavailable, max_parallel):
    result = up.plan(fleet(count), NEW, max_unavailable=max_unavailable, max_parallel=max_parallel, canary=1)
    slots = up.scaled(max_unavailable, count)
    if max_parallel:
        slots = min(slots, max_parallel)
    assert result["slots"] == slots and result["problems"] == []
    assert result["canary"] == [["gpu-00"]]
    everyone = [n for wave in result["canary"] + result["waves"] for n in wave]
    assert sorted(everyone) == sorted(n["name"] for n in fleet(count)) and len(set(everyone)) == count
    assert all(len(wave) <= slots for wave in result["waves"])
    assert len(result["waves"]) == math.ceil((count - 1) / slots)
    sim = up.simulate(result)
    assert sim["peak_unavailable"] <= up.scaled(max_unavailable, count)


def test_a_canary_group_by_name_goes_first():
    result = up.plan(fleet(6), NEW, max_unavailable=2, max_parallel=0, canary=["gpu-04", "gpu-05", "not-a-node"])
    assert result["canary"] == [["gpu-04", "gpu-05"]]
    assert result["waves"] == [["gpu-00", "gpu-01"], ["gpu-02", "gpu-03"]]


def test_skip_label_done_nodes_and_failed_nodes():
    nodes = fleet(4) + [node("gpu-skip", skip=True), node("gpu-done", driver=NEW, state="upgrade-done"),
                        node("gpu-new", driver=NEW), node("gpu-bad", state=up.FAILED)]
    result = up.plan(nodes, NEW, max_unavailable=2, max_parallel=0, canary=0)
    assert result["skipped"] == ["gpu-skip"] and result["done"] == ["gpu-done", "gpu-new"]
    assert result["failed"] == ["gpu-bad"]
    assert len(result["problems"]) == 1 and "upgrade_retry_failed" in result["problems"][0]
    retried = up.plan(nodes, NEW, max_unavailable=2, max_parallel=0, canary=0, retry_failed=True)
    assert retried["problems"] == [] and "gpu-bad" in [n for wave in retried["waves"] for n in wave]


def test_an_interrupted_run_resumes_its_nodes_first():
    nodes = fleet(6)
    nodes[3] = node("gpu-03", state="drain-required", unschedulable=True)
    result = up.plan(nodes, NEW, max_unavailable=1, max_parallel=0, canary=1)
    # resumed first, holding its own slot until done; then the canary and the waves, one at a time
    assert result["resume"] == ["gpu-03"] and result["slots"] == 1 and result["problems"] == []
    assert result["canary"] == [["gpu-00"]]
    assert "gpu-03" not in [n for wave in result["waves"] for n in wave]
    assert up.simulate(result)["peak_unavailable"] == 1
    # in phase rest (the canary ran in a job of its own) the resumed node goes first among the rest
    assert up.order(result, "rest")[0] == ["gpuops_upgrade_rest", "gpu-03"]
    assert {group for group, _node in up.order(result, "rest")} == {"gpuops_upgrade_rest"}


def test_a_node_of_the_run_the_cluster_does_not_know_and_a_missing_canary_group_stop_the_plan():
    result = up.plan(fleet(3), NEW, max_unavailable=1, canary=["gpu-x"], members=["gpu-00", "gpu-09"],
                     canary_group_missing=True)
    assert len(result["problems"]) == 2
    assert result["problems"][0].startswith("gpu-09: not a GPU node of the cluster")
    assert "upgrade_canary" in result["problems"][1]


def test_the_hosts_own_driver_wins_over_the_gfd_label():
    objs = [{"metadata": {"name": "a", "labels": {"nvidia.com/cuda.driver-version.full": OLD}}, "spec": {},
             "status": {"conditions": [{"type": "Ready", "status": "True"}]}}]
    assert up.from_node_objects(objs, drivers={"a": NEW})[0]["driver"] == NEW
    assert up.from_node_objects(objs)[0]["driver"] == OLD
    # the driver role's pre-flight result as it is: its driver's version, else the label
    assert up.from_node_objects(objs, drivers={"a": {"driver": {"version": NEW}}})[0]["driver"] == NEW
    assert up.from_node_objects(objs, drivers={"a": {"driver": {"loaded": False}}})[0]["driver"] == OLD
    assert up.from_node_objects(objs, drivers={"a": {}})[0]["driver"] == OLD


def test_nodes_unavailable_for_other_reasons_count_and_upgrade_without_a_slot():
    nodes = fleet(8)
    nodes[5] = node("gpu-05", ready=False)                 # NotReady: needs the upgrade too
    nodes[6] = node("gpu-06", driver=NEW, unschedulable=True)  # cordoned by an admin, already done
    result = up.plan(nodes, NEW, max_unavailable=4, max_parallel=0, canary=1)
    assert result["unavailable"] == ["gpu-05", "gpu-06"] and result["slots"] == 2
    assert result["waves"][0][0] == "gpu-05"  # the NotReady node rides along in the first wave
    assert up.simulate(result)["peak_unavailable"] <= 4


def test_no_slot_left_stops_before_any_change():
    nodes = fleet(4)
    nodes[0] = node("gpu-00", ready=False, driver=NEW)
    nodes[1] = node("gpu-01", unschedulable=True, driver=NEW)
    result = up.plan(nodes, NEW, max_unavailable=2, max_parallel=0, canary=1)
    assert result["slots"] == 0
    assert "no node can be taken out of service" in result["problems"][0] and "gpu-00, gpu-01" in result["problems"][0]


def test_steps_follow_the_operators_states():
    names = [state for state, _text in up.steps({"wait_for_jobs": "app=train", "wait_timeout": 600, "drain": True})]
    assert names == ["cordon-required", "wait-for-jobs-required", "pod-deletion-required", "drain-required",
                     "pod-restart-required", "validation-required", "uncordon-required", "upgrade-done"]
    assert [state for state, _text in up.steps({})] == [
        "cordon-required", "pod-deletion-required", "pod-restart-required", "validation-required",
        "uncordon-required", "upgrade-done"]


def test_a_branch_target_takes_any_version_of_the_branch():
    assert up.at_target("580.95.05", "580") and up.at_target("580.95.05", "580.95.05")
    assert not up.at_target("570.172.08", "580") and not up.at_target("580.65.06", "580.95.05")
    assert not up.at_target(None, "580")


def test_only_the_runs_own_nodes_are_upgraded_the_others_count():
    nodes = fleet(6)
    nodes[4] = node("gpu-04", unschedulable=True)
    result = up.plan(nodes, NEW, max_unavailable=3, max_parallel=0, canary=1, members=["gpu-00", "gpu-01", "gpu-02"])
    assert result["canary"] == [["gpu-00"]] and result["waves"] == [["gpu-01", "gpu-02"]]
    assert result["unavailable"] == ["gpu-04"] and result["slots"] == 2


def pod(name, gpus=0, owner=None, phase="Running", skip=False):
    meta = {"name": name, "namespace": "ml"}
    if owner:
        meta["ownerReferences"] = [{"kind": owner, "name": "x"}]
    if skip:
        meta["labels"] = {up.DRAIN_SKIP_LABEL: "true"}
    limits = {"nvidia.com/gpu": str(gpus)} if gpus else {}
    return {"metadata": meta, "status": {"phase": phase},
            "spec": {"containers": [{"name": "c", "resources": {"limits": limits}}]}}


def test_the_pods_the_pod_deletion_step_deletes():
    pods = [pod("train", 1, "Job"), pod("cpu-only"), pod("plugin", 1, "DaemonSet"), pod("done", 1, phase="Succeeded"),
            pod("keep", 1, skip=True), pod("mig", 0)]
    pods[-1]["spec"]["containers"][0]["resources"]["requests"] = {"nvidia.com/mig-1g.10gb": "1"}
    assert up.gpu_pods(pods) == [{"name": "train", "namespace": "ml"}, {"name": "mig", "namespace": "ml"}]
    assert up.active_pods(pods) == ["ml/cpu-only", "ml/keep", "ml/mig", "ml/plugin", "ml/train"]
    # a pod of NVIDIA's DRA driver holds its GPUs through ResourceClaims; a GPU allocation switch
    # counts the pods labelled to stay too
    claims = pod("claims")
    claims["spec"]["resourceClaims"] = [{"name": "gpu", "resourceClaimTemplateName": "one-gpu"}]
    assert up.gpu_pods(pods + [claims]) == [{"name": "train", "namespace": "ml"}, {"name": "mig", "namespace": "ml"},
                                            {"name": "claims", "namespace": "ml"}]
    assert [p["name"] for p in up.gpu_pods(pods + [claims], include_skipped=True)] == ["train", "keep", "mig", "claims"]


def node_obj(name, ready=True, unschedulable=False, taints=()):
    return {"metadata": {"name": name, "labels": {"nvidia.com/cuda.driver-version.full": OLD}},
            "spec": {"unschedulable": unschedulable, "taints": list(taints)},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


def test_a_node_waits_for_its_slot():
    nodes = [node_obj("a"), node_obj("b", unschedulable=True), node_obj("c"), node_obj("d")]
    assert up.slot(nodes, "a", 1) == {"free": False, "limit": 1, "unavailable": ["b"]}
    assert up.slot(nodes, "b", 1)["free"] is True  # itself does not count
    assert up.slot(nodes, "a", "50%")["free"] is True


def test_a_wave_goes_out_of_service_only_when_all_of_it_fits():
    # 8 GPU nodes, max_unavailable 4, one cordoned by an admin: 3 slots
    nodes = [node_obj("x", unschedulable=True)] + [node_obj("n%d" % i) for i in range(7)]
    three, four = ["n0", "n1", "n2"], ["n0", "n1", "n2", "n3"]
    assert all(up.slot(nodes, me, 4, three)["free"] for me in three)
    # nodes that look at the same moment: alone each would see a free slot, as a wave none goes
    assert all(up.slot(nodes, me, 4)["free"] for me in four)
    assert not any(up.slot(nodes, me, 4, four)["free"] for me in four)
    assert up.slot(nodes, "n0", 4, four) == {"free": False, "limit": 4, "unavailable": ["x"]}
    # a node of the wave already out of service (cordoned first, or by an admin) is not counted twice
    nodes[1] = node_obj("n0", unschedulable=True)
    assert all(up.slot(nodes, me, 4, three)["free"] for me in three)
    # the admin's node back: the wave of four fits
    nodes[0] = node_obj("x")
    assert all(up.slot(nodes, me, 4, four)["free"] for me in four)


def test_the_plays_batches_are_the_planned_waves():
    nodes = fleet(10)
    nodes[4] = node("gpu-04", state="drain-required", unschedulable=True)
    result = up.plan(nodes, NEW, max_unavailable=4, max_parallel=3, canary=1)
    assert result["resume"] == ["gpu-04"] and result["slots"] == 3
    assert up.batches(result) == {"gpuops_upgrade_first": [1, 1], "gpuops_upgrade_rest": [3, 3, 2]}
    order = up.order(result)
    assert [group for group, _node in order].count("gpuops_upgrade_rest") == 8
    assert up.batches(up.plan(nodes, NEW, max_unavailable=4, max_parallel=3, canary=0), "rest") == {
        "gpuops_upgrade_first": [], "gpuops_upgrade_rest": [1, 3, 3, 3]}


def test_plan_nodes_from_node_objects_and_the_canary_taint():
    nodes = [node_obj("a"), node_obj("b", ready=False, taints=[{"key": "gpuops.nvidia/driver-upgrade-canary"}])]
    assert up.from_node_objects(nodes) == [
        {"name": "a", "labels": {"nvidia.com/cuda.driver-version.full": OLD}, "annotations": {}, "ready": True,
         "unschedulable": False, "driver": OLD},
        {"name": "b", "labels": {"nvidia.com/cuda.driver-version.full": OLD}, "annotations": {}, "ready": False,
         "unschedulable": False, "driver": OLD}]
    assert up.tainted(nodes, "gpuops.nvidia/driver-upgrade-canary") == ["b"]
    plan = up.plan(up.from_node_objects(nodes), NEW, max_unavailable=2, max_parallel=0, canary=1)
    assert up.order(plan) == [["gpuops_upgrade_first", "a"], ["gpuops_upgrade_rest", "b"]]


# ---- the playbook's play: its canary setting, its hosts and their pre-flight results --------------

HOSTS = ["h-a", "h-b", "h-c"]
NAMES = ["a", "b", "c"]
GROUPS = {"canaries": ["h-b", "h-x"], "elsewhere": ["h-x"], "all": HOSTS + ["h-x"]}


@pytest.mark.parametrize("canary, phase, expected, missing", [
    (1, "all", 1, False),
    ("2", "all", 2, False),
    (" 0 ", "canary", 0, False),
    (None, "all", 1, False),
    # a group's hosts in the play, as their Kubernetes node names (h-x is not in the play)
    ("canaries", "all", ["b"], False),
    ("elsewhere", "all", [], True),
    ("no-such-group", "all", [], True),
    # not a count: a group's name (which no inventory has)
    ("-1", "all", [], True),
    ("1.5", "all", [], True),
    # phase rest: the canary ran in a job of its own
    ("canaries", "rest", 0, False),
    (2, "rest", 0, False),
])
def test_the_canary_setting_of_the_play(canary, phase, expected, missing):
    inputs = up.play_inputs(HOSTS, NAMES, canary=canary, phase=phase, groups=GROUPS)
    assert inputs["canary"] == expected and inputs["canary_group_missing"] is missing
    assert inputs["members"] == NAMES


@pytest.mark.parametrize("preflight, drivers", [
    (None, {"a": {}, "b": {}, "c": {}}),
    ([{"driver": {"version": NEW}}], {"a": {"driver": {"version": NEW}}, "b": {}, "c": {}}),
    ([{}, {"x": 1}, {}], {"a": {}, "b": {"x": 1}, "c": {}}),
])
def test_each_members_pre_flight_result(preflight, drivers):
    assert up.play_inputs(HOSTS, NAMES, preflight)["drivers"] == drivers


def test_hosts_and_node_names_must_pair_up():
    with pytest.raises(up.PlanError, match="3 host"):
        up.play_inputs(HOSTS, NAMES[:2])


def _node_object(name, driver=OLD):
    return {"metadata": {"name": name, "labels": {"nvidia.com/cuda.driver-version.full": driver}},
            "status": {"conditions": [{"type": "Ready", "status": "True"}]}, "spec": {}}


@pytest.mark.parametrize("canary, phase, preflight, expected_canary, expected_waves, done, problems", [
    (1, "all", None, [["a"]], [["b"], ["c"]], [], 0),
    ("canaries", "all", None, [["b"]], [["a"], ["c"]], [], 0),
    ("canaries", "rest", None, [], [["a"], ["b"], ["c"]], [], 0),
    # the host's own pre-flight result wins over GFD's label
    (1, "all", [{"driver": {"version": NEW}}], [["b"]], [["c"]], ["a"], 0),
    ("elsewhere", "all", None, [], [["a"], ["b"], ["c"]], [], 1),
])
def test_the_plan_of_the_play(canary, phase, preflight, expected_canary, expected_waves, done, problems):
    objects = [_node_object(name) for name in NAMES + ["z"]]
    result = up.play_plan(objects, NEW, HOSTS, NAMES, preflight, canary=canary, phase=phase, groups=GROUPS,
                          max_unavailable=1, max_parallel=1)
    assert result["canary"] == expected_canary and result["waves"] == expected_waves
    assert result["done"] == done and len(result["problems"]) == problems
    if problems:
        assert "gpuops_upgrade_canary" in result["problems"][0]


def test_the_plan_as_the_playbook_shows_it():
    result = up.plan([node("a"), node("b", state="drain-required"), node("c", driver=NEW), node("d", skip=True),
                      node("e"), node("f", ready=False)], NEW, max_unavailable=3, max_parallel=0, canary=1)
    shown = up.lines(result, {"wait_for_jobs": "app=train", "wait_timeout": 60, "drain": True, "reboot": True})
    assert shown[:7] == [
        "target driver 580.95.05; 6 GPU node(s), max_unavailable 3, 2 at once",
        "resume (left midway by an earlier run): b",
        "canary: a",
        "wave: f, e",
        "done already: c",
        "skipped (nvidia.com/gpu-driver-upgrade.skip=true): d",
        "unavailable for other reasons: f",
    ]
    assert shown[7] == "each node, as its label nvidia.com/gpu-driver-upgrade-state says:"
    steps = up.steps({"wait_for_jobs": "app=train", "wait_timeout": 60, "drain": True, "reboot": True})
    assert shown[8:] == ["  %s: %s" % step for step in steps]
    assert "  wait-for-jobs-required: wait for the pods matching app=train to finish (60s at most)" in shown
    # nothing resumed, done, skipped or unavailable: no line for them
    plain = up.lines(up.plan([node("a"), node("b")], NEW, max_unavailable=1, canary=1))
    assert plain[:3] == ["target driver 580.95.05; 2 GPU node(s), max_unavailable 1, 1 at once", "canary: a", "wave: b"]
    assert plain[3] == "each node, as its label nvidia.com/gpu-driver-upgrade-state says:"


# ---- the GPU allocation switch -----------------------------------------------------------------

DP, DRA = "nvidia.com/gpu.deploy.device-plugin", "nvidia.com/gpu.deploy.dra-driver"


def node_object(name, labels, ready=True, unschedulable=False, maintenance=None):
    annotations = {up.MAINTENANCE_ANNOTATION: maintenance} if maintenance else {}
    return {"metadata": {"name": name, "labels": dict(labels, **{"nvidia.com/gpu.present": "true"}),
                         "annotations": annotations},
            "spec": {"unschedulable": unschedulable},
            "status": {"conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}}


@pytest.mark.parametrize("labels, expected", [
    ({DP: "true"}, "device-plugin"), ({DRA: "true"}, "dra"), ({DP: "true", DRA: "true"}, "both"),
    ({}, "none"), ({DP: "false", DRA: "true"}, "dra"), ({DP: "true", DRA: "paused-for-mig-change"}, "device-plugin"),
])
def test_a_nodes_allocator_is_read_from_its_deploy_labels(labels, expected):
    assert up.allocation_of(labels) == expected


def test_only_the_nodes_whose_allocator_changes_are_switched_in_waves_within_max_unavailable():
    nodes = [node_object("a", {DP: "true"}), node_object("b", {DP: "true"}), node_object("c", {DRA: "true"}),
             node_object("d", {DP: "true", DRA: "true"}), node_object("e", {DP: "true"})]
    result = up.allocation_play_plan(nodes, ["ha", "hb", "hc", "hd", "he"], ["a", "b", "c", "d", "e"],
                                     ["dra", "dra", "dra", "dra", "device-plugin"], max_unavailable=2, max_parallel=0)
    assert result["problems"] == [] and result["canary"] == []
    assert result["changes"] == {"a": ["device-plugin", "dra"], "b": ["device-plugin", "dra"], "d": ["both", "dra"]}
    assert result["waves"] == [["a", "b"], ["d"]] and result["done"] == ["c", "e"]
    lines = up.lines(result, {"drain": True, "action": "switch it"})
    assert lines[0] == "GPU allocation switch; 5 GPU node(s), max_unavailable 2, 2 at once"
    assert "switch a: device-plugin -> dra" in lines and "switch d: both -> dra" in lines
    assert "wave: a, b" in lines and "done already: c, e" in lines
    assert "  pod-restart-required: switch it" in lines


def test_a_cordoned_node_leaves_no_slot_and_an_admins_skip_label_is_respected():
    nodes = [node_object("a", {DP: "true"}, unschedulable=True), node_object("b", {DP: "true"}),
             node_object("c", {DP: "true", up.SKIP_LABEL: "true"})]
    result = up.allocation_play_plan(nodes, ["a", "b", "c"], ["a", "b", "c"], ["dra"] * 3, max_unavailable=1)
    # a (cordoned by someone) is out of service already: it goes first without taking the one slot
    assert result["unavailable"] == ["a"] and result["skipped"] == ["c"] and "c" not in result["changes"]
    assert result["problems"] and "no node can be taken out of service" in result["problems"][0]


def test_a_switch_left_midway_is_resumed_and_a_failed_one_waits_to_be_retried():
    nodes = [node_object("a", {DP: "true", up.STATE_LABEL: "drain-required"}, unschedulable=True,
                         maintenance="allocation"),
             node_object("b", {DRA: "true", up.STATE_LABEL: "upgrade-failed"}, unschedulable=True,
                         maintenance="allocation")]
    result = up.allocation_play_plan(nodes, ["a", "b"], ["a", "b"], ["dra", "dra"], max_unavailable=2)
    assert result["resume"] == ["a"] and result["changes"]["a"] == ["device-plugin", "dra"]
    assert "gpuops_allocation_retry_failed: true" in result["problems"][0] and "b" in result["problems"][0]
    retried = up.allocation_play_plan(nodes, ["a", "b"], ["a", "b"], ["dra", "dra"], max_unavailable=2,
                                      retry_failed=True)
    # (b's labels already say dra: the failed switch is taken again, to validate and uncordon it)
    assert retried["problems"] == [] and retried["changes"]["b"] == ["dra", "dra"]
    assert "retry b: dra already, validate and uncordon" in up.lines(retried)


@pytest.mark.parametrize("state", ["pod-restart-required", "upgrade-failed"])
def test_a_node_a_driver_upgrade_left_midway_or_failed_is_not_taken_by_a_switch_nor_the_reverse(state):
    # (a node without the annotation: an upgrade from before it was written, a driver upgrade)
    for maintenance in (None, "driver"):
        nodes = [node_object("a", {DP: "true", up.STATE_LABEL: state}, unschedulable=True, maintenance=maintenance)]
        result = up.allocation_play_plan(nodes, ["a"], ["a"], ["dra"], retry_failed=True)
        assert result["problems"] == ["a is midway through (or failed in) another maintenance, a driver upgrade "
                                      "(label nvidia.com/gpu-driver-upgrade-state): finish it with the playbook "
                                      "gpuops.nvidia.upgrade first"], result["problems"]
        assert result["changes"] == {} and result["resume"] == []
    # the driver upgrade leaves a switch's node to the allocation playbook the same way
    switching = node("a", state=state)
    switching["annotations"] = {up.MAINTENANCE_ANNOTATION: "allocation"}
    result = up.plan([switching], NEW, retry_failed=True)
    assert "a GPU allocation switch" in result["problems"][0] and "gpuops.nvidia.allocation" in result["problems"][0]
    assert result["resume"] == [] and result["waves"] == []


@pytest.mark.parametrize("value, why", [("false", "an admin opted the node out"),
                                        ("paused-for-mig-change", "a MIG change is in progress")])
def test_a_switch_to_an_allocator_the_node_holds_off_is_refused_by_name(value, why):
    nodes = [node_object("a", {DP: "true", DRA: value}), node_object("b", {DP: "true"})]
    result = up.allocation_play_plan(nodes, ["a", "b"], ["a", "b"], ["dra", "dra"], max_unavailable=2)
    assert result["problems"] == ["a: its label nvidia.com/gpu.deploy.dra-driver is %r (%s), which the switch does not "
                                  "overwrite: %s, then switch" % (value, why, "remove that label if the node is to run it"
                                                                  if value == "false"
                                                                  else "let the MIG change finish (site.yml --tags mig)")]


@pytest.mark.parametrize("allocations, match", [
    (["mps"], r"gpu_allocation must be device-plugin or dra; a \(mps\)"),
    (["dra", "dra"], "1 host"),
])
def test_a_bad_gpu_allocation_is_refused_before_any_plan(allocations, match):
    with pytest.raises(up.PlanError, match=match):
        up.allocation_play_plan([node_object("a", {DP: "true"})], ["a"], ["a"], allocations)


def test_a_node_quarantined_for_an_rma_is_left_alone_and_counts_as_out():
    quarantined = node("q", state="upgrade-failed")
    quarantined["labels"][up.REMEDIATION_STATE_LABEL] = "quarantined"
    quarantined["annotations"] = {up.MAINTENANCE_ANNOTATION: "remediation"}
    quarantined["unschedulable"] = True
    result = up.plan([quarantined, node("a"), node("b"), node("c"), node("d")], NEW, max_unavailable=2)
    assert result["problems"] == [] and result["quarantined"] == ["q"]
    assert "q" not in sum(result["canary"] + result["waves"], []) and result["unavailable"] == ["q"]
    assert result["slots"] == 1
    assert "quarantined for an RMA, left alone until a person brings it back: q" in up.lines(result)


def test_a_node_a_remediation_left_midway_names_the_remediation():
    midway = node("r", state="pod-restart-required")
    midway["annotations"] = {up.MAINTENANCE_ANNOTATION: "remediation"}
    result = up.plan([midway, node("a")], NEW)
    assert result["problems"] == ["r is midway through (or failed in) a remediation (label "
                                  "nvidia.com/gpu-driver-upgrade-state): the alert, still firing, resumes it, or run "
                                  "the playbook gpuops.nvidia.remediate with it; then run this one again"]

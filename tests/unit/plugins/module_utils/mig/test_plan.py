# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The MIG config checks and the planner, on the profile tables the GPUs report through NVML
(NVIDIA's MIG user guide; REFERENCE.md section 5): every named layout on A100-40GB, A100-80GB,
H100-80GB, H200 and B200, partial changes that keep matching instances, mixed per-GPU configs
and invalid configs."""

from __future__ import annotations

import itertools

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils.mig import config as mig_config
from ansible_collections.gpuops.nvidia.plugins.module_utils.mig import plan as mig_plan

P1, P1H, P2, P4, P7 = ([[i, 1] for i in range(7)], [[0, 2], [2, 2], [4, 2], [6, 2]], [[0, 2], [2, 2], [4, 2]],
                       [[0, 4], [4, 4]], [[0, 8]])
# names per model in profile-ID order 19, 20, 15, 14, 9, 5, 0
NAMES = {
    "a100-40gb": ["1g.5gb", "1g.5gb+me", "1g.10gb", "2g.10gb", "3g.20gb", "4g.20gb", "7g.40gb"],
    "a100-80gb": ["1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"],
    "h100-80gb": ["1g.10gb", "1g.10gb+me", "1g.20gb", "2g.20gb", "3g.40gb", "4g.40gb", "7g.80gb"],
    "h200": ["1g.18gb", "1g.18gb+me", "1g.35gb", "2g.35gb", "3g.71gb", "4g.71gb", "7g.141gb"],
    "b200": ["1g.23gb", "1g.23gb+me", "1g.45gb", "2g.45gb", "3g.90gb", "4g.90gb", "7g.180gb"],
}
GEOMETRY = [(19, 1, 7, P1), (20, 1, 1, P1), (15, 1, 4, P1H), (14, 2, 3, P2), (9, 3, 2, P4), (5, 4, 1, [[0, 4]]),
            (0, 7, 1, P7)]


def profiles(model):
    return {name: {"id": pid, "slices": slices, "count": count, "memory_mib": 1000 * places[0][1], "placements": places}
            for name, (pid, slices, count, places) in zip(NAMES[model], GEOMETRY)}


def gpu(model, index=0, enabled=False, pending=None, instances=(), device_id=0x233010DE):
    return {"index": index, "uuid": "GPU-%d" % index, "name": model, "pci_device_id": device_id,
            "mig_capable": True, "mig_current": enabled, "mig_pending": enabled if pending is None else pending,
            "profiles": profiles(model) if enabled else None, "gpu_instances": list(instances)}


def gi(gid, profile, start, size, ci=True, slices=None):
    return {"id": gid, "profile": profile, "profile_id": 0, "placement": [start, size],
            "compute_instances": [{"id": 0, "profile_id": 0, "slices": slices}] if ci else []}


def names(model, *idx_counts):
    return {NAMES[model][i]: c for i, c in idx_counts}


# the usual named layouts, by profile position: all-1g, all-1g-double, all-2g, all-3g, all-4g,
# all-7g, all-balanced, 4g + 3g, 3g + 2g + 2x1g, 2x2g + 3x1g
LAYOUTS = {"all-1g": [(0, 7)], "all-1g-2x": [(2, 4)], "all-2g": [(3, 3)], "all-3g": [(4, 2)], "all-4g": [(5, 1)],
           "all-7g": [(6, 1)], "all-balanced": [(0, 2), (3, 1), (4, 1)], "4g-3g": [(5, 1), (4, 1)],
           "3g-2g-1g": [(4, 1), (3, 1), (0, 2)], "2x2g-3x1g": [(3, 2), (0, 3)], "me-and-1g": [(1, 1), (0, 6)]}


NEW_IDS = itertools.count(100)  # ids of instances the model creates, unique across calls


def apply_plan(g, steps):
    """What the GPU looks like after the steps (a model of NVML, for checking plans)."""
    g = dict(g, gpu_instances=[dict(x) for x in g["gpu_instances"]])
    for s in steps:
        assert s["gpu"] == g["index"]
        if s["action"] == "destroy_compute_instance":
            inst = next(x for x in g["gpu_instances"] if x["id"] == s["gpu_instance"])
            inst["compute_instances"] = [c for c in inst["compute_instances"] if c["id"] != s["compute_instance"]]
        elif s["action"] == "destroy_gpu_instance":
            inst = next(x for x in g["gpu_instances"] if x["id"] == s["gpu_instance"])
            assert not inst["compute_instances"], "a GPU instance is destroyed before its compute instances"
            g["gpu_instances"].remove(inst)
        elif s["action"] == "set_mig_mode":
            assert not g["gpu_instances"] or s["enabled"], "MIG is disabled while instances exist"
            g["mig_current"] = g["mig_pending"] = s["enabled"]
        elif s["action"] == "create_gpu_instance":
            assert g["mig_current"], "an instance is created before MIG is on"
            g["gpu_instances"].append(gi(next(NEW_IDS), s["profile"], *s["placement"], ci=False))
        elif s["action"] == "create_compute_instance":
            if s["gpu_instance"] is None:
                inst = next(x for x in g["gpu_instances"] if x["placement"] == s["placement"])
            else:
                inst = next(x for x in g["gpu_instances"] if x["id"] == s["gpu_instance"])
            assert not inst["compute_instances"]
            inst["compute_instances"].append({"id": 0, "profile_id": 0, "slices": None})
    return g


def check_layout(g, devices):
    """Instances match the counts, no two overlap, compute slices are not exceeded, and every
    placement is one NVML reports for the profile."""
    got = {}
    used = 0
    slices = 0
    for inst in g["gpu_instances"]:
        got[inst["profile"]] = got.get(inst["profile"], 0) + 1
        start, size = inst["placement"]
        mask = ((1 << size) - 1) << start
        assert not used & mask, "overlapping instances"
        used |= mask
        assert inst["placement"] in g["profiles"][inst["profile"]]["placements"]
        slices += g["profiles"][inst["profile"]]["slices"]
        assert len(inst["compute_instances"]) == 1
    assert slices <= 7
    assert got == {n: c for n, c in devices.items() if c}


def one_plan(g, devices, enabled=True):
    entries = [{"devices": [g["index"]], "mig-enabled": enabled, "mig-devices": devices}]
    return mig_plan.plan([g], mig_config.assign("t", entries, [g]), "t")


@pytest.mark.parametrize("model", sorted(NAMES))
@pytest.mark.parametrize("layout", sorted(LAYOUTS))
def test_every_named_layout_fits_from_scratch_and_then_matches(model, layout):
    devices = names(model, *LAYOUTS[layout])
    g = gpu(model, enabled=True)
    result = one_plan(g, devices)
    assert result["errors"] == []
    after = apply_plan(g, result["steps"])
    check_layout(after, devices)
    # the second run changes nothing
    assert one_plan(after, devices)["matches"] is True
    assert one_plan(after, devices)["steps"] == []


@pytest.mark.parametrize("model", sorted(NAMES))
@pytest.mark.parametrize("src,dst", [("all-balanced", "all-1g"), ("all-1g", "all-balanced"), ("all-3g", "4g-3g"),
                                     ("4g-3g", "3g-2g-1g"), ("all-7g", "all-2g"), ("2x2g-3x1g", "all-balanced")])
def test_switching_keeps_what_matches_and_touches_the_least(model, src, dst):
    g = gpu(model, enabled=True)
    g = apply_plan(g, one_plan(g, names(model, *LAYOUTS[src]))["steps"])
    ids_before = {x["id"]: (x["profile"], tuple(x["placement"])) for x in g["gpu_instances"]}
    result = one_plan(g, names(model, *LAYOUTS[dst]))
    after = apply_plan(g, result["steps"])
    check_layout(after, names(model, *LAYOUTS[dst]))
    kept = [x for x in after["gpu_instances"] if x["id"] in ids_before]
    destroyed = [s for s in result["steps"] if s["action"] == "destroy_gpu_instance"]
    created = [s for s in result["steps"] if s["action"] == "create_gpu_instance"]
    assert len(kept) + len(created) == len(after["gpu_instances"])
    assert len(destroyed) == len(ids_before) - len(kept)
    # no instance is destroyed and created again with the same profile at the same place
    again = {(s["profile"], tuple(s["placement"])) for s in created}
    assert not again & {ids_before[s["gpu_instance"]] for s in destroyed}
    assert not [s for s in result["steps"] if s["action"] == "set_mig_mode"]


def test_the_largest_first_allocation_fits_what_the_drivers_order_can_strand():
    # NVIDIA's guide: 1g + 1g + 2g created first can leave no room for the 3g; planned together,
    # the 3g goes first and everything fits
    g = gpu("a100-40gb", enabled=True)
    devices = {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}
    steps = one_plan(g, devices)["steps"]
    creates = [s["profile"] for s in steps if s["action"] == "create_gpu_instance"]
    assert creates[0] == "3g.20gb"
    check_layout(apply_plan(g, steps), devices)


def test_a_layout_is_kept_whatever_ids_the_driver_gave():
    g = gpu("h100-80gb", enabled=True, instances=[gi(2, "3g.40gb", 4, 4), gi(5, "2g.20gb", 0, 2), gi(9, "1g.10gb", 2, 1),
                                                  gi(14, "1g.10gb", 3, 1)])
    assert one_plan(g, {"3g.40gb": 1, "2g.20gb": 1, "1g.10gb": 2})["matches"] is True


def test_a_matching_instance_without_its_compute_instance_keeps_the_gpu_instance():
    g = gpu("h100-80gb", enabled=True, instances=[gi(1, "3g.40gb", 0, 4, ci=False), gi(2, "3g.40gb", 4, 4)])
    steps = one_plan(g, {"3g.40gb": 2})["steps"]
    assert [(s["action"], s.get("gpu_instance")) for s in steps] == [("create_compute_instance", 1)]


def test_instances_of_other_configs_are_destroyed_compute_instances_first():
    g = gpu("h100-80gb", enabled=True, instances=[gi(0, "7g.80gb", 0, 8)])
    steps = one_plan(g, {"3g.40gb": 2})["steps"]
    assert [s["action"] for s in steps[:2]] == ["destroy_compute_instance", "destroy_gpu_instance"]


def test_disable_destroys_everything_then_turns_mig_off():
    g = gpu("a100-80gb", enabled=True, instances=[gi(1, "3g.40gb", 0, 4), gi(2, "3g.40gb", 4, 4)])
    result = one_plan(g, {}, enabled=False)
    assert [s["action"] for s in result["steps"]] == ["destroy_compute_instance"] * 2 + [
        "destroy_gpu_instance"] * 2 + ["set_mig_mode"]
    assert one_plan(gpu("a100-80gb"), {}, enabled=False)["matches"] is True


def test_a_pending_change_is_asked_for_again():
    # MIG on, a disable pending: enabling cancels it; off with an enable pending: ask again
    assert [s["action"] for s in one_plan(gpu("h100-80gb", enabled=True, pending=False), {"7g.80gb": 1})["steps"]][0] \
        == "set_mig_mode"
    pending_on = dict(gpu("a100-40gb"), mig_pending=True)
    assert [s["action"] for s in one_plan(pending_on, {"1g.5gb": 1})["steps"]][0] == "set_mig_mode"
    assert [s["action"] for s in one_plan(pending_on, {}, enabled=False)["steps"]] == ["set_mig_mode"]


def test_unknown_profiles_are_placed_after_the_mode_change():
    result = one_plan(gpu("h100-80gb"), {"3g.40gb": 2})
    assert result["gpus"][0]["validated"] is False
    assert result["steps"][0] == {"gpu": 0, "action": "set_mig_mode", "enabled": True}


@pytest.mark.parametrize("devices,message", [
    ({"4g.40gb": 2}, "at most 1 x 4g.40gb fit on this GPU, not 2"),
    ({"3g.40gb": 3}, "at most 2 x 3g.40gb fit on this GPU, not 3"),
    ({"5g.50gb": 1}, "has no MIG profile 5g.50gb (it reports: 1g.10gb, 1g.10gb+me, 1g.20gb, 2g.20gb, 3g.40gb"),
    ({"4g.40gb": 1, "3g.40gb": 1, "1g.10gb": 1}, "the profiles ask for 8 compute slices; the GPU has 7"),
    ({"1g.10gb+me": 1, "1g.20gb": 4}, "no placement fits 1 x 1g.10gb+me, 4 x 1g.20gb together"),
    ({"4g.40gb": 1, "1g.20gb": 3}, "no placement fits 3 x 1g.20gb, 1 x 4g.40gb together (possible placements"),
])
def test_layouts_that_do_not_fit_name_the_gpu_entry_and_reason(devices, message):
    result = one_plan(gpu("h100-80gb", enabled=True), devices)
    assert result["steps"] == [] and result["matches"] is False
    assert len(result["errors"]) == 1
    assert result["errors"][0].startswith("mig-configs.t[0]: GPU 0 (h100-80gb): ")
    assert message in result["errors"][0], result["errors"][0]


def test_mig_on_a_gpu_that_cannot():
    t4 = dict(gpu("h100-80gb"), mig_capable=False, name="Tesla T4")
    assert "GPU 0 (Tesla T4) cannot run MIG" in one_plan(t4, {"1g.10gb": 1})["errors"][0]
    assert one_plan(t4, {}, enabled=False)["matches"] is True


def test_mixed_per_gpu_entries_and_device_filters():
    gpus = [gpu("h100-80gb", index=i, enabled=True) for i in range(4)] + [
        gpu("a100-40gb", index=4, enabled=True, device_id=0x20B010DE)]
    entries = [{"devices": [0, 1], "mig-enabled": False},
               {"devices": "all", "device-filter": "0x20B010DE", "mig-enabled": True, "mig-devices": {"7g.40gb": 1}},
               {"devices": [2, 3], "device-filter": ["0x233010DE"], "mig-enabled": True,
                "mig-devices": {"3g.40gb": 2}}]
    assignment = mig_config.assign("mixed", entries, gpus)
    assert {i: e for i, (e, _x) in assignment.items()} == {0: 0, 1: 0, 4: 1, 2: 2, 3: 2}
    result = mig_plan.plan(gpus, assignment, "mixed")
    assert result["errors"] == []
    # GPU by GPU, each in NVML's order: a failure on one GPU leaves the others as they were
    order = [(s["gpu"], mig_plan.PHASES.index(s["action"])) for s in result["steps"]]
    assert order == sorted(order)
    for g in gpus:
        steps = [s for s in result["steps"] if s["gpu"] == g["index"]]
        after = apply_plan(g, steps)
        want = {0: {}, 1: {}, 2: {"3g.40gb": 2}, 3: {"3g.40gb": 2}, 4: {"7g.40gb": 1}}[g["index"]]
        if want:
            check_layout(after, want)
        else:
            assert after["mig_current"] is False


@pytest.mark.parametrize("document,message", [
    ({"version": "v2", "mig-configs": {"a": [{"devices": "all", "mig-enabled": False}]}}, "version must be v1"),
    ({"version": "v1"}, "mig-configs must map config names"),
    ({"version": "v1", "mig-configs": {"a": [{"devices": "some", "mig-enabled": False}]}},
     "mig-configs.a[0]: devices must be 'all' or a non-empty list"),
    ({"version": "v1", "mig-configs": {"a": [{"devices": [0, 0], "mig-enabled": True}]}}, "lists an index twice"),
    ({"version": "v1", "mig-configs": {"a": [{"devices": "all", "mig-enabled": "yes"}]}},
     "mig-configs.a[0]: mig-enabled must be true or false"),
    ({"version": "v1", "mig-configs": {"a": [{"devices": "all", "mig-enabled": True, "mig-devices": {"3g": 1}}]}},
     "'3g' is not a MIG profile name"),
    ({"version": "v1", "mig-configs": {"a": [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"1c.3g.40gb": 1}}]}}, "compute-instance profiles"),
    ({"version": "v1", "mig-configs": {"a": [
        {"devices": "all", "mig-enabled": True, "mig-devices": {"3g.40gb": -1}}]}}, "must be a whole number >= 0"),
    ({"version": "v1", "mig-configs": {"a": [
        {"devices": "all", "mig-enabled": False, "mig-devices": {"3g.40gb": 1}}]}}, "mig-devices need mig-enabled: true"),
    ({"version": "v1", "mig-configs": {"a": [{"devices": "all", "device-filter": "233010DE", "mig-enabled": False}]}},
     "device-filter takes PCI device ids"),
    ({"version": "v1", "mig-configs": {"a": [{"device": "all", "mig-enabled": False}]}}, "unknown key(s) device"),
    ({"version": "v1", "mig-configs": {"a": "all"}}, "mig-configs.a must be a non-empty list"),
])
def test_malformed_configs(document, message):
    errors = mig_config.config_errors(document)
    assert any(message in e for e in errors), errors


def test_selection_errors():
    document = {"version": "v1", "mig-configs": {"a": [{"devices": [0, 9], "mig-enabled": False}],
                                                 "b": [{"devices": "all", "mig-enabled": False},
                                                       {"devices": [1], "mig-enabled": True}],
                                                 "c": [{"devices": [0], "device-filter": "0x20B010DE",
                                                        "mig-enabled": False}]}}
    gpus = [gpu("h100-80gb", index=i) for i in range(2)]
    with pytest.raises(mig_config.ConfigError, match="no MIG config named 'x' \\(the file has: a, b, c\\)"):
        mig_config.select(document, "x")
    with pytest.raises(mig_config.ConfigError, match=r"mig-configs.a\[0\]: the node has no GPU 9 \(it has 0, 1\)"):
        mig_config.assign("a", mig_config.select(document, "a"), gpus)
    with pytest.raises(mig_config.ConfigError, match=r"GPU 1 is selected by mig-configs.b\[0\] and mig-configs.b\[1\]"):
        mig_config.assign("b", mig_config.select(document, "b"), gpus)
    with pytest.raises(mig_config.ConfigError, match="none of GPUs 0 has PCI device id 0x20B010DE"):
        mig_config.assign("c", mig_config.select(document, "c"), gpus)


def test_diff_text_shows_one_line_per_gpu():
    g = gpu("h100-80gb", enabled=True)
    text = mig_plan.diff_text(one_plan(g, {"7g.80gb": 1}))
    assert text["before"] == "GPU 0: MIG on: none\n" and text["after"] == "GPU 0: MIG on: 7g.80gb@0:8\n"


@pytest.mark.parametrize("model", sorted(NAMES))
def test_named_layouts_follow_what_the_gpu_reports(model):
    doc = mig_plan.named_layouts([gpu(model, index=i, enabled=True) for i in range(8)])
    assert mig_config.config_errors(doc) == []
    configs = doc["mig-configs"]
    one_g, one_g_double, two_g, three_g, four_g, seven_g = (NAMES[model][i] for i in (0, 2, 3, 4, 5, 6))
    assert sorted(configs) == sorted(["all-disabled", "all-enabled", "all-balanced"] + [
        "all-" + n for n in (one_g, one_g_double, two_g, three_g, four_g, seven_g)])
    assert configs["all-" + one_g][0]["mig-devices"] == {one_g: 7}
    assert configs["all-" + one_g_double][0]["mig-devices"] == {one_g_double: 4}
    assert configs["all-" + three_g][0]["mig-devices"] == {three_g: 2}
    assert configs["all-balanced"][0]["mig-devices"] == {one_g: 2, two_g: 1, three_g: 1}
    # and every one of them is a layout the planner fits
    for name in configs:
        g = gpu(model, enabled=True)
        assert mig_plan.plan([g], mig_config.assign(name, configs[name], [g]), name)["errors"] == []


def test_named_layouts_of_a_mixed_node_filter_by_device_id():
    gpus = [gpu("h100-80gb", index=0, enabled=True), gpu("a100-40gb", index=1, enabled=True, device_id=0x20B010DE),
            dict(gpu("h100-80gb", index=2), device_id=0x233010DE)]
    configs = mig_plan.named_layouts(gpus)["mig-configs"]
    assert [(e["device-filter"], e["mig-devices"]) for e in configs["all-balanced"]] == [
        (["0x20B010DE"], {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}),
        (["0x233010DE"], {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1})]
    assert [e["device-filter"] for e in configs["all-1g.5gb"]] == [["0x20B010DE"]]
    assert configs["all-disabled"] == [{"devices": "all", "mig-enabled": False}]


def test_a_kept_instance_with_a_partial_compute_instance_gets_a_full_one():
    g = gpu("h100-80gb", enabled=True, instances=[gi(1, "3g.40gb", 0, 4, slices=1), gi(2, "3g.40gb", 4, 4, slices=3)])
    steps = one_plan(g, {"3g.40gb": 2})["steps"]
    assert [(s["action"], s.get("gpu_instance")) for s in steps] == [
        ("destroy_compute_instance", 1), ("create_compute_instance", 1)]


def test_a_pending_disable_on_an_a100_with_known_profiles_is_cancelled():
    g = gpu("a100-40gb", enabled=True, pending=False, instances=[gi(1, "7g.40gb", 0, 8)])
    steps = one_plan(g, {"7g.40gb": 1})["steps"]
    assert steps == [{"gpu": 0, "action": "set_mig_mode", "enabled": True}]


def test_an_instance_that_runs_a_process_is_not_destroyed():
    g = dict(gpu("h100-80gb", enabled=True, instances=[gi(7, "7g.80gb", 0, 8)]),
             processes=[{"pid": 4242, "name": "train.py", "kind": "compute", "gpu_instance": 7,
                         "compute_instance": 0}])
    result = one_plan(g, {"3g.40gb": 2})
    assert result["steps"] == []
    assert result["errors"] == ["mig-configs.t[0]: GPU 0 (h100-80gb): GPU instance 7 (7g.80gb@0:8) would be "
                                "destroyed but runs process(es) 4242 (train.py); stop them first"]
    assert "runs process(es) 4242 (train.py); stop them before MIG is turned off" in one_plan(
        g, {}, enabled=False)["errors"][0]
    # keeping it is fine
    assert one_plan(g, {"7g.80gb": 1})["matches"] is True


def test_named_layouts_leave_out_gpus_that_cannot_do_mig():
    t4 = dict(gpu("h100-80gb", index=1), mig_capable=False, device_id=0x1EB810DE, pci_device_id=0x1EB810DE,
              name="Tesla T4")
    gpus = [gpu("h100-80gb", index=0, enabled=True), t4]
    doc = mig_plan.named_layouts(gpus)
    for name, entries in doc["mig-configs"].items():
        assignment = mig_config.assign(name, entries, gpus)
        if name != "all-disabled":
            assert 1 not in assignment, name
        assert mig_plan.plan(gpus, assignment, name)["errors"] == [], name


def test_generated_layouts_turn_on_gpus_whose_profiles_are_unknown():
    from ansible_collections.gpuops.nvidia.plugins.module_utils.mig import apply as mig_apply

    gpus = [gpu("h100-80gb", index=0, enabled=True),
            dict(gpu("a100-40gb", index=1), device_id=0x20B010DE, pci_device_id=0x20B010DE)]
    doc = mig_apply.generated(gpus, "all-balanced")
    entries = doc["mig-configs"]["all-balanced"]
    assert entries[-1] == {"devices": [1], "mig-enabled": True, "mig-devices": {}}
    assignment = mig_config.assign("all-balanced", entries, gpus)
    assert sorted(assignment) == [0, 1]
    result = mig_plan.plan(gpus, assignment, "all-balanced")
    assert result["errors"] == [] and result["gpus"][1]["validated"] is False
    assert [s["action"] for s in result["steps"] if s["gpu"] == 1] == ["set_mig_mode"]
    # a name no model has, with every profile known: an error naming what there is
    with pytest.raises(mig_config.ConfigError, match="no MIG config named 'all-9g.99gb'"):
        mig_config.select(mig_apply.generated(gpus[:1], "all-9g.99gb"), "all-9g.99gb")


def test_config_names_of_other_types_do_not_crash():
    document = {"version": "v1", "mig-configs": {1: [{"devices": "all", "mig-enabled": False}],
                                                 "a": [{"devices": "all", "mig-enabled": False, 7: 1}]}}
    assert any("unknown key(s) 7" in e for e in mig_config.config_errors(document))
    with pytest.raises(mig_config.ConfigError):
        mig_config.select(document, "x")


@pytest.mark.parametrize("model, names, expected", [
    ("NVIDIA H100 80GB HBM3", {"1g.5gb": 7}, "has no MIG profile 1g.5gb"),
    ("NVIDIA A100-SXM4-40GB", {"3g.40gb": 2}, "has no MIG profile 3g.40gb"),
    ("NVIDIA H200", {"1g.10gb": 1, "3g.71gb": 1}, "has no MIG profile 1g.10gb (its profiles: 1g.18gb, 1g.18gb+me"),
    ("NVIDIA A100 80GB PCIe", {"2g.20gb": 3, "7g.80gbx": 1}, "has no MIG profile 7g.80gbx"),
])
def test_a_profile_name_the_model_does_not_have_is_refused_before_the_mode_change(model, names, expected):
    result = one_plan(gpu(model), names)
    assert result["steps"] == [] and any(expected in e and "MIG mode was not touched" in e for e in result["errors"]), result


@pytest.mark.parametrize("model, names", [
    ("NVIDIA H100 80GB HBM3", {"1g.10gb": 7}), ("NVIDIA H200", {"3g.71gb": 2}), ("NVIDIA A100-SXM4-40GB", {"1g.5gb+me": 1}),
    ("NVIDIA H100 80GB HBM3", {"1c.3g.40gb": 1}),
    # a model the table does not know: checked once MIG is on, as before
    ("NVIDIA B200", {"1g.23gb": 7}), ("NVIDIA H100 NVL", {"1g.12gb": 7}),
])
def test_a_name_the_model_has_or_an_unknown_model_goes_on_to_the_mode_change(model, names):
    result = one_plan(gpu(model), names)
    assert result["errors"] == [] and result["steps"][0] == {"gpu": 0, "action": "set_mig_mode", "enabled": True}

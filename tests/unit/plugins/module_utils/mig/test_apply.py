# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""mig/apply's steps against the lab's fake libnvidia-ml.so.1 (loaded before pynvml, as
nvml/test_adapter does): plan only, apply and converge, a second run that does nothing, mode
changes that wait for a reset (with and without a reset), a step that fails midway, and configs
the node cannot take refused before anything changes."""
from __future__ import annotations

import ctypes
import os

import pytest

TESTS = os.path.dirname(os.path.abspath(__file__))
FAKE = os.path.abspath(os.path.join(TESTS, "..", "..", "..", "..", "lab", "fake-nvml"))
LIB = os.path.join(FAKE, "build", "libnvidia-ml.so.1")
if not os.path.exists(LIB):
    raise RuntimeError("build the lab's fake NVML first: make fake-nvml (missing %s)" % LIB)
ctypes.CDLL(LIB)

from ansible_collections.gpuops.nvidia.plugins.module_utils.mig import apply as mig_apply  # noqa: E402
from ansible_collections.gpuops.nvidia.plugins.module_utils.nvml import adapter as nvml  # noqa: E402

LAYOUTS = {
    "hgx-h100": {"all-3g": {"3g.40gb": 2}, "all-balanced": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}},
    "dgx-a100": {"all-1g": {"1g.5gb": 7}, "four-three": {"4g.20gb": 1, "3g.20gb": 1}},
    "hgx-h200": {"all-3g": {"3g.71gb": 2}},
}


def config(profile, extra=None):
    configs = {"all-disabled": [{"devices": "all", "mig-enabled": False}]}
    for name, devices in LAYOUTS.get(profile, {}).items():
        configs[name] = [{"devices": "all", "mig-enabled": True, "mig-devices": devices}]
    configs.update(extra or {})
    return {"version": "v1", "mig-configs": configs}


@pytest.fixture
def node(tmp_path, monkeypatch):
    """node(profile, state=name) selects a simulated node; NVML opened afterwards reads it."""
    def select(profile, state=None):
        monkeypatch.setenv("GPUOPS_FAKE_NVML_PROFILE", os.path.join(FAKE, "profiles", profile + ".profile"))
        monkeypatch.setenv("GPUOPS_FAKE_NVML_STATE", str(tmp_path / ((state or profile) + ".state")))
    return select


def apply(document, name, record=None, reset=None):
    with nvml.session():
        return mig_apply.apply(document, name, record, reset=reset)


def plan_only(document, name, record=None):
    with nvml.session():
        return mig_apply.plan_only(document, name, record)


def layout(result):
    out = {}
    for device in result["mig_devices"]:
        out.setdefault(device["gpu"], []).append(device["profile"])
    return {gpu: sorted(profiles) for gpu, profiles in out.items()}


@pytest.mark.parametrize("profile, name", [(p, n) for p in sorted(LAYOUTS) for n in sorted(LAYOUTS[p])])
def test_apply_converges_and_a_second_run_does_nothing(node, profile, name):
    node(profile)
    document = config(profile)
    result, record = apply(document, name)
    want = sorted(p for p, count in LAYOUTS[profile][name].items() for _unused in range(count))
    assert result["converged"] is True and result["changed"] is True
    assert layout(result) == {gpu: want for gpu in range(8)}
    assert list(record) and all(set(LAYOUTS[profile][name]) <= set(profiles) for profiles in record.values())
    actions = [s["action"] for s in result["done"]]
    assert actions.index("set_mig_mode") < actions.index("create_gpu_instance") < actions.index("create_compute_instance")
    again, _record = apply(document, name, record)
    assert again["changed"] is False and again["matches"] is True and again["done"] == []
    off, _record = apply(document, "all-disabled", record)
    assert off["converged"] is True and off["mig_devices"] == []


def test_plan_only_changes_nothing_and_a_record_validates_gpus_whose_mig_is_off(node):
    node("hgx-h100", state="seed")
    _result, record = apply(config("hgx-h100"), "all-3g")
    node("hgx-h100")
    unknown, seen = plan_only(config("hgx-h100"), "all-balanced")
    assert seen == {} and not any(p["validated"] for p in unknown["plan"]["gpus"])
    known, kept = plan_only(config("hgx-h100"), "all-balanced", record)
    assert kept == record and all(p["validated"] for p in known["plan"]["gpus"])
    assert known["matches"] is False and known["done"] == [] and known["mig_devices"] == []
    # still MIG off everywhere: nothing was changed
    with nvml.session():
        assert not any(g["mig_current"] for g in nvml.mig_gpus())


@pytest.mark.parametrize("name, extra, message", [
    ("missing", None, "MIG config: no MIG config named 'missing'"),
    ("gpu-9", {"gpu-9": [{"devices": [9], "mig-enabled": False}]}, "the node has no GPU 9"),
    ("two-4g", {"two-4g": [{"devices": [0], "mig-enabled": True, "mig-devices": {"4g.40gb": 2}}]},
     "MIG config two-4g cannot be applied; nothing was changed: mig-configs.two-4g[0]: GPU 0"),
])
def test_a_config_the_node_cannot_take_changes_nothing(node, name, extra, message):
    node("hgx-h100")
    _result, record = apply(config("hgx-h100"), "all-3g")
    with pytest.raises(mig_apply.ApplyError) as err:
        apply(config("hgx-h100", extra), name, record)
    assert message in err.value.message and err.value.result["changed"] is False
    assert err.value.result.get("done", []) == []


@pytest.mark.parametrize("reset_answer, converged, waiting", [
    (None, False, 8),  # resets not allowed: every GPU waits, nothing is created on them
    ((False, "GPU reset refused"), False, 8),  # tried, refused: the reset's output is reported
])
def test_mode_changes_that_wait_for_a_reset(node, reset_answer, converged, waiting):
    node("dgx-a100-mig-pending")
    asked = []

    def reset(gpu):
        asked.append(gpu["index"])
        return reset_answer

    result, _record = apply(config("dgx-a100"), "all-1g", reset=reset if reset_answer else None)
    assert result["converged"] is converged and result["changed"] is True
    assert [(r["gpu"], r["activation"]) for r in result["reset_required"]] == [(i, "RESET_REQUIRED") for i in range(waiting)]
    assert {s["action"] for s in result["not_done"]} >= {"create_gpu_instance", "create_compute_instance"}
    if reset_answer:
        assert asked == list(range(8))
        assert [s["ok"] for s in result["done"] if s["action"] == "reset_gpu"] == [False] * 8
        assert {r["reset_output"] for r in result["reset_required"]} == {"GPU reset refused"}
    else:
        assert asked == [] and not any(s["action"] == "reset_gpu" for s in result["done"])


def test_a_step_that_fails_midway_says_what_was_done_and_what_was_not(node, monkeypatch):
    node("hgx-h100")
    document = config("hgx-h100")
    _result, record = apply(document, "all-3g")
    real, creations = nvml.call, []

    def failing(name, *args):
        if name == "nvmlDeviceCreateGpuInstanceWithPlacement":
            creations.append(name)
            if len(creations) == 3:
                raise nvml.NvmlError("Insufficient Resources", 23)
        return real(name, *args)

    monkeypatch.setattr(nvml, "call", failing)
    with pytest.raises(mig_apply.ApplyError) as err:
        apply(document, "all-balanced", record)
    result = err.value.result
    assert "create gpu instance on GPU 0 failed: Insufficient Resources (INSUFFICIENT_RESOURCES)" in err.value.message
    assert result["changed"] is True
    assert [s["action"] for s in result["done"]].count("create_gpu_instance") == 2
    assert result["not_done"][0]["action"] == "create_gpu_instance"
    monkeypatch.setattr(nvml, "call", real)
    again, _record = apply(document, "all-balanced", record)
    assert again["converged"] is True
    assert [s["action"] for s in again["done"]].count("create_gpu_instance") == 8 * 3 - 2


def test_gpus_without_known_profiles_get_mig_on_first_and_a_misfit_is_undone(node):
    node("hgx-h100")
    document = config("hgx-h100", {"two-4g": [{"devices": "all", "mig-enabled": True, "mig-devices": {"4g.40gb": 2}}]})
    with pytest.raises(mig_apply.ApplyError) as err:
        apply(document, "two-4g")
    assert "at most 1 x 4g.40gb fit on this GPU, not 2" in err.value.message
    assert "MIG mode was turned back off on GPU(s) 0, 1, 2, 3, 4, 5, 6, 7" in err.value.message
    with nvml.session():
        assert not any(g["mig_current"] for g in nvml.mig_gpus())

# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""nvml/mig: the MIG mutations step by step against the lab's fake libnvidia-ml.so.1 (loaded
before pynvml, as test_adapter does), every NVML refusal a StepFailed naming the step; profiles
borrowed for GPUs whose MIG is off."""
from __future__ import annotations

import copy
import ctypes
import os

import pytest

TESTS = os.path.dirname(os.path.abspath(__file__))
FAKE = os.path.abspath(os.path.join(TESTS, "..", "..", "..", "..", "lab", "fake-nvml"))
LIB = os.path.join(FAKE, "build", "libnvidia-ml.so.1")
if not os.path.exists(LIB):
    raise RuntimeError("build the lab's fake NVML first: make fake-nvml (missing %s)" % LIB)
ctypes.CDLL(LIB)

from ansible_collections.gpuops.nvidia.plugins.module_utils.nvml import adapter as nvml  # noqa: E402
from ansible_collections.gpuops.nvidia.plugins.module_utils.nvml import mig  # noqa: E402

H100 = 0x233010DE
A100 = 0x20B010DE
PROFILES = {"1g.10gb": {"id": 19, "slices": 1, "count": 7}}


@pytest.fixture
def node(tmp_path, monkeypatch):
    def select(profile):
        monkeypatch.setenv("GPUOPS_FAKE_NVML_PROFILE", os.path.join(FAKE, "profiles", profile + ".profile"))
        monkeypatch.setenv("GPUOPS_FAKE_NVML_STATE", str(tmp_path / (profile + ".state")))
    return select


def gpu(index, device_id, capable=True, profiles=None):
    return {"index": index, "pci_device_id": device_id, "mig_capable": capable, "profiles": profiles}


@pytest.mark.parametrize("gpus, record, borrowed, record_after", [
    # another GPU of the same model reports them
    ([gpu(0, H100, profiles=PROFILES), gpu(1, H100)], None,
     {1: (PROFILES, "another GPU of the node")}, {"0x233010DE": PROFILES}),
    # the record of an earlier run
    ([gpu(0, H100)], {"0x233010DE": PROFILES}, {0: (PROFILES, "an earlier run")}, {"0x233010DE": PROFILES}),
    # what the node reports now wins over the record, and the record keeps other models
    ([gpu(0, H100, profiles=PROFILES), gpu(1, H100)], {"0x233010DE": {"old": {}}, "0x20B010DE": {"x": {}}},
     {1: (PROFILES, "another GPU of the node")}, {"0x233010DE": PROFILES, "0x20B010DE": {"x": {}}}),
    # another model's profiles are not borrowed; a GPU that cannot do MIG borrows nothing
    ([gpu(0, H100, profiles=PROFILES), gpu(1, A100), gpu(2, H100, capable=False)], None,
     {}, {"0x233010DE": PROFILES}),
    # no PCI id: neither lends nor borrows
    ([gpu(0, None, profiles=PROFILES), gpu(1, None)], None, {}, {}),
])
def test_borrow_profiles(gpus, record, borrowed, record_after):
    before = copy.deepcopy(record)
    kept = mig.borrow_profiles(gpus, record)
    assert kept == record_after
    assert record == before  # the caller's record is not changed in place
    for g in gpus:
        if g["index"] in borrowed:
            assert (g["profiles"], g["profiles_from"]) == borrowed[g["index"]]
        else:
            assert "profiles_from" not in g


@pytest.mark.parametrize("code, name", [(0, "SUCCESS"), (16, "RESET_REQUIRED"), (19, "IN_USE"), (77, "77"), (None, "None")])
def test_error_names(code, name):
    assert mig.error_name(code) == name


def test_the_steps_one_by_one(node):
    """MIG on, a GPU instance at an explicit placement, its compute instance, then everything
    destroyed again: each step read back through the adapter."""
    node("hgx-h100")
    applier = mig.Applier()
    with nvml.session():
        assert applier.run({"gpu": 0, "action": "set_mig_mode", "enabled": True}) == {"activation": "SUCCESS"}
        profile = nvml.mig_gpu(0)["profiles"]["3g.40gb"]
        created = applier.run({"gpu": 0, "action": "create_gpu_instance", "profile_id": profile["id"], "placement": [4, 4]})
        gi_id = created["gpu_instance"]
        assert applier.new_instances == {(0, 4): gi_id}
        # a compute instance for the instance just created, found by its placement
        ci = applier.run({"gpu": 0, "action": "create_compute_instance", "gpu_instance": None, "placement": [4, 4]})
        assert ci["gpu_instance"] == gi_id
        facts = nvml.mig_gpu(0)
        assert [(g["profile"], g["placement"], len(g["compute_instances"])) for g in facts["gpu_instances"]] == [
            ("3g.40gb", [4, 4], 1)]
        assert [d["profile"] for d in nvml.mig_devices(0, facts)] == ["3g.40gb"]
        applier.run({"gpu": 0, "action": "destroy_compute_instance", "gpu_instance": gi_id,
                     "compute_instance": ci["compute_instance"]})
        applier.run({"gpu": 0, "action": "destroy_gpu_instance", "gpu_instance": gi_id})
        assert nvml.mig_gpu(0)["gpu_instances"] == []
        applier.run({"gpu": 0, "action": "set_mig_mode", "enabled": False})
        assert nvml.mig_gpu(0)["mig_current"] is False


@pytest.mark.parametrize("step, message", [
    ({"gpu": 9, "action": "set_mig_mode", "enabled": True}, "set mig mode on GPU 9 failed: "),
    ({"gpu": 0, "action": "destroy_gpu_instance", "gpu_instance": 42}, "destroy gpu instance on GPU 0 failed: "),
    ({"gpu": 0, "action": "create_gpu_instance", "profile_id": 9, "placement": [1, 4]},
     "create gpu instance on GPU 0 failed: "),
])
def test_a_refused_step_is_a_step_failed_naming_it(node, step, message):
    node("hgx-h100")
    applier = mig.Applier()
    with nvml.session():
        applier.run({"gpu": 0, "action": "set_mig_mode", "enabled": True})
        with pytest.raises(mig.StepFailed) as err:
            applier.run(step)
    assert err.value.message.startswith(message) and err.value.step is step
    assert err.value.code and "(%s)" % mig.error_name(err.value.code) in err.value.message


def test_read_node_borrows_for_gpus_whose_mig_is_off(node):
    node("hgx-h100")
    with nvml.session():
        mig.Applier().run({"gpu": 3, "action": "set_mig_mode", "enabled": True})
        gpus, record = mig.read_node()
    assert list(record) == ["0x233010DE"]
    assert gpus[3]["profiles"] is not None and "profiles_from" not in gpus[3]
    assert all(g["profiles"] == gpus[3]["profiles"] and g["profiles_from"] == "another GPU of the node"
               for g in gpus if g["index"] != 3)

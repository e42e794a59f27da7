# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime import cdi

GPUS = [
    {"index": 0, "uuid": "GPU-aaaa", "mig": {"capable": True, "current": True,
                                             "devices": [{"uuid": "MIG-a0"}, {"uuid": "MIG-a1"}]}},
    {"index": 1, "uuid": "GPU-bbbb", "mig": {"capable": True, "current": False, "devices": []}},
    {"index": 2, "uuid": "GPU-cccc"},
]
LOST = GPUS[1:] + [{"index": 3, "uuid": None, "lost": True}]


def spec(names, nodes=("/dev/nvidiactl",), kind="nvidia.com/gpu", path="/var/run/cdi/nvidia.yaml"):
    return {"path": path, "data": {"cdiVersion": "0.5.0", "kind": kind,
                                   "devices": [{"name": n, "containerEdits": {"deviceNodes": []}} for n in names],
                                   "containerEdits": {"deviceNodes": [{"path": n} for n in nodes]}}}


# What nvidia-ctk 1.18 names for GPUS, written out by hand: GPU 0 is in MIG mode, so only its MIG
# devices are named (1.17 also names GPU 0 itself).
NAMES = ["all", "0:0", "MIG-a0", "0:1", "MIG-a1", "1", "GPU-bbbb", "2", "GPU-cccc"]


def codes(report):
    return [f["code"] for f in report["findings"]]


def test_expected_names():
    assert cdi.expected_names(GPUS) == set(NAMES)


def test_mig_devices_named_by_their_handle_index():
    """nvidia-ctk names MIG devices by the MIG handle index NVML gave them, which can skip numbers
    (a destroyed instance leaves a hole)."""
    devices = [{"index": 0, "uuid": "MIG-c0"}, {"index": 2, "uuid": "MIG-c2"}]
    gpus = [{"index": 3, "uuid": "GPU-c", "mig": {"current": True, "devices": devices}}]
    assert cdi.expected_names(gpus) == {"all", "3:0", "MIG-c0", "3:2", "MIG-c2"}
    assert cdi.optional_names(gpus) == {"3", "GPU-c"}


def test_a_gpu_in_mig_mode_may_be_listed_or_not():
    """nvidia-ctk 1.17 lists a GPU in MIG mode by index and UUID too, 1.18 does not: both are current."""
    assert cdi.check([spec(NAMES + ["0", "GPU-aaaa"])], [], GPUS)["findings"] == []
    assert cdi.check([spec(NAMES)], [], GPUS)["findings"] == []


def test_current_spec_is_clean():
    report = cdi.check([spec(NAMES)], [], GPUS, present_nodes={"/dev/nvidiactl"})
    assert report["findings"] == [] and report["stale"] is False


@pytest.mark.parametrize("names, code, devices", [
    # the spec from before GPU 0 was partitioned
    (["all", "0", "GPU-aaaa", "1", "GPU-bbbb", "2", "GPU-cccc"], "cdi_device_missing",
     ["0:0", "0:1", "MIG-a0", "MIG-a1"]),
    # a GPU that was swapped out (or whose MIG device was destroyed)
    (NAMES + ["3", "GPU-dddd", "0:2"], "cdi_device_stale", ["0:2", "3", "GPU-dddd"]),
])
def test_stale_specs(names, code, devices):
    report = cdi.check([spec(names)], [], GPUS)
    assert codes(report) == [code] and report["stale"] is True
    assert report["findings"][0]["devices"] == devices


def test_a_lost_gpu_blocks_generation():
    """nvidia-ctk writes no spec while a GPU is lost: saying "regenerate" would not help."""
    missing = cdi.check([], [], LOST)
    assert codes(missing) == ["cdi_spec_missing", "cdi_generation_blocked"] and missing["blocked"] is True
    assert missing["findings"][1]["message"] == ("nvidia-ctk cannot generate a CDI spec while GPU 3 is lost: it "
                                                 "stops at that GPU")
    assert missing["findings"][1]["subject"] == "GPU 3"
    # the spec from before the GPU was lost still names it
    old = cdi.check([spec(["all", "1", "GPU-bbbb", "2", "GPU-cccc", "3", "GPU-dddd"])], [], LOST)
    assert codes(old) == ["cdi_device_stale", "cdi_generation_blocked"]
    current = cdi.check([spec(["all", "1", "GPU-bbbb", "2", "GPU-cccc"])], [], LOST)
    assert codes(current) == [] and current["blocked"] is True


def test_missing_spec_duplicate_kind_and_other_kinds():
    assert codes(cdi.check([spec(["0"], kind="vendor.com/fpga")], [], GPUS)) == ["cdi_spec_missing"]
    both = cdi.check([spec(NAMES), spec(NAMES, path="/etc/cdi/nvidia.yaml")], [], GPUS)
    assert codes(both) == ["cdi_spec_duplicate"]


def test_device_nodes_are_data():
    specs = [spec(NAMES, nodes=("/dev/nvidiactl", "/dev/nvidia-uvm"))]
    assert cdi.device_nodes(specs) == ["/dev/nvidia-uvm", "/dev/nvidiactl"]
    report = cdi.check(specs, [], GPUS, present_nodes={"/dev/nvidiactl"})
    assert codes(report) == ["cdi_device_node_missing"]
    assert report["findings"][0]["paths"] == ["/dev/nvidia-uvm"]
    assert report["stale"] is False
    assert codes(cdi.check(specs, [], GPUS, present_nodes=None)) == []


def test_present_paths_reads_under_the_root(tmp_path):
    (tmp_path / "dev").mkdir()
    (tmp_path / "dev" / "nvidiactl").write_text("")
    assert cdi.present_paths(["/dev/nvidiactl", "/dev/nvidia-uvm"], str(tmp_path)) == {"/dev/nvidiactl"}


def test_read_specs(tmp_path):
    (tmp_path / "etc" / "cdi").mkdir(parents=True)
    (tmp_path / "etc" / "cdi" / "nvidia.yaml").write_text("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: []\n")
    (tmp_path / "etc" / "cdi" / "other.json").write_text('{"kind": "x.com/y"}')
    (tmp_path / "etc" / "cdi" / "broken.yaml").write_text("kind: [unclosed\n")
    specs, problems = cdi.read_specs(["/etc/cdi", "/var/run/cdi"], str(tmp_path))
    assert [s["path"] for s in specs] == ["/etc/cdi/nvidia.yaml", "/etc/cdi/other.json"]
    assert [p["path"] for p in problems] == ["/etc/cdi/broken.yaml"]
    report = cdi.check(specs, problems, GPUS)
    assert codes(report)[0] == "cdi_spec_unreadable"
    assert report["findings"][0]["subject"] == "/etc/cdi/broken.yaml"


@pytest.mark.parametrize("text, error", [
    ("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: all\n", "devices is a string, not a list"),
    ("cdiVersion: 0.5.0\nkind: nvidia.com/gpu\ndevices: [gpu0, gpu1]\n", "devices[0] is a string, not a mapping"),
    ("kind: nvidia.com/gpu\ndevices: [{name: '0', containerEdits: {deviceNodes: [/dev/nvidia0]}}]\n",
     "devices[0].containerEdits.deviceNodes must be a list of mappings"),
    ("kind: nvidia.com/gpu\ncontainerEdits: [/dev/nvidiactl]\ndevices: []\n", "containerEdits is a list, not a mapping"),
    ("\xff\xfe", None),  # not UTF-8: read as unreadable, not a crash
])
def test_a_spec_of_the_wrong_shape_is_a_finding_not_a_crash(tmp_path, text, error):
    (tmp_path / "etc" / "cdi").mkdir(parents=True)
    path = tmp_path / "etc" / "cdi" / "bad.yaml"
    if error is None:
        path.write_bytes(b"\xff\xfe\x00")
    else:
        path.write_text(text)
    specs, problems = cdi.read_specs(["/etc/cdi"], str(tmp_path))
    assert specs == [] and [p["path"] for p in problems] == ["/etc/cdi/bad.yaml"]
    assert error is None or problems[0]["error"].startswith(error)
    report = cdi.check(specs, problems, GPUS)
    assert codes(report)[0] == "cdi_spec_unreadable" and report["findings"][0]["subject"] == "/etc/cdi/bad.yaml"


def test_files_that_are_no_nvidia_spec_are_left_to_their_owner(tmp_path):
    (tmp_path / "etc" / "cdi").mkdir(parents=True)
    (tmp_path / "etc" / "cdi" / "list.yaml").write_text("- a\n- list\n")
    (tmp_path / "etc" / "cdi" / "empty.yaml").write_text("")
    (tmp_path / "etc" / "cdi" / "vendor.yaml").write_text("kind: vendor.example/fpga\ndevices: [a, b]\n")
    specs, problems = cdi.read_specs(["/etc/cdi"], str(tmp_path))
    assert problems == [] and [s["path"] for s in specs] == ["/etc/cdi/empty.yaml", "/etc/cdi/list.yaml",
                                                             "/etc/cdi/vendor.yaml"]

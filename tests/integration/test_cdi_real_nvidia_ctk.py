# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The CDI checker (plugins/module_utils/runtime/cdi.py and gpuops.nvidia.cdi_spec_check) against specs
written by NVIDIA's real nvidia-ctk (1.18.0, built by tests/lab/go-binaries) over the lab's
simulated nodes, not against specs shaped by the lab: a fresh spec has no findings, a spec from
before a MIG change is stale with the right names, for full GPUs and MIG devices.

The expected device names are written down here from the profiles (GPUs by index and UUID, MIG
devices by GPU:MIG index and UUID, and all), not taken from the code under test.

Two facts of nvidia-ctk shaped the checker: 1.18 leaves a GPU in MIG mode out of the spec (only
its MIG devices are named; 1.17 names the GPU too), so such a GPU's own names are allowed but not
required; and on a node with a lost GPU nvidia-ctk writes no spec at all, which the checker
reports as generation blocked rather than asking for a regeneration."""
from __future__ import annotations

import os
import sys

import pytest
import yaml

from conftest import H100_MIG_UUIDS as H100_MIG, H100_UUIDS as H100, L40S_UUIDS as L40S, go_binaries, mig_script  # pylint: disable=import-error

from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime import cdi

FULL = {
    "hgx-h100": {str(i) for i in range(8)} | set(H100) | {"all"},
    "l40s-x4": {"0", "1", "2", "3"} | set(L40S) | {"all"},
}
MIG_NAMES = {"0:0", "0:1"} | set(H100_MIG)


@pytest.fixture(scope="module")
def nvidia_ctk():
    return os.path.join(go_binaries("toolkit-1.18.0"), "nvidia-ctk")


@pytest.fixture
def node(lab, nvidia_ctk, tmp_path):
    """A simulated node: generate() writes its spec with the real nvidia-ctk into spec_dir."""
    class Node:
        spec_dir = tmp_path / "cdi"

        def __init__(self, profile):
            self.profile = profile

        def generate(self):
            lab.run(self.profile, [nvidia_ctk, "cdi", "generate", "--output=%s" % (self.spec_dir / "nvidia.yaml")])
            return yaml.safe_load((self.spec_dir / "nvidia.yaml").read_text())

        def gpus(self):
            return lab.module(self.profile, args="kernel_log=false xid_wait_ms=0")["gpus"]

        def check_module(self, nodes=True):
            return lab.module(self.profile, module="gpuops.nvidia.cdi_spec_check",
                              args="spec_dirs=%s host_root=/ check_device_nodes=%s" % (self.spec_dir, nodes))

        def mig(self):
            lab.run(self.profile, [sys.executable, "-c", mig_script(0, "3_SLICE", 2)])

        def driver_root(self):
            return tmp_path / ("%s.driver-root" % self.profile)

    return Node


def names(spec):
    return {device["name"] for device in spec["devices"]}


@pytest.mark.parametrize("profile", ["hgx-h100", "l40s-x4"])
def test_fresh_spec_of_full_gpus_has_no_findings(node, profile):
    n = node(profile)
    spec = n.generate()
    assert names(spec) == FULL[profile]  # what nvidia-ctk writes
    gpus = n.gpus()
    assert cdi.expected_names(gpus) == FULL[profile]  # what the checker wants
    specs, problems = cdi.read_specs([str(n.spec_dir)])
    assert problems == [] and [s["data"] for s in specs] == [spec]
    report = cdi.check(specs, problems, gpus)
    assert report["findings"] == [] and report["stale"] is False
    assert set(report["listed"]) == FULL[profile]

    result = n.check_module()
    assert result["findings"] == [] and result["stale"] is False and result["changed"] is False
    assert result["spec_files"] == [str(n.spec_dir / "nvidia.yaml")]
    assert set(result["listed"]) == set(result["expected"]) == FULL[profile]


def test_device_nodes_of_the_real_spec(node):
    """nvidia-ctk names every node by its host path (under the node's driver root); the module
    finds them all, and reports the one that goes."""
    n = node("l40s-x4")
    spec = n.generate()
    host_paths = {d["hostPath"] for d in spec["containerEdits"]["deviceNodes"]}
    common = ("nvidiactl", "nvidia-uvm", "nvidia-uvm-tools")
    assert host_paths == {str(n.driver_root() / "dev" / name) for name in common}
    assert n.check_module()["findings"] == []
    os.unlink(n.driver_root() / "dev" / "nvidia-uvm-tools")
    result = n.check_module()
    assert [f["code"] for f in result["findings"]] == ["cdi_device_node_missing"]
    assert result["findings"][0]["paths"] == [str(n.driver_root() / "dev" / "nvidia-uvm-tools")]
    assert result["stale"] is False
    assert n.check_module(nodes=False)["findings"] == []


def test_spec_from_before_a_mig_change_is_stale_with_the_mig_names(node):
    n = node("hgx-h100")
    n.generate()
    n.mig()
    gpus = n.gpus()
    # GPU 0 in MIG mode is named by its MIG devices only (nvidia-ctk 1.18); its own names may stay
    assert cdi.expected_names(gpus) == (FULL["hgx-h100"] - {"0", H100[0]}) | MIG_NAMES
    assert cdi.optional_names(gpus) == {"0", H100[0]}
    specs, problems = cdi.read_specs([str(n.spec_dir)])
    report = cdi.check(specs, problems, gpus)
    assert report["stale"] is True
    assert [(f["code"], sorted(f["devices"])) for f in report["findings"]] == [
        ("cdi_device_missing", sorted(MIG_NAMES))]

    result = n.check_module()
    assert result["stale"] is True
    assert [(f["code"], sorted(f["devices"])) for f in result["findings"]] == [
        ("cdi_device_missing", sorted(MIG_NAMES))]


def test_spec_regenerated_after_the_mig_change_names_the_mig_devices(node):
    """What nvidia-ctk and the checker agree on in a spec regenerated after the MIG change: the
    MIG devices by GPU:index and UUID, the other GPUs as before, nothing stale."""
    n = node("hgx-h100")
    n.generate()
    n.mig()
    spec = n.generate()
    assert names(spec) == (FULL["hgx-h100"] - {"0", H100[0]}) | MIG_NAMES
    by_name = {d["name"]: d["containerEdits"]["deviceNodes"] for d in spec["devices"]}
    assert [d["path"] for d in by_name["0:0"]] == ["/dev/nvidia0", "/dev/nvidia-caps/nvidia-cap12",
                                                   "/dev/nvidia-caps/nvidia-cap13"]
    assert by_name["0:1"] == by_name[H100_MIG[1]]
    report = cdi.check(*cdi.read_specs([str(n.spec_dir)]), n.gpus())
    assert not [f for f in report["findings"] if f["code"] == "cdi_device_stale"]
    assert MIG_NAMES <= set(report["listed"])


def test_spec_regenerated_after_the_mig_change_has_no_findings(node):
    n = node("hgx-h100")
    n.generate()
    n.mig()
    n.generate()
    result = n.check_module()
    assert result["findings"] == [] and result["stale"] is False


def test_gpu_in_mig_mode_without_mig_devices_has_no_findings(lab, node):
    n = node("hgx-h100")
    lab.run("hgx-h100", [sys.executable, "-c", "\n".join([
        "import pynvml",
        "pynvml.nvmlInit()",
        "pynvml.nvmlDeviceSetMigMode(pynvml.nvmlDeviceGetHandleByIndex(0), pynvml.NVML_DEVICE_MIG_ENABLE)",
        "pynvml.nvmlShutdown()"])])
    spec = n.generate()
    assert names(spec) == FULL["hgx-h100"] - {"0", H100[0]}  # nvidia-ctk: GPU 0 is not in the spec at all
    result = n.check_module()
    assert result["findings"] == [] and result["stale"] is False


def test_a_lost_gpu_fails_the_whole_generation(lab, nvidia_ctk, node, tmp_path):
    """hgx-h100-faults has GPU 7 fallen off the bus (NVML answers GPU_IS_LOST): the checker leaves a
    lost GPU out of the names it expects, but nvidia-ctk writes no spec at all: go-nvlib's
    VisitDevices asks every GPU's name first (pkg/nvlib/device/device.go isSkipped, v0.8.1) and
    stops at the error. The checker then reports the spec missing, and regenerating cannot help."""
    n = node("hgx-h100-faults")
    out = n.spec_dir / "nvidia.yaml"
    res = lab.run("hgx-h100-faults", [nvidia_ctk, "cdi", "generate", "--output=%s" % out], check=False)
    assert res.returncode != 0
    assert "error checking whether device is skipped: error getting device name: GPU is lost" in res.stderr
    assert not out.exists()
    # the same GPUs as hgx-h100, GPU 7 left out
    assert cdi.expected_names(n.gpus()) == {str(i) for i in range(7)} | set(H100[:7]) | {"all"}
    result = n.check_module()
    # the checker says why regenerating cannot help, so the role does not try
    assert [f["code"] for f in result["findings"]] == ["cdi_spec_missing", "cdi_generation_blocked"]
    assert result["stale"] is True and result["blocked"] is True


def test_cdi_spec_regenerates_a_stale_spec_with_nvidia_ctk_once(lab, nvidia_ctk, node):
    """gpuops.nvidia.cdi_spec, the toolkit role's one CDI step: after the MIG change the spec is
    stale; check mode says so (the device names as the diff) and writes nothing; the run has the
    real nvidia-ctk regenerate it and checks it again; the next run changes nothing."""
    n = node("hgx-h100")
    n.generate()
    n.mig()
    spec_file = n.spec_dir / "nvidia.yaml"
    before = spec_file.read_text()
    env = {"PATH": os.path.dirname(nvidia_ctk) + os.pathsep + os.environ["PATH"]}
    args = "method=generate output=%s spec_dirs=%s" % (spec_file, n.spec_dir)
    planned = lab.module("hgx-h100", module="gpuops.nvidia.cdi_spec", args=args, check_mode=True, env=env)
    assert planned["changed"] is True and planned["regenerated"] is True and spec_file.read_text() == before
    assert "would be regenerated" in planned["message"]
    done = lab.module("hgx-h100", module="gpuops.nvidia.cdi_spec", args=args, env=env)
    assert done["changed"] is True and done["stale_before"] is True
    assert done["stale"] is False and done["findings"] == []
    assert names(yaml.safe_load(spec_file.read_text())) == (FULL["hgx-h100"] - {"0", H100[0]}) | MIG_NAMES
    again = lab.module("hgx-h100", module="gpuops.nvidia.cdi_spec", args=args, env=env)
    assert again["changed"] is False and again["regenerated"] is False


def test_cdi_spec_does_not_try_while_a_gpu_is_lost_and_says_why(lab, nvidia_ctk, node):
    n = node("hgx-h100-faults")
    env = {"PATH": os.path.dirname(nvidia_ctk) + os.pathsep + os.environ["PATH"]}
    result = lab.module("hgx-h100-faults", module="gpuops.nvidia.cdi_spec", env=env, expect_failure=True,
                        args="method=generate output=%s/nvidia.yaml spec_dirs=%s" % (n.spec_dir, n.spec_dir))
    assert result["failed"] is True and result["regenerated"] is False
    assert "does not match the GPUs" in result["msg"] and "GPU 7 is lost" in result["msg"]
    assert not (n.spec_dir / "nvidia.yaml").exists()


def test_cdi_spec_refuses_refresh_units_the_toolkit_does_not_have(lab, node):
    result = lab.module("hgx-h100", module="gpuops.nvidia.cdi_spec", args="method=refresh_units", expect_failure=True)
    assert result["failed"] is True and "come with the NVIDIA Container Toolkit 1.18" in result["msg"]

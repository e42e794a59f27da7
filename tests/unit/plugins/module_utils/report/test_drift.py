# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils.report import drift

PIN = "Package: nvidia-*\nPin: version 580.95.05-*\nPin-Priority: 1001\n"


def by_item(items):
    return {i["item"]: i for i in items}


def test_a_converged_driver_has_no_drift():
    items = drift.driver_items("580.95.05", "580.95.05", ["nvidia-open"], ["nvidia-open"], PIN, "580.95.05", "580")
    assert all(i["ok"] for i in items), items
    assert [i["item"] for i in items] == ["driver installed", "driver loaded", "driver packages held", "driver pinned"]


@pytest.mark.parametrize("args, bad", [
    (("570.172.08", "570.172.08", ["nvidia-open"], ["nvidia-open"], PIN), {"driver installed"}),
    (("580.95.05", "570.172.08", ["nvidia-open"], ["nvidia-open"], PIN), {"driver loaded"}),
    (("580.95.05", "580.95.05", [], ["nvidia-open"], PIN), {"driver packages held"}),
    (("580.95.05", "580.95.05", ["nvidia-open"], ["nvidia-open"], None), {"driver pinned"}),
    ((None, None, [], [], None), {"driver installed", "driver loaded", "driver pinned"}),
])
def test_each_driver_drift_is_named_with_its_fix(args, bad):
    items = by_item(drift.driver_items(*args, version="580.95.05", branch="580"))
    assert {name for name, i in items.items() if not i["ok"]} == bad
    assert all(items[name]["fix"] for name in bad)


def test_a_branch_takes_any_version_of_it():
    items = by_item(drift.driver_items("580.65.06", "580.65.06", [], [], "Pin: version 580.*\n", "", "580"))
    assert items["driver installed"]["ok"] and items["driver pinned"]["ok"]
    assert not by_item(drift.driver_items("570.1.2", "570.1.2", [], [], None, "", "580"))["driver installed"]["ok"]


def test_held_packages_are_the_roles_own_but_firmware_headers_and_bindings():
    assert drift.held_packages(["nvidia-open", "python3-pynvml", "linux-headers-6.1", "firmware-misc-nonfree",
                                "nvidia-persistenced"], {"nvidia-open", "nvidia-persistenced"}) == [
        "nvidia-open", "nvidia-persistenced"]


CONTAINERD_DROP_IN = """version = 2
[plugins."io.containerd.grpc.v1.cri"]
  enable_cdi = true
  [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia]
    runtime_type = "io.containerd.runc.v2"
    [plugins."io.containerd.grpc.v1.cri".containerd.runtimes.nvidia.options]
      BinaryName = "/usr/bin/nvidia-container-runtime"
"""


def test_containerd_runtime_and_cdi_in_a_drop_in():
    items = drift.containerd_items({"/etc/containerd/config.toml": "version = 2\n",
                                    "/etc/containerd/conf.d/99-nvidia.toml": CONTAINERD_DROP_IN}, cdi=True)
    assert all(i["ok"] for i in items) and items[0]["actual"] == "/etc/containerd/conf.d/99-nvidia.toml"
    missing = drift.containerd_items({"/etc/containerd/config.toml": "version = 2\n"}, cdi=True)
    assert [i["ok"] for i in missing] == [False, False]
    v3 = CONTAINERD_DROP_IN.replace("io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime").replace("version = 2", "version = 3")
    assert all(i["ok"] for i in drift.containerd_items({"/etc/containerd/config.toml": v3}, cdi=True))


def test_containerd_config_read_with_tomlkit_without_tomllib_and_refused_without_either(monkeypatch):
    texts = {"/etc/containerd/config.toml": "version = 2\n", "/etc/containerd/conf.d/99-nvidia.toml": CONTAINERD_DROP_IN}
    monkeypatch.setattr(drift, "_toml", None)
    assert all(i["ok"] for i in drift.containerd_items(texts, cdi=True))
    monkeypatch.setattr(drift, "_tomlkit", None)
    with pytest.raises(drift.NoTomlParser, match="install tomli or tomlkit"):
        drift.containerd_items(texts, cdi=True)


def test_docker_and_crio():
    ok = '{"runtimes": {"nvidia": {"path": "/usr/bin/nvidia-container-runtime"}}, "features": {"cdi": true}}'
    assert all(i["ok"] for i in drift.docker_items(ok, cdi=True))
    assert [i["ok"] for i in drift.docker_items('{"runtimes": {}}', cdi=True)] == [False, False]
    crio = '[crio.runtime.runtimes.nvidia]\nruntime_path = "/usr/bin/nvidia-container-runtime"\n'
    assert drift.crio_items({"/etc/crio/crio.conf.d/99-nvidia.toml": crio})[0]["ok"]
    assert not drift.crio_items({})[0]["ok"]


def test_mig_and_cdi_items():
    assert drift.mig_item("all-balanced", {"steps": []})["ok"]
    assert drift.mig_item("all-balanced", {"steps": [1, 2, 3]})["actual"] == "3 step(s) away"
    stale = {"findings": [{"severity": "error", "message": "the spec names MIG-1234, which NVML does not list"}]}
    assert not drift.cdi_item(stale)["ok"] and "MIG-1234" in drift.cdi_item(stale)["actual"]


def test_cluster_items_labels_and_images_against_the_daemonset():
    nodes = [{"metadata": {"name": "gpu-a", "labels": {"nvidia.com/gpu.present": "true"}}}]
    ds = [{"metadata": {"namespace": "gpuops-nvidia", "name": "nvidia-device-plugin"},
           "spec": {"template": {"spec": {"containers": [{"name": "plugin", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.19.3"}]}}}}]
    pods = [{"metadata": {"namespace": "gpuops-nvidia", "name": "nvidia-device-plugin-x",
                          "ownerReferences": [{"kind": "DaemonSet", "name": "nvidia-device-plugin"}]},
             "spec": {"nodeName": "gpu-a", "containers": [{"name": "plugin", "image": "nvcr.io/nvidia/k8s-device-plugin:v0.18.0"}]}}]
    items, facts = drift.cluster_items("gpu-a", nodes, pods, ds, {"nvidia.com/gpu.present": "true"})
    assert [(i["item"], i["ok"]) for i in items] == [
        ("label nvidia.com/gpu.present", True), ("nvidia-device-plugin image", False)]
    assert facts == {"device_plugin": "nvcr.io/nvidia/k8s-device-plugin:v0.18.0"}
    gone, _facts = drift.cluster_items("gpu-b", nodes, pods, ds, {})
    assert gone[0]["actual"] == "not in the cluster"


@pytest.mark.parametrize("labels, allocation, actual, ok", [
    ({"nvidia.com/gpu.deploy.device-plugin": "true"}, "device-plugin", "device-plugin", True),
    ({"nvidia.com/gpu.deploy.dra-driver": "true"}, "dra", "dra", True),
    # the variable says DRA, the node still runs the device plugin
    ({"nvidia.com/gpu.deploy.device-plugin": "true"}, "dra", "device-plugin", False),
    # served twice: drift whatever was asked
    ({"nvidia.com/gpu.deploy.device-plugin": "true", "nvidia.com/gpu.deploy.dra-driver": "true"}, "dra",
     "device-plugin and dra", False),
    # an admin's "false": nothing allocates the GPUs
    ({"nvidia.com/gpu.deploy.device-plugin": "false"}, "device-plugin", "none", False),
], ids=["device-plugin", "dra", "dra-asked-device-plugin-runs", "both", "opted-out"])
def test_the_gpu_allocation_against_the_nodes_deploy_labels(labels, allocation, actual, ok):
    nodes = [{"metadata": {"name": "gpu-a", "labels": labels}}]
    items, _facts = drift.cluster_items("gpu-a", nodes, [], [], {}, allocation)
    assert [(i["item"], i["expected"], i["actual"], i["ok"]) for i in items] == [
        ("GPU allocation", allocation, actual, ok)]
    # without a gpu_allocation to compare with (an older playbook), no item
    assert drift.cluster_items("gpu-a", nodes, [], [], {})[0] == []


def test_fleet_groups_and_names_the_outliers():
    records = [drift.record(name, {"audit_items": [], "facts": {"driver": driver, "toolkit": "1.18.0"}})
               for name, driver in (("a", "580.95.05"), ("b", "580.95.05"), ("c", "570.172.08"))]
    view = drift.fleet(records)
    assert view["groups"]["driver"] == {"570.172.08": ["c"], "580.95.05": ["a", "b"]}
    assert view["outliers"] == [{"node": "c", "key": "driver", "value": "570.172.08", "majority": "580.95.05"}]
    out = drift.lines(records, view)
    assert "driver differs across the fleet: 570.172.08 on c; 580.95.05 on a, b" in out
    assert "outlier: c has driver 570.172.08 (most nodes: 580.95.05)" in out
    assert out[-1] == "3 node(s): 0 drifted, 1 outlier(s)"


def test_outliers_only_among_nodes_asked_the_same_and_not_for_hardware():
    def rec(name, driver, expected, models):
        return drift.record(name, {"audit_items": [], "facts": {"driver": driver, "gpu_models": models},
                                   "expected": {"driver": expected}})
    # two groups by design (different targets), each consistent: no outlier
    records = [rec("h1", "570.172.08", "570.172.08", ["H100"]), rec("h2", "570.172.08", "570.172.08", ["H100"]),
               rec("h3", "570.172.08", "570.172.08", ["H100"]), rec("l1", "580.95.05", "580.95.05", ["L40S"])]
    view = drift.fleet(records)
    assert view["outliers"] == [] and len(view["groups"]["gpu_models"]) == 2
    # two nodes that differ cannot say which one is odd
    assert drift.fleet(records[:1] + [rec("h9", "580.1.2", "570.172.08", ["H100"])])["outliers"] == []
    records.append(rec("h4", "570.86.10", "570.172.08", ["H100"]))
    assert [(o["node"], o["key"]) for o in drift.fleet(records)["outliers"]] == [("h4", "driver")]


def test_a_stale_cdi_spec_is_counted_not_listed():
    report = {"findings": [{"severity": "error", "code": "cdi_device_stale", "message": "x" * 5000,
                            "devices": ["MIG-%d" % i for i in range(56)]}]}
    assert drift.cdi_item(report)["actual"] == "names 56 device(s) NVML no longer reports"


def test_lines_name_the_node_the_item_and_the_fix():
    bad = drift.item("driver loaded", "580.95.05", "570.172.08", False, "reboot the node")
    records = [drift.record("a", {"audit_items": [bad], "facts": {}}), drift.record("b", {"audit_items": [], "facts": {}})]
    out = drift.lines(records, drift.fleet(records))
    assert out[0] == "a  DRIFT 1: driver loaded"
    assert out[1] == "    driver loaded: expected 580.95.05, found 570.172.08; fix: reboot the node"
    assert out[2] == "b  no drift"


def test_a_dra_nodes_slices_against_the_devices_nvml_lists_there():
    nodes = [{"metadata": {"name": "gpu-a", "labels": {"nvidia.com/gpu.deploy.dra-driver": "true"}}}]
    nvml = [{"uuid": "GPU-1", "type": "gpu", "what": "GPU 0 (GPU-1)"}, {"uuid": "GPU-2", "type": "gpu", "what": "GPU 1 (GPU-2)"}]

    def slices(*uuids, node="gpu-a"):
        return [{"spec": {"driver": "gpu.nvidia.com", "nodeName": node, "devices": [
            {"name": "gpu-%d" % i, "attributes": {"type": {"string": "gpu"}, "uuid": {"string": u}}}
            for i, u in enumerate(uuids)]}}]
    same, _facts = drift.cluster_items("gpu-a", nodes, [], [], {}, "dra", slices=slices("GPU-2", "GPU-1"), devices=nvml)
    assert [(i["item"], i["actual"], i["ok"]) for i in same] == [
        ("GPU allocation", "dra", True), ("DRA devices", "the same 2 device(s)", True)]
    # a GPU NVML sees that the slice does not list, and one only the slice lists (another node's slice ignored)
    drifted, _facts = drift.cluster_items("gpu-a", nodes, [], [], {}, "dra",
                                          slices=slices("GPU-1", "GPU-9") + slices("GPU-2", node="gpu-b"), devices=nvml)
    item = drifted[1]
    assert item["item"] == "DRA devices" and not item["ok"] and item["expected"] == "the 2 device(s) NVML lists"
    assert item["actual"] == ("GPU 1 (GPU-2) is in NVML but in no ResourceSlice of gpu.nvidia.com; "
                              "ResourceSlice device gpu-1 (GPU-9) is not a device NVML lists")
    assert "restart its pod" in item["fix"]
    # a device plugin node, or a node whose NVML the audit could not read: no such item
    assert [i["item"] for i in drift.cluster_items("gpu-a", nodes, [], [], {}, "device-plugin", slices=slices(),
                                                   devices=nvml)[0]] == ["GPU allocation"]
    assert [i["item"] for i in drift.cluster_items("gpu-a", nodes, [], [], {}, "dra", slices=slices(), devices=[])[0]] \
        == ["GPU allocation"]
    # slices the audit's credentials may not list: no comparison (rather than every GPU missing)
    assert [i["item"] for i in drift.cluster_items("gpu-a", nodes, [], [], {}, "dra", slices=None, devices=nvml)[0]] \
        == ["GPU allocation"]

# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import copy
import json

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils.k8s import node_labels as nl
from ansible_collections.gpuops.nvidia.tests.unit.plugins.module_utils.k8s.json_patch import apply_patch

# ---- a second, minimal JSON Patch applier, independent of json_patch.apply_patch ------------------


def _unescape(token):
    return token.replace("~1", "/").replace("~0", "~")


def patched(doc, ops):
    """Apply RFC 6902 add/remove/replace/test ops to a copy of doc (AssertionError on a failed test)."""
    doc = copy.deepcopy(doc)
    for op in ops:
        tokens = [_unescape(token) for token in op["path"].split("/")[1:]]
        parent = doc
        for token in tokens[:-1]:
            parent = parent[int(token)] if isinstance(parent, list) else parent[token]
        last = tokens[-1]
        if isinstance(parent, list):
            last = len(parent) if last == "-" else int(last)
        if op["op"] == "test":
            assert parent[last] == op["value"], "test failed at %s" % op["path"]
        elif op["op"] == "remove":
            del parent[last]
        elif op["op"] == "replace":
            assert isinstance(parent, list) or last in parent, "replace of a missing member %s" % op["path"]
            parent[last] = copy.deepcopy(op["value"])
        elif op["op"] == "add" and isinstance(parent, list):
            parent.insert(last, copy.deepcopy(op["value"]))
        elif op["op"] == "add":
            parent[last] = copy.deepcopy(op["value"])
        else:
            raise AssertionError("unexpected op %r" % op)
    return doc


def apply(node, result):
    """The patched node; json_patch.apply_patch must agree with the minimal applier."""
    after = patched(node, result["ops"])
    assert apply_patch(node, result["ops"]) == after
    return after


# ---- gpu_info fixtures -------------------------------------------------------------------------------


def bus(index):
    return "00000000:%02x:00.0" % (0x18 + 0x10 * index)


def make_gpu(index, numa=0, links=None, mig=False, name="NVIDIA H100 80GB HBM3", lost=False):
    if lost:
        return {"index": index, "lost": True, "name": None, "uuid": None, "pci": {"bus_id": bus(index)}, "xids": []}
    links = links or []
    return {
        "index": index, "lost": False, "name": name, "uuid": "GPU-%08d" % index,
        "pci": {"bus_id": bus(index)}, "numa_node": numa,
        "mig": {"capable": True, "current": False, "pending": False} if mig else {"capable": False},
        "nvlink": {"links": links, "total": len(links), "active": sum(1 for x in links if x["active"])},
        "xids": [],
    }


def switch_links(count=18, active=True):
    return [{"link": n, "active": active, "remote_type": "nvswitch", "remote_bus_id": "00000000:c%d:00.0" % (n % 4)}
            for n in range(count)]


def gpu_links(*peers):
    return [{"link": n, "active": True, "remote_type": "gpu", "remote_bus_id": bus(peer)}
            for n, peer in enumerate(peers)]


def pairs(count, nvlink):
    return [{"gpus": [a, b], "nvlink": nvlink, "pcie": "SYS"} for a in range(count) for b in range(a + 1, count)]


def info(gpus, topology=None, health=None, **extra):
    result = {"driver": {"loaded": True, "reason": None}, "gpu_count": len(gpus), "gpus": gpus,
              "topology": topology if topology is not None else [], "health": health or []}
    result.update(extra)
    return result


HGX_H100 = info([make_gpu(n, numa=n // 4, links=switch_links(), mig=True) for n in range(8)], pairs(8, True))
L40S_4 = info([make_gpu(n, numa=n // 2, name="NVIDIA L40S") for n in range(4)], pairs(4, False))
NVL_PAIR = info([make_gpu(0, links=gpu_links(1, 1)), make_gpu(1, links=gpu_links(0, 0))])
UNEQUAL_NUMA = info([make_gpu(n, numa=0 if n < 3 else 1) for n in range(8)])

BASE = {nl.PRESENT_LABEL: "true", nl.deploy_label("device-plugin"): "true",
        nl.deploy_label("gpu-feature-discovery"): "true", nl.deploy_label("dcgm-exporter"): "true"}


def with_base(mig, nvlink=None, nvswitch=None, numa_nodes=None, per_numa=None):
    result = dict(BASE)
    result[nl.MIG_CAPABLE_LABEL] = mig
    for key, value in ((nl.NVLINK_LABEL, nvlink), (nl.NVSWITCH_LABEL, nvswitch),
                       (nl.NUMA_NODES_LABEL, numa_nodes), (nl.PER_NUMA_NODE_LABEL, per_numa)):
        if value is not None:
            result[key] = value
    return result


# ---- desired labels ----------------------------------------------------------------------------------


@pytest.mark.parametrize("facts, expected", [
    pytest.param(HGX_H100, with_base("true", "full-mesh", "true", "2", "4"), id="hgx-h100-nvswitch"),
    pytest.param(info(HGX_H100["gpus"]), with_base("true", "full-mesh", "true", "2", "4"),
                 id="hgx-h100-links-only"),
    pytest.param(L40S_4, with_base("false", "none", "false", "2", "2"), id="4-l40s-no-nvlink"),
    pytest.param(NVL_PAIR, with_base("false", "full-mesh", "false", "1", "2"), id="nvlink-pair"),
    pytest.param(info([make_gpu(0), make_gpu(1)], [{"gpus": [0, 1], "nvlink": True}]),
                 with_base("false", "full-mesh", "false", "1", "2"), id="nvlink-from-topology-pairs"),
    pytest.param(UNEQUAL_NUMA, with_base("false", "none", "false", "2", "3-5"), id="unequal-numa"),
    pytest.param(info([make_gpu(0, links=gpu_links(1)), make_gpu(1, links=gpu_links(0)),
                       make_gpu(2, links=gpu_links(3)), make_gpu(3, links=gpu_links(2))]),
                 with_base("false", "partial", "false", "1", "4"), id="two-nvlink-pairs-partial"),
    pytest.param(info([make_gpu(n, numa=n // 4, links=switch_links(active=n != 5), mig=True) for n in range(8)]),
                 with_base("true", "partial", "true", "2", "4"), id="hgx-one-gpu-off-the-fabric"),
    pytest.param(info([make_gpu(n, numa=n // 4, links=switch_links(), mig=True, lost=n == 7) for n in range(8)]),
                 with_base("true", "full-mesh", "true", "2", "4-3"), id="hgx-lost-gpu-ignored"),
    pytest.param(info([make_gpu(0, numa=None), make_gpu(1, numa=None)]),
                 with_base("false", "none", "false"), id="numa-unknown"),
    pytest.param(info([make_gpu(0, numa=1)]), with_base("false", "none", "false", "1", "1"), id="single-gpu"),
    pytest.param(info([], driver={"loaded": False, "reason": "driver_not_loaded"}, pci_devices=8), BASE,
                 id="driver-not-loaded-pci-devices"),
    pytest.param(info([make_gpu(0, lost=True)]), BASE, id="only-lost-gpus"),
    pytest.param(info([]), {}, id="not-a-gpu-node"),
    pytest.param(info([], pci_devices=0), {}, id="no-pci-devices"),
])
def test_desired_labels(facts, expected):
    assert nl.desired_labels(facts) == expected
    for key, value in expected.items():
        assert nl.valid_label_key(key) and nl.valid_label_value(value)


@pytest.mark.parametrize("kwargs, expected", [
    ({"gpu_present": True}, BASE),
    ({"gpu_present": False}, {}),
    ({"gpu_present": True, "operands": ("dcgm-exporter",)},
     {nl.PRESENT_LABEL: "true", nl.deploy_label("dcgm-exporter"): "true"}),
    ({"gpu_present": True, "operands": ()}, {nl.PRESENT_LABEL: "true"}),
    ({"gpu_present": True, "device_plugin_config": "a100-time-slicing"},
     dict(BASE, **{nl.DEVICE_PLUGIN_CONFIG_LABEL: "a100-time-slicing"})),
    ({"gpu_present": True, "device_plugin_config": ""}, BASE),
])
def test_desired_labels_options(kwargs, expected):
    assert nl.desired_labels(info([]), **kwargs) == expected


def test_desired_labels_without_topology():
    result = nl.desired_labels(HGX_H100, topology=False)
    assert result == with_base("true")
    assert not set(nl.TOPOLOGY_LABELS) & set(result)


def test_gpus_win_over_zero_pci_devices():
    assert nl.desired_labels(dict(L40S_4, pci_devices=0))[nl.PRESENT_LABEL] == "true"


@pytest.mark.parametrize("config", ["-leading", "trailing.", "has space", "a/b", "x" * 64, 42])
def test_invalid_device_plugin_config(config):
    with pytest.raises(ValueError, match="device_plugin_config"):
        nl.desired_labels(HGX_H100, device_plugin_config=config)


@pytest.mark.parametrize("kwargs, facts", [
    ({"operands": ("Bad Operand",)}, HGX_H100),
    ({"operands": ("",)}, HGX_H100),
    ({}, info([], pci_devices="8")),
    ({}, info([], pci_devices=-1)),
])
def test_desired_labels_errors(kwargs, facts):
    with pytest.raises(ValueError):
        nl.desired_labels(facts, **kwargs)


# ---- health ------------------------------------------------------------------------------------------

def finding(code, severity, subject="GPU 0"):
    return {"code": code, "severity": severity, "subject": subject, "message": "m", "fix": "f"}


HEALTH = [
    finding("xid", "error"), finding("ecc_uncorrectable", "error", "GPU 3"), finding("xid", "error", "GPU 5"),
    finding("driver_not_loaded", "error", "node"), finding("pcie_link_degraded", "warning"),
    finding("throttle_thermal", "warning"), finding("ecc_uncorrectable_history", "info"),
]


@pytest.mark.parametrize("kwargs, expected", [
    ({}, ["driver_not_loaded", "ecc_uncorrectable", "pcie_link_degraded", "xid"]),
    ({"codes": ()}, ["driver_not_loaded", "ecc_uncorrectable", "xid"]),
    ({"severities": ("error", "warning"), "codes": ()},
     ["driver_not_loaded", "ecc_uncorrectable", "pcie_link_degraded", "throttle_thermal", "xid"]),
    ({"severities": (), "codes": ("throttle_thermal", "nvlink_down")}, ["throttle_thermal"]),
])
def test_unhealthy_codes(kwargs, expected):
    assert nl.unhealthy_codes(info([], health=HEALTH), **kwargs) == expected


def test_unhealthy_codes_of_a_healthy_node():
    assert nl.unhealthy_codes(info([])) == []
    assert nl.unhealthy_codes({}) == []


LONG = ["row_remap_failure", "ecc_uncorrectable", "nvlink_down", "pcie_link_degraded", "gpu_lost", "xid"]


@pytest.mark.parametrize("codes, expected", [
    ([], "healthy"),
    (None, "healthy"),
    (["xid"], "xid"),
    (["ecc_uncorrectable", "xid", "xid"], "ecc_uncorrectable.xid"),
    (["pcie link/degraded!"], "pcie_link_degraded"),
    (["_odd_"], "odd"),
    (LONG[:3], "row_remap_failure.ecc_uncorrectable.nvlink_down"),
    (LONG, "row_remap_failure.ecc_uncorrectable.nvlink_down.more"),
    (["a" * 80], "a" * 63),
    (["a" * 80, "xid"], "a" * 58 + ".more"),
])
def test_health_value(codes, expected):
    value = nl.health_value(codes)
    assert value == expected
    assert nl.valid_label_value(value) and len(value) <= 63


def test_health_value_drops_whole_codes():
    codes = ["code_%02d" % n for n in range(20)]
    value = nl.health_value(codes)
    assert value.endswith(".more") and len(value) <= 63
    assert all(part in codes for part in value.split(".")[:-1])
    assert nl.health_value(codes[:7]) == ".".join(codes[:7])  # 7 * 7 + 6 = 55 characters fit


# ---- label syntax and JSON Patch ---------------------------------------------------------------------

@pytest.mark.parametrize("key, valid", [
    ("nvidia.com/gpu.present", True), ("gpuops.nvidia/gpu.per-numa-node", True), ("plain", True),
    ("Nvidia.com/x", False), ("/x", False), ("a/b/c", False), ("nvidia.com/", False), ("x" * 64, False), (None, False),
])
def test_valid_label_key(key, valid):
    assert nl.valid_label_key(key) is valid


@pytest.mark.parametrize("token, escaped", [("nvidia.com/gpu.present", "nvidia.com~1gpu.present"),
                                            ("a~b/c", "a~0b~1c"), ("~1", "~01")])
def test_escape(token, escaped):
    assert nl.escape(token) == escaped
    assert apply_patch({token: 1}, [{"op": "test", "path": "/" + escaped, "value": 1}]) == {token: 1}


DOC = {"a": {"b": [1, 2, 3]}, "c": "x", "t": True}


@pytest.mark.parametrize("ops, expected", [
    ([{"op": "add", "path": "/d", "value": {"e": 1}}], dict(DOC, d={"e": 1})),
    ([{"op": "add", "path": "/a/b/-", "value": 4}], dict(DOC, a={"b": [1, 2, 3, 4]})),
    ([{"op": "add", "path": "/a/b/0", "value": 0}], dict(DOC, a={"b": [0, 1, 2, 3]})),
    ([{"op": "remove", "path": "/a/b/1"}], dict(DOC, a={"b": [1, 3]})),
    ([{"op": "remove", "path": "/c"}], {"a": {"b": [1, 2, 3]}, "t": True}),
    ([{"op": "replace", "path": "/c", "value": "y"}], dict(DOC, c="y")),
    ([{"op": "replace", "path": "/a/b/2", "value": 9}], dict(DOC, a={"b": [1, 2, 9]})),
    ([{"op": "test", "path": "/a", "value": {"b": [1, 2, 3]}}, {"op": "test", "path": "/t", "value": True}], DOC),
    ([{"op": "replace", "path": "", "value": [1]}], [1]),
])
def test_apply_patch(ops, expected):
    before = copy.deepcopy(DOC)
    assert apply_patch(DOC, ops) == expected
    assert DOC == before


@pytest.mark.parametrize("ops", [
    [{"op": "test", "path": "/c", "value": "y"}],
    [{"op": "test", "path": "/t", "value": 1}],
    [{"op": "test", "path": "/missing", "value": None}],
    [{"op": "replace", "path": "/missing", "value": 1}],
    [{"op": "remove", "path": "/missing"}],
    [{"op": "remove", "path": "/a/b/3"}],
    [{"op": "add", "path": "/a/b/5", "value": 1}],
    [{"op": "add", "path": "/x/y", "value": 1}],
    [{"op": "add", "path": "/c/y", "value": 1}],
    [{"op": "add", "path": "c", "value": 1}],
    [{"op": "add", "path": "/c"}],
    [{"op": "move", "from": "/c", "path": "/d"}],
    [{"op": "remove", "path": ""}],
])
def test_apply_patch_errors(ops):
    with pytest.raises(ValueError):
        apply_patch(DOC, ops)


# ---- the plan ----------------------------------------------------------------------------------------

TAINT = {"key": "gpuops.nvidia/gpu-unhealthy", "effect": "NoSchedule"}
OTHER_TAINT = {"key": "dedicated", "value": "ml", "effect": "NoExecute"}
HEALTH_PATH = "/metadata/labels/gpuops.nvidia~1gpu.health"
ANNOTATION_PATH = "/metadata/annotations/gpuops.nvidia~1previous-labels"


def make_node(node_labels=None, annotations=None, taints=None):
    node = {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "gpu-1", "labels": {"kubernetes.io/hostname": "gpu-1"},
                         "annotations": {"node.alpha.kubernetes.io/ttl": "0"}},
            "spec": {}}
    node["metadata"]["labels"].update(node_labels or {})
    if annotations is not None:
        node["metadata"]["annotations"].update(annotations)
    if taints is not None:
        node["spec"]["taints"] = taints
    return node


def record(node):
    text = (node["metadata"].get("annotations") or {}).get(nl.ANNOTATION)
    return None if text is None else json.loads(text)


def converge(node, desired, **kwargs):
    """Plan, apply, and check that planning again on the patched node yields no ops."""
    kwargs.setdefault("unhealthy", [])
    kwargs.setdefault("taint", TAINT)
    result = nl.plan(node, desired, **kwargs)
    after = apply(node, result)
    again = nl.plan(after, desired, **kwargs)
    assert again["ops"] == [], again["ops"]
    # Labels given back (restored, or left to an admin) are no longer managed after the patch.
    still = again["labels_before"]
    assert still == {key: value for key, value in result["labels_after"].items() if key in still}
    assert again["taints_before"] == result["taints_after"]
    return result, after


def test_fresh_node():
    desired = nl.desired_labels(HGX_H100)
    node = make_node()
    result, after = converge(node, desired)
    want = dict(desired, **{nl.HEALTH_LABEL: "healthy"})
    assert {key: after["metadata"]["labels"][key] for key in want} == want
    assert after["metadata"]["labels"]["kubernetes.io/hostname"] == "gpu-1"
    assert after["metadata"]["annotations"]["node.alpha.kubernetes.io/ttl"] == "0"
    assert record(after) == dict.fromkeys(want)
    assert result["labels_before"] == {}
    assert result["labels_after"] == want
    assert result["taints_before"] == result["taints_after"] == []
    assert result["kept"] == {}
    ops = result["ops"]
    assert {"op": "add", "path": "/metadata/labels/nvidia.com~1gpu.present", "value": "true"} in ops
    assert {"op": "add", "path": HEALTH_PATH, "value": "healthy"} in ops
    assert not any(op["op"] == "test" for op in ops)  # nothing replaced: nothing to test
    assert not any(op["path"].startswith("/spec") for op in ops)


def test_node_without_labels_annotations_or_spec():
    node = {"apiVersion": "v1", "kind": "Node", "metadata": {"name": "gpu-1"}}
    result, after = converge(node, BASE)
    assert result["ops"][0] == {"op": "add", "path": "/metadata/labels", "value": {}}
    assert {"op": "add", "path": "/metadata/annotations", "value": {}} in result["ops"]
    assert after["metadata"]["labels"] == dict(BASE, **{nl.HEALTH_LABEL: "healthy"})
    assert "spec" not in after  # healthy: no taint, nothing to create


def test_replaced_label_and_annotation_are_tested_first():
    node = make_node({nl.PRESENT_LABEL: "false"}, {nl.ANNOTATION: json.dumps({nl.HEALTH_LABEL: None})})
    node["metadata"]["labels"][nl.HEALTH_LABEL] = "xid"
    result, after = converge(node, {nl.PRESENT_LABEL: "true"})
    ops = result["ops"]
    tests = [op for op in ops if op["op"] == "test"]
    assert ops[:len(tests)] == tests
    assert {"op": "test", "path": "/metadata/labels/nvidia.com~1gpu.present", "value": "false"} in tests
    assert {"op": "test", "path": HEALTH_PATH, "value": "xid"} in tests
    assert {"op": "test", "path": ANNOTATION_PATH, "value": json.dumps({nl.HEALTH_LABEL: None})} in tests
    assert {"op": "replace", "path": "/metadata/labels/nvidia.com~1gpu.present", "value": "true"} in ops
    # The health label keeps the previous value recorded when the collection first set it.
    assert record(after) == {nl.HEALTH_LABEL: None, nl.PRESENT_LABEL: "false"}


def test_concurrent_change_makes_the_patch_fail():
    node = make_node({nl.deploy_label("device-plugin"): "maybe"})
    result = nl.plan(node, BASE, unhealthy=[], taint=TAINT)
    node["metadata"]["labels"][nl.deploy_label("device-plugin")] = "paused-for-mig-change"
    with pytest.raises(ValueError, match="test failed"):
        apply_patch(node, result["ops"])


@pytest.mark.parametrize("value, reason", [
    ("false", "opt-out"),
    ("paused-for-mig-change", "pause"),
    ("paused-for-driver-upgrade", "pause"),
])
def test_preserved_deploy_labels_are_kept(value, reason):
    key = nl.deploy_label("dcgm-exporter")
    node = make_node({key: value})
    result, after = converge(node, BASE)
    assert after["metadata"]["labels"][key] == value
    assert reason in result["kept"][key] and value in result["kept"][key]
    assert list(result["kept"]) == [key]
    assert key not in record(after)
    assert not any(op["path"].endswith(nl.escape(key)) for op in result["ops"])
    assert result["labels_before"][key] == result["labels_after"][key] == value


def test_other_preserve_settings():
    key = nl.deploy_label("device-plugin")
    node = make_node({key: "off"})
    result, after = converge(node, BASE, preserve_values=("off",), preserve_prefixes=())
    assert after["metadata"]["labels"][key] == "off" and key in result["kept"]
    result, after = converge(make_node({key: "paused-x"}), BASE, preserve_prefixes=())
    assert after["metadata"]["labels"][key] == "true" and result["kept"] == {}


def test_absent_restores_previous_values():
    original = make_node({nl.DEVICE_PLUGIN_CONFIG_LABEL: "old", nl.PRESENT_LABEL: "true"})
    desired = nl.desired_labels(L40S_4, device_plugin_config="new")
    result, present = converge(original, desired)
    assert present["metadata"]["labels"][nl.DEVICE_PLUGIN_CONFIG_LABEL] == "new"
    # gpu.present already had the desired value: not changed, so not recorded.
    assert record(present)[nl.DEVICE_PLUGIN_CONFIG_LABEL] == "old" and nl.PRESENT_LABEL not in record(present)
    # A second run with another config keeps the original previous value.
    desired = nl.desired_labels(L40S_4, device_plugin_config="newer")
    result, present = converge(present, desired)
    assert record(present)[nl.DEVICE_PLUGIN_CONFIG_LABEL] == "old"
    assert {"op": "test", "path": ANNOTATION_PATH, "value": None} not in result["ops"]
    result, absent = converge(present, desired, state="absent")
    assert absent == original
    assert {"op": "replace", "path": "/metadata/labels/nvidia.com~1device-plugin.config", "value": "old"} \
        in result["ops"]
    assert {"op": "remove", "path": ANNOTATION_PATH} in result["ops"]
    assert result["labels_after"] == {nl.DEVICE_PLUGIN_CONFIG_LABEL: "old"}


def test_no_longer_desired_label_is_restored():
    node = make_node({nl.DEVICE_PLUGIN_CONFIG_LABEL: "old"})
    desired = nl.desired_labels(HGX_H100, device_plugin_config="mig-mixed")
    result, present = converge(node, desired)
    # Config and topology turned off: back to what they were, and out of the record.
    desired = nl.desired_labels(HGX_H100, topology=False)
    result, present = converge(present, desired)
    assert present["metadata"]["labels"][nl.DEVICE_PLUGIN_CONFIG_LABEL] == "old"
    assert not set(nl.TOPOLOGY_LABELS) & set(present["metadata"]["labels"])
    assert set(record(present)) == set(desired) | {nl.HEALTH_LABEL}
    assert {"op": "remove", "path": "/metadata/labels/gpuops.nvidia~1gpu.nvlink"} in result["ops"]


def test_absent_leaves_preserved_labels():
    plugin, exporter = nl.deploy_label("device-plugin"), nl.deploy_label("dcgm-exporter")
    original = make_node()
    result, present = converge(original, BASE)
    present["metadata"]["labels"][plugin] = "paused-for-mig-change"
    present["metadata"]["labels"][exporter] = "false"
    result, absent = converge(present, BASE, state="absent")
    assert set(result["kept"]) == {plugin, exporter}
    assert absent["metadata"]["labels"][plugin] == "paused-for-mig-change"
    assert absent["metadata"]["labels"][exporter] == "false"
    # The pause is temporary: its record stays, so that a later run restores the label. The
    # admin's opt-out is permanent: its record goes.
    assert record(absent) == {plugin: None}
    absent["metadata"]["labels"][plugin] = "true"  # the MIG manager is done
    result, final = converge(absent, BASE, state="absent")
    assert plugin not in final["metadata"]["labels"]
    assert nl.ANNOTATION not in final["metadata"]["annotations"]


def test_absent_on_an_untouched_node_has_no_ops():
    node = make_node({nl.PRESENT_LABEL: "true"}, taints=[dict(TAINT, value="xid")])
    result = nl.plan(node, BASE, unhealthy=["xid"], taint=TAINT, state="absent")
    assert result["ops"] == []
    assert result["kept"] == {} and result["labels_after"] == {}


def test_taint_added_when_unhealthy_and_removed_when_healthy():
    node = make_node(taints=[OTHER_TAINT])
    unhealthy = nl.unhealthy_codes(info([], health=HEALTH))
    value = nl.health_value(unhealthy)
    result, sick = converge(node, BASE, unhealthy=unhealthy)
    assert sick["spec"]["taints"] == [OTHER_TAINT, dict(TAINT, value=value)]
    assert sick["metadata"]["labels"][nl.HEALTH_LABEL] == value
    assert result["ops"][0] == {"op": "test", "path": "/spec/taints", "value": [OTHER_TAINT]}
    assert {"op": "replace", "path": "/spec/taints", "value": [OTHER_TAINT, dict(TAINT, value=value)]} \
        in result["ops"]
    result, well = converge(sick, BASE, unhealthy=[])
    assert well["spec"]["taints"] == [OTHER_TAINT]
    assert well["metadata"]["labels"][nl.HEALTH_LABEL] == "healthy"
    assert {"op": "test", "path": "/spec/taints", "value": [OTHER_TAINT, dict(TAINT, value=value)]} in result["ops"]
    assert {"op": "test", "path": HEALTH_PATH, "value": value} in result["ops"]


def test_taint_list_created_and_removed():
    node = make_node()
    result, sick = converge(node, BASE, unhealthy=["gpu_lost"])
    assert {"op": "add", "path": "/spec/taints", "value": [dict(TAINT, value="gpu_lost")]} in result["ops"]
    result, well = converge(sick, BASE, unhealthy=[])
    assert "taints" not in well["spec"]
    assert result["ops"][-1] == {"op": "remove", "path": "/spec/taints"}
    assert {"op": "test", "path": "/spec/taints", "value": [dict(TAINT, value="gpu_lost")]} in result["ops"]
    # state absent removes our taint too.
    result, sick = converge(well, BASE, unhealthy=["xid"])
    result, gone = converge(sick, BASE, unhealthy=["xid"], state="absent")
    assert "taints" not in gone["spec"]
    assert nl.HEALTH_LABEL not in gone["metadata"]["labels"]


@pytest.mark.parametrize("existing, taint, expected", [
    # Another effect or value of our key is replaced in place; other taints stay in their order.
    ([dict(TAINT, effect="NoExecute", value="x"), OTHER_TAINT], TAINT, [dict(TAINT, value="xid"), OTHER_TAINT]),
    # A duplicate of our key is dropped.
    ([dict(TAINT, value="xid"), OTHER_TAINT, dict(TAINT, value="old")], TAINT, [dict(TAINT, value="xid"), OTHER_TAINT]),
    # An explicit value wins over the health value.
    ([], dict(TAINT, value="drain-me"), [dict(TAINT, value="drain-me")]),
    ([], dict(TAINT, value=""), [TAINT]),
])
def test_taint_replaced(existing, taint, expected):
    result, after = converge(make_node(taints=existing), BASE, unhealthy=["xid"], taint=taint)
    assert after["spec"]["taints"] == expected


def test_no_taint_configured_leaves_taints_alone():
    taints = [dict(TAINT, value="xid"), OTHER_TAINT]
    result, after = converge(make_node(taints=taints), BASE, unhealthy=[], taint=None)
    assert after["spec"]["taints"] == taints
    assert result["taints_after"] == taints


def test_matching_taint_with_time_added_is_left_alone():
    taint = dict(TAINT, value="xid", timeAdded="2026-01-01T00:00:00Z")
    result, after = converge(make_node(taints=[taint]), BASE, unhealthy=["xid"])
    assert not any(op["path"].startswith("/spec") for op in result["ops"])


def test_annotation_with_other_spacing_is_not_rewritten():
    node = make_node(BASE, {nl.ANNOTATION: json.dumps({nl.HEALTH_LABEL: None}, indent=2)})
    node["metadata"]["labels"][nl.HEALTH_LABEL] = "healthy"
    assert nl.plan(node, BASE, unhealthy=[], taint=TAINT)["ops"] == []


@pytest.mark.parametrize("kwargs, match", [
    ({"taint": {"key": "a", "effect": "NoWay"}}, "effect"),
    ({"taint": {"key": "bad key", "effect": "NoSchedule"}}, "taint key"),
    ({"taint": {"key": "a", "effect": "NoSchedule", "value": "bad value"}}, "taint value"),
    ({"taint": "a:NoSchedule"}, "taint"),
    ({"state": "gone"}, "state"),
])
def test_plan_errors(kwargs, match):
    kwargs.setdefault("taint", TAINT)
    with pytest.raises(ValueError, match=match):
        nl.plan(make_node(), BASE, unhealthy=[], **kwargs)


@pytest.mark.parametrize("desired", [{"bad key": "true"}, {"nvidia.com/x": "bad value"}])
def test_plan_rejects_invalid_labels(desired):
    with pytest.raises(ValueError, match="label"):
        nl.plan(make_node(), desired, unhealthy=[], taint=None)


@pytest.mark.parametrize("text", ["not json", "[]", '{"a": 1}'])
def test_broken_annotation(text):
    with pytest.raises(ValueError, match=nl.ANNOTATION):
        nl.plan(make_node(annotations={nl.ANNOTATION: text}), BASE, unhealthy=[], taint=None)


def test_empty_record_annotation_is_removed_on_absent():
    node = make_node(annotations={nl.ANNOTATION: "{}"})
    result, after = converge(node, BASE, state="absent")
    assert result["ops"] == [{"op": "test", "path": ANNOTATION_PATH, "value": "{}"},
                             {"op": "remove", "path": ANNOTATION_PATH}]


# ---- changes: a plan, one line per change, for the role's output ---------------------------------

PLUGIN_DEPLOY = nl.deploy_label("device-plugin")
EXPORTER_DEPLOY = nl.deploy_label("dcgm-exporter")

CHANGES = [
    # (id, plan result (the keys changes() reads), lines)
    ("add", {"labels_before": {}, "labels_after": {nl.PRESENT_LABEL: "true"}}, ["add nvidia.com/gpu.present=true"]),
    ("change", {"labels_before": {nl.HEALTH_LABEL: "healthy"}, "labels_after": {nl.HEALTH_LABEL: "xid"}},
     ["change gpuops.nvidia/gpu.health: healthy -> xid"]),
    ("remove", {"labels_before": {nl.NVLINK_LABEL: "full-mesh"}, "labels_after": {}},
     ["remove gpuops.nvidia/gpu.nvlink (was full-mesh)"]),
    ("unchanged-says-nothing", {"labels_before": {nl.PRESENT_LABEL: "true"},
                                "labels_after": {nl.PRESENT_LABEL: "true"}}, []),
    ("keep", {"labels_before": {EXPORTER_DEPLOY: "false"}, "labels_after": {EXPORTER_DEPLOY: "false"},
              "kept": {EXPORTER_DEPLOY: "value 'false' is an admin's opt-out: left alone"}},
     ["keep nvidia.com/gpu.deploy.dcgm-exporter: value 'false' is an admin's opt-out: left alone"]),
    ("taint", {"taints_before": [], "taints_after": [dict(TAINT, value="xid")]},
     ["taint gpuops.nvidia/gpu-unhealthy=xid:NoSchedule"]),
    ("taint-without-value", {"taints_before": [OTHER_TAINT], "taints_after": [OTHER_TAINT, TAINT]},
     ["taint gpuops.nvidia/gpu-unhealthy=:NoSchedule"]),
    ("untaint", {"taints_before": [OTHER_TAINT, dict(TAINT, value="gpu_lost")], "taints_after": [OTHER_TAINT]},
     ["untaint gpuops.nvidia/gpu-unhealthy=gpu_lost:NoSchedule"]),
    # another value or effect of the same key: the old one goes, the new one comes
    ("retaint", {"taints_before": [dict(TAINT, value="xid")], "taints_after": [dict(TAINT, value="gpu_lost")]},
     ["taint gpuops.nvidia/gpu-unhealthy=gpu_lost:NoSchedule", "untaint gpuops.nvidia/gpu-unhealthy=xid:NoSchedule"]),
    # timeAdded and the order of the list are no change
    ("taint-reordered-or-stamped",
     {"taints_before": [OTHER_TAINT, dict(TAINT, value="xid")],
      "taints_after": [dict(TAINT, value="xid", timeAdded="2026-01-01T00:00:00Z"), OTHER_TAINT]}, []),
    ("all-kinds-in-order",
     {"labels_before": {nl.HEALTH_LABEL: "healthy", nl.NVLINK_LABEL: "full-mesh", PLUGIN_DEPLOY: "paused-for-x",
                        nl.PRESENT_LABEL: "true"},
      "labels_after": {nl.HEALTH_LABEL: "xid", PLUGIN_DEPLOY: "paused-for-x", nl.PRESENT_LABEL: "true",
                       nl.MIG_CAPABLE_LABEL: "true"},
      "kept": {PLUGIN_DEPLOY: "paused"}, "taints_before": [], "taints_after": [dict(TAINT, value="xid")]},
     ["change gpuops.nvidia/gpu.health: healthy -> xid", "remove gpuops.nvidia/gpu.nvlink (was full-mesh)",
      "add nvidia.com/mig.capable=true", "keep nvidia.com/gpu.deploy.device-plugin: paused",
      "taint gpuops.nvidia/gpu-unhealthy=xid:NoSchedule"]),
    ("empty-plan", {}, []),
    ("nones", {"labels_before": None, "labels_after": None, "kept": None, "taints_before": None,
               "taints_after": None}, []),
]


@pytest.mark.parametrize("result, lines", [case[1:] for case in CHANGES], ids=[case[0] for case in CHANGES])
def test_changes(result, lines):
    assert nl.changes(result) == lines


def test_changes_of_a_plan():
    """The lines of a real plan: a fresh, unhealthy node, then the same node healed."""
    desired = {nl.PRESENT_LABEL: "true"}
    result, sick = converge(make_node({EXPORTER_DEPLOY: "false"}), dict(desired, **{EXPORTER_DEPLOY: "true"}),
                            unhealthy=["xid"])
    lines = nl.changes(result)
    assert lines[0] == "add gpuops.nvidia/gpu.health=xid"
    assert lines[1] == "add nvidia.com/gpu.present=true"
    assert lines[2].startswith("keep nvidia.com/gpu.deploy.dcgm-exporter: ") and "false" in lines[2]
    assert lines[3:] == ["taint gpuops.nvidia/gpu-unhealthy=xid:NoSchedule"]
    result = converge(sick, desired, unhealthy=[])[0]
    assert nl.changes(result) == ["change gpuops.nvidia/gpu.health: xid -> healthy",
                                  "untaint gpuops.nvidia/gpu-unhealthy=xid:NoSchedule"]


def test_changes_of_a_plan_without_changes():
    node = make_node()
    after = converge(node, BASE)[1]
    assert nl.changes(nl.plan(after, BASE, unhealthy=[], taint=TAINT)) == []


def test_a_node_whose_driver_is_not_loaded_stays_a_gpu_node_by_its_pci_devices():
    # gpu_info's result with the driver not loaded: no GPUs from NVML, the PCI bus still has them
    info = {"driver": {"loaded": False}, "gpu_count": 0, "gpus": [], "health": [],
            "pci": {"gpus": [{"bus_id": "0000:18:00.0", "device_id": "0x2330", "driver": None}], "nvswitches": []}}
    labels = nl.desired_labels(info)
    assert labels["nvidia.com/gpu.present"] == "true"
    assert labels["nvidia.com/gpu.deploy.device-plugin"] == "true"

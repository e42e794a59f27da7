# -*- coding: utf-8 -*-
"""NVIDIA's DRA driver for GPUs on the lab's H100 node, which make lab leaves a DRA node (its
inventory's gpu_allocation: dra) beside the L40S on the device plugin: the real kubelet plugin
(sigs.k8s.io/dra-driver-nvidia-gpu v0.4.1, built from its module) reads the fake NVML and publishes
the node's GPUs in a ResourceSlice; ResourceClaims select them by attribute with CEL and the pods
see exactly the GPUs allocated to them, through CDI (Debian 13's containerd 1.7 on that node); a
plain nvidia.com/gpu request is served by DRA through the DeviceClass's extendedResourceName; no
device plugin runs there, and a node asked to run both is refused; a MIG layout is published as MIG
devices. (The switch of the node to the device plugin and back, a PodDisruptionBudget in the way,
is test_mig_in_cluster's: MIG through the device plugin runs in between.)"""
from __future__ import annotations

import json
import re
import uuid

import pytest

from labfacts import H100_UUIDS
from test_mig_in_cluster import DRA_OBJECTS, LabelWatch
from test_roles import extra, playbook

NODE = "gpuops-lab-h100"
NS = "gpuops-nvidia"
CUDA_BASE = "nvcr.io/nvidia/cuda:12.4.1-base-ubuntu22.04"
# hgx-h100: the GPUs' PCI bus numbers by NVML index (= PCI order), as profiles/hgx-h100.profile lists them
H100_BUS = ["1b", "43", "52", "61", "9d", "c3", "d1", "df"]
CLAIM_NAMESPACES = []


@pytest.fixture(scope="module")
def dra_node(lab_only):
    """The H100 as make lab left it, a DRA node; the tests' claim pods (and their namespaces) gone
    at the end, waited for: a pod left holding a claim would keep its devices from the next
    module's switch."""
    kube = lab_only
    labels = kube.get("node", NODE)["metadata"]["labels"]
    assert labels.get("nvidia.com/gpu.deploy.dra-driver") == "true", labels
    CLAIM_NAMESPACES.clear()
    yield kube
    for name in CLAIM_NAMESPACES:
        kube.run("delete", "namespace", name, "--wait=true", "--timeout=180s", timeout=200, check=False)


@pytest.fixture
def claims_ns(dra_node):
    """A namespace for a test's claim pods, deleted (and waited for) at the end of the module."""
    name = "gpuops-dra-" + uuid.uuid4().hex[:8]
    dra_node.run("create", "namespace", name)
    CLAIM_NAMESPACES.append(name)
    return name


def slice_devices(kube):
    """{device name: device} of the node's gpu.nvidia.com ResourceSlices."""
    return kube.slice_devices(NODE)


def attr(device, name):
    value = device["attributes"][name]
    return next(iter(value.values()))


def run_pod(kube, namespace, name, spec):
    pod = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": {
        "restartPolicy": "Never", "tolerations": [{"operator": "Exists", "effect": "NoSchedule"}], **spec}}
    kube.apply(pod, namespace=namespace)


# the pods list their GPUs and stay (their generated claims go with them once they end)
SMI_AND_STAY = ["sh", "-c", "nvidia-smi -L && echo listed; trap 'exit 0' TERM; sleep 3600 & wait $!"]


def smi_uuids(kube, namespace, name):
    """(pod, the UUIDs nvidia-smi -L printed in it) once it has printed them."""
    def listed():
        if kube.pod_phase(namespace, name) == "Failed":
            raise AssertionError(kube.run("-n", namespace, "logs", name, check=False).stdout)
        out = kube.run("-n", namespace, "logs", name, check=False).stdout
        return out if "listed" in out.splitlines() else None
    logs = kube.wait(listed, timeout=120, what=f"nvidia-smi -L in pod {name}")
    pod = kube.get("-n", namespace, "pod", name)
    assert pod["spec"]["nodeName"] == NODE
    return pod, re.findall(r"^GPU \d+: .+ \(UUID: (GPU-[^)]+)\)$", logs, re.M)


def allocated_uuids(kube, namespace, claim, devices):
    results = kube.get("-n", namespace, "resourceclaim", claim)["status"]["allocation"]["devices"]["results"]
    assert {r["driver"] for r in results} == {"gpu.nvidia.com"} and {r["pool"] for r in results} == {NODE}
    return sorted(attr(devices[r["device"]], "uuid") for r in results)


def claim_template(namespace, name, expression, count=1):
    return {"apiVersion": "resource.k8s.io/v1", "kind": "ResourceClaimTemplate",
            "metadata": {"name": name, "namespace": namespace},
            "spec": {"spec": {"devices": {"requests": [{"name": "gpu", "exactly": {
                "deviceClassName": "gpu.nvidia.com", "count": count,
                "allocationMode": "ExactCount", "selectors": [{"cel": {"expression": expression}}]}}]}}}}


def claim_pod(kube, namespace, name, template):
    run_pod(kube, namespace, name, {
        "resourceClaims": [{"name": "gpu", "resourceClaimTemplateName": template}],
        "containers": [{"name": "main", "image": CUDA_BASE, "command": SMI_AND_STAY,
                        "resources": {"claims": [{"name": "gpu"}]}}]})


def test_the_node_publishes_exactly_its_gpus_and_no_device_plugin_runs_there(dra_node):
    kube = dra_node
    devices = slice_devices(kube)
    by_uuid = {attr(d, "uuid"): d for d in devices.values()}
    assert sorted(by_uuid) == sorted(H100_UUIDS)
    for index, uuid in enumerate(H100_UUIDS):
        d = by_uuid[uuid]
        assert attr(d, "type") == "gpu"
        assert attr(d, "productName") == "NVIDIA H100 80GB HBM3"
        assert attr(d, "architecture") == "Hopper" and attr(d, "brand") == "Nvidia"
        assert attr(d, "cudaComputeCapability") == "9.0.0"
        # the profile's 570.172.08 and CUDA 12.8, as semantic versions
        assert attr(d, "driverVersion") == "570.172.8" and attr(d, "cudaDriverVersion") == "12.8.0"
        assert attr(d, "resource.kubernetes.io/pciBusID") == f"0000:{H100_BUS[index]}:00.0"
        assert d["capacity"]["memory"]["value"] == "81559Mi"
    classes = {c["metadata"]["name"]: c for c in kube.get("deviceclasses")["items"]}
    assert classes["gpu.nvidia.com"]["spec"]["extendedResourceName"] == "nvidia.com/gpu"
    assert "type == 'mig'" in classes["mig.nvidia.com"]["spec"]["selectors"][0]["cel"]["expression"]
    # one allocator per node: the DRA plugin's pod runs there, the device plugin's never did (the
    # node has no device plugin resource; nvidia.com/gpu requests are served by DRA: see below)
    pods = kube.get("-n", NS, "pods", "--field-selector", f"spec.nodeName={NODE}")["items"]
    names = {p["metadata"]["labels"].get("app.kubernetes.io/name") for p in pods}
    assert "nvidia-device-plugin" not in names and "dra-driver-nvidia-gpu" in names, names
    item = kube.get("node", NODE)
    labels = item["metadata"]["labels"]
    assert labels.get("nvidia.com/gpu.deploy.dra-driver") == "true"
    assert "nvidia.com/gpu.deploy.device-plugin" not in labels
    assert "nvidia.com/gpu" not in item["status"]["allocatable"], item["status"]["allocatable"]
    # the node's containerd honours CDI and runc is its default: a claim's devices come through CDI only
    config = kube.node_exec(NODE, "containerd config dump").stdout
    assert "enable_cdi = true" in config and 'default_runtime_name = "runc"' in config


def test_claims_select_gpus_by_attribute_and_pods_see_exactly_theirs(dra_node, claims_ns):
    namespace = claims_ns
    kube = dra_node
    devices = slice_devices(kube)
    kube.apply(
        claim_template(namespace, "by-product-and-memory",
                       "device.attributes['gpu.nvidia.com'].productName == 'NVIDIA H100 80GB HBM3' && "
                       "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('40Gi')) >= 0"),
        claim_template(namespace, "two-hoppers",
                       "device.attributes['gpu.nvidia.com'].architecture == 'Hopper' && "
                       "device.attributes['gpu.nvidia.com'].cudaComputeCapability.isGreaterThan(semver('8.9.0'))",
                       count=2),
        claim_template(namespace, "too-big",
                       "device.capacity['gpu.nvidia.com'].memory.compareTo(quantity('100Gi')) >= 0"))
    claim_pod(kube, namespace, "one", "by-product-and-memory")
    claim_pod(kube, namespace, "two", "two-hoppers")
    claim_pod(kube, namespace, "none", "too-big")
    for name, count in (("one", 1), ("two", 2)):
        done, seen = smi_uuids(kube, namespace, name)
        claim = done["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
        assert len(seen) == count and sorted(seen) == allocated_uuids(kube, namespace, claim, devices), (name, seen)
    # nothing has 100Gi: the pod stays unscheduled with the scheduler's reason
    pending = kube.wait(lambda: next((c for c in kube.get("-n", namespace, "pod", "none")["status"].get(
        "conditions", []) if c["type"] == "PodScheduled" and c["status"] == "False" and c.get("message")), None),
        timeout=60, what="the scheduler's reason for pod none")
    assert pending["reason"] == "Unschedulable", pending
    assert "cannot allocate all claims" in pending["message"], pending["message"]


def test_a_plain_nvidia_gpu_request_is_served_by_dra(dra_node, claims_ns):
    """A pod asking for nvidia.com/gpu on the DRA node (no claim of its own): the scheduler makes a
    claim through the DeviceClass's extendedResourceName; the pod sees exactly those GPUs."""
    namespace = claims_ns
    kube = dra_node
    devices = slice_devices(kube)
    run_pod(kube, namespace, "plain", {
        "nodeSelector": {"kubernetes.io/hostname": NODE},
        "containers": [{"name": "main", "image": CUDA_BASE, "command": SMI_AND_STAY,
                        "resources": {"limits": {"nvidia.com/gpu": "2"}}}]})
    done, seen = smi_uuids(kube, namespace, "plain")
    status = done["status"]["extendedResourceClaimStatus"]
    assert status["requestMappings"][0]["resourceName"] == "nvidia.com/gpu"
    assert len(seen) == 2 and sorted(seen) == allocated_uuids(kube, namespace, status["resourceClaimName"], devices)


def test_the_driver_is_not_removed_while_a_node_runs_it_or_a_claim_holds_its_devices(dra_node, claims_ns):
    """dra_driver_state: absent while the H100 is a DRA node and a claim pod runs: refused before
    anything is removed, naming the node (it would have no allocator left) and the claim (removed,
    the plugin could not release the devices and the pod would stay Terminating)."""
    kube, namespace = dra_node, claims_ns
    kube.apply(claim_template(namespace, "any-hopper", "device.attributes['gpu.nvidia.com'].architecture == 'Hopper'"))
    claim_pod(kube, namespace, "holder", "any-hopper")
    held, _seen = smi_uuids(kube, namespace, "holder")
    claim = held["status"]["resourceClaimStatuses"][0]["resourceClaimName"]
    res = playbook("site.yml", "--limit", NODE, "--tags", "operands", *extra(dra_driver_state="absent"), check=False)
    assert res.returncode != 0
    said = " ".join(res.stdout.split())
    # (the claims of the other tests' pods, still running, are named too)
    refusal = re.search(r"NVIDIA's DRA driver still has devices allocated to the ResourceClaims (.+?): removed now", said)
    assert refusal and f"{namespace}/{claim}" in refusal.group(1).split(", "), res.stdout[-3000:]
    # and the node it serves is named with the way out
    assert (f"NVIDIA's DRA driver still serves the nodes {NODE} (nvidia.com/gpu.deploy.dra-driver=true): removed now, "
            "their GPUs could no longer be allocated. Switch them to the device plugin first") in said, res.stdout[-3000:]
    for kind, name in DRA_OBJECTS:
        kube.get(kind, name)
    kube.get("-n", NS, "daemonset", "dra-driver-nvidia-gpu-kubelet-plugin")


def test_the_audit_compares_the_nodes_allocator_with_its_gpu_allocation(dra_node, tmp_path):
    """The drift audit on the DRA node: asked dra, no drift in its allocation and its ResourceSlices
    list what NVML lists; asked device-plugin
    (the inventory changed, the node did not), the GPU allocation item is the drift, with its fix."""
    def allocation(value):
        report = tmp_path / f"audit-{value}.json"
        playbook("audit.yml", "--limit", NODE, *extra(gpu_allocation=value, gpuops_audit_report_path=str(report)),
                 check=False)
        node = {n["node"]: n for n in json.loads(report.read_text())["nodes"]}[NODE]
        return {i["item"]: i for i in node["items"]}
    items = allocation("dra")
    ok = items["GPU allocation"]
    assert (ok["expected"], ok["actual"], ok["ok"]) == ("dra", "dra", True)
    # the node's ResourceSlices against what NVML lists on the node, UUID for UUID
    assert (items["DRA devices"]["actual"], items["DRA devices"]["ok"]) == ("the same 8 device(s)", True)
    drift = allocation("device-plugin")["GPU allocation"]
    assert (drift["expected"], drift["actual"], drift["ok"]) == ("device-plugin", "dra", False)
    assert "never both" in drift["fix"]


def test_a_node_asked_to_run_both_allocators_is_refused_by_name_before_any_change(dra_node):
    kube = dra_node
    before = kube.get("node", NODE)["metadata"]["labels"]
    both = ["device-plugin", "dra-driver", "gpu-feature-discovery", "dcgm-exporter"]
    res = playbook("site.yml", "--limit", NODE, "--tags", "labels",
                   *extra(node_labels_operands=both), check=False)
    assert res.returncode != 0
    said = " ".join(res.stdout.split())
    assert f"{NODE}: node_labels_operands would have the node served by both the device plugin and NVIDIA's DRA driver" \
        in said, res.stdout[-3000:]
    assert kube.get("node", NODE)["metadata"]["labels"] == before


def test_the_role_refuses_a_gpu_allocation_it_does_not_know(lab_only):
    res = playbook("site.yml", "--limit", NODE, "--tags", "labels", *extra(gpu_allocation="mps"), check=False)
    assert res.returncode != 0
    said = " ".join(res.stdout.split())
    # (the first role whose arguments name it refuses it, before any stage changes anything)
    assert re.search(r"value of gpu_allocation must be one of: device-plugin, dra, got: mps|"
                     rf"{NODE}: gpu_allocation is 'mps': set it to device-plugin or dra", said), res.stdout[-3000:]


def mig_layout(kube, layout, check=True):
    """The site's MIG stage on the DRA node, its layout chosen by the node's label."""
    kube.run("label", "node", NODE, f"nvidia.com/mig.config={layout}", "--overwrite")
    return playbook("site.yml", "--tags", "mig", "--limit", NODE, *extra(gpuops_mig_follow_label=True), check=check)


def test_a_mig_layout_is_published_as_mig_devices_and_the_whole_gpus_come_back(dra_node):
    """A MIG change on the DRA node pauses the DRA kubelet plugin with the other operands and restores
    it, so the node's ResourceSlices list exactly the MIG devices NVML lists (nvidia-smi -L on the
    node), each with its profile, parent and the memory slices of NVIDIA's placement table; with MIG
    off again, the eight whole GPUs. (A claim of a MIG device cannot start a pod in the lab: the
    driver's CDI edits for it read /proc/driver/nvidia/capabilities, which a container's procfs has
    not.)"""
    kube = dra_node
    deploy = "nvidia.com/gpu.deploy.dra-driver"
    try:
        with LabelWatch(kube, [deploy]) as watch:
            mig_layout(kube, "all-3g.40gb")
        assert watch.seen[deploy] == ["true", "paused-for-mig-change", "true"], watch.seen
        listed = kube.node_exec(NODE, "nvidia-smi -L").stdout
        parents, nvml = None, {}
        for line in listed.splitlines():
            gpu = re.match(r"^GPU \d+: .+ \(UUID: (GPU-[^)]+)\)$", line)
            mig = re.match(r"^\s+MIG (\S+)\s+Device\s+\d+: \(UUID: (MIG-[^)]+)\)$", line)
            parents = gpu.group(1) if gpu else parents
            if mig:
                nvml[mig.group(2)] = (mig.group(1), parents)
        assert len(nvml) == 16, listed

        def published():
            devices = slice_devices(kube)
            migs = {attr(d, "uuid"): d for d in devices.values() if attr(d, "type") == "mig"}
            return migs if sorted(migs) == sorted(nvml) and len(devices) == len(nvml) else None
        migs = kube.wait(published, timeout=180, what="the node's ResourceSlices to list the MIG devices nvidia-smi lists")
        slices = {}
        for uuid, device in migs.items():
            assert (attr(device, "profile"), attr(device, "parentUUID")) == nvml[uuid], device
            assert attr(device, "productName") == "NVIDIA H100 80GB HBM3"
            slices.setdefault(attr(device, "parentUUID"), []).append(
                sorted(int(k[len("memorySlice"):]) for k in device["capacity"] if k.startswith("memorySlice")))
        # NVIDIA's placements of 3g.40gb on an H100 80GB: starts 0 and 4, four memory slices each
        assert sorted(slices) == sorted(H100_UUIDS)
        assert all(sorted(ranges) == [[0, 1, 2, 3], [4, 5, 6, 7]] for ranges in slices.values()), slices
    finally:
        mig_layout(kube, "all-disabled", check=False)
        kube.wait(lambda: sorted(attr(d, "uuid") for d in slice_devices(kube).values()) == sorted(H100_UUIDS),
                  timeout=180, what="the eight whole GPUs in the node's ResourceSlices again")
        # (the MIG role's boot unit gone, its labels too)
        playbook("site.yml", "--tags", "mig", "--limit", NODE, *extra(mig_state="absent", mig_cluster=False), check=False)
        kube.run("label", "node", NODE, "nvidia.com/mig.config-", "nvidia.com/mig.config.state-", check=False)


def test_preflight_refuses_a_node_whose_runtime_has_no_cdi_before_anything_changes(lab_only):
    """The L40S node runs Debian 12's containerd 1.6: asked to be a DRA node, the site's pre-flight
    stage refuses it with the runtime's version and the fix, and nothing on the node changes."""
    kube = lab_only
    node = "gpuops-lab-l40s"
    digest = "find /etc/containerd /etc/apt /etc/cdi /var/run/cdi -type f -exec sha256sum {} + 2>/dev/null | sort"
    before = kube.node_exec(node, digest).stdout
    labels = kube.get("node", node)["metadata"]["labels"]
    res = playbook("site.yml", "--limit", node, *extra(gpu_allocation="dra"), check=False)
    assert res.returncode != 0
    said = " ".join(res.stdout.split())
    assert "containerd 1.6.20 cannot inject devices through CDI, which NVIDIA's DRA driver requires" in said, \
        res.stdout[-3000:]
    assert "gpu_allocation: device-plugin" in said
    # stopped in the pre-flight stage: no later stage ran
    assert "Stage 2 -" not in res.stdout and "Stage 7 -" not in res.stdout, res.stdout[-3000:]
    assert kube.node_exec(node, digest).stdout == before
    assert kube.get("node", node)["metadata"]["labels"] == labels

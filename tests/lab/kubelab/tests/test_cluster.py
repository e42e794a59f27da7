# -*- coding: utf-8 -*-
"""The lab cluster behaves as a real GPU cluster: real kubelets on the GPU nodes, NVIDIA's device
plugin (the L40S node) or DRA driver (the H100 node) and GPU Feature Discovery over the fake NVML,
pods through the nodes' real runtime configuration."""
from __future__ import annotations

import json
import os
import ssl
import urllib.error
import urllib.request

import pytest

from conftest import TOOLBOX, require


def runtime_class_for(facts):
    """The RuntimeClass a GPU pod names on the node: NVIDIA's on a device-plugin node; none on a DRA
    node, whose GPUs reach the pod through CDI (the claim's devices, and only those)."""
    return None if facts.get("allocation") == "dra" else "nvidia"


def gpu_pod(name, node, count=1, runtime_class="nvidia", command=("nvidia-smi", "-L")):
    # (scheduled, not bound with nodeName: on a DRA node the scheduler makes the nvidia.com/gpu
    # request a claim through the DeviceClass's extendedResourceName)
    spec = {
        "restartPolicy": "Never",
        "nodeSelector": {"kubernetes.io/hostname": node},
        "containers": [{"name": "main", "image": TOOLBOX, "imagePullPolicy": "IfNotPresent",
                        "command": list(command),
                        "resources": {"limits": {"nvidia.com/gpu": str(count)}}}],
        "tolerations": [{"key": "nvidia.com/gpu", "operator": "Exists", "effect": "NoSchedule"}],
    }
    if runtime_class:
        spec["runtimeClassName"] = runtime_class
    return {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": name}, "spec": spec}


def test_requests_without_a_token_are_refused(kube):
    require(kube.lab, "the lab's own API server", "run on the lab (make lab), not with GPUOPS_REAL_KUBECONFIG")
    ctx = ssl.create_default_context(cafile=os.path.join(os.path.dirname(kube.kubeconfig), "pki", "ca.crt"))
    with pytest.raises(urllib.error.HTTPError) as err:
        urllib.request.urlopen("https://127.0.0.1:6443/api/v1/nodes", context=ctx, timeout=10)
    assert err.value.code == 401


def test_gpu_nodes_are_ready_real_kubelets(kube, gpu_nodes):
    for name in gpu_nodes:
        node = kube.get("node", name)
        conds = {c["type"]: c["status"] for c in node["status"]["conditions"]}
        assert conds["Ready"] == "True", node["status"]["conditions"]
        info = node["status"]["nodeInfo"]
        if kube.lab:
            # the kubelet built from k8s.io/kubernetes v1.37.2 on the node's own containerd
            assert info["kubeletVersion"] == "v1.37.2"
            assert info["containerRuntimeVersion"].startswith("containerd://")


def test_each_nodes_allocator_advertises_its_gpus(kube, gpu_nodes):
    """The device plugin's allocatable nvidia.com/gpu, or the DRA driver's ResourceSlices, list
    each node's GPUs."""
    for name, facts in gpu_nodes.items():
        count = kube.wait(lambda: kube.advertised_gpus(name, facts["allocation"]),
                          what=f"{name}: the GPUs its {facts['allocation']} advertises")
        assert count == str(facts["gpus"]), (name, count)
        if facts["allocation"] == "device-plugin":
            assert kube.get("node", name)["status"]["capacity"]["nvidia.com/gpu"] == str(facts["gpus"])


def test_gfd_labels_reach_the_node_through_nfd(kube, gpu_nodes):
    for name, facts in gpu_nodes.items():
        labels = kube.wait(lambda: (lb := kube.get("node", name)["metadata"]["labels"]).get("nvidia.com/gpu.product")
                           and lb, timeout=180, what=f"{name}: GFD labels")
        assert labels["nvidia.com/gpu.count"] == str(facts["gpus"])
        if facts["product"]:
            assert labels["nvidia.com/gpu.product"] == facts["product"]
            assert labels["nvidia.com/cuda.driver-version.full"] == facts["driver"]
        if kube.lab:
            # GFD wrote a NodeFeature; NFD's master made it node labels
            nf = kube.get("-n", "gpuops-nvidia", "nodefeature", f"nvidia-features-for-{name}")
            assert nf["metadata"]["labels"]["nfd.node.kubernetes.io/node-name"] == name
            assert nf["spec"]["labels"]["nvidia.com/gpu.product"] == facts["product"]


def test_a_gpu_pod_runs_nvidia_smi_through_the_nodes_runtime(kube, gpu_nodes, namespace):
    for i, (name, facts) in enumerate(gpu_nodes.items()):
        pod = f"smi-{i}"
        kube.apply(gpu_pod(pod, name, runtime_class=runtime_class_for(facts)), namespace=namespace)
        done = kube.wait_pod_done(namespace, pod)
        logs = kube.run("-n", namespace, "logs", pod).stdout
        assert done["status"]["phase"] == "Succeeded", (done["status"], logs)
        lines = [line for line in logs.splitlines() if line.startswith("GPU ")]
        # the allocator gave the pod one GPU; the runtime injected that one and nvidia-smi
        assert len(lines) == 1, logs
        if facts["uuids"]:
            uuid = lines[0].split("UUID: ")[1].rstrip(")")
            assert uuid in facts["uuids"]


def test_without_the_nvidia_runtime_the_pod_fails_with_the_runtimes_error(kube, gpu_nodes, namespace, request):
    # (a device-plugin node: on a DRA node the claim's devices come through CDI, whatever the runtime)
    name = next((n for n, facts in gpu_nodes.items() if facts["allocation"] == "device-plugin"), None)
    require(name, "a GPU node the device plugin serves", "GPUOPS_REAL_GPU_ALLOCATION names device-plugin")
    # plain runc (containerd's own runtime; NVIDIA's is the default on device-plugin nodes, see the
    # seeds' pod in test_roles) ignores NVIDIA_VISIBLE_DEVICES: no nvidia-smi
    runc = {"apiVersion": "node.k8s.io/v1", "kind": "RuntimeClass", "metadata": {"name": namespace + "-runc"},
            "handler": "runc"}
    kube.apply(runc)
    request.addfinalizer(lambda: kube.run("delete", "runtimeclass", namespace + "-runc", check=False))
    kube.apply(gpu_pod("plain", name, runtime_class=namespace + "-runc"), namespace=namespace)

    def failed():
        st = kube.get("-n", namespace, "pod", "plain")["status"]
        for cs in st.get("containerStatuses", []):
            term = cs["state"].get("terminated") or {}
            wait = cs["state"].get("waiting") or {}
            msg = term.get("message") or wait.get("message") or ""
            if msg:
                return msg
        return None
    msg = kube.wait(failed, timeout=120, what="the container's error")
    assert 'exec: "nvidia-smi": executable file not found in $PATH' in msg, msg


def test_a_daemonset_lands_on_every_gpu_node(kube, gpu_nodes, namespace):
    ds = {"apiVersion": "apps/v1", "kind": "DaemonSet", "metadata": {"name": "everywhere"},
          "spec": {"selector": {"matchLabels": {"app": "everywhere"}},
                   "template": {"metadata": {"labels": {"app": "everywhere"}},
                                "spec": {"containers": [{"name": "main", "image": TOOLBOX,
                                                         "command": ["sleep", "3600"]}],
                                         "terminationGracePeriodSeconds": 1}}}}
    kube.apply(ds, namespace=namespace)
    kube.run("-n", namespace, "rollout", "status", "daemonset/everywhere", "--timeout=120s", timeout=150)
    pods = kube.get("-n", namespace, "pods", "-l", "app=everywhere")["items"]
    assert set(gpu_nodes) <= {p["spec"]["nodeName"] for p in pods}


def test_eviction_respects_a_pod_disruption_budget(kube, gpu_nodes, namespace):
    dep = {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "web"},
           "spec": {"replicas": 2, "selector": {"matchLabels": {"app": "web"}},
                    "template": {"metadata": {"labels": {"app": "web"}},
                                 "spec": {"containers": [{"name": "main", "image": TOOLBOX,
                                                          "command": ["sleep", "3600"]}],
                                          "terminationGracePeriodSeconds": 1}}}}
    pdb = {"apiVersion": "policy/v1", "kind": "PodDisruptionBudget", "metadata": {"name": "web"},
           "spec": {"minAvailable": 2, "selector": {"matchLabels": {"app": "web"}}}}
    kube.apply(dep, pdb, namespace=namespace)
    kube.run("-n", namespace, "rollout", "status", "deployment/web", "--timeout=120s", timeout=150)
    kube.wait(lambda: kube.get("-n", namespace, "pdb", "web")["status"].get("currentHealthy") == 2,
              what="the PDB to count both pods")
    pod = kube.get("-n", namespace, "pods", "-l", "app=web")["items"][0]["metadata"]["name"]
    eviction = json.dumps({"apiVersion": "policy/v1", "kind": "Eviction",
                           "metadata": {"name": pod, "namespace": namespace}})
    res = kube.run("create", "--raw", f"/api/v1/namespaces/{namespace}/pods/{pod}/eviction", "-f", "-",
                   input=eviction, check=False)
    assert res.returncode != 0 and "disruption budget" in res.stderr.lower(), res.stderr
    kube.run("-n", namespace, "patch", "pdb", "web", "--type=merge", "-p", '{"spec": {"minAvailable": 1}}')
    kube.wait(lambda: kube.get("-n", namespace, "pdb", "web")["status"].get("disruptionsAllowed") == 1,
              what="one disruption allowed")
    kube.run("create", "--raw", f"/api/v1/namespaces/{namespace}/pods/{pod}/eviction", "-f", "-", input=eviction)
    kube.wait(lambda: pod not in {p["metadata"]["name"] for p in kube.get("-n", namespace, "pods")["items"]},
              what="the evicted pod to go")

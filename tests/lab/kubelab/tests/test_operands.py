# -*- coding: utf-8 -*-
"""What runs on the lab cluster's GPU nodes besides the kubelet: the DCGM exporter's metrics
reaching a real Prometheus (with pod attribution through the kubelet's pod-resources API), the
device plugin's time-slicing, and kwok's synthetic GPU nodes for scale."""
from __future__ import annotations

import json
import os
import subprocess
import urllib.parse
import urllib.request

import pytest

from conftest import LAB, TOOLBOX, require
from test_cluster import gpu_pod

PROMETHEUS = os.environ.get("GPUOPS_REAL_PROMETHEUS_URL", "http://127.0.0.1:9090")


@pytest.fixture(scope="module")
def prometheus(kube):
    require(kube.lab or "GPUOPS_REAL_PROMETHEUS_URL" in os.environ, "GPUOPS_REAL_PROMETHEUS_URL",
            "set it to the real cluster's Prometheus")

    def query(expr):
        url = f"{PROMETHEUS}/api/v1/query?" + urllib.parse.urlencode({"query": expr})
        with urllib.request.urlopen(url, timeout=10) as r:
            body = json.load(r)
        assert body["status"] == "success", body
        return body["data"]["result"]
    return query


def test_prometheus_scrapes_a_dcgm_exporter_on_every_gpu_node(kube, gpu_nodes, prometheus):
    # Prometheus (Debian's) found the exporters through the Service's EndpointSlices
    up = kube.wait(lambda: (r := prometheus('up{job="dcgm-exporter"} == 1')) and len(r) >= len(gpu_nodes) and r,
                   timeout=120, interval=3, what="every exporter target up in Prometheus")
    assert len(up) == len(gpu_nodes)
    series = kube.wait(lambda: (r := prometheus("DCGM_FI_DEV_GPU_TEMP")) and
                       len(r) == sum(f["gpus"] for f in gpu_nodes.values()) and r,
                       timeout=60, interval=3, what="a GPU temperature series per GPU")
    by_node = {}
    for s in series:
        by_node.setdefault(s["metric"]["Hostname"], []).append(s["metric"])
    assert set(by_node) == set(gpu_nodes)
    for name, facts in gpu_nodes.items():
        metrics = sorted(by_node[name], key=lambda m: int(m["gpu"]))
        assert [m["gpu"] for m in metrics] == [str(i) for i in range(facts["gpus"])]
        if facts["uuids"]:
            # the exporter reads the node's NVML: the profile's GPUs, with its driver
            assert [m["UUID"] for m in metrics] == facts["uuids"]
            assert {m["DCGM_FI_DRIVER_VERSION"] for m in metrics} == {facts["driver"]}
            assert {m["modelName"].replace(" ", "-") for m in metrics} == {facts["product"]}
            assert [m["device"] for m in metrics] == [f"nvidia{i}" for i in range(facts["gpus"])]


def test_exporter_values_are_the_gpus_own(kube, gpu_nodes, prometheus):
    require(kube.lab, "the lab's GPU nodes", "this test compares with the lab profiles' figures: run it on the lab")
    # hgx-h100 GPU 0: 71342 mW, 81559 MiB in total (profiles/hgx-h100.profile; labfacts)
    node = "gpuops-lab-h100"
    power = kube.wait(lambda: prometheus(f'DCGM_FI_DEV_POWER_USAGE{{Hostname="{node}",gpu="0"}}'),
                      timeout=60, interval=3, what="GPU 0's power draw")
    assert float(power[0]["value"][1]) == pytest.approx(71.342)
    used = prometheus(f'DCGM_FI_DEV_FB_USED{{Hostname="{node}",gpu="0"}} + '
                      f'DCGM_FI_DEV_FB_FREE{{Hostname="{node}",gpu="0"}} + '
                      f'DCGM_FI_DEV_FB_RESERVED{{Hostname="{node}",gpu="0"}}')
    assert float(used[0]["value"][1]) == pytest.approx(81559, abs=1)


def test_a_gpu_pods_series_carry_its_name(kube, gpu_nodes, namespace, prometheus):
    # (a device-plugin node: the exporter attributes a GPU to a pod by the kubelet's pod-resources
    # API's devices, which lists the device plugin's; the lab's stand-in does not map DRA claims)
    name = next((n for n, facts in gpu_nodes.items() if facts["allocation"] == "device-plugin"), None)
    require(name, "a GPU node the device plugin serves", "GPUOPS_REAL_GPU_ALLOCATION names device-plugin")
    pod = gpu_pod("holder", name, command=("sh", "-c", "nvidia-smi -L; sleep 600"))
    kube.apply(pod, namespace=namespace)
    kube.wait(lambda: kube.pod_phase(namespace, "holder") == "Running", what="the GPU pod to run")

    def pod_log():
        return kube.run("-n", namespace, "logs", "holder").stdout.strip()
    logs = kube.wait(pod_log, what="its nvidia-smi -L")
    uuid = logs.split("UUID: ")[1].rstrip(")")
    # the exporter asked the kubelet's pod-resources API which container holds which GPU
    got = kube.wait(lambda: prometheus(f'DCGM_FI_DEV_GPU_TEMP{{namespace="{namespace}",pod="holder"}}'),
                    timeout=90, interval=3, what="a series attributed to the pod")
    assert [(s["metric"]["UUID"], s["metric"]["container"], s["metric"]["Hostname"]) for s in got] == \
        [(uuid, "main", name)]


def test_synthetic_gpu_nodes_from_a_profile(kube):
    require(kube.lab, "the lab's control plane", "kwok runs there: run this test on the lab")
    res = subprocess.run([os.path.join(LAB, "kube"), "synthetic", "3", "hgx-h200"], capture_output=True, text=True,
                         timeout=300, check=False)
    assert res.returncode == 0, res.stderr
    try:
        nodes = kube.get("nodes", "-l", "gpuops.lab/node=synthetic,gpuops.lab/profile=hgx-h200")["items"]
        assert len(nodes) == 3
        for n in nodes:
            conds = {c["type"]: c["status"] for c in n["status"]["conditions"]}
            assert conds.get("Ready") == "True"
            labels = n["metadata"]["labels"]
            # hgx-h200: 8 x H200 (profiles/hgx-h200.profile), as GFD and NFD would label it
            assert n["status"]["allocatable"]["nvidia.com/gpu"] == "8"
            assert labels["nvidia.com/gpu.product"] == "NVIDIA-H200"
            assert labels["nvidia.com/gpu.family"] == "hopper"
            assert labels["feature.node.kubernetes.io/pci-10de.present"] == "true"
        # kwok runs a pod bound to a synthetic node (it tolerates kwok's taint)
        spec = {"apiVersion": "v1", "kind": "Pod", "metadata": {"name": "on-synthetic", "namespace": "default"},
                "spec": {"nodeName": nodes[0]["metadata"]["name"],
                         "containers": [{"name": "main", "image": TOOLBOX,
                                         "resources": {"limits": {"nvidia.com/gpu": "2"}}}],
                         "tolerations": [{"key": "kwok.x-k8s.io/node", "operator": "Exists"}]}}
        kube.apply(spec)
        kube.wait(lambda: kube.pod_phase("default", "on-synthetic") == "Running", what="kwok to run the pod")
    finally:
        kube.run("delete", "pod", "-n", "default", "on-synthetic", "--now", "--ignore-not-found", check=False)
        kube.run("delete", "nodes", "-l", "gpuops.lab/node=synthetic", check=False)

# -*- coding: utf-8 -*-
"""The lab cluster's own tests: one cluster per test session.

By default the session brings up the built-in lab the way `make lab` does (GPU nodes, the
cluster built from Kubernetes' source, the site playbook's host stages, the lab's operands) and
leaves it running (`make lab-down` removes it). With GPUOPS_REAL_KUBECONFIG=PATH the same tests
run against that cluster instead; the tests that need to reach into a lab node (podman) are then
skipped with that reason, and GPUOPS_REAL_GPU_NODE names the GPU node to test on.
"""
from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
import uuid

import pytest

HERE = os.path.dirname(os.path.abspath(__file__))
LAB = os.path.dirname(os.path.dirname(HERE))
REPO = os.path.dirname(os.path.dirname(LAB))
sys.path.insert(0, LAB)
from labfacts import H100_UUIDS, L40S_UUIDS  # noqa: E402  pylint: disable=wrong-import-position

KUBECTL = os.path.join(REPO, ".venv", "bin", "kubectl")
LAB_KUBECONFIG = os.path.join(REPO, ".build", "kube", "kubeconfig")
MAKE_LAB_LOG = os.path.join(REPO, ".build", "make-lab.log")
REAL = os.environ.get("GPUOPS_REAL_KUBECONFIG")
os.environ.setdefault("CONTAINERS_CONF", os.path.join(LAB, "containers.conf"))

# the lab's GPU nodes and what their fake-NVML profiles say (labfacts, profiles/*.profile)
LAB_GPU_NODES = {
    "gpuops-lab-h100": {"profile": "hgx-h100", "gpus": 8, "product": "NVIDIA-H100-80GB-HBM3",
                        "driver": "570.172.08", "uuids": H100_UUIDS},
    "gpuops-lab-l40s": {"profile": "l40s-x4", "gpus": 4, "product": "NVIDIA-L40S",
                        "driver": "580.95.05", "uuids": L40S_UUIDS},
}
TOOLBOX = os.environ.get("GPUOPS_TEST_IMAGE", "localhost/gpuops-lab/toolbox:1")


class Kube:
    """kubectl against the session's cluster."""

    def __init__(self, kubeconfig, lab):
        self.kubeconfig = kubeconfig
        self.lab = lab
        # kubernetes.core caches API discovery under TMPDIR: one directory per session
        self.tmpdir = tempfile.mkdtemp(prefix="gpuops-kube-tests-")

    def run(self, *args, input=None, check=True, timeout=120):
        env = dict(os.environ, KUBECONFIG=self.kubeconfig, TMPDIR=self.tmpdir)
        res = subprocess.run([KUBECTL, *args], input=input, capture_output=True, text=True, env=env,
                             timeout=timeout, check=False)
        if check and res.returncode != 0:
            raise AssertionError(f"kubectl {' '.join(args)} failed ({res.returncode}): {res.stderr.strip()}")
        return res

    def get(self, *args):
        return json.loads(self.run("get", *args, "-o", "json").stdout)

    def apply(self, *objs, namespace=None):
        ns = ["-n", namespace] if namespace else []
        return self.run(*ns, "apply", "-f", "-", input=json.dumps({"apiVersion": "v1", "kind": "List",
                                                                  "items": list(objs)}))

    def wait(self, predicate, timeout=120, interval=1, what="condition"):
        deadline = time.time() + timeout
        last = None
        while time.time() < deadline:
            last = predicate()
            if last:
                return last
            time.sleep(interval)
        raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")

    def pod_phase(self, ns, name):
        return self.get("-n", ns, "pod", name)["status"].get("phase")

    def wait_pod_done(self, ns, name, timeout=180):
        self.wait(lambda: self.pod_phase(ns, name) in ("Succeeded", "Failed"), timeout, what=f"pod {ns}/{name}")
        return self.get("-n", ns, "pod", name)

    def node_exec(self, node, script):
        if not self.lab:
            pytest.skip("reaches into a lab node (podman); not available with GPUOPS_REAL_KUBECONFIG")
        return subprocess.run(["podman", "exec", node, "bash", "-c", script], capture_output=True, text=True,
                              timeout=300, check=False)


def _bring_up_lab():
    """`make lab`: the GPU nodes, the cluster, the site playbook, the lab's operands."""
    t0 = time.time()
    # a make of its own: not the jobserver of a `make test` that runs these tests
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    res = subprocess.run(["make", "--no-print-directory", "-s", "lab"], cwd=REPO, capture_output=True, text=True,
                         timeout=3600, check=False, env=env)
    # the site run's job log, for the tests that read it as an operator would
    os.makedirs(os.path.dirname(MAKE_LAB_LOG), exist_ok=True)
    with open(MAKE_LAB_LOG, "w", encoding="utf-8") as handle:
        handle.write(res.stdout)
    if res.returncode != 0:
        raise RuntimeError(f"make lab failed ({res.returncode}):\n{res.stdout[-6000:]}\n{res.stderr[-6000:]}")
    print(f"\n[kube tests] lab ready in {time.time() - t0:.0f}s", file=sys.stderr)


@pytest.fixture(scope="session")
def kube():
    if REAL:
        return Kube(REAL, lab=False)
    _bring_up_lab()
    return Kube(LAB_KUBECONFIG, lab=True)


@pytest.fixture(scope="session")
def lab_only(kube):
    """The lab's own cluster: the tests that change its nodes and operands skip on a real one."""
    if not kube.lab:
        pytest.skip("changes the lab's own nodes and operands")
    return kube


@pytest.fixture(scope="session")
def gpu_nodes(kube):
    """name -> expected facts of the GPU nodes under test."""
    if kube.lab:
        return LAB_GPU_NODES
    name = os.environ.get("GPUOPS_REAL_GPU_NODE")
    if not name:
        pytest.skip("set GPUOPS_REAL_GPU_NODE (and optionally GPUOPS_REAL_GPU_COUNT) for a real cluster")
    return {name: {"gpus": int(os.environ.get("GPUOPS_REAL_GPU_COUNT", "1")), "product": None, "driver": None,
                   "uuids": None}}


@pytest.fixture
def namespace(kube):
    name = "gpuops-test-" + uuid.uuid4().hex[:8]
    kube.run("create", "namespace", name)
    yield name
    kube.run("delete", "namespace", name, "--wait=false", check=False)

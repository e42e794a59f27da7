"""`tests/lab/kube operands`: the lab's stand-in for the collection's Kubernetes stages (NFD,
NVIDIA's device plugin and GFD; operands.yaml), until the roles deploy them."""

import os
import time

from .cluster import kubectl
from .images import nfd_module_dir
from .podman import LabError, log

HERE = os.path.dirname(os.path.abspath(__file__))


def deploy(timeout=300):
    crds = os.path.join(nfd_module_dir(), "deployment/base/nfd-crds/nfd-api-crds.yaml")
    kubectl("apply", "--server-side", "-f", crds)
    kubectl("wait", "--for=condition=Established", "crd/nodefeatures.nfd.k8s-sigs.io", "--timeout=60s")
    kubectl("apply", "-f", os.path.join(HERE, "operands.yaml"))
    deadline = time.time() + timeout
    for kind, name in (("deployment", "nfd-master"), ("daemonset", "nfd-worker"),
                       ("daemonset", "nvidia-device-plugin"), ("daemonset", "gpu-feature-discovery"),
                       ("daemonset", "dcgm-exporter")):
        left = max(10, int(deadline - time.time()))
        res = kubectl("-n", "gpuops-lab", "rollout", "status", f"{kind}/{name}", f"--timeout={left}s",
                      check=False, timeout=left + 30)
        if res.returncode != 0:
            pods = kubectl("-n", "gpuops-lab", "get", "pods", "-o", "wide", check=False).stdout
            raise LabError(f"{kind}/{name} did not roll out: {res.stderr.strip()}\n{pods}")
    log("operands ready: NFD, NVIDIA device plugin, GPU Feature Discovery, the DCGM exporter stand-in "
        "(namespace gpuops-lab)")

"""Configuration files and objects of the lab cluster (written here for the lab, from the
components' documented configuration formats)."""

import glob
import hashlib
import json
import os
import subprocess
import uuid

from .podman import LAB, LabError, run

WITH_GPUS = os.path.join(LAB, "with-gpus")


def kubelet_config(pki_dir):
    """KubeletConfiguration (kubelet.config.k8s.io/v1beta1) for a kubelet inside a lab node:
    x509 + webhook authentication, webhook authorization, the cgroupfs driver that Debian's
    containerd uses by default (SystemdCgroup = false), cgroup v1 allowed (this host has no
    cgroup v2; kubelet 1.35+ refuses v1 unless failCgroupV1 is false), and disk-pressure eviction
    and image garbage collection off (the node's disk is the host's)."""
    return json.dumps({
        "apiVersion": "kubelet.config.k8s.io/v1beta1",
        "kind": "KubeletConfiguration",
        "authentication": {"anonymous": {"enabled": False}, "webhook": {"enabled": True},
                           "x509": {"clientCAFile": f"{pki_dir}/ca.crt"}},
        "authorization": {"mode": "Webhook"},
        "cgroupDriver": "cgroupfs",
        "failCgroupV1": False,
        "failSwapOn": False,
        "containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock",
        "imageGCHighThresholdPercent": 100,
        "evictionHard": {"nodefs.available": "0%", "nodefs.inodesFree": "0%", "imagefs.available": "0%"},
        "clusterDomain": "cluster.local",
        "serializeImagePulls": False,
        "registerNode": True,
    }, indent=2) + "\n"


def kube_proxy_config(k8s_dir, cluster_cidr):
    """KubeProxyConfiguration: iptables mode; conntrack sysctls left alone (a container cannot
    set the host's nf_conntrack_max), as kind does."""
    return json.dumps({
        "apiVersion": "kubeproxy.config.k8s.io/v1alpha1",
        "kind": "KubeProxyConfiguration",
        "clientConnection": {"kubeconfig": f"{k8s_dir}/kube-proxy.conf"},
        "mode": "iptables",
        "clusterCIDR": cluster_cidr,
        "conntrack": {"maxPerCore": 0, "tcpEstablishedTimeout": "0s", "tcpCloseWaitTimeout": "0s"},
    }, indent=2) + "\n"


def cni_config(subnet):
    """The node's pod network: a bridge with host-local addresses from the node's subnet, NAT for
    traffic leaving the node, and port mappings (CNI spec 1.0.0, containernetworking-plugins)."""
    return json.dumps({
        "cniVersion": "1.0.0",
        "name": "gpuops-lab",
        "plugins": [
            {"type": "bridge", "bridge": "cni0", "isGateway": True, "ipMasq": True, "hairpinMode": True,
             "ipam": {"type": "host-local", "ranges": [[{"subnet": subnet}]], "routes": [{"dst": "0.0.0.0/0"}]}},
            {"type": "portmap", "capabilities": {"portMappings": True}},
        ],
    }, indent=2) + "\n"


PROMETHEUS_TARGETS = "/etc/prometheus/targets/dcgm-exporter.json"
# the rule files Prometheus loads (the alerts role's plain rule file goes there) and its
# Alertmanager (Debian's prometheus-alertmanager, beside it)
PROMETHEUS_RULES = "/etc/prometheus/rules"
ALERTMANAGER = "localhost:9093"


def prometheus_config():
    """Prometheus (Debian's package) in the control-plane container: itself, and every endpoint of
    a DCGM exporter Service, from the target file prom_targets.py keeps from the API's
    EndpointSlices (Debian's build has no Kubernetes service discovery; see there); the rule files
    in PROMETHEUS_RULES, alerts to Debian's Alertmanager beside it."""
    return json.dumps({
        "global": {"scrape_interval": "10s", "evaluation_interval": "10s"},
        "rule_files": [PROMETHEUS_RULES + "/*.yml"],
        "alerting": {"alertmanagers": [{"static_configs": [{"targets": [ALERTMANAGER]}]}]},
        "scrape_configs": [
            {"job_name": "prometheus", "static_configs": [{"targets": ["localhost:9090"]}]},
            {"job_name": "dcgm-exporter", "honor_labels": False,
             "file_sd_configs": [{"files": [PROMETHEUS_TARGETS], "refresh_interval": "30s"}]},
        ],
    }, indent=2) + "\n"


PROMETHEUS_RBAC = [
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRole",
     "metadata": {"name": "gpuops-lab:prometheus"},
     "rules": [{"apiGroups": [""], "resources": ["nodes", "services", "endpoints", "pods"],
                "verbs": ["get", "list", "watch"]},
               {"apiGroups": ["discovery.k8s.io"], "resources": ["endpointslices"],
                "verbs": ["get", "list", "watch"]}]},
    {"apiVersion": "rbac.authorization.k8s.io/v1", "kind": "ClusterRoleBinding",
     "metadata": {"name": "gpuops-lab:prometheus"},
     "roleRef": {"apiGroup": "rbac.authorization.k8s.io", "kind": "ClusterRole", "name": "gpuops-lab:prometheus"},
     "subjects": [{"apiGroup": "rbac.authorization.k8s.io", "kind": "User", "name": "gpuops-lab-prometheus"}]},
]


def kwok_module_dir():
    res = run(["go", "mod", "download", "-json", "sigs.k8s.io/kwok@v0.8.0"], timeout=600)
    return json.loads(res.stdout)["Dir"]


def kwok_stages():
    """kwok's own stage definitions (its module's kustomize/stage, the set its "fast" kustomization
    lists): nodes become Ready and keep a lease, pods become Running, complete, are deleted.
    kwok 0.8 has no built-in stages; it reads them from --config files."""
    d = kwok_module_dir()
    files = [os.path.join(d, "kustomize/stage/node/fast/node-initialize.yaml"),
             os.path.join(d, "kustomize/stage/node/heartbeat-with-lease/node-heartbeat-with-lease.yaml")]
    files += sorted(glob.glob(os.path.join(d, "kustomize/stage/pod/fast/*.yaml")))
    out = {}
    for f in files:
        if not os.path.exists(f):
            raise LabError(f"kwok's stage file {f} is missing from its module")
        with open(f) as fh:
            out[os.path.basename(f)[:-5]] = fh.read()
    return out


def profile_facts(profile):
    """What a GPU node of fake-NVML PROFILE reports through NVML (asked of the fake itself, in a
    process of its own)."""
    script = (
        "import json, pynvml\n"
        "pynvml.nvmlInit()\n"
        "g = pynvml.nvmlDeviceGetHandleByIndex(0)\n"
        "print(json.dumps({'count': pynvml.nvmlDeviceGetCount(), 'name': pynvml.nvmlDeviceGetName(g),\n"
        "  'memory_mib': pynvml.nvmlDeviceGetMemoryInfo(g).total >> 20,\n"
        "  'driver': pynvml.nvmlSystemGetDriverVersion(),\n"
        "  'cuda': pynvml.nvmlSystemGetCudaDriverVersion_v2(),\n"
        "  'cc': list(pynvml.nvmlDeviceGetCudaComputeCapability(g)),\n"
        "  'pci_device_id': pynvml.nvmlDeviceGetPciInfo(g).pciDeviceId >> 16}))\n")
    python = os.path.join(os.path.dirname(os.path.dirname(LAB)), ".venv", "bin", "python")
    res = subprocess.run([WITH_GPUS, profile, "--", python, "-c", script], capture_output=True, text=True, check=False)
    if res.returncode != 0:
        raise LabError(f"fake NVML profile {profile}: {res.stderr.strip()[-1000:]}")
    return json.loads(res.stdout)


def gpu_family(major, minor):
    """The family GFD names from a compute capability (7.5 is Turing, 8.9 Ada Lovelace), as it
    labelled the lab's real nodes (hopper, ada-lovelace)."""
    if (major, minor) == (7, 5):
        return "turing"
    if (major, minor) == (8, 9):
        return "ada-lovelace"
    return {3: "kepler", 5: "maxwell", 6: "pascal", 7: "volta", 8: "ampere", 9: "hopper",
            10: "blackwell", 12: "blackwell"}.get(major, "undefined")


def synthetic_nodes(count, profile, prefix="gpuops-synthetic"):
    """COUNT Node objects that kwok manages (annotation kwok.x-k8s.io/node=fake), each a GPU node
    of PROFILE: its GPUs in capacity and allocatable, the labels GPU Feature Discovery and Node
    Feature Discovery put on such a node, and kwok's taint so that only pods that tolerate it
    land there."""
    f = profile_facts(profile)
    product = f["name"].replace(" ", "-")
    major, minor = f["cuda"] // 1000, (f["cuda"] % 1000) // 10
    drv = f["driver"].split(".")
    labels = {
        "type": "kwok",
        "gpuops.lab/node": "synthetic",
        "gpuops.lab/profile": profile,
        "feature.node.kubernetes.io/pci-10de.present": "true",
        "nvidia.com/gpu.present": "true",
        "nvidia.com/gpu.product": product,
        "nvidia.com/gpu.count": str(f["count"]),
        "nvidia.com/gpu.memory": str(f["memory_mib"]),
        "nvidia.com/gpu.family": gpu_family(*f["cc"]),
        "nvidia.com/gpu.compute.major": str(f["cc"][0]),
        "nvidia.com/gpu.compute.minor": str(f["cc"][1]),
        "nvidia.com/cuda.driver-version.full": f["driver"],
        "nvidia.com/cuda.driver-version.major": drv[0],
        "nvidia.com/cuda.driver-version.minor": drv[1] if len(drv) > 1 else "",
        "nvidia.com/cuda.driver-version.revision": drv[2] if len(drv) > 2 else "",
        "nvidia.com/cuda.runtime-version.full": f"{major}.{minor}",
        "nvidia.com/cuda.runtime-version.major": str(major),
        "nvidia.com/cuda.runtime-version.minor": str(minor),
    }
    labels = {k: v for k, v in labels.items() if v != ""}
    nodes = []
    for i in range(count):
        name = f"{prefix}-{profile}-{i}"
        machine_id = hashlib.md5(name.encode()).hexdigest()  # stable per name; not a secret
        resources = {"cpu": "64", "memory": "1Ti", "pods": "110", "nvidia.com/gpu": str(f["count"])}
        nodes.append({
            "apiVersion": "v1", "kind": "Node",
            "metadata": {"name": name, "annotations": {"kwok.x-k8s.io/node": "fake"},
                         "labels": dict(labels, **{"kubernetes.io/hostname": name})},
            "spec": {"taints": [{"key": "kwok.x-k8s.io/node", "value": "fake", "effect": "NoSchedule"}]},
            "status": {"capacity": resources, "allocatable": resources,
                       # every field NodeSystemInfo requires; kwok reports itself as the kubelet
                       "nodeInfo": {"architecture": "amd64", "operatingSystem": "linux",
                                    "kubeletVersion": "kwok-v0.8.0", "kubeProxyVersion": "",
                                    "kernelVersion": "kwok", "osImage": "kwok synthetic node",
                                    "containerRuntimeVersion": "kwok", "machineID": machine_id,
                                    "systemUUID": str(uuid.UUID(machine_id)), "bootID": ""}},
        })
    return nodes

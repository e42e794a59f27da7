# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import re

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils.k8s import objects as k8s_objects

DIGEST = "sha256:" + "0123456789abcdef" * 4
PLUGIN = "nvcr.io/nvidia/k8s-device-plugin:v0.20.0"


# ---- split_image ---------------------------------------------------------------------------------

SPLITS = [
    # (id, image, registry, repository, tag, digest)
    ("nvcr", PLUGIN, "nvcr.io", "nvidia/k8s-device-plugin", "v0.20.0", None),
    ("registry-k8s-io", "registry.k8s.io/nfd/node-feature-discovery:v0.19.0", "registry.k8s.io",
     "nfd/node-feature-discovery", "v0.19.0", None),
    ("dcgm-tag-with-dots-and-dashes", "nvcr.io/nvidia/k8s/dcgm-exporter:4.6.0-4.8.3-distroless", "nvcr.io",
     "nvidia/k8s/dcgm-exporter", "4.6.0-4.8.3-distroless", None),
    ("registry-with-port", "mirror.example:5000/nvidia/k8s-device-plugin:v0.20.0", "mirror.example:5000",
     "nvidia/k8s-device-plugin", "v0.20.0", None),
    ("localhost", "localhost/lab/cuda-vectoradd:1", "localhost", "lab/cuda-vectoradd", "1", None),
    ("localhost-with-port", "localhost:5000/lab/cuda-vectoradd:1", "localhost:5000", "lab/cuda-vectoradd", "1",
     None),
    # the first element is a registry only with a dot, a colon or as localhost (as container tools read it)
    ("no-registry-one-element", "busybox:1.36", None, "busybox", "1.36", None),
    ("no-registry-two-elements", "library/busybox:1.36", None, "library/busybox", "1.36", None),
    ("digest-only", "nvcr.io/nvidia/k8s-device-plugin@" + DIGEST, "nvcr.io", "nvidia/k8s-device-plugin", None,
     DIGEST),
    ("tag-and-digest", PLUGIN + "@" + DIGEST, "nvcr.io", "nvidia/k8s-device-plugin", "v0.20.0", DIGEST),
    ("port-and-digest", "mirror.example:5000/x@" + DIGEST, "mirror.example:5000", "x", None, DIGEST),
    ("surrounding-spaces", "  " + PLUGIN + "\n", "nvcr.io", "nvidia/k8s-device-plugin", "v0.20.0", None),
]


@pytest.mark.parametrize("image, registry, repository, tag, digest", [case[1:] for case in SPLITS],
                         ids=[case[0] for case in SPLITS])
def test_split_image(image, registry, repository, tag, digest):
    assert k8s_objects.split_image(image) == {"registry": registry, "repository": repository, "tag": tag,
                                              "digest": digest}


REFUSED_IMAGES = [
    # (id, image, the whole message, as a regular expression)
    ("empty", "", r"^an image must be a non-empty string such as nvcr\.io/nvidia/k8s-device-plugin:v0\.20\.0$"),
    ("blank", "   ", r"^an image must be a non-empty string"),
    ("none", None, r"^an image must be a non-empty string"),
    ("not-a-string", 42, r"^an image must be a non-empty string"),
    ("no-tag-no-digest", "nvcr.io/nvidia/k8s-device-plugin",
     r"^image 'nvcr\.io/nvidia/k8s-device-plugin' has neither a tag nor a digest: pin one "
     r"\(:v1\.2\.3 or @sha256:\.\.\.\)$"),
    # the port is not a tag
    ("port-but-no-tag", "mirror.example:5000/nvidia/k8s-device-plugin",
     r"^image 'mirror\.example:5000/nvidia/k8s-device-plugin' has neither a tag nor a digest"),
    ("short-digest", "nvcr.io/nvidia/x@sha256:abc",
     r"^image 'nvcr\.io/nvidia/x@sha256:abc': the digest must be sha256:<64 hex digits>, not 'sha256:abc'$"),
    ("upper-case-digest", "nvcr.io/nvidia/x@" + DIGEST.upper().replace("SHA256", "sha256"),
     r"the digest must be sha256:<64 hex digits>"),
    ("other-algorithm", "nvcr.io/nvidia/x@md5:" + "0" * 32, r"the digest must be sha256:<64 hex digits>, not 'md5:"),
    ("empty-digest", "nvcr.io/nvidia/x:v1@", r"the digest must be sha256:<64 hex digits>, not ''$"),
    ("empty-tag", "nvcr.io/nvidia/x:", r"^image 'nvcr\.io/nvidia/x:': '' is not a valid tag$"),
    ("tag-starting-with-dash", "nvcr.io/nvidia/x:-v1", r"^image 'nvcr\.io/nvidia/x:-v1': '-v1' is not a valid tag$"),
    ("tag-too-long", "nvcr.io/nvidia/x:" + "v" * 129, r"is not a valid tag$"),
    ("upper-case-repository", "nvcr.io/NVIDIA/x:v1",
     r"^image 'nvcr\.io/NVIDIA/x:v1': 'NVIDIA/x' is not a valid repository path \(lower case, / separated\)$"),
    ("empty-path-element", "nvcr.io/nvidia//x:v1", r"'nvidia//x' is not a valid repository path"),
    ("registry-only", "nvcr.io/:v1", r"'' is not a valid repository path"),
]


@pytest.mark.parametrize("image, message", [case[1:] for case in REFUSED_IMAGES],
                         ids=[case[0] for case in REFUSED_IMAGES])
def test_split_image_refuses(image, message):
    with pytest.raises(ValueError, match=message):
        k8s_objects.split_image(image)


def test_tag_of_128_characters_is_accepted():
    assert k8s_objects.split_image("nvcr.io/nvidia/x:" + "v" * 128)["tag"] == "v" * 128


# ---- image_ref: the registry rewrite of air-gapped mirrors ---------------------------------------

REFS = [
    # (id, image, registry, expected)
    ("no-registry-given", PLUGIN, None, PLUGIN),
    ("empty-registry", PLUGIN, "", PLUGIN),
    ("blank-registry", PLUGIN, "   ", PLUGIN),
    ("mirror", PLUGIN, "mirror.example", "mirror.example/nvidia/k8s-device-plugin:v0.20.0"),
    ("mirror-with-port", PLUGIN, "mirror.example:5000", "mirror.example:5000/nvidia/k8s-device-plugin:v0.20.0"),
    ("mirror-with-path-prefix", PLUGIN, "mirror.example/nvcr", "mirror.example/nvcr/nvidia/k8s-device-plugin:v0.20.0"),
    ("mirror-with-port-and-path-prefix", PLUGIN, "mirror.example:5000/cache/nvcr",
     "mirror.example:5000/cache/nvcr/nvidia/k8s-device-plugin:v0.20.0"),
    ("trailing-slash", PLUGIN, "mirror.example:5000/", "mirror.example:5000/nvidia/k8s-device-plugin:v0.20.0"),
    ("spaces-around-registry", PLUGIN, " mirror.example:5000 ", "mirror.example:5000/nvidia/k8s-device-plugin:v0.20.0"),
    ("other-registry-same-rule", "registry.k8s.io/nfd/node-feature-discovery:v0.19.0", "mirror.example:5000",
     "mirror.example:5000/nfd/node-feature-discovery:v0.19.0"),
    ("image-without-registry", "busybox:1.36", "mirror.example:5000", "mirror.example:5000/busybox:1.36"),
    ("image-without-registry-kept", "library/busybox:1.36", None, "library/busybox:1.36"),
    ("localhost-rewritten", "localhost/lab/cuda-vectoradd:1", "mirror.example:5000",
     "mirror.example:5000/lab/cuda-vectoradd:1"),
    ("localhost-kept", "localhost:5000/lab/cuda-vectoradd:1", None, "localhost:5000/lab/cuda-vectoradd:1"),
    ("mirror-is-localhost", PLUGIN, "localhost:5000", "localhost:5000/nvidia/k8s-device-plugin:v0.20.0"),
    ("digest-kept", "nvcr.io/nvidia/k8s-device-plugin@" + DIGEST, "mirror.example:5000",
     "mirror.example:5000/nvidia/k8s-device-plugin@" + DIGEST),
    ("tag-and-digest-kept", PLUGIN + "@" + DIGEST, "mirror.example/nvcr",
     "mirror.example/nvcr/nvidia/k8s-device-plugin:v0.20.0@" + DIGEST),
    ("spaces-around-image", " " + PLUGIN + " ", None, PLUGIN),
]


@pytest.mark.parametrize("image, registry, expected", [case[1:] for case in REFS], ids=[case[0] for case in REFS])
def test_image_ref(image, registry, expected):
    assert k8s_objects.image_ref(image, registry) == expected


def test_image_ref_is_stable():
    """A reference rewritten to a mirror without a path prefix, rewritten again, does not change."""
    once = k8s_objects.image_ref(PLUGIN, "mirror.example:5000")
    assert k8s_objects.image_ref(once, "mirror.example:5000") == once


@pytest.mark.parametrize("image, message", [
    ("nvcr.io/nvidia/k8s-device-plugin", r"has neither a tag nor a digest: pin one"),
    ("nvcr.io/nvidia/x@sha256:abc", r"the digest must be sha256:<64 hex digits>"),
    ("", r"^an image must be a non-empty string"),
], ids=["no-tag", "bad-digest", "empty"])
def test_image_ref_refuses_even_with_a_mirror(image, message):
    with pytest.raises(ValueError, match=message):
        k8s_objects.image_ref(image, "mirror.example:5000")


# ---- render_name: the files of render mode, in the order kubectl apply -f DIR needs -------------

def obj(kind, name, namespace=None):
    metadata = {"name": name}
    if namespace:
        metadata["namespace"] = namespace
    return {"apiVersion": "v1", "kind": kind, "metadata": metadata}


NAMES = [
    # (id, object, file name)
    ("namespace", obj("Namespace", "gpuops-nvidia"), "00-namespace-gpuops-nvidia.yaml"),
    ("crd", obj("CustomResourceDefinition", "nodefeatures.nfd.k8s-sigs.io"),
     "01-customresourcedefinition-nodefeatures.nfd.k8s-sigs.io.yaml"),
    ("priority-class", obj("PriorityClass", "gpu-critical"), "02-priorityclass-gpu-critical.yaml"),
    ("runtime-class", obj("RuntimeClass", "nvidia"), "02-runtimeclass-nvidia.yaml"),
    ("service-account-namespaced", obj("ServiceAccount", "nvidia-device-plugin", "gpuops-nvidia"),
     "10-serviceaccount-gpuops-nvidia-nvidia-device-plugin.yaml"),
    ("cluster-role-colon-replaced", obj("ClusterRole", "gpuops-nvidia:nfd-master"),
     "11-clusterrole-gpuops-nvidia_nfd-master.yaml"),
    ("cluster-role-binding", obj("ClusterRoleBinding", "gpuops-nvidia:dcgm-exporter"),
     "12-clusterrolebinding-gpuops-nvidia_dcgm-exporter.yaml"),
    ("role", obj("Role", "nfd-worker", "gpuops-nvidia"), "13-role-gpuops-nvidia-nfd-worker.yaml"),
    ("role-binding", obj("RoleBinding", "nfd-worker", "gpuops-nvidia"), "14-rolebinding-gpuops-nvidia-nfd-worker.yaml"),
    ("config-map", obj("ConfigMap", "dcgm-exporter-metrics", "gpuops-nvidia"),
     "20-configmap-gpuops-nvidia-dcgm-exporter-metrics.yaml"),
    ("secret", obj("Secret", "ngc", "gpuops-nvidia"), "20-secret-gpuops-nvidia-ngc.yaml"),
    ("service", obj("Service", "dcgm-exporter", "gpuops-nvidia"), "30-service-gpuops-nvidia-dcgm-exporter.yaml"),
    ("deployment", obj("Deployment", "nfd-master", "gpuops-nvidia"), "40-deployment-gpuops-nvidia-nfd-master.yaml"),
    ("daemon-set", obj("DaemonSet", "nvidia-device-plugin", "gpuops-nvidia"),
     "40-daemonset-gpuops-nvidia-nvidia-device-plugin.yaml"),
    ("service-monitor", obj("ServiceMonitor", "dcgm-exporter", "gpuops-nvidia"),
     "50-servicemonitor-gpuops-nvidia-dcgm-exporter.yaml"),
    ("unknown-kind-last", obj("NodeFeatureRule", "gpu", None), "60-nodefeaturerule-gpu.yaml"),
    ("no-kind", {"metadata": {"name": "x"}}, "60-object-x.yaml"),
    ("no-metadata", {"kind": "ConfigMap"}, "20-configmap-unnamed.yaml"),
    ("odd-characters-replaced", obj("ConfigMap", "a b/c@d", "ns"), "20-configmap-ns-a_b_c_d.yaml"),
]


@pytest.mark.parametrize("item, expected", [case[1:] for case in NAMES], ids=[case[0] for case in NAMES])
def test_render_name(item, expected):
    assert k8s_objects.render_name(item) == expected


def test_render_names_sort_in_dependency_order():
    ordered = ["Namespace", "CustomResourceDefinition", "RuntimeClass", "ServiceAccount", "ClusterRole",
               "ClusterRoleBinding", "Role", "RoleBinding", "ConfigMap", "Service", "DaemonSet", "ServiceMonitor",
               "SomethingElse"]
    # names chosen so that alphabetical order of kind or name would put them differently
    items = [obj(kind, "z" * (len(ordered) - position), "a-namespace") for position, kind in enumerate(ordered)]
    files = sorted(k8s_objects.render_name(item) for item in reversed(items))
    assert [re.match(r"^\d\d-([a-z]+)-", name).group(1) for name in files] == [kind.lower() for kind in ordered]


def test_render_name_ranks_what_others_need_first():
    rank = k8s_objects.RANK
    assert rank["Namespace"] < rank["CustomResourceDefinition"] < rank["ServiceAccount"]
    assert rank["ServiceAccount"] < rank["ClusterRole"] < rank["ClusterRoleBinding"]
    assert rank["Role"] < rank["RoleBinding"] < rank["ConfigMap"] < rank["Service"] < rank["DaemonSet"]
    assert rank["Deployment"] == rank["DaemonSet"] < rank["ServiceMonitor"] < k8s_objects.DEFAULT_RANK


# ---- rollout_problems / pods_not_ready: why a workload is not ready, per node --------------------

def pod(name, node=None, phase="Running", ready=True, containers=None, init=None, conditions=None):
    """A pod as k8s_info returns it; a Ready condition follows READY unless CONDITIONS is given."""
    status = {"phase": phase}
    if conditions is None:
        conditions = [{"type": "Ready", "status": "True" if ready else "False"}]
    status["conditions"] = conditions
    if containers is not None:
        status["containerStatuses"] = containers
    if init is not None:
        status["initContainerStatuses"] = init
    spec = {"nodeName": node} if node else {}
    return {"metadata": {"name": name, "namespace": "gpuops-nvidia"}, "spec": spec, "status": status}


def running(name="nvidia-device-plugin", ready=True):
    return {"name": name, "ready": ready, "restartCount": 0,
            "state": {"running": {"startedAt": "2026-01-01T00:00:00Z"}}}


CRASHLOOP = {
    "name": "nvidia-device-plugin", "ready": False, "restartCount": 5,
    "state": {"waiting": {"reason": "CrashLoopBackOff",
                          "message": "back-off 5m0s restarting failed container=nvidia-device-plugin"}},
    "lastState": {"terminated": {"exitCode": 1, "reason": "Error",
                                 "message": "  E0101 failed to initialize NVML: ERROR_LIBRARY_NOT_FOUND\n"}},
}
UNSCHEDULABLE = [
    {"type": "PodScheduled", "status": "False", "reason": "Unschedulable",
     "message": "0/3 nodes are available: 1 Insufficient memory, 2 node(s) didn't match Pod's node affinity."},
]
CONTAINER_CREATING = {"name": "exporter", "ready": False, "restartCount": 0,
                      "state": {"waiting": {"reason": "ContainerCreating"}}}


def warning(pod_name, reason, message, stamp=None, event_time=None, kind="Warning"):
    event = {"type": kind, "reason": reason, "message": message,
             "involvedObject": {"kind": "Pod", "name": pod_name, "namespace": "gpuops-nvidia"}}
    if stamp:
        event["lastTimestamp"] = stamp
    if event_time:
        event["eventTime"] = event_time
    return event


REASONS = [
    # (id, pod, the reason after "<node>: pod <name> ")
    ("crashloop-with-last-termination-message", pod("p", "n", ready=False, containers=[CRASHLOOP]),
     "Running; container nvidia-device-plugin waiting: CrashLoopBackOff (back-off 5m0s restarting failed "
     "container=nvidia-device-plugin), 5 restarts; last exit 1: E0101 failed to initialize NVML: "
     "ERROR_LIBRARY_NOT_FOUND"),
    ("pending-unschedulable", pod("p", "n", phase="Pending", conditions=UNSCHEDULABLE),
     "Pending; PodScheduled: 0/3 nodes are available: 1 Insufficient memory, 2 node(s) didn't match Pod's node "
     "affinity."),
    ("waiting-without-message-or-restarts",
     pod("p", "n", phase="Pending", ready=False, containers=[CONTAINER_CREATING]),
     "Pending; container exporter waiting: ContainerCreating"),
    ("init-container-first",
     pod("p", "n", phase="Pending", ready=False, containers=[CONTAINER_CREATING],
         init=[{"name": "config-manager-init", "ready": False, "restartCount": 2,
                "state": {"waiting": {"reason": "CrashLoopBackOff"}}}]),
     "Pending; container config-manager-init waiting: CrashLoopBackOff, 2 restarts"),
    ("image-pull",
     pod("p", "n", phase="Pending", ready=False,
         containers=[{"name": "exporter", "ready": False, "restartCount": 0,
                      "state": {"waiting": {"reason": "ImagePullBackOff",
                                            "message": "Back-off pulling image \"mirror.example:5000/x:1\""}}}]),
     "Pending; container exporter waiting: ImagePullBackOff (Back-off pulling image \"mirror.example:5000/x:1\")"),
    ("terminated-non-zero",
     pod("p", "n", phase="Failed", ready=False,
         containers=[{"name": "gfd", "ready": False, "state": {"terminated": {"exitCode": 2, "reason": "Error"}}}]),
     "Failed; container gfd exited 2 (Error)"),
    ("running-not-ready", pod("p", "n", ready=False, containers=[running("exporter", ready=False)]),
     "Running; container exporter not ready"),
    ("condition-message", pod("p", "n", ready=False, containers=[running(ready=True)],
                              conditions=[{"type": "Ready", "status": "False", "message": "readiness gate"}]),
     "Running; Ready: readiness gate"),
    ("no-status", {"metadata": {"name": "p"}, "spec": {"nodeName": "n"}}, "Unknown"),
]


@pytest.mark.parametrize("item, reason", [case[1:] for case in REASONS], ids=[case[0] for case in REASONS])
def test_rollout_problems_names_the_reason(item, reason):
    assert k8s_objects.rollout_problems("nvidia-device-plugin", [item], [], ["n"]) == ["n: pod p %s" % reason]


@pytest.mark.parametrize("item, reason", [case[1:] for case in REASONS], ids=[case[0] for case in REASONS])
def test_pods_not_ready_names_the_reason(item, reason):
    assert k8s_objects.pods_not_ready([item]) == ["p: %s" % reason]


def test_rollout_problems_per_node():
    pods = [
        pod("dp-a", "node-a", ready=False, containers=[CRASHLOOP]),
        pod("dp-b", "node-b", containers=[running()]),                       # ready: left out
        pod("dp-c", "node-c", phase="Pending", conditions=UNSCHEDULABLE),
    ]
    lines = k8s_objects.rollout_problems("nvidia-device-plugin", pods, [], ["node-a", "node-b", "node-c", "node-d"])
    assert len(lines) == 3
    assert lines[0].startswith("node-a: pod dp-a Running; container nvidia-device-plugin waiting: CrashLoopBackOff")
    assert lines[0].endswith("; last exit 1: E0101 failed to initialize NVML: ERROR_LIBRARY_NOT_FOUND")
    assert lines[1].startswith("node-c: pod dp-c Pending; PodScheduled: 0/3 nodes are available")
    assert lines[2] == ("node-d: no nvidia-device-plugin pod (check the node's labels, taints and the DaemonSet's "
                        "nodeSelector and tolerations)")


def test_rollout_problems_all_ready_is_empty():
    pods = [pod("dp-a", "node-a", containers=[running()]), pod("dp-b", "node-b", containers=[running()])]
    assert k8s_objects.rollout_problems("nvidia-device-plugin", pods, [], ["node-a", "node-b"]) == []


def test_rollout_problems_without_nodes_uses_the_pods_nodes_in_order():
    pods = [pod("dp-b", "node-b", ready=False, containers=[CRASHLOOP]),
            pod("dp-a", "node-a", ready=False, containers=[CRASHLOOP]),
            pod("unbound", None, phase="Pending", conditions=UNSCHEDULABLE)]   # no node: not attributable
    lines = k8s_objects.rollout_problems("nvidia-device-plugin", pods, [], [])
    assert [line.split(":", 1)[0] for line in lines] == ["node-a", "node-b"]


@pytest.mark.parametrize("pods, events, nodes", [(None, None, None), ([], [], [])], ids=["none", "empty"])
def test_rollout_problems_of_nothing(pods, events, nodes):
    assert k8s_objects.rollout_problems("dcgm-exporter", pods, events, nodes) == []


def test_rollout_problems_several_pods_on_one_node():
    pods = [pod("old", "node-a", ready=False, containers=[CRASHLOOP]),
            pod("new", "node-a", phase="Pending", ready=False, containers=[CONTAINER_CREATING])]
    lines = k8s_objects.rollout_problems("dcgm-exporter", pods, [], ["node-a"])
    assert [line.split(" ")[2] for line in lines] == ["old", "new"]


EVENTS = [
    # (id, events of the namespace, the suffix the pod's line ends with, or None for no event part)
    ("newest-warning-appended",
     [warning("dp-a", "BackOff", "older back-off", stamp="2026-01-01T10:00:00Z"),
      warning("dp-a", "Failed", "Error: failed to create containerd task", stamp="2026-01-01T10:05:00Z"),
      warning("dp-a", "BackOff", "middle back-off", stamp="2026-01-01T10:02:00Z")],
     "; event Failed: Error: failed to create containerd task"),
    ("event-time-when-no-last-timestamp",
     [warning("dp-a", "Old", "old", event_time="2026-01-01T09:00:00.000000Z"),
      warning("dp-a", "New", "new", event_time="2026-01-01T11:00:00.000000Z")],
     "; event New: new"),
    ("normal-events-ignored",
     [warning("dp-a", "BackOff", "the warning", stamp="2026-01-01T10:00:00Z"),
      warning("dp-a", "Pulled", "newer but normal", stamp="2026-01-01T12:00:00Z", kind="Normal")],
     "; event BackOff: the warning"),
    ("other-pods-events-ignored",
     [warning("dp-other", "FailedMount", "not this pod", stamp="2026-01-01T12:00:00Z")],
     None),
    ("no-events", [], None),
    ("long-message-cut", [warning("dp-a", "Failed", "x" * 500, stamp="2026-01-01T10:00:00Z")],
     "; event Failed: " + "x" * 300),
    ("event-without-message", [warning("dp-a", "Failed", None, stamp="2026-01-01T10:00:00Z")], "; event Failed: "),
]


@pytest.mark.parametrize("events, suffix", [case[1:] for case in EVENTS], ids=[case[0] for case in EVENTS])
def test_rollout_problems_appends_the_newest_warning_event(events, suffix):
    base = "node-a: pod dp-a Pending; container exporter waiting: ContainerCreating"
    pods = [pod("dp-a", "node-a", phase="Pending", ready=False, containers=[CONTAINER_CREATING])]
    assert k8s_objects.rollout_problems("dcgm-exporter", pods, events, ["node-a"]) == [base + (suffix or "")]


def test_rollout_problems_no_event_for_a_ready_pod():
    pods = [pod("dp-a", "node-a", containers=[running()])]
    events = [warning("dp-a", "BackOff", "earlier trouble", stamp="2026-01-01T10:00:00Z")]
    assert k8s_objects.rollout_problems("nvidia-device-plugin", pods, events, ["node-a"]) == []


def test_rollout_problems_cuts_long_messages():
    crash = dict(CRASHLOOP, state={"waiting": {"reason": "CrashLoopBackOff", "message": "w" * 1000}},
                 lastState={"terminated": {"exitCode": 1, "message": "head " + "t" * 1000 + " tail\n"}})
    line = k8s_objects.rollout_problems("x", [pod("p", "n", ready=False, containers=[crash])], [], ["n"])[0]
    assert "(" + "w" * 300 + ")" in line and "w" * 301 not in line
    # the end of the termination message is kept: that is where the error is
    assert line.endswith(": " + ("t" * 1000 + " tail")[-400:])


READY_CASES = [
    # (id, pod, ready)
    ("running-and-ready", pod("p", "n", containers=[running()]), True),
    ("running-not-ready", pod("p", "n", ready=False, containers=[running(ready=False)]), False),
    ("pending-even-if-ready-condition", pod("p", "n", phase="Pending"), False),
    ("succeeded", pod("p", "n", phase="Succeeded"), False),
    ("running-without-conditions", pod("p", "n", conditions=[]), False),
    ("no-status", {"metadata": {"name": "p"}}, False),
]


@pytest.mark.parametrize("item, ready", [case[1:] for case in READY_CASES], ids=[case[0] for case in READY_CASES])
def test_pods_not_ready_omits_ready_pods(item, ready):
    assert (k8s_objects.pods_not_ready([item]) == []) is ready


def test_pods_not_ready_keeps_the_order_and_names():
    pods = [pod("b", "n", ready=False, containers=[CRASHLOOP]), pod("ok", "n", containers=[running()]),
            pod("a", None, phase="Pending", conditions=UNSCHEDULABLE)]
    assert [line.split(":", 1)[0] for line in k8s_objects.pods_not_ready(pods)] == ["b", "a"]


@pytest.mark.parametrize("pods", [None, []], ids=["none", "empty"])
def test_pods_not_ready_of_nothing(pods):
    assert k8s_objects.pods_not_ready(pods) == []


# ---- selector --------------------------------------------------------------------------------------

SELECTORS = [
    # (id, matchLabels, expected)
    ("one", {"app.kubernetes.io/name": "nvidia-device-plugin"}, ["app.kubernetes.io/name=nvidia-device-plugin"]),
    ("sorted", {"b": "2", "a": "1", "nvidia.com/gpu.deploy.dcgm-exporter": "true"},
     ["a=1", "b=2", "nvidia.com/gpu.deploy.dcgm-exporter=true"]),
    ("empty", {}, []),
    ("none", None, []),
]


@pytest.mark.parametrize("labels, expected", [case[1:] for case in SELECTORS], ids=[case[0] for case in SELECTORS])
def test_selector(labels, expected):
    assert k8s_objects.selector(labels) == expected


# ---- registry_problem / image_problem: the registry mirror and the image variables ----------------

REGISTRY_PROBLEMS = [
    # (id, gpuops_image_registry, the whole problem as a regular expression, or None)
    ("none", None, None),
    ("empty", "", None),
    ("host", "mirror.example", None),
    ("host-port-path", "mirror.example:5000/nvidia", None),
    ("host-port-deeper-path", "registry.corp.example:443/mirrors/nvcr.io", None),
    ("trailing-slash", "mirror.example:5000/nvidia/", None),
    ("surrounding-spaces", " mirror.example:5000 ", None),
    ("localhost-port", "localhost:5000", None),
    ("ip-port", "10.0.0.5:5000", None),
    ("https-scheme", "https://mirror.example:5000",
     r"^'https://mirror\.example:5000' has a scheme; give the registry as host\[:port\]\[/path\], "
     r"e\.g\. mirror\.example:5000/nvidia$"),
    ("oci-scheme", "oci://mirror.example/nvidia", r"^'oci://mirror\.example/nvidia' has a scheme"),
    ("upper-case", "Mirror.Example:5000",
     r"^'Mirror\.Example:5000' is not a registry host\[:port\]\[/path\] in lower case without spaces, "
     r"e\.g\. mirror\.example:5000/nvidia$"),
    ("upper-case-path", "mirror.example/NVIDIA", r"is not a registry host\[:port\]\[/path\] in lower case"),
    ("inner-space", "mirror.example /nvidia", r"^'mirror\.example /nvidia' is not a registry host"),
    ("space-in-host", "my mirror:5000", r"without spaces"),
    ("port-not-a-number", "mirror.example:http", r"is not a registry host"),
    ("port-too-long", "mirror.example:500000", r"is not a registry host"),
    ("leading-dash", "-mirror.example", r"is not a registry host"),
    ("empty-path-element", "mirror.example//nvidia", r"is not a registry host"),
    ("tag-like", "mirror.example/nvidia:v1", r"is not a registry host"),
]


@pytest.mark.parametrize("registry, message", [case[1:] for case in REGISTRY_PROBLEMS],
                         ids=[case[0] for case in REGISTRY_PROBLEMS])
def test_registry_problem(registry, message):
    problem = k8s_objects.registry_problem(registry)
    if message is None:
        assert problem is None
    else:
        assert re.search(message, problem), problem


IMAGE_PROBLEMS = [
    # (id, image, registry, variable name, the whole problem as a regular expression, or None)
    ("fine", PLUGIN, None, "device_plugin_image", None),
    ("fine-with-mirror", PLUGIN, "mirror.example:5000/nvidia", "device_plugin_image", None),
    ("no-tag", "nvcr.io/nvidia/k8s-device-plugin", None, "device_plugin_image",
     r"^device_plugin_image: image 'nvcr\.io/nvidia/k8s-device-plugin' has neither a tag nor a digest"),
    ("upper-case-repository", "nvcr.io/NVIDIA/dcgm-exporter:4.6.0", None, "dcgm_exporter_image",
     r"^dcgm_exporter_image: image 'nvcr\.io/NVIDIA/dcgm-exporter:4\.6\.0': 'NVIDIA/dcgm-exporter' is not a valid "
     r"repository path"),
    ("empty", "", None, "validate_cuda_image", r"^validate_cuda_image: an image must be a non-empty string"),
    ("space-in-image", "nvcr.io/nvidia/k8s-device-plugin: v0.20.0", None, "device_plugin_image",
     r"^device_plugin_image: image .* is not a valid tag$"),
    # the registry's problem comes first and is named by its own variable, whatever the image
    ("scheme-refused", PLUGIN, "https://mirror.example", "device_plugin_image",
     r"^gpuops_image_registry: 'https://mirror\.example' has a scheme; give the registry as host\[:port\]\[/path\]"),
    ("upper-case-registry", "nvcr.io/nvidia/x", "Mirror.Example", "device_plugin_image",
     r"^gpuops_image_registry: 'Mirror\.Example' is not a registry host\[:port\]\[/path\] in lower case"),
    ("space-in-registry", PLUGIN, "mirror example", "device_plugin_image",
     r"^gpuops_image_registry: 'mirror example' is not a registry host"),
    ("default-name", "busybox", None, "image", r"^image: image 'busybox' has neither a tag nor a digest"),
]


@pytest.mark.parametrize("image, registry, name, message", [case[1:] for case in IMAGE_PROBLEMS],
                         ids=[case[0] for case in IMAGE_PROBLEMS])
def test_image_problem(image, registry, name, message):
    problem = k8s_objects.image_problem(image, registry, name)
    if message is None:
        assert problem is None
    else:
        assert re.search(message, problem), problem


def test_image_problem_default_name_and_registry():
    assert k8s_objects.image_problem(PLUGIN) is None
    assert k8s_objects.image_problem("x").startswith("image: ")


def test_image_ref_refuses_a_bad_registry():
    with pytest.raises(ValueError, match=r"^'https://mirror\.example' has a scheme"):
        k8s_objects.image_ref(PLUGIN, "https://mirror.example")


# ---- nfd_cleanup_patch: what Node Feature Discovery left on a node --------------------------------

def nfd_node(labels=None, annotations=None):
    base_labels = {"kubernetes.io/hostname": "gpu-1", "kubernetes.io/os": "linux"}
    base_annotations = {"node.alpha.kubernetes.io/ttl": "0",
                        "volumes.kubernetes.io/controller-managed-attach-detach": "true"}
    return {"apiVersion": "v1", "kind": "Node",
            "metadata": {"name": "gpu-1", "labels": dict(base_labels, **(labels or {})),
                         "annotations": dict(base_annotations, **(annotations or {}))}}


NFD_LABELS = {
    "feature.node.kubernetes.io/cpu-cpuid.AVX512F": "true",
    "feature.node.kubernetes.io/kernel-version.full": "6.1.0-37-amd64",
    "feature.node.kubernetes.io/pci-10de.present": "true",
    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
}
NFD_ANNOTATIONS = {
    "nfd.node.kubernetes.io/feature-labels":
        "cpu-cpuid.AVX512F,kernel-version.full,pci-10de.present,nvidia.com/gpu.product",
    "nfd.node.kubernetes.io/extended-resources": "",
    "nfd.node.kubernetes.io/worker.version": "v0.17.3",
}


def remove(kind, escaped):
    return {"op": "remove", "path": f"/metadata/{kind}/{escaped}"}


NFD_ANNOTATION_OPS = [remove("annotations", "nfd.node.kubernetes.io~1extended-resources"),
                      remove("annotations", "nfd.node.kubernetes.io~1feature-labels"),
                      remove("annotations", "nfd.node.kubernetes.io~1worker.version")]
NFD_LABEL_OPS = [remove("labels", "feature.node.kubernetes.io~1cpu-cpuid.AVX512F"),
                 remove("labels", "feature.node.kubernetes.io~1kernel-version.full"),
                 remove("labels", "feature.node.kubernetes.io~1pci-10de.present"),
                 remove("labels", "nvidia.com~1gpu.product")]

NFD_CLEANUPS = [
    # (id, node, ops)
    # names without a namespace are NFD's feature.node.kubernetes.io ones; others (GFD's, through
    # NFD's master) as listed; labels in the listed order, then every NFD annotation in name order
    ("listed-labels-and-annotations", nfd_node(NFD_LABELS, NFD_ANNOTATIONS), NFD_LABEL_OPS + NFD_ANNOTATION_OPS),
    ("listed-label-already-gone",
     nfd_node({k: v for k, v in NFD_LABELS.items() if k != "feature.node.kubernetes.io/kernel-version.full"},
              NFD_ANNOTATIONS),
     [op for op in NFD_LABEL_OPS if "kernel-version" not in op["path"]] + NFD_ANNOTATION_OPS),
    ("unlisted-labels-kept",
     nfd_node(dict(NFD_LABELS, **{"feature.node.kubernetes.io/custom": "true", "nvidia.com/gpu.deploy.gfd": "true"}),
              NFD_ANNOTATIONS),
     NFD_LABEL_OPS + NFD_ANNOTATION_OPS),
    ("spaces-and-empty-names-in-the-list",
     nfd_node(NFD_LABELS, {"nfd.node.kubernetes.io/feature-labels": " pci-10de.present, ,nvidia.com/gpu.product,"}),
     [remove("labels", "feature.node.kubernetes.io~1pci-10de.present"), remove("labels", "nvidia.com~1gpu.product"),
      remove("annotations", "nfd.node.kubernetes.io~1feature-labels")]),
    ("annotations-without-feature-labels", nfd_node(NFD_LABELS, {"nfd.node.kubernetes.io/worker.version": "v0.17.3"}),
     [remove("annotations", "nfd.node.kubernetes.io~1worker.version")]),
    ("empty-feature-labels", nfd_node(NFD_LABELS, {"nfd.node.kubernetes.io/feature-labels": ""}),
     [remove("annotations", "nfd.node.kubernetes.io~1feature-labels")]),
    # RFC 6901: ~ as ~0 (before / as ~1)
    ("tilde-escaped",
     nfd_node({"example.com/a~b": "1"},
              {"nfd.node.kubernetes.io/feature-labels": "example.com/a~b", "nfd.node.kubernetes.io/x~y": "z"}),
     [remove("labels", "example.com~1a~0b"), remove("annotations", "nfd.node.kubernetes.io~1feature-labels"),
      remove("annotations", "nfd.node.kubernetes.io~1x~0y")]),
    ("no-nfd-annotations", nfd_node(NFD_LABELS), []),
    ("other-annotations-look-alike", nfd_node(NFD_LABELS, {"nfd.node.kubernetes.io.example/x": "1",
                                                           "node.kubernetes.io/nfd": "1"}), []),
    ("no-labels-or-annotations", {"metadata": {"name": "gpu-1"}}, []),
    ("no-metadata", {}, []),
]


@pytest.mark.parametrize("node, ops", [case[1:] for case in NFD_CLEANUPS], ids=[case[0] for case in NFD_CLEANUPS])
def test_nfd_cleanup_patch(node, ops):
    assert k8s_objects.nfd_cleanup_patch(node) == ops


def test_nfd_cleanup_patch_leaves_the_rest():
    """Applied, the patch leaves the node's other labels and annotations as they were."""
    node = nfd_node(dict(NFD_LABELS, **{"nvidia.com/gpu.deploy.dcgm-exporter": "true"}), NFD_ANNOTATIONS)
    after = {"labels": dict(node["metadata"]["labels"]), "annotations": dict(node["metadata"]["annotations"])}
    for op in k8s_objects.nfd_cleanup_patch(node):
        kind, key = op["path"].split("/")[2:4]
        del after[kind][key.replace("~1", "/").replace("~0", "~")]
    assert after == {"labels": {"kubernetes.io/hostname": "gpu-1", "kubernetes.io/os": "linux",
                                "nvidia.com/gpu.deploy.dcgm-exporter": "true"},
                     "annotations": {"node.alpha.kubernetes.io/ttl": "0",
                                     "volumes.kubernetes.io/controller-managed-attach-detach": "true"}}


def _found(kind, name, labels=None):
    return {"resources": [{"kind": kind, "metadata": {"name": name, "labels": labels or {}}}]}


def test_foreign_names_existing_objects_that_are_not_ours():
    results = [
        _found("Namespace", "gpuops-nvidia", {"app.kubernetes.io/managed-by": "gpuops.nvidia"}),
        _found("RuntimeClass", "nvidia", {"app.kubernetes.io/managed-by": "Helm"}),
        _found("CustomResourceDefinition", "nodefeatures.nfd.k8s-sigs.io"),
        {"resources": []},
        {"skipped": True},
    ]
    assert k8s_objects.foreign(results) == ["CustomResourceDefinition/nodefeatures.nfd.k8s-sigs.io",
                                            "RuntimeClass/nvidia"]


def test_without_leaves_out_the_named_objects():
    objs = [{"kind": "RuntimeClass", "metadata": {"name": "nvidia"}},
            {"kind": "Namespace", "metadata": {"name": "gpuops-nvidia"}}]
    assert k8s_objects.without(objs, ["RuntimeClass/nvidia"]) == [objs[1]]
    assert k8s_objects.without(objs, []) == objs


@pytest.mark.parametrize("value, kind, ok", [
    ("gpuops-nvidia", "label", True), ("system-node-critical", "subdomain", True), ("nvidia.com-x", "subdomain", True),
    ("", "subdomain?", True), (None, "subdomain?", True), ("", "label", False),
    ("GPU-Operands", "label", False), ("a.b", "label", False), ("x" * 64, "label", False), ("x" * 253, "subdomain", True),
    ("critical\nhostPID: true", "subdomain", False), ("critical\n", "subdomain", False), ("-critical", "subdomain", False),
    ("critical ", "subdomain", False), (7, "label", False), ("{a: b}", "subdomain", False),
])
def test_kubernetes_names(value, kind, ok):
    errors = k8s_objects.name_errors({"gpuops_namespace": [value, kind]})
    assert (errors == []) == ok, errors
    assert ok or errors[0].startswith("gpuops_namespace is ") and "no Kubernetes name" in errors[0]

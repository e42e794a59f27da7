# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Render mode: the site playbook's Kubernetes stages with gpuops_render_dir write every object
they would apply as one YAML file each, and contact no cluster and no node.

Every run is the command a user runs, on the lab inventory:
  ansible-playbook -i inventories/lab playbooks/site.yml --tags cluster,operands -e gpuops_render_dir=DIR
with the installed collection (.build/collections, as ansible.cfg says; `make collection`, which the
Makefile's integration target runs first, installs it).

How the runs prove that no node and no cluster is contacted:
- the lab's hosts use the containers.podman.podman connection, which runs `podman` found on PATH
  (ansible's get_bin_path). PATH starts with a directory whose `podman` only records its arguments
  and fails, so reaching a node fails the task and leaves a record (test_the_trap_catches_a_node_contact
  shows that an ordinary module run on a lab node does trip it). This fails at once where an
  unreachable ssh address (-e ansible_host=192.0.2.1 ansible_connection=ssh) would wait for a time-out,
  and overriding ansible_connection with -e would also redirect the tasks delegated to localhost;
  CONTAINERS_CONF names a file that does not exist, so even the real podman could not reach the lab;
- the cluster: gpuops_kubeconfig (which the lab inventory sets) and KUBECONFIG name a file that does
  not exist, so any kubernetes.core call fails; the runs also check that no kubernetes.core task ran.

The renders the selected tests need start together, in parallel, once for the module (an
ansible-playbook render takes about 20s of CPU).
"""
from __future__ import annotations

import base64
import concurrent.futures
import filecmp
import json
import os
import re
import shutil
import subprocess

import pytest
import yaml

from conftest import BIN, REPO, _env  # pylint: disable=import-error

SITE = os.path.join(REPO, "playbooks", "site.yml")
LAB_INVENTORY = os.path.join(REPO, "inventories", "lab")
INSTALLED = os.path.join(REPO, ".build", "collections", "ansible_collections", "gpuops", "nvidia")
NS = "gpuops-nvidia"
KUBERNETES_MINORS = ["1.%d" % minor for minor in range(29, 38)]
HEADER = re.compile(r"^# gpuops\.nvidia\.(\w+): rendered, not applied \(gpuops_render_dir\)$")

PASSWORD = "gpuops-Test-Pa55w0rd-9c1e7"
CREDENTIALS = [{"name": "mirror-pull", "registry": "mirror.example:5000", "username": "robot", "password": PASSWORD}]
MIRROR = "mirror.example:5000/nvidia"
DIGEST = "sha256:" + "0123456789abcdef" * 4
PLUGIN_DIGEST_IMAGE = "nvcr.io/nvidia/k8s-device-plugin@" + DIGEST

# What the roles' templates (roles/*/templates/objects.yml.j2) define for the lab inventory
# (no CDI, no priority class, NFD deployed with its worker, no ServiceMonitor in render mode):
# (kind, namespace, name) -> (the role whose header the file carries, the file's name). The names
# follow render mode's rule (README, "Render mode"): <rank>-<kind>-<namespace>-<name>.yaml, the
# namespace only for a namespaced object, the kind in lower case, a character a file name should
# not hold (the ':' of an RBAC name) as '_'; the rank orders them for `kubectl apply -f`:
# 00 Namespace, 01 CustomResourceDefinition, 02 RuntimeClass, 10 ServiceAccount, 11 ClusterRole,
# 12 ClusterRoleBinding, 13 Role, 14 RoleBinding, 20 ConfigMap, 30 Service, 40 Deployment and DaemonSet.
CLUSTER_OBJECTS = {
    ("Namespace", None, NS): ("cluster", "00-namespace-gpuops-nvidia.yaml"),
    ("RuntimeClass", None, "nvidia"): ("cluster", "02-runtimeclass-nvidia.yaml"),
    ("ServiceAccount", NS, "nvidia-device-plugin"):
        ("cluster", "10-serviceaccount-gpuops-nvidia-nvidia-device-plugin.yaml"),
    ("ServiceAccount", NS, "gpu-feature-discovery"):
        ("cluster", "10-serviceaccount-gpuops-nvidia-gpu-feature-discovery.yaml"),
    ("ServiceAccount", NS, "dcgm-exporter"): ("cluster", "10-serviceaccount-gpuops-nvidia-dcgm-exporter.yaml"),
    ("ClusterRole", None, "gpuops-nvidia:nvidia-device-plugin"):
        ("cluster", "11-clusterrole-gpuops-nvidia_nvidia-device-plugin.yaml"),
    ("ClusterRole", None, "gpuops-nvidia:gpu-feature-discovery"):
        ("cluster", "11-clusterrole-gpuops-nvidia_gpu-feature-discovery.yaml"),
    ("ClusterRole", None, "gpuops-nvidia:dcgm-exporter"): ("cluster", "11-clusterrole-gpuops-nvidia_dcgm-exporter.yaml"),
    ("ClusterRoleBinding", None, "gpuops-nvidia:nvidia-device-plugin"):
        ("cluster", "12-clusterrolebinding-gpuops-nvidia_nvidia-device-plugin.yaml"),
    ("ClusterRoleBinding", None, "gpuops-nvidia:gpu-feature-discovery"):
        ("cluster", "12-clusterrolebinding-gpuops-nvidia_gpu-feature-discovery.yaml"),
    ("ClusterRoleBinding", None, "gpuops-nvidia:dcgm-exporter"):
        ("cluster", "12-clusterrolebinding-gpuops-nvidia_dcgm-exporter.yaml"),
    ("Role", NS, "gpu-feature-discovery"): ("cluster", "13-role-gpuops-nvidia-gpu-feature-discovery.yaml"),
    ("RoleBinding", NS, "gpu-feature-discovery"): ("cluster", "14-rolebinding-gpuops-nvidia-gpu-feature-discovery.yaml"),
}
DEVICE_PLUGIN_OBJECTS = {
    ("ConfigMap", NS, "nvidia-device-plugin-configs"):
        ("device_plugin", "20-configmap-gpuops-nvidia-nvidia-device-plugin-configs.yaml"),
    ("DaemonSet", NS, "nvidia-device-plugin"): ("device_plugin", "40-daemonset-gpuops-nvidia-nvidia-device-plugin.yaml"),
}
NFD_OBJECTS = {
    ("CustomResourceDefinition", None, "nodefeatures.nfd.k8s-sigs.io"):
        ("gpu_feature_discovery", "01-customresourcedefinition-nodefeatures.nfd.k8s-sigs.io.yaml"),
    ("CustomResourceDefinition", None, "nodefeaturerules.nfd.k8s-sigs.io"):
        ("gpu_feature_discovery", "01-customresourcedefinition-nodefeaturerules.nfd.k8s-sigs.io.yaml"),
    ("CustomResourceDefinition", None, "nodefeaturegroups.nfd.k8s-sigs.io"):
        ("gpu_feature_discovery", "01-customresourcedefinition-nodefeaturegroups.nfd.k8s-sigs.io.yaml"),
    ("ServiceAccount", NS, "nfd-master"): ("gpu_feature_discovery", "10-serviceaccount-gpuops-nvidia-nfd-master.yaml"),
    ("ClusterRole", None, "gpuops-nvidia:nfd-master"):
        ("gpu_feature_discovery", "11-clusterrole-gpuops-nvidia_nfd-master.yaml"),
    ("ClusterRoleBinding", None, "gpuops-nvidia:nfd-master"):
        ("gpu_feature_discovery", "12-clusterrolebinding-gpuops-nvidia_nfd-master.yaml"),
    ("Deployment", NS, "nfd-master"): ("gpu_feature_discovery", "40-deployment-gpuops-nvidia-nfd-master.yaml"),
    ("ServiceAccount", NS, "nfd-worker"): ("gpu_feature_discovery", "10-serviceaccount-gpuops-nvidia-nfd-worker.yaml"),
    ("Role", NS, "nfd-worker"): ("gpu_feature_discovery", "13-role-gpuops-nvidia-nfd-worker.yaml"),
    ("RoleBinding", NS, "nfd-worker"): ("gpu_feature_discovery", "14-rolebinding-gpuops-nvidia-nfd-worker.yaml"),
    ("DaemonSet", NS, "nfd-worker"): ("gpu_feature_discovery", "40-daemonset-gpuops-nvidia-nfd-worker.yaml"),
}
GFD_OBJECTS = {
    ("ConfigMap", NS, "gpu-feature-discovery-configs"):
        ("gpu_feature_discovery", "20-configmap-gpuops-nvidia-gpu-feature-discovery-configs.yaml"),
    ("DaemonSet", NS, "gpu-feature-discovery"):
        ("gpu_feature_discovery", "40-daemonset-gpuops-nvidia-gpu-feature-discovery.yaml"),
}
DCGM_OBJECTS = {
    ("ConfigMap", NS, "dcgm-exporter-metrics"): ("dcgm_exporter", "20-configmap-gpuops-nvidia-dcgm-exporter-metrics.yaml"),
    ("DaemonSet", NS, "dcgm-exporter"): ("dcgm_exporter", "40-daemonset-gpuops-nvidia-dcgm-exporter.yaml"),
    ("Service", NS, "dcgm-exporter"): ("dcgm_exporter", "30-service-gpuops-nvidia-dcgm-exporter.yaml"),
}
EXPECTED = {**CLUSTER_OBJECTS, **DEVICE_PLUGIN_OBJECTS, **NFD_OBJECTS, **GFD_OBJECTS, **DCGM_OBJECTS}
WORKLOAD_KINDS = ("DaemonSet", "Deployment", "StatefulSet", "Job")

# NVIDIA's DRA driver, rendered when a node has gpu_allocation: dra (role dra_driver)
DRA_OBJECTS = {
    ("ServiceAccount", NS, "dra-driver-nvidia-gpu-service-account-kubeletplugin"):
        ("dra_driver", "10-serviceaccount-gpuops-nvidia-dra-driver-nvidia-gpu-service-account-kubeletplugin.yaml"),
    ("ClusterRole", None, "dra-driver-nvidia-gpu-clusterrole-kubeletplugin"):
        ("dra_driver", "11-clusterrole-dra-driver-nvidia-gpu-clusterrole-kubeletplugin.yaml"),
    ("ClusterRoleBinding", None, "dra-driver-nvidia-gpu-clusterrole-binding-kubeletplugin"):
        ("dra_driver", "12-clusterrolebinding-dra-driver-nvidia-gpu-clusterrole-binding-kubeletplugin.yaml"),
    ("DeviceClass", None, "gpu.nvidia.com"): ("dra_driver", "60-deviceclass-gpu.nvidia.com.yaml"),
    ("DeviceClass", None, "mig.nvidia.com"): ("dra_driver", "60-deviceclass-mig.nvidia.com.yaml"),
    ("ValidatingAdmissionPolicy", None, "resourceslices-policy-dra-driver-nvidia-gpu"):
        ("dra_driver", "60-validatingadmissionpolicy-resourceslices-policy-dra-driver-nvidia-gpu.yaml"),
    ("ValidatingAdmissionPolicyBinding", None, "resourceslices-policy-dra-driver-nvidia-gpu"):
        ("dra_driver", "60-validatingadmissionpolicybinding-resourceslices-policy-dra-driver-nvidia-gpu.yaml"),
    ("DaemonSet", NS, "dra-driver-nvidia-gpu-kubelet-plugin"):
        ("dra_driver", "40-daemonset-gpuops-nvidia-dra-driver-nvidia-gpu-kubelet-plugin.yaml"),
}

# Runs that must be refused before anything is written: name -> (extra vars, what the message names).
BAD_INPUTS = {
    "dra-bad-feature-gate": ({"gpu_allocation": "dra", "dra_driver_feature_gates": {"Dynamic MIG": True}},
                             ["dra_driver_feature_gates", "Dynamic MIG"]),
    "image-without-tag": ({"device_plugin_image": "nvcr.io/nvidia/k8s-device-plugin"},
                          ["device_plugin_image", "nvcr.io/nvidia/k8s-device-plugin"]),
    "image-bad-digest": ({"dcgm_exporter_image": "nvcr.io/nvidia/k8s/dcgm-exporter@sha256:abc"},
                         ["dcgm_exporter_image", "sha256:abc"]),
    "registry-with-scheme": ({"gpuops_image_registry": "https://mirror.example:5000"},
                             ["gpuops_image_registry", "https://mirror.example:5000"]),
    "rename-by-default-in-entry": (
        {"device_plugin_configs": {
            "default": {"flags": {"migStrategy": "none"}},
            "shared4": {"version": "v1", "sharing": {"timeSlicing": {"resources": [
                {"name": "nvidia.com/gpu", "replicas": 4, "renameByDefault": True}]}}}}},
        ["shared4", "renameByDefault", "timeSlicing"]),
    "time-slicing-and-mps": (
        {"device_plugin_configs": {
            "default": {"flags": {"migStrategy": "none"}},
            "both": {"version": "v1", "sharing": {
                "timeSlicing": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]},
                "mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}}}},
        ["both", "timeSlicing", "mps"]),
    # a value rendered into the objects that could add a field (a line break) or is no name
    "priority-class-with-a-line-break": ({"gpuops_priority_class_name": "critical\nhostPID: true"},
                                         ["gpuops_priority_class_name", "critical\\nhostPID: true", "no Kubernetes name"]),
    "namespace-in-upper-case": ({"gpuops_namespace": "GPU-Operands"},
                                ["gpuops_namespace", "GPU-Operands", "no Kubernetes name"]),
    "system-namespace": ({"gpuops_namespace": "kube-system"}, ["kube-system", "namespace of their own"]),
    "mps-sharing": ({"device_plugin_configs": {
        "default": {"flags": {"migStrategy": "none"}},
        "mps2": {"version": "v1", "sharing": {"mps": {"resources": [{"name": "nvidia.com/gpu", "replicas": 2}]}}}}},
        ["device_plugin_configs: mps2 share GPUs with MPS", "Use timeSlicing"]),
    # (the complete entry's password is in no output: the test below checks every case)
    "credentials-incomplete": ({"cluster_registry_credentials": [
        {"name": "mirror-pull", "registry": "mirror.example:5000", "username": "robot", "password": PASSWORD},
        {"name": "half", "registry": "mirror.example:5000"}]},
        ["every entry of cluster_registry_credentials needs name, registry, username and password"]),
    # every problem of a role's inputs is named at once, not only the first
    "two-problems-at-once": ({"dcgm_exporter_image": "nvcr.io/nvidia/k8s/dcgm-exporter",
                              "dcgm_exporter_extra_metrics": ["DCGM_FI_DEV_NO_SUCH_FIELD, gauge, none."]},
                             ["dcgm_exporter_image", "dcgm_exporter_extra_metrics: ", "DCGM_FI_DEV_NO_SUCH_FIELD"]),
}
BAD_METRICS = ["DCGM_FI_DEV_GPU_TEMPERATURE, gauge, GPU temperature (in C)."]


class Render:
    """One ansible-playbook render run and what it left."""

    def __init__(self, name, directory, proc, trap_log):
        self.name = name
        self.dir = directory
        self.rc = proc.returncode
        self.stdout = proc.stdout
        self.stderr = proc.stderr
        self.podman_calls = ""
        if os.path.exists(trap_log):
            with open(trap_log) as handle:
                self.podman_calls = handle.read()
        try:
            self.out = json.loads(proc.stdout)
        except ValueError:
            self.out = None

    @property
    def text(self):
        return self.stdout + self.stderr

    def results(self):
        """(task name, host, result) of every task result, loop items included."""
        for play in (self.out or {}).get("plays", []):
            for task in play["tasks"]:
                for host, result in task["hosts"].items():
                    yield task["task"]["name"], host, result
                    for item in result.get("results") or []:
                        if isinstance(item, dict):
                            yield task["task"]["name"], host, item

    def failures(self):
        """The messages of the failed tasks (and ansible's own error output)."""
        found = ["%s (%s): %s" % (task, host, result.get("msg", result)) for task, host, result in self.results()
                 if result.get("failed") or result.get("unreachable")]
        return "\n".join(found + [self.stderr])

    def files(self):
        """{file name: bytes} of the render directory (missing directory: none)."""
        if not os.path.isdir(self.dir):
            return {}
        out = {}
        for name in sorted(os.listdir(self.dir)):
            with open(os.path.join(self.dir, name), "rb") as handle:
                out[name] = handle.read()
        return out

    def summary(self):
        if self.out is None:
            return "%s: rc %s\n%s\n%s" % (self.name, self.rc, self.stdout[-6000:], self.stderr[-3000:])
        return "%s: rc %s, failed: %s" % (self.name, self.rc, self.failures()[-6000:] or "nothing")


def _installed_collection_differs():
    """The first file of roles/ or plugins/ that differs between the working tree and the
    installed collection, or None."""
    for top in ("roles", "plugins"):
        for base, dirs, files in os.walk(os.path.join(REPO, top)):
            dirs[:] = [d for d in dirs if d != "__pycache__"]
            for name in files:
                path = os.path.join(base, name)
                rel = os.path.relpath(path, REPO)
                installed = os.path.join(INSTALLED, rel)
                if not os.path.isfile(installed) or not filecmp.cmp(path, installed, shallow=False):
                    return rel
    return None


def _render(work, name, extra_vars, directory=None, tags="cluster,operands"):
    """ansible-playbook site.yml --tags cluster,operands (or tags) in render mode, with the podman trap."""
    directory = directory or str(work / name / "render")
    trap = work / name / "trap"
    trap.mkdir(parents=True, exist_ok=True)
    trap_log = str(trap / "podman-calls.log")
    podman = trap / "podman"
    podman.write_text('#!/bin/sh\necho "podman $*" >> %s\n'
                      'echo "render-mode test: podman was called: a node was contacted" >&2\nexit 125\n' % trap_log)
    podman.chmod(0o755)
    env = _env(ANSIBLE_INVENTORY=LAB_INVENTORY, CONTAINERS_CONF=str(trap / "no-such-containers.conf"),
               KUBECONFIG=str(trap / "no-such-kubeconfig"))
    env["PATH"] = str(trap) + os.pathsep + env["PATH"]
    # (every node on the device plugin unless a run says dra: the lab inventory's H100 is a DRA node,
    # and the DRA driver's objects are the "dra" run's to check)
    variables = {"gpuops_render_dir": directory, "gpuops_kubeconfig": str(trap / "no-such-kubeconfig"),
                 "gpu_allocation": "device-plugin"}
    variables.update(extra_vars)
    argv = [os.path.join(BIN, "ansible-playbook"), "-i", LAB_INVENTORY, SITE, "--tags", tags,
            "-e", json.dumps(variables)]
    proc = subprocess.run(argv, cwd=REPO, env=env, capture_output=True, text=True, timeout=600, check=False)
    return Render(name, directory, proc, trap_log)


class Renders:
    """The renders the selected tests need, started together, in parallel, once."""

    def __init__(self, work, needed):
        self.work = work
        # (the mirror run also turns the exporter's pod labels on, the one thing that may widen its role)
        runs = {"images": {"gpuops_image_registry": MIRROR, "device_plugin_image": PLUGIN_DIGEST_IMAGE,
                           "dcgm_exporter_pod_labels": True},
                "dra": {"gpu_allocation": "dra"},
                "bad-metrics": {"dcgm_exporter_extra_metrics": BAD_METRICS}}
        runs.update({name: extra for name, (extra, _named) in BAD_INPUTS.items()})
        self._pool = concurrent.futures.ThreadPoolExecutor(max_workers=len(runs) + 1)  # pylint: disable=consider-using-with
        self._futures = {}
        if needed & {"base", "again", "stale"}:
            self._futures["chain"] = self._pool.submit(self._chain)
        for name in sorted(needed & set(runs)):
            self._futures[name] = self._pool.submit(_render, work, name, runs[name])

    def _chain(self):
        """The base render; then again into the same directory, and, on a copy of its files, a
        smaller configuration (no DCGM exporter, the cluster's own NFD)."""
        first = _render(self.work, "base", {"cluster_registry_credentials": CREDENTIALS})
        snapshot = _snapshot(first.dir)
        stale_dir = str(self.work / "stale" / "render")
        if os.path.isdir(first.dir):
            shutil.copytree(first.dir, stale_dir)
            with open(os.path.join(stale_dir, "kustomization.yaml"), "w") as handle:
                handle.write("resources: []\n")
            with open(os.path.join(stale_dir, "99-by-hand.yaml"), "w") as handle:
                handle.write("# written by hand, not by gpuops.nvidia\n---\napiVersion: v1\nkind: ConfigMap\n"
                             "metadata: {name: by-hand, namespace: %s}\n" % NS)
        with concurrent.futures.ThreadPoolExecutor(max_workers=2) as pool:
            again = pool.submit(_render, self.work, "again", {"cluster_registry_credentials": CREDENTIALS},
                                first.dir)
            stale = pool.submit(_render, self.work, "stale",
                                {"dcgm_exporter_state": "absent", "gpu_feature_discovery_nfd": "existing"},
                                stale_dir)
            return {"base": first, "base-snapshot": snapshot, "again": again.result(), "stale": stale.result()}

    def close(self):
        self._pool.shutdown(wait=True)

    def get(self, name):
        if name in ("base", "base-snapshot", "again", "stale"):
            return self._futures["chain"].result()[name]
        return self._futures[name].result()


def _snapshot(directory):
    """{name: (bytes, mtime_ns)} of a directory's files."""
    out = {}
    if os.path.isdir(directory):
        for name in sorted(os.listdir(directory)):
            path = os.path.join(directory, name)
            with open(path, "rb") as handle:
                out[name] = (handle.read(), os.stat(path).st_mtime_ns)
    return out


# the renders each test reads (the parametrized bad-input test: its case)
NEEDS = {
    "test_render_contacts_no_node_and_no_cluster_and_writes_files": {"base"},
    "test_every_file_is_one_object_the_roles_define": {"base"},
    "test_no_secret_and_no_password_anywhere": {"base", "again"},
    "test_rendered_objects_refer_to_each_other": {"base"},
    "test_operands_are_no_broader_than_upstream": {"base"},
    "test_nfd_is_no_broader_than_its_own_chart": {"base"},
    "test_the_exporter_reads_pods_only_with_pod_labels_on": {"base", "images"},
    "test_every_object_passes_kubernetes_validate_strict": {"base"},
    "test_rendering_again_changes_nothing": {"base", "again"},
    "test_a_smaller_configuration_removes_only_its_stale_files": {"base", "stale"},
    "test_a_mirror_rewrites_every_image_and_a_digest_is_kept": {"base", "images"},
    "test_an_unknown_dcgm_field_is_refused_with_a_suggestion": {"bad-metrics"},
    "test_dra_nodes_render_the_dra_driver_no_broader_than_its_chart": {"dra"},
}


@pytest.fixture(scope="module")
def renders(request, tmp_path_factory):
    differs = _installed_collection_differs()
    if differs:
        pytest.fail("the installed collection (%s) is older than the working tree (%s differs): run `make "
                    "collection` (the Makefile's integration target does)" % (INSTALLED, differs))
    needed = set()
    for item in request.session.items:
        if getattr(item, "module", None) is request.module:
            needed |= NEEDS.get(item.originalname, set())
            if item.originalname == "test_bad_input_is_refused_before_anything_is_written":
                needed.add(item.callspec.params["case"])
    runs = Renders(tmp_path_factory.mktemp("render-mode"), needed)
    yield runs
    runs.close()


def _ok(render):
    assert render.rc == 0, render.summary()
    assert render.out is not None, render.summary()
    assert render.podman_calls == "", "%s contacted a node:\n%s" % (render.name, render.podman_calls)
    return render


def _foreign_changes(render):
    """What a run did besides writing the render directory and its files on the controller, or
    that reached for the cluster."""
    render_dir = os.path.realpath(render.dir)
    problems = []
    for task, host, result in render.results():
        action = result.get("action") or ""
        if action.startswith("kubernetes.core.") and not result.get("skipped"):
            problems.append("%s ran %s for %s" % (task, action, host))
        if not result.get("changed") or result.get("results"):
            continue  # a loop: its items are checked
        path = os.path.realpath(str(result.get("dest") or result.get("path") or result.get("directory") or ""))
        if path != render_dir and os.path.dirname(path) != render_dir:
            problems.append("%s changed something for %s other than the render directory: %s"
                            % (task, host, {k: v for k, v in result.items() if k != "invocation"}))
        delegated = result.get("_ansible_delegated_vars")
        if delegated is not None and delegated.get("ansible_connection") != "local":
            problems.append("%s changed %s through %s" % (task, host, delegated))
    return problems


def _objects(render):
    """{file name: the one object in it}; every file must hold exactly one YAML object after the header."""
    out = {}
    for name, data in render.files().items():
        text = data.decode()
        assert name.endswith(".yaml"), name
        docs = [doc for doc in yaml.safe_load_all(text) if doc is not None]
        assert len(docs) == 1, "%s holds %d YAML objects, not one" % (name, len(docs))
        assert isinstance(docs[0], dict), name
        out[name] = docs[0]
    return out


def _key(obj):
    meta = obj["metadata"]
    return (obj["kind"], meta.get("namespace"), meta["name"])


def _images(node, path=()):
    """(path, image) of every `image` key anywhere in NODE."""
    if isinstance(node, dict):
        for key, value in node.items():
            if key == "image":
                yield path + (key,), value
            else:
                yield from _images(value, path + (key,))
    elif isinstance(node, list):
        for index, value in enumerate(node):
            yield from _images(value, path + (index,))


def _pod_specs(obj):
    """The pod spec of a workload object."""
    spec = obj.get("spec") or {}
    template = spec.get("template") or (spec.get("jobTemplate") or {}).get("spec", {}).get("template")
    return [template["spec"]] if template else []


def _containers(pod):
    return (pod.get("initContainers") or []) + (pod.get("containers") or []) + (pod.get("ephemeralContainers") or [])


def _mirrored(image):
    """IMAGE with its registry replaced by MIRROR: the first path element is a registry when it
    has a dot or a colon or is localhost (as container tools read it)."""
    first, _sep, rest = image.partition("/")
    if rest and ("." in first or ":" in first or first == "localhost"):
        return MIRROR + "/" + rest
    return MIRROR + "/" + image


# ---- 1: no node, no cluster, files written -----------------------------------------------------

def test_the_trap_catches_a_node_contact(tmp_path):
    """The PATH podman of the renders does catch an ordinary module run on a lab node (so an empty
    record after a render means no node was contacted)."""
    log = tmp_path / "podman-calls.log"
    podman = tmp_path / "podman"
    podman.write_text('#!/bin/sh\necho "podman $*" >> %s\nexit 125\n' % log)
    podman.chmod(0o755)
    env = _env(ANSIBLE_INVENTORY=LAB_INVENTORY, CONTAINERS_CONF=str(tmp_path / "no-such-containers.conf"))
    env["PATH"] = str(tmp_path) + os.pathsep + env["PATH"]
    proc = subprocess.run([os.path.join(BIN, "ansible"), "-i", LAB_INVENTORY, "gpuops-lab-h100", "-m",
                           "ansible.builtin.ping"], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert proc.returncode != 0, proc.stdout + proc.stderr
    assert "gpuops-lab-h100" in log.read_text()


def test_render_contacts_no_node_and_no_cluster_and_writes_files(renders):
    base = _ok(renders.get("base"))
    assert base.files(), "the render wrote no files\n" + base.summary()
    assert _foreign_changes(base) == []
    assert set(base.out["stats"]) == {"gpuops-lab-h100", "gpuops-lab-l40s"}
    assert all(stats["failures"] == 0 and stats["unreachable"] == 0 for stats in base.out["stats"].values())


# ---- 2: the objects ---------------------------------------------------------------------------

def test_every_file_is_one_object_the_roles_define(renders):
    base = _ok(renders.get("base"))
    objects, files = _objects(base), base.files()
    assert {_key(obj) for obj in objects.values()} == set(EXPECTED)
    for name, obj in objects.items():
        role, file_name = EXPECTED[_key(obj)]
        assert name == file_name, "%s/%s is written to %s, not %s" % (
            obj["kind"], obj["metadata"]["name"], name, file_name)
        header = files[name].decode().splitlines()
        match = HEADER.match(header[0])
        assert match and header[1] == "---", "%s: header %r" % (name, header[:2])
        assert match.group(1) == role, "%s is written under %s" % (name, match.group(1))


def test_no_secret_and_no_password_anywhere(renders):
    base = _ok(renders.get("base"))
    objects = _objects(base)
    assert [name for name, obj in objects.items() if obj["kind"] == "Secret"] == []
    auth = base64.b64encode(("robot:" + PASSWORD).encode()).decode()
    for name, data in base.files().items():
        text = data.decode()
        assert PASSWORD not in text and auth not in text and "dockerconfigjson" not in text, name
    for run in (base, renders.get("again")):
        assert PASSWORD not in run.text and auth not in run.text
    # the run says the secret is left out
    assert "mirror-pull" in base.stdout


def test_rendered_objects_refer_to_each_other(renders):
    """What schema validation cannot see: the names the objects use exist in the render."""
    objects = list(_objects(_ok(renders.get("base"))).values())
    have = {_key(obj) for obj in objects}
    problems = []
    for obj in objects:
        kind, ns, name = _key(obj)
        where = "%s/%s" % (kind, name)
        if ns and ("Namespace", None, ns) not in have:
            problems.append("%s: namespace %s is not rendered" % (where, ns))
        if kind in ("RoleBinding", "ClusterRoleBinding"):
            ref = obj["roleRef"]
            ref_ns = ns if ref["kind"] == "Role" else None
            if (ref["kind"], ref_ns, ref["name"]) not in have:
                problems.append("%s: roleRef %s/%s is not rendered" % (where, ref["kind"], ref["name"]))
            for subject in obj["subjects"]:
                if (subject["kind"], subject.get("namespace"), subject["name"]) not in have:
                    problems.append("%s: subject %s is not rendered" % (where, subject))
        if kind in WORKLOAD_KINDS:
            selector = obj["spec"]["selector"]["matchLabels"]
            labels = obj["spec"]["template"]["metadata"]["labels"]
            if any(labels.get(key) != value for key, value in selector.items()):
                problems.append("%s: selector %s does not match the pod labels %s" % (where, selector, labels))
        for pod in _pod_specs(obj):
            account = pod.get("serviceAccountName")
            if account and ("ServiceAccount", ns, account) not in have:
                problems.append("%s: ServiceAccount %s is not rendered" % (where, account))
            runtime = pod.get("runtimeClassName")
            if runtime and ("RuntimeClass", None, runtime) not in have:
                problems.append("%s: RuntimeClass %s is not rendered" % (where, runtime))
            volumes = {volume["name"]: volume for volume in pod.get("volumes") or []}
            for volume in volumes.values():
                if "configMap" in volume and ("ConfigMap", ns, volume["configMap"]["name"]) not in have:
                    problems.append("%s: ConfigMap %s is not rendered" % (where, volume["configMap"]["name"]))
            for container in _containers(pod):
                ports = {port.get("name") for port in container.get("ports") or []}
                for mount in container.get("volumeMounts") or []:
                    if mount["name"] not in volumes:
                        problems.append("%s: container %s mounts volume %s, which the pod does not have"
                                        % (where, container["name"], mount["name"]))
                for probe in ("readinessProbe", "livenessProbe", "startupProbe"):
                    port = ((container.get(probe) or {}).get("httpGet") or {}).get("port")
                    if isinstance(port, str) and port not in ports:
                        problems.append("%s: %s %s uses port %s, which it does not name"
                                        % (where, container["name"], probe, port))
        if kind == "Service":
            selected = [other for other in objects if other["kind"] in WORKLOAD_KINDS
                        and other["metadata"].get("namespace") == ns
                        and all(other["spec"]["template"]["metadata"]["labels"].get(key) == value
                                for key, value in obj["spec"]["selector"].items())]
            if not selected:
                problems.append("%s: its selector matches no rendered workload" % where)
            names = {port.get("name") for other in selected for pod in _pod_specs(other)
                     for container in _containers(pod) for port in container.get("ports") or []}
            for port in obj["spec"]["ports"]:
                if isinstance(port.get("targetPort"), str) and port["targetPort"] not in names:
                    problems.append("%s: targetPort %s is no container port name" % (where, port["targetPort"]))
    assert problems == []


# ---- 3: kubernetes-validate --strict ----------------------------------------------------------

def test_operands_are_no_broader_than_upstream(renders):
    """The rendered operands' privileges, field by field, against what NVIDIA's charts grant at the
    pinned versions (k8s-device-plugin's deployments/helm, dcgm-exporter's chart, the GPU
    Operator's GFD asset): the config managers drop every capability, the exporter keeps only
    SYS_ADMIN and cannot escalate, GFD reads the host's /sys read-only."""
    objects = _objects(_ok(renders.get("base")))
    seen = set()
    for obj in objects.values():
        for pod in _pod_specs(obj):
            mounts = {}
            for container in _containers(pod):
                context = container.get("securityContext") or {}
                if container["name"].startswith("config-manager"):
                    seen.add("config-manager")
                    assert context.get("capabilities") == {"drop": ["ALL"]}, (obj["metadata"]["name"], container)
                    assert context.get("allowPrivilegeEscalation") is False
                if obj["metadata"]["name"] == "dcgm-exporter" and container["name"] == "exporter":
                    seen.add("dcgm-exporter")
                    assert context.get("capabilities") == {"add": ["SYS_ADMIN"], "drop": ["ALL"]}, context
                    assert context.get("allowPrivilegeEscalation") is False and not context.get("privileged")
                for mount in container.get("volumeMounts") or []:
                    mounts[(container["name"], mount["name"])] = mount
            if obj["metadata"]["name"] == "gpu-feature-discovery" and obj["kind"] == "DaemonSet":
                seen.add("gfd")
                sys_mounts = [m for (c, n), m in mounts.items() if m["mountPath"] == "/sys"]
                assert sys_mounts and all(m.get("readOnly") is True for m in sys_mounts), sys_mounts
    assert seen == {"config-manager", "dcgm-exporter", "gfd"}, seen


def _broader(ours, upstream):
    """The fields of container security context OURS that grant more than UPSTREAM's."""
    ours, found = ours or {}, []
    for field in ("allowPrivilegeEscalation", "privileged"):
        if ours.get(field, True if field == "allowPrivilegeEscalation" else False) and upstream.get(field) is False:
            found.append(field)
    for field in ("readOnlyRootFilesystem", "runAsNonRoot"):
        if upstream.get(field) is True and ours.get(field) is not True:
            found.append(field)
    caps, up_caps = ours.get("capabilities") or {}, upstream.get("capabilities") or {}
    if "ALL" in (up_caps.get("drop") or []) and "ALL" not in (caps.get("drop") or []):
        found.append("capabilities.drop")
    if set(caps.get("add") or []) - set(up_caps.get("add") or []):
        found.append("capabilities.add")
    if "runAsUser" in upstream and ours.get("runAsUser", 0) == 0 and upstream["runAsUser"] != 0:
        found.append("runAsUser")
    return found


def _nfd_upstream_values():
    """node-feature-discovery's own chart values at the version the lab builds (its Go module,
    downloaded by tests/lab/go-binaries): the upstream the NFD the role deploys is compared with."""
    with open(os.path.join(REPO, "tests", "lab", "go", "nfd", "go.mod"), encoding="utf-8") as handle:
        version = re.search(r"sigs\.k8s\.io/node-feature-discovery (v\S+)", handle.read()).group(1)
    cache = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True, check=True).stdout.strip()
    path = os.path.join(cache, "sigs.k8s.io", "node-feature-discovery@" + version,
                        "deployment", "helm", "node-feature-discovery", "values.yaml")
    with open(path, encoding="utf-8") as handle:
        return version, yaml.safe_load(handle)


def test_nfd_is_no_broader_than_its_own_chart(renders):
    """NFD's master and worker, field by field against node-feature-discovery's chart at the pinned
    version (read from its module, not restated here): non-root, read-only root, no capabilities."""
    version, values = _nfd_upstream_values()
    objects = _objects(_ok(renders.get("base")))
    assert "node-feature-discovery:" + version in json.dumps(objects), "the role deploys another NFD than " + version
    seen = {}
    for obj in objects.values():
        for pod in _pod_specs(obj):
            for container in _containers(pod):
                part = {"nfd-master": "master", "nfd-worker": "worker"}.get(container["name"])
                if part:
                    seen[part] = _broader(container.get("securityContext"), values[part]["securityContext"])
    assert seen == {"master": [], "worker": []}, "broader than NFD %s's chart: %s" % (version, seen)
    # the check itself: what the role rendered before this issue is broader
    assert _broader({"allowPrivilegeEscalation": False, "capabilities": {"drop": ["ALL"]}},
                    values["master"]["securityContext"]) == ["readOnlyRootFilesystem", "runAsNonRoot"]


def _exporter_pod_labels(objects):
    """(the exporter's pod-labels switch, the rules of its ClusterRole) of a render."""
    by_key = {_key(obj): obj for obj in objects.values()}
    env = {var["name"]: var.get("value") for pod in _pod_specs(by_key[("DaemonSet", NS, "dcgm-exporter")])
           for container in _containers(pod) for var in container.get("env") or []}
    return (env["DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS"],
            by_key[("ClusterRole", None, "gpuops-nvidia:dcgm-exporter")]["rules"])


def test_the_exporter_reads_pods_only_with_pod_labels_on(renders):
    """dcgm-exporter's chart grants pod access only with pod labels on: off (the default), the
    ClusterRole is there but grants nothing, so a later run with them off takes the grant away."""
    assert _exporter_pod_labels(_objects(_ok(renders.get("base")))) == ("false", [])
    assert _exporter_pod_labels(_objects(_ok(renders.get("images")))) == (
        "true", [{"apiGroups": [""], "resources": ["pods"], "verbs": ["get", "list", "watch"]}])


def test_kubernetes_validate_bundles_every_minor():
    """kubernetes-validate falls back to the newest bundled schemas that are not newer than the
    version asked for, and refuses a version newer than its newest; each minor must be there."""
    from kubernetes_validate import utils  # pylint: disable=import-outside-toplevel
    bundled = {utils.major_minor(version) for version in utils.all_versions()}
    missing = [minor for minor in KUBERNETES_MINORS if minor not in bundled]
    bundled = sorted(bundled, key=lambda version: [int(part) for part in version.split(".")])
    assert missing == [], ("kubernetes-validate %s has no schemas for Kubernetes %s (it bundles %s): install a "
                           "release that does (requirements.txt)" % (utils.__version__, ", ".join(missing),
                                                                     ", ".join(bundled)))


@pytest.mark.parametrize("minor", KUBERNETES_MINORS)
def test_every_object_passes_kubernetes_validate_strict(renders, minor):
    """kubernetes-validate --strict: additional properties are errors. A kind it has no schema for
    (one a CRD defines) only gets a WARN and exit status 0, so WARN fails here too; the
    CustomResourceDefinitions themselves are a built-in kind and are validated."""
    base = _ok(renders.get("base"))
    names = sorted(base.files())
    proc = subprocess.run([os.path.join(BIN, "kubernetes-validate"), "--strict", "-k", minor] + names,
                          cwd=base.dir, capture_output=True, text=True, timeout=300, check=False)
    lines = proc.stdout.splitlines() + proc.stderr.splitlines()
    bad = [line for line in lines if not line.startswith("INFO ")]
    assert bad == [] and proc.returncode == 0, "kubernetes-validate --strict -k %s (rc %d):\n%s" % (
        minor, proc.returncode, "\n".join(bad))
    for name in names:
        passed = [line for line in lines if line.startswith("INFO %s passed " % name)]
        assert len(passed) == 1, "%s: %s" % (name, passed)
        against = passed[0].rsplit(" ", 1)[-1]
        assert against == minor, ("kubernetes-validate validated %s against %s, not %s: it has no schemas for %s"
                                  % (name, against, minor, minor))


# ---- 4: stable output, stale files ------------------------------------------------------------

def test_rendering_again_changes_nothing(renders):
    first, again = _ok(renders.get("base")), _ok(renders.get("again"))
    before = renders.get("base-snapshot")
    after = _snapshot(again.dir)
    assert sorted(after) == sorted(before)
    assert [name for name in before if after[name][0] != before[name][0]] == [], "files differ"
    assert [name for name in before if after[name][1] != before[name][1]] == [], "files were rewritten"
    assert {host: stats["changed"] for host, stats in again.out["stats"].items()} == \
        {host: 0 for host in first.out["stats"]}
    assert _foreign_changes(again) == []


def test_a_smaller_configuration_removes_only_its_stale_files(renders):
    before = renders.get("base-snapshot")
    stale = _ok(renders.get("stale"))
    assert _foreign_changes(stale) == []
    after = _snapshot(stale.dir)
    removed = {file_name for _role, file_name in list(DCGM_OBJECTS.values()) + list(NFD_OBJECTS.values())}
    assert removed <= set(before)
    assert set(after) == (set(before) - removed) | {"kustomization.yaml", "99-by-hand.yaml"}
    # the other roles' files are left alone: same bytes, not rewritten
    assert [name for name in set(before) - removed if after[name] != before[name]] == []
    assert after["kustomization.yaml"][0] == b"resources: []\n"


# ---- 5: images --------------------------------------------------------------------------------

def test_a_mirror_rewrites_every_image_and_a_digest_is_kept(renders):
    base, images = _objects(_ok(renders.get("base"))), _objects(_ok(renders.get("images")))
    assert _foreign_changes(renders.get("images")) == []
    assert sorted(images) == sorted(base)
    seen = 0
    for name, obj in base.items():
        expected = json.loads(json.dumps(obj))
        for path, image in _images(obj):
            assert any(part in ("containers", "initContainers") for part in path), "%s: image at %s" % (name, path)
            node = expected
            for part in path[:-1]:
                node = node[part]
            if _key(obj) == ("DaemonSet", NS, "nvidia-device-plugin"):
                node["image"] = _mirrored(PLUGIN_DIGEST_IMAGE)
            else:
                node["image"] = _mirrored(image)
            seen += 1
        # and the exporter's pod labels, which this run turns on (the test above reads them)
        if _key(obj) == ("ClusterRole", None, "gpuops-nvidia:dcgm-exporter"):
            expected["rules"] = images[name]["rules"]
        for pod in _pod_specs(expected) if _key(obj) == ("DaemonSet", NS, "dcgm-exporter") else ():
            for var in (var for container in _containers(pod) for var in container.get("env") or []):
                if var["name"] == "DCGM_EXPORTER_KUBERNETES_ENABLE_POD_LABELS":
                    var["value"] = "true"
        # nothing else changes
        assert images[name] == expected, name
    workloads = [obj for obj in base.values() if obj["kind"] in WORKLOAD_KINDS]
    assert len(workloads) == 5
    assert seen == sum(len(_containers(pod)) for obj in workloads for pod in _pod_specs(obj))
    for obj in images.values():
        for pod in _pod_specs(obj):
            for container in _containers(pod):
                assert container["image"].startswith(MIRROR + "/"), container


@pytest.mark.parametrize("case", sorted(BAD_INPUTS))
def test_bad_input_is_refused_before_anything_is_written(renders, case):
    render = renders.get(case)
    _extra, named = BAD_INPUTS[case]
    assert render.rc != 0, render.summary()
    message = render.failures()
    missing = [word for word in named if word not in message]
    assert missing == [], "the message does not name %s:\n%s" % (", ".join(missing), message[-3000:])
    assert render.files() == {}, "files were written before the refusal: %s" % sorted(render.files())
    assert render.podman_calls == ""
    assert PASSWORD not in render.text


# ---- 7: the exporter's counters ---------------------------------------------------------------

def test_an_unknown_dcgm_field_is_refused_with_a_suggestion(renders):
    render = renders.get("bad-metrics")
    assert render.rc != 0, render.summary()
    message = render.failures()
    assert "dcgm_exporter_extra_metrics" in message and "DCGM_FI_DEV_GPU_TEMPERATURE" in message, message[-3000:]
    assert re.search(r"DCGM_FI_DEV_GPU_TEMP\b", message.replace("DCGM_FI_DEV_GPU_TEMPERATURE", "")), message[-3000:]
    exporter_files = {file_name for _role, file_name in DCGM_OBJECTS.values()}
    written = sorted(exporter_files & set(render.files()))
    assert written == [], "the exporter's files were written: %s" % written
    assert render.podman_calls == ""


# ---- 8: NVIDIA's DRA driver -------------------------------------------------------------------

def _dra_chart(path):
    """A file of NVIDIA's DRA driver chart at the version the lab builds (tests/lab/go/dra-driver)."""
    with open(os.path.join(REPO, "tests", "lab", "go", "dra-driver", "go.mod"), encoding="utf-8") as handle:
        version = re.search(r"sigs\.k8s\.io/dra-driver-nvidia-gpu (v\S+)", handle.read()).group(1)
    cache = subprocess.run(["go", "env", "GOMODCACHE"], capture_output=True, text=True, check=True).stdout.strip()
    with open(os.path.join(cache, "sigs.k8s.io", "dra-driver-nvidia-gpu@" + version, "deployments", "helm",
                           "dra-driver-nvidia-gpu", path), encoding="utf-8") as handle:
        return handle.read()


def _chart_cluster_role_rules():
    """The kubelet plugin's ClusterRole rules in the chart (plain YAML between its rules: and the
    next document)."""
    text = _dra_chart("templates/rbac-kubeletplugin.yaml")
    block = text[text.index("kind: ClusterRole\n"):]
    block = block[block.index("rules:\n"):block.index("\n---")]
    return yaml.safe_load(block)["rules"]


def test_dra_nodes_render_the_dra_driver_no_broader_than_its_chart(renders):
    """A node with gpu_allocation: dra: the site renders NVIDIA's DRA driver as well - exactly its
    objects, its ClusterRole rule by rule within the chart's (v0.4.1), the DeviceClasses' CEL as
    the chart's, its DaemonSet's containers no more privileged than the chart's values, every file
    valid for the Kubernetes releases that serve resource.k8s.io/v1."""
    dra = _ok(renders.get("dra"))
    objects = _objects(dra)
    found = {_key(obj): name for name, obj in objects.items() if _key(obj) in DRA_OBJECTS}
    assert found == {key: file_name for key, (_role, file_name) in DRA_OBJECTS.items()}
    for key, name in found.items():
        assert HEADER.match(dra.files()[name].decode().splitlines()[0]).group(1) == "dra_driver", name
    # RBAC: every rule of ours is within one of the chart's
    upstream = _chart_cluster_role_rules()
    ours = objects[found[("ClusterRole", None, "dra-driver-nvidia-gpu-clusterrole-kubeletplugin")]]["rules"]
    for rule in ours:
        assert any(set(rule["apiGroups"]) <= set(up["apiGroups"]) and set(rule["resources"]) <= set(up["resources"])
                   and set(rule["verbs"]) <= set(up["verbs"]) for up in upstream), ("broader than the chart", rule)
    # the DeviceClasses select as the chart's do
    for device_class in ("gpu", "mig"):
        chart = _dra_chart("templates/deviceclass-%s.yaml" % device_class)
        expression = re.search(r'expression: "(.*)"', chart).group(1)
        obj = objects[found[("DeviceClass", None, "%s.nvidia.com" % device_class)]]
        assert obj["spec"]["selectors"] == [{"cel": {"expression": expression}}]
    assert objects[found[("DeviceClass", None, "gpu.nvidia.com")]]["spec"]["extendedResourceName"] == "nvidia.com/gpu"
    # containers: privileged as the chart's values say (kubeletPlugin.containers.*.securityContext)
    values = yaml.safe_load(_dra_chart("values.yaml"))
    daemonset = objects[found[("DaemonSet", NS, "dra-driver-nvidia-gpu-kubelet-plugin")]]
    containers = {c["name"]: c for pod in _pod_specs(daemonset) for c in _containers(pod)}
    assert sorted(containers) == ["gpus", "init-container"]
    assert containers["gpus"]["securityContext"] == values["kubeletPlugin"]["containers"]["gpus"]["securityContext"]
    assert _broader(containers["init-container"]["securityContext"], {"privileged": True}) == []
    # schema-valid where resource.k8s.io/v1 exists (Kubernetes 1.34 and newer)
    names = sorted(found.values())
    for minor in [m for m in KUBERNETES_MINORS if int(m.split(".")[1]) >= 34]:
        proc = subprocess.run([os.path.join(BIN, "kubernetes-validate"), "--strict", "-k", minor] + names,
                              cwd=dra.dir, capture_output=True, text=True, timeout=300, check=False)
        bad = [line for line in proc.stdout.splitlines() + proc.stderr.splitlines() if not line.startswith("INFO ")]
        assert bad == [] and proc.returncode == 0, (minor, bad)

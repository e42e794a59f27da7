# -*- coding: utf-8 -*-
"""The lab cluster's own tests: one cluster per test session.

By default the session brings up the built-in lab the way `make lab` does (GPU nodes, the
cluster built from Kubernetes' source, the site playbook's host stages, the lab's operands) and
leaves it running (`make lab-down` removes it). With GPUOPS_REAL_KUBECONFIG=PATH the same tests
run against that cluster instead; the tests that need to reach into a lab node (podman) are then
skipped with that reason, and GPUOPS_REAL_GPU_NODE names the GPU node to test on. Under `make
test` (GPUOPS_REQUIRE_ALL=1) a test whose prerequisite is missing fails instead (require()).
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
from kubelab.waiting import wait_for  # noqa: E402  pylint: disable=wrong-import-position

KUBECTL = os.path.join(REPO, ".venv", "bin", "kubectl")
LAB_KUBECONFIG = os.path.join(REPO, ".build", "kube", "kubeconfig")
MAKE_LAB_LOG = os.path.join(REPO, ".build", "make-lab.log")
REAL = os.environ.get("GPUOPS_REAL_KUBECONFIG")
# `make test` sets it: a missing prerequisite then fails the test instead of skipping it
REQUIRE_ALL = os.environ.get("GPUOPS_REQUIRE_ALL") == "1"
# the field manager of the roles' server-side apply (roles/k8s_objects)
FIELD_MANAGER = "gpuops-nvidia"
os.environ.setdefault("CONTAINERS_CONF", os.path.join(LAB, "containers.conf"))

# the lab's GPU nodes, what their fake-NVML profiles say (labfacts, profiles/*.profile) and what
# serves their GPUs (the inventory's gpu_allocation: the H100 is make lab's DRA node)
LAB_GPU_NODES = {
    "gpuops-lab-h100": {"profile": "hgx-h100", "gpus": 8, "product": "NVIDIA-H100-80GB-HBM3",
                        "driver": "570.172.08", "uuids": H100_UUIDS, "allocation": "dra"},
    "gpuops-lab-l40s": {"profile": "l40s-x4", "gpus": 4, "product": "NVIDIA-L40S",
                        "driver": "580.95.05", "uuids": L40S_UUIDS, "allocation": "device-plugin"},
}
# the oldest ansible-core of the supported range (the Makefile's; make core-envs builds its environment)
with open(os.path.join(REPO, "Makefile"), encoding="utf-8") as _makefile:
    OLDEST_CORE = next(line.split(":=")[1].strip() for line in _makefile if line.startswith("OLDEST_CORE :="))
TOOLBOX = os.environ.get("GPUOPS_TEST_IMAGE", "localhost/gpuops-lab/toolbox:1")


def require(present, what, how):
    """Skip (outside `make test`) or fail (under it) when a prerequisite is missing; the reason
    names it and how to get it."""
    if present:
        return
    message = f"{what} is missing: {how}"
    if REQUIRE_ALL:
        pytest.fail(message + " (make test must provide it)")
    pytest.skip(message)


def _owned(value, fields):
    """The parts of VALUE that a managedFields entry's fieldsV1 (FIELDS) names, in VALUE's order."""
    if not [key for key in fields if key != "."]:
        return value  # a leaf (or a whole value) the manager owns
    if isinstance(value, dict):
        return {key[2:]: _owned(value[key[2:]], sub) for key, sub in fields.items()
                if key.startswith("f:") and key[2:] in value}
    if isinstance(value, list):
        out = []
        for item in value:
            for key, sub in fields.items():
                if key.startswith("k:") and isinstance(item, dict):
                    ident = json.loads(key[2:])
                    if all(item.get(k) == v for k, v in ident.items()):
                        owned = dict(ident, **_owned(item, sub))
                        # an env var's empty value, which the API server leaves out when it writes
                        # the object (omitempty) but the manager applied and owns
                        if "f:value" in sub and "value" not in item and "valueFrom" not in item:
                            owned["value"] = ""
                        out.append(owned)
                        break
                elif key.startswith("v:") and json.loads(key[2:]) == item:
                    out.append(item)
                    break
        return out
    return value


def applied_config(obj, manager=FIELD_MANAGER):
    """What MANAGER applied of OBJ (as read before a test changed it): its server-side apply
    entries' fields with OBJ's values. Applied again by the same manager, it puts back exactly
    those fields and leaves the object's field ownership as it was."""
    meta = obj["metadata"]
    out = {"apiVersion": obj["apiVersion"], "kind": obj["kind"],
           "metadata": {k: v for k, v in (("name", meta["name"]), ("namespace", meta.get("namespace"))) if v}}
    entries = [e for e in meta.get("managedFields") or [] if e.get("manager") == manager and e.get("operation") == "Apply"]
    assert entries, f"{obj['kind']}/{meta['name']} has no fields applied by {manager}"
    for entry in entries:
        owned = _owned(obj, entry["fieldsV1"])
        for key, value in owned.items():
            if key == "metadata":
                out["metadata"].update(value)
            else:
                out[key] = value
    return out


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
        return wait_for(predicate, timeout, what, interval)

    def reapply(self, *saved, manager=FIELD_MANAGER):
        """Puts back what the roles applied to the objects SAVED (read before a test changed them):
        a server-side apply, as the roles' own field manager, of exactly the fields it owned."""
        for obj in saved:
            self.run("apply", "--server-side", f"--field-manager={manager}", "--force-conflicts", "-f", "-",
                     input=json.dumps(applied_config(obj, manager)))

    def applied_objects(self, namespace, kinds="daemonsets,deployments,configmaps,services,serviceaccounts"):
        """{(kind, name): object, with its managedFields} of the roles' objects in NAMESPACE: what
        reapply_changed() puts back."""
        items = self.get("-n", namespace, kinds, "-l", "app.kubernetes.io/managed-by=gpuops.nvidia",
                         "--show-managed-fields")["items"]
        return {(o["kind"], o["metadata"]["name"]): o for o in items}

    def reapply_changed(self, namespace, saved):
        """Puts the roles' objects in NAMESPACE back as SAVED (applied_objects() before a test
        changed them): each one whose applied fields differ is applied again as it was, the
        DaemonSets among them rolled out; none may have appeared since. The (kind, name)s put back."""
        now = self.applied_objects(namespace)
        assert set(now) <= set(saved), f"objects the test made: {sorted(set(now) - set(saved))}"
        changed = sorted(key for key in saved if key not in now
                         or applied_config(now[key]) != applied_config(saved[key]))
        self.reapply(*(saved[key] for key in changed))
        for kind, name in changed:
            if kind == "DaemonSet":
                self.run("-n", namespace, "rollout", "status", f"daemonset/{name}", "--timeout=180s", timeout=200)
        again = self.applied_objects(namespace)
        restored = {key: applied_config(again[key]) for key in changed}
        assert restored == {key: applied_config(saved[key]) for key in changed}, restored
        return changed

    def node_meta(self, name):
        """A node's labels and annotations, less what changes on its own (GFD's timestamp, the
        node controller's ttl)."""
        meta = self.get("node", name)["metadata"]
        return {"labels": {k: v for k, v in meta.get("labels", {}).items() if k != "nvidia.com/gfd.timestamp"},
                "annotations": {k: v for k, v in meta.get("annotations", {}).items()
                                if not k.startswith("node.alpha.kubernetes.io/")}}

    def restore_node_meta(self, name, saved, keys):
        """Puts the node's labels and annotations named by KEYS (prefixes) back as SAVED
        (node_meta() before the test): set where they differ, removed where SAVED has none."""
        now = self.node_meta(name)
        patch = {}
        for part in ("labels", "annotations"):
            for key in set(saved[part]) | set(now[part]):
                if key.startswith(keys) and saved[part].get(key) != now[part].get(key):
                    patch.setdefault(part, {})[key] = saved[part].get(key)
        if patch:
            self.run("patch", "node", name, "--type=merge", "-p", json.dumps({"metadata": patch}))
        return patch

    def pod_phase(self, ns, name):
        return self.get("-n", ns, "pod", name)["status"].get("phase")

    def wait_pod_done(self, ns, name, timeout=180):
        self.wait(lambda: self.pod_phase(ns, name) in ("Succeeded", "Failed"), timeout, what=f"pod {ns}/{name}")
        return self.get("-n", ns, "pod", name)

    def slice_devices(self, node):
        """{device name: device} of the node's gpu.nvidia.com ResourceSlices (NVIDIA's DRA driver)."""
        slices = self.get("resourceslices", "--field-selector", f"spec.nodeName={node}")["items"]
        return {d["name"]: d for s in slices if s["spec"]["driver"] == "gpu.nvidia.com" for d in s["spec"]["devices"]}

    def advertised_gpus(self, node, allocation):
        """The whole GPUs the node's allocator offers the scheduler, as a string (None when none):
        the device plugin's allocatable nvidia.com/gpu, or the `gpu` devices of the DRA driver's
        ResourceSlices."""
        if allocation == "dra":
            count = sum(next(iter(d["attributes"]["type"].values())) == "gpu"
                        for d in self.slice_devices(node).values())
            return str(count) if count else None
        return self.get("node", node)["status"].get("allocatable", {}).get("nvidia.com/gpu")

    def node_exec(self, node, script):
        require(self.lab, "a lab node to reach into (podman)",
                "these tests run on the lab's cluster (make lab), not with GPUOPS_REAL_KUBECONFIG")
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
    require(kube.lab, "the lab's own cluster",
            "this test changes the lab's nodes and operands: run it on the lab (make lab), not with "
            "GPUOPS_REAL_KUBECONFIG")
    return kube


@pytest.fixture(scope="session")
def gpu_nodes(kube):
    """name -> expected facts of the GPU nodes under test."""
    if kube.lab:
        return LAB_GPU_NODES
    name = os.environ.get("GPUOPS_REAL_GPU_NODE")
    require(name, "GPUOPS_REAL_GPU_NODE", "set it (and optionally GPUOPS_REAL_GPU_COUNT, and GPUOPS_REAL_GPU_ALLOCATION "
            "dra for a node NVIDIA's DRA driver serves) for a real cluster")
    return {name: {"gpus": int(os.environ.get("GPUOPS_REAL_GPU_COUNT", "1")), "product": None, "driver": None,
                   "uuids": None, "allocation": os.environ.get("GPUOPS_REAL_GPU_ALLOCATION", "device-plugin")}}


@pytest.fixture
def namespace(kube):
    name = "gpuops-test-" + uuid.uuid4().hex[:8]
    kube.run("create", "namespace", name)
    yield name
    kube.run("delete", "namespace", name, "--wait=false", check=False)

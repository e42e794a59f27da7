# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pure helpers for the Kubernetes roles' objects: image references (registry mirrors),
the file names of render mode, and why a rollout is not complete, in an operator's words.
No I/O; the roles apply the objects with kubernetes.core."""

from __future__ import annotations

import json
import re

from ansible_collections.gpuops.nvidia.plugins.module_utils.k8s import node_labels

__metaclass__ = type

# render mode writes one file per object; `kubectl apply -f DIR` reads them in name order, so the
# name starts with a rank that puts what others need first
RANK = {
    "Namespace": 0,
    "CustomResourceDefinition": 1,
    "PriorityClass": 2,
    "RuntimeClass": 2,
    "ServiceAccount": 10,
    "ClusterRole": 11,
    "ClusterRoleBinding": 12,
    "Role": 13,
    "RoleBinding": 14,
    "ConfigMap": 20,
    "Secret": 20,
    "Service": 30,
    "Deployment": 40,
    "DaemonSet": 40,
    "ServiceMonitor": 50,
}
DEFAULT_RANK = 60

_DIGEST = re.compile(r"^sha256:[0-9a-f]{64}$")
_NAME = re.compile(r"^[a-z0-9]+(?:[._-][a-z0-9]+)*(?:/[a-z0-9]+(?:[._-][a-z0-9]+)*)*$")
_TAG = re.compile(r"^[A-Za-z0-9_][A-Za-z0-9_.-]{0,127}$")


def split_image(image: str) -> dict:
    """`registry/repository[:tag][@digest]` as its parts. The first path element is a registry
    when it has a dot or a colon or is `localhost` (as container tools read it)."""
    if not isinstance(image, str) or not image.strip():
        raise ValueError("an image must be a non-empty string such as nvcr.io/nvidia/k8s-device-plugin:v0.20.0")
    rest = image.strip()
    digest = None
    if "@" in rest:
        rest, digest = rest.split("@", 1)
        if not _DIGEST.match(digest):
            raise ValueError(f"image {image!r}: the digest must be sha256:<64 hex digits>, not {digest!r}")
    tag = None
    last = rest.rsplit("/", 1)[-1]
    if ":" in last:
        rest, tag = rest.rsplit(":", 1)
        if not _TAG.match(tag):
            raise ValueError(f"image {image!r}: {tag!r} is not a valid tag")
    registry = None
    first, sep, path = rest.partition("/")
    if sep and ("." in first or ":" in first or first == "localhost"):
        registry, rest = first, path
    if not _NAME.match(rest):
        raise ValueError(f"image {image!r}: {rest!r} is not a valid repository path (lower case, / separated)")
    if tag is None and digest is None:
        raise ValueError(f"image {image!r} has neither a tag nor a digest: pin one (:v1.2.3 or @sha256:...)")
    return {"registry": registry, "repository": rest, "tag": tag, "digest": digest}


_REGISTRY = re.compile(r"^[a-z0-9]([a-z0-9.-]*[a-z0-9])?(:[0-9]{1,5})?(/[a-z0-9]+(?:[._-][a-z0-9]+)*)*$")


def registry_problem(registry: str | None) -> str | None:
    """Why REGISTRY (gpuops_image_registry) cannot prefix an image reference, or None."""
    text = (registry or "").strip().rstrip("/")
    if not text:
        return None
    if "://" in text:
        return (f"{registry!r} has a scheme; give the registry as host[:port][/path], "
                "e.g. mirror.example:5000/nvidia")
    if not _REGISTRY.match(text):
        return (f"{registry!r} is not a registry host[:port][/path] in lower case without spaces, "
                "e.g. mirror.example:5000/nvidia")
    return None


def image_problem(image, registry: str | None = None, name: str = "image") -> str | None:
    """Why the image variable NAME (with the registry mirror REGISTRY) is unusable, or None."""
    problem = registry_problem(registry)
    if problem:
        return f"gpuops_image_registry: {problem}"
    try:
        image_ref(image, registry)
    except ValueError as exc:
        return f"{name}: {exc}"
    return None


def image_ref(image: str, registry: str | None = None) -> str:
    """IMAGE with its registry replaced by REGISTRY (an air-gapped mirror such as
    `mirror.example:5000` or `mirror.example/nvcr` with a path prefix) when one is given."""
    parts = split_image(image)
    problem = registry_problem(registry)
    if problem:
        raise ValueError(problem)
    reg = (registry or "").strip().rstrip("/") or parts["registry"]
    text = (reg + "/" if reg else "") + parts["repository"]
    if parts["tag"]:
        text += ":" + parts["tag"]
    if parts["digest"]:
        text += "@" + parts["digest"]
    return text


# Kubernetes' own name rules (apimachinery validation): a namespace is a DNS-1123 label, most
# other objects' names (priority and runtime classes) DNS-1123 subdomains
_NAME_RULES = {
    "label": (re.compile(r"^[a-z0-9]([-a-z0-9]*[a-z0-9])?$"), 63,
              "lower-case letters, digits and '-', starting and ending with a letter or digit"),
    "subdomain": (re.compile(r"^[a-z0-9]([-a-z0-9.]*[a-z0-9])?$"), 253,
                  "lower-case letters, digits, '-' and '.', starting and ending with a letter or digit"),
}


def name_errors(names: dict) -> list:
    """Why each value is no Kubernetes name of its kind, before it is rendered into an object:
    NAMES is {variable: [value, kind]}, kind 'label' or 'subdomain' (with a trailing '?': may be
    empty). A value with a line break or a YAML character could otherwise add fields."""
    errors = []
    for variable, (value, kind) in sorted(names.items()):
        optional = kind.endswith("?")
        pattern, longest, rule = _NAME_RULES[kind.rstrip("?")]
        if optional and value in ("", None):
            continue
        if not isinstance(value, str) or "\n" in value or not pattern.match(value) or len(value) > longest:
            errors.append("%s is %s, which is no Kubernetes name: use at most %d %s" % (variable, json.dumps(value)
                          if isinstance(value, str) else repr(value), longest, rule))
    return errors


def render_name(obj: dict) -> str:
    """The file name render mode gives OBJ: rank, kind, name (and namespace when there is one)."""
    kind = obj.get("kind") or "Object"
    meta = obj.get("metadata") or {}
    name = meta.get("name") or "unnamed"
    parts = [f"{RANK.get(kind, DEFAULT_RANK):02d}", kind.lower()]
    if meta.get("namespace"):
        parts.append(meta["namespace"])
    parts.append(name)
    return re.sub(r"[^A-Za-z0-9_.-]", "_", "-".join(parts)) + ".yaml"


def _pod_reason(pod: dict) -> str:
    status = pod.get("status") or {}
    phase = status.get("phase") or "Unknown"
    for key in ("initContainerStatuses", "containerStatuses"):
        for item in status.get(key) or []:
            state = item.get("state") or {}
            waiting = state.get("waiting")
            if waiting:
                text = f"container {item.get('name')} waiting: {waiting.get('reason', '?')}"
                if waiting.get("message"):
                    text += f" ({waiting['message'][:300]})"
                if item.get("restartCount"):
                    text += f", {item['restartCount']} restarts"
                last = (item.get("lastState") or {}).get("terminated")
                if last:
                    text += f"; last exit {last.get('exitCode')}"
                    if last.get("message"):
                        text += f": {last['message'].strip()[-400:]}"
                return f"{phase}; {text}"
            term = state.get("terminated")
            if term and term.get("exitCode", 0) != 0:
                return (f"{phase}; container {item.get('name')} exited {term.get('exitCode')} "
                        f"({term.get('reason', '')})")
            if key == "containerStatuses" and not item.get("ready"):
                return f"{phase}; container {item.get('name')} not ready"
    for cond in status.get("conditions") or []:
        if cond.get("status") != "True" and cond.get("message"):
            return f"{phase}; {cond.get('type')}: {cond['message'][:300]}"
    return phase


def rollout_problems(workload: str, pods: list, events: list, nodes: list) -> list:
    """Why WORKLOAD is not ready on NODES: for each node, its pod's state and the newest warning
    events of that pod; nodes without a pod are named as such."""
    by_node = {}
    for pod in pods or []:
        node = (pod.get("spec") or {}).get("nodeName")
        if node:
            by_node.setdefault(node, []).append(pod)
    warnings = {}
    for event in events or []:
        if event.get("type") != "Warning":
            continue
        ref = event.get("involvedObject") or {}
        warnings.setdefault(ref.get("name"), []).append(event)
    lines = []
    for node in nodes or sorted(by_node):
        node_pods = by_node.get(node, [])
        if not node_pods:
            lines.append(f"{node}: no {workload} pod (check the node's labels, taints and the DaemonSet's "
                         "nodeSelector and tolerations)")
            continue
        for pod in node_pods:
            if pod_ready(pod):
                continue
            name = pod["metadata"]["name"]
            text = f"{node}: pod {name} {_pod_reason(pod)}"
            latest = sorted(warnings.get(name, []), key=lambda e: e.get("lastTimestamp") or e.get("eventTime") or "")
            if latest:
                last = latest[-1]
                text += f"; event {last.get('reason')}: {(last.get('message') or '')[:300]}"
            lines.append(text)
    return lines


def pod_ready(pod: dict) -> bool:
    """Whether the pod is Running and its Ready condition True."""
    status = pod.get("status") or {}
    if status.get("phase") != "Running":
        return False
    conds = {c.get("type"): c.get("status") for c in status.get("conditions") or []}
    return conds.get("Ready") == "True"


def selector(labels: dict | None) -> list:
    """A label selector (matchLabels) as the `key=value` strings kubernetes.core takes."""
    return [f"{key}={value}" for key, value in sorted((labels or {}).items())]


def pods_not_ready(pods: list) -> list:
    """Names and reasons of the pods in PODS that are not Running and Ready."""
    return [f"{p['metadata']['name']}: {_pod_reason(p)}" for p in pods or [] if not pod_ready(p)]


NFD_ANNOTATION_PREFIX = "nfd.node.kubernetes.io/"
NFD_DEFAULT_LABEL_NS = "feature.node.kubernetes.io/"


def nfd_cleanup_patch(node: dict) -> list:
    """The JSON patch that removes what Node Feature Discovery's master put on NODE: the labels
    its `feature-labels` annotation lists (names without a namespace are NFD's own
    feature.node.kubernetes.io ones) and its nfd.node.kubernetes.io annotations. For removing an
    NFD this collection deployed: NFD leaves them behind when it goes."""
    meta = node.get("metadata") or {}
    labels = meta.get("labels") or {}
    annotations = meta.get("annotations") or {}
    listed = [name.strip() for name in annotations.get(NFD_ANNOTATION_PREFIX + "feature-labels", "").split(",")
              if name.strip()]
    ops = []
    for name in listed:
        key = name if "/" in name else NFD_DEFAULT_LABEL_NS + name
        if key in labels:
            ops.append({"op": "remove", "path": "/metadata/labels/" + node_labels.escape(key)})
    for key in sorted(annotations):
        if key.startswith(NFD_ANNOTATION_PREFIX):
            ops.append({"op": "remove", "path": "/metadata/annotations/" + node_labels.escape(key)})
    return ops


MANAGED_BY = ("app.kubernetes.io/managed-by", "gpuops.nvidia")
# cluster-scoped objects others may have made first (the GPU Operator, RKE2 and k3s ship an
# nvidia RuntimeClass; an NFD install brings its CRDs): never taken over, never deleted
SHARED_KINDS = ("Namespace", "RuntimeClass", "PriorityClass", "CustomResourceDefinition")


def object_key(obj: dict) -> str:
    meta = obj.get("metadata") or {}
    return f"{obj.get('kind')}/{meta.get('name')}"


def foreign(results: list) -> list:
    """From k8s_info results (one per shared object of a role, registered in a loop): the objects
    that exist and were not made by this collection (no managed-by label of ours), as Kind/name."""
    keys = []
    for result in results or []:
        for obj in result.get("resources") or []:
            labels = (obj.get("metadata") or {}).get("labels") or {}
            if labels.get(MANAGED_BY[0]) != MANAGED_BY[1]:
                keys.append(object_key(obj))
    return sorted(set(keys))


def without(objs: list, keys: list) -> list:
    """OBJS less the ones named in KEYS (Kind/name)."""
    skip = set(keys or [])
    return [o for o in objs or [] if object_key(o) not in skip]

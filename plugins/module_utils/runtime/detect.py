# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which container runtime a node actually uses, and why: the kubelet's
--container-runtime-endpoint when there is a kubelet, else the runtime service that runs, else
what is installed. Docker's packages install (and run) containerd too, so "containerd is there"
says nothing about a Docker node. Pure functions over what module_utils readers found, the
readers of the kubelet's configuration under a root directory, and probe(): the one look at the
node's runtimes (binaries, versions, services) that container_runtime_info and node_audit share.
The one table of where each runtime's configuration lives (CONFIG_FILES) and of CDI minimums."""

from __future__ import annotations

import os
import re

__metaclass__ = type

from ansible_collections.gpuops.nvidia.plugins.module_utils.host import commands
from ansible_collections.gpuops.nvidia.plugins.module_utils.report import findings as fnd

RUNTIMES = ("containerd", "crio", "docker")
NAMES = {"containerd": "containerd", "crio": "CRI-O", "docker": "Docker"}
BINARIES = {"containerd": "containerd", "crio": "crio", "docker": "dockerd"}
SERVICES = {"containerd": "containerd.service", "crio": "crio.service", "docker": "docker.service"}
# Each runtime's main configuration file and the NVIDIA drop-in this collection writes beside it
# (None: Docker's daemon.json is merged in place); the drop-in's directory is what the runtime reads.
CONFIG_FILES = {
    "containerd": ("/etc/containerd/config.toml", "/etc/containerd/conf.d/99-nvidia.toml"),
    "crio": ("/etc/crio/crio.conf", "/etc/crio/crio.conf.d/99-nvidia.toml"),
    "docker": ("/etc/docker/daemon.json", None),
}
BINARY_DIRS = ["/usr/local/bin", "/usr/bin", "/usr/sbin"]
# CDI: containerd 1.7 (keys honoured), CRI-O 1.23 (on by default), Docker 25 (features.cdi).
CDI_MIN = {"containerd": (1, 7), "crio": (1, 23), "docker": (25, 0)}
# Where kubelets are told their runtime endpoint (kubeadm, distribution defaults, config file).
KUBELET_FLAG_FILES = ("var/lib/kubelet/kubeadm-flags.env", "etc/default/kubelet", "etc/sysconfig/kubelet")
KUBELET_CONFIG_FILES = ("var/lib/kubelet/config.yaml", "etc/kubernetes/kubelet-config.yaml",
                        "etc/kubernetes/kubelet/config.yaml")

_ENDPOINT_FLAG_RE = re.compile(r"--container-runtime-endpoint[= ]\s*[\"']?([^\s\"']+)")
_CONFIG_FLAG_RE = re.compile(r"--config[= ]\s*[\"']?([^\s\"']+)")
# YAML (containerRuntimeEndpoint: unix://...) and JSON ("containerRuntimeEndpoint": "unix://...")
_ENDPOINT_CONFIG_RE = re.compile(r"^\s*[\"']?containerRuntimeEndpoint[\"']?\s*:\s*[\"']?([^\s\"',#]+)", re.M)
# The kubelet's own default since Kubernetes 1.24 (dockershim removed): containerd's socket.
KUBELET_DEFAULT_ENDPOINT = "unix:///run/containerd/containerd.sock"


def parse_version(text: str | None) -> tuple | None:
    """'containerd containerd.io 1.7.27 05044ec...' / 'crio version 1.34.0' / 'Docker version
    26.1.5+dfsg1, build ...' -> (1, 7, 27); None when there is no version in it."""
    match = re.search(r"(?:^|[\s v])(\d+)\.(\d+)(?:\.(\d+))?", text or "")
    return tuple(int(part or 0) for part in match.groups()) if match else None


def runtime_of_endpoint(endpoint: str | None) -> str | None:
    """The runtime behind a CRI endpoint (unix:///run/containerd/containerd.sock -> containerd)."""
    path = (endpoint or "").lower()
    if "containerd" in path:
        return "containerd"
    if "crio" in path or "cri-o" in path:
        return "crio"
    if "dockerd" in path or "dockershim" in path or "docker" in path:
        return "docker"
    return None


def _endpoint_in(path):
    try:
        with open(path, encoding="utf-8", errors="replace") as handle:
            text = handle.read()
    except OSError:
        return None
    match = _ENDPOINT_FLAG_RE.search(text) or _ENDPOINT_CONFIG_RE.search(text)
    return match.group(1) if match else None


def kubelet_endpoint(root: str = "/") -> tuple:
    """(endpoint, where it was read) of the kubelet's runtime endpoint, or (None, None): the
    running kubelet's command line (its --container-runtime-endpoint, else the file of its
    --config, else the kubelet's default), then kubeadm's flags file and the kubelet config."""
    proc = os.path.join(root, "proc")
    for pid in sorted(os.listdir(proc)) if os.path.isdir(proc) else []:
        if not pid.isdigit():
            continue
        try:
            with open(os.path.join(proc, pid, "cmdline"), "rb") as handle:
                argv = handle.read().split(b"\0")
        except OSError:
            continue
        if argv and os.path.basename(argv[0].decode("utf-8", "replace")) == "kubelet":
            line = " ".join(part.decode("utf-8", "replace") for part in argv)
            match = _ENDPOINT_FLAG_RE.search(line)
            if match:
                return match.group(1), "the running kubelet's --container-runtime-endpoint"
            config = _CONFIG_FLAG_RE.search(line)
            endpoint = _endpoint_in(os.path.join(root, config.group(1).lstrip("/"))) if config else None
            if endpoint:
                return endpoint, "%s (the running kubelet's --config)" % config.group(1)
            return KUBELET_DEFAULT_ENDPOINT, "the running kubelet's default endpoint (it names none)"
    for rel in KUBELET_FLAG_FILES + KUBELET_CONFIG_FILES + ("etc/kubernetes/kubelet/kubelet-config.json",):
        endpoint = _endpoint_in(os.path.join(root, rel))
        if endpoint:
            return endpoint, "/" + rel
    return None, None


def cdi_supported(runtime: str, version: tuple | None) -> bool | None:
    """Whether that runtime version can do CDI; None when the version is unknown."""
    if version is None:
        return None
    return tuple(version[:2]) >= CDI_MIN[runtime]


def _listed(names) -> str:
    return ", ".join(NAMES[name] for name in names) or "none"


def choose(requested: str, installed: dict, active: list, endpoint: str | None, endpoint_source: str | None) -> dict:
    """The runtime to configure. installed: {runtime: version tuple or None} of the runtimes
    whose binary is there; active: runtimes whose service runs. Returns {'runtime' (None when
    there is none to configure), 'reason', 'problems' [findings], 'warnings' [messages]}."""
    problems, warnings = [], []
    install = "install containerd, CRI-O or Docker first, or name the runtime the node uses"
    kubelet_runtime = runtime_of_endpoint(endpoint)
    if requested != "auto":
        runtime = requested
        reason = "%s was asked for" % NAMES[runtime]
        if runtime not in installed:
            problems.append(fnd.finding("runtime_not_installed", "error", "%s is not installed (no %s binary); installed: %s"
                                        % (NAMES[runtime], BINARIES[runtime], _listed(sorted(installed))),
                                        "install %s first, or name the runtime the node uses" % NAMES[runtime],
                                        subject=runtime))
        if kubelet_runtime and kubelet_runtime != runtime:
            warnings.append("%s was asked for, but the kubelet uses %s (%s is %s)"
                            % (NAMES[runtime], NAMES[kubelet_runtime], endpoint_source, endpoint))
        return {"runtime": runtime, "reason": reason, "problems": problems, "warnings": warnings}
    if kubelet_runtime:
        runtime = kubelet_runtime
        reason = "the kubelet uses it: %s is %s" % (endpoint_source, endpoint)
        if runtime not in installed:
            problems.append(fnd.finding("runtime_not_installed", "error", "the kubelet's runtime endpoint %s is %s's, "
                                        "which is not installed" % (endpoint, NAMES[runtime]),
                                        "install %s, or point the kubelet at the runtime the node has" % NAMES[runtime],
                                        subject=runtime))
    elif "docker" in active:
        runtime = "docker"
        reason = "docker.service is active" + (
            " (the containerd that runs beside it is Docker's own)" if "containerd" in active else "")
    elif len([name for name in active if name in ("containerd", "crio")]) > 1:
        runtime = None
        reason = "containerd and CRI-O both run and no kubelet says which one it uses"
        problems.append(fnd.finding("runtime_ambiguous", "error", reason, "name the runtime to configure", subject="node"))
    elif active:
        runtime = active[0]
        reason = "%s is active" % SERVICES[runtime]
    elif installed:
        runtime = "docker" if "docker" in installed else "crio" if "crio" in installed else "containerd"
        reason = "%s is installed (not running); installed: %s" % (NAMES[runtime], _listed(sorted(installed)))
    else:
        runtime = None
        reason = "no container runtime is installed (looked for containerd, crio and dockerd)"
        problems.append(fnd.finding("no_runtime", "error", reason, install, subject="node"))
    return {"runtime": runtime, "reason": reason, "problems": problems, "warnings": warnings}


def probe(module, requested: str = "auto", root: str = "/") -> dict:
    """What the node has: {'installed': {runtime: {binary, version (tuple or None), active}},
    'active': [runtimes whose service runs], 'endpoint', 'endpoint_source', and 'choice' (choose()'s
    answer for requested)."""
    installed, active = {}, []
    systemctl = module.get_bin_path("systemctl")
    for runtime in RUNTIMES:
        binary = module.get_bin_path(BINARIES[runtime], opt_dirs=BINARY_DIRS)
        running = bool(systemctl) and commands.output(module, [systemctl, "is-active", SERVICES[runtime]]).strip() == "active"
        if running:
            active.append(runtime)
        if binary:
            installed[runtime] = {"binary": binary, "active": running,
                                  "version": parse_version(commands.output(module, [binary, "--version"]))}
    endpoint, source = kubelet_endpoint(root)
    versions = {runtime: found["version"] for runtime, found in installed.items()}
    return {"installed": installed, "active": active, "endpoint": endpoint, "endpoint_source": source,
            "choice": choose(requested, versions, active, endpoint, source)}


def report(module, requested: str = "auto", root: str = "/") -> dict:
    """The runtime to configure for a request, as container_runtime_info and the pre-flight return
    it: runtime, reason, version and cdi_supported of the chosen one, every runtime installed (versions
    as text), the kubelet's endpoint, problems, warnings, and the request itself."""
    found = probe(module, requested, root)
    choice = found["choice"]
    chosen = choice["runtime"]
    installed = {runtime: dict(item, version=".".join(map(str, item["version"])) if item["version"] else None)
                 for runtime, item in found["installed"].items()}
    return {
        "requested": requested,
        "runtime": chosen,
        "reason": choice["reason"],
        "version": (installed.get(chosen) or {}).get("version"),
        "cdi_supported": cdi_supported(chosen, (found["installed"].get(chosen) or {}).get("version")) if chosen
        else None,
        "installed": installed,
        "kubelet_endpoint": {"endpoint": found["endpoint"], "source": found["endpoint_source"]},
        "problems": choice["problems"],
        "warnings": choice["warnings"],
    }

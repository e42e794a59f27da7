# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Which runtime a node uses: the kubelet's endpoint, then the running service, then what is
installed. A Docker node has containerd installed and running too."""
from __future__ import annotations

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime import detect

C16, C17, CRIO, D26 = (1, 6, 20), (1, 7, 24), (1, 34, 0), (26, 1, 5)


@pytest.mark.parametrize("installed, active, endpoint, runtime, reason", [
    # Docker's packages bring containerd along: both installed and running
    ({"containerd": C17, "docker": D26}, ["containerd", "docker"], None, "docker",
     "docker.service is active (the containerd that runs beside it is Docker's own)"),
    ({"containerd": C17, "docker": D26}, [], None, "docker", "Docker is installed (not running); installed: containerd, Docker"),
    ({"containerd": C16}, ["containerd"], None, "containerd", "containerd.service is active"),
    ({"crio": CRIO}, ["crio"], None, "crio", "crio.service is active"),
    ({"containerd": C17, "crio": CRIO}, [], None, "crio", "CRI-O is installed (not running); installed: containerd, CRI-O"),
    # a kubelet settles it, whatever else runs
    ({"containerd": C17, "docker": D26}, ["containerd", "docker"], "unix:///run/containerd/containerd.sock", "containerd",
     "the kubelet uses it: /var/lib/kubelet/kubeadm-flags.env is unix:///run/containerd/containerd.sock"),
    ({"containerd": C17, "docker": D26}, ["containerd", "docker"], "unix:///var/run/cri-dockerd.sock", "docker",
     "the kubelet uses it: /var/lib/kubelet/kubeadm-flags.env is unix:///var/run/cri-dockerd.sock"),
    ({"containerd": C17, "crio": CRIO}, ["containerd", "crio"], "unix:///var/run/crio/crio.sock", "crio",
     "the kubelet uses it: /var/lib/kubelet/kubeadm-flags.env is unix:///var/run/crio/crio.sock"),
])
def test_auto_chooses_the_runtime_the_node_uses(installed, active, endpoint, runtime, reason):
    choice = detect.choose("auto", installed, active, endpoint, "/var/lib/kubelet/kubeadm-flags.env")
    assert (choice["runtime"], choice["reason"], choice["problems"]) == (runtime, reason, [])


def test_nothing_to_configure_and_ambiguous_nodes_are_problems():
    none = detect.choose("auto", {}, [], None, None)
    assert none["runtime"] is None
    assert [(p["code"], p["message"]) for p in none["problems"]] == [
        ("no_runtime", "no container runtime is installed (looked for containerd, crio and dockerd)")]
    both = detect.choose("auto", {"containerd": C17, "crio": CRIO}, ["containerd", "crio"], None, None)
    assert both["runtime"] is None and [p["message"] for p in both["problems"]] == [
        "containerd and CRI-O both run and no kubelet says which one it uses"]


def test_a_runtime_asked_for_must_be_installed():
    choice = detect.choose("crio", {"containerd": C16}, ["containerd"], None, None)
    assert choice["runtime"] == "crio"
    assert [(p["code"], p["message"], p["fix"]) for p in choice["problems"]] == [
        ("runtime_not_installed", "CRI-O is not installed (no crio binary); installed: containerd",
         "install CRI-O first, or name the runtime the node uses")]
    other = detect.choose("containerd", {"containerd": C17, "crio": CRIO}, ["crio"],
                          "unix:///var/run/crio/crio.sock", "/var/lib/kubelet/config.yaml")
    assert other["problems"] == []
    assert other["warnings"] == ["containerd was asked for, but the kubelet uses CRI-O "
                                 "(/var/lib/kubelet/config.yaml is unix:///var/run/crio/crio.sock)"]


@pytest.mark.parametrize("runtime, version, supported", [
    ("containerd", (1, 6, 20), False), ("containerd", (1, 7, 0), True), ("containerd", (2, 1, 4), True),
    ("docker", (24, 0, 9), False), ("docker", (25, 0, 0), True), ("crio", (1, 22, 5), False), ("crio", (1, 34, 0), True),
    ("containerd", None, None),
])
def test_cdi_supported(runtime, version, supported):
    assert detect.cdi_supported(runtime, version) is supported


@pytest.mark.parametrize("text, version", [
    ("containerd github.com/containerd/containerd 1.6.20~ds1 1.6.20~ds1-1+b1", (1, 6, 20)),
    ("containerd containerd.io v1.7.27 05044ec0a9a75232cad458027ca83437aae3f4da", (1, 7, 27)),
    ("crio version 1.34.0", (1, 34, 0)),
    ("Docker version 26.1.5+dfsg1, build a72d7cd", (26, 1, 5)),
    ("Docker version 20.10.24+dfsg1, build 5d6db84", (20, 10, 24)),
    ("Docker version 28.0, build abc", (28, 0, 0)),
    ("containerd v2.1.4", (2, 1, 4)),
    ("dockerd: unknown", None),
    ("no version", None),
])
def test_parse_version(text, version):
    assert detect.parse_version(text) == version


def test_kubelet_endpoint_from_its_files_and_process(tmp_path):
    assert detect.kubelet_endpoint(str(tmp_path)) == (None, None)
    config = tmp_path / "var" / "lib" / "kubelet"
    config.mkdir(parents=True)
    (config / "config.yaml").write_text("kind: KubeletConfiguration\ncontainerRuntimeEndpoint: unix:///var/run/crio/crio.sock\n")
    assert detect.kubelet_endpoint(str(tmp_path)) == ("unix:///var/run/crio/crio.sock", "/var/lib/kubelet/config.yaml")
    (config / "kubeadm-flags.env").write_text(
        'KUBELET_KUBEADM_ARGS="--container-runtime-endpoint=unix:///run/containerd/containerd.sock --pod-infra-container-image=x"\n')
    assert detect.kubelet_endpoint(str(tmp_path))[0] == "unix:///run/containerd/containerd.sock"
    proc = tmp_path / "proc" / "4242"
    proc.mkdir(parents=True)
    (proc / "cmdline").write_bytes(b"/usr/bin/kubelet\0--container-runtime-endpoint\0unix:///var/run/cri-dockerd.sock\0")
    assert detect.kubelet_endpoint(str(tmp_path)) == ("unix:///var/run/cri-dockerd.sock",
                                                      "the running kubelet's --container-runtime-endpoint")


def test_a_running_kubelet_without_the_flag(tmp_path):
    """Its --config file names the endpoint (JSON, as EKS writes it), else the kubelet's default."""
    proc = tmp_path / "proc" / "77"
    proc.mkdir(parents=True)
    (proc / "cmdline").write_bytes(b"/usr/bin/kubelet\0--config\0/etc/kubernetes/kubelet/kubelet-config.json\0")
    assert detect.kubelet_endpoint(str(tmp_path)) == (detect.KUBELET_DEFAULT_ENDPOINT,
                                                      "the running kubelet's default endpoint (it names none)")
    (tmp_path / "etc" / "kubernetes" / "kubelet").mkdir(parents=True)
    (tmp_path / "etc" / "kubernetes" / "kubelet" / "kubelet-config.json").write_text(
        '{"kind": "KubeletConfiguration",\n "containerRuntimeEndpoint": "unix:///run/containerd/containerd.sock"}\n')
    assert detect.kubelet_endpoint(str(tmp_path)) == (
        "unix:///run/containerd/containerd.sock", "/etc/kubernetes/kubelet/kubelet-config.json (the running kubelet's --config)")

# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""apt's output read as an operator reads it. The samples are apt 2.6's (Debian 12) own words."""
from __future__ import annotations

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils.apt import parse as apt

SOURCES = {
    "http://127.0.0.1:8765/cuda": "/etc/apt/sources.list.d/gpuops-nvidia-cuda.sources",
    "http://127.0.0.1:8765/toolkit/stable/deb/amd64":
        "/etc/apt/sources.list.d/gpuops-nvidia-container-toolkit.sources",
    "http://deb.debian.org/debian": "/etc/apt/sources.list.d/debian.sources",
}

ROTATED = """Hit:1 http://deb.debian.org/debian bookworm InRelease
Get:2 http://127.0.0.1:8765/toolkit/stable/deb/amd64  InRelease [1523 B]
Err:2 http://127.0.0.1:8765/toolkit/stable/deb/amd64  InRelease
  The following signatures couldn't be verified because the public key is not available: NO_PUBKEY 6B4E1C2D9A8F7E3B
Reading package lists...
W: GPG error: http://127.0.0.1:8765/toolkit/stable/deb/amd64  InRelease: The following signatures couldn't \
be verified because the public key is not available: NO_PUBKEY 6B4E1C2D9A8F7E3B
E: The repository 'http://127.0.0.1:8765/toolkit/stable/deb/amd64  InRelease' is not signed.
"""

NOT_FOUND = """Ign:1 http://127.0.0.1:8765/cuda  InRelease
Err:2 http://127.0.0.1:8765/cuda  Release
  404  Not Found [IP: 127.0.0.1 8765]
Reading package lists...
E: The repository 'http://127.0.0.1:8765/cuda  Release' does not have a Release file.
"""

PROXY = """Err:1 http://127.0.0.1:8765/cuda  InRelease
  Could not connect to proxy.internal.example:3128 (10.0.0.9). - connect (111: Connection refused)
W: Failed to fetch http://127.0.0.1:8765/cuda/InRelease  Could not connect to proxy.internal.example:3128 (10.0.0.9). - connect (111: Connection refused)
W: Some index files failed to download. They have been ignored, or old ones used instead.
"""


def test_a_rotated_key_names_the_source_and_the_key():
    problems = apt.update_problems(ROTATED, SOURCES)
    source = "/etc/apt/sources.list.d/gpuops-nvidia-container-toolkit.sources"
    reason = "its Release file is signed with key 6B4E1C2D9A8F7E3B, which the source's keyring does not hold"
    assert problems == [{
        "code": "apt_refresh_key", "severity": "error", "subject": source,
        "message": "%s (http://127.0.0.1:8765/toolkit/stable/deb/amd64): %s" % (source, reason),
        "source": source, "url": "http://127.0.0.1:8765/toolkit/stable/deb/amd64", "kind": "key", "reason": reason,
        "fix": "the repository's signing key changed (a key rotation) or the wrong key was given: install the "
               "repository's current key"}]
    message = apt.describe(problems, {"key": "set container_toolkit_repo_key to it"})
    assert message == ("apt could not refresh /etc/apt/sources.list.d/gpuops-nvidia-container-toolkit.sources "
                       "(http://127.0.0.1:8765/toolkit/stable/deb/amd64): its Release file is signed with key "
                       "6B4E1C2D9A8F7E3B, which the source's keyring does not hold; fix: the repository's signing key "
                       "changed (a key rotation) or the wrong key was given: install the repository's current key; "
                       "set container_toolkit_repo_key to it")


@pytest.mark.parametrize("output, kind, reason", [
    (NOT_FOUND, "not_found", "the server answered 404 Not Found"),
    (PROXY, "proxy", "the proxy cannot be reached"),
    ("Err:1 http://127.0.0.1:8765/cuda  InRelease\n  407  Proxy Authentication Required [IP: 10.0.0.9 3128]\n",
     "proxy", "the proxy asks for authentication (407)"),
    ("W: GPG error: http://127.0.0.1:8765/cuda  InRelease: The following signatures were invalid: EXPKEYSIG "
     "A4B469963BF863CC cudatools <cudatools@nvidia.com>\n", "key",
     "its Release file is signed with key A4B469963BF863CC, which has expired"),
    ("Err:1 http://127.0.0.1:8765/cuda  InRelease\n  Could not resolve 'mirror.internal.example'\n", "network",
     "the host name mirror.internal.example does not resolve"),
])
def test_other_reasons(output, kind, reason):
    problems = apt.update_problems(output, SOURCES)
    assert [(p["source"], p["kind"], p["reason"]) for p in problems] == [
        ("/etc/apt/sources.list.d/gpuops-nvidia-cuda.sources", kind, reason)]


def test_a_clean_refresh_has_no_problems():
    assert apt.update_problems("Hit:1 http://deb.debian.org/debian bookworm InRelease\nReading package lists...\n",
                               SOURCES) == []


def test_read_sources(tmp_path):
    listd = tmp_path / "etc" / "apt" / "sources.list.d"
    listd.mkdir(parents=True)
    (listd / "debian.sources").write_text("Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm\n"
                                          "Components: main\n\nTypes: deb\nURIs: http://off.example/x\nSuites: y\n"
                                          "Enabled: no\n")
    (listd / "gpuops-nvidia-cuda.sources").write_text("X-Repolib-Name: gpuops-nvidia-cuda\nTypes: deb\n"
                                                      "URIs: http://127.0.0.1:8765/cuda/\nSuites: /\n"
                                                      "Signed-By: /etc/apt/keyrings/gpuops-nvidia-cuda.asc\n")
    (tmp_path / "etc" / "apt" / "sources.list").write_text(
        "# comment\ndeb [signed-by=/k.gpg arch=amd64] http://legacy.example/repo stable main\n")
    assert apt.read_sources(str(tmp_path)) == {
        "http://legacy.example/repo": "/etc/apt/sources.list",
        "http://deb.debian.org/debian": "/etc/apt/sources.list.d/debian.sources",
        "http://127.0.0.1:8765/cuda": "/etc/apt/sources.list.d/gpuops-nvidia-cuda.sources"}


def test_parse_simulation_and_depends():
    simulation = ("NOTE: This is only a simulation!\nRemv python3-pynvml [11.525.112-1]\n"
                  "Purg nvidia-open [580.95.05-1]\nPurg libnvidia-ml1:amd64 [580.95.05-1]\n")
    assert apt.parse_simulation(simulation) == ["python3-pynvml", "nvidia-open", "libnvidia-ml1"]
    depends = ("python3-pynvml\n  Depends: python3\n |Depends: libnvidia-ml1\n  Depends: <libnvidia-ml.so.1>\n"
               "    gpuops-lab-fake-nvml\npython3\n  Depends: python3.11\n")
    assert apt.parse_depends(depends) == {"python3-pynvml", "python3", "libnvidia-ml1", "gpuops-lab-fake-nvml",
                                          "python3.11"}


def test_arch_in_a_source_uri_and_a_single_source_refresh(tmp_path):
    listd = tmp_path / "etc" / "apt" / "sources.list.d"
    listd.mkdir(parents=True)
    (listd / "gpuops-nvidia-container-toolkit.sources").write_text(
        "Types: deb\nURIs: https://nvidia.github.io/libnvidia-container/stable/deb/$(ARCH)\nSuites: /\n")
    sources = apt.read_sources(str(tmp_path), "amd64")
    assert sources == {"https://nvidia.github.io/libnvidia-container/stable/deb/amd64":
                       "/etc/apt/sources.list.d/gpuops-nvidia-container-toolkit.sources"}
    # a URL no source lists is put on the source being refreshed
    problems = apt.update_problems("Err:1 http://elsewhere.example/x InRelease\n  404  Not Found [IP: 1.2.3.4 80]\n",
                                   {}, default_source="/etc/apt/sources.list.d/x.sources")
    assert [(p["source"], p["kind"]) for p in problems] == [("/etc/apt/sources.list.d/x.sources", "not_found")]


def test_parse_install_simulation_new_upgraded_and_downgraded():
    out = """NOTE: This is only a simulation!
Inst nvidia-kernel-open-dkms (580.95.05-1 gpuops-cuda [amd64])
Inst nvidia-open [570.172.08-1] (580.95.05-1 gpuops-cuda [amd64])
Inst libfoo:amd64 [2.0] (1.9 stable [amd64])
Conf nvidia-open (580.95.05-1 gpuops-cuda [amd64])
"""
    assert apt.parse_install_simulation(out) == [("nvidia-kernel-open-dkms", "580.95.05-1"),
                                                 ("nvidia-open", "580.95.05-1"), ("libfoo", "1.9")]
    assert apt.parse_install_simulation("0 upgraded, 0 newly installed") == []


def test_parse_policy_installed_and_candidate_as_apt_cache_prints_them():
    # apt-cache policy of the lab's H100 node, its driver pinned to 570.172.08 (priority 1001)
    out = """nvidia-open:
  Installed: 570.172.08-1
  Candidate: 570.172.08-1
  Version table:
     580.95.05-1 500
        500 http://127.0.0.1:8765/cuda  Packages
 *** 570.172.08-1 1001
        100 /var/lib/dpkg/status
nvidia-persistenced:
  Installed: (none)
  Candidate: 580.95.05-1
  Version table:
     580.95.05-1 500
"""
    assert apt.parse_policy(out) == {"nvidia-open": ("570.172.08-1", "570.172.08-1"),
                                     "nvidia-persistenced": (None, "580.95.05-1")}
    assert apt.parse_policy("") == {}


def test_install_record_grows_and_keeps_what_earlier_runs_added():
    first = apt.install_record(None, "driver", ["nvidia-open"], ["nvidia-open", "dkms"])
    assert first == {"owner": "driver", "requires": ["nvidia-open"], "added": ["dkms", "nvidia-open"]}
    again = apt.install_record(first, "driver", ["nvidia-open", "nvidia-persistenced"], [])
    assert again == {"owner": "driver", "requires": ["nvidia-open", "nvidia-persistenced"],
                     "added": ["dkms", "nvidia-open"]}


def test_the_source_and_the_pin_as_the_lab_nodes_have_them():
    # as ansible.builtin.deb822_repository and the packages role wrote them on the lab's nodes
    assert apt.deb822_source("gpuops-nvidia-cuda", "http://127.0.0.1:8765/cuda/",
                             "/etc/apt/keyrings/gpuops-nvidia-cuda.asc") == (
        "X-Repolib-Name: gpuops-nvidia-cuda\nSigned-By: /etc/apt/keyrings/gpuops-nvidia-cuda.asc\nSuites: /\n"
        "Types: deb\nURIs: http://127.0.0.1:8765/cuda/\n")
    assert apt.pin_text("gpuops-nvidia-driver", ["cuda-drivers", "nvidia-*"], "570.172.08-*") == (
        "Explanation: Managed by gpuops.nvidia (gpuops-nvidia-driver): these packages resolve to 570.172.08-*\n"
        "Package: cuda-drivers nvidia-*\nPin: version 570.172.08-*\nPin-Priority: 1001\n")


def test_a_branch_change_retires_the_old_branchs_packages():
    before = ["nvidia-open", "nvidia-fabricmanager-570", "cuda-drivers-570", "python3-pynvml", "libnvidia-nscq-570"]
    names = ["nvidia-open", "nvidia-fabricmanager-580", "python3-pynvml"]
    installed = {"nvidia-open": "570.172.08-1", "nvidia-fabricmanager-570": "570.172.08-1", "cuda-drivers-570": "x"}
    assert apt.retired_branch_packages(before, names, installed) == ["cuda-drivers-570", "nvidia-fabricmanager-570"]
    record = apt.install_record({"requires": before, "added": before}, "driver", names, [], retired=["nvidia-fabricmanager-570"])
    assert "nvidia-fabricmanager-570" not in record["requires"] and "nvidia-fabricmanager-580" in record["requires"]

# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""apt's commands: a failed refresh names the source, apt's reason and the fix; a tolerated source
only warns; simulations are read into what would change; apt's own reason is what a failure says.
apt itself is scripted here (apt 2.6's words); the real apt runs in tests/integration."""
from __future__ import annotations

import os
import time

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils.apt import ops

CUDA = "/etc/apt/sources.list.d/gpuops-nvidia-cuda.sources"
TOOLKIT = "/etc/apt/sources.list.d/gpuops-nvidia-container-toolkit.sources"
SOURCES = {"http://127.0.0.1:8765/cuda": CUDA, "http://127.0.0.1:8765/toolkit/stable/deb/amd64": TOOLKIT}

NOT_FOUND = """Ign:1 http://127.0.0.1:8765/cuda  InRelease
Err:2 http://127.0.0.1:8765/cuda  Release
  404  Not Found [IP: 127.0.0.1 8765]
Reading package lists...
E: The repository 'http://127.0.0.1:8765/cuda  Release' does not have a Release file.
"""
ROTATED = """Err:2 http://127.0.0.1:8765/toolkit/stable/deb/amd64  InRelease
  The following signatures couldn't be verified because the public key is not available: NO_PUBKEY 6B4E1C2D9A8F7E3B
W: GPG error: http://127.0.0.1:8765/toolkit/stable/deb/amd64  InRelease: The following signatures couldn't \
be verified because the public key is not available: NO_PUBKEY 6B4E1C2D9A8F7E3B
E: The repository 'http://127.0.0.1:8765/toolkit/stable/deb/amd64  InRelease' is not signed.
"""


@pytest.fixture
def lists(tmp_path, monkeypatch):
    """apt's lists directory under tmp_path, and this machine's sources replaced by SOURCES."""
    monkeypatch.setattr(ops, "LISTS", str(tmp_path / "lists"))
    monkeypatch.setattr(ops.apt, "read_sources", lambda root, arch=None: dict(SOURCES))
    (tmp_path / "lists").mkdir()
    return tmp_path / "lists"


def apt_module(fake, update):
    return fake({("dpkg", "--print-architecture"): (0, "amd64\n", ""), ("apt-get", "update"): update})


@pytest.mark.parametrize("output, tolerate, strict, failing, kind, hint", [
    (NOT_FOUND, [], [], [CUDA], "not_found", "check driver_repo_url"),
    (ROTATED, [], [], [TOOLKIT], "key", "set container_toolkit_repo_key"),
    (NOT_FOUND + ROTATED, ["*toolkit*"], [], [CUDA], "not_found", ""),
    (ROTATED, ["*toolkit*"], [TOOLKIT], [TOOLKIT], "key", ""),
])
def test_a_failed_refresh_names_the_source_the_reason_and_the_fix(fake, lists, output, tolerate, strict, failing,
                                                                  kind, hint):
    module = apt_module(fake, (100, output, ""))
    with pytest.raises(ops.AptError) as failure:
        ops.refresh(module, tolerate=tolerate, strict=strict, hints={kind: hint} if hint else {})
    assert [p["source"] for p in failure.value.problems] == failing
    assert failure.value.problems[0]["kind"] == kind
    message = str(failure.value)
    assert message.startswith("apt could not refresh %s (" % failing[0]) and "; fix: " in message
    if hint:
        assert message.endswith("; " + hint)
    assert failure.value.result()["problems"] == failure.value.problems


def test_a_tolerated_source_only_warns(fake, lists):
    module = apt_module(fake, (0, ROTATED, ""))
    result = ops.refresh(module, tolerate=["*toolkit*"])
    assert result["changed"] is False and [(p["source"], p["kind"]) for p in result["problems"]] == [(TOOLKIT, "key")]
    assert len(module.warnings) == 1 and module.warnings[0].startswith("apt could not refresh %s" % TOOLKIT)


def test_a_failure_apt_does_not_explain_is_its_last_line(fake, lists):
    module = apt_module(fake, (100, "Reading package lists...\n", "E: Could not get lock /var/lib/apt/lists/lock\n"))
    with pytest.raises(ops.AptError) as failure:
        ops.refresh(module)
    assert [(p["kind"], p["reason"]) for p in failure.value.problems] == [
        ("other", "E: Could not get lock /var/lib/apt/lists/lock")]


def test_one_source_is_refreshed_alone(fake, lists, tmp_path):
    source = tmp_path / "one.sources"
    source.write_text("Types: deb\n")

    def update(argv):
        (lists / "one_InRelease").write_text("new")
        return 0, "", ""
    module = apt_module(fake, update)
    assert ops.refresh(module, sources=[str(source)]) == {"changed": True, "problems": []}
    assert module.ran("apt-get", "update") == [["apt-get", "update", "-q", "-o", "Dir::Etc::sourcelist=%s" % source,
                                                "-o", "Dir::Etc::sourceparts=-", "-o", "APT::Get::List-Cleanup=0"]]
    with pytest.raises(ops.AptError, match="does not exist; add the source before refreshing it"):
        ops.refresh(module, sources=[str(tmp_path / "missing.sources")])


@pytest.mark.parametrize("ages, valid, needed", [
    ([], 3600, True),            # never refreshed
    ([10], 3600, False),
    ([7200], 3600, True),
    ([7200, 10], 3600, False),   # the newest Release counts
    ([10], 0, True),             # 0: every time
])
def test_needs_refresh(lists, ages, valid, needed):
    for number, age in enumerate(ages):
        path = lists / ("site%d_InRelease" % number)
        path.write_text("x")
        os.utime(path, (time.time() - age, time.time() - age))
    (lists / "site_Packages").write_text("not a Release file")
    assert ops.needs_refresh(valid) is needed


SIMULATION = """NOTE: This is only a simulation!
Inst nvidia-kernel-open-dkms (580.95.05-1 gpuops-cuda [amd64])
Inst nvidia-open [570.172.08-1] (580.95.05-1 gpuops-cuda [amd64])
Remv nvidia-fabricmanager-570 [570.172.08-1]
Conf nvidia-open (580.95.05-1 gpuops-cuda [amd64])
"""


def test_simulate_install_reads_what_would_change(fake):
    module = fake({("apt-get", "-s"): (0, SIMULATION, "")})
    assert ops.simulate_install(module, ["nvidia-open"], ["--no-install-recommends"], {"https_proxy": 1}) == [
        ("nvidia-kernel-open-dkms", "580.95.05-1"), ("nvidia-open", "580.95.05-1")]
    assert module.calls == [["apt-get", "-s", "-q", "-y", "--no-install-recommends", "install", "nvidia-open"]]


@pytest.mark.parametrize("out, err, reason", [
    ("", "E: Unable to locate package nvidia-nothing\n", "E: Unable to locate package nvidia-nothing"),
    ("The following packages have unmet dependencies:\n nvidia-open : Depends: nvidia-kernel-open-dkms (= 580) but "
     "it is not going to be installed\n", "E: Unable to correct problems, you have held broken packages.\n",
     # stderr's lines first, then stdout's
     "E: Unable to correct problems, you have held broken packages. | "
     "nvidia-open : Depends: nvidia-kernel-open-dkms (= 580) but it is not going to be installed"),
    ("Reading package lists...\nsomething odd\n", "", "something odd"),
    ("", "", "no output"),
])
def test_a_failed_simulation_says_apts_reason(fake, out, err, reason):
    module = fake({("apt-get", "-s"): (100, out, err)})
    with pytest.raises(ops.AptError) as failure:
        ops.simulate_install(module, ["nvidia-open"], [])
    assert str(failure.value) == "apt cannot install nvidia-open: " + reason
    assert failure.value.changed is False


def test_a_failed_install_is_a_change(fake):
    module = fake({("apt-get",): (100, "", "E: Sub-process /usr/bin/dpkg returned an error code (1)\n")})
    with pytest.raises(ops.AptError) as failure:
        ops.install(module, ["nvidia-open"], [])
    assert failure.value.changed is True and "dpkg returned an error code" in str(failure.value)


def test_simulate_remove_and_depends(fake):
    module = fake({("apt-get", "-s"): (0, "Purg a [1]\nRemv b:amd64 [2]\n", ""),
                   ("apt-cache", "depends"): (0, "a\n  Depends: c\n |Depends: <virtual>\n", "")})
    assert ops.simulate_remove(module, "purge", {"a"}, []) == {"a", "b"}
    assert ops.depends(module, {"a"}) == {"a", "c"}
    assert ops.depends(module, set()) == set()
    assert len(module.ran("apt-cache")) == 1


def test_a_failed_removal_carries_its_details(fake):
    module = fake({("apt-get",): (100, "", "E: boom\n")})
    with pytest.raises(ops.AptError) as failure:
        ops.remove(module, "purge", {"a"}, [], details={"removed": ["a"], "changed": True})
    assert failure.value.result() == {"msg": "apt-get could not remove a: E: boom", "problems": [], "changed": True,
                                      "removed": ["a"]}

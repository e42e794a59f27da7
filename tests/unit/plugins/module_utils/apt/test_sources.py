# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A repository, its key and its pin: the options checked, the files planned, and applied under a
temporary directory with apt's refresh scripted (the real apt runs in
tests/integration/test_apt_source.py and test_repo_key.py)."""
from __future__ import annotations

import os

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils.apt import ops, sources

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "repo-keys.asc")
URL = "http://127.0.0.1:8765/cuda/"
PIN = {"name": "gpuops-nvidia-driver", "packages": ["nvidia-*"], "version": "580.*"}


def key():
    with open(FIXTURE, "rb") as handle:
        return handle.read()


def params(**overrides):
    base = {"name": "gpuops-nvidia-cuda", "url": URL, "key": key().decode(), "key_url": None, "pin": None,
            "state": "present", "refresh": True, "hints": {}, "environment": {}, "timeout": 30, "validate_certs": True}
    base.update(overrides)
    return base


@pytest.mark.parametrize("options, problem", [
    ({}, None),
    ({"pin": PIN}, None),
    ({"url": "", "key": None, "pin": PIN}, None),
    ({"key": None}, "the source gpuops-nvidia-cuda needs its signing key: give key (its content) or key_url"),
    ({"key": None, "state": "absent"}, None),
    ({"pin": {"packages": ["x"]}}, "pin needs a name and a list of packages (and a version, or '' to remove it)"),
    ({"pin": {"name": "x", "packages": "x"}}, "pin needs a name and a list of packages (and a version, or '' to remove it)"),
])
def test_check(options, problem):
    assert sources.check(params(**options)) == problem


@pytest.mark.parametrize("options, expected", [
    ({}, {"keyring": "KEY", "source": "SOURCE"}),
    ({"pin": PIN}, {"keyring": "KEY", "source": "SOURCE", "pin": "PIN"}),
    ({"pin": dict(PIN, version="")}, {"keyring": "KEY", "source": "SOURCE", "pin": None}),
    ({"url": "", "pin": PIN}, {"pin": "PIN"}),
    ({"state": "absent", "pin": PIN}, {"keyring": None, "source": None, "pin": None}),
    ({"state": "absent", "url": ""}, {"keyring": None, "source": None}),
])
def test_plan(options, expected):
    given = params(**options)
    steps = sources.plan(given, key() if given["state"] == "present" and given["url"] else None)
    where = steps["paths"]
    names = {"KEY": key(), "SOURCE": "X-Repolib-Name: gpuops-nvidia-cuda\nSigned-By: %s\nSuites: /\nTypes: deb\nURIs: %s\n"
             % (where["keyring"], URL), None: None}
    if "pin" in where:
        names["PIN"] = ("Explanation: Managed by gpuops.nvidia (gpuops-nvidia-driver): these packages resolve to "
                        "580.*\nPackage: nvidia-*\nPin: version 580.*\nPin-Priority: 1001\n")
    assert steps["files"] == {where[kind]: names[value] for kind, value in expected.items()}
    assert (steps["stamp"] is not None) == ("source" in expected and expected["source"] is not None)


@pytest.fixture
def etc(tmp_path, monkeypatch):
    for name, directory in (("KEYRINGS", "keyrings"), ("SOURCES", "sources.list.d"), ("PREFERENCES", "preferences.d"),
                            ("MARKERS", "apt-sources")):
        monkeypatch.setattr(sources, name, str(tmp_path / directory))
    refreshed = []

    def refresh(module, sources=(), **_options):
        refreshed.append(list(sources))
        if module.fail_refresh:
            raise ops.AptError("apt could not refresh %s" % sources[0], problems=[{"kind": "key"}])
        return {"changed": True, "problems": []}
    monkeypatch.setattr(ops, "refresh", refresh)
    return tmp_path, refreshed


def test_a_source_is_written_refreshed_once_then_unchanged(fake, etc):
    tmp_path, refreshed = etc
    module = fake(diff=True)
    module.fail_refresh = False
    result = sources.apply(module, params(pin=PIN))
    assert result["changed"] is True and result["source_changed"] is True and result["refreshed"] is True
    assert sorted(os.path.basename(path) for path in result["files"]) == [
        "gpuops-nvidia-cuda.asc", "gpuops-nvidia-cuda.sources", "gpuops-nvidia-driver.pref"]
    assert refreshed == [[str(tmp_path / "sources.list.d" / "gpuops-nvidia-cuda.sources")]]
    assert result["diff"][0]["after"].startswith("key 81AA 331B 48F1 30B6 94E1 4111 531E 23BA 1649 3920 (EdDSA")
    assert (tmp_path / "keyrings" / "gpuops-nvidia-cuda.asc").read_bytes() == key()
    assert (tmp_path / "apt-sources" / "gpuops-nvidia-cuda.refreshed").exists()
    again = sources.apply(module, params(pin=PIN))
    assert again["changed"] is False and again["files"] == [] and len(refreshed) == 1


def test_a_failed_refresh_is_tried_again(fake, etc):
    tmp_path, refreshed = etc
    module = fake()
    module.fail_refresh = True
    with pytest.raises(ops.AptError) as failure:
        sources.apply(module, params())
    assert failure.value.changed is True and failure.value.problems == [{"kind": "key"}]
    module.fail_refresh = False
    retried = sources.apply(module, params())
    assert retried["files"] == [] and retried["refresh_needed"] is True and retried["refreshed"] is True
    assert len(refreshed) == 2


def test_check_mode_writes_nothing_and_absent_removes_everything(fake, etc):
    tmp_path, refreshed = etc
    planned = fake(check_mode=True)
    assert sources.apply(planned, params(pin=PIN))["changed"] is True and not list(tmp_path.iterdir()) and not refreshed
    module = fake()
    module.fail_refresh = False
    sources.apply(module, params(pin=PIN))
    gone = sources.apply(module, params(state="absent", pin=PIN))
    assert gone["changed"] is True and len(gone["files"]) == 3
    assert [path for path in tmp_path.rglob("*") if path.is_file()] == []


def test_a_key_that_is_no_key_writes_nothing(fake, etc):
    tmp_path, _refreshed = etc
    with pytest.raises(ops.AptError, match="is not ASCII-armored"):
        sources.apply(fake(), params(key="hello"))
    assert not list(tmp_path.iterdir())


@pytest.mark.parametrize("data, count", [(None, 0), (b"", 0), (b"not a key", 0), (key(), 2)])
def test_known_keys(data, count):
    assert len(sources.known_keys(data)) == count


def test_apply_key(fake, tmp_path):
    path = str(tmp_path / "k.asc")
    module = fake(diff=True)
    written = sources.apply_key(module, {"path": path, "content": key().decode(), "url": None, "timeout": 30,
                                         "state": "present"})
    assert written["changed"] is True and written["previous_keys"] == [] and len(written["keys"]) == 2
    assert written["diff"]["before_header"] == "%s (absent)" % path
    again = sources.apply_key(module, {"path": path, "content": key().decode(), "url": None, "timeout": 30,
                                       "state": "present"})
    assert again["changed"] is False and len(again["previous_keys"]) == 2
    removed = sources.apply_key(module, {"path": path, "content": None, "url": None, "timeout": 30, "state": "absent"})
    assert removed["changed"] is True and not os.path.exists(path)

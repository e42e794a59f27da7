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
                            ("MARKERS", "apt-sources"), ("BACKUPS", "backups")):
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
    assert written["changed"] is True and written["previous_keys"] == [] and len(written["current_keys"]) == 2
    assert written["diff"]["before_header"] == "%s (absent)" % path
    again = sources.apply_key(module, {"path": path, "content": key().decode(), "url": None, "timeout": 30,
                                       "state": "present"})
    assert again["changed"] is False and len(again["previous_keys"]) == 2
    removed = sources.apply_key(module, {"path": path, "content": None, "url": None, "timeout": 30, "state": "absent"})
    assert removed["changed"] is True and not os.path.exists(path)


# ---- options apt could not take as they are: refused before anything is read or written ---------

@pytest.mark.parametrize("options, words", [
    ({"name": "my repo"}, "name 'my repo' cannot name a file apt reads"),
    ({"name": "../../etc/passwd"}, "cannot name a file apt reads"),
    ({"name": "nvidia/cuda"}, "cannot name a file apt reads"),
    ({"name": ".hidden"}, "starting with a letter or digit"),
    ({"name": "cuda\nTrusted: yes"}, "cannot name a file apt reads"),
    ({"url": URL + "\nTrusted: yes"}, "holds whitespace or a control character (a line break"),
    ({"url": "http://127.0.0.1:8765/cuda/ extra"}, "extra is not a URL apt can fetch"),
    ({"url": "http://127.0.0.1:8765/cuda/\thttp://m2/"}, "holds whitespace"),
    ({"url": "http://m1/cuda/  http://m2/cuda/"}, "holds whitespace"),
    ({"url": "://example.com/"}, "is not a URL apt can fetch"),
    ({"pin": dict(PIN, version=580.95)}, "pin version 580.95 is a float: quote it"),
    ({"url": "127.0.0.1/cuda"}, "is not a URL apt can fetch"),
    ({"url": "https://"}, "is not a URL apt can fetch"),
    ({"url": "https://ada:s3cret@repo.example.com/cuda/"}, "/etc/apt/auth.conf.d/ (mode 0600"),
    ({"key_url": "https://repo.example.com/key\n.asc", "key": None}, "key_url"),
    ({"pin": dict(PIN, packages=[])}, "has a version but no packages: apt refuses every install"),
    ({"pin": dict(PIN, packages=None)}, "has a version but no packages"),
    ({"pin": dict(PIN, packages=["nvidia-*", "cuda drivers"])}, "are not package name patterns"),
    ({"pin": dict(PIN, packages=["nvidia-*\nPin-Priority: -1"])}, "are not package name patterns"),
    ({"pin": dict(PIN, version="580.*\nPin-Priority: -1")}, "is not one version pattern"),
    ({"pin": dict(PIN, version="580 *")}, "is not one version pattern"),
    ({"pin": dict(PIN, name="driver pin")}, "pin name 'driver pin' cannot name a file apt reads"),
    ({"pin": dict(PIN, priority=100)}, "pin has no option priority"),
    ({"pin": "nvidia-*"}, "pin needs a name and a list of packages"),
])
def test_options_apt_could_not_take_are_refused(options, words):
    problem = sources.check(params(**options))
    assert problem is not None and words in problem, problem


@pytest.mark.parametrize("options", [
    {"url": "file:///srv/mirror/cuda/"}, {"url": "file:/srv/mirror/cuda/"}, {"url": "mirror+https://mirrors.example/list"},
    {"url": "HTTPS://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/"},
    {"url": "s3://fleet-mirror/nvidia/cuda/"}, {"url": "ar+https://us-central1-apt.pkg.dev/projects/p/nvidia"},
    {"url": "http://m1.example/cuda/ http://m2.example/cuda/"},
    {"key_url": "https://ops:s3cret@mirror.example/key.asc", "key": None},
    {"pin": dict(PIN, packages=[], version="")}, {"pin": {"name": "old-pin", "packages": [], "version": ""}},
    {"pin": dict(PIN, packages=["/^nvidia-.*$/", "libnvidia-*", "cuda-drivers:amd64"], version="580.95.05-1")},
    {"name": "nvidia-container-toolkit_1.18.0"},
])
def test_options_apt_takes_are_accepted(options):
    assert sources.check(params(**options)) is None


@pytest.mark.parametrize("url, shown", [
    ("https://lovelace:s3cret@repo.example.com/cuda/", "https://***@repo.example.com/cuda/"),
    ("https://lovelace:s3@cret@repo.example.com/cuda/", "https://***@repo.example.com/cuda/"),  # an unencoded @
    ("lovelace:s3cret@repo.example.com/cuda/", "***@repo.example.com/cuda/"),  # no scheme
])
def test_a_password_in_a_url_is_never_in_the_message(url, shown):
    problem = sources.check(params(url=url))
    assert "s3cret" not in problem and "s3@cret" not in problem and "lovelace" not in problem and shown in problem
    assert sources.redact("https://u:p@h/x") == "https://***@h/x" and sources.redact("http://h/x@y") == "http://h/x@y"
    assert sources.redact("https://h/key.pub?X-JFrog-Art-Api=s3cret") == "https://h/key.pub?***"


def test_the_secrets_of_a_url_are_masked_in_the_result(fake):
    module = fake()
    module.no_log_values = set()
    sources.hide_credentials(module, "https://ops:p@ss@h/k.pub?token=s3cret", "http://m1/ http://u:pw12@m2/")
    assert {"ops:p@ss", "p@ss", "token=s3cret", "u:pw12", "pw12"} <= module.no_log_values
    assert all(len(value) > 2 for value in module.no_log_values)


def test_a_key_url_with_a_password_names_it_redacted_when_the_download_fails(fake, monkeypatch):
    from ansible.module_utils import urls  # pylint: disable=import-outside-toplevel
    monkeypatch.setattr(urls, "fetch_url", lambda module, url, timeout: (None, {"status": 401, "msg": "HTTP Error 401"}))
    with pytest.raises(ops.AptError) as failure:
        sources.download(fake(), "https://ada:s3cret@repo.example.com/key.asc")
    assert "s3cret" not in str(failure.value) and "https://***@repo.example.com/key.asc: 401" in str(failure.value)


# ---- files it did not write: never taken over, never removed; replaced files kept ---------------

DEBIAN = "Types: deb\nURIs: http://deb.debian.org/debian\nSuites: bookworm\nComponents: main\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n"


def test_a_source_file_it_did_not_write_is_neither_taken_over_nor_removed(fake, etc):
    tmp_path, refreshed = etc
    (tmp_path / "sources.list.d").mkdir()
    (tmp_path / "keyrings").mkdir()
    theirs = tmp_path / "sources.list.d" / "debian.sources"
    theirs.write_text(DEBIAN)
    (tmp_path / "keyrings" / "debian.asc").write_bytes(b"their key")
    module = fake()
    module.fail_refresh = False
    with pytest.raises(ops.AptError, match="debian.sources exists and was not written by gpuops.nvidia") as failure:
        sources.apply(module, params(name="debian"))
    assert "nothing was changed" in str(failure.value) and failure.value.changed is False
    gone = sources.apply(module, params(name="debian", state="absent"))
    assert gone["changed"] is False and gone["files"] == []
    assert sorted(os.path.basename(path) for path in gone["kept"]) == ["debian.asc", "debian.sources"]
    assert any("debian.sources was not written by gpuops.nvidia" in w for w in module.warnings)
    assert theirs.read_text() == DEBIAN and (tmp_path / "keyrings" / "debian.asc").read_bytes() == b"their key"
    assert not refreshed and not (tmp_path / "backups").exists()


def test_a_pin_file_it_did_not_write_is_not_taken_over(fake, etc):
    tmp_path, _refreshed = etc
    (tmp_path / "preferences.d").mkdir()
    theirs = tmp_path / "preferences.d" / "gpuops-nvidia-driver.pref"
    theirs.write_text("Package: *\nPin: release o=Debian\nPin-Priority: 500\n")
    with pytest.raises(ops.AptError, match="gpuops-nvidia-driver.pref exists and was not written"):
        sources.apply(fake(), params(url="", key=None, pin=PIN))
    assert theirs.read_text().startswith("Package: *")
    assert not (tmp_path / "keyrings").exists() and not (tmp_path / "sources.list.d").exists()


def test_a_file_of_an_earlier_release_is_its_own_and_a_replaced_file_is_backed_up(fake, etc):
    tmp_path, _refreshed = etc
    module = fake()
    module.fail_refresh = False
    (tmp_path / "preferences.d").mkdir()
    old_pin = "Explanation: Managed by gpuops.nvidia.driver: every NVIDIA driver package resolves to 570.*\n" \
              "Package: nvidia-*\nPin: version 570.*\nPin-Priority: 1001\n"
    (tmp_path / "preferences.d" / "gpuops-nvidia-driver.pref").write_text(old_pin)
    first = sources.apply(module, params(pin=PIN))
    assert first["changed"] is True and first["kept"] == []
    assert [open(path).read() for path in first["backups"]] == [old_pin]
    assert all(path.startswith(str(tmp_path / "backups")) for path in first["backups"])
    # a key rotation: the old keyring kept too, outside apt's directories
    rotated = sources.apply(module, params(pin=PIN, key=key().decode() + "\n"))
    assert [os.path.basename(path).split(".")[0:2] for path in rotated["backups"]] == [["gpuops-nvidia-cuda", "asc"]]
    assert not [name for name in os.listdir(tmp_path / "keyrings") if name != "gpuops-nvidia-cuda.asc"]
    assert sources.apply(module, params(pin=PIN, key=key().decode() + "\n"))["backups"] == []


def test_an_armored_key_is_converted_for_a_keyring_apt_reads_as_binary(fake, tmp_path):
    path = str(tmp_path / "k.gpg")
    written = sources.apply_key(fake(), {"path": path, "content": key().decode(), "url": None, "timeout": 30,
                                         "state": "present"})
    data = open(path, "rb").read()
    assert written["changed"] is True and not data.lstrip().startswith(b"-----BEGIN")
    assert [k["fingerprint"] for k in sources.known_keys(data)] == [k["fingerprint"] for k in written["current_keys"]]
    with pytest.raises(ops.AptError, match="is not an OpenPGP public key"):
        sources.apply_key(fake(), {"path": path, "content": "-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n!!!\n"
                                   "-----END PGP PUBLIC KEY BLOCK-----\n", "url": None, "timeout": 30,
                                   "state": "present"})


def test_removing_a_pin_leaves_one_it_did_not_write_and_says_so(fake, etc):
    tmp_path, _refreshed = etc
    (tmp_path / "preferences.d").mkdir()
    theirs = tmp_path / "preferences.d" / "gpuops-nvidia-driver.pref"
    theirs.write_text("Package: *\nPin: release o=Debian\nPin-Priority: 500\n")
    module = fake()
    result = sources.apply(module, params(url="", key=None, pin=dict(PIN, version="")))
    assert result["changed"] is False and result["kept"] == [str(theirs)] and module.warnings
    assert theirs.read_text().startswith("Package: *")


def test_the_newest_five_backups_of_a_file_are_kept(fake, etc, monkeypatch):
    tmp_path, _refreshed = etc
    module = fake()
    module.fail_refresh = False
    stamps = iter("2026-12-04@07:00:%02d" % second for second in range(10))
    monkeypatch.setattr(sources.files.time, "strftime", lambda _format: next(stamps))
    for version in range(8):
        sources.apply(module, params(url="", key=None, pin=dict(PIN, version="580.%d.*" % version)))
    kept = sorted(os.listdir(tmp_path / "backups"))
    assert len(kept) == 5 and [name.rsplit(".", 1)[-1] for name in kept] == [
        "2026-12-04@07:00:%02d~" % second for second in range(2, 7)]

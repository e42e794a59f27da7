# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""apt_source through ansible on this (Debian) machine, with its real apt: the lab's signed flat
repository (make apt-repo) served over HTTP; a refresh that fails (the repository not served yet)
is tried again on the next run although the key and the source did not change, then nothing
changes; state=absent removes the key, the source and the marker. apt_install's source sets up
the same files in the installation's step, and a pin that would change makes check mode pending. The source is this test's own
(gpuops-test-source) and is removed afterwards."""
from __future__ import annotations

import functools
import glob
import http.server
import json
import os
import shutil
import subprocess
import threading

import pytest

from conftest import BIN, REPO, _env  # pylint: disable=import-error

APT_REPO = os.path.join(REPO, ".build", "apt-repo")
NAME = "gpuops-test-source"
FILES = ("/etc/apt/keyrings/%s.asc" % NAME, "/etc/apt/sources.list.d/%s.sources" % NAME,
         "/var/lib/gpuops/apt-sources/%s.refreshed" % NAME)


def run(args, check_mode=False, module="gpuops.nvidia.apt_source"):
    argv = [os.path.join(BIN, "ansible"), "localhost", "-m", module, "-a", json.dumps(args)]
    argv += ["--check"] if check_mode else []
    proc = subprocess.run(argv, env=_env(), capture_output=True, text=True, timeout=300, check=False)
    return json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]


@pytest.fixture
def served(tmp_path):
    """(www root, base URL): an HTTP server; the test puts the repository in place when it wants."""
    if not os.path.exists(os.path.join(APT_REPO, "cuda", "InRelease")):
        pytest.fail("the lab's apt repository is missing: make apt-repo")
    root = tmp_path / "www"
    root.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=httpd.serve_forever, daemon=True).start()
    yield root, "http://127.0.0.1:%d" % httpd.server_address[1]
    httpd.shutdown()
    run({"name": NAME, "state": "absent"})
    for path in FILES:
        if os.path.exists(path):
            os.unlink(path)
    for name in glob.glob("/var/lib/apt/lists/127.0.0.1_*"):  # the test repository's lists
        os.unlink(name)


def test_a_failed_refresh_is_tried_again_then_nothing_changes(served):
    root, base = served
    key = open(os.path.join(APT_REPO, "keys", "good.asc"), encoding="utf-8").read()
    args = {"name": NAME, "url": base + "/cuda/", "key": key}
    planned = run(args, check_mode=True)
    assert planned["changed"] is True and not any(os.path.exists(path) for path in FILES)

    failed = run(args)  # nothing served yet: apt cannot fetch the repository's Release file
    assert failed["failed"] is True and failed["changed"] is True, failed
    assert os.path.exists(FILES[0]) and os.path.exists(FILES[1]) and not os.path.exists(FILES[2])

    shutil.copytree(os.path.join(APT_REPO, "cuda"), root / "cuda")
    retried = run(args)  # same key and source: refreshed because the last refresh failed
    assert retried["changed"] is True and retried["files"] == [] and retried["refresh_needed"] is True
    assert retried["refreshed"] is True and os.path.exists(FILES[2])
    policy = subprocess.run(["apt-cache", "policy", "cuda-drivers"], capture_output=True, text=True, check=True)
    assert base + "/cuda" in policy.stdout, policy.stdout

    again = run(args)
    assert again["changed"] is False and again["refreshed"] is False

    removed = run({"name": NAME, "state": "absent"})
    assert removed["changed"] is True and not any(os.path.exists(path) for path in FILES)


def _apt_works():
    """apt's own answer: it still reads every source and pin (a broken pin or source stops it)."""
    return subprocess.run(["apt-get", "-s", "-q", "install", "coreutils"], capture_output=True, text=True,
                          check=False)


def test_input_apt_could_not_take_is_refused_and_apt_keeps_working(served):
    _root, base = served
    key = open(os.path.join(APT_REPO, "keys", "good.asc"), encoding="utf-8").read()
    pin_path = "/etc/apt/preferences.d/gpuops-test-pin.pref"
    before = sorted(os.listdir("/etc/apt/sources.list.d")), sorted(os.listdir("/etc/apt/preferences.d"))
    cases = [
        ({"name": NAME, "url": "", "pin": {"name": "gpuops-test-pin", "packages": [], "version": "580.*"}},
         "has a version but no packages"),
        ({"name": NAME, "url": base + "/cuda/\nTrusted: yes", "key": key}, "a line break would add a field"),
        ({"name": "gpuops test", "url": base + "/cuda/", "key": key}, "cannot name a file apt reads"),
        ({"name": NAME, "url": base.replace("http://", "http://ops:hunter2@") + "/cuda/", "key": key},
         "/etc/apt/auth.conf.d/"),
    ]
    for args, words in cases:
        result = run(args)
        assert result.get("failed") is True and words in result["msg"], (args, result)
        assert result["changed"] is False and "hunter2" not in json.dumps(result)
    assert (sorted(os.listdir("/etc/apt/sources.list.d")), sorted(os.listdir("/etc/apt/preferences.d"))) == before
    assert not os.path.exists(pin_path)
    works = _apt_works()
    assert works.returncode == 0, works.stderr


def test_a_file_it_did_not_write_is_never_taken_over_or_removed(served):
    _root, base = served
    key = open(os.path.join(APT_REPO, "keys", "good.asc"), encoding="utf-8").read()
    theirs = "/etc/apt/sources.list.d/%s.sources" % NAME
    content = "Types: deb\nURIs: %s/cuda/\nSuites: /\nSigned-By: /usr/share/keyrings/debian-archive-keyring.gpg\n" % base
    with open(theirs, "w", encoding="utf-8") as handle:
        handle.write(content)
    try:
        taken = run({"name": NAME, "url": base + "/cuda/", "key": key})
        assert taken.get("failed") is True and "was not written by gpuops.nvidia" in taken["msg"], taken
        removed = run({"name": NAME, "state": "absent"})
        assert removed.get("failed") is not True and removed["changed"] is False and theirs in removed["kept"], removed
        with open(theirs, encoding="utf-8") as handle:
            assert handle.read() == content
        assert not os.path.exists(FILES[0])
    finally:
        os.unlink(theirs)


def test_a_key_urls_password_never_reaches_the_log_the_diff_or_the_files(served):
    """A key served behind credentials (key_url with user:password): at -vvv, with --diff, when the
    download fails and when it succeeds, the password appears nowhere - not in the log, not in the
    invocation, not in the files written on the host."""
    root, base = served
    shutil.copytree(os.path.join(APT_REPO, "cuda"), root / "cuda")
    shutil.copy(os.path.join(APT_REPO, "keys", "good.asc"), root / "key.asc")
    secret = "pa55-Wr0ng-h0rse"
    with_password = base.replace("http://", "http://ops:%s@" % secret)
    for key_url, ok in ((with_password + "/missing.asc", False), (with_password + "/key.asc", True)):
        args = {"name": NAME, "url": base + "/cuda/", "key_url": key_url}
        argv = [os.path.join(BIN, "ansible"), "localhost", "-m", "gpuops.nvidia.apt_source", "-a", json.dumps(args),
                "--diff", "-vvv"]
        proc = subprocess.run(argv, env=_env(ANSIBLE_STDOUT_CALLBACK="default"), capture_output=True, text=True,
                              timeout=300, check=False)
        assert (proc.returncode == 0) == ok, proc.stdout[-3000:]
        assert secret not in proc.stdout + proc.stderr, "the password is in the output"
        assert ok or "cannot download the repository key from http://***@127.0.0.1" in proc.stdout
    for path in FILES[:2] + ("/var/lib/apt/lists",):
        found = subprocess.run(["grep", "-rl", secret, path], capture_output=True, text=True, check=False)
        assert found.stdout == "", found.stdout


def test_apt_install_sets_up_its_source_first_and_a_changed_pin_makes_check_mode_pending(served, tmp_path):
    root, base = served
    shutil.copytree(os.path.join(APT_REPO, "cuda"), root / "cuda")
    key = open(os.path.join(APT_REPO, "keys", "good.asc"), encoding="utf-8").read()
    pin = {"name": "gpuops-test-pin", "packages": ["cuda-drivers"], "version": "570.*"}
    records = tmp_path / "records"
    args = {"names": ["dpkg"], "owner": "test", "record_dir": str(records), "cache_valid_time": 10 ** 9,
            "source": {"name": NAME, "url": base + "/cuda/", "key": key, "pin": pin}}
    pin_path = "/etc/apt/preferences.d/gpuops-test-pin.pref"
    try:
        planned = run(args, check_mode=True, module="gpuops.nvidia.apt_install")
        assert planned["changed"] is True and planned["source"]["source_changed"] is True, planned
        assert "apt cannot resolve its packages" in planned["msg"]
        assert not any(os.path.exists(path) for path in FILES + (pin_path,)) and not records.exists()

        done = run(args, module="gpuops.nvidia.apt_install")
        assert done["changed"] is True and done["source"]["refreshed"] is True, done
        assert all(os.path.exists(path) for path in FILES + (pin_path,))
        # apt itself reads what was written: the source's packages, pinned to 570 at priority 1001
        policy = subprocess.run(["apt-cache", "policy", "cuda-drivers"], capture_output=True, text=True,
                                check=True).stdout
        assert base + "/cuda" in policy and "Candidate: 570.172.08-1" in policy, policy
        assert json.loads((records / "test.json").read_text())["requires"] == ["dpkg"]
        assert run(args, module="gpuops.nvidia.apt_install")["changed"] is False

        moved = dict(args, source=dict(args["source"], pin=dict(pin, version="580.*")))
        pending = run(moved, check_mode=True, module="gpuops.nvidia.apt_install")
        assert pending["changed"] is True and pin_path in pending["source"]["files"], pending
        assert "apt cannot resolve its packages" in pending["msg"]
        with open(pin_path, encoding="utf-8") as handle:
            assert "570.*" in handle.read()
    finally:
        run({"name": NAME, "state": "absent", "pin": dict(pin, version="")})
        assert not os.path.exists(pin_path)


def test_apt_install_hides_its_sources_key_url_password_too(served, tmp_path):
    """The same key URL with credentials given to apt_install's source: at -vvv with --diff, the
    password is in neither the log nor the invocation echoed back, nor in the files written."""
    root, base = served
    shutil.copytree(os.path.join(APT_REPO, "cuda"), root / "cuda")
    shutil.copy(os.path.join(APT_REPO, "keys", "good.asc"), root / "key.asc")
    secret = "pa55-1nstall-h0rse"
    args = {"names": ["dpkg"], "owner": "test", "record_dir": str(tmp_path / "records"), "cache_valid_time": 10 ** 9,
            "source": {"name": NAME, "url": base + "/cuda/",
                       "key_url": base.replace("http://", "http://ops:%s@" % secret) + "/key.asc"}}
    argv = [os.path.join(BIN, "ansible"), "localhost", "-m", "gpuops.nvidia.apt_install", "-a", json.dumps(args),
            "--diff", "-vvv"]
    proc = subprocess.run(argv, env=_env(ANSIBLE_STDOUT_CALLBACK="default"), capture_output=True, text=True,
                          timeout=300, check=False)
    assert proc.returncode == 0, proc.stdout[-3000:]
    assert secret not in proc.stdout + proc.stderr, "the password is in the output"
    for path in FILES[:2] + ("/var/lib/apt/lists", str(tmp_path / "records")):
        found = subprocess.run(["grep", "-rl", secret, path], capture_output=True, text=True, check=False)
        assert found.stdout == "", found.stdout

# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""repo_key through ansible: keys shown by fingerprint and uid (never as base64), a rotated key
noticed at its URL, check mode, idempotence, and what is not a key refused before any change.
The keys are this project's test keys (tests/unit/.../fixtures/repo-keys.asc) and a key gpg
generates here, each checked against gpg's own fingerprints."""
from __future__ import annotations

import functools
import http.server
import json
import os
import subprocess
import threading

import pytest

from conftest import BIN, REPO, _env  # pylint: disable=import-error

FIXTURE = os.path.join(REPO, "tests", "unit", "plugins", "module_utils", "apt", "fixtures", "repo-keys.asc")
RSA = "59E4A58F361AB94CC818A42D425CBF74B1F1F47B"


def run(args, check_mode=False, diff=True):
    argv = [os.path.join(BIN, "ansible"), "localhost", "-m", "gpuops.nvidia.repo_key", "-a", json.dumps(args)]
    argv += ["--check"] if check_mode else []
    argv += ["--diff"] if diff else []
    proc = subprocess.run(argv, env=_env(), capture_output=True, text=True, timeout=120, check=False)
    return json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]


@pytest.fixture
def new_key(tmp_path):
    """A key gpg generates now (a repository's rotated key), armored, with its fingerprint."""
    home = tmp_path / "gnupg"
    home.mkdir(mode=0o700)
    gpg = ["gpg", "--homedir", str(home), "--batch", "--quiet", "--pinentry-mode", "loopback", "--passphrase", ""]
    subprocess.run(gpg + ["--quick-gen-key", "rotated key <rotated@gpuops.test>", "ed25519", "sign", "never"],
                   check=True, capture_output=True)
    armored = subprocess.run(gpg + ["--armor", "--export"], check=True, capture_output=True, text=True).stdout
    colons = subprocess.run(gpg + ["--with-colons", "--list-keys"], check=True, capture_output=True, text=True).stdout
    fingerprint = next(line.split(":")[9] for line in colons.splitlines() if line.startswith("fpr:"))
    return armored, fingerprint


@pytest.fixture
def server(tmp_path):
    root = tmp_path / "www"
    root.mkdir()
    handler = functools.partial(http.server.SimpleHTTPRequestHandler, directory=str(root))
    httpd = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    thread = threading.Thread(target=httpd.serve_forever, daemon=True)
    thread.start()
    yield root, "http://127.0.0.1:%d" % httpd.server_address[1]
    httpd.shutdown()


def test_content_check_mode_then_install_then_idempotent(tmp_path):
    key = open(FIXTURE, encoding="utf-8").read()
    path = tmp_path / "keyrings" / "nvidia-cuda.asc"
    result = run({"path": str(path), "content": key}, check_mode=True)
    assert result["changed"] is True and not path.exists()
    result = run({"path": str(path), "content": key})
    assert result["changed"] is True and path.read_text() == key
    assert oct(path.stat().st_mode & 0o777) == "0o644"
    assert [k["fingerprint"] for k in result["current_keys"]][1] == RSA
    diff = result["diff"]
    assert diff["before_header"].endswith("(absent)")
    assert "key 59E4 A58F 361A B94C C818 A42D 425C BF74 B1F1 F47B (RSA, created" in diff["after"]
    assert "uid gpuops test repository <repo@gpuops.test>" in diff["after"]
    assert "BEGIN PGP" not in diff["after"] and "mQ" not in diff["after"], "no base64 in the diff"
    again = run({"path": str(path), "content": key})
    assert again["changed"] is False and "diff" not in again


def test_a_rotated_key_at_its_url_is_shown_before_and_after(tmp_path, server, new_key):
    root, base = server
    path = tmp_path / "nvidia-cuda.asc"
    (root / "key.asc").write_text(open(FIXTURE, encoding="utf-8").read())
    assert run({"path": str(path), "url": base + "/key.asc"})["changed"] is True
    assert run({"path": str(path), "url": base + "/key.asc"})["changed"] is False
    armored, fingerprint = new_key
    (root / "key.asc").write_text(armored)
    result = run({"path": str(path), "url": base + "/key.asc"})
    assert result["changed"] is True and path.read_text() == armored
    assert [k["fingerprint"] for k in result["previous_keys"]][1] == RSA
    assert [k["fingerprint"] for k in result["current_keys"]] == [fingerprint]
    spaced = " ".join(fingerprint[i:i + 4] for i in range(0, 40, 4))
    assert "key %s" % spaced in result["diff"]["after"] and "rotated key <rotated@gpuops.test>" in result["diff"]["after"]
    assert "gpuops test repository" in result["diff"]["before"]


@pytest.mark.parametrize("content, reason", [
    ("https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/3bf863cc.pub", "not ASCII-armored"),
    ("-----BEGIN PGP PUBLIC KEY BLOCK-----\n\nnot base64 at all!\n-----END PGP PUBLIC KEY BLOCK-----\n",
     "not an OpenPGP public key"),
])
def test_what_is_not_a_key_is_refused_and_nothing_changes(tmp_path, content, reason):
    path = tmp_path / "nvidia-cuda.asc"
    path.write_text("old key\n")
    result = run({"path": str(path), "content": content})
    assert result["failed"] is True and reason in result["msg"] and "nothing was changed" in result["msg"]
    assert path.read_text() == "old key\n"


def test_a_url_that_fails_is_refused_and_nothing_changes(tmp_path, server):
    _root, base = server
    path = tmp_path / "nvidia-cuda.asc"
    path.write_text("old key\n")
    result = run({"path": str(path), "url": base + "/missing.asc"})
    assert result["failed"] is True and "cannot download the repository key" in result["msg"] and "404" in result["msg"]
    assert path.read_text() == "old key\n"


def test_a_binary_keyring_is_written_byte_for_byte(tmp_path, server):
    """A .gpg keyring takes the key as it is served, unarmored (gpg --dearmor's output)."""
    root, base = server
    binary = subprocess.run(["gpg", "--dearmor"], input=open(FIXTURE, "rb").read(), capture_output=True,
                            check=True).stdout
    assert not binary.startswith(b"-----BEGIN")
    (root / "key.gpg").write_bytes(binary)
    path = tmp_path / "nvidia-cuda.gpg"
    result = run({"path": str(path), "url": base + "/key.gpg"})
    assert result["changed"] is True and path.read_bytes() == binary
    assert [k["fingerprint"] for k in result["current_keys"]][1] == RSA
    assert run({"path": str(path), "url": base + "/key.gpg"})["changed"] is False


def test_an_armored_key_for_a_binary_keyring_is_converted_as_gpg_dearmor_does(tmp_path):
    """apt reads a keyring not named .asc as binary: an armored key given for a .gpg keyring is
    written as gpg --dearmor writes it (gpg, not the module, says what the bytes must be), and the
    next run with the same armored key changes nothing."""
    armored = open(FIXTURE, "rb").read()
    binary = subprocess.run(["gpg", "--dearmor"], input=armored, capture_output=True, check=True).stdout
    path = tmp_path / "nvidia-cuda.gpg"
    result = run({"path": str(path), "content": armored.decode()})
    assert result["changed"] is True and path.read_bytes() == binary
    assert run({"path": str(path), "content": armored.decode()})["changed"] is False

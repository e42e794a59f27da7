# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Key files read without gpg, checked against what gpg itself says of them.

fixtures/repo-keys.asc: two test keys this project generated with gpg 2.2 (an Ed25519 key, and
an RSA 2048 key with an encryption subkey); their fingerprints are gpg's own
(gpg --with-colons --show-keys)."""
from __future__ import annotations

import base64
import os
import shutil
import subprocess

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils.apt import openpgp

FIXTURE = os.path.join(os.path.dirname(__file__), "fixtures", "repo-keys.asc")
ED25519 = "81AA331B48F130B694E14111531E23BA16493920"
RSA = "59E4A58F361AB94CC818A42D425CBF74B1F1F47B"
RSA_SUB = "E7C68C0B4210DC7B732F04FFF54A267B7EFBED00"


def armored():
    with open(FIXTURE, "rb") as handle:
        return handle.read()


def test_fingerprints_uids_and_subkeys():
    found = openpgp.keys(armored())
    assert [(k["fingerprint"], k["algorithm"], k["uids"], k["subkeys"]) for k in found] == [
        (ED25519, "EdDSA", ["gpuops test ed25519 <ed@gpuops.test>"], []),
        (RSA, "RSA", ["gpuops test repository <repo@gpuops.test>"], [RSA_SUB]),
    ]
    assert found[1]["key_id"] == "425CBF74B1F1F47B"
    assert found[0]["created"] == "2026-12-02"


def test_binary_and_armored_read_the_same():
    text = armored().decode()
    body = text.split("\n\n", 1)[1].split("\n=")[0]
    binary = base64.b64decode("".join(body.split()))
    assert openpgp.keys(binary) == openpgp.keys(armored())


def test_describe_reads_as_gpg_shows_keys():
    text = openpgp.describe(openpgp.keys(armored()))
    assert "key 59E4 A58F 361A B94C C818  A42D 425C BF74 B1F1 F47B".replace("  ", " ") in text
    assert "  uid gpuops test repository <repo@gpuops.test>" in text
    assert "  subkey %s" % RSA_SUB in text
    assert "PUBLIC KEY BLOCK" not in text


@pytest.mark.parametrize("data, reason", [
    (b"<html>404 Not Found</html>", "not an OpenPGP packet header"),
    (b"-----BEGIN PGP SIGNATURE-----\n\nAAAA\n-----END PGP SIGNATURE-----\n", "not a PGP PUBLIC KEY BLOCK"),
    (b"-----BEGIN PGP PUBLIC KEY BLOCK-----\n\n!!!!\n-----END PGP PUBLIC KEY BLOCK-----\n", "not valid base64"),
    (b"", "no OpenPGP public key"),
])
def test_what_is_not_a_key_is_refused_with_the_reason(data, reason):
    with pytest.raises(openpgp.KeyFileError, match=reason):
        openpgp.keys(data)


def test_a_truncated_key_is_refused():
    text = armored().decode()
    body = text.split("\n\n", 1)[1].split("\n=")[0]
    binary = base64.b64decode("".join(body.split()))
    with pytest.raises(openpgp.KeyFileError, match="cut short"):
        openpgp.keys(binary[:100])


@pytest.mark.skipif(not shutil.which("gpg"), reason="gpg is not installed")
def test_gpg_agrees(tmp_path):
    res = subprocess.run(["gpg", "--homedir", str(tmp_path), "--batch", "--with-colons", "--show-keys", FIXTURE],
                         capture_output=True, text=True, check=True)
    fingerprints = [line.split(":")[9] for line in res.stdout.splitlines() if line.startswith("fpr:")]
    ours = []
    for key in openpgp.keys(armored()):
        ours += [key["fingerprint"]] + key["subkeys"]
    assert fingerprints == ours

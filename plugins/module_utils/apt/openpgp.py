# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What an OpenPGP public key file holds, read without gpg: each primary key's fingerprint,
creation time and user ids, and its subkeys' fingerprints - so a repository key is shown to an
operator as who signs the repository, not as a page of base64. Pure functions (RFC 4880 packet
framing and v4 fingerprints; RFC 9580 v6 fingerprints)."""

from __future__ import annotations

__metaclass__ = type

import base64
import binascii
import datetime
import hashlib

PUBLIC_KEY, PUBLIC_SUBKEY, USER_ID = 6, 14, 13
ALGORITHMS = {1: "RSA", 2: "RSA", 3: "RSA", 16: "ElGamal", 17: "DSA", 18: "ECDH", 19: "ECDSA", 22: "EdDSA",
              25: "X25519", 27: "Ed25519", 28: "Ed448"}


class KeyFileError(ValueError):
    """Not an OpenPGP public key."""


def dearmor(data: bytes) -> bytes:
    """The binary packets of an ASCII-armored key (or data itself when it is binary)."""
    text = data.decode("ascii", errors="replace") if data[:64].lstrip().startswith(b"-----BEGIN PGP") else None
    if text is None:
        return data
    lines = text.replace("\r", "").split("\n")
    try:
        start = next(i for i, line in enumerate(lines) if line.startswith("-----BEGIN PGP PUBLIC KEY BLOCK-----"))
    except StopIteration:
        raise KeyFileError("the armored block is not a PGP PUBLIC KEY BLOCK")
    body, in_headers = [], True
    for line in lines[start + 1:]:
        if line.startswith("-----END PGP"):
            break
        if in_headers:
            if ":" in line and line.strip():
                continue
            in_headers = False
            if not line.strip():
                continue
        if line.startswith("=") and len(line.strip()) == 5:  # the CRC-24 line
            continue
        body.append(line.strip())
    try:
        return base64.b64decode("".join(body), validate=True)
    except (binascii.Error, ValueError) as exc:
        raise KeyFileError("the armored key is not valid base64 (%s)" % exc)


def _packets(data: bytes):
    """(tag, body) of each packet."""
    pos = 0
    while pos < len(data):
        header = data[pos]
        if not header & 0x80:
            raise KeyFileError("byte %d is not an OpenPGP packet header" % pos)
        if header & 0x40:  # new format
            tag = header & 0x3F
            first = data[pos + 1]
            if first < 192:
                length, pos = first, pos + 2
            elif first < 224:
                length, pos = ((first - 192) << 8) + data[pos + 2] + 192, pos + 3
            elif first == 255:
                length, pos = int.from_bytes(data[pos + 2:pos + 6], "big"), pos + 6
            else:
                raise KeyFileError("partial-length packets do not occur in public keys")
        else:  # old format
            tag, kind = (header >> 2) & 0x0F, header & 0x03
            size = {0: 1, 1: 2, 2: 4}.get(kind)
            if size is None:
                raise KeyFileError("indeterminate-length packets do not occur in public keys")
            length = int.from_bytes(data[pos + 1:pos + 1 + size], "big")
            pos += 1 + size
        body = data[pos:pos + length]
        if len(body) != length:
            raise KeyFileError("the key data is cut short")
        yield tag, body
        pos += length


def _fingerprint(body: bytes) -> str:
    version = body[0]
    if version == 4:
        return hashlib.sha1(b"\x99" + len(body).to_bytes(2, "big") + body).hexdigest().upper()
    if version in (5, 6):
        prefix = b"\x9a" if version == 5 else b"\x9b"
        return hashlib.sha256(prefix + len(body).to_bytes(4, "big") + body).hexdigest().upper()
    raise KeyFileError("OpenPGP key version %d is not supported (v4, v5 and v6 are)" % version)


def keys(data: bytes) -> list:
    """[{fingerprint, key_id, algorithm, created, uids, subkeys}] of a key file, armored or binary.
    Raises KeyFileError when it holds no public key."""
    found = []
    for tag, body in _packets(dearmor(data)):
        if tag == PUBLIC_KEY:
            fingerprint = _fingerprint(body)
            created = int.from_bytes(body[1:5], "big")
            found.append({
                "fingerprint": fingerprint,
                "key_id": fingerprint[-16:] if body[0] == 4 else fingerprint[:16],
                "algorithm": ALGORITHMS.get(body[5], "algorithm %d" % body[5]),
                "created": datetime.datetime.fromtimestamp(created, datetime.timezone.utc).strftime("%Y-%m-%d"),
                "uids": [], "subkeys": []})
        elif tag == USER_ID and found:
            found[-1]["uids"].append(body.decode("utf-8", errors="replace"))
        elif tag == PUBLIC_SUBKEY and found:
            found[-1]["subkeys"].append(_fingerprint(body))
    if not found:
        raise KeyFileError("no OpenPGP public key in it")
    return found


def describe(items: list) -> str:
    """The keys as an operator reads them: fingerprint in groups of four, uids, creation date."""
    out = []
    for key in items:
        fingerprint = " ".join(key["fingerprint"][i:i + 4] for i in range(0, len(key["fingerprint"]), 4))
        out.append("key %s (%s, created %s)" % (fingerprint, key["algorithm"], key["created"]))
        out += ["  uid %s" % uid for uid in key["uids"]]
        out += ["  subkey %s" % sub for sub in key["subkeys"]]
    return "\n".join(out) + "\n"

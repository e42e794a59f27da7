# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""apt, read the way an operator reads it: which source a failed refresh is about and why
(NO_PUBKEY after a key rotation, 404, proxy), and what a removal would really take away.
Pure parsers over apt's output (the C locale), plus a reader of the source files."""

from __future__ import annotations

import glob
import os
import re

__metaclass__ = type

from ansible_collections.gpuops.nvidia.plugins.module_utils.report import findings as fnd

SOURCE_GLOBS = ("etc/apt/sources.list", "etc/apt/sources.list.d/*.list", "etc/apt/sources.list.d/*.sources")

# (kind, pattern over one message, reason, fix). The fix is generic; callers add their own words
# (a role's variable names) per kind.
_PROBLEMS = (
    ("key", re.compile(r"NO_PUBKEY\s+([0-9A-F]+)", re.I),
     "its Release file is signed with key %s, which the source's keyring does not hold",
     "the repository's signing key changed (a key rotation) or the wrong key was given: install the repository's "
     "current key"),
    ("key", re.compile(r"EXPKEYSIG\s+([0-9A-F]+)", re.I),
     "its Release file is signed with key %s, which has expired",
     "install the repository's renewed key"),
    ("key", re.compile(r"BADSIG\s+([0-9A-F]+)", re.I),
     "its Release file has a bad signature by key %s (tampered with, or a broken mirror)",
     "check the mirror; do not trust the repository until the signature verifies"),
    ("key", re.compile(r"is not signed"),
     "it is not signed by a key apt trusts",
     "install the repository's signing key (signed-by), or check that the URL is the signed repository"),
    ("not_found", re.compile(r"\b404\s+Not Found"),
     "the server answered 404 Not Found",
     "check the repository URL (and that the mirror carries this distribution and architecture)"),
    ("not_found", re.compile(r"does not have a Release file"),
     "the URL has no Release file",
     "check the repository URL (and that the mirror carries this distribution and architecture)"),
    ("proxy", re.compile(r"\b407\s+Proxy Authentication Required"),
     "the proxy asks for authentication (407)",
     "give the proxy's credentials in the proxy URL, or use another proxy"),
    ("proxy", re.compile(r"Could not connect to proxy|Could not resolve proxy|proxy.*(refused|timed out)", re.I),
     "the proxy cannot be reached",
     "check the proxy setting (host and port) and that the proxy runs"),
    ("network", re.compile(r"Could not resolve '([^']+)'"),
     "the host name %s does not resolve",
     "check the repository URL and the node's DNS"),
    ("network", re.compile(r"Could not connect to|Connection timed out|Connection refused|No route to host"),
     "the repository's server cannot be reached",
     "check the repository URL, the node's network and firewall (or set a proxy)"),
)
_URL_RE = re.compile(r"(?:https?|ftp|file|cdrom)://[^\s'\"]+")


def deb822_stanzas(text):
    """The stanzas of a deb822 .sources file, each {field name in lower case: value}."""
    stanzas = []
    for stanza in re.split(r"\n\s*\n", text):
        fields = {}
        for line in stanza.splitlines():
            if line.startswith("#") or ":" not in line or line[:1].isspace():
                continue
            key, value = line.split(":", 1)
            fields[key.strip().lower()] = value.strip()
        stanzas.append(fields)
    return stanzas


def _deb822(text):
    """URIs of a deb822 .sources file (every stanza that is not Enabled: no)."""
    uris = []
    for fields in deb822_stanzas(text):
        if fields.get("enabled", "yes").lower() != "no":
            uris.extend(fields.get("uris", "").split())
    return uris


def _one_line(text):
    uris = []
    for line in text.splitlines():
        line = line.split("#", 1)[0].strip()
        if line.startswith(("deb ", "deb-src ")):
            parts = re.sub(r"\[[^\]]*\]", " ", line).split()
            if len(parts) >= 2:
                uris.append(parts[1])
    return uris


def read_sources(root: str = "/", arch: str | None = None) -> dict:
    """{uri: source file} of every apt source under root ($(ARCH) in a URI becomes arch)."""
    found = {}
    for pattern in SOURCE_GLOBS:
        for path in sorted(glob.glob(os.path.join(root, pattern))):
            try:
                with open(path, encoding="utf-8", errors="replace") as handle:
                    text = handle.read()
            except OSError:
                continue
            for uri in (_deb822(text) if path.endswith(".sources") else _one_line(text)):
                if arch:
                    uri = uri.replace("$(ARCH)", arch)
                found.setdefault(uri.rstrip("/"), "/" + os.path.relpath(path, root))
    return found


def _source_of(url, sources):
    """The source file whose URI the URL is under (the longest match)."""
    best = None
    for uri, path in sources.items():
        if url.rstrip("/").startswith(uri) and (best is None or len(uri) > len(best[0])):
            best = (uri, path)
    return best


def update_problems(output: str, sources: dict, default_source: str | None = None) -> list:
    """What went wrong in an `apt-get update`, one finding per source (code apt_refresh_<kind>,
    with source, url, kind and reason). output is apt's stdout and stderr (C locale); sources is
    read_sources(); default_source names the source of a problem whose URL no source lists (a
    refresh of one source only)."""
    # apt prints a failed fetch as "Err:N URL ...", then the reason indented on the next line
    messages = []
    lines = (output or "").splitlines()
    for number, line in enumerate(lines):
        if line.startswith("Err:"):
            detail = lines[number + 1].strip() if number + 1 < len(lines) and lines[number + 1][:1].isspace() else ""
            messages.append(line + " " + detail)
        elif line.startswith(("E:", "W:")):
            messages.append(line)
    problems = {}
    for message in messages:
        for kind, pattern, reason, fix in _PROBLEMS:
            match = pattern.search(message)
            if not match:
                continue
            urls = _URL_RE.findall(message)
            url = urls[0] if urls else None
            owner = _source_of(url, sources) if url else None
            source = owner[1] if owner else default_source
            key = source or url or message
            if key not in problems:
                problems[key] = problem(source, owner[0] if owner else url, kind,
                                        reason % match.group(1) if "%s" in reason else reason, fix)
            break
    return list(problems.values())


def problem(source, url, kind, reason, fix) -> dict:
    """A refresh problem as a finding."""
    return fnd.finding("apt_refresh_%s" % kind, "error", "%s (%s): %s" % (source or "a source", url or "unknown URL",
                                                                          reason),
                       fix, subject=source or url or "apt", source=source, url=url, kind=kind, reason=reason)


def describe(problems: list, hints: dict | None = None) -> str:
    """One message naming every failed source, apt's reason and the fix (plus a caller's hint
    for that kind of problem)."""
    parts = []
    for item in problems:
        fix = item["fix"] + ("; " + hints[item["kind"]] if hints and hints.get(item["kind"]) else "")
        parts.append("%s; fix: %s" % (item["message"], fix))
    return "apt could not refresh " + " | ".join(parts)


def parse_simulation(output: str) -> list:
    """Packages an `apt-get -s remove|purge` would take away ('Remv NAME [...]' / 'Purg NAME
    [...]' lines), in apt's order."""
    removed = []
    for line in (output or "").splitlines():
        match = re.match(r"^(?:Remv|Purg)\s+(\S+)", line)
        if match:
            removed.append(match.group(1).split(":")[0])
    return removed


def parse_depends(output: str) -> set:
    """Every package named in `apt-cache depends --recurse --installed ...` output."""
    names = set()
    for line in (output or "").splitlines():
        text = line.strip()
        if not text:
            continue
        if ":" in text and line[:1].isspace():
            text = text.split(":", 1)[1].strip()
        text = text.lstrip("|").strip()
        if text and not text.startswith("<"):
            names.add(text.split(":")[0])
    return names


def parse_install_simulation(output: str) -> list:
    """[(package, version)] an `apt-get -s install` would install, upgrade or downgrade ('Inst NAME
    [OLD] (NEW SOURCE [ARCH])' lines), in apt's order."""
    found = []
    for line in (output or "").splitlines():
        match = re.match(r"^Inst\s+(\S+)(?:\s+\[[^\]]*\])?\s+\((\S+)", line)
        if match:
            found.append((match.group(1).split(":")[0], match.group(2)))
    return found


def parse_policy(output: str) -> dict:
    """{package: (installed, candidate)} of `apt-cache policy NAMES` output (C locale); a version
    apt shows as (none) is None. A package apt does not know is left out."""
    found, name = {}, None
    for line in (output or "").splitlines():
        match = re.match(r"^(\S+):$", line)
        if match:
            name = match.group(1).split(":")[0]
            found[name] = [None, None]
            continue
        match = re.match(r"^\s+(Installed|Candidate):\s+(\S+)", line)
        if match and name:
            found[name][0 if match.group(1) == "Installed" else 1] = None if match.group(2) == "(none)" else match.group(2)
    return {name: tuple(versions) for name, versions in found.items()}


def install_record(previous: dict | None, owner: str, names: list, added: list, retired=()) -> dict:
    """The record of what a role's installations need and added (what its removal takes back):
    the earlier record's lists grown by this installation's, less the packages it retired."""
    previous = previous or {}
    return {"owner": owner,
            "requires": sorted((set(previous.get("requires") or []) | set(names)) - set(retired)),
            "added": sorted((set(previous.get("added") or []) | set(added)) - set(retired))}


def retired_branch_packages(required_before: list, names: list, installed: dict) -> list:
    """What a branch change retires: packages required before whose names end in a branch number
    (nvidia-fabricmanager-570), no longer asked for, and still installed."""
    return sorted(name for name in required_before
                  if re.search(r"-\d{3,}(-open|-server)?$", name) and name not in names and name in installed)


def deb822_source(name: str, url: str, keyring: str) -> str:
    """A flat repository's deb822 source trusted only with its own key, laid out as
    ansible.builtin.deb822_repository writes it (so a node it configured stays unchanged)."""
    return ("X-Repolib-Name: %s\nSigned-By: %s\nSuites: /\nTypes: deb\nURIs: %s\n" % (name, keyring, url))


def pin_text(name: str, packages: list, version: str) -> str:
    """An apt pin: every package matching the patterns resolves to version (priority 1001 also
    allows the downgrade to it)."""
    return ("Explanation: Managed by gpuops.nvidia (%s): these packages resolve to %s\nPackage: %s\n"
            "Pin: version %s\nPin-Priority: 1001\n" % (name, version, " ".join(packages), version))

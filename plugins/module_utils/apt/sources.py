# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A package repository and its trust, for apt_source and repo_key: the signing key (from its
content or a URL, checked to be an OpenPGP public key before anything is written) in its own
keyring, the deb822 source trusted only with that key, an apt pin, and a refresh of the source's
lists when the key or the source changed - or when the last refresh of them failed (a marker
under records.APT_SOURCES says which key and source were last refreshed).

``check`` refuses, before anything is read or written, every option apt could not take as it
is: a name that is no file name apt reads, a URL with a line break (a field of its own in the
.sources file) or other stray whitespace, credentials, or no scheme and host, a pin without
packages or with a version or pattern that is not one token. ``plan`` is pure: the options in, the file each path
should hold (None: absent) out; ``apply`` compares them with the files, refuses to take over a
source or pin file it did not write (state=absent leaves such a file alone and says so), backs
up every file it replaces (under BACKUPS, outside apt's directories, which read every file),
writes (not in check mode) and refreshes. Raises ops.AptError."""

from __future__ import annotations

import hashlib
import os
import re

__metaclass__ = type

from ansible.module_utils.common.text.converters import to_bytes, to_text

from ansible_collections.gpuops.nvidia.plugins.module_utils.apt import openpgp, ops
from ansible_collections.gpuops.nvidia.plugins.module_utils.apt import parse as apt
from ansible_collections.gpuops.nvidia.plugins.module_utils.host import files, records

KEYRINGS = "/etc/apt/keyrings"
SOURCES = "/etc/apt/sources.list.d"
PREFERENCES = "/etc/apt/preferences.d"
MARKERS = records.APT_SOURCES
BACKUPS = records.ROOT + "/backups/apt"

# what apt reads in sources.list.d and preferences.d: letters, digits, '_', '-' and '.'
NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9_.-]{0,99}$")
# one token of a deb822 or preferences field: no whitespace, no control character
TOKEN = re.compile(r"^[^\s\x00-\x1f\x7f]+$")
# schemes whose URLs name a path on the node, not a host
LOCAL_SCHEMES = ("file", "copy", "cdrom", "mirror+file")
PIN_KEYS = ("name", "packages", "version")
# what marks the files this module writes (ansible.builtin.deb822_repository writes the first too)
OWN_SOURCE = "X-Repolib-Name"
OWN_PIN = "Managed by gpuops.nvidia"


# The options that say what a source is: apt_source's, and apt_install's source (which adds the
# repository before it installs from it)
SOURCE_OPTIONS = dict(
    name=dict(type="str", required=True),
    url=dict(type="str", default=""),
    key=dict(type="str", no_log=False),
    key_url=dict(type="str", no_log=False),
    pin=dict(type="dict"),
)


def read_bytes(path: str) -> bytes | None:
    """The file's bytes, or None when it does not exist."""
    try:
        with open(path, "rb") as handle:
            return handle.read()
    except FileNotFoundError:
        return None


def _url_parts(url: str) -> tuple:
    """(scheme://, user:password or '', host and path, query or None) of a URL; the userinfo runs
    to the authority's last '@', as URL parsers split it."""
    head, sep, query = (url or "").partition("?")
    prefix, marker, rest = head.partition("://") if "://" in head else ("", "", head)
    authority, slash, path = rest.partition("/")
    userinfo, _at, host = authority.rpartition("@")
    return prefix + marker, userinfo, host + slash + path, query if sep else None


def _secrets(url: str) -> list:
    """The parts of a URL that may be secrets: its user:password and the password alone, and its
    query string (tokens: a private mirror's API key, a presigned URL)."""
    _scheme, userinfo, _rest, query = _url_parts(url)
    return [part for part in (query, userinfo, userinfo.partition(":")[2]) if part]


def redact(url: str) -> str:
    """url with its user:password and query string replaced by ***, for messages."""
    scheme, userinfo, rest, query = _url_parts(url)
    return scheme + ("***@" if userinfo else "") + rest + ("?***" if query is not None else "")


def download(module, url: str, timeout: int = 30) -> bytes:
    """The key at url (Ansible's fetch_url: the module's proxy settings and validate_certs)."""
    from ansible.module_utils.urls import fetch_url  # pylint: disable=import-outside-toplevel
    response, info = fetch_url(module, url, timeout=timeout)
    if info.get("status") != 200 or response is None:
        raise ops.AptError("cannot download the repository key from %s: %s %s; nothing was changed"
                           % (redact(url), info.get("status"), redact(str(info.get("msg")))))
    return response.read()


def wanted_key(module, content: str | None, url: str | None, path: str, timeout: int = 30) -> tuple:
    """(bytes, keys) of the key to install from its content or URL, checked to be an OpenPGP public
    key before anything is written: ASCII-armored where path is an .asc keyring, binary anywhere
    else (apt reads any other keyring as binary: an armored key is converted, as gpg --dearmor
    does)."""
    source = redact(url) if url else "the given content"
    data = download(module, url, timeout) if url else to_bytes(content)
    if path.endswith(".asc") and not data.lstrip().startswith(b"-----BEGIN PGP PUBLIC KEY BLOCK-----"):
        raise ops.AptError("the repository key from %s is not ASCII-armored, which %s (.asc) must be for apt; give the "
                           "armored key (gpg --armor --export) or its URL; nothing was changed" % (source, path))
    try:
        if not path.endswith(".asc"):
            data = openpgp.dearmor(data)
        return data, openpgp.keys(data)
    except (openpgp.KeyFileError, IndexError) as exc:
        raise ops.AptError("the repository key from %s is not an OpenPGP public key (%s); give the key's ASCII-armored "
                           "content or its URL; nothing was changed" % (source, exc))


def known_keys(data: bytes | None) -> list:
    """The keys of a keyring's bytes; [] when there are none or it is not a key."""
    if not data:
        return []
    try:
        return openpgp.keys(data)
    except (openpgp.KeyFileError, IndexError):
        return []


def key_diff(path: str, before: bytes | None, after: bytes | None, previous: list, keys: list) -> dict:
    """A keyring's diff by fingerprint, algorithm, date and uid - never base64."""
    return {"before_header": path if before is not None else "%s (absent)" % path,
            "after_header": path if after is not None else "%s (absent)" % path,
            "before": openpgp.describe(previous) if previous else ("" if before is None else "(not a key)\n"),
            "after": openpgp.describe(keys) if after is not None else ""}


def paths(name: str, pin: dict | None = None) -> dict:
    """Where a source's files live: keyring, source, marker and (with a pin) the pin's file."""
    found = {"keyring": os.path.join(KEYRINGS, "%s.asc" % name), "source": os.path.join(SOURCES, "%s.sources" % name),
             "marker": os.path.join(MARKERS, "%s.refreshed" % name)}
    if pin:
        found["pin"] = os.path.join(PREFERENCES, "%s.pref" % pin["name"])
    return found


def _url_problem(option: str, url: str) -> str | None:
    """Why url cannot be option's value, or None."""
    if not TOKEN.match(url):
        return ("%s %r holds whitespace or a control character (a line break would add a field of its own to the "
                "source): give one URL, or several separated by single spaces" % (option, redact(url)))
    match = re.match(r"^([A-Za-z][A-Za-z0-9+.-]*):(.+)$", url)
    scheme, rest = (match.group(1).lower(), match.group(2)) if match else ("", "")
    if not scheme or not (scheme in LOCAL_SCHEMES or (rest.startswith("//") and len(rest) > 2)):
        return ("%s %s is not a URL apt can fetch: give scheme://host/path (http, https, or the scheme of an apt "
                "transport the node has), or file:/path" % (option, redact(url)))
    if "@" in (rest[2:] if rest.startswith("//") else "").split("?", 1)[0].split("/", 1)[0]:
        return ("%s %s carries credentials (user:password@host), which would be stored in a world-readable file "
                "and shown in logs: give the URL without them and put them in /etc/apt/auth.conf.d/ (mode 0600, "
                "'machine HOST login USER password PASSWORD'), where apt reads them" % (option, redact(url)))
    return None


def _pin_problem(pin) -> str | None:
    """Why pin cannot be applied, or None."""
    usage = "pin needs a name and a list of packages (and a version, or '' to remove it)"
    if not isinstance(pin, dict) or not pin.get("name") or not isinstance(pin.get("packages") or [], list):
        return usage
    unknown = sorted(set(pin) - set(PIN_KEYS))
    if unknown:
        return "pin has no option %s: %s" % (", ".join(map(str, unknown)), usage)
    if not isinstance(pin["name"], str) or not NAME.match(pin["name"]):
        return ("pin name %r cannot name a file apt reads in %s: use letters, digits, '.', '_' and '-', starting "
                "with a letter or digit" % (pin["name"], PREFERENCES))
    version = pin.get("version")
    if version in (None, ""):
        return None  # the pin is removed: its packages do not matter
    if not isinstance(version, str):
        return ("pin version %r is a %s: quote it (a number loses digits: 580.90 becomes 580.9), for example "
                "'580.95.05-*'" % (version, type(version).__name__))
    if not TOKEN.match(version):
        return ("pin version %r is not one version pattern (no whitespace or line break): give, for example, "
                "580.* or 580.95.05-*" % (version,))
    packages = pin.get("packages") or []
    if not packages:
        return ("pin %s has a version but no packages: apt refuses every install after an empty Package: line; "
                "give the package name patterns it pins (for example nvidia-*)" % pin["name"])
    bad = [package for package in packages if not isinstance(package, str) or not TOKEN.match(package)]
    if bad:
        return ("pin packages %s are not package name patterns (one token each, no whitespace or line break)"
                % ", ".join(repr(package) for package in bad))
    return None


def check(params: dict) -> str | None:
    """Why the options cannot be applied, or None."""
    name = params["name"]
    if not isinstance(name, str) or not NAME.match(name):
        return ("name %r cannot name a file apt reads (%s/NAME.sources): use letters, digits, '.', '_' and '-', "
                "starting with a letter or digit" % (name, SOURCES))
    problem = _pin_problem(params["pin"]) if params.get("pin") else None
    if problem:
        return problem
    if params["url"]:
        # deb822's URIs: one URL, or mirrors separated by single spaces (any other whitespace is
        # left in a part, which _url_problem refuses)
        for url in params["url"].split(" "):
            problem = _url_problem("url", url)
            if problem:
                return problem
    if params.get("key_url"):
        problem = _url_problem("key_url", params["key_url"])
        if problem and "carries credentials" not in problem:
            return problem  # a key URL's credentials go to fetch_url; messages never show them
    if params["state"] == "present" and params["url"] and not (params.get("key") or params.get("key_url")):
        return "the source %s needs its signing key: give key (its content) or key_url" % name
    return None


def owned(path: str, data: bytes | None, name: str) -> bool:
    """Whether the existing file at path (its bytes DATA) was written by this module for the source
    NAME: a source with its X-Repolib-Name, a pin with its Explanation; a keyring counts as the
    source's own."""
    if data is None:
        return True
    text = data.decode("utf-8", "replace")
    if path.endswith(".sources"):
        return any(fields.get(OWN_SOURCE.lower()) == name for fields in apt.deb822_stanzas(text))
    if path.startswith(PREFERENCES):
        return OWN_PIN in text
    return True


def plan(params: dict, key: bytes | None) -> dict:
    """{path: bytes, text or None (absent)} each file should hold, the key given as bytes (None
    when absent); the marker's stamp under 'stamp' (None without a source)."""
    present, pin, where = params["state"] == "present", params.get("pin") or {}, paths(params["name"], params.get("pin"))
    wanted = {}
    if params["url"] or not present:
        wanted[where["keyring"]] = key if present else None
        wanted[where["source"]] = apt.deb822_source(params["name"], params["url"], where["keyring"]) if present else None
    if pin:
        wanted[where["pin"]] = (apt.pin_text(pin["name"], pin.get("packages") or [], pin["version"])
                                if present and pin.get("version") else None)
    stamp = None
    if present and params["url"]:
        stamp = hashlib.sha256(key + b"\0" + wanted[where["source"]].encode("utf-8")).hexdigest() + "\n"
    return {"files": wanted, "stamp": stamp, "paths": where}


def prune_backups(name: str, keep: int = 5) -> None:
    """Keep the newest KEEP backups of the file NAME under BACKUPS (a backup per rotation or
    upgrade would otherwise pile up)."""
    copies = sorted((entry for entry in os.listdir(BACKUPS) if entry.startswith(name + ".") and entry.endswith("~")),
                    key=lambda entry: (entry[:-1].rsplit(".", 1)[-1], os.stat(os.path.join(BACKUPS, entry)).st_ctime))
    for entry in copies[:-keep]:
        os.unlink(os.path.join(BACKUPS, entry))


def hide_credentials(module, *urls) -> None:
    """The user:password and query string of each URL masked wherever the module's result shows
    it (its invocation included), as an argument marked no_log is."""
    for url in urls:
        for part in (url or "").split(" "):
            secrets = _secrets(part)
            if secrets and hasattr(module, "no_log_values"):
                module.no_log_values.update(secret for secret in secrets if len(secret) > 2)


def apply(module, params: dict) -> dict:
    """The source, its key and its pin as params say: the result apt_source reports."""
    hide_credentials(module, params.get("url"), params.get("key_url"))
    problem = check(params)
    if problem:
        raise ops.AptError(problem)
    for variable, value in params["environment"].items():
        os.environ[variable] = str(value)  # the key's download goes through the proxy too
    present = params["state"] == "present"
    result = {"changed": False, "files": [], "source_changed": False, "refreshed": False, "refresh_needed": False,
              "backups": []}
    key, keys = None, []
    if present and params["url"]:
        key, keys = wanted_key(module, params.get("key"), params.get("key_url"), paths(params["name"])["keyring"],
                               params["timeout"])
        result["keyring_keys"] = keys
    steps = plan(params, key)
    where, diffs = steps["paths"], []
    found = {path: read_bytes(path) for path in steps["files"]}
    foreign = [path for path in steps["files"] if not owned(path, found[path], params["name"])]
    taken = [path for path in foreign if steps["files"][path] is not None]
    if taken:
        raise ops.AptError("%s exists and was not written by gpuops.nvidia (%s): it is never taken over; choose "
                           "another name, or move the file away if it is meant to be replaced; nothing was changed"
                           % (", ".join(taken), "a source names itself in X-Repolib-Name, a pin in its Explanation"))
    if where["source"] in foreign and os.path.exists(where["keyring"]):
        foreign.append(where["keyring"])  # the key of a source that is not ours is not ours either
    result["kept"] = foreign
    for path in foreign:
        module.warn("%s was not written by gpuops.nvidia: left as it is" % path)
    for path, after in list(steps["files"].items()):
        before = found[path]
        after = to_bytes(after) if after is not None else None
        if before == after or path in foreign:
            steps["files"].pop(path)
            continue
        problem = files.check_writable(path)
        if problem:
            raise ops.AptError("cannot change %s: %s; nothing was changed" % (path, problem))
        result["files"].append(path)
        result["source_changed"] = result["source_changed"] or path in (where["keyring"], where["source"])
        if module._diff:  # pylint: disable=protected-access
            diffs.append(key_diff(path, before, after, known_keys(before), keys) if path == where["keyring"] else
                         files.diff_entry(path, to_text(before) if before is not None else None,
                                          to_text(after) if after is not None else None))
        steps["files"][path] = after
    refresh = bool(steps["stamp"] and params["refresh"]
                   and (result["source_changed"] or files.read_text(where["marker"]) != steps["stamp"]))
    result["refresh_needed"] = refresh and not result["source_changed"]
    result["changed"] = bool(result["files"]) or refresh
    if result["changed"] and not module.check_mode:
        for path in result["files"]:
            if steps["files"][path] is None:
                files.remove(module, path)
            else:
                # a file replaced keeps a copy (a removed one is rebuilt from the same options)
                made = files.write_atomic(module, path, steps["files"][path], mode=0o644, keep_backup=True,
                                          backup_dir=BACKUPS)
                if made:
                    result["backups"].append(made)
                    prune_backups(os.path.basename(path))
        if refresh:
            try:
                ops.refresh(module, sources=[where["source"]], hints=params["hints"], environment=params["environment"])
            except ops.AptError as exc:
                exc.changed = True
                raise
            files.write_atomic(module, where["marker"], steps["stamp"], mode=0o644)
            result["refreshed"] = True
    if not present and os.path.exists(where["marker"]) and not module.check_mode:
        files.remove(module, where["marker"])
    if diffs:
        result["diff"] = diffs
    return result


def apply_key(module, params: dict) -> dict:
    """One keyring at params' path as params say: the result repo_key reports."""
    hide_credentials(module, params.get("url"))
    path = params["path"]
    before = read_bytes(path)
    previous = known_keys(before)
    result = {"changed": False, "previous_keys": previous}
    after, keys = None, []
    if params["state"] != "absent":
        after, keys = wanted_key(module, params["content"], params["url"], path, params["timeout"])
        result["current_keys"] = keys
    if after != before:
        problem = files.check_writable(path)
        if problem:
            raise ops.AptError("cannot change %s: %s; nothing was changed" % (path, problem))
        result["changed"] = True
        if not module.check_mode:
            if after is None:
                files.remove(module, path)
            else:
                files.write_atomic(module, path, after, mode=0o644)
        if module._diff:  # pylint: disable=protected-access
            result["diff"] = key_diff(path, before, after, previous, keys)
    return result

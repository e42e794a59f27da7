# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A pure editor for Docker's daemon.json: registers the NVIDIA container runtime, optionally
makes it the default and turns CDI on, while every other key of the user's file survives in its
original order. Text in, text out: no file I/O here; the calling module reads, diffs, backs up
and writes.

What it manages (and what ``state=absent`` takes back):

* ``runtimes.<runtime_name>.path`` - other keys of that entry (``runtimeArgs``) and every other
  runtime are kept. On absent the whole ``runtimes.<runtime_name>`` entry goes, and ``runtimes``
  too if removing it left ``runtimes`` empty.
* ``default-runtime`` - only when ``set_as_default`` is true. ``set_as_default=False`` means "do
  not manage the default": an existing ``default-runtime`` is left as it is, even when it names
  this runtime. On absent it is removed only when it names this runtime (Docker then falls back
  to ``runc``).
* ``features.cdi = true`` - only when ``enable_cdi`` is true (Docker >= 25 understands it);
  ``enable_cdi=False`` leaves ``features`` alone. Other ``features`` keys are kept.

JSON has no comments to mark what the editor added, so ``configure`` keeps a small record (a
dict the module stores next to its other state): every key it set, with the value it set and
the value (or absence) it replaced. ``state=absent`` takes back exactly what the record lists
and what the operator has not changed since; what the operator had before stays. Without a
record (a file configured by something else) absent removes ``runtimes.<runtime_name>`` and a
``default-runtime`` naming it, and leaves ``features.cdi`` with a warning.
"""

from __future__ import annotations

import copy
import json
import re

__metaclass__ = type

from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime import detect
from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime.common import (
    ConfigError, check_options, check_runtime_name, option_error)

DEFAULT_SOURCE = "/etc/docker/daemon.json"
DEFAULT_RUNTIME_NAME = "nvidia"
DEFAULT_RUNTIME_PATH = "/usr/bin/nvidia-container-runtime"
# Docker's built-in runtimes; daemon.json may not redefine them.
STOCK_RUNTIME = "runc"
BUILTIN_RUNTIMES = (STOCK_RUNTIME, "io.containerd.runc.v2")
RECORD_VERSION = 1
# Keys of a runtime entry that cannot be combined with "path" (shim-based runtimes, Docker >= 23).
_SHIM_ONLY_KEYS = ("runtimeType", "options")

_BOM = "\ufeff"
_INDENT_RE = re.compile(r'^([ \t]+)"', re.M)


def _error(source, message):
    return ConfigError("%s: %s; the file was left unchanged" % (source, message))


def _object_pairs(duplicates):
    """An object_pairs_hook that keeps key order and records keys given more than once."""
    def hook(pairs):
        result = {}
        for key, value in pairs:
            if key in result:
                duplicates.append(key)
            result[key] = value
        return result
    return hook


def parse_daemon_json(text, source=DEFAULT_SOURCE):
    """Parse daemon.json text into a dict (in file order); None, empty or blank text is {}.

    Returns ``(data, warnings)``. Raises ConfigError naming the file, line and column for
    malformed JSON, and for a top level that is not an object. The error never quotes the
    file's content, so it cannot leak credentials."""
    if text is None:
        return {}, []
    if text.startswith(_BOM):
        text = text[len(_BOM):]
    if not text.strip():
        return {}, []
    duplicates = []
    try:
        data = json.loads(text, object_pairs_hook=_object_pairs(duplicates))
    except json.JSONDecodeError as exc:
        raise _error(source, "line %d, column %d: %s" % (exc.lineno, exc.colno, exc.msg)) from exc
    if not isinstance(data, dict):
        raise _error(source, "the top level must be a JSON object ({...}), not %s" % _json_type(data))
    warnings = ["%s: key %s appears more than once; the last value is used and the others are dropped when the file is rewritten"
                % (source, json.dumps(key)) for key in sorted(set(duplicates))]
    return data, warnings


def _json_type(value):
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, (int, float)):
        return "a number"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, list):
        return "an array"
    return "an object"


def _detect_indent(text):
    """The indentation the original file uses (spaces or a tab), 2 when it cannot tell."""
    if text:
        match = _INDENT_RE.search(text)
        if match:
            indent = match.group(1)
            if indent.startswith("\t"):
                return "\t"
            if indent.strip(" ") == "" and 1 <= len(indent) <= 8:
                return len(indent)
    return 2


def render(data, indent=2, newline="\n"):
    """daemon.json text for data: indented JSON, non-ASCII kept as is, trailing newline."""
    text = json.dumps(data, indent=indent, ensure_ascii=False) + "\n"
    if newline != "\n":
        text = text.replace("\n", newline)
    return text


def _canonical(data):
    # Strict comparison: in Python True == 1 and 1 == 1.0, in JSON they differ.
    return json.dumps(data, sort_keys=True)


def _get_object(data, key, source, path=None):
    """data[key] when it is an object, None when absent or null; ConfigError for any other type."""
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise _error(source, '"%s" must be a JSON object, not %s' % (path or key, _json_type(value)))
    return value


def _existing_runtimes(data, source):
    runtimes = _get_object(data, "runtimes", source) or {}
    # an entry that is no object is reported as a type error by the edit itself; a runtime runs
    # a binary (path) or, from Docker 23, a containerd shim (runtimeType); one with neither runs
    # nothing (dockerd refuses it), so taking it over replaces no runtime
    found = {}
    for name, entry in runtimes.items():
        if isinstance(entry, dict):
            options = entry.get("options") if isinstance(entry.get("options"), dict) else {}
            binary = entry.get("path") or options.get("BinaryName") or entry.get("runtimeType")
            if binary:
                found[name] = binary
    return found


def _lookup(data, path):
    """(whether path exists in data, a copy of its value or None)."""
    node = data
    for key in path:
        if not isinstance(node, dict) or key not in node:
            return False, None
        node = node[key]
    return True, copy.deepcopy(node)


def _remember(record, data, path):
    """Record the value at path before the editor first changes it."""
    key = ".".join(path)
    if key not in record["entries"]:
        existed, previous = _lookup(data, path)
        record["entries"][key] = {
            "path": list(path), "existed": existed, "previous": previous,
            "created_parents": [list(path[:depth]) for depth in range(1, len(path))
                                if not _lookup(data, path[:depth])[0]]}


def _present(data, runtime_name, runtime_path, set_as_default, enable_cdi, source, warnings, record):
    runtimes = _get_object(data, "runtimes", source)
    entry = _get_object(runtimes or {}, runtime_name, source, "runtimes.%s" % runtime_name)
    wanted = dict(entry or {})
    dropped = [key for key in _SHIM_ONLY_KEYS if key in wanted]
    for key in dropped:
        del wanted[key]
    wanted["path"] = runtime_path
    if _canonical(wanted) != _canonical(entry):
        _remember(record, data, ("runtimes", runtime_name))
        if runtimes is None:
            runtimes = data["runtimes"] = {}
        runtimes[runtime_name] = wanted
    if dropped:
        warnings.append('%s: removed %s from "runtimes.%s": Docker does not accept them together with "path"'
                        % (source, ", ".join('"%s"' % key for key in dropped), runtime_name))

    if set_as_default and data.get("default-runtime") != runtime_name:
        previous = data.get("default-runtime")
        if previous not in (None, runtime_name, STOCK_RUNTIME):
            warnings.append('%s: "default-runtime" was %s and is now %s'
                            % (source, json.dumps(previous, ensure_ascii=False), json.dumps(runtime_name, ensure_ascii=False)))
        _remember(record, data, ("default-runtime",))
        data["default-runtime"] = runtime_name

    if enable_cdi:
        features = _get_object(data, "features", source)
        if features is None or features.get("cdi") is not True:
            _remember(record, data, ("features", "cdi"))
            if features is None:
                features = data["features"] = {}
            features["cdi"] = True
    for entry in record["entries"].values():
        entry["set"] = _lookup(data, entry["path"])[1]


def _absent_recorded(data, record, source, warnings):
    """Take back what the record says the editor set, where it still holds the editor's value."""
    for key, entry in sorted(record["entries"].items(), key=lambda item: -len(item[1]["path"])):
        path = entry["path"]
        exists, current = _lookup(data, path)
        if not exists or _canonical(current) != _canonical(entry.get("set")):
            if exists:
                warnings.append('%s: "%s" was changed since gpuops.nvidia set it; it is left as it is' % (source, key))
            continue
        if entry["existed"]:
            _parent(data, path)[path[-1]] = copy.deepcopy(entry["previous"])
        else:
            del _parent(data, path)[path[-1]]
        for parent_path in sorted(entry.get("created_parents") or [], key=len, reverse=True):
            if _lookup(data, parent_path) == (True, {}):
                del _parent(data, parent_path)[parent_path[-1]]


def _parent(data, path):
    node = data
    for key in path[:-1]:
        node = node[key]
    return node


def _absent_unrecorded(data, runtime_name, source, warnings):
    runtimes = _get_object(data, "runtimes", source)
    if runtimes is not None and runtime_name in runtimes:
        del runtimes[runtime_name]
        if not runtimes:
            del data["runtimes"]
    if "default-runtime" in data and data["default-runtime"] == runtime_name:
        del data["default-runtime"]
    features = _get_object(data, "features", source)
    if features and features.get("cdi") is True:
        warnings.append('%s: there is no record of what gpuops.nvidia added, so "features.cdi" is left as it is '
                        "(remove it by hand if only the NVIDIA runtime needed it)" % source)


def new_record(source=DEFAULT_SOURCE, runtime_name=DEFAULT_RUNTIME_NAME, file_existed=True):
    return {"version": RECORD_VERSION, "file": source, "runtime_name": runtime_name, "file_existed": file_existed,
            "entries": {}}


def _check_record(record, source, runtime_name):
    if record is None:
        return None
    if (not isinstance(record, dict) or record.get("version") != RECORD_VERSION
            or not isinstance(record.get("entries"), dict)):
        raise ConfigError("%s: the record of what gpuops.nvidia added to %s is not one this version can read; "
                          "remove it to start over" % (record.get("path", "the record") if isinstance(record, dict)
                                                       else "the record", source))
    if record.get("runtime_name") != runtime_name:
        raise option_error("runtime_name", "gpuops.nvidia added the runtime %r to %s, not %r"
                           % (record.get("runtime_name"), source, runtime_name),
                           "use runtime_name=%s, or remove the runtime with that name first" % record.get("runtime_name"))
    return copy.deepcopy(record)


def configure(current_text, *, runtime_name=DEFAULT_RUNTIME_NAME, runtime_path=DEFAULT_RUNTIME_PATH, set_as_default=False,
              enable_cdi=True, state="present", source=DEFAULT_SOURCE, record=None):
    """Merge (or take back) the NVIDIA runtime settings into daemon.json text.

    ``current_text`` is the file's content, None when the file does not exist; ``record`` is
    the record a previous run returned (None when there is none). Returns a dict:

    * ``text`` - the new content; None when the file should not exist (absent, nothing left and
      there was no file). When nothing changes it is ``current_text`` itself, byte for byte, so
      an already-right file is never reformatted. Otherwise the JSON is written with the
      original file's indentation (2 spaces when it cannot tell), its line endings and a
      trailing newline.
    * ``changed`` - whether the meaning of the file changes.
    * ``data`` - the parsed new content (a dict, in file order; raw, mask it before showing).
    * ``record`` - the record to keep (None: keep none; on absent it is gone).
    * ``warnings`` - things the user should know (strings).

    Raises ConfigError (file, line, column) for malformed JSON, wrong types and refused options."""
    check_options("Docker", runtime_name, runtime_path, state, reserved=BUILTIN_RUNTIMES)
    data, warnings = parse_daemon_json(current_text, source)
    record = _check_record(record, source, runtime_name)
    before = _canonical(data)
    if state == "present":
        check_runtime_name(runtime_name, "Docker", existing=_existing_runtimes(data, source), runtime_path=runtime_path)
        record = record or new_record(source, runtime_name, file_existed=current_text is not None)
        _present(data, runtime_name, runtime_path, set_as_default, enable_cdi, source, warnings, record)
        if not record["entries"]:
            record = None  # everything was there already: nothing of it is ours to take back
    else:
        if record is not None:
            _absent_recorded(data, record, source, warnings)
        else:
            _absent_unrecorded(data, runtime_name, source, warnings)
    changed = _canonical(data) != before
    # a file the editor created goes again when nothing else is left in it
    created = record is not None and not record.get("file_existed", True)
    if state == "absent":
        record = None

    if not changed:
        text = current_text
    elif not data and (current_text is None or (state == "absent" and created)):
        text = None
    else:
        original = current_text or ""
        body = original[len(_BOM):] if original.startswith(_BOM) else original
        text = render(data, indent=_detect_indent(body), newline="\r\n" if "\r\n" in body else "\n")
        if original.startswith(_BOM):
            text = _BOM + text
    return {"text": text, "changed": changed, "data": data, "record": record, "warnings": warnings}


# `dockerd --validate` exists from 23.0; the CDI minimum (25.0) is detect.CDI_MIN's.
VALIDATE_MIN_VERSION = (23, 0)


def format_version(version):
    """(26, 1, 5) -> '26.1.5'; None stays None."""
    return ".".join(str(part) for part in version) if version else None


def cdi_decision(enable_cdi, version):
    """(set features.cdi?, warning or None) for enable_cdi 'true' | 'false' | 'auto' and Docker's
    version (None: unknown, e.g. Docker is not installed yet). Raises ConfigError when CDI is
    required on a Docker that cannot do it."""
    if enable_cdi == "false":
        return False, None
    if version is None or version[:2] >= detect.CDI_MIN["docker"]:
        return True, None
    shown = format_version(version)
    if enable_cdi == "auto":
        return False, "Docker %s does not support CDI (features.cdi needs Docker 25 or newer); CDI was skipped" % shown
    raise option_error("enable_cdi", "Docker %s does not support CDI (features.cdi needs Docker 25 or newer)" % shown,
                       "upgrade Docker, or set enable_cdi to auto (skip CDI with a warning) or false")


def validation_plan(text, version):
    """What `dockerd --validate` needs: (files {name: text}, argv maker, warnings). argv maker
    takes the scratch directory the files were written to. Docker before 23 cannot validate:
    no files, one warning."""
    if version is not None and version[:2] < VALIDATE_MIN_VERSION:
        return {}, None, ["dockerd %s cannot check a configuration (--validate needs Docker 23 or newer); "
                          "the merged daemon.json was not validated" % format_version(version)]

    def argv(binary, scratch):
        return [binary, "--validate", "--config-file", scratch + "/daemon.json"]
    return {"daemon.json": text or "{}\n"}, argv, []


def validation_problems(rc, out, err):
    """Problems from `dockerd --validate`'s answer (paths of the scratch copy already replaced)."""
    if rc != 0:
        return ["dockerd rejected the planned configuration: %s" % (err.strip() or out.strip())]
    return []

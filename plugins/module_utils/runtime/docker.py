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
  ``enable_cdi=False`` leaves ``features`` alone. Other ``features`` keys are kept. On absent
  ``features.cdi`` is left alone: the user may have had it before, and CDI does not depend on
  the NVIDIA runtime.
"""

from __future__ import annotations

import json
import re

__metaclass__ = type

from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime.common import ConfigError

DEFAULT_SOURCE = "/etc/docker/daemon.json"
DEFAULT_RUNTIME_NAME = "nvidia"
DEFAULT_RUNTIME_PATH = "/usr/bin/nvidia-container-runtime"
# Docker's built-in runtime; daemon.json may not redefine it.
STOCK_RUNTIME = "runc"
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


def _check_args(runtime_name, runtime_path, state):
    if state not in ("present", "absent"):
        raise ValueError("state must be 'present' or 'absent', not %r" % (state,))
    if not isinstance(runtime_name, str) or not runtime_name.strip():
        raise ValueError("runtime_name must be a non-empty string")
    if runtime_name == STOCK_RUNTIME:
        raise ValueError("runtime_name %r is Docker's built-in runtime and cannot be redefined in daemon.json" % STOCK_RUNTIME)
    if state == "present" and (not isinstance(runtime_path, str) or not runtime_path.strip()):
        raise ValueError("runtime_path must be a non-empty string")


def _present(data, runtime_name, runtime_path, set_as_default, enable_cdi, source, warnings):
    runtimes = _get_object(data, "runtimes", source)
    if runtimes is None:
        runtimes = data["runtimes"] = {}
    entry = _get_object(runtimes, runtime_name, source, "runtimes.%s" % runtime_name)
    if entry is None:
        entry = runtimes[runtime_name] = {}
    dropped = [key for key in _SHIM_ONLY_KEYS if key in entry]
    for key in dropped:
        del entry[key]
    if dropped:
        warnings.append('%s: removed %s from "runtimes.%s": Docker does not accept them together with "path"'
                        % (source, ", ".join('"%s"' % key for key in dropped), runtime_name))
    entry["path"] = runtime_path

    if set_as_default:
        previous = data.get("default-runtime")
        if previous not in (None, runtime_name, STOCK_RUNTIME):
            warnings.append('%s: "default-runtime" was %s and is now %s'
                            % (source, json.dumps(previous, ensure_ascii=False), json.dumps(runtime_name, ensure_ascii=False)))
        data["default-runtime"] = runtime_name

    if enable_cdi:
        features = _get_object(data, "features", source)
        if features is None:
            features = data["features"] = {}
        features["cdi"] = True


def _absent(data, runtime_name, source):
    runtimes = _get_object(data, "runtimes", source)
    if runtimes is not None and runtime_name in runtimes:
        del runtimes[runtime_name]
        if not runtimes:
            del data["runtimes"]
    if "default-runtime" in data and data["default-runtime"] == runtime_name:
        del data["default-runtime"]


def configure(current_text, *, runtime_name=DEFAULT_RUNTIME_NAME, runtime_path=DEFAULT_RUNTIME_PATH, set_as_default=False,
              enable_cdi=True, state="present", source=DEFAULT_SOURCE):
    """Merge (or take back) the NVIDIA runtime settings into daemon.json text.

    ``current_text`` is the file's content, None when the file does not exist. Returns a dict:

    * ``text`` - the new content; None when the file should not exist (absent, nothing left and
      there was no file). When nothing changes it is ``current_text`` itself, byte for byte, so
      an already-right file is never reformatted. Otherwise the JSON is written with the
      original file's indentation (2 spaces when it cannot tell), its line endings and a
      trailing newline.
    * ``changed`` - whether the meaning of the file changes.
    * ``data`` - the parsed new content (a dict, in file order; raw, mask it before showing).
    * ``warnings`` - things the user should know (strings).

    Raises ConfigError (file, line, column) for malformed JSON or wrong types, ValueError for
    bad arguments."""
    _check_args(runtime_name, runtime_path, state)
    data, warnings = parse_daemon_json(current_text, source)
    before = _canonical(data)
    if state == "present":
        _present(data, runtime_name, runtime_path, set_as_default, enable_cdi, source, warnings)
    else:
        _absent(data, runtime_name, source)
    changed = _canonical(data) != before

    if not changed:
        text = current_text
    elif current_text is None and not data:
        text = None
    else:
        original = current_text or ""
        body = original[len(_BOM):] if original.startswith(_BOM) else original
        text = render(data, indent=_detect_indent(body), newline="\r\n" if "\r\n" in body else "\n")
        if original.startswith(_BOM):
            text = _BOM + text
    return {"text": text, "changed": changed, "data": data, "warnings": warnings}


# Docker understands "features": {"cdi": true} from 25.0; `dockerd --validate` exists from 23.0.
CDI_MIN_VERSION = (25, 0)
VALIDATE_MIN_VERSION = (23, 0)


def parse_version(text):
    """'Docker version 26.1.5+dfsg1, build 411e817' / '20.10.24' -> (26, 1, 5); None when unreadable."""
    match = re.search(r"(\d+)\.(\d+)(?:\.(\d+))?", text or "")
    if not match:
        return None
    return tuple(int(part or 0) for part in match.groups())


def format_version(version):
    """(26, 1, 5) -> '26.1.5'; None stays None."""
    return ".".join(str(part) for part in version) if version else None


def cdi_decision(enable_cdi, version):
    """(set features.cdi?, warning or None) for enable_cdi 'true' | 'false' | 'auto' and Docker's
    version (None: unknown, e.g. Docker is not installed yet). Raises ConfigError when CDI is
    required on a Docker that cannot do it."""
    if enable_cdi == "false":
        return False, None
    if version is None or version[:2] >= CDI_MIN_VERSION:
        return True, None
    shown = format_version(version)
    if enable_cdi == "auto":
        return False, "Docker %s does not support CDI (features.cdi needs Docker 25 or newer); CDI was skipped" % shown
    raise ConfigError("Docker %s does not support CDI (features.cdi needs Docker 25 or newer); upgrade Docker, "
                      "or set enable_cdi=auto to skip CDI on older Docker, or enable_cdi=false" % shown)


def validate(run, binary, text, version):
    """Check planned daemon.json text with `dockerd --validate` in a scratch directory (never the
    live file). `run(argv)` returns (rc, stdout, stderr). Returns (problems, warnings)."""
    import os
    import shutil
    import tempfile
    if version is not None and version[:2] < VALIDATE_MIN_VERSION:
        return [], ["dockerd %s cannot check a configuration (--validate needs Docker 23 or newer); "
                    "the merged daemon.json was not validated" % format_version(version)]
    scratch = tempfile.mkdtemp(prefix="gpuops-docker-")
    try:
        path = os.path.join(scratch, "daemon.json")
        with open(path, "w", encoding="utf-8") as handle:
            handle.write(text or "{}\n")
        rc, out, err = run([binary, "--validate", "--config-file", path])
        if rc != 0:
            message = (err.strip() or out.strip()).replace(path, "the planned daemon.json")
            return ["dockerd rejected the planned configuration: %s" % message], []
        return [], []
    finally:
        shutil.rmtree(scratch, ignore_errors=True)

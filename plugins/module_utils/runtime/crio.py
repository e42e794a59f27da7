# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""CRI-O: the NVIDIA runtime as a drop-in, /etc/crio/crio.conf.d/99-nvidia.toml, so the main
crio.conf is never touched. Pure functions: text in, text out, no file I/O.

The drop-in is written by hand (TOML basic strings, properly escaped) so that writing needs no
third-party library on the managed host. Reading uses ``tomllib`` (Python >= 3.11), else the
``tomli`` backport, else ``tomlkit``; hosts with Python 3.9/3.10 need one of the last two only
to read existing files.

CDI needs no setting: CRI-O enables it by default and reads specs from /etc/cdi and
/var/run/cdi."""

from __future__ import annotations

import re
import traceback

__metaclass__ = type

from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime.common import (
    ConfigError, check_runtime_name, option_error)

try:
    import tomllib as _toml_reader
except ImportError:
    try:
        import tomli as _toml_reader
    except ImportError:
        _toml_reader = None

try:
    import tomlkit
    HAS_TOMLKIT = True
    TOMLKIT_IMPORT_ERROR = None
except ImportError:
    tomlkit = None
    HAS_TOMLKIT = False
    TOMLKIT_IMPORT_ERROR = traceback.format_exc()

# Whether this host can read TOML at all (writing the drop-in never needs a library).
HAS_TOML_PARSER = _toml_reader is not None or HAS_TOMLKIT

DEFAULT_SOURCE = "/etc/crio/crio.conf.d/99-nvidia.toml"
DEFAULT_RUNTIME_NAME = "nvidia"
DEFAULT_RUNTIME_PATH = "/usr/bin/nvidia-container-runtime"
# CRI-O's own runtime handlers.
BUILTIN_RUNTIMES = ("runc", "crun")
# The runtime types CRI-O knows for a runtime handler.
RUNTIME_TYPES = ("oci", "vm", "pod")
CDI_SPEC_DIRS = ("/etc/cdi", "/var/run/cdi")

HEADER = (
    "# Managed by Ansible (gpuops.nvidia): the NVIDIA container runtime for CRI-O.\n"
    "# Changes made here are overwritten on the next run.\n"
    "# CDI needs no setting here: CRI-O enables it by default and reads CDI specs from\n"
    "# %s.\n" % " and ".join(CDI_SPEC_DIRS)
)

_BARE_KEY_RE = re.compile(r"^[A-Za-z0-9_-]+$")
_ENV_NAME_RE = re.compile(r"^[A-Za-z_][A-Za-z0-9_]*$")
_LOCATION_RE = re.compile(r"\s*\(at line (\d+), column (\d+)\)\s*$")
_END_RE = re.compile(r"\s*\(at end of document\)\s*$")
_TOMLKIT_LOCATION_RE = re.compile(r"\s*at line (\d+) col (\d+)\s*$")
_ESCAPES = {"\b": "\\b", "\t": "\\t", "\n": "\\n", "\f": "\\f", "\r": "\\r", '"': '\\"', "\\": "\\\\"}


def toml_string(value):
    """A TOML basic string ("...") for value, with quotes, backslashes and control characters escaped."""
    out = []
    for char in value:
        if char in _ESCAPES:
            out.append(_ESCAPES[char])
        elif ord(char) < 0x20 or ord(char) == 0x7F:
            out.append("\\u%04X" % ord(char))
        else:
            out.append(char)
    return '"%s"' % "".join(out)


def toml_key(key):
    """A TOML key: bare when it can be, quoted otherwise."""
    return key if _BARE_KEY_RE.match(key) else toml_string(key)


def _env_list(monitor_env):
    """monitor_env as a list of "NAME=value" strings, from a dict (in its order) or a list."""
    if monitor_env is None:
        return []
    if isinstance(monitor_env, dict):
        items = ["%s=%s" % (name, "" if value is None else value) for name, value in monitor_env.items()]
    elif isinstance(monitor_env, (list, tuple)):
        items = list(monitor_env)
    else:
        raise option_error("monitor_env", "must be a dict or a list of NAME=value strings", "give NAME=value strings")
    for item in items:
        if not isinstance(item, str) or "=" not in item or not _ENV_NAME_RE.match(item.split("=", 1)[0]):
            raise option_error("monitor_env", "entries must look like NAME=value, not %r" % (item,),
                               "give NAME=value strings")
    return items


def drop_in(*, runtime_name=DEFAULT_RUNTIME_NAME, runtime_path=DEFAULT_RUNTIME_PATH, runtime_type="oci", set_as_default=False,
            monitor_env=None):
    """The TOML text of the CRI-O drop-in that registers the NVIDIA runtime.

    ``[crio.runtime] default_runtime`` is written only when ``set_as_default`` is true (otherwise
    the drop-in does not touch CRI-O's default). ``monitor_env`` (a dict or a list of
    "NAME=value" strings) becomes the handler's ``monitor_env``, the environment of conmon.
    The same arguments always give the same text. Raises ConfigError for bad arguments."""
    check_runtime_name(runtime_name, "CRI-O", reserved=BUILTIN_RUNTIMES)
    if not isinstance(runtime_path, str) or not runtime_path.strip():
        raise option_error("runtime_path", "must be the path of the NVIDIA container runtime, not %r" % (runtime_path,),
                           "set runtime_path (default /usr/bin/nvidia-container-runtime)")
    if runtime_type not in RUNTIME_TYPES:
        raise option_error("runtime_type", "must be one of %s, not %r" % (", ".join(RUNTIME_TYPES), runtime_type),
                           "use oci for the NVIDIA runtime")
    env = _env_list(monitor_env)

    lines = [HEADER]
    if set_as_default:
        lines.append("[crio.runtime]\ndefault_runtime = %s\n" % toml_string(runtime_name))
    handler = ["[crio.runtime.runtimes.%s]" % toml_key(runtime_name),
               "runtime_path = %s" % toml_string(runtime_path),
               "runtime_type = %s" % toml_string(runtime_type)]
    if env:
        handler.append("monitor_env = [")
        handler.extend("  %s," % toml_string(item) for item in env)
        handler.append("]")
    lines.append("\n".join(handler) + "\n")
    return "\n".join(lines)


def _end_position(text):
    lines = text.split("\n")
    return len(lines), len(lines[-1]) + 1


def _unwrap(value):
    if hasattr(value, "unwrap"):
        return value.unwrap()
    if isinstance(value, dict):
        return dict((str(key), _unwrap(item)) for key, item in value.items())
    if isinstance(value, list):
        return [_unwrap(item) for item in value]
    return value


def parse_crio_config(text, source=DEFAULT_SOURCE):
    """Parse CRI-O TOML (crio.conf or a drop-in) into plain dicts; None or blank text is {}.

    Raises ConfigError "<source>: line L, column C: <message>; the file was left unchanged" for
    malformed TOML (the message never quotes the file's values), and ConfigError when this host
    has no TOML reader (tomllib, tomli or tomlkit)."""
    if text is None or not text.strip():
        return {}
    if _toml_reader is not None:
        try:
            return _toml_reader.loads(text)
        except _toml_reader.TOMLDecodeError as exc:
            message = str(exc)
            match = _LOCATION_RE.search(message)
            if match:
                line, column = int(match.group(1)), int(match.group(2))
                message = message[:match.start()]
            else:
                line, column = _end_position(text)
                message = _END_RE.sub("", message) + " (at the end of the file)"
            raise ConfigError("%s: line %d, column %d: %s; the file was left unchanged" % (source, line, column, message)) from exc
    if HAS_TOMLKIT:
        try:
            return _unwrap(tomlkit.parse(text))
        except (tomlkit.exceptions.TOMLKitError, ValueError) as exc:
            message = _TOMLKIT_LOCATION_RE.sub("", str(exc)).rstrip(".")
            line, column = getattr(exc, "line", None), getattr(exc, "col", None)
            if type(exc).__name__ == "UnexpectedEofError" or message.endswith("'\\x00'"):
                # tomlkit reads past the end as NUL and then reports a meaningless position.
                line, column = _end_position(text)
                message = "Unexpected end of file"
            elif line is None:
                raise ConfigError("%s: %s; the file was left unchanged" % (source, message)) from exc
            else:
                column += 1  # tomlkit counts columns from 0
            raise ConfigError("%s: line %d, column %d: %s; the file was left unchanged" % (source, line, column, message)) from exc
    raise ConfigError("%s: cannot read TOML on this host: Python >= 3.11 (tomllib), or the tomli or tomlkit package, is needed" % source)


def _table(data, key, source, where):
    value = data.get(key)
    if value is None:
        return None
    if not isinstance(value, dict):
        raise ConfigError("%s: %s must be a table, not %s; the file was left unchanged" % (source, where, type(value).__name__))
    return value


def check_drop_in(existing_text, *, runtime_name=DEFAULT_RUNTIME_NAME, source=DEFAULT_SOURCE):
    """The runtime handler entry (``crio.runtime.runtimes.<runtime_name>``) of an existing
    drop-in, as a dict; None when the text is None/blank or has no such entry.

    Raises ConfigError with line and column for malformed TOML, and ConfigError when a table on
    the way (crio, crio.runtime, crio.runtime.runtimes, the entry) is not a table."""
    data = parse_crio_config(existing_text, source)
    node = data
    path = []
    for key in ("crio", "runtime", "runtimes", runtime_name):
        path.append(key)
        node = _table(node, key, source, ".".join(path))
        if node is None:
            return None
    return node

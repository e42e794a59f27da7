# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""CRI-O: the NVIDIA runtime as a drop-in, /etc/crio/crio.conf.d/99-nvidia.toml, so no file
of the operator's is touched. Pure functions: text in, text out, no file I/O.

CRI-O reads crio.conf, then every file under crio.conf.d (recursively, in byte order of the
names, whatever their extension) and merges them: scalars one by one, but a runtime handler
table defined again in a later file replaces the earlier one whole. A handler needs the monitor
(conmon) settings of the node's packaging: CRI-O from the upstream packages keeps conmon in
/usr/libexec/crio/ (not in $PATH) and names it in each handler's monitor_path, so a handler
without it stops CRI-O from starting ("failed to translate monitor fields for runtime
nvidia"). The NVIDIA handler therefore copies the monitor fields (and the other options that
matter) of the node's default runtime from the effective configuration, as the containerd
editor copies runc's options, with overrides on top.

The drop-in is written by hand (TOML basic strings, properly escaped) so that writing needs no
third-party library on the managed host. Reading uses ``tomllib`` (Python >= 3.11), else the
``tomli`` backport, else ``tomlkit``; hosts with Python 3.9/3.10 need one of the last two only
to read existing files.

CDI needs no setting: CRI-O enables it by default and reads specs from /etc/cdi and
/var/run/cdi."""

from __future__ import annotations

import os
import re
import traceback

__metaclass__ = type

from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime.common import (
    ConfigError, check_options, check_runtime_name, option_error)

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
# CRI-O's default runtime when no file sets default_runtime (1.28 and later).
DEFAULT_RUNTIME = "crun"
# CRI-O 1.34's built-in crun handler (`crio config --default`), which applies where no file
# defines [crio.runtime.runtimes.crun].
BUILTIN_CRUN = {
    "runtime_type": "oci",
    "runtime_root": "/run/crun",
    "container_min_memory": "500KiB",
    "monitor_cgroup": "system.slice",
    "monitor_env": ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"],
    "allowed_annotations": ["io.containers.trace-syscall", "io.kubernetes.cri-o.Devices"],
    "privileged_without_host_devices": False,
}
# Handler fields copied from the node's default runtime: how conmon runs (its path, cgroups and
# environment) and the options NVIDIA's own `nvidia-ctk runtime configure` carries over. Not
# copied: runtime_path/runtime_type (the NVIDIA runtime's own), inherit_default_runtime (it would
# replace runtime_path with the default's), platform_runtime_paths (replaces runtime_path per
# platform), runtime_config_path (vm handlers only), runtime_pull_image.
COPIED_FIELDS = ("monitor_path", "monitor_cgroup", "monitor_exec_cgroup", "monitor_env", "runtime_root",
                 "allowed_annotations", "privileged_without_host_devices", "container_min_memory", "no_sync_log",
                 "default_annotations")
# What a value of each field must be (CRI-O 1.34's runtime handler).
FIELD_KINDS = {"monitor_path": "path", "monitor_cgroup": "string", "monitor_exec_cgroup": "string",
               "runtime_root": "path", "container_min_memory": "string", "monitor_env": "environment",
               "allowed_annotations": "list of strings", "privileged_without_host_devices": "boolean",
               "no_sync_log": "boolean", "default_annotations": "table of strings"}
# Fields the module's own options set.
OWN_FIELDS = {"runtime_path": "runtime_path", "runtime_type": "the NVIDIA runtime's type (oci)",
              "default_runtime": "set_as_default"}
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
    if isinstance(monitor_env, dict):
        items = ["%s=%s" % (name, "" if value is None else value) for name, value in monitor_env.items()]
    elif isinstance(monitor_env, (list, tuple)):
        items = list(monitor_env)
    else:
        raise option_error("handler_options", "monitor_env must be a dict or a list of NAME=value strings, not %r"
                           % (monitor_env,), "give monitor_env as NAME=value strings")
    for item in items:
        if not isinstance(item, str) or "=" not in item or not _ENV_NAME_RE.match(item.split("=", 1)[0]):
            raise option_error("handler_options", "monitor_env entries must look like NAME=value, not %r" % (item,),
                               "give monitor_env as NAME=value strings")
    return items


def check_handler_options(options) -> dict:
    """The handler_options, checked field by field as CRI-O reads them (monitor_env as a list of
    NAME=value strings). A None value stays None (it drops a copied field). Raises ConfigError
    naming the option for an unknown field, a field the module sets itself, or a wrong value."""
    checked = {}
    for key, value in (options or {}).items():
        if key in OWN_FIELDS:
            raise option_error("handler_options", "%s is not a handler option here: the module sets it from %s"
                               % (key, OWN_FIELDS[key]), "leave %s out of handler_options" % key)
        kind = FIELD_KINDS.get(key)
        if kind is None:
            raise option_error("handler_options", "CRI-O 1.34 has no runtime handler field %s" % key,
                               "use the fields of [crio.runtime.runtimes.*]: %s" % ", ".join(COPIED_FIELDS))
        if value is None:
            checked[key] = None
            continue
        if kind == "environment":
            checked[key] = _env_list(value)
            continue
        good = {"path": isinstance(value, str) and value.startswith("/"),
                "string": isinstance(value, str),
                "boolean": isinstance(value, bool),
                "list of strings": isinstance(value, list) and all(isinstance(item, str) for item in value),
                "table of strings": isinstance(value, dict) and all(isinstance(item, str) for item in value.values()),
                }[kind]
        if not good:
            raise option_error("handler_options", "%s must be %s, not %r" % (
                key, "an absolute path" if kind == "path" else "a " + kind, value), "give %s a %s" % (key, kind))
        checked[key] = value
    return checked


def _toml_value(value, key):
    if isinstance(value, bool):
        return "true" if value else "false"
    if isinstance(value, int):
        return str(value)
    if isinstance(value, str):
        return toml_string(value)
    if isinstance(value, (list, tuple)) and all(isinstance(item, str) for item in value):
        return "[%s]" % ", ".join(toml_string(item) for item in value)
    if isinstance(value, dict) and all(isinstance(item, str) for item in value.values()):
        return "{%s}" % ", ".join("%s = %s" % (toml_key(name), toml_string(item)) for name, item in value.items())
    raise option_error("handler_options", "%s must be a string, a boolean, a number, a list of strings or a table "
                       "of strings, not %r" % (key, value), "give %s a value CRI-O reads" % key)


def drop_in(*, runtime_name=DEFAULT_RUNTIME_NAME, runtime_path=DEFAULT_RUNTIME_PATH, runtime_type="oci", set_as_default=False,
            handler=None):
    """The TOML text of the CRI-O drop-in that registers the NVIDIA runtime.

    ``handler`` holds the handler's other fields (as handler_for() plans them: the default
    runtime's monitor settings ...), written in COPIED_FIELDS order. ``[crio.runtime]
    default_runtime`` is written only when ``set_as_default`` is true (otherwise the drop-in
    does not touch CRI-O's default). The same arguments always give the same text. Raises
    ConfigError for bad arguments."""
    check_options("CRI-O", runtime_name, runtime_path, reserved=BUILTIN_RUNTIMES)
    if runtime_type not in RUNTIME_TYPES:
        raise option_error("runtime_type", "must be one of %s, not %r" % (", ".join(RUNTIME_TYPES), runtime_type),
                           "use oci for the NVIDIA runtime")
    fields = check_handler_options(handler)

    lines = [HEADER]
    if set_as_default:
        lines.append("[crio.runtime]\ndefault_runtime = %s\n" % toml_string(runtime_name))
    handler_lines = ["[crio.runtime.runtimes.%s]" % toml_key(runtime_name),
                     "runtime_path = %s" % toml_string(runtime_path),
                     "runtime_type = %s" % toml_string(runtime_type)]
    for key in COPIED_FIELDS:
        if fields.get(key) not in (None, []):
            handler_lines.append("%s = %s" % (key, _toml_value(fields[key], key)))
    lines.append("\n".join(handler_lines) + "\n")
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


def _runtimes(data, source):
    """The crio.runtime table and its runtimes of one parsed file."""
    runtime = _table(_table(data, "crio", source, "crio") or {}, "runtime", source, "crio.runtime") or {}
    runtimes = _table(runtime, "runtimes", source, "crio.runtime.runtimes") or {}
    for name in runtimes:
        _table(runtimes, name, source, "crio.runtime.runtimes.%s" % name)
    return runtime, runtimes


def effective(files) -> dict:
    """CRI-O's effective runtime settings from its files, given as [(path, text)] in the order
    CRI-O reads them (crio.conf, then crio.conf.d). Every file is parsed, so a malformed one is
    refused with its own name, line and column. Returns {'default_runtime', 'default_from' (the
    file that set it, None: CRI-O's default), 'cgroup_manager', 'runtimes': {name: {'table',
    'source'}}}: a handler table defined again later replaces the earlier one whole."""
    result = {"default_runtime": DEFAULT_RUNTIME, "default_from": None, "cgroup_manager": "systemd", "runtimes": {}}
    for path, text in files:
        runtime, runtimes = _runtimes(parse_crio_config(text, path), path)
        if runtime.get("default_runtime"):
            result["default_runtime"], result["default_from"] = runtime["default_runtime"], path
        if runtime.get("cgroup_manager"):
            result["cgroup_manager"] = runtime["cgroup_manager"]
        for name, table in runtimes.items():
            result["runtimes"][name] = {"table": table, "source": path}
    return result


def base_runtime(config: dict, runtime_name: str) -> tuple:
    """(name, table, where) of the runtime the NVIDIA handler takes its settings from: the
    default runtime (unless it is the NVIDIA one itself), else crun, else runc - defined in a
    file, or CRI-O's built-in crun."""
    for name in (config["default_runtime"], "crun", "runc"):
        if name == runtime_name or name is None:
            continue
        entry = config["runtimes"].get(name)
        if entry and entry["table"].get("runtime_type", "oci") == "oci":
            return name, entry["table"], entry["source"]
        if name == "crun" and not entry:
            return name, BUILTIN_CRUN, "CRI-O's built-in crun handler"
    return None, {}, None


def handler_for(config: dict, runtime_name: str, overrides: dict | None = None) -> tuple:
    """The NVIDIA handler's fields (besides runtime_path/runtime_type): the COPIED_FIELDS of the
    base runtime, then the overrides (a None value drops a field). Returns (fields, base name,
    where the base was read)."""
    name, table, where = base_runtime(config, runtime_name)
    fields = {key: table[key] for key in COPIED_FIELDS if key in table and table[key] not in ("", None, [], {})}
    for key, value in check_handler_options(overrides).items():
        if value is None:
            fields.pop(key, None)
        else:
            fields[key] = value
    return fields, name, where


def existing_runtimes(config: dict) -> dict:
    """name -> runtime_path of every handler the effective configuration defines (crun and
    runc built in)."""
    found = {"crun": "crun", "runc": "runc"}
    found.update({name: entry["table"].get("runtime_path") or name for name, entry in config["runtimes"].items()})
    return found


def handler_problems(fields: dict, cgroup_manager: str, conmon_in_path: bool, executables: dict) -> list:
    """Why CRI-O would refuse to start with this NVIDIA handler, as CRI-O 1.34's start-up checks
    say it: conmon must be found (monitor_path, else in $PATH) and be executable, and
    monitor_cgroup must suit the cgroup manager. executables maps a path to whether it is an
    executable file on the node."""
    problems = []
    monitor = fields.get("monitor_path")
    if monitor:
        if not executables.get(monitor):
            problems.append("the handler's monitor_path %s is no executable file on this node" % monitor)
    elif not conmon_in_path:
        problems.append("the handler has no monitor_path and conmon is not in $PATH (CRI-O from the upstream "
                        "packages keeps it in /usr/libexec/crio/): CRI-O would refuse to start with 'failed to "
                        "translate monitor fields for runtime'")
    cgroup = fields.get("monitor_cgroup") or ""
    if cgroup_manager == "cgroupfs" and cgroup not in ("", "pod", "system.slice"):
        problems.append("monitor_cgroup %r does not suit the cgroupfs cgroup manager (it takes 'pod' or nothing)" % cgroup)
    elif cgroup_manager == "systemd" and cgroup and cgroup != "pod" and not cgroup.endswith(".slice"):
        problems.append("monitor_cgroup %r does not suit the systemd cgroup manager ('pod' or a systemd slice)" % cgroup)
    return problems


def configure(files, *, drop_in_path=DEFAULT_SOURCE, runtime_name=DEFAULT_RUNTIME_NAME,
              runtime_path=DEFAULT_RUNTIME_PATH, set_as_default=False, handler_options=None, state="present",
              later=()) -> dict:
    """Plan the NVIDIA drop-in. files: [(path, text)] of CRI-O's configuration in read order,
    without the drop-in itself; later: the paths among them CRI-O reads after the drop-in.
    Returns {'text' (None: no drop-in), 'handler' (its fields), 'base' (the runtime they came
    from and where), 'cgroup_manager', 'warnings'}."""
    check_options("CRI-O", runtime_name, runtime_path, state, reserved=BUILTIN_RUNTIMES)
    config = effective(files)
    warnings = []
    if state == "absent":
        if config["default_runtime"] == runtime_name:
            warnings.append("%s still makes %s CRI-O's default runtime, which no longer exists: CRI-O will not start "
                            "until default_runtime is changed there" % (config["default_from"], runtime_name))
        return {"text": None, "handler": {}, "base": None, "cgroup_manager": config["cgroup_manager"],
                "warnings": warnings}
    check_runtime_name(runtime_name, "CRI-O", reserved=BUILTIN_RUNTIMES, existing=existing_runtimes(config),
                       runtime_path=runtime_path)
    fields, base, where = handler_for(config, runtime_name, handler_options)
    if base is None:
        warnings.append("CRI-O's configuration has no oci runtime to take the NVIDIA handler's monitor settings from")
    for path in later:
        entry = config["runtimes"].get(runtime_name)
        if entry and entry["source"] == path:
            warnings.append("%s, read after %s, defines [crio.runtime.runtimes.%s] too and replaces this one"
                            % (path, drop_in_path, runtime_name))
        if set_as_default and config["default_from"] == path and config["default_runtime"] != runtime_name:
            warnings.append("%s, read after %s, sets default_runtime = %r, so %s is not the default"
                            % (path, drop_in_path, config["default_runtime"], runtime_name))
    text = drop_in(runtime_name=runtime_name, runtime_path=runtime_path, set_as_default=set_as_default, handler=fields)
    return {"text": text, "handler": fields, "base": {"runtime": base, "from": where},
            "cgroup_manager": config["cgroup_manager"], "warnings": warnings}


def validation_files(main_path, files, drop_in_text, drop_in_path, config_dir, scratch) -> tuple:
    """The planned configuration laid out under the scratch directory for `crio config`:
    ({path: text}, main file there, drop-in directory there). files are [(path, text)] as for
    configure(); paths under config_dir keep their place relative to it."""
    laid = {}
    main = os.path.join(scratch, "crio.conf")
    conf_d = os.path.join(scratch, "crio.conf.d")
    laid[os.path.join(conf_d, ".keep")] = ""
    for path, text in files:
        if path == main_path:
            laid[main] = text
        else:
            laid[os.path.join(conf_d, os.path.relpath(path, config_dir))] = text
    if drop_in_text is not None:
        laid[os.path.join(conf_d, os.path.relpath(drop_in_path, config_dir))] = drop_in_text
    return laid, main if main in laid else "", conf_d


def config_argv(binary, main, conf_d) -> list:
    return [binary, "--config", main, "--config-dir", conf_d, "config"]


def validation_problems(rc, out, err, runtime_name, runtime_path, state) -> list:
    """Problems in CRI-O's answer to `crio config` over the planned files (empty: valid)."""
    if rc != 0:
        message = err.strip() or out.strip()
        match = re.search(r'level=fatal msg="((?:[^"\\]|\\.)*)"', message)
        return ["CRI-O rejected the planned configuration: %s" % (match.group(1).replace('\\"', '"') if match else message)]
    if state == "absent":
        return []
    if "[crio.runtime.runtimes.%s]" % runtime_name not in out and '[crio.runtime.runtimes."%s"]' % runtime_name not in out:
        return ["CRI-O's merged configuration has no %s runtime handler" % runtime_name]
    return []

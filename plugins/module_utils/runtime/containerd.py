# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""containerd configuration for the NVIDIA runtime and CDI, edited in place with tomlkit so
comments, order and formatting of everything else survive. Pure: text in, text out (the
validation run over the planned files is module_utils/runtime/validation.py's).

Two modes. Drop-in (the default): the main file only gains an `imports` glob; the NVIDIA
settings go to a file of their own. Before containerd 2.1 an imported file REPLACES whole
plugin sections, so the drop-in then carries the main file's complete CRI section plus the
NVIDIA settings. In place: the main file's CRI section is edited.

Everything this editor adds to a file it does not own carries a `gpuops.nvidia` comment, so
state=absent removes exactly that and restores values it replaced."""

from __future__ import annotations

import copy
import fnmatch
import os
import re
import traceback

__metaclass__ = type

from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime import detect
from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime.common import (
    ConfigError, check_options, check_runtime_name, option_error)

try:
    import tomlkit
    from tomlkit.exceptions import ParseError
    HAS_TOMLKIT = True
    TOMLKIT_IMPORT_ERROR = None
except ImportError:
    tomlkit = None
    ParseError = ValueError
    HAS_TOMLKIT = False
    TOMLKIT_IMPORT_ERROR = traceback.format_exc()

MARK = "gpuops.nvidia"
# config version -> the table path of the CRI runtime plugin
CRI_PATHS = {
    1: ("plugins", "cri"),
    2: ("plugins", "io.containerd.grpc.v1.cri"),
    3: ("plugins", "io.containerd.cri.v1.runtime"),
    4: ("plugins", "io.containerd.cri.v1.runtime"),
}
RUNC_V2 = "io.containerd.runc.v2"
# containerd's own runtime: its handler must stay runc.
BUILTIN_RUNTIMES = ("runc",)


def parse_version(text: str) -> tuple:
    """'1.6.20~ds1' / 'v2.1.4' / 'containerd github.com/containerd/containerd 1.7.24 ...' -> (1, 6, 20)."""
    version = detect.parse_version(text)
    if version is None:
        raise option_error("containerd_version", "cannot read a containerd version from %r" % (text,),
                           "set containerd_version to containerd's version, e.g. 1.7.24")
    return version


def config_version_for(containerd: tuple) -> int:
    """The configuration version containerd writes by default."""
    if containerd >= (2, 3, 0):
        return 4
    if containerd >= (2, 0, 0):
        return 3
    return 2


def supported_config_versions(containerd: tuple) -> tuple:
    if containerd >= (2, 3, 0):
        return (1, 2, 3, 4)
    if containerd >= (2, 0, 0):
        return (1, 2, 3)
    return (1, 2)


def cdi_supported(containerd: tuple) -> bool:
    return bool(detect.cdi_supported("containerd", containerd))


def imports_merge(containerd: tuple) -> bool:
    """From containerd 2.1 imported files merge into plugin sections instead of replacing them."""
    return containerd >= (2, 1, 0)


def parse(text: str | None, source: str):
    """A tomlkit document of the text (an empty one for no text). Malformed TOML raises
    ConfigError with the file, line, column and the parser's message."""
    if not text or not text.strip():
        return tomlkit.document()
    try:
        return tomlkit.parse(text)
    except ParseError as exc:
        line, col = getattr(exc, "line", "?"), getattr(exc, "col", "?")
        message = str(exc).split(" at line", maxsplit=1)[0]
        raise ConfigError("%s: line %s, column %s: %s; the file was left unchanged" % (source, line, col, message))


def _get(node, path):
    for key in path:
        if not hasattr(node, "get"):
            return None
        node = node.get(key)
        if node is None:
            return None
    return node


def ensure_table(node, path):
    """The table at path under node, created (as tomlkit tables) where missing."""
    for key in path:
        child = node.get(key)
        if child is None:
            child = tomlkit.table()
            node[key] = child
            child = node[key]
        elif not hasattr(child, "get"):
            raise ConfigError("%s is a %s, not a table" % (".".join(path), type(child).__name__))
        node = child
    return node


def plain(item):
    """tomlkit item -> plain Python (dict/list/str/int/bool)."""
    return item.unwrap() if hasattr(item, "unwrap") else copy.deepcopy(item)


def _item(node, key):
    """The tomlkit item (with its comment) of node[key]. A table whose parts are spread over
    the file is a proxy over several tables: look in each."""
    if hasattr(node, "item"):
        return node.item(key)
    for table in getattr(node, "_tables", []):
        if key in table:
            return table.item(key)
    raise KeyError(key)


def _marked(node, key) -> str | None:
    """The gpuops.nvidia marker comment on node[key], or None."""
    try:
        comment = _item(node, key).trivia.comment
    except (KeyError, AttributeError):
        return None
    return comment if comment and MARK in comment else None


def _set_marked(node, key, value, previous=None):
    """Set node[key] with a marker comment (recording the value it replaced)."""
    item = tomlkit.item(value)
    note = MARK if previous is None else "%s (was: %s)" % (MARK, tomlkit.dumps({"v": previous}).split("=", 1)[1].strip())
    item.comment(note)
    node[key] = item


def drop_in_runtimes(drop_ins: dict) -> dict:
    """The runtimes other drop-ins define ({path: text}; unreadable ones are left to the
    validation): name -> BinaryName, as existing_runtimes() gives them."""
    found = {}
    for path, text in sorted((drop_ins or {}).items()):
        try:
            doc = parse(text, path)
        except ConfigError:
            continue
        for cri_path in set(CRI_PATHS.values()):
            found.update(existing_runtimes(_get(doc, cri_path)))
    return found


def existing_runtimes(cri) -> dict:
    """The runtimes a CRI plugin table defines: name -> its options.BinaryName (None: runc)."""
    runtimes = _get(cri, ("containerd", "runtimes")) if cri is not None else None
    found = {}
    for name in list(runtimes or {}):
        entry = runtimes.get(name)
        options = entry.get("options") if hasattr(entry, "get") else None
        found[name] = plain(options.get("BinaryName")) if hasattr(options, "get") and "BinaryName" in options else None
    return found


def _nvidia_runtime(cri, runtime_name, runtime_path):
    """The NVIDIA runtime table: the existing one (keeping its options) or a copy of runc's,
    with runtime_type runc.v2 and options.BinaryName pointing at the NVIDIA runtime."""
    runtimes = _get(cri, ("containerd", "runtimes")) or {}
    base = runtimes.get(runtime_name) or runtimes.get("runc") or {}
    runtime = plain(base) if base else {}
    runtime.setdefault("runtime_type", RUNC_V2)
    options = dict(runtime.get("options") or {})
    options["BinaryName"] = runtime_path
    runtime["options"] = options
    return runtime


def _apply_nvidia(cri, settings: dict, marked: bool, base=None) -> None:
    """Write the NVIDIA settings into a CRI plugin table. base is the CRI table the settings
    merge into (the main file's, for a drop-in containerd 2.1 merges): the NVIDIA runtime copies
    runc's options from there. Without base, cri holds everything."""
    runtimes = ensure_table(cri, ("containerd", "runtimes"))
    source = cri if base is None else base
    wanted = _nvidia_runtime(source, settings["runtime_name"], settings["runtime_path"])
    # A runtimes table in the file replaces containerd's built-in one, which holds runc: without
    # runc written out too, the CRI plugin fails ("no corresponding runtime configured"). A
    # merged drop-in leaves containerd's own runtimes where they are.
    default = plain(_get(source, ("containerd", "default_runtime_name")) or "runc")
    if base is None and default == "runc" and "runc" not in runtimes:
        runc = tomlkit.table()
        if marked:
            runc.comment(MARK)
        runc["runtime_type"] = RUNC_V2
        runtimes["runc"] = runc
    existed = settings["runtime_name"] in runtimes
    if plain(runtimes.get(settings["runtime_name"]) or {}) != wanted:
        table = tomlkit.table()
        if marked and (not existed or _marked(runtimes, settings["runtime_name"])):
            table.comment(MARK)
        for key, value in wanted.items():
            if key != "options":
                table[key] = value
        options = tomlkit.table()
        for key, value in wanted["options"].items():
            options[key] = value
        table["options"] = options
        runtimes[settings["runtime_name"]] = table
    containerd_table = ensure_table(cri, ("containerd",))
    if settings["set_as_default"] and containerd_table.get("default_runtime_name") != settings["runtime_name"]:
        previous = containerd_table.get("default_runtime_name")
        if marked:
            _set_marked(containerd_table, "default_runtime_name", settings["runtime_name"],
                        plain(previous) if previous is not None else None)
        else:
            containerd_table["default_runtime_name"] = settings["runtime_name"]
    if settings["cdi"]:
        for key, value in (("enable_cdi", True), ("cdi_spec_dirs", list(settings["cdi_spec_dirs"]))):
            if plain(cri.get(key)) != value:
                previous = cri.get(key)
                if marked:
                    _set_marked(cri, key, value, plain(previous) if previous is not None else None)
                else:
                    cri[key] = value


def _remove_marked(node, key) -> None:
    marker = _marked(node, key)
    if marker is None:
        return
    was = re.search(r"\(was: (.*)\)$", marker)
    if was:  # put the replaced value back where it was, without the marker
        node[key] = tomlkit.parse("v = %s" % was.group(1))["v"]
        trivia = _item(node, key).trivia
        trivia.comment, trivia.comment_ws = "", ""
    else:
        del node[key]


def import_glob(drop_in_path: str) -> str:
    return os.path.join(os.path.dirname(drop_in_path), "*.toml")


def _imports_cover(imports, drop_in_path) -> bool:
    return any(fnmatch.fnmatch(drop_in_path, pattern) or pattern == drop_in_path for pattern in imports or [])


def configure(main_text: str | None, *, containerd_version: str, runtime_name: str = "nvidia",
              runtime_path: str = "/usr/bin/nvidia-container-runtime", set_as_default: bool = False,
              enable_cdi="true", cdi_spec_dirs=("/etc/cdi", "/var/run/cdi"), state: str = "present",
              drop_in_path: str | None = "/etc/containerd/conf.d/99-nvidia.toml",
              source: str = "/etc/containerd/config.toml", other_runtimes: dict | None = None) -> dict:
    """Plan the files. other_runtimes: the runtimes other drop-ins define (drop_in_runtimes()).
    Returns {'main': text, 'drop_in': text or None (no drop-in file), 'config_version',
    'cri_table', 'cdi', 'warnings', 'created_main'}."""
    if not HAS_TOMLKIT:
        raise ConfigError("the Python library tomlkit is required on the managed host")
    containerd = parse_version(containerd_version)
    check_options("containerd", runtime_name, runtime_path, state, reserved=BUILTIN_RUNTIMES)
    warnings = []
    doc = parse(main_text, source)
    created = not (main_text and main_text.strip())
    if created:
        doc["version"] = config_version_for(containerd)
    version = int(plain(doc.get("version", 1)))
    if version not in supported_config_versions(containerd):
        raise ConfigError("%s has config version %d, which containerd %s does not read (it reads %s)"
                          % (source, version, ".".join(map(str, containerd)),
                             ", ".join(str(v) for v in supported_config_versions(containerd))))
    cri_path = CRI_PATHS[version]
    cri = _get(doc, cri_path)
    if state == "present":
        # the main file's runtimes and those of the other drop-ins (containerd 2.1 merges them in)
        existing = dict(other_runtimes or {}, **existing_runtimes(cri))
        check_runtime_name(runtime_name, "containerd", existing=existing, runtime_path=runtime_path)
    disabled = plain(doc.get("disabled_plugins") or [])
    if any(name in disabled for name in ("cri", "io.containerd.grpc.v1.cri", "io.containerd.cri.v1.runtime")):
        raise ConfigError("%s disables the CRI plugin (disabled_plugins = %s): Kubernetes cannot use containerd "
                          "and the NVIDIA runtime would never be used; remove it from disabled_plugins first"
                          % (source, disabled))
    cdi_mode = str(enable_cdi).lower()
    cdi = state == "present" and cdi_mode in ("true", "yes", "1", "auto")
    if cdi and not cdi_supported(containerd):
        message = ("containerd %s does not support CDI (it needs 1.7 or newer and silently drops the keys)"
                   % ".".join(map(str, containerd)))
        if cdi_mode == "auto":
            warnings.append(message + "; CDI was skipped")
            cdi = False
        else:
            raise option_error("enable_cdi", message, "upgrade containerd, or set enable_cdi to auto (skip CDI with a "
                               "warning) or false")
    settings = {"runtime_name": runtime_name, "runtime_path": runtime_path, "set_as_default": set_as_default,
                "cdi": cdi, "cdi_spec_dirs": cdi_spec_dirs}

    drop_in = None
    if drop_in_path and version == 1 and state == "present":
        raise ConfigError("%s is a version 1 configuration, whose imports containerd does not merge; "
                          "use edit_mode=in_place, or migrate the file first (containerd config migrate)" % source)
    if drop_in_path:
        glob = import_glob(drop_in_path)
        imports = plain(doc.get("imports") or [])
        if state == "present":
            if not _imports_cover(imports, drop_in_path):
                # the marker keeps the previous list, so absent restores it exactly
                _set_marked(doc, "imports", imports + [glob], imports if "imports" in doc else None)
            drop = tomlkit.document()
            drop.add(tomlkit.comment("Managed by gpuops.nvidia runtime_config: the NVIDIA runtime for containerd."))
            if imports_merge(containerd):
                drop.add(tomlkit.comment("containerd >= 2.1 merges this file into %s." % source))
            else:
                drop.add(tomlkit.comment("containerd < 2.1 replaces whole plugin sections with imported ones, so this"))
                drop.add(tomlkit.comment("file carries %s's complete CRI section as well." % source))
            drop["version"] = version
            target = ensure_table(drop, cri_path)
            merged = imports_merge(containerd)
            if cri is not None and not merged:
                for key, value in plain(cri).items():
                    target[key] = value
            _apply_nvidia(target, settings, marked=False, base=(cri if cri is not None else {}) if merged else None)
            drop_in = tomlkit.dumps(drop)
        else:
            _remove_marked(doc, "imports")
    else:
        if state == "present":
            _apply_nvidia(ensure_table(doc, cri_path), settings, marked=True)
        elif cri is not None:
            runtimes = _get(cri, ("containerd", "runtimes"))
            for name in (runtime_name, "runc"):
                if runtimes is not None and _marked(runtimes, name):
                    del runtimes[name]  # only runtimes this editor created
            containerd_table = _get(cri, ("containerd",))
            if containerd_table is not None:
                _remove_marked(containerd_table, "default_runtime_name")
            _remove_marked(cri, "enable_cdi")
            _remove_marked(cri, "cdi_spec_dirs")
            containerd_table = _get(cri, ("containerd",))
            if runtimes is not None and not runtimes:
                del containerd_table["runtimes"]
            if containerd_table is not None and not containerd_table:
                del cri["containerd"]  # an empty table means what no table means
    main = main_text if (created and state == "absent") else tomlkit.dumps(doc)
    if created and state == "absent":
        main = None
    return {"main": main, "drop_in": drop_in, "config_version": version, "cri_table": ".".join(cri_path),
            # `config dump` prints the configuration migrated to the version containerd writes
            "dump_cri_path": CRI_PATHS[config_version_for(containerd)],
            "cdi": cdi, "warnings": warnings, "created_main": created and state == "present"}


def _dump_has(dump: dict, cri_path: tuple, runtime_name: str, runtime_path: str, cdi: bool) -> list:
    """What the merged configuration containerd printed lacks, as messages."""
    problems = []
    cri = _get(dump, cri_path) or {}
    runtime = _get(cri, ("containerd", "runtimes", runtime_name))
    if runtime is None:
        problems.append("containerd's merged configuration has no %s runtime under %s"
                        % (runtime_name, ".".join(cri_path)))
    elif (runtime.get("options") or {}).get("BinaryName") != runtime_path:
        problems.append("the %s runtime's BinaryName is %r in containerd's merged configuration, not %r"
                        % (runtime_name, (runtime.get("options") or {}).get("BinaryName"), runtime_path))
    default = (cri.get("containerd") or {}).get("default_runtime_name") or "runc"
    if default not in ((cri.get("containerd") or {}).get("runtimes") or {}):
        problems.append("containerd's CRI plugin would not load: its default runtime %r is not configured" % default)
    if cdi and cri.get("enable_cdi") is not True:
        problems.append("containerd's merged configuration does not enable CDI")
    return problems


def validation_files(plan: dict, drop_in_path: str | None, existing_drop_ins: dict, scratch: str) -> tuple:
    """The planned files laid out under the scratch directory for `containerd config dump`
    (never the live ones): ({path: text}, the main file's path there). The main file's import
    glob is pointed at the scratch conf.d; existing_drop_ins maps other files the glob matches
    to their text."""
    main_text = plan["main"] or ""
    files = {}
    if drop_in_path:
        conf_d = os.path.join(scratch, "conf.d")
        doc = parse(main_text, "planned main configuration")
        if "imports" in doc:
            # every import that reaches the drop-in (the module's glob, the operator's own
            # pattern or the file's path) reads the scratch copy instead of the live files
            directory = os.path.dirname(drop_in_path)
            doc["imports"] = [
                os.path.join(conf_d, os.path.basename(item) if os.path.dirname(item) == directory
                             else os.path.basename(drop_in_path))
                if _imports_cover([item], drop_in_path) else item for item in plain(doc["imports"])]
            main_text = tomlkit.dumps(doc)
        drop_ins = dict(existing_drop_ins)
        if plan["drop_in"] is not None:
            drop_ins[drop_in_path] = plan["drop_in"]
        else:
            drop_ins.pop(drop_in_path, None)
        for path, text in drop_ins.items():
            files[os.path.join(conf_d, os.path.basename(path))] = text
    config = os.path.join(scratch, "config.toml")
    files[config] = main_text
    return files, config


def dump_argv(binary: str, config: str) -> list:
    return [binary, "--config", config, "config", "dump"]


def validation_problems(rc: int, out: str, err: str, plan: dict, runtime_name: str, runtime_path: str,
                        state: str) -> list:
    """Problems in containerd's answer to `config dump` over the planned files (empty: valid)."""
    if rc != 0:
        return ["containerd rejected the planned configuration: %s" % (err.strip() or out.strip())]
    if state == "absent":
        return []  # containerd accepts it; what is left is the user's own
    dump = tomlkit.parse(out).unwrap()
    return _dump_has(dump, plan["dump_cri_path"], runtime_name, runtime_path, plan["cdi"])

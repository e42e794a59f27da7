# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Config files of the NVIDIA k8s-device-plugin (``version: v1``, Go package api/config/v1 of
github.com/NVIDIA/k8s-device-plugin, releases v0.19.x and v0.20.0): what is wrong with a set of
named configs, the file to write for one of them, and what a node's allocatable should be under it.

The configs are the entries of the ConfigMap the plugin's config-manager picks from by the node
label ``nvidia.com/device-plugin.config``. Upstream parses a config leniently: it ignores unknown
keys (a ``renameByDefault`` written inside a resources entry does nothing, k8s-device-plugin issue
#1433), and the plugin, GFD and the MPS daemon reset ``resources``, ``sharing.*.resources[].rename``
and ``sharing.*.resources[].devices`` (DisableResourceNamingInConfig, issue #353) with only a log
line. errors() refuses all of these, so a config does what it says; expected_resources() still
models what upstream really does with them.

Pure functions over plain data; no I/O."""

from __future__ import annotations

import copy
import difflib
import re

__metaclass__ = type

DEFAULT_CONFIG_NAME = "default"  # config-manager's "named" fallback looks for this name
NODE_LABEL = "nvidia.com/device-plugin.config"
VERSION = "v1"

MIG_STRATEGIES = ("none", "single", "mixed")
DEVICE_LIST_STRATEGIES = ("envvar", "volume-mounts", "cdi-annotations", "cdi-cri")
DEVICE_ID_STRATEGIES = ("uuid", "index")
DEVICE_DISCOVERY_STRATEGIES = ("auto", "nvml", "tegra")
ALLOCATION_POLICIES = ("distributed", "packed")  # sharedDevicesAllocationPolicy, new in v0.20.0

RESOURCE_PREFIX = "nvidia.com/"
GPU_RESOURCE = "nvidia.com/gpu"
SHARED_SUFFIX = ".shared"
MAX_RESOURCE_NAME_LENGTH = 63
MIN_REPLICAS = 2  # api/config/v1/replicas.go: "number of replicas must be >= 2"
MAX_MPS_REPLICAS = 48  # cmd/mps-control-daemon/mps/device.go: 48 clients (16 below compute capability 7.5)
SHARING_KINDS = ("timeSlicing", "mps")
# cmd/config-manager: with no default set, the helm chart's fallbackStrategies are ["named", "single"]
FALLBACK_STRATEGIES = ("named", "single")

_LABEL_VALUE = re.compile(r"^(?:[A-Za-z0-9](?:[-A-Za-z0-9_.]*[A-Za-z0-9])?)?$")
_CONFIGMAP_KEY = re.compile(r"^[-._a-zA-Z0-9]+$")
# "mig-" and the MIG profile as go-nvlib writes it ("1g.10gb", "1g.10gb+me", "1g.10gb-me"), with
# the device plugin's "+" -> "." (internal/rm/rm.go AddDefaultResourcesToConfig)
_MIG_RESOURCE = re.compile(r"^nvidia\.com/mig-[1-8]g\.[0-9]+gb(?:[.-][a-z]+)*$")
_PROFILE_IN_NAME = re.compile(r"\bMIG\s+(\S+)")
_PARTIAL_PROFILE = re.compile(r"^[0-9]+c\.")  # a compute instance smaller than its GPU instance
_GO_DURATION = re.compile(r"^[-+]?(?:(?:[0-9]+(?:\.[0-9]*)?|\.[0-9]+)(?:ns|us|\u00b5s|\u03bcs|ms|s|m|h))+$")
_UUID = r"[0-9a-fA-F]{8}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{4}-[0-9a-fA-F]{12}"
_DEVICE_REF = re.compile(r"^(?:[0-9]+|[0-9]+:[0-9]+|GPU-%s|MIG-%s|MIG-GPU-%s/[0-9]+/[0-9]+)$"
                         % (_UUID, _UUID, _UUID))
_ISSUE_1433 = "k8s-device-plugin issue #1433"
_ISSUE_353 = "DisableResourceNamingInConfig, k8s-device-plugin issue #353"


# ---- the schema: which keys exist where, and the type of each --------------------------------------

class _Map:
    """A mapping with known keys (`fields`: key -> node); `required` keys must be present."""

    def __init__(self, fields: dict, required: tuple = ()):
        self.fields = fields
        self.required = required


class _List:
    """A list whose items all follow `item`; `nonempty` refuses an empty list."""

    def __init__(self, item, nonempty: bool = False):
        self.item = item
        self.nonempty = nonempty


def _describe(value) -> str:
    if value is None:
        return "null"
    if isinstance(value, bool):
        return "a boolean"
    if isinstance(value, int):
        return "an integer"
    if isinstance(value, float):
        return "a float"
    if isinstance(value, str):
        return "a string"
    if isinstance(value, dict):
        return "a mapping"
    if isinstance(value, list):
        return "a list"
    return type(value).__name__


def _boolean(value, path: str) -> list:
    if isinstance(value, bool):
        return []
    return ["%s: must be true or false, not %s (%r)" % (path, _describe(value), value)]


def _string(value, path: str) -> list:
    if isinstance(value, str):
        return []
    return ["%s: must be a string, not %s (%r)" % (path, _describe(value), value)]


def _choice(values: tuple):
    def check(value, path: str) -> list:
        if isinstance(value, str) and value in values:
            return []
        return ["%s: %r is not valid; use one of %s" % (path, value, ", ".join(values))]
    return check


def _device_list_strategy(value, path: str) -> list:
    """A single strategy or a list of them (flags.go deviceListStrategyFlag takes both)."""
    if isinstance(value, str):
        items = [(path, value)]
    elif isinstance(value, list):
        if not value:
            return ["%s: an empty list selects no way of passing devices; use one of %s (or a list of them)"
                    % (path, ", ".join(DEVICE_LIST_STRATEGIES))]
        items = [("%s[%d]" % (path, position), item) for position, item in enumerate(value)]
    else:
        return ["%s: must be a string or a list of strings, not %s (%r)" % (path, _describe(value), value)]
    return ["%s: %r is not a device list strategy; use one of %s" % (item_path, item, ", ".join(DEVICE_LIST_STRATEGIES))
            for item_path, item in items if item not in DEVICE_LIST_STRATEGIES]


def _duration(value, path: str) -> list:
    """GFD's sleepInterval: a Go duration ("60s", "1m30s"), "infinite", or nanoseconds (duration.go)."""
    if isinstance(value, bool) or not isinstance(value, (str, int, float)):
        return ["%s: must be a duration such as \"60s\" or \"infinite\", not %s (%r)" % (path, _describe(value), value)]
    if isinstance(value, str) and value not in ("infinite", "0") and not _GO_DURATION.match(value):
        return ["%s: %r is not a Go duration; write e.g. \"60s\", \"5m\" or \"infinite\"" % (path, value)]
    return []


def _resource_name(value, path: str) -> list:
    if not isinstance(value, str):
        return ["%s: must be a resource name string, not %s (%r)" % (path, _describe(value), value)]
    if value == GPU_RESOURCE or _MIG_RESOURCE.match(value):
        if len(value) > MAX_RESOURCE_NAME_LENGTH:
            return ["%s: %r is longer than %d characters" % (path, value, MAX_RESOURCE_NAME_LENGTH)]
        return []
    if value == "gpu" or value.startswith("mig-"):
        return ["%s: write the full resource name %r (upstream adds the prefix itself, but the node advertises "
                "the full name)" % (path, RESOURCE_PREFIX + value)]
    return ["%s: %r is not a resource the device plugin advertises; use %s or nvidia.com/mig-<profile> "
            "(e.g. nvidia.com/mig-1g.10gb, with migStrategy mixed)" % (path, value, GPU_RESOURCE)]


def _replicas(value, path: str) -> list:
    if isinstance(value, bool) or not isinstance(value, int):
        return ["%s: must be an integer, not %s (%r)" % (path, _describe(value), value)]
    if value < MIN_REPLICAS:
        return ["%s: %d is too small: the device plugin refuses replicas below %d (\"number of replicas must be "
                ">= 2\"); to share nothing, remove the sharing section" % (path, value, MIN_REPLICAS)]
    return []


def _device_ref(item) -> bool:
    """A GPU index (0 or "0"), a MIG index ("0:1") or a GPU/MIG UUID (replicas.go ReplicatedDeviceRef)."""
    if isinstance(item, bool):
        return False
    if isinstance(item, int):
        return item >= 0
    return isinstance(item, str) and bool(_DEVICE_REF.match(item))


def _devices(value, path: str) -> list:
    """The forms replicas.go ReplicatedDevices takes: "all", a count > 0, or a list of GPU indexes,
    MIG indexes ("0:1") and GPU/MIG UUIDs. Anything but "all" is then reset to "all" upstream."""
    if isinstance(value, str):
        if value != "all":
            return ["%s: %r is not valid; the only string devices takes is \"all\"" % (path, value)]
        return []
    if isinstance(value, bool):
        return ["%s: must be \"all\", a count or a list of GPU indexes/UUIDs, not a boolean" % path]
    if isinstance(value, int):
        if value <= 0:
            return ["%s: a count of devices must be > 0, not %d; or write \"all\"" % (path, value)]
    elif isinstance(value, list):
        bad = [item for item in value if not _device_ref(item)]
        if bad:
            return ["%s: %r are not GPU indexes (0), MIG indexes (\"0:1\") or GPU/MIG UUIDs" % (path, bad)]
    else:
        return ["%s: must be \"all\", a count or a list of GPU indexes/UUIDs, not %s (%r)"
                % (path, _describe(value), value)]
    return ["%s: the device plugin ignores devices and shares every device of the resource (it resets it to "
            "\"all\": %s); remove devices (or write \"all\")" % (path, _ISSUE_353)]


def _channel_ids(value, path: str) -> list:
    if value == [] or value == [0] and not isinstance(value[0], bool):
        return []
    return ["%s: %r is not valid; upstream only takes [] or [0] (imex.go AssertChannelIDsValid)" % (path, value)]


_REPLICATED_RESOURCE = _Map({
    "name": _resource_name,
    "rename": _string,
    "devices": _devices,
    "replicas": _replicas,
}, required=("name", "replicas"))

_REPLICATED_RESOURCES = _Map({
    "renameByDefault": _boolean,
    "failRequestsGreaterThanOne": _boolean,
    "resources": _List(_REPLICATED_RESOURCE, nonempty=True),
}, required=("resources",))

_PATTERN_RESOURCE = _Map({"pattern": _string, "name": _string}, required=("pattern", "name"))

_SCHEMA = _Map({
    "version": _string,
    "flags": _Map({
        "migStrategy": _choice(MIG_STRATEGIES),
        "failOnInitError": _boolean,
        "mpsRoot": _string,
        "nvidiaDriverRoot": _string,
        "nvidiaDevRoot": _string,
        "gdrcopyEnabled": _boolean,
        "gdsEnabled": _boolean,
        "mofedEnabled": _boolean,
        "useNodeFeatureAPI": _boolean,
        "deviceDiscoveryStrategy": _choice(DEVICE_DISCOVERY_STRATEGIES),
        "plugin": _Map({
            "passDeviceSpecs": _boolean,
            "deviceListStrategy": _device_list_strategy,
            "deviceIDStrategy": _choice(DEVICE_ID_STRATEGIES),
            "cdiAnnotationPrefix": _string,
            "nvidiaCTKPath": _string,
            "containerDriverRoot": _string,
            "sharedDevicesAllocationPolicy": _choice(ALLOCATION_POLICIES),
        }),
        "gfd": _Map({
            "oneshot": _boolean,
            "noTimestamp": _boolean,
            "sleepInterval": _duration,
            "outputFile": _string,
            "machineTypeFile": _string,
        }),
    }),
    "resources": _Map({"gpus": _List(_PATTERN_RESOURCE), "mig": _List(_PATTERN_RESOURCE)}),
    "sharing": _Map({"timeSlicing": _REPLICATED_RESOURCES, "mps": _REPLICATED_RESOURCES}),
    "imex": _Map({"channelIDs": _channel_ids, "required": _boolean}),
})


def _homes(node, prefix: str = "") -> dict:
    """key -> the paths (relative to a config, "[i]" for list items) where the schema has it."""
    found = {}
    if isinstance(node, _List):
        return _homes(node.item, prefix + "[i]")
    if isinstance(node, _Map):
        for key, child in node.fields.items():
            path = prefix + "." + key if prefix else key
            found.setdefault(key, []).append(path)
            for inner, paths in _homes(child, path).items():
                found.setdefault(inner, []).extend(paths)
    return found


_HOMES = _homes(_SCHEMA)


def _common_prefix(left: str, right: str) -> int:
    size = 0
    for one, other in zip(left, right):
        if one != other:
            break
        size += 1
    return size


def _unknown_key(key, node: _Map, base: str, relative: str) -> str:
    """The message for a key `node` does not have, at `base` (relative to its config: `relative`)."""
    path = "%s.%s" % (base, key) if isinstance(key, str) else "%s[%r]" % (base, key)
    here = ", ".join(node.fields)
    if not isinstance(key, str):
        return "%s: keys must be strings; valid keys here: %s" % (path, here)
    generic = re.sub(r"\[[0-9]+\]", "[i]", relative)
    config_base = base[:len(base) - len(relative) - 1] if relative else base
    if key in ("renameByDefault", "failRequestsGreaterThanOne") and re.search(r"^sharing\.\w+\.resources\[i\]$",
                                                                              generic):
        kind_path = base.rsplit(".resources[", 1)[0]
        return ("%s: %s is not a key of a resources entry: the device plugin silently ignores it here (%s), so "
                "the setting does nothing; move it up to %s.%s, next to resources (it applies to every resource "
                "in the list)" % (path, key, _ISSUE_1433, kind_path, key))
    homes = _HOMES.get(key)
    if homes:
        best = max(_common_prefix(generic, home) for home in homes)
        places = [config_base + "." + home for home in homes if _common_prefix(generic, home) == best]
        return ("%s: %s is not a key here (the device plugin would silently ignore it); it belongs at %s"
                % (path, key, " or ".join(places)))
    lowered = {field.lower(): field for field in node.fields}
    close = difflib.get_close_matches(key.lower(), list(lowered), n=1, cutoff=0.6)
    if close:
        return ("%s: unknown key %r (the device plugin would silently ignore it); did you mean %r?"
                % (path, key, lowered[close[0]]))
    return ("%s: unknown key %r (the device plugin would silently ignore it); valid keys here: %s"
            % (path, key, here))


def _walk(node, value, path: str, relative: str) -> list:
    if isinstance(node, _Map):
        if not isinstance(value, dict):
            return ["%s: must be a mapping, not %s (%r)" % (path, _describe(value), value)]
        problems = []
        for key, item in value.items():
            if key not in node.fields:
                problems.append(_unknown_key(key, node, path, relative))
                continue
            inner = "%s.%s" % (relative, key) if relative else key
            problems.extend(_walk(node.fields[key], item, "%s.%s" % (path, key), inner))
        problems.extend("%s: %s is required" % (path, key) for key in node.required if key not in value)
        return problems
    if isinstance(node, _List):
        if not isinstance(value, list):
            return ["%s: must be a list, not %s (%r)" % (path, _describe(value), value)]
        if node.nonempty and not value:
            return ["%s: must not be empty (upstream refuses it: \"no resources specified\")" % path]
        problems = []
        for position, item in enumerate(value):
            suffix = "[%d]" % position
            problems.extend(_walk(node.item, item, path + suffix, relative + suffix))
        return problems
    return node(value, path)


# ---- checks across keys -----------------------------------------------------------------------------

def _mapping(value) -> dict:
    return value if isinstance(value, dict) else {}


def _mig_strategy(config: dict) -> str:
    strategy = _mapping(config.get("flags")).get("migStrategy")
    return strategy if isinstance(strategy, str) else "none"


def _sharing_problems(config: dict, base: str) -> list:
    sharing = _mapping(config.get("sharing"))
    present = [kind for kind in SHARING_KINDS if kind in sharing]
    problems = []
    if len(present) == len(SHARING_KINDS):
        problems.append("%s.sharing: timeSlicing and mps cannot both be set (upstream uses mps and silently drops "
                        "timeSlicing); keep one of them" % base)
    strategy = _mig_strategy(config)
    if "mps" in sharing and strategy != "none":
        problems.append("%s.sharing.mps: MPS shares full GPUs only, not with migStrategy %r (upstream refuses "
                        "mixed with MPS; MIG devices get no MPS daemon); set %s.flags.migStrategy to none or "
                        "share with timeSlicing" % (base, strategy, base))
    for kind in present:
        replicated = _mapping(sharing[kind])
        resources = replicated.get("resources")
        if not isinstance(resources, list):
            continue
        rename_by_default = replicated.get("renameByDefault") is True
        seen = {}
        for position, entry in enumerate(resources):
            if not isinstance(entry, dict):
                continue
            path = "%s.sharing.%s.resources[%d]" % (base, kind, position)
            problems.extend(_entry_problems(entry, path, kind, strategy, rename_by_default))
            name = entry.get("name")
            if isinstance(name, str):
                if name in seen:
                    problems.append("%s.name: %s is already shared by resources[%d]; give each resource one entry"
                                    % (path, name, seen[name]))
                else:
                    seen[name] = position
    return problems


def _entry_problems(entry: dict, path: str, kind: str, strategy: str, rename_by_default: bool) -> list:
    problems = []
    name = entry.get("name")
    valid_name = isinstance(name, str) and not _resource_name(name, path)
    if valid_name and kind == "mps" and name != GPU_RESOURCE:
        problems.append("%s.name: MPS shares only %s (full GPUs), not %s" % (path, GPU_RESOURCE, name))
    elif valid_name and name != GPU_RESOURCE and strategy != "mixed":
        problems.append("%s.name: %s only exists with migStrategy mixed (under %r the entry matches no device and "
                        "is skipped); set flags.migStrategy: mixed or share %s" % (path, name, strategy, GPU_RESOURCE))
    replicas = entry.get("replicas")
    if kind == "mps" and isinstance(replicas, int) and not isinstance(replicas, bool) and replicas > MAX_MPS_REPLICAS:
        problems.append("%s.replicas: %d is more than MPS serves: at most %d clients per GPU (16 below compute "
                        "capability 7.5), the MPS daemon refuses more" % (path, replicas, MAX_MPS_REPLICAS))
    if "rename" in entry and isinstance(entry["rename"], str):
        shared = "%s%s" % (name, SHARED_SUFFIX)
        if not (rename_by_default and entry["rename"] == shared):
            if rename_by_default:
                outcome = "the resource is advertised as %s regardless" % shared
            else:
                outcome = "the resource keeps its name %s" % name
            problems.append("%s.rename: the device plugin ignores rename (%s): %s; remove rename, and to advertise "
                            "<name>%s set renameByDefault: true at %s" % (path, _ISSUE_353, outcome, SHARED_SUFFIX,
                                                                          path.rsplit(".resources[", 1)[0]))
    return problems


def _cdi_problems(config: dict, base: str, cdi: bool) -> list:
    if cdi:
        return []
    value = _mapping(_mapping(config.get("flags")).get("plugin")).get("deviceListStrategy")
    path = "%s.flags.plugin.deviceListStrategy" % base
    if isinstance(value, str):
        items = [(path, value)]
    elif isinstance(value, list):
        items = [("%s[%d]" % (path, position), item) for position, item in enumerate(value)]
    else:
        return []
    return ["%s: %s needs CDI, which is off: turn on the NVIDIA Container Toolkit's CDI mode (cdi: true: CDI specs "
            "generated and the container runtime CDI-enabled), or use envvar or volume-mounts" % (item_path, item)
            for item_path, item in items if item in ("cdi-cri", "cdi-annotations")]


def _resources_problems(config: dict, base: str) -> list:
    resources = _mapping(config.get("resources"))
    return ["%s.resources.%s: the device plugin ignores custom resource patterns (\"Customizing the 'resources' "
            "field is not yet supported in the config. Ignoring...\", %s); remove it" % (base, key, _ISSUE_353)
            for key in ("gpus", "mig") if isinstance(resources.get(key), list) and resources[key]]


def _name_problems(name, base: str) -> list:
    if not isinstance(name, str):
        return ["%s: the config name must be a string (it is the value of the node label %s)" % (base, NODE_LABEL)]
    problems = []
    if not name:
        return ["%s: the config name must not be empty (an empty %s label means \"use the default\")"
                % (base, NODE_LABEL)]
    if len(name) > 63 or not _LABEL_VALUE.match(name):
        problems.append("%s: %r is not a valid Kubernetes label value (at most 63 characters: letters, digits, '-', "
                        "'_', '.', beginning and ending with a letter or digit), so the %s label cannot select it; "
                        "rename the config" % (base, name, NODE_LABEL))
    if len(name) > 253 or not _CONFIGMAP_KEY.match(name) or name in (".", "..") or name.startswith(".."):
        problems.append("%s: %r is not a valid ConfigMap key (letters, digits, '-', '_', '.'; not '.', '..' or "
                        "starting with '..'); rename the config" % (base, name))
    return problems


def errors(configs: dict, default: str, cdi: bool = False) -> list:
    """Every mistake in `configs` (config name -> config in the upstream v1 format; None or {} is
    upstream's defaults) and in `default` (the config a node without the label gets). Each message
    names the key path (configs.<name>.<keys>) and the fix. `cdi`: whether the container toolkit's
    CDI mode is on (the cdi-* device list strategies need it). An empty list means all is well."""
    if not isinstance(configs, dict):
        return ["configs: must be a mapping of config name to config, not %s" % _describe(configs)]
    problems = []
    for name, config in configs.items():
        base = "configs.%s" % name
        problems.extend(_name_problems(name, base))
        if config is None:
            continue
        if not isinstance(config, dict):
            problems.append("%s: must be a mapping in the device plugin's config format, not %s"
                            % (base, _describe(config)))
            continue
        problems.extend(_walk(_SCHEMA, config, base, ""))
        version = config.get("version", VERSION)
        if isinstance(version, str) and version != VERSION:
            problems.append("%s.version: %r is unknown to the device plugin (\"unknown version\"); write %s"
                            % (base, version, VERSION))
        problems.extend(_sharing_problems(config, base))
        problems.extend(_resources_problems(config, base))
        problems.extend(_cdi_problems(config, base, cdi))
    if configs and (not isinstance(default, str) or default not in configs):
        names = ", ".join(sorted(str(name) for name in configs))
        problems.append("default: %r is not one of the configs (%s); name one of them, so that a node without the "
                        "%s label gets a config" % (default, names, NODE_LABEL))
    return problems


def render(config: dict, cdi: bool = False) -> dict:
    """The config file to write: a deep copy with version v1 (first) and, when `cdi` is true and
    flags.plugin.deviceListStrategy is unset, that set to cdi-cri. Nothing else is added; call
    errors() first (a wrong version is overwritten here, not reported)."""
    rest = copy.deepcopy(config) if config else {}
    rest.pop("version", None)
    result = {"version": VERSION}
    result.update(rest)
    if cdi:
        flags = result.get("flags")
        if not isinstance(flags, dict):
            flags = result["flags"] = {}
        plugin = flags.get("plugin")
        if not isinstance(plugin, dict):
            plugin = flags["plugin"] = {}
        if plugin.get("deviceListStrategy") is None:
            plugin["deviceListStrategy"] = "cdi-cri"
    return result


# ---- the node's resources -----------------------------------------------------------------------

def _mig_on(gpu: dict) -> bool:
    return bool(_mapping(gpu.get("mig")).get("current"))


def _mig_devices(gpu: dict) -> list:
    return [device for device in _mapping(gpu.get("mig")).get("devices") or [] if isinstance(device, dict)]


def mig_profile(gpu: dict, device: dict):
    """The profile of a MIG device as the device plugin names it ("1g.10gb", "1g.10gb+me", or
    "1c.2g.20gb" for a compute instance smaller than its GPU instance), or None when the data does
    not tell. From the device's own "profile", else its GPU and compute instance in
    gpu_info's mig.gpu_instances (by gpu_instance_id/compute_instance_id), else its NVML name
    ("NVIDIA A100-SXM4-40GB MIG 1g.5gb")."""
    if device.get("profile"):
        return device["profile"]
    instance = next((gi for gi in _mapping(gpu.get("mig")).get("gpu_instances") or []
                     if isinstance(gi, dict) and gi.get("id") == device.get("gpu_instance_id")), None)
    if instance is not None:
        compute = next((ci for ci in instance.get("compute_instances") or []
                        if isinstance(ci, dict) and ci.get("id") == device.get("compute_instance_id")), None)
        if compute is not None and compute.get("profile") and _PARTIAL_PROFILE.match(compute["profile"]):
            return compute["profile"]
        if instance.get("profile") and not str(instance["profile"]).startswith("profile-"):
            return instance["profile"]
    match = _PROFILE_IN_NAME.search(device.get("name") or "")
    return match.group(1) if match else None


def mig_resource(profile: str) -> str:
    """The mixed strategy's resource for a MIG profile: nvidia.com/mig-1g.10gb, "+" written "."
    (nvidia.com/mig-1g.10gb.me). As v0.20.0 matches profiles whole; v0.19.x matched them as
    substrings, so a 1g.10gb+me device could there be counted as nvidia.com/mig-1g.10gb."""
    return "%smig-%s" % (RESOURCE_PREFIX, profile.replace("+", "."))


def _base_resources(strategy: str, gpus: list) -> dict:
    full = [gpu for gpu in gpus if strategy == "none" or not _mig_on(gpu)]
    counts = {GPU_RESOURCE: len(full)} if full else {}
    if strategy == "none":
        return counts
    partitioned = [gpu for gpu in gpus if _mig_on(gpu)]
    profiles = []
    for gpu in partitioned:
        devices = _mig_devices(gpu)
        if not devices and strategy == "single":
            raise ValueError("GPU %s has MIG mode on but no MIG devices: the device plugin does not start with "
                             "migStrategy single (\"device has no MIG devices configured\")" % gpu.get("index"))
        profiles.extend((gpu, device, mig_profile(gpu, device)) for device in devices)
    if strategy == "single":
        if full and profiles:
            raise ValueError("migStrategy single needs MIG mode on all GPUs or on none: GPUs %s are not in MIG "
                             "mode, GPUs %s are; the device plugin does not start"
                             % ([gpu.get("index") for gpu in full], [gpu.get("index") for gpu in partitioned]))
        kinds = sorted({profile for gpu, device, profile in profiles if profile})
        if len(kinds) > 1:
            raise ValueError("migStrategy single needs one MIG profile on the node, found %s; the device plugin "
                             "does not start (\"more than one MIG device type present on node\")" % ", ".join(kinds))
        if profiles:
            return {GPU_RESOURCE: len(profiles)}
        return counts
    for gpu, device, profile in profiles:
        if not profile:
            raise ValueError("cannot tell the MIG profile of MIG device %s on GPU %s"
                             % (device.get("uuid") or device.get("index"), gpu.get("index")))
        if _PARTIAL_PROFILE.match(profile):
            raise ValueError("MIG device %s on GPU %s has profile %s (a compute instance smaller than its GPU "
                             "instance): with migStrategy mixed the device plugin does not start (\"does not "
                             "match any resource patterns\")" % (device.get("uuid"), gpu.get("index"), profile))
        resource = mig_resource(profile)
        counts[resource] = counts.get(resource, 0) + 1
    return counts


def expected_resources(config: dict, gpus: list) -> dict:
    """What the node's allocatable should show for `config` (upstream format; None or {} is the
    defaults) on `gpus` (gpu_info's gpus list), as the device plugin v0.19/v0.20 builds it:

    - migStrategy none: every GPU is one nvidia.com/gpu, in MIG mode or not;
    - single: every MIG device is one nvidia.com/gpu (all GPUs in MIG mode with one profile, or
      none in MIG mode: then the GPUs themselves);
    - mixed: nvidia.com/mig-<profile> per MIG device, nvidia.com/gpu per GPU not in MIG mode;
    - sharing (mps, else timeSlicing): each shared resource counts replicas times per device,
      under <name>.shared with renameByDefault. rename and devices are ignored, as upstream
      ignores them (every device of the resource is shared, under its own name).

    Lost GPUs (and GPUs NVML could not open) count for nothing: the plugin reports them
    unhealthy, and allocatable leaves unhealthy devices out. Resources with no devices are
    left out. Raises ValueError where the device plugin would not start (single on mixed
    MIG modes or profiles, MPS with mixed, an unknown migStrategy, ...), with the reason."""
    config = _mapping(config)
    strategy = _mapping(config.get("flags")).get("migStrategy") or "none"
    if strategy not in MIG_STRATEGIES:
        raise ValueError("unknown MIG strategy %r: the device plugin does not start" % (strategy,))
    healthy = [gpu for gpu in gpus or [] if isinstance(gpu, dict) and not gpu.get("lost") and not gpu.get("error")]
    sharing = _mapping(config.get("sharing"))
    replicated = sharing.get("mps") if sharing.get("mps") is not None else sharing.get("timeSlicing")
    if sharing.get("mps") is not None and strategy == "mixed":
        raise ValueError("MPS with migStrategy mixed: the device plugin does not start (\"using "
                         "--mig-strategy=mixed is not supported with MPS\")")
    counts = _base_resources(strategy, healthy)
    replicated = _mapping(replicated)
    suffix = SHARED_SUFFIX if replicated.get("renameByDefault") is True else ""
    replicas = {}
    for entry in replicated.get("resources") or []:
        if not isinstance(entry, dict) or not isinstance(entry.get("name"), str):
            continue
        name = entry["name"] if entry["name"].startswith(RESOURCE_PREFIX) else RESOURCE_PREFIX + entry["name"]
        # an entry repeated for one resource: each device's replicas overlap, the larger count wins
        times = entry.get("replicas")
        if isinstance(times, int) and not isinstance(times, bool):
            replicas[name] = max(replicas.get(name, 0), times)
    result = {name: count for name, count in counts.items() if name not in replicas}
    for name, times in replicas.items():  # devices the entry matches: all of the resource (upstream)
        if counts.get(name):
            result[name + suffix] = result.get(name + suffix, 0) + counts[name] * times
    return result


def node_config_name(label_value, configs: dict, default: str):
    """The config the device plugin's config-manager applies for the node label's value:

    - the label names a config: that config;
    - the label is unset or empty: `default`; with no default set, upstream's helm fallbacks in
      order: a config named "default", then the only config if there is just one;
    - None where config-manager applies no config: the label names a config that does not
      exist (config-manager fails with "specified config ... does not exist" and does not fall
      back to the default; the node keeps whatever config it had, a new plugin pod does not
      start), the default does not exist, or there are no configs at all."""
    configs = configs or {}
    if label_value:
        return label_value if label_value in configs else None
    if default:
        return default if default in configs else None
    for strategy in FALLBACK_STRATEGIES:
        if strategy == "named" and DEFAULT_CONFIG_NAME in configs:
            return DEFAULT_CONFIG_NAME
        if strategy == "single" and len(configs) == 1:
            return next(iter(configs))
    return None

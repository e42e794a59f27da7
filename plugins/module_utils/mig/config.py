# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVIDIA mig-parted's configuration format (``version: v1``, ``mig-configs``): reading it,
what is wrong with it, and which GPUs each entry of a named config selects.

    version: v1
    mig-configs:
      all-balanced:
        - devices: all                 # or a list of GPU indexes
          device-filter: ["0x233010DE"]   # optional: PCI device ids (device << 16 | vendor)
          mig-enabled: true
          mig-devices: {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}

Profile names are checked later, against what each GPU reports (mig_plan); here only the
shape. Pure functions over plain data; no I/O."""

from __future__ import annotations

import re

__metaclass__ = type

VERSION = "v1"
PROFILE_NAME = re.compile(r"^[1-9][0-9]?g\.[0-9]+gb(\+[a-z.]+|-me)?$")
CI_PROFILE_NAME = re.compile(r"^[1-9][0-9]?c\.[1-9][0-9]?g\.[0-9]+gb")
PCI_ID = re.compile(r"^0x[0-9a-fA-F]{8}$")
ENTRY_KEYS = ("devices", "device-filter", "mig-enabled", "mig-devices")


class ConfigError(Exception):
    """A config that cannot be used; the message names the config, the entry and the fix."""


def _where(name, index):
    return "mig-configs.%s[%d]" % (name, index)


def entry_errors(name, index, entry):
    """What is wrong with one entry of a named config (list of messages)."""
    where = _where(name, index)
    if not isinstance(entry, dict):
        return ["%s: each entry must be a mapping with devices, mig-enabled and mig-devices, not %s"
                % (where, type(entry).__name__)]
    errors = []
    unknown = sorted(set(entry) - set(ENTRY_KEYS), key=str)
    if unknown:
        errors.append("%s: unknown key(s) %s (known: %s)" % (where, ", ".join(map(str, unknown)), ", ".join(ENTRY_KEYS)))
    devices = entry.get("devices")
    if devices is None:
        errors.append("%s: 'devices' is required: all, or a list of GPU indexes" % where)
    elif devices != "all" and not (isinstance(devices, list) and devices and all(
            isinstance(d, int) and not isinstance(d, bool) and d >= 0 for d in devices)):
        errors.append("%s: devices must be 'all' or a non-empty list of GPU indexes (0, 1, ...), not %r"
                      % (where, devices))
    elif isinstance(devices, list) and len(set(devices)) != len(devices):
        errors.append("%s: devices lists an index twice: %r" % (where, devices))
    filters = entry.get("device-filter")
    if filters is not None:
        items = [filters] if isinstance(filters, str) else filters
        if not isinstance(items, list) or not items or not all(isinstance(f, str) and PCI_ID.match(f) for f in items):
            errors.append("%s: device-filter takes PCI device ids as NVML reports them (0x233010DE: device "
                          "0x2330, vendor 0x10DE), one or a list, not %r" % (where, filters))
    enabled = entry.get("mig-enabled")
    if not isinstance(enabled, bool):
        errors.append("%s: mig-enabled must be true or false, not %r" % (where, enabled))
    wanted = entry.get("mig-devices", {})
    if wanted is None:
        wanted = {}
    if not isinstance(wanted, dict):
        errors.append("%s: mig-devices must map profile names to counts, e.g. {\"1g.10gb\": 7}, not %r"
                      % (where, wanted))
        return errors
    for profile, count in wanted.items():
        if not isinstance(profile, str) or (not PROFILE_NAME.match(profile) and not CI_PROFILE_NAME.match(profile)):
            errors.append("%s: %r is not a MIG profile name (like 1g.10gb, 3g.40gb or 1g.24gb+me)" % (where, profile))
        elif CI_PROFILE_NAME.match(profile):
            errors.append("%s: %s: compute-instance profiles (NcM.Ng.XXgb) are not supported; give GPU "
                          "instance profiles, each gets one compute instance of its full size" % (where, profile))
        if not isinstance(count, int) or isinstance(count, bool) or count < 0:
            errors.append("%s: the count of %s must be a whole number >= 0, not %r" % (where, profile, count))
    if enabled is False and any(c for c in wanted.values() if isinstance(c, int)):
        errors.append("%s: mig-devices need mig-enabled: true" % where)
    return errors


def config_errors(document):
    """What is wrong with a whole mig-parted config document."""
    if not isinstance(document, dict):
        return ["the MIG config must be a mapping with version: v1 and mig-configs, not %s" % type(document).__name__]
    errors = []
    if document.get("version") != VERSION:
        errors.append("version must be %s (the mig-parted format), not %r" % (VERSION, document.get("version")))
    configs = document.get("mig-configs")
    if not isinstance(configs, dict) or not configs:
        errors.append("mig-configs must map config names to lists of entries")
        return errors
    unknown = sorted(set(document) - {"version", "mig-configs"}, key=str)
    if unknown:
        errors.append("unknown top-level key(s): %s (known: version, mig-configs)" % ", ".join(map(str, unknown)))
    for name, entries in configs.items():
        if not isinstance(entries, list) or not entries:
            errors.append("mig-configs.%s must be a non-empty list of entries" % name)
            continue
        for index, entry in enumerate(entries):
            errors.extend(entry_errors(name, index, entry))
    return errors


def select(document, name):
    """The entries of config `name`; ConfigError when the document or the name is wrong."""
    errors = config_errors(document)
    if errors:
        raise ConfigError("; ".join(errors))
    configs = document["mig-configs"]
    if name not in configs:
        raise ConfigError("no MIG config named %r (the file has: %s)" % (name, ", ".join(sorted(map(str, configs)))))
    return configs[name]


def _pci_id(value):
    return "0x%08X" % value if isinstance(value, int) else str(value).upper().replace("0X", "0x")


def assign(name, entries, gpus):
    """Which entry applies to which GPU: {gpu index: (entry index, entry)}. `gpus` are dicts with
    index and pci_device_id. GPUs no entry selects are left out (left as they are). Raises
    ConfigError for an index the node does not have, a filter no GPU matches, or a GPU two
    entries select."""
    by_index = {g["index"]: g for g in gpus}
    chosen = {}
    errors = []
    for i, entry in enumerate(entries):
        where = _where(name, i)
        filters = entry.get("device-filter")
        filters = None if filters is None else {f.upper().replace("0X", "0x") for f in (
            [filters] if isinstance(filters, str) else filters)}
        if entry["devices"] == "all":
            indexes = sorted(by_index)
        else:
            missing = [d for d in entry["devices"] if d not in by_index]
            if missing:
                errors.append("%s: the node has no GPU %s (it has %s)" % (
                    where, ", ".join(map(str, missing)), ", ".join(map(str, sorted(by_index))) or "none"))
                continue
            indexes = entry["devices"]
        if filters is not None:
            indexes = [d for d in indexes if _pci_id(by_index[d].get("pci_device_id")) in filters]
            if not indexes and entry["devices"] != "all":
                errors.append("%s: none of GPUs %s has PCI device id %s" % (
                    where, ", ".join(map(str, entry["devices"])), ", ".join(sorted(filters))))
        for d in indexes:
            if d in chosen:
                errors.append("GPU %d is selected by %s and %s: give each GPU one entry" % (
                    d, _where(name, chosen[d][0]), where))
            else:
                chosen[d] = (i, entry)
    if errors:
        raise ConfigError("; ".join(errors))
    return chosen

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node-local GPU inventory record (what the fleet audit reads): every GPU slot the node has
had, with the identity of the GPU in it, kept when the GPU is lost - the serial and UUID an RMA
needs - and the hardware changes between records (a GPU lost, swapped, back, added). Pure
functions: the previous record and a gpu_info snapshot in, the new record and the changes out.

A slot is the GPU's PCI bus id. A lost GPU whose bus id NVML no longer gives keeps the slot of
the recorded GPU with its index.

The record is rewritten only when something in it changes (readings are not kept), so
``last_seen`` of a lost GPU is the last time the record was written with it present, and
``lost_since`` the time a run first found it lost."""

from __future__ import annotations

__metaclass__ = type

SCHEMA = "gpuops.nvidia/gpu-inventory/v2"
SCHEMAS_READ = ("gpuops.nvidia/gpu-inventory/v1", SCHEMA)
# Identity fields of a GPU (no readings, so the record only changes with hardware, firmware or
# driver).
IDENTITY = ("index", "name", "uuid", "serial", "board_part_number", "vbios_version", "pci",
            "architecture", "compute_capability")
# The newest events kept in the record.
MAX_EVENTS = 50


class RecordError(ValueError):
    """The previous record cannot be read as an inventory record."""


def slot_of(gpu: dict) -> str | None:
    bus_id = (gpu.get("pci") or {}).get("bus_id")
    return bus_id.lower() if bus_id else None


def _identity(gpu: dict) -> dict:
    entry = {key: gpu.get(key) for key in IDENTITY}
    entry["mig_mode"] = (gpu.get("mig") or {}).get("current")
    return entry


def _same_gpu(old: dict, gpu: dict) -> bool:
    """The same board: the serial when both have one, else the UUID."""
    if old.get("serial") and gpu.get("serial"):
        return old["serial"] == gpu["serial"]
    return bool(old.get("uuid")) and old.get("uuid") == gpu.get("uuid")


def check_shape(record: dict) -> None:
    """A record of the inventory's schema whose GPU entries or events are not lists of objects
    raises RecordError."""
    for key in ("gpus", "events"):
        value = record.get(key) or []
        if not isinstance(value, list) or not all(isinstance(entry, dict) for entry in value):
            raise RecordError("its %s is %s where a list of objects was expected; move it away or set "
                              "gpu_report_inventory_path to another file" % (key, _kind(value)))


def _kind(value) -> str:
    if isinstance(value, list):
        return "a list holding %s" % ", ".join(sorted({_kind(entry) for entry in value if not isinstance(entry, dict)}))
    return {dict: "an object", str: "a string", int: "a number", float: "a number", bool: "a boolean"}.get(
        type(value), type(value).__name__)


def previous_gpus(record: dict | None) -> list:
    """The GPU entries of a previous record (v1 or v2), with their slot and state."""
    if not record:
        return []
    if not isinstance(record, dict) or record.get("schema") not in SCHEMAS_READ:
        raise RecordError("not a gpuops.nvidia GPU inventory record (schema %r); move it away or set "
                          "gpu_report_inventory_path to another file" % (record or {}).get("schema")
                          if isinstance(record, dict) else "the record is not a JSON object")
    check_shape(record)
    result = []
    for entry in record.get("gpus") or []:
        entry = dict(entry)
        entry.setdefault("slot", slot_of(entry) or "index:%s" % entry.get("index"))
        if "state" not in entry:  # v1: lost GPUs had no identity left
            entry["state"] = "lost" if entry.get("lost") else "present"
        entry.pop("lost", None)
        result.append(entry)
    return result


def _match(gpus: list, old: list) -> list:
    """[(gpu or None, old entry or None, slot)] pairing the GPUs NVML lists now with the record."""
    by_slot = {entry["slot"]: entry for entry in old}
    claimed, pairs = set(), []
    waiting = []
    for gpu in gpus:
        slot = slot_of(gpu)
        if slot:
            claimed.add(slot)
            pairs.append((gpu, by_slot.get(slot), slot))
        else:
            waiting.append(gpu)
    for gpu in waiting:  # lost without a bus id: the unclaimed slot of its index
        entry = next((e for e in old if e["slot"] not in claimed and e.get("index") == gpu.get("index")), None)
        slot = entry["slot"] if entry else "index:%s" % gpu.get("index")
        claimed.add(slot)
        pairs.append((gpu, entry, slot))
    for entry in old:
        if entry["slot"] not in claimed:
            pairs.append((None, entry, entry["slot"]))
    return pairs


def _event(kind: str, now: str, entry: dict, message: str, **extra) -> dict:
    event = {"time": now, "event": kind, "slot": entry["slot"], "index": entry.get("index"),
             "serial": entry.get("serial"), "uuid": entry.get("uuid"), "message": message}
    event.update(extra)
    return event


def _who(entry: dict) -> str:
    return "GPU %s (%s, serial %s, slot %s)" % (entry.get("index"), entry.get("name") or "unknown model",
                                                entry.get("serial") or "unknown", entry["slot"])


def _lost_entry(old: dict | None, gpu: dict | None, slot: str, state: str, now: str, boot_id: str | None,
                previous_time: str | None) -> tuple:
    """The entry of a GPU NVML no longer describes, and the event when it just went."""
    if old is None:  # lost before any record knew it: only what NVML still says
        entry = _identity(gpu or {})
        entry.update({"slot": slot, "state": state, "first_seen": None, "last_seen": None,
                      "lost_since": now, "lost_boot_id": boot_id, "lost_after_reboot": False})
        return entry, None
    entry = dict(old)
    if gpu is not None and gpu.get("index") is not None:
        entry["index"] = gpu["index"]
    if old["state"] == "present":
        entry.update({"state": state, "last_seen": previous_time or old.get("last_seen"), "lost_since": now,
                      "lost_boot_id": boot_id, "lost_after_reboot": False})
        what = "is lost (NVML: GPU is lost)" if state == "lost" else "is gone: NVML no longer lists it"
        return entry, _event("gpu_lost", now, entry, "%s %s; last seen %s" % (
            _who(entry), what, entry["last_seen"] or "before this record"))
    entry["state"] = state
    if boot_id and entry.get("lost_boot_id") and boot_id != entry["lost_boot_id"]:
        entry["lost_after_reboot"] = True
    return entry, None


def merge(previous: dict | None, snapshot: dict, host: str, now: str, boot_id: str | None = None) -> tuple:
    """(record, events): the new inventory record from the previous one (None: there is none) and
    a gpu_info snapshot (driver, gpus). Events list this run's hardware changes: gpu_lost,
    gpu_swapped (same slot, another serial), gpu_returned, gpu_added. The record's ``updated`` is
    the previous one's when nothing else changed, so an unchanged node leaves the file as it is."""
    old = previous_gpus(previous)
    previous_time = (previous or {}).get("updated")
    driver = snapshot.get("driver") or {}
    if not driver.get("loaded"):
        # NVML cannot see any GPU: keep what the record knows, note the driver
        entries = old
        events = []
    else:
        entries, events = [], []
        for gpu, entry, slot in _match(snapshot.get("gpus") or [], old):
            if gpu is None or gpu.get("lost"):
                new, event = _lost_entry(entry, gpu, slot, "lost" if gpu is not None else "missing", now,
                                         boot_id, previous_time)
            else:
                new = _identity(gpu)
                new.update({"slot": slot, "state": "present", "last_seen": None, "lost_since": None})
                new["first_seen"] = now
                event = None
                if entry is None:
                    if previous is not None:
                        event = _event("gpu_added", now, new, "%s is new in this node" % _who(new))
                elif not _same_gpu(entry, gpu):
                    event = _event("gpu_swapped", now, new, "%s replaces serial %s in the same slot" % (
                        _who(new), entry.get("serial") or "unknown"),
                        previous_serial=entry.get("serial"), previous_uuid=entry.get("uuid"))
                else:
                    new["first_seen"] = entry.get("first_seen")
                    if entry["state"] != "present":
                        event = _event("gpu_returned", now, new, "%s is back (lost since %s)" % (
                            _who(new), entry.get("lost_since") or "unknown"))
            entries.append(new)
            if event:
                events.append(event)
    entries.sort(key=lambda e: (e.get("index") is None, e.get("index") if e.get("index") is not None else 0,
                                e["slot"]))
    record = {
        "schema": SCHEMA,
        "host": host,
        "driver": {
            "loaded": driver.get("loaded"),
            "reason": driver.get("reason"),
            "version": driver.get("version"),
            "cuda_driver_version": driver.get("cuda_driver_version"),
            "kernel_module_flavour": (driver.get("kernel_module") or {}).get("flavour"),
        },
        "gpu_count": snapshot.get("gpu_count", len(snapshot.get("gpus") or [])),
        "gpus": entries,
        "events": ((previous or {}).get("events") or []) + events,
    }
    record["events"] = record["events"][-MAX_EVENTS:]
    unchanged = previous is not None and {k: v for k, v in previous.items() if k != "updated"} == record
    record["updated"] = previous_time if unchanged else now
    return record, events


def identities(record: dict | None, gpus: list | None = None) -> dict:
    """GPU index -> what is known of each GPU's identity (serial, uuid, name, slot, and for a GPU
    that is lost or gone: last_seen, lost_since, lost_after_reboot), from the GPUs NVML describes
    now and, for the others, from the record - for the node's verdict ('RMA GPU 7 (serial ...)')."""
    keys = ("serial", "uuid", "name", "slot", "last_seen", "lost_since", "lost_after_reboot")
    known = {entry.get("index"): {key: entry.get(key) for key in keys}
             for entry in (record or {}).get("gpus") or [] if entry.get("state") != "present"}
    for gpu in gpus or []:
        if not gpu.get("lost"):
            known[gpu.get("index")] = {"serial": gpu.get("serial"), "uuid": gpu.get("uuid"),
                                       "name": gpu.get("name"), "slot": slot_of(gpu)}
    return known

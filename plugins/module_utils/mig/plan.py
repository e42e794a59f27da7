# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Planning a MIG layout: is what a config asks possible on each GPU, where every GPU instance
goes, and the ordered NVML steps from the node's layout to the wanted one.

Everything is checked against what each GPU itself reports through NVML (its profiles: ids,
compute slices, maximum counts, possible placements), never a table per GPU model. Instances
that already match (profile, one compute instance of the full size) are kept where the rest
still fits around them; the allocator places the largest profiles first, trying NVML's possible
placements in order (NVIDIA's MIG guide: create larger profiles first; the driver's own
automatic placement can strand a set that fits).

Pure functions over plain data (the facts nvml/adapter.mig_gpu reads); no I/O.

A GPU's facts::

    {"index": 0, "uuid": "GPU-...", "name": "NVIDIA H100 80GB HBM3", "pci_device_id": 0x233010DE,
     "mig_capable": True, "mig_current": False, "mig_pending": False,
     "profiles": {"1g.10gb": {"id": 19, "slices": 1, "count": 7, "memory_mib": 9984,
                              "placements": [[0, 1], [1, 1], ...]}, ...} or None (unknown),
     "gpu_instances": [{"id": 13, "profile_id": 19, "profile": "1g.10gb", "placement": [6, 1],
                        "compute_instances": [{"id": 0, "profile_id": 0, "slices": 1}]}]}
"""

from __future__ import annotations

import re

import itertools

__metaclass__ = type

PHASES = ("destroy_compute_instance", "destroy_gpu_instance", "set_mig_mode", "create_gpu_instance",
          "create_compute_instance")
MAX_SEARCH = 200000  # placement attempts per GPU before the allocator gives up


# The GPU instance profile names of the GPUs NVIDIA's MIG user guide tabulates (the same seven
# slots, named by their memory): with MIG off and no profile record NVML cannot list a GPU's
# profiles, so a name these GPUs do not have is refused before MIG mode is touched. Other GPUs'
# names are checked once MIG is on (profile IDs always come from NVML, never from here).
_SLOT_NAMES = ("1g.{0}gb", "1g.{0}gb+me", "1g.{1}gb", "2g.{1}gb", "3g.{2}gb", "4g.{2}gb", "7g.{3}gb")
KNOWN_PROFILE_NAMES = {
    ("A100", "40GB"): tuple(n.format(5, 10, 20, 40) for n in _SLOT_NAMES),
    ("A100", "80GB"): tuple(n.format(10, 20, 40, 80) for n in _SLOT_NAMES),
    ("H100", "80GB"): tuple(n.format(10, 20, 40, 80) for n in _SLOT_NAMES),
    ("H200",): tuple(n.format(18, 35, 71, 141) for n in _SLOT_NAMES),
}


def known_profile_names(gpu):
    """The profile names of a GPU the table above knows by the words of its product name
    (NVIDIA A100-SXM4-40GB, NVIDIA H100 80GB HBM3, NVIDIA H200); None for any other."""
    words = set(re.split(r"[^A-Z0-9]+", (gpu.get("name") or "").upper()))
    for product, names in KNOWN_PROFILE_NAMES.items():
        if set(product) <= words:
            return names
    return None


def _mask(start, size):
    return ((1 << size) - 1) << start


def _label(gpu):
    return "GPU %d (%s)" % (gpu["index"], gpu.get("name") or gpu.get("uuid") or "?")


def compute_slices(profiles):
    return max((p["slices"] for p in profiles.values()), default=0)


def _full_ci(gi, profiles):
    """Whether a GPU instance holds exactly one compute instance of its full size."""
    profile = profiles.get(gi["profile"]) if profiles else None
    cis = gi.get("compute_instances") or []
    if profile is None or len(cis) != 1:
        return False
    return cis[0].get("slices") in (None, profile["slices"])


def _expand(devices):
    return [name for name, count in devices.items() for _unused in range(count)]


def _order(names, profiles):
    # largest first: compute slices, then memory, then the name (stable and readable)
    return sorted(names, key=lambda n: (-profiles[n]["slices"], -profiles[n].get("memory_mib", 0), n))


def _fit(names, profiles, used_mask, used_slices, total_slices, counts, budget):
    """Placements for `names` (largest first) around what is used: a list of (name, [start,
    size]) or None. Instances of one profile take placements in increasing order (no
    permutations of equal instances are tried twice)."""
    result = []

    def place(i, mask, slices, last):
        if i == len(names):
            return True
        name = names[i]
        profile = profiles[name]
        if slices + profile["slices"] > total_slices or counts.get(name, 0) >= profile["count"]:
            return False
        placements = profile["placements"]
        first = last + 1 if i > 0 and names[i - 1] == name else 0
        for k in range(first, len(placements)):
            budget[0] -= 1
            if budget[0] < 0:
                return False
            start, size = placements[k]
            m = _mask(start, size)
            if mask & m:
                continue
            counts[name] = counts.get(name, 0) + 1
            result.append((name, [start, size]))
            if place(i + 1, mask | m, slices + profile["slices"], k):
                return True
            result.pop()
            counts[name] -= 1
        return False

    return result if place(0, used_mask, used_slices, -1) else None


def allocate(gpu, devices):
    """Which existing GPU instances to keep and where the others go, for a MIG-enabled layout
    `devices` ({profile name: count}) on a GPU whose profiles are known. Returns
    {"keep": [gi ids], "create": [(name, [start, size])]} or None when no arrangement fits."""
    profiles = gpu["profiles"]
    total = compute_slices(profiles)
    wanted = {n: c for n, c in devices.items() if c}
    existing = [gi for gi in gpu.get("gpu_instances") or [] if wanted.get(gi["profile"])]
    # keep as many matching instances as possible: all of them (up to the count wanted) first,
    # then smaller sets; equal profiles are interchangeable, so try combinations, not orders
    by_profile = {}
    for gi in sorted(existing, key=lambda g: g["id"]):
        by_profile.setdefault(gi["profile"], []).append(gi)
    choices = []
    for name, gis in by_profile.items():
        options = []
        for keep in range(min(len(gis), wanted[name]), -1, -1):
            options.extend(itertools.combinations(gis, keep))
        choices.append(options)
    candidates = [sum(combo, ()) for combo in itertools.product(*choices)] if choices else [()]
    candidates.sort(key=lambda kept: (-len(kept), [g["id"] for g in kept]))
    budget = [MAX_SEARCH]
    for kept in candidates:
        mask = 0
        slices = 0
        counts = {}
        for gi in kept:
            mask |= _mask(*gi["placement"])
            slices += profiles[gi["profile"]]["slices"]
            counts[gi["profile"]] = counts.get(gi["profile"], 0) + 1
        rest = dict(wanted)
        for gi in kept:
            rest[gi["profile"]] -= 1
        placed = _fit(_order(_expand(rest), profiles), profiles, mask, slices, total, counts, budget)
        if placed is not None:
            return {"keep": sorted(gi["id"] for gi in kept), "create": placed}
        if budget[0] < 0:
            break
    return None


def layout_errors(gpu, devices, where):
    """Why `devices` cannot be laid out on this GPU (messages naming the GPU and the entry);
    [] when it can."""
    label = _label(gpu)
    profiles = gpu["profiles"]
    errors = []
    for name, count in sorted(devices.items()):
        if name not in profiles:
            errors.append("%s: %s: %s has no MIG profile %s (it reports: %s)" % (
                where, label, label.split(" (")[0], name, ", ".join(sorted(profiles, key=lambda n: (profiles[n]["slices"], n)))))
        elif count > profiles[name]["count"]:
            errors.append("%s: %s: at most %d x %s fit on this GPU, not %d" % (
                where, label, profiles[name]["count"], name, count))
    if errors:
        return errors
    total = compute_slices(profiles)
    asked = sum(profiles[n]["slices"] * c for n, c in devices.items())
    if asked > total:
        errors.append("%s: %s: the profiles ask for %d compute slices; the GPU has %d" % (where, label, asked, total))
    elif allocate(dict(gpu, gpu_instances=[]), devices) is None:
        parts = ", ".join("%d x %s" % (c, n) for n, c in sorted(devices.items()) if c)
        places = "; ".join("%s at %s" % (n, " ".join("%d:%d" % tuple(p) for p in profiles[n]["placements"]))
                           for n in sorted(devices) if devices[n])
        errors.append("%s: %s: no placement fits %s together (possible placements, start:size of the "
                      "memory slices: %s)" % (where, label, parts, places))
    return errors


def _processes_on(gpu, gi_id):
    return [p for p in gpu.get("processes") or [] if p.get("gpu_instance") == gi_id]


def _process_names(gpu, gi_id):
    return ["%s (%s)" % (p["pid"], p.get("name") or "?") for p in _processes_on(gpu, gi_id)]


def _count(gpu_instances):
    counts = {}
    for gi in gpu_instances:
        counts[gi["profile"]] = counts.get(gi["profile"], 0) + 1
    return counts


def describe_layout(gpu_instances):
    """'1g.10gb@6:1, 3g.40gb@4:4' - a layout as one line, by placement."""
    items = sorted(gpu_instances, key=lambda g: (g["placement"][0], g["profile"]))
    return ", ".join("%s@%d:%d" % (g["profile"], g["placement"][0], g["placement"][1]) for g in items) or "none"


def plan_gpu(gpu, want, where):
    """Steps for one GPU. `want` is {"mig_enabled": bool, "devices": {name: count}}. Returns
    {"gpu", "entry", "errors", "steps", "before", "after", "matches", "validated"}; "after" is
    {"mig_enabled", "mig_pending", "layout" (one line), "devices" ({profile: count})}."""
    label = _label(gpu)
    out = {"gpu": gpu["index"], "uuid": gpu.get("uuid"), "entry": where, "errors": [], "steps": [],
           "validated": True}
    current, pending = bool(gpu.get("mig_current")), bool(gpu.get("mig_pending"))
    instances = (gpu.get("gpu_instances") or []) if current else []
    out["before"] = {"mig_enabled": current, "mig_pending": pending, "layout": describe_layout(instances)}
    enabled = want["mig_enabled"]
    devices = {n: c for n, c in (want.get("devices") or {}).items() if c}
    if enabled and not gpu.get("mig_capable"):
        out["errors"].append("%s: %s cannot run MIG (NVML reports no MIG mode for it); leave it out of the "
                             "entry (devices or device-filter) or set mig-enabled: false" % (where, label))
        return out
    if not enabled and not gpu.get("mig_capable"):
        out.update(matches=True, after=dict(out["before"], devices={}))
        return out
    profiles = gpu.get("profiles")
    steps = out["steps"]
    gpu_index = gpu["index"]

    def destroy(gi, with_instance=True):
        for ci in sorted(gi.get("compute_instances") or [], key=lambda c: c["id"]):
            steps.append({"gpu": gpu_index, "action": "destroy_compute_instance", "gpu_instance": gi["id"],
                          "compute_instance": ci["id"], "profile": gi["profile"]})
        if with_instance:
            steps.append({"gpu": gpu_index, "action": "destroy_gpu_instance", "gpu_instance": gi["id"],
                          "profile": gi["profile"], "placement": list(gi["placement"])})

    if not enabled:
        busy = [gi for gi in instances if _processes_on(gpu, gi["id"])]
        if busy:
            out["errors"].extend("%s: %s: GPU instance %d (%s) runs process(es) %s; stop them before MIG is turned "
                                 "off" % (where, label, gi["id"], gi["profile"], ", ".join(_process_names(gpu, gi["id"])))
                                 for gi in busy)
            return out
        for gi in sorted(instances, key=lambda g: g["id"]):
            destroy(gi)
        if current or pending:
            steps.append({"gpu": gpu_index, "action": "set_mig_mode", "enabled": False})
        out["after"] = {"mig_enabled": False, "mig_pending": False, "layout": "none", "devices": {}}
        out["matches"] = not steps
        return out

    if profiles is None:
        # MIG is off and NVML only reports profiles once it is on: the layout is validated and
        # placed right after the mode change, before any instance is created - but a name this
        # model does not have is refused now, before MIG mode is touched (a retry would turn it on
        # and off again on every GPU)
        names = known_profile_names(gpu)
        wrong = sorted(n for n in devices if names is not None and n.split("c.", 1)[-1] not in names)
        if wrong:
            out["errors"].append("%s: %s: %s has no MIG profile %s (its profiles: %s); fix mig-devices - MIG mode "
                                 "was not touched" % (where, label, label.split(" (")[0], ", ".join(wrong),
                                                      ", ".join(names)))
            return out
        out["validated"] = False
        steps.append({"gpu": gpu_index, "action": "set_mig_mode", "enabled": True})
        for name in sorted(devices, key=str):
            for _unused in range(devices[name]):
                steps.append({"gpu": gpu_index, "action": "create_gpu_instance", "profile": name, "placement": None})
                steps.append({"gpu": gpu_index, "action": "create_compute_instance", "profile": name,
                              "gpu_instance": None})
        out["after"] = {"mig_enabled": True, "mig_pending": False,
                        "layout": ", ".join("%d x %s" % (c, n) for n, c in sorted(devices.items())) or "none",
                        "devices": dict(devices)}
        out["matches"] = False
        return out

    errors = layout_errors(gpu, devices, where)
    if errors:
        out["errors"] = errors
        return out
    placed = allocate(dict(gpu, gpu_instances=instances), devices)
    if placed is None:  # the search gave up (a layout_errors check passed on an empty GPU)
        out["errors"].append("%s: %s: no placement for the layout was found around the instances the GPU has; "
                             "apply all-disabled (or all-enabled) first, then this config" % (where, label))
        return out
    keep = set(placed["keep"])
    busy = [gi for gi in instances if gi["id"] not in keep and _processes_on(gpu, gi["id"])]
    if busy:
        out["errors"].extend("%s: %s: GPU instance %d (%s@%d:%d) would be destroyed but runs process(es) %s; stop "
                             "them first" % (where, label, gi["id"], gi["profile"], gi["placement"][0],
                                             gi["placement"][1], ", ".join(_process_names(gpu, gi["id"])))
                             for gi in busy)
        return out
    for gi in sorted(instances, key=lambda g: g["id"]):
        if gi["id"] not in keep:
            destroy(gi)
        elif not _full_ci(gi, profiles):
            destroy(gi, with_instance=False)  # the GPU instance stays; its compute instances are remade
    if not (current and pending):  # off, a pending enable, or a pending disable to cancel
        steps.append({"gpu": gpu_index, "action": "set_mig_mode", "enabled": True})
    for gi in sorted(instances, key=lambda g: g["id"]):
        if gi["id"] in keep and not _full_ci(gi, profiles):
            steps.append({"gpu": gpu_index, "action": "create_compute_instance", "profile": gi["profile"],
                          "gpu_instance": gi["id"]})
    for name, placement in placed["create"]:
        steps.append({"gpu": gpu_index, "action": "create_gpu_instance", "profile": name,
                      "profile_id": profiles[name]["id"], "placement": placement})
        steps.append({"gpu": gpu_index, "action": "create_compute_instance", "profile": name,
                      "gpu_instance": None, "placement": placement})
    after = [gi for gi in instances if gi["id"] in keep] + [
        {"profile": n, "placement": p} for n, p in placed["create"]]
    out["after"] = {"mig_enabled": True, "mig_pending": False, "layout": describe_layout(after),
                    "devices": _count(after)}
    out["matches"] = not steps
    return out


def order_steps(gpu_plans):
    """All GPUs' steps, GPU by GPU (a failure on one leaves the others as they were), each GPU's
    in the order NVML needs them: compute instances before their GPU instances, instances before
    a mode change, the mode before new instances."""
    steps = [s for p in gpu_plans for s in p["steps"]]
    return sorted(steps, key=lambda s: (s["gpu"], PHASES.index(s["action"])))


def plan(gpus, assignment, name):
    """The plan for config `name`: `assignment` maps GPU index -> (entry index, entry) (see
    mig_config.assign). Returns {"config", "gpus": [per-GPU plans], "steps", "errors",
    "matches"}."""
    by_index = {g["index"]: g for g in gpus}
    gpu_plans = []
    for index in sorted(assignment):
        entry_index, entry = assignment[index]
        where = "mig-configs.%s[%d]" % (name, entry_index)
        want = {"mig_enabled": entry["mig-enabled"], "devices": entry.get("mig-devices") or {}}
        gpu_plans.append(plan_gpu(by_index[index], want, where))
    errors = [e for p in gpu_plans for e in p["errors"]]
    return {"config": name, "gpus": gpu_plans, "errors": errors,
            "steps": [] if errors else order_steps(gpu_plans),
            "matches": not errors and all(p["matches"] for p in gpu_plans)}


def diff_text(plan_result):
    """before/after text for Ansible's diff: one line per GPU."""
    before, after = [], []
    for p in plan_result["gpus"]:
        b, a = p["before"], p.get("after") or p["before"]
        before.append("GPU %d: MIG %s%s: %s\n" % (p["gpu"], "on" if b["mig_enabled"] else "off",
                                                  " (change pending)" if b.get("mig_pending") != b["mig_enabled"] else "",
                                                  b["layout"]))
        after.append("GPU %d: MIG %s: %s\n" % (p["gpu"], "on" if a["mig_enabled"] else "off", a["layout"]))
    return {"before": "".join(before), "after": "".join(after),
            "before_header": "MIG layout", "after_header": "MIG layout (config %s)" % plan_result["config"]}


def _fits(profiles, devices):
    return allocate({"profiles": profiles, "gpu_instances": []}, devices) is not None


def named_layouts(gpus):
    """The usual named layouts for the node's GPU models, as a mig-parted config document:
    all-disabled, all-enabled, all-<profile> (as many of it as fit) and all-balanced (two of the
    smallest 1-slice profile, a 2-slice and a 3-slice one, as far as they fit), one entry per GPU
    model (device-filter by PCI device id) wherever the models differ. From the profiles the GPUs
    report; GPUs whose profiles are unknown get only all-disabled and all-enabled."""
    models = {}
    for gpu in gpus:
        if gpu.get("mig_capable") and gpu.get("profiles") and gpu.get("pci_device_id") is not None:
            models.setdefault("0x%08X" % gpu["pci_device_id"], gpu["profiles"])
    capable = [g for g in gpus if g.get("mig_capable")]
    # "devices: all" only where every GPU of the node is of the one model; else per model
    uniform = len(models) == 1 and len(capable) == len(gpus) and all(
        g.get("pci_device_id") is not None and "0x%08X" % g["pci_device_id"] in models for g in gpus)
    enabled = []
    if uniform:
        enabled = [{"devices": "all", "mig-enabled": True, "mig-devices": {}}]
    else:
        ids = sorted({"0x%08X" % g["pci_device_id"] for g in capable if g.get("pci_device_id") is not None})
        enabled = [{"devices": "all", "device-filter": [i], "mig-enabled": True, "mig-devices": {}} for i in ids]
        others = [g["index"] for g in capable if g.get("pci_device_id") is None]
        if others:
            enabled.append({"devices": others, "mig-enabled": True, "mig-devices": {}})
    configs = {"all-disabled": [{"devices": "all", "mig-enabled": False}]}
    if enabled:
        configs["all-enabled"] = enabled

    def entry(device_id, devices):
        item = {"devices": "all", "mig-enabled": True, "mig-devices": devices}
        if not uniform:
            item["device-filter"] = [device_id]
        return item

    for device_id, profiles in sorted(models.items()):
        total = compute_slices(profiles)
        for name, profile in sorted(profiles.items(), key=lambda kv: (kv[1]["slices"], kv[1]["memory_mib"], kv[0])):
            if "+" in name or name.endswith("-me"):
                continue  # media-extension and engine variants: one per GPU at most, no "all-" layout
            count = min(profile["count"], total // max(profile["slices"], 1))
            while count and not _fits(profiles, {name: count}):
                count -= 1
            if count:
                configs.setdefault("all-" + name, []).append(entry(device_id, {name: count}))
        by_slices = {}
        for name, profile in sorted(profiles.items(), key=lambda kv: (kv[1]["memory_mib"], kv[0])):
            if "+" not in name and not name.endswith("-me"):
                by_slices.setdefault(profile["slices"], name)
        balanced = {}
        for slices, count in ((3, 1), (2, 1), (1, 2)):
            if slices in by_slices and _fits(profiles, dict(balanced, **{by_slices[slices]: count})):
                balanced[by_slices[slices]] = count
        if len(balanced) > 1:
            configs.setdefault("all-balanced", []).append(entry(device_id, balanced))
    return {"version": "v1", "mig-configs": configs}

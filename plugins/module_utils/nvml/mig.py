# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""MIG through NVML: reading each GPU's MIG facts (mode, the profiles the GPU reports with their
possible placements, GPU and compute instances, the processes on it) and carrying out a plan's
steps one by one, reading every new instance back.

Profile INFO is looked up by profile index, every other call takes the profile ID the info
gives (they differ, and differ between GPU families). NVML reports profiles only while MIG is
on; for a GPU whose MIG is off the profiles of another GPU of the same PCI device id on the node
are used, else those recorded on an earlier run (the caller keeps that record)."""

from __future__ import annotations

import ctypes
import traceback

__metaclass__ = type

try:
    import pynvml
    HAS_PYNVML = True
    PYNVML_IMPORT_ERROR = None
except ImportError:
    pynvml = None
    HAS_PYNVML = False
    PYNVML_IMPORT_ERROR = traceback.format_exc()

_GI_PROFILE_COUNT = 0x12  # NVML_GPU_INSTANCE_PROFILE_COUNT
_CI_PROFILE_COUNT = 0x9  # NVML_COMPUTE_INSTANCE_PROFILE_COUNT
_ERR_NOT_SUPPORTED = 3
_ERR_IN_USE = 19
_ERR_RESET_REQUIRED = 16
_NO_INSTANCE = 0xFFFFFFFF

ERROR_NAMES = {
    0: "SUCCESS", 2: "INVALID_ARGUMENT", 3: "NOT_SUPPORTED", 4: "NO_PERMISSION", 6: "NOT_FOUND",
    15: "GPU_IS_LOST", 16: "RESET_REQUIRED", 19: "IN_USE", 23: "INSUFFICIENT_RESOURCES", 999: "UNKNOWN",
}


class StepFailed(Exception):
    """An NVML call of a step failed: .step, .code (NVML return code), .message."""

    def __init__(self, step, code, message):
        Exception.__init__(self, message)
        self.step = step
        self.code = code
        self.message = message


def error_name(code):
    return ERROR_NAMES.get(code, str(code))


def _text(value):
    return value.decode("utf-8", errors="replace") if isinstance(value, bytes) else value


def _try(func, *args):
    try:
        return func(*args)
    except pynvml.NVMLError:
        return None


def _profile_name(info):
    return _text(getattr(info, "name", b"")).split("MIG ")[-1] or None


def _placements(handle, profile_id):
    n = ctypes.c_uint(0)
    try:  # the number first (placements NULL), then the placements
        pynvml.nvmlDeviceGetGpuInstancePossiblePlacements(handle, profile_id, None, ctypes.byref(n))
        array = (pynvml.c_nvmlGpuInstancePlacement_t * max(n.value, 1))()
        pynvml.nvmlDeviceGetGpuInstancePossiblePlacements(handle, profile_id, array, ctypes.byref(n))
    except pynvml.NVMLError:
        return []
    return [[array[i].start, array[i].size] for i in range(n.value)]


def _profiles(handle):
    """{name: {id, slices, count, memory_mib, placements}} as the GPU reports them (MIG on)."""
    found = {}
    for index in range(_GI_PROFILE_COUNT):
        info = _try(pynvml.nvmlDeviceGetGpuInstanceProfileInfo, handle, index)
        if info is None:
            continue
        name = _profile_name(info) or "profile-%d" % info.id
        found[name] = {"id": info.id, "index": index, "slices": info.sliceCount, "count": info.instanceCount,
                       "memory_mib": int(info.memorySizeMB), "placements": _placements(handle, info.id)}
    return found


def _gi_handles(handle, profiles):
    out = []
    for profile in profiles.values():
        count = ctypes.c_uint(0)
        array = (pynvml.c_nvmlGpuInstance_t * max(profile["count"], 1))()
        try:
            pynvml.nvmlDeviceGetGpuInstances(handle, profile["id"], array, ctypes.byref(count))
        except pynvml.NVMLError:
            continue
        out.extend(array[i] for i in range(count.value))
    return out


def _compute_instances(gi):
    found = []
    for index in range(_CI_PROFILE_COUNT):
        info = _try(pynvml.nvmlGpuInstanceGetComputeInstanceProfileInfo, gi, index, 0)
        if info is None:
            continue
        count = ctypes.c_uint(0)
        array = (pynvml.c_nvmlComputeInstance_t * max(info.instanceCount, 1))()
        try:
            pynvml.nvmlGpuInstanceGetComputeInstances(gi, info.id, array, ctypes.byref(count))
        except pynvml.NVMLError:
            continue
        for i in range(count.value):
            ci = _try(pynvml.nvmlComputeInstanceGetInfo, array[i])
            if ci is not None:
                found.append({"id": ci.id, "profile_id": ci.profileId, "slices": info.sliceCount,
                              "placement": [ci.placement.start, ci.placement.size]})
    return sorted(found, key=lambda c: c["id"])


def _processes(handle):
    procs = []
    for getter, kind in (("nvmlDeviceGetComputeRunningProcesses", "compute"),
                         ("nvmlDeviceGetGraphicsRunningProcesses", "graphics")):
        for p in _try(getattr(pynvml, getter), handle) or []:
            name = _try(pynvml.nvmlSystemGetProcessName, p.pid)
            gi = getattr(p, "gpuInstanceId", _NO_INSTANCE)
            ci = getattr(p, "computeInstanceId", _NO_INSTANCE)
            procs.append({"pid": p.pid, "name": _text(name) if name else None, "kind": kind,
                          "gpu_instance": None if gi == _NO_INSTANCE else gi,
                          "compute_instance": None if ci == _NO_INSTANCE else ci})
    return procs


def _pci_device_id(handle):
    pci = _try(pynvml.nvmlDeviceGetPciInfo, handle)
    if pci is None:
        return None, None
    return pci.pciDeviceId, _text(pci.busId)


def read_gpu(index):
    handle = pynvml.nvmlDeviceGetHandleByIndex(index)
    device_id, bus_id = _pci_device_id(handle)
    gpu = {"index": index, "uuid": _text(_try(pynvml.nvmlDeviceGetUUID, handle)),
           "name": _text(_try(pynvml.nvmlDeviceGetName, handle)), "pci_device_id": device_id, "pci_bus_id": bus_id,
           "mig_capable": False, "mig_current": False, "mig_pending": False, "profiles": None,
           "gpu_instances": [], "processes": _processes(handle)}
    try:
        current, pending = pynvml.nvmlDeviceGetMigMode(handle)
    except pynvml.NVMLError:
        return gpu
    gpu.update(mig_capable=True, mig_current=bool(current), mig_pending=bool(pending))
    if not current:
        return gpu
    profiles = _profiles(handle)
    gpu["profiles"] = profiles
    by_id = {p["id"]: n for n, p in profiles.items()}
    for gi in _gi_handles(handle, profiles):
        info = _try(pynvml.nvmlGpuInstanceGetInfo, gi)
        if info is None:
            continue
        gpu["gpu_instances"].append({"id": info.id, "profile_id": info.profileId,
                                     "profile": by_id.get(info.profileId, "profile-%d" % info.profileId),
                                     "placement": [info.placement.start, info.placement.size],
                                     "compute_instances": _compute_instances(gi)})
    gpu["gpu_instances"].sort(key=lambda g: g["id"])
    return gpu


def mig_devices(gpu_index, gpu=None):
    """The MIG devices of a GPU: GPU/compute instance ids, profile, placement, UUID. `gpu`: its
    facts as read_gpu read them just now (else they are read)."""
    handle = pynvml.nvmlDeviceGetHandleByIndex(gpu_index)
    gpu = gpu or read_gpu(gpu_index)
    placements = {gi["id"]: gi for gi in gpu["gpu_instances"]}
    out = []
    for i in range(_try(pynvml.nvmlDeviceGetMaxMigDeviceCount, handle) or 0):
        mig = _try(pynvml.nvmlDeviceGetMigDeviceHandleByIndex, handle, i)
        if mig is None:
            continue
        gi_id = _try(pynvml.nvmlDeviceGetGpuInstanceId, mig)
        gi = placements.get(gi_id, {})
        out.append({"gpu": gpu_index, "gpu_instance": gi_id,
                    "compute_instance": _try(pynvml.nvmlDeviceGetComputeInstanceId, mig),
                    "profile": gi.get("profile"), "placement": gi.get("placement"),
                    "uuid": _text(_try(pynvml.nvmlDeviceGetUUID, mig))})
    return sorted(out, key=lambda d: (d["gpu_instance"] or 0, d["compute_instance"] or 0))


def read_node(profile_record=None):
    """Every GPU's MIG facts, with borrowed profiles for GPUs whose MIG is off (the GPU
    reports none then): from another GPU of the same PCI device id, else `profile_record`
    ({"0x233010DE": profiles}). Returns (gpus, record of the profiles seen now)."""
    gpus = [read_gpu(i) for i in range(pynvml.nvmlDeviceGetCount())]
    seen = {}
    for gpu in gpus:
        if gpu["profiles"] is not None and gpu["pci_device_id"] is not None:
            seen.setdefault("0x%08X" % gpu["pci_device_id"], gpu["profiles"])
    record = dict(profile_record or {})
    record.update(seen)
    for gpu in gpus:
        if gpu["mig_capable"] and gpu["profiles"] is None and gpu["pci_device_id"] is not None:
            key = "0x%08X" % gpu["pci_device_id"]
            if key in record:
                gpu["profiles"] = record[key]
                gpu["profiles_from"] = "another GPU of the node" if key in seen else "an earlier run"
    return gpus, record


class Applier:
    """Carries out plan steps in order; new GPU instances are found again by placement."""

    def __init__(self):
        self.new_instances = {}  # (gpu, start) -> GPU instance id
        self.activation = {}  # gpu -> activation status of its mode change

    def _device(self, step):
        return pynvml.nvmlDeviceGetHandleByIndex(step["gpu"])

    def _gpu_instance(self, step, gi_id):
        return pynvml.nvmlDeviceGetGpuInstanceById(self._device(step), gi_id)

    def run(self, step):
        """Runs one step; returns what it did (dict). Raises StepFailed."""
        try:
            return getattr(self, "_" + step["action"])(step)
        except pynvml.NVMLError as exc:
            raise StepFailed(step, exc.value, "%s on GPU %d failed: %s (%s)" % (
                step["action"].replace("_", " "), step["gpu"], exc, error_name(exc.value)))

    def _destroy_compute_instance(self, step):
        gi = self._gpu_instance(step, step["gpu_instance"])
        pynvml.nvmlComputeInstanceDestroy(pynvml.nvmlGpuInstanceGetComputeInstanceById(gi, step["compute_instance"]))
        return {}

    def _destroy_gpu_instance(self, step):
        pynvml.nvmlGpuInstanceDestroy(self._gpu_instance(step, step["gpu_instance"]))
        return {}

    def _set_mig_mode(self, step):
        mode = pynvml.NVML_DEVICE_MIG_ENABLE if step["enabled"] else pynvml.NVML_DEVICE_MIG_DISABLE
        status = pynvml.nvmlDeviceSetMigMode(self._device(step), mode)
        self.activation[step["gpu"]] = status
        return {"activation": error_name(status)}

    def _create_gpu_instance(self, step):
        handle = self._device(step)
        start, size = step["placement"]
        placement = pynvml.c_nvmlGpuInstancePlacement_t(start, size)
        gi = pynvml.nvmlDeviceCreateGpuInstanceWithPlacement(handle, step["profile_id"], ctypes.byref(placement))
        info = pynvml.nvmlGpuInstanceGetInfo(gi)
        got = [info.placement.start, info.placement.size]
        if got != [start, size] or info.profileId != step["profile_id"]:
            raise StepFailed(step, 999, "GPU %d created GPU instance %d at %d:%d, not %d:%d as asked" % (
                step["gpu"], info.id, got[0], got[1], start, size))
        self.new_instances[(step["gpu"], start)] = info.id
        return {"gpu_instance": info.id}

    def _create_compute_instance(self, step):
        gi_id = step["gpu_instance"]
        if gi_id is None:
            gi_id = self.new_instances[(step["gpu"], step["placement"][0])]
        gi = self._gpu_instance(step, gi_id)
        full = None  # the compute instance profile of the full size (the lowest index of that size)
        for index in range(_CI_PROFILE_COUNT):
            info = _try(pynvml.nvmlGpuInstanceGetComputeInstanceProfileInfo, gi, index, 0)
            if info is not None and (full is None or info.sliceCount > full.sliceCount):
                full = info
        if full is None:
            raise StepFailed(step, _ERR_NOT_SUPPORTED, "GPU %d: GPU instance %d offers no compute instance profile"
                             % (step["gpu"], gi_id))
        ci = pynvml.nvmlGpuInstanceCreateComputeInstance(gi, full.id)
        return {"gpu_instance": gi_id, "compute_instance": pynvml.nvmlComputeInstanceGetInfo(ci).id}

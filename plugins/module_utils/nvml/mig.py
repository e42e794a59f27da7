# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""MIG through NVML: the node's MIG facts with the profiles of GPUs whose MIG is off filled in,
and carrying out a plan's steps one by one, reading every new instance back. Every NVML call
goes through the adapter (nvml/adapter.py: reads, ``call``, ``session``); NVML must be open.

Profile INFO is looked up by profile index, every other call takes the profile ID the info
gives (they differ, and differ between GPU families). NVML reports profiles only while MIG is
on; for a GPU whose MIG is off the profiles of another GPU of the same PCI device id on the node
are used, else those recorded on an earlier run (the caller keeps that record).

Copied flat beside the boot-time applier as mig_nvml.py (the adapter as nvml_adapter.py)."""

from __future__ import annotations

import ctypes
import os

__metaclass__ = type

if os.environ.get("GPUOPS_MIG_STANDALONE") == "1":  # the boot-time applier: the files beside this one
    import nvml_adapter as nvml  # pylint: disable=import-error
else:
    from ansible_collections.gpuops.nvidia.plugins.module_utils.nvml import adapter as nvml

ERROR_NAMES = {
    0: "SUCCESS", 2: "INVALID_ARGUMENT", 3: "NOT_SUPPORTED", 4: "NO_PERMISSION", 6: "NOT_FOUND",
    15: "GPU_IS_LOST", 16: "RESET_REQUIRED", 19: "IN_USE", 23: "INSUFFICIENT_RESOURCES", 999: "UNKNOWN",
}
_CI_PROFILE_COUNT = 0x9  # NVML_COMPUTE_INSTANCE_PROFILE_COUNT


class StepFailed(Exception):
    """An NVML call of a step failed: .step, .code (NVML return code), .message."""

    def __init__(self, step, code, message):
        Exception.__init__(self, message)
        self.step = step
        self.code = code
        self.message = message


def error_name(code):
    return ERROR_NAMES.get(code, str(code))


def borrow_profiles(gpus, profile_record=None):
    """Fill in the profiles of MIG-capable GPUs whose MIG is off (they report none then): from
    another GPU of the same PCI device id, else from `profile_record` ({"0x233010DE": profiles}).
    Changes `gpus` in place; returns the record of the profiles known now."""
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
    return record


def read_node(profile_record=None):
    """Every GPU's MIG facts (adapter.mig_gpus), with borrowed profiles for GPUs whose MIG is off
    (see borrow_profiles). Returns (gpus, record of the profiles known now)."""
    gpus = nvml.mig_gpus()
    return gpus, borrow_profiles(gpus, profile_record)


class Applier:
    """Carries out plan steps in order; new GPU instances are found again by placement."""

    def __init__(self):
        self.new_instances = {}  # (gpu, start) -> GPU instance id
        self.activation = {}  # gpu -> activation status of its mode change

    def _device(self, step):
        return nvml.call("nvmlDeviceGetHandleByIndex", step["gpu"])

    def _gpu_instance(self, step, gi_id):
        return nvml.call("nvmlDeviceGetGpuInstanceById", self._device(step), gi_id)

    def run(self, step):
        """Runs one step; returns what it did (dict). Raises StepFailed."""
        try:
            return getattr(self, "_" + step["action"])(step)
        except nvml.NvmlError as exc:
            raise StepFailed(step, exc.code, "%s on GPU %d failed: %s (%s)" % (
                step["action"].replace("_", " "), step["gpu"], exc, error_name(exc.code)))

    def _destroy_compute_instance(self, step):
        gi = self._gpu_instance(step, step["gpu_instance"])
        ci = nvml.call("nvmlGpuInstanceGetComputeInstanceById", gi, step["compute_instance"])
        nvml.call("nvmlComputeInstanceDestroy", ci)
        return {}

    def _destroy_gpu_instance(self, step):
        nvml.call("nvmlGpuInstanceDestroy", self._gpu_instance(step, step["gpu_instance"]))
        return {}

    def _set_mig_mode(self, step):
        mode = nvml.MIG_ENABLE if step["enabled"] else nvml.MIG_DISABLE
        status = nvml.call("nvmlDeviceSetMigMode", self._device(step), mode)
        self.activation[step["gpu"]] = status
        return {"activation": error_name(status)}

    def _create_gpu_instance(self, step):
        handle = self._device(step)
        start, size = step["placement"]
        placement = nvml.placement(start, size)
        gi = nvml.call("nvmlDeviceCreateGpuInstanceWithPlacement", handle, step["profile_id"], ctypes.byref(placement))
        info = nvml.call("nvmlGpuInstanceGetInfo", gi)
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
            info = nvml.quiet("nvmlGpuInstanceGetComputeInstanceProfileInfo", gi, index, 0)
            if info is not None and (full is None or info.sliceCount > full.sliceCount):
                full = info
        if full is None:
            raise StepFailed(step, nvml.ERR_NOT_SUPPORTED, "GPU %d: GPU instance %d offers no compute instance "
                             "profile" % (step["gpu"], gi_id))
        ci = nvml.call("nvmlGpuInstanceCreateComputeInstance", gi, full.id)
        return {"gpu_instance": gi_id, "compute_instance": nvml.call("nvmlComputeInstanceGetInfo", ci).id}

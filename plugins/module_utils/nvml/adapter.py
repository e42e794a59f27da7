# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one place that talks to NVML (through pynvml, from the nvidia-ml-py package).

It opens NVML (``session()``: every caller goes through it), reads plain-data snapshots (dicts
of str/int/bool/list) and maps NVML's errors to this collection's own (``NvmlError``, with the
reasons operators know). Nothing here decides anything: health and planning live in their own
pure module_utils. The MIG mutations (nvml/mig.py) call NVML through ``call`` here.

Read by every module that looks at GPUs, and copied flat (as nvml_adapter.py, with gpu/model.py
as gpu_model.py) beside the boot-time MIG applier, which runs it without Ansible."""

from __future__ import annotations

import contextlib
import ctypes
import os
import traceback

__metaclass__ = type

if os.environ.get("GPUOPS_MIG_STANDALONE") == "1":  # the boot-time applier: gpu/model.py copied beside this file
    from gpu_model import (  # pylint: disable=import-error
        architecture_name,
        clock_event_reason_names,
        mib,
        NVLINK_REMOTE_TYPES,
        topology_path,
    )
else:
    from ansible_collections.gpuops.nvidia.plugins.module_utils.gpu.model import (
        architecture_name,
        clock_event_reason_names,
        mib,
        NVLINK_REMOTE_TYPES,
        topology_path,
    )

try:
    import pynvml
    HAS_PYNVML = True
    PYNVML_IMPORT_ERROR = None
except ImportError:
    pynvml = None
    HAS_PYNVML = False
    PYNVML_IMPORT_ERROR = traceback.format_exc()

# NVML return codes that matter here (stable values from nvml.h).
ERR_NOT_SUPPORTED = 3
_ERR_NO_PERMISSION = 4
_ERR_DRIVER_NOT_LOADED = 9
_ERR_LIBRARY_NOT_FOUND = 12
_ERR_GPU_IS_LOST = 15
_ERR_LIB_RM_VERSION_MISMATCH = 18

_INIT_REASONS = {
    _ERR_LIBRARY_NOT_FOUND: "library_not_found",
    _ERR_DRIVER_NOT_LOADED: "driver_not_loaded",
    _ERR_LIB_RM_VERSION_MISMATCH: "version_mismatch",
    _ERR_NO_PERMISSION: "no_permission",
}

# nvmlDeviceSetMigMode's modes (NVML_DEVICE_MIG_DISABLE / _ENABLE)
MIG_DISABLE = 0
MIG_ENABLE = 1

_XID_EVENT = 0x8  # nvmlEventTypeXidCriticalError
_MAX_EVENTS = 256
_GI_PROFILE_COUNT = 0x12  # NVML_GPU_INSTANCE_PROFILE_COUNT
_CI_PROFILE_COUNT = 0x9  # NVML_COMPUTE_INSTANCE_PROFILE_COUNT
_MAX_NVLINKS = 36
_NO_INSTANCE = 0xFFFFFFFF  # a process's GPU/compute instance outside MIG


class NvmlError(Exception):
    """NVML failed. .message: NVML's words; .code: its return code (None without one);
    .reason: set only when NVML could not be opened (library_not_found, driver_not_loaded,
    version_mismatch, no_permission, nvml_error, bindings_missing)."""

    def __init__(self, message, code=None, reason=None):
        Exception.__init__(self, message)
        self.message = message
        self.code = code
        self.reason = reason


class GpuLost(Exception):
    """A GPU answered NVML_ERROR_GPU_IS_LOST."""


@contextlib.contextmanager
def session():
    """NVML open for the block: nvmlInit before, nvmlShutdown after (also on errors). NVML's
    errors, opening it included, come out as NvmlError (with .reason when it could not be opened).
    Sessions nest (NVML counts its openings)."""
    if not HAS_PYNVML:
        raise NvmlError("pynvml is not installed", reason="bindings_missing")
    try:
        pynvml.nvmlInit()
    except pynvml.NVMLError as exc:
        raise NvmlError(str(exc), exc.value, _INIT_REASONS.get(exc.value, "nvml_error")) from exc
    try:
        yield
    except pynvml.NVMLError as exc:
        raise NvmlError(str(exc), exc.value) from exc
    finally:
        try:
            pynvml.nvmlShutdown()
        except pynvml.NVMLError:
            pass


def _unopened(exc: NvmlError) -> dict:
    """The driver as a failed opening of NVML tells it."""
    driver = {"loaded": False, "reason": exc.reason, "message": exc.message}
    if exc.code is not None:
        driver["nvml_error_code"] = exc.code
    return driver


def call(name, *args):
    """Call an NVML function by pynvml name; NvmlError when NVML refuses."""
    try:
        return getattr(pynvml, name)(*args)
    except pynvml.NVMLError as exc:
        raise NvmlError(str(exc), exc.value) from exc


def quiet(name, *args):
    """Call an NVML getter by pynvml name; None when NVML cannot answer (any error, a lost GPU
    included) or the installed bindings lack the function."""
    func = getattr(pynvml, name, None)
    if func is None:
        return None
    try:
        return func(*args)
    except pynvml.NVMLError:
        return None


def placement(start: int, size: int):
    """A GPU instance placement for nvmlDeviceCreateGpuInstanceWithPlacement."""
    return pynvml.c_nvmlGpuInstancePlacement_t(start, size)


def _call(name, *args):
    """Call an NVML getter by pynvml name; None when the GPU, the driver or the installed
    bindings (distributions ship older pynvml releases) do not support it."""
    func = getattr(pynvml, name, None)
    if func is None:
        return None
    try:
        return func(*args)
    except pynvml.NVMLError as exc:
        if exc.value == _ERR_GPU_IS_LOST:
            raise GpuLost() from exc
        return None


def text(value):
    """NVML's bytes as str (pynvml returns either, by release)."""
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value


def _system_info() -> dict:
    cuda = _call("nvmlSystemGetCudaDriverVersion")
    return {
        "version": text(_call("nvmlSystemGetDriverVersion")),
        "nvml_version": text(_call("nvmlSystemGetNVMLVersion")),
        "cuda_driver_version": ("%d.%d" % (cuda // 1000, (cuda % 1000) // 10)) if cuda else None,
    }


def _pci(handle) -> dict:
    info = _call("nvmlDeviceGetPciInfo", handle)
    if info is None:
        return {}
    device_id = info.pciDeviceId
    return {
        "bus_id": text(info.busId).lower(),
        "device_id": "0x%04x" % (device_id >> 16),
        "vendor_id": "0x%04x" % (device_id & 0xFFFF),
        "pci_device_id": "0x%08X" % device_id,
        "subsystem_id": "0x%08X" % info.pciSubSystemId,
    }


def _ecc(handle) -> dict:
    mode = _call("nvmlDeviceGetEccMode", handle)
    if mode is None:
        return {"supported": False}
    result = {"supported": True, "enabled": bool(mode[0]), "enabled_pending": bool(mode[1])}
    for name, counter in (("volatile", 0), ("aggregate", 1)):
        result[name] = {
            "corrected": _call("nvmlDeviceGetTotalEccErrors", handle, 0, counter),
            "uncorrected": _call("nvmlDeviceGetTotalEccErrors", handle, 1, counter),
        }
    return result


def _remapped_rows(handle) -> dict | None:
    rows = _call("nvmlDeviceGetRemappedRows", handle)
    if rows is None:
        return None
    return {"correctable": rows[0], "uncorrectable": rows[1],
            "pending": bool(rows[2]), "failure": bool(rows[3])}


def _nvlink(handle) -> dict:
    links = []
    for link in range(_MAX_NVLINKS):
        try:
            state = pynvml.nvmlDeviceGetNvLinkState(handle, link)
        except pynvml.NVMLError as exc:
            if exc.value == _ERR_GPU_IS_LOST:
                raise GpuLost() from exc
            break  # NOT_SUPPORTED / INVALID_ARGUMENT: past the last link (or no NVLink at all)
        entry = {"link": link, "active": bool(state)}
        if state:
            remote_type = _call("nvmlDeviceGetNvLinkRemoteDeviceType", handle, link)
            entry["remote_type"] = NVLINK_REMOTE_TYPES.get(remote_type, "unknown")
            remote = _call("nvmlDeviceGetNvLinkRemotePciInfo", handle, link)
            entry["remote_bus_id"] = text(remote.busId).lower() if remote is not None else None
        links.append(entry)
    return {"links": links, "total": len(links), "active": sum(1 for x in links if x["active"])}


def _cpu_affinity(handle) -> str | None:
    words = _call("nvmlDeviceGetCpuAffinity", handle, 16)
    if words is None:
        return None
    cpus = [w * 64 + bit for w, mask in enumerate(words) for bit in range(64) if mask >> bit & 1]
    if not cpus:
        return None
    ranges, start, prev = [], cpus[0], cpus[0]
    for cpu in cpus[1:] + [None]:
        if cpu is not None and cpu == prev + 1:
            prev = cpu
            continue
        ranges.append(str(start) if start == prev else "%d-%d" % (start, prev))
        if cpu is not None:
            start = prev = cpu
    return ",".join(ranges)


def profile_name(info) -> str | None:
    """'3g.40gb' from a GPU/compute instance profile info (bindings before the v2 structs have
    no name field). Profile INFO is queried by profile index; instances carry the profile ID."""
    return text(getattr(info, "name", b"")).replace("MIG ", "") or None


def _gpu_instances(handle, get=_call):
    """(profile index, profile info, GPU instance handle) of each GPU instance of a GPU whose MIG
    is on. `get`: _call (a lost GPU raises GpuLost) or quiet."""
    for index in range(_GI_PROFILE_COUNT):
        info = get("nvmlDeviceGetGpuInstanceProfileInfo", handle, index)
        if info is None:
            continue
        count = ctypes.c_uint(0)
        array = (pynvml.c_nvmlGpuInstance_t * max(info.instanceCount, 1))()
        if get("nvmlDeviceGetGpuInstances", handle, info.id, array, ctypes.byref(count)) is None:
            continue
        for i in range(count.value):
            yield index, info, array[i]


def _compute_instance_infos(gpu_instance, get=_call):
    """(compute instance profile info, compute instance info) of each compute instance."""
    for index in range(_CI_PROFILE_COUNT):
        info = get("nvmlGpuInstanceGetComputeInstanceProfileInfo", gpu_instance, index, 0)
        if info is None:
            continue
        count = ctypes.c_uint(0)
        array = (pynvml.c_nvmlComputeInstance_t * max(info.instanceCount, 1))()
        if get("nvmlGpuInstanceGetComputeInstances", gpu_instance, info.id, array, ctypes.byref(count)) is None:
            continue
        for i in range(count.value):
            ci_info = get("nvmlComputeInstanceGetInfo", array[i])
            if ci_info is not None:
                yield info, ci_info


def _compute_instances(gpu_instance) -> list:
    found = [{"id": ci.id, "profile_id": ci.profileId, "profile": profile_name(info)}
             for info, ci in _compute_instance_infos(gpu_instance)]
    return sorted(found, key=lambda c: c["id"])


def _mig(handle) -> dict:
    modes = _call("nvmlDeviceGetMigMode", handle)
    if modes is None:
        return {"capable": False}
    result = {"capable": True, "current": bool(modes[0]), "pending": bool(modes[1]),
              "gpu_instances": [], "devices": []}
    if not modes[0]:
        return result
    for _index, info, gpu_instance in _gpu_instances(handle):
        gi_info = _call("nvmlGpuInstanceGetInfo", gpu_instance)
        if gi_info is None:
            continue
        result["gpu_instances"].append({
            "id": gi_info.id,
            "profile_id": gi_info.profileId,
            "profile": profile_name(info) or "profile-%d" % gi_info.profileId,
            "placement": {"start": gi_info.placement.start, "size": gi_info.placement.size},
            "compute_instances": _compute_instances(gpu_instance),
        })
    result["gpu_instances"].sort(key=lambda g: g["id"])
    for index in range(_call("nvmlDeviceGetMaxMigDeviceCount", handle) or 0):
        mig_handle = _call("nvmlDeviceGetMigDeviceHandleByIndex", handle, index)
        if mig_handle is None:
            continue
        memory = _call("nvmlDeviceGetMemoryInfo", mig_handle)
        result["devices"].append({
            "index": index,
            "uuid": text(_call("nvmlDeviceGetUUID", mig_handle)),
            "gpu_instance_id": _call("nvmlDeviceGetGpuInstanceId", mig_handle),
            "compute_instance_id": _call("nvmlDeviceGetComputeInstanceId", mig_handle),
            "name": text(_call("nvmlDeviceGetName", mig_handle)),
            "memory_total_mib": mib(memory.total) if memory is not None else None,
        })
    return result


# nvmlTemperatureThresholds_t: what nvidia-smi -q prints under "Temperature"
_TEMPERATURE_THRESHOLDS = (("shutdown", 0), ("slowdown", 1), ("memory_max", 2), ("gpu_max", 3))


def _temperature_limits(handle) -> dict:
    """The GPU's shutdown, HW slowdown and max-operating temperatures (None where the GPU or the
    driver does not say)."""
    return {name: _call("nvmlDeviceGetTemperatureThreshold", handle, kind)
            for name, kind in _TEMPERATURE_THRESHOLDS}


def _device(index: int, handle) -> dict:
    cc = _call("nvmlDeviceGetCudaComputeCapability", handle)
    memory = _call("nvmlDeviceGetMemoryInfo", handle)
    power = _call("nvmlDeviceGetPowerUsage", handle)
    limit = _call("nvmlDeviceGetEnforcedPowerLimit", handle)
    persistence = _call("nvmlDeviceGetPersistenceMode", handle)
    reasons = _call("nvmlDeviceGetCurrentClocksEventReasons", handle)
    if reasons is None:  # bindings older than the "clock event" rename
        reasons = _call("nvmlDeviceGetCurrentClocksThrottleReasons", handle)
    utilization = _call("nvmlDeviceGetUtilizationRates", handle)
    numa = _call("nvmlDeviceGetNumaNodeId", handle)
    return {
        "index": index,
        "lost": False,
        "name": text(_call("nvmlDeviceGetName", handle)),
        "uuid": text(_call("nvmlDeviceGetUUID", handle)),
        "serial": text(_call("nvmlDeviceGetSerial", handle)),
        "board_part_number": text(_call("nvmlDeviceGetBoardPartNumber", handle)),
        "vbios_version": text(_call("nvmlDeviceGetVbiosVersion", handle)),
        "minor_number": _call("nvmlDeviceGetMinorNumber", handle),
        "pci": _pci(handle),
        "compute_capability": ("%d.%d" % cc) if cc else None,
        "architecture": architecture_name(_call("nvmlDeviceGetArchitecture", handle),
                                          cc[0] if cc else None, cc[1] if cc else None),
        "memory": {"total_mib": mib(memory.total), "used_mib": mib(memory.used),
                   "free_mib": mib(memory.free)} if memory is not None else None,
        "persistence_mode": bool(persistence) if persistence is not None else None,
        "power": {"draw_w": round(power / 1000.0, 1) if power is not None else None,
                  "limit_w": round(limit / 1000.0, 1) if limit is not None else None},
        "temperature_c": _call("nvmlDeviceGetTemperature", handle, 0),
        "temperature_limits_c": _temperature_limits(handle),
        "clocks": {
            "sm_mhz": _call("nvmlDeviceGetClockInfo", handle, 1),
            "mem_mhz": _call("nvmlDeviceGetClockInfo", handle, 2),
            "sm_max_mhz": _call("nvmlDeviceGetMaxClockInfo", handle, 1),
            "mem_max_mhz": _call("nvmlDeviceGetMaxClockInfo", handle, 2),
        },
        "utilization": {"gpu": utilization.gpu, "memory": utilization.memory}
        if utilization is not None else None,
        "pcie": {
            "gen_current": _call("nvmlDeviceGetCurrPcieLinkGeneration", handle),
            "gen_max": _call("nvmlDeviceGetMaxPcieLinkGeneration", handle),
            "gen_gpu_max": _call("nvmlDeviceGetGpuMaxPcieLinkGeneration", handle),
            "width_current": _call("nvmlDeviceGetCurrPcieLinkWidth", handle),
            "width_max": _call("nvmlDeviceGetMaxPcieLinkWidth", handle),
        },
        "ecc": _ecc(handle),
        "remapped_rows": _remapped_rows(handle),
        "clock_event_reasons": clock_event_reason_names(reasons) if reasons is not None else [],
        "nvlink": _nvlink(handle),
        "numa_node": numa if numa is not None and numa >= 0 else None,
        "cpu_affinity": _cpu_affinity(handle),
        "mig": _mig(handle),
        "xids": [],
    }


def _lost_device(index: int, handle) -> dict:
    """What can still be said about a lost GPU (the PCI identity usually survives)."""
    try:
        pci = _pci(handle)
    except GpuLost:
        pci = {}
    return {"index": index, "lost": True, "name": None, "uuid": None, "pci": pci, "xids": []}


def _topology(handles: list) -> list:
    pairs = []
    for i, (index_a, handle_a) in enumerate(handles):
        for index_b, handle_b in handles[i + 1:]:
            try:
                level = _call("nvmlDeviceGetTopologyCommonAncestor", handle_a, handle_b)
                p2p = _call("nvmlDeviceGetP2PStatus", handle_a, handle_b, 2)
            except GpuLost:
                continue
            entry = {"gpus": [index_a, index_b]}
            entry.update(topology_path(level, p2p == 0))
            pairs.append(entry)
    return pairs


def _listen_for_xids(handles: list, wait_ms: int) -> list:
    """XID events NVML delivers while we listen: [(gpu index, xid)]."""
    if wait_ms <= 0 or not handles:
        return []
    try:
        event_set = pynvml.nvmlEventSetCreate()
    except pynvml.NVMLError:
        return []
    by_address = {}
    events = []
    try:
        for index, handle in handles:
            supported = _call("nvmlDeviceGetSupportedEventTypes", handle) or 0
            if not supported & _XID_EVENT:
                continue
            try:
                pynvml.nvmlDeviceRegisterEvents(handle, _XID_EVENT, event_set)
            except pynvml.NVMLError:
                continue
            by_address[ctypes.cast(handle, ctypes.c_void_p).value] = index
        while by_address and len(events) < _MAX_EVENTS:
            try:
                data = pynvml.nvmlEventSetWait(event_set, wait_ms)
            except pynvml.NVMLError:
                break  # NVML_ERROR_TIMEOUT: nothing more within the window
            if data.eventType & _XID_EVENT:
                events.append((by_address.get(ctypes.cast(data.device, ctypes.c_void_p).value), data.eventData))
    finally:
        try:
            pynvml.nvmlEventSetFree(event_set)
        except pynvml.NVMLError:
            pass
    return events


def read_driver() -> dict:
    """The driver as NVML sees it, without reading any GPU: {'loaded', 'reason', 'message',
    'version', ...}. Without the bindings: loaded False, reason bindings_missing."""
    try:
        with session():
            return dict({"loaded": True, "reason": None, "message": None}, **_system_info())
    except NvmlError as exc:
        if exc.reason is None:
            raise
        return dict(_unopened(exc), version=None)


def read_node(xid_wait_ms: int = 0) -> dict:
    """Snapshot of the node as NVML sees it: {'driver': {...}, 'gpus': [...], 'topology': [...]}.

    Never raises for driver problems: the driver dict says why NVML is unavailable."""
    try:
        with session():
            return _read_node(xid_wait_ms)
    except NvmlError as exc:
        if exc.reason is None:
            raise
        return {"driver": _unopened(exc), "gpus": [], "topology": []}


def _read_node(xid_wait_ms: int) -> dict:
    driver = dict({"loaded": True, "reason": None, "message": None}, **_system_info())
    count = pynvml.nvmlDeviceGetCount()
    gpus, handles = [], []
    for index in range(count):
        try:
            handle = pynvml.nvmlDeviceGetHandleByIndex(index)
        except pynvml.NVMLError as exc:
            # GPU_IS_LOST, or another error (UNKNOWN, INSUFFICIENT_POWER, ...): either way NVML
            # cannot describe the GPU, so it is reported as unreachable, never as a new GPU
            gpus.append({"index": index, "lost": True, "name": None, "uuid": None, "pci": {}, "xids": [],
                         "error": None if exc.value == _ERR_GPU_IS_LOST else str(exc)})
            continue
        try:
            gpus.append(_device(index, handle))
            handles.append((index, handle))
        except GpuLost:
            gpus.append(_lost_device(index, handle))
    by_index = {gpu["index"]: gpu for gpu in gpus}
    for index, xid in _listen_for_xids(handles, xid_wait_ms):
        if index in by_index:
            by_index[index]["xids"].append(xid)
    return {"driver": driver, "gpus": gpus, "topology": _topology(handles)}


# MIG facts as the planner (mig/plan.py) reads them; NVML must be open (session()). NVML reports
# a GPU's profiles only while its MIG is on.

def _placements(handle, profile_id) -> list:
    n = ctypes.c_uint(0)
    try:  # the number first (placements NULL), then the placements
        pynvml.nvmlDeviceGetGpuInstancePossiblePlacements(handle, profile_id, None, ctypes.byref(n))
        array = (pynvml.c_nvmlGpuInstancePlacement_t * max(n.value, 1))()
        pynvml.nvmlDeviceGetGpuInstancePossiblePlacements(handle, profile_id, array, ctypes.byref(n))
    except pynvml.NVMLError:
        return []
    return [[array[i].start, array[i].size] for i in range(n.value)]


def _mig_profiles(handle) -> dict:
    """{name: {id, index, slices, count, memory_mib, placements}} as the GPU reports them (MIG on)."""
    found = {}
    for index in range(_GI_PROFILE_COUNT):
        info = quiet("nvmlDeviceGetGpuInstanceProfileInfo", handle, index)
        if info is None:
            continue
        name = profile_name(info) or "profile-%d" % info.id
        found[name] = {"id": info.id, "index": index, "slices": info.sliceCount, "count": info.instanceCount,
                       "memory_mib": int(info.memorySizeMB), "placements": _placements(handle, info.id)}
    return found


def _processes(handle) -> list:
    procs = []
    for getter, kind in (("nvmlDeviceGetComputeRunningProcesses", "compute"),
                         ("nvmlDeviceGetGraphicsRunningProcesses", "graphics")):
        for p in quiet(getter, handle) or []:
            name = quiet("nvmlSystemGetProcessName", p.pid)
            gi = getattr(p, "gpuInstanceId", _NO_INSTANCE)
            ci = getattr(p, "computeInstanceId", _NO_INSTANCE)
            procs.append({"pid": p.pid, "name": text(name) if name else None, "kind": kind,
                          "gpu_instance": None if gi == _NO_INSTANCE else gi,
                          "compute_instance": None if ci == _NO_INSTANCE else ci})
    return procs


def mig_gpu(index: int) -> dict:
    """One GPU's MIG facts (the planner's GPU shape, see mig/plan.py): mode, the profiles it
    reports (None while MIG is off), its GPU and compute instances with their placements, and the
    processes on it. NvmlError when NVML has no such GPU."""
    handle = call("nvmlDeviceGetHandleByIndex", index)
    pci = quiet("nvmlDeviceGetPciInfo", handle)
    gpu = {"index": index, "uuid": text(quiet("nvmlDeviceGetUUID", handle)),
           "name": text(quiet("nvmlDeviceGetName", handle)),
           "pci_device_id": pci.pciDeviceId if pci is not None else None,
           "pci_bus_id": text(pci.busId) if pci is not None else None,
           "mig_capable": False, "mig_current": False, "mig_pending": False, "profiles": None,
           "gpu_instances": [], "processes": _processes(handle)}
    modes = quiet("nvmlDeviceGetMigMode", handle)
    if modes is None:
        return gpu
    gpu.update(mig_capable=True, mig_current=bool(modes[0]), mig_pending=bool(modes[1]))
    if not modes[0]:
        return gpu
    profiles = _mig_profiles(handle)
    gpu["profiles"] = profiles
    by_id = {p["id"]: n for n, p in profiles.items()}
    for _index, _info, gpu_instance in _gpu_instances(handle, quiet):
        info = quiet("nvmlGpuInstanceGetInfo", gpu_instance)
        if info is None:
            continue
        gpu["gpu_instances"].append({
            "id": info.id, "profile_id": info.profileId,
            "profile": by_id.get(info.profileId, "profile-%d" % info.profileId),
            "placement": [info.placement.start, info.placement.size],
            "compute_instances": sorted(({"id": ci.id, "profile_id": ci.profileId, "slices": ci_profile.sliceCount,
                                          "placement": [ci.placement.start, ci.placement.size]}
                                         for ci_profile, ci in _compute_instance_infos(gpu_instance, quiet)),
                                        key=lambda c: c["id"])})
    gpu["gpu_instances"].sort(key=lambda g: g["id"])
    return gpu


def mig_gpus() -> list:
    """Every GPU's MIG facts (mig_gpu)."""
    return [mig_gpu(index) for index in range(call("nvmlDeviceGetCount"))]


def mig_devices(gpu_index: int, gpu: dict | None = None) -> list:
    """The MIG devices of a GPU: GPU/compute instance ids, profile, placement, UUID. `gpu`: its
    facts as mig_gpu read them just now (else they are read)."""
    handle = call("nvmlDeviceGetHandleByIndex", gpu_index)
    gpu = gpu or mig_gpu(gpu_index)
    placements = {gi["id"]: gi for gi in gpu["gpu_instances"]}
    out = []
    for i in range(quiet("nvmlDeviceGetMaxMigDeviceCount", handle) or 0):
        mig = quiet("nvmlDeviceGetMigDeviceHandleByIndex", handle, i)
        if mig is None:
            continue
        gi_id = quiet("nvmlDeviceGetGpuInstanceId", mig)
        gi = placements.get(gi_id, {})
        out.append({"gpu": gpu_index, "gpu_instance": gi_id,
                    "compute_instance": quiet("nvmlDeviceGetComputeInstanceId", mig),
                    "profile": gi.get("profile"), "placement": gi.get("placement"),
                    "uuid": text(quiet("nvmlDeviceGetUUID", mig))})
    return sorted(out, key=lambda d: (d["gpu_instance"] or 0, d["compute_instance"] or 0))

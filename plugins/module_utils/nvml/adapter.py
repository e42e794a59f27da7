# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one place that talks to NVML (through pynvml, from the nvidia-ml-py package).

It opens NVML, reads plain-data snapshots (dicts of str/int/bool/list) and maps NVML's errors
to the reasons operators know. Nothing here decides anything: health and planning live in their
own pure module_utils."""

from __future__ import annotations

import ctypes
import traceback

__metaclass__ = type

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
_ERR_NOT_SUPPORTED = 3
_ERR_NO_PERMISSION = 4
_ERR_DRIVER_NOT_LOADED = 9
_ERR_TIMEOUT = 10
_ERR_LIBRARY_NOT_FOUND = 12
_ERR_FUNCTION_NOT_FOUND = 13
_ERR_GPU_IS_LOST = 15
_ERR_LIB_RM_VERSION_MISMATCH = 18

_INIT_REASONS = {
    _ERR_LIBRARY_NOT_FOUND: "library_not_found",
    _ERR_DRIVER_NOT_LOADED: "driver_not_loaded",
    _ERR_LIB_RM_VERSION_MISMATCH: "version_mismatch",
    _ERR_NO_PERMISSION: "no_permission",
}

_XID_EVENT = 0x8  # nvmlEventTypeXidCriticalError
_MAX_EVENTS = 256
_GI_PROFILE_COUNT = 0x12  # NVML_GPU_INSTANCE_PROFILE_COUNT
_CI_PROFILE_COUNT = 0x9  # NVML_COMPUTE_INSTANCE_PROFILE_COUNT
_MAX_NVLINKS = 36


class GpuLost(Exception):
    """A GPU answered NVML_ERROR_GPU_IS_LOST."""


class NvmlSession:
    """nvmlInit ... nvmlShutdown as a context manager. `driver` tells whether it opened."""

    def __init__(self):
        self.driver = {"loaded": False, "reason": None, "message": None}

    def __enter__(self):
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError as exc:
            self.driver["reason"] = _INIT_REASONS.get(exc.value, "nvml_error")
            self.driver["message"] = str(exc)
            self.driver["nvml_error_code"] = exc.value
            return self
        self.driver["loaded"] = True
        return self

    def __exit__(self, *exc_info):
        if self.driver["loaded"]:
            try:
                pynvml.nvmlShutdown()
            except pynvml.NVMLError:
                pass
        return False


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


def _text(value):
    if isinstance(value, bytes):
        return value.decode("utf-8", errors="replace")
    return value


def _system_info() -> dict:
    cuda = _call("nvmlSystemGetCudaDriverVersion")
    return {
        "version": _text(_call("nvmlSystemGetDriverVersion")),
        "nvml_version": _text(_call("nvmlSystemGetNVMLVersion")),
        "cuda_driver_version": ("%d.%d" % (cuda // 1000, (cuda % 1000) // 10)) if cuda else None,
    }


def _pci(handle) -> dict:
    info = _call("nvmlDeviceGetPciInfo", handle)
    if info is None:
        return {}
    device_id = info.pciDeviceId
    return {
        "bus_id": _text(info.busId).lower(),
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
            entry["remote_bus_id"] = _text(remote.busId).lower() if remote is not None else None
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


def _profile_name(info) -> str | None:
    """'3g.40gb' from a GPU/compute instance profile info (bindings before the v2 structs have
    no name field). Profile INFO is queried by profile index; instances carry the profile ID."""
    return _text(getattr(info, "name", b"")).replace("MIG ", "") or None


def _compute_instances(gpu_instance) -> list:
    found = []
    for index in range(_CI_PROFILE_COUNT):
        info = _call("nvmlGpuInstanceGetComputeInstanceProfileInfo", gpu_instance, index, 0)
        if info is None:
            continue
        count = ctypes.c_uint(0)
        array = (pynvml.c_nvmlComputeInstance_t * max(info.instanceCount, 1))()
        if _call("nvmlGpuInstanceGetComputeInstances", gpu_instance, info.id, array, ctypes.byref(count)) is None:
            continue
        for i in range(count.value):
            ci_info = _call("nvmlComputeInstanceGetInfo", array[i])
            if ci_info is not None:
                found.append({"id": ci_info.id, "profile_id": ci_info.profileId,
                              "profile": _profile_name(info)})
    return sorted(found, key=lambda c: c["id"])


def _mig(handle) -> dict:
    modes = _call("nvmlDeviceGetMigMode", handle)
    if modes is None:
        return {"capable": False}
    result = {"capable": True, "current": bool(modes[0]), "pending": bool(modes[1]),
              "gpu_instances": [], "devices": []}
    if not modes[0]:
        return result
    for index in range(_GI_PROFILE_COUNT):
        info = _call("nvmlDeviceGetGpuInstanceProfileInfo", handle, index)
        if info is None:
            continue
        count = ctypes.c_uint(0)
        array = (pynvml.c_nvmlGpuInstance_t * max(info.instanceCount, 1))()
        if _call("nvmlDeviceGetGpuInstances", handle, info.id, array, ctypes.byref(count)) is None:
            continue
        for i in range(count.value):
            gi_info = _call("nvmlGpuInstanceGetInfo", array[i])
            if gi_info is None:
                continue
            result["gpu_instances"].append({
                "id": gi_info.id,
                "profile_id": gi_info.profileId,
                "profile": _profile_name(info) or "profile-%d" % gi_info.profileId,
                "placement": {"start": gi_info.placement.start, "size": gi_info.placement.size},
                "compute_instances": _compute_instances(array[i]),
            })
    result["gpu_instances"].sort(key=lambda g: g["id"])
    for index in range(_call("nvmlDeviceGetMaxMigDeviceCount", handle) or 0):
        mig_handle = _call("nvmlDeviceGetMigDeviceHandleByIndex", handle, index)
        if mig_handle is None:
            continue
        memory = _call("nvmlDeviceGetMemoryInfo", mig_handle)
        result["devices"].append({
            "index": index,
            "uuid": _text(_call("nvmlDeviceGetUUID", mig_handle)),
            "gpu_instance_id": _call("nvmlDeviceGetGpuInstanceId", mig_handle),
            "compute_instance_id": _call("nvmlDeviceGetComputeInstanceId", mig_handle),
            "name": _text(_call("nvmlDeviceGetName", mig_handle)),
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
        "name": _text(_call("nvmlDeviceGetName", handle)),
        "uuid": _text(_call("nvmlDeviceGetUUID", handle)),
        "serial": _text(_call("nvmlDeviceGetSerial", handle)),
        "board_part_number": _text(_call("nvmlDeviceGetBoardPartNumber", handle)),
        "vbios_version": _text(_call("nvmlDeviceGetVbiosVersion", handle)),
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
    if not HAS_PYNVML:
        return {"loaded": False, "reason": "bindings_missing", "message": "pynvml is not installed", "version": None}
    with NvmlSession() as session:
        driver = session.driver
        driver.update(_system_info() if driver["loaded"] else {"version": None})
        return driver


def read_node(xid_wait_ms: int = 0) -> dict:
    """Snapshot of the node as NVML sees it: {'driver': {...}, 'gpus': [...], 'topology': [...]}.

    Never raises for driver problems: the driver dict says why NVML is unavailable."""
    with NvmlSession() as session:
        driver = session.driver
        if not driver["loaded"]:
            return {"driver": driver, "gpus": [], "topology": []}
        driver.update(_system_info())
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

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""driver_status's service: the installed driver against the loaded one (read through
host/driver_state and host/kernel, NVML where procfs/sysfs show no module), the verification of
a ready driver through NVML, and the driver state record, read and written through host/records.

The record is read before anything else: one that cannot be used (not a file, not UTF-8, not
JSON, not a JSON object) raises records.RecordError naming the file and the fix."""

from __future__ import annotations

__metaclass__ = type

from ansible_collections.gpuops.nvidia.plugins.module_utils.host import driver_state
from ansible_collections.gpuops.nvidia.plugins.module_utils.host import kernel
from ansible_collections.gpuops.nvidia.plugins.module_utils.host import records
from ansible_collections.gpuops.nvidia.plugins.module_utils.nvml import adapter as nvml

WHAT = "driver state record"
NOT_ASKED = {"loaded": False, "version": None, "reason": "not asked"}
NO_BINDINGS = "verify_gpus needs the NVML Python bindings (nvidia-ml-py, Python module pynvml) on the node"


def read_record(path: str) -> str | None:
    """The record's text as it is now (None: there is none or no path); raises RecordError."""
    return records.read(path, dict, WHAT)[0] if path else None


def loaded_version(kernel_module: dict, through_nvml: dict) -> str | None:
    """The loaded driver: the kernel module's version, else the driver NVML answers with (where
    procfs/sysfs do not show the module - a container sees the host's, or none)."""
    return kernel_module["version"] or (through_nvml["version"] if through_nvml["loaded"] else None)


def read(root: str, ask_nvml: bool, run) -> dict:
    """driver_status's result: the packages (run: how commands run), the kernel's module, NVML's
    driver when asked, DKMS and the decision (state, message, reboot_required, can_load_module)."""
    packages, held = driver_state.read_installed(root, run)
    installed, source = driver_state.installed_driver_version(packages)
    loaded = kernel.loaded_module(root)
    through_nvml = nvml.read_driver() if ask_nvml else NOT_ASKED
    version = loaded_version(loaded, through_nvml)
    loading = kernel.module_loading(root)
    decision = driver_state.decide(installed, version, loading["possible"], loading["reason"])
    return dict(
        changed=False,
        installed_version=installed,
        installed_from=source,
        loaded_version=version,
        kernel_module=loaded,
        nvml={key: through_nvml.get(key) for key in ("loaded", "version", "reason", "message")},
        packages=packages,
        held=held,
        dkms=driver_state.read_dkms_tree(root),
        **decision
    )


def verify_problem(driver: dict, count: int, installed: str | None, wanted: int) -> str | None:
    """What is wrong with a ready driver as NVML answers (driver, number of GPUs), or None."""
    if driver.get("loaded") and driver.get("version") == installed and count >= wanted:
        return None
    return "the driver is loaded but NVML reports %s with %d GPU(s); expected %s with %d" % (
        driver.get("version") or "no driver", count, installed, wanted)


def verify(result: dict, wanted: int) -> str | None:
    """A ready driver must answer through NVML with the installed version and see the GPUs:
    result gains gpus_seen; returns what is wrong, or None."""
    if not nvml.HAS_PYNVML:
        return NO_BINDINGS
    node = nvml.read_node()
    result["gpus_seen"] = len(node["gpus"])
    return verify_problem(node["driver"], result["gpus_seen"], result["installed_version"], wanted)


def record_text(result: dict, keys: list) -> str:
    """The record of the state: the result's keys asked for."""
    return records.dumps({key: result.get(key) for key in keys})


def write_record(module, result: dict, path: str, keys: list, before: str | None) -> None:
    """The record written when it changed (check mode, diff: host/records)."""
    records.write(module, result, path, WHAT, before, record_text(result, keys))

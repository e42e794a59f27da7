# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the gpuops.nvidia.mig and mig_layouts modules do, behind their argspecs: load the
config, read the MIG profile record (carried over from an older release's root), open NVML once,
plan, then apply (with a GPU reset through host/commands when allowed), and keep the record.

Every failure is a MigError whose message is the module's and whose result is what it returns."""

from __future__ import annotations

import json

__metaclass__ = type

from ansible.module_utils.basic import missing_required_lib

from ansible_collections.gpuops.nvidia.plugins.module_utils.host import commands, files, records
from ansible_collections.gpuops.nvidia.plugins.module_utils.mig import apply as mig_apply
from ansible_collections.gpuops.nvidia.plugins.module_utils.mig import config as mig_config
from ansible_collections.gpuops.nvidia.plugins.module_utils.mig import plan as mig_plan
from ansible_collections.gpuops.nvidia.plugins.module_utils.nvml import adapter as nvml
from ansible_collections.gpuops.nvidia.plugins.module_utils.nvml import mig as mig_nvml

try:
    import yaml
    HAS_YAML = True
except ImportError:
    yaml = None
    HAS_YAML = False

RECORD = "MIG profile record"


class MigError(Exception):
    """The module fails: .message, and .result (what it returns besides msg)."""

    def __init__(self, message, result=None):
        Exception.__init__(self, message)
        self.message = message
        self.result = result if result is not None else {"changed": False}


def parse_config(text: str, path: str):
    """A mig-parted config file's document (JSON, else YAML)."""
    try:
        return json.loads(text)
    except ValueError:
        pass
    if not HAS_YAML:
        raise MigError(missing_required_lib("PyYAML (the MIG config %s is not JSON)" % path))
    try:
        return yaml.safe_load(text)
    except yaml.YAMLError as exc:
        raise MigError("the MIG config %s is not valid YAML: %s" % (path, exc))


def load_config(path: str | None, inline: dict | None):
    """The config document: the file's, the inline one, or None (the generated layouts).
    MigError for a file that cannot be read or parsed, or a document of the wrong shape."""
    if path is None:
        document = inline
    else:
        try:
            text = records.read_text(path, "MIG config")
        except records.RecordError as exc:
            raise MigError(str(exc))
        if text is None:
            raise MigError("the MIG config %s does not exist: give the path of a mig-parted config" % path)
        document = parse_config(text, path)
        if document is None:
            raise MigError("the MIG config %s is empty: give it a mig-parted config (version: v1, mig-configs: ...)"
                           % path)
    errors = mig_config.config_errors(document) if document is not None else []
    if errors:
        raise MigError("%s: %s" % ("the MIG config %s" % path if path else "MIG config", "; ".join(errors)))
    return document


def read_profiles(module, path: str, root: str = "/", carry: bool = True) -> tuple:
    """(text, record) of the MIG profile record; (None, {}) without one. carry: a record an older
    release kept under its root is moved to path (records.read_carried); else it is only read
    where it is. MigError for a record that cannot be used."""
    if not path:
        return None, {}
    try:
        if carry:
            text, data = records.read_carried(module, path, what=RECORD, root=root)
        else:
            text, data = None, None
            for candidate in [path] + records.legacy_paths(path):
                text, data = records.read(records.under(root, candidate), what=RECORD)
                if text is not None:
                    break
    except records.RecordError as exc:
        raise MigError("%s; nothing was changed" % exc)
    return text, data or {}


def save_profiles(module, path: str, root: str, before: dict, record: dict) -> None:
    """Keep the profiles seen (not in check mode); a record that cannot be written is a warning:
    it only helps later check-mode runs."""
    if not path or record == before or module.check_mode:
        return
    target = records.under(root, path)
    problem = files.check_writable(target)
    if problem is None:
        try:
            files.write_atomic(module, target, records.dumps(record), mode=0o644)
            return
        except OSError as exc:
            problem = exc.strerror or str(exc)
    module.warn("could not record the MIG profiles in %s: %s" % (target, problem))


def reset_gpu(module, gpu: dict) -> tuple:
    """(ok, output) of resetting one GPU with nvidia-smi -r."""
    smi = module.get_bin_path("nvidia-smi")
    if not smi:
        return False, "nvidia-smi is not installed: the GPU cannot be reset"
    rc, out, err = commands.run(module, [smi, "-r", "-i", gpu["pci_bus_id"] or str(gpu["index"])])
    return rc == 0, (out + err).strip()


def _nvml_failed(exc, needs: str) -> MigError:
    if exc.reason is None:  # opened, then failed
        return MigError("NVML failed: %s; run again once the cause is fixed" % exc)
    return MigError("NVML cannot be opened (%s): %s" % (exc, needs))


def _result(result: dict, diff: bool) -> dict:
    if not diff:
        result.pop("diff", None)
    return result


def run(module) -> dict:
    """gpuops.nvidia.mig: plan (check mode) or apply config_name; the module's result."""
    params = module.params
    document = load_config(params["config_file"], params["config"])
    path, root, name = params["profile_record"], params["host_root"], params["config_name"]
    reset = (lambda gpu: reset_gpu(module, gpu)) if params["allow_gpu_reset"] else None
    try:
        with nvml.session():
            _text, before = read_profiles(module, path, root)
            if module.check_mode:
                result, record = mig_apply.plan_only(document, name, before)
                result["changed"] = not result["matches"]
            else:
                result, record = mig_apply.apply(document, name, before, reset=reset)
    except nvml.NvmlError as exc:
        raise _nvml_failed(exc, "the NVIDIA driver must be loaded before MIG can be configured")
    except mig_apply.ApplyError as exc:
        raise MigError(exc.message, _result(exc.result, module._diff))  # pylint: disable=protected-access
    save_profiles(module, path, root, before, record)
    return _result(result, module._diff)  # pylint: disable=protected-access


def layouts(module) -> dict:
    """gpuops.nvidia.mig_layouts: the usual named layouts of the node's GPUs (read-only: an older
    release's record is read where it is)."""
    _text, before = read_profiles(module, module.params["profile_record"], carry=False)
    try:
        with nvml.session():
            gpus, _record = mig_nvml.read_node(before)
    except nvml.NvmlError as exc:
        raise _nvml_failed(exc, "the NVIDIA driver must be loaded")
    config = mig_plan.named_layouts(gpus)
    return {"changed": False, "config": config, "names": sorted(config["mig-configs"]),
            "unknown": [g["index"] for g in gpus if g["mig_capable"] and g["profiles"] is None]}

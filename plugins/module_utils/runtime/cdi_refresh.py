# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the gpuops.nvidia.cdi_spec module does behind its argspec: compare the CDI spec with the
GPUs NVML reports (cdi.py), pick the way to regenerate it (nvidia-ctk cdi generate, or the
toolkit's nvidia-cdi-refresh units with their environment file), regenerate a stale spec and
check it again. run() returns the module's result, or fails the module before anything changed."""

from __future__ import annotations

__metaclass__ = type

from ansible.module_utils.basic import missing_required_lib

from ansible_collections.gpuops.nvidia.plugins.module_utils.host import commands
from ansible_collections.gpuops.nvidia.plugins.module_utils.host import files
from ansible_collections.gpuops.nvidia.plugins.module_utils.nvml import adapter as nvml
from ansible_collections.gpuops.nvidia.plugins.module_utils.report import findings
from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime import cdi

REFRESH_SERVICE = "nvidia-cdi-refresh.service"
REFRESH_PATH = "nvidia-cdi-refresh.path"


def _check(params):
    node = nvml.read_node()
    return node, cdi.check_node(node["gpus"], params["spec_dirs"], params["kind"], params["check_device_nodes"])


def _load_state(module) -> str:
    rc, out, _err = commands.run(module, ["systemctl", "show", "-p", "LoadState", "--value", REFRESH_SERVICE])
    return out.strip() if rc == 0 else "unknown"


def _refresh_units_problem(state: str) -> str | None:
    """Why the toolkit's refresh service cannot regenerate the spec, or None."""
    if state in ("loaded",):
        return None
    return ("%s is %s: the refresh units come with the NVIDIA Container Toolkit 1.18 and later; install toolkit "
            "1.18 or later, or regenerate the spec with nvidia-ctk cdi generate (method=generate)"
            % (REFRESH_SERVICE, state or "not installed"))


def _set_refresh_env(module, params, result):
    path = params["refresh_env_file"]
    before = files.read_text(path)
    after = files.with_env(before, {str(k): str(v) for k, v in params["refresh_env"].items()})
    if after == before:
        return
    problem = files.check_writable(path)
    if problem:
        module.fail_json(msg="cannot set the refresh service's environment in %s: %s" % (path, problem))
    result["refresh_units"].append("environment")
    if not module.check_mode:
        files.write_atomic(module, path, after, mode=0o644, keep_backup=True)
    if module._diff:  # pylint: disable=protected-access
        result["diff"].append(files.diff_entry(path, before, after))


def _enable_refresh_units(module, result):
    """nvidia-cdi-refresh.service enabled, nvidia-cdi-refresh.path enabled and started."""
    for unit, start in ((REFRESH_SERVICE, False), (REFRESH_PATH, True)):
        rc, out, _err = commands.run(module, ["systemctl", "is-enabled", unit])
        if out.strip() not in ("enabled", "enabled-runtime", "static", "alias", "indirect", "generated"):
            result["refresh_units"].append("enabled " + unit)
            if not module.check_mode:
                _systemctl(module, "enable", unit)
        if start:
            rc, out, _err = commands.run(module, ["systemctl", "is-active", unit])
            if rc != 0 or out.strip() != "active":
                result["refresh_units"].append("started " + unit)
                if not module.check_mode:
                    _systemctl(module, "start", unit)


def _systemctl(module, verb, unit):
    rc, out, err = commands.run(module, ["systemctl", verb, unit])
    if rc != 0:
        module.fail_json(msg="systemctl %s %s failed (exit %d): %s" % (verb, unit, rc, (err or out).strip()[-2000:]))


def _regenerate(module, params):
    if params["method"] == "generate":
        argv = ["nvidia-ctk", "cdi", "generate", "--mode=%s" % params["generate_mode"], "--output=%s" % params["output"]]
    else:
        argv = ["systemctl", "restart", REFRESH_SERVICE]
    if not module.get_bin_path(argv[0]):
        module.fail_json(msg="%s is not installed: the NVIDIA Container Toolkit provides it; install the toolkit "
                             "before its CDI spec is generated" % argv[0])
    rc, out, err = commands.run(module, argv)
    if rc != 0:
        module.fail_json(msg="%s failed (exit %d): %s" % (" ".join(argv), rc, (err or out).strip()[-2000:]))


def _method(module, params, result):
    """The method in effect (auto resolved), after setting the refresh units' environment."""
    method = params["method"]
    if method in ("auto", "refresh_units"):
        state = _load_state(module)
        if method == "auto":
            method = "refresh_units" if state == "loaded" else "generate"
        problem = _refresh_units_problem(state) if method == "refresh_units" else None
        if problem:
            module.fail_json(msg=problem)
    if method == "refresh_units" and params["refresh_env"]:
        _set_refresh_env(module, params, result)
    return method


def _message(module, result, before, report, regenerate, method):
    if not result["driver"].get("loaded"):
        result["message"] = "no CDI spec checked or generated: NVML is not usable (%s)" % result["driver"].get("message")
        module.warn("%s; %s" % (result["message"], "nvidia-cdi-refresh generates it when the driver is loaded (at boot "
                                "or after its install)" if method == "refresh_units" else
                                "run this again once the driver is loaded (after the reboot)"))
    elif regenerate:
        result["message"] = "the CDI spec %s regenerated (%s): it listed %d of the %d device(s) NVML reports" % (
            "would be" if module.check_mode else "was", method, len(set(before["listed"]) & set(before["expected"])),
            len(before["expected"]))
    else:
        result["message"] = "the CDI spec lists the %d device(s) NVML reports" % len(report["expected"]) \
            if not report["stale"] else "the CDI spec is stale and was not regenerated"


def run(module):
    """The cdi_spec module's work: its result (fail_json when the spec is wrong and fail_on_errors)."""
    if not nvml.HAS_PYNVML:
        module.fail_json(msg=missing_required_lib("nvidia-ml-py (Python module pynvml)"),
                         exception=nvml.PYNVML_IMPORT_ERROR)
    if not cdi.HAS_YAML:
        module.fail_json(msg=missing_required_lib("PyYAML"))
    result = {"refresh_units": [], "diff": []}
    method = _method(module, module.params, result)
    params = dict(module.params, method=method)
    node, report = _check(params)
    before = report
    loaded = node["driver"].get("loaded")
    regenerate = bool(loaded and report["stale"] and not report["blocked"] and method != "check")
    if regenerate and not module.check_mode:
        _regenerate(module, params)
        node, report = _check(params)
    if method == "refresh_units" and params["enable_refresh_units"]:
        _enable_refresh_units(module, result)
    result.update(report, changed=regenerate or bool(result["refresh_units"]), regenerated=regenerate,
                  stale_before=before["stale"], driver=node["driver"], method=method)
    _message(module, result, before, report, regenerate, method)
    if regenerate and module._diff:  # pylint: disable=protected-access
        after = report["expected"] if module.check_mode else report["listed"]
        header = "CDI devices (%s)" % params["kind"]
        result["diff"].append({"before_header": header, "after_header": header,
                               "before": "".join(name + "\n" for name in before["listed"]),
                               "after": "".join(name + "\n" for name in after)})
    if not result["diff"]:
        del result["diff"]
    errors = [item for item in report["findings"] if item["severity"] == "error"]
    if params["fail_on_errors"] and loaded and errors and not module.check_mode:
        result["msg"] = ("the CDI spec does not match the GPUs NVML reports%s: %s" % (
            " (checked after regenerating it)" if regenerate else "", "; ".join(findings.lines(errors))))
        module.fail_json(**result)
    return result

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Pre-flight checks for a driver plan: will this host take this driver branch, module flavour,
CUDA release and MIG plan? Pure: facts and the plan in, findings and a recommendation out.

Findings have the collection's one shape (module_utils/report/findings.py). Every problem is
reported, not only the first."""

from __future__ import annotations

import re

__metaclass__ = type

from ansible_collections.gpuops.nvidia.plugins.module_utils.gpu import compat
from ansible_collections.gpuops.nvidia.plugins.module_utils.report import findings as fnd
from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime import detect

SOURCES = ("distro", "cuda_repo")

# Driver branches each distribution packages itself (source: distro).
DISTRO_BRANCHES = {
    ("debian", "12"): (535,),
    ("debian", "13"): (550,),
    ("ubuntu", "22.04"): (470, 535, 550, 570, 575, 580),
    ("ubuntu", "24.04"): (535, 550, 570, 575, 580),
}
# Releases NVIDIA's CUDA repositories serve (source: cuda_repo).
CUDA_REPO_RELEASES = {
    "debian": ("12", "13"),
    "ubuntu": ("22.04", "24.04"),
    "rhel": ("8", "9", "10"),
}
RHEL_LIKE = ("rhel", "rocky", "almalinux", "centos", "ol")


def os_family(os_info: dict) -> str:
    ident = os_info.get("id", "")
    if ident in RHEL_LIKE or "rhel" in os_info.get("id_like", []):
        return "rhel"
    return ident


def _major_release(os_info: dict) -> str:
    version = os_info.get("version_id", "")
    return version if os_family(os_info) == "ubuntu" else version.split(".")[0]


def _finding(code, severity, message, fix, **extra):
    gpus = extra.get("gpus")
    subject = extra.pop("subject", None) or (("GPU %s" % ", ".join(str(i) for i in gpus)) if gpus else "node")
    return fnd.finding(code, severity, message, fix, subject=subject, **extra)


def _models(gpus: list) -> list:
    """One entry per distinct (name, architecture), with the GPU indexes, in first-seen order."""
    models = {}
    for position, gpu in enumerate(gpus):
        key = (gpu.get("name") or "unknown NVIDIA GPU", gpu.get("architecture", "unknown"))
        models.setdefault(key, []).append(gpu.get("index", position))
    return [{"name": key[0], "architecture": key[1], "gpus": value} for key, value in models.items()]


def _label(model: dict) -> str:
    return "%s (%s)" % (model["name"], model["architecture"].capitalize())


def check_branch(plan: dict, models: list, findings: list) -> int | None:
    try:
        branch = compat.parse_branch(plan["driver_branch"])
    except ValueError as exc:
        findings.append(_finding("branch_invalid", "error", str(exc),
                                 "set driver_branch to a branch number such as 580"))
        return None
    info = compat.branch_info(branch, plan.get("today"))
    if not info["known"]:
        findings.append(_finding(
            "branch_unknown", "error",
            "driver branch R%d is not a published NVIDIA datacenter branch (known: %s)"
            % (branch, ", ".join(str(b) for b in sorted(compat.BRANCHES))),
            "choose a published branch; R580 and R620 are long-term support branches"))
        return None
    if info["eol_passed"]:
        findings.append(_finding(
            "branch_end_of_life", "warning",
            "driver branch R%d (%s) reached its end of life in %s" % (branch, info["kind"], info["eol"]),
            "plan the move to a supported long-term branch (R580 or R620)"))
    for model in models:
        arch = model["architecture"]
        if arch == "unknown" or compat.architecture_supports_branch(arch, branch):
            continue
        supported = compat.branches_for_architecture(arch)
        findings.append(_finding(
            "branch_unsupported_gpu", "error",
            "%s needs driver branch %s; branch R%d was requested. Supported branches for %s: %s"
            % (_label(model), compat.describe_branch_range(arch), branch, arch.capitalize(),
               ", ".join("R%d" % b for b in supported) or "none known"),
            "set driver_branch to one of %s" % ", ".join(str(b) for b in supported),
            gpus=model["gpus"], architecture=arch))
    return branch


def check_driver_version(plan: dict, branch: int, findings: list) -> None:
    """An exact driver_version must be a whole NVIDIA version on the requested branch: a bare
    "580" would write an apt pin ("580-*") that matches no package, and a version of another
    branch cannot be pinned together with the branch."""
    version = plan.get("driver_version")
    if not version:
        return
    if not re.match(r"^\d{3}\.\d+(\.\d+)?$", str(version)):
        findings.append(_finding(
            "driver_version_invalid", "error",
            "driver_version %r is not a whole driver version (NVIDIA's look like 580.95.05 or 570.26)" % (version,),
            "set driver_version to an exact version such as %d.95.05, or leave it empty to follow branch R%d"
            % (branch, branch), subject="driver_version"))
    elif int(str(version).split(".", maxsplit=1)[0]) != branch:
        findings.append(_finding(
            "driver_version_off_branch", "error",
            "driver_version %s is not on the requested branch R%d" % (version, branch),
            "set driver_branch to %s, or a driver_version of branch %d" % (str(version).split(".", maxsplit=1)[0], branch),
            subject="driver_version"))


def plan_action(plan: dict, branch: int, installed: str | None, loaded: str | None, findings: list) -> dict:
    """What the run will do to the driver, compared with what the host has: install (nothing
    there), keep, update (another version of the same branch, only with driver_version), or
    change_branch - an upgrade that drains and reboots a node, refused unless
    allow_branch_change says so."""
    current = installed or loaded
    version = plan.get("driver_version") or None
    have = []
    if installed:
        have.append("installed %s" % installed)
    if loaded and loaded != installed:
        have.append("loaded %s" % loaded)
    elif loaded:
        have[-1] += " (loaded)"
    have = ", ".join(have) or "no driver"
    wanted = "driver %s" % version if version else "branch R%d" % branch
    if current is None:
        action, message = "install", "no NVIDIA driver on the host: the run installs %s" % wanted
    elif installed is None and compat.parse_branch(current) == branch:
        action, message = "install", "%s but no driver package: the run installs %s" % (have, wanted)
    elif compat.parse_branch(current) != branch:
        action = "change_branch"
        message = "%s; %s was requested: the run would change the driver branch" % (have, wanted)
        if plan.get("allow_branch_change"):
            findings.append(_finding(
                "driver_branch_change", "warning", message + " (allowed by allow_branch_change)",
                "drain the node first: the new branch runs after a reboot", subject="driver"))
        else:
            findings.append(_finding(
                "driver_branch_change", "error", message + ", which is an upgrade and needs to be asked for",
                "set driver_branch to %d to keep the node's driver, or allow the branch change explicitly "
                "(allow_branch_change; role variable driver_allow_branch_change) after draining the node"
                % compat.parse_branch(current), subject="driver"))
    elif version and version != installed:
        action, message = "update", "%s; the run moves the driver to %s (same branch R%d)" % (have, version, branch)
        findings.append(_finding("driver_update_planned", "info", message,
                                 "nothing to do; the new version runs after a reboot", subject="driver"))
    else:
        action, message = "keep", "%s: the run keeps it (branch R%d)" % (have, branch)
    return {"action": action, "installed": installed, "loaded": loaded, "branch": branch, "version": version,
            "message": message}


def check_flavour(plan: dict, models: list, branch: int, findings: list) -> str | None:
    requested = plan.get("kernel_module_type", "auto")
    flavour, reason = compat.choose_flavour(requested, models, branch)
    if flavour is None:
        findings.append(_finding("flavour_conflict", "error",
                                 "no kernel module flavour fits every GPU: %s" % reason,
                                 "split these GPUs into hosts of one generation"))
        return None
    for model in models:
        arch = model["architecture"]
        if flavour == "proprietary" and compat.open_modules_required(arch, model["name"]):
            findings.append(_finding(
                "flavour_open_required", "error",
                "%s only runs with the open kernel modules; kernel_module_type=proprietary was requested"
                % _label(model),
                "set kernel_module_type to open (or auto)", gpus=model["gpus"]))
        if flavour == "open" and arch not in compat.OPEN_CAPABLE and arch != "unknown":
            findings.append(_finding(
                "flavour_open_unsupported", "error",
                "%s is not supported by the open kernel modules (they need Turing or newer); "
                "kernel_module_type=open was requested" % _label(model),
                "set kernel_module_type to proprietary (or auto)", gpus=model["gpus"]))
    if flavour == "open" and branch < compat.OPEN_MODULES_FIRST_BRANCH:
        findings.append(_finding(
            "flavour_open_too_old", "error",
            "the open kernel modules start with R%d; branch R%d was requested"
            % (compat.OPEN_MODULES_FIRST_BRANCH, branch),
            "use the proprietary modules with this branch, or a newer branch"))
    return flavour


def check_cuda(plan: dict, models: list, branch: int, findings: list) -> None:
    cuda = plan.get("cuda_version")
    if not cuda:
        return
    try:
        need = compat.cuda_requirement(str(cuda))
    except ValueError as exc:
        findings.append(_finding("cuda_unknown", "error", str(exc),
                                 "set cuda_version to a released CUDA version such as 12.8 or 13.0"))
        return
    exact = plan.get("driver_version")
    if not compat.branch_satisfies(branch, need["min_driver"], exact):
        asked = "driver %s" % exact if exact else "branch %d" % branch
        floor = need["minor_compat_floor"]
        if floor and compat.branch_satisfies(branch, floor, exact):
            findings.append(_finding(
                "cuda_minor_compat", "warning",
                "CUDA %s needs driver >= %s; %s was requested, which runs CUDA %s only through "
                "minor-version compatibility (no PTX JIT of newer code)"
                % (need["cuda"], need["min_driver"], asked, need["cuda"]),
                "use branch R%d or newer for full CUDA %s support"
                % (compat.version_tuple(need["min_driver"])[0], need["cuda"])))
        else:
            findings.append(_finding(
                "cuda_driver_too_old", "error",
                "CUDA %s needs driver >= %s; %s was requested" % (need["cuda"], need["min_driver"], asked),
                "use branch R%d or newer" % compat.version_tuple(need["min_driver"])[0]))
    major = compat.version_tuple(need["cuda"])[0]
    for model in models:
        last = compat.CUDA_LAST_MAJOR.get(model["architecture"])
        if last is not None and major > last:
            findings.append(_finding(
                "cuda_drops_gpu", "error",
                "CUDA %s no longer supports %s; CUDA %d is the last release for it"
                % (need["cuda"], _label(model), last),
                "build the workloads with CUDA %d" % last, gpus=model["gpus"]))


def check_mig(plan: dict, models: list, branch: int, findings: list) -> None:
    if not plan.get("mig_required"):
        return
    for model in models:
        minimum = compat.mig_min_driver(model["name"])
        if minimum is None or model.get("mig_capable") is False:
            findings.append(_finding(
                "mig_unsupported", "error",
                "%s does not support MIG; mig_required was requested" % _label(model),
                "run MIG workloads on A100, A30, H100, H200, B200 or newer datacenter GPUs; "
                "use time-slicing or MPS to share this GPU", gpus=model["gpus"]))
        elif not compat.branch_satisfies(branch, minimum, plan.get("driver_version")):
            findings.append(_finding(
                "mig_driver_too_old", "error",
                "MIG on %s needs driver >= %s; branch R%d was requested" % (_label(model), minimum, branch),
                "use branch R%d or newer" % compat.version_tuple(minimum)[0], gpus=model["gpus"]))


def check_os(plan: dict, host: dict, branch: int, findings: list) -> None:
    info = host["os"]
    family, release = os_family(info), _major_release(info)
    name = info.get("pretty_name") or "%s %s" % (info.get("id"), info.get("version_id"))
    source = plan["source"]
    if source == "distro":
        branches = DISTRO_BRANCHES.get((family, release))
        if branches is None:
            findings.append(_finding(
                "os_unsupported", "error",
                "%s is not supported with source=distro (supported: %s)"
                % (name, ", ".join("%s %s" % key for key in sorted(DISTRO_BRANCHES))),
                "use source=cuda_repo, or a supported distribution"))
        elif branch not in branches:
            findings.append(_finding(
                "os_branch_unavailable", "error",
                "%s packages driver branch %s only; branch R%d was requested"
                % (name, ", ".join("R%d" % b for b in branches), branch),
                "use source=cuda_repo for R%d, or driver_branch=%d" % (branch, branches[-1])))
    elif release not in CUDA_REPO_RELEASES.get(family, ()):
        findings.append(_finding(
            "os_unsupported", "error",
            "NVIDIA's CUDA repositories do not serve %s (served: %s)"
            % (name, "; ".join("%s %s" % (k, ", ".join(v)) for k, v in sorted(CUDA_REPO_RELEASES.items()))),
            "use a supported release, or source=distro where the distribution packages the driver"))


def builds_with_dkms(plan: dict, host: dict) -> bool:
    """Ubuntu's own packages bring precompiled, signed modules; every other path builds the
    module on the host with DKMS."""
    return not (plan["source"] == "distro" and os_family(host["os"]) == "ubuntu")


def check_host(plan: dict, host: dict, devices: dict, branch: int, findings: list) -> None:
    dkms = builds_with_dkms(plan, host)
    release = host["kernel"]["release"]
    if dkms and not host["kernel"]["headers"]:
        findings.append(_finding(
            "kernel_headers_missing", "warning",
            "the headers of the running kernel %s are not installed; DKMS needs them to build the "
            "NVIDIA module" % release,
            "install linux-headers-%s (Debian/Ubuntu; kernel-devel-%s on RHEL) - the driver role does "
            "with driver_kernel_headers: true - or boot a kernel whose headers the package "
            "repositories still carry" % (release, release), subject="kernel"))
    if host.get("secure_boot") and dkms:
        findings.append(_finding(
            "secure_boot_unsigned_module", "error",
            "Secure Boot is enabled and the chosen source builds an unsigned module with DKMS; the "
            "kernel would refuse to load it",
            "enroll a machine owner key (MOK) that DKMS signs with, or on Ubuntu use source=distro "
            "(Canonical's signed precompiled modules)"))
    if host["nouveau"]["loaded"]:
        findings.append(_finding(
            "nouveau_loaded", "warning",
            "the nouveau driver is loaded and holds the GPUs",
            "the driver role blacklists nouveau and rebuilds the initramfs; a reboot is needed"))
    elif not host["nouveau"]["blacklisted"]:
        findings.append(_finding(
            "nouveau_not_blacklisted", "info",
            "nouveau is not blacklisted in modprobe.d",
            "the driver role blacklists it before the NVIDIA module loads"))
    if host.get("runfile_install"):
        findings.append(_finding(
            "runfile_driver_present", "error",
            "a driver installed with NVIDIA's .run installer is present (%s); packages would "
            "conflict with it" % host["runfile_install"],
            "remove it first with `nvidia-uninstall --silent`, then reboot"))
    if devices.get("nvswitches"):
        if plan["source"] == "distro" and os_family(host["os"]) == "debian":
            findings.append(_finding(
                "fabric_manager_unavailable", "error",
                "%d NVSwitches found: they need nvidia-fabricmanager at the driver's exact version, "
                "which Debian does not package" % len(devices["nvswitches"]),
                "use source=cuda_repo on NVSwitch (HGX) systems"))
        else:
            findings.append(_finding(
                "fabric_manager_required", "info",
                "%d NVSwitches found: nvidia-fabricmanager-%d will be installed at exactly the "
                "driver's version" % (len(devices["nvswitches"]), branch),
                "nothing to do; the driver role installs and pins it"))
    for path, free in sorted((host.get("free_mib") or {}).items()):
        if free is not None and free < plan.get("min_free_mib", 2048):
            findings.append(_finding(
                "disk_space_low", "error",
                "%s has %d MiB free; installing the driver needs %d MiB" % (path, free, plan.get("min_free_mib", 2048)),
                "free space on %s (apt/dnf caches, old kernels)" % path))


def packages(plan: dict, host: dict, branch: int, flavour: str, nvswitch: bool) -> list:
    family = os_family(host["os"])
    is_open = flavour == "open"
    if plan["source"] == "distro" and family == "debian":
        kernel_pkg = "nvidia-open-kernel-dkms" if is_open else "nvidia-kernel-dkms"
        return ["nvidia-driver", kernel_pkg, "firmware-misc-nonfree"]
    if plan["source"] == "distro" and family == "ubuntu":
        suffix = "-open" if is_open else ""
        found = ["nvidia-headless-%d-server%s" % (branch, suffix), "nvidia-utils-%d-server" % branch,
                 "linux-modules-nvidia-%d-server%s-generic" % (branch, suffix)]
    elif family == "rhel":
        found = ["@nvidia-driver:%d-%s" % (branch, "open" if is_open else "dkms")]
    else:
        # NVIDIA's CUDA repository: the branch is chosen by an apt pin (the driver role writes
        # it), the flavour by the metapackage.
        found = ["nvidia-open"] if is_open else ["cuda-drivers"]
    if nvswitch:
        found.append("nvidia-fabricmanager-%d" % branch)
    return found


def gpu_list(nvml_gpus: list, pci_gpus: list) -> list:
    """The GPUs to plan for: NVML's view when the driver answers, else the PCI bus's."""
    if nvml_gpus:
        return [{"index": g["index"], "name": g.get("name"), "architecture": g.get("architecture", "unknown"),
                 "bus_id": (g.get("pci") or {}).get("bus_id"),
                 "mig_capable": (g.get("mig") or {}).get("capable")} for g in nvml_gpus if not g.get("lost")]
    return [{"index": i, "name": g.get("name"), "architecture": g.get("architecture", "unknown"),
             "bus_id": g.get("bus_id")} for i, g in enumerate(pci_gpus)]


# NVIDIA's DRA driver for GPUs (docs/prerequisites.md at v0.4.1): the oldest driver branch for GPU
# allocation, and the runtimes that hand the kubelet's CDI devices to containers
DRA_MIN_BRANCH = 565
DRA_RUNTIMES = {"containerd": ((1, 7), "containerd 1.7 (with CDI enabled) or 2.x"),
                "crio": ((1, 27), "CRI-O 1.27 or newer")}
DRA_KEEP = "or keep this node on the device plugin (gpu_allocation: device-plugin)"


def _branch_of(version) -> int | None:
    try:
        return compat.parse_branch(version) if version else None
    except ValueError:
        return None


def check_dra(dra: dict, branch: int | None, loaded: str | None, findings: list) -> None:
    """A node about to be served by NVIDIA's DRA driver. dra: {'runtime': the container runtime
    report (runtime/detect.report), 'missing_dirs': the kubelet plugin directories that are not
    there}. branch: the driver plan's branch; loaded: the loaded driver's version."""
    runtime = dra.get("runtime") or {}
    name, version = runtime.get("runtime"), runtime.get("version")
    if not name:
        findings.append(_finding(
            "dra_runtime_missing", "error",
            "no container runtime for the kubelet was found, and NVIDIA's DRA driver needs one that injects "
            "devices through CDI", "install containerd 1.7 or 2.x, or CRI-O 1.27 or newer, " + DRA_KEEP))
    elif name not in DRA_RUNTIMES:
        findings.append(_finding(
            "dra_runtime_no_cdi", "error",
            "%s cannot hand the kubelet's CDI devices to containers, which NVIDIA's DRA driver requires"
            % detect.NAMES.get(name, name),
            "run the kubelet on containerd 1.7 or 2.x, or on CRI-O 1.27 or newer, " + DRA_KEEP))
    else:
        minimum, wanted = DRA_RUNTIMES[name]
        have = detect.parse_version(version)
        if have is None:
            findings.append(_finding(
                "dra_runtime_version_unknown", "warning",
                "the version of %s is unknown; NVIDIA's DRA driver needs %s" % (detect.NAMES[name], wanted),
                "check `%s --version`" % ("containerd" if name == "containerd" else "crio")))
        elif have[:2] < minimum:
            findings.append(_finding(
                "dra_runtime_no_cdi", "error",
                "%s %s cannot inject devices through CDI, which NVIDIA's DRA driver requires (%s)"
                % (detect.NAMES[name], version, wanted),
                "upgrade the runtime (Debian 13's containerd is 1.7; containerd 2.x), " + DRA_KEEP))
    loaded_major = _branch_of(loaded)
    if (loaded_major is not None and loaded_major < DRA_MIN_BRANCH and (branch is None or branch < DRA_MIN_BRANCH)) \
            or (loaded_major is None and branch is not None and branch < DRA_MIN_BRANCH):
        what = ("the loaded driver %s" % loaded) if loaded_major is not None else ("driver branch %s" % branch)
        findings.append(_finding(
            "dra_driver_too_old", "error",
            "%s is older than R%d, the oldest NVIDIA's DRA driver supports for GPU allocation" % (what, DRA_MIN_BRANCH),
            "set driver_branch to %d or newer (580), with driver_allow_branch_change for an installed driver, %s"
            % (DRA_MIN_BRANCH, DRA_KEEP)))
    missing = list(dra.get("missing_dirs") or [])
    if missing:
        findings.append(_finding(
            "dra_kubelet_dirs_missing", "error",
            "the kubelet's plugin directories are missing: %s (NVIDIA's DRA driver registers there)" % ", ".join(missing),
            "join the node to the cluster first (the kubelet creates them under its --root-dir, /var/lib/kubelet), "
            "or set dra_driver_kubelet_plugins_path and dra_driver_kubelet_registrar_path to the kubelet's"))


def run(plan: dict, host: dict, devices: dict, gpus: list, driver: dict | None = None, dra: dict | None = None) -> dict:
    """All checks. driver is what the host has: {'installed': version or None, 'loaded':
    version or None}; dra, for a node NVIDIA's DRA driver is to serve, what check_dra reads.
    Returns {'findings', 'recommendation', 'action', 'errors'}."""
    findings = []
    models = _models(gpus)
    if not gpus:
        findings.append(_finding("no_gpu", "warning", "no NVIDIA GPU was found on the PCI bus or by NVML",
                                 "check `lspci -d 10de:`; a VM needs the GPU passed through"))
    for model in models:
        mig_known = [g.get("mig_capable") for g in gpus if g.get("name") == model["name"]]
        model["mig_capable"] = mig_known[0] if mig_known else None
    branch = check_branch(plan, models, findings)
    recommendation = action = None
    if branch is not None:
        check_driver_version(plan, branch, findings)
        action = plan_action(plan, branch, (driver or {}).get("installed"), (driver or {}).get("loaded"), findings)
        flavour = check_flavour(plan, models, branch, findings)
        check_cuda(plan, models, branch, findings)
        check_mig(plan, models, branch, findings)
        check_os(plan, host, branch, findings)
        check_host(plan, host, devices, branch, findings)
        if flavour:
            recommendation = {
                "branch": branch,
                "kernel_module_type": flavour,
                "source": plan["source"],
                "packages": packages(plan, host, branch, flavour, bool(devices.get("nvswitches"))),
                "fabric_manager": bool(devices.get("nvswitches")),
                "dkms": builds_with_dkms(plan, host),
            }
    if dra is not None:
        check_dra(dra, branch, (driver or {}).get("loaded"), findings)
    findings = fnd.ordered(findings)
    return {"findings": findings, "recommendation": recommendation, "action": action,
            "errors": fnd.counts(findings)["error"]}

# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import copy
import datetime

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils.gpu import preflight

TODAY = datetime.date(2026, 11, 30)
HOST = {
    "os": {"id": "ubuntu", "id_like": ["debian"], "version_id": "24.04", "codename": "noble",
           "pretty_name": "Ubuntu 24.04.1 LTS"},
    "kernel": {"release": "6.8.0-45-generic", "headers": True},
    "secure_boot": False,
    "nouveau": {"loaded": False, "blacklisted": True},
    "runfile_install": None,
    "free_mib": {"/usr": 50000, "/var": 50000},
}
H100 = [{"index": i, "name": "NVIDIA H100 80GB HBM3", "architecture": "hopper", "mig_capable": True} for i in range(8)]
L40S = [{"index": i, "name": "NVIDIA L40S", "architecture": "ada", "mig_capable": False} for i in range(4)]
T4 = [{"index": 0, "name": "Tesla T4", "architecture": "turing", "mig_capable": False}]
B200 = [{"index": i, "name": "NVIDIA B200", "architecture": "blackwell"} for i in range(8)]
V100 = [{"index": 0, "name": "Tesla V100-SXM2-16GB", "architecture": "volta"}]
NVSWITCHES = {"nvswitches": [{"bus_id": "0000:05:00.0"}] * 4}


def run(gpus=H100, host=None, devices=None, driver=None, **plan):
    full = {"driver_branch": "580", "kernel_module_type": "auto", "source": "cuda_repo",
            "min_free_mib": 2048, "today": TODAY}
    full.update(plan)
    return preflight.run(full, host or HOST, devices or {}, gpus, driver)


def host_with(**changes):
    item = copy.deepcopy(HOST)
    item.update(changes)
    return item


def codes(report):
    return [(f["code"], f["severity"]) for f in report["findings"]]


def test_clean_plan():
    report = run()
    assert report["errors"] == 0 and report["findings"] == []
    assert report["recommendation"] == {"branch": 580, "kernel_module_type": "open", "source": "cuda_repo",
                                        "packages": ["nvidia-open"], "fabric_manager": False, "dkms": True}


def test_r470_on_hopper_names_the_architecture_and_the_branches():
    report = run(driver_branch="470")
    assert ("branch_unsupported_gpu", "error") in codes(report)
    finding = report["findings"][0]
    assert finding["message"].startswith("NVIDIA H100 80GB HBM3 (Hopper) needs driver branch R525 and newer; "
                                         "branch R470 was requested. Supported branches for Hopper: R535, ")
    assert "R580" in finding["message"] and finding["gpus"] == list(range(8))


def test_every_problem_is_reported_at_once():
    report = run(driver_branch="535", cuda_version="13.0", kernel_module_type="proprietary", gpus=B200,
                 host=host_with(runfile_install="/usr/bin/nvidia-uninstall",
                                kernel={"release": "6.8.0-45-generic", "headers": False}))
    assert set(codes(report)) >= {
        ("branch_unsupported_gpu", "error"), ("branch_end_of_life", "warning"), ("flavour_open_required", "error"),
        ("cuda_driver_too_old", "error"), ("runfile_driver_present", "error"), ("kernel_headers_missing", "warning")}
    severities = [f["severity"] for f in report["findings"]]
    assert severities == sorted(severities, key={"error": 0, "warning": 1, "info": 2}.get)


def test_cuda_13_with_r535():
    report = run(driver_branch="535", cuda_version="13.0")
    msg = [f["message"] for f in report["findings"] if f["code"] == "cuda_driver_too_old"]
    assert msg == ["CUDA 13.0 needs driver >= 580.65.06; branch 535 was requested"]


def test_cuda_minor_version_compatibility_is_a_warning():
    assert ("cuda_minor_compat", "warning") in codes(run(driver_branch="535", cuda_version="12.8"))


def test_exact_version_below_cuda_floor():
    report = run(driver_branch="575", driver_version="575.51.03", cuda_version="13.0")
    assert report["findings"][0]["message"] == "CUDA 13.0 needs driver >= 580.65.06; driver 575.51.03 was requested"
    # Within the 13.x minor-version compatibility floor it is a warning, not an error.
    assert codes(run(driver_version="580.65.05", cuda_version="13.0")) == [("cuda_minor_compat", "warning")]


def test_cuda_13_drops_volta():
    report = run(gpus=V100, cuda_version="13.0")
    assert ("cuda_drops_gpu", "error") in codes(report)
    assert report["recommendation"]["kernel_module_type"] == "proprietary"


@pytest.mark.parametrize("gpus", [L40S, T4])
def test_mig_required_on_gpus_without_mig(gpus):
    report = run(gpus=gpus, mig_required=True)
    assert codes(report) == [("mig_unsupported", "error")]
    assert "%s (" % gpus[0]["name"] in report["findings"][0]["message"]
    assert "does not support MIG" in report["findings"][0]["message"]


def test_mig_minimum_driver():
    gpus = [{"index": 0, "name": "NVIDIA H200", "architecture": "hopper", "mig_capable": True}]
    report = run(gpus=gpus, driver_branch="535", mig_required=True)
    assert ("mig_driver_too_old", "error") in codes(report)


@pytest.mark.parametrize("branch, code", [("latest", "branch_invalid"), ("999", "branch_unknown")])
def test_bad_branch_strings(branch, code):
    report = run(driver_branch=branch)
    assert codes(report)[0] == (code, "error")


@pytest.mark.parametrize("branch", ["latest", "999", "123"])
def test_invalid_or_unknown_branch_has_no_recommendation(branch):
    report = run(driver_branch=branch, devices=NVSWITCHES)
    assert report["recommendation"] is None and report["action"] is None
    assert len(report["findings"]) == 1  # nothing is checked against a branch that does not exist


@pytest.mark.parametrize("version, code, message", [
    ("580", "driver_version_invalid", "driver_version '580' is not a whole driver version"),
    ("580.95", None, None),
    ("580.95.05", None, None),
    ("v580.95.05", "driver_version_invalid", "driver_version 'v580.95.05' is not a whole driver version"),
    ("580.95.05-1", "driver_version_invalid", "driver_version '580.95.05-1' is not a whole driver version"),
    ("570.172.08", "driver_version_off_branch", "driver_version 570.172.08 is not on the requested branch R580"),
])
def test_driver_version_must_be_whole_and_on_the_branch(version, code, message):
    report = run(driver_version=version)
    errors = [f for f in report["findings"] if f["severity"] == "error"]
    if code is None:
        assert errors == []
    else:
        assert [f["code"] for f in errors] == [code]
        assert errors[0]["message"].startswith(message) and errors[0]["subject"] == "driver_version"


@pytest.mark.parametrize("driver, plan, action, finding", [
    ({"installed": None, "loaded": None}, {}, "install", None),
    ({"installed": "580.95.05", "loaded": "580.95.05"}, {}, "keep", None),
    ({"installed": "580.65.06", "loaded": "580.65.06"}, {"driver_version": "580.95.05"}, "update",
     ("driver_update_planned", "info")),
    ({"installed": "580.95.05", "loaded": "580.95.05"}, {"driver_version": "580.95.05"}, "keep", None),
    ({"installed": "570.172.08", "loaded": "570.172.08"}, {}, "change_branch", ("driver_branch_change", "error")),
    ({"installed": None, "loaded": "570.172.08"}, {}, "change_branch", ("driver_branch_change", "error")),
    ({"installed": None, "loaded": "580.95.05"}, {"driver_version": "580.95.05"}, "install", None),
    ({"installed": "570.172.08", "loaded": "570.172.08"}, {"allow_branch_change": True}, "change_branch",
     ("driver_branch_change", "warning")),
    ({"installed": "580.95.05", "loaded": "570.172.08"}, {}, "keep", None),
])
def test_the_plan_is_compared_with_the_installed_and_loaded_driver(driver, plan, action, finding):
    report = run(driver=driver, **plan)
    assert report["action"]["action"] == action
    assert [(f["code"], f["severity"]) for f in report["findings"]] == ([finding] if finding else [])


def test_branch_change_message_says_what_is_there_and_what_was_asked():
    report = run(driver={"installed": "570.172.08", "loaded": "570.172.08"})
    finding = report["findings"][0]
    assert finding["message"] == ("installed 570.172.08 (loaded); branch R580 was requested: the run would change the "
                                  "driver branch, which is an upgrade and needs to be asked for")
    assert finding["fix"].startswith("set driver_branch to 570 to keep the node's driver, or allow the branch change")
    assert "driver_allow_branch_change" in finding["fix"]
    pending = run(driver={"installed": "580.95.05", "loaded": "570.172.08"})["action"]
    assert pending["message"] == "installed 580.95.05, loaded 570.172.08: the run keeps it (branch R580)"
    unmanaged = run(driver={"installed": None, "loaded": "580.95.05"})["action"]
    assert unmanaged["message"] == "loaded 580.95.05 but no driver package: the run installs branch R580"


@pytest.mark.parametrize("os_info, source, code", [
    ({"id": "opensuse-leap", "id_like": ["suse"], "version_id": "15.5", "pretty_name": "openSUSE Leap 15.5"},
     "cuda_repo", "os_unsupported"),
    ({"id": "debian", "id_like": [], "version_id": "11", "pretty_name": "Debian GNU/Linux 11"}, "distro", "os_unsupported"),
    ({"id": "debian", "id_like": [], "version_id": "12", "pretty_name": "Debian GNU/Linux 12"}, "distro",
     "os_branch_unavailable"),
])
def test_os_support(os_info, source, code):
    report = run(host=host_with(os=os_info), source=source)
    assert (code, "error") in codes(report)


def test_debian_distro_branch_message():
    report = run(host=host_with(os={"id": "debian", "id_like": [], "version_id": "12",
                                    "pretty_name": "Debian GNU/Linux 12 (bookworm)"}), source="distro")
    finding = [f for f in report["findings"] if f["code"] == "os_branch_unavailable"][0]
    assert finding["message"] == "Debian GNU/Linux 12 (bookworm) packages driver branch R535 only; branch R580 was requested"


def test_secure_boot_with_dkms_and_ubuntu_signed_modules():
    assert ("secure_boot_unsigned_module", "error") in codes(run(host=host_with(secure_boot=True)))
    report = run(host=host_with(secure_boot=True), source="distro")
    assert codes(report) == []
    assert report["recommendation"]["packages"] == [
        "nvidia-headless-580-server-open", "nvidia-utils-580-server", "linux-modules-nvidia-580-server-open-generic"]
    assert report["recommendation"]["dkms"] is False


def test_nouveau():
    assert codes(run(host=host_with(nouveau={"loaded": True, "blacklisted": False}))) == [("nouveau_loaded", "warning")]
    assert codes(run(host=host_with(nouveau={"loaded": False, "blacklisted": False}))) == [("nouveau_not_blacklisted", "info")]


def test_nvswitch_needs_fabric_manager():
    report = run(devices=NVSWITCHES)
    assert codes(report) == [("fabric_manager_required", "info")]
    assert report["recommendation"]["packages"] == ["nvidia-open", "nvidia-fabricmanager-580"]
    debian = host_with(os={"id": "debian", "id_like": [], "version_id": "12", "pretty_name": "Debian 12"})
    assert ("fabric_manager_unavailable", "error") in codes(run(devices=NVSWITCHES, host=debian, source="distro",
                                                                driver_branch="535"))


def test_rhel_module_stream():
    rocky = host_with(os={"id": "rocky", "id_like": ["rhel", "centos", "fedora"], "version_id": "9.4",
                          "pretty_name": "Rocky Linux 9.4"})
    assert run(host=rocky)["recommendation"]["packages"] == ["@nvidia-driver:580-open"]


def test_disk_space():
    report = run(host=host_with(free_mib={"/usr": 500, "/var": 50000}))
    assert report["findings"][0]["message"] == "/usr has 500 MiB free; installing the driver needs 2048 MiB"


def test_no_gpu_is_a_warning():
    assert codes(run(gpus=[])) == [("no_gpu", "warning")]


def test_gpu_list_prefers_nvml_and_skips_lost_gpus():
    nvml_gpus = [{"index": 0, "name": "NVIDIA H100 80GB HBM3", "architecture": "hopper", "pci": {"bus_id": "x"},
                  "mig": {"capable": True}}, {"index": 1, "lost": True}]
    assert preflight.gpu_list(nvml_gpus, [{"name": "ignored"}]) == [
        {"index": 0, "name": "NVIDIA H100 80GB HBM3", "architecture": "hopper", "bus_id": "x", "mig_capable": True}]
    assert preflight.gpu_list([], [{"name": "GH100", "architecture": "hopper", "bus_id": "0000:18:00.0"}]) == [
        {"index": 0, "name": "GH100", "architecture": "hopper", "bus_id": "0000:18:00.0"}]


# ---- NVIDIA's DRA driver (gpu_allocation: dra) ---------------------------------------------------

def runtime(name="containerd", version="1.7.24"):
    return {"runtime": name, "version": version}


DRA_READY = {"runtime": runtime(), "missing_dirs": []}


def dra_run(dra, driver=None, **plan):
    full = {"driver_branch": "580", "kernel_module_type": "auto", "source": "cuda_repo",
            "min_free_mib": 2048, "today": TODAY}
    full.update(plan)
    return preflight.run(full, HOST, {}, H100, driver or {"installed": "570.172.08", "loaded": "570.172.08"}, dra)


READY_RUNTIMES = [runtime(), runtime("containerd", "2.1.9"), runtime("crio", "1.27.0"), runtime("crio", "1.34.0")]


@pytest.mark.parametrize("rt", READY_RUNTIMES, ids=["containerd-1.7", "containerd-2.1", "crio-1.27", "crio-1.34"])
def test_dra_ready_nodes_have_no_dra_finding(rt):
    report = dra_run({"runtime": rt, "missing_dirs": []}, driver_branch="570")
    assert [c for c in codes(report) if c[0].startswith("dra_")] == []


@pytest.mark.parametrize("rt, message", [
    (runtime("containerd", "1.6.20"), "containerd 1.6.20 cannot inject devices through CDI, which NVIDIA's DRA driver "
                                      "requires (containerd 1.7 (with CDI enabled) or 2.x)"),
    (runtime("crio", "1.26.4"), "CRI-O 1.26.4 cannot inject devices through CDI, which NVIDIA's DRA driver requires "
                                "(CRI-O 1.27 or newer)"),
    (runtime("docker", "26.1.5"), "Docker cannot hand the kubelet's CDI devices to containers, which NVIDIA's DRA "
                                  "driver requires"),
], ids=["containerd-1.6", "crio-1.26", "docker"])
def test_a_runtime_without_cdi_is_refused_with_the_fix(rt, message):
    report = dra_run({"runtime": rt, "missing_dirs": []}, driver_branch="570")
    found = [f for f in report["findings"] if f["code"] == "dra_runtime_no_cdi"]
    assert len(found) == 1 and found[0]["severity"] == "error" and found[0]["message"] == message
    assert "gpu_allocation: device-plugin" in found[0]["fix"]
    assert report["errors"] == 1


def test_no_runtime_and_an_unknown_version():
    none = dra_run({"runtime": {"runtime": None}, "missing_dirs": []}, driver_branch="570")
    assert ("dra_runtime_missing", "error") in codes(none)
    unknown = dra_run({"runtime": runtime(version=None), "missing_dirs": []}, driver_branch="570")
    assert ("dra_runtime_version_unknown", "warning") in codes(unknown)


@pytest.mark.parametrize("driver, branch, flagged", [
    ({"installed": "550.163.01", "loaded": "550.163.01"}, "550", "the loaded driver 550.163.01"),
    # the plan moves the node to R580: fine once the driver stage has run
    ({"installed": "550.163.01", "loaded": "550.163.01"}, "580", None),
    # no driver yet: the planned branch counts
    ({"installed": None, "loaded": None}, "535", "driver branch 535"),
    ({"installed": None, "loaded": None}, "580", None),
    ({"installed": "565.57.01", "loaded": "565.57.01"}, "565", None),
], ids=["loaded-550", "loaded-550-plan-580", "none-plan-535", "none-plan-580", "loaded-565"])
def test_the_driver_must_be_r565_or_newer(driver, branch, flagged):
    report = dra_run(DRA_READY, driver=driver, driver_branch=branch, allow_branch_change=True)
    found = [f for f in report["findings"] if f["code"] == "dra_driver_too_old"]
    if flagged is None:
        assert found == []
    else:
        assert len(found) == 1 and found[0]["message"].startswith(flagged + " is older than R565")
        assert "driver_branch to 565 or newer" in found[0]["fix"]


def test_missing_kubelet_plugin_directories_are_named():
    report = dra_run({"runtime": runtime(), "missing_dirs": ["/var/lib/kubelet/plugins_registry"]})
    found = [f for f in report["findings"] if f["code"] == "dra_kubelet_dirs_missing"]
    assert len(found) == 1 and "/var/lib/kubelet/plugins_registry" in found[0]["message"]


def test_every_dra_problem_at_once_and_none_without_dra():
    dra = {"runtime": runtime("containerd", "1.6.20"), "missing_dirs": ["/var/lib/kubelet/plugins"]}
    report = dra_run(dra, driver={"installed": None, "loaded": None}, driver_branch="535")
    assert {c for c, _s in codes(report) if c.startswith("dra_")} == {
        "dra_runtime_no_cdi", "dra_driver_too_old", "dra_kubelet_dirs_missing"}
    # the same node on the device plugin: no DRA finding
    assert [c for c in codes(run(driver_branch="535")) if c[0].startswith("dra_")] == []

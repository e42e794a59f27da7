# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpuops.nvidia.preflight through `ansible localhost -m` on simulated nodes, with and without
a driver, for good plans and every kind of bad one. The module must change nothing."""
from __future__ import annotations

import json
import os

import pytest

from conftest import BIN, REPO, tree_digest  # pylint: disable=import-error

DEBIAN_12 = 'ID=debian\nVERSION_ID="12"\nPRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\n'

# (profile, plan, flavour, action): the simulated nodes run the driver their profile names
# (hgx-h100 570.172.08, hgx-h200 575.57.08, dgx-a100 535.261.03, a100-80gb-pcie-x2 550.163.01,
# l40s-x4 and hgx-b200 580.95.05, t4-x1 535.247.01) and have no driver packages under the host root.
# Every finding of a good plan is written down: only these warnings and infos, nothing else.
GOOD_PLANS = [
    # loaded 570 and no driver package: another branch is a branch change (allowed here), the
    # same branch an installation of packages
    ("hgx-h100", "driver_branch=580 cuda_version=13.0 mig_required=true allow_branch_change=true", "open",
     "change_branch"),
    ("hgx-h100", "driver_branch=570 mig_required=true", "open", "install"),
    ("hgx-h200", "driver_branch=R580 mig_required=true allow_branch_change=true", "open", "change_branch"),
    ("hgx-b200", "driver_branch=580 cuda_version=12.8", "open", "install"),
    ("dgx-a100", "driver_branch=570 mig_required=true allow_branch_change=true", "open", "change_branch"),
    ("a100-80gb-pcie-x2", "driver_branch=550", "open", "install"),
    ("l40s-x4", "driver_branch=580 cuda_version=12.9", "open", "install"),
    ("t4-x1", "driver_branch=535 kernel_module_type=proprietary", "proprietary", "install"),
]


@pytest.fixture
def debian_host(tmp_path):
    """A Debian 12 host tree (os-release, kernel headers, no packages) for host_root, so the
    checks do not read the machine the tests run on."""
    return _host_tree(str(tmp_path / "host"), DEBIAN_12)


@pytest.mark.parametrize("profile, args, flavour, action", GOOD_PLANS)
def test_good_plans_pass(lab, debian_host, profile, args, flavour, action):
    result = lab.module(profile, module="gpuops.nvidia.preflight", args="%s host_root=%s" % (args, debian_host))
    assert result["changed"] is False
    assert result["passed"] is True
    assert [f for f in result["findings"] if f["severity"] == "error"] == []
    assert result["recommendation"]["kernel_module_type"] == flavour
    assert result["plan"]["action"] == action
    assert len(result["gpus"]) >= 1
    expected = {"nouveau_not_blacklisted"}
    # NVIDIA's supported-drivers page: R570 reached its end of life in 2026-02, R550 in 2025-04,
    # R535 in 2026-06 (the tests run after those dates)
    if any(args.startswith("driver_branch=%s " % branch) or args == "driver_branch=%s" % branch
           for branch in ("570", "550", "535")):
        expected.add("branch_end_of_life")
    if action == "change_branch":
        expected.add("driver_branch_change")
    if result["nvswitch_count"]:
        expected.add("fabric_manager_required")
    assert {f["code"] for f in result["findings"]} == expected


def test_a_branch_change_is_refused_unless_asked_for(lab, debian_host):
    """The default branch 580 on a node that runs 570: pre-flight says so, before apt is asked."""
    result = lab.module("hgx-h100", module="gpuops.nvidia.preflight",
                        args="driver_branch=580 host_root=%s" % debian_host, expect_failure=True)
    assert result["plan"]["action"] == "change_branch"
    assert (result["plan"]["installed"], result["plan"]["loaded"]) == (None, "570.172.08")
    assert "loaded 570.172.08; branch R580 was requested: the run would change the driver branch, which is an upgrade" in result["msg"]
    assert "set driver_branch to 570 to keep the node's driver" in result["msg"]


def test_the_installed_packages_are_read_under_the_host_root(lab, debian_host):
    status = os.path.join(debian_host, "var", "lib", "dpkg")
    os.makedirs(status)
    with open(os.path.join(status, "status"), "w") as handle:
        handle.write("Package: nvidia-driver\nStatus: hold ok installed\nVersion: 580.65.06-1\n\n"
                     "Package: libnvidia-ml1\nStatus: install ok installed\nVersion: 580.65.06-1\n")
    result = lab.module("l40s-x4", module="gpuops.nvidia.preflight",
                        args="driver_branch=580 driver_version=580.95.05 host_root=%s" % debian_host)
    assert result["plan"] == {
        "action": "update", "installed": "580.65.06", "loaded": "580.95.05", "branch": 580, "version": "580.95.05",
        "message": "installed 580.65.06, loaded 580.95.05; the run moves the driver to 580.95.05 (same branch R580)"}


@pytest.mark.parametrize("args, code", [
    ("driver_branch=580 driver_version=580", "driver_version_invalid"),
    ("driver_branch=580 driver_version=570.172.08", "driver_version_off_branch"),
])
def test_a_driver_version_that_would_not_pin_is_refused(lab, debian_host, args, code):
    result = lab.module("l40s-x4", module="gpuops.nvidia.preflight", args="%s host_root=%s" % (args, debian_host),
                        expect_failure=True)
    assert code in [f["code"] for f in result["findings"] if f["severity"] == "error"]


def test_r470_on_h100_fails_naming_hopper_and_the_branches(lab, debian_host):
    result = lab.module("hgx-h100", module="gpuops.nvidia.preflight",
                        args="driver_branch=470 allow_branch_change=true host_root=%s" % debian_host, expect_failure=True)
    assert result["failed"] is True
    assert "NVIDIA H100 80GB HBM3 (Hopper) needs driver branch R525 and newer; branch R470 was requested" in result["msg"]
    assert "Supported branches for Hopper: R535," in result["msg"] and "R580" in result["msg"]


def test_r570_on_h100_recommends_open_modules_and_fabric_manager(lab, debian_host):
    result = lab.module("hgx-h100", module="gpuops.nvidia.preflight", args="driver_branch=570 host_root=%s" % debian_host)
    assert result["passed"] is True
    assert result["recommendation"]["kernel_module_type"] == "open"
    assert result["nvswitch_count"] == 4  # seen behind the GPUs' NVLinks
    assert "nvidia-fabricmanager-570" in result["recommendation"]["packages"]


BAD_PLANS = [
    ("hgx-h100", "driver_branch=470 allow_branch_change=true", "branch_unsupported_gpu", "Hopper"),
    ("hgx-b200", "driver_branch=580 kernel_module_type=proprietary", "flavour_open_required",
     "NVIDIA B200 (Blackwell) only runs with the open kernel modules"),
    ("hgx-h100", "driver_branch=535 cuda_version=13.0 allow_branch_change=true", "cuda_driver_too_old",
     "CUDA 13.0 needs driver >= 580.65.06; branch 535 was requested"),
    ("l40s-x4", "driver_branch=580 mig_required=true", "mig_unsupported", "NVIDIA L40S (Ada) does not support MIG"),
    ("t4-x1", "driver_branch=535 mig_required=true", "mig_unsupported", "Tesla T4 (Turing) does not support MIG"),
    ("hgx-h100", "driver_branch=latest", "branch_invalid", "is not a branch number"),
    ("hgx-h100", "driver_branch=123", "branch_unknown", "R123 is not a published NVIDIA datacenter branch"),
]


@pytest.mark.parametrize("profile, args, code, text", BAD_PLANS)
def test_bad_plans_fail_clearly_and_change_nothing(lab, debian_host, profile, args, code, text):
    watched = (debian_host, "/etc/apt", "/etc/modprobe.d")
    before = tree_digest(*watched)
    result = lab.module(profile, module="gpuops.nvidia.preflight", args="%s host_root=%s" % (args, debian_host),
                        expect_failure=True)
    assert result["failed"] is True and result["changed"] is False
    errors = [f for f in result["findings"] if f["severity"] == "error"]
    assert code in [f["code"] for f in errors]
    assert text in result["msg"]
    assert all(f["fix"] for f in result["findings"])
    assert tree_digest(*watched) == before


def _host_tree(root, os_release, pci_ids=None, devices=()):
    files = {"etc/os-release": os_release, "proc/sys/kernel/osrelease": "6.1.0-28-amd64\n"}
    if pci_ids:
        files["usr/share/misc/pci.ids"] = pci_ids
    for bus_id, device, pci_class in devices:
        for name, value in (("vendor", 0x10de), ("device", device), ("class", pci_class),
                            ("subsystem_vendor", 0x10de), ("subsystem_device", 0x16c1)):
            files["sys/bus/pci/devices/%s/%s" % (bus_id, name)] = "0x%04x\n" % value
    for rel, content in files.items():
        path = os.path.join(root, rel)
        os.makedirs(os.path.dirname(path), exist_ok=True)
        with open(path, "w") as handle:
            handle.write(content)
    os.makedirs(os.path.join(root, "lib/modules/6.1.0-28-amd64/build"))
    return root


def test_unsupported_distribution(lab, tmp_path):
    os_release = 'ID="opensuse-leap"\nID_LIKE="suse opensuse"\nVERSION_ID="15.5"\nPRETTY_NAME="openSUSE Leap 15.5"\n'
    root = _host_tree(str(tmp_path / "host"), os_release)
    before = tree_digest(root)
    result = lab.module("hgx-h100", module="gpuops.nvidia.preflight",
                        args="driver_branch=580 host_root=%s" % root, expect_failure=True)
    assert "NVIDIA's CUDA repositories do not serve openSUSE Leap 15.5" in result["msg"]
    assert tree_digest(root) == before


PCI_IDS = "10de  NVIDIA Corporation\n\t22a3  GH100 [H100 NVSwitch]\n\t2330  GH100 [H100 SXM5 80GB]\n"


def test_before_any_driver_gpus_come_from_the_pci_bus(lab, tmp_path):
    devices = [("0000:%02x:00.0" % bus, 0x2330, 0x030200) for bus in (0x18, 0x2a, 0x3a, 0x5d)]
    devices += [("0000:%02x:00.0" % bus, 0x22a3, 0x068000) for bus in (0x05, 0x06)]
    os_release = 'ID=debian\nVERSION_ID="12"\nPRETTY_NAME="Debian GNU/Linux 12 (bookworm)"\n'
    root = _host_tree(str(tmp_path / "host"), os_release, PCI_IDS, devices)
    result = lab.module("none", module="gpuops.nvidia.preflight",
                        args="driver_branch=470 host_root=%s" % root, expect_failure=True)
    assert result["driver"]["reason"] == "library_not_found"
    assert [g["name"] for g in result["gpus"]] == ["GH100 [H100 SXM5 80GB]"] * 4
    assert result["nvswitch_count"] == 2
    assert "GH100 [H100 SXM5 80GB] (Hopper) needs driver branch R525 and newer" in result["msg"]
    good = lab.module("none", module="gpuops.nvidia.preflight", args="driver_branch=580 host_root=%s" % root)
    assert good["passed"] is True
    assert good["recommendation"]["packages"] == ["nvidia-open", "nvidia-fabricmanager-580"]
    # Debian's own packages stop at R535 and have no fabric manager for the NVSwitches.
    distro = lab.module("none", module="gpuops.nvidia.preflight",
                        args="driver_branch=535 source=distro host_root=%s" % root, expect_failure=True)
    assert {f["code"] for f in distro["findings"] if f["severity"] == "error"} == {"fabric_manager_unavailable"}


def test_fail_on_problems_false_returns_the_findings(lab, debian_host):
    result = lab.module("l40s-x4", module="gpuops.nvidia.preflight",
                        args="driver_branch=470 mig_required=true fail_on_problems=false host_root=%s" % debian_host)
    assert result.get("failed") is not True and result["passed"] is False
    assert {f["code"] for f in result["findings"] if f["severity"] == "error"} == {
        "branch_unsupported_gpu", "mig_unsupported", "driver_branch_change"}


def test_driver_status_on_a_host_without_a_driver(lab, tmp_path):
    result = lab.module("none", module="gpuops.nvidia.driver_status", args="host_root=%s" % tmp_path)
    assert result["changed"] is False
    assert result["state"] == "not_installed"
    assert result["reboot_required"] is False
    assert result["installed_version"] is None and result["loaded_version"] is None


@pytest.mark.parametrize("packages, caps, state, reboot", [
    # the module loaded, no driver package: a .run install, or someone else's
    ("", "000001ffffffffff", "loaded_unmanaged", False),
    ("Package: nvidia-driver\nStatus: install ok installed\nVersion: 580.95.05-1\n", "000001ffffffffff", "ready", False),
    ("Package: nvidia-driver\nStatus: install ok installed\nVersion: 580.105.08-1\n", "000001ffffffffff",
     "loaded_outdated", True),
    # without CAP_SYS_MODULE (bit 16), as in a container: the state is reported, no reboot
    ("Package: nvidia-driver\nStatus: install ok installed\nVersion: 580.105.08-1\n", "00000000a80425fb",
     "loaded_outdated", False),
])
def test_driver_status_reads_everything_under_the_host_root(lab, tmp_path, packages, caps, state, reboot):
    (tmp_path / "sys/module/nvidia").mkdir(parents=True)
    (tmp_path / "sys/module/nvidia/version").write_text("580.95.05\n")
    (tmp_path / "proc/self").mkdir(parents=True)
    (tmp_path / "proc/self/status").write_text("Name:\tpython3\nCapEff:\t%s\n" % caps)
    (tmp_path / "var/lib/dpkg").mkdir(parents=True)
    (tmp_path / "var/lib/dpkg/status").write_text(packages)
    result = lab.module("none", module="gpuops.nvidia.driver_status", args="host_root=%s" % tmp_path)
    assert result["loaded_version"] == "580.95.05"
    assert (result["state"], result["reboot_required"]) == (state, reboot)
    assert result["can_load_module"] is (caps == "000001ffffffffff")


def test_driver_status_asks_nvml_when_the_kernel_files_show_no_module(lab, tmp_path):
    """In a container /proc/driver/nvidia and /sys/module/nvidia are the host's (or absent):
    NVML says which driver answers."""
    (tmp_path / "var/lib/dpkg").mkdir(parents=True)
    (tmp_path / "var/lib/dpkg/status").write_text("Package: nvidia-driver\nStatus: install ok installed\n"
                                                  "Version: 580.95.05-1\n")
    result = lab.module("l40s-x4", module="gpuops.nvidia.driver_status", args="host_root=%s" % tmp_path)
    assert result["kernel_module"]["loaded"] is False and result["nvml"]["version"] == "580.95.05"
    assert (result["loaded_version"], result["state"]) == ("580.95.05", "ready")
    mismatch = lab.module("version-mismatch", module="gpuops.nvidia.driver_status", args="host_root=%s" % tmp_path)
    assert mismatch["nvml"]["reason"] == "version_mismatch" and mismatch["state"] == "installed_not_loaded"


def test_driver_status_verifies_a_ready_driver_and_keeps_the_state_record(lab, tmp_path):
    """The driver role's one activation step: a ready driver must answer through NVML with the
    installed version and see the GPUs; the state record is written (not in check mode), then
    left alone."""
    root = tmp_path / "root"
    (root / "var/lib/dpkg").mkdir(parents=True)
    (root / "var/lib/dpkg/status").write_text("Package: nvidia-driver\nStatus: install ok installed\nVersion: 580.95.05-1\n")
    record = tmp_path / "gpuops" / "driver-state.json"
    args = "host_root=%s verify_gpus=4 record=%s" % (root, record)
    planned = lab.module("l40s-x4", module="gpuops.nvidia.driver_status", args=args, check_mode=True)
    assert planned["changed"] is True and planned["gpus_seen"] == 4 and not record.exists()
    done = lab.module("l40s-x4", module="gpuops.nvidia.driver_status", args=args)
    assert done["changed"] is True and done["state"] == "ready"
    assert json.loads(record.read_text()) == {
        "state": "ready", "message": done["message"], "reboot_required": False, "can_load_module": done["can_load_module"],
        "installed_version": "580.95.05", "installed_from": "nvidia-driver", "loaded_version": "580.95.05", "held": []}
    assert lab.module("l40s-x4", module="gpuops.nvidia.driver_status", args=args)["changed"] is False
    short = lab.module("l40s-x4", module="gpuops.nvidia.driver_status", expect_failure=True,
                       args="host_root=%s verify_gpus=8 record=%s" % (root, record))
    assert short["failed"] is True
    assert short["msg"] == "the driver is loaded but NVML reports 580.95.05 with 4 GPU(s); expected 580.95.05 with 8"


def test_a_failed_preflight_in_the_driver_role_lists_only_the_problems_and_their_fixes(lab, tmp_path):
    """Not the module's whole result (every GPU, the plan ...): the failure names each problem with
    its fix; the full result stays on the pre-flight task (shown with -v)."""
    playbook = tmp_path / "preflight.yml"
    playbook.write_text(
        "- hosts: gpu_nodes\n"
        "  gather_facts: true\n"
        "  tasks:\n"
        "    - name: Pre-flight of the driver role\n"
        "      ansible.builtin.include_role:\n"
        "        name: gpuops.nvidia.driver\n"
        "        tasks_from: preflight\n"
        "      vars:\n"
        "        driver_branch: '470'\n"
        "        driver_source: distro\n")
    proc, out = lab.playbook("hgx-h100", str(playbook), check=False)
    assert proc.returncode != 0
    tasks = {t["task"]["name"].split(" : ")[-1]: t["hosts"]["localhost"] for t in out["plays"][0]["tasks"]}
    full = tasks["Check the driver plan against the GPUs, the host and the driver it has"]
    assert full.get("failed") is not True and len(full["gpus"]) == 8
    failure = tasks["Show the pre-flight findings, and stop before any change when they are problems"]
    assert failure["failed"] is True and "gpus" not in failure and "plan" not in failure
    errors = [f for f in full["findings"] if f["severity"] == "error"]
    assert failure["msg"][0] == "pre-flight found %d problem(s) on localhost; nothing was changed:" % len(errors)
    assert len(failure["msg"]) == len(errors) + 1
    branch = next(line for line in failure["msg"] if "R470" in line)
    assert branch.startswith("[error] ") and "Hopper" in branch and "(fix: " in branch
    # with driver_preflight_fail off the run goes on past pre-flight's errors, but never into a
    # branch change nobody asked for
    playbook.write_text(playbook.read_text() + "        driver_preflight_fail: false\n")
    proc, out = lab.playbook("hgx-h100", str(playbook), check=False)
    tasks = {t["task"]["name"].split(" : ")[-1]: t["hosts"]["localhost"] for t in out["plays"][0]["tasks"]}
    failure = tasks["Show the pre-flight findings, and stop before any change when they are problems"]
    assert failure["msg"][0] == "pre-flight found 1 problem(s) on localhost; nothing was changed:"
    assert "would change the driver branch" in failure["msg"][1]


@pytest.mark.parametrize("fatal, where", [(False, None), (True, "extra_vars"), (True, "inventory")])
def test_gpuops_preflight_fatal_stops_every_node_when_one_fails(lab, tmp_path, fatal, where):
    """site.yml's pre-flight stage: by default a node that fails pre-flight is left out and the
    others go on; with gpuops_preflight_fatal (given with -e or in the inventory) the first
    failure stops every node, so no stage runs, and the run says which node failed."""
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("[gpu_nodes]\n"
                         "node-good ansible_connection=local driver_branch=570\n"
                         "node-bad ansible_connection=local driver_branch=470\n"
                         + ("[gpu_nodes:vars]\ngpuops_preflight_fatal=true\n" if where == "inventory" else ""))
    argv = [os.path.join(BIN, "ansible-playbook"), os.path.join(REPO, "playbooks", "site.yml"), "--tags", "preflight"]
    argv += ["-e", json.dumps({"gpuops_preflight_fatal": True})] if where == "extra_vars" else []
    proc = lab.run("hgx-h100", argv, check=False, env={"ANSIBLE_INVENTORY": str(inventory)})
    assert proc.returncode != 0
    out = json.loads(proc.stdout)
    plays = [p["play"]["name"] for p in out["plays"]]
    stats = out["stats"]
    assert stats["node-bad"]["failures"] == 1
    if fatal:
        # the run ends with pre-flight: no later play starts, for either node
        assert plays[-1].startswith("Stage 1 - "), plays
        assert "Fleet summary - one line per node" not in plays
        stop = next(t for t in out["plays"][-1]["tasks"]
                    if t["task"]["name"] == "Stop every node when one failed pre-flight and gpuops_preflight_fatal says so")
        assert stop["hosts"]["node-good"]["msg"] == ("pre-flight failed on node-bad and gpuops_preflight_fatal is true: "
                                                     "no node is changed")
    else:
        assert plays[-1] == "Fleet summary - one line per node", plays
        summary = next(t for t in out["plays"][-1]["tasks"] if t["task"]["name"] == "Summarise the run, one line per node")
        assert "node-good" in summary["hosts"]


def test_dra_prerequisites_are_findings_and_the_kubelet_directories_are_read_under_the_host_root(lab, debian_host):
    """gpu_allocation=dra: the DRA driver's prerequisites join the findings; the kubelet's plugin
    directories are looked for under host_root (the test's tree has none, then both); the runtime
    found is returned. Nothing changes."""
    args = "driver_branch=570 gpu_allocation=dra fail_on_problems=false host_root=%s" % debian_host
    before = tree_digest(debian_host)
    result = lab.module("hgx-h100", module="gpuops.nvidia.preflight", args=args)
    missing = [f for f in result["findings"] if f["code"] == "dra_kubelet_dirs_missing"]
    assert len(missing) == 1 and missing[0]["severity"] == "error"
    assert "/var/lib/kubelet/plugins, /var/lib/kubelet/plugins_registry" in missing[0]["message"]
    assert {"runtime", "version", "requested"} <= set(result["container_runtime"])
    assert tree_digest(debian_host) == before
    for path in ("var/lib/kubelet/plugins", "var/lib/kubelet/plugins_registry"):
        os.makedirs(os.path.join(debian_host, path))
    result = lab.module("hgx-h100", module="gpuops.nvidia.preflight", args=args)
    assert [f for f in result["findings"] if f["code"] == "dra_kubelet_dirs_missing"] == []
    # the H100 profile's loaded 570 is R565 or newer
    assert [f for f in result["findings"] if f["code"] == "dra_driver_too_old"] == []
    # the same node on the device plugin: no DRA finding, no runtime looked for
    result = lab.module("hgx-h100", module="gpuops.nvidia.preflight",
                        args="driver_branch=570 fail_on_problems=false host_root=%s" % debian_host)
    assert [f for f in result["findings"] if f["code"].startswith("dra_")] == []
    assert "container_runtime" not in result

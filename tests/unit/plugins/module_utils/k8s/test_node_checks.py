# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import copy
import json

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils.k8s import node_checks

# ---- gpu_info fixtures ---------------------------------------------------------------------------

H100 = "NVIDIA H100 80GB HBM3"
DRIVER = "570.172.08"
NFD_HINT = ("GFD's labels have not reached the node; is GFD running there and Node Feature Discovery's "
            "master running?")


def uuid(index):
    return "GPU-00000000-0000-0000-0000-%012d" % index


def mig_uuid(gpu, device):
    return "MIG-00000000-0000-0000-%04d-%012d" % (gpu, device)


def bus(index):
    return "00000000:%02x:00.0" % (0x18 + 0x10 * index)


def make_gpu(index, name=H100, memory=81559, cc="9.0", mig_devices=0, lost=False):
    if lost:
        return {"index": index, "lost": True, "name": None, "uuid": None, "pci": {"bus_id": bus(index)}, "xids": []}
    mig = {"capable": True, "current": bool(mig_devices), "pending": bool(mig_devices), "gpu_instances": [],
           "devices": [{"index": n, "uuid": mig_uuid(index, n), "name": "NVIDIA H100 80GB HBM3 MIG 1g.10gb"}
                       for n in range(mig_devices)]}
    return {"index": index, "lost": False, "name": name, "uuid": uuid(index), "pci": {"bus_id": bus(index)},
            "compute_capability": cc, "memory": {"total_mib": memory}, "mig": mig, "xids": []}


def pci_gpu(index):
    return {"bus_id": "0000:%02x:00.0" % (0x18 + 0x10 * index), "device_id": "0x2330",
            "name": "GH100 [H100 SXM5 80GB]", "driver": "nvidia"}


def node_info(gpus=None, pci=None, driver=None, health=None):
    """gpu_info's facts of a node; eight H100s, each on the PCI bus, unless told otherwise."""
    gpus = [make_gpu(n) for n in range(8)] if gpus is None else gpus
    pci = len(gpus) if pci is None else pci
    return {
        "driver": driver or {"loaded": True, "reason": None, "message": None, "version": DRIVER},
        "gpu_count": len(gpus),
        "gpus": gpus,
        "pci": {"gpus": [pci_gpu(n) for n in range(pci)], "nvswitches": []},
        "health": health or [],
    }


HGX = node_info()
NOT_LOADED = {"loaded": False, "reason": "driver_not_loaded", "message": "Driver Not Loaded"}


def finding(code, severity, subject="GPU 3", message="m"):
    return {"code": code, "severity": severity, "subject": subject, "message": message, "fix": "f"}


# ---- host_problems -------------------------------------------------------------------------------

HOSTS = [
    # (id, gpu_info, problems)
    ("healthy", HGX, []),
    ("no-gpu-anywhere", node_info([], pci=0), ["no NVIDIA GPU on the PCI bus and none listed by NVML"]),
    ("no-gpu-and-no-driver", node_info([], pci=0, driver=NOT_LOADED),
     ["no NVIDIA GPU on the PCI bus and none listed by NVML",
      "the driver is not usable: driver_not_loaded (Driver Not Loaded)"]),
    # the PCI bus has the GPUs, NVML none: the driver's reason, no count mismatch on top
    ("driver-not-loaded", node_info([], pci=8, driver=NOT_LOADED),
     ["the driver is not usable: driver_not_loaded (Driver Not Loaded)"]),
    ("version-mismatch", node_info([], pci=8, driver={"loaded": False, "reason": "version_mismatch",
                                                      "message": "Driver/library version mismatch"}),
     ["the driver is not usable: version_mismatch (Driver/library version mismatch)"]),
    ("driver-without-reason-or-message", node_info([], pci=8, driver={"loaded": False}),
     ["the driver is not usable: unknown (NVML did not open)"]),
    ("no-driver-facts", dict(node_info([], pci=8), driver=None),
     ["the driver is not usable: unknown (NVML did not open)"]),
    ("pci-more-than-nvml", node_info([make_gpu(n) for n in range(7)], pci=8),
     ["8 NVIDIA GPUs on the PCI bus but NVML lists 7 (on the PCI bus only: 0000:88:00.0)"]),
    ("nvml-more-than-pci", node_info([make_gpu(n) for n in range(8)], pci=4),
     ["4 NVIDIA GPUs on the PCI bus but NVML lists 8 (not on the PCI bus: GPU 4 (0000:58:00.0), "
      "GPU 5 (0000:68:00.0), GPU 6 (0000:78:00.0), GPU 7 (0000:88:00.0))"]),
    # a GPU gone from the PCI bus that NVML still lists (lost): the bus and NVML disagree
    ("fell-off-the-bus", node_info([make_gpu(n) for n in range(7)] + [make_gpu(7, lost=True)], pci=7),
     ["7 NVIDIA GPUs on the PCI bus but NVML lists 8 (not on the PCI bus: GPU 7 (0000:88:00.0))"]),
    # NVML's bus IDs (8-digit domain, upper case) are the PCI bus's (4 digits, lower case)
    ("nvml-bus-ids", node_info([dict(make_gpu(n), pci={"bus_id": bus(n).upper()}) for n in range(8)]), []),
    # GPUs in NVML and none on the bus: disagree too (a bus hidden from the host, or all gone)
    ("none-on-the-bus", node_info(pci=0),
     ["0 NVIDIA GPUs on the PCI bus but NVML lists 8 (a GPU that fell off the bus, or a host that cannot "
      "see its PCI bus (/sys/bus/pci hidden from it, as in some containers))"]),
    # an older gpu_info without the PCI bus: nothing to compare
    ("no-pci-facts", {k: v for k, v in HGX.items() if k != "pci"}, []),
    ("errors-listed-warnings-and-info-not",
     node_info(health=[finding("xid", "error", "GPU 3", "GPU 3 had XID 79 (fallen off the bus)"),
                       finding("pcie_link_degraded", "warning", "GPU 2"),
                       finding("ecc_uncorrectable_history", "info", "GPU 1"),
                       finding("driver_not_loaded", "error", "node", "the driver is not loaded")]),
     ["GPU 3: xid: GPU 3 had XID 79 (fallen off the bus)", "node: driver_not_loaded: the driver is not loaded"]),
    ("only-warnings", node_info(health=[finding("throttle_thermal", "warning")]), []),
    ("finding-without-subject", node_info(health=[{"code": "nvml_error", "severity": "error", "message": "x"}]),
     ["node: nvml_error: x"]),
]


@pytest.mark.parametrize("info, problems", [case[1:] for case in HOSTS], ids=[case[0] for case in HOSTS])
def test_host_problems(info, problems):
    assert node_checks.host_problems(info) == problems


# ---- operand_problems ----------------------------------------------------------------------------

OPERANDS = ["nvidia-device-plugin", "gpu-feature-discovery", "dcgm-exporter"]


def pod(operand, name=None, phase="Running", ready=True, containers=None):
    status = {"phase": phase, "conditions": [{"type": "Ready", "status": "True" if ready else "False"}]}
    if containers is not None:
        status["containerStatuses"] = containers
    return {"metadata": {"name": name or operand + "-x7k2p", "namespace": "gpuops-nvidia",
                         "labels": {"app.kubernetes.io/name": operand}},
            "spec": {"nodeName": "gpu-1"}, "status": status}


CRASHLOOP = {
    "name": "dcgm-exporter", "ready": False, "restartCount": 4,
    "state": {"waiting": {"reason": "CrashLoopBackOff",
                          "message": "back-off 1m20s restarting failed container=dcgm-exporter"}},
    "lastState": {"terminated": {"exitCode": 1, "reason": "Error", "message": "could not init DCGM\n"}},
}
READY_PODS = [pod(name) for name in OPERANDS]

OPERAND_CASES = [
    # (id, pods on the node, problems)
    ("all-ready", READY_PODS, []),
    ("missing-operand", READY_PODS[:2],
     ["dcgm-exporter: no pod on the node (is the node labelled nvidia.com/gpu.deploy.<operand>=true, "
      "and the operand deployed?)"]),
    ("no-pods", [], ["%s: no pod on the node (is the node labelled nvidia.com/gpu.deploy.<operand>=true, "
                     "and the operand deployed?)" % name for name in OPERANDS]),
    ("crashloop", READY_PODS[:2] + [pod("dcgm-exporter", "dcgm-exporter-abcde", ready=False,
                                        containers=[CRASHLOOP])],
     ["dcgm-exporter: dcgm-exporter-abcde: Running; container dcgm-exporter waiting: CrashLoopBackOff "
      "(back-off 1m20s restarting failed container=dcgm-exporter), 4 restarts; last exit 1: could not init DCGM"]),
    ("pending", READY_PODS[1:] + [pod("nvidia-device-plugin", "dp-1", phase="Pending", ready=False)],
     ["nvidia-device-plugin: dp-1: Pending"]),
    # a pod of something else on the node does not stand in for an operand
    ("other-pods-do-not-count", READY_PODS[:2] + [pod("gpuops-validate")],
     ["dcgm-exporter: no pod on the node (is the node labelled nvidia.com/gpu.deploy.<operand>=true, "
      "and the operand deployed?)"]),
    # during a rollout: the old pod ready, the new one not
    ("one-of-two-pods-not-ready", READY_PODS + [pod("dcgm-exporter", "dcgm-exporter-new", phase="Pending",
                                                    ready=False)],
     ["dcgm-exporter: dcgm-exporter-new: Pending"]),
]


@pytest.mark.parametrize("pods, problems", [case[1:] for case in OPERAND_CASES],
                         ids=[case[0] for case in OPERAND_CASES])
def test_operand_problems(pods, problems):
    assert node_checks.operand_problems(pods, OPERANDS) == problems


def test_operand_problems_of_nothing():
    assert node_checks.operand_problems(None, []) == []
    assert node_checks.operand_problems(READY_PODS, []) == []


def test_operand_problems_pods_without_labels():
    assert node_checks.operand_problems([{"metadata": {"name": "bare"}}], ["dcgm-exporter"])[0].startswith(
        "dcgm-exporter: no pod on the node")


# ---- gfd_labels_expected / label_problems --------------------------------------------------------

GFD = {
    "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3",
    "nvidia.com/gpu.count": "8",
    "nvidia.com/gpu.memory": "81559",
    "nvidia.com/cuda.driver-version.full": DRIVER,
    "nvidia.com/gpu.compute.major": "9",
    "nvidia.com/gpu.compute.minor": "0",
}

EXPECTED = [
    # (id, gpu_info, the labels GFD should produce)
    ("hgx-h100", HGX, GFD),
    ("product-spaces-to-dashes", node_info([make_gpu(0, name="NVIDIA RTX 6000 Ada Generation", memory=49140,
                                                     cc="8.9")]),
     {"nvidia.com/gpu.product": "NVIDIA-RTX-6000-Ada-Generation", "nvidia.com/gpu.count": "1",
      "nvidia.com/gpu.memory": "49140", "nvidia.com/cuda.driver-version.full": DRIVER,
      "nvidia.com/gpu.compute.major": "8", "nvidia.com/gpu.compute.minor": "9"}),
    ("runs-of-spaces-and-ends", node_info([make_gpu(0, name="  NVIDIA  L40S ")]),
     dict(GFD, **{"nvidia.com/gpu.product": "NVIDIA-L40S", "nvidia.com/gpu.count": "1"})),
    ("no-memory-no-driver-version-no-cc",
     node_info([make_gpu(0, memory=None, cc=None)], driver={"loaded": True}),
     {"nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3", "nvidia.com/gpu.count": "1"}),
    ("compute-capability-without-minor", node_info([make_gpu(0, cc="9")]),
     {k: v for k, v in dict(GFD, **{"nvidia.com/gpu.count": "1"}).items() if ".compute." not in k}),
    # the product comes from the first GPU NVML could read; the count is NVML's count
    ("first-gpu-lost", node_info([make_gpu(0, lost=True)] + [make_gpu(n) for n in range(1, 8)]), GFD),
    ("only-lost-gpus", node_info([make_gpu(0, lost=True)]), {}),
    ("no-gpus", node_info([]), {}),
]


@pytest.mark.parametrize("info, expected", [case[1:] for case in EXPECTED], ids=[case[0] for case in EXPECTED])
def test_gfd_labels_expected(info, expected):
    assert node_checks.gfd_labels_expected(info) == expected


def with_labels(**changes):
    """GFD's labels with CHANGES (keys without the nvidia.com/ prefix; None removes one), and
    labels of others that the check ignores."""
    labels = dict(GFD, **{"kubernetes.io/hostname": "gpu-1", "nvidia.com/gpu.family": "hopper",
                          "feature.node.kubernetes.io/pci-10de.present": "true"})
    for key, value in changes.items():
        key = "nvidia.com/" + key.replace("_", "-")
        if value is None:
            labels.pop(key, None)
        else:
            labels[key] = value
    return labels


def missing(key, want):
    return f"{key} is missing (expected {want}): {NFD_HINT}"


LABELS = [
    # (id, node labels, problems)
    ("all-match", with_labels(), []),
    ("shared-suffix-accepted", {**with_labels(), "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-SHARED"}, []),
    ("mig-suffix-accepted", {**with_labels(), "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3-MIG-1g.10gb"}, []),
    ("different-product", {**with_labels(), "nvidia.com/gpu.product": "NVIDIA-L40S"},
     ["nvidia.com/gpu.product is NVIDIA-L40S, but the node's GPUs are NVIDIA-H100-80GB-HBM3"]),
    ("different-shared-product", {**with_labels(), "nvidia.com/gpu.product": "NVIDIA-A100-SXM4-80GB-SHARED"},
     ["nvidia.com/gpu.product is NVIDIA-A100-SXM4-80GB-SHARED, but the node's GPUs are NVIDIA-H100-80GB-HBM3"]),
    # a longer name is another product, not a suffix
    ("longer-name-refused", {**with_labels(), "nvidia.com/gpu.product": "NVIDIA-H100-80GB-HBM3e"},
     ["nvidia.com/gpu.product is NVIDIA-H100-80GB-HBM3e, but the node's GPUs are NVIDIA-H100-80GB-HBM3"]),
    ("shorter-name-refused", {**with_labels(), "nvidia.com/gpu.product": "NVIDIA-H100"},
     ["nvidia.com/gpu.product is NVIDIA-H100, but the node's GPUs are NVIDIA-H100-80GB-HBM3"]),
    ("spaces-not-dashes-refused", {**with_labels(), "nvidia.com/gpu.product": H100},
     [f"nvidia.com/gpu.product is {H100}, but the node's GPUs are NVIDIA-H100-80GB-HBM3"]),
    ("no-gfd-labels", {"kubernetes.io/hostname": "gpu-1"}, [missing(key, want) for key, want in GFD.items()]),
    ("no-labels", None, [missing(key, want) for key, want in GFD.items()]),
    ("one-missing", {k: v for k, v in with_labels().items() if k != "nvidia.com/gpu.memory"},
     [missing("nvidia.com/gpu.memory", "81559")]),
    ("count", {**with_labels(), "nvidia.com/gpu.count": "7"},
     ["nvidia.com/gpu.count is 7, but gpu_info reports 8"]),
    ("memory", {**with_labels(), "nvidia.com/gpu.memory": "40960"},
     ["nvidia.com/gpu.memory is 40960, but gpu_info reports 81559"]),
    ("driver", {**with_labels(), "nvidia.com/cuda.driver-version.full": "550.90.07"},
     ["nvidia.com/cuda.driver-version.full is 550.90.07, but gpu_info reports 570.172.08"]),
    ("compute", {**with_labels(), "nvidia.com/gpu.compute.major": "8", "nvidia.com/gpu.compute.minor": "9"},
     ["nvidia.com/gpu.compute.major is 8, but gpu_info reports 9",
      "nvidia.com/gpu.compute.minor is 9, but gpu_info reports 0"]),
]


@pytest.mark.parametrize("labels, problems", [case[1:] for case in LABELS], ids=[case[0] for case in LABELS])
def test_label_problems(labels, problems):
    assert node_checks.label_problems(HGX, labels) == problems


def test_label_problems_of_a_node_without_gpus():
    assert node_checks.label_problems(node_info([]), {}) == []


def test_missing_label_names_the_nfd_hint():
    problem = node_checks.label_problems(HGX, {})[0]
    assert problem.startswith("nvidia.com/gpu.product is missing (expected NVIDIA-H100-80GB-HBM3)")
    assert "Node Feature Discovery" in problem and "GFD running" in problem


# ---- allocatable_problems ------------------------------------------------------------------------

NODE_RESOURCES = {"cpu": "224", "memory": "2113362340Ki", "ephemeral-storage": "3600Gi", "hugepages-1Gi": "0",
                  "hugepages-2Mi": "0", "pods": "110"}

ALLOCATABLE = [
    # (id, expected resources, the node's allocatable, problems)
    ("exact", {"nvidia.com/gpu": 8}, dict(NODE_RESOURCES, **{"nvidia.com/gpu": "8"}), []),
    ("exact-several", {"nvidia.com/gpu": 4, "nvidia.com/mig-1g.10gb": 28},
     {"nvidia.com/mig-1g.10gb": "28", "nvidia.com/gpu": "4"}, []),
    ("nothing-expected-nothing-advertised", {}, NODE_RESOURCES, []),
    ("missing", {"nvidia.com/gpu": 8}, NODE_RESOURCES, ["nvidia.com/gpu: the node advertises none, expected 8"]),
    ("extra-nvidia-resource", {"nvidia.com/gpu.shared": 32},
     {"nvidia.com/gpu": "8", "nvidia.com/gpu.shared": "32"},
     ["nvidia.com/gpu: the node advertises 8, its configuration gives none"]),
    ("different-count", {"nvidia.com/gpu": 8}, {"nvidia.com/gpu": "7"},
     ["nvidia.com/gpu: the node advertises 7, expected 8"]),
    ("non-nvidia-resources-ignored", {"nvidia.com/gpu": 8},
     dict(NODE_RESOURCES, **{"nvidia.com/gpu": "8", "example.com/fpga": "2", "rdma/hca_shared_devices_a": "1000"}),
     []),
    ("problems-in-name-order",
     {"nvidia.com/mig-3g.40gb": 2, "nvidia.com/gpu": 4},
     {"nvidia.com/mig-1g.10gb": "14", "nvidia.com/gpu": "8"},
     ["nvidia.com/gpu: the node advertises 8, expected 4",
      "nvidia.com/mig-1g.10gb: the node advertises 14, its configuration gives none",
      "nvidia.com/mig-3g.40gb: the node advertises none, expected 2"]),
    ("none-and-none", None, None, []),
]


@pytest.mark.parametrize("expected, allocatable, problems", [case[1:] for case in ALLOCATABLE],
                         ids=[case[0] for case in ALLOCATABLE])
def test_allocatable_problems(expected, allocatable, problems):
    assert node_checks.allocatable_problems(expected, allocatable) == problems


# ---- smi_problems: `nvidia-smi -L` in the test pod -----------------------------------------------

def smi(index, gpu_uuid, name=H100):
    return f"GPU {index}: {name} (UUID: {gpu_uuid})"


def smi_mig(device, device_uuid, profile="1g.10gb"):
    # as nvidia-smi prints it: indented under its GPU, the profile padded
    return f"  MIG {profile:<12}Device {device:>2}: (UUID: {device_uuid})"


MIG_HGX = node_info([make_gpu(n, mig_devices=7) for n in range(8)])
NOT_OURS = "GPU-ffffffff-ffff-ffff-ffff-ffffffffffff"
NOT_OUR_MIG = "MIG-ffffffff-ffff-ffff-ffff-ffffffffffff"

SMI = [
    # (id, gpu_info, log, problems)
    ("one-gpu", HGX, smi(0, uuid(3)) + "\n", []),
    ("any-index-in-the-pod", HGX, smi(0, uuid(7)), []),
    ("crlf-and-blank-lines", HGX, "\r\n" + smi(0, uuid(3)) + "\r\n\r\n", []),
    ("two-gpus", HGX, "\n".join([smi(0, uuid(1)), smi(1, uuid(2))]),
     ["the test pod asked for one GPU but nvidia-smi lists 2"]),
    ("not-a-gpu-of-the-node", HGX, smi(0, NOT_OURS),
     [f"nvidia-smi in the test pod shows {NOT_OURS} ({H100}), which is not a GPU of this node"]),
    ("two-and-one-not-ours", HGX, "\n".join([smi(0, uuid(1)), smi(1, NOT_OURS, "NVIDIA L40S")]),
     ["the test pod asked for one GPU but nvidia-smi lists 2",
      f"nvidia-smi in the test pod shows {NOT_OURS} (NVIDIA L40S), which is not a GPU of this node"]),
    # a MIG device: its GPU's line, and the one MIG device below it
    ("one-mig-device", MIG_HGX, "\n".join([smi(0, uuid(2)), smi_mig(0, mig_uuid(2, 5))]), []),
    ("mig-device-of-another-node", MIG_HGX, "\n".join([smi(0, uuid(2)), smi_mig(0, NOT_OUR_MIG)]),
     [f"nvidia-smi in the test pod shows {NOT_OUR_MIG} (MIG 1g.10gb), which is not a GPU of this node"]),
    ("two-mig-devices-of-one-gpu", MIG_HGX,
     "\n".join([smi(0, uuid(2)), smi_mig(0, mig_uuid(2, 0)), smi_mig(1, mig_uuid(2, 1))]),
     ["the test pod asked for one GPU but nvidia-smi lists 2 MIG devices"]),
    ("mig-devices-of-two-gpus", MIG_HGX,
     "\n".join([smi(0, uuid(2)), smi_mig(0, mig_uuid(2, 0)), smi(1, uuid(3)), smi_mig(0, mig_uuid(3, 0))]),
     ["the test pod asked for one GPU but nvidia-smi lists 2",
      "the test pod asked for one GPU but nvidia-smi lists 2 MIG devices"]),
    # the MIG UUIDs of drivers before R470
    ("old-mig-uuid-format", node_info([dict(make_gpu(0), mig={"current": True, "devices": [
        {"uuid": "MIG-%s/1/0" % uuid(0)}]})]),
     "\n".join([smi(0, uuid(0)), smi_mig(0, "MIG-%s/1/0" % uuid(0), "1g.5gb")]), []),
    ("old-mig-uuid-not-ours", HGX, "\n".join([smi(0, uuid(0)), smi_mig(0, "MIG-%s/1/0" % NOT_OURS, "1g.5gb")]),
     [f"nvidia-smi in the test pod shows MIG-{NOT_OURS}/1/0 (MIG 1g.5gb), which is not a GPU of this node"]),
    ("zero-lines", HGX, "", ["nvidia-smi listed no GPU in the test pod (log: empty)"]),
    ("none", HGX, None, ["nvidia-smi listed no GPU in the test pod (log: empty)"]),
    ("no-devices-found", HGX, "No devices were found\n",
     ["nvidia-smi listed no GPU in the test pod (log: No devices were found)"]),
    ("driver-error", HGX,
     "Failed to initialize NVML: Driver/library version mismatch\nNVML library version: 570.172\n",
     ["nvidia-smi listed no GPU in the test pod (log: Failed to initialize NVML: Driver/library version "
      "mismatch\nNVML library version: 570.172)"]),
    ("unable-to-determine-handle", HGX,
     "Unable to determine the device handle for GPU0000:18:00.0: Unknown Error",
     ["nvidia-smi listed no GPU in the test pod (log: Unable to determine the device handle for "
      "GPU0000:18:00.0: Unknown Error)"]),
]


@pytest.mark.parametrize("info, log, problems", [case[1:] for case in SMI], ids=[case[0] for case in SMI])
def test_smi_problems(info, log, problems):
    assert node_checks.smi_problems(log, info) == problems


def test_smi_mig_line_as_nvidia_smi_prints_it():
    line = smi_mig(0, mig_uuid(2, 5))
    assert line == "  MIG 1g.10gb     Device  0: (UUID: %s)" % mig_uuid(2, 5)
    log = smi(0, uuid(2)) + "\n" + line + "\n"
    assert node_checks.smi_problems(log, MIG_HGX) == []
    # the MIG device is checked: on a node where it is not, it is named
    assert node_checks.smi_problems(log, HGX) == [
        f"nvidia-smi in the test pod shows {mig_uuid(2, 5)} (MIG 1g.10gb), which is not a GPU of this node"]


def test_smi_log_is_cut_to_its_end():
    problem = node_checks.smi_problems("x" * 1000 + "the end", HGX)[0]
    assert problem.endswith(("x" * 1000 + "the end")[-300:] + ")")
    assert "x" * 294 not in problem


# ---- sample_problems -----------------------------------------------------------------------------

VECTORADD = ("[Vector addition of 50000 elements]\nCopy input data from the host memory to the CUDA device\n"
             "CUDA kernel launch with 196 blocks of 256 threads\nCopy output data from the CUDA device to the "
             "host memory\nTest PASSED\nDone\n")

SAMPLES = [
    # (id, log, problems)
    ("passed", VECTORADD, []),
    ("failed", "Failed to allocate device vector A (error code CUDA driver version is insufficient for CUDA "
               "runtime version)!\n",
     ["the CUDA sample did not pass (log: Failed to allocate device vector A (error code CUDA driver version is "
      "insufficient for CUDA runtime version)!)"]),
    ("empty", "", ["the CUDA sample did not pass (log: empty)"]),
    ("none", None, ["the CUDA sample did not pass (log: empty)"]),
    ("blank", " \n ", ["the CUDA sample did not pass (log: empty)"]),
]


@pytest.mark.parametrize("log, problems", [case[1:] for case in SAMPLES], ids=[case[0] for case in SAMPLES])
def test_sample_problems(log, problems):
    assert node_checks.sample_problems(log) == problems


def test_sample_log_is_cut_to_its_end():
    problem = node_checks.sample_problems("y" * 1000 + " Test FAILED")[0]
    assert problem == "the CUDA sample did not pass (log: %s)" % ("y" * 1000 + " Test FAILED")[-300:]


# ---- metric_uuids / metrics_problems: the exporter's /metrics ------------------------------------

def series(name, index, value=34, gpu_uuid=None):
    return (f'{name}{{gpu="{index}",UUID="{gpu_uuid or uuid(index)}",pci_bus_id="{bus(index)}",'
            f'device="nvidia{index}",modelName="{H100}",Hostname="gpu-1"}} {value}')


def metrics(indexes, comments=()):
    lines = ["# HELP DCGM_FI_DEV_GPU_TEMP GPU temperature (in C).", "# TYPE DCGM_FI_DEV_GPU_TEMP gauge"]
    lines += list(comments)
    lines += [series("DCGM_FI_DEV_GPU_TEMP", n) for n in indexes]
    lines += [series("DCGM_FI_DEV_POWER_USAGE", n, 70.5) for n in indexes]
    return "\n".join(lines) + "\n"


METRIC_UUIDS = [
    # (id, text, UUIDs)
    ("all", metrics(range(8)), {uuid(n) for n in range(8)}),
    ("some", metrics([0, 5]), {uuid(0), uuid(5)}),
    ("comment-lines-ignored", metrics([0], comments=['# UUID="%s" in a comment' % uuid(7)]), {uuid(0)}),
    ("other-labels-with-uuid-in-their-name-ignored", 'x{GPU_UUID="GPU-a",XUUID="GPU-b"} 1\n', set()),
    ("mig-series-carry-their-gpu", series("DCGM_FI_PROF_GR_ENGINE_ACTIVE", 2).replace(
        "} 34", ',GPU_I_PROFILE="1g.10gb",GPU_I_ID="9"} 0.5'), {uuid(2)}),
    ("empty", "", set()),
    ("none", None, set()),
]


@pytest.mark.parametrize("text, uuids", [case[1:] for case in METRIC_UUIDS], ids=[case[0] for case in METRIC_UUIDS])
def test_metric_uuids(text, uuids):
    assert node_checks.metric_uuids(text) == uuids


METRICS = [
    # (id, gpu_info, text, problems)
    ("every-gpu", HGX, metrics(range(8)), []),
    ("one-missing", HGX, metrics([n for n in range(8) if n != 5]),
     [f"the exporter serves no series for {uuid(5)}"]),
    ("several-missing-in-gpu-order", HGX, metrics([1, 2, 3, 4, 5, 6]),
     [f"the exporter serves no series for {uuid(0)}, {uuid(7)}"]),
    ("only-in-a-comment", node_info([make_gpu(0)]), metrics([], comments=['# UUID="%s"' % uuid(0)]),
     [f"the exporter serves no series for {uuid(0)}"]),
    ("nothing-served", node_info([make_gpu(0)]), "", [f"the exporter serves no series for {uuid(0)}"]),
    # a lost GPU has no UUID to look for
    ("lost-gpu-ignored", node_info([make_gpu(0), make_gpu(1, lost=True)]), metrics([0]), []),
    ("no-gpus", node_info([]), "", []),
]


@pytest.mark.parametrize("info, text, problems", [case[1:] for case in METRICS], ids=[case[0] for case in METRICS])
def test_metrics_problems(info, text, problems):
    assert node_checks.metrics_problems(text, info) == problems


# ---- prometheus_target_problems / prometheus_query_problems --------------------------------------

ADDRESS = "10.244.1.17:9400"


def target(address=ADDRESS, health="up", last_error="", instance=None):
    return {"discoveredLabels": {"__address__": address, "job": "dcgm-exporter"},
            "labels": {"instance": instance or address, "job": "dcgm-exporter"},
            "scrapePool": "dcgm-exporter", "scrapeUrl": f"http://{address}/metrics",
            "lastError": last_error, "lastScrape": "2026-01-01T10:00:00Z", "health": health}


def targets(*items):
    return {"status": "success", "data": {"activeTargets": list(items), "droppedTargets": []}}


TARGETS = [
    # (id, /api/v1/targets answer, problems)
    ("up", targets(target("10.244.2.3:9400"), target()), []),
    ("no-target", targets(target("10.244.2.3:9400")), [f"Prometheus has no target {ADDRESS}"]),
    ("no-targets-at-all", targets(), [f"Prometheus has no target {ADDRESS}"]),
    ("empty-answer", {}, [f"Prometheus has no target {ADDRESS}"]),
    ("none", None, [f"Prometheus has no target {ADDRESS}"]),
    ("down-with-last-error",
     targets(target(health="down", last_error='Get "http://10.244.1.17:9400/metrics": dial tcp 10.244.1.17:9400: '
                                              'connect: connection refused')),
     [f'Prometheus target {ADDRESS} is down: Get "http://10.244.1.17:9400/metrics": dial tcp 10.244.1.17:9400: '
      'connect: connection refused']),
    ("not-yet-scraped", targets(target(health="unknown")), [f"Prometheus target {ADDRESS} is unknown:"]),
    # relabelled targets: the instance label names the address
    ("found-by-instance", targets(dict(target(), discoveredLabels={"__address__": "10.244.1.17"})), []),
    # two scrape pools with the target: one up is enough
    ("one-of-two-up", targets(target(health="down", last_error="timeout"), target()), []),
]


@pytest.mark.parametrize("answer, problems", [case[1:] for case in TARGETS], ids=[case[0] for case in TARGETS])
def test_prometheus_target_problems(answer, problems):
    assert node_checks.prometheus_target_problems(answer, ADDRESS) == problems


def vector(*uuids):
    return {"status": "success", "data": {"resultType": "vector", "result": [
        {"metric": {"__name__": "DCGM_FI_DEV_GPU_TEMP", "UUID": item, "Hostname": "gpu-1"},
         "value": [1767261600.0, "34"]} for item in uuids]}}


QUERIES = [
    # (id, gpu_info, /api/v1/query answer, problems)
    ("every-gpu", HGX, vector(*[uuid(n) for n in range(8)]), []),
    ("one-missing", HGX, vector(*[uuid(n) for n in range(7)]), [f"Prometheus has no DCGM series for {uuid(7)}"]),
    ("empty-result", node_info([make_gpu(0), make_gpu(1)]), vector(),
     [f"Prometheus has no DCGM series for {uuid(0)}, {uuid(1)}"]),
    ("no-answer", node_info([make_gpu(0)]), None, [f"Prometheus has no DCGM series for {uuid(0)}"]),
    ("other-nodes-series-do-not-count", node_info([make_gpu(0)]), vector(NOT_OURS),
     [f"Prometheus has no DCGM series for {uuid(0)}"]),
    ("lost-gpu-ignored", node_info([make_gpu(0), make_gpu(1, lost=True)]), vector(uuid(0)), []),
]


@pytest.mark.parametrize("info, answer, problems", [case[1:] for case in QUERIES], ids=[case[0] for case in QUERIES])
def test_prometheus_query_problems(info, answer, problems):
    assert node_checks.prometheus_query_problems(answer, info) == problems


# ---- pod_of --------------------------------------------------------------------------------------

def test_pod_of_finds_the_operands_pod():
    pods = [pod("nvidia-device-plugin"), pod("dcgm-exporter", "dcgm-exporter-q9z8x"), pod("gpu-feature-discovery")]
    assert node_checks.pod_of(pods, "dcgm-exporter") is pods[1]


def test_pod_of_the_first_of_several():
    pods = [pod("dcgm-exporter", "old"), pod("dcgm-exporter", "new")]
    assert node_checks.pod_of(pods, "dcgm-exporter")["metadata"]["name"] == "old"


@pytest.mark.parametrize("pods", [[], None, READY_PODS[:2], [{"metadata": {"name": "bare"}}]],
                         ids=["empty", "none", "other-operands", "no-labels"])
def test_pod_of_names_the_operand(pods):
    with pytest.raises(ValueError, match=r"^no dcgm-exporter pod on the node$"):
        node_checks.pod_of(pods, "dcgm-exporter")


# ---- verdict / line ------------------------------------------------------------------------------

def result(check, ok=True, evidence=None, skipped=False):
    item = {"check": check, "ok": ok, "evidence": evidence if evidence is not None else [check + " fine"]}
    if skipped:
        item["skipped"] = True
    return item


PASSING = [result(check) for check in node_checks.CHECKS]

VERDICTS = [
    # (id, results, verdict)
    ("all-pass", PASSING,
     {"ok": True, "first_failure": None,
      "summary": "all checks passed: host, operands, labels, allocatable, workload, metrics"}),
    ("skipped-workload-passes", PASSING[:4] + [result("workload", skipped=True)] + PASSING[5:],
     {"ok": True, "first_failure": None,
      "summary": "all checks passed: host, operands, labels, allocatable, workload, metrics"}),
    ("first-failure-and-its-evidence",
     [PASSING[0], result("operands", False, ["dcgm-exporter: no pod", "gpu-feature-discovery: no pod"]),
      result("labels", False, ["nvidia.com/gpu.count is 7"])] + PASSING[3:],
     {"ok": False, "first_failure": "operands",
      "summary": "operands: dcgm-exporter: no pod; gpu-feature-discovery: no pod"}),
    ("last-check-fails", PASSING[:5] + [result("metrics", False, ["the exporter serves no series for GPU-x"])],
     {"ok": False, "first_failure": "metrics", "summary": "metrics: the exporter serves no series for GPU-x"}),
    ("failure-without-evidence", [result("host", False, [])],
     {"ok": False, "first_failure": "host", "summary": "host: "}),
    ("no-results", [], {"ok": True, "first_failure": None, "summary": "all checks passed: "}),
]


@pytest.mark.parametrize("results, expected", [case[1:] for case in VERDICTS], ids=[case[0] for case in VERDICTS])
def test_verdict(results, expected):
    assert node_checks.verdict(copy.deepcopy(results)) == expected


LINES = [
    # (id, result, line)
    ("ok", result("host", evidence=["8 NVIDIA GPU(s) on the PCI bus", "healthy"]),
     "  ok   host: 8 NVIDIA GPU(s) on the PCI bus; healthy"),
    ("fail", result("operands", False, ["dcgm-exporter: no pod on the node"]),
     "  FAIL operands: dcgm-exporter: no pod on the node"),
    ("skip", result("workload", evidence=["not run in check mode"], skipped=True),
     "  skip workload: not run in check mode"),
    # skipped wins over the verdict
    ("skip-not-ok", result("workload", False, ["x"], skipped=True), "  skip workload: x"),
    ("no-evidence", {"check": "metrics", "ok": True}, "  ok   metrics: "),
]


@pytest.mark.parametrize("item, expected", [case[1:] for case in LINES], ids=[case[0] for case in LINES])
def test_line(item, expected):
    assert node_checks.line(item) == expected


def test_lines_align():
    items = [result("host"), result("labels", False), result("workload", skipped=True)]
    lines = [node_checks.line(item) for item in items]
    assert [text.index(item["check"]) for text, item in zip(lines, items)] == [7, 7, 7]


def test_checks_in_checklist_order():
    assert node_checks.CHECKS == ("host", "operands", "labels", "allocatable", "workload", "metrics")


# validate_workload_when: changed - the workload's last pass carried over only when nothing is new
_PASSED = [{"check": name, "ok": True, "evidence": ["fine"]} for name in ("host", "operands", "labels", "allocatable")]
_RAN = {"check": "workload", "ok": True, "evidence": ["GPU 0: NVIDIA L40S (UUID: GPU-1); the CUDA sample: Test PASSED"]}


def _report(node="n1", driver="580.95.05", workload=None):
    return json.dumps({"checks": list(node_checks.CHECKS), "nodes": [
        {"host": node, "node": node, "ok": True, "driver": driver, "checks": _PASSED + [workload or _RAN]}]})


def test_workload_reuse_carries_a_pass_over_when_nothing_changed():
    got = node_checks.workload_reuse(_report(), "n1", "580.95.05", [[], [], []], _PASSED)
    assert got["ok"] and got["reused"] and not got.get("skipped")
    assert got["evidence"][0].startswith("not run again: it passed on this node with driver 580.95.05")
    assert got["evidence"][1:] == _RAN["evidence"]
    # carried over again next run: the note is not stacked
    again = node_checks.workload_reuse(_report(workload=got), "n1", "580.95.05", [[], [], []], _PASSED)
    assert again["evidence"] == got["evidence"]


@pytest.mark.parametrize("previous, node, driver, changes, earlier", [
    pytest.param(_report(), "n1", "580.95.05", [["driver 580.95.05 installed"], [], []], _PASSED, id="driver-changed"),
    pytest.param(_report(), "n1", "580.95.05", [[], ["containerd configured and restarted"], []], _PASSED,
                 id="toolkit-changed"),
    pytest.param(_report(), "n1", "580.95.05", [[], [], ["MIG layout all-1g.10gb"]], _PASSED, id="mig-changed"),
    pytest.param(_report(), "n1", "580.95.05", [None, None, []], _PASSED, id="host-stages-not-run"),
    pytest.param(_report(), "n1", "580.95.05", [], _PASSED, id="no-changes-known"),
    pytest.param(_report(driver="570.172.08"), "n1", "580.95.05", [[], [], []], _PASSED, id="other-driver"),
    pytest.param(_report(), "n1", None, [[], [], []], _PASSED, id="no-driver-read"),
    pytest.param(_report(), "n2", "580.95.05", [[], [], []], _PASSED, id="node-not-in-report"),
    pytest.param("", "n1", "580.95.05", [[], [], []], _PASSED, id="no-report"),
    pytest.param("{not json", "n1", "580.95.05", [[], [], []], _PASSED, id="report-not-json"),
    pytest.param("[1, 2]", "n1", "580.95.05", [[], [], []], _PASSED, id="report-a-list"),
    pytest.param(_report(workload={"check": "workload", "ok": False, "evidence": ["ended Failed"]}),
                 "n1", "580.95.05", [[], [], []], _PASSED, id="last-workload-failed"),
    pytest.param(_report(workload={"check": "workload", "ok": True, "skipped": True, "evidence": ["false"]}),
                 "n1", "580.95.05", [[], [], []], _PASSED, id="last-workload-skipped"),
    pytest.param(_report(), "n1", "580.95.05", [[], [], []],
                 _PASSED[:3] + [{"check": "allocatable", "ok": False, "evidence": ["nvidia.com/gpu=0"]}],
                 id="an-earlier-check-fails-now"),
])
def test_workload_reuse_runs_the_workload_when_anything_is_new_or_unknown(previous, node, driver, changes, earlier):
    assert node_checks.workload_reuse(previous, node, driver, changes, earlier) is None


# ---- DRA: ResourceSlices against NVML --------------------------------------------------------------

def slice_of(node, devices, driver="gpu.nvidia.com"):
    def device(name, kind, u):
        attributes = {"type": {"string": kind}, "uuid": {"string": u}, "productName": {"string": H100}}
        return {"name": name, "attributes": attributes, "capacity": {"memory": {"value": "81559Mi"}}}
    return {"spec": {"driver": driver, "nodeName": node, "pool": {"name": node},
                     "devices": [device(*triple) for triple in devices]}}


def test_dra_slice_devices_reads_the_nodes_devices_of_the_gpu_driver_only():
    slices = [slice_of("n1", [("gpu-0", "gpu", uuid(0)), ("gpu-1", "gpu", uuid(1))]),
              slice_of("n2", [("gpu-0", "gpu", uuid(5))]),
              slice_of("n1", [("channel-0", "channel", "x")], driver="compute-domain.nvidia.com")]
    assert node_checks.dra_slice_devices(slices, "n1") == [
        {"name": "gpu-0", "type": "gpu", "uuid": uuid(0)}, {"name": "gpu-1", "type": "gpu", "uuid": uuid(1)}]
    assert node_checks.dra_slice_devices([], "n1") == []


def devices(*triples):
    return [{"name": n, "type": k, "uuid": u} for n, k, u in triples]


def test_dra_slices_that_list_every_gpu_pass():
    assert node_checks.dra_slice_problems(HGX, devices(*[("gpu-%d" % n, "gpu", uuid(n)) for n in range(8)])) == []


def test_dra_slices_name_a_missing_gpu_a_foreign_device_and_a_wrong_type():
    got = devices(*[("gpu-%d" % n, "gpu", uuid(n)) for n in range(6)], ("gpu-6", "mig", uuid(6)),
                  ("gpu-9", "gpu", "GPU-from-elsewhere"))
    assert node_checks.dra_slice_problems(HGX, got) == [
        "GPU 7 (%s) is in NVML but in no ResourceSlice of gpu.nvidia.com" % uuid(7),
        "ResourceSlice device gpu-9 (GPU-from-elsewhere) is not a device NVML lists",
        "GPU 6 (%s) is published as type mig, not gpu" % uuid(6),
    ]


def test_dra_slices_list_the_mig_devices_of_a_gpu_in_mig_mode_and_not_a_lost_gpu():
    gpus = [make_gpu(0, mig_devices=2)] + [make_gpu(n) for n in range(1, 7)] + [make_gpu(7, lost=True)]
    info = node_info(gpus)
    want = devices(("gpu-0-mig-1-0", "mig", mig_uuid(0, 0)), ("gpu-0-mig-1-1", "mig", mig_uuid(0, 1)),
                   *[("gpu-%d" % n, "gpu", uuid(n)) for n in range(1, 7)])
    assert node_checks.dra_slice_problems(info, want) == []
    # the GPU itself listed instead of its MIG devices
    wrong = devices(("gpu-0", "gpu", uuid(0)), *[("gpu-%d" % n, "gpu", uuid(n)) for n in range(1, 7)])
    assert node_checks.dra_slice_problems(info, wrong) == [
        "MIG device %s of GPU 0 is in NVML but in no ResourceSlice of gpu.nvidia.com" % mig_uuid(0, 0),
        "MIG device %s of GPU 0 is in NVML but in no ResourceSlice of gpu.nvidia.com" % mig_uuid(0, 1),
        "ResourceSlice device gpu-0 (%s) is not a device NVML lists" % uuid(0),
    ]


def test_nvml_devices_are_what_the_dra_driver_publishes_and_the_comparison_takes_them():
    gpus = [make_gpu(0, mig_devices=2), make_gpu(1), make_gpu(2, lost=True)]
    listed = node_checks.nvml_devices(node_info(gpus))
    assert [(d["uuid"], d["type"]) for d in listed] == [(mig_uuid(0, 0), "mig"), (mig_uuid(0, 1), "mig"), (uuid(1), "gpu")]
    assert listed[2]["what"] == "GPU 1 (%s)" % uuid(1)
    # the audit passes them as read on the node (no gpu_info there)
    have = devices(("gpu-0-mig-1-0", "mig", mig_uuid(0, 0)), ("gpu-1", "gpu", uuid(1)))
    assert node_checks.dra_device_problems(listed, have) == [
        "MIG device %s of GPU 0 is in NVML but in no ResourceSlice of gpu.nvidia.com" % mig_uuid(0, 1)]


def test_the_claims_holding_the_dra_drivers_devices_are_named():
    def claim(ns, name, *drivers):
        status = {"allocation": {"devices": {"results": [{"driver": d, "pool": "n1", "device": "gpu-0"} for d in drivers]}}} \
            if drivers else {}
        return {"metadata": {"namespace": ns, "name": name}, "status": status}
    claims = [claim("ml", "train-gpu"), claim("ml", "infer-gpu", "gpu.nvidia.com"),
              claim("net", "nic", "dra.net.example.com"), claim("a", "both", "dra.net.example.com", "gpu.nvidia.com")]
    assert node_checks.dra_allocated_claims(claims) == ["a/both", "ml/infer-gpu"]
    assert node_checks.dra_allocated_claims([]) == []


# ---- DRA: the test pod's ResourceClaim ----------------------------------------------------------

def test_the_test_claim_asks_for_a_whole_gpu_by_the_product_name_nvml_gives():
    request = node_checks.dra_claim_request(HGX)
    assert request == {"device_class": "gpu.nvidia.com", "type": "gpu", "attribute": "productName", "value": H100,
                       "what": "productName NVIDIA H100 80GB HBM3",
                       "expression": "device.attributes['gpu.nvidia.com'].productName == \"NVIDIA H100 80GB HBM3\""}
    # a GPU lost and one in MIG mode are passed over for a whole one
    gpus = [make_gpu(0, lost=True), make_gpu(1, mig_devices=2), make_gpu(2, name="NVIDIA L40S")]
    assert node_checks.dra_claim_request(node_info(gpus))["what"] == "productName NVIDIA L40S"


def mig_node():
    """One H100 in MIG mode: two MIG devices, of GPU instances 5 (3g.40gb) and 6 (1g.10gb)."""
    gpu = make_gpu(0, mig_devices=2)
    gpu["mig"]["gpu_instances"] = [{"id": 5, "profile": "3g.40gb"}, {"id": 6, "profile": "1g.10gb"}]
    gpu["mig"]["devices"][0]["gpu_instance_id"] = 5
    gpu["mig"]["devices"][1]["gpu_instance_id"] = 6
    return node_info([gpu])


def test_the_test_claim_asks_for_a_mig_device_by_its_profile_when_every_gpu_is_in_mig_mode():
    request = node_checks.dra_claim_request(mig_node())
    assert request["device_class"] == "mig.nvidia.com" and request["what"] == "profile 3g.40gb"
    assert request["expression"] == "device.attributes['gpu.nvidia.com'].profile == \"3g.40gb\""
    # nothing NVML could read: any device (the host check has failed already)
    assert node_checks.dra_claim_request(node_info([make_gpu(0, lost=True)]))["expression"] == "true"


SLICE = devices(*[("gpu-%d" % n, "gpu", uuid(n)) for n in range(8)])
MIG_SLICE = devices(("gpu-0-mig-5-0", "mig", mig_uuid(0, 0)), ("gpu-0-mig-6-0", "mig", mig_uuid(0, 1)))


def smi(*uuids, mig=None):
    text = "".join("GPU %d: NVIDIA H100 80GB HBM3 (UUID: %s)\n" % (n, u) for n, u in enumerate(uuids))
    return text + ("  MIG 3g.40gb     Device  0: (UUID: %s)\n" % mig if mig else "")


def test_the_test_pod_saw_one_published_device_its_claim_selects():
    assert node_checks.dra_claim_problems(node_checks.dra_claim_request(HGX), HGX, SLICE, smi(uuid(3))) == []
    # a MIG device: the pod sees its GPU and, below it, the one MIG device of the profile asked for
    node = mig_node()
    request = node_checks.dra_claim_request(node)
    assert node_checks.dra_claim_problems(request, node, MIG_SLICE, smi(uuid(0), mig=mig_uuid(0, 0))) == []
    # (no device, or more than one: smi_problems names that)
    assert node_checks.dra_claim_problems(request, node, MIG_SLICE, "") == []


def test_a_device_the_slices_do_not_publish_another_type_or_another_model_is_named():
    request = node_checks.dra_claim_request(HGX)
    assert node_checks.dra_claim_problems(request, HGX, SLICE[:3], smi(uuid(3))) == [
        "nvidia-smi in the test pod shows %s, which the node's ResourceSlices of gpu.nvidia.com do not publish" % uuid(3)]
    node = mig_node()
    assert node_checks.dra_claim_problems(node_checks.dra_claim_request(HGX), node, MIG_SLICE,
                                          smi(uuid(0), mig=mig_uuid(0, 0))) == [
        "nvidia-smi in the test pod shows %s, a device of type mig, but its ResourceClaim asked for one of type gpu "
        "(gpu.nvidia.com)" % mig_uuid(0, 0)]
    # the MIG device of another profile than the one selected
    assert node_checks.dra_claim_problems(node_checks.dra_claim_request(node), node, MIG_SLICE,
                                          smi(uuid(0), mig=mig_uuid(0, 1))) == [
        "nvidia-smi in the test pod shows %s, whose profile is 1g.10gb, but its ResourceClaim selected profile 3g.40gb"
        % mig_uuid(0, 1)]
    mixed = node_info([make_gpu(0), make_gpu(1, name="NVIDIA L40S")])
    assert node_checks.dra_claim_problems(node_checks.dra_claim_request(mixed), mixed, SLICE, smi(uuid(1))) == [
        "nvidia-smi in the test pod shows %s, whose productName is NVIDIA L40S, but its ResourceClaim selected "
        "productName NVIDIA H100 80GB HBM3" % uuid(1)]

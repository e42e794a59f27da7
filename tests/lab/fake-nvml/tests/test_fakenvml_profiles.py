"""Every profile loads and describes a realistic, self-consistent node."""

import ctypes

import pynvml
import pytest

from fakenvml_util import (
    BUS_ID_RE,
    UUID_RE,
    all_profiles,
    handles,
    nvml_raises,
    profile_path,
    run_with_gpus,
)

MIB = 1 << 20

# name, count, memory MiB, cc, arch, PCI device id, NVLinks, MIG table, PCIe gen, driver, CUDA
EXPECTED = {
    "hgx-h100": (
        "NVIDIA H100 80GB HBM3",
        8,
        81559,
        (9, 0),
        pynvml.NVML_DEVICE_ARCH_HOPPER,
        0x233010DE,
        18,
        True,
        5,
        "570.172.08",
        12080,
    ),
    "hgx-h200": (
        "NVIDIA H200",
        8,
        143771,
        (9, 0),
        pynvml.NVML_DEVICE_ARCH_HOPPER,
        0x233510DE,
        18,
        True,
        5,
        "575.57.08",
        12090,
    ),
    "hgx-b200": (
        "NVIDIA B200",
        8,
        183359,
        (10, 0),
        pynvml.NVML_DEVICE_ARCH_BLACKWELL,
        0x290110DE,
        18,
        True,
        5,
        "580.95.05",
        13000,
    ),
    "dgx-a100": (
        "NVIDIA A100-SXM4-40GB",
        8,
        40960,
        (8, 0),
        pynvml.NVML_DEVICE_ARCH_AMPERE,
        0x20B010DE,
        12,
        True,
        4,
        "535.261.03",
        12020,
    ),
    "a100-80gb-pcie-x2": (
        "NVIDIA A100 80GB PCIe",
        2,
        81920,
        (8, 0),
        pynvml.NVML_DEVICE_ARCH_AMPERE,
        0x20B510DE,
        12,
        True,
        4,
        "550.163.01",
        12040,
    ),
    "rtx-pro-6000-x4": (
        "NVIDIA RTX PRO 6000 Blackwell Server Edition",
        4,
        97887,
        (12, 0),
        pynvml.NVML_DEVICE_ARCH_BLACKWELL,
        0x2BB510DE,
        0,
        True,
        5,
        "580.95.05",
        13000,
    ),
    "l40s-x4": (
        "NVIDIA L40S",
        4,
        46068,
        (8, 9),
        pynvml.NVML_DEVICE_ARCH_ADA,
        0x26B910DE,
        0,
        False,
        4,
        "580.95.05",
        13000,
    ),
    "t4-x1": (
        "Tesla T4",
        1,
        15360,
        (7, 5),
        pynvml.NVML_DEVICE_ARCH_TURING,
        0x1EB810DE,
        0,
        False,
        3,
        "535.247.01",
        12020,
    ),
}
EXPECTED["hgx-h100-faults"] = EXPECTED["hgx-h100"]
for derived in ("dgx-a100-mig-pending", "dgx-a100-mig-in-use"):
    EXPECTED[derived] = EXPECTED["dgx-a100"]
DRIVER_ERRORS = {
    "driver-not-loaded": pynvml.NVML_ERROR_DRIVER_NOT_LOADED,
    "version-mismatch": pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH,
}


def test_every_profile_is_known_to_the_tests():
    assert set(all_profiles()) == set(EXPECTED) | set(DRIVER_ERRORS)


@pytest.mark.parametrize("profile", sorted(DRIVER_ERRORS))
def test_driver_state_profiles(nvml, profile):
    with nvml_raises(DRIVER_ERRORS[profile]):
        nvml(profile)


@pytest.mark.parametrize("profile", sorted(EXPECTED))
def test_profile_node(nvml, profile):
    name, count, mem_mib, cc, arch, devid, links, mig, gen, driver, cuda = EXPECTED[
        profile
    ]
    n = nvml(profile)
    assert n.nvmlSystemGetDriverVersion() == driver
    assert n.nvmlSystemGetCudaDriverVersion() == cuda
    assert n.nvmlSystemGetCudaDriverVersion_v2() == cuda
    assert n.nvmlSystemGetNVMLVersion() == f"{cuda // 1000}.{driver}"
    assert n.nvmlDeviceGetCount() == count
    hs = handles()
    uuids, buses, serials, minors = set(), set(), set(), set()
    for i, h in enumerate(hs):
        if profile == "hgx-h100-faults" and i == 7:
            continue  # lost GPU, see test_fakenvml_faults
        assert n.nvmlDeviceGetIndex(h) == i
        assert n.nvmlDeviceGetName(h) == name
        uuid = n.nvmlDeviceGetUUID(h)
        assert UUID_RE.match(uuid), uuid
        pci = n.nvmlDeviceGetPciInfo(h)
        bus_id = pci.busId
        assert BUS_ID_RE.match(bus_id), bus_id
        assert bus_id == "%08X:%02X:%02X.0" % (pci.domain, pci.bus, pci.device)
        assert pci.busIdLegacy == "%04X:%02X:%02X.0" % (pci.domain, pci.bus, pci.device)
        assert pci.pciDeviceId == devid
        assert pci.pciSubSystemId & 0xFFFF == 0x10DE
        assert n.nvmlDeviceGetMemoryInfo(h).total == mem_mib * MIB
        assert n.nvmlDeviceGetCudaComputeCapability(h) == cc
        assert n.nvmlDeviceGetArchitecture(h) == arch
        assert n.nvmlDeviceGetMaxPcieLinkGeneration(h) == gen
        assert n.nvmlDeviceGetGpuMaxPcieLinkGeneration(h) == gen
        assert n.nvmlDeviceGetMaxPcieLinkWidth(h) == 16
        assert n.nvmlDeviceGetPowerUsage(h) < n.nvmlDeviceGetEnforcedPowerLimit(h)
        assert n.nvmlDeviceGetMaxClockInfo(
            h, n.NVML_CLOCK_SM
        ) >= n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM)
        assert n.nvmlDeviceGetVbiosVersion(h)
        assert n.nvmlDeviceGetBoardPartNumber(h)
        uuids.add(uuid)
        buses.add(bus_id)
        serials.add(n.nvmlDeviceGetSerial(h))
        minors.add(n.nvmlDeviceGetMinorNumber(h))
        # round trips through the other lookups
        assert n.nvmlDeviceGetIndex(n.nvmlDeviceGetHandleByUUID(uuid)) == i
        assert n.nvmlDeviceGetIndex(n.nvmlDeviceGetHandleByPciBusId(bus_id)) == i
        assert (
            n.nvmlDeviceGetIndex(n.nvmlDeviceGetHandleByPciBusId(bus_id.lower())) == i
        )
        if links:
            assert n.nvmlDeviceGetNvLinkState(h, links - 1) in (0, 1)
            with nvml_raises(n.NVML_ERROR_INVALID_ARGUMENT):
                n.nvmlDeviceGetNvLinkState(h, links)
        else:
            with nvml_raises(n.NVML_ERROR_NOT_SUPPORTED):
                n.nvmlDeviceGetNvLinkState(h, 0)
        if mig:
            assert n.nvmlDeviceGetMigMode(h) == [0, 0]
        else:
            with nvml_raises(n.NVML_ERROR_NOT_SUPPORTED):
                n.nvmlDeviceGetMigMode(h)
    healthy = count - (1 if profile == "hgx-h100-faults" else 0)
    assert len(uuids) == len(buses) == len(serials) == len(minors) == healthy


def test_uuids_are_deterministic_and_per_node(nvml, tmp_path, monkeypatch):
    def uuids(profile):
        n = nvml(profile)
        out = [n.nvmlDeviceGetUUID(h) for h in handles()]
        n.nvmlShutdown()
        return out

    a, b = uuids("hgx-h100"), uuids("hgx-h100")
    assert a == b
    # derived fault profiles describe the same machine
    assert uuids("dgx-a100-mig-pending") == uuids("dgx-a100")
    assert not set(uuids("hgx-h200")) & set(a)
    assert not set(uuids("hgx-b200")) & set(a)


def test_bus_ids_of_dgx_a100(nvml):
    n = nvml("dgx-a100")
    assert [n.nvmlDeviceGetPciInfo(h).busId for h in handles()] == [
        "00000000:%s:00.0" % b for b in ("07", "0F", "47", "4E", "87", "90", "B7", "BD")
    ]


def test_topology_hgx_h100(nvml):
    n = nvml("hgx-h100")
    hs = handles()
    assert [n.nvmlDeviceGetNumaNodeId(h) for h in hs] == [0, 0, 0, 0, 1, 1, 1, 1]
    assert (
        n.nvmlDeviceGetTopologyCommonAncestor(hs[0], hs[0]) == n.NVML_TOPOLOGY_INTERNAL
    )
    assert n.nvmlDeviceGetTopologyCommonAncestor(hs[0], hs[3]) == n.NVML_TOPOLOGY_NODE
    assert n.nvmlDeviceGetTopologyCommonAncestor(hs[3], hs[4]) == n.NVML_TOPOLOGY_SYSTEM
    for a in hs:
        for b in hs:
            if a is not b and n.nvmlDeviceGetIndex(a) != n.nvmlDeviceGetIndex(b):
                assert (
                    n.nvmlDeviceGetP2PStatus(a, b, n.NVML_P2P_CAPS_INDEX_NVLINK)
                    == n.NVML_P2P_STATUS_OK
                )
        for link in range(18):
            assert n.nvmlDeviceGetNvLinkState(a, link) == n.NVML_FEATURE_ENABLED
            assert (
                n.nvmlDeviceGetNvLinkRemoteDeviceType(a, link)
                == n.NVML_NVLINK_DEVICE_TYPE_SWITCH
            )


def test_cpu_affinity_follows_numa(nvml):
    n = nvml("hgx-h100")
    hs = handles()

    def cpus(h):
        words = n.nvmlDeviceGetCpuAffinity(h, 4)
        return {w * 64 + b for w in range(4) for b in range(64) if words[w] >> b & 1}

    assert cpus(hs[0]) == set(range(0, 56)) | set(range(112, 168))
    assert cpus(hs[7]) == set(range(56, 112)) | set(range(168, 224))


def test_dgx_a100_topology(nvml):
    n = nvml("dgx-a100")
    hs = handles()
    assert [n.nvmlDeviceGetNumaNodeId(h) for h in hs] == [3, 3, 1, 1, 7, 7, 5, 5]
    assert n.nvmlDeviceGetTopologyCommonAncestor(hs[0], hs[1]) == n.NVML_TOPOLOGY_SINGLE
    assert n.nvmlDeviceGetTopologyCommonAncestor(hs[1], hs[2]) == n.NVML_TOPOLOGY_SYSTEM
    words = n.nvmlDeviceGetCpuAffinity(hs[0], 4)
    got = {w * 64 + b for w in range(4) for b in range(64) if words[w] >> b & 1}
    assert got == set(range(48, 64)) | set(range(176, 192))


def test_a100_pcie_nvlink_bridge(nvml):
    n = nvml("a100-80gb-pcie-x2")
    a, b = handles()
    assert n.nvmlDeviceGetNvLinkRemoteDeviceType(a, 0) == n.NVML_NVLINK_DEVICE_TYPE_GPU
    remote = n.nvmlDeviceGetNvLinkRemotePciInfo(a, 11)
    assert remote.busId == n.nvmlDeviceGetPciInfo(b).busId
    assert remote.pciDeviceId == 0x20B510DE
    assert (
        n.nvmlDeviceGetP2PStatus(a, b, n.NVML_P2P_CAPS_INDEX_NVLINK)
        == n.NVML_P2P_STATUS_OK
    )
    assert n.nvmlDeviceGetTopologyCommonAncestor(a, b) == n.NVML_TOPOLOGY_NODE


def test_l40s_no_nvlink_pcie_p2p(nvml):
    n = nvml("l40s-x4")
    hs = handles()
    assert (
        n.nvmlDeviceGetP2PStatus(hs[0], hs[1], n.NVML_P2P_CAPS_INDEX_NVLINK)
        == n.NVML_P2P_STATUS_NOT_SUPPORTED
    )
    # pynvml 13.615.71 defines NVML_P2P_CAPS_INDEX_READ as the tuple (0,): use 0
    assert n.nvmlDeviceGetP2PStatus(hs[0], hs[1], 0) == n.NVML_P2P_STATUS_OK
    assert n.nvmlDeviceGetTopologyCommonAncestor(hs[0], hs[1]) == n.NVML_TOPOLOGY_SINGLE
    for fn in (
        n.nvmlDeviceGetNvLinkState,
        n.nvmlDeviceGetNvLinkRemoteDeviceType,
        n.nvmlDeviceGetNvLinkRemotePciInfo,
    ):
        with nvml_raises(n.NVML_ERROR_NOT_SUPPORTED):
            fn(hs[0], 0)


# ---- the profile format ----


def write(tmp_path, name, text):
    p = tmp_path / f"{name}.profile"
    p.write_text(text)
    return p


MINI = """
description = tiny test node
[node]
driver_version = 999.1.2
cuda_driver_version = 13010
gpu_count = 3
numa0_cpus = 0-3
numa1_cpus = 4-7
[gpu]
name = NVIDIA Test GPU
architecture = hopper
compute_capability = 9.0
pci_bus_id = 0000ABCD:{i|0A,0B,0C}:00.0
memory_total_mib = 1024
serial = 100{i}
numa_node = {i|0, 1, 1}
[gpu.2]
name = NVIDIA Odd One
"""


def test_format_substitution_and_overrides(nvml, tmp_path):
    n = nvml(write(tmp_path, "mini", MINI))
    hs = handles()
    assert n.nvmlSystemGetNVMLVersion() == "13.999.1.2"  # default: CUDA major + driver
    assert [n.nvmlDeviceGetName(h) for h in hs] == [
        "NVIDIA Test GPU",
        "NVIDIA Test GPU",
        "NVIDIA Odd One",
    ]
    assert [n.nvmlDeviceGetSerial(h) for h in hs] == ["1000", "1001", "1002"]
    assert [n.nvmlDeviceGetPciInfo(h).busId for h in hs] == [
        "0000ABCD:0A:00.0",
        "0000ABCD:0B:00.0",
        "0000ABCD:0C:00.0",
    ]
    assert [n.nvmlDeviceGetNumaNodeId(h) for h in hs] == [0, 1, 1]
    assert n.nvmlDeviceGetCpuAffinity(hs[1], 1)[0] == 0xF0
    assert n.nvmlDeviceGetIndex(n.nvmlDeviceGetHandleByPciBusId("ABCD:0C:00.0")) == 2
    with nvml_raises(n.NVML_ERROR_NOT_FOUND):
        n.nvmlDeviceGetHandleByPciBusId("0000ABCD:0D:00.0")
    with nvml_raises(n.NVML_ERROR_INVALID_ARGUMENT):
        n.nvmlDeviceGetHandleByPciBusId("not-a-bus-id")
    # no board part number in the profile: the query is unsupported, as on boards without one
    with nvml_raises(n.NVML_ERROR_NOT_SUPPORTED):
        n.nvmlDeviceGetBoardPartNumber(hs[0])


def test_format_include_and_override(nvml, tmp_path):
    write(tmp_path, "mini", MINI)
    child = write(
        tmp_path,
        "child",
        "include = mini\n[node]\ngpu_count = 2\n[gpu.1]\nname = Renamed\n",
    )
    n = nvml(child)
    assert n.nvmlDeviceGetCount() == 2
    assert [n.nvmlDeviceGetName(h) for h in handles()] == ["NVIDIA Test GPU", "Renamed"]


@pytest.mark.parametrize(
    "text, message",
    [
        (MINI + "bogus_key = 1\n", "unknown key 'bogus_key'"),
        (MINI + "[gpu.0]\nmemory_total_mib = lots\n", "not a non-negative number"),
        (MINI + "[gpu]\npci_bus_id = 00000000:{i|01,02}:00.0\n", "has no element 2"),
        (MINI + "[gpu]\nuuid = GPU-same\n", "share UUID"),
        (MINI + "[weird]\n", "unknown section [weird]"),
        (MINI + "include = does-not-exist\n", "cannot include 'does-not-exist'"),
        (MINI + "[gpu]\nmig_table = z100\n", "unknown MIG table 'z100'"),
        (MINI + "[gpu]\narchitecture = fermi\n", "unexpected value 'fermi'"),
    ],
)
def test_format_errors_fail_init_loudly(nvml, tmp_path, capfd, text, message):
    with nvml_raises(pynvml.NVML_ERROR_UNKNOWN):
        nvml(write(tmp_path, "bad", text))
    err = capfd.readouterr().err
    assert "gpuops-fake-nvml:" in err and message in err, err


def test_missing_profile_means_no_driver(nvml, tmp_path):
    with nvml_raises(pynvml.NVML_ERROR_DRIVER_NOT_LOADED):
        nvml(tmp_path / "nope.profile")


def test_installed_default_paths(monkeypatch, tmp_path):
    # without GPUOPS_FAKE_NVML_PROFILE the lab-container path is used
    monkeypatch.delenv("GPUOPS_FAKE_NVML_PROFILE", raising=False)
    monkeypatch.delenv("GPUOPS_FAKE_NVML_STATE", raising=False)
    import os

    if os.path.exists("/etc/gpuops-fake-nvml/profile"):
        pytest.skip("a fake NVML profile is installed on this machine")
    with nvml_raises(pynvml.NVML_ERROR_DRIVER_NOT_LOADED):
        pynvml.nvmlInit()


def test_profile_is_reread_at_every_init(nvml):
    n = nvml("t4-x1")
    assert n.nvmlDeviceGetCount() == 1
    n.nvmlShutdown()
    n = nvml("l40s-x4")
    assert n.nvmlDeviceGetCount() == 4
    assert n.nvmlDeviceGetName(n.nvmlDeviceGetHandleByIndex(3)) == "NVIDIA L40S"


def test_with_gpus_list_shows_every_profile():
    out = run_with_gpus("--list").stdout
    lines = {line.split()[0]: line for line in out.splitlines() if line.strip()}
    assert set(lines) == set(all_profiles()) | {"none"}
    for name, line in lines.items():
        assert len(line.split(None, 1)) == 2, f"{name} has no description"
    assert "H100 80GB HBM3" in lines["hgx-h100"]


def test_description_key_present_in_every_profile():
    for name in all_profiles():
        text = profile_path(name).read_text()
        assert any(l.strip().startswith("description") for l in text.splitlines()), name


def test_memory_info_versions(nvml):
    n = nvml("hgx-h100")
    h = n.nvmlDeviceGetHandleByIndex(0)
    v1 = n.nvmlDeviceGetMemoryInfo(h)
    v2 = n.nvmlDeviceGetMemoryInfo(h, version=n.nvmlMemory_v2)
    assert v1.total == v2.total == 81559 * MIB
    assert v2.reserved == 555 * MIB
    assert v1.used == v2.used + v2.reserved  # v1 counts reserved memory as used
    assert v1.free == v2.free == v2.total - v2.reserved - v2.used
    with nvml_raises(n.NVML_ERROR_ARGUMENT_VERSION_MISMATCH):
        n.nvmlDeviceGetMemoryInfo(h, version=0x01000028)
    ctypes.sizeof(
        v2
    )  # struct layout matches nvml.h (checked by the compiler on the C side)

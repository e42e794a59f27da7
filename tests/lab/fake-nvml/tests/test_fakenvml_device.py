"""Per-device queries on healthy nodes, unsupported features, bad arguments."""

from fakenvml_util import handles, nvml_raises


def test_hgx_h100_gpu0(h100):
    n = h100
    h = n.nvmlDeviceGetHandleByIndex(0)
    assert n.nvmlDeviceGetPersistenceMode(h) == n.NVML_FEATURE_ENABLED
    assert n.nvmlDeviceGetPowerUsage(h) == 71342
    assert n.nvmlDeviceGetEnforcedPowerLimit(h) == 700000
    assert n.nvmlDeviceGetPowerManagementLimit(h) == 700000
    assert n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU) == 31
    assert [n.nvmlDeviceGetClockInfo(h, c) for c in range(4)] == [345, 345, 2619, 765]
    assert [n.nvmlDeviceGetMaxClockInfo(h, c) for c in range(4)] == [
        1980,
        1980,
        2619,
        1545,
    ]
    assert n.nvmlDeviceGetCurrPcieLinkGeneration(h) == 5
    assert n.nvmlDeviceGetCurrPcieLinkWidth(h) == 16
    util = n.nvmlDeviceGetUtilizationRates(h)
    assert (util.gpu, util.memory) == (0, 0)
    assert n.nvmlDeviceGetEccMode(h) == [n.NVML_FEATURE_ENABLED, n.NVML_FEATURE_ENABLED]
    for et in (
        n.NVML_MEMORY_ERROR_TYPE_CORRECTED,
        n.NVML_MEMORY_ERROR_TYPE_UNCORRECTED,
    ):
        for ct in (n.NVML_VOLATILE_ECC, n.NVML_AGGREGATE_ECC):
            assert n.nvmlDeviceGetTotalEccErrors(h, et, ct) == 0
    assert n.nvmlDeviceGetRemappedRows(h) == (0, 0, 0, 0)
    assert n.nvmlDeviceGetCurrentClocksEventReasons(h) == n.nvmlClocksEventReasonGpuIdle
    assert (
        n.nvmlDeviceGetCurrentClocksThrottleReasons(h)
        == n.nvmlClocksThrottleReasonGpuIdle
    )
    assert n.nvmlDeviceGetSupportedEventTypes(h) == (
        n.nvmlEventTypeSingleBitEccError
        | n.nvmlEventTypeDoubleBitEccError
        | n.nvmlEventTypePState
        | n.nvmlEventTypeXidCriticalError
        | n.nvmlEventTypeClock
    )
    assert n.nvmlDeviceGetBoardPartNumber(h) == "692-2G520-0200-000"
    assert n.nvmlDeviceGetVbiosVersion(h) == "96.00.99.00.01"
    assert n.nvmlDeviceGetSerial(h) == "1652223008145"
    assert n.nvmlDeviceGetMinorNumber(h) == 0
    assert n.nvmlDeviceGetPciInfo(h).pciSubSystemId == 0x16C110DE


def test_nvlink_remote_switches(h100):
    n = h100
    h = n.nvmlDeviceGetHandleByIndex(2)
    switches = [n.nvmlDeviceGetNvLinkRemotePciInfo(h, link) for link in range(18)]
    assert {s.pciDeviceId for s in switches} == {0x22A310DE}
    assert sorted({s.busId for s in switches}) == [
        "00000000:05:00.0",
        "00000000:06:00.0",
        "00000000:07:00.0",
        "00000000:08:00.0",
    ]
    with nvml_raises(n.NVML_ERROR_INVALID_ARGUMENT):
        n.nvmlDeviceGetNvLinkRemotePciInfo(h, 18)
    with nvml_raises(n.NVML_ERROR_INVALID_ARGUMENT):
        n.nvmlDeviceGetNvLinkRemoteDeviceType(h, 36)


def test_p2p_caps(h100):
    n = h100
    a, b = handles()[:2]
    for idx in (
        0,
        n.NVML_P2P_CAPS_INDEX_WRITE,
        n.NVML_P2P_CAPS_INDEX_NVLINK,
        n.NVML_P2P_CAPS_INDEX_ATOMICS,
        n.NVML_P2P_CAPS_INDEX_PCI,
    ):
        assert n.nvmlDeviceGetP2PStatus(a, b, idx) == n.NVML_P2P_STATUS_OK
    with nvml_raises(n.NVML_ERROR_INVALID_ARGUMENT):
        n.nvmlDeviceGetP2PStatus(a, b, n.NVML_P2P_CAPS_INDEX_UNKNOWN)
    with nvml_raises(n.NVML_ERROR_INVALID_ARGUMENT):
        n.nvmlDeviceGetP2PStatus(a, a, n.NVML_P2P_CAPS_INDEX_NVLINK)


def test_bad_arguments(h100):
    n = h100
    h = n.nvmlDeviceGetHandleByIndex(0)
    with nvml_raises(n.NVML_ERROR_INVALID_ARGUMENT):
        n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_COUNT)
    with nvml_raises(n.NVML_ERROR_INVALID_ARGUMENT):
        n.nvmlDeviceGetMaxClockInfo(h, 7)
    with nvml_raises(n.NVML_ERROR_INVALID_ARGUMENT):
        n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_COUNT)
    with nvml_raises(n.NVML_ERROR_NOT_SUPPORTED):
        n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU_MAX)
    with nvml_raises(n.NVML_ERROR_INVALID_ARGUMENT):
        n.nvmlDeviceGetTotalEccErrors(
            h, n.NVML_MEMORY_ERROR_TYPE_COUNT, n.NVML_VOLATILE_ECC
        )
    with nvml_raises(n.NVML_ERROR_INVALID_ARGUMENT):
        n.nvmlDeviceGetTotalEccErrors(h, n.NVML_MEMORY_ERROR_TYPE_CORRECTED, 2)
    with nvml_raises(n.NVML_ERROR_INVALID_ARGUMENT):
        n.nvmlDeviceGetCpuAffinity(h, 0)


def test_t4_unsupported_features(nvml):
    n = nvml("t4-x1")
    h = n.nvmlDeviceGetHandleByIndex(0)
    assert n.nvmlDeviceGetPersistenceMode(h) == n.NVML_FEATURE_DISABLED
    assert n.nvmlDeviceGetCurrPcieLinkGeneration(h) == 3
    with nvml_raises(n.NVML_ERROR_NOT_SUPPORTED):
        n.nvmlDeviceGetRemappedRows(h)  # Turing retires pages instead
    with nvml_raises(n.NVML_ERROR_NOT_SUPPORTED):
        n.nvmlDeviceGetNvLinkState(h, 0)
    for call in (
        lambda: n.nvmlDeviceGetMigMode(h),
        lambda: n.nvmlDeviceSetMigMode(h, n.NVML_DEVICE_MIG_ENABLE),
        lambda: n.nvmlDeviceGetGpuInstanceProfileInfo(
            h, n.NVML_GPU_INSTANCE_PROFILE_1_SLICE
        ),
        lambda: n.nvmlDeviceGetGpuInstanceRemainingCapacity(h, 19),
        lambda: n.nvmlDeviceCreateGpuInstance(h, 19),
        lambda: n.nvmlDeviceGetMigDeviceHandleByIndex(h, 0),
    ):
        with nvml_raises(n.NVML_ERROR_NOT_SUPPORTED):
            call()
    assert n.nvmlDeviceGetMaxMigDeviceCount(h) == 0
    assert n.nvmlDeviceIsMigDeviceHandle(h).value == 0
    assert n.nvmlDeviceGetCpuAffinity(h, 1)[0] == 0xFFFF
    assert n.nvmlDeviceGetTopologyCommonAncestor(h, h) == n.NVML_TOPOLOGY_INTERNAL


def test_l40s_unsupported_features(nvml):
    n = nvml("l40s-x4")
    h = n.nvmlDeviceGetHandleByIndex(2)
    assert n.nvmlDeviceGetNumaNodeId(h) == 1
    with nvml_raises(n.NVML_ERROR_NOT_SUPPORTED):
        n.nvmlDeviceGetRemappedRows(h)
    with nvml_raises(n.NVML_ERROR_NOT_SUPPORTED):
        n.nvmlDeviceSetMigMode(h, n.NVML_DEVICE_MIG_ENABLE)
    assert n.nvmlDeviceGetMaxMigDeviceCount(h) == 0


def test_temperature_thresholds_as_the_profile_gives_them(h100):
    """nvidia-smi -q's shutdown / slowdown / max operating limits of the HGX H100 board; a bad
    threshold type is INVALID_ARGUMENT."""
    n = h100
    h = n.nvmlDeviceGetHandleByIndex(0)
    assert n.nvmlDeviceGetTemperatureThreshold(h, n.NVML_TEMPERATURE_THRESHOLD_SHUTDOWN) == 92
    assert n.nvmlDeviceGetTemperatureThreshold(h, n.NVML_TEMPERATURE_THRESHOLD_SLOWDOWN) == 89
    assert n.nvmlDeviceGetTemperatureThreshold(h, n.NVML_TEMPERATURE_THRESHOLD_GPU_MAX) == 87
    assert n.nvmlDeviceGetTemperatureThreshold(h, n.NVML_TEMPERATURE_THRESHOLD_MEM_MAX) == 95
    with nvml_raises(n.NVML_ERROR_NOT_SUPPORTED):
        n.nvmlDeviceGetTemperatureThreshold(h, n.NVML_TEMPERATURE_THRESHOLD_ACOUSTIC_MIN)
    with nvml_raises(n.NVML_ERROR_INVALID_ARGUMENT):
        n.nvmlDeviceGetTemperatureThreshold(h, n.NVML_TEMPERATURE_THRESHOLD_COUNT)


def test_brand_addressing_and_virtualization_as_the_dra_driver_reads_them(h100):
    """NVIDIA's DRA kubelet plugin publishes the brand and asks for the addressing and
    virtualization modes: a data-centre GPU reports the NVIDIA brand, no HMM/ATS unless the profile
    says so, and bare metal."""
    import ctypes  # pylint: disable=import-outside-toplevel

    n = h100
    h = n.nvmlDeviceGetHandleByIndex(0)
    assert n.nvmlDeviceGetBrand(h) == n.NVML_BRAND_NVIDIA
    assert n.nvmlDeviceGetVirtualizationMode(h) == n.NVML_GPU_VIRTUALIZATION_MODE_NONE

    class Mode(ctypes.Structure):
        _fields_ = [("version", ctypes.c_uint), ("value", ctypes.c_uint)]

    fn = n._nvmlGetFunctionPointer("nvmlDeviceGetAddressingMode")  # pylint: disable=protected-access
    mode = Mode(version=ctypes.sizeof(Mode) | (1 << 24), value=99)
    assert fn(h, ctypes.byref(mode)) == n.NVML_SUCCESS and mode.value == 0
    assert fn(h, ctypes.byref(Mode(version=0))) == n.NVML_ERROR_ARGUMENT_VERSION_MISMATCH

"""The hgx-h100-faults profile: one fault per GPU."""

import pytest

from fakenvml_util import nvml_raises, profile_path


@pytest.fixture
def faults(nvml):
    return nvml("hgx-h100-faults")


def test_healthy_gpus_are_untouched(faults):
    n = faults
    for i in (0, 6):
        h = n.nvmlDeviceGetHandleByIndex(i)
        assert n.nvmlDeviceGetTotalEccErrors(h, 1, 0) == 0
        assert n.nvmlDeviceGetRemappedRows(h) == (0, 0, 0, 0)
        assert n.nvmlDeviceGetCurrPcieLinkWidth(h) == 16
        assert (
            n.nvmlDeviceGetCurrentClocksEventReasons(h)
            == n.nvmlClocksEventReasonGpuIdle
        )


def test_uncorrectable_ecc(faults):
    n = faults
    h = n.nvmlDeviceGetHandleByIndex(1)
    unc, cor = n.NVML_MEMORY_ERROR_TYPE_UNCORRECTED, n.NVML_MEMORY_ERROR_TYPE_CORRECTED
    assert n.nvmlDeviceGetTotalEccErrors(h, unc, n.NVML_VOLATILE_ECC) == 2
    assert n.nvmlDeviceGetTotalEccErrors(h, unc, n.NVML_AGGREGATE_ECC) == 3
    assert n.nvmlDeviceGetTotalEccErrors(h, cor, n.NVML_VOLATILE_ECC) == 14
    assert n.nvmlDeviceGetTotalEccErrors(h, cor, n.NVML_AGGREGATE_ECC) == 211


def test_remapped_row_failure(faults):
    n = faults
    corr, unc, pending, failure = n.nvmlDeviceGetRemappedRows(
        n.nvmlDeviceGetHandleByIndex(2)
    )
    assert (corr, unc, pending, failure) == (5, 9, 1, 1)


def test_degraded_pcie_link(faults):
    n = faults
    h = n.nvmlDeviceGetHandleByIndex(3)
    assert n.nvmlDeviceGetCurrPcieLinkGeneration(h) == 3
    assert n.nvmlDeviceGetCurrPcieLinkWidth(h) == 8
    assert n.nvmlDeviceGetMaxPcieLinkGeneration(h) == 5
    assert n.nvmlDeviceGetGpuMaxPcieLinkGeneration(h) == 5
    assert n.nvmlDeviceGetMaxPcieLinkWidth(h) == 16


def test_clock_event_reasons(faults):
    n = faults
    h = n.nvmlDeviceGetHandleByIndex(4)
    want = (
        n.nvmlClocksEventReasonHwSlowdown
        | n.nvmlClocksEventReasonSwThermalSlowdown
        | n.nvmlClocksEventReasonSwPowerCap
    )
    assert n.nvmlDeviceGetCurrentClocksEventReasons(h) == want
    assert n.nvmlDeviceGetCurrentClocksThrottleReasons(h) == want
    assert n.nvmlDeviceGetTemperature(h, n.NVML_TEMPERATURE_GPU) == 88
    assert n.nvmlDeviceGetClockInfo(h, n.NVML_CLOCK_SM) < n.nvmlDeviceGetMaxClockInfo(
        h, n.NVML_CLOCK_SM
    )
    assert n.nvmlDeviceGetUtilizationRates(h).gpu == 100


def test_nvlinks_down(faults):
    n = faults
    h = n.nvmlDeviceGetHandleByIndex(5)
    states = [n.nvmlDeviceGetNvLinkState(h, link) for link in range(18)]
    assert [i for i, s in enumerate(states) if s == n.NVML_FEATURE_DISABLED] == [
        0,
        7,
        12,
    ]
    assert (
        n.nvmlDeviceGetNvLinkRemoteDeviceType(h, 7) == n.NVML_NVLINK_DEVICE_TYPE_UNKNOWN
    )
    assert (
        n.nvmlDeviceGetNvLinkRemoteDeviceType(h, 8) == n.NVML_NVLINK_DEVICE_TYPE_SWITCH
    )
    with nvml_raises(n.NVML_ERROR_NOT_SUPPORTED):
        n.nvmlDeviceGetNvLinkRemotePciInfo(h, 12)
    # other links still connect it to the fabric
    other = n.nvmlDeviceGetHandleByIndex(0)
    assert (
        n.nvmlDeviceGetP2PStatus(h, other, n.NVML_P2P_CAPS_INDEX_NVLINK)
        == n.NVML_P2P_STATUS_OK
    )


def test_lost_gpu(faults):
    n = faults
    assert n.nvmlDeviceGetCount() == 8  # still enumerated
    h = n.nvmlDeviceGetHandleByIndex(7)
    assert n.nvmlDeviceGetIndex(h) == 7
    assert n.nvmlDeviceGetPciInfo(h).busId == "00000000:DF:00.0"  # known to the host
    assert n.nvmlDeviceIsMigDeviceHandle(h).value == 0
    other = n.nvmlDeviceGetHandleByIndex(0)
    for call in (
        n.nvmlDeviceGetName,
        n.nvmlDeviceGetUUID,
        n.nvmlDeviceGetSerial,
        n.nvmlDeviceGetMemoryInfo,
        n.nvmlDeviceGetPowerUsage,
        n.nvmlDeviceGetUtilizationRates,
        n.nvmlDeviceGetEccMode,
        n.nvmlDeviceGetRemappedRows,
        n.nvmlDeviceGetMigMode,
        n.nvmlDeviceGetNumaNodeId,
        n.nvmlDeviceGetSupportedEventTypes,
        n.nvmlDeviceGetCurrPcieLinkWidth,
        n.nvmlDeviceGetMaxMigDeviceCount,
        lambda d: n.nvmlDeviceGetTemperature(d, 0),
        lambda d: n.nvmlDeviceGetNvLinkState(d, 0),
        lambda d: n.nvmlDeviceGetP2PStatus(d, other, 2),
        lambda d: n.nvmlDeviceSetMigMode(d, 1),
        lambda d: n.nvmlDeviceRegisterEvents(
            d, n.nvmlEventTypeXidCriticalError, n.nvmlEventSetCreate()
        ),
    ):
        with nvml_raises(n.NVML_ERROR_GPU_IS_LOST):
            call(h)
    # handles can still be looked up by UUID on the healthy ones only
    assert n.nvmlDeviceGetName(other) == "NVIDIA H100 80GB HBM3"


def test_lost_at_enumeration(nvml, tmp_path):
    p = tmp_path / "lost.profile"
    p.write_text(
        "include = %s\n[gpu.1]\nlost = enumeration\n" % (profile_path("hgx-h100"))
    )
    n = nvml(p)
    with nvml_raises(n.NVML_ERROR_GPU_IS_LOST):
        n.nvmlDeviceGetHandleByIndex(1)
    with nvml_raises(n.NVML_ERROR_GPU_IS_LOST):
        n.nvmlDeviceGetHandleByPciBusId("00000000:43:00.0")
    assert (
        n.nvmlDeviceGetName(n.nvmlDeviceGetHandleByIndex(2)) == "NVIDIA H100 80GB HBM3"
    )

"""Init/shutdown, error handling and the legacy (unversioned) entry points."""

import ctypes

import pynvml

from fakenvml_util import FAKE_LIB, c_fn, handles, nvml_raises, profile_path


def test_init_is_reference_counted(nvml):
    n = nvml("t4-x1")
    nvml("t4-x1")
    n.nvmlShutdown()
    assert n.nvmlDeviceGetCount() == 1  # still one init outstanding
    n.nvmlShutdown()
    with nvml_raises(n.NVML_ERROR_UNINITIALIZED):
        n.nvmlDeviceGetCount()
    with nvml_raises(n.NVML_ERROR_UNINITIALIZED):
        n.nvmlShutdown()


def test_calls_before_init_are_uninitialized(nvml):
    n = nvml("hgx-h100")
    h = n.nvmlDeviceGetHandleByIndex(0)
    n.nvmlShutdown()
    for call in (
        n.nvmlSystemGetDriverVersion,
        n.nvmlSystemGetNVMLVersion,
        n.nvmlSystemGetCudaDriverVersion,
        n.nvmlSystemGetCudaDriverVersion_v2,
        lambda: n.nvmlDeviceGetHandleByIndex(0),
        lambda: n.nvmlDeviceGetHandleByUUID("GPU-00000000-0000-0000-0000-000000000000"),
        lambda: n.nvmlDeviceGetHandleByPciBusId("00000000:1B:00.0"),
        lambda: n.nvmlDeviceGetName(h),
        lambda: n.nvmlDeviceGetMigMode(h),
        n.nvmlEventSetCreate,
    ):
        with nvml_raises(n.NVML_ERROR_UNINITIALIZED):
            call()


def test_init_with_flags_and_driver_states(monkeypatch, tmp_path):
    monkeypatch.setenv("GPUOPS_FAKE_NVML_STATE", str(tmp_path / "s"))
    monkeypatch.setenv(
        "GPUOPS_FAKE_NVML_PROFILE", str(profile_path("version-mismatch"))
    )
    with nvml_raises(pynvml.NVML_ERROR_LIB_RM_VERSION_MISMATCH) as exc:
        pynvml.nvmlInitWithFlags(0)
    assert str(exc.value) == "RM has detected an NVML/RM version mismatch."
    monkeypatch.setenv(
        "GPUOPS_FAKE_NVML_PROFILE", str(profile_path("driver-not-loaded"))
    )
    with nvml_raises(pynvml.NVML_ERROR_DRIVER_NOT_LOADED) as exc:
        pynvml.nvmlInit()
    assert exc.value.value == 9 and str(exc.value) == "Driver Not Loaded"
    # a failed init leaves nothing initialised
    with nvml_raises(pynvml.NVML_ERROR_UNINITIALIZED):
        pynvml.nvmlShutdown()
    monkeypatch.setenv("GPUOPS_FAKE_NVML_PROFILE", str(profile_path("t4-x1")))
    pynvml.nvmlInitWithFlags(pynvml.NVML_INIT_FLAG_NO_GPUS)
    assert pynvml.nvmlDeviceGetCount() == 1
    pynvml.nvmlShutdown()


def test_error_strings():
    assert pynvml.nvmlErrorString(pynvml.NVML_SUCCESS) == "Success"
    assert (
        pynvml.nvmlErrorString(pynvml.NVML_ERROR_DRIVER_NOT_LOADED)
        == "Driver Not Loaded"
    )
    assert pynvml.nvmlErrorString(pynvml.NVML_ERROR_GPU_IS_LOST) == "GPU is lost"
    assert (
        pynvml.nvmlErrorString(pynvml.NVML_ERROR_IN_USE) == "In use by another client"
    )
    assert pynvml.nvmlErrorString(pynvml.NVML_ERROR_INSUFFICIENT_RESOURCES)
    assert pynvml.nvmlErrorString(12345) == "Unknown Error"


def test_insufficient_size_and_bad_arguments(h100):
    h = h100.nvmlDeviceGetHandleByIndex(0)
    small = ctypes.create_string_buffer(8)
    for name in (
        "nvmlDeviceGetName",
        "nvmlDeviceGetUUID",
        "nvmlDeviceGetSerial",
        "nvmlDeviceGetBoardPartNumber",
        "nvmlDeviceGetVbiosVersion",
    ):
        assert c_fn(name)(h, small, 8) == pynvml.NVML_ERROR_INSUFFICIENT_SIZE, name
        assert c_fn(name)(h, None, 80) == pynvml.NVML_ERROR_INVALID_ARGUMENT, name
    for name in ("nvmlSystemGetDriverVersion", "nvmlSystemGetNVMLVersion"):
        assert c_fn(name)(small, 8) == pynvml.NVML_ERROR_INSUFFICIENT_SIZE, name
    exact = ctypes.create_string_buffer(len("570.172.08") + 1)
    assert c_fn("nvmlSystemGetDriverVersion")(exact, len(exact)) == 0
    assert exact.value == b"570.172.08"
    # garbage and NULL handles are rejected, never dereferenced
    bogus = ctypes.cast(ctypes.c_void_p(0x1000), pynvml.c_nvmlDevice_t)
    with nvml_raises(pynvml.NVML_ERROR_INVALID_ARGUMENT):
        pynvml.nvmlDeviceGetName(bogus)
    with nvml_raises(pynvml.NVML_ERROR_INVALID_ARGUMENT):
        pynvml.nvmlDeviceGetName(pynvml.c_nvmlDevice_t())
    with nvml_raises(pynvml.NVML_ERROR_INVALID_ARGUMENT):
        pynvml.nvmlDeviceGetHandleByIndex(8)
    with nvml_raises(pynvml.NVML_ERROR_NOT_FOUND):
        pynvml.nvmlDeviceGetHandleByUUID("GPU-00000000-0000-0000-0000-000000000000")
    assert c_fn("nvmlDeviceGetCount_v2")(None) == pynvml.NVML_ERROR_INVALID_ARGUMENT


def test_handles_survive_reinit_but_not_a_smaller_node(nvml):
    n = nvml("hgx-h100")
    h7 = n.nvmlDeviceGetHandleByIndex(7)
    n.nvmlShutdown()
    nvml("hgx-h100")
    assert (
        n.nvmlDeviceGetIndex(h7) == 7
    )  # same handle values after re-init, like the real library
    n.nvmlShutdown()
    nvml("t4-x1")
    with nvml_raises(n.NVML_ERROR_INVALID_ARGUMENT):
        n.nvmlDeviceGetName(h7)


def test_legacy_entry_points(monkeypatch, tmp_path):
    """Unversioned symbols kept for old C callers (pynvml never calls them)."""
    monkeypatch.setenv(
        "GPUOPS_FAKE_NVML_PROFILE", str(profile_path("a100-80gb-pcie-x2"))
    )
    monkeypatch.setenv("GPUOPS_FAKE_NVML_STATE", str(tmp_path / "s"))
    assert FAKE_LIB.nvmlInit_v2() == 0
    assert FAKE_LIB.nvmlInit() == 0
    try:
        count = ctypes.c_uint()
        assert (
            FAKE_LIB.nvmlDeviceGetCount(ctypes.byref(count)) == 0 and count.value == 2
        )
        dev = pynvml.c_nvmlDevice_t()
        assert FAKE_LIB.nvmlDeviceGetHandleByIndex(1, ctypes.byref(dev)) == 0
        pci = pynvml.nvmlPciInfo_t()
        assert FAKE_LIB.nvmlDeviceGetPciInfo(dev, ctypes.byref(pci)) == 0
        assert pci.busId == "00000000:65:00.0"
        pci2 = pynvml.nvmlPciInfo_t()
        assert (
            FAKE_LIB.nvmlDeviceGetPciInfo_v2(dev, ctypes.byref(pci2)) == 0
            and pci2.bus == 0x65
        )
        same = pynvml.c_nvmlDevice_t()
        assert (
            FAKE_LIB.nvmlDeviceGetHandleByPciBusId(b"0000:65:00.0", ctypes.byref(same))
            == 0
        )
        assert (
            ctypes.cast(same, ctypes.c_void_p).value
            == ctypes.cast(dev, ctypes.c_void_p).value
        )
        remote = pynvml.nvmlPciInfo_t()
        assert (
            FAKE_LIB.nvmlDeviceGetNvLinkRemotePciInfo(dev, 0, ctypes.byref(remote)) == 0
        )
        assert remote.busId == "00000000:17:00.0"
        n = ctypes.c_uint()
        assert (
            FAKE_LIB.nvmlDeviceGetGpuInstancePossiblePlacements(
                dev, 9, None, ctypes.byref(n)
            )
            == 0
        )
        assert n.value == 2
        es = pynvml.c_nvmlEventSet_t()
        assert FAKE_LIB.nvmlEventSetCreate(ctypes.byref(es)) == 0
        data = pynvml.c_nvmlEventData_t()
        assert (
            FAKE_LIB.nvmlEventSetWait(es, ctypes.byref(data), 1)
            == pynvml.NVML_ERROR_TIMEOUT
        )
        assert FAKE_LIB.nvmlEventSetFree(es) == 0
        # legacy compute instance info: MIG on GPU 1, one 7g GI with a full CI
        status = ctypes.c_int()
        assert (
            FAKE_LIB.nvmlDeviceSetMigMode(dev, 1, ctypes.byref(status)) == 0
            and status.value == 0
        )
        gi = pynvml.c_nvmlGpuInstance_t()
        assert FAKE_LIB.nvmlDeviceCreateGpuInstance(dev, 0, ctypes.byref(gi)) == 0
        ci = pynvml.c_nvmlComputeInstance_t()
        assert (
            FAKE_LIB.nvmlGpuInstanceCreateComputeInstance(gi, 4, ctypes.byref(ci)) == 0
        )
        info = pynvml.c_nvmlComputeInstanceInfo_t()
        assert FAKE_LIB.nvmlComputeInstanceGetInfo(ci, ctypes.byref(info)) == 0
        assert info.profileId == 4 and info.placement.size == 7
    finally:
        assert FAKE_LIB.nvmlShutdown() == 0
        assert FAKE_LIB.nvmlShutdown() == 0


def test_threads_share_one_library(h100):
    import threading

    errors = []

    def worker():
        try:
            for _round in range(200):
                for h in handles():
                    pynvml.nvmlDeviceGetUUID(h)
                    pynvml.nvmlDeviceGetMigMode(h)
        except Exception as exc:  # pragma: no cover - reported below
            errors.append(exc)

    threads = [threading.Thread(target=worker) for _k in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert not errors

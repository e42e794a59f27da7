"""XID events from the profile, delivered once per event set."""

import ctypes

import pynvml

from fakenvml_util import c_fn, nvml_raises, reset_gpu


def drain(es, timeout_ms=1):
    got = []
    while True:
        try:
            data = pynvml.nvmlEventSetWait(es, timeout_ms)
        except pynvml.NVMLError_Timeout:
            return got
        got.append(
            (
                pynvml.nvmlDeviceGetIndex(data.device),
                data.eventType,
                data.eventData,
                data.gpuInstanceId,
                data.computeInstanceId,
            )
        )


def test_xids_delivered_once_per_set(nvml):
    n = nvml("hgx-h100-faults")
    es = n.nvmlEventSetCreate()
    for i in range(7):  # GPU 7 is lost
        h = n.nvmlDeviceGetHandleByIndex(i)
        n.nvmlDeviceRegisterEvents(
            h, n.nvmlEventTypeXidCriticalError | n.nvmlEventTypeDoubleBitEccError, es
        )
    xid = n.nvmlEventTypeXidCriticalError
    assert drain(es) == [
        (1, xid, 79, 0xFFFFFFFF, 0xFFFFFFFF),
        (1, xid, 48, 0xFFFFFFFF, 0xFFFFFFFF),
        (2, xid, 94, 0xFFFFFFFF, 0xFFFFFFFF),
    ]
    # registering again does not replay them
    n.nvmlDeviceRegisterEvents(n.nvmlDeviceGetHandleByIndex(1), xid, es)
    assert drain(es) == []
    n.nvmlEventSetFree(es)
    # a new set gets its own copy
    es2 = n.nvmlEventSetCreate()
    n.nvmlDeviceRegisterEvents(n.nvmlDeviceGetHandleByIndex(2), xid, es2)
    assert [e[2] for e in drain(es2)] == [94]
    n.nvmlEventSetFree(es2)


def test_wait_times_out(nvml):
    import time

    n = nvml("hgx-h100")
    es = n.nvmlEventSetCreate()
    n.nvmlDeviceRegisterEvents(
        n.nvmlDeviceGetHandleByIndex(0), n.nvmlEventTypeXidCriticalError, es
    )
    t0 = time.monotonic()
    with nvml_raises(n.NVML_ERROR_TIMEOUT):
        n.nvmlEventSetWait_v2(es, 50)
    assert time.monotonic() - t0 >= 0.045
    n.nvmlEventSetFree(es)


def test_event_errors(nvml):
    n = nvml("hgx-h100")
    h = n.nvmlDeviceGetHandleByIndex(0)
    es = n.nvmlEventSetCreate()
    with nvml_raises(n.NVML_ERROR_NOT_SUPPORTED):
        n.nvmlDeviceRegisterEvents(h, n.nvmlEventTypeGpuUnavailableError, es)
    n.nvmlEventSetFree(es)
    with nvml_raises(n.NVML_ERROR_INVALID_ARGUMENT):
        n.nvmlEventSetFree(es)  # already freed
    with nvml_raises(n.NVML_ERROR_INVALID_ARGUMENT):
        n.nvmlDeviceRegisterEvents(h, n.nvmlEventTypeXidCriticalError, es)
    bogus = ctypes.cast(ctypes.c_void_p(0x1234), pynvml.c_nvmlEventSet_t)
    with nvml_raises(n.NVML_ERROR_INVALID_ARGUMENT):
        n.nvmlEventSetWait_v2(bogus, 1)


def test_t4_supports_ecc_events(nvml):
    n = nvml("t4-x1")
    h = n.nvmlDeviceGetHandleByIndex(0)
    assert n.nvmlDeviceGetSupportedEventTypes(h) & n.nvmlEventTypeXidCriticalError


def inject_xid(uuid, xid):
    fn = c_fn("gpuopsFakeNvmlInjectXid")
    fn.argtypes = [ctypes.c_char_p, ctypes.c_uint]
    return fn(uuid.encode(), xid)


def test_an_injected_xid_reaches_the_sets_registered_before_it_until_a_reset(nvml):
    n = nvml("hgx-h100")
    xid = n.nvmlEventTypeXidCriticalError
    h0, h1 = n.nvmlDeviceGetHandleByIndex(0), n.nvmlDeviceGetHandleByIndex(1)
    uuid0 = n.nvmlDeviceGetUUID(h0)
    uuid0 = uuid0.decode() if isinstance(uuid0, bytes) else uuid0
    es = n.nvmlEventSetCreate()
    n.nvmlDeviceRegisterEvents(h0, xid, es)
    n.nvmlDeviceRegisterEvents(h1, xid, es)
    assert drain(es) == []
    assert inject_xid(uuid0, 95) == 0
    assert inject_xid(uuid0, 48) == 0
    assert drain(es) == [(0, xid, 95, 0xFFFFFFFF, 0xFFFFFFFF), (0, xid, 48, 0xFFFFFFFF, 0xFFFFFFFF)]
    assert drain(es) == []  # once
    # a set registered after the XIDs does not get them (NVML reports events from registration on)
    late = n.nvmlEventSetCreate()
    n.nvmlDeviceRegisterEvents(h0, xid, late)
    assert drain(late) == []
    # a reset clears them; what comes after it is new for every set
    assert reset_gpu(uuid0) == 0
    assert inject_xid(uuid0, 79) == 0
    assert [e[2] for e in drain(es)] == [79]
    assert [e[2] for e in drain(late)] == [79]
    n.nvmlEventSetFree(es)
    n.nvmlEventSetFree(late)


def test_an_xid_for_an_unknown_gpu_or_xid_0_is_refused(nvml):
    n = nvml("hgx-h100")
    uuid0 = n.nvmlDeviceGetUUID(n.nvmlDeviceGetHandleByIndex(0))
    uuid0 = uuid0.decode() if isinstance(uuid0, bytes) else uuid0
    assert inject_xid("GPU-00000000-0000-0000-0000-000000000000", 95) == n.NVML_ERROR_NOT_FOUND
    assert inject_xid(uuid0, 0) == n.NVML_ERROR_INVALID_ARGUMENT

"""Multi-Instance GPU: modes, profiles, placement, instances, MIG devices."""

import ctypes

import pynvml
import pytest

from fakenvml_util import (
    FAKE_LIB,
    GpuInstanceProfileInfoV3,
    MIG_UUID_RE,
    compute_instances,
    create_gi_at,
    gi_info,
    clear_busy,
    gpu_instances,
    nvml_raises,
    placements,
    reset_gpu,
    set_busy,
    simulate_reboot,
)

P = pynvml
ENABLE, DISABLE = P.NVML_DEVICE_MIG_ENABLE, P.NVML_DEVICE_MIG_DISABLE

# profile INDEX -> (profile ID, name, slices, max count, SMs, memory MB)
H100_TABLE = {
    P.NVML_GPU_INSTANCE_PROFILE_1_SLICE: (19, "1g.10gb", 1, 7, 16, 9984),
    P.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1: (20, "1g.10gb+me", 1, 1, 16, 9984),
    P.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2: (15, "1g.20gb", 1, 4, 26, 20096),
    P.NVML_GPU_INSTANCE_PROFILE_2_SLICE: (14, "2g.20gb", 2, 3, 32, 20096),
    P.NVML_GPU_INSTANCE_PROFILE_3_SLICE: (9, "3g.40gb", 3, 2, 60, 40448),
    P.NVML_GPU_INSTANCE_PROFILE_4_SLICE: (5, "4g.40gb", 4, 1, 64, 40448),
    P.NVML_GPU_INSTANCE_PROFILE_7_SLICE: (0, "7g.80gb", 7, 1, 132, 81152),
}
NAMES = {
    "dgx-a100": [
        "1g.5gb",
        "1g.5gb+me",
        "1g.10gb",
        "2g.10gb",
        "3g.20gb",
        "4g.20gb",
        "7g.40gb",
    ],
    "a100-80gb-pcie-x2": [
        "1g.10gb",
        "1g.10gb+me",
        "1g.20gb",
        "2g.20gb",
        "3g.40gb",
        "4g.40gb",
        "7g.80gb",
    ],
    "hgx-h100": [
        "1g.10gb",
        "1g.10gb+me",
        "1g.20gb",
        "2g.20gb",
        "3g.40gb",
        "4g.40gb",
        "7g.80gb",
    ],
    "hgx-h200": [
        "1g.18gb",
        "1g.18gb+me",
        "1g.35gb",
        "2g.35gb",
        "3g.71gb",
        "4g.71gb",
        "7g.141gb",
    ],
    "hgx-b200": [
        "1g.23gb",
        "1g.23gb+me",
        "1g.45gb",
        "2g.45gb",
        "3g.90gb",
        "4g.90gb",
        "7g.180gb",
    ],
}
INDEX_ORDER = [
    P.NVML_GPU_INSTANCE_PROFILE_1_SLICE,
    P.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1,
    P.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV2,
    P.NVML_GPU_INSTANCE_PROFILE_2_SLICE,
    P.NVML_GPU_INSTANCE_PROFILE_3_SLICE,
    P.NVML_GPU_INSTANCE_PROFILE_4_SLICE,
    P.NVML_GPU_INSTANCE_PROFILE_7_SLICE,
]
IDS = [19, 20, 15, 14, 9, 5, 0]


@pytest.fixture
def gpu(h100):
    """GPU 0 of an hgx-h100 with MIG enabled."""
    h = h100.nvmlDeviceGetHandleByIndex(0)
    assert h100.nvmlDeviceSetMigMode(h, ENABLE) == P.NVML_SUCCESS
    return h


# ---- modes ----


def test_enable_immediate(h100):
    h = h100.nvmlDeviceGetHandleByIndex(3)
    assert h100.nvmlDeviceGetMigMode(h) == [DISABLE, DISABLE]
    assert h100.nvmlDeviceSetMigMode(h, ENABLE) == P.NVML_SUCCESS
    assert h100.nvmlDeviceGetMigMode(h) == [ENABLE, ENABLE]
    assert h100.nvmlDeviceGetMigMode(h100.nvmlDeviceGetHandleByIndex(2)) == [
        DISABLE,
        DISABLE,
    ]
    assert h100.nvmlDeviceSetMigMode(h, ENABLE) == P.NVML_SUCCESS  # idempotent
    assert h100.nvmlDeviceGetMaxMigDeviceCount(h) == 7
    with nvml_raises(P.NVML_ERROR_INVALID_ARGUMENT):
        h100.nvmlDeviceSetMigMode(h, 2)
    assert h100.nvmlDeviceSetMigMode(h, DISABLE) == P.NVML_SUCCESS
    assert h100.nvmlDeviceGetMigMode(h) == [DISABLE, DISABLE]
    assert h100.nvmlDeviceGetMaxMigDeviceCount(h) == 0


def test_enable_pending_until_reset(nvml):
    # an A100 whose GPU NVML cannot reset itself (pass-through VM)
    n = nvml("dgx-a100-mig-pending")
    h = n.nvmlDeviceGetHandleByIndex(0)
    assert n.nvmlDeviceSetMigMode(h, ENABLE) == P.NVML_ERROR_RESET_REQUIRED
    assert n.nvmlDeviceGetMigMode(h) == [DISABLE, ENABLE]
    with nvml_raises(P.NVML_ERROR_NOT_SUPPORTED):
        n.nvmlDeviceCreateGpuInstance(h, 19)  # not active yet
    assert n.nvmlDeviceGetMaxMigDeviceCount(h) == 0
    assert reset_gpu(n.nvmlDeviceGetUUID(h)) == 0
    assert n.nvmlDeviceGetMigMode(h) == [ENABLE, ENABLE]
    # the reset was of that GPU only
    assert n.nvmlDeviceGetMigMode(n.nvmlDeviceGetHandleByIndex(1)) == [DISABLE, DISABLE]
    n.nvmlDeviceCreateGpuInstance(h, 19)
    # disabling is pending too; the reset also destroys the instances
    for gi in gpu_instances(h, 19):
        n.nvmlGpuInstanceDestroy(gi)
    assert n.nvmlDeviceSetMigMode(h, DISABLE) == P.NVML_ERROR_RESET_REQUIRED
    assert n.nvmlDeviceGetMigMode(h) == [ENABLE, DISABLE]
    # asking for the current mode again cancels the pending change
    assert n.nvmlDeviceSetMigMode(h, ENABLE) == P.NVML_SUCCESS
    assert n.nvmlDeviceGetMigMode(h) == [ENABLE, ENABLE]


def test_ampere_resets_an_idle_gpu_itself_and_the_mode_persists(nvml):
    """A100: NVML activates a mode change by resetting the idle GPU; held by a process the
    change stays pending (IN_USE) until the GPU can be reset. The mode survives a reboot,
    instances never do."""
    n = nvml("dgx-a100")
    h0, h1 = n.nvmlDeviceGetHandleByIndex(0), n.nvmlDeviceGetHandleByIndex(1)
    assert n.nvmlDeviceSetMigMode(h0, ENABLE) == P.NVML_SUCCESS
    assert n.nvmlDeviceGetMigMode(h0) == [ENABLE, ENABLE]
    uuid1 = n.nvmlDeviceGetUUID(h1)
    assert set_busy(uuid1, pid=4242, kind="compute", name="python3") == 0
    assert n.nvmlDeviceSetMigMode(h1, ENABLE) == P.NVML_ERROR_IN_USE
    assert n.nvmlDeviceGetMigMode(h1) == [DISABLE, ENABLE]
    assert reset_gpu(uuid1) == P.NVML_ERROR_IN_USE  # nvidia-smi -r fails while it runs
    assert clear_busy(uuid1, 4242) == 0
    assert reset_gpu(uuid1) == 0
    assert n.nvmlDeviceGetMigMode(h1) == [ENABLE, ENABLE]
    n.nvmlDeviceCreateGpuInstance(h0, 0)
    assert simulate_reboot() == 0
    assert n.nvmlDeviceGetMigMode(h0) == [ENABLE, ENABLE]  # the mode persists
    assert gpu_instances(h0, 0) == []  # the instances do not


def test_hopper_applies_at_once_and_forgets_on_reset_and_reboot(gpu, h100):
    """H100: no reset needed, but the mode is gone after a GPU reset or a reboot, and a
    client holding the GPU makes the change fail IN_USE without leaving it pending."""
    gi = h100.nvmlDeviceCreateGpuInstance(gpu, 0)
    h100.nvmlGpuInstanceCreateComputeInstance(gi, P.NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE)
    assert simulate_reboot() == 0
    assert h100.nvmlDeviceGetMigMode(gpu) == [DISABLE, DISABLE]
    with nvml_raises(P.NVML_ERROR_INVALID_ARGUMENT):
        h100.nvmlGpuInstanceGetInfo(gi)  # stale handle
    assert h100.nvmlDeviceSetMigMode(gpu, ENABLE) == P.NVML_SUCCESS
    assert reset_gpu(h100.nvmlDeviceGetUUID(gpu)) == 0
    assert h100.nvmlDeviceGetMigMode(gpu) == [DISABLE, DISABLE]
    h2 = h100.nvmlDeviceGetHandleByIndex(2)
    assert set_busy(h100.nvmlDeviceGetUUID(h2), pid=77, kind="client", name="nv-hostengine") == 0
    assert h100.nvmlDeviceSetMigMode(h2, ENABLE) == P.NVML_ERROR_IN_USE
    assert h100.nvmlDeviceGetMigMode(h2) == [DISABLE, DISABLE]
    assert simulate_reboot() == 0  # a reboot ends the client
    assert h100.nvmlDeviceSetMigMode(h2, ENABLE) == P.NVML_SUCCESS


def test_enable_in_use(nvml):
    n = nvml("dgx-a100-mig-in-use")
    h = n.nvmlDeviceGetHandleByIndex(1)
    assert n.nvmlDeviceSetMigMode(h, ENABLE) == P.NVML_ERROR_IN_USE
    assert n.nvmlDeviceGetMigMode(h) == [DISABLE, ENABLE]
    assert reset_gpu(n.nvmlDeviceGetUUID(h)) == P.NVML_ERROR_IN_USE
    assert simulate_reboot() == 0
    assert n.nvmlDeviceGetMigMode(h) == [ENABLE, ENABLE]


def test_disable_with_instances_is_in_use(gpu, h100):
    gi = h100.nvmlDeviceCreateGpuInstance(gpu, 9)
    with nvml_raises(P.NVML_ERROR_IN_USE):
        h100.nvmlDeviceSetMigMode(gpu, DISABLE)
    assert h100.nvmlDeviceGetMigMode(gpu) == [ENABLE, ENABLE]
    h100.nvmlGpuInstanceDestroy(gi)
    assert h100.nvmlDeviceSetMigMode(gpu, DISABLE) == P.NVML_SUCCESS


def test_utilization_unavailable_in_mig_mode(gpu, h100):
    with nvml_raises(P.NVML_ERROR_NOT_SUPPORTED):
        h100.nvmlDeviceGetUtilizationRates(gpu)


# ---- profiles: looked up by INDEX, used by ID ----


def test_profile_info_needs_mig_enabled(h100):
    h = h100.nvmlDeviceGetHandleByIndex(0)
    with nvml_raises(P.NVML_ERROR_NOT_SUPPORTED):
        h100.nvmlDeviceGetGpuInstanceProfileInfo(h, P.NVML_GPU_INSTANCE_PROFILE_1_SLICE)
    with nvml_raises(P.NVML_ERROR_NOT_SUPPORTED):
        h100.nvmlDeviceCreateGpuInstance(h, 19)
    with nvml_raises(P.NVML_ERROR_NOT_SUPPORTED):
        h100.nvmlDeviceGetGpuInstanceRemainingCapacity(h, 19)
    assert placements(h, 9) == [
        (0, 4),
        (4, 4),
    ]  # placements are known regardless of mode


def test_h100_profile_table(gpu, h100):
    for index, (pid, name, slices, count, sms, mem) in H100_TABLE.items():
        for version in (2, 1):
            info = h100.nvmlDeviceGetGpuInstanceProfileInfo(gpu, index, version=version)
            assert (
                info.id,
                info.sliceCount,
                info.instanceCount,
                info.multiprocessorCount,
                info.memorySizeMB,
                info.isP2pSupported,
            ) == (pid, slices, count, sms, mem, 0)
            if version == 2:
                assert info.name == f"MIG {name}"
                assert info.version == P.nvmlGpuInstanceProfileInfo_v2
        assert h100.nvmlDeviceGetGpuInstanceRemainingCapacity(gpu, pid) == count
    seven = h100.nvmlDeviceGetGpuInstanceProfileInfo(
        gpu, P.NVML_GPU_INSTANCE_PROFILE_7_SLICE
    )
    assert (
        seven.copyEngineCount,
        seven.decoderCount,
        seven.jpegCount,
        seven.ofaCount,
    ) == (8, 7, 7, 1)
    me = h100.nvmlDeviceGetGpuInstanceProfileInfo(
        gpu, P.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1
    )
    assert me.ofaCount == 1
    for unsupported in (
        P.NVML_GPU_INSTANCE_PROFILE_8_SLICE,
        P.NVML_GPU_INSTANCE_PROFILE_6_SLICE,
        P.NVML_GPU_INSTANCE_PROFILE_2_SLICE_REV1,
        P.NVML_GPU_INSTANCE_PROFILE_1_SLICE_GFX,
    ):
        with nvml_raises(P.NVML_ERROR_NOT_SUPPORTED):
            h100.nvmlDeviceGetGpuInstanceProfileInfo(gpu, unsupported)
    with nvml_raises(P.NVML_ERROR_INVALID_ARGUMENT):
        h100.nvmlDeviceGetGpuInstanceProfileInfo(gpu, P.NVML_GPU_INSTANCE_PROFILE_COUNT)


def test_profile_info_v3_struct(gpu, h100):
    fn = P.nvmlLib.nvmlDeviceGetGpuInstanceProfileInfoV
    v3 = GpuInstanceProfileInfoV3(
        version=ctypes.sizeof(GpuInstanceProfileInfoV3) | 3 << 24
    )
    assert fn(gpu, P.NVML_GPU_INSTANCE_PROFILE_3_SLICE, ctypes.byref(v3)) == 0
    assert (v3.id, v3.sliceCount, v3.memorySizeMB, v3.name, v3.capabilities) == (
        9,
        3,
        40448,
        b"MIG 3g.40gb",
        0,
    )
    bad = P.c_nvmlGpuInstanceProfileInfo_v2_t()
    bad.version = 0x01000000
    assert fn(gpu, 0, ctypes.byref(bad)) == P.NVML_ERROR_ARGUMENT_VERSION_MISMATCH


@pytest.mark.parametrize("profile", sorted(NAMES))
def test_profile_names_per_model(nvml, profile):
    n = nvml(profile)
    h = n.nvmlDeviceGetHandleByIndex(0)
    assert n.nvmlDeviceSetMigMode(h, ENABLE) == P.NVML_SUCCESS
    got = [n.nvmlDeviceGetGpuInstanceProfileInfo(h, i) for i in INDEX_ORDER]
    assert [g.name for g in got] == [f"MIG {x}" for x in NAMES[profile]]
    assert [g.id for g in got] == IDS
    assert [g.instanceCount for g in got] == [7, 1, 4, 3, 2, 1, 1]
    assert [placements(h, pid) for pid in IDS] == [
        [(s, 1) for s in range(7)],
        [(s, 1) for s in range(7)],
        [(0, 2), (2, 2), (4, 2), (6, 2)],
        [(0, 2), (2, 2), (4, 2)],
        [(0, 4), (4, 4)],
        [(0, 4)],
        [(0, 8)],
    ]


def test_index_is_not_id(gpu, h100):
    """The classic bug: passing a profile INDEX where an ID is expected."""
    index = P.NVML_GPU_INSTANCE_PROFILE_3_SLICE  # 2: not a profile ID
    with nvml_raises(P.NVML_ERROR_INVALID_ARGUMENT):
        h100.nvmlDeviceCreateGpuInstance(gpu, index)
    with nvml_raises(P.NVML_ERROR_NOT_SUPPORTED):
        h100.nvmlDeviceGetGpuInstanceRemainingCapacity(gpu, index)
    # and index 0 (1 slice) happens to be the ID of the 7-slice profile
    gi = h100.nvmlDeviceCreateGpuInstance(gpu, P.NVML_GPU_INSTANCE_PROFILE_1_SLICE)
    assert gi_info(gi) == (0, 0, (0, 8))


# ---- GPU instances: capacity and placement ----


def test_4g_plus_3g_fits(gpu, h100):
    g4 = h100.nvmlDeviceCreateGpuInstance(gpu, 5)
    g3 = h100.nvmlDeviceCreateGpuInstance(gpu, 9)
    assert gi_info(g4) == (1, 5, (0, 4))
    assert gi_info(g3) == (2, 9, (4, 4))
    for pid in IDS:
        assert h100.nvmlDeviceGetGpuInstanceRemainingCapacity(gpu, pid) == 0


def test_4g_plus_4g_fails(gpu, h100):
    h100.nvmlDeviceCreateGpuInstance(gpu, 5)
    with nvml_raises(P.NVML_ERROR_INSUFFICIENT_RESOURCES):
        h100.nvmlDeviceCreateGpuInstance(gpu, 5)


def test_seven_1g_then_the_eighth_fails(gpu, h100):
    ids = []
    for left in range(7, 0, -1):
        assert h100.nvmlDeviceGetGpuInstanceRemainingCapacity(gpu, 19) == left
        ids.append(gi_info(h100.nvmlDeviceCreateGpuInstance(gpu, 19))[0])
    # placed as real drivers do (slots 6, 4, 5, 0, 1, 2, 3: the placement that takes the fewest
    # other placements away), ids by placement
    assert ids == [13, 11, 12, 7, 8, 9, 10]
    assert h100.nvmlDeviceGetGpuInstanceRemainingCapacity(gpu, 19) == 0
    with nvml_raises(P.NVML_ERROR_INSUFFICIENT_RESOURCES):
        h100.nvmlDeviceCreateGpuInstance(gpu, 19)
    assert sorted(gi_info(gi)[0] for gi in gpu_instances(gpu, 19)) == list(range(7, 14))
    assert gpu_instances(gpu, 9) == []


def test_create_with_placement(gpu, h100):
    gi = create_gi_at(gpu, 19, 3, 1)
    assert gi_info(gi) == (10, 19, (3, 1))
    with nvml_raises(P.NVML_ERROR_INSUFFICIENT_RESOURCES):
        create_gi_at(gpu, 19, 3, 1)  # occupied
    with nvml_raises(P.NVML_ERROR_INVALID_ARGUMENT):
        create_gi_at(gpu, 19, 7, 1)  # not a valid start for 1g
    with nvml_raises(P.NVML_ERROR_INVALID_ARGUMENT):
        create_gi_at(gpu, 9, 0, 2)  # wrong size for 3g
    with nvml_raises(P.NVML_ERROR_INSUFFICIENT_RESOURCES):
        create_gi_at(gpu, 9, 0, 4)  # overlaps 3:1
    g3 = create_gi_at(gpu, 9, 4, 4)
    assert gi_info(g3) == (2, 9, (4, 4))
    assert h100.nvmlDeviceGetGpuInstanceRemainingCapacity(gpu, 19) == 3
    assert h100.nvmlDeviceGetGpuInstanceRemainingCapacity(gpu, 14) == 1  # 0:2 only
    with nvml_raises(P.NVML_ERROR_INVALID_ARGUMENT):
        P.nvmlDeviceCreateGpuInstanceWithPlacement(gpu, 19, None)


def test_media_extension_profile_is_unique(gpu, h100):
    h100.nvmlDeviceCreateGpuInstance(gpu, 20)
    assert h100.nvmlDeviceGetGpuInstanceRemainingCapacity(gpu, 20) == 0
    with nvml_raises(P.NVML_ERROR_INSUFFICIENT_RESOURCES):
        h100.nvmlDeviceCreateGpuInstance(gpu, 20)
    assert h100.nvmlDeviceGetGpuInstanceRemainingCapacity(gpu, 19) == 6


def test_mixed_layout_fills_the_compute_slices(gpu, h100):
    for _count in range(3):
        h100.nvmlDeviceCreateGpuInstance(gpu, 14)
    h100.nvmlDeviceCreateGpuInstance(gpu, 19)
    assert sorted(gi_info(g)[2] for g in gpu_instances(gpu, 14)) == [
        (0, 2),
        (2, 2),
        (4, 2),
    ]
    assert [gi_info(g)[2] for g in gpu_instances(gpu, 19)] == [(6, 1)]
    for pid in IDS:
        assert h100.nvmlDeviceGetGpuInstanceRemainingCapacity(gpu, pid) == 0


def test_gpu_instance_lookup_and_destroy(gpu, h100):
    gi = h100.nvmlDeviceCreateGpuInstance(gpu, 14)
    gid, _pid, _placement = gi_info(gi)
    same = h100.nvmlDeviceGetGpuInstanceById(gpu, gid)
    assert gi_info(same) == gi_info(gi)
    info = h100.nvmlGpuInstanceGetInfo(gi)
    assert h100.nvmlDeviceGetIndex(info.device) == 0
    with nvml_raises(P.NVML_ERROR_NOT_FOUND):
        h100.nvmlDeviceGetGpuInstanceById(gpu, 0)
    with nvml_raises(P.NVML_ERROR_INVALID_ARGUMENT):
        gpu_instances(gpu, 2)  # not a profile ID
    h100.nvmlGpuInstanceDestroy(gi)
    with nvml_raises(P.NVML_ERROR_INVALID_ARGUMENT):
        h100.nvmlGpuInstanceDestroy(gi)
    with nvml_raises(P.NVML_ERROR_NOT_FOUND):
        h100.nvmlDeviceGetGpuInstanceById(gpu, gid)


def test_gpu_instance_queries_need_mig(h100):
    h = h100.nvmlDeviceGetHandleByIndex(5)
    with nvml_raises(P.NVML_ERROR_NOT_SUPPORTED):
        gpu_instances(h, 19)
    with nvml_raises(P.NVML_ERROR_NOT_SUPPORTED):
        h100.nvmlDeviceGetGpuInstanceById(h, 7)
    with nvml_raises(P.NVML_ERROR_NOT_FOUND):
        h100.nvmlDeviceGetMigDeviceHandleByIndex(h, 0)


# ---- compute instances ----


def test_compute_instance_profiles(gpu, h100):
    gi = h100.nvmlDeviceCreateGpuInstance(gpu, 0)
    expect = {  # CI profile index -> (slices, count, SMs, name)
        P.NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE: (1, 7, 16, "MIG 1c.7g.80gb"),
        P.NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE: (2, 3, 32, "MIG 2c.7g.80gb"),
        P.NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE: (3, 2, 48, "MIG 3c.7g.80gb"),
        P.NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE: (4, 1, 64, "MIG 4c.7g.80gb"),
        P.NVML_COMPUTE_INSTANCE_PROFILE_7_SLICE: (7, 1, 132, "MIG 7g.80gb"),
    }
    shared = P.NVML_COMPUTE_INSTANCE_ENGINE_PROFILE_SHARED
    for index, (slices, count, sms, name) in expect.items():
        info = h100.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, index, shared)
        assert (
            info.id,
            info.sliceCount,
            info.instanceCount,
            info.multiprocessorCount,
            info.name,
        ) == (index, slices, count, sms, name)
        v1 = h100.nvmlGpuInstanceGetComputeInstanceProfileInfo(
            gi, index, shared, version=1
        )
        assert (v1.id, v1.sliceCount, v1.sharedCopyEngineCount) == (index, slices, 8)
        assert (
            h100.nvmlGpuInstanceGetComputeInstanceRemainingCapacity(gi, index) == count
        )
    with nvml_raises(P.NVML_ERROR_NOT_SUPPORTED):
        h100.nvmlGpuInstanceGetComputeInstanceProfileInfo(
            gi, P.NVML_COMPUTE_INSTANCE_PROFILE_8_SLICE, shared
        )
    with nvml_raises(P.NVML_ERROR_INVALID_ARGUMENT):
        h100.nvmlGpuInstanceGetComputeInstanceProfileInfo(
            gi, P.NVML_COMPUTE_INSTANCE_PROFILE_COUNT, shared
        )
    with nvml_raises(P.NVML_ERROR_INVALID_ARGUMENT):
        h100.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, 0, 1)
    g3 = h100.nvmlDeviceGetGpuInstanceById(gpu, 0)
    assert g3 is not None
    h100.nvmlGpuInstanceDestroy(gi)
    small = h100.nvmlDeviceCreateGpuInstance(gpu, 9)
    full = h100.nvmlGpuInstanceGetComputeInstanceProfileInfo(
        small, P.NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE, shared
    )
    assert (full.name, full.multiprocessorCount) == ("MIG 3g.40gb", 60)
    with nvml_raises(P.NVML_ERROR_NOT_SUPPORTED):
        h100.nvmlGpuInstanceGetComputeInstanceProfileInfo(
            small, P.NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE, shared
        )


def test_compute_instances_lifecycle(gpu, h100):
    gi = h100.nvmlDeviceCreateGpuInstance(gpu, 0)
    one = P.NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE
    cis = [h100.nvmlGpuInstanceCreateComputeInstance(gi, one) for _k in range(7)]
    with nvml_raises(P.NVML_ERROR_INSUFFICIENT_RESOURCES):
        h100.nvmlGpuInstanceCreateComputeInstance(gi, one)
    infos = [h100.nvmlComputeInstanceGetInfo(ci) for ci in cis]
    assert [
        (i.id, i.profileId, i.placement.start, i.placement.size) for i in infos
    ] == [(k, one, k, 1) for k in range(7)]
    assert h100.nvmlDeviceGetIndex(infos[0].device) == 0
    assert gi_info(infos[0].gpuInstance) == gi_info(gi)
    assert len(compute_instances(gi, one)) == 7
    assert compute_instances(gi, P.NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE) == []
    same = h100.nvmlGpuInstanceGetComputeInstanceById(gi, 3)
    assert h100.nvmlComputeInstanceGetInfo_v2(same).id == 3
    with nvml_raises(P.NVML_ERROR_IN_USE):
        h100.nvmlGpuInstanceDestroy(gi)
    h100.nvmlComputeInstanceDestroy(cis[3])
    with nvml_raises(P.NVML_ERROR_NOT_FOUND):
        h100.nvmlGpuInstanceGetComputeInstanceById(gi, 3)
    with nvml_raises(P.NVML_ERROR_INVALID_ARGUMENT):
        h100.nvmlComputeInstanceGetInfo(cis[3])
    assert h100.nvmlGpuInstanceGetComputeInstanceRemainingCapacity(gi, one) == 1
    assert (
        h100.nvmlGpuInstanceGetComputeInstanceRemainingCapacity(
            gi, P.NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE
        )
        == 0
    )
    for ci in compute_instances(gi, one):
        h100.nvmlComputeInstanceDestroy(ci)
    h100.nvmlGpuInstanceDestroy(gi)


# ---- MIG devices ----


def build_mixed(h100, gpu):
    g4 = h100.nvmlDeviceCreateGpuInstance(gpu, 5)
    g1 = h100.nvmlDeviceCreateGpuInstance(gpu, 19)
    h100.nvmlGpuInstanceCreateComputeInstance(
        g4, P.NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE
    )
    h100.nvmlGpuInstanceCreateComputeInstance(
        g4, P.NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE
    )
    h100.nvmlGpuInstanceCreateComputeInstance(
        g1, P.NVML_COMPUTE_INSTANCE_PROFILE_1_SLICE
    )
    return g4, g1


def test_a_mig_device_index_is_its_place_among_its_parents_mig_devices(gpu, h100):
    """nvml.h, nvmlDeviceGetIndex: with MIG device handles it returns indices that can be passed to
    nvmlDeviceGetMigDeviceHandleByIndex (NVIDIA's nvidia-container-runtime needs it for a MIG
    device asked for by UUID)."""
    build_mixed(h100, gpu)
    for i in range(3):
        mig = h100.nvmlDeviceGetMigDeviceHandleByIndex(gpu, i)
        assert h100.nvmlDeviceGetIndex(mig) == i
        by_uuid = h100.nvmlDeviceGetHandleByUUID(h100.nvmlDeviceGetUUID(mig))
        assert h100.nvmlDeviceGetIndex(by_uuid) == i
    assert h100.nvmlDeviceGetIndex(gpu) == 0


def test_mig_device_handles(gpu, h100):
    build_mixed(h100, gpu)
    assert h100.nvmlDeviceGetMaxMigDeviceCount(gpu) == 7
    migs = [h100.nvmlDeviceGetMigDeviceHandleByIndex(gpu, i) for i in range(3)]
    with nvml_raises(P.NVML_ERROR_NOT_FOUND):
        h100.nvmlDeviceGetMigDeviceHandleByIndex(gpu, 3)
    with nvml_raises(P.NVML_ERROR_INVALID_ARGUMENT):
        h100.nvmlDeviceGetMigDeviceHandleByIndex(gpu, 7)
    parent_name = h100.nvmlDeviceGetName(gpu)
    assert h100.nvmlDeviceIsMigDeviceHandle(gpu).value == 0
    got = []
    for m in migs:
        assert h100.nvmlDeviceIsMigDeviceHandle(m).value == 1
        parent = h100.nvmlDeviceGetDeviceHandleFromMigDeviceHandle(m)
        assert h100.nvmlDeviceGetIndex(parent) == 0
        uuid = h100.nvmlDeviceGetUUID(m)
        assert MIG_UUID_RE.match(uuid), uuid
        again = h100.nvmlDeviceGetHandleByUUID(uuid)
        assert (
            h100.nvmlDeviceGetUUID(again) == uuid
            and h100.nvmlDeviceIsMigDeviceHandle(again).value
        )
        got.append(
            (
                h100.nvmlDeviceGetGpuInstanceId(m),
                h100.nvmlDeviceGetComputeInstanceId(m),
                h100.nvmlDeviceGetName(m),
                h100.nvmlDeviceGetMemoryInfo(m).total >> 20,
            )
        )
    assert got == [
        (1, 0, f"{parent_name} MIG 2c.4g.40gb", 40448),
        (1, 1, f"{parent_name} MIG 2c.4g.40gb", 40448),
        (13, 0, f"{parent_name} MIG 1g.10gb", 9984),
    ]
    assert len({h100.nvmlDeviceGetUUID(m) for m in migs}) == 3
    v2 = h100.nvmlDeviceGetMemoryInfo(migs[2], version=P.nvmlMemory_v2)
    assert v2.total == 9984 << 20 and v2.free + v2.used + v2.reserved == v2.total
    assert h100.nvmlDeviceGetCudaComputeCapability(migs[0]) == (9, 0)
    assert (
        h100.nvmlDeviceGetPciInfo(migs[0]).busId == h100.nvmlDeviceGetPciInfo(gpu).busId
    )
    # most queries are per physical GPU only
    with nvml_raises(P.NVML_ERROR_NOT_SUPPORTED):
        h100.nvmlDeviceGetTemperature(migs[0], P.NVML_TEMPERATURE_GPU)
    with nvml_raises(P.NVML_ERROR_NOT_SUPPORTED):
        h100.nvmlDeviceGetMigMode(migs[0])
    for fn in (
        h100.nvmlDeviceGetGpuInstanceId,
        h100.nvmlDeviceGetComputeInstanceId,
        h100.nvmlDeviceGetDeviceHandleFromMigDeviceHandle,
    ):
        with nvml_raises(P.NVML_ERROR_INVALID_ARGUMENT):
            fn(gpu)


def test_mig_handle_invalid_after_destroy(gpu, h100):
    g4, _g1 = build_mixed(h100, gpu)
    m = h100.nvmlDeviceGetMigDeviceHandleByIndex(gpu, 0)
    uuid = h100.nvmlDeviceGetUUID(m)
    for ci in compute_instances(g4, P.NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE):
        h100.nvmlComputeInstanceDestroy(ci)
    with nvml_raises(P.NVML_ERROR_INVALID_ARGUMENT):
        h100.nvmlDeviceGetUUID(m)
    with nvml_raises(P.NVML_ERROR_NOT_FOUND):
        h100.nvmlDeviceGetHandleByUUID(uuid)


def test_mig_state_survives_reinit(nvml, tmp_path):
    n = nvml("dgx-a100")
    h = n.nvmlDeviceGetHandleByIndex(6)
    n.nvmlDeviceSetMigMode(h, ENABLE)
    gi = n.nvmlDeviceCreateGpuInstance(h, 9)
    n.nvmlGpuInstanceCreateComputeInstance(gi, P.NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE)
    uuid = n.nvmlDeviceGetUUID(n.nvmlDeviceGetMigDeviceHandleByIndex(h, 0))
    assert (
        n.nvmlDeviceGetName(n.nvmlDeviceGetMigDeviceHandleByIndex(h, 0))
        == "NVIDIA A100-SXM4-40GB MIG 3g.20gb"
    )
    n.nvmlShutdown()
    n = nvml("dgx-a100")
    h = n.nvmlDeviceGetHandleByIndex(6)
    assert n.nvmlDeviceGetMigMode(h) == [ENABLE, ENABLE]
    assert n.nvmlDeviceGetUUID(n.nvmlDeviceGetMigDeviceHandleByIndex(h, 0)) == uuid
    text = (tmp_path / "dgx-a100.state").read_text()
    assert "gi GPU-" in text and "ci GPU-" in text


def test_mig_device_attributes(gpu, h100):
    # The device plugin and GPU Feature Discovery read these for every MIG device. H100 80GB
    # (NVIDIA's MIG user guide, supported profiles): 4g.40gb has 4 copy engines, 4 NVDECs,
    # 4 NVJPGs, no NVENC or OFA, 40448 MiB; 1g.10gb one of each of CE/NVDEC/NVJPG, 9984 MiB.
    # A 2-slice compute instance of a 4g instance has 2 x 16 SMs.
    build_mixed(h100, gpu)
    got = []
    for i in range(3):
        a = h100.nvmlDeviceGetAttributes(h100.nvmlDeviceGetMigDeviceHandleByIndex(gpu, i))
        got.append((a.multiprocessorCount, a.sharedCopyEngineCount, a.sharedDecoderCount,
                    a.sharedEncoderCount, a.sharedJpegCount, a.sharedOfaCount,
                    a.gpuInstanceSliceCount, a.computeInstanceSliceCount, a.memorySizeMB))
    assert got == [
        (32, 4, 4, 0, 4, 0, 4, 2, 40448),
        (32, 4, 4, 0, 4, 0, 4, 2, 40448),
        (16, 1, 1, 0, 1, 0, 1, 1, 9984),
    ]
    # "This API currently only supports MIG device handles"
    with nvml_raises(P.NVML_ERROR_NOT_SUPPORTED):
        h100.nvmlDeviceGetAttributes(gpu)
    # the unversioned symbol (go-nvml falls back to it when _v2 is missing) answers the same
    v1 = P.c_nvmlDeviceAttributes()
    mig = h100.nvmlDeviceGetMigDeviceHandleByIndex(gpu, 2)
    assert FAKE_LIB.nvmlDeviceGetAttributes(mig, ctypes.byref(v1)) == 0
    assert (v1.multiprocessorCount, v1.memorySizeMB) == (16, 9984)

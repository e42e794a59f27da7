"""The dynamic side of MIG on the fake: GPUs, GPU instances and compute instances held by
processes and clients, injected faults, GPU resets against reboots, persistence mode, the calls
a MIG tool needs beyond the basics, and ids and placements that follow the driver rather than
a fixed formula. What real hardware does is in REFERENCE.md section 5 (NVIDIA's MIG user
guide and published nvidia-smi output)."""

import ctypes
import os
import shutil
import subprocess
import sys
import textwrap

import pynvml
import pytest

from fakenvml_util import (
    FAKE_DIR,
    GI_PROFILE_CAPS_GFX,
    PROFILE_DIR,
    GpuInstanceProfileInfoV3,
    WITH_GPUS,
    clear_busy,
    create_gi_at,
    gi_info,
    gpu_instances,
    nvml_raises,
    placements,
    reset_gpu,
    set_busy,
    simulate_reboot,
)

P = pynvml
ENABLE, DISABLE = P.NVML_DEVICE_MIG_ENABLE, P.NVML_DEVICE_MIG_DISABLE
BUSY_CLI = FAKE_DIR / "fake-nvml-busy"
RESET_CLI = FAKE_DIR / "fake-nvml-reset"
SMI = FAKE_DIR / "build" / "nvidia-smi"


def with_gpus(profile, code, env=None, fresh=True, check=True):
    e = {k: v for k, v in os.environ.items() if not k.startswith("GPUOPS_FAKE_NVML")}
    e.update(env or {})
    args = [str(WITH_GPUS)] + (["--fresh"] if fresh else []) + [profile, "--"]
    res = subprocess.run(args + [sys.executable, "-c", textwrap.dedent(code)], env=e, capture_output=True, text=True,
                         timeout=60, check=False)
    if check:
        assert res.returncode == 0, res.stderr
    return res


@pytest.fixture
def gpu(h100):
    h = h100.nvmlDeviceGetHandleByIndex(0)
    assert h100.nvmlDeviceSetMigMode(h, ENABLE) == P.NVML_SUCCESS
    return h


# ---- busy GPUs ----


def test_processes_are_listed_per_gpu_and_per_mig_device(gpu, h100):
    uuid = h100.nvmlDeviceGetUUID(gpu)
    gi_a = h100.nvmlDeviceCreateGpuInstance(gpu, 9)
    gi_b = h100.nvmlDeviceCreateGpuInstance(gpu, 9)
    ci_a = h100.nvmlGpuInstanceCreateComputeInstance(gi_a, P.NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE)
    h100.nvmlGpuInstanceCreateComputeInstance(gi_b, P.NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE)
    id_a, id_b = gi_info(gi_a)[0], gi_info(gi_b)[0]
    ci_id = P.nvmlComputeInstanceGetInfo(ci_a).id
    assert set_busy(uuid, pid=1001, gi=id_a, ci=ci_id, used_mib=2048, name="train.py") == 0
    assert set_busy(uuid, pid=1002, gi=id_b, kind="graphics", name="Xorg") == 0
    assert set_busy(uuid, pid=1003, kind="client", name="nv-hostengine") == 0
    # a GPU/compute instance that does not exist cannot be busy
    assert set_busy(uuid, pid=1004, gi=14) == P.NVML_ERROR_NOT_FOUND

    procs = h100.nvmlDeviceGetComputeRunningProcesses(gpu)
    assert [(p.pid, p.usedGpuMemory, p.gpuInstanceId, p.computeInstanceId) for p in procs] == [
        (1001, 2048 << 20, id_a, ci_id)]
    assert [p.pid for p in h100.nvmlDeviceGetGraphicsRunningProcesses(gpu)] == [1002]
    assert h100.nvmlSystemGetProcessName(1001) == "train.py"
    with nvml_raises(P.NVML_ERROR_NOT_FOUND):
        h100.nvmlSystemGetProcessName(1003)  # a client, not a process
    # per MIG device: only the processes of its own instance; clients are no processes
    by_gi = {}
    for i in range(h100.nvmlDeviceGetMaxMigDeviceCount(gpu)):
        try:
            mig = h100.nvmlDeviceGetMigDeviceHandleByIndex(gpu, i)
        except P.NVMLError_NotFound:
            break
        by_gi[h100.nvmlDeviceGetGpuInstanceId(mig)] = [p.pid for p in h100.nvmlDeviceGetComputeRunningProcesses(mig)]
    assert by_gi == {id_a: [1001], id_b: []}
    # the C call's size protocol: 0 slots -> INSUFFICIENT_SIZE and the count needed
    count = ctypes.c_uint(0)
    fn = P.nvmlLib.nvmlDeviceGetComputeRunningProcesses_v3
    assert fn(gpu, ctypes.byref(count), None) == P.NVML_ERROR_INSUFFICIENT_SIZE and count.value == 1
    assert clear_busy(uuid, 1001) == 0
    assert h100.nvmlDeviceGetComputeRunningProcesses(gpu) == []
    assert [p.pid for p in h100.nvmlDeviceGetGraphicsRunningProcesses(gpu)] == [1002]


def test_instances_in_use_cannot_be_destroyed(gpu, h100):
    uuid = h100.nvmlDeviceGetUUID(gpu)
    gi = h100.nvmlDeviceCreateGpuInstance(gpu, 14)
    ci = h100.nvmlGpuInstanceCreateComputeInstance(gi, P.NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE)
    gi_id, ci_id = gi_info(gi)[0], P.nvmlComputeInstanceGetInfo(ci).id
    assert set_busy(uuid, pid=555, gi=gi_id, ci=ci_id) == 0
    with nvml_raises(P.NVML_ERROR_IN_USE):
        h100.nvmlComputeInstanceDestroy(ci)
    assert clear_busy(uuid, 555) == 0
    assert set_busy(uuid, pid=556, gi=gi_id) == 0  # on the GPU instance, any compute instance
    with nvml_raises(P.NVML_ERROR_IN_USE):
        h100.nvmlComputeInstanceDestroy(ci)
    clear_busy(uuid)
    h100.nvmlComputeInstanceDestroy(ci)
    assert set_busy(uuid, pid=557, gi=gi_id) == 0
    with nvml_raises(P.NVML_ERROR_IN_USE):
        h100.nvmlGpuInstanceDestroy(gi)
    # a client holding the GPU (persistenced, DCGM) does not pin an instance
    clear_busy(uuid)
    assert set_busy(uuid, pid=558, kind="client", name="nvidia-persistenced") == 0
    h100.nvmlGpuInstanceDestroy(gi)
    # but it makes the GPU reset fail, and a reboot ends it
    assert reset_gpu(uuid) == P.NVML_ERROR_IN_USE
    assert simulate_reboot() == 0
    assert reset_gpu(uuid) == 0


def test_busy_cli_and_nvidia_smi_reset(tmp_path):
    env = {"TMPDIR": str(tmp_path)}
    code = """
        import pynvml as n
        n.nvmlInit()
        h = n.nvmlDeviceGetHandleByIndex(1)
        print(n.nvmlDeviceSetMigMode(h, n.NVML_DEVICE_MIG_ENABLE), *n.nvmlDeviceGetMigMode(h))
        print(*[p.pid for p in n.nvmlDeviceGetComputeRunningProcesses(h)])
        """

    def run(*cmd):
        return subprocess.run([str(WITH_GPUS), "dgx-a100", "--", *cmd], env={**os.environ, **env},
                              capture_output=True, text=True, timeout=60, check=False)

    assert run(str(BUSY_CLI), "--gpu", "1", "--pid", "31337", "--name", "cuda-job").returncode == 0
    out = with_gpus("dgx-a100", code, env=env, fresh=False).stdout.split()
    assert out == ["19", "0", "1", "31337"]  # IN_USE: pending enable, the process is listed
    res = run(str(SMI), "-r", "-i", "00000000:0F:00.0")
    assert res.returncode == 255 and "GPU 00000000:0F:00.0: In use by another client" in res.stdout, res.stdout
    assert run(str(BUSY_CLI), "--clear", "--gpu", "1").returncode == 0
    res = run(str(SMI), "-r", "-i", "1")
    assert res.returncode == 0 and "GPU 00000000:0F:00.0 was successfully reset." in res.stdout
    assert with_gpus("dgx-a100", code, env=env, fresh=False).stdout.split() == ["0", "1", "1"]
    assert run(str(SMI), "-r", "-i", "42").returncode == 6
    res = run(str(RESET_CLI), "--gpu", "GPU-not-there")
    assert res.returncode == 1 and "Not Found" in res.stderr


# ---- fault injection (per process, from the environment) ----


def test_the_nth_call_fails_with_the_chosen_error(tmp_path):
    code = """
        import pynvml as n
        n.nvmlInit()
        h = n.nvmlDeviceGetHandleByIndex(0)
        n.nvmlDeviceSetMigMode(h, n.NVML_DEVICE_MIG_ENABLE)
        out = []
        for k in range(5):
            try:
                n.nvmlDeviceCreateGpuInstance(h, 19)
                out.append("ok")
            except n.NVMLError as e:
                out.append(str(e.value))
        print(*out)
        """
    log = tmp_path / "calls.log"
    env = {"TMPDIR": str(tmp_path), "GPUOPS_FAKE_NVML_CALL_LOG": str(log),
           "GPUOPS_FAKE_NVML_FAULTS": "nvmlDeviceCreateGpuInstance:3=INSUFFICIENT_RESOURCES,"
                                      "nvmlDeviceCreateGpuInstance:5+=NVML_ERROR_UNKNOWN"}
    res = with_gpus("hgx-h100", code, env=env, check=False)
    assert res.stdout.split() == ["ok", "ok", "23", "ok", "999"], res.stdout + res.stderr
    calls = log.read_text().splitlines()
    injected = [c for c in calls if "injected" in c]
    assert injected == ["nvmlDeviceCreateGpuInstance gpu=-1 injected rc=23",
                        "nvmlDeviceCreateGpuInstance gpu=-1 injected rc=999"]
    # the failed calls changed nothing: three instances exist
    created = [c for c in calls if c.startswith("nvmlDeviceCreateGpuInstance gpu=0") and c.endswith("rc=0")]
    assert len(created) == 3


def test_a_malformed_fault_is_reported_and_ignored(tmp_path):
    res = with_gpus("hgx-h100", "import pynvml as n; n.nvmlInit(); print(n.nvmlDeviceGetCount())",
                    env={"TMPDIR": str(tmp_path), "GPUOPS_FAKE_NVML_FAULTS": "nvmlInit_v2=UNKNOWN,nvmlDeviceGetCount_v2:1=NOPE"})
    assert res.stdout.split() == ["8"]
    assert "ignoring 'nvmlInit_v2=UNKNOWN'" in res.stderr and "ignoring 'nvmlDeviceGetCount_v2:1=NOPE'" in res.stderr


def test_a_fault_on_init(tmp_path):
    res = with_gpus("hgx-h100", "import pynvml as n\ntry:\n    n.nvmlInit()\nexcept n.NVMLError as e:\n    print(e.value)",
                    env={"TMPDIR": str(tmp_path), "GPUOPS_FAKE_NVML_FAULTS": "nvmlInitWithFlags:1=DRIVER_NOT_LOADED"})
    assert res.stdout.split() == ["9"]


# ---- persistence mode ----


def test_persistence_mode_is_set_and_a_reboot_restores_the_profile(h100):
    h = h100.nvmlDeviceGetHandleByIndex(4)
    before = h100.nvmlDeviceGetPersistenceMode(h)
    other = P.NVML_FEATURE_DISABLED if before == P.NVML_FEATURE_ENABLED else P.NVML_FEATURE_ENABLED
    h100.nvmlDeviceSetPersistenceMode(h, other)
    assert h100.nvmlDeviceGetPersistenceMode(h) == other
    assert h100.nvmlDeviceGetPersistenceMode(h100.nvmlDeviceGetHandleByIndex(5)) == before
    with nvml_raises(P.NVML_ERROR_INVALID_ARGUMENT):
        h100.nvmlDeviceSetPersistenceMode(h, 7)
    assert reset_gpu(h100.nvmlDeviceGetUUID(h)) == 0
    assert h100.nvmlDeviceGetPersistenceMode(h) == other  # a GPU reset keeps it
    assert simulate_reboot() == 0
    assert h100.nvmlDeviceGetPersistenceMode(h) == before


# ---- calls beyond the basics ----


def test_compute_instance_placements_and_creation_at_one(gpu, h100):
    gi = h100.nvmlDeviceCreateGpuInstance(gpu, 0)  # 7g: 7 compute slices
    count = ctypes.c_uint(0)
    P.nvmlGpuInstanceGetComputeInstancePossiblePlacements(gi, P.NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE, None,
                                                          ctypes.byref(count))
    arr = (P.c_nvmlComputeInstancePlacement_t * count.value)()
    P.nvmlGpuInstanceGetComputeInstancePossiblePlacements(gi, P.NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE, arr,
                                                          ctypes.byref(count))
    assert [(p.start, p.size) for p in arr] == [(0, 2), (2, 2), (4, 2)]
    pl = P.c_nvmlComputeInstancePlacement_t(4, 2)
    ci = P.nvmlGpuInstanceCreateComputeInstanceWithPlacement(gi, P.NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE,
                                                             ctypes.byref(pl))
    info = P.nvmlComputeInstanceGetInfo(ci)
    assert (info.placement.start, info.placement.size, info.profileId) == (4, 2, 1)
    with nvml_raises(P.NVML_ERROR_INSUFFICIENT_RESOURCES):  # occupied
        P.nvmlGpuInstanceCreateComputeInstanceWithPlacement(gi, P.NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE,
                                                            ctypes.byref(pl))
    with nvml_raises(P.NVML_ERROR_INVALID_ARGUMENT):  # not a placement of the profile
        P.nvmlGpuInstanceCreateComputeInstanceWithPlacement(gi, P.NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE,
                                                            ctypes.byref(P.c_nvmlComputeInstancePlacement_t(1, 2)))
    # automatic creation takes the first free placement
    ci2 = P.nvmlGpuInstanceCreateComputeInstance(gi, P.NVML_COMPUTE_INSTANCE_PROFILE_2_SLICE)
    assert P.nvmlComputeInstanceGetInfo(ci2).placement.start == 0


def test_profile_info_by_id(gpu, h100):
    for index, pid, name in ((P.NVML_GPU_INSTANCE_PROFILE_3_SLICE, 9, "MIG 3g.40gb"),
                             (P.NVML_GPU_INSTANCE_PROFILE_1_SLICE_REV1, 20, "MIG 1g.10gb+me")):
        by_index = P.nvmlDeviceGetGpuInstanceProfileInfoV(gpu, index)
        by_id = P.nvmlDeviceGetGpuInstanceProfileInfoByIdV(gpu, pid)
        assert by_id.id == pid and by_id.name == name
        assert (by_id.sliceCount, by_id.memorySizeMB, by_id.multiprocessorCount) == (
            by_index.sliceCount, by_index.memorySizeMB, by_index.multiprocessorCount)
    with nvml_raises(P.NVML_ERROR_NOT_SUPPORTED):
        P.nvmlDeviceGetGpuInstanceProfileInfoByIdV(gpu, 4)  # an index, not an id


# ---- tables and geometry other than A100's ----


def lgip(h):
    """profile id -> (name, count, memory MiB, SMs, CE, DEC, ENC, JPEG, OFA), like nvidia-smi mig -lgip"""
    out = {}
    for index in range(P.NVML_GPU_INSTANCE_PROFILE_COUNT):
        try:
            i = P.nvmlDeviceGetGpuInstanceProfileInfoV(h, index)
        except P.NVMLError_NotSupported:
            continue
        out[i.id] = (i.name.removeprefix("MIG "), i.instanceCount, i.memorySizeMB, i.multiprocessorCount,
                     i.copyEngineCount, i.decoderCount, i.encoderCount, i.jpegCount, i.ofaCount)
    return out


def test_h200_table_as_nvidia_smi_reports_it(nvml):
    n = nvml("hgx-h200")
    h = n.nvmlDeviceGetHandleByIndex(0)
    n.nvmlDeviceSetMigMode(h, ENABLE)
    # NVIDIA/mig-parted #120: 16.00 / 32.25 / 69.50 / 139.75 GiB
    assert lgip(h) == {
        19: ("1g.18gb", 7, 16384, 16, 1, 1, 0, 1, 0),
        20: ("1g.18gb+me", 1, 16384, 16, 1, 1, 0, 1, 1),
        15: ("1g.35gb", 4, 33024, 26, 1, 1, 0, 1, 0),
        14: ("2g.35gb", 3, 33024, 32, 2, 2, 0, 2, 0),
        9: ("3g.71gb", 2, 71168, 60, 3, 3, 0, 3, 0),
        5: ("4g.71gb", 1, 71168, 64, 4, 4, 0, 4, 0),
        0: ("7g.141gb", 1, 143104, 132, 8, 7, 0, 7, 1),
    }


def test_b200_measured_rows(nvml):
    n = nvml("hgx-b200")
    h = n.nvmlDeviceGetHandleByIndex(0)
    n.nvmlDeviceSetMigMode(h, ENABLE)
    table = lgip(h)
    # NVIDIA/mig-parted #166: 22.00 / 44.25 GiB, 18 / 30 / 36 SMs, 2 CEs on 1g, 4 on 2g
    assert table[19] == ("1g.23gb", 7, 22528, 18, 2, 1, 0, 1, 0)
    assert table[15] == ("1g.45gb", 4, 45312, 30, 2, 1, 0, 1, 0)
    assert table[14] == ("2g.45gb", 3, 45312, 36, 4, 2, 0, 2, 0)


def test_rtx_pro_6000_has_other_ids_slices_and_placements(nvml):
    n = nvml("rtx-pro-6000-x4")
    h = n.nvmlDeviceGetHandleByIndex(0)
    n.nvmlDeviceSetMigMode(h, ENABLE)
    table = lgip(h)
    assert {pid: v[0] for pid, v in table.items()} == {
        14: "1g.24gb", 21: "1g.24gb+me", 47: "1g.24gb+gfx", 65: "1g.24gb+me.all", 67: "1g.24gb-me",
        5: "2g.48gb", 35: "2g.48gb+gfx", 64: "2g.48gb+me.all", 66: "2g.48gb-me", 0: "4g.96gb", 32: "4g.96gb+gfx"}
    assert n.nvmlDeviceGetMaxMigDeviceCount(h) == 4
    assert placements(h, 14) == [(0, 3), (3, 3), (6, 3), (9, 3)]
    assert placements(h, 5) == [(0, 6), (6, 6)]
    assert placements(h, 0) == [(0, 12)]
    # 19 is no profile here: an A100 id must not work
    with nvml_raises(P.NVML_ERROR_INVALID_ARGUMENT):
        n.nvmlDeviceCreateGpuInstance(h, 19)
    # the gfx variants say so in the v3 capabilities
    for pid, gfx in ((47, True), (14, False)):
        info = GpuInstanceProfileInfoV3(version=ctypes.sizeof(GpuInstanceProfileInfoV3) | 3 << 24)
        assert P.nvmlLib.nvmlDeviceGetGpuInstanceProfileInfoByIdV(h, pid, ctypes.byref(info)) == 0
        assert bool(info.capabilities & GI_PROFILE_CAPS_GFX) == gfx
    # published nvidia-smi mig -lgi of four 1g instances: ids 3, 4, 5, 6 at 0, 3, 6, 9
    ids = [gi_info(n.nvmlDeviceCreateGpuInstance(h, 14)) for _unused in range(4)]
    assert ids == [(3, 14, (0, 3)), (4, 14, (3, 3)), (5, 14, (6, 3)), (6, 14, (9, 3))]
    with nvml_raises(P.NVML_ERROR_INSUFFICIENT_RESOURCES):
        n.nvmlDeviceCreateGpuInstance(h, 5)  # 4 compute slices are used
    for gi in gpu_instances(h, 14):
        n.nvmlGpuInstanceDestroy(gi)
    # a 2g and two 1g fill the GPU: 2g 0:6 -> 1, 1g 6:3 -> 5, 9:3 -> 6
    assert gi_info(n.nvmlDeviceCreateGpuInstance(h, 5)) == (1, 5, (0, 6))
    two = sorted(gi_info(n.nvmlDeviceCreateGpuInstance(h, 14)) for _unused in range(2))
    assert two == [(5, 14, (6, 3)), (6, 14, (9, 3))]
    # compute instances of a 4-slice GPU instance: 1, 2 and 4 slices, no 3 or 7
    for gi in gpu_instances(h, 14) + gpu_instances(h, 5):
        n.nvmlGpuInstanceDestroy(gi)
    gi = n.nvmlDeviceCreateGpuInstance(h, 0)
    assert n.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, P.NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE, 0).sliceCount == 4
    with nvml_raises(P.NVML_ERROR_NOT_SUPPORTED):
        n.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, P.NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE, 0)


# ---- ids and automatic placement vary by driver ----


def test_id_schemes_differ_but_placements_read_back(nvml, tmp_path):
    """The same layout gets other GPU instance ids on other profiles (drivers): a tool must read
    each instance's placement back, never infer it from the id."""
    seen = {}
    for profile in ("hgx-h100", "hgx-h200", "hgx-b200"):
        n = nvml(profile)
        h = n.nvmlDeviceGetHandleByIndex(0)
        n.nvmlDeviceSetMigMode(h, ENABLE)
        got = [gi_info(create_gi_at(h, pid, start, size)) for pid, start, size in ((9, 4, 4), (14, 0, 2), (19, 2, 1))]
        assert [g[1:] for g in got] == [(9, (4, 4)), (14, (0, 2)), (19, (2, 1))]
        seen[profile] = [g[0] for g in got]
        n.nvmlShutdown()
    assert seen["hgx-h100"] == [2, 3, 9]  # by placement (0 = 0:8, 1-2 = x:4, 3-6 = x:2, 7-14 = x:1)
    assert seen["hgx-b200"] == [1, 2, 3]  # the lowest free id
    assert seen["hgx-h200"] not in (seen["hgx-h100"], seen["hgx-b200"])  # shuffled


def test_automatic_placement_is_a_profile_choice(nvml, tmp_path):
    shutil.copy(PROFILE_DIR / "hgx-h100.profile", tmp_path)
    prof = tmp_path / "h100-lowest.profile"
    prof.write_text("include = hgx-h100\n[gpu]\nmig_auto_placement = lowest\n")
    n = nvml(str(prof))
    h = n.nvmlDeviceGetHandleByIndex(0)
    n.nvmlDeviceSetMigMode(h, ENABLE)
    assert [gi_info(n.nvmlDeviceCreateGpuInstance(h, 19))[2][0] for _unused in range(3)] == [0, 1, 2]
    n.nvmlShutdown()
    prof.write_text("include = hgx-h100\n[gpu]\nmig_auto_placement = highest\n")
    n = nvml(str(prof), state=tmp_path / "other.state")
    h = n.nvmlDeviceGetHandleByIndex(0)
    n.nvmlDeviceSetMigMode(h, ENABLE)
    assert [gi_info(n.nvmlDeviceCreateGpuInstance(h, 19))[2][0] for _unused in range(3)] == [6, 5, 4]


def test_the_driver_places_the_first_3g_high(gpu, h100):
    # NVIDIA's MIG guide: two 3g.20gb created without placements get ids 2 (4:4), then 1 (0:4)
    assert [gi_info(h100.nvmlDeviceCreateGpuInstance(gpu, 9)) for _unused in range(2)] == [(2, 9, (4, 4)), (1, 9, (0, 4))]


def test_call_log_records_mutations(tmp_path):
    log = tmp_path / "calls.log"
    code = """
        import pynvml as n
        n.nvmlInit()
        h = n.nvmlDeviceGetHandleByIndex(0)
        n.nvmlDeviceSetMigMode(h, n.NVML_DEVICE_MIG_ENABLE)
        gi = n.nvmlDeviceCreateGpuInstance(h, 9)
        ci = n.nvmlGpuInstanceCreateComputeInstance(gi, n.NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE)
        n.nvmlDeviceGetGpuInstanceRemainingCapacity(h, 9)
        n.nvmlComputeInstanceDestroy(ci)
        n.nvmlGpuInstanceDestroy(gi)
        """
    with_gpus("hgx-h100", code, env={"TMPDIR": str(tmp_path), "GPUOPS_FAKE_NVML_CALL_LOG": str(log)})
    assert [line.split()[0] for line in log.read_text().splitlines()] == [
        "nvmlDeviceSetMigMode", "nvmlDeviceCreateGpuInstance", "nvmlGpuInstanceCreateComputeInstance",
        "nvmlComputeInstanceDestroy", "nvmlGpuInstanceDestroy"]
    assert all(line.endswith("rc=0") for line in log.read_text().splitlines())

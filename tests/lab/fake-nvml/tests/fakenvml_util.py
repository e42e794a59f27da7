"""Helpers shared by the fake NVML tests (unique module name on purpose:
other test directories of the repository have their own conftest.py).

Importing this module builds the fake library (make, incremental) and loads
it by ABSOLUTE path with ctypes before pynvml is imported: pynvml's
CDLL("libnvidia-ml.so.1") then resolves to the already-loaded object with
that soname, so the UNMODIFIED pynvml talks to the fake.
"""

import ctypes
import os
import re
import subprocess
import sys
from contextlib import contextmanager
from pathlib import Path

import pytest

FAKE_DIR = Path(__file__).resolve().parent.parent
LAB_DIR = FAKE_DIR.parent
sys.path.insert(0, str(LAB_DIR))  # labfacts: the profiles' facts the tests write down once
PROFILE_DIR = FAKE_DIR / "profiles"
BUILD_DIR = FAKE_DIR / "build"
LIB_PATH = BUILD_DIR / "libnvidia-ml.so.1"
WITH_GPUS = LAB_DIR / "with-gpus"
RESET_CLI = FAKE_DIR / "fake-nvml-reset"

subprocess.run(["make", "-s", "-C", str(FAKE_DIR)], check=True)
FAKE_LIB = ctypes.CDLL(str(LIB_PATH))

import pynvml  # noqa: E402  (must come after the fake is loaded)

UUID_RE = re.compile(
    r"^GPU-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
)
MIG_UUID_RE = re.compile(
    r"^MIG-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$"
)
BUS_ID_RE = re.compile(r"^[0-9A-F]{8}:[0-9A-F]{2}:[0-9A-F]{2}\.0$")


@contextmanager
def nvml_raises(code):
    """Expect pynvml to raise the NVMLError subclass for `code`."""
    with pytest.raises(pynvml.NVMLError) as exc:
        yield exc
    assert (
        exc.value.value == code
    ), f"expected NVML error {code}, got {exc.value.value} ({exc.value})"
    assert isinstance(exc.value, pynvml.nvmlExceptionClass(code))


def handles():
    return [
        pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(pynvml.nvmlDeviceGetCount())
    ]


def c_fn(name, restype=ctypes.c_int):
    """Direct access to a C symbol of the (already loaded) library."""
    fn = getattr(pynvml.nvmlLib, name)
    fn.restype = restype
    return fn


def gpu_instances(handle, profile_id, max_count=8):
    arr = (pynvml.c_nvmlGpuInstance_t * max_count)()
    count = ctypes.c_uint(0)
    pynvml.nvmlDeviceGetGpuInstances(handle, profile_id, arr, ctypes.byref(count))
    return [arr[i] for i in range(count.value)]


def compute_instances(gi, profile_id, max_count=8):
    arr = (pynvml.c_nvmlComputeInstance_t * max_count)()
    count = ctypes.c_uint(0)
    pynvml.nvmlGpuInstanceGetComputeInstances(gi, profile_id, arr, ctypes.byref(count))
    return [arr[i] for i in range(count.value)]


def placements(handle, profile_id):
    count = ctypes.c_uint(0)
    pynvml.nvmlDeviceGetGpuInstancePossiblePlacements(
        handle, profile_id, None, ctypes.byref(count)
    )
    arr = (pynvml.c_nvmlGpuInstancePlacement_t * count.value)()
    pynvml.nvmlDeviceGetGpuInstancePossiblePlacements(
        handle, profile_id, arr, ctypes.byref(count)
    )
    return [(arr[i].start, arr[i].size) for i in range(count.value)]


def create_gi_at(handle, profile_id, start, size):
    pl = pynvml.c_nvmlGpuInstancePlacement_t(start, size)
    return pynvml.nvmlDeviceCreateGpuInstanceWithPlacement(
        handle, profile_id, ctypes.byref(pl)
    )


def gi_info(gi):
    info = pynvml.nvmlGpuInstanceGetInfo(gi)
    return info.id, info.profileId, (info.placement.start, info.placement.size)


def profile_path(name):
    path = Path(name)
    if path.is_absolute():
        return path
    return PROFILE_DIR / f"{name}.profile"


def all_profiles():
    return sorted(p.stem for p in PROFILE_DIR.glob("*.profile"))


def simulate_reboot():
    """A reboot of the node, in process (uses the current environment)."""
    return FAKE_LIB.gpuopsFakeNvmlSimulateReboot()


FAKE_LIB.gpuopsFakeNvmlResetGpu.argtypes = [ctypes.c_char_p]
FAKE_LIB.gpuopsFakeNvmlSetBusy.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_uint,
                                           ctypes.c_char_p, ctypes.c_ulonglong, ctypes.c_char_p]
FAKE_LIB.gpuopsFakeNvmlClearBusy.argtypes = [ctypes.c_char_p, ctypes.c_uint]


def reset_gpu(uuid):
    """A GPU reset (nvidia-smi -r) of the GPU with that UUID."""
    return FAKE_LIB.gpuopsFakeNvmlResetGpu(uuid.encode())


def set_busy(uuid, pid, kind="compute", name="python3", gi=-1, ci=-1, used_mib=0):
    return FAKE_LIB.gpuopsFakeNvmlSetBusy(uuid.encode(), gi, ci, pid, kind.encode(), used_mib, name.encode())


def clear_busy(uuid=None, pid=0):
    return FAKE_LIB.gpuopsFakeNvmlClearBusy(uuid.encode() if uuid else None, pid)


def run_with_gpus(*args, env=None, check=True, timeout=60):
    e = dict(os.environ)
    e.pop("GPUOPS_FAKE_NVML_PROFILE", None)
    e.pop("GPUOPS_FAKE_NVML_STATE", None)
    if env:
        e.update(env)
    res = subprocess.run(
        [str(WITH_GPUS), *args],
        env=e,
        capture_output=True,
        text=True,
        timeout=timeout,
        check=False,
    )
    if check and res.returncode != 0:
        raise AssertionError(
            f"with-gpus {args} exited {res.returncode}\nstdout:\n{res.stdout}\nstderr:\n{res.stderr}"
        )
    return res


class GpuInstanceProfileInfoV3(ctypes.Structure):
    """nvmlGpuInstanceProfileInfo_v3_t (pynvml has no binding for it)."""

    _fields_ = [
        (f, ctypes.c_uint)
        for f in (
            "version",
            "id",
            "sliceCount",
            "instanceCount",
            "multiprocessorCount",
            "copyEngineCount",
            "decoderCount",
            "encoderCount",
            "jpegCount",
            "ofaCount",
        )
    ] + [
        ("memorySizeMB", ctypes.c_ulonglong),
        ("name", ctypes.c_char * 96),
        ("capabilities", ctypes.c_uint),
    ]


# nvml.h: NVML_GPU_INSTANCE_PROFILE_CAPS_GFX (pynvml lacks it)
GI_PROFILE_CAPS_GFX = 0x2

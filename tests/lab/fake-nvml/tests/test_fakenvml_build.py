"""The library itself: build, soname, exports, ABI against nvml.h, C callers."""

import os
import subprocess

import pynvml

from fakenvml_util import BUILD_DIR, FAKE_DIR, FAKE_LIB, LIB_PATH, profile_path


def exported_symbols():
    out = subprocess.run(
        ["nm", "-D", "--defined-only", str(LIB_PATH)],
        check=True,
        capture_output=True,
        text=True,
    ).stdout
    return {line.split()[-1] for line in out.splitlines() if line.strip()}


# every C symbol the pynvml wrappers in the brief call (pynvml name -> C symbol)
REQUIRED = """
nvmlInit nvmlInit_v2 nvmlInitWithFlags nvmlShutdown nvmlErrorString
nvmlSystemGetDriverVersion nvmlSystemGetNVMLVersion nvmlSystemGetCudaDriverVersion
nvmlSystemGetCudaDriverVersion_v2 nvmlDeviceGetCount nvmlDeviceGetCount_v2
nvmlDeviceGetHandleByIndex nvmlDeviceGetHandleByIndex_v2 nvmlDeviceGetHandleByUUID
nvmlDeviceGetHandleByPciBusId_v2 nvmlDeviceGetIndex nvmlDeviceGetName nvmlDeviceGetUUID
nvmlDeviceGetSerial nvmlDeviceGetBoardPartNumber nvmlDeviceGetVbiosVersion nvmlDeviceGetPciInfo_v3
nvmlDeviceGetMinorNumber nvmlDeviceGetCudaComputeCapability nvmlDeviceGetArchitecture
nvmlDeviceGetMemoryInfo nvmlDeviceGetMemoryInfo_v2 nvmlDeviceGetPersistenceMode
nvmlDeviceGetPowerUsage nvmlDeviceGetEnforcedPowerLimit nvmlDeviceGetPowerManagementLimit
nvmlDeviceGetTemperature nvmlDeviceGetTemperatureThreshold nvmlDeviceGetClockInfo nvmlDeviceGetMaxClockInfo
nvmlDeviceGetCurrPcieLinkGeneration nvmlDeviceGetMaxPcieLinkGeneration
nvmlDeviceGetGpuMaxPcieLinkGeneration nvmlDeviceGetCurrPcieLinkWidth nvmlDeviceGetMaxPcieLinkWidth
nvmlDeviceGetUtilizationRates nvmlDeviceGetEccMode nvmlDeviceGetTotalEccErrors
nvmlDeviceGetRemappedRows nvmlDeviceGetCurrentClocksThrottleReasons
nvmlDeviceGetCurrentClocksEventReasons nvmlDeviceGetNvLinkState nvmlDeviceGetNvLinkRemoteDeviceType
nvmlDeviceGetNvLinkRemotePciInfo_v2 nvmlDeviceGetP2PStatus nvmlDeviceGetTopologyCommonAncestor
nvmlDeviceGetNumaNodeId nvmlDeviceGetCpuAffinity nvmlDeviceGetSupportedEventTypes
nvmlEventSetCreate nvmlDeviceRegisterEvents nvmlEventSetWait_v2 nvmlEventSetFree
nvmlDeviceGetMigMode nvmlDeviceSetMigMode nvmlDeviceGetGpuInstanceProfileInfo
nvmlDeviceGetGpuInstanceProfileInfoV nvmlDeviceGetGpuInstancePossiblePlacements_v2
nvmlDeviceGetGpuInstanceRemainingCapacity nvmlDeviceCreateGpuInstance
nvmlDeviceCreateGpuInstanceWithPlacement nvmlGpuInstanceDestroy nvmlDeviceGetGpuInstances
nvmlDeviceGetGpuInstanceById nvmlGpuInstanceGetInfo nvmlGpuInstanceGetComputeInstanceProfileInfo
nvmlGpuInstanceGetComputeInstanceProfileInfoV nvmlGpuInstanceGetComputeInstanceRemainingCapacity
nvmlGpuInstanceCreateComputeInstance nvmlComputeInstanceDestroy nvmlGpuInstanceGetComputeInstances
nvmlGpuInstanceGetComputeInstanceById nvmlComputeInstanceGetInfo_v2 nvmlDeviceIsMigDeviceHandle
nvmlDeviceGetGpuInstanceId nvmlDeviceGetComputeInstanceId nvmlDeviceGetMaxMigDeviceCount
nvmlDeviceGetMigDeviceHandleByIndex nvmlDeviceGetDeviceHandleFromMigDeviceHandle
nvmlGpuInstanceGetComputeInstancePossiblePlacements nvmlGpuInstanceCreateComputeInstanceWithPlacement
nvmlDeviceGetGpuInstanceProfileInfoByIdV nvmlDeviceSetPersistenceMode
nvmlDeviceGetComputeRunningProcesses_v3 nvmlDeviceGetGraphicsRunningProcesses_v3 nvmlSystemGetProcessName
gpuopsFakeNvmlSimulateReboot gpuopsFakeNvmlResetGpu gpuopsFakeNvmlSetBusy gpuopsFakeNvmlClearBusy
gpuopsFakeNvmlDescribe
""".split()


def test_library_and_symlink_exist():
    assert LIB_PATH.is_file()
    link = BUILD_DIR / "libnvidia-ml.so"
    assert link.is_symlink() and os.readlink(link) == "libnvidia-ml.so.1"


def test_soname():
    out = subprocess.run(
        ["readelf", "-d", str(LIB_PATH)], check=True, capture_output=True, text=True
    ).stdout
    assert "Library soname: [libnvidia-ml.so.1]" in out


def test_required_symbols_exported():
    missing = sorted(set(REQUIRED) - exported_symbols())
    assert not missing, f"missing exports: {missing}"


def test_only_api_symbols_exported():
    leaked = sorted(
        s for s in exported_symbols() if not s.startswith(("nvml", "gpuopsFakeNvml"))
    )
    assert not leaked, f"internal symbols leak out of the library: {leaked}"


def test_pynvml_uses_the_fake(h100):
    # pynvml opened "libnvidia-ml.so.1" by name and got the object loaded by path
    assert pynvml.nvmlLib._handle == FAKE_LIB._handle


def test_make_is_incremental():
    res = subprocess.run(
        ["make", "-q", "-C", str(FAKE_DIR)], capture_output=True, check=False
    )
    assert res.returncode == 0, "a second make would rebuild something"


def test_nvml_include_override():
    out = subprocess.run(
        [
            "make",
            "-s",
            "-C",
            str(FAKE_DIR),
            "print-nvml-include",
            "NVML_INCLUDE=/opt/cuda/include",
        ],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert out == "/opt/cuda/include"
    found = subprocess.run(
        ["make", "-s", "-C", str(FAKE_DIR), "print-nvml-include"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    assert os.path.isfile(os.path.join(found, "nvml.h"))


C_PROGRAM = r"""
#include <stdio.h>
#include <nvml.h>

int main(void)
{
    unsigned int n = 0;
    char name[NVML_DEVICE_NAME_V2_BUFFER_SIZE];
    nvmlDevice_t dev;
    nvmlReturn_t r = nvmlInit();            /* the header maps this to nvmlInit_v2 */
    if (r != NVML_SUCCESS) { printf("init: %s\n", nvmlErrorString(r)); return 3; }
    if (nvmlDeviceGetCount(&n) != NVML_SUCCESS) return 4;          /* _v2 */
    if (nvmlDeviceGetHandleByIndex(n - 1, &dev) != NVML_SUCCESS) return 5;
    if (nvmlDeviceGetName(dev, name, sizeof(name)) != NVML_SUCCESS) return 6;
    printf("%u %s\n", n, name);
    return nvmlShutdown() == NVML_SUCCESS ? 0 : 7;
}
"""


def test_c_program_links_and_runs(tmp_path):
    include = subprocess.run(
        ["make", "-s", "-C", str(FAKE_DIR), "print-nvml-include"],
        check=True,
        capture_output=True,
        text=True,
    ).stdout.strip()
    src = tmp_path / "prog.c"
    src.write_text(C_PROGRAM)
    exe = tmp_path / "prog"
    subprocess.run(
        [
            "gcc",
            "-Wall",
            "-Werror",
            f"-I{include}",
            str(src),
            "-o",
            str(exe),
            f"-L{BUILD_DIR}",
            "-lnvidia-ml",
        ],
        check=True,
    )
    # the program needs nvmlInit_v2 & friends under their versioned names
    undefined = subprocess.run(
        ["nm", "-D", "--undefined-only", str(exe)],
        capture_output=True,
        text=True,
        check=False,
    ).stdout
    assert "nvmlInit_v2" in undefined and "nvmlDeviceGetCount_v2" in undefined
    env = dict(
        os.environ,
        LD_LIBRARY_PATH=str(BUILD_DIR),
        GPUOPS_FAKE_NVML_PROFILE=str(profile_path("l40s-x4")),
        GPUOPS_FAKE_NVML_STATE=str(tmp_path / "s"),
    )
    out = subprocess.run(
        [str(exe)], env=env, capture_output=True, text=True, check=False
    )
    assert out.returncode == 0, out.stdout + out.stderr
    assert out.stdout.strip() == "4 NVIDIA L40S"
    env["GPUOPS_FAKE_NVML_PROFILE"] = str(profile_path("driver-not-loaded"))
    out = subprocess.run(
        [str(exe)], env=env, capture_output=True, text=True, check=False
    )
    assert out.returncode == 3 and out.stdout.strip() == "init: Driver Not Loaded"

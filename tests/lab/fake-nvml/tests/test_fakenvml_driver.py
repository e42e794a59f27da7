"""The simulated driver around the fake NVML: the profile description hook, gpuops-fake-driver
(version-named libraries, device nodes, modules.dep), the placeholder nvidia-smi, the fake
libnvidia-sandboxutils and the .deb that installs them in lab nodes."""

import ctypes
import json
import os
import re
import shutil
import stat
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from fakenvml_util import BUILD_DIR, FAKE_DIR, FAKE_LIB, profile_path, run_with_gpus
from labfacts import H100_MIG_UUIDS, H100_UUIDS, MIG_SCRIPT

HELPER = FAKE_DIR / "gpuops_fake_driver.py"
SMI = BUILD_DIR / "nvidia-smi"
SANDBOX = BUILD_DIR / "sandboxutils" / "libnvidia-sandboxutils.so.1"
DEB = BUILD_DIR / "gpuops-lab-fake-nvml.deb"
LIBDIR = "usr/lib/x86_64-linux-gnu"

H100_BUS = ["1B", "43", "52", "61", "9D", "C3", "D1", "DF"]


def needs_root():
    if os.geteuid() != 0:
        pytest.fail("creating device nodes (mknod) needs root; run the lab's tests as root", pytrace=False)


def describe(monkeypatch, profile):
    monkeypatch.setenv("GPUOPS_FAKE_NVML_PROFILE", str(profile_path(profile)))
    buf = ctypes.create_string_buffer(4096)
    rc = FAKE_LIB.gpuopsFakeNvmlDescribe(buf, len(buf))
    return rc, buf.value.decode()


# ------------------------------------------------------------------ the description hook


def test_describe_loaded_profile(monkeypatch):
    rc, text = describe(monkeypatch, "hgx-h100")
    assert rc == 0
    # index, minor, MIG-capable, PCI bus id, device id, subsystem id, NUMA node
    assert text.splitlines() == ["driver_state loaded", "driver_version 570.172.08"] + [
        "gpu %d %d 1 00000000:%s:00.0 0x233010DE 0x16C110DE %d" % (i, i, bus, i // 4) for i, bus in enumerate(H100_BUS)]
    rc, text = describe(monkeypatch, "t4-x1")
    assert rc == 0 and text.splitlines()[1:] == ["driver_version 535.247.01",
                                                 "gpu 0 0 0 00000000:00:04.0 0x1EB810DE 0x12A210DE 0"]


def test_describe_works_without_a_loadable_driver(monkeypatch):
    # nvmlInit fails on these profiles on purpose; the files of the installation still follow them
    rc, text = describe(monkeypatch, "driver-not-loaded")
    assert rc == 0 and text.splitlines()[:2] == ["driver_state not_loaded", "driver_version 570.172.08"]
    rc, text = describe(monkeypatch, "version-mismatch")
    assert rc == 0 and text.splitlines()[:2] == ["driver_state version_mismatch", "driver_version 580.95.05"]
    assert len(text.splitlines()) == 10


def test_describe_errors(monkeypatch, tmp_path):
    rc, _text = describe(monkeypatch, tmp_path / "missing.profile")
    assert rc == 9  # NVML_ERROR_DRIVER_NOT_LOADED: no profile, no driver
    bad = tmp_path / "bad.profile"
    bad.write_text("[node]\ndriver_version = 1.2.3\n")  # gpu_count missing
    rc, _text = describe(monkeypatch, bad)
    assert rc == 999  # NVML_ERROR_UNKNOWN
    monkeypatch.setenv("GPUOPS_FAKE_NVML_PROFILE", str(profile_path("hgx-h100")))
    small = ctypes.create_string_buffer(40)
    assert FAKE_LIB.gpuopsFakeNvmlDescribe(small, len(small)) == 7  # NVML_ERROR_INSUFFICIENT_SIZE
    assert small.value == b""
    assert FAKE_LIB.gpuopsFakeNvmlDescribe(None, 0) == 2  # NVML_ERROR_INVALID_ARGUMENT


# ------------------------------------------------------------------ gpuops-fake-driver


def fake_driver(root, profile, *extra, user=None, check=True):
    # (as another user: the system's python3, as on a node; the test's interpreter may live under
    # root's home, e.g. a pyenv build, which that user cannot read)
    python = "/usr/bin/python3" if user else sys.executable
    argv = [python, str(HELPER), "--root", str(root), "--payload", str(BUILD_DIR), "--package-files", *extra]
    if profile:
        argv += ["--profile", str(profile_path(profile))]
    if user:
        argv = ["setpriv", "--reuid", user, "--regid", user, "--clear-groups", *argv]
    res = subprocess.run(argv, capture_output=True, text=True, check=False)
    if check:
        assert res.returncode == 0, res.stdout + res.stderr
    return res


def listing(root):
    """relative path -> ('c', major, minor, mode) | ('l', target) | ('f', mode) under root."""
    out = {}
    for base, _dirs, files in os.walk(root):
        for name in files:
            path = os.path.join(base, name)
            rel = os.path.relpath(path, root)
            st = os.lstat(path)
            if stat.S_ISCHR(st.st_mode):
                out[rel] = ("c", os.major(st.st_rdev), os.minor(st.st_rdev), stat.S_IMODE(st.st_mode))
            elif stat.S_ISLNK(st.st_mode):
                out[rel] = ("l", os.readlink(path))
            else:
                out[rel] = ("f", stat.S_IMODE(st.st_mode))
    return out


def test_driver_files_of_an_hgx_h100(tmp_path):
    needs_root()
    root = tmp_path / "root"
    fake_driver(root, "hgx-h100")
    files = listing(root)
    assert files[f"{LIBDIR}/libcuda.so.570.172.08"] == ("f", 0o644)
    assert files[f"{LIBDIR}/libcuda.so.1"] == ("l", "libcuda.so.570.172.08")
    assert files[f"{LIBDIR}/libnvidia-ml.so.570.172.08"] == ("f", 0o644)
    assert files[f"{LIBDIR}/libnvidia-ml.so.1"] == ("l", "libnvidia-ml.so.570.172.08")
    assert files[f"{LIBDIR}/libnvidia-sandboxutils.so.570.172.08"] == ("f", 0o644)
    assert files[f"{LIBDIR}/libnvidia-sandboxutils.so.1"] == ("l", "libnvidia-sandboxutils.so.570.172.08")
    assert files["usr/bin/nvidia-smi"] == ("f", 0o755)
    readelf = subprocess.run(["readelf", "-d", str(root / LIBDIR / "libcuda.so.570.172.08")],
                             capture_output=True, text=True, check=True).stdout
    assert "Library soname: [libcuda.so.1]" in readelf
    # the nvidia major is 195, nvidiactl its minor 255 (Linux's devices.txt); nvidia-uvm and
    # nvidia-caps get dynamic majors
    assert files["dev/nvidiactl"] == ("c", 195, 255, 0o666)
    for i in range(8):
        assert files[f"dev/nvidia{i}"] == ("c", 195, i, 0o666)
    uvm = files["dev/nvidia-uvm"]
    assert uvm[0] == "c" and uvm[2] == 0 and files["dev/nvidia-uvm-tools"] == ("c", uvm[1], 1, 0o666)
    caps = {rel: node for rel, node in files.items() if rel.startswith("dev/nvidia-caps/")}
    # mig/config and mig/monitor, then 15 GPU instances x (access + 8 compute instances) per GPU
    assert len(caps) == 2 + 8 * 15 * 9
    major = caps["dev/nvidia-caps/nvidia-cap1"][1]
    assert major not in (195, uvm[1])
    assert caps["dev/nvidia-caps/nvidia-cap1"] == ("c", major, 1, 0o400)  # mig/config
    assert caps["dev/nvidia-caps/nvidia-cap2"] == ("c", major, 2, 0o444)  # mig/monitor
    assert caps["dev/nvidia-caps/nvidia-cap3"] == ("c", major, 3, 0o444)  # gpu0/gi0/access
    assert caps["dev/nvidia-caps/nvidia-cap439"] == ("c", major, 439, 0o444)  # gpu3/gi3/ci3/access
    assert caps["dev/nvidia-caps/nvidia-cap1082"] == ("c", major, 1082, 0o444)  # gpu7/gi14/ci7/access
    assert "dev/nvidia-caps/nvidia-cap1083" not in caps
    kernel = os.uname().release
    assert (root / f"lib/modules/{kernel}/modules.dep").read_text().splitlines() == [
        "updates/dkms/nvidia.ko:",
        "updates/dkms/nvidia-uvm.ko: updates/dkms/nvidia.ko",
        "updates/dkms/nvidia-modeset.ko: updates/dkms/nvidia.ko",
    ]
    manifest = json.loads((root / "var/lib/gpuops-fake-nvml/driver-files").read_text())
    assert manifest["driver"] == "570.172.08"
    assert set(manifest["files"]) == set(files) - {"var/lib/gpuops-fake-nvml/driver-files"}
    # the same driver again: modules.dep stays as it is (nothing for nvidia-cdi-refresh.path)
    written = (root / f"lib/modules/{kernel}/modules.dep").stat().st_mtime_ns
    fake_driver(root, "hgx-h100-faults")
    assert (root / f"lib/modules/{kernel}/modules.dep").stat().st_mtime_ns == written


def test_a_pci_view_of_its_own_gets_the_gpus_and_lspci_reads_them(tmp_path):
    """A root whose sys/bus/pci is a tmpfs of its own (a lab node's) gets the GPUs' PCI devices
    without --sysfs; lspci reads their configuration headers; another profile takes them back."""
    needs_root()
    if not shutil.which("lspci"):
        pytest.fail("lspci is missing (apt-get install pciutils)", pytrace=False)
    root = tmp_path / "root"
    (root / "sys/bus/pci").mkdir(parents=True)
    script = f"""set -e
mount -t tmpfs gpuops-test-pci {root}/sys/bus/pci
"$@" --profile {profile_path('hgx-h100')}
lspci -n -O sysfs.path={root}/sys/bus/pci
echo ---
lspci -v -O sysfs.path={root}/sys/bus/pci -s 1b:00.0
echo ---
"$@" --profile {profile_path('t4-x1')}
lspci -n -O sysfs.path={root}/sys/bus/pci
"""
    argv = [sys.executable, str(HELPER), "--root", str(root), "--payload", str(BUILD_DIR), "--quiet"]
    res = subprocess.run(["unshare", "-m", "--propagation", "private", "bash", "-c", script, "_", *argv],
                         capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    h100, verbose, t4 = res.stdout.split("---\n")
    assert h100.splitlines() == [f"{bus.lower()}:00.0 0302: 10de:2330 (rev a1)" for bus in H100_BUS]
    assert "Kernel driver in use: nvidia" in verbose and "(64-bit, prefetchable) [size=64G]" in verbose
    assert re.search(r"Subsystem: .*16c1", verbose)
    # the T4's one device; the H100s' directories are gone
    assert len(t4.splitlines()) == 1 and " 10de:1eb8 " in t4
    # without a tmpfs of its own (the kernel's sysfs) nothing is written there
    plain = tmp_path / "plain"
    fake_driver(plain, "t4-x1")
    assert not (plain / "sys").exists()


def test_another_profile_takes_back_what_no_longer_applies(tmp_path):
    needs_root()
    root = tmp_path / "root"
    fake_driver(root, "hgx-h100")
    kernel = os.uname().release
    dep = root / f"lib/modules/{kernel}/modules.dep"
    dep.write_text("kernel/drivers/other.ko:\n" + dep.read_text())  # depmod's own lines stay
    (root / "dev/kept").write_text("not the helper's")
    os.utime(dep, ns=(0, 0))
    fake_driver(root, "l40s-x4")
    assert dep.stat().st_mtime_ns > 0  # another driver: depmod wrote the file anew
    files = listing(root)
    assert sorted(rel for rel in files if rel.startswith("dev/")) == [
        "dev/kept", "dev/nvidia-uvm", "dev/nvidia-uvm-tools", "dev/nvidia0", "dev/nvidia1", "dev/nvidia2",
        "dev/nvidia3", "dev/nvidiactl"]
    assert not (root / "dev/nvidia-caps").exists()  # no MIG-capable GPU
    libs = sorted(rel for rel in files if rel.startswith(LIBDIR))
    assert libs == [f"{LIBDIR}/{name}" for name in (
        "libcuda.so.1", "libcuda.so.580.95.05", "libnvidia-ml.so.1", "libnvidia-ml.so.580.95.05",
        "libnvidia-sandboxutils.so.1", "libnvidia-sandboxutils.so.580.95.05")]
    assert dep.read_text().splitlines()[0] == "kernel/drivers/other.ko:"

    # a driver before R565 has no libnvidia-sandboxutils; a driver that is not loaded no devices
    fake_driver(root, "dgx-a100")
    assert not any("sandboxutils" in rel for rel in listing(root))
    assert (root / LIBDIR / "libcuda.so.535.261.03").is_file()
    assert len(os.listdir(root / "dev/nvidia-caps")) == 2 + 8 * 15 * 9
    fake_driver(root, "driver-not-loaded")
    assert sorted(os.listdir(root / "dev")) == ["kept"]
    assert (root / LIBDIR / "libcuda.so.570.172.08").is_file()

    res = fake_driver(root, None, "--remove")
    assert "removed" in res.stdout
    assert listing(root) == {"dev/kept": ("f", 0o644), f"lib/modules/{kernel}/modules.dep": ("f", 0o644)}
    assert dep.read_text() == "kernel/drivers/other.ko:\n"


def test_files_changed_by_someone_else_stay(tmp_path):
    needs_root()
    root = tmp_path / "root"
    fake_driver(root, "l40s-x4")
    stub = root / LIBDIR / "libcuda.so.580.95.05"
    stub.write_bytes(b"a real driver's library")
    os.unlink(root / LIBDIR / "libcuda.so.1")
    os.symlink("elsewhere", root / LIBDIR / "libcuda.so.1")
    fake_driver(root, None, "--remove")
    assert stub.read_bytes() == b"a real driver's library"
    assert os.readlink(root / LIBDIR / "libcuda.so.1") == "elsewhere"
    assert not (root / "dev/nvidia0").exists()


def test_no_profile_selected(tmp_path, monkeypatch):
    monkeypatch.setenv("GPUOPS_FAKE_NVML_PROFILE", str(tmp_path / "none-selected"))
    res = subprocess.run([sys.executable, str(HELPER), "--root", str(tmp_path / "root"), "--payload",
                          str(BUILD_DIR)], capture_output=True, text=True, check=False)
    assert res.returncode == 0 and "no profile selected" in res.stdout
    bad = tmp_path / "bad.profile"
    bad.write_text("[node]\ngpu_count = 1\n")
    res = fake_driver(tmp_path / "root", bad, check=False)
    assert res.returncode == 1 and "cannot be loaded" in res.stderr


def test_as_a_user_device_nodes_are_plain_files():
    needs_root()  # to switch to an unprivileged user
    top = Path(tempfile.mkdtemp(prefix="gpuops-fake-driver-"))  # pytest's tmp_path is root's only
    try:
        os.chmod(top, 0o755)
        root = top / "root"
        root.mkdir()
        os.chown(root, 65534, 65534)
        fake_driver(root, "t4-x1", user="65534")
        files = listing(root)
        assert files["dev/nvidia0"] == ("f", 0o666) and files["dev/nvidiactl"] == ("f", 0o666)
        assert (root / "dev/nvidia0").stat().st_size == 0
    finally:
        shutil.rmtree(top)


def test_with_gpus_exports_a_driver_root(tmp_path):
    env = {"TMPDIR": str(tmp_path)}
    show = [sys.executable, "-c", "import os; print(os.environ['NVIDIA_CTK_DRIVER_ROOT'], "
                                  "os.environ['GPUOPS_FAKE_DRIVER_ROOT'])"]
    res = run_with_gpus("l40s-x4", "--", *show, env=env)
    root = tmp_path / "gpuops-fake-nvml" / "l40s-x4.driver-root"
    assert res.stdout.split() == [str(root), str(root)]
    assert (root / LIBDIR / "libcuda.so.580.95.05").is_file()
    manifest = root / "var/lib/gpuops-fake-nvml/driver-files"
    before = manifest.stat().st_mtime_ns
    run_with_gpus("l40s-x4", "--", "true", env=env)
    assert manifest.stat().st_mtime_ns == before  # up to date: not rebuilt
    res = run_with_gpus("l40s-x4", "--", *show, env={**env, "NVIDIA_CTK_DRIVER_ROOT": "/elsewhere"})
    assert res.stdout.split() == ["/elsewhere", str(root)]
    # next to a state file of one's own
    res = run_with_gpus("t4-x1", "--", *show, env={**env, "GPUOPS_FAKE_NVML_STATE": str(tmp_path / "t4.state")})
    assert res.stdout.split()[0] == str(tmp_path / "t4.driver-root")


# ------------------------------------------------------------------ nvidia-smi


def smi(profile, *args, tmp_path, state=None):
    env = {"TMPDIR": str(tmp_path)}
    if state:
        env["GPUOPS_FAKE_NVML_STATE"] = str(state)
    return run_with_gpus(profile, "--", str(SMI), *args, env=env, check=False)


def test_nvidia_smi_lists_gpus_and_mig_devices(tmp_path):
    res = smi("hgx-h100", "-L", tmp_path=tmp_path)
    assert res.returncode == 0, res.stderr
    assert res.stdout.splitlines() == [
        "GPU %d: NVIDIA H100 80GB HBM3 (UUID: %s)" % (i, uuid) for i, uuid in enumerate(H100_UUIDS)]
    state = tmp_path / "mig.state"
    run_with_gpus("hgx-h100", "--", sys.executable, "-c", MIG_SCRIPT, env={"GPUOPS_FAKE_NVML_STATE": str(state)})
    res = smi("hgx-h100", "--list-gpus", tmp_path=tmp_path, state=state)
    assert res.stdout.splitlines()[:3] == [
        "GPU 0: NVIDIA H100 80GB HBM3 (UUID: %s)" % H100_UUIDS[0],
        "  MIG 3g.40gb         Device  0: (UUID: %s)" % H100_MIG_UUIDS[0],
        "  MIG 3g.40gb         Device  1: (UUID: %s)" % H100_MIG_UUIDS[1],
    ]
    res = smi("hgx-h100", tmp_path=tmp_path, state=state)
    assert res.returncode == 0
    lines = res.stdout.splitlines()
    assert lines[0].startswith("NVIDIA-SMI 570.172.08    Driver Version: 570.172.08    CUDA Version: 12.8")
    assert re.fullmatch(r"\s+0\s+NVIDIA H100 80GB HBM3\s+00000000:1B:00.0\s+Enabled", lines[2])
    assert re.fullmatch(r"\s+7\s+NVIDIA H100 80GB HBM3\s+00000000:DF:00.0\s+Disabled", lines[9])
    res = smi("t4-x1", tmp_path=tmp_path)
    assert res.stdout.splitlines()[2].endswith("N/A")  # no MIG on a T4
    res = smi("l40s-x4", "--version", tmp_path=tmp_path)
    assert res.stdout.splitlines() == ["NVIDIA-SMI version  : 580.95.05", "NVML version        : 13.580.95.05",
                                       "DRIVER version      : 580.95.05", "CUDA Version        : 13.0"]


def test_nvidia_smi_failures(tmp_path):
    res = smi("driver-not-loaded", tmp_path=tmp_path)
    assert res.returncode == 9
    assert res.stdout.startswith("NVIDIA-SMI has failed because it couldn't communicate with the NVIDIA driver.")
    res = smi("version-mismatch", "-L", tmp_path=tmp_path)
    assert res.returncode == 18 and res.stdout.startswith("Failed to initialize NVML: Driver/library version mismatch")
    res = smi("hgx-h100", "-q", tmp_path=tmp_path)
    assert res.returncode == 2 and "Invalid combination of input arguments" in res.stderr
    res = smi("hgx-h100", "-L", "-i", tmp_path=tmp_path)
    assert res.returncode == 2
    res = smi("hgx-h100", "--help", tmp_path=tmp_path)
    assert res.returncode == 0 and "gpuops lab placeholder" in res.stdout
    res = smi("none", "-L", tmp_path=tmp_path)
    assert res.returncode != 0  # no libnvidia-ml.so.1 at all: the loader refuses to start it


# ------------------------------------------------------------------ libnvidia-sandboxutils


class InitInput(ctypes.Structure):  # nvSandboxUtilsInitInput_v1_t
    _fields_ = [("version", ctypes.c_uint), ("type", ctypes.c_int), ("value", ctypes.c_char * 256)]


class FileInfo(ctypes.Structure):  # nvSandboxUtilsGpuFileInfo_v1_t
    pass


FileInfo._fields_ = [("next", ctypes.POINTER(FileInfo)), ("fileType", ctypes.c_int), ("fileSubType", ctypes.c_int),
                     ("module", ctypes.c_int), ("flags", ctypes.c_int), ("filePath", ctypes.c_char_p)]


class GpuRes(ctypes.Structure):  # nvSandboxUtilsGpuRes_v1_t
    _fields_ = [("version", ctypes.c_uint), ("inputType", ctypes.c_int), ("input", ctypes.c_char * 256),
                ("files", ctypes.POINTER(FileInfo))]


# enums of nvsandboxutils.h
SUCCESS, UNINITIALIZED, NOT_SUPPORTED, INVALID_ARG, INSUFFICIENT_SIZE, VERSION_NOT_SUPPORTED = 0, 1, 2, 3, 4, 5
NVML_LIB_CALL, FILEPATH_NOT_FOUND = 9, 11
ROOTFS_DEFAULT, ROOTFS_PATH, ROOTFS_PID = 0, 1, 2
NV_DEV, NV_PROC, NV_SYS = 0, 1, 2
SUB = {0: "nvidia", 5: "uvm", 6: "uvm-tools", 7: "modeset", 8: "ctl", 10: "cap"}
MODULE = {0: "gpu", 1: "mig", 2: "nvidia", 3: "nvidia-uvm", 4: "nvidia-modeset"}
INPUT_GPU_UUID, INPUT_MIG_UUID, INPUT_PCI_ID, INPUT_PCI_INDEX = 0, 1, 2, 3


@pytest.fixture
def sandbox(tmp_path, monkeypatch):
    """The fake libnvidia-sandboxutils (it shares the fake NVML already loaded in this process),
    on hgx-h100 with GPU 0 split into two MIG devices and a driver root with the node's files."""
    needs_root()
    state = tmp_path / "h100.state"
    run_with_gpus("hgx-h100", "--", sys.executable, "-c", MIG_SCRIPT, env={"GPUOPS_FAKE_NVML_STATE": str(state)})
    monkeypatch.setenv("GPUOPS_FAKE_NVML_PROFILE", str(profile_path("hgx-h100")))
    monkeypatch.setenv("GPUOPS_FAKE_NVML_STATE", str(state))
    root = tmp_path / "root"
    fake_driver(root, "hgx-h100")
    lib = ctypes.CDLL(str(SANDBOX))
    lib.nvSandboxUtilsGetDriverVersion.argtypes = [ctypes.c_char_p, ctypes.c_uint]
    yield lib, root
    while lib.nvSandboxUtilsShutdown() == SUCCESS:
        pass


def init(lib, kind=ROOTFS_PATH, value=b"", version=1):
    return lib.nvSandboxUtilsInit(ctypes.byref(InitInput(version, kind, value)))


def resource(lib, kind, value):
    req = GpuRes(1, kind, value.encode(), None)
    rc = lib.nvSandboxUtilsGetGpuResource(ctypes.byref(req))
    files, node = [], req.files
    while node:
        info = node.contents
        files.append(({NV_DEV: "dev", NV_PROC: "proc", NV_SYS: "sys"}[info.fileType], SUB.get(info.fileSubType),
                      MODULE[info.module], info.filePath.decode()))
        node = info.next
    return rc, files


def test_sandboxutils_init_and_driver_version(sandbox):
    lib, root = sandbox
    version = ctypes.create_string_buffer(100)
    assert lib.nvSandboxUtilsGetDriverVersion(version, 100) == UNINITIALIZED
    assert lib.nvSandboxUtilsShutdown() == UNINITIALIZED
    assert init(lib, version=2, value=str(root).encode()) == VERSION_NOT_SUPPORTED
    assert init(lib, value=b"relative/path") == INVALID_ARG
    assert init(lib, value=str(root / "missing").encode()) == INVALID_ARG
    assert init(lib, kind=ROOTFS_PID, value=b"1") == NOT_SUPPORTED
    assert lib.nvSandboxUtilsInit(None) == INVALID_ARG
    assert init(lib, kind=ROOTFS_DEFAULT) == SUCCESS
    assert lib.nvSandboxUtilsGetDriverVersion(version, 100) == SUCCESS and version.value == b"570.172.08"
    assert lib.nvSandboxUtilsGetDriverVersion(version, 5) == INSUFFICIENT_SIZE
    assert lib.nvSandboxUtilsGetDriverVersion(None, 5) == INVALID_ARG
    assert lib.nvSandboxUtilsShutdown() == SUCCESS
    assert lib.nvSandboxUtilsGetDriverVersion(version, 100) == UNINITIALIZED


def test_sandboxutils_init_fails_without_nvml(sandbox, monkeypatch):
    lib, root = sandbox
    monkeypatch.setenv("GPUOPS_FAKE_NVML_PROFILE", str(profile_path("driver-not-loaded")))
    assert init(lib, value=str(root).encode()) == NVML_LIB_CALL


def test_sandboxutils_files_of_a_gpu(sandbox):
    lib, root = sandbox
    assert init(lib, value=str(root).encode()) == SUCCESS
    rc, files = resource(lib, INPUT_GPU_UUID, H100_UUIDS[3])
    assert rc == SUCCESS
    # the GPU's node, then the driver's (nvidia-modeset is not loaded on this node); no /proc or
    # /sys entries, as none exist under the root
    assert files == [("dev", "nvidia", "gpu", f"{root}/dev/nvidia3"),
                     ("dev", "ctl", "nvidia", f"{root}/dev/nvidiactl"),
                     ("dev", "uvm", "nvidia-uvm", f"{root}/dev/nvidia-uvm"),
                     ("dev", "uvm-tools", "nvidia-uvm", f"{root}/dev/nvidia-uvm-tools")]
    rc, by_bus = resource(lib, INPUT_PCI_ID, "00000000:61:00.0")
    assert rc == SUCCESS and by_bus == files
    proc = root / "proc/driver/nvidia/gpus/0000:61:00.0"
    proc.mkdir(parents=True)
    rc, files = resource(lib, INPUT_GPU_UUID, H100_UUIDS[3])
    assert files[1] == ("proc", None, "gpu", str(proc))
    assert resource(lib, INPUT_GPU_UUID, "GPU-00000000-0000-0000-0000-000000000000")[0] == INVALID_ARG
    assert resource(lib, INPUT_MIG_UUID, H100_UUIDS[3])[0] == INVALID_ARG  # a GPU, not a MIG device
    assert resource(lib, INPUT_PCI_INDEX, "0")[0] == NOT_SUPPORTED
    req = GpuRes(2, INPUT_GPU_UUID, H100_UUIDS[3].encode(), None)
    assert lib.nvSandboxUtilsGetGpuResource(ctypes.byref(req)) == VERSION_NOT_SUPPORTED
    assert lib.nvSandboxUtilsGetGpuResource(None) == INVALID_ARG


def test_sandboxutils_files_of_a_mig_device(sandbox):
    """A MIG device needs its parent's node and the capability devices of its GPU and compute
    instance: minors 3 + 135 * GPU minor + 9 * GI (+ 1 + CI), as the kernel module numbers them."""
    lib, root = sandbox
    assert init(lib, value=str(root).encode()) == SUCCESS
    rc, files = resource(lib, INPUT_MIG_UUID, H100_MIG_UUIDS[0])  # GI 1, CI 0 on GPU minor 0
    assert rc == SUCCESS
    assert files[:3] == [("dev", "nvidia", "gpu", f"{root}/dev/nvidia0"),
                         ("dev", "cap", "mig", f"{root}/dev/nvidia-caps/nvidia-cap12"),
                         ("dev", "cap", "mig", f"{root}/dev/nvidia-caps/nvidia-cap13")]
    rc, files = resource(lib, INPUT_MIG_UUID, H100_MIG_UUIDS[1])  # GI 2, CI 0
    assert [path.rsplit("/", 1)[1] for _t, _s, _m, path in files[:3]] == ["nvidia0", "nvidia-cap21", "nvidia-cap22"]
    assert resource(lib, INPUT_GPU_UUID, H100_MIG_UUIDS[1])[0] == INVALID_ARG


def test_sandboxutils_file_content(sandbox, tmp_path):
    lib, root = sandbox
    size = ctypes.c_uint(256)
    content = ctypes.create_string_buffer(256)
    assert lib.nvSandboxUtilsGetFileContent(b"/x", content, ctypes.byref(size)) == UNINITIALIZED
    assert init(lib, value=str(root).encode()) == SUCCESS
    link = tmp_path / "pci-0000:1b:00.0-card"
    os.symlink("../card1", link)
    assert lib.nvSandboxUtilsGetFileContent(str(link).encode(), content, ctypes.byref(size)) == SUCCESS
    assert content.value == b"../card1" and size.value == 9
    params = tmp_path / "params"
    params.write_text("ModifyDeviceFiles: 1\n")
    size = ctypes.c_uint(256)
    assert lib.nvSandboxUtilsGetFileContent(str(params).encode(), content, ctypes.byref(size)) == SUCCESS
    assert content.value == b"ModifyDeviceFiles: 1\n"
    size = ctypes.c_uint(4)
    assert lib.nvSandboxUtilsGetFileContent(str(params).encode(), content, ctypes.byref(size)) == INSUFFICIENT_SIZE
    assert size.value == 22
    assert lib.nvSandboxUtilsGetFileContent(str(tmp_path / "nope").encode(), content,
                                            ctypes.byref(size)) == FILEPATH_NOT_FOUND
    assert lib.nvSandboxUtilsGetFileContent(None, content, ctypes.byref(size)) == INVALID_ARG


def test_sandboxutils_exports_and_linkage():
    out = subprocess.run(["nm", "-D", "--defined-only", str(SANDBOX)], capture_output=True, text=True,
                         check=True).stdout
    # the five functions of nvsandboxutils.h, and nothing internal
    assert sorted(line.split()[-1] for line in out.splitlines()) == [
        "nvSandboxUtilsGetDriverVersion", "nvSandboxUtilsGetFileContent", "nvSandboxUtilsGetGpuResource",
        "nvSandboxUtilsInit", "nvSandboxUtilsShutdown"]
    dynamic = subprocess.run(["readelf", "-d", str(SANDBOX)], capture_output=True, text=True, check=True).stdout
    assert "Library soname: [libnvidia-sandboxutils.so.1]" in dynamic
    assert "Shared library: [libnvidia-ml.so.1]" in dynamic


# ------------------------------------------------------------------ the lab nodes' package


def test_deb_carries_the_driver_payload():
    subprocess.run(["make", "-s", "-C", str(FAKE_DIR), "deb"], check=True)
    files = subprocess.run(["dpkg-deb", "-c", str(DEB)], capture_output=True, text=True, check=True).stdout
    paths = {line.split()[-1].removeprefix("./") for line in files.splitlines() if not line.startswith("d")}
    assert paths - {p for p in paths if p.startswith("etc/gpuops-fake-nvml/profiles/")} == {
        "usr/lib/x86_64-linux-gnu/libnvidia-ml.so.1",
        "usr/lib/gpuops-fake-nvml/sandboxutils/libnvidia-sandboxutils.so.1",
        "usr/lib/gpuops-fake-nvml/stubs/libcuda.so.1",
        "usr/bin/nvidia-smi",
        "usr/sbin/gpuops-fake-driver",
        "usr/sbin/fake-nvml-reset",
        "usr/sbin/fake-nvml-busy",
        "usr/sbin/fake-nvml-xid",
        "usr/sbin/gpuops-fake-procfs",
        "usr/lib/systemd/system/gpuops-fake-driver.service",
        "usr/lib/systemd/system/gpuops-fake-driver.path",
        "usr/sbin/gpuops-fake-boot",
        "usr/lib/systemd/system/gpuops-fake-boot.service",
        "usr/sbin/gpuops-fake-channel",
        "usr/lib/systemd/system/gpuops-fake-driver-channel.socket",
        "usr/lib/systemd/system/gpuops-fake-driver-channel@.service",
    }
    control = subprocess.run(["dpkg-deb", "-f", str(DEB)], capture_output=True, text=True, check=True).stdout
    assert "Depends: python3" in control and "Provides: libnvidia-ml.so.1" in control
    script = subprocess.run(["dpkg-deb", "--fsys-tarfile", str(DEB)], capture_output=True, check=True).stdout
    assert b"#!/usr/bin/python3\n\"\"\"gpuops-fake-driver" in script
    path_unit = (FAKE_DIR / "debian/gpuops-fake-driver.path").read_text()
    assert "PathChanged=/etc/gpuops-fake-nvml/profile" in path_unit
    service = (FAKE_DIR / "debian/gpuops-fake-driver.service").read_text()
    assert "ExecStart=/usr/sbin/gpuops-fake-driver" in service and "Before=nvidia-cdi-refresh.service" in service

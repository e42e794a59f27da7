"""NVIDIA's real nvidia-ctk (built from github.com/NVIDIA/nvidia-container-toolkit by
tests/lab/go-binaries) over the simulated nodes: `cdi generate` finds the driver and every GPU
and MIG device through the fake NVML (and, from 1.18, the fake libnvidia-sandboxutils),
`cdi list` names them. with-gpus exports the profile's driver root as NVIDIA_CTK_DRIVER_ROOT.

The expected names are written down from the profiles: GPUs by index and UUID, MIG devices
by GPU:MIG-index and UUID, and `all`."""

import os
import re
import subprocess
import sys

import pytest
import yaml

from fakenvml_util import LAB_DIR, LIB_PATH, run_with_gpus

from labfacts import H100_MIG_UUIDS, H100_UUIDS, MIG_SCRIPT

GO_BINARIES = LAB_DIR / "go-binaries"
L40S_UUIDS = [
    "GPU-4c003944-1ef8-297d-5436-13937f9089d3",
    "GPU-40df8bc3-12a1-1350-e2b1-0bf6459937b1",
    "GPU-d36cd80c-1e7b-3203-ef40-e676d3ef5921",
    "GPU-872f6a32-b4e1-fe25-149d-ef9002ab74a0",
]


@pytest.fixture(scope="module")
def toolkit():
    """release -> directory of the real toolkit binaries."""
    res = subprocess.run([str(GO_BINARIES), "--dir", "toolkit-1.17.8", "toolkit-1.18.0"], capture_output=True,
                         text=True, check=False, timeout=1200)
    assert res.returncode == 0, "tests/lab/go-binaries failed:\n" + res.stderr[-3000:]
    return dict(zip(("1.17.8", "1.18.0"), res.stdout.split()))


@pytest.fixture
def node(tmp_path):
    """node(profile, *argv) runs argv on the simulated node with a state of this test's own."""
    def run(profile, *argv, env=None, check=True):
        e = {"GPUOPS_FAKE_NVML_STATE": str(tmp_path / f"{profile}.state"), "TMPDIR": str(tmp_path)}
        e.update(env or {})
        return run_with_gpus(profile, "--", *map(str, argv), env=e, check=check)
    return run


def generate(node, toolkit, release, profile, out, check=True, env=None):
    argv = [os.path.join(toolkit[release], "nvidia-ctk"), "cdi", "generate", f"--output={out}"]
    if release.startswith("1.17."):  # reads no NVIDIA_CTK_DRIVER_ROOT yet
        argv = ["sh", "-c", '"$@" --driver-root="$GPUOPS_FAKE_DRIVER_ROOT"', "sh", *argv]
    return node(profile, *argv, check=check, env=env)


def names(spec):
    return [device["name"] for device in spec["devices"]]


def listed(node, toolkit, release, profile, spec_dir):
    res = node(profile, os.path.join(toolkit[release], "nvidia-ctk"), "cdi", "list", f"--spec-dir={spec_dir}")
    return res.stdout.split()


@pytest.mark.parametrize("release", ["1.17.8", "1.18.0"])
def test_full_gpus_of_an_hgx_h100(node, toolkit, release, tmp_path):
    out = tmp_path / "cdi" / "nvidia.yaml"
    res = generate(node, toolkit, release, "hgx-h100", out)
    assert "Generated CDI spec" in res.stderr
    spec = yaml.safe_load(out.read_text())
    assert spec["kind"] == "nvidia.com/gpu"
    expected = [str(i) for i in range(8)] + sorted(H100_UUIDS) + ["all"]
    assert names(spec) == expected
    root = tmp_path / "hgx-h100.driver-root"
    by_name = {device["name"]: device["containerEdits"] for device in spec["devices"]}
    for i, uuid in enumerate(H100_UUIDS):
        nodes = [{"path": f"/dev/nvidia{i}", "hostPath": f"{root}/dev/nvidia{i}"}]
        assert by_name[str(i)]["deviceNodes"] == nodes and by_name[uuid]["deviceNodes"] == nodes
    common = spec["containerEdits"]
    assert sorted(n["path"] for n in common["deviceNodes"]) == ["/dev/nvidia-uvm", "/dev/nvidia-uvm-tools",
                                                                "/dev/nvidiactl"]
    mounts = {m["containerPath"] for m in common["mounts"]}
    assert {"/usr/lib/x86_64-linux-gnu/libcuda.so.570.172.08", "/usr/lib/x86_64-linux-gnu/libnvidia-ml.so.570.172.08",
            "/usr/bin/nvidia-smi"} <= mounts
    assert listed(node, toolkit, release, "hgx-h100", out.parent) == ["nvidia.com/gpu=" + name for name in expected]


def test_full_gpus_of_an_l40s_server(node, toolkit, tmp_path):
    out = tmp_path / "nvidia.json"
    generate(node, toolkit, "1.18.0", "l40s-x4", out)
    spec = yaml.safe_load(out.read_text())  # JSON, from the file name
    assert out.read_text().lstrip().startswith("{")
    expected = ["0", "1", "2", "3"] + sorted(L40S_UUIDS) + ["all"]
    assert names(spec) == expected
    assert [n["path"] for n in spec["devices"][-1]["containerEdits"]["deviceNodes"]] == [
        "/dev/nvidia0", "/dev/nvidia1", "/dev/nvidia2", "/dev/nvidia3"]
    assert listed(node, toolkit, "1.18.0", "l40s-x4", tmp_path) == ["nvidia.com/gpu=" + name for name in expected]


def test_mig_devices_with_toolkit_118(node, toolkit, tmp_path):
    """1.18 names MIG devices GPU:index (the index NVML's GetMigDeviceHandleByIndex takes) and by
    UUID, and leaves a GPU in MIG mode out: 0 and GPU 0's UUID are not in the spec. The device
    nodes come from libnvidia-sandboxutils: the parent GPU's and its GI and CI capabilities."""
    node("hgx-h100", sys.executable, "-c", MIG_SCRIPT)
    out = tmp_path / "nvidia.yaml"
    generate(node, toolkit, "1.18.0", "hgx-h100", out)
    spec = yaml.safe_load(out.read_text())
    expected = (["0:0", "0:1"] + [str(i) for i in range(1, 8)] + sorted(H100_UUIDS[1:] + H100_MIG_UUIDS)
                + ["all"])
    assert names(spec) == expected
    root = tmp_path / "hgx-h100.driver-root"
    by_name = {device["name"]: device["containerEdits"] for device in spec["devices"]}
    # GI 1 and GI 2 on GPU minor 0: capability minors 3 + 9 * GI and the next one for CI 0
    for name, uuid, caps in (("0:0", H100_MIG_UUIDS[0], (12, 13)), ("0:1", H100_MIG_UUIDS[1], (21, 22))):
        nodes = [{"path": p, "hostPath": f"{root}{p}"} for p in
                 ["/dev/nvidia0"] + ["/dev/nvidia-caps/nvidia-cap%d" % c for c in caps]]
        assert by_name[name]["deviceNodes"] == nodes and by_name[uuid]["deviceNodes"] == nodes
    assert listed(node, toolkit, "1.18.0", "hgx-h100", tmp_path) == ["nvidia.com/gpu=" + name for name in expected]


def test_mig_devices_need_the_proc_minors_with_toolkit_117(node, toolkit, tmp_path):
    """1.17.8 does not use libnvidia-sandboxutils (pkg/nvcdi/lib.go has it commented out) and
    finds MIG capability minors only in /proc/driver/nvidia-caps/mig-minors (internal/nvcaps,
    a fixed path under /proc, whatever --driver-root says), which no lab node can have: with a
    MIG device the whole generation fails. Full GPUs work."""
    node("hgx-h100", sys.executable, "-c", MIG_SCRIPT)
    assert not os.path.exists("/proc/driver/nvidia-caps/mig-minors")
    res = generate(node, toolkit, "1.17.8", "hgx-h100", tmp_path / "nvidia.yaml", check=False)
    assert res.returncode != 0
    assert "error getting MIG capability device paths" in res.stderr
    assert not (tmp_path / "nvidia.yaml").exists()


def test_mig_devices_of_a_driver_without_sandboxutils(node, toolkit, tmp_path):
    """A 535 driver (dgx-a100) has no libnvidia-sandboxutils: 1.18 falls back to the /proc minors
    and fails the same way on a MIG device."""
    node("dgx-a100", sys.executable, "-c", MIG_SCRIPT.replace("3_SLICE", "7_SLICE").replace("range(2)", "range(1)"))
    res = generate(node, toolkit, "1.18.0", "dgx-a100", tmp_path / "nvidia.yaml", check=False)
    assert res.returncode != 0 and "error getting MIG capability device paths" in res.stderr
    assert "libnvidia-sandboxutils.so.1: not found" in res.stderr


def test_no_spec_without_a_loaded_driver(node, toolkit, tmp_path):
    out = tmp_path / "nvidia.yaml"
    res = generate(node, toolkit, "1.18.0", "driver-not-loaded", out, check=False)
    assert res.returncode != 0 and "failed to initialize NVML: Driver Not Loaded" in res.stderr
    assert not out.exists()


def test_every_nvml_call_of_the_real_binaries_is_served(node, toolkit, tmp_path):
    """The NVML functions nvidia-ctk binds (LD_DEBUG=bindings: go-nvml and the sandboxutils
    library resolve them lazily, a missing one would end the process), all exported by the fake."""
    node("hgx-h100", sys.executable, "-c", MIG_SCRIPT)
    log = tmp_path / "bindings"
    for release in ("1.17.8", "1.18.0"):
        generate(node, toolkit, release, "hgx-h100", tmp_path / "nvidia.yaml", check=False,
                 env={"LD_DEBUG": "bindings", "LD_DEBUG_OUTPUT": str(log)})
    bound = set()
    for part in tmp_path.glob("bindings.*"):
        bound |= set(re.findall(r"symbol `(nvml\w+)'", part.read_text()))
    exported = {line.split()[-1] for line in subprocess.run(
        ["nm", "-D", "--defined-only", str(LIB_PATH)], capture_output=True, text=True, check=True).stdout.splitlines()}
    assert {"nvmlInit_v2", "nvmlDeviceGetMigDeviceHandleByIndex", "nvmlDeviceGetMinorNumber",
            "nvmlDeviceGetHandleByUUID"} <= bound
    assert bound <= exported

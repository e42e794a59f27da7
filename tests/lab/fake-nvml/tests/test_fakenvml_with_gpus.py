"""tests/lab/with-gpus and fake-nvml-reset, in separate processes."""

import json
import os
import subprocess
import sys
import textwrap

import pytest

from fakenvml_util import BUILD_DIR, RESET_CLI, WITH_GPUS, profile_path, run_with_gpus

PY = sys.executable


def py(code):
    return [PY, "-c", textwrap.dedent(code)]


@pytest.fixture
def tmpdir_env(tmp_path):
    return {"TMPDIR": str(tmp_path)}


def test_python_under_with_gpus(tmpdir_env):
    res = run_with_gpus(
        "hgx-h200",
        "--",
        *py("""
        import pynvml
        pynvml.nvmlInit()
        h = pynvml.nvmlDeviceGetHandleByIndex(7)
        print(pynvml.nvmlDeviceGetCount(), pynvml.nvmlDeviceGetName(h), pynvml.nvmlDeviceGetMemoryInfo(h).total >> 20)
        """),
        env=tmpdir_env,
    )
    assert res.stdout.strip() == "8 NVIDIA H200 143771"


def test_environment_set_by_with_gpus(tmp_path, tmpdir_env):
    res = run_with_gpus(
        "t4-x1",
        "--",
        *py("""
        import os, json
        print(json.dumps({k: os.environ.get(k) for k in
              ("LD_LIBRARY_PATH", "GPUOPS_FAKE_NVML_PROFILE", "GPUOPS_FAKE_NVML_STATE")}))
        """),
        env=tmpdir_env,
    )
    env = json.loads(res.stdout)
    assert env["LD_LIBRARY_PATH"].split(":")[0] == str(BUILD_DIR)
    assert env["GPUOPS_FAKE_NVML_PROFILE"] == str(profile_path("t4-x1"))
    assert env["GPUOPS_FAKE_NVML_STATE"] == str(
        tmp_path / "gpuops-fake-nvml" / "t4-x1.state"
    )
    mine = str(tmp_path / "elsewhere.state")
    res = run_with_gpus(
        "t4-x1",
        "--",
        *py("import os; print(os.environ['GPUOPS_FAKE_NVML_STATE'])"),
        env={"GPUOPS_FAKE_NVML_STATE": mine},
    )
    assert res.stdout.strip() == mine


def test_none_has_no_library(tmpdir_env):
    code = py("""
        import pynvml
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError_LibraryNotFound as exc:
            print("LibraryNotFound", exc.value)
        """)
    res = run_with_gpus("none", "--", *code, env=tmpdir_env)
    assert res.stdout.strip() == "LibraryNotFound 12"
    # even when the fake's directory was inherited on LD_LIBRARY_PATH
    res = run_with_gpus(
        "none",
        "--",
        *code,
        env={**tmpdir_env, "LD_LIBRARY_PATH": f"/nonexistent:{BUILD_DIR}"},
    )
    assert res.stdout.strip() == "LibraryNotFound 12"


def test_none_hides_every_nvml_library_of_the_machine(tmp_path, tmpdir_env):
    """A machine with a real driver has libnvidia-ml.so.1 elsewhere: "none" must not depend on
    the machine. A copy on an inherited LD_LIBRARY_PATH is dropped; one in the linker's default
    directories (/usr/lib/x86_64-linux-gnu ...) is hidden behind /dev/null in a private mount
    namespace - made here the same way, inside a namespace of this test only."""
    other = tmp_path / "driver"
    other.mkdir()
    (other / "libnvidia-ml.so.1").write_bytes((BUILD_DIR / "libnvidia-ml.so.1").read_bytes())
    code = py("""
        import pynvml
        try:
            pynvml.nvmlInit()
            print("loaded")
        except pynvml.NVMLError_LibraryNotFound:
            print("LibraryNotFound")
        """)
    assert run_with_gpus("none", "--", *code, env={**tmpdir_env, "LD_LIBRARY_PATH": str(other)}).stdout.strip() == (
        "LibraryNotFound")
    if os.geteuid() != 0:
        return  # mounting needs root; the root path is what CI and the lab run
    system = "/usr/lib/x86_64-linux-gnu"
    if os.path.exists(system + "/libnvidia-ml.so.1"):
        return  # this machine has a driver of its own: the first assertion above already covers it
    upper, work = tmp_path / "upper", tmp_path / "work"
    upper.mkdir()
    work.mkdir()
    # the library appears in the system directory inside this namespace only (an overlay whose
    # writes go to tmp_path): the machine's /usr/lib is never touched
    script = ("set -e; mount --make-rprivate /; "
              "mount -t overlay overlay -o lowerdir=%(s)s,upperdir=%(u)s,workdir=%(w)s %(s)s; "
              "cp %(o)s %(s)s/libnvidia-ml.so.1; %(g)s none -- %(c)s"
              % {"s": system, "u": upper, "w": work, "o": other / "libnvidia-ml.so.1", "g": WITH_GPUS,
                 "c": " ".join("'%s'" % part for part in code)})
    res = subprocess.run(["unshare", "-m", "bash", "-c", script], capture_output=True, text=True, env={
        **os.environ, **tmpdir_env}, check=False)
    assert res.stdout.strip() == "LibraryNotFound", res.stderr


def test_driver_not_loaded_under_with_gpus(tmpdir_env):
    res = run_with_gpus(
        "driver-not-loaded",
        "--",
        *py("""
        import pynvml
        try:
            pynvml.nvmlInit()
        except pynvml.NVMLError_DriverNotLoaded as exc:
            print(exc.value, exc)
        """),
        env=tmpdir_env,
    )
    assert res.stdout.strip() == "9 Driver Not Loaded"


def test_works_from_any_cwd_and_with_profile_paths(tmp_path, tmpdir_env):
    custom = tmp_path / "my-node.profile"
    custom.write_text(f"include = {profile_path('t4-x1')}\n[node]\ngpu_count = 1\n")
    res = subprocess.run(
        [
            str(WITH_GPUS),
            str(custom),
            "--",
            *py(
                "import pynvml; pynvml.nvmlInit(); print(pynvml.nvmlDeviceGetName(pynvml.nvmlDeviceGetHandleByIndex(0)))"
            ),
        ],
        cwd="/",
        env={**os.environ, **tmpdir_env},
        capture_output=True,
        text=True,
        check=True,
    )
    assert res.stdout.strip() == "Tesla T4"
    assert (tmp_path / "gpuops-fake-nvml").is_dir()


def test_usage_errors(tmpdir_env):
    res = run_with_gpus("no-such-profile", "--", "true", env=tmpdir_env, check=False)
    assert res.returncode == 2 and "unknown profile" in res.stderr
    res = run_with_gpus("t4-x1", env=tmpdir_env, check=False)
    assert res.returncode == 2 and "no command" in res.stderr
    res = run_with_gpus("--bogus", env=tmpdir_env, check=False)
    assert res.returncode == 2
    res = run_with_gpus(
        "t4-x1", "--", "sh", "-c", "exit 7", env=tmpdir_env, check=False
    )
    assert res.returncode == 7  # the command's status comes through


CREATE = """
    import pynvml as n
    n.nvmlInit()
    h = n.nvmlDeviceGetHandleByIndex(0)
    print("status", n.nvmlDeviceSetMigMode(h, n.NVML_DEVICE_MIG_ENABLE))
    g4 = n.nvmlDeviceCreateGpuInstance(h, 5)
    g3 = n.nvmlDeviceCreateGpuInstance(h, 9)
    n.nvmlGpuInstanceCreateComputeInstance(g4, n.NVML_COMPUTE_INSTANCE_PROFILE_4_SLICE)
    n.nvmlGpuInstanceCreateComputeInstance(g3, n.NVML_COMPUTE_INSTANCE_PROFILE_3_SLICE)
    """
LIST = """
    import pynvml as n
    n.nvmlInit()
    h = n.nvmlDeviceGetHandleByIndex(0)
    print("mode", *n.nvmlDeviceGetMigMode(h))
    for i in range(n.nvmlDeviceGetMaxMigDeviceCount(h)):
        try:
            m = n.nvmlDeviceGetMigDeviceHandleByIndex(h, i)
        except n.NVMLError_NotFound:
            continue
        print(n.nvmlDeviceGetUUID(m), n.nvmlDeviceGetName(m))
    """


def test_mig_state_shared_between_processes(tmp_path, tmpdir_env):
    out = run_with_gpus("hgx-h100", "--", *py(CREATE), env=tmpdir_env).stdout
    assert out.strip() == "status 0"
    first = run_with_gpus(
        "hgx-h100", "--", *py(LIST), env=tmpdir_env
    ).stdout.splitlines()
    second = run_with_gpus(
        "hgx-h100", "--", *py(LIST), env=tmpdir_env
    ).stdout.splitlines()
    assert first == second
    assert first[0] == "mode 1 1"
    assert [line.split(" ", 1)[1] for line in first[1:]] == [
        "NVIDIA H100 80GB HBM3 MIG 4g.40gb",
        "NVIDIA H100 80GB HBM3 MIG 3g.40gb",
    ]
    assert all(line.startswith("MIG-") for line in first[1:])
    assert (tmp_path / "gpuops-fake-nvml" / "hgx-h100.state").is_file()
    # another profile has its own state
    other = run_with_gpus(
        "hgx-h100-faults", "--", *py(LIST), env=tmpdir_env
    ).stdout.splitlines()
    assert other == ["mode 0 0"]
    # --fresh starts over
    fresh = run_with_gpus(
        "--fresh", "hgx-h100", "--", *py(LIST), env=tmpdir_env
    ).stdout.splitlines()
    assert fresh == ["mode 0 0"]


def test_concurrent_processes_share_one_gpu(tmpdir_env):
    run_with_gpus(
        "hgx-h100",
        "--",
        *py("""
        import pynvml as n
        n.nvmlInit()
        n.nvmlDeviceSetMigMode(n.nvmlDeviceGetHandleByIndex(0), 1)
        """),
        env=tmpdir_env,
    )
    worker = py("""
        import pynvml as n
        n.nvmlInit()
        try:
            n.nvmlDeviceCreateGpuInstance(n.nvmlDeviceGetHandleByIndex(0), 19)
            print("created")
        except n.NVMLError_InsufficientResources:
            print("full")
        """)
    env = {**os.environ, **tmpdir_env}
    env.pop("GPUOPS_FAKE_NVML_STATE", None)
    env.pop("GPUOPS_FAKE_NVML_PROFILE", None)
    procs = [
        subprocess.Popen(
            [str(WITH_GPUS), "hgx-h100", "--", *worker],
            env=env,
            stdout=subprocess.PIPE,
            text=True,
        )
        for _k in range(9)
    ]
    results = sorted(p.communicate(timeout=60)[0].strip() for p in procs)
    assert results == ["created"] * 7 + ["full"] * 2


def test_reset_cli_applies_pending_mode(tmp_path, tmpdir_env):
    set_mode = py("""
        import pynvml as n
        n.nvmlInit()
        h = n.nvmlDeviceGetHandleByIndex(2)
        print(n.nvmlDeviceSetMigMode(h, n.NVML_DEVICE_MIG_ENABLE), *n.nvmlDeviceGetMigMode(h))
        """)
    get_mode = py("""
        import pynvml as n
        n.nvmlInit()
        print(*n.nvmlDeviceGetMigMode(n.nvmlDeviceGetHandleByIndex(2)))
        """)
    out = run_with_gpus(
        "dgx-a100-mig-pending", "--", *set_mode, env=tmpdir_env
    ).stdout.split()
    assert out == ["16", "0", "1"]  # NVML_ERROR_RESET_REQUIRED, current 0, pending 1
    assert run_with_gpus(
        "dgx-a100-mig-pending", "--", *get_mode, env=tmpdir_env
    ).stdout.split() == ["0", "1"]
    res = run_with_gpus("dgx-a100-mig-pending", "--", str(RESET_CLI), env=tmpdir_env)
    assert "node rebooted" in res.stdout
    assert run_with_gpus(
        "dgx-a100-mig-pending", "--", *get_mode, env=tmpdir_env
    ).stdout.split() == ["1", "1"]


def test_reset_cli_standalone_with_profile_argument(tmp_path):
    env = {**os.environ, "TMPDIR": str(tmp_path)}
    env.pop("GPUOPS_FAKE_NVML_STATE", None)
    env.pop("GPUOPS_FAKE_NVML_PROFILE", None)
    state = tmp_path / "gpuops-fake-nvml" / "dgx-a100-mig-in-use.state"
    state.parent.mkdir()
    # pending enable on GPU 0, written by hand in the state file format
    uuid = run_with_gpus(
        "dgx-a100-mig-in-use",
        "--",
        *py(
            "import pynvml as n; n.nvmlInit(); print(n.nvmlDeviceGetUUID(n.nvmlDeviceGetHandleByIndex(0)))"
        ),
        env={"TMPDIR": str(tmp_path)},
    ).stdout.strip()
    state.write_text(f"gpu {uuid} 0 1\n")
    res = subprocess.run(
        [str(RESET_CLI), "dgx-a100-mig-in-use"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 0, res.stderr
    assert f"gpu {uuid} 1 1" in state.read_text()
    res = subprocess.run(
        [str(RESET_CLI), "no-such-profile"],
        env=env,
        capture_output=True,
        text=True,
        check=False,
    )
    assert res.returncode == 1 and "unknown profile" in res.stderr

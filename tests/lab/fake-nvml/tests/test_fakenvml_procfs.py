"""gpuops-fake-procfs: the lab's stand-in for the /proc/driver/nvidia-caps/mig-minors file of
NVIDIA's kernel module, mounted into containers by an OCI hook that a runc wrapper adds. Checked
against the capability device nodes gpuops-fake-driver creates, and end to end with the real runc
under podman: the container reads the file, and nothing appears while the driver is not loaded."""

import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

import pytest

from fakenvml_util import FAKE_DIR

sys.path.insert(0, str(FAKE_DIR))
import gpuops_fake_driver  # noqa: E402  pylint: disable=wrong-import-position
import gpuops_fake_procfs as procfs  # noqa: E402  pylint: disable=wrong-import-position

LAB = FAKE_DIR.parent
IMAGE = "localhost/gpuops-lab:bookworm"


def test_mig_minors_follow_the_kernel_modules_numbering():
    lines = procfs.mig_minors().splitlines()
    assert len(lines) == 2 + 32 * 15 * 9  # config, monitor, 32 GPUs x 15 GIs x (access + 8 CIs)
    assert lines[:4] == ["config 1", "monitor 2", "gpu0/gi0/access 3", "gpu0/gi0/ci0/access 4"]
    table = dict(line.rsplit(" ", 1) for line in lines)
    assert table["gpu1/gi0/access"] == "138" and table["gpu0/gi14/ci7/access"] == "137"
    assert table["gpu31/gi14/ci7/access"] == str(2 + 32 * 135)
    assert len(set(table)) == len(lines)  # every minor once


def test_the_minors_are_those_of_the_device_nodes_the_fake_driver_creates():
    # gpuops-fake-driver makes /dev/nvidia-caps/nvidia-capN for every GPU and compute instance
    # capability; the table must name exactly those minors for the GPU's minor
    lines = procfs.mig_minors().splitlines()
    minor = 5
    names = {int(m): n for n, m in (line.rsplit(" ", 1) for line in lines)}
    first = gpuops_fake_driver.CAP_MIG_FIRST + minor * gpuops_fake_driver.CAP_PER_GPU
    for gi in range(gpuops_fake_driver.CAP_GIS):
        base = first + gi * gpuops_fake_driver.CAP_PER_GI
        assert names[base] == "gpu%d/gi%d/access" % (minor, gi)
        for ci in range(gpuops_fake_driver.CAP_CIS):
            assert names[base + 1 + ci] == "gpu%d/gi%d/ci%d/access" % (minor, gi, ci)


@pytest.mark.parametrize("args, expected", [
    (["--root", "/run/runc", "--log", "/x.log", "--log-format", "json", "create", "--bundle", "/b", "--pid-file",
      "/p", "id1"], ("create", "/b")),
    (["--systemd-cgroup", "run", "-b", "/b2", "id"], ("run", "/b2")),
    (["create", "--bundle=/b3", "id"], ("create", "/b3")),
    (["--root", "create", "state", "id"], ("state", None)),  # "create" is the value of --root here
    (["delete", "--force", "id"], ("delete", None)),
    (["--version"], (None, None)),
])
def test_the_runc_command_line(args, expected):
    assert procfs.runc_command(args) == expected


def test_the_hook_is_added_once():
    config = procfs.add_hook(procfs.add_hook({"hooks": {"createRuntime": [{"path": "/other"}]}}))
    paths = [h["path"] for h in config["hooks"]["createRuntime"]]
    assert paths == ["/other", procfs.HOOK]


def podman_with_wrapper(tmp, loaded):
    """podman run with the wrapper as its runtime (the real runc behind it); the hook is this
    source file, the driver "loaded" when `loaded` exists."""
    hook = tmp / "hook"
    hook.write_text("#!/bin/sh\nexec %s %s \"$@\"\n" % (sys.executable, FAKE_DIR / "gpuops_fake_procfs.py"))
    hook.chmod(0o755)
    wrapper = tmp / "runc"
    wrapper.write_text("#!/bin/sh\nexport GPUOPS_FAKE_PROCFS_HOOK=%s GPUOPS_FAKE_PROCFS_LOADED=%s\n"
                       "exec %s %s runc \"$@\"\n" % (hook, loaded, sys.executable, FAKE_DIR / "gpuops_fake_procfs.py"))
    wrapper.chmod(0o755)
    env = dict(os.environ, CONTAINERS_CONF=str(LAB / "containers.conf"))
    return subprocess.run(["podman", "--runtime", str(wrapper), "run", "--rm", "--network", "none", IMAGE, "sh", "-c",
                           "cat /proc/driver/nvidia-caps/mig-minors | sed -n '1p;4p;$p'; wc -l < "
                           "/proc/driver/nvidia-caps/mig-minors; grep ' /proc/driver ' /proc/self/mounts"],
                          capture_output=True, text=True, env=env, timeout=180, check=False)


def test_a_container_started_by_the_real_runc_reads_the_file():
    with tempfile.TemporaryDirectory() as d:
        tmp = Path(d)
        loaded = tmp / "nvidiactl"
        loaded.write_text("")
        res = podman_with_wrapper(tmp, loaded)
    assert res.returncode == 0, res.stderr
    out = res.stdout.splitlines()
    assert out[:4] == ["config 1", "gpu0/gi0/ci0/access 4", "gpu31/gi14/ci7/access 4322", "4322"], res.stdout
    assert re.match(r"gpuops-fake-procfs /proc/driver tmpfs ro,", out[4]), out


def test_no_entry_while_the_driver_is_not_loaded():
    with tempfile.TemporaryDirectory() as d:
        res = podman_with_wrapper(Path(d), Path(d) / "absent")
    assert res.returncode != 0 and "No such file or directory" in res.stderr, (res.stdout, res.stderr)

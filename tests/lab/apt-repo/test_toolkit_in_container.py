"""The lab's toolkit packages in a lab node: a systemd container from localhost/gpuops-lab:trixie
with the simulated driver (the fake NVML package, hgx-h100 selected) installs
nvidia-container-toolkit 1.18.0-1 with real apt from the signed repository, and NVIDIA's
own nvidia-ctk, started by the package's nvidia-cdi-refresh units, writes /var/run/cdi/nvidia.yaml
for the node's GPUs; after a MIG change and after a driver change it writes it again.

Needs podman (CONTAINERS_CONF: tests/lab/containers.conf when unset), the lab image
(tests/lab/images/build trixie) and root; about 20 seconds."""

import os
import shutil
import subprocess
import sys
import time
from pathlib import Path

import pytest
import yaml

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # tests/lab
from labfacts import H100_MIG_UUIDS, H100_UUIDS, L40S_UUIDS, MIG_SCRIPT  # noqa: E402  pylint: disable=wrong-import-position

HERE = Path(__file__).resolve().parent
LAB = HERE.parent
FAKE_NVML = LAB / "fake-nvml"
IMAGE = "localhost/gpuops-lab:trixie"
PORT = 8765


def podman(*args, check=True, timeout=180):
    env = dict(os.environ)
    env.setdefault("CONTAINERS_CONF", str(LAB / "containers.conf"))
    res = subprocess.run(["podman", *map(str, args)], capture_output=True, text=True, env=env, check=False,
                         timeout=timeout)
    if check and res.returncode != 0:
        raise AssertionError("podman %s failed (%d):\n%s%s" % (" ".join(map(str, args)), res.returncode,
                                                               res.stdout[-3000:], res.stderr[-3000:]))
    return res


class Node:
    def __init__(self, name):
        self.name = name

    def sh(self, script, check=True):
        res = podman("exec", self.name, "bash", "-c", script, check=False)
        if check and res.returncode != 0:
            raise AssertionError("in %s: %s\nexited %d:\n%s%s" % (self.name, script, res.returncode, res.stdout[-3000:],
                                                                  res.stderr[-3000:]))
        return res

    def wait_for(self, script, what, timeout=20):
        deadline = time.monotonic() + timeout
        while self.sh(script, check=False).returncode != 0:
            if time.monotonic() > deadline:
                raise AssertionError("%s: %s did not happen within %d s" % (self.name, what, timeout))
            time.sleep(0.2)

    def spec_names(self):
        spec = yaml.safe_load(self.sh("cat /var/run/cdi/nvidia.yaml").stdout)
        assert spec["kind"] == "nvidia.com/gpu"
        return [device["name"] for device in spec["devices"]]

    def listed(self):
        return self.sh("nvidia-ctk cdi list 2>/dev/null").stdout.split()

    def generations(self):
        """How often nvidia-cdi-refresh.service has generated the spec (its journal)."""
        res = self.sh("journalctl -q -o cat -u nvidia-cdi-refresh.service", check=False)
        return res.stdout.count("Generated CDI spec")


@pytest.fixture(scope="module")
def node(repo, tmp_path_factory):
    if shutil.which("podman") is None:
        pytest.fail("podman is not installed (make apt installs it)", pytrace=False)
    if os.geteuid() != 0:
        pytest.fail("lab containers need root (rootful podman)", pytrace=False)
    if podman("image", "exists", IMAGE, check=False).returncode != 0:
        pytest.fail("%s is missing: tests/lab/images/build trixie (make images)" % IMAGE, pytrace=False)
    subprocess.run(["make", "-s", "-C", str(FAKE_NVML), "deb", "PYTHON=" + sys.executable], check=True)
    name = "gpuops-aptrepo-cdi-%d" % os.getpid()
    podman("rm", "-f", "-t", "0", name, check=False)
    podman("run", "-d", "--name", name, "--systemd=always", IMAGE, "/sbin/init")
    try:
        n = Node(name)
        n.wait_for("systemctl is-system-running --wait | grep -qE 'running|degraded'", "boot")
        podman("exec", name, "mkdir", "-p", "/srv/repo", "/var/cache/gpuops-lab")
        podman("cp", repo / "toolkit", f"{name}:/srv/repo/toolkit")
        podman("cp", HERE / "serve", f"{name}:/usr/local/bin/gpuops-aptrepo-serve")
        podman("cp", FAKE_NVML / "build/gpuops-lab-fake-nvml.deb", f"{name}:/var/cache/gpuops-lab/")
        import pynvml  # pylint: disable=import-outside-toplevel  # the unmodified bindings, one file
        podman("cp", pynvml.__file__, f"{name}:/var/cache/gpuops-lab/pynvml.py")
        yield n
    finally:
        podman("rm", "-f", "-t", "0", name, check=False)


def test_the_simulated_driver_in_a_node(node):
    node.sh("apt-get install -y -q /var/cache/gpuops-lab/gpuops-lab-fake-nvml.deb")
    node.sh("cp /etc/gpuops-fake-nvml/profiles/hgx-h100.profile /etc/gpuops-fake-nvml/profile")
    # gpuops-fake-driver.path starts the driver's set-up when the profile changes
    node.wait_for("test -c /dev/nvidia7 && test -e /usr/lib/x86_64-linux-gnu/libcuda.so.570.172.08",
                  "the simulated driver's files")
    assert node.sh("nvidia-smi -L").stdout.splitlines() == [
        "GPU %d: NVIDIA H100 80GB HBM3 (UUID: %s)" % (i, uuid) for i, uuid in enumerate(H100_UUIDS)]
    assert node.sh("grep -c /nvidia.ko /lib/modules/$(uname -r)/modules.dep").stdout.split() == ["3"]


def test_toolkit_install_generates_the_spec(node):
    node.sh("mv /etc/apt/sources.list.d/debian.sources /root/debian.sources.off; "
            f"gpuops-aptrepo-serve /srv/repo {PORT} && "
            "gpg --dearmor < /srv/repo/toolkit/gpgkey > /usr/share/keyrings/gpuops-test-toolkit.gpg && "
            "echo 'deb [signed-by=/usr/share/keyrings/gpuops-test-toolkit.gpg] "
            f"http://127.0.0.1:{PORT}/toolkit/stable/deb/$(ARCH) /' > /etc/apt/sources.list.d/toolkit.list && "
            "apt-get update -q")
    res = node.sh("DEBIAN_FRONTEND=noninteractive apt-get install -y -q nvidia-container-toolkit")
    assert "Regenerating NVIDIA CDI specification..." in res.stdout
    versions = node.sh("dpkg-query -W -f='${Package} ${Version}\\n' nvidia-container-toolkit "
                       "nvidia-container-toolkit-base").stdout.splitlines()
    assert versions == ["nvidia-container-toolkit 1.18.0-1", "nvidia-container-toolkit-base 1.18.0-1"]
    expected = [str(i) for i in range(8)] + sorted(H100_UUIDS) + ["all"]
    assert node.spec_names() == expected
    assert node.listed() == ["nvidia.com/gpu=" + name for name in expected]
    props = dict(line.split("=", 1) for line in node.sh(
        "systemctl show nvidia-cdi-refresh.service -p Result -p ExecMainStatus -p UnitFileState").stdout.splitlines())
    assert props == {"Result": "success", "ExecMainStatus": "0", "UnitFileState": "enabled"}
    assert node.sh("systemctl is-active nvidia-cdi-refresh.path").stdout.strip() == "active"
    # NVIDIA's postinst starts the service twice (enable --now, then start)
    assert node.generations() == 2
    assert "mode = \"auto\"" in node.sh("cat /etc/nvidia-container-runtime/config.toml").stdout
    assert node.sh("readlink /usr/bin/nvidia-container-toolkit").stdout.strip() == "/usr/bin/nvidia-container-runtime-hook"


def test_spec_after_a_mig_change(node):
    node.sh("PYTHONPATH=/var/cache/gpuops-lab python3 -c '%s'" % MIG_SCRIPT.replace("'", '"'))
    node.sh("systemctl restart nvidia-cdi-refresh.service")
    expected = (["0:0", "0:1"] + [str(i) for i in range(1, 8)] + sorted(H100_UUIDS[1:] + H100_MIG_UUIDS) + ["all"])
    assert node.spec_names() == expected
    spec = yaml.safe_load(node.sh("cat /var/run/cdi/nvidia.yaml").stdout)
    mig = next(device for device in spec["devices"] if device["name"] == "0:0")
    assert [n["path"] for n in mig["containerEdits"]["deviceNodes"]] == [
        "/dev/nvidia0", "/dev/nvidia-caps/nvidia-cap12", "/dev/nvidia-caps/nvidia-cap13"]
    assert node.generations() == 3


def test_driver_change_triggers_the_refresh(node):
    """Another node profile (driver 580, 4 L40S): the driver's files follow, its modules.dep is
    written anew and nvidia-cdi-refresh.path starts the refresh by itself."""
    node.sh("cp /etc/gpuops-fake-nvml/profiles/l40s-x4.profile /etc/gpuops-fake-nvml/profile")
    node.wait_for("test -e /usr/lib/x86_64-linux-gnu/libcuda.so.580.95.05", "the driver change")
    node.wait_for("grep -q %s /var/run/cdi/nvidia.yaml" % L40S_UUIDS[0], "the refresh")
    assert node.spec_names() == ["0", "1", "2", "3"] + sorted(L40S_UUIDS) + ["all"]
    assert node.generations() == 4

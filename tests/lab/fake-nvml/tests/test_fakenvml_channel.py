"""The simulated driver's channel into containers (src/channel.c): a process that has no profile
of its own (a container) but reaches the node's socket at nvidia-persistenced's path (which
NVIDIA's CDI generation mounts into GPU containers) sees the node's GPUs, MIG state and driver
state, and its MIG changes land in the node's state file.

Each case runs in a private mount namespace (root only: unshare -m), with a tmpfs over /run and
over /etc/gpuops-fake-nvml, so nothing of this machine is touched or read."""

import os
import shutil
import subprocess
import sys
import textwrap

import pytest

from fakenvml_util import BUILD_DIR, PROFILE_DIR
from labfacts import H100_UUIDS

CHANNEL = BUILD_DIR / "gpuops-fake-channel"

pytestmark = pytest.mark.skipif(os.geteuid() != 0, reason="needs root for a private mount namespace")

# the container side: plain pynvml, no GPUOPS_FAKE_NVML_* variables
CLIENT = textwrap.dedent("""
    import json, sys, pynvml
    pynvml.nvmlInit()
    out = {"driver": pynvml.nvmlSystemGetDriverVersion(), "count": pynvml.nvmlDeviceGetCount()}
    g = pynvml.nvmlDeviceGetHandleByIndex(0)
    out["name"] = pynvml.nvmlDeviceGetName(g)
    out["uuid"] = pynvml.nvmlDeviceGetUUID(g)
    if sys.argv[1] in ("enable-mig", "make-mig"):
        pynvml.nvmlDeviceSetMigMode(g, pynvml.NVML_DEVICE_MIG_ENABLE)
    if sys.argv[1] == "make-mig":  # three 1g GPU instances, one compute instance each
        for _i in range(3):
            gi = pynvml.nvmlDeviceCreateGpuInstance(g, pynvml.nvmlDeviceGetGpuInstanceProfileInfo(g, 0).id)
            pynvml.nvmlGpuInstanceCreateComputeInstance(
                gi, pynvml.nvmlGpuInstanceGetComputeInstanceProfileInfo(gi, 0, 0).id)
    out["mig"] = pynvml.nvmlDeviceGetMigMode(g)[0]
    out["mig_devices"] = []
    if out["mig"]:
        for i in range(pynvml.nvmlDeviceGetMaxMigDeviceCount(g)):
            try:
                m = pynvml.nvmlDeviceGetMigDeviceHandleByIndex(g, i)
            except pynvml.NVMLError:
                break
            out["mig_devices"].append([pynvml.nvmlDeviceGetIndex(m), pynvml.nvmlDeviceGetGpuInstanceId(m),
                                       pynvml.nvmlDeviceGetComputeInstanceId(m), pynvml.nvmlDeviceGetUUID(m)])
    handles = [pynvml.nvmlDeviceGetHandleByIndex(i) for i in range(out["count"])]
    out["uuids"] = [pynvml.nvmlDeviceGetUUID(h) for h in handles]
    out["indices"] = [pynvml.nvmlDeviceGetIndex(h) for h in handles]
    out["minors"] = [pynvml.nvmlDeviceGetMinorNumber(h) for h in handles]
    out["by_uuid"] = {}
    for u in sys.argv[2:]:
        try:
            out["by_uuid"][u] = pynvml.nvmlDeviceGetIndex(pynvml.nvmlDeviceGetHandleByUUID(u))
        except pynvml.NVMLError as e:
            out["by_uuid"][u] = str(e)
    print(json.dumps(out))
""")

# the node side: systemd's Accept=yes socket, one gpuops-fake-channel per connection (handing over
# the test's node root instead of /)
SERVER = textwrap.dedent("""
    import os, socket, subprocess, sys
    root, channel, sock_path, ready = sys.argv[1:5]
    s = socket.socket(socket.AF_UNIX)
    s.bind(sock_path)
    s.listen(8)
    open(ready, "w").close()
    while True:
        conn, _ = s.accept()
        subprocess.run([channel, root], stdin=conn)
        conn.close()
""")


def run_in_namespace(tmp_path, node_root, *client_args, serve=True, minors=range(8), caps=None, driver_root=None,
                     library_from_root=True):
    """Runs CLIENT in a mount namespace where /run is empty except for the node's socket,
    /etc/gpuops-fake-nvml is empty and /dev holds /dev/nvidia<minor> for MINORS only (the
    container view: the runtime injects the device nodes of the GPUs a container was given);
    returns its CompletedProcess. DRIVER_ROOT: the node's driver mounted there instead (the socket
    under DRIVER_ROOT/run, the library loaded from DRIVER_ROOT/usr/lib/x86_64-linux-gnu)."""
    sock_dir = f"{driver_root}/run/nvidia-persistenced" if driver_root else "/run/nvidia-persistenced"
    libdir = BUILD_DIR
    if driver_root and library_from_root:
        libdir = driver_root / "usr/lib/x86_64-linux-gnu"
        libdir.mkdir(parents=True, exist_ok=True)
        shutil.copy(BUILD_DIR / "libnvidia-ml.so.1", libdir / "libnvidia-ml.so.1")
    devs = " ".join([f"/dev/nvidia{m}" for m in minors] + [f"/dev/nvidia-caps/nvidia-cap{c}" for c in caps or ()])
    (tmp_path / "client.py").write_text(CLIENT)
    (tmp_path / "server.py").write_text(SERVER)
    script = textwrap.dedent(f"""
        set -e
        mount --make-rprivate /
        mount -t tmpfs tmpfs /run
        mkdir -p /etc/gpuops-fake-nvml
        mount -t tmpfs tmpfs /etc/gpuops-fake-nvml
        mkdir -p {tmp_path}/hostdev
        mount --rbind /dev {tmp_path}/hostdev
        mount -t tmpfs tmpfs /dev
        for d in null zero random urandom; do touch /dev/$d; mount --bind {tmp_path}/hostdev/$d /dev/$d; done
        mkdir -p /dev/nvidia-caps
        for d in /dev/nvidiactl {devs}; do touch $d; done
        if [ {int(caps is None)} = 1 ]; then  # every MIG capability of GPUs 0-7 (a container given all)
            for c in $(seq 1 1082); do touch /dev/nvidia-caps/nvidia-cap$c; done
        fi
        if [ {int(serve)} = 1 ]; then
            rm -f {tmp_path}/ready
            mkdir -p {sock_dir}
            {sys.executable} {tmp_path}/server.py {node_root} {CHANNEL} \\
                {sock_dir}/socket {tmp_path}/ready >/dev/null 2>&1 &
            for i in $(seq 100); do [ -e {tmp_path}/ready ] && break; sleep 0.05; done
        fi
        rc=0
        {sys.executable} {tmp_path}/client.py {" ".join(client_args)} || rc=$?
        [ {int(serve)} = 1 ] && kill $!
        exit $rc
    """)
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUOPS_FAKE_NVML")}
    env["LD_LIBRARY_PATH"] = str(libdir)
    return subprocess.run(["unshare", "-m", "--", "bash", "-c", script], capture_output=True, text=True,
                          env=env, timeout=60, check=False)


@pytest.fixture
def node_root(tmp_path):
    """A lab node's files, as the fake driver package lays them out."""
    root = tmp_path / "node"
    (root / "etc" / "gpuops-fake-nvml" / "profiles").mkdir(parents=True)
    (root / "var" / "lib" / "gpuops-fake-nvml").mkdir(parents=True)
    for p in PROFILE_DIR.glob("*.profile"):
        shutil.copy(p, root / "etc" / "gpuops-fake-nvml" / "profiles")
    # the node's selected profile includes another one by name (looked up in profiles/)
    (root / "etc" / "gpuops-fake-nvml" / "profile").write_text("include = hgx-h100\n")
    return root


def test_a_container_sees_the_nodes_gpus_and_its_mig_changes_reach_the_node(tmp_path, node_root):
    import json
    res = run_in_namespace(tmp_path, node_root, "enable-mig")
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    # hgx-h100: 8 x H100 80GB HBM3, driver 570.172.08 (labfacts / profiles/hgx-h100.profile)
    assert (got["driver"], got["count"], got["name"]) == ("570.172.08", 8, "NVIDIA H100 80GB HBM3")
    assert got["mig"] == 1
    state = (node_root / "var" / "lib" / "gpuops-fake-nvml" / "state").read_text()
    assert got["uuid"] in state
    # a second container sees the state the first one left on the node
    res = run_in_namespace(tmp_path, node_root, "read")
    assert res.returncode == 0, res.stderr
    again = json.loads(res.stdout)
    assert again["mig"] == 1 and again["uuid"] == got["uuid"]


def test_a_container_sees_only_the_gpus_whose_device_nodes_it_was_given(tmp_path, node_root):
    import json
    # the runtime injected /dev/nvidia3 and /dev/nvidia5 (hgx-h100: minor number = node index)
    res = run_in_namespace(tmp_path, node_root, "read", H100_UUIDS[5], H100_UUIDS[0], minors=(3, 5))
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    # NVML numbers the visible GPUs from 0, in PCI order, as nvidia-smi in such a pod does
    assert got["count"] == 2
    assert got["uuids"] == [H100_UUIDS[3], H100_UUIDS[5]]
    assert got["indices"] == [0, 1] and got["minors"] == [3, 5]
    # a GPU the container was not given is not found by its UUID either
    assert got["by_uuid"] == {H100_UUIDS[5]: 1, H100_UUIDS[0]: "Not Found"}


def cap_minors(gpu_minor, gi, ci):
    """The capability minors of a MIG device (/proc/driver/nvidia-caps/mig-minors numbering)."""
    base = 3 + 135 * gpu_minor + 9 * gi
    return [base, base + 1 + ci]


def test_a_container_sees_only_the_mig_devices_whose_capability_nodes_it_was_given(tmp_path, node_root):
    import json
    res = run_in_namespace(tmp_path, node_root, "make-mig")
    assert res.returncode == 0, res.stderr
    every = json.loads(res.stdout)["mig_devices"]
    assert [d[0] for d in every] == [0, 1, 2]
    # a pod given the second MIG device: the runtime injected /dev/nvidia0 and its GI and CI
    # capability nodes; NVML there lists that one device, as MIG device 0
    _index, gi, ci, uuid = every[1]
    res = run_in_namespace(tmp_path, node_root, "read", uuid, every[0][3], minors=(0,), caps=cap_minors(0, gi, ci))
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    assert got["mig_devices"] == [[0, gi, ci, uuid]]
    assert got["by_uuid"] == {uuid: 0, every[0][3]: "Not Found"}
    # the GPU instance's node alone is not enough
    res = run_in_namespace(tmp_path, node_root, "read", minors=(0,), caps=cap_minors(0, gi, ci)[:1])
    assert json.loads(res.stdout)["mig_devices"] == []


def test_a_container_given_no_gpu_sees_none(tmp_path, node_root):
    import json
    res = run_in_namespace(tmp_path, node_root, "count-only", minors=())
    assert res.returncode != 0
    # nvmlDeviceGetHandleByIndex(0) with no device: the count was 0
    assert "InvalidArgument" in res.stderr


def test_the_nodes_boot_state_is_the_containers(tmp_path, node_root):
    import json
    # the node booted a newer driver than the profile's (gpuops-fake-boot's record in /run)
    (node_root / "run" / "gpuops-fake-nvml").mkdir(parents=True)
    (node_root / "run" / "gpuops-fake-nvml" / "boot").write_text("driver_version 580.95.05\n")
    res = run_in_namespace(tmp_path, node_root, "read")
    assert res.returncode == 0, res.stderr
    assert json.loads(res.stdout)["driver"] == "580.95.05"


def test_without_the_channel_a_container_has_no_driver(tmp_path, node_root):
    res = run_in_namespace(tmp_path, node_root, "read", serve=False)
    assert res.returncode != 0
    assert "NVMLError_DriverNotLoaded" in res.stderr


def test_a_container_with_the_nodes_driver_root_mounted_reaches_the_node_through_it(tmp_path, node_root):
    """NVIDIA's DRA driver mounts the host's driver root (/driver-root) and loads NVML from there:
    NVML loaded from a driver root reaches that root's driver (here: its socket)."""
    import json
    res = run_in_namespace(tmp_path, node_root, "read", driver_root=tmp_path / "driver-root")
    assert res.returncode == 0, res.stderr
    got = json.loads(res.stdout)
    assert (got["driver"], got["count"], got["uuids"]) == ("570.172.08", 8, H100_UUIDS)
    # the same socket, but the library loaded from elsewhere (not that root's): no driver
    res = run_in_namespace(tmp_path, node_root, "read", driver_root=tmp_path / "driver-root",
                           library_from_root=False)
    assert res.returncode != 0
    assert "NVMLError_DriverNotLoaded" in res.stderr

# -*- coding: utf-8 -*-
"""The lab's DCGM exporter stand-in on its own, over simulated nodes (no cluster): what its
/metrics says must be what NVML says about those GPUs — per GPU, per MIG device with the
exporter's MIG labels, XIDs from NVML's events — and /health says whether it can collect."""
from __future__ import annotations

import os
import re
import socket
import subprocess
import sys
import urllib.request

import pytest

from conftest import LAB
from kubelab.waiting import wait_for
from labfacts import H100_MIG_UUIDS, H100_UUIDS, MIG_SCRIPT

WITH_GPUS = os.path.join(LAB, "with-gpus")
COUNTERS = os.path.join(LAB, "kubelab", "dcgm-default-counters.csv")
SERIES = re.compile(r'^(\w+)\{(.*)\} (\S+)$')


def exporter_binary():
    res = subprocess.run([os.path.join(LAB, "go-binaries"), "--dir", "dcgm-exporter"], capture_output=True,
                         text=True, timeout=1800, check=False)
    assert res.returncode == 0, res.stderr
    return os.path.join(res.stdout.strip(), "dcgm-exporter")


def parse(text):
    out = []
    for line in text.splitlines():
        m = SERIES.match(line)
        if m:
            labels = dict(re.findall(r'(\w+)="((?:[^"\\]|\\.)*)"', m.group(2)))
            out.append((m.group(1), labels, float(m.group(3))))
    return out


def node_env(tmp_path, profile):
    """The environment of the simulated node PROFILE (its fake NVML state under tmp_path)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("GPUOPS_FAKE_NVML")}
    env.update(GPUOPS_FAKE_NVML_STATE=str(tmp_path / f"{profile}.state"), NODE_NAME="node-a", TMPDIR=str(tmp_path))
    return env


def on_node(tmp_path, profile, script):
    """Python SCRIPT in a process of its own on the simulated node (as an operator's tool)."""
    subprocess.run([WITH_GPUS, profile, "--", sys.executable, "-c", script], env=node_env(tmp_path, profile),
                   check=True, capture_output=True, timeout=60)


@pytest.fixture
def exporter(tmp_path):
    binary = exporter_binary()
    procs = []

    def start(profile, before=None):
        if before:
            on_node(tmp_path, profile, before)
        with socket.socket() as s:
            s.bind(("127.0.0.1", 0))
            port = s.getsockname()[1]
        log_path = tmp_path / "exporter.log"
        log = open(log_path, "w")  # pylint: disable=consider-using-with
        proc = subprocess.Popen([WITH_GPUS, profile, "--", binary, "-f", COUNTERS,  # pylint: disable=consider-using-with
                                 "-a", f"127.0.0.1:{port}", "-c", "500"], env=node_env(tmp_path, profile), stdout=log,
                                stderr=subprocess.STDOUT)
        procs.append(proc)
        url = f"http://127.0.0.1:{port}"

        def healthy():
            # the exporter collects once before it listens: an answer means /metrics has a collection
            assert proc.poll() is None, f"the exporter exited ({proc.returncode}): {log_path.read_text()}"
            try:
                with urllib.request.urlopen(url + "/health", timeout=2) as r:
                    return r.status == 200
            except OSError:
                return False
        wait_for(healthy, 10, f"the exporter to answer /health on {url}", interval=0.1)

        def metrics():
            with urllib.request.urlopen(url + "/metrics", timeout=5) as r:
                return parse(r.read().decode())
        return metrics, log_path
    yield start
    for p in procs:
        p.terminate()
        p.wait(10)


def test_a_series_per_gpu_with_the_exporters_labels(exporter):
    metrics, _log = exporter("hgx-h100")
    temps = [s for s in metrics() if s[0] == "DCGM_FI_DEV_GPU_TEMP"]
    assert [s[1]["UUID"] for s in temps] == H100_UUIDS
    first = temps[0][1]
    assert first == {"gpu": "0", "UUID": H100_UUIDS[0], "pci_bus_id": "00000000:1B:00.0", "device": "nvidia0",
                     "modelName": "NVIDIA H100 80GB HBM3", "Hostname": "node-a",
                     "DCGM_FI_DRIVER_VERSION": "570.172.08"}
    values = {(s[0], s[1]["gpu"]): s[2] for s in metrics()}
    # hgx-h100 GPU 0 (profiles/hgx-h100.profile): 31 C, 71342 mW, SM 345 MHz, memory 2619 MHz
    assert values[("DCGM_FI_DEV_GPU_TEMP", "0")] == 31
    assert values[("DCGM_FI_DEV_POWER_USAGE", "0")] == pytest.approx(71.342)
    assert values[("DCGM_FI_DEV_SM_CLOCK", "0")] == 345
    assert values[("DCGM_FI_DEV_MEM_CLOCK", "0")] == 2619
    assert values[("DCGM_FI_DEV_TOTAL_ENERGY_CONSUMPTION", "0")] == 71342 * 3600
    # DCGM's profiling fields have no NVML source: left out, not invented
    assert not any(s[0].startswith("DCGM_FI_PROF_") for s in metrics())


def test_mig_devices_carry_their_instance(exporter):
    metrics, _log = exporter("hgx-h100", before=MIG_SCRIPT)  # GPU 0: two 3g.40gb instances
    used = [s[1] for s in metrics() if s[0] == "DCGM_FI_DEV_FB_USED" and "GPU_I_ID" in s[1]]
    assert len(used) == len(H100_MIG_UUIDS) == 2
    assert {(m["gpu"], m["UUID"], m["GPU_I_PROFILE"]) for m in used} == {("0", H100_UUIDS[0], "3g.40gb")}
    assert len({m["GPU_I_ID"] for m in used}) == 2
    # per-GPU utilisation is not available in MIG mode: no series for GPU 0, one for the others
    util = {s[1]["gpu"] for s in metrics() if s[0] == "DCGM_FI_DEV_GPU_UTIL"}
    assert util == {str(i) for i in range(1, 8)}


def xid_values(metrics):
    """{gpu: DCGM_FI_DEV_XID_ERRORS} of a collection."""
    return {s[1]["gpu"]: s[2] for s in metrics() if s[0] == "DCGM_FI_DEV_XID_ERRORS"}


def test_xids_and_remapping_faults(exporter, tmp_path):
    metrics, log = exporter("hgx-h100-faults")
    # profiles/hgx-h100-faults.profile: GPU 1 XIDs 79 then 48, GPU 2 XID 94 and a failed row remap;
    # the events arrive after the exporter's first collection: a later one carries the last of each
    xids = wait_for(lambda: (x := xid_values(metrics)).get("1") == 48 and x.get("2") == 94 and x, 10,
                    "the profile's XIDs in the metrics (GPU 1: 48, the last of 79 and 48; GPU 2: 94)")
    assert xids["0"] == 0
    values = {(s[0], s[1]["gpu"]): s[2] for s in metrics()}
    assert values[("DCGM_FI_DEV_ROW_REMAP_FAILURE", "2")] == 1
    assert values[("DCGM_FI_DEV_UNCORRECTABLE_REMAPPED_ROWS", "2")] == 9
    # GPU 7 fell off the bus: no series, and the log says so
    assert "7" not in {gpu for _field, gpu in values}
    # more collections: the problem is logged once, not per collection. A change made on the node
    # now (GPU 0 partitioned, as an operator's tool would) shows in a collection made after it
    on_node(tmp_path, "hgx-h100-faults", MIG_SCRIPT)
    wait_for(lambda: any(s[1]["gpu"] == "0" and "GPU_I_ID" in s[1] for s in metrics()), 10,
             "a collection after GPU 0 was partitioned (its MIG device's series)")
    lost = [line for line in log.read_text().splitlines() if "GPU 7: UUID" in line]
    assert len(lost) == 1 and "lost" in lost[0], log.read_text()


def test_a_bad_counters_file_is_refused_with_its_line(tmp_path):
    bad = tmp_path / "bad.csv"
    bad.write_text("DCGM_FI_DEV_GPU_TEMP, gauge, ok\nDCGM_FI_DEV_SM_CLOCK, gauges, typo\n")
    res = subprocess.run([WITH_GPUS, "hgx-h100", "--", exporter_binary(), "-f", str(bad), "-a", "127.0.0.1:0"],
                         capture_output=True, text=True, timeout=60, check=False)
    assert res.returncode != 0
    assert f"{bad}:2" in res.stderr and "gauges" in res.stderr

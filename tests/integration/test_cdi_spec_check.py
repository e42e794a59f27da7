# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""gpuops.nvidia.cdi_spec_check on simulated nodes: a spec written for the node is clean; after a
MIG change (made by another process) or a GPU swap it is reported stale."""
from __future__ import annotations

import sys

import yaml

from conftest import mig_script  # pylint: disable=import-error


def write_spec(root, gpus):
    """A spec shaped like nvidia-ctk's, for the GPUs gpu_info reported, with device nodes."""
    devices = []
    for gpu in gpus:
        edits = {"deviceNodes": [{"path": "/dev/nvidia%d" % gpu["minor_number"]}]}
        devices += [{"name": str(gpu["index"]), "containerEdits": edits}, {"name": gpu["uuid"], "containerEdits": edits}]
    devices.append({"name": "all", "containerEdits": {"deviceNodes": [d["containerEdits"]["deviceNodes"][0] for d in devices]}})
    spec = {"cdiVersion": "0.5.0", "kind": "nvidia.com/gpu", "devices": devices,
            "containerEdits": {"deviceNodes": [{"path": "/dev/nvidiactl"}, {"path": "/dev/nvidia-uvm"}]}}
    (root / "var/run/cdi").mkdir(parents=True, exist_ok=True)
    (root / "var/run/cdi/nvidia.yaml").write_text(yaml.safe_dump(spec))
    (root / "dev").mkdir(exist_ok=True)
    for name in ["nvidiactl", "nvidia-uvm"] + ["nvidia%d" % g["minor_number"] for g in gpus]:
        (root / "dev" / name).write_text("")


def test_spec_for_the_node_is_clean_then_stale_after_a_mig_change(lab, tmp_path):
    root = tmp_path / "host"
    gpus = lab.module("hgx-h100", args="kernel_log=false xid_wait_ms=0")["gpus"]
    write_spec(root, gpus)
    clean = lab.module("hgx-h100", module="gpuops.nvidia.cdi_spec_check", args="host_root=%s" % root)
    assert clean["changed"] is False and clean["stale"] is False and clean["findings"] == []
    assert clean["spec_files"] == ["/var/run/cdi/nvidia.yaml"]
    assert len(clean["listed"]) == 17  # 8 indexes, 8 UUIDs, all

    lab.run("hgx-h100", [sys.executable, "-c", mig_script(0, "3_SLICE", 2)])
    stale = lab.module("hgx-h100", module="gpuops.nvidia.cdi_spec_check", args="host_root=%s" % root)
    assert stale["stale"] is True
    missing = [f for f in stale["findings"] if f["code"] == "cdi_device_missing"][0]["devices"]
    assert "0:0" in missing and "0:1" in missing
    assert len([name for name in missing if name.startswith("MIG-")]) == 2


def test_gpu_swap_leaves_stale_uuids(lab, tmp_path):
    root = tmp_path / "host"
    write_spec(root, lab.module("hgx-h100", args="kernel_log=false xid_wait_ms=0")["gpus"])
    swapped = lab.module("hgx-h200", module="gpuops.nvidia.cdi_spec_check", args="host_root=%s" % root)
    codes = {f["code"] for f in swapped["findings"]}
    assert codes == {"cdi_device_missing", "cdi_device_stale"}
    stale = [f for f in swapped["findings"] if f["code"] == "cdi_device_stale"][0]["devices"]
    assert len(stale) == 8 and all(name.startswith("GPU-") for name in stale)


def test_no_spec_and_missing_device_nodes(lab, tmp_path):
    root = tmp_path / "host"
    root.mkdir()
    nothing = lab.module("l40s-x4", module="gpuops.nvidia.cdi_spec_check", args="host_root=%s" % root)
    assert [f["code"] for f in nothing["findings"]] == ["cdi_spec_missing"] and nothing["stale"] is True
    write_spec(root, lab.module("l40s-x4", args="kernel_log=false xid_wait_ms=0")["gpus"])
    (root / "dev" / "nvidia-uvm").unlink()
    nodes = lab.module("l40s-x4", module="gpuops.nvidia.cdi_spec_check", args="host_root=%s" % root)
    assert [f["code"] for f in nodes["findings"]] == ["cdi_device_node_missing"]
    assert nodes["stale"] is False

# -*- coding: utf-8 -*-
"""The drift audit (playbooks/audit.yml) on the lab as `make lab` leaves it: no drift on either
node; then a deliberate change on one node (its driver packages released from their hold and
their pin removed, as an unattended-upgrades setup or a hand fix would) is named - the node, the
item, the fix - the job fails so a schedule alerts, and the JSON report and the AWX records say
the same. The change is undone afterwards."""
from __future__ import annotations

import json
import os

from test_roles import PLAYBOOKS, extra, playbook

H100 = "gpuops-lab-h100"
PIN = "/etc/apt/preferences.d/gpuops-nvidia-driver.pref"


def audit(tmp_path):
    report = tmp_path / "audit.json"
    res = playbook("audit.yml", *extra(gpuops_audit_report_path=str(report)), check=False)
    with open(report, encoding="utf-8") as handle:
        return res, {n["node"]: n for n in json.load(handle)["nodes"]}


def test_a_converged_lab_has_no_drift_and_a_changed_node_is_named(lab_only, tmp_path):
    kube = lab_only
    res, nodes = audit(tmp_path)
    assert res.returncode == 0, res.stdout[-5000:]
    assert f"{H100}  no drift" in res.stdout and "2 node(s): 0 drifted, 0 outlier(s)" in res.stdout
    assert set(nodes) == {H100, "gpuops-lab-l40s"}, nodes
    for name, node in nodes.items():
        assert not node["summary"]["drifted"], (name, [i for i in node["items"] if not i["ok"]])
        checked = {i["item"] for i in node["items"]}
        assert {"driver installed", "driver loaded", "driver packages held", "driver pinned", "container toolkit",
                "containerd: NVIDIA runtime", "CDI spec", "GPU health", "label nvidia.com/gpu.present"} <= checked
        # the node's allocator's pod runs its DaemonSet's image: the device plugin's, or the DRA
        # driver's kubelet plugin on the DRA node (whose ResourceSlices list what NVML lists)
        allocator = {"gpuops-lab-l40s": "nvidia-device-plugin image",
                     H100: "dra-driver-nvidia-gpu-kubelet-plugin image"}[name]
        assert allocator in checked and "dcgm-exporter image" in checked, checked
        assert name != H100 or {"GPU allocation", "DRA devices"} <= checked, checked
    assert nodes[H100]["facts"]["driver"] == "570.172.08" and nodes[H100]["facts"]["toolkit"] == "1.18.0"

    held = kube.node_exec(H100, "apt-mark showhold").stdout.split()
    saved = kube.node_exec(H100, f"cat {PIN}").stdout
    assert held and saved
    try:
        assert kube.node_exec(H100, f"apt-mark unhold {' '.join(held)} && rm {PIN}").returncode == 0
        res, nodes = audit(tmp_path)
        assert res.returncode != 0
        assert f"drift on {H100}: see the audit above" in res.stdout
        assert f"{H100}  DRIFT 2: driver packages held, driver pinned" in res.stdout, res.stdout[-5000:]
        assert "fix: run the driver stage: it holds them" in res.stdout
        assert "gpuops-lab-l40s  no drift" in res.stdout
        bad = {i["item"]: i for i in nodes[H100]["items"] if not i["ok"]}
        assert set(bad) == {"driver packages held", "driver pinned"}
        assert bad["driver pinned"]["expected"] == "570.172.08-*" and bad["driver pinned"]["actual"] is None
        assert not nodes["gpuops-lab-l40s"]["summary"]["drifted"]
    finally:
        kube.node_exec(H100, f"apt-mark hold {' '.join(held)}; cat > {PIN} <<'GPUOPS_EOF'\n{saved}GPUOPS_EOF")
    res, nodes = audit(tmp_path)
    assert res.returncode == 0, res.stdout[-3000:]


DIGEST = ("find /etc/apt /etc/containerd /etc/cdi /var/run/cdi /var/lib/gpuops -type f -exec sha256sum {} + "
          "2>/dev/null | sort | sha256sum; apt-mark showhold | sha256sum")


def test_the_audit_is_check_mode_whatever_the_job_says(lab_only, tmp_path):
    """Run without --check, the audit changes nothing on the nodes (check mode is forced): the
    files the stages own and the holds are the same before and after. With no report path given
    the report is written in the working directory, never beside the playbook (inside the
    installed collection when run by its FQCN)."""
    kube = lab_only
    before = {n: kube.node_exec(n, DIGEST).stdout for n in (H100, "gpuops-lab-l40s")}
    beside = os.path.join(PLAYBOOKS, "gpuops-audit-report.json")
    assert not os.path.exists(beside)
    res = playbook("audit.yml", check=False, cwd=str(tmp_path))
    assert res.returncode == 0, res.stdout[-3000:]
    with open(tmp_path / "gpuops-audit-report.json", encoding="utf-8") as handle:
        assert {n["node"] for n in json.load(handle)["nodes"]} == {H100, "gpuops-lab-l40s"}
    assert not os.path.exists(beside)
    assert {n: kube.node_exec(n, DIGEST).stdout for n in before} == before

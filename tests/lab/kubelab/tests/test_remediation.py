# -*- coding: utf-8 -*-
"""Self-healing end to end on the lab, with the real parts: an XID injected through the fake NVML
on an L40S GPU; the DCGM exporter (the lab's stand-in) reports it; the lab's Prometheus (Debian's)
evaluates the collection's alert rules, which the alerts stage installed as a plain rule file
(promtool-checked, Prometheus reloaded); Debian's Alertmanager beside it sends the alert to the
collection's rulebook, run by the real ansible-rulebook on this machine, which runs
gpuops.nvidia.remediate: the node goes through the maintenance engine (cordon, GPU pods out,
drain), the GPU is reset (nvidia-smi -r), the operands restart, the node is validated and
uncordoned, the record is written, and the alert resolves."""
from __future__ import annotations

import json
import os
import socket
import subprocess
import time
import urllib.parse
import urllib.request

import pytest
import yaml

from conftest import KUBECTL, LAB, REPO
from test_roles import INVENTORY, extra, playbook

L40S = "gpuops-lab-l40s"
CP = "gpuops-lab-control-plane"
RULES = "/etc/prometheus/rules/gpuops-nvidia.yml"
PROMETHEUS = "http://127.0.0.1:9090"
TOKEN = "gpuops-lab-eda-7f3c9a21"
STATE = "/var/lib/gpuops-fake-nvml/state"
RECORD = "gpuops.nvidia/remediation"
# what a remediation writes on the node (its record, the engine's state and maintenance): put back
# as they were when the tests end, so the tests after these find the node as make lab left it
NODE_KEYS = ("gpuops.nvidia/", "nvidia.com/gpu-driver-upgrade")
NVML_SERIAL = ("import ctypes, sys; nvml = ctypes.CDLL('libnvidia-ml.so.1'); assert nvml.nvmlInit_v2() == 0; "
               "handle = ctypes.c_void_p(); "
               "assert nvml.nvmlDeviceGetHandleByIndex_v2(int(sys.argv[1]), ctypes.byref(handle)) == 0; "
               "serial = ctypes.create_string_buffer(64); assert nvml.nvmlDeviceGetSerial(handle, serial, 64) == 0; "
               "print(serial.value.decode())")


@pytest.fixture(scope="module")
def l40s_as_it_was(lab_only):
    """The L40S's labels and annotations as they were, back after this module's tests (and
    uncordoned: every test here ends with the node back in service, or fails saying why)."""
    saved = lab_only.node_meta(L40S)
    yield saved
    lab_only.restore_node_meta(L40S, saved, NODE_KEYS)
    lab_only.run("uncordon", L40S)
    _podman("exec", L40S, "fake-nvml-busy", "--clear", check=False)


def _podman(*args, check=True, input=None):  # pylint: disable=redefined-builtin
    env = dict(os.environ, CONTAINERS_CONF=os.path.join(LAB, "containers.conf"))
    res = subprocess.run(["podman", *args], env=env, capture_output=True, text=True, input=input, timeout=120,
                         check=False)
    assert not check or res.returncode == 0, res.stdout + res.stderr
    return res


def _query(expr):
    url = PROMETHEUS + "/api/v1/query?" + urllib.parse.urlencode({"query": expr})
    with urllib.request.urlopen(url, timeout=10) as response:
        return json.load(response)["data"]["result"]


def _free_port():
    with socket.socket() as sock:
        sock.bind(("0.0.0.0", 0))
        return sock.getsockname()[1]


@pytest.fixture(scope="module")
def loop(lab_only, l40s_as_it_was, tmp_path_factory):  # pylint: disable=unused-argument
    """The rules on the lab's Prometheus, its Alertmanager pointed at a rulebook on this machine."""
    kube = lab_only
    work = tmp_path_factory.mktemp("remediation")
    monitoring = work / "monitoring.yml"
    monitoring.write_text(yaml.safe_dump({"all": {"children": {"monitoring": {"hosts": {CP: {
        "ansible_connection": "gpuops_lab_podman", "ansible_python_interpreter": "/usr/bin/python3"}}}}}}))
    playbook("site.yml", "-i", str(monitoring), "--tags", "alerts",
             *extra(alerts_rule_file=RULES, alerts_rule_file_host=CP, alerts_reload_service="prometheus",
                    alerts_interval="5s"))
    gateway = json.loads(_podman("network", "inspect", "gpuops-lab").stdout)[0]["subnets"][0]["gateway"]
    port = _free_port()
    config = {"route": {"receiver": "gpuops", "group_by": ["node"], "group_wait": "1s", "group_interval": "5s",
                        "repeat_interval": "1h"},
              "receivers": [{"name": "gpuops", "webhook_configs": [{
                  "url": "http://%s:%d/alerts" % (gateway, port), "send_resolved": True,
                  "http_config": {"authorization": {"credentials": TOKEN}}}]}]}
    _podman("exec", "-i", CP, "sh", "-c", "cat > /etc/prometheus/alertmanager.yml && "
            "systemctl restart prometheus-alertmanager", input=yaml.safe_dump(config))
    report = work / "remediation.jsonl"
    (work / "vars.yml").write_text(yaml.safe_dump({
        "gpuops_eda_port": port, "gpuops_eda_token": TOKEN, "gpuops_eda_playbook": "gpuops.nvidia.remediate",
        "gpuops_eda_report": str(report)}))
    env = dict(os.environ, CONTAINERS_CONF=os.path.join(LAB, "containers.conf"),
               ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_FORCE_COLOR="0",
               # (ansible-rulebook runs the playbook with a copy of the inventory)
               GPUOPS_LAB_KUBECONFIG=os.path.join(REPO, ".build", "kube", "kubeconfig"),
               PATH=os.pathsep.join([os.path.join(REPO, ".venv", "bin"), os.environ.get("PATH", "")]))
    log = open(work / "rulebook.log", "w")  # pylint: disable=consider-using-with
    rulebook = subprocess.Popen(  # pylint: disable=consider-using-with
        [os.path.join(REPO, ".venv", "bin", "ansible-rulebook"), "-r",
         os.path.join(REPO, "extensions", "eda", "rulebooks", "remediate.yml"), "-i", INVENTORY,
         "--vars", str(work / "vars.yml"), "-v"], cwd=str(work), env=env, stdout=log, stderr=subprocess.STDOUT)

    def listening():
        assert rulebook.poll() is None, (work / "rulebook.log").read_text()[-4000:]
        with socket.socket() as sock:
            return sock.connect_ex(("127.0.0.1", port)) == 0
    kube.wait(listening, timeout=120, what="ansible-rulebook's webhook")
    try:
        yield {"kube": kube, "report": report, "log": work / "rulebook.log"}
    finally:
        rulebook.terminate()
        rulebook.wait(timeout=30)
        log.close()
        _podman("exec", CP, "sh", "-c", f"rm -f {RULES} && systemctl reload prometheus", check=False)


def test_an_xid_that_needs_a_gpu_reset_is_remediated_end_to_end(loop, gpu_nodes, request):
    kube = loop["kube"]
    uuid = _podman("exec", L40S, "nvidia-smi", "-L").stdout.splitlines()[0].split("UUID: ")[1].rstrip(")")
    # a node without remediation history (an earlier reset of this GPU within the day would
    # escalate this one to a reboot: the planner's unit tests cover that)
    kube.run("annotate", "node", L40S, RECORD + "-")
    kube.run("label", "node", L40S, "gpuops.nvidia/remediation-state-")
    before = kube.get("node", L40S)
    assert not before["spec"].get("unschedulable")
    earlier = []
    # every value the exporter's deploy label takes while the remediation runs (a watch of the node)
    deploy = subprocess.Popen(  # pylint: disable=consider-using-with
        [KUBECTL, "get", "node", L40S, "--watch", "-o",
         "jsonpath={.metadata.labels.nvidia\\.com/gpu\\.deploy\\.dcgm-exporter}{\"\\n\"}"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=dict(os.environ, KUBECONFIG=kube.kubeconfig))
    request.addfinalizer(lambda: (deploy.kill(), deploy.wait(timeout=30)))
    assert _podman("exec", L40S, "fake-nvml-xid", "--gpu", "0", "--xid", "95").returncode == 0
    # Prometheus: the exporter's last XID, and the collection's alert with its labels
    firing = kube.wait(lambda: _query('ALERTS{alertname="GPUXidError",alertstate="firing",node="%s"}' % L40S),
                       timeout=180, interval=2, what="the GPUXidError alert firing in Prometheus")
    labels = firing[0]["metric"]
    assert (labels["xid"], labels["finding"], labels["action"], labels["UUID"], labels["gpu"]) == (
        "95", "ecc_uncorrectable", "gpu-reset", uuid, "0"), labels
    assert labels["err_code"] == "95" and labels["err_msg"] == "Uncontained memory error"

    # the rulebook ran the remediation: the node's record has this alert's attempt, finished
    def record():
        text = (kube.get("node", L40S)["metadata"].get("annotations") or {}).get(RECORD)
        current = json.loads(text) if text else {"attempts": []}
        new = [a for a in current["attempts"] if a not in earlier and a["result"] in ("done", "failed")]
        return current if new else None
    final = kube.wait(record, timeout=600, interval=3, what="the remediation's record on the node")
    assert final["state"] == "remediation-done", (final, loop["log"].read_text()[-6000:])
    attempt = final["attempts"][-1]
    assert (attempt["action"], attempt["uuid"], attempt["result"], attempt["finding"]) == (
        "gpu-reset", uuid, "done", "ecc_uncorrectable")
    assert attempt["fingerprint"] and attempt["starts_at"]
    node = kube.get("node", L40S)
    assert not node["spec"].get("unschedulable"), "the node was left cordoned"
    # the GPU operands were paused for the reset (DCGM holds the GPU) and given back
    deploy.terminate()
    values = [line.strip() for line in deploy.communicate(timeout=30)[0].splitlines() if line.strip()]
    assert "paused-for-gpu-reset" in values and values[-1] == "true", values
    assert node["metadata"]["labels"]["nvidia.com/gpu.deploy.dcgm-exporter"] == "true"
    assert node["metadata"]["labels"]["gpuops.nvidia/remediation-state"] == "remediation-done"
    assert node["metadata"]["labels"]["nvidia.com/gpu-driver-upgrade-state"] == "upgrade-done"
    # the GPU was reset: the fake driver's record of the XID is gone with it
    state = _podman("exec", L40S, "cat", STATE).stdout
    assert f"xid {uuid} 95" not in state
    # the JSON report on the controller says the same (its line is written just after the record)

    def report():
        text = loop["report"].read_text() if loop["report"].exists() else ""
        found = [json.loads(line) for line in text.splitlines()]
        return found if len(found) >= 2 else None
    lines = kube.wait(report, timeout=60, what="the remediation's lines in the JSON report")
    assert [(line["state"], line["action"]) for line in lines] == [
        ("remediation-in-progress", "gpu-reset"), ("remediation-done", "gpu-reset")]
    # and the alert resolves (the exporter, restarted on the reset GPU, has no XID)
    kube.wait(lambda: not _query('ALERTS{alertname="GPUXidError",node="%s"}' % L40S), timeout=180, interval=2,
              what="the GPUXidError alert to resolve")
    assert kube.advertised_gpus(L40S, gpu_nodes[L40S]["allocation"]) == str(gpu_nodes[L40S]["gpus"])


def test_a_remediation_that_fails_midway_stays_cordoned_with_its_reason_and_the_next_run_resumes(
        lab_only, l40s_as_it_was, tmp_path):  # pylint: disable=unused-argument
    """The GPU held by a client (as DCGM's host engine would): nvidia-smi refuses the reset, the
    node stays cordoned, labelled remediation-failed with the reason in its record; once the GPU is
    free the same alert, again, resumes the node and finishes."""
    kube = lab_only
    kube.run("annotate", "node", L40S, RECORD + "-")
    kube.run("label", "node", L40S, "gpuops.nvidia/remediation-state-")
    uuid = _podman("exec", L40S, "nvidia-smi", "-L").stdout.splitlines()[1].split("UUID: ")[1].rstrip(")")
    alert = {"node": L40S, "finding": "xid", "action": "gpu-reset", "fingerprint": "5a5a5a5a5a5a5a5a",
             "starts_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
             "labels": {"alertname": "GPUXidError", "gpu": "1", "UUID": uuid, "xid": "119"}}
    report = tmp_path / "remediation.jsonl"
    run = extra(gpuops_remediation_alert=alert, gpuops_remediation_report=str(report))
    _podman("exec", L40S, "fake-nvml-busy", "--gpu", "1", "--pid", "4242", "--kind", "client", "--name", "nv-hostengine")
    try:
        res = playbook("remediate.yml", *run, check=False)
        assert res.returncode != 0
        node = kube.get("node", L40S)
        assert node["spec"].get("unschedulable") is True, "a node whose GPU could not be reset must stay cordoned"
        assert node["metadata"]["labels"]["gpuops.nvidia/remediation-state"] == "remediation-failed"
        record = json.loads(node["metadata"]["annotations"][RECORD])
        assert record["state"] == "remediation-failed", record
        assert f"GPU {uuid} could not be reset (nvidia-smi exit" in record["reason"], record["reason"]
        assert "stop what holds it" in record["reason"]
        assert [a["result"] for a in record["attempts"]] == ["failed"]
        # the GPU operands the reset paused are given back all the same
        assert node["metadata"]["labels"]["nvidia.com/gpu.deploy.dcgm-exporter"] == "true"
        assert "gpuops.nvidia/gpu-reset.paused-operands" not in node["metadata"].get("annotations", {})
    finally:
        _podman("exec", L40S, "fake-nvml-busy", "--clear", "--gpu", "1")
    # (the validation after the reset is the first test's; here the resumed node goes back without it)
    res = playbook("remediate.yml", *run, *extra(driver_upgrade_validate=False), check=False)
    assert res.returncode == 0, res.stdout[-5000:]
    node = kube.get("node", L40S)
    assert not node["spec"].get("unschedulable")
    record = json.loads(node["metadata"]["annotations"][RECORD])
    assert record["state"] == "remediation-done"
    assert [(a["result"], a["action"]) for a in record["attempts"]] == [("failed", "gpu-reset"), ("done", "gpu-reset")]
    assert [json.loads(line)["state"] for line in report.read_text().splitlines()] == [
        "remediation-in-progress", "remediation-failed", "remediation-in-progress", "remediation-done"]


def test_the_same_gpu_failing_again_is_rebooted_then_quarantined_with_an_rma_record_naming_its_serial(
        lab_only, l40s_as_it_was, tmp_path):  # pylint: disable=unused-argument
    """The escalation ladder on the lab node: GPU 2 of the L40S was reset an hour ago (its record
    says so); the same XID on it again escalates the reset to a node reboot (the lab's reboot: the
    fake NVML's, then what a boot runs), after which the node is back in service; failing once more
    it is quarantined - cordoned, tainted, labelled - with an RMA record naming the GPU's serial as
    the node's NVML reports it (through gpu_report's inventory record on the node)."""
    kube = lab_only
    lines = _podman("exec", L40S, "nvidia-smi", "-L").stdout.splitlines()
    uuid = lines[2].split("UUID: ")[1].rstrip(")")
    # the GPU's serial as the node's NVML answers nvmlDeviceGetSerial (read here through ctypes)
    serial = _podman("exec", L40S, "python3", "-c", NVML_SERIAL, "2").stdout.strip()
    assert serial, "the node's NVML gave no serial"
    hour_ago = time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime(time.time() - 3600))
    kube.run("label", "node", L40S, "gpuops.nvidia/remediation-state-")
    kube.run("annotate", "node", L40S, "--overwrite", RECORD + "=" + json.dumps({
        "state": "remediation-done", "reason": "", "action": "gpu-reset", "finding": "ecc_uncorrectable", "gpu": "2",
        "at": hour_ago, "attempts": [{"at": hour_ago, "uuid": uuid, "gpu": "2", "finding": "ecc_uncorrectable",
                                      "action": "gpu-reset", "fingerprint": "0f0f0f0f0f0f0f0f",
                                      "starts_at": hour_ago, "result": "done"}]}))
    from test_upgrade import LAB_REBOOT  # pylint: disable=import-outside-toplevel

    def alert(fingerprint):
        return extra(gpuops_remediation_alert={
            "node": L40S, "finding": "ecc_uncorrectable", "action": "gpu-reset", "fingerprint": fingerprint,
            "starts_at": time.strftime("%Y-%m-%dT%H:%M:%SZ", time.gmtime()),
            "labels": {"alertname": "GPUXidError", "gpu": "2", "UUID": uuid, "xid": "95"}},
            gpuops_remediation_report=str(tmp_path / "remediation.jsonl"), driver_upgrade_validate=False, **LAB_REBOOT)
    booted = _podman("exec", L40S, "stat", "-c", "%.9Y", STATE).stdout.strip()
    try:
        res = playbook("remediate.yml", *alert("1a1a1a1a1a1a1a1a"), check=False)
        assert res.returncode == 0, res.stdout[-5000:]
        assert "node-reboot (escalated from gpu-reset)" in res.stdout, res.stdout[-5000:]
        node = kube.get("node", L40S)
        record = json.loads(node["metadata"]["annotations"][RECORD])
        assert (record["state"], record["action"]) == ("remediation-done", "node-reboot"), record
        assert [(a["action"], a["result"]) for a in record["attempts"]] == [("gpu-reset", "done"), ("node-reboot", "done")]
        assert _podman("exec", L40S, "stat", "-c", "%.9Y", STATE).stdout.strip() != booted, "the node did not reboot"
        assert not node["spec"].get("unschedulable")

        res = playbook("remediate.yml", *alert("2b2b2b2b2b2b2b2b"), check=False)
        assert res.returncode == 0, res.stdout[-5000:]
        # (the plan names the action the alert asked for, and the attempts that raised it)
        assert "quarantine (escalated from gpu-reset)" in res.stdout and "2 attempt(s) on it" in res.stdout, \
            res.stdout[-5000:]
        node = kube.get("node", L40S)
        record = json.loads(node["metadata"]["annotations"][RECORD])
        assert record["state"] == "quarantined" and record["action"] == "quarantine", record
        assert record["rma"]["uuid"] == uuid and record["rma"]["serial"] == serial, record["rma"]
        assert f"RMA: GPU 2, UUID {uuid}, serial {serial}" in res.stdout
        assert node["spec"].get("unschedulable") is True
        assert {"key": "gpuops.nvidia/quarantined", "value": "true", "effect": "NoSchedule"} in [
            {k: t.get(k) for k in ("key", "value", "effect")} for t in node["spec"].get("taints", [])]
        assert node["metadata"]["labels"]["gpuops.nvidia/remediation-state"] == "quarantined"
    finally:
        kube.run("taint", "node", L40S, "gpuops.nvidia/quarantined-", check=False)

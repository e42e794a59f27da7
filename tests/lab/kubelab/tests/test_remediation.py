# -*- coding: utf-8 -*-
"""Self-healing end to end on the lab, with the real parts: XIDs injected through the fake NVML;
the DCGM exporter (the lab's stand-in) reports them; the lab's Prometheus (Debian's) evaluates the
collection's alert rules, which the alerts stage installed as a plain rule file (promtool-checked,
Prometheus reloaded); Debian's Alertmanager beside it sends the alerts to the collection's
rulebook, run by the real ansible-rulebook on this machine, which runs gpuops.nvidia.remediate.

An XID that needs a GPU reset on the L40S and one that needs a node reboot on the H100, at once:
each node goes through the maintenance engine (cordon, GPU pods out, drain) within the one budget,
the L40S's GPU is reset (nvidia-smi -r), the H100 rebooted (the lab's reboot, as test_upgrade's),
the operands restart, the nodes are validated and uncordoned, the records are written, and the
alerts resolve. Then the rebooted GPU fails again: the alert escalates to a quarantine with an RMA
record naming the GPU's serial; at the same time an application's XID on the GPU of a workload pod
on the L40S restarts that pod alone, the node staying in service. A remediation that fails midway is the last test (the playbook
run directly)."""
from __future__ import annotations

import json
import os
import shutil
import socket
import subprocess
import time
import urllib.parse
import urllib.request

import pytest
import yaml

import synthetic_fleet as fleet
from conftest import KUBECTL, LAB, REPO, TOOLBOX
from test_roles import INVENTORY, extra, playbook
from test_upgrade import LAB_BOOT, LAB_REBOOT

L40S = "gpuops-lab-l40s"
H100 = "gpuops-lab-h100"
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
def nodes_as_they_were(lab_only):
    """The GPU nodes' labels and annotations as they were, back after this module's tests,
    uncordoned and without the quarantine's taint, no XID left on their GPUs."""
    saved = {name: lab_only.node_meta(name) for name in (L40S, H100)}
    yield saved
    for name, meta in saved.items():
        lab_only.restore_node_meta(name, meta, NODE_KEYS)
        lab_only.run("taint", "node", name, "gpuops.nvidia/quarantined-", check=False)
        lab_only.run("uncordon", name)
        _podman("exec", name, "fake-nvml-busy", "--clear", check=False)


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
def loop(lab_only, nodes_as_they_were, tmp_path_factory):  # pylint: disable=unused-argument
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
    # (a firing alert comes again every 10 s: the rulebook takes one per node within two minutes,
    # the next after that - as Alertmanager's repeat_interval brings it back on a cluster)
    config = {"route": {"receiver": "gpuops", "group_by": ["node"], "group_wait": "1s", "group_interval": "5s",
                        "repeat_interval": "10s"},
              "receivers": [{"name": "gpuops", "webhook_configs": [{
                  "url": "http://%s:%d/alerts" % (gateway, port), "send_resolved": True,
                  "http_config": {"authorization": {"credentials": TOKEN}}}]}]}
    _podman("exec", "-i", CP, "sh", "-c", "cat > /etc/prometheus/alertmanager.yml && "
            "systemctl restart prometheus-alertmanager", input=yaml.safe_dump(config))
    report = work / "remediation.jsonl"
    (work / "vars.yml").write_text(yaml.safe_dump({
        "gpuops_eda_port": port, "gpuops_eda_token": TOKEN, "gpuops_eda_playbook": "gpuops.nvidia.remediate",
        "gpuops_eda_report": str(report)}))
    # the lab's inventory, with the H100's reboot the lab's (test_upgrade's): what an operator's
    # inventory says of a node's reboot, the rulebook's runs read. (The validation after a
    # remediation leaves the metrics check to the lab's own validation: the alert resolving shows
    # Prometheus scraping the node's restarted exporter.)
    inventory = work / "inventory"
    shutil.copytree(INVENTORY, inventory)
    (inventory / "host_vars").mkdir(exist_ok=True)
    (inventory / "host_vars" / f"{H100}.yml").write_text(yaml.safe_dump(dict(
        {key: LAB_REBOOT[key] for key in ("driver_reboot_command", "driver_reboot_boot_time_command",
                                          "driver_upgrade_drain_delay")}, validate_prometheus_url="")))
    (inventory / "host_vars" / f"{L40S}.yml").write_text(yaml.safe_dump({"validate_prometheus_url": ""}))
    env = dict(os.environ, CONTAINERS_CONF=os.path.join(LAB, "containers.conf"),
               ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_FORCE_COLOR="0",
               # (ansible-rulebook runs the playbook with a copy of the inventory)
               GPUOPS_LAB_KUBECONFIG=os.path.join(REPO, ".build", "kube", "kubeconfig"),
               PATH=os.pathsep.join([os.path.join(REPO, ".venv", "bin"), os.environ.get("PATH", "")]))
    log = open(work / "rulebook.log", "w")  # pylint: disable=consider-using-with
    rulebook = subprocess.Popen(  # pylint: disable=consider-using-with
        [os.path.join(REPO, ".venv", "bin", "ansible-rulebook"), "-r",
         os.path.join(REPO, "extensions", "eda", "rulebooks", "remediate.yml"), "-i", str(inventory),
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


def _uuid(node, index):
    return _podman("exec", node, "nvidia-smi", "-L").stdout.splitlines()[index].split("UUID: ")[1].rstrip(")")


def _record(kube, node):
    text = (kube.get("node", node)["metadata"].get("annotations") or {}).get(RECORD)
    return json.loads(text) if text else {"attempts": []}


def _finished(kube, node, earlier):
    """The node's record once it has an attempt, finished, that EARLIER (attempts) did not."""
    current = _record(kube, node)
    new = [a for a in current["attempts"] if a not in earlier and a["result"] in ("done", "failed")]
    return current if new else None


def _firing(kube, node, xid):
    found = kube.wait(lambda: _query('ALERTS{alertname="GPUXidError",alertstate="firing",node="%s",xid="%s"}'
                                     % (node, xid)),
                      timeout=180, interval=2, what=f"the GPUXidError alert (XID {xid}) of {node} firing in Prometheus")
    return found[0]["metric"]


def _report(loop, node, count):
    """The JSON report's lines of NODE, once it has COUNT (each is written just after its record)."""
    def lines():
        text = loop["report"].read_text() if loop["report"].exists() else ""
        found = [line for line in map(json.loads, text.splitlines()) if line["node"] == node]
        return found if len(found) >= count else None
    return loop["kube"].wait(lines, timeout=60, what=f"{node}'s lines in the JSON report")


def _boot_time(node):
    """The lab node's boot time: its fake NVML's state, which the lab's reboot writes anew."""
    return _podman("exec", node, "stat", "-c", "%.9Y", STATE).stdout.strip()


WORKLOAD_NS = "gpuops-remediation-workload"


def _workload():
    """A Deployment of two pods on the L40S, each holding one GPU (through the device plugin and
    NVIDIA's runtime) and printing its UUID."""
    labels = {"app": "cuda-job"}
    return {"apiVersion": "apps/v1", "kind": "Deployment", "metadata": {"name": "cuda-job", "namespace": WORKLOAD_NS},
            "spec": {"replicas": 2, "selector": {"matchLabels": labels},
                     "template": {"metadata": {"labels": labels}, "spec": {
                         "nodeSelector": {"kubernetes.io/hostname": L40S}, "runtimeClassName": "nvidia",
                         "terminationGracePeriodSeconds": 1,
                         "containers": [{"name": "main", "image": TOOLBOX, "imagePullPolicy": "IfNotPresent",
                                         "command": ["sh", "-c", "nvidia-smi -L; sleep 100000"],
                                         "resources": {"limits": {"nvidia.com/gpu": "1"}}}]}}}}


def _workload_pods(kube):
    """{pod name: (uid, the UUID of the GPU it printed)} of the workload's running pods."""
    pods = {}
    for pod in kube.get("-n", WORKLOAD_NS, "pods", "-l", "app=cuda-job")["items"]:
        name = pod["metadata"]["name"]
        if pod["status"].get("phase") != "Running" or pod["metadata"].get("deletionTimestamp"):
            continue
        printed = kube.run("-n", WORKLOAD_NS, "logs", name, check=False).stdout
        if "UUID: " in printed:
            pods[name] = (pod["metadata"]["uid"], printed.split("UUID: ")[1].split(")")[0])
    return pods


def test_an_xid_that_needs_a_gpu_reset_and_one_that_needs_a_reboot_are_remediated_end_to_end(loop, gpu_nodes, request):
    """XID 95 (uncontained memory error: reset the GPU) on the L40S's GPU 0 and XID 79 (fallen off
    the bus: reboot the node) on the H100's GPU 0 at the same moment. One budget (max_unavailable
    25% of the two GPU nodes: one) - the second node waits for the first; each ends validated,
    uncordoned and recorded, and both alerts resolve."""
    kube = loop["kube"]
    uuid, h100_uuid = _uuid(L40S, 0), _uuid(H100, 0)
    # nodes without remediation history (an earlier remediation of these GPUs within the day would
    # escalate these: the planner's unit tests cover that, the last test here too)
    for name in (L40S, H100):
        kube.run("annotate", "node", name, RECORD + "-")
        kube.run("label", "node", name, "gpuops.nvidia/remediation-state-")
        assert not kube.get("node", name)["spec"].get("unschedulable")
    # every value the exporter's deploy label takes while the remediation runs (a watch of the node)
    deploy = subprocess.Popen(  # pylint: disable=consider-using-with
        [KUBECTL, "get", "node", L40S, "--watch", "-o",
         "jsonpath={.metadata.labels.nvidia\\.com/gpu\\.deploy\\.dcgm-exporter}{\"\\n\"}"],
        stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=dict(os.environ, KUBECONFIG=kube.kubeconfig))
    request.addfinalizer(lambda: (deploy.kill(), deploy.wait(timeout=30)))
    with fleet.NodeWatch(kube.kubeconfig) as watch:
        assert _podman("exec", L40S, "fake-nvml-xid", "--gpu", "0", "--xid", "95").returncode == 0
        assert _podman("exec", H100, "fake-nvml-xid", "--gpu", "0", "--xid", "79").returncode == 0
        booted = _boot_time(H100)  # (the XID is in the state now)
        # Prometheus: the exporter's last XID, and the collection's alerts with their labels
        labels = _firing(kube, L40S, "95")
        assert (labels["finding"], labels["action"], labels["UUID"], labels["gpu"]) == (
            "ecc_uncorrectable", "gpu-reset", uuid, "0"), labels
        assert labels["err_code"] == "95" and labels["err_msg"] == "Uncontained memory error"
        labels = _firing(kube, H100, "79")
        assert (labels["finding"], labels["action"], labels["UUID"], labels["gpu"]) == (
            "gpu_lost", "node-reboot", h100_uuid, "0"), labels
        # the rulebook ran the remediations: each node's record has its alert's attempt, finished
        final = kube.wait(lambda: _finished(kube, L40S, []), timeout=600, interval=3,
                          what=f"the remediation's record on {L40S}")
        rebooted = kube.wait(lambda: _finished(kube, H100, []), timeout=600, interval=3,
                             what=f"the remediation's record on {H100}")
    assert final["state"] == "remediation-done", (final, loop["log"].read_text()[-6000:])
    attempt = final["attempts"][-1]
    assert (attempt["action"], attempt["uuid"], attempt["result"], attempt["finding"]) == (
        "gpu-reset", uuid, "done", "ecc_uncorrectable")
    assert attempt["fingerprint"] and attempt["starts_at"]
    assert rebooted["state"] == "remediation-done", (rebooted, loop["log"].read_text()[-6000:])
    assert [(a["action"], a["uuid"], a["result"], a["finding"]) for a in rebooted["attempts"]] == [
        ("node-reboot", h100_uuid, "done", "gpu_lost")]
    assert _boot_time(H100) != booted, f"{H100} did not reboot"
    assert f"xid {h100_uuid} 79" not in _podman("exec", H100, "cat", STATE).stdout
    # one budget: both nodes went out of service, never both at once
    assert watch.peak == 1 and {L40S, H100} <= set(watch.out_total), (watch.peak, watch.out_total)
    for name in (L40S, H100):
        node = kube.get("node", name)
        assert not node["spec"].get("unschedulable"), f"{name} was left cordoned"
        assert node["metadata"]["labels"]["gpuops.nvidia/remediation-state"] == "remediation-done"
        assert node["metadata"]["labels"]["nvidia.com/gpu-driver-upgrade-state"] == "upgrade-done"
    # the GPU operands were paused for the reset (DCGM holds the GPU) and given back
    deploy.terminate()
    values = [line.strip() for line in deploy.communicate(timeout=30)[0].splitlines() if line.strip()]
    assert "paused-for-gpu-reset" in values and values[-1] == "true", values
    assert kube.get("node", L40S)["metadata"]["labels"]["nvidia.com/gpu.deploy.dcgm-exporter"] == "true"
    # the GPU was reset: the fake driver's record of the XID is gone with it
    state = _podman("exec", L40S, "cat", STATE).stdout
    assert f"xid {uuid} 95" not in state
    # the JSON report on the controller says the same
    assert [(line["state"], line["action"]) for line in _report(loop, L40S, 2)] == [
        ("remediation-in-progress", "gpu-reset"), ("remediation-done", "gpu-reset")]
    assert [(line["state"], line["action"]) for line in _report(loop, H100, 2)][-2:] == [
        ("remediation-in-progress", "node-reboot"), ("remediation-done", "node-reboot")]
    # and the alerts resolve (the exporter, restarted on the reset GPU and the rebooted node, has no XID)
    kube.wait(lambda: not _query('ALERTS{alertname="GPUXidError",node=~"%s|%s"}' % (L40S, H100)), timeout=180,
              interval=2, what="the GPUXidError alerts to resolve")
    assert kube.advertised_gpus(L40S, gpu_nodes[L40S]["allocation"]) == str(gpu_nodes[L40S]["gpus"])
    assert kube.advertised_gpus(H100, gpu_nodes[H100]["allocation"]) == str(gpu_nodes[H100]["gpus"])


def test_the_rebooted_gpu_failing_again_is_quarantined_while_an_application_xid_restarts_only_its_pod(
        loop, request):
    """The H100's GPU 0, rebooted for XID 79 by the test before, fails again (XID 95, which asks for
    a reset): within the escalation window a GPU the node was rebooted for is not reset again - the
    alert ends in a quarantine (cordoned, tainted, labelled) with an RMA record naming the GPU's
    serial as the node's NVML reports it (through gpu_report's inventory record on the node).
    Meanwhile XID 13 (graphics engine exception: the application's fault) on the GPU of one of two
    workload pods on the L40S: the alert names that pod (the exporter's attribution), the rulebook
    restarts it and nothing else, and the L40S is never taken out of service."""
    kube = loop["kube"]
    uuid = _uuid(H100, 0)
    # the GPU's serial as the node's NVML answers nvmlDeviceGetSerial (read here through ctypes)
    serial = _podman("exec", H100, "python3", "-c", NVML_SERIAL, "0").stdout.strip()
    assert serial, "the node's NVML gave no serial"
    earlier = _record(kube, H100)["attempts"]
    assert [a["action"] for a in earlier] == ["node-reboot"], earlier
    # the L40S without history: its reset in the test before is no part of this
    kube.run("annotate", "node", L40S, RECORD + "-")
    kube.run("label", "node", L40S, "gpuops.nvidia/remediation-state-")
    l40s_uuids = [line.split("UUID: ")[1].rstrip(")") for line in _podman("exec", L40S, "nvidia-smi", "-L").stdout.splitlines()]
    faulted = []
    request.addfinalizer(lambda: _workload_gone(kube, faulted))
    kube.run("create", "namespace", WORKLOAD_NS)
    kube.apply(_workload())
    try:
        with fleet.NodeWatch(kube.kubeconfig) as watch:
            assert _podman("exec", H100, "fake-nvml-xid", "--gpu", "0", "--xid", "95").returncode == 0
            # (while the H100's alert comes: the workload's pods run, each on its GPU, and the exporter
            # attributes the GPUs' series to them)
            pods = kube.wait(lambda: (p := _workload_pods(kube)) and len(p) == 2 and p, timeout=120,
                             what="the workload's two pods running, each with its GPU")
            (victim, (victim_uid, victim_gpu)), (bystander, (bystander_uid, _gpu)) = sorted(pods.items())
            kube.wait(lambda: _query('DCGM_FI_DEV_XID_ERRORS{namespace="%s",pod="%s"}' % (WORKLOAD_NS, victim)),
                      timeout=90, interval=2, what=f"the exporter's series of {victim}'s GPU")
            index = l40s_uuids.index(victim_gpu)
            faulted.append(index)
            assert _podman("exec", L40S, "fake-nvml-xid", "--gpu", str(index), "--xid", "13").returncode == 0
            labels = _firing(kube, H100, "95")
            assert (labels["action"], labels["UUID"]) == ("gpu-reset", uuid), labels
            labels = _firing(kube, L40S, "13")
            assert (labels["action"], labels["UUID"], labels["pod"], labels["namespace"]) == (
                "restart-workload", victim_gpu, victim, WORKLOAD_NS), labels
            record = kube.wait(lambda: _finished(kube, H100, earlier), timeout=600, interval=3,
                               what=f"the quarantine's record on {H100}")
            assert record["state"] == "quarantined" and record["action"] == "quarantine", (
                record, loop["log"].read_text()[-6000:])
            assert [(a["action"], a["result"]) for a in record["attempts"]] == [
                ("node-reboot", "done"), ("quarantine", "done")]
            assert (record["rma"]["uuid"], record["rma"]["serial"], record["rma"]["gpu"]) == (
                uuid, serial, "0"), record["rma"]
            node = kube.get("node", H100)
            assert node["spec"].get("unschedulable") is True
            assert {"key": "gpuops.nvidia/quarantined", "value": "true", "effect": "NoSchedule"} in [
                {k: t.get(k) for k in ("key", "value", "effect")} for t in node["spec"].get("taints", [])]
            assert node["metadata"]["labels"]["gpuops.nvidia/remediation-state"] == "quarantined"
            line = _report(loop, H100, 4)[-1]
            assert (line["state"], line["plan_action"], line["escalated_from"]) == (
                "quarantined", "quarantine", "gpu-reset"), line
            assert line["rma"]["serial"] == serial
            # the L40S: the faulted GPU's pod restarted (its Deployment started a new one), the other
            # pod untouched, the node never out of service, the record and the report say so
            restarted = kube.wait(lambda: _finished(kube, L40S, []), timeout=300, interval=3,
                                  what=f"the restart-workload's record on {L40S}")
            assert restarted["state"] == "remediation-done", (restarted, loop["log"].read_text()[-6000:])
            assert [(a["action"], a["uuid"], a["result"], a["xid"]) for a in restarted["attempts"]] == [
                ("restart-workload", victim_gpu, "done", "13")], restarted
            after = kube.wait(lambda: (p := _workload_pods(kube)) and len(p) == 2 and p, timeout=120,
                              what="the workload's two pods running again")
            assert victim not in after and victim_uid not in [uid for uid, _gpu in after.values()], after
            assert after[bystander][0] == bystander_uid, after
            # (the report's L40S lines before these are the reset's, of the test before)
            assert [(line["state"], line["action"]) for line in _report(loop, L40S, 4)
                    if line["action"] == "restart-workload"] == [
                ("remediation-in-progress", "restart-workload"), ("remediation-done", "restart-workload")]
        assert L40S not in watch.out_total and not kube.get("node", L40S)["spec"].get("unschedulable"), watch.out_total
    finally:
        # a person's part after the RMA: the node's XID goes with the lab's reboot (the alert
        # resolves), the node back in service (a quarantined node is one of the budget's
        # unavailable nodes: the next test's remediation would wait for a slot)
        _podman("exec", H100, "sh", "-c", LAB_BOOT, check=False)
        kube.run("taint", "node", H100, "gpuops.nvidia/quarantined-", check=False)
        kube.run("uncordon", H100, check=False)
        # (and, as a reboot does, the exporter restarted: the last XID it reported goes with it)
        _restart_exporter(kube, H100)


def _restart_exporter(kube, node):
    """The node's exporter pod deleted and its new one Ready: the last XID the old one reported
    goes with it."""
    exporter = ("-n", "gpuops-nvidia", "-l", "app.kubernetes.io/name=dcgm-exporter",
                "--field-selector", "spec.nodeName=" + node)
    kube.run("delete", "pods", *exporter)
    kube.wait(lambda: any(c["type"] == "Ready" and c["status"] == "True" for p in kube.get("pods", *exporter)["items"]
                          for c in p["status"].get("conditions", [])),
              timeout=120, what=f"{node}'s exporter back")


def _workload_gone(kube, faulted):
    """The workload deleted; the GPU its XID was injected on reset (the fake driver keeps an XID
    until then) and the L40S's exporter restarted, and the XID's alert resolved, so the next test
    starts without a firing alert."""
    kube.run("delete", "namespace", WORKLOAD_NS, "--ignore-not-found", "--wait=true", "--timeout=120s", check=False)
    if not faulted:
        return
    _podman("exec", L40S, "fake-nvml-reset", "--gpu", str(faulted[0]), check=False)
    _restart_exporter(kube, L40S)
    kube.wait(lambda: not _query('ALERTS{alertname="GPUXidError",node="%s"}' % L40S), timeout=180, interval=2,
              what=f"{L40S}'s GPUXidError alert to resolve")


def test_a_remediation_that_fails_midway_stays_cordoned_with_its_reason_and_the_next_run_resumes(
        lab_only, nodes_as_they_were, tmp_path):  # pylint: disable=unused-argument
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

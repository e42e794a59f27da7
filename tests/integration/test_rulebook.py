# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's rulebook (extensions/eda/rulebooks/remediate.yml) run by the real
ansible-rulebook (PyPI, on Debian's Java 17), fed by the real Alertmanager (Debian 12's,
tests/lab/runtime-binaries) through its webhook receiver with a bearer token:

- a burst of alerts for one node starts one remediation for it; each node its own; an alert that
  asks for no action, a resolved notification and a payload that is no alert start none;
- Alertmanager repeating the same notification does not start another;
- a request without the token, with another token, or that is no JSON is refused and never
  becomes an event; the token appears in no playbook variable and no log (at -vv either);
- the remediations of different nodes run side by side: one that waits (for a budget slot, say)
  does not hold up another node's.

The playbook the rulebook runs is, here, a recorder (gpuops_eda_playbook names it) that writes the
variables it was given; the lab's tests run the real remediation.
"""
from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
import urllib.error
import urllib.request

import pytest
import yaml

from conftest import BIN, REPO, _env, release  # pylint: disable=import-error

RULEBOOK = os.path.join(REPO, "extensions", "eda", "rulebooks", "remediate.yml")
TOKEN = "gpuops-eda-Tok3n-5b8d0c2e"
MARKER = {"marker": "end-of-test-batch"}


def _port():
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


def _wait_for(what, check, timeout=90):
    """Polls check() until it returns a truthy value (a condition, not a fixed sleep)."""
    deadline = time.monotonic() + timeout
    while True:
        value = check()
        if value:
            return value
        if time.monotonic() > deadline:
            raise AssertionError("timed out waiting for %s" % what)
        time.sleep(0.2)


def _post(url, body, token=None, raw=None):
    data = raw if raw is not None else json.dumps(body).encode()
    request = urllib.request.Request(url, data=data, method="POST", headers={"Content-Type": "application/json"})
    if token:
        request.add_header("Authorization", "Bearer " + token)
    try:
        with urllib.request.urlopen(request, timeout=10) as response:
            return response.status
    except urllib.error.HTTPError as exc:
        return exc.code


def _up(url):
    try:
        with urllib.request.urlopen(url, timeout=2):
            return True
    except urllib.error.HTTPError:
        return True
    except OSError:
        return False


class Rig:
    """Alertmanager and ansible-rulebook, started for the module."""

    def __init__(self, work):
        self.work = work
        self.calls = work / "calls.jsonl"
        self.eda_port, self.am_port = _port(), _port()
        self.eda_url = "http://127.0.0.1:%d/alerts" % self.eda_port
        self.am_url = "http://127.0.0.1:%d" % self.am_port
        recorder = work / "recorder.yml"
        hold = {"name": "Wait, for a node named hold-*, until the test lets it go",
                "ansible.builtin.wait_for": {"path": str(work) + "/release-{{ gpuops_remediation_alert.node }}",
                                             "timeout": 120},
                "when": "gpuops_remediation_alert.node.startswith('hold-')"}
        record = {"name": "Record", "ansible.builtin.lineinfile": {
            "path": str(self.calls), "create": True, "mode": "0644",
            "line": "{{ {'alert': gpuops_remediation_alert, 'report': gpuops_remediation_report, "
                    "'variables': query('ansible.builtin.varnames', '^gpuops_.*')} | to_json }}"}}
        recorder.write_text(yaml.safe_dump([{
            "name": "Record what the rulebook hands over", "hosts": "localhost", "gather_facts": False,
            "tasks": [hold, record]}]))
        (work / "inventory.ini").write_text("localhost ansible_connection=local ansible_python_interpreter=%s\n"
                                            % sys.executable)
        (work / "vars.yml").write_text(yaml.safe_dump({"gpuops_eda_port": self.eda_port, "gpuops_eda_token": TOKEN,
                                                       "gpuops_eda_playbook": str(recorder),
                                                       "gpuops_eda_report": str(work / "report.jsonl")}))
        (work / "alertmanager.yml").write_text(yaml.safe_dump({
            "route": {"receiver": "gpuops", "group_by": ["node"], "group_wait": "1s", "group_interval": "1s",
                      "repeat_interval": "1h"},
            "receivers": [{"name": "gpuops", "webhook_configs": [{
                "url": self.eda_url, "send_resolved": True,
                "http_config": {"authorization": {"credentials": TOKEN}}}]}]}))
        self.eda_log = open(work / "rulebook.log", "w")  # pylint: disable=consider-using-with
        self.am_log = open(work / "alertmanager.log", "w")  # pylint: disable=consider-using-with
        env = _env()
        env.pop("ANSIBLE_STDOUT_CALLBACK")
        self.eda = subprocess.Popen(  # pylint: disable=consider-using-with
            [os.path.join(BIN, "ansible-rulebook"), "-r", RULEBOOK, "-i", str(work / "inventory.ini"),
             "--vars", str(work / "vars.yml"), "-vv"],
            cwd=str(work), env=env, stdout=self.eda_log, stderr=subprocess.STDOUT,
            start_new_session=True)  # (its own process group: ansible-rulebook forks, close() ends them all)
        # Debian's Alertmanager reads its templates from its package's /usr/share/prometheus/alertmanager:
        # in a mount namespace of its own, a tmpfs on /usr/share holds the package's files there
        binary = release("bookworm", "prometheus-alertmanager")
        package = binary + ".deb"
        script = ('mount -t tmpfs gpuops-alertmanager /usr/share && dpkg-deb --fsys-tarfile "$1" | '
                  'tar -x -C / ./usr/share/prometheus && shift && exec "$@"')
        self.am = subprocess.Popen(  # pylint: disable=consider-using-with
            ["unshare", "--mount", "--propagation", "private", "sh", "-c", script, "alertmanager", package,
             binary, "--config.file", str(work / "alertmanager.yml"),
             "--storage.path", str(work / "am-data"), "--web.listen-address", "127.0.0.1:%d" % self.am_port,
             "--cluster.listen-address", ""],
            cwd=str(work), stdout=self.am_log, stderr=subprocess.STDOUT)
        _wait_for("ansible-rulebook's webhook", lambda: self.eda.poll() is not None or _up(self.eda_url))
        assert self.eda.poll() is None, "ansible-rulebook stopped:\n" + self.log()
        _wait_for("Alertmanager", lambda: self.am.poll() is not None or _up(self.am_url + "/-/ready"))
        assert self.am.poll() is None, "Alertmanager stopped:\n" + (work / "alertmanager.log").read_text()

    def log(self):
        self.eda_log.flush()
        return (self.work / "rulebook.log").read_text()

    def started(self):
        """The remediations the rulebook started (its debug log names each action it starts, in
        the order of the events: those of events before a marker are named before the marker's)."""
        return self.log().count("Creating action task action::run_playbook::")

    def recorded(self):
        if not self.calls.exists():
            return []
        return [json.loads(line) for line in self.calls.read_text().splitlines() if line.strip()]

    def settle(self, name):
        """Sends a marker payload (no alert) and waits until the rulebook logged it: the events
        before it were matched (one queue, in order), and every remediation they started is named
        in the log (started())."""
        before = self.log().count("not an Alertmanager alert with node and action labels")
        assert _post(self.eda_url, dict(MARKER, name=name), TOKEN) == 200
        _wait_for("the rulebook to reach the marker %s" % name,
                  lambda: self.log().count("not an Alertmanager alert with node and action labels") > before)

    def close(self):
        for proc in (self.eda, self.am):
            proc.terminate()
            try:
                proc.wait(timeout=20)
            except subprocess.TimeoutExpired:
                proc.kill()
        try:  # (what ansible-rulebook forked: the group is gone once every process of it is)
            os.killpg(self.eda.pid, signal.SIGKILL)
        except ProcessLookupError:
            pass
        self.eda_log.close()
        self.am_log.close()


@pytest.fixture(scope="module")
def rig(tmp_path_factory):
    if subprocess.run(["java", "-version"], capture_output=True, check=False).returncode != 0:
        pytest.fail("ansible-rulebook needs a Java 17 runtime: apt install openjdk-17-jre-headless (make test's apt does)")
    running = Rig(tmp_path_factory.mktemp("rulebook"))
    yield running
    running.close()


def _alert(node, gpu, alertname, finding, action, **extra):
    labels = {"alertname": alertname, "node": node, "Hostname": node, "gpu": str(gpu),
              "UUID": "GPU-%s-%d" % (node, gpu), "finding": finding, "action": action,
              "severity": "warning" if action == "none" else "critical"}
    labels.update(extra)
    return {"labels": labels, "annotations": {"summary": finding}, "generatorURL": "http://prometheus.example/graph"}


def test_a_burst_from_alertmanager_starts_one_remediation_per_node(rig):
    burst = [_alert("gpu-node-1", 0, "GPUXidError", "ecc_uncorrectable", "gpu-reset", xid="48"),
             _alert("gpu-node-1", 1, "GPUXidError", "gpu_lost", "node-reboot", xid="79"),
             _alert("gpu-node-1", 2, "GPUUncorrectableECC", "ecc_uncorrectable", "gpu-reset"),
             _alert("gpu-node-2", 0, "GPURowRemapFailure", "row_remap_failure", "quarantine"),
             _alert("gpu-node-3", 0, "GPUPCIeLinkDegraded", "pcie_link_degraded", "none")]
    assert _post(rig.am_url + "/api/v2/alerts", burst) == 200
    _wait_for("the remediations of gpu-node-1 and gpu-node-2",
              lambda: {call["alert"]["node"] for call in rig.recorded()} >= {"gpu-node-1", "gpu-node-2"})
    _wait_for("the alert of gpu-node-3 to be ignored",
              lambda: "ignored: firing GPUPCIeLinkDegraded on gpu-node-3" in rig.log())
    rig.settle("after the burst")
    calls = rig.recorded()
    assert sorted(call["alert"]["node"] for call in calls) == ["gpu-node-1", "gpu-node-2"], calls
    node2 = [call["alert"] for call in calls if call["alert"]["node"] == "gpu-node-2"][0]
    assert (node2["finding"], node2["action"]) == ("row_remap_failure", "quarantine")
    assert node2["labels"]["UUID"] == "GPU-gpu-node-2-0" and node2["labels"]["alertname"] == "GPURowRemapFailure"
    # Alertmanager's own fingerprint and start time, so the playbook can tell a repeat from a new failure
    assert len(node2["fingerprint"]) == 16 and node2["starts_at"].startswith("20")
    assert {call["report"] for call in calls} == {str(rig.work / "report.jsonl")}
    node1 = [call["alert"] for call in calls if call["alert"]["node"] == "gpu-node-1"][0]
    assert node1["labels"]["gpu"] in ("0", "1", "2")


def test_alertmanager_repeating_a_notification_starts_nothing_more(rig):
    before = len(rig.recorded())
    repeat = {"receiver": "gpuops", "status": "firing", "groupKey": "{}:{node=\"gpu-node-1\"}",
              "alerts": [dict(_alert("gpu-node-1", 0, "GPUXidError", "ecc_uncorrectable", "gpu-reset", xid="48"),
                              status="firing", startsAt="2026-12-05T10:00:00Z", fingerprint="a1b2c3d4e5f60718")]}
    started = rig.started()
    for _repeat in range(5):
        assert _post(rig.eda_url, repeat, TOKEN) == 200
    rig.settle("after the repeats")
    assert rig.started() == started and len(rig.recorded()) == before


def test_resolved_notifications_start_nothing(rig):
    before, started = len(rig.recorded()), rig.started()
    resolved = {"receiver": "gpuops", "status": "resolved", "groupKey": "g",
                "alerts": [dict(_alert("gpu-node-9", 0, "GPUXidError", "gpu_lost", "node-reboot", xid="79"),
                                status="resolved", startsAt="2026-12-05T10:00:00Z", fingerprint="0011223344556677")]}
    assert _post(rig.eda_url, resolved, TOKEN) == 200
    rig.settle("after the resolved one")
    assert "ignored: resolved GPUXidError on gpu-node-9" in rig.log()
    assert rig.started() == started and len(rig.recorded()) == before


@pytest.mark.parametrize("token, raw, status", [
    (None, None, 401),                       # unsigned: no bearer token
    ("not-the-token", None, 401),
    (TOKEN, b"{not json", 400),
])
def test_requests_without_the_token_or_not_json_are_refused(rig, token, raw, status):
    before, started = len(rig.recorded()), rig.started()
    firing = {"receiver": "gpuops", "status": "firing",
              "alerts": [dict(_alert("gpu-node-7", 0, "GPUXidError", "gpu_lost", "node-reboot", xid="79"),
                              status="firing", startsAt="2026-12-05T10:00:00Z", fingerprint="7766554433221100")]}
    assert _post(rig.eda_url, firing, token, raw) == status
    rig.settle("after a refused request")
    assert rig.started() == started and len(rig.recorded()) == before
    assert "gpu-node-7" not in rig.log()


def test_a_remediation_that_waits_does_not_hold_up_another_nodes(rig):
    def firing(node, fingerprint):
        return {"receiver": "gpuops", "status": "firing", "alerts": [dict(
            _alert(node, 0, "GPUXidError", "ecc_uncorrectable", "gpu-reset", xid="48"),
            status="firing", startsAt="2026-12-05T11:00:00Z", fingerprint=fingerprint)]}
    assert _post(rig.eda_url, firing("hold-node-1", "1111111111111111"), TOKEN) == 200
    rig.settle("after the held node's alert")
    assert _post(rig.eda_url, firing("gpu-node-4", "4444444444444444"), TOKEN) == 200
    # the second node's remediation is done while the first one's still waits
    _wait_for("gpu-node-4's remediation", lambda: "gpu-node-4" in {c["alert"]["node"] for c in rig.recorded()})
    assert "hold-node-1" not in {c["alert"]["node"] for c in rig.recorded()}
    (rig.work / "release-hold-node-1").write_text("")
    _wait_for("hold-node-1's remediation", lambda: "hold-node-1" in {c["alert"]["node"] for c in rig.recorded()})


def test_the_token_is_in_no_playbook_variable_and_no_log(rig):
    rig.settle("before reading the logs")
    assert rig.recorded(), "no remediation was recorded"
    for call in rig.recorded():
        assert TOKEN not in json.dumps(call)
        assert "gpuops_eda_token" not in call["variables"], call["variables"]
    assert TOKEN not in rig.log()
    assert TOKEN not in (rig.work / "alertmanager.log").read_text()

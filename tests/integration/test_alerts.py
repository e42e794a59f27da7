# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The alert rules the collection ships (role alerts, stage 8b of site.yml, tag alerts), checked by
Prometheus' own promtool (Debian 12's, the lab Prometheus' release; tests/lab/runtime-binaries):

- render mode writes a PrometheusRule and a plain rule file, contacting no node and no cluster;
  `promtool check rules` accepts both and they hold the same groups;
- `promtool test rules` runs the hand-written unit tests in alerts/gpu-health.test.yml against the
  rendered file: series as dcgm-exporter labels them in, the alerts with every label out;
- a plain rule file installed on a host is checked by promtool before it replaces the old one,
  which is backed up; a file promtool refuses leaves the old one in place;
- bad input is refused before anything is written.
"""
from __future__ import annotations

import json
import os
import shutil
import subprocess

import pytest
import yaml

from conftest import BIN, REPO, _env, release  # pylint: disable=import-error
from test_render_mode import _render  # pylint: disable=import-error

HERE = os.path.dirname(os.path.abspath(__file__))
RULE_FILE = os.path.join("prometheus", "gpuops-nvidia-gpu-health.rules.yml")
PROMETHEUS_RULE = "60-prometheusrule-gpuops-nvidia-gpuops-nvidia-gpu-health.yaml"
# the rules that read a field dcgm-exporter's default counters leave out
NOT_DEFAULT = {"GPUUncorrectableECC": "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",
               "GPURowRemapPending": "DCGM_FI_DEV_ROW_REMAP_PENDING",
               "GPUPCIeLinkDegraded": "DCGM_FI_DEV_PCIE_LINK_WIDTH, DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH",
               "GPUClocksSlowdown": "DCGM_FI_DEV_CLOCKS_EVENT_REASONS"}
ALL_FIELDS = ["DCGM_FI_DEV_ECC_DBE_VOL_TOTAL, gauge, DBE volatile", "DCGM_FI_DEV_ROW_REMAP_PENDING, gauge, pending",
              "DCGM_FI_DEV_PCIE_LINK_WIDTH, gauge, width", "DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH, gauge, max width",
              "DCGM_FI_DEV_CLOCKS_EVENT_REASONS, gauge, reasons"]


def promtool(*args, cwd=None):
    return subprocess.run([release("bookworm", "promtool")] + list(args), cwd=cwd, capture_output=True,
                          text=True, timeout=120, check=False)


@pytest.fixture(scope="module")
def rendered(tmp_path_factory):
    work = tmp_path_factory.mktemp("alerts")
    run = _render(work, "alerts", {}, tags="alerts")
    assert run.rc == 0, run.summary()
    return run


def test_render_writes_a_prometheus_rule_and_a_rule_file_contacting_nothing(rendered):
    assert rendered.podman_calls == ""
    assert not [task for task, _host, _result in rendered.results() if "kubernetes.core" in task]
    assert sorted(os.listdir(rendered.dir)) == [PROMETHEUS_RULE, "prometheus"]
    assert os.listdir(os.path.join(rendered.dir, "prometheus")) == [os.path.basename(RULE_FILE)]
    with open(os.path.join(rendered.dir, PROMETHEUS_RULE)) as handle:
        rule = yaml.safe_load(handle)
    assert (rule["apiVersion"], rule["kind"]) == ("monitoring.coreos.com/v1", "PrometheusRule")
    assert rule["metadata"]["namespace"] == "gpuops-nvidia"


def test_promtool_accepts_both_and_they_hold_the_same_rules(rendered, tmp_path):
    plain = os.path.join(rendered.dir, RULE_FILE)
    checked = promtool("check", "rules", plain)
    assert checked.returncode == 0, checked.stdout + checked.stderr
    assert "SUCCESS: 25 rules found" in checked.stdout
    with open(os.path.join(rendered.dir, PROMETHEUS_RULE)) as handle:
        spec = yaml.safe_load(handle)["spec"]
    with open(plain) as handle:
        assert yaml.safe_load(handle) == {"groups": spec["groups"]}
    from_crd = tmp_path / "from-prometheusrule.yml"
    from_crd.write_text(yaml.safe_dump({"groups": spec["groups"]}))
    checked = promtool("check", "rules", str(from_crd))
    assert checked.returncode == 0, checked.stdout + checked.stderr


def test_every_alert_carries_the_labels_receivers_route_on(rendered):
    with open(os.path.join(rendered.dir, RULE_FILE)) as handle:
        rules = yaml.safe_load(handle)["groups"][0]["rules"]
    actions = {"none", "restart-workload", "gpu-reset", "node-reboot", "quarantine"}
    for rule in rules:
        labels = rule["labels"]
        assert labels["action"] in actions, rule
        assert labels["severity"] == ("warning" if labels["action"] == "none" else "critical"), rule
        assert labels["finding"], rule
        # the node from the exporter's Hostname; gpu and UUID kept from its series
        assert rule["expr"].startswith("label_replace(") and '"node", "$1", "Hostname"' in rule["expr"], rule
        assert "{{" not in json.dumps(rule), "a rule holds template syntax: %s" % rule
    xids = {int(rule["labels"]["xid"]): rule["labels"]["action"] for rule in rules if rule["alert"] == "GPUXidError"}
    # NVIDIA's XID catalogue: 79 (fallen off the bus) a node reboot, 95 (uncontained ECC) a GPU
    # reset, 13 and 31 the application's, 64 (row remap failure) an RMA
    assert {79: "node-reboot", 95: "gpu-reset", 13: "restart-workload", 31: "restart-workload",
            64: "quarantine"}.items() <= xids.items()


def test_promtool_unit_tests_series_in_alerts_out(rendered, tmp_path):
    shutil.copy(os.path.join(rendered.dir, RULE_FILE), tmp_path)
    shutil.copy(os.path.join(HERE, "alerts", "gpu-health.test.yml"), tmp_path)
    tested = promtool("test", "rules", "gpu-health.test.yml", cwd=str(tmp_path))
    assert tested.returncode == 0, tested.stdout + tested.stderr
    assert "SUCCESS" in tested.stdout


def test_the_rules_default_counters_cannot_feed_are_named(rendered, tmp_path):
    messages = [result.get("msg", "") for task, _host, result in rendered.results()
                if task.endswith("Say which rules cannot fire with the exporter's counters")]
    assert len(messages) == 1 and messages[0], messages
    for alert, fields in NOT_DEFAULT.items():
        assert "%s needs %s" % (alert, fields) in messages[0]
    assert "GPUXidError" not in messages[0] and "dcgm_exporter_extra_metrics" in messages[0]
    full = _render(tmp_path, "all-fields", {"dcgm_exporter_extra_metrics": ALL_FIELDS}, tags="alerts")
    assert full.rc == 0, full.summary()
    assert [result for task, _host, result in full.results()
            if task.endswith("Say which rules cannot fire with the exporter's counters") and not result.get("skipped")] == []


@pytest.mark.parametrize("extra, named", [
    ({"alerts_interval": "soon"}, "alerts_interval must be a Prometheus duration such as 30s or 1m, not \"soon\""),
    ({"alerts_rule_file": "rules/gpu.yml"}, "alerts_rule_file must be an absolute path to a file"),
    ({"alerts_namespace": "GPU Ops"}, "alerts_namespace"),
])
def test_bad_input_is_refused_before_anything_is_written(tmp_path, extra, named):
    run = _render(tmp_path, "bad", extra, tags="alerts")
    assert run.rc != 0
    assert named in run.failures()
    assert not os.path.exists(run.dir) or os.listdir(run.dir) == []


def _install(tmp_path, rule_file, promtool_path):
    """The alerts role on the controller with a plain rule file and no PrometheusRule."""
    playbook = tmp_path / "install.yml"
    playbook.write_text(yaml.safe_dump([{
        "name": "Install the alert rules as a plain rule file", "hosts": "localhost", "gather_facts": False,
        "roles": [{"role": "gpuops.nvidia.alerts", "alerts_prometheus_rule": "false", "alerts_rule_file": rule_file,
                   "alerts_rule_file_host": "localhost", "alerts_promtool": promtool_path}]}]))
    proc = subprocess.run([os.path.join(BIN, "ansible-playbook"), str(playbook)], cwd=REPO, env=_env(),
                          capture_output=True, text=True, timeout=300, check=False)
    return proc, json.loads(proc.stdout) if proc.stdout.startswith("{") else None


def test_a_rule_file_is_checked_by_promtool_before_it_replaces_the_old_one(tmp_path):
    rules_dir = tmp_path / "etc-prometheus-rules"
    rules_dir.mkdir()
    target = rules_dir / "gpuops-nvidia.yml"
    old = "groups:\n- name: by-hand\n  rules: []\n"
    target.write_text(old)
    # a promtool that refuses every file: the old file stays as it was
    refusing = tmp_path / "refusing-promtool"
    refusing.write_text("#!/bin/sh\necho \"refused: $*\" >&2\nexit 1\n")
    refusing.chmod(0o755)
    proc, _out = _install(tmp_path, str(target), str(refusing))
    assert proc.returncode != 0, proc.stdout[-3000:]
    assert "failed to validate" in proc.stdout
    assert target.read_text() == old
    # the real promtool: the file is replaced, the old one backed up, and promtool reads the new one
    proc, out = _install(tmp_path, str(target), release("bookworm", "promtool"))
    assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-2000:]
    assert out["stats"]["localhost"]["changed"] == 1
    # (ansible's copy backs the old file up before it validates the new one: each try left one)
    backups = [name for name in os.listdir(rules_dir) if name != target.name]
    assert backups and all((rules_dir / name).read_text() == old for name in backups), backups
    checked = promtool("check", "rules", str(target))
    assert checked.returncode == 0 and "SUCCESS: 25 rules found" in checked.stdout, checked.stdout + checked.stderr
    # converged: nothing changes
    proc, out = _install(tmp_path, str(target), release("bookworm", "promtool"))
    assert proc.returncode == 0 and out["stats"]["localhost"]["changed"] == 0, proc.stdout[-3000:]

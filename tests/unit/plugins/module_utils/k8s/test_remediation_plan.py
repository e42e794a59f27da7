# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import json

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils.k8s import remediation_plan as rp

NOW = "2026-12-05T12:00:00Z"
UUID = "GPU-1b0c6e5a-0000-4000-8000-000000000001"
INVENTORY = {"schema": "gpuops.nvidia/gpu-inventory/v2",
             "gpus": [{"index": 0, "uuid": UUID, "serial": "1654922001234"},
                      {"index": 1, "uuid": "GPU-other", "serial": "1654922005678"}]}


def alert(action="gpu-reset", finding="xid", fingerprint="f1", starts_at="2026-12-05T11:58:00.123456789Z", **labels):
    return {"node": "gpu-node-1", "finding": finding, "action": action, "fingerprint": fingerprint,
            "starts_at": starts_at, "labels": dict({"gpu": "0", "UUID": UUID, "node": "gpu-node-1"}, **labels)}


def node(record=None, unschedulable=False, labels=None, annotations=None):
    meta = {"name": "gpu-node-1", "labels": dict(labels or {}), "annotations": dict(annotations or {})}
    if record is not None:
        meta["annotations"][rp.RECORD_ANNOTATION] = json.dumps(record)
    return {"metadata": meta, "spec": {"unschedulable": unschedulable} if unschedulable else {}}


def attempt(action, at, uuid=UUID, result="done", fingerprint="old", starts_at="2026-12-05T09:00:00Z"):
    return {"at": at, "uuid": uuid, "gpu": "0", "finding": "xid", "action": action, "fingerprint": fingerprint,
            "starts_at": starts_at, "result": result}


@pytest.mark.parametrize("action", ["restart-workload", "gpu-reset", "node-reboot"])
def test_a_first_alert_takes_its_own_action(action):
    result = rp.plan(alert(action), node(), INVENTORY, now=NOW)
    assert (result["action"], result["escalated_from"], result["state"]) == (action, None, "remediation-required")
    assert result["steps"] == rp.STEPS[action]
    assert result["reason"] == "xid on GPU 0 (%s)" % UUID


@pytest.mark.parametrize("before, expected", [
    (["gpu-reset"], "node-reboot"),
    (["gpu-reset", "node-reboot"], "quarantine"),
    (["node-reboot"], "quarantine"),
    (["quarantine"], "quarantine"),
])
def test_the_same_gpu_failing_again_within_the_window_escalates(before, expected):
    record = {"state": "remediation-done",
              "attempts": [attempt(a, "2026-12-05T%02d:00:00Z" % (8 + n), fingerprint="old%d" % n)
                           for n, a in enumerate(before)]}
    result = rp.plan(alert("gpu-reset"), node(record), INVENTORY, now=NOW)
    assert (result["action"], result["escalated_from"]) == (expected, "gpu-reset")
    assert result["attempts_within_window"] == len(before)


def test_attempts_outside_the_window_or_on_another_gpu_do_not_escalate():
    record = {"attempts": [attempt("gpu-reset", "2026-12-03T11:00:00Z"),            # two days ago
                           attempt("node-reboot", "2026-12-05T11:00:00Z", uuid="GPU-other")]}
    result = rp.plan(alert("gpu-reset"), node(record), INVENTORY, now=NOW)
    assert (result["action"], result["escalated_from"]) == ("gpu-reset", None)
    narrow = rp.plan(alert("gpu-reset"), node({"attempts": [attempt("gpu-reset", "2026-12-05T11:00:00Z")]}),
                     INVENTORY, policy={"window_s": 1800}, now=NOW)
    assert narrow["action"] == "gpu-reset"


def test_the_application_restart_does_not_escalate():
    record = {"attempts": [attempt("restart-workload", "2026-12-05T11:%02d:00Z" % n, fingerprint="o%d" % n)
                           for n in range(5)]}
    assert rp.plan(alert("restart-workload"), node(record), INVENTORY, now=NOW)["action"] == "restart-workload"


def test_the_restarted_pod_inheriting_the_held_xid_is_no_new_fault():
    """DCGM_FI_DEV_XID_ERRORS holds the last XID until the GPU is reset: after a restart-workload for
    XID 13, the restarted pod's series (a new alert, begun after the restart) reports XID 13 too."""
    first = rp.plan(alert("restart-workload", starts_at="2026-12-05T10:58:00Z", xid="13", pod="train-0"),
                    node(), INVENTORY, now="2026-12-05T11:00:00Z")
    assert first["action"] == "restart-workload" and first["xid"] == "13"
    record = rp.record(node(), dict(first, started_at="2026-12-05T11:00:00Z"), alert("restart-workload"),
                       "remediation-done", "done", "2026-12-05T11:00:05Z")
    assert record["attempts"][-1]["xid"] == "13"
    inherited = alert("restart-workload", fingerprint="f2", starts_at="2026-12-05T11:01:00Z", xid="13", pod="train-1")
    result = rp.plan(inherited, node(record), INVENTORY, now=NOW)
    assert result["action"] == "none" and result["state"] == "remediation-done"
    assert "still reports XID 13, for which its workload was restarted at 2026-12-05T11:00:00Z" in result["reason"]
    # another XID, another GPU, or an alert that began before the restart: a fault of its own
    for other in (alert("restart-workload", fingerprint="f3", starts_at="2026-12-05T11:01:00Z", xid="31"),
                  alert("restart-workload", fingerprint="f4", starts_at="2026-12-05T11:01:00Z", xid="13",
                        UUID="GPU-other", gpu="1"),
                  alert("restart-workload", fingerprint="f5", starts_at="2026-12-05T10:59:00Z", xid="13")):
        assert rp.plan(other, node(record), INVENTORY, now=NOW)["action"] == "restart-workload", other
    # a GPU reset since clears the XID: XID 13 again is a new fault
    record["attempts"].append(dict(attempt("gpu-reset", "2026-12-05T11:10:00Z"), xid="95"))
    again = alert("restart-workload", fingerprint="f6", starts_at="2026-12-05T11:20:00Z", xid="13")
    assert rp.plan(again, node(record), INVENTORY, now=NOW)["action"] == "restart-workload"


def test_quarantine_opens_an_rma_record_with_the_serial():
    result = rp.plan(alert("quarantine", finding="row_remap_failure"), node(), INVENTORY, now=NOW)
    assert result["action"] == "quarantine"
    assert result["rma"] == {"node": "gpu-node-1", "gpu": "0", "uuid": UUID, "serial": "1654922001234",
                             "finding": "row_remap_failure", "at": "2026-12-05T12:00:00Z", "attempts": 0}
    assert "  RMA: GPU 0, UUID %s, serial 1654922001234" % UUID in rp.lines(result)


def test_quarantine_without_an_inventory_record_says_how_to_get_the_serial():
    result = rp.plan(alert("quarantine", finding="row_remap_failure"), node(), None, now=NOW)
    assert result["action"] == "quarantine" and result["rma"]["serial"] is None
    assert "run the gpu_report role on the node" in result["rma"]["note"]


def test_the_same_notification_again_is_a_duplicate():
    handled = attempt("gpu-reset", "2026-12-05T11:59:00Z", fingerprint="f1", starts_at="2026-12-05T11:58:00.123456789Z")
    result = rp.plan(alert("gpu-reset"), node({"state": "remediation-done", "attempts": [handled]}), INVENTORY, now=NOW)
    assert result["action"] == "none"
    assert result["reason"] == ("this alert (fingerprint f1, firing since 2026-12-05T11:58:00.123456789Z) was "
                                "handled at 2026-12-05T11:59:00Z: nothing to do")


def test_a_retry_after_a_failure_resumes_with_the_same_action():
    failed = attempt("gpu-reset", "2026-12-05T11:59:00Z", result="failed", fingerprint="f1",
                     starts_at="2026-12-05T11:58:00.123456789Z")
    result = rp.plan(alert("gpu-reset"), node({"state": "remediation-failed", "attempts": [failed]},
                                              unschedulable=True), INVENTORY, now=NOW)
    assert (result["action"], result["escalated_from"]) == ("gpu-reset", None)


@pytest.mark.parametrize("the_node, reason", [
    (node(labels={"nvidia.com/gpu-driver-upgrade.skip": "true"}),
     "gpu-node-1 is labelled nvidia.com/gpu-driver-upgrade.skip=true: left alone"),
    (node(unschedulable=True),
     "gpu-node-1 was cordoned by someone else (no maintenance of this collection is on it): left alone"),
    (node({"state": "quarantined", "reason": "row_remap_failure on GPU 0"}, unschedulable=True),
     "gpu-node-1 is quarantined (row_remap_failure on GPU 0): a person brings it back"),
])
def test_nodes_that_are_not_the_collections_to_touch(the_node, reason):
    result = rp.plan(alert("node-reboot"), the_node, INVENTORY, now=NOW)
    assert (result["action"], result["reason"], result["steps"]) == ("none", reason, [])


def test_a_node_in_an_upgrade_of_this_collection_waits_for_it():
    busy = node(unschedulable=True, annotations={"gpuops.nvidia/maintenance": "driver"},
                labels={"nvidia.com/gpu-driver-upgrade-state": "drain-required"})
    result = rp.plan(alert("gpu-reset"), busy, INVENTORY, now=NOW)
    assert (result["action"], result["state"], result["wanted"]) == ("none", "remediation-waiting", "gpu-reset")
    assert result["reason"] == ("gpu-node-1 is in a driver maintenance (drain-required): the remediation waits until "
                                "it is done; the alert, still firing, brings it back")
    mine = node(unschedulable=True, annotations={"gpuops.nvidia/maintenance": "remediation"},
                record={"state": "remediation-failed", "attempts": []})
    assert rp.plan(alert("gpu-reset"), mine, INVENTORY, now=NOW)["action"] == "gpu-reset"


def test_the_policy_caps_the_action():
    result = rp.plan(alert("node-reboot"), node(), INVENTORY, policy={"max_action": "gpu-reset"}, now=NOW)
    assert (result["action"], result["wanted"]) == ("none", "node-reboot")
    assert "above the policy's max_action gpu-reset" in result["reason"]


def test_an_alert_for_no_action_plans_nothing():
    assert rp.plan(alert("none", finding="pcie_link_degraded"), node(), INVENTORY, now=NOW)["action"] == "none"


@pytest.mark.parametrize("bad, message", [
    ("not a dict", "gpuops_remediation_alert must be a dict"),
    ({"finding": "xid", "action": "gpu-reset"}, "gpuops_remediation_alert.node is missing"),
    ({"node": "n", "finding": "xid", "action": "reboot-everything"},
     "gpuops_remediation_alert.action is 'reboot-everything'; it must be one of none, restart-workload, gpu-reset, "
     "node-reboot, quarantine"),
    ({"node": "n", "finding": "xid", "action": "gpu-reset", "starts_at": "yesterday"},
     "gpuops_remediation_alert.starts_at is 'yesterday', not an RFC 3339 time"),
])
def test_bad_alerts_are_refused_naming_the_problem(bad, message):
    with pytest.raises(rp.PlanError, match=message.replace("(", r"\(").replace(")", r"\)")):
        rp.plan(bad, node(), INVENTORY, now=NOW)


def test_an_unknown_node_is_refused():
    with pytest.raises(rp.PlanError, match="the alert names node gpu-node-1, which the cluster does not have"):
        rp.plan(alert(), None, INVENTORY, now=NOW)


def test_the_record_keeps_the_newest_attempts_and_replaces_this_ones():
    the_alert = alert()
    result = rp.plan(the_alert, node(), INVENTORY, now=NOW)
    result["started_at"] = NOW
    first = rp.record(node(), result, the_alert, "remediation-in-progress", "in-progress", NOW)
    assert first["attempts"] == [{"at": NOW, "uuid": UUID, "gpu": "0", "finding": "xid", "action": "gpu-reset",
                                  "fingerprint": "f1", "starts_at": "2026-12-05T11:58:00.123456789Z",
                                  "result": "in-progress"}]
    second = rp.record(node(first), result, the_alert, "remediation-done", "done", "2026-12-05T12:05:00Z")
    assert [a["result"] for a in second["attempts"]] == ["done"]
    assert (second["state"], second["at"]) == ("remediation-done", "2026-12-05T12:05:00Z")
    many = {"attempts": [attempt("gpu-reset", "2026-11-01T00:00:%02dZ" % n, fingerprint="x%d" % n) for n in range(30)]}
    assert len(rp.record(node(many), result, the_alert, "remediation-done", "done", NOW)["attempts"]) == rp.MAX_ATTEMPTS


def test_an_unreadable_record_counts_as_none():
    broken = node(annotations={rp.RECORD_ANNOTATION: "{not json"})
    assert rp.record_of(broken) == {"attempts": []}
    assert rp.plan(alert(), broken, INVENTORY, now=NOW)["action"] == "gpu-reset"


def test_parse_time_reads_alertmanagers_nanoseconds():
    assert rp.parse_time("2026-12-05T11:58:00.123456789Z").isoformat() == "2026-12-05T11:58:00.123456+00:00"
    assert rp.parse_time("2026-12-05T11:58:00+01:00").isoformat() == "2026-12-05T11:58:00+01:00"
    assert rp.parse_time("soon") is None


def test_an_alertmanager_alert_as_it_is_takes_the_playbooks_shape():
    raw = {"status": "firing", "labels": {"node": "gpu-node-1", "finding": "gpu_lost", "action": "node-reboot",
                                          "gpu": "1", "UUID": UUID, "xid": "79"},
           "startsAt": "2026-12-05T11:58:00Z", "fingerprint": "0123456789abcdef"}
    assert rp.alert_of(raw) == {"node": "gpu-node-1", "finding": "gpu_lost", "action": "node-reboot",
                                "labels": raw["labels"], "starts_at": "2026-12-05T11:58:00Z",
                                "fingerprint": "0123456789abcdef"}
    assert rp.alert_of(alert()) == alert()
    assert rp.alert_of("text") == "text"


def test_a_remediation_in_progress_is_waited_for_unless_it_is_stale():
    running = {"state": "remediation-in-progress", "at": "2026-12-05T11:50:00Z", "action": "gpu-reset",
               "attempts": [attempt("gpu-reset", "2026-12-05T11:50:00Z", result="in-progress", fingerprint="other")]}
    result = rp.plan(alert("node-reboot", fingerprint="f2"), node(running, unschedulable=True), INVENTORY, now=NOW)
    assert (result["action"], result["state"], result["wanted"]) == ("none", "remediation-waiting", "node-reboot")
    assert result["reason"].startswith("another remediation of gpu-node-1 is in progress since 2026-12-05T11:50:00Z")
    stale = dict(running, at="2026-12-05T09:00:00Z")
    assert rp.plan(alert("node-reboot", fingerprint="f2"), node(stale, unschedulable=True), INVENTORY,
                   now=NOW)["action"] != "none"


def test_an_attempt_left_in_progress_by_a_run_that_died_is_resumed():
    died = {"state": "remediation-in-progress", "at": "2026-12-05T09:00:00Z", "action": "gpu-reset",
            "attempts": [attempt("gpu-reset", "2026-12-05T09:00:00Z", result="in-progress", fingerprint="f1",
                                 starts_at="2026-12-05T11:58:00.123456789Z")]}
    result = rp.plan(alert("gpu-reset"), node(died, unschedulable=True), INVENTORY, now=NOW)
    assert (result["action"], result["escalated_from"]) == ("gpu-reset", None)
    running = dict(died, at="2026-12-05T11:59:00Z")
    assert rp.plan(alert("gpu-reset"), node(running, unschedulable=True), INVENTORY, now=NOW)["action"] == "none"


def test_failed_attempts_and_remediations_after_the_alert_began_do_not_escalate():
    record = {"state": "remediation-done",
              "attempts": [attempt("gpu-reset", "2026-12-05T10:00:00Z", result="failed", fingerprint="a"),
                           attempt("gpu-reset", "2026-12-05T11:59:00Z", fingerprint="b")]}
    result = rp.plan(alert("gpu-reset", starts_at="2026-12-05T11:58:00Z"), node(record), INVENTORY, now=NOW)
    assert (result["action"], result["escalated_from"]) == ("gpu-reset", None)


def test_a_milder_alert_resumes_the_failed_remediation_of_a_cordoned_node():
    failed = {"state": "remediation-failed", "action": "gpu-reset", "reason": "GPU could not be reset",
              "attempts": [attempt("gpu-reset", "2026-12-05T11:00:00Z", result="failed", fingerprint="a")]}
    result = rp.plan(alert("restart-workload", fingerprint="b"), node(failed, unschedulable=True), INVENTORY, now=NOW)
    assert (result["action"], result["resumes"]) == ("gpu-reset", "gpu-reset")
    assert "resumes the failed gpu-reset of the node (GPU could not be reset)" in result["reason"]

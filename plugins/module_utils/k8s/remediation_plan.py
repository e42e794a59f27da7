# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What to do about a GPU alert on a node: a pure planner, from the alert (the collection's alert
rules label it with node, GPU, finding and action class; module_utils/report/alerts.py), the node
as the API server has it (its remediation record, cordon and labels), the GPU inventory record
gpu_report keeps on the node (the serial an RMA needs) and the policy.

The plan's action is one of health.ACTIONS:

* ``none`` - nothing (the alert asks for nothing, it was handled already, or the node is not the
  collection's to touch: an admin cordoned it, or it carries the skip label);
* ``restart-workload`` - the pods that use the node's GPUs are deleted (their controllers start
  them again); the node stays in service;
* ``gpu-reset`` - the node goes through the maintenance engine (cordon, GPU pods out, drain with
  PodDisruptionBudgets respected), the GPU is reset once no process holds it, the node is
  validated and uncordoned;
* ``node-reboot`` - the same, with a reboot of the node in place of the reset;
* ``quarantine`` - the node is cordoned, tainted and drained, and stays so; an RMA record names the
  GPU's serial.

The same GPU failing again within the policy's window escalates: a GPU reset becomes a node
reboot, a reboot a quarantine (restart-workload is the application's and does not escalate).

The node's remediation record (annotation ``gpuops.nvidia/remediation``, JSON) keeps the state and
the newest attempts: {"state", "reason", "action", "finding", "gpu", "at", "attempts": [{"at",
"uuid", "gpu", "finding", "action", "fingerprint", "starts_at", "result"}]}."""

from __future__ import annotations

__metaclass__ = type

import datetime
import json

from ansible_collections.gpuops.nvidia.plugins.module_utils.k8s import upgrade_plan
from ansible_collections.gpuops.nvidia.plugins.module_utils.report import health

RECORD_ANNOTATION = "gpuops.nvidia/remediation"
STATE_LABEL = "gpuops.nvidia/remediation-state"
QUARANTINE_TAINT = {"key": "gpuops.nvidia/quarantined", "value": "true", "effect": "NoSchedule"}
# the escalation ladder of the same GPU failing again within the window
LADDER = ("gpu-reset", "node-reboot", "quarantine")
MAX_ATTEMPTS = 20
# the states a node's record (and label) takes
STATES = ("remediation-required", "remediation-waiting", "remediation-in-progress", "remediation-done",
          "remediation-failed", "quarantined", "ignored")
DEFAULT_POLICY = {"window_s": 86400, "max_action": "quarantine", "escalate": True}
# a remediation of the node in progress for less than this is waited for (an older one is taken as
# a run that died, and this one goes on: the engine resumes the node from its labels)
IN_PROGRESS_S = 3600
# what each action does, for the plan's lines (the engine's states say where a node is)
STEPS = {
    "none": [],
    "restart-workload": ["delete the pods that use the node's GPUs (their controllers start them again)"],
    "gpu-reset": ["wait for a free maintenance slot (max_unavailable across upgrades, switches and remediations)",
                  "cordon the node", "delete the pods that use its GPUs", "drain it (PodDisruptionBudgets respected)",
                  "reset the GPU once no process holds it", "restart the operands and validate the node",
                  "uncordon it"],
    "node-reboot": ["wait for a free maintenance slot (max_unavailable across upgrades, switches and remediations)",
                    "cordon the node", "delete the pods that use its GPUs", "drain it (PodDisruptionBudgets respected)",
                    "reboot it", "restart the operands and validate the node", "uncordon it"],
    "quarantine": ["cordon the node and taint it %s=%s:%s" % (QUARANTINE_TAINT["key"], QUARANTINE_TAINT["value"],
                                                              QUARANTINE_TAINT["effect"]),
                   "delete the pods that use its GPUs and drain it", "open an RMA record with the GPU's serial",
                   "leave it cordoned for a person"],
}


class PlanError(ValueError):
    """The alert cannot be planned for; the message names what and how to fix it."""


def parse_time(text) -> datetime.datetime | None:
    """An RFC 3339 time (Alertmanager's startsAt, the record's at) as an aware datetime, or None."""
    if not text or not isinstance(text, str):
        return None
    value = text.strip().replace("Z", "+00:00")
    # Alertmanager writes nanoseconds; Python reads microseconds at most
    if "." in value:
        head, _dot, tail = value.partition(".")
        digits = "".join(ch for ch in tail if ch.isdigit())
        zone = tail[len(digits):]
        value = "%s.%s%s" % (head, (digits + "000000")[:6], zone)
    try:
        parsed = datetime.datetime.fromisoformat(value)
    except ValueError:
        return None
    return parsed if parsed.tzinfo else parsed.replace(tzinfo=datetime.timezone.utc)


def alert_of(event) -> dict:
    """The alert in the playbook's shape (node, finding, action, labels, starts_at, fingerprint) from
    that shape or from one alert of Alertmanager's webhook (labels, startsAt, fingerprint), as an
    EDA controller may hand it over whole; anything else as it is (alert_errors names the problem)."""
    if not isinstance(event, dict) or "node" in event or not isinstance(event.get("labels"), dict):
        return event
    labels = event["labels"]
    alert = {"labels": dict(labels)}
    for key in ("node", "finding", "action"):
        if key in labels:
            alert[key] = labels[key]
    for key, source in (("starts_at", "startsAt"), ("fingerprint", "fingerprint")):
        if event.get(source):
            alert[key] = event[source]
    return alert


def alert_errors(alert) -> list:
    """What is wrong with an alert the rulebook handed over (empty: nothing)."""
    if not isinstance(alert, dict):
        return ["gpuops_remediation_alert must be a dict (the rulebook's node, finding, action, labels, "
                "starts_at, fingerprint), not %s" % type(alert).__name__]
    errors = []
    for key in ("node", "finding", "action"):
        if not isinstance(alert.get(key), str) or not alert.get(key):
            errors.append("gpuops_remediation_alert.%s is missing: the alert must carry the label %s (the "
                          "collection's alert rules set it)" % (key, key))
    if isinstance(alert.get("action"), str) and alert.get("action") and alert["action"] not in health.ACTIONS:
        errors.append("gpuops_remediation_alert.action is %r; it must be one of %s"
                      % (alert["action"], ", ".join(health.ACTIONS)))
    if alert.get("labels") is not None and not isinstance(alert.get("labels"), dict):
        errors.append("gpuops_remediation_alert.labels must be a dict of the alert's labels")
    if alert.get("starts_at") and parse_time(alert.get("starts_at")) is None:
        errors.append("gpuops_remediation_alert.starts_at is %r, not an RFC 3339 time" % alert["starts_at"])
    return errors


def record_of(node: dict | None) -> dict:
    """The node's remediation record (an empty one when it has none or it cannot be read)."""
    text = (((node or {}).get("metadata") or {}).get("annotations") or {}).get(RECORD_ANNOTATION)
    try:
        record = json.loads(text) if text else {}
    except ValueError:
        record = {}
    if not isinstance(record, dict):
        record = {}
    attempts = record.get("attempts")
    record["attempts"] = [a for a in attempts if isinstance(a, dict)] if isinstance(attempts, list) else []
    return record


def serial_of(inventory: dict | None, uuid: str | None) -> str | None:
    """The serial of the GPU ``uuid`` in gpu_report's inventory record, or None."""
    for entry in (inventory or {}).get("gpus") or []:
        if isinstance(entry, dict) and uuid and entry.get("uuid") == uuid:
            return entry.get("serial") or None
    return None


def _rank(action: str) -> int:
    return health.ACTIONS.index(action)


def _escalated(action: str, previous: list) -> tuple:
    """The action after the attempts on the same GPU within the window: one rung above the highest
    hardware action taken (gpu-reset -> node-reboot -> quarantine); (action, from) or (action, None)."""
    if action not in LADDER:
        return action, None
    taken = [a.get("action") for a in previous if a.get("action") in LADDER]
    if not taken:
        return action, None
    highest = max(LADDER.index(name) for name in taken)
    wanted = LADDER[min(highest + 1, len(LADDER) - 1)]
    if LADDER.index(wanted) > LADDER.index(action):
        return wanted, action
    return action, None


def held_xid_restart(attempts: list, uuid: str, xid: str, began) -> dict | None:
    """The done restart-workload attempt for XID ``xid`` of GPU ``uuid`` that an alert which began at
    ``began`` (a datetime) still reports: the alert began after that restart, and no GPU reset or
    node reboot of the GPU was done since (either clears the XID). None when there is none."""
    if began is None:
        return None
    found = None
    for attempt in attempts:
        at = parse_time(attempt.get("at"))
        if attempt.get("uuid") != uuid or attempt.get("result") != "done" or at is None or at > began:
            continue
        if attempt.get("action") == "restart-workload" and str(attempt.get("xid") or "") == str(xid):
            found = attempt
        elif attempt.get("action") in ("gpu-reset", "node-reboot") and found is not None:
            found = None
    return found


def plan(alert: dict, node: dict | None, inventory: dict | None = None, policy: dict | None = None,
         now: str | None = None) -> dict:
    """The plan for ``alert`` on ``node``. ``now``: an RFC 3339 time (the record's clock).
    Raises PlanError for an alert that is not one of the collection's or names no node of the cluster."""
    errors = alert_errors(alert)
    if errors:
        raise PlanError("; ".join(errors))
    policy = dict(DEFAULT_POLICY, **(policy or {}))
    if policy["max_action"] not in health.ACTIONS:
        raise PlanError("the policy's max_action must be one of %s, not %r"
                        % (", ".join(health.ACTIONS), policy["max_action"]))
    name = alert["node"]
    if node is None:
        raise PlanError("the alert names node %s, which the cluster does not have: nothing was changed (a node "
                        "renamed or removed since the alert fired; check the alert's node label)" % name)
    labels = alert.get("labels") or {}
    uuid = labels.get("UUID") or None
    gpu = labels.get("gpu")
    now_time = parse_time(now) or datetime.datetime.now(datetime.timezone.utc)
    record = record_of(node)
    meta, spec = node.get("metadata") or {}, node.get("spec") or {}
    node_labels = meta.get("labels") or {}
    result = {"node": name, "finding": alert["finding"], "alert_action": alert["action"], "gpu": gpu, "uuid": uuid,
              "serial": None, "action": "none", "escalated_from": None, "reason": "", "steps": [],
              "previous_state": record.get("state") or "", "attempts_within_window": 0}

    def done(reason: str, state: str = "ignored") -> dict:
        result["reason"] = reason
        result["state"] = state
        return result

    # not the collection's to touch
    if node_labels.get(upgrade_plan.SKIP_LABEL) == "true":
        return done("%s is labelled %s=true: left alone" % (name, upgrade_plan.SKIP_LABEL))
    maintenance = (meta.get("annotations") or {}).get(upgrade_plan.MAINTENANCE_ANNOTATION)
    ours = record.get("state") in ("remediation-in-progress", "remediation-failed", "quarantined") or maintenance
    if spec.get("unschedulable") and not ours:
        return done("%s was cordoned by someone else (no maintenance of this collection is on it): left alone"
                    % name)
    if record.get("state") == "quarantined":
        return done("%s is quarantined (%s): a person brings it back" % (name, record.get("reason") or "RMA"),
                    "quarantined")
    # the same notification again (Alertmanager repeats a firing alert)
    key = (alert.get("fingerprint") or "", alert.get("starts_at") or "")
    started = parse_time(record.get("at"))
    running = record.get("state") == "remediation-in-progress" and started is not None \
        and now_time - started < datetime.timedelta(seconds=IN_PROGRESS_S)
    for attempt in record["attempts"]:
        # (an attempt left in progress by a run that died is not handled: this one resumes it)
        if key != ("", "") and (attempt.get("fingerprint") or "", attempt.get("starts_at") or "") == key \
                and (attempt.get("result") == "done" or (attempt.get("result") == "in-progress" and running)):
            return done("this alert (fingerprint %s, firing since %s) was handled at %s: nothing to do"
                        % (key[0] or "-", key[1] or "-", attempt.get("at")), record.get("state") or "ignored")
    action = alert["action"]
    if action == "none":
        return done("the alert asks for no action (%s)" % alert["finding"])
    xid = labels.get("xid") or None
    result["xid"] = xid
    # DCGM_FI_DEV_XID_ERRORS holds a GPU's last XID until the GPU is reset, and the exporter
    # attributes it to whichever pod has the GPU: the pod a restart-workload started again inherits
    # the XID it was restarted for, as a new series - a new alert, which is no new fault
    if action == "restart-workload" and xid and uuid:
        restarted = held_xid_restart(record["attempts"], uuid, xid, parse_time(alert.get("starts_at")))
        if restarted:
            which = (gpu if gpu is not None else "-", uuid, xid, restarted.get("at"))
            return done("GPU %s (%s) still reports XID %s, for which its workload was restarted at %s: "
                        "DCGM_FI_DEV_XID_ERRORS holds the last XID until the GPU is reset, and the restarted "
                        "pod's series carries it - nothing to do" % which, record.get("state") or "ignored")
    # another remediation of this node is under way (another alert of it, a moment later)
    if running:
        result["wanted"] = action
        result["waiting_for"] = "remediation"  # (its record stays the running one's)
        return done("another remediation of %s is in progress since %s (%s): this alert waits for it; still "
                    "firing, it comes back" % (name, record.get("at"), record.get("action")), "remediation-waiting")
    # another maintenance of the engine (a driver upgrade, an allocation switch) holds the node
    if maintenance and maintenance != "remediation":
        result["wanted"] = action
        result["waiting_for"] = maintenance
        return done("%s is in a %s maintenance (%s): the remediation waits until it is done; the alert, "
                    "still firing, brings it back" % (name, maintenance, node_labels.get(upgrade_plan.STATE_LABEL)
                                                      or "no state yet"), "remediation-waiting")
    # the same GPU (the node, for an alert about no one GPU) within the window
    window = datetime.timedelta(seconds=int(policy["window_s"]))

    # what escalates: remediations of the same GPU that were carried out (done) within the window,
    # before this alert began - the GPU failed again after them. A failed attempt (no slot, a
    # PodDisruptionBudget, a held GPU) proves nothing about the GPU, and a retry of this alert
    # resumes with the same action.
    began = parse_time(alert.get("starts_at"))

    def recent(attempt):
        at = parse_time(attempt.get("at"))
        same = (attempt.get("uuid") == uuid) if uuid else True
        retry = key != ("", "") and (attempt.get("fingerprint") or "", attempt.get("starts_at") or "") == key
        return (same and not retry and at is not None and now_time - at <= window and attempt.get("result") == "done"
                and (began is None or at < began))
    previous = [a for a in record["attempts"] if recent(a)]
    result["attempts_within_window"] = len(previous)
    if policy.get("escalate", True):
        action, escalated_from = _escalated(action, previous)
        result["escalated_from"] = escalated_from
    # a node left cordoned by a failed remediation: the next alert of it resumes that remediation
    # (a milder alert does not replace it, nor its record's reason)
    failed = record.get("action") if record.get("state") == "remediation-failed" else None
    if failed in LADDER and _rank(failed) > _rank(action):
        result["resumes"] = failed
        action = failed
    if _rank(action) > _rank(policy["max_action"]):
        result["reason"] = ("%s calls for %s, above the policy's max_action %s: the node is only reported"
                            % (alert["finding"], action, policy["max_action"]))
        result["state"] = "ignored"
        result["wanted"] = action
        return result
    result["action"] = action
    result["steps"] = list(STEPS[action])
    result["state"] = "remediation-required"
    why = "%s on GPU %s (%s)" % (alert["finding"], gpu if gpu is not None else "-", uuid or "no UUID")
    if result.get("resumes"):
        why += "; resumes the failed %s of the node (%s)" % (result["resumes"], record.get("reason") or "no reason recorded")
    if result["escalated_from"]:
        why += ": %d attempt(s) on it within %ds, so %s becomes %s" % (
            len(previous), window.total_seconds(), result["escalated_from"], action)
    result["reason"] = why
    if action == "quarantine":
        result["serial"] = serial_of(inventory, uuid)
        result["rma"] = {"node": name, "gpu": gpu, "uuid": uuid, "serial": result["serial"],
                         "finding": alert["finding"], "at": now_time.strftime("%Y-%m-%dT%H:%M:%SZ"),
                         "attempts": len(previous)}
        if result["serial"] is None:
            result["rma"]["note"] = ("no GPU inventory record names this GPU's serial: run the gpu_report role on "
                                     "the node (or read it with nvidia-smi -q) before opening the RMA")
    return result


def record(node: dict | None, plan_result: dict, alert: dict, state: str, result: str, now: str) -> dict:
    """The node's remediation record after this remediation reached ``state`` (one of STATES), with
    this attempt (``result``: in-progress, done, failed, skipped) kept among the newest MAX_ATTEMPTS."""
    if state not in STATES:
        raise PlanError("state must be one of %s, not %r" % (", ".join(STATES), state))
    current = record_of(node)
    attempts = [a for a in current["attempts"]
                if (a.get("fingerprint"), a.get("starts_at"), a.get("at")) != (
                    alert.get("fingerprint"), alert.get("starts_at"), plan_result.get("started_at"))]
    attempts.append({"at": plan_result.get("started_at") or now, "uuid": plan_result.get("uuid"),
                     "gpu": plan_result.get("gpu"), "finding": plan_result.get("finding"),
                     "action": plan_result.get("action"), "fingerprint": alert.get("fingerprint"),
                     "starts_at": alert.get("starts_at"), "result": result})
    if plan_result.get("xid"):
        attempts[-1]["xid"] = str(plan_result["xid"])
    out = {"state": state, "reason": plan_result.get("reason"), "action": plan_result.get("action"),
           "finding": plan_result.get("finding"), "gpu": plan_result.get("gpu"), "at": now,
           "attempts": attempts[-MAX_ATTEMPTS:]}
    if plan_result.get("rma"):
        out["rma"] = plan_result["rma"]
    return out


def lines(plan_result: dict) -> list:
    """The plan for the job log."""
    head = "%s: %s" % (plan_result["node"], plan_result["action"])
    if plan_result.get("escalated_from"):
        head += " (escalated from %s)" % plan_result["escalated_from"]
    out = [head + " - " + plan_result["reason"]]
    out += ["  %d. %s" % (n, step) for n, step in enumerate(plan_result.get("steps") or [], 1)]
    if plan_result.get("rma"):
        rma = plan_result["rma"]
        out.append("  RMA: GPU %s, UUID %s, serial %s" % (rma.get("gpu"), rma.get("uuid"), rma.get("serial") or "unknown"))
        if rma.get("note"):
            out.append("  " + rma["note"])
    return out

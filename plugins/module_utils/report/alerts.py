# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Prometheus alert rules the collection ships: the GPU failures an operator must act on, over
the series NVIDIA's dcgm-exporter exposes, each alert labelled with what a receiver routes on.
Pure functions; the findings and their action classes come from module_utils/report/health.py.

Every alert carries

* ``node`` - the Kubernetes node (dcgm-exporter's ``Hostname`` label, which the exporter sets from
  the node's name), and the exporter's own ``gpu`` (index), ``UUID``, ``pci_bus_id`` and ``modelName``;
* ``finding`` - the collection's finding code (``ecc_uncorrectable``, ``gpu_lost``, ``xid`` ...), and
  ``xid`` for the XID alerts;
* ``action`` - the action class the failure calls for (health.ACTIONS): ``none``,
  ``restart-workload``, ``gpu-reset``, ``node-reboot`` or ``quarantine``;
* ``severity`` - ``critical`` when the failure calls for an action on the node, else ``warning``.

Annotations are plain text (no Prometheus templating), so the rules survive any templating engine
that renders them."""

from __future__ import annotations

__metaclass__ = type

from ansible_collections.gpuops.nvidia.plugins.module_utils.report import health

GROUP = "gpuops-nvidia-gpu-health"
# dcgm-exporter names the node in Hostname; the alerts call it node, as kube-state-metrics does
_NODE = 'label_replace(%s, "node", "$1", "Hostname", "(.+)")'
# the labels of one GPU on every series of it (pod attribution labels left out)
_GPU_KEYS = "Hostname, UUID, gpu, pci_bus_id, modelName"

# NVML clock event reasons (nvmlClocksEventReason*): the bit of each slowdown in
# DCGM_FI_DEV_CLOCKS_EVENT_REASONS. PromQL has no bit operators: floor(x / bit) % 2 tests one.
SLOWDOWN_BITS = {
    "throttle_hw_slowdown": (0x8, "hardware slowdown"),
    "throttle_thermal": (0x40, "hardware thermal slowdown"),
    "throttle_power_brake": (0x80, "hardware power brake slowdown"),
}
SW_THERMAL_BIT = 0x20


def _bit(bit: int) -> str:
    return "floor(DCGM_FI_DEV_CLOCKS_EVENT_REASONS / %d) %% 2 == 1" % bit


def _rule(alert: str, expr: str, finding: str, summary: str, fix: str, duration: str = "",
          fields=(), **labels) -> dict:
    action = health.action_of(finding, labels.get("xid"))
    rule = {"alert": alert, "expr": _NODE % expr}
    if duration:
        rule["for"] = duration
    rule["labels"] = dict({"finding": finding, "action": action,
                           "severity": "warning" if action == "none" else "critical"},
                          **{key: str(value) for key, value in labels.items()})
    rule["annotations"] = {"summary": summary, "description": fix,
                           "fields": ", ".join(fields)}
    return rule, tuple(fields)


def _xid_rules() -> list:
    """(rule, the fields it reads) of every XID the collection maps."""
    found = []
    for xid in sorted(health.XID_ACTIONS):
        meaning, _critical, fix = health.XID_CATALOG[xid]
        found.append(_rule(
            "GPUXidError", "DCGM_FI_DEV_XID_ERRORS == %d" % xid, health.XID_EVENTS.get(xid, "xid"),
            "the GPU reported XID %d (%s)" % (xid, meaning), fix,
            fields=("DCGM_FI_DEV_XID_ERRORS",), xid=xid))
    return found


def rules() -> list:
    """Every alert rule, in a stable order."""
    return [rule for rule, _needs in _rules()]


def _rules() -> list:
    """(rule, the exporter fields it reads) of every alert rule."""
    found = _xid_rules()
    found.append(_rule(
        "GPUUncorrectableECC", "DCGM_FI_DEV_ECC_DBE_VOL_TOTAL > 0", "ecc_uncorrectable",
        "the GPU has uncorrectable (double-bit) ECC errors since its last reset",
        "drain the node and reset the GPU; replace it if the errors recur",
        fields=("DCGM_FI_DEV_ECC_DBE_VOL_TOTAL",)))
    found.append(_rule(
        "GPURowRemapFailure", "DCGM_FI_DEV_ROW_REMAP_FAILURE > 0", "row_remap_failure",
        "the GPU failed to remap a memory row", "drain the node: the GPU needs an RMA",
        fields=("DCGM_FI_DEV_ROW_REMAP_FAILURE",)))
    found.append(_rule(
        "GPURowRemapPending", "DCGM_FI_DEV_ROW_REMAP_PENDING > 0", "row_remap_pending",
        "the GPU has a row remap pending until its next reset",
        "drain the node and reset the GPU to apply the remap",
        fields=("DCGM_FI_DEV_ROW_REMAP_PENDING",)))
    # a GPU the exporter reported within the hour and no longer reports, while it still reports
    # others of the node (the node and its exporter are up)
    found.append(_rule(
        "GPUMissing",
        "(max by (%s) (last_over_time(DCGM_FI_DEV_GPU_TEMP[1h])) unless on (Hostname, UUID) "
        "DCGM_FI_DEV_GPU_TEMP) and on (Hostname) (count by (Hostname) (DCGM_FI_DEV_GPU_TEMP) > 0)" % _GPU_KEYS,
        "gpu_missing", "the exporter no longer reports the GPU while it reports the node's others",
        "drain and reboot the node; a GPU still gone after a reboot needs an RMA",
        duration="2m", fields=("DCGM_FI_DEV_GPU_TEMP",)))
    found.append(_rule(
        "GPUPCIeLinkDegraded",
        "DCGM_FI_DEV_PCIE_LINK_WIDTH < on (Hostname, UUID) group_left () "
        "max by (Hostname, UUID) (DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH)",
        "pcie_link_degraded", "the GPU's PCIe link runs narrower than its maximum width",
        "reseat the GPU or riser and check the slot", duration="10m",
        fields=("DCGM_FI_DEV_PCIE_LINK_WIDTH", "DCGM_FI_DEV_PCIE_MAX_LINK_WIDTH")))
    for finding, (bit, what) in SLOWDOWN_BITS.items():
        expr = _bit(bit)
        if finding == "throttle_thermal":
            expr = "(%s) or (%s)" % (expr, _bit(SW_THERMAL_BIT))
        found.append(_rule(
            "GPUClocksSlowdown", expr, finding, "%s is active on the GPU" % what,
            health.SLOWDOWN_FIXES[finding], duration="5m", fields=("DCGM_FI_DEV_CLOCKS_EVENT_REASONS",)))
    return found


def rule_groups(interval: str = "") -> list:
    """The rules as Prometheus rule groups (a rule file's ``groups``, a PrometheusRule's
    ``spec.groups``)."""
    group = {"name": GROUP}
    if interval:
        group["interval"] = interval
    group["rules"] = rules()
    return [group]


def fields() -> list:
    """The dcgm-exporter fields the rules read."""
    names = []
    for _entry, needs in _rules():
        names.extend(name for name in needs if name not in names)
    return names


def missing_fields(exported: list) -> list:
    """The rules that cannot fire because the exporter does not export a field they read:
    [{'alert', 'finding', 'fields'}]."""
    have = set(exported or [])
    result = []
    for rule, needs in _rules():
        lacking = [name for name in needs if name not in have]
        if lacking:
            result.append({"alert": rule["alert"], "finding": rule["labels"]["finding"], "fields": lacking})
    return result

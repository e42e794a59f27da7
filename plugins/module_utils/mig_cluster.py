# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A node's MIG change in the cluster, as NVIDIA's MIG manager (k8s-mig-manager) does it, in node
labels: the layout wanted (``nvidia.com/mig.config``), the state of the change
(``nvidia.com/mig.config.state``: pending, rebooting, success, failed), and the GPU operands paused
for the change (their ``nvidia.com/gpu.deploy.<operand>`` labels set to ``paused-for-mig-change``)
and restored afterwards - exactly the labels that were paused, to exactly their values, so that
no ``paused-*`` value is left behind, also after a failure.

JSON patches guarded by test operations: a label someone changed meanwhile makes the patch fail
instead of being overwritten. Pure functions over plain data; no I/O."""

from __future__ import annotations

__metaclass__ = type

from ansible_collections.gpuops.nvidia.plugins.module_utils.node_labels import DEPLOY_LABEL_PREFIX, OPERANDS, escape

CONFIG_LABEL = "nvidia.com/mig.config"
STATE_LABEL = "nvidia.com/mig.config.state"
STATES = ("pending", "rebooting", "success", "failed")
PAUSED = "paused-for-mig-change"


def _path(key):
    return "/metadata/labels/" + escape(key)


def wanted_config(labels, default=""):
    """The config the node's label asks for, else `default` (the inventory's mig_config_name)."""
    value = (labels or {}).get(CONFIG_LABEL)
    return value if value else default


def pause(labels, operands=OPERANDS):
    """(patch, paused): the operands to pause are those deployed on the node now ("true" or no
    label: the operands' default), paused maps each label to its previous value (None: absent).
    An admin's "false" and other paused-* values are left as they are."""
    labels = labels or {}
    patch, paused = [], {}
    for operand in operands:
        key = DEPLOY_LABEL_PREFIX + operand
        value = labels.get(key)
        if value is None:
            patch.append({"op": "add", "path": _path(key), "value": PAUSED})
        elif value == "true":
            patch += [{"op": "test", "path": _path(key), "value": value},
                      {"op": "replace", "path": _path(key), "value": PAUSED}]
        else:
            continue
        paused[key] = value
    return patch, paused


def restore(labels, paused):
    """The patch that gives each paused label back its previous value (removes the ones that
    were absent), guarded: a label that is no longer paused-for-mig-change is left alone."""
    labels = labels or {}
    patch = []
    for key in sorted(paused):
        if labels.get(key) != PAUSED:
            continue
        patch.append({"op": "test", "path": _path(key), "value": PAUSED})
        if paused[key] is None:
            patch.append({"op": "remove", "path": _path(key)})
        else:
            patch.append({"op": "replace", "path": _path(key), "value": paused[key]})
    return patch


def state(labels, value):
    """The patch that sets the state label (no op when it already has that value)."""
    if value not in STATES:
        raise ValueError("%r is not a MIG config state (%s)" % (value, ", ".join(STATES)))
    current = (labels or {}).get(STATE_LABEL)
    if current == value:
        return []
    if current is None:
        return [{"op": "add", "path": _path(STATE_LABEL), "value": value}]
    return [{"op": "test", "path": _path(STATE_LABEL), "value": current},
            {"op": "replace", "path": _path(STATE_LABEL), "value": value}]


def leftovers(labels):
    """Deploy labels left paused for a MIG change (a run that died before restoring them)."""
    return sorted(k for k, v in (labels or {}).items() if k.startswith(DEPLOY_LABEL_PREFIX) and v == PAUSED)

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one shape of a finding, for every check of this collection (health, pre-flight, CDI,
container runtime): what was found, how bad it is, and what to do about it. Pure functions.

A finding is a plain dict:

* ``code`` - a stable identifier (``ecc_uncorrectable``, ``branch_unknown`` ...), for policies
  and dashboards;
* ``severity`` - ``error`` (the node must not take work, or the plan must not run), ``warning``
  (works, but needs attention) or ``info``;
* ``message`` - what is wrong, in an operator's words, naming the thing and the numbers;
* ``fix`` - what to do about it;
* ``subject`` - what it is about: ``node``, ``GPU 3``, a file path, a package;
* any context keys a producer adds (``gpu``, ``uuid``, ``devices`` ...)."""

from __future__ import annotations

__metaclass__ = type

SEVERITIES = ("error", "warning", "info")
SEVERITY_ORDER = {name: rank for rank, name in enumerate(SEVERITIES)}
KEYS = ("code", "severity", "message", "fix", "subject")


def finding(code: str, severity: str, message: str, fix: str, subject: str = "node", **context) -> dict:
    """A finding. Raises ValueError for an unknown severity (a programming error)."""
    if severity not in SEVERITY_ORDER:
        raise ValueError("severity must be one of %s, not %r" % (", ".join(SEVERITIES), severity))
    item = {"code": code, "severity": severity, "message": message, "fix": fix, "subject": subject}
    item.update(context)
    return item


def gpu_subject(gpu: dict | None) -> str:
    """The subject of a finding about one GPU ('GPU 3'), or 'node'."""
    return "node" if gpu is None else "GPU %s" % gpu.get("index")


def ordered(items: list) -> list:
    """The findings by severity (errors first); the producer's order within a severity."""
    return sorted(items, key=lambda item: SEVERITY_ORDER[item["severity"]])


def counts(items: list) -> dict:
    result = dict.fromkeys(SEVERITIES, 0)
    for item in items:
        result[item["severity"]] += 1
    return result


def summary(items: list) -> dict:
    """Counts by severity; healthy means no error and no warning."""
    found = counts(items)
    return {"healthy": found["error"] == 0 and found["warning"] == 0, "counts": found,
            "errors": found["error"]}


def line(item: dict) -> str:
    """One finding as one line of text: '[error] GPU 3: message (fix: ...)'."""
    return "[%s] %s: %s (fix: %s)" % (item["severity"], item.get("subject", "node"), item["message"], item["fix"])


def lines(items: list) -> list:
    return [line(item) for item in ordered(items)]

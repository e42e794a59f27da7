# -*- coding: utf-8 -*-
"""Waiting on a condition instead of sleeping: the lab cluster's tests and tests/lab/synthetic_fleet.py
poll what they wait for, and a time-out names what did not happen."""
from __future__ import annotations

import time


def wait_for(predicate, timeout, what, interval=0.5):
    """PREDICATE's first true value, polled every INTERVAL seconds; after TIMEOUT seconds an
    AssertionError that says WHAT did not happen and the last value seen."""
    deadline = time.monotonic() + timeout
    while True:
        last = predicate()
        if last:
            return last
        if time.monotonic() >= deadline:
            raise AssertionError(f"timed out after {timeout}s waiting for {what} (last: {last!r})")
        time.sleep(interval)

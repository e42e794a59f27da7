# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the collection says about a node and a fleet: the one finding shape (findings.py),
health verdicts from a GPU snapshot and each finding's action class (health.py), the Prometheus
alert rules over the DCGM exporter's series (alerts.py), gpu_info's facts assembled (gpu_facts.py), the
node report's lines (lines.py), the GPU inventory record and its hardware changes (inventory.py),
drift against the inventory (drift.py) and the fleet summary (fleet.py); and the services of the
report modules: gpu_report's node report and inventory record (node_report.py), driver_status's
state and record (driver_status.py), node_audit's read-only pass (audit.py).

Pure functions over plain data, except gpu_facts and the services (which read through nvml/,
host/ - records through host/records - runtime/ and mig/)."""

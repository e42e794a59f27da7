# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The Kubernetes side: API access over the kubernetes client (api.py), the roles' objects and
render-mode names (objects.py), node labels and the health taint (node_labels.py), the device
plugin's and the DCGM exporter's configuration (device_plugin_config.py, dcgm_fields.py), the
go-live checks (node_checks.py), and the maintenance engine: rolling-upgrade planning
(upgrade_plan.py), one node through the operator's upgrade states (node_upgrade.py), and the
remediation planner of GPU alerts (remediation_plan.py), whose actions the same engine carries out.

May import gpu/, report/findings and report/health (finding codes, action classes); never nvml/ (the cluster side reads what the host side
reported)."""

# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""MIG partitioning: NVIDIA mig-parted's config format (config.py), the pure planner from a
node's layout to a wanted one (plan.py), applying a plan through NVML (apply.py, also run by the
boot-time applier without Ansible) and the label-driven change in the cluster as NVIDIA's MIG
manager does it (cluster.py).

May import nvml/ (apply only), k8s/node_labels (cluster only) and gpu/. config.py, plan.py and
apply.py are also copied flat onto the node for the boot-time applier: they import each other by
their flat names there."""

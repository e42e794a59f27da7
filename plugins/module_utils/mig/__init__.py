# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""MIG partitioning: NVIDIA mig-parted's config format (config.py), the pure planner from a
node's layout to a wanted one (plan.py), applying a plan through NVML (apply.py, also run by the
boot-time applier without Ansible), what the mig and mig_layouts modules do behind their
argspecs (service.py: config, profile record, NVML session, GPU reset) and the label-driven
change in the cluster as NVIDIA's MIG manager does it (cluster.py).

May import nvml/ (apply and service only), host/ (service only: records, files, commands),
k8s/node_labels (cluster only) and gpu/. config.py, plan.py and apply.py are also copied flat
onto the node for the boot-time applier (with nvml/mig.py, nvml/adapter.py and gpu/model.py as
mig_nvml.py, nvml_adapter.py and gpu_model.py): they import each other by their flat names
there."""

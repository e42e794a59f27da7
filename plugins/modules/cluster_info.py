#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

__metaclass__ = type

DOCUMENTATION = r"""
---
module: cluster_info
short_description: Read the cluster's nodes and the operands' DaemonSets and pods in one call
version_added: 0.4.0
description:
  - Lists the nodes (all, or those matching O(node_selector)), the DaemonSets and pods of the
    operands' namespace, and the ResourceSlices of NVIDIA's DRA driver, over one connection to the API server - what the drift audit compares
    each GPU node's labels and operand images with, read once for the fleet instead of one
    C(kubernetes.core.k8s_info) call per kind.
  - The objects are returned as the API server returns them (as C(kubernetes.core.k8s_info)
    returns its RV(ignore:resources)).
author:
  - gpuops.nvidia maintainers (@gpuops)
options:
  namespace:
    description: The operands' namespace.
    type: str
    required: true
  node_selector:
    description: A label selector for the nodes; empty lists every node (a GPU node that lost its labels is drift, not absent).
    type: str
    default: ""
extends_documentation_fragment:
  - gpuops.nvidia.kube_auth
  - gpuops.nvidia.attributes.read_only
seealso:
  - module: kubernetes.core.k8s_info
"""

EXAMPLES = r"""
- name: Read the nodes, the operands' DaemonSets and pods
  gpuops.nvidia.cluster_info:
    namespace: gpuops-nvidia
    kubeconfig: ~/.kube/config
  register: cluster
  delegate_to: localhost
  run_once: true
"""

RETURN = r"""
nodes:
  description: The nodes.
  returned: always
  type: list
  elements: dict
daemonsets:
  description: The DaemonSets of O(namespace).
  returned: always
  type: list
  elements: dict
pods:
  description: The pods of O(namespace).
  returned: always
  type: list
  elements: dict
resource_slices:
  description:
    - The ResourceSlices of NVIDIA's DRA driver for GPUs (driver C(gpu.nvidia.com)); empty where the
      API server does not serve C(resource.k8s.io/v1); null where the credentials may not list them
      (a warning says so; the audit then leaves the DRA devices out).
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gpuops.nvidia.plugins.module_utils.k8s import api as kube_api
from ansible_collections.gpuops.nvidia.plugins.module_utils.k8s import node_checks


def main():
    module = AnsibleModule(
        argument_spec=kube_api.kube_argument_spec(
            namespace=dict(type="str", required=True),
            node_selector=dict(type="str", default=""),
        ),
        supports_check_mode=True,
    )
    if not kube_api.HAS_KUBERNETES:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=str(kube_api.KUBERNETES_ERROR))
    params = module.params
    try:
        kube = kube_api.Kube(kube_api.connect(params))
        result = dict(changed=False, nodes=kube.nodes(params["node_selector"]),
                      daemonsets=kube.daemonsets(params["namespace"]), pods=kube.pods(None, params["namespace"]),
                      resource_slices=kube.resource_slices(node_checks.DRA_DRIVER))
        if result["resource_slices"] is None:
            module.warn("these credentials may not list resourceslices (resource.k8s.io): the DRA nodes' ResourceSlices "
                        "are not compared; grant get and list on them to compare")
    except kube_api.KubeError as exc:
        module.fail_json(msg="cannot read the cluster: %s" % exc)
    module.exit_json(**result)


if __name__ == "__main__":
    main()

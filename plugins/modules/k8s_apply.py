#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

__metaclass__ = type

DOCUMENTATION = r"""
---
module: k8s_apply
short_description: Apply a set of Kubernetes objects server-side, leave others' shared objects alone, and wait for the workloads
version_added: 0.5.0
description:
  - The one step every Kubernetes role of this collection ends with (through the role
    P(gpuops.nvidia.k8s_objects#role)), in one call over one connection to the API server.
  - "Shared cluster-scoped objects (C(Namespace), C(RuntimeClass), C(PriorityClass),
    C(CustomResourceDefinition)) that exist and do not carry the label
    C(app.kubernetes.io/managed-by: gpuops.nvidia) were made by someone else (the GPU Operator,
    RKE2 and k3s ship an C(nvidia) RuntimeClass; an NFD install brings its CRDs): they are never
    changed or deleted, and are returned in RV(foreign) and named in a warning."
  - With O(state=present) the other objects are applied with server-side apply (field manager
    C(gpuops-nvidia), taking over conflicting fields), in the order given; an object is changed
    when what the server holds differs afterwards (its status and the server's own metadata
    aside). Then each workload in O(wait) is waited for until it has rolled out - every pod it
    wants runs the newest spec and is available; one that does not within O(wait_timeout) fails
    the task with, for each node it targets, its pod's state and newest warning event.
  - With O(state=absent) the objects are deleted in reverse order (foreground), and the module
    waits until they are gone.
  - Check mode asks the API server for a dry run, so the result and the diff are what a real run
    would do. Values of C(Secret) objects never appear in the diff; give such objects with
    C(no_log) on the task, as their values are in O(objects).
author:
  - gpuops.nvidia maintainers (@gpuops)
options:
  objects:
    description:
      - The objects, as the API takes them (each with C(apiVersion), C(kind) and C(metadata.name)),
        in the order to apply them (a namespace before what lives in it).
    type: list
    elements: dict
    required: true
  state:
    description: Whether the objects should exist.
    type: str
    choices: [present, absent]
    default: present
  wait:
    description:
      - The DaemonSets and Deployments to wait for after applying (ignored in check mode and with
        O(state=absent)).
    type: list
    elements: dict
    default: []
    suboptions:
      kind:
        description: C(DaemonSet) or C(Deployment).
        type: str
        required: true
        choices: [DaemonSet, Deployment]
      name:
        description: Its name.
        type: str
        required: true
      namespace:
        description: Its namespace.
        type: str
        required: true
  wait_timeout:
    description: Seconds to wait for each workload to roll out, or for deleted objects to be gone.
    type: int
    default: 300
extends_documentation_fragment:
  - gpuops.nvidia.kube_auth
attributes:
  check_mode:
    support: full
    description: A server-side dry run; nothing is changed and nothing is waited for.
  diff_mode:
    support: full
    description: Each object that changes, before and after (Secret values masked).
  idempotent:
    support: full
    description: Applying the same objects again reports C(changed=false).
seealso:
  - module: kubernetes.core.k8s
  - module: gpuops.nvidia.cluster_info
"""

EXAMPLES = r"""
- name: Apply a ConfigMap and a DaemonSet, and wait for the DaemonSet on every node it targets
  gpuops.nvidia.k8s_apply:
    objects:
      - apiVersion: v1
        kind: ConfigMap
        metadata: {name: plugin-config, namespace: gpuops-nvidia}
        data: {config.yaml: "version: v1\n"}
      - "{{ lookup('ansible.builtin.template', 'daemonset.yml.j2') | from_yaml }}"
    wait:
      - {kind: DaemonSet, name: nvidia-device-plugin, namespace: gpuops-nvidia}
    kubeconfig: ~/.kube/config
  delegate_to: localhost
  run_once: true

- name: Delete them again
  gpuops.nvidia.k8s_apply:
    objects: "{{ objects }}"
    state: absent
"""

RETURN = r"""
applied:
  description: The objects (C(Kind/name)) created or changed; in check mode, those that would be.
  returned: always
  type: list
  elements: str
  sample: [ConfigMap/plugin-config]
deleted:
  description: The objects (C(Kind/name)) deleted with O(state=absent).
  returned: always
  type: list
  elements: str
foreign:
  description: Shared objects that exist and were not made by this collection, left as they are.
  returned: always
  type: list
  elements: str
  sample: [RuntimeClass/nvidia]
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gpuops.nvidia.plugins.module_utils.k8s import api as kube_api
from ansible_collections.gpuops.nvidia.plugins.module_utils.k8s import apply as k8s_apply


def main():
    module = AnsibleModule(
        argument_spec=kube_api.kube_argument_spec(
            objects=dict(type="list", elements="dict", required=True),
            state=dict(type="str", choices=["present", "absent"], default="present"),
            wait=dict(type="list", elements="dict", default=[], options=dict(
                kind=dict(type="str", required=True, choices=["DaemonSet", "Deployment"]),
                name=dict(type="str", required=True),
                namespace=dict(type="str", required=True))),
            wait_timeout=dict(type="int", default=300),
        ),
        supports_check_mode=True,
    )
    if not kube_api.HAS_KUBERNETES:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=str(kube_api.KUBERNETES_ERROR))
    try:
        result = k8s_apply.run(module.params, module.check_mode)
    except (k8s_apply.ApplyError, kube_api.KubeError) as exc:
        module.fail_json(msg=str(exc))
    if result["foreign"]:
        module.warn("left as they are (they exist and were not made by gpuops.nvidia, so they are neither changed "
                    "nor deleted): %s" % ", ".join(result["foreign"]))
    diff = result.pop("diff")
    module.exit_json(**(dict(result, diff=diff) if module._diff else result))


if __name__ == "__main__":
    main()

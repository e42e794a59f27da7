#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

__metaclass__ = type

DOCUMENTATION = r"""
---
module: node_upgrade
short_description: Move a GPU node through the GPU Operator's driver upgrade states on the Kubernetes side
version_added: 0.4.0
description:
  - The Kubernetes side of one node's driver upgrade, as NVIDIA's GPU Operator runs it, with the
    operator's label C(nvidia.com/gpu-driver-upgrade-state) written at every state, so dashboards
    and alerts built for the operator keep working. One call does a whole phase in one process
    (one connection to the API server), so a node is out of service only for as long as the
    upgrade itself takes.
  - O(state=drained) takes the node out of service. It waits until fewer than O(max_unavailable)
    GPU nodes are unavailable (cordoned or NotReady, for any reason), records a cordon an admin
    made before the upgrade (such a node stays cordoned afterwards), adds O(taint) (the canary's),
    then C(cordon-required), cordons, C(wait-for-jobs-required) (waits for the pods matching
    O(wait_for_jobs_selector) to finish), C(pod-deletion-required) (deletes the pods that request
    C(nvidia.com/*) resources, not DaemonSets' and not those labelled
    C(nvidia.com/gpu-driver-upgrade-drain.skip=true)), C(drain-required) (evicts the other pods
    as C(kubectl drain --ignore-daemonsets) does, through the Eviction API, retried while a
    PodDisruptionBudget refuses with HTTP 429), and ends at C(pod-restart-required).
  - O(state=restarted), after the host's driver is upgraded, deletes the operands' pods on the node
    (their DaemonSets start them again on the new driver), waits until each DaemonSet's new pod is
    Running and Ready, and ends at C(validation-required).
  - O(state=done) writes C(uncordon-required), then C(upgrade-done) and uncordons the node in one
    patch. O(state=failed) writes C(upgrade-failed); the node stays cordoned.
  - A node labelled C(nvidia.com/gpu-driver-upgrade.skip=true) is left alone (RV(skip_label)).
  - Every phase is idempotent and a label never moves back, so a node a run left midway is
    resumed by the same calls.
author:
  - gpuops.nvidia maintainers (@gpuops)
options:
  name:
    description: The Kubernetes node's name.
    type: str
    required: true
  state:
    description: The phase to bring the node through (see the description).
    type: str
    required: true
    choices: [drained, restarted, done, failed]
  max_unavailable:
    description:
      - GPU nodes that may be out of service at once, a count (V(2)) or a percentage of the GPU
        nodes (V(25%), rounded up as the operator rounds it). Nodes unavailable for other reasons
        count. O(state=drained) waits for a free slot unless the node is resumed midway.
    type: str
    default: "25%"
  gpu_node_selector:
    description: The label selector of the GPU nodes O(max_unavailable) counts.
    type: str
    default: nvidia.com/gpu.present=true
  slot_timeout:
    description: Seconds to wait for a free slot.
    type: int
    default: 3600
  wave:
    description:
      - The Kubernetes node names that go out of service together with this one (the playbook's
        batch, this node among them). O(state=drained) then waits until the whole wave fits in
        O(max_unavailable) with the nodes unavailable outside it, so nodes of a wave that look at
        the same moment never take more slots between them than there are. When empty, this node alone
        waits for a free slot.
    type: list
    elements: str
    default: []
  taint:
    description: A taint to add before the cordon (the canary's, so that only test workloads land on it).
    type: dict
    suboptions:
      key:
        description: The taint's key.
        type: str
        required: true
      value:
        description: The taint's value.
        type: str
      effect:
        description: The taint's effect.
        type: str
        required: true
        choices: [NoSchedule, PreferNoSchedule, NoExecute]
  wait_for_jobs_selector:
    description: Pods (label selector) on the node that must finish before the pod deletion; empty skips the wait.
    type: str
    default: ""
  wait_for_jobs_timeout:
    description: Seconds to wait for them.
    type: int
    default: 3600
  pod_deletion_timeout:
    description: Seconds to wait for deleted pods (GPU pods, operands) to be gone, and for the operands' new pods to be Ready.
    type: int
    default: 300
  drain:
    description: Whether to drain the node after the GPU pods' deletion.
    type: bool
    default: true
  drain_selector:
    description: Only pods matching this label selector are drained (with C(nvidia.com/gpu-driver-upgrade-drain.skip!=true) always).
    type: str
    default: ""
  drain_timeout:
    description: Seconds to wait for evicted pods to be gone.
    type: int
    default: 300
  drain_retries:
    description: How many more times evictions a PodDisruptionBudget refused are asked again.
    type: int
    default: 30
  drain_delay:
    description: Seconds between those tries.
    type: int
    default: 10
  delete_emptydir_data:
    description: Evict pods with C(emptyDir) volumes (their data is lost); false refuses to drain such a node.
    type: bool
    default: true
  force:
    description: Evict pods no controller manages (they do not come back); false refuses to drain such a node.
    type: bool
    default: false
  operand_namespace:
    description: The operands' namespace, for O(state=restarted); empty is every namespace.
    type: str
    default: ""
  operand_selector:
    description: The operands' pods (label selector), for O(state=restarted).
    type: str
    default: app.kubernetes.io/managed-by=gpuops.nvidia
  lock_namespace:
    description:
      - The namespace of the budget's lock, the Lease C(gpuops-nvidia-maintenance-budget) that
        O(state=drained) holds for the moment it looks at the slots and takes one, so that
        maintenances run side by side (a rolling upgrade, remediations, allocation switches) never
        take more than O(max_unavailable) between them. The credentials need C(create), C(get) and
        C(delete) on C(leases) (coordination.k8s.io) there. A Lease left by a run that died is taken
        over after 30 seconds.
    type: str
    default: kube-system
  waiting_labels:
    description:
      - Labels the node gets when O(state=drained) has to wait for a slot (the remediation's
        C(gpuops.nvidia/remediation-state=remediation-waiting)). Whatever waits also gets the
        annotation C(gpuops.nvidia/maintenance-waiting), the kind of maintenance and the reason
        (the nodes out of service and O(max_unavailable)); the patch that takes the slot removes it.
    type: dict
    default: {}
  started_labels:
    description:
      - Labels the node gets in the patch that takes it out of service (the remediation's
        C(gpuops.nvidia/remediation-state=remediation-in-progress)), after a wait or without one.
    type: dict
    default: {}
  restart_operands:
    description:
      - With O(state=done), a node still at C(pod-restart-required) has its operands restarted first,
        as O(state=restarted) does, and goes on to C(upgrade-done) in the same call - for a
        maintenance that validates nothing between the two (one call less while the node is out of
        service).
    type: bool
    default: false
  maintenance:
    description:
      - What the node is taken out of service for - a driver upgrade, a GPU allocation switch
        (the playbook C(gpuops.nvidia.allocation)), or a remediation of a GPU failure (the playbook
        C(gpuops.nvidia.remediate)). O(state=drained) records it in the node's
        annotation C(gpuops.nvidia/maintenance) when it starts one, so that each playbook resumes
        and retries only the nodes its own kind of maintenance left midway or failed.
    type: str
    default: driver
    choices: [driver, allocation, remediation]
  poll_interval:
    description:
      - Seconds between looks while waiting for a slot or for jobs, where the credentials may list but
        not watch nodes and pods. Every wait watches what it waits for where they may (the RBAC verb
        C(watch)), and goes on as soon as it changes.
    type: int
    default: 10
extends_documentation_fragment:
  - gpuops.nvidia.kube_auth
attributes:
  check_mode:
    support: full
    description: Reports the states, pods and evictions the phase would go through; changes and waits for nothing.
  diff_mode:
    support: none
    description: The changes are API objects' labels and pods, reported in RV(states), RV(deleted), RV(evicted).
  idempotent:
    support: full
    description: A phase the node has been through already changes nothing.
seealso:
  - module: kubernetes.core.k8s_drain
  - name: The GPU Operator's driver upgrades
    description: The upgrade states and their label.
    link: https://docs.nvidia.com/datacenter/cloud-native/gpu-operator/latest/gpu-driver-upgrades.html
"""

EXAMPLES = r"""
- name: Take the node out of service for its driver upgrade
  gpuops.nvidia.node_upgrade:
    name: gpu-node-07
    state: drained
    max_unavailable: "25%"
    wait_for_jobs_selector: app=training
    kubeconfig: ~/.kube/config

- name: Restart the operands on the new driver
  gpuops.nvidia.node_upgrade:
    name: gpu-node-07
    state: restarted
    operand_namespace: gpuops-nvidia

- name: Put the node back into service
  gpuops.nvidia.node_upgrade:
    name: gpu-node-07
    state: done
"""

RETURN = r"""
state:
  description: The node's C(nvidia.com/gpu-driver-upgrade-state) label afterwards.
  returned: always
  type: str
  sample: pod-restart-required
previous_state:
  description: The label before the call (empty when the node had none).
  returned: unless skip_label
  type: str
  sample: ""
states:
  description: The labels this call wrote, in order.
  returned: always
  type: list
  elements: str
  sample: [cordon-required, pod-deletion-required, drain-required, pod-restart-required]
skip_label:
  description: The node is labelled C(nvidia.com/gpu-driver-upgrade.skip=true) and was left alone.
  returned: always
  type: bool
cordoned:
  description: This call cordoned the node.
  returned: always
  type: bool
keep_cordoned:
  description: The node was cordoned before the upgrade and stays cordoned after it.
  returned: when state is drained or done
  type: bool
waited_for:
  description: The job pods (namespace/name) the node waited for.
  returned: always
  type: list
  elements: str
waited_for_slot:
  description: Why the node had to wait for a slot (the nodes out of service, O(max_unavailable)).
  returned: when O(state=drained) waited for a slot
  type: str
deleted:
  description: The GPU pods deleted (namespace/name).
  returned: always
  type: list
  elements: str
evicted:
  description: The pods drained (namespace/name).
  returned: always
  type: list
  elements: str
refused:
  description: Per pod (namespace/name), how many evictions a PodDisruptionBudget refused before one was allowed.
  returned: always
  type: dict
  sample: {"ml/trainer-7d9c": 3}
restarted:
  description: The operand pods deleted so that they start on the new driver.
  returned: always
  type: list
  elements: str
msg:
  description: One line for the job log.
  returned: always
  type: str
  sample: "gpu-node-07 drained: cordon-required -> pod-deletion-required -> drain-required -> pod-restart-required; evicted 2 pod(s)"
"""

from ansible.module_utils.basic import AnsibleModule, missing_required_lib

from ansible_collections.gpuops.nvidia.plugins.module_utils.k8s import api as kube_api
from ansible_collections.gpuops.nvidia.plugins.module_utils.k8s.node_upgrade import NodeUpgrade, UpgradeError


def main():
    module = AnsibleModule(
        argument_spec=kube_api.kube_argument_spec(
            name=dict(type="str", required=True),
            state=dict(type="str", required=True, choices=["drained", "restarted", "done", "failed"]),
            max_unavailable=dict(type="str", default="25%"),
            gpu_node_selector=dict(type="str", default="nvidia.com/gpu.present=true"),
            slot_timeout=dict(type="int", default=3600),
            wave=dict(type="list", elements="str", default=[]),
            taint=dict(type="dict", options=dict(
                key=dict(type="str", required=True, no_log=False),
                value=dict(type="str"),
                effect=dict(type="str", required=True, choices=["NoSchedule", "PreferNoSchedule", "NoExecute"]),
            )),
            wait_for_jobs_selector=dict(type="str", default=""),
            wait_for_jobs_timeout=dict(type="int", default=3600),
            pod_deletion_timeout=dict(type="int", default=300),
            drain=dict(type="bool", default=True),
            drain_selector=dict(type="str", default=""),
            drain_timeout=dict(type="int", default=300),
            drain_retries=dict(type="int", default=30),
            drain_delay=dict(type="int", default=10),
            delete_emptydir_data=dict(type="bool", default=True),
            force=dict(type="bool", default=False),
            operand_namespace=dict(type="str", default=""),
            operand_selector=dict(type="str", default="app.kubernetes.io/managed-by=gpuops.nvidia"),
            poll_interval=dict(type="int", default=10),
            restart_operands=dict(type="bool", default=False),
            lock_namespace=dict(type="str", default="kube-system"),
            waiting_labels=dict(type="dict", default={}),
            started_labels=dict(type="dict", default={}),
            maintenance=dict(type="str", default="driver", choices=["driver", "allocation", "remediation"]),
        ),
        supports_check_mode=True,
    )
    if not kube_api.HAS_KUBERNETES:
        module.fail_json(msg=missing_required_lib("kubernetes"), exception=str(kube_api.KUBERNETES_ERROR))
    params = module.params
    for option in ("slot_timeout", "wait_for_jobs_timeout", "pod_deletion_timeout", "drain_timeout",
                   "drain_retries", "drain_delay", "poll_interval"):
        if params[option] < 0:
            module.fail_json(msg="%s must be 0 or more, got %d" % (option, params[option]))
    upgrade = None
    try:
        kube = kube_api.Kube(kube_api.connect(params))
        upgrade = NodeUpgrade(kube, params["name"], params, check=module.check_mode)
        result = upgrade.run(params["state"])
        for warning in upgrade.warnings:
            module.warn(warning)
    except (UpgradeError, kube_api.KubeError) as exc:
        partial = dict(upgrade.result, state=upgrade.state) if upgrade is not None else {}
        module.fail_json(msg="%s %s: %s" % (params["name"], params["state"], exc), **partial)
    module.exit_json(**result)


if __name__ == "__main__":
    main()

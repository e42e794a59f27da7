# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""How this collection's Kubernetes roles reach the API server, in one place."""

from __future__ import annotations

__metaclass__ = type

DOCUMENTATION = r"""
---
name: k8s_auth
short_description: The API connection options of the gpuops.nvidia Kubernetes roles
version_added: 0.2.0
description:
  - Returns the connection options of the C(kubernetes.core) modules (C(kubeconfig),
    C(context), C(host), C(api_key), C(validate_certs), C(ca_cert)) from the variables
    C(gpuops_kubeconfig), C(gpuops_kube_context), C(gpuops_kube_host), C(gpuops_kube_api_key),
    C(gpuops_kube_validate_certs) and C(gpuops_kube_ca_cert); the ones that are not set are
    left out, so the kubernetes client's own defaults apply (C(KUBECONFIG), C(~/.kube/config),
    the in-cluster service account).
  - The roles use it as C(module_defaults) of the C(kubernetes.core.k8s) action group.
author:
  - gpuops.nvidia maintainers (@gpuops)
options: {}
"""

EXAMPLES = r"""
- name: Read the nodes with the roles' connection
  kubernetes.core.k8s_info:
    kind: Node
  module_defaults:
    group/kubernetes.core.k8s: "{{ lookup('gpuops.nvidia.k8s_auth') }}"
"""

RETURN = r"""
_raw:
  description: One dict of connection options.
  type: list
  elements: dict
"""

from ansible.errors import AnsibleLookupError
from ansible.plugins.lookup import LookupBase

OPTIONS = {
    "gpuops_kubeconfig": "kubeconfig",
    "gpuops_kube_context": "context",
    "gpuops_kube_host": "host",
    "gpuops_kube_api_key": "api_key",
    "gpuops_kube_validate_certs": "validate_certs",
    "gpuops_kube_ca_cert": "ca_cert",
}


class LookupModule(LookupBase):
    def run(self, terms, variables=None, **kwargs):
        if terms:
            raise AnsibleLookupError("k8s_auth takes no terms; it reads the gpuops_kube* variables")
        variables = variables or {}
        result = {}
        for var, option in OPTIONS.items():
            if var not in variables:
                continue
            value = self._templar.template(variables[var])
            if value is None or (isinstance(value, str) and not value.strip()):
                continue
            result[option] = value
        return [result]

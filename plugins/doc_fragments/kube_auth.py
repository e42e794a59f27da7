# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

__metaclass__ = type


class ModuleDocFragment:
    """The API connection options of the collection's Kubernetes modules (module_utils/k8s/api.py)."""

    DOCUMENTATION = r"""
options:
  kubeconfig:
    description:
      - The kubeconfig file. Without it and O(host), C(KUBECONFIG), then C(~/.kube/config), then
        the in-cluster service account. The P(gpuops.nvidia.k8s_auth#lookup) lookup gives these options
        from the C(gpuops_kube*) variables.
    type: path
  context:
    description: The kubeconfig's context.
    type: str
  host:
    description: The API server's URL, instead of a kubeconfig.
    type: str
  api_key:
    description: A bearer token for O(host).
    type: str
  validate_certs:
    description: Whether to check the API server's certificate.
    type: bool
    aliases: [verify_ssl]
  ca_cert:
    description: The CA certificate that signed the API server's.
    type: path
    aliases: [ssl_ca_cert]
requirements:
  - kubernetes (the Python client)
"""

# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The k8s_auth lookup fills every connection option of the Kubernetes modules' one argument
spec (a controller plugin: ansible-test runs it apart from module_utils' tests, which may not
import controller code)."""
from __future__ import annotations

from ansible_collections.gpuops.nvidia.plugins.lookup.k8s_auth import OPTIONS as LOOKUP_OPTIONS
from ansible_collections.gpuops.nvidia.plugins.module_utils.k8s import api as kube_api


def test_the_lookup_fills_every_connection_option():
    assert sorted(LOOKUP_OPTIONS.values()) == sorted(kube_api.KUBE_ARGUMENT_SPEC)

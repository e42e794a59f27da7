#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

__metaclass__ = type

DOCUMENTATION = r"""
---
module: repo_key
short_description: Install a package repository's OpenPGP signing key, shown by fingerprint and uid
version_added: 0.2.0
description:
  - Installs the signing key of one package repository into its own keyring file (the file an
    apt source's C(Signed-By) names), from the key's content (air-gapped sites) or a URL fetched
    on every run, so a rotated key is noticed.
  - The key is checked to be an OpenPGP public key before anything is written. Changes and the
    diff show each key's fingerprint, algorithm, creation date and user ids - who signs the
    repository - instead of the armored key's base64.
  - Written atomically, owner root and mode C(0644).
author:
  - gpuops.nvidia maintainers (@gpuops)
options:
  path:
    description:
      - The keyring file. apt reads a keyring whose name ends in C(.asc) as ASCII-armored and any
        other (C(.gpg)) as binary, so an C(.asc) keyring must be given an armored key (refused
        otherwise) and an armored key for any other keyring is converted to binary first, as
        C(gpg --dearmor) does.
    type: path
    required: true
  content:
    description:
      - The key itself, ASCII-armored. Mutually exclusive with O(url).
    type: str
  url:
    description:
      - Where to download the key (the proxy environment variables apply). Mutually exclusive
        with O(content).
    type: str
  validate_certs:
    description: Verify the TLS certificate of O(url).
    type: bool
    default: true
  timeout:
    description: Seconds to wait for O(url).
    type: int
    default: 30
  state:
    description: C(absent) removes the keyring file.
    type: str
    choices: [present, absent]
    default: present
attributes:
  check_mode:
    support: full
    description: Downloads and checks the key, reports the change and its diff, writes nothing.
  diff_mode:
    support: full
    description: The keys before and after, by fingerprint, algorithm, creation date and uid.
  idempotent:
    support: full
    description: The same key changes nothing.
seealso:
  - module: ansible.builtin.deb822_repository
"""

EXAMPLES = r"""
- name: Install NVIDIA's CUDA repository key
  gpuops.nvidia.repo_key:
    path: /etc/apt/keyrings/nvidia-cuda.asc
    url: https://developer.download.nvidia.com/compute/cuda/repos/debian12/x86_64/3bf863cc.pub

- name: Install a mirror's key from the inventory (air-gapped)
  gpuops.nvidia.repo_key:
    path: /etc/apt/keyrings/nvidia-cuda.asc
    content: "{{ driver_repo_key }}"
"""

RETURN = r"""
current_keys:
  description: The keys now in the file (or that would be, in check mode). (Named C(keys) before
    the return keys were renamed, since a key named like a dict method cannot be read with dot notation.)
  returned: when O(state=present)
  type: list
  elements: dict
  sample:
    - fingerprint: EB693B3035CD5710E231E123A4B469963BF863CC
      key_id: A4B469963BF863CC
      algorithm: RSA
      created: "2022-04-20"
      uids: ["cudatools <cudatools@nvidia.com>"]
      subkeys: []
previous_keys:
  description: The keys the file held before (empty when it did not exist or held none).
  returned: always
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuops.nvidia.plugins.module_utils.apt import ops, sources


def main():
    module = AnsibleModule(
        argument_spec=dict(
            path=dict(type="path", required=True),
            content=dict(type="str"),
            url=dict(type="str"),
            validate_certs=dict(type="bool", default=True),
            timeout=dict(type="int", default=30),
            state=dict(type="str", choices=["present", "absent"], default="present"),
        ),
        mutually_exclusive=[("content", "url")],
        required_if=[("state", "present", ("content", "url"), True)],
        supports_check_mode=True,
    )
    try:
        result = sources.apply_key(module, module.params)
    except ops.AptError as exc:
        module.fail_json(msg=str(exc))
    module.exit_json(**result)


if __name__ == "__main__":
    main()

#!/usr/bin/python
# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)

from __future__ import annotations

__metaclass__ = type

DOCUMENTATION = r"""
---
module: runtime_config
short_description: Configure containerd, CRI-O or Docker for the NVIDIA runtime and CDI without clobbering
version_added: 0.1.0
description:
  - Adds the NVIDIA runtime (and optionally makes it the default) and CDI to a container
    runtime's configuration, keeping every existing key, comment and value.
  - "containerd: configuration versions 1 to 4; the NVIDIA runtime copies the runc runtime's
    options and sets C(BinaryName). By default the settings go to a drop-in file and the main
    file only gains an C(imports) glob; before containerd 2.1 imported files replace whole
    plugin sections, so the drop-in then carries the main file's complete CRI section."
  - "CRI-O: a drop-in file only. CRI-O's effective configuration (C(crio.conf), then every file
    under the drop-in's directory in the order CRI-O reads them) gives the NVIDIA handler the
    monitor settings of the node's default runtime (C(monitor_path), C(monitor_cgroup),
    C(monitor_exec_cgroup), C(monitor_env)) and the options NVIDIA carries over
    (C(runtime_root), C(allowed_annotations) ...), so it starts on every packaging of CRI-O
    (upstream's keeps conmon in C(/usr/libexec/crio/)); O(handler_options) overrides them."
  - "Docker: a merge into C(daemon.json)."
  - Validates the result with the runtime's own parser over the planned files in a scratch
    directory before anything replaces the live files (C(containerd config dump),
    C(crio config), C(dockerd --validate)); an invalid result is never installed.
  - Malformed existing files make the module fail with the file, line and parser message,
    leaving them untouched. Options the runtime would misread fail with the option's name and
    the fix, before anything changes; that includes an O(runtime_name) that is no valid
    RuntimeClass handler name (a DNS label) or that would take over another runtime (C(runc),
    C(crun), or a runtime the configuration already defines that is not NVIDIA's).
  - "Credentials are masked in diffs, results, warnings and messages: values of credential keys
    (C(password), C(auth), C(token), C(Authorization) headers ...) and the password of every
    URL (C(http://user:PASSWORD@proxy:3128))."
author:
  - gpuops.nvidia maintainers (@gpuops)
requirements:
  - tomlkit on the managed host for containerd (not needed to remove what is not there), and for
    CRI-O on Python older than 3.11 (tomli works too)
options:
  runtime:
    description: The container runtime to configure.
    type: str
    choices: [containerd, crio, docker]
    default: containerd
  config_path:
    description: The runtime's main configuration file.
      Default C(/etc/containerd/config.toml), C(/etc/crio/crio.conf), C(/etc/docker/daemon.json).
    type: path
  drop_in_path:
    description:
      - Drop-in file for the NVIDIA settings. Default C(/etc/containerd/conf.d/99-nvidia.toml)
        or C(/etc/crio/crio.conf.d/99-nvidia.toml). Ignored for Docker.
    type: path
  edit_mode:
    description:
      - C(drop_in) writes the NVIDIA settings to O(drop_in_path); C(in_place) edits O(config_path)
        itself (containerd only), marking every value it adds so O(state=absent) can remove it.
    type: str
    choices: [drop_in, in_place]
    default: drop_in
  runtime_name:
    description: Name of the NVIDIA runtime.
    type: str
    default: nvidia
  runtime_path:
    description: Path of the NVIDIA container runtime binary.
    type: path
    default: /usr/bin/nvidia-container-runtime
  set_as_default:
    description: Make the NVIDIA runtime the default runtime.
    type: bool
    default: false
  enable_cdi:
    description:
      - Enable the Container Device Interface. C(auto) skips it with a warning where the runtime
        cannot do it (containerd before 1.7, Docker before 25), where C(true) fails.
    type: str
    choices: ['true', 'false', auto]
    default: 'true'
  cdi_spec_dirs:
    description: Directories containerd reads CDI specs from.
    type: list
    elements: path
    default: [/etc/cdi, /var/run/cdi]
  state:
    description: C(absent) removes exactly what the module added.
    type: str
    choices: [present, absent]
    default: present
  backup:
    description:
      - Back up every file before changing it. CRI-O drop-ins are backed up under O(state_dir)
        (C(backups/)), since CRI-O reads every file in C(crio.conf.d), backups included.
    type: bool
    default: false
  validate:
    description:
      - Check the planned configuration with the runtime's own parser when its binary is present
        (C(containerd config dump); C(dockerd --validate), Docker 23 and later), before the live
        file changes. An invalid result is never installed.
    type: bool
    default: true
  containerd_version:
    description: containerd's version (e.g. C(1.7.24)); detected from the binary when not set.
    type: str
  handler_options:
    description:
      - "CRI-O only. Fields of the NVIDIA handler (C([crio.runtime.runtimes.<runtime_name>])) to set
        instead of those copied from the default runtime, for example
        C({monitor_path: /usr/libexec/crio/conmon}); a null value leaves a copied field out."
      - The module refuses a handler CRI-O would not start with (no C(monitor_path) while conmon is
        not in C($PATH), a C(monitor_path) that is no executable, a C(monitor_cgroup) that does not
        suit the cgroup manager).
    type: dict
    default: {}
  option_names:
    description:
      - "What to call the module's options in its error messages, as C({option: name}); a role
        passes the names of its own variables (C({edit_mode: container_toolkit_edit_mode})) so an
        error names what its user sets. The result's RV(option) keeps the module's own name."
    type: dict
    default: {}
  state_dir:
    description:
      - Directory of the module's records of what it added where a file cannot carry a marker
        (Docker's C(daemon.json) is JSON, which has no comments). O(state=absent) takes back exactly
        what the record lists and restores what it replaced, so keys the operator had set before
        (C(features.cdi), another C(default-runtime)) stay.
    type: path
    default: /var/lib/gpuops/runtime_config
attributes:
  check_mode:
    support: full
    description: Plans, validates and reports the diff without writing.
  diff_mode:
    support: full
    description: Before and after of every file, credentials masked.
  idempotent:
    support: full
    description: A second run with the same options changes nothing.
seealso:
  - name: containerd configuration
    description: containerd's documentation of config.toml versions and imports.
    link: https://github.com/containerd/containerd/blob/main/docs/man/containerd-config.toml.5.md
"""

EXAMPLES = r"""
- name: Add the NVIDIA runtime and CDI to containerd through a drop-in
  gpuops.nvidia.runtime_config:
    runtime: containerd
  register: runtime
  notify: Restart containerd

- name: Edit a kubeadm node's config.toml in place and make nvidia the default
  gpuops.nvidia.runtime_config:
    runtime: containerd
    edit_mode: in_place
    set_as_default: true
    backup: true

- name: Docker with CDI
  gpuops.nvidia.runtime_config:
    runtime: docker

- name: Remove what was added
  gpuops.nvidia.runtime_config:
    runtime: containerd
    state: absent
"""

RETURN = r"""
files:
  description: The files written or removed.
  returned: always
  type: list
  elements: str
  sample: [/etc/containerd/config.toml, /etc/containerd/conf.d/99-nvidia.toml]
config_version:
  description: containerd configuration version of the main file (containerd only).
  returned: when runtime is containerd
  type: int
  sample: 2
docker_version:
  description: The version of the installed dockerd (Docker only; null when it is not installed).
  returned: when runtime is docker
  type: str
  sample: 26.1.5
handler:
  description: CRI-O only - the NVIDIA handler's fields besides runtime_path and runtime_type.
  returned: when runtime is crio
  type: dict
  sample: {monitor_path: /usr/libexec/crio/conmon, runtime_root: /run/crun, allowed_annotations: [io.containers.trace-syscall]}
handler_from:
  description: CRI-O only - the runtime the handler's fields were copied from, and the file that defines it.
  returned: when runtime is crio
  type: dict
  sample: {runtime: crun, from: /etc/crio/crio.conf.d/10-crio.conf}
restart_required:
  description: True when a file changed, so the runtime must be restarted to use it.
  returned: always
  type: bool
state_files:
  description: The module's own records written or removed (see O(state_dir)).
  returned: always
  type: list
  elements: str
  sample: [/var/lib/gpuops/runtime_config/docker_etc_docker_daemon.json.json]
backups:
  description: Backup files made.
  returned: always
  type: list
  elements: str
option:
  description: The module's option an input error is about (the message may name it as O(option_names) says).
  returned: failure, when an option's value is refused
  type: str
  sample: edit_mode
diff:
  description: Before and after of each file, credentials masked.
  returned: when diff mode is on and something changed
  type: list
  elements: dict
"""

from ansible.module_utils.basic import AnsibleModule

from ansible_collections.gpuops.nvidia.plugins.module_utils.host import files
from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime import edit


def main():
    module = AnsibleModule(
        argument_spec=dict(
            runtime=dict(type="str", default="containerd", choices=["containerd", "crio", "docker"]),
            config_path=dict(type="path"),
            drop_in_path=dict(type="path"),
            edit_mode=dict(type="str", default="drop_in", choices=["drop_in", "in_place"]),
            runtime_name=dict(type="str", default="nvidia"),
            runtime_path=dict(type="path", default="/usr/bin/nvidia-container-runtime"),
            set_as_default=dict(type="bool", default=False),
            enable_cdi=dict(type="str", default="true", choices=["true", "false", "auto"]),
            cdi_spec_dirs=dict(type="list", elements="path", default=["/etc/cdi", "/var/run/cdi"]),
            state=dict(type="str", default="present", choices=["present", "absent"]),
            backup=dict(type="bool", default=False),
            validate=dict(type="bool", default=True),
            containerd_version=dict(type="str"),
            state_dir=dict(type="path", default="/var/lib/gpuops/runtime_config"),
            handler_options=dict(type="dict", default={}),
            option_names=dict(type="dict", default={}),
        ),
        supports_check_mode=True,
    )
    try:
        module.exit_json(**edit.run(module))
    except files.FileError as exc:
        module.fail_json(msg="%s; nothing was changed" % exc)


if __name__ == "__main__":
    main()

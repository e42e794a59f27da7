# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one place that runs a container runtime's own parser over PLANNED configuration files:
it lays the files out in a scratch directory (never the live ones), runs the binary, and
removes the directory again. What to write and how to read the answer is the editors' (pure)
business; this module only does the I/O."""

from __future__ import annotations

import os
import shutil
import tempfile

__metaclass__ = type

from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime import containerd, crio, docker

PLANNED = "the planned configuration"


def in_scratch(run, prefix: str, build):
    """build(scratch) -> ({path: text}, argv). Writes the files under a new scratch directory,
    runs argv with run(argv) -> (rc, out, err), and returns (rc, out, err) with the scratch
    directory's path replaced by PLANNED in the output."""
    scratch = tempfile.mkdtemp(prefix=prefix)
    try:
        files, argv = build(scratch)
        for path, text in files.items():
            if not os.path.abspath(path).startswith(scratch + os.sep):
                raise ValueError("%s is outside the scratch directory" % path)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text)
        rc, out, err = run(argv)
        return rc, (out or "").replace(scratch, PLANNED), (err or "").replace(scratch, PLANNED)
    finally:
        shutil.rmtree(scratch, ignore_errors=True)


def containerd_config(run, binary: str, plan: dict, drop_in_path, existing_drop_ins: dict, runtime_name: str,
                      runtime_path: str, state: str) -> list:
    """`containerd config dump` over the planned files; returns the problems (empty: valid)."""
    def build(scratch):
        files, config = containerd.validation_files(plan, drop_in_path, existing_drop_ins, scratch)
        return files, containerd.dump_argv(binary, config)
    rc, out, err = in_scratch(run, "gpuops-containerd-", build)
    return containerd.validation_problems(rc, out, err, plan, runtime_name, runtime_path, state)


def docker_config(run, binary: str, text: str, version) -> tuple:
    """`dockerd --validate` over the planned daemon.json: (problems, warnings)."""
    files, make_argv, warnings = docker.validation_plan(text, version)
    if make_argv is None:
        return [], warnings

    def build(scratch):
        return {os.path.join(scratch, name): body for name, body in files.items()}, make_argv(binary, scratch)
    rc, out, err = in_scratch(run, "gpuops-docker-", build)
    return docker.validation_problems(rc, out.replace(PLANNED + "/daemon.json", "the planned daemon.json"),
                                      err.replace(PLANNED + "/daemon.json", "the planned daemon.json")), warnings


def crio_config(run, binary: str, main_path: str, files, drop_in_text, drop_in_path: str, config_dir: str,
                runtime_name: str, runtime_path: str, state: str) -> list:
    """`crio config` over the planned files (CRI-O's own merge, TOML and value checks);
    returns the problems (empty: valid)."""
    def build(scratch):
        laid, main, conf_d = crio.validation_files(main_path, files, drop_in_text, drop_in_path, config_dir, scratch)
        return laid, crio.config_argv(binary, main, conf_d)
    rc, out, err = in_scratch(run, "gpuops-crio-", build)
    return crio.validation_problems(rc, out, err, runtime_name, runtime_path, state)

# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The container_toolkit role's pre-flight step on this machine, which has no CRI-O: the one
check names the problem and the role variable that fixes it, before anything changes."""
from __future__ import annotations

import shutil

from conftest import require  # pylint: disable=import-error


def test_a_runtime_that_is_not_installed_is_refused_with_the_fix(lab, tmp_path):
    require(shutil.which("crio") is None, "a machine without CRI-O",
            "crio is on PATH here; run this test where CRI-O is not installed (the lab's test machine)")
    playbook = tmp_path / "toolkit-preflight.yml"
    playbook.write_text(
        "- hosts: gpu_nodes\n"
        "  gather_facts: true\n"
        "  tasks:\n"
        "    - name: Pre-flight of the toolkit role\n"
        "      ansible.builtin.include_role:\n"
        "        name: gpuops.nvidia.container_toolkit\n"
        "        tasks_from: preflight\n"
        "      vars:\n"
        "        container_toolkit_runtime: crio\n")
    proc, out = lab.playbook("hgx-h100", str(playbook), check=False)
    assert proc.returncode != 0
    tasks = {t["task"]["name"].split(" : ")[-1]: t["hosts"]["localhost"] for t in out["plays"][0]["tasks"]}
    failure = tasks["Check the host and its container runtime, and say which runtime is configured"]
    assert failure["failed"] is True
    assert failure["msg"].startswith("container_toolkit_runtime is crio: ")
    assert "Install the container runtime first, or set container_toolkit_runtime" in failure["msg"]

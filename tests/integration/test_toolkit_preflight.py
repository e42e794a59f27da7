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


def test_the_runtime_found_in_the_preflight_look_is_judged_without_looking_again(lab, tmp_path):
    """site.yml's pre-flight stage finds the toolkit's runtime in the driver pre-flight's one look at
    the node (preflight's container_runtime): the toolkit role judges that result (crio, not installed
    here, refused with the same fix) and does not look again; a result found for another request is
    not taken - the role looks itself."""
    require(shutil.which("crio") is None, "a machine without CRI-O",
            "crio is on PATH here; run this test where CRI-O is not installed (the lab's test machine)")
    playbook = tmp_path / "toolkit-preflight-found.yml"
    for found_for, looks_again in (("crio", False), ("auto", True)):
        playbook.write_text(
            "- hosts: gpu_nodes\n"
            "  gather_facts: true\n"
            "  tasks:\n"
            "    - name: One look at the node\n"
            "      gpuops.nvidia.preflight:\n"
            "        driver_branch: '580'\n"
            "        container_runtime: %s\n"
            "        fail_on_problems: false\n"
            "      register: look\n"
            "    - name: Pre-flight of the toolkit role\n"
            "      ansible.builtin.include_role:\n"
            "        name: gpuops.nvidia.container_toolkit\n"
            "        tasks_from: preflight\n"
            "      vars:\n"
            "        container_toolkit_runtime: crio\n"
            "        container_toolkit_runtime_found: '{{ look.container_runtime }}'\n" % found_for)
        proc, out = lab.playbook("hgx-h100", str(playbook), check=False)
        assert proc.returncode != 0
        tasks = {t["task"]["name"].split(" : ")[-1]: t["hosts"]["localhost"] for t in out["plays"][0]["tasks"]}
        look = tasks["One look at the node"]["container_runtime"]
        assert look["requested"] == found_for and "installed" in look and "problems" in look, look
        assert tasks["Find the container runtime the node uses"].get("skipped", False) is not looks_again
        failure = tasks["Check the host and its container runtime, and say which runtime is configured"]
        assert failure["failed"] is True and failure["msg"].startswith("container_toolkit_runtime is crio: ")

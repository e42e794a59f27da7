# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""execution-environment.yml through ansible-builder create (v3 format): the build context has
the collection's tarball, kubernetes.core, and the Python and system packages the collection
declares (meta/execution-environment.yml); AWX material parses."""
from __future__ import annotations

import os
import shutil
import subprocess

from conftest import BIN, REPO  # pylint: disable=import-error


def test_ansible_builder_creates_the_build_context(tmp_path):
    work = tmp_path / "ee"
    (work / "awx").mkdir(parents=True)
    shutil.copy(os.path.join(REPO, "execution-environment.yml"), work)
    shutil.copy(os.path.join(REPO, "awx", "requirements.yml"), work / "awx")
    built = subprocess.run([os.path.join(BIN, "ansible-galaxy"), "collection", "build", "--force", "--output-path",
                            str(tmp_path), REPO], capture_output=True, text=True, check=True)
    tarball = built.stdout.strip().split()[-1]
    shutil.copy(tarball, work / "awx" / "gpuops-nvidia.tar.gz")
    res = subprocess.run([os.path.join(BIN, "ansible-builder"), "create", "-f", "execution-environment.yml",
                          "--context", str(tmp_path / "context"), "--output-filename", "Containerfile"],
                         cwd=work, capture_output=True, text=True, check=False)
    assert res.returncode == 0, res.stdout + res.stderr
    context = tmp_path / "context"
    containerfile = (context / "Containerfile").read_text()
    assert 'ARG EE_BASE_IMAGE="quay.io/ansible/awx-ee:24.6.1"' in containerfile
    assert "COPY _build/collections/gpuops-nvidia.tar.gz /tmp/gpuops-nvidia.tar.gz" in containerfile
    assert "ansible-galaxy collection install" in containerfile
    assert (context / "_build" / "collections" / "gpuops-nvidia.tar.gz").stat().st_size > 10000
    requirements = (context / "_build" / "requirements.yml").read_text()
    assert "/tmp/gpuops-nvidia.tar.gz" in requirements and "kubernetes.core" in requirements
    python = (context / "_build" / "requirements.txt").read_text()
    assert "kubernetes>=28.1.0" in python
    # the collection declares its own dependencies for ansible-builder's introspection
    meta = os.path.join(REPO, "meta")
    assert "kubernetes" in open(os.path.join(meta, "ee-requirements.txt"), encoding="utf-8").read()
    assert "openssh-client [platform:dpkg]" in open(os.path.join(meta, "ee-bindep.txt"), encoding="utf-8").read()


def test_the_awx_material_parses():
    for path in ("awx/configure.yml", "awx/playbooks/site.yml", "awx/playbooks/audit.yml",
                 "awx/playbooks/upgrade.yml", "awx/playbooks/validate.yml"):
        res = subprocess.run([os.path.join(BIN, "ansible-playbook"), "--syntax-check", path], cwd=REPO,
                             capture_output=True, text=True, check=False)
        assert res.returncode == 0, path + ": " + res.stdout[-2000:] + res.stderr[-2000:]


def test_a_launcher_picks_from_fixed_choices_and_sets_nothing_else():
    """The AWX material as AWX reads it: no job template asks for variables on launch, and every
    survey question is a fixed list or a bounded number - so a launcher cannot set the repository,
    its key or the upgrade's host tasks (which run as root on every GPU node)."""
    import yaml  # pylint: disable=import-outside-toplevel
    with open(os.path.join(REPO, "awx", "configure.yml"), encoding="utf-8") as handle:
        play = yaml.safe_load(handle)[0]
    templates = [t["awx.awx.job_template"] for t in play["tasks"] if "awx.awx.job_template" in t]
    assert templates and all(t["ask_variables_on_launch"] is False for t in templates)
    spec = play["vars"]["awx_upgrade_survey"]["spec"]
    for question in spec:
        assert question["type"] in ("multiplechoice", "integer"), question
        if question["type"] == "integer":
            assert isinstance(question["min"], int) and isinstance(question["max"], int), question
        else:
            choices = question["choices"]
            if isinstance(choices, str):  # a list the project keeps
                name = choices.strip("{} ")
                choices = play["vars"][name]
            assert isinstance(choices, list) and choices and all(isinstance(c, str) for c in choices), question
    asked = {q["variable"] for q in spec}
    assert asked == {"driver_version", "driver_branch", "gpuops_upgrade_max_parallel", "gpuops_upgrade_canary",
                     "gpuops_upgrade_cuda_version", "gpuops_upgrade_retry_failed"}

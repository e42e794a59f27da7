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
                 "awx/playbooks/upgrade.yml", "awx/playbooks/validate.yml", "awx/playbooks/remediate.yml"):
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
    # the remediation's template (Event-Driven Ansible launches it): one question, the alert as a
    # bounded text the playbook parses and checks; nothing else can be set
    loop = next(t["loop"] for t in play["tasks"] if "awx.awx.job_template" in t)
    remediate = [item for item in loop if item["playbook"] == "remediate.yml"]
    assert len(remediate) == 1 and remediate[0]["survey"] is True
    assert remediate[0]["survey_spec"].strip("{} ") == "awx_remediate_survey"
    questions = play["vars"]["awx_remediate_survey"]["spec"]
    assert [(q["variable"], q["type"], q["max"]) for q in questions] == [
        ("gpuops_remediation_alert_json", "textarea", 16384)]


def _argument_specs():
    """The variables the upgrade playbook takes: its own argument spec (playbooks/vars/) and the
    target's (the driver role's main entry point)."""
    import yaml  # pylint: disable=import-outside-toplevel
    with open(os.path.join(REPO, "playbooks", "vars", "upgrade_arguments.yml"), encoding="utf-8") as handle:
        specs = dict(yaml.safe_load(handle)["gpuops_upgrade_argument_spec"])
    with open(os.path.join(REPO, "roles", "driver", "meta", "argument_specs.yml"), encoding="utf-8") as handle:
        specs.update(yaml.safe_load(handle)["argument_specs"]["main"]["options"])
    return specs


def _accepts(spec, name, value):
    """Whether the argument spec takes the value an AWX survey or job template passes (strings
    from a multiple choice, numbers from an integer question), by ansible-core's own validator (the
    one validate_argument_spec runs)."""
    from ansible.module_utils.common.arg_spec import ArgumentSpecValidator  # pylint: disable=import-outside-toplevel
    allowed = ("type", "choices", "elements", "default", "required")
    checked = ArgumentSpecValidator({name: {k: v for k, v in spec.items() if k in allowed}}).validate({name: value})
    return not checked.error_messages


def test_the_survey_and_the_job_templates_set_only_variables_the_argument_specs_take():
    """Each survey question names a variable of the upgrade playbook's argument spec or the
    driver role's, of a compatible type, and every choice, bound and default is a value that spec
    accepts; so do the job templates' fixed extra_vars."""
    import yaml  # pylint: disable=import-outside-toplevel
    with open(os.path.join(REPO, "awx", "configure.yml"), encoding="utf-8") as handle:
        play = yaml.safe_load(handle)[0]
    specs = _argument_specs()
    # (the check can fail: a value outside a spec's choices, a word for a number)
    assert not _accepts(specs["gpuops_upgrade_phase"], "gpuops_upgrade_phase", "everything")
    assert not _accepts(specs["gpuops_upgrade_max_parallel"], "gpuops_upgrade_max_parallel", "two")
    for question in play["vars"]["awx_upgrade_survey"]["spec"]:
        spec = specs.get(question["variable"])
        assert spec is not None, f"survey variable {question['variable']} is in no argument spec"
        if question["type"] == "integer":
            assert spec["type"] == "int", question
            values = [question["min"], question["max"], question.get("default", question["min"])]
        else:
            choices = question["choices"]
            if isinstance(choices, str):
                choices = play["vars"][choices.strip("{} ")]
            values = list(choices) + ([question["default"]] if "default" in question else [])
        for value in values:
            assert _accepts(spec, question["variable"], value), (question["variable"], value, spec)
    templates = [t["awx.awx.job_template"] for t in play["tasks"] if "awx.awx.job_template" in t]
    loop = next(t["loop"] for t in play["tasks"] if "awx.awx.job_template" in t)
    assert templates and loop
    for item in loop:
        if item["playbook"] == "upgrade.yml":
            for variable, value in item.get("extra_vars", {}).items():
                assert variable in specs and _accepts(specs[variable], variable, value), (item, variable)
    with open(os.path.join(REPO, "playbooks", "remediate.yml"), encoding="utf-8") as handle:
        remediate_specs = yaml.safe_load(handle)[0]["vars"]["gpuops_remediate_argument_spec"]
    for question in play["vars"]["awx_remediate_survey"]["spec"]:
        spec = remediate_specs.get(question["variable"])
        assert spec is not None and spec["type"] == "str", question
        assert _accepts(spec, question["variable"], '{"node": "gpu-01", "finding": "xid", "action": "gpu-reset"}')


def test_the_upgrade_playbook_refuses_a_bad_variable_by_its_argument_spec(tmp_path):
    """What a survey cannot send but -e can: the argument spec names the variable and its
    choices, and the run stops in its first play, before any node is contacted."""
    inventory = tmp_path / "hosts.ini"
    inventory.write_text("[gpu_nodes]\ngpu-01 ansible_host=192.0.2.1\n")
    res = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", str(inventory),
                          os.path.join(REPO, "playbooks", "upgrade.yml"), "-e", "driver_version=580.95.05",
                          "-e", "gpuops_upgrade_phase=everything", "-e", "gpuops_upgrade_retry_failed=maybe"],
                         cwd=REPO, capture_output=True, text=True, check=False, timeout=120)
    out = res.stdout + res.stderr
    assert res.returncode != 0, out
    assert "gpuops_upgrade_phase" in out and "all, canary, rest" in out, out
    assert "gpuops_upgrade_retry_failed" in out, out
    assert "Gather the facts" not in out and "UNREACHABLE" not in out, out

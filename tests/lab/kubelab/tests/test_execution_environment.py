# -*- coding: utf-8 -*-
"""The execution environment, built for real and used the way AWX uses it.

tests/lab/ee/build.py builds execution-environment.yml with ansible-builder and podman (the lab's
own Debian base and a local collection source stand in for the registry and Galaxy the lab cannot
reach; everything else comes from the definition and the collection's declared dependencies).
Then ansible-runner runs jobs in that image as AWX's job runner does: a private data directory
with the project (the repository's awx/playbooks and the lab's inventory), the machine credential
as an SSH key (runner hands it to ssh-agent in the container), the job's command line. The nodes
are reached over SSH, as AWX reaches GPU nodes, the cluster with the inventory's kubeconfig.
Whatever the image lacks (a Python library, a system package, a collection) fails a job here."""
from __future__ import annotations

import glob
import json
import os
import shutil
import subprocess
import sys

import pytest
import yaml

from conftest import LAB, LAB_KUBECONFIG, REPO
from test_roles import recap

IMAGE = "localhost/gpuops-nvidia-ee:lab"
RUNNER = os.path.join(REPO, ".venv", "bin", "ansible-runner")


@pytest.fixture(scope="module")
def image(lab_only):
    res = subprocess.run([sys.executable, os.path.join(LAB, "ee", "build.py"), IMAGE], capture_output=True, text=True,
                         timeout=1200, check=False)
    assert res.returncode == 0, res.stdout[-6000:] + res.stderr[-4000:]
    return IMAGE


@pytest.fixture(scope="module")
def private_data(lab_only, gpu_nodes, tmp_path_factory):
    """The job's private data directory, as AWX writes one: project/ (awx/playbooks, the lab's
    inventory with each node's address and SSH as its connection, the files the inventory reads),
    env/ssh_key (the machine credential) and env/envvars."""
    kube = lab_only
    pdd = tmp_path_factory.mktemp("job")
    project = pdd / "project"
    shutil.copytree(os.path.join(REPO, "awx", "playbooks"), project / "awx" / "playbooks")
    shutil.copytree(os.path.join(REPO, "inventories", "lab"), project / "inventories" / "lab")
    # (the inventory reads these relative to itself: inventory_dir/../../.build)
    for src, dest in ((LAB_KUBECONFIG, ".build/kube/kubeconfig"),
                      (os.path.join(REPO, ".build", "apt-repo", "keys", "good.asc"), ".build/apt-repo/keys/good.asc")):
        os.makedirs(project / os.path.dirname(dest), exist_ok=True)
        shutil.copy(src, project / dest)
    (pdd / "env").mkdir()
    subprocess.run(["ssh-keygen", "-q", "-t", "ed25519", "-N", "", "-C", "gpuops-lab-awx", "-f", str(pdd / "key")],
                   check=True)
    shutil.move(str(pdd / "key"), pdd / "env" / "ssh_key")
    public = (pdd / "key.pub").read_text()
    hosts_file = project / "inventories" / "lab" / "hosts.yml"
    inventory = yaml.safe_load(hosts_file.read_text())
    for node, hostvars in inventory["all"]["children"]["gpu_nodes"]["hosts"].items():
        # an SSH server and the credential's key on the node, as on any managed host
        res = kube.node_exec(node, "DEBIAN_FRONTEND=noninteractive apt-get install -y -q --no-install-recommends "
                             "openssh-server >/dev/null && install -d -m 700 /root/.ssh && "
                             f"echo '{public.strip()}' > /root/.ssh/authorized_keys && systemctl is-active ssh")
        assert res.returncode == 0 and res.stdout.strip() == "active", res.stdout + res.stderr
        address = subprocess.run(["podman", "inspect", "-f", "{{range .NetworkSettings.Networks}}{{.IPAddress}}{{end}}",
                                  node], capture_output=True, text=True, check=True).stdout.strip()
        assert address and node in gpu_nodes
        hostvars.update(ansible_connection="ssh", ansible_host=address, ansible_user="root")
    hosts_file.write_text(yaml.safe_dump(inventory))
    envvars = {"ANSIBLE_HOST_KEY_CHECKING": "False", "ANSIBLE_NOCOLOR": "1"}
    (pdd / "env" / "envvars").write_text(yaml.safe_dump(envvars))
    return pdd


def run_job(pdd, playbook, *args):
    """ansible-runner run in the image (its network the host's: the lab's API server and nodes);
    returns the job's stdout and the stats event's artifact data (what set_stats hands AWX)."""
    (pdd / "env" / "cmdline").write_text(" ".join(["-i", "inventories/lab", *args]))
    shutil.rmtree(pdd / "artifacts", ignore_errors=True)
    res = subprocess.run([RUNNER, "run", str(pdd), "-p", playbook, "--process-isolation",
                          "--process-isolation-executable", "podman", "--container-image", IMAGE,
                          "--container-option=--network=host",
                          # (rootful podman: the image's user could not read runner's key pipe)
                          "--container-option=--user=0"],
                         capture_output=True, text=True, timeout=900, check=False)
    artifacts, = glob.glob(str(pdd / "artifacts" / "*"))
    with open(os.path.join(artifacts, "stdout"), encoding="utf-8") as handle:
        stdout = handle.read()
    assert res.returncode == 0, stdout[-8000:] + res.stderr[-2000:]
    with open(os.path.join(artifacts, "status"), encoding="utf-8") as handle:
        assert handle.read().strip() == "successful"
    with open(os.path.join(artifacts, "command"), encoding="utf-8") as handle:
        command = json.load(handle)["command"]
    assert command[:2] == ["podman", "run"] and IMAGE in command, command  # it ran in the image
    stats = {}
    for path in glob.glob(os.path.join(artifacts, "job_events", "*.json")):
        with open(path, encoding="utf-8") as handle:
            event = json.load(handle)
        if event.get("event") == "playbook_on_stats":
            stats = event["event_data"].get("artifact_data", {})
    return stdout, stats


def test_the_image_holds_the_collection_its_dependencies_and_the_tested_core(image):
    res = subprocess.run(["podman", "run", "--rm", image, "bash", "-c",
                          "ansible --version | head -1; ansible-galaxy collection list --format json; "
                          "python3 -c 'import kubernetes; print(kubernetes.__version__)'; command -v ssh ssh-agent"],
                         capture_output=True, text=True, timeout=120, check=True)
    lines = res.stdout.splitlines()
    assert lines[0].startswith("ansible [core 2.21."), lines[0]  # the newest of the definition's range on 3.13
    collections = {name for path in json.loads(lines[1]).values() for name in path}
    assert {"gpuops.nvidia", "kubernetes.core"} <= collections, collections
    assert lines[2].split(".")[0].isdigit() and int(lines[2].split(".")[0]) >= 28  # meta/ee-requirements.txt
    assert lines[3:] == ["/usr/bin/ssh", "/usr/bin/ssh-agent"]  # meta/ee-bindep.txt's openssh-client


def test_the_audit_job_runs_in_the_image_against_the_lab(image, private_data, gpu_nodes):
    stdout, stats = run_job(private_data, "awx/playbooks/audit.yml")
    hosts = recap(stdout)
    assert set(gpu_nodes) <= set(hosts) and all(c["failed"] == 0 and c["unreachable"] == 0 for c in hosts.values())
    for node in gpu_nodes:
        assert f"{node}  no drift" in stdout, stdout[-4000:]
    assert "2 node(s): 0 drifted, 0 outlier(s)" in stdout
    # the records AWX keeps as the job's artifacts (set_stats), one per node
    assert set(stats.get("gpuops_audit", {})) == set(gpu_nodes), stats
    assert not any(record["drifted"] for record in stats["gpuops_audit"].values()), stats


def test_the_kubernetes_stages_run_in_the_image_and_change_nothing(image, private_data, gpu_nodes):
    stdout, _stats = run_job(private_data, "awx/playbooks/site.yml", "--tags", "cluster,labels,operands")
    hosts = recap(stdout)
    assert set(gpu_nodes) <= set(hosts), hosts
    assert {host: (c["failed"], c["unreachable"], c["changed"]) for host, c in hosts.items()} == \
        {host: (0, 0, 0) for host in hosts}, stdout[-6000:]
    assert "Stage 8 - the operands" in stdout

"""Builds the execution environment of execution-environment.yml for real, as a platform team
builds its AWX image, with what the lab can reach: ansible-builder build, then podman.

  tests/lab/ee/build.py [TAG]        (default localhost/gpuops-nvidia-ee:lab; context in .build/ee)

Only what no registry or Galaxy server here can give is swapped, in a copy of the definition:
- the base image: tests/lab/ee/Containerfile.base, Debian 13 from the lab's own image with pip,
  this machine's trust store and pip's settings for it (the file keeps the usual AWX base);
- kubernetes.core, which awx/requirements.yml asks Galaxy for: installed first from a local
  collection source (tests/lab/collection_source.py); the definition's own steps then install
  gpuops.nvidia from its tarball and awx/requirements.yml offline;
- the package manager: apt-get (the usual bases use dnf), and pip from Debian's package.
Everything else comes from the definition and the collection as users get them: ansible-core and
ansible-runner from the ranges it names, the Python packages and the system packages (bindep) the
collection declares in meta/execution-environment.yml. What the image lacks fails there."""
import os
import shutil
import subprocess
import sys

import yaml

HERE = os.path.dirname(os.path.abspath(__file__))
REPO = os.path.dirname(os.path.dirname(os.path.dirname(HERE)))
BIN = os.path.join(REPO, ".venv", "bin")
BASE = "localhost/gpuops-lab/ee-base:trixie"
TRUST = "/etc/ssl/certs/ca-certificates.crt"


def run(*argv, **kwargs):
    print("[ee] " + " ".join(argv[:4]) + (" ..." if len(argv) > 4 else ""), flush=True)
    subprocess.run(argv, check=True, **kwargs)


def main():
    tag = sys.argv[1] if len(sys.argv) > 1 else "localhost/gpuops-nvidia-ee:lab"
    work = os.path.join(REPO, ".build", "ee")
    shutil.rmtree(work, ignore_errors=True)
    base = os.path.join(work, "base")
    os.makedirs(base)
    shutil.copy(os.path.join(HERE, "Containerfile.base"), os.path.join(base, "Containerfile"))
    shutil.copy(TRUST, os.path.join(base, "site-ca.crt"))
    run("podman", "build", "-q", "-t", BASE, base, stdout=subprocess.DEVNULL)

    # the definition's own files as its README says to lay them out: the collection's tarball at
    # awx/gpuops-nvidia.tar.gz, awx/requirements.yml as the galaxy requirements
    project = os.path.join(work, "definition")
    source = os.path.join(work, "collection-source")
    os.makedirs(os.path.join(project, "awx"))
    os.makedirs(os.path.join(project, "local"))
    res = subprocess.run([os.path.join(BIN, "python"), os.path.join(REPO, "tests", "lab", "collection_source.py"), BIN,
                          source, "kubernetes.core"], capture_output=True, text=True, check=False)
    if res.returncode != 0:
        sys.exit("ee/build: the local collection source failed:\n" + res.stdout + res.stderr)
    ours, kubernetes_core = res.stdout.split()
    shutil.copy(ours, os.path.join(project, "awx", "gpuops-nvidia.tar.gz"))
    shutil.copy(os.path.join(REPO, "awx", "requirements.yml"), os.path.join(project, "awx"))
    shutil.copy(kubernetes_core, os.path.join(project, "local"))
    with open(os.path.join(REPO, "execution-environment.yml"), encoding="utf-8") as handle:
        definition = yaml.safe_load(handle)
    definition["images"]["base_image"]["name"] = BASE
    # kubernetes.core, which awx/requirements.yml asks Galaxy for, is installed first from the local
    # source into the path the galaxy stage installs into; the offline install of the requirements
    # then finds it there (and checks its version against both the file and galaxy.yml)
    definition["additional_build_files"].append({"src": "local", "dest": "local"})
    definition["additional_build_steps"]["prepend_galaxy"] = definition["additional_build_steps"]["prepend_galaxy"] + [
        "COPY _build/local /tmp/local",
        "RUN ansible-galaxy collection install --offline -p /usr/share/ansible/collections /tmp/local/*.tar.gz"]
    definition.setdefault("build_arg_defaults", {})["ANSIBLE_GALAXY_CLI_COLLECTION_OPTS"] = "--offline"
    # (Debian's Python has pip from its package and refuses ensurepip, which ansible-builder runs)
    definition.setdefault("options", {}).update({"package_manager_path": "/usr/bin/apt-get", "skip_pip_install": True})
    with open(os.path.join(project, "execution-environment.yml"), "w", encoding="utf-8") as handle:
        yaml.safe_dump(definition, handle, sort_keys=False)
    run(os.path.join(BIN, "ansible-builder"), "build", "-f", "execution-environment.yml", "-c", "context",
        "-t", tag, "--container-runtime", "podman", "-v", "1", cwd=project)
    print(tag)


if __name__ == "__main__":
    main()

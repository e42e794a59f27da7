# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Installed the way users install it: ansible-galaxy installs the built tarball into an empty
collections path, with its dependencies from a local collection source (a directory of tarballs,
tests/lab/collection_source.py) and nothing else - not the `ansible` bundle's copies
(ANSIBLE_COLLECTIONS_SCAN_SYS_PATH off), not the checkout's .build/collections. What the tarball
declares is what gets installed: a dependency the content uses but galaxy.yml does not declare is
missing there, and the playbooks that use it fail. (The lab's tests run the site playbook from
such an install under the oldest supported ansible-core: test_roles.py.)"""
from __future__ import annotations

import glob
import os
import re
import subprocess
import sys

import pytest
import yaml

from conftest import BIN, REPO  # pylint: disable=import-error

PLAYBOOKS = sorted(os.path.basename(p)[:-4] for p in glob.glob(os.path.join(REPO, "playbooks", "*.yml")))


def _env(tmp_path, collections):
    config = tmp_path / "ansible.cfg"
    config.write_text("[defaults]\n")  # not the checkout's (its collections_path has the checkout's copy)
    env = {k: v for k, v in os.environ.items() if not k.startswith("ANSIBLE_")}
    env.update({"ANSIBLE_CONFIG": str(config), "ANSIBLE_COLLECTIONS_PATH": str(collections),
                "ANSIBLE_COLLECTIONS_SCAN_SYS_PATH": "False", "ANSIBLE_NOCOLOR": "1",
                "PATH": BIN + os.pathsep + env.get("PATH", "")})
    return env


def _galaxy(env, *args, cwd):
    return subprocess.run([os.path.join(BIN, "ansible-galaxy"), "collection", "install", "--offline", *args],
                          cwd=cwd, env=env, capture_output=True, text=True, check=False, timeout=300)


def _syntax(env, playbook, cwd):
    return subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", "localhost,", "--syntax-check",
                           "gpuops.nvidia." + playbook], cwd=cwd, env=env, capture_output=True, text=True,
                          check=False, timeout=300)


@pytest.fixture(scope="module")
def source(tmp_path_factory):
    """The local collection source: gpuops.nvidia's tarball and kubernetes.core's."""
    out = tmp_path_factory.mktemp("source")
    subprocess.run([sys.executable, os.path.join(REPO, "tests", "lab", "collection_source.py"), BIN, str(out),
                    "kubernetes.core"], check=True, capture_output=True, text=True, timeout=300)
    tarball, = glob.glob(str(out / "gpuops-nvidia-*.tar.gz"))
    return out, tarball


def test_the_tarball_installs_with_its_declared_dependencies_from_a_local_source(source, tmp_path):
    out, tarball = source
    collections = tmp_path / "collections"
    env = _env(tmp_path, collections)
    # alone and offline: the resolver names what the tarball declares and nothing here provides
    alone = _galaxy(env, "-p", str(collections), tarball, cwd=tmp_path)
    assert alone.returncode != 0, alone.stdout
    needed = dict(re.findall(r"^\* (\w+\.\w+):(\S+) \(dependency of gpuops\.nvidia:", alone.stdout + alone.stderr, re.M))
    assert needed == {"kubernetes.core": ">=6.0.0"}, alone.stdout + alone.stderr
    assert not (collections / "ansible_collections" / "gpuops").exists()  # nothing half-installed
    # a requirements file naming the tarball and, from the local source, what the resolver asked for
    files = [tarball] + [glob.glob(str(out / (name.replace(".", "-") + "-*.tar.gz")))[0] for name in needed]
    requirements = tmp_path / "requirements.yml"
    requirements.write_text("collections:\n" + "".join(f"  - {{name: {f}, type: file}}\n" for f in files))
    res = _galaxy(env, "-p", str(collections), "-r", str(requirements), cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    listed = subprocess.run([os.path.join(BIN, "ansible-galaxy"), "collection", "list", "--format", "yaml"],
                            cwd=tmp_path, env=env, capture_output=True, text=True, check=True).stdout
    installed = {name: info["version"] for path in yaml.safe_load(listed).values() for name, info in path.items()}
    assert set(installed) == {"gpuops.nvidia", "kubernetes.core"}, listed
    assert installed["kubernetes.core"].startswith("6."), listed
    # every playbook resolves what it calls from there (module_defaults groups, modules, roles)
    for playbook in PLAYBOOKS:
        res = _syntax(env, playbook, tmp_path)
        assert res.returncode == 0, playbook + ": " + res.stdout[-2000:] + res.stderr[-2000:]
    # the site playbook's Kubernetes stages run from the install: render mode, user's example inventory
    installed = collections / "ansible_collections" / "gpuops" / "nvidia"
    render = tmp_path / "render"
    res = subprocess.run([os.path.join(BIN, "ansible-playbook"), "-i", str(installed / "inventories" / "example"),
                          "gpuops.nvidia.site", "--tags", "cluster,operands", "-e", f"gpuops_render_dir={render}",
                          "-e", "gpuops_kubeconfig=" + str(tmp_path / "no-such-kubeconfig")],
                         cwd=tmp_path, env=env, capture_output=True, text=True, check=False, timeout=600)
    assert res.returncode == 0, res.stdout[-4000:] + res.stderr[-2000:]
    assert "[DEPRECATION WARNING]" not in res.stdout + res.stderr, res.stdout + res.stderr
    assert len(glob.glob(str(render / "*.yaml"))) >= 10, os.listdir(render)


def test_without_the_dependency_the_playbooks_fail(source, tmp_path):
    """The check above can fail: the same install without kubernetes.core (--no-deps) leaves
    playbooks that cannot resolve what they call."""
    _out, tarball = source
    collections = tmp_path / "collections"
    env = _env(tmp_path, collections)
    res = _galaxy(env, "--no-deps", "-p", str(collections), tarball, cwd=tmp_path)
    assert res.returncode == 0, res.stdout + res.stderr
    failed = {p: _syntax(env, p, tmp_path) for p in ("upgrade", "allocation")}
    for playbook, res in failed.items():
        assert res.returncode != 0 and "kubernetes.core" in res.stdout + res.stderr, playbook + ": " + res.stdout + res.stderr

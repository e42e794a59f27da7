# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Integration tests: the installed collection's modules, run through the real ansible and
ansible-playbook commands, on nodes simulated by the lab's fake NVML (tests/lab/with-gpus)."""
from __future__ import annotations

import atexit
import hashlib
import json
import os
import shutil
import subprocess
import sys
import tempfile

import pytest

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
sys.path.insert(0, os.path.join(REPO, "tests", "lab"))
from labfacts import H100_MIG_UUIDS, H100_UUIDS, L40S_UUIDS, mig_script  # noqa: E402,F401  pylint: disable=wrong-import-position,unused-import

# The working tree's collection, importable as ansible_collections.gpuops.nvidia, for the tests
# that call module_utils directly (the others run the installed collection through ansible).
_IMPORT_ROOT = tempfile.mkdtemp(prefix="gpuops-nvidia-import-")
atexit.register(shutil.rmtree, _IMPORT_ROOT, True)
os.makedirs(os.path.join(_IMPORT_ROOT, "ansible_collections", "gpuops"))
os.symlink(REPO, os.path.join(_IMPORT_ROOT, "ansible_collections", "gpuops", "nvidia"))
sys.path.insert(0, _IMPORT_ROOT)

# containerd and dockerd of other Debian releases (tests/lab/runtime-binaries)
RELEASES = os.environ.get("GPUOPS_RUNTIME_BINARIES", os.path.join(REPO, ".build", "runtimes"))
GO_BINARIES = os.path.join(REPO, "tests", "lab", "go-binaries")
# `make test` sets it: a missing prerequisite then fails the test instead of skipping it.
REQUIRE_ALL = os.environ.get("GPUOPS_REQUIRE_ALL") == "1"
WITH_GPUS = os.path.join(REPO, "tests", "lab", "with-gpus")
BIN = os.path.dirname(sys.executable)


def _env(**extra):
    env = dict(os.environ)
    env.update({
        "ANSIBLE_CONFIG": os.path.join(REPO, "ansible.cfg"),
        "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json",
        "ANSIBLE_LOAD_CALLBACK_PLUGINS": "1",
        "ANSIBLE_INVENTORY": os.path.join(REPO, "tests", "integration", "inventory.ini"),
        "ANSIBLE_LOCALHOST_WARNING": "0",
        "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
        "PATH": BIN + os.pathsep + env.get("PATH", ""),
    })
    env.update(extra)
    return env


class Lab:
    """Runs ansible commands on a simulated node."""

    def __init__(self, tmp_path):
        self.tmp_path = tmp_path

    def run(self, profile, argv, check=True, env=None, node=False):
        """argv on the simulated node; node: with-gpus --node (the kernel's view too, root)."""
        state = str(self.tmp_path / ("%s.state" % profile))
        cmd = [WITH_GPUS] + (["--node"] if node else []) + [profile, "--"] + argv
        proc = subprocess.run(cmd, cwd=REPO, env=_env(**dict({"GPUOPS_FAKE_NVML_STATE": state}, **(env or {}))),
                              capture_output=True, text=True, timeout=300, check=False)
        if check and proc.returncode != 0:
            raise AssertionError("%s failed (%d):\n%s\n%s" % (cmd, proc.returncode, proc.stdout[-4000:], proc.stderr[-4000:]))
        return proc

    def module(self, profile, module="gpuops.nvidia.gpu_info", args="", check_mode=False, expect_failure=False,
               env=None):
        """Run one module ad hoc on localhost and return its result dict."""
        argv = [os.path.join(BIN, "ansible"), "localhost", "-m", module]
        if args:
            argv += ["-a", args]
        if check_mode:
            argv.append("--check")
        proc = self.run(profile, argv, check=not expect_failure, env=env)
        result = json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]
        return result

    def playbook(self, profile, playbook, extra_vars=None, check=True, check_mode=False, tags=None):
        """Run a playbook; returns (process, json callback output)."""
        argv = [os.path.join(BIN, "ansible-playbook"), playbook]
        if tags:
            argv += ["--tags", tags]
        if check_mode:
            argv.append("--check")
        if extra_vars:
            argv += ["-e", json.dumps(extra_vars)]
        proc = self.run(profile, argv, check=check)
        return proc, json.loads(proc.stdout)


def release(suite, name="containerd"):
    """A runtime binary of another Debian release (tests/lab/runtime-binaries fetches them)."""
    binary = os.path.join(RELEASES, suite, name)
    require(os.access(binary, os.X_OK), binary, "tests/lab/runtime-binaries %s fetches it" % RELEASES)
    return binary


def go_binaries(name):
    """The directory of a set of tests/lab/go-binaries (built when missing)."""
    res = subprocess.run([GO_BINARIES, "--dir", name], capture_output=True, text=True, check=False, timeout=1200)
    assert res.returncode == 0, "tests/lab/go-binaries failed:\n" + res.stderr[-3000:]
    return res.stdout.strip()


def flat(tree, prefix=()):
    """A nested dict as {path tuple: leaf value}."""
    out = {}
    for key, value in (tree or {}).items():
        if isinstance(value, dict) and value:
            out.update(flat(value, prefix + (key,)))
        else:
            out[prefix + (key,)] = value
    return out


def require(present, what, how):
    """Skip (outside `make test`) or fail (under it) when a prerequisite is missing; the reason
    names it and how to get it."""
    if present:
        return
    message = "%s is missing: %s" % (what, how)
    if REQUIRE_ALL:
        pytest.fail(message + " (make test must provide it)")
    pytest.skip(message)


@pytest.fixture
def lab(tmp_path):
    return Lab(tmp_path)


def tree_digest(*paths):
    """Content, mode and mtime of every file under the paths, to prove nothing changed."""
    digest = hashlib.sha256()
    for top in paths:
        for base, dirs, files in os.walk(top):
            dirs.sort()
            for name in sorted(files):
                path = os.path.join(base, name)
                stat = os.lstat(path)
                digest.update(("%s %o %d\n" % (path, stat.st_mode, stat.st_mtime_ns)).encode())
                if os.path.isfile(path) and not os.path.islink(path):
                    with open(path, "rb") as handle:
                        digest.update(handle.read())
    return digest.hexdigest()

# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A fleet of synthetic GPU nodes (kwok) on the lab cluster, upgraded by playbooks/upgrade.yml:
the nodes, an inventory whose host step is the lab's stand-in (tests/lab/upgrade-host-standin.yml:
it takes a given time, then the node reports the new driver as GPU Feature Discovery labels it),
and a watch of every GPU node's upgrade state, schedulability and taints while the playbook runs
(a kubectl watch: every write to a Node is an event, so no short state is missed).

Used by the lab cluster's fleet upgrade test and by tests/benchmarks/upgrade_bench.py."""
from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import threading
import time

LAB = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, LAB)
from kubelab.waiting import wait_for  # noqa: E402  pylint: disable=wrong-import-position

REPO = os.path.dirname(os.path.dirname(LAB))
KUBECTL = os.path.join(REPO, ".venv", "bin", "kubectl")
KUBECONFIG = os.path.join(REPO, ".build", "kube", "kubeconfig")
STATE = "nvidia.com/gpu-driver-upgrade-state"
DRIVER_LABEL = "nvidia.com/cuda.driver-version.full"
GPU_NODES = "nvidia.com/gpu.present=true"


def kubectl(*args, kubeconfig=KUBECONFIG, input=None):
    return subprocess.run([KUBECTL, "--kubeconfig", kubeconfig, *args], input=input, capture_output=True, text=True,
                          check=True).stdout


def create_nodes(count, profile="hgx-h100"):
    """COUNT synthetic nodes of PROFILE (Ready, with the profile's GPUs and labels); their names."""
    subprocess.run([os.path.join(LAB, "kube"), "synthetic", str(count), profile], check=True, capture_output=True)
    return ["gpuops-synthetic-%s-%d" % (profile, i) for i in range(count)]


def delete_nodes():
    subprocess.run([KUBECTL, "--kubeconfig", KUBECONFIG, "delete", "nodes", "-l", "gpuops.lab/node=synthetic"],
                   capture_output=True, check=False)


def gpu_node_count():
    return len(kubectl("get", "nodes", "-l", GPU_NODES, "-o", "name").split())


class NodeWatch:
    """What every GPU node went through while a playbook ran: its upgrade states in order, when
    it was out of service (cordoned), the taints it had, and the most GPU nodes cordoned at once."""

    TEMPLATE = ('{.metadata.name}|{.metadata.labels.nvidia\\.com/gpu-driver-upgrade-state}|{.spec.unschedulable}'
                '|{.spec.taints[*].key}|{.metadata.labels.gpuops\\.nvidia/remediation-state}{"\\n"}')

    def __init__(self, kubeconfig=KUBECONFIG):
        self.kubeconfig = kubeconfig
        self.states = {}          # node -> [state, ...] (None: no state label)
        self.first_change = {}    # node -> time of its first state after the one it had
        self.reached = {}         # (node, state) -> first time
        self.taints = {}          # node -> every taint key it had
        self.out_total = {}       # node -> seconds cordoned
        self.peak = 0             # most GPU nodes cordoned at the same moment
        self.remediation = {}     # node -> [remediation state, ...] (gpuops.nvidia/remediation-state)
        self._out_since = {}
        self._started = None
        self._stop = threading.Event()
        self._proc = None
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self):
        env = dict(os.environ, KUBECONFIG=self.kubeconfig)
        while not self._stop.is_set():  # (the API server ends a watch after a while)
            self._proc = subprocess.Popen([KUBECTL, "get", "nodes", "-l", GPU_NODES, "--watch",
                                           "-o", "jsonpath=" + self.TEMPLATE],
                                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True, env=env)
            for line in self._proc.stdout:
                self._event(time.time(), *(line.rstrip("\n").split("|") + ["", "", "", ""])[:5])
            self._proc.wait()

    def _event(self, now, name, state, unschedulable, taints, remediation=""):
        state = state or None
        seen_remediation = self.remediation.setdefault(name, [])
        if remediation and (not seen_remediation or seen_remediation[-1] != remediation):
            seen_remediation.append(remediation)
        seen = self.states.setdefault(name, [])
        if not seen or seen[-1] != state:
            if seen:
                self.first_change.setdefault(name, now)
            seen.append(state)
            self.reached.setdefault((name, state), now)
        self.taints.setdefault(name, set()).update(taints.split())
        if unschedulable == "true":
            self._out_since.setdefault(name, now)
        elif name in self._out_since:
            self.out_total[name] = self.out_total.get(name, 0) + now - self._out_since.pop(name)
        self.peak = max(self.peak, len(self._out_since))

    def _now(self):
        """{node: (state, unschedulable, taints)} of the GPU nodes as the API server has them now."""
        # (a list, unlike the watch's single objects: the template over each item)
        out = kubectl("get", "nodes", "-l", GPU_NODES, "-o", "jsonpath={range .items[*]}" + self.TEMPLATE + "{end}",
                      kubeconfig=self.kubeconfig)
        return {name: (state or None, unschedulable == "true", set(taints.split()))
                for name, state, unschedulable, taints, _remediation in
                ((line.split("|") + ["", "", "", ""])[:5] for line in out.splitlines() if line)}

    def _caught_up(self, nodes):
        """Whether the watch has seen NODES (_now()) as they are: each one's state, cordon and taints."""
        states, out, taints = dict(self.states), set(self._out_since), dict(self.taints)
        return all(states.get(name, [object()])[-1] == state and (name in out) == cordoned
                   and have <= taints.get(name, set()) for name, (state, cordoned, have) in nodes.items())

    def __enter__(self):
        self._thread.start()
        # the watch lists the nodes first
        nodes = self._now()
        try:
            wait_for(lambda: self._caught_up(nodes), 30, "the node watch to list the %d GPU nodes" % len(nodes))
        except AssertionError:
            # (seen right after the synthetic nodes of a run before were deleted and made again: a
            # watch that has not caught up in 30 s is ended, and the next one lists afresh)
            if self._proc is not None:
                self._proc.terminate()
            nodes = self._now()
            wait_for(lambda: self._caught_up(nodes), 60, "the node watch to list the %d GPU nodes" % len(nodes))
        self._started = time.time()
        return self

    def elapsed(self):
        return time.time() - self._started

    def __exit__(self, *exc):
        try:
            if exc[0] is None:
                # the watch's events lag the API server's writes: it has seen the last of them first
                nodes = self._now()
                wait_for(lambda: self._caught_up(nodes), 60, "the node watch to see the GPU nodes' last state")
        finally:
            self._stop.set()
            if self._proc is not None:
                self._proc.terminate()
            self._thread.join(10)
        now = time.time()  # (a node still cordoned counts until now)
        for name, since in self._out_since.items():
            self.out_total[name] = self.out_total.get(name, 0) + now - since


def upgrade(names, target, max_unavailable="25%", parallel=16, step=5, extra=None, forks=None):
    """Run playbooks/upgrade.yml over the synthetic NAMES to driver TARGET (pre-flight left out:
    a synthetic node has no host to check); the completed process."""
    return playbook("upgrade.yml", names, {
        "driver_branch": target.split(".")[0], "driver_version": target,
        "driver_upgrade_host_tasks": os.path.join(LAB, "upgrade-host-standin.yml"),
        "driver_upgrade_validate": False, "driver_upgrade_refresh_cdi": False,
        "driver_upgrade_max_unavailable": max_unavailable,
        "bench_upgrade_seconds": step, "bench_kubectl": KUBECTL, "driver_upgrade_drain_delay": 2},
        dict({"upgrade_max_parallel": parallel}, **(extra or {})), ["--skip-tags", "preflight"],
        forks=forks or parallel + 4)


def playbook(name, names, inventory_vars, extra=None, args=(), forks=5, env=None, wait=True):
    """Run playbooks/NAME over an inventory of the synthetic NAMES (gpu_nodes, run on the
    controller, each its Kubernetes node) with INVENTORY_VARS and the extra vars EXTRA: the
    completed process, or (wait=False) the running one, its output in .stdout_path."""
    python = os.path.join(REPO, ".venv", "bin", "python")
    inventory = {"all": {"children": {"gpu_nodes": {"hosts": {
        node: {"ansible_connection": "local", "ansible_python_interpreter": python,
               "driver_upgrade_node_name": node, "node_labels_node_name": node} for node in names}}},
        "vars": dict({"gpuops_kubeconfig": KUBECONFIG}, **inventory_vars)}}
    tmp = tempfile.mkdtemp(prefix="gpuops-synthetic-fleet-")
    path = os.path.join(tmp, "hosts.json")
    with open(path, "w", encoding="utf-8") as handle:
        json.dump(inventory, handle)
    run_env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_FORCE_COLOR="0",
                   TMPDIR=tmp, **(env or {}))
    command = [os.path.join(REPO, ".venv", "bin", "ansible-playbook"), "-i", path, "-f", str(forks),
               os.path.join(REPO, "playbooks", name), *args, "-e", json.dumps(extra or {})]
    if wait:
        try:
            return subprocess.run(command, cwd=REPO, env=run_env, capture_output=True, text=True, check=False,
                                  timeout=3600)
        finally:
            shutil.rmtree(tmp, ignore_errors=True)
    out = os.path.join(tmp, "output.log")
    with open(out, "w", encoding="utf-8") as handle:
        proc = subprocess.Popen(command, cwd=REPO, env=run_env, stdout=handle,  # pylint: disable=consider-using-with
                                stderr=subprocess.STDOUT, text=True)
    proc.stdout_path = out
    return proc


def waves(stdout):
    """The waves a run went through (the canary's included), from its plays."""
    return stdout.count("\nPLAY [Upgrade 3 - ") + stdout.count("\nPLAY [Upgrade 5 - ")

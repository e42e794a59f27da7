# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rolling driver upgrade of N synthetic GPU nodes of the lab cluster (kwok), through
playbooks/upgrade.yml and the driver_upgrade role against the real API server: prints the most
GPU nodes out of service at any moment against max_unavailable, the waves against the least
possible (ceil(N / slots), plus the canary's), and the GPU-node-minutes out of service against the
theoretical minimum (every node out only for its host step). The host step of a synthetic node is
tests/lab/upgrade-host-standin.yml (it takes --step seconds and labels the new driver).

    make lab            # the lab cluster must be up
    .venv/bin/python tests/benchmarks/upgrade_bench.py [--nodes 64] [--parallel 16] [--step 5]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import subprocess
import sys
import tempfile
import threading
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
KUBE = os.path.join(REPO, "tests", "lab", "kube")
KUBECTL = os.path.join(REPO, ".venv", "bin", "kubectl")
KUBECONFIG = os.path.join(REPO, ".build", "kube", "kubeconfig")
PROFILE, TARGET = "hgx-h100", "580.95.05"


def kubectl(*args):
    return subprocess.run([KUBECTL, "--kubeconfig", KUBECONFIG, *args], capture_output=True, text=True, check=True).stdout


class Watch(threading.Thread):
    """Polls the nodes: the most out of service at once, and each node's time out of service."""

    def __init__(self, names):
        super().__init__(daemon=True)
        self.names, self.peak, self.out_since, self.out_total = set(names), 0, {}, {}
        self.all_peak = 0
        self.stop = threading.Event()

    def run(self):
        while not self.stop.is_set():
            items = json.loads(kubectl("get", "nodes", "-l", "nvidia.com/gpu.present=true", "-o", "json"))["items"]
            now = time.time()
            out = {n["metadata"]["name"] for n in items if n["spec"].get("unschedulable")}
            self.all_peak = max(self.all_peak, len(out))
            self.peak = max(self.peak, len(out & self.names))
            for name in self.names:
                if name in out and name not in self.out_since:
                    self.out_since[name] = now
                elif name not in out and name in self.out_since:
                    self.out_total[name] = self.out_total.get(name, 0) + now - self.out_since.pop(name)
            time.sleep(0.5)


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--parallel", type=int, default=16)
    parser.add_argument("--max-unavailable", default="25%")
    parser.add_argument("--step", type=int, default=5, help="seconds of a synthetic node's host step")
    args = parser.parse_args()
    if not os.path.exists(KUBECONFIG):
        sys.exit("the lab cluster is not up: run make lab first")
    subprocess.run([KUBE, "synthetic", str(args.nodes), PROFILE], check=True, capture_output=True)
    names = kubectl("get", "nodes", "-l", "gpuops.lab/profile=" + PROFILE + ",gpuops.lab/node=synthetic",
                    "-o", "jsonpath={.items[*].metadata.name}").split()[:args.nodes]
    python = os.path.join(REPO, ".venv", "bin", "python")
    inventory = {"all": {"children": {"gpu_nodes": {"hosts": {
        name: {"ansible_connection": "local", "ansible_python_interpreter": python,
               "driver_upgrade_node_name": name} for name in names}}},
        "vars": {"gpuops_kubeconfig": KUBECONFIG, "driver_branch": "580", "driver_version": TARGET,
                 "driver_upgrade_host_tasks": os.path.join(REPO, "tests", "lab", "upgrade-host-standin.yml"),
                 "driver_upgrade_validate": False, "driver_upgrade_refresh_cdi": False,
                 "driver_upgrade_max_unavailable": args.max_unavailable,
                 "bench_upgrade_seconds": args.step, "driver_upgrade_drain_delay": 2}}}
    with tempfile.TemporaryDirectory(prefix="gpuops-upgrade-bench-") as tmp:
        path = os.path.join(tmp, "hosts.json")
        with open(path, "w", encoding="utf-8") as handle:
            json.dump(inventory, handle)
        watch = Watch(names)
        watch.start()
        start = time.time()
        env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_FORCE_COLOR="0",
                   TMPDIR=tmp)
        res = subprocess.run([os.path.join(REPO, ".venv", "bin", "ansible-playbook"), "-i", path, "-f", str(args.parallel + 4),
                              os.path.join(REPO, "playbooks", "upgrade.yml"), "--skip-tags", "preflight",
                              "-e", json.dumps({"upgrade_max_parallel": args.parallel})],
                             cwd=REPO, env=env, capture_output=True, text=True, check=False)
        wall = time.time() - start
        watch.stop.set()
        watch.join(5)
    try:
        if res.returncode != 0:
            first = res.stdout.find("fatal: ")
            print(res.stdout[max(first - 1500, 0):first + 3000] if first >= 0 else res.stdout[-5000:], res.stderr[-2000:])
            sys.exit("the upgrade failed")
        total_gpu_nodes = len(kubectl("get", "nodes", "-l", "nvidia.com/gpu.present=true", "-o", "name").split())
        limit = math.ceil(total_gpu_nodes * float(args.max_unavailable.rstrip("%")) / 100) \
            if args.max_unavailable.endswith("%") else int(args.max_unavailable)
        slots = min(limit, args.parallel)
        waves = res.stdout.count("\nPLAY [Upgrade 3 - ") + res.stdout.count("\nPLAY [Upgrade 5 - ")
        least_waves = 1 + math.ceil((len(names) - 1) / slots)
        node_minutes = sum(watch.out_total.values()) / 60
        least = len(names) * args.step / 60
        done = sum(1 for n in json.loads(kubectl("get", "nodes", "-o", "json"))["items"]
                   if n["metadata"]["name"] in names
                   and n["metadata"]["labels"].get("nvidia.com/gpu-driver-upgrade-state") == "upgrade-done")
        print(f"synthetic GPU nodes upgraded:      {done} of {len(names)} (cluster: {total_gpu_nodes} GPU nodes)")
        print(f"max unavailable at any moment:     {watch.all_peak} (max_unavailable {args.max_unavailable} = {limit})")
        print(f"waves:                             {waves} (least: {least_waves} = canary + ceil({len(names) - 1}/{slots}))")
        print(f"GPU-node-minutes out of service:   {node_minutes:.1f} (theoretical minimum {least:.1f}: "
              f"{node_minutes / least:.2f}x)")
        print(f"wall time:                         {wall:.0f} s")
    finally:
        subprocess.run([KUBECTL, "--kubeconfig", KUBECONFIG, "delete", "nodes", "-l", "gpuops.lab/node=synthetic"],
                       capture_output=True, check=False)


if __name__ == "__main__":
    main()

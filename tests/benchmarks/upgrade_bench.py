# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Rolling driver upgrade of N synthetic GPU nodes of the lab cluster (kwok), through
playbooks/upgrade.yml and the driver_upgrade role against the real API server: prints the most
GPU nodes out of service at any moment against max_unavailable, the waves against the least
possible (ceil(N / slots), plus the canary's), and the GPU-node-minutes out of service against the
theoretical minimum (every node out only for its host step), and the overhead per node: the
seconds each node was out of service beyond its host step (the engine's Kubernetes steps). The host
step of a synthetic node is tests/lab/upgrade-host-standin.yml (it takes --step seconds and labels
the new driver).

    make lab            # the lab cluster must be up
    .venv/bin/python tests/benchmarks/upgrade_bench.py [--nodes 64] [--parallel 16] [--step 5]
"""
from __future__ import annotations

import argparse
import json
import math
import os
import sys

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), "..", "lab"))
import synthetic_fleet as fleet  # noqa: E402  pylint: disable=wrong-import-position

PROFILE, TARGET = "hgx-h100", "580.95.05"


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--nodes", type=int, default=64)
    parser.add_argument("--parallel", type=int, default=16)
    parser.add_argument("--max-unavailable", default="25%")
    parser.add_argument("--step", type=int, default=5, help="seconds of a synthetic node's host step")
    args = parser.parse_args()
    if not os.path.exists(fleet.KUBECONFIG):
        sys.exit("the lab cluster is not up: run make lab first")
    names = fleet.create_nodes(args.nodes, PROFILE)
    try:
        with fleet.NodeWatch() as watch:
            res = fleet.upgrade(names, TARGET, max_unavailable=args.max_unavailable, parallel=args.parallel,
                                step=args.step)
            wall = watch.elapsed()
        if res.returncode != 0:
            first = res.stdout.find("fatal: ")
            print(res.stdout[max(first - 1500, 0):first + 3000] if first >= 0 else res.stdout[-5000:], res.stderr[-2000:])
            sys.exit("the upgrade failed")
        total_gpu_nodes = fleet.gpu_node_count()
        limit = math.ceil(total_gpu_nodes * float(args.max_unavailable.rstrip("%")) / 100) \
            if args.max_unavailable.endswith("%") else int(args.max_unavailable)
        slots = min(limit, args.parallel)
        least_waves = 1 + math.ceil((len(names) - 1) / slots)
        node_minutes = sum(watch.out_total.get(name, 0) for name in names) / 60
        least = len(names) * args.step / 60
        done = sum(1 for n in json.loads(fleet.kubectl("get", "nodes", "-o", "json"))["items"]
                   if n["metadata"]["name"] in names and n["metadata"]["labels"].get(fleet.STATE) == "upgrade-done")
        print(f"synthetic GPU nodes upgraded:      {done} of {len(names)} (cluster: {total_gpu_nodes} GPU nodes)")
        print(f"max unavailable at any moment:     {watch.peak} (max_unavailable {args.max_unavailable} = {limit})")
        print(f"waves:                             {fleet.waves(res.stdout)} (least: {least_waves} = canary + "
              f"ceil({len(names) - 1}/{slots}))")
        print(f"GPU-node-minutes out of service:   {node_minutes:.1f} (theoretical minimum {least:.1f}: "
              f"{node_minutes / least:.2f}x; goal at most 1.15x)")
        print(f"overhead per node:                 {(node_minutes * 60 - len(names) * args.step) / len(names):.1f} s "
              f"out of service beyond its {args.step} s host step (goal under 10 s)")
        print(f"wall time:                         {wall:.0f} s")
    finally:
        fleet.delete_nodes()


if __name__ == "__main__":
    main()

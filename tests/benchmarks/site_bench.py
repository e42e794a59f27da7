# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What a converged run costs on the lab's nodes: the site's host stages and the whole site a
second time (each must report changed=0) and the drift audit, each against a one-task play over
the same hosts (the cost of reaching them at all), with the task results per host and the goals
(whole site: at most 120 task results per GPU node and 25x; host stages 10x).

    make lab            # the lab must be up and converged
    .venv/bin/python tests/benchmarks/site_bench.py [--runs 3]
"""
from __future__ import annotations

import argparse
import os
import re
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
PLAYBOOK = os.path.join(REPO, ".venv", "bin", "ansible-playbook")
INVENTORY = os.path.join(REPO, "inventories", "lab")
HOST_STAGES = "preflight,driver,toolkit,mig,report"
GOALS = {"host stages": 10.0, "whole site": 25.0}
MAX_RESULTS = 120


def run(*args):
    env = dict(os.environ, ANSIBLE_CONFIG=os.path.join(REPO, "ansible.cfg"), ANSIBLE_FORCE_COLOR="0",
               CONTAINERS_CONF=os.path.join(REPO, "tests", "lab", "containers.conf"))
    start = time.time()
    res = subprocess.run([PLAYBOOK, "-i", INVENTORY, *args], cwd=REPO, env=env, capture_output=True, text=True,
                         check=False)
    return time.time() - start, res


def recap(stdout):
    """{host: {ok, changed, skipped, failed, ...}} of the last PLAY RECAP."""
    out = {}
    for line in stdout[stdout.rindex("PLAY RECAP"):].splitlines()[1:]:
        match = re.match(r"^(\S+)\s+:\s+(.*)$", line)
        if match:
            out[match.group(1)] = {k: int(v) for k, v in re.findall(r"(\w+)=(\d+)", match.group(2))}
    return out


def timed(runs, *args, expect_ok=True):
    times, last = [], None
    for _run in range(runs):
        seconds, res = run(*args)
        if expect_ok and res.returncode != 0:
            sys.exit("ansible-playbook %s failed:\n%s" % (" ".join(args), res.stdout[-4000:]))
        times.append(seconds)
        last = res
    return statistics.median(times), last


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--runs", type=int, default=3)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as tmp:
        one = os.path.join(tmp, "one-task.yml")
        with open(one, "w", encoding="utf-8") as handle:
            handle.write("- hosts: gpu_nodes\n  gather_facts: false\n  tasks:\n    - ansible.builtin.ping:\n")
        base, _res = timed(args.runs, one)
        site, res = timed(args.runs, os.path.join(REPO, "playbooks", "site.yml"), "--tags", HOST_STAGES)
        counts = recap(res.stdout)
        whole, wres = timed(args.runs, os.path.join(REPO, "playbooks", "site.yml"))
        wcounts = recap(wres.stdout)
        audit, ares = timed(args.runs, os.path.join(REPO, "playbooks", "audit.yml"), "-e",
                            "gpuops_audit_report_path=" + os.path.join(tmp, "audit.json"))
        acounts = recap(ares.stdout)
    gpu_nodes = set(counts)
    print(f"one-task play (ping):                      {base:6.1f} s")
    verdicts = []
    for name, seconds, found in (("host stages", site, counts), ("whole site", whole, wcounts)):
        ratio = seconds / base
        verdicts.append(ratio <= GOALS[name])
        print(f"converged {name:12s}                    {seconds:6.1f} s = {ratio:4.1f}x the one-task play "
              f"(goal {GOALS[name]:.0f}x: {'met' if ratio <= GOALS[name] else 'NOT met'})")
        for host, c in sorted(found.items()):
            results = c["ok"] + c["skipped"] + c["failed"]
            goal = ""
            if name == "whole site" and host in gpu_nodes:
                goal = f" (goal {MAX_RESULTS}: {'met' if results <= MAX_RESULTS else 'NOT met'})"
                verdicts.append(results <= MAX_RESULTS)
            print(f"  {host}: changed={c['changed']}, task results {results} (ok {c['ok']}, skipped {c['skipped']})"
                  + goal)
    print(f"drift audit:                               {audit:6.1f} s = {audit / base:4.1f}x the one-task play")
    for host, c in sorted(acounts.items()):
        print(f"  {host}: task results {c['ok'] + c['skipped'] + c['failed']}")
    print("goals: %d of %d met" % (sum(verdicts), len(verdicts)))
    if any(c["changed"] for found in (counts, wcounts) for c in found.values()):
        sys.exit("the converged run changed something: it is not converged")


if __name__ == "__main__":
    main()

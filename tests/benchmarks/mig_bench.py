# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""MIG benchmark: prints figures, asserts nothing.

1. Planning time of gpuops.nvidia's MIG planner (module_utils/mig/plan.py) for every usual layout
   on 8 GPUs of each simulated model, from MIG on with no instances and from another layout,
   on the facts the fake NVML reports (read once through mig_nvml).
2. NVML mutations (mode changes, GPU/compute instance creates and destroys, from the fake's call
   log) that a sequence of layout changes costs: the gpuops.nvidia.mig module, the least the
   change needs (instances whose profile count drops must go, those whose count rises must be
   made, a compute instance with each), and NVIDIA's nvidia-mig-parted on the same fake GPUs.

    .venv/bin/python tests/benchmarks/mig_bench.py [--rounds N]     (root: mig-parted runs under
                                                                      with-gpus --node)
Needs `make fake-nvml collection` and tests/lab/go-binaries mig-parted."""

from __future__ import annotations

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
WITH_GPUS = os.path.join(REPO, "tests", "lab", "with-gpus")
BIN = os.path.dirname(sys.executable)

LAYOUTS = {
    "hgx-h100": {"all-1g": {"1g.10gb": 7}, "all-1g.20gb": {"1g.20gb": 4}, "all-2g": {"2g.20gb": 3},
                 "all-3g": {"3g.40gb": 2}, "all-4g": {"4g.40gb": 1}, "all-7g": {"7g.80gb": 1},
                 "all-balanced": {"1g.10gb": 2, "2g.20gb": 1, "3g.40gb": 1}, "four-three": {"4g.40gb": 1, "3g.40gb": 1}},
    "dgx-a100": {"all-1g": {"1g.5gb": 7}, "all-2g": {"2g.10gb": 3}, "all-3g": {"3g.20gb": 2},
                 "all-balanced": {"1g.5gb": 2, "2g.10gb": 1, "3g.20gb": 1}, "four-three": {"4g.20gb": 1, "3g.20gb": 1}},
    "hgx-h200": {"all-1g": {"1g.18gb": 7}, "all-3g": {"3g.71gb": 2},
                 "all-balanced": {"1g.18gb": 2, "2g.35gb": 1, "3g.71gb": 1}},
    "hgx-b200": {"all-1g": {"1g.23gb": 7}, "all-3g": {"3g.90gb": 2},
                 "all-balanced": {"1g.23gb": 2, "2g.45gb": 1, "3g.90gb": 1}},
    "rtx-pro-6000-x4": {"all-1g": {"1g.24gb": 4}, "all-2g": {"2g.48gb": 2},
                        "all-balanced": {"1g.24gb": 2, "2g.48gb": 1}, "all-4g": {"4g.96gb": 1}},
}
SEQUENCE = ["all-balanced", "all-1g", "four-three", "all-balanced", "all-3g", "all-disabled"]


def document(layouts):
    configs = {"all-disabled": [{"devices": "all", "mig-enabled": False}]}
    for name, devices in layouts.items():
        configs[name] = [{"devices": "all", "mig-enabled": True, "mig-devices": devices}]
    return {"version": "v1", "mig-configs": configs}


FACTS = """
import json, sys
sys.path.insert(0, sys.argv[1])
import pynvml
from ansible_collections.gpuops.nvidia.plugins.module_utils.nvml import mig as mig_nvml
pynvml.nvmlInit()
for i in range(pynvml.nvmlDeviceGetCount()):
    pynvml.nvmlDeviceSetMigMode(pynvml.nvmlDeviceGetHandleByIndex(i), 1)
gpus, _ = mig_nvml.read_node()
print(json.dumps(gpus))
"""


def run(profile, argv, env, node=False):
    cmd = [WITH_GPUS] + (["--node"] if node else []) + [profile, "--"] + argv
    return subprocess.run(cmd, cwd=REPO, env=dict(os.environ, **env), capture_output=True, text=True, check=False,
                          timeout=600)


def planning(rounds, tmp):
    sys.path.insert(0, os.path.join(REPO, ".build", "collections"))
    from ansible_collections.gpuops.nvidia.plugins.module_utils.mig import config as mig_config
    from ansible_collections.gpuops.nvidia.plugins.module_utils.mig import plan as mig_plan

    print("1. planning time for every GPU of the node (8; the RTX PRO node has 4), median of %d runs, ms" % rounds)
    print("   %-16s %-14s %12s %16s" % ("model", "layout", "from empty", "from balanced"))
    for profile, layouts in LAYOUTS.items():
        env = {"GPUOPS_FAKE_NVML_STATE": os.path.join(tmp, profile + ".facts.state")}
        res = run(profile, [sys.executable, "-c", FACTS, os.path.join(REPO, ".build", "collections")], env)
        if res.returncode != 0:
            print("   %s: facts could not be read: %s" % (profile, res.stderr.strip()[-300:]))
            continue
        gpus = json.loads(res.stdout)
        doc = document(layouts)
        balanced = None
        entries = mig_config.select(doc, "all-balanced")
        base = mig_plan.plan(gpus, mig_config.assign("all-balanced", entries, gpus), "all-balanced")
        balanced = []
        for g, p in zip(gpus, base["gpus"]):
            made = [dict(profile=s["profile"], placement=s["placement"], id=k, profile_id=s["profile_id"],
                         compute_instances=[{"id": 0, "profile_id": 0, "slices": None}])
                    for k, s in enumerate(x for x in p["steps"] if x["action"] == "create_gpu_instance")]
            balanced.append(dict(g, gpu_instances=made))
        for name in layouts:
            entries = mig_config.select(doc, name)
            figures = []
            for start in (gpus, balanced):
                assignment = mig_config.assign(name, entries, start)
                times = []
                for _round in range(rounds):
                    t0 = time.perf_counter()
                    result = mig_plan.plan(start, assignment, name)
                    times.append((time.perf_counter() - t0) * 1000)
                assert not result["errors"], result["errors"]
                figures.append(statistics.median(times))
            print("   %-16s %-14s %12.2f %16.2f" % (profile, name, figures[0], figures[1]))


def least(before, after):
    """The mutations a change from layout `before` to `after` ({profile: count}, None = MIG off)
    needs at least: each instance that must go (compute + GPU instance), each that must be
    made, and a mode change when MIG turns on or off."""
    b, a = before or {}, after or {}
    go = sum(max(0, c - a.get(p, 0)) for p, c in b.items())
    make = sum(max(0, c - b.get(p, 0)) for p, c in a.items())
    return 2 * go + 2 * make + ((before is None) != (after is None))


def mutations(log):
    if not os.path.exists(log):
        return 0
    with open(log, encoding="utf-8") as handle:
        return sum(1 for line in handle if "injected" not in line and not line.startswith("reset "))


def mutation_counts(tmp):
    parted = subprocess.run([os.path.join(REPO, "tests", "lab", "go-binaries"), "--dir", "mig-parted"],
                            capture_output=True, text=True, check=False).stdout.strip()
    parted = os.path.join(parted, "nvidia-mig-parted") if parted else None
    env_base = {"ANSIBLE_COLLECTIONS_PATH": os.path.join(REPO, ".build", "collections"),
                "ANSIBLE_LOCALHOST_WARNING": "0", "ANSIBLE_PYTHON_INTERPRETER": sys.executable,
                "ANSIBLE_STDOUT_CALLBACK": "ansible.builtin.json", "PATH": BIN + os.pathsep + os.environ["PATH"]}
    print("\n2. NVML mutations per layout change, 8 GPUs")
    for profile in ("hgx-h100", "dgx-a100"):
        doc = document(LAYOUTS[profile])
        cfg = os.path.join(tmp, profile + ".yaml")
        with open(cfg, "w", encoding="utf-8") as handle:
            json.dump(doc, handle)
        ours_log, theirs_log = os.path.join(tmp, profile + ".ours.log"), os.path.join(tmp, profile + ".theirs.log")
        ours_env = dict(env_base, GPUOPS_FAKE_NVML_STATE=os.path.join(tmp, profile + ".ours.state"),
                        GPUOPS_FAKE_NVML_CALL_LOG=ours_log)
        theirs_env = dict(env_base, GPUOPS_FAKE_NVML_STATE=os.path.join(tmp, profile + ".theirs.state"),
                          GPUOPS_FAKE_NVML_CALL_LOG=theirs_log)
        print("   %s\n   %-28s %8s %8s %11s %9s" % (profile, "change", "module", "least", "mig-parted", "seconds"))
        previous = None
        for name in SEQUENCE:
            n0, m0 = mutations(ours_log), mutations(theirs_log)
            t0 = time.time()
            res = run(profile, [os.path.join(BIN, "ansible"), "localhost", "-m", "gpuops.nvidia.mig", "-a",
                                json.dumps({"config_file": cfg, "config_name": name, "profile_record": ""})], ours_env)
            took = time.time() - t0
            if res.returncode != 0:
                print("   %s: the module failed: %s" % (name, res.stdout[-500:]))
                return
            theirs = "-"
            if parted and os.geteuid() == 0:
                ok = run(profile, [parted, "apply", "-f", cfg, "-c", name], theirs_env, node=True).returncode == 0
                theirs = str(mutations(theirs_log) - m0) if ok else "failed"
            want = None if name == "all-disabled" else dict(LAYOUTS[profile][name])
            per_gpu = least(previous, want)
            print("   %-28s %8d %8d %11s %9.1f" % ("%s -> %s" % (
                "off" if previous is None else "...", name), mutations(ours_log) - n0, 8 * per_gpu, theirs, took))
            previous = want


def main():
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--rounds", type=int, default=20)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory(prefix="gpuops-mig-bench-") as tmp:
        planning(args.rounds, tmp)
        mutation_counts(tmp)


if __name__ == "__main__":
    main()

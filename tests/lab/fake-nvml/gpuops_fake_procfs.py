"""gpuops-fake-procfs - the lab's stand-in for the /proc/driver entries of NVIDIA's kernel module,
inside the containers of a lab node.

    gpuops-fake-procfs mig-minors        print /proc/driver/nvidia-caps/mig-minors
    gpuops-fake-procfs hook              OCI createRuntime hook (state on stdin): mount it in the container
    gpuops-fake-procfs runc ARGS...      runc, with the hook added to the bundle of `create` and `run`

On a real node nvidia.ko creates /proc/driver/nvidia-caps/mig-minors, the table of the device
minors of the MIG capabilities (NVIDIA's MIG user guide, "/proc/driver/nvidia-caps/mig-minors";
the numbering of kernel-open/nvidia/nv-caps.c): "config 1", "monitor 2", then for GPU minors 0 to
31, GPU instances 0 to 14 and compute instances 0 to 7 "gpuG/giI/access M" and
"gpuG/giI/ciC/access M". Every process on the node sees it, containers included, since procfs
shows the kernel's entries. NVIDIA's device plugin reads that fixed path to find the
/dev/nvidia-caps nodes of a MIG device (internal/mig/mig-dp.go) and advertises no MIG device
without it.

A lab node runs on a kernel without nvidia.ko, and no file can be created in procfs. So, while the
fake driver is loaded (/dev/nvidiactl exists), every container of the node gets a small read-only
tmpfs over its /proc/driver holding nvidia-caps/mig-minors, mounted by an OCI createRuntime hook
in the container's mount namespace after runc has mounted its /proc and before pivot_root (the
stage at which NVIDIA's libnvidia-container, as a prestart hook, mounts its /proc/driver/nvidia
files). runc runs prestart hooks before createRuntime hooks, so this tmpfs would hide such files;
the lab has none (its toolkit runs in CDI modes, which mount nothing under /proc). The hook comes in through a
`runc` earlier on PATH than the real one (/usr/local/sbin/runc, put there by the lab cluster), which
adds it to the bundle's config.json and runs /usr/sbin/runc. Nothing of this is on a real node, and
no role depends on it. A failing hook says why on stderr and lets the container start without the
entry, as on a node whose driver lacks it.
"""

import json
import os
import subprocess
import sys

CAP_CONFIG, CAP_MONITOR, CAP_MIG_FIRST, CAP_PER_GI, CAP_GIS, CAP_CIS, CAP_GPUS = 1, 2, 3, 9, 15, 8, 32
# (the GPUOPS_FAKE_PROCFS_* variables are for this tool's own tests, off a lab node)
REAL_RUNC = os.environ.get("GPUOPS_FAKE_PROCFS_RUNC", "/usr/sbin/runc")
HOOK = os.environ.get("GPUOPS_FAKE_PROCFS_HOOK", "/usr/sbin/gpuops-fake-procfs")
HOOK_ARGS = ["gpuops-fake-procfs", "hook"]
DRIVER_LOADED = os.environ.get("GPUOPS_FAKE_PROCFS_LOADED", "/dev/nvidiactl")
# runc's global options that take a value (runc --help)
RUNC_VALUE_OPTIONS = {"--root", "--log", "--log-format", "--criu", "--rootless"}


def mig_minors():
    """The text of /proc/driver/nvidia-caps/mig-minors, as nvidia.ko numbers the capabilities."""
    lines = ["config %d" % CAP_CONFIG, "monitor %d" % CAP_MONITOR]
    for gpu in range(CAP_GPUS):
        for gi in range(CAP_GIS):
            base = CAP_MIG_FIRST + gpu * CAP_GIS * CAP_PER_GI + gi * CAP_PER_GI
            lines.append("gpu%d/gi%d/access %d" % (gpu, gi, base))
            lines.extend("gpu%d/gi%d/ci%d/access %d" % (gpu, gi, ci, base + 1 + ci) for ci in range(CAP_CIS))
    return "\n".join(lines) + "\n"


def runc_command(args):
    """(subcommand, bundle) of a runc command line: the bundle of create/run (--bundle/-b, else the
    working directory), None otherwise."""
    i = 0
    while i < len(args):
        arg = args[i]
        if arg in RUNC_VALUE_OPTIONS:
            i += 2
            continue
        if arg.startswith("-"):
            i += 1
            continue
        break
    if i >= len(args):
        return None, None
    sub, rest = args[i], args[i + 1:]
    if sub not in ("create", "run"):
        return sub, None
    for j, arg in enumerate(rest):
        if arg in ("--bundle", "-b") and j + 1 < len(rest):
            return sub, rest[j + 1]
        if arg.startswith("--bundle="):
            return sub, arg.split("=", 1)[1]
    return sub, os.getcwd()


def add_hook(config):
    """The OCI config with the hook among its createRuntime hooks (once)."""
    hooks = config.setdefault("hooks", {}).setdefault("createRuntime", [])
    if not any(h.get("path") == HOOK for h in hooks):
        env = ["PATH=/usr/sbin:/usr/bin:/sbin:/bin"] + sorted(
            "%s=%s" % kv for kv in os.environ.items() if kv[0].startswith("GPUOPS_FAKE_PROCFS_"))
        hooks.append({"path": HOOK, "args": list(HOOK_ARGS), "env": env, "timeout": 30})
    return config


def add_hook_to_bundle(bundle):
    path = os.path.join(bundle, "config.json")
    with open(path, encoding="utf-8") as f:
        config = json.load(f)
    mode = os.stat(path).st_mode & 0o7777
    tmp = path + ".gpuops-fake-procfs"
    with open(tmp, "w", encoding="utf-8") as f:
        json.dump(add_hook(config), f)
    os.chmod(tmp, mode)
    os.replace(tmp, path)


def hook(state):
    """Mount the entries in the container whose OCI state is `state`."""
    if not os.path.exists(DRIVER_LOADED):
        return "the fake driver is not loaded: no /proc/driver entries"
    bundle = state["bundle"]
    with open(os.path.join(bundle, "config.json"), encoding="utf-8") as f:
        root = json.load(f)["root"]["path"]
    target = os.path.join(bundle if not os.path.isabs(root) else "/", root, "proc", "driver")
    script = ('set -e; d="$1"; mount -t tmpfs -o mode=0555,size=512k,nosuid,nodev,noexec gpuops-fake-procfs "$d"; '
              'mkdir -m 0555 "$d/nvidia-caps"; cat > "$d/nvidia-caps/mig-minors"; '
              'chmod 0444 "$d/nvidia-caps/mig-minors"; mount -o remount,ro,bind "$d"')
    subprocess.run(["nsenter", "--target", str(state["pid"]), "--mount", "--", "/bin/sh", "-c", script, "sh", target],
                   input=mig_minors(), text=True, check=True, capture_output=True, timeout=20)
    return None


def main(argv):
    if argv[:1] == ["mig-minors"]:
        sys.stdout.write(mig_minors())
        return 0
    if argv[:1] == ["hook"]:
        try:
            note = hook(json.load(sys.stdin))
        except (OSError, ValueError, KeyError, subprocess.SubprocessError) as exc:
            detail = getattr(exc, "stderr", "") or ""
            sys.stderr.write("gpuops-fake-procfs: no /proc/driver entries in the container: %s %s\n" % (exc, detail))
            return 0
        if note:
            sys.stderr.write("gpuops-fake-procfs: %s\n" % note)
        return 0
    if argv[:1] == ["runc"]:
        args = argv[1:]
        _sub, bundle = runc_command(args)
        if bundle:
            try:
                add_hook_to_bundle(bundle)
            except (OSError, ValueError) as exc:
                sys.stderr.write("gpuops-fake-procfs: bundle %s left as it is: %s\n" % (bundle, exc))
        os.execv(REAL_RUNC, ["runc"] + args)
    sys.stderr.write(__doc__.split("\n\n")[1] + "\n")
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

"""fake-nvml-reset (implementation) - the "GPU reset / reboot" of the fake NVML lab.

Applies every pending MIG mode (GetMigMode current <- pending) and drops all
GPU/compute instances, for every GPU of the selected profile, in the shared
state file. It calls the fake library's gpuopsFakeNvmlSimulateReset().

  fake-nvml-reset              uses GPUOPS_FAKE_NVML_PROFILE / _STATE (as set by
                               with-gpus), else the installed defaults
                               /etc/gpuops-fake-nvml/profile and
                               /var/lib/gpuops-fake-nvml/state
  fake-nvml-reset PROFILE      like with-gpus: profile name or path, default state
                               ${TMPDIR:-/tmp}/gpuops-fake-nvml/PROFILE.state

The library is GPUOPS_FAKE_NVML_LIB, else this directory's build/ (built with
make when missing), else libnvidia-ml.so.1 from the normal library path (the
fake installed as the lab's "driver").
"""

import ctypes
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.realpath(__file__))


def fail(msg):
    print("fake-nvml-reset: " + msg, file=sys.stderr)
    sys.exit(1)


def select_profile(arg):
    if "/" in arg:
        path = os.path.abspath(arg)
    else:
        path = os.path.join(HERE, "profiles", arg + ".profile")
    if not os.path.isfile(path):
        fail("unknown profile " + arg)
    name = os.path.basename(path)
    if name.endswith(".profile"):
        name = name[: -len(".profile")]
    os.environ["GPUOPS_FAKE_NVML_PROFILE"] = path
    if not os.environ.get("GPUOPS_FAKE_NVML_STATE"):
        tmp = os.environ.get("TMPDIR") or "/tmp"
        os.environ["GPUOPS_FAKE_NVML_STATE"] = os.path.join(
            tmp, "gpuops-fake-nvml", name + ".state"
        )


def find_library():
    explicit = os.environ.get("GPUOPS_FAKE_NVML_LIB")
    if explicit:
        return explicit
    built = os.path.join(HERE, "build", "libnvidia-ml.so.1")
    makefile = os.path.join(HERE, "Makefile")
    if os.path.isfile(makefile) and shutil.which("make"):
        subprocess.run(["make", "-s", "-C", HERE], check=True, stdout=sys.stderr)
    if os.path.exists(built):
        return built
    return "libnvidia-ml.so.1"


def main(argv):
    if len(argv) > 1 and argv[1] in ("-h", "--help"):
        print(__doc__.strip())
        return 0
    if len(argv) > 2:
        fail("usage: fake-nvml-reset [PROFILE]")
    if len(argv) == 2:
        select_profile(argv[1])
    lib_path = find_library()
    try:
        lib = ctypes.CDLL(lib_path)
    except OSError as exc:
        fail("cannot load %s: %s" % (lib_path, exc))
    hook = getattr(lib, "gpuopsFakeNvmlSimulateReset", None)
    if hook is None:
        fail(
            "%s is not the gpuops fake NVML (no gpuopsFakeNvmlSimulateReset)" % lib_path
        )
    lib.nvmlErrorString.restype = ctypes.c_char_p
    rc = hook()
    if rc != 0:
        fail("reset failed: %s (%d)" % (lib.nvmlErrorString(rc).decode(), rc))
    print(
        "fake-nvml: GPU reset done (pending MIG modes applied, MIG instances destroyed)"
    )
    return 0


if __name__ == "__main__":
    sys.exit(main(sys.argv))

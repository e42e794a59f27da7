"""fake-nvml-reset / fake-nvml-busy (implementation) - the test hooks of the fake NVML lab.

  fake-nvml-reset [PROFILE]                  a reboot of the node: every process and client
                                             goes, pending MIG modes apply (Ampere), Hopper and
                                             later come back in their boot MIG mode, every GPU
                                             and compute instance is gone, persistence mode is
                                             the profile's again
  fake-nvml-reset [PROFILE] --gpu ID [...]   a GPU reset of those GPUs (what `nvidia-smi -r`
                                             does): fails with "In use" while a process or
                                             client holds one; otherwise as a reboot for it,
                                             except that persistence mode stays
  fake-nvml-busy [PROFILE] --gpu ID [--gi N [--ci N]] --pid PID [--kind compute|graphics|client]
                 [--used-mib N] [--name NAME] a process (listed by the running-process queries)
                                             or a client (nvidia-persistenced, DCGM: holds the
                                             GPU, lists no process) starts holding the GPU, or
                                             that GPU or compute instance (which must exist)
  fake-nvml-busy [PROFILE] --clear [--gpu ID] [--pid PID]
  fake-nvml-xid [PROFILE] --gpu ID --xid N   the GPU reports XID N now (the driver's report of a
                                             fault): NVML event sets registered for XIDs deliver
                                             it; a GPU reset or a reboot clears it
                                             it stops (without --pid: everything; without
                                             --gpu: on every GPU)

ID is a GPU index (as NVML numbers them), a PCI bus id or a UUID. PROFILE works as for
with-gpus (a name or a path; default state ${TMPDIR:-/tmp}/gpuops-fake-nvml/PROFILE.state);
without it GPUOPS_FAKE_NVML_PROFILE / _STATE (as with-gpus sets them) or the installed defaults
/etc/gpuops-fake-nvml/profile and /var/lib/gpuops-fake-nvml/state apply.

The library is GPUOPS_FAKE_NVML_LIB, else this directory's build/ (built with make when
missing), else libnvidia-ml.so.1 from the normal library path (the fake installed as the lab's
"driver"). Exit status 0, or 1 with the NVML error on stderr.
"""

import argparse
import ctypes
import os
import shutil
import subprocess
import sys

HERE = os.path.dirname(os.path.realpath(__file__))


class Fail(Exception):
    pass


def select_profile(arg):
    path = os.path.abspath(arg) if "/" in arg else os.path.join(HERE, "profiles", arg + ".profile")
    if not os.path.isfile(path):
        raise Fail("unknown profile " + arg)
    name = os.path.basename(path)
    if name.endswith(".profile"):
        name = name[: -len(".profile")]
    os.environ["GPUOPS_FAKE_NVML_PROFILE"] = path
    if not os.environ.get("GPUOPS_FAKE_NVML_STATE"):
        tmp = os.environ.get("TMPDIR") or "/tmp"
        os.environ["GPUOPS_FAKE_NVML_STATE"] = os.path.join(tmp, "gpuops-fake-nvml", name + ".state")


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


class Lab:
    def __init__(self):
        path = find_library()
        try:
            self.lib = ctypes.CDLL(path)
        except OSError as exc:
            raise Fail("cannot load %s: %s" % (path, exc))
        if getattr(self.lib, "gpuopsFakeNvmlResetGpu", None) is None:
            raise Fail("%s is not the gpuops fake NVML (no gpuopsFakeNvmlResetGpu)" % path)
        self.lib.nvmlErrorString.restype = ctypes.c_char_p
        self.lib.gpuopsFakeNvmlResetGpu.argtypes = [ctypes.c_char_p]
        self.lib.gpuopsFakeNvmlSetBusy.argtypes = [ctypes.c_char_p, ctypes.c_int, ctypes.c_int, ctypes.c_uint,
                                                   ctypes.c_char_p, ctypes.c_ulonglong, ctypes.c_char_p]
        self.lib.gpuopsFakeNvmlClearBusy.argtypes = [ctypes.c_char_p, ctypes.c_uint]
        self.lib.gpuopsFakeNvmlInjectXid.argtypes = [ctypes.c_char_p, ctypes.c_uint]
        self._initialized = False

    def check(self, rc, what):
        if rc != 0:
            raise Fail("%s: %s (%d)" % (what, self.lib.nvmlErrorString(rc).decode(), rc))

    def uuid(self, ident):
        """The UUID of GPU ID (index, PCI bus id or UUID), through NVML itself."""
        if ident.startswith("GPU-"):
            return ident
        if not self._initialized:
            self.check(self.lib.nvmlInit_v2(), "nvmlInit")
            self._initialized = True
        handle = ctypes.c_void_p()
        if ident.isdigit():
            rc = self.lib.nvmlDeviceGetHandleByIndex_v2(ctypes.c_uint(int(ident)), ctypes.byref(handle))
        else:
            rc = self.lib.nvmlDeviceGetHandleByPciBusId_v2(ident.encode(), ctypes.byref(handle))
        self.check(rc, "GPU %s" % ident)
        buf = ctypes.create_string_buffer(96)
        self.check(self.lib.nvmlDeviceGetUUID(handle, buf, ctypes.c_uint(96)), "GPU %s" % ident)
        return buf.value.decode()


def reset_main(argv):
    parser = argparse.ArgumentParser(prog="fake-nvml-reset", description="a reboot of the node, or GPU resets")
    parser.add_argument("profile", nargs="?")
    parser.add_argument("--gpu", action="append", default=[], metavar="ID", help="reset these GPUs only")
    args = parser.parse_args(argv)
    if args.profile:
        select_profile(args.profile)
    lab = Lab()
    if not args.gpu:
        lab.check(lab.lib.gpuopsFakeNvmlSimulateReboot(), "reboot failed")
        print("fake-nvml: node rebooted (processes gone, pending MIG modes applied where they persist, "
              "MIG instances destroyed)")
        return 0
    for ident in args.gpu:
        lab.check(lab.lib.gpuopsFakeNvmlResetGpu(lab.uuid(ident).encode()), "GPU %s could not be reset" % ident)
        print("fake-nvml: GPU %s reset" % ident)
    return 0


def busy_main(argv):
    parser = argparse.ArgumentParser(prog="fake-nvml-busy", description="mark GPUs as held by a process or client")
    parser.add_argument("profile", nargs="?")
    parser.add_argument("--gpu", metavar="ID")
    parser.add_argument("--gi", type=int, default=-1)
    parser.add_argument("--ci", type=int, default=-1)
    parser.add_argument("--pid", type=int, default=0)
    parser.add_argument("--kind", choices=["compute", "graphics", "client"], default="compute")
    parser.add_argument("--used-mib", type=int, default=0)
    parser.add_argument("--name", default="")
    parser.add_argument("--clear", action="store_true")
    args = parser.parse_args(argv)
    if args.profile:
        select_profile(args.profile)
    lab = Lab()
    if args.clear:
        uuid = lab.uuid(args.gpu).encode() if args.gpu else None
        lab.check(lab.lib.gpuopsFakeNvmlClearBusy(uuid, args.pid), "clearing failed")
        return 0
    if not args.gpu or args.pid <= 0:
        raise Fail("--gpu and a --pid above 0 are needed (or --clear)")
    name = args.name or ("process-%d" % args.pid)
    lab.check(lab.lib.gpuopsFakeNvmlSetBusy(lab.uuid(args.gpu).encode(), args.gi, args.ci, args.pid,
                                            args.kind.encode(), args.used_mib, name.encode()),
              "marking GPU %s busy failed" % args.gpu)
    return 0


def xid_main(argv):
    parser = argparse.ArgumentParser(prog="fake-nvml-xid", description="a GPU reports an XID")
    parser.add_argument("profile", nargs="?")
    parser.add_argument("--gpu", metavar="ID", required=True)
    parser.add_argument("--xid", type=int, required=True)
    args = parser.parse_args(argv)
    if args.profile:
        select_profile(args.profile)
    if args.xid <= 0:
        raise Fail("--xid must be an XID number above 0")
    lab = Lab()
    lab.check(lab.lib.gpuopsFakeNvmlInjectXid(lab.uuid(args.gpu).encode(), args.xid),
              "GPU %s could not report XID %d" % (args.gpu, args.xid))
    print("fake-nvml: GPU %s reported XID %d" % (args.gpu, args.xid))
    return 0


def main(argv):
    tool = os.path.basename(argv[0])
    try:
        if argv[1:2] == ["busy"] or tool.startswith("fake-nvml-busy"):
            return busy_main(argv[2:] if argv[1:2] == ["busy"] else argv[1:])
        if argv[1:2] == ["xid"] or tool.startswith("fake-nvml-xid"):
            return xid_main(argv[2:] if argv[1:2] == ["xid"] else argv[1:])
        return reset_main(argv[1:])
    except Fail as exc:
        print("%s: %s" % (tool if tool.startswith("fake-nvml") else "fake-nvml-reset", exc), file=sys.stderr)
        return 1


if __name__ == "__main__":
    sys.exit(main(sys.argv))

"""gpuops-fake-driver - put on disk what an NVIDIA driver installation leaves there, for the
lab's simulated node profile, so that NVIDIA's own tools (nvidia-ctk, the CDI refresh units)
find a driver.

    gpuops-fake-driver [--root DIR] [--profile FILE] [--payload DIR] [--package-files]
    gpuops-fake-driver --remove [--root DIR]

What it writes (under --root, default /), following the selected profile
(GPUOPS_FAKE_NVML_PROFILE, else /etc/gpuops-fake-nvml/profile):

  usr/lib/x86_64-linux-gnu/  libcuda.so.VERSION (a placeholder ELF library, soname libcuda.so.1)
                             and the libcuda.so.1 link; libnvidia-ml.so.VERSION -> libnvidia-ml.so.1
                             (the fake NVML); for R565 drivers and later libnvidia-sandboxutils.so.VERSION
                             (the lab's fake) and its .so.1 link. VERSION is the profile's driver
                             version: nvidia-ctk locates libcuda.so.<the version NVML reports>.
  dev/                       when the profile's kernel module is loaded (driver_state loaded or
                             version_mismatch): nvidiactl (195:255), nvidiaN (195:N) for every GPU
                             minor, nvidia-uvm and nvidia-uvm-tools (dynamic major, minors 0 and 1),
                             and nvidia-caps/nvidia-capN for mig/config, mig/monitor and every GPU and
                             compute instance capability of each MIG-capable GPU, with the minors the
                             kernel module gives them. Character devices (creating them needs
                             CAP_MKNOD, not a driver); as a non-root user, empty regular files
                             (nvidia-ctk accepts those with __NVCT_TESTING_DEVICES_ARE_FILES=true).
  lib/modules/KERNEL/        modules.dep lines for updates/dkms/nvidia{,-uvm,-modeset}.ko, as DKMS
                             and depmod leave them (nvidia-cdi-refresh.service only runs when
                             modules.dep names /nvidia.ko), written anew when the driver version
                             changes (nvidia-cdi-refresh.path watches the file).
  with --package-files       also what the gpuops-lab-fake-nvml package itself installs:
                             usr/bin/nvidia-smi, and the fake NVML as libnvidia-ml.so.VERSION with the
                             libnvidia-ml.so.1 link, copied from --payload (for a driver root tree
                             outside a lab node).
  with --sysfs               also sys/bus/pci: devices/DOMAIN:BUS:DEV.0/ of every GPU (vendor, device,
                             class, subsystem ids, numa_node, resource; a driver link to
                             drivers/nvidia while the module is loaded), what NVIDIA's go-nvlib
                             (nvpci) reads, and config (the configuration header lspci reads); with-gpus
                             --node mounts it over /sys/bus/pci. Implied where ROOT/sys/bus/pci is a
                             tmpfs of its own: the lab's nodes get one (tests/lab/lab), so lspci, NFD
                             and the DRA driver see the GPUs there; elsewhere a node's /sys is the
                             kernel's.

--payload is where the lab's fake libraries are: libnvidia-ml.so.1,
sandboxutils/libnvidia-sandboxutils.so.1, stubs/libcuda.so.1, nvidia-smi (default /usr/lib/gpuops-fake-nvml, where the package puts them;
the build directory on a development host). Everything written is listed in
ROOT/var/lib/gpuops-fake-nvml/driver-files (with the driver version), so a re-run with another profile (or --remove)
takes back what no longer applies, and only files still as it left them. /proc cannot be
written: nothing here imitates /proc/driver/nvidia*.

Runs in a lab node at boot, when the profile changes (gpuops-fake-driver.service / .path) and
when the package is installed; tests/lab/with-gpus runs it for a driver root tree on the host.
"""

import argparse
import ctypes
import errno
import filecmp
import json
import os
import shutil
import stat
import subprocess
import sys

LIBDIR = "usr/lib/x86_64-linux-gnu"
MANIFEST = "var/lib/gpuops-fake-nvml/driver-files"
DEFAULT_PAYLOAD = "/usr/lib/gpuops-fake-nvml"
DEFAULT_PROFILE = "/etc/gpuops-fake-nvml/profile"

NVIDIA_MAJOR = 195  # the nvidia character device major (Documentation/admin-guide/devices.txt)
NVIDIACTL_MINOR = 255
# The NVIDIA kernel module numbers its capability devices in one table: fabric-mgmt 0,
# mig/config 1, mig/monitor 2, then for each of 32 GPU minors and 15 GPU instances
# "giG/access" and "giG/ci0..7/access" (kernel-open/nvidia/nv-caps.c, open-gpu-kernel-modules).
CAP_CONFIG, CAP_MONITOR, CAP_MIG_FIRST, CAP_PER_GI, CAP_GIS, CAP_CIS = 1, 2, 3, 9, 15, 8
CAP_PER_GPU = CAP_GIS * CAP_PER_GI
# libnvidia-sandboxutils: the lab gives it to R565 drivers and later (NVIDIA/nvidia-container-toolkit
# #935 and #1103 discuss the copy of a 565 driver); the lab's 535 and 550 profiles get none.
SANDBOXUTILS_FROM = 565
DKMS_MODULES = ["nvidia", "nvidia-uvm", "nvidia-modeset"]


def fail(message):
    sys.stderr.write("gpuops-fake-driver: %s\n" % message)
    sys.exit(1)


def describe(nvml, profile):
    """(driver_state, driver_version, [(index, minor, mig_capable)]) of the profile, or None
    when no profile is selected. Asks the fake NVML itself, which parses the profile."""
    if profile:
        os.environ["GPUOPS_FAKE_NVML_PROFILE"] = profile
    try:
        lib = ctypes.CDLL(nvml)
        fn = lib.gpuopsFakeNvmlDescribe
    except (OSError, AttributeError) as exc:
        fail("%s is not the lab's fake NVML (%s)" % (nvml, exc))
    buf = ctypes.create_string_buffer(16384)
    rc = fn(buf, len(buf))
    if rc == 9:  # NVML_ERROR_DRIVER_NOT_LOADED: no profile to read
        return None
    if rc != 0:
        fail("the profile %s cannot be loaded (NVML error %d; see the messages above)"
             % (os.environ.get("GPUOPS_FAKE_NVML_PROFILE", DEFAULT_PROFILE), rc))
    state, version, gpus, pci = "loaded", "", [], []
    for line in buf.value.decode().splitlines():
        words = line.split()
        if words[0] == "driver_state":
            state = words[1]
        elif words[0] == "driver_version":
            version = words[1]
        elif words[0] == "gpu":
            gpus.append((int(words[1]), int(words[2]), words[3] == "1"))
            pci.append({"bus_id": words[4], "device_id": int(words[5], 16), "subsystem_id": int(words[6], 16),
                        "numa": int(words[7])})
    describe.pci = pci
    return state, version, gpus


def dynamic_majors(count):
    """Majors the kernel would hand out next to dynamically registered character devices:
    the top of the extended dynamic range (511 downwards), skipping the ones in use."""
    used = set()
    try:
        with open("/proc/devices", encoding="ascii") as handle:
            block = False
            for line in handle:
                if line.startswith("Block"):
                    block = True
                parts = line.split()
                if not block and len(parts) == 2 and parts[0].isdigit():
                    used.add(int(parts[0]))
    except OSError:
        pass
    free = [major for major in range(511, 383, -1) if major not in used]
    return free[:count]


class Writer:
    """Creates files under root and remembers them; takes back what a previous run created and
    this one does not want, when it is still as that run left it."""

    def __init__(self, root):
        self.root = root
        self.entries = {}  # path -> record
        self.mknod_ok = os.geteuid() == 0

    def path(self, rel):
        return os.path.join(self.root, rel.lstrip("/"))

    def _parent(self, rel):
        os.makedirs(os.path.dirname(self.path(rel)), exist_ok=True)

    def link(self, rel, target):
        self._parent(rel)
        full = self.path(rel)
        if not (os.path.islink(full) and os.readlink(full) == target):
            if os.path.lexists(full):
                os.unlink(full)
            os.symlink(target, full)
        self.entries[rel] = {"kind": "link", "target": target}

    def copy(self, rel, source, mode=0o644):
        self._parent(rel)
        full = self.path(rel)
        if os.path.islink(full) or not os.path.isfile(full) or not filecmp.cmp(source, full, shallow=False):
            if os.path.lexists(full):
                os.unlink(full)
            shutil.copyfile(source, full + ".tmp")
            os.chmod(full + ".tmp", mode)
            os.replace(full + ".tmp", full)
        self.entries[rel] = {"kind": "copy", "source": source}

    def node(self, rel, major, minor, mode):
        self._parent(rel)
        full = self.path(rel)
        want = stat.S_IFCHR if self.mknod_ok else stat.S_IFREG
        try:
            st = os.lstat(full)
        except FileNotFoundError:
            st = None
        same = st is not None and stat.S_IFMT(st.st_mode) == want and stat.S_IMODE(st.st_mode) == mode and (
            want == stat.S_IFREG or os.major(st.st_rdev) == major and os.minor(st.st_rdev) == minor)
        if not same:
            if st is not None:
                os.unlink(full)
            if self.mknod_ok:
                os.mknod(full, mode | stat.S_IFCHR, os.makedev(major, minor))
            else:
                open(full, "w", encoding="ascii").close()
            os.chmod(full, mode)
        self.entries[rel] = {"kind": "node", "major": major, "minor": minor}

    def _write(self, rel, content):
        """REL holds exactly the bytes CONTENT afterwards (written anew, atomically, only when not)."""
        self._parent(rel)
        full = self.path(rel)
        try:
            with open(full, "rb") as handle:
                same = handle.read() == content
        except (FileNotFoundError, IsADirectoryError):
            same = False
        if not same:
            if os.path.islink(full):
                os.unlink(full)
            with open(full + ".tmp", "wb") as handle:
                handle.write(content)
            os.replace(full + ".tmp", full)

    def text(self, rel, content):
        self._write(rel, content.encode("ascii"))
        self.entries[rel] = {"kind": "text", "content": content}

    def data(self, rel, content):
        """A binary file (a PCI device's config space); recorded by its hex content."""
        self._write(rel, content)
        self.entries[rel] = {"kind": "data", "hex": content.hex()}

    def lines(self, rel, lines, rewrite=False):
        """Make sure the text file has these lines (appended when missing); rewrite: write the
        file anew even when nothing is missing (as depmod does after a driver install)."""
        self._parent(rel)
        full = self.path(rel)
        try:
            with open(full, encoding="utf-8") as handle:
                current = handle.read().splitlines()
        except FileNotFoundError:
            current = None
        missing = [line for line in lines if line not in (current or [])]
        if missing or rewrite:
            # in place: depmod renames a new file over it, which in the lab's containers did not
            # wake nvidia-cdi-refresh.path (measured, systemd 257 on overlayfs); a write does
            with open(full, "w", encoding="utf-8") as handle:
                handle.write("".join(line + "\n" for line in (current or []) + missing))
        previous = self.previous.get(rel, {})
        added = sorted(set(missing) | set(previous.get("lines", [])) & set(lines))
        self.entries[rel] = {"kind": "lines", "lines": added, "created": current is None or previous.get("created")}

    def still_ours(self, rel, record):
        full = self.path(rel)
        try:
            st = os.lstat(full)
        except FileNotFoundError:
            return False
        kind = record.get("kind")
        if kind == "link":
            return stat.S_ISLNK(st.st_mode) and os.readlink(full) == record["target"]
        if kind == "copy":
            source = record.get("source", "")
            return stat.S_ISREG(st.st_mode) and os.path.isfile(source) and filecmp.cmp(source, full, shallow=False)
        if kind == "node":
            if stat.S_ISCHR(st.st_mode):
                return os.major(st.st_rdev) == record["major"] and os.minor(st.st_rdev) == record["minor"]
            return stat.S_ISREG(st.st_mode) and st.st_size == 0
        if kind == "data":
            try:
                with open(full, "rb") as handle:
                    return stat.S_ISREG(st.st_mode) and handle.read().hex() == record["hex"]
            except OSError:
                return False
        if kind == "text":
            try:
                with open(full, encoding="ascii") as handle:
                    return stat.S_ISREG(st.st_mode) and handle.read() == record["content"]
            except (OSError, UnicodeDecodeError):
                return False
        return kind == "lines"

    def load(self):
        try:
            with open(self.path(MANIFEST), encoding="utf-8") as handle:
                saved = json.load(handle)
            self.previous, self.previous_driver = saved["files"], saved.get("driver")
        except (OSError, ValueError, KeyError, TypeError):
            self.previous, self.previous_driver = {}, None

    def take_back(self):
        """Remove what the previous run created and this one did not ask for again."""
        for rel, record in sorted(self.previous.items(), key=lambda item: item[0].count("/"), reverse=True):
            if rel in self.entries or not self.still_ours(rel, record):
                continue
            full = self.path(rel)
            if record["kind"] == "lines":
                with open(full, encoding="utf-8") as handle:
                    kept = [line for line in handle.read().splitlines() if line not in record["lines"]]
                if not kept and record.get("created"):
                    os.unlink(full)
                else:
                    with open(full, "w", encoding="utf-8") as handle:
                        handle.write("".join(line + "\n" for line in kept))
            else:
                os.unlink(full)
            parent = os.path.dirname(full)
            while os.path.basename(parent) == "nvidia-caps" or "/sys/bus/pci/" in parent + "/":
                try:
                    os.rmdir(parent)
                except OSError:
                    break
                parent = os.path.dirname(parent)

    def save(self, driver):
        self._parent(MANIFEST)
        full = self.path(MANIFEST)
        if not self.entries:
            if os.path.exists(full):
                os.unlink(full)
            return
        with open(full + ".tmp", "w", encoding="utf-8") as handle:
            json.dump({"driver": driver, "files": self.entries}, handle, indent=1, sort_keys=True)
        os.replace(full + ".tmp", full)


def device_nodes(writer, gpus):
    writer.node("dev/nvidiactl", NVIDIA_MAJOR, NVIDIACTL_MINOR, 0o666)
    caps_major, uvm_major = (dynamic_majors(2) + [0, 0])[:2]
    writer.node("dev/nvidia-uvm", uvm_major, 0, 0o666)
    writer.node("dev/nvidia-uvm-tools", uvm_major, 1, 0o666)
    for _index, minor, _mig in gpus:
        writer.node("dev/nvidia%d" % minor, NVIDIA_MAJOR, minor, 0o666)
    mig_minors = [minor for _index, minor, mig in gpus if mig and minor < 32]
    if mig_minors:
        writer.node("dev/nvidia-caps/nvidia-cap%d" % CAP_CONFIG, caps_major, CAP_CONFIG, 0o400)
        writer.node("dev/nvidia-caps/nvidia-cap%d" % CAP_MONITOR, caps_major, CAP_MONITOR, 0o444)
    for minor in mig_minors:
        for gi in range(CAP_GIS):
            first = CAP_MIG_FIRST + minor * CAP_PER_GPU + gi * CAP_PER_GI
            for cap in range(first, first + 1 + CAP_CIS):
                writer.node("dev/nvidia-caps/nvidia-cap%d" % cap, caps_major, cap, 0o444)


PCI_VENDOR_NVIDIA = 0x10DE
PCI_CLASS_3D = 0x030200  # "3D controller", as NVIDIA's data-centre GPUs report it


def pci_config(vendor, device, sub_vendor, sub_device, bars):
    """The first 256 bytes of a type 0 PCI configuration header (PCI Local Bus Specification 3.0,
    6.1), little-endian, what lspci reads from sysfs: ids, command (memory space, bus master),
    class 3D controller, 64-bit prefetchable BAR1 and BAR3, interrupt pin A."""
    config = bytearray(256)

    def put(offset, value, size):
        config[offset:offset + size] = value.to_bytes(size, "little")

    put(0x00, vendor, 2)
    put(0x02, device, 2)
    put(0x04, 0x0006, 2)
    put(0x08, 0xA1, 1)  # revision
    put(0x09, PCI_CLASS_3D, 3)
    bar0, bar1, bar3 = bars
    put(0x10, bar0 & 0xFFFFFFF0, 4)
    put(0x14, (bar1 & 0xFFFFFFF0) | 0xC, 4)  # 64-bit, prefetchable
    put(0x18, bar1 >> 32, 4)
    put(0x1C, (bar3 & 0xFFFFFFF0) | 0xC, 4)
    put(0x20, bar3 >> 32, 4)
    put(0x2C, sub_vendor, 2)
    put(0x2E, sub_device, 2)
    put(0x3D, 1, 1)
    return bytes(config)


def pci_view_mounted(root):
    """True when ROOT/sys/bus/pci is a tmpfs of its own: a lab node given a PCI view of its GPUs
    (tests/lab/lab mounts one), where the kernel's sysfs would show none."""
    want = os.path.join(root, "sys/bus/pci")
    try:
        with open("/proc/self/mountinfo", encoding="utf-8") as handle:
            for line in handle:
                fields = line.split()
                sep = fields.index("-")
                if fields[4] == want and fields[sep + 1] == "tmpfs":
                    return True
    except (OSError, ValueError, IndexError):
        return False
    return False


def pci_sysfs(writer, pci, loaded):
    """sys/bus/pci for the profile's GPUs: the files NVIDIA's go-nvlib reads for each device."""
    for dev in pci:
        domain, bus, rest = dev["bus_id"].split(":")
        base = "sys/bus/pci/devices/%04x:%s:%s" % (int(domain, 16) & 0xFFFF, bus.lower(), rest.lower())
        writer.text(base + "/vendor", "0x%04x\n" % PCI_VENDOR_NVIDIA)
        writer.text(base + "/device", "0x%04x\n" % (dev["device_id"] >> 16))
        writer.text(base + "/subsystem_vendor", "0x%04x\n" % (dev["subsystem_id"] & 0xFFFF))
        writer.text(base + "/subsystem_device", "0x%04x\n" % (dev["subsystem_id"] >> 16))
        writer.text(base + "/class", "0x%06x\n" % PCI_CLASS_3D)
        writer.text(base + "/numa_node", "%d\n" % dev["numa"])
        # BAR0 (16 MiB registers), BAR1 (framebuffer aperture), BAR3; then the unused regions
        number = int(bus, 16)
        bar0 = 0xD0000000 + (number << 24)
        bar1 = 0x38000000000 + (number << 36)
        bar3 = 0x3A000000000 + (number << 25)
        regions = [(bar0, bar0 + 0xFFFFFF, 0x40200), (bar1, bar1 + (1 << 36) - 1, 0x14220C), (0, 0, 0),
                   (bar3, bar3 + 0x1FFFFFF, 0x14220C)]
        regions += [(0, 0, 0)] * (13 - len(regions))
        writer.text(base + "/resource", "".join("0x%016x 0x%016x 0x%016x\n" % r for r in regions))
        writer.data(base + "/config", pci_config(PCI_VENDOR_NVIDIA, dev["device_id"] >> 16, dev["subsystem_id"] & 0xFFFF,
                                                 dev["subsystem_id"] >> 16, (bar0, bar1, bar3)))
        writer.text(base + "/irq", "0\n")
        if loaded:
            writer.link(base + "/driver", "../../../../bus/pci/drivers/nvidia")
    if pci and loaded:
        writer.text("sys/bus/pci/drivers/nvidia/module", "nvidia\n")


def libraries(writer, payload, version, package_files):
    stub = os.path.join(payload, "stubs", "libcuda.so.1")
    if not os.path.isfile(stub):
        fail("%s is missing (make -C tests/lab/fake-nvml deb builds it)" % stub)
    writer.copy("%s/libcuda.so.%s" % (LIBDIR, version), stub)
    writer.link("%s/libcuda.so.1" % LIBDIR, "libcuda.so.%s" % version)
    if package_files:  # the layout of a driver installation: the file has the version
        writer.copy("%s/libnvidia-ml.so.%s" % (LIBDIR, version), os.path.join(payload, "libnvidia-ml.so.1"))
        writer.link("%s/libnvidia-ml.so.1" % LIBDIR, "libnvidia-ml.so.%s" % version)
    else:  # in a lab node the package owns libnvidia-ml.so.1, whatever the profile's version
        writer.link("%s/libnvidia-ml.so.%s" % (LIBDIR, version), "libnvidia-ml.so.1")
    try:
        branch = int(version.split(".")[0])
    except ValueError:
        branch = 0
    if branch >= SANDBOXUTILS_FROM:
        sandbox = os.path.join(payload, "sandboxutils", "libnvidia-sandboxutils.so.1")
        if not os.path.isfile(sandbox):
            fail("%s is missing (make -C tests/lab/fake-nvml deb builds it)" % sandbox)
        writer.copy("%s/libnvidia-sandboxutils.so.%s" % (LIBDIR, version), sandbox)
        writer.link("%s/libnvidia-sandboxutils.so.1" % LIBDIR, "libnvidia-sandboxutils.so.%s" % version)


def main(argv):
    parser = argparse.ArgumentParser(prog="gpuops-fake-driver", description=__doc__.split("\n\n", maxsplit=1)[0])
    parser.add_argument("--root", default="/")
    parser.add_argument("--profile", help="profile file (default: GPUOPS_FAKE_NVML_PROFILE, else %s)" % DEFAULT_PROFILE)
    parser.add_argument("--payload", default=DEFAULT_PAYLOAD)
    parser.add_argument("--nvml", help="the fake NVML to ask (default: PAYLOAD/libnvidia-ml.so.1 when it is "
                                       "there, else libnvidia-ml.so.1 from the library path)")
    parser.add_argument("--package-files", action="store_true")
    parser.add_argument("--sysfs", action="store_true", help="also sys/bus/pci for the GPUs")
    parser.add_argument("--remove", action="store_true", help="take back everything written before")
    parser.add_argument("-q", "--quiet", action="store_true")
    args = parser.parse_args(argv)
    root = os.path.abspath(args.root)
    payload = os.path.abspath(args.payload)
    writer = Writer(root)
    writer.load()
    node = None
    if not args.remove:
        nvml = args.nvml or os.path.join(payload, "libnvidia-ml.so.1")
        if not args.nvml and not os.path.exists(nvml):
            nvml = "libnvidia-ml.so.1"
        node = describe(nvml, args.profile and os.path.abspath(args.profile))
    if node is not None:
        state, version, gpus = node
        if args.package_files:
            writer.copy("usr/bin/nvidia-smi", os.path.join(payload, "nvidia-smi"), mode=0o755)
        libraries(writer, payload, version, args.package_files)
        kernel = os.uname().release
        # another driver version means new modules: depmod writes the list again (what
        # nvidia-cdi-refresh.path watches)
        writer.lines("lib/modules/%s/modules.dep" % kernel,
                     ["updates/dkms/%s.ko:%s" % (name, "" if name == "nvidia" else " updates/dkms/nvidia.ko")
                      for name in DKMS_MODULES], rewrite=version != writer.previous_driver)
        if state != "not_loaded":
            device_nodes(writer, gpus)
        if args.sysfs or pci_view_mounted(root):
            pci_sysfs(writer, describe.pci, state != "not_loaded")
    writer.take_back()
    writer.save(node[1] if node else None)
    if root == "/" and shutil.which("ldconfig"):
        subprocess.run(["ldconfig"], check=False)
    if not args.quiet:
        if node is not None:
            print("gpuops-fake-driver: driver %s (%s), %d GPU(s): %d files under %s"
                  % (version, state, len(gpus), len(writer.entries), root))
        elif args.remove:
            print("gpuops-fake-driver: removed the driver files from %s" % root)
        else:
            print("gpuops-fake-driver: no profile selected: no driver files under %s" % root)
    return 0


if __name__ == "__main__":
    try:
        sys.exit(main(sys.argv[1:]))
    except OSError as exc:
        if exc.errno in (errno.EPERM, errno.EACCES):
            fail("%s (creating device nodes needs root or CAP_MKNOD)" % exc)
        raise

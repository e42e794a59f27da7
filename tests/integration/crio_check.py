# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The real CRI-O (built from its Go module by tests/lab/go-binaries, set ``crio``) reading
configuration files in a scratch directory, for the tests. Nothing of the host is written: every
path CRI-O would create or lock is pointed into the scratch directory, and it runs with a clean
environment.

Two checks, because CRI-O has two levels of validation:

``crio_config(main_text, drop_ins)``
    ``crio --config MAIN --config-dir DIR config``: reads MAIN, then every file under DIR, merges
    them as the daemon does and runs only the checks that look at nothing on disk
    (``Config.Validate(false)``: TOML syntax and value types, default_runtime naming a handler
    table, ...). Prints the effective configuration as commented TOML on stdout (settings equal to
    the built-in defaults commented out; of a handler only some fields), exit 0; on error exit 1
    with a ``level=fatal`` log line on stderr. Needs no root. It checks NO handler field: not
    runtime_type, runtime_path, monitor_path or monitor_cgroup: the daemon does that at start-up.

``crio_start_check(main_text, drop_ins)``
    The daemon itself (``crio`` without a subcommand): it runs the start-up validation
    (``Config.Validate(true)``: runtime handlers and their paths, conmon of every handler, cgroup
    settings, storage...), prints "Current CRI-O configuration" (the complete effective
    configuration as TOML) and then tries to listen on its socket. The socket path given here is
    longer than a Unix socket address can be, so the daemon stops right there with "Failed to
    listen: ... bind: invalid argument" and never serves: that message means validation passed
    and is reported as rc 0. It opens containers-storage (vfs driver, in the scratch dir) and
    checks the node (hugetlb and pid cgroup controllers are required); root is not needed.

``drop_ins`` maps a file name inside the drop-in directory (it may contain "/": CRI-O walks the
directory recursively) to its text. ``main_text`` None means no main file (``--config ""``, as the
daemon skips a missing /etc/crio/crio.conf).
"""
from __future__ import annotations

import ast
import collections
import json
import os
import re
import shutil
import subprocess
import tempfile

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
GO_BINARIES = os.path.join(REPO, "tests", "lab", "go-binaries")

CrioConfig = collections.namedtuple("CrioConfig", "rc config error")
CrioStart = collections.namedtuple("CrioStart", "rc config error warnings")
NOISE = ("node configuration validation for systemd AllowedCPUs failed",  # no systemctl in PATH
         "The storage 'driver' option should be set")  # storage.conf without a driver, as on hosts without one

_TEXT_LINE = re.compile(r'level=(\w+) msg=("(?:[^"\\]|\\.)*"|\S*)')
_STOP = re.compile(r"^Failed to listen: listen unix .*: bind: invalid argument$")
CURRENT_CONFIG = "Current CRI-O configuration:\n"
SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"


def go_cache():
    return os.environ.get("GPUOPS_GO_CACHE") or os.path.join(
        os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache"), "gpuops-nvidia", "go")


def crio_binary(build=False):
    """Path of the crio binary: $GPUOPS_CRIO when set (returned even if missing, so that a caller
    that was promised one can fail), else the go-binaries cache's crio/crio when it is there; with
    build=True, `tests/lab/go-binaries --dir crio` builds it first (minutes). None when absent."""
    if os.environ.get("GPUOPS_CRIO"):
        return os.environ["GPUOPS_CRIO"]
    if build:
        out = subprocess.run([GO_BINARIES, "--dir", "crio"], check=True, capture_output=True, text=True).stdout
        return os.path.join(out.strip().splitlines()[-1], "crio")
    path = os.path.join(go_cache(), "crio", "crio")
    return path if os.access(path, os.X_OK) else None


def _unquote(value):
    if value.startswith('"'):
        return ast.literal_eval(value)
    return value


def parse_log(stderr):
    """[(level, message)] of crio's log on stderr, JSON lines (--log-format json, which takes effect
    once the configuration files are read) and logrus text lines (before that) alike; other lines
    (errors printed before logging is set up) as ("plain", line)."""
    entries = []
    for line in stderr.splitlines():
        line = line.strip()
        if not line:
            continue
        if line.startswith("{"):
            try:
                entry = json.loads(line)
                entries.append((entry.get("level", ""), entry.get("msg", "")))
                continue
            except ValueError:
                pass
        match = _TEXT_LINE.search(line)
        if match:
            entries.append((match.group(1), _unquote(match.group(2))))
        else:
            entries.append(("plain", line))
    return entries


def _error(entries):
    for level, message in reversed(entries):
        if level in ("fatal", "panic", "plain"):
            return message
    for level, message in reversed(entries):
        if level == "error":
            return message
    return ""


class Scratch:
    """The files CRI-O reads and the directories it may write, under one directory."""

    def __init__(self, workdir, main_text, drop_ins):
        self.root = os.path.abspath(workdir)
        self.etc = os.path.join(self.root, "etc", "crio")
        self.main = os.path.join(self.etc, "crio.conf")
        self.conf_d = os.path.join(self.etc, "crio.conf.d")
        self.state = os.path.join(self.root, "state")
        self.bin = os.path.join(self.root, "state", "bin")
        for path in (self.conf_d, self.state, self.bin):
            os.makedirs(path, exist_ok=True)
        if main_text is not None:
            with open(self.main, "w", encoding="utf-8") as handle:
                handle.write(main_text)
        for name, text in (drop_ins or {}).items():
            path = os.path.join(self.conf_d, name)
            os.makedirs(os.path.dirname(path), exist_ok=True)
            with open(path, "w", encoding="utf-8") as handle:
                handle.write(text)
        self.storage_conf = os.path.join(self.state, "storage.conf")
        with open(self.storage_conf, "w", encoding="utf-8") as handle:
            # containers-storage's own defaults, named so that no host storage.conf is read (no
            # driver, as without any storage.conf; the daemon check passes --storage-driver vfs)
            handle.write('[storage]\nrunroot = "/run/containers/storage"\n'
                         'graphroot = "/var/lib/containers/storage"\n')
        self.registries = os.path.join(self.state, "registries.conf")
        open(self.registries, "w", encoding="utf-8").close()
        os.makedirs(os.path.join(self.state, "registries.conf.d"), exist_ok=True)
        self.main_arg = self.main if main_text is not None else ""

    def env(self, path_dirs=()):
        return {"PATH": os.pathsep.join(list(path_dirs) + [self.bin]), "HOME": self.root,
                "CONTAINERS_STORAGE_CONF": self.storage_conf, "TMPDIR": self.state, "LC_ALL": "C"}

    def config_args(self):
        return ["--config", self.main_arg, "--config-dir", self.conf_d,
                "--registries-conf", self.registries,
                "--registries-conf-dir", os.path.join(self.state, "registries.conf.d")]

    def state_args(self):
        """Every state path of the daemon, in the scratch directory. These flags override the
        same settings of the files (CRI-O: flags > drop-ins > main file); none of them is a
        runtime handler setting, conmon, conmon_cgroup, cgroup_manager or default_runtime."""
        state = self.state
        pinns = os.path.join(state, "pinns")  # pinns is C, not in the Go module: only its presence is checked
        if not os.path.exists(pinns):
            with open(pinns, "w", encoding="utf-8") as handle:
                handle.write("#!/bin/sh\nexit 1\n")
            os.chmod(pinns, 0o755)
        nsenter = shutil.which("nsenter", path="/usr/bin:/bin:/usr/sbin:/sbin")
        if nsenter and not os.path.exists(os.path.join(self.bin, "nsenter")):
            os.symlink(nsenter, os.path.join(self.bin, "nsenter"))  # the CNI plugin manager looks it up
        sock_dir = os.path.join(state, "api")
        os.makedirs(sock_dir, exist_ok=True)
        # Longer than sun_path (108 bytes): validation passes, then listen fails at once.
        listen = os.path.join(sock_dir, "s" * max(8, 120 - len(sock_dir)) + ".sock")

        def path(name):
            return os.path.join(state, name)
        return ["--root", path("root"), "--runroot", path("runroot"), "--storage-driver", "vfs",
                "--log-dir", path("log"), "--listen", listen, "--namespaces-dir", path("ns"),
                "--pinns-path", pinns, "--hooks-dir", path("hooks"),
                "--signature-policy-dir", path("policies"), "--cni-config-dir", path("cni/net.d"),
                "--cni-plugin-dir", path("cni/bin"), "--cdi-spec-dirs", path("cdi"),
                "--version-file", path("version"), "--version-file-persist", path("version-persist"),
                "--clean-shutdown-file", path("clean.shutdown"),
                "--container-attach-socket-dir", path("attach"), "--container-exits-dir", path("exits"),
                "--nri-listen", path("nri/nri.sock"), "--nri-plugin-dir", path("nri/plugins"),
                "--nri-plugin-config-dir", path("nri/conf.d"), "--enable-metrics=false",
                "--irqbalance-config-file", path("irqbalance"),
                "--irqbalance-config-restore-file", path("irqbalance-restore"),
                "--log-format", "json", "--log-level", "info"]


def _run(argv, env, timeout):
    return subprocess.run(argv, env=env, capture_output=True, text=True, timeout=timeout, check=False,
                          stdin=subprocess.DEVNULL)


def _workdir(workdir):
    if workdir is not None:
        return None, str(workdir)
    tmp = tempfile.TemporaryDirectory(prefix="gpuops-crio-")
    return tmp, tmp.name


def crio_config(main_text, drop_ins=None, *, workdir=None, binary=None, path_dirs=(), timeout=60):
    """`crio config` over the files: CrioConfig(rc, config, error), config being the commented
    TOML it prints (None on failure) and error the message of its fatal log line ("" on success)."""
    tmp, work = _workdir(workdir)
    try:
        scratch = Scratch(work, main_text, drop_ins)
        proc = _run([binary or crio_binary()] + scratch.config_args() + ["config"], scratch.env(path_dirs), timeout)
        if proc.returncode == 0:
            return CrioConfig(0, proc.stdout, "")
        return CrioConfig(proc.returncode, None, _error(parse_log(proc.stderr)) or proc.stderr.strip())
    finally:
        if tmp is not None:
            tmp.cleanup()


def crio_default_config(*, binary=None, timeout=60):
    """`crio --config "" --config-dir "" config --default`: the configuration CRI-O assumes when no
    file sets anything (as on a host without containers-storage.conf)."""
    with tempfile.TemporaryDirectory(prefix="gpuops-crio-") as work:
        scratch = Scratch(work, None, None)
        proc = _run([binary or crio_binary(), "--config", "", "--config-dir", "", "config", "--default"],
                    scratch.env(), timeout)
        if proc.returncode != 0:
            raise RuntimeError("crio config --default failed (%d): %s" % (proc.returncode, proc.stderr[-2000:]))
        return proc.stdout


def crio_start_check(main_text, drop_ins=None, *, workdir=None, binary=None, path_dirs=(), timeout=120):
    """The daemon's start-up validation over the files, stopped before it serves:
    CrioStart(rc, config, error, warnings). rc 0 when validation passed (config: the complete
    effective configuration the daemon logs, as TOML); otherwise crio's exit status, config None
    and error the fatal message. warnings: the messages logged at level warning or error, but for
    NOISE (a handler that fails its checks and is not the default one is dropped with a warning,
    not refused; a runtime that does not answer --version is logged as an error).
    path_dirs: directories put in front of PATH (which otherwise holds only nsenter, so that
    conmon, runc and crun are found only where the files say)."""
    tmp, work = _workdir(workdir)
    try:
        scratch = Scratch(work, main_text, drop_ins)
        argv = [binary or crio_binary()] + scratch.config_args() + scratch.state_args()
        proc = _run(argv, scratch.env(path_dirs), timeout)
        entries = parse_log(proc.stderr)
        warnings = [message for level, message in entries if level in ("warning", "warn", "error")
                    and not message.startswith(NOISE)]
        config = None
        for level, message in entries:
            if level == "info" and message.startswith(CURRENT_CONFIG):
                config = message[len(CURRENT_CONFIG):]
        error = _error(entries)
        if proc.returncode == 1 and _STOP.match(error) and config is not None:
            return CrioStart(0, config, "", warnings)
        return CrioStart(proc.returncode or 1, None, error or proc.stderr.strip(), warnings)
    finally:
        if tmp is not None:
            tmp.cleanup()


class UpstreamHost:
    """A host laid out like CRI-O's upstream packages, under tmp_path: conmon, crun and runc in
    usr/libexec/crio/ (links to Debian's conmon and runc), none of them in $PATH, a stand-in for
    nvidia-container-runtime (a link to runc, which answers --version and features), and
    upstream packaging's 10-crio.conf pointing at them."""

    def __init__(self, tmp_path, binary=None):
        self.binary = binary
        self.tmp = tmp_path
        self.libexec = str(tmp_path / "usr" / "libexec" / "crio")
        self.bin = str(tmp_path / "usr" / "bin")
        os.makedirs(self.libexec)
        os.makedirs(self.bin)
        conmon, runc = (shutil.which(name, path=SYSTEM_PATH) for name in ("conmon", "runc"))
        self.conmon = os.path.join(self.libexec, "conmon")
        os.symlink(conmon, self.conmon)
        for name in ("crun", "runc"):
            os.symlink(runc, os.path.join(self.libexec, name))
        self.nvidia = os.path.join(self.bin, "nvidia-container-runtime")
        os.symlink(runc, self.nvidia)
        with open(os.path.join(REPO, "tests", "unit", "plugins", "module_utils", "runtime", "fixtures",
                               "crio-upstream-10-crio.conf"), encoding="utf-8") as handle:
            self.upstream = handle.read().replace("/usr/libexec/crio/", self.libexec + "/")
        self.runs = 0

    def work(self):
        self.runs += 1
        return str(self.tmp / ("crio-%d" % self.runs))

    def path_dir(self, **links):
        """A directory to put in front of PATH holding the given links (name=target)."""
        path = str(self.tmp / ("path-%d" % self.runs))
        os.makedirs(path, exist_ok=True)
        for name, target in links.items():
            os.symlink(target, os.path.join(path, name))
        return path

    def nvidia_drop_in(self, extra="", runtime_path=None):
        """The handler the editor writes today (runtime_path and runtime_type only), plus extra."""
        return ('[crio.runtime.runtimes.nvidia]\nruntime_path = "%s"\nruntime_type = "oci"\n'
                % (runtime_path or self.nvidia)) + extra

    def config(self, main_text, drop_ins=None, **kwargs):
        return crio_config(main_text, drop_ins, workdir=self.work(), binary=self.binary, **kwargs)

    def start(self, main_text, drop_ins=None, **kwargs):
        return crio_start_check(main_text, drop_ins, workdir=self.work(), binary=self.binary, **kwargs)

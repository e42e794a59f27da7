# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""What the real CRI-O 1.34 (tests/lab/go-binaries, set crio) does with configuration files: the
facts the CRI-O editor relies on, each proved by one test against the binary (crio_check.py runs
it in a scratch directory; nothing of the host is written).

A host laid out like CRI-O's upstream packages is simulated under tmp_path: conmon, crun and runc
in usr/libexec/crio/ (links to Debian's conmon and runc), none of them in $PATH, and a stand-in
for nvidia-container-runtime (a link to runc, which answers --version and features)."""
from __future__ import annotations

import os
import shutil
import tomllib

import pytest

from conftest import require  # pylint: disable=import-error
from crio_check import UpstreamHost, crio_binary, crio_default_config  # pylint: disable=import-error

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))
FIXTURES = os.path.join(REPO, "tests", "unit", "plugins", "module_utils", "runtime", "fixtures")
SYSTEM_PATH = "/usr/sbin:/usr/bin:/sbin:/bin"
CRIO = crio_binary()
HOST_STATE = ("/etc/crio", "/var/lib/crio", "/var/run/crio", "/run/crio", "/var/log/crio", "/run/crun",
              "/usr/share/containers/oci/hooks.d", "/opt/cni/bin", "/var/run/nri", "/opt/nri", "/etc/nri")


@pytest.fixture(autouse=True)
def _binaries():
    missing = [] if CRIO and os.access(CRIO, os.X_OK) else ["crio (tests/lab/go-binaries crio builds it)"]
    missing += ["%s (Debian package %s)" % (name, name) for name in ("conmon", "runc")
                if not shutil.which(name, path=SYSTEM_PATH)]
    require(not missing, ", ".join(missing), "`make integration` provides them")


@pytest.fixture
def host(tmp_path):
    return UpstreamHost(tmp_path, CRIO)


def runtimes(toml_text):
    return tomllib.loads(toml_text)["crio"]["runtime"]["runtimes"]


def copied_monitor_fields(host):
    """What the editor should add to the nvidia handler on an upstream-packaged host: crun's
    monitor fields (and the other options worth carrying over), copied from 10-crio.conf."""
    return ('monitor_path = "%s"\nmonitor_cgroup = "system.slice"\nmonitor_exec_cgroup = ""\nmonitor_env = []\n'
            'runtime_root = "/run/crun"\nallowed_annotations = ["io.containers.trace-syscall"]\n' % host.conmon)


# ---- 2a: the commands, their exit status and output --------------------------------------------

def test_config_prints_the_merged_configuration_and_exits_0(host):
    """`crio --config F --config-dir D config`: exit 0, the merged configuration as TOML on stdout
    (handlers of every file; settings left at CRI-O's defaults commented out), nothing fatal."""
    rc, merged, error = host.config(None, {"10-crio.conf": host.upstream, "99-nvidia.conf": host.nvidia_drop_in()})
    assert (rc, error) == (0, "")
    handlers = runtimes(merged)
    assert sorted(handlers) == ["crun", "nvidia", "runc"]
    assert handlers["nvidia"]["runtime_path"] == host.nvidia
    # settings equal to CRI-O's defaults are printed commented out, default_runtime = "crun" too
    assert "default_runtime" not in tomllib.loads(merged)["crio"]["runtime"]
    assert '\n# default_runtime = "crun"\n' in merged


def test_config_checks_no_runtime_handler_field(host):
    """`crio config` accepts a handler whose runtime_path, monitor_path and runtime_type are all
    wrong: it validates without looking at the disk. Only the daemon's start-up checks them."""
    drop_in = ('[crio.runtime.runtimes.nvidia]\nruntime_path = "/nonexistent/nvidia-container-runtime"\n'
               'runtime_type = "bogus"\nmonitor_path = "/nonexistent/conmon"\nmonitor_cgroup = "bogus"\n')
    rc, merged, error = host.config(None, {"10-crio.conf": host.upstream, "99-nvidia.conf": drop_in})
    assert (rc, error) == (0, "")
    assert runtimes(merged)["nvidia"]["runtime_type"] == "bogus"


def test_start_check_writes_nothing_outside_its_scratch_directory(host):
    """The daemon's start-up validation, all state paths given on the command line, creates none
    of CRI-O's default directories on the host."""
    before = {path: os.path.exists(path) for path in HOST_STATE}
    result = host.start(None, {"10-crio.conf": host.upstream, "99-nvidia.conf": host.nvidia_drop_in(copied_monitor_fields(host))})
    assert result.rc == 0, result.error
    assert {path: os.path.exists(path) for path in HOST_STATE} == before


# ---- 2b: runtime handlers at start-up ------------------------------------------------------------

def test_upstream_packaging_refuses_the_nvidia_handler_without_monitor_fields(host):
    """The reported defect: conmon only in /usr/libexec/crio, the nvidia handler with runtime_path
    and runtime_type only: CRI-O looks conmon up in $PATH and refuses to start."""
    result = host.start(None, {"10-crio.conf": host.upstream, "99-nvidia.toml": host.nvidia_drop_in()})
    assert result.rc == 1
    assert result.error == ('validating runtime config: monitor fields translation: failed to translate monitor '
                            'fields for runtime nvidia: exec: "conmon": executable file not found in $PATH')


def test_upstream_packaging_starts_once_the_monitor_fields_are_copied(host):
    """The same host starts when the nvidia handler carries crun's monitor fields; its
    runtime_path is still nvidia-container-runtime's."""
    result = host.start(None, {"10-crio.conf": host.upstream,
                               "99-nvidia.toml": host.nvidia_drop_in(copied_monitor_fields(host))})
    assert (result.rc, result.error, result.warnings) == (0, "", [])
    nvidia = runtimes(result.config)["nvidia"]
    assert (nvidia["runtime_path"], nvidia["monitor_path"], nvidia["runtime_root"]) == (host.nvidia, host.conmon, "/run/crun")


def test_conmon_in_path_needs_no_monitor_path(host):
    """Packagings with conmon in $PATH (Debian's and Fedora's conmon package): the bare handler
    starts, monitor_path resolved from $PATH."""
    main = '[crio.runtime]\ndefault_runtime = "runc"\n[crio.runtime.runtimes.runc]\nruntime_path = "%s"\n' % (
        os.path.join(host.libexec, "runc"))
    path = host.path_dir(conmon=host.conmon)
    result = host.start(main, {"99-nvidia.toml": host.nvidia_drop_in()}, path_dirs=[path])
    assert (result.rc, result.error) == (0, "")
    assert runtimes(result.config)["nvidia"]["monitor_path"] == os.path.join(path, "conmon")


def test_a_monitor_path_that_does_not_exist_is_refused(host):
    missing = os.path.join(host.libexec, "no-conmon")
    result = host.start(None, {"10-crio.conf": host.upstream,
                               "99-nvidia.toml": host.nvidia_drop_in('monitor_path = "%s"\n' % missing)})
    assert result.rc == 1
    assert result.error == ('validating runtime config: monitor fields translation: failed to translate monitor '
                            'fields for runtime nvidia: invalid conmon path: stat %s: no such file or directory' % missing)


def test_a_monitor_path_that_is_not_executable_is_refused(host):
    """conmon is run (--version) at start-up: a file that cannot be executed is refused."""
    plain = os.path.join(host.bin, "not-conmon")
    with open(plain, "w", encoding="utf-8") as handle:
        handle.write("#!/bin/sh\n")
    result = host.start(None, {"10-crio.conf": host.upstream,
                               "99-nvidia.toml": host.nvidia_drop_in('monitor_path = "%s"\n' % plain)})
    assert result.rc == 1
    assert result.error == ('validating runtime config: monitor fields translation: failed to translate monitor '
                            'fields for runtime nvidia: get conmon version: fork/exec %s: permission denied' % plain)


def test_a_missing_runtime_path_drops_a_handler_that_is_not_the_default(host):
    """nvidia-container-runtime not installed: CRI-O still starts, without the nvidia handler,
    and says so only in a warning."""
    result = host.start(None, {"10-crio.conf": host.upstream, "99-nvidia.toml": host.nvidia_drop_in(
        copied_monitor_fields(host), runtime_path="/nonexistent/nvidia-container-runtime")})
    assert (result.rc, result.error) == (0, "")
    assert result.warnings == ['Runtime handler "nvidia" is being ignored due to: invalid runtime_path for runtime '
                               "'nvidia': stat /nonexistent/nvidia-container-runtime: no such file or directory"]
    assert sorted(runtimes(result.config)) == ["crun", "runc"]


def test_a_missing_runtime_path_of_the_default_handler_is_refused(host):
    drop_in = '[crio.runtime]\ndefault_runtime = "nvidia"\n' + host.nvidia_drop_in(
        copied_monitor_fields(host), runtime_path="/nonexistent/nvidia-container-runtime")
    result = host.start(None, {"10-crio.conf": host.upstream, "99-nvidia.toml": drop_in})
    assert result.rc == 1
    assert result.error == ("validating runtime config: runtime validation: invalid runtime_path for runtime 'nvidia': "
                            "stat /nonexistent/nvidia-container-runtime: no such file or directory")


def test_runtime_path_is_only_checked_to_exist(host):
    """A runtime_path that exists but cannot be executed passes; CRI-O only logs that it could
    not ask it for its version."""
    plain = os.path.join(host.bin, "not-a-runtime")
    with open(plain, "w", encoding="utf-8") as handle:
        handle.write("#!/bin/sh\n")
    result = host.start(None, {"10-crio.conf": host.upstream,
                               "99-nvidia.toml": host.nvidia_drop_in(copied_monitor_fields(host), runtime_path=plain)})
    assert (result.rc, result.error) == (0, "")
    assert any(message.startswith('Unable to determine version of runtime handler "nvidia"') for message in result.warnings)


def test_an_unknown_runtime_type_drops_the_handler(host):
    drop_in = host.nvidia_drop_in(copied_monitor_fields(host)).replace('runtime_type = "oci"', 'runtime_type = "bogus"')
    result = host.start(None, {"10-crio.conf": host.upstream, "99-nvidia.toml": drop_in})
    assert (result.rc, result.error) == (0, "")
    assert result.warnings == ['Runtime handler "nvidia" is being ignored due to: invalid `runtime_type` "bogus" for runtime "nvidia"']


def test_monitor_cgroup_must_be_pod_or_a_slice_under_systemd(host):
    """cgroup_manager systemd (the default): monitor_cgroup "pod" or "*.slice"; empty becomes system.slice."""
    result = host.start(None, {"10-crio.conf": host.upstream, "99-nvidia.toml": host.nvidia_drop_in(
        'monitor_path = "%s"\nmonitor_cgroup = "custom"\n' % host.conmon)})
    assert result.rc == 1
    assert result.error == ("validating runtime config: monitor fields translation: failed to translate monitor "
                            "fields for runtime nvidia: conmon cgroup should be 'pod' or a systemd slice")


def test_monitor_cgroup_must_be_pod_or_empty_under_cgroupfs(host):
    """cgroup_manager cgroupfs: monitor_cgroup "pod" or empty (system.slice is taken as empty)."""
    main = '[crio.runtime]\ncgroup_manager = "cgroupfs"\n'
    result = host.start(main, {"10-crio.conf": host.upstream, "99-nvidia.toml": host.nvidia_drop_in(
        'monitor_path = "%s"\nmonitor_cgroup = "custom.slice"\n' % host.conmon)})
    assert result.rc == 1
    assert result.error == ("validating runtime config: monitor fields translation: failed to translate monitor "
                            "fields for runtime nvidia: cgroupfs manager conmon cgroup should be 'pod' or empty, "
                            "but got: 'custom.slice'")
    result = host.start(main, {"10-crio.conf": host.upstream,
                               "99-nvidia.toml": host.nvidia_drop_in(copied_monitor_fields(host))})
    assert (result.rc, result.error) == (0, "")


def test_inherit_default_runtime_replaces_the_nvidia_runtime_path(host):
    """inherit_default_runtime = true (a field a blind copy of crun's table could carry) makes the
    handler run the default runtime itself: the editor must never copy it."""
    result = host.start(None, {"10-crio.conf": host.upstream, "99-nvidia.toml": host.nvidia_drop_in(
        copied_monitor_fields(host) + "inherit_default_runtime = true\n")})
    assert (result.rc, result.error) == (0, "")
    assert runtimes(result.config)["nvidia"]["runtime_path"] == os.path.join(host.libexec, "crun")


# ---- 2c: malformed files ----------------------------------------------------------------------

def test_malformed_main_file_is_named_with_its_line(host):
    """Both commands: exit 1, the file's path and line (no column), the TOML parser's message."""
    main = '[crio.runtime]\nlog_level = "info\n'
    for run in (host.config, host.start):
        result = run(main, {"10-crio.conf": host.upstream})
        work = os.path.join(str(host.tmp), "crio-%d" % host.runs)
        assert (result[0], result[1]) == (1, None)
        assert result[2] == ('get and merge config from context: update config from file: update config from drop-in '
                             'file: unable to decode configuration %s/etc/crio/crio.conf: toml: line 2 (last key '
                             '"crio.runtime.log_level"): strings cannot contain newlines' % work)


def test_malformed_drop_in_is_named_with_its_line(host):
    drop_in = host.nvidia_drop_in().replace('runtime_path = "%s"' % host.nvidia, 'runtime_path = "%s' % host.nvidia)
    for run in (host.config, host.start):
        result = run(None, {"10-crio.conf": host.upstream, "99-nvidia.toml": drop_in})
        work = os.path.join(str(host.tmp), "crio-%d" % host.runs)
        assert (result[0], result[1]) == (1, None)
        assert result[2] == ('get and merge config from context: update config from path: walk path: unable to decode '
                             'configuration %s/etc/crio/crio.conf.d/99-nvidia.toml: toml: line 2 (last key '
                             '"crio.runtime.runtimes.nvidia.runtime_path"): strings cannot contain newlines' % work)


def test_an_unterminated_table_header_is_reported_on_the_next_line(host):
    """The parser reports where it met the newline: one line below the broken header."""
    result = host.config(None, {"99-nvidia.toml": "[crio.runtime.runtimes.nvidia\nruntime_type = \"oci\"\n"})
    assert result.rc == 1
    assert result.error.endswith("/etc/crio/crio.conf.d/99-nvidia.toml: toml: line 2: expected '.' or ']' to end "
                                 "table name, but got '\\n' instead")


def test_a_value_of_the_wrong_type_is_refused(host):
    result = host.config(None, {"99-nvidia.toml": "[crio.runtime.runtimes.nvidia]\nruntime_path = 5\n"})
    assert result.rc == 1
    assert result.error.endswith('/99-nvidia.toml: toml: line 2 (last key "crio.runtime.runtimes.nvidia.runtime_path"): '
                                 "incompatible types: TOML value has type int64; destination has type string")


def test_a_duplicate_key_is_refused(host):
    result = host.config(None, {"99-nvidia.toml": '[crio.runtime.runtimes.nvidia]\nruntime_path = "a"\nruntime_path = "b"\n'})
    assert result.rc == 1
    assert result.error.endswith('/99-nvidia.toml: toml: line 3 (last key "crio.runtime.runtimes.nvidia.runtime_path"): '
                                 "Key 'crio.runtime.runtimes.nvidia.runtime_path' has already been defined.")


def test_unknown_keys_are_ignored_silently(host):
    """A misspelt field is no error: it is simply not there (here: no monitor_path, so start-up
    fails on conmon, not on the typo)."""
    drop_in = host.nvidia_drop_in('monitor_pth = "%s"\n' % host.conmon)
    assert host.config(None, {"10-crio.conf": host.upstream, "99-nvidia.toml": drop_in})[0::2] == (0, "")
    result = host.start(None, {"10-crio.conf": host.upstream, "99-nvidia.toml": drop_in})
    assert result.error.endswith('failed to translate monitor fields for runtime nvidia: exec: "conmon": '
                                 "executable file not found in $PATH")


# ---- 2d: which files, in which order, merged how ----------------------------------------------

def test_main_file_first_then_drop_ins_in_lexical_order(host):
    """crio.conf, then crio.conf.d by name, byte order (100-... before 20-...); the last wins."""
    result = host.config('[crio.runtime]\nlog_level = "error"\n', {
        "20-b.conf": '[crio.runtime]\nlog_level = "warn"\n',
        "100-a.conf": '[crio.runtime]\nlog_level = "debug"\n'})
    assert result.rc == 0, result.error
    assert tomllib.loads(result.config)["crio"]["runtime"]["log_level"] == "warn"


def test_every_file_in_the_drop_in_directory_is_read_whatever_its_name(host):
    """Not only *.conf: .toml, no extension, editor and package-manager leftovers, hidden files."""
    names = ["10-a.conf", "20-b.toml", "30-c", "40-d.conf.rpmsave", "50-e.conf~", ".60-f.conf", "70-g.conf.bak"]
    drop_ins = {name: '[crio.runtime.runtimes.h%d]\nruntime_path = "/x"\n' % index for index, name in enumerate(names)}
    result = host.config(None, drop_ins)
    assert result.rc == 0, result.error
    assert sorted(runtimes(result.config)) == sorted(["crun"] + ["h%d" % index for index in range(len(names))])


def test_subdirectories_of_the_drop_in_directory_are_read_in_the_same_order(host):
    """The directory is walked recursively; a subdirectory's files come at the subdirectory's
    place in the order."""
    result = host.config(None, {
        "10-a.conf": '[crio.runtime]\nlog_level = "debug"\n',
        "50-sub/99-x.conf": '[crio.runtime]\nlog_level = "warn"\n',
        "90-z.conf": '[crio.runtime]\nlog_level = "error"\n'})
    assert tomllib.loads(result.config)["crio"]["runtime"]["log_level"] == "error"
    result = host.config(None, {"10-a.conf": '[crio.runtime]\nlog_level = "debug"\n',
                                "50-sub/01-x.conf": '[crio.runtime]\nlog_level = "warn"\n'})
    assert tomllib.loads(result.config)["crio"]["runtime"]["log_level"] == "warn"


def test_a_drop_in_handler_keeps_the_handlers_of_other_files(host):
    """The runtimes table merges by handler name: 99-nvidia adds nvidia, crun and runc stay."""
    result = host.config(None, {"10-crio.conf": host.upstream, "99-nvidia.toml": host.nvidia_drop_in()})
    handlers = runtimes(result.config)
    assert sorted(handlers) == ["crun", "nvidia", "runc"]
    assert handlers["crun"]["monitor_path"] == host.conmon


def test_a_handler_redefined_in_a_later_file_is_replaced_whole(host):
    """A handler table is not merged field by field: a later file naming runc replaces 10-crio.conf's
    runc; what it leaves out is gone (runtime_path and monitor_path here)."""
    result = host.config(None, {"10-crio.conf": host.upstream, "50-runc.conf": '[crio.runtime.runtimes.runc]\nruntime_root = "/run/x"\n'})
    runc = runtimes(result.config)["runc"]
    assert (runc["runtime_root"], runc["runtime_path"], runc["monitor_path"]) == ("/run/x", "", "")


def test_a_file_handler_replaces_the_built_in_crun_handler_whole(host):
    """Without any file CRI-O has a built-in crun handler (monitor_env PATH=..., runtime_root
    /run/crun, allowed annotations); upstream's 10-crio.conf replaces it: no monitor_env."""
    default = runtimes(crio_default_config(binary=CRIO))["crun"]
    assert default["monitor_env"] == ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]
    assert "monitor_env" not in runtimes(host.config(None, {"10-crio.conf": host.upstream}).config)["crun"]


def test_default_runtime_unset_is_crun_even_when_only_runc_is_configured(host):
    """default_runtime defaults to "crun"; CRI-O keeps its built-in crun handler, finds no crun
    in $PATH and refuses to start."""
    main = '[crio.runtime.runtimes.runc]\nruntime_path = "%s"\nmonitor_path = "%s"\n' % (os.path.join(host.libexec, "runc"), host.conmon)
    merged = host.config(main)
    assert '\n# default_runtime = "crun"\n' in merged.config  # commented out: the default
    assert sorted(runtimes(merged.config)) == ["crun", "runc"]
    result = host.start(main)
    assert result.error == ('validating runtime config: runtime validation: "crun" not found in $PATH: exec: "crun": '
                            "executable file not found in $PATH")


def test_default_runtime_must_name_a_handler_table(host):
    for run in (host.config, host.start):
        result = run('[crio.runtime]\ndefault_runtime = "nvidia"\n')
        assert result[0] == 1
        assert result[2] == ('validating runtime config: default_runtime set to "nvidia", but no runtime entry table '
                             '[crio.runtime.runtimes.nvidia] was found')


# ---- 2f: the fixtures -------------------------------------------------------------------------

def test_default_config_fixture_is_what_the_binary_prints():
    with open(os.path.join(FIXTURES, "crio-1.34-default.conf"), encoding="utf-8") as handle:
        fixture = handle.read()
    output = crio_default_config(binary=CRIO)
    header = fixture[:len(fixture) - len(output)]
    assert fixture.endswith(output)
    assert header.count("\n") == 3 and all(line.startswith("# ") for line in header.splitlines())

# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import pytest

import os
import tomllib

from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime import crio
from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime.common import ConfigError, MASK, mask_secrets, mask_text

NV_PATH = "/usr/bin/nvidia-container-runtime"
SOURCE = "/etc/crio/crio.conf.d/99-nvidia.toml"

EXPECTED_DEFAULT = (
    "# Managed by Ansible (gpuops.nvidia): the NVIDIA container runtime for CRI-O.\n"
    "# Changes made here are overwritten on the next run.\n"
    "# CDI needs no setting here: CRI-O enables it by default and reads CDI specs from\n"
    "# /etc/cdi and /var/run/cdi.\n"
    "\n"
    "[crio.runtime.runtimes.nvidia]\n"
    'runtime_path = "/usr/bin/nvidia-container-runtime"\n'
    'runtime_type = "oci"\n'
)


@pytest.fixture(params=["tomllib", "tomlkit"])
def reader(request, monkeypatch):
    """Run a test with each TOML reader: tomllib (Python >= 3.11) and the tomlkit fallback."""
    if request.param == "tomlkit":
        monkeypatch.setattr(crio, "_toml_reader", None)
    return request.param


def test_default_drop_in_text():
    assert crio.drop_in() == EXPECTED_DEFAULT


@pytest.mark.parametrize("kwargs, runtime, default", [
    ({}, "nvidia", None),
    ({"set_as_default": True}, "nvidia", "nvidia"),
    ({"runtime_name": "nvidia-cdi", "runtime_path": "/usr/bin/nvidia-container-runtime.cdi"}, "nvidia-cdi", None),
    ({"runtime_name": "nvidia-legacy", "set_as_default": True}, "nvidia-legacy", "nvidia-legacy"),
    ({"runtime_type": "vm"}, "nvidia", None),
    ({"runtime_path": 'C:\\odd "path"\t\x7f\u00e9', "set_as_default": True}, "nvidia", "nvidia"),
])
def test_drop_in_parses_with_the_right_keys(kwargs, runtime, default):
    text = crio.drop_in(**kwargs)
    data = tomllib.loads(text)
    entry = data["crio"]["runtime"]["runtimes"][runtime]
    assert entry == {"runtime_path": kwargs.get("runtime_path", NV_PATH), "runtime_type": kwargs.get("runtime_type", "oci")}
    assert data["crio"]["runtime"].get("default_runtime") == default
    assert ("[crio.runtime]\n" in text) is (default is not None)
    assert set(data) == {"crio"} and set(data["crio"]) == {"runtime"}
    assert set(data["crio"]["runtime"]) == ({"runtimes", "default_runtime"} if default else {"runtimes"})
    assert text.startswith("# Managed by Ansible (gpuops.nvidia)") and text.endswith("\n")
    assert "CDI" in text and "/etc/cdi" in text and "/var/run/cdi" in text
    # The same arguments always give the same text, and the drop-in checks as its own.
    assert crio.drop_in(**kwargs) == text
    assert crio.effective([(SOURCE, text)])["runtimes"][runtime]["table"] == entry


@pytest.mark.parametrize("monitor_env, expected", [
    ({"PATH": "/usr/local/bin:/usr/bin:/bin"}, ["PATH=/usr/local/bin:/usr/bin:/bin"]),
    (["NVIDIA_VISIBLE_DEVICES=void", "LD_LIBRARY_PATH="], ["NVIDIA_VISIBLE_DEVICES=void", "LD_LIBRARY_PATH="]),
    ({"A": "x=y", "B": None}, ["A=x=y", "B="]),
    ([], None),
    (None, None),
])
def test_monitor_env(monitor_env, expected):
    entry = tomllib.loads(crio.drop_in(handler={"monitor_env": monitor_env}))["crio"]["runtime"]["runtimes"]["nvidia"]
    assert entry.get("monitor_env") == expected


@pytest.mark.parametrize("kwargs, message", [
    ({"runtime_name": ""}, "^runtime_name: '' is not a valid runtime handler name"),
    ({"runtime_name": None}, "^runtime_name: None is not a valid runtime handler name"),
    ({"runtime_name": "runc"}, "^runtime_name: 'runc' is CRI-O's own runtime"),
    ({"runtime_name": "crun"}, "^runtime_name: 'crun' is CRI-O's own runtime"),
    ({"runtime_name": "nvidia gpu"}, "^runtime_name: 'nvidia gpu' is not a valid runtime handler name"),
    ({"runtime_path": " "}, "^runtime_path: must be the path"),
    ({"runtime_type": "runc"}, "^runtime_type: must be one of oci, vm, pod"),
    ({"handler": {"monitor_env": "PATH=/bin"}}, "^handler_options: monitor_env must be a dict or a list"),
    ({"handler": {"monitor_env": ["PATH"]}}, "NAME=value"),
    ({"handler": {"monitor_env": ["1X=y"]}}, "NAME=value"),
    ({"handler": {"monitor_env": [3]}}, "NAME=value"),
    ({"handler": {"monitor_path": ["/x"]}}, "^handler_options: monitor_path must be an absolute path"),
    ({"handler": {"monitor_path": "conmon"}}, "^handler_options: monitor_path must be an absolute path"),
    ({"handler": {"monitor_cgroup": 5}}, "^handler_options: monitor_cgroup must be a string"),
    ({"handler": {"privileged_without_host_devices": "yes"}}, "must be a boolean"),
    ({"handler": {"default_annotations": {"a": 1}}}, "must be a table of strings"),
    ({"handler": {"runtime_path": "/evil"}}, "^handler_options: runtime_path is not a handler option here"),
    ({"handler": {"runtime_type": "vm"}}, "^handler_options: runtime_type is not a handler option here"),
    ({"handler": {"inherit_default_runtime": True}}, "^handler_options: CRI-O 1.34 has no runtime handler field"),
])
def test_drop_in_bad_arguments(kwargs, message):
    with pytest.raises(ConfigError, match=message) as err:
        crio.drop_in(**kwargs)
    assert err.value.option == ("handler_options" if "handler" in kwargs else next(iter(kwargs)))


# An existing crio.conf as distributions ship it, with registry credentials in a drop-in style.
CRIO_CONF = """\
[crio]
log_dir = "/var/log/crio/pods"

[crio.api]
listen = "/var/run/crio/crio.sock"

[crio.runtime]
default_runtime = "crun"
conmon_cgroup = "pod"
cgroup_manager = "systemd"

[crio.runtime.runtimes.crun]
runtime_path = "/usr/bin/crun"
runtime_type = "oci"
runtime_root = "/run/crun"
monitor_env = ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]

[crio.image]
pause_image = "registry.k8s.io/pause:3.10"
global_auth_file = "/etc/crio/auth.json"

[crio.network]
network_dir = "/etc/cni/net.d/"
"""


@pytest.mark.usefixtures("reader")
def test_parse_crio_config_readers_agree():
    data = crio.parse_crio_config(CRIO_CONF, "/etc/crio/crio.conf")
    assert data == tomllib.loads(CRIO_CONF)
    assert not hasattr(data, "unwrap") and not hasattr(data["crio"]["runtime"], "unwrap")  # plain dicts, not tomlkit containers
    config = crio.effective([("/etc/crio/crio.conf", CRIO_CONF)])
    assert config["runtimes"]["crun"]["table"]["runtime_root"] == "/run/crun"
    assert set(config["runtimes"]) == {"crun"}


@pytest.mark.parametrize("text", [None, "", "  \n", "# only a comment\n"])
@pytest.mark.usefixtures("reader")
def test_nothing_there(text):
    assert crio.effective([(SOURCE, text)]) == {"default_runtime": "crun", "default_from": None,
                                                "cgroup_manager": "systemd", "runtimes": {}}


@pytest.mark.parametrize("text", [
    '[crio.runtime.runtimes]\nnvidia = "/usr/bin/nvidia-container-runtime"\n',
    'crio = 1\n',
    '[crio]\nruntime = ["x"]\n',
])
@pytest.mark.usefixtures("reader")
def test_wrong_types_on_the_way(text):
    with pytest.raises(ConfigError, match=r"^%s: crio[.a-z]* must be a table, not \w+; the file was left unchanged$" % SOURCE):
        crio.effective([(SOURCE, text)])


# Malformed TOML: (text, line, column) as tomllib reports them (columns from 1).
MALFORMED = [
    ('[crio.runtime.runtimes.nvidia]\nruntime_path = \n', 2, 16),
    ('[crio.runtime.runtimes.nvidia]\nruntime_path "/usr/bin/nvidia-container-runtime"\n', 2, 14),
    ('[crio.runtime\nx = 1\n', 1, 14),
    ('[crio.runtime.runtimes.nvidia]\nruntime_type = oci\n', 2, 16),
]


@pytest.mark.parametrize("text, line, column", MALFORMED)
def test_malformed_toml_tomllib(text, line, column):
    with pytest.raises(ConfigError) as err:
        crio.effective([(SOURCE, text)])
    message = str(err.value)
    assert message.startswith("%s: line %d, column %d: " % (SOURCE, line, column))
    assert message.endswith("; the file was left unchanged")
    assert "(at line" not in message


@pytest.mark.parametrize("text, line, column", MALFORMED)
def test_malformed_toml_tomlkit(text, line, column, monkeypatch):
    monkeypatch.setattr(crio, "_toml_reader", None)
    with pytest.raises(ConfigError) as err:
        crio.parse_crio_config(text, "/etc/crio/crio.conf")
    message = str(err.value)
    assert message.startswith("/etc/crio/crio.conf: line %d, column %d: " % (line, column))
    assert message.endswith("; the file was left unchanged")
    assert " at line " not in message


@pytest.mark.parametrize("text", ['[crio]\nlog_dir = "/a"\nlog_dir = "/b"\n', 'x = [1, 2\n', 's = "unterminated'])
@pytest.mark.usefixtures("reader")
def test_other_malformed_toml(text):
    with pytest.raises(ConfigError, match=r"^/c\.toml: .+; the file was left unchanged$"):
        crio.parse_crio_config(text, "/c.toml")


@pytest.mark.parametrize("text, position", [("x = [1, 2\n", "line 2, column 1"), ('s = "unterminated', "line 1, column 18")])
@pytest.mark.usefixtures("reader")
def test_end_of_file_gets_a_position(text, position):
    with pytest.raises(ConfigError, match=r"^/c\.toml: %s: (Unclosed array|Unterminated string|Unexpected end of file)" % position):
        crio.parse_crio_config(text, "/c.toml")


def test_no_toml_reader(monkeypatch):
    monkeypatch.setattr(crio, "_toml_reader", None)
    monkeypatch.setattr(crio, "HAS_TOMLKIT", False)
    with pytest.raises(ConfigError, match="cannot read TOML on this host"):
        crio.parse_crio_config("a = 1\n", SOURCE)
    # Writing never needs a library.
    assert crio.drop_in() == EXPECTED_DEFAULT


AUTH_TOML = """\
[crio.image]
global_auth_file = "/etc/crio/auth.json"

[registry]
password = "Hunter2-Registry"
auth = "dXNlcjpodW50ZXIy"
identitytoken = "eyJhbGciOiJIUzI1NiJ9.e30.sig"
"""
SECRETS = ("Hunter2-Registry", "dXNlcjpodW50ZXIy", "eyJhbGciOiJIUzI1NiJ9.e30.sig")


@pytest.mark.usefixtures("reader")
def test_credentials_never_show_masked():
    data = crio.parse_crio_config(AUTH_TOML)
    masked = mask_text(AUTH_TOML) + repr(mask_secrets(data))
    for secret in SECRETS:
        assert secret not in masked
    assert MASK in masked


@pytest.mark.parametrize("broken", [AUTH_TOML.replace('auth = "', 'auth "'), AUTH_TOML.replace('password = "Hunter2-Registry"', 'password = Hunter2-Registry')])
@pytest.mark.usefixtures("reader")
def test_errors_do_not_quote_the_file(broken):
    with pytest.raises(ConfigError) as err:
        crio.parse_crio_config(broken)
    for secret in SECRETS:
        assert secret not in str(err.value)


@pytest.mark.parametrize("name, key", [("nvidia", "nvidia"), ("nvidia-cdi", "nvidia-cdi"), ("nvidia.x", '"nvidia.x"'),
                                       ('a"b', '"a\\"b"'), ("", '""')])
def test_toml_key(name, key):
    assert crio.toml_key(name) == key


FIXTURES = os.path.join(os.path.dirname(os.path.abspath(__file__)), "fixtures")
UPSTREAM = ("/etc/crio/crio.conf.d/10-crio.conf", open(os.path.join(FIXTURES, "crio-upstream-10-crio.conf")).read())


def test_upstream_packaging_gives_the_handler_conmon_in_libexec():
    """CRI-O's upstream packages: no crio.conf, conmon in /usr/libexec/crio named by 10-crio.conf."""
    plan = crio.configure([UPSTREAM])
    assert plan["base"] == {"runtime": "crun", "from": "/etc/crio/crio.conf.d/10-crio.conf"}
    entry = tomllib.loads(plan["text"])["crio"]["runtime"]["runtimes"]["nvidia"]
    assert entry == {"runtime_path": NV_PATH, "runtime_type": "oci", "runtime_root": "/run/crun",
                     "monitor_path": "/usr/libexec/crio/conmon",
                     "allowed_annotations": ["io.containers.trace-syscall"]}
    assert plan["warnings"] == []


def test_built_in_crun_when_no_file_defines_the_default():
    """Debian-style packaging: conmon in $PATH and no handler table in any file."""
    plan = crio.configure([("/etc/crio/crio.conf", '[crio.runtime]\nlog_level = "info"\n')])
    assert plan["base"] == {"runtime": "crun", "from": "CRI-O's built-in crun handler"}
    entry = tomllib.loads(plan["text"])["crio"]["runtime"]["runtimes"]["nvidia"]
    assert entry["monitor_cgroup"] == "system.slice" and entry["runtime_root"] == "/run/crun"
    assert entry["monitor_env"] == ["PATH=/usr/local/sbin:/usr/local/bin:/usr/sbin:/usr/bin:/sbin:/bin"]
    assert "monitor_path" not in entry


def test_the_default_runtime_and_later_files_decide():
    files = [("/etc/crio/crio.conf", CRIO_CONF),
             ("/etc/crio/crio.conf.d/10-runc.conf",
              '[crio.runtime]\ndefault_runtime = "runc"\n'
              '[crio.runtime.runtimes.runc]\nruntime_path = "/usr/sbin/runc"\n'
              'monitor_path = "/opt/conmon"\nmonitor_cgroup = "pod"\n'
              'monitor_env = ["HTTPS_PROXY=http://proxy:3128"]\n'
              'inherit_default_runtime = true\nplatform_runtime_paths = {"x" = "y"}\n')]
    plan = crio.configure(files, set_as_default=True)
    entry = tomllib.loads(plan["text"])["crio"]["runtime"]["runtimes"]["nvidia"]
    assert plan["base"]["runtime"] == "runc"
    # the monitor settings are runc's; inherit_default_runtime and platform_runtime_paths are not copied
    assert entry == {"runtime_path": NV_PATH, "runtime_type": "oci", "monitor_path": "/opt/conmon",
                     "monitor_cgroup": "pod", "monitor_env": ["HTTPS_PROXY=http://proxy:3128"]}
    assert tomllib.loads(plan["text"])["crio"]["runtime"]["default_runtime"] == "nvidia"


def test_a_later_drop_in_that_wins_is_named():
    later = ("/etc/crio/crio.conf.d/99-zz.conf", '[crio.runtime]\ndefault_runtime = "crun"\n')
    plan = crio.configure([UPSTREAM, later], set_as_default=True, later=[later[0]])
    assert plan["warnings"] == ["/etc/crio/crio.conf.d/99-zz.conf, read after /etc/crio/crio.conf.d/99-nvidia.toml, "
                                "sets default_runtime = 'crun', so nvidia is not the default"]


def test_handler_options_override_and_drop_fields():
    plan = crio.configure([UPSTREAM], handler_options={"monitor_path": "/usr/bin/conmon", "runtime_root": None,
                                                       "monitor_cgroup": "pod"})
    assert plan["handler"] == {"monitor_path": "/usr/bin/conmon", "allowed_annotations": ["io.containers.trace-syscall"],
                               "monitor_cgroup": "pod"}
    with pytest.raises(ConfigError, match=r"^handler_options: CRI-O 1.34 has no runtime handler field monitor_pth"):
        crio.configure([UPSTREAM], handler_options={"monitor_pth": "/usr/bin/conmon"})
    # a table of environment variables becomes the array CRI-O reads
    env = crio.configure([UPSTREAM], handler_options={"monitor_env": {"A": "b"}})
    assert tomllib.loads(env["text"])["crio"]["runtime"]["runtimes"]["nvidia"]["monitor_env"] == ["A=b"]


def test_other_runtimes_are_not_taken_over():
    kata = ("/etc/crio/crio.conf.d/50-kata.conf",
            '[crio.runtime.runtimes.kata]\nruntime_path = "/usr/bin/kata-runtime"\nruntime_type = "vm"\n')
    with pytest.raises(ConfigError, match=r"^runtime_name: the CRI-O configuration already defines a runtime 'kata' "
                                          r"\(/usr/bin/kata-runtime\) that is not NVIDIA's"):
        crio.configure([UPSTREAM, kata], runtime_name="kata")
    nvidia = ("/etc/crio/crio.conf.d/50-nv.conf",
              '[crio.runtime.runtimes.nvidia]\nruntime_path = "/usr/local/nvidia/toolkit/nvidia-container-runtime"\n')
    assert crio.configure([UPSTREAM, nvidia])["text"] is not None  # NVIDIA's own entry is updated


@pytest.mark.parametrize("fields, manager, conmon_in_path, executables, problem", [
    ({}, "systemd", True, {}, None),
    ({}, "systemd", False, {}, "the handler has no monitor_path and conmon is not in $PATH"),
    ({"monitor_path": "/usr/libexec/crio/conmon"}, "systemd", False, {"/usr/libexec/crio/conmon": True}, None),
    ({"monitor_path": "/usr/libexec/crio/conmon"}, "systemd", True, {"/usr/libexec/crio/conmon": False},
     "the handler's monitor_path /usr/libexec/crio/conmon is no executable file on this node"),
    ({"monitor_cgroup": "custom.slice"}, "cgroupfs", True, {}, "monitor_cgroup 'custom.slice' does not suit the cgroupfs"),
    ({"monitor_cgroup": "pod"}, "cgroupfs", True, {}, None),
    ({"monitor_cgroup": "conmon"}, "systemd", True, {}, "monitor_cgroup 'conmon' does not suit the systemd cgroup"),
    ({"monitor_cgroup": "system.slice"}, "systemd", True, {}, None),
])
def test_handler_problems_as_crio_checks_them(fields, manager, conmon_in_path, executables, problem):
    found = crio.handler_problems(fields, manager, conmon_in_path, executables)
    if problem is None:
        assert found == []
    else:
        assert len(found) == 1 and found[0].startswith(problem)


def test_absent_warns_when_another_file_still_names_the_runtime_default():
    files = [("/etc/crio/crio.conf", '[crio.runtime]\ndefault_runtime = "nvidia"\n')]
    plan = crio.configure(files, state="absent")
    assert plan["text"] is None
    assert plan["warnings"][0].startswith("/etc/crio/crio.conf still makes nvidia CRI-O's default runtime")


def test_validation_files_keep_the_drop_in_directory_layout(tmp_path):
    files = [("/etc/crio/crio.conf", "a = 1\n"), ("/etc/crio/crio.conf.d/sub/10-x.conf", "b = 2\n")]
    laid, main, conf_d = crio.validation_files("/etc/crio/crio.conf", files, "c = 3\n",
                                               "/etc/crio/crio.conf.d/99-nvidia.toml", "/etc/crio/crio.conf.d", "/s")
    assert main == "/s/crio.conf" and conf_d == "/s/crio.conf.d"
    assert laid == {"/s/crio.conf": "a = 1\n", "/s/crio.conf.d/.keep": "", "/s/crio.conf.d/sub/10-x.conf": "b = 2\n",
                    "/s/crio.conf.d/99-nvidia.toml": "c = 3\n"}
    assert crio.config_argv("/usr/bin/crio", main, conf_d) == ["/usr/bin/crio", "--config", "/s/crio.conf",
                                                               "--config-dir", "/s/crio.conf.d", "config"]
    assert crio.validation_problems(1, "", 'time="x" level=info msg="Updating config from path: x"\n'
                                           'time="x" level=fatal msg="validating runtime config: default_runtime set '
                                           'to \\"nvidia\\", but no runtime entry table"\n', "nvidia", NV_PATH,
                                    "present") == [
        'CRI-O rejected the planned configuration: validating runtime config: default_runtime set to "nvidia", '
        'but no runtime entry table']

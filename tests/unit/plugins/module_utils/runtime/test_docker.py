# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import json
import re
import sys

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime import docker
from ansible_collections.gpuops.nvidia.plugins.module_utils.runtime.common import ConfigError, MASK, mask_secrets, mask_text

NV_PATH = "/usr/bin/nvidia-container-runtime"
MANAGED = ("runtimes", "default-runtime", "features")

# Realistic daemon.json files, as users and installers leave them.
INPUTS = {
    "missing": None,
    "empty": "",
    "blank": "  \n\n",
    "empty-object": "{}\n",
    "mirrors": json.dumps({
        "registry-mirrors": ["https://mirror.gcr.io", "https://registry.example.org:5000"],
        "insecure-registries": ["10.0.0.0/8", "registry.lab:5000"],
    }, indent=2) + "\n",
    "logging-cgroups": json.dumps({
        "data-root": "/srv/docker",
        "exec-opts": ["native.cgroupdriver=systemd"],
        "log-driver": "json-file",
        "log-opts": {"max-size": "100m", "max-file": "3", "labels": "production_status"},
        "storage-driver": "overlay2",
        "live-restore": True,
        "default-ulimits": {"nofile": {"Name": "nofile", "Hard": 64000, "Soft": 64000}},
        "bip": "172.26.0.1/16",
        "mtu": 1450,
        "debug": False,
    }, indent=4) + "\n",
    "gvisor": json.dumps({
        "runtimes": {"runsc": {"path": "/usr/local/bin/runsc", "runtimeArgs": ["--platform=systrap"]}},
        "default-runtime": "runc",
        "log-level": "warn",
    }, indent=2) + "\n",
    "nvidia-with-args": json.dumps({
        "runtimes": {"nvidia": {"path": "/usr/local/nvidia/toolkit/nvidia-container-runtime", "runtimeArgs": ["--debug"]}},
        "default-runtime": "nvidia",
        "exec-opts": ["native.cgroupdriver=systemd"],
    }, indent=2) + "\n",
    "features": json.dumps({
        "features": {"buildkit": True, "containerd-snapshotter": True},
        "insecure-registries": [],
        "max-concurrent-downloads": 10,
    }, indent=2) + "\n",
    "tabs-unicode": '{\n\t"labels": ["owner=J\u00fcrgen", "rack=\u00e9t\u00e9-3"],\n\t"hosts": ["unix:///var/run/docker.sock"]\n}\n',
    "compact": '{"log-driver":"journald","userns-remap":"default","ipv6":true,"fixed-cidr-v6":"2001:db8:1::/64","dns":["1.1.1.1"]}',
    "authz": json.dumps({
        "authorization-plugins": ["opa-docker-authz"],
        "tlsverify": True,
        "tlscacert": "/etc/docker/ca.pem",
        "tlscert": "/etc/docker/server.pem",
        "tlskey": "/etc/docker/server-key.pem",
        "hosts": ["tcp://0.0.0.0:2376", "unix:///var/run/docker.sock"],
        "proxies": {"http-proxy": "http://proxy.corp:3128", "no-proxy": "localhost,127.0.0.1"},
    }, indent=2) + "\n",
    "crlf": '{\r\n  "log-driver": "local",\r\n  "runtimes": {\r\n    "crun": {\r\n      "path": "/usr/bin/crun"\r\n    }\r\n  }\r\n}\r\n',
}


def _parsed(text):
    return json.loads(text) if text and text.strip() else {}


def _unmanaged(data):
    return {key: value for key, value in data.items() if key not in MANAGED}


def _effective_default(data):
    return data.get("default-runtime", "runc")


@pytest.mark.parametrize("name", sorted(INPUTS))
@pytest.mark.parametrize("set_as_default", [False, True])
@pytest.mark.parametrize("enable_cdi", [True, False])
def test_present_keeps_everything_and_is_idempotent(name, set_as_default, enable_cdi):
    text = INPUTS[name]
    before = _parsed(text)
    result = docker.configure(text, set_as_default=set_as_default, enable_cdi=enable_cdi)
    assert result["changed"] is True
    after = json.loads(result["text"])
    assert after == result["data"]
    assert result["text"].endswith("\r\n" if name == "crlf" else "\n")

    # Every key the editor does not manage survives, unchanged and in its original order.
    assert _unmanaged(after) == _unmanaged(before)
    assert [key for key in after if key in before] == list(before)
    # The NVIDIA runtime, keeping other keys of its entry and every other runtime.
    runtimes = after["runtimes"]
    assert runtimes["nvidia"]["path"] == NV_PATH
    for runtime, entry in before.get("runtimes", {}).items():
        expected = dict(entry, path=NV_PATH) if runtime == "nvidia" else entry
        assert runtimes[runtime] == expected
    # The default runtime is managed only on request.
    if set_as_default:
        assert after["default-runtime"] == "nvidia"
    else:
        assert after.get("default-runtime") == before.get("default-runtime")
    # CDI on request, other features kept.
    features_before = before.get("features", {})
    if enable_cdi:
        assert after["features"] == dict(features_before, cdi=True)
    else:
        assert after.get("features") == before.get("features")

    # Second run: nothing to do, byte for byte.
    again = docker.configure(result["text"], set_as_default=set_as_default, enable_cdi=enable_cdi)
    assert again["changed"] is False
    assert again["text"] == result["text"]
    assert again["warnings"] == []


@pytest.mark.parametrize("name", sorted(INPUTS))
@pytest.mark.parametrize("set_as_default", [False, True])
def test_absent_with_the_record_restores_exactly_what_was_there(name, set_as_default):
    """JSON has no comments: the record says what the editor added and what it replaced."""
    text = INPUTS[name]
    present = docker.configure(text, set_as_default=set_as_default)
    assert present["record"]["entries"]
    again = docker.configure(present["text"], set_as_default=set_as_default, record=present["record"])
    assert again["changed"] is False and again["record"] == present["record"]
    result = docker.configure(present["text"], state="absent", record=present["record"])
    assert result["record"] is None
    assert result["data"] == _parsed(text)
    assert list(result["data"]) == list(_parsed(text))  # and in the original order
    if text is None:
        assert result["text"] is None


def test_absent_keeps_features_cdi_the_operator_had():
    text = '{"features": {"cdi": true}, "log-level": "warn"}\n'
    present = docker.configure(text)
    assert list(present["record"]["entries"]) == ["runtimes.nvidia"]
    result = docker.configure(present["text"], state="absent", record=present["record"])
    assert result["data"] == json.loads(text) and result["changed"] is True


def test_absent_takes_back_features_cdi_the_editor_added_to_an_empty_file():
    present = docker.configure("{}\n")
    assert set(present["record"]["entries"]) == {"runtimes.nvidia", "features.cdi"}
    result = docker.configure(present["text"], state="absent", record=present["record"])
    assert json.loads(result["text"]) == {}


def test_absent_leaves_what_the_operator_changed_since():
    present = docker.configure("{}\n", set_as_default=True)
    edited = json.loads(present["text"])
    edited["default-runtime"] = "runsc"
    edited["runtimes"]["runsc"] = {"path": "/usr/bin/runsc"}
    result = docker.configure(json.dumps(edited), state="absent", record=present["record"])
    assert result["data"] == {"default-runtime": "runsc", "runtimes": {"runsc": {"path": "/usr/bin/runsc"}}}
    assert result["warnings"] == ['/etc/docker/daemon.json: "default-runtime" was changed since gpuops.nvidia set it; '
                                  'it is left as it is']


def test_record_survives_a_change_of_runtime_path():
    first = docker.configure("{}\n")
    second = docker.configure(first["text"], runtime_path="/opt/nvidia/nvidia-container-runtime", record=first["record"])
    assert second["changed"] is True
    assert second["record"]["entries"]["runtimes.nvidia"]["existed"] is False
    assert json.loads(docker.configure(second["text"], state="absent", record=second["record"])["text"]) == {}


def test_nothing_added_means_no_record():
    text = '{"runtimes": {"nvidia": {"path": "%s"}}, "features": {"cdi": true}}\n' % NV_PATH
    result = docker.configure(text)
    assert result["changed"] is False and result["record"] is None


@pytest.mark.parametrize("name", sorted(INPUTS))
def test_absent_without_a_record_removes_the_runtime_and_keeps_features_cdi(name):
    """A file the editor has no record of (configured by another tool, or by hand): the runtime
    and a default naming it go; features.cdi stays, with a warning."""
    text = INPUTS[name]
    before = _parsed(text)
    present = docker.configure(text, set_as_default=True)
    result = docker.configure(present["text"], state="absent")
    assert result["changed"] is True
    after = json.loads(result["text"])
    assert _unmanaged(after) == _unmanaged(before)
    other_runtimes = {key: value for key, value in before.get("runtimes", {}).items() if key != "nvidia"}
    assert after.get("runtimes", {}) == other_runtimes
    if not other_runtimes:
        assert "runtimes" not in after
    if before.get("default-runtime") != "nvidia":
        assert _effective_default(after) == _effective_default(before)
    else:
        assert "default-runtime" not in after
    assert after["features"] == dict(before.get("features", {}), cdi=True)
    assert any('"features.cdi" is left as it is' in warning for warning in result["warnings"])
    again = docker.configure(result["text"], state="absent")
    assert again["changed"] is False
    assert again["text"] == result["text"]


@pytest.mark.parametrize("record, message", [
    ({"version": 99, "entries": {}}, "not one this version can read"),
    ({"version": 1, "runtime_name": "nvidia2", "entries": {}}, "^runtime_name: gpuops.nvidia added the runtime 'nvidia2'"),
])
def test_unusable_records_are_refused(record, message):
    with pytest.raises(ConfigError, match=message):
        docker.configure("{}", state="absent", record=record)


@pytest.mark.parametrize("text, expected", [
    (None, None),
    ("", ""),
    ("{}\n", "{}\n"),
    ('{"debug": true}', '{"debug": true}'),
    ('{"runtimes": {}, "default-runtime": "runc"}', '{"runtimes": {}, "default-runtime": "runc"}'),
    ('{"runtimes": null, "features": {"cdi": true}}', '{"runtimes": null, "features": {"cdi": true}}'),
])
def test_absent_on_a_file_without_nvidia_changes_nothing(text, expected):
    result = docker.configure(text, state="absent")
    assert result["changed"] is False
    assert result["text"] == expected


@pytest.mark.parametrize("text, expected", [
    ('{"runtimes": {"nvidia": {"path": "/x"}}}', {}),
    ('{"runtimes": {"nvidia": {"path": "/x"}}, "default-runtime": "nvidia"}', {}),
    ('{"runtimes": {"nvidia": {"path": "/x"}, "runsc": {"path": "/y"}}, "default-runtime": "runsc"}',
     {"runtimes": {"runsc": {"path": "/y"}}, "default-runtime": "runsc"}),
    ('{"features": {"cdi": true}, "runtimes": {"nvidia": {}}}', {"features": {"cdi": True}}),
])
def test_absent_removes_exactly_what_the_editor_adds(text, expected):
    result = docker.configure(text, state="absent")
    assert result["changed"] is True
    assert json.loads(result["text"]) == expected
    assert result["text"] is not None  # the file existed: it stays, even when empty


def test_missing_file_absent_gives_no_file():
    assert docker.configure(None, state="absent") == {"text": None, "changed": False, "data": {}, "record": None,
                                                      "warnings": []}


def test_set_as_default_false_leaves_an_existing_default_alone():
    text = '{"default-runtime": "nvidia", "runtimes": {"nvidia": {"path": "%s"}}, "features": {"cdi": true}}\n' % NV_PATH
    result = docker.configure(text, set_as_default=False)
    assert result["changed"] is False
    assert result["text"] == text


def test_already_right_file_is_not_reformatted():
    text = '{ "runtimes" : { "nvidia" : { "path" : "%s" } }, "features" : { "cdi" : true } }' % NV_PATH
    result = docker.configure(text)
    assert result == {"text": text, "changed": False, "data": json.loads(text), "record": None, "warnings": []}


@pytest.mark.parametrize("name, indent", [("mirrors", "  "), ("logging-cgroups", "    "), ("tabs-unicode", "\t"), ("compact", "  "),
                                          ("missing", "  ")])
def test_output_keeps_the_indentation_and_non_ascii(name, indent):
    text = docker.configure(INPUTS[name])["text"]
    assert text.split("\n")[1].startswith(indent + '"')
    assert not text.split("\n")[1].startswith(indent + " ")
    if name == "tabs-unicode":
        assert "J\u00fcrgen" in text


def test_new_keys_are_appended_and_path_replaced_in_place():
    text = '{"default-runtime": "runc", "runtimes": {"nvidia": {"runtimeArgs": ["--debug"], "path": "/opt/old/nvidia-container-runtime"}}, "debug": true}'
    data = docker.configure(text, set_as_default=True)["data"]
    assert list(data) == ["default-runtime", "runtimes", "debug", "features"]
    assert list(data["runtimes"]["nvidia"]) == ["runtimeArgs", "path"]
    assert data["runtimes"]["nvidia"] == {"runtimeArgs": ["--debug"], "path": NV_PATH}


@pytest.mark.parametrize("text, changed", [
    ('{"features": {"cdi": 1}, "runtimes": {"nvidia": {"path": "%s"}}}' % NV_PATH, True),
    ('{"features": {"cdi": "true"}, "runtimes": {"nvidia": {"path": "%s"}}}' % NV_PATH, True),
    ('{"features": {"cdi": false}, "runtimes": {"nvidia": {"path": "%s"}}}' % NV_PATH, True),
    ('{"features": null, "runtimes": null}', True),
    ('{"features": {"cdi": true}, "runtimes": {"nvidia": {"path": "%s"}}}' % NV_PATH, False),
])
def test_values_are_compared_strictly(text, changed):
    result = docker.configure(text)
    assert result["changed"] is changed
    assert result["data"]["features"]["cdi"] is True


def test_custom_runtime_name_and_path():
    result = docker.configure('{"runtimes": {"nvidia": {"path": "/keep"}}}', runtime_name="nvidia-cdi",
                              runtime_path="/usr/bin/nvidia-container-runtime.cdi", set_as_default=True)
    assert result["data"]["runtimes"] == {"nvidia": {"path": "/keep"}, "nvidia-cdi": {"path": "/usr/bin/nvidia-container-runtime.cdi"}}
    assert result["data"]["default-runtime"] == "nvidia-cdi"
    absent = docker.configure(result["text"], runtime_name="nvidia-cdi", state="absent")
    assert absent["data"]["runtimes"] == {"nvidia": {"path": "/keep"}}
    assert "default-runtime" not in absent["data"]


def test_shim_keys_are_dropped_with_a_warning():
    text = ('{"runtimes": {"nvidia": {"runtimeType": "io.containerd.runc.v2", '
            '"options": {"BinaryName": "/usr/local/nvidia/toolkit/nvidia-container-runtime"}}}}')
    result = docker.configure(text)
    assert result["data"]["runtimes"]["nvidia"] == {"path": NV_PATH}
    assert len(result["warnings"]) == 1 and '"runtimeType", "options"' in result["warnings"][0]


def test_replacing_another_default_warns():
    result = docker.configure('{"default-runtime": "runsc", "runtimes": {"runsc": {"path": "/r"}}}', set_as_default=True)
    assert result["data"]["default-runtime"] == "nvidia"
    assert any('"runsc"' in warning for warning in result["warnings"])
    assert docker.configure('{"default-runtime": "runc"}', set_as_default=True)["warnings"] == []


def test_duplicate_keys_warn_and_last_wins():
    result = docker.configure('{"debug": false, "debug": true}')
    assert result["data"]["debug"] is True
    assert len(result["warnings"]) == 1 and '"debug"' in result["warnings"][0]


def test_byte_order_mark_is_kept():
    result = docker.configure('\ufeff{"debug": true}\n')
    assert result["text"].startswith('\ufeff{\n  "debug": true,')
    assert docker.configure(result["text"])["changed"] is False


@pytest.mark.parametrize("text, line, column, message", [
    ('{\n  "debug": true\n  "log-level": "warn"\n}\n', 3, 3, "Expecting ',' delimiter"),
    ('{\n  "registry-mirrors": ["https://mirror.gcr.io"],\n}\n', 3, 1, "Expecting property name enclosed in double quotes"),
    ('{\n  "runtimes": {\n    "runsc": {"path": "/r",}\n  }\n}\n', 3, 28, "Expecting property name enclosed in double quotes"),
    ('{"debug": true', 1, 15, "Expecting ',' delimiter"),
    ('{"debug": true}\n{"x": 1}\n', 2, 1, "Extra data"),
    ("{'debug': true}", 1, 2, "Expecting property name enclosed in double quotes"),
])
def test_malformed_json_names_file_line_and_column(text, line, column, message):
    with pytest.raises(ConfigError) as err:
        docker.configure(text, source="/etc/docker/daemon.json")
    if sys.version_info[:2] == (3, 11):
        assert str(err.value) == "/etc/docker/daemon.json: line %d, column %d: %s; the file was left unchanged" % (line, column, message)
    else:
        # Other Pythons word some errors (trailing commas) and place them differently.
        assert re.fullmatch(r"/etc/docker/daemon\.json: line \d+, column \d+: .+; the file was left unchanged", str(err.value))


@pytest.mark.parametrize("text, message", [
    ("[]", "the top level must be a JSON object ({...}), not an array"),
    ('"runtimes"', "the top level must be a JSON object ({...}), not a string"),
    ("null", "the top level must be a JSON object ({...}), not null"),
    ('{"runtimes": []}', '"runtimes" must be a JSON object, not an array'),
    ('{"runtimes": {"nvidia": "/usr/bin/nvidia-container-runtime"}}', '"runtimes.nvidia" must be a JSON object, not a string'),
    ('{"features": ["cdi"]}', '"features" must be a JSON object, not an array'),
])
def test_wrong_types_are_config_errors(text, message):
    with pytest.raises(ConfigError) as err:
        docker.configure(text, source="/srv/daemon.json")
    assert str(err.value) == "/srv/daemon.json: %s; the file was left unchanged" % message


def test_absent_checks_runtimes_type_too():
    with pytest.raises(ConfigError, match='"runtimes" must be a JSON object, not a string'):
        docker.configure('{"runtimes": "nvidia"}', state="absent")


@pytest.mark.parametrize("kwargs, message", [
    ({"state": "latest"}, "^state: must be present or absent"),
    ({"runtime_name": ""}, "^runtime_name: '' is not a valid runtime handler name"),
    ({"runtime_name": "runc"}, "^runtime_name: 'runc' is Docker's own runtime"),
    ({"runtime_name": "io.containerd.runc.v2"}, "^runtime_name: 'io.containerd.runc.v2' is not a valid runtime handler"),
    ({"runtime_name": "my gpu"}, "^runtime_name: 'my gpu' is not a valid runtime handler name"),
    ({"runtime_path": ""}, "^runtime_path: must be the path"),
    ({"runtime_path": None}, "^runtime_path: must be the path"),
])
def test_bad_arguments(kwargs, message):
    with pytest.raises(ConfigError, match=message) as err:
        docker.configure("{}", **kwargs)
    assert err.value.option == next(iter(kwargs))


def test_another_runtime_of_that_name_is_not_replaced():
    with pytest.raises(ConfigError, match=r"^runtime_name: the Docker configuration already defines a runtime "
                                          r"'runsc' \(/usr/local/bin/runsc\) that is not NVIDIA's"):
        docker.configure(INPUTS["gvisor"], runtime_name="runsc")
    # NVIDIA's own entry (the GPU Operator's toolkit path) is updated
    result = docker.configure(INPUTS["nvidia-with-args"])
    assert result["data"]["runtimes"]["nvidia"] == {"path": NV_PATH, "runtimeArgs": ["--debug"]}


@pytest.mark.parametrize("text, expected", [
    (None, {}), ("", {}), (" \n", {}), ("\ufeff{}", {}),
    (INPUTS["gvisor"], json.loads(INPUTS["gvisor"])),
])
def test_parse_daemon_json(text, expected):
    assert docker.parse_daemon_json(text) == (expected, [])


# Credentials never show once masked (and never appear in error messages at all).
SECRET_DAEMON_JSON = json.dumps({
    "registry-mirrors": ["https://mirror.corp"],
    "auth": "dXNlcjpTM2NyZXRBdXRo",
    "proxies": {"http-proxy": "http://proxy:3128", "password": "Pr0xyPassw0rd"},
    "cluster-store-opts": {"kv.token": "x", "token": "T0kenValue42"},
    "secret": "TopS3cretValue",
}, indent=2) + "\n"
SECRETS = ("dXNlcjpTM2NyZXRBdXRo", "Pr0xyPassw0rd", "T0kenValue42", "TopS3cretValue")


@pytest.mark.parametrize("state", ["present", "absent"])
def test_credentials_are_masked(state):
    result = docker.configure(SECRET_DAEMON_JSON, state=state, set_as_default=True)
    for text in (SECRET_DAEMON_JSON, result["text"]):
        masked = mask_text(text)
        assert MASK in masked
        for secret in SECRETS:
            assert secret not in masked
    masked_data = json.dumps(mask_secrets(result["data"]))
    for secret in SECRETS:
        assert secret not in masked_data
    # Masking is for display only: the data written keeps the real values.
    assert result["data"]["auth"] == "dXNlcjpTM2NyZXRBdXRo"


def test_errors_do_not_quote_the_file():
    broken = SECRET_DAEMON_JSON.replace('"secret"', '"secret" "x"')
    with pytest.raises(ConfigError) as err:
        docker.configure(broken)
    for secret in SECRETS:
        assert secret not in str(err.value)


@pytest.mark.parametrize("enable_cdi, version, expected", [
    ("true", (26, 1, 5), (True, None)),
    ("auto", (25, 0, 0), (True, None)),
    ("true", None, (True, None)),  # Docker not installed yet: configure for the one that will be
    ("false", (26, 1, 5), (False, None)),
    ("false", (20, 10, 24), (False, None)),
])
def test_cdi_decision(enable_cdi, version, expected):
    assert docker.cdi_decision(enable_cdi, version) == expected


def test_cdi_on_old_docker_fails_or_is_skipped():
    with pytest.raises(ConfigError, match=r"^enable_cdi: Docker 20\.10\.24 does not support CDI .*Docker 25.*set "
                                          r"enable_cdi to auto"):
        docker.cdi_decision("true", (20, 10, 24))
    enabled, warning = docker.cdi_decision("auto", (24, 0, 9))
    assert enabled is False and "Docker 24.0.9 does not support CDI" in warning


def test_validation_plan_and_problems():
    files, make_argv, warnings = docker.validation_plan('{"log-level": "verbose"}\n', (26, 1, 5))
    assert files == {"daemon.json": '{"log-level": "verbose"}\n'} and warnings == []
    argv = make_argv("/usr/sbin/dockerd", "/tmp/x")
    assert argv == ["/usr/sbin/dockerd", "--validate", "--config-file", "/tmp/x/daemon.json"]
    assert docker.validation_problems(1, "", "unable to configure the Docker daemon with file the planned daemon.json: "
                                             "invalid logging level: verbose\n") == [
        "dockerd rejected the planned configuration: unable to configure the Docker daemon with "
        "file the planned daemon.json: invalid logging level: verbose"]
    assert docker.validation_problems(0, "configuration OK\n", "") == []


def test_validation_is_skipped_with_a_warning_before_docker_23():
    files, make_argv, warnings = docker.validation_plan("{}\n", (20, 10, 24))
    assert files == {} and make_argv is None and "--validate needs Docker 23" in warnings[0]

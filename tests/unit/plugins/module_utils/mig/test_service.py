# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""mig/service's pure and file parts: the config loaded and refused by name, the MIG profile
record read (carried over from release 0.1.0's root, or read where it is), kept, and the GPU
reset run through host/commands."""
from __future__ import annotations

import json
import os

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils.host import records
from ansible_collections.gpuops.nvidia.plugins.module_utils.mig import service

GOOD = {"version": "v1", "mig-configs": {"none": [{"devices": "all", "mig-enabled": False}]}}
RECORD = {"0x233010DE": {"1g.10gb": {"id": 19, "slices": 1, "count": 7}}}


class Module:
    def __init__(self, check_mode=False, bins=None, rc=0):
        self.check_mode = check_mode
        self._diff = False
        self.bins = bins or {}
        self.rc = rc
        self.warnings = []
        self.commands = []

    def atomic_move(self, src, dst, unsafe_writes=False):  # pylint: disable=unused-argument
        os.rename(src, dst)

    def warn(self, message):
        self.warnings.append(message)

    def get_bin_path(self, name):
        return self.bins.get(name)

    def run_command(self, argv, environ_update=None):
        self.commands.append((argv, environ_update))
        return self.rc, "out\n", "err\n"


@pytest.mark.parametrize("text, document", [
    (json.dumps(GOOD), GOOD),
    ("version: v1\nmig-configs:\n  none:\n    - devices: all\n      mig-enabled: false\n", GOOD),
])
def test_a_config_file_in_json_or_yaml(tmp_path, text, document):
    path = tmp_path / "mig.yaml"
    path.write_text(text)
    assert service.load_config(str(path), None) == document


@pytest.mark.parametrize("inline", [None, GOOD])
def test_an_inline_config_or_none_for_the_generated_layouts(inline):
    assert service.load_config(None, inline) == inline


@pytest.mark.parametrize("text, message", [
    (None, "the MIG config {path} does not exist: give the path of a mig-parted config"),
    (b"\xff\xfeversion", "the MIG config {path} is not UTF-8 text"),
    ("DIR", "the MIG config {path} is a directory, not a file"),
    ("- a\n- list\n", "the MIG config {path}: the MIG config must be a mapping"),
    ("", "the MIG config {path} is empty"),
    ("version: v1\nmig-configs: [unclosed\n", "the MIG config {path} is not valid YAML"),
    ("{\"version\": \"v1\"}", "the MIG config {path}: mig-configs must map config names to lists of entries"),
    ("version: v1\nmig-configs: {none: [{devices: all, mig-enabled: no way}]}\n",
     "the MIG config {path}: mig-configs.none[0]: mig-enabled must be true or false"),
])
def test_a_config_that_cannot_be_used_is_refused_by_name(tmp_path, text, message):
    path = tmp_path / "mig.yaml"
    if text == "DIR":
        path.mkdir()
    elif isinstance(text, bytes):
        path.write_bytes(text)
    elif text is not None:
        path.write_text(text)
    with pytest.raises(service.MigError) as err:
        service.load_config(str(path), None)
    assert message.format(path=path) in err.value.message and err.value.result == {"changed": False}


def test_yaml_needs_pyyaml(tmp_path, monkeypatch):
    monkeypatch.setattr(service, "HAS_YAML", False)
    with pytest.raises(service.MigError, match="PyYAML"):
        service.parse_config("version: v1\n", "/etc/mig.yaml")
    assert service.parse_config(json.dumps(GOOD), "/etc/mig.json") == GOOD


def _old_record(root):
    """The record where and as release 0.1.0 wrote it."""
    old = root / "var/lib/gpuops-nvidia/mig-profiles.json"
    old.parent.mkdir(parents=True)
    old.write_text(json.dumps(RECORD, indent=1, sort_keys=True) + "\n")
    return old, root / "var/lib/gpuops/mig-profiles.json"


@pytest.mark.parametrize("check_mode, carry, moved", [
    (False, True, True),    # the mig module: moved to the one root
    (True, True, False),    # the mig module in check mode: read where it is
    (False, False, False),  # mig_layouts (read-only): read where it is
])
def test_a_record_of_release_0_1_0_is_found(tmp_path, check_mode, carry, moved):
    old, new = _old_record(tmp_path)
    _text, record = service.read_profiles(Module(check_mode), records.MIG_PROFILES, str(tmp_path), carry=carry)
    assert record == RECORD
    assert (not old.exists(), new.exists()) == (moved, moved)


@pytest.mark.parametrize("path", ["", None])
def test_no_record_when_turned_off(tmp_path, path):
    _old_record(tmp_path)
    assert service.read_profiles(Module(), path, str(tmp_path)) == (None, {})


def test_an_unusable_record_is_named_and_nothing_changes(tmp_path):
    new = tmp_path / "var/lib/gpuops/mig-profiles.json"
    new.parent.mkdir(parents=True)
    new.write_text("[]")
    for carry in (True, False):
        with pytest.raises(service.MigError) as err:
            service.read_profiles(Module(), records.MIG_PROFILES, str(tmp_path), carry=carry)
        assert str(new) in err.value.message and "nothing was changed" in err.value.message


@pytest.mark.parametrize("check_mode, before, written", [
    (False, {}, True),
    (True, {}, False),       # check mode writes nothing
    (False, RECORD, False),  # unchanged
])
def test_the_record_is_kept(tmp_path, check_mode, before, written):
    service.save_profiles(Module(check_mode), records.MIG_PROFILES, str(tmp_path), before, RECORD)
    path = tmp_path / "var/lib/gpuops/mig-profiles.json"
    assert path.exists() is written
    if written:
        assert json.loads(path.read_text()) == RECORD and path.read_text() == records.dumps(RECORD)


def test_a_record_that_cannot_be_written_is_a_warning(tmp_path):
    (tmp_path / "var").write_text("a file where a directory should be")
    module = Module()
    service.save_profiles(module, records.MIG_PROFILES, str(tmp_path), {}, RECORD)
    assert len(module.warnings) == 1 and "could not record the MIG profiles in %s" % tmp_path in module.warnings[0]


@pytest.mark.parametrize("gpu, bins, rc, argv, answer", [
    ({"index": 3, "pci_bus_id": "00000000:1B:00.0"}, {"nvidia-smi": "/usr/bin/nvidia-smi"}, 0,
     ["/usr/bin/nvidia-smi", "-r", "-i", "00000000:1B:00.0"], (True, "out\nerr")),
    ({"index": 3, "pci_bus_id": None}, {"nvidia-smi": "/usr/bin/nvidia-smi"}, 1,
     ["/usr/bin/nvidia-smi", "-r", "-i", "3"], (False, "out\nerr")),
    ({"index": 3, "pci_bus_id": None}, {}, 0, None, (False, "nvidia-smi is not installed: the GPU cannot be reset")),
])
def test_a_gpu_reset_runs_through_host_commands(gpu, bins, rc, argv, answer):
    module = Module(bins=bins, rc=rc)
    assert service.reset_gpu(module, gpu) == answer
    if argv is None:
        assert module.commands == []
    else:
        assert [c[0] for c in module.commands] == [argv] and module.commands[0][1]["LC_ALL"] == "C"

# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Every file and root option of the modules, given what a wrong inventory can hold: a directory,
a path under a regular file, a file that is not UTF-8, JSON, YAML or TOML that does not parse,
records of the wrong shape, an empty file; a host root that does not exist or is a file. In check
mode, each run either succeeds or fails with a message; none ends in a traceback (run_module fails
the test on any exception that is not the module's own exit)."""

from __future__ import annotations

import importlib

import pytest

FILES = {
    "a-directory": None,
    "under-a-regular-file": None,
    "not-utf-8": b"\xff\xfe\x00garbage\x80",
    "not-json": b"{not json: [",
    "a-json-list": b"[1, 2, 3]",
    "a-json-string": b'"a string"',
    "gpus-a-number": b'{"gpus": 5, "host": "x"}',
    "empty": b"",
    "yaml-that-does-not-parse": b"version: v1\nmig-configs: [\n",
    "toml-that-does-not-parse": b"[plugins\nversion = 2\n",
}
ROOTS = ("does-not-exist", "a-regular-file", "empty")

# module -> (the arguments it needs, {option: 'file' or 'root'})
MODULES = {
    "cdi_spec_check": ({}, {"host_root": "root"}),
    "driver_status": ({}, {"host_root": "root", "record": "file"}),
    "gpu_report": ({"host_root": "ROOT"}, {"path": "file"}),
    "mig": ({"config_name": "all-disabled", "host_root": "ROOT"}, {"config_file": "file"}),
    "mig_layouts": ({}, {"profile_record": "file"}),
    # (its files are read under host_root: "/" here, so the paths given are the ones read)
    "node_audit": ({"driver_branch": "570", "host_root": "/", "runtime": "none"},
                   {"driver_pin_file": "file", "driver_record": "file", "mig_config_file": "file",
                    "inventory_path": "file"}),
    "toolkit_config": ({}, {"path": "file"}),
    # (validate off and the version given: the test asks no containerd of the machine it runs on)
    "runtime_config": ({"runtime": "containerd", "enable_cdi": "false", "validate": False, "containerd_version": "1.7.24"},
                       {"config_path": "file", "drop_in_path": "file"}),
    "cdi_spec": ({"method": "check"}, {"refresh_env_file": "file"}),
    "apt_remove": ({"owner": "gpuops-test"}, {"record_dir": "file"}),
}

CASES = [(module, option, case) for module, (_base, options) in sorted(MODULES.items())
         for option, kind in sorted(options.items())
         for case in (sorted(FILES) if kind == "file" else ROOTS)]


def _path(tmp_path, kind, case):
    if kind == "root":
        if case == "does-not-exist":
            return str(tmp_path / "no-such-root")
        if case == "a-regular-file":
            (tmp_path / "root-file").write_bytes(b"x")
            return str(tmp_path / "root-file")
        (tmp_path / "empty-root").mkdir()
        return str(tmp_path / "empty-root")
    if case == "a-directory":
        (tmp_path / "a-dir").mkdir()
        return str(tmp_path / "a-dir")
    if case == "under-a-regular-file":
        (tmp_path / "plain").write_bytes(b"x")
        return str(tmp_path / "plain" / "below")
    path = tmp_path / case
    path.write_bytes(FILES[case])
    return str(path)


@pytest.mark.parametrize("module, option, case", CASES)
def test_a_wrong_file_or_root_is_a_message_not_a_traceback(run_module, tmp_path, module, option, case):
    base, options = MODULES[module]
    args = dict(base)
    if args.get("host_root") == "ROOT":
        (tmp_path / "host").mkdir()
        args["host_root"] = str(tmp_path / "host")
    args[option] = _path(tmp_path, options[option], case)
    main = importlib.import_module("ansible_collections.gpuops.nvidia.plugins.modules." + module).main
    failed, result = run_module(main, args, check_mode=True)
    if failed:
        assert result["msg"].strip(), result
        assert "Traceback" not in result["msg"]
        # a failure names what is wrong where: the path it was given (unless the machine the test
        # runs on has no NVML, which the module checks first)
        named = args[option] in result["msg"] or (options[option] == "root" and args["host_root"] in result["msg"])
        assert named or result["msg"].startswith("NVML cannot be opened"), result["msg"]
    # nothing was written where a wrong path pointed
    if options[option] == "file" and case not in ("a-directory", "under-a-regular-file"):
        with open(args[option], "rb") as handle:
            assert handle.read() == FILES[case]


def test_every_case_is_exercised():
    """The table covers each kind of wrong input for every option named (a guard against an
    edit that empties it)."""
    assert len(CASES) == sum(len(FILES) if kind == "file" else len(ROOTS)
                             for _base, options in MODULES.values() for kind in options.values())
    assert len(CASES) > 100


@pytest.mark.parametrize("case", ["a-directory", "not-utf-8"])
def test_the_audit_reports_a_pin_it_cannot_read_as_a_finding(run_module, tmp_path, case):
    """A read-only check does not stop at a file it cannot read: the file is its finding."""
    pin = _path(tmp_path, "file", case)
    main = importlib.import_module("ansible_collections.gpuops.nvidia.plugins.modules.node_audit").main
    failed, result = run_module(main, {"host_root": "/", "driver_branch": "570", "runtime": "none",
                                       "driver_pin_file": pin, "inventory_path": "", "cdi_spec_dirs": []},
                                check_mode=True)
    assert not failed, result
    found = [item for item in result["audit_items"] if item["item"] == "driver pin" and item["expected"] == "readable"]
    assert len(found) == 1 and pin in found[0]["actual"] and not found[0]["ok"], [i["item"] for i in result["audit_items"]]

# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""apt_install through ansible on this (Debian) machine, with its real apt and dpkg: check mode
simulates with apt-get -s and installs nothing; an installed package is only recorded; a second
run changes nothing; a package apt does not know fails with apt's reason and writes no record;
holds are set and released. Installations themselves, with dependencies and the records the
removal reads, run in the molecule scenarios (driver_*, container_toolkit*)."""
from __future__ import annotations

import json
import os
import subprocess

import pytest

from conftest import BIN, _env, require  # pylint: disable=import-error

NO_REFRESH = 10 ** 9  # the lists are fresh enough: no apt-get update from the tests


def run(args, check_mode=False, diff=False):
    argv = [os.path.join(BIN, "ansible"), "localhost", "-m", "gpuops.nvidia.apt_install", "-a", json.dumps(args)]
    argv += (["--check"] if check_mode else []) + (["--diff"] if diff else [])
    proc = subprocess.run(argv, env=_env(), capture_output=True, text=True, timeout=300, check=False)
    return json.loads(proc.stdout)["plays"][0]["tasks"][0]["hosts"]["localhost"]


def installed(name):
    res = subprocess.run(["dpkg-query", "-W", "-f=${db:Status-Abbrev}", name], capture_output=True, text=True,
                         check=False)
    return res.returncode == 0 and res.stdout.startswith("ii")


@pytest.fixture
def absent_package():
    """A package apt knows and this machine does not have."""
    for name in ("sl", "cowsay", "fortune-mod", "hello"):
        known = subprocess.run(["apt-cache", "show", name], capture_output=True, text=True, check=False)
        if known.returncode == 0 and not installed(name):
            return name
    require(False, "a package apt knows and this machine does not have (sl, cowsay, fortune-mod or hello)",
            "apt-get update, so that apt knows them, and leave one of them uninstalled")
    return None


def test_check_mode_simulates_and_installs_nothing(tmp_path, absent_package):
    result = run({"names": [absent_package], "owner": "test", "record_dir": str(tmp_path),
                  "cache_valid_time": NO_REFRESH}, check_mode=True, diff=True)
    assert result["changed"] is True
    assert absent_package in [p["name"] for p in result["changed_packages"]]
    assert result["added"] and absent_package in result["added"]
    assert "%s (not installed)" % absent_package in result["diff"]["before"]
    assert not installed(absent_package) and not list(tmp_path.iterdir())


def test_an_installed_package_is_recorded_once(tmp_path):
    args = {"names": ["dpkg"], "owner": "test", "record_dir": str(tmp_path), "cache_valid_time": NO_REFRESH}
    first = run(args)
    assert first["changed"] is True and first["changed_packages"] == [] and first["added"] == []
    assert json.loads((tmp_path / "test.json").read_text()) == {"owner": "test", "requires": ["dpkg"], "added": []}
    again = run(args)
    assert again["changed"] is False


def test_an_unknown_package_fails_with_apts_reason_and_writes_nothing(tmp_path):
    result = run({"names": ["no-such-package-gpuops"], "owner": "test", "record_dir": str(tmp_path),
                  "cache_valid_time": NO_REFRESH})
    assert result["failed"] is True
    assert "Unable to locate package no-such-package-gpuops" in result["msg"]
    assert not list(tmp_path.iterdir())


def test_holds_are_set_and_released(tmp_path):
    args = {"names": ["dpkg"], "owner": "test", "record_dir": str(tmp_path), "cache_valid_time": NO_REFRESH,
            "hold": ["dpkg"]}
    try:
        planned = run(args, check_mode=True)
        assert planned["held"] == ["dpkg"]
        assert "dpkg" not in subprocess.run(["apt-mark", "showhold"], capture_output=True, text=True, check=True).stdout.split()
        held = run(args)
        assert held["changed"] is True and held["held"] == ["dpkg"]
        assert "dpkg" in subprocess.run(["apt-mark", "showhold"], capture_output=True, text=True, check=True).stdout.split()
        assert run(args)["changed"] is False
        released = run(dict(args, hold_state=False))
        assert released["held"] == ["dpkg"]
        assert "dpkg" not in subprocess.run(["apt-mark", "showhold"], capture_output=True, text=True, check=True).stdout.split()
    finally:
        subprocess.run(["apt-mark", "unhold", "dpkg"], capture_output=True, check=False)


def test_a_proxy_password_in_the_environment_is_never_logged(tmp_path):
    """environment is no_log: a proxy URL's password appears nowhere in ansible's output, -vvv
    included (module arguments echoed back as the invocation)."""
    secret = "s3cret-proxy-pass"
    args = {"names": ["dpkg"], "owner": "test", "record_dir": str(tmp_path), "cache_valid_time": NO_REFRESH,
            "environment": {"http_proxy": "http://user:%s@127.0.0.1:9" % secret}}
    argv = [os.path.join(BIN, "ansible"), "localhost", "-vvv", "-m", "gpuops.nvidia.apt_install", "-a", json.dumps(args),
            "--check"]
    # (ansible-core 2.21 echoes the arguments only with inject_invocation on, as a job log that shows
    # them has it: then the value must be masked)
    proc = subprocess.run(argv, env=_env(ANSIBLE_INJECT_INVOCATION="1"), capture_output=True, text=True, timeout=300,
                          check=False)
    result = json.loads(proc.stdout[proc.stdout.index("{"):])["plays"][0]["tasks"][0]["hosts"]["localhost"]
    assert "failed" not in result or not result["failed"], result
    assert result["invocation"]["module_args"]["environment"] == {"http_proxy": "VALUE_SPECIFIED_IN_NO_LOG_PARAMETER"}
    assert secret not in proc.stdout and secret not in proc.stderr


def test_a_pending_repository_in_check_mode_is_reported_not_simulated(tmp_path):
    """Check mode before the repository is in place: apt could not resolve a package it does not
    know yet, so the installation is a change with the reason, and apt is not asked."""
    args = {"names": ["gpuops-not-in-any-repository"], "owner": "test", "record_dir": str(tmp_path),
            "cache_valid_time": NO_REFRESH, "repository_pending": True}
    planned = run(args, check_mode=True)
    assert planned["changed"] is True and "failed" not in planned
    assert "apt cannot resolve its packages" in planned["msg"] and not list(tmp_path.iterdir())
    # without it apt is asked, and refuses what it does not know
    refused = run(dict(args, repository_pending=False), check_mode=True)
    assert refused["failed"] is True and "gpuops-not-in-any-repository" in refused["msg"]


def test_prerequisites_are_installed_with_the_packages_and_recorded(tmp_path, absent_package):
    """The role's Python libraries go in the same transaction when missing, recorded with the
    packages; an installed one is left at its version even with latest."""
    args = {"names": ["dpkg"], "prerequisites": [absent_package, "apt"], "owner": "test", "record_dir": str(tmp_path),
            "cache_valid_time": NO_REFRESH, "latest": True}
    planned = run(args, check_mode=True, diff=True)
    assert planned["changed"] is True and absent_package in planned["added"]
    assert "%s (not installed)" % absent_package in planned["diff"]["before"]
    assert not installed(absent_package) and not list(tmp_path.iterdir())
    # latest and allow_downgrade apply to names only: an installed prerequisite is never asked of
    # apt again (a version no repository has would fail the simulation if it were)
    bogus = dict(args, prerequisites=["apt=0.0.1-gpuops-none"], allow_downgrade=True)
    kept = run(bogus, check_mode=True)
    assert "failed" not in kept and "apt" not in [p["name"] for p in kept["changed_packages"]], kept
    asked = run(dict(bogus, names=["dpkg", "apt=0.0.1-gpuops-none"], prerequisites=[]), check_mode=True)
    assert asked["failed"] is True and "0.0.1-gpuops-none" in asked["msg"]
    # before the repository is in place only the prerequisites are simulated: the run knows
    # which Python libraries it would add
    pending = run(dict(args, names=["gpuops-not-in-any-repository"], repository_pending=True), check_mode=True)
    assert pending["changed"] is True and "failed" not in pending, pending
    assert pending["added"] and absent_package in pending["added"]
    assert pending["msg"].endswith("(only the missing prerequisites are)")
    assert pending["record"]["requires"] == sorted(["apt", absent_package, "gpuops-not-in-any-repository"])
    # recorded with the packages (an installed prerequisite only recorded)
    # (not latest: no upgrade of this machine's dpkg)
    recorded = run(dict(args, prerequisites=["apt"], latest=False))
    assert recorded["changed"] is True and recorded["changed_packages"] == [], recorded
    assert json.loads((tmp_path / "test.json").read_text())["requires"] == ["apt", "dpkg"]
    assert run(dict(args, prerequisites=["apt"], latest=False))["changed"] is False

# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""dpkg's package state, the one reader (the database under a root, with dpkg's journal) and the
one writer of holds. The stanzas are laid out as dpkg 1.21 (Debian 12) writes them."""
from __future__ import annotations

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils.apt import ops, packages

STATUS = """Package: adduser
Status: install ok installed
Priority: important
Architecture: all
Version: 3.134

Package: nvidia-open
Status: hold ok installed
Architecture: amd64
Version: 580.95.05-1
Description: NVIDIA open kernel modules
 A continuation line.
 Status: deinstall ok config-files

Package: old-thing
Status: deinstall ok config-files
Architecture: amd64
Version: 1.0

Package: half-done
Status: install reinstreq half-configured
Architecture: amd64
Version: 2.0

Package: libc6
Status: install ok installed
Architecture: amd64
Version: 2.36-9+deb12u14

Package: libc6
Status: purge ok not-installed
Architecture: i386
Version: 2.36-9+deb12u1

Package: removed-wanted
Status: deinstall ok installed
Architecture: amd64
Version: 3.0
"""

ENTRY = {
    "adduser": {"version": "3.134", "installed": True, "held": False},
    "nvidia-open": {"version": "580.95.05-1", "installed": True, "held": True},
    "old-thing": {"version": "1.0", "installed": False, "held": False},
    "half-done": {"version": "2.0", "installed": False, "held": False},
    "libc6": {"version": "2.36-9+deb12u14", "installed": True, "held": False},
    "removed-wanted": {"version": "3.0", "installed": True, "held": False},
}


@pytest.mark.parametrize("name", sorted(ENTRY))
def test_parse(name):
    assert packages.parse(STATUS)[name] == ENTRY[name]


def test_versions_and_holds():
    status = packages.parse(STATUS)
    assert packages.versions(status) == {"adduser": "3.134", "nvidia-open": "580.95.05-1", "libc6": "2.36-9+deb12u14",
                                         "removed-wanted": "3.0"}
    assert packages.holds(status) == {"nvidia-open"}


@pytest.mark.parametrize("journal, name, expected", [
    # an entry of dpkg's journal replaces the database's
    ("Package: nvidia-open\nStatus: install ok installed\nArchitecture: amd64\nVersion: 580.95.05-1\n",
     "nvidia-open", {"version": "580.95.05-1", "installed": True, "held": False}),
    ("Package: adduser\nStatus: deinstall ok config-files\nArchitecture: all\nVersion: 3.134\n",
     "adduser", {"version": "3.134", "installed": False, "held": False}),
    # a package only the journal knows
    ("Package: new-one\nStatus: install ok unpacked\nArchitecture: amd64\nVersion: 0.1\n",
     "new-one", {"version": "0.1", "installed": False, "held": False}),
    # another architecture's entry does not replace the installed one
    ("Package: libc6\nStatus: install ok half-installed\nArchitecture: i386\nVersion: 2.36-9+deb12u14\n",
     "libc6", {"version": "2.36-9+deb12u14", "installed": True, "held": False}),
])
def test_the_journal_is_read_after_the_database(tmp_path, journal, name, expected):
    dpkg = tmp_path / "var" / "lib" / "dpkg"
    (dpkg / "updates").mkdir(parents=True)
    (dpkg / "status").write_text(STATUS)
    (dpkg / "updates" / "0002").write_text(journal)
    # an earlier journal entry of the same package and architecture, replaced by the later one
    (dpkg / "updates" / "0001").write_text(journal.replace("Status: ", "Status: hold ok installed\nX-Was: "))
    (dpkg / "updates" / "tmp.i").write_text("Package: %s\nStatus: hold ok installed\nVersion: torn\n" % name)
    assert packages.read(str(tmp_path))[name] == expected


def test_a_root_without_dpkg(tmp_path):
    assert packages.read(str(tmp_path)) is None
    assert packages.installed(str(tmp_path)) == {} and packages.held(str(tmp_path)) == set()


def test_installed_and_held_under_a_root(dpkg_root):
    root = dpkg_root({"nvidia-open": ("580.95.05-1", "hold ok installed"), "adduser": ("3.134", "install ok installed"),
                      "gone": ("1.0", "deinstall ok config-files")})
    assert packages.installed(root) == {"nvidia-open": "580.95.05-1", "adduser": "3.134"}
    assert packages.held(root) == {"nvidia-open"}


@pytest.mark.parametrize("current, names, hold, present, change", [
    (set(), ["a", "b"], True, None, ["a", "b"]),
    ({"a"}, ["a", "b"], True, None, ["b"]),
    ({"a"}, ["a", "b"], False, None, ["a"]),
    (set(), ["a"], False, None, []),
    # a package not installed (yet) is held once it is
    (set(), ["a", "b"], True, {"a": "1"}, ["a"]),
    ({"a", "b"}, ["a", "b"], False, {"b": "1"}, ["b"]),
    ({"a"}, [], True, None, []),
])
def test_hold_changes(current, names, hold, present, change):
    assert packages.hold_changes(current, names, hold, present) == change


@pytest.mark.parametrize("hold, verb", [(True, "hold"), (False, "unhold")])
def test_set_holds_is_one_apt_mark(fake, hold, verb):
    module = fake({("apt-mark",): (0, "", "")})
    packages.set_holds(module, {"b", "a"}, hold)
    assert module.calls == [["apt-mark", verb, "a", "b"]]
    packages.set_holds(module, [], hold)
    assert len(module.calls) == 1


def test_set_holds_fails_with_apts_reason(fake):
    module = fake({("apt-mark",): (100, "", "E: Can't select installed nor candidate version from package 'x'\n")})
    with pytest.raises(ops.AptError) as failure:
        packages.set_holds(module, ["x"])
    assert str(failure.value) == ("apt-mark hold x failed: E: Can't select installed nor candidate version from "
                                  "package 'x'")
    assert failure.value.changed is True

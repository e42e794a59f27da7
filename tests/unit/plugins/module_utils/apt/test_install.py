# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""apt_install's transaction: the pure plan (what to ask apt), the changes, the record and the
diff; the transaction itself over a dpkg database under a temporary root with apt scripted (the
real apt runs in tests/integration/test_apt_install.py and the molecule scenarios)."""
from __future__ import annotations

import json

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils.apt import install, ops

NO_RECOMMENDS = ["--no-install-recommends", "--allow-change-held-packages"]


def params(**overrides):
    base = {"names": ["nvidia-open"], "prerequisites": [], "owner": "driver", "record_dir": "/nowhere", "latest": False,
            "allow_downgrade": False, "retire_branch_packages": False, "repository_pending": False, "hold": [],
            "hold_state": True, "cache_valid_time": 3600, "tolerate": [], "strict": [], "hints": {},
            "environment": {}}
    base.update(overrides)
    return base


@pytest.mark.parametrize("options, installed, previous, wanted, retired, missing", [
    # only what is missing, unless latest
    ({}, {}, None, ["nvidia-open"], [], []),
    ({}, {"nvidia-open": "580"}, None, [], [], []),
    ({"latest": True}, {"nvidia-open": "580"}, None, ["nvidia-open"], [], []),
    ({"names": ["nvidia-open=580.95.05-1"]}, {"nvidia-open": "570"}, None, [], [], []),
    # prerequisites: when missing, never upgraded
    ({"prerequisites": ["python3-pynvml", "apt"], "latest": True}, {"nvidia-open": "580", "apt": "2.6"}, None,
     ["nvidia-open", "python3-pynvml"], [], ["python3-pynvml"]),
    # a branch change removes the earlier branch's packages in the same transaction
    ({"names": ["nvidia-open", "nvidia-fabricmanager-580"], "retire_branch_packages": True},
     {"nvidia-open": "570", "nvidia-fabricmanager-570": "570"},
     {"requires": ["nvidia-open", "nvidia-fabricmanager-570"]},
     ["nvidia-open", "nvidia-fabricmanager-580", "nvidia-fabricmanager-570-"], ["nvidia-fabricmanager-570"], []),
    # not retired when not asked to, or when it is gone already
    ({"names": ["nvidia-fabricmanager-580"]}, {"nvidia-fabricmanager-570": "570"},
     {"requires": ["nvidia-fabricmanager-570"]}, ["nvidia-fabricmanager-580"], [], []),
    ({"names": ["nvidia-fabricmanager-580"], "retire_branch_packages": True}, {},
     {"requires": ["nvidia-fabricmanager-570"]}, ["nvidia-fabricmanager-580"], [], []),
])
def test_plan(options, installed, previous, wanted, retired, missing):
    steps = install.plan(params(**options), installed, previous)
    assert (steps["wanted"], steps["retired"], steps["missing"]) == (wanted, retired, missing)


@pytest.mark.parametrize("options, expected", [
    ({}, NO_RECOMMENDS),
    ({"allow_downgrade": True}, NO_RECOMMENDS + ["--allow-downgrades"]),
])
def test_plan_options(options, expected):
    assert install.plan(params(**options), {}, None)["options"] == expected


def test_plan_requires_and_holds_base_names():
    steps = install.plan(params(names=["nvidia-open=580.95.05-1"], prerequisites=["python3-pynvml:amd64"],
                                hold=["nvidia-open=580.95.05-1", "nvidia-open"]), {}, None)
    assert steps["requires"] == ["nvidia-open", "python3-pynvml"] and steps["hold"] == ["nvidia-open"]


@pytest.mark.parametrize("before, changed, packages, added", [
    ({}, [], [], []),
    ({"a": "1"}, [("b", "2"), ("a", "3")],
     [{"name": "a", "before": "1", "after": "3"}, {"name": "b", "before": None, "after": "2"}], ["b"]),
])
def test_changes(before, changed, packages, added):
    assert install.changes(before, changed) == (packages, added)


def test_record_grows_and_retires():
    steps = {"requires": ["nvidia-open", "nvidia-fabricmanager-580"], "retired": ["nvidia-fabricmanager-570"]}
    previous = {"owner": "driver", "requires": ["nvidia-open", "nvidia-fabricmanager-570"],
                "added": ["nvidia-open", "nvidia-fabricmanager-570", "dkms"]}
    assert install.record(previous, "driver", steps, ["nvidia-fabricmanager-580"]) == {
        "owner": "driver", "requires": ["nvidia-fabricmanager-580", "nvidia-open"],
        "added": ["dkms", "nvidia-fabricmanager-580", "nvidia-open"]}


@pytest.mark.parametrize("changed, expected", [
    ([], None),
    ([{"name": "a", "before": None, "after": "2"}, {"name": "b", "before": "1", "after": "3"}],
     {"before_header": "packages", "after_header": "packages", "before": "a (not installed)\nb 1\n",
      "after": "a 2\nb 3\n"}),
])
def test_diff(changed, expected):
    assert install.diff(changed) == expected


# ---- the transaction ---------------------------------------------------------------------------

@pytest.fixture
def node(fake, dpkg_root, tmp_path, monkeypatch):
    """A node whose dpkg database has dpkg installed and whose apt installs what it simulates."""
    monkeypatch.setattr(ops, "needs_refresh", lambda seconds: False)
    root = dpkg_root({"dpkg": ("1.21", "install ok installed")})

    def apt_get(argv):
        if "-s" in argv:
            names = [name for name in argv[argv.index("install") + 1:] if name != "dpkg"]
            return 0, "".join("Inst %s (1.0 test [amd64])\n" % name for name in names), ""
        with open(root + "/var/lib/dpkg/status", "a", encoding="utf-8") as handle:
            for name in argv[argv.index("install") + 1:]:
                handle.write("\nPackage: %s\nStatus: install ok installed\nArchitecture: amd64\nVersion: 1.0\n" % name)
        return 0, "", ""

    def make(check_mode=False, diff=False):
        return fake({("apt-get",): apt_get, ("apt-mark",): (0, "", "")}, check_mode=check_mode, diff=diff)
    return make, root, tmp_path / "records"


def test_check_mode_simulates_and_writes_nothing(node):
    make, root, records = node
    module = make(check_mode=True, diff=True)
    result = install.apply(module, params(names=["sl"], record_dir=str(records), hold=["sl"]), root)
    assert result["changed"] is True and result["added"] == ["sl"] and result["held"] == ["sl"]
    assert result["diff"]["before"] == "sl (not installed)\n"
    assert result["record"] == {"owner": "driver", "requires": ["sl"], "added": ["sl"]}
    assert not module.ran("apt-get", "-q") and not module.ran("apt-mark") and not records.exists()


def test_an_installation_is_recorded_and_held_then_changes_nothing(node):
    make, root, records = node
    module = make()
    result = install.apply(module, params(names=["sl"], record_dir=str(records), hold=["sl"]), root)
    assert result["changed"] is True and result["changed_packages"] == [{"name": "sl", "before": None, "after": "1.0"}]
    assert json.loads((records / "driver.json").read_text()) == {"owner": "driver", "requires": ["sl"], "added": ["sl"]}
    assert module.ran("apt-mark") == [["apt-mark", "hold", "sl"]]
    with open(root + "/var/lib/dpkg/status", "a", encoding="utf-8") as handle:
        handle.write("\nPackage: sl\nStatus: hold ok installed\nArchitecture: amd64\nVersion: 1.0\n")
    again = make()
    assert install.apply(again, params(names=["sl"], record_dir=str(records), hold=["sl"]), root)["changed"] is False
    assert not again.ran("apt-get") and not again.ran("apt-mark")


def test_a_pending_repository_simulates_only_the_missing_prerequisites(node):
    make, root, records = node
    module = make(check_mode=True)
    result = install.apply(module, params(names=["nvidia-open"], prerequisites=["python3-pynvml", "dpkg"],
                                          record_dir=str(records), repository_pending=True), root)
    assert result["changed"] is True and result["msg"].endswith("(only the missing prerequisites are)")
    assert module.ran("apt-get", "-s") == [["apt-get", "-s", "-q", "-y", "--no-install-recommends", "install",
                                            "python3-pynvml"]]
    assert result["added"] == ["python3-pynvml"]
    assert result["record"]["requires"] == ["dpkg", "nvidia-open", "python3-pynvml"]


@pytest.mark.parametrize("text", ["not json", "[1, 2]"])
def test_a_broken_record_stops_before_any_change(node, text):
    make, root, records = node
    records.mkdir()
    (records / "driver.json").write_text(text)
    module = make()
    with pytest.raises(ops.AptError, match="driver.json .*move it away.*; nothing was changed$"):
        install.apply(module, params(names=["sl"], record_dir=str(records)), root)
    assert module.calls == []


def test_a_failed_hold_after_the_record_is_a_change(node):
    make, root, records = node
    module = make()
    module.answers[("apt-mark",)] = (100, "", "E: boom\n")
    with pytest.raises(ops.AptError) as failure:
        install.apply(module, params(names=["dpkg"], record_dir=str(records), hold=["dpkg"]), root)
    assert failure.value.changed is True and (records / "driver.json").exists()


POLICY = """dpkg:
  Installed: 1.21
  Candidate: %s
  Version table:
 *** 1.21 1001
        100 /var/lib/dpkg/status
"""


def test_latest_on_packages_at_their_candidate_asks_apt_cache_only(node):
    make, root, records = node
    module = make(check_mode=True)
    module.answers[("apt-cache", "policy")] = (0, POLICY % "1.21", "")
    result = install.apply(module, params(names=["dpkg"], record_dir=str(records), latest=True), root)
    assert module.ran("apt-cache") == [["apt-cache", "policy", "dpkg"]] and not module.ran("apt-get")
    assert result["changed_packages"] == []


def test_latest_with_a_newer_candidate_is_simulated(node):
    make, root, records = node
    module = make(check_mode=True)
    module.answers[("apt-cache", "policy")] = (0, POLICY % "1.22", "")
    install.apply(module, params(names=["dpkg"], record_dir=str(records), latest=True), root)
    assert module.ran("apt-get", "-s") == [["apt-get", "-s", "-q", "-y", "--no-install-recommends",
                                            "--allow-change-held-packages", "install", "dpkg"]]

# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""apt_remove: exactly what was asked, never what another role needs; a role's whole removal from
its record (holds released, what stays handed to the roles that need it, the record removed).
apt is scripted over a dpkg database under a temporary root; the real removal runs in the
molecule scenarios driver_absent and container_toolkit_absent."""
from __future__ import annotations

import json

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils.apt import ops, remove

DRIVER = {"owner": "driver", "requires": ["nvidia-open", "python3-pynvml"],
          "added": ["nvidia-open", "libnvidia-ml1", "python3-pynvml"]}
REPORT = {"owner": "gpu_report", "requires": ["python3-pynvml"], "added": []}
TOOLKIT = {"owner": "container_toolkit", "requires": [], "added": ["nvidia-container-toolkit"]}


@pytest.mark.parametrize("found, mine, others, keep", [
    ({}, {}, [], []),
    ({"/r/driver.json": DRIVER}, DRIVER, [], []),
    ({"/r/driver.json": DRIVER, "/r/gpu_report.json": REPORT, "/r/container_toolkit.json": TOOLKIT}, DRIVER,
     ["/r/container_toolkit.json", "/r/gpu_report.json"], ["python3-pynvml"]),
    ({"/r/gpu_report.json": REPORT}, {}, ["/r/gpu_report.json"], ["python3-pynvml"]),
])
def test_owned(found, mine, others, keep):
    split = remove.owned(found, "driver", "/r")
    assert split["path"] == "/r/driver.json"
    assert (split["mine"], sorted(split["others"]), split["keep"]) == (mine, others, keep)


@pytest.mark.parametrize("others, kept, expected", [
    ({"/r/gpu_report.json": REPORT}, [], {}),
    ({"/r/gpu_report.json": REPORT}, ["python3-pynvml", "libnvidia-ml1"],
     {"/r/gpu_report.json": dict(REPORT, added=["libnvidia-ml1", "python3-pynvml"])}),
    # a record that already holds them, or requires nothing, is left as it is
    ({"/r/gpu_report.json": dict(REPORT, added=["python3-pynvml"])}, ["python3-pynvml"], {}),
    ({"/r/container_toolkit.json": TOOLKIT}, ["python3-pynvml"], {}),
])
def test_hand_over(others, kept, expected):
    assert remove.hand_over(others, kept) == expected


@pytest.mark.parametrize("name, why", [
    ("python3-pynvml", "another role needs it"),
    ("libnvidia-ml1", "a package another role needs depends on it"),
])
def test_kept_why(name, why):
    assert remove.kept_why(name, ["python3-pynvml"]) == why


@pytest.fixture
def node(fake, dpkg_root):
    """driver's packages installed (nvidia-open held); python3-pynvml depends on libnvidia-ml1,
    and apt would take python3-pynvml with libnvidia-ml1."""
    root = dpkg_root({"nvidia-open": ("580", "hold ok installed"), "libnvidia-ml1": ("580", "install ok installed"),
                      "python3-pynvml": ("11", "install ok installed"), "adduser": ("3", "install ok installed")})

    def simulate(argv):
        names = set(argv[argv.index("purge") + 1:])
        taken = names | ({"python3-pynvml"} if "libnvidia-ml1" in names else set())
        return 0, "".join("Purg %s [1]\n" % name for name in sorted(taken)), ""

    depends = {"python3-pynvml": "python3-pynvml\n  Depends: libnvidia-ml1\n", "libnvidia-ml1": "libnvidia-ml1\n"}

    def make(check_mode=False, diff=False):
        return fake({("apt-get", "-s"): simulate, ("apt-get", "-q"): (0, "", ""), ("apt-mark",): (0, "", ""),
                     ("apt-cache", "depends"): lambda argv: (0, "".join(depends.get(n, n + "\n") for n in argv[10:]),
                                                             "")},
                    check_mode=check_mode, diff=diff)
    return make, root


@pytest.mark.parametrize("keep, removed, kept", [
    ([], ["libnvidia-ml1", "nvidia-open", "python3-pynvml"], []),
    (["python3-pynvml"], ["nvidia-open"], ["libnvidia-ml1", "python3-pynvml"]),
])
def test_remove_keeps_what_another_role_needs(node, keep, removed, kept):
    make, root = node
    module = make()
    result = remove.remove(module, ["nvidia-open", "libnvidia-ml1", "python3-pynvml", "not-installed"], keep, root=root)
    assert result["removed"] == removed and [item["name"] for item in result["kept"]] == kept
    assert module.ran("apt-get", "-q") == [["apt-get", "-q", "-y", "--allow-change-held-packages", "purge"] + removed]


def test_what_apt_would_take_beyond_the_candidates_is_kept_with_its_needs(node):
    make, root = node
    module = make(check_mode=True)
    result = remove.remove(module, ["nvidia-open", "libnvidia-ml1"], root=root)
    # apt would take python3-pynvml (not asked for) with libnvidia-ml1: libnvidia-ml1 stays
    assert result["removed"] == ["nvidia-open"]
    assert result["kept"] == [{"name": "libnvidia-ml1", "why": "installed packages depend on it (python3-pynvml)"}]
    assert not module.ran("apt-get", "-q")


def test_a_roles_whole_removal(node, tmp_path):
    make, root = node
    records = tmp_path / "records"
    records.mkdir()
    for data in (DRIVER, REPORT, TOOLKIT):
        (records / ("%s.json" % data["owner"])).write_text(json.dumps(data))
    module = make(diff=True)
    result = remove.remove_owned(module, "driver", str(records), root=root)
    assert result["released"] == ["nvidia-open"] and module.ran("apt-mark") == [["apt-mark", "unhold", "nvidia-open"]]
    assert result["removed"] == ["nvidia-open"]
    assert [item["name"] for item in result["kept"]] == ["libnvidia-ml1", "python3-pynvml"]
    assert json.loads((records / "gpu_report.json").read_text()) == dict(REPORT, added=["libnvidia-ml1", "python3-pynvml"])
    assert json.loads((records / "container_toolkit.json").read_text()) == TOOLKIT
    assert not (records / "driver.json").exists()
    assert result["records"] == [str(records / "gpu_report.json"), str(records / "driver.json")]
    assert [entry["after_header"] for entry in result["diff"]] == [
        "packages", str(records / "gpu_report.json"), "%s (absent)" % (records / "driver.json")]
    assert result["diff"][0]["before"] == "libnvidia-ml1\nnvidia-open\npython3-pynvml\n"


def test_check_mode_of_a_roles_removal_changes_nothing(node, tmp_path):
    make, root = node
    records = tmp_path / "records"
    records.mkdir()
    (records / "driver.json").write_text(json.dumps(DRIVER))
    module = make(check_mode=True)
    result = remove.remove_owned(module, "driver", str(records), root=root)
    assert result["changed"] is True and result["released"] == ["nvidia-open"]
    assert not module.ran("apt-mark") and not module.ran("apt-get", "-q")
    assert json.loads((records / "driver.json").read_text()) == DRIVER


def test_without_a_record_nothing_is_removed(node, tmp_path):
    make, root = node
    module = make()
    result = remove.remove_owned(module, "driver", str(tmp_path / "records"), root=root)
    assert result["changed"] is False and result["removed"] == [] and module.calls == []
    assert result["msg"].startswith("there is no record of the packages driver installed")


def test_a_broken_record_removes_nothing(node, tmp_path):
    make, root = node
    (tmp_path / "gpu_report.json").write_text("{")
    module = make()
    with pytest.raises(ops.AptError, match="gpu_report.json is not JSON .*; nothing was removed$"):
        remove.remove_owned(module, "driver", str(tmp_path), root=root)
    assert module.calls == []

# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one records helper: every way a record can be unreadable is a RecordError naming the file
and the fix; a record under the old root is carried over, never lost."""
from __future__ import annotations

import json
import os

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils.host import records


class Module:
    def __init__(self, check_mode=False):
        self.check_mode = check_mode
        self._diff = False

    def atomic_move(self, src, dst, unsafe_writes=False):  # pylint: disable=unused-argument
        os.rename(src, dst)


def test_a_missing_record_is_none(tmp_path):
    assert records.read(str(tmp_path / "none.json")) == (None, None)


@pytest.mark.parametrize("content, shape, expected", [
    (b"{not json", dict, "is not JSON"),
    (b"[1, 2]", dict, "holds a JSON list where a JSON object was expected"),
    (b"\"text\"", list, "holds a string where a JSON list was expected"),
    (b"7", dict, "holds a number where a JSON object was expected"),
    (b"\xff\xfe{}", dict, "is not UTF-8 text"),
])
def test_a_record_of_the_wrong_content_names_file_problem_and_fix(tmp_path, content, shape, expected):
    path = tmp_path / "r.json"
    path.write_bytes(content)
    with pytest.raises(records.RecordError) as err:
        records.read(str(path), shape, "GPU inventory record")
    assert str(path) in str(err.value) and expected in str(err.value) and "move it away" in str(err.value)


def test_a_directory_or_a_path_under_a_file_is_refused_by_name(tmp_path):
    (tmp_path / "dir.json").mkdir()
    with pytest.raises(records.RecordError, match="is a directory, not a file"):
        records.read(str(tmp_path / "dir.json"))
    (tmp_path / "file").write_text("x")
    with pytest.raises(records.RecordError, match="a part of its path is a file"):
        records.read(str(tmp_path / "file" / "r.json"))


def test_the_records_live_under_one_root():
    for path in (records.DRIVER_STATE, records.GPU_INVENTORY, records.MIG_PROFILES, records.PACKAGES,
                 records.APT_SOURCES):
        assert path.startswith("/var/lib/gpuops/")


@pytest.mark.parametrize("check_mode", [False, True])
def test_a_record_under_the_old_root_is_carried_over(tmp_path, check_mode):
    # the MIG profile record as release 0.1.0 wrote it
    old = tmp_path / "var/lib/gpuops-nvidia/mig-profiles.json"
    old.parent.mkdir(parents=True)
    content = {"0x233010de": {"19": {"name": "1g.10gb", "memory_mb": 9856}}}
    old.write_text(json.dumps(content, indent=1, sort_keys=True) + "\n")
    text, data = records.read_carried(Module(check_mode), records.MIG_PROFILES, root=str(tmp_path))
    assert data == content and json.loads(text) == content
    new = tmp_path / "var/lib/gpuops/mig-profiles.json"
    if check_mode:
        assert old.exists() and not new.exists()
    else:
        assert not old.exists() and json.loads(new.read_text()) == content


def test_a_record_at_the_new_root_wins_over_an_old_one(tmp_path):
    for root, value in (("gpuops-nvidia", {"old": 1}), ("gpuops", {"new": 1})):
        path = tmp_path / "var/lib" / root / "mig-profiles.json"
        path.parent.mkdir(parents=True)
        path.write_text(json.dumps(value))
    assert records.read_carried(Module(), records.MIG_PROFILES, root=str(tmp_path))[1] == {"new": 1}
    assert (tmp_path / "var/lib/gpuops-nvidia/mig-profiles.json").exists()

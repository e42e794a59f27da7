# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The one safe writer: atomic writes that keep owner and mode, backups, diffs with credentials
masked, and the checks made before anything is written."""
from __future__ import annotations

import os
import stat

from ansible_collections.gpuops.nvidia.plugins.module_utils.host import files


class FakeModule:
    """What files.py needs of AnsibleModule: backup_local and atomic_move."""

    def __init__(self):
        self.moves = []

    def backup_local(self, path):
        target = path + ".1234.2026-12-01@10:00:00~"
        with open(path, "rb") as src, open(target, "wb") as dst:
            dst.write(src.read())
        return target

    def atomic_move(self, src, dst, unsafe_writes=False):
        self.moves.append((os.path.dirname(src), dst))
        os.rename(src, dst)


def mode(path):
    return stat.S_IMODE(os.stat(path).st_mode)


def test_read_text(tmp_path):
    assert files.read_text(str(tmp_path / "missing")) is None
    (tmp_path / "x").write_text("a = 1\n")
    assert files.read_text(str(tmp_path / "x")) == "a = 1\n"


def test_new_file_through_a_temp_file_in_the_same_directory(tmp_path):
    module = FakeModule()
    target = tmp_path / "conf.d" / "99-nvidia.toml"
    assert files.write_atomic(module, str(target), "x = 1\n") is None
    assert target.read_text() == "x = 1\n" and mode(str(target)) == 0o644
    assert module.moves == [(str(target.parent), str(target))]  # the temp file was next to the target
    assert os.listdir(target.parent) == ["99-nvidia.toml"]  # no temp file left


def test_existing_file_keeps_its_mode_and_a_drop_in_takes_the_main_files(tmp_path):
    main = tmp_path / "config.toml"
    main.write_text("old\n")
    os.chmod(main, 0o600)
    files.write_atomic(FakeModule(), str(main), "new\n")
    assert main.read_text() == "new\n" and mode(str(main)) == 0o600
    drop_in = tmp_path / "conf.d" / "99-nvidia.toml"
    files.write_atomic(FakeModule(), str(drop_in), "secret section\n", like=str(main))
    assert mode(str(drop_in)) == 0o600


def test_backups_next_to_the_file_or_elsewhere(tmp_path):
    path = tmp_path / "daemon.json"
    path.write_text("{}\n")
    made = files.write_atomic(FakeModule(), str(path), '{"a": 1}\n', keep_backup=True)
    assert made == str(path) + ".1234.2026-12-01@10:00:00~" and open(made).read() == "{}\n"
    elsewhere = tmp_path / "state" / "backups"
    made = files.write_atomic(FakeModule(), str(path), '{"a": 2}\n', keep_backup=True, backup_dir=str(elsewhere))
    assert os.path.dirname(made) == str(elsewhere) and open(made).read() == '{"a": 1}\n'
    assert files.backup(FakeModule(), str(tmp_path / "missing")) is None


def test_remove(tmp_path):
    path = tmp_path / "99-nvidia.toml"
    path.write_text("x\n")
    made = files.remove(FakeModule(), str(path), keep_backup=True, backup_dir=str(tmp_path / "b"))
    assert not path.exists() and open(made).read() == "x\n"
    assert files.remove(FakeModule(), str(path)) is None


def test_check_writable(tmp_path):
    assert files.check_writable(str(tmp_path / "new" / "deeper" / "file")) is None
    locked = tmp_path / "locked"
    locked.mkdir()
    os.chmod(locked, 0o500)
    try:
        problem = files.check_writable(str(locked / "file"))
        if os.geteuid() == 0:
            assert problem is None  # root writes anyway
        else:
            assert problem == "directory %s is not writable" % locked
    finally:
        os.chmod(locked, 0o700)


def test_diff_entry_masks_and_names_absent_files():
    entry = files.diff_entry("/etc/docker/daemon.json", None, '{"proxies": {"http-proxy": "http://u:pw@p:3128"}}\n')
    assert entry["before_header"] == "/etc/docker/daemon.json (absent)" and entry["before"] == ""
    assert entry["after"] == '{"proxies": {"http-proxy": "http://u:********@p:3128"}}\n'
    gone = files.diff_entry("/x", 'password = "pw"\n', None)
    assert gone["after_header"] == "/x (absent)" and gone["before"] == 'password = "********"\n'


def test_with_env_sets_keys_in_place_and_keeps_every_other_line():
    text = "# the toolkit's defaults\nNVIDIA_CTK_CDI_OUTPUT_FILE_PATH=/var/run/cdi/nvidia.yaml\nNVIDIA_CTK_CDI_GENERATE_MODE=cdi\n"
    after = files.with_env(text, {"NVIDIA_CTK_CDI_GENERATE_MODE": "auto", "NVIDIA_CTK_DEBUG": "false"})
    assert after == ("# the toolkit's defaults\nNVIDIA_CTK_CDI_OUTPUT_FILE_PATH=/var/run/cdi/nvidia.yaml\n"
                     "NVIDIA_CTK_CDI_GENERATE_MODE=auto\nNVIDIA_CTK_DEBUG=false\n")
    assert files.with_env(after, {"NVIDIA_CTK_CDI_GENERATE_MODE": "auto"}) == after


def test_with_env_keeps_comments_that_name_a_key_and_drops_a_repeated_setting():
    text = "#NVIDIA_CTK_CDI_GENERATE_MODE=nvml\nNVIDIA_CTK_CDI_GENERATE_MODE=cdi\nNVIDIA_CTK_CDI_GENERATE_MODE=csv\n"
    assert files.with_env(text, {"NVIDIA_CTK_CDI_GENERATE_MODE": "auto"}) == (
        "#NVIDIA_CTK_CDI_GENERATE_MODE=nvml\nNVIDIA_CTK_CDI_GENERATE_MODE=auto\n")
    assert files.with_env(None, {"A": "1"}) == "A=1\n"


def test_a_host_root_must_be_a_directory(tmp_path):
    assert files.root_problem(str(tmp_path)) is None and files.root_problem("/") is None
    assert files.root_problem(str(tmp_path / "hots")).startswith("host_root %s does not exist: give the directory"
                                                                 % (tmp_path / "hots"))
    (tmp_path / "a-file").write_text("x")
    assert "is not a directory" in files.root_problem(str(tmp_path / "a-file"))

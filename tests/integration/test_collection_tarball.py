# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection tarball holds what a user installs, and none of the lab: no C sources,
stand-ins, lab inventory, molecule scenarios or tests."""
from __future__ import annotations

import glob
import os
import subprocess
import tarfile

from conftest import BIN, REPO  # pylint: disable=import-error


def test_tarball_holds_the_collection_and_not_the_lab(tmp_path):
    subprocess.run([os.path.join(BIN, "ansible-galaxy"), "collection", "build", "--output-path", str(tmp_path), REPO],
                   check=True, capture_output=True, text=True)
    tarball, = glob.glob(str(tmp_path / "gpuops-nvidia-*.tar.gz"))
    with tarfile.open(tarball) as archive:
        names = {member.name for member in archive.getmembers() if member.isfile()}
    for wanted in ("MANIFEST.json", "FILES.json", "README.md", "LICENSE", "meta/runtime.yml", "playbooks/site.yml",
                   "plugins/modules/runtime_config.py", "plugins/module_utils/report/findings.py",
                   "plugins/filter/findings.py", "roles/driver/tasks/main.yml", "roles/packages/tasks/remove.yml",
                   "inventories/example/hosts.yml", "inventories/example/group_vars/gpu_nodes.yml"):
        assert wanted in names, wanted
    unwanted = sorted(name for name in names
                      if name.startswith(("tests/", "molecule/", "inventories/lab/", ".build/", ".venv/", ".config/"))
                      or name.endswith((".c", ".h", ".so", ".so.1", ".deb", ".profile")) or "__pycache__" in name)
    assert unwanted == []

# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Unit tests from a plain checkout: `.venv/bin/pytest tests/unit` makes the working tree
importable as ansible_collections.gpuops.nvidia (ansible-test units, which `make units` runs,
does that itself from its copy of the collection)."""
from __future__ import annotations

import atexit
import os
import shutil
import sys
import tempfile

_REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))

if os.path.basename(os.path.dirname(os.path.dirname(_REPO))) != "ansible_collections":
    _ROOT = tempfile.mkdtemp(prefix="gpuops-nvidia-units-")
    atexit.register(shutil.rmtree, _ROOT, True)
    os.makedirs(os.path.join(_ROOT, "ansible_collections", "gpuops"))
    os.symlink(_REPO, os.path.join(_ROOT, "ansible_collections", "gpuops", "nvidia"))
    sys.path.insert(0, _ROOT)

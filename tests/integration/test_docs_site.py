# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's documentation site (`make docs`): antsibull-docs turns the installed
collection's module, plugin and role docs into reStructuredText and Sphinx builds it with every
warning an error. Built here without an error or a warning, with a page for every module, filter
and role, each showing what its own docs say."""
from __future__ import annotations

import glob
import os
import re
import subprocess

from conftest import REPO  # pylint: disable=import-error

HTML = os.path.join(REPO, ".build", "docs", "build", "html")


def test_make_docs_builds_the_site_without_a_warning():
    env = {k: v for k, v in os.environ.items() if k not in ("MAKEFLAGS", "MFLAGS", "MAKELEVEL")}
    res = subprocess.run(["make", "--no-print-directory", "-s", "docs"], cwd=REPO, env=env, capture_output=True,
                         text=True, check=False, timeout=600)
    out = res.stdout + res.stderr
    assert res.returncode == 0, out[-6000:]
    assert not re.search(r"warning|error", out, re.I), out[-6000:]
    pages = {os.path.basename(p)[:-5] for p in glob.glob(os.path.join(HTML, "*.html"))}
    modules = {os.path.basename(p)[:-3] for p in glob.glob(os.path.join(REPO, "plugins", "modules", "*.py"))}
    roles = set(os.listdir(os.path.join(REPO, "roles")))
    filters = {os.path.basename(p)[:-4] for p in glob.glob(os.path.join(REPO, "plugins", "filter", "*.yml"))}
    assert {m + "_module" for m in modules} <= pages, sorted({m + "_module" for m in modules} - pages)
    assert {r + "_role" for r in roles} <= pages, sorted({r + "_role" for r in roles} - pages)
    assert len(filters) > 50 and {f + "_filter" for f in filters} <= pages, sorted({f + "_filter" for f in filters} - pages)
    # a page shows its plugin's own docs: an option and its description from gpu_info's DOCUMENTATION
    with open(os.path.join(HTML, "gpu_info_module.html"), encoding="utf-8") as handle:
        page = handle.read()
    assert "xid_wait_ms" in page and "host_root" in page and "as_facts" in page
    assert "index.html" in os.listdir(HTML)

# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The collection's metadata says what is true: every module in the action group, every
collection the content calls declared as a dependency, the oldest ansible-core the tests run."""
from __future__ import annotations

import os
import re

import yaml

REPO = os.path.abspath(os.path.join(os.path.dirname(__file__), "..", ".."))


def _yaml(path):
    with open(os.path.join(REPO, path), encoding="utf-8") as handle:
        return yaml.safe_load(handle)


def _content():
    for top in ("roles", "playbooks"):
        for base, _dirs, names in os.walk(os.path.join(REPO, top)):
            for name in names:
                if name.endswith((".yml", ".yaml", ".j2")):
                    with open(os.path.join(base, name), encoding="utf-8") as handle:
                        yield os.path.join(base, name), handle.read()


def test_the_action_group_lists_every_module():
    modules = sorted(f[:-3] for f in os.listdir(os.path.join(REPO, "plugins", "modules")) if f.endswith(".py"))
    assert sorted(_yaml("meta/runtime.yml")["action_groups"]["nvidia"]) == modules


def test_every_collection_the_content_calls_is_a_dependency():
    used = set()
    for _path, text in _content():
        used.update(re.findall(r"\b([a-z_]+\.[a-z_]+)\.[a-z_0-9]+:", text))
    foreign = {name for name in used if name not in ("ansible.builtin", "gpuops.nvidia")
               and name.split(".")[0] in ("kubernetes", "community", "ansible", "containers", "cloud")}
    assert "kubernetes.core" in foreign, "the roles call kubernetes.core (this test must see it)"
    assert foreign <= set(_yaml("galaxy.yml")["dependencies"]), foreign


def test_requires_ansible_names_the_oldest_tested_core():
    """The oldest release make test runs (the Makefile's OLDEST_CORE, first of CORE_RELEASES) is
    the one meta/runtime.yml requires; the main environment runs a newer one."""
    with open(os.path.join(REPO, "Makefile"), encoding="utf-8") as handle:
        makefile = handle.read()
    oldest = re.search(r"^OLDEST_CORE := (\d+\.\d+)\.\d+$", makefile, re.M).group(1)
    assert re.search(r"^CORE_RELEASES := \$\(OLDEST_CORE\):3\.\d+ ", makefile, re.M)
    assert _yaml("meta/runtime.yml")["requires_ansible"] == ">=%s.0" % oldest
    with open(os.path.join(REPO, "requirements.txt"), encoding="utf-8") as handle:
        main = re.search(r"^ansible-core==(\d+)\.(\d+)\.", handle.read(), re.M).groups()
    assert tuple(int(n) for n in main) > tuple(int(n) for n in oldest.split("."))


def test_the_description_does_not_call_shipped_features_planned():
    description = _yaml("galaxy.yml")["description"]
    assert "planned" not in description.lower()
    for shipped in ("MIG", "device plugin", "GPU Feature Discovery", "DCGM exporter", "upgrade", "audit"):
        assert shipped in description

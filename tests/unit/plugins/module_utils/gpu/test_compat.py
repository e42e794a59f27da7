# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import datetime

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils.gpu import compat


@pytest.mark.parametrize("text, branch", [("580", 580), ("R580", 580), ("r535", 535), (620, 620), ("580.95.05", 580)])
def test_parse_branch(text, branch):
    assert compat.parse_branch(text) == branch


@pytest.mark.parametrize("text", ["latest", "58", "5800", "", "R", "580-open"])
def test_parse_branch_rejects(text):
    with pytest.raises(ValueError, match="not a branch number"):
        compat.parse_branch(text)


@pytest.mark.parametrize("arch, branch, ok", [
    ("kepler", 470, True), ("kepler", 535, False),
    ("volta", 580, True), ("volta", 595, False), ("pascal", 470, True),
    ("hopper", 470, False), ("hopper", 525, True), ("hopper", 620, True),
    ("blackwell", 565, False), ("blackwell", 570, True),
    ("turing", 535, True), ("ampere", 450, True), ("ada", 470, False),
])
def test_architecture_supports_branch(arch, branch, ok):
    assert compat.architecture_supports_branch(arch, branch) is ok


def test_branches_for_architecture():
    assert compat.branches_for_architecture("kepler") == [470]
    assert compat.branches_for_architecture("volta")[-1] == 580
    assert compat.branches_for_architecture("blackwell")[0] == 570


@pytest.mark.parametrize("requested, archs, branch, flavour", [
    ("auto", ["hopper"], 580, "open"),
    ("auto", ["blackwell"], 570, "open"),
    ("auto", ["volta"], 580, "proprietary"),
    ("auto", ["turing"], 470, "proprietary"),   # before the open modules existed
    ("auto", ["volta", "blackwell"], 580, None),  # no flavour fits both
    ("auto", [], 580, "open"),
    ("auto", [], 535, "proprietary"),
    ("proprietary", ["hopper"], 580, "proprietary"),
])
def test_choose_flavour(requested, archs, branch, flavour):
    assert compat.choose_flavour(requested, [{"architecture": a} for a in archs], branch)[0] == flavour


def test_grace_hopper_requires_open():
    assert compat.open_modules_required("hopper", "NVIDIA GH200 480GB")
    assert not compat.open_modules_required("hopper", "NVIDIA H100 80GB HBM3")


@pytest.mark.parametrize("cuda, driver, floor", [
    ("13.0", "580.65.06", "580.0"), ("12.8", "570.26", "525.60.13"), ("12.2", "535.54.03", "525.60.13"),
    ("11.8", "520.61.05", "450.80.02"), ("13.1", "590.44.01", "580.0"),
])
def test_cuda_requirement(cuda, driver, floor):
    assert compat.cuda_requirement(cuda) == {"cuda": cuda, "min_driver": driver, "minor_compat_floor": floor}


def test_cuda_requirement_unknown():
    with pytest.raises(ValueError, match="CUDA 14.2 is not in the compatibility table"):
        compat.cuda_requirement("14.2")


@pytest.mark.parametrize("name, driver", [
    ("NVIDIA H100 80GB HBM3", "525.85.12"), ("NVIDIA H200", "550.90.07"), ("NVIDIA A100-SXM4-40GB", "450.80.02"),
    ("NVIDIA A100 80GB PCIe", "450.80.02"), ("NVIDIA A30", "460.73.01"), ("NVIDIA B200", "570.133.20"),
    ("NVIDIA H20", "535.161.07"), ("NVIDIA L40S", None), ("Tesla T4", None), ("NVIDIA A10", None),
    ("NVIDIA GH200 480GB", "525.85.12"),
])
def test_mig_min_driver(name, driver):
    assert compat.mig_min_driver(name) == driver


@pytest.mark.parametrize("branch, minimum, exact, ok", [
    (580, "580.65.06", None, True), (575, "580.65.06", None, False), (590, "580.65.06", None, True),
    (580, "580.65.06", "580.65.05", False), (580, "580.65.06", "580.95.05", True),
])
def test_branch_satisfies(branch, minimum, exact, ok):
    assert compat.branch_satisfies(branch, minimum, exact) is ok


def test_branch_info_end_of_life():
    assert compat.branch_info(535, datetime.date(2026, 11, 30))["eol_passed"] is True
    assert compat.branch_info(535, datetime.date(2026, 6, 15))["eol_passed"] is False
    assert compat.branch_info(580, datetime.date(2026, 11, 30)) == {
        "branch": 580, "known": True, "kind": "LTSB", "eol": "2028-08", "eol_passed": False}
    assert compat.branch_info(999)["known"] is False

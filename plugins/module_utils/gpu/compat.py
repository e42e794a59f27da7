# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""NVIDIA compatibility tables as data, and pure functions over them: which driver branches
support which GPU architectures, which kernel module flavour each needs, the minimum driver for
each CUDA release and for MIG on each GPU model, and what each driver source packages.

Facts from NVIDIA's CUDA release notes, driver support matrix and MIG user guide (see the
project's REFERENCE.md). No I/O here."""

from __future__ import annotations

import datetime
import re

__metaclass__ = type

ARCHITECTURES = ("kepler", "maxwell", "pascal", "volta", "turing", "ampere", "ada", "hopper", "blackwell")

# Driver branches per architecture: (first branch that supports it, last branch that does).
ARCH_BRANCHES = {
    "kepler": (None, 470),
    "maxwell": (None, 580),
    "pascal": (None, 580),
    "volta": (None, 580),
    "turing": (410, None),
    "ampere": (450, None),
    "ada": (525, None),
    "hopper": (525, None),
    "blackwell": (570, None),
}

# Kernel module flavours: open modules exist from R515, are the default from R560, need GSP
# (Turing and newer) and are required on Blackwell and Grace Hopper.
OPEN_MODULES_FIRST_BRANCH = 515
OPEN_MODULES_DEFAULT_BRANCH = 560
OPEN_CAPABLE = ("turing", "ampere", "ada", "hopper", "blackwell")
OPEN_REQUIRED = ("blackwell",)

# Branches NVIDIA has published for datacenter use: kind and end of life (year, month) if known.
BRANCHES = {
    470: ("LTSB (legacy, last for Kepler)", (2024, 9)),
    535: ("LTSB", (2026, 6)),
    550: ("PB", (2025, 4)),
    560: ("NFB", None),
    565: ("NFB", None),
    570: ("PB", (2026, 2)),
    575: ("NFB", None),
    580: ("LTSB", (2028, 8)),
    590: ("NFB", None),
    595: ("PB", (2027, 3)),
    610: ("NFB", None),
    620: ("LTSB", (2029, 9)),
}

# Minimum Linux driver per CUDA release (CUDA release notes, "CUDA Driver" table).
CUDA_MIN_DRIVER = (
    ("13.1", "590.44.01"),
    ("13.0", "580.65.06"),
    ("12.9", "575.51.03"),
    ("12.8", "570.26"),
    ("12.6", "560.28.03"),
    ("12.5", "555.42.02"),
    ("12.4", "550.54.14"),
    ("12.3", "545.23.06"),
    ("12.2", "535.54.03"),
    ("12.1", "530.30.02"),
    ("12.0", "525.60.13"),
    ("11.8", "520.61.05"),
    ("11.7", "515.43.04"),
    ("11.6", "510.47.03"),
    ("11.5", "495.29.05"),
    ("11.4", "470.42.01"),
    ("11.3", "465.19.01"),
    ("11.2", "460.27.03"),
    ("11.1", "455.23.05"),
    ("11.0", "450.51.06"),
)
# Minor-version compatibility: a CUDA major release runs (without PTX JIT of newer code) on any
# driver from this floor on.
CUDA_MINOR_COMPAT_FLOOR = {13: "580.0", 12: "525.60.13", 11: "450.80.02"}
# Architectures whose last CUDA major is this one (CUDA 13 dropped Maxwell, Pascal and Volta).
CUDA_LAST_MAJOR = {"kepler": 11, "maxwell": 12, "pascal": 12, "volta": 12}

# MIG: models that support it, with the minimum driver (MIG user guide).
MIG_MODELS = (
    ("B300", "580.82.07"),
    ("GB200", "570.133.20"),
    ("B200", "570.133.20"),
    ("H200", "550.90.07"),
    ("H20", "535.161.07"),
    ("GH200", "525.85.12"),
    ("H100", "525.85.12"),
    ("H800", "525.85.12"),
    ("A30", "460.73.01"),
    ("A100", "450.80.02"),
    ("A800", "450.80.02"),
)


def version_tuple(version: str) -> tuple:
    """'580.65.06' -> (580, 65, 6). Raises ValueError on anything that is not dotted numbers."""
    text = str(version).strip()
    if not re.match(r"^\d+(\.\d+)*$", text):
        raise ValueError("not a version: %r" % version)
    return tuple(int(part) for part in text.split("."))


def parse_branch(branch) -> int:
    """'580', 'R580', 580, '580.95.05' -> 580. Raises ValueError with the accepted forms."""
    text = str(branch).strip().upper()
    match = re.match(r"^R?(\d{3})(\.\d+)*$", text)
    if not match:
        raise ValueError("driver branch %r is not a branch number (use e.g. 580 or R580)" % branch)
    return int(match.group(1))


def branch_info(branch: int, today: datetime.date | None = None) -> dict:
    """Kind and end-of-life state of a branch; known=False for branches not in the table."""
    today = today or datetime.date.today()
    if branch not in BRANCHES:
        return {"branch": branch, "known": False, "kind": None, "eol": None, "eol_passed": False}
    kind, eol = BRANCHES[branch]
    passed = eol is not None and (today.year, today.month) > eol
    return {"branch": branch, "known": True, "kind": kind,
            "eol": "%04d-%02d" % eol if eol else None, "eol_passed": passed}


def branches_for_architecture(arch: str) -> list:
    """Known branches that support an architecture, oldest first."""
    first, last = ARCH_BRANCHES.get(arch, (None, None))
    return [b for b in sorted(BRANCHES) if (first is None or b >= first) and (last is None or b <= last)]


def describe_branch_range(arch: str) -> str:
    first, last = ARCH_BRANCHES.get(arch, (None, None))
    if first and last:
        return "R%d to R%d" % (first, last)
    if last:
        return "R%d and older" % last
    if first:
        return "R%d and newer" % first
    return "unknown"


def architecture_supports_branch(arch: str, branch: int) -> bool:
    first, last = ARCH_BRANCHES.get(arch, (None, None))
    return (first is None or branch >= first) and (last is None or branch <= last)


def open_modules_required(arch: str, name: str = "") -> bool:
    """Blackwell and Grace Hopper (GH200) only run with the open kernel modules."""
    return arch in OPEN_REQUIRED or "GH200" in (name or "").upper()


def choose_flavour(requested: str, gpus: list, branch: int) -> tuple:
    """Pick the kernel module flavour. Returns (flavour or None, reason).

    gpus: [{'architecture': ..., 'name': ...}]. requested: auto | open | proprietary."""
    archs = {gpu["architecture"] for gpu in gpus}
    need_open = [gpu for gpu in gpus if open_modules_required(gpu["architecture"], gpu.get("name"))]
    need_proprietary = [gpu for gpu in gpus if gpu["architecture"] not in OPEN_CAPABLE
                        and gpu["architecture"] != "unknown"]
    if requested != "auto":
        return requested, "requested"
    if need_open and need_proprietary:
        return None, "the GPUs need different module flavours (open for %s, proprietary for %s)" % (
            need_open[0]["architecture"], need_proprietary[0]["architecture"])
    if need_open:
        return "open", "%s requires the open kernel modules" % need_open[0]["architecture"].capitalize()
    if need_proprietary:
        return "proprietary", "%s is not supported by the open kernel modules" % (
            need_proprietary[0]["architecture"].capitalize())
    if not archs or archs == {"unknown"}:
        return ("open" if branch >= OPEN_MODULES_DEFAULT_BRANCH else "proprietary"), \
            "no GPU architecture known; the branch's default"
    if branch >= OPEN_MODULES_FIRST_BRANCH:
        return "open", "open modules are NVIDIA's recommendation for Turing and newer GPUs"
    return "proprietary", "branch R%d predates the open kernel modules (R%d)" % (branch, OPEN_MODULES_FIRST_BRANCH)


def cuda_requirement(cuda_version: str) -> dict:
    """Minimum driver for a CUDA release: {'cuda', 'min_driver', 'minor_compat_floor'}.
    Raises ValueError for CUDA versions not in the table."""
    wanted = version_tuple(cuda_version)[:2]
    for cuda, driver in CUDA_MIN_DRIVER:
        if version_tuple(cuda) == wanted:
            return {"cuda": cuda, "min_driver": driver,
                    "minor_compat_floor": CUDA_MINOR_COMPAT_FLOOR.get(wanted[0])}
    known = ", ".join(cuda for cuda, _driver in CUDA_MIN_DRIVER)
    raise ValueError("CUDA %s is not in the compatibility table (known: %s)" % (cuda_version, known))


def mig_min_driver(name: str) -> str | None:
    """Minimum driver for MIG on a GPU model name; None when the model has no MIG."""
    upper = (name or "").upper()
    for model, driver in MIG_MODELS:
        if re.search(r"(^|[^A-Z0-9])%s([^0-9]|$)" % re.escape(model), upper):
            return driver
    return None


def branch_satisfies(branch: int, min_driver: str, exact_version: str | None = None) -> bool:
    """Does a branch (or an exact driver version) reach a minimum driver version?
    A branch reaches it when the branch is newer, or equal and its releases pass the minimum
    (current releases of a branch always do)."""
    if exact_version:
        return version_tuple(exact_version) >= version_tuple(min_driver)
    return branch >= version_tuple(min_driver)[0]

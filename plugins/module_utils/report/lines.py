# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node's GPU report as lines of text for a job log (AWX, ansible-playbook): the verdict,
the driver, one line per GPU with what nvidia-smi users look at, MIG devices, the hardware
changes since the last record and the findings, errors first. Every line fits WIDTH columns
(UUIDs shortened; the JSON keeps them whole). Pure functions."""

from __future__ import annotations

__metaclass__ = type

import textwrap

from ansible_collections.gpuops.nvidia.plugins.module_utils.report import findings as fnd

WIDTH = 100
# status, index, model, UUID, temperature/slowdown, power/cap, memory, utilisation, ECC, persistence,
# MIG, PCIe, NVLink
COLUMNS = (("", 5), ("GPU", 3), ("model", 15), ("UUID", 12), ("temp C", 6), ("power W", 7),
           ("mem GiB", 9), ("util", 4), ("ECC", 5), ("pm", 3), ("MIG", 5), ("PCIe", 8), ("NVLink", 6))
_NAME_PREFIXES = ("NVIDIA ", "Tesla ")


def _fit(text: str, width: int) -> str:
    text = "" if text is None else str(text)
    return text if len(text) <= width else text[:width - 1] + "~"


def _row(values: list) -> str:
    cells = [_fit(value, width).ljust(width) for value, (_title, width) in zip(values, COLUMNS)]
    return " ".join(cells).rstrip()


def _model(name: str | None) -> str:
    name = name or "?"
    for prefix in _NAME_PREFIXES:
        if name.startswith(prefix):
            name = name[len(prefix):]
    return name


def short_uuid(uuid: str | None) -> str:
    """'GPU-5f2d1c3e' from the whole UUID (its first 8 hex digits, as nvidia-smi -L users read it)."""
    if not uuid:
        return "-"
    head, _sep, rest = uuid.partition("-")
    return "%s-%s" % (head, rest[:8]) if rest else uuid[:12]


def _num(value, digits=0) -> str:
    if value is None:
        return "?"
    return ("%." + str(digits) + "f") % value


def _pair(current, limit, digits=0) -> str:
    if current is None:
        return "?"
    return _num(current, digits) if not limit else "%s/%s" % (_num(current, digits), _num(limit, digits))


def _ecc(gpu: dict) -> str:
    """Volatile uncorrectable/corrected ECC errors; 'off' or '-' where there is no ECC."""
    ecc = gpu.get("ecc") or {}
    if not ecc.get("supported"):
        return "-"
    if not ecc.get("enabled"):
        return "off"
    volatile = ecc.get("volatile") or {}
    return "%s/%s" % (volatile.get("uncorrected", "?"), volatile.get("corrected", "?"))


def _mig(gpu: dict) -> str:
    mig = gpu.get("mig") or {}
    if not mig.get("capable"):
        return "n/a"
    if mig.get("current") != mig.get("pending"):
        return "pend"
    return "on:%d" % len(mig.get("devices") or []) if mig.get("current") else "off"


def _pcie(gpu: dict) -> str:
    pcie = gpu.get("pcie") or {}
    current = "%sx%s" % (pcie.get("gen_current", "?"), pcie.get("width_current", "?"))
    best = "%sx%s" % (pcie.get("gen_max", "?"), pcie.get("width_max", "?"))
    return current if current == best else "%s/%s" % (current, best)


def _nvlink(gpu: dict) -> str:
    links = gpu.get("nvlink") or {}
    return "%s/%s" % (links.get("active"), links.get("total")) if links.get("total") else ""


def _status(gpu: dict, by_gpu: dict) -> str:
    if gpu.get("lost"):
        return "LOST"
    severities = {item["severity"] for item in by_gpu.get(gpu.get("index"), [])}
    return "ERROR" if "error" in severities else "warn" if "warning" in severities else "ok"


def gpu_lines(gpu: dict, by_gpu: dict, known: dict | None = None) -> list:
    """One GPU, as the columns of COLUMNS; a lost GPU with what the record still knows of it
    (its serial, slot and when it was last seen)."""
    status = _status(gpu, by_gpu)
    if gpu.get("lost"):
        known = known or {}
        facts = ["serial %s" % (known.get("serial") or "unknown")]
        if known.get("slot") or (gpu.get("pci") or {}).get("bus_id"):
            facts.append("slot %s" % (known.get("slot") or gpu["pci"]["bus_id"]))
        if known.get("last_seen"):
            facts.append("last seen %s" % known["last_seen"])
        head = _row([status, gpu.get("index"), _model(known.get("name")), short_uuid(known.get("uuid"))])
        return wrap(", ".join(facts), indent=" " * 10, first=head + " ")
    memory = gpu.get("memory") or {}
    power = gpu.get("power") or {}
    limits = gpu.get("temperature_limits_c") or {}
    util = (gpu.get("utilization") or {}).get("gpu")
    values = [
        status, gpu.get("index"), _model(gpu.get("name")), short_uuid(gpu.get("uuid")),
        _pair(gpu.get("temperature_c"), limits.get("slowdown")),
        _pair(power.get("draw_w"), power.get("limit_w")),
        _pair(memory.get("used_mib") / 1024.0 if memory.get("used_mib") is not None else None,
              memory.get("total_mib") / 1024.0 if memory.get("total_mib") else None, 1),
        "?" if util is None else "%d%%" % util,
        _ecc(gpu),
        {True: "on", False: "off"}.get(gpu.get("persistence_mode"), "?"),
        _mig(gpu), _pcie(gpu), _nvlink(gpu),
    ]
    return [_row(values)]


def _mig_lines(gpu: dict) -> list:
    devices = (gpu.get("mig") or {}).get("devices") or []
    if not devices:
        return []
    counts = {}
    for device in devices:
        profile = device.get("profile") or device.get("name") or "?"
        counts[profile] = counts.get(profile, 0) + 1
    text = "MIG devices: " + ", ".join("%d x %s" % (n, p) for p, n in sorted(counts.items()))
    return wrap(text, indent=" " * 10)


def wrap(text: str, indent: str = "", first: str | None = None) -> list:
    """text in lines of at most WIDTH; the first starts with first (default: indent)."""
    first = indent if first is None else first
    return textwrap.wrap(text, width=WIDTH, initial_indent=first, subsequent_indent=indent,
                         break_long_words=True, break_on_hyphens=False) or [first.rstrip()]


def finding_lines(items: list) -> list:
    """Each finding, errors first: '[error] GPU 1: message' then its fix, wrapped to WIDTH."""
    out = []
    for item in fnd.ordered(items):
        subject, message = item.get("subject", "node"), item["message"]
        # GPU findings name their GPU in full ('GPU 2 (NVIDIA H100 ..., bus id) has ...')
        text = message if message.startswith(subject + " ") else "%s: %s" % (subject, message)
        out += wrap("[%s] %s" % (item["severity"], text), indent="    ", first="")
        out += wrap("fix: %s" % item["fix"], indent="    ")
    return out


def driver_line(driver: dict, gpu_count: int, lost: int) -> str:
    if not driver.get("loaded"):
        return _fit("driver not usable: %s (%s)" % (driver.get("reason"), driver.get("message")), WIDTH)
    module = (driver.get("kernel_module") or {}).get("flavour")
    text = "driver %s (CUDA %s%s), %d GPU(s)" % (
        driver.get("version"), driver.get("cuda_driver_version"),
        ", %s kernel module" % module if module else "", gpu_count)
    return _fit(text + (", %d lost" % lost if lost else ""), WIDTH)


def lines(info: dict, node_verdict: dict, events: list | None = None, known: dict | None = None) -> list:
    """The whole report: verdict, driver, a header and a line per GPU (MIG devices under it),
    the hardware changes, then the findings."""
    known = known or {}
    gpus = info.get("gpus") or []
    by_gpu = {}
    for item in info.get("health") or []:
        by_gpu.setdefault(item.get("gpu"), []).append(item)
    out = wrap(node_verdict["text"], indent="    ", first="verdict: ")
    out.append(driver_line(info.get("driver") or {}, len(gpus), sum(1 for g in gpus if g.get("lost"))))
    if gpus:
        out.append(_row([title for title, _width in COLUMNS]))
        for gpu in gpus:
            out += gpu_lines(gpu, by_gpu, known.get(gpu.get("index")))
            out += _mig_lines(gpu)
        for entry in info.get("missing_gpus") or []:
            head = _row(["GONE", entry.get("index"), _model(entry.get("name")), short_uuid(entry.get("uuid"))])
            out += wrap("serial %s, slot %s, last seen %s" % (entry.get("serial") or "unknown", entry.get("slot"),
                                                              entry.get("last_seen") or "unknown"),
                        indent=" " * 10, first=head + " ")
    for event in events or []:
        out += wrap(event["message"], indent="    ", first="change: ")
    counts = fnd.counts(info.get("health") or [])
    if info.get("health"):
        out.append("findings: %s error(s), %s warning(s), %s info" % (counts["error"], counts["warning"], counts["info"]))
        out += finding_lines(info["health"])
    return out

# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import copy

from ansible_collections.gpuops.nvidia.plugins.module_utils.report import health
from ansible_collections.gpuops.nvidia.plugins.module_utils.report import lines as report

H100 = {
    "index": 0, "lost": False, "name": "NVIDIA H100 80GB HBM3",
    "uuid": "GPU-5f2d1c3e-8a7b-4c21-9d0e-1f2a3b4c5d6e", "serial": "1652223008145",
    "pci": {"bus_id": "00000000:1B:00.0"},
    "temperature_c": 31, "temperature_limits_c": {"shutdown": 92, "slowdown": 89, "gpu_max": 87, "memory_max": 95},
    "power": {"draw_w": 71.3, "limit_w": 700.0},
    "memory": {"total_mib": 81559, "used_mib": 512, "free_mib": 81047},
    "utilization": {"gpu": 0, "memory": 0},
    "ecc": {"supported": True, "enabled": True, "volatile": {"corrected": 0, "uncorrected": 0},
            "aggregate": {"corrected": 0, "uncorrected": 0}},
    "persistence_mode": True,
    "mig": {"capable": True, "current": False, "pending": False, "devices": []},
    "pcie": {"gen_current": 5, "gen_max": 5, "width_current": 16, "width_max": 16},
    "nvlink": {"links": [{"link": n, "active": True} for n in range(18)], "total": 18, "active": 18},
    "remapped_rows": {"pending": False, "failure": False},
    "clock_event_reasons": ["gpu_idle"], "xids": [],
}
DRIVER = {"loaded": True, "version": "570.172.08", "cuda_driver_version": "12.8", "kernel_module": {"flavour": "open"}}


def gpu(**changes):
    item = copy.deepcopy(H100)
    item.update(changes)
    return item


def info_of(*gpus, driver=None):
    driver = DRIVER if driver is None else driver
    found = health.node_findings(driver, list(gpus))
    return {"driver": driver, "gpus": list(gpus), "health": found}


def render(*gpus, known=None, events=None, driver=None):
    info = info_of(*gpus, driver=driver)
    return report.lines(info, health.verdict(info["health"], known), events, known)


def test_a_healthy_gpu_line_shows_what_nvidia_smi_users_look_at():
    out = render(gpu())
    assert out[0] == "verdict: healthy"
    assert out[1] == "driver 570.172.08 (CUDA 12.8, open kernel module), 1 GPU(s)"
    assert out[2].split() == ["GPU", "model", "UUID", "temp", "C", "power", "W", "mem", "GiB", "util", "ECC", "pm",
                              "MIG", "PCIe", "NVLink"]
    assert out[3].split() == ["ok", "0", "H100", "80GB", "HBM3", "GPU-5f2d1c3e", "31/89", "71/700", "0.5/79.6",
                              "0%", "0/0", "on", "off", "5x16", "18/18"]
    assert len(out) == 4  # no findings, no changes


def test_every_line_fits_100_columns_and_uuids_are_short():
    dbe = {"supported": True, "enabled": True, "volatile": {"corrected": 14, "uncorrected": 2},
           "aggregate": {"corrected": 211, "uncorrected": 3}}
    gpus = [gpu(index=1, xids=[79, 48], ecc=dbe),
            gpu(index=3, pcie={"gen_current": 3, "gen_max": 5, "width_current": 8, "width_max": 16}),
            gpu(index=4, name="NVIDIA RTX PRO 6000 Blackwell Server Edition",
                clock_event_reasons=["hw_slowdown", "sw_thermal_slowdown", "sw_power_cap"], temperature_c=88),
            {"index": 7, "lost": True, "name": None, "uuid": None, "pci": {}, "xids": []}]
    known = {7: {"serial": "1652223008586", "uuid": "GPU-0f0e0d0c-0000-0000-0000-000000000007",
                 "name": "NVIDIA H100 80GB HBM3", "slot": "00000000:df:00.0", "last_seen": "2026-12-01T10:00:00Z"}}
    out = render(*gpus, known=known)
    assert all(len(line) <= report.WIDTH for line in out), [line for line in out if len(line) > report.WIDTH]
    assert not any(H100["uuid"] in line for line in out)
    # unhealthy GPUs are marked on their own line
    header = [i for i, line in enumerate(out) if line.split()[:2] == ["GPU", "model"]][0]
    by_index = {line.split()[1]: line.split()[0] for line in out[header + 1:header + 5]}
    assert by_index == {"1": "ERROR", "3": "warn", "4": "warn", "7": "LOST"}
    lost_line = out[header + 4] + " " + out[header + 5].strip()
    assert "serial 1652223008586" in lost_line and "last seen 2026-12-01T10:00:00Z" in lost_line
    assert "GPU-0f0e0d0c" in lost_line
    # the degraded link shows current against max, the long model name is cut
    assert "3x8/5x16" in out[header + 2] and "RTX PRO 6000 B~" in out[header + 3]


def test_verdict_then_findings_errors_first_each_with_its_fix():
    dbe = {"supported": True, "enabled": True, "volatile": {"corrected": 0, "uncorrected": 2},
           "aggregate": {"corrected": 0, "uncorrected": 2}}
    out = render(gpu(index=0, pcie={"gen_current": 5, "gen_max": 5, "width_current": 8, "width_max": 16}),
                 gpu(index=2, ecc=dbe))
    assert out[0] == ("verdict: degraded: drain and investigate GPU 2 (uncorrectable ECC); check GPU 0 (PCIe link "
                      "degraded)")
    start = out.index("findings: 1 error(s), 1 warning(s), 0 info")
    assert out[start + 1].startswith("[error] GPU 2 (NVIDIA H100 80GB HBM3, 00000000:1B:00.0) has 2 uncorrectable")
    fixes = [line for line in out[start:] if line.startswith("    fix: ") or line.startswith("fix: ")]
    assert len(fixes) == 2
    assert out.index(fixes[0]) < [i for i, line in enumerate(out) if line.startswith("[warning]")][0]


def test_mig_devices_are_listed_under_their_gpu():
    mig = {"capable": True, "current": True, "pending": True,
           "devices": [{"profile": "1g.10gb"}] * 7}
    out = render(gpu(mig=mig))
    assert "on:7" in out[3]
    assert out[4].strip() == "MIG devices: 7 x 1g.10gb"


def test_nvlink_only_where_the_gpu_has_links_and_no_ecc_where_there_is_none():
    l40s = gpu(name="NVIDIA L40S", nvlink={"links": [], "total": 0, "active": 0},
               ecc={"supported": True, "enabled": False}, mig={"capable": False},
               temperature_limits_c=dict.fromkeys(["shutdown", "slowdown", "gpu_max", "memory_max"]))
    line = render(l40s)[3]
    assert line.split()[-4:] == ["off", "on", "n/a", "5x16"] and "31 " in line + " "


def test_a_node_without_a_usable_driver():
    out = render(driver={"loaded": False, "reason": "driver_not_loaded", "message": "Driver Not Loaded"})
    assert out[0].startswith("verdict: not ready: reboot the node")
    assert out[1].startswith("    ") and "driver not usable: driver_not_loaded (Driver Not Loaded)" in out


def test_hardware_changes_are_reported():
    out = render(gpu(), events=[{"message": "GPU 7 (NVIDIA H100 80GB HBM3, serial 1652223008586, slot "
                                            "00000000:df:00.0) is lost (NVML: GPU is lost); last seen 2026-12-01"}])
    changes = [line for line in out if line.startswith("change: ")]
    assert len(changes) == 1 and "serial 1652223008586" in " ".join(out)

# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
from __future__ import annotations

import copy

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils.report import inventory as inv

DRIVER = {"loaded": True, "reason": None, "version": "570.172.08", "cuda_driver_version": "12.8",
          "kernel_module": {"flavour": "open"}}
T1, T2, T3 = "2026-12-01T10:00:00Z", "2026-12-02T10:00:00Z", "2026-12-03T10:00:00Z"


def gpu(index, serial=None, **changes):
    item = {"index": index, "lost": False, "name": "NVIDIA H100 80GB HBM3",
            "uuid": "GPU-%08d-0000-0000-0000-000000000000" % index, "serial": serial or "16522230%05d" % index,
            "board_part_number": "692-2G520-0200-000", "vbios_version": "96.00.99.00.01",
            "pci": {"bus_id": "00000000:%02X:00.0" % (0x18 + index)}, "architecture": "hopper",
            "compute_capability": "9.0", "mig": {"capable": True, "current": False},
            "temperature_c": 30 + index}
    item.update(changes)
    return item


def lost(index, bus_id=None):
    return {"index": index, "lost": True, "name": None, "uuid": None, "pci": {"bus_id": bus_id} if bus_id else {},
            "xids": []}


def snapshot(*gpus, driver=None):
    return {"driver": DRIVER if driver is None else driver, "gpu_count": len(gpus), "gpus": list(gpus)}


def test_first_record_keeps_identity_only_and_no_events():
    record, events = inv.merge(None, snapshot(gpu(0), gpu(1)), host="node-a", now=T1)
    assert events == []
    assert record["schema"] == inv.SCHEMA and record["host"] == "node-a" and record["updated"] == T1
    first = record["gpus"][0]
    assert first["slot"] == "00000000:18:00.0" and first["state"] == "present" and first["first_seen"] == T1
    assert "temperature_c" not in first
    assert record["driver"]["version"] == "570.172.08" and record["driver"]["kernel_module_flavour"] == "open"


def test_same_hardware_changes_nothing_even_when_readings_move():
    record, _events = inv.merge(None, snapshot(gpu(0), gpu(1)), host="n", now=T1)
    again, events = inv.merge(copy.deepcopy(record), snapshot(gpu(0, temperature_c=80), gpu(1)), host="n", now=T2)
    assert events == [] and again == record and again["updated"] == T1


def test_a_lost_gpu_keeps_its_serial_and_uuid_with_when_it_was_last_seen():
    record, _events = inv.merge(None, snapshot(gpu(0), gpu(7)), host="n", now=T1)
    after, events = inv.merge(record, snapshot(gpu(0), lost(7)), host="n", now=T2, boot_id="boot-1")
    entry = after["gpus"][1]
    assert entry["state"] == "lost" and entry["serial"] == "1652223000007"
    assert entry["uuid"] == "GPU-00000007-0000-0000-0000-000000000000" and entry["slot"] == "00000000:1F:00.0".lower()
    assert entry["last_seen"] == T1 and entry["lost_since"] == T2 and entry["lost_boot_id"] == "boot-1"
    assert [e["event"] for e in events] == ["gpu_lost"]
    assert "serial 1652223000007" in events[0]["message"] and "last seen %s" % T1 in events[0]["message"]
    assert after["events"] == events and after["updated"] == T2
    # the next run in the same boot changes nothing; after a reboot it says the GPU stayed lost
    same, none = inv.merge(copy.deepcopy(after), snapshot(gpu(0), lost(7)), host="n", now=T3, boot_id="boot-1")
    assert none == [] and same == after
    rebooted, none = inv.merge(copy.deepcopy(after), snapshot(gpu(0), lost(7)), host="n", now=T3, boot_id="boot-2")
    assert none == [] and rebooted["gpus"][1]["lost_after_reboot"] is True and rebooted["updated"] == T3
    assert inv.identities(rebooted)[7]["serial"] == "1652223000007"


def test_a_gpu_gone_from_nvml_is_kept_as_missing():
    record, _events = inv.merge(None, snapshot(gpu(0), gpu(1)), host="n", now=T1)
    after, events = inv.merge(record, snapshot(gpu(0)), host="n", now=T2)
    assert after["gpus"][1]["state"] == "missing" and after["gpus"][1]["serial"] == "1652223000001"
    assert events[0]["event"] == "gpu_lost" and "no longer lists it" in events[0]["message"]


def test_a_swapped_gpu_same_slot_new_serial():
    record, _events = inv.merge(None, snapshot(gpu(0), gpu(1)), host="n", now=T1)
    after, events = inv.merge(record, snapshot(gpu(0), gpu(1, serial="1652223099999", uuid="GPU-new")),
                              host="n", now=T2)
    assert [e["event"] for e in events] == ["gpu_swapped"]
    assert events[0]["previous_serial"] == "1652223000001" and events[0]["serial"] == "1652223099999"
    assert after["gpus"][1]["serial"] == "1652223099999" and after["gpus"][1]["first_seen"] == T2


def test_a_lost_gpu_replaced_is_a_swap_and_one_that_comes_back_returns():
    record, _events = inv.merge(None, snapshot(gpu(0), gpu(1)), host="n", now=T1)
    gone, _events = inv.merge(record, snapshot(gpu(0), lost(1)), host="n", now=T2)
    back, events = inv.merge(copy.deepcopy(gone), snapshot(gpu(0), gpu(1)), host="n", now=T3)
    assert [e["event"] for e in events] == ["gpu_returned"] and back["gpus"][1]["state"] == "present"
    assert back["gpus"][1]["first_seen"] == T1
    swapped, events = inv.merge(copy.deepcopy(gone), snapshot(gpu(0), gpu(1, serial="X1")), host="n", now=T3)
    assert [e["event"] for e in events] == ["gpu_swapped"] and swapped["gpus"][1]["serial"] == "X1"


def test_a_new_slot_is_an_added_gpu():
    record, _events = inv.merge(None, snapshot(gpu(0)), host="n", now=T1)
    _after, events = inv.merge(record, snapshot(gpu(0), gpu(1)), host="n", now=T2)
    assert [e["event"] for e in events] == ["gpu_added"]


def test_a_lost_gpu_with_its_bus_id_matches_by_slot_not_index():
    record, _events = inv.merge(None, snapshot(gpu(0), gpu(1)), host="n", now=T1)
    # NVML renumbers: the lost GPU (slot of GPU 1) is now listed first
    renumbered = snapshot(lost(0, "00000000:19:00.0"),
                          gpu(1, pci={"bus_id": "00000000:18:00.0"}, serial="1652223000000"))
    _after, events = inv.merge(record, renumbered, host="n", now=T2)
    assert [e["event"] for e in events] == ["gpu_lost"] and events[0]["serial"] == "1652223000001"


def test_without_a_driver_the_record_keeps_the_gpus_it_knows():
    record, _events = inv.merge(None, snapshot(gpu(0)), host="n", now=T1)
    after, events = inv.merge(record, snapshot(driver={"loaded": False, "reason": "driver_not_loaded"}),
                              host="n", now=T2)
    assert events == [] and after["gpus"] == record["gpus"] and after["driver"]["loaded"] is False


def test_a_v1_record_is_read_and_upgraded():
    v1 = {"schema": "gpuops.nvidia/gpu-inventory/v1", "host": "n", "gpu_count": 1,
          "driver": {"loaded": True}, "gpus": [dict(inv._identity(gpu(0)), lost=False)]}
    after, events = inv.merge(v1, snapshot(gpu(0), gpu(1)), host="n", now=T2)
    assert after["schema"] == inv.SCHEMA and [e["event"] for e in events] == ["gpu_added"]
    assert after["gpus"][0]["first_seen"] is None and after["updated"] == T2


@pytest.mark.parametrize("record", [{"schema": "something/else"}, ["not", "a", "dict"]])
def test_a_foreign_file_is_refused(record):
    with pytest.raises(inv.RecordError, match="gpu_report_inventory_path|not a JSON object"):
        inv.merge(record, snapshot(gpu(0)), host="n", now=T1)


def test_events_are_bounded():
    record, _events = inv.merge(None, snapshot(gpu(0)), host="n", now=T1)
    record["events"] = [{"event": "gpu_added", "n": n} for n in range(inv.MAX_EVENTS)]
    after, _events = inv.merge(record, snapshot(lost(0, "00000000:18:00.0")), host="n", now=T2)
    assert len(after["events"]) == inv.MAX_EVENTS and after["events"][-1]["event"] == "gpu_lost"


@pytest.mark.parametrize("changes, problem", [
    ({"gpus": 3}, "its gpus is a number where a list of objects"),
    ({"gpus": ["GPU 0"]}, "its gpus is a list holding a string where"),
    ({"events": "none"}, "its events is a string where a list of objects"),
])
def test_a_record_of_the_wrong_shape_is_refused(changes, problem):
    record = dict({"schema": inv.SCHEMA, "gpus": [], "events": []}, **changes)
    with pytest.raises(inv.RecordError, match=problem):
        inv.merge(record, snapshot(gpu(0)), host="n", now=T1)

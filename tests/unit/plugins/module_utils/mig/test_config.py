# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""mig/config: mig-parted's format, every mistake named with the config, the entry and the fix;
which GPUs each entry selects."""
from __future__ import annotations

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils.mig import config

H100 = 0x233010DE
A100 = 0x20B010DE
GPUS = [{"index": i, "pci_device_id": H100 if i < 2 else A100} for i in range(4)]


def doc(*entries, name="c"):
    return {"version": "v1", "mig-configs": {name: list(entries)}}


@pytest.mark.parametrize("entry", [
    {"devices": "all", "mig-enabled": False},
    {"devices": [0, 1], "mig-enabled": True, "mig-devices": {"1g.10gb": 7}},
    {"devices": "all", "mig-enabled": True, "mig-devices": {"1g.24gb+me": 1, "1g.12gb-me": 1, "7g.80gb": 0}},
    {"devices": "all", "device-filter": "0x233010DE", "mig-enabled": True, "mig-devices": None},
    {"devices": [3], "device-filter": ["0x233010de", "0x20B010DE"], "mig-enabled": True, "mig-devices": {}},
])
def test_good_entries(entry):
    assert config.entry_errors("c", 0, entry) == []


@pytest.mark.parametrize("entry, message", [
    ("all", "mig-configs.c[0]: each entry must be a mapping with devices, mig-enabled and mig-devices, not str"),
    ({"mig-enabled": False}, "mig-configs.c[0]: 'devices' is required: all, or a list of GPU indexes"),
    ({"devices": "some", "mig-enabled": False}, "devices must be 'all' or a non-empty list of GPU indexes"),
    ({"devices": [], "mig-enabled": False}, "devices must be 'all' or a non-empty list of GPU indexes"),
    ({"devices": [True], "mig-enabled": False}, "devices must be 'all' or a non-empty list of GPU indexes"),
    ({"devices": [-1], "mig-enabled": False}, "devices must be 'all' or a non-empty list of GPU indexes"),
    ({"devices": [0, 0], "mig-enabled": False}, "devices lists an index twice: [0, 0]"),
    ({"devices": "all", "mig-enabled": "yes"}, "mig-enabled must be true or false, not 'yes'"),
    ({"devices": "all", "mig-enabled": False, "gpus": 2}, "unknown key(s) gpus (known: devices, device-filter"),
    ({"devices": "all", "device-filter": "0x2330", "mig-enabled": False}, "device-filter takes PCI device ids"),
    ({"devices": "all", "device-filter": [], "mig-enabled": False}, "device-filter takes PCI device ids"),
    ({"devices": "all", "mig-enabled": True, "mig-devices": ["1g.10gb"]}, "mig-devices must map profile names to counts"),
    ({"devices": "all", "mig-enabled": True, "mig-devices": {"big": 1}}, "'big' is not a MIG profile name"),
    ({"devices": "all", "mig-enabled": True, "mig-devices": {"1c.3g.40gb": 1}},
     "1c.3g.40gb: compute-instance profiles (NcM.Ng.XXgb) are not supported"),
    ({"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": -1}}, "the count of 1g.10gb must be a whole number >= 0"),
    ({"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": True}}, "the count of 1g.10gb must be a whole number"),
    ({"devices": "all", "mig-enabled": True, "mig-devices": {"1g.10gb": "2"}}, "the count of 1g.10gb must be a whole number"),
    ({"devices": "all", "mig-enabled": False, "mig-devices": {"1g.10gb": 1}}, "mig-devices need mig-enabled: true"),
])
def test_each_mistake_in_an_entry_is_named(entry, message):
    errors = config.entry_errors("c", 0, entry)
    assert len(errors) == 1 and message in errors[0], errors
    assert errors[0].startswith("mig-configs.c[0]: ")


@pytest.mark.parametrize("document, message", [
    (None, "the MIG config must be a mapping with version: v1 and mig-configs, not NoneType"),
    ([], "the MIG config must be a mapping with version: v1 and mig-configs, not list"),
    ({"mig-configs": {"c": [{"devices": "all", "mig-enabled": False}]}}, "version must be v1 (the mig-parted format), not None"),
    ({"version": "v2", "mig-configs": {"c": [{"devices": "all", "mig-enabled": False}]}}, "version must be v1"),
    ({"version": "v1"}, "mig-configs must map config names to lists of entries"),
    ({"version": "v1", "mig-configs": {}}, "mig-configs must map config names to lists of entries"),
    ({"version": "v1", "mig-configs": {"c": []}}, "mig-configs.c must be a non-empty list of entries"),
    ({"version": "v1", "mig-configs": {"c": {"devices": "all"}}}, "mig-configs.c must be a non-empty list of entries"),
    (dict(doc({"devices": "all", "mig-enabled": False}), extra=1), "unknown top-level key(s): extra"),
])
def test_each_mistake_in_a_document_is_named(document, message):
    errors = config.config_errors(document)
    assert len(errors) == 1 and message in errors[0], errors


def test_a_document_collects_the_errors_of_every_entry():
    document = {"version": "v1", "mig-configs": {
        "a": [{"devices": "all", "mig-enabled": False}, {"devices": [], "mig-enabled": False}],
        "b": [{"devices": "all", "mig-enabled": "on"}]}}
    errors = config.config_errors(document)
    assert [e.split(":")[0] for e in errors] == ["mig-configs.a[1]", "mig-configs.b[0]"]


@pytest.mark.parametrize("document, name, message", [
    (doc({"devices": "all", "mig-enabled": False}), "other", "no MIG config named 'other' (the file has: c)"),
    (doc({"devices": "all", "mig-enabled": 1}), "c", "mig-configs.c[0]: mig-enabled must be true or false"),
])
def test_select_refuses_a_wrong_document_or_name(document, name, message):
    with pytest.raises(config.ConfigError) as err:
        config.select(document, name)
    assert message in str(err.value)


def test_select_returns_the_entries():
    entries = [{"devices": "all", "mig-enabled": False}]
    assert config.select(doc(*entries), "c") == entries


@pytest.mark.parametrize("entries, chosen", [
    ([{"devices": "all", "mig-enabled": False}], {0: 0, 1: 0, 2: 0, 3: 0}),
    ([{"devices": [1, 3], "mig-enabled": False}], {1: 0, 3: 0}),
    ([{"devices": "all", "device-filter": "0x233010de", "mig-enabled": True},
      {"devices": "all", "device-filter": ["0X20B010DE"], "mig-enabled": False}], {0: 0, 1: 0, 2: 1, 3: 1}),
    ([{"devices": [0, 2], "device-filter": "0x233010DE", "mig-enabled": False}], {0: 0}),
    # a filter no GPU matches on `all` selects nothing, and is no error (another node's model)
    ([{"devices": "all", "device-filter": "0x26B510DE", "mig-enabled": False}], {}),
])
def test_assign_selects_gpus_per_entry(entries, chosen):
    assigned = config.assign("c", entries, GPUS)
    assert {gpu: index for gpu, (index, _entry) in assigned.items()} == chosen


@pytest.mark.parametrize("entries, message", [
    ([{"devices": [0, 9], "mig-enabled": False}], "mig-configs.c[0]: the node has no GPU 9 (it has 0, 1, 2, 3)"),
    ([{"devices": [2, 3], "device-filter": "0x233010DE", "mig-enabled": False}],
     "mig-configs.c[0]: none of GPUs 2, 3 has PCI device id 0x233010DE"),
    ([{"devices": "all", "mig-enabled": False}, {"devices": [1], "mig-enabled": True}],
     "GPU 1 is selected by mig-configs.c[0] and mig-configs.c[1]: give each GPU one entry"),
])
def test_assign_refuses_what_the_node_cannot_take(entries, message):
    with pytest.raises(config.ConfigError) as err:
        config.assign("c", entries, GPUS)
    assert message in str(err.value)


def test_a_node_without_gpus_says_so():
    with pytest.raises(config.ConfigError, match=r"the node has no GPU 0 \(it has none\)"):
        config.assign("c", [{"devices": [0], "mig-enabled": False}], [])

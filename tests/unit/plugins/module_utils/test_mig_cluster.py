# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""The node labels of a MIG change in the cluster (NVIDIA MIG manager semantics): pausing the
deployed operands, restoring exactly what was paused, the state label, and guarded patches that
fail instead of overwriting a label someone changed meanwhile."""

from __future__ import annotations

import pytest

from ansible_collections.gpuops.nvidia.plugins.module_utils import mig_cluster
from ansible_collections.gpuops.nvidia.plugins.module_utils.node_labels import apply_patch

DP, GFD, DCGM = ("nvidia.com/gpu.deploy." + o for o in ("device-plugin", "gpu-feature-discovery", "dcgm-exporter"))


def node(labels):
    return {"metadata": {"labels": dict(labels)}}


def labels_after(labels, patch):
    return apply_patch(node(labels), patch)["metadata"]["labels"]


def test_pause_and_restore_give_back_exactly_what_was_there():
    before = {DP: "true", GFD: "false", "kubernetes.io/hostname": "n1", mig_cluster.CONFIG_LABEL: "all-balanced"}
    patch, paused = mig_cluster.pause(before)
    during = labels_after(before, patch)
    # deployed operands are paused (the exporter had no label: deployed by default), an admin's
    # "false" stays
    assert during[DP] == during[DCGM] == mig_cluster.PAUSED and during[GFD] == "false"
    assert paused == {DP: "true", DCGM: None}
    after = labels_after(during, mig_cluster.restore(during, paused))
    assert after == before
    assert mig_cluster.leftovers(after) == []


def test_a_label_changed_during_the_change_is_left_alone():
    before = {DP: "true", DCGM: "true"}
    patch, paused = mig_cluster.pause(before)
    during = labels_after(before, patch)
    during[DP] = "false"  # an admin turned the plugin off meanwhile
    after = labels_after(during, mig_cluster.restore(during, paused))
    assert after == {DP: "false", DCGM: "true"}


def test_the_pause_patch_fails_when_a_label_moved_since_it_was_read():
    patch, _paused = mig_cluster.pause({DP: "true"})
    with pytest.raises(ValueError, match="test failed"):
        apply_patch(node({DP: "false"}), patch)


def test_restoring_twice_changes_nothing_the_second_time():
    before = {DP: "true"}
    patch, paused = mig_cluster.pause(before, operands=("device-plugin",))
    during = labels_after(before, patch)
    after = labels_after(during, mig_cluster.restore(during, paused))
    assert mig_cluster.restore(after, paused) == []


def test_leftovers_name_the_paused_labels_of_a_run_that_died():
    assert mig_cluster.leftovers({DP: mig_cluster.PAUSED, GFD: "true", DCGM: mig_cluster.PAUSED}) == [DCGM, DP]


def test_state_label():
    assert mig_cluster.state({}, "pending") == [
        {"op": "add", "path": "/metadata/labels/nvidia.com~1mig.config.state", "value": "pending"}]
    labels = labels_after({}, mig_cluster.state({}, "pending"))
    labels = labels_after(labels, mig_cluster.state(labels, "success"))
    assert labels == {mig_cluster.STATE_LABEL: "success"}
    assert mig_cluster.state(labels, "success") == []
    with pytest.raises(ValueError, match="'done' is not a MIG config state"):
        mig_cluster.state(labels, "done")


def test_the_label_wins_over_the_inventory():
    assert mig_cluster.wanted_config({mig_cluster.CONFIG_LABEL: "all-1g.10gb"}, "all-balanced") == "all-1g.10gb"
    assert mig_cluster.wanted_config({}, "all-balanced") == "all-balanced"
    assert mig_cluster.wanted_config({mig_cluster.CONFIG_LABEL: ""}, "all-balanced") == "all-balanced"

# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""k8s_render: one file per object under its role's header, read back as YAML; Secrets never
written; the role's stale files removed and every other file left as it was; check mode, diff,
idempotence; bad input refused before any file is written."""
from __future__ import annotations

import os
import stat

import pytest
import yaml

from ansible_collections.gpuops.nvidia.plugins.modules import k8s_render

HEADER = "# gpuops.nvidia.device_plugin: rendered, not applied (gpuops_render_dir)"
NAMESPACE = {"apiVersion": "v1", "kind": "Namespace", "metadata": {"name": "gpu-operands"}}
DAEMONSET = {"apiVersion": "apps/v1", "kind": "DaemonSet",
             "metadata": {"name": "nvidia-device-plugin", "namespace": "gpu-operands"},
             "spec": {"template": {"spec": {"containers": [{"name": "plugin", "args": ["--fail-on-init-error=false"],
                                                            "env": [{"name": "NOTE", "value": "a\nb: c"}]}]}}}}
SECRET = {"apiVersion": "v1", "kind": "Secret", "metadata": {"name": "mirror-pull", "namespace": "gpu-operands"},
          "data": {".dockerconfigjson": "c2VjcmV0"}}
# the file names: rank, kind, namespace, name (objects.render_name)
NS_FILE = "00-namespace-gpu-operands.yaml"
DS_FILE = "40-daemonset-gpu-operands-nvidia-device-plugin.yaml"


def args(directory, objects, owner="device_plugin", **more):
    return dict({"objects": objects, "directory": str(directory), "owner": owner}, **more)


def read(path):
    with open(path, encoding="utf-8") as handle:
        first, rest = handle.read().split("\n", 1)
    return first, list(yaml.safe_load_all(rest))


def listing(directory):
    return {name: (directory / name).read_bytes() for name in sorted(os.listdir(directory))}


def test_one_file_per_object_under_the_header_and_no_secret(tmp_path, run_module):
    out = tmp_path / "render"
    failed, result = run_module(k8s_render.main, args(out, [NAMESPACE, DAEMONSET, SECRET]))
    assert not failed, result
    assert sorted(os.listdir(out)) == [NS_FILE, DS_FILE]
    assert result["changed"] and result["written"] == [NS_FILE, DS_FILE] and result["not_rendered"] == ["mirror-pull"]
    for name, obj in ((NS_FILE, NAMESPACE), (DS_FILE, DAEMONSET)):
        first, docs = read(out / name)
        assert first == HEADER and docs == [obj]
        assert stat.S_IMODE(os.stat(out / name).st_mode) == 0o644
    # the object's own key order, block style
    text = (out / DS_FILE).read_text()
    assert text.index("apiVersion:") < text.index("kind:") < text.index("metadata:") < text.index("spec:")
    assert "c2VjcmV0" not in "".join(p.read_text() for p in out.iterdir())


def test_again_changes_nothing_and_check_mode_writes_nothing(tmp_path, run_module):
    out = tmp_path / "render"
    failed, result = run_module(k8s_render.main, args(out, [NAMESPACE]), check_mode=True, diff=True)
    assert not failed and result["changed"] and result["written"] == [NS_FILE]
    assert not out.exists()
    assert result["diff"][0]["before"] == "" and result["diff"][0]["after"].startswith(HEADER)
    run_module(k8s_render.main, args(out, [NAMESPACE, DAEMONSET]))
    before = {name: os.stat(out / name).st_mtime_ns for name in os.listdir(out)}
    failed, result = run_module(k8s_render.main, args(out, [NAMESPACE, DAEMONSET]), diff=True)
    assert not failed and not result["changed"] and result["written"] == [] and result["diff"] == []
    assert {name: os.stat(out / name).st_mtime_ns for name in os.listdir(out)} == before


def test_stale_files_of_the_role_go_and_every_other_file_stays(tmp_path, run_module):
    out = tmp_path / "render"
    run_module(k8s_render.main, args(out, [NAMESPACE, DAEMONSET]))
    (out / "kustomization.yaml").write_text("resources: []\n")
    (out / "99-by-hand.yaml").write_text("# written by hand\n---\nkind: ConfigMap\n")
    run_module(k8s_render.main, args(out, [{"kind": "ConfigMap", "metadata": {"name": "other"}}], owner="dcgm_exporter"))
    others = {n: b for n, b in listing(out).items() if n not in (NS_FILE, DS_FILE)}
    failed, result = run_module(k8s_render.main, args(out, [NAMESPACE]), diff=True)
    assert not failed and result["removed"] == [DS_FILE] and result["written"] == []
    [diff] = result["diff"]
    assert (diff["before_header"], diff["after_header"], diff["after"]) == (
        str(out / DS_FILE), "%s (absent)" % (out / DS_FILE), "")
    assert diff["before"].startswith(HEADER) and "name: nvidia-device-plugin" in diff["before"]
    assert sorted(listing(out)) == sorted(set(others) | {NS_FILE})
    assert {n: b for n, b in listing(out).items() if n != NS_FILE} == others
    # state absent: every file of the role goes, the others' stay
    failed, result = run_module(k8s_render.main, args(out, [NAMESPACE], state="absent"))
    assert not failed and result["removed"] == [NS_FILE] and listing(out) == others


@pytest.mark.parametrize("objects, existing, message", [
    ([DAEMONSET, dict(DAEMONSET, spec={})], {}, "two objects would be written to " + DS_FILE),
    ([{"kind": "ConfigMap", "metadata": {}}], {}, "an object without kind or metadata.name cannot be rendered"),
    ([NAMESPACE, DAEMONSET], {DS_FILE: "kind: DaemonSet\n"},
     DS_FILE + " in %s is not rendered by gpuops.nvidia.device_plugin: nothing was written; move it away"),
])
def test_bad_input_is_refused_before_any_file_is_written(tmp_path, run_module, objects, existing, message):
    out = tmp_path / "render"
    out.mkdir()
    for name, text in existing.items():
        (out / name).write_text(text)
    failed, result = run_module(k8s_render.main, args(out, objects))
    assert failed and (message % out if "%s" in message else message) in result["msg"], result["msg"]
    assert listing(out) == {name: text.encode() for name, text in existing.items()}


def test_a_render_directory_that_is_a_file_or_an_owner_that_is_a_path_is_refused(tmp_path, run_module):
    (tmp_path / "file").write_text("x")
    failed, result = run_module(k8s_render.main, args(tmp_path / "file", [NAMESPACE]))
    assert failed and "is a file: give gpuops_render_dir a directory" in result["msg"]
    failed, result = run_module(k8s_render.main, args(tmp_path / "render", [NAMESPACE], owner="../x"))
    assert failed and "is no role name" in result["msg"] and not (tmp_path / "render").exists()

# -*- coding: utf-8 -*-
# Copyright: (c) 2026, gpuops.nvidia contributors
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""Render mode's writer: a role's Kubernetes objects as files in one directory, one object per
file (objects.render_name), each under a header naming the role that rendered it; the files a
role rendered before and no longer produces removed, every other file of the directory left
alone; Secrets never written. One call for every object of a role, written through the one safe
writer (host/files: atomic, owner and mode kept)."""

from __future__ import annotations

import os

__metaclass__ = type

from ansible_collections.gpuops.nvidia.plugins.module_utils.host import files
from ansible_collections.gpuops.nvidia.plugins.module_utils.k8s import objects

try:
    import yaml
    HAS_YAML = True
except ImportError:  # pragma: no cover - PyYAML comes with ansible-core
    HAS_YAML = False


class RenderError(Exception):
    """Input that cannot be rendered; the message names it and the fix."""


def header(owner: str) -> str:
    return "# gpuops.nvidia.%s: rendered, not applied (gpuops_render_dir)" % owner


def text_of(obj: dict, owner: str) -> str:
    """The file's text: the header, a document marker, the object as block YAML in its own key order."""
    body = yaml.dump(obj, Dumper=yaml.SafeDumper, indent=2, allow_unicode=True, default_flow_style=False,
                     sort_keys=False)
    return "%s\n---\n%s" % (header(owner), body)


def _texts(directory: str) -> dict:
    """{name: text} of the directory's .yaml files (None for one that is not readable UTF-8 text)."""
    if not os.path.isdir(directory):
        return {}
    out = {}
    for name in sorted(n for n in os.listdir(directory) if n.endswith(".yaml")):
        try:
            out[name] = files.read_text(os.path.join(directory, name), "rendered file")
        except files.FileError:
            out[name] = None
    return out


def plan(objects_list: list, directory: str, owner: str, state: str) -> dict:
    """{write: {name: (before, after)}, remove: {name: before}, keep: [names], not_rendered: [names]}:
    what rendering OBJECTS_LIST of OWNER into DIRECTORY changes. Fails (RenderError) before anything
    is written when two objects would share a file or a file of that name is not OWNER's."""
    if not owner or "/" in owner or "\n" in owner:
        raise RenderError("owner %r is no role name: give the role's name (for example device_plugin)" % owner)
    if os.path.exists(directory) and not os.path.isdir(directory):
        raise RenderError("the render directory %s is a file: give gpuops_render_dir a directory" % directory)
    secrets, wanted = [], {}
    for obj in objects_list if state == "present" else []:
        if not isinstance(obj, dict) or not obj.get("kind") or not (obj.get("metadata") or {}).get("name"):
            raise RenderError("an object without kind or metadata.name cannot be rendered: %r" % (obj,))
        if obj["kind"] == "Secret":
            secrets.append(obj["metadata"]["name"])
            continue
        name = objects.render_name(obj)
        if name in wanted:
            raise RenderError("two objects would be written to %s (%s %s twice): give each object its own "
                              "name" % (name, obj["kind"], obj["metadata"]["name"]))
        wanted[name] = text_of(obj, owner)
    present = _texts(directory)
    # (the files OWNER rendered: their first line is its header)
    ours = {n for n, text in present.items() if text is not None and text.split("\n", 1)[0] == header(owner)}
    foreign = sorted(n for n in wanted if n in present and n not in ours)
    if foreign:
        raise RenderError("%s in %s %s not rendered by gpuops.nvidia.%s: nothing was written; move %s away or "
                          "render into another directory" % (", ".join(foreign), directory,
                                                             "is" if len(foreign) == 1 else "are", owner,
                                                             "it" if len(foreign) == 1 else "them"))
    write = {name: (present.get(name), after) for name, after in wanted.items() if present.get(name) != after}
    remove = {n: present[n] for n in sorted(ours - set(wanted))}
    return {"write": write, "remove": remove, "keep": sorted(wanted), "not_rendered": sorted(secrets)}


def render(module, params: dict) -> dict:
    """Module service: plan, then (not in check mode) write and remove; the result with the
    files' names, and with --diff each changed file's before and after."""
    if not HAS_YAML:
        raise RenderError("PyYAML is missing on the controller: install it in ansible-core's Python")
    directory, owner = params["directory"], params["owner"]
    todo = plan(params["objects"], directory, owner, params["state"])
    changes = sorted(todo["write"]) + sorted(todo["remove"])
    for name in changes:
        problem = files.check_writable(os.path.join(directory, name))
        if problem:
            raise RenderError("cannot write the render directory %s: %s; nothing was written" % (directory, problem))
    if not module.check_mode:
        if todo["write"] and not os.path.isdir(directory):
            os.makedirs(directory, mode=0o755)
        for name, (_before, after) in sorted(todo["write"].items()):
            files.write_atomic(module, os.path.join(directory, name), after, mode=0o644)
        for name in todo["remove"]:
            os.remove(os.path.join(directory, name))
    result = {"changed": bool(changes), "written": sorted(todo["write"]), "removed": sorted(todo["remove"]),
              "files": todo["keep"], "not_rendered": todo["not_rendered"], "directory": directory}
    if module._diff:  # pylint: disable=protected-access
        result["diff"] = [files.diff_entry(os.path.join(directory, n), before, after)
                          for n, (before, after) in sorted(todo["write"].items())] + [
            files.diff_entry(os.path.join(directory, n), before, None) for n, before in todo["remove"].items()]
    return result

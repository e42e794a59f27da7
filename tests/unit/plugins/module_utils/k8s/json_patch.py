# -*- coding: utf-8 -*-
# GNU General Public License v3.0+ (see LICENSE or https://www.gnu.org/licenses/gpl-3.0.txt)
"""A JSON Patch (RFC 6902) applier for the tests: the node label and MIG plans are JSON patches
that kubernetes.core.k8s_json_patch sends to the API server, so the tests apply them to a Node
dict as the API server would (the collection itself never applies a patch). Not a test module."""
from __future__ import annotations

import copy
import json
import re


def _tokens(path: str) -> list:
    if path == "":
        return []
    if not path.startswith("/"):
        raise ValueError("JSON pointer %r must be empty or start with '/'" % path)
    return [token.replace("~1", "/").replace("~0", "~") for token in path[1:].split("/")]


def _same(left, right) -> bool:
    """JSON equality: booleans are not numbers, objects and arrays compare member by member."""
    if isinstance(left, bool) or isinstance(right, bool):
        return isinstance(left, bool) and isinstance(right, bool) and left == right
    if isinstance(left, (int, float)) and isinstance(right, (int, float)):
        return left == right
    if isinstance(left, dict) and isinstance(right, dict):
        return left.keys() == right.keys() and all(_same(left[key], right[key]) for key in left)
    if isinstance(left, list) and isinstance(right, list):
        return len(left) == len(right) and all(_same(first, second) for first, second in zip(left, right))
    return type(left) is type(right) and left == right


def _index(container: list, token: str, path: str, allow_end: bool) -> int:
    if allow_end and token == "-":
        return len(container)
    if not re.match(r"^(0|[1-9][0-9]*)$", token):
        raise ValueError("%s: %r is not an array index" % (path, token))
    index = int(token)
    if index > len(container) or (index == len(container) and not allow_end):
        raise ValueError("%s: index %d is out of range" % (path, index))
    return index


def _resolve(doc, tokens: list, path: str):
    node = doc
    for token in tokens:
        if isinstance(node, dict):
            if token not in node:
                raise ValueError("%s: no member %r" % (path, token))
            node = node[token]
        elif isinstance(node, list):
            node = node[_index(node, token, path, False)]
        else:
            raise ValueError("%s: %r is inside a value that is not an object or an array" % (path, token))
    return node


def apply_patch(doc, ops: list):
    """Apply a JSON Patch (RFC 6902: add, remove, replace and test on objects and arrays) to a
    copy of ``doc`` and return the copy; ``doc`` is left as it is. ValueError when an operation
    is unknown, its path does not exist, or a test fails."""
    result = copy.deepcopy(doc)
    for op in ops:
        name, path = op.get("op"), op.get("path")
        if not isinstance(path, str):
            raise ValueError("patch operation %r has no path" % (op,))
        if name in ("add", "replace", "test") and "value" not in op:
            raise ValueError("patch operation %r has no value" % (op,))
        tokens = _tokens(path)
        if name == "test":
            if not _same(_resolve(result, tokens, path), op["value"]):
                raise ValueError("test failed: %s is not %s" % (path, json.dumps(op["value"], sort_keys=True)))
            continue
        if name not in ("add", "remove", "replace"):
            raise ValueError("unsupported patch operation %r" % (name,))
        value = copy.deepcopy(op.get("value"))
        if not tokens:
            if name == "remove":
                raise ValueError("cannot remove the whole document")
            result = value
            continue
        parent, last = _resolve(result, tokens[:-1], path), tokens[-1]
        if isinstance(parent, dict):
            if name != "add" and last not in parent:
                raise ValueError("%s: no member %r" % (path, last))
            if name == "remove":
                del parent[last]
            else:
                parent[last] = value
        elif isinstance(parent, list):
            index = _index(parent, last, path, name == "add")
            if name == "add":
                parent.insert(index, value)
            elif name == "remove":
                del parent[index]
            else:
                parent[index] = value
        else:
            raise ValueError("%s: the parent is not an object or an array" % path)
    return result
